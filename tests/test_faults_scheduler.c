/* SPDX-License-Identifier: MIT */
/*
 * test_faults_scheduler.c - allocation failure in a manual scheduler:
 * one-shot and periodic timers, with and without handles, on a target
 * and on the timer thread; runs the target refuses go to on_rejected
 * (tests/test_faults.h says how a scenario runs). Variant 0: a periodic
 * run refused is missed and its timer goes on (the default); variant 1:
 * it ends the timer (SEREX_REFUSED_END), and with max_timers the places
 * left after a failed call are exactly those not taken (a place a failed
 * call did not give back shows). And timers that obey a token, with
 * serex_timer_cancel_notify (scenario_timer_sync).
 */
#include "test_faults.h"

/* --- the manual scheduler --- */

/* A run its target refused comes back here (on_rejected). */
static void on_rejected(serex_fn fn, void *arg, void *ctx)
{
    struct run *r = ctx;

    r->refused[our_task(fn, arg, r)->id]++;
}

enum timer_kind { ONE_SHOT, FIXED_RATE, FIXED_DELAY };

/* Schedules @t; on failure checks that nothing was scheduled. Returns
 * the handle if one was asked for and the call succeeded, else NULL. */
static serex_timer *schedule_one(struct run *r, serex_scheduler *s,
                                 serex_executor *target, enum timer_kind kind,
                                 int64_t first, int64_t period, struct task *t,
                                 bool handle)
{
    serex_timer *h = (serex_timer *)t; /* must be overwritten */
    serex_timer **out = handle ? &h : NULL;
    size_t before = serex_scheduler_pending(s);
    int rc;

    t->periodic = kind != ONE_SHOT;
    if (kind == ONE_SHOT)
        rc = serex_schedule(s, target, first, log_task, t, out);
    else if (kind == FIXED_RATE)
        rc = serex_schedule_fixed_rate(s, target, first, period,
                                       periodic_task, t, out);
    else
        rc = serex_schedule_fixed_delay(s, target, first, period,
                                        periodic_task, t, out);
    if (accept(r, t, rc)) {
        assert_int_equal(serex_scheduler_pending(s), before + 1);
        if (handle)
            assert_non_null(h);
        return handle ? h : NULL;
    }
    assert_int_equal(serex_scheduler_pending(s), before);
    if (handle)
        assert_null(h);
    return NULL;
}

enum { SCHEDULED_AT_ONCE = 8 }; /* a, b, c, d, e, p, q and x below */

static void scenario_scheduler(struct run *r)
{
    serex_scheduler_config cfg = {
        .tick_ns = MS,
        .wheel_size = 64,
        .manual = true,
        .on_rejected = on_rejected,
        .on_rejected_ctx = r,
        .max_timers = r->variant ? SCHEDULED_AT_ONCE : 0,
        .periodic_refused = r->variant ? SEREX_REFUSED_END
                                       : SEREX_REFUSED_MISS};
    serex_scheduler *s = (serex_scheduler *)r; /* must be overwritten */
    serex_executor sentinel, *m = &sentinel, *face;
    serex_timer *hb, *hc, *he, *hp;
    struct task *a, *b, *c, *d, *e, *p, *q, *x;
    bool p_cancelled = false;
    int p_runs = 0, q_runs, handed0;
    size_t before, n;

    if (!status_ok(r, serex_scheduler_create(&cfg, &s))) {
        assert_null(s);
        return;
    }
    face = serex_scheduler_executor(s);
    if (!manual_created(r, &m)) {
        assert_int_equal(serex_destroy(face), SEREX_OK);
        return;
    }
    /* one-shots with and without handles, on the manual executor and on
     * the timer thread (target NULL); periodic ones of both kinds */
    a = task_new(r, 0);
    schedule_one(r, s, m, ONE_SHOT, 5 * MS, 0, a, false);
    b = task_new(r, 0);
    hb = schedule_one(r, s, m, ONE_SHOT, 10 * MS, 0, b, true);
    c = task_new(r, 0);
    hc = schedule_one(r, s, NULL, ONE_SHOT, 3 * MS, 0, c, true);
    d = task_new(r, 0); /* still pending at shutdown_now: handed back */
    schedule_one(r, s, m, ONE_SHOT, 50 * MS, 0, d, false);
    e = task_new(r, 0); /* cancelled */
    he = schedule_one(r, s, m, ONE_SHOT, 40 * MS, 0, e, true);
    p = task_new(r, 0); /* cancelled after a few runs */
    hp = schedule_one(r, s, m, FIXED_RATE, 2 * MS, 4 * MS, p, true);
    q = task_new(r, 0); /* ended by shutdown_now */
    schedule_one(r, s, NULL, FIXED_DELAY, 1 * MS, 3 * MS, q, false);
    x = task_new(r, 0); /* the executor face: on the next advance */
    before = serex_scheduler_pending(s);
    if (!accept(r, x, serex_execute(face, log_task, x)))
        assert_int_equal(serex_scheduler_pending(s), before);
    if (r->variant) { /* fill the cap: exactly the places left */
        size_t left = SCHEDULED_AT_ONCE - serex_scheduler_pending(s), got = 0;

        for (;;) { /* due after the last advance: handed back below */
            struct task *y = task_new(r, 0);
            int rc = serex_schedule(s, NULL, SEC, log_task, y, NULL);

            if (rc == SEREX_EFULL)
                break;
            got += accept(r, y, rc);
        }
        assert_int_equal(got, left);
    }

    if (he != NULL) {
        assert_true(serex_timer_cancel(he));
        r->cancelled[e->id] = 1;
        assert_false(serex_timer_cancel(he));
    }
    /* a run its target refuses (ENOMEM) goes to on_rejected */
    assert_int_equal(serex_scheduler_advance(s, 6 * MS), SEREX_OK);
    test_run_all(m);
    assert_int_equal(serex_scheduler_advance(s, 10 * MS), SEREX_OK);
    test_run_all(m);
    if (hp != NULL) {
        p_cancelled = serex_timer_cancel(hp);
        if (p_cancelled) /* else its run was refused, which ended it */
            p_runs = atomic_load(&r->ran[p->id]);
        else
            assert_int_equal(r->refused[p->id], 1);
    }
    assert_int_equal(serex_scheduler_advance(s, 20 * MS), SEREX_OK);
    test_run_all(m);
    if (p_cancelled)
        assert_int_equal(atomic_load(&r->ran[p->id]), p_runs);

    handed0 = r->nhanded;
    n = serex_shutdown_now(face, on_pending, r);
    assert_int_equal(n, (size_t)(r->nhanded - handed0));
    assert_int_equal(r->handed[d->id], r->accepted[d->id] ? 1 : 0);
    q_runs = atomic_load(&r->ran[q->id]);
    if (r->accepted[q->id]) /* on the timer thread: never refused */
        assert_true(q_runs >= 1);
    /* refused before anything is allocated: exactly EREJECTED */
    assert_int_equal(serex_schedule(s, m, 0, log_task, task_new(r, 0), NULL),
                     SEREX_EREJECTED);
    assert_int_equal(serex_scheduler_advance(s, 100 * MS), SEREX_OK);
    test_run_all(m);
    assert_int_equal(atomic_load(&r->ran[q->id]), q_runs);
    assert_int_equal(serex_scheduler_pending(s), 0);
    assert_int_equal(serex_await_termination(face, 0), SEREX_OK);
    assert_int_equal(serex_shutdown_now(m, on_pending, r), 0);
    assert_false(serex_timer_cancel(hb)); /* done: ran or refused */
    assert_false(serex_timer_cancel(hc));
    serex_timer_release(hb);
    serex_timer_release(hc);
    serex_timer_release(he);
    serex_timer_release(hp);
    assert_int_equal(serex_destroy(face), SEREX_OK);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

/*
 * Timers that obey a token, and cancel_notify (issue 23): every new
 * allocation (the token, a token timer's slab, a notify's block) fails in
 * turn. A failed schedule schedules nothing; a failed notify cancels
 * nothing (its timer still runs); the token's cancel stops the rest.
 */
static void scenario_timer_sync(struct run *r)
{
    serex_scheduler_config cfg = {.manual = true};
    serex_scheduler *s = (serex_scheduler *)r; /* must be overwritten */
    serex_executor sentinel, *m = &sentinel, *face;
    serex_cancel *tok = (serex_cancel *)r;
    serex_timer *ha = NULL, *hd = NULL;
    struct task *a, *b, *c, *d, *n;
    size_t before;
    bool stopped = false;
    int rc;

    if (!status_ok(r, serex_scheduler_create(&cfg, &s)))
        return;
    face = serex_scheduler_executor(s);
    if (!manual_created(r, &m)) {
        assert_int_equal(serex_destroy(face), SEREX_OK);
        return;
    }
    if (!status_ok(r, serex_cancel_create(NULL, &tok))) {
        assert_null(tok);
        assert_int_equal(serex_destroy(face), SEREX_OK);
        assert_int_equal(serex_destroy(m), SEREX_OK);
        return;
    }
    a = task_new(r, 0); /* a handle; stopped by the token */
    before = serex_scheduler_pending(s);
    if (!accept(r, a,
                serex_schedule_token(s, m, 5 * MS, tok, log_task, a, &ha))) {
        assert_null(ha);
        assert_int_equal(serex_scheduler_pending(s), before);
    }
    b = task_new(r, 0); /* periodic, no handle: ended by the token */
    b->periodic = true;
    before = serex_scheduler_pending(s);
    if (!accept(r, b,
                serex_schedule_fixed_rate_token(s, m, 2 * MS, 3 * MS, tok,
                                                periodic_task, b, NULL)))
        assert_int_equal(serex_scheduler_pending(s), before);
    c = task_new(r, 0); /* no handle: stopped by the token */
    accept(r, c, serex_schedule_token(s, NULL, 4 * MS, tok, log_task, c, NULL));
    d = task_new(r, 0); /* cancelled with a notice, or not at all */
    if (accept(r, d, serex_schedule(s, m, 2 * MS, log_task, d, &hd))) {
        n = task_new(r, 0);
        before = serex_scheduler_pending(s);
        rc = serex_timer_cancel_notify(hd, m, log_task, n, &stopped);
        if (accept(r, n, rc)) {
            assert_true(stopped);
            r->cancelled[d->id] = 1;
            assert_int_equal(serex_scheduler_pending(s), before - 1);
        } else { /* nothing changed: d still pending, runs below */
            assert_false(stopped);
            assert_int_equal(serex_scheduler_pending(s), before);
        }
        serex_timer_release(hd);
    }
    assert_int_equal(serex_scheduler_advance(s, 3 * MS), SEREX_OK);
    test_run_all(m); /* b once, d unless cancelled, n */
    assert_true(serex_cancel_request(tok, 0));
    serex_cancel_release(tok);
    if (r->accepted[a->id])
        r->cancelled[a->id] = 1;
    if (r->accepted[c->id])
        r->cancelled[c->id] = 1;
    if (ha != NULL) {
        assert_int_equal(serex_timer_cancel_wait(ha, 0, &stopped), SEREX_OK);
        assert_false(stopped); /* the token did */
        serex_timer_release(ha);
    }
    assert_int_equal(serex_scheduler_pending(s), 0);
    assert_int_equal(serex_scheduler_advance(s, 20 * MS), SEREX_OK);
    assert_int_equal(test_run_all(m), 0);
    /* once, before the token; none if its run was refused (ENOMEM of the
     * manual executor's node: missed) */
    assert_true(atomic_load(&r->ran[b->id]) <= (r->accepted[b->id] ? 1 : 0));
    if (r->fail_at == 0)
        assert_int_equal(atomic_load(&r->ran[b->id]), 1);
    assert_int_equal(serex_destroy(face), SEREX_OK);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

/* --- the tests --- */

FAULTS_CASE(faults_manual_scheduler_loses_nothing,
            "scheduler (manual)", scenario_scheduler, 0)
FAULTS_CASE(faults_manual_scheduler_capped_refused_ends_loses_nothing,
            "scheduler (manual, capped, a refused run ends)",
            scenario_scheduler, 1)

FAULTS_CASE(faults_timer_tokens_and_notify_lose_nothing,
            "scheduler (tokens, cancel_notify)", scenario_timer_sync, 0)

FAULTS_MAIN(
    "faults_scheduler", FAULTS_TEST(faults_manual_scheduler_loses_nothing),
    FAULTS_TEST(faults_manual_scheduler_capped_refused_ends_loses_nothing),
    FAULTS_TEST(faults_timer_tokens_and_notify_lose_nothing))
