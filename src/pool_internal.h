/* SPDX-License-Identifier: MIT */
/*
 * pool_internal.h - what tests may observe of a pool's insides.
 */
#ifndef SEREX_POOL_INTERNAL_H
#define SEREX_POOL_INTERNAL_H

#include "serex/serex.h"

/* Slots of a new pool's ring: the first push past them allocates. */
#define SEREX__POOL_RING_MIN 1024u

/* Worker threads alive now. */
unsigned serex__pool_threads(serex_executor *ex);
/* Times a producer had to wake a parked worker (a futex call each). */
unsigned long serex__pool_wakes(serex_executor *ex);
/* Times a spin that found work set a shorter spin window back to its
 * longest. */
unsigned long serex__pool_spin_resets(serex_executor *ex);

/* Workers parked now (without a wake-up token). */
unsigned serex__pool_sleepers(serex_executor *ex);
/* Workers in a blocking region now (pool_block.c). */
unsigned serex__pool_blocked(serex_executor *ex);
/* Tasks in the calling worker's own run queue and next-task slot (0 on
 * a thread that is no pool's worker). */
unsigned serex__pool_own_queued(void);
/*
 * A test seam: @fn(@ctx) runs in every execute of every pool that must wake
 * or start a worker, after its task is published and before the wake-up
 * (the window in which the task may run and the pool be destroyed). NULL
 * removes it. Tests only; not thread-safe against executes in flight.
 */
void serex__pool_test_after_publish(void (*fn)(void *ctx), void *ctx);
/*
 * A test seam: @fn(@ctx) runs in every wake-up of a parked worker, after
 * the waker took it off the list and unlocked, before it stores the token
 * (the window in which that worker's keep-alive may pass). NULL removes
 * it. Tests only; not thread-safe against wake-ups in flight.
 */
void serex__pool_test_before_token(void (*fn)(void *ctx), void *ctx);

/*
 * The starvation watchdog's decision (pool_watchdog.c), apart from the
 * pool so that tests drive it with their own clock and looks.
 */
struct serex__starve {
    uint64_t done; /* tasks done at the last look */
    int64_t since; /* when the looks began to show no progress */
};

struct serex__starve_look {
    uint64_t done; /* tasks the workers have done, all together */
    bool waiting;  /* a task waits to start */
    bool all_busy; /* no worker idle: none parked, none spinning */
};

/* true: add a worker now (the patience then starts again at @now). */
bool serex__pool_starving(struct serex__starve *w,
                          const struct serex__starve_look *look, int64_t now,
                          int64_t patience_ns);
/* Whether the pool's watchdog sleeps with no deadline (the pool idle). */
bool serex__pool_watchdog_asleep(serex_executor *ex);

#endif /* SEREX_POOL_INTERNAL_H */
