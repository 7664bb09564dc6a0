/* SPDX-License-Identifier: MIT */
/*
 * stats_internal.h - each component fills serex_stats for its own
 * executors; serex_executor_stats asks each in turn.
 */
#ifndef SEREX_STATS_INTERNAL_H
#define SEREX_STATS_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "serex/serex.h"

/* Each returns false (and leaves *out alone) if @ex is not its kind. */
bool serex__pool_stats(serex_executor *ex, serex_stats *out);
bool serex__serial_stats(serex_executor *ex, serex_stats *out);
bool serex__striped_stats(serex_executor *ex, serex_stats *out);
bool serex__manual_stats(serex_executor *ex, serex_stats *out);
bool serex__scheduler_stats(serex_executor *ex, serex_stats *out);

/* One writer: a load and a store, no locked instruction (relaxed: a
 * statistic; readers take what they see). */
static inline void serex__stat_add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

#endif /* SEREX_STATS_INTERNAL_H */
