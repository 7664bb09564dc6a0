/* SPDX-License-Identifier: MIT */
/*
 * stress_pool_local.c - a pool of 16 workers (on any machine: run under
 * TSan on 2 cores, the "16 workers on 2 cores") whose tasks
 * submit tasks to their own pool: next-task slots, run queues, overflows
 * into the shared queue, steals of run queues and of slots, all racing
 * shutdown or shutdown_now and an outside producer. Checks promise 1
 * exactly (every task whose execute said SEREX_OK ran once or was handed
 * back once, never both, never twice, never lost; a refused one never
 * ran) and promise 2b (shutdown_now hands back each submitting thread's
 * tasks in the order that thread submitted them).
 */
#include "test_util.h"

#include <stdlib.h>

#define WORKERS 16
#define MAX_TASKS 150000
#define FANOUT 3
#define MAX_SUBMITTERS 1024 /* threads over every fixture of the run */

struct fixture;

struct task {
    struct fixture *f;
    unsigned submitter; /* its submitting thread's number */
    uint64_t seq;       /* that thread's count when it submitted it */
    _Atomic bool accepted; /* set by the submitter once execute said OK */
};

struct fixture {
    serex_executor *pool;
    struct task *tasks;
    _Atomic unsigned char *seen; /* runs + hand-backs, per task */
    _Atomic long next;           /* tasks made */
    _Atomic long accepted;
    uint64_t last_handed[MAX_SUBMITTERS]; /* seq + 1; the hand-back's */
    long disorder;                        /* the hand-back's */
    long handed;
};

static _Atomic unsigned submitters;      /* numbers given, all runs */
static _Thread_local unsigned my_number; /* 0: none yet */
static _Thread_local uint64_t my_seq;

static void spawn_task(void *arg);

/* Submits one new task from this thread; false once the budget is spent. */
static bool submit_one(struct fixture *f)
{
    long i = atomic_fetch_add(&f->next, 1);
    struct task *t;

    if (i >= MAX_TASKS)
        return false;
    if (my_number == 0)
        my_number = atomic_fetch_add(&submitters, 1) + 1;
    assert_true(my_number < MAX_SUBMITTERS);
    t = &f->tasks[i];
    t->f = f;
    t->submitter = my_number;
    t->seq = ++my_seq;
    if (serex_execute(f->pool, spawn_task, t) == SEREX_OK) {
        /* relaxed: read after await_termination, which orders */
        atomic_store_explicit(&t->accepted, true, memory_order_relaxed);
        atomic_fetch_add(&f->accepted, 1);
    }
    return true;
}

static void spawn_task(void *arg)
{
    struct task *t = arg;
    struct fixture *f = t->f;

    atomic_fetch_add(&f->seen[t - f->tasks], 1);
    for (int k = 0; k < FANOUT; k++)
        if (!submit_one(f))
            break;
}

/* shutdown_now's on_pending: runs on the test's thread only. */
static void handed(serex_fn fn, void *arg, void *ctx)
{
    struct fixture *f = ctx;
    struct task *t = arg;

    assert_true(fn == spawn_task);
    atomic_fetch_add(&f->seen[t - f->tasks], 1);
    if (t->seq < f->last_handed[t->submitter])
        f->disorder++;
    f->last_handed[t->submitter] = t->seq + 1;
    f->handed++;
}

static struct fixture *fixture_new(void)
{
    struct fixture *f = calloc(1, sizeof *f);
    serex_pool_config cfg = {.threads = WORKERS, .name = "stress-local"};

    assert_non_null(f);
    f->tasks = calloc(MAX_TASKS, sizeof *f->tasks);
    f->seen = calloc(MAX_TASKS, sizeof *f->seen);
    assert_non_null(f->tasks);
    assert_non_null(f->seen);
    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    return f;
}

/* Every accepted task seen once, every refused one never. */
static void check_and_free(struct fixture *f)
{
    long n = atomic_load(&f->next), once = 0;

    if (n > MAX_TASKS)
        n = MAX_TASKS;
    for (long i = 0; i < n; i++) {
        unsigned char seen = atomic_load(&f->seen[i]);
        /* relaxed: after await_termination, which orders */
        bool acc = atomic_load_explicit(&f->tasks[i].accepted,
                                        memory_order_relaxed);

        assert_int_equal(seen, acc ? 1 : 0);
        once += seen;
    }
    assert_int_equal(once, atomic_load(&f->accepted));
    assert_int_equal(f->disorder, 0);
    assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    free((void *)f->seen);
    free(f->tasks);
    free(f);
}

/* Roots from outside, then the tree grows on the workers; @stop: 0 runs
 * it out, 1 shutdown, 2 shutdown_now, once a part of it is made. */
static void run_tree(int stop, long stop_at)
{
    struct fixture *f = fixture_new();

    for (int i = 0; i < 64; i++)
        submit_one(f);
    if (stop != 0) {
        while (atomic_load(&f->next) < stop_at)
            serex__thread_yield();
        if (stop == 1)
            serex_shutdown(f->pool);
        else {
            size_t n = serex_shutdown_now(f->pool, handed, f);

            assert_int_equal(n, (size_t)f->handed);
        }
    }
    /* an outside producer keeps coming, refused once stopped */
    for (int i = 0; i < 1000 && submit_one(f); i++)
        ;
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    check_and_free(f);
}

static void local_tree_runs_out_loses_nothing(void **state)
{
    (void)state;
    run_tree(0, 0);
}

static void local_tree_racing_shutdown_loses_nothing(void **state)
{
    (void)state;
    for (long at = 1000; at <= MAX_TASKS / 2; at *= 4)
        run_tree(1, at);
}

static void local_tree_racing_shutdown_now_hands_back_in_order(void **state)
{
    (void)state;
    for (long at = 1000; at <= MAX_TASKS / 2; at *= 4)
        run_tree(2, at);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(local_tree_runs_out_loses_nothing),
        cmocka_unit_test(local_tree_racing_shutdown_loses_nothing),
        cmocka_unit_test(local_tree_racing_shutdown_now_hands_back_in_order),
    };

    return cmocka_run_group_tests_name("stress_pool_local", tests, NULL,
                                       NULL);
}
