/* SPDX-License-Identifier: MIT */
/*
 * test_event.c - the auto-reset event: kept signals, auto-reset, merging,
 * polling, timeouts that never end early, bad input, and no lost wake-up
 * across threads (ping-pong, several waiters).
 *
 * Every cross-thread wait has the test timeout, and the main thread joins
 * its helper threads before asserting, so a lost wake-up fails the test
 * instead of hanging it or freeing the fixture under a live thread.
 */
#include "test_util.h"

#include <stdlib.h> /* calloc, free */

#define PINGPONG_ROUNDS 20000
#define NWAITERS 4

struct fixture {
    serex_event *ev;   /* the event under test; "ping" in the ping-pong */
    serex_event *pong; /* the answer in the ping-pong */
    serex_event *done; /* a waiter tells the main thread it was released */
    int ball;          /* plain: handed back and forth by the events */
    int pong_status;   /* the helper thread's verdict, read after join */
    atomic_int ok_count;
    atomic_int timeouts;
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);

    if (fx == NULL)
        return -1;
    if (serex_event_create(&fx->ev) != SEREX_OK ||
        serex_event_create(&fx->pong) != SEREX_OK ||
        serex_event_create(&fx->done) != SEREX_OK) {
        serex_event_destroy(fx->ev);
        serex_event_destroy(fx->pong);
        free(fx);
        return -1;
    }
    atomic_init(&fx->ok_count, 0);
    atomic_init(&fx->timeouts, 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    serex_event_destroy(fx->ev);
    serex_event_destroy(fx->pong);
    serex_event_destroy(fx->done);
    free(fx);
    return 0;
}

/* --- one thread --- */

static void event_signal_before_wait_is_kept(void **state)
{
    struct fixture *fx = *state;

    serex_event_signal(fx->ev);
    assert_int_equal(serex_event_wait(fx->ev, 0), SEREX_OK);
    serex_event_signal(fx->ev);
    assert_int_equal(serex_event_wait(fx->ev, TEST_TIMEOUT), SEREX_OK);
    serex_event_signal(fx->ev);
    assert_int_equal(serex_event_wait(fx->ev, SEREX_FOREVER), SEREX_OK);
}

static void event_wait_resets_the_signal(void **state)
{
    struct fixture *fx = *state;

    serex_event_signal(fx->ev);
    assert_int_equal(serex_event_wait(fx->ev, 0), SEREX_OK);
    assert_int_equal(serex_event_wait(fx->ev, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_event_wait(fx->ev, 1), SEREX_ETIMEDOUT);
}

static void event_two_signals_release_one_wait(void **state)
{
    struct fixture *fx = *state;

    serex_event_signal(fx->ev);
    serex_event_signal(fx->ev);
    assert_int_equal(serex_event_wait(fx->ev, 0), SEREX_OK);
    assert_int_equal(serex_event_wait(fx->ev, 0), SEREX_ETIMEDOUT);
}

static void event_wait_zero_polls(void **state)
{
    struct fixture *fx = *state;

    assert_int_equal(serex_event_wait(fx->ev, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_event_wait(fx->ev, 0), SEREX_ETIMEDOUT);
    serex_event_signal(fx->ev);
    assert_int_equal(serex_event_wait(fx->ev, 0), SEREX_OK);
    /* events do not share state */
    assert_int_equal(serex_event_wait(fx->pong, 0), SEREX_ETIMEDOUT);
}

static void event_timed_wait_never_ends_early(void **state)
{
    struct fixture *fx = *state;

    for (int i = 0; i < 3; i++) {
        int64_t start = test_now_ns();
        int rc = serex_event_wait(fx->ev, 20 * MS);
        int64_t elapsed = test_now_ns() - start;

        assert_int_equal(rc, SEREX_ETIMEDOUT);
        assert_true(elapsed >= 20 * MS);
    }
}

static void event_bad_arguments_are_einval(void **state)
{
    struct fixture *fx = *state;

    assert_int_equal(serex_event_create(NULL), SEREX_EINVAL);
    assert_int_equal(serex_event_wait(NULL, 0), SEREX_EINVAL);
    assert_int_equal(serex_event_wait(NULL, SEREX_FOREVER), SEREX_EINVAL);
    assert_int_equal(serex_event_wait(fx->ev, -2), SEREX_EINVAL);
    assert_int_equal(serex_event_wait(fx->ev, INT64_MIN), SEREX_EINVAL);
    /* a bad timeout does not consume a signal */
    serex_event_signal(fx->ev);
    assert_int_equal(serex_event_wait(fx->ev, -2), SEREX_EINVAL);
    assert_int_equal(serex_event_wait(fx->ev, 0), SEREX_OK);
}

static void event_null_signal_and_destroy_are_noops(void **state)
{
    struct fixture *fx = *state;

    serex_event_signal(NULL);
    serex_event_destroy(NULL);
    assert_int_equal(serex_event_wait(fx->ev, 0), SEREX_ETIMEDOUT);
}

/* --- across threads --- */

static int pong_thread(void *arg)
{
    struct fixture *fx = arg;

    for (int i = 0; i < PINGPONG_ROUNDS; i++) {
        if (serex_event_wait(fx->ev, TEST_TIMEOUT) != SEREX_OK) {
            fx->pong_status = SEREX_ETIMEDOUT;
            return 0;
        }
        if (fx->ball != 2 * i + 1) {
            fx->pong_status = SEREX_EINVAL;
            return 0;
        }
        fx->ball = 2 * i + 2;
        serex_event_signal(fx->pong);
    }
    return 0;
}

static void event_ping_pong_loses_no_wake_up(void **state)
{
    struct fixture *fx = *state;
    serex__thread t;
    int rc = SEREX_OK, i, ball = 0;

    assert_int_equal(serex__thread_start(&t, pong_thread, fx), SEREX_OK);
    for (i = 0; i < PINGPONG_ROUNDS; i++) {
        fx->ball = 2 * i + 1;
        serex_event_signal(fx->ev);
        rc = serex_event_wait(fx->pong, TEST_TIMEOUT);
        if (rc != SEREX_OK)
            break;
        ball = fx->ball; /* plain: the events order it (TSan checks) */
        if (ball != 2 * i + 2)
            break;
    }
    serex__thread_join(t);
    assert_int_equal(fx->pong_status, SEREX_OK);
    assert_int_equal(rc, SEREX_OK);
    assert_int_equal(i, PINGPONG_ROUNDS);
    assert_int_equal(ball, 2 * PINGPONG_ROUNDS);
    assert_int_equal(serex_event_wait(fx->ev, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_event_wait(fx->pong, 0), SEREX_ETIMEDOUT);
}

static int waiter_thread(void *arg)
{
    struct fixture *fx = arg;

    if (serex_event_wait(fx->ev, TEST_TIMEOUT) == SEREX_OK)
        atomic_fetch_add(&fx->ok_count, 1);
    else
        atomic_fetch_add(&fx->timeouts, 1);
    serex_event_signal(fx->done);
    return 0;
}

static void event_each_signal_releases_exactly_one_waiter(void **state)
{
    struct fixture *fx = *state;
    serex__thread t[NWAITERS];
    int counts[NWAITERS] = {0};
    int rounds;

    for (int i = 0; i < NWAITERS; i++)
        assert_int_equal(serex__thread_start(&t[i], waiter_thread, fx),
                         SEREX_OK);
    /*
     * One signal per round, and the next only once the released waiter has
     * reported: a signal can then release one waiter only, so the count
     * must step by exactly one (a signal that released two would show as
     * a jump; a lost one as a timeout).
     */
    for (rounds = 0; rounds < NWAITERS; rounds++) {
        serex_event_signal(fx->ev);
        if (serex_event_wait(fx->done, TEST_TIMEOUT) != SEREX_OK)
            break;
        counts[rounds] = atomic_load(&fx->ok_count);
    }
    for (int i = 0; i < NWAITERS; i++)
        serex__thread_join(t[i]);
    assert_int_equal(rounds, NWAITERS);
    for (int i = 0; i < NWAITERS; i++)
        assert_int_equal(counts[i], i + 1);
    assert_int_equal(atomic_load(&fx->ok_count), NWAITERS);
    assert_int_equal(atomic_load(&fx->timeouts), 0);
    assert_int_equal(serex_event_wait(fx->ev, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_event_wait(fx->done, 0), SEREX_ETIMEDOUT);
}

/* --- the manual-reset event --- */

struct manual_waiters {
    serex_event *ev;
    atomic_int released;
};

static int manual_waiter_thread(void *arg)
{
    struct manual_waiters *w = arg;

    if (serex_event_wait(w->ev, TEST_TIMEOUT) == SEREX_OK)
        atomic_fetch_add(&w->released, 1);
    return 0;
}

/* One signal lets every waiter through, and every later wait, until a
 * reset; an auto-reset event would let one through. */
static void manual_event_signal_releases_every_wait(void **state)
{
    struct manual_waiters w;
    serex__thread t[NWAITERS];

    (void)state;
    assert_int_equal(serex_event_create_manual(&w.ev), SEREX_OK);
    atomic_init(&w.released, 0);
    assert_int_equal(serex_event_wait(w.ev, 0), SEREX_ETIMEDOUT);
    for (int i = 0; i < NWAITERS; i++)
        assert_int_equal(serex__thread_start(&t[i], manual_waiter_thread, &w),
                         SEREX_OK);
    serex_event_signal(w.ev);          /* one signal for all of them */
    for (int i = 0; i < NWAITERS; i++) /* each waits TEST_TIMEOUT at most */
        serex__thread_join(t[i]);
    assert_int_equal(atomic_load(&w.released), NWAITERS);
    /* still signalled: later waits pass at once */
    assert_int_equal(serex_event_wait(w.ev, 0), SEREX_OK);
    assert_int_equal(serex_event_wait(w.ev, 0), SEREX_OK);
    /* reset: waits block again; the next signal opens it again */
    serex_event_reset(w.ev);
    assert_int_equal(serex_event_wait(w.ev, 0), SEREX_ETIMEDOUT);
    serex_event_signal(w.ev);
    assert_int_equal(serex_event_wait(w.ev, 0), SEREX_OK);
    serex_event_destroy(w.ev);
}

/* A reset of an auto-reset event drops a signal nobody consumed. */
static void event_reset_drops_a_pending_signal(void **state)
{
    struct fixture *fx = *state;

    serex_event_signal(fx->ev);
    serex_event_reset(fx->ev);
    assert_int_equal(serex_event_wait(fx->ev, 0), SEREX_ETIMEDOUT);
    serex_event_reset(NULL); /* ignored */
    assert_int_equal(serex_event_create_manual(NULL), SEREX_EINVAL);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(event_signal_before_wait_is_kept),
        T(event_wait_resets_the_signal),
        T(event_two_signals_release_one_wait),
        T(event_wait_zero_polls),
        T(event_timed_wait_never_ends_early),
        T(event_bad_arguments_are_einval),
        T(event_null_signal_and_destroy_are_noops),
        T(event_ping_pong_loses_no_wake_up),
        T(event_each_signal_releases_exactly_one_waiter),
        T(event_reset_drops_a_pending_signal),
        cmocka_unit_test(manual_event_signal_releases_every_wait),
    };
#undef T

    return cmocka_run_group_tests_name("event", tests, NULL, NULL);
}
