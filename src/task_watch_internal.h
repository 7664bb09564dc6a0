/* SPDX-License-Identifier: MIT */
/*
 * task_watch_internal.h - timing and events for the executors that queue
 * task nodes (task_internal.h): serials, striped lanes, limiters. What the
 * pool does for its records (pool_watch.c), for a node: a watched submit
 * stamps the node's `t` (every submit while a tool listens to the probes,
 * a sample of them for the histograms) and tells the recorder; the drain
 * that runs a timed node records its wait and run in the executor's set.
 * The busy path looks at one word per side and calls nothing here while
 * nothing watches.
 */
#ifndef SEREX_TASK_WATCH_INTERNAL_H
#define SEREX_TASK_WATCH_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "histogram_internal.h"
#include "observe_internal.h"
#include "task_internal.h"

/* Whether a submit is watched: metrics on, or a listener. relaxed: a
 * task submitted as metrics turn on is timed or not, either is right. */
static inline bool serex__task_watched(struct serex__metrics *_Atomic *ms)
{
    return (atomic_load_explicit(ms, memory_order_relaxed) != NULL) |
           serex__obs_listening();
}

/* A watched submit of @t to @ex, before its push (after it, a drain may
 * have freed the node). */
void serex__task_watch_submit(serex_executor *ex,
                              struct serex__metrics *_Atomic *ms,
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

/* Whether running @r needs serex__task_watch_run. */
static inline bool serex__task_run_watched(const struct serex__task_run *r)
{
    return (r->t != 0) | serex__obs_listening();
}

/*
 * Runs @r as a task of @ex, timed if it was, its events told. @shared:
 * many threads run @ex's tasks at once (a striped's lanes, a limiter's
 * bodies): each records in its stripe; else (a serial) in the one part.
 */
void serex__task_watch_run(serex_executor *ex,
                           struct serex__metrics *_Atomic *ms, bool shared,
                           const struct serex__task_run *r);

#endif /* SEREX_TASK_WATCH_INTERNAL_H */
