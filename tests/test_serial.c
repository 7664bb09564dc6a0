/* SPDX-License-Identifier: MIT */
/*
 * test_serial.c - the serial executor: promises 1-5, 7-9 of docs/contract.md.
 *
 * Order, batching and fairness are shown on the manual executor (and on a
 * small user-written executor), where every drain run is one explicit
 * serex_manual_run_one, so the counts after each run are exact. The pool
 * tests check what only threads can show: happens-before between tasks run
 * on different workers, starvation on a 1-thread pool, and EDEADLK from a
 * worker. Every cross-thread wait is bounded by TEST_TIMEOUT.
 */
#include "test_util.h"
#include "test_wrap_executor.h"
#include "test_user_executor.h"

#include <stdlib.h> /* calloc, free */

#include "nodecache_internal.h" /* serex__cache_trim */

#define N 1000
#define NSER 3
#define HB_PRODUCERS 3
_Static_assert(HB_PRODUCERS <= TEST_ORDER_PRODUCERS, "test_order size");
#define HB_PER_PRODUCER 2000

struct fixture;

/* A task's argument: which fixture to log into and the value to log. */
struct item {
    struct fixture *f;
    size_t v;
};

/* Plain (non-atomic) state of the happens-before test: only the serial's
 * order protects it, so TSan reports any missing happens-before. */
struct hb_item {
    struct test_order *s;
    unsigned producer;
    size_t seq;
};

struct hb_producer {
    serex_executor *serial;
    struct hb_item *items; /* HB_PER_PRODUCER of them */
    serex__thread thread;
    long rejected;
};

/* A user-written executor: a fixed ring run by hand, with no frames. */
struct fixture {
    serex_executor *manual;     /* made in setup */
    serex_executor *pool;       /* made by the tests that need one */
    serex_executor *ser[NSER];  /* destroyed last-made first */
    struct test_user user;
    serex_event *done;
    _Atomic long ran;           /* count_task runs */
    _Atomic long target;        /* ran at which count_task signals done */
    atomic_int calls;           /* count_call runs */
    struct item items[2 * N];
    size_t log[2 * N];          /* written by log_task, in run order */
    size_t nlog;
    serex_stats seen[2 * N]; /* written by stats_task, in run order */
    size_t nseen;
    bool refill; /* stats_task submits one more first */
    struct test_order hb;
    struct test_pending pending;
    serex_fn pending_fns[2 * N];
    void *pending_args[2 * N];
};

/* --- tasks --- */

/* Appends its value to the log. Plain writes: the serial orders them. */
static void log_task(void *arg)
{
    struct item *it = arg;

    it->f->log[it->f->nlog++] = it->v;
}

static void count_task(void *arg)
{
    struct fixture *f = arg;

    /* relaxed: the done event (or await) orders what the test reads */
    if (atomic_fetch_add_explicit(&f->ran, 1, memory_order_relaxed) + 1 ==
        atomic_load_explicit(&f->target, memory_order_relaxed))
        serex_event_signal(f->done);
}

static void *count_call(void *arg)
{
    struct item *it = arg;

    atomic_fetch_add(&it->f->calls, 1);
    it->f->log[it->f->nlog++] = it->v;
    return it;
}

static void hb_task(void *arg)
{
    struct hb_item *it = arg;

    test_order_see(it->s, it->producer, it->seq);
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
    /* Drains still queued on the manual executor run first (every test
     * leaves only harmless tasks there), so no destroy waits on them. */
    if (f->manual != NULL)
        test_run_all(f->manual);
    while (test_user_run_one(&f->user))
        ;
    for (int i = NSER - 1; i >= 0; i--)
        if (f->ser[i] != NULL)
            assert_int_equal(serex_destroy(f->ser[i]), SEREX_OK);
    if (f->manual != NULL)
        assert_int_equal(serex_destroy(f->manual), SEREX_OK);
    if (f->pool != NULL)
        assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    serex_event_destroy(f->done);
    free(f);
    return 0;
}

static serex_stats stats_of_ex(serex_executor *ex)
{
    serex_stats st;

    assert_int_equal(serex_executor_stats(ex, &st), SEREX_OK);
    return st;
}

/* Makes f->ser[i] on @target with the given batch (0: default). */
static serex_executor *make_serial(struct fixture *f, int i,
                                   serex_executor *target, unsigned batch)
{
    serex_serial_config cfg = {.batch = batch};

    assert_int_equal(serex_serial_create(target, batch ? &cfg : NULL,
                                         &f->ser[i]),
                     SEREX_OK);
    assert_non_null(f->ser[i]);
    return f->ser[i];
}

static void make_pool(struct fixture *f, unsigned threads)
{
    serex_pool_config cfg = {.threads = threads, .name = "test-serial"};

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
}

/* relaxed: tasks read it relaxed too (see count_task) */
static void set_target(struct fixture *f, long target)
{
    atomic_store_explicit(&f->target, target, memory_order_relaxed);
}

/* --- order and batching, on the manual executor --- */

static void serial_runs_tasks_in_submission_order(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);

    for (size_t i = 0; i < N; i++)
        assert_int_equal(serex_execute(s, log_task, &f->items[i]), SEREX_OK);
    /* nothing runs until the target runs the drain */
    assert_int_equal(f->nlog, 0);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, N);
    for (size_t i = 0; i < N; i++)
        assert_int_equal(f->log[i], i);
}

static void serial_drain_runs_at_most_batch_then_requeues(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 4);

    for (size_t i = 0; i < 10; i++)
        assert_int_equal(serex_execute(s, log_task, &f->items[i]), SEREX_OK);
    /* one drain is queued on the target, however many tasks there are */
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, 4);
    assert_true(serex_manual_run_one(f->manual)); /* the requeued drain */
    assert_int_equal(f->nlog, 8);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, 10);
    /* idle: the drain did not requeue itself */
    assert_false(serex_manual_run_one(f->manual));
    for (size_t i = 0; i < 10; i++)
        assert_int_equal(f->log[i], i);
}

static void serial_default_batch_is_64(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);

    for (size_t i = 0; i < 100; i++)
        assert_int_equal(serex_execute(s, log_task, &f->items[i]), SEREX_OK);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, 64);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, 100);
    assert_false(serex_manual_run_one(f->manual));
}

static void serial_batch_of_one_runs_one_task_per_drain(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 1);

    for (size_t i = 0; i < 3; i++)
        assert_int_equal(serex_execute(s, log_task, &f->items[i]), SEREX_OK);
    for (size_t i = 1; i <= 3; i++) {
        assert_true(serex_manual_run_one(f->manual));
        assert_int_equal(f->nlog, i);
    }
    assert_false(serex_manual_run_one(f->manual));
}

static void serial_task_submitted_after_idle_starts_a_new_drain(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);

    for (size_t round = 0; round < 3; round++) {
        assert_int_equal(serex_execute(s, log_task, &f->items[round]),
                         SEREX_OK);
        assert_int_equal(serex_manual_run_pending(f->manual), 1);
        assert_int_equal(f->nlog, round + 1);
        assert_false(serex_manual_run_one(f->manual));
    }
}

/* A task that queues its successor on the same serial while running. */
struct chain {
    serex_executor *serial;
    struct item *items;
    size_t left;
};

static void chain_task(void *arg)
{
    struct chain *c = arg;

    log_task(&c->items[0]);
    c->items++;
    if (--c->left > 0)
        assert_int_equal(serex_execute(c->serial, chain_task, c), SEREX_OK);
}

static void serial_task_executing_on_its_own_serial_runs_after(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 4);
    struct chain c = {s, &f->items[0], 10};

    assert_int_equal(serex_execute(s, chain_task, &c), SEREX_OK);
    /* each drain runs the chain up to the batch, then yields */
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, 4);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 10);
    for (size_t i = 0; i < 10; i++)
        assert_int_equal(f->log[i], i);
}

static void serial_two_serials_on_one_target_interleave_in_batches(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *a = make_serial(f, 0, f->manual, 4);
    serex_executor *b = make_serial(f, 1, f->manual, 4);
    /* A's values are 0.., B's are N..; the drains alternate on the FIFO */
    const size_t expect[] = {0,     1,     2,     3,     N + 0, N + 1, N + 2,
                             N + 3, 4,     5,     6,     7,     N + 4, N + 5,
                             N + 6, N + 7, 8,     9,     N + 8, N + 9};

    for (size_t i = 0; i < 10; i++)
        assert_int_equal(serex_execute(a, log_task, &f->items[i]), SEREX_OK);
    for (size_t i = 0; i < 10; i++)
        assert_int_equal(serex_execute(b, log_task, &f->items[N + i]),
                         SEREX_OK);
    for (size_t run = 1; run <= 4; run++) {
        assert_true(serex_manual_run_one(f->manual));
        assert_int_equal(f->nlog, 4 * run); /* never more than a batch */
    }
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 20);
    for (size_t i = 0; i < 20; i++)
        assert_int_equal(f->log[i], expect[i]);
}

static void serial_on_serial_keeps_both_orders(void **state)
{
    struct fixture *f = *state;
    serex_executor *outer = make_serial(f, 0, f->manual, 4);
    serex_executor *inner = make_serial(f, 1, outer, 3);
    size_t next_a = 0, next_b = N;

    /* inner's tasks (N..) run inside drains that are outer's tasks (0..) */
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
    /* inner's drains bound it to 3 per outer task: it was interleaved */
    assert_true(f->log[0] == N + 0 && f->log[3] != N + 3);
    serex_shutdown(inner);
    assert_int_equal(serex_await_termination(inner, 0), SEREX_OK);
    /* shutting inner down left outer running */
    assert_int_equal(serex_execute(outer, log_task, &f->items[20]), SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(f->log[40], 20);
}

static void serial_on_user_executor_keeps_order_and_batch(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, &f->user.base, 4);

    for (size_t i = 0; i < 10; i++)
        assert_int_equal(serex_execute(s, log_task, &f->items[i]), SEREX_OK);
    assert_int_equal(f->user.tail - f->user.head, 1); /* one drain */
    assert_true(test_user_run_one(&f->user));
    assert_int_equal(f->nlog, 4);
    while (test_user_run_one(&f->user))
        ;
    assert_int_equal(f->nlog, 10);
    for (size_t i = 0; i < 10; i++)
        assert_int_equal(f->log[i], i);
    /* the serial's own frame gives EDEADLK on a target that has none */
    struct test_self_wait w = {.ex = s, .done = f->done};

    assert_int_equal(serex_execute(s, test_self_wait_task, &w), SEREX_OK);
    while (test_user_run_one(&f->user))
        ;
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w);
    serex_shutdown(s);
    assert_int_equal(serex_await_termination(s, 0), SEREX_OK);
    /* the serial never shut its target down */
    assert_false(f->user.shut);
}

/* --- shutdown, shutdown_now, await --- */

static void serial_execute_after_shutdown_is_rejected_and_accepted_run(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);

    for (size_t i = 0; i < 5; i++)
        assert_int_equal(serex_execute(s, log_task, &f->items[i]), SEREX_OK);
    serex_shutdown(s);
    serex_shutdown(s); /* idempotent */
    assert_int_equal(serex_execute(s, never_task, f), SEREX_EREJECTED);
    /* the target is not shut down: only the serial is */
    assert_int_equal(serex_execute(f->manual, log_task, &f->items[N]),
                     SEREX_OK);
    assert_int_equal(serex_await_termination(s, 0), SEREX_ETIMEDOUT);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 6);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(f->log[i], i);
    assert_int_equal(f->log[5], N);
    assert_int_equal(serex_await_termination(s, 0), SEREX_OK);
    assert_int_equal(serex_await_termination(f->manual, 0), SEREX_ETIMEDOUT);
}

static void serial_shutdown_now_hands_back_queued_in_order(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 4);
    size_t handed;

    for (size_t i = 0; i < 10; i++)
        assert_int_equal(serex_execute(s, log_task, &f->items[i]), SEREX_OK);
    assert_true(serex_manual_run_one(f->manual)); /* 4 ran */
    handed = serex_shutdown_now(s, test_pending_cb, &f->pending);
    assert_int_equal(handed, 6);
    assert_int_equal(f->pending.n, 6);
    for (size_t i = 0; i < 6; i++) {
        assert_ptr_equal(f->pending.fns[i], log_task);
        assert_ptr_equal(f->pending.args[i], &f->items[4 + i]);
    }
    assert_int_equal(serex_execute(s, never_task, f), SEREX_EREJECTED);
    assert_int_equal(serex_shutdown_now(s, test_pending_cb, &f->pending), 0);
    /* the requeued drain finds nothing: no handed-back task runs */
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 4);
    /* ran + handed back == accepted */
    assert_int_equal(f->nlog + handed, 10);
    assert_int_equal(serex_await_termination(s, 0), SEREX_OK);
}

static void serial_shutdown_now_leaves_target_tasks_alone(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);

    assert_int_equal(serex_execute(f->manual, log_task, &f->items[N]),
                     SEREX_OK);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(serex_execute(s, never_task, &f->items[i]), SEREX_OK);
    assert_int_equal(serex_shutdown_now(s, test_pending_cb, &f->pending), 3);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 1);
    assert_int_equal(f->log[0], N);
    assert_int_equal(serex_execute(f->manual, log_task, &f->items[N + 1]),
                     SEREX_OK);
}

struct self_stop {
    serex_executor *serial;
    struct test_pending *pending;
    size_t handed;
};

static void self_stop_task(void *arg)
{
    struct self_stop *st = arg;

    st->handed = serex_shutdown_now(st->serial, test_pending_cb, st->pending);
}

static void serial_shutdown_now_from_own_task_hands_back_the_rest(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);
    struct self_stop st = {s, &f->pending, 0};

    assert_int_equal(serex_execute(s, log_task, &f->items[0]), SEREX_OK);
    assert_int_equal(serex_execute(s, self_stop_task, &st), SEREX_OK);
    for (size_t i = 1; i <= 8; i++)
        assert_int_equal(serex_execute(s, log_task, &f->items[i]), SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(st.handed, 8);
    assert_int_equal(f->nlog, 1);
    for (size_t i = 0; i < 8; i++)
        assert_ptr_equal(f->pending.args[i], &f->items[i + 1]);
    assert_int_equal(serex_await_termination(s, 0), SEREX_OK);
}

static void serial_shutdown_now_cancels_futures_and_counts_them(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);
    serex_future *f0 = NULL, *f1 = NULL;

    assert_int_equal(serex_submit(s, count_call, &f->items[0], &f0), SEREX_OK);
    assert_int_equal(serex_execute(s, never_task, &f->items[1]), SEREX_OK);
    assert_int_equal(serex_submit(s, count_call, &f->items[2], &f1), SEREX_OK);
    assert_int_equal(serex_shutdown_now(s, test_pending_cb, &f->pending), 3);
    assert_int_equal(f->pending.n, 1); /* futures are cancelled instead */
    assert_ptr_equal(f->pending.args[0], &f->items[1]);
    assert_int_equal(serex_future_wait(f0, 0), SEREX_ECANCELED);
    assert_int_equal(serex_future_wait(f1, 0), SEREX_ECANCELED);
    test_run_all(f->manual);
    assert_int_equal(atomic_load(&f->calls), 0);
    serex_future_release(f0);
    serex_future_release(f1);
}

static void serial_await_after_shutdown_now_does_not_wait_for_the_target(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);

    /*
     * shutdown_now took back every accepted task: none is left to wait
     * for, so await says OK and destroy returns, even though the target
     * has not run the serial's (now empty) drain yet. Otherwise destroy
     * would hang on a manual executor nobody runs any more.
     */
    assert_int_equal(serex_execute(s, never_task, f), SEREX_OK);
    assert_int_equal(serex_shutdown_now(s, NULL, NULL), 1);
    assert_int_equal(serex_await_termination(s, 0), SEREX_OK);
    assert_int_equal(serex_destroy(s), SEREX_OK);
    f->ser[0] = NULL;
    /* the target runs the stale drain later: it must be harmless */
    test_run_all(f->manual);
}

static void serial_await_times_out_until_shut_down_and_drained(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);

    assert_int_equal(serex_await_termination(s, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_await_termination(s, MS), SEREX_ETIMEDOUT);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(serex_execute(s, log_task, &f->items[i]), SEREX_OK);
    serex_shutdown(s);
    assert_int_equal(serex_await_termination(s, 0), SEREX_ETIMEDOUT);
    test_run_all(f->manual);
    assert_int_equal(serex_await_termination(s, 0), SEREX_OK);
    assert_int_equal(serex_await_termination(s, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_await_termination(s, SEREX_FOREVER), SEREX_OK);
    assert_int_equal(serex_await_termination(s, -2), SEREX_EINVAL);
}

static void serial_idle_shutdown_terminates_at_once(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);

    serex_shutdown(s);
    assert_int_equal(serex_await_termination(s, 0), SEREX_OK);
    assert_false(serex_manual_run_one(f->manual));
}

/* --- the target refuses --- */

static void serial_target_refusing_a_lone_task_reports_it(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);

    serex_shutdown(f->manual);
    /* the refusal is the caller's (serial.h): nothing queued, no harm */
    assert_int_equal(serex_execute(s, never_task, &f->items[0]),
                     SEREX_EREJECTED);
    assert_int_equal(serex_execute(s, never_task, &f->items[1]),
                     SEREX_EREJECTED);
    assert_false(serex_manual_run_one(f->manual));
    assert_int_equal(serex_shutdown_now(s, test_pending_cb, &f->pending), 0);
    assert_int_equal(serex_await_termination(s, 0), SEREX_OK);
}

/*
 * A target that, asked to start the serial's drain, first lets another
 * task into the serial (as a concurrent producer would between the first
 * task's count and its drain's submission), then refuses.
 */
struct refusing_target {
    serex_executor base;
    serex_executor *serial;
    struct fixture *f;
};

static int refusing_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct refusing_target *rt = (struct refusing_target *)(void *)ex;

    (void)fn;
    (void)arg;
    /* queued behind the first task: no drain of its own (wip was 1) */
    assert_int_equal(serex_execute(rt->serial, never_task, &rt->f->items[1]),
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
    refusing_execute, refusing_shutdown, refusing_shutdown_now,
    refusing_await, refusing_destroy,
};

static void serial_target_refusing_with_tasks_queued_keeps_them(
    void **state)
{
    struct fixture *f = *state;
    struct refusing_target rt = {{&refusing_ops}, NULL, f};
    serex_executor *s = make_serial(f, 0, &rt.base, 0);

    rt.serial = s;
    /* a task is queued behind ours when the drain is refused: both are
     * kept (accepted: SEREX_OK), new ones refused (promise 5,
     * docs/contract.md) */
    assert_int_equal(serex_execute(s, never_task, &f->items[0]), SEREX_OK);
    assert_int_equal(serex_execute(s, never_task, &f->items[2]),
                     SEREX_EREJECTED);
    assert_int_equal(serex_shutdown_now(s, test_pending_cb, &f->pending), 2);
    assert_int_equal(f->pending.n, 2);
    assert_ptr_equal(f->pending.args[0], &f->items[0]);
    assert_ptr_equal(f->pending.args[1], &f->items[1]);
    assert_int_equal(serex_await_termination(s, 0), SEREX_OK);
}

static void serial_destroy_with_kept_tasks_drops_them(void **state)
{
    struct fixture *f = *state;
    struct refusing_target rt = {{&refusing_ops}, NULL, f};
    serex_executor *s = make_serial(f, 0, &rt.base, 0);
    serex_future *fu = NULL;

    rt.serial = s;
    assert_int_equal(serex_submit(s, count_call, &f->items[0], &fu),
                     SEREX_OK);
    /* the target can never run them: destroy drops them (the future is
     * cancelled) instead of hanging */
    assert_int_equal(serex_destroy(s), SEREX_OK);
    f->ser[0] = NULL;
    assert_int_equal(serex_future_wait(fu, 0), SEREX_ECANCELED);
    assert_int_equal(atomic_load(&f->calls), 0);
    serex_future_release(fu);
}

static void serial_target_rejects_resubmission_drain_keeps_running(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 2);

    for (size_t i = 0; i < 5; i++)
        assert_int_equal(serex_execute(s, log_task, &f->items[i]), SEREX_OK);
    serex_shutdown(f->manual); /* the queued drain still runs */
    assert_true(serex_manual_run_one(f->manual));
    /* the resubmission after 2 was refused: the drain went on in place */
    assert_int_equal(f->nlog, 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(f->log[i], i);
    assert_false(serex_manual_run_one(f->manual));
    serex_shutdown(s);
    assert_int_equal(serex_await_termination(s, 0), SEREX_OK);
}

static void serial_destroy_on_terminated_pool_does_not_hang(void **state)
{
    struct fixture *f = *state;
    serex_executor *s;

    make_pool(f, 1);
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    s = make_serial(f, 0, f->pool, 0);
    assert_int_equal(serex_execute(s, never_task, f), SEREX_EREJECTED);
    assert_int_equal(serex_execute(s, never_task, f), SEREX_EREJECTED);
    assert_int_equal(serex_destroy(s), SEREX_OK);
    f->ser[0] = NULL;
}

static void destroy_ser0(struct fixture *f)
{
    assert_int_equal(serex_destroy(f->ser[0]), SEREX_OK);
    f->ser[0] = NULL;
}

static void assert_logged(struct fixture *f, const size_t *want, size_t n)
{
    assert_int_equal(f->nlog, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(f->log[i], want[i]);
}

/*
 * A passing refusal: the target is full once, while a second task queues
 * behind the first. Both are kept (SEREX_OK), the drain is owed, and the
 * next execute submits it again: the serial goes on, in order, losing
 * nothing (serial.h: a full target costs the lone task at most).
 */
static void serial_target_full_once_with_a_task_behind_goes_on(void **state)
{
    struct fixture *f = *state;
    struct test_full_target ft;
    serex_executor *s;
    serex_stats st;
    const size_t want[] = {0, 1, 2, 3, 4};

    test_full_init(&ft, f->manual, 1, log_task, &f->items[1]);
    s = make_serial(f, 0, &ft.w.base, 0);
    ft.wrapper = s;
    assert_int_equal(serex_execute(s, log_task, &f->items[0]), SEREX_OK);
    assert_int_equal(atomic_load(&ft.refusals), 0);
    assert_false(serex_manual_run_one(f->manual)); /* no drain: owed */
    /* the next execute submits the owed drain */
    assert_int_equal(serex_execute(s, log_task, &f->items[2]), SEREX_OK);
    assert_int_equal(atomic_load(&ft.calls), 2);
    assert_true(serex_manual_run_one(f->manual));
    assert_false(serex_manual_run_one(f->manual));
    assert_logged(f, want, 3);
    /* and it is a serial as before */
    assert_int_equal(serex_execute(s, log_task, &f->items[3]), SEREX_OK);
    assert_int_equal(serex_execute(s, log_task, &f->items[4]), SEREX_OK);
    test_run_all(f->manual);
    assert_logged(f, want, 5);
    st = stats_of_ex(s);
    assert_int_equal(st.submitted, 5);
    assert_int_equal(st.completed, 5);
    assert_int_equal(st.queued, 0);
    assert_int_equal(st.rejected, 0);
    destroy_ser0(f); /* before ft goes out of scope */
}

/* The same, the target still full at the next execute: the drain stays
 * owed, and the execute after that submits it. */
static void serial_target_full_again_keeps_the_drain_owed(void **state)
{
    struct fixture *f = *state;
    struct test_full_target ft;
    serex_executor *s;
    const size_t want[] = {0, 1, 2, 3};

    test_full_init(&ft, f->manual, 2, log_task, &f->items[1]);
    s = make_serial(f, 0, &ft.w.base, 0);
    ft.wrapper = s;
    assert_int_equal(serex_execute(s, log_task, &f->items[0]), SEREX_OK);
    assert_int_equal(serex_execute(s, log_task, &f->items[2]), SEREX_OK);
    assert_false(serex_manual_run_one(f->manual)); /* refused again */
    assert_int_equal(serex_execute(s, log_task, &f->items[3]), SEREX_OK);
    assert_int_equal(atomic_load(&ft.calls), 3);
    test_run_all(f->manual);
    assert_logged(f, want, 4);
    destroy_ser0(f); /* before ft goes out of scope */
}

/* Shut down with the drain owed: await_termination submits it (a look
 * with timeout 0 too), and ends once the tasks ran. */
static void serial_await_submits_an_owed_drain(void **state)
{
    struct fixture *f = *state;
    struct test_full_target ft;
    serex_executor *s;
    const size_t want[] = {0, 1};

    test_full_init(&ft, f->manual, 1, log_task, &f->items[1]);
    s = make_serial(f, 0, &ft.w.base, 0);
    ft.wrapper = s;
    assert_int_equal(serex_execute(s, log_task, &f->items[0]), SEREX_OK);
    serex_shutdown(s);
    assert_int_equal(serex_execute(s, never_task, f), SEREX_EREJECTED);
    assert_int_equal(serex_await_termination(s, 0), SEREX_ETIMEDOUT);
    assert_int_equal(atomic_load(&ft.calls), 2); /* resubmitted */
    assert_int_equal(serex_await_termination(s, 0), SEREX_ETIMEDOUT);
    assert_int_equal(atomic_load(&ft.calls), 2); /* once */
    test_run_all(f->manual);
    assert_logged(f, want, 2);
    assert_int_equal(serex_await_termination(s, 0), SEREX_OK);
    destroy_ser0(f); /* before ft goes out of scope */
}

/* shutdown_now with the drain owed hands every task back, in order. */
static void serial_shutdown_now_hands_back_an_owed_drains_tasks(void **state)
{
    struct fixture *f = *state;
    struct test_full_target ft;
    serex_executor *s;

    test_full_init(&ft, f->manual, 1, log_task, &f->items[1]);
    s = make_serial(f, 0, &ft.w.base, 0);
    ft.wrapper = s;
    assert_int_equal(serex_execute(s, never_task, &f->items[0]), SEREX_OK);
    assert_int_equal(serex_shutdown_now(s, test_pending_cb, &f->pending), 2);
    assert_ptr_equal(f->pending.args[0], &f->items[0]);
    assert_ptr_equal(f->pending.args[1], &f->items[1]);
    assert_int_equal(serex_await_termination(s, 0), SEREX_OK);
    assert_int_equal(atomic_load(&ft.calls), 1);
    assert_false(serex_manual_run_one(f->manual));
    destroy_ser0(f); /* before ft goes out of scope */
}

/*
 * A bounded serial, full, with its drain owed: an execute refused by the
 * serial's own cap still submits the drain (else nothing would free a
 * place, and serex_execute_wait would wait for ever).
 */
static void serial_bounded_full_submits_an_owed_drain(void **state)
{
    struct fixture *f = *state;
    serex_serial_config cfg = {.queue_capacity = 2};
    struct test_full_target ft;
    serex_executor *s;
    const size_t want[] = {0, 1, 2};

    test_full_init(&ft, f->manual, 1, log_task, &f->items[1]);
    assert_int_equal(serex_serial_create(&ft.w.base, &cfg, &f->ser[0]), SEREX_OK);
    s = f->ser[0];
    ft.wrapper = s;
    assert_int_equal(serex_execute(s, log_task, &f->items[0]), SEREX_OK);
    assert_int_equal(serex_execute(s, log_task, &f->items[2]), SEREX_EFULL);
    assert_int_equal(atomic_load(&ft.calls), 2); /* the drain: resubmitted */
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(serex_execute(s, log_task, &f->items[2]), SEREX_OK);
    test_run_all(f->manual);
    assert_logged(f, want, 3);
    destroy_ser0(f); /* before ft goes out of scope */
}

/*
 * On a pool, the target full for its first three submissions: destroy
 * (no execute comes after the refusal) retries the owed drain while it
 * waits, and every task runs, in order.
 */
static void serial_destroy_retries_an_owed_drain_until_it_runs(void **state)
{
    struct fixture *f = *state;
    struct test_full_target ft;
    serex_executor *s;
    const size_t want[] = {0, 1};

    make_pool(f, 1);
    test_full_init(&ft, f->pool, 3, log_task, &f->items[1]);
    s = make_serial(f, 0, &ft.w.base, 0);
    ft.wrapper = s;
    assert_int_equal(serex_execute(s, log_task, &f->items[0]), SEREX_OK);
    assert_int_equal(serex_destroy(s), SEREX_OK);
    f->ser[0] = NULL;
    assert_int_equal(atomic_load(&ft.refusals), 0);
    assert_logged(f, want, 2);
}

/* The target refuses with SEREX_EREJECTED at the retry: shut down for
 * good, so the serial breaks as before, and destroy drops what it kept. */
static void serial_owed_drain_rejected_at_retry_breaks(void **state)
{
    struct fixture *f = *state;
    struct test_full_target ft;
    serex_executor *s;
    serex_future *fu = NULL;

    test_full_init(&ft, f->manual, 1, log_task, &f->items[1]);
    s = make_serial(f, 0, &ft.w.base, 0);
    ft.wrapper = s;
    assert_int_equal(serex_submit(s, count_call, &f->items[0], &fu), SEREX_OK);
    serex_shutdown(f->manual);
    assert_int_equal(serex_execute(s, never_task, f), SEREX_OK); /* kept */
    assert_int_equal(serex_execute(s, never_task, f), SEREX_EREJECTED);
    assert_int_equal(serex_destroy(s), SEREX_OK);
    f->ser[0] = NULL;
    assert_int_equal(serex_future_wait(fu, 0), SEREX_ECANCELED);
    assert_int_equal(atomic_load(&f->calls), 0);
    assert_int_equal(f->nlog, 0);
    serex_future_release(fu);
}

/*
 * Nothing in a serial allocates while it holds a spinlock (pop_lock):
 * execute, drains, a take-back, an owed drain, shutdown_now. Debug builds
 * count the allocations made under a serex spinlock.
 */
static void serial_allocates_under_no_spinlock(void **state)
{
    struct fixture *f = *state;
    struct test_full_target ft;
    serex_executor *s;

#ifdef NDEBUG
    skip(); /* the count is kept in Debug builds only */
#endif
    test_full_init(&ft, &f->user.base, 1, log_task, &f->items[1]);
    (void)serex__alloc_spin_count();
    s = make_serial(f, 0, &ft.w.base, 2);
    ft.wrapper = s;
    assert_int_equal(serex_execute(s, log_task, &f->items[0]), SEREX_OK);
    for (size_t i = 2; i < 8; i++)
        assert_int_equal(serex_execute(s, log_task, &f->items[i]), SEREX_OK);
    while (test_user_run_one(&f->user))
        ;
    atomic_store(&ft.refusals, 1); /* a lone task taken back */
    assert_int_equal(serex_execute(s, never_task, f), SEREX_EFULL);
    for (size_t i = 8; i < 12; i++)
        assert_int_equal(serex_execute(s, never_task, &f->items[i]), SEREX_OK);
    assert_int_equal(serex_shutdown_now(s, NULL, NULL), 4);
    destroy_ser0(f);
    assert_int_equal(f->nlog, 8);
    assert_int_equal(serex__alloc_spin_count(), 0);
}

/* --- futures --- */

static void serial_cancelled_queued_future_never_runs(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);
    serex_future *fu[3];

    for (size_t i = 0; i < 3; i++)
        assert_int_equal(serex_submit(s, count_call, &f->items[i], &fu[i]),
                         SEREX_OK);
    assert_true(serex_future_cancel(fu[1]));
    assert_false(serex_future_cancel(fu[1]));
    assert_int_equal(serex_future_wait(fu[1], 0), SEREX_ECANCELED);
    test_run_all(f->manual);
    assert_int_equal(atomic_load(&f->calls), 2);
    assert_int_equal(f->nlog, 2);
    assert_int_equal(f->log[0], 0);
    assert_int_equal(f->log[1], 2);
    assert_int_equal(serex_future_wait(fu[0], 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(fu[0]), &f->items[0]);
    assert_int_equal(serex_future_wait(fu[1], 0), SEREX_ECANCELED);
    assert_null(serex_future_value(fu[1]));
    assert_int_equal(serex_future_wait(fu[2], 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(fu[2]), &f->items[2]);
    assert_false(serex_future_cancel(fu[2]));
    for (size_t i = 0; i < 3; i++)
        serex_future_release(fu[i]);
}

static void serial_futures_on_pool_complete_in_order(void **state)
{
    struct fixture *f = *state;
    serex_executor *s;
    serex_future *fu[64];

    make_pool(f, 2);
    s = make_serial(f, 0, f->pool, 8);
    for (size_t i = 0; i < 64; i++)
        assert_int_equal(serex_submit(s, count_call, &f->items[i], &fu[i]),
                         SEREX_OK);
    for (size_t i = 0; i < 64; i++) {
        assert_int_equal(serex_future_wait(fu[i], TEST_TIMEOUT), SEREX_OK);
        assert_ptr_equal(serex_future_value(fu[i]), &f->items[i]);
        serex_future_release(fu[i]);
    }
    serex_shutdown(s);
    assert_int_equal(serex_await_termination(s, TEST_TIMEOUT), SEREX_OK);
    for (size_t i = 0; i < 64; i++)
        assert_int_equal(f->log[i], i);
}

/* --- EDEADLK --- */

static void serial_await_and_destroy_from_own_task_is_edeadlk(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);
    struct test_self_wait w = {.ex = s, .done = f->done};

    assert_int_equal(serex_execute(s, test_self_wait_task, &w), SEREX_OK);
    test_run_all(f->manual);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w);
    /* destroy did nothing: the serial still works */
    assert_int_equal(serex_execute(s, log_task, &f->items[0]), SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 1);
}

static void serial_await_and_destroy_from_target_task_is_edeadlk(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);
    struct test_self_wait w = {.ex = s, .done = f->done};

    /* a task of the executor the serial runs on (promise 7) */
    assert_int_equal(serex_execute(f->manual, test_self_wait_task, &w), SEREX_OK);
    test_run_all(f->manual);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w);
    assert_int_equal(serex_execute(s, log_task, &f->items[0]), SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 1);
}

static void serial_await_from_task_of_outer_serial_is_edeadlk(void **state)
{
    struct fixture *f = *state;
    serex_executor *outer = make_serial(f, 0, f->manual, 0);
    serex_executor *inner = make_serial(f, 1, outer, 0);
    struct test_self_wait w1 = {.ex = inner, .done = f->done};
    struct test_self_wait w2 = {.ex = inner, .done = f->done};

    /* inner runs on outer, which runs on manual: both are below inner */
    assert_int_equal(serex_execute(outer, test_self_wait_task, &w1), SEREX_OK);
    test_run_all(f->manual);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w1);
    assert_int_equal(serex_execute(f->manual, test_self_wait_task, &w2), SEREX_OK);
    test_run_all(f->manual);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w2);
}

static void serial_await_and_destroy_from_own_task_on_pool_is_edeadlk(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *s;
    struct test_self_wait w = {.done = f->done};
    struct test_self_wait wt = {.done = f->done};

    make_pool(f, 2);
    s = make_serial(f, 0, f->pool, 0);
    w.ex = wt.ex = s;
    assert_int_equal(serex_execute(s, test_self_wait_task, &w), SEREX_OK);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w);
    /* and from a plain task of the pool the serial runs on */
    assert_int_equal(serex_execute(f->pool, test_self_wait_task, &wt), SEREX_OK);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&wt);
    set_target(f, 1);
    assert_int_equal(serex_execute(s, count_task, f), SEREX_OK);
    assert_signalled(f->done);
}

static void serial_await_from_unrelated_task_is_not_edeadlk(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *a, *b;
    struct test_self_wait w = {.done = f->done};

    /* b's task is not a task of a, nor of what a runs on (a pool task is,
     * though): so only a timeout 0 poll, which must not say EDEADLK */
    make_pool(f, 2);
    a = make_serial(f, 0, f->manual, 0);
    b = make_serial(f, 1, f->pool, 0);
    w.ex = a;
    assert_int_equal(serex_execute(b, test_self_wait_task, &w), SEREX_OK);
    assert_signalled(f->done);
    assert_int_equal(w.await0, SEREX_ETIMEDOUT);
}

/* --- threads: happens-before, fairness --- */

static int hb_producer_main(void *arg)
{
    struct hb_producer *p = arg;

    for (size_t i = 0; i < HB_PER_PRODUCER; i++)
        if (serex_execute(p->serial, hb_task, &p->items[i]) != SEREX_OK)
            p->rejected++;
    return 0;
}

static void serial_tasks_from_many_producers_happen_in_order(void **state)
{
    struct fixture *f = *state;
    struct hb_item *items =
        calloc(HB_PRODUCERS * HB_PER_PRODUCER, sizeof *items);
    struct hb_producer pr[HB_PRODUCERS];
    serex_executor *s;

    assert_non_null(items);
    make_pool(f, 4);
    s = make_serial(f, 0, f->pool, 16);
    for (unsigned p = 0; p < HB_PRODUCERS; p++) {
        pr[p] = (struct hb_producer){.serial = s,
                                     .items = &items[p * HB_PER_PRODUCER]};
        for (size_t i = 0; i < HB_PER_PRODUCER; i++)
            pr[p].items[i] = (struct hb_item){&f->hb, p, i};
    }
    for (unsigned p = 0; p < HB_PRODUCERS; p++)
        assert_int_equal(serex__thread_start(&pr[p].thread, hb_producer_main,
                                             &pr[p]),
                         SEREX_OK);
    for (unsigned p = 0; p < HB_PRODUCERS; p++) {
        serex__thread_join(pr[p].thread);
        assert_int_equal(pr[p].rejected, 0);
    }
    serex_shutdown(s);
    assert_int_equal(serex_await_termination(s, TEST_TIMEOUT), SEREX_OK);
    /* plain reads after await: TSan checks the happens-before */
    assert_int_equal(f->hb.total, HB_PRODUCERS * HB_PER_PRODUCER);
    assert_int_equal(f->hb.disorder, 0);
    for (unsigned p = 0; p < HB_PRODUCERS; p++)
        assert_int_equal(f->hb.next[p], HB_PER_PRODUCER);
    free(items);
}

/* A serial kept busy forever by a task that requeues itself. */
struct hog {
    serex_executor *serial;
    atomic_bool stop;
    _Atomic long runs;
};

static void hog_task(void *arg)
{
    struct hog *h = arg;

    atomic_fetch_add_explicit(&h->runs, 1, memory_order_relaxed);
    if (!atomic_load_explicit(&h->stop, memory_order_acquire))
        (void)serex_execute(h->serial, hog_task, h);
}

static void stop_hog_task(void *arg)
{
    struct hog *h = arg;

    atomic_store_explicit(&h->stop, true, memory_order_release);
}

static void serial_busy_serial_does_not_starve_another_on_one_thread(
    void **state)
{
    struct fixture *f = *state;
    struct hog h = {.runs = 0};
    serex_executor *busy, *other;

    /* busy never runs dry; other gets the only thread only because
     * busy's drain hands it back after a batch */
    make_pool(f, 1);
    busy = make_serial(f, 0, f->pool, 8);
    other = make_serial(f, 1, f->pool, 8);
    h.serial = busy;
    atomic_init(&h.stop, false);
    assert_int_equal(serex_execute(busy, hog_task, &h), SEREX_OK);
    assert_int_equal(serex_execute(other, stop_hog_task, &h), SEREX_OK);
    assert_int_equal(serex_execute(other, test_signal_task, f->done),
                     SEREX_OK);
    assert_signalled(f->done);
    serex_shutdown(busy);
    assert_int_equal(serex_await_termination(busy, TEST_TIMEOUT), SEREX_OK);
    assert_true(atomic_load(&h.runs) >= 1);
}

struct exclusive {
    atomic_int inside;
    atomic_int overlaps;
    long plain; /* both serials' tasks add to it without atomics */
};

static void exclusive_task(void *arg)
{
    struct exclusive *x = arg;

    if (atomic_fetch_add(&x->inside, 1) != 0)
        atomic_fetch_add(&x->overlaps, 1);
    x->plain++;
    atomic_fetch_sub(&x->inside, 1);
}

static void serial_on_serial_over_pool_never_overlaps(void **state)
{
    struct fixture *f = *state;
    serex_executor *outer, *inner;
    struct exclusive x = {.plain = 0};

    /* inner's drains are outer's tasks: none of them may overlap */
    make_pool(f, 4);
    outer = make_serial(f, 0, f->pool, 4);
    inner = make_serial(f, 1, outer, 4);
    atomic_init(&x.inside, 0);
    atomic_init(&x.overlaps, 0);
    for (int i = 0; i < 5000; i++) {
        assert_int_equal(serex_execute(inner, exclusive_task, &x), SEREX_OK);
        assert_int_equal(serex_execute(outer, exclusive_task, &x), SEREX_OK);
    }
    serex_shutdown(inner);
    assert_int_equal(serex_await_termination(inner, TEST_TIMEOUT), SEREX_OK);
    serex_shutdown(outer);
    assert_int_equal(serex_await_termination(outer, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(atomic_load(&x.overlaps), 0);
    assert_int_equal(x.plain, 10000);
}

/* --- bad input and allocation failure --- */

static void serial_create_bad_input_is_einval(void **state)
{
    struct fixture *f = *state;
    serex_executor no_ops = {NULL};
    serex_executor *out = (serex_executor *)f; /* must be overwritten */

    assert_int_equal(serex_serial_create(NULL, NULL, &out), SEREX_EINVAL);
    assert_null(out);
    out = (serex_executor *)f;
    assert_int_equal(serex_serial_create(&no_ops, NULL, &out), SEREX_EINVAL);
    assert_null(out);
    assert_int_equal(serex_serial_create(f->manual, NULL, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_serial_create(NULL, NULL, NULL), SEREX_EINVAL);
    assert_false(serex_manual_run_one(f->manual));
}

static void serial_execute_bad_input_is_einval(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);
    serex_future *fu = (serex_future *)f;

    assert_int_equal(serex_execute(s, NULL, f), SEREX_EINVAL);
    assert_int_equal(serex_submit(s, NULL, f, &fu), SEREX_EINVAL);
    assert_null(fu);
    assert_int_equal(serex_submit(s, count_call, f, NULL), SEREX_EINVAL);
    assert_int_equal(serex_await_termination(s, -2), SEREX_EINVAL);
    assert_false(serex_manual_run_one(f->manual)); /* nothing queued */
}

static void serial_create_allocation_failure_is_enomem(void **state)
{
    struct fixture *f = *state;
    unsigned long n, failures = 0;
    int rc = SEREX_ENOMEM;

    serex__cache_trim();
    for (n = 1; n < 64; n++) {
        f->ser[0] = (serex_executor *)f;
        serex__alloc_fail_nth(n);
        rc = serex_serial_create(f->manual, NULL, &f->ser[0]);
        if (rc == SEREX_OK)
            break;
        assert_int_equal(rc, SEREX_ENOMEM);
        assert_null(f->ser[0]);
        failures++;
    }
    serex__alloc_fail_nth(0);
    assert_int_equal(rc, SEREX_OK);
    assert_true(failures >= 1);
    assert_int_equal(serex_execute(f->ser[0], log_task, &f->items[0]),
                     SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 1);
}

static void serial_execute_allocation_failure_is_enomem_and_queues_nothing(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);

    /* idle serial: the node is the first allocation, from an empty cache */
    serex__cache_trim();
    serex__alloc_fail_nth(1);
    assert_int_equal(serex_execute(s, never_task, f), SEREX_ENOMEM);
    serex__alloc_fail_nth(0);
    assert_false(serex_manual_run_one(f->manual));
    /* busy serial (its drain is queued): only the node is allocated */
    assert_int_equal(serex_execute(s, log_task, &f->items[0]), SEREX_OK);
    serex__cache_trim();
    serex__alloc_fail_nth(1);
    assert_int_equal(serex_execute(s, never_task, f), SEREX_ENOMEM);
    serex__alloc_fail_nth(0);
    assert_int_equal(serex_execute(s, log_task, &f->items[1]), SEREX_OK);
    assert_true(serex_manual_run_one(f->manual));
    assert_false(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, 2);
    assert_int_equal(f->log[0], 0);
    assert_int_equal(f->log[1], 1);
    /* each failure counts as rejected (executor.h), nothing as accepted */
    assert_int_equal(stats_of_ex(s).rejected, 2);
    assert_int_equal(stats_of_ex(s).submitted, 2);
    /* and the failure did not shut anything down */
    serex_shutdown(s);
    assert_int_equal(serex_await_termination(s, 0), SEREX_OK);
}

/* --- stats --- */

/* Reads the stats of f->ser[0] from inside its drain. With f->refill,
 * first submits the item STATS_CAP on (while there is one). */
#define STATS_CAP 16
#define STATS_TASKS 64

static void stats_task(void *arg)
{
    struct item *it = arg;
    struct fixture *f = it->f;

    if (it->v + STATS_CAP < STATS_TASKS && f->refill)
        assert_int_equal(
            serex_execute(f->ser[0], stats_task, &f->items[it->v + STATS_CAP]),
            SEREX_OK);
    assert_int_equal(serex_executor_stats(f->ser[0], &f->seen[f->nseen]),
                     SEREX_OK);
    f->nseen++;
}

/*
 * `queued` counts the tasks not finished: waiting, and the one running.
 * Read from inside the drain, the k-th of 10 tasks sees 10 - k (itself and
 * those behind it), not the 10 the batch started with.
 */
static void serial_stats_queued_counts_what_is_left_inside_a_batch(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);

    for (size_t i = 0; i < 10; i++)
        assert_int_equal(serex_execute(s, stats_task, &f->items[i]), SEREX_OK);
    assert_true(serex_manual_run_one(f->manual)); /* one drain: all 10 */
    assert_int_equal(f->nseen, 10);
    for (size_t k = 0; k < 10; k++) {
        assert_int_equal(f->seen[k].queued, 10 - k);
        assert_int_equal(f->seen[k].completed, k);
        assert_int_equal(f->seen[k].submitted, 10);
    }
    assert_int_equal(stats_of_ex(s).queued, 0);
    assert_int_equal(stats_of_ex(s).completed, 10);
}

/*
 * A bounded serial kept full from inside its drain (each task submits one
 * more before it reads): never more than STATS_CAP wait, so `queued` is at
 * most STATS_CAP + 1 (the waiting and the running one), whatever the batch
 * has run so far. Once the supply stops it counts down.
 */
static void serial_stats_queued_of_bounded_never_passes_cap_plus_running(
    void **state)
{
    struct fixture *f = *state;
    serex_serial_config cfg = {.queue_capacity = STATS_CAP};
    serex_executor *s;

    assert_int_equal(serex_serial_create(f->manual, &cfg, &f->ser[0]),
                     SEREX_OK);
    s = f->ser[0];
    f->refill = true;
    for (size_t i = 0; i < STATS_CAP; i++)
        assert_int_equal(serex_execute(s, stats_task, &f->items[i]), SEREX_OK);
    assert_int_equal(serex_execute(s, stats_task, &f->items[STATS_CAP]),
                     SEREX_EFULL);
    assert_true(serex_manual_run_one(f->manual)); /* one batch of 64 */
    assert_int_equal(f->nseen, STATS_TASKS);
    for (size_t k = 0; k < STATS_TASKS; k++) {
        uint64_t want = k + STATS_CAP < STATS_TASKS ? STATS_CAP + 1
                                                    : STATS_TASKS - k;

        assert_int_equal(f->seen[k].queued, want);
        assert_int_equal(f->seen[k].completed, k);
    }
    assert_false(serex_manual_run_one(f->manual));
    assert_int_equal(stats_of_ex(s).queued, 0);
    assert_int_equal(stats_of_ex(s).completed, STATS_TASKS);
    assert_int_equal(stats_of_ex(s).submitted, STATS_TASKS);
}

static void serial_steady_state_allocates_nothing_per_task(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, 0, f->manual, 0);
    unsigned long made;

    /* warm the caches, then count allocations over many tasks */
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < N; i++)
            assert_int_equal(serex_execute(s, log_task, &f->items[i]),
                             SEREX_OK);
        test_run_all(f->manual);
        f->nlog = 0;
    }
    serex__alloc_fail_nth(0);
    for (int round = 0; round < 10; round++) {
        for (size_t i = 0; i < N; i++)
            assert_int_equal(serex_execute(s, log_task, &f->items[i]),
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
        T(serial_runs_tasks_in_submission_order),
        T(serial_drain_runs_at_most_batch_then_requeues),
        T(serial_default_batch_is_64),
        T(serial_batch_of_one_runs_one_task_per_drain),
        T(serial_task_submitted_after_idle_starts_a_new_drain),
        T(serial_task_executing_on_its_own_serial_runs_after),
        T(serial_two_serials_on_one_target_interleave_in_batches),
        T(serial_on_serial_keeps_both_orders),
        T(serial_on_user_executor_keeps_order_and_batch),
        T(serial_execute_after_shutdown_is_rejected_and_accepted_run),
        T(serial_shutdown_now_hands_back_queued_in_order),
        T(serial_shutdown_now_leaves_target_tasks_alone),
        T(serial_shutdown_now_from_own_task_hands_back_the_rest),
        T(serial_shutdown_now_cancels_futures_and_counts_them),
        T(serial_await_after_shutdown_now_does_not_wait_for_the_target),
        T(serial_await_times_out_until_shut_down_and_drained),
        T(serial_idle_shutdown_terminates_at_once),
        T(serial_target_refusing_a_lone_task_reports_it),
        T(serial_target_refusing_with_tasks_queued_keeps_them),
        T(serial_target_rejects_resubmission_drain_keeps_running),
        T(serial_destroy_with_kept_tasks_drops_them),
        T(serial_destroy_on_terminated_pool_does_not_hang),
        T(serial_target_full_once_with_a_task_behind_goes_on),
        T(serial_target_full_again_keeps_the_drain_owed),
        T(serial_await_submits_an_owed_drain),
        T(serial_shutdown_now_hands_back_an_owed_drains_tasks),
        T(serial_bounded_full_submits_an_owed_drain),
        T(serial_destroy_retries_an_owed_drain_until_it_runs),
        T(serial_owed_drain_rejected_at_retry_breaks),
        T(serial_allocates_under_no_spinlock),
        T(serial_cancelled_queued_future_never_runs),
        T(serial_futures_on_pool_complete_in_order),
        T(serial_await_and_destroy_from_own_task_is_edeadlk),
        T(serial_await_and_destroy_from_target_task_is_edeadlk),
        T(serial_await_from_task_of_outer_serial_is_edeadlk),
        T(serial_await_and_destroy_from_own_task_on_pool_is_edeadlk),
        T(serial_await_from_unrelated_task_is_not_edeadlk),
        T(serial_tasks_from_many_producers_happen_in_order),
        T(serial_busy_serial_does_not_starve_another_on_one_thread),
        T(serial_on_serial_over_pool_never_overlaps),
        T(serial_create_bad_input_is_einval),
        T(serial_execute_bad_input_is_einval),
        T(serial_create_allocation_failure_is_enomem),
        T(serial_execute_allocation_failure_is_enomem_and_queues_nothing),
        T(serial_steady_state_allocates_nothing_per_task),
        T(serial_stats_queued_counts_what_is_left_inside_a_batch),
        T(serial_stats_queued_of_bounded_never_passes_cap_plus_running),
    };
#undef T

    return cmocka_run_group_tests_name("serial", tests, NULL, NULL);
}
