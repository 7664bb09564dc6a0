/* SPDX-License-Identifier: MIT */
/*
 * test_faults_pool.c - allocation failure in a pool: creation, execute,
 * submit, shutdown_now (tests/test_faults.h says how a scenario runs).
 * A pool whose creation failed must leave no thread behind.
 */
#include "test_faults.h"

#if defined(__linux__)
#  include <dirent.h> /* opendir: counting this process's threads */
#endif

/* --- pool --- */

/* Threads of this process, or -1 where that cannot be counted. */
static int thread_count(void)
{
#if defined(__linux__)
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
#else
    return -1;
#endif
}

/* A joined thread may stay listed for a moment: poll, bounded. */
static void assert_threads_back_to(int base)
{
    int64_t deadline = serex__now_ns() + 5 * SEC;
    int n;

    if (base < 0)
        return;
    while ((n = thread_count()) != base && serex__now_ns() < deadline)
        serex__thread_yield();
    assert_int_equal(n, base);
}

static void scenario_pool(struct run *r)
{
    serex_pool_config cfg = {.threads = 2, .name = "faults"};
    serex_executor sentinel, *pool = &sentinel;
    serex_future *fu[2];
    struct task *ft[2];
    int base = thread_count();
    uint64_t accepted = 0, handed0;
    size_t n;
    serex_stats st;

    if (!status_ok(r, serex_pool_create(&cfg, &pool))) {
        assert_null(pool);
        assert_threads_back_to(base); /* no thread left behind */
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
    assert_threads_back_to(base);
    settle_future(r, fu[0], ft[0]);
    /* shutdown_now's count: handed back, plus futures it cancelled */
    assert_int_equal(n, (uint64_t)r->nhanded - handed0 +
                            settle_future(r, fu[1], ft[1]));
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

FAULTS_MAIN("faults_pool",
            FAULTS_TEST(faults_pool_lose_nothing_and_leave_no_thread))
