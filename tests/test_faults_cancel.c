/* SPDX-License-Identifier: MIT */
/*
 * test_faults_cancel.c - allocation failure in tokens and the futures
 * that obey them (issue 23): a token and its child, an on_cancel
 * registration, a deadline, a future linked to the token, a promise with
 * a deadline, and an all() over them, each allocation failing in turn.
 * A call that fails changes nothing: no callback runs, no timer is left
 * pending, the future is not linked (it runs); everything else still
 * ends exactly once (tests/test_faults.h says how a scenario runs).
 */
#include "test_faults.h"

struct hits {
    int n;
};

static void hit(void *arg)
{
    ((struct hits *)arg)->n++;
}

/* Every future of the run has ended; the ones that could end by the
 * clock did. */
static void scenario_cancel(struct run *r)
{
    serex_scheduler_config cfg = {.manual = true};
    serex_scheduler *s = NULL;
    serex_executor *m;
    serex_cancel *tok = NULL, *child = NULL;
    serex_cancel_reg *reg = NULL;
    serex_future *f = NULL, *p = NULL, *all = NULL;
    struct task *t = task_new(r, 0);
    struct hits h = {0};
    bool p_deadline = false;
    size_t pending;

    if (!status_ok(r, serex_manual_create(&m)))
        return;
    if (!status_ok(r, serex_scheduler_create(&cfg, &s)))
        goto out_m;
    if (!status_ok(r, serex_cancel_create(NULL, &tok))) {
        assert_null(tok);
        goto out_s;
    }
    if (!status_ok(r, serex_cancel_create(tok, &child)))
        assert_null(child);
    if (!status_ok(r, serex_cancel_on_cancel(tok, m, hit, &h, &reg)))
        assert_null(reg);
    if (child != NULL) {
        pending = serex_scheduler_pending(s);
        if (!status_ok(r, serex_cancel_deadline(child, s, 100 * MS)))
            assert_int_equal(serex_scheduler_pending(s), pending);
    }
    if (accept(r, t, serex_submit(m, call_logged, t, &f)) && child != NULL)
        status_ok(r, serex_future_cancel_on(f, child));
    if (status_ok(r, serex_promise_create(&p))) {
        pending = serex_scheduler_pending(s);
        p_deadline = status_ok(r, serex_future_deadline(p, s, 50 * MS));
        if (!p_deadline)
            assert_int_equal(serex_scheduler_pending(s), pending);
    }
    if (f != NULL && p != NULL &&
        !status_ok(r, serex_future_all((serex_future *[]){f, p}, 2, 0, &all)))
        assert_null(all);
    assert_int_equal(serex_scheduler_advance(s, 60 * MS), SEREX_OK);
    if (p != NULL) /* timed out, or (no deadline) still pending */
        assert_int_equal(serex_future_error(p),
                         p_deadline ? SEREX_ETIMEDOUT : 0);
    assert_true(serex_cancel_request(tok, 0));
    assert_int_equal(serex_scheduler_pending(s), 0); /* every timer went */
    if (child != NULL)
        assert_int_equal(serex_cancel_cause(child), SEREX_ECANCELED);
    if (p != NULL && !p_deadline)
        assert_true(serex_future_complete(p, NULL));
    test_run_all(m);
    assert_int_equal(h.n, reg != NULL ? 1 : 0); /* once, or never */
    if (all != NULL)                            /* ended: its inputs have */
        assert_true(serex_future_wait(all, 0) != SEREX_ETIMEDOUT ||
                    serex_future_error(all) == SEREX_ETIMEDOUT);
    settle_future(r, f, t);
    serex_future_release(p);
    serex_future_release(all);
    if (reg != NULL)
        assert_false(serex_cancel_unregister(reg));
    serex_cancel_release(child);
    serex_cancel_release(tok);
out_s:
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
out_m:
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

/* A group with a life: create_config (group, token, hook), a submitted
 * task that fails fast, a task it cancels. */
static void *fail_call(void *arg)
{
    log_task(arg);
    serex_future_set_error(-77);
    return arg;
}

static void scenario_group_config(struct run *r)
{
    serex_group_config cfg = {.flags = SEREX_GROUP_FAIL_FAST};
    serex_executor *m;
    serex_group *g = (serex_group *)r; /* must be overwritten */
    serex_future *fa = NULL, *fb = NULL;
    struct task *ta = task_new(r, 0), *tb = task_new(r, 0);
    int rc;

    if (!status_ok(r, serex_manual_create(&m)))
        return;
    if (!status_ok(r, serex_group_create_config(&cfg, &g))) {
        assert_null(g);
        assert_int_equal(serex_destroy(m), SEREX_OK);
        return;
    }
    if (!accept(r, ta, serex_group_submit(g, m, fail_call, ta, &fa)))
        assert_null(fa);
    if (!accept(r, tb, serex_group_submit(g, m, call_logged, tb, &fb)))
        assert_null(fb);
    test_run_all(m);
    rc = serex_group_wait(g, 0);
    if (fa != NULL) { /* it failed first: tb was cancelled or ran before */
        assert_int_equal(rc, -77);
        assert_int_equal(serex_future_wait(fa, 0), -77);
        serex_future_release(fa);
    } else {
        assert_int_equal(rc, SEREX_OK);
    }
    settle_future(r, fb, tb);
    serex_group_destroy(g);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

FAULTS_CASE(faults_cancel_changes_nothing, "cancel", scenario_cancel, 0)

FAULTS_CASE(faults_group_config_changes_nothing, "group config",
            scenario_group_config, 0)

FAULTS_MAIN("faults_cancel", FAULTS_TEST(faults_cancel_changes_nothing),
            FAULTS_TEST(faults_group_config_changes_nothing))
