/* SPDX-License-Identifier: MIT */
/*
 * semaphore.c - bound the fetches in flight, not the tasks that start them.
 *
 * A crawler has 20 pages to fetch, at most 3 at once. A fetch's task only
 * starts it: the response comes 10 ms later from a timer, as a client
 * library's completion callback would, long after the task has returned.
 * A limiter counts task bodies (a few microseconds each here) and would
 * let all 20 fly at once; a semaphore's permit is held from the start of a
 * fetch to its response, on whatever thread that comes, so at most 3 are
 * ever in flight, and no thread waits meanwhile (the pool has 2). Once 12
 * pages are in, the crawler has enough: it cancels the token its fetches
 * were given, and those still waiting for a permit end with
 * SEREX_ECANCELED instead (those in flight finish).
 */
#include <serex/serex.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define PAGES 20
#define AT_ONCE 3
#define ENOUGH 12
#define MS 1000000 /* nanoseconds */

static serex_executor *pool;
static serex_scheduler *timers;
static serex_semaphore *fetches;
static serex_cancel *crawl;
static serex_latch *all_over;
static atomic_int in_flight, most, fetched, given_up;

static void check(int status, const char *what)
{
    if (status != SEREX_OK) {
        fprintf(stderr, "semaphore: %s: %s\n", what, serex_strerror(status));
        exit(1);
    }
}

/* The response, 10 ms after the start: the permit ends here. */
static void fetch_done(void *arg)
{
    int page = (int)(size_t)arg;

    atomic_fetch_sub(&in_flight, 1);
    if (atomic_fetch_add(&fetched, 1) + 1 == ENOUGH)
        serex_cancel_request(crawl, 0); /* enough: the waiting ones stop */
    printf("page %2d fetched\n", page);
    serex_semaphore_release(fetches, 1);
    check(serex_latch_count_down(all_over, 1), "count down");
}

/* Posted to the pool once a permit is ours, or with why not. */
static void fetch_start(void *arg, int status)
{
    int now, seen;

    if (status != SEREX_OK) { /* cancelled before its turn: no permit */
        atomic_fetch_add(&given_up, 1);
        check(serex_latch_count_down(all_over, 1), "count down");
        return;
    }
    now = atomic_fetch_add(&in_flight, 1) + 1;
    seen = atomic_load(&most);
    while (now > seen && !atomic_compare_exchange_weak(&most, &seen, now))
        ;
    /* start the "request"; this task returns at once */
    check(serex_schedule(timers, pool, 10 * MS, fetch_done, arg, NULL),
          "schedule");
}

int main(void)
{
    serex_pool_config cfg = {.threads = 2, .name = "crawler"};

    check(serex_pool_create(&cfg, &pool), "pool");
    check(serex_scheduler_create(NULL, &timers), "scheduler");
    check(serex_semaphore_create(AT_ONCE, &fetches), "semaphore");
    check(serex_cancel_create(NULL, &crawl), "token");
    check(serex_latch_create(PAGES, &all_over), "latch");
    for (size_t i = 0; i < PAGES; i++)
        check(serex_semaphore_acquire(fetches, 1, pool, fetch_start, (void *)i,
                                      crawl),
              "acquire");
    check(serex_latch_wait(all_over, SEREX_FOREVER), "wait");
    /* Every permit is back (each release came before its count-down):
     * taking them all at once succeeds, and nobody waits, so it is not a
     * jump of the queue. Then close: any late acquire is refused. */
    if (!serex_semaphore_try_acquire(fetches, AT_ONCE)) {
        fprintf(stderr, "semaphore: permits still out\n");
        return 1;
    }
    serex_semaphore_release(fetches, AT_ONCE);
    serex_semaphore_close(fetches);
    check(serex_destroy(serex_scheduler_executor(timers)), "destroy timers");
    check(serex_destroy(pool), "destroy pool");
    printf("%d fetched, %d given up, at most %d in flight (limit %d), "
           "%llu permits free\n",
           atomic_load(&fetched), atomic_load(&given_up), atomic_load(&most),
           AT_ONCE, (unsigned long long)serex_semaphore_available(fetches));
    serex_semaphore_destroy(fetches);
    serex_cancel_release(crawl);
    serex_latch_destroy(all_over);
    return atomic_load(&most) <= AT_ONCE && atomic_load(&fetched) >= ENOUGH &&
                   atomic_load(&fetched) + atomic_load(&given_up) == PAGES
               ? 0
               : 1;
}
