/* SPDX-License-Identifier: MIT */
/*
 * task_watch_internal.h - timing and events for the executors that queue
 * task nodes (task_internal.h): serials, striped lanes, limiters. What the
 * pool does for its records (pool_watch.c), for a node: a watched submit
 * marks the node's `t` (its time, for a sample of them when the
 * histograms want it; SEREX__T_UNTIMED for the recorder alone) and tells
 * the recorder; the drain that runs a marked node records its slice, and
 * its wait and run in the executor's set when timed. The busy path looks
 * at two words to submit and at the node's mark to run, and fires the
 * probes (NOPs) itself.
 */
#ifndef SEREX_TASK_WATCH_INTERNAL_H
#define SEREX_TASK_WATCH_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "histogram_internal.h"
#include "observe_internal.h"
#include "task_internal.h"

/* A watched submit of @t to @ex, before its push (after it, a drain may
 * have freed the node). */
SEREX__NOINLINE void serex__task_watch_submit(
    serex_executor *ex, struct serex__metrics *_Atomic *ms,
    struct serex__task *t);

/*
 * A submit's look at what watches it (metrics on, the recorder, a tool
 * attached to the task probes): one predictable branch while nothing
 * does; between two samples of metrics alone, only a count down. Before
 * the push (after it, a drain may have freed the node).
 */
static inline void serex__task_watch(serex_executor *ex,
                                     struct serex__metrics *_Atomic *ms,
                                     struct serex__task *t)
{
    /* relaxed (all): a task submitted as one of them changes is watched
     * or not, either is right */
    uintptr_t metrics = (uintptr_t)atomic_load_explicit(ms,
                                                        memory_order_relaxed);
    unsigned others = atomic_load_explicit(&serex__obs_flags,
                                           memory_order_relaxed) |
                      SEREX__PROBE_TASK_ACTIVE();

    if (serex__likely((metrics | others) == 0))
        return;
    if (others == 0 && serex__metrics_left > 1) {
        serex__metrics_left--; /* not a sample (serex__metrics_sample) */
        return;
    }
    serex__task_watch_submit(ex, ms, t);
}

/* What a drain keeps of a node it frees before running it. */
struct serex__task_run {
    serex_fn fn;
    void *arg;
    uint64_t t;  /* the node's t */
    uint64_t id; /* the node's address */
};

static inline struct serex__task_run serex__task_run_of(
    const struct serex__task *t)
{
    struct serex__task_run r = {t->fn, t->arg, t->t, (uint64_t)(uintptr_t)t};

    return r;
}

/*
 * Runs @r as a task of @ex, timed if it was, its events told. @shared:
 * many threads run @ex's tasks at once (a striped's lanes, a limiter's
 * bodies): each records in its stripe; else (a serial) in the one part.
 */
SEREX__NOINLINE void serex__task_watch_run(serex_executor *ex,
                                           struct serex__metrics *_Atomic *ms,
                                           bool shared,
                                           const struct serex__task_run *r);

/*
 * Frees node @t and runs its task as a task of @ex: watched
 * (serex__task_watch_run) if marked, else plainly. The node is freed
 * before the task runs (it may queue more).
 */
static inline void serex__task_free_run(serex_executor *ex,
                                        struct serex__metrics *_Atomic *ms,
                                        bool shared, struct serex__task *t)
{
    serex_fn fn = t->fn;
    void *arg = t->arg;

    if (serex__unlikely(t->t != 0)) {
        struct serex__task_run r = serex__task_run_of(t);

        serex__task_free(t);
        serex__task_watch_run(ex, ms, shared, &r);
        return;
    }
    serex__task_free(t);
    fn(arg);
}

#endif /* SEREX_TASK_WATCH_INTERNAL_H */
