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
 * Returns:   SEREX_OK (the task ran; its writes and its result are visible);
 *            SEREX_ECANCELED; SEREX_ETIMEDOUT; SEREX_EINVAL for NULL or a
 *            timeout below SEREX_FOREVER.
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
 * Returns:   true if this call cancelled it: the task had not started and
 *            never will; waiters get SEREX_ECANCELED. false if it has
 *            started, finished, was already cancelled, or f is NULL.
 * Threads:   any thread, a task of the future's executor included.
 */
SEREX_API bool serex_future_cancel(serex_future *f);

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
