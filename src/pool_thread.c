/* SPDX-License-Identifier: MIT */
/*
 * pool_thread.c - the life of a pool's worker threads, as one state
 * machine: start, park (with the keep-alive), retire, grow, stop.
 *
 * --- A worker's life, demystified ---
 * Each worker thread has a slot: its batch, its index (the hooks' index
 * and its name's number), its handle. A slot's state changes only under
 * `mu`:
 *
 *   FREE    --start-------------------------------------------> LIVE
 *   LIVE    --setup refused (pin, on_thread_start)------------> EXITED
 *   LIVE    --shut down and drained, or STOP: stop hook-------> EXITED
 *   LIVE    --parked keep_alive_ns, serving > core: retire----> RETIRING
 *   LIVE    --idle, a resize left it above the cap: shed------> RETIRING
 *   RETIRING --stop hook; no grow owed------------------------> EXITED
 *   RETIRING --stop hook; grow owed: successor in this slot---> LIVE
 *   EXITED  --joined by the next start here, or by destroy----> FREE
 *
 * Counts, under mu: `live` is the LIVE slots, `retiring` the RETIRING
 * ones. A thread leaves `live` when it decides to retire, not when it
 * exits, so no two idle threads both retire below the core count, and
 * growth counts the threads that will still serve. The thread that takes
 * `live` and `retiring` both to 0 (only a shutdown lets a core thread
 * leave) marks the pool terminated. "Serving" is `live` less `blocked`,
 * the workers in a blocking region (pool_block.c), which count themselves
 * without `mu`; a worker in a region never retires (it is in a task).
 *
 * Sizes and the cap (since 0.3.0): `want_core` and `want_max` are the
 * sizes now (serex_pool_resize writes them under mu). A start may come
 * while `live` is below the cap, serex__pool_cap: want_max, plus one per
 * blocked worker and per worker the watchdog takes as stuck
 * (pool_watchdog.c), at most max_blocking more. The slots are made in
 * chunks that never move (a worker holds its slot): chunk 0 at create,
 * one slot per max_threads; more under mu when a start finds none free
 * below want_max + max_blocking, or when a resize raises max_threads. A
 * start after a shutdown (not a STOP) is let through while a worker
 * blocks or is stuck and some worker still lives: the task it waits for
 * may still be queued; once no worker lives the pool may be terminated,
 * and nothing starts again.
 *
 * Growing: a submission that finds no spinner and no sleeper on an
 * elastic pool starts a thread (serex__pool_threads_grow), if `live` is
 * below max_threads. It needs a slot that is FREE or EXITED; the slots are
 * max_threads, so when `live` < max and none is free, some are RETIRING:
 * threads that left `live` and run their stop hooks. The start is then
 * owed (`grow_owed`), and the first retiring thread to finish its stop hook
 * pays it: it gives its own slot to a new thread at once and, as it cannot
 * join itself, leaves its handle in `reap` for the next such hand-over or
 * for destroy to join. Who wins the race between a submission and a
 * retiring thread: `mu` orders them. If the submission's grow comes first
 * it sees the slot RETIRING and owes the start; the retiring thread then
 * sees the debt when it leaves. If the thread leaves first its slot is
 * EXITED, and the grow starts a thread there (joining the old one, which
 * has made its last touch). Either way the task gets a thread: without the
 * debt, a task submitted while every live worker was busy and a thread
 * retired waited for a busy worker, and tasks that wait on each other
 * deadlocked (tests/test_pool_life.c).
 *
 * Parking and the keep-alive: a parked worker waits for a token (pool_idle.c's
 * park handshake) with, on an elastic pool (want_max above want_core) or
 * while it is surplus (more serve than the core count: a compensating
 * worker, a resize down), a deadline keep_alive_ns away; on a fixed pool
 * at its size, none (an idle fixed pool makes no wake-up). At the
 * deadline it retires if more serve than the core count;
 * else it is a core thread for now, and the deadline moves keep_alive_ns
 * on (a wake-up per keep-alive period, so that it may still retire later
 * if the pool grows past it again while it sleeps, as pool.h promises of
 * any idle thread). Without the move, every timed wait after the first
 * deadline returned at once without giving up `mu`: a core burnt, and
 * everything that takes `mu` (an execute that wakes a worker, await)
 * blocked until work came.
 *
 * Shedding: a resize that leaves more workers live than the cap sets
 * `shedding`; a worker about to park then retires at once (the spinner
 * first gives up its flag and looks once more), until `live` is within
 * the cap. Resize wakes every parked worker so each looks: at shedding,
 * and at its deadline (a fixed pool grown elastic now wants one).
 *
 * Stopping: shutdown lets workers leave once the queue is drained; a
 * worker runs on_thread_stop after its last task, then makes its last
 * touch of the pool under `mu` (thread_gone). Every thread ever started
 * is joined: by the next start in its slot, by the next hand-over (the
 * reap), or by destroy.
 *
 * --- Checked by a model ---
 * tests/model/pool_threads.pml is this machine in Promela: a core worker
 * and an extra one that park, time out, retire and run a stop hook, a
 * submitter whose task waits for a worker, and grow racing the retire. It
 * checks that every submitted task gets a thread, that live never passes
 * max nor drops below core before shutdown, that a parked worker past its
 * deadline never waits holding `mu`, and that everything ends; planted
 * mutations (no debt, no deadline move) are each caught. With BLOCKING
 * it is a fixed pool with max_blocking 1 whose first task waits for the
 * third inside a region (the count, the cap, the start after a
 * shutdown); mutations (no wake-up at begin, a cap without the blocked,
 * no start after a shutdown) are caught. Shedding is not modelled.
 */
#include <stdio.h> /* snprintf for thread names */

#include "alloc_internal.h"
#include "common_internal.h"
#include "executor_internal.h"
#include "park_internal.h"
#include "pool_types_internal.h"

/* --- slots --- */

/* Slots of chunk @k: chunk 0 the create's, then SLOT_EXTRA << (k - 1). */
static unsigned slots_in_chunk(struct pool *p, unsigned k)
{
    return k == 0 ? p->nslots0 : (1u << SLOT_EXTRA_LOG) << (k - 1);
}

/* Makes the next chunk. Under mu, or at create. */
static int slots_add_chunk(struct pool *p)
{
    unsigned k = p->nchunks, n, first;
    struct slot *c;
    struct serex__task_rec *claims;

    if (k == SLOT_CHUNKS)
        return SEREX_ENOMEM; /* 2^31 slots past chunk 0: never */
    n = slots_in_chunk(p, k);
    /* relaxed: written under mu only, which we hold (or create) */
    first = atomic_load_explicit(&p->nslots, memory_order_relaxed);
    /* n < 2^32 and the factors are small: the products fit 64 bits */
    if (n > UINT32_MAX - first ||
        (uint64_t)n * (SEREX__RUNQ_CAP + 1) * sizeof *claims > SIZE_MAX ||
        (uint64_t)n * sizeof *c > SIZE_MAX)
        return SEREX_ENOMEM; /* no count or size to hold them */
    c = serex__calloc_aligned(SEREX__CACHELINE, (size_t)n * sizeof *c);
    /* shutdown_now's room for each slot's run queue and next task: it
     * then hands back without allocating (normal_hand_back) */
    claims = c == NULL ? NULL
                       : serex__alloc((size_t)n * (SEREX__RUNQ_CAP + 1) *
                                      sizeof *claims);
    if (claims == NULL) {
        serex__free(c);
        return SEREX_ENOMEM;
    }
    for (unsigned i = 0; i < n; i++) {
        c[i].p = p;
        c[i].index = first + i;
        c[i].claim = &claims[(size_t)i * (SEREX__RUNQ_CAP + 1)];
    }
    p->chunk[k] = c;
    p->claims[k] = claims;
    p->nchunks = k + 1;
    /* release: the chunk before the count (serex__pool_nslots) */
    atomic_store_explicit(&p->nslots, first + n, memory_order_release);
    return SEREX_OK;
}

int serex__pool_slots_reserve(struct pool *p, unsigned want)
{
    int rc = SEREX_OK;

    /* relaxed: written under mu only, which we hold (or create) */
    while (rc == SEREX_OK &&
           atomic_load_explicit(&p->nslots, memory_order_relaxed) < want)
        rc = slots_add_chunk(p);
    return rc;
}

void serex__pool_slots_free(struct pool *p)
{
    for (unsigned k = 0; k < SLOT_CHUNKS; k++) {
        serex__free(p->claims[k]);
        serex__free(p->chunk[k]);
    }
}

/* --- starting --- */

/* Marks the pool terminated if no thread is left. Under mu. */
static void thread_check_terminated(struct pool *p)
{
    /* relaxed: live changes under mu, which we hold */
    if (atomic_load_explicit(&p->live, memory_order_relaxed) != 0 ||
        p->retiring != 0)
        return;
    /* release: with mu, every worker's writes (tasks, stop hooks) before
     * an await that reads the flag without mu (pool_await's look) */
    atomic_store_explicit(&p->terminated, true, memory_order_release);
    serex__cond_broadcast(&p->term_cv);
}

/*
 * The most slots the pool may need: a worker for each of max_threads and
 * max_blocking (sizes now). Under mu.
 */
static unsigned slots_limit(struct pool *p)
{
    /* relaxed: written under mu, which we hold */
    uint64_t n = (uint64_t)atomic_load_explicit(&p->want_max,
                                                memory_order_relaxed) +
                 p->max_blocking;

    return n > UINT32_MAX ? UINT32_MAX : (unsigned)n;
}

/*
 * A slot for a new thread: FREE, or EXITED (joined here); else one of a
 * new chunk, below the limit. NULL, with *@rc SEREX_EFULL (every slot is
 * LIVE or RETIRING) or SEREX_ENOMEM. Under mu.
 */
static struct slot *thread_slot(struct pool *p, int *rc)
{
    /* relaxed: written under mu, which we hold */
    unsigned n = atomic_load_explicit(&p->nslots, memory_order_relaxed);

    for (unsigned i = 0; i < n; i++) {
        struct slot *s = serex__pool_slot(p, i);

        if (s->state == SLOT_EXITED) {
            /* It marked itself exited as its last step under mu: this join
             * only waits for it to return. */
            serex__thread_join(s->thread);
            s->state = SLOT_FREE;
        }
        if (s->state == SLOT_FREE)
            return s;
    }
    *rc = SEREX_EFULL;
    if (n >= slots_limit(p))
        return NULL;
    *rc = slots_add_chunk(p);
    return *rc == SEREX_OK ? serex__pool_slot(p, n) : NULL;
}

/*
 * Starts a thread in a free slot; @report: create waits for its setup's
 * verdict. SEREX_EFULL when every slot is LIVE or RETIRING. Under mu.
 */
static int thread_start(struct pool *p, bool report)
{
    struct serex__thread_opts opts = {.stack_size = p->stack_size};
    int rc = SEREX_OK;
    struct slot *s = thread_slot(p, &rc);

    if (s == NULL)
        return rc;
    s->report = report;
    /* The pool runs its own hooks (serex__pool_thread_setup): its stop hook
     * must come before the thread stops counting, so the thread layer's
     * are unused. */
    rc = serex__thread_start_opts(&s->thread, serex__pool_worker_main, s,
                                  &opts);
    if (rc == SEREX_OK) {
        s->state = SLOT_LIVE;
        /* relaxed: under mu; lock-free readers only use it as a hint */
        atomic_fetch_add_explicit(&p->live, 1, memory_order_relaxed);
        if (report)
            p->unreported++;
    }
    return rc;
}

/*
 * Whether a start may come now: below the cap (max_threads, plus the
 * compensation of blocked or stuck workers: serex__pool_cap), and not shut
 * down; after a shutdown (not a STOP) only while a worker blocks or is
 * taken as stuck, which may wait for a task still queued (pool_block.c),
 * and only while a worker lives: once none does the pool may be
 * terminated, and nothing may start again (destroy joins what it saw).
 * Under mu.
 */
static bool thread_may_grow(struct pool *p)
{
    /* relaxed (all): under mu, where live changes, or a flag the new
     * thread re-checks; a region that begins after our look makes its own
     * look */
    uint32_t st = atomic_load_explicit(&p->state, memory_order_relaxed);

    if ((st & ST_STOP) ||
        ((st & ST_SHUTDOWN) &&
         (atomic_load_explicit(&p->live, memory_order_relaxed) == 0 ||
          (atomic_load_explicit(&p->blocked, memory_order_relaxed) == 0 &&
           atomic_load_explicit(&p->starved, memory_order_relaxed) == 0))))
        return false;
    /* relaxed: live changes under mu, which we hold */
    return atomic_load_explicit(&p->live, memory_order_relaxed) <
           serex__pool_cap(p);
}

void serex__pool_threads_grow(struct pool *p)
{
    /* relaxed: a hint; re-checked under mu */
    if (atomic_load_explicit(&p->live, memory_order_relaxed) >=
        serex__pool_cap(p))
        return;
    serex__mutex_lock(&p->mu);
    /* A refusal for want of memory or threads: the live workers run the
     * task. For want of a slot: a retiring thread starts it (the essay). */
    if (thread_may_grow(p) && thread_start(p, false) == SEREX_EFULL)
        p->grow_owed = true;
    serex__mutex_unlock(&p->mu);
}

/* --- parking and retiring --- */

/* Workers that serve (live, not in a blocking region). Under mu. */
static unsigned thread_serving(struct pool *p)
{
    /* relaxed (both): live changes under mu, which we hold; blocked is
     * counted by the workers themselves (pool_block.c), never above live
     * (a worker counts in it only while it lives) */
    unsigned live = atomic_load_explicit(&p->live, memory_order_relaxed);
    unsigned blocked = atomic_load_explicit(&p->blocked, memory_order_relaxed);

    return blocked < live ? live - blocked : 0;
}

/* Whether an idle worker may leave after its keep-alive: more serve than
 * the core count. Under mu. */
static bool thread_surplus(struct pool *p)
{
    /* relaxed: written under mu, which we hold */
    return thread_serving(p) >
           atomic_load_explicit(&p->want_core, memory_order_relaxed);
}

/* This worker leaves `live` now, so that no other one retires below the
 * count that made it surplus, and counts in `retiring` until it is gone.
 * Under mu. */
static void thread_leave_live(struct pool *p, struct slot *s)
{
    /* relaxed: live changes under mu, which we hold */
    atomic_fetch_sub_explicit(&p->live, 1, memory_order_relaxed);
    p->retiring++;
    s->state = SLOT_RETIRING;
}

/* The keep-alive passed: true when this worker retires (surplus). Under
 * mu. */
static bool thread_retire(struct pool *p, struct slot *s)
{
    if (!thread_surplus(p))
        return false;
    thread_leave_live(p, s);
    return true;
}

/*
 * A resize made workers surplus beyond the cap (`shedding`): an idle one
 * retires at once, without its keep-alive. The spinner gives up its flag
 * first and looks once more (a producer that saw it spinning left its
 * task to it: the park handshake, pool_idle.c): with work it stays.
 * Under mu.
 */
static bool thread_shed(struct pool *p, struct slot *s, bool spinner)
{
    if (!p->shedding)
        return false;
    /* relaxed: live changes under mu, which we hold */
    if (atomic_load_explicit(&p->live, memory_order_relaxed) <=
        serex__pool_cap(p)) {
        p->shedding = false; /* enough have gone */
        return false;
    }
    if (spinner) {
        /* seq_cst: the clear before the look, as a spinner's (essay) */
        atomic_store_explicit(&p->spinning, 0, memory_order_seq_cst);
        if (serex__pool_has_work(p, true))
            return false;
    }
    thread_leave_live(p, s);
    return true;
}

/*
 * The keep-alive's deadline for a worker about to park: on an elastic pool
 * (max above core), or while it is surplus (a compensating worker, a
 * resize down); else none, so a fixed pool's idle workers make no
 * wake-up at all. Under mu.
 */
static int64_t thread_park_deadline(struct pool *p)
{
    /* relaxed (both): written under mu, which we hold */
    bool elastic = atomic_load_explicit(&p->want_max, memory_order_relaxed) >
                   atomic_load_explicit(&p->want_core, memory_order_relaxed);

    return elastic || thread_surplus(p) ? serex__deadline(p->keep_alive_ns)
                                        : INT64_MAX;
}

/*
 * The park handshake's waiting half (pool_idle.c's essay). Under mu the
 * worker counts itself in `sleepers` and re-checks; with nothing to do it
 * goes on the list of parked workers (`idle`, of which `sleepers` is the
 * length), in the same hold of mu, and waits on its own `token` word
 * until a waker takes it off the list and hands it a token. The token
 * may carry the spinning flag: then *@handed is set, and we are the
 * spinner. On an elastic pool the wait has the keep-alive's deadline:
 * when it passes with no token (looked at under mu, where tokens are
 * given), the worker retires if the pool is above its core count, taking
 * itself off the list, or waits a period more (the essay above).
 */
bool serex__pool_thread_park(struct pool *p, struct slot *s, bool spinner,
                             bool *handed)
{
    int64_t deadline;
    uint32_t token;
    bool retired = false;

    *handed = false;
    serex__mutex_lock(&p->mu);
    if (thread_shed(p, s, spinner)) {
        serex__mutex_unlock(&p->mu);
        return false;
    }
    /* seq_cst: announce before the re-check below (pool_idle.c's essay) */
    atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
    if (spinner) /* seq_cst: after the announcement, before the re-check */
        atomic_store_explicit(&p->spinning, 0, memory_order_seq_cst);
    /* relaxed: shutdown sets the flag before it takes mu to wake us */
    if (serex__pool_has_work(p, spinner) ||
        (atomic_load_explicit(&p->state, memory_order_relaxed) &
         ST_SHUTDOWN)) {
        /* relaxed: under mu (see pool_idle.c's idle_pop) */
        atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed);
        serex__mutex_unlock(&p->mu);
        return true;
    }
    serex__pool_idle_push(p, s);
    /* relaxed: under mu; a worker to spare: no worker counts as stuck
     * any more (pool_watchdog.c) */
    if (atomic_load_explicit(&p->starved, memory_order_relaxed) != 0)
        atomic_store_explicit(&p->starved, 0, memory_order_relaxed);
    deadline = thread_park_deadline(p);
    serex__mutex_unlock(&p->mu);
    serex__stat_add(&s->parks, 1); /* this worker's own count */
    serex__obs_park(&p->base, s->index);
    serex__park_blocker = NULL; /* our own park is no task's wait */
    for (;;) {
        /* acquire: pairs with token_give's release */
        token = atomic_load_explicit(&s->token, memory_order_acquire);
        if (token != 0)
            break;
        if (serex__park_wait(&s->token, 0, deadline) != SEREX_ETIMEDOUT)
            continue;
        /* the keep-alive passed (elastic pools only) */
        serex__mutex_lock(&p->mu);
        /*
         * Off the list means a waker took us off under mu and stores our
         * token after unlocking: it is on its way, so wait for it (retiring
         * now would leave that waker's wake-up to no one). Still listed:
         * no token can come but through mu, which we hold.
         */
        if (s->idle_listed && thread_retire(p, s)) {
            serex__pool_idle_remove(p, s);
            serex__mutex_unlock(&p->mu);
            retired = true;
            break;
        }
        /* a core thread for now: the next look is a period away (none on
         * a fixed pool that is no longer surplus) */
        deadline = thread_park_deadline(p);
        serex__mutex_unlock(&p->mu);
    }
    if (p->mark_waits)
        serex__park_blocker = &s->blocker;
    if (retired)
        return false;
    *handed = (token & TOKEN_SPIN) != 0;
    serex__stat_add(&s->unparks, 1);
    serex__obs_unpark(&p->base, s->index);
    return true;
}

/* --- leaving --- */

/* Keeps @t to be joined later, joining the one kept before (a thread that
 * made its last touch: the join only waits for it to return). Under mu. */
static void thread_reap_later(struct pool *p, serex__thread t)
{
    if (p->reap_owed)
        serex__thread_join(p->reap);
    p->reap = t;
    p->reap_owed = true;
}

/*
 * A retired thread leaves: if a start is owed, its slot goes to a new
 * thread now (the essay). Returns false if it did not, and the slot is
 * to be marked EXITED. Under mu.
 */
static bool thread_hand_over(struct pool *p, struct slot *s)
{
    serex__thread self = s->thread;

    if (!p->grow_owed)
        return false;
    p->grow_owed = false;
    if (!thread_may_grow(p))
        return false;
    s->state = SLOT_FREE; /* ours is the slot that is free */
    if (thread_start(p, false) != SEREX_OK) {
        s->state = SLOT_EXITED; /* no thread: the live workers run it */
        return false;
    }
    thread_reap_later(p, self); /* after the start: it never joins reap */
    return true;
}

/* A worker is gone: its last touch of the pool. Under mu. */
static void thread_gone(struct pool *p, struct slot *s, bool retired)
{
    if (retired)
        p->retiring--;
    else /* relaxed: live changes under mu, which we hold */
        atomic_fetch_sub_explicit(&p->live, 1, memory_order_relaxed);
    if (!retired || !thread_hand_over(p, s))
        s->state = SLOT_EXITED;
    thread_check_terminated(p);
}

void serex__pool_thread_exit(struct pool *p, struct slot *s, bool retired)
{
    if (p->on_thread_stop != NULL)
        p->on_thread_stop(p->hook_ctx, s->index);
    serex__mutex_lock(&p->mu);
    thread_gone(p, s, retired); /* our last touch of the pool */
    serex__mutex_unlock(&p->mu);
}

/* --- setting up --- */

/* Names the calling worker "<name>-<index>": the index its hooks get. */
static void thread_name_self(struct pool *p, unsigned index)
{
    char name[32];

    snprintf(name, sizeof name, "%s-%u", p->name, index);
    serex__thread_set_name(name);
}

/* Pins the calling worker, of slot @index, where the config says. */
static int thread_pin(struct pool *p, struct slot *s, unsigned index)
{
    int rc = SEREX_OK;

    if (!p->cpu_per_worker)
        return serex__thread_pin_self(p->cpus, p->ncpus);
    /* The threads create waits for try the whole set first, so a CPU only
     * an extra thread would be given is refused by create, not later. */
    if (s->report)
        rc = serex__thread_pin_self(p->cpus, p->ncpus);
    if (rc == SEREX_OK)
        rc = serex__thread_pin_self(&p->cpus[index % p->ncpus], 1);
    return rc;
}

bool serex__pool_thread_setup(struct pool *p, struct slot *s)
{
    unsigned index = s->index;
    int rc = SEREX_OK;

    thread_name_self(p, index);
    if (!p->thread_setup)
        return true;
    if (p->ncpus != 0)
        rc = thread_pin(p, s, index);
    if (rc == SEREX_OK && p->on_thread_start != NULL &&
        p->on_thread_start(p->hook_ctx, index) != 0)
        rc = SEREX_EREJECTED;
    if (rc == SEREX_OK && !s->report)
        return true;
    serex__mutex_lock(&p->mu);
    if (s->report) {
        p->unreported--;
        if (rc != SEREX_OK && p->start_rc == SEREX_OK)
            p->start_rc = rc;
        serex__cond_broadcast(&p->term_cv); /* create waits there */
    }
    if (rc != SEREX_OK)
        thread_gone(p, s, false); /* our last touch of the pool */
    serex__mutex_unlock(&p->mu);
    return rc == SEREX_OK;
}

/*
 * Starts the core threads and, if they set up (pinning, a start hook),
 * waits for every verdict. On failure sets STOP (the caller joins them):
 * SEREX_ENOMEM, or the first refusal (SEREX_EINVAL: a CPU;
 * SEREX_EREJECTED: a start hook).
 */
int serex__pool_threads_start_core(struct pool *p)
{
    int rc = SEREX_OK;

    serex__mutex_lock(&p->mu);
    for (unsigned i = 0; i < p->core && rc == SEREX_OK; i++)
        rc = thread_start(p, p->thread_setup);
    /* term_cv: nobody awaits a pool that create has not returned */
    while (p->unreported > 0)
        serex__cond_wait_until(&p->term_cv, &p->mu, INT64_MAX);
    if (rc == SEREX_OK)
        rc = p->start_rc;
    if (rc != SEREX_OK) {
        /* relaxed: the broadcast under mu below orders it for parkers */
        atomic_fetch_or_explicit(&p->state, ST_SHUTDOWN | ST_STOP,
                                 memory_order_relaxed);
        serex__pool_wake_every(p);
    }
    serex__mutex_unlock(&p->mu);
    return rc;
}

void serex__pool_threads_join(struct pool *p)
{
    for (unsigned i = 0; i < serex__pool_nslots(p); i++) {
        struct slot *s = serex__pool_slot(p, i);
        enum slot_state st;

        serex__mutex_lock(&p->mu); /* states are written under mu */
        st = s->state;
        serex__mutex_unlock(&p->mu);
        if (st != SLOT_FREE)
            serex__thread_join(s->thread);
    }
    if (p->reap_owed) /* terminated: no hand-over can come any more */
        serex__thread_join(p->reap);
}

/* --- resizing --- */

/*
 * serex_pool_resize's work, under mu: the slots for the new max first
 * (the one allocation that can fail, and then nothing has changed), then
 * the sizes, then the core threads missing, started at once. A start that
 * fails (no memory, no thread) is a grow that failed: the pool goes on
 * with the threads it has, and `growable` lets a submission that finds
 * every worker busy start one later; one that finds every slot live or
 * retiring is owed (the essay's debt). Workers above the new cap retire
 * as soon as they are idle (`shedding`), and every parked worker is woken
 * to look again: at its keep-alive's deadline (a fixed pool's have none),
 * and at whether it is surplus.
 */
int serex__pool_threads_resize(struct pool *p, unsigned core, unsigned max)
{
    int rc;

    serex__mutex_lock(&p->mu);
    /* relaxed: a flag; shutdown takes mu after setting it */
    if (atomic_load_explicit(&p->state, memory_order_relaxed) & ST_SHUTDOWN) {
        serex__mutex_unlock(&p->mu);
        return SEREX_EREJECTED;
    }
    rc = serex__pool_slots_reserve(p, max);
    if (rc != SEREX_OK) {
        serex__mutex_unlock(&p->mu);
        return rc; /* the chunks made stay: nothing else changed */
    }
    /* relaxed (all): written under mu, which we hold; read as hints */
    atomic_store_explicit(&p->want_core, core, memory_order_relaxed);
    atomic_store_explicit(&p->want_max, max, memory_order_relaxed);
    /* seq_cst: as a region's (pool_block.c): submissions then look */
    atomic_store_explicit(&p->growable, 1, memory_order_seq_cst);
    while (rc == SEREX_OK &&
           atomic_load_explicit(&p->live, memory_order_relaxed) < core)
        rc = thread_start(p, false);
    if (rc == SEREX_EFULL) /* every slot live or retiring */
        p->grow_owed = true;
    if (atomic_load_explicit(&p->live, memory_order_relaxed) >
        serex__pool_cap(p))
        p->shedding = true;
    serex__pool_wake_every(p);
    serex__mutex_unlock(&p->mu);
    return SEREX_OK;
}
