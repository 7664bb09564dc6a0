/* SPDX-License-Identifier: MIT */
/*
 * serex/manual.h - the manual executor: runs nothing until told, so tests of
 * code built on serex are deterministic and need no threads; and the
 * autoclock, which lets a test's waits run manual executors and move a
 * manual scheduler's clock by themselves.
 */
#ifndef SEREX_MANUAL_H
#define SEREX_MANUAL_H

#include "executor.h"  /* serex_executor, SEREX_API */
#include "scheduler.h" /* serex_scheduler */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * serex_manual_create - an executor that queues tasks until run by hand.
 *
 * execute appends to a FIFO and never runs anything. shutdown_now hands the
 * queue back; await_termination succeeds once shut down and the queue is
 * empty; serex_destroy drops what is still queued (cancelling futures).
 * Returns:   SEREX_OK; SEREX_EINVAL if out is NULL; SEREX_ENOMEM.
 * Threads:   execute from any thread; the run calls from one thread at a time.
 */
SEREX_API int serex_manual_create(serex_executor **out);

/*
 * serex_manual_run_pending - run the tasks queued at the moment of the call.
 *
 * Tasks those tasks submit to the same executor wait for the next call.
 * Returns:   how many tasks ran; 0 if ex is NULL or not a manual executor.
 */
SEREX_API size_t serex_manual_run_pending(serex_executor *ex);

/*
 * serex_manual_run_one - run the oldest queued task, if any.
 *
 * Returns:   true if a task ran; false if none was queued, ex is NULL or not
 *            a manual executor.
 */
SEREX_API bool serex_manual_run_one(serex_executor *ex);

/*
 * serex_autoclock_start - a clock that moves itself (Tokio's start_paused,
 * Go's testing/synctest): binds manual scheduler @s and manual executors
 * @exs[0..n) to the calling thread, whose waits then drive them.
 *
 * From then on, a serex wait on this thread (serex_future_wait,
 * serex_event_wait, serex_latch_wait, serex_group_wait,
 * serex_await_termination, serex_execute_wait, ...) never sleeps while
 * what it waits for has not happened. Instead it runs the tasks queued on
 * @exs, one at a time, the executors taking turns; when they are all empty
 * it moves @s's clock to the next due time, firing what is due then (as
 * serex_scheduler_advance), and runs them again. It returns as soon as
 * what it waits for has happened, nothing run after it, the clock at the
 * time of the task that did it. A wait's time-out is time on @s's clock,
 * from the moment the wait began: when nothing is queued and no timer is
 * due by then, the clock moves to the time-out and the wait says
 * SEREX_ETIMEDOUT (a task or timer due at that very time still runs
 * first; docs/event-and-manual.md names the few waits that read the real
 * clock themselves, whose time-outs are not exact). A wait with no
 * time-out that nothing can end (nothing queued on @exs, no timer
 * pending) is a deadlock of the test: it stops the
 * program with "serex: serex_autoclock_start: deadlock: ..." on stderr,
 * in every build (as Go's synctest panics; promise 8, docs/contract.md).
 * A task a wait runs may wait in turn: its wait is driven the same way.
 * Work on other threads is not part of the clock: a wait for a pool's
 * task is a deadlock here, or, with a time-out, times out at once.
 * An executor of @exs that is not a manual one runs nothing here.
 * Returns:   SEREX_OK; SEREX_EINVAL (s NULL or not manual, exs NULL with
 *            n > 0, an executor NULL, or this thread already bound);
 *            SEREX_ENOMEM. On error nothing changed.
 * Ownership: @exs is copied. @s and the executors must outlive the
 *            binding: stop it before destroying them.
 * Threads:   binds the calling thread only (other threads' waits sleep as
 *            usual); call serex_autoclock_stop on it before it ends.
 */
SEREX_API int serex_autoclock_start(serex_scheduler *s,
                                    serex_executor *const *exs, size_t n);

/*
 * serex_autoclock_stop - unbinds the calling thread: its waits sleep as
 * usual again, and time-outs are monotonic time. Nothing if the thread is
 * not bound. Called from a task that one of the thread's waits is running,
 * it stops the program ("serex: serex_autoclock_stop: ...").
 * Threads:   the thread serex_autoclock_start bound.
 */
SEREX_API void serex_autoclock_stop(void);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_MANUAL_H */
