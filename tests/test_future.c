/* SPDX-License-Identifier: MIT */
/*
 * test_future.c - futures: results, waiting, cancellation, shutdown_now and
 * destroy taking a future's task back, bad input, allocation failure, and a
 * cancel-versus-start race on a real pool.
 *
 * Order is driven with the manual executor; the pool tests wait on futures
 * with the test timeout, so a lost completion fails instead of hanging.
 */
#include "test_util.h"

#include <stdlib.h> /* calloc, free */

#include "nodecache_internal.h" /* serex__cache_trim */

#define RACE_N 2000

struct fixture {
    serex_executor *manual; /* NULL once a test destroyed it */
    serex_executor *pool;   /* made by the tests that need one */
    atomic_int calls;       /* how many times count_call ran */
    int plain;              /* written by write_plain, no atomics */
    struct test_pending pending;
    serex_fn pending_fns[8];
    void *pending_args[8];
};

struct race_slot {
    struct fixture *fx;
    atomic_int ran; /* set by the task: it started */
};

/* --- tasks --- */

/* Counts its run and returns its argument, so the value is checkable. */
static void *count_call(void *arg)
{
    struct fixture *fx = arg;

    atomic_fetch_add(&fx->calls, 1);
    return fx;
}

static void *race_call(void *arg)
{
    struct race_slot *slot = arg;

    atomic_store(&slot->ran, 1);
    atomic_fetch_add(&slot->fx->calls, 1);
    return slot;
}

/* A plain write the waiter must see once the wait says OK. */
static void *write_plain(void *arg)
{
    struct fixture *fx = arg;

    fx->plain = 42;
    return fx;
}

/* Returns its argument plus one (as a pointer to an int in an array). */
static void *next_int(void *arg)
{
    return (int *)arg + 1;
}

static void plain_task(void *arg)
{
    (void)arg;
}

static void other_plain_task(void *arg)
{
    (void)arg;
}

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);

    if (fx == NULL)
        return -1;
    if (serex_manual_create(&fx->manual) != SEREX_OK) {
        free(fx);
        return -1;
    }
    atomic_init(&fx->calls, 0);
    fx->pending.cap = 8;
    fx->pending.fns = fx->pending_fns;
    fx->pending.args = fx->pending_args;
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    serex__alloc_fail_nth(0);
    if (fx->manual != NULL)
        assert_int_equal(serex_destroy(fx->manual), SEREX_OK);
    if (fx->pool != NULL)
        assert_int_equal(serex_destroy(fx->pool), SEREX_OK);
    free(fx);
    return 0;
}

static void make_pool(struct fixture *fx)
{
    serex_pool_config cfg = {.threads = 2, .name = "test-future"};

    assert_int_equal(serex_pool_create(&cfg, &fx->pool), SEREX_OK);
    assert_non_null(fx->pool);
}

/* --- on the manual executor --- */

static void future_wait_before_run_times_out_then_ok_with_value(void **state)
{
    struct fixture *fx = *state;
    serex_future *f = NULL;

    assert_int_equal(serex_submit(fx->manual, count_call, fx, &f), SEREX_OK);
    assert_non_null(f);
    assert_int_equal(serex_future_wait(f, 0), SEREX_ETIMEDOUT);
    assert_null(serex_future_value(f));
    assert_int_equal(atomic_load(&fx->calls), 0);

    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(atomic_load(&fx->calls), 1);
    assert_int_equal(serex_future_wait(f, 0), SEREX_OK);
    assert_int_equal(serex_future_wait(f, TEST_TIMEOUT), SEREX_OK);
    assert_ptr_equal(serex_future_value(f), fx);
    serex_future_release(f);
}

static void future_value_is_per_future(void **state)
{
    struct fixture *fx = *state;
    int nums[4] = {0};
    serex_future *f[3];

    for (int i = 0; i < 3; i++)
        assert_int_equal(serex_submit(fx->manual, next_int, &nums[i], &f[i]),
                         SEREX_OK);
    assert_int_equal(serex_manual_run_pending(fx->manual), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(serex_future_wait(f[i], 0), SEREX_OK);
        assert_ptr_equal(serex_future_value(f[i]), &nums[i + 1]);
        serex_future_release(f[i]);
    }
}

static void future_cancel_before_run_stops_the_task(void **state)
{
    struct fixture *fx = *state;
    serex_future *f = NULL;

    assert_int_equal(serex_submit(fx->manual, count_call, fx, &f), SEREX_OK);
    assert_true(serex_future_cancel(f));
    assert_int_equal(serex_future_wait(f, 0), SEREX_ECANCELED);
    assert_int_equal(serex_future_wait(f, TEST_TIMEOUT), SEREX_ECANCELED);
    assert_false(serex_future_cancel(f));

    /* the queue slot is still there, and is skipped when reached */
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(atomic_load(&fx->calls), 0);
    assert_int_equal(serex_future_wait(f, 0), SEREX_ECANCELED);
    assert_null(serex_future_value(f));
    assert_false(serex_future_cancel(f));
    serex_future_release(f);
}

static void future_cancel_after_run_returns_false(void **state)
{
    struct fixture *fx = *state;
    serex_future *f = NULL;

    assert_int_equal(serex_submit(fx->manual, count_call, fx, &f), SEREX_OK);
    assert_true(serex_manual_run_one(fx->manual));
    assert_false(serex_future_cancel(f));
    assert_int_equal(serex_future_wait(f, 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(f), fx);
    assert_int_equal(atomic_load(&fx->calls), 1);
    serex_future_release(f);
}

static void future_shutdown_now_cancels_futures_and_hands_back_plain_tasks(
    void **state)
{
    struct fixture *fx = *state;
    serex_future *f1 = NULL, *f2 = NULL;
    int a, b;

    assert_int_equal(serex_execute(fx->manual, plain_task, &a), SEREX_OK);
    assert_int_equal(serex_submit(fx->manual, count_call, fx, &f1), SEREX_OK);
    assert_int_equal(serex_execute(fx->manual, other_plain_task, &b),
                     SEREX_OK);
    assert_int_equal(serex_submit(fx->manual, count_call, fx, &f2), SEREX_OK);

    assert_int_equal(
        serex_shutdown_now(fx->manual, test_pending_cb, &fx->pending), 4);
    assert_int_equal(fx->pending.n, 2);
    assert_ptr_equal(fx->pending.fns[0], plain_task);
    assert_ptr_equal(fx->pending.args[0], &a);
    assert_ptr_equal(fx->pending.fns[1], other_plain_task);
    assert_ptr_equal(fx->pending.args[1], &b);

    assert_int_equal(serex_future_wait(f1, 0), SEREX_ECANCELED);
    assert_int_equal(serex_future_wait(f2, TEST_TIMEOUT), SEREX_ECANCELED);
    assert_false(serex_future_cancel(f1));
    assert_false(serex_manual_run_one(fx->manual));
    assert_int_equal(atomic_load(&fx->calls), 0);
    serex_future_release(f1);
    serex_future_release(f2);
}

static void future_shutdown_now_with_null_callback_still_cancels(void **state)
{
    struct fixture *fx = *state;
    serex_future *f = NULL;
    int a;

    assert_int_equal(serex_submit(fx->manual, count_call, fx, &f), SEREX_OK);
    assert_int_equal(serex_execute(fx->manual, plain_task, &a), SEREX_OK);
    assert_int_equal(serex_shutdown_now(fx->manual, NULL, NULL), 2);
    assert_int_equal(serex_future_wait(f, 0), SEREX_ECANCELED);
    assert_int_equal(atomic_load(&fx->calls), 0);
    serex_future_release(f);
}

static void future_destroy_with_pending_future_cancels_it(void **state)
{
    struct fixture *fx = *state;
    serex_future *f = NULL;

    assert_int_equal(serex_submit(fx->manual, count_call, fx, &f), SEREX_OK);
    assert_int_equal(serex_destroy(fx->manual), SEREX_OK);
    fx->manual = NULL;
    assert_int_equal(serex_future_wait(f, TEST_TIMEOUT), SEREX_ECANCELED);
    assert_null(serex_future_value(f));
    assert_false(serex_future_cancel(f));
    assert_int_equal(atomic_load(&fx->calls), 0);
    serex_future_release(f);
}

static void future_destroy_after_release_frees_the_future(void **state)
{
    struct fixture *fx = *state;
    serex_future *f = NULL;

    /* only the queued task's reference is left: destroy must drop it
     * (LSan reports the block otherwise) */
    assert_int_equal(serex_submit(fx->manual, count_call, fx, &f), SEREX_OK);
    serex_future_release(f);
    assert_int_equal(serex_destroy(fx->manual), SEREX_OK);
    fx->manual = NULL;
    assert_int_equal(atomic_load(&fx->calls), 0);
}

static void future_submit_after_shutdown_is_rejected(void **state)
{
    struct fixture *fx = *state;
    serex_future *f = (serex_future *)fx; /* must be overwritten */

    serex_shutdown(fx->manual);
    assert_int_equal(serex_submit(fx->manual, count_call, fx, &f),
                     SEREX_EREJECTED);
    assert_null(f);
    assert_false(serex_manual_run_one(fx->manual));
    assert_int_equal(atomic_load(&fx->calls), 0);
}

static void future_null_arguments_are_einval(void **state)
{
    struct fixture *fx = *state;
    serex_future *f = (serex_future *)fx;

    assert_int_equal(serex_submit(NULL, count_call, fx, &f), SEREX_EINVAL);
    assert_null(f);
    f = (serex_future *)fx;
    assert_int_equal(serex_submit(fx->manual, NULL, fx, &f), SEREX_EINVAL);
    assert_null(f);
    assert_int_equal(serex_submit(fx->manual, count_call, fx, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_manual_run_pending(fx->manual), 0);

    assert_int_equal(serex_future_wait(NULL, 0), SEREX_EINVAL);
    assert_int_equal(serex_future_wait(NULL, SEREX_FOREVER), SEREX_EINVAL);
    assert_null(serex_future_value(NULL));
    assert_false(serex_future_cancel(NULL));
    serex_future_release(NULL);
}

static void future_wait_with_bad_timeout_is_einval(void **state)
{
    struct fixture *fx = *state;
    serex_future *f = NULL;

    assert_int_equal(serex_submit(fx->manual, count_call, fx, &f), SEREX_OK);
    assert_int_equal(serex_future_wait(f, -2), SEREX_EINVAL);
    assert_int_equal(serex_future_wait(f, INT64_MIN), SEREX_EINVAL);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(serex_future_wait(f, -2), SEREX_EINVAL);
    assert_int_equal(serex_future_wait(f, SEREX_FOREVER), SEREX_OK);
    serex_future_release(f);
}

static void future_release_before_run_then_run_is_safe(void **state)
{
    struct fixture *fx = *state;
    serex_future *f = NULL;

    assert_int_equal(serex_submit(fx->manual, count_call, fx, &f), SEREX_OK);
    serex_future_release(f);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(atomic_load(&fx->calls), 1);
}

static void future_release_after_cancel_then_run_is_safe(void **state)
{
    struct fixture *fx = *state;
    serex_future *f = NULL;

    assert_int_equal(serex_submit(fx->manual, count_call, fx, &f), SEREX_OK);
    assert_true(serex_future_cancel(f));
    serex_future_release(f);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(atomic_load(&fx->calls), 0);
}

static void future_submit_allocation_failure_is_enomem(void **state)
{
    struct fixture *fx = *state;
    unsigned long n, failures = 0;
    serex_future *f;
    int rc;

    /* an empty cache: the future and its task node both come from malloc */
    serex__cache_trim();
    for (n = 1; n < 100; n++) {
        f = (serex_future *)fx;
        serex__alloc_fail_nth(n);
        rc = serex_submit(fx->manual, count_call, fx, &f);
        if (rc == SEREX_OK)
            break;
        assert_int_equal(rc, SEREX_ENOMEM);
        assert_null(f);
        assert_int_equal(serex_manual_run_pending(fx->manual), 0);
        failures++;
    }
    serex__alloc_fail_nth(0);
    assert_int_equal(rc, SEREX_OK);
    assert_true(failures >= 1);
    assert_int_equal(atomic_load(&fx->calls), 0);

    /* the successful one runs exactly once */
    assert_int_equal(serex_manual_run_pending(fx->manual), 1);
    assert_int_equal(atomic_load(&fx->calls), 1);
    assert_int_equal(serex_future_wait(f, 0), SEREX_OK);
    serex_future_release(f);
}

/* --- on a real pool --- */

static void future_on_pool_waited_from_main_thread(void **state)
{
    struct fixture *fx = *state;
    int nums[65] = {0};
    serex_future *f[64];

    make_pool(fx);
    for (int i = 0; i < 64; i++)
        assert_int_equal(serex_submit(fx->pool, next_int, &nums[i], &f[i]),
                         SEREX_OK);
    for (int i = 0; i < 64; i++) {
        assert_int_equal(serex_future_wait(f[i], TEST_TIMEOUT), SEREX_OK);
        assert_ptr_equal(serex_future_value(f[i]), &nums[i + 1]);
        assert_false(serex_future_cancel(f[i]));
        serex_future_release(f[i]);
    }
}

static void future_task_writes_visible_after_wait(void **state)
{
    struct fixture *fx = *state;
    serex_future *f = NULL;

    make_pool(fx);
    fx->plain = 1;
    assert_int_equal(serex_submit(fx->pool, write_plain, fx, &f), SEREX_OK);
    assert_int_equal(serex_future_wait(f, TEST_TIMEOUT), SEREX_OK);
    /* a plain read after the wait: TSan checks the happens-before */
    assert_int_equal(fx->plain, 42);
    assert_ptr_equal(serex_future_value(f), fx);
    serex_future_release(f);
}

/*
 * Submits RACE_N futures to the pool and cancels every other one: right
 * after its submission, or (@from_back) once all are queued, newest first,
 * so the cancels meet the workers coming from the front. Either way, for
 * each future exactly one of "cancel returned true" and "the task ran"
 * holds, and the wait and value agree with it.
 */
static void cancel_race(struct fixture *fx, bool from_back)
{
    struct race_slot *slots = calloc(RACE_N, sizeof *slots);
    serex_future **fs = calloc(RACE_N, sizeof *fs);
    bool *cancelled = calloc(RACE_N, sizeof *cancelled);
    int n_cancelled = 0;

    assert_non_null(slots);
    assert_non_null(fs);
    assert_non_null(cancelled);
    make_pool(fx);
    for (int i = 0; i < RACE_N; i++) {
        slots[i].fx = fx;
        atomic_init(&slots[i].ran, 0);
        assert_int_equal(serex_submit(fx->pool, race_call, &slots[i], &fs[i]),
                         SEREX_OK);
        if (!from_back && i % 2 == 0)
            cancelled[i] = serex_future_cancel(fs[i]);
    }
    for (int i = RACE_N - 2; from_back && i >= 0; i -= 2)
        cancelled[i] = serex_future_cancel(fs[i]);
    for (int i = 0; i < RACE_N; i++) {
        int rc = serex_future_wait(fs[i], TEST_TIMEOUT);

        assert_int_equal(rc, cancelled[i] ? SEREX_ECANCELED : SEREX_OK);
        assert_int_equal(atomic_load(&slots[i].ran), !cancelled[i]);
        assert_ptr_equal(serex_future_value(fs[i]),
                         cancelled[i] ? NULL : &slots[i]);
        assert_false(serex_future_cancel(fs[i]));
        serex_future_release(fs[i]);
        n_cancelled += cancelled[i];
    }
    assert_int_equal(atomic_load(&fx->calls), RACE_N - n_cancelled);
    free(cancelled);
    free(fs);
    free(slots);
}

static void future_cancel_races_start_exactly_one_wins(void **state)
{
    cancel_race(*state, false);
}

static void future_cancel_from_back_races_workers_exactly_one_wins(
    void **state)
{
    cancel_race(*state, true);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(future_wait_before_run_times_out_then_ok_with_value),
        T(future_value_is_per_future),
        T(future_cancel_before_run_stops_the_task),
        T(future_cancel_after_run_returns_false),
        T(future_shutdown_now_cancels_futures_and_hands_back_plain_tasks),
        T(future_shutdown_now_with_null_callback_still_cancels),
        T(future_destroy_with_pending_future_cancels_it),
        T(future_destroy_after_release_frees_the_future),
        T(future_submit_after_shutdown_is_rejected),
        T(future_null_arguments_are_einval),
        T(future_wait_with_bad_timeout_is_einval),
        T(future_release_before_run_then_run_is_safe),
        T(future_release_after_cancel_then_run_is_safe),
        T(future_submit_allocation_failure_is_enomem),
        T(future_on_pool_waited_from_main_thread),
        T(future_task_writes_visible_after_wait),
        T(future_cancel_races_start_exactly_one_wins),
        T(future_cancel_from_back_races_workers_exactly_one_wins),
    };
#undef T

    return cmocka_run_group_tests_name("future", tests, NULL, NULL);
}
