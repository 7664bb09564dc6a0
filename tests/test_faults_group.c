/* SPDX-License-Identifier: MIT */
/*
 * test_faults_group.c - allocation failure in task groups on a manual
 * executor: execute, submit and notify each fail in turn (the group is
 * then unchanged), notifications posted when the group empties (a post
 * that fails runs inline), cancel, and tasks dropped by shutdown_now
 * (tests/test_faults.h says how a scenario runs).
 */
#include "test_faults.h"

#include "group_internal.h" /* serex__group_counts */

#define NTASKS 4
#define NFUTURES 3

/* The group's members and cancellable tasks, as the run expects them. */
struct expect {
    uint64_t members;
    uint64_t not_started;
};

static void check_group(serex_group *g, const struct expect *e)
{
    struct serex__group_counts c;

    serex__group_counts(g, &c);
    assert_int_equal(c.members, e->members);
    assert_int_equal(c.not_started, e->not_started);
}

/* Makes the run's group: false, with nothing made, if that failed. */
static bool group_created(struct run *r, serex_group **g)
{
    if (status_ok(r, serex_group_create(g)))
        return true;
    assert_null(*g);
    return false;
}

static struct task *group_execute_one(struct run *r, serex_group *g,
                                      serex_executor *m, struct expect *e)
{
    struct task *t = task_new(r, 0);

    if (accept(r, t, serex_group_execute(g, m, log_task, t))) {
        e->members++;
        e->not_started++;
    }
    check_group(g, e); /* a failure changed nothing */
    return t;
}

static serex_future *group_submit_one(struct run *r, serex_group *g,
                                      serex_executor *m, struct expect *e,
                                      struct task **ft)
{
    serex_future *fu;

    *ft = task_new(r, 0);
    fu = (serex_future *)*ft; /* must be overwritten */
    if (accept(r, *ft, serex_group_submit(g, m, call_logged, *ft, &fu))) {
        assert_non_null(fu);
        e->members++;
        e->not_started++;
    } else {
        assert_null(fu);
    }
    check_group(g, e);
    return fu;
}

/* A notification: a task of the run that must run exactly once. */
static void group_notify_one(struct run *r, serex_group *g,
                             serex_executor *target, const struct expect *e)
{
    struct task *t = task_new(r, 0);

    accept(r, t, serex_group_notify(g, target, log_task, t));
    check_group(g, e);
}

/*
 * variant 0: every task runs; notifications registered while busy are
 * posted when the last one ends, one registered when empty at once.
 * variant 1: cancel, then shutdown_now drops the rest; a notification
 * posted to the shut-down executor runs inline.
 */
static void scenario_group(struct run *r)
{
    serex_executor sentinel, *m = &sentinel;
    serex_group *g = (serex_group *)&sentinel;
    struct expect e = {0, 0};
    serex_future *fu[NFUTURES];
    struct task *ft[NFUTURES];
    struct task *first;

    if (!manual_created(r, &m))
        return;
    if (!group_created(r, &g)) {
        assert_int_equal(serex_destroy(m), SEREX_OK);
        return;
    }
    first = group_execute_one(r, g, m, &e);
    for (int i = 1; i < NTASKS; i++)
        group_execute_one(r, g, m, &e);
    for (int i = 0; i < NFUTURES; i++)
        fu[i] = group_submit_one(r, g, m, &e, &ft[i]);
    group_notify_one(r, g, m, &e); /* all but one call may fail: busy */
    group_notify_one(r, g, m, &e);
    assert_true(e.members > 0);

    if (r->variant == 0) {
        test_run_all(m); /* the tasks, then what the last one posted */
        assert_ascending(r->log, r->nlog);
    } else {
        size_t n, cancelled;
        int handed0;

        manual_run_one_checked(m); /* the first accepted task runs */
        e.members--;
        e.not_started--;
        cancelled = serex_group_cancel(g);
        assert_int_equal(cancelled, e.not_started);
        /* execute's tasks not started (the futures say so themselves) */
        for (int id = 0; id < r->ntasks; id++)
            if (r->accepted[id] && atomic_load(&r->ran[id]) == 0 &&
                id >= first->id && id < first->id + NTASKS)
                r->cancelled[id] = 1;
        e.not_started = 0;
        check_group(g, &e);
        group_execute_one(r, g, m, &e); /* a new epoch: not cancelled */
        handed0 = r->nhanded;
        n = serex_shutdown_now(m, on_pending, r);
        assert_int_equal(n, e.members);
        /* only the task added after the cancel comes back */
        assert_true(r->nhanded - handed0 <= 1);
    }
    assert_int_equal(serex_group_wait(g, 0), SEREX_OK);
    e = (struct expect){0, 0};
    check_group(g, &e);
    /* empty: posted at once (variant 1: refused, so it runs here) */
    group_notify_one(r, g, m, &e);
    test_run_all(m);
    for (int i = 0; i < NFUTURES; i++)
        settle_future(r, fu[i], ft[i]);
    assert_int_equal(serex_destroy(m), SEREX_OK);
    assert_int_equal(serex_group_wait(g, 0), SEREX_OK);
    serex_group_destroy(g);
}

/*
 * enter and leave allocate nothing: a notification registered while an
 * enter is open is posted by the leave, or never registered (ENOMEM).
 */
static void scenario_group_enter(struct run *r)
{
    serex_executor sentinel, *m = &sentinel;
    serex_group *g = (serex_group *)&sentinel;
    struct expect e = {1, 0};

    if (!manual_created(r, &m))
        return;
    if (!group_created(r, &g)) {
        assert_int_equal(serex_destroy(m), SEREX_OK);
        return;
    }
    serex_group_enter(g);
    check_group(g, &e);
    group_notify_one(r, g, m, &e);
    assert_int_equal(manual_queued(m), 0);
    serex_group_leave(g);
    assert_int_equal(serex_group_wait(g, 0), SEREX_OK);
    test_run_all(m);
    assert_int_equal(serex_destroy(m), SEREX_OK);
    serex_group_destroy(g);
}

/* --- the tests --- */

FAULTS_CASE(faults_group_tasks_run_lose_nothing, "group run", scenario_group, 0)
FAULTS_CASE(faults_group_cancel_and_shutdown_now_lose_nothing,
            "group cancel, shutdown_now", scenario_group, 1)
FAULTS_CASE(faults_group_enter_notify_leave_lose_nothing,
            "group enter, notify, leave", scenario_group_enter, 0)

FAULTS_MAIN("faults_group", FAULTS_TEST(faults_group_tasks_run_lose_nothing),
            FAULTS_TEST(faults_group_cancel_and_shutdown_now_lose_nothing),
            FAULTS_TEST(faults_group_enter_notify_leave_lose_nothing))
