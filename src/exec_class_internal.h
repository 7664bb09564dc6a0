/* SPDX-License-Identifier: MIT */
/*
 * exec_class_internal.h - one class record per kind of serex executor.
 *
 * The public vtable (serex_executor_ops) is what every executor, a user's
 * included, has; a serex executor's ops table is the first member of its
 * class record, which adds what only serex's own executors answer: their
 * stats, the executors they wait on (the SEREX_EDEADLK walk, promise 7)
 * and their disposal. The generic layer recognises a class record in O(1)
 * without reading past the five slots a user's table has: every class
 * table's `destroy` slot is serex__class_destroy, which no user table
 * holds, and which dispatches to the class's own destroy. So executor.c
 * names no implementation, and a new kind of executor is one more record.
 */
#ifndef SEREX_EXEC_CLASS_INTERNAL_H
#define SEREX_EXEC_CLASS_INTERNAL_H

#include <stdbool.h>

#include "common_internal.h"

struct serex__exec_class {
    serex_executor_ops ops; /* first: ex->ops points here */
    const char *name;       /* "pool", "serial", ... */
    /* Fills the fields of *out that apply (out is zeroed). */
    void (*stats)(serex_executor *ex, serex_stats *out);
    /*
     * Whether waiting for @ex could wait for a task of an executor that
     * @blocks says yes to: calls @blocks on each executor @ex runs tasks on
     * (a wrapper's target; a scheduler's timers' targets) and returns true
     * at the first yes. NULL: @ex runs on threads of its own only.
     */
    bool (*waits_on)(serex_executor *ex, bool (*blocks)(serex_executor *));
    /* The kind's destroy (the vtable's destroy slot holds the dispatcher). */
    void (*destroy)(serex_executor *ex);
    /* Metrics (metrics.h); NULL, NULL: the kind has none. enable makes
     * and publishes the kind's set (serex__metrics_publish); metrics fills
     * *out (zeroed) with the merged histograms and the counters. */
    int (*metrics_enable)(serex_executor *ex, const serex_metrics_config *cfg);
    void (*metrics)(serex_executor *ex, serex_metrics *out);
};

/* The destroy slot of every class table: dispatches to the class. */
void serex__class_destroy(serex_executor *ex);

/* @ex's class record, or NULL for an executor that is not serex's (or
 * has no vtable). */
static inline const struct serex__exec_class *serex__class_of(
    const serex_executor *ex)
{
    if (ex->ops == NULL || ex->ops->destroy != serex__class_destroy)
        return NULL;
    /* ops is the record's first member */
    return (const struct serex__exec_class *)(const void *)ex->ops;
}

/*
 * A class's vtable, with the dispatcher in the destroy slot. Use as
 *   static const struct serex__exec_class pool_class = {
 *       SEREX__CLASS_OPS(pool_execute, pool_shutdown, pool_shutdown_now,
 *                        pool_await),
 *       "pool", pool_stats, NULL, pool_destroy};
 */
#define SEREX__CLASS_OPS(execute_, shutdown_, shutdown_now_, await_)         \
    {                                                                        \
        .execute = (execute_), .shutdown = (shutdown_),                      \
        .shutdown_now = (shutdown_now_), .await_termination = (await_),      \
        .destroy = serex__class_destroy                                      \
    }

#endif /* SEREX_EXEC_CLASS_INTERNAL_H */
