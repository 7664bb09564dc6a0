/* SPDX-License-Identifier: MIT */
/*
 * pool.c - the thread pool: fixed or elastic, bounded or unbounded queue.
 *
 * --- The shared queue: shards ---
 * Tasks from outside the pool go to a shared queue made of shards (struct
 * inject): one for a bounded or elastic pool, one per worker (a power of
 * two, at most INJECT_MAX) for a fixed, unbounded one. A thread always
 * submits to the shard its thread number picks (stamps, below), so with
 * as many shards as producers no two producers share a lock or a line,
 * and one thread's tasks stay in its order. Each shard is a growable ring
 * of task records with two spinlocks, one per end (the two-lock queue of
 * Michael and Scott, and of the JDK's LinkedBlockingQueue, on an array).
 * Producers write slot `tail` under `put_lock` and publish the new `tail`;
 * workers copy slots from `head` under `take_lock` (a batch at a time,
 * see below) and publish the new `head`. Each end keeps a stale copy of
 * the other end's index and re-reads it only when the copy says empty
 * (workers) or full (producers), so in a steady stream a worker touches
 * the producers' line once per run of tasks, not once per task. Nothing
 * is allocated per task. A full ring is doubled by its producer under
 * both locks (the allocation made with no lock held: ring_spare); an idle
 * worker shrinks an empty grown one back to RING_MIN. A worker takes from
 * the shards starting at its own; one whose `take_lock` is busy is passed
 * over (trylock), and waited for only if no other shard had anything, so
 * no worker spins behind another that was preempted holding it.
 *
 * --- Run queues, the next-task slot, stealing ---
 * A fixed, unbounded pool's worker has a run queue of its own
 * (pool_runq_internal.h: Go's runq, 256 records) and a next-task slot. A
 * task one of the pool's workers submits to its own pool goes to that
 * worker's slot; the task there before moves to the back of its run
 * queue. So a serial handing over to the next serial, a continuation or a
 * lane's drain runs next on the same core, in cache, and writes no line
 * another core writes (Tokio's LIFO slot, Go's runnext). At most NEXT_RUN
 * slot tasks run in a row, then the run queue's oldest, so a chain that
 * keeps refilling the slot does not starve the run queue. A yield (a
 * serial's, lane's or limiter's batch end, serex__op_yield) goes to the
 * back of the run queue instead: promise 4's turn-taking holds. A full
 * run queue sends its older half to the worker's shard (runq_overflow). A
 * worker whose queues are empty steals half of another's run queue, then
 * takes a batch (up to half a shard, at most REFILL_MAX) from the shared
 * queue into its run queue, then steals a next-task slot, but only one
 * whose task has waited SLOT_STEAL_NS behind a busy owner (Go waits too
 * before it takes runnext): stealing slots at once cost Tokio 23-32 % at
 * message passing, and never stealing them strands a task behind a long
 * one (tokio#4941) or behind a task that waits for it. Every 61st task a
 * worker looks at the shared queue first (once the last batch it took
 * from there has left its run queue, so one thread's tasks keep their
 * order on a one-worker pool): tasks from outside are never starved by
 * workers feeding themselves.
 * A local push and a steal move tasks between queues in steps, so each
 * brackets itself with its slot's `moving` flag and gives up (a push says
 * SEREX_EREJECTED) once it sees STOP; shutdown_now sets STOP, waits until
 * no slot is moving, and only then claims (see Shutdown).
 * The spinner reads the run queues and slots only every 16th look (the
 * shards at every one): each is a line its owner writes at every task. A
 * worker that took more than one task wakes a sleeper if no one spins,
 * exactly as a producer does; a local push makes the same check.
 *
 * --- Stamps and the hand-back order ---
 * Every task carries a stamp: its submitting thread's number and that
 * thread's count of submissions (stamp_next: thread-local, no shared
 * line). shutdown_now claims every shard and every worker's queues, sorts
 * each claimed run in place by stamp and merges them (normal_hand_back):
 * each thread's tasks come back in the order it submitted them, wherever
 * they waited (promise 2b). A pool with one shard stamps each task with
 * its index there instead: one total order, as before.
 *
 * --- Parking: who sleeps, who wakes, why no wake-up is lost ---
 * A worker that finds the queue empty becomes the one spinner if there is
 * none (`spinning` 0 -> 1): it polls the queue for the spin window
 * (pausing, then yielding its core to any thread that wants it), so a
 * burst or a ping-pong never pays a futex wake. The window adapts between
 * SPIN_MIN_NS and SPIN_NS (spin_adapt): a trickle of work no longer keeps
 * a core spinning between tasks. Every other idle worker parks at once
 * (at most one spins: on a 2-core machine two spinners would steal the
 * producer's core). To park, a worker takes `mu`, increments `sleepers`,
 * (the spinner then clears `spinning`), re-checks every shard, run
 * queue and level, and waits on `work_cv` for a wake-up token (`wakeups`).
 * A next-task slot's task counts in that re-check for the spinner, and
 * for the others only while no one spins (they come back to spin): the
 * spinner steals it once it has waited, and idle workers do not wake for
 * every message a busy worker passes to itself. A local push publishes
 * its queue's tail seq_cst and makes the producer's loads below, so the
 * handshake covers run queues and slots as it covers the shards.
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
 * A wake-up hands over the spinner's flag when no one spins: the waker sets
 * `spinning` (a CAS from 0, under `mu`) and marks the token (`spin_handed`);
 * the worker that takes that token, whoever it is, is the spinner from
 * then on and clears the flag only as a spinner does (found work: clear,
 * then take; window over: announce, clear, re-check under `mu`). So a
 * producer that sees the flag set before the woken worker runs leaves its
 * task to that worker, who looks after clearing: the handshake above, with
 * the taker as the spinner. Without it, each execute of a burst that came
 * before the woken worker ran woke one more sleeper, a system call per
 * task: with 16 workers and one producer on a 16-core machine,
 * pool_throughput fell to 0.8M tasks/s. tests/model/pool_park.pml checks
 * the handshake and the hand-over with spin; tests/model/pool_runq.pml
 * the run queue, the slot, their steals and shutdown_now's claim.
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
 * --- Threads ---
 * Each worker's life (start, park with the keep-alive, retire, grow, stop)
 * is one state machine in pool_thread.c, with its essay and a spin model
 * (tests/model/pool_threads.pml). This file calls it where the idle
 * protocol meets it: a producer that finds no spinner and no sleeper on an
 * elastic pool grows it; a worker parks through it.
 *
 * --- Destroy, and executes still returning ---
 * destroy awaits termination (every thread has made its last touch), joins
 * the threads, and frees the pool. But an execute by a thread that is not
 * the user's (a continuation, a group's notification, a wrapper's drain
 * submitted from another executor) may have published its task and still
 * be on its way out when that task has run and the user, seeing the work
 * done, destroys the pool. Most executes make no touch of the pool after
 * letting their lock go: the decision to wake a worker (pool_wake_need:
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
 * (serex__pool_thread_setup), inside its frame, so its hooks are tasks of the pool
 * for SEREX_EDEADLK. serex_pool_create waits for the verdicts of the core
 * threads it starts (`unreported`, under `mu`, signalled on `term_cv`,
 * which nobody awaits before create returns); if one was refused it sets
 * STOP: the others run on_thread_stop and exit, and create joins every
 * one. A refused extra thread leaves at once, like a retired one, and its
 * slot is free again. on_thread_stop runs on the way out, before the
 * worker stops counting in `live` or `retiring` (see Threads). The task
 * hooks and `levels_on` (below) are all the busy path reads that a plain
 * pool did not: a load from a line nobody writes, and a branch that always
 * goes the same way, for each.
 *
 * --- Priority levels ---
 * The ring above is level NORMAL, the pool's own executor. HIGH and LOW
 * each have a face (an executor of their own, serex_pool_executor_at) and
 * a plain ring under one spinlock for both ends (struct level): they are
 * not the hot path. A level's ring is allocated at its first task
 * (LEVEL_RING_MIN slots), doubled when full and freed when a grown one
 * empties (promise 9). A face's execute follows the ring's rules: it reads
 * the state flags under the level's lock, publishes its tail seq_cst (the
 * park handshake) and calls pool_signal_work, as pool_execute does; a
 * bounded level signals the places it frees, as the ring does.
 * Workers look at the levels only once `levels_on` is set, by the first
 * serex_pool_executor_at of HIGH or LOW; from then on a worker takes from
 * HIGH, else NORMAL (its queues, a steal, the shards), else LOW: strict
 * priority, checked before every task, batched ones included.
 * No task waits for a stale `levels_on`. A face comes only from
 * serex_pool_executor_at, after the flag's seq_cst store (or an acquire
 * load that saw it), so every push through it follows the store in the
 * seq_cst total order. The idle re-checks (the spinner's poll,
 * worker_park's) read the flag seq_cst: when the handshake needs the
 * worker to see a push (the producer's load of `sleepers` or `spinning`
 * came first), the re-check comes after that load, hence after the
 * flag's store: it sees the flag, then the level's tail. The busy path
 * reads the flag relaxed: a stale 0 there only lets a NORMAL task start
 * before a HIGH one that raced with it, an order that two racing
 * submissions were never promised.
 * Shutdown: whoever must not miss a push to a level takes its lock after
 * reading the flags (pool_drained, shutdown_now), as with `put_lock`.
 * shutdown_now hands back HIGH, then NORMAL (promise 2b's order),
 * then LOW. queue_capacity bounds each level's waiting tasks on its own:
 * one count across levels would put a shared counter on the ring's path.
 */
#include <stdio.h>  /* snprintf for thread names */

#include "alloc_internal.h"
#include "common_internal.h"
#include "executor_internal.h"
#include "exec_class_internal.h"
#include "fork_internal.h"
#include "op_internal.h"
#include "stats_internal.h"
#include "pool_internal.h"
#include "spinlock_internal.h"
#include "thread_internal.h"

#include "pool_types_internal.h"

static const struct serex__exec_class pool_class;

static struct pool *pool_of(serex_executor *ex)
{
    return serex__container_of(ex, struct pool, base);
}

/* --- the shared queue: its shards (see the essay) --- */

static struct serex__task_rec *ring_alloc(uint64_t slots)
{
    return serex__alloc_aligned(SEREX__CACHELINE,
                                slots * sizeof(struct serex__task_rec));
}

/*
 * A bigger ring for a full one (a shard's, or a level's), allocated with
 * no lock held: a push that finds no room says RING_NEED_ROOM and how many
 * slots it wants; its caller lets the lock go, allocates, takes the lock
 * again and pushes once more, and the push swaps the spare in if it is
 * still the size wanted (else it asks again). The replaced ring is freed
 * after the lock is let go too. A spinlock is then held only for the copy
 * of the live slots, never across the allocator.
 */
#define RING_NEED_ROOM 1 /* not a status: the push wants sp->slots slots */

struct ring_spare {
    struct serex__task_rec *ring; /* NULL, or sp->slots slots */
    uint64_t slots;
    struct serex__task_rec *old; /* replaced under the lock, freed after */
    bool nomem;                  /* the spare's allocation failed */
};

/* Copies the live slots [head, tail) into @to, of mask @to_mask. Both
 * locks held. Returns the old ring, for the caller to free unlocked. */
static struct serex__task_rec *ring_move(struct inject *q,
                                         struct serex__task_rec *to,
                                         uint64_t to_mask)
{
    /* relaxed: head changes under take_lock, which we hold */
    uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
    struct serex__task_rec *old = q->ring;

    for (uint64_t i = h; i != q->put_tail; i++)
        to[i & to_mask] = q->ring[i & q->mask];
    q->ring = to;
    q->mask = to_mask;
    return old;
}

/* The spare, if it has @slots slots: taken (true). Else asks for them. */
static bool spare_take(struct ring_spare *sp, uint64_t slots,
                       struct serex__task_rec **out)
{
    if (sp->ring == NULL || sp->slots != slots) {
        sp->slots = slots;
        return false;
    }
    *out = sp->ring;
    sp->ring = NULL;
    return true;
}

/* The ring is full: double it with the spare. Under put_lock. */
static int ring_grow(struct inject *q, struct ring_spare *sp)
{
    uint64_t slots = (q->mask + 1) * 2;
    struct serex__task_rec *bigger;

    if (slots <= q->mask + 1)
        return SEREX_ENOMEM; /* no bigger ring can be counted */
    if (!spare_take(sp, slots, &bigger))
        return RING_NEED_ROOM;
    serex__spin_lock(&q->take_lock);
    sp->old = ring_move(q, bigger, slots - 1);
    serex__spin_unlock(&q->take_lock);
    /* relaxed: a hint, re-checked under both locks */
    atomic_store_explicit(&q->ring_grown, 1, memory_order_relaxed);
    return SEREX_OK;
}

/* The stale head says no room for @n more: look again, then grow or say
 * EFULL. Under put_lock. */
static int ring_make_room(struct pool *p, struct inject *q, uint64_t n,
                          struct ring_spare *sp)
{
    uint64_t used;

    /* acquire: pairs with the release store of head in shard_take, so
     * the workers' reads of the slots we are about to reuse are done;
     * seq_cst: the look a waiter for room makes after it counts itself
     * (serex_execute_wait's handshake, executor.c) */
    q->head_seen = atomic_load_explicit(&q->head, memory_order_seq_cst);
    used = q->put_tail - q->head_seen;
    if (p->capacity != 0 && used + n > p->capacity) {
        serex__room_full(); /* a serex_execute_wait may park: we signal */
        return SEREX_EFULL;
    }
    while (used + n > q->mask + 1) {
        int rc = ring_grow(q, sp);

        if (rc != SEREX_OK)
            return rc;
    }
    return SEREX_OK;
}

/* Appends @n tasks. Under put_lock. RING_NEED_ROOM: see ring_spare. */
static int ring_push(struct pool *p, struct inject *q,
                     const struct serex__task_rec *r, unsigned n,
                     struct ring_spare *sp)
{
    uint64_t t = q->put_tail, used = t - q->head_seen;

    if (serex__unlikely(used + n > q->mask + 1 ||
                        (p->capacity != 0 && used + n > p->capacity))) {
        int rc = ring_make_room(p, q, n, sp);

        if (rc != SEREX_OK)
            return rc;
    }
    for (unsigned i = 0; i < n; i++) {
        q->ring[(t + i) & q->mask] = r[i];
        if (!p->batching) /* one shard: its index is the order */
            q->ring[(t + i) & q->mask].stamp = t + i;
    }
    q->put_tail = t + n;
    /*
     * seq_cst: the publishing half of the park handshake (see the essay):
     * ordered before the producer's loads of spinning and sleepers. Its
     * release half makes the slots written above visible to the worker
     * that reads this tail with acquire.
     */
    atomic_store_explicit(&q->tail, t + n, memory_order_seq_cst);
    return SEREX_OK;
}

static bool shard_nonempty(struct inject *q)
{
    /* seq_cst (both): the re-check half of the park handshake (essay) */
    return atomic_load_explicit(&q->tail, memory_order_seq_cst) !=
           atomic_load_explicit(&q->head, memory_order_seq_cst);
}

static bool queue_nonempty(struct pool *p)
{
    for (unsigned i = 0; i < p->ninj; i++)
        if (shard_nonempty(&p->inj[i]))
            return true;
    return false;
}

/*
 * Takes up to @max of a shard's oldest tasks (at most half of what it
 * holds, so the others get their share): the first into *out, the rest
 * into our run queue, which is empty. Under take_lock. Returns how many.
 */
static unsigned shard_take(struct pool *p, struct inject *q, struct slot *me,
                           struct serex__task_rec *out, unsigned max)
{
    /* relaxed: head changes only under take_lock, which we hold */
    uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
    uint64_t avail;
    unsigned n;

    if (h == q->tail_seen)
        /* acquire: pairs with the store in ring_push; slots are written */
        q->tail_seen = atomic_load_explicit(&q->tail, memory_order_acquire);
    avail = q->tail_seen - h;
    if (avail == 0)
        return 0;
    /*
     * An elastic pool takes one at a time: it starts a thread when a task
     * finds every worker busy, and a task parked in a busy worker's queue
     * would not. So does a bounded one: its capacity counts every task
     * waiting to start, and tasks in a run queue would escape the count.
     */
    n = avail >= 2 * (uint64_t)max ? max : (unsigned)((avail + 1) / 2);
    if (n > max) /* max 1 and 3 waiting: half rounds up to 2 */
        n = max;
    *out = q->ring[h & q->mask];
    for (unsigned i = 1; i < n; i++)
        serex__runq_put_at(&me->q, i - 1, &q->ring[(h + i) & q->mask]);
    /* release: our reads of the slots happen-before a producer reuses
     * them; seq_cst when bounded: it frees places, the store a waiter for
     * room must see before the freer looks for waiters (executor.c) */
    atomic_store_explicit(&q->head, h + n,
                          p->capacity != 0 ? memory_order_seq_cst
                                           : memory_order_release);
    if (n > 1) /* seq_cst: publishes them to thieves (see the runq) */
        serex__runq_publish(&me->q, n - 1);
    /* relaxed: tail is ours */
    me->batch_end = atomic_load_explicit(&me->q.tail, memory_order_relaxed);
    return n;
}

/*
 * Takes from the shared queue, starting at our own shard: a shard whose
 * consumer lock is busy is passed over (someone is taking from it), and
 * waited for only if no other shard had anything. Returns how many.
 */
static unsigned inject_take(struct pool *p, struct slot *me,
                            struct serex__task_rec *out, unsigned max)
{
    unsigned self = (unsigned)(me - p->slots), busy = p->ninj, n = 0;

    for (unsigned k = 0; k < p->ninj && n == 0; k++) {
        unsigned i = (self + k) & (p->ninj - 1);
        struct inject *q = &p->inj[i];

        /* relaxed (both): a look; shard_take reads under the lock */
        if (atomic_load_explicit(&q->tail, memory_order_relaxed) ==
            atomic_load_explicit(&q->head, memory_order_relaxed))
            continue;
        if (!serex__spin_trylock(&q->take_lock)) {
            busy = busy == p->ninj ? i : busy;
            continue;
        }
        n = shard_take(p, q, me, out, max);
        serex__spin_unlock(&q->take_lock);
    }
    if (n == 0 && busy != p->ninj) {
        serex__spin_lock(&p->inj[busy].take_lock);
        n = shard_take(p, &p->inj[busy], me, out, max);
        serex__spin_unlock(&p->inj[busy].take_lock);
    }
    if (n != 0 && p->capacity != 0)
        serex__room_made(); /* places freed: wake serex_execute_wait */
    return n;
}

/* An idle worker gives a grown, empty ring back (memory after a burst). */
static void shard_try_shrink(struct pool *p, struct inject *q)
{
    struct serex__task_rec *small;

    /* relaxed: a hint; everything is re-checked under both locks */
    if (!atomic_load_explicit(&q->ring_grown, memory_order_relaxed))
        return;
    small = ring_alloc(RING_MIN);
    if (small == NULL)
        return; /* keep the big one; nothing is lost */
    serex__spin_lock(&q->put_lock);
    serex__spin_lock(&q->take_lock);
    /* relaxed: shutdown_now sets STOP before taking these locks */
    if (q->mask + 1 > RING_MIN && !shard_nonempty(q) &&
        !(atomic_load_explicit(&p->state, memory_order_relaxed) & ST_STOP)) {
        small = ring_move(q, small, RING_MIN - 1); /* the big one: freed */
        /* relaxed: a hint for the next shrink, under both locks */
        atomic_store_explicit(&q->ring_grown, 0, memory_order_relaxed);
    }
    serex__spin_unlock(&q->take_lock);
    serex__spin_unlock(&q->put_lock);
    serex__free(small);
}

void serex__pool_ring_try_shrink(struct pool *p)
{
    for (unsigned i = 0; i < p->ninj; i++)
        shard_try_shrink(p, &p->inj[i]);
}

/* --- stamps: who submitted, in what order --- */

/* The calling thread's slot, if it is a worker of a fixed, unbounded
 * pool (set by the worker loop, around its tasks). */
static SEREX__THREAD_LOCAL struct slot *self_slot;

/*
 * Each task carries its submitting thread's number and that thread's
 * count of submissions (to any pool), so shutdown_now can hand back each
 * thread's tasks in the order it submitted them however they moved
 * between queues, and an outside thread always uses the same shard. A
 * thread-local count: no line is shared. 24 bits of thread (numbers are
 * reused after 16M threads: two threads with the same number still each
 * keep their order) and 40 of count, compared modulo 2^40 (stamp_before):
 * right while a thread's oldest waiting task is less than 2^39 of its
 * submissions old.
 */
#define STAMP_SEQ_BITS 40
#define STAMP_SEQ_MASK ((UINT64_C(1) << STAMP_SEQ_BITS) - 1)

static SEREX__THREAD_LOCAL uint64_t stamp_last; /* 0: no number yet */
static _Atomic uint32_t threads_seen;

static uint64_t stamp_next(void)
{
    uint64_t s = stamp_last;

    if (serex__unlikely(s == 0))
        /* relaxed: only a number of our own is wanted */
        s = (uint64_t)(atomic_fetch_add_explicit(&threads_seen, 1,
                                                 memory_order_relaxed) &
                       0xffffffu)
            << STAMP_SEQ_BITS;
    s = (s & ~STAMP_SEQ_MASK) | ((s + 1) & STAMP_SEQ_MASK);
    if ((s & STAMP_SEQ_MASK) == 0) /* 0 means "no number yet" */
        s++;
    stamp_last = s;
    return s;
}

static struct inject *stamp_shard(struct pool *p, uint64_t stamp)
{
    return &p->inj[(unsigned)(stamp >> STAMP_SEQ_BITS) & (p->ninj - 1)];
}

/* Hand-back order: by thread, then by that thread's count (mod 2^40). */
static int stamp_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct serex__task_rec *)a)->stamp;
    uint64_t y = ((const struct serex__task_rec *)b)->stamp;
    uint64_t d;

    if ((x >> STAMP_SEQ_BITS) != (y >> STAMP_SEQ_BITS))
        return (x >> STAMP_SEQ_BITS) < (y >> STAMP_SEQ_BITS) ? -1 : 1;
    d = (x - y) & STAMP_SEQ_MASK;
    return d == 0 ? 0 : (d & (UINT64_C(1) << (STAMP_SEQ_BITS - 1))) ? -1 : 1;
}

/* --- run queues, the next-task slot, stealing --- */

static bool batches_nonempty(struct pool *p)
{
    for (unsigned i = 0; i < p->max; i++)
        if (!serex__runq_empty(&p->slots[i].q))
            return true;
    return false;
}

static bool nexts_nonempty(struct pool *p)
{
    for (unsigned i = 0; i < p->max; i++)
        if (!serex__next_empty(&p->slots[i].next))
            return true;
    return false;
}

static bool levels_nonempty(struct pool *p);

/* Work in a queue anyone may take from at once: a shard, a run queue (if
 * @batches), a level. */
static bool pool_has_work_in(struct pool *p, bool batches)
{
    /* seq_cst: the flag's part of the park handshake (see the essay) */
    return queue_nonempty(p) || (batches && batches_nonempty(p)) ||
           (atomic_load_explicit(&p->levels_on, memory_order_seq_cst) &&
            levels_nonempty(p));
}

/*
 * The park re-check. A task in a next-task slot keeps the spinner up (it
 * steals it once it has waited: pool_steal), and keeps others up only
 * while nobody spins: then they come back to become the spinner. So idle
 * workers do not wake for every message a busy worker passes to itself,
 * yet a slot task whose owner blocks is never left without a thief.
 */
bool serex__pool_has_work(struct pool *p, bool spinner)
{
    /* seq_cst: as the other re-checks (the essay) */
    return pool_has_work_in(p, true) ||
           (p->batching && nexts_nonempty(p) &&
            (spinner ||
             atomic_load_explicit(&p->spinning, memory_order_seq_cst) == 0));
}

/*
 * A thief's look at other workers' next-task slots: one is stolen only
 * when the same task is still there SLOT_STEAL_NS after the thief first
 * saw it (its owner is busy with a long task), as Go's runqgrab waits
 * before it takes runnext: a task passed from one worker to itself in a
 * message-passing chain is run by its owner, in cache, not carried off.
 */
static bool next_look(struct pool *p, struct slot *me,
                      struct serex__task_rec *out)
{
    unsigned self = (unsigned)(me - p->slots);

    for (unsigned k = 1; k < p->max; k++) {
        unsigned vi = (self + k) % p->max;
        struct serex__runq_next *n = &p->slots[vi].next;
        uint64_t stamp;

        if (!serex__next_peek(n, &stamp)) {
            if (me->seen && me->seen_victim == vi)
                me->seen = false; /* taken by its owner */
            continue;
        }
        if (!me->seen || me->seen_victim != vi || me->seen_stamp != stamp) {
            if (!me->seen || me->seen_victim == vi) {
                me->seen = true;
                me->seen_victim = vi;
                me->seen_stamp = stamp;
                me->seen_at = serex__now_ns();
            }
            continue;
        }
        if (serex__now_ns() - me->seen_at < SLOT_STEAL_NS)
            continue;
        if (out == NULL)
            return true; /* ripe: worth a steal */
        me->seen = false;
        if (serex__next_take(n, out, &stamp))
            return true;
    }
    return false;
}

/* The spinner's look: a next-task slot that waited long enough? */
static bool next_ripe(struct pool *p, struct slot *me)
{
    return next_look(p, me, NULL);
}

/*
 * Steals half of another worker's run queue (the first task into *out,
 * the rest stay in ours), else (@slots) a next-task slot that has waited. A steal
 * moves tasks between two queues in two steps (claim, then publish), so
 * it sets its slot's `moving` first and gives up once STOP is set:
 * shutdown_now sets STOP, waits until no slot is moving, and only then
 * knows every queue it reads is complete (seq_cst: the same
 * store-then-load argument as parking). Returns how many it took.
 */
static unsigned pool_steal(struct pool *p, struct slot *me,
                           struct serex__task_rec *out, bool slots)
{
    unsigned n = 0;

    /* seq_cst (both): register, then look for STOP; shutdown_now sets STOP,
     * then looks at every `moving`: one of us sees the other. A flag in
     * our own slot, not a count for all: every steal writes it */
    atomic_store_explicit(&me->moving, 1, memory_order_seq_cst);
    if (!(atomic_load_explicit(&p->state, memory_order_seq_cst) & ST_STOP)) {
        unsigned self = (unsigned)(me - p->slots);

        for (unsigned k = 1; k < p->max && n == 0; k++)
            n = serex__runq_steal(&me->q, &p->slots[(self + k) % p->max].q);
        /* what we stole is in our queue, open to thieves too: one may
         * have taken it all back by now */
        if (n != 0 && serex__runq_take(&me->q, out, 1) == 0)
            n = 0;
        else if (n == 0 && slots && next_look(p, me, out))
            n = 1;
    }
    /* release: our published queue before shutdown_now's acquire load */
    atomic_store_explicit(&me->moving, 0, memory_order_release);
    return n;
}

/*
 * The fairness look at the shared queue comes only once the last batch
 * taken from it has left our run queue: what is left there then was
 * pushed by our own tasks, and a shard's tasks keep their order (a pool
 * of one worker starts one thread's tasks in the order it submitted them).
 */
static bool fair_look(struct slot *me)
{
    /* relaxed: head, a look; its only writers besides us are takers,
     * which only move it forward */
    return atomic_load_explicit(&me->q.head, memory_order_relaxed) -
               me->batch_end <
           (UINT64_C(1) << 63);
}

/*
 * Takes a task. A fixed, unbounded pool's worker looks at the shared
 * queue first every 61st task (so tasks from outside are never starved by
 * workers feeding themselves, as Go and Tokio do), else takes its next-
 * task slot (at most NEXT_RUN in a row, so the tasks behind it in its run
 * queue wait a bounded time), its run queue, the shared queue (a batch),
 * and last steals. Sets *more when it took more than it runs now.
 */
static bool pool_take(struct pool *p, struct slot *me,
                      struct serex__task_rec *out, bool *more)
{
    unsigned n;

    if (p->batching) {
        if (++me->tick % 61 == 0 && fair_look(me) &&
            inject_take(p, me, out, 1) != 0)
            return true;
        if (me->next_run < NEXT_RUN &&
            serex__next_take(&me->next, out, NULL)) {
            me->next_run++;
            return true;
        }
        me->next_run = 0;
        if (serex__runq_take(&me->q, out, 1) ||
            serex__next_take(&me->next, out, NULL))
            return true;
        /* a steal first: run queues hold older tasks than the shards'
         * (a batch taken from a shard), so a task never waits behind a
         * younger one that a free worker took instead */
        n = batches_nonempty(p) ? pool_steal(p, me, out, false) : 0;
        if (n == 0)
            n = inject_take(p, me, out, REFILL_MAX);
        if (n == 0)
            n = pool_steal(p, me, out, true);
    } else {
        if (serex__runq_take(&me->q, out, 1))
            return true;
        n = inject_take(p, me, out, 1);
    }
    *more = n > 1;
    return n != 0;
}

/*
 * The local push: a task that one of the pool's own workers submits goes
 * to that worker's next-task slot (the task there before moves to the back
 * of its run queue), or, for a yield (a serial or lane giving its thread
 * back after its batch: promise 4), to the back of its run queue. A full
 * run queue sends its older half to the shared queue first (runq_overflow).
 * It marks `moving` around the push, as a steal does: shutdown_now then
 * never claims the queues while a push is half done, and a push that sees
 * STOP (or SHUTDOWN) says SEREX_EREJECTED without queuing.
 */
static int runq_overflow(struct pool *p, struct slot *me,
                         const struct serex__task_rec *r);

static int pool_push_local(struct pool *p, struct slot *me, serex_fn fn,
                           void *arg)
{
    struct serex__task_rec r = {fn, arg, stamp_next()}, old;
    int rc = SEREX_OK;

    /* seq_cst (both): as in pool_steal */
    atomic_store_explicit(&me->moving, 1, memory_order_seq_cst);
    if (serex__unlikely(atomic_load_explicit(&p->state, memory_order_seq_cst) &
                        ST_SHUTDOWN)) {
        rc = SEREX_EREJECTED;
    } else if (serex__unlikely(serex__yield_requested())) {
        if (!serex__runq_push(&me->q, &r))
            rc = runq_overflow(p, me, &r);
    } else {
        /* the slot's task moves behind the run queue (a thief may have
         * taken it meanwhile: then the slot is free) */
        if (!serex__next_free(&me->next) &&
            serex__next_take(&me->next, &old, NULL) &&
            !serex__runq_push(&me->q, &old) &&
            runq_overflow(p, me, &old) != SEREX_OK) {
            rc = SEREX_ENOMEM; /* no room for it: it stays, ours goes */
            r = old;
        }
        serex__next_put(&me->next, &r);
    }
    /* release: our queues before shutdown_now's acquire load */
    atomic_store_explicit(&me->moving, 0, memory_order_release);
    /* relaxed (both): counts written by this worker only */
    if (rc == SEREX_OK)
        atomic_store_explicit(
            &me->pushed,
            atomic_load_explicit(&me->pushed, memory_order_relaxed) + 1,
            memory_order_relaxed);
    else
        atomic_store_explicit(
            &me->refused,
            atomic_load_explicit(&me->refused, memory_order_relaxed) + 1,
            memory_order_relaxed);
    return rc;
}

/*
 * Appends @n tasks that were accepted already (a run queue's overflow) to
 * shard @q: no SHUTDOWN check (see pool_push_local for STOP). Returns
 * SEREX_OK, or SEREX_ENOMEM when the ring could not grow.
 */
static int inject_push_moved(struct pool *p, struct inject *q,
                             const struct serex__task_rec *r, unsigned n)
{
    struct ring_spare sp = {NULL, 0, NULL, false};
    int rc;

    for (;;) {
        serex__spin_lock(&q->put_lock);
        rc = ring_push(p, q, r, n, &sp);
        serex__spin_unlock(&q->put_lock);
        if (rc != RING_NEED_ROOM)
            break;
        serex__free(sp.ring); /* a spare of a size no longer wanted */
        sp.ring = ring_alloc(sp.slots);
        if (sp.ring == NULL) {
            rc = SEREX_ENOMEM;
            break;
        }
    }
    serex__free(sp.ring);
    serex__free(sp.old);
    return rc;
}

/*
 * Our run queue is full: its older half goes to our shard of the shared
 * queue (Tokio's and Go's overflow), then @r goes behind the rest. When
 * the shard's ring cannot grow, the half comes back and @r is refused
 * (SEREX_ENOMEM) unless a thief made room meanwhile. Between `moving`'s
 * set and clear (pool_push_local).
 */
static int runq_overflow(struct pool *p, struct slot *me,
                         const struct serex__task_rec *r)
{
    struct serex__task_rec half[SEREX__RUNQ_CAP / 2];
    unsigned n = serex__runq_take(&me->q, half, SEREX__RUNQ_CAP / 2);

    if (n != 0 &&
        inject_push_moved(p, stamp_shard(p, r->stamp), half, n) != SEREX_OK)
        for (unsigned i = 0; i < n; i++) /* we took n: there is room */
            serex__runq_push(&me->q, &half[i]);
    return serex__runq_push(&me->q, r) ? SEREX_OK : SEREX_ENOMEM;
}

/* --- priority levels: HIGH and LOW (see the essay) --- */

static struct level *level_of(serex_executor *ex)
{
    return serex__container_of(ex, struct level, face);
}

/* Makes the level's first ring, or doubles a full one, with the spare
 * (ring_spare). Under its lock. */
static int level_grow(struct level *lv, uint64_t h, uint64_t t,
                      struct ring_spare *sp)
{
    uint64_t slots = lv->ring == NULL ? LEVEL_RING_MIN : (lv->mask + 1) * 2;
    struct serex__task_rec *bigger;

    if (lv->ring != NULL && slots <= lv->mask + 1)
        return SEREX_ENOMEM; /* no bigger ring can be counted */
    if (!spare_take(sp, slots, &bigger))
        return RING_NEED_ROOM;
    for (uint64_t i = h; i != t; i++) /* none when there was no ring */
        bigger[i & (slots - 1)] = lv->ring[i & lv->mask];
    sp->old = lv->ring;
    lv->ring = bigger;
    lv->mask = slots - 1;
    return SEREX_OK;
}

/* Appends a task. Under the level's lock. */
static int level_push(struct pool *p, struct level *lv, serex_fn fn, void *arg,
                      struct ring_spare *sp)
{
    /* seq_cst: the look a waiter for room makes after it counts itself
     * (serex_execute_wait's handshake, executor.c); else the lock orders */
    uint64_t h = atomic_load_explicit(&lv->head, memory_order_seq_cst);
    /* relaxed: written under the lock, which we hold */
    uint64_t t = atomic_load_explicit(&lv->tail, memory_order_relaxed);

    if (p->capacity != 0 && t - h >= p->capacity) {
        serex__room_full(); /* a serex_execute_wait may park: we signal */
        return SEREX_EFULL;
    }
    if (lv->ring == NULL || t - h > lv->mask) {
        int rc = level_grow(lv, h, t, sp);

        if (rc != SEREX_OK)
            return rc;
    }
    lv->ring[t & lv->mask] = (struct serex__task_rec){fn, arg, 0};
    /* seq_cst: the publishing half of the park handshake, as in ring_push */
    atomic_store_explicit(&lv->tail, t + 1, memory_order_seq_cst);
    return SEREX_OK;
}

/*
 * Takes the level's oldest task into *out, and says in *more whether
 * others wait. A grown ring that empties is freed (the next task makes a
 * small one), so memory goes back after a burst.
 */
static bool level_pop(struct pool *p, struct level *lv, struct serex__task_rec *out,
                      bool *more)
{
    struct serex__task_rec *drop = NULL;
    uint64_t h, t;

    /* relaxed (both): a look without the lock; the idle re-checks order
     * (levels_nonempty) */
    if (atomic_load_explicit(&lv->head, memory_order_relaxed) ==
        atomic_load_explicit(&lv->tail, memory_order_relaxed))
        return false;
    serex__spin_lock(&lv->lock);
    /* relaxed (both): written under the lock, which we hold */
    h = atomic_load_explicit(&lv->head, memory_order_relaxed);
    t = atomic_load_explicit(&lv->tail, memory_order_relaxed);
    if (h != t) {
        *out = lv->ring[h & lv->mask];
        /* seq_cst: a freed place, which a waiter for room must see before
         * we look for waiters (serex__room_made, executor.c); the lock
         * orders it for everyone else */
        atomic_store_explicit(&lv->head, h + 1, memory_order_seq_cst);
        *more = h + 1 != t;
        if (h + 1 == t && lv->mask + 1 > LEVEL_RING_MIN) {
            drop = lv->ring;
            lv->ring = NULL;
            lv->mask = 0;
        }
    }
    serex__spin_unlock(&lv->lock);
    serex__free(drop);
    if (h != t && p->capacity != 0)
        serex__room_made(); /* a place freed: wake serex_execute_wait */
    return h != t;
}

static bool levels_nonempty(struct pool *p)
{
    for (unsigned i = 0; i < LEVELS_EXTRA; i++)
        /* seq_cst (both): the re-check half of the park handshake */
        if (atomic_load_explicit(&p->lv[i].tail, memory_order_seq_cst) !=
            atomic_load_explicit(&p->lv[i].head, memory_order_seq_cst))
            return true;
    return false;
}

/* As pool_drained for the ring: empty, and no push can come. */
static bool levels_drained(struct pool *p)
{
    bool empty = true;

    for (unsigned i = 0; i < LEVELS_EXTRA; i++) {
        struct level *lv = &p->lv[i];

        serex__spin_lock(&lv->lock);
        /* relaxed (both): under the lock */
        empty = empty &&
                atomic_load_explicit(&lv->head, memory_order_relaxed) ==
                    atomic_load_explicit(&lv->tail, memory_order_relaxed);
        serex__spin_unlock(&lv->lock);
    }
    return empty;
}

/* Takes a task by priority: HIGH, else NORMAL, else LOW. */
static bool pool_take_levels(struct pool *p, struct slot *me,
                             struct serex__task_rec *out, bool *more)
{
    return level_pop(p, &p->lv[LV_HIGH], out, more) ||
           pool_take(p, me, out, more) ||
           level_pop(p, &p->lv[LV_LOW], out, more);
}

/* What shutdown_now took from a level: its ring, to hand back. */
struct level_claim {
    struct serex__task_rec *ring;
    uint64_t mask, h, t;
};

/* Takes every task of a level; STOP is set, so none can come. */
static void level_claim(struct level *lv, struct level_claim *c)
{
    serex__spin_lock(&lv->lock);
    c->ring = lv->ring;
    c->mask = lv->mask;
    /* relaxed (all): under the lock */
    c->h = atomic_load_explicit(&lv->head, memory_order_relaxed);
    c->t = atomic_load_explicit(&lv->tail, memory_order_relaxed);
    atomic_store_explicit(&lv->head, c->t, memory_order_relaxed);
    lv->ring = NULL;
    lv->mask = 0;
    serex__spin_unlock(&lv->lock);
}

/* Hands back what level_claim took, in order, and frees it. */
static size_t level_hand_back(struct level_claim *c,
                              serex_pending_fn on_pending, void *ctx)
{
    for (uint64_t i = c->h; i != c->t; i++)
        serex__hand_back(c->ring[i & c->mask].fn, c->ring[i & c->mask].arg,
                         on_pending, ctx);
    serex__free(c->ring);
    return (size_t)(c->t - c->h);
}

/* --- waking and growing --- */

/*
 * Hands one parked worker a token. The token moves it out of `sleepers`
 * at once, so producers that come before it wakes see no sleeper and take
 * no lock: one mutex round trip per actual wake-up, not per task.
 */
/*
 * Turns a sleeper into a token and signals. The token also carries the
 * spinner's flag when no one spins: until the woken worker runs (a few
 * microseconds), every execute then sees a spinner and leaves `mu` alone,
 * instead of each waking one more sleeper (with 16 workers and one fast
 * producer, a system call per task: pool_throughput fell from 8M tasks/s
 * at 2 threads to 0.9M at 16). The worker that takes the token is the
 * spinner from then on (worker_idle), as Tokio hands its searching state
 * to the worker it unparks.
 */
static void pool_wake_one(struct pool *p)
{
    serex__mutex_lock(&p->mu);
    /* relaxed (both): sleepers only changes under mu, which we hold; its
     * lock-free readers use it only to decide whether to come here */
    if (atomic_load_explicit(&p->sleepers, memory_order_relaxed) > 0) {
        uint32_t zero = 0;

        atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed);
        p->wakeups++;
        p->wakes++;
        /* seq_cst: a producer that reads this 1 leaves its task to the
         * token's taker, who clears the flag as a spinner does and then
         * looks (the handshake of the essay, with the taker as spinner) */
        if (!p->spin_handed && atomic_compare_exchange_strong_explicit(
                                   &p->spinning, &zero, 1, memory_order_seq_cst,
                                   memory_order_relaxed))
            p->spin_handed = true;
        serex__cond_signal(&p->work_cv);
    }
    serex__mutex_unlock(&p->mu);
}

enum wake_need { WAKE_NONE, WAKE_ONE, WAKE_GROW };

/* After a push: what it takes for some worker to look at the queue. */
static enum wake_need pool_wake_need(struct pool *p)
{
    /* seq_cst (both): the load half of the park handshake (see essay) */
    if (atomic_load_explicit(&p->spinning, memory_order_seq_cst) != 0)
        return WAKE_NONE;
    if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) != 0)
        return WAKE_ONE;
    /* relaxed: a hint; the grow re-checks under mu */
    if (p->max > p->core &&
        atomic_load_explicit(&p->live, memory_order_relaxed) < p->max)
        return WAKE_GROW;
    return WAKE_NONE;
}

static void pool_wake(struct pool *p, enum wake_need w)
{
    if (w == WAKE_ONE)
        pool_wake_one(p);
    else if (w == WAKE_GROW)
        serex__pool_threads_grow(p);
}

/* A worker's push (a batch it took): the worker keeps the pool alive. */
static void pool_signal_work(struct pool *p)
{
    pool_wake(p, pool_wake_need(p));
}

/* --- the worker --- */

enum spin_result { SPIN_NOT_SPINNER, SPIN_FOUND, SPIN_GAVE_UP };

/*
 * The spin window adapts: a spin that found work sets it back to SPIN_NS,
 * one that gave up halves it (down to SPIN_MIN_NS). Under a steady stream
 * of work, a ping-pong or bursts (a striped executor's lane drains), spins
 * find work and the window stays long, so a task is picked up in well
 * under a microsecond and producers make no wake-up calls; under a
 * trickle (a task every 100 us onto an idle pool) every spin of the full
 * window was a wasted 50 us of a core (80 % of a core measured at 100 us
 * gaps), and now the window shrinks to a microsecond within a few tasks:
 * each task then costs a wake-up instead, which takes about what it took
 * anyway (the trickle's latency was the wake-up's, spin or not). Growing
 * back by doubling instead of at once cost bursts dearly: striped
 * throughput at 4,096 keys fell from 8-9M to 3.4M tasks/s, the window
 * shrinking in every short lull and every burst then paying wake-ups.
 * Only the spinner (elected by `spinning`) writes the window; relaxed, as
 * a hint.
 */
static void spin_adapt(struct pool *p, bool found)
{
    int64_t w = atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
    int64_t next = found ? SPIN_NS
                         : (w <= 2 * SPIN_MIN_NS ? SPIN_MIN_NS : w / 2);

    /* only a change is written: the line is read by every execute */
    if (next == w)
        return;
    atomic_store_explicit(&p->spin_ns, next, memory_order_relaxed);
    /* A reset from a shorter window, counted for tests: not in a ping-pong
     * (the window stays at its longest), so the busy path writes nothing.
     * relaxed: a count; one spinner at a time */
    if (found)
        atomic_store_explicit(
            &p->spin_resets,
            atomic_load_explicit(&p->spin_resets, memory_order_relaxed) + 1,
            memory_order_relaxed);
}

/* Polls the queue for the spin window, if this worker can be the one
 * spinner; @owned: it is already (a token handed it the flag). */
static enum spin_result worker_spin(struct pool *p, struct slot *s,
                                    bool owned)
{
    uint32_t zero = 0;
    int64_t end;

    /* relaxed: the flag only elects one spinner; the handshake's ordering
     * comes from the seq_cst clear below or in worker_park */
    if (!owned &&
        !atomic_compare_exchange_strong_explicit(
            &p->spinning, &zero, 1, memory_order_relaxed, memory_order_relaxed))
        return SPIN_NOT_SPINNER;
    /* relaxed: see spin_adapt */
    end = serex__now_ns() +
          atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
    for (unsigned i = 1;; i++) {
        /*
         * The run queues and slots every 16th look only: each is a line
         * its owner writes at every task, and a spinner reading them all
         * in a tight loop takes them from every busy worker (16 lines
         * with 16 workers). A run queue is never stranded: its owner runs
         * it, and the park re-check reads every one.
         */
        if (pool_has_work_in(p, i % 16 == 1) ||
            (i % 16 == 1 && p->batching && next_ripe(p, s))) {
            /* still the spinner: ours to write. A token's taker that finds
             * at its first look the work it was woken for learned nothing
             * of spinning: resetting the window then made a trickle of
             * work (a task per 100 us) spin a full window per task */
            if (!owned || i > 1)
                spin_adapt(p, true);
            /* seq_cst: ordered before our next look at the queue, so a
             * producer that saw us spinning has its task seen (essay) */
            atomic_store_explicit(&p->spinning, 0, memory_order_seq_cst);
            return SPIN_FOUND;
        }
        /*
         * Pause first (a ping-pong comes back within a microsecond), then
         * yield: on a machine with fewer cores than threads a spinner must
         * not hold the core its producer needs.
         */
        if (i > 128)
            serex__thread_yield();
        else
            serex__cpu_relax();
        /* Every 64 pauses, and after every yield: on a loaded machine a
         * yield can cost a whole time slice, and a spinner that overstays
         * its window while preempted makes producers skip a wake-up that
         * an idle worker could have served.
         * relaxed: the flag is re-read with acquire in worker_idle */
        if ((i % 64 == 0 || i > 128) &&
            ((atomic_load_explicit(&p->state, memory_order_relaxed) &
              ST_SHUTDOWN) ||
             serex__now_ns() >= end)) {
            spin_adapt(p, false);
            return SPIN_GAVE_UP; /* still the spinner: worker_park clears */
        }
    }
}

enum idle_result { IDLE_AGAIN, IDLE_EXIT, IDLE_RETIRED };

/*
 * Shut down: true once the ring is empty and nothing more can come, and no
 * batch is left that we could steal (tasks in other workers' batches run
 * there or here, never nowhere).
 */
static bool pool_drained(struct pool *p)
{
    bool empty = true;

    /* An execute that held put_lock before us has pushed; one after us
     * sees SHUTDOWN and is rejected (see the essay). A run queue's
     * overflow only moves tasks a worker still holds: that worker looks
     * again before it leaves. */
    for (unsigned i = 0; i < p->ninj && empty; i++) {
        struct inject *q = &p->inj[i];

        serex__spin_lock(&q->put_lock);
        /* relaxed: head is only compared; a stale value only delays the
         * exit */
        empty = q->put_tail ==
                atomic_load_explicit(&q->head, memory_order_relaxed);
        serex__spin_unlock(&q->put_lock);
    }
    return empty && !batches_nonempty(p) && !nexts_nonempty(p) &&
           levels_drained(p);
}

/* The queue looked empty: spin, park, or leave. */
static enum idle_result worker_idle(struct pool *p, struct slot *s)
{
    /* acquire: the flags only; pool_drained does the ordering */
    uint32_t st = atomic_load_explicit(&p->state, memory_order_acquire);
    enum spin_result spin;

    if (st & ST_STOP)
        return IDLE_EXIT;
    if (st & ST_SHUTDOWN) {
        if (pool_drained(p))
            return IDLE_EXIT;
        serex__thread_yield(); /* a batch is being emptied or stolen */
        return IDLE_AGAIN;
    }
    for (bool handed = false;;) {
        spin = worker_spin(p, s, handed);
        if (spin == SPIN_FOUND)
            return IDLE_AGAIN;
        if (!serex__pool_thread_park(p, s, spin == SPIN_GAVE_UP, &handed))
            return IDLE_RETIRED;
        serex__pool_ring_try_shrink(p);
        if (!handed)
            return IDLE_AGAIN;
        /* a token made us the spinner: look as one (clear, then take) */
    }
}

/* Takes the next task: the levels are looked at only once in use. */
static bool worker_take(struct pool *p, struct slot *s, struct serex__task_rec *out,
                        bool *more)
{
    /* relaxed: a hint on the busy path; idle re-checks read it seq_cst
     * (see the essay) */
    if (serex__unlikely(
            atomic_load_explicit(&p->levels_on, memory_order_relaxed)))
        return pool_take_levels(p, s, out, more);
    return pool_take(p, s, out, more);
}

static void worker_run_hooked(struct pool *p, struct serex__task_rec *task)
{
    if (p->on_task_start != NULL)
        p->on_task_start(p->hook_ctx);
    task->fn(task->arg);
    if (p->on_task_end != NULL)
        p->on_task_end(p->hook_ctx);
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
        self_slot = s; /* our executes go to our own queues */
    for (;;) {
        bool more = false;

        if (!worker_take(p, s, &task, &more)) {
            r = worker_idle(p, s);
            if (r != IDLE_AGAIN)
                break;
            was_idle = true;
            continue;
        }
        /* We took a batch, or came back from idle with more queued: make
         * sure a sleeper helps (it will steal or take from the ring). */
        if (more || (was_idle && queue_nonempty(p)))
            pool_signal_work(p);
        was_idle = false;
        if (serex__unlikely(p->task_hooks))
            worker_run_hooked(p, &task);
        else
            task.fn(task.arg);
        serex__stat_add(&s->done, 1);
    }
    self_slot = NULL; /* the stop hook's executes go to the shared queue */
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
    enum wake_need w = pool_wake_need(p);

    if (serex__unlikely(w != WAKE_NONE))
        serex__life_hold(&p->life);
    return w;
}

/* The wake-up pool_published decided, and the hold's release: the last
 * touch of the pool by this execute (which may free it: destroy came). */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void pool_wake_held(struct pool *p, enum wake_need w)
{
    if (test_after_publish != NULL)
        test_after_publish(test_after_publish_ctx);
    pool_wake(p, w);
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
    struct serex__task_rec r = {u->fn, u->arg, u->stamp};
    int rc = SEREX_EREJECTED;

    serex__spin_lock(&q->put_lock);
    /* relaxed: put_lock orders the flag against the pushes (see essay) */
    if (serex__likely(!(atomic_load_explicit(&p->state, memory_order_relaxed) &
                        ST_SHUTDOWN)))
        rc = push_nomem(ring_push(p, q, &r, 1, sp), sp);
    if (serex__likely(rc == SEREX_OK)) {
        q->accepted++;
        u->w = pool_published(p);
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
        rc = push_nomem(level_push(u->p, lv, u->fn, u->arg, sp), sp);
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
static int push_with_spare(struct push *u, struct ring_spare *sp)
{
    int rc;

    do {
        serex__free(sp->ring); /* a spare of a size no longer wanted */
        sp->ring = ring_alloc(sp->slots);
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

/*
 * The NORMAL face's execute. From one of the pool's own workers: its own
 * queues (pool_push_local), with the wake-up a push owes (no hold: a
 * worker of the pool keeps it alive). From anywhere else: the shared
 * queue's shard of the calling thread, the push written out straight
 * (pool_push's), with nothing on it a plain push did not have but the
 * wake-up decision under the lock.
 */
static int pool_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct pool *p = pool_of(ex);
    struct slot *me = self_slot;
    struct ring_spare sp = {NULL, 0, NULL, false};
    struct serex__task_rec r;
    struct inject *q;
    enum wake_need w = WAKE_NONE;
    int rc = SEREX_EREJECTED;

    if (me != NULL && me->p == p) {
        rc = pool_push_local(p, me, fn, arg);
        if (rc == SEREX_OK)
            pool_wake(p, pool_wake_need(p));
        return rc;
    }
    if (serex__unlikely(serex__forked_since(p->gen)))
        return SEREX_EREJECTED; /* a child: our threads are not here */
    r = (struct serex__task_rec){fn, arg, stamp_next()};
    q = stamp_shard(p, r.stamp);
    serex__spin_lock(&q->put_lock);
    /* relaxed: put_lock orders the flag against the pushes (see essay) */
    if (serex__likely(!(atomic_load_explicit(&p->state, memory_order_relaxed) &
                        ST_SHUTDOWN)))
        rc = ring_push(p, q, &r, 1, &sp);
    if (serex__likely(rc == SEREX_OK)) {
        q->accepted++;
        w = pool_wake_need(p);
    } else if (rc != RING_NEED_ROOM)
        q->rejected++;
    if (serex__unlikely(w != WAKE_NONE)) /* the hold: see pool_published */
        serex__life_hold(&p->life);
    serex__spin_unlock(&q->put_lock);
    if (serex__likely(w == WAKE_NONE && rc != RING_NEED_ROOM))
        return rc; /* no touch of the pool after the unlock */
    if (rc == RING_NEED_ROOM) {
        struct push u = {p, NULL, q, fn, arg, r.stamp, WAKE_NONE};

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
    serex__cond_broadcast(&p->work_cv);
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
 * Claims a worker's run queue and next-task slot (as a thief would).
 * Under every shard's locks: no refill can run; no steal or local push is
 * under way and none can start (STOP, `moving`).
 */
static size_t slot_claim(struct slot *s)
{
    /* acquire (all): the records were written before the tail */
    uint64_t h = atomic_load_explicit(&s->q.head, memory_order_acquire);

    s->taken_h = s->taken_t = 0;
    for (;;) {
        uint64_t t = atomic_load_explicit(&s->q.tail, memory_order_acquire);

        if (h == t)
            break;
        /* acq_rel: decides each task's one taker against its owner */
        if (atomic_compare_exchange_weak_explicit(&s->q.head, &h, t,
                                                  memory_order_acq_rel,
                                                  memory_order_acquire)) {
            s->taken_h = h;
            s->taken_t = t;
            break;
        }
    }
    s->next_taken = serex__next_take(&s->next, &s->next_rec, NULL);
    return (size_t)(s->taken_t - s->taken_h) + (s->next_taken ? 1 : 0);
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
    for (unsigned i = 0; i < p->max; i++)
        n += slot_claim(&p->slots[i]);
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
            stamp_cmp(run_at(c, child), run_at(c, child + 1)) < 0)
            child++;
        if (stamp_cmp(run_at(c, k), run_at(c, child)) >= 0)
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
 * Claimed run @i of NORMAL: shard i, or (i >= ninj) the slot i - ninj,
 * whose records were copied into its claim array (made at create) by
 * claimed_prepare. The cursor (`next`) lives in the shard or slot.
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
        struct slot *s = &p->slots[i - p->ninj];

        *next = &s->claim_next;
        return (struct claimed_run){s->claim, UINT64_MAX, 0, s->claim_n, 0};
    }
}

/* Copies each slot's claimed records into its claim array; sorts every
 * run in place. */
static void claimed_prepare(struct pool *p)
{
    uint64_t *next;

    for (unsigned i = 0; i < p->max; i++) {
        struct slot *s = &p->slots[i];
        uint64_t n = 0;

        for (uint64_t j = s->taken_h; j != s->taken_t; j++)
            serex__runq_read(serex__runq_at(&s->q, j), &s->claim[n++]);
        if (s->next_taken)
            s->claim[n++] = s->next_rec;
        s->claim_n = n;
    }
    for (unsigned i = 0; i < p->ninj + p->max; i++) {
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

        for (unsigned i = 0; i < p->ninj + p->max; i++) {
            struct claimed_run c = claimed_run_of(p, i, &next);

            if (*next != c.n &&
                (best_next == NULL ||
                 stamp_cmp(run_at(&c, *next), run_at(&best, *best_next)) < 0)) {
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
                                 memory_order_seq_cst) & ST_STOP)
        return 0;
    serex__room_wake(); /* waiters for room retry: and are refused */
    /* seq_cst: after STOP (see pool_steal); pairs with its release drop */
    for (unsigned i = 0; i < p->max; i++)
        while (atomic_load_explicit(&p->slots[i].moving,
                                    memory_order_seq_cst) != 0)
            serex__thread_yield();
    level_claim(&p->lv[LV_HIGH], &high);
    n = normal_claim(p);
    level_claim(&p->lv[LV_LOW], &low);
    pool_wake_all(p);
    /* By level, highest first */
    n += level_hand_back(&high, on_pending, ctx);
    normal_hand_back(p, on_pending, ctx);
    n += level_hand_back(&low, on_pending, ctx);
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
    serex__free(p->claims);
    serex__free(p->slots);
    serex__free(p);
}

/* Frees the pool's locks and memory: its threads are joined, and no
 * execute holds it any more. */
static void pool_free_final(struct pool *p)
{
    serex__cond_destroy(&p->term_cv);
    serex__cond_destroy(&p->work_cv);
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
    pool_quiesce_producers(p);
    if (serex__life_detach(&p->life))
        pool_free_final(p); /* else the last execute still waking frees */
}

static void pool_stats(serex_executor *ex, serex_stats *out);

/* A pool runs on threads of its own: it waits on no other executor. */
static const struct serex__exec_class pool_class = {
    SEREX__CLASS_OPS(pool_execute, pool_shutdown, pool_shutdown_now,
                     pool_await),
    "pool", pool_stats, NULL, pool_destroy,
};

/* --- the faces of HIGH and LOW --- */

static int pool_face_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct level *lv = level_of(ex);
    struct push u = {lv->p, lv, NULL, fn, arg, 0, WAKE_NONE};

    return pool_push(&u);
}

/* The rest of a face's life is its pool's. */
static void pool_face_shutdown(serex_executor *ex)
{
    pool_shutdown(&level_of(ex)->p->base);
}

static size_t pool_face_shutdown_now(serex_executor *ex,
                                     serex_pending_fn on_pending, void *ctx)
{
    return pool_shutdown_now(&level_of(ex)->p->base, on_pending, ctx);
}

static int pool_face_await(serex_executor *ex, int64_t timeout_ns)
{
    return pool_await(&level_of(ex)->p->base, timeout_ns);
}

static void pool_face_stats(serex_executor *ex, serex_stats *out)
{
    pool_stats(&level_of(ex)->p->base, out);
}

/* Waiting for a face is waiting for its pool (SEREX_EDEADLK, promise 7). */
static bool pool_face_waits_on(serex_executor *ex,
                               bool (*blocks)(serex_executor *))
{
    return blocks(&level_of(ex)->p->base);
}

static void pool_face_destroy(serex_executor *ex)
{
    (void)ex;
    serex__misuse("serex_destroy", "a pool's priority face "
                                   "(serex_pool_executor_at) goes with its "
                                   "pool: destroy the pool");
}

static const struct serex__exec_class pool_face_class = {
    SEREX__CLASS_OPS(pool_face_execute, pool_face_shutdown,
                     pool_face_shutdown_now, pool_face_await),
    "pool", pool_face_stats, pool_face_waits_on, pool_face_destroy,
};

serex_executor *serex_pool_executor_at(serex_executor *pool, unsigned level)
{
    const struct serex__exec_class *cls;
    struct pool *p;

    if (pool == NULL || level >= SEREX_POOL_PRIORITIES)
        return NULL;
    cls = serex__class_of(pool);
    if (cls == &pool_face_class)
        p = level_of(pool)->p;
    else if (cls == &pool_class)
        p = pool_of(pool);
    else
        return NULL;
    if (level == SEREX_POOL_PRIORITY_NORMAL)
        return &p->base;
    /* acquire: a flag set by another thread is then ordered before our
     * pushes; seq_cst store: before every push through the face (see the
     * essay). Stored once: a call per task must not write a shared line. */
    if (!atomic_load_explicit(&p->levels_on, memory_order_acquire))
        atomic_store_explicit(&p->levels_on, 1, memory_order_seq_cst);
    return &p->lv[level == SEREX_POOL_PRIORITY_HIGH ? LV_HIGH : LV_LOW].face;
}

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
    p->hook_ctx = c->hook_ctx;
    p->stack_size = c->stack_size;
    p->task_hooks = c->on_task_start != NULL || c->on_task_end != NULL;
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

/* Resolves defaults; SEREX_EINVAL for contradictory values; SEREX_ENOMEM. */
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
    p->slots = serex__calloc_aligned(SEREX__CACHELINE,
                                     p->max * sizeof *p->slots);
    if (p->slots == NULL)
        return SEREX_ENOMEM;
    p->inj = serex__calloc_aligned(SEREX__CACHELINE, n * sizeof *p->inj);
    if (p->inj == NULL)
        return SEREX_ENOMEM;
    /* shutdown_now's room for each slot's run queue and next task: it
     * then hands back without allocating (normal_hand_back) */
    p->claims = serex__alloc((size_t)p->max * (SEREX__RUNQ_CAP + 1) *
                             sizeof *p->claims);
    if (p->claims == NULL)
        return SEREX_ENOMEM;
    for (unsigned i = 0; i < p->max; i++)
        p->slots[i].claim = &p->claims[(size_t)i * (SEREX__RUNQ_CAP + 1)];
    p->ninj = n;
    for (unsigned i = 0; i < n; i++) {
        p->inj[i].ring = ring_alloc(RING_MIN);
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
    p->base.ops = &pool_class.ops;
    for (unsigned i = 0; i < LEVELS_EXTRA; i++) {
        p->lv[i].face.ops = &pool_face_class.ops;
        p->lv[i].p = p;
    }
    rc = serex__pool_threads_start_core(p);
    if (rc != SEREX_OK) {
        serex__pool_threads_join(p); /* the threads that did start */
        pool_free_final(p);
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
    for (unsigned i = 0; i < p->max; i++) {
        struct slot *s = &p->slots[i];
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
