/* SPDX-License-Identifier: MIT */
/*
 * test_executor.c - status strings, the generic calls' argument checks, and
 * a user-written executor driven through the vtable (what the header's
 * vtable comment asks of one, and what serex does for it: futures on it,
 * futures filtered out of its shutdown_now, EINVAL before dispatch).
 */
#include "test_util.h"
#include "test_user_executor.h"

#include <stdlib.h>
#include <string.h>

struct fixture {
    struct test_user user;
    serex_fn pending_fns[TEST_USER_CAP];
    void *pending_args[TEST_USER_CAP];
    struct test_pending pending;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    test_user_init(&f->user);
    f->pending.cap = TEST_USER_CAP;
    f->pending.fns = f->pending_fns;
    f->pending.args = f->pending_args;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static int task_value[TEST_USER_CAP];

static void record(void *arg)
{
    int *slot = arg;

    *slot += 1;
}

/* --- the tests --- */

static void executor_strerror_covers_every_status(void **state)
{
    const int codes[] = {SEREX_OK, SEREX_EINVAL, SEREX_ENOMEM, SEREX_EREJECTED,
                         SEREX_EFULL, SEREX_ETIMEDOUT, SEREX_ECANCELED,
                         SEREX_EDEADLK};
    const char *unknown = serex_strerror(12345);

    (void)state;
    assert_non_null(unknown);
    assert_non_null(serex_strerror(-100));
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *s = serex_strerror(codes[i]);

        assert_non_null(s);
        assert_true(strlen(s) > 0);
        assert_string_not_equal(s, unknown);
        for (size_t j = 0; j < i; j++) /* each status its own words */
            assert_string_not_equal(s, serex_strerror(codes[j]));
    }
}

static void executor_generic_calls_check_arguments(void **state)
{
    struct fixture *f = *state;
    serex_executor no_ops = {NULL};

    assert_int_equal(serex_execute(NULL, record, NULL), SEREX_EINVAL);
    assert_int_equal(serex_execute(&no_ops, record, NULL), SEREX_EINVAL);
    assert_int_equal(serex_execute(&f->user.base, NULL, NULL), SEREX_EINVAL);
    assert_int_equal(serex_await_termination(&f->user.base, -2), SEREX_EINVAL);
    assert_int_equal(serex_await_termination(NULL, 0), SEREX_EINVAL);
    assert_int_equal(serex_destroy(NULL), SEREX_EINVAL);
    assert_int_equal(serex_destroy(&no_ops), SEREX_EINVAL);
    assert_int_equal(serex_shutdown_now(&no_ops, NULL, NULL), 0);
    serex_shutdown(&no_ops); /* ignored, no crash */
    /* nothing reached the executor */
    assert_int_equal(f->user.tail, 0);
}

static void executor_user_executor_runs_through_the_vtable(void **state)
{
    struct fixture *f = *state;

    for (int i = 0; i < 8; i++)
        assert_int_equal(serex_execute(&f->user.base, record, &task_value[i]),
                         SEREX_OK);
    while (test_user_run_one(&f->user))
        ;
    for (int i = 0; i < 8; i++)
        assert_int_equal(task_value[i], 1);
    serex_shutdown(&f->user.base);
    assert_int_equal(serex_execute(&f->user.base, record, &task_value[0]),
                     SEREX_EREJECTED);
    assert_int_equal(serex_await_termination(&f->user.base, 0), SEREX_OK);
    assert_int_equal(serex_destroy(&f->user.base), SEREX_OK);
    assert_int_equal(f->user.destroyed, 1);
    memset(task_value, 0, sizeof task_value);
}

/* A task of the user executor awaiting a serial that runs on it (or the
 * user executor itself) is told SEREX_EDEADLK, through serex_run_task. */
static void executor_run_task_makes_edeadlk_work_for_user_executors(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *serial;
    struct test_self_wait on_serial = {0}, on_user = {0};

    assert_int_equal(serex_serial_create(&f->user.base, NULL, &serial),
                     SEREX_OK);
    on_serial.ex = serial;
    on_user.ex = &f->user.base;
    assert_int_equal(serex_event_create(&on_serial.done), SEREX_OK);
    assert_int_equal(serex_event_create(&on_user.done), SEREX_OK);
    assert_int_equal(serex_execute(&f->user.base, test_self_wait_task,
                                   &on_serial), SEREX_OK);
    assert_int_equal(serex_execute(&f->user.base, test_self_wait_task,
                                   &on_user), SEREX_OK);
    while (test_user_run_one(&f->user))
        ;
    assert_signalled(on_serial.done);
    assert_signalled(on_user.done);
    test_assert_all_edeadlk(&on_serial);
    test_assert_all_edeadlk(&on_user);
    /* and outside a task, the same calls wait as usual */
    assert_int_equal(serex_await_termination(serial, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_destroy(serial), SEREX_OK);
    serex_run_task(NULL, record, NULL); /* bad input: nothing happens */
    serex_run_task(&f->user.base, NULL, NULL);
    serex_event_destroy(on_serial.done);
    serex_event_destroy(on_user.done);
}

static void *answer(void *arg)
{
    (void)arg;
    return (void *)(uintptr_t)42;
}

static void executor_futures_work_on_a_user_executor(void **state)
{
    struct fixture *f = *state;
    serex_future *fut;

    assert_int_equal(serex_submit(&f->user.base, answer, NULL, &fut), SEREX_OK);
    assert_int_equal(serex_future_wait(fut, 0), SEREX_ETIMEDOUT);
    assert_true(test_user_run_one(&f->user));
    assert_int_equal(serex_future_wait(fut, 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(fut), (void *)(uintptr_t)42);
    serex_future_release(fut);
}

static void executor_shutdown_now_cancels_futures_of_a_user_executor(
    void **state)
{
    struct fixture *f = *state;
    serex_future *fut;

    assert_int_equal(serex_execute(&f->user.base, record, &task_value[0]),
                     SEREX_OK);
    assert_int_equal(serex_submit(&f->user.base, answer, NULL, &fut), SEREX_OK);
    assert_int_equal(serex_execute(&f->user.base, record, &task_value[1]),
                     SEREX_OK);
    /* three taken back, but only the two plain tasks reach on_pending */
    assert_int_equal(serex_shutdown_now(&f->user.base, test_pending_cb,
                                        &f->pending),
                     3);
    assert_int_equal(f->pending.n, 2);
    assert_ptr_equal(f->pending.args[0], &task_value[0]);
    assert_ptr_equal(f->pending.args[1], &task_value[1]);
    assert_int_equal(serex_future_wait(fut, TEST_TIMEOUT), SEREX_ECANCELED);
    assert_null(serex_future_value(fut));
    assert_false(serex_future_cancel(fut));
    serex_future_release(fut);
    assert_int_equal(task_value[0] + task_value[1], 0); /* none ran */
}

static void executor_shutdown_now_accepts_a_null_callback(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex_execute(&f->user.base, record, &task_value[0]),
                     SEREX_OK);
    assert_int_equal(serex_shutdown_now(&f->user.base, NULL, NULL), 1);
    assert_int_equal(task_value[0], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(executor_strerror_covers_every_status),
        T(executor_generic_calls_check_arguments),
        T(executor_user_executor_runs_through_the_vtable),
        T(executor_futures_work_on_a_user_executor),
        T(executor_run_task_makes_edeadlk_work_for_user_executors),
        T(executor_shutdown_now_cancels_futures_of_a_user_executor),
        T(executor_shutdown_now_accepts_a_null_callback),
#undef T
    };

    return cmocka_run_group_tests_name("executor", tests, NULL, NULL);
}
