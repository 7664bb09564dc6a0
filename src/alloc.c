/* SPDX-License-Identifier: MIT */
/*
 * alloc.c - the one allocator entry point, with a test hook that fails the
 * n-th allocation so that allocation failure is tested like any other input.
 * The memory itself is the platform's (serex__os_alloc, thread_internal.h).
 */
#include <stdatomic.h>
#include <stdint.h> /* SIZE_MAX */
#include <string.h> /* memset */

#include "alloc_internal.h"
#include "common_internal.h"
#include "spinlock_internal.h"
#include "thread_internal.h"

/*
 * fail_at: the value of `alloc_count` at which an allocation fails (0:
 * never). alloc_count: allocations made since the hook was last set. Both
 * relaxed: the hook is a test instrument, set before the operation it
 * targets, and a count off by a racing thread only moves which allocation
 * fails.
 */
static _Atomic unsigned long fail_at;
static _Atomic unsigned long alloc_count;

#ifndef NDEBUG
SEREX__THREAD_LOCAL unsigned serex__spin_held;
#endif
/* Allocations made while the calling thread held a spinlock (Debug). */
static _Atomic unsigned long under_spin;

static int alloc_should_fail(void)
{
    unsigned long n, at = atomic_load_explicit(&fail_at, memory_order_relaxed);

#ifndef NDEBUG
    if (serex__unlikely(serex__spin_held != 0)) /* relaxed: a count */
        atomic_fetch_add_explicit(&under_spin, 1, memory_order_relaxed);
#endif
    n = atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed) + 1;
    if (serex__likely(at == 0) || n != at)
        return 0;
    atomic_store_explicit(&fail_at, 0, memory_order_relaxed);
    return 1;
}

void *serex__alloc(size_t size)
{
    return alloc_should_fail() ? NULL : serex__os_alloc(0, size);
}

void *serex__calloc(size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size)
        return NULL; /* the product would wrap */
    return alloc_should_fail() ? NULL : serex__os_calloc(n, size);
}

void *serex__alloc_aligned(size_t align, size_t size)
{
    return alloc_should_fail() ? NULL : serex__os_alloc(align, size);
}

void *serex__calloc_aligned(size_t align, size_t size)
{
    void *p = serex__alloc_aligned(align, size);

    if (p != NULL)
        memset(p, 0, size);
    return p;
}

void serex__free(void *p)
{
    serex__os_free(p);
}

unsigned long serex__alloc_fail_nth(unsigned long n)
{
    /* relaxed: see the field comment */
    unsigned long made = atomic_exchange_explicit(&alloc_count, 0,
                                                  memory_order_relaxed);

    atomic_store_explicit(&fail_at, n, memory_order_relaxed);
    return made;
}

unsigned long serex__alloc_spin_count(void)
{
    /* relaxed: a count read once the test's operations are done */
    return atomic_exchange_explicit(&under_spin, 0, memory_order_relaxed);
}
