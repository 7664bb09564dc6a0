/* SPDX-License-Identifier: MIT */
/*
 * test_metrics.c - serex_executor_metrics (metrics.h) and the pool's task
 * hooks with the task's identity (pool.h): the bucket layout, percentiles,
 * each kind's histograms under a manual clock (exact values, no timing),
 * sampling, the counters, misuse and allocation failure.
 */
#include "test_util.h"

#include <stdlib.h>

#include "alloc_internal.h" /* serex__alloc_fail_nth */

/* --- a manual clock the tests move --- */

static _Atomic int64_t clock_now;

static int64_t test_clock(void *ctx)
{
    (void)ctx;
    /* relaxed: the tests order the moves by the tasks' hand-offs */
    return atomic_load_explicit(&clock_now, memory_order_relaxed);
}

static void clock_set(int64_t t)
{
    atomic_store_explicit(&clock_now, t, memory_order_relaxed);
}

static const serex_metrics_config every_task = {1, test_clock, NULL};

/* A task that moves the clock forward by *(int64_t *)arg: its run time. */
static void advance_task(void *arg)
{
    clock_set(test_clock(NULL) + *(const int64_t *)arg);
}

static serex_metrics *metrics_of(serex_executor *ex)
{
    serex_metrics *m = calloc(1, sizeof *m); /* about 10 KiB */

    assert_non_null(m);
    assert_int_equal(serex_executor_metrics(ex, m), SEREX_OK);
    return m;
}

static void assert_one_value(const serex_histogram *h, uint64_t v)
{
    assert_int_equal(h->count, 1);
    assert_int_equal(h->sum_ns, v);
    assert_int_equal(h->max_ns, v);
    assert_int_equal(h->buckets[serex_histogram_bucket_of(v)], 1);
}

/* --- the layout --- */

static void buckets_tile_the_range(void **state)
{
    (void)state;
    assert_int_equal(serex_histogram_bucket_low(0), 0);
    for (unsigned i = 0; i < SEREX_HISTOGRAM_BUCKETS; i++) {
        uint64_t lo = serex_histogram_bucket_low(i);
        uint64_t hi = serex_histogram_bucket_low(i + 1);

        assert_true(hi > lo);
        assert_int_equal(serex_histogram_bucket_of(lo), i);
        if (i + 1 < SEREX_HISTOGRAM_BUCKETS) {
            assert_int_equal(serex_histogram_bucket_of(hi - 1), i);
            /* a bucket is at most 1/16 of its values wide */
            assert_true(lo < 16 ? hi - lo == 1 : (hi - lo) * 16 <= lo);
        }
    }
    for (uint64_t v = 0; v < 16; v++)
        assert_int_equal(serex_histogram_bucket_of(v), v);
    assert_int_equal(serex_histogram_bucket_low(SEREX_HISTOGRAM_BUCKETS),
                     UINT64_MAX);
    assert_int_equal(serex_histogram_bucket_of(UINT64_MAX),
                     SEREX_HISTOGRAM_BUCKETS - 1);
}

static void percentiles_come_from_the_buckets(void **state)
{
    serex_histogram *h = calloc(1, sizeof *h);

    (void)state;
    assert_non_null(h);
    assert_int_equal(serex_histogram_percentile(h, 0.5), 0); /* empty */
    for (uint64_t v = 1; v <= 1000; v++) {
        h->buckets[serex_histogram_bucket_of(v * 1000)]++;
        h->count++;
        h->sum_ns += v * 1000;
    }
    h->max_ns = 1000 * 1000;
    /* the median is 500 us: its bucket's upper bound, within 1/16 */
    {
        uint64_t p50 = serex_histogram_percentile(h, 0.5);
        uint64_t p99 = serex_histogram_percentile(h, 0.99);

        assert_true(p50 >= 500000 && p50 <= 500000 + 500000 / 16);
        assert_true(p99 >= 990000 && p99 <= 1000000);
    }
    assert_int_equal(serex_histogram_percentile(h, 1.0), 1000000);
    /* q = 0: the smallest value's bucket, [992, 1024) */
    assert_int_equal(
        serex_histogram_percentile(h, 0.0),
        serex_histogram_bucket_low(serex_histogram_bucket_of(1000) + 1) - 1);
    assert_int_equal(serex_histogram_percentile(h, 0.0), 1023);
    assert_int_equal(serex_histogram_percentile(h, -0.1), 0);
    assert_int_equal(serex_histogram_percentile(h, 1.5), 0);
    assert_int_equal(serex_histogram_percentile(NULL, 0.5), 0);
    free(h);
}

/* --- the pool --- */

struct gate_arg {
    serex_event *go;
    serex_event *started;
};

/* Holds the pool's one worker until the test moves the clock. */
static void blocker_task(void *arg)
{
    struct gate_arg *g = arg;

    serex_event_signal(g->started);
    assert_int_equal(serex_event_wait(g->go, TEST_TIMEOUT), SEREX_OK);
}

static void pool_histograms_under_a_manual_clock(void **state)
{
    serex_pool_config cfg = {.threads = 1};
    serex_executor *pool;
    struct gate_arg g;
    serex_event *done;
    int64_t run = 250;
    serex_metrics *m;

    (void)state;
    assert_int_equal(serex_pool_create(&cfg, &pool), SEREX_OK);
    assert_int_equal(serex_executor_metrics_enable(pool, &every_task),
                     SEREX_OK);
    assert_int_equal(serex_event_create(&g.go), SEREX_OK);
    assert_int_equal(serex_event_create(&g.started), SEREX_OK);
    assert_int_equal(serex_event_create(&done), SEREX_OK);
    clock_set(0); /* a clock at 0: stored as 1, read back as 0 */
    assert_int_equal(serex_execute(pool, blocker_task, &g), SEREX_OK);
    assert_signalled(g.started);
    clock_set(1000);
    assert_int_equal(serex_execute(pool, advance_task, &run), SEREX_OK);
    assert_int_equal(serex_execute(pool, test_signal_task, done), SEREX_OK);
    clock_set(1500);
    serex_event_signal(g.go);
    assert_signalled(done);
    assert_int_equal(serex_await_termination(pool, 0), SEREX_ETIMEDOUT);
    serex_shutdown(pool);
    assert_int_equal(serex_await_termination(pool, TEST_TIMEOUT), SEREX_OK);
    m = metrics_of(pool);
    /* blocker: waited 0, ran 1500; advance_task: waited 500, ran 250;
     * the signal: waited 750 (1000 to 1750), ran 0 */
    assert_int_equal(m->wait.count, 3);
    assert_int_equal(m->wait.sum_ns, 0 + 500 + 750);
    assert_int_equal(m->wait.max_ns, 750);
    assert_int_equal(m->wait.buckets[serex_histogram_bucket_of(0)], 1);
    assert_int_equal(m->wait.buckets[serex_histogram_bucket_of(500)], 1);
    assert_int_equal(m->wait.buckets[serex_histogram_bucket_of(750)], 1);
    assert_int_equal(m->run.count, 3);
    assert_int_equal(m->run.sum_ns, 1500 + 250 + 0);
    assert_int_equal(m->run.max_ns, 1500);
    assert_int_equal(m->run.buckets[serex_histogram_bucket_of(250)], 1);
    assert_int_equal(m->queue_length, 0);
    free(m);
    serex_event_destroy(g.go);
    serex_event_destroy(g.started);
    serex_event_destroy(done);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
}

static void noop_task(void *arg)
{
    (void)arg;
}

/* A task of a one-worker pool that pushes more than its run queue holds:
 * its own queue overflows to the shared one. */
static void flood_noop_task(void *arg)
{
    serex_executor *pool = arg;

    for (int i = 0; i < 600; i++)
        assert_int_equal(serex_execute(pool, noop_task, NULL), SEREX_OK);
}

static uint64_t parks_of(serex_executor *pool)
{
    serex_metrics *m = metrics_of(pool);
    uint64_t n = m->parks;

    free(m);
    return n;
}

static void pool_counters_count(void **state)
{
    serex_pool_config cfg = {.threads = 1};
    serex_event *flooded;
    serex_executor *pool;
    serex_metrics *m;
    uint64_t parks;
    int64_t until = test_now_ns() + TEST_TIMEOUT;

    (void)state;
    assert_int_equal(serex_pool_create(&cfg, &pool), SEREX_OK);
    /* counters count with metrics off too */
    assert_int_equal(serex_execute(pool, flood_noop_task, pool), SEREX_OK);
    /* the flood has run (its 600 tasks behind it, on the one worker, come
     * before this one): a worker that parked before the flood came must
     * not be read as the end of it */
    assert_int_equal(serex_event_create(&flooded), SEREX_OK);
    assert_int_equal(serex_execute(pool, test_signal_task, flooded), SEREX_OK);
    assert_signalled(flooded);
    serex_event_destroy(flooded);
    /* an idle worker parks, eventually */
    while ((parks = parks_of(pool)) == 0 && test_now_ns() < until)
        test_sleep_ns(MS);
    assert_true(parks >= 1);
    m = metrics_of(pool);
    /* 600 pushes from its own task into a queue of 256: overflows */
    assert_true(m->overflows >= 1);
    assert_int_equal(m->wait.count, 0); /* histograms off */
    assert_int_equal(m->steals, 0);     /* one worker: no one to steal */
    free(m);
    /* a task wakes it */
    assert_int_equal(serex_execute(pool, noop_task, NULL), SEREX_OK);
    serex_shutdown(pool);
    assert_int_equal(serex_await_termination(pool, TEST_TIMEOUT), SEREX_OK);
    m = metrics_of(pool);
    assert_true(m->unparks >= 1);
    assert_true(m->parks >= m->unparks);
    free(m);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
}

/* --- the task hooks with identity --- */

#define HOOKED 16

struct hook_log {
    serex_executor *pool;
    int begins, finishes; /* on the one worker: plain fields */
    serex_task_info begin[HOOKED], finish[HOOKED];
};

static void on_begin(void *ctx, const serex_task_info *t)
{
    struct hook_log *log = ctx;

    if (log->begins < HOOKED)
        log->begin[log->begins] = *t;
    log->begins++;
}

static void on_finish(void *ctx, const serex_task_info *t)
{
    struct hook_log *log = ctx;

    if (log->finishes < HOOKED)
        log->finish[log->finishes] = *t;
    log->finishes++;
}

static void pool_hooks_see_the_task(void **state)
{
    struct hook_log *log = calloc(1, sizeof *log);
    serex_pool_config cfg = {.threads = 1};
    int args[HOOKED];

    (void)state;
    assert_non_null(log);
    cfg.on_task_begin = on_begin;
    cfg.on_task_finish = on_finish;
    cfg.hook_ctx = log;
    assert_int_equal(serex_pool_create(&cfg, &log->pool), SEREX_OK);
    for (int i = 0; i < HOOKED; i++)
        assert_int_equal(serex_execute(log->pool, noop_task, &args[i]),
                         SEREX_OK);
    serex_shutdown(log->pool);
    assert_int_equal(serex_await_termination(log->pool, TEST_TIMEOUT),
                     SEREX_OK);
    assert_int_equal(log->begins, HOOKED);
    assert_int_equal(log->finishes, HOOKED);
    for (int i = 0; i < HOOKED; i++) {
        const serex_task_info *b = &log->begin[i], *f = &log->finish[i];

        assert_ptr_equal(b->executor, log->pool);
        assert_true(b->fn == noop_task);
        assert_ptr_equal(b->arg, &args[i]); /* one worker: in order */
        assert_int_equal(b->worker, 0);
        assert_true(b->submit_ns > 0 && b->submit_ns <= b->start_ns);
        /* one thread's submissions: increasing ids */
        if (i > 0)
            assert_true(b->id > log->begin[i - 1].id);
        /* the finish hook is told the same task */
        assert_int_equal(f->id, b->id);
        assert_ptr_equal(f->arg, b->arg);
        assert_int_equal(f->submit_ns, b->submit_ns);
    }
    assert_int_equal(serex_destroy(log->pool), SEREX_OK);
    free(log);
}

/* --- wrappers over a manual executor: every step by hand --- */

/* Submits at 100, runs at 300, each run 50 long. */
static void assert_wrapper_histograms(serex_executor *manual,
                                      serex_executor *ex, int tasks,
                                      int (*submit)(serex_executor *ex,
                                                    void *arg))
{
    int64_t run = 50;
    serex_metrics *m;

    assert_int_equal(serex_executor_metrics_enable(ex, &every_task), SEREX_OK);
    /* a second enable keeps the first */
    assert_int_equal(serex_executor_metrics_enable(ex, NULL), SEREX_OK);
    clock_set(100);
    for (int i = 0; i < tasks; i++)
        assert_int_equal(submit(ex, &run), SEREX_OK);
    clock_set(300);
    test_run_all(manual);
    m = metrics_of(ex);
    assert_int_equal(m->wait.count, tasks);
    assert_int_equal(m->run.count, tasks);
    assert_int_equal(m->run.sum_ns, 50 * (uint64_t)tasks);
    assert_int_equal(m->run.buckets[serex_histogram_bucket_of(50)], tasks);
    /* the first waited 200; each later one 50 more (the ones before ran) */
    assert_int_equal(m->wait.buckets[serex_histogram_bucket_of(200)], 1);
    assert_int_equal(m->wait.max_ns, 200 + 50 * (uint64_t)(tasks - 1));
    assert_int_equal(m->queue_length, 0);
    free(m);
}

static int submit_plain(serex_executor *ex, void *arg)
{
    return serex_execute(ex, advance_task, arg);
}

static serex_striped *the_striped;

static int submit_keyed(serex_executor *ex, void *arg)
{
    (void)ex;
    return serex_striped_execute(the_striped, 7, advance_task, arg);
}

static void wrappers_record_waits_and_runs(void **state)
{
    serex_executor *manual, *serial, *limiter;

    (void)state;
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    assert_int_equal(serex_serial_create(manual, NULL, &serial), SEREX_OK);
    assert_wrapper_histograms(manual, serial, 3, submit_plain);
    assert_int_equal(serex_striped_create(manual, NULL, &the_striped),
                     SEREX_OK);
    assert_wrapper_histograms(manual, serex_striped_executor(the_striped), 3,
                              submit_keyed);
    assert_int_equal(serex_limiter_create(manual, 1, &limiter), SEREX_OK);
    assert_wrapper_histograms(manual, limiter, 3, submit_plain);
    assert_int_equal(serex_destroy(limiter), SEREX_OK);
    assert_int_equal(serex_destroy(serex_striped_executor(the_striped)),
                     SEREX_OK);
    assert_int_equal(serex_destroy(serial), SEREX_OK);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
}

/* A serial's yields: a batch of 1 gives the thread back after each task. */
static void serial_counts_yields(void **state)
{
    serex_serial_config cfg = {.batch = 1};
    serex_executor *manual, *serial;
    serex_metrics *m;

    (void)state;
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    assert_int_equal(serex_serial_create(manual, &cfg, &serial), SEREX_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(serex_execute(serial, noop_task, NULL), SEREX_OK);
    test_run_all(manual);
    m = metrics_of(serial);
    assert_int_equal(m->yields, 3); /* after tasks 1, 2 and 3 */
    free(m);
    assert_int_equal(serex_destroy(serial), SEREX_OK);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
}

/* --- sampling: 1 in every, per submitting thread --- */

struct sample_job {
    serex_executor *serial;
    serex_event *done;
};

static void submit_eight(void *arg)
{
    struct sample_job *j = arg;

    for (int i = 0; i < 8; i++)
        assert_int_equal(serex_execute(j->serial, noop_task, NULL), SEREX_OK);
    serex_event_signal(j->done);
}

static void sampling_times_one_in_every(void **state)
{
    serex_metrics_config every4 = {4, test_clock, NULL};
    serex_pool_config cfg = {.threads = 1};
    serex_executor *manual, *serial, *pool;
    struct sample_job j;
    serex_metrics *m;

    (void)state;
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    assert_int_equal(serex_serial_create(manual, NULL, &serial), SEREX_OK);
    assert_int_equal(serex_executor_metrics_enable(serial, &every4), SEREX_OK);
    /* a fresh thread (a new pool's worker) starts its count afresh: its
     * 1st and 5th submissions are timed */
    assert_int_equal(serex_pool_create(&cfg, &pool), SEREX_OK);
    assert_int_equal(serex_event_create(&j.done), SEREX_OK);
    j.serial = serial;
    assert_int_equal(serex_execute(pool, submit_eight, &j), SEREX_OK);
    assert_signalled(j.done);
    test_run_all(manual);
    m = metrics_of(serial);
    assert_int_equal(m->wait.count, 2);
    assert_int_equal(m->run.count, 2);
    free(m);
    serex_event_destroy(j.done);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    assert_int_equal(serex_destroy(serial), SEREX_OK);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
}

/* --- the scheduler: lateness in its own clock --- */

static void scheduler_records_lateness(void **state)
{
    serex_scheduler_config cfg = {.manual = true};
    serex_metrics_config every = {1, NULL, NULL};
    serex_executor *manual;
    serex_scheduler *s;
    serex_metrics *m;

    (void)state;
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    assert_int_equal(serex_scheduler_create(&cfg, &s), SEREX_OK);
    assert_int_equal(
        serex_executor_metrics_enable(serex_scheduler_executor(s), &every),
        SEREX_OK);
    assert_int_equal(serex_schedule(s, manual, 1000, noop_task, NULL, NULL),
                     SEREX_OK);
    assert_int_equal(serex_schedule(s, manual, 5000, noop_task, NULL, NULL),
                     SEREX_OK);
    m = metrics_of(serex_scheduler_executor(s));
    assert_int_equal(m->queue_length, 2); /* pending timers */
    free(m);
    /* due at 1000, fired at 1500 onto the manual executor, run there */
    assert_int_equal(serex_scheduler_advance(s, 1500), SEREX_OK);
    test_run_all(manual);
    m = metrics_of(serex_scheduler_executor(s));
    assert_one_value(&m->wait, 500);
    assert_one_value(&m->run, 0);
    assert_int_equal(m->queue_length, 1);
    free(m);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    test_run_all(manual);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
}

/* --- misuse and allocation failure --- */

static int user_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    (void)ex, (void)fn, (void)arg;
    return SEREX_OK;
}

static void misuse_says_einval(void **state)
{
    static const serex_executor_ops ops = {user_execute, NULL, NULL, NULL,
                                           NULL};
    serex_executor user = {&ops};
    serex_executor *manual;
    serex_metrics *m = calloc(1, sizeof *m);

    (void)state;
    assert_non_null(m);
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    assert_int_equal(serex_executor_metrics_enable(NULL, NULL), SEREX_EINVAL);
    assert_int_equal(serex_executor_metrics(NULL, m), SEREX_EINVAL);
    assert_int_equal(serex_executor_metrics(manual, NULL), SEREX_EINVAL);
    /* a manual executor and a user's keep no metrics */
    assert_int_equal(serex_executor_metrics_enable(manual, NULL), SEREX_EINVAL);
    assert_int_equal(serex_executor_metrics(manual, m), SEREX_EINVAL);
    assert_int_equal(serex_executor_metrics_enable(&user, NULL), SEREX_EINVAL);
    assert_int_equal(serex_executor_metrics(&user, m), SEREX_EINVAL);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
    free(m);
}

/* Each allocation of an enable fails in turn: SEREX_ENOMEM, metrics stay
 * off (a task is not timed), and a later enable works. */
static void enable_out_of_memory_changes_nothing(void **state)
{
    serex_executor *manual, *serial;
    unsigned long n;
    serex_metrics *m;

    (void)state;
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    for (unsigned long k = 1;; k++) {
        int rc;

        assert_int_equal(serex_serial_create(manual, NULL, &serial), SEREX_OK);
        serex__alloc_fail_nth(0);
        rc = serex_executor_metrics_enable(serial, &every_task);
        n = serex__alloc_fail_nth(0); /* the enable's allocations */
        assert_int_equal(rc, SEREX_OK);
        assert_int_equal(serex_destroy(serial), SEREX_OK);
        if (k > n)
            break;
        assert_int_equal(serex_serial_create(manual, NULL, &serial), SEREX_OK);
        serex__alloc_fail_nth(k);
        rc = serex_executor_metrics_enable(serial, &every_task);
        serex__alloc_fail_nth(0);
        assert_int_equal(rc, SEREX_ENOMEM);
        assert_int_equal(serex_execute(serial, noop_task, NULL), SEREX_OK);
        test_run_all(manual);
        m = metrics_of(serial);
        assert_int_equal(m->wait.count, 0);
        free(m);
        assert_int_equal(serex_executor_metrics_enable(serial, &every_task),
                         SEREX_OK);
        assert_int_equal(serex_destroy(serial), SEREX_OK);
    }
    assert_true(n >= 1);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buckets_tile_the_range),
        cmocka_unit_test(percentiles_come_from_the_buckets),
        cmocka_unit_test(pool_histograms_under_a_manual_clock),
        cmocka_unit_test(pool_counters_count),
        cmocka_unit_test(pool_hooks_see_the_task),
        cmocka_unit_test(wrappers_record_waits_and_runs),
        cmocka_unit_test(serial_counts_yields),
        cmocka_unit_test(sampling_times_one_in_every),
        cmocka_unit_test(scheduler_records_lateness),
        cmocka_unit_test(misuse_says_einval),
        cmocka_unit_test(enable_out_of_memory_changes_nothing),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
