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

/* Whether a submit is watched: metrics on, the recorder, or a tool
 * attached to the task probes. relaxed: a task submitted as metrics turn
 * on is timed or not, either is right. */
static inline bool serex__task_watched(struct serex__metrics *_Atomic *ms)
{
    return ((unsigned)(atomic_load_explicit(ms, memory_order_relaxed) != NULL) |
            (unsigned)serex__obs_listening() | SEREX__PROBE_TASK_ACTIVE()) != 0;
}

/* A watched submit of @t to @ex, before its push (after it, a drain may
 * have freed the node). */
SEREX__NOINLINE void serex__task_watch_submit(
    serex_executor *ex, struct serex__metrics *_Atomic *ms,
    struct serex__task *t);

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

/* Runs @r as a task of @ex: watched (serex__task_watch_run) if marked,
 * else with its probes alone. */
static inline void serex__task_run(serex_executor *ex,
                                   struct serex__metrics *_Atomic *ms,
                                   bool shared, const struct serex__task_run *r)
{
    if (serex__unlikely(r->t != 0))
        serex__task_watch_run(ex, ms, shared, r);
    else
        serex__obs_run_plain(ex, r->fn, r->arg, r->id);
}

#endif /* SEREX_TASK_WATCH_INTERNAL_H */
