/* SPDX-License-Identifier: MIT */
/*
 * test_pool_blocking.c - tasks that block (src/pool_block.c): blocking
 * regions and the compensating workers they let a pool start, waits that
 * mark themselves (mark_waits), and serex_pool_resize.
 *
 * No test here measures time. A test whose promise is that something
 * happens at all (a task runs although every worker waits) waits for it
 * with the test timeout and fails if it never comes; a test whose promise
 * is that a thread was NOT started reads the pool's thread count right
 * after the call that would have started it (starts happen inside that
 * call, under the pool's lock), with every worker held on an event so
 * none can come or go meanwhile.
 */
#include "test_util.h"

#include <stdlib.h>

#include "pool_internal.h"

#define NTASKS 8 /* tasks that wait on tasks: more than twice the workers */

struct fixture;

struct waiter {
    struct fixture *f;
    int i;
    bool region; /* wait inside serex_blocking_begin/end */
};

struct fixture {
    struct waiter w[NTASKS]; /* here: a task may outlive a failed test */
    serex_executor *pool;
    serex_event *ev[4];
    serex_latch *done, *done2;
    _Atomic int rc[NTASKS]; /* what each waiting task's wait said */
    _Atomic int ran;
    _Atomic unsigned queued_before, queued_in, queued_after;
    _Atomic unsigned blocked_seen[3];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    for (int i = 0; i < 4; i++)
        assert_int_equal(serex_event_create_manual(&f->ev[i]), SEREX_OK);
    for (int i = 0; i < NTASKS; i++)
        atomic_store(&f->rc[i], 1);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    for (int i = 0; i < 4; i++)
        serex_event_signal(f->ev[i]); /* nothing stays held */
    if (f->pool != NULL)
        assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    for (int i = 0; i < 4; i++)
        serex_event_destroy(f->ev[i]);
    if (f->done != NULL)
        serex_latch_destroy(f->done);
    if (f->done2 != NULL)
        serex_latch_destroy(f->done2);
    free(f);
    return 0;
}

static serex_executor *make_pool(struct fixture *f, serex_pool_config cfg)
{
    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    return f->pool;
}

/* --- tasks that wait on tasks --- */

static void *sub_task(void *arg)
{
    struct fixture *f = arg;

    atomic_fetch_add(&f->ran, 1);
    return arg;
}

/* Submits a task to its own pool and waits for its future. */
static void wait_on_sub(void *arg)
{
    struct waiter *w = arg;
    struct fixture *f = w->f;
    serex_future *fu;
    int rc = serex_submit(f->pool, sub_task, f, &fu);

    if (rc == SEREX_OK) {
        if (w->region)
            serex_blocking_begin();
        rc = serex_future_wait(fu, TEST_TIMEOUT);
        if (w->region)
            serex_blocking_end();
        serex_future_release(fu);
    }
    atomic_store(&w->f->rc[w->i], rc);
    (void)serex_latch_count_down(f->done, 1);
}

static void run_waiters(struct fixture *f, bool region)
{
    struct waiter *w = f->w;

    assert_int_equal(serex_latch_create(NTASKS, &f->done), SEREX_OK);
    for (int i = 0; i < NTASKS; i++) {
        w[i] = (struct waiter){f, i, region};
        assert_int_equal(serex_execute(f->pool, wait_on_sub, &w[i]), SEREX_OK);
    }
    assert_int_equal(serex_latch_wait(f->done, TEST_TIMEOUT), SEREX_OK);
    for (int i = 0; i < NTASKS; i++)
        assert_int_equal(atomic_load(&f->rc[i]), SEREX_OK);
    assert_int_equal(atomic_load(&f->ran), NTASKS);
}

/*
 * A fixed pool of 2 whose NTASKS tasks each wait, in a region, for a task
 * they submitted: every wait ends. (Without the regions both workers wait
 * for tasks queued behind them, for ever: docs/pool.md says so; not
 * tested, a deadlock is not a test.)
 */
static void blocking_tasks_waiting_on_tasks_complete_on_a_fixed_pool(
    void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 2});
    run_waiters(f, true);
    assert_int_equal(serex__pool_blocked(f->pool), 0);
}

/*
 * A pool of 1 whose one task waits, in a region, for a task it submitted
 * (in its worker's own queue until the region begins): the region itself
 * must start a worker, as no submission comes after it.
 */
static void blocking_pool_of_one_task_waits_for_its_own_subtask(void **state)
{
    struct fixture *f = *state;

    f->w[0] = (struct waiter){f, 0, true};
    make_pool(f, (serex_pool_config){.threads = 1});
    assert_int_equal(serex_latch_create(1, &f->done), SEREX_OK);
    assert_int_equal(serex_execute(f->pool, wait_on_sub, &f->w[0]), SEREX_OK);
    assert_int_equal(serex_latch_wait(f->done, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(atomic_load(&f->rc[0]), SEREX_OK);
    assert_int_equal(atomic_load(&f->ran), 1);
}

/* The same with mark_waits and no region in the tasks: serex_future_wait
 * marks itself. */
static void blocking_marked_waits_need_no_region(void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 2, .mark_waits = true});
    run_waiters(f, false);
    assert_int_equal(serex__pool_blocked(f->pool), 0);
}

/* An elastic pool, bounded: the same holds, its capacity counting. */
static void blocking_tasks_waiting_on_tasks_complete_on_a_bounded_pool(
    void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){
                     .threads = 1, .max_threads = 2, .queue_capacity = 64});
    run_waiters(f, true);
}

/* Then the pool shuts down at once: the waits still end (a compensating
 * worker may start after shutdown while a worker blocks). */
static void blocking_compensates_after_shutdown(void **state)
{
    struct fixture *f = *state;
    struct waiter *w = f->w;

    make_pool(f, (serex_pool_config){.threads = 2});
    assert_int_equal(serex_latch_create(NTASKS, &f->done), SEREX_OK);
    for (int i = 0; i < NTASKS; i++) {
        w[i] = (struct waiter){f, i, true};
        assert_int_equal(serex_execute(f->pool, wait_on_sub, &w[i]), SEREX_OK);
    }
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    for (int i = 0; i < NTASKS; i++) {
        int rc = atomic_load(&f->rc[i]);

        /* a task that ran after the shutdown could not submit */
        assert_true(rc == SEREX_OK || rc == SEREX_EREJECTED);
    }
}

/* --- a task from outside while the only worker blocks --- */

/* Waits in a region for ev[1], after saying so on ev[0]. */
static void block_on_ev1(void *arg)
{
    struct fixture *f = arg;

    serex_blocking_begin();
    serex_event_signal(f->ev[0]);
    (void)serex_event_wait(f->ev[1], TEST_TIMEOUT);
    serex_blocking_end();
    serex_event_signal(f->ev[2]);
}

/*
 * A pool of 1 whose task blocks (in a region) until a task submitted from
 * outside runs: the submission starts a worker (the blocking handshake's
 * other side: the region began before the task came).
 */
static void blocking_pool_of_one_runs_a_task_from_outside(void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 1});
    assert_int_equal(serex_execute(f->pool, block_on_ev1, f), SEREX_OK);
    assert_signalled(f->ev[0]);
    assert_int_equal(serex__pool_blocked(f->pool), 1);
    assert_int_equal(serex_execute(f->pool, test_signal_task, f->ev[1]),
                     SEREX_OK);
    assert_signalled(f->ev[2]);
    assert_int_equal(serex__pool_threads(f->pool), 2);
}

/*
 * max_blocking bounds the compensation: a pool of 1 with max_blocking 1
 * runs 2 workers at most, however many block. SEREX_POOL_BLOCKING_NONE:
 * none.
 */
static void blocking_compensation_is_bounded(void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 1, .max_blocking = 1});
    assert_int_equal(serex_execute(f->pool, block_on_ev1, f), SEREX_OK);
    assert_signalled(f->ev[0]);
    serex_event_reset(f->ev[0]);
    /* a second blocker: runs on the compensating worker */
    assert_int_equal(serex_execute(f->pool, block_on_ev1, f), SEREX_OK);
    assert_signalled(f->ev[0]);
    assert_int_equal(serex__pool_blocked(f->pool), 2);
    assert_int_equal(serex__pool_threads(f->pool), 2);
    /* a third task: cap 1 + min(2, 1) reached, no thread starts */
    assert_int_equal(serex_execute(f->pool, test_signal_task, f->ev[3]),
                     SEREX_OK);
    assert_int_equal(serex__pool_threads(f->pool), 2);
    serex_event_signal(f->ev[1]);
    assert_signalled(f->ev[3]);
}

static void blocking_none_starts_no_worker(void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 1,
                                     .max_blocking = SEREX_POOL_BLOCKING_NONE});
    assert_int_equal(serex_execute(f->pool, block_on_ev1, f), SEREX_OK);
    assert_signalled(f->ev[0]);
    assert_int_equal(serex__pool_blocked(f->pool), 1); /* counted only */
    assert_int_equal(serex_execute(f->pool, test_signal_task, f->ev[3]),
                     SEREX_OK);
    assert_int_equal(serex__pool_threads(f->pool), 1);
    serex_event_signal(f->ev[1]);
    assert_signalled(f->ev[3]);
}

/* --- the worker's own queue --- */

static void count_ran(void *arg)
{
    struct fixture *f = arg;

    atomic_fetch_add(&f->ran, 1);
    (void)serex_latch_count_down(f->done, 1);
}

/* Holds its worker (no region) until ev[1], after saying so on ev[0]. */
static void hold_on_ev1(void *arg)
{
    struct fixture *f = arg;

    serex_event_signal(f->ev[0]);
    (void)serex_event_wait(f->ev[1], TEST_TIMEOUT);
}

/*
 * Submits 3 tasks to its own worker's queues, begins a region (they go to
 * the shared queue), submits one more (to the shared queue too), and
 * waits in the region for all 4 to have run.
 */
static void hand_off_and_wait(void *arg)
{
    struct fixture *f = arg;

    for (int i = 0; i < 3; i++)
        (void)serex_execute(f->pool, count_ran, f);
    atomic_store(&f->queued_before, serex__pool_own_queued());
    serex_blocking_begin();
    atomic_store(&f->queued_in, serex__pool_own_queued());
    (void)serex_execute(f->pool, count_ran, f);
    atomic_store(&f->queued_after, serex__pool_own_queued());
    (void)serex_latch_wait(f->done, TEST_TIMEOUT);
    serex_blocking_end();
    serex_event_signal(f->ev[2]);
}

/*
 * A fixed pool's worker that begins a region hands its queued tasks over
 * (nothing waits behind a worker that sleeps), and its submissions in
 * the region go to the shared queue; they run (the other worker is held,
 * so a compensating worker runs them).
 */
static void blocking_hands_the_worker_queue_over(void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 2});
    assert_int_equal(serex_latch_create(4, &f->done), SEREX_OK);
    assert_int_equal(serex_execute(f->pool, hold_on_ev1, f), SEREX_OK);
    assert_signalled(f->ev[0]);
    assert_int_equal(serex_execute(f->pool, hand_off_and_wait, f), SEREX_OK);
    assert_signalled(f->ev[2]);
    assert_int_equal(atomic_load(&f->queued_before), 3);
    assert_int_equal(atomic_load(&f->queued_in), 0);
    assert_int_equal(atomic_load(&f->queued_after), 0);
    assert_int_equal(atomic_load(&f->ran), 4);
}

/* Waits until the pool counts @n workers in regions. */
static void wait_blocked(serex_executor *pool, unsigned n)
{
    int64_t deadline = test_now_ns() + TEST_TIMEOUT;

    while (serex__pool_blocked(pool) != n && test_now_ns() < deadline)
        test_sleep_ns(MS);
    assert_int_equal(serex__pool_blocked(pool), n);
}

/* With mark_waits, a serex wait that sleeps is a region while it sleeps;
 * without, it is not. */
static void blocking_waits_are_regions_only_when_marked(void **state)
{
    struct fixture *f = *state;
    serex_executor *marked;
    serex_pool_config cfg = {.threads = 1, .mark_waits = true};

    make_pool(f, (serex_pool_config){.threads = 1});
    assert_int_equal(serex_execute(f->pool, hold_on_ev1, f), SEREX_OK);
    assert_signalled(f->ev[0]);
    assert_int_equal(serex__pool_blocked(f->pool), 0);
    assert_int_equal(serex_pool_create(&cfg, &marked), SEREX_OK);
    assert_int_equal(serex_execute(marked, hold_on_ev1, f), SEREX_OK);
    wait_blocked(marked, 1);
    serex_event_signal(f->ev[1]);
    wait_blocked(marked, 0);
    assert_int_equal(serex_destroy(marked), SEREX_OK);
}

/* --- nesting, and outside a pool --- */

static void nested_regions(void *arg)
{
    struct fixture *f = arg;

    serex_blocking_begin();
    serex_blocking_begin();
    atomic_store(&f->blocked_seen[0], serex__pool_blocked(f->pool));
    serex_blocking_end();
    atomic_store(&f->blocked_seen[1], serex__pool_blocked(f->pool));
    serex_blocking_end();
    serex_blocking_end(); /* no region: nothing */
    atomic_store(&f->blocked_seen[2], serex__pool_blocked(f->pool));
    serex_event_signal(f->ev[0]);
}

/* Regions nest: only the outermost counts; an extra end does nothing. */
static void blocking_regions_nest(void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 1});
    assert_int_equal(serex_execute(f->pool, nested_regions, f), SEREX_OK);
    assert_signalled(f->ev[0]);
    assert_int_equal(atomic_load(&f->blocked_seen[0]), 1);
    assert_int_equal(atomic_load(&f->blocked_seen[1]), 1);
    assert_int_equal(atomic_load(&f->blocked_seen[2]), 0);
}

static void set_ran(void *arg)
{
    atomic_store((_Atomic int *)arg, 1);
}

/* Outside a pool's task the calls do nothing; serex_blocking runs fn
 * here; a NULL fn is SEREX_EINVAL. */
static void blocking_outside_a_pool_does_nothing(void **state)
{
    _Atomic int ran = 0;

    (void)state;
    serex_blocking_end();
    serex_blocking_begin();
    serex_blocking_begin();
    serex_blocking_end();
    serex_blocking_end();
    serex_blocking_end();
    assert_int_equal(serex_blocking(set_ran, (void *)&ran), SEREX_OK);
    assert_int_equal(atomic_load(&ran), 1);
    assert_int_equal(serex_blocking(NULL, NULL), SEREX_EINVAL);
}

static void region_by_callback(void *arg)
{
    struct fixture *f = arg;

    atomic_store(&f->blocked_seen[0], serex__pool_blocked(f->pool));
}

static void run_region_by_callback(void *arg)
{
    struct fixture *f = arg;

    (void)serex_blocking(region_by_callback, f);
    atomic_store(&f->blocked_seen[1], serex__pool_blocked(f->pool));
    serex_event_signal(f->ev[0]);
}

/* serex_blocking is a region around its call. */
static void blocking_callback_is_a_region(void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 1});
    assert_int_equal(serex_execute(f->pool, run_region_by_callback, f),
                     SEREX_OK);
    assert_signalled(f->ev[0]);
    assert_int_equal(atomic_load(&f->blocked_seen[0]), 1);
    assert_int_equal(atomic_load(&f->blocked_seen[1]), 0);
}

/* --- the compensating worker's life --- */

/* Waits until the pool has @n threads (they leave by the keep-alive). */
static void wait_threads(serex_executor *pool, unsigned n)
{
    int64_t deadline = test_now_ns() + TEST_TIMEOUT;

    while (serex__pool_threads(pool) != n && test_now_ns() < deadline)
        test_sleep_ns(MS);
    assert_int_equal(serex__pool_threads(pool), n);
}

/* Once the region ends, the compensating worker retires after its
 * keep-alive: the pool is back to its size. */
static void blocking_compensating_worker_retires(void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 1, .keep_alive_ns = MS});
    assert_int_equal(serex_execute(f->pool, block_on_ev1, f), SEREX_OK);
    assert_signalled(f->ev[0]);
    assert_int_equal(serex_execute(f->pool, test_signal_task, f->ev[1]),
                     SEREX_OK);
    assert_signalled(f->ev[2]);
    wait_threads(f->pool, 1);
    /* and it still serves */
    assert_int_equal(serex_execute(f->pool, test_signal_task, f->ev[3]),
                     SEREX_OK);
    assert_signalled(f->ev[3]);
}

/* --- resize --- */

/* Each of n tasks waits until all n have started: it ends only if n
 * workers serve at once. */
static void rendezvous(void *arg)
{
    struct fixture *f = arg;

    (void)serex_latch_count_down(f->done, 1);
    if (serex_latch_wait(f->done, TEST_TIMEOUT) == SEREX_OK)
        atomic_fetch_add(&f->ran, 1);
    (void)serex_latch_count_down(f->done2, 1);
}

static void run_rendezvous(struct fixture *f, unsigned n)
{
    assert_int_equal(serex_latch_create(n, &f->done), SEREX_OK);
    assert_int_equal(serex_latch_create(n, &f->done2), SEREX_OK);
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(serex_execute(f->pool, rendezvous, f), SEREX_OK);
    assert_int_equal(serex_latch_wait(f->done2, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(atomic_load(&f->ran), (int)n);
}

/* Growing starts the threads at once; they all serve. */
static void resize_grows_at_once(void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 1});
    assert_int_equal(serex_pool_resize(f->pool, 3, 0), SEREX_OK);
    assert_int_equal(serex__pool_threads(f->pool), 3);
    run_rendezvous(f, 3);
}

/* A larger max makes a fixed pool grow as an elastic one does. */
static void resize_max_lets_the_pool_grow(void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 1});
    assert_int_equal(serex_pool_resize(f->pool, 1, 3), SEREX_OK);
    assert_int_equal(serex__pool_threads(f->pool), 1);
    run_rendezvous(f, 3);
}

/* Holds its worker until ev[1], counting itself in `ran` first. */
static void busy_until_ev1(void *arg)
{
    struct fixture *f = arg;

    atomic_fetch_add(&f->ran, 1);
    (void)serex_latch_count_down(f->done, 1);
    (void)serex_event_wait(f->ev[1], TEST_TIMEOUT);
}

/* Shrinking interrupts no task: the surplus workers leave once idle, the
 * pool still serves with the rest. */
static void resize_shrinks_when_idle(void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 4});
    assert_int_equal(serex_latch_create(4, &f->done), SEREX_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(serex_execute(f->pool, busy_until_ev1, f), SEREX_OK);
    assert_int_equal(serex_latch_wait(f->done, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_pool_resize(f->pool, 1, 1), SEREX_OK);
    assert_int_equal(serex__pool_threads(f->pool), 4); /* all busy */
    serex_event_signal(f->ev[1]);
    wait_threads(f->pool, 1);
    assert_int_equal(serex_execute(f->pool, test_signal_task, f->ev[3]),
                     SEREX_OK);
    assert_signalled(f->ev[3]);
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(atomic_load(&f->ran), 4);
}

/* Shrinking the core of a fixed pool: the surplus leave after their
 * keep-alive (they were parked with none: the resize wakes them). */
static void resize_core_down_retires_after_keep_alive(void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 3, .keep_alive_ns = MS});
    assert_int_equal(serex_pool_resize(f->pool, 1, 3), SEREX_OK);
    wait_threads(f->pool, 1);
}

static void resize_bad_input_and_after_shutdown(void **state)
{
    struct fixture *f = *state;
    serex_executor *m;

    make_pool(f, (serex_pool_config){.threads = 1});
    assert_int_equal(serex_pool_resize(NULL, 1, 1), SEREX_EINVAL);
    assert_int_equal(serex_pool_resize(f->pool, 2, 1), SEREX_EINVAL);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_pool_resize(m, 1, 1), SEREX_EINVAL);
    assert_int_equal(serex_destroy(m), SEREX_OK);
    assert_int_equal(serex__pool_threads(f->pool), 1);
    /* a face is taken for its pool */
    assert_int_equal(
        serex_pool_resize(
            serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_LOW), 2, 2),
        SEREX_OK);
    assert_int_equal(serex__pool_threads(f->pool), 2);
    serex_shutdown(f->pool);
    assert_int_equal(serex_pool_resize(f->pool, 3, 3), SEREX_EREJECTED);
}

/* --- the starvation watchdog --- */

/* The decision, on a clock of the test's: starving only after a whole
 * patience of looks that show work waiting, every worker busy and no
 * progress; then one worker per patience. */
static void watchdog_decision_waits_for_its_patience(void **state)
{
    struct serex__starve w = {0, 0};
    struct serex__starve_look stuck = {5, true, true};

    (void)state;
    assert_false(serex__pool_starving(&w, &stuck, 100, 50)); /* first look */
    assert_false(serex__pool_starving(&w, &stuck, 149, 50));
    assert_true(serex__pool_starving(&w, &stuck, 150, 50));
    /* the patience starts again */
    assert_false(serex__pool_starving(&w, &stuck, 151, 50));
    assert_false(serex__pool_starving(&w, &stuck, 199, 50));
    assert_true(serex__pool_starving(&w, &stuck, 200, 50));
}

/* Progress, no waiting work, or an idle worker starts it again. */
static void watchdog_decision_starts_again_on_progress_or_idle(void **state)
{
    struct serex__starve w = {0, 0};
    struct serex__starve_look stuck = {5, true, true};
    struct serex__starve_look moved = {6, true, true};
    struct serex__starve_look nothing = {6, false, true};
    struct serex__starve_look idle = {6, true, false};

    (void)state;
    assert_false(serex__pool_starving(&w, &stuck, 0, 50));
    assert_false(serex__pool_starving(&w, &moved, 40, 50)); /* progress */
    assert_false(serex__pool_starving(&w, &moved, 89, 50));
    assert_false(serex__pool_starving(&w, &nothing, 90, 50));
    assert_false(serex__pool_starving(&w, &moved, 100, 50));
    assert_false(serex__pool_starving(&w, &idle, 149, 50)); /* from here */
    assert_false(serex__pool_starving(&w, &moved, 150, 50));
    assert_false(serex__pool_starving(&w, &moved, 198, 50));
    assert_true(serex__pool_starving(&w, &moved, 199, 50));
}

/* Waits, unmarked, for ev[1], after saying so on ev[0]. */
static void unmarked_wait_on_ev1(void *arg)
{
    struct fixture *f = arg;

    serex_event_signal(f->ev[0]);
    (void)serex_event_wait(f->ev[1], TEST_TIMEOUT);
    serex_event_signal(f->ev[2]);
}

/*
 * A pool of 1 whose task waits, unmarked, for a task queued behind it:
 * the watchdog adds a worker and the queued task runs (a liveness test:
 * without the watchdog this ends only by the wait's time-out).
 */
static void watchdog_runs_a_task_behind_an_unmarked_wait(void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 1, .starvation_ns = MS});
    assert_int_equal(serex_execute(f->pool, unmarked_wait_on_ev1, f), SEREX_OK);
    assert_signalled(f->ev[0]);
    assert_int_equal(serex_execute(f->pool, test_signal_task, f->ev[1]),
                     SEREX_OK);
    assert_signalled(f->ev[2]);
    /* (the worker count is not checked: the watchdog counts the worker it
     * starts once the start returns, which may come after that worker
     * ran the task) */
}

/* Waits until the pool's watchdog sleeps with no deadline. */
static void wait_watchdog_asleep(serex_executor *pool)
{
    int64_t deadline = test_now_ns() + TEST_TIMEOUT;

    while (!serex__pool_watchdog_asleep(pool) && test_now_ns() < deadline)
        test_sleep_ns(MS);
    assert_true(serex__pool_watchdog_asleep(pool));
}

/* An idle pool's watchdog sleeps with no deadline; a task wakes it, and
 * once the pool is idle again it sleeps again. */
static void watchdog_sleeps_while_the_pool_is_idle(void **state)
{
    struct fixture *f = *state;

    make_pool(f, (serex_pool_config){.threads = 2, .starvation_ns = MS});
    wait_watchdog_asleep(f->pool);
    assert_int_equal(serex_execute(f->pool, test_signal_task, f->ev[0]),
                     SEREX_OK);
    assert_signalled(f->ev[0]);
    wait_watchdog_asleep(f->pool);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(blocking_tasks_waiting_on_tasks_complete_on_a_fixed_pool),
        T(blocking_pool_of_one_task_waits_for_its_own_subtask),
        T(blocking_marked_waits_need_no_region),
        T(blocking_tasks_waiting_on_tasks_complete_on_a_bounded_pool),
        T(blocking_compensates_after_shutdown),
        T(blocking_pool_of_one_runs_a_task_from_outside),
        T(blocking_compensation_is_bounded),
        T(blocking_none_starts_no_worker),
        T(blocking_hands_the_worker_queue_over),
        T(blocking_waits_are_regions_only_when_marked),
        T(blocking_regions_nest),
        T(blocking_outside_a_pool_does_nothing),
        T(blocking_callback_is_a_region),
        T(blocking_compensating_worker_retires),
        T(resize_grows_at_once),
        T(resize_max_lets_the_pool_grow),
        T(resize_shrinks_when_idle),
        T(resize_core_down_retires_after_keep_alive),
        T(resize_bad_input_and_after_shutdown),
        T(watchdog_decision_waits_for_its_patience),
        T(watchdog_decision_starts_again_on_progress_or_idle),
        T(watchdog_runs_a_task_behind_an_unmarked_wait),
        T(watchdog_sleeps_while_the_pool_is_idle),
    };

    return cmocka_run_group_tests_name("pool_blocking", tests, NULL, NULL);
}
