/* SPDX-License-Identifier: MIT */
/*
 * test_manual.c - the manual executor: nothing runs until told, FIFO order,
 * run_pending's snapshot, shutdown and shutdown_now, await_termination,
 * EDEADLK from its own task, bad input, allocation failure, and the
 * happens-before from a submitting thread to the thread that runs the task.
 */
#include "test_util.h"

#include <stdlib.h> /* calloc, free */

#define NLOG 16
#define HB_TASKS 1000

struct fixture;

struct slot {
    struct fixture *fx;
    int index;
    int data; /* plain: written before execute, read by the task */
};

struct fixture {
    serex_executor *ex;   /* NULL once a test destroyed it */
    serex_executor *pool; /* made by the tests that need one */
    struct slot slots[NLOG];
    int log[NLOG]; /* indexes in the order their tasks ran */
    size_t nlog;
    int resubmits;      /* resubmit_task: runs left to resubmit */
    int rc_await0, rc_await, rc_destroy; /* seen inside a task */
    struct test_pending pending;
    serex_fn pending_fns[NLOG];
    void *pending_args[NLOG];
    struct slot *hb;    /* HB_TASKS slots for the cross-thread test */
    int hb_seen;        /* the sum the tasks read, on the running thread */
    int hb_status;      /* the submitting thread's verdict, read after join */
};

/* --- tasks --- */

static void log_task(void *arg)
{
    struct slot *s = arg;

    s->fx->log[s->fx->nlog++] = s->index;
}

static void resubmit_task(void *arg)
{
    struct slot *s = arg;

    log_task(s);
    if (s->fx->resubmits > 0) {
        s->fx->resubmits--;
        assert_int_equal(serex_execute(s->fx->ex, resubmit_task, s),
                         SEREX_OK);
    }
}

static void deadlock_task(void *arg)
{
    struct fixture *fx = arg;

    fx->rc_await0 = serex_await_termination(fx->ex, 0);
    /* a short limit: a missing EDEADLK fails rather than hangs */
    fx->rc_await = serex_await_termination(fx->ex, 10 * MS);
    /* a destroy that missed the deadlock would hang or free the executor
     * under this task: try it only if the shared check works */
    fx->rc_destroy = fx->rc_await0 == SEREX_EDEADLK ? serex_destroy(fx->ex)
                                                    : SEREX_OK;
}

static void hb_task(void *arg)
{
    struct slot *s = arg;

    s->fx->hb_seen += s->data; /* plain read: TSan checks the ordering */
}

static void noop_task(void *arg)
{
    (void)arg;
}

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);

    if (fx == NULL)
        return -1;
    if (serex_manual_create(&fx->ex) != SEREX_OK) {
        free(fx);
        return -1;
    }
    for (int i = 0; i < NLOG; i++) {
        fx->slots[i].fx = fx;
        fx->slots[i].index = i;
    }
    fx->pending.cap = NLOG;
    fx->pending.fns = fx->pending_fns;
    fx->pending.args = fx->pending_args;
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    serex__alloc_fail_nth(0);
    if (fx->ex != NULL)
        assert_int_equal(serex_destroy(fx->ex), SEREX_OK);
    if (fx->pool != NULL)
        assert_int_equal(serex_destroy(fx->pool), SEREX_OK);
    free(fx->hb);
    free(fx);
    return 0;
}

static void queue_logged(struct fixture *fx, int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(serex_execute(fx->ex, log_task, &fx->slots[i]),
                         SEREX_OK);
}

/* --- running by hand --- */

static void manual_nothing_runs_until_told(void **state)
{
    struct fixture *fx = *state;

    queue_logged(fx, 3);
    assert_int_equal(fx->nlog, 0);
    assert_int_equal(serex_manual_run_pending(fx->ex), 3);
    assert_int_equal(fx->nlog, 3);
}

static void manual_run_one_runs_in_fifo_order(void **state)
{
    struct fixture *fx = *state;

    assert_false(serex_manual_run_one(fx->ex));
    queue_logged(fx, 5);
    for (int i = 0; i < 5; i++) {
        assert_true(serex_manual_run_one(fx->ex));
        assert_int_equal(fx->nlog, (size_t)i + 1);
        assert_int_equal(fx->log[i], i);
    }
    assert_false(serex_manual_run_one(fx->ex));
    assert_int_equal(fx->nlog, 5);
}

static void manual_run_pending_runs_only_what_was_queued(void **state)
{
    struct fixture *fx = *state;

    fx->resubmits = 2;
    assert_int_equal(serex_execute(fx->ex, resubmit_task, &fx->slots[0]),
                     SEREX_OK);
    assert_int_equal(serex_execute(fx->ex, log_task, &fx->slots[1]),
                     SEREX_OK);

    /* the resubmitted task waits for the next call */
    assert_int_equal(serex_manual_run_pending(fx->ex), 2);
    assert_int_equal(fx->nlog, 2);
    assert_int_equal(fx->log[0], 0);
    assert_int_equal(fx->log[1], 1);
    assert_int_equal(serex_manual_run_pending(fx->ex), 1);
    assert_int_equal(fx->nlog, 3);
    assert_int_equal(serex_manual_run_pending(fx->ex), 1);
    assert_int_equal(fx->nlog, 4);
    assert_int_equal(serex_manual_run_pending(fx->ex), 0);
    assert_int_equal(fx->nlog, 4);
}

/* --- lifecycle --- */

static void manual_execute_after_shutdown_is_rejected(void **state)
{
    struct fixture *fx = *state;

    queue_logged(fx, 1);
    serex_shutdown(fx->ex);
    serex_shutdown(fx->ex); /* idempotent */
    assert_int_equal(serex_execute(fx->ex, log_task, &fx->slots[1]),
                     SEREX_EREJECTED);
    /* accepted before the shutdown: still runs */
    assert_int_equal(serex_manual_run_pending(fx->ex), 1);
    assert_int_equal(fx->nlog, 1);
    assert_int_equal(fx->log[0], 0);
}

static void manual_await_times_out_until_shut_down_and_drained(void **state)
{
    struct fixture *fx = *state;

    assert_int_equal(serex_await_termination(fx->ex, 0), SEREX_ETIMEDOUT);
    queue_logged(fx, 2);
    assert_int_equal(serex_await_termination(fx->ex, 0), SEREX_ETIMEDOUT);
    serex_shutdown(fx->ex);
    assert_int_equal(serex_await_termination(fx->ex, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_await_termination(fx->ex, 1 * MS),
                     SEREX_ETIMEDOUT);
    assert_true(serex_manual_run_one(fx->ex));
    assert_int_equal(serex_await_termination(fx->ex, 0), SEREX_ETIMEDOUT);
    assert_true(serex_manual_run_one(fx->ex));
    assert_int_equal(serex_await_termination(fx->ex, 0), SEREX_OK);
    assert_int_equal(serex_await_termination(fx->ex, SEREX_FOREVER),
                     SEREX_OK);
    assert_int_equal(fx->nlog, 2);
}

static void manual_await_bad_arguments_are_einval(void **state)
{
    struct fixture *fx = *state;

    serex_shutdown(fx->ex);
    assert_int_equal(serex_await_termination(fx->ex, -2), SEREX_EINVAL);
    assert_int_equal(serex_await_termination(NULL, 0), SEREX_EINVAL);
    assert_int_equal(serex_execute(NULL, log_task, NULL), SEREX_EINVAL);
    assert_int_equal(serex_destroy(NULL), SEREX_EINVAL);
    assert_int_equal(serex_shutdown_now(NULL, NULL, NULL), 0);
    serex_shutdown(NULL);
    assert_int_equal(serex_await_termination(fx->ex, 0), SEREX_OK);
}

static void manual_execute_null_fn_is_einval(void **state)
{
    struct fixture *fx = *state;

    assert_int_equal(serex_execute(fx->ex, NULL, NULL), SEREX_EINVAL);
    assert_int_equal(serex_manual_run_pending(fx->ex), 0);
}

static void manual_shutdown_now_hands_back_in_order(void **state)
{
    struct fixture *fx = *state;

    queue_logged(fx, 4);
    assert_int_equal(serex_execute(fx->ex, noop_task, &fx->slots[4]),
                     SEREX_OK);
    assert_int_equal(
        serex_shutdown_now(fx->ex, test_pending_cb, &fx->pending), 5);
    assert_int_equal(fx->pending.n, 5);
    for (int i = 0; i < 4; i++) {
        assert_ptr_equal(fx->pending.fns[i], log_task);
        assert_ptr_equal(fx->pending.args[i], &fx->slots[i]);
    }
    assert_ptr_equal(fx->pending.fns[4], noop_task);
    assert_ptr_equal(fx->pending.args[4], &fx->slots[4]);

    /* handed back, not run; and the executor is shut down and empty */
    assert_int_equal(fx->nlog, 0);
    assert_false(serex_manual_run_one(fx->ex));
    assert_int_equal(serex_execute(fx->ex, log_task, &fx->slots[5]),
                     SEREX_EREJECTED);
    assert_int_equal(serex_await_termination(fx->ex, 0), SEREX_OK);
    assert_int_equal(serex_shutdown_now(fx->ex, test_pending_cb,
                                        &fx->pending), 0);
    assert_int_equal(fx->pending.n, 5);
}

static void manual_await_or_destroy_from_own_task_is_edeadlk(void **state)
{
    struct fixture *fx = *state;

    assert_int_equal(serex_execute(fx->ex, deadlock_task, fx), SEREX_OK);
    assert_true(serex_manual_run_one(fx->ex));
    assert_int_equal(fx->rc_await0, SEREX_EDEADLK);
    assert_int_equal(fx->rc_await, SEREX_EDEADLK);
    assert_int_equal(fx->rc_destroy, SEREX_EDEADLK);

    /* destroy did nothing: the executor still works */
    queue_logged(fx, 1);
    assert_true(serex_manual_run_one(fx->ex));
    assert_int_equal(fx->nlog, 1);
    /* outside its tasks the same calls are fine again */
    serex_shutdown(fx->ex);
    assert_int_equal(serex_await_termination(fx->ex, 0), SEREX_OK);
}

static void manual_destroy_drops_queued_tasks(void **state)
{
    struct fixture *fx = *state;

    /* the nodes are freed (LSan checks) and nothing runs */
    queue_logged(fx, 3);
    assert_int_equal(serex_destroy(fx->ex), SEREX_OK);
    fx->ex = NULL;
    assert_int_equal(fx->nlog, 0);
}

/* --- bad input --- */

static void manual_run_on_null_or_other_executor_does_nothing(void **state)
{
    struct fixture *fx = *state;
    serex_pool_config cfg = {.threads = 1, .name = "test-manual"};

    assert_false(serex_manual_run_one(NULL));
    assert_int_equal(serex_manual_run_pending(NULL), 0);
    assert_int_equal(serex_pool_create(&cfg, &fx->pool), SEREX_OK);
    assert_false(serex_manual_run_one(fx->pool));
    assert_int_equal(serex_manual_run_pending(fx->pool), 0);
    /* with something queued on the manual one, too */
    queue_logged(fx, 1);
    assert_false(serex_manual_run_one(fx->pool));
    assert_int_equal(serex_manual_run_pending(fx->pool), 0);
    assert_int_equal(fx->nlog, 0);
}

static void manual_create_null_out_is_einval(void **state)
{
    (void)state;
    assert_int_equal(serex_manual_create(NULL), SEREX_EINVAL);
}

static void manual_create_allocation_failure_is_enomem(void **state)
{
    struct fixture *fx = *state;
    unsigned long n, failures = 0;
    serex_executor *ex = NULL;
    int rc = SEREX_ENOMEM;

    for (n = 1; n < 100; n++) {
        ex = (serex_executor *)fx; /* must be overwritten */
        serex__alloc_fail_nth(n);
        rc = serex_manual_create(&ex);
        if (rc == SEREX_OK)
            break;
        assert_int_equal(rc, SEREX_ENOMEM);
        assert_null(ex);
        failures++;
    }
    serex__alloc_fail_nth(0);
    assert_int_equal(rc, SEREX_OK);
    assert_true(failures >= 1);
    assert_non_null(ex);
    /* the one that succeeded works */
    assert_int_equal(serex_execute(ex, log_task, &fx->slots[0]), SEREX_OK);
    assert_true(serex_manual_run_one(ex));
    assert_int_equal(fx->nlog, 1);
    assert_int_equal(serex_destroy(ex), SEREX_OK);
}

/* --- across threads --- */

static int hb_submitter(void *arg)
{
    struct fixture *fx = arg;

    for (int i = 0; i < HB_TASKS; i++) {
        fx->hb[i].fx = fx;
        fx->hb[i].data = i + 1; /* plain writes before execute */
        if (serex_execute(fx->ex, hb_task, &fx->hb[i]) != SEREX_OK) {
            fx->hb_status = SEREX_EREJECTED;
            return 0;
        }
    }
    return 0;
}

static void manual_task_from_other_thread_sees_prior_writes(void **state)
{
    struct fixture *fx = *state;
    serex__thread t;
    int64_t deadline = serex__deadline(TEST_TIMEOUT);
    int ran = 0;

    fx->hb = calloc(HB_TASKS, sizeof *fx->hb);
    assert_non_null(fx->hb);
    assert_int_equal(serex__thread_start(&t, hb_submitter, fx), SEREX_OK);
    /*
     * Poll the queue rather than wait on an event: an event would order
     * the submitter's writes by itself and hide a missing ordering in the
     * executor from TSan. The deadline turns a lost task into a failure.
     */
    while (ran < HB_TASKS && serex__now_ns() < deadline) {
        if (serex_manual_run_one(fx->ex))
            ran++;
        else
            serex__thread_yield();
    }
    serex__thread_join(t);
    assert_int_equal(fx->hb_status, SEREX_OK);
    assert_int_equal(ran, HB_TASKS);
    assert_int_equal(fx->hb_seen, HB_TASKS * (HB_TASKS + 1) / 2);
    assert_false(serex_manual_run_one(fx->ex));
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(manual_nothing_runs_until_told),
        T(manual_run_one_runs_in_fifo_order),
        T(manual_run_pending_runs_only_what_was_queued),
        T(manual_execute_after_shutdown_is_rejected),
        T(manual_await_times_out_until_shut_down_and_drained),
        T(manual_await_bad_arguments_are_einval),
        T(manual_execute_null_fn_is_einval),
        T(manual_shutdown_now_hands_back_in_order),
        T(manual_await_or_destroy_from_own_task_is_edeadlk),
        T(manual_destroy_drops_queued_tasks),
        T(manual_run_on_null_or_other_executor_does_nothing),
        T(manual_create_null_out_is_einval),
        T(manual_create_allocation_failure_is_enomem),
        T(manual_task_from_other_thread_sees_prior_writes),
    };
#undef T

    return cmocka_run_group_tests_name("manual", tests, NULL, NULL);
}
