/* SPDX-License-Identifier: MIT */
/*
 * serex/serial.h - the serial executor: one task at a time, in order, on
 * top of any executor.
 */
#ifndef SEREX_SERIAL_H
#define SEREX_SERIAL_H

#include "executor.h" /* serex_executor, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

/* Serial configuration; zero-initialise it (or pass NULL) for defaults. */
typedef struct serex_serial_config {
    unsigned batch; /* tasks run before the thread goes back to the
                       target; 0: 64 */
} serex_serial_config;

/*
 * serex_serial_create - make an executor that runs tasks one at a time, in
 * order, on @target.
 *
 * Tasks run in the order their execute calls took effect, never two at
 * once, and each task's writes are visible to the next without further
 * synchronisation. The serial submits one drain task to @target when it
 * has work and none is running; a drain runs at most cfg->batch tasks,
 * then resubmits itself, so one busy serial cannot starve others on the
 * same target. If @target refuses that resubmission, the drain keeps
 * running where it is rather than lose its place.
 * If @target refuses to start a drain (it is shut down or full, say) and
 * the task being submitted is the serial's only one, execute returns the
 * target's status and nothing is queued; the serial stays usable. If tasks
 * are queued behind it, the serial keeps them all (execute says SEREX_OK:
 * the task is accepted and comes back from shutdown_now) and refuses new
 * tasks with SEREX_EREJECTED (promise 5, docs/contract.md).
 * shutdown, shutdown_now and await_termination concern the serial's own
 * tasks only, never @target.
 * @cfg may be NULL. *@out is set on success and set to NULL on failure.
 * Returns:   SEREX_OK; SEREX_EINVAL if target, target->ops or out is NULL;
 *            SEREX_ENOMEM.
 * Ownership: the serial never owns @target; destroy the serial first.
 *            serex_destroy waits for the serial's queued tasks; if @target
 *            has terminated and can no longer run them, they are dropped.
 * Threads:   any thread. execute may be called from any number of threads
 *            at once; it never blocks (one atomic exchange per task).
 *            await_termination and serex_destroy called from a task of the
 *            serial, or of an executor it runs on, say SEREX_EDEADLK.
 */
SEREX_API int serex_serial_create(serex_executor *target,
                                  const serex_serial_config *cfg,
                                  serex_executor **out);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_SERIAL_H */
