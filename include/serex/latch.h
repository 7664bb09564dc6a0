/* SPDX-License-Identifier: MIT */
/*
 * serex/latch.h - the latch: a count that goes down, once, to zero, and
 * stays there (C++20's std::latch, Java's CountDownLatch). Made for "wait
 * until these N things are done", and for a "done" signal that must never
 * be lost: once open, a latch lets every wait through, now and later,
 * where an auto-reset event (event.h) lets one wait through per signal.
 *
 * Waiting blocks the calling thread, as the event's does: meant for a
 * thread outside serex (main, a test, a shutdown sequence). Counting down
 * never blocks and may be done from any task.
 */
#ifndef SEREX_LATCH_H
#define SEREX_LATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "executor.h" /* status codes, SEREX_FOREVER, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct serex_latch serex_latch;

/*
 * serex_latch_create - a latch that opens after @count count-downs.
 * @count 0: open from the start.
 * Returns:   SEREX_OK (*@out set); SEREX_EINVAL if out is NULL or @count
 *            is above UINT32_MAX - 1; SEREX_ENOMEM (*@out NULL).
 * Ownership: the caller owns the latch: serex_latch_destroy it.
 * Threads:   any thread.
 */
SEREX_API int serex_latch_create(uint64_t count, serex_latch **out);

/*
 * serex_latch_count_down - take @n from the count; the one that reaches 0
 * opens the latch and wakes every waiter. What each counter wrote before
 * its count-down is visible to every wait the latch then lets through.
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL, @n 0, or @n more than what
 *            is left (nothing is taken: a latch never goes below zero).
 * Threads:   any thread, a task included; never blocks.
 */
SEREX_API int serex_latch_count_down(serex_latch *l, uint64_t n);

/*
 * serex_latch_is_open - whether the count has reached 0 (false for NULL).
 * Once true, true for good. Threads: any; never blocks.
 */
SEREX_API bool serex_latch_is_open(const serex_latch *l);

/*
 * serex_latch_wait - block until the latch is open (at once if it is).
 * @timeout_ns: SEREX_FOREVER without limit, 0 polls (never blocks).
 * Returns:   SEREX_OK; SEREX_ETIMEDOUT; SEREX_EINVAL for NULL or a
 *            timeout below SEREX_FOREVER.
 * Threads:   any number of threads at once; all are let through. From a
 *            task it holds that task's thread while it waits.
 */
SEREX_API int serex_latch_wait(serex_latch *l, int64_t timeout_ns);

/*
 * serex_latch_destroy - free the latch. NULL is ignored.
 * Threads:   any thread, once no thread waits on @l and no count-down of
 *            it can still be in progress.
 */
SEREX_API void serex_latch_destroy(serex_latch *l);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_LATCH_H */
