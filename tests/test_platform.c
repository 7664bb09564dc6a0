/* SPDX-License-Identifier: MIT */
/*
 * test_platform.c - the platform layer (thread_internal.h) on whatever
 * back end and target the build chose: threads, once, exit destructors,
 * the clock, and timed waits far in the future. The last are the 32-bit
 * time_t bug: a deadline years away overflowed the timespec, the wait
 * returned at once, and the timer thread spun at 100 % while a 20-year
 * timer was pending (i386).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "park_internal.h"
#include "test_util.h"

#define YEARS_20 (INT64_C(20) * 365 * 24 * 3600 * SEC)

struct waiter {
    serex__mutex mu;
    serex__cond cv;
    int signalled;
};

static int signal_later(void *arg)
{
    struct waiter *w = arg;

    test_sleep_ns(200 * MS); /* sleeping: no core taken from the waiter */
    serex__mutex_lock(&w->mu);
    w->signalled = 1;
    serex__cond_signal(&w->cv);
    serex__mutex_unlock(&w->mu);
    return 0;
}

/* A wait with a deadline 20 years away waits (until signalled): it does
 * not return at once, as an overflowed timespec made it do. */
static void wait_twenty_years_waits(void **state)
{
    struct waiter w = {.signalled = 0};
    serex__thread t;
    int64_t start, waited, wakeups = 0;

    (void)state;
    assert_int_equal(serex__mutex_init(&w.mu), SEREX_OK);
    assert_int_equal(serex__cond_init(&w.cv), SEREX_OK);
    serex__mutex_lock(&w.mu);
    assert_int_equal(serex__thread_start(&t, signal_later, &w), SEREX_OK);
    start = serex__now_ns();
    while (!w.signalled && wakeups < 1000) {
        serex__cond_wait_until(&w.cv, &w.mu, serex__now_ns() + YEARS_20);
        wakeups++;
    }
    waited = serex__now_ns() - start;
    serex__mutex_unlock(&w.mu);
    serex__thread_join(t);
    assert_true(w.signalled);
    assert_true(waited >= 150 * MS);
    /* a spurious wake-up or two, not a spin */
    assert_true(wakeups < 10);
    serex__cond_destroy(&w.cv);
    serex__mutex_destroy(&w.mu);
}

static void count_task(void *arg)
{
    ++*(int *)arg;
}

/* A scheduler with a 20-year timer pending sleeps: its timer thread uses
 * almost no CPU (it spun at 100 % on i386 before). */
static void scheduler_with_far_timer_sleeps(void **state)
{
    serex_scheduler *s;
    serex_timer *t;
    static _Atomic uint64_t never; /* parked on: nobody changes it */
    int64_t cpu0, cpu;
    int64_t until;
    int ran = 0;

    (void)state;
    assert_int_equal(serex_scheduler_create(NULL, &s), SEREX_OK);
    assert_int_equal(serex_schedule(s, NULL, YEARS_20, count_task, &ran, &t),
                     SEREX_OK);
    cpu0 = test_cpu_ns();
    until = serex__now_ns() + 500 * MS;
    while (serex__now_ns() < until) /* sleep without burning CPU ourselves */
        serex__park_wait64(&never, 0, until);
    cpu = test_cpu_ns() - cpu0;
    /* 500 ms of wall time; a spinning timer thread would use about as
     * much CPU, a sleeping one next to nothing (allow 100 ms for a
     * loaded machine and sanitizers) */
    assert_true(cpu < 100 * MS);
    assert_true(serex_timer_cancel(t));
    serex_timer_release(t);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    assert_int_equal(ran, 0);
}

static int once_count;

static void once_fn(void)
{
    once_count++;
}

static int call_once_thread(void *arg)
{
    serex__call_once(arg, once_fn);
    return 0;
}

/* once runs its function exactly once, however many threads race. */
static void call_once_runs_once(void **state)
{
    static serex__once flag = SEREX__ONCE_INIT;
    serex__thread t[4];

    (void)state;
    for (int i = 0; i < 4; i++)
        assert_int_equal(serex__thread_start(&t[i], call_once_thread, &flag),
                         SEREX_OK);
    for (int i = 0; i < 4; i++)
        serex__thread_join(t[i]);
    assert_int_equal(once_count, 1);
}

static _Atomic int dtor_calls;
static serex__tls_key key;

static void count_dtor(void *value)
{
    assert_non_null(value);
    atomic_fetch_add_explicit(&dtor_calls, 1, memory_order_relaxed);
}

static int set_value_thread(void *arg)
{
    serex__tls_set(key, arg);
    return 0;
}

static int set_nothing_thread(void *arg)
{
    (void)arg;
    return 0;
}

/* A thread-exit destructor runs for a thread that set a value, with that
 * value, and not for one that set none. */
static void exit_destructor_runs_for_set_values(void **state)
{
    serex__thread t;
    int v = 1;

    (void)state;
    assert_int_equal(serex__tls_key_create(&key, count_dtor), SEREX_OK);
    assert_int_equal(serex__thread_start(&t, set_value_thread, &v), SEREX_OK);
    serex__thread_join(t);
    assert_int_equal(atomic_load(&dtor_calls), 1);
    assert_int_equal(serex__thread_start(&t, set_nothing_thread, NULL),
                     SEREX_OK);
    serex__thread_join(t);
    assert_int_equal(atomic_load(&dtor_calls), 1);
}

/* The monotonic clock moves forward and in nanoseconds. */
static void clock_is_monotonic(void **state)
{
    int64_t a = serex__now_ns(), b;

    (void)state;
    for (int i = 0; i < 1000; i++) {
        b = serex__now_ns();
        assert_true(b >= a);
        a = b;
    }
    assert_true(serex__deadline(SEREX_FOREVER) == INT64_MAX);
    assert_true(serex__deadline(INT64_MAX) == INT64_MAX);
    assert_true(serex__cpu_count() >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wait_twenty_years_waits),
        cmocka_unit_test(scheduler_with_far_timer_sleeps),
        cmocka_unit_test(call_once_runs_once),
        cmocka_unit_test(exit_destructor_runs_for_set_values),
        cmocka_unit_test(clock_is_monotonic),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
