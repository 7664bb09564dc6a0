/* SPDX-License-Identifier: MIT */
/*
 * pool_inject.c - the pool's shared queue: its shards, where tasks from
 * outside the pool wait (Tokio's injection queue), and the stamps that
 * say who submitted each task and in what order.
 *
 * The stamps are here rather than with the run queues (pool_local.c),
 * which only carry them: a stamp's thread number is what picks the shard
 * a thread submits to (serex__pool_stamp_shard), a pool with one shard
 * writes the task's index there into the stamp instead
 * (serex__pool_ring_push), and the order stamps define is the shards'
 * order carried across queues.
 * What every execute from outside the pool runs is a static inline in
 * pool_types_internal.h, so that the split costs the busy path no call:
 * serex__pool_stamp_next and serex__pool_stamp_shard (with the stamp's
 * format), and the push onto a shard, serex__pool_ring_push (its slow
 * path, serex__pool_ring_make_room, is here). This file holds the rest.
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
 * see pool_local.c) and publish the new `head`. Each end keeps a stale
 * copy of the other end's index and re-reads it only when the copy says
 * empty (workers) or full (producers), so in a steady stream a worker
 * touches the producers' line once per run of tasks, not once per task.
 * Nothing is allocated per task. A full ring is doubled by its producer
 * under both locks (the allocation made with no lock held: ring_spare);
 * an idle worker shrinks an empty grown one back to RING_MIN. A worker
 * takes from the shards starting at its own; one whose `take_lock` is
 * busy is passed over (trylock), and waited for only if no other shard
 * had anything, so no worker spins behind another that was preempted
 * holding it.
 *
 * --- Stamps and the hand-back order ---
 * Every task carries a stamp: its submitting thread's number and that
 * thread's count of submissions (serex__pool_stamp_next: thread-local, no
 * shared line). shutdown_now claims every shard and every worker's
 * queues, sorts each claimed run in place by stamp and merges them
 * (normal_hand_back, pool.c): each thread's tasks come back in the order
 * it submitted them, wherever they waited (promise 2b). A pool with one
 * shard stamps each task with its index there instead: one total order,
 * as before.
 */
#include "alloc_internal.h"
#include "common_internal.h"
#include "executor_internal.h"
#include "spinlock_internal.h"

#include "pool_types_internal.h"

/* --- the shared queue: its shards (see the essay) --- */

struct serex__task_rec *serex__pool_ring_alloc(uint64_t slots)
{
    return serex__alloc_aligned(SEREX__CACHELINE,
                                slots * sizeof(struct serex__task_rec));
}

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
bool serex__pool_spare_take(struct ring_spare *sp, uint64_t slots,
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
    if (!serex__pool_spare_take(sp, slots, &bigger))
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
int serex__pool_ring_make_room(struct pool *p, struct inject *q, uint64_t n,
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
        /* acquire: pairs with the store in serex__pool_ring_push; slots
         * are written */
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
unsigned serex__pool_inject_take(struct pool *p, struct slot *me,
                                 struct serex__task_rec *out, unsigned max)
{
    unsigned self = me->index, busy = p->ninj, n = 0;

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

/*
 * Appends @n tasks that were accepted already (a run queue's overflow) to
 * shard @q: no SHUTDOWN check (see serex__pool_push_local for STOP).
 * Returns SEREX_OK, or SEREX_ENOMEM when the ring could not grow.
 */
int serex__pool_inject_push_moved(struct pool *p, struct inject *q,
                                  struct serex__task_rec *r, unsigned n)
{
    struct ring_spare sp = {NULL, 0, NULL, false};
    int rc;

    for (;;) {
        serex__spin_lock(&q->put_lock);
        rc = serex__pool_ring_push(p, q, r, n, &sp);
        serex__spin_unlock(&q->put_lock);
        if (rc != RING_NEED_ROOM)
            break;
        serex__free(sp.ring); /* a spare of a size no longer wanted */
        sp.ring = serex__pool_ring_alloc(sp.slots);
        if (sp.ring == NULL) {
            rc = SEREX_ENOMEM;
            break;
        }
    }
    serex__free(sp.ring);
    serex__free(sp.old);
    return rc;
}

/* An idle worker gives a grown, empty ring back (memory after a burst). */
static void shard_try_shrink(struct pool *p, struct inject *q)
{
    struct serex__task_rec *small;

    /* relaxed (all): hints; everything is re-checked under both locks.
     * A shard still in use is left alone before any allocation or lock:
     * every idle worker comes here after every park, and a busy pool
     * with 16 shards paid an allocation and two locks per grown shard */
    if (!atomic_load_explicit(&q->ring_grown, memory_order_relaxed) ||
        atomic_load_explicit(&q->tail, memory_order_relaxed) !=
            atomic_load_explicit(&q->head, memory_order_relaxed))
        return;
    small = serex__pool_ring_alloc(RING_MIN);
    if (small == NULL)
        return; /* keep the big one; nothing is lost */
    serex__spin_lock(&q->put_lock);
    serex__spin_lock(&q->take_lock);
    /* relaxed: shutdown_now sets STOP before taking these locks */
    if (q->mask + 1 > RING_MIN && !serex__pool_shard_nonempty(q) &&
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

/* Shut down: every shard empty, and no push to one can come any more. */
bool serex__pool_shards_drained(struct pool *p)
{
    bool empty = true;

    /* An execute that held put_lock before us has pushed; one after us
     * sees SHUTDOWN and is rejected (pool.c's essay: Shutdown). */
    for (unsigned i = 0; i < p->ninj && empty; i++) {
        struct inject *q = &p->inj[i];

        serex__spin_lock(&q->put_lock);
        /* relaxed: head is only compared; a stale value only delays the
         * exit */
        empty = q->put_tail ==
                atomic_load_explicit(&q->head, memory_order_relaxed);
        serex__spin_unlock(&q->put_lock);
    }
    return empty;
}

/* --- stamps: who submitted, in what order --- */

SEREX__THREAD_LOCAL uint64_t serex__pool_stamp_last; /* 0: no number yet */
static _Atomic uint32_t threads_seen;

/* The calling thread's first stamp: a number of its own, count 0. */
uint64_t serex__pool_stamp_thread(void)
{
    /* relaxed: only a number of our own is wanted */
    return (uint64_t)(atomic_fetch_add_explicit(&threads_seen, 1,
                                                memory_order_relaxed) &
                      0xffffffu)
           << STAMP_SEQ_BITS;
}

/* Hand-back order: by thread, then by that thread's count (mod 2^40). */
int serex__pool_stamp_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct serex__task_rec *)a)->stamp;
    uint64_t y = ((const struct serex__task_rec *)b)->stamp;
    uint64_t d;

    if ((x >> STAMP_SEQ_BITS) != (y >> STAMP_SEQ_BITS))
        return (x >> STAMP_SEQ_BITS) < (y >> STAMP_SEQ_BITS) ? -1 : 1;
    d = (x - y) & STAMP_SEQ_MASK;
    return d == 0 ? 0 : (d & (UINT64_C(1) << (STAMP_SEQ_BITS - 1))) ? -1 : 1;
}
