/* SPDX-License-Identifier: MIT */
/*
 * test_current.c - serex_executor_is_current: true inside a task of the
 * executor, and of everything that runs its tasks on it (a serial, a
 * striped lane, a limiter, a timer's run), at any depth; false outside any
 * task, in another executor's task, in a plain task of the target of a
 * wrapper asked about, and for NULL. SEREX_ASSERT_ON and
 * SEREX_ASSERT_NOT_ON returning quietly when they hold (test_misuse.c has
 * them stopping the program when they do not).
 */
#include "test_util.h"

#include <string.h>

/* What a task saw: is_current of each executor of the case, in order. */
struct seen {
    serex_executor *ask[4];
    int n;
    atomic_int got[4]; /* 0: not run; 1: false; 2: true */
    serex_event *done; /* signalled when it ran (pool cases) */
};

static void look_task(void *arg)
{
    struct seen *s = arg;

    for (int i = 0; i < s->n; i++)
        atomic_store(&s->got[i], serex_executor_is_current(s->ask[i]) ? 2 : 1);
    if (s->done != NULL)
        serex_event_signal(s->done);
}

static void seen_init(struct seen *s, serex_executor *a, serex_executor *b,
                      serex_executor *c, serex_executor *d)
{
    serex_executor *all[4] = {a, b, c, d};

    memset(s, 0, sizeof *s);
    for (int i = 0; i < 4 && all[i] != NULL; i++)
        s->ask[s->n++] = all[i];
}

/* 2: it was current in the task; 1: it was not */
static int got(struct seen *s, int i)
{
    return atomic_load(&s->got[i]);
}

static void outside_any_task_nothing_is_current(void **state)
{
    serex_executor *manual;

    (void)state;
    assert_false(serex_executor_is_current(NULL));
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    assert_false(serex_executor_is_current(manual));
    SEREX_ASSERT_NOT_ON(manual); /* holds: returns */
    assert_int_equal(serex_destroy(manual), SEREX_OK);
}

/* A pool's task: the pool is current, another pool is not. */
static void pool_task_is_on_its_pool_only(void **state)
{
    serex_pool_config c = {0};
    serex_executor *pool, *other;
    struct seen s;

    (void)state;
    c.threads = 2;
    assert_int_equal(serex_pool_create(&c, &pool), SEREX_OK);
    assert_int_equal(serex_pool_create(&c, &other), SEREX_OK);
    seen_init(&s, pool, other, NULL, NULL);
    assert_int_equal(serex_event_create(&s.done), SEREX_OK);
    assert_int_equal(serex_execute(pool, look_task, &s), SEREX_OK);
    assert_int_equal(serex_event_wait(s.done, SEREX_FOREVER), SEREX_OK);
    assert_int_equal(got(&s, 0), 2);
    assert_int_equal(got(&s, 1), 1);
    assert_false(serex_executor_is_current(pool)); /* we are not on it */
    serex_event_destroy(s.done);
    assert_int_equal(serex_destroy(other), SEREX_OK);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
}

/* A serial over a manual executor: in the serial's task both are
 * current; in a plain task of the manual executor, the serial is not. */
static void serial_task_is_on_the_serial_and_its_target(void **state)
{
    serex_executor *manual, *serial;
    struct seen in_serial, in_manual;

    (void)state;
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    assert_int_equal(serex_serial_create(manual, NULL, &serial), SEREX_OK);
    seen_init(&in_serial, serial, manual, NULL, NULL);
    seen_init(&in_manual, serial, manual, NULL, NULL);
    assert_int_equal(serex_execute(serial, look_task, &in_serial), SEREX_OK);
    assert_int_equal(serex_execute(manual, look_task, &in_manual), SEREX_OK);
    test_run_all(manual);
    assert_int_equal(got(&in_serial, 0), 2);
    assert_int_equal(got(&in_serial, 1), 2);
    assert_int_equal(got(&in_manual, 0), 1);
    assert_int_equal(got(&in_manual, 1), 2);
    assert_int_equal(serex_destroy(serial), SEREX_OK);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
}

/* Two levels: a serial over a serial over a manual executor; a striped
 * lane and a limiter over the same manual executor. */
static void wrappers_at_any_depth(void **state)
{
    serex_executor *manual, *outer, *inner, *limiter, *face;
    serex_striped *striped;
    struct seen deep, lane, lim;

    (void)state;
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    assert_int_equal(serex_serial_create(manual, NULL, &outer), SEREX_OK);
    assert_int_equal(serex_serial_create(outer, NULL, &inner), SEREX_OK);
    assert_int_equal(serex_striped_create(manual, NULL, &striped), SEREX_OK);
    face = serex_striped_executor(striped);
    assert_int_equal(serex_limiter_create(manual, 1, &limiter), SEREX_OK);
    seen_init(&deep, inner, outer, manual, face);
    seen_init(&lane, face, manual, outer, limiter);
    seen_init(&lim, limiter, manual, face, inner);
    assert_int_equal(serex_execute(inner, look_task, &deep), SEREX_OK);
    assert_int_equal(serex_striped_execute(striped, 7, look_task, &lane),
                     SEREX_OK);
    assert_int_equal(serex_execute(limiter, look_task, &lim), SEREX_OK);
    test_run_all(manual);
    assert_int_equal(got(&deep, 0), 2);
    assert_int_equal(got(&deep, 1), 2);
    assert_int_equal(got(&deep, 2), 2);
    assert_int_equal(got(&deep, 3), 1);
    assert_int_equal(got(&lane, 0), 2);
    assert_int_equal(got(&lane, 1), 2);
    assert_int_equal(got(&lane, 2), 1);
    assert_int_equal(got(&lane, 3), 1);
    assert_int_equal(got(&lim, 0), 2);
    assert_int_equal(got(&lim, 1), 2);
    assert_int_equal(got(&lim, 2), 1);
    assert_int_equal(got(&lim, 3), 1);
    assert_int_equal(serex_destroy(limiter), SEREX_OK);
    assert_int_equal(serex_destroy(face), SEREX_OK);
    assert_int_equal(serex_destroy(inner), SEREX_OK);
    assert_int_equal(serex_destroy(outer), SEREX_OK);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
}

/* A timer's run on a manual executor: the scheduler and its target are
 * current. */
static void timer_run_is_on_the_scheduler_and_its_target(void **state)
{
    serex_scheduler_config c;
    serex_scheduler *s;
    serex_executor *manual;
    struct seen run;

    (void)state;
    memset(&c, 0, sizeof c);
    c.manual = true;
    assert_int_equal(serex_scheduler_create(&c, &s), SEREX_OK);
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    seen_init(&run, serex_scheduler_executor(s), manual, NULL, NULL);
    assert_int_equal(serex_schedule(s, manual, 1000, look_task, &run, NULL),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 1000), SEREX_OK);
    test_run_all(manual);
    assert_int_equal(got(&run, 0), 2);
    assert_int_equal(got(&run, 1), 2);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
}

/* An executor written by a user runs its tasks through serex_run_task:
 * it is current inside them. */
static void user_executor_through_run_task(void **state)
{
    static const serex_executor_ops ops = {0};
    serex_executor user = {&ops};
    struct seen s;

    (void)state;
    seen_init(&s, &user, NULL, NULL, NULL);
    serex_run_task(&user, look_task, &s);
    assert_int_equal(got(&s, 0), 2);
    assert_false(serex_executor_is_current(&user));
}

/* The asserts return quietly when they hold. */
static void assert_task(void *arg)
{
    serex_executor **ex = arg;

    SEREX_ASSERT_ON(ex[0]);
    SEREX_ASSERT_ON(ex[1]);
    SEREX_ASSERT_NOT_ON(ex[2]);
    ex[3] = ex[0]; /* got here */
}

static void asserts_that_hold_return(void **state)
{
    serex_executor *manual, *serial, *other, *ex[4];

    (void)state;
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    assert_int_equal(serex_manual_create(&other), SEREX_OK);
    assert_int_equal(serex_serial_create(manual, NULL, &serial), SEREX_OK);
    ex[0] = serial;
    ex[1] = manual;
    ex[2] = other;
    ex[3] = NULL;
    assert_int_equal(serex_execute(serial, assert_task, ex), SEREX_OK);
    test_run_all(manual);
    assert_ptr_equal(ex[3], serial);
    assert_int_equal(serex_destroy(serial), SEREX_OK);
    assert_int_equal(serex_destroy(other), SEREX_OK);
    assert_int_equal(serex_destroy(manual), SEREX_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(outside_any_task_nothing_is_current),
        cmocka_unit_test(pool_task_is_on_its_pool_only),
        cmocka_unit_test(serial_task_is_on_the_serial_and_its_target),
        cmocka_unit_test(wrappers_at_any_depth),
        cmocka_unit_test(timer_run_is_on_the_scheduler_and_its_target),
        cmocka_unit_test(user_executor_through_run_task),
        cmocka_unit_test(asserts_that_hold_return),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
