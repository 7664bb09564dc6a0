/* SPDX-License-Identifier: MIT */
/*
 * future_internal.h - futures for the submit calls of other executors
 * (serex_striped_submit; serex_submit uses it too). Futures sit in the
 * core layer, under the executors: a future is the record every submit
 * returns, an internal operation like a task node (op_internal.h), and it
 * needs nothing but the node cache and the parking lot.
 */
#ifndef SEREX_FUTURE_INTERNAL_H
#define SEREX_FUTURE_INTERNAL_H

#include "common_internal.h"
#include "serex/cancel.h"

/*
 * A future for fn(arg), with the task to queue in *task (its argument is
 * the future itself). @ex is the executor the task is queued on and @key,
 * if not NULL, the striped key it is queued under: serex_future_wait says
 * SEREX_EDEADLK from a task that such a task would wait for (promise 7b).
 * If queueing fails, serex__future_abort frees it (it was never shared).
 * NULL if out of memory.
 */
serex_future *serex__future_new(serex_executor *ex, const uint64_t *key,
                                serex_call_fn fn, void *arg, serex_fn *task);
void serex__future_abort(serex_future *f);

/*
 * Ends @f with @code (SEREX_ERROR_MIN .. -1) if its call has not started
 * (or, with @running_too, also while it runs: a deadline; the call's
 * value is then dropped), and settles it. The caller keeps @f alive.
 * true if this call ended it.
 */
bool serex__future_fail(serex_future *f, int code, bool running_too);

/*
 * Links @f to @tok: when @tok is cancelled, @f ends with its cause, as
 * serex__future_fail(f, cause, running_too) (at once if @tok is cancelled
 * already). With @owns, the link holds @tok's handle: it releases it
 * when done, and cancels @tok once @f has ended (to stop a deadline).
 * SEREX_OK or SEREX_ENOMEM (nothing changed; @tok is still the caller's).
 */
int serex__future_bind(serex_future *f, serex_cancel *tok, bool running_too,
                       bool owns);

/* The error the last future call made on this thread set
 * (serex_future_set_error), or 0; reading it clears it (a group reports
 * its submitted tasks' errors so). */
int serex__future_take_error(void);

#endif /* SEREX_FUTURE_INTERNAL_H */
