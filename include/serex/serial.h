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

/*
 * Serial configuration; zero-initialise it (or pass NULL) for defaults.
 * New fields are only ever added at the end. A striped executor takes the
 * same struct, as serex_striped_config (striped.h); lane_capacity is for
 * it alone.
 *
 * What the capacities count: tasks *waiting*, accepted by execute and not
 * started yet. A task counts from the moment its execute takes its place
 * until the drain takes it off the queue, just before it runs; the task
 * running does not count, and neither do tasks that ran or were handed
 * back. So a serial of capacity 4 holds at most 4 waiting tasks, plus the
 * one running.
 */
typedef struct serex_serial_config {
    unsigned batch;        /* tasks run before the thread goes back to the
                              target; 0: 64 */
    size_t queue_capacity; /* tasks waiting, at most; 0: unbounded. A
                              striped: across all its lanes */
    const char *name;      /* serex_stats' name; NULL: "serial" (a
                              striped: "striped"); copied at create */
    size_t lane_capacity;  /* striped only: tasks waiting in one key's
                              lane, at most; 0: no limit per lane. A
                              serial ignores it */
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
 * are queued behind it, execute says SEREX_OK (the task is accepted) and:
 *  - if @target said SEREX_EFULL (or anything but SEREX_EREJECTED), the
 *    drain is owed: the serial's next execute submits it again, and so do
 *    await_termination and serex_destroy while they wait (every
 *    millisecond while @target stays full); until one of those calls, the
 *    queued tasks wait. A full target never costs more than that lone
 *    task;
 *  - else (SEREX_EREJECTED: shut down) the serial keeps them all (they
 *    come back from shutdown_now) and refuses new tasks with
 *    SEREX_EREJECTED (promise 5, docs/contract.md).
 * shutdown, shutdown_now and await_termination concern the serial's own
 * tasks only, never @target.
 * Bounded (cfg->queue_capacity > 0): execute returns SEREX_EFULL, with
 * nothing queued, when accepting the task would make more than
 * queue_capacity tasks wait (see the config above for what counts); the
 * cap is exact, never exceeded even by racing producers, and each place
 * the drain frees wakes callers of serex_execute_wait.
 * @cfg may be NULL. *@out is set on success and set to NULL on failure.
 * Returns:   SEREX_OK; SEREX_EINVAL if target, target->ops or out is NULL;
 *            SEREX_ENOMEM.
 * Ownership: the serial never owns @target; destroy the serial first.
 *            serex_destroy waits for the serial's queued tasks (submitting
 *            an owed drain again); if @target has terminated or rejects
 *            the drain and can no longer run them, they are dropped.
 *            cfg->name is copied: the caller may free it on return.
 * Threads:   any thread. execute may be called from any number of threads
 *            at once; it never blocks (one atomic exchange per task; a
 *            bounded serial adds a compare-and-swap on its count).
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
