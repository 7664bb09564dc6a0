/* SPDX-License-Identifier: MIT */
/*
 * ticks_internal.h - the CPU's own counter, where it has one that ticks at
 * one constant rate on every core (x86's invariant TSC, arm64's generic
 * timer): read in tens of cycles where the monotonic clock costs ~20 ns.
 * The flight recorder stamps its events with it (trace.c) and the
 * histograms time their samples with it (histogram.c): each converts
 * ticks to nanoseconds with a ratio measured against serex__now_ns.
 * Without such a counter, serex__ticks() is serex__now_ns() itself
 * (SEREX__TICKS_ARE_NS).
 */
#ifndef SEREX_TICKS_INTERNAL_H
#define SEREX_TICKS_INTERNAL_H

#include <stdint.h>

#include "common_internal.h"
#include "thread_internal.h"

#if (defined(__GNUC__) || defined(__clang__)) && \
    (defined(__x86_64__) || defined(__i386__))
#  define SEREX__TICKS_NAME "tsc"
static inline uint64_t serex__ticks(void)
{
    return __builtin_ia32_rdtsc();
}
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#  define SEREX__TICKS_NAME "tsc"
static inline uint64_t serex__ticks(void)
{
    return __rdtsc(); /* <intrin.h>, from common_internal.h */
}
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
#  define SEREX__TICKS_NAME "cntvct"
static inline uint64_t serex__ticks(void)
{
    uint64_t v;

    __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
    return v;
}
#else
#  define SEREX__TICKS_NAME "monotonic"
#  define SEREX__TICKS_ARE_NS 1
static inline uint64_t serex__ticks(void)
{
    return (uint64_t)serex__now_ns();
}
#endif

#endif /* SEREX_TICKS_INTERNAL_H */
