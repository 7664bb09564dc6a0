/* SPDX-License-Identifier: MIT */
/*
 * scheduler_internal.h - what scheduler.c shows its tests: the timer
 * thread's coalescing of wake-ups under load, as pure functions, and a
 * timer's waiters mark (the essay is in scheduler.c).
 */
#ifndef SEREX_SCHEDULER_INTERNAL_H
#define SEREX_SCHEDULER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common_internal.h" /* serex_scheduler, through serex.h */

#define SEREX__COALESCE_BATCH 4 /* a fire handing out this many: load */
#define SEREX__COALESCE_MIN_NS INT64_C(1000)         /* the first window */
#define SEREX__COALESCE_DEFAULT_NS INT64_C(200000)   /* cfg coalesce_ns 0 */
#define SEREX__COALESCE_LIMIT_NS INT64_C(1000000000) /* the widest accepted */

/*
 * The window after a fire that handed out @n timers, from @window: it
 * opens at SEREX__COALESCE_MIN_NS and doubles, up to @max (0: always
 * shut), while fires hand out SEREX__COALESCE_BATCH or more; a smaller
 * fire halves it, and below the minimum it shuts (0).
 */
int64_t serex__coalesce_adapt(int64_t window, size_t n, int64_t max);

/*
 * When to wake for the earliest due time @next after a fire at @now: @next
 * itself, unless the window is open and @next falls inside it, then the
 * window's end. Never before @next; later by less than @window.
 */
int64_t serex__coalesce_deadline(int64_t next, int64_t now, int64_t window);

/*
 * What the thread publishes in wake_at before sleeping until @deadline: a
 * producer rings for a timer due before it. At most @next, and a timer
 * due at or after it waits for @deadline for less than @window more (or
 * not at all when the window is shut).
 */
int64_t serex__coalesce_ring_below(int64_t next, int64_t now, int64_t deadline,
                                   int64_t window);

/* The timer thread's window after its latest fire (0: shut), or with
 * @peak the widest it has been since the scheduler was made. Published
 * after each fire returns: a run cannot see the window its own fire
 * opens. */
int64_t serex__scheduler_window(serex_scheduler *s, bool peak);

/* Whether a serex_timer_cancel_wait or _notify waits for @t's run in
 * progress (its WAITERS mark): a test sees a waiter parked with no
 * timing. @t must be held (a handle). */
bool serex__timer_has_waiters(serex_timer *t);

/*
 * For the autoclock (autoclock.c), manual mode only: *@any says whether a
 * timer is pending in the wheel, and *@next when to advance to next: never
 * after the earliest due time, and maybe before it (a slot's start: an
 * advance to it cascades, and the next look is exact); INT64_MAX if none.
 * Returns SEREX_OK; SEREX_EINVAL if @s is NULL or not manual.
 */
int serex__scheduler_next_due(serex_scheduler *s, int64_t *next, bool *any);

#endif /* SEREX_SCHEDULER_INTERNAL_H */
