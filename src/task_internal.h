/* SPDX-License-Identifier: MIT */
/*
 * task_internal.h - the task node every queue in serex links: a 64-byte,
 * cache-line-aligned block from the node cache, so two nodes never share a
 * line (a producer filling one never slows a consumer reading the other).
 */
#ifndef SEREX_TASK_INTERNAL_H
#define SEREX_TASK_INTERNAL_H

#include <stdatomic.h>

#include "common_internal.h"
#include "executor_internal.h"
#include "nodecache_internal.h"

struct serex__task {
    struct serex__task *_Atomic next; /* atomic for lock-free queues */
    serex_fn fn;
    void *arg;
    /* Its submit time (serex__metrics_stamp), 0: untimed (task_watch.c).
     * The node's address is its id for the recorder's flows. */
    uint64_t t;
};

static inline struct serex__task *serex__task_new(serex_fn fn, void *arg)
{
    struct serex__task *t = serex__cache_alloc(SEREX__CLASS_64);

    if (t != NULL) {
        /* relaxed: the node is not yet shared; publishing it orders this */
        atomic_store_explicit(&t->next, NULL, memory_order_relaxed);
        t->fn = fn;
        t->arg = arg;
        t->t = 0;
    }
    return t;
}

static inline void serex__task_free(struct serex__task *t)
{
    serex__cache_free(SEREX__CLASS_64, t);
}

/*
 * Hands back (or, with no on_pending, drops) a private list of taken-back
 * task nodes linked through `next`, in order, freeing the nodes. The
 * nodes are freed before on_pending runs, which may call back into the
 * executor.
 */
static inline void serex__task_hand_back_list(struct serex__task *t,
                                              serex_pending_fn on_pending,
                                              void *ctx)
{
    while (t != NULL) {
        /* relaxed: the list is private to the caller */
        struct serex__task *next =
            atomic_load_explicit(&t->next, memory_order_relaxed);
        serex_fn fn = t->fn;
        void *arg = t->arg;

        serex__task_free(t);
        serex__hand_back(fn, arg, on_pending, ctx);
        t = next;
    }
}

#endif /* SEREX_TASK_INTERNAL_H */
