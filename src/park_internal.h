/* SPDX-License-Identifier: MIT */
/*
 * park_internal.h - a parking lot: wait on any 32-bit atomic word without
 * a mutex or condition variable inside the object.
 *
 * Like a futex, or WebKit's ParkingLot: the word's address hashes to one of
 * a fixed set of buckets, each a mutex and a condition variable. A waiter
 * re-reads the word under the bucket lock and sleeps only if it still holds
 * the value it saw; a waker changes the word first, then takes the bucket
 * lock and broadcasts. Either the waiter's re-read sees the change, or the
 * waiter was already asleep when the broadcast came: no wake-up is lost.
 * Objects pay for this only when someone actually waits (they keep a
 * "waiters" mark in the word and skip the wake otherwise).
 */
#ifndef SEREX_PARK_INTERNAL_H
#define SEREX_PARK_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "common_internal.h" /* SEREX__THREAD_LOCAL */

/*
 * Sleeps while *word == expected, until woken or monotonic @deadline_ns
 * (INT64_MAX: no limit). May return spuriously: callers loop.
 * Returns 0, or SEREX_ETIMEDOUT once the deadline has passed.
 * On a thread with a wait driver (thread_internal.h: an autoclock's) it
 * never sleeps: while the word is unchanged it makes one step of the
 * driver, whose clock then decides the time-out.
 */
int serex__park_wait(_Atomic uint32_t *word, uint32_t expected,
                     int64_t deadline_ns);

/* The same for a 64-bit word. */
int serex__park_wait64(_Atomic uint64_t *word, uint64_t expected,
                       int64_t deadline_ns);

/*
 * Wakes every thread parked on @word (and possibly others: they re-check).
 * Uses the address only, never reads it: callers may wake after the last
 * change that lets a waiter free the word's owner.
 */
void serex__park_wake_all(const volatile void *word);

/*
 * A blocker: what a thread's waits tell before they sleep and after they
 * wake (since 0.3.0). A pool sets one on each of its workers while they
 * run tasks (pool_block.c), so that a task that sleeps in a serex wait
 * (a future's, an event's, a latch's, a group's, an execute that waits for
 * room) lets its pool start another worker. The core never calls up into
 * a component: the component sets this thread-local and the parking lot
 * calls through it. NULL (every other thread): nothing is told, and a wait
 * costs one thread-local load more than before, on its way to sleep.
 * begin and end come in pairs, on the waiting thread, with no lock of the
 * parking lot held; a blocker's calls must not park on a word themselves.
 */
struct serex__blocker {
    void (*begin)(struct serex__blocker *b);
    void (*end)(struct serex__blocker *b);
};

extern SEREX__THREAD_LOCAL struct serex__blocker *serex__park_blocker;

/* fork(): hold every bucket across it (fork.c; see fork_internal.h). */
void serex__park_fork_lock(void);
void serex__park_fork_unlock(void);
/* In a child after fork(): every bucket made anew, unlocked (park.c). */
void serex__park_fork_child(void);

#endif /* SEREX_PARK_INTERNAL_H */
