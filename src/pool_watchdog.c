/* SPDX-License-Identifier: MIT */
/*
 * pool_watchdog.c - the starvation watchdog (starvation_ns): when queued
 * work has not been taken for that long while every worker is busy, the
 * pool adds a worker, as .NET's thread pool does from its gate thread.
 *
 * --- Why a watchdog, and where it runs ---
 * A blocking region tells the pool that a worker waits (pool_block.c). A
 * wait nobody marked (a lock, a read, a wait of another library) does
 * not: if every worker is in one and the task they wait for is queued
 * behind them, nothing moves. Submissions cannot see it: they find every
 * worker busy, as on any busy pool, and the busy path must stay free of
 * clocks. So a thread of the pool's own looks from outside: the
 * watchdog, started by serex_pool_create only when starvation_ns > 0
 * (no thread, no cost otherwise), joined by serex_destroy.
 *
 * --- What it looks at (serex__pool_starving) ---
 * Each look reads: the tasks the workers have done (the sum of their own
 * `done` counters: nothing new on the busy path), whether a task waits
 * (the idle re-check's look), and whether every worker is busy (none
 * parked, none spinning). Progress, no waiting task, or an idle worker
 * starts the patience again; a look that finds none of them for
 * starvation_ns since the first such look says "starving": the watchdog
 * counts one more worker as stuck (`starved`, which raises the cap as a
 * blocked worker does, within max_blocking: serex__pool_cap) and starts a
 * worker (serex__pool_threads_grow), and the patience starts again: at
 * most one worker per starvation_ns, as .NET adds one per half second.
 * The decision takes the time as an argument, so tests drive it with
 * their own clock (pool_internal.h).
 * `starved` goes back to 0 when a worker parks (pool_thread.c): the pool
 * has a worker to spare again. The workers added are extra threads as
 * any other, and retire once idle for keep_alive_ns while more serve than
 * the core count.
 *
 * --- Sleeping: an idle pool wakes nothing ---
 * While some worker is busy the watchdog looks every starvation_ns / 2.
 * When every live worker is parked (`sleepers` == `live`, read under `mu`)
 * there is nothing to watch: it marks itself asleep (`dog_asleep`, under
 * `mu`) and parks on its bell with no deadline, on the value it read
 * before it looked. Whatever wakes a parked worker (pool_wake_one,
 * serex__pool_wake_every) does so under `mu`, sees the mark, clears it
 * and rings the bell (adds 1, then wakes): `mu` orders the mark against
 * the wake-up, and the parking lot (which re-reads the word) any ring
 * after the read; destroy's ring (after its quit flag) too, which the
 * watchdog reads after the bell. An idle pool with a watchdog therefore
 * makes no wake-up at all; a busy one, two per starvation_ns.
 */
#include "common_internal.h"
#include "park_internal.h"
#include "thread_internal.h"

#include "pool_types_internal.h"

/* --- the decision (pool_internal.h: tests drive it) --- */

bool serex__pool_starving(struct serex__starve *w,
                          const struct serex__starve_look *look, int64_t now,
                          int64_t patience_ns)
{
    if (!look->waiting || !look->all_busy || look->done != w->done) {
        w->done = look->done; /* progress, or nothing stuck: start again */
        w->since = now;
        return false;
    }
    if (now - w->since < patience_ns)
        return false;
    w->since = now; /* one worker per patience */
    return true;
}

/* --- the watchdog thread --- */

/* What a look sees of the pool (hints: relaxed, or the re-check's). */
static struct serex__starve_look dog_look(struct pool *p)
{
    struct serex__starve_look look = {0, false, false};
    unsigned n = serex__pool_nslots(p);

    for (unsigned i = 0; i < n; i++) /* relaxed: counts, a hint */
        look.done += atomic_load_explicit(&serex__pool_slot(p, i)->done,
                                          memory_order_relaxed);
    look.waiting = serex__pool_has_work(p, true);
    /* relaxed (both): a hint, looked at again a period later */
    look.all_busy = atomic_load_explicit(&p->sleepers, memory_order_relaxed) ==
                        0 &&
                    atomic_load_explicit(&p->spinning, memory_order_relaxed) ==
                        0;
    return look;
}

/* Starving: one more worker counts as stuck, and one is started. */
static void dog_add_worker(struct pool *p)
{
    serex__mutex_lock(&p->mu);
    /* relaxed: under mu; lock-free readers (serex__pool_cap) use it as a
     * hint re-read under mu */
    if (atomic_load_explicit(&p->starved, memory_order_relaxed) <
        p->max_blocking)
        atomic_fetch_add_explicit(&p->starved, 1, memory_order_relaxed);
    /* seq_cst: as a region's (pool_block.c): submissions look from now */
    atomic_store_explicit(&p->growable, 1, memory_order_seq_cst);
    serex__mutex_unlock(&p->mu);
    serex__pool_threads_grow(p);
}

/*
 * Whether the pool is idle (every live worker parked): then the watchdog
 * is marked asleep, for wakers to ring it. Under mu.
 */
static bool dog_idle(struct pool *p)
{
    /* relaxed (both): under mu, where they change */
    bool idle = atomic_load_explicit(&p->sleepers, memory_order_relaxed) ==
                atomic_load_explicit(&p->live, memory_order_relaxed);

    p->dog_asleep = idle;
    return idle;
}

static int dog_main(void *arg)
{
    struct pool *p = arg;
    int64_t period = p->starvation_ns / 2 > 0 ? p->starvation_ns / 2 : 1;
    struct serex__starve w = {0, serex__now_ns()};

    for (;;) {
        /* acquire: pairs with a ring's release. Read before the quit flag
         * and the idle mark: a ring after this read makes the park below
         * return (the parking lot re-reads the word) */
        uint32_t bell = atomic_load_explicit(&p->dog_bell,
                                             memory_order_acquire);
        struct serex__starve_look look;
        bool idle;

        /* acquire: pairs with destroy's release store: nothing of the
         * pool is read after it */
        if (atomic_load_explicit(&p->dog_quit, memory_order_acquire))
            break;
        serex__mutex_lock(&p->mu);
        idle = dog_idle(p);
        serex__mutex_unlock(&p->mu);
        (void)serex__park_wait(&p->dog_bell, bell,
                               idle ? INT64_MAX : serex__deadline(period));
        look = dog_look(p);
        if (idle) /* woken from idle: the patience starts now */
            look.waiting = false;
        if (serex__pool_starving(&w, &look, serex__now_ns(), p->starvation_ns))
            dog_add_worker(p);
    }
    return 0;
}

/* Rings the bell: the watchdog looks again (or leaves, on quit). */
static void dog_ring(struct pool *p)
{
    /* release: what the ringer did before is seen by the watchdog's look */
    atomic_fetch_add_explicit(&p->dog_bell, 1, memory_order_release);
    serex__park_wake_all(&p->dog_bell);
}

bool serex__pool_dog_wake_locked(struct pool *p)
{
    if (!p->dog_asleep)
        return false;
    p->dog_asleep = false;
    return true;
}

void serex__pool_dog_ring(struct pool *p)
{
    dog_ring(p);
}

int serex__pool_dog_start(struct pool *p)
{
    if (p->starvation_ns == 0)
        return SEREX_OK;
    if (serex__thread_start(&p->dog, dog_main, p) != SEREX_OK)
        return SEREX_ENOMEM;
    p->dog_on = true;
    return SEREX_OK;
}

void serex__pool_dog_stop(struct pool *p)
{
    if (!p->dog_on)
        return;
    /* release: pairs with the watchdog's acquire load */
    atomic_store_explicit(&p->dog_quit, 1, memory_order_release);
    dog_ring(p);
    serex__thread_join(p->dog);
    p->dog_on = false;
}

/* --- for tests --- */

bool serex__pool_watchdog_asleep(serex_executor *ex)
{
    struct pool *p = serex__container_of(ex, struct pool, base);
    bool asleep;

    serex__mutex_lock(&p->mu);
    asleep = p->dog_asleep;
    serex__mutex_unlock(&p->mu);
    return asleep;
}
