/* SPDX-License-Identifier: MIT */
/*
 * test_faults_pool.c - allocation failure in a pool: creation, execute,
 * submit, shutdown_now; and in what a pool's configuration adds: its copy
 * of the CPU set, and the queues of its priority levels, made at a
 * level's first task and grown when full (tests/test_faults.h says how a
 * scenario runs). A pool whose creation failed must leave no thread
 * behind, and no thread hook unbalanced. Blocking regions, resizing and
 * the watchdog (since 0.3.0): a compensating worker whose slots or thread
 * cannot be made (the pool goes on with its workers), a resize whose
 * slots cannot be made (SEREX_ENOMEM, nothing changed) or whose thread
 * cannot be started (it goes on), a watchdog that cannot be started
 * (create fails and leaves nothing).
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

/* --- blocking regions, resizing, the watchdog --- */

/* Holds its worker in a blocking region, without allocating. */
static void hold_in_region(void *arg)
{
    serex_blocking_begin();
    hold_task(arg);
    serex_blocking_end();
}

/* Waits, bounded, until task @t has run. */
static void wait_ran(struct run *r, struct task *t)
{
    int64_t deadline = serex__now_ns() + TEST_TIMEOUT;

    while (atomic_load(&r->ran[t->id]) == 0 && serex__now_ns() < deadline)
        serex__thread_yield();
    assert_int_equal(atomic_load(&r->ran[t->id]), 1);
}

/*
 * A pool of 1 whose worker blocks in a region: a task submitted then
 * starts a compensating worker (a chunk of slots and a thread, made by
 * the execute). If either cannot be made, the execute still says
 * SEREX_OK and the task runs once the region ends.
 */
static void scenario_pool_blocking(struct run *r)
{
    serex_pool_config cfg = {.threads = 1};
    serex_executor sentinel, *pool = &sentinel;
    struct hold h = {0};
    struct task *t;
    int base = test_thread_count();
    uint64_t accepted;

    if (!status_ok(r, serex_pool_create(&cfg, &pool))) {
        assert_null(pool);
        test_assert_threads_back_to(base);
        return;
    }
    assert_int_equal(serex_execute(pool, hold_in_region, &h), SEREX_OK);
    while (!atomic_load(&h.started))
        serex__thread_yield();
    t = task_new(r, 0);
    accepted = accept(r, t, serex_execute(pool, count_task, t));
    if (r->fail_at == 0)
        wait_ran(r, t); /* it ran beside the held worker */
    atomic_store(&h.release, 1);
    serex_shutdown(pool);
    assert_int_equal(serex_await_termination(pool, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(stats_of(pool).completed, accepted + 1);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    test_assert_threads_back_to(base);
}

/*
 * serex_pool_resize from 1 to 3: the slots (SEREX_ENOMEM: the pool is
 * as it was), then two threads (one that cannot start: the pool goes on
 * with the threads it has); then down to 1, which allocates nothing.
 */
static void scenario_pool_resize(struct run *r)
{
    serex_pool_config cfg = {.threads = 1};
    serex_executor sentinel, *pool = &sentinel;
    int base = test_thread_count();
    uint64_t accepted;
    int rc;

    if (!status_ok(r, serex_pool_create(&cfg, &pool))) {
        assert_null(pool);
        test_assert_threads_back_to(base);
        return;
    }
    rc = serex_pool_resize(pool, 3, 3);
    if (status_ok(r, rc)) /* a thread that could not start stops it */
        assert_true(r->fail_at != 0 || stats_of(pool).threads == 3);
    else
        assert_int_equal(stats_of(pool).threads, 1); /* nothing changed */
    accepted = submit_n(r, pool, 4);
    assert_int_equal(serex_pool_resize(pool, 1, 1), SEREX_OK);
    serex_shutdown(pool);
    assert_int_equal(serex_await_termination(pool, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(stats_of(pool).completed, accepted);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    test_assert_threads_back_to(base);
}

/* A pool with a watchdog (patient enough never to act here): its thread
 * is one more allocation of create's, and its failure leaves nothing. */
static void scenario_pool_watchdog(struct run *r)
{
    serex_pool_config cfg = {.threads = 1, .starvation_ns = 3600 * SEC};
    serex_executor sentinel, *pool = &sentinel;
    int base = test_thread_count();
    uint64_t accepted;

    if (!status_ok(r, serex_pool_create(&cfg, &pool))) {
        assert_null(pool);
        test_assert_threads_back_to(base);
        return;
    }
    accepted = submit_n(r, pool, 4);
    serex_shutdown(pool);
    assert_int_equal(serex_await_termination(pool, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(stats_of(pool).completed, accepted);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    test_assert_threads_back_to(base);
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

static void faults_pool_blocking_goes_on_with_its_workers(void **state)
{
    serex__thread t;

    assert_int_equal(serex__thread_start(&t, no_op_thread, NULL), SEREX_OK);
    serex__thread_join(t);
    fail_each(*state, "pool blocking", scenario_pool_blocking, 0);
}

static void faults_pool_resize_changes_nothing_or_goes_on(void **state)
{
    serex__thread t;

    assert_int_equal(serex__thread_start(&t, no_op_thread, NULL), SEREX_OK);
    serex__thread_join(t);
    fail_each(*state, "pool resize", scenario_pool_resize, 0);
}

static void faults_pool_watchdog_leaves_no_thread(void **state)
{
    serex__thread t;

    assert_int_equal(serex__thread_start(&t, no_op_thread, NULL), SEREX_OK);
    serex__thread_join(t);
    fail_each(*state, "pool watchdog", scenario_pool_watchdog, 0);
}

FAULTS_MAIN("faults_pool",
            FAULTS_TEST(faults_pool_lose_nothing_and_leave_no_thread),
            FAULTS_TEST(faults_pool_control_loses_nothing_and_leaves_no_thread),
            FAULTS_TEST(faults_pool_blocking_goes_on_with_its_workers),
            FAULTS_TEST(faults_pool_resize_changes_nothing_or_goes_on),
            FAULTS_TEST(faults_pool_watchdog_leaves_no_thread))
