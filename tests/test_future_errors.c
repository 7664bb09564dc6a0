/* SPDX-License-Identifier: MIT */
/*
 * test_future_errors.c - futures that carry errors and time out (future.h,
 * issue 23): a task's error, errors passing down then-chains, promises,
 * a token's cancel_on and wait_token, deadlines on a manual clock (also
 * ending a running call's future), and serex_future_all / _any with and
 * without SEREX_FUTURE_CANCEL_REST. All on manual executors: the order of
 * everything is the test's.
 */
#include "test_util.h"

#include <stdatomic.h>

#include "thread_internal.h" /* serex__thread_start */

#define ERR_A (-100)
#define ERR_B (-200)

static void *fail_a(void *arg)
{
    assert_int_equal(serex_future_set_error(ERR_A), SEREX_OK);
    return arg; /* dropped: the error wins */
}

static void *ret_arg(void *arg)
{
    return arg;
}

static atomic_int calls;

static void *count_call(void *arg)
{
    atomic_fetch_add(&calls, 1);
    return arg;
}

static void task_error_ends_its_future(void **state)
{
    serex_executor *m;
    serex_future *f, *next;
    int x;

    (void)state;
    atomic_store(&calls, 0);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    /* not inside a task: refused */
    assert_int_equal(serex_future_set_error(ERR_A), SEREX_EINVAL);
    assert_int_equal(serex_submit(m, fail_a, &x, &f), SEREX_OK);
    assert_int_equal(serex_future_then(f, m, count_call, &next), SEREX_OK);
    assert_int_equal(serex_future_error(f), 0); /* not ended */
    assert_int_equal(serex_manual_run_pending(m), 1);
    assert_int_equal(serex_future_wait(f, 0), ERR_A);
    assert_int_equal(serex_future_error(f), ERR_A);
    assert_null(serex_future_value(f));
    /* the error passed down: the next call never runs */
    assert_int_equal(serex_future_wait(next, 0), ERR_A);
    assert_int_equal(serex_manual_run_pending(m), 0);
    assert_int_equal(atomic_load(&calls), 0);
    serex_future_release(next);
    serex_future_release(f);
    /* a value: error 0 */
    assert_int_equal(serex_submit(m, ret_arg, &x, &f), SEREX_OK);
    assert_int_equal(serex_manual_run_pending(m), 1);
    assert_int_equal(serex_future_error(f), 0);
    assert_ptr_equal(serex_future_value(f), &x);
    serex_future_release(f);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

static void *bad_errors(void *arg)
{
    (void)arg;
    assert_int_equal(serex_future_set_error(0), SEREX_EINVAL);
    assert_int_equal(serex_future_set_error(1), SEREX_EINVAL);
    assert_int_equal(serex_future_set_error(SEREX_ERROR_MIN - 1), SEREX_EINVAL);
    assert_int_equal(serex_future_set_error(ERR_A), SEREX_OK);
    assert_int_equal(serex_future_set_error(ERR_B), SEREX_OK); /* last */
    return NULL;
}

static void set_error_last_call_wins(void **state)
{
    serex_executor *m;
    serex_future *f;

    (void)state;
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_submit(m, bad_errors, NULL, &f), SEREX_OK);
    assert_int_equal(serex_manual_run_pending(m), 1);
    assert_int_equal(serex_future_wait(f, 0), ERR_B);
    serex_future_release(f);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

struct seen {
    serex_future *f;
    int rc;
    atomic_int n;
};

static void seen_cb(void *arg)
{
    struct seen *s = arg;

    s->rc = serex_future_wait(s->f, 0); /* answers at once inside */
    atomic_fetch_add(&s->n, 1);
}

static void promise_complete_and_fail(void **state)
{
    serex_executor *m;
    serex_future *p, *next;
    struct seen s = {0};
    int x;

    (void)state;
    atomic_store(&calls, 0);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_promise_create(&p), SEREX_OK);
    s.f = p;
    assert_int_equal(serex_future_on_done(p, m, seen_cb, &s), SEREX_OK);
    assert_int_equal(serex_future_then(p, m, count_call, &next), SEREX_OK);
    assert_int_equal(serex_future_wait(p, 0), SEREX_ETIMEDOUT);
    assert_true(serex_future_complete(p, &x));
    assert_false(serex_future_complete(p, NULL)); /* once */
    assert_false(serex_future_fail(p, ERR_A));
    assert_false(serex_future_cancel(p));
    assert_int_equal(serex_future_wait(p, 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(p), &x);
    assert_int_equal(serex_manual_run_pending(m), 2);
    assert_int_equal(s.rc, SEREX_OK);
    assert_int_equal(atomic_load(&calls), 1);
    assert_ptr_equal(serex_future_value(next), &x);
    serex_future_release(next);
    serex_future_release(p);

    assert_int_equal(serex_promise_create(&p), SEREX_OK);
    assert_false(serex_future_fail(p, 0)); /* out of range */
    assert_false(serex_future_fail(p, 5));
    assert_true(serex_future_fail(p, ERR_B));
    assert_int_equal(serex_future_wait(p, SEREX_FOREVER), ERR_B);
    serex_future_release(p);

    /* a future with a task is not a promise */
    assert_int_equal(serex_submit(m, ret_arg, NULL, &p), SEREX_OK);
    assert_false(serex_future_complete(p, &x));
    assert_false(serex_future_fail(p, ERR_A));
    assert_int_equal(serex_manual_run_pending(m), 1);
    assert_null(serex_future_value(p));
    serex_future_release(p);
    assert_false(serex_future_complete(NULL, NULL));
    assert_int_equal(serex_promise_create(NULL), SEREX_EINVAL);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

/* Released before it ended: broken, its continuations hear ECANCELED. */
static void released_promise_is_broken(void **state)
{
    serex_executor *m;
    serex_future *p, *next;
    struct seen s = {0};

    (void)state;
    atomic_store(&calls, 0);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_promise_create(&p), SEREX_OK);
    assert_int_equal(serex_future_then(p, m, count_call, &next), SEREX_OK);
    s.f = next;
    assert_int_equal(serex_future_on_done(next, m, seen_cb, &s), SEREX_OK);
    serex_future_release(p);
    assert_int_equal(serex_future_wait(next, 0), SEREX_ECANCELED);
    assert_int_equal(serex_manual_run_pending(m), 1);
    assert_int_equal(s.rc, SEREX_ECANCELED);
    assert_int_equal(atomic_load(&calls), 0);
    serex_future_release(next);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

static void cancel_on_a_token(void **state)
{
    serex_executor *m;
    serex_cancel *tok;
    serex_future *a, *b, *c;
    int x;

    (void)state;
    atomic_store(&calls, 0);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &tok), SEREX_OK);
    assert_int_equal(serex_submit(m, count_call, &x, &a), SEREX_OK);
    assert_int_equal(serex_submit(m, count_call, &x, &b), SEREX_OK);
    assert_int_equal(serex_future_cancel_on(a, tok), SEREX_OK);
    assert_int_equal(serex_future_cancel_on(b, tok), SEREX_OK);
    assert_true(serex_manual_run_one(m)); /* a runs: its link is gone */
    assert_int_equal(serex_future_wait(a, 0), SEREX_OK);
    assert_true(serex_cancel_request(tok, ERR_A));
    assert_int_equal(serex_future_wait(b, 0), ERR_A); /* never started */
    assert_int_equal(serex_manual_run_pending(m), 1); /* skipped */
    assert_int_equal(atomic_load(&calls), 1);
    /* cancelled already: at once */
    assert_int_equal(serex_submit(m, count_call, &x, &c), SEREX_OK);
    assert_int_equal(serex_future_cancel_on(c, tok), SEREX_OK);
    assert_int_equal(serex_future_wait(c, 0), ERR_A);
    assert_int_equal(serex_manual_run_pending(m), 1);
    assert_int_equal(atomic_load(&calls), 1);
    assert_int_equal(serex_future_cancel_on(NULL, tok), SEREX_EINVAL);
    assert_int_equal(serex_future_cancel_on(c, NULL), SEREX_EINVAL);
    serex_cancel_release(tok); /* before the futures: links hold it */
    serex_future_release(a);
    serex_future_release(b);
    serex_future_release(c);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

/* The token released first, the future ended later: the link lets go
 * of both (LeakSanitizer sees a link left behind). */
static void cancel_on_outlives_the_token_handle(void **state)
{
    serex_executor *m;
    serex_cancel *tok;
    serex_future *f;

    (void)state;
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &tok), SEREX_OK);
    assert_int_equal(serex_submit(m, ret_arg, NULL, &f), SEREX_OK);
    assert_int_equal(serex_future_cancel_on(f, tok), SEREX_OK);
    serex_cancel_release(tok);
    serex_future_release(f);
    assert_int_equal(serex_manual_run_pending(m), 1);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

/* A deadline on a manual clock: not started, the call never runs; ended
 * first, the timer goes; running, its future still ends on time. */
struct held {
    serex_event *in, *go;
};

static void *held_call(void *arg)
{
    struct held *h = arg;

    serex_event_signal(h->in);
    assert_int_equal(serex_event_wait(h->go, SEREX_FOREVER), SEREX_OK);
    return h;
}

static void deadline_ends_with_etimedout(void **state)
{
    serex_scheduler_config cfg = {.manual = true};
    serex_scheduler *s;
    serex_executor *m, *pool;
    serex_future *f;
    struct held h;

    (void)state;
    atomic_store(&calls, 0);
    assert_int_equal(serex_scheduler_create(&cfg, &s), SEREX_OK);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    /* not started by the deadline */
    assert_int_equal(serex_submit(m, count_call, NULL, &f), SEREX_OK);
    assert_int_equal(serex_future_deadline(f, s, 100 * MS), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 99 * MS), SEREX_OK);
    assert_int_equal(serex_future_wait(f, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_future_error(f), 0); /* the wait ran out */
    assert_int_equal(serex_scheduler_advance(s, MS), SEREX_OK);
    assert_int_equal(serex_future_error(f), SEREX_ETIMEDOUT);
    assert_int_equal(serex_manual_run_pending(m), 1);
    assert_int_equal(atomic_load(&calls), 0);
    serex_future_release(f);
    /* ended first: the timer is cancelled */
    assert_int_equal(serex_submit(m, count_call, NULL, &f), SEREX_OK);
    assert_int_equal(serex_future_deadline(f, s, SEC), SEREX_OK);
    assert_int_equal(serex_scheduler_pending(s), 1);
    assert_int_equal(serex_manual_run_pending(m), 1);
    assert_int_equal(serex_future_wait(f, 0), SEREX_OK);
    assert_int_equal(serex_scheduler_pending(s), 0);
    serex_future_release(f);
    /* running when due: ends with ETIMEDOUT; the late value is dropped */
    assert_int_equal(serex_pool_create(NULL, &pool), SEREX_OK);
    assert_int_equal(serex_event_create(&h.in), SEREX_OK);
    assert_int_equal(serex_event_create(&h.go), SEREX_OK);
    assert_int_equal(serex_submit(pool, held_call, &h, &f), SEREX_OK);
    assert_int_equal(serex_future_deadline(f, s, 10 * MS), SEREX_OK);
    assert_int_equal(serex_event_wait(h.in, SEREX_FOREVER), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 10 * MS), SEREX_OK);
    assert_int_equal(serex_future_wait(f, 0), SEREX_ETIMEDOUT);
    serex_event_signal(h.go);
    assert_int_equal(serex_destroy(pool), SEREX_OK); /* the call ended */
    assert_int_equal(serex_future_wait(f, 0), SEREX_ETIMEDOUT);
    assert_null(serex_future_value(f));
    serex_future_release(f);
    serex_event_destroy(h.in);
    serex_event_destroy(h.go);
    assert_int_equal(serex_future_deadline(NULL, s, 0), SEREX_EINVAL);
    assert_int_equal(serex_destroy(m), SEREX_OK);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
}

/* wait_token: a token cancelled by another thread ends the wait with its
 * cause; the future is left as it is. */
struct canceller {
    serex_cancel *tok;
};

static int cancel_thread(void *arg)
{
    struct canceller *c = arg;

    test_sleep_ns(MS); /* most often after the waiter parked */
    assert_true(serex_cancel_request(c->tok, ERR_B));
    return 0;
}

static void wait_token_ends_on_cancel(void **state)
{
    serex_executor *m;
    serex_future *f;
    struct canceller c;
    serex__thread t;

    (void)state;
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &c.tok), SEREX_OK);
    assert_int_equal(serex_submit(m, ret_arg, NULL, &f), SEREX_OK);
    assert_int_equal(serex_future_wait_token(f, 0, c.tok), SEREX_ETIMEDOUT);
    assert_int_equal(serex__thread_start(&t, cancel_thread, &c), SEREX_OK);
    assert_int_equal(serex_future_wait_token(f, SEREX_FOREVER, c.tok), ERR_B);
    serex__thread_join(t);
    assert_int_equal(serex_future_wait(f, 0), SEREX_ETIMEDOUT); /* as is */
    assert_int_equal(serex_future_wait_token(f, SEREX_FOREVER, c.tok), ERR_B);
    assert_int_equal(serex_manual_run_pending(m), 1);
    /* ended: its own answer, whatever the token */
    assert_int_equal(serex_future_wait_token(f, SEREX_FOREVER, c.tok),
                     SEREX_OK);
    assert_int_equal(serex_future_wait_token(f, 0, NULL), SEREX_OK);
    assert_int_equal(serex_future_wait_token(NULL, 0, c.tok), SEREX_EINVAL);
    serex_future_release(f);
    serex_cancel_release(c.tok);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

static void all_waits_for_every_input(void **state)
{
    serex_executor *m;
    serex_future *fs[3], *all;
    int x[3];

    (void)state;
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(serex_submit(m, ret_arg, &x[i], &fs[i]), SEREX_OK);
    assert_int_equal(serex_future_all(fs, 3, 0, &all), SEREX_OK);
    for (int i = 0; i < 3; i++)
        serex_future_release(fs[i]); /* the combinator holds them */
    assert_true(serex_manual_run_one(m));
    assert_true(serex_manual_run_one(m));
    assert_int_equal(serex_future_wait(all, 0), SEREX_ETIMEDOUT);
    assert_true(serex_manual_run_one(m));
    assert_int_equal(serex_future_wait(all, 0), SEREX_OK);
    assert_null(serex_future_value(all));
    serex_future_release(all);
    /* nothing: ended at once */
    assert_int_equal(serex_future_all(NULL, 0, 0, &all), SEREX_OK);
    assert_int_equal(serex_future_wait(all, 0), SEREX_OK);
    serex_future_release(all);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

static void all_reports_the_first_error(void **state)
{
    serex_executor *m;
    serex_future *fs[3], *all, *fast;
    int x;

    (void)state;
    atomic_store(&calls, 0);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    /* without CANCEL_REST: ends when all have, with the first error */
    assert_int_equal(serex_submit(m, fail_a, &x, &fs[0]), SEREX_OK);
    assert_int_equal(serex_promise_create(&fs[1]), SEREX_OK);
    assert_int_equal(serex_submit(m, count_call, &x, &fs[2]), SEREX_OK);
    assert_int_equal(serex_future_all(fs, 3, 0, &all), SEREX_OK);
    /* (fs[1], a promise, is "not started" too: keep it out of fast) */
    assert_int_equal(serex_future_all((serex_future *[]){fs[0], fs[2]}, 2,
                                      SEREX_FUTURE_CANCEL_REST, &fast),
                     SEREX_OK);
    assert_true(serex_manual_run_one(m)); /* fs[0] fails */
    /* fail-fast: at once, and the unstarted fs[2] is cancelled */
    assert_int_equal(serex_future_wait(fast, 0), ERR_A);
    assert_int_equal(serex_future_wait(fs[2], 0), SEREX_ECANCELED);
    assert_int_equal(serex_future_wait(all, 0), SEREX_ETIMEDOUT);
    assert_true(serex_future_fail(fs[1], ERR_B));       /* a later error */
    assert_int_equal(serex_future_wait(all, 0), ERR_A); /* the first */
    assert_int_equal(serex_manual_run_pending(m), 1);   /* skipped */
    assert_int_equal(atomic_load(&calls), 0);
    for (int i = 0; i < 3; i++)
        serex_future_release(fs[i]);
    serex_future_release(all);
    serex_future_release(fast);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

static void any_takes_the_first_value(void **state)
{
    serex_executor *m;
    serex_future *fs[3], *any, *cancel_any;
    int x[3];

    (void)state;
    atomic_store(&calls, 0);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_submit(m, fail_a, &x[0], &fs[0]), SEREX_OK);
    assert_int_equal(serex_submit(m, ret_arg, &x[1], &fs[1]), SEREX_OK);
    assert_int_equal(serex_submit(m, count_call, &x[2], &fs[2]), SEREX_OK);
    assert_int_equal(serex_future_any(fs, 3, 0, &any), SEREX_OK);
    assert_int_equal(
        serex_future_any(fs, 3, SEREX_FUTURE_CANCEL_REST, &cancel_any),
        SEREX_OK);
    assert_true(serex_manual_run_one(m)); /* a failure is not a win */
    assert_int_equal(serex_future_wait(any, 0), SEREX_ETIMEDOUT);
    assert_true(serex_manual_run_one(m)); /* x[1] wins */
    assert_int_equal(serex_future_wait(any, 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(any), &x[1]);
    assert_ptr_equal(serex_future_value(cancel_any), &x[1]);
    assert_int_equal(serex_future_wait(fs[2], 0), SEREX_ECANCELED);
    assert_int_equal(serex_manual_run_pending(m), 1);
    assert_int_equal(atomic_load(&calls), 0);
    for (int i = 0; i < 3; i++)
        serex_future_release(fs[i]);
    serex_future_release(any);
    serex_future_release(cancel_any);

    /* every input fails: the first error */
    assert_int_equal(serex_promise_create(&fs[0]), SEREX_OK);
    assert_int_equal(serex_promise_create(&fs[1]), SEREX_OK);
    assert_int_equal(serex_future_any(fs, 2, 0, &any), SEREX_OK);
    assert_true(serex_future_fail(fs[1], ERR_B));
    assert_true(serex_future_fail(fs[0], ERR_A));
    assert_int_equal(serex_future_wait(any, 0), ERR_B);
    serex_future_release(fs[0]);
    serex_future_release(fs[1]);
    serex_future_release(any);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

static void combinators_bad_input(void **state)
{
    serex_future *p, *out = (serex_future *)&out;
    serex_future *none[1] = {NULL};

    (void)state;
    assert_int_equal(serex_promise_create(&p), SEREX_OK);
    assert_int_equal(serex_future_all(&p, 1, 0, NULL), SEREX_EINVAL);
    assert_int_equal(serex_future_all(NULL, 1, 0, &out), SEREX_EINVAL);
    assert_null(out);
    assert_int_equal(serex_future_all(none, 1, 0, &out), SEREX_EINVAL);
    assert_int_equal(serex_future_all(&p, 1, 2, &out), SEREX_EINVAL);
    assert_int_equal(serex_future_any(NULL, 0, 0, &out), SEREX_EINVAL);
    assert_int_equal(serex_future_any(&p, 1, 0x80, &out), SEREX_EINVAL);
    assert_true(serex_future_complete(p, NULL)); /* unchanged so far */
    serex_future_release(p);
}

/* Already ended inputs: the result is there from the call. */
static void combinators_of_ended_inputs(void **state)
{
    serex_future *fs[2], *all, *any;
    int x;

    (void)state;
    assert_int_equal(serex_promise_create(&fs[0]), SEREX_OK);
    assert_int_equal(serex_promise_create(&fs[1]), SEREX_OK);
    assert_true(serex_future_complete(fs[0], &x));
    assert_true(serex_future_fail(fs[1], ERR_A));
    assert_int_equal(serex_future_all(fs, 2, 0, &all), SEREX_OK);
    assert_int_equal(serex_future_any(fs, 2, 0, &any), SEREX_OK);
    assert_int_equal(serex_future_wait(all, 0), ERR_A);
    assert_int_equal(serex_future_wait(any, 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(any), &x);
    serex_future_release(fs[0]);
    serex_future_release(fs[1]);
    serex_future_release(all);
    serex_future_release(any);
}

/* CANCEL_REST over a then-future whose source has not ended: the
 * then-future is a record on its source's list, and cancelling it must
 * leave that list whole (it corrupted it before: the fuzzer). */
static void cancel_rest_over_a_then_future(void **state)
{
    serex_executor *m;
    serex_future *src, *q, *t, *all, *ins[2];
    struct seen s = {0};

    (void)state;
    atomic_store(&calls, 0);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_promise_create(&src), SEREX_OK);
    assert_int_equal(serex_promise_create(&q), SEREX_OK);
    s.f = src;
    assert_int_equal(serex_future_on_done(src, m, seen_cb, &s), SEREX_OK);
    /* newer than the on_done: t links to it on src's list */
    assert_int_equal(serex_future_then(src, m, count_call, &t), SEREX_OK);
    ins[0] = t;
    ins[1] = q;
    assert_int_equal(serex_future_all(ins, 2, SEREX_FUTURE_CANCEL_REST, &all),
                     SEREX_OK);
    assert_true(serex_future_fail(q, ERR_A));
    assert_int_equal(serex_future_wait(all, 0), ERR_A);
    assert_int_equal(serex_future_wait(t, 0), SEREX_ECANCELED);
    assert_true(serex_future_complete(src, NULL));    /* its list: whole */
    assert_int_equal(serex_manual_run_pending(m), 1); /* on_done only */
    assert_int_equal(atomic_load(&s.n), 1);
    assert_int_equal(s.rc, SEREX_OK);
    assert_int_equal(atomic_load(&calls), 0);
    serex_future_release(all);
    serex_future_release(t);
    serex_future_release(q);
    serex_future_release(src);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

/* Inputs ended by pool tasks on several threads: each combinator ends
 * once, with every input counted (TSan sees the races). */
#define RACE_N 16

static void combinators_race_on_a_pool(void **state)
{
    serex_executor *pool;
    serex_future *fs[RACE_N], *all, *any;
    int x[RACE_N], rc;

    (void)state;
    assert_int_equal(serex_pool_create(NULL, &pool), SEREX_OK);
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < RACE_N; i++)
            assert_int_equal(
                serex_submit(pool, i == 7 ? fail_a : ret_arg, &x[i], &fs[i]),
                SEREX_OK);
        assert_int_equal(serex_future_all(fs, RACE_N, 0, &all), SEREX_OK);
        assert_int_equal(
            serex_future_any(fs, RACE_N, SEREX_FUTURE_CANCEL_REST, &any),
            SEREX_OK);
        rc = serex_future_wait(all, SEREX_FOREVER);
        /* the first error: fs[7]'s, or a cancel of any's (which may
         * have cancelled fs[7] too) */
        assert_true(rc == ERR_A || rc == SEREX_ECANCELED);
        assert_int_equal(serex_future_wait(any, SEREX_FOREVER), SEREX_OK);
        assert_non_null(serex_future_value(any));
        for (int i = 0; i < RACE_N; i++) {
            rc = serex_future_wait(fs[i], 0);
            assert_true(rc == SEREX_OK || rc == SEREX_ECANCELED ||
                        (i == 7 && rc == ERR_A));
            serex_future_release(fs[i]);
        }
        serex_future_release(all);
        serex_future_release(any);
    }
    assert_int_equal(serex_destroy(pool), SEREX_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(task_error_ends_its_future),
        cmocka_unit_test(set_error_last_call_wins),
        cmocka_unit_test(promise_complete_and_fail),
        cmocka_unit_test(released_promise_is_broken),
        cmocka_unit_test(cancel_on_a_token),
        cmocka_unit_test(cancel_on_outlives_the_token_handle),
        cmocka_unit_test(deadline_ends_with_etimedout),
        cmocka_unit_test(wait_token_ends_on_cancel),
        cmocka_unit_test(all_waits_for_every_input),
        cmocka_unit_test(all_reports_the_first_error),
        cmocka_unit_test(any_takes_the_first_value),
        cmocka_unit_test(combinators_bad_input),
        cmocka_unit_test(combinators_of_ended_inputs),
        cmocka_unit_test(cancel_rest_over_a_then_future),
        cmocka_unit_test(combinators_race_on_a_pool),
    };

    return cmocka_run_group_tests_name("future_errors", tests, NULL, NULL);
}
