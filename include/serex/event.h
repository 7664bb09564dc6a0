/* SPDX-License-Identifier: MIT */
/*
 * serex/event.h - the event: an auto-reset event whose wake-ups are never
 * lost.
 *
 * Unlike the gate and the channel, the event is a blocking primitive:
 * serex_event_wait blocks the calling thread until the event is signalled
 * or the timeout ends. It is meant for a thread outside serex (main, a
 * test) waiting for a task to say "done"; a task that waits on it holds
 * its executor's thread for as long as it waits. Signalling never blocks
 * and may be done from any task.
 */
#ifndef SEREX_EVENT_H
#define SEREX_EVENT_H

#include "executor.h" /* status codes, SEREX_FOREVER, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct serex_event serex_event;

/*
 * serex_event_create - an auto-reset event, initially not signalled.
 *
 * *@out is set on success, NULL on SEREX_ENOMEM.
 * Returns:   SEREX_OK; SEREX_EINVAL if out is NULL; SEREX_ENOMEM.
 * Ownership: the caller owns the event: serex_event_destroy it.
 * Threads:   any thread.
 */
SEREX_API int serex_event_create(serex_event **out);

/*
 * serex_event_create_manual - a manual-reset event, initially not
 * signalled: once signalled it stays signalled, and every wait returns at
 * once, until serex_event_reset (Win32's manual-reset event). For a "done"
 * signal several threads may wait for, or one that may be waited for after
 * it was given: an auto-reset event lets one wait through per signal and
 * would swallow it. serex_latch (latch.h) is the same for a signal given
 * once, or after N things.
 * Returns, Ownership, Threads: as serex_event_create.
 */
SEREX_API int serex_event_create_manual(serex_event **out);

/*
 * serex_event_reset - clear the event's signal. An auto-reset event's
 * signal not yet consumed is dropped; a manual-reset event's waits block
 * again until the next signal. NULL is ignored.
 * Threads:   any thread; never blocks.
 */
SEREX_API void serex_event_reset(serex_event *ev);

/*
 * serex_event_signal - set the event; wakes a waiter if there is one
 * (every waiter, for a manual-reset event).
 *
 * A signal made before anyone waits is kept: the next wait returns at once.
 * Signals do not count: two signals before a wait release one wait. What
 * the signaller wrote before signalling is visible to the wait it releases.
 * NULL is ignored.
 * Threads:   any thread, a task included; never blocks.
 */
SEREX_API void serex_event_signal(serex_event *ev);

/*
 * serex_event_wait - block the calling thread until the event is
 * signalled, then reset it (auto-reset; a manual-reset event stays
 * signalled and lets every wait through).
 *
 * Each signal of an auto-reset event releases exactly one wait. Spurious
 * wake-ups are hidden.
 * @timeout_ns: SEREX_FOREVER waits without limit, 0 polls (never blocks).
 * Returns:   SEREX_OK; SEREX_ETIMEDOUT; SEREX_EINVAL for NULL or a
 *            timeout below SEREX_FOREVER.
 * Threads:   any number of threads at once. It blocks the caller: from a
 *            task, it holds that task's thread (a pool worker, say) until
 *            it returns.
 */
SEREX_API int serex_event_wait(serex_event *ev, int64_t timeout_ns);

/*
 * serex_event_destroy - free the event. NULL is ignored.
 *
 * Ownership: @ev is gone on return.
 * Threads:   any thread, once no thread waits on @ev and no signal of it
 *            can still be in progress.
 */
SEREX_API void serex_event_destroy(serex_event *ev);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_EVENT_H */
