/* SPDX-License-Identifier: MIT */
/*
 * limiter.c - the concurrency limiter: at most max_running tasks at once,
 * started in submission order, on top of any executor. A serial executor
 * is a limiter of 1 (serial.c), and this file follows its drain closely;
 * what differs is that up to max_running drains, here called runners,
 * take tasks from one queue. The cap can change while it runs
 * (serex_limiter_set_max): see "Changing the cap" below; until then,
 * read max_running as a constant.
 *
 * --- The state word, demystified ---
 * Tasks go into a Vyukov MPSC queue (mpsc_internal.h), popped under
 * `pop_lock` (runners are many consumers; each pop is a few instructions).
 * One 64-bit word `st` holds three counts, so each decision below reads
 * them together in one atomic step:
 *
 *   bits  0-15  R: runners out. A runner is a task of ours on the target;
 *               it holds its slot from the producer's count that took it
 *               to its exit, or to the target refusing or dropping it.
 *   bits 16-31  U: runners holding a task: popped, and not yet accounted
 *               for (running, or returned and not yet accounted). U <= R.
 *   bits 32-63  Q: tasks counted and not popped: waiting in the queue, or
 *               a producer's push still under way.
 *
 *   producer: count: Q+1, and R+1 if R < max_running (a CAS: one step);
 *             push(t); if it took a slot, submit a runner.
 *   runner:   pop under pop_lock; with a node: Q-1, and U+1 unless it
 *             still holds the task before (that one has returned: its
 *             count passes to the new one); run it; repeat. After `batch`
 *             tasks: U-1, resubmit itself (keeping its slot) and return.
 *             With no node: if Q == 0, exit: R-1 and U-1 if holding (a
 *             CAS: one step); else a counted push is under way: wait.
 *   release:  a runner the target refused or dropped never ran (or holds
 *             no task: it accounted before its resubmission): R-1; if
 *             that leaves R == 0 with Q > 0, a runner is owed (the
 *             target was full) or the limiter is BROKEN (see below).
 *   set_max:  store the cap under pop_lock. Raised: fill, R+1 while
 *             R < max_running and Q > R - U (a CAS each), a runner
 *             submitted for each. Lowered: nothing more; each pop checks.
 *   shed:     (a cap lowered below its peak) before a pop, under
 *             pop_lock: if R > max_running, leave instead: R-1 and U-1
 *             if holding (a CAS that checks R again).
 *
 * Why at most max_running tasks run at once: a task runs only inside a
 * runner's visit (the run of one runner task on the target), one task at
 * a time, and a visit holds a slot until its exit CAS, after which it runs
 * nothing; a visit that resubmitted runs nothing more either, so the slot
 * passes to the next visit whole. Only the producer's CAS adds to R, and
 * only while R < max_running. So running tasks <= R <= max_running.
 *
 * Why no task waits without a runner: a task counted while R < max_running
 * took a slot and starts a runner. One counted while R == max_running is
 * seen by each of those R runners before it can leave: a runner exits only
 * by a CAS that finds Q == 0, and our Q+1 comes before it in `st`'s
 * modification order (else R was below max_running at our CAS). Runners
 * that leave without looking at Q are the ones the target refused or
 * dropped: the last of them to leave finds R == 0 with Q > 0 in its own
 * RMW, so it knows no runner will come: it marks the limiter BROKEN, or,
 * if the target said full, leaves a runner owed, which the next count
 * pays (R == 0 < max_running: it takes a slot), or an awaiter (below).
 *
 * Who wins each race:
 *  - set_max against a pop: pop_lock. set_max first: the pop checks the
 *    new cap; the pop first: its task started under the old one.
 *  - set_max's fill against a producer's count: the CASes on `st`; both
 *    take a slot only while R is below the cap each read, so no more
 *    runners than that cap start (a producer that read the old, larger
 *    cap may start one more: it sheds at its first pop).
 *  - a producer's count against a runner's exit: the first in `st`'s
 *    modification order. The exit first: the producer finds the slot free
 *    and starts a runner. The count first: the exit CAS fails (Q > 0) and
 *    the runner pops the task.
 *  - two runners, or a runner and shutdown_now, for one node: pop_lock;
 *    each node has one taker, and a task popped has started.
 *  - counting comes before pushing (as in serial.c), so every node in the
 *    queue is counted and a pop never takes Q below 0; a runner that finds
 *    the queue empty with Q > 0 waits for the push, which is a producer's
 *    next few instructions (as it waits for a link in progress, mpsc
 *    BUSY). Pops and the Q-1 that goes with them happen under pop_lock,
 *    and so do shutdown_now's take and its Q-n: once no execute is in
 *    flight, the queue holds exactly Q nodes when pop_lock is taken.
 *
 * --- Changing the cap ---
 * serex_limiter_set_max stores max_running under pop_lock and keeps
 * `peak`, the largest cap ever set (under pop_lock too). Everything that
 * takes a slot (a producer's count, set_max's fill, an owed runner's
 * retry) adds to R only while R is below a cap it read, and no cap it can
 * read is above peak: so R <= peak, always. While the cap is at its peak
 * (never lowered, or raised back), R <= max_running and the pop needs no
 * look, so a limiter whose cap never goes down pays a relaxed load of a
 * word it only reads per execute and two per task, and no argument above
 * changes. Below its peak, each
 * pop first loads `st` under pop_lock and, if R > max_running, the runner
 * sheds its slot instead of popping.
 *
 * The bound after a lowering: a task starts only by a pop, and a pop
 * under a lowered cap finds R <= max_running in the same hold of pop_lock
 * that pops (a shed CAS re-checks; a producer's R+1 the load missed is a
 * runner that will shed at its own first pop, under the same lock,
 * before it runs anything). Running tasks are at most R. So each task
 * that starts after set_max's unlock starts with at most max_running
 * running, itself included; tasks popped before it run to their end.
 * Raising needs no look: the next pops see the larger cap, and the fill
 * starts runners for what waits.
 *
 * No task waits without a runner, still: a shed leaves R >= max_running
 * >= 1 runners out (its CAS needs R > max_running, with the cap fixed by
 * the lock it holds), so the last runner never sheds; the rest of the
 * argument above holds for those that remain. A raise that meets waiting
 * tasks starts runners for them at once (the fill), and a producer that
 * read the old, smaller cap and started none still left its task to the
 * runners out (R was at the old cap, at least 1).
 *
 * A cap of 1 is a serial only while it is 1: raised, two runners may
 * run tasks at once (promise 3 no longer holds; tasks still start in
 * queue order). Lowered to 1, a pop that finds R <= 1 is the only runner
 * out: every other runner has left, by its exit CAS (release) or its
 * shed (release, and under pop_lock), and the pop's load of `st`
 * (acquire, under pop_lock) orders their tasks before ours: a serial
 * again, from then on. EDEADLK (promise 7b) follows the cap each task
 * started under: its frame is marked serial when that cap was 1.
 *
 * Start order: runners pop in queue order under pop_lock, so tasks start
 * in the order their pushes took effect (a runner on another thread may
 * call its task a moment before the runner that popped the task before).
 * With max_running 1 there is one runner at a time, so tasks also happen
 * one after the other (promise 3): within a visit by program order; from
 * a visit to its resubmission by the target's own ordering; from a runner
 * to the next by its exit CAS (release), which the producer's CAS that
 * takes the freed slot reads (acquire) before it submits the next runner.
 *
 * The memory orders, in one place:
 *  - the producer's count CAS: acquire on success (the slot hand-over
 *    above); failure relaxed (we retry).
 *  - the pop's Q-1 (U+1): relaxed. It is made under pop_lock, which orders
 *    it against every other take of a node; it never leaves Q and U both
 *    at 0 (a task is held after it), so it ends no wait; and being an RMW
 *    it does not break the release sequences an awaiter's load acquires.
 *  - the runner's exit CAS and its U-1 before a resubmission: seq_cst.
 *    Release: the tasks it ran happen-before the awaiter that sees Q and
 *    U at 0, and before the next taker of the slot. seq_cst: against the
 *    awaiter's count-then-look (see termination below).
 *  - release of a refused or dropped runner's slot: seq_cst (the slot
 *    changes hands with release-acquire everywhere; seq_cst before the
 *    look for awaiters when it leaves a runner owed; a rare path).
 *  - the take-back CAS of a refused lone task and shutdown_now's Q-n:
 *    seq_cst, as every change that may leave Q and U at 0.
 *  - `entry` and `life` (life_internal.h): as in serial.c, order for
 *    order (said at each).
 *  - max_running: relaxed everywhere. It is a number and publishes
 *    nothing: the pops read it under pop_lock, which set_max's store
 *    holds; producers and the fill read it without the lock, and a stale
 *    value costs a runner too many or too few, never a task (above).
 *  - a shed: its load of `st` acquire (the hand-over to a serial again,
 *    above), its CAS seq_cst as every exit (release of the tasks run;
 *    against an awaiter's look), failure acquire (we may stay and pop).
 *  - set_max's fill: its CAS acquire, as a producer's count.
 *  - push is the MPSC queue's (acq_rel exchange, release link), read by
 *    pop with acquire: the task's fn and arg are visible to its runner.
 *
 * --- Shutdown, shutdown_now, a target that refuses ---
 * `entry` (life_internal.h's entry word) holds the flags SHUT, STOP and
 * BROKEN and, above them, the number of calls between their flag check
 * and the end of their push (and of their runner's submission, if they
 * start one: until then the runner holds no reference), exactly as
 * serial.c's. shutdown_now sets STOP, waits for that number to reach 0
 * (so every accepted push is in the queue and counted), then takes the
 * whole queue under pop_lock and subtracts it from Q, under the same hold.
 * If the target refuses to start a runner:
 *  - if the task we count is the only one (Q == 1) and ours is the only
 *    runner (R == 1, so U == 0), we take it back under pop_lock with one
 *    CAS of `st` to 0 (a later producer's node queues behind ours, and no
 *    other runner exists to pop ours): execute returns the target's
 *    status and nothing is queued;
 *  - else we release our slot. If other runners remain, they run our task
 *    (they leave only once Q == 0): execute says SEREX_OK. If none
 *    remains and the target said SEREX_EFULL (full for a moment), or
 *    anything but SEREX_EREJECTED, a runner is owed: R == 0 with Q > 0 and not BROKEN. Nothing marks it
 *    but `st` itself: the next execute's count finds R below max_running
 *    and starts a runner as it would on an idle limiter, and
 *    await_termination and destroy, whose waits end early when they see
 *    it (after a seq_cst release and serex__life_notify, so a parked one
 *    hears), take a slot with a CAS (only while R == 0 and Q > 0) and
 *    start one, counted in flight as an execute is, looking again every
 *    millisecond while the target stays full. SEREX_EREJECTED (shut down,
 *    for good) leaves the tasks stuck: BROKEN. Execute then refuses new
 *    tasks, shutdown_now hands the stuck ones back and destroy drops
 *    them: the serial's policy (promise 5), applied when no runner is
 *    left.
 * So a passing refusal costs at most the lone task, never the limiter.
 * If the target refuses a resubmission, the runner keeps running where it
 * is. If it takes a runner back or drops it (its shutdown_now, its
 * destroy), the runner's `dropped` hook releases its slot (BROKEN if that
 * leaves tasks stuck) and its reference; on_pending never sees it.
 *
 * --- Termination and destroy ---
 * The limiter is terminated once shut down, with no execute in flight,
 * and Q == 0 and U == 0: every accepted task has run or was taken back.
 * Runners still out (queued on a target nobody runs, or on their way out)
 * do not count: each holds the limiter instead (life_internal.h's life
 * word: holders, DETACHED, the generation awaiters park on, their count;
 * at most max_running runners plus the threads between an exit and its
 * release, or between a hold and a refused submission). The last of {the
 * last release, destroy's detach} frees the limiter: destroy if no runner
 * is out, else the last runner, run or dropped. Every change of `st` that can
 * leave Q and U at 0 is seq_cst and is followed by a seq_cst look for
 * waiters in `life` (or an unconditional wake: shutdown_now); an awaiter
 * counts itself in `life` (seq_cst) before it looks: either the waker sees
 * the waiter or the waiter sees the change, and with no waiter the end of
 * work costs no system call.
 * destroy waits as serial's (serex__wrapper_settle: wait, or drop what is
 * stuck, or whose target has terminated), then waits once more without
 * limit: a drop takes the queue, but runners other than the refused or
 * dropped ones may still be running a task, and destroy waits for those.
 */

#include "alloc_internal.h"
#include "await_internal.h"
#include "common_internal.h"
#include "executor_internal.h"
#include "exec_class_internal.h"
#include "registry_internal.h"
#include "life_internal.h"
#include "mpsc_internal.h"
#include "op_internal.h"
#include "spinlock_internal.h"
#include "stats_internal.h"
#include "task_watch_internal.h"
#include "thread_internal.h"

#define BATCH 64u /* tasks a visit runs before the thread goes back */

/* The entry word's flags (life_internal.h); above them, calls in flight */
#define FLAG_SHUT UINT64_C(1)   /* shutdown: execute refuses */
#define FLAG_STOP UINT64_C(2)   /* shutdown_now: the queue was taken */
#define FLAG_BROKEN UINT64_C(4) /* the target rejected or dropped runners */
_Static_assert(((FLAG_SHUT | FLAG_STOP | FLAG_BROKEN) & ~SEREX__ENTRY_FLAGS) ==
                   0,
               "the entry word has four flags");

#define ST_R UINT64_C(1)         /* one runner out */
#define ST_U (UINT64_C(1) << 16) /* one runner holding a task */
#define ST_Q (UINT64_C(1) << 32) /* one task counted, not popped */
#define ST_RUNNERS(s) ((unsigned)((s)&0xffffu))
#define ST_HELD(s) ((unsigned)(((s) >> 16) & 0xffffu))
#define ST_QUEUED(s) ((s) >> 32)
#define ST_QUEUED_MAX UINT64_C(0xffffffff)
#define ST_IDLE(s) (((s) >> 16) == 0) /* Q == 0 and U == 0 */

_Static_assert(SEREX_LIMITER_MAX_RUNNING <= 0xffffu, "R and U are 16 bits");

struct limiter {
    serex_executor base;
    struct serex__reg reg; /* serex_dump's list */
    serex_executor *target;
    /* The cap: written by set_max under pop_lock (which every pop's check
     * holds), read relaxed by producers and set_max's fill: a number that
     * publishes nothing (see the essay, "Changing the cap"). */
    _Atomic unsigned max_running;
    struct serex__op runner; /* what the target runs, once per runner out:
                                runners are alike, so they share it */
    struct serex__metrics *_Atomic metrics; /* NULL: off (metrics.h) */

    /* Producers' line: the queue's tail and the producers' words. */
    _Alignas(SEREX__CACHELINE) struct serex__task *_Atomic tail;
    struct serex__entry entry; /* FLAG_* | calls in flight */
    _Atomic uint64_t st;       /* Q | U | R: see the essay */

    /* The runners' line: the queue's consumer side. */
    _Alignas(SEREX__CACHELINE) serex__spinlock pop_lock;
    struct serex__task *head;
    struct serex__task stub;
    unsigned peak;             /* the largest cap ever set; under pop_lock */
    _Atomic uint64_t started;  /* tasks popped to run; under pop_lock */
    _Atomic uint64_t taken;    /* handed back or dropped; under pop_lock */
    _Atomic uint64_t rejected; /* execute calls refused */
    _Atomic uint64_t yields;   /* runners' batches that gave the thread
                                  back (relaxed RMW: runners run at once) */

    struct serex__life life; /* runners | DETACHED | generation | waiters */
};

static struct limiter *limiter_of(serex_executor *ex)
{
    return serex__container_of(ex, struct limiter, base);
}

static struct serex__mpsc_ends limiter_queue(struct limiter *l)
{
    return (struct serex__mpsc_ends){&l->tail, &l->head, &l->stub};
}

/* --- slots and references --- */

/* Q and U reached 0: wake awaiters, if any (see the essay). */
static void limiter_idle(struct limiter *l)
{
    serex__life_notify(&l->life);
}

/* The limiter's memory, its metrics' with it. */
static void limiter_free(struct limiter *l)
{
    /* relaxed: the last holder; no one records any more */
    serex__metrics_free(
        atomic_load_explicit(&l->metrics, memory_order_relaxed));
    serex__free(l);
}

/* A runner is over (run, refused or dropped): its last touch. The last
 * holder after destroy frees the limiter (life_internal.h). */
static void limiter_life_exit(struct limiter *l)
{
    if (serex__life_release(&l->life))
        limiter_free(l);
}

/*
 * A runner that holds no task leaves without looking at Q (the target
 * refused it, said @rc, or dropped it: SEREX_EREJECTED). If that leaves
 * tasks with no runner: a passing refusal (full) owes them one, which the
 * next execute or awaiter starts (see the essay); SEREX_EREJECTED (shut
 * down, for good) leaves them stuck (BROKEN).
 */
static void limiter_release_slot(struct limiter *l, int rc)
{
    /* seq_cst: a slot changes hands with release-acquire everywhere; and
     * before serex__life_notify's look for awaiters (the owed case) */
    uint64_t s = atomic_fetch_sub_explicit(&l->st, ST_R, memory_order_seq_cst) -
                 ST_R;

    if (ST_RUNNERS(s) != 0 || ST_QUEUED(s) == 0)
        return;
    if (rc != SEREX_EREJECTED) {      /* full, say: for a moment */
        serex__life_notify(&l->life); /* awaiters start one */
        return;
    }
    /* relaxed: BROKEN only makes execute refuse, and destroy drop; the
     * in-flight drop (execute) or the reference's release (dropped) that
     * follows orders it for those who act on it */
    serex__entry_close(&l->entry, FLAG_BROKEN, memory_order_relaxed);
}

/* --- the runner --- */

/*
 * Under pop_lock, on a limiter whose cap was lowered: if more runners are
 * out than the cap allows, this one leaves (R-1, and U-1 if @held), in
 * one CAS that checks R again (a shed). Returns whether it left; *@after
 * is st after its CAS.
 */
static bool limiter_shed(struct limiter *l, bool held, unsigned max,
                         uint64_t *after)
{
    /* acquire: a runner that left before us (its exit CAS, release) had
     * its tasks' writes happen before the task we may pop now (a limiter
     * lowered to 1 is a serial again once alone: see the essay) */
    uint64_t old = atomic_load_explicit(&l->st, memory_order_acquire), s;

    do {
        if (ST_RUNNERS(old) <= max)
            return false;
        s = old - ST_R - (held ? ST_U : 0);
        /* seq_cst: an exit, as limiter_leave's; failure acquire: we may
         * decide from the value to stay and pop */
    } while (!atomic_compare_exchange_weak_explicit(
        &l->st, &old, s, memory_order_seq_cst, memory_order_acquire));
    *after = s;
    return true;
}

/*
 * Pops the oldest task under pop_lock and counts it as held (Q-1, and
 * U+1 unless @held: the task before has returned and passes its count
 * on). NULL if the queue is empty (a counted push may be under way), or
 * if this runner shed its slot instead (*@shed: the cap was lowered below
 * the runners out; it accounted for its held task and must leave).
 */
static struct serex__task *limiter_pop(struct limiter *l, bool held, bool *shed)
{
    struct serex__task *t;
    uint64_t after = 0;
    unsigned max;

    serex__spin_lock(&l->pop_lock);
    /* relaxed: set_max writes it under pop_lock, which we hold */
    max = atomic_load_explicit(&l->max_running, memory_order_relaxed);
    /* With the cap at its peak, R cannot be above it: no look needed
     * (the essay, "Changing the cap") */
    *shed = max < l->peak && limiter_shed(l, held, max, &after);
    if (*shed) {
        serex__spin_unlock(&l->pop_lock);
        if (ST_IDLE(after))
            limiter_idle(l);
        return NULL;
    }
    t = serex__mpsc_pop_wait_ends(limiter_queue(l));
    if (t != NULL) {
        /* relaxed: see the essay (under pop_lock; never leaves Q and U at
         * 0; an RMW, so release sequences go on through it) */
        atomic_fetch_sub_explicit(&l->st, held ? ST_Q : ST_Q - ST_U,
                                  memory_order_relaxed);
        serex__stat_add(&l->started, 1);
    }
    serex__spin_unlock(&l->pop_lock);
    return t;
}

/* The held task has returned: account for it (U-1), keeping the slot. */
static void limiter_account(struct limiter *l)
{
    /* seq_cst: release for the tasks run, and before limiter_idle's
     * look for waiters (see the essay) */
    uint64_t s = atomic_fetch_sub_explicit(&l->st, ST_U, memory_order_seq_cst) -
                 ST_U;

    if (ST_IDLE(s))
        limiter_idle(l);
}

/* The queue was empty: leave (R-1, and U-1 if @held) if Q is 0 too.
 * Returns false if a counted push is under way: pop again. */
static bool limiter_leave(struct limiter *l, bool held)
{
    /* relaxed: a first guess for the CAS */
    uint64_t old = atomic_load_explicit(&l->st, memory_order_relaxed), s;

    do {
        if (ST_QUEUED(old) != 0)
            return false;
        s = old - ST_R - (held ? ST_U : 0);
        /* seq_cst: as limiter_account; it also hands the slot over to the
         * producer that takes it (acquire); failure relaxed: we retry */
    } while (!atomic_compare_exchange_weak_explicit(
        &l->st, &old, s, memory_order_seq_cst, memory_order_relaxed));
    if (ST_IDLE(s))
        limiter_idle(l);
    return true;
}

static void limiter_run(struct serex__op *op)
{
    struct limiter *l = serex__container_of(op, struct limiter, runner);
    struct serex__frame frame;
    bool held = false;  /* a task we popped is counted in U */
    unsigned visit = 0; /* tasks run since the target gave us this thread */

    serex__frame_push(&frame, &l->base);
    for (unsigned idle = 0;; idle++) {
        bool shed;
        struct serex__task *t = limiter_pop(l, held, &shed);

        if (t != NULL) {
            held = true;
            idle = 0;
            /* a cap of 1 is a serial: a task queued now waits for this
             * one (promise 7b); the cap when the task starts decides.
             * relaxed: a number; the pop ordered it enough */
            frame.serial = atomic_load_explicit(&l->max_running,
                                                memory_order_relaxed) == 1;
            /* the node is freed before the task: it may queue more */
            serex__task_free_run(&l->base, &l->metrics, true, t);
            if (++visit < BATCH)
                continue;
            /* A full batch: give the thread back, unless the target
             * refuses (it is shutting down, say): then keep going here.
             * Account first: the resubmitted runner may never run. */
            limiter_account(l);
            held = false;
            /* relaxed: a statistic */
            atomic_fetch_add_explicit(&l->yields, 1, memory_order_relaxed);
            if (serex__op_yield(l->target, &l->runner) == SEREX_OK) {
                serex__frame_pop(&frame);
                return; /* our slot and reference pass to the new visit */
            }
            visit = 0;
        } else if (shed || limiter_leave(l, held)) {
            break; /* shed: the cap was lowered; it accounted */
        } else if (idle % 64 == 63) { /* a counted push is under way */
            serex__thread_yield();
        } else {
            serex__cpu_relax();
        }
    }
    serex__frame_pop(&frame);
    limiter_life_exit(l);
}

/*
 * The target took a runner back or dropped it (shutdown_now, a destroy):
 * it never ran, or accounted for its tasks before its resubmission. Its
 * slot goes back (the last one out with tasks waiting marks them stuck:
 * they stay for the limiter's shutdown_now or destroy) and so does its
 * reference. The runner is not the user's: on_pending never sees it.
 */
static void limiter_runner_dropped(struct serex__op *op,
                                   serex_pending_fn on_pending, void *ctx)
{
    struct limiter *l = serex__container_of(op, struct limiter, runner);

    (void)on_pending;
    (void)ctx;
    limiter_release_slot(l, SEREX_EREJECTED); /* gone for good */
    limiter_life_exit(l);
}

static const struct serex__op_class runner_class = {
    "limiter runner", limiter_run, limiter_runner_dropped};

/* --- starting a runner --- */

/*
 * The target refused the runner our count took a slot for. If our task is
 * the only one counted and ours the only runner, take it back (under
 * pop_lock: our node is the oldest, and a producer that counts after our
 * CAS queues behind it): the caller reports the refusal and nothing is
 * queued. Else release the slot: other runners run our task, or none is
 * left and the tasks are owed a runner (full) or kept (BROKEN). Returns
 * whether ours came back.
 */
static bool limiter_refused(struct limiter *l, int rc)
{
    uint64_t lone = ST_Q + ST_R;
    struct serex__task *t = NULL;

    serex__spin_lock(&l->pop_lock);
    /* seq_cst: as every change that may leave Q and U at 0 (see the
     * essay); our in-flight count keeps awaiters looking meanwhile */
    if (atomic_compare_exchange_strong_explicit(
            &l->st, &lone, 0, memory_order_seq_cst, memory_order_relaxed))
        t = serex__mpsc_pop_wait_ends(limiter_queue(l));
    serex__spin_unlock(&l->pop_lock);
    if (t == NULL) {
        limiter_release_slot(l, rc);
        return false;
    }
    serex__task_free(t);
    return true;
}

/* A slot was taken for a runner: submit one, holding a reference for it.
 * Returns the target's status (on a refusal the reference is back, the
 * slot still taken). */
static int limiter_submit(struct limiter *l)
{
    int rc;

    /* ordered before the submission, which the target orders */
    serex__life_hold(&l->life);
    rc = serex__op_submit(l->target, &l->runner);
    if (rc != SEREX_OK)
        limiter_life_exit(l); /* never the last: the caller is in flight */
    return rc;
}

/* Our count took a slot: submit a runner. Returns the target's refusal if
 * our task was taken back, else SEREX_OK. */
static int limiter_start(struct limiter *l)
{
    int rc = limiter_submit(l);

    if (rc == SEREX_OK)
        return SEREX_OK;
    return limiter_refused(l, rc) ? rc : SEREX_OK;
}

/*
 * Tasks wait with no runner out (a full target refused the last one):
 * take a slot and start a runner, as a producer's count would. The caller
 * (an awaiter, destroy) is counted in the entry word.
 */
static void limiter_retry_owed(struct limiter *l)
{
    /* relaxed: a first guess for the CAS */
    uint64_t old = atomic_load_explicit(&l->st, memory_order_relaxed);
    int rc;

    do {
        if (ST_RUNNERS(old) != 0 || ST_QUEUED(old) == 0)
            return; /* a runner is out (it runs them), or nothing waits */
        /* acquire: as limiter_count's, the slot's hand-over; failure
         * relaxed: we retry */
    } while (!atomic_compare_exchange_weak_explicit(
        &l->st, &old, old + ST_R, memory_order_acquire, memory_order_relaxed));
    rc = limiter_submit(l);
    if (rc != SEREX_OK)
        limiter_release_slot(l, rc); /* no task of ours to take back */
}

/*
 * The cap was raised: for tasks that wait with no runner free to take
 * them (Q above R - U: more than the runners between tasks will pop),
 * take slots up to the cap, as a producer's count would, and submit a
 * runner for each. Stops at the target's first refusal (that slot goes
 * back: limiter_release_slot). The caller is counted in the entry word.
 */
static void limiter_fill(struct limiter *l)
{
    /* relaxed: our caller stored it (or a later set_max, whose cap is
     * then the one to fill to) */
    unsigned max = atomic_load_explicit(&l->max_running, memory_order_relaxed);
    /* relaxed: a first guess for the CAS */
    uint64_t old = atomic_load_explicit(&l->st, memory_order_relaxed);
    int rc;

    for (;;) {
        do {
            unsigned between = ST_RUNNERS(old) - ST_HELD(old);

            if (ST_RUNNERS(old) >= max || ST_QUEUED(old) <= between)
                return;
            /* acquire: as limiter_count's, the slot's hand-over;
             * failure relaxed: we retry */
        } while (!atomic_compare_exchange_weak_explicit(
            &l->st, &old, old + ST_R, memory_order_acquire,
            memory_order_relaxed));
        old += ST_R; /* the next guess */
        if ((rc = limiter_submit(l)) != SEREX_OK) {
            limiter_release_slot(l, rc); /* no task of ours to take back */
            return;
        }
    }
}

/* Counts a task in Q, taking a slot if one is free (*start says so).
 * SEREX_EFULL, with nothing counted, if Q is at its limit. */
static int limiter_count(struct limiter *l, bool *start)
{
    /* relaxed: a first guess for the CAS */
    uint64_t old = atomic_load_explicit(&l->st, memory_order_relaxed), s;
    /* relaxed: a number; one read before set_max's store may start a
     * runner too many (it sheds) or too few (set_max's fill starts it) */
    unsigned max = atomic_load_explicit(&l->max_running, memory_order_relaxed);

    do {
        if (serex__unlikely(ST_QUEUED(old) == ST_QUEUED_MAX))
            return SEREX_EFULL;
        *start = ST_RUNNERS(old) < max;
        s = old + ST_Q + (*start ? ST_R : 0);
        /* acquire: a slot freed by a runner's exit (release) comes with
         * its tasks' writes, before the runner we start (the hand-over of
         * the essay); failure relaxed: we retry */
    } while (!atomic_compare_exchange_weak_explicit(
        &l->st, &old, s, memory_order_acquire, memory_order_relaxed));
    return SEREX_OK;
}

/* --- the executor --- */

static int limiter_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct limiter *l = limiter_of(ex);
    struct serex__task *t = serex__task_new(fn, arg);
    bool start = false;
    uint64_t c;
    int rc;

    if (serex__unlikely(t == NULL)) {
        /* relaxed: a statistic (every execute not SEREX_OK counts) */
        atomic_fetch_add_explicit(&l->rejected, 1, memory_order_relaxed);
        return SEREX_ENOMEM;
    }
    /* the flags and the in-flight count share one modification order, so
     * shutdown_now either is seen here or waits for us (life_internal.h) */
    c = serex__entry_enter(&l->entry);
    if (serex__unlikely(c & (FLAG_SHUT | FLAG_BROKEN))) {
        rc = SEREX_EREJECTED;
    } else if ((rc = limiter_count(l, &start)) == SEREX_OK) {
        serex__task_watch(ex, &l->metrics, t);
        serex__mpsc_push_ends(limiter_queue(l), t); /* count, then push */
        t = NULL;
        /* Still counted in flight: shutdown_now, and so await and
         * destroy, wait until the runner we start holds its reference. */
        if (start)
            rc = limiter_start(l);
    }
    if (t == NULL) /* release: our count and push before shutdown_now's */
        serex__entry_leave(&l->entry);
    else /* refused: nothing queued */
        serex__entry_abort(&l->entry);
    if (t != NULL)
        serex__task_free(t);
    if (serex__unlikely(rc != SEREX_OK)) /* relaxed: a statistic */
        atomic_fetch_add_explicit(&l->rejected, 1, memory_order_relaxed);
    return rc;
}

static void limiter_shutdown(serex_executor *ex)
{
    struct limiter *l = limiter_of(ex);

    /* release: nothing but the flag; awaiters re-check after the bump */
    if (!(serex__entry_close(&l->entry, FLAG_SHUT, memory_order_release) &
          FLAG_SHUT))
        serex__life_bump(&l->life);
}

/*
 * Takes every queued task, in order, as a private list, and subtracts them
 * from Q under the same hold of pop_lock. The caller set SHUT and STOP.
 */
static struct serex__task *limiter_take_all(struct limiter *l, size_t *n)
{
    struct serex__task *first = NULL, **tail = &first;

    /* acquire: pairs with the release leave in limiter_execute; at zero
     * every accepted push is queued and counted in Q */
    serex__entry_quiesce(&l->entry);
    /* One hold of pop_lock for the whole queue: no runner starts a task
     * behind one we took back (the order promise 2 is about). */
    serex__spin_lock(&l->pop_lock);
    *n = serex__mpsc_take_all(limiter_queue(l), &tail);
    serex__stat_add(&l->taken, *n);
    /* seq_cst: as every change that may leave Q and U at 0 (callers wake
     * awaiters) */
    atomic_fetch_sub_explicit(&l->st, (uint64_t)*n * ST_Q,
                              memory_order_seq_cst);
    serex__spin_unlock(&l->pop_lock);
    return first;
}

static size_t limiter_shutdown_now(serex_executor *ex,
                                   serex_pending_fn on_pending, void *ctx)
{
    struct limiter *l = limiter_of(ex);
    struct serex__task *list;
    size_t n;

    /* relaxed: limiter_take_all's acquire wait orders the flags */
    serex__entry_close(&l->entry, FLAG_SHUT | FLAG_STOP, memory_order_relaxed);
    list = limiter_take_all(l, &n);
    serex__life_bump(&l->life);
    serex__task_hand_back_list(list, on_pending, ctx);
    return n;
}

/* Shut down, and every task accepted so far has run or was taken back
 * (submissions still in flight are looked at by the callers). */
static enum serex__await_state limiter_state(struct limiter *l)
{
    /*
     * One load decides both: SHUT is set and no execute is in flight (see
     * serial_state: a producer that passed the flag check before SHUT was
     * set has left, and counted its task in Q before it left).
     * seq_cst on st: against limiter_idle (see the essay); it also reads
     * the end of the release sequences of the runners' U-1, so the tasks'
     * writes are visible once we report termination.
     */
    uint64_t c = serex__entry_load(&l->entry);

    if (!(c & FLAG_SHUT))
        return SEREX__AWAIT_NOT;
    if (serex__entry_busy(c))
        return SEREX__AWAIT_SOON;
    return ST_IDLE(atomic_load_explicit(&l->st, memory_order_seq_cst))
               ? SEREX__AWAIT_DONE
               : SEREX__AWAIT_NOT;
}

/* Tasks wait and no runner is out, not for good: a runner is owed. */
static bool limiter_owed(struct limiter *l)
{
    /* relaxed (both): a hint; limiter_retry_owed decides with a CAS */
    uint64_t st = atomic_load_explicit(&l->st, memory_order_relaxed);

    return ST_RUNNERS(st) == 0 && ST_QUEUED(st) != 0 &&
           !(atomic_load_explicit(&l->entry.word, memory_order_relaxed) &
             (FLAG_STOP | FLAG_BROKEN));
}

/* One look of an awaiter: limiter_state, and whether a runner is owed. */
static enum serex__await_state limiter_look(void *p, bool *owed)
{
    struct limiter *l = p;
    enum serex__await_state st = limiter_state(l);

    *owed = st == SEREX__AWAIT_NOT && limiter_owed(l);
    return st;
}

/* An awaiter found a runner owed: start one, counted in flight as an
 * execute is. Returns whether one is still owed (the target still full). */
static bool limiter_retry_owed_waiting(struct limiter *l)
{
    uint64_t c = serex__entry_enter(&l->entry);

    if (c & (FLAG_STOP | FLAG_BROKEN)) { /* taken, or kept for good */
        serex__entry_abort(&l->entry);
        return false;
    }
    limiter_retry_owed(l);
    serex__entry_leave(&l->entry);
    return limiter_owed(l);
}

/*
 * await_termination: serex__life_await, which ends early when a runner is
 * owed: nothing would wake us when the target has room, so we start one
 * here, and while the target stays full, look again every millisecond.
 */
static bool limiter_retry_cb(void *l)
{
    return limiter_retry_owed_waiting(l);
}

static int limiter_await(serex_executor *ex, int64_t timeout_ns)
{
    return serex__life_await_owed(&limiter_of(ex)->life, limiter_look,
                                  limiter_retry_cb, limiter_of(ex),
                                  timeout_ns);
}

static bool limiter_broken(serex_executor *ex)
{
    /* a hint; serex__wrapper_settle looks again after waiting */
    return serex__entry_load(&limiter_of(ex)->entry) & FLAG_BROKEN;
}

static void limiter_drop_all(serex_executor *ex)
{
    size_t n;

    serex__task_hand_back_list(limiter_take_all(limiter_of(ex), &n), NULL,
                               NULL);
}

static void limiter_destroy(serex_executor *ex)
{
    struct limiter *l = limiter_of(ex);

    serex__wrapper_settle(ex, l->target, limiter_broken, limiter_drop_all);
    /* After a drop, runners the target still runs may be in a task: they
     * find the queue empty after it and leave (U back to 0). Shut down,
     * nothing in flight, Q at 0: this wait ends when they return. */
    (void)limiter_await(ex, SEREX_FOREVER);
    if (serex__life_detach(&l->life)) /* else the last runner frees */
        limiter_free(l);
}

static void limiter_stats(serex_executor *ex, serex_stats *out);

/* serex_dump: what it runs on and its bound. */
static void limiter_describe(serex_executor *ex, struct serex__dump *d)
{
    struct limiter *l = limiter_of(ex);

    serex__dump_ptr(d, "target", l->target);
    /* relaxed: a number for the dump */
    serex__dump_u64(
        d, "max_running",
        atomic_load_explicit(&l->max_running, memory_order_relaxed));
}

/* Stripes: a limiter's bodies run at once (task_watch_internal.h). */
static int limiter_metrics_enable(serex_executor *ex,
                                  const serex_metrics_config *cfg)
{
    return serex__metrics_enable(&limiter_of(ex)->metrics, cfg,
                                 SEREX__METRICS_STRIPES);
}

static void limiter_metrics(serex_executor *ex, serex_metrics *out)
{
    struct limiter *l = limiter_of(ex);

    serex__metrics_read_slot(&l->metrics, out);
    /* relaxed: a statistic */
    out->yields = atomic_load_explicit(&l->yields, memory_order_relaxed);
}

static void limiter_stats(serex_executor *ex, serex_stats *out)
{
    struct limiter *l = limiter_of(ex);
    /* relaxed (all): a statistic */
    uint64_t s = atomic_load_explicit(&l->st, memory_order_relaxed);
    uint64_t started = atomic_load_explicit(&l->started, memory_order_relaxed);
    uint64_t held = (s >> 16) & 0xffffu;

    /* held tasks are running, or returned and not yet accounted for */
    out->completed = started > held ? started - held : 0;
    out->queued = ST_QUEUED(s) + held;
    out->submitted = started + ST_QUEUED(s) +
                     atomic_load_explicit(&l->taken, memory_order_relaxed);
    out->rejected = atomic_load_explicit(&l->rejected, memory_order_relaxed);
}

/* A limiter waits on its target (promise 7). */
static bool limiter_waits_on(serex_executor *ex,
                             bool (*blocks)(serex_executor *))
{
    return blocks(limiter_of(ex)->target);
}

static const struct serex__exec_class limiter_class = {
    SEREX__CLASS_OPS(limiter_execute, limiter_shutdown, limiter_shutdown_now,
                     limiter_await),
    "limiter",
    limiter_stats,
    limiter_waits_on,
    limiter_destroy,
    limiter_metrics_enable,
    limiter_metrics,
    SEREX__CLASS_REG(struct limiter, base, reg, "limiter", limiter_describe)};

/* --- changing the cap --- */

static struct limiter *limiter_checked(serex_executor *ex)
{
    if (ex == NULL || ex->ops != &limiter_class.ops)
        return NULL;
    return limiter_of(ex);
}

int serex_limiter_set_max(serex_executor *limiter, unsigned max_running)
{
    struct limiter *l = limiter_checked(limiter);
    unsigned old;

    if (l == NULL || max_running == 0 ||
        max_running > SEREX_LIMITER_MAX_RUNNING)
        return SEREX_EINVAL;
    /* Under pop_lock: every pop after ours checks the new cap (the essay,
     * "Changing the cap"). relaxed (both): a number, ordered by the lock
     * for the pops; producers read it relaxed */
    serex__spin_lock(&l->pop_lock);
    old = atomic_load_explicit(&l->max_running, memory_order_relaxed);
    atomic_store_explicit(&l->max_running, max_running, memory_order_relaxed);
    if (max_running > l->peak)
        l->peak = max_running;
    serex__spin_unlock(&l->pop_lock);
    if (max_running > old) {
        /* counted in flight as an execute is, so await and destroy wait
         * for the runners we start to hold their references */
        uint64_t c = serex__entry_enter(&l->entry);

        if (c & (FLAG_STOP | FLAG_BROKEN)) { /* taken, or kept for good */
            serex__entry_abort(&l->entry);
            return SEREX_OK;
        }
        limiter_fill(l);
        serex__entry_leave(&l->entry);
    }
    return SEREX_OK;
}

unsigned serex_limiter_max(serex_executor *limiter)
{
    struct limiter *l = limiter_checked(limiter);

    /* relaxed: a number */
    return l != NULL
               ? atomic_load_explicit(&l->max_running, memory_order_relaxed)
               : 0;
}

int serex_limiter_create(serex_executor *target, unsigned max_running,
                         serex_executor **out)
{
    struct limiter *l;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    if (target == NULL || target->ops == NULL || max_running == 0 ||
        max_running > SEREX_LIMITER_MAX_RUNNING)
        return SEREX_EINVAL;
    l = serex__calloc_aligned(SEREX__CACHELINE, sizeof *l);
    if (l == NULL)
        return SEREX_ENOMEM;
    l->base.ops = &limiter_class.ops;
    l->runner.cls = &runner_class;
    l->target = target;
    atomic_init(&l->max_running, max_running);
    l->peak = max_running;
    serex__mpsc_init_ends(limiter_queue(l));
    serex__exec_register(&l->base, NULL); /* serex_dump lists it */
    *out = &l->base;
    return SEREX_OK;
}
