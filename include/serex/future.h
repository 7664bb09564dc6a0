/* SPDX-License-Identifier: MIT */
/*
 * serex/future.h - futures: a task's result, waiting and cancellation.
 */
#ifndef SEREX_FUTURE_H
#define SEREX_FUTURE_H

#include "cancel.h"   /* serex_cancel */
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
 *            SEREX_ECANCELED; the future's error, when it ended with one
 *            (serex_future_set_error, serex_future_fail, a token's cause,
 *            SEREX_ETIMEDOUT from serex_future_deadline); SEREX_ETIMEDOUT
 *            when the wait ran out (serex_future_error tells the
 *            future's own codes from the wait's, SEREX_EDEADLK too);
 *            SEREX_EDEADLK; SEREX_EINVAL for NULL or a timeout below
 *            SEREX_FOREVER.
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
 * serex_future_set_error - from inside a task whose result is a future
 * (serex_submit, serex_group_submit, serex_striped_submit,
 * serex_future_then): when the task returns, its future ends with @err
 * instead of the value it returned (Go's errgroup: a task that fails).
 * The last call before the return wins. The error passes down
 * serex_future_then chains as a cancellation does: the next call never
 * runs, and its future ends with the same error.
 * Returns:   SEREX_OK; SEREX_EINVAL if @err is not in [SEREX_ERROR_MIN,
 *            -1], or the calling thread is not running such a task.
 * Threads:   the thread running the task.
 */
SEREX_API int serex_future_set_error(int err);

/*
 * serex_future_error - how @f ended, when it did not end with a value:
 * SEREX_ECANCELED, a token's cause, SEREX_ETIMEDOUT of a deadline, or
 * the error its task or completer set. 0 while it has not ended, when it
 * ended with a value, and for NULL. Never blocks.
 */
SEREX_API int serex_future_error(serex_future *f);

/*
 * serex_promise_create - a future with no task: whoever holds it ends it
 * with serex_future_complete or serex_future_fail (for work that ends by
 * a callback: a timer, another library's I/O, a permit). Waits, on_done,
 * then, cancel_on, deadlines and the combinators work on it as on any
 * future; serex_future_cancel ends it with SEREX_ECANCELED. Releasing it
 * before it ended breaks it: it ends with SEREX_ECANCELED then (nothing
 * chained on it is left waiting for ever).
 * Returns:   SEREX_OK and *@out; SEREX_EINVAL if out is NULL;
 *            SEREX_ENOMEM (*@out NULL).
 * Ownership: the caller holds one reference: serex_future_release it
 *            once it is completed (or to break it).
 * Threads:   any thread.
 */
SEREX_API int serex_promise_create(serex_future **out);

/*
 * serex_future_complete - end the promise @f with @value, as a task's
 * return would: waiters get SEREX_OK, continuations are posted from this
 * call, serex_future_value says @value. What the caller wrote before is
 * visible to them.
 * Returns:   true if this call ended it; false if it had ended (a cancel,
 *            a deadline, an earlier complete or fail won), or @f is NULL
 *            or not made by serex_promise_create.
 * Threads:   any thread, any number at once: one wins.
 */
SEREX_API bool serex_future_complete(serex_future *f, void *value);

/*
 * serex_future_fail - end the promise @f with the error @err (in
 * [SEREX_ERROR_MIN, -1]). As serex_future_complete otherwise.
 * Returns:   true if this call ended it; false as serex_future_complete,
 *            and for an @err out of range (nothing changed).
 */
SEREX_API bool serex_future_fail(serex_future *f, int err);

/*
 * serex_future_cancel_on - cancel @f when @token is cancelled: if its
 * task has not started by then, it never runs and @f ends with the
 * token's cause (at once, from this call, if @token is cancelled
 * already). A task that has started is not interrupted: it may poll the
 * token (serex_cancel_requested). Once @f has ended, the link is gone.
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL; SEREX_ENOMEM (nothing
 *            changed).
 * Ownership: the link holds what it needs of @token and @f: release
 *            either whenever you like.
 * Threads:   any thread, a task included; never blocks.
 */
SEREX_API int serex_future_cancel_on(serex_future *f, serex_cancel *token);

/*
 * serex_future_deadline - end @f with SEREX_ETIMEDOUT @delay_ns from now,
 * on @s's clock, unless it ended first (Java's orTimeout): a task not
 * started never runs; one that runs is not interrupted, but its value is
 * dropped (waiters and continuations have had SEREX_ETIMEDOUT). The
 * timer is cancelled once @f ends. Each call arms one more: the earliest
 * wins.
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL f or s, or delay_ns < 0;
 *            SEREX_ENOMEM, SEREX_EREJECTED (@s shut down), SEREX_EFULL:
 *            then nothing changed.
 * Ownership: keep @s alive until @f has ended or its deadline passed.
 * Threads:   any thread, a task included; never blocks.
 */
SEREX_API int serex_future_deadline(serex_future *f, serex_scheduler *s,
                                    int64_t delay_ns);

/*
 * serex_future_wait_token - serex_future_wait that also ends when @token
 * is cancelled: then it says the token's cause, and @f is left as it is
 * (still running, say: serex_future_cancel_on is what cancels it).
 * @token NULL: serex_future_wait.
 * Returns:   as serex_future_wait, or the token's cause (also at once,
 *            when it is cancelled already and @f has not ended).
 * Threads:   any number of threads at once.
 */
SEREX_API int serex_future_wait_token(serex_future *f, int64_t timeout_ns,
                                      serex_cancel *token);

/* serex_future_all / _any flags: cancel the other inputs once the result
 * is known (the first error of all, the first value of any). */
#define SEREX_FUTURE_CANCEL_REST 1u

/*
 * serex_future_all - a future that ends when all of @fs[0..n) have (C++'s
 * when_all, Promise.all): with value NULL if every one ended with a value
 * (read them with serex_future_value), else with the first error seen
 * (in the order the inputs ended). With SEREX_FUTURE_CANCEL_REST it ends
 * at the first error, at once, and cancels the inputs that have not
 * started (serex_future_cancel: running ones finish). No thread waits:
 * the inputs' ends drive it. n == 0: it has ended, with a value.
 * Cancelling *@out does not cancel the inputs.
 * Returns:   SEREX_OK and *@out; SEREX_EINVAL if out is NULL, fs is NULL
 *            with n > 0, an input is NULL, or flags has an unknown bit;
 *            SEREX_ENOMEM. On error *@out is NULL and nothing changed.
 * Ownership: the caller holds one reference to *@out: release it. The
 *            inputs stay the caller's; the combinator holds what it needs
 *            of them (release them whenever you like).
 * Threads:   any thread, a task included; never blocks.
 */
SEREX_API int serex_future_all(serex_future *const *fs, size_t n,
                               unsigned flags, serex_future **out);

/*
 * serex_future_any - a future that ends with the value of the first of
 * @fs[0..n) to end with a value (Promise.any, Java's
 * ShutdownOnSuccess); if every one fails, with the first error seen.
 * With SEREX_FUTURE_CANCEL_REST the losers that have not started are
 * cancelled once one has won. To tell which won, give the inputs values
 * that say so.
 * Returns:   as serex_future_all; SEREX_EINVAL also for n == 0.
 * Ownership, threads: as serex_future_all.
 */
SEREX_API int serex_future_any(serex_future *const *fs, size_t n,
                               unsigned flags, serex_future **out);

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
