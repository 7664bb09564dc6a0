/* SPDX-License-Identifier: MIT */
/*
 * common_internal.h - pieces every component uses: container_of, internal
 * assertions, branch hints, allocation (with a test hook that fails the n-th
 * allocation), argument checks shared by the public entry points. The base
 * layer: it knows no other part of serex.
 */
#ifndef SEREX_COMMON_INTERNAL_H
#define SEREX_COMMON_INTERNAL_H

#include <stddef.h> /* offsetof, size_t */
#include <stdint.h> /* int64_t */
#include <stdlib.h> /* abort */

#include "serex/serex.h"

#define serex__container_of(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#if defined(__GNUC__)
#  define serex__likely(x) __builtin_expect(!!(x), 1)
#  define serex__unlikely(x) __builtin_expect(!!(x), 0)
#else
#  define serex__likely(x) (x)
#  define serex__unlikely(x) (x)
#endif

#define SEREX__CACHELINE 64

/* Internal invariants only, never input: input gets a status code. */
#ifdef NDEBUG
#  define SEREX_ASSERT(x) ((void)0)
#else
#  define SEREX_ASSERT(x) \
      ((x) ? (void)0 : serex__assert_fail(#x, __FILE__, __LINE__))
#endif
_Noreturn void serex__assert_fail(const char *expr, const char *file, int line);

/* A misuse no status code can report (the object is gone: a future
 * released twice): prints "serex: <call>: <what>" and aborts, in every
 * build (fatal.c). */
_Noreturn void serex__misuse(const char *call, const char *what);

/*
 * All allocation goes through these two, so tests can fail any allocation.
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

/* A timeout argument is SEREX_FOREVER, 0 or positive. */
static inline int serex__timeout_valid(int64_t timeout_ns)
{
    return timeout_ns >= SEREX_FOREVER;
}

#endif /* SEREX_COMMON_INTERNAL_H */
