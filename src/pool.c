/* SPDX-License-Identifier: MIT */
/*
 * pool.c - the thread pool: fixed or elastic, bounded or unbounded queue.
 * This file is the pool's executor and its worker loop; each mechanism
 * under them has a file of its own, with its essay at the top (as Tokio
 * splits its scheduler):
 *
 *   pool_inject.c   the shared queue's shards, where tasks from outside
 *                   the pool wait; the stamps (who submitted a task, in
 *                   what order) and the hand-back order they give
 *   pool_local.c    each worker's run queue and next-task slot: taking
 *                   a task, stealing, the local push (a static inline in
 *                   pool_types_internal.h, run by pool_execute) and its
 *                   overflow (their lock-free protocol:
 *                   pool_runq_internal.h)
 *   pool_idle.c     idle and wake-up: the spinner, the park handshake
 *                   (who sleeps, who wakes, why no wake-up is lost; the
 *                   parking itself is pool_thread.c's), an idle worker's
 *                   choice to spin, park or leave
 *   pool_level.c    the priority levels HIGH and LOW and their faces
 *                   (serex_pool_executor_at)
 *   pool_thread.c   each worker thread's life: start, park with the
 *                   keep-alive, retire, grow, stop; the slots' chunks;
 *                   serex_pool_resize's work
 *   pool_block.c    blocking regions and the compensating workers they
 *                   let the pool start; waits that mark themselves
 *   pool_watchdog.c the starvation watchdog (starvation_ns)
 *   pool.c          the worker loop (serex__pool_worker_main); the
 *                   executor: execute and its push, shutdown, shutdown_now
 *                   with its claim and hand-back, await, destroy, stats,
 *                   create; below, the essays of what it holds
 *
 * Their shared state and the functions that cross files are in
 * pool_types_internal.h. Where another file cites "pool.c's essay" for
 * the park handshake, the stamps or the slot steal, the essay is now at
 * the top of pool_idle.c, pool_inject.c and pool_local.c.
 *
 * --- Shutdown ---
 * `state` holds the SHUTDOWN and STOP flags. execute reads them under
 * its shard's `put_lock`, and everyone who must not miss a push takes
 * each `put_lock` after reading the flag: shutdown_now sets STOP, waits
 * until no worker is `moving` (a local push or a steal: they look for
 * STOP after setting it, seq_cst, so one of the two sees the other), and
 * then empties every shard and claims every run queue and slot under all
 * the shards' locks; a worker that sees SHUTDOWN looks at every shard
 * under its `put_lock`, and at every run queue and slot, before it exits
 * (a local push that came before SHUTDOWN is in its own worker's queues,
 * and that worker looks at them before it leaves). Lock
 * order makes the flag and the pushes one story: an execute that holds
 * `put_lock` before them has pushed by the time they look, and one that
 * holds it after reads the flag after they did, so it sees it (coherence)
 * and says SEREX_EREJECTED. Every task whose
 * execute said SEREX_OK is run, or handed back, exactly once. Workers never
 * park after shutdown: shutdown sets the flag and then broadcasts under
 * `mu`, and a parking worker checks the flag under `mu`.
 *

 * --- Destroy, and executes still returning ---
 * destroy awaits termination (every thread has made its last touch), joins
 * the threads, and frees the pool. But an execute by a thread that is not
 * the user's (a continuation, a group's notification, a wrapper's drain
 * submitted from another executor) may have published its task and still
 * be on its way out when that task has run and the user, seeing the work
 * done, destroys the pool. Most executes make no touch of the pool after
 * letting their lock go: the decision to wake a worker (serex__pool_wake_need:
 * the loads of `spinning` and `sleepers`) is taken under put_lock (or the
 * level's lock), right after the publishing store. One that must wake or
 * grow holds the pool (struct serex__life, life_internal.h) before it lets
 * its lock go, and releases it after the wake-up. destroy, after joining,
 * takes each producer lock once (pool_quiesce_producers): an execute that
 * held one before has its hold counted by then; one after it sees SHUTDOWN
 * and touches nothing more. Then destroy detaches, and whoever is last,
 * destroy or the last waker, frees. A busy pool's execute pays nothing for
 * this: the hold is taken only on the path that takes `mu` anyway.
 * tests/model/life.pml checks the helper, with this execute's old order
 * (the touch after the publish, uncounted) as a mutation it catches.
 *
 * --- Hooks and placement ---
 * A new worker first pins itself (cpus) and runs on_thread_start
 * (serex__pool_thread_setup), inside its frame, so its hooks are tasks of
 * the pool for SEREX_EDEADLK. serex_pool_create waits for the verdicts of
 * the core threads it starts (`unreported`, under `mu`, signalled on
 * `term_cv`, which nobody awaits before create returns); if one was refused
 * it sets STOP: the others run on_thread_stop and exit, and create joins
 * every one. A refused extra thread leaves at once, like a retired one, and
 * its slot is free again. on_thread_stop runs on the way out, before the
 * worker stops counting in `live` or `retiring` (pool_thread.c). The task
 * hooks and `levels_on` (pool_level.c) are all the busy path reads that a
 * plain pool did not: a load from a line nobody writes, and a branch that
 * always goes the same way, for each.
 */
#include <stdio.h> /* snprintf for thread names */

#include "alloc_internal.h"
#include "common_internal.h"
#include "executor_internal.h"
#include "exec_class_internal.h"
#include "fork_internal.h"
#include "stats_internal.h"
#include "pool_internal.h"
#include "spinlock_internal.h"
#include "thread_internal.h"

#include "pool_types_internal.h"

static struct pool *pool_of(serex_executor *ex)
{
    return serex__container_of(ex, struct pool, base);
}

/* --- the worker --- */

/* Takes the next task: the levels are looked at only once in use. */
static bool worker_take(struct pool *p, struct slot *s,
                        struct serex__task_rec *out, bool *more)
{
    /* relaxed: a hint on the busy path; idle re-checks read it seq_cst
     * (pool_level.c's essay) */
    if (serex__unlikely(
            atomic_load_explicit(&p->levels_on, memory_order_relaxed)))
        return serex__pool_take_levels(p, s, out, more);
    return serex__pool_take(p, s, out, more);
}

int serex__pool_worker_main(void *arg)
{
    struct slot *s = arg;
    struct pool *p = s->p;
    struct serex__frame frame;
    struct serex__task_rec task;
    bool was_idle = true; /* a new thread came for the work it will find */
    enum idle_result r = IDLE_EXIT;

    /* Everything on this thread, hooks included, is a task of the pool
     * (for EDEADLK). */
    serex__frame_push(&frame, &p->base);
    if (!serex__pool_thread_setup(p, s)) {
        serex__frame_pop(&frame);
        return 0;
    }
    if (p->batching)
        serex__pool_self_slot = s; /* our executes go to our own queues */
    serex__pool_block_enter(p, s); /* its regions (pool_block.c) */
    for (;;) {
        bool more = false;

        if (!worker_take(p, s, &task, &more)) {
            /* relaxed: as the store of a task's fn below */
            atomic_store_explicit(&s->running, NULL, memory_order_relaxed);
            serex__pool_block_check(s);
            r = serex__pool_worker_idle(p, s);
            if (r != IDLE_AGAIN)
                break;
            was_idle = true;
            continue;
        }
        /* We took a batch, or came back from idle with more queued: make
         * sure a sleeper helps (it will steal or take from the ring). A
         * task in a next-task slot counts too: a spinner that leaves for
         * a task of its own may have been the one that the slot's push
         * left it to, and that task may wait for the slot's (found by
         * tests/model/pool_park_slot.pml: 3 workers, a task stranded) */
        if (more ||
            (was_idle && (serex__pool_queue_nonempty(p) ||
                          (p->batching && serex__pool_nexts_nonempty(p)))))
            serex__pool_signal_work(p);
        was_idle = false;
        /* relaxed: a picture for serex_dump, written by us only */
        atomic_store_explicit(&s->running, task.fn, memory_order_relaxed);
        if (serex__unlikely(task.t != 0)) /* watched (pool_watch.c) */
            serex__pool_watch_run(p, s, &task);
        else
            task.fn(task.arg);
        serex__stat_add(&s->done, 1);
    }
    /* the stop hook's executes go to the shared queue; its waits are no
     * regions */
    serex__pool_self_slot = NULL;
    serex__pool_block_leave(s);
    serex__pool_thread_exit(p, s, r == IDLE_RETIRED); /* last touch */
    serex__frame_pop(&frame);
    return 0;
}

/* --- the executor --- */

static void (*test_after_publish)(void *ctx);
static void *test_after_publish_ctx;

void serex__pool_test_after_publish(void (*fn)(void *ctx), void *ctx)
{
    test_after_publish_ctx = ctx;
    test_after_publish = fn;
}

unsigned serex__pool_sleepers(serex_executor *ex)
{
    /* relaxed: a snapshot for a test */
    return atomic_load_explicit(&pool_of(ex)->sleepers, memory_order_relaxed);
}

static void pool_free_final(struct pool *p);

/*
 * After a push, under the lock that published it (put_lock, or a level's):
 * whether a worker must be woken, and if so a hold on the pool for the
 * wake-up, taken before the lock is let go (see the essay: Destroy).
 */
static enum wake_need pool_published(struct pool *p)
{
    enum wake_need w = serex__pool_wake_need(p);

    if (serex__unlikely(w != WAKE_NONE))
        serex__life_hold(&p->life);
    return w;
}

/* The wake-up pool_published decided, and the hold's release: the last
 * touch of the pool by this execute (which may free it: destroy came). */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void
pool_wake_held(struct pool *p, enum wake_need w)
{
    if (test_after_publish != NULL)
        test_after_publish(test_after_publish_ctx);
    serex__pool_wake(p, w);
    if (serex__life_release(&p->life))
        pool_free_final(p);
}

/* destroy, after termination: an execute that published before takes
 * its hold before letting its lock go; one after sees SHUTDOWN. */
static void pool_quiesce_producers(struct pool *p)
{
    for (unsigned i = 0; i < p->ninj; i++) {
        serex__spin_lock(&p->inj[i].put_lock);
        serex__spin_unlock(&p->inj[i].put_lock);
    }
    for (unsigned i = 0; i < LEVELS_EXTRA; i++) {
        serex__spin_lock(&p->lv[i].lock);
        serex__spin_unlock(&p->lv[i].lock);
    }
}

/* One push: through a level's face, or (lv NULL) onto the ring. */
struct push {
    struct pool *p;
    struct level *lv;
    struct inject *q; /* the shard, when lv is NULL */
    serex_fn fn;
    void *arg;
    uint64_t stamp;
    uint64_t t;       /* the submit time, if timed */
    enum wake_need w; /* the wake-up it owes, with a hold (pool_published) */
};

/* A try that still wanted room after the spare's allocation failed. */
static int push_nomem(int rc, const struct ring_spare *sp)
{
    return rc == RING_NEED_ROOM && sp->nomem ? SEREX_ENOMEM : rc;
}

/* One try onto the ring, under put_lock. */
static int push_ring(struct push *u, struct ring_spare *sp)
{
    struct pool *p = u->p;
    struct inject *q = u->q;
    struct serex__task_rec r = {u->fn, u->arg, u->stamp, u->t};
    int rc = SEREX_EREJECTED;

    serex__spin_lock(&q->put_lock);
    /* relaxed: put_lock orders the flag against the pushes (see essay) */
    if (serex__likely(!(atomic_load_explicit(&p->state, memory_order_relaxed) &
                        ST_SHUTDOWN)))
        rc = push_nomem(serex__pool_ring_push(p, q, &r, 1, sp), sp);
    if (serex__likely(rc == SEREX_OK)) {
        q->accepted++;
        u->w = pool_published(p);
        if (serex__unlikely(r.t != 0) &&
            serex__obs_told()) /* as pool_execute */
            serex__obs_submit(&p->base, r.fn, r.stamp);
    } else if (rc != RING_NEED_ROOM)
        q->rejected++;
    serex__spin_unlock(&q->put_lock);
    return rc;
}

/* One try onto a level, under its lock. */
static int push_level(struct push *u, struct ring_spare *sp)
{
    struct level *lv = u->lv;
    int rc = SEREX_EREJECTED;

    serex__spin_lock(&lv->lock);
    /* relaxed: the level's lock orders the flag against the pushes, as
     * put_lock does for the ring (see the essay) */
    if (!(atomic_load_explicit(&u->p->state, memory_order_relaxed) &
          ST_SHUTDOWN))
        rc = push_nomem(
            serex__pool_level_push(u->p, lv, u->fn, u->arg, u->t, sp), sp);
    if (rc == SEREX_OK)
        u->w = pool_published(u->p);
    else if (rc != RING_NEED_ROOM)
        lv->rejected++;
    serex__spin_unlock(&lv->lock);
    return rc;
}

static int push_try(struct push *u, struct ring_spare *sp)
{
    return u->lv == NULL ? push_ring(u, sp) : push_level(u, sp);
}

/*
 * A push that wanted a bigger ring: allocate it with no lock held and try
 * again (ring_spare), until the push says something else; a failed
 * allocation makes the next try that still wants room say SEREX_ENOMEM.
 */
#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
static int
push_with_spare(struct push *u, struct ring_spare *sp)
{
    int rc;

    do {
        serex__free(sp->ring); /* a spare of a size no longer wanted */
        sp->ring = serex__pool_ring_alloc(sp->slots);
        sp->nomem = sp->ring == NULL;
        rc = push_try(u, sp);
    } while (rc == RING_NEED_ROOM);
    serex__free(sp->ring);
    serex__free(sp->old);
    return rc;
}

/* pool_execute and a face's: push, then the wake-up it owes, if any. */
static int pool_push(struct push *u)
{
    struct ring_spare sp = {NULL, 0, NULL, false};
    int rc;

    if (serex__unlikely(serex__forked_since(u->p->gen)))
        return SEREX_EREJECTED; /* a child: our threads are not here */
    rc = push_try(u, &sp);
    if (serex__unlikely(rc == RING_NEED_ROOM))
        rc = push_with_spare(u, &sp);
    /* Nothing below touches the pool unless a worker must be woken: then
     * the hold keeps it (see the essay: Destroy). */
    if (serex__unlikely(u->w != WAKE_NONE))
        pool_wake_held(u->p, u->w);
    return rc;
}

/* A face's execute (pool_level.c): a push onto its level. */
int serex__pool_push_level(struct level *lv, serex_fn fn, void *arg)
{
    struct push u = {lv->p, lv, NULL, fn, arg, 0, 0, WAKE_NONE};
    int rc;

    struct serex__task_rec r = {fn, arg, 0, 0};

    serex__pool_watch(lv->p, &r);
    u.t = r.t; /* a level's task has no id: no flow in a trace */
    rc = pool_push(&u);
    if (serex__unlikely(u.t != 0) && rc == SEREX_OK && serex__obs_told())
        serex__obs_submit(&lv->face, fn, 0);
    return rc;
}

/*
 * The NORMAL face's execute. From one of the pool's own workers: its own
 * queues (serex__pool_push_local), with the wake-up a push owes (no hold: a
 * worker of the pool keeps it alive). From anywhere else: the shared
 * queue's shard of the calling thread, the push written out straight
 * (pool_push's), with nothing on it a plain push did not have but the
 * wake-up decision under the lock.
 */
static int pool_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct pool *p = pool_of(ex);
    struct slot *me = serex__pool_self();
    struct ring_spare sp = {NULL, 0, NULL, false};
    struct serex__task_rec r = {fn, arg, serex__pool_stamp_next(), 0};
    struct inject *q;
    enum wake_need w = WAKE_NONE;
    int rc = SEREX_EREJECTED;

    serex__pool_watch(p, &r);
    if (me != NULL && me->p == p) {
        if (serex__unlikely(r.t != 0) && serex__obs_told()) /* a listener */
            serex__obs_submit(ex, fn, r.stamp);
        rc = serex__pool_push_local(p, me, r);
        if (rc == SEREX_OK)
            serex__pool_signal_work(p);
        return rc;
    }
    if (serex__unlikely(serex__forked_since(p->gen)))
        return SEREX_EREJECTED; /* a child: our threads are not here */
    q = serex__pool_stamp_shard(p, r.stamp);
    serex__spin_lock(&q->put_lock);
    /* relaxed: put_lock orders the flag against the pushes (see essay) */
    if (serex__likely(!(atomic_load_explicit(&p->state, memory_order_relaxed) &
                        ST_SHUTDOWN)))
        rc = serex__pool_ring_push(p, q, &r, 1, &sp);
    if (serex__likely(rc == SEREX_OK)) {
        q->accepted++;
        w = serex__pool_wake_need(p);
        /* under the lock: before any worker can begin it (its id is its
         * index, in a one-shard pool: known only now) */
        if (serex__unlikely(r.t != 0) && serex__obs_told())
            serex__obs_submit(ex, fn, r.stamp);
    } else if (rc != RING_NEED_ROOM)
        q->rejected++;
    if (serex__unlikely(w != WAKE_NONE)) /* the hold: see pool_published */
        serex__life_hold(&p->life);
    serex__spin_unlock(&q->put_lock);
    if (serex__likely(w == WAKE_NONE && rc != RING_NEED_ROOM))
        return rc; /* no touch of the pool after the unlock */
    if (rc == RING_NEED_ROOM) {
        struct push u = {p, NULL, q, fn, arg, r.stamp, r.t, WAKE_NONE};

        rc = push_with_spare(&u, &sp);
        w = u.w;
    }
    if (w != WAKE_NONE)
        pool_wake_held(p, w);
    return rc;
}

static void pool_wake_all(struct pool *p)
{
    serex__mutex_lock(&p->mu);
    serex__pool_wake_every(p);
    serex__mutex_unlock(&p->mu);
}

static void pool_shutdown(serex_executor *ex)
{
    struct pool *p = pool_of(ex);

    if (serex__forked_since(p->gen))
        return; /* a child: nothing of ours runs here */
    /* release: nothing to publish but the flag; parked workers read it
     * under mu, which we take next */
    atomic_fetch_or_explicit(&p->state, ST_SHUTDOWN, memory_order_release);
    pool_wake_all(p);
    serex__room_wake(); /* waiters for room retry: and are refused */
}

/*
 * Claims a worker's run queue and next-task slot (as a thief would),
 * straight into the slot's claim array (made at create: room for a full
 * run queue and the slot). Under every shard's locks: no refill can run;
 * no steal or local push is under way and none can start (STOP,
 * `moving`), so one take empties the run queue.
 */
static size_t slot_claim(struct slot *s)
{
    unsigned n = serex__runq_take(&s->q, s->claim, SEREX__RUNQ_CAP);

    if (serex__next_take(&s->next, &s->claim[n], NULL))
        n++;
    s->claim_n = n;
    return n;
}

/*
 * Empties every shard by moving its head to its tail, and claims every
 * worker's queues. Returns how many tasks it took. The shards' slots stay
 * as they are: no push can come any more (STOP), and it keeps idle
 * workers from shrinking a ring, so they are read after unlocking, where
 * on_pending may call back into the pool.
 */
static size_t normal_claim(struct pool *p)
{
    size_t n = 0;

    for (unsigned i = 0; i < p->ninj; i++) {
        serex__spin_lock(&p->inj[i].put_lock);
        serex__spin_lock(&p->inj[i].take_lock);
    }
    for (unsigned i = 0; i < p->ninj; i++) {
        struct inject *q = &p->inj[i];

        /* relaxed: both ends are ours while we hold both locks */
        q->claim_h = atomic_load_explicit(&q->head, memory_order_relaxed);
        q->claim_t = q->put_tail;
        atomic_store_explicit(&q->head, q->claim_t, memory_order_relaxed);
        q->tail_seen = q->claim_t;
        n += (size_t)(q->claim_t - q->claim_h);
    }
    for (unsigned i = 0; i < serex__pool_nslots(p); i++)
        n += slot_claim(serex__pool_slot(p, i));
    for (unsigned i = p->ninj; i-- > 0;) {
        serex__spin_unlock(&p->inj[i].take_lock);
        serex__spin_unlock(&p->inj[i].put_lock);
    }
    return n;
}

/*
 * One run of claimed tasks, in place: a shard's ring range, or a slot's
 * claim array (its run queue's records and its next task, copied out).
 */
struct claimed_run {
    struct serex__task_rec *ring;
    uint64_t mask, h, n; /* [h, h + n) of ring, modulo mask + 1 */
    uint64_t next;       /* the first not yet handed back */
};

static struct serex__task_rec *run_at(struct claimed_run *c, uint64_t k)
{
    return &c->ring[(c->h + k) & c->mask];
}

static void run_sift(struct claimed_run *c, uint64_t k, uint64_t n)
{
    for (uint64_t child; (child = 2 * k + 1) < n; k = child) {
        struct serex__task_rec t;

        if (child + 1 < n &&
            serex__pool_stamp_cmp(run_at(c, child), run_at(c, child + 1)) < 0)
            child++;
        if (serex__pool_stamp_cmp(run_at(c, k), run_at(c, child)) >= 0)
            return;
        t = *run_at(c, k);
        *run_at(c, k) = *run_at(c, child);
        *run_at(c, child) = t;
    }
}

/* Sorts a run by stamp, in place (heapsort: no memory, O(n log n)). */
static void run_sort(struct claimed_run *c)
{
    for (uint64_t k = c->n / 2; k-- > 0;)
        run_sift(c, k, c->n);
    for (uint64_t end = c->n; end-- > 1;) {
        struct serex__task_rec t = *run_at(c, 0);

        *run_at(c, 0) = *run_at(c, end);
        *run_at(c, end) = t;
        run_sift(c, 0, end);
    }
}

/*
 * Claimed run @i of NORMAL: shard i, or (i >= ninj) the claim array of
 * slot i - ninj (slot_claim). The cursor (`next`) lives in the shard or
 * slot.
 */
static struct claimed_run claimed_run_of(struct pool *p, unsigned i,
                                         uint64_t **next)
{
    if (i < p->ninj) {
        struct inject *q = &p->inj[i];

        *next = &q->claim_next;
        return (struct claimed_run){q->ring, q->mask, q->claim_h,
                                    q->claim_t - q->claim_h, 0};
    }
    {
        struct slot *s = serex__pool_slot(p, i - p->ninj);

        *next = &s->claim_next;
        return (struct claimed_run){s->claim, UINT64_MAX, 0, s->claim_n, 0};
    }
}

/* Sorts every claimed run in place. */
static void claimed_prepare(struct pool *p)
{
    uint64_t *next;

    for (unsigned i = 0; i < p->ninj + serex__pool_nslots(p); i++) {
        struct claimed_run c = claimed_run_of(p, i, &next);

        run_sort(&c);
        *next = 0;
    }
}

/*
 * Hands back NORMAL's claimed tasks, each submitting thread's in the
 * order it submitted them (promise 2b): every run sorted in place by
 * stamp, then merged, oldest first (a look at each run's head per task:
 * runs are shards and workers, a few dozen). Allocates nothing (a run
 * queue's records go to the claim array its slot was made with), so the
 * hand-back cannot fail.
 */
static void normal_hand_back(struct pool *p, serex_pending_fn on_pending,
                             void *ctx)
{
    claimed_prepare(p);
    for (;;) {
        struct claimed_run best = {NULL, 0, 0, 0, 0};
        uint64_t *best_next = NULL, *next;
        struct serex__task_rec *r;

        for (unsigned i = 0; i < p->ninj + serex__pool_nslots(p); i++) {
            struct claimed_run c = claimed_run_of(p, i, &next);

            if (*next != c.n &&
                (best_next == NULL ||
                 serex__pool_stamp_cmp(run_at(&c, *next),
                                       run_at(&best, *best_next)) < 0)) {
                best = c;
                best_next = next;
            }
        }
        if (best_next == NULL)
            return;
        r = run_at(&best, (*best_next)++);
        serex__hand_back(r->fn, r->arg, on_pending, ctx);
    }
}

static size_t pool_shutdown_now(serex_executor *ex, serex_pending_fn on_pending,
                                void *ctx)
{
    struct pool *p = pool_of(ex);
    struct level_claim high, low;
    size_t n;

    if (serex__forked_since(p->gen))
        return 0; /* a child: locks may be held by threads not here */

    /* seq_cst: put_lock and each level's lock order the flags against
     * every execute (see the essay); seq_cst against each slot's `moving`
     * flag (see pool_steal). Only the call that sets STOP takes anything:
     * the rest find nothing. */
    if (atomic_fetch_or_explicit(&p->state, ST_SHUTDOWN | ST_STOP,
                                 memory_order_seq_cst) &
        ST_STOP)
        return 0;
    serex__room_wake(); /* waiters for room retry: and are refused */
    /* Slots are made under mu, by a start that reads the flags there: one
     * before this hold is counted in what we read after it, one after it
     * sees STOP and makes none. So the slots we claim are all there are. */
    serex__mutex_lock(&p->mu);
    serex__mutex_unlock(&p->mu);
    /* seq_cst: after STOP (see pool_steal); pairs with its release drop */
    for (unsigned i = 0; i < serex__pool_nslots(p); i++)
        while (atomic_load_explicit(&serex__pool_slot(p, i)->moving,
                                    memory_order_seq_cst) != 0)
            serex__thread_yield();
    serex__pool_level_claim(&p->lv[LV_HIGH], &high);
    n = normal_claim(p);
    serex__pool_level_claim(&p->lv[LV_LOW], &low);
    pool_wake_all(p);
    /* By level, highest first */
    n += serex__pool_level_hand_back(&high, on_pending, ctx);
    normal_hand_back(p, on_pending, ctx);
    n += serex__pool_level_hand_back(&low, on_pending, ctx);
    return n;
}

static int pool_await(serex_executor *ex, int64_t timeout_ns)
{
    struct pool *p = pool_of(ex);
    int64_t deadline = serex__deadline(timeout_ns);
    int rc = SEREX_OK;

    if (serex__forked_since(p->gen))
        return SEREX_OK; /* a child: nothing of ours will ever run here */
    /* acquire: pairs with the release store in thread_check_terminated;
     * a 0 timeout only looks, it never waits for mu */
    if (atomic_load_explicit(&p->terminated, memory_order_acquire))
        return SEREX_OK;
    if (timeout_ns == 0)
        return SEREX_ETIMEDOUT;
    serex__mutex_lock(&p->mu);
    /* relaxed: under mu, which orders it */
    while (!atomic_load_explicit(&p->terminated, memory_order_relaxed)) {
        if (timeout_ns == 0 || serex__now_ns() >= deadline) {
            rc = SEREX_ETIMEDOUT;
            break;
        }
        serex__cond_wait_until(&p->term_cv, &p->mu, deadline);
    }
    serex__mutex_unlock(&p->mu);
    return rc;
}

/* Frees the pool's memory, and nothing else. */
static void pool_free_memory(struct pool *p)
{
    for (unsigned i = 0; i < LEVELS_EXTRA; i++)
        serex__free(p->lv[i].ring);
    serex__free(p->cpus);
    for (unsigned i = 0; p->inj != NULL && i < p->ninj; i++)
        serex__free(p->inj[i].ring);
    serex__free(p->inj);
    serex__pool_slots_free(p);
    serex__pool_metrics_free(p);
    serex__free(p);
}

/* Frees the pool's locks and memory: its threads are joined, and no
 * execute holds it any more. */
static void pool_free_final(struct pool *p)
{
    serex__cond_destroy(&p->term_cv);
    serex__mutex_destroy(&p->mu);
    pool_free_memory(p);
}

static void pool_destroy(serex_executor *ex)
{
    struct pool *p = pool_of(ex);

    if (serex__forked_since(p->gen)) {
        /* A child: no thread to join, and a lock may be held by a thread
         * that is not here. Give back the memory only; what was queued is
         * dropped with it. */
        pool_free_memory(p);
        return;
    }
    pool_await(ex, SEREX_FOREVER); /* serex_destroy shut it down */
    serex__pool_threads_join(p);
    serex__pool_dog_stop(p);
    pool_quiesce_producers(p);
    if (serex__life_detach(&p->life))
        pool_free_final(p); /* else the last execute still waking frees */
}

static void pool_stats(serex_executor *ex, serex_stats *out);

/* A pool runs on threads of its own: it waits on no other executor. */
const struct serex__exec_class serex__pool_class = {
    SEREX__CLASS_OPS(pool_execute, pool_shutdown, pool_shutdown_now,
                     pool_await),
    "pool",
    pool_stats,
    NULL,
    pool_destroy,
    serex__pool_metrics_enable,
    serex__pool_metrics,
    SEREX__CLASS_REG(struct pool, base, reg, "pool", serex__pool_describe),
};

/* --- creation --- */

/*
 * Hooks, stack and placement: SEREX_EINVAL for what cannot be honoured
 * here (checked before any thread starts), SEREX_ENOMEM; copies cpus.
 */
static int pool_config_threads(const serex_pool_config *c, struct pool *p)
{
    struct serex__thread_opts opts = {.stack_size = c->stack_size};

    if ((c->ncpus != 0 && c->cpus == NULL) ||
        (c->cpu_per_worker && c->ncpus == 0) ||
        c->ncpus > SIZE_MAX / sizeof *p->cpus ||
        (c->ncpus != 0 && serex__cpus_check(c->cpus, c->ncpus) != SEREX_OK) ||
        serex__thread_opts_check(&opts) != SEREX_OK)
        return SEREX_EINVAL;
    p->on_thread_start = c->on_thread_start;
    p->on_thread_stop = c->on_thread_stop;
    p->on_task_start = c->on_task_start;
    p->on_task_end = c->on_task_end;
    p->on_task_begin = c->on_task_begin;
    p->on_task_finish = c->on_task_finish;
    p->hook_ctx = c->hook_ctx;
    p->stack_size = c->stack_size;
    if (c->on_task_start != NULL || c->on_task_end != NULL ||
        c->on_task_begin != NULL || c->on_task_finish != NULL)
        /* relaxed: before any thread or submit can see the pool */
        atomic_store_explicit(&p->watch, WATCH_HOOKS, memory_order_relaxed);
    p->thread_setup = c->on_thread_start != NULL || c->ncpus != 0;
    if (c->ncpus == 0)
        return SEREX_OK;
    p->cpus = serex__alloc(c->ncpus * sizeof *p->cpus);
    if (p->cpus == NULL)
        return SEREX_ENOMEM;
    for (size_t i = 0; i < c->ncpus; i++)
        p->cpus[i] = c->cpus[i];
    p->ncpus = c->ncpus;
    p->cpu_per_worker = c->cpu_per_worker;
    return SEREX_OK;
}

/*
 * Blocking regions, the watchdog and the sizes now (pool_block.c):
 * SEREX_EINVAL for a negative starvation_ns. After the sizes are known.
 */
static int pool_config_blocking(const serex_pool_config *c, struct pool *p)
{
    if (c->starvation_ns < 0)
        return SEREX_EINVAL;
    p->max_blocking = c->max_blocking == 0 ? DEFAULT_MAX_BLOCKING
                      : c->max_blocking == SEREX_POOL_BLOCKING_NONE
                          ? 0
                          : c->max_blocking;
    p->mark_waits = c->mark_waits;
    p->starvation_ns = c->starvation_ns;
    /* relaxed (all): before any thread or submit can see the pool */
    atomic_store_explicit(&p->want_core, p->core, memory_order_relaxed);
    atomic_store_explicit(&p->want_max, p->max, memory_order_relaxed);
    atomic_store_explicit(&p->growable, p->max > p->core, memory_order_relaxed);
    return SEREX_OK;
}

/* Resolves defaults; SEREX_EINVAL for contradictory values; SEREX_ENOMEM. */
static int pool_config(const serex_pool_config *cfg, struct pool *p)
{
    serex_pool_config c = {0};

    if (cfg != NULL)
        c = *cfg;
    if (c.keep_alive_ns < 0 ||
        (c.max_threads != 0 && c.threads != 0 && c.max_threads < c.threads))
        return SEREX_EINVAL;
    p->core = c.threads;
    if (p->core == 0) { /* serex_cpu_count(), never above an explicit max */
        p->core = serex__cpu_usable();
        if (c.max_threads != 0 && c.max_threads < p->core)
            p->core = c.max_threads;
    }
    p->max = c.max_threads != 0 ? c.max_threads : p->core;
    p->keep_alive_ns = c.keep_alive_ns != 0 ? c.keep_alive_ns
                                            : DEFAULT_KEEP_ALIVE_NS;
    p->capacity = c.queue_capacity;
    if (pool_config_blocking(&c, p) != SEREX_OK)
        return SEREX_EINVAL;
    p->batching = p->max == p->core && p->capacity == 0;
    p->named = c.name != NULL && c.name[0] != '\0';
    snprintf(p->name, sizeof p->name, "%s", p->named ? c.name : "serex");
    return pool_config_threads(&c, p);
}

/*
 * The workers' slots and the shared queue's shards: one shard unless the
 * pool is fixed and unbounded (batching), then one per worker (a power of
 * two, at most INJECT_MAX), so outside threads spread over them.
 */
static int pool_alloc_queues(struct pool *p)
{
    unsigned n = 1;

    while (p->batching && n < p->max && n < INJECT_MAX)
        n *= 2;
    p->nslots0 = p->max; /* chunk 0: a slot per worker of max_threads */
    if (serex__pool_slots_reserve(p, p->max) != SEREX_OK)
        return SEREX_ENOMEM;
    p->inj = serex__calloc_aligned(SEREX__CACHELINE, n * sizeof *p->inj);
    if (p->inj == NULL)
        return SEREX_ENOMEM;
    p->ninj = n;
    for (unsigned i = 0; i < n; i++) {
        p->inj[i].ring = serex__pool_ring_alloc(RING_MIN);
        if (p->inj[i].ring == NULL)
            return SEREX_ENOMEM; /* pool_free_memory frees those made */
        p->inj[i].mask = RING_MIN - 1;
    }
    return SEREX_OK;
}

static int pool_init_sync(struct pool *p)
{
    if (serex__mutex_init(&p->mu) != SEREX_OK)
        return SEREX_ENOMEM;
    if (serex__cond_init(&p->term_cv) != SEREX_OK)
        goto fail_mu;
    return SEREX_OK;
fail_mu:
    serex__mutex_destroy(&p->mu);
    return SEREX_ENOMEM;
}

int serex_pool_create(const serex_pool_config *cfg, serex_executor **out)
{
    struct pool *p;
    int rc;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    p = serex__calloc_aligned(SEREX__CACHELINE, sizeof *p);
    if (p == NULL)
        return SEREX_ENOMEM;
    p->gen = serex__fork_register();
    atomic_init(&p->spin_ns, SPIN_NS);
    rc = pool_config(cfg, p);
    if (rc != SEREX_OK) {
        pool_free_memory(p);
        return rc;
    }
    if (pool_alloc_queues(p) != SEREX_OK || pool_init_sync(p) != SEREX_OK) {
        pool_free_memory(p);
        return SEREX_ENOMEM;
    }
    p->base.ops = &serex__pool_class.ops;
    serex__pool_levels_init(p);
    rc = serex__pool_threads_start_core(p);
    if (rc == SEREX_OK && serex__pool_dog_start(p) != SEREX_OK) {
        rc = SEREX_ENOMEM; /* the core threads leave, as for a refusal */
        /* relaxed: the broadcast under mu orders it for parkers */
        atomic_fetch_or_explicit(&p->state, ST_SHUTDOWN | ST_STOP,
                                 memory_order_relaxed);
        pool_wake_all(p);
    }
    if (rc != SEREX_OK) {
        serex__pool_threads_join(p); /* the threads that did start */
        pool_free_final(p);
        return rc;
    }
    serex__exec_register(&p->base,
                         p->named ? p->name : NULL); /* serex_dump lists it */
    *out = &p->base;
    return SEREX_OK;
}

/* --- resizing --- */

int serex_pool_resize(serex_executor *pool, unsigned threads,
                      unsigned max_threads)
{
    serex_executor *ex = serex_pool_executor_at(pool,
                                                SEREX_POOL_PRIORITY_NORMAL);
    struct pool *p;

    if (ex == NULL ||
        (max_threads != 0 && threads != 0 && max_threads < threads))
        return SEREX_EINVAL;
    p = pool_of(ex);
    if (threads == 0) { /* as create: the CPUs we may use, never above a max */
        threads = serex__cpu_usable();
        if (max_threads != 0 && max_threads < threads)
            threads = max_threads;
    }
    if (max_threads == 0)
        max_threads = threads;
    if (serex__forked_since(p->gen))
        return SEREX_EREJECTED; /* a child: our threads are not here */
    return serex__pool_threads_resize(p, threads, max_threads);
}

/* --- for tests --- */

unsigned serex__pool_threads(serex_executor *ex)
{
    /* relaxed: a snapshot for a test */
    return atomic_load_explicit(&pool_of(ex)->live, memory_order_relaxed);
}

unsigned long serex__pool_spin_resets(serex_executor *ex)
{
    /* relaxed: a count, read once the test's tasks are done */
    return atomic_load_explicit(&pool_of(ex)->spin_resets,
                                memory_order_relaxed);
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

static void pool_stats(serex_executor *ex, serex_stats *out)
{
    struct pool *p = pool_of(ex);
    uint64_t waiting = 0, completed = 0, pushed = 0, refused = 0;

    /*
     * `queued` must be a value the pool had recently, never more (a
     * bounded pool's users check it against the capacity). A task moves
     * from the ring to a batch, never back, and a batch's head only
     * follows its tail: so the batches are read before the ring, and each
     * batch's tail before its head. A task that moves while we read is
     * then missed, never counted twice, and a worker that runs several
     * tasks between our two loads cannot make head..tail span them.
     */
    for (unsigned i = 0; i < serex__pool_nslots(p); i++) {
        struct slot *s = serex__pool_slot(p, i);
        /* acquire: the head load below comes after it (x86 keeps loads
         * in order anyway; ARM need not) */
        uint64_t t = atomic_load_explicit(&s->q.tail, memory_order_acquire);
        /* relaxed: ordered after the tail by its acquire */
        uint64_t h = atomic_load_explicit(&s->q.head, memory_order_relaxed);

        /* relaxed (all): statistics */
        completed += atomic_load_explicit(&s->done, memory_order_relaxed);
        pushed += atomic_load_explicit(&s->pushed, memory_order_relaxed);
        refused += atomic_load_explicit(&s->refused, memory_order_relaxed);
        waiting += t > h ? t - h : 0;
        waiting += serex__next_empty(&s->next) ? 0 : 1;
    }
    /* the lock's acquire orders the rings' reads after the batches' */
    out->submitted = 0;
    out->rejected = 0;
    for (unsigned i = 0; i < p->ninj; i++) {
        struct inject *q = &p->inj[i];

        serex__spin_lock(&q->put_lock);
        out->submitted += q->accepted;
        out->rejected += q->rejected;
        /* relaxed: head only grows, so this is at most the ring's count */
        waiting += q->put_tail -
                   atomic_load_explicit(&q->head, memory_order_relaxed);
        serex__spin_unlock(&q->put_lock);
    }
    out->submitted += pushed;
    out->rejected += refused;
    out->completed = completed;
    for (unsigned i = 0; i < LEVELS_EXTRA; i++) {
        struct level *lv = &p->lv[i];

        serex__spin_lock(&lv->lock);
        /* relaxed (both): under the lock */
        out->submitted += atomic_load_explicit(&lv->tail, memory_order_relaxed);
        out->rejected += lv->rejected;
        waiting += atomic_load_explicit(&lv->tail, memory_order_relaxed) -
                   atomic_load_explicit(&lv->head, memory_order_relaxed);
        serex__spin_unlock(&lv->lock);
    }
    out->queued = waiting;
    out->threads = atomic_load_explicit(&p->live, memory_order_relaxed);
    out->name = p->named ? p->name : NULL; /* NULL: the kind, "pool" */
}
