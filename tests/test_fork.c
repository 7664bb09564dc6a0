/* SPDX-License-Identifier: MIT */
/*
 * test_fork.c - what fork() does to serex (decided in fork_internal.h):
 * in the child, a pool and a scheduler made before the fork refuse work
 * (SEREX_EREJECTED), report termination at once and are destroyed without
 * waiting for threads that are not there; new executors made in the child
 * work, even when the parent's threads were busy allocating and parking
 * at the moment of the fork (the process-wide locks are held across it);
 * the parent goes on as before.
 *
 * Skipped under ThreadSanitizer, which does not support threads started
 * in the child of a multi-threaded process. Under AddressSanitizer the
 * child's new executors are thread-free ones (a manual executor, a manual
 * scheduler): a thread started in the child reuses a stack of the parent's
 * threads whose shadow memory ASan has not cleared, and reports a false
 * stack-buffer-underflow. The plain build runs the child in full.
 */
#include "test_util.h"

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#  define SEREX_TEST_TSAN 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define SEREX_TEST_TSAN 1
#  endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#  define SEREX_TEST_ASAN 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define SEREX_TEST_ASAN 1
#  endif
#endif

static _Atomic long counter;

static void count_task(void *arg)
{
    (void)arg;
    atomic_fetch_add(&counter, 1);
}

/* Keeps the parent's pool busy: every run queues the next, through a
 * serial (node cache) and an event (parking lot). */
struct churn {
    serex_executor *serial;
    _Atomic int stop;
};

static void churn_task(void *arg)
{
    struct churn *c = arg;

    if (!atomic_load(&c->stop))
        serex_execute(c->serial, churn_task, c);
}

/* Everything the child does; returns its exit status (0: all held). */
static int child_main(serex_executor *old_pool, serex_scheduler *old_sched)
{
    serex_executor *pool, *serial;
    serex_scheduler *sched;
    serex_event *ev;

    alarm(20); /* a hang fails the test instead of stalling it */
    if (serex_execute(old_pool, count_task, NULL) != SEREX_EREJECTED)
        return 10;
    if (serex_schedule(old_sched, NULL, 0, count_task, NULL, NULL) !=
        SEREX_EREJECTED)
        return 11;
    if (serex_await_termination(old_pool, 0) != SEREX_OK)
        return 12;
    if (serex_shutdown_now(old_pool, NULL, NULL) != 0)
        return 13;
    if (serex_destroy(old_pool) != SEREX_OK ||
        serex_destroy(serex_scheduler_executor(old_sched)) != SEREX_OK)
        return 14;
    /* new ones work */
#ifdef SEREX_TEST_ASAN
    serex_scheduler_config manual = {.manual = true};

    if (serex_manual_create(&pool) != SEREX_OK ||
        serex_serial_create(pool, NULL, &serial) != SEREX_OK ||
        serex_scheduler_create(&manual, &sched) != SEREX_OK ||
        serex_event_create(&ev) != SEREX_OK)
        return 15;
#else
    if (serex_pool_create(NULL, &pool) != SEREX_OK ||
        serex_serial_create(pool, NULL, &serial) != SEREX_OK ||
        serex_scheduler_create(NULL, &sched) != SEREX_OK ||
        serex_event_create(&ev) != SEREX_OK)
        return 15;
#endif
    atomic_store(&counter, 0);
    for (int i = 0; i < 1000; i++)
        if (serex_execute(serial, count_task, NULL) != SEREX_OK)
            return 16;
    if (serex_schedule(sched, pool, MS, test_signal_task, ev, NULL) !=
        SEREX_OK)
        return 17;
#ifdef SEREX_TEST_ASAN
    if (serex_scheduler_advance(sched, MS) != SEREX_OK)
        return 17;
    while (serex_manual_run_one(pool))
        ;
#endif
    if (serex_event_wait(ev, TEST_TIMEOUT) != SEREX_OK)
        return 17;
    if (serex_destroy(serex_scheduler_executor(sched)) != SEREX_OK ||
        serex_destroy(serial) != SEREX_OK || serex_destroy(pool) != SEREX_OK)
        return 18;
    serex_event_destroy(ev);
    return atomic_load(&counter) == 1000 ? 0 : 19;
}

static void fork_child_refuses_old_executors_and_makes_new_ones(void **state)
{
    serex_executor *pool, *serial;
    serex_scheduler *sched;
    struct churn c = {0};
    serex_event *ev;

    (void)state;
#ifdef SEREX_TEST_TSAN
    skip();
#endif
    assert_int_equal(serex_pool_create(NULL, &pool), SEREX_OK);
    assert_int_equal(serex_serial_create(pool, NULL, &serial), SEREX_OK);
    assert_int_equal(serex_scheduler_create(NULL, &sched), SEREX_OK);
    assert_int_equal(serex_event_create(&ev), SEREX_OK);
    c.serial = serial;
    for (int i = 0; i < 4; i++)
        assert_int_equal(serex_execute(serial, churn_task, &c), SEREX_OK);
    for (int round = 0; round < 5; round++) {
        int status = -1;
        pid_t pid = fork();

        assert_true(pid >= 0);
        if (pid == 0)
            _exit(child_main(pool, sched));
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("child %d: %s %d", round,
                     WIFEXITED(status) ? "exit" : "signal",
                     WIFEXITED(status) ? WEXITSTATUS(status)
                                       : WTERMSIG(status));
    }
    /* the parent goes on */
    assert_int_equal(serex_schedule(sched, pool, MS, test_signal_task, ev,
                                    NULL), SEREX_OK);
    assert_signalled(ev);
    atomic_store(&c.stop, 1);
    assert_int_equal(serex_destroy(serex_scheduler_executor(sched)), SEREX_OK);
    assert_int_equal(serex_destroy(serial), SEREX_OK);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    serex_event_destroy(ev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fork_child_refuses_old_executors_and_makes_new_ones),
    };

    return cmocka_run_group_tests_name("fork", tests, NULL, NULL);
}
