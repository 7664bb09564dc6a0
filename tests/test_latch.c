/* SPDX-License-Identifier: MIT */
/*
 * test_latch.c - the latch (latch.h): opens at zero and stays open, lets
 * every waiter through, never goes below zero, polls and times out, bad
 * input, allocation failure, and no lost wake-up across threads (a pool's
 * tasks count it down while threads wait).
 */
#include "test_util.h"

#include "alloc_internal.h" /* serex__alloc_fail_nth */

#define NWAITERS 4
#define NTASKS 64

static void latch_opens_at_zero_and_stays_open(void **state)
{
    serex_latch *l;

    (void)state;
    assert_int_equal(serex_latch_create(3, &l), SEREX_OK);
    assert_false(serex_latch_is_open(l));
    assert_int_equal(serex_latch_wait(l, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_latch_count_down(l, 2), SEREX_OK);
    assert_int_equal(serex_latch_wait(l, 0), SEREX_ETIMEDOUT);
    /* more than is left: refused, nothing taken */
    assert_int_equal(serex_latch_count_down(l, 2), SEREX_EINVAL);
    assert_false(serex_latch_is_open(l));
    assert_int_equal(serex_latch_count_down(l, 1), SEREX_OK);
    assert_true(serex_latch_is_open(l));
    for (int i = 0; i < 3; i++) /* every wait, now and later */
        assert_int_equal(serex_latch_wait(l, 0), SEREX_OK);
    assert_int_equal(serex_latch_count_down(l, 1), SEREX_EINVAL);
    serex_latch_destroy(l);
    assert_int_equal(serex_latch_create(0, &l), SEREX_OK); /* open */
    assert_int_equal(serex_latch_wait(l, SEREX_FOREVER), SEREX_OK);
    serex_latch_destroy(l);
}

static void latch_timed_wait_times_out(void **state)
{
    serex_latch *l;
    int64_t t0 = test_now_ns();

    (void)state;
    assert_int_equal(serex_latch_create(1, &l), SEREX_OK);
    assert_int_equal(serex_latch_wait(l, MS), SEREX_ETIMEDOUT);
    assert_true(test_now_ns() - t0 >= MS); /* never early */
    serex_latch_destroy(l);
}

static void latch_bad_input_is_einval(void **state)
{
    serex_latch *l = (serex_latch *)&l;

    (void)state;
    assert_int_equal(serex_latch_create(1, NULL), SEREX_EINVAL);
    assert_int_equal(serex_latch_create(UINT64_C(1) << 32, &l), SEREX_EINVAL);
    assert_null(l);
    assert_int_equal(serex_latch_count_down(NULL, 1), SEREX_EINVAL);
    assert_int_equal(serex_latch_wait(NULL, 0), SEREX_EINVAL);
    assert_false(serex_latch_is_open(NULL));
    assert_int_equal(serex_latch_create(2, &l), SEREX_OK);
    assert_int_equal(serex_latch_count_down(l, 0), SEREX_EINVAL);
    assert_int_equal(serex_latch_wait(l, -2), SEREX_EINVAL);
    serex_latch_destroy(l);
    serex_latch_destroy(NULL);
}

static void latch_allocation_failure_is_enomem(void **state)
{
    serex_latch *l = (serex_latch *)&l;

    (void)state;
    serex__alloc_fail_nth(1);
    assert_int_equal(serex_latch_create(1, &l), SEREX_ENOMEM);
    serex__alloc_fail_nth(0);
    assert_null(l);
}

struct run {
    serex_latch *l;
    atomic_int released;
    int written[NTASKS]; /* plain: each task's, read after the wait */
};

static void count_task(void *arg)
{
    int *slot = arg;

    *slot = 1;
}

struct task_arg {
    struct run *r;
    int i;
};

static void write_and_count_down(void *arg)
{
    struct task_arg *a = arg;

    count_task(&a->r->written[a->i]);
    assert_int_equal(serex_latch_count_down(a->r->l, 1), SEREX_OK);
}

static int waiter_thread(void *arg)
{
    struct run *r = arg;

    if (serex_latch_wait(r->l, TEST_TIMEOUT) == SEREX_OK) {
        /* every task's write is visible to every wait let through */
        for (int i = 0; i < NTASKS; i++)
            if (r->written[i] != 1)
                return 0;
        atomic_fetch_add(&r->released, 1);
    }
    return 0;
}

/* Waiting threads, a pool's tasks counting down: all are let through once
 * the last count-down lands, and see every task's write. */
static void latch_lets_every_waiter_through(void **state)
{
    serex_pool_config cfg = {.threads = 2};
    struct task_arg args[NTASKS];
    serex__thread t[NWAITERS];
    serex_executor *pool;
    struct run r = {0};

    (void)state;
    assert_int_equal(serex_latch_create(NTASKS, &r.l), SEREX_OK);
    atomic_init(&r.released, 0);
    for (int i = 0; i < NWAITERS; i++)
        assert_int_equal(serex__thread_start(&t[i], waiter_thread, &r),
                         SEREX_OK);
    assert_int_equal(serex_pool_create(&cfg, &pool), SEREX_OK);
    for (int i = 0; i < NTASKS; i++) {
        args[i] = (struct task_arg){&r, i};
        assert_int_equal(serex_execute(pool, write_and_count_down, &args[i]),
                         SEREX_OK);
    }
    for (int i = 0; i < NWAITERS; i++) /* each waits TEST_TIMEOUT at most */
        serex__thread_join(t[i]);
    assert_int_equal(atomic_load(&r.released), NWAITERS);
    assert_true(serex_latch_is_open(r.l));
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    serex_latch_destroy(r.l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(latch_opens_at_zero_and_stays_open),
        cmocka_unit_test(latch_timed_wait_times_out),
        cmocka_unit_test(latch_bad_input_is_einval),
        cmocka_unit_test(latch_allocation_failure_is_enomem),
        cmocka_unit_test(latch_lets_every_waiter_through),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
