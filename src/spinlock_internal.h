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
#include <stdint.h>

#include "thread_internal.h"

typedef _Atomic uint32_t serex__spinlock; /* 0: free; zero-initialise */

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
}

static inline void serex__spin_unlock(serex__spinlock *l)
{
    /* release: publishes the critical section to the next holder */
    atomic_store_explicit(l, 0, memory_order_release);
}

#endif /* SEREX_SPINLOCK_INTERNAL_H */
