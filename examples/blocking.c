/* SPDX-License-Identifier: MIT */
/*
 * blocking.c - tasks that wait for tasks, on a fixed pool, and a pool
 * resized at run time.
 *
 * Each of 16 jobs splits itself into 4 parts, submits them to its own
 * pool and waits for their futures. On a fixed pool of 2 threads that
 * deadlocks without help: both workers wait for parts queued behind the
 * jobs. Marking the waits as blocking regions (here with mark_waits, so
 * serex_future_wait marks itself; serex_blocking_begin/end mark any other
 * wait) lets the pool start a compensating worker for each waiting one,
 * up to max_blocking, and let it go again once idle. Then the pool is
 * resized to 4 threads for a burst and back to 2.
 */
#include <serex/serex.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define JOBS 16
#define PARTS 4

static serex_executor *pool;
static serex_latch *jobs_done, *latches[2]; /* freed after the pool */
static long totals[JOBS];

static void check(int status, const char *what)
{
    if (status != SEREX_OK) {
        fprintf(stderr, "blocking: %s: %s\n", what, serex_strerror(status));
        exit(1);
    }
}

static void *part(void *arg) /* a part of job j: (j, k) -> j * 10 + k */
{
    return (void *)(uintptr_t)arg;
}

static void job(void *arg)
{
    uintptr_t j = (uintptr_t)arg;
    serex_future *parts[PARTS];
    long sum = 0;

    for (uintptr_t k = 0; k < PARTS; k++)
        check(serex_submit(pool, part, (void *)(j * 10 + k), &parts[k]),
              "submit a part");
    /* One region around all the waits: the pool compensates once for the
     * whole loop (each serex_future_wait would also mark itself, with
     * mark_waits; regions nest) */
    serex_blocking_begin();
    for (int k = 0; k < PARTS; k++) {
        check(serex_future_wait(parts[k], SEREX_FOREVER), "wait for a part");
        sum += (long)(uintptr_t)serex_future_value(parts[k]);
        serex_future_release(parts[k]);
    }
    serex_blocking_end();
    totals[j] = sum;
    check(serex_latch_count_down(jobs_done, 1), "count down");
}

static void run_jobs(int run, const char *when)
{
    long all = 0;

    check(serex_latch_create(JOBS, &latches[run]), "latch_create");
    jobs_done = latches[run];
    for (uintptr_t j = 0; j < JOBS; j++)
        check(serex_execute(pool, job, (void *)j), "execute a job");
    /* the wait orders the jobs' totals before our reads */
    check(serex_latch_wait(jobs_done, SEREX_FOREVER), "wait for the jobs");
    for (int j = 0; j < JOBS; j++)
        all += totals[j];
    printf("blocking: %s: %d jobs of %d parts, total %ld\n", when, JOBS, PARTS,
           all);
    if (all != (long)PARTS * 10 * (JOBS * (JOBS - 1) / 2) +
                   (long)JOBS * (PARTS * (PARTS - 1) / 2)) {
        fprintf(stderr, "blocking: wrong total\n");
        exit(1);
    }
}

int main(void)
{
    serex_pool_config cfg = {
        .threads = 2, .name = "blocking", .mark_waits = true};
    serex_stats st;

    check(serex_pool_create(&cfg, &pool), "pool_create");
    run_jobs(0, "2 threads");
    check(serex_pool_resize(pool, 4, 4), "resize to 4");
    run_jobs(1, "4 threads");
    check(serex_pool_resize(pool, 2, 2), "resize to 2");
    check(serex_executor_stats(pool, &st), "stats");
    printf("blocking: %llu tasks done\n", (unsigned long long)st.completed);
    check(serex_destroy(pool), "destroy");
    /* a count-down may still have been returning when its wait ended:
     * its task is over now */
    serex_latch_destroy(latches[0]);
    serex_latch_destroy(latches[1]);
    printf("blocking: ok\n");
    return 0;
}
