/* SPDX-License-Identifier: MIT */
/*
 * fanout.c - fan work out and gather it without a blocking wait, except
 * the one at the very end: a parallel word count.
 *
 * Each document is counted on the pool by a task of one group; each count
 * is a future, and serex_future_then chains a second step on it (the
 * document's share of the words, once its count is known). When the group
 * is empty, serex_group_notify posts the report to a serial executor; the
 * report runs there, after every count and every chained step, and signals
 * the event that main waits on. No task ever waits for another.
 */
#include <serex/serex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DOCS 6

static const char *const docs[DOCS] = {
    "the quick brown fox jumps over the lazy dog",
    "a serial executor runs one task at a time in order",
    "futures park continuations instead of blocking threads",
    "groups count tasks across executors and say when all are done",
    "no thread waits here except main at the very end",
    "word counts gathered by continuations",
};

static serex_future *counts[DOCS], *shares[DOCS];
static atomic_uintptr_t total;
static serex_event *done;

static void check(int rc, const char *what)
{
    if (rc != SEREX_OK) {
        fprintf(stderr, "fanout: %s: %s\n", what, serex_strerror(rc));
        exit(1);
    }
}

/* Counts the words of one document: the future's value. */
static void *count_words(void *arg)
{
    const char *s = arg;
    uintptr_t n = 0;
    int in = 0;

    for (; *s != '\0'; s++) {
        if (*s != ' ' && !in)
            n++;
        in = *s != ' ';
    }
    /* relaxed: a sum; the report reads it after the group is empty, which
     * orders every task of the group before it */
    atomic_fetch_add_explicit(&total, n, memory_order_relaxed);
    return (void *)n;
}

/* The chained step: runs once a count is known, gets it as its value. */
static void *twice(void *value)
{
    return (void *)((uintptr_t)value * 2);
}

/* A continuation: the chained step it follows has ended. */
static void leave(void *group)
{
    serex_group_leave(group);
}

/* Posted by the group, to the serial @arg, when its last task has ended. */
static void report(void *arg)
{
    uintptr_t sum = 0;

    SEREX_ASSERT_ON((serex_executor *)arg); /* stops the program if not */
    for (int i = 0; i < DOCS; i++) {
        uintptr_t n = (uintptr_t)serex_future_value(counts[i]);

        printf("fanout: doc %d: %2lu words (chained: %lu)\n", i,
               (unsigned long)n,
               (unsigned long)(uintptr_t)serex_future_value(shares[i]));
        sum += n;
    }
    printf("fanout: %lu words in all (sum of futures %lu)\n",
           (unsigned long)atomic_load(&total), (unsigned long)sum);
    serex_event_signal(done);
}

int main(void)
{
    serex_pool_config pc = {.threads = 4};
    serex_executor *pool, *out;
    serex_group *g;

    check(serex_pool_create(&pc, &pool), "pool");
    check(serex_serial_create(pool, NULL, &out), "serial");
    check(serex_group_create(&g), "group");
    check(serex_event_create(&done), "event");

    for (int i = 0; i < DOCS; i++) {
        check(serex_group_submit(g, pool, count_words, (void *)docs[i],
                                 &counts[i]),
              "submit a count");
        /* The chained step is no task of the group: count it in with
         * enter, and let a continuation of it leave. */
        check(serex_future_then(counts[i], pool, twice, &shares[i]),
              "chain a step");
        serex_group_enter(g);
        check(serex_future_on_done(shares[i], pool, leave, g),
              "leave when the step ends");
    }
    check(serex_group_notify(g, out, report, out), "notify");

    /* The one blocking wait of the program. */
    check(serex_event_wait(done, SEREX_SEC(30)), "wait for the report");

    for (int i = 0; i < DOCS; i++) {
        serex_future_release(counts[i]);
        serex_future_release(shares[i]);
    }
    check(serex_destroy(out), "destroy the serial");
    check(serex_destroy(pool), "destroy the pool");
    serex_group_destroy(g);
    serex_event_destroy(done);
    return 0;
}
