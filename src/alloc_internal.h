/* SPDX-License-Identifier: MIT */
/*
 * alloc_internal.h - the one allocator entry point (alloc.c), over the
 * platform's memory (serex__os_alloc), with a test hook that fails the
 * n-th allocation so that allocation failure is tested like any other
 * input.
 */
#ifndef SEREX_ALLOC_INTERNAL_H
#define SEREX_ALLOC_INTERNAL_H

#include <stddef.h> /* size_t */

/*
 * All allocation goes through these, so tests can fail any allocation.
 * serex__alloc returns NULL on failure (real or injected).
 */
void *serex__alloc(size_t size);
void *serex__calloc(size_t n, size_t size);
void *serex__alloc_aligned(size_t align, size_t size);
/* serex__alloc_aligned, zeroed: the objects each create call makes. */
void *serex__calloc_aligned(size_t align, size_t size);
void serex__free(void *p);

/*
 * Test hook: the n-th allocation from now fails (n >= 1), and every one
 * after it succeeds again; n = 0 disables injection. Returns the number of
 * allocations made since the previous call, so a test can first count the
 * allocations an operation makes and then fail each in turn.
 */
unsigned long serex__alloc_fail_nth(unsigned long n);
/*
 * Test hook: allocations made, by any thread, while that thread held a
 * serex spinlock, since the last call (and resets the count). Counted in
 * Debug builds only: without NDEBUG; always 0 with it.
 */
unsigned long serex__alloc_spin_count(void);

#endif /* SEREX_ALLOC_INTERNAL_H */
