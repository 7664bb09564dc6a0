/* SPDX-License-Identifier: MIT */
/*
 * worker.c - a timed worker, like RxJava's Scheduler.Worker.
 *
 * The worker is a serial executor on a 2-thread pool; the scheduler feeds
 * it. "Run this action after a delay, in order with the worker's other
 * actions" is serex_schedule with the serial as target. Delayed actions,
 * immediate ones and a fixed-rate tick all run one at a time, so the
 * worker's state needs no lock. Equal delays run in the order scheduled;
 * the tick, cancelled with serex_timer_cancel and released with
 * serex_timer_release, never runs again. Only orders and counts are
 * checked, never timing. The serial runs at the pool's HIGH priority (so
 * other work on the pool would not delay it), and the pool's thread hooks
 * count its workers.
 */
#include <serex/serex.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define MS(n) ((n) * INT64_C(1000000))
#define TICKS 5 /* fixed-rate ticks to wait for */
#define LOG_MAX 256

static serex_event *done;

static void check(int status, const char *what)
{
    if (status != SEREX_OK) {
        fprintf(stderr, "worker: %s: %s\n", what, serex_strerror(status));
        exit(1);
    }
}

/* Plain state: the worker (a serial) runs one action at a time. */
struct action { const char *name; unsigned pos; };
static struct action acts[] = { /* 5 delayed, then 2 immediate */
    {"5ms-1", 0}, {"5ms-2", 0}, {"10ms-1", 0}, {"10ms-2", 0}, {"10ms-3", 0},
    {"now-1", 0}, {"now-2", 0}};
#define ACTIONS (sizeof acts / sizeof acts[0])
static const char *ran[LOG_MAX]; /* what ran, in order */
static unsigned ran_n, ticks, ticks_at_cancel, left = ACTIONS + 1;
static atomic_uint busy, overlaps; /* actions running now; times above 1 */
static atomic_uint started, stopped; /* pool threads, seen by its hooks */

/* Runs on each new pool thread before its first task (non-zero would
 * refuse the thread), and its twin after its last task. */
static int thread_start(void *ctx, unsigned index)
{
    (void)ctx;
    (void)index;
    atomic_fetch_add_explicit(&started, 1, memory_order_relaxed);
    return 0;
}

static void thread_stop(void *ctx, unsigned index)
{
    (void)ctx;
    (void)index;
    atomic_fetch_add_explicit(&stopped, 1, memory_order_relaxed);
}

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
    serex_pool_config cfg = {.threads = 2, .name = "worker",
                             .on_thread_start = thread_start,
                             .on_thread_stop = thread_stop};
    serex_executor *pool, *worker;
    serex_scheduler *sched;
    serex_timer *ticker;

    check(serex_pool_create(&cfg, &pool), "pool_create");
    check(serex_serial_create(serex_pool_executor_at(pool,
                                                     SEREX_POOL_PRIORITY_HIGH),
                              NULL, &worker), "serial_create");
    check(serex_scheduler_create(NULL, &sched), "scheduler_create");
    check(serex_event_create(&done), "event_create");

    check(serex_schedule_fixed_rate(sched, worker, MS(2), MS(4), tick, NULL,
                                    &ticker), "schedule_fixed_rate");
    for (unsigned i = 0; i < 5; i++)
        check(serex_schedule(sched, worker, i < 2 ? MS(5) : MS(10), action,
                             &acts[i], NULL), "schedule");
    check(serex_execute(worker, action, &acts[5]), "execute");
    check(serex_execute(worker, action, &acts[6]), "execute");
    check(serex_event_wait(done, MS(30000)), "wait for the worker");
    bool cancelled = serex_timer_cancel(ticker); /* no tick starts after */
    serex_timer_release(ticker);
    check(serex_execute(worker, after_cancel, NULL), "execute");

    /* The scheduler first (it feeds the worker), then the worker (it runs
     * on the pool), then the pool. The worker's writes are then ours. */
    check(serex_destroy(serex_scheduler_executor(sched)), "destroy scheduler");
    check(serex_destroy(worker), "destroy worker");
    check(serex_destroy(pool), "destroy pool");
    serex_event_destroy(done);

    printf("worker: ran");
    for (unsigned i = 0; i < ran_n && i < LOG_MAX; i++)
        printf(" %s", ran[i]);
    unsigned n = atomic_load_explicit(&overlaps, memory_order_relaxed);
    printf("\nworker: %u ticks, %u overlaps, %u ticks after cancel\n", ticks,
           n, ticks - ticks_at_cancel);
    printf("worker: pool threads: %u started, %u stopped\n",
           atomic_load(&started), atomic_load(&stopped));
    bool ok = cancelled && n == 0 && ticks >= TICKS
              && atomic_load(&started) == 2 && atomic_load(&stopped) == 2
              && ticks == ticks_at_cancel && ran_n == ACTIONS + ticks
              && acts[5].pos < acts[6].pos;
    for (unsigned i = 0; i + 1 < 5; i++) /* 5ms-1 < 5ms-2 < 10ms-1 < ... */
        ok &= acts[i].pos < acts[i + 1].pos;
    if (!ok) {
        fprintf(stderr, "worker: wrong order or count\n");
        return 1;
    }
    printf("worker: ok\n");
    return 0;
}
