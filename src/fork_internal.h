/* SPDX-License-Identifier: MIT */
/*
 * fork_internal.h - what fork() does to serex.
 *
 * The child has one thread, so executors that own threads (pools,
 * schedulers) made before the fork are dead in it. Each records the fork
 * generation when made (serex__fork_register, which also arms the
 * handlers); in a child the generation has moved on, and they refuse work
 * instead of waiting for threads that do not exist. The handlers hold
 * serex's process-wide locks (node cache depots, parking lot) across the
 * fork, so the child finds them free and can make new executors.
 *
 * This sits above the node cache and the parking lot, whose locks it
 * takes; the thread layer only lends it the platform's hook
 * (serex__atfork).
 */
#ifndef SEREX_FORK_INTERNAL_H
#define SEREX_FORK_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Moves on by one in each child, before the child runs any code of its own. */
extern _Atomic uint32_t serex__fork_gen;

/* Arms the fork handlers (once per process) and returns the generation
 * to hand to serex__forked_since later. */
uint32_t serex__fork_register(void);

/* True in a child forked after @gen was read. */
static inline bool serex__forked_since(uint32_t gen)
{
    /* relaxed: changed only in a child, by its one thread, before any of
     * its own code runs */
    return atomic_load_explicit(&serex__fork_gen, memory_order_relaxed) != gen;
}

#endif /* SEREX_FORK_INTERNAL_H */
