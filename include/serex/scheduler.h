/* SPDX-License-Identifier: MIT */
/*
 * serex/scheduler.h - the delayed scheduler: one timer thread (a tickless
 * hierarchical timing wheel) firing one-shot, fixed-rate and fixed-delay
 * timers onto any executor.
 */
#ifndef SEREX_SCHEDULER_H
#define SEREX_SCHEDULER_H

#include "cancel.h"   /* serex_cancel: timers that obey a token */
#include "executor.h" /* serex_executor, serex_fn, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

/* A clock: monotonic nanoseconds. */
typedef int64_t (*serex_clock_fn)(void *ctx);

/* What shutdown does with one-shot timers still pending (config
 * on_shutdown). shutdown_now always hands them back to its on_pending. */
typedef enum serex_pending_policy {
    /* They fire when due; destroy waits for them (the default). */
    SEREX_PENDING_FIRE = 0,
    /* They never run: each task goes to cfg->on_rejected (required), in
     * due order, on the thread that calls shutdown, so @arg can be
     * freed; destroy does not wait. */
    SEREX_PENDING_HAND_BACK = 1,
    /* They never run and nothing is called: for tasks that own nothing
     * (a time-out that only sets a flag); destroy does not wait. */
    SEREX_PENDING_DROP = 2
} serex_pending_policy;

/* What a periodic timer does when its target refuses a due run for want
 * of room: full (SEREX_EFULL: a bounded pool, serial or striped) or out of
 * memory (config periodic_refused). A target that is shut down
 * (SEREX_EREJECTED) never takes a run again: that ends the timer always,
 * its task passed to cfg->on_rejected. */
typedef enum serex_refused_policy {
    /* The run is missed and the timer goes on to its next due time, as
     * after a run that started and ended at once (libdispatch's timer
     * sources and Tokio's intervals keep ticking too). The miss is
     * counted in serex_scheduler_rejected and in the next run's
     * serex_timer_overrun; on_rejected is not called (the timer still
     * uses @arg). The default. */
    SEREX_REFUSED_MISS = 0,
    /* The timer ends there, as a one-shot whose run was refused: its task
     * goes to cfg->on_rejected. */
    SEREX_REFUSED_END = 1
} serex_refused_policy;

/* Scheduler configuration; zero-initialise it (or pass NULL) for defaults. */
typedef struct serex_scheduler_config {
    int64_t tick_ns;     /* the wheel's slot width; 0: 1 ms. Rounded down
                            to a power of two ns; timers still fire at their
                            exact due time, not at tick boundaries */
    unsigned wheel_size; /* slots per level, a power of two in [2, 65536];
                            0: 512 */
    serex_clock_fn clock; /* NULL: the monotonic clock */
    void *clock_ctx;
    bool manual;         /* no thread: time moves only by
                            serex_scheduler_advance */
    /* Additions (zero: off) */
    size_t max_timers;   /* cap on pending timers: SEREX_EFULL past it */
    /* Called, on the timer thread, with the task of a due run that its
     * target refused (the run is not made; see serex_schedule). */
    serex_pending_fn on_rejected;
    void *on_rejected_ctx;
    /* Pending one-shots at shutdown (above); 0: they fire when due. */
    serex_pending_policy on_shutdown;
    /* The timer thread's hooks, as the pool's (pool.h): on_thread_start
     * runs on the new thread before it looks at any timer (index 0;
     * non-zero makes create fail with SEREX_EREJECTED, nothing left
     * behind), on_thread_stop after its last run; with hook_ctx. Not
     * called in manual mode (no thread). */
    int (*on_thread_start)(void *ctx, unsigned index);
    void (*on_thread_stop)(void *ctx, unsigned index);
    void *hook_ctx;
    /* The timer thread's stack in bytes; 0: the platform's default.
     * SEREX_EINVAL with the C11 <threads.h> back end (see pool.h). */
    size_t stack_size;
    /*
     * Coalescing under load (since 0.2.0): how late, at most, a timer may
     * run so that one wake-up of the timer thread serves several. When a
     * wake-up hands out 4 timers or more, the thread opens a window of
     * 1 us, doubling at each such wake-up up to coalesce_ns and halving
     * at each smaller one until it shuts: while it is open, a timer due
     * within the window after a wake-up runs at the window's end, with the
     * others due by then. A timer still never runs early, and with little
     * load (fewer than 4 due at a time) every wake-up is at the earliest
     * due time. 0: 200 us (Linux lets a sleeping thread wake 50 us late by
     * default; a 1 ms wheel tick, 1 ms). Negative: never coalesce, every
     * wake-up at the earliest due time whatever the load. More than one
     * second: SEREX_EINVAL. Not used in manual mode (no thread).
     */
    int64_t coalesce_ns;
    /* A periodic timer's due run refused by a full target (since 0.2.0;
     * above): 0 (SEREX_REFUSED_MISS): missed, the timer goes on;
     * SEREX_REFUSED_END: the timer ends. */
    serex_refused_policy periodic_refused;
} serex_scheduler_config;

typedef struct serex_scheduler serex_scheduler;
typedef struct serex_timer serex_timer;

/*
 * serex_scheduler_create - make a scheduler and (unless cfg->manual) start
 * its timer thread, named "serex-timer".
 *
 * The thread sleeps until the earliest due time (no periodic tick) and is
 * woken early only when a new timer comes due sooner. A timer never fires
 * before its due time; under no load it fires within one tick after it,
 * and under load (many due at once) within cfg->coalesce_ns more (200 us
 * by default), as one wake-up serves them all.
 * With a custom clock the thread sleeps on the OS monotonic clock for what
 * the custom clock says is left, at most 100 ms at a time, and reads the
 * custom clock again on waking: a clock that runs slow or stops never
 * makes a timer early.
 * @cfg may be NULL. *@out is set on success, NULL on failure.
 * Returns:   SEREX_OK; SEREX_EINVAL (out NULL, tick_ns < 0, wheel_size not
 *            a power of two or too big, on_shutdown or periodic_refused
 *            not one of the policies, SEREX_PENDING_HAND_BACK without
 *            on_rejected, coalesce_ns over SEREX_SEC(1), or a stack_size
 *            the threads back end cannot set); SEREX_EREJECTED
 *            (on_thread_start refused); SEREX_ENOMEM.
 * Ownership: the caller owns the scheduler; end it with
 *            serex_destroy(serex_scheduler_executor(s)).
 * fork():    in a child, a scheduler made before the fork refuses new
 *            timers (SEREX_EREJECTED) and advance, and serex_destroy only
 *            frees its memory; do not cancel or release its handles there.
 *            New schedulers work.
 */
SEREX_API int serex_scheduler_create(const serex_scheduler_config *cfg,
                                     serex_scheduler **out);

/*
 * serex_scheduler_executor - the scheduler's executor face, for its life
 * cycle (shutdown, shutdown_now, await_termination, destroy) and for
 * execute, which runs a task on the timer thread as soon as possible (on
 * the next serex_scheduler_advance in manual mode).
 *
 * shutdown: new timers are refused (SEREX_EREJECTED); periodic timers are
 * cancelled (a run already handed to its target is skipped); one-shot
 * timers still fire when due, or, by cfg->on_shutdown, are handed to
 * on_rejected or dropped at once (a time-out service does not want its
 * destroy to wait for a 30 s time-out). shutdown_now: the same, and every pending
 * one-shot task is handed back, in due order, and counted (periodic ones
 * are cancelled, not handed back). await_termination: every timer is done
 * (ran, cancelled, handed back or rejected), runs on targets included.
 * destroy waits for pending one-shot timers to come due (call
 * shutdown_now first, or set cfg->on_shutdown, not to wait), then, as
 * await_termination does, for every run handed to a target to end, so
 * what the tasks use may be freed once it returns; then frees the
 * scheduler. A run its target takes back or drops (the target's
 * shutdown_now or destroy) ends its timer: nothing to wait for. Not
 * waited for either: a run that can never come, on a target that has
 * terminated without running it or handing it back (a user's executor
 * that breaks its contract); it keeps the memory it needs until it ends,
 * if ever. In manual mode, destroy drops the timers still pending, and
 * waits for runs queued on targets as above: run a manual executor that
 * holds some, or shut it down with shutdown_now (which ends their
 * timers), before destroying the scheduler on the thread that would run
 * it. Every serex_timer handle is invalid after destroy.
 * await_termination and destroy called from a
 * task of an executor that a timer of this scheduler, not finished yet
 * (due later, queued or running), is aimed at, directly or through a
 * serial or striped over it, say SEREX_EDEADLK (promise 7a,
 * docs/contract.md). @s NULL: NULL.
 */
SEREX_API serex_executor *serex_scheduler_executor(serex_scheduler *s);

/*
 * serex_schedule - run fn(arg) on @target once, @delay_ns from now.
 *
 * @target NULL runs the task on the timer thread (keep such tasks tiny: the
 * timer thread waits for them). Due runs are handed to their targets in
 * due-time order, ties in the order they were scheduled (from one thread;
 * ties between threads at the same nanosecond have no set order). If
 * @target refuses a due run (it is shut down, or full), the run is not
 * made and never runs elsewhere: the scheduler counts it
 * (serex_scheduler_rejected) and passes the task to cfg->on_rejected if
 * set, so the caller can free @arg. A periodic timer ends there too if
 * the target is shut down, or by cfg->periodic_refused; by default a run
 * refused by a full target is missed instead, and the timer goes on
 * (serex_refused_policy, above: on_rejected is not called then).
 * If @out is not NULL, *@out gets a handle for serex_timer_cancel, which
 * the caller must give back with serex_timer_release.
 * Due times saturate at INT64_MAX.
 * Returns:   SEREX_OK; SEREX_EINVAL (s or fn NULL, delay_ns < 0, target
 *            without ops); SEREX_EREJECTED after shutdown; SEREX_EFULL past
 *            cfg->max_timers; SEREX_ENOMEM. On error nothing is scheduled
 *            and *@out is NULL.
 * Threads:   any thread, any number at once. Producers on different
 *            threads take different locks (one wheel shard per thread,
 *            see scheduler.c); cost O(1).
 * Ownership: the scheduler never owns @target; keep it alive while timers
 *            may fire onto it.
 */
SEREX_API int serex_schedule(serex_scheduler *s, serex_executor *target,
                             int64_t delay_ns, serex_fn fn, void *arg,
                             serex_timer **out);

/*
 * serex_schedule_fixed_rate - run fn(arg) on @target at start + n * period
 * for n = 0, 1, ... where start is now + @initial_ns: no drift. A run is
 * never started while the previous one is still running. The next run is
 * timed when a run ends: if grid points have passed meanwhile (the system
 * stalled before the run started, or the run took longer than a period),
 * they are coalesced: one run happens at once for all of them, and the
 * one after is back on the grid (SEREX_MISSED_COALESCE; see
 * serex_schedule_fixed_rate_missed for the other policies). So a run that
 * always takes longer than the period runs back to back, never queued up
 * behind itself.
 * Ends only by cancel, shutdown, or a refused run: its target shut down,
 * or full with cfg->periodic_refused SEREX_REFUSED_END.
 * Returns:   as serex_schedule; SEREX_EINVAL also for initial_ns < 0 or
 *            period_ns <= 0.
 */
SEREX_API int serex_schedule_fixed_rate(serex_scheduler *s,
                                        serex_executor *target,
                                        int64_t initial_ns, int64_t period_ns,
                                        serex_fn fn, void *arg,
                                        serex_timer **out);

/*
 * What a fixed-rate timer does with grid points that passed without a run
 * (the system stalled, the target was busy, or a run took longer than a
 * period), as Tokio's MissedTickBehavior. Each is pinned down, with the
 * clock, in docs/scheduler.md ("Missed runs").
 */
typedef enum serex_missed_policy {
    /* One run at once for all the missed points, then back on the grid
     * (start + n * period). The default: serex_schedule_fixed_rate. */
    SEREX_MISSED_COALESCE = 0,
    /* Every missed point gets its run, back to back, until caught up. */
    SEREX_MISSED_BURST = 1,
    /* The late run happens; the next is on the grid after it ends: no
     * catch-up run. */
    SEREX_MISSED_SKIP = 2,
    /* The grid restarts from the late run's start: the next run is one
     * period after it. */
    SEREX_MISSED_DELAY = 3
} serex_missed_policy;

/*
 * serex_schedule_fixed_rate_missed - serex_schedule_fixed_rate with a
 * policy for missed grid points (above). Inside a run,
 * serex_timer_overrun() says how many points the run folds in.
 * Returns:   as serex_schedule_fixed_rate; SEREX_EINVAL also for a
 *            policy that is not one of the four.
 */
SEREX_API int serex_schedule_fixed_rate_missed(
    serex_scheduler *s, serex_executor *target, int64_t initial_ns,
    int64_t period_ns, serex_missed_policy missed, serex_fn fn, void *arg,
    serex_timer **out);

/*
 * serex_timer_overrun - called from inside a run of a periodic timer: how
 * many due runs passed, since the timer's previous run, with no run of
 * their own (the timer_getoverrun idiom), so a sampler can tell it lost
 * samples. For a fixed-rate timer, the grid points between the previous
 * run's points and this run's start: those a late start folds into this
 * run, and those a long previous run passed over (under SEREX_MISSED_SKIP,
 * a run ending after two more points says 2 in the next run; under
 * COALESCE and DELAY such points are folded into the next run instead,
 * and BURST gives each its own run). For every periodic timer, plus the
 * runs its target refused in between, with the points each stood for
 * (SEREX_REFUSED_MISS). 0 for a run on time after a run on time, for a
 * fixed-delay timer whose runs were all made, and outside a timer's run.
 * It is the running timer's, on the calling thread: a task needs no
 * handle to ask (a task that wants to cancel its own timer keeps
 * the handle from the schedule call in its argument, see
 * docs/scheduler.md).
 * Threads:   the thread running the timer's task.
 */
SEREX_API uint64_t serex_timer_overrun(void);

/*
 * serex_schedule_fixed_delay - run fn(arg) on @target after @initial_ns,
 * then again @delay_ns after each run ends.
 * Returns:   as serex_schedule; SEREX_EINVAL also for initial_ns < 0 or
 *            delay_ns <= 0.
 */
SEREX_API int serex_schedule_fixed_delay(serex_scheduler *s,
                                         serex_executor *target,
                                         int64_t initial_ns, int64_t delay_ns,
                                         serex_fn fn, void *arg,
                                         serex_timer **out);

/*
 * serex_schedule_token - serex_schedule for a timer that obeys @token:
 * once the token is cancelled (serex_cancel_request, its deadline, or its
 * parent), the timer is cancelled as by serex_timer_cancel: no run starts
 * after the request returns (one handed to its target and not started is
 * skipped); a run in progress finishes. The token is never cancelled by
 * the timer. @token NULL: a timer like serex_schedule's.
 * The run that may still be in progress when the token fires is the
 * reason to keep a handle: serex_timer_cancel_wait or _notify on it says
 * when @arg is yours again (a token-cancelled one-shot's task goes to no
 * on_rejected). Without a handle, let the task own nothing it must free,
 * or free it in the task.
 * Returns:   as serex_schedule, and the token's cause
 *            (serex_cancel_cause: SEREX_ECANCELED unless the canceller
 *            gave another) if @token is cancelled before the timer is
 *            filed: then nothing is scheduled and @arg is still yours.
 * Ownership: the timer holds what it needs of @token until it ends; the
 *            caller may release its token at once.
 * Threads:   as serex_schedule. A cancel of the token runs, on the
 *            cancelling thread, a short lock of the timer's shard.
 */
SEREX_API int serex_schedule_token(serex_scheduler *s, serex_executor *target,
                                   int64_t delay_ns, serex_cancel *token,
                                   serex_fn fn, void *arg, serex_timer **out);

/*
 * serex_schedule_fixed_rate_token - serex_schedule_fixed_rate for a timer
 * that obeys @token, as serex_schedule_token (a sampler that ends with
 * its session).
 * Returns:   as serex_schedule_token; SEREX_EINVAL also for initial_ns < 0
 *            or period_ns <= 0.
 * Ownership, Threads: as serex_schedule_token.
 */
SEREX_API int serex_schedule_fixed_rate_token(serex_scheduler *s,
                                              serex_executor *target,
                                              int64_t initial_ns,
                                              int64_t period_ns,
                                              serex_cancel *token, serex_fn fn,
                                              void *arg, serex_timer **out);

/*
 * serex_timer_cancel - stop every future run of @t. O(1); a pending
 * timer's slot is freed at once (nothing cancelled is retained).
 *
 * Returns true if this call stopped every run that had not yet started:
 * after it returns, no run starts (a run handed to its target but not
 * started is skipped). A periodic run already in progress finishes, and
 * the call still returns true. False if @t was already done (a one-shot
 * that started, a timer cancelled, rejected, handed back or ended by
 * shutdown: a periodic timer after shutdown, even with a run still queued
 * on its target, which is then skipped) or @t is NULL.
 * A run in progress may still be using @arg when this returns: to free it,
 * use serex_timer_cancel_wait or serex_timer_cancel_notify.
 * Threads:   any thread, also from the timer's own task.
 */
SEREX_API bool serex_timer_cancel(serex_timer *t);

/*
 * serex_timer_cancel_wait - cancel @t (as serex_timer_cancel) and wait
 * until no run of it is in progress: Linux's timer_delete_sync, Go's "no
 * stale fire after Stop returns". On SEREX_OK no run of @t is in
 * progress and none will start, every write of its last run is visible,
 * and @arg is the caller's again (for a one-shot that ran: the task's
 * to dispose of, as always).
 *
 * Only a run that has started is waited for: one handed to its target
 * and not started is always skipped by the cancel, so a task of a serial
 * or a manual executor may call this about a timer whose run is queued
 * behind it. *@stopped (if not NULL) gets what serex_timer_cancel would
 * return: true if this call stopped runs not yet started (a one-shot
 * that will never run: its @arg is yours to free).
 * From inside @t's own run (its task, or what the task calls on its
 * thread: a nested manual run, a continuation run inline) the run in
 * progress is the caller: the call cancels (future runs are stopped, as
 * by serex_timer_cancel) and says SEREX_EDEADLK at once, without waiting,
 * whatever the timeout. The run may then free @arg itself before it
 * returns: no run starts after it (the timer code does not touch @arg
 * once the task has returned).
 * Synchronization rules (as Linux's): the caller must not hold anything
 * the run needs to finish (a lock the task takes, a thread of its own
 * that the task waits for, a task of its own executor the task waits
 * on), and two runs must not wait for each other: such a wait never ends
 * (with SEREX_FOREVER), and is not detected.
 * Returns:   SEREX_OK; SEREX_EDEADLK (above); SEREX_ETIMEDOUT (runs are
 *            stopped, but one is still in progress: call again to wait
 *            more); SEREX_EINVAL for NULL @t or a timeout below
 *            SEREX_FOREVER. 0 only looks.
 * Ownership: the handle stays the caller's: release it after (the
 *            record lives until then, whatever this returns).
 * Threads:   any thread; blocks (parks) for the run in progress only.
 *            Use serex_timer_cancel_notify from a task that must not block.
 */
SEREX_API int serex_timer_cancel_wait(serex_timer *t, int64_t timeout_ns,
                                      bool *stopped);

/*
 * serex_timer_cancel_notify - cancel @t (as serex_timer_cancel) and post
 * fn(arg) to @target once no run of @t is in progress and none will
 * start: at once, from this call, if no run is in progress; else when the
 * run in progress returns, from the thread that ran it. The non-blocking
 * form of serex_timer_cancel_wait, for a task: fn may free the timer's
 * @arg (and release @t). Called from inside @t's own run, it posts fn
 * once that run has returned.
 *
 * fn is never lost: if @target refuses it, or takes it back or drops it
 * later, it runs at once on the thread that was posting or dropping it
 * (promise 2a, docs/contract.md). Inside fn, every write of @t's last
 * run is visible. *@stopped (if not NULL) is set as serex_timer_cancel_wait
 * sets it, before fn can run. @t may be released right after this call.
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL @t, @target, target's ops or
 *            @fn; SEREX_ENOMEM (nothing changed: @t not cancelled, fn
 *            will not run).
 * Ownership: on SEREX_OK, @arg passes to fn, which runs exactly once. The
 *            handle stays the caller's (release it when done with it).
 * Threads:   any thread, any task; never blocks.
 */
SEREX_API int serex_timer_cancel_notify(serex_timer *t, serex_executor *target,
                                        serex_fn fn, void *arg, bool *stopped);

/*
 * serex_timer_release - give back the handle from a schedule call. The
 * timer is not cancelled: it runs on as scheduled. @t NULL: nothing.
 * Call once per handle: a second release stops the program with
 * "serex: serex_timer_release: ..." on stderr, in every build (promise 8a,
 * docs/contract.md).
 */
SEREX_API void serex_timer_release(serex_timer *t);

/*
 * serex_scheduler_advance - manual mode only: move time forward by
 * @delta_ns, firing what comes due in due-time order, with the clock set
 * to each due time as it fires (a periodic timer whose runs happen on the
 * timer thread, target NULL, fires once per period crossed; one whose runs
 * wait on a manual executor is re-armed when the run ends, at the next due
 * time after the clock then).
 * Returns:   SEREX_OK; SEREX_EINVAL (s NULL, delta_ns < 0, not manual).
 */
SEREX_API int serex_scheduler_advance(serex_scheduler *s, int64_t delta_ns);

/*
 * serex_scheduler_run_until - manual mode only: a test's whole clock. Runs
 * the manual executors @exs[0..n) until they are all empty, then moves the
 * clock to the next due time (firing what comes due, as advance does) and
 * runs them again, and so on, until the next due time is after @deadline;
 * then sets the clock to @deadline (Tokio's paused clock auto-advancing).
 * So code over serials, timers, groups and futures on manual executors
 * runs with every task seeing the exact time it was due: a timer due at
 * 260 ms runs with serex_scheduler_now() = 260 ms, not the 500 ms of a
 * single advance(500 ms). Loops until quiescence: a task that always
 * submits another never lets it return.
 * Returns:   SEREX_OK; SEREX_EINVAL (s NULL or not manual, exs NULL with
 *            n > 0, an executor NULL, @deadline before the clock). An
 *            executor that is not a manual one runs nothing here.
 * Threads:   one thread, the test's (as advance and the manual runs).
 */
SEREX_API int serex_scheduler_run_until(serex_scheduler *s,
                                        serex_executor *const *exs, size_t n,
                                        int64_t deadline);

/* The scheduler's clock now (the manual time in manual mode). */
SEREX_API int64_t serex_scheduler_now(serex_scheduler *s);

/* Timers not done yet (pending, handed to a target, or running).
 * Approximate while other threads schedule or fire. */
SEREX_API size_t serex_scheduler_pending(serex_scheduler *s);

/* Due runs that their targets refused, since creation. */
SEREX_API uint64_t serex_scheduler_rejected(serex_scheduler *s);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_SCHEDULER_H */
