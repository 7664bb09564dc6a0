/* SPDX-License-Identifier: MIT */
/*
 * serex/cancel.h - the cancellation token: one flag, set once, with a
 * cause, that every operation given the token obeys (C++26's stop_token,
 * Go's context, .NET's CancellationToken).
 *
 * A token starts not cancelled. serex_cancel_request sets it, once, with a
 * cause (SEREX_ECANCELED, or any negative code of the caller's); a
 * deadline (serex_cancel_deadline) sets it with SEREX_ETIMEDOUT; a child
 * token is set with its parent's cause when its parent is. What was
 * registered on the token then runs: each on_cancel callback is posted to
 * its target, and each operation that was given the token ends with the
 * cause (a future not started, a permit not yet granted, a wait). A token
 * never goes back to not cancelled.
 *
 * No thread blocks for a token: cancelling posts, never waits, except
 * serex_cancel_unregister, which may wait for a callback that is running
 * (below). docs/cancellation.md is the guide: how tokens, futures and
 * groups combine.
 */
#ifndef SEREX_CANCEL_H
#define SEREX_CANCEL_H

#include <stdbool.h>
#include <stdint.h>

#include "executor.h" /* status codes, serex_fn, serex_executor, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct serex_cancel serex_cancel;
typedef struct serex_cancel_reg serex_cancel_reg;
typedef struct serex_scheduler serex_scheduler;

/*
 * serex_cancel_create - a token, not cancelled.
 *
 * With @parent not NULL, the token is its child: cancelling the parent
 * cancels it with the parent's cause (at once, from this call, if the
 * parent is cancelled already); cancelling the child leaves the parent
 * alone. A parent may have any number of children, and a child its own.
 * Returns:   SEREX_OK (*@out set); SEREX_EINVAL if out is NULL;
 *            SEREX_ENOMEM (*@out NULL, nothing changed).
 * Ownership: the caller holds the token: serex_cancel_release it. The
 *            child keeps what it needs of the parent: either may be
 *            released first.
 * Threads:   any thread.
 */
SEREX_API int serex_cancel_create(serex_cancel *parent, serex_cancel **out);

/*
 * serex_cancel_request - cancel @c with @cause, and its children.
 *
 * @cause: a negative code down to SEREX_ERROR_MIN, given back by
 * serex_cancel_cause and by every operation the token ends; 0 means
 * SEREX_ECANCELED. The first request wins: a later one changes nothing.
 * The callbacks registered on the token and the operations given it are
 * settled by this call, on this thread, in the order they were
 * registered, before it returns (each on_cancel callback is posted to its
 * target, or runs here if its target refuses it); so are the children's.
 * Returns:   true if this call cancelled the token; false if it was
 *            already cancelled, @c is NULL, or @cause is positive or
 *            below SEREX_ERROR_MIN (then nothing changed).
 * Threads:   any thread, any number at once, a task included; never
 *            blocks (a short lock while it takes each registration).
 */
SEREX_API bool serex_cancel_request(serex_cancel *c, int cause);

/*
 * serex_cancel_requested - whether @c is cancelled. Cheap (one load):
 * meant to be polled by a long task. What the canceller wrote before the
 * request is visible once this says true. false for NULL.
 */
SEREX_API bool serex_cancel_requested(const serex_cancel *c);

/*
 * serex_cancel_cause - @c's cause once cancelled (negative); 0 while it is
 * not, and for NULL.
 */
SEREX_API int serex_cancel_cause(const serex_cancel *c);

/*
 * serex_cancel_deadline - cancel @c with SEREX_ETIMEDOUT @delay_ns from
 * now, on @s's clock (a manual scheduler's in a test), unless it is
 * cancelled first. Each call arms one more timer: the earliest wins.
 * The timer runs on @s's timer thread and holds the token until it fires
 * or the token is cancelled otherwise (then it is cancelled at once): as
 * with Go's context.WithTimeout, cancel a token whose work is over
 * (serex_cancel_request) rather than leave its deadline to come.
 * Returns:   SEREX_OK (also when @c is cancelled already: nothing to
 *            arm); SEREX_EINVAL for NULL c or s, or delay_ns < 0; what
 *            serex_schedule says (SEREX_EREJECTED after @s's shutdown,
 *            SEREX_EFULL, SEREX_ENOMEM): then nothing changed.
 * Ownership: keep @s alive until every token with a deadline on it is
 *            cancelled (a scheduler's destroy waits for pending timers,
 *            or drops them by its on_shutdown policy: a dropped deadline
 *            never comes, and the token is freed as if it had none).
 * Threads:   any thread.
 */
SEREX_API int serex_cancel_deadline(serex_cancel *c, serex_scheduler *s,
                                    int64_t delay_ns);

/*
 * serex_cancel_on_cancel - post fn(arg) to @target when @c is cancelled.
 *
 * If @c is cancelled already, fn(arg) is posted from this call. A
 * callback whose target refuses it, or takes it back or drops it later,
 * runs at once on the thread that was posting or dropping it (promise
 * 2a, docs/contract.md): it is never lost. Inside fn, serex_cancel_cause
 * says why.
 * *@reg gets a registration for serex_cancel_unregister, which must be
 * called exactly once, whether fn ran or not (it frees the record; until
 * then the registration holds the token).
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL c, target, target's ops, fn
 *            or reg; SEREX_ENOMEM. On error nothing changed, fn will not
 *            run and *@reg is NULL.
 * Ownership: on SEREX_OK, @arg passes to fn if it runs; after an
 *            unregister that said true, it is the caller's again.
 * Threads:   any thread, any number at once; never blocks.
 */
SEREX_API int serex_cancel_on_cancel(serex_cancel *c, serex_executor *target,
                                     serex_fn fn, void *arg,
                                     serex_cancel_reg **reg);

/*
 * serex_cancel_unregister - take back a callback and free @reg.
 *
 * Returns only when the callback will never run or has finished (C++'s
 * stop_callback destructor): true if it will never run (this call took it
 * back first); false if it was posted, and then it has returned. Called
 * from inside that same callback (on the thread running it), it does not
 * wait (it would wait for itself): it says false and @reg is freed once
 * the callback returns. So a false answer means the callback has run,
 * or is the caller. NULL says false.
 * Do not call it while holding what the callback needs (a lock it takes,
 * the only thread of its target): the wait would never end.
 * Threads:   any thread; may block for the callback's run, never longer.
 */
SEREX_API bool serex_cancel_unregister(serex_cancel_reg *reg);

/*
 * serex_cancel_release - drop the caller's hold on @c. The token stays
 * while operations, registrations, children or a pending deadline use it
 * (the deadline still comes and cancels them: cancel the token first if
 * its work is over). Releasing does not cancel. NULL is ignored. A second
 * release, while the token is still held by something else, stops the
 * program with "serex: serex_cancel_release: ..." on stderr (promise
 * 8a).
 * Threads:   any thread.
 */
SEREX_API void serex_cancel_release(serex_cancel *c);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_CANCEL_H */
