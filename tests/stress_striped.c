/* SPDX-License-Identifier: MIT */
/*
 * stress_striped.c - the striped executor under concurrent producers on a
 * real pool: lanes made and freed as keys rotate, and shutdown_now racing
 * execute (the serial executor's are in stress_serial.c; both race
 * through test_util.h's test_race).
 *
 * Each key's tasks keep their state in plain (non-atomic) variables
 * guarded only by the lane's order, so under TSan (scripts/test.sh runs
 * the stress label there) a missing happens-before between consecutive
 * tasks of a key is a reported race, and a task run out of its producer's
 * order within its key is counted. Promise 1 is checked exactly: per
 * producer and key, the tasks read "ran" for a prefix, then "handed back"
 * for the rest of what was accepted, then nothing for what was rejected;
 * never twice, never lost.
 */
#include "test_util.h"

#define PRODUCERS TEST_RACE_PRODUCERS
#define NTASKS TEST_RACE_TASKS
#define KEYS TEST_RACE_KEYS

struct fixture {
    struct test_race race;             /* producers, items and the pool */
    serex_striped *st;
    struct test_race_order keys[KEYS]; /* each key's tasks */
};

static void key_task(void *arg)
{
    struct test_race_item *it = arg;
    struct fixture *f = it->race->ctx;

    test_race_mark(it, TEST_RACE_RAN);
    test_race_order_see(&f->keys[it->key], it);
}

static int submit(struct test_race *race, struct test_race_item *it)
{
    struct fixture *f = race->ctx;

    return serex_striped_execute(f->st, it->key, race->task_fn, it);
}

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    /* a lane's drain runs at most 4 tasks: lanes hand over often */
    serex_serial_config cfg = {.batch = 4};

    assert_non_null(f);
    test_race_init(&f->race, "stress-striped", submit, key_task, f);
    assert_int_equal(serex_striped_create(f->race.pool, &cfg, &f->st),
                     SEREX_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex_destroy(serex_striped_executor(f->st)), SEREX_OK);
    test_race_fini(&f->race);
    free(f);
    return 0;
}

/* --- striped --- */

static void check_key_order(struct fixture *f, long ran)
{
    long total = 0;

    for (size_t k = 0; k < KEYS; k++) {
        assert_int_equal(f->keys[k].disorder, 0);
        total += f->keys[k].total;
    }
    assert_int_equal(total, ran);
}

static void stress_striped_lanes_churn_and_keep_per_key_order(void **state)
{
    struct fixture *f = *state;
    serex_executor *ex = serex_striped_executor(f->st);

    test_race_start(&f->race);
    assert_int_equal(test_race_join(&f->race), NTASKS);
    serex_shutdown(ex);
    assert_int_equal(serex_await_termination(ex, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_striped_lanes(f->st), 0);
    assert_int_equal(test_race_check_accounting(&f->race, true), NTASKS);
    check_key_order(f, NTASKS);
}

static void stress_striped_shutdown_now_racing_execute_loses_nothing(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *ex = serex_striped_executor(f->st);
    long accepted, ran;
    size_t handed;

    test_race_start(&f->race);
    test_race_wait_for_progress(&f->race);
    handed = serex_shutdown_now(ex, test_race_handed, &f->race);
    accepted = test_race_join(&f->race);
    assert_true(accepted >= NTASKS / 4 - PRODUCERS);
    assert_int_equal(serex_await_termination(ex, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_striped_lanes(f->st), 0);
    ran = test_race_check_accounting(&f->race, true);
    assert_int_equal(ran + (long)handed, accepted);
    check_key_order(f, ran);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(stress_striped_lanes_churn_and_keep_per_key_order),
        T(stress_striped_shutdown_now_racing_execute_loses_nothing),
#undef T
    };

    return cmocka_run_group_tests_name("stress_striped", tests, NULL, NULL);
}
