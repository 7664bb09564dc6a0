/* SPDX-License-Identifier: MIT */
/*
 * serex/future.h - futures: a task's result, waiting and cancellation.
 */
#ifndef SEREX_FUTURE_H
#define SEREX_FUTURE_H

#include "executor.h" /* serex_executor, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

/* A task that returns a result. */
typedef void *(*serex_call_fn)(void *arg);

typedef struct serex_future serex_future;

/*
 * serex_submit - run fn(arg) on @ex and get a future for its result.
 *
 * Works on any executor, a user-written one included. If shutdown_now takes
 * the task back, the future completes as cancelled and the task is not
 * passed to on_pending (it is still counted).
 * Returns:   SEREX_OK and *@out; SEREX_EINVAL if ex, fn or out is NULL; any
 *            error of serex_execute (then *@out is NULL, nothing queued).
 * Ownership: the caller holds one reference: serex_future_release it.
 * Threads:   any thread.
 */
SEREX_API int serex_submit(serex_executor *ex, serex_call_fn fn, void *arg,
                           serex_future **out);

/*
 * serex_future_wait - wait until the task has run or was cancelled.
 *
 * A wait that could never end says SEREX_EDEADLK at once, whatever the
 * timeout, when the future has not ended and its task is queued behind the
 * caller's own (promise 7b, docs/contract.md): the caller is running a task
 * of the serial executor the future's task was submitted to, or of the
 * same key of the striped executor, or is inside serex_manual_run_one or
 * serex_manual_run_pending of the manual executor. Never for a pool: another
 * worker may run it. A future made by serex_future_then counts as submitted
 * to its target.
 * Returns:   SEREX_OK (the task ran; its writes and its result are visible);
 *            SEREX_ECANCELED; SEREX_ETIMEDOUT; SEREX_EDEADLK; SEREX_EINVAL
 *            for NULL or a timeout below SEREX_FOREVER.
 * Threads:   any number of threads at once.
 */
SEREX_API int serex_future_wait(serex_future *f, int64_t timeout_ns);

/*
 * serex_future_value - the task's result.
 *
 * Returns:   what fn returned once serex_future_wait said SEREX_OK; NULL
 *            before that, when cancelled, or for a NULL future. Never blocks.
 */
SEREX_API void *serex_future_value(serex_future *f);

/*
 * serex_future_cancel - stop the task if it has not started.
 *
 * O(1): the task is marked, and its queue slot is skipped when reached.
 * The future's continuations (serex_future_on_done, serex_future_then)
 * are posted from this call.
 * Returns:   true if this call cancelled it: the task had not started and
 *            never will; waiters get SEREX_ECANCELED. false if it has
 *            started, finished, was already cancelled, or f is NULL.
 * Threads:   any thread, a task of the future's executor included.
 */
SEREX_API bool serex_future_cancel(serex_future *f);

/*
 * serex_future_on_done - post fn(arg) to @target once the future has ended.
 *
 * The future ends when its task has run, was cancelled, or was taken back
 * or dropped by its executor (then it is cancelled). fn(arg) is posted
 * after the end is published, so serex_future_wait(f, 0) and
 * serex_future_value answer at once inside fn. If the future has ended
 * already, fn(arg) is posted at once, from this call. Continuations of one
 * future are posted in the order they were added (a serial target runs
 * them in that order). No thread ever blocks for them.
 * If @target refuses fn (it is shut down, say), or takes it back or drops
 * it later (shutdown_now, destroy), fn(arg) runs at once on the thread
 * that did so: the one that ended the future, this one if it had ended,
 * or the one inside shutdown_now or destroy; it never reaches an
 * on_pending and is never lost (promise 2a, docs/contract.md).
 * Returns:   SEREX_OK; SEREX_EINVAL if f, target, target's ops or fn is
 *            NULL; SEREX_ENOMEM. On error nothing changed and fn will not
 *            run.
 * Ownership: on SEREX_OK, @arg passes to fn. The continuation holds no
 *            reference to the future: release it whenever you like, but
 *            hold one while fn uses it.
 * Threads:   any thread, any number at once, a task included; never blocks.
 *            fn may run on another thread before this call returns.
 */
SEREX_API int serex_future_on_done(serex_future *f, serex_executor *target,
                                   serex_fn fn, void *arg);

/*
 * serex_future_then - a future for call_fn(value), run on @target once @f
 * has run and returned value.
 *
 * *@next is a new future. When @f ends with a value, call_fn(value) is
 * posted to @target as *@next's task, and its return completes *@next.
 * When @f is cancelled (or taken back or dropped by its executor), *@next
 * is cancelled too, at once, and so is everything chained on it:
 * cancellation passes down the chain. serex_future_cancel(*@next) before
 * call_fn starts means call_fn never runs. The call is a continuation of
 * @f, posted in order with its on_done continuations; one that @target
 * refuses, takes back or drops runs at once where it is, as on_done says.
 * Returns:   SEREX_OK and *@next; SEREX_EINVAL if f, target, target's ops,
 *            call_fn or next is NULL; SEREX_ENOMEM. On error *@next is
 *            NULL, nothing changed and call_fn will not run.
 * Ownership: the caller holds one reference to *@next: release it. @f may
 *            be released as soon as this returns: *@next keeps what it
 *            needs.
 * Threads:   any thread, any number at once, a task included; never blocks.
 */
SEREX_API int serex_future_then(serex_future *f, serex_executor *target,
                                serex_call_fn call_fn, serex_future **next);

/*
 * serex_future_release - drop the caller's reference.
 *
 * The future is freed once released and its task has run or been dropped.
 * Releasing does not cancel. NULL is ignored. Call once per future: a
 * second release stops the program with "serex: serex_future_release: ..."
 * on stderr, in every build (promise 8a, docs/contract.md).
 */
SEREX_API void serex_future_release(serex_future *f);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_FUTURE_H */
