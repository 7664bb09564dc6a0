/* SPDX-License-Identifier: MIT */
/*
 * test_api.c - the public API only, built twice: against the static
 * library and (as test_api_shared) against the shared one, so an export
 * missing from libserex.so fails here.
 */
#include "test_util.h"

#include <stdlib.h>

struct fixture {
    serex_executor *pool;
    serex_executor *manual;
    serex_event *ev;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    assert_int_equal(serex_pool_create(NULL, &f->pool), SEREX_OK);
    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_event_create(&f->ev), SEREX_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    assert_int_equal(serex_destroy(f->manual), SEREX_OK);
    serex_event_destroy(f->ev);
    free(f);
    return 0;
}

static void *twice(void *arg)
{
    return (void *)((uintptr_t)arg * 2);
}

static void api_pool_future_and_event_work(void **state)
{
    struct fixture *f = *state;
    serex_future *fut;

    assert_int_equal(serex_submit(f->pool, twice, (void *)21, &fut), SEREX_OK);
    assert_int_equal(serex_future_wait(fut, TEST_TIMEOUT), SEREX_OK);
    assert_ptr_equal(serex_future_value(fut), (void *)42);
    serex_future_release(fut);
    assert_int_equal(serex_execute(f->pool, test_signal_task, f->ev), SEREX_OK);
    assert_signalled(f->ev);
}

static void api_manual_runs_only_when_told(void **state)
{
    struct fixture *f = *state;
    serex_future *fut;

    assert_int_equal(serex_submit(f->manual, twice, (void *)5, &fut), SEREX_OK);
    assert_int_equal(serex_future_wait(fut, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_manual_run_pending(f->manual), 1);
    assert_int_equal(serex_future_wait(fut, 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(fut), (void *)10);
    assert_false(serex_manual_run_one(f->manual));
    serex_future_release(fut);
}

static void api_statuses_have_strings(void **state)
{
    (void)state;
    for (int s = SEREX_EDEADLK; s <= SEREX_OK; s++)
        assert_non_null(serex_strerror(s));
}

static void api_time_helpers_are_nanoseconds(void **state)
{
    int n = 3;

    (void)state;
    assert_true(SEREX_US(1) == 1000 && SEREX_MS(1) == 1000000 &&
                SEREX_SEC(1) == 1000000000);
    /* int64_t arithmetic even from an int: no 32-bit overflow */
    assert_true(SEREX_SEC(n) == INT64_C(3000000000));
    assert_true(SEREX_MS(250) * 4 == SEREX_SEC(1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(api_pool_future_and_event_work),
        T(api_manual_runs_only_when_told),
        T(api_statuses_have_strings),
        T(api_time_helpers_are_nanoseconds),
#undef T
    };

    return cmocka_run_group_tests_name("api", tests, NULL, NULL);
}
