/* SPDX-License-Identifier: MIT */
/*
 * stress_pool.c - the pool under concurrent producers, shutdown and
 * shutdown_now racing with execute. Checks promise 1 exactly: every task
 * whose execute said SEREX_OK ran once or was handed back once, never both,
 * never twice, never lost. Run under TSan by scripts/test.sh.
 */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#define PRODUCERS 4
#define PER_PRODUCER 20000

struct fixture;

struct producer {
    struct fixture *f;
    unsigned id;
    serex__thread thread;
    long accepted;
    long rejected;
};

struct fixture {
    serex_executor *pool;
    _Atomic unsigned char *seen; /* per task: runs + hand-backs */
    struct producer producers[PRODUCERS];
    _Atomic int go;
    _Atomic long progress; /* executes made, all producers together */
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    serex_pool_config cfg = {.threads = 3};

    assert_non_null(f);
    f->seen = calloc(PRODUCERS * PER_PRODUCER, sizeof *f->seen);
    assert_non_null(f->seen);
    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    free(f->seen);
    free(f);
    return 0;
}

/* A task's argument is its own slot in f->seen. */
static void mark_task(void *arg)
{
    _Atomic unsigned char *slot = arg;

    /* relaxed: the counts are read after await_termination, which orders */
    atomic_fetch_add_explicit(slot, 1, memory_order_relaxed);
}

static void mark_pending(serex_fn fn, void *arg, void *ctx)
{
    (void)ctx;
    assert_ptr_equal(fn, mark_task);
    mark_task(arg);
}

static int producer_main(void *arg)
{
    struct producer *pr = arg;
    struct fixture *f = pr->f;

    /* acquire: start together, to make the races likely */
    while (!atomic_load_explicit(&f->go, memory_order_acquire))
        serex__thread_yield();
    for (long i = 0; i < PER_PRODUCER; i++) {
        int rc = serex_execute(f->pool, mark_task,
                               (void *)&f->seen[pr->id * PER_PRODUCER + i]);

        /* relaxed: only paces the main thread's shutdown */
        atomic_fetch_add_explicit(&f->progress, 1, memory_order_relaxed);
        if (rc == SEREX_OK)
            pr->accepted++;
        else {
            assert_int_equal(rc, SEREX_EREJECTED);
            pr->rejected++;
        }
    }
    return 0;
}

static void start_producers(struct fixture *f)
{
    for (unsigned i = 0; i < PRODUCERS; i++) {
        f->producers[i].f = f;
        f->producers[i].id = i;
        assert_int_equal(serex__thread_start(&f->producers[i].thread,
                                             producer_main, &f->producers[i]),
                         SEREX_OK);
    }
    atomic_store_explicit(&f->go, 1, memory_order_release);
}

static long join_producers(struct fixture *f)
{
    long accepted = 0;

    for (unsigned i = 0; i < PRODUCERS; i++) {
        serex__thread_join(f->producers[i].thread);
        accepted += f->producers[i].accepted;
        assert_int_equal(f->producers[i].accepted + f->producers[i].rejected,
                         PER_PRODUCER);
    }
    return accepted;
}

/* Waits until the producers are a quarter through: shut down mid-stream. */
static void wait_for_progress(struct fixture *f)
{
    /* relaxed: pacing only */
    while (atomic_load_explicit(&f->progress, memory_order_relaxed) <
           PRODUCERS * PER_PRODUCER / 4)
        serex__thread_yield();
}

/* Every slot is 0 (rejected) or 1 (ran or handed back); @accepted are 1. */
static void check_exactly_once(struct fixture *f, long accepted)
{
    long ones = 0;

    for (long i = 0; i < PRODUCERS * PER_PRODUCER; i++) {
        unsigned char v = atomic_load_explicit(&f->seen[i],
                                               memory_order_relaxed);
        assert_true(v <= 1);
        ones += v;
    }
    assert_int_equal(ones, accepted);
}

static void stress_pool_many_producers_every_task_runs_once(void **state)
{
    struct fixture *f = *state;
    long accepted;

    start_producers(f);
    accepted = join_producers(f);
    assert_int_equal(accepted, PRODUCERS * PER_PRODUCER);
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    check_exactly_once(f, accepted);
}

static void stress_pool_shutdown_racing_execute_loses_nothing(void **state)
{
    struct fixture *f = *state;
    long accepted;

    start_producers(f);
    wait_for_progress(f);
    serex_shutdown(f->pool);
    accepted = join_producers(f);
    assert_true(accepted >= PRODUCERS * PER_PRODUCER / 4 - PRODUCERS);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    check_exactly_once(f, accepted);
}

static void stress_pool_shutdown_now_racing_execute_loses_nothing(void **state)
{
    struct fixture *f = *state;
    long accepted;
    size_t handed;

    start_producers(f);
    wait_for_progress(f);
    handed = serex_shutdown_now(f->pool, mark_pending, NULL);
    accepted = join_producers(f);
    assert_true(accepted >= PRODUCERS * PER_PRODUCER / 4 - PRODUCERS);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    /* ran + handed back == accepted, each exactly once */
    check_exactly_once(f, accepted);
    assert_true((long)handed <= accepted);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(stress_pool_many_producers_every_task_runs_once),
        T(stress_pool_shutdown_racing_execute_loses_nothing),
        T(stress_pool_shutdown_now_racing_execute_loses_nothing),
#undef T
    };

    return cmocka_run_group_tests_name("stress_pool", tests, NULL, NULL);
}
