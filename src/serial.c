/* SPDX-License-Identifier: MIT */
/*
 * serial.c - the serial executor: one task at a time, in order, on top of
 * any executor, by the queue-drain pattern.
 *
 * --- The drain, demystified ---
 * Tasks go into a Vyukov MPSC queue (one exchange per push, see
 * mpsc_internal.h). `wip` counts tasks announced and not yet accounted
 * for: a producer adds 1 just before its push; the drain subtracts the
 * number it ran at the end of each batch; shutdown_now subtracts what it
 * took back.
 *
 *   producer: first = (wip++ == 0); push(t); if first, submit the drain.
 *   drain:    run up to `batch` tasks, popping each under `pop_lock`;
 *             left = (wip -= ran);
 *             left == 0: return (the queue is empty and accounted for);
 *             ran == batch: resubmit itself and return (fairness);
 *             else: loop (a task was pushed while we looked).
 *
 * Who drains: exactly one drain exists from the 0 -> 1 transition of
 * `wip` to the decrement that brings it back to 0, because only the
 * producer that sees 0 submits, and a drain only ends on seeing 0 (or by
 * handing over to its own resubmission). (A full target may refuse it:
 * then the drain is owed, and stands as FLAG_OWED until it is submitted
 * again; see below.) So no two drains ever run at once, and no task waits
 * without a drain (or an owed one): a producer whose increment
 * comes after the drain's final decrement sees 0 and submits a new one; one
 * whose increment comes before it makes the decrement leave a remainder,
 * and the drain goes on. Counting comes before pushing, so the drain can
 * never run a task that is not counted yet: if it could, its subtraction
 * would take `wip` below the count of live tasks, the late increment would
 * then find 0, and a second drain would start beside the first. The price:
 * a remainder may stand for a task whose push is still under way, so a
 * drain that finds the queue empty while it owes tasks waits for the push
 * (as it waits for a link in progress, mpsc BUSY).
 *
 * Why each task happens-before the next: within a drain, program order.
 * Across drains: the decrement that ends a drain is a release RMW, the
 * increment that sees 0 is an acquire RMW on the same word, and the target
 * orders the submission before the new drain runs. Resubmission after a
 * batch is the target's own happens-before.
 *
 * The memory orders: push's exchange is acq_rel and its link is a release
 * store, read by pop with acquire (fn and arg are visible). `wip` RMWs are
 * acq_rel for the hand-over above.
 *
 * --- Shutdown, shutdown_now, a target that refuses ---
 * `entry` (life_internal.h's entry word) holds the flags SHUT, STOP,
 * BROKEN and OWED and, above them, the number of calls between their flag
 * check and the end of their push (and of their drain's submission, if
 * they start or resubmit one: until then the drain holds no reference,
 * see below). shutdown_now sets STOP, waits for that number to reach 0
 * (so every accepted push is in the queue and counted), then takes the
 * whole queue under `pop_lock` (the drain pops under the same lock, so
 * each task has one taker: a task the drain popped has started) and
 * subtracts it from `wip`. If the target refuses a resubmission, the
 * drain keeps running where it is.
 *
 * If the target refuses to start a drain and the task whose submission
 * found the serial idle is still its only one, it is taken back (the CAS
 * of `wip` from 1 to 0 under `pop_lock`) and execute returns the target's
 * status: nothing is queued. Else tasks were queued behind it, and:
 *  - the target said SEREX_EFULL (a bounded pool, full for a moment), or
 *    anything but SEREX_EREJECTED (SEREX_ENOMEM, a user's executor's own
 *    status): the drain is owed. OWED is set, and it alone stands for the one drain:
 *    none exists, wip stays above 0 (nothing subtracts it but a drain, or
 *    shutdown_now, which waits for the caller in flight), so no producer
 *    starts one. Whoever clears OWED with its RMW (serial_retry_owed) owns
 *    the drain and submits it again, in flight as an execute is: the next
 *    execute whose flag check saw OWED (a bounded serial's refused at its
 *    cap too: nothing else would free a place), and await_termination
 *    and destroy, whose waits end early when they see OWED, submit it and
 *    look again every millisecond while the target stays full (nothing
 *    tells them when it has room). A refusal again sets OWED again, or
 *    breaks the serial (below). Setting OWED is seq_cst and followed by
 *    serex__life_notify, so a parked awaiter hears of it.
 *  - SEREX_EREJECTED (shut down, for good): BROKEN is set, as when
 *    the target drops an accepted drain (serial_drain_dropped): the tasks
 *    stay queued, execute refuses new ones, shutdown_now hands them back,
 *    destroy drops them (promise 5, docs/contract.md).
 * So a passing refusal costs at most the lone task, never the serial.
 * What is given up: between the refusal and the next execute or wait,
 * the tasks wait with no drain on the target; a caller that waits on one
 * of them otherwise (a future, an event) waits that long.
 *
 * --- Termination and destroy ---
 * The serial is terminated once shut down with `wip` at 0: every accepted
 * task has run or was taken back. A drain may still be on its way out, or
 * still queued on a target nobody runs (after shutdown_now took its tasks):
 * termination does not wait for it. Instead every drain in flight holds
 * the serial (life_internal.h's life word: holders, DETACHED, the
 * generation awaiters park on, their count): a producer or a claimer of
 * the owed drain holds before it submits, and the hold passes to the drain
 * (or is released when the target refuses). The last of {the last
 * release, destroy's detach} frees the serial: destroy if no drain is in
 * flight, else the last drain. A drain the target drops unrun (a manual
 * executor's destroy, a pool's shutdown_now with no on_pending) releases
 * its hold through serex__hand_back. An awaiter counts itself in the life
 * word before it looks; a drain that takes `wip` to 0 then looks for
 * waiters and bumps the generation: all four seq_cst, so either the drain
 * sees the waiter or the waiter sees `wip` at 0 (no lost wake-up), and
 * with no waiter the end of a drain costs no system call. Termination is
 * judged from one load of the entry word (SHUT, and no call in flight),
 * then `wip` (serial_state).
 *
 * --- A bounded serial: the waiting count ---
 * With queue_capacity set (`capacity`), `waiting` counts the places taken:
 * tasks accepted and not started. A producer takes a place after its flag
 * check (a serial shut down says SEREX_EREJECTED, not SEREX_EFULL) and
 * before it counts its task in `wip` and pushes it; the drain frees the
 * place of each task it pops, after the pop and before the task runs (so
 * a task may submit to its own full serial: its own place is free);
 * shutdown_now (and destroy) frees the places of the tasks it takes back,
 * and serial_take_back the place of the task it gives back. Nothing else in
 * the drain protocol looks at `waiting`, so the argument above stands.
 *
 *   producer: w = waiting; while (w < capacity) CAS(w -> w + 1): placed;
 *             w >= capacity: SEREX_EFULL, nothing counted or queued.
 *   drain:    pop; waiting -= 1; serex__room_made(); run the task.
 *
 * Why the cap is never exceeded: `waiting` only grows by a CAS from w to
 * w + 1 with w < capacity, so it never passes `capacity`; and it is never
 * below the tasks in the queue (a place is taken before the push and freed
 * after the pop), so neither are they. Who wins the race at the cap: the
 * count's modification order. Two producers, one place left: both load
 * capacity - 1, the first CAS wins, the second fails, reloads `capacity`
 * and says SEREX_EFULL. A producer and the drain: a producer whose load
 * (or failed CAS) comes before the drain's decrement sees the cap and
 * says SEREX_EFULL; one that comes after takes the freed place. So a
 * producer is refused only while every place is taken: the cap is exact.
 * Why a freed place is never lost: the producer's load and CAS and every
 * decrement are seq_cst, and each decrement is followed by
 * serex__room_made, whose seq_cst load of the waiter count pairs with a
 * waiter counting itself before its try: either that try sees the place,
 * or the freer sees the waiter and wakes it (executor.c's essay has the
 * argument). A refusal at the cap calls serex__room_full, so
 * serex_execute_wait parks rather than polls; shutdown, shutdown_now and
 * BROKEN call serex__room_wake, so a waiter retries and hears
 * SEREX_EREJECTED. While a drain is owed nothing frees a place; the
 * target that said full signals room when it frees one of its own (the
 * room's words are the process's), and a waiter's retry, refused at the
 * cap, submits the owed drain (the model's WAITER with REFUSE checks it). An unbounded serial never touches `waiting`: it pays one
 * predictable branch in execute and one per drain round. The spin model
 * checks this too (tests/model: CAP, and a waiter in serex_execute_wait).
 *
 * --- The stats' queued ---
 * `queued` is the tasks accepted and not finished: waiting, or running.
 * wip alone is not that: the drain subtracts a round's tasks only at its
 * end, so read from inside a round of 64 it still counts the tasks of the
 * round that have returned (a bounded serial of capacity 16 kept full
 * from its own tasks read 80). So the drain counts each task in
 * `completed` as it returns (a store to its own line, no locked
 * instruction), and keeps `settled`: completed as wip last counted it,
 * moved at the round's end (serial_settle):
 *
 *   settled |= SETTLING;  wip -= ran (seq_cst);  settled = completed
 *
 * queued = wip - (completed - settled), read as a snapshot the way a
 * seqlock is: settled (acquire), completed (acquire), wip (acquire), then
 * settled again; the snapshot stands if both reads of settled agree and
 * neither has SETTLING. Why it is exact: if the wip read saw the round's
 * subtraction, it read the release RMW or a later RMW of its release
 * sequence, so the SETTLING store happens-before the second read of
 * settled, which then differs from a first read made before it; if the
 * completed read saw a task of the next round, that task's release store
 * comes after the last settled store, which the second read then sees. A
 * reader that fails 64 times (a drain preempted in its settle) takes its
 * last reads as they are: settled is then at most the value wip was
 * counted against, so the answer may be low, never high.
 *
 * --- Checked by a model ---
 * tests/model/serial_drain.pml is this protocol in Promela, one model step
 * per atomic step here (the MPSC exchange and link apart), and
 * scripts/check_model.sh has spin explore every interleaving of 2-3
 * producers, a target that may refuse (full), shut down or drop drains,
 * batches of 1-2, shutdown or shutdown_now at any moment, an awaiter that
 * resubmits an owed drain and destroy's wait that does (CI stage g). It
 * proves, for those sizes: no accepted task is lost, none both runs and
 * is handed back, none runs after shutdown_now returned it; never two
 * drains at once (an owed one counted); only a rejection breaks the
 * serial; order; at most `batch` tasks a visit; no termination reported
 * before every accepted task has run; and that everything ends.
 * It does not prove the memory orders (spin steps are sequentially
 * consistent: TSan and the stress tests cover those). It found the two
 * faults fixed in serial_state (two loads) and serial_drain (a batch per
 * round, not per visit); its mutations show each check can fail.
 */

#include <string.h> /* strlen, memcpy: the name */

#include "alloc_internal.h"
#include "await_internal.h"
#include "common_internal.h"
#include "executor_internal.h"
#include "exec_class_internal.h"
#include "registry_internal.h"
#include "life_internal.h"
#include "mpsc_internal.h"
#include "op_internal.h"
#include "park_internal.h"
#include "spinlock_internal.h"
#include "stats_internal.h"
#include "task_watch_internal.h"
#include "thread_internal.h"

#define DEFAULT_BATCH 64u
#define SETTLING (UINT64_C(1) << 63) /* settled: the drain is settling */

/* The entry word's flags (life_internal.h); above them, calls in flight */
#define FLAG_SHUT UINT64_C(1)   /* shutdown: execute refuses */
#define FLAG_STOP UINT64_C(2)   /* shutdown_now: the queue was taken */
#define FLAG_BROKEN UINT64_C(4) /* the target rejected or dropped a drain */
#define FLAG_OWED UINT64_C(8)   /* the target was full: a drain is owed */
_Static_assert((FLAG_SHUT | FLAG_STOP | FLAG_BROKEN | FLAG_OWED) ==
                   SEREX__ENTRY_FLAGS,
               "the entry word has four flags");

struct serial {
    serex_executor base;
    struct serex__reg reg; /* serex_dump's list */
    serex_executor *target;
    unsigned batch;
    size_t capacity;        /* queue_capacity; 0: unbounded, no `waiting` */
    struct serex__op drain; /* what the target runs: one drain at a time */
    struct serex__metrics *_Atomic metrics; /* NULL: off (metrics.h) */

    /* Producers' line: the queue's tail and the producers' counters. */
    _Alignas(SEREX__CACHELINE) struct serex__task *_Atomic tail;
    struct serex__entry entry; /* FLAG_* | calls in flight */
    _Atomic uint64_t wip;      /* pushed and not yet accounted for */

    /* The drain's line: the queue's consumer side. */
    _Alignas(SEREX__CACHELINE) serex__spinlock pop_lock;
    struct serex__task *head;
    struct serex__task stub;
    _Atomic uint64_t completed; /* the running drain only: after each task */
    _Atomic uint64_t settled;   /* completed, as wip last counted it (see
                                   the essay: the stats' queued) */
    _Atomic uint64_t taken;     /* handed back or dropped; under pop_lock */
    _Atomic uint64_t rejected;  /* execute calls refused */
    _Atomic uint64_t yields;    /* the running drain only: batches that
                                   gave the thread back */

    struct serex__life life; /* drains | DETACHED | generation | waiters */

    /* Bounded serials only: places taken (see the essay). Producers and
     * the drain both write it once a task: a line of its own. */
    _Alignas(SEREX__CACHELINE) _Atomic uint64_t waiting;

    char name[]; /* serex_stats' name, copied at create */
};

static struct serial *serial_of(serex_executor *ex)
{
    return serex__container_of(ex, struct serial, base);
}

static struct serex__mpsc_ends serial_queue(struct serial *s)
{
    return (struct serex__mpsc_ends){&s->tail, &s->head, &s->stub};
}

/* --- the waiting count of a bounded serial (see the essay) --- */

/* Takes a place for a task, if one is free. */
static bool serial_take_place(struct serial *s)
{
    /* seq_cst: the look for room that a waiter's count comes before,
     * against the seq_cst free in serial_give_back (executor.c's essay) */
    uint64_t w = atomic_load_explicit(&s->waiting, memory_order_seq_cst);

    while (w < s->capacity)
        /* seq_cst: as the load; a failure reloads w, the same look */
        if (atomic_compare_exchange_weak_explicit(&s->waiting, &w, w + 1,
                                                  memory_order_seq_cst,
                                                  memory_order_seq_cst))
            return true;
    return false;
}

/* Frees @n places: tasks popped, taken back or given back. */
static void serial_give_back(struct serial *s, uint64_t n)
{
    /* seq_cst: the free that a waiter's look sees, or whose
     * serex__room_made sees the waiter (executor.c's essay) */
    atomic_fetch_sub_explicit(&s->waiting, n, memory_order_seq_cst);
    serex__room_made();
}

/* A task of the drain has returned: count it (one writer, no locked
 * instruction; see the essay, the stats' queued). */
static void serial_count_done(struct serial *s)
{
    /* release: a stats reader that sees it (acquire) sees the settled
     * value the drain stored before it */
    atomic_store_explicit(
        &s->completed,
        atomic_load_explicit(&s->completed, memory_order_relaxed) + 1,
        memory_order_release);
}

/*
 * The drain's loop (serex__mpsc_run's, with a bounded serial's place freed
 * when its task leaves the queue, before it runs, and each task counted as
 * it returns). Returns how many ran.
 */
static unsigned serial_run(struct serial *s, unsigned max)
{
    unsigned ran = 0;

    while (ran < max) {
        struct serex__task *t;

        serex__spin_lock(&s->pop_lock);
        t = serex__mpsc_pop_wait_ends(serial_queue(s));
        serex__spin_unlock(&s->pop_lock);
        if (t == NULL)
            break;
        if (s->capacity != 0)
            serial_give_back(s, 1);
        serex__task_free_run(&s->base, &s->metrics, false, t);
        serial_count_done(s);
        ran++;
    }
    return ran;
}

/*
 * The end of a round: `wip -= ran`, with the stats' `settled` moved along
 * (SETTLING around the subtraction, so a reader knows which of the two it
 * saw). Returns what is left in wip.
 */
static uint64_t serial_settle(struct serial *s, unsigned ran)
{
    uint64_t done = atomic_load_explicit(&s->completed, memory_order_relaxed);
    uint64_t old = atomic_load_explicit(&s->settled, memory_order_relaxed);
    uint64_t left;

    if (ran != 0) /* relaxed: the seq_cst subtraction below releases it */
        atomic_store_explicit(&s->settled, old | SETTLING,
                              memory_order_relaxed);
    /* seq_cst: the hand-over to the next drain needs acq_rel (see the
     * essay); seq_cst also orders it before serial_idle's look */
    left = atomic_fetch_sub_explicit(&s->wip, ran, memory_order_seq_cst) - ran;
    if (ran != 0) /* release: after the subtraction, for the reader */
        atomic_store_explicit(&s->settled, done, memory_order_release);
    return left;
}

/* --- the drain --- */

/* wip reached 0: wake awaiters, if any (see the essay). */
static void serial_idle(struct serial *s)
{
    serex__life_notify(&s->life);
}

/* The serial's memory, its metrics' with it. */
static void serial_free(struct serial *s)
{
    /* relaxed: the last holder; no one records any more */
    serex__metrics_free(
        atomic_load_explicit(&s->metrics, memory_order_relaxed));
    serex__free(s);
}

/* A drain is over (run, dropped or refused): its last touch of the
 * serial. The last holder after destroy frees it (life_internal.h). */
static void serial_drain_exit(struct serial *s)
{
    if (serex__life_release(&s->life))
        serial_free(s);
}

static void serial_drain(struct serex__op *op)
{
    struct serial *s = serex__container_of(op, struct serial, drain);
    struct serex__frame frame;

    serex__frame_push_serial(&frame, &s->base, NULL); /* promise 7b */
    /* `visit`: tasks run since the target gave us this thread. A short
     * batch (a counted task's push still under way) loops without giving
     * the thread back, so the count carries over: at most `batch` tasks a
     * visit (promise 4; the spin model found the overrun without it). */
    for (unsigned idle = 0, visit = 0;; idle++) {
        unsigned ran = serial_run(s, s->batch - visit);
        uint64_t left = serial_settle(s, ran);

        if (left == 0) {
            serial_idle(s);
            break;
        }
        /* A full batch: give the thread back, unless the target refuses
         * (it is shutting down, say): then keep going here. */
        if ((visit += ran) == s->batch) {
            serex__stat_add(&s->yields, 1); /* the running drain only */
            if (serex__op_yield(s->target, &s->drain) == SEREX_OK) {
                serex__frame_pop(&frame);
                return; /* our reference passes to the resubmitted drain */
            }
            visit = 0; /* refused: a new batch here */
        }
        if (ran != 0)
            idle = 0;
        else if (idle % 64 == 63) /* a counted task's push is under way */
            serex__thread_yield();
        else
            serex__cpu_relax();
    }
    serex__frame_pop(&frame);
    serial_drain_exit(s);
}

/*
 * The target refused the drain that our task started. If ours is still
 * the only task counted, take it back (under pop_lock, so no drain pops
 * meanwhile; once `wip` is 0 again a new producer's push comes after our
 * node): the caller reports the refusal and nothing is queued. Returns
 * whether ours was taken back (else tasks were queued behind it).
 */
static bool serial_take_back(struct serial *s)
{
    uint64_t one = 1;
    struct serex__task *t = NULL;

    serex__spin_lock(&s->pop_lock);
    /* seq_cst: as every change of wip (see the essay) */
    if (atomic_compare_exchange_strong_explicit(&s->wip, &one, 0,
                                                memory_order_seq_cst,
                                                memory_order_relaxed))
        t = serex__mpsc_pop_wait_ends(serial_queue(s)); /* ours: the only one */
    serex__spin_unlock(&s->pop_lock);
    if (t == NULL)
        return false;
    serex__task_free(t);
    if (s->capacity != 0)
        serial_give_back(s, 1); /* nothing queued: its place is free */
    return true;
}

/*
 * The target refused a drain with tasks queued (see the essay). Full (or
 * any passing refusal): the drain is owed, and the next execute,
 * await_termination or destroy submits it again. Shut down
 * (SEREX_EREJECTED, for good): the serial is broken, its tasks kept for
 * shutdown_now (promise 5, docs/contract.md).
 */
static void serial_drain_refused(struct serial *s, int rc)
{
    if (rc != SEREX_EREJECTED) {
        /* seq_cst: set before serex__life_notify's look for awaiters,
         * whose count-then-look is seq_cst too (one sees the other);
         * release: the refused submission before the claimer's */
        serex__entry_close(&s->entry, FLAG_OWED, memory_order_seq_cst);
        serex__life_notify(&s->life); /* awaiters retry it */
        return;
    }
    /* relaxed: BROKEN only makes execute refuse and destroy drop; our
     * caller's release (its leave, or the drain's exit) publishes it */
    serex__entry_close(&s->entry, FLAG_BROKEN, memory_order_relaxed);
    serex__room_wake(); /* waiters retry: SEREX_EREJECTED now */
}

/* The producer whose increment found wip at 0: start a drain. Returns
 * the target's refusal if our task was taken back, else SEREX_OK. */
static int serial_start_drain(struct serial *s)
{
    int rc;

    /* ordered before the submission, which the target orders */
    serex__life_hold(&s->life);
    rc = serex__op_submit(s->target, &s->drain);
    if (rc == SEREX_OK)
        return SEREX_OK;
    serial_drain_exit(s); /* never the last: we are in flight */
    if (serial_take_back(s))
        return rc;
    serial_drain_refused(s, rc);
    return SEREX_OK;
}

/*
 * A drain may be owed: claim it (the one whose RMW clears FLAG_OWED) and
 * submit it again. The caller is counted in the entry word, so shutdown_now
 * waits for it and wip cannot reach 0 meanwhile (see the essay).
 */
static void serial_retry_owed(struct serial *s)
{
    /* acquire: the refused submission before ours (serial_drain_refused) */
    uint64_t old = serex__entry_clear(&s->entry, FLAG_OWED,
                                      memory_order_acquire);
    int rc;

    if (!(old & FLAG_OWED))
        return; /* none, or another caller claimed it */
    serex__life_hold(&s->life);
    rc = serex__op_submit(s->target, &s->drain);
    if (rc == SEREX_OK)
        return;           /* our hold passes to the drain */
    serial_drain_exit(s); /* never the last: we are in flight */
    serial_drain_refused(s, rc);
}

/* --- the executor --- */

/* A bounded serial at its cap: @t is not queued (see the essay). */
static int serial_full(struct serial *s, struct serex__task *t)
{
    serex__entry_abort(&s->entry); /* we queued nothing */
    serex__task_free(t);
    /* relaxed: a statistic, on the refusing path only */
    atomic_fetch_add_explicit(&s->rejected, 1, memory_order_relaxed);
    serex__room_full(); /* our frees call serex__room_made */
    return SEREX_EFULL;
}

static int serial_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct serial *s = serial_of(ex);
    struct serex__task *t = serex__task_new(fn, arg);
    bool first;
    uint64_t c;
    int rc;

    if (serex__unlikely(t == NULL)) {
        /* relaxed: a statistic (every execute not SEREX_OK counts) */
        atomic_fetch_add_explicit(&s->rejected, 1, memory_order_relaxed);
        return SEREX_ENOMEM;
    }
    /* the flags and the in-flight count share one modification order, so
     * shutdown_now either is seen here or waits for us (life_internal.h) */
    c = serex__entry_enter(&s->entry);
    if (serex__unlikely(c & (FLAG_SHUT | FLAG_BROKEN))) {
        serex__entry_abort(&s->entry);
        serex__task_free(t);
        /* relaxed: a statistic, on the refusing path only */
        atomic_fetch_add_explicit(&s->rejected, 1, memory_order_relaxed);
        return SEREX_EREJECTED;
    }
    if (s->capacity != 0 && !serial_take_place(s)) {
        if (serex__unlikely(c & FLAG_OWED))
            serial_retry_owed(s); /* nothing frees a place until it runs */
        return serial_full(s, t);
    }
    /* acq_rel: see the essay (the 0 -> 1 hand-over; count, then push) */
    serex__task_watch(ex, &s->metrics, t);
    first = atomic_fetch_add_explicit(&s->wip, 1, memory_order_acq_rel) == 0;
    serex__mpsc_push_ends(serial_queue(s), t);
    /* Still counted in flight: shutdown_now, and so await and destroy,
     * wait until the drain we start (or resubmit) holds its reference. */
    rc = SEREX_OK;
    if (first)
        rc = serial_start_drain(s);
    else if (serex__unlikely(c & FLAG_OWED))
        serial_retry_owed(s);
    /* release: our push and increment before shutdown_now's acquire */
    serex__entry_leave(&s->entry);
    if (serex__unlikely(rc != SEREX_OK)) /* relaxed: a statistic */
        atomic_fetch_add_explicit(&s->rejected, 1, memory_order_relaxed);
    return rc;
}

static void serial_shutdown(serex_executor *ex)
{
    struct serial *s = serial_of(ex);

    /* release: nothing but the flag; awaiters re-check after the bump */
    if (!(serex__entry_close(&s->entry, FLAG_SHUT, memory_order_release) &
          FLAG_SHUT)) {
        serex__life_bump(&s->life);
        serex__room_wake(); /* waiters for room retry: SEREX_EREJECTED */
    }
}

/*
 * Takes every queued task, in order, as a private list; subtracts them
 * from wip. @flags are set first (SHUT and STOP: shutdown_now; for destroy
 * too).
 */
static struct serex__task *serial_take_all(struct serial *s, size_t *n)
{
    struct serex__task *first = NULL, **tail = &first;

    /* acquire: pairs with the release leave in serial_execute; at zero
     * every accepted push is queued and counted in wip */
    serex__entry_quiesce(&s->entry);
    /* One hold of pop_lock for the whole queue: the drain cannot start a
     * task behind one we took back (the order promise 2 is about). */
    serex__spin_lock(&s->pop_lock);
    *n = serex__mpsc_take_all(serial_queue(s), &tail);
    serex__stat_add(&s->taken, *n);
    serex__spin_unlock(&s->pop_lock);
    if (s->capacity != 0 && *n != 0)
        serial_give_back(s, *n);
    /* seq_cst: as the drain's decrement (callers wake awaiters) */
    atomic_fetch_sub_explicit(&s->wip, *n, memory_order_seq_cst);
    return first;
}

static size_t serial_shutdown_now(serex_executor *ex,
                                  serex_pending_fn on_pending, void *ctx)
{
    struct serial *s = serial_of(ex);
    struct serex__task *list;
    size_t n;

    /* relaxed: serial_take_all's acquire wait orders the flags */
    serex__entry_close(&s->entry, FLAG_SHUT | FLAG_STOP, memory_order_relaxed);
    list = serial_take_all(s, &n);
    serex__life_bump(&s->life);
    serex__room_wake(); /* waiters for room retry: SEREX_EREJECTED */
    serex__task_hand_back_list(list, on_pending, ctx);
    return n;
}

/* Shut down, and every task accepted so far has run or was taken back
 * (submissions still in flight are looked at by the callers). */
static enum serex__await_state serial_state(struct serial *s)
{
    /*
     * One load decides both: SHUT is set and no execute is in flight. A
     * producer that passed the flag check before SHUT was set then has
     * left, and counted its task in wip before it left (its release drop
     * of the in-flight count, our acquire); any later one sees SHUT. With
     * two loads (SHUT and wip first, the in-flight count after) a producer
     * could count, push and leave between them, and we would report
     * termination with its task still to run: the spin model
     * (tests/model/serial_drain.pml) found that.
     * seq_cst on wip: against serial_idle (see essay); it also pairs with
     * the drain's release, so the tasks' writes are visible once we report
     * termination.
     */
    uint64_t c = serex__entry_load(&s->entry);

    if (!(c & FLAG_SHUT))
        return SEREX__AWAIT_NOT;
    if (serex__entry_busy(c))
        return SEREX__AWAIT_SOON;
    return atomic_load_explicit(&s->wip, memory_order_seq_cst) == 0
               ? SEREX__AWAIT_DONE
               : SEREX__AWAIT_NOT;
}

/* One look of an awaiter: serial_state, and whether a drain is owed. */
static enum serex__await_state serial_look(void *p, bool *owed)
{
    struct serial *s = p;
    enum serex__await_state st = serial_state(s);

    /* relaxed: a hint; serial_retry_owed claims it with an RMW */
    *owed = st == SEREX__AWAIT_NOT &&
            (atomic_load_explicit(&s->entry.word, memory_order_relaxed) &
             (FLAG_OWED | FLAG_STOP | FLAG_BROKEN)) == FLAG_OWED;
    return st;
}

/* An awaiter found a drain owed: submit it, counted in flight as an
 * execute is. Returns whether one is still owed (the target still full). */
static bool serial_retry_owed_waiting(struct serial *s)
{
    uint64_t c = serex__entry_enter(&s->entry);

    if (c & (FLAG_STOP | FLAG_BROKEN)) { /* taken, or kept for good */
        serex__entry_abort(&s->entry);
        return false;
    }
    serial_retry_owed(s);
    c = serex__entry_load(&s->entry);
    serex__entry_leave(&s->entry);
    return (c & FLAG_OWED) != 0;
}

/*
 * await_termination: serex__life_await, which ends early when a drain is
 * owed: nothing would wake us when the target has room, so we retry it
 * here, and while the target stays full, look again every millisecond.
 */
static bool serial_retry_cb(void *s)
{
    return serial_retry_owed_waiting(s);
}

static int serial_await(serex_executor *ex, int64_t timeout_ns)
{
    return serex__life_await_owed(&serial_of(ex)->life, serial_look,
                                  serial_retry_cb, serial_of(ex), timeout_ns);
}

static bool serial_broken(serex_executor *ex)
{
    /* a hint; serex__wrapper_settle looks again after waiting */
    return serex__entry_load(&serial_of(ex)->entry) & FLAG_BROKEN;
}

static void serial_drop_all(serex_executor *ex)
{
    size_t n;

    serex__task_hand_back_list(serial_take_all(serial_of(ex), &n), NULL,
                               NULL);
}

static void serial_destroy(serex_executor *ex)
{
    struct serial *s = serial_of(ex);

    serex__wrapper_settle(ex, s->target, serial_broken, serial_drop_all);
    if (serex__life_detach(&s->life)) /* else the last drain frees */
        serial_free(s);
}

/*
 * The target took the drain back or dropped it (shutdown_now, a destroy):
 * its tasks can never run from there. Keep them for the serial's own
 * shutdown_now or destroy, refuse new ones, and release the drain's
 * reference. The drain is not the user's: on_pending never sees it.
 */
static void serial_drain_dropped(struct serex__op *op,
                                 serex_pending_fn on_pending, void *ctx)
{
    struct serial *s = serex__container_of(op, struct serial, drain);

    (void)on_pending;
    (void)ctx;
    /* relaxed: BROKEN only makes execute refuse, and destroy drop what is
     * queued; the drain's exit below (acq_rel) orders it for the last
     * reference's holder */
    serex__entry_close(&s->entry, FLAG_BROKEN, memory_order_relaxed);
    serex__room_wake(); /* waiters for room retry: SEREX_EREJECTED */
    serial_drain_exit(s);
}

static const struct serex__op_class drain_class = {
    "serial drain", serial_drain, serial_drain_dropped,
};

/*
 * The stats' queued: wip, less the tasks of the round under way that have
 * returned (completed - settled), read as one snapshot (see the essay).
 * *@completed: the completed count of that snapshot.
 */
static uint64_t serial_queued(struct serial *s, uint64_t *completed)
{
    uint64_t a, c, w;

    for (unsigned tries = 0;; tries++) {
        /* acquire (all three): a settled, completed or wip value seen
         * brings the drain's stores before it (see the essay) */
        a = atomic_load_explicit(&s->settled, memory_order_acquire);
        c = atomic_load_explicit(&s->completed, memory_order_acquire);
        w = atomic_load_explicit(&s->wip, memory_order_acquire);
        if ((!(a & SETTLING) &&
             a == atomic_load_explicit(&s->settled, memory_order_relaxed)) ||
            tries == 64) /* a drain preempted in its settle: undercount */
            break;
        serex__cpu_relax();
    }
    a &= ~SETTLING;
    *completed = c;
    return c - a < w ? w - (c - a) : 0;
}

static void serial_stats(serex_executor *ex, serex_stats *out)
{
    struct serial *s = serial_of(ex);

    out->queued = serial_queued(s, &out->completed);
    /* relaxed (all): a statistic */
    out->submitted = out->completed + out->queued +
                     atomic_load_explicit(&s->taken, memory_order_relaxed);
    out->rejected = atomic_load_explicit(&s->rejected, memory_order_relaxed);
    out->name = s->name;
}

/* serex_dump: what it runs on and its bounds. */
static void serial_describe(serex_executor *ex, struct serex__dump *d)
{
    struct serial *s = serial_of(ex);

    serex__dump_ptr(d, "target", s->target);
    serex__dump_u64(d, "batch", s->batch);
    serex__dump_u64(d, "queue_capacity", s->capacity);
}

/* One part: a serial runs one task at a time (task_watch_internal.h). */
static int serial_metrics_enable(serex_executor *ex,
                                 const serex_metrics_config *cfg)
{
    struct serial *s = serial_of(ex);

    return serex__metrics_enable(&s->metrics, cfg, 1);
}

static void serial_metrics(serex_executor *ex, serex_metrics *out)
{
    struct serial *s = serial_of(ex);

    serex__metrics_read_slot(&s->metrics, out);
    /* relaxed: a statistic */
    out->yields = atomic_load_explicit(&s->yields, memory_order_relaxed);
}

/* A serial waits on its target (promise 7). */
static bool serial_waits_on(serex_executor *ex,
                            bool (*blocks)(serex_executor *))
{
    return blocks(serial_of(ex)->target);
}

static const struct serex__exec_class serial_class = {
    SEREX__CLASS_OPS(serial_execute, serial_shutdown, serial_shutdown_now,
                     serial_await),
    "serial",
    serial_stats,
    serial_waits_on,
    serial_destroy,
    serial_metrics_enable,
    serial_metrics,
    SEREX__CLASS_REG(struct serial, base, reg, "serial", serial_describe),
};

int serex_serial_create(serex_executor *target, const serex_serial_config *cfg,
                        serex_executor **out)
{
    const char *name = "serial";
    struct serial *s;
    size_t len;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    if (target == NULL || target->ops == NULL)
        return SEREX_EINVAL;
    if (cfg != NULL && cfg->name != NULL && cfg->name[0] != '\0')
        name = cfg->name;
    len = strlen(name);
    s = serex__calloc_aligned(SEREX__CACHELINE, sizeof *s + len + 1);
    if (s == NULL)
        return SEREX_ENOMEM;
    s->base.ops = &serial_class.ops;
    s->drain.cls = &drain_class;
    s->target = target;
    s->batch = cfg != NULL && cfg->batch != 0 ? cfg->batch : DEFAULT_BATCH;
    s->capacity = cfg != NULL ? cfg->queue_capacity : 0;
    memcpy(s->name, name, len + 1);
    serex__mpsc_init_ends(serial_queue(s));
    serex__exec_register(&s->base, s->name); /* serex_dump lists it */
    *out = &s->base;
    return SEREX_OK;
}
