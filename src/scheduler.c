/* SPDX-License-Identifier: MIT */
/*
 * scheduler.c - the delayed scheduler: timing-wheel shards, one tickless
 * timer thread, and an atomic state machine per timer.
 *
 * --- Shards: why not a lock-free inbox ---
 * Producers schedule into shards, each a spinlock, a timing wheel (wheel.c)
 * and a slab of timer records; a thread always uses the same shard (a
 * ticket taken on its first schedule), so producers on different threads
 * take different locks, and one producer finds its lock and lines warm.
 * The timer thread takes each shard's lock only when it wakes (tickless:
 * when something is due), for one advance. A lock-free inbox (as Netty's)
 * would make the add cheaper by one uncontended lock, but the timer sits
 * in the inbox until the timer thread wakes to file it; a tickless thread
 * may sleep for minutes, so the inbox grows and a cancelled timer is kept
 * until then. With shards a timer is in the wheel the moment schedule
 * returns, and cancel unlinks it and frees its record at once (promise 6).
 *
 * --- Memory: 56 bytes a one-shot timer ---
 * A record is the wheel link (next, pprev, due key, tag) plus fn, arg and
 * target; a periodic one adds its period and its overrun count (72
 * bytes). Records come from
 * 256 KiB slabs, aligned so a record finds its slab (and the slab its
 * shard) by masking its address, carved lazily (untouched pages stay out
 * of RSS) and kept per shard; a slab that empties is freed (one spare is
 * kept), so memory returns after a burst. A slab is allocated and freed
 * with no shard lock held (the allocation is a system call, which a
 * producer or the timer thread would spin behind): schedule allocates
 * one unlocked when every slab is full, takes the lock again and looks
 * again (another may have made room; the unused slab is freed after
 * unlocking), and rec_free hands an emptied slab back to its caller to
 * free once unlocked. (64 KiB slabs cost 63 bytes a
 * timer in RSS, the aligned allocation's extra page showing; 256 KiB
 * cost 58; 1 MiB 56, but free memory in coarser pieces.) The tag packs
 * the tie-breaker (a per-shard sequence number) with the state below, in
 * one atomic word.
 *
 * --- The timer state machine (the low bits of the tag) ---
 *   NEW      a token's timer being scheduled: taken from its slab, not yet
 *            in a wheel (serex_schedule_token; "Tokens" below). Changes
 *            only under the shard lock.
 *   PENDING  in its shard's wheel. Enters and leaves only under the shard
 *            lock, so whoever holds the lock and sees PENDING may unlink.
 *   QUEUED   taken out of the wheel by the timer thread (under the lock)
 *            and put in its target's batch for this fire, which is
 *            handed, or about to be handed, to the target (below).
 *   RUNNING  its run has started (QUEUED -> RUNNING, a CAS by the run).
 *   STOPPED  cancelled (or taken by shutdown_now) while QUEUED (or NEW):
 *            whoever holds the run finishes it without running it.
 *   STOPPING a periodic timer cancelled while RUNNING: the run in
 *            progress finishes, and the timer ends with it (no re-arm).
 *            Apart from STOPPED so that "a run is in progress" (RUNNING
 *            or STOPPING) can be read off the word: cancel and wait.
 *   DONE     finished; nothing but the handle refers to the record.
 * Flag HANDLE: the user holds a handle. DONE and HANDLE decide who frees:
 * the CAS that makes DONE frees if HANDLE is clear; serex_timer_release
 * frees if it sees DONE, else clears HANDLE by CAS. One CAS sees the
 * other's effect, so the record is freed exactly once.
 * Flag WAITERS: a cancel_wait or a cancel_notify waits for the run in
 * progress; set only on RUNNING or STOPPING ("Cancel and wait" below).
 * Flag TOKEN: the record's class has a token's hook after it ("Tokens").
 *
 * Cancel against firing (who wins):
 *   PENDING: cancel takes the shard lock; if still PENDING it unlinks the
 *     timer and makes it DONE. The timer thread collects expired timers
 *     under the same lock, so it either got there first (the timer is
 *     QUEUED, see below) or never sees the timer.
 *   QUEUED: cancel CASes QUEUED -> STOPPED; the run's CAS QUEUED -> RUNNING
 *     fails and it finishes without calling fn. If the run's CAS came
 *     first, cancel sees RUNNING: too late for a one-shot (false).
 *   RUNNING, periodic: cancel CASes RUNNING -> STOPPING and returns true;
 *     the run, on ending, CASes RUNNING -> PENDING to re-arm, fails, and
 *     finishes instead. So true means no run starts after cancel returns.
 * A target refusing the run: the timer thread CASes QUEUED -> DONE; if
 * cancel won that race, the task is not handed to on_rejected (cancel's
 * true already told the user it will not run). A periodic timer whose
 * target was full (not shut down) goes on by default instead
 * (SEREX_REFUSED_MISS): QUEUED -> PENDING under the shard lock, as a
 * re-arm, the run counted missed (see run_missed); a cancel that won
 * makes the re-arm fail, and the timer ends as above.
 * Shutdown ends periodic timers: those in a wheel at once (DONE), a
 * queued or running one when its run or re-arm sees SHUT. Cancel of a
 * periodic timer once SHUT is set still stops it by CAS (so no run starts
 * after it returns) but says false: shutdown had ended it.
 *
 * --- Batches: one task per target per fire ---
 * A fire (sched_fire: the timer thread's, or an advance's) hands what
 * came due to the targets as batches: the due runs of one target, in due
 * order (ties in schedule order: the wheel's order, kept), are linked into
 * one chain and queued on the target as ONE task, so a fire costs a
 * target one push and at most one wake-up however many of its timers came
 * due (with 200 due onto one pool, 200 pushes and their wake-ups before).
 * The batch is intrusive: its first record's `op` (overlaying the wheel
 * link `next`) is the task, and each record's `batch_next` (overlaying
 * `pprev`) is the chain; both are unused while a timer is out of the
 * wheel, so a batch allocates nothing and a timer grows by no byte. The
 * grouping is a table on the firing thread's stack (batcher: the targets
 * in the order their first run came due, hashed by address), and the
 * batches go out in that order once the fire's runs are all grouped. A
 * fire with more than BATCH_TARGETS (64) distinct targets hands each run
 * on a target beyond those out alone, at once, as before batches: such a
 * target never gets into the table during that fire, so its runs still
 * go in due order, and the targets in the table keep their one batch. The
 * timer thread's own runs (target NULL) are a batch too, run in place at
 * its turn. A batch of one is a lone run as before.
 *
 * States of a run, and how they map on the state machine above:
 *   due        PENDING: in its shard's wheel.
 *   batched    QUEUED: collected under the shard lock (PENDING -> QUEUED,
 *              exactly once), linked into its target's batch, the batch
 *              handed to the target (or about to be).
 *   running    RUNNING: the batch reached it, and its CAS QUEUED ->
 *              RUNNING won.
 *   cancelled  STOPPED: cancel's CAS QUEUED -> STOPPED won; the batch
 *              skips it when it gets there (and settles it: DONE, freed
 *              unless a handle is held).
 * Who wins, cancel or the batch: the batch starting decides nothing for
 * its runs. Each run is decided on its own tag word, by the same two CASes
 * as a lone run's (QUEUED -> RUNNING by the batch when it reaches the run,
 * QUEUED -> STOPPED by cancel), so cancel of a run inside a batch that was
 * handed over and has not reached it behaves as cancel of a lone run
 * handed over and not started: true, the run is skipped, and its record
 * is freed once the batch has passed it (as a lone run's was when its
 * task came; the batch frees what its runs leave under one shard lock:
 * "Settling in groups" below). The race is decided by those CASes, not
 * under a lock, so tests/model/sched_batch.pml checks cancels
 * and handle releases racing a batch that runs, is handed back, or is
 * refused, and the next fire re-filing a periodic run of it.
 * Why nothing is lost or run twice: a run enters one batch (the
 * PENDING -> QUEUED change is made once, under the shard lock, by the one
 * firing thread), and a batch has one owner at a time: the firing thread
 * until the submission returns, then, if it was accepted, the target,
 * which runs it (timer_run) or hands it back or drops it
 * (timer_run_dropped), once, as it does any task. Only the owner settles
 * a QUEUED or STOPPED record (cancel only CASes its state, release frees
 * only a DONE one), so every record of the chain stays alive and linked
 * until the owner walks to it; the owner reads a record's link, and
 * clears it (serex__wheel_add wants `pprev` NULL), before it runs,
 * re-arms or settles that record, which may free it or file it anew.
 * Each record is passed once, so each run ends exactly once: run, skipped,
 * re-armed (periodic), refused, or handed back.
 * A refused batch (EFULL, ENOMEM, EREJECTED) was one submission, so its
 * owner is still the dispatcher: it walks the chain and treats each run
 * as a refused lone run, in order (counted in `rejected` one by one; a
 * one-shot's task to on_rejected; a periodic one missed or ended by
 * policy). A batch taken back (a target's shutdown_now) or dropped ends
 * each run in order as a lone run taken back: settled, a one-shot's task
 * passed to on_pending unless cancel stopped it (promise 2a).
 * A batch, once its target starts it, first passes the runs after its
 * first BATCH_RUNS on to the same target as one more batch (timer_run: a
 * yield, so a pool puts it in the worker's run queue, where idle workers
 * steal it), and only then runs its own. (A task a run cost timer_load
 * 20 % more CPU per timer than one task a batch, paired runs on 2 cores:
 * a push, a take and a hold on the scheduler's life word per run; 8 runs
 * a task keep most of the saving and the parallelism.) Ownership of the rest passes with that
 * push, before the first run: the chain is split, never shared. So the
 * firing thread makes one push per target per fire, yet a pool still
 * runs a fire's runs side by side (as it ran lone runs: 100 timers due at
 * once are not run one after another on one worker), a serial runs them
 * in due order, and the runs not started are a queued task that the
 * target's shutdown_now takes back (each ended as above). If the target
 * refuses the rest (it is shutting down, or full), they run where the
 * batch runs, in order: the target accepted them with the batch.
 * The life word (below) counts each batch as one holder: the split takes
 * a hold for the new one while the old one's still holds. What a target
 * sees: one task from the firing thread per fire, then one from each
 * batch's task for the next BATCH_RUNS runs.
 *
 * --- Cancel and wait: who is told that a run in progress has ended ---
 * serex_timer_cancel_wait and _notify cancel first (above), then look at
 * the word. A run not started is always skipped (QUEUED -> STOPPED), so
 * only a run in progress is waited for: RUNNING (a one-shot, too late to
 * stop) or STOPPING; any other state means none is and none will start.
 * A run in progress ends by one CAS to DONE (settle_into; a periodic one
 * after its re-arm failed on STOPPING). A waiter marks the word WAITERS
 * by CAS, only while it reads RUNNING or STOPPING; a settle that reads
 * the mark takes the slow path (settle_waited) instead of its CAS, so the
 * busy path pays one predictable branch on a word it has loaded, and no
 * RMW. Who wins: the mark and the settle's CAS are on one word. If the
 * settle's CAS came first, the waiter's fails and reads DONE (acquire:
 * the run's writes are seen), and it returns, or posts its continuation
 * itself; if the mark came first, the settle's CAS fails, reads the mark
 * and goes slow. cancel_wait parks on the word (park_wait64, expecting
 * the marked value) and the slow path wakes the lot after its CAS: the
 * parking lot's re-read under its bucket lock loses no wake-up.
 * cancel_notify files its continuation on the shard's list and marks,
 * under the shard lock, and the slow path makes DONE and takes the
 * record's continuations under the same lock: the filing came first
 * (taken and posted by the settle) or finds DONE (posted by the notify).
 * Taken under the lock, not looked up after: once DONE, a record with a
 * handle may be freed by its release (which frees under that lock) and
 * its address reused by a new timer with continuations of its own (a
 * wake by address is harmless). A periodic timer never carries the mark
 * back into a wheel: a waiter marks only after its own cancel, which
 * leaves no periodic RUNNING (it is STOPPING), and re-arm needs RUNNING.
 * Waiting for itself: a thread's runs in progress are a list on its stack
 * (run_frames, which serex_timer_overrun reads too); cancel_wait called
 * inside one of @t's runs says EDEADLK instead of parking. A run queued
 * behind the caller (a serial, a manual executor) is never waited for:
 * it is skipped. tests/model/sched_batch.pml (WAITER) checks the mark,
 * the wake and the filing against runs, cancels and releases.
 *
 * --- Tokens: timers that obey a cancellation token ---
 * A timer scheduled with a token has the token's hook (cancel_internal.h)
 * after its record, in record classes of their own (88 and 104 bytes), so
 * no other timer grows; TOKEN marks them. The hook's fire (tok_stop, on
 * the cancelling thread) cancels as serex_timer_cancel does, but holds no
 * handle: under the shard lock, PENDING out of the wheel to DONE (by CAS:
 * a release may clear HANDLE meanwhile), QUEUED -> STOPPED, a periodic
 * RUNNING -> STOPPING; a short lock, never a wait. The hook holds a
 * reference to the token until it is removed, and remove waits for a
 * fire under way, so the rule is: whoever frees a record removes its
 * hook first, with no shard lock held (the fire takes it): settle_flush
 * for the records a batch gathered, serex_timer_release, shard_sweep,
 * free_scheduler for handles never released; and the fire itself for a
 * PENDING timer no handle holds, which nobody would see again: it
 * removes its own hook from inside its fire (at once, as
 * cancel_internal.h allows) and frees the record, so a cancelled timer is
 * not kept (promise 6). A timer is filed in two steps, so that no token
 * lock is ever taken under a shard lock (cancel.c's deadline schedules
 * and cancels with none held, and the fire takes a shard lock with none
 * held): the record is taken NEW under the shard lock, the hook added
 * with none held, then the record filed, under the lock again, if still
 * NEW. A fire in between marks it STOPPED; schedule then takes the hook
 * off, gives the record back and says the token's cause, as when the add
 * finds the token cancelled. The model has a token's fire racing the
 * owner, the user and the frees (TOKEN).
 *
 * --- The timer thread: tickless sleep, lost-wake-up-proof ---
 * The thread advances every shard to now, hands out what is due (merged in
 * due order), then reads the bell, computes the earliest due key, stores
 * it in wake_at and computes it once more. A producer adds under its shard
 * lock, then reads wake_at; if its key is earlier it swaps wake_at to
 * INT64_MIN (so only one producer rings) and rings the bell (a counter
 * plus the parking lot). Either the second computation takes the shard
 * lock after the producer released it and sees the timer, or it took the
 * lock before, so the store to wake_at happened before the producer's
 * read (through the lock) and the producer rings; the bell changed after
 * the thread read it, so its park returns at once. While awake the thread
 * keeps wake_at at INT64_MIN: producers never ring a thread that will
 * look again anyway. The thread sleeps with 1 ns timer slack (Linux).
 *
 * --- Coalescing wake-ups under load ---
 * Timers due a microsecond apart (a time-out service under load: 1M over
 * a second) made the thread sleep and wake for each few of them: a
 * futex wait and its hrtimer per wake-up, and a pool woken for every
 * handful of tasks, half of the process's CPU time (2.0 us of CPU per
 * timer in bench timer_load, p99 lateness 25-60 ms on 2 cores, most of it
 * the CPU those wake-ups took from the runs). So the thread keeps a window
 * (its own variable, no atomics): a fire that hands out
 * SEREX__COALESCE_BATCH timers or more opens it at 1 us or doubles it, up
 * to cfg coalesce_ns (200 us by default); a smaller fire halves it, and
 * below 1 us it shuts. While it is open and the earliest due time `next`
 * lies within the window after this fire began (`now`), the thread
 * sleeps until now + window instead of next, and then hands out everything
 * due by then at once: a wake-up per window, not per timer, and the pool
 * gets its tasks in bursts it drains with one wake-up. Never early (the
 * fire takes only what is due); late by less than the window. With little
 * load the fires are small and the window shut: every wake-up is at next,
 * as before. Measured (timer_load, 2 cores, paired runs): CPU per timer
 * 2.0 us -> 1.06 us, p99 lateness 23-60 ms -> 1.3-3.0 ms, p50 50 -> 250 us
 * (a 50 us window gave 1.4 us and p99 2.8-35 ms; 1 ms gave 0.95 us but p99
 * 2.6-4.9 ms, so 200 us). timer_accuracy, timer_periodic and
 * schedule+cancel do not change (fires of 1 or 2, or none).
 * What producers ring for follows: wake_at holds a threshold, `ring_below`
 * (serex__coalesce_ring_below), not the wake-up time. Sleeping until the
 * window's end, a new timer due after `now` runs by then anyway, within
 * the window: ring only for one due before now. Sleeping until next
 * itself, ring for one due more than a window before next (with the window
 * shut: before next, as before). The second look compares against the
 * same threshold, so the lost-wake-up argument above holds unchanged.
 *
 * --- Periodic timers ---
 * A periodic run re-arms itself when it ends (RUNNING -> PENDING under the
 * shard lock), so it never overlaps itself. Fixed rate: the next due time
 * is the first point of the grid start + n * period after the run began:
 * no drift; the points missed before a late run are that run, and the
 * points passed during a long run make one run at once (see next_due).
 * Fixed delay: the end of the run plus the delay. (The other missed-run
 * policies: next_due.) serex_timer_overrun counts the due runs that got
 * no run of their own since the previous run: the points a late start
 * folds in, the points a SKIP timer passed over after a long run, and
 * refused runs that were missed; the periodic record carries the count
 * from where it is learnt (a re-arm, a refusal) to the next run.
 *
 * --- The cap (max_timers) ---
 * One atomic count of the timers not DONE, beside the shards' own: a
 * schedule takes a place by CAS against the cap before it locks its shard,
 * and gives it back if it fails; count_done gives back the places of
 * timers that finish. The shards' counts summed under one shard's lock
 * were no cap: producers on two shards could both see the last place free
 * and both take it. Without a cap the count is not touched.
 *
 * --- Shutdown, termination, destroy ---
 * shutdown sets SHUT, then passes every shard lock: a schedule either saw
 * SHUT under its lock, or its timer is in the wheel for shutdown to see.
 * Periodic timers in the wheels are finished; runs and re-arms that see
 * SHUT finish instead. Timers not DONE are counted per shard (`active`,
 * under the lock); termination is SHUT and every count 0, with waiters
 * counted in the life word (life_internal.h; seq_cst on both sides).
 * No entry word: schedule checks SHUT under the shard lock shutdown
 * passes, so no call is ever in flight past it.
 * The life word's holders are the batches handed to targets (taken by
 * the dispatcher, given back by the batch's end, run_out, or at once by a
 * refusal). destroy joins the thread (it leaves once SHUT and every wheel
 * is empty, so after the last one-shot came due), then waits as
 * await_termination does for every run out to end, so that a caller may
 * free what the tasks use once destroy returns (executor.h). A run its
 * target refused or dropped has ended its timer already; one that can
 * never come (on a target that terminated without running it or handing
 * it back: runs_stranded) is not waited for. Then destroy detaches, and
 * the last holder frees the memory: a run between its last use of a timer
 * and run_out, or a stranded one that comes after all, never touches
 * freed memory.
 */

#include <string.h> /* memset: the batcher's hash */

#include "alloc_internal.h"
#include "await_internal.h"
#include "cancel_internal.h"
#include "common_internal.h"
#include "executor_internal.h"
#include "exec_class_internal.h"
#include "registry_internal.h"
#include "fork_internal.h"
#include "histogram_internal.h"
#include "observe_internal.h"
#include "life_internal.h"
#include "nodecache_internal.h"
#include "op_internal.h"
#include "park_internal.h"
#include "scheduler_internal.h"
#include "spinlock_internal.h"
#include "stats_internal.h"
#include "thread_internal.h"
#include "wheel_internal.h"

#define DEFAULT_TICK_NS INT64_C(1000000)
#define DEFAULT_WHEEL 512u
#define MAX_SHARDS 16u
#define CUSTOM_CLOCK_MAX_SLEEP_NS INT64_C(100000000)

/* tag: state (3 bits) and flags below the tie-breaker */
#define ST_MASK UINT64_C(7)
#define ST_PENDING UINT64_C(0)
#define ST_QUEUED UINT64_C(1)
#define ST_RUNNING UINT64_C(2)
#define ST_STOPPED UINT64_C(3)
#define ST_DONE UINT64_C(4)
#define ST_STOPPING UINT64_C(5) /* RUNNING, stopped: ends with its run */
#define ST_NEW UINT64_C(6)      /* a token's timer not yet filed */
#define ST_FREED UINT64_C(7) /* back in its slab: no handle, no owner */
#define F_HANDLE UINT64_C(8)
#define F_PERIODIC UINT64_C(16)
#define F_FIXED_DELAY UINT64_C(32)
/* A fixed-rate timer's serex_missed_policy, in two flag bits. */
#define MISSED_SHIFT 6
#define MISSED_MASK (UINT64_C(3) << MISSED_SHIFT)
/* Someone waits for the run in progress to end (cancel_wait parked on
 * the tag, or a cancel_notify on the shard's list): its settle takes the
 * shard lock (settle_waited). */
#define F_WAITERS UINT64_C(256)
/* The record obeys a token: its hook follows it (struct tok). */
#define F_TOKEN UINT64_C(512)
#define SEQ_ONE (UINT64_C(1) << SEREX__WTAG_SHIFT)
_Static_assert(F_TOKEN < SEQ_ONE, "the flags sit below the tie-breaker");

/* flags */
#define SHUT 1u

/* The cancel's body, shared by the busy serex_timer_cancel and the
 * calls that wait: inlined, so the busy one pays no call. */
#if defined(__GNUC__) || defined(__clang__)
#  define SCHED_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#  define SCHED_ALWAYS_INLINE inline
#endif

/* Distinct terminated targets destroy remembers while it looks for a
 * run that can still come (runs_stranded). */
#define STRANDED_MAX 64u

#define SLAB_BYTES ((size_t)262144)
#define SLAB_HEADER ((size_t)64)

struct serex_timer {
    union {
        /* key: the due time; tag: seq | flags | state */
        struct serex__wtimer w;
        /* QUEUED and RUNNING: the run is in a batch (see the essay). The
         * batch's first record is queued on the target as its op, which
         * overlays the wheel link `next`; every record links to the next
         * run of its batch through `batch_next`, which overlays `pprev`.
         * Both are unused out of the wheel, so a batch costs no byte
         * (op_internal.h). */
        struct {
            struct serex__op op;
            struct serex_timer *batch_next; /* NULL: the batch's last */
        };
    };
    serex_fn fn;
    void *arg;
    serex_executor *target; /* NULL: the timer thread */
};

_Static_assert(offsetof(struct serex_timer, op) ==
                       offsetof(struct serex_timer, w.next) &&
                   sizeof(struct serex__op) ==
                       sizeof(((struct serex__wtimer *)0)->next),
               "the run's op overlays the wheel link `next` only");
_Static_assert(offsetof(struct serex_timer, batch_next) ==
                       offsetof(struct serex_timer, w.pprev) &&
                   sizeof(struct serex_timer *) ==
                       sizeof(((struct serex__wtimer *)0)->pprev),
               "the batch link overlays the wheel link `pprev` only");
_Static_assert(sizeof(struct serex_timer) <= 64,
               "a one-shot timer is 64 bytes or less (56 on LP64)");

struct periodic {
    struct serex_timer t;
    int64_t period; /* fixed rate: the grid step; fixed delay: the delay */
    /*
     * Due runs that get no run of their own (serex_timer_overrun). Between
     * runs: those counted so far for the next run (grid points a SKIP
     * timer passed over, runs its target refused); in a run, plus the
     * points folded into it. Written only by whoever holds the timer out
     * of the wheel (its run, or the timer thread with a refused run)
     * before it files it again or runs it: the shard lock, or the
     * target's queue, publishes it to the next.
     */
    uint64_t overrun;
};

/* The hook of a timer that obeys a token (serex_schedule_token), after
 * its record: see "Tokens" in the essay. */
struct tok {
    struct serex__cancel_hook hook;
    serex_cancel *token; /* held by the hook, from add to remove */
};

struct oneshot_tok {
    struct serex_timer t;
    struct tok k;
};

struct periodic_tok {
    struct periodic p;
    struct tok k;
};

/* Record classes: a timer with a token is a class of its own, so that
 * the others grow by no byte. */
enum { CLS_ONESHOT, CLS_PERIODIC, CLS_ONESHOT_TOK, CLS_PERIODIC_TOK, NCLS };
static const size_t rec_size[NCLS] = {
    sizeof(struct serex_timer), sizeof(struct periodic),
    sizeof(struct oneshot_tok), sizeof(struct periodic_tok)};

struct sched_shard;

struct slab { /* at the start of its SLAB_BYTES-aligned block */
    struct sched_shard *shard;
    struct slab *next, *prev; /* the shard's slabs with room */
    struct slab *all_next, *all_prev; /* every slab of the shard */
    void *free;               /* freed records, linked through their start */
    char *bump;               /* never used so far: from here to the end */
    uint32_t used, cls;
};

struct sched_shard {
    _Alignas(SEREX__CACHELINE) serex__spinlock lock; /* shards own lines */
    uint64_t seq;                /* the next timer's tie-breaker */
    _Atomic size_t active;       /* timers not DONE; written under lock */
    uint64_t scheduled, done;    /* statistics; under lock */
    struct serex__wheel wheel;
    struct slab *partial[NCLS];  /* slabs with room */
    struct slab *spare[NCLS];    /* one empty slab kept for the next burst */
    struct slab *all;            /* every slab, spares included */
    struct notify *notify;       /* cancel_notify's, waiting for a run in
                                    progress to end; under lock */
    struct serex_scheduler *s;
};

struct serex_scheduler {
    serex_executor face;
    struct serex__reg reg; /* serex_dump's list */
    serex_clock_fn clock;
    void *clock_ctx;
    bool manual;
    bool has_thread;
    unsigned nshards; /* a power of two */
    size_t max_timers;
    serex_refused_policy periodic_refused; /* a periodic run refused */
    serex_pending_fn on_rejected;
    void *on_rejected_ctx;
    serex_pending_policy on_shutdown; /* pending one-shots at shutdown */
    int64_t coalesce_max;             /* the widest coalescing window; 0: off */
    struct serex__metrics *_Atomic metrics; /* NULL: off (metrics.h) */
    uint32_t gen;             /* fork generation it was made in */
    struct sched_shard *shards;
    serex__thread thread;
    serex__mutex advance_lock; /* manual mode: one advance at a time */

    _Atomic uint32_t flags;      /* SHUT: set by shutdown(_now) */
    _Atomic int64_t manual_now;  /* manual mode's clock: advance writes */
    _Atomic uint64_t rejected;   /* due runs refused: the dispatcher adds */
    /* With max_timers: timers not DONE, each reserved by CAS before it is
     * scheduled and released when it is done (or was never scheduled). */
    _Atomic size_t reserved;

    /* the timer thread's bed, apart from the producers' lines */
    _Alignas(SEREX__CACHELINE) _Atomic int64_t wake_at; /* the thread's
                                   next wake-up; producers swap it to ring */
    _Atomic uint32_t bell;       /* rung by producers and shutdown */
    _Atomic int64_t window;      /* the coalescing window, for tests */
    _Atomic int64_t window_peak; /* the widest it has been, for tests */
    /* holders: runs out on targets; DETACHED: destroyed; awaiters
     * (life_internal.h) */
    struct serex__life life;
};

static const struct serex__exec_class sched_class;
static const struct serex__op_class timer_run_class;
#define BATCH_RUNS 8u /* runs a batch's task runs itself (see the essay) */

static struct serex_scheduler *sched_of_face(serex_executor *ex)
{
    return serex__container_of(ex, struct serex_scheduler, face);
}

static int64_t sat_add(int64_t a, int64_t b) /* b >= 0 */
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static int64_t sched_now(struct serex_scheduler *s)
{
    if (s->manual) /* acquire: pairs with advance's release store */
        return atomic_load_explicit(&s->manual_now, memory_order_acquire);
    return s->clock != NULL ? s->clock(s->clock_ctx) : serex__now_ns();
}

static uint64_t tag_state(uint64_t tag)
{
    return tag & ST_MASK;
}

static struct slab *slab_of(const void *rec)
{
    return (struct slab *)((uintptr_t)rec & ~(uintptr_t)(SLAB_BYTES - 1));
}

static struct sched_shard *timer_shard(const struct serex_timer *t)
{
    return slab_of(t)->shard;
}

static struct periodic *periodic_of(struct serex_timer *t)
{
    return serex__container_of(t, struct periodic, t);
}

/* The hook of @t, a timer with F_TOKEN in its flags @v. */
static struct tok *tok_of(struct serex_timer *t, uint64_t v)
{
    if (v & F_PERIODIC)
        return &serex__container_of(periodic_of(t), struct periodic_tok, p)->k;
    return &serex__container_of(t, struct oneshot_tok, t)->k;
}

/* Takes @t's hook off its token (F_TOKEN in @v) before its record is
 * freed: whoever frees a record removes its hook. With no shard lock
 * held: the hook's fire takes it, and remove waits for a fire under way
 * (cancel_internal.h). */
static void timer_unhook(struct serex_timer *t, uint64_t v)
{
    struct tok *k = tok_of(t, v);

    serex__cancel_hook_remove(k->token, &k->hook);
}

/* timer_unhook for each record with a token on @list, a list of dead
 * records linked through their first word (settle_flush's, shard_sweep's). */
static void unhook_list(void *list)
{
    for (void *r = list; r != NULL; r = *(void **)r) {
        struct serex_timer *t = r;
        /* relaxed: the flags never change; the record is ours to free */
        uint64_t v = atomic_load_explicit(&t->w.tag, memory_order_relaxed);

        if (v & F_TOKEN)
            timer_unhook(t, v);
    }
}

/* --- slabs (every call under the shard lock) --- */

static bool slab_full(const struct slab *sl)
{
    return sl->free == NULL &&
           (size_t)((char *)sl + SLAB_BYTES - sl->bump) < rec_size[sl->cls];
}

static void slab_link(struct sched_shard *sh, struct slab *sl)
{
    sl->prev = NULL;
    sl->next = sh->partial[sl->cls];
    if (sl->next != NULL)
        sl->next->prev = sl;
    sh->partial[sl->cls] = sl;
}

static void slab_unlink(struct sched_shard *sh, struct slab *sl)
{
    if (sl->prev != NULL)
        sl->prev->next = sl->next;
    else
        sh->partial[sl->cls] = sl->next;
    if (sl->next != NULL)
        sl->next->prev = sl->prev;
}

/* Makes @sl, empty, @sh's slab of @cls with room. */
static void slab_start(struct sched_shard *sh, struct slab *sl, unsigned cls)
{
    sl->shard = sh;
    sl->free = NULL;
    sl->bump = (char *)sl + SLAB_HEADER;
    sl->used = 0;
    sl->cls = cls;
    slab_link(sh, sl);
}

/* Adopts @sl, allocated by the caller before it took the lock (no
 * allocation is made under a shard lock: see schedule). */
static void slab_add(struct sched_shard *sh, struct slab *sl, unsigned cls)
{
    sl->all_prev = NULL;
    sl->all_next = sh->all;
    if (sh->all != NULL)
        sh->all->all_prev = sl;
    sh->all = sl;
    slab_start(sh, sl, cls);
}

/* A record of @cls, or NULL if every slab of it is full and there is no
 * spare: the caller then allocates a slab unlocked (slab_add). */
static void *rec_alloc(struct sched_shard *sh, unsigned cls)
{
    struct slab *sl = sh->partial[cls];
    void *r;

    if (sl == NULL) {
        if ((sl = sh->spare[cls]) == NULL)
            return NULL;
        sh->spare[cls] = NULL;
        slab_start(sh, sl, cls);
    }
    if (sl->free != NULL) {
        r = sl->free;
        sl->free = *(void **)r;
    } else {
        r = sl->bump;
        sl->bump += rec_size[cls];
    }
    sl->used++;
    if (slab_full(sl))
        slab_unlink(sh, sl);
    return r;
}

/*
 * Gives @r back to its slab. A slab that empties is kept as the spare, or,
 * if there is one, unlinked and put on *@grave: the caller frees it with
 * slabs_free once it has unlocked (no free under a shard lock either).
 */
static void rec_free(struct sched_shard *sh, void *r, struct slab **grave)
{
    struct slab *sl = slab_of(r);

    SEREX_ASSERT(sl->shard == sh);
    if (slab_full(sl))
        slab_link(sh, sl);
    /* relaxed: under the lock; what a release of a stale handle finds
     * (the free-list link below overwrites only the first word) */
    atomic_store_explicit(&((struct serex_timer *)r)->w.tag, ST_FREED,
                          memory_order_relaxed);
    *(void **)r = sl->free;
    sl->free = r;
    if (--sl->used > 0)
        return;
    slab_unlink(sh, sl);
    if (sh->spare[sl->cls] == NULL) {
        sh->spare[sl->cls] = sl;
        return;
    }
    if (sl->all_prev != NULL)
        sl->all_prev->all_next = sl->all_next;
    else
        sh->all = sl->all_next;
    if (sl->all_next != NULL)
        sl->all_next->all_prev = sl->all_prev;
    sl->next = *grave;
    *grave = sl;
}

/* Frees the slabs rec_free put on @grave; with no lock held. */
static void slabs_free(struct slab *grave)
{
    while (grave != NULL) {
        struct slab *next = grave->next;

        serex__free(grave);
        grave = next;
    }
}

/* --- counting, waking --- */

static size_t total_active(struct serex_scheduler *s)
{
    size_t n = 0;

    for (unsigned i = 0; i < s->nshards; i++) /* seq_cst: see wake_awaiters */
        n += atomic_load_explicit(&s->shards[i].active, memory_order_seq_cst);
    return n;
}

/* Tells awaiters something changed, if there are any. */
static void wake_awaiters(struct serex_scheduler *s)
{
    /* after our own change (a count going down, SHUT), seq_cst */
    serex__life_notify(&s->life);
}

/* Tells awaiters unconditionally (shutdown): an RMW (a release), so an
 * awaiter that counts itself later reads from it and sees all we did
 * before. */
static void sched_announce(struct serex_scheduler *s)
{
    serex__life_bump(&s->life);
}

/*
 * With max_timers: takes a place for one more timer, or says there is
 * none. One counter for every shard, taken by CAS against the cap, so
 * the cap is exact whatever the shards (the sum of the shards' counts,
 * read under one shard's lock, let producers on two shards both take the
 * last place). Given back by count_done, or by schedule on failure.
 */
static bool cap_reserve(struct serex_scheduler *s)
{
    /* relaxed: a count; nothing is published through it */
    size_t v = atomic_load_explicit(&s->reserved, memory_order_relaxed);

    do {
        if (v >= s->max_timers)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(
        &s->reserved, &v, v + 1, memory_order_relaxed, memory_order_relaxed));
    return true;
}

static void cap_release(struct serex_scheduler *s, size_t n)
{
    if (s->max_timers != 0) /* relaxed: as cap_reserve */
        atomic_fetch_sub_explicit(&s->reserved, n, memory_order_relaxed);
}

/*
 * Under the shard lock: @n timers are done. Only the lock holder writes
 * the count, so a load and a store do (no locked instruction). Before
 * SHUT nobody can be waiting for the count: shutdown sets SHUT, then takes
 * every shard lock, then announces; a decrement made before it took our
 * lock is ordered before the announce by the lock, and one made after
 * sees SHUT here. Returns true if awaiters must be told (wake_awaiters).
 */
static bool count_done(struct serex_scheduler *s, struct sched_shard *sh,
                       size_t n)
{
    /* relaxed: written only under the lock we hold */
    size_t a = atomic_load_explicit(&sh->active, memory_order_relaxed);

    sh->done += n; /* the statistic, under the same lock */
    cap_release(s, n);

    /* relaxed: SHUT is set before shutdown takes this lock */
    if (!(atomic_load_explicit(&s->flags, memory_order_relaxed) & SHUT)) {
        atomic_store_explicit(&sh->active, a - n, memory_order_relaxed);
        return false;
    }
    /* seq_cst: ordered before the look for awaiters in wake_awaiters */
    atomic_store_explicit(&sh->active, a - n, memory_order_seq_cst);
    return true;
}

static void sched_ring(struct serex_scheduler *s)
{
    /* release: the change that made us ring (a timer in a wheel, SHUT)
     * is visible to the thread when it sees the bell */
    atomic_fetch_add_explicit(&s->bell, 1, memory_order_release);
    serex__park_wake_all(&s->bell);
}

/* After adding a timer due at @key: wake the thread if it would sleep
 * past it (see the essay). */
static void sched_poke(struct serex_scheduler *s, int64_t key)
{
    /* seq_cst: read after the add, which the shard lock ordered */
    int64_t w = atomic_load_explicit(&s->wake_at, memory_order_seq_cst);

    if (key < w && atomic_compare_exchange_strong_explicit(
                       &s->wake_at, &w, INT64_MIN, memory_order_seq_cst,
                       memory_order_relaxed))
        sched_ring(s);
}

/* A run handed to a target has ended (or will never run). */
static void run_out(struct serex_scheduler *s);

/*
 * Settling in groups. A run that ends makes its record DONE by one CAS on
 * its tag (lock-free: cancel and serex_timer_release decide against it on
 * that word alone), but freeing the record and counting it done need its
 * shard's lock, the lock its producer takes for every schedule. At 16
 * workers running the fires of one producer's timers, each settle taking
 * that lock was 70 % of timer_load's CPU (perf, 16 cores: workers spinning
 * on the producer's shard). So the owner of a batch gathers what its runs
 * leave to the lock (a count, and the records with no handle, linked
 * through their first word, which a DONE record no longer uses) and takes
 * the lock once per shard for a batch's whole share: at most BATCH_RUNS
 * records a lock, and none while the batch's runs come from one shard but
 * another's record is held (a change of shard settles what was gathered
 * first). Between its CAS and the settle, a record is DONE but still
 * counted active: an awaiter waits those few runs longer (termination is
 * the count reaching 0, decided under the lock as before); the batch's
 * hold on the scheduler (run_out comes after settle_flush) keeps the
 * shard alive. A record with a handle is the handle's to free once DONE
 * (serex_timer_release sees DONE and frees it): the gatherer only counts
 * it, and never touches it after its CAS.
 */
struct settle_acc {
    struct sched_shard *sh; /* the shard of what is gathered; NULL: none */
    size_t n;               /* records made DONE, not yet counted */
    void *free;             /* those with no handle, to free */
    bool tokens;            /* some of them have a hook to remove */
};

#define SETTLE_ACC_INIT ((struct settle_acc){NULL, 0, NULL, false})

/* Frees and counts what @acc gathered, under its shard's lock, once. */
static void settle_flush(struct serex_scheduler *s, struct settle_acc *acc)
{
    struct sched_shard *sh = acc->sh;
    struct slab *grave = NULL;
    bool tell;

    if (acc->n == 0)
        return;
    if (serex__unlikely(acc->tokens)) { /* hooks off before the lock */
        unhook_list(acc->free);
        acc->tokens = false;
    }
    serex__spin_lock(&sh->lock);
    while (acc->free != NULL) {
        void *r = acc->free;

        acc->free = *(void **)r;
        rec_free(sh, r, &grave);
    }
    tell = count_done(s, sh, acc->n);
    serex__spin_unlock(&sh->lock);
    acc->n = 0;
    slabs_free(grave);
    if (tell)
        wake_awaiters(s);
}

/* After the CAS that made @t DONE from @v: counts it, and gathers it to
 * be freed if no handle holds it (then its first word is unused). */
static void settle_gather(struct settle_acc *acc, struct serex_timer *t,
                          uint64_t v)
{
    SEREX_ASSERT(tag_state(v) != ST_DONE && tag_state(v) != ST_PENDING &&
                 tag_state(v) != ST_NEW);
    if (!(v & F_HANDLE)) {
        acc->tokens |= (v & F_TOKEN) != 0;
        *(void **)t = acc->free;
        acc->free = t;
    }
    acc->n++;
}

static uint64_t settle_waited(struct serex_scheduler *s, struct serex_timer *t,
                              struct settle_acc *acc);

/*
 * Makes @t DONE from whatever state it is in (not PENDING: the caller
 * took it out of the wheel, or it never was in it), and gathers it in
 * @acc to be counted done, and freed unless the user holds a handle
 * (settle_flush). Returns the state it had.
 */
static uint64_t settle_into(struct serex_scheduler *s, struct serex_timer *t,
                            struct settle_acc *acc)
{
    /* read before the CAS: with a handle held, the record may be freed
     * by serex_timer_release the moment it is DONE */
    struct sched_shard *sh = timer_shard(t);
    uint64_t v;

    if (acc->sh != sh) {
        settle_flush(s, acc);
        acc->sh = sh;
    }
    /* relaxed: a first guess for the CAS */
    v = atomic_load_explicit(&t->w.tag, memory_order_relaxed);
    /* acq_rel: the release side publishes our last use of the record to
     * a release that frees it once DONE, and the run's writes to a
     * cancel_wait that reads DONE (acquire); the acquire side pairs with
     * release's clearing of HANDLE (whoever frees saw the other's last
     * use). A waiter's mark sends us to the lock instead (a CAS that
     * fails because it appeared looks again and sees it). */
    do {
        if (serex__unlikely(v & F_WAITERS))
            return settle_waited(s, t, acc);
    } while (!atomic_compare_exchange_weak_explicit(
        &t->w.tag, &v, (v & ~ST_MASK) | ST_DONE, memory_order_acq_rel,
        memory_order_relaxed));
    settle_gather(acc, t, v);
    return tag_state(v);
}

/* settle_into and settle_flush for one record. */
static uint64_t sched_settle(struct serex_scheduler *s, struct serex_timer *t)
{
    struct settle_acc acc = SETTLE_ACC_INIT;
    uint64_t st = settle_into(s, t, &acc);

    settle_flush(s, &acc);
    return st;
}

/* --- scheduling --- */

static struct sched_shard *my_shard(struct serex_scheduler *s)
{
    static _Atomic unsigned tickets; /* taken by each thread's first call */
    static SEREX__THREAD_LOCAL unsigned ticket; /* 0: none yet */

    if (s->nshards == 1)
        return &s->shards[0];
    if (serex__unlikely(ticket == 0)) /* relaxed: any distinct number */
        ticket = atomic_fetch_add_explicit(&tickets, 1,
                                           memory_order_relaxed) + 1;
    return &s->shards[ticket & (s->nshards - 1)];
}

/* A timer scheduled while someone listens (observe_internal.h): out of
 * line, so that the busy path keeps nothing alive for it. */
static SEREX__NOINLINE void schedule_told(struct serex_scheduler *s,
                                          struct serex_timer *t, int64_t key)
{
    serex__obs_timer_set(&s->face, t->fn, (uint64_t)(uintptr_t)t,
                         key - sched_now(s));
}

/*
 * Takes a record of @cls from @sh for a new timer: on SEREX_OK with @sh's
 * lock held, and *@fresh a slab allocated unlocked and not used after all
 * (to free once unlocked), or NULL. On failure (SEREX_EREJECTED: shut
 * down; SEREX_ENOMEM) the lock is not held and the cap's place is given
 * back. Every slab full: one is allocated with the lock free (256 KiB, a
 * system call, while the timer thread or another producer would spin),
 * then the shard is looked at again: another may have made room.
 */
static inline int shard_take_record(struct serex_scheduler *s,
                                    struct sched_shard *sh, unsigned cls,
                                    struct serex_timer **t, struct slab **fresh)
{
    *fresh = NULL;
    serex__spin_lock(&sh->lock);
    for (;;) {
        /* relaxed: shutdown sets SHUT and then takes this lock (see
         * essay); looked at again after a slab was allocated unlocked */
        if (atomic_load_explicit(&s->flags, memory_order_relaxed) & SHUT)
            break;
        if ((*t = rec_alloc(sh, cls)) != NULL)
            return SEREX_OK;
        if (*fresh != NULL) { /* still no room: the new slab's turn */
            slab_add(sh, *fresh, cls);
            *fresh = NULL;
            continue;
        }
        serex__spin_unlock(&sh->lock);
        *fresh = serex__alloc_aligned(SLAB_BYTES, SLAB_BYTES);
        if (*fresh == NULL) {
            cap_release(s, 1);
            return SEREX_ENOMEM;
        }
        serex__spin_lock(&sh->lock);
    }
    serex__spin_unlock(&sh->lock);
    serex__free(*fresh); /* NULL, or one shutdown made useless */
    *fresh = NULL;
    cap_release(s, 1);
    return SEREX_EREJECTED;
}

/* The task and its target (and period) in a record just taken. */
static inline void timer_init(struct serex_timer *t, uint64_t flags,
                              serex_executor *target, int64_t period_ns,
                              serex_fn fn, void *arg)
{
    t->fn = fn;
    t->arg = arg;
    t->target = target;
    if (flags & F_PERIODIC) {
        periodic_of(t)->period = period_ns;
        periodic_of(t)->overrun = 0;
    }
}

/* Files @t in @sh's wheel, due at @key, with @tag's flags (under the
 * shard lock): a new tie-breaker, PENDING, counted active. */
static inline void timer_file(struct sched_shard *sh, struct serex_timer *t,
                              uint64_t tag, int64_t key)
{
    /* relaxed: published by the shard lock, or by the handle's return */
    atomic_store_explicit(&t->w.tag, sh->seq++ * SEQ_ONE | tag | ST_PENDING,
                          memory_order_relaxed);
    serex__wtimer_init(&t->w);
    serex__wheel_add(&sh->wheel, &t->w, key);
    /* relaxed, a load and a store: written only under the lock we hold;
     * an increment wakes no one */
    atomic_store_explicit(
        &sh->active,
        atomic_load_explicit(&sh->active, memory_order_relaxed) + 1,
        memory_order_relaxed);
    sh->scheduled++;
}

/* Bad input (promise 8) and a forked child's refusal, as schedule says. */
static int schedule_check(struct serex_scheduler *s, serex_executor *target,
                          int64_t delay_ns, serex_fn fn)
{
    if (s == NULL || fn == NULL || delay_ns < 0 ||
        (target != NULL && target->ops == NULL))
        return SEREX_EINVAL;
    if (serex__unlikely(serex__forked_since(s->gen)))
        return SEREX_EREJECTED; /* a child: see serex__fork_register */
    return SEREX_OK;
}

/* With max_timers, a place for one more (cap_reserve), or the status. */
static int schedule_place(struct serex_scheduler *s)
{
    if (s->max_timers == 0 || cap_reserve(s))
        return SEREX_OK;
    /* relaxed: shut down and full, either answer is right */
    return (atomic_load_explicit(&s->flags, memory_order_relaxed) & SHUT)
               ? SEREX_EREJECTED
               : SEREX_EFULL;
}

/*
 * The first half of every schedule call: checks, the due time, a record
 * taken from the calling thread's shard and filled in. On SEREX_OK the
 * shard's lock is held (the caller files the record, or marks it, and
 * unlocks) and *@fresh is a slab to free once unlocked, or NULL.
 */
static inline int schedule_take(struct serex_scheduler *s,
                                serex_executor *target, int64_t delay_ns,
                                int64_t period_ns, uint64_t flags, unsigned cls,
                                serex_fn fn, void *arg, serex_timer **out,
                                struct serex_timer **t, struct sched_shard **sh,
                                struct slab **fresh, int64_t *key)
{
    int rc;

    if (out != NULL)
        *out = NULL;
    if ((rc = schedule_check(s, target, delay_ns, fn)) != SEREX_OK ||
        (rc = schedule_place(s)) != SEREX_OK)
        return rc;
    *key = sat_add(sched_now(s), delay_ns);
    *sh = my_shard(s);
    if ((rc = shard_take_record(s, *sh, cls, t, fresh)) != SEREX_OK)
        return rc;
    timer_init(*t, flags, target, period_ns, fn, arg);
    return SEREX_OK;
}

/* The last half: @t is filed and the shard unlocked; tell the probes,
 * wake the timer thread if @t is the new earliest, hand out the handle. */
static inline int schedule_filed(struct serex_scheduler *s,
                                 struct serex_timer *t, int64_t key,
                                 serex_timer **out)
{
    if (serex__unlikely(serex__obs_timers_listening()))
        schedule_told(s, t, key);
    sched_poke(s, key);
    if (out != NULL)
        *out = t;
    return SEREX_OK;
}

static int schedule(struct serex_scheduler *s, serex_executor *target,
                    int64_t delay_ns, int64_t period_ns, uint64_t flags,
                    serex_fn fn, void *arg, serex_timer **out)
{
    unsigned cls = (flags & F_PERIODIC) ? CLS_PERIODIC : CLS_ONESHOT;
    struct serex_timer *t;
    struct sched_shard *sh;
    struct slab *fresh; /* a slab allocated unlocked, not used */
    int64_t key;
    int rc;

    rc = schedule_take(s, target, delay_ns, period_ns, flags, cls, fn, arg, out,
                       &t, &sh, &fresh, &key);
    if (rc != SEREX_OK)
        return rc;
    timer_file(sh, t, flags | (out != NULL ? F_HANDLE : 0), key);
    serex__spin_unlock(&sh->lock);
    if (serex__unlikely(fresh != NULL))
        serex__free(fresh); /* unused: another made room first */
    return schedule_filed(s, t, key, out);
}

int serex_schedule(serex_scheduler *s, serex_executor *target,
                   int64_t delay_ns, serex_fn fn, void *arg, serex_timer **out)
{
    return schedule(s, target, delay_ns, 0, 0, fn, arg, out);
}

int serex_schedule_fixed_rate(serex_scheduler *s, serex_executor *target,
                              int64_t initial_ns, int64_t period_ns,
                              serex_fn fn, void *arg, serex_timer **out)
{
    if (period_ns <= 0) {
        if (out != NULL)
            *out = NULL;
        return SEREX_EINVAL;
    }
    return schedule(s, target, initial_ns, period_ns, F_PERIODIC, fn, arg,
                    out);
}

int serex_schedule_fixed_rate_missed(serex_scheduler *s,
                                     serex_executor *target,
                                     int64_t initial_ns, int64_t period_ns,
                                     serex_missed_policy missed, serex_fn fn,
                                     void *arg, serex_timer **out)
{
    if (period_ns <= 0 || (unsigned)missed > SEREX_MISSED_DELAY) {
        if (out != NULL)
            *out = NULL;
        return SEREX_EINVAL;
    }
    return schedule(s, target, initial_ns, period_ns,
                    F_PERIODIC | (uint64_t)missed << MISSED_SHIFT, fn, arg,
                    out);
}

int serex_schedule_fixed_delay(serex_scheduler *s, serex_executor *target,
                               int64_t initial_ns, int64_t delay_ns,
                               serex_fn fn, void *arg, serex_timer **out)
{
    if (delay_ns <= 0) {
        if (out != NULL)
            *out = NULL;
        return SEREX_EINVAL;
    }
    return schedule(s, target, initial_ns, delay_ns,
                    F_PERIODIC | F_FIXED_DELAY, fn, arg, out);
}

/* --- cancel and release --- */

/* A cancel that stopped @t, while the recorder records: out of line. */
static SEREX__NOINLINE void cancel_told(struct serex_scheduler *s,
                                        serex_timer *t)
{
    serex__obs_timer_cancel(&s->face, (uint64_t)(uintptr_t)t);
}

/* Returns true, having told the probe or the recorder that @t of @s was
 * cancelled. */
static bool cancel_done(struct serex_scheduler *s, serex_timer *t)
{
    if (serex__unlikely(serex__obs_timers_listening()))
        cancel_told(s, t);
    return true;
}

/* Cancels a PENDING timer under its shard lock; false if it moved on. */
static SCHED_ALWAYS_INLINE bool cancel_pending(struct serex_timer *t)
{
    struct sched_shard *sh = timer_shard(t);
    uint64_t v;
    bool tell;

    serex__spin_lock(&sh->lock);
    /* relaxed: PENDING only changes under this lock */
    v = atomic_load_explicit(&t->w.tag, memory_order_relaxed);
    if (tag_state(v) != ST_PENDING) {
        serex__spin_unlock(&sh->lock);
        return false;
    }
    serex__wheel_del(&sh->wheel, &t->w);
    /* relaxed, and a store, not a CAS: PENDING moves only under this lock,
     * and HANDLE is ours (the caller holds the handle: nobody releases it
     * beside us). A locked instruction here would also wait for the
     * unlink's stores to the neighbours to leave the store buffer. */
    atomic_store_explicit(&t->w.tag, (v & ~ST_MASK) | ST_DONE,
                          memory_order_relaxed);
    tell = count_done(sh->s, sh, 1);
    serex__spin_unlock(&sh->lock);
    if (tell)
        wake_awaiters(sh->s);
    return cancel_done(sh->s, t);
}

/* The handle holder's word, checked: a released handle is a misuse. */
static uint64_t timer_checked(serex_timer *t, const char *call)
{
    /* relaxed: a first guess; every decision is a CAS or taken under the
     * shard lock */
    uint64_t v = atomic_load_explicit(&t->w.tag, memory_order_relaxed);

    if (serex__unlikely(!(v & F_HANDLE))) /* only the holder clears it */
        serex__misuse(call, "timer used after serex_timer_release");
    return v;
}

/*
 * serex_timer_cancel for a holder of @t's handle (@v: its word, checked).
 * The cancel/fire race of the essay: PENDING under the shard lock, QUEUED
 * -> STOPPED and (periodic) RUNNING -> STOPPING by CAS.
 */
static SCHED_ALWAYS_INLINE bool timer_stop(serex_timer *t, uint64_t v)
{
    for (;;) {
        switch (tag_state(v)) {
        case ST_PENDING:
            if (cancel_pending(t))
                return true;
            v = atomic_load_explicit(&t->w.tag, memory_order_relaxed);
            continue;
        case ST_RUNNING: /* a periodic one: stop its future runs */
        case ST_QUEUED:
            if (tag_state(v) == ST_RUNNING && !(v & F_PERIODIC))
                return false; /* a one-shot that started: too late */
            /* relaxed: whoever holds the run reads STOPPED (or STOPPING)
             * by CAS */
            if (atomic_compare_exchange_weak_explicit(
                    &t->w.tag, &v,
                    (v & ~ST_MASK) |
                        (tag_state(v) == ST_QUEUED ? ST_STOPPED : ST_STOPPING),
                    memory_order_relaxed, memory_order_relaxed))
                /* Stopped either way (its queued run is skipped, a
                 * running one not re-armed), but a periodic timer that
                 * shutdown ended was done already: false, as for one
                 * shutdown took out of the wheel. A one-shot's queued
                 * run is still made after shutdown: true stopped it.
                 * (relaxed: a shutdown not seen yet is one that comes
                 * after this cancel) */
                return !((v & F_PERIODIC) &&
                         (atomic_load_explicit(&timer_shard(t)->s->flags,
                                               memory_order_relaxed) &
                          SHUT)) &&
                       cancel_done(timer_shard(t)->s, t);
            continue;
        default: /* STOPPED, STOPPING, DONE: someone else ended it */
            return false;
        }
    }
}

bool serex_timer_cancel(serex_timer *t)
{
    if (t == NULL)
        return false;
    return timer_stop(t, timer_checked(t, "serex_timer_cancel"));
}

void serex_timer_release(serex_timer *t)
{
    uint64_t v;

    if (t == NULL)
        return;
    /* acquire: if DONE, the settle that made it is visible before we free */
    v = atomic_load_explicit(&t->w.tag, memory_order_acquire);
    for (;;) {
        /* HANDLE is cleared by the holder only (here), and a freed
         * record reads ST_FREED without it: a second release lands here */
        if (serex__unlikely(!(v & F_HANDLE)))
            serex__misuse("serex_timer_release",
                          "timer handle released twice");
        if (tag_state(v) == ST_DONE) {
            struct sched_shard *sh = timer_shard(t);
            struct slab *grave = NULL;

            if (serex__unlikely(v & F_TOKEN))
                timer_unhook(t, v); /* before the lock its fire takes */
            serex__spin_lock(&sh->lock);
            rec_free(sh, t, &grave);
            serex__spin_unlock(&sh->lock);
            slabs_free(grave);
            return;
        }
        /* release: our last use of the record happens before the free by
         * whoever makes it DONE (acquire there) */
        if (atomic_compare_exchange_weak_explicit(
                &t->w.tag, &v, v & ~F_HANDLE, memory_order_release,
                memory_order_acquire))
            return;
    }
}

/* --- cancel and wait, cancel and notify --- */

/* The runs in progress on this thread, innermost first (a run may run
 * another: a nested advance or manual run): serex_timer_overrun's, and
 * cancel_wait's EDEADLK. On the runs' stacks. */
struct run_frame {
    const struct serex_timer *t;
    const struct periodic *p; /* t's, if periodic; else NULL */
    struct run_frame *up;
};
static SEREX__THREAD_LOCAL struct run_frame *run_frames;

/* Whether a run of the timer of word @v has started and not returned
 * (cancel_wait and cancel_notify wait only for that: a run not started
 * is always skipped once cancelled). */
static bool run_in_progress(uint64_t v)
{
    return tag_state(v) == ST_RUNNING || tag_state(v) == ST_STOPPING;
}

/* Whether the calling thread is inside a run of @t: waiting for it to
 * end would wait for itself. */
static bool run_is_ours(const struct serex_timer *t)
{
    for (const struct run_frame *f = run_frames; f != NULL; f = f->up)
        if (f->t == t)
            return true;
    return false;
}

int serex_timer_cancel_wait(serex_timer *t, int64_t timeout_ns, bool *stopped)
{
    int64_t deadline = INT64_MAX;
    uint64_t v;
    bool st;

    if (stopped != NULL)
        *stopped = false;
    if (t == NULL || !serex__timeout_valid(timeout_ns))
        return SEREX_EINVAL;
    st = timer_stop(t, timer_checked(t, "serex_timer_cancel_wait"));
    if (stopped != NULL)
        *stopped = st;
    /* acquire: pairs with the settle's CAS to DONE (settle_into,
     * settle_waited): the run's writes are visible once it has ended */
    v = atomic_load_explicit(&t->w.tag, memory_order_acquire);
    if (!run_in_progress(v))
        return SEREX_OK;
    if (run_is_ours(t))
        return SEREX_EDEADLK; /* it ends only once we return */
    if (timeout_ns > 0)
        deadline = serex__deadline(timeout_ns);
    for (;;) {
        if (!run_in_progress(v))
            return SEREX_OK;
        if (timeout_ns == 0)
            return SEREX_ETIMEDOUT;
        /* acquire on failure: as above, for the look at the word it
         * reads (C11 wants the success order as strong); the mark itself
         * publishes nothing: it sends the settle to the lock and the
         * wake (settle_waited), and the park re-reads the word under its
         * bucket lock */
        if (!(v & F_WAITERS) && !atomic_compare_exchange_weak_explicit(
                                    &t->w.tag, &v, v | F_WAITERS,
                                    memory_order_acquire, memory_order_acquire))
            continue;
        if (serex__park_wait64(&t->w.tag, v | F_WAITERS, deadline) ==
            SEREX_ETIMEDOUT)
            timeout_ns = 0; /* one last look, then ETIMEDOUT */
        v = atomic_load_explicit(&t->w.tag, memory_order_acquire);
    }
}

/* A serex_timer_cancel_notify continuation (a node-cache block). */
struct notify {
    struct serex__op op;         /* posted to target as this op */
    struct notify *next;         /* the shard's list, under its lock */
    const struct serex_timer *t; /* whose run it waits for */
    serex_executor *target;
    serex_fn fn;
    void *arg;
};
_Static_assert(sizeof(struct notify) <= 64, "a notify fits class 64");

/* Runs the continuation where it is, its block freed first (fn may end
 * anything, the scheduler included). */
static void notify_run(struct serex__op *op)
{
    struct notify n = *serex__container_of(op, struct notify, op);

    serex__cache_free(SEREX__CLASS_64, op);
    n.fn(n.arg);
}

static void notify_dropped(struct serex__op *op, serex_pending_fn on_pending,
                           void *ctx)
{
    (void)on_pending;
    (void)ctx;
    notify_run(op); /* runs here (promise 2a) */
}

static const struct serex__op_class notify_class = {
    "timer cancel notify",
    notify_run,
    notify_dropped,
};

/* Posts each continuation of @list in order; one its target refuses
 * runs here (promise 2a). */
static void notify_post(struct notify *list)
{
    while (list != NULL) {
        struct notify *next = list->next;

        if (serex__op_submit(list->target, &list->op) != SEREX_OK)
            notify_run(&list->op);
        list = next;
    }
}

/* Under @sh's lock: takes @t's continuations off the shard's list (which
 * is newest first), oldest first. */
static struct notify *notify_take(struct sched_shard *sh,
                                  const struct serex_timer *t)
{
    struct notify **pp = &sh->notify, *mine = NULL;

    while (*pp != NULL) {
        struct notify *n = *pp;

        if (n->t != t) {
            pp = &n->next;
            continue;
        }
        *pp = n->next;
        n->next = mine;
        mine = n;
    }
    return mine;
}

/*
 * Files @n on @t's shard if a run of @t is in progress, and marks the
 * tag (F_WAITERS), so that the run's settle takes the lock and posts it
 * (settle_waited); both under the lock, so the settle either comes after
 * and finds @n, or came before and we find the run over. false: no run
 * in progress, the caller posts @n itself.
 */
static bool notify_add(struct serex_timer *t, struct notify *n)
{
    struct sched_shard *sh = timer_shard(t);
    uint64_t v;

    serex__spin_lock(&sh->lock);
    /* acquire: if the run is over, its writes are visible to @n, which
     * the caller posts */
    v = atomic_load_explicit(&t->w.tag, memory_order_acquire);
    for (;;) {
        if (!run_in_progress(v)) {
            serex__spin_unlock(&sh->lock);
            return false;
        }
        /* acquire on failure, as above (and on success, as C11 wants):
         * the mark publishes nothing, the settle that sees it takes this
         * lock */
        if ((v & F_WAITERS) || atomic_compare_exchange_weak_explicit(
                                   &t->w.tag, &v, v | F_WAITERS,
                                   memory_order_acquire, memory_order_acquire))
            break;
    }
    n->next = sh->notify;
    sh->notify = n;
    serex__spin_unlock(&sh->lock);
    return true;
}

int serex_timer_cancel_notify(serex_timer *t, serex_executor *target,
                              serex_fn fn, void *arg, bool *stopped)
{
    struct notify *n;
    uint64_t v;
    bool st;

    if (stopped != NULL)
        *stopped = false;
    if (t == NULL || target == NULL || target->ops == NULL || fn == NULL)
        return SEREX_EINVAL;
    v = timer_checked(t, "serex_timer_cancel_notify");
    n = serex__cache_alloc(SEREX__CLASS_64); /* first: ENOMEM changes
                                                nothing */
    if (n == NULL)
        return SEREX_ENOMEM;
    *n = (struct notify){{&notify_class}, NULL, t, target, fn, arg};
    st = timer_stop(t, v);
    if (stopped != NULL)
        *stopped = st; /* before fn can run */
    if (!notify_add(t, n))
        notify_post(n);
    return SEREX_OK;
}

/*
 * settle_into for a run someone waits for (F_WAITERS): DONE under the
 * shard lock, so that a cancel_notify filing under it came before (its
 * continuation is taken here) or finds the run over. Taken under the
 * lock, not looked up after: once DONE, a record with a handle may be
 * freed by its release (under this lock) and its address reused by a
 * new timer with continuations of its own. Then the parked cancel_waits
 * are woken (by address: the record may be gone) and the continuations
 * posted, after the settle is gathered (one may release the handle).
 */
static uint64_t settle_waited(struct serex_scheduler *s, struct serex_timer *t,
                              struct settle_acc *acc)
{
    struct sched_shard *sh = acc->sh;
    struct notify *taken;
    uint64_t v;

    (void)s;
    serex__spin_lock(&sh->lock);
    /* relaxed: a first guess; only HANDLE can change meanwhile */
    v = atomic_load_explicit(&t->w.tag, memory_order_relaxed);
    /* acq_rel: as settle_into's CAS */
    while (!atomic_compare_exchange_weak_explicit(
        &t->w.tag, &v, (v & ~(ST_MASK | F_WAITERS)) | ST_DONE,
        memory_order_acq_rel, memory_order_relaxed))
        ;
    taken = notify_take(sh, t);
    serex__spin_unlock(&sh->lock);
    settle_gather(acc, t, v);
    serex__park_wake_all(&t->w.tag);
    notify_post(taken);
    return tag_state(v);
}

bool serex__timer_has_waiters(serex_timer *t)
{
    /* relaxed: a snapshot for tests */
    return (atomic_load_explicit(&t->w.tag, memory_order_relaxed) &
            F_WAITERS) != 0;
}

/* --- tokens --- */

/*
 * The token was cancelled (the hook's fire, on the cancelling thread):
 * @t is cancelled as serex_timer_cancel would, but by no handle's
 * holder. A PENDING timer leaves its wheel under the shard lock (a
 * release may clear HANDLE meanwhile: a CAS), and if no handle holds it,
 * it is ours to free: its hook is removed from inside its fire (at once)
 * and the record freed. A timer being scheduled (NEW) is marked STOPPED
 * for serex_schedule_token to undo. Never blocks: a short lock.
 */
static void tok_stop(struct serex_timer *t)
{
    struct sched_shard *sh = timer_shard(t);
    struct serex_scheduler *s = sh->s;
    bool tell = false, stopped = false, mine = false;
    uint64_t v, to;

    serex__spin_lock(&sh->lock);
    /* relaxed: PENDING and NEW change only under this lock; the other
     * states are decided by the CAS */
    v = atomic_load_explicit(&t->w.tag, memory_order_relaxed);
    for (;;) {
        if (tag_state(v) == ST_PENDING) {
            serex__wheel_del(&sh->wheel, &t->w);
            /* acq_rel, as settle_into's: whoever frees saw the other's
             * last use */
            while (!atomic_compare_exchange_weak_explicit(
                &t->w.tag, &v, (v & ~ST_MASK) | ST_DONE, memory_order_acq_rel,
                memory_order_relaxed))
                ;
            tell = count_done(s, sh, 1);
            stopped = true;
            mine = !(v & F_HANDLE);
            break;
        }
        if (tag_state(v) == ST_NEW || tag_state(v) == ST_QUEUED)
            to = ST_STOPPED;
        else if (tag_state(v) == ST_RUNNING && (v & F_PERIODIC))
            to = ST_STOPPING;
        else
            break; /* a one-shot that started, or one that ended */
        /* relaxed: as serex_timer_cancel's; NEW is read under this lock */
        if (atomic_compare_exchange_weak_explicit(
                &t->w.tag, &v, (v & ~ST_MASK) | to, memory_order_relaxed,
                memory_order_relaxed)) {
            stopped = tag_state(v) != ST_NEW;
            break;
        }
    }
    serex__spin_unlock(&sh->lock);
    if (tell)
        wake_awaiters(s);
    if (stopped)
        cancel_done(s, t);
    if (mine) {
        struct slab *grave = NULL;

        timer_unhook(t, v); /* inside its fire: returns at once */
        serex__spin_lock(&sh->lock);
        rec_free(sh, t, &grave);
        serex__spin_unlock(&sh->lock);
        slabs_free(grave);
    }
}

static void tok_fire_oneshot(struct serex__cancel_hook *h, int cause)
{
    (void)cause;
    tok_stop(&serex__container_of(h, struct oneshot_tok, k.hook)->t);
}

static void tok_fire_periodic(struct serex__cancel_hook *h, int cause)
{
    (void)cause;
    tok_stop(&serex__container_of(h, struct periodic_tok, k.hook)->p.t);
}

/* A token's timer that never got into a wheel: its hook off (unless it
 * was never on), its record back, its cap place given back. */
static void tok_undo(struct serex_scheduler *s, struct sched_shard *sh,
                     struct serex_timer *t, bool hooked)
{
    struct slab *grave = NULL;

    if (hooked) /* relaxed: our own flags */
        timer_unhook(t, atomic_load_explicit(&t->w.tag, memory_order_relaxed));
    serex__spin_lock(&sh->lock);
    rec_free(sh, t, &grave);
    serex__spin_unlock(&sh->lock);
    slabs_free(grave);
    cap_release(s, 1);
}

/*
 * schedule with a token: a record of a token class, taken (NEW, not in
 * the wheel), its hook added with no lock held (the token's lock, then
 * ours would nest), then filed if the hook's fire did not come first. A
 * token cancelled already, or meanwhile, schedules nothing: its cause.
 */
static int schedule_token(struct serex_scheduler *s, serex_executor *target,
                          int64_t delay_ns, int64_t period_ns, uint64_t flags,
                          serex_cancel *token, serex_fn fn, void *arg,
                          serex_timer **out)
{
    unsigned cls = (flags & F_PERIODIC) ? CLS_PERIODIC_TOK : CLS_ONESHOT_TOK;
    uint64_t fl = flags | F_TOKEN | (out != NULL ? F_HANDLE : 0), v;
    struct serex_timer *t;
    struct sched_shard *sh;
    struct slab *fresh;
    struct tok *k;
    int64_t key;
    int rc;

    if (token == NULL)
        return schedule(s, target, delay_ns, period_ns, flags, fn, arg, out);
    rc = schedule_take(s, target, delay_ns, period_ns, flags, cls, fn, arg, out,
                       &t, &sh, &fresh, &key);
    if (rc != SEREX_OK)
        return rc;
    k = tok_of(t, fl);
    k->hook.fire = (fl & F_PERIODIC) ? tok_fire_periodic : tok_fire_oneshot;
    k->token = token;
    /* relaxed: read under this lock (the fire, and us below) */
    atomic_store_explicit(&t->w.tag, fl | ST_NEW, memory_order_relaxed);
    serex__spin_unlock(&sh->lock);
    serex__free(fresh);
    if ((rc = serex__cancel_hook_add(token, &k->hook)) != 0) {
        tok_undo(s, sh, t, false); /* cancelled already: no remove owed */
        return rc;
    }
    serex__spin_lock(&sh->lock);
    /* relaxed: NEW changes only under this lock */
    v = atomic_load_explicit(&t->w.tag, memory_order_relaxed);
    if (tag_state(v) != ST_NEW ||
        (atomic_load_explicit(&s->flags, memory_order_relaxed) & SHUT)) {
        serex__spin_unlock(&sh->lock);
        tok_undo(s, sh, t, true);
        /* the fire came first: the cause (read after the fire's CAS,
         * which follows the cause's store) */
        return tag_state(v) != ST_NEW ? serex_cancel_cause(token)
                                      : SEREX_EREJECTED;
    }
    timer_file(sh, t, fl, key);
    serex__spin_unlock(&sh->lock);
    return schedule_filed(s, t, key, out);
}

int serex_schedule_token(serex_scheduler *s, serex_executor *target,
                         int64_t delay_ns, serex_cancel *token, serex_fn fn,
                         void *arg, serex_timer **out)
{
    return schedule_token(s, target, delay_ns, 0, 0, token, fn, arg, out);
}

int serex_schedule_fixed_rate_token(serex_scheduler *s, serex_executor *target,
                                    int64_t initial_ns, int64_t period_ns,
                                    serex_cancel *token, serex_fn fn, void *arg,
                                    serex_timer **out)
{
    if (period_ns <= 0) {
        if (out != NULL)
            *out = NULL;
        return SEREX_EINVAL;
    }
    return schedule_token(s, target, initial_ns, period_ns, F_PERIODIC, token,
                          fn, arg, out);
}

/* --- running --- */

/*
 * When a periodic run that started at @start ends (now: @end). Fixed delay:
 * end plus the delay. Fixed rate, by its serex_missed_policy, where `key`
 * is the grid point this run was due at:
 *   COALESCE: the first grid point after @start. Points passed before the
 *     run started were folded into it; if some passed while it ran, that
 *     point is already due and one run follows at once for all of them;
 *     the grid stays key + n * period.
 *   BURST: the next grid point, key + period, even if it has passed: every
 *     point gets a run, back to back until caught up.
 *   SKIP: the first grid point after @end: no catch-up run at all.
 *   DELAY: @start + period: a late start (or a long run) moves the grid,
 *     which goes on from the start of this run.
 */
static int64_t next_due(struct serex_timer *t, int64_t start, int64_t end)
{
    int64_t period = periodic_of(t)->period, key = t->w.key, from, n;
    /* relaxed: our own flags, set before the timer was published */
    uint64_t v = atomic_load_explicit(&t->w.tag, memory_order_relaxed);

    if (v & F_FIXED_DELAY)
        return sat_add(end, period);
    switch ((serex_missed_policy)((v & MISSED_MASK) >> MISSED_SHIFT)) {
    case SEREX_MISSED_BURST:
        return sat_add(key, period);
    case SEREX_MISSED_DELAY:
        return sat_add(start > key ? start : key, period);
    case SEREX_MISSED_SKIP:
        from = end;
        break;
    default: /* SEREX_MISSED_COALESCE */
        from = start;
        break;
    }
    n = (from > key ? (from - key) / period : 0) + 1; /* points after */
    return n > INT64_MAX / period ? INT64_MAX : sat_add(key, n * period);
}

/*
 * Back into the wheel, due at @due, if its state is still @from (RUNNING:
 * its run has ended; QUEUED: its run was refused and missed). Returns
 * false if the timer is finished instead (the caller settles it): cancel
 * stopped it, shutdown ended it, or no later run exists.
 */
static bool rearm(struct serex_scheduler *s, struct serex_timer *t, int64_t due,
                  uint64_t from)
{
    struct sched_shard *sh = timer_shard(t);
    uint64_t v;

    if (due <= t->w.key) /* saturated at INT64_MAX: no later run exists */
        return false;
    serex__spin_lock(&sh->lock);
    /* relaxed: shutdown passes this lock after setting SHUT */
    if (atomic_load_explicit(&s->flags, memory_order_relaxed) & SHUT) {
        serex__spin_unlock(&sh->lock);
        return false;
    }
    v = atomic_load_explicit(&t->w.tag, memory_order_relaxed);
    do {
        /* a waiter marks only a run it stopped (STOPPING), or a one-shot */
        SEREX_ASSERT(!(v & F_WAITERS) || tag_state(v) != from);
        if (tag_state(v) != from) { /* cancel stopped it */
            serex__spin_unlock(&sh->lock);
            return false;
        }
        /* relaxed: PENDING is read under this lock (a new tie-breaker:
         * it is scheduled anew) */
    } while (!atomic_compare_exchange_weak_explicit(
        &t->w.tag, &v,
        sh->seq * SEQ_ONE | (v & (SEQ_ONE - 1) & ~ST_MASK) | ST_PENDING,
        memory_order_relaxed, memory_order_relaxed));
    sh->seq++;
    serex__wheel_add(&sh->wheel, &t->w, due);
    serex__spin_unlock(&sh->lock);
    sched_poke(s, due);
    return true;
}

static serex_missed_policy missed_policy(uint64_t v)
{
    return (serex_missed_policy)((v & MISSED_MASK) >> MISSED_SHIFT);
}

/* Grid points that a run of @t starting at @start folds in: those between
 * its due point and its start that get no run of their own (none for a
 * fixed-delay timer, or under SEREX_MISSED_BURST). */
static uint64_t folded(struct serex_timer *t, uint64_t v, int64_t start)
{
    int64_t key = t->w.key;

    if ((v & F_FIXED_DELAY) || start <= key ||
        missed_policy(v) == SEREX_MISSED_BURST)
        return 0;
    /* unsigned: start > key, so the difference fits */
    return ((uint64_t)start - (uint64_t)key) / (uint64_t)periodic_of(t)->period;
}

/*
 * Grid points a SEREX_MISSED_SKIP timer passes over after a run of @t that
 * started at @start, the next due at @due: those after the points the run
 * folded in and before @due (a long run: they get no run, and the next
 * run counts them). None under the other policies: their next due time
 * is the point after the run's last (COALESCE, BURST), or a new grid
 * (DELAY).
 */
static uint64_t skipped(struct serex_timer *t, uint64_t v, int64_t start,
                        int64_t due)
{
    int64_t key = t->w.key;
    uint64_t points, f;

    if ((v & F_FIXED_DELAY) || missed_policy(v) != SEREX_MISSED_SKIP ||
        due <= key || due == INT64_MAX)
        return 0;
    /* @due is on the grid, key + points * period; unsigned: due > key */
    points = ((uint64_t)due - (uint64_t)key) / (uint64_t)periodic_of(t)->period;
    f = folded(t, v, start);
    return points > f + 1 ? points - 1 - f : 0;
}

/* Runs a periodic timer's task, its overrun readable from inside: the
 * points counted since the last run, and those folded into this one. */
static void run_periodic(struct serex_timer *t, uint64_t v, int64_t start,
                         struct serex__frame *frame, serex_executor *face)
{
    struct periodic *p = periodic_of(t);
    struct run_frame rf = {t, p, run_frames}; /* a run inside a run */

    p->overrun += folded(t, v, start);
    run_frames = &rf;
    serex__frame_push(frame, face);
    t->fn(t->arg);
    serex__frame_pop(frame);
    run_frames = rf.up;
}

/* Runs a one-shot timer's task, known as in progress on this thread. */
static void run_oneshot(struct serex_timer *t, struct serex__frame *frame,
                        serex_executor *face)
{
    struct run_frame rf = {t, NULL, run_frames};

    run_frames = &rf;
    serex__frame_push(frame, face);
    t->fn(t->arg);
    serex__frame_pop(frame);
    run_frames = rf.up;
}

/* A periodic run has ended: back into the wheel, unless stopped. Returns
 * false if the timer is finished instead (the caller settles it). */
static bool rearm_after_run(struct serex_scheduler *s, struct serex_timer *t,
                            uint64_t v, int64_t start)
{
    int64_t due = next_due(t, start, sched_now(s));

    periodic_of(t)->overrun = skipped(t, v, start, due); /* for the next */
    return rearm(s, t, due, ST_RUNNING);
}

/*
 * A periodic run that its target refused for want of room (full, or out
 * of memory), under SEREX_REFUSED_MISS: the run is missed. The timer goes
 * on as after a run that started and ended now, and the next run's
 * overrun counts the points this one stood for (its own, those folded
 * into it, those a SKIP timer passes over). Returns false if the timer
 * ends instead (cancel or shutdown came first): the caller settles it.
 */
static bool run_missed(struct serex_scheduler *s, struct serex_timer *t,
                       uint64_t v)
{
    int64_t now = sched_now(s), due = next_due(t, now, now);

    periodic_of(t)->overrun += 1 + folded(t, v, now) + skipped(t, v, now, due);
    return rearm(s, t, due, ST_QUEUED);
}

uint64_t serex_timer_overrun(void)
{
    const struct run_frame *f = run_frames;

    return f != NULL && f->p != NULL ? f->p->overrun : 0;
}

/*
 * A run's lateness and run time (metrics.h), and its fire event. Only
 * when something watches (sched_watched): the clock is the scheduler's
 * own unless the metrics config named one, so lateness is in the time
 * the timers are due in (a manual scheduler's, in tests).
 */
struct run_watch {
    struct serex__metrics *ms; /* NULL: no histogram for this run */
    int64_t start;
};

static bool sched_watched(struct serex_scheduler *s)
{
    /* relaxed: a run as metrics turn on is timed or not, either is right */
    return ((unsigned)(atomic_load_explicit(&s->metrics,
                                            memory_order_relaxed) != NULL) |
            (unsigned)serex__obs_timers_listening()) != 0;
}

static int64_t watch_now(struct serex_scheduler *s,
                         const struct serex__metrics *ms)
{
    return ms != NULL && ms->clock != NULL ? serex__metrics_now(ms)
                                           : sched_now(s);
}

static void run_watch_begin(struct serex_scheduler *s,
                            const struct serex_timer *t, struct run_watch *w)
{
    struct serex__metrics *ms = serex__metrics_get(&s->metrics);
    bool told = serex__obs_timers_listening();
    int64_t late = -1;

    w->ms = ms != NULL && serex__metrics_sample(ms) ? ms : NULL;
    if (w->ms != NULL || told) {
        w->start = watch_now(s, w->ms);
        late = w->start > t->w.key ? w->start - t->w.key : 0;
    }
    if (w->ms != NULL)
        serex__hist_add_shared(&serex__metrics_stripe(ms)->wait,
                               (uint64_t)late);
    if (told)
        serex__obs_timer_fire(&s->face, t->fn, (uint64_t)(uintptr_t)t, late);
}

static void run_watch_end(struct serex_scheduler *s, struct run_watch *w)
{
    int64_t end;

    if (w->ms == NULL)
        return;
    end = watch_now(s, w->ms);
    serex__hist_add_shared(&serex__metrics_stripe(w->ms)->run,
                           end > w->start ? (uint64_t)(end - w->start) : 0);
}

/* Runs @t if it is still QUEUED; then re-arms or settles it. */
static void run_timer(struct serex_scheduler *s, struct serex_timer *t,
                      struct settle_acc *acc)
{
    struct serex__frame frame;
    /* acquire: pairs with nothing new (the record came to us through the
     * target's queue or the timer thread); relaxed would do, but this is
     * the first read of the run */
    uint64_t v = atomic_load_explicit(&t->w.tag, memory_order_acquire);
    struct run_watch w;
    int64_t start;

    for (;;) {
        if (tag_state(v) != ST_QUEUED ||
            ((v & F_PERIODIC) &&
             (atomic_load_explicit(&s->flags, memory_order_relaxed) & SHUT))) {
            settle_into(s, t, acc); /* stopped, or shutdown ended it */
            return;
        }
        /* relaxed: cancel's CAS decides against this one on the word */
        if (atomic_compare_exchange_weak_explicit(
                &t->w.tag, &v, (v & ~ST_MASK) | ST_RUNNING,
                memory_order_relaxed, memory_order_relaxed))
            break;
    }
    w.ms = NULL;
    if (serex__unlikely(sched_watched(s)))
        run_watch_begin(s, t, &w);
    if (!(v & F_PERIODIC)) {
        run_oneshot(t, &frame, &s->face);
        run_watch_end(s, &w);
        settle_into(s, t, acc);
        return;
    }
    start = sched_now(s);
    run_periodic(t, v, start, &frame, &s->face);
    run_watch_end(s, &w);
    if (!rearm_after_run(s, t, v, start))
        settle_into(s, t, acc);
}

/*
 * Takes @t's link to the next run of its batch, and clears it (a periodic
 * timer re-armed goes back into a wheel, which wants `pprev` NULL). Called
 * by the batch's owner before it runs, re-arms or settles @t, any of which
 * may free the record or file it anew.
 */
static struct serex_timer *batch_take_next(struct serex_timer *t)
{
    struct serex_timer *next = t->batch_next;

    t->batch_next = NULL;
    return next;
}

/* Runs (or skips) each run of the batch that begins at @t, in order,
 * gathering their settles in @acc. */
static void batch_run(struct serex_scheduler *s, struct serex_timer *t,
                      struct settle_acc *acc)
{
    while (t != NULL) {
        struct serex_timer *next = batch_take_next(t);

        run_timer(s, t, acc);
        t = next;
    }
}

/*
 * A batch handed to a target: the target runs it, one run per task. When
 * it starts, it first passes the runs after its own on to the same target
 * as one more batch (a yield: behind what the target has, and on a pool
 * into the worker's run queue, where idle workers steal it), then runs
 * its own. So one push from the firing thread per target per fire, yet a
 * pool still runs a fire's runs side by side, as it ran lone runs, and a
 * serial still runs them in due order. If the target refuses the rest
 * (it is shutting down, or full), they run here, in order: the target
 * accepted them with the batch.
 */
static int batch_submit(struct serex_scheduler *s, serex_executor *target,
                        struct serex_timer *t, bool yield);

static void timer_run(struct serex__op *op)
{
    struct serex_timer *t = serex__container_of(op, struct serex_timer, op);
    struct serex_scheduler *s = timer_shard(t)->s;
    struct serex_timer *end = t, *rest;
    struct settle_acc acc = SETTLE_ACC_INIT;

    for (unsigned k = 1; k < BATCH_RUNS && end->batch_next != NULL; k++)
        end = end->batch_next;
    rest = batch_take_next(end); /* ours: t .. end */
    /* our hold keeps the scheduler while the rest takes its own */
    if (rest != NULL && batch_submit(s, t->target, rest, true) == SEREX_OK)
        rest = NULL; /* the target's now: it may be gone already */
    batch_run(s, t, &acc);
    batch_run(s, rest, &acc);
    settle_flush(s, &acc); /* before run_out: our hold keeps the shards */
    run_out(s);
}

/* A batch its target took back or dropped: each of its timers ends, in
 * order, as a lone run taken back did. */
static void timer_run_dropped(struct serex__op *op,
                              serex_pending_fn on_pending, void *ctx)
{
    struct serex_timer *t = serex__container_of(op, struct serex_timer, op);
    struct serex_scheduler *s = timer_shard(t)->s;
    struct settle_acc acc = SETTLE_ACC_INIT;

    while (t != NULL) {
        struct serex_timer *next = batch_take_next(t);
        serex_fn fn = t->fn;
        void *targ = t->arg;
        /* relaxed: our own flag */
        uint64_t v = atomic_load_explicit(&t->w.tag, memory_order_relaxed);

        /* A one-shot run its target took back: the user's task goes to
         * on_pending in its place (unless cancel stopped it); a periodic
         * timer ends. */
        if (settle_into(s, t, &acc) == ST_QUEUED && !(v & F_PERIODIC))
            serex__hand_back(fn, targ, on_pending, ctx);
        t = next;
    }
    settle_flush(s, &acc);
    run_out(s);
}

static void free_scheduler(struct serex_scheduler *s);

static void run_out(struct serex_scheduler *s)
{
    if (serex__life_release(&s->life)) /* the last one out, detached */
        free_scheduler(s);
}

/* @t's run (QUEUED), in a batch its target refused with @rc: what a lone
 * run refused met. */
static void run_refused(struct serex_scheduler *s, struct serex_timer *t,
                        int rc)
{
    serex_fn fn = t->fn;
    void *arg = t->arg;
    /* relaxed: our own flags, immutable */
    uint64_t v = atomic_load_explicit(&t->w.tag, memory_order_relaxed);

    /* A periodic timer whose target was full goes on, this run missed
     * (SEREX_REFUSED_MISS); a target shut down never takes a run again. */
    if ((v & F_PERIODIC) && rc != SEREX_EREJECTED &&
        s->periodic_refused == SEREX_REFUSED_MISS && run_missed(s, t, v)) {
        /* relaxed: a statistic */
        atomic_fetch_add_explicit(&s->rejected, 1, memory_order_relaxed);
        return; /* on_rejected is not called: the timer still uses arg */
    }
    if (sched_settle(s, t) == ST_QUEUED) { /* refused, and not cancelled */
        /* relaxed: a statistic */
        atomic_fetch_add_explicit(&s->rejected, 1, memory_order_relaxed);
        if (s->on_rejected != NULL)
            s->on_rejected(fn, arg, s->on_rejected_ctx);
    }
}

/*
 * Queues the batch that begins at @t on @target as one task (@yield: a
 * batch passed on by a running one, serex__op_yield), with a hold on the
 * scheduler for it: the batch holds the scheduler until it ends
 * (run_out), so destroy waits for it, or, if it can never come, detaches
 * and leaves it the free. The caller holds it meanwhile (the timer thread,
 * which destroy joins first; an advance, which destroy must not race; or
 * the running batch), so a refusal's release is never the last. Returns
 * the target's status; on a refusal the batch is still the caller's.
 */
static int batch_submit(struct serex_scheduler *s, serex_executor *target,
                        struct serex_timer *t, bool yield)
{
    bool last;
    int rc;

    serex__life_hold(&s->life);
    t->op.cls = &timer_run_class; /* out of the wheel: `next` is free */
    rc = yield ? serex__op_yield(target, &t->op)
               : serex__op_submit(target, &t->op);
    if (rc == SEREX_OK)
        return rc; /* the batch is the target's: t may be gone already */
    last = serex__life_release(&s->life);
    SEREX_ASSERT(!last); /* not detached: see above */
    (void)last;
    return rc;
}

/* Hands the batch that begins at @t (each run QUEUED) to @target as one
 * task, or runs it here (target NULL). */
static void batch_dispatch(struct serex_scheduler *s, serex_executor *target,
                           struct serex_timer *t)
{
    int rc;

    if (target == NULL) {
        struct settle_acc acc = SETTLE_ACC_INIT;

        batch_run(s, t, &acc);
        settle_flush(s, &acc);
        return;
    }
    rc = batch_submit(s, target, t, false);
    if (rc == SEREX_OK)
        return;
    while (t != NULL) { /* still ours: each run refused, in order */
        struct serex_timer *next = batch_take_next(t);

        run_refused(s, t, rc);
        t = next;
    }
}

/*
 * The batches of one fire being put together (see the essay): up to
 * BATCH_TARGETS targets in the order their first run came due, found by a
 * hash of their address (BATCH_HASH slots, each 0 or a batch's index + 1)
 * or, first, as the target of the run before. On the firing thread's
 * stack (about 1.7 KiB): no allocation.
 */
#define BATCH_TARGETS 64u
#define BATCH_HASH_BITS 7u
#define BATCH_HASH (1u << BATCH_HASH_BITS) /* at least twice BATCH_TARGETS */
_Static_assert(BATCH_HASH >= 2 * BATCH_TARGETS && BATCH_TARGETS < 256,
               "the hash stays at most half full; indexes fit a byte");

struct batch {
    serex_executor *target;
    struct serex_timer *head, *tail;
};

struct batcher {
    unsigned n;      /* batches in b */
    unsigned recent; /* the batch the last run went to (if n > 0) */
    uint8_t slot[BATCH_HASH];
    struct batch b[BATCH_TARGETS];
};

static void batcher_reset(struct batcher *bt)
{
    bt->n = 0;
    bt->recent = 0;
    memset(bt->slot, 0, sizeof bt->slot);
}

static unsigned batch_hash(const serex_executor *target)
{
    /* Fibonacci hashing of the address: the top bits of the product */
    uint64_t h = (uint64_t)(uintptr_t)target * UINT64_C(0x9e3779b97f4a7c15);

    return (unsigned)(h >> (64u - BATCH_HASH_BITS));
}

/* Appends @t to its target's batch; false if that needs a new batch and
 * the table is full (then @t is a batch of one: its link is cleared). */
static bool batch_add(struct batcher *bt, struct serex_timer *t)
{
    serex_executor *target = t->target;
    struct batch *b;
    unsigned i;

    t->batch_next = NULL;
    if (bt->n > 0 && bt->b[bt->recent].target == target) {
        b = &bt->b[bt->recent];
    } else {
        for (i = batch_hash(target);; i = (i + 1) & (BATCH_HASH - 1)) {
            unsigned k = bt->slot[i];

            if (k == 0) { /* not there: a new batch */
                if (bt->n == BATCH_TARGETS)
                    return false;
                bt->slot[i] = (uint8_t)(bt->n + 1);
                bt->recent = bt->n++;
                b = &bt->b[bt->recent];
                b->target = target;
                b->head = b->tail = t;
                return true;
            }
            if (bt->b[k - 1].target == target)
                break;
        }
        bt->recent = bt->slot[i] - 1u;
        b = &bt->b[bt->recent];
    }
    b->tail->batch_next = t;
    b->tail = t;
    return true;
}

/* Hands out every batch in @bt, in order. */
static void batches_flush(struct serex_scheduler *s, struct batcher *bt)
{
    for (unsigned i = 0; i < bt->n; i++)
        batch_dispatch(s, bt->b[i].target, bt->b[i].head);
}

/* Marks a list that came out of a wheel QUEUED (under its shard lock). */
static void mark_queued(struct serex__wtimer *l)
{
    for (struct serex__wtimer *w = l; w != NULL; w = w->next)
        /* relaxed: PENDING -> QUEUED under the lock (the state was 0, so
         * the add changes nothing else); the run reads it through the
         * target's queue */
        atomic_fetch_add_explicit(&w->tag, ST_QUEUED - ST_PENDING,
                                  memory_order_relaxed);
}

/* Advances every shard to @now and returns what came due, in order, each
 * made QUEUED under its shard lock. */
static struct serex__wtimer *sched_collect(struct serex_scheduler *s,
                                           int64_t now)
{
    struct serex__wtimer *due = NULL;

    for (unsigned i = 0; i < s->nshards; i++) {
        struct sched_shard *sh = &s->shards[i];
        struct serex__wtimer *l;

        serex__spin_lock(&sh->lock);
        l = serex__wheel_advance(&sh->wheel, now);
        mark_queued(l);
        serex__spin_unlock(&sh->lock);
        due = serex__wtimer_merge(due, l);
    }
    return due;
}

/*
 * Hands out every timer due at @now, a batch per target; returns how
 * many timers. The first BATCH_TARGETS distinct targets of the fire get
 * a batch each, handed out once every run is in its batch; a run on a
 * target beyond them is handed out alone at once, as every run was before
 * batches (such a target is never in the table during this fire, so its
 * runs still go in due order).
 */
static size_t sched_fire(struct serex_scheduler *s, int64_t now)
{
    struct serex__wtimer *w = sched_collect(s, now), *next;
    struct batcher bt;
    size_t n = 0;

    if (w == NULL)
        return 0;
    batcher_reset(&bt);
    for (; w != NULL; w = next, n++) {
        struct serex_timer *t = serex__container_of(w, struct serex_timer, w);

        next = w->next;         /* before batch_add reuses the links */
        if (!batch_add(&bt, t)) /* a new target, and the table full */
            batch_dispatch(s, t->target, t); /* a batch of one */
    }
    batches_flush(s, &bt);
    return n;
}

/* The earliest key to advance to; *@any: a timer is in some wheel (the
 * key alone cannot say: INT64_MAX is also a due time). */
static int64_t sched_earliest(struct serex_scheduler *s, bool *any)
{
    int64_t m = INT64_MAX;

    *any = false;
    for (unsigned i = 0; i < s->nshards; i++) {
        struct sched_shard *sh = &s->shards[i];
        int64_t k;

        serex__spin_lock(&sh->lock);
        k = serex__wheel_next(&sh->wheel);
        *any |= sh->wheel.count > 0;
        serex__spin_unlock(&sh->lock);
        if (k < m)
            m = k;
    }
    return m;
}

/* Sleeps until @next on the scheduler's clock, or a ring. */
static void sleep_until(struct serex_scheduler *s, uint32_t seen, int64_t next)
{
    int64_t now = sched_now(s), deadline;

    if (next <= now)
        return;
    if (s->clock == NULL) {
        deadline = next; /* the same clock */
    } else {
        int64_t left = next - now;

        if (left > CUSTOM_CLOCK_MAX_SLEEP_NS)
            left = CUSTOM_CLOCK_MAX_SLEEP_NS;
        deadline = serex__now_ns() + left;
    }
    serex__park_wait(&s->bell, seen, next == INT64_MAX ? INT64_MAX : deadline);
}

int64_t serex__coalesce_adapt(int64_t window, size_t n, int64_t max)
{
    int64_t w;

    if (n < SEREX__COALESCE_BATCH) /* no load: halve, then shut */
        return window / 2 < SEREX__COALESCE_MIN_NS ? 0 : window / 2;
    w = window == 0 ? SEREX__COALESCE_MIN_NS : 2 * window;
    return w > max ? max : w; /* max 0 (off): always shut */
}

int64_t serex__coalesce_deadline(int64_t next, int64_t now, int64_t window)
{
    int64_t end = sat_add(now, window);

    if (window == 0 || next == INT64_MAX || next <= now || next >= end)
        return next; /* shut, nothing due, due already, or beyond */
    /* after next, by less than the window */
    return end;
}

int64_t serex__coalesce_ring_below(int64_t next, int64_t now, int64_t deadline,
                                   int64_t window)
{
    if (deadline != next) /* the window's end: a timer due after now
                             runs by then, within the window */
        return now;
    /* the timer at next: one due less than a window before it waits */
    return next < INT64_MIN + window ? INT64_MIN : next - window;
}

int64_t serex__scheduler_window(serex_scheduler *s, bool peak)
{
    /* relaxed: a snapshot for tests */
    return atomic_load_explicit(peak ? &s->window_peak : &s->window,
                                memory_order_relaxed);
}

static int timer_thread(void *arg)
{
    struct serex_scheduler *s = arg;
    struct serex__frame frame;
    int64_t window = 0; /* the coalescing window: ours alone */

    serex__thread_set_name("serex-timer");
    serex__thread_precise_timers();
    serex__frame_push(&frame, &s->face);
    for (;;) {
        uint32_t seen;
        int64_t now = sched_now(s), next, deadline, ring_below;
        bool any;

        window = serex__coalesce_adapt(window, sched_fire(s, now),
                                       s->coalesce_max);
        /* relaxed (both): only shown to tests (serex__scheduler_window);
         * the peak has one writer, us */
        atomic_store_explicit(&s->window, window, memory_order_relaxed);
        if (window >
            atomic_load_explicit(&s->window_peak, memory_order_relaxed))
            atomic_store_explicit(&s->window_peak, window,
                                  memory_order_relaxed);
        /* acquire: pairs with ring; read before we look at the wheels */
        seen = atomic_load_explicit(&s->bell, memory_order_acquire);
        next = sched_earliest(s, &any);
        if (!any &&
            (atomic_load_explicit(&s->flags, memory_order_acquire) & SHUT))
            break; /* shut down, and nothing left to fire */
        deadline = serex__coalesce_deadline(next, now, window);
        ring_below = serex__coalesce_ring_below(next, now, deadline, window);
        /* seq_cst: see the essay (the second look below) */
        atomic_store_explicit(&s->wake_at, ring_below, memory_order_seq_cst);
        if (sched_earliest(s, &any) >= ring_below)
            sleep_until(s, seen, deadline);
        atomic_store_explicit(&s->wake_at, INT64_MIN, memory_order_seq_cst);
    }
    serex__frame_pop(&frame);
    return 0;
}

/* --- manual mode --- */

int serex_scheduler_advance(serex_scheduler *s, int64_t delta_ns)
{
    int64_t target, now, next;
    bool any;

    if (s == NULL || delta_ns < 0 || !s->manual)
        return SEREX_EINVAL;
    if (serex__forked_since(s->gen))
        return SEREX_EREJECTED;
    serex__mutex_lock(&s->advance_lock);
    now = atomic_load_explicit(&s->manual_now, memory_order_relaxed);
    target = sat_add(now, delta_ns);
    /* one due time at a time, the clock set to it: what a run schedules
     * for before @target fires in this advance too */
    while ((next = sched_earliest(s, &any)) <= target && any) {
        if (next > now) {
            now = next;
            /* release: pairs with sched_now's acquire */
            atomic_store_explicit(&s->manual_now, now, memory_order_release);
        }
        sched_fire(s, now);
    }
    /* release: as above (what ran before the new time is seen with it) */
    atomic_store_explicit(&s->manual_now, target, memory_order_release);
    serex__mutex_unlock(&s->advance_lock);
    return SEREX_OK;
}

/* Runs each manual executor until all are empty; how many tasks ran. */
static size_t run_all_manual(serex_executor *const *exs, size_t n)
{
    size_t total = 0, ran;

    do {
        ran = 0;
        for (size_t i = 0; i < n; i++)
            ran += serex_manual_run_pending(exs[i]);
        total += ran;
    } while (ran > 0);
    return total;
}

int serex_scheduler_run_until(serex_scheduler *s, serex_executor *const *exs,
                              size_t n, int64_t deadline)
{
    bool any;

    if (s == NULL || !s->manual || (n > 0 && exs == NULL))
        return SEREX_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (exs[i] == NULL)
            return SEREX_EINVAL;
    if (deadline < serex_scheduler_now(s))
        return SEREX_EINVAL; /* time never moves back */
    for (;;) {
        int64_t now, next;
        int rc;

        run_all_manual(exs, n); /* at this time, to quiescence */
        now = serex_scheduler_now(s);
        next = sched_earliest(s, &any);
        if (!any || next > deadline)
            break;
        /* the wheel's bound may be a slot's start, before any due time:
         * advance then fires nothing, and the next look is exact */
        rc = serex_scheduler_advance(s, next > now ? next - now : 0);
        if (rc != SEREX_OK)
            return rc;
    }
    return serex_scheduler_advance(s, deadline - serex_scheduler_now(s));
}

int64_t serex_scheduler_now(serex_scheduler *s)
{
    return s == NULL ? 0 : sched_now(s);
}

size_t serex_scheduler_pending(serex_scheduler *s)
{
    return s == NULL ? 0 : total_active(s);
}

uint64_t serex_scheduler_rejected(serex_scheduler *s)
{
    /* relaxed: a statistic */
    return s == NULL ? 0
                     : atomic_load_explicit(&s->rejected, memory_order_relaxed);
}

/* --- the executor face: life cycle --- */

static int face_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    return schedule(sched_of_face(ex), NULL, 0, 0, 0, fn, arg, NULL);
}

/* Sets SHUT (and passes every shard lock); true if it was not set. */
static bool set_shut(struct serex_scheduler *s)
{
    /* seq_cst: a change awaiters look for (see wake_awaiters) */
    uint32_t old = atomic_fetch_or_explicit(&s->flags, SHUT,
                                            memory_order_seq_cst);

    return !(old & SHUT);
}

/* Frees @list, dead records of @sh with hooks, linked through their
 * first word: the hooks off, then the records back under the lock. */
static void shard_free_hooked(struct sched_shard *sh, void *list,
                              struct slab **grave)
{
    unhook_list(list);
    serex__spin_lock(&sh->lock);
    while (list != NULL) {
        void *r = list;

        list = *(void **)r;
        rec_free(sh, r, grave);
    }
    serex__spin_unlock(&sh->lock);
}

/*
 * Takes every timer out of @sh's wheel: periodic ones are made DONE;
 * one-shots, if @take, are made STOPPED and returned sorted (the caller
 * hands them back and settles them), else filed again.
 */
static struct serex__wtimer *shard_sweep(struct sched_shard *sh, bool take)
{
    struct serex__wtimer *all, *next, *keep = NULL;
    struct slab *grave = NULL;
    void *hooked = NULL; /* ours to free, once their hooks are off */
    size_t done = 0;

    serex__spin_lock(&sh->lock);
    all = serex__wheel_take_all(&sh->wheel);
    for (struct serex__wtimer *w = all; w != NULL; w = next) {
        struct serex_timer *t = serex__container_of(w, struct serex_timer, w);
        /* relaxed: PENDING changes only under this lock; acq_rel on the
         * CAS below for HANDLE, as in settle */
        uint64_t v = atomic_load_explicit(&w->tag, memory_order_relaxed);
        uint64_t to = (v & F_PERIODIC) ? ST_DONE
                      : take           ? ST_STOPPED
                                       : ST_PENDING;

        next = w->next;
        if (to == ST_PENDING) {
            serex__wheel_add(&sh->wheel, w, w->key);
            continue;
        }
        while (!atomic_compare_exchange_weak_explicit(
            &w->tag, &v, (v & ~ST_MASK) | to, memory_order_acq_rel,
            memory_order_relaxed))
            ;
        if (to == ST_STOPPED) {
            w->next = keep;
            keep = w;
            continue;
        }
        done++;
        if (v & F_HANDLE)
            continue;
        if (v & F_TOKEN) { /* its hook first, with no lock held */
            *(void **)t = hooked;
            hooked = t;
            continue;
        }
        rec_free(sh, t, &grave);
    }
    if (done > 0) /* SHUT is set: the caller announces */
        count_done(sh->s, sh, done);
    serex__spin_unlock(&sh->lock);
    if (hooked != NULL)
        shard_free_hooked(sh, hooked, &grave);
    slabs_free(grave);
    return serex__wtimer_sort(keep);
}

/* Takes every pending one-shot out (in due order), passes each task to
 * @on_pending (serex__hand_back: NULL drops it) and ends the timer. */
static size_t take_pending(struct serex_scheduler *s,
                           serex_pending_fn on_pending, void *ctx)
{
    struct serex__wtimer *taken = NULL, *next;
    size_t n = 0;

    for (unsigned i = 0; i < s->nshards; i++)
        taken = serex__wtimer_merge(taken, shard_sweep(&s->shards[i], true));
    for (struct serex__wtimer *w = taken; w != NULL; w = next) {
        struct serex_timer *t = serex__container_of(w, struct serex_timer, w);

        next = w->next;
        serex__hand_back(t->fn, t->arg, on_pending, ctx);
        sched_settle(s, t);
        n++;
    }
    return n;
}

static void face_shutdown(serex_executor *ex)
{
    struct serex_scheduler *s = sched_of_face(ex);

    if (serex__forked_since(s->gen) || !set_shut(s))
        return;
    switch (s->on_shutdown) {
    case SEREX_PENDING_HAND_BACK:
        take_pending(s, s->on_rejected, s->on_rejected_ctx);
        break;
    case SEREX_PENDING_DROP:
        take_pending(s, NULL, NULL);
        break;
    default: /* SEREX_PENDING_FIRE: they fire when due */
        for (unsigned i = 0; i < s->nshards; i++)
            shard_sweep(&s->shards[i], false);
        break;
    }
    sched_ring(s);
    sched_announce(s);
}

static size_t face_shutdown_now(serex_executor *ex, serex_pending_fn on_pending,
                                void *ctx)
{
    struct serex_scheduler *s = sched_of_face(ex);
    size_t n;

    if (serex__forked_since(s->gen))
        return 0; /* a child: locks may be held by threads not here */
    set_shut(s);
    n = take_pending(s, on_pending, ctx);
    sched_ring(s);
    sched_announce(s);
    return n;
}

/* schedule checks SHUT under its shard lock, so nothing is ever in
 * flight: done or not. */
static enum serex__await_state sched_state(void *obj)
{
    struct serex_scheduler *s = obj;

    /* acquire: SHUT and the counts, with what the timers wrote */
    return (atomic_load_explicit(&s->flags, memory_order_acquire) & SHUT) &&
                   total_active(s) == 0
               ? SEREX__AWAIT_DONE
               : SEREX__AWAIT_NOT;
}

static int face_await(serex_executor *ex, int64_t timeout_ns)
{
    struct serex_scheduler *s = sched_of_face(ex);

    if (serex__forked_since(s->gen))
        return SEREX_OK; /* a child: nothing of ours will ever run here */
    return serex__life_await(&s->life, sched_state, s, timeout_ns);
}

/*
 * Takes the hooks off the records left in @sl (handles never released,
 * which end with the scheduler), if it is a slab of a token class; true
 * if it may be freed. In a forked child a token's lock may be held by a
 * thread that is not there: a slab with a hook still on is left (leaked)
 * rather than freed under a token that points into it.
 */
static bool slab_unhook_rest(struct slab *sl, bool child)
{
    size_t size = rec_size[sl->cls];

    if (sl->cls != CLS_ONESHOT_TOK && sl->cls != CLS_PERIODIC_TOK)
        return true;
    for (char *r = (char *)sl + SLAB_HEADER; r + size <= sl->bump; r += size) {
        struct serex_timer *t = (struct serex_timer *)(void *)r;
        /* relaxed: the last holder frees; every run and release is over */
        uint64_t v = atomic_load_explicit(&t->w.tag, memory_order_relaxed);

        if (tag_state(v) == ST_FREED)
            continue;
        if (child)
            return false;
        timer_unhook(t, v);
    }
    return true;
}

static void free_scheduler(struct serex_scheduler *s)
{
    bool child = serex__forked_since(s->gen);

    for (unsigned i = 0; i < s->nshards; i++) {
        struct sched_shard *sh = &s->shards[i];

        struct slab *sl, *nx;

        SEREX_ASSERT(sh->notify == NULL || child); /* no run in progress */
        /* what is left: free records, and handles never released (they
         * end with the scheduler) */
        for (sl = sh->all; sl != NULL; sl = nx) {
            nx = sl->all_next;
            if (slab_unhook_rest(sl, child))
                serex__free(sl);
        }
        serex__wheel_fini(&sh->wheel);
    }
    serex__free(s->shards);
    if (s->manual)
        serex__mutex_destroy(&s->advance_lock);
    /* relaxed: the scheduler is being freed; no run records any more */
    serex__metrics_free(
        atomic_load_explicit(&s->metrics, memory_order_relaxed));
    serex__free(s);
}

/*
 * A target of @sh's runs still out (handed to a target and not done:
 * queued, running, or stopped and still to be skipped) that is not one
 * of @known, or NULL. The records are read under the lock (a record is
 * freed only under it); the target is asked about after unlocking. The
 * target itself is alive: the user keeps it so while timers fire onto
 * it, and its destroy would have dropped the run (which ends the timer).
 */
static serex_executor *shard_run_target(struct sched_shard *sh,
                                        serex_executor *const *known,
                                        unsigned n)
{
    serex_executor *found = NULL;

    serex__spin_lock(&sh->lock);
    for (struct slab *sl = sh->all; sl != NULL && found == NULL;
         sl = sl->all_next) {
        for (char *r = (char *)sl + SLAB_HEADER;
             r + rec_size[sl->cls] <= sl->bump && found == NULL;
             r += rec_size[sl->cls]) {
            struct serex_timer *t = (struct serex_timer *)(void *)r;
            /* relaxed: states change to DONE only under this lock */
            uint64_t st = tag_state(
                atomic_load_explicit(&t->w.tag, memory_order_relaxed));
            unsigned i = 0;

            if (st != ST_QUEUED && st != ST_RUNNING && st != ST_STOPPED &&
                st != ST_STOPPING)
                continue; /* pending (none: the wheels are empty), done */
            while (i < n && known[i] != t->target)
                i++;
            if (i == n)
                found = t->target;
        }
    }
    serex__spin_unlock(&sh->lock);
    return found;
}

/*
 * Whether no run still out can come: each is on a target that has
 * terminated without running it or handing it back (a user's executor
 * that breaks its contract; serex's own run or drop every task they
 * accepted). A run its target refused or dropped has ended its timer
 * already, so it is not out. A target is asked once
 * (serex_await_termination, 0); past STRANDED_MAX terminated targets with
 * a run each, it cannot tell: not stranded, look again later.
 */
static bool runs_stranded(struct serex_scheduler *s)
{
    serex_executor *dead[STRANDED_MAX];
    unsigned n = 0;

    for (;;) {
        serex_executor *t = NULL;

        for (unsigned i = 0; i < s->nshards && t == NULL; i++)
            t = shard_run_target(&s->shards[i], dead, n);
        if (t == NULL)
            return true; /* every run out is on a terminated target */
        if (n == STRANDED_MAX || serex_await_termination(t, 0) != SEREX_OK)
            return false; /* it can still come */
        dead[n++] = t;
    }
}

static void face_destroy(serex_executor *ex)
{
    struct serex_scheduler *s = sched_of_face(ex);

    if (serex__forked_since(s->gen)) { /* a child: memory only */
        s->manual = false; /* its mutex may be held: leave it be */
        free_scheduler(s);
        return;
    }
    if (s->has_thread) {
        sched_ring(s);
        serex__thread_join(s->thread); /* every pending one-shot came due */
    } else {
        face_shutdown_now(ex, NULL, NULL); /* time stands still: drop */
    }
    /* Wait for the runs handed to targets, as await_termination does (a
     * caller may free what the tasks use once destroy returns), in slices:
     * a run that can never come (runs_stranded) is not waited for. The
     * pattern of serex__wrapper_settle. */
    while (face_await(ex, SEREX__AWAIT_POLL_NS * 10) != SEREX_OK)
        if (runs_stranded(s))
            break;
    /* A run may still be between its last use of a timer and run_out, or
     * (stranded) come later: the last one out frees. */
    if (serex__life_detach(&s->life))
        free_scheduler(s);
}

static const struct serex__op_class timer_run_class = {
    "timer run", timer_run, timer_run_dropped,
};

static void sched_stats(serex_executor *ex, serex_stats *out);

/* serex_dump: its timers and its clock. */
static void sched_describe(serex_executor *ex, struct serex__dump *d)
{
    struct serex_scheduler *s = sched_of_face(ex);
    serex_stats st;

    memset(&st, 0, sizeof st);
    sched_stats(ex, &st);
    serex__dump_u64(d, "pending_timers", st.pending_timers);
    serex__dump_bool(d, "manual", s->manual);
    serex__dump_i64(d, "now_ns", sched_now(s));
}

/* Stripes: a scheduler's runs start on many threads at once. */
static int sched_metrics_enable(serex_executor *ex,
                                const serex_metrics_config *cfg)
{
    return serex__metrics_enable(&sched_of_face(ex)->metrics, cfg,
                                 SEREX__METRICS_STRIPES);
}

static void sched_metrics(serex_executor *ex, serex_metrics *out)
{
    serex_stats st;

    serex__metrics_read_slot(&sched_of_face(ex)->metrics, out);
    memset(&st, 0, sizeof st);
    sched_stats(ex, &st);
    out->queue_length = st.pending_timers; /* its queue: timers pending */
}

static void sched_stats(serex_executor *ex, serex_stats *out)
{
    struct serex_scheduler *s = sched_of_face(ex);

    for (unsigned i = 0; i < s->nshards; i++) {
        struct sched_shard *sh = &s->shards[i];

        serex__spin_lock(&sh->lock);
        out->submitted += sh->scheduled;
        out->completed += sh->done;
        serex__spin_unlock(&sh->lock);
    }
    out->pending_timers = total_active(s);
    /* relaxed: a statistic */
    out->rejected = atomic_load_explicit(&s->rejected, memory_order_relaxed);
}

/*
 * Schedulers whose timers this thread is looking through (sched_waits_on),
 * innermost first: a cycle of schedulers aimed at each other's faces ends
 * at the second visit instead of recursing for ever.
 */
struct sched_visit {
    const struct serex_scheduler *s;
    struct sched_visit *prev;
};
static SEREX__THREAD_LOCAL struct sched_visit *visiting;

#define FACES_MAX 8u /* other schedulers' faces among one shard's targets */

/*
 * Whether @blocks says yes to a target of one of @sh's timers that are not
 * done (in the wheel, queued or running: each will run on its target, or
 * has to finish there, before the scheduler terminates). Called with
 * nothing locked. The records are read under the shard lock (a record is
 * freed only under it); @blocks is called under it too, except for targets
 * that are schedulers' faces, which take shard locks of their own: those
 * are collected and asked after unlocking, so no two shard locks are ever
 * held at once. More than FACES_MAX of them: answer yes (cannot tell).
 */
static bool shard_waits_on(struct sched_shard *sh,
                           bool (*blocks)(serex_executor *))
{
    serex_executor *faces[FACES_MAX], *last = NULL;
    unsigned nfaces = 0;
    bool yes = false;

    serex__spin_lock(&sh->lock);
    for (struct slab *sl = sh->all; sl != NULL && !yes; sl = sl->all_next) {
        for (char *r = (char *)sl + SLAB_HEADER;
             r + rec_size[sl->cls] <= sl->bump && !yes;
             r += rec_size[sl->cls]) {
            struct serex_timer *t = (struct serex_timer *)(void *)r;
            /* relaxed: records leave the wheel and are freed only under
             * the lock we hold; a QUEUED or RUNNING one may end meanwhile,
             * and counting it is what a caller a moment earlier would get */
            uint64_t st = tag_state(
                atomic_load_explicit(&t->w.tag, memory_order_relaxed));

            if (st == ST_DONE || st == ST_FREED || t->target == NULL ||
                t->target == last)
                continue;
            last = t->target;
            if (serex__class_of(last) != &sched_class)
                yes = blocks(last);
            else if (nfaces == FACES_MAX)
                yes = true;
            else
                faces[nfaces++] = last;
        }
    }
    serex__spin_unlock(&sh->lock);
    for (unsigned i = 0; i < nfaces && !yes; i++)
        yes = blocks(faces[i]);
    return yes;
}

/* A scheduler waits on every executor a timer of it not done yet runs on
 * (promise 7): a task of one of them awaiting it may hold up that run. */
static bool sched_waits_on(serex_executor *ex, bool (*blocks)(serex_executor *))
{
    struct serex_scheduler *s = sched_of_face(ex);
    struct sched_visit me = {s, visiting};
    bool yes = false;

    for (struct sched_visit *v = visiting; v != NULL; v = v->prev)
        if (v->s == s)
            return false; /* asked already, further up */
    visiting = &me;
    for (unsigned i = 0; i < s->nshards && !yes; i++)
        yes = shard_waits_on(&s->shards[i], blocks);
    visiting = me.prev;
    return yes;
}

static const struct serex__exec_class sched_class = {
    SEREX__CLASS_OPS(face_execute, face_shutdown, face_shutdown_now,
                     face_await),
    "scheduler",
    sched_stats,
    sched_waits_on,
    face_destroy,
    sched_metrics_enable,
    sched_metrics,
    SEREX__CLASS_REG(struct serex_scheduler, face, reg, "scheduler",
                     sched_describe),
};

serex_executor *serex_scheduler_executor(serex_scheduler *s)
{
    return s == NULL ? NULL : &s->face;
}

/* --- creation --- */

static unsigned shard_count(bool manual)
{
    unsigned n = 1, cpus = serex__cpu_count();

    if (manual) /* one shard: ties fire in the exact order scheduled */
        return 1;
    while (n < cpus && n < MAX_SHARDS)
        n *= 2;
    return n;
}

static int init_shards(struct serex_scheduler *s, unsigned size,
                       int64_t tick_ns, int64_t origin)
{
    s->shards = serex__calloc_aligned(SEREX__CACHELINE,
                                      s->nshards * sizeof *s->shards);
    if (s->shards == NULL)
        return SEREX_ENOMEM;
    for (unsigned i = 0; i < s->nshards; i++) {
        int rc = serex__wheel_init(&s->shards[i].wheel, size, tick_ns, origin);

        s->shards[i].s = s;
        if (rc != SEREX_OK) {
            while (i-- > 0)
                serex__wheel_fini(&s->shards[i].wheel);
            serex__free(s->shards);
            return rc;
        }
    }
    return SEREX_OK;
}

static int sched_start(struct serex_scheduler *s,
                       const struct serex__thread_opts *opts)
{
    if (s->manual)
        return serex__mutex_init(&s->advance_lock);
    s->has_thread = true;
    /* the hooks run on the timer thread, around timer_thread; with a start
     * hook this waits for it (a refusal joins the thread: EREJECTED) */
    return serex__thread_start_opts(&s->thread, timer_thread, s, opts);
}

int serex_scheduler_create(const serex_scheduler_config *cfg,
                           serex_scheduler **out)
{
    serex_scheduler_config c = {0};
    struct serex__thread_opts opts = {0};
    struct serex_scheduler *s;
    int rc;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    if (cfg != NULL)
        c = *cfg;
    if (c.tick_ns < 0 || (unsigned)c.on_shutdown > SEREX_PENDING_DROP ||
        (unsigned)c.periodic_refused > SEREX_REFUSED_END ||
        c.coalesce_ns > SEREX__COALESCE_LIMIT_NS ||
        (c.on_shutdown == SEREX_PENDING_HAND_BACK && c.on_rejected == NULL))
        return SEREX_EINVAL;
    opts = (struct serex__thread_opts){c.stack_size, c.on_thread_start,
                                       c.on_thread_stop, c.hook_ctx, 0};
    if (!c.manual && serex__thread_opts_check(&opts) != SEREX_OK)
        return SEREX_EINVAL; /* a stack size the back end cannot set */
    if (c.tick_ns == 0)
        c.tick_ns = DEFAULT_TICK_NS;
    if (c.wheel_size == 0)
        c.wheel_size = DEFAULT_WHEEL; /* serex__wheel_init checks it */
    s = serex__calloc_aligned(SEREX__CACHELINE, sizeof *s);
    if (s == NULL)
        return SEREX_ENOMEM;
    s->face.ops = &sched_class.ops;
    s->gen = serex__fork_register();
    s->clock = c.clock;
    s->clock_ctx = c.clock_ctx;
    s->manual = c.manual;
    s->max_timers = c.max_timers;
    s->periodic_refused = c.periodic_refused;
    s->on_rejected = c.on_rejected;
    s->on_rejected_ctx = c.on_rejected_ctx;
    s->on_shutdown = c.on_shutdown;
    s->coalesce_max = c.coalesce_ns < 0    ? 0
                      : c.coalesce_ns == 0 ? SEREX__COALESCE_DEFAULT_NS
                                           : c.coalesce_ns;
    s->nshards = shard_count(c.manual);
    atomic_init(&s->wake_at, INT64_MIN);
    rc = init_shards(s, c.wheel_size, c.tick_ns,
                     c.manual ? 0 : sched_now(s));
    if (rc == SEREX_OK && (rc = sched_start(s, &opts)) != SEREX_OK) {
        for (unsigned i = 0; i < s->nshards; i++)
            serex__wheel_fini(&s->shards[i].wheel);
        serex__free(s->shards);
    }
    if (rc != SEREX_OK) {
        serex__free(s);
        return rc;
    }
    serex__exec_register(&s->face, NULL); /* serex_dump lists it */
    *out = s;
    return SEREX_OK;
}

/* --- for the autoclock (autoclock.c) --- */

int serex__scheduler_next_due(serex_scheduler *s, int64_t *next, bool *any)
{
    if (s == NULL || !s->manual)
        return SEREX_EINVAL;
    *next = sched_earliest(s, any);
    return SEREX_OK;
}
