/* SPDX-License-Identifier: MIT */
/*
 * serex/gate.h - the gate: tasks parked until the gate opens.
 *
 * A gate never blocks a thread: while it is closed, serex_gate_execute
 * parks the task (a function, its argument and the executor to run it on)
 * and returns at once; serex_gate_open posts the parked tasks to their
 * executors, in arrival order. It is the "blocked task" of a coroutine
 * scheduler, without a thread held while it waits.
 */
#ifndef SEREX_GATE_H
#define SEREX_GATE_H

#include "executor.h" /* status codes, serex_fn, serex_executor, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct serex_gate serex_gate;

/*
 * serex_gate_create - a gate, open or closed.
 *
 * While closed, serex_gate_execute parks tasks (each with its own target
 * executor); serex_gate_open releases them to their targets in arrival
 * order; while open, serex_gate_execute forwards at once.
 * *@out is set on success, NULL on failure.
 * Returns:   SEREX_OK; SEREX_EINVAL if out is NULL; SEREX_ENOMEM.
 * Ownership: the caller owns the gate: serex_gate_destroy it. The gate
 *            never owns the targets of its tasks.
 * Threads:   every gate call may run on any thread at once, but destroy.
 */
SEREX_API int serex_gate_create(bool open, serex_gate **out);

/*
 * serex_gate_execute - run fn(arg) on @target once the gate is open.
 *
 * Open: forwarded to @target now (its status is returned). Closed, or
 * still releasing: parked after every task parked before it; an execute
 * racing with open is never lost and never overtakes an earlier one.
 * Only parking allocates.
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL g, target or fn; SEREX_ENOMEM;
 *            what @target said, when forwarded at once. Nothing is queued
 *            on error.
 * Ownership: on SEREX_OK, arg passes to the task (or to the on_pending of
 *            serex_gate_destroy). Keep @target alive while the task may
 *            be parked for it.
 * Threads:   any thread, any number at once; never blocks (a short lock).
 */
SEREX_API int serex_gate_execute(serex_gate *g, serex_executor *target,
                                 serex_fn fn, void *arg);

/*
 * serex_gate_open - open the gate and release the parked tasks, in order.
 *
 * The tasks are posted to their targets by the calling thread, before
 * this call returns. A task whose target refuses it is kept, parked, and
 * comes back from serex_gate_destroy (it no longer holds back later
 * tasks). Opening an open gate does nothing. NULL is ignored.
 * Threads:   any thread, a task included; never blocks (it waits for no
 *            task, only for a short lock and its targets' execute calls).
 *            Only one open releases at a time: an open racing with a
 *            release returns at once and the release keeps the gate open.
 */
SEREX_API void serex_gate_open(serex_gate *g);

/*
 * serex_gate_close - close the gate: later tasks park. A close during a
 * release stops it after the batch in hand. NULL is ignored.
 * Threads:   any thread, a task included; never blocks.
 */
SEREX_API void serex_gate_close(serex_gate *g);

/*
 * serex_gate_destroy - free the gate, handing every parked task (those
 * refused by their target at release first) to on_pending(fn, arg, ctx)
 * in order (on_pending may be NULL: the tasks are dropped and never run).
 * Returns:   how many tasks were handed back or dropped; 0 for NULL.
 * Ownership: @g is gone on return; each handed-back arg is the caller's.
 * Threads:   any thread, once no other call may run on @g.
 */
SEREX_API size_t serex_gate_destroy(serex_gate *g, serex_pending_fn on_pending,
                                    void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_GATE_H */
