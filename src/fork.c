/* SPDX-License-Identifier: MIT */
/*
 * fork.c - the fork handlers (see fork_internal.h for what a child may do).
 *
 * Lock order across the fork: the node cache depots, then the parking lot
 * buckets, released in reverse. Neither is ever held while taking the
 * other (a depot for a pointer swap, a bucket around a re-check and a
 * wait), so prepare waits only for critical sections that end by
 * themselves.
 */
#include "fork_internal.h"

#include "common_internal.h"
#include "nodecache_internal.h"
#include "park_internal.h"
#include "registry_internal.h"
#include "thread_internal.h"

_Atomic uint32_t serex__fork_gen; /* written by fork_child only */
static serex__once fork_once = SEREX__ONCE_INIT;

/* The locks in this order: registry (a leaf), depots, parking lot. */
static void fork_prepare(void)
{
    serex__reg_fork_lock();
    serex__cache_fork_lock();
    serex__park_fork_lock();
}

static void fork_parent(void)
{
    serex__park_fork_unlock();
    serex__cache_fork_unlock();
    serex__reg_fork_unlock();
}

static void fork_child(void)
{
    /* The child's copies of the locks are held by its one thread: the
     * depots' are freed by the parent's unlocks; the parking lot's are
     * made anew (their condition variables may list parent threads). */
    serex__park_fork_child();
    serex__cache_fork_unlock();
    serex__reg_fork_child(); /* the parent's dumps are not here */
    /* relaxed: the child's only thread, before it runs anything else */
    atomic_fetch_add_explicit(&serex__fork_gen, 1, memory_order_relaxed);
}

static void fork_init(void)
{
    /* If registration fails the child may find a lock held: nothing we
     * can report from here; it fails only when out of memory. */
    (void)serex__atfork(fork_prepare, fork_parent, fork_child);
}

uint32_t serex__fork_register(void)
{
    serex__call_once(&fork_once, fork_init);
    /* relaxed: the generation changes only in a child before its own code
     * runs, so this thread reads its own process's value */
    return atomic_load_explicit(&serex__fork_gen, memory_order_relaxed);
}
