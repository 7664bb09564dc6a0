/* SPDX-License-Identifier: MIT */
/*
 * test_limiter.c - the concurrency limiter: its bound, its order, and
 * promises 1, 2, 2a, 3 (a limiter of 1), 5, 7 and 8 of docs/contract.md.
 *
 * Order, the bound and batching are shown on the manual executor (and a
 * small user-written executor), where each runner visit is one explicit
 * serex_manual_run_one; the bound is made visible without threads by
 * tasks that run the manual executor again from inside themselves (each
 * nesting level is one more task running at once). The pool tests check
 * what only threads show: the bound reached and never passed on a pool of
 * more threads, happens-before for a limiter of 1, EDEADLK from a worker,
 * destroy waiting for running tasks, and racing producers against
 * shutdown_now (run under TSan by the sanitizer stage). Every cross-thread
 * wait is bounded by TEST_TIMEOUT.
 */
#include "test_util.h"
#include "test_wrap_executor.h"
#include "test_user_executor.h"

#include <stdlib.h> /* calloc, free */

#include "nodecache_internal.h" /* serex__cache_trim */

#define N 1000
#define NLIM 3
#define HB_PRODUCERS 3
_Static_assert(HB_PRODUCERS <= TEST_ORDER_PRODUCERS, "test_order size");
#define HB_PER_PRODUCER 2000
#define BATCH 64 /* the limiter's tasks per runner visit (limiter.h) */

struct fixture;
struct capped;

/* A task's argument: which fixture to log into and the value to log. */
struct item {
    struct fixture *f;
    size_t v;
};

/* Plain state of the happens-before test: only the limiter's order
 * (max_running 1) protects it, so TSan reports a missing happens-before. */
struct hb_item {
    struct test_order *s;
    unsigned producer;
    size_t seq;
};

struct hb_producer {
    serex_executor *lim;
    struct hb_item *items; /* HB_PER_PRODUCER of them */
    serex__thread thread;
    long rejected;
};

/* Tasks running at once, counted with atomics. */
struct conc {
    atomic_int inside;
    atomic_int max_seen;
    atomic_int over; /* tasks that found more than `limit` inside */
    atomic_long ran;
    int limit;
    int gate; /* the first `gate` tasks wait until `limit` are inside */
};

struct fixture {
    serex_executor *manual;    /* made in setup */
    serex_executor *pool;      /* made by the tests that need one */
    serex_executor *lim[NLIM]; /* destroyed last-made first */
    struct test_user user;
    serex_event *done;
    atomic_int calls;     /* count_call runs */
    int depth, max_depth; /* nest_task, on the test's thread */
    struct item items[2 * N];
    size_t log[2 * N]; /* written by log_task, in run order */
    size_t nlog;
    struct test_order hb;
    struct test_pending pending;
    serex_fn pending_fns[2 * N];
    void *pending_args[2 * N];
    struct conc conc;
    struct test_race race; /* the racing tests' producers and pool */
    bool race_made;
    struct test_race_order race_order; /* max_running 1: plain */
    /* cap_task: the depth each task started at; which task changes the
     * cap of cap_lim, and to what */
    int start_depth[N];
    serex_executor *cap_lim;
    size_t cap_at;
    unsigned cap_to;
    struct capped *capped;
};

/* --- tasks --- */

/* Appends its value to the log. Plain writes: one thread, or the order
 * of a limiter of 1. */
static void log_task(void *arg)
{
    struct item *it = arg;

    it->f->log[it->f->nlog++] = it->v;
}

static void *count_call(void *arg)
{
    struct item *it = arg;

    atomic_fetch_add(&it->f->calls, 1);
    it->f->log[it->f->nlog++] = it->v;
    return it;
}

/* Logs, then runs the manual executor from inside: a runner queued there
 * starts another task while this one still runs (one level deeper). */
static void nest_task(void *arg)
{
    struct item *it = arg;
    struct fixture *f = it->f;

    log_task(arg);
    if (++f->depth > f->max_depth)
        f->max_depth = f->depth;
    while (serex_manual_run_one(f->manual))
        ;
    f->depth--;
}

static void hb_task(void *arg)
{
    struct hb_item *it = arg;

    test_order_see(it->s, it->producer, it->seq);
}

static void conc_reset(struct conc *c, int limit, int gate)
{
    atomic_store(&c->inside, 0);
    atomic_store(&c->max_seen, 0);
    atomic_store(&c->over, 0);
    atomic_store(&c->ran, 0);
    c->limit = limit;
    c->gate = gate;
}

static void conc_enter(struct conc *c)
{
    int n = atomic_fetch_add(&c->inside, 1) + 1;
    int seen = atomic_load(&c->max_seen);

    while (n > seen && !atomic_compare_exchange_weak(&c->max_seen, &seen, n))
        ;
    if (n > c->limit)
        atomic_fetch_add(&c->over, 1);
}

/* Counts itself inside; the first `gate` tasks wait (bounded) until
 * `limit` tasks are inside at once, the others stay a moment. */
static void conc_task(void *arg)
{
    struct item *it = arg;
    struct conc *c = &it->f->conc;

    conc_enter(c);
    if (it->v < (size_t)c->gate) {
        const int64_t until = test_now_ns() + TEST_TIMEOUT;

        while (atomic_load(&c->max_seen) < c->limit && test_now_ns() < until)
            serex__thread_yield();
    } else {
        for (int i = 0; i < 200; i++)
            serex__cpu_relax();
    }
    atomic_fetch_sub(&c->inside, 1);
    atomic_fetch_add(&c->ran, 1);
}

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_event_create(&f->done), SEREX_OK);
    for (size_t i = 0; i < 2 * N; i++)
        f->items[i] = (struct item){f, i};
    test_user_init(&f->user);
    f->pending.cap = 2 * N;
    f->pending.fns = f->pending_fns;
    f->pending.args = f->pending_args;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    serex__alloc_fail_nth(0);
    /* Runners still queued on the manual executor run first (every test
     * leaves only harmless tasks there), so no destroy waits on them. */
    if (f->manual != NULL)
        test_run_all(f->manual);
    while (test_user_run_one(&f->user))
        ;
    for (int i = NLIM - 1; i >= 0; i--)
        if (f->lim[i] != NULL)
            assert_int_equal(serex_destroy(f->lim[i]), SEREX_OK);
    if (f->manual != NULL)
        assert_int_equal(serex_destroy(f->manual), SEREX_OK);
    if (f->pool != NULL)
        assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    if (f->race_made)
        test_race_fini(&f->race);
    serex_event_destroy(f->done);
    free(f);
    return 0;
}

/* Makes f->lim[i] on @target, at most @max running. */
static serex_executor *make_limiter(struct fixture *f, int i,
                                    serex_executor *target, unsigned max)
{
    assert_int_equal(serex_limiter_create(target, max, &f->lim[i]), SEREX_OK);
    assert_non_null(f->lim[i]);
    return f->lim[i];
}

static void make_pool(struct fixture *f, unsigned threads)
{
    serex_pool_config cfg = {.threads = threads, .name = "test-limiter"};

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
}

static serex_stats stats_of(serex_executor *ex)
{
    serex_stats st;

    assert_int_equal(serex_executor_stats(ex, &st), SEREX_OK);
    return st;
}

static void assert_logged_in_order(struct fixture *f, size_t n)
{
    assert_int_equal(f->nlog, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(f->log[i], i);
}

/* --- order, the bound, batching: on the manual executor --- */

static void limiter_starts_tasks_in_submission_order(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 3);

    for (size_t i = 0; i < N; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    /* nothing runs until the target runs a runner */
    assert_int_equal(f->nlog, 0);
    test_run_all(f->manual);
    assert_logged_in_order(f, N);
}

static void limiter_puts_at_most_max_running_runners_on_the_target(void **state)
{
    struct fixture *f = *state;
    serex_executor *one = make_limiter(f, 0, f->manual, 1);
    serex_executor *three = make_limiter(f, 1, f->manual, 3);

    for (size_t i = 0; i < 10; i++)
        assert_int_equal(serex_execute(three, log_task, &f->items[i]),
                         SEREX_OK);
    assert_int_equal(stats_of(f->manual).queued, 3);
    for (size_t i = 0; i < 10; i++)
        assert_int_equal(serex_execute(one, log_task, &f->items[N + i]),
                         SEREX_OK);
    assert_int_equal(stats_of(f->manual).queued, 4);
    /* the first runner ran all ten; the other two find nothing */
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, 10);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 20);
    for (size_t i = 0; i < 10; i++) {
        assert_int_equal(f->log[i], i);
        assert_int_equal(f->log[10 + i], N + i);
    }
}

/* Runs @n nest_tasks on a limiter of @max; returns the deepest nesting. */
static int nested_depth(struct fixture *f, int i, unsigned max, size_t n)
{
    serex_executor *l = make_limiter(f, i, f->manual, max);

    f->nlog = 0;
    f->depth = f->max_depth = 0;
    for (size_t k = 0; k < n; k++)
        assert_int_equal(serex_execute(l, nest_task, &f->items[k]), SEREX_OK);
    test_run_all(f->manual);
    assert_logged_in_order(f, n);
    assert_int_equal(f->depth, 0);
    return f->max_depth;
}

static void limiter_never_runs_more_than_max_running_at_once(void **state)
{
    struct fixture *f = *state;

    /* every task would start the next inside itself if the limiter let
     * it: the nesting is exactly the number running at once */
    assert_int_equal(nested_depth(f, 0, 1, 10), 1);
    assert_int_equal(nested_depth(f, 1, 2, 10), 2);
    assert_int_equal(nested_depth(f, 2, 3, 10), 3);
}

static void limiter_runner_runs_at_most_a_batch_then_requeues(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 1);

    for (size_t i = 0; i < 150; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    /* one runner on the target, however many tasks there are */
    assert_int_equal(stats_of(f->manual).queued, 1);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, BATCH);
    assert_int_equal(stats_of(f->manual).queued, 1); /* requeued */
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, 2 * BATCH);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, 150);
    /* idle: the runner did not requeue itself */
    assert_false(serex_manual_run_one(f->manual));
    assert_logged_in_order(f, 150);
}

static void limiter_task_submitted_after_idle_starts_a_new_runner(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 2);

    for (size_t round = 0; round < 3; round++) {
        assert_int_equal(serex_execute(l, log_task, &f->items[round]),
                         SEREX_OK);
        assert_int_equal(serex_manual_run_pending(f->manual), 1);
        assert_int_equal(f->nlog, round + 1);
        assert_false(serex_manual_run_one(f->manual));
    }
}

/* A task that queues its successor on the same limiter while running. */
struct chain {
    serex_executor *lim;
    struct item *items;
    size_t left;
};

static void chain_task(void *arg)
{
    struct chain *c = arg;

    log_task(&c->items[0]);
    c->items++;
    if (--c->left > 0)
        assert_int_equal(serex_execute(c->lim, chain_task, c), SEREX_OK);
}

static void limiter_task_executing_on_its_own_limiter_runs_after(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 2);
    struct chain c = {l, &f->items[0], 10};

    assert_int_equal(serex_execute(l, chain_task, &c), SEREX_OK);
    test_run_all(f->manual);
    assert_logged_in_order(f, 10);
}

static void limiter_of_one_on_limiter_keeps_both_orders(void **state)
{
    struct fixture *f = *state;
    serex_executor *outer = make_limiter(f, 0, f->manual, 2);
    serex_executor *inner = make_limiter(f, 1, outer, 1);
    size_t next_a = 0, next_b = N;

    /* inner's runners are outer's tasks: each order holds on its own */
    for (size_t i = 0; i < 20; i++) {
        assert_int_equal(serex_execute(inner, log_task, &f->items[N + i]),
                         SEREX_OK);
        assert_int_equal(serex_execute(outer, log_task, &f->items[i]),
                         SEREX_OK);
    }
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 40);
    for (size_t i = 0; i < 40; i++) {
        if (f->log[i] < N)
            assert_int_equal(f->log[i], next_a++);
        else
            assert_int_equal(f->log[i], next_b++);
    }
    assert_int_equal(next_a, 20);
    assert_int_equal(next_b, N + 20);
    serex_shutdown(inner);
    assert_int_equal(serex_await_termination(inner, 0), SEREX_OK);
    /* shutting inner down left outer running */
    assert_int_equal(serex_execute(outer, log_task, &f->items[20]), SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(f->log[40], 20);
}

static void limiter_on_user_executor_keeps_order_and_bound(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, &f->user.base, 2);
    struct test_self_wait w = {.ex = l, .done = f->done};

    for (size_t i = 0; i < 10; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    assert_int_equal(f->user.tail - f->user.head, 2); /* two runners */
    assert_true(test_user_run_one(&f->user));
    assert_logged_in_order(f, 10);
    while (test_user_run_one(&f->user))
        ;
    assert_int_equal(f->nlog, 10);
    /* the limiter's own frame gives EDEADLK on a target that has none */
    assert_int_equal(serex_execute(l, test_self_wait_task, &w), SEREX_OK);
    while (test_user_run_one(&f->user))
        ;
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w);
    serex_shutdown(l);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
    /* the limiter never shut its target down */
    assert_false(f->user.shut);
}

/* --- shutdown, shutdown_now, await --- */

static void limiter_execute_after_shutdown_is_rejected_and_accepted_run(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 2);

    for (size_t i = 0; i < 5; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    serex_shutdown(l);
    serex_shutdown(l); /* idempotent */
    assert_int_equal(serex_execute(l, never_task, f), SEREX_EREJECTED);
    /* the target is not shut down: only the limiter is */
    assert_int_equal(serex_execute(f->manual, log_task, &f->items[5]),
                     SEREX_OK);
    assert_int_equal(serex_await_termination(l, 0), SEREX_ETIMEDOUT);
    test_run_all(f->manual);
    assert_logged_in_order(f, 6);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
    assert_int_equal(serex_await_termination(f->manual, 0), SEREX_ETIMEDOUT);
}

static void limiter_shutdown_now_hands_back_queued_in_order(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 1);
    size_t handed;

    for (size_t i = 0; i < 100; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    assert_true(serex_manual_run_one(f->manual)); /* a batch ran */
    handed = serex_shutdown_now(l, test_pending_cb, &f->pending);
    assert_int_equal(handed, 100 - BATCH);
    assert_int_equal(f->pending.n, 100 - BATCH);
    for (size_t i = 0; i < 100 - BATCH; i++) {
        assert_ptr_equal(f->pending.fns[i], log_task);
        assert_ptr_equal(f->pending.args[i], &f->items[BATCH + i]);
    }
    assert_int_equal(serex_execute(l, never_task, f), SEREX_EREJECTED);
    assert_int_equal(serex_shutdown_now(l, test_pending_cb, &f->pending), 0);
    /* the requeued runner finds nothing: no handed-back task runs */
    test_run_all(f->manual);
    assert_logged_in_order(f, BATCH);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
}

struct self_stop {
    serex_executor *lim;
    struct test_pending *pending;
    size_t handed;
};

static void self_stop_task(void *arg)
{
    struct self_stop *st = arg;

    st->handed = serex_shutdown_now(st->lim, test_pending_cb, st->pending);
}

static void limiter_shutdown_now_from_own_task_hands_back_the_rest(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 3);
    struct self_stop st = {l, &f->pending, 0};

    assert_int_equal(serex_execute(l, log_task, &f->items[0]), SEREX_OK);
    assert_int_equal(serex_execute(l, self_stop_task, &st), SEREX_OK);
    for (size_t i = 1; i <= 8; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(st.handed, 8);
    assert_int_equal(f->nlog, 1);
    for (size_t i = 0; i < 8; i++)
        assert_ptr_equal(f->pending.args[i], &f->items[i + 1]);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
}

static void limiter_shutdown_now_cancels_futures_and_counts_them(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 2);
    serex_future *f0 = NULL, *f1 = NULL;

    assert_int_equal(serex_submit(l, count_call, &f->items[0], &f0), SEREX_OK);
    assert_int_equal(serex_execute(l, never_task, &f->items[1]), SEREX_OK);
    assert_int_equal(serex_submit(l, count_call, &f->items[2], &f1), SEREX_OK);
    assert_int_equal(serex_shutdown_now(l, test_pending_cb, &f->pending), 3);
    assert_int_equal(f->pending.n, 1); /* futures are cancelled instead */
    assert_ptr_equal(f->pending.args[0], &f->items[1]);
    assert_int_equal(serex_future_wait(f0, 0), SEREX_ECANCELED);
    assert_int_equal(serex_future_wait(f1, 0), SEREX_ECANCELED);
    test_run_all(f->manual);
    assert_int_equal(atomic_load(&f->calls), 0);
    serex_future_release(f0);
    serex_future_release(f1);
}

static void limiter_shutdown_now_hands_back_a_serials_drain_to_no_one(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 2);
    serex_executor *s;

    /* a serial over the limiter: its drain is a task of the limiter, which
     * hands it to the serial's own hook, never to on_pending (promise 2a) */
    assert_int_equal(serex_serial_create(l, NULL, &s), SEREX_OK);
    assert_int_equal(serex_execute(l, never_task, &f->items[0]), SEREX_OK);
    for (size_t i = 1; i <= 3; i++)
        assert_int_equal(serex_execute(s, never_task, &f->items[i]), SEREX_OK);
    assert_int_equal(serex_shutdown_now(l, test_pending_cb, &f->pending), 2);
    assert_int_equal(f->pending.n, 1);
    assert_ptr_equal(f->pending.args[0], &f->items[0]);
    /* the serial kept its tasks: they come back from its shutdown_now */
    assert_int_equal(serex_shutdown_now(s, test_pending_cb, &f->pending), 3);
    assert_int_equal(f->pending.n, 4);
    for (size_t i = 1; i <= 3; i++)
        assert_ptr_equal(f->pending.args[i], &f->items[i]);
    assert_int_equal(serex_destroy(s), SEREX_OK);
}

static void limiter_await_after_shutdown_now_does_not_wait_for_the_target(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 3);

    /* three runners are queued on a target nobody runs: shutdown_now took
     * every task, so await says OK and destroy returns */
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(serex_execute(l, never_task, f), SEREX_OK);
    assert_int_equal(serex_shutdown_now(l, NULL, NULL), 3);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
    assert_int_equal(serex_destroy(l), SEREX_OK);
    f->lim[0] = NULL;
    /* the target runs the stale runners later: they must be harmless */
    assert_int_equal(test_run_all(f->manual), 3);
}

static void limiter_stale_runners_dropped_by_the_target_free_it(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 2);

    for (size_t i = 0; i < 2; i++)
        assert_int_equal(serex_execute(l, never_task, f), SEREX_OK);
    assert_int_equal(serex_shutdown_now(l, NULL, NULL), 2);
    assert_int_equal(serex_destroy(l), SEREX_OK);
    f->lim[0] = NULL;
    /* the last runner dropped frees the limiter (LeakSanitizer checks) */
    assert_int_equal(serex_destroy(f->manual), SEREX_OK);
    f->manual = NULL;
}

static void limiter_await_times_out_until_shut_down_and_drained(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 2);

    assert_int_equal(serex_await_termination(l, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_await_termination(l, MS), SEREX_ETIMEDOUT);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    serex_shutdown(l);
    assert_int_equal(serex_await_termination(l, 0), SEREX_ETIMEDOUT);
    test_run_all(f->manual);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
    assert_int_equal(serex_await_termination(l, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_await_termination(l, SEREX_FOREVER), SEREX_OK);
    assert_int_equal(serex_await_termination(l, -2), SEREX_EINVAL);
}

static void limiter_idle_shutdown_terminates_at_once(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 4);

    serex_shutdown(l);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
    assert_false(serex_manual_run_one(f->manual));
}

/* --- the target refuses --- */

static void limiter_target_refusing_a_lone_task_reports_it(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 2);

    serex_shutdown(f->manual);
    /* the refusal is the caller's (limiter.h): nothing queued, no harm */
    assert_int_equal(serex_execute(l, never_task, &f->items[0]),
                     SEREX_EREJECTED);
    assert_int_equal(serex_execute(l, never_task, &f->items[1]),
                     SEREX_EREJECTED);
    assert_false(serex_manual_run_one(f->manual));
    assert_int_equal(stats_of(l).submitted, 0);
    assert_int_equal(stats_of(l).rejected, 2);
    assert_int_equal(serex_shutdown_now(l, test_pending_cb, &f->pending), 0);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
}

/*
 * A target that, asked to start a runner, first lets another task into
 * the limiter (as a concurrent producer would between the first task's
 * count and its runner's submission), then refuses.
 */
struct refusing_target {
    serex_executor base;
    serex_executor *lim;
    struct fixture *f;
    int calls;
};

static int refusing_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct refusing_target *rt = (struct refusing_target *)(void *)ex;

    (void)fn;
    (void)arg;
    /* queued behind the first task; on a limiter of 2 it asks for a
     * runner of its own, refused too (this runs once) */
    if (rt->calls++ == 0)
        assert_int_equal(serex_execute(rt->lim, never_task, &rt->f->items[1]),
                         SEREX_OK);
    return SEREX_EREJECTED;
}

static void refusing_shutdown(serex_executor *ex)
{
    (void)ex;
}

static size_t refusing_shutdown_now(serex_executor *ex, serex_pending_fn p,
                                    void *ctx)
{
    (void)ex;
    (void)p;
    (void)ctx;
    return 0;
}

static int refusing_await(serex_executor *ex, int64_t timeout_ns)
{
    (void)ex;
    (void)timeout_ns;
    return SEREX_OK; /* nothing ever runs here: it is as good as gone */
}

static void refusing_destroy(serex_executor *ex)
{
    (void)ex;
}

static const serex_executor_ops refusing_ops = {
    refusing_execute, refusing_shutdown, refusing_shutdown_now, refusing_await,
    refusing_destroy};

static void limiter_target_refusing_with_tasks_queued_keeps_them(void **state)
{
    struct fixture *f = *state;

    for (unsigned max = 1; max <= 2; max++) {
        struct refusing_target rt = {{&refusing_ops}, NULL, f, 0};
        serex_executor *l = make_limiter(f, (int)max - 1, &rt.base, max);

        rt.lim = l;
        f->pending.n = 0;
        /* a task is queued behind ours when the runner is refused and no
         * runner is left: both are kept (accepted: SEREX_OK), new ones
         * refused (promise 5) */
        assert_int_equal(serex_execute(l, never_task, &f->items[0]), SEREX_OK);
        assert_int_equal(rt.calls, (int)max);
        assert_int_equal(serex_execute(l, never_task, &f->items[2]),
                         SEREX_EREJECTED);
        assert_int_equal(serex_shutdown_now(l, test_pending_cb, &f->pending),
                         2);
        assert_int_equal(f->pending.n, 2);
        assert_ptr_equal(f->pending.args[0], &f->items[0]);
        assert_ptr_equal(f->pending.args[1], &f->items[1]);
        assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
        assert_int_equal(serex_destroy(l), SEREX_OK); /* before rt goes */
        f->lim[max - 1] = NULL;
    }
}

/*
 * A user-written target that accepts @accept submissions (queued in its
 * ring, run by hand), then refuses with SEREX_EFULL.
 */
struct stingy_target {
    struct test_user u;
    int accept;
};

static int stingy_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct stingy_target *t = (struct stingy_target *)(void *)ex;

    if (t->accept == 0)
        return SEREX_EFULL;
    t->accept--;
    return test_user_execute(ex, fn, arg);
}

static const serex_executor_ops stingy_ops = {
    stingy_execute, test_user_shutdown, test_user_shutdown_now, test_user_await,
    test_user_destroy};

static void limiter_target_refusing_while_a_runner_works_accepts(void **state)
{
    struct fixture *f = *state;
    struct stingy_target t;
    serex_executor *l;

    test_user_init(&t.u);
    t.u.base.ops = &stingy_ops;
    t.accept = 1;
    l = make_limiter(f, 0, &t.u.base, 3);
    /* the second and third runners are refused, but the first is out:
     * it runs their tasks (limiter.h), and the limiter stays usable */
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    assert_int_equal(t.u.tail - t.u.head, 1);
    while (test_user_run_one(&t.u))
        ;
    assert_logged_in_order(f, 3);
    /* no runner is out now: a lone task the target refuses is the
     * caller's again */
    assert_int_equal(serex_execute(l, never_task, f), SEREX_EFULL);
    t.accept = 1;
    assert_int_equal(serex_execute(l, log_task, &f->items[3]), SEREX_OK);
    while (test_user_run_one(&t.u))
        ;
    assert_logged_in_order(f, 4);
    assert_int_equal(stats_of(l).rejected, 1);
    assert_int_equal(serex_destroy(l), SEREX_OK);
    f->lim[0] = NULL;
}

static void destroy_lim0(struct fixture *f)
{
    assert_int_equal(serex_destroy(f->lim[0]), SEREX_OK);
    f->lim[0] = NULL;
}

/*
 * A passing refusal: the target is full while a second task queues
 * behind the first, and no runner is left (a limiter of 1; of 2, the
 * second task's own runner refused too). Both tasks are kept (SEREX_OK),
 * a runner is owed, and the next execute starts it: the limiter goes on,
 * in order, losing nothing (limiter.h: a full target costs the lone task
 * at most).
 */
static void limiter_target_full_with_a_task_behind_goes_on(void **state)
{
    struct fixture *f = *state;

    for (unsigned max = 1; max <= 2; max++) {
        struct test_full_target ft;
        serex_executor *l;
        serex_stats st;

        f->nlog = 0;
        test_full_init(&ft, f->manual, (int)max, log_task, &f->items[1]);
        l = make_limiter(f, 0, &ft.w.base, max);
        ft.wrapper = l;
        assert_int_equal(serex_execute(l, log_task, &f->items[0]), SEREX_OK);
        assert_int_equal(atomic_load(&ft.refusals), 0);
        assert_false(serex_manual_run_one(f->manual)); /* none: owed */
        /* the next execute takes a slot and starts a runner */
        assert_int_equal(serex_execute(l, log_task, &f->items[2]), SEREX_OK);
        test_run_all(f->manual);
        assert_logged_in_order(f, 3);
        /* and it is a limiter as before */
        assert_int_equal(serex_execute(l, log_task, &f->items[3]), SEREX_OK);
        assert_int_equal(serex_execute(l, log_task, &f->items[4]), SEREX_OK);
        test_run_all(f->manual);
        assert_logged_in_order(f, 5);
        st = stats_of(l);
        assert_int_equal(st.submitted, 5);
        assert_int_equal(st.completed, 5);
        assert_int_equal(st.queued, 0);
        assert_int_equal(st.rejected, 0);
        destroy_lim0(f); /* before ft goes out of scope */
    }
}

/* Shut down with a runner owed: await_termination starts it (a look with
 * timeout 0 too), and ends once the tasks ran. */
static void limiter_await_starts_an_owed_runner(void **state)
{
    struct fixture *f = *state;
    struct test_full_target ft;
    serex_executor *l;

    test_full_init(&ft, f->manual, 1, log_task, &f->items[1]);
    l = make_limiter(f, 0, &ft.w.base, 1);
    ft.wrapper = l;
    assert_int_equal(serex_execute(l, log_task, &f->items[0]), SEREX_OK);
    serex_shutdown(l);
    assert_int_equal(serex_execute(l, never_task, f), SEREX_EREJECTED);
    assert_int_equal(serex_await_termination(l, 0), SEREX_ETIMEDOUT);
    assert_int_equal(atomic_load(&ft.calls), 2); /* a runner submitted */
    assert_int_equal(serex_await_termination(l, 0), SEREX_ETIMEDOUT);
    assert_int_equal(atomic_load(&ft.calls), 2); /* once */
    test_run_all(f->manual);
    assert_logged_in_order(f, 2);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
    destroy_lim0(f);
}

/* shutdown_now with a runner owed hands every task back, in order. */
static void limiter_shutdown_now_hands_back_with_a_runner_owed(void **state)
{
    struct fixture *f = *state;
    struct test_full_target ft;
    serex_executor *l;

    test_full_init(&ft, f->manual, 1, log_task, &f->items[1]);
    l = make_limiter(f, 0, &ft.w.base, 1);
    ft.wrapper = l;
    assert_int_equal(serex_execute(l, never_task, &f->items[0]), SEREX_OK);
    assert_int_equal(serex_shutdown_now(l, test_pending_cb, &f->pending), 2);
    assert_ptr_equal(f->pending.args[0], &f->items[0]);
    assert_ptr_equal(f->pending.args[1], &f->items[1]);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
    assert_int_equal(atomic_load(&ft.calls), 1);
    assert_false(serex_manual_run_one(f->manual));
    destroy_lim0(f);
}

/*
 * On a pool, the target full for its first three submissions: destroy
 * (no execute comes after the refusal) starts the owed runner while it
 * waits, and every task runs, in order.
 */
static void limiter_destroy_retries_an_owed_runner_until_it_runs(void **state)
{
    struct fixture *f = *state;
    struct test_full_target ft;
    serex_executor *l;

    make_pool(f, 1);
    test_full_init(&ft, f->pool, 3, log_task, &f->items[1]);
    l = make_limiter(f, 0, &ft.w.base, 1);
    ft.wrapper = l;
    assert_int_equal(serex_execute(l, log_task, &f->items[0]), SEREX_OK);
    destroy_lim0(f);
    assert_int_equal(atomic_load(&ft.refusals), 0);
    assert_logged_in_order(f, 2);
}

/* The target refuses with SEREX_EREJECTED at the retry: shut down for
 * good, so the limiter breaks as before, and destroy drops what it kept. */
static void limiter_owed_runner_rejected_at_retry_breaks(void **state)
{
    struct fixture *f = *state;
    struct test_full_target ft;
    serex_executor *l;
    serex_future *fu = NULL;

    test_full_init(&ft, f->manual, 1, log_task, &f->items[1]);
    l = make_limiter(f, 0, &ft.w.base, 1);
    ft.wrapper = l;
    assert_int_equal(serex_submit(l, count_call, &f->items[0], &fu), SEREX_OK);
    serex_shutdown(f->manual);
    assert_int_equal(serex_execute(l, never_task, f), SEREX_OK); /* kept */
    assert_int_equal(serex_execute(l, never_task, f), SEREX_EREJECTED);
    destroy_lim0(f);
    assert_int_equal(serex_future_wait(fu, 0), SEREX_ECANCELED);
    assert_int_equal(atomic_load(&f->calls), 0);
    assert_int_equal(f->nlog, 0);
    serex_future_release(fu);
}

/*
 * Nothing in a limiter allocates while it holds a spinlock (pop_lock):
 * execute, runners, a take-back, an owed runner, shutdown_now. Debug
 * builds count the allocations made under a serex spinlock.
 */
static void limiter_allocates_under_no_spinlock(void **state)
{
    struct fixture *f = *state;
    struct test_full_target ft;
    serex_executor *l;

#ifdef NDEBUG
    skip(); /* the count is kept in Debug builds only */
#endif
    test_full_init(&ft, &f->user.base, 1, log_task, &f->items[1]);
    (void)serex__alloc_spin_count();
    l = make_limiter(f, 0, &ft.w.base, 2);
    ft.wrapper = l;
    assert_int_equal(serex_execute(l, log_task, &f->items[0]), SEREX_OK);
    for (size_t i = 2; i < 8; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    while (test_user_run_one(&f->user))
        ;
    assert_logged_in_order(f, 8);
    atomic_store(&ft.refusals, 1); /* a lone task taken back */
    assert_int_equal(serex_execute(l, never_task, f), SEREX_EFULL);
    for (size_t i = 8; i < 12; i++)
        assert_int_equal(serex_execute(l, never_task, &f->items[i]), SEREX_OK);
    assert_int_equal(serex_shutdown_now(l, NULL, NULL), 4);
    destroy_lim0(f);
    assert_int_equal(serex__alloc_spin_count(), 0);
}

static void limiter_destroy_with_kept_tasks_drops_them(void **state)
{
    struct fixture *f = *state;
    struct refusing_target rt = {{&refusing_ops}, NULL, f, 0};
    serex_executor *l = make_limiter(f, 0, &rt.base, 1);
    serex_future *fu = NULL;

    rt.lim = l;
    assert_int_equal(serex_submit(l, count_call, &f->items[0], &fu), SEREX_OK);
    /* the target can never run them: destroy drops them (the future is
     * cancelled) instead of hanging */
    assert_int_equal(serex_destroy(l), SEREX_OK);
    f->lim[0] = NULL;
    assert_int_equal(serex_future_wait(fu, 0), SEREX_ECANCELED);
    assert_int_equal(atomic_load(&f->calls), 0);
    serex_future_release(fu);
}

static void limiter_target_rejects_resubmission_runner_keeps_running(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 1);

    for (size_t i = 0; i < 150; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    serex_shutdown(f->manual); /* the queued runner still runs */
    assert_true(serex_manual_run_one(f->manual));
    /* the resubmissions were refused: the runner went on in place */
    assert_logged_in_order(f, 150);
    assert_false(serex_manual_run_one(f->manual));
    serex_shutdown(l);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
}

static void limiter_runners_dropped_by_the_target_keep_its_tasks(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 2);

    for (size_t i = 0; i < 5; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    /* the manual hands back its two tasks: both are the limiter's runners,
     * which never reach on_pending (promise 2a) */
    assert_int_equal(
        serex_shutdown_now(f->manual, test_pending_cb, &f->pending), 2);
    assert_int_equal(f->pending.n, 0);
    /* no runner left: the limiter keeps its tasks, refuses new ones */
    assert_int_equal(serex_execute(l, never_task, f), SEREX_EREJECTED);
    assert_int_equal(serex_shutdown_now(l, test_pending_cb, &f->pending), 5);
    for (size_t i = 0; i < 5; i++)
        assert_ptr_equal(f->pending.args[i], &f->items[i]);
    assert_int_equal(f->nlog, 0);
}

static void limiter_destroy_on_terminated_pool_does_not_hang(void **state)
{
    struct fixture *f = *state;
    serex_executor *l;

    make_pool(f, 1);
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    l = make_limiter(f, 0, f->pool, 2);
    assert_int_equal(serex_execute(l, never_task, f), SEREX_EREJECTED);
    assert_int_equal(serex_execute(l, never_task, f), SEREX_EREJECTED);
    assert_int_equal(serex_destroy(l), SEREX_OK);
    f->lim[0] = NULL;
}

/* --- EDEADLK --- */

static void limiter_await_and_destroy_from_own_task_is_edeadlk(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 2);
    struct test_self_wait w = {.ex = l, .done = f->done};

    assert_int_equal(serex_execute(l, test_self_wait_task, &w), SEREX_OK);
    test_run_all(f->manual);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w);
    /* destroy did nothing: the limiter still works */
    assert_int_equal(serex_execute(l, log_task, &f->items[0]), SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 1);
}

static void limiter_await_and_destroy_from_target_task_is_edeadlk(void **state)
{
    struct fixture *f = *state;
    serex_executor *outer = make_limiter(f, 0, f->manual, 2);
    serex_executor *l = make_limiter(f, 1, outer, 2);
    struct test_self_wait w1 = {.ex = l, .done = f->done};
    struct test_self_wait w2 = {.ex = l, .done = f->done};

    /* l runs on outer, which runs on manual: both are below l */
    assert_int_equal(serex_execute(outer, test_self_wait_task, &w1), SEREX_OK);
    test_run_all(f->manual);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w1);
    assert_int_equal(serex_execute(f->manual, test_self_wait_task, &w2),
                     SEREX_OK);
    test_run_all(f->manual);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w2);
    assert_int_equal(serex_execute(l, log_task, &f->items[0]), SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 1);
}

static void limiter_await_and_destroy_from_own_task_on_pool_is_edeadlk(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *l;
    struct test_self_wait w = {.done = f->done};
    struct test_self_wait wt = {.done = f->done};

    make_pool(f, 2);
    l = make_limiter(f, 0, f->pool, 2);
    w.ex = wt.ex = l;
    assert_int_equal(serex_execute(l, test_self_wait_task, &w), SEREX_OK);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w);
    /* and from a plain task of the pool the limiter runs on */
    assert_int_equal(serex_execute(f->pool, test_self_wait_task, &wt),
                     SEREX_OK);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&wt);
}

static void limiter_await_from_unrelated_task_is_not_edeadlk(void **state)
{
    struct fixture *f = *state;
    serex_executor *a, *b;
    struct test_self_wait w = {.done = f->done};

    make_pool(f, 2);
    a = make_limiter(f, 0, f->manual, 2);
    b = make_limiter(f, 1, f->pool, 2);
    w.ex = a;
    assert_int_equal(serex_execute(b, test_self_wait_task, &w), SEREX_OK);
    assert_signalled(f->done);
    assert_int_equal(w.await0, SEREX_ETIMEDOUT);
}

/* Waits (timeout 0) for a future of the limiter it runs on. */
struct wait_behind {
    serex_executor *lim;
    serex_future *later;
    int rc;
};

static void wait_behind_task(void *arg)
{
    struct wait_behind *w = arg;

    w->rc = serex_future_wait(w->later, 0);
}

static void limiter_of_one_future_wait_behind_caller_is_edeadlk(void **state)
{
    struct fixture *f = *state;

    for (unsigned max = 1; max <= 2; max++) {
        serex_executor *l = make_limiter(f, (int)max - 1, f->manual, max);
        struct wait_behind w = {l, NULL, 0};

        f->nlog = 0;
        assert_int_equal(serex_execute(l, wait_behind_task, &w), SEREX_OK);
        assert_int_equal(serex_submit(l, count_call, &f->items[0], &w.later),
                         SEREX_OK);
        test_run_all(f->manual);
        /* a limiter of 1 is a serial: the future's task starts only after
         * ours returns (promise 7b); with 2, another runner may take it,
         * so a wait is allowed (with timeout 0, it times out) */
        assert_int_equal(w.rc, max == 1 ? SEREX_EDEADLK : SEREX_ETIMEDOUT);
        assert_int_equal(serex_future_wait(w.later, 0), SEREX_OK);
        serex_future_release(w.later);
    }
}

/* --- threads: the bound, happens-before, destroy --- */

static void limiter_reaches_and_never_passes_its_bound_on_a_pool(void **state)
{
    struct fixture *f = *state;
    const unsigned limits[] = {1, 3, 5};

    make_pool(f, 8); /* more threads than any limit */
    for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
        serex_executor *l = make_limiter(f, (int)k, f->pool, limits[k]);
        const size_t ntasks = 2 * N;

        conc_reset(&f->conc, (int)limits[k], (int)limits[k]);
        /* the first `limit` tasks wait until `limit` are inside at once:
         * a limiter that ran fewer would keep them waiting (and fail) */
        for (size_t i = 0; i < ntasks; i++)
            assert_int_equal(serex_execute(l, conc_task, &f->items[i]),
                             SEREX_OK);
        serex_shutdown(l);
        assert_int_equal(serex_await_termination(l, TEST_TIMEOUT), SEREX_OK);
        assert_int_equal(atomic_load(&f->conc.ran), (long)ntasks);
        assert_int_equal(atomic_load(&f->conc.max_seen), (int)limits[k]);
        assert_int_equal(atomic_load(&f->conc.over), 0);
        assert_int_equal(stats_of(l).completed, ntasks);
        assert_int_equal(stats_of(l).queued, 0);
    }
}

static int hb_producer_main(void *arg)
{
    struct hb_producer *p = arg;

    for (size_t i = 0; i < HB_PER_PRODUCER; i++)
        if (serex_execute(p->lim, hb_task, &p->items[i]) != SEREX_OK)
            p->rejected++;
    return 0;
}

static void limiter_of_one_tasks_from_many_producers_happen_in_order(
    void **state)
{
    struct fixture *f = *state;
    struct hb_item *items = calloc(HB_PRODUCERS * HB_PER_PRODUCER,
                                   sizeof *items);
    struct hb_producer pr[HB_PRODUCERS];
    serex_executor *l;

    assert_non_null(items);
    make_pool(f, 4);
    l = make_limiter(f, 0, f->pool, 1);
    for (unsigned p = 0; p < HB_PRODUCERS; p++) {
        pr[p] = (struct hb_producer){.lim = l,
                                     .items = &items[p * HB_PER_PRODUCER]};
        for (size_t i = 0; i < HB_PER_PRODUCER; i++)
            pr[p].items[i] = (struct hb_item){&f->hb, p, i};
    }
    for (unsigned p = 0; p < HB_PRODUCERS; p++)
        assert_int_equal(
            serex__thread_start(&pr[p].thread, hb_producer_main, &pr[p]),
            SEREX_OK);
    for (unsigned p = 0; p < HB_PRODUCERS; p++) {
        serex__thread_join(pr[p].thread);
        assert_int_equal(pr[p].rejected, 0);
    }
    serex_shutdown(l);
    assert_int_equal(serex_await_termination(l, TEST_TIMEOUT), SEREX_OK);
    /* plain reads after await: TSan checks the happens-before */
    assert_int_equal(f->hb.total, HB_PRODUCERS * HB_PER_PRODUCER);
    assert_int_equal(f->hb.disorder, 0);
    for (unsigned p = 0; p < HB_PRODUCERS; p++)
        assert_int_equal(f->hb.next[p], HB_PER_PRODUCER);
    free(items);
}

/* Blocks until the gate event is signalled; counts its run. */
struct blocked {
    serex_event *gate;
    atomic_int ran;
};

static void blocked_task(void *arg)
{
    struct blocked *b = arg;

    assert_int_equal(serex_event_wait(b->gate, TEST_TIMEOUT), SEREX_OK);
    serex_event_signal(b->gate); /* auto-reset: pass it on to the next */
    atomic_fetch_add(&b->ran, 1);
}

static int open_gate_later(void *arg)
{
    struct blocked *b = arg;

    test_sleep_ns(20 * MS);
    serex_event_signal(b->gate);
    return 0;
}

static void limiter_destroy_waits_for_running_and_queued_tasks(void **state)
{
    struct fixture *f = *state;
    struct blocked b = {.ran = 0};
    serex__thread opener;
    serex_executor *l;

    assert_int_equal(serex_event_create(&b.gate), SEREX_OK);
    make_pool(f, 4);
    l = make_limiter(f, 0, f->pool, 2);
    for (int i = 0; i < 5; i++)
        assert_int_equal(serex_execute(l, blocked_task, &b), SEREX_OK);
    assert_int_equal(serex__thread_start(&opener, open_gate_later, &b),
                     SEREX_OK);
    /* two run, three wait, until the gate opens: destroy waits for all */
    assert_int_equal(serex_destroy(l), SEREX_OK);
    f->lim[0] = NULL;
    assert_int_equal(atomic_load(&b.ran), 5);
    serex__thread_join(opener);
    serex_event_destroy(b.gate);
}

/* --- racing producers (the stress for TSan) --- */

static void race_task(void *arg)
{
    struct test_race_item *it = arg;
    struct fixture *f = it->race->ctx;

    conc_enter(&f->conc);
    test_race_mark(it, TEST_RACE_RAN);
    if (f->conc.limit == 1) /* plain: only a limiter of 1 orders it */
        test_race_order_see(&f->race_order, it);
    atomic_fetch_sub(&f->conc.inside, 1);
}

static int race_submit(struct test_race *race, struct test_race_item *it)
{
    struct fixture *f = race->ctx;

    return serex_execute(f->lim[0], race->task_fn, it);
}

/* Producers race on a limiter of @max over the race's 4-thread pool;
 * @stop: 0 none, 1 shutdown, 2 shutdown_now, a quarter through. */
static void race_limiter(struct fixture *f, unsigned max, int stop)
{
    serex_executor *l;
    long accepted, ran;
    size_t handed = 0;

    test_race_init(&f->race, "test-limiter", race_submit, race_task, f);
    f->race_made = true;
    conc_reset(&f->conc, (int)max, 0);
    l = make_limiter(f, 0, f->race.pool, max);
    test_race_start(&f->race);
    if (stop != 0) {
        test_race_wait_for_progress(&f->race);
        if (stop == 1)
            serex_shutdown(l);
        else
            handed = serex_shutdown_now(l, test_race_handed, &f->race);
    }
    accepted = test_race_join(&f->race);
    if (stop == 0)
        assert_int_equal(accepted, TEST_RACE_TASKS);
    else
        assert_true(accepted >= TEST_RACE_TASKS / 4 - TEST_RACE_PRODUCERS);
    serex_shutdown(l);
    assert_int_equal(serex_await_termination(l, TEST_TIMEOUT), SEREX_OK);
    /* per producer: a prefix ran, the rest of what was accepted came
     * back (tasks start in queue order) */
    ran = test_race_check_accounting(&f->race, false);
    assert_int_equal(ran + (long)handed, accepted);
    if (stop != 2)
        assert_int_equal(handed, 0);
    assert_int_equal(atomic_load(&f->conc.over), 0);
    assert_true(atomic_load(&f->conc.max_seen) <= (int)max);
    if (max == 1) { /* plain reads after await: TSan checks */
        assert_int_equal(f->race_order.total, ran);
        assert_int_equal(f->race_order.disorder, 0);
    }
    assert_int_equal(stats_of(l).completed, (uint64_t)ran);
    assert_int_equal(stats_of(l).submitted, (uint64_t)accepted);
}

static void limiter_racing_producers_lose_nothing(void **state)
{
    race_limiter(*state, 3, 0);
}

static void limiter_racing_producers_of_one_keep_their_order(void **state)
{
    race_limiter(*state, 1, 0);
}

static void limiter_shutdown_racing_execute_runs_every_accepted(void **state)
{
    race_limiter(*state, 3, 1);
}

static void limiter_shutdown_now_racing_execute_loses_nothing(void **state)
{
    race_limiter(*state, 3, 2);
}

static void limiter_of_one_shutdown_now_racing_execute_loses_nothing(
    void **state)
{
    race_limiter(*state, 1, 2);
}

/* --- changing the cap (serex_limiter_set_max) --- */

/* Logs itself and the depth it started at (on the manual executor, the
 * number of the limiter's tasks running at once, itself included); the
 * task cap_at sets cap_lim's cap to cap_to from inside; then it runs the
 * manual executor from inside, as nest_task does. */
static void cap_task(void *arg)
{
    struct item *it = arg;
    struct fixture *f = it->f;

    f->start_depth[it->v] = ++f->depth;
    if (f->depth > f->max_depth)
        f->max_depth = f->depth;
    log_task(arg);
    if (it->v == f->cap_at)
        assert_int_equal(serex_limiter_set_max(f->cap_lim, f->cap_to),
                         SEREX_OK);
    while (serex_manual_run_one(f->manual))
        ;
    f->depth--;
}

/* Queues @n cap_tasks on a limiter of @max (then raised to @raise, if
 * not 0, before any runs) whose task @at sets the cap to @to, and runs
 * them all. */
static void run_cap_tasks_raised(struct fixture *f, unsigned max,
                                 unsigned raise, size_t n, size_t at,
                                 unsigned to)
{
    f->cap_lim = make_limiter(f, 0, f->manual, max);
    f->cap_at = at;
    f->cap_to = to;
    for (size_t i = 0; i < n; i++)
        assert_int_equal(serex_execute(f->cap_lim, cap_task, &f->items[i]),
                         SEREX_OK);
    if (raise != 0)
        assert_int_equal(serex_limiter_set_max(f->cap_lim, raise), SEREX_OK);
    test_run_all(f->manual);
    assert_logged_in_order(f, n);
    assert_int_equal(f->depth, 0);
    assert_int_equal(serex_limiter_max(f->cap_lim), to);
}

static void run_cap_tasks(struct fixture *f, unsigned max, size_t n, size_t at,
                          unsigned to)
{
    run_cap_tasks_raised(f, max, 0, n, at, to);
}

static void limiter_set_max_raised_starts_runners_for_waiting_tasks(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *five = make_limiter(f, 0, f->manual, 1);
    serex_executor *two = make_limiter(f, 1, f->manual, 1);

    for (size_t i = 0; i < 5; i++)
        assert_int_equal(serex_execute(five, log_task, &f->items[i]), SEREX_OK);
    assert_int_equal(stats_of(f->manual).queued, 1);
    /* at once, up to the new cap: three more runners on the target */
    assert_int_equal(serex_limiter_set_max(five, 4), SEREX_OK);
    assert_int_equal(serex_limiter_max(five), 4);
    assert_int_equal(stats_of(f->manual).queued, 4);
    /* two tasks wait: one runner more is enough, whatever the cap */
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(serex_execute(two, log_task, &f->items[N + i]),
                         SEREX_OK);
    assert_int_equal(serex_limiter_set_max(two, 8), SEREX_OK);
    assert_int_equal(stats_of(f->manual).queued, 6);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 7);
    assert_int_equal(stats_of(five).completed, 5);
    assert_int_equal(stats_of(two).completed, 2);
    /* raising an idle limiter starts nothing */
    assert_int_equal(serex_limiter_set_max(five, 9), SEREX_OK);
    assert_false(serex_manual_run_one(f->manual));
}

static void limiter_set_max_raised_from_its_task_runs_more_at_once(void **state)
{
    struct fixture *f = *state;

    /* task 0 raises 1 to 3: tasks 1 and 2 start inside it, nested */
    run_cap_tasks(f, 1, 10, 0, 3);
    assert_int_equal(f->max_depth, 3);
    assert_int_equal(f->start_depth[0], 1);
    assert_int_equal(f->start_depth[1], 2);
    assert_int_equal(f->start_depth[2], 3);
}

static void limiter_set_max_lowered_lets_the_running_finish_then_holds(
    void **state)
{
    struct fixture *f = *state;

    /* three run at once; the third lowers the cap to 1: all three run to
     * their end, and every later task starts alone */
    run_cap_tasks(f, 3, 10, 2, 1);
    assert_int_equal(f->max_depth, 3);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(f->start_depth[i], (int)i + 1);
    for (size_t i = 3; i < 10; i++)
        assert_int_equal(f->start_depth[i], 1);
    /* the runners that left are gone from the target */
    assert_false(serex_manual_run_one(f->manual));
}

static void limiter_set_max_lowered_to_two_holds_two(void **state)
{
    struct fixture *f = *state;

    /* four at once; the fourth lowers the cap to 2: the third and fourth
     * runners leave when their tasks return, and the second starts the
     * rest beside the first task, still running: two at once, no more */
    run_cap_tasks(f, 4, 12, 3, 2);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(f->start_depth[i], (int)i + 1);
    for (size_t i = 4; i < 12; i++)
        assert_int_equal(f->start_depth[i], 2);
}

static void limiter_set_max_lowered_after_a_raise_holds(void **state)
{
    struct fixture *f = *state;

    /* 1 raised to 4 (four runners), then lowered to 1 by the fourth task:
     * the cap it is lowered to was the cap at create */
    run_cap_tasks_raised(f, 1, 4, 10, 3, 1);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(f->start_depth[i], (int)i + 1);
    for (size_t i = 4; i < 10; i++)
        assert_int_equal(f->start_depth[i], 1);
}

static void limiter_set_max_moves_the_serial_edeadlk_rule(void **state)
{
    struct fixture *f = *state;
    serex_executor *raised = make_limiter(f, 0, f->manual, 1);
    serex_executor *lowered = make_limiter(f, 1, f->manual, 2);
    serex_executor *lims[2] = {raised, lowered};
    const int want[2] = {SEREX_ETIMEDOUT, SEREX_EDEADLK};

    assert_int_equal(serex_limiter_set_max(raised, 2), SEREX_OK);
    assert_int_equal(serex_limiter_set_max(lowered, 1), SEREX_OK);
    for (int k = 0; k < 2; k++) {
        struct wait_behind w = {lims[k], NULL, 0};

        assert_int_equal(serex_execute(lims[k], wait_behind_task, &w),
                         SEREX_OK);
        assert_int_equal(
            serex_submit(lims[k], count_call, &f->items[k], &w.later),
            SEREX_OK);
        test_run_all(f->manual);
        /* raised above 1: not a serial, the wait is allowed (and times
         * out); lowered to 1: a serial, the wait is caught */
        assert_int_equal(w.rc, want[k]);
        assert_int_equal(serex_future_wait(w.later, 0), SEREX_OK);
        serex_future_release(w.later);
    }
}

static void limiter_set_max_after_shutdown_runs_the_queued_under_it(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 1);

    for (size_t i = 0; i < 5; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    serex_shutdown(l);
    assert_int_equal(serex_limiter_set_max(l, 3), SEREX_OK);
    assert_int_equal(stats_of(f->manual).queued, 3);
    test_run_all(f->manual);
    assert_logged_in_order(f, 5);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
}

static void limiter_set_max_after_shutdown_now_only_records_it(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 1);

    for (size_t i = 0; i < 5; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    assert_int_equal(serex_shutdown_now(l, test_pending_cb, &f->pending), 5);
    assert_int_equal(serex_limiter_set_max(l, 4), SEREX_OK);
    assert_int_equal(serex_limiter_max(l), 4);
    assert_int_equal(stats_of(f->manual).queued, 1); /* the first runner */
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 0);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
}

static void limiter_set_max_refused_by_the_target_loses_nothing(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 1);

    for (size_t i = 0; i < 5; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    serex_shutdown(f->manual); /* refuses new runners; runs the queued one */
    assert_int_equal(serex_limiter_set_max(l, 3), SEREX_OK);
    assert_int_equal(stats_of(f->manual).queued, 1);
    test_run_all(f->manual);
    assert_logged_in_order(f, 5);
    serex_shutdown(l);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
}

static void limiter_set_max_bad_input_is_einval(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 2);

    for (size_t i = 0; i < 3; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    assert_int_equal(serex_limiter_set_max(NULL, 1), SEREX_EINVAL);
    assert_int_equal(serex_limiter_set_max(f->manual, 1), SEREX_EINVAL);
    assert_int_equal(serex_limiter_set_max(&f->user.base, 1), SEREX_EINVAL);
    assert_int_equal(serex_limiter_set_max(l, 0), SEREX_EINVAL);
    assert_int_equal(serex_limiter_set_max(l, SEREX_LIMITER_MAX_RUNNING + 1),
                     SEREX_EINVAL);
    /* nothing changed: the cap, the runners on the target */
    assert_int_equal(serex_limiter_max(l), 2);
    assert_int_equal(stats_of(f->manual).queued, 2);
    assert_int_equal(serex_limiter_max(NULL), 0);
    assert_int_equal(serex_limiter_max(f->manual), 0);
    assert_int_equal(serex_limiter_set_max(l, SEREX_LIMITER_MAX_RUNNING),
                     SEREX_OK);
    assert_int_equal(serex_limiter_max(l), SEREX_LIMITER_MAX_RUNNING);
    assert_int_equal(stats_of(f->manual).queued, 3);
    test_run_all(f->manual);
    assert_logged_in_order(f, 3);
}

/* --- changing the cap on a pool --- */

/* The first `held` tasks count down `in` and wait for `gate`; the others
 * record how many of the limiter's tasks ran at once as they started. */
struct capped {
    serex_latch *in;
    serex_event *gate; /* manual-reset: opened once */
    size_t held;
    atomic_int inside;
    atomic_int most_after; /* the most at once, as a later task started */
    atomic_long ran;
};

static void capped_task(void *arg)
{
    struct item *it = arg;
    struct capped *c = it->f->capped;
    int n = atomic_fetch_add(&c->inside, 1) + 1;

    if (it->v < c->held) {
        serex_latch_count_down(c->in, 1);
        if (serex_event_wait(c->gate, TEST_TIMEOUT) != SEREX_OK)
            atomic_fetch_add(&c->ran, 1000000); /* fails the count */
    } else {
        int seen = atomic_load(&c->most_after);

        while (n > seen &&
               !atomic_compare_exchange_weak(&c->most_after, &seen, n))
            ;
        for (int i = 0; i < 100; i++)
            serex__cpu_relax();
    }
    atomic_fetch_sub(&c->inside, 1);
    atomic_fetch_add(&c->ran, 1);
}

static void limiter_set_max_lowered_on_a_pool_holds_after_the_drain(
    void **state)
{
    struct fixture *f = *state;
    struct capped c = {.held = 6};
    const size_t ntasks = 1000;
    serex_executor *l;

    f->capped = &c;
    assert_int_equal(serex_latch_create(c.held, &c.in), SEREX_OK);
    assert_int_equal(serex_event_create_manual(&c.gate), SEREX_OK);
    make_pool(f, 8);
    l = make_limiter(f, 0, f->pool, 6);
    for (size_t i = 0; i < ntasks; i++)
        assert_int_equal(serex_execute(l, capped_task, &f->items[i]), SEREX_OK);
    /* six run at once and wait; lower to 2 while they run */
    assert_int_equal(serex_latch_wait(c.in, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_limiter_set_max(l, 2), SEREX_OK);
    serex_event_signal(c.gate);
    serex_shutdown(l);
    assert_int_equal(serex_await_termination(l, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(atomic_load(&c.ran), (long)ntasks);
    /* every later task started with at most 2 running, itself included */
    assert_true(atomic_load(&c.most_after) >= 1);
    assert_true(atomic_load(&c.most_after) <= 2);
    serex_event_destroy(c.gate);
    serex_latch_destroy(c.in);
}

static void limiter_set_max_raised_on_a_pool_reaches_the_new_cap(void **state)
{
    struct fixture *f = *state;
    const size_t ntasks = 500;
    serex_executor *l;

    make_pool(f, 8);
    l = make_limiter(f, 0, f->pool, 1);
    /* the first 4 tasks wait until 4 run at once: on a cap of 1 they
     * would wait out TEST_TIMEOUT and fail; the raise lets them meet */
    conc_reset(&f->conc, 4, 4);
    for (size_t i = 0; i < ntasks; i++)
        assert_int_equal(serex_execute(l, conc_task, &f->items[i]), SEREX_OK);
    assert_int_equal(serex_limiter_set_max(l, 4), SEREX_OK);
    serex_shutdown(l);
    assert_int_equal(serex_await_termination(l, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(atomic_load(&f->conc.ran), (long)ntasks);
    assert_int_equal(atomic_load(&f->conc.max_seen), 4);
    assert_int_equal(atomic_load(&f->conc.over), 0);
}

static void limiter_lowered_to_one_is_a_serial_again(void **state)
{
    struct fixture *f = *state;
    struct capped c = {.held = 3};
    struct hb_item *items = calloc(HB_PRODUCERS * HB_PER_PRODUCER,
                                   sizeof *items);
    struct hb_producer pr[HB_PRODUCERS];
    serex_executor *l;

    assert_non_null(items);
    f->capped = &c;
    assert_int_equal(serex_latch_create(c.held, &c.in), SEREX_OK);
    assert_int_equal(serex_event_create_manual(&c.gate), SEREX_OK);
    make_pool(f, 4);
    l = make_limiter(f, 0, f->pool, 3);
    for (size_t i = 0; i < c.held; i++)
        assert_int_equal(serex_execute(l, capped_task, &f->items[i]), SEREX_OK);
    assert_int_equal(serex_latch_wait(c.in, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_limiter_set_max(l, 1), SEREX_OK);
    serex_event_signal(c.gate); /* the three leave as producers submit */
    for (unsigned p = 0; p < HB_PRODUCERS; p++) {
        pr[p] = (struct hb_producer){.lim = l,
                                     .items = &items[p * HB_PER_PRODUCER]};
        for (size_t i = 0; i < HB_PER_PRODUCER; i++)
            pr[p].items[i] = (struct hb_item){&f->hb, p, i};
    }
    for (unsigned p = 0; p < HB_PRODUCERS; p++)
        assert_int_equal(
            serex__thread_start(&pr[p].thread, hb_producer_main, &pr[p]),
            SEREX_OK);
    for (unsigned p = 0; p < HB_PRODUCERS; p++) {
        serex__thread_join(pr[p].thread);
        assert_int_equal(pr[p].rejected, 0);
    }
    serex_shutdown(l);
    assert_int_equal(serex_await_termination(l, TEST_TIMEOUT), SEREX_OK);
    /* plain state, written by tasks on any worker: TSan checks that each
     * happened before the next (promise 3 again, under a cap of 1) */
    assert_int_equal(f->hb.total, HB_PRODUCERS * HB_PER_PRODUCER);
    assert_int_equal(f->hb.disorder, 0);
    assert_int_equal(atomic_load(&c.ran), (long)c.held);
    serex_event_destroy(c.gate);
    serex_latch_destroy(c.in);
    free(items);
}

/* Changes the cap of `lim` among 1, 2 and 3 until told to stop. */
struct toggler {
    serex_executor *lim;
    atomic_bool stop;
    serex__thread thread;
    long calls, bad;
};

static int toggler_main(void *arg)
{
    struct toggler *t = arg;

    for (unsigned i = 0; !atomic_load(&t->stop); i++) {
        if (serex_limiter_set_max(t->lim, 1 + i % 3) != SEREX_OK)
            t->bad++;
        t->calls++;
        if (i % 8 == 7)
            serex__thread_yield();
    }
    return 0;
}

static void limiter_set_max_racing_execute_loses_nothing(void **state)
{
    struct fixture *f = *state;
    struct toggler tog = {.calls = 0};
    long accepted, ran;
    serex_executor *l;

    test_race_init(&f->race, "test-limiter", race_submit, race_task, f);
    f->race_made = true;
    conc_reset(&f->conc, 3, 0); /* over: more than the peak cap at once */
    l = make_limiter(f, 0, f->race.pool, 2);
    tog.lim = l;
    assert_int_equal(serex__thread_start(&tog.thread, toggler_main, &tog),
                     SEREX_OK);
    test_race_start(&f->race);
    accepted = test_race_join(&f->race);
    atomic_store(&tog.stop, true);
    serex__thread_join(tog.thread);
    assert_int_equal(tog.bad, 0);
    assert_true(tog.calls > 0);
    assert_int_equal(accepted, TEST_RACE_TASKS);
    serex_shutdown(l);
    assert_int_equal(serex_await_termination(l, TEST_TIMEOUT), SEREX_OK);
    /* every task ran once, each producer's in its order of submission */
    ran = test_race_check_accounting(&f->race, false);
    assert_int_equal(ran, accepted);
    assert_int_equal(atomic_load(&f->conc.over), 0);
    assert_int_equal(stats_of(l).completed, (uint64_t)ran);
}

/* --- stats, bad input, allocation failure --- */

static void limiter_stats_count_its_tasks(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 2);
    serex_stats st;

    for (size_t i = 0; i < 5; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    st = stats_of(l);
    assert_int_equal(st.submitted, 5);
    assert_int_equal(st.queued, 5);
    assert_int_equal(st.completed, 0);
    test_run_all(f->manual);
    for (size_t i = 5; i < 8; i++)
        assert_int_equal(serex_execute(l, log_task, &f->items[i]), SEREX_OK);
    assert_int_equal(serex_shutdown_now(l, NULL, NULL), 3);
    assert_int_equal(serex_execute(l, never_task, f), SEREX_EREJECTED);
    st = stats_of(l);
    assert_int_equal(st.submitted, 8);
    assert_int_equal(st.completed, 5);
    assert_int_equal(st.queued, 0);
    assert_int_equal(st.rejected, 1);
    assert_int_equal(st.threads, 0);
    assert_int_equal(st.lanes, 0);
    assert_int_equal(st.pending_timers, 0);
}

static void limiter_create_bad_input_is_einval(void **state)
{
    struct fixture *f = *state;
    serex_executor no_ops = {NULL};
    serex_executor *out = (serex_executor *)f; /* must be overwritten */

    assert_int_equal(serex_limiter_create(NULL, 1, &out), SEREX_EINVAL);
    assert_null(out);
    out = (serex_executor *)f;
    assert_int_equal(serex_limiter_create(&no_ops, 1, &out), SEREX_EINVAL);
    assert_null(out);
    out = (serex_executor *)f;
    assert_int_equal(serex_limiter_create(f->manual, 0, &out), SEREX_EINVAL);
    assert_null(out);
    out = (serex_executor *)f;
    assert_int_equal(
        serex_limiter_create(f->manual, SEREX_LIMITER_MAX_RUNNING + 1, &out),
        SEREX_EINVAL);
    assert_null(out);
    assert_int_equal(serex_limiter_create(f->manual, 1, NULL), SEREX_EINVAL);
    assert_int_equal(serex_limiter_create(NULL, 0, NULL), SEREX_EINVAL);
    assert_false(serex_manual_run_one(f->manual));
    make_limiter(f, 0, f->manual, SEREX_LIMITER_MAX_RUNNING);
}

static void limiter_execute_bad_input_is_einval(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 2);
    serex_future *fu = (serex_future *)f;

    assert_int_equal(serex_execute(l, NULL, f), SEREX_EINVAL);
    assert_int_equal(serex_submit(l, NULL, f, &fu), SEREX_EINVAL);
    assert_null(fu);
    assert_int_equal(serex_submit(l, count_call, f, NULL), SEREX_EINVAL);
    assert_int_equal(serex_await_termination(l, -2), SEREX_EINVAL);
    assert_false(serex_manual_run_one(f->manual)); /* nothing queued */
    assert_int_equal(stats_of(l).rejected, 0);
}

static void limiter_create_allocation_failure_is_enomem(void **state)
{
    struct fixture *f = *state;
    unsigned long n, failures = 0;
    int rc = SEREX_ENOMEM;

    serex__cache_trim();
    for (n = 1; n < 64; n++) {
        f->lim[0] = (serex_executor *)f;
        serex__alloc_fail_nth(n);
        rc = serex_limiter_create(f->manual, 2, &f->lim[0]);
        if (rc == SEREX_OK)
            break;
        assert_int_equal(rc, SEREX_ENOMEM);
        assert_null(f->lim[0]);
        failures++;
    }
    serex__alloc_fail_nth(0);
    assert_int_equal(rc, SEREX_OK);
    assert_true(failures >= 1);
    assert_int_equal(serex_execute(f->lim[0], log_task, &f->items[0]),
                     SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 1);
}

static void limiter_execute_allocation_failure_is_enomem_and_queues_nothing(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 1);

    /* idle limiter: the node is the first allocation, from an empty cache */
    serex__cache_trim();
    serex__alloc_fail_nth(1);
    assert_int_equal(serex_execute(l, never_task, f), SEREX_ENOMEM);
    serex__alloc_fail_nth(0);
    assert_false(serex_manual_run_one(f->manual));
    /* the target's allocation for the runner fails: the lone task is the
     * caller's again */
    serex__cache_trim();
    serex__alloc_fail_nth(2);
    assert_int_equal(serex_execute(l, never_task, f), SEREX_ENOMEM);
    serex__alloc_fail_nth(0);
    assert_false(serex_manual_run_one(f->manual));
    /* busy limiter (its runner is queued): only the node is allocated */
    assert_int_equal(serex_execute(l, log_task, &f->items[0]), SEREX_OK);
    serex__cache_trim();
    serex__alloc_fail_nth(1);
    assert_int_equal(serex_execute(l, never_task, f), SEREX_ENOMEM);
    serex__alloc_fail_nth(0);
    assert_int_equal(serex_execute(l, log_task, &f->items[1]), SEREX_OK);
    assert_true(serex_manual_run_one(f->manual));
    assert_false(serex_manual_run_one(f->manual));
    assert_logged_in_order(f, 2);
    /* and the failures did not shut anything down; each counts as
     * rejected (executor.h: every execute that did not return SEREX_OK) */
    assert_int_equal(stats_of(l).submitted, 2);
    assert_int_equal(stats_of(l).rejected, 3);
    serex_shutdown(l);
    assert_int_equal(serex_await_termination(l, 0), SEREX_OK);
}

static void limiter_steady_state_allocates_nothing_per_task(void **state)
{
    struct fixture *f = *state;
    serex_executor *l = make_limiter(f, 0, f->manual, 4);
    unsigned long made;

    /* warm the caches, then count allocations over many tasks */
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < N; i++)
            assert_int_equal(serex_execute(l, log_task, &f->items[i]),
                             SEREX_OK);
        test_run_all(f->manual);
        f->nlog = 0;
    }
    serex__alloc_fail_nth(0);
    for (int round = 0; round < 10; round++) {
        for (size_t i = 0; i < N; i++)
            assert_int_equal(serex_execute(l, log_task, &f->items[i]),
                             SEREX_OK);
        test_run_all(f->manual);
        f->nlog = 0;
    }
    made = serex__alloc_fail_nth(0);
    assert_true(made < 10 * N / 100);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(limiter_starts_tasks_in_submission_order),
        T(limiter_puts_at_most_max_running_runners_on_the_target),
        T(limiter_never_runs_more_than_max_running_at_once),
        T(limiter_runner_runs_at_most_a_batch_then_requeues),
        T(limiter_task_submitted_after_idle_starts_a_new_runner),
        T(limiter_task_executing_on_its_own_limiter_runs_after),
        T(limiter_of_one_on_limiter_keeps_both_orders),
        T(limiter_on_user_executor_keeps_order_and_bound),
        T(limiter_execute_after_shutdown_is_rejected_and_accepted_run),
        T(limiter_shutdown_now_hands_back_queued_in_order),
        T(limiter_shutdown_now_from_own_task_hands_back_the_rest),
        T(limiter_shutdown_now_cancels_futures_and_counts_them),
        T(limiter_shutdown_now_hands_back_a_serials_drain_to_no_one),
        T(limiter_await_after_shutdown_now_does_not_wait_for_the_target),
        T(limiter_stale_runners_dropped_by_the_target_free_it),
        T(limiter_await_times_out_until_shut_down_and_drained),
        T(limiter_idle_shutdown_terminates_at_once),
        T(limiter_target_refusing_a_lone_task_reports_it),
        T(limiter_target_refusing_with_tasks_queued_keeps_them),
        T(limiter_target_refusing_while_a_runner_works_accepts),
        T(limiter_destroy_with_kept_tasks_drops_them),
        T(limiter_target_rejects_resubmission_runner_keeps_running),
        T(limiter_runners_dropped_by_the_target_keep_its_tasks),
        T(limiter_destroy_on_terminated_pool_does_not_hang),
        T(limiter_target_full_with_a_task_behind_goes_on),
        T(limiter_await_starts_an_owed_runner),
        T(limiter_shutdown_now_hands_back_with_a_runner_owed),
        T(limiter_destroy_retries_an_owed_runner_until_it_runs),
        T(limiter_owed_runner_rejected_at_retry_breaks),
        T(limiter_allocates_under_no_spinlock),
        T(limiter_await_and_destroy_from_own_task_is_edeadlk),
        T(limiter_await_and_destroy_from_target_task_is_edeadlk),
        T(limiter_await_and_destroy_from_own_task_on_pool_is_edeadlk),
        T(limiter_await_from_unrelated_task_is_not_edeadlk),
        T(limiter_of_one_future_wait_behind_caller_is_edeadlk),
        T(limiter_reaches_and_never_passes_its_bound_on_a_pool),
        T(limiter_of_one_tasks_from_many_producers_happen_in_order),
        T(limiter_destroy_waits_for_running_and_queued_tasks),
        T(limiter_racing_producers_lose_nothing),
        T(limiter_racing_producers_of_one_keep_their_order),
        T(limiter_shutdown_racing_execute_runs_every_accepted),
        T(limiter_shutdown_now_racing_execute_loses_nothing),
        T(limiter_of_one_shutdown_now_racing_execute_loses_nothing),
        T(limiter_set_max_raised_starts_runners_for_waiting_tasks),
        T(limiter_set_max_raised_from_its_task_runs_more_at_once),
        T(limiter_set_max_lowered_lets_the_running_finish_then_holds),
        T(limiter_set_max_lowered_to_two_holds_two),
        T(limiter_set_max_lowered_after_a_raise_holds),
        T(limiter_set_max_moves_the_serial_edeadlk_rule),
        T(limiter_set_max_after_shutdown_runs_the_queued_under_it),
        T(limiter_set_max_after_shutdown_now_only_records_it),
        T(limiter_set_max_refused_by_the_target_loses_nothing),
        T(limiter_set_max_bad_input_is_einval),
        T(limiter_set_max_lowered_on_a_pool_holds_after_the_drain),
        T(limiter_set_max_raised_on_a_pool_reaches_the_new_cap),
        T(limiter_lowered_to_one_is_a_serial_again),
        T(limiter_set_max_racing_execute_loses_nothing),
        T(limiter_stats_count_its_tasks),
        T(limiter_create_bad_input_is_einval),
        T(limiter_execute_bad_input_is_einval),
        T(limiter_create_allocation_failure_is_enomem),
        T(limiter_execute_allocation_failure_is_enomem_and_queues_nothing),
        T(limiter_steady_state_allocates_nothing_per_task),
    };
#undef T

    return cmocka_run_group_tests_name("limiter", tests, NULL, NULL);
}
