/* SPDX-License-Identifier: MIT */
/*
 * test_group.c - task groups (include/serex/group.h): waiting for tasks
 * spread over a pool, a serial, a striped, a manual and a user-written
 * executor; enter and leave; notifications (at once, later, in order, and
 * refused or taken back by their target: promise 2a); cancel, exactly
 * counted on the manual executor; SEREX_EDEADLK from a task of the group;
 * tasks dropped by shutdown_now and destroy; the timer idiom on a manual
 * scheduler; misuse that stops the program; and racing producers,
 * cancellers and waiters on a pool (run under TSan by the sanitizer
 * stage).
 *
 * Order and counts are shown on the manual executor; every cross-thread
 * wait is bounded by TEST_TIMEOUT, so a lost wake-up fails instead of
 * hanging.
 */
#include "test_util.h"
#include "test_user_executor.h"

#include <stdio.h>  /* fprintf in the death tests' children */
#include <stdlib.h> /* calloc, free */
#include <string.h> /* strstr */
#if !defined(_WIN32)
#  include <signal.h>   /* SIGABRT */
#  include <sys/wait.h> /* waitpid */
#  include <unistd.h>   /* fork, pipe */
#endif

#include "group_internal.h" /* serex__group_counts */

#define NLOG 64
#define STRESS_PRODUCERS 4
#define STRESS_PER_PRODUCER 10000
#define STRESS_ROUNDS 6
#define STRESS_WAITERS 2

struct fixture;

/* A task's argument: its fixture and its number. */
struct item {
    struct fixture *f;
    int id;
};

struct fixture {
    serex_group *g;
    serex_executor *manual;
    serex_executor *manual2; /* a second one, for notification targets */
    serex_executor *pool;    /* made by the tests that need one */
    serex_event *gate;       /* blocks gated tasks until signalled */
    atomic_int started;      /* gated tasks that started */
    serex_event *done;       /* signalled by notifications */
    atomic_int ran;          /* tasks and notifications that ran */
    int log[NLOG];           /* ids in run order (one thread at a time) */
    int nlog;
    int slot[NLOG]; /* plain writes: visible after wait */
    struct item items[NLOG];
    struct test_pending pending;
    serex_fn pending_fns[NLOG];
    void *pending_args[NLOG];
    int waits[4]; /* statuses a task's waits returned */
};

/* --- tasks --- */

static void log_task(void *arg)
{
    struct item *it = arg;
    struct fixture *f = it->f;

    if (f->nlog < NLOG)
        f->log[f->nlog++] = it->id;
    atomic_fetch_add(&f->ran, 1);
}

static void *log_call(void *arg)
{
    log_task(arg);
    return arg;
}

/* Writes its slot (plain), then counts: any thread. */
static void slot_task(void *arg)
{
    struct item *it = arg;

    it->f->slot[it->id] = it->id + 1;
    atomic_fetch_add(&it->f->ran, 1);
}

/* Says it started, waits for the gate, then writes its slot. */
static void gated_task(void *arg)
{
    struct item *it = arg;

    atomic_fetch_add(&it->f->started, 1);
    if (serex_event_wait(it->f->gate, TEST_TIMEOUT) == SEREX_OK)
        serex_event_signal(it->f->gate); /* auto-reset: pass it on */
    slot_task(arg);
}

/* A notification: logs, then signals `done`. */
static void note_task(void *arg)
{
    struct item *it = arg;

    log_task(arg);
    serex_event_signal(it->f->done);
}

/* Waits on its own group from inside a task of it. */
static void self_wait_task(void *arg)
{
    struct fixture *f = arg;

    f->waits[0] = serex_group_wait(f->g, 0);
    if (f->waits[0] == SEREX_EDEADLK) /* only then: it would hang */
        f->waits[1] = serex_group_wait(f->g, SEREX_FOREVER);
    atomic_fetch_add(&f->ran, 1);
}

static void *self_wait_call(void *arg)
{
    self_wait_task(arg);
    return arg;
}

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    if (f == NULL)
        return -1;
    if (serex_group_create(&f->g) != SEREX_OK ||
        serex_manual_create(&f->manual) != SEREX_OK ||
        serex_manual_create(&f->manual2) != SEREX_OK ||
        serex_event_create(&f->gate) != SEREX_OK ||
        serex_event_create(&f->done) != SEREX_OK)
        return -1;
    for (int i = 0; i < NLOG; i++)
        f->items[i] = (struct item){f, i};
    f->pending.cap = NLOG;
    f->pending.fns = f->pending_fns;
    f->pending.args = f->pending_args;
    *state = f;
    return 0;
}

static struct serex__group_counts counts_of(serex_group *g)
{
    struct serex__group_counts c;

    serex__group_counts(g, &c);
    return c;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    /* Executors first: what they drop leaves the group. After a failed
     * check the group may still have members: leak it rather than stop
     * the program with destroy's misuse check. */
    serex_event_signal(f->gate);
    if (f->pool != NULL)
        assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    if (f->manual != NULL)
        assert_int_equal(serex_destroy(f->manual), SEREX_OK);
    if (f->manual2 != NULL)
        assert_int_equal(serex_destroy(f->manual2), SEREX_OK);
    if (f->g != NULL && counts_of(f->g).members == 0)
        serex_group_destroy(f->g);
    serex_event_destroy(f->gate);
    serex_event_destroy(f->done);
    free(f);
    return 0;
}

static void make_pool(struct fixture *f, unsigned threads)
{
    serex_pool_config cfg = {.threads = threads, .name = "test-group"};

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
}

/* Spins until @n gated tasks have started (bounded). */
static void await_started(struct fixture *f, int n)
{
    int64_t until = test_now_ns() + TEST_TIMEOUT;

    while (atomic_load(&f->started) < n) {
        assert_true(test_now_ns() < until);
        serex__thread_yield();
    }
}

static void assert_members(serex_group *g, uint64_t members,
                           uint64_t not_started)
{
    struct serex__group_counts c = counts_of(g);

    assert_int_equal(c.members, members);
    assert_int_equal(c.not_started, not_started);
}

/* --- bad input, the empty group --- */

static void group_bad_arguments_are_einval(void **state)
{
    struct fixture *f = *state;
    serex_future *fu = (serex_future *)f; /* must be overwritten */
    serex_executor no_ops = {NULL};

    assert_int_equal(serex_group_create(NULL), SEREX_EINVAL);
    assert_int_equal(serex_group_execute(NULL, f->manual, log_task, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_group_execute(f->g, NULL, log_task, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_group_execute(f->g, &no_ops, log_task, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_group_execute(f->g, f->manual, NULL, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_group_submit(f->g, f->manual, log_call, NULL, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_group_submit(NULL, f->manual, log_call, NULL, &fu),
                     SEREX_EINVAL);
    assert_null(fu);
    fu = (serex_future *)f;
    assert_int_equal(serex_group_submit(f->g, f->manual, NULL, NULL, &fu),
                     SEREX_EINVAL);
    assert_null(fu);
    assert_int_equal(serex_group_wait(NULL, 0), SEREX_EINVAL);
    assert_int_equal(serex_group_wait(f->g, -2), SEREX_EINVAL);
    assert_int_equal(serex_group_wait(f->g, INT64_MIN), SEREX_EINVAL);
    assert_int_equal(serex_group_notify(NULL, f->manual, log_task, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_group_notify(f->g, NULL, log_task, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_group_notify(f->g, &no_ops, log_task, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_group_notify(f->g, f->manual, NULL, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_group_cancel(NULL), 0);
    serex_group_enter(NULL);
    serex_group_leave(NULL);
    serex_group_destroy(NULL);
    /* nothing was queued or counted */
    assert_int_equal(serex_manual_run_pending(f->manual), 0);
    assert_members(f->g, 0, 0);
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_OK);
}

static void group_empty_group_waits_ok_at_once(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex_group_wait(f->g, 0), SEREX_OK);
    assert_int_equal(serex_group_wait(f->g, SEREX_FOREVER), SEREX_OK);
    assert_int_equal(serex_group_cancel(f->g), 0);
    serex_group_destroy(f->g);
    f->g = NULL;
    /* and a new one is as good */
    assert_int_equal(serex_group_create(&f->g), SEREX_OK);
    assert_members(f->g, 0, 0);
}

/* --- waiting --- */

static void group_wait_times_out_while_a_task_is_queued(void **state)
{
    struct fixture *f = *state;
    int64_t t0;

    assert_int_equal(
        serex_group_execute(f->g, f->manual, log_task, &f->items[1]), SEREX_OK);
    assert_members(f->g, 1, 1);
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_ETIMEDOUT);
    t0 = test_now_ns();
    assert_int_equal(serex_group_wait(f->g, 5 * MS), SEREX_ETIMEDOUT);
    assert_true(test_now_ns() - t0 >= 5 * MS);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, 1);
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_OK);
    assert_members(f->g, 0, 0);
    assert_int_equal(counts_of(f->g).refs, 0); /* the period ended */
}

/* A thread that waits for the group, and what it saw when it returned. */
struct waiter {
    struct fixture *f;
    serex__thread thread;
    int rc;
    int ran_at_return;
};

/*
 * serex_group_wait(g, TEST_TIMEOUT), and whether it was woken: a wait
 * whose wake-up was lost still says SEREX_OK at its deadline (it looks
 * once more), so a wait that took the whole timeout counts as a failure.
 */
static int wait_woken(serex_group *g)
{
    int64_t t0 = test_now_ns();
    int rc = serex_group_wait(g, TEST_TIMEOUT);

    if (rc == SEREX_OK && test_now_ns() - t0 >= TEST_TIMEOUT)
        return SEREX_ETIMEDOUT; /* not woken: it only looked at the end */
    return rc;
}

static int waiter_main(void *arg)
{
    struct waiter *w = arg;

    w->rc = wait_woken(w->f->g);
    w->ran_at_return = atomic_load(&w->f->ran);
    return 0;
}

static void start_waiter(struct waiter *w, struct fixture *f)
{
    w->f = f;
    assert_int_equal(serex__thread_start(&w->thread, waiter_main, w), SEREX_OK);
}

/* Spins until @n threads are counted in the group's wait. */
static void await_waiters(serex_group *g, uint64_t n)
{
    int64_t until = test_now_ns() + TEST_TIMEOUT;

    while (counts_of(g).waiters != n) {
        assert_true(test_now_ns() < until);
        serex__thread_yield();
    }
}

/* The executors' tasks: a keyed striped task inside the enter idiom. */
static void keyed_task(void *arg)
{
    struct item *it = arg;

    gated_task(arg);
    serex_group_leave(it->f->g);
}

static void group_wait_returns_after_tasks_on_every_kind_of_executor(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *serial;
    serex_striped *st;
    struct test_user user;
    struct waiter w = {0};
    int n = 0, gated = 0;

    make_pool(f, 4);
    test_user_init(&user);
    assert_int_equal(serex_serial_create(f->pool, NULL, &serial), SEREX_OK);
    assert_int_equal(serex_striped_create(f->pool, NULL, &st), SEREX_OK);

    /* gated tasks on the pool, the serial and the striped (its executor
     * face, and a key through enter/leave) */
    assert_int_equal(
        serex_group_execute(f->g, f->pool, gated_task, &f->items[n++]),
        SEREX_OK);
    assert_int_equal(
        serex_group_execute(f->g, serial, gated_task, &f->items[n++]),
        SEREX_OK);
    assert_int_equal(serex_group_execute(f->g, serex_striped_executor(st),
                                         gated_task, &f->items[n++]),
                     SEREX_OK);
    serex_group_enter(f->g);
    assert_int_equal(serex_striped_execute(st, 7, keyed_task, &f->items[n++]),
                     SEREX_OK);
    gated = n;
    /* plain tasks on the manual and the user's executor */
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            serex_group_execute(f->g, f->manual, slot_task, &f->items[n++]),
            SEREX_OK);
    assert_int_equal(
        serex_group_execute(f->g, &user.base, slot_task, &f->items[n++]),
        SEREX_OK);
    /* gated: none can end, so all are members (one an enter) */
    assert_int_equal(counts_of(f->g).members, n);

    await_started(f, gated); /* all four gated tasks are running */
    assert_int_equal(serex_group_wait(f->g, 10 * MS), SEREX_ETIMEDOUT);
    start_waiter(&w, f);
    await_waiters(f->g, 1); /* it waits (counted) before anything ends */
    assert_int_equal(serex_manual_run_pending(f->manual), 3);
    assert_true(test_user_run_one(&user));
    serex_event_signal(f->gate); /* the gated tasks pass it on */
    serex__thread_join(w.thread);
    assert_int_equal(w.rc, SEREX_OK);
    assert_int_equal(w.ran_at_return, n); /* it returned after the last */
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_OK);
    for (int i = 0; i < n; i++) /* plain reads: TSan checks the order */
        assert_int_equal(f->slot[i], i + 1);
    assert_members(f->g, 0, 0);
    assert_int_equal(counts_of(f->g).waiters, 0);

    assert_int_equal(serex_destroy(serex_striped_executor(st)), SEREX_OK);
    assert_int_equal(serex_destroy(serial), SEREX_OK);
    assert_int_equal(serex_destroy(&user.base), SEREX_OK);
}

static void group_many_waiters_all_return(void **state)
{
    struct fixture *f = *state;
    struct waiter w[3] = {{0}};

    assert_int_equal(
        serex_group_execute(f->g, f->manual, slot_task, &f->items[0]),
        SEREX_OK);
    for (int i = 0; i < 3; i++)
        start_waiter(&w[i], f);
    await_waiters(f->g, 3);
    assert_true(serex_manual_run_one(f->manual));
    for (int i = 0; i < 3; i++) {
        serex__thread_join(w[i].thread);
        assert_int_equal(w[i].rc, SEREX_OK);
        assert_int_equal(w[i].ran_at_return, 1);
    }
    assert_int_equal(counts_of(f->g).waiters, 0);
}

static void group_task_writes_are_visible_after_wait(void **state)
{
    struct fixture *f = *state;

    make_pool(f, 2);
    for (int i = 0; i < NLOG; i++)
        assert_int_equal(
            serex_group_execute(f->g, f->pool, slot_task, &f->items[i]),
            SEREX_OK);
    assert_int_equal(wait_woken(f->g), SEREX_OK);
    for (int i = 0; i < NLOG; i++) /* plain reads after the wait */
        assert_int_equal(f->slot[i], i + 1);
    assert_int_equal(atomic_load(&f->ran), NLOG);
}

/* --- submit --- */

static void group_submit_future_gets_the_value(void **state)
{
    struct fixture *f = *state;
    serex_future *fu = NULL;

    assert_int_equal(
        serex_group_submit(f->g, f->manual, log_call, &f->items[3], &fu),
        SEREX_OK);
    assert_non_null(fu);
    assert_int_equal(serex_future_wait(fu, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_ETIMEDOUT);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_OK);
    assert_int_equal(serex_future_wait(fu, 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(fu), &f->items[3]);
    assert_int_equal(f->nlog, 1);
    serex_future_release(fu);
}

static void group_execute_refused_leaves_the_group_unchanged(void **state)
{
    struct fixture *f = *state;
    serex_future *fu = (serex_future *)f;

    assert_int_equal(
        serex_group_execute(f->g, f->manual, log_task, &f->items[0]), SEREX_OK);
    serex_shutdown(f->manual2);
    assert_int_equal(
        serex_group_execute(f->g, f->manual2, log_task, &f->items[1]),
        SEREX_EREJECTED);
    assert_int_equal(
        serex_group_submit(f->g, f->manual2, log_call, &f->items[2], &fu),
        SEREX_EREJECTED);
    assert_null(fu);
    assert_members(f->g, 1, 1);
    assert_int_equal(serex_group_cancel(f->g), 1); /* only the accepted */
    assert_int_equal(serex_manual_run_pending(f->manual), 1);
    assert_int_equal(f->nlog, 0);
    assert_members(f->g, 0, 0);
}

/* --- enter and leave --- */

static void group_enter_and_leave_count_outside_work(void **state)
{
    struct fixture *f = *state;

    serex_group_enter(f->g);
    serex_group_enter(f->g);
    assert_members(f->g, 2, 0); /* not tasks: cancel cannot count them */
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_group_cancel(f->g), 0);
    serex_group_leave(f->g);
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_ETIMEDOUT);
    serex_group_leave(f->g);
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_OK);
    assert_members(f->g, 0, 0);
    assert_int_equal(counts_of(f->g).refs, 0);
}

/* --- notifications --- */

static void group_notify_on_empty_group_posts_at_once(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(
        serex_group_notify(f->g, f->manual2, note_task, &f->items[5]),
        SEREX_OK);
    assert_int_equal(serex_manual_run_pending(f->manual2), 1);
    assert_int_equal(f->nlog, 1);
    assert_int_equal(f->log[0], 5);
    assert_false(counts_of(f->g).notify);
}

static void group_notify_on_busy_group_posts_once_when_it_empties(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(
        serex_group_execute(f->g, f->manual, log_task, &f->items[1]), SEREX_OK);
    assert_int_equal(
        serex_group_execute(f->g, f->manual, log_task, &f->items[2]), SEREX_OK);
    assert_int_equal(
        serex_group_notify(f->g, f->manual2, note_task, &f->items[9]),
        SEREX_OK);
    assert_true(counts_of(f->g).notify);
    /* not empty: nothing posted, and wait does not see it empty */
    assert_int_equal(serex_manual_run_pending(f->manual2), 0);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(serex_manual_run_pending(f->manual2), 0);
    assert_true(serex_manual_run_one(f->manual)); /* empties: posts */
    assert_false(counts_of(f->g).notify);
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_OK);
    assert_int_equal(serex_manual_run_pending(f->manual2), 1);
    assert_int_equal(f->nlog, 3);
    assert_int_equal(f->log[2], 9); /* after both tasks */

    /* once: a later busy period does not post it again */
    assert_int_equal(
        serex_group_execute(f->g, f->manual, log_task, &f->items[3]), SEREX_OK);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(serex_manual_run_pending(f->manual2), 0);
    assert_int_equal(f->nlog, 4);
}

static void group_notifies_are_posted_in_registration_order(void **state)
{
    struct fixture *f = *state;

    /* period 1: two notifications; period 2 (after 1 ended): two more,
     * registered while the first two still wait on manual2 */
    assert_int_equal(
        serex_group_execute(f->g, f->manual, log_task, &f->items[0]), SEREX_OK);
    for (int i = 10; i < 12; i++)
        assert_int_equal(
            serex_group_notify(f->g, f->manual2, log_task, &f->items[i]),
            SEREX_OK);
    assert_true(serex_manual_run_one(f->manual));
    serex_group_enter(f->g);
    for (int i = 12; i < 14; i++)
        assert_int_equal(
            serex_group_notify(f->g, f->manual2, log_task, &f->items[i]),
            SEREX_OK);
    serex_group_leave(f->g);
    /* and one while empty: posted at once, behind the others */
    assert_int_equal(
        serex_group_notify(f->g, f->manual2, log_task, &f->items[14]),
        SEREX_OK);
    assert_int_equal(serex_manual_run_pending(f->manual2), 5);
    assert_int_equal(f->nlog, 6);
    for (int i = 1; i < 6; i++)
        assert_int_equal(f->log[i], 9 + i);
}

/* A notification that records whether the group was empty for it. */
static void note_checks_empty(void *arg)
{
    struct item *it = arg;

    it->f->waits[2] = serex_group_wait(it->f->g, 0);
    log_task(arg);
}

static void group_notify_refused_by_target_runs_on_the_emptying_thread(
    void **state)
{
    struct fixture *f = *state;

    serex_shutdown(f->manual2);
    /* empty now: runs inside notify, on this thread */
    assert_int_equal(
        serex_group_notify(f->g, f->manual2, note_checks_empty, &f->items[1]),
        SEREX_OK);
    assert_int_equal(f->nlog, 1);
    /* inside its own handing out: a wait would wait for itself */
    assert_int_equal(f->waits[2], SEREX_EDEADLK);

    /* busy: runs inside the run of the task that empties the group */
    assert_int_equal(
        serex_group_execute(f->g, f->manual, log_task, &f->items[2]), SEREX_OK);
    assert_int_equal(
        serex_group_notify(f->g, f->manual2, note_checks_empty, &f->items[3]),
        SEREX_OK);
    assert_int_equal(
        serex_group_notify(f->g, f->manual2, log_task, &f->items[4]), SEREX_OK);
    assert_int_equal(f->nlog, 1);
    f->waits[2] = -100;
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, 4);
    assert_int_equal(f->log[1], 2);
    assert_int_equal(f->log[2], 3); /* in order, inline */
    assert_int_equal(f->log[3], 4);
    assert_int_equal(f->waits[2], SEREX_EDEADLK); /* still handing out */
    /* and by a leave */
    serex_group_enter(f->g);
    assert_int_equal(
        serex_group_notify(f->g, f->manual2, log_task, &f->items[5]), SEREX_OK);
    serex_group_leave(f->g);
    assert_int_equal(f->nlog, 5);
    assert_int_equal(f->log[4], 5);

    /* run on its target, once handed out, it sees the group empty */
    assert_int_equal(
        serex_group_notify(f->g, f->manual, note_checks_empty, &f->items[6]),
        SEREX_OK);
    f->waits[2] = -100;
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->waits[2], SEREX_OK);
    assert_false(counts_of(f->g).posting);
}

/* A notification (run inline: its target refuses) that registers
 * another one while the first batch is still being posted. */
static void note_registers_another(void *arg)
{
    struct item *it = arg;

    log_task(arg);
    assert_int_equal(serex_group_notify(it->f->g, it->f->manual2, log_task,
                                        &it->f->items[it->id + 10]),
                     SEREX_OK);
}

static void group_notification_registered_while_posting_keeps_order(
    void **state)
{
    struct fixture *f = *state;

    serex_shutdown(f->manual2); /* every notification runs inline */
    serex_group_enter(f->g);
    assert_int_equal(serex_group_notify(f->g, f->manual2,
                                        note_registers_another, &f->items[1]),
                     SEREX_OK);
    assert_int_equal(
        serex_group_notify(f->g, f->manual2, log_task, &f->items[2]), SEREX_OK);
    serex_group_leave(f->g);
    /* 11 was registered (group empty) while 1 ran: after 2, not inside 1 */
    assert_int_equal(f->nlog, 3);
    assert_int_equal(f->log[0], 1);
    assert_int_equal(f->log[1], 2);
    assert_int_equal(f->log[2], 11);
}

static void group_notify_taken_back_by_target_runs_where_it_is(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(
        serex_group_notify(f->g, f->manual2, log_task, &f->items[6]), SEREX_OK);
    assert_int_equal(f->nlog, 0);
    /* taken back: it runs here and never reaches on_pending (2a) */
    assert_int_equal(
        serex_shutdown_now(f->manual2, test_pending_cb, &f->pending), 1);
    assert_int_equal(f->pending.n, 0);
    assert_int_equal(f->nlog, 1);
    assert_int_equal(f->log[0], 6);
    /* dropped by a destroy: the same */
    assert_int_equal(
        serex_group_notify(f->g, f->manual, log_task, &f->items[7]), SEREX_OK);
    assert_int_equal(serex_destroy(f->manual), SEREX_OK);
    f->manual = NULL;
    assert_int_equal(f->nlog, 2);
    assert_int_equal(f->log[1], 7);
}

/* A notification that destroys its group (it is the group's last user). */
struct destroyer {
    struct fixture *f;
    serex_group *g;
};

static void note_destroys_group(void *arg)
{
    struct destroyer *d = arg;

    serex_group_destroy(d->g);
    atomic_fetch_add(&d->f->ran, 1);
    serex_event_signal(d->f->done);
}

static void group_notification_may_destroy_the_group(void **state)
{
    struct fixture *f = *state;
    struct destroyer d = {f, f->g};

    /* inline, on the emptying thread (the target refuses) */
    serex_shutdown(f->manual2);
    assert_int_equal(
        serex_group_execute(f->g, f->manual, log_task, &f->items[0]), SEREX_OK);
    assert_int_equal(
        serex_group_notify(f->g, f->manual2, note_destroys_group, &d),
        SEREX_OK);
    assert_int_equal(
        serex_group_notify(f->g, f->manual2, log_task, &f->items[1]),
        SEREX_OK); /* posted after the destroy: the memory still holds */
    f->g = NULL;
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(atomic_load(&f->ran), 3);
    assert_int_equal(f->log[1], 1);
    assert_signalled(f->done);

    /* on a pool, racing the end of the emptier's tail (ASan checks) */
    make_pool(f, 2);
    for (int round = 0; round < 50; round++) {
        assert_int_equal(serex_group_create(&d.g), SEREX_OK);
        for (int i = 0; i < 4; i++)
            assert_int_equal(
                serex_group_execute(d.g, f->pool, slot_task, &f->items[i]),
                SEREX_OK);
        assert_int_equal(
            serex_group_notify(d.g, f->pool, note_destroys_group, &d),
            SEREX_OK);
        assert_signalled(f->done);
    }
}

/*
 * A notification target the test frees as soon as serex_group_wait
 * returns, as group.h allows: a user-written executor whose execute keeps
 * the notification, then lingers a while and writes to itself again before
 * it returns (the window in which a wait that returned early lets the
 * test free it: a use after free under ASan, and `in_execute` still set in
 * every build).
 */
struct lingering_target {
    serex_executor base; /* first member, as the vtable requires */
    serex_fn fn;
    void *arg;
    atomic_int in_execute; /* inside execute: it still uses its memory */
    atomic_int posted;     /* executes that returned */
    atomic_int entered;    /* an execute began (the test waits for it) */
};

#define LINGER_NS (30 * MS)

static int lingering_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct lingering_target *t = (struct lingering_target *)(void *)ex;

    atomic_store(&t->in_execute, 1);
    atomic_store(&t->entered, 1);
    t->fn = fn;
    t->arg = arg;
    test_sleep_ns(LINGER_NS);
    atomic_fetch_add(&t->posted, 1); /* freed memory, if wait did not wait */
    atomic_store(&t->in_execute, 0);
    return SEREX_OK;
}

static void lingering_shutdown(serex_executor *ex)
{
    (void)ex;
}

static size_t lingering_shutdown_now(serex_executor *ex,
                                     serex_pending_fn on_pending, void *ctx)
{
    (void)ex;
    (void)on_pending;
    (void)ctx;
    return 0;
}

static int lingering_await(serex_executor *ex, int64_t timeout_ns)
{
    (void)ex;
    (void)timeout_ns;
    return SEREX_OK;
}

static void lingering_destroy(serex_executor *ex)
{
    (void)ex;
}

static const serex_executor_ops lingering_ops = {
    .execute = lingering_execute,
    .shutdown = lingering_shutdown,
    .shutdown_now = lingering_shutdown_now,
    .await_termination = lingering_await,
    .destroy = lingering_destroy,
};

/* A thread that ends the group's last member, or registers a notification
 * on the empty group: either way it hands the notification out. */
struct poster {
    struct fixture *f;
    struct lingering_target *t;
    int round;
    serex__thread thread;
};

static int poster_main(void *arg)
{
    struct poster *p = arg;

    /* rounds 0 and 1 end the last member, round 2 registers on the empty
     * group: either way, this thread posts */
    if (p->round < 2)
        serex_group_leave(p->f->g);
    else
        (void)serex_group_notify(p->f->g, &p->t->base, log_task,
                                 &p->f->items[p->round]);
    return 0;
}

static void group_wait_returns_after_the_notifications_are_handed_out(
    void **state)
{
    struct fixture *f = *state;

    /* round 0: a waiter asleep when the group empties; 1: one that comes
     * while the emptier hands the notification out; 2: one that comes
     * while serex_group_notify on the empty group hands it out */
    for (int round = 0; round < 3; round++) {
        struct lingering_target *t = calloc(1, sizeof *t);
        struct poster p = {.f = f, .t = t, .round = round};
        int in_execute, posted;
        serex_fn fn;
        void *arg;

        assert_non_null(t);
        t->base.ops = &lingering_ops;
        if (round < 2) {
            serex_group_enter(f->g);
            assert_int_equal(
                serex_group_notify(f->g, &t->base, log_task, &f->items[round]),
                SEREX_OK);
        }
        assert_int_equal(serex__thread_start(&p.thread, poster_main, &p),
                         SEREX_OK);
        if (round > 0) /* wait while the poster is inside execute (it
                          lingers there; round 2 must not wait before the
                          poster's notify: the group would be empty) */
            while (atomic_load(&t->entered) == 0)
                serex__thread_yield();
        assert_int_equal(serex_group_wait(f->g, TEST_TIMEOUT), SEREX_OK);
        in_execute = atomic_load(&t->in_execute);
        posted = atomic_load(&t->posted);
        fn = t->fn;
        arg = t->arg;
        free(t); /* the notify target is the user's to destroy now */
        serex__thread_join(p.thread); /* ASan: no write to t after this */
        /* handed out: the target's execute had returned */
        assert_int_equal(in_execute, 0);
        assert_int_equal(posted, 1);
        fn(arg); /* the notification (its block is serex's to free) */
        assert_int_equal(f->nlog, round + 1);
        assert_int_equal(f->log[round], round);
    }
    assert_false(counts_of(f->g).notify);
    assert_false(counts_of(f->g).posting);
    assert_int_equal(counts_of(f->g).refs, 0);
}

/* --- cancel --- */

static void group_cancel_counts_exactly_and_skips_unstarted_tasks(void **state)
{
    struct fixture *f = *state;
    serex_future *fu[2];

    for (int i = 0; i < 3; i++)
        assert_int_equal(
            serex_group_execute(f->g, f->manual, log_task, &f->items[i]),
            SEREX_OK);
    for (int i = 0; i < 2; i++)
        assert_int_equal(serex_group_submit(f->g, f->manual, log_call,
                                            &f->items[3 + i], &fu[i]),
                         SEREX_OK);
    assert_true(serex_manual_run_one(f->manual)); /* task 0 runs */
    assert_members(f->g, 4, 4);
    assert_int_equal(serex_group_cancel(f->g), 4);
    assert_int_equal(serex_group_cancel(f->g), 0);
    assert_members(f->g, 4, 0); /* members until reached */
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_ETIMEDOUT);
    /* a task added after the cancel is not affected */
    assert_int_equal(
        serex_group_execute(f->g, f->manual, log_task, &f->items[7]), SEREX_OK);
    assert_int_equal(serex_manual_run_pending(f->manual), 5);
    assert_int_equal(f->nlog, 2);
    assert_int_equal(f->log[0], 0);
    assert_int_equal(f->log[1], 7);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(serex_future_wait(fu[i], 0), SEREX_ECANCELED);
        assert_null(serex_future_value(fu[i]));
        assert_false(serex_future_cancel(fu[i]));
        serex_future_release(fu[i]);
    }
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_OK);
    assert_members(f->g, 0, 0);
}

static void group_cancel_lets_running_tasks_finish(void **state)
{
    struct fixture *f = *state;

    make_pool(f, 1);
    assert_int_equal(
        serex_group_execute(f->g, f->pool, gated_task, &f->items[0]), SEREX_OK);
    await_started(f, 1); /* the only worker is inside it */
    assert_int_equal(
        serex_group_execute(f->g, f->pool, slot_task, &f->items[1]),
        SEREX_OK); /* queued behind it */
    assert_int_equal(
        serex_group_execute(f->g, f->manual, slot_task, &f->items[2]),
        SEREX_OK);
    assert_int_equal(serex_group_cancel(f->g), 2);
    serex_event_signal(f->gate);
    assert_int_equal(serex_manual_run_pending(f->manual), 1);
    assert_int_equal(wait_woken(f->g), SEREX_OK);
    assert_int_equal(f->slot[0], 1); /* the running one finished */
    assert_int_equal(f->slot[1], 0);
    assert_int_equal(f->slot[2], 0);
    assert_int_equal(atomic_load(&f->ran), 1);
}

static void group_cancelled_tasks_dropped_never_reach_on_pending(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(
        serex_group_execute(f->g, f->manual, log_task, &f->items[0]), SEREX_OK);
    assert_int_equal(serex_group_cancel(f->g), 1);
    assert_int_equal(
        serex_group_execute(f->g, f->manual, log_task, &f->items[1]), SEREX_OK);
    assert_int_equal(
        serex_shutdown_now(f->manual, test_pending_cb, &f->pending), 2);
    assert_int_equal(f->pending.n, 1); /* only the one not cancelled */
    assert_ptr_equal(f->pending.fns[0], log_task);
    assert_ptr_equal(f->pending.args[0], &f->items[1]);
    assert_int_equal(f->nlog, 0);
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_OK);
}

/* --- SEREX_EDEADLK --- */

/* Waits on the fixture's group from a task that is not one of its. */
static void outside_wait_task(void *arg)
{
    struct fixture *f = arg;

    f->waits[3] = serex_group_wait(f->g, 0);
}

static void group_wait_inside_a_group_task_is_edeadlk(void **state)
{
    struct fixture *f = *state;
    serex_future *fu;
    serex_group *other;

    assert_int_equal(serex_group_execute(f->g, f->manual, self_wait_task, f),
                     SEREX_OK);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->waits[0], SEREX_EDEADLK);
    assert_int_equal(f->waits[1], SEREX_EDEADLK);

    f->waits[0] = f->waits[1] = 0;
    assert_int_equal(
        serex_group_submit(f->g, f->manual, self_wait_call, f, &fu), SEREX_OK);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->waits[0], SEREX_EDEADLK);
    assert_int_equal(f->waits[1], SEREX_EDEADLK);
    assert_int_equal(serex_future_wait(fu, 0), SEREX_OK);
    serex_future_release(fu);

    /* a task of another group is not one of this group's: its wait with
     * timeout 0 looks and says ETIMEDOUT */
    assert_int_equal(serex_group_create(&other), SEREX_OK);
    serex_group_enter(f->g);
    assert_int_equal(
        serex_group_execute(other, f->manual, outside_wait_task, f), SEREX_OK);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->waits[3], SEREX_ETIMEDOUT);
    serex_group_leave(f->g);
    assert_int_equal(serex_group_wait(other, 0), SEREX_OK);
    serex_group_destroy(other);
}

static void group_wait_from_a_task_outside_the_group_is_not_edeadlk(
    void **state)
{
    struct fixture *f = *state;

    serex_group_enter(f->g);
    assert_int_equal(serex_execute(f->manual, outside_wait_task, f), SEREX_OK);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->waits[3], SEREX_ETIMEDOUT);
    serex_group_leave(f->g);
}

/* --- executors that drop the group's tasks --- */

static void group_shutdown_now_drops_tasks_and_the_group_empties(void **state)
{
    struct fixture *f = *state;
    serex_future *fu;

    assert_int_equal(
        serex_group_execute(f->g, f->manual, log_task, &f->items[0]), SEREX_OK);
    assert_int_equal(
        serex_group_submit(f->g, f->manual, log_call, &f->items[1], &fu),
        SEREX_OK);
    assert_int_equal(
        serex_group_execute(f->g, f->manual, log_task, &f->items[2]), SEREX_OK);
    assert_int_equal(
        serex_group_notify(f->g, f->manual2, log_task, &f->items[9]), SEREX_OK);
    assert_int_equal(
        serex_shutdown_now(f->manual, test_pending_cb, &f->pending), 3);
    /* execute's tasks come back in order; the future is cancelled */
    assert_int_equal(f->pending.n, 2);
    assert_ptr_equal(f->pending.fns[0], log_task);
    assert_ptr_equal(f->pending.args[0], &f->items[0]);
    assert_ptr_equal(f->pending.fns[1], log_task);
    assert_ptr_equal(f->pending.args[1], &f->items[2]);
    assert_int_equal(serex_future_wait(fu, 0), SEREX_ECANCELED);
    serex_future_release(fu);
    assert_int_equal(f->nlog, 0);
    /* the group emptied, and its notification was posted */
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_OK);
    assert_members(f->g, 0, 0);
    assert_int_equal(serex_manual_run_pending(f->manual2), 1);
    assert_int_equal(f->log[0], 9);
}

static void group_executor_destroy_drops_tasks_and_the_group_empties(
    void **state)
{
    struct fixture *f = *state;
    serex_future *fu;

    assert_int_equal(
        serex_group_execute(f->g, f->manual, log_task, &f->items[0]), SEREX_OK);
    assert_int_equal(
        serex_group_submit(f->g, f->manual, log_call, &f->items[1], &fu),
        SEREX_OK);
    assert_int_equal(serex_destroy(f->manual), SEREX_OK);
    f->manual = NULL;
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_OK);
    assert_int_equal(serex_future_wait(fu, 0), SEREX_ECANCELED);
    serex_future_release(fu);
    assert_int_equal(f->nlog, 0);
}

/* --- timers: the enter/leave idiom on a manual scheduler --- */

/* A timer's task in the group: its run ends with leave. */
static void timer_task(void *arg)
{
    struct item *it = arg;

    log_task(arg);
    serex_group_leave(it->f->g);
}

/* Schedules timer_task(@it) @delay from now as a member of the group
 * (docs/group.md): enter first, leave if the schedule fails. */
static int group_schedule(serex_scheduler *s, struct item *it, int64_t delay,
                          serex_timer **t)
{
    int rc;

    serex_group_enter(it->f->g);
    rc = serex_schedule(s, NULL, delay, timer_task, it, t);
    if (rc != SEREX_OK)
        serex_group_leave(it->f->g);
    return rc;
}

/* The scheduler's on_pending for the idiom: a one-shot handed back. */
static void timer_handed_back(serex_fn fn, void *arg, void *ctx)
{
    struct item *it = arg;

    (void)ctx;
    assert_ptr_equal(fn, timer_task);
    serex_group_leave(it->f->g);
}

static void group_timer_idiom_with_a_manual_scheduler(void **state)
{
    struct fixture *f = *state;
    serex_scheduler_config cfg = {.manual = true};
    serex_scheduler *s;
    serex_timer *t1, *t2, *t3;

    assert_int_equal(serex_scheduler_create(&cfg, &s), SEREX_OK);
    assert_int_equal(group_schedule(s, &f->items[1], 10 * MS, &t1), SEREX_OK);
    assert_int_equal(group_schedule(s, &f->items[2], 20 * MS, &t2), SEREX_OK);
    assert_int_equal(group_schedule(s, &f->items[3], 30 * MS, &t3), SEREX_OK);
    assert_members(f->g, 3, 0);
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_ETIMEDOUT);

    /* the first fires: its run leaves */
    assert_int_equal(serex_scheduler_advance(s, 10 * MS), SEREX_OK);
    assert_int_equal(f->nlog, 1);
    assert_members(f->g, 2, 0);
    /* the second is cancelled: the canceller leaves for it */
    assert_true(serex_timer_cancel(t2));
    serex_group_leave(f->g);
    assert_false(serex_timer_cancel(t1)); /* ran: no second leave */
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_ETIMEDOUT);
    /* the third is handed back by shutdown_now: on_pending leaves */
    assert_int_equal(serex_shutdown_now(serex_scheduler_executor(s),
                                        timer_handed_back, NULL),
                     1);
    assert_int_equal(serex_group_wait(f->g, 0), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 100 * MS), SEREX_OK);
    assert_int_equal(f->nlog, 1); /* neither ran */
    /* a refused schedule leaves at once */
    assert_int_equal(group_schedule(s, &f->items[4], 0, NULL), SEREX_EREJECTED);
    assert_members(f->g, 0, 0);
    serex_timer_release(t1);
    serex_timer_release(t2);
    serex_timer_release(t3);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
}

/* --- misuse stops the program --- */

#if !defined(_WIN32)
/* Runs @misuse in a child; asserts that it died by abort (or an ASan
 * report) and said @expect on stderr. */
static void assert_dies(void (*misuse)(void), const char *expect)
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
        misuse();
        fprintf(stderr, "survived\n");
        _exit(0); /* the parent fails the test */
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

static void leave_without_enter(void)
{
    serex_group *g;

    serex_group_create(&g);
    serex_group_enter(g);
    serex_group_leave(g);
    serex_group_leave(g);
}

static void leave_for_a_task(void)
{
    serex_group *g;
    serex_executor *m;

    serex_group_create(&g);
    serex_manual_create(&m);
    serex_group_execute(g, m, never_task, NULL);
    serex_group_leave(g); /* a task is a member, but not an enter */
}

static void destroy_with_a_queued_task(void)
{
    serex_group *g;
    serex_executor *m;

    serex_group_create(&g);
    serex_manual_create(&m);
    serex_group_execute(g, m, never_task, NULL);
    serex_group_destroy(g);
}

static void destroy_with_an_enter(void)
{
    serex_group *g;

    serex_group_create(&g);
    serex_group_enter(g);
    serex_group_destroy(g);
}
#endif

static void group_misuse_stops_the_program(void **state)
{
    (void)state;
#if defined(_WIN32)
    skip(); /* no fork(); test_misuse.c shows the Windows way */
#else
    assert_dies(leave_without_enter,
                "serex: serex_group_leave: leave without a matching "
                "serex_group_enter");
    assert_dies(leave_for_a_task, "serex: serex_group_leave: leave without");
    assert_dies(destroy_with_a_queued_task,
                "serex: serex_group_destroy: the group is not empty");
    assert_dies(destroy_with_an_enter,
                "serex: serex_group_destroy: the group is not empty");
#endif
}

/* --- racing producers, cancellers and waiters on a pool --- */

struct stress {
    struct fixture *f;
    serex_group *g;
    atomic_long ran;
    atomic_long cancelled;
    atomic_int producing; /* producers still at work */
    atomic_int go;
};

struct stress_producer {
    struct stress *s;
    serex__thread thread;
    long accepted;
    long failed;
    long futures_cancelled;
    bool submit; /* every third task a submit, with a future */
};

static void stress_task(void *arg)
{
    struct stress *s = arg;

    /* relaxed: read after wait, which orders */
    atomic_fetch_add_explicit(&s->ran, 1, memory_order_relaxed);
}

static void *stress_call(void *arg)
{
    stress_task(arg);
    return arg;
}

static int stress_producer_main(void *arg)
{
    struct stress_producer *p = arg;
    struct stress *s = p->s;

    while (!atomic_load(&s->go))
        serex__thread_yield();
    for (int i = 0; i < STRESS_PER_PRODUCER; i++) {
        int rc;

        if (p->submit && i % 3 == 0) {
            serex_future *fu;

            rc = serex_group_submit(s->g, s->f->pool, stress_call, s, &fu);
            if (rc == SEREX_OK) {
                if (serex_future_wait(fu, TEST_TIMEOUT) == SEREX_ECANCELED)
                    p->futures_cancelled++;
                serex_future_release(fu);
            }
        } else {
            rc = serex_group_execute(s->g, s->f->pool, stress_task, s);
        }
        if (rc == SEREX_OK)
            p->accepted++;
        else
            p->failed++;
    }
    atomic_fetch_sub(&s->producing, 1);
    return 0;
}

/* Cancels now and then while the producers run. */
static int stress_canceller_main(void *arg)
{
    struct stress *s = arg;

    while (!atomic_load(&s->go))
        serex__thread_yield();
    while (atomic_load(&s->producing) > 0) {
        atomic_fetch_add(&s->cancelled, (long)serex_group_cancel(s->g));
        for (int i = 0; i < 200; i++)
            serex__cpu_relax();
    }
    return 0;
}

struct stress_waiter {
    struct stress *s;
    serex__thread thread;
    int rc;
};

static int stress_waiter_main(void *arg)
{
    struct stress_waiter *w = arg;

    while (!atomic_load(&w->s->go))
        serex__thread_yield();
    w->rc = wait_woken(w->s->g);
    return 0;
}

static void stress_note(void *arg)
{
    struct stress *s = arg;

    serex_event_signal(s->f->done);
}

static void group_stress_producers_cancel_and_wait_on_a_pool(void **state)
{
    struct fixture *f = *state;

    make_pool(f, 4);
    for (int round = 0; round < STRESS_ROUNDS; round++) {
        struct stress s = {.f = f, .g = f->g};
        struct stress_producer p[STRESS_PRODUCERS];
        struct stress_waiter w[STRESS_WAITERS];
        serex__thread canceller;
        long accepted = 0, fcancelled = 0;

        atomic_init(&s.producing, STRESS_PRODUCERS);
        for (int i = 0; i < STRESS_PRODUCERS; i++) {
            p[i] = (struct stress_producer){.s = &s, .submit = i == 0};
            assert_int_equal(
                serex__thread_start(&p[i].thread, stress_producer_main, &p[i]),
                SEREX_OK);
        }
        for (int i = 0; i < STRESS_WAITERS; i++) {
            w[i] = (struct stress_waiter){.s = &s};
            assert_int_equal(
                serex__thread_start(&w[i].thread, stress_waiter_main, &w[i]),
                SEREX_OK);
        }
        assert_int_equal(
            serex__thread_start(&canceller, stress_canceller_main, &s),
            SEREX_OK);
        /* registered now: posted when the group next empties (or at once
         * if it is empty now); exactly once either way */
        assert_int_equal(serex_group_notify(f->g, f->pool, stress_note, &s),
                         SEREX_OK);
        atomic_store(&s.go, 1);
        for (int i = 0; i < STRESS_PRODUCERS; i++) {
            serex__thread_join(p[i].thread);
            assert_int_equal(p[i].failed, 0);
            accepted += p[i].accepted;
            fcancelled += p[i].futures_cancelled;
        }
        serex__thread_join(canceller);
        assert_int_equal(wait_woken(f->g), SEREX_OK);
        for (int i = 0; i < STRESS_WAITERS; i++) {
            serex__thread_join(w[i].thread);
            assert_int_equal(w[i].rc, SEREX_OK);
        }
        assert_signalled(f->done);
        /* every accepted task ran or was cancelled, never both */
        assert_int_equal(atomic_load(&s.ran) + atomic_load(&s.cancelled),
                         accepted);
        assert_true(fcancelled <= atomic_load(&s.cancelled));
        assert_members(f->g, 0, 0);
        assert_int_equal(counts_of(f->g).waiters, 0);
        assert_false(counts_of(f->g).notify);
        /* no second post of the notification */
        assert_int_equal(serex_event_wait(f->done, 0), SEREX_ETIMEDOUT);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        /* First: before any pool or scheduler registers serex's fork
         * handlers, which hold every parking-lot bucket across fork() and
         * so overflow ThreadSanitizer's count of locks held at once. */
        T(group_misuse_stops_the_program),
        T(group_bad_arguments_are_einval),
        T(group_empty_group_waits_ok_at_once),
        T(group_wait_times_out_while_a_task_is_queued),
        T(group_wait_returns_after_tasks_on_every_kind_of_executor),
        T(group_many_waiters_all_return),
        T(group_task_writes_are_visible_after_wait),
        T(group_submit_future_gets_the_value),
        T(group_execute_refused_leaves_the_group_unchanged),
        T(group_enter_and_leave_count_outside_work),
        T(group_notify_on_empty_group_posts_at_once),
        T(group_notify_on_busy_group_posts_once_when_it_empties),
        T(group_notifies_are_posted_in_registration_order),
        T(group_notify_refused_by_target_runs_on_the_emptying_thread),
        T(group_notification_registered_while_posting_keeps_order),
        T(group_notify_taken_back_by_target_runs_where_it_is),
        T(group_notification_may_destroy_the_group),
        T(group_wait_returns_after_the_notifications_are_handed_out),
        T(group_cancel_counts_exactly_and_skips_unstarted_tasks),
        T(group_cancel_lets_running_tasks_finish),
        T(group_cancelled_tasks_dropped_never_reach_on_pending),
        T(group_wait_inside_a_group_task_is_edeadlk),
        T(group_wait_from_a_task_outside_the_group_is_not_edeadlk),
        T(group_shutdown_now_drops_tasks_and_the_group_empties),
        T(group_executor_destroy_drops_tasks_and_the_group_empties),
        T(group_timer_idiom_with_a_manual_scheduler),
        T(group_stress_producers_cancel_and_wait_on_a_pool),
#undef T
    };

    return cmocka_run_group_tests_name("group", tests, NULL, NULL);
}
