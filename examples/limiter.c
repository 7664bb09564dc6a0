/* SPDX-License-Identifier: MIT */
/*
 * limiter.c - cap the calls to a slow resource without blocking a thread.
 *
 * A server allows 3 downloads at once per client. 20 downloads go through a
 * limiter of 3 on an 8-thread pool: at most 3 run at once, taken in the
 * order they were queued, and the 17 waiting ones hold no thread, so
 * the pool's other 5 threads stay free for other work (here, 20 small jobs
 * submitted to the pool directly, which finish while downloads still wait).
 * Then the server raises its allowance to 5: serex_limiter_set_max starts
 * the waiting downloads at once, up to 5 running.
 * A download "transfers" by waiting 20 ms on an event nobody signals.
 */
#include <serex/serex.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define DOWNLOADS 20
#define AT_ONCE 3
#define LATER 5    /* the allowance once the server raises it */
#define MS 1000000 /* nanoseconds */

static serex_event *never;      /* waited on with a timeout: 20 ms */
static atomic_int inside, most; /* downloads running now, and the most */
static atomic_int jobs_done, downloads_done;

static void check(int status, const char *what)
{
    if (status != SEREX_OK) {
        fprintf(stderr, "limiter: %s: %s\n", what, serex_strerror(status));
        exit(1);
    }
}

static void download(void *arg)
{
    int id = (int)(size_t)arg;
    int now = atomic_fetch_add(&inside, 1) + 1;
    int seen = atomic_load(&most);

    while (now > seen && !atomic_compare_exchange_weak(&most, &seen, now))
        ;
    if (serex_event_wait(never, 20 * MS) != SEREX_ETIMEDOUT) /* the transfer */
        exit(1);
    printf("download %2d done (%d running)\n", id, atomic_load(&inside));
    atomic_fetch_sub(&inside, 1);
    atomic_fetch_add(&downloads_done, 1);
}

static void small_job(void *arg)
{
    (void)arg;
    atomic_fetch_add(&jobs_done, 1);
}

int main(void)
{
    serex_pool_config cfg = {.threads = 8, .name = "example"};
    serex_executor *pool, *per_client;
    int jobs_before_last_download, most_before;

    check(serex_event_create(&never), "event");
    check(serex_pool_create(&cfg, &pool), "pool");
    check(serex_limiter_create(pool, AT_ONCE, &per_client), "limiter");
    for (size_t i = 0; i < DOWNLOADS; i++)
        check(serex_execute(per_client, download, (void *)i), "download");
    for (int i = 0; i < 20; i++) /* not limited: free threads run them */
        check(serex_execute(pool, small_job, NULL), "job");
    /* the jobs do not queue behind the downloads: wait for them alone */
    while (atomic_load(&jobs_done) < 20)
        (void)serex_event_wait(never, MS);
    jobs_before_last_download = atomic_load(&downloads_done) < DOWNLOADS;
    most_before = atomic_load(&most);
    /* the server now allows 5: waiting downloads start at once, up to 5 */
    check(serex_limiter_set_max(per_client, LATER), "set_max");
    printf("cap raised from %d to %u\n", AT_ONCE,
           serex_limiter_max(per_client));
    check(serex_destroy(per_client), "destroy limiter"); /* waits for all */
    check(serex_destroy(pool), "destroy pool");
    serex_event_destroy(never);
    printf("%d downloads, at most %d at once (limit %d, then %d) on 8 "
           "threads; 20 other jobs done %s\n",
           atomic_load(&downloads_done), atomic_load(&most), AT_ONCE, LATER,
           jobs_before_last_download ? "meanwhile" : "after them");
    return atomic_load(&downloads_done) == DOWNLOADS &&
                   most_before <= AT_ONCE && atomic_load(&most) <= LATER
               ? 0
               : 1;
}
