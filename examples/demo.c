/* SPDX-License-Identifier: MIT */
/*
 * demo.c - serex in one page: a thread pool, tasks, futures, an event.
 *
 * Sums the squares of 1..N in parallel: each chunk is a future on the pool;
 * then a plain task signals an event when it is done. Every status is
 * checked; the program exits non-zero on any failure.
 */
#include <serex/serex.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHUNKS 8
#define PER_CHUNK 1000000u

struct chunk {
    uint64_t first, last, sum;
};

static void *sum_squares(void *arg)
{
    struct chunk *c = arg;

    for (uint64_t i = c->first; i <= c->last; i++)
        c->sum += i * i;
    return c;
}

static void say_done(void *arg)
{
    serex_event_signal(arg);
}

static int check(int status, const char *what)
{
    if (status != SEREX_OK) {
        fprintf(stderr, "demo: %s: %s\n", what, serex_strerror(status));
        exit(1);
    }
    return status;
}

int main(void)
{
    serex_pool_config cfg = {.threads = 4, .name = "demo"};
    serex_executor *pool;
    serex_future *futures[CHUNKS];
    struct chunk chunks[CHUNKS];
    serex_event *done;
    uint64_t total = 0, expect = 0, n = (uint64_t)CHUNKS * PER_CHUNK;

    check(serex_pool_create(&cfg, &pool), "pool_create");
    check(serex_event_create(&done), "event_create");
    for (unsigned i = 0; i < CHUNKS; i++) {
        chunks[i] = (struct chunk){i * PER_CHUNK + 1, (i + 1) * PER_CHUNK, 0};
        check(serex_submit(pool, sum_squares, &chunks[i], &futures[i]),
              "submit");
    }
    for (unsigned i = 0; i < CHUNKS; i++) {
        check(serex_future_wait(futures[i], SEREX_FOREVER), "future_wait");
        total += ((struct chunk *)serex_future_value(futures[i]))->sum;
        serex_future_release(futures[i]);
    }
    check(serex_execute(pool, say_done, done), "execute");
    check(serex_event_wait(done, 10 * INT64_C(1000000000)), "event_wait");
    for (uint64_t i = 1; i <= n; i++) /* the same sum, on one thread */
        expect += i * i;
    if (total != expect) {
        fprintf(stderr, "demo: wrong sum %llu\n", (unsigned long long)total);
        return 1;
    }
    printf("demo: %u futures on a 4-thread pool summed the squares of 1..%llu"
           " = %llu\n", CHUNKS, (unsigned long long)n,
           (unsigned long long)total);
    check(serex_destroy(pool), "destroy");
    serex_event_destroy(done);
    printf("demo: ok\n");
    return 0;
}
