/* SPDX-License-Identifier: MIT */
/*
 * test_misuse.c - misuse that no status code can report stops the program
 * with a message naming the call (promise 8, docs/contract.md): a future
 * or a timer handle released twice, or used after its release; a
 * semaphore given back more permits than it lent, or destroyed with a
 * continuation waiting. Each case runs in a forked child (a death
 * test): the child must die by SIGABRT
 * and say what went wrong on stderr. On Windows, which has no fork, the
 * child is this program run again (CreateProcess) with --misuse N, and
 * abort() shows as exit code 3. In an ASan build a block already
 * back in the node cache is poisoned, so ASan may report the touch first
 * (with both stacks): that counts as caught too.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h> /* atoi */
#include <string.h>
#if !defined(_WIN32)
#  include <sys/wait.h>
#  include <unistd.h>
#endif

#include <cmocka.h>

#include "test_util.h"

#if defined(_WIN32)
static int misuse_index(void (*misuse)(void));

/*
 * Runs case @misuse in a child: this program again, with --misuse N and
 * its stderr on a pipe. Returns the child's exit code; @out gets its
 * stderr.
 */
static DWORD run_child(void (*misuse)(void), char *out, size_t cap)
{
    char exe[MAX_PATH], cmd[MAX_PATH + 64];
    SECURITY_ATTRIBUTES sa = {sizeof sa, NULL, TRUE};
    STARTUPINFOA si;
    PROCESS_INFORMATION pi;
    HANDLE rd, wr;
    DWORD n, code = 0;
    size_t len = 0;

    assert_true(GetModuleFileNameA(NULL, exe, sizeof exe) > 0);
    snprintf(cmd, sizeof cmd, "\"%s\" --misuse %d", exe, misuse_index(misuse));
    assert_true(CreatePipe(&rd, &wr, &sa, 0));
    assert_true(SetHandleInformation(rd, HANDLE_FLAG_INHERIT, 0));
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
    si.hStdOutput = GetStdHandle(STD_OUTPUT_HANDLE);
    si.hStdError = wr;
    assert_true(
        CreateProcessA(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi));
    CloseHandle(wr);
    while (len < cap - 1 &&
           ReadFile(rd, out + len, (DWORD)(cap - 1 - len), &n, NULL) && n > 0)
        len += n;
    out[len] = '\0';
    CloseHandle(rd);
    assert_int_equal(WaitForSingleObject(pi.hProcess, INFINITE), WAIT_OBJECT_0);
    assert_true(GetExitCodeProcess(pi.hProcess, &code));
    CloseHandle(pi.hThread);
    CloseHandle(pi.hProcess);
    return code;
}
#endif

/*
 * Runs @misuse in a child with stderr captured; asserts that the child
 * died (SIGABRT, or ASan's exit; exit code 3, abort's, on Windows) and
 * that stderr holds @expect (or, under ASan, an AddressSanitizer report).
 */
static void assert_dies(void (*misuse)(void), const char *expect)
{
#if defined(_WIN32)
    char out[4096];
    DWORD code = run_child(misuse, out, sizeof out);

    if (code != 3)
        fail_msg("the child was not stopped by abort (exit code %lu); it "
                 "said: %s",
                 (unsigned long)code, out);
    if (strstr(out, expect) == NULL)
        fail_msg("expected \"%s\" on stderr, got: %s", expect, out);
#else
    char out[4096];
    size_t len = 0;
    ssize_t n;
    int fds[2], status;
    pid_t pid;

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        misuse();
        _exit(0); /* survived: the parent fails the test */
    }
    close(fds[1]);
    while (len < sizeof out - 1 &&
           (n = read(fds[0], out + len, sizeof out - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (strstr(out, "AddressSanitizer") != NULL) {
        assert_false(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        return;
    }
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
        fail_msg("the child was not stopped by abort; it said: %s", out);
    if (strstr(out, expect) == NULL)
        fail_msg("expected \"%s\" on stderr, got: %s", expect, out);
#endif
}

static void *identity(void *arg)
{
    return arg;
}

/* A future whose task ran: released twice. */
static void future_release_twice_done(void)
{
    serex_executor *man;
    serex_future *f;

    serex_manual_create(&man);
    serex_submit(man, identity, NULL, &f);
    serex_manual_run_one(man);
    serex_future_release(f);
    serex_future_release(f);
}

/* A future whose task is still queued (it holds the memory): released
 * twice. This one used to free the future under its task. */
static void future_release_twice_queued(void)
{
    serex_executor *man;
    serex_future *f;

    serex_manual_create(&man);
    serex_submit(man, identity, NULL, &f);
    serex_future_release(f);
    serex_future_release(f);
}

/* A token still held by its child: released twice. */
static void cancel_release_twice(void)
{
    serex_cancel *c, *child;

    serex_cancel_create(NULL, &c);
    serex_cancel_create(c, &child);
    serex_cancel_release(c);
    serex_cancel_release(c);
}

/* Waited on after release: it used to return another future's value. */
static void future_wait_after_release(void)
{
    serex_executor *man;
    serex_future *f;

    serex_manual_create(&man);
    serex_submit(man, identity, NULL, &f);
    serex_future_release(f);
    serex_future_wait(f, 0);
}

static void future_value_after_release(void)
{
    serex_executor *man;
    serex_future *f;

    serex_manual_create(&man);
    serex_submit(man, identity, NULL, &f);
    serex_future_release(f);
    serex_future_value(f);
}

static void future_cancel_after_release(void)
{
    serex_executor *man;
    serex_future *f;

    serex_manual_create(&man);
    serex_submit(man, identity, NULL, &f);
    serex_future_release(f);
    serex_future_cancel(f);
}

static void count_task(void *arg)
{
    ++*(int *)arg;
}

static serex_scheduler *manual_scheduler(void)
{
    serex_scheduler_config cfg = {.manual = true};
    serex_scheduler *s;

    serex_scheduler_create(&cfg, &s);
    return s;
}

/* A timer that fired (its record freed by the release): released again. */
static void timer_release_twice_done(void)
{
    static int ran;
    serex_scheduler *s = manual_scheduler();
    serex_timer *t;

    serex_schedule(s, NULL, 0, count_task, &ran, &t);
    serex_scheduler_advance(s, 0);
    serex_timer_release(t);
    serex_timer_release(t);
}

/* A timer still pending: released twice. */
static void timer_release_twice_pending(void)
{
    static int ran;
    serex_scheduler *s = manual_scheduler();
    serex_timer *t;

    serex_schedule(s, NULL, SEC, count_task, &ran, &t);
    serex_timer_release(t);
    serex_timer_release(t);
}

static void timer_cancel_after_release(void)
{
    static int ran;
    serex_scheduler *s = manual_scheduler();
    serex_timer *t;

    serex_schedule(s, NULL, SEC, count_task, &ran, &t);
    serex_timer_release(t);
    serex_timer_cancel(t);
}

static void timer_cancel_wait_after_release(void)
{
    static int ran;
    serex_scheduler *s = manual_scheduler();
    serex_timer *t;

    serex_schedule(s, NULL, SEC, count_task, &ran, &t);
    serex_timer_release(t);
    serex_timer_cancel_wait(t, 0, NULL);
}

static void timer_cancel_notify_after_release(void)
{
    static int ran;
    serex_scheduler *s = manual_scheduler();
    serex_timer *t;

    serex_schedule(s, NULL, SEC, count_task, &ran, &t);
    serex_timer_release(t);
    serex_timer_cancel_notify(t, serex_scheduler_executor(s), count_task, &ran,
                              NULL);
}

static void leave_region_open(void *arg)
{
    (void)arg;
    serex_blocking_begin(); /* and no end */
}

/* A pool task that returns inside its blocking region: its worker stops
 * the program when it next goes idle. */
static void blocking_region_left_open(void)
{
    serex_pool_config cfg = {.threads = 1};
    serex_executor *pool;

    serex_pool_create(&cfg, &pool);
    serex_execute(pool, leave_region_open, NULL);
    serex_await_termination(pool, 20 * SEC); /* the worker aborts first */
}

/* A semaphore of 2 given back 3 (one more than was ever taken). */
static void semaphore_release_too_many(void)
{
    serex_semaphore *s;

    serex_semaphore_create(2, &s);
    serex_semaphore_try_acquire(s, 1);
    serex_semaphore_release(s, 1);
    serex_semaphore_release(s, 1);
}

static void permit_ignored(void *arg, int status)
{
    (void)arg;
    (void)status;
}

/* Destroyed while an acquire waits (no lock but the semaphore's spin). */
static void semaphore_destroy_with_waiter(void)
{
    serex_executor *man;
    serex_semaphore *s;

    serex_manual_create(&man);
    serex_semaphore_create(1, &s);
    serex_semaphore_try_acquire(s, 1);
    serex_semaphore_acquire(s, 1, man, permit_ignored, NULL, NULL);
    serex_semaphore_destroy(s);
}

/* SEREX_ASSERT_ON outside any task of the executor. */
static void assert_on_outside(void)
{
    serex_executor *man;

    serex_manual_create(&man);
    SEREX_ASSERT_ON(man);
}

static void assert_not_on_task(void *arg)
{
    SEREX_ASSERT_NOT_ON((serex_executor *)arg);
}

/* SEREX_ASSERT_NOT_ON inside a task of the executor, run by
 * serex_run_task. (No lock on the way: under TSan, a forked child that
 * locks a mutex at an address a destroyed one of the parent had trips
 * TSan's own deadlock detector, and hangs.) */
static void assert_not_on_inside(void)
{
    serex_executor *man;

    serex_manual_create(&man);
    serex_run_task(man, assert_not_on_task, man);
}

static void assert_on_fails(void **state)
{
    (void)state;
    assert_dies(assert_on_outside, "serex: SEREX_ASSERT_ON(manual at ");
    assert_dies(assert_on_outside,
                "in assert_on_outside: the calling thread runs no task of "
                "this executor");
    assert_dies(assert_not_on_inside, "serex: SEREX_ASSERT_NOT_ON(manual at ");
    assert_dies(assert_not_on_inside,
                "in assert_not_on_task: the calling thread runs a task of "
                "this executor");
}

static void future_released_twice(void **state)
{
    (void)state;
    assert_dies(future_release_twice_done,
                "serex: serex_future_release: future released twice");
    assert_dies(future_release_twice_queued,
                "serex: serex_future_release: future released twice");
}

static void future_used_after_release(void **state)
{
    (void)state;
    assert_dies(future_wait_after_release,
                "serex: serex_future_wait: future used after "
                "serex_future_release");
    assert_dies(future_value_after_release,
                "serex: serex_future_value: future used after "
                "serex_future_release");
    assert_dies(future_cancel_after_release,
                "serex: serex_future_cancel: future used after "
                "serex_future_release");
}

static void cancel_released_twice(void **state)
{
    (void)state;
    assert_dies(cancel_release_twice,
                "serex: serex_cancel_release: token released twice");
}

static void timer_released_twice(void **state)
{
    (void)state;
    assert_dies(timer_release_twice_done,
                "serex: serex_timer_release: timer handle released twice");
    assert_dies(timer_release_twice_pending,
                "serex: serex_timer_release: timer handle released twice");
    assert_dies(timer_cancel_after_release,
                "serex: serex_timer_cancel: timer used after "
                "serex_timer_release");
    assert_dies(timer_cancel_wait_after_release,
                "serex: serex_timer_cancel_wait: timer used after "
                "serex_timer_release");
    assert_dies(timer_cancel_notify_after_release,
                "serex: serex_timer_cancel_notify: timer used after "
                "serex_timer_release");
}

/* First in the list: a pool's locks in the child, and the parent has
 * destroyed no lock yet whose address they could take (TSan's deadlock
 * detector then stops a forked child: see assert_not_on_inside). */
static void blocking_region_left_open_stops(void **state)
{
    (void)state;
    assert_dies(blocking_region_left_open,
                "serex: serex_blocking_begin: a pool task returned inside "
                "its blocking region");
}

static void semaphore_misused(void **state)
{
    (void)state;
    assert_dies(semaphore_release_too_many,
                "serex: serex_semaphore_release: more permits released than "
                "were acquired");
    assert_dies(semaphore_destroy_with_waiter,
                "serex: serex_semaphore_destroy: a continuation still waits "
                "for permits");
}

/* The checks do not fire on correct use: one release each, then gone. */
static void correct_use_is_quiet(void **state)
{
    serex_executor *man;
    serex_future *f;
    serex_scheduler *s = manual_scheduler();
    serex_timer *t;
    int ran = 0;

    (void)state;
    assert_int_equal(serex_manual_create(&man), SEREX_OK);
    assert_int_equal(serex_submit(man, identity, &ran, &f), SEREX_OK);
    assert_true(serex_manual_run_one(man));
    assert_ptr_equal(serex_future_value(f), &ran);
    serex_future_release(f);
    assert_int_equal(serex_schedule(s, NULL, 0, count_task, &ran, &t),
                     SEREX_OK);
    assert_true(serex_timer_cancel(t)); /* manual time: not due yet */
    assert_int_equal(ran, 0);
    serex_timer_release(t);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    assert_int_equal(serex_destroy(man), SEREX_OK);
}

#if defined(_WIN32)
/* The cases a child can be asked to run, by index (--misuse N). */
static void (*const misuses[])(void) = {
    future_release_twice_done,
    future_release_twice_queued,
    future_wait_after_release,
    future_value_after_release,
    future_cancel_after_release,
    timer_release_twice_done,
    timer_release_twice_pending,
    timer_cancel_after_release,
    assert_on_outside,
    assert_not_on_inside,
    cancel_release_twice,
    timer_cancel_wait_after_release,
    timer_cancel_notify_after_release,
    blocking_region_left_open,
    semaphore_release_too_many,
    semaphore_destroy_with_waiter,
};
#  define NMISUSES ((int)(sizeof misuses / sizeof misuses[0]))

static int misuse_index(void (*misuse)(void))
{
    for (int i = 0; i < NMISUSES; i++)
        if (misuses[i] == misuse)
            return i;
    fail_msg("a misuse case missing from misuses[]");
    return -1;
}
#endif

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(blocking_region_left_open_stops),
        cmocka_unit_test(future_released_twice),
        cmocka_unit_test(future_used_after_release),
        cmocka_unit_test(timer_released_twice),
        cmocka_unit_test(cancel_released_twice),
        cmocka_unit_test(correct_use_is_quiet),
        cmocka_unit_test(assert_on_fails),
        cmocka_unit_test(semaphore_misused),
    };

#if defined(_WIN32)
    if (argc == 3 && strcmp(argv[1], "--misuse") == 0) {
        int i = atoi(argv[2]);

        if (i < 0 || i >= NMISUSES)
            return 2;
        misuses[i]();
        return 0; /* survived: the parent fails the test */
    }
#else
    (void)argc;
    (void)argv;
#endif
    return cmocka_run_group_tests(tests, NULL, NULL);
}
