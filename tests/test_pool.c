/* SPDX-License-Identifier: MIT */
/*
 * test_pool.c - the thread pool: promises 1, 2, 7, 8 and 9 of docs/contract.md,
 * bounded and elastic configurations, parking without lost wake-ups.
 */
#include "test_util.h"

#include <stdio.h>
#include <string.h>
#if defined(__linux__)
#  include <sys/prctl.h>
#endif

#include "pool_internal.h"

#define NTASKS 1000

/* A task that occupies its worker until released. */
struct blocker {
    serex_event *started;
    serex_event *release;
};

struct fixture {
    serex_executor *pool;
    struct blocker block;
    serex_event *done;
    _Atomic long count;     /* tasks run */
    _Atomic long target;    /* count at which count_task signals done */
    size_t idx[NTASKS];
    void *pending_args[NTASKS];
    serex_fn pending_fns[NTASKS];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    assert_int_equal(serex_event_create(&f->block.started), SEREX_OK);
    assert_int_equal(serex_event_create(&f->block.release), SEREX_OK);
    assert_int_equal(serex_event_create(&f->done), SEREX_OK);
    for (size_t i = 0; i < NTASKS; i++)
        f->idx[i] = i;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    serex__alloc_fail_nth(0);
    if (f->pool != NULL) {
        serex_event_signal(f->block.release);
        assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    }
    serex_event_destroy(f->block.started);
    serex_event_destroy(f->block.release);
    serex_event_destroy(f->done);
    free(f);
    return 0;
}

static void block_task(void *arg)
{
    struct blocker *b = arg;

    serex_event_signal(b->started);
    assert_int_equal(serex_event_wait(b->release, TEST_TIMEOUT), SEREX_OK);
}

static void count_task(void *arg)
{
    struct fixture *f = arg;

    /*
     * relaxed (both): the event signal orders what the test reads. Only
     * the task that reaches the target signals, and the test moves the
     * target only after that signal, so no task sees a target change that
     * matters to it.
     */
    if (atomic_fetch_add_explicit(&f->count, 1, memory_order_relaxed) + 1 ==
        atomic_load_explicit(&f->target, memory_order_relaxed))
        serex_event_signal(f->done);
}

/* relaxed: tasks read it relaxed too (see count_task) */
static void set_target(struct fixture *f, long target)
{
    atomic_store_explicit(&f->target, target, memory_order_relaxed);
}

static void make_pool(struct fixture *f, unsigned threads, size_t capacity)
{
    serex_pool_config cfg = {.threads = threads, .queue_capacity = capacity};

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    assert_non_null(f->pool);
}

/* Occupies the only worker of a 1-thread pool. */
static void occupy_worker(struct fixture *f)
{
    assert_int_equal(serex_execute(f->pool, block_task, &f->block), SEREX_OK);
    assert_signalled(f->block.started);
}

static void pool_create_bad_config_is_einval(void **state)
{
    serex_executor *ex = (serex_executor *)state; /* any non-NULL value */
    serex_pool_config below = {.threads = 4, .max_threads = 2};
    serex_pool_config keep = {.threads = 1, .keep_alive_ns = -1};

    assert_int_equal(serex_pool_create(NULL, NULL), SEREX_EINVAL);
    assert_int_equal(serex_pool_create(&below, &ex), SEREX_EINVAL);
    assert_null(ex);
    ex = (serex_executor *)state;
    assert_int_equal(serex_pool_create(&keep, &ex), SEREX_EINVAL);
    assert_null(ex);
}

static void pool_default_config_runs_every_task(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex_pool_create(NULL, &f->pool), SEREX_OK);
    set_target(f, 10000);
    for (long i = 0; i < 10000; i++)
        assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
    assert_signalled(f->done);
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(atomic_load(&f->count), 10000);
}

static void pool_execute_bad_input_is_einval(void **state)
{
    struct fixture *f = *state;

    make_pool(f, 1, 0);
    assert_int_equal(serex_execute(f->pool, NULL, NULL), SEREX_EINVAL);
    assert_int_equal(serex_execute(NULL, count_task, f), SEREX_EINVAL);
    assert_int_equal(serex_await_termination(f->pool, -2), SEREX_EINVAL);
    assert_int_equal(serex_await_termination(NULL, 0), SEREX_EINVAL);
    assert_int_equal(serex_destroy(NULL), SEREX_EINVAL);
    assert_int_equal(serex_shutdown_now(NULL, NULL, NULL), 0);
    serex_shutdown(NULL); /* ignored */
}

static void pool_execute_after_shutdown_is_rejected_and_accepted_run(
    void **state)
{
    struct fixture *f = *state;

    make_pool(f, 1, 0);
    occupy_worker(f);
    set_target(f, 100);
    for (long i = 0; i < 100; i++)
        assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
    serex_shutdown(f->pool);
    serex_shutdown(f->pool); /* idempotent */
    assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_EREJECTED);
    assert_int_equal(serex_await_termination(f->pool, 0), SEREX_ETIMEDOUT);
    serex_event_signal(f->block.release);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(atomic_load(&f->count), 100);
}

static void record_pending(serex_fn fn, void *arg, void *ctx)
{
    struct fixture *f = ctx;
    /* relaxed: this thread is the only one counting hand-backs here */
    long n = atomic_fetch_add_explicit(&f->count, 1, memory_order_relaxed);

    f->pending_fns[n] = fn;
    f->pending_args[n] = arg;
}

static void pool_shutdown_now_hands_back_unstarted_in_order(void **state)
{
    struct fixture *f = *state;

    make_pool(f, 1, 0);
    occupy_worker(f);
    for (size_t i = 0; i < NTASKS; i++)
        assert_int_equal(serex_execute(f->pool, never_task, &f->idx[i]),
                         SEREX_OK);
    assert_int_equal(serex_shutdown_now(f->pool, record_pending, f), NTASKS);
    assert_int_equal(atomic_load(&f->count), NTASKS);
    for (size_t i = 0; i < NTASKS; i++) {
        assert_ptr_equal(f->pending_fns[i], never_task);
        assert_ptr_equal(f->pending_args[i], &f->idx[i]);
    }
    assert_int_equal(serex_execute(f->pool, never_task, f), SEREX_EREJECTED);
    /* the running task is not interrupted; nothing is left to hand back */
    assert_int_equal(serex_shutdown_now(f->pool, record_pending, f), 0);
    serex_event_signal(f->block.release);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
}

static void pool_bounded_queue_is_full_at_capacity(void **state)
{
    struct fixture *f = *state;

    make_pool(f, 1, 4);
    occupy_worker(f); /* running tasks do not count against capacity */
    set_target(f, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
    assert_int_equal(serex_execute(f->pool, never_task, f), SEREX_EFULL);
    serex_event_signal(f->block.release);
    assert_signalled(f->done);
    /* room again once the queue drained */
    set_target(f, 5);
    assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
    assert_signalled(f->done);
}

static void pool_await_times_out_until_shut_down(void **state)
{
    struct fixture *f = *state;
    int64_t a, b;

    make_pool(f, 2, 0);
    assert_int_equal(serex_await_termination(f->pool, 0), SEREX_ETIMEDOUT);
    a = test_now_ns();
    assert_int_equal(serex_await_termination(f->pool, 20 * MS),
                     SEREX_ETIMEDOUT);
    b = test_now_ns();
    /* never early */
    assert_true(b - a >= 20 * MS);
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_await_termination(f->pool, 0), SEREX_OK);
}

struct self_wait {
    serex_executor *pool;
    serex_event *done;
    int await_rc, destroy_rc;
};

static void self_wait_task(void *arg)
{
    struct self_wait *w = arg;

    w->await_rc = serex_await_termination(w->pool, SEREX_FOREVER);
    w->destroy_rc = serex_destroy(w->pool);
    serex_event_signal(w->done);
}

static void pool_await_and_destroy_from_own_task_is_edeadlk(void **state)
{
    struct fixture *f = *state;
    struct self_wait w = {0};

    make_pool(f, 2, 0);
    w.pool = f->pool;
    w.done = f->done;
    assert_int_equal(serex_execute(f->pool, self_wait_task, &w), SEREX_OK);
    assert_signalled(f->done);
    assert_int_equal(w.await_rc, SEREX_EDEADLK);
    assert_int_equal(w.destroy_rc, SEREX_EDEADLK);
    /* destroy did nothing: the pool still runs tasks */
    set_target(f, 1);
    assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
    assert_signalled(f->done);
}

struct plain_write {
    int *slot;
    int value;
};

static void plain_write_task(void *arg)
{
    struct plain_write *w = arg;

    *w->slot = w->value; /* no atomics: await must order it */
}

static void pool_await_makes_task_writes_visible(void **state)
{
    struct fixture *f = *state;
    static int slots[64];
    struct plain_write w[64];

    make_pool(f, 2, 0);
    for (int i = 0; i < 64; i++) {
        w[i] = (struct plain_write){&slots[i], i + 1};
        assert_int_equal(serex_execute(f->pool, plain_write_task, &w[i]),
                         SEREX_OK);
    }
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    for (int i = 0; i < 64; i++)
        assert_int_equal(slots[i], i + 1);
}

/* Polls @cond every millisecond for up to the test timeout. */
#define wait_until(cond)                                          \
  do {                                                            \
    for (int64_t i_ = 0; !(cond) && i_ < TEST_TIMEOUT / MS; i_++) \
      test_sleep_ns(MS);                                          \
    assert_true(cond);                                            \
  } while (0)

static void pool_elastic_grows_when_busy_and_shrinks_when_idle(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {.threads = 1, .max_threads = 4,
                             .keep_alive_ns = 20 * MS};
    struct blocker b[4];

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    assert_int_equal(serex__pool_threads(f->pool), 1);
    /* four tasks that each hold a thread: all four start only if it grew */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(serex_event_create(&b[i].started), SEREX_OK);
        assert_int_equal(serex_event_create(&b[i].release), SEREX_OK);
        assert_int_equal(serex_execute(f->pool, block_task, &b[i]), SEREX_OK);
    }
    for (int i = 0; i < 4; i++)
        assert_signalled(b[i].started);
    assert_int_equal(serex__pool_threads(f->pool), 4);
    for (int i = 0; i < 4; i++)
        serex_event_signal(b[i].release);
    /* idle for keep_alive_ns, the three extra threads retire */
    wait_until(serex__pool_threads(f->pool) == 1);
    /* the core thread stays and still works */
    set_target(f, 1);
    assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
    assert_signalled(f->done);
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    for (int i = 0; i < 4; i++) {
        serex_event_destroy(b[i].started);
        serex_event_destroy(b[i].release);
    }
}

#if defined(__linux__)
struct name_probe {
    char name[16];
    serex_event *done;
};

static void name_task(void *arg)
{
    struct name_probe *np = arg;

    prctl(PR_GET_NAME, (unsigned long)np->name, 0UL, 0UL, 0UL);
    serex_event_signal(np->done);
}
#endif

#if defined(__linux__)
struct name_hook {
    _Atomic int seen, wrong; /* start hooks run; names not "<name>-<index>" */
};

static int name_start_hook(void *ctx, unsigned index)
{
    struct name_hook *h = ctx;
    char name[16] = {0}, want[32];

    prctl(PR_GET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
    snprintf(want, sizeof want, "orders-%u", index);
    if (strcmp(name, want) != 0)
        atomic_fetch_add(&h->wrong, 1);
    atomic_fetch_add(&h->seen, 1);
    return 0;
}
#endif

/* A worker's name ends in the index its hooks get (its slot, 0-based). */
static void pool_threads_are_named_prefix_and_number(void **state)
{
#if defined(__linux__)
    struct fixture *f = *state;
    struct name_hook h = {0};
    serex_pool_config cfg = {.threads = 2,
                             .name = "orders",
                             .on_thread_start = name_start_hook,
                             .hook_ctx = &h};
    struct name_probe np = {.done = f->done};

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    assert_int_equal(serex_execute(f->pool, name_task, &np), SEREX_OK);
    assert_signalled(f->done);
    assert_true(strcmp(np.name, "orders-0") == 0 ||
                strcmp(np.name, "orders-1") == 0);
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(atomic_load(&h.seen), 2);
    assert_int_equal(atomic_load(&h.wrong), 0);
#else
    (void)state;
    skip();
#endif
}

static void pool_two_pools_are_independent(void **state)
{
    struct fixture *f = *state;
    serex_executor *other;

    make_pool(f, 1, 0);
    assert_int_equal(serex_pool_create(NULL, &other), SEREX_OK);
    serex_shutdown(other);
    assert_int_equal(serex_execute(other, count_task, f), SEREX_EREJECTED);
    set_target(f, 1);
    assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
    assert_signalled(f->done);
    assert_int_equal(serex_destroy(other), SEREX_OK);
    set_target(f, 2);
    assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
    assert_signalled(f->done);
}

static void pool_create_allocation_failure_is_enomem(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {.threads = 2};
    unsigned long n;
    int rc = SEREX_ENOMEM;

    /* Fail the 1st, 2nd, ... allocation until create needs no more. */
    for (n = 1; n < 64 && rc != SEREX_OK; n++) {
        serex__alloc_fail_nth(n);
        rc = serex_pool_create(&cfg, &f->pool);
        if (rc != SEREX_OK) {
            assert_int_equal(rc, SEREX_ENOMEM);
            assert_null(f->pool);
        }
    }
    serex__alloc_fail_nth(0);
    assert_int_equal(rc, SEREX_OK);
    assert_true(n > 2); /* at least the pool and its slots were failed */
    set_target(f, 1);
    assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
    assert_signalled(f->done);
}

static void pool_execute_allocation_failure_is_enomem(void **state)
{
    struct fixture *f = *state;
    const long full = SEREX__POOL_RING_MIN;

    make_pool(f, 1, 0);
    occupy_worker(f);
    set_target(f, full + 1);
    for (long i = 0; i < full; i++) /* fills the ring exactly */
        assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
    serex__alloc_fail_nth(1); /* the ring must grow now, and cannot */
    assert_int_equal(serex_execute(f->pool, never_task, f), SEREX_ENOMEM);
    serex__alloc_fail_nth(0);
    assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
    serex_event_signal(f->block.release);
    assert_signalled(f->done);
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    /* every accepted task ran once; the refused one never did */
    assert_int_equal(atomic_load(&f->count), full + 1);
}

static void pool_steady_state_allocates_nothing(void **state)
{
    struct fixture *f = *state;
    unsigned long late = 0;

    make_pool(f, 2, 0);
    for (int wave = 0; wave < 40; wave++) {
        unsigned long made;

        set_target(f, (wave + 1) * NTASKS);
        for (int i = 0; i < NTASKS; i++)
            assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
        assert_signalled(f->done);
        made = serex__alloc_fail_nth(0);
        if (wave >= 30)
            late += made;
    }
    /*
     * Nodes circulate through the caches: once warm, an allocation happens
     * only when the producer runs further ahead of the workers than ever
     * before (a new high-water mark of nodes in flight), never per task.
     * 10 waves are 10 * NTASKS tasks; allow one allocation per 100.
     */
    assert_true(late < 10 * NTASKS / 100);
}

static void pool_parked_workers_never_miss_a_wake_up(void **state)
{
    struct fixture *f = *state;
    const int64_t gap = MS; /* 20x the spin: they park */

    make_pool(f, 2, 0);
    for (int round = 1; round <= 300; round++) {
        test_sleep_ns(gap);
        set_target(f, round);
        assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
        assert_signalled(f->done);
    }
    /* how often they parked and were woken is the benchmark's to count
     * (serex_bench pool_wakeups): it depends on the machine's load */
}

static void noop_task(void *arg)
{
    (void)arg;
}

/* A task that waits for the event of a task queued after it. */
static void wait_done_task(void *arg)
{
    struct fixture *f = arg;

    assert_int_equal(serex_event_wait(f->done, TEST_TIMEOUT), SEREX_OK);
    set_target(f, -1); /* reached only if the later task ran elsewhere */
}

static void pool_blocked_task_does_not_strand_the_tasks_behind_it(
    void **state)
{
    struct fixture *f = *state;

    /*
     * Workers take tasks in batches; a task that blocks must not hold the
     * tasks batched behind it while another thread is free: the free
     * worker steals them. The last task releases the first; if it were
     * stranded behind it, the wait would time out.
     */
    make_pool(f, 2, 0);
    for (int round = 0; round < 50; round++) {
        set_target(f, 0);
        assert_int_equal(serex_execute(f->pool, wait_done_task, f), SEREX_OK);
        for (int i = 0; i < 200; i++)
            assert_int_equal(serex_execute(f->pool, noop_task, NULL),
                             SEREX_OK);
        assert_int_equal(serex_execute(f->pool, test_signal_task, f->done),
                         SEREX_OK);
        serex_shutdown(f->pool);
        assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT),
                         SEREX_OK);
        assert_int_equal(atomic_load(&f->target), -1);
        assert_int_equal(serex_destroy(f->pool), SEREX_OK);
        make_pool(f, 2, 0);
    }
}

static void index_task(void *arg)
{
    (void)arg; /* handed back, or run: both are counted */
}

static void pool_shutdown_now_with_batches_hands_back_in_order(void **state)
{
    struct fixture *f = *state;
    struct blocker b[2];
    size_t n;

    /*
     * Two blocked workers, the second holding a batch it took with its
     * blocker; the rest in the shared queue. The first blocker starts
     * before anything else is queued, so the second worker is the only
     * one left to take the second blocker and the tasks behind it (the
     * oldest first): nothing else can run. (With both blockers queued
     * at once, a free worker may take a younger task first: a pool starts
     * tasks in about the order they came, not exactly; the test flaked.)
     */
    make_pool(f, 2, 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(serex_event_create(&b[i].started), SEREX_OK);
        assert_int_equal(serex_event_create(&b[i].release), SEREX_OK);
    }
    assert_int_equal(serex_execute(f->pool, block_task, &b[0]), SEREX_OK);
    assert_signalled(b[0].started);
    assert_int_equal(serex_execute(f->pool, block_task, &b[1]), SEREX_OK);
    for (size_t i = 0; i < NTASKS; i++)
        assert_int_equal(serex_execute(f->pool, index_task, &f->idx[i]),
                         SEREX_OK);
    assert_signalled(b[1].started);
    n = serex_shutdown_now(f->pool, record_pending, f);
    /* nothing has run but the blockers: all handed back, in order */
    assert_int_equal(n, NTASKS);
    assert_int_equal(atomic_load(&f->count), NTASKS);
    for (size_t i = 0; i < NTASKS; i++)
        assert_ptr_equal(f->pending_args[i], &f->idx[i]);
    assert_int_equal(serex_shutdown_now(f->pool, record_pending, f), 0);
    for (int i = 0; i < 2; i++)
        serex_event_signal(b[i].release);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    for (int i = 0; i < 2; i++) {
        serex_event_destroy(b[i].started);
        serex_event_destroy(b[i].release);
    }
}

/*
 * Promise 2b: a pool hands back each submitting thread's tasks in the
 * order that thread submitted them, wherever they wait. A worker's task
 * submits NLOCAL tasks to its own pool (its next-task slot, its run
 * queue, and, past 256, the older halves sent to the shared queue), and
 * the test's thread submits NTASKS - NLOCAL from outside, while both
 * workers are held; then shutdown_now. Both threads' tasks come back,
 * each in its own order, and nothing ran.
 */
#define NLOCAL 600

struct local_feeder {
    struct fixture *f;
    struct blocker b;
    int rc;
};

static void local_feed_task(void *arg)
{
    struct local_feeder *lf = arg;

    for (size_t i = 0; i < NLOCAL && lf->rc == SEREX_OK; i++)
        lf->rc = serex_execute(lf->f->pool, index_task, &lf->f->idx[i]);
    block_task(&lf->b);
}

static void pool_shutdown_now_hands_back_each_threads_tasks_in_order(
    void **state)
{
    struct fixture *f = *state;
    struct local_feeder lf = {f, {NULL, NULL}, SEREX_OK};
    struct blocker other;
    size_t n, next_local = 0, next_outside = NLOCAL;

    make_pool(f, 2, 0);
    assert_int_equal(serex_event_create(&lf.b.started), SEREX_OK);
    assert_int_equal(serex_event_create(&lf.b.release), SEREX_OK);
    assert_int_equal(serex_event_create(&other.started), SEREX_OK);
    assert_int_equal(serex_event_create(&other.release), SEREX_OK);
    assert_int_equal(serex_execute(f->pool, block_task, &other), SEREX_OK);
    assert_signalled(other.started);
    assert_int_equal(serex_execute(f->pool, local_feed_task, &lf), SEREX_OK);
    assert_signalled(lf.b.started); /* both workers held from here */
    assert_int_equal(lf.rc, SEREX_OK);
    for (size_t i = NLOCAL; i < NTASKS; i++)
        assert_int_equal(serex_execute(f->pool, index_task, &f->idx[i]),
                         SEREX_OK);
    n = serex_shutdown_now(f->pool, record_pending, f);
    assert_int_equal(n, NTASKS);
    assert_int_equal(atomic_load(&f->count), NTASKS);
    for (size_t i = 0; i < NTASKS; i++) {
        size_t k = (size_t)((size_t *)f->pending_args[i] - f->idx);

        /* each thread's next one: the worker's 0.., the test's NLOCAL.. */
        if (k < NLOCAL)
            assert_int_equal(k, next_local++);
        else
            assert_int_equal(k, next_outside++);
    }
    serex_event_signal(lf.b.release);
    serex_event_signal(other.release);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    serex_event_destroy(lf.b.started);
    serex_event_destroy(lf.b.release);
    serex_event_destroy(other.started);
    serex_event_destroy(other.release);
}

/*
 * A full ring (and a full level) grows with the allocation made under no
 * spinlock: allocate, lock, re-check, swap (a preempted allocator under a
 * spinlock stalls every producer spinning on it). Debug builds count the
 * allocations made under a serex spinlock (serex__alloc_spin_count).
 */
static void pool_queue_growth_allocates_under_no_spinlock(void **state)
{
    struct fixture *f = *state;
    serex_executor *high;
    const long n = 3 * SEREX__POOL_RING_MIN, nh = 100;

#ifdef NDEBUG
    skip(); /* the count is kept in Debug builds only */
#endif
    make_pool(f, 1, 0);
    occupy_worker(f);
    high = serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_HIGH);
    (void)serex__alloc_spin_count();
    set_target(f, n + nh);
    for (long i = 0; i < n; i++)
        assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
    for (long i = 0; i < nh; i++)
        assert_int_equal(serex_execute(high, count_task, f), SEREX_OK);
    assert_int_equal(serex__alloc_spin_count(), 0);
    serex_event_signal(f->block.release);
    assert_signalled(f->done);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(pool_create_bad_config_is_einval),
        T(pool_default_config_runs_every_task),
        T(pool_execute_bad_input_is_einval),
        T(pool_execute_after_shutdown_is_rejected_and_accepted_run),
        T(pool_shutdown_now_hands_back_unstarted_in_order),
        T(pool_bounded_queue_is_full_at_capacity),
        T(pool_await_times_out_until_shut_down),
        T(pool_await_and_destroy_from_own_task_is_edeadlk),
        T(pool_await_makes_task_writes_visible),
        T(pool_elastic_grows_when_busy_and_shrinks_when_idle),
        T(pool_threads_are_named_prefix_and_number),
        T(pool_two_pools_are_independent),
        T(pool_create_allocation_failure_is_enomem),
        T(pool_execute_allocation_failure_is_enomem),
        T(pool_steady_state_allocates_nothing),
        T(pool_queue_growth_allocates_under_no_spinlock),
        T(pool_parked_workers_never_miss_a_wake_up),
        T(pool_blocked_task_does_not_strand_the_tasks_behind_it),
        T(pool_shutdown_now_with_batches_hands_back_in_order),
        T(pool_shutdown_now_hands_back_each_threads_tasks_in_order),
#undef T
    };

    return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
