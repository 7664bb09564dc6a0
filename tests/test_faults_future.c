/* SPDX-License-Identifier: MIT */
/*
 * test_faults_future.c - allocation failure in submit on a manual
 * executor: futures waited, cancelled, released, and cancelled by
 * shutdown_now; and in serex_future_on_done and serex_future_then, whose
 * records are posted, taken back or refused (tests/test_faults.h says how
 * a scenario runs).
 */
#include "test_faults.h"

/* --- futures on a manual executor --- */

static void scenario_futures(struct run *r)
{
    serex_executor sentinel, *m = &sentinel;
    serex_future *fu[6], *late;
    struct task *ft[6];
    size_t accepted = 0;

    if (!manual_created(r, &m))
        return;
    for (int i = 0; i < 6; i++) {
        ft[i] = task_new(r, 0);
        fu[i] = (serex_future *)ft[i]; /* must be overwritten */
        if (accept(r, ft[i], serex_submit(m, call_logged, ft[i], &fu[i]))) {
            accepted++;
            assert_non_null(fu[i]);
        } else {
            assert_null(fu[i]);
        }
        /* a failed submit queued nothing */
        assert_int_equal(manual_queued(m), accepted);
    }
    if (fu[1] != NULL) {
        assert_true(serex_future_cancel(fu[1]));
        r->cancelled[ft[1]->id] = 1;
        assert_false(serex_future_cancel(fu[1]));
        assert_int_equal(serex_future_wait(fu[1], 0), SEREX_ECANCELED);
    }
    if (fu[0] != NULL) {
        assert_int_equal(serex_future_wait(fu[0], 0), SEREX_ETIMEDOUT);
        assert_null(serex_future_value(fu[0]));
    }
    if (fu[2] != NULL) { /* released before it runs: it still runs */
        serex_future_release(fu[2]);
        fu[2] = NULL;
    }
    /* at least five were accepted: the first three queued run (one of
     * them may be the cancelled one, which runs nothing) */
    for (int i = 0; i < 3; i++)
        assert_true(serex_manual_run_one(m));
    assert_int_equal(atomic_load(&r->ran[ft[2]->id]),
                     r->accepted[ft[2]->id] ? 1 : 0);
    /* the rest are futures: cancelled and counted, not handed back */
    assert_int_equal(serex_shutdown_now(m, on_pending, r), accepted - 3);
    assert_int_equal(r->nhanded, 0);
    late = (serex_future *)r;
    status_refused(r, serex_submit(m, call_logged, task_new(r, 0), &late),
                   SEREX_EREJECTED);
    assert_null(late);
    for (int i = 0; i < 6; i++)
        settle_future(r, fu[i], ft[i]);
    assert_int_equal(serex_destroy(m), SEREX_OK);
    assert_ascending(r->log, r->nlog);
}

/* --- continuations: on_done and then --- */

/*
 * A then-future's call: its task is the one made right after its
 * source's (the call only gets the source's value, the source's task), so
 * every future's value is its own task, as settle_future checks.
 */
static void *then_logged(void *value)
{
    struct task *src = value;
    struct task *t = &src->r->tasks[src->id + 1];

    log_task(t);
    return t;
}

enum { CONT_RUN, CONT_TAKEN_BACK, CONT_REFUSED };

/* on_done(fu, t, log_task, task): a failed one changed nothing. */
static void add_on_done(struct run *r, serex_future *fu, serex_executor *t)
{
    struct task *c = task_new(r, 0);
    uint64_t queued = manual_queued(t);

    if (fu == NULL)
        return; /* its source was never made: c is never accepted */
    if (!accept(r, c, serex_future_on_done(fu, t, log_task, c)))
        assert_int_equal(manual_queued(t), queued);
}

/* then(fu, t, then_logged): its task must be the one after fu's. */
static serex_future *add_then(struct run *r, serex_future *fu,
                              struct task *src, serex_executor *t)
{
    struct task *g = task_new(r, 0);
    serex_future *next = (serex_future *)r; /* must be overwritten */
    uint64_t queued = manual_queued(t);

    assert_int_equal(g->id, src->id + 1);
    if (fu == NULL)
        return NULL;
    if (accept(r, g, serex_future_then(fu, t, then_logged, &next))) {
        assert_non_null(next);
        return next;
    }
    assert_null(next);
    assert_int_equal(manual_queued(t), queued);
    return NULL;
}

static serex_future *submit_logged(struct run *r, serex_executor *m,
                                   struct task *t)
{
    serex_future *fu = (serex_future *)r; /* must be overwritten */

    if (accept(r, t, serex_submit(m, call_logged, t, &fu)))
        return fu;
    assert_null(fu);
    return NULL;
}

/*
 * On a manual executor @m, futures with on_done continuations and then
 * chains posted to a second manual executor @t: one that has ended before
 * they are added (c), one that runs (a, released right after its
 * continuations are added, with a chain of two), one cancelled (b). The
 * variant says how @t ends them: it runs them, or shutdown_now takes them
 * back, or it refuses them (shut down before the sources run); the last
 * two run every continuation inline, and none reaches on_pending.
 */
static void scenario_continuations(struct run *r)
{
    serex_executor sentinel, *m = &sentinel, *t = &sentinel;
    struct task *tc, *ta, *tb;
    serex_future *fc, *fa, *fb, *gc, *ga, *ha = NULL, *gb;

    if (!manual_created(r, &m))
        return;
    if (!manual_created(r, &t)) {
        assert_int_equal(serex_destroy(m), SEREX_OK);
        return;
    }
    tc = task_new(r, 0);
    if ((fc = submit_logged(r, m, tc)) != NULL)
        assert_true(serex_manual_run_one(m)); /* c has ended */
    gc = add_then(r, fc, tc, t);
    add_on_done(r, fc, t);

    ta = task_new(r, 0);
    fa = submit_logged(r, m, ta);
    ga = add_then(r, fa, ta, t);
    if (ga != NULL) /* a's chain: ga, then ha (ga's task is ta + 1) */
        ha = add_then(r, ga, &r->tasks[ta->id + 1], t);
    else
        (void)task_new(r, 0); /* ha's task, never accepted */
    add_on_done(r, fa, t);
    add_on_done(r, ha, t);
    serex_future_release(fa); /* its continuations keep what they need */

    tb = task_new(r, 0);
    fb = submit_logged(r, m, tb);
    gb = add_then(r, fb, tb, t);
    add_on_done(r, fb, t);
    if (fb != NULL)
        assert_true(serex_future_cancel(fb)); /* gb is cancelled with it */

    if (r->variant == CONT_REFUSED)
        serex_shutdown(t);
    test_run_all(m);
    if (r->variant == CONT_TAKEN_BACK) {
        size_t n = serex_shutdown_now(t, on_pending, r);

        /* gc, c's and a's on_done, ga, b's on_done: each runs here */
        if (r->fail_at == 0)
            assert_int_equal(n, 5);
        assert_int_equal(r->nhanded, 0); /* never the user's */
    }
    test_run_all(t); /* a then posts its continuations when it runs */
    settle_future(r, fc, tc);
    settle_future(r, gc, &r->tasks[tc->id + 1]);
    settle_future(r, ga, &r->tasks[ta->id + 1]);
    settle_future(r, ha, &r->tasks[ta->id + 2]);
    settle_future(r, fb, tb);
    settle_future(r, gb, &r->tasks[tb->id + 1]);
    assert_int_equal(serex_destroy(t), SEREX_OK);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

/* --- the tests --- */

FAULTS_CASE(faults_futures_on_manual_lose_nothing,
            "futures", scenario_futures, 0)
FAULTS_CASE(faults_continuations_run_lose_nothing,
            "continuations run", scenario_continuations, CONT_RUN)
FAULTS_CASE(faults_continuations_taken_back_lose_nothing,
            "continuations taken back", scenario_continuations,
            CONT_TAKEN_BACK)
FAULTS_CASE(faults_continuations_refused_lose_nothing,
            "continuations refused", scenario_continuations, CONT_REFUSED)

FAULTS_MAIN("faults_future",
            FAULTS_TEST(faults_futures_on_manual_lose_nothing),
            FAULTS_TEST(faults_continuations_run_lose_nothing),
            FAULTS_TEST(faults_continuations_taken_back_lose_nothing),
            FAULTS_TEST(faults_continuations_refused_lose_nothing))
