/* SPDX-License-Identifier: MIT */
/*
 * serex/limiter.h - the concurrency limiter: at most N tasks at once, in
 * submission order, on top of any executor.
 */
#ifndef SEREX_LIMITER_H
#define SEREX_LIMITER_H

#include "executor.h" /* serex_executor, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

/* The largest max_running serex_limiter_create and _set_max accept. */
#define SEREX_LIMITER_MAX_RUNNING 65535u

/*
 * serex_limiter_create - make an executor that runs at most @max_running
 * of its tasks at once on @target, starting them in submission order.
 *
 * Tasks start in the order their execute calls took effect; the ones
 * beyond @max_running wait in the limiter's queue, blocking no thread,
 * until a running one returns (a semaphore of @max_running permits that
 * never blocks a thread; .NET's ConcurrentExclusiveSchedulerPair). It
 * keeps up to @max_running runner tasks on @target; a runner whose task
 * returns takes the next waiting task itself, and after 64 tasks in a row
 * submits itself to @target again, so a busy limiter cannot starve other
 * work on the same target. A limiter of 1 is a serial executor: one task
 * at a time, in order, each task's writes visible to the next (promise 3,
 * docs/contract.md), and serex_future_wait from its task on a future of
 * the same limiter that has not ended says SEREX_EDEADLK (promise 7b).
 * With more, tasks may finish in any order.
 * If @target refuses to start a runner (it is shut down or full, say):
 *  - and another runner of the limiter is still at work, the task is
 *    accepted and runs when a runner reaches it (execute says SEREX_OK);
 *  - else, if the task being submitted is the limiter's only one, execute
 *    returns the target's status and nothing is queued; the limiter stays
 *    usable;
 *  - else tasks are waiting and no runner is left to run them, and
 *    execute says SEREX_OK (the task is accepted). If @target said
 *    SEREX_EFULL (or anything but SEREX_EREJECTED), a runner is owed: the
 *    limiter's next execute starts one, and so do await_termination and
 *    serex_destroy while they wait (every millisecond while @target stays
 *    full); until one of those calls, the tasks wait. A full target never
 *    costs more than that lone task. If it said SEREX_EREJECTED (shut
 *    down), the limiter keeps them all (they come back from shutdown_now,
 *    and destroy drops them) and refuses new tasks with SEREX_EREJECTED,
 *    as a serial does (promise 5).
 * If @target refuses a runner's resubmission, the runner keeps running
 * where it is. Runners that @target takes back or drops (its shutdown_now
 * or destroy) never reach an on_pending (promise 2a); their tasks stay
 * queued in the limiter, as above.
 * shutdown, shutdown_now and await_termination concern the limiter's own
 * tasks only, never @target. At most 4294967295 tasks may wait at once;
 * past that, execute says SEREX_EFULL. In serex_executor_stats, `queued`
 * counts its waiting and its running tasks, as a serial's does.
 * *@out is set on success and set to NULL on failure.
 * Returns:   SEREX_OK; SEREX_EINVAL if target, target->ops or out is NULL,
 *            or max_running is 0 or above SEREX_LIMITER_MAX_RUNNING;
 *            SEREX_ENOMEM (nothing was made).
 * Ownership: the limiter never owns @target; destroy the limiter first.
 *            serex_destroy waits for the limiter's queued and running
 *            tasks (starting an owed runner); if @target has terminated or
 *            rejects the runner and can no longer run them, the queued
 *            ones are dropped.
 * Threads:   any thread. execute may be called from any number of threads
 *            at once and never blocks (a compare-and-swap and an atomic
 *            exchange per task, and a runner submission to @target when
 *            fewer than @max_running runners are out).
 *            await_termination and serex_destroy called from a task of the
 *            limiter, or of an executor it runs on, say SEREX_EDEADLK.
 */
SEREX_API int serex_limiter_create(serex_executor *target, unsigned max_running,
                                   serex_executor **out);

/*
 * serex_limiter_set_max - change how many of @limiter's tasks may run at
 * once to @max_running, while it runs (since 0.2.0).
 *
 * Raising the cap starts runners on the target at once for tasks that
 * wait, up to the new cap (a task never waits for a running one to
 * return while the cap has room for it). Lowering it interrupts nothing:
 * the tasks running go on to their end, and no task starts while as many
 * as the new cap, or more, are running: the first to start after the
 * call does so once the running ones are down below the new cap, and from
 * then on the new cap holds. Tasks still start in submission order.
 * A limiter whose cap is 1 is a serial while it is 1 (promise 3, and
 * serex_future_wait's SEREX_EDEADLK, promise 7b, for a task that started
 * under a cap of 1): raised above 1, it is not, and two of its tasks may
 * run at once; lowered to 1, it is a serial again from the first task
 * that starts once the others have returned. An execute racing the call
 * may be counted under either cap (a runner it starts beyond the new cap
 * leaves without running a task). Works after serex_shutdown too (queued
 * tasks still run, under the new cap); after serex_shutdown_now, or once
 * the target has rejected the limiter's runners for good, it only
 * records the cap.
 * Returns:   SEREX_OK; SEREX_EINVAL if @limiter is NULL or not a
 *            limiter, or @max_running is 0 or above
 *            SEREX_LIMITER_MAX_RUNNING (nothing changed). Never fails
 *            otherwise: if the target refuses a runner, the tasks wait as
 *            serex_limiter_create says for a refused runner.
 * Ownership: nothing changes hands.
 * Threads:   any thread, at once with execute, with the limiter's runners
 *            and with other set_max calls (the last to take effect wins),
 *            from a task of the limiter too; before serex_destroy. It
 *            never waits for a task; it may submit runners to the target.
 */
SEREX_API int serex_limiter_set_max(serex_executor *limiter,
                                    unsigned max_running);

/*
 * serex_limiter_max - @limiter's cap: the last value given to
 * serex_limiter_create or serex_limiter_set_max (since 0.2.0).
 * Returns:   1 to SEREX_LIMITER_MAX_RUNNING; 0 if @limiter is NULL or not
 *            a limiter.
 * Ownership: nothing changes hands.
 * Threads:   any thread, before serex_destroy.
 */
SEREX_API unsigned serex_limiter_max(serex_executor *limiter);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_LIMITER_H */
