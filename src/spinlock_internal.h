/* SPDX-License-Identifier: MIT */
/*
 * spinlock_internal.h - a test-and-test-and-set spinlock for critical
 * sections of a few instructions (a queue index, a pointer swap), where a
 * mutex's system call on contention would cost more than the wait. It
 * yields after a few dozen spins, in case the holder was preempted.
 */
#ifndef SEREX_SPINLOCK_INTERNAL_H
#define SEREX_SPINLOCK_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common_internal.h"
#include "thread_internal.h"

typedef _Atomic uint32_t serex__spinlock; /* 0: free; zero-initialise */

/*
 * Debug builds count the spinlocks the calling thread holds, so that
 * alloc.c can count allocations made under one (serex__alloc_spin_count):
 * a spinlock is for a few instructions, never for the allocator, whose
 * lock a preempted holder would make every spinner wait on. Release
 * builds (NDEBUG) pay nothing.
 */
#ifndef NDEBUG
extern SEREX__THREAD_LOCAL unsigned serex__spin_held;
#  define SEREX__SPIN_HELD(d) ((void)(serex__spin_held += (unsigned)(d)))
#else
#  define SEREX__SPIN_HELD(d) ((void)0)
#endif

static inline void serex__spin_lock(serex__spinlock *l)
{
    unsigned spins = 0;

    /* acquire: pairs with the release in serex__spin_unlock, so the
     * previous holder's writes are visible to us */
    while (atomic_exchange_explicit(l, 1, memory_order_acquire) != 0) {
        do {
            if (++spins % 64 == 0)
                serex__thread_yield();
            else
                serex__cpu_relax();
            /* relaxed: only waits for a chance; the exchange orders */
        } while (atomic_load_explicit(l, memory_order_relaxed) != 0);
    }
    SEREX__SPIN_HELD(1);
}

/* Takes the lock if it is free, without waiting. Returns whether. */
static inline bool serex__spin_trylock(serex__spinlock *l)
{
    /* relaxed: a look; acquire: as serex__spin_lock */
    if (atomic_load_explicit(l, memory_order_relaxed) != 0 ||
        atomic_exchange_explicit(l, 1, memory_order_acquire) != 0)
        return false;
    SEREX__SPIN_HELD(1);
    return true;
}

static inline void serex__spin_unlock(serex__spinlock *l)
{
    SEREX__SPIN_HELD(-1);
    /* release: publishes the critical section to the next holder */
    atomic_store_explicit(l, 0, memory_order_release);
}

#endif /* SEREX_SPINLOCK_INTERNAL_H */
