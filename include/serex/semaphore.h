/* SPDX-License-Identifier: MIT */
/*
 * serex/semaphore.h - asynchronous permits: an acquire that never blocks a
 * thread, and a permit that is released by whoever ends the operation it
 * covers, on any thread, at any later time (Tokio's Semaphore with owned
 * permits).
 *
 * An acquire names a continuation (fn, arg) and an executor: once the
 * permits are the caller's, fn(arg, SEREX_OK) is posted there. Until then
 * nothing waits but a small record in the semaphore's queue. The permits
 * belong to no thread and no task: a task may acquire, start a fetch that
 * completes by timer after the task has returned, and the completion
 * releases them. So a semaphore bounds *operations* in flight, where the
 * limiter (limiter.h) bounds running task *bodies*: a limiter's slot is
 * free again the moment the task returns, whatever the task started.
 *
 * Fair: waiters are served in the order their acquires took effect
 * (FIFO), and a waiter is served only once every waiter before it has
 * been served or has left (cancelled, or the semaphore closed). So a large
 * request at the head of the queue holds back smaller ones behind it even
 * when there would be permits for them: a large request is never starved
 * by a stream of small ones (Tokio's behaviour). An acquire takes permits
 * at once only when nobody waits; try_acquire never jumps the queue.
 *
 * What a thread wrote before serex_semaphore_release is visible to the
 * continuations that release grants (and to a later acquire or
 * try_acquire that takes those permits), as with a lock.
 *
 * Threads:
 *   call                                       | may overlap with
 *   -------------------------------------------+---------------------------
 *   acquire / try_acquire / release / close /  | every call but destroy
 *   available                                  |
 *   destroy                                    | nothing
 */
#ifndef SEREX_SEMAPHORE_H
#define SEREX_SEMAPHORE_H

#include <stdbool.h>
#include <stdint.h>

#include "cancel.h"   /* serex_cancel: an acquire may obey a token */
#include "executor.h" /* status codes, serex_executor, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct serex_semaphore serex_semaphore;

/*
 * serex_permit_fn - an acquire's continuation. @status is SEREX_OK when
 * the permits were granted: they are then the continuation's, to release
 * (now, or later from anywhere). Any other status means no permit is
 * held: the token's cause (SEREX_ECANCELED, SEREX_ETIMEDOUT for a
 * deadline, or the caller's own code) or SEREX_EREJECTED (closed while
 * waiting).
 */
typedef void (*serex_permit_fn)(void *arg, int status);

/*
 * serex_semaphore_create - a semaphore of @permits permits, all free.
 *
 * @permits is also the most that may ever be free: releasing more than
 * was taken is misuse (serex_semaphore_release).
 * Returns:   SEREX_OK (*@out set); SEREX_EINVAL if out is NULL or
 *            @permits is 0; SEREX_ENOMEM (*@out NULL).
 * Ownership: the caller owns the semaphore: serex_semaphore_destroy it.
 * Threads:   any thread.
 */
SEREX_API int serex_semaphore_create(uint64_t permits, serex_semaphore **out);

/*
 * serex_semaphore_acquire - post fn(arg, SEREX_OK) to @target once @n
 * permits are held for the caller.
 *
 * At once, from this call, if @n are free and nobody waits; else the
 * request waits in FIFO order (see the top of this file) and a release
 * that makes room posts it, from the releasing thread. No thread blocks.
 * With @token (may be NULL):
 *  - cancelled before the permits were granted: fn(arg, cause) is posted
 *    instead (from the cancelling thread), no permit is held, and the
 *    waiter's place is freed: the waiters behind it get permits if they
 *    now fit;
 *  - cancelled already at this call: fn(arg, cause) is posted at once
 *    (the call says SEREX_OK: one path for the caller), even if permits
 *    are free;
 *  - cancelled after the grant: nothing changes (the permits are held).
 * serex_semaphore_close while waiting posts fn(arg, SEREX_EREJECTED).
 * So on SEREX_OK fn runs exactly once, with SEREX_OK (and the permits) or
 * with the status that said why not.
 * A continuation whose target refuses it runs at once on the thread that
 * was posting it (this one, inside acquire, or the releasing, closing or
 * cancelling one); one that its target accepts and later takes back or
 * drops (shutdown_now, a destroy) runs at once on that thread, inside
 * that call. Either way it runs exactly once, with its status, and never
 * reaches an on_pending (promise 2a, docs/contract.md): permits granted to
 * it are still its own, to release.
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL s, target, target's ops or
 *            fn, or @n 0 or above the semaphore's permits;
 *            SEREX_EREJECTED once closed (checked before the token);
 *            SEREX_ENOMEM. On error nothing changed and fn will not run.
 * Ownership: on SEREX_OK, @arg passes to fn. @target is not owned: keep
 *            it alive until fn has run. The token may be released at once
 *            (the waiter holds what it needs of it).
 * Threads:   any thread, any number at once, a task included; never
 *            blocks (a short lock). fn may run before this call returns,
 *            on this thread or another.
 */
SEREX_API int serex_semaphore_acquire(serex_semaphore *s, uint32_t n,
                                      serex_executor *target,
                                      serex_permit_fn fn, void *arg,
                                      serex_cancel *token);

/*
 * serex_semaphore_try_acquire - take @n permits now, if they are free and
 * nobody waits (it never jumps the queue).
 * Returns:   true if the caller now holds @n permits; false otherwise,
 *            and for NULL, @n 0 or above the permits, or once closed.
 * Threads:   any thread; never blocks (a short lock).
 */
SEREX_API bool serex_semaphore_try_acquire(serex_semaphore *s, uint32_t n);

/*
 * serex_semaphore_release - give back @n permits, and post the
 * continuations of the waiters they complete, in FIFO order, from this
 * call (a refused one runs here).
 *
 * By any thread, at any later time: a permit is not tied to the thread or
 * task that acquired it, and may be released in parts. Also after close.
 * Releasing more than is held, so that the free permits would exceed the
 * semaphore's count, is misuse: the program stops with "serex:
 * serex_semaphore_release: ..." on stderr (promise 8a). NULL and @n 0 are
 * ignored.
 * Threads:   any thread, a task or a continuation included; never blocks
 *            (a short lock).
 */
SEREX_API void serex_semaphore_release(serex_semaphore *s, uint32_t n);

/*
 * serex_semaphore_available - the permits free now: approximate while
 * other threads acquire or release (it may be stale the moment it
 * returns). 0 for NULL. Never blocks.
 */
SEREX_API uint64_t serex_semaphore_available(const serex_semaphore *s);

/*
 * serex_semaphore_close - refuse new acquires (SEREX_EREJECTED) and
 * try_acquires (false), and post fn(arg, SEREX_EREJECTED) to every waiter,
 * from this call (a refused one runs here). Permits held stay held and
 * may be released. Idempotent; NULL is ignored.
 * Threads:   any thread, a task included; never blocks (a short lock).
 */
SEREX_API void serex_semaphore_close(serex_semaphore *s);

/*
 * serex_semaphore_destroy - free the semaphore. NULL is ignored.
 *
 * Allowed once no waiter is parked: every acquire that said SEREX_OK has
 * been granted, cancelled by its token, or rejected by close (close first
 * if some may still wait). A cancel of a waiter that is under way on
 * another thread when destroy is called is waited for (a few
 * instructions), so close then destroy is safe while tokens are being
 * cancelled. Continuations posted and not yet run may run after destroy
 * (they do not touch the semaphore), but a permit still held must not be
 * released after it. Destroying it while a waiter is still parked (not
 * being cancelled) is misuse: the program stops with "serex:
 * serex_semaphore_destroy: ..." on stderr (promise 8a).
 * Threads:   any thread, once no other call may run on @s.
 */
SEREX_API void serex_semaphore_destroy(serex_semaphore *s);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_SEMAPHORE_H */
