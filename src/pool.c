/* SPDX-License-Identifier: MIT */
/*
 * pool.c - the thread pool: fixed or elastic, bounded or unbounded queue.
 *
 * --- The queue ---
 * A growable ring of {fn, arg} slots with two spinlocks, one per end (the
 * two-lock queue of Michael and Scott, and of the JDK's LinkedBlockingQueue,
 * on an array). Producers write slot `tail` under `put_lock` and publish
 * the new `tail`; workers read slot `head` under `take_lock` and publish the
 * new `head`. Each end keeps a stale copy of the other end's index and
 * re-reads it only when the copy says empty (workers) or full (producers),
 * so in a steady stream a worker touches the producers' line once per run
 * of tasks, not once per task, and slots are read and written in order,
 * four to a cache line, which the hardware prefetches. Nothing is
 * allocated per task. When the ring is full the producer takes both locks
 * and doubles it; an idle worker takes both and shrinks an empty ring back
 * to RING_MIN, so memory returns to its baseline after a burst.
 * The ring and its mask change only under both locks, so each end may read
 * them under its own. The queue is empty exactly when head == tail, which
 * anyone can test with two loads and no lock (queue_nonempty).
 *
 * --- Parking: who sleeps, who wakes, why no wake-up is lost ---
 * A worker that finds the queue empty becomes the one spinner if there is
 * none (`spinning` 0 -> 1): it polls the queue for SPIN_NS, so a burst or a
 * ping-pong never pays a futex wake. Every other idle worker parks at once
 * (at most one spins: on a 2-core machine two spinners would steal the
 * producer's core). To park, a worker takes `mu`, increments `sleepers`,
 * (the spinner then clears `spinning`), re-checks the queue, and waits on
 * `work_cv` for a wake-up token (`wakeups`).
 * A producer, after its store of `tail`, reads `spinning`, then
 * `sleepers`: if there is a spinner it does nothing; else if someone sleeps
 * it takes `mu`, turns one sleeper into a token (so later producers see
 * one sleeper fewer and leave `mu` alone) and signals; else it makes no
 * system call at all (a busy pool costs no syscall per task).
 * The store, the loads of `spinning`/`sleepers`, the increment of
 * `sleepers`, the clearing of `spinning` and the worker's re-check of `tail`
 * are all seq_cst: in their single total order, either the producer's load
 * comes after the worker's announcement (it sees a sleeper or no spinner,
 * and wakes), or the worker's re-check comes after the producer's store
 * (it sees the task and does not sleep). The token is handed over under
 * `mu`, which the parking worker holds from its re-check until it waits, so
 * the signal cannot fall between the re-check and the wait. A worker that
 * leaves for any reason takes a token if one is there: the wake-up it
 * stood for is served by that worker's next look at the queue.
 * A worker woken from idle that finds more work behind its task wakes the
 * next sleeper (as Tokio's last searching worker does), so a burst after
 * an idle period fans out to every worker.
 *
 * --- Shutdown and the in-flight count ---
 * `ctl` holds SHUTDOWN and STOP flags and, above them, the number of
 * execute calls between their state check and their push. execute adds
 * itself, checks the flags, pushes, removes itself (release). shutdown_now
 * sets STOP, waits for that count to reach zero (acquire), then empties the
 * queue under both locks: every task whose execute said SEREX_OK is either
 * in what it takes or was taken by a worker before, so nothing is stranded. After
 * shutdown, workers exit only when the count is zero and the queue is
 * empty, for the same reason. Workers never park after shutdown: shutdown
 * sets the flag and then broadcasts under `mu`, and a parking worker checks
 * the flag under `mu`.
 *
 * --- Threads ---
 * Core threads start in create and live until shutdown. If max_threads is
 * larger, a producer that finds no spinner and no sleeper starts one more
 * thread (under `mu`, up to max); a worker beyond the core count that has
 * waited keep_alive_ns for a token retires. Every thread is joined, by the
 * next start in its slot or by destroy. The last thread to exit marks the
 * pool terminated and broadcasts `term_cv`; await_termination waits for it
 * under `mu`, which also makes every task's writes visible to the caller.
 */
#include <stdio.h>  /* snprintf for thread names */
#include <string.h> /* memcpy, strlen */

#include "common_internal.h"
#include "pool_internal.h"
#include "spinlock_internal.h"
#include "thread_internal.h"

#define ST_SHUTDOWN UINT64_C(1)
#define ST_STOP UINT64_C(2)
#define SUBMITTER UINT64_C(4) /* ctl counts in-flight execute calls above */

#define SPIN_NS INT64_C(50000)         /* poll an empty queue this long */
#define RING_MIN SEREX__POOL_RING_MIN  /* slots; 16 KiB, power of two */
#define DEFAULT_KEEP_ALIVE_NS (60 * SEREX__NS_PER_S)
#define NAME_MAX_LEN 15                /* what Linux keeps of a thread name */

enum slot_state { SLOT_FREE, SLOT_LIVE, SLOT_EXITED };

struct pool;

struct slot {
    struct pool *p;
    serex__thread thread;
    enum slot_state state; /* under mu */
    unsigned id;           /* the n of "<name>-<n>" */
};

struct ring_slot {
    serex_fn fn;
    void *arg;
};

struct pool {
    serex_executor base;

    /* Producers' line: written by every execute. */
    _Alignas(SEREX__CACHELINE) serex__spinlock put_lock;
    uint64_t put_tail;     /* under put_lock: the next slot to fill */
    uint64_t head_seen;    /* under put_lock: a stale copy of head */
    _Atomic uint64_t ctl;  /* ST_* flags | in-flight execute calls */

    /* Published ends, each written by one side, read by the other. */
    _Alignas(SEREX__CACHELINE) _Atomic uint64_t tail;
    _Alignas(SEREX__CACHELINE) _Atomic uint64_t head; /* under take_lock */

    /* Consumers' line. */
    _Alignas(SEREX__CACHELINE) serex__spinlock take_lock;
    uint64_t tail_seen;    /* under take_lock: a stale copy of tail, >= head */

    /* The ring: changed under both locks, read under either. */
    _Alignas(SEREX__CACHELINE) struct ring_slot *ring;
    uint64_t mask;         /* slots - 1 */
    _Atomic uint32_t ring_grown; /* hint for idle workers: shrink it */

    /* Idle accounting: read by every execute, written on idle changes. */
    _Alignas(SEREX__CACHELINE) _Atomic uint32_t spinning; /* 0 or 1 */
    _Atomic uint32_t sleepers; /* parked, without a token; under mu */

    /* Cold: parking, thread management, configuration. */
    _Alignas(SEREX__CACHELINE) serex__mutex mu;
    serex__cond work_cv;   /* parked workers wait here for a token */
    serex__cond term_cv;   /* await_termination waits here */
    unsigned wakeups;      /* tokens for parked workers, under mu */
    _Atomic unsigned live; /* threads started and not exited; under mu */
    bool terminated;       /* under mu: shut down and every thread gone */
    unsigned next_id;      /* under mu */
    unsigned long wakes;   /* under mu: tokens handed out (for tests) */
    unsigned core, max;
    int64_t keep_alive_ns;
    size_t capacity;       /* 0: unbounded */
    char name[NAME_MAX_LEN + 1];
    struct slot *slots;    /* max of them */
};

static const serex_executor_ops pool_ops;

static struct pool *pool_of(serex_executor *ex)
{
    return serex__container_of(ex, struct pool, base);
}

/* --- the queue --- */

static struct ring_slot *ring_alloc(uint64_t slots)
{
    return serex__alloc_aligned(SEREX__CACHELINE, slots * sizeof(struct ring_slot));
}

/* Copies the live slots [head, tail) into @to, of mask @to_mask. Both
 * locks held. */
static void ring_move(struct pool *p, struct ring_slot *to, uint64_t to_mask)
{
    /* relaxed: head changes under take_lock, which we hold */
    uint64_t h = atomic_load_explicit(&p->head, memory_order_relaxed);

    for (uint64_t i = h; i != p->put_tail; i++)
        to[i & to_mask] = p->ring[i & p->mask];
    serex__free(p->ring);
    p->ring = to;
    p->mask = to_mask;
}

/* The ring is full: double it. Under put_lock. */
static int ring_grow(struct pool *p)
{
    uint64_t slots = (p->mask + 1) * 2;
    struct ring_slot *bigger = slots > p->mask + 1 ? ring_alloc(slots) : NULL;

    if (bigger == NULL)
        return SEREX_ENOMEM;
    serex__spin_lock(&p->take_lock);
    ring_move(p, bigger, slots - 1);
    serex__spin_unlock(&p->take_lock);
    /* relaxed: a hint, re-checked under both locks */
    atomic_store_explicit(&p->ring_grown, 1, memory_order_relaxed);
    return SEREX_OK;
}

/* The stale head says no room: look again, then grow or say EFULL. */
static int ring_make_room(struct pool *p)
{
    uint64_t used;

    /* acquire: pairs with the release store of head in ring_pop, so the
     * workers' reads of the slots we are about to reuse are done */
    p->head_seen = atomic_load_explicit(&p->head, memory_order_acquire);
    used = p->put_tail - p->head_seen;
    if (p->capacity != 0 && used >= p->capacity)
        return SEREX_EFULL;
    if (used > p->mask)
        return ring_grow(p);
    return SEREX_OK;
}

/* Appends a task. Under put_lock. */
static int ring_push(struct pool *p, serex_fn fn, void *arg)
{
    uint64_t t = p->put_tail;

    if (serex__unlikely(t - p->head_seen > p->mask ||
                        (p->capacity != 0 && t - p->head_seen >= p->capacity))) {
        int rc = ring_make_room(p);

        if (rc != SEREX_OK)
            return rc;
    }
    p->ring[t & p->mask] = (struct ring_slot){fn, arg};
    p->put_tail = t + 1;
    /*
     * seq_cst: the publishing half of the park handshake (see the essay):
     * ordered before the producer's loads of spinning and sleepers. Its
     * release half makes the slot written above visible to the worker that
     * reads this tail with acquire.
     */
    atomic_store_explicit(&p->tail, t + 1, memory_order_seq_cst);
    return SEREX_OK;
}

/* Takes the oldest task into *out. Under take_lock. */
static bool ring_pop(struct pool *p, struct ring_slot *out)
{
    /* relaxed: head changes only under take_lock, which we hold */
    uint64_t h = atomic_load_explicit(&p->head, memory_order_relaxed);

    if (h == p->tail_seen) {
        /* acquire: pairs with the seq_cst store in ring_push; the slots
         * up to the new tail are written */
        p->tail_seen = atomic_load_explicit(&p->tail, memory_order_acquire);
        if (h == p->tail_seen)
            return false;
    }
    *out = p->ring[h & p->mask];
    /* release: our read of the slot happens-before a producer reuses it
     * (its acquire load in ring_make_room) */
    atomic_store_explicit(&p->head, h + 1, memory_order_release);
    return true;
}

static bool queue_nonempty(struct pool *p)
{
    /* seq_cst (both): the re-check half of the park handshake (essay) */
    return atomic_load_explicit(&p->tail, memory_order_seq_cst) !=
           atomic_load_explicit(&p->head, memory_order_seq_cst);
}

/* Takes the oldest task; false if the queue is empty. */
static bool pool_take(struct pool *p, struct ring_slot *out)
{
    bool got;

    serex__spin_lock(&p->take_lock);
    got = ring_pop(p, out);
    serex__spin_unlock(&p->take_lock);
    return got;
}

/* An idle worker gives a grown, empty ring back (memory after a burst). */
static void ring_try_shrink(struct pool *p)
{
    struct ring_slot *small;

    /* relaxed: a hint; everything is re-checked under both locks */
    if (!atomic_load_explicit(&p->ring_grown, memory_order_relaxed))
        return;
    small = ring_alloc(RING_MIN);
    if (small == NULL)
        return; /* keep the big one; nothing is lost */
    serex__spin_lock(&p->put_lock);
    serex__spin_lock(&p->take_lock);
    /* relaxed: ctl is re-read under the locks shutdown_now also takes */
    if (p->mask + 1 > RING_MIN && !queue_nonempty(p) &&
        !(atomic_load_explicit(&p->ctl, memory_order_relaxed) & ST_STOP)) {
        ring_move(p, small, RING_MIN - 1);
        small = NULL;
        atomic_store_explicit(&p->ring_grown, 0, memory_order_relaxed);
    }
    serex__spin_unlock(&p->take_lock);
    serex__spin_unlock(&p->put_lock);
    serex__free(small);
}

/* --- waking and growing --- */

/*
 * Hands one parked worker a token. The token moves it out of `sleepers`
 * at once, so producers that come before it wakes see no sleeper and take
 * no lock: one mutex round trip per actual wake-up, not per task.
 */
static void pool_wake_one(struct pool *p)
{
    serex__mutex_lock(&p->mu);
    /* relaxed (both): sleepers only changes under mu, which we hold; its
     * lock-free readers use it only to decide whether to come here */
    if (atomic_load_explicit(&p->sleepers, memory_order_relaxed) > 0) {
        atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed);
        p->wakeups++;
        p->wakes++;
        serex__cond_signal(&p->work_cv);
    }
    serex__mutex_unlock(&p->mu);
}

static int worker_main(void *arg);

/* Starts a thread in a free slot. Under mu. */
static int pool_start_thread(struct pool *p)
{
    struct slot *s = NULL;
    int rc;

    for (unsigned i = 0; i < p->max && s == NULL; i++)
        if (p->slots[i].state != SLOT_LIVE)
            s = &p->slots[i];
    if (s == NULL)
        return SEREX_EFULL;
    if (s->state == SLOT_EXITED) {
        /* It marked itself exited as its last step under mu: this join
         * only waits for it to return. */
        serex__thread_join(s->thread);
        s->state = SLOT_FREE;
    }
    s->p = p;
    s->id = ++p->next_id;
    rc = serex__thread_start(&s->thread, worker_main, s);
    if (rc == SEREX_OK) {
        s->state = SLOT_LIVE;
        /* relaxed: under mu; lock-free readers only use it as a hint */
        atomic_fetch_add_explicit(&p->live, 1, memory_order_relaxed);
    }
    return rc;
}

/* Every worker is busy: start one more, if the pool may grow. */
static void pool_grow(struct pool *p)
{
    /* relaxed: a hint; re-checked under mu */
    if (atomic_load_explicit(&p->live, memory_order_relaxed) >= p->max)
        return;
    serex__mutex_lock(&p->mu);
    /* relaxed: under mu, or a flag re-checked by the new thread */
    if (!(atomic_load_explicit(&p->ctl, memory_order_relaxed) & ST_SHUTDOWN) &&
        atomic_load_explicit(&p->live, memory_order_relaxed) < p->max)
        (void)pool_start_thread(p); /* on failure the live workers run it */
    serex__mutex_unlock(&p->mu);
}

/* After a push: make sure some worker will look at the queue. */
static void pool_signal_work(struct pool *p)
{
    /* seq_cst (both): the load half of the park handshake (see essay) */
    if (atomic_load_explicit(&p->spinning, memory_order_seq_cst) != 0)
        return;
    if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) != 0)
        pool_wake_one(p);
    else if (p->max > p->core)
        pool_grow(p);
}

/* --- the worker --- */

enum spin_result { SPIN_NOT_SPINNER, SPIN_FOUND, SPIN_GAVE_UP };

/* Polls the queue for SPIN_NS, if this worker can be the one spinner. */
static enum spin_result worker_spin(struct pool *p)
{
    uint32_t zero = 0;
    int64_t end;

    /* relaxed: the flag only elects one spinner; the handshake's ordering
     * comes from the seq_cst clear below or in worker_park */
    if (!atomic_compare_exchange_strong_explicit(&p->spinning, &zero, 1,
                                                 memory_order_relaxed,
                                                 memory_order_relaxed))
        return SPIN_NOT_SPINNER;
    end = serex__now_ns() + SPIN_NS;
    for (unsigned i = 1;; i++) {
        if (queue_nonempty(p)) {
            /* seq_cst: ordered before our next look at the queue, so a
             * producer that saw us spinning has its task seen (essay) */
            atomic_store_explicit(&p->spinning, 0, memory_order_seq_cst);
            return SPIN_FOUND;
        }
        serex__cpu_relax();
        /* relaxed: the flag is re-read with acquire in worker_idle */
        if (i % 64 == 0 &&
            ((atomic_load_explicit(&p->ctl, memory_order_relaxed) &
              ST_SHUTDOWN) ||
             serex__now_ns() >= end))
            return SPIN_GAVE_UP; /* still the spinner: worker_park clears */
    }
}

/*
 * True when this worker may retire: extra, and idle for keep_alive. Under
 * mu. Its slot is marked exited here, so nothing of the pool is touched
 * after mu is released: a destroy may free the pool the moment the last
 * core worker exits, and only joins this thread.
 */
static bool worker_retire(struct pool *p, struct slot *s)
{
    /* relaxed: live changes under mu, which we hold */
    if (atomic_load_explicit(&p->live, memory_order_relaxed) <= p->core)
        return false;
    atomic_fetch_sub_explicit(&p->live, 1, memory_order_relaxed);
    s->state = SLOT_EXITED;
    return true;
}

/*
 * Parks until a token, work or shutdown. Returns false if the worker must
 * exit (it retired). @spinner: we still hold the spinning flag.
 * Under mu, sleepers + wakeups is the number of workers in here: a waker
 * turns a sleeper into a token, and whoever leaves takes a token if there
 * is one (its wake-up is then served by this worker's look at the queue),
 * else leaves `sleepers`.
 */
static bool worker_park(struct pool *p, struct slot *s, bool spinner)
{
    bool elastic = p->max > p->core, keep = true;
    int64_t deadline = elastic ? serex__deadline(p->keep_alive_ns) : INT64_MAX;

    serex__mutex_lock(&p->mu);
    /* seq_cst: announce before the re-check below (see the essay) */
    atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
    if (spinner) /* seq_cst: after the announcement, before the re-check */
        atomic_store_explicit(&p->spinning, 0, memory_order_seq_cst);
    for (;;) {
        /* relaxed: shutdown sets the flag before taking mu to broadcast */
        if (p->wakeups > 0 || queue_nonempty(p) ||
            (atomic_load_explicit(&p->ctl, memory_order_relaxed) & ST_SHUTDOWN))
            break;
        if (elastic && serex__now_ns() >= deadline && worker_retire(p, s)) {
            keep = false;
            break;
        }
        serex__cond_wait_until(&p->work_cv, &p->mu, deadline);
    }
    if (p->wakeups > 0)
        p->wakeups--;
    else /* relaxed: under mu (see pool_wake_one) */
        atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed);
    serex__mutex_unlock(&p->mu);
    return keep;
}

enum idle_result { IDLE_AGAIN, IDLE_EXIT, IDLE_RETIRED };

/* The queue looked empty: spin, park, or leave. */
static enum idle_result worker_idle(struct pool *p, struct slot *s)
{
    /* acquire: pairs with the release in pool_execute's count drop, so a
     * count of zero means every accepted push is visible to the check */
    uint64_t c = atomic_load_explicit(&p->ctl, memory_order_acquire);
    enum spin_result spin;

    if (c & ST_STOP)
        return IDLE_EXIT;
    if (c & ST_SHUTDOWN) {
        if (c < SUBMITTER && !queue_nonempty(p))
            return IDLE_EXIT;
        serex__thread_yield(); /* an execute is mid-push: wait for it */
        return IDLE_AGAIN;
    }
    spin = worker_spin(p);
    if (spin == SPIN_FOUND)
        return IDLE_AGAIN;
    if (!worker_park(p, s, spin == SPIN_GAVE_UP))
        return IDLE_RETIRED;
    ring_try_shrink(p);
    return IDLE_AGAIN;
}

static void worker_exit(struct pool *p, struct slot *s)
{
    serex__mutex_lock(&p->mu);
    /* relaxed: live changes under mu, which we hold */
    if (atomic_fetch_sub_explicit(&p->live, 1, memory_order_relaxed) == 1) {
        p->terminated = true;
        serex__cond_broadcast(&p->term_cv);
    }
    s->state = SLOT_EXITED; /* our last touch of the pool */
    serex__mutex_unlock(&p->mu);
}

static void worker_name_self(struct pool *p, unsigned id)
{
    char name[32];

    snprintf(name, sizeof name, "%s-%u", p->name, id);
    serex__thread_set_name(name);
}

static int worker_main(void *arg)
{
    struct slot *s = arg;
    struct pool *p = s->p;
    struct serex__frame frame;
    struct ring_slot task;
    bool was_idle = false;

    worker_name_self(p, s->id);
    /* Everything on this thread is a task of the pool (for EDEADLK). */
    serex__frame_push(&frame, &p->base);
    for (;;) {
        if (!pool_take(p, &task)) {
            enum idle_result r = worker_idle(p, s);

            if (r == IDLE_RETIRED) { /* the pool may be gone already */
                serex__frame_pop(&frame);
                return 0;
            }
            if (r == IDLE_EXIT)
                break;
            was_idle = true;
            continue;
        }
        if (was_idle) { /* more work behind ours: fan the burst out */
            was_idle = false;
            if (queue_nonempty(p))
                pool_signal_work(p);
        }
        task.fn(task.arg);
    }
    serex__frame_pop(&frame);
    worker_exit(p, s);
    return 0;
}

/* --- the executor --- */

static int pool_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct pool *p = pool_of(ex);
    uint64_t c;
    int rc;

    /* relaxed: the flags and this count share one modification order, so
     * either shutdown_now's STOP is seen here, or it waits for our drop */
    c = atomic_fetch_add_explicit(&p->ctl, SUBMITTER, memory_order_relaxed);
    if (serex__unlikely(c & ST_SHUTDOWN)) {
        rc = SEREX_EREJECTED;
    } else {
        serex__spin_lock(&p->put_lock);
        rc = ring_push(p, fn, arg);
        serex__spin_unlock(&p->put_lock);
    }
    /* release: our push happens-before whoever sees the count at zero
     * (shutdown_now, an exiting worker), with acquire */
    atomic_fetch_sub_explicit(&p->ctl, SUBMITTER, memory_order_release);
    if (serex__likely(rc == SEREX_OK))
        pool_signal_work(p);
    return rc;
}

static void pool_wake_all(struct pool *p)
{
    serex__mutex_lock(&p->mu);
    serex__cond_broadcast(&p->work_cv);
    serex__mutex_unlock(&p->mu);
}

static void pool_shutdown(serex_executor *ex)
{
    struct pool *p = pool_of(ex);

    /* release: nothing to publish but the flag; parked workers read it
     * under mu, which we take next */
    atomic_fetch_or_explicit(&p->ctl, ST_SHUTDOWN, memory_order_release);
    pool_wake_all(p);
}

static size_t pool_shutdown_now(serex_executor *ex, serex_pending_fn on_pending,
                                void *ctx)
{
    struct pool *p = pool_of(ex);
    uint64_t h, t;

    /* release: only the flags; the drop loop below does the ordering */
    atomic_fetch_or_explicit(&p->ctl, ST_SHUTDOWN | ST_STOP,
                             memory_order_release);
    /* acquire: pairs with the release drop in pool_execute; once the count
     * is zero every accepted push is visible and no more can come */
    while (atomic_load_explicit(&p->ctl, memory_order_acquire) >= SUBMITTER)
        serex__thread_yield();
    /*
     * Empty the queue under both locks by moving head to tail. The slots
     * stay as they are: no push can come any more, and STOP keeps idle
     * workers from shrinking the ring, so we read them after unlocking,
     * where on_pending may call back into the pool.
     */
    serex__spin_lock(&p->put_lock);
    serex__spin_lock(&p->take_lock);
    /* relaxed: both ends are ours while we hold both locks */
    h = atomic_load_explicit(&p->head, memory_order_relaxed);
    t = p->put_tail;
    atomic_store_explicit(&p->head, t, memory_order_relaxed);
    p->tail_seen = t; /* ring_pop relies on head <= tail_seen */
    serex__spin_unlock(&p->take_lock);
    serex__spin_unlock(&p->put_lock);
    pool_wake_all(p);
    for (uint64_t i = h; i != t; i++)
        serex__hand_back(p->ring[i & p->mask].fn, p->ring[i & p->mask].arg,
                         on_pending, ctx);
    return (size_t)(t - h);
}

static int pool_await(serex_executor *ex, int64_t timeout_ns)
{
    struct pool *p = pool_of(ex);
    int64_t deadline = serex__deadline(timeout_ns);
    int rc = SEREX_OK;

    serex__mutex_lock(&p->mu);
    while (!p->terminated) {
        if (timeout_ns == 0 || serex__now_ns() >= deadline) {
            rc = SEREX_ETIMEDOUT;
            break;
        }
        serex__cond_wait_until(&p->term_cv, &p->mu, deadline);
    }
    serex__mutex_unlock(&p->mu);
    return rc;
}

/* Joins every thread ever started and frees the pool. */
static void pool_free(struct pool *p)
{
    for (unsigned i = 0; i < p->max; i++) {
        enum slot_state st;

        serex__mutex_lock(&p->mu); /* states are written under mu */
        st = p->slots[i].state;
        serex__mutex_unlock(&p->mu);
        if (st != SLOT_FREE)
            serex__thread_join(p->slots[i].thread);
    }
    serex__cond_destroy(&p->term_cv);
    serex__cond_destroy(&p->work_cv);
    serex__mutex_destroy(&p->mu);
    serex__free(p->ring);
    serex__free(p->slots);
    serex__free(p);
}

static void pool_destroy(serex_executor *ex)
{
    struct pool *p = pool_of(ex);

    pool_await(ex, SEREX_FOREVER); /* serex_destroy shut it down */
    pool_free(p);
}

static const serex_executor_ops pool_ops = {
    .execute = pool_execute,
    .shutdown = pool_shutdown,
    .shutdown_now = pool_shutdown_now,
    .await_termination = pool_await,
    .destroy = pool_destroy,
};

/* --- creation --- */

/* Resolves defaults; SEREX_EINVAL for contradictory values. */
static int pool_config(const serex_pool_config *cfg, struct pool *p)
{
    serex_pool_config c = {0};

    if (cfg != NULL)
        c = *cfg;
    if (c.keep_alive_ns < 0 || (c.max_threads != 0 && c.threads != 0 &&
                                c.max_threads < c.threads))
        return SEREX_EINVAL;
    p->core = c.threads;
    if (p->core == 0) { /* online CPUs, but never above an explicit max */
        p->core = serex__cpu_count();
        if (c.max_threads != 0 && c.max_threads < p->core)
            p->core = c.max_threads;
    }
    p->max = c.max_threads != 0 ? c.max_threads : p->core;
    p->keep_alive_ns = c.keep_alive_ns != 0 ? c.keep_alive_ns
                                            : DEFAULT_KEEP_ALIVE_NS;
    p->capacity = c.queue_capacity;
    snprintf(p->name, sizeof p->name, "%s",
             c.name != NULL && c.name[0] != '\0' ? c.name : "serex");
    return SEREX_OK;
}

static int pool_init_sync(struct pool *p)
{
    if (serex__mutex_init(&p->mu) != SEREX_OK)
        return SEREX_ENOMEM;
    if (serex__cond_init(&p->work_cv) != SEREX_OK)
        goto fail_mu;
    if (serex__cond_init(&p->term_cv) != SEREX_OK)
        goto fail_work;
    return SEREX_OK;
fail_work:
    serex__cond_destroy(&p->work_cv);
fail_mu:
    serex__mutex_destroy(&p->mu);
    return SEREX_ENOMEM;
}

/* Starts the core threads; on failure stops and joins those started. */
static int pool_start_core(struct pool *p)
{
    int rc = SEREX_OK;

    serex__mutex_lock(&p->mu);
    for (unsigned i = 0; i < p->core && rc == SEREX_OK; i++)
        rc = pool_start_thread(p);
    serex__mutex_unlock(&p->mu);
    if (rc == SEREX_OK)
        return SEREX_OK;
    atomic_fetch_or_explicit(&p->ctl, ST_SHUTDOWN | ST_STOP,
                             memory_order_release);
    pool_wake_all(p);
    return SEREX_ENOMEM;
}

int serex_pool_create(const serex_pool_config *cfg, serex_executor **out)
{
    struct pool *p;
    int rc;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    p = serex__alloc_aligned(SEREX__CACHELINE, sizeof *p);
    if (p == NULL)
        return SEREX_ENOMEM;
    memset(p, 0, sizeof *p);
    rc = pool_config(cfg, p);
    if (rc != SEREX_OK) {
        serex__free(p);
        return rc;
    }
    p->slots = serex__calloc(p->max, sizeof *p->slots);
    p->ring = p->slots != NULL ? ring_alloc(RING_MIN) : NULL;
    if (p->ring == NULL || pool_init_sync(p) != SEREX_OK) {
        serex__free(p->ring);
        serex__free(p->slots);
        serex__free(p);
        return SEREX_ENOMEM;
    }
    p->mask = RING_MIN - 1;
    p->base.ops = &pool_ops;
    rc = pool_start_core(p);
    if (rc != SEREX_OK) {
        pool_free(p); /* joins the threads that did start */
        return rc;
    }
    *out = &p->base;
    return SEREX_OK;
}

/* --- for tests --- */

unsigned serex__pool_threads(serex_executor *ex)
{
    /* relaxed: a snapshot for a test */
    return atomic_load_explicit(&pool_of(ex)->live, memory_order_relaxed);
}

unsigned long serex__pool_wakes(serex_executor *ex)
{
    struct pool *p = pool_of(ex);
    unsigned long n;

    serex__mutex_lock(&p->mu);
    n = p->wakes;
    serex__mutex_unlock(&p->mu);
    return n;
}
