/* SPDX-License-Identifier: MIT */
/*
 * pool_local.c - a fixed, unbounded pool's per-worker queues: each
 * worker's run queue and next-task slot (their protocol is
 * pool_runq_internal.h's), where a worker takes its next task, how it
 * steals, and where a task one of the pool's own workers submits goes.
 * The local push itself (serex__pool_push_local) is a static inline in
 * pool_types_internal.h: pool_execute runs it for every task a worker
 * submits, and out of line it cost a call and a frame (about 20
 * instructions a task, callgrind); its overflow is here.
 *
 * --- Run queues, the next-task slot, stealing ---
 * A fixed, unbounded pool's worker has a run queue of its own
 * (pool_runq_internal.h: Go's runq, 256 records) and a next-task slot. A
 * task one of the pool's workers submits to its own pool goes to that
 * worker's slot; the task there before moves to the back of its run queue.
 * So a serial handing over to the next serial, a continuation or a lane's
 * drain runs next on the same core, in cache, and writes no line another
 * core writes (Tokio's LIFO slot, Go's runnext). At most NEXT_RUN slot tasks
 * run in a row, then the run queue's oldest, so a chain that keeps refilling
 * the slot does not starve the run queue. A yield (a serial's, lane's or
 * limiter's batch end, serex__op_yield) goes to the back of the run queue
 * instead: promise 4's turn-taking holds. A full run queue sends its older
 * half to the worker's shard (serex__pool_runq_overflow). A worker whose
 * queues are empty steals half of another's run queue, then takes a batch
 * (up to half a shard, at most REFILL_MAX) from the shared queue into its
 * run queue, then steals a next-task slot, but only one whose task has
 * waited SLOT_STEAL_NS behind a busy owner (Go waits too before it takes
 * runnext): stealing slots at once cost Tokio 23-32 % at message passing,
 * and never stealing them strands a task behind a long one (tokio#4941) or
 * behind a task that waits for it. Every 61st task a worker looks at the
 * shared queue first (once the last batch it took from there has left its
 * run queue, so one thread's tasks keep their order on a one-worker pool):
 * tasks from outside are never starved by workers feeding themselves.
 * A local push and a steal move tasks between queues in steps, so each
 * brackets itself with its slot's `moving` flag and gives up (a push says
 * SEREX_EREJECTED) once it sees STOP; shutdown_now sets STOP, waits until
 * no slot is moving, and only then claims (pool.c's essay: Shutdown).
 * The spinner reads the run queues and slots only every 16th look (the
 * shards at every one): each is a line its owner writes at every task. A
 * worker that took more than one task wakes a sleeper if no one spins,
 * exactly as a producer does; a local push makes the same check.
 */
#include "common_internal.h"
#include "thread_internal.h"

#include "pool_types_internal.h"

/* Set by the worker loop around its tasks (pool_types_internal.h). */
SEREX__THREAD_LOCAL struct slot *serex__pool_self_slot;

/* --- run queues, the next-task slot, stealing --- */

bool serex__pool_batches_nonempty(struct pool *p)
{
    unsigned n = serex__pool_nslots(p);

    for (unsigned i = 0; i < n; i++)
        if (!serex__runq_empty(&serex__pool_slot(p, i)->q))
            return true;
    return false;
}

bool serex__pool_nexts_nonempty(struct pool *p)
{
    unsigned n = serex__pool_nslots(p);

    for (unsigned i = 0; i < n; i++)
        if (!serex__next_empty(&serex__pool_slot(p, i)->next))
            return true;
    return false;
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
    unsigned self = me->index, nslots = serex__pool_nslots(p);

    for (unsigned k = 1; k < nslots; k++) {
        unsigned vi = (self + k) % nslots;
        struct serex__runq_next *n = &serex__pool_slot(p, vi)->next;
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
bool serex__pool_next_ripe(struct pool *p, struct slot *me)
{
    return next_look(p, me, NULL);
}

/*
 * Steals half of another worker's run queue (the first task into *out,
 * the rest stay in ours), else (@slots) a next-task slot that has waited.
 * A steal moves tasks between two queues in two steps (claim, then
 * publish), so it sets its slot's `moving` first and gives up once STOP
 * is set: shutdown_now sets STOP, waits until no slot is moving, and only
 * then knows every queue it reads is complete (seq_cst: the same
 * store-then-load argument as parking). Returns how many it took.
 */
/* A steal of @n tasks from worker @victim: counted (this worker's own
 * count) and told (observe_internal.h). */
static void steal_seen(struct pool *p, struct slot *me, unsigned victim,
                       unsigned n)
{
    serex__stat_add(&me->steals, n);
    serex__obs_steal(&p->base, victim, n);
}

static unsigned pool_steal(struct pool *p, struct slot *me,
                           struct serex__task_rec *out, bool slots)
{
    unsigned n = 0;

    if (!(serex__pool_moving_begin(p, me) & ST_STOP)) {
        unsigned self = me->index, nslots = serex__pool_nslots(p);
        unsigned k = 1;

        for (; k < nslots && n == 0; k++)
            n = serex__runq_steal(&me->q,
                                  &serex__pool_slot(p, (self + k) % nslots)->q);
        /* what we stole is in our queue, open to thieves too: one may
         * have taken it all back by now */
        if (n != 0)
            steal_seen(p, me, (self + k - 1) % nslots, n);
        if (n != 0 && serex__runq_take(&me->q, out, 1) == 0)
            n = 0;
        else if (n == 0 && slots && next_look(p, me, out))
            n = 1;
    }
    serex__pool_moving_end(me);
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
bool serex__pool_take(struct pool *p, struct slot *me,
                      struct serex__task_rec *out, bool *more)
{
    unsigned n;

    if (p->batching) {
        if (++me->tick % 61 == 0 && fair_look(me) &&
            serex__pool_inject_take(p, me, out, 1) != 0)
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
        n = serex__pool_batches_nonempty(p) ? pool_steal(p, me, out, false)
                                            : 0;
        if (n == 0)
            n = serex__pool_inject_take(p, me, out, REFILL_MAX);
        if (n == 0)
            n = pool_steal(p, me, out, true);
    } else {
        if (serex__runq_take(&me->q, out, 1))
            return true;
        n = serex__pool_inject_take(p, me, out, 1);
    }
    *more = n > 1;
    return n != 0;
}

/* --- the local push's overflow (the push: pool_types_internal.h) --- */

/*
 * Our run queue is full: its older half goes to our shard of the shared
 * queue (Tokio's and Go's overflow), then @r goes behind the rest. When
 * the shard's ring cannot grow, the half comes back and @r is refused
 * (SEREX_ENOMEM) unless a thief made room meanwhile. Between `moving`'s
 * set and clear (serex__pool_push_local).
 */
int serex__pool_runq_overflow(struct pool *p, struct slot *me,
                              const struct serex__task_rec *r)
{
    struct serex__task_rec half[SEREX__RUNQ_CAP / 2];
    unsigned n = serex__runq_take(&me->q, half, SEREX__RUNQ_CAP / 2);

    serex__stat_add(&me->overflows, 1); /* this worker's own count */
    if (n != 0 &&
        serex__pool_inject_push_moved(p, serex__pool_stamp_shard(p, r->stamp),
                                      half, n) != SEREX_OK)
        for (unsigned i = 0; i < n; i++) /* we took n: there is room */
            serex__runq_push(&me->q, &half[i]);
    return serex__runq_push(&me->q, r) ? SEREX_OK : SEREX_ENOMEM;
}
