/* SPDX-License-Identifier: MIT */
/*
 * serex/striped.h - the striped executor: per-key order on a shared
 * executor, with per-key lanes freed as soon as they are idle.
 */
#ifndef SEREX_STRIPED_H
#define SEREX_STRIPED_H

#include "executor.h" /* serex_executor, SEREX_API */
#include "future.h"   /* serex_future, serex_call_fn */
#include "serial.h"   /* serex_serial_config */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct serex_striped serex_striped;

/*
 * Striped configuration: the serial's struct (serial.h), zero or NULL for
 * defaults. batch is per lane drain (0: 64); queue_capacity caps the tasks
 * waiting across all lanes together, lane_capacity those waiting in any
 * one key's lane (0: no cap); name defaults to "striped". Waiting means
 * accepted and not started, as for a serial: a lane's running task does
 * not count, and neither do keyless tasks (serex_striped_executor's
 * execute), which go straight to the target.
 */
typedef serex_serial_config serex_striped_config;

/*
 * serex_striped_create - per-key serial execution on @target.
 *
 * Tasks with the same key run one at a time, in the order their execute
 * calls took effect, each happening-before the next; different keys run in
 * parallel on @target. Two distinct keys never share a lane. A key's lane
 * is made on first use and freed as soon as its queue is empty, so a
 * million distinct keys leave nothing behind. @cfg (batch per lane drain,
 * capacities, name: serex_striped_config above) may be NULL. With a
 * capacity set, serex_striped_execute returns SEREX_EFULL, with nothing
 * queued, when accepting the task would make more than queue_capacity
 * tasks wait in all lanes, or more than lane_capacity in the key's lane;
 * both caps are exact, and each freed place wakes callers of
 * serex_execute_wait.
 * If @target refuses to start a key's lane (it is full or shut down, say)
 * and the task being submitted is the lane's only one, execute returns
 * the target's status and nothing is queued: the refusal costs that task,
 * never the striped. If another task of the key has already queued behind
 * it (a second producer), both are accepted (SEREX_OK) and the lane's
 * drain is owed: the next execute (any key, or keyless), the next lane
 * drain or keyless task to start on @target, await_termination and
 * destroy resubmit it, so the key's tasks run later, in order. If @target
 * says SEREX_EREJECTED (shut down) to a drain the striped cannot give
 * back, or takes one back or drops it, the striped refuses new tasks from
 * then on with SEREX_EREJECTED; the tasks kept come back from its
 * shutdown_now, and destroy drops them (promise 5, docs/contract.md).
 * Returns:   SEREX_OK; SEREX_EINVAL if target, target->ops or out is NULL;
 *            SEREX_ENOMEM.
 * Ownership: the striped never owns @target; destroy it (serex_destroy of
 *            serex_striped_executor) before @target. cfg->name is copied.
 *            serex_destroy waits for the accepted tasks (resubmitting an
 *            owed drain until @target takes it); if @target has
 *            terminated, or refused a drain with SEREX_EREJECTED, they are
 *            dropped instead (futures cancelled).
 * Threads:
 *            call                          | may overlap with
 *            ------------------------------+--------------------------------
 *            striped_execute/submit        | every call but destroy
 *            striped_lanes                 | every call but destroy
 *            shutdown / shutdown_now       | every call but destroy
 *            await_termination             | every call but destroy
 *            destroy (serex_destroy)       | nothing
 *            await_termination and serex_destroy from a task of the
 *            striped (a lane's or a keyless one), or of an executor it runs
 *            on, say SEREX_EDEADLK. A keyless task, once accepted, is the
 *            target's: shutdown_now cannot take it back, though await and
 *            destroy wait for it.
 */
SEREX_API int serex_striped_create(serex_executor *target,
                                   const serex_striped_config *cfg,
                                   serex_striped **out);

/*
 * serex_striped_execute - run fn(arg) after every earlier task of @key.
 *
 * Returns:   SEREX_OK; SEREX_EINVAL if s or fn is NULL; SEREX_EREJECTED
 *            after shutdown (or once @target refused a drain for good:
 *            see serex_striped_create); SEREX_EFULL when the striped's or
 *            the key's lane's capacity is reached; SEREX_ENOMEM; or what
 *            @target said when it refused to start the key's lane and
 *            this task was the lane's only one. On error nothing is
 *            queued. Every error but SEREX_EINVAL counts in the stats'
 *            rejected (serex_executor_stats), SEREX_ENOMEM included, as
 *            for a pool.
 * Threads:   any thread, any number at once; takes one of the striped's
 *            shard locks for a few instructions (with queue_capacity set,
 *            a compare-and-swap on the striped's count too), never across
 *            an allocation. Never blocks: serex_striped_execute_wait
 *            waits for room instead.
 */
SEREX_API int serex_striped_execute(serex_striped *s, uint64_t key,
                                    serex_fn fn, void *arg);

/*
 * serex_striped_execute_wait - as serex_striped_execute, but wait for room
 * when the striped (queue_capacity) or the key's lane (lane_capacity) is
 * full, as serex_execute_wait does for an executor: woken when a place is
 * freed, with no polling; @timeout_ns SEREX_FOREVER, 0 (one try) or > 0.
 * Returns:   SEREX_OK; SEREX_ETIMEDOUT (never SEREX_EFULL); SEREX_EDEADLK,
 *            at once and every time, full or not, when called from a task
 *            of the striped (a lane's or a keyless one) or of an executor
 *            it runs on;
 *            SEREX_EINVAL if s or fn is NULL or timeout_ns is below
 *            SEREX_FOREVER; else what serex_striped_execute said. On any
 *            error nothing is queued.
 * Ownership: on SEREX_OK, arg passes to the task (or to on_pending).
 * Threads:   any thread, any number at once; blocks while it waits.
 */
SEREX_API int serex_striped_execute_wait(serex_striped *s, uint64_t key,
                                         serex_fn fn, void *arg,
                                         int64_t timeout_ns);

/*
 * serex_striped_submit - as serex_striped_execute, with a future.
 *
 * Returns:   as serex_striped_execute, plus SEREX_EINVAL if out is NULL;
 *            *out is NULL on error.
 */
SEREX_API int serex_striped_submit(serex_striped *s, uint64_t key,
                                   serex_call_fn fn, void *arg,
                                   serex_future **out);

/*
 * serex_striped_executor - the striped's executor face, for its life cycle
 * (shutdown, shutdown_now, await_termination, serex_destroy, which frees
 * the striped). Its execute bypasses the lanes: the task goes straight to
 * the target, in no order with any key.
 * shutdown_now hands back every queued task of every lane, each lane's in
 * order; await_termination (and destroy) resubmit owed drains while they
 * wait, trying again every millisecond while @target refuses. Returns
 * NULL for NULL.
 */
SEREX_API serex_executor *serex_striped_executor(serex_striped *s);

/*
 * serex_striped_lanes - how many lanes are alive now (keys with queued or
 * running tasks). A snapshot while tasks run; 0 once idle or after
 * shutdown_now took every task back. 0 for NULL.
 */
SEREX_API size_t serex_striped_lanes(serex_striped *s);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_STRIPED_H */
