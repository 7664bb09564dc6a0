/* SPDX-License-Identifier: MIT */
/*
 * test_autoclock.c - the clock that moves itself (serex_autoclock_start,
 * manual.h): a test's waits run its manual executors and move its manual
 * scheduler's clock, so retries, time-outs and timers take no real time
 * and every task sees the exact time it was due. Nothing here sleeps: a
 * wait that slept for real would take its time-out in real time, and the
 * exact clock readings below would not hold. Also built against the shared
 * library (test_autoclock_shared), without the cases that reach internals.
 */
#include "test_util.h"

#if !defined(_WIN32)
#  include <signal.h>
#  include <stdio.h>
#  include <string.h>
#  include <sys/wait.h>
#  include <unistd.h>
#endif

#define NLOG 16

struct fixture {
    serex_executor *ex;   /* registered with the clock */
    serex_executor *held; /* a manual executor the clock does not run */
    serex_scheduler *s;   /* manual */
    serex_latch *done;
    int64_t at[NLOG]; /* the clock when each logged task ran */
    int log[NLOG];
    int nlog;
};

static int setup(void **state)
{
    serex_scheduler_config cfg = {.manual = true};
    struct fixture *fx = calloc(1, sizeof *fx);

    assert_non_null(fx);
    assert_int_equal(serex_manual_create(&fx->ex), SEREX_OK);
    assert_int_equal(serex_manual_create(&fx->held), SEREX_OK);
    assert_int_equal(serex_scheduler_create(&cfg, &fx->s), SEREX_OK);
    assert_int_equal(serex_latch_create(1, &fx->done), SEREX_OK);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    serex_autoclock_stop(); /* a failed case may leave the clock bound */
    /* a failed case may leave timer runs queued: the scheduler's destroy
     * would wait for them (scheduler.h); a shutdown_now ends them */
    (void)serex_shutdown_now(fx->ex, NULL, NULL);
    assert_int_equal(serex_destroy(serex_scheduler_executor(fx->s)), SEREX_OK);
    assert_int_equal(serex_destroy(fx->held), SEREX_OK);
    assert_int_equal(serex_destroy(fx->ex), SEREX_OK);
    serex_latch_destroy(fx->done);
    free(fx);
    return 0;
}

/* A logged task: which one, of which fixture, and a latch to count down
 * after it is logged (NULL: none). */
struct item {
    struct fixture *fx;
    int id;
    serex_latch *latch;
};

static void log_task(void *arg)
{
    struct item *it = arg;
    struct fixture *fx = it->fx;

    assert_true(fx->nlog < NLOG);
    fx->at[fx->nlog] = serex_scheduler_now(fx->s);
    fx->log[fx->nlog++] = it->id;
    if (it->latch != NULL)
        assert_int_equal(serex_latch_count_down(it->latch, 1), SEREX_OK);
}

static void *log_call(void *arg)
{
    log_task(arg);
    return arg;
}

static void count_down_task(void *arg)
{
    struct fixture *fx = arg;

    assert_int_equal(serex_latch_count_down(fx->done, 1), SEREX_OK);
}

static void count_down_latch_task(void *arg)
{
    assert_int_equal(serex_latch_count_down(arg, 1), SEREX_OK);
}

/* Runs one task of the held executor: a future there ends now. */
static void release_held_task(void *arg)
{
    struct fixture *fx = arg;

    assert_true(serex_manual_run_one(fx->held));
}

static void start(struct fixture *fx)
{
    assert_int_equal(serex_autoclock_start(fx->s, &fx->ex, 1), SEREX_OK);
}

/* --- the code under test of the first cases: a retry with backoff --- */

struct retrier {
    struct fixture *fx;
    serex_executor *target; /* where the attempts run */
    int64_t backoff;        /* doubles after each failure */
    int failures;           /* the operation fails this many times */
    int attempts;
    int64_t tried_at[8];
};

static void attempt(void *arg)
{
    struct retrier *r = arg;
    struct fixture *fx = r->fx;

    r->tried_at[r->attempts] = serex_scheduler_now(fx->s);
    if (r->attempts++ < r->failures) {
        r->backoff *= 2;
        assert_int_equal(
            serex_schedule(fx->s, r->target, r->backoff, attempt, r, NULL),
            SEREX_OK);
        return;
    }
    assert_int_equal(serex_latch_count_down(fx->done, 1), SEREX_OK);
}

/* The test only waits: attempts at 100, 300 and 700 ms, exactly. */
static void autoclock_retry_with_backoff_runs_at_exact_times(void **state)
{
    struct fixture *fx = *state;
    struct retrier r = {fx, fx->ex, SEREX_MS(100), 2, 0, {0}};

    start(fx);
    assert_int_equal(
        serex_schedule(fx->s, fx->ex, r.backoff, attempt, &r, NULL), SEREX_OK);
    assert_int_equal(serex_latch_wait(fx->done, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(r.attempts, 3);
    assert_int_equal(r.tried_at[0], SEREX_MS(100));
    assert_int_equal(r.tried_at[1], SEREX_MS(300));
    assert_int_equal(r.tried_at[2], SEREX_MS(700));
    /* the wait ended with the last attempt: the clock went no further */
    assert_int_equal(serex_scheduler_now(fx->s), SEREX_MS(700));
    assert_int_equal(serex_scheduler_pending(fx->s), 0);
}

/* The same through a serial over the manual executor: any layer works. */
static void autoclock_drives_a_serial_over_a_manual_executor(void **state)
{
    struct fixture *fx = *state;
    serex_executor *serial;
    struct retrier r = {fx, NULL, SEREX_MS(100), 3, 0, {0}};

    assert_int_equal(serex_serial_create(fx->ex, NULL, &serial), SEREX_OK);
    r.target = serial;
    start(fx);
    assert_int_equal(serex_execute(serial, attempt, &r), SEREX_OK);
    assert_int_equal(serex_latch_wait(fx->done, SEREX_SEC(10)), SEREX_OK);
    assert_int_equal(r.attempts, 4);
    assert_int_equal(r.tried_at[0], 0);
    assert_int_equal(r.tried_at[1], SEREX_MS(200));
    assert_int_equal(r.tried_at[2], SEREX_MS(600));
    assert_int_equal(r.tried_at[3], SEREX_MS(1400));
    assert_int_equal(serex_scheduler_now(fx->s), SEREX_MS(1400));
    /* the serial's destroy waits for it to be idle: driven, not slept */
    assert_int_equal(serex_destroy(serial), SEREX_OK);
}

/* --- time-outs on the scheduler's clock --- */

/* A future that ends when a timer at @at runs the held executor. */
static serex_future *future_ending_at(struct fixture *fx, struct item *it,
                                      int64_t at)
{
    serex_future *f = NULL;

    assert_int_equal(serex_submit(fx->held, log_call, it, &f), SEREX_OK);
    assert_int_equal(
        serex_schedule(fx->s, fx->ex, at, release_held_task, fx, NULL),
        SEREX_OK);
    return f;
}

static void autoclock_wait_times_out_at_exactly_its_time_out(void **state)
{
    struct fixture *fx = *state;
    struct item it = {fx, 1, NULL};
    serex_future *f;

    start(fx);
    f = future_ending_at(fx, &it, SEREX_SEC(1));
    assert_int_equal(serex_future_wait(f, SEREX_MS(500)), SEREX_ETIMEDOUT);
    assert_int_equal(serex_scheduler_now(fx->s), SEREX_MS(500));
    assert_int_equal(serex_scheduler_pending(fx->s), 1); /* the 1 s timer */
    assert_int_equal(fx->nlog, 0);
    /* a time-out counts from the wait's start: 500 ms more is 1 s, and
     * the timer due then runs before the time-out (so the wait ends) */
    assert_int_equal(serex_future_wait(f, SEREX_MS(500)), SEREX_OK);
    assert_int_equal(fx->nlog, 1);
    assert_int_equal(fx->at[0], SEREX_SEC(1));
    assert_int_equal(serex_scheduler_now(fx->s), SEREX_SEC(1));
    serex_future_release(f);
}

static void autoclock_wait_done_before_its_time_out_is_ok(void **state)
{
    struct fixture *fx = *state;
    struct item it = {fx, 1, NULL};
    serex_future *f;

    start(fx);
    f = future_ending_at(fx, &it, SEREX_MS(200));
    assert_int_equal(serex_future_wait(f, SEREX_MS(500)), SEREX_OK);
    assert_int_equal(serex_scheduler_now(fx->s), SEREX_MS(200));
    assert_ptr_equal(serex_future_value(f), &it);
    serex_future_release(f);
}

/* The wait returns with the task that ends it: nothing due later ran. */
static void autoclock_wait_returns_before_later_timers(void **state)
{
    struct fixture *fx = *state;
    struct item late = {fx, 2, NULL}, next = {fx, 3, NULL};
    serex_latch *latch;

    start(fx);
    assert_int_equal(
        serex_schedule(fx->s, fx->ex, SEREX_MS(300), log_task, &late, NULL),
        SEREX_OK);
    assert_int_equal(
        serex_schedule(fx->s, fx->ex, SEREX_MS(100), count_down_task, fx, NULL),
        SEREX_OK);
    assert_int_equal(serex_latch_wait(fx->done, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_scheduler_now(fx->s), SEREX_MS(100));
    assert_int_equal(fx->nlog, 0);
    assert_int_equal(serex_scheduler_pending(fx->s), 1);
    /* nor anything queued behind the task that ended it */
    assert_int_equal(serex_latch_create(1, &latch), SEREX_OK);
    next.latch = NULL;
    assert_int_equal(serex_execute(fx->ex, count_down_latch_task, latch),
                     SEREX_OK);
    assert_int_equal(serex_execute(fx->ex, log_task, &next), SEREX_OK);
    assert_int_equal(serex_latch_wait(latch, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(fx->nlog, 0);
    assert_true(serex_manual_run_one(fx->ex));
    assert_int_equal(fx->nlog, 1);
    serex_latch_destroy(latch);
}

/* Registered executors take turns, one task each. */
static void autoclock_executors_take_turns(void **state)
{
    struct fixture *fx = *state;
    serex_executor *other, *both[2];
    serex_latch *four;
    struct item it[4];

    assert_int_equal(serex_manual_create(&other), SEREX_OK);
    assert_int_equal(serex_latch_create(4, &four), SEREX_OK);
    both[0] = fx->ex;
    both[1] = other;
    assert_int_equal(serex_autoclock_start(fx->s, both, 2), SEREX_OK);
    for (int i = 0; i < 4; i++) { /* 0 and 1 on ex, 2 and 3 on other */
        it[i] = (struct item){fx, i, four};
        assert_int_equal(serex_execute(both[i / 2], log_task, &it[i]),
                         SEREX_OK);
    }
    assert_int_equal(serex_latch_wait(four, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(fx->nlog, 4);
    assert_int_equal(fx->log[0], 0);
    assert_int_equal(fx->log[1], 2);
    assert_int_equal(fx->log[2], 1);
    assert_int_equal(fx->log[3], 3);
    serex_autoclock_stop();
    assert_int_equal(serex_destroy(other), SEREX_OK);
    serex_latch_destroy(four);
}

/* --- the other waits --- */

static void signal_task(void *arg)
{
    serex_event_signal(arg);
}

static void autoclock_drives_event_and_group_waits(void **state)
{
    struct fixture *fx = *state;
    serex_event *ev;
    serex_group *g;
    struct item it[2] = {{fx, 0, NULL}, {fx, 1, NULL}};

    assert_int_equal(serex_event_create(&ev), SEREX_OK);
    assert_int_equal(serex_group_create(&g), SEREX_OK);
    start(fx);
    assert_int_equal(
        serex_schedule(fx->s, fx->ex, SEREX_MS(250), signal_task, ev, NULL),
        SEREX_OK);
    assert_int_equal(serex_event_wait(ev, SEREX_FOREVER), SEREX_OK);
    assert_int_equal(serex_scheduler_now(fx->s), SEREX_MS(250));
    /* an event wait's time-out, with nothing due: the clock moves to it */
    assert_int_equal(serex_event_wait(ev, SEREX_MS(40)), SEREX_ETIMEDOUT);
    assert_int_equal(serex_scheduler_now(fx->s), SEREX_MS(290));
    assert_int_equal(serex_group_execute(g, fx->ex, log_task, &it[0]),
                     SEREX_OK);
    assert_int_equal(serex_group_execute(g, fx->ex, log_task, &it[1]),
                     SEREX_OK);
    assert_int_equal(serex_group_wait(g, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(fx->nlog, 2);
    serex_group_destroy(g);
    serex_event_destroy(ev);
}

/* await_termination of a shut-down manual executor runs what it holds. */
static void autoclock_drives_await_termination(void **state)
{
    struct fixture *fx = *state;
    struct item it[2] = {{fx, 0, NULL}, {fx, 1, NULL}};

    start(fx);
    assert_int_equal(serex_execute(fx->ex, log_task, &it[0]), SEREX_OK);
    assert_int_equal(serex_execute(fx->ex, log_task, &it[1]), SEREX_OK);
    serex_shutdown(fx->ex);
    assert_int_equal(serex_await_termination(fx->ex, SEREX_FOREVER), SEREX_OK);
    assert_int_equal(fx->nlog, 2);
}

/* A periodic timer onto the manual executor: one run per period. */
static void autoclock_periodic_timer_runs_on_its_grid(void **state)
{
    struct fixture *fx = *state;
    struct item it = {fx, 7, NULL};
    serex_timer *t;

    assert_int_equal(serex_latch_create(3, &it.latch), SEREX_OK);
    start(fx);
    assert_int_equal(serex_schedule_fixed_rate(fx->s, fx->ex, SEREX_MS(100),
                                               SEREX_MS(100), log_task, &it,
                                               &t),
                     SEREX_OK);
    assert_int_equal(serex_latch_wait(it.latch, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(fx->nlog, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(fx->at[i], SEREX_MS(100) * (i + 1));
    assert_int_equal(serex_scheduler_now(fx->s), SEREX_MS(300));
    assert_true(serex_timer_cancel(t));
    serex_timer_release(t);
    serex_latch_destroy(it.latch);
}

/* Deadlines on the manual clock: a token's and a future's. */
static void autoclock_drives_token_and_future_deadlines(void **state)
{
    struct fixture *fx = *state;
    serex_future *p, *q;
    serex_cancel *token;

    assert_int_equal(serex_promise_create(&p), SEREX_OK);
    assert_int_equal(serex_promise_create(&q), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &token), SEREX_OK);
    assert_int_equal(serex_cancel_deadline(token, fx->s, SEREX_MS(300)),
                     SEREX_OK);
    assert_int_equal(serex_future_deadline(q, fx->s, SEREX_MS(450)), SEREX_OK);
    start(fx);
    /* nobody completes p: the token's deadline ends the wait */
    assert_int_equal(serex_future_wait_token(p, TEST_TIMEOUT, token),
                     SEREX_ETIMEDOUT);
    assert_true(serex_cancel_requested(token));
    assert_int_equal(serex_scheduler_now(fx->s), SEREX_MS(300));
    /* q's own deadline ends q */
    assert_int_equal(serex_future_wait(q, TEST_TIMEOUT), SEREX_ETIMEDOUT);
    assert_int_equal(serex_future_error(q), SEREX_ETIMEDOUT);
    assert_int_equal(serex_scheduler_now(fx->s), SEREX_MS(450));
    serex_cancel_release(token);
    serex_future_release(q);
    serex_future_release(p); /* unfinished: ends cancelled */
}

/* --- nested waits --- */

struct nested {
    struct fixture *fx;
    serex_event *ev;
    int rc;
    int64_t at;
};

/* Run by a driven wait: waits in turn, for an event nobody signals. */
static void nested_wait_task(void *arg)
{
    struct nested *n = arg;

    n->rc = serex_event_wait(n->ev, SEREX_MS(100));
    n->at = serex_scheduler_now(n->fx->s);
}

/* The inner wait times out at its own time; the outer keeps its own. */
static void autoclock_nested_waits_keep_their_own_time_outs(void **state)
{
    struct fixture *fx = *state;
    struct nested n = {fx, NULL, -1, 0};

    assert_int_equal(serex_event_create(&n.ev), SEREX_OK);
    start(fx);
    assert_int_equal(
        serex_schedule(fx->s, fx->ex, SEREX_MS(50), nested_wait_task, &n, NULL),
        SEREX_OK);
    assert_int_equal(serex_latch_wait(fx->done, SEREX_MS(500)),
                     SEREX_ETIMEDOUT);
    assert_int_equal(n.rc, SEREX_ETIMEDOUT);
    assert_int_equal(n.at, SEREX_MS(150));
    assert_int_equal(serex_scheduler_now(fx->s), SEREX_MS(500));
    serex_event_destroy(n.ev);
}

/* --- stop --- */

static void autoclock_stop_makes_waits_sleep_again(void **state)
{
    struct fixture *fx = *state;
    struct item it = {fx, 1, NULL};
    serex_future *f = NULL;

    start(fx);
    serex_autoclock_stop();
    serex_autoclock_stop(); /* not bound: nothing */
    assert_int_equal(serex_submit(fx->ex, log_call, &it, &f), SEREX_OK);
    assert_int_equal(
        serex_schedule(fx->s, fx->ex, SEREX_MS(1), count_down_task, fx, NULL),
        SEREX_OK);
    /* a real wait of 1 ms: nothing runs the executor, the clock stays */
    assert_int_equal(serex_future_wait(f, SEREX_MS(1)), SEREX_ETIMEDOUT);
    assert_int_equal(fx->nlog, 0);
    assert_int_equal(serex_scheduler_now(fx->s), 0);
    /* bound again, the same wait is driven */
    start(fx);
    assert_int_equal(serex_future_wait(f, SEREX_FOREVER), SEREX_OK);
    assert_int_equal(fx->nlog, 1);
    serex_future_release(f);
}

static void autoclock_start_bad_arguments_are_einval(void **state)
{
    struct fixture *fx = *state;
    serex_scheduler *real;
    serex_executor *none[1] = {NULL};

    assert_int_equal(serex_autoclock_start(NULL, &fx->ex, 1), SEREX_EINVAL);
    assert_int_equal(serex_autoclock_start(fx->s, NULL, 1), SEREX_EINVAL);
    assert_int_equal(serex_autoclock_start(fx->s, none, 1), SEREX_EINVAL);
    assert_int_equal(serex_scheduler_create(NULL, &real), SEREX_OK);
    assert_int_equal(serex_autoclock_start(real, &fx->ex, 1), SEREX_EINVAL);
    assert_int_equal(serex_destroy(serex_scheduler_executor(real)), SEREX_OK);
    /* none of them bound the thread; binding it twice is refused */
    start(fx);
    assert_int_equal(serex_autoclock_start(fx->s, &fx->ex, 1), SEREX_EINVAL);
    serex_autoclock_stop();
    /* no executors at all: the clock alone */
    assert_int_equal(serex_autoclock_start(fx->s, NULL, 0), SEREX_OK);
    assert_int_equal(serex_latch_wait(fx->done, SEREX_MS(30)), SEREX_ETIMEDOUT);
    assert_int_equal(serex_scheduler_now(fx->s), SEREX_MS(30));
}

#ifndef SEREX_TEST_SHARED
static void autoclock_start_out_of_memory_binds_nothing(void **state)
{
    struct fixture *fx = *state;

    serex__alloc_fail_nth(1);
    assert_int_equal(serex_autoclock_start(fx->s, &fx->ex, 1), SEREX_ENOMEM);
    serex__alloc_fail_nth(0);
    assert_null(serex__wait_driver_tls);
    start(fx);
    assert_non_null(serex__wait_driver_tls);
    serex_autoclock_stop();
    assert_null(serex__wait_driver_tls);
}
#endif

/*
 * --- death tests ---
 * The child is forked from this single-threaded test and uses what the
 * parent made. Under ThreadSanitizer a child must take no mutex: the
 * parking lot's fork handler leaves its bucket locks held in TSan's books
 * (park.c makes them anew in the child), and TSan's deadlock detector then
 * fails a check inside the child's next lock and hangs it. The deadlock
 * case takes none (no executor: nothing to lock); the stop case must run
 * a task, which locks its executor, so TSan skips it.
 */

#if defined(__SANITIZE_THREAD__)
#  define TEST_AUTOCLOCK_TSAN 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define TEST_AUTOCLOCK_TSAN 1
#  endif
#endif

#if !defined(_WIN32)
/* Runs @body(@fx) in a child: it must die by abort, saying @expect. */
static void assert_dies(void (*body)(struct fixture *), struct fixture *fx,
                        const char *expect)
{
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
        body(fx);
        _exit(0); /* survived: the parent fails the test */
    }
    close(fds[1]);
    while (len < sizeof out - 1 &&
           (n = read(fds[0], out + len, sizeof out - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
        fail_msg("the child was not stopped by abort; it said: %s", out);
    if (strstr(out, expect) == NULL)
        fail_msg("expected \"%s\" on stderr, got: %s", expect, out);
}

/* A wait with no time-out, nothing queued and no timer: it never ends. */
static void deadlocked_wait(struct fixture *fx)
{
    if (serex_autoclock_start(fx->s, NULL, 0) != SEREX_OK)
        _exit(2);
    (void)serex_latch_wait(fx->done, SEREX_FOREVER);
}

static void autoclock_deadlock_stops_the_program(void **state)
{
    assert_dies(deadlocked_wait, *state,
                "serex: serex_autoclock_start: deadlock: a wait on the "
                "clock's thread has no time-out");
}

static void stop_task(void *arg)
{
    (void)arg;
    serex_autoclock_stop();
}

static void stop_inside_a_wait(struct fixture *fx)
{
    if (serex_autoclock_start(fx->s, &fx->ex, 1) != SEREX_OK)
        _exit(2);
    (void)serex_latch_wait(fx->done, SEREX_FOREVER);
}

static void autoclock_stop_inside_a_wait_stops_the_program(void **state)
{
    struct fixture *fx = *state;

#  ifdef TEST_AUTOCLOCK_TSAN
    skip(); /* the child must lock the executor (see above) */
#  endif
    assert_int_equal(serex_execute(fx->ex, stop_task, NULL), SEREX_OK);
    assert_dies(stop_inside_a_wait, fx,
                "serex: serex_autoclock_stop: called from a task");
}
#endif

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(autoclock_retry_with_backoff_runs_at_exact_times),
        T(autoclock_drives_a_serial_over_a_manual_executor),
        T(autoclock_wait_times_out_at_exactly_its_time_out),
        T(autoclock_wait_done_before_its_time_out_is_ok),
        T(autoclock_wait_returns_before_later_timers),
        T(autoclock_executors_take_turns),
        T(autoclock_drives_event_and_group_waits),
        T(autoclock_drives_await_termination),
        T(autoclock_periodic_timer_runs_on_its_grid),
        T(autoclock_drives_token_and_future_deadlines),
        T(autoclock_nested_waits_keep_their_own_time_outs),
        T(autoclock_stop_makes_waits_sleep_again),
        T(autoclock_start_bad_arguments_are_einval),
#ifndef SEREX_TEST_SHARED
        T(autoclock_start_out_of_memory_binds_nothing),
#endif
#if !defined(_WIN32)
        T(autoclock_deadlock_stops_the_program),
        T(autoclock_stop_inside_a_wait_stops_the_program),
#endif
    };

    return cmocka_run_group_tests_name("autoclock", tests, NULL, NULL);
}
