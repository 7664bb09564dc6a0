/* SPDX-License-Identifier: MIT */
/*
 * test_pool_life.c - the pool's thread life (src/pool_thread.c): keep-alive,
 * retiring racing growth, and the pool's memory against executes that are
 * still returning when the user destroys it.
 *
 * No test here measures time or counts wake-ups. Races are forced open by
 * hooks that park a thread on an event at the racy moment (the stop hook
 * of a retiring thread, the test seam after an execute's publish), and
 * every wait that the defect would make endless is a wait with a timeout
 * that fails the test instead. Where a defect leaves a thread blocked for
 * ever (a lock never released), the test reports it and aborts: the test
 * then fails, it does not hang.
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>

#include "pool_internal.h"
#include "thread_internal.h"

struct fixture {
    serex_executor *pool;
    serex_event *ev[4];
    _Atomic int hold_next_stop; /* the next stop hook parks on ev[3] */
    _Atomic int stop_held;      /* ... and says so here */
    _Atomic int wait_rc;        /* what the waiting task's wait said */
    _Atomic int exec_rc;        /* what the racing execute said */
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    for (int i = 0; i < 4; i++)
        assert_int_equal(serex_event_create(&f->ev[i]), SEREX_OK);
    atomic_store(&f->wait_rc, 1);
    atomic_store(&f->exec_rc, 1);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    serex__pool_test_after_publish(NULL, NULL);
    serex__pool_test_before_token(NULL, NULL);
    if (f->pool != NULL)
        assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    for (int i = 0; i < 4; i++)
        serex_event_destroy(f->ev[i]);
    free(f);
    return 0;
}

/* A wait the defect would make endless: report it and abort (no hang). */
static void signalled_or_abort(serex_event *ev, const char *what)
{
    if (serex_event_wait(ev, TEST_TIMEOUT) != SEREX_OK) {
        fprintf(stderr, "test_pool_life: %s never happened\n", what);
        abort();
    }
}

/* --- keep-alive --- */

static int idle_prober(void *arg)
{
    struct fixture *f = arg;

    /* a 0 timeout only looks; then a task must still reach a worker */
    atomic_store(&f->wait_rc, serex_await_termination(f->pool, 0));
    atomic_store(&f->exec_rc,
                 serex_execute(f->pool, test_signal_task, f->ev[1]));
    serex_event_signal(f->ev[0]);
    return 0;
}

/*
 * An elastic pool whose only worker is a core one, idle past its
 * keep-alive: the worker may not retire, and must go on waiting (before:
 * every timed wait returned at once without giving up the pool's lock,
 * for ever: a core burnt, and await_termination(pool, 0) and any execute
 * that wakes a worker blocked on that lock until work came, that is,
 * never).
 */
static void pool_idle_elastic_pool_past_keep_alive_still_serves(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {
        .threads = 1, .max_threads = 2, .keep_alive_ns = MS};
    serex__thread t;

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    /* not a measure: only long enough for the keep-alive to pass, and
     * for the worker to give up spinning */
    test_sleep_ns(30 * MS);
    assert_int_equal(serex__thread_start(&t, idle_prober, f), SEREX_OK);
    signalled_or_abort(f->ev[0], "await(pool, 0) and execute returning");
    signalled_or_abort(f->ev[1], "the task after the keep-alive running");
    serex__thread_join(t);
    assert_int_equal(atomic_load(&f->wait_rc), SEREX_ETIMEDOUT);
    assert_int_equal(atomic_load(&f->exec_rc), SEREX_OK);
    assert_int_equal(serex__pool_threads(f->pool), 1);
}

/* --- retiring racing growth --- */

static void hold_stop_hook(void *ctx, unsigned index)
{
    struct fixture *f = ctx;

    (void)index;
    if (atomic_exchange(&f->hold_next_stop, 0)) {
        atomic_store(&f->stop_held, 1);
        serex_event_signal(f->ev[2]);
        (void)serex_event_wait(f->ev[3], TEST_TIMEOUT);
    }
}

/* Waits for ev[0], which only a task queued after it signals. */
static void wait_for_later_task(void *arg)
{
    struct fixture *f = arg;

    atomic_store(&f->wait_rc, serex_event_wait(f->ev[0], TEST_TIMEOUT));
    serex_event_signal(f->ev[1]);
}

/*
 * A task submitted while every live worker is busy and an extra thread is
 * retiring (its stop hook running) must get a thread once the slot frees
 * (before: the start found no free slot, the refusal was dropped and
 * nothing looked again: the task waited for the busy worker, which waited
 * for the task).
 */
static void pool_task_while_an_extra_thread_retires_gets_a_thread(
    void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {.threads = 1,
                             .max_threads = 2,
                             .keep_alive_ns = MS,
                             .on_thread_stop = hold_stop_hook,
                             .hook_ctx = f};
    serex_event *ran;

    assert_int_equal(serex_event_create(&ran), SEREX_OK);
    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    /* the core worker waits for a task that is not queued yet */
    assert_int_equal(serex_execute(f->pool, wait_for_later_task, f), SEREX_OK);
    /* every worker busy: this one starts the extra thread, which then
     * idles past its keep-alive and retires; its stop hook parks */
    atomic_store(&f->hold_next_stop, 1);
    assert_int_equal(serex_execute(f->pool, test_signal_task, ran), SEREX_OK);
    signalled_or_abort(ran, "the extra thread's task");
    signalled_or_abort(f->ev[2], "the extra thread retiring");
    /* the task the core worker waits for: no live worker is free, and
     * the retiring thread still holds its slot */
    assert_int_equal(serex_execute(f->pool, test_signal_task, f->ev[0]),
                     SEREX_OK);
    serex_event_signal(f->ev[3]); /* the stop hook returns: the slot frees */
    assert_int_equal(serex_event_wait(f->ev[1], 2 * TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(atomic_load(&f->wait_rc), SEREX_OK);
    serex_event_destroy(ran);
}

/* --- the pool's memory against executes still returning --- */

struct seam {
    struct fixture *f;
    _Atomic int calls;
};

/* Runs in pool_execute after its task is published and before it wakes a
 * worker: the window in which the task can run and the pool go. */
static void park_in_seam(void *ctx)
{
    struct seam *s = ctx;

    if (atomic_fetch_add(&s->calls, 1) == 0) {
        serex_event_signal(s->f->ev[0]);
        (void)serex_event_wait(s->f->ev[1], TEST_TIMEOUT);
    }
}

static int racing_executor(void *arg)
{
    struct fixture *f = arg;

    atomic_store(&f->exec_rc, serex_execute(f->pool, test_signal_task,
                                            f->ev[2]));
    return 0;
}

/*
 * Another thread's execute (a continuation or a group's notification, in
 * real programs) is still returning while its task runs and the user,
 * seeing the work done, destroys the pool: the execute's last touches of
 * the pool must not be a use after free (ASan: before, every run).
 */
static void pool_destroy_while_an_execute_returns_is_safe(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {.threads = 1};
    struct seam s = {f, 0};
    serex__thread t;

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    /* the worker parks (not a measure: the state is polled) */
    for (int64_t end = test_now_ns() + TEST_TIMEOUT;
         serex__pool_sleepers(f->pool) != 1;) {
        assert_true(test_now_ns() < end);
        test_sleep_ns(MS / 10);
    }
    serex__pool_test_after_publish(park_in_seam, &s);
    assert_int_equal(serex__thread_start(&t, racing_executor, f), SEREX_OK);
    signalled_or_abort(f->ev[0], "the execute reaching its wake-up");
    /* the task is queued: destroy runs it, then frees the pool */
    assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    f->pool = NULL;
    assert_signalled(f->ev[2]);
    serex_event_signal(f->ev[1]); /* the execute goes on: wake, return */
    serex__thread_join(t);
    serex__pool_test_after_publish(NULL, NULL);
    assert_int_equal(atomic_load(&f->exec_rc), SEREX_OK);
    assert_int_equal(atomic_load(&s.calls), 1);
}

/* The window between a waker taking a parked worker off the list and
 * storing its token: the seam outlasts the worker's keep-alive. */
static void outlast_keep_alive(void *ctx)
{
    atomic_int *calls = ctx;

    atomic_fetch_add(calls, 1);
    test_sleep_ns(40 * MS); /* ten keep-alives */
}

static void block_on(void *ev)
{
    (void)serex_event_wait(ev, TEST_TIMEOUT);
}

/*
 * An extra worker of an elastic pool is parked when a producer takes it
 * off the list to wake it; before the token is stored, the worker's
 * keep-alive passes. It must wait for the token on its way and run the
 * task, not retire (before, it looked for itself on the list it was no
 * longer on: a null dereference, and the task left to the blocked core
 * worker).
 */
static void pool_keep_alive_passing_as_a_token_comes_waits_for_it(
    void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {
        .threads = 1, .max_threads = 2, .keep_alive_ns = 4 * MS};
    atomic_int calls = 0;

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    /* the core worker blocks; the next task grows an extra one */
    assert_int_equal(serex_execute(f->pool, block_on, f->ev[0]), SEREX_OK);
    assert_int_equal(serex_execute(f->pool, test_signal_task, f->ev[1]),
                     SEREX_OK);
    assert_signalled(f->ev[1]);
    /* it parks (not a measure: the state is polled) */
    for (int64_t end = test_now_ns() + TEST_TIMEOUT;
         serex__pool_sleepers(f->pool) != 1;) {
        assert_true(test_now_ns() < end);
        test_sleep_ns(MS / 10);
    }
    serex__pool_test_before_token(outlast_keep_alive, &calls);
    assert_int_equal(serex_execute(f->pool, test_signal_task, f->ev[2]),
                     SEREX_OK);
    serex__pool_test_before_token(NULL, NULL);
    assert_signalled(f->ev[2]); /* the core worker is still blocked */
    serex_event_signal(f->ev[0]);
    assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    f->pool = NULL;
    /* the parked worker may have retired before the execute came: then
     * the execute grew a new one and no token was given (no test) */
    assert_true(atomic_load(&calls) <= 1);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(pool_idle_elastic_pool_past_keep_alive_still_serves),
        T(pool_task_while_an_extra_thread_retires_gets_a_thread),
        T(pool_destroy_while_an_execute_returns_is_safe),
        T(pool_keep_alive_passing_as_a_token_comes_waits_for_it),
#undef T
    };

    if (argc > 1) /* one test by name (or a pattern): a failing one alone */
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests_name("pool_life", tests, NULL, NULL);
}
