/* SPDX-License-Identifier: MIT */
/*
 * test_faults_pool.c - allocation failure in a pool: creation, execute,
 * submit, shutdown_now; and in what a pool's configuration adds: its copy
 * of the CPU set, and the queues of its priority levels, made at a
 * level's first task and grown when full (tests/test_faults.h says how a
 * scenario runs). A pool whose creation failed must leave no thread
 * behind, and no thread hook unbalanced.
 */
#include "test_faults.h"

#if defined(__linux__)
#endif

/* --- pool --- */

static void scenario_pool(struct run *r)
{
    serex_pool_config cfg = {.threads = 2, .name = "faults"};
    serex_executor sentinel, *pool = &sentinel;
    serex_future *fu[2];
    struct task *ft[2];
    int base = test_thread_count();
    uint64_t accepted = 0, handed0;
    size_t n;
    serex_stats st;

    if (!status_ok(r, serex_pool_create(&cfg, &pool))) {
        assert_null(pool);
        test_assert_threads_back_to(base); /* no thread left behind */
        return;
    }
    for (int i = 0; i < 8; i++) {
        struct task *t = task_new(r, 0);

        accepted += accept(r, t, serex_execute(pool, count_task, t));
    }
    for (int i = 0; i < 2; i++) {
        ft[i] = task_new(r, 0);
        fu[i] = (serex_future *)ft[i]; /* must be overwritten */
        if (accept(r, ft[i], serex_submit(pool, call_counted, ft[i], &fu[i])))
            accepted++;
        else
            assert_null(fu[i]);
    }
    if (fu[0] != NULL) {
        assert_int_equal(serex_future_wait(fu[0], TEST_TIMEOUT), SEREX_OK);
        assert_ptr_equal(serex_future_value(fu[0]), ft[0]);
    }
    handed0 = (uint64_t)r->nhanded;
    n = serex_shutdown_now(pool, on_pending, r);
    assert_int_equal(serex_await_termination(pool, TEST_TIMEOUT), SEREX_OK);
    st = stats_of(pool);
    assert_int_equal(st.submitted, accepted);
    assert_int_equal(st.completed + n, accepted);
    assert_int_equal(st.queued, 0);
    /* no allocation on this path: exactly EREJECTED */
    assert_int_equal(serex_execute(pool, count_task, task_new(r, 0)),
                     SEREX_EREJECTED);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    test_assert_threads_back_to(base);
    settle_future(r, fu[0], ft[0]);
    /* shutdown_now's count: handed back, plus futures it cancelled */
    assert_int_equal(n, (uint64_t)r->nhanded - handed0 +
                            settle_future(r, fu[1], ft[1]));
}

/* --- a pool with hooks, placement and priority levels --- */

/* What the hooks saw; the scenario's own, as hook_ctx. */
struct hook_count {
    _Atomic int starts, stops, task_starts, task_ends;
};

static int count_thread_start(void *ctx, unsigned index)
{
    (void)index;
    atomic_fetch_add(&((struct hook_count *)ctx)->starts, 1);
    return 0;
}

static void count_thread_stop(void *ctx, unsigned index)
{
    (void)index;
    atomic_fetch_add(&((struct hook_count *)ctx)->stops, 1);
}

static void count_task_start(void *ctx)
{
    atomic_fetch_add(&((struct hook_count *)ctx)->task_starts, 1);
}

static void count_task_end(void *ctx)
{
    atomic_fetch_add(&((struct hook_count *)ctx)->task_ends, 1);
}

/* Holds the pool's only worker without allocating (an event would). */
struct hold {
    _Atomic int started, release;
};

static void hold_task(void *arg)
{
    struct hold *h = arg;

    atomic_store(&h->started, 1);
    while (!atomic_load(&h->release))
        serex__thread_yield();
}

static void hold_worker(serex_executor *pool, struct hold *h)
{
    int64_t deadline = serex__now_ns() + TEST_TIMEOUT;

    /* the ring exists: no allocation on this path */
    assert_int_equal(serex_execute(pool, hold_task, h), SEREX_OK);
    while (!atomic_load(&h->started) && serex__now_ns() < deadline)
        serex__thread_yield();
    assert_true(atomic_load(&h->started));
}

/* Submits @n tasks to @ex; returns how many were accepted. */
static uint64_t submit_n(struct run *r, serex_executor *ex, int n)
{
    uint64_t accepted = 0;

    for (int i = 0; i < n; i++) {
        struct task *t = task_new(r, 0);

        accepted += accept(r, t, serex_execute(ex, count_task, t));
    }
    return accepted;
}

static void scenario_pool_control(struct run *r)
{
    unsigned cpu = 0;
    struct hook_count hc = {0};
    serex_pool_config cfg = {
        .threads = 1,
        .on_thread_start = count_thread_start,
        .on_thread_stop = count_thread_stop,
        .hook_ctx = &hc,
        .cpus = &cpu,
        .ncpus = serex__cpus_check(&cpu, 1) == SEREX_OK, /* where it can */
        .on_task_start = count_task_start,
        .on_task_end = count_task_end,
    };
    serex_executor sentinel, *pool = &sentinel, *high, *low;
    struct hold h = {0};
    int base = test_thread_count();
    uint64_t accepted;
    size_t n;
    serex_stats st;

    if (!status_ok(r, serex_pool_create(&cfg, &pool))) {
        assert_null(pool);
        test_assert_threads_back_to(base);
        assert_int_equal(atomic_load(&hc.starts), atomic_load(&hc.stops));
        return;
    }
    high = serex_pool_executor_at(pool, SEREX_POOL_PRIORITY_HIGH);
    low = serex_pool_executor_at(pool, SEREX_POOL_PRIORITY_LOW);
    hold_worker(pool, &h);
    /* HIGH: its first ring, then its growth; LOW: its first ring */
    accepted = submit_n(r, high, 40);
    accepted += submit_n(r, low, 8);
    accepted += submit_n(r, pool, 8);
    n = serex_shutdown_now(pool, on_pending, r);
    assert_int_equal(n, accepted); /* none ran: the worker was held */
    atomic_store(&h.release, 1);
    assert_int_equal(serex_await_termination(high, TEST_TIMEOUT), SEREX_OK);
    st = stats_of(low);
    assert_int_equal(st.submitted, accepted + 1);
    assert_int_equal(st.completed, 1);
    assert_int_equal(st.queued, 0);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    test_assert_threads_back_to(base);
    assert_int_equal(atomic_load(&hc.starts), 1);
    assert_int_equal(atomic_load(&hc.stops), 1);
    assert_int_equal(atomic_load(&hc.task_starts), 1); /* hold_task */
    assert_int_equal(atomic_load(&hc.task_ends), 1);
}

/* --- the tests --- */

static int no_op_thread(void *arg)
{
    (void)arg;
    return 0;
}

static void faults_pool_lose_nothing_and_leave_no_thread(void **state)
{
    serex__thread t;

    /* A sanitizer may start a helper thread with the process's first
     * thread (TSan does, and keeps it): start one before counting. */
    assert_int_equal(serex__thread_start(&t, no_op_thread, NULL), SEREX_OK);
    serex__thread_join(t);
    fail_each(*state, "pool", scenario_pool, 0);
}

static void faults_pool_control_loses_nothing_and_leaves_no_thread(void **state)
{
    serex__thread t;

    assert_int_equal(serex__thread_start(&t, no_op_thread, NULL), SEREX_OK);
    serex__thread_join(t);
    fail_each(*state, "pool control", scenario_pool_control, 0);
}

FAULTS_MAIN("faults_pool",
            FAULTS_TEST(faults_pool_lose_nothing_and_leave_no_thread),
            FAULTS_TEST(faults_pool_control_loses_nothing_and_leaves_no_thread))
