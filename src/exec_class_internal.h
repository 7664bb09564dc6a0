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

#include <stddef.h> /* offsetof */

#include "common_internal.h"
#include "registry_internal.h"

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
     * and publishes the kind's set (serex__metrics_publish); metrics adds
     * the merged histograms and the counters to *out, whose queue_length
     * the caller has set from the stats' `queued`. */
    int (*metrics_enable)(serex_executor *ex, const serex_metrics_config *cfg);
    void (*metrics)(serex_executor *ex, serex_metrics *out);
    /*
     * serex_dump (registry_internal.h): where the kind's struct keeps its
     * struct serex__reg, as an offset from the executor (0: the kind is
     * not listed: a pool's priority faces, whose pool is), the record the
     * registry lists it by (the kind's name, serex__exec_describe), and
     * the kind's own fields beyond the common ones (NULL: none; the rules
     * of a describe apply).
     */
    size_t reg_offset;
    struct serex__reg_class reg;
    void (*describe)(serex_executor *ex, struct serex__dump *d);
};

/* The fields of a class record after `metrics`, for a kind listed by
 * serex_dump: SEREX__CLASS_REG(struct pool, base, reg, "pool", describe) */
#define SEREX__CLASS_REG(type_, base_, reg_, name_, describe_) \
  offsetof(type_, reg_) - offsetof(type_, base_),              \
      {(name_), serex__exec_describe}, (describe_)

/* The describe of every listed executor: its stats, its metrics' summary
 * when on, then its class's describe. */
void serex__exec_describe(struct serex__reg *r, struct serex__dump *d);
/* Lists @ex (a serex executor whose class has a reg_offset) for serex_dump
 * under @name (NULL: its kind; else a string that lives as long as @ex):
 * the last step of its create, which takes no lock (a create in a forked
 * child must not). Its removal is serex__class_destroy's first. */
void serex__exec_register(serex_executor *ex, const char *name);

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
