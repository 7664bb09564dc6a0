/* SPDX-License-Identifier: MIT */
/*
 * stats_internal.h - the counters behind serex_stats: each component
 * fills them for its own executors through its class record
 * (exec_class_internal.h).
 */
#ifndef SEREX_STATS_INTERNAL_H
#define SEREX_STATS_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "serex/serex.h"

/* One writer: a load and a store, no locked instruction (relaxed: a
 * statistic; readers take what they see). */
static inline void serex__stat_add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

#endif /* SEREX_STATS_INTERNAL_H */
