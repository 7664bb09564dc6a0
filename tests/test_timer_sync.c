/* SPDX-License-Identifier: MIT */
/*
 * test_timer_sync.c - cancel and wait (serex_timer_cancel_wait), cancel
 * and notify (serex_timer_cancel_notify), and timers that obey a token
 * (serex_schedule_token, serex_schedule_fixed_rate_token): issue 23.
 *
 * No timing: manual schedulers and manual executors decide when a run is
 * handed over; a run "in progress" is one a helper thread holds inside
 * its task on an event the test signals, and a waiter "still waiting" is
 * one whose mark the scheduler shows (serex__timer_has_waiters) while its
 * call has not returned. Order is asserted through atomics: a run sets
 * `finished` as its last act, and whatever was told it ended reads it.
 * The threaded cases at the end race cancels and tokens against runs on
 * a pool and check only what must hold in every interleaving.
 */
#include "test_util.h"

#include <stdlib.h>

#include "scheduler_internal.h" /* serex__timer_has_waiters */

/* A task that holds its run until told: started, then go, then done. */
struct held {
    serex_event *started, *go;
    atomic_int runs;     /* runs started */
    atomic_int finished; /* runs returned: the last thing a run does */
    atomic_int after;    /* runs started after `closed` was set */
    atomic_bool closed;  /* set once a cancel_wait said OK */
    bool hold;           /* wait for go (else run straight through) */
};

/* What a waiter thread saw: its status, and the run's end seen after. */
struct waiter {
    serex_timer *t;
    struct held *h;
    int rc;
    bool stopped;
    int seen_finished;
    bool woken; /* returned before its timeout */
    atomic_bool returned;
};

/* What a continuation (cancel_notify's fn) saw. */
struct note {
    struct held *h;
    atomic_int ran;
    int seen_finished;
};

struct fixture {
    serex_scheduler *s;
    serex_executor *m, *m2; /* manual executors */
    struct held h;
    struct note n;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    serex_scheduler_config c = {0};

    assert_non_null(f);
    c.manual = true;
    assert_int_equal(serex_scheduler_create(&c, &f->s), SEREX_OK);
    assert_int_equal(serex_manual_create(&f->m), SEREX_OK);
    assert_int_equal(serex_manual_create(&f->m2), SEREX_OK);
    assert_int_equal(serex_event_create(&f->h.started), SEREX_OK);
    assert_int_equal(serex_event_create(&f->h.go), SEREX_OK);
    f->n.h = &f->h;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    serex_executor *face = serex_scheduler_executor(f->s);

    serex_shutdown_now(face, NULL, NULL);
    serex_shutdown_now(f->m, NULL, NULL);
    serex_shutdown_now(f->m2, NULL, NULL);
    assert_int_equal(serex_destroy(face), SEREX_OK);
    assert_int_equal(serex_destroy(f->m), SEREX_OK);
    assert_int_equal(serex_destroy(f->m2), SEREX_OK);
    serex_event_destroy(f->h.started);
    serex_event_destroy(f->h.go);
    free(f);
    return 0;
}

static void held_task(void *arg)
{
    struct held *h = arg;

    atomic_fetch_add(&h->runs, 1);
    if (atomic_load(&h->closed))
        atomic_fetch_add(&h->after, 1);
    if (h->hold) {
        serex_event_signal(h->started);
        /* bounded: a test that never says go fails, it does not hang */
        (void)serex_event_wait(h->go, TEST_TIMEOUT);
    }
    atomic_fetch_add(&h->finished, 1); /* last */
}

static void note_task(void *arg)
{
    struct note *n = arg;

    n->seen_finished = atomic_load(&n->h->finished);
    atomic_fetch_add(&n->ran, 1);
}

static int run_one_main(void *arg)
{
    serex_manual_run_one(arg); /* the batch holding the held run */
    return 0;
}

static int waiter_main(void *arg)
{
    struct waiter *w = arg;

    int64_t start = test_now_ns();

    /* bounded: a lost wake-up ends in the last look after the deadline,
     * which the test tells from an end that came by wake-up */
    w->rc = serex_timer_cancel_wait(w->t, TEST_TIMEOUT, &w->stopped);
    w->woken = test_now_ns() - start < TEST_TIMEOUT;
    w->seen_finished = atomic_load(&w->h->finished);
    atomic_store(&w->returned, true);
    return 0;
}

/* Waits, bounded, until a waiter's mark is on @t: it is parked (or about
 * to), and its call cannot have returned. */
static void wait_for_waiter(serex_timer *t)
{
    int64_t end = test_now_ns() + TEST_TIMEOUT;

    while (!serex__timer_has_waiters(t)) {
        assert_true(test_now_ns() < end);
        serex__thread_yield();
    }
}

/* Schedules a held run of @t (one-shot, or fixed rate if @period) on
 * f->m, hands it over, and starts it on a helper thread, which is left
 * holding it: *@th to join once go is signalled. */
static serex_timer *start_held_run(struct fixture *f, int64_t period,
                                   serex__thread *th)
{
    serex_timer *t;

    f->h.hold = true;
    if (period == 0)
        assert_int_equal(serex_schedule(f->s, f->m, MS, held_task, &f->h, &t),
                         SEREX_OK);
    else
        assert_int_equal(serex_schedule_fixed_rate(f->s, f->m, MS, period,
                                                   held_task, &f->h, &t),
                         SEREX_OK);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_int_equal(serex__thread_start(th, run_one_main, f->m), SEREX_OK);
    assert_signalled(f->h.started);
    return t;
}

/* --- cancel_wait --- */

static void wait_bad_input_is_einval(void **state)
{
    struct fixture *f = *state;
    serex_timer *t;
    bool stopped = true;

    assert_int_equal(serex_timer_cancel_wait(NULL, 0, &stopped), SEREX_EINVAL);
    assert_false(stopped);
    assert_int_equal(serex_schedule(f->s, f->m, MS, held_task, &f->h, &t),
                     SEREX_OK);
    stopped = true;
    assert_int_equal(serex_timer_cancel_wait(t, -2, &stopped), SEREX_EINVAL);
    assert_false(stopped);
    assert_int_equal(serex_scheduler_pending(f->s), 1); /* not cancelled */
    assert_int_equal(serex_timer_cancel_wait(t, 0, NULL), SEREX_OK);
    serex_timer_release(t);
}

static void wait_on_pending_timers_stops_them(void **state)
{
    struct fixture *f = *state;
    serex_timer *one, *per;
    bool stopped = false;

    assert_int_equal(serex_schedule(f->s, f->m, MS, held_task, &f->h, &one),
                     SEREX_OK);
    assert_int_equal(
        serex_schedule_fixed_rate(f->s, f->m, MS, MS, held_task, &f->h, &per),
        SEREX_OK);
    assert_int_equal(serex_timer_cancel_wait(one, SEREX_FOREVER, &stopped),
                     SEREX_OK);
    assert_true(stopped);
    stopped = false;
    assert_int_equal(serex_timer_cancel_wait(per, 0, &stopped), SEREX_OK);
    assert_true(stopped);
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    assert_int_equal(serex_scheduler_advance(f->s, 10 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 0);
    assert_int_equal(atomic_load(&f->h.runs), 0);
    /* again: nothing to stop, nothing in progress */
    assert_int_equal(serex_timer_cancel_wait(one, 0, &stopped), SEREX_OK);
    assert_false(stopped);
    serex_timer_release(one);
    serex_timer_release(per);
}

static void wait_on_a_finished_one_shot_says_not_stopped(void **state)
{
    struct fixture *f = *state;
    serex_timer *t;
    bool stopped = true;

    assert_int_equal(serex_schedule(f->s, f->m, MS, held_task, &f->h, &t),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 1);
    assert_int_equal(serex_timer_cancel_wait(t, SEREX_FOREVER, &stopped),
                     SEREX_OK);
    assert_false(stopped);
    assert_int_equal(atomic_load(&f->h.finished), 1);
    serex_timer_release(t);
}

/* Handed to its target and not started: skipped, never waited for. */
static void wait_on_a_queued_run_skips_it(void **state)
{
    struct fixture *f = *state;
    serex_timer *t;
    bool stopped = false;

    assert_int_equal(serex_schedule(f->s, f->m, MS, held_task, &f->h, &t),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_int_equal(serex_timer_cancel_wait(t, 0, &stopped), SEREX_OK);
    assert_true(stopped);
    assert_int_equal(test_run_all(f->m), 1); /* the batch, which skips */
    assert_int_equal(atomic_load(&f->h.runs), 0);
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    serex_timer_release(t);
}

/* A task of the manual executor waits for a timer whose run is queued
 * behind it on the same executor: no deadlock, the run is skipped. */
struct behind {
    serex_timer *t;
    int rc;
    bool stopped;
};

static void wait_from_ahead_task(void *arg)
{
    struct behind *b = arg;

    b->rc = serex_timer_cancel_wait(b->t, TEST_TIMEOUT, &b->stopped);
}

static void wait_from_a_task_ahead_on_the_same_executor(void **state)
{
    struct fixture *f = *state;
    struct behind b = {0};

    assert_int_equal(serex_schedule(f->s, f->m, MS, held_task, &f->h, &b.t),
                     SEREX_OK);
    assert_int_equal(serex_execute(f->m, wait_from_ahead_task, &b), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 2);
    assert_int_equal(b.rc, SEREX_OK);
    assert_true(b.stopped);
    assert_int_equal(atomic_load(&f->h.runs), 0);
    serex_timer_release(b.t);
}

/* The heart: a run in progress on another thread is waited for, and the
 * waiter returns only after the run returned. */
static void wait_on_a_run_in_progress_returns_after_it(void **state)
{
    struct fixture *f = *state;
    struct waiter w = {0};
    serex__thread runner, wt;
    bool stopped = true;

    w.h = &f->h;
    w.t = start_held_run(f, 0, &runner);
    /* 0 only looks: in progress */
    assert_int_equal(serex_timer_cancel_wait(w.t, 0, &stopped),
                     SEREX_ETIMEDOUT);
    assert_false(stopped); /* a one-shot that started: too late */
    assert_false(serex__timer_has_waiters(w.t)); /* a look marks nothing */
    assert_int_equal(serex__thread_start(&wt, waiter_main, &w), SEREX_OK);
    wait_for_waiter(w.t);
    assert_false(atomic_load(&w.returned)); /* parked while it runs */
    assert_int_equal(atomic_load(&f->h.finished), 0);
    serex_event_signal(f->h.go);
    serex__thread_join(runner);
    serex__thread_join(wt);
    assert_int_equal(w.rc, SEREX_OK);
    assert_true(w.woken);
    assert_false(w.stopped);
    assert_int_equal(w.seen_finished, 1); /* the run had returned */
    assert_int_equal(atomic_load(&f->h.runs), 1);
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    serex_timer_release(w.t);
}

/* A fixed-rate run in progress: stopped (true), waited for, and no run
 * after it. */
static void wait_on_a_fixed_rate_run_in_progress(void **state)
{
    struct fixture *f = *state;
    struct waiter w = {0};
    serex__thread runner, wt;

    w.h = &f->h;
    w.t = start_held_run(f, MS, &runner);
    assert_int_equal(serex__thread_start(&wt, waiter_main, &w), SEREX_OK);
    wait_for_waiter(w.t);
    assert_false(atomic_load(&w.returned));
    serex_event_signal(f->h.go);
    serex__thread_join(runner);
    serex__thread_join(wt);
    assert_int_equal(w.rc, SEREX_OK);
    assert_true(w.woken);
    assert_true(w.stopped);
    assert_int_equal(w.seen_finished, 1);
    f->h.hold = false;
    assert_int_equal(serex_scheduler_advance(f->s, 50 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 0); /* never re-armed */
    assert_int_equal(atomic_load(&f->h.runs), 1);
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    serex_timer_release(w.t);
}

/* A timeout while the run is in progress, then a second call that waits:
 * the first call's cancel stands. */
static void wait_times_out_then_waits_again(void **state)
{
    struct fixture *f = *state;
    struct waiter w = {0};
    serex__thread runner, wt;
    bool stopped = false;

    w.h = &f->h;
    w.t = start_held_run(f, MS, &runner);
    assert_int_equal(serex_timer_cancel_wait(w.t, 1, &stopped),
                     SEREX_ETIMEDOUT);
    assert_true(stopped); /* a periodic run in progress: stopped */
    assert_int_equal(serex__thread_start(&wt, waiter_main, &w), SEREX_OK);
    wait_for_waiter(w.t);
    serex_event_signal(f->h.go);
    serex__thread_join(runner);
    serex__thread_join(wt);
    assert_int_equal(w.rc, SEREX_OK);
    assert_true(w.woken);
    assert_false(w.stopped); /* stopped by the first call */
    assert_int_equal(w.seen_finished, 1);
    serex_timer_release(w.t);
}

/* From its own run: EDEADLK at once, future runs stopped. */
struct self_call {
    serex_timer *t;
    int calls, rc;
    bool stopped;
    bool notify; /* cancel_notify instead */
    serex_executor *target;
    struct note *n;
};

static void self_cancel_task(void *arg)
{
    struct self_call *c = arg;

    if (c->calls++ > 0)
        return; /* a run after the first: counted, nothing else */
    if (c->notify) {
        c->rc = serex_timer_cancel_notify(c->t, c->target, note_task, c->n,
                                          &c->stopped);
        return;
    }
    /* 0 first, so a missing check fails instead of hanging */
    c->rc = serex_timer_cancel_wait(c->t, 0, &c->stopped);
    if (c->rc == SEREX_EDEADLK)
        c->rc = serex_timer_cancel_wait(c->t, SEREX_FOREVER, NULL);
}

static void wait_from_its_own_run_is_edeadlk(void **state)
{
    struct fixture *f = *state;
    struct self_call one = {0}, per = {0};

    assert_int_equal(
        serex_schedule(f->s, f->m, MS, self_cancel_task, &one, &one.t),
        SEREX_OK);
    assert_int_equal(serex_schedule_fixed_rate(f->s, f->m, MS, MS,
                                               self_cancel_task, &per, &per.t),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 1); /* one batch, two runs */
    assert_int_equal(one.rc, SEREX_EDEADLK);
    assert_false(one.stopped); /* itself, started */
    assert_int_equal(per.rc, SEREX_EDEADLK);
    assert_true(per.stopped); /* its future runs */
    assert_int_equal(serex_scheduler_advance(f->s, 20 * MS), SEREX_OK);
    test_run_all(f->m);
    assert_int_equal(per.calls, 1);
    /* the runs have returned: from outside, nothing left to wait for */
    assert_int_equal(serex_timer_cancel_wait(one.t, 0, NULL), SEREX_OK);
    assert_int_equal(serex_timer_cancel_wait(per.t, 0, NULL), SEREX_OK);
    serex_timer_release(one.t);
    serex_timer_release(per.t);
}

/* On the timer thread (target NULL: advance runs it here): the same. */
static void wait_from_its_own_run_on_the_timer_thread(void **state)
{
    struct fixture *f = *state;
    struct self_call c = {0};

    assert_int_equal(serex_schedule_fixed_rate(f->s, NULL, MS, MS,
                                               self_cancel_task, &c, &c.t),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(f->s, 10 * MS), SEREX_OK);
    assert_int_equal(c.rc, SEREX_EDEADLK);
    assert_true(c.stopped);
    assert_int_equal(c.calls, 1);
    serex_timer_release(c.t);
}

/* From code its run calls: a nested manual run of another executor. */
struct nested {
    serex_executor *inner;
    serex_timer *t;
    int rc;
};

static void nested_wait_task(void *arg)
{
    struct nested *n = arg;

    n->rc = serex_timer_cancel_wait(n->t, 0, NULL);
    if (n->rc == SEREX_EDEADLK) /* 0 first: see self_cancel_task */
        n->rc = serex_timer_cancel_wait(n->t, SEREX_FOREVER, NULL);
}

static void nested_outer_task(void *arg)
{
    struct nested *n = arg;

    serex_manual_run_one(n->inner); /* nested_wait_task, here */
}

static void wait_from_a_run_nested_in_its_own_is_edeadlk(void **state)
{
    struct fixture *f = *state;
    struct nested n = {f->m2, NULL, 0};

    assert_int_equal(
        serex_schedule(f->s, f->m, MS, nested_outer_task, &n, &n.t), SEREX_OK);
    assert_int_equal(serex_execute(f->m2, nested_wait_task, &n), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 1);
    assert_int_equal(n.rc, SEREX_EDEADLK);
    serex_timer_release(n.t);
}

/* --- cancel_notify --- */

static void notify_bad_input_is_einval(void **state)
{
    struct fixture *f = *state;
    serex_executor bad = {NULL};
    serex_timer *t;
    bool stopped = true;

    assert_int_equal(
        serex_timer_cancel_notify(NULL, f->m2, note_task, &f->n, &stopped),
        SEREX_EINVAL);
    assert_false(stopped);
    assert_int_equal(serex_schedule(f->s, f->m, MS, held_task, &f->h, &t),
                     SEREX_OK);
    assert_int_equal(serex_timer_cancel_notify(t, NULL, note_task, &f->n, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_timer_cancel_notify(t, &bad, note_task, &f->n, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_timer_cancel_notify(t, f->m2, NULL, &f->n, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_scheduler_pending(f->s), 1); /* not cancelled */
    assert_int_equal(test_run_all(f->m2), 0);
    serex_timer_release(t);
}

static void notify_on_a_pending_timer_posts_at_once(void **state)
{
    struct fixture *f = *state;
    serex_timer *t;
    bool stopped = false;

    assert_int_equal(serex_schedule(f->s, f->m, MS, held_task, &f->h, &t),
                     SEREX_OK);
    assert_int_equal(
        serex_timer_cancel_notify(t, f->m2, note_task, &f->n, &stopped),
        SEREX_OK);
    assert_true(stopped);
    serex_timer_release(t); /* at once: fine */
    assert_int_equal(test_run_all(f->m2), 1);
    assert_int_equal(atomic_load(&f->n.ran), 1);
    assert_int_equal(serex_scheduler_advance(f->s, 10 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 0);
    assert_int_equal(atomic_load(&f->h.runs), 0);
}

/* In progress: posted only once the run has returned, from its thread;
 * the handle released right after the call. */
static void notify_on_a_run_in_progress_posts_after_it(void **state)
{
    struct fixture *f = *state;
    serex__thread runner;
    serex_timer *t = start_held_run(f, MS, &runner);
    bool stopped = false;

    assert_int_equal(
        serex_timer_cancel_notify(t, f->m2, note_task, &f->n, &stopped),
        SEREX_OK);
    assert_true(stopped);
    assert_true(serex__timer_has_waiters(t));
    serex_timer_release(t);
    assert_int_equal(test_run_all(f->m2), 0); /* the run holds */
    serex_event_signal(f->h.go);
    serex__thread_join(runner);
    assert_int_equal(test_run_all(f->m2), 1);
    assert_int_equal(atomic_load(&f->n.ran), 1);
    assert_int_equal(f->n.seen_finished, 1);
    f->h.hold = false;
    assert_int_equal(serex_scheduler_advance(f->s, 50 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 0);
    assert_int_equal(atomic_load(&f->h.runs), 1);
}

/* Several continuations and a waiter on one run: each once, in order. */
static void order_task(void *arg)
{
    int *slot = arg;
    static int seq;

    *slot = ++seq;
}

static void notify_many_and_a_waiter_on_one_run(void **state)
{
    struct fixture *f = *state;
    struct waiter w = {0};
    serex__thread runner, wt;
    int order[3] = {0, 0, 0};

    w.h = &f->h;
    w.t = start_held_run(f, 0, &runner);
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            serex_timer_cancel_notify(w.t, f->m2, order_task, &order[i], NULL),
            SEREX_OK);
    assert_int_equal(serex__thread_start(&wt, waiter_main, &w), SEREX_OK);
    assert_false(atomic_load(&w.returned));
    serex_event_signal(f->h.go);
    serex__thread_join(runner);
    serex__thread_join(wt);
    assert_int_equal(w.rc, SEREX_OK);
    assert_true(w.woken);
    assert_int_equal(w.seen_finished, 1);
    assert_int_equal(test_run_all(f->m2), 3);
    assert_true(order[0] < order[1] && order[1] < order[2]);
    serex_timer_release(w.t);
}

/* From its own run: posted once the run has returned; no run after. */
static void notify_from_its_own_run_posts_after_it(void **state)
{
    struct fixture *f = *state;
    struct self_call c = {0};

    c.notify = true;
    c.target = f->m; /* behind the run, on its own executor */
    c.n = &f->n;
    assert_int_equal(serex_schedule_fixed_rate(f->s, f->m, MS, MS,
                                               self_cancel_task, &c, &c.t),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_true(serex_manual_run_one(f->m)); /* the run: files the note */
    assert_int_equal(c.rc, SEREX_OK);
    assert_true(c.stopped);
    assert_int_equal(atomic_load(&f->n.ran), 0); /* not inside the run */
    assert_int_equal(test_run_all(f->m), 1);
    assert_int_equal(atomic_load(&f->n.ran), 1);
    assert_int_equal(serex_scheduler_advance(f->s, 20 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 0);
    assert_int_equal(c.calls, 1);
    serex_timer_release(c.t);
}

/* A target that refuses: fn runs on the posting thread, at once from the
 * call (nothing in progress), or on the run's thread as it ends. */
static SEREX__THREAD_LOCAL int on_this_thread;

static void note_here_task(void *arg)
{
    int *where = arg;

    *where = on_this_thread;
}

static int run_one_marked_main(void *arg)
{
    on_this_thread = 2;
    serex_manual_run_one(arg);
    return 0;
}

static void notify_refused_target_runs_inline(void **state)
{
    struct fixture *f = *state;
    serex_timer *t;
    serex__thread runner;
    int where = 0;

    serex_shutdown(f->m2); /* refuses everything */
    on_this_thread = 1;
    assert_int_equal(serex_schedule(f->s, f->m, MS, held_task, &f->h, &t),
                     SEREX_OK);
    assert_int_equal(
        serex_timer_cancel_notify(t, f->m2, note_here_task, &where, NULL),
        SEREX_OK);
    assert_int_equal(where, 1); /* in the call */
    serex_timer_release(t);
    /* in progress: on the run's thread, once it ends */
    f->h.hold = true;
    assert_int_equal(serex_schedule(f->s, f->m, MS, held_task, &f->h, &t),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_int_equal(serex__thread_start(&runner, run_one_marked_main, f->m),
                     SEREX_OK);
    assert_signalled(f->h.started);
    where = 0;
    assert_int_equal(
        serex_timer_cancel_notify(t, f->m2, note_here_task, &where, NULL),
        SEREX_OK);
    assert_int_equal(where, 0);
    serex_event_signal(f->h.go);
    serex__thread_join(runner);
    assert_int_equal(where, 2);
    serex_timer_release(t);
}

/* A target that accepts and then takes it back: it runs there, never
 * reaching on_pending (promise 2a). */
static void never_pending(serex_fn fn, void *arg, void *ctx)
{
    (void)fn;
    (void)arg;
    (void)ctx;
    fail_msg("a continuation reached on_pending");
}

static void notify_taken_back_runs_inline(void **state)
{
    struct fixture *f = *state;
    serex_timer *t;

    assert_int_equal(serex_schedule(f->s, f->m, MS, held_task, &f->h, &t),
                     SEREX_OK);
    assert_int_equal(
        serex_timer_cancel_notify(t, f->m2, note_task, &f->n, NULL), SEREX_OK);
    assert_int_equal(atomic_load(&f->n.ran), 0);
    assert_int_equal(serex_shutdown_now(f->m2, never_pending, NULL), 1);
    assert_int_equal(atomic_load(&f->n.ran), 1);
    serex_timer_release(t);
}

/* --- tokens --- */

static serex_cancel *token_new(void)
{
    serex_cancel *c;

    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    return c;
}

static void token_bad_input_and_null_token(void **state)
{
    struct fixture *f = *state;
    serex_cancel *c = token_new();
    serex_timer *t = (serex_timer *)f;

    assert_int_equal(
        serex_schedule_token(NULL, f->m, MS, c, held_task, &f->h, &t),
        SEREX_EINVAL);
    assert_null(t);
    assert_int_equal(
        serex_schedule_token(f->s, f->m, -1, c, held_task, &f->h, NULL),
        SEREX_EINVAL);
    assert_int_equal(serex_schedule_token(f->s, f->m, MS, c, NULL, &f->h, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_schedule_fixed_rate_token(f->s, f->m, MS, 0, c,
                                                     held_task, &f->h, &t),
                     SEREX_EINVAL);
    assert_null(t);
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    /* no token: a plain timer */
    assert_int_equal(
        serex_schedule_token(f->s, f->m, MS, NULL, held_task, &f->h, NULL),
        SEREX_OK);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 1);
    assert_int_equal(atomic_load(&f->h.runs), 1);
    serex_cancel_release(c);
}

/* The token cancelled: pending timers stop at once (their slots freed),
 * with and without handles, one-shot and fixed rate. */
static void token_cancel_cancels_pending_timers(void **state)
{
    struct fixture *f = *state;
    serex_cancel *c = token_new();
    serex_timer *one, *per;
    bool stopped = true;

    assert_int_equal(
        serex_schedule_token(f->s, f->m, MS, c, held_task, &f->h, &one),
        SEREX_OK);
    assert_int_equal(serex_schedule_fixed_rate_token(f->s, f->m, MS, MS, c,
                                                     held_task, &f->h, &per),
                     SEREX_OK);
    assert_int_equal(
        serex_schedule_token(f->s, f->m, 2 * MS, c, held_task, &f->h, NULL),
        SEREX_OK);
    assert_int_equal(serex_schedule_fixed_rate_token(f->s, NULL, MS, MS, c,
                                                     held_task, &f->h, NULL),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_pending(f->s), 4);
    serex_cancel_release(c); /* the timers hold what they need */
    assert_true(serex_cancel_request(c, 0));
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    assert_int_equal(serex_scheduler_advance(f->s, 20 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 0);
    assert_int_equal(atomic_load(&f->h.runs), 0);
    /* stopped by the token, not by these calls */
    assert_int_equal(serex_timer_cancel_wait(one, 0, &stopped), SEREX_OK);
    assert_false(stopped);
    assert_false(serex_timer_cancel(per));
    serex_timer_release(one);
    serex_timer_release(per);
}

/* c is released by the caller above before its request: a token kept
 * alive by the timers' hooks, then by nothing once they are removed. A
 * child whose parent is cancelled cancels its timers too. */
static void token_child_of_a_cancelled_parent(void **state)
{
    struct fixture *f = *state;
    serex_cancel *parent = token_new(), *child;

    assert_int_equal(serex_cancel_create(parent, &child), SEREX_OK);
    assert_int_equal(
        serex_schedule_token(f->s, f->m, MS, child, held_task, &f->h, NULL),
        SEREX_OK);
    serex_cancel_release(child);
    assert_true(serex_cancel_request(parent, SEREX_ETIMEDOUT));
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 0);
    serex_cancel_release(parent);
}

static void token_cancelled_already_schedules_nothing(void **state)
{
    struct fixture *f = *state;
    serex_cancel *c = token_new(), *d = token_new();
    serex_timer *t = (serex_timer *)f;

    assert_true(serex_cancel_request(c, 0));
    assert_int_equal(
        serex_schedule_token(f->s, f->m, 0, c, held_task, &f->h, &t),
        SEREX_ECANCELED);
    assert_null(t);
    assert_true(serex_cancel_request(d, SEREX_ETIMEDOUT)); /* its cause */
    assert_int_equal(serex_schedule_fixed_rate_token(f->s, f->m, 0, MS, d,
                                                     held_task, &f->h, &t),
                     SEREX_ETIMEDOUT);
    assert_null(t);
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 0);
    serex_cancel_release(c);
    serex_cancel_release(d);
}

/* A fired one-shot: a later cancel of its token changes nothing. */
static void token_after_the_timer_fired_changes_nothing(void **state)
{
    struct fixture *f = *state;
    serex_cancel *c = token_new();
    serex_timer *t;
    bool stopped = true;

    assert_int_equal(
        serex_schedule_token(f->s, f->m, MS, c, held_task, &f->h, &t),
        SEREX_OK);
    assert_int_equal(
        serex_schedule_token(f->s, f->m, MS, c, held_task, &f->h, NULL),
        SEREX_OK);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 1);
    assert_int_equal(atomic_load(&f->h.runs), 2);
    assert_true(serex_cancel_request(c, 0));
    assert_false(serex_cancel_requested(NULL));
    assert_int_equal(serex_timer_cancel_wait(t, 0, &stopped), SEREX_OK);
    assert_false(stopped);
    assert_int_equal(atomic_load(&f->h.runs), 2);
    serex_timer_release(t);
    serex_cancel_release(c);
}

/* Handed to its target, not started: the token's cancel skips it. */
static void token_cancel_skips_a_queued_run(void **state)
{
    struct fixture *f = *state;
    serex_cancel *c = token_new();

    assert_int_equal(
        serex_schedule_token(f->s, f->m, MS, c, held_task, &f->h, NULL),
        SEREX_OK);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_true(serex_cancel_request(c, 0));
    assert_int_equal(test_run_all(f->m), 1); /* the batch, which skips */
    assert_int_equal(atomic_load(&f->h.runs), 0);
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    serex_cancel_release(c);
}

/* A periodic run that cancels its own token: it finishes, no run after. */
struct tok_self {
    serex_cancel *c;
    int runs;
};

static void tok_self_task(void *arg)
{
    struct tok_self *ts = arg;

    if (++ts->runs == 2)
        serex_cancel_request(ts->c, 0);
}

static void token_cancelled_by_its_own_periodic_run(void **state)
{
    struct fixture *f = *state;
    struct tok_self ts = {token_new(), 0};

    assert_int_equal(serex_schedule_fixed_rate_token(f->s, f->m, MS, MS, ts.c,
                                                     tok_self_task, &ts, NULL),
                     SEREX_OK);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
        test_run_all(f->m);
    }
    assert_int_equal(ts.runs, 2);
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    serex_cancel_release(ts.c);
}

/* A run in progress when the token is cancelled: it finishes; a waiter
 * on the handle is told when. */
static void token_cancel_during_a_run_then_wait(void **state)
{
    struct fixture *f = *state;
    serex_cancel *c = token_new();
    struct waiter w = {0};
    serex__thread runner, wt;

    w.h = &f->h;
    f->h.hold = true;
    assert_int_equal(serex_schedule_fixed_rate_token(f->s, f->m, MS, MS, c,
                                                     held_task, &f->h, &w.t),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_int_equal(serex__thread_start(&runner, run_one_main, f->m),
                     SEREX_OK);
    assert_signalled(f->h.started);
    assert_true(serex_cancel_request(c, 0));
    assert_int_equal(serex__thread_start(&wt, waiter_main, &w), SEREX_OK);
    wait_for_waiter(w.t);
    assert_false(atomic_load(&w.returned));
    serex_event_signal(f->h.go);
    serex__thread_join(runner);
    serex__thread_join(wt);
    assert_int_equal(w.rc, SEREX_OK);
    assert_true(w.woken);
    assert_false(w.stopped); /* the token stopped it */
    assert_int_equal(w.seen_finished, 1);
    f->h.hold = false;
    assert_int_equal(serex_scheduler_advance(f->s, 20 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->m), 0);
    assert_int_equal(atomic_load(&f->h.runs), 1);
    serex_timer_release(w.t);
    serex_cancel_release(c);
}

/* Shutdown ends token timers; handles never released end with the
 * scheduler; either way the token goes when its last user does (ASan's
 * leak check), and cancelling it after the scheduler is gone is safe. */
static void token_timers_end_with_shutdown_and_destroy(void **state)
{
    struct fixture *f = *state;
    serex_cancel *c = token_new();
    serex_timer *kept;
    struct test_pending tp = {0};
    serex_fn fns[4];
    void *args[4];

    tp.cap = 4;
    tp.fns = fns;
    tp.args = args;
    assert_int_equal(
        serex_schedule_token(f->s, f->m, SEC, c, held_task, &f->h, NULL),
        SEREX_OK);
    assert_int_equal(serex_schedule_fixed_rate_token(f->s, f->m, SEC, MS, c,
                                                     held_task, &f->h, NULL),
                     SEREX_OK);
    assert_int_equal(
        serex_schedule_token(f->s, f->m, SEC, c, held_task, &f->h, &kept),
        SEREX_OK);
    assert_int_equal(serex_shutdown_now(serex_scheduler_executor(f->s),
                                        test_pending_cb, &tp),
                     2);
    assert_int_equal(tp.n, 2);
    assert_int_equal(serex_destroy(serex_scheduler_executor(f->s)), SEREX_OK);
    f->s = NULL; /* kept was never released: it ended with it */
    assert_true(serex_cancel_request(c, 0));
    serex_cancel_release(c);
    {
        serex_scheduler_config cfg = {0};

        cfg.manual = true; /* for teardown */
        assert_int_equal(serex_scheduler_create(&cfg, &f->s), SEREX_OK);
    }
}

/* --- threaded: runs on a pool, racing the calls --- */

#define RACE_N 400

struct race_timer {
    atomic_int inprog; /* runs in progress */
    atomic_int runs;
    atomic_int after; /* runs started after closed */
    atomic_bool closed;
};

static void race_task(void *arg)
{
    struct race_timer *r = arg;

    atomic_fetch_add(&r->inprog, 1);
    if (atomic_load(&r->closed))
        atomic_fetch_add(&r->after, 1);
    atomic_fetch_add(&r->runs, 1);
    serex__thread_yield();
    atomic_fetch_sub(&r->inprog, 1);
}

/* Fixed-rate timers on a pool, cancelled and waited for while they run:
 * when the wait says OK, no run is in progress and none starts after. */
static void threaded_wait_races_runs_on_a_pool(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s;
    serex_executor *pool;
    serex_pool_config pc = {0};
    struct race_timer *r = calloc(RACE_N, sizeof *r);
    serex_timer **t = calloc(RACE_N, sizeof *t);

    (void)f;
    assert_non_null(r);
    assert_non_null(t);
    pc.threads = 2;
    assert_int_equal(serex_pool_create(&pc, &pool), SEREX_OK);
    assert_int_equal(serex_scheduler_create(NULL, &s), SEREX_OK);
    for (int i = 0; i < RACE_N; i++)
        assert_int_equal(serex_schedule_fixed_rate(s, pool, i % 7 * 10000,
                                                   20000, race_task, &r[i],
                                                   &t[i]),
                         SEREX_OK);
    for (int i = 0; i < RACE_N; i++) {
        if (i % 3 == 0) {
            assert_int_equal(serex_timer_cancel_wait(t[i], TEST_TIMEOUT, NULL),
                             SEREX_OK);
            assert_int_equal(atomic_load(&r[i].inprog), 0);
        } else {
            assert_int_equal(
                serex_timer_cancel_notify(t[i], pool, free, calloc(1, 8), NULL),
                SEREX_OK);
        }
        atomic_store(&r[i].closed, true);
    }
    for (int i = 0; i < RACE_N; i++)
        serex_timer_release(t[i]);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    for (int i = 0; i < RACE_N; i += 3)
        assert_int_equal(atomic_load(&r[i].after), 0);
    free(r);
    free(t);
}

/* Token timers on a threaded scheduler and a pool, with and without
 * handles, their tokens cancelled by another thread while they fire. */
struct canceller {
    serex_cancel **c;
    int n;
};

static int canceller_main(void *arg)
{
    struct canceller *k = arg;

    for (int i = k->n - 1; i >= 0; i--)
        serex_cancel_request(k->c[i], 0);
    return 0;
}

static void threaded_tokens_race_firing(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s;
    serex_executor *pool;
    serex_pool_config pc = {0};
    struct race_timer *r = calloc(RACE_N, sizeof *r);
    serex_timer **t = calloc(RACE_N, sizeof *t);
    serex_cancel **c = calloc(RACE_N / 4, sizeof *c);
    struct canceller k = {c, RACE_N / 4};
    serex__thread th;

    (void)f;
    assert_non_null(r);
    assert_non_null(t);
    assert_non_null(c);
    pc.threads = 2;
    assert_int_equal(serex_pool_create(&pc, &pool), SEREX_OK);
    assert_int_equal(serex_scheduler_create(NULL, &s), SEREX_OK);
    for (int i = 0; i < RACE_N / 4; i++)
        c[i] = token_new();
    assert_int_equal(serex__thread_start(&th, canceller_main, &k), SEREX_OK);
    for (int i = 0; i < RACE_N; i++) {
        serex_cancel *tok = c[i % (RACE_N / 4)];
        int rc = (i % 2)
                     ? serex_schedule_token(s, pool, i % 5 * 10000, tok,
                                            race_task, &r[i],
                                            (i % 4 == 1) ? &t[i] : NULL)
                     : serex_schedule_fixed_rate_token(
                           s, (i % 8 == 0) ? NULL : pool, i % 5 * 10000, 30000,
                           tok, race_task, &r[i], (i % 4 == 0) ? &t[i] : NULL);

        assert_true(rc == SEREX_OK || rc == SEREX_ECANCELED);
        if (rc != SEREX_OK)
            assert_null(t[i]);
    }
    serex__thread_join(th);
    for (int i = 0; i < RACE_N; i++) {
        if (t[i] == NULL)
            continue;
        assert_int_equal(serex_timer_cancel_wait(t[i], TEST_TIMEOUT, NULL),
                         SEREX_OK);
        assert_int_equal(atomic_load(&r[i].inprog), 0);
        atomic_store(&r[i].closed, true);
        serex_timer_release(t[i]);
    }
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    for (int i = 0; i < RACE_N; i++) {
        if (i % 2)
            assert_true(atomic_load(&r[i].runs) <= 1);
        assert_int_equal(atomic_load(&r[i].after), 0);
    }
    for (int i = 0; i < RACE_N / 4; i++)
        serex_cancel_release(c[i]);
    free(r);
    free(t);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(wait_bad_input_is_einval),
        T(wait_on_pending_timers_stops_them),
        T(wait_on_a_finished_one_shot_says_not_stopped),
        T(wait_on_a_queued_run_skips_it),
        T(wait_from_a_task_ahead_on_the_same_executor),
        T(wait_on_a_run_in_progress_returns_after_it),
        T(wait_on_a_fixed_rate_run_in_progress),
        T(wait_times_out_then_waits_again),
        T(wait_from_its_own_run_is_edeadlk),
        T(wait_from_its_own_run_on_the_timer_thread),
        T(wait_from_a_run_nested_in_its_own_is_edeadlk),
        T(notify_bad_input_is_einval),
        T(notify_on_a_pending_timer_posts_at_once),
        T(notify_on_a_run_in_progress_posts_after_it),
        T(notify_many_and_a_waiter_on_one_run),
        T(notify_from_its_own_run_posts_after_it),
        T(notify_refused_target_runs_inline),
        T(notify_taken_back_runs_inline),
        T(token_bad_input_and_null_token),
        T(token_cancel_cancels_pending_timers),
        T(token_child_of_a_cancelled_parent),
        T(token_cancelled_already_schedules_nothing),
        T(token_after_the_timer_fired_changes_nothing),
        T(token_cancel_skips_a_queued_run),
        T(token_cancelled_by_its_own_periodic_run),
        T(token_cancel_during_a_run_then_wait),
        T(token_timers_end_with_shutdown_and_destroy),
        T(threaded_wait_races_runs_on_a_pool),
        T(threaded_tokens_race_firing),
#undef T
    };

    return cmocka_run_group_tests_name("timer_sync", tests, NULL, NULL);
}
