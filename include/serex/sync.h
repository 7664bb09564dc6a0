/* SPDX-License-Identifier: MIT */
/*
 * serex/sync.h - synchronisation that never loses a wake-up: the event.
 */
#ifndef SEREX_SYNC_H
#define SEREX_SYNC_H

#include "executor.h" /* status codes, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct serex_event serex_event;

/*
 * serex_event_create - an auto-reset event, initially not signalled.
 *
 * Returns:   SEREX_OK; SEREX_EINVAL if out is NULL; SEREX_ENOMEM.
 */
SEREX_API int serex_event_create(serex_event **out);

/*
 * serex_event_signal - set the event; wakes a waiter if there is one.
 *
 * A signal made before anyone waits is kept: the next wait returns at once.
 * Signals do not count: two signals before a wait release one wait.
 * NULL is ignored. Threads: any thread, a task included; never blocks.
 */
SEREX_API void serex_event_signal(serex_event *ev);

/*
 * serex_event_wait - wait for the event and reset it (auto-reset).
 *
 * Each signal releases exactly one wait. Spurious wake-ups are hidden.
 * Returns:   SEREX_OK; SEREX_ETIMEDOUT (0 polls); SEREX_EINVAL for NULL or a
 *            timeout below SEREX_FOREVER.
 * Threads:   any number of threads at once.
 */
SEREX_API int serex_event_wait(serex_event *ev, int64_t timeout_ns);

/*
 * serex_event_destroy - free the event. No thread may be waiting on it.
 * NULL is ignored.
 */
SEREX_API void serex_event_destroy(serex_event *ev);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_SYNC_H */
