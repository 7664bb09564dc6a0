/* SPDX-License-Identifier: MIT */
/*
 * pool_block.c - tasks that block: blocking regions (serex_blocking_begin,
 * serex_blocking_end, serex_blocking), the compensating workers they let
 * a pool start, and the waits that mark themselves (mark_waits).
 *
 * --- Blocking regions, demystified ---
 * A task that waits holds its worker. When every worker waits for a task
 * still queued behind them (tasks that wait on tasks), a fixed pool
 * deadlocks. A region marks such a wait: between begin and end the worker
 * does not count as one that serves, and the pool may start a worker in
 * its place (a compensating worker), as Java's ForkJoinPool does for a
 * ManagedBlocker and Tokio for block_in_place (which hands the worker's
 * core, its run queue, to a new thread).
 *
 *   begin (the outermost; nested ones only count in `blocking`):
 *     1. the worker's own queues go to the shared queue: its run queue and
 *        its next-task slot (block_hand_off), so no task waits behind a
 *        worker that sleeps (Tokio hands its core over for the same
 *        reason); and its executes go to the shared queue until the end
 *        (serex__pool_self_slot is NULL meanwhile);
 *     2. `blocked` + 1 (seq_cst): the pool's cap, the most workers that
 *        may live, is max_threads plus one per blocked worker, at most
 *        max_blocking more (serex__pool_cap);
 *     3. a look at the queues (seq_cst): with work waiting, the wake-up a
 *        submission would make (serex__pool_signal_work): nothing if a
 *        worker spins, else a parked worker woken, else a worker started
 *        if the pool is below its cap (serex__pool_threads_grow).
 *   end: `blocked` - 1; the executes go to the worker's own queues again.
 *
 * The blocking handshake: a submission stores its task (seq_cst) and then
 * reads `growable` and `blocked` (seq_cst, serex__pool_wake_need); begin
 * sets `growable`, adds itself to `blocked` and then looks at the queues
 * (seq_cst). In their single total order, either the look comes after
 * the store (begin sees the task and wakes or starts a worker), or the
 * submission's loads come after the count (it sees the cap raised and
 * starts a worker). So a task submitted while the only workers block is
 * never left without one: the case of a pool of one worker whose task
 * waits for a task it submitted, or one from outside.
 *
 * Nothing is started before work waits: a region on an idle pool costs
 * two atomic operations and a look at the queues. A started worker is an
 * extra thread as any other (pool_thread.c): it parks with the keep-alive
 * and retires once idle that long while more non-blocked workers live than
 * the core count (`live - blocked > core`), so the pool goes back to its
 * size when the regions end. If it cannot be started (no memory, no
 * thread), the pool goes on with the workers it has, as an elastic pool's
 * growth does.
 *
 * Where regions come from: the calls of pool.h, which do nothing on a
 * thread that is not running one of a pool's tasks (a pool's thread hooks
 * included); and, with mark_waits, serex's own waits: the parking lot
 * calls the worker's blocker (park_internal.h) around each sleep, so a
 * future's, event's, latch's or group's wait, or an execute that waits
 * for room, is a region while it sleeps (not when it returns at once). The
 * worker clears the blocker around its own park (pool_thread.c).
 *
 * The busy path pays nothing: the worker sets its thread-locals once, when
 * it starts, and a pool that never blocked reads `growable` (0) where it
 * read max and core before.
 */
#include "common_internal.h"
#include "fork_internal.h"
#include "park_internal.h"

#include "pool_types_internal.h"

/* The calling thread's slot while it runs a pool's tasks (the loop). */
SEREX__THREAD_LOCAL struct slot *serex__pool_worker_slot;

#define HAND_OFF_BATCH 32u /* records moved at a time (on the task's stack) */

/*
 * Step 1 of begin: the worker's run queue, then its next-task slot (the
 * newest task), to the shared queue, with their stamps (shutdown_now's
 * order). Between `moving`'s set and clear, as any move between queues;
 * after STOP nothing moves (shutdown_now claims where they are). When a
 * shard cannot grow, what is left stays: thieves steal from a run queue,
 * and a next-task slot that waited (pool_local.c).
 */
static void block_hand_off(struct pool *p, struct slot *s)
{
    struct serex__task_rec r[HAND_OFF_BATCH];
    struct inject *q = &p->inj[s->index & (p->ninj - 1)];
    unsigned n;

    if (serex__pool_moving_begin(p, s) & ST_STOP)
        goto out;
    while ((n = serex__runq_take(&s->q, r, HAND_OFF_BATCH)) != 0)
        if (serex__pool_inject_push_moved(p, q, r, n) != SEREX_OK) {
            for (unsigned i = 0; i < n; i++) /* we took n: there is room */
                serex__runq_push(&s->q, &r[i]);
            goto out;
        }
    if (serex__next_take(&s->next, &r[0], NULL) &&
        serex__pool_inject_push_moved(p, q, r, 1) != SEREX_OK &&
        !serex__runq_push(&s->q, &r[0]))
        serex__next_put(&s->next, &r[0]); /* it was empty: we took it */
out:
    serex__pool_moving_end(s);
}

static void block_begin(struct slot *s)
{
    struct pool *p = s->p;

    if (serex__unlikely(serex__forked_since(p->gen)))
        return; /* a child (a task forked): the pool is not here */
    if (s->blocking++ != 0)
        return;                   /* nested: counted */
    serex__pool_self_slot = NULL; /* our executes: the shared queue */
    if (p->batching)
        block_hand_off(p, s);
    /* relaxed: a look at a flag that only ever goes 0 -> 1; seq_cst
     * store: before our count, for the handshake (the essay) */
    if (atomic_load_explicit(&p->growable, memory_order_relaxed) == 0)
        atomic_store_explicit(&p->growable, 1, memory_order_seq_cst);
    /* seq_cst: the count before the look below (the essay) */
    atomic_fetch_add_explicit(&p->blocked, 1, memory_order_seq_cst);
    if (serex__pool_has_work(p, false))
        serex__pool_signal_work(p);
}

static void block_end(struct slot *s)
{
    if (serex__unlikely(serex__forked_since(s->p->gen)))
        return; /* a child: as begin */
    if (s->blocking == 0 || --s->blocking != 0)
        return; /* no region, or a nested one */
    /* relaxed: only lowers the cap; a stale higher value elsewhere lets
     * one more worker start, within max_blocking */
    atomic_fetch_sub_explicit(&s->p->blocked, 1, memory_order_relaxed);
    if (s->p->batching)
        serex__pool_self_slot = s; /* our executes: our own queues again */
}

static void blocker_begin(struct serex__blocker *b)
{
    block_begin(serex__container_of(b, struct slot, blocker));
}

static void blocker_end(struct serex__blocker *b)
{
    block_end(serex__container_of(b, struct slot, blocker));
}

void serex__pool_block_enter(struct pool *p, struct slot *s)
{
    s->blocking = 0;
    s->blocker.begin = blocker_begin;
    s->blocker.end = blocker_end;
    serex__pool_worker_slot = s;
    if (p->mark_waits)
        serex__park_blocker = &s->blocker;
}

void serex__pool_block_leave(struct slot *s)
{
    (void)s;
    serex__pool_worker_slot = NULL;
    serex__park_blocker = NULL;
}

void serex__pool_block_check(struct slot *s)
{
    if (serex__unlikely(s->blocking != 0))
        serex__misuse("serex_blocking_begin",
                      "a pool task returned inside its blocking region "
                      "(no serex_blocking_end)");
}

/* --- the calls of pool.h --- */

void serex_blocking_begin(void)
{
    struct slot *s = serex__pool_worker_slot;

    if (s != NULL)
        block_begin(s);
}

void serex_blocking_end(void)
{
    struct slot *s = serex__pool_worker_slot;

    if (s != NULL)
        block_end(s);
}

int serex_blocking(serex_fn fn, void *arg)
{
    if (fn == NULL)
        return SEREX_EINVAL;
    serex_blocking_begin();
    fn(arg);
    serex_blocking_end();
    return SEREX_OK;
}

/* --- for tests --- */

unsigned serex__pool_blocked(serex_executor *ex)
{
    struct pool *p = serex__container_of(ex, struct pool, base);

    /* relaxed: a snapshot for a test */
    return atomic_load_explicit(&p->blocked, memory_order_relaxed);
}

unsigned serex__pool_own_queued(void)
{
    struct slot *s = serex__pool_worker_slot;
    /* relaxed (all): the owner's look at its own queues */
    uint64_t t, h;

    if (s == NULL)
        return 0;
    t = atomic_load_explicit(&s->q.tail, memory_order_relaxed);
    h = atomic_load_explicit(&s->q.head, memory_order_relaxed);
    return (unsigned)(t - h) + !serex__next_empty(&s->next);
}
