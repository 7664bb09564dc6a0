/* SPDX-License-Identifier: MIT */
/*
 * park.c - the parking lot (see park_internal.h for the protocol).
 */
#include "park_internal.h"

#include <stdbool.h>

#include "common_internal.h"
#include "thread_internal.h"

#define NBUCKETS 64 /* power of two */

struct bucket {
    _Alignas(SEREX__CACHELINE) serex__mutex mu; /* one line per bucket */
    serex__cond cv;
};

static struct bucket park_buckets[NBUCKETS];

SEREX__THREAD_LOCAL struct serex__blocker *serex__park_blocker;
static serex__once park_buckets_once = SEREX__ONCE_INIT;

static void park_buckets_init(void)
{
    /*
     * Mutex and condition variable creation cannot fail on the platforms
     * serex supports (glibc allocates nothing for them); if it did, the
     * first wait would fail loudly here rather than hang later.
     */
    for (int i = 0; i < NBUCKETS; i++) {
        int rc = serex__mutex_init(&park_buckets[i].mu);
        if (rc == SEREX_OK)
            rc = serex__cond_init(&park_buckets[i].cv);
        SEREX_ASSERT(rc == SEREX_OK);
        (void)rc;
    }
}

static struct bucket *park_bucket(const volatile void *addr)
{
    uintptr_t h = (uintptr_t)addr;

    serex__call_once(&park_buckets_once, park_buckets_init);
    h ^= h >> 17;
    h *= UINT64_C(0x9E3779B97F4A7C15) & UINTPTR_MAX;
    return &park_buckets[(h >> 7) & (NBUCKETS - 1)];
}

/* Sleeps on @addr's bucket while unchanged(addr, expected) holds. */
static int park_wait(const void *addr,
                     bool (*unchanged)(const void *, uint64_t),
                     uint64_t expected, int64_t deadline_ns)
{
    struct serex__wait_driver *d = serex__wait_driver_tls;
    struct bucket *b;
    int rc = 0;

    /*
     * An autoclock's thread (thread_internal.h): instead of sleeping, one
     * step of the driver, no lock held (it runs tasks); the caller loops
     * and looks at its condition again, as after a spurious wake-up.
     */
    if (serex__unlikely(d != NULL))
        return unchanged(addr, expected) ? d->step(d, deadline_ns) : 0;
    b = park_bucket(addr);
    serex__mutex_lock(&b->mu);
    /*
     * The word is read under the bucket lock, so a change made before the
     * waker took the lock is seen here (the lock orders it), and one made
     * after finds us asleep in the wait below.
     */
    if (unchanged(addr, expected)) {
        if (deadline_ns != INT64_MAX && serex__now_ns() >= deadline_ns)
            rc = SEREX_ETIMEDOUT;
        else
            serex__cond_wait_until(&b->cv, &b->mu, deadline_ns);
    }
    serex__mutex_unlock(&b->mu);
    return rc;
}

static bool unchanged32(const void *addr, uint64_t expected)
{
    /* acquire: pairs with the waker's release change of the word */
    return atomic_load_explicit((_Atomic uint32_t *)addr,
                                memory_order_acquire) == (uint32_t)expected;
}

static bool unchanged64(const void *addr, uint64_t expected)
{
    /* acquire: pairs with the waker's release change of the word */
    return atomic_load_explicit((_Atomic uint64_t *)addr,
                                memory_order_acquire) == expected;
}

/*
 * A wait on a thread with a blocker (a pool's worker in a task): told
 * before it sleeps and after it wakes, with no bucket lock held (the
 * blocker may wake or start a thread, whose parking lot calls take a
 * bucket lock). A word that has changed already sleeps not, and tells
 * nothing.
 */
static int park_wait_told(struct serex__blocker *b, const void *addr,
                          bool (*unchanged)(const void *, uint64_t),
                          uint64_t expected, int64_t deadline_ns)
{
    int rc;

    if (!unchanged(addr, expected))
        return 0;
    b->begin(b);
    rc = park_wait(addr, unchanged, expected, deadline_ns);
    b->end(b);
    return rc;
}

int serex__park_wait(_Atomic uint32_t *word, uint32_t expected,
                     int64_t deadline_ns)
{
    struct serex__blocker *b = serex__park_blocker;

    if (b != NULL)
        return park_wait_told(b, (const void *)word, unchanged32, expected,
                              deadline_ns);
    return park_wait((const void *)word, unchanged32, expected, deadline_ns);
}

int serex__park_wait64(_Atomic uint64_t *word, uint64_t expected,
                       int64_t deadline_ns)
{
    struct serex__blocker *b = serex__park_blocker;

    if (b != NULL)
        return park_wait_told(b, (const void *)word, unchanged64, expected,
                              deadline_ns);
    return park_wait((const void *)word, unchanged64, expected, deadline_ns);
}

void serex__park_wake_all(const volatile void *word)
{
    struct bucket *b = park_bucket(word); /* the address only: never read */

    serex__mutex_lock(&b->mu);
    serex__cond_broadcast(&b->cv);
    serex__mutex_unlock(&b->mu);
}

void serex__park_fork_lock(void)
{
    serex__call_once(&park_buckets_once, park_buckets_init);
    for (int i = 0; i < NBUCKETS; i++)
        serex__mutex_lock(&park_buckets[i].mu);
}

void serex__park_fork_unlock(void)
{
    for (int i = NBUCKETS - 1; i >= 0; i--)
        serex__mutex_unlock(&park_buckets[i].mu);
}

void serex__park_fork_child(void)
{
    /*
     * Made anew, not unlocked: a parent thread that was waiting on a
     * bucket at the fork is still on that condition variable's waiter
     * list in the child's copy (musl keeps the list in the object), and a
     * broadcast in the child would go to it instead of to a real waiter:
     * the child hung (10 runs of 10 under load). The child has one thread
     * and holds every bucket lock (fork_prepare), so nothing else can
     * touch them; the old objects are dropped, not destroyed (destroying
     * a condition variable with waiters is undefined).
     */
    park_buckets_init();
}
