/* SPDX-License-Identifier: MIT */
/*
 * test_stats.c - serex_executor_stats for every kind of executor: counts
 * exact once the executor is idle (submitted, completed, rejected, queued,
 * threads, lanes, pending timers), tasks handed back leave nothing queued,
 * every kind says its name, and bad input (NULL, a user-written executor)
 * is SEREX_EINVAL.
 */
#include "test_util.h"

#include <string.h>

static void nop(void *arg)
{
    (void)arg;
}

static void block_task(void *arg)
{
    serex_event_wait(arg, SEREX_FOREVER);
}

static serex_stats stats_of(serex_executor *ex)
{
    serex_stats st;

    memset(&st, 0xff, sizeof st);
    assert_int_equal(serex_executor_stats(ex, &st), SEREX_OK);
    return st;
}

static void bad_input_is_einval(void **state)
{
    static const serex_executor_ops ops = {0};
    serex_executor user = {&ops}, *manual;
    serex_stats st;

    (void)state;
    assert_int_equal(serex_executor_stats(NULL, &st), SEREX_EINVAL);
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    assert_int_equal(serex_executor_stats(manual, NULL), SEREX_EINVAL);
    assert_int_equal(serex_executor_stats(&user, &st), SEREX_EINVAL);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
}

static void pool_counts(void **state)
{
    serex_pool_config c = {0};
    serex_executor *pool, *bounded;
    serex_stats st;
    serex_event *gate;

    (void)state;
    c.threads = 2;
    assert_int_equal(serex_pool_create(&c, &pool), SEREX_OK);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(serex_execute(pool, nop, NULL), SEREX_OK);
    st = stats_of(pool);
    /* busy: only what cannot move is exact (queued and completed are
     * read at different moments, so they need not add up) */
    assert_int_equal(st.submitted, 1000);
    assert_true(st.completed <= 1000);
    assert_int_equal(st.threads, 2);
    serex_shutdown(pool);
    assert_int_equal(serex_execute(pool, nop, NULL), SEREX_EREJECTED);
    assert_int_equal(serex_await_termination(pool, TEST_TIMEOUT), SEREX_OK);
    st = stats_of(pool);
    assert_int_equal(st.submitted, 1000);
    assert_int_equal(st.completed, 1000);
    assert_int_equal(st.queued, 0);
    assert_int_equal(st.rejected, 1);
    assert_int_equal(st.lanes, 0);
    assert_int_equal(st.pending_timers, 0);
    assert_int_equal(serex_destroy(pool), SEREX_OK);

    /* a full bounded queue: refused and counted */
    c.threads = 1;
    c.queue_capacity = 1;
    assert_int_equal(serex_pool_create(&c, &bounded), SEREX_OK);
    assert_int_equal(serex_event_create(&gate), SEREX_OK);
    assert_int_equal(serex_execute(bounded, block_task,
                                   gate), SEREX_OK);
    for (int i = 0; i < 10; i++)
        serex_execute(bounded, nop, NULL);
    st = stats_of(bounded);
    assert_true(st.rejected >= 8);
    assert_int_equal(st.submitted + st.rejected, 11);
    serex_event_signal(gate);
    assert_int_equal(serex_destroy(bounded), SEREX_OK);
    serex_event_destroy(gate);
}

static void serial_counts(void **state)
{
    serex_executor *manual, *serial;
    serex_stats st;

    (void)state;
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    assert_int_equal(serex_serial_create(manual, NULL, &serial), SEREX_OK);
    for (int i = 0; i < 10; i++)
        assert_int_equal(serex_execute(serial, nop, NULL), SEREX_OK);
    st = stats_of(serial);
    assert_int_equal(st.submitted, 10);
    assert_int_equal(st.queued, 10);
    assert_int_equal(st.completed, 0);
    test_run_all(manual);
    st = stats_of(serial);
    assert_int_equal(st.completed, 10);
    assert_int_equal(st.queued, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(serex_execute(serial, nop, NULL), SEREX_OK);
    assert_int_equal(serex_shutdown_now(serial, NULL, NULL), 3);
    assert_int_equal(serex_execute(serial, nop, NULL), SEREX_EREJECTED);
    st = stats_of(serial);
    assert_int_equal(st.submitted, 13);
    assert_int_equal(st.completed, 10);
    assert_int_equal(st.queued, 0);
    assert_int_equal(st.rejected, 1);
    assert_int_equal(serex_destroy(serial), SEREX_OK);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
}

static void striped_counts(void **state)
{
    serex_executor *manual;
    serex_striped *st;
    serex_stats s;

    (void)state;
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    assert_int_equal(serex_striped_create(manual, NULL, &st), SEREX_OK);
    for (uint64_t k = 0; k < 5; k++)
        for (int i = 0; i < 4; i++)
            assert_int_equal(serex_striped_execute(st, k, nop, NULL),
                             SEREX_OK);
    s = stats_of(serex_striped_executor(st));
    assert_int_equal(s.submitted, 20);
    assert_int_equal(s.queued, 20);
    assert_int_equal(s.lanes, 5);
    test_run_all(manual);
    s = stats_of(serex_striped_executor(st));
    assert_int_equal(s.completed, 20);
    assert_int_equal(s.queued, 0);
    assert_int_equal(s.lanes, 0);
    assert_int_equal(serex_striped_execute(st, 9, nop, NULL), SEREX_OK);
    assert_int_equal(serex_shutdown_now(serex_striped_executor(st), NULL,
                                        NULL), 1);
    assert_int_equal(serex_striped_execute(st, 9, nop, NULL),
                     SEREX_EREJECTED);
    s = stats_of(serex_striped_executor(st));
    assert_int_equal(s.submitted, 21);
    assert_int_equal(s.queued, 0);
    assert_int_equal(s.rejected, 1);
    assert_int_equal(serex_destroy(serex_striped_executor(st)), SEREX_OK);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
}

static void manual_and_scheduler_counts(void **state)
{
    serex_scheduler_config c = {0};
    serex_scheduler *s;
    serex_executor *manual, *face;
    serex_timer *t;
    serex_stats st;

    (void)state;
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    c.manual = true;
    assert_int_equal(serex_scheduler_create(&c, &s), SEREX_OK);
    face = serex_scheduler_executor(s);
    assert_int_equal(serex_schedule(s, manual, MS, nop, NULL, NULL),
                     SEREX_OK);
    assert_int_equal(serex_schedule(s, NULL, MS, nop, NULL, &t), SEREX_OK);
    assert_int_equal(serex_schedule(s, NULL, 2 * MS, nop, NULL, NULL),
                     SEREX_OK);
    st = stats_of(face);
    assert_int_equal(st.submitted, 3);
    assert_int_equal(st.pending_timers, 3);
    assert_true(serex_timer_cancel(t));
    serex_timer_release(t);
    assert_int_equal(serex_scheduler_advance(s, 5 * MS), SEREX_OK);
    st = stats_of(face);
    assert_int_equal(st.completed, 2); /* cancelled, ran; one queued */
    assert_int_equal(st.pending_timers, 1);
    st = stats_of(manual);
    assert_int_equal(st.submitted, 1);
    assert_int_equal(st.queued, 1);
    test_run_all(manual);
    st = stats_of(manual);
    assert_int_equal(st.completed, 1);
    assert_int_equal(st.queued, 0);
    st = stats_of(face);
    assert_int_equal(st.completed, 3);
    assert_int_equal(st.pending_timers, 0);
    /* a refused run */
    serex_shutdown(manual);
    assert_int_equal(serex_execute(manual, nop, NULL), SEREX_EREJECTED);
    assert_int_equal(stats_of(manual).rejected, 1);
    assert_int_equal(serex_schedule(s, manual, 0, nop, NULL, NULL), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 0), SEREX_OK);
    assert_int_equal(stats_of(face).rejected, 1);
    assert_int_equal(serex_destroy(face), SEREX_OK);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
}

/* Each kind's name: the config's (copied), else the kind's own. */
static void every_kind_has_a_name(void **state)
{
    char name[16] = "orders";
    serex_serial_config cfg = {.name = name};
    serex_scheduler_config sc = {.manual = true};
    serex_executor *pool, *manual, *serial, *named;
    serex_striped *st, *named_st;
    serex_scheduler *sched;

    (void)state;
    assert_int_equal(serex_pool_create(NULL, &pool), SEREX_OK);
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    assert_int_equal(serex_scheduler_create(&sc, &sched), SEREX_OK);
    assert_int_equal(serex_serial_create(manual, NULL, &serial), SEREX_OK);
    assert_int_equal(serex_serial_create(manual, &cfg, &named), SEREX_OK);
    assert_int_equal(serex_striped_create(manual, NULL, &st), SEREX_OK);
    strcpy(name, "sessions"); /* the serial kept its own copy */
    assert_int_equal(serex_striped_create(manual, &cfg, &named_st), SEREX_OK);
    memset(name, 0, sizeof name);

    assert_string_equal(stats_of(pool).name, "pool");
    assert_string_equal(stats_of(manual).name, "manual");
    assert_string_equal(stats_of(serex_scheduler_executor(sched)).name,
                        "scheduler");
    assert_string_equal(stats_of(serial).name, "serial");
    assert_string_equal(stats_of(named).name, "orders");
    assert_string_equal(stats_of(serex_striped_executor(st)).name, "striped");
    assert_string_equal(stats_of(serex_striped_executor(named_st)).name,
                        "sessions");
    /* an empty name is no name */
    cfg.name = "";
    assert_int_equal(serex_destroy(named), SEREX_OK);
    assert_int_equal(serex_serial_create(manual, &cfg, &named), SEREX_OK);
    assert_string_equal(stats_of(named).name, "serial");
    {
        serex_pool_config pc = {.threads = 1, .name = "io"};
        serex_executor *io;

        assert_int_equal(serex_pool_create(&pc, &io), SEREX_OK);
        assert_string_equal(stats_of(io).name, "io");
        assert_int_equal(serex_destroy(io), SEREX_OK);
    }

    assert_int_equal(serex_destroy(serex_striped_executor(named_st)), SEREX_OK);
    assert_int_equal(serex_destroy(serex_striped_executor(st)), SEREX_OK);
    assert_int_equal(serex_destroy(named), SEREX_OK);
    assert_int_equal(serex_destroy(serial), SEREX_OK);
    assert_int_equal(serex_destroy(serex_scheduler_executor(sched)), SEREX_OK);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_input_is_einval),
        cmocka_unit_test(pool_counts),
        cmocka_unit_test(serial_counts),
        cmocka_unit_test(striped_counts),
        cmocka_unit_test(manual_and_scheduler_counts),
        cmocka_unit_test(every_kind_has_a_name),
    };

    return cmocka_run_group_tests_name("stats", tests, NULL, NULL);
}
