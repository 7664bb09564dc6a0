/* SPDX-License-Identifier: MIT */
/*
 * timers.c - retries with backoff on the scheduler.
 *
 * Two flaky operations run on a pool at once. Each failed attempt schedules
 * the next one onto the pool after a backoff that doubles (1, 2, 4, 8 ms)
 * up to a cap; nothing waits in between and no thread sleeps. One operation
 * succeeds on its 4th attempt; the other keeps failing and gives up after
 * its 6th. A timer never fires early, so each retry starts at least its
 * backoff after the attempt that scheduled it: that is checked, with the
 * attempt counts and outcomes, never how late a timer was.
 * Each operation also has a watchdog, a 30 s time-out that obeys the job's
 * cancellation token; when the operation is over, its last attempt (a
 * task: it must not block) cancels the watchdog with
 * serex_timer_cancel_notify, whose notice comes only once the watchdog can
 * no longer touch the operation (docs/scheduler.md, "Cancel and wait").
 * worker.c shows timers in order with other work, on a serial.
 */
#include <serex/serex.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_ATTEMPTS 6
#define BACKOFF_CAP SEREX_MS(8)

struct operation {         /* plain: one attempt at a time, each
                              scheduled by the one before */
    const char *name;
    unsigned failures;     /* attempts that fail before one succeeds */
    unsigned attempts;
    int64_t backoff_ns;    /* the next retry's delay */
    int64_t not_before;    /* the earliest the next retry may start */
    bool succeeded, early; /* early: a retry started before its backoff */
    serex_timer *watchdog; /* the operation's time-out */
};

static struct operation ops[] = {{.name = "fetch-config", .failures = 3},
                                 {.name = "upload", .failures = 100}};
#define OPS (sizeof ops / sizeof ops[0])

static serex_scheduler *sched;
static serex_executor *pool;
static serex_event *done;
static serex_cancel *job; /* the watchdogs obey it */
static atomic_uint running = OPS;

static void check(int status, const char *what)
{
    if (status != SEREX_OK) {
        fprintf(stderr, "timers: %s: %s\n", what, serex_strerror(status));
        exit(1);
    }
}

static void watchdog_fired(void *arg) /* 30 s: never, here */
{
    printf("timers: %s: timed out\n", ((struct operation *)arg)->name);
}

/* The watchdog is cancelled and can no longer touch the operation. */
static void operation_over(void *arg)
{
    (void)arg;
    if (atomic_fetch_sub_explicit(&running, 1, memory_order_acq_rel) == 1)
        serex_event_signal(done); /* both operations are over */
}

static void attempt(void *arg)
{
    struct operation *op = arg;
    int64_t now = serex_scheduler_now(sched);

    op->early |= now < op->not_before;
    if (++op->attempts > op->failures) {
        op->succeeded = true;
        printf("timers: %s: attempt %u succeeded\n", op->name, op->attempts);
    } else if (op->attempts == MAX_ATTEMPTS) {
        printf("timers: %s: attempt %u failed, giving up\n", op->name,
               op->attempts);
    } else {
        int64_t wait = op->backoff_ns;
        op->backoff_ns = wait * 2 < BACKOFF_CAP ? wait * 2 : BACKOFF_CAP;
        op->not_before = now + wait; /* the timer's due time is later */
        printf("timers: %s: attempt %u failed, retrying in %lld ms\n",
               op->name, op->attempts, (long long)(wait / SEREX_MS(1)));
        check(serex_schedule(sched, pool, wait, attempt, op, NULL),
              "schedule a retry");
        return;
    }
    check(
        serex_timer_cancel_notify(op->watchdog, pool, operation_over, op, NULL),
        "cancel the watchdog");
    serex_timer_release(op->watchdog);
}

static atomic_uint ticks;

static void tick(void *arg)
{
    (void)arg;
    atomic_fetch_add(&ticks, 1);
}

int main(void)
{
    serex_pool_config cfg = {.threads = 2, .name = "timers"};
    /* Retries need no microsecond precision: under load, one wake-up of
     * the timer thread may serve every retry due within 500 us (never
     * early; see docs/scheduler.md, "Under load"). A periodic timer whose
     * target is full misses that run and keeps ticking (the default). */
    serex_scheduler_config sc = {.coalesce_ns = SEREX_US(500),
                                 .periodic_refused = SEREX_REFUSED_MISS};

    check(serex_pool_create(&cfg, &pool), "pool_create");
    check(serex_scheduler_create(&sc, &sched), "scheduler_create");
    check(serex_event_create(&done), "event_create");
    check(serex_cancel_create(NULL, &job), "cancel_create");
    /* A progress tick every 5 ms for as long as the job lasts: it obeys
     * the job's token, so cancelling the job stops it (no handle kept:
     * the tick owns nothing) */
    check(serex_schedule_fixed_rate_token(sched, pool, 0, SEREX_MS(5), job,
                                          tick, NULL, NULL),
          "schedule the ticker");
    for (unsigned i = 0; i < OPS; i++) {
        ops[i].backoff_ns = SEREX_MS(1);
        check(serex_schedule_token(sched, pool, SEREX_SEC(30), job,
                                   watchdog_fired, &ops[i], &ops[i].watchdog),
              "schedule a watchdog");
        check(serex_execute(pool, attempt, &ops[i]), "execute");
    }
    check(serex_event_wait(done, SEREX_SEC(30)), "wait for the operations");
    serex_cancel_request(job, 0); /* the job is over: any timer left stops */
    serex_cancel_release(job);
    /* The scheduler first (it feeds the pool), then the pool: every
     * attempt's writes are then visible here. */
    check(serex_destroy(serex_scheduler_executor(sched)), "destroy scheduler");
    check(serex_destroy(pool), "destroy pool");
    serex_event_destroy(done);

    bool ok = ops[0].succeeded && ops[0].attempts == ops[0].failures + 1
              && !ops[1].succeeded && ops[1].attempts == MAX_ATTEMPTS;
    for (unsigned i = 0; i < OPS; i++)
        ok &= !ops[i].early;
    printf("timers: %s succeeded after %u retries; %s gave up after %u; "
           "no retry started early: %s; the ticker stopped with the job "
           "after %u ticks\n",
           ops[0].name, ops[0].attempts - 1, ops[1].name, ops[1].attempts - 1,
           ops[0].early || ops[1].early ? "WRONG" : "yes", atomic_load(&ticks));
    if (!ok) {
        fprintf(stderr, "timers: wrong outcome or count\n");
        return 1;
    }
    printf("timers: ok\n");
    return 0;
}
