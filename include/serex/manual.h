/* SPDX-License-Identifier: MIT */
/*
 * serex/manual.h - the manual executor: runs nothing until told, so tests of
 * code built on serex are deterministic and need no threads.
 */
#ifndef SEREX_MANUAL_H
#define SEREX_MANUAL_H

#include "executor.h" /* serex_executor, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * serex_manual_create - an executor that queues tasks until run by hand.
 *
 * execute appends to a FIFO and never runs anything. shutdown_now hands the
 * queue back; await_termination succeeds once shut down and the queue is
 * empty; serex_destroy drops what is still queued (cancelling futures).
 * Returns:   SEREX_OK; SEREX_EINVAL if out is NULL; SEREX_ENOMEM.
 * Threads:   execute from any thread; the run calls from one thread at a time.
 */
SEREX_API int serex_manual_create(serex_executor **out);

/*
 * serex_manual_run_pending - run the tasks queued at the moment of the call.
 *
 * Tasks those tasks submit to the same executor wait for the next call.
 * Returns:   how many tasks ran; 0 if ex is NULL or not a manual executor.
 */
SEREX_API size_t serex_manual_run_pending(serex_executor *ex);

/*
 * serex_manual_run_one - run the oldest queued task, if any.
 *
 * Returns:   true if a task ran; false if none was queued, ex is NULL or not
 *            a manual executor.
 */
SEREX_API bool serex_manual_run_one(serex_executor *ex);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_MANUAL_H */
