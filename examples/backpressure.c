/* SPDX-License-Identifier: MIT */
/*
 * backpressure.c - a producer paced by a bounded pool.
 *
 * The pool may hold at most 8 tasks waiting to start (queue_capacity).
 * serex_execute would say SEREX_EFULL whenever the producer gets ahead;
 * serex_execute_wait instead waits for room, so the producer runs at the
 * pool's pace and the queue, and its memory, stay bounded however many
 * tasks it makes. The peak seen in serex_executor_stats stays within the
 * capacity plus one task per worker (the one it is about to start).
 */
#include <serex/serex.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define TASKS 10000
#define CAPACITY 8
#define WORKERS 2

static atomic_long done;
static atomic_ulong mixed; /* what the tasks computed, so it is not elided */

static void check(int status, const char *what)
{
    if (status != SEREX_OK) {
        fprintf(stderr, "backpressure: %s: %s\n", what, serex_strerror(status));
        exit(1);
    }
}

static void work(void *arg)
{
    unsigned long x = (unsigned long)(uintptr_t)arg;

    for (int i = 0; i < 2000; i++) /* slower than the producer */
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    /* relaxed: only counted; awaiting the pool publishes them */
    atomic_fetch_xor_explicit(&mixed, x, memory_order_relaxed);
    atomic_fetch_add_explicit(&done, 1, memory_order_relaxed);
}

int main(void)
{
    serex_pool_config cfg = {.threads = WORKERS, .queue_capacity = CAPACITY};
    serex_executor *pool;
    serex_stats st;
    uint64_t peak = 0;

    check(serex_pool_create(&cfg, &pool), "pool_create");
    for (int i = 0; i < TASKS; i++) {
        /* waits while 8 tasks wait; never says SEREX_EFULL */
        check(
            serex_execute_wait(pool, work, (void *)(uintptr_t)i, SEREX_SEC(10)),
            "execute_wait");
        check(serex_executor_stats(pool, &st), "stats");
        if (st.queued > peak)
            peak = st.queued;
    }
    serex_shutdown(pool);
    check(serex_await_termination(pool, SEREX_FOREVER), "await");
    check(serex_executor_stats(pool, &st), "stats");
    printf("%ld tasks ran, %llu refused for want of room along the way, "
           "peak waiting %llu (capacity %d, %d workers)\n",
           atomic_load(&done), (unsigned long long)st.rejected,
           (unsigned long long)peak, CAPACITY, WORKERS);
    check(serex_destroy(pool), "destroy");
    if (atomic_load(&done) != TASKS || peak > CAPACITY + WORKERS) {
        fprintf(stderr, "backpressure: the queue was not held to its "
                        "capacity\n");
        return 1;
    }
    return 0;
}
