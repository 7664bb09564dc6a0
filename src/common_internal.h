/* SPDX-License-Identifier: MIT */
/*
 * common_internal.h - pieces every file uses: container_of, internal
 * assertions, branch hints, argument checks shared by the public entry
 * points. The base
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
/* Asks for the line at @p, to be written soon: a hint, never a fault. */
#  define serex__prefetch_w(p) __builtin_prefetch((p), 1, 3)
/* A slow path kept out of its caller: the busy path keeps nothing alive
 * for it (observe_internal.h's events). Not `cold`: a sampled task takes
 * it, and cold code is compiled for size (its inlines left out of line). */
#  define SEREX__NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#  define serex__likely(x) (x)
#  define serex__unlikely(x) (x)
#  define serex__prefetch_w(p) ((void)(p))
#  define SEREX__NOINLINE __declspec(noinline)
#else
#  define serex__likely(x) (x)
#  define serex__unlikely(x) (x)
#  define serex__prefetch_w(p) ((void)(p))
#  define SEREX__NOINLINE
#endif

#define SEREX__CACHELINE 64

/* Thread-local storage: C11's keyword, or MSVC's older spelling (its C
 * mode lacks _Thread_local before Visual Studio 2022 17.x). */
#if defined(_MSC_VER) && !defined(__clang__)
#  define SEREX__THREAD_LOCAL __declspec(thread)
#else
#  define SEREX__THREAD_LOCAL _Thread_local
#endif

/* Index of the highest and of the lowest set bit of @x (x != 0). */
#if defined(_MSC_VER) && !defined(__clang__)
#  include <intrin.h>
static inline unsigned serex__fls64(uint64_t x)
{
    unsigned long i;

    _BitScanReverse64(&i, x);
    return (unsigned)i;
}
static inline unsigned serex__ffs64(uint64_t x)
{
    unsigned long i;

    _BitScanForward64(&i, x);
    return (unsigned)i;
}
#else
static inline unsigned serex__fls64(uint64_t x)
{
    return 63u - (unsigned)__builtin_clzll(x);
}
static inline unsigned serex__ffs64(uint64_t x)
{
    return (unsigned)__builtin_ctzll(x);
}
#endif

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

/* A timeout argument is SEREX_FOREVER, 0 or positive. */
static inline int serex__timeout_valid(int64_t timeout_ns)
{
    return timeout_ns >= SEREX_FOREVER;
}

#endif /* SEREX_COMMON_INTERNAL_H */
