/* SPDX-License-Identifier: MIT */
/*
 * test_faults_limiter.c - allocation failure in a limiter over a manual
 * executor: its creation, every execute (the task's node, and the
 * target's node for a runner: refused for a lone task, absorbed while
 * another runner is out), a future, shutdown_now, a runner resubmitting
 * itself after a full batch, and its last runners run or dropped by the
 * target after destroy (tests/test_faults.h says how a scenario runs).
 * A resubmission usually reuses the node its visit freed, so the refused
 * resubmission is tested in test_limiter.c, by a target shut down.
 * serex_limiter_set_max allocates nothing itself; a raise submits runners,
 * whose nodes the target allocates: a refused one leaves the tasks to the
 * runners out (variant 3).
 */
#include "test_faults.h"

#define LIMITER_BATCH 64 /* tasks per runner visit (limiter.h) */

/* --- limiter over a manual executor --- */

static void check_limiter(struct run *r, serex_executor *lim, serex_executor *m,
                          unsigned max)
{
    struct tally t = tally_of(r);
    serex_stats st = stats_of(lim);
    uint64_t runners = manual_queued(m);

    assert_int_equal(st.submitted, t.accepted);
    assert_int_equal(st.completed, t.ran);
    assert_int_equal(st.queued, t.waiting);
    /* between manual steps every runner is queued on the target: at most
     * max of them, and one at least while tasks wait */
    assert_true(runners <= max);
    if (t.waiting > 0)
        assert_true(runners >= 1);
}

static void limiter_execute_one(struct run *r, serex_executor *lim,
                                serex_executor *m, unsigned max)
{
    struct task *t = task_new(r, 0);

    accept(r, t, serex_execute(lim, log_task, t));
    check_limiter(r, lim, m, max); /* a failure changed nothing */
}

/* Runs one task of @m (a runner visit), checked. */
static void limiter_step(struct run *r, serex_executor *lim, serex_executor *m,
                         unsigned max)
{
    manual_run_one_checked(m);
    check_limiter(r, lim, m, max);
}

/* variant 3: the cap goes 1 -> 3 (runners for the waiting tasks, each a
 * target allocation) -> 2 while tasks wait; checked against 3 from then
 * on (runners beyond the new cap leave when they run). */
static void limiter_change_cap(struct run *r, serex_executor *lim,
                               serex_executor *m, unsigned *max)
{
    if (r->variant != 3)
        return;
    assert_int_equal(serex_limiter_set_max(lim, 3), SEREX_OK);
    *max = 3;
    check_limiter(r, lim, m, *max);
    limiter_step(r, lim, m, *max);
    assert_int_equal(serex_limiter_set_max(lim, 2), SEREX_OK);
    assert_int_equal(serex_limiter_max(lim), 2);
    check_limiter(r, lim, m, *max);
}

/*
 * variant 0: a limiter of 3; the target runs its last runners after
 * destroy. variant 1: the same; the target's destroy drops them.
 * variant 2: a limiter of 1 and more than a batch of tasks, so a runner
 * resubmits itself. variant 3: a limiter of 1 whose cap is raised and
 * lowered while tasks wait.
 */
static void scenario_limiter(struct run *r)
{
    unsigned max = r->variant >= 2 ? 1 : 3;
    const int burst = r->variant == 2 ? LIMITER_BATCH + 6 : 8;
    serex_executor sentinel, *m = &sentinel, *lim = &sentinel;
    serex_future *fu;
    struct task *ft;
    int handed0, nlog0;
    size_t n;

    if (!manual_created(r, &m))
        return;
    if (!status_ok(r, serex_limiter_create(m, max, &lim))) {
        assert_null(lim);
        assert_int_equal(serex_destroy(m), SEREX_OK);
        return;
    }
    check_limiter(r, lim, m, max);
    for (int i = 0; i < burst; i++)
        limiter_execute_one(r, lim, m, max);
    limiter_change_cap(r, lim, m, &max);
    for (int i = 0; i < 2; i++)
        limiter_step(r, lim, m, max);
    for (int i = 0; i < 4; i++)
        limiter_execute_one(r, lim, m, max);
    ft = task_new(r, 0);
    fu = (serex_future *)ft;
    if (!accept(r, ft, serex_submit(lim, call_logged, ft, &fu)))
        assert_null(fu);
    check_limiter(r, lim, m, max);
    limiter_step(r, lim, m, max);
    for (int i = 0; i < 3; i++) /* left for shutdown_now */
        limiter_execute_one(r, lim, m, max);

    handed0 = r->nhanded;
    n = serex_shutdown_now(lim, on_pending, r);
    assert_int_equal(stats_of(lim).queued, 0);
    status_refused(r, serex_execute(lim, log_task, task_new(r, 0)),
                   SEREX_EREJECTED);
    assert_int_equal(serex_await_termination(lim, 0), SEREX_OK);
    nlog0 = r->nlog;
    assert_int_equal(serex_destroy(lim), SEREX_OK);
    if (r->variant != 1)
        test_run_all(m); /* runners may still be queued: they run nothing */
    end_on_manual(r, m, nlog0, n, handed0, fu, ft);
}

/* --- the tests --- */

FAULTS_CASE(faults_limiter_runners_run_after_destroy_lose_nothing,
            "limiter (runners run after destroy)", scenario_limiter, 0)

FAULTS_CASE(faults_limiter_runners_dropped_by_target_lose_nothing,
            "limiter (runners dropped)", scenario_limiter, 1)

FAULTS_CASE(faults_limiter_of_one_resubmitting_loses_nothing,
            "limiter of 1 (a runner resubmits)", scenario_limiter, 2)

FAULTS_CASE(faults_limiter_cap_changed_loses_nothing,
            "limiter (cap raised, then lowered)", scenario_limiter, 3)

FAULTS_MAIN("faults_limiter",
            FAULTS_TEST(faults_limiter_runners_run_after_destroy_lose_nothing),
            FAULTS_TEST(faults_limiter_runners_dropped_by_target_lose_nothing),
            FAULTS_TEST(faults_limiter_of_one_resubmitting_loses_nothing),
            FAULTS_TEST(faults_limiter_cap_changed_loses_nothing))
