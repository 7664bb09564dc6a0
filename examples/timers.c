/* SPDX-License-Identifier: MIT */
/*
 * timers.c - the scheduler: retries with backoff, and a timed worker.
 *
 * 1. A flaky operation on a pool fails 3 times; each failure schedules the
 *    next attempt onto the pool after a doubling backoff (1, 2, 4 ms).
 * 2. A worker, like RxJava's Scheduler.Worker: a serial on the pool, fed by
 *    the scheduler. Delayed actions, immediate ones and a fixed-rate tick
 *    run one at a time; equal delays run in the order scheduled, and a
 *    cancelled tick never runs again. Only orders and counts are checked.
 */
#include <serex/serex.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define MS(n) ((n) * INT64_C(1000000))
#define FAILURES 3 /* attempts 1..3 fail, attempt 4 succeeds */
#define TICKS 5    /* fixed-rate ticks to wait for */
#define LOG_MAX 256

static serex_scheduler *sched;
static serex_executor *pool, *worker;
static serex_event *done;

static void check(int status, const char *what)
{
    if (status != SEREX_OK) {
        fprintf(stderr, "timers: %s: %s\n", what, serex_strerror(status));
        exit(1);
    }
}

/* 1. Plain state: one attempt runs at a time, each scheduled by the last. */
static unsigned attempts;
static int64_t backoff_ns = MS(1);

static void flaky_operation(void *arg)
{
    (void)arg;
    if (++attempts > FAILURES) { /* it worked */
        serex_event_signal(done);
        return;
    }
    int64_t wait = backoff_ns;
    backoff_ns *= 2; /* before scheduling: the next attempt may start */
    printf("timers: attempt %u failed, retrying in %lld ms\n", attempts,
           (long long)(wait / MS(1)));
    check(serex_schedule(sched, pool, wait, flaky_operation, NULL, NULL),
          "schedule a retry");
}

/* 2. Plain state too: the worker (a serial) runs one action at a time. */
struct action { const char *name; unsigned pos; };
static struct action acts[] = { /* 5 delayed, then 2 immediate */
    {"5ms-1", 0}, {"5ms-2", 0}, {"10ms-1", 0}, {"10ms-2", 0}, {"10ms-3", 0},
    {"now-1", 0}, {"now-2", 0}};
#define ACTIONS (sizeof acts / sizeof acts[0])
static const char *ran[LOG_MAX]; /* what ran, in order */
static unsigned ran_n, ticks, ticks_at_cancel, left = ACTIONS + 1;
static atomic_uint busy, overlaps; /* actions running now; times above 1 */

static unsigned worker_log(const char *name, bool counts)
{
    unsigned pos = ran_n++;

    /* Relaxed: only counted; destroying the serial publishes them. */
    if (atomic_fetch_add_explicit(&busy, 1, memory_order_relaxed) != 0)
        atomic_fetch_add_explicit(&overlaps, 1, memory_order_relaxed);
    if (pos < LOG_MAX)
        ran[pos] = name;
    if (counts && --left == 0) /* every action ran, and TICKS ticks */
        serex_event_signal(done);
    atomic_fetch_sub_explicit(&busy, 1, memory_order_relaxed);
    return pos;
}

static void action(void *arg)
{
    struct action *a = arg;

    a->pos = worker_log(a->name, true);
}

static void tick(void *arg)
{
    (void)arg;
    worker_log("tick", ++ticks == TICKS);
}

static void after_cancel(void *arg) /* queued once the cancel returned */
{
    (void)arg;
    ticks_at_cancel = ticks;
}

int main(void)
{
    serex_pool_config cfg = {.threads = 2, .name = "timers"};
    serex_timer *ticker;

    check(serex_pool_create(&cfg, &pool), "pool_create");
    check(serex_serial_create(pool, NULL, &worker), "serial_create");
    check(serex_scheduler_create(NULL, &sched), "scheduler_create");
    check(serex_event_create(&done), "event_create");

    int64_t start = serex_scheduler_now(sched);
    check(serex_execute(pool, flaky_operation, NULL), "execute");
    check(serex_event_wait(done, 10 * MS(1000)), "wait for the retries");
    printf("timers: attempt %u succeeded, %.1f ms after the first\n",
           attempts, (double)(serex_scheduler_now(sched) - start) / 1e6);

    check(serex_schedule_fixed_rate(sched, worker, MS(2), MS(4), tick, NULL,
                                    &ticker), "schedule_fixed_rate");
    for (unsigned i = 0; i < 5; i++)
        check(serex_schedule(sched, worker, i < 2 ? MS(5) : MS(10), action,
                             &acts[i], NULL), "schedule");
    check(serex_execute(worker, action, &acts[5]), "execute");
    check(serex_execute(worker, action, &acts[6]), "execute");
    check(serex_event_wait(done, 10 * MS(1000)), "wait for the worker");
    bool cancelled = serex_timer_cancel(ticker); /* no tick starts after */
    serex_timer_release(ticker);
    check(serex_execute(worker, after_cancel, NULL), "execute");

    /* The scheduler first (it feeds the worker), then the worker (it runs
     * on the pool), then the pool. The worker's writes are then ours. */
    check(serex_destroy(serex_scheduler_executor(sched)), "destroy scheduler");
    check(serex_destroy(worker), "destroy worker");
    check(serex_destroy(pool), "destroy pool");
    serex_event_destroy(done);

    printf("timers: the worker ran:");
    for (unsigned i = 0; i < ran_n && i < LOG_MAX; i++)
        printf(" %s", ran[i]);
    unsigned n = atomic_load_explicit(&overlaps, memory_order_relaxed);
    printf("\ntimers: %u ticks, %u overlaps, %u ticks after cancel\n", ticks,
           n, ticks - ticks_at_cancel);
    bool ok = attempts == FAILURES + 1 && cancelled && n == 0
              && ticks >= TICKS && ticks == ticks_at_cancel
              && ran_n == ACTIONS + ticks && acts[5].pos < acts[6].pos;
    for (unsigned i = 0; i + 1 < 5; i++) /* 5ms-1 < 5ms-2 < 10ms-1 < ... */
        ok &= acts[i].pos < acts[i + 1].pos;
    if (!ok) {
        fprintf(stderr, "timers: wrong order or count\n");
        return 1;
    }
    printf("timers: ok\n");
    return 0;
}
