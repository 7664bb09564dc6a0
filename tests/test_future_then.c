/* SPDX-License-Identifier: MIT */
/*
 * test_future_then.c - composition without blocking: continuations of a
 * future (serex_future_on_done), futures chained on futures
 * (serex_future_then), and serex_future_wait's SEREX_EDEADLK from a task
 * that the future's task is queued behind (promise 7b).
 *
 * Order is driven with manual executors: sources run on fx->manual,
 * continuations are posted to fx->target, so each step is visible
 * (nothing posted yet, posted, run). The pool tests wait with the test
 * timeout, so a lost continuation fails instead of hanging. Every object
 * is released on every path: the ASan build's LeakSanitizer checks that
 * no record leaks.
 */
#include "test_util.h"

#include <stdlib.h> /* calloc, free */

#include "nodecache_internal.h" /* serex__cache_trim */

#define NCONT 16
#define LONG_CHAIN 200000 /* deep enough to overflow a recursive settle */
#define RACE_CONTS 200

struct fixture;

/* What one continuation saw when it ran. */
struct probe {
    struct fixture *fx;
    serex_future *f; /* looked at inside; NULL: not looked at */
    int id;
    int ran;
    int rc;      /* serex_future_wait(f, 0) inside */
    void *value; /* serex_future_value(f) inside */
};

struct fixture {
    serex_executor *manual; /* sources run here */
    serex_executor *target; /* continuations are posted here */
    serex_executor *pool;   /* made by the tests that need one */
    serex_executor *serial; /* ditto */
    serex_striped *striped; /* ditto */
    serex_event *done;
    int log[RACE_CONTS];    /* probe ids in the order they ran */
    int nlog;
    struct probe probes[RACE_CONTS];
    atomic_int calls;       /* how many times a call_fn ran */
    struct test_pending pending;
    serex_fn pending_fns[8];
    void *pending_args[8];
};

/* --- calls and continuations --- */

/* Returns its argument plus one (as a pointer into an int array). */
static void *next_int(void *arg)
{
    return (int *)arg + 1;
}

/* A call_fn that must not run (its chain was cancelled). */
static void *never_call(void *arg)
{
    (void)arg;
    fail_msg("a call that must not run ran");
    return NULL;
}

/* Returns its argument (a fixture, for count_call down the chain). */
static void *identity(void *arg)
{
    return arg;
}

/* Counts its runs in the fixture it is given, and passes it on. */
static void *count_call(void *arg)
{
    struct fixture *fx = arg;

    atomic_fetch_add(&fx->calls, 1);
    return fx;
}

/* A continuation: records what it saw, logs its id. */
static void probe_cont(void *arg)
{
    struct probe *p = arg;

    p->ran++;
    if (p->f != NULL) {
        p->rc = serex_future_wait(p->f, 0);
        p->value = serex_future_value(p->f);
    }
    if (p->fx->nlog < RACE_CONTS)
        p->fx->log[p->fx->nlog++] = p->id;
}

/* As probe_cont, then signals fx->done (the last of a pool test). */
static void probe_cont_signal(void *arg)
{
    struct probe *p = arg;

    probe_cont(p);
    serex_event_signal(p->fx->done);
}

static struct probe *probe(struct fixture *fx, int id, serex_future *f)
{
    struct probe *p = &fx->probes[id];

    *p = (struct probe){.fx = fx, .f = f, .id = id, .rc = 1};
    return p;
}

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);

    if (fx == NULL)
        return -1;
    if (serex_manual_create(&fx->manual) != SEREX_OK ||
        serex_manual_create(&fx->target) != SEREX_OK ||
        serex_event_create(&fx->done) != SEREX_OK)
        return -1;
    atomic_init(&fx->calls, 0);
    fx->pending.cap = 8;
    fx->pending.fns = fx->pending_fns;
    fx->pending.args = fx->pending_args;
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    serex__alloc_fail_nth(0);
    if (fx->serial != NULL)
        assert_int_equal(serex_destroy(fx->serial), SEREX_OK);
    if (fx->striped != NULL)
        assert_int_equal(serex_destroy(serex_striped_executor(fx->striped)),
                         SEREX_OK);
    if (fx->pool != NULL)
        assert_int_equal(serex_destroy(fx->pool), SEREX_OK);
    if (fx->manual != NULL)
        assert_int_equal(serex_destroy(fx->manual), SEREX_OK);
    if (fx->target != NULL)
        assert_int_equal(serex_destroy(fx->target), SEREX_OK);
    serex_event_destroy(fx->done);
    free(fx);
    return 0;
}

static void make_pool(struct fixture *fx, unsigned threads)
{
    serex_pool_config cfg = {.threads = threads, .name = "test-then"};

    assert_int_equal(serex_pool_create(&cfg, &fx->pool), SEREX_OK);
}

/* A future of next_int(&nums[0]) on fx->manual, not run yet. */
static serex_future *pending_future(struct fixture *fx, int *nums)
{
    serex_future *f = NULL;

    assert_int_equal(serex_submit(fx->manual, next_int, nums, &f), SEREX_OK);
    return f;
}

/* A future of identity(fx) on fx->manual, not run yet. */
static serex_future *pending_fx(struct fixture *fx)
{
    serex_future *f = NULL;

    assert_int_equal(serex_submit(fx->manual, identity, fx, &f), SEREX_OK);
    return f;
}

/* --- on_done --- */

static void future_on_done_runs_continuations_in_add_order(void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums);

    for (int i = 0; i < NCONT; i++)
        assert_int_equal(
            serex_future_on_done(f, fx->target, probe_cont, probe(fx, i, f)),
            SEREX_OK);
    assert_int_equal(serex_manual_run_pending(fx->target), 0); /* not yet */
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(serex_manual_run_pending(fx->target), NCONT);
    assert_int_equal(fx->nlog, NCONT);
    for (int i = 0; i < NCONT; i++) {
        assert_int_equal(fx->log[i], i);
        assert_int_equal(fx->probes[i].ran, 1);
        /* the outcome is there at once inside each continuation */
        assert_int_equal(fx->probes[i].rc, SEREX_OK);
        assert_ptr_equal(fx->probes[i].value, &nums[1]);
    }
    serex_future_release(f);
}

static void future_on_done_of_ended_future_is_posted_at_once(void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums), *g = pending_future(fx, nums);

    assert_true(serex_manual_run_one(fx->manual)); /* f ran */
    assert_true(serex_future_cancel(g));           /* g cancelled */
    assert_int_equal(
        serex_future_on_done(f, fx->target, probe_cont, probe(fx, 0, f)),
        SEREX_OK);
    assert_int_equal(
        serex_future_on_done(g, fx->target, probe_cont, probe(fx, 1, g)),
        SEREX_OK);
    assert_int_equal(fx->probes[0].ran, 0); /* posted, not run inline */
    assert_int_equal(serex_manual_run_pending(fx->target), 2);
    assert_int_equal(fx->probes[0].rc, SEREX_OK);
    assert_ptr_equal(fx->probes[0].value, &nums[1]);
    assert_int_equal(fx->probes[1].rc, SEREX_ECANCELED);
    assert_null(fx->probes[1].value);
    serex_future_release(f);
    serex_future_release(g);
}

static void future_on_done_of_cancelled_future_runs_and_sees_ecanceled(
    void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums);

    assert_int_equal(
        serex_future_on_done(f, fx->target, probe_cont, probe(fx, 0, f)),
        SEREX_OK);
    assert_true(serex_future_cancel(f)); /* posts the continuation */
    assert_int_equal(serex_manual_run_pending(fx->target), 1);
    assert_int_equal(fx->probes[0].ran, 1);
    assert_int_equal(fx->probes[0].rc, SEREX_ECANCELED);
    assert_null(fx->probes[0].value);
    assert_true(serex_manual_run_one(fx->manual)); /* the skipped slot */
    assert_int_equal(serex_manual_run_pending(fx->target), 0);
    assert_int_equal(fx->probes[0].ran, 1);
    serex_future_release(f);
}

static void future_on_done_of_future_taken_back_runs(void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums);

    assert_int_equal(
        serex_future_on_done(f, fx->target, probe_cont, probe(fx, 0, f)),
        SEREX_OK);
    assert_int_equal(
        serex_shutdown_now(fx->manual, test_pending_cb, &fx->pending), 1);
    assert_int_equal(fx->pending.n, 0);
    assert_int_equal(serex_manual_run_pending(fx->target), 1);
    assert_int_equal(fx->probes[0].rc, SEREX_ECANCELED);
    serex_future_release(f);
}

static void future_on_done_to_a_serial_runs_in_add_order(void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums);

    assert_int_equal(serex_serial_create(fx->target, NULL, &fx->serial),
                     SEREX_OK);
    for (int i = 0; i < NCONT; i++)
        assert_int_equal(
            serex_future_on_done(f, fx->serial, probe_cont, probe(fx, i, f)),
            SEREX_OK);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(test_run_all(fx->target), 1); /* one drain ran them */
    assert_int_equal(fx->nlog, NCONT);
    for (int i = 0; i < NCONT; i++) {
        assert_int_equal(fx->log[i], i);
        assert_int_equal(fx->probes[i].rc, SEREX_OK);
    }
    serex_future_release(f);
}

static void future_on_done_target_refusing_runs_inline_where_it_ends(
    void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums);

    serex_shutdown(fx->target); /* refuses every execute from now on */
    assert_int_equal(
        serex_future_on_done(f, fx->target, probe_cont, probe(fx, 0, f)),
        SEREX_OK);
    assert_int_equal(fx->probes[0].ran, 0);
    /* ran inside the run of f: on the thread that ended it */
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(fx->probes[0].ran, 1);
    assert_int_equal(fx->probes[0].rc, SEREX_OK);
    assert_ptr_equal(fx->probes[0].value, &nums[1]);
    /* f has ended: now it runs inside on_done itself */
    assert_int_equal(
        serex_future_on_done(f, fx->target, probe_cont, probe(fx, 1, f)),
        SEREX_OK);
    assert_int_equal(fx->probes[1].ran, 1);
    assert_int_equal(fx->probes[1].rc, SEREX_OK);
    assert_int_equal(serex_manual_run_pending(fx->target), 0);
    serex_future_release(f);
}

static void future_on_done_taken_back_by_shutdown_now_runs_inline(
    void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums);

    assert_int_equal(
        serex_future_on_done(f, fx->target, probe_cont, probe(fx, 0, f)),
        SEREX_OK);
    assert_true(serex_manual_run_one(fx->manual)); /* posted to target */
    assert_int_equal(fx->probes[0].ran, 0);
    /* counted as taken back, runs here, never reaches on_pending */
    assert_int_equal(
        serex_shutdown_now(fx->target, test_pending_cb, &fx->pending), 1);
    assert_int_equal(fx->pending.n, 0);
    assert_int_equal(fx->probes[0].ran, 1);
    assert_int_equal(fx->probes[0].rc, SEREX_OK);
    serex_future_release(f);
}

static void future_on_done_dropped_by_destroy_runs_inline(void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums);

    assert_int_equal(
        serex_future_on_done(f, fx->target, probe_cont, probe(fx, 0, f)),
        SEREX_OK);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(serex_destroy(fx->target), SEREX_OK);
    fx->target = NULL;
    assert_int_equal(fx->probes[0].ran, 1);
    assert_int_equal(fx->probes[0].rc, SEREX_OK);
    serex_future_release(f);
}

/* A continuation run inline that adds another to the same future. */
struct adder {
    struct probe *p;
    serex_future *f;
    serex_executor *target;
    struct probe *late;
};

static void adding_cont(void *arg)
{
    struct adder *a = arg;

    probe_cont(a->p);
    assert_int_equal(
        serex_future_on_done(a->f, a->target, probe_cont, a->late), SEREX_OK);
}

static void future_on_done_added_while_posting_runs_after_earlier_ones(
    void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums);
    struct adder a = {probe(fx, 0, f), f, fx->target, probe(fx, 2, f)};

    /* inline (the target refuses), so "posted" is "ran": 0 adds 2 while
     * the ender posts; 1 was added before, so it must run before 2 */
    serex_shutdown(fx->target);
    assert_int_equal(serex_future_on_done(f, fx->target, adding_cont, &a),
                     SEREX_OK);
    assert_int_equal(
        serex_future_on_done(f, fx->target, probe_cont, probe(fx, 1, f)),
        SEREX_OK);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(fx->nlog, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(fx->log[i], i);
        assert_int_equal(fx->probes[i].rc, SEREX_OK);
    }
    serex_future_release(f);
}

static void future_on_done_with_future_released_early_still_runs(
    void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums);

    assert_int_equal(serex_future_on_done(f, fx->target, probe_cont,
                                          probe(fx, 0, NULL)),
                     SEREX_OK);
    serex_future_release(f); /* the task's reference keeps it */
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(serex_manual_run_pending(fx->target), 1);
    assert_int_equal(fx->probes[0].ran, 1);
}

static void future_on_done_bad_input_is_einval(void **state)
{
    struct fixture *fx = *state;
    serex_executor no_ops = {NULL};
    int nums[2];
    serex_future *f = pending_future(fx, nums);
    struct probe *p = probe(fx, 0, f);

    assert_int_equal(serex_future_on_done(NULL, fx->target, probe_cont, p),
                     SEREX_EINVAL);
    assert_int_equal(serex_future_on_done(f, NULL, probe_cont, p),
                     SEREX_EINVAL);
    assert_int_equal(serex_future_on_done(f, &no_ops, probe_cont, p),
                     SEREX_EINVAL);
    assert_int_equal(serex_future_on_done(f, fx->target, NULL, p),
                     SEREX_EINVAL);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(serex_manual_run_pending(fx->target), 0);
    assert_int_equal(p->ran, 0);
    serex_future_release(f);
}

static void future_on_done_allocation_failure_is_enomem(void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums);

    serex__cache_trim(); /* the record must come from malloc */
    serex__alloc_fail_nth(1);
    assert_int_equal(
        serex_future_on_done(f, fx->target, probe_cont, probe(fx, 0, f)),
        SEREX_ENOMEM);
    serex__alloc_fail_nth(0);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(serex_manual_run_pending(fx->target), 0);
    assert_int_equal(fx->probes[0].ran, 0);
    serex_future_release(f);
}

/* A pool call that holds its worker until @go is signalled: the source
 * of the race below stays pending while the first continuations are
 * added. */
struct gate_call {
    serex_event *go;
};

static void *held_call(void *arg)
{
    struct gate_call *g = arg;

    assert_int_equal(serex_event_wait(g->go, TEST_TIMEOUT), SEREX_OK);
    return g;
}

static void future_on_done_racing_the_end_keeps_add_order(void **state)
{
    struct fixture *fx = *state;
    struct gate_call gc;
    serex_future *f = NULL;

    /* a serial over the pool runs the continuations in posting order:
     * those added before, during and after the end of f */
    make_pool(fx, 2);
    assert_int_equal(serex_serial_create(fx->pool, NULL, &fx->serial),
                     SEREX_OK);
    assert_int_equal(serex_event_create(&gc.go), SEREX_OK);
    assert_int_equal(serex_submit(fx->pool, held_call, &gc, &f), SEREX_OK);
    for (int i = 0; i < RACE_CONTS; i++) {
        serex_fn fn = i == RACE_CONTS - 1 ? probe_cont_signal : probe_cont;

        if (i == RACE_CONTS / 4)
            serex_event_signal(gc.go); /* f ends while we add */
        assert_int_equal(
            serex_future_on_done(f, fx->serial, fn, probe(fx, i, f)),
            SEREX_OK);
    }
    assert_signalled(fx->done);
    assert_int_equal(fx->nlog, RACE_CONTS);
    for (int i = 0; i < RACE_CONTS; i++) {
        assert_int_equal(fx->log[i], i);
        assert_int_equal(fx->probes[i].rc, SEREX_OK);
        assert_ptr_equal(fx->probes[i].value, &gc);
    }
    serex_future_release(f);
    serex_event_destroy(gc.go);
}

static void future_on_done_to_a_pool_runs_on_a_worker(void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = NULL;

    make_pool(fx, 2);
    assert_int_equal(serex_submit(fx->pool, next_int, nums, &f), SEREX_OK);
    assert_int_equal(serex_future_on_done(f, fx->pool, probe_cont_signal,
                                          probe(fx, 0, f)),
                     SEREX_OK);
    assert_signalled(fx->done);
    assert_int_equal(fx->probes[0].rc, SEREX_OK);
    assert_ptr_equal(fx->probes[0].value, &nums[1]);
    serex_future_release(f);
}

/* --- then --- */

static void future_then_chains_values(void **state)
{
    struct fixture *fx = *state;
    int nums[4];
    serex_future *f = pending_future(fx, nums), *g = NULL, *h = NULL;

    assert_int_equal(serex_future_then(f, fx->target, next_int, &g),
                     SEREX_OK);
    assert_int_equal(serex_future_then(g, fx->target, next_int, &h),
                     SEREX_OK);
    assert_int_equal(serex_future_on_done(h, fx->target, probe_cont,
                                          probe(fx, 0, h)),
                     SEREX_OK);
    assert_int_equal(serex_future_wait(g, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_manual_run_pending(fx->target), 0);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(serex_future_wait(g, 0), SEREX_ETIMEDOUT); /* posted */
    assert_int_equal(serex_manual_run_pending(fx->target), 1);  /* g */
    assert_int_equal(serex_future_wait(g, 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(g), &nums[2]);
    assert_int_equal(serex_manual_run_pending(fx->target), 1); /* h */
    assert_int_equal(serex_future_wait(h, 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(h), &nums[3]);
    assert_int_equal(serex_manual_run_pending(fx->target), 1); /* probe */
    assert_int_equal(fx->probes[0].rc, SEREX_OK);
    assert_ptr_equal(fx->probes[0].value, &nums[3]);
    serex_future_release(f);
    serex_future_release(g);
    serex_future_release(h);
}

static void future_then_and_on_done_are_posted_in_add_order(void **state)
{
    struct fixture *fx = *state;
    int nums[3];
    serex_future *f = pending_future(fx, nums), *g = NULL;

    assert_int_equal(
        serex_future_on_done(f, fx->target, probe_cont, probe(fx, 0, NULL)),
        SEREX_OK);
    assert_int_equal(serex_future_then(f, fx->target, next_int, &g),
                     SEREX_OK);
    assert_int_equal(
        serex_future_on_done(f, fx->target, probe_cont, probe(fx, 1, g)),
        SEREX_OK);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(serex_manual_run_pending(fx->target), 3);
    assert_int_equal(fx->nlog, 2);
    assert_int_equal(fx->log[0], 0);
    assert_int_equal(fx->log[1], 1);
    /* g's call was posted between the two: it ran before probe 1 */
    assert_int_equal(fx->probes[1].rc, SEREX_OK);
    assert_ptr_equal(fx->probes[1].value, &nums[2]);
    serex_future_release(f);
    serex_future_release(g);
}

static void future_then_cancelled_source_cancels_the_chain(void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums), *g = NULL, *h = NULL;

    assert_int_equal(serex_future_then(f, fx->target, never_call, &g),
                     SEREX_OK);
    assert_int_equal(serex_future_then(g, fx->target, never_call, &h),
                     SEREX_OK);
    assert_int_equal(serex_future_on_done(h, fx->target, probe_cont,
                                          probe(fx, 0, h)),
                     SEREX_OK);
    assert_true(serex_future_cancel(f));
    /* at once, all the way down; only h's continuation is posted */
    assert_int_equal(serex_future_wait(g, 0), SEREX_ECANCELED);
    assert_int_equal(serex_future_wait(h, 0), SEREX_ECANCELED);
    assert_false(serex_future_cancel(g));
    assert_int_equal(serex_manual_run_pending(fx->target), 1);
    assert_int_equal(fx->probes[0].rc, SEREX_ECANCELED);
    assert_true(serex_manual_run_one(fx->manual)); /* f's skipped slot */
    assert_int_equal(serex_manual_run_pending(fx->target), 0);
    serex_future_release(f);
    serex_future_release(g);
    serex_future_release(h);
}

static void future_then_source_taken_back_cancels_next(void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums), *g = NULL;

    assert_int_equal(serex_future_then(f, fx->target, never_call, &g),
                     SEREX_OK);
    serex_future_release(f);
    assert_int_equal(serex_destroy(fx->manual), SEREX_OK); /* drops f */
    fx->manual = NULL;
    assert_int_equal(serex_future_wait(g, 0), SEREX_ECANCELED);
    assert_int_equal(serex_manual_run_pending(fx->target), 0);
    serex_future_release(g);
}

static void future_then_next_cancelled_before_start_never_calls(void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums), *g = NULL, *h = NULL;

    /* g cancelled while f is pending; h once posted to the target */
    assert_int_equal(serex_future_then(f, fx->target, never_call, &g),
                     SEREX_OK);
    assert_int_equal(serex_future_then(f, fx->target, never_call, &h),
                     SEREX_OK);
    assert_int_equal(serex_future_on_done(g, fx->target, probe_cont,
                                          probe(fx, 0, g)),
                     SEREX_OK);
    assert_true(serex_future_cancel(g));
    assert_int_equal(serex_future_wait(g, 0), SEREX_ECANCELED);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(serex_future_wait(f, 0), SEREX_OK);
    assert_true(serex_future_cancel(h));
    test_run_all(fx->target);
    assert_int_equal(fx->probes[0].rc, SEREX_ECANCELED);
    assert_int_equal(serex_future_wait(g, 0), SEREX_ECANCELED);
    assert_int_equal(serex_future_wait(h, 0), SEREX_ECANCELED);
    assert_null(serex_future_value(h));
    serex_future_release(f);
    serex_future_release(g);
    serex_future_release(h);
}

static void future_then_source_released_early_still_completes(void **state)
{
    struct fixture *fx = *state;
    int nums[3];
    serex_future *f = pending_future(fx, nums), *g = NULL;

    assert_int_equal(serex_future_then(f, fx->target, next_int, &g),
                     SEREX_OK);
    serex_future_release(f); /* g keeps what it needs */
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(serex_manual_run_pending(fx->target), 1);
    assert_int_equal(serex_future_wait(g, 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(g), &nums[2]);
    serex_future_release(g);
}

static void future_then_next_released_early_still_runs(void **state)
{
    struct fixture *fx = *state;
    serex_future *f = pending_fx(fx), *g = NULL;

    assert_int_equal(serex_future_then(f, fx->target, count_call, &g),
                     SEREX_OK);
    serex_future_release(g); /* fire and forget */
    serex_future_release(f);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(serex_manual_run_pending(fx->target), 1);
    assert_int_equal(atomic_load(&fx->calls), 1);
}

static void future_then_of_ended_future_is_posted_at_once(void **state)
{
    struct fixture *fx = *state;
    int nums[3];
    serex_future *f = pending_future(fx, nums), *c = pending_future(fx, nums);
    serex_future *g = NULL, *h = NULL;

    assert_true(serex_manual_run_one(fx->manual));
    assert_true(serex_future_cancel(c));
    assert_int_equal(serex_future_then(f, fx->target, next_int, &g),
                     SEREX_OK);
    assert_int_equal(serex_future_then(c, fx->target, never_call, &h),
                     SEREX_OK);
    assert_int_equal(serex_future_wait(h, 0), SEREX_ECANCELED); /* at once */
    assert_int_equal(serex_future_wait(g, 0), SEREX_ETIMEDOUT); /* posted */
    assert_int_equal(serex_manual_run_pending(fx->target), 1);
    assert_int_equal(serex_future_wait(g, 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(g), &nums[2]);
    serex_future_release(f);
    serex_future_release(c);
    serex_future_release(g);
    serex_future_release(h);
}

static void future_then_target_refusing_runs_inline(void **state)
{
    struct fixture *fx = *state;
    int nums[3];
    serex_future *f = pending_future(fx, nums), *g = NULL;

    serex_shutdown(fx->target);
    assert_int_equal(serex_future_then(f, fx->target, next_int, &g),
                     SEREX_OK);
    assert_int_equal(serex_future_wait(g, 0), SEREX_ETIMEDOUT);
    assert_true(serex_manual_run_one(fx->manual)); /* g runs in there */
    assert_int_equal(serex_future_wait(g, 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(g), &nums[2]);
    serex_future_release(f);
    serex_future_release(g);
}

static void future_then_taken_back_by_its_target_runs_inline(void **state)
{
    struct fixture *fx = *state;
    int nums[3];
    serex_future *f = pending_future(fx, nums), *g = NULL;

    assert_int_equal(serex_future_then(f, fx->target, next_int, &g),
                     SEREX_OK);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(
        serex_shutdown_now(fx->target, test_pending_cb, &fx->pending), 1);
    assert_int_equal(fx->pending.n, 0); /* never the user's */
    assert_int_equal(serex_future_wait(g, 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(g), &nums[2]);
    serex_future_release(f);
    serex_future_release(g);
}

/* Builds a chain of LONG_CHAIN futures on @f, each a then of the one
 * before on fx->target, calling @call; returns them (fs[0] is f). */
static serex_future **long_chain(struct fixture *fx, serex_future *f,
                                 serex_call_fn call)
{
    serex_future **fs = calloc(LONG_CHAIN, sizeof *fs);

    assert_non_null(fs);
    fs[0] = f;
    for (int i = 1; i < LONG_CHAIN; i++)
        assert_int_equal(serex_future_then(fs[i - 1], fx->target, call, &fs[i]),
                         SEREX_OK);
    return fs;
}

static void release_chain(serex_future **fs)
{
    for (int i = 0; i < LONG_CHAIN; i++)
        serex_future_release(fs[i]);
    free(fs);
}

static void future_then_long_chain_is_cancelled_without_recursion(
    void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future **fs = long_chain(fx, pending_future(fx, nums), never_call);

    assert_true(serex_future_cancel(fs[0]));
    for (int i = 0; i < LONG_CHAIN; i++)
        assert_int_equal(serex_future_wait(fs[i], 0), SEREX_ECANCELED);
    release_chain(fs);
}

static void future_then_long_chain_runs_inline_without_recursion(
    void **state)
{
    struct fixture *fx = *state;
    serex_future **fs = long_chain(fx, pending_fx(fx), count_call);

    serex_shutdown(fx->target); /* every call runs inline, in one loop */
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(atomic_load(&fx->calls), LONG_CHAIN - 1);
    for (int i = 1; i < LONG_CHAIN; i++) {
        assert_int_equal(serex_future_wait(fs[i], 0), SEREX_OK);
        assert_ptr_equal(serex_future_value(fs[i]), fx);
    }
    release_chain(fs);
}

static void future_then_on_a_pool_chains_across_workers(void **state)
{
    struct fixture *fx = *state;
    int nums[5];
    serex_future *fs[4];

    make_pool(fx, 2);
    assert_int_equal(serex_submit(fx->pool, next_int, nums, &fs[0]),
                     SEREX_OK);
    for (int i = 1; i < 4; i++)
        assert_int_equal(serex_future_then(fs[i - 1], fx->pool, next_int,
                                           &fs[i]),
                         SEREX_OK);
    assert_int_equal(serex_future_wait(fs[3], TEST_TIMEOUT), SEREX_OK);
    assert_ptr_equal(serex_future_value(fs[3]), &nums[4]);
    for (int i = 0; i < 4; i++)
        serex_future_release(fs[i]);
}

static void future_then_bad_input_is_einval(void **state)
{
    struct fixture *fx = *state;
    serex_executor no_ops = {NULL};
    int nums[2];
    serex_future *f = pending_future(fx, nums), *g;

    assert_int_equal(serex_future_then(f, fx->target, next_int, NULL),
                     SEREX_EINVAL);
    g = f;
    assert_int_equal(serex_future_then(NULL, fx->target, next_int, &g),
                     SEREX_EINVAL);
    assert_null(g);
    g = f;
    assert_int_equal(serex_future_then(f, NULL, next_int, &g), SEREX_EINVAL);
    assert_null(g);
    g = f;
    assert_int_equal(serex_future_then(f, &no_ops, next_int, &g),
                     SEREX_EINVAL);
    assert_null(g);
    g = f;
    assert_int_equal(serex_future_then(f, fx->target, NULL, &g),
                     SEREX_EINVAL);
    assert_null(g);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(serex_manual_run_pending(fx->target), 0);
    serex_future_release(f);
}

static void future_then_allocation_failure_is_enomem(void **state)
{
    struct fixture *fx = *state;
    int nums[2];
    serex_future *f = pending_future(fx, nums), *g = f;

    serex__cache_trim();
    serex__alloc_fail_nth(1);
    assert_int_equal(serex_future_then(f, fx->target, never_call, &g),
                     SEREX_ENOMEM);
    serex__alloc_fail_nth(0);
    assert_null(g);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(serex_manual_run_pending(fx->target), 0);
    serex_future_release(f);
}

/* --- SEREX_EDEADLK: waiting on a future queued behind the caller --- */

/* A task that submits a future (via @submit) and waits on it. */
struct self_wait {
    struct fixture *fx;
    serex_future *(*submit)(struct self_wait *w);
    serex_future *f;
    uint64_t key;
    int wait0, wait_forever;
};

#define NOT_TRIED 1 /* no status: the wait was not made */

/* Waits with timeout 0 first, so a missing check fails instead of
 * hanging; the wait that would hang is made only once 0 said EDEADLK. */
static void self_wait_task(void *arg)
{
    struct self_wait *w = arg;

    w->f = w->submit(w);
    w->wait0 = serex_future_wait(w->f, 0);
    w->wait_forever = w->wait0 == SEREX_EDEADLK
                          ? serex_future_wait(w->f, SEREX_FOREVER)
                          : NOT_TRIED;
}

/* A pool call: submits to its own pool and waits, with the test timeout
 * (another worker runs it, so it must say SEREX_OK). */
static void *wait_inner_call(void *arg)
{
    struct self_wait *w = arg;

    w->f = w->submit(w);
    w->wait_forever = serex_future_wait(w->f, TEST_TIMEOUT);
    return w;
}

static serex_future *submit_to_serial(struct self_wait *w)
{
    serex_future *f = NULL;

    assert_int_equal(serex_submit(w->fx->serial, next_int, w, &f), SEREX_OK);
    return f;
}

static serex_future *submit_to_manual(struct self_wait *w)
{
    serex_future *f = NULL;

    assert_int_equal(serex_submit(w->fx->manual, next_int, w, &f), SEREX_OK);
    return f;
}

static serex_future *submit_to_pool(struct self_wait *w)
{
    serex_future *f = NULL;

    assert_int_equal(serex_submit(w->fx->pool, next_int, w, &f), SEREX_OK);
    return f;
}

static serex_future *submit_to_key(struct self_wait *w)
{
    serex_future *f = NULL;

    assert_int_equal(
        serex_striped_submit(w->fx->striped, w->key, next_int, w, &f),
        SEREX_OK);
    return f;
}

static serex_future *submit_keyless(struct self_wait *w)
{
    serex_future *f = NULL;

    assert_int_equal(serex_submit(serex_striped_executor(w->fx->striped),
                                  next_int, w, &f),
                     SEREX_OK);
    return f;
}

/* A then-future of a pending future on fx->target, chained to the serial */
static serex_future *then_to_serial(struct self_wait *w)
{
    serex_future *src = NULL, *g = NULL;

    assert_int_equal(serex_submit(w->fx->target, next_int, w, &src),
                     SEREX_OK);
    assert_int_equal(serex_future_then(src, w->fx->serial, next_int, &g),
                     SEREX_OK);
    serex_future_release(src);
    return g;
}

static void assert_edeadlk(const struct self_wait *w)
{
    assert_int_equal(w->wait0, SEREX_EDEADLK);
    assert_int_equal(w->wait_forever, SEREX_EDEADLK);
}

static void future_wait_from_own_serial_is_edeadlk(void **state)
{
    struct fixture *fx = *state;
    struct self_wait w = {.fx = fx, .submit = submit_to_serial};
    struct self_wait t = {.fx = fx, .submit = then_to_serial};

    assert_int_equal(serex_serial_create(fx->manual, NULL, &fx->serial),
                     SEREX_OK);
    assert_int_equal(serex_execute(fx->serial, self_wait_task, &w), SEREX_OK);
    assert_int_equal(serex_execute(fx->serial, self_wait_task, &t), SEREX_OK);
    test_run_all(fx->manual); /* w, t, then w.f, and t.f once posted */
    assert_edeadlk(&w);
    assert_edeadlk(&t);
    /* once ended, the same waits answer from anywhere */
    test_run_all(fx->target);
    test_run_all(fx->manual);
    assert_int_equal(serex_future_wait(w.f, 0), SEREX_OK);
    assert_int_equal(serex_future_wait(t.f, 0), SEREX_OK);
    serex_future_release(w.f);
    serex_future_release(t.f);
}

/* A serial task that waits on a future of the same serial that has run
 * already: no EDEADLK, the outcome at once. */
static void wait_ended_task(void *arg)
{
    struct self_wait *w = arg;

    w->wait0 = serex_future_wait(w->f, 0);
    w->wait_forever = serex_future_wait(w->f, SEREX_FOREVER);
}

static void future_wait_from_own_serial_on_ended_future_is_ok(void **state)
{
    struct fixture *fx = *state;
    struct self_wait w = {.fx = fx};

    assert_int_equal(serex_serial_create(fx->manual, NULL, &fx->serial),
                     SEREX_OK);
    w.f = submit_to_serial(&w);
    assert_int_equal(serex_execute(fx->serial, wait_ended_task, &w),
                     SEREX_OK);
    test_run_all(fx->manual);
    assert_int_equal(w.wait0, SEREX_OK);
    assert_int_equal(w.wait_forever, SEREX_OK);
    serex_future_release(w.f);
}

/* A task waiting on its own future, from inside it. */
static void *wait_self_call(void *arg)
{
    struct self_wait *w = arg;

    w->wait0 = serex_future_wait(w->f, 0);
    if (w->wait0 == SEREX_EDEADLK)
        w->wait_forever = serex_future_wait(w->f, SEREX_FOREVER);
    return w;
}

static void future_wait_on_itself_from_a_lane_is_edeadlk(void **state)
{
    struct fixture *fx = *state;
    struct self_wait w = {.fx = fx};

    assert_int_equal(serex_striped_create(fx->manual, NULL, &fx->striped),
                     SEREX_OK);
    assert_int_equal(
        serex_striped_submit(fx->striped, 7, wait_self_call, &w, &w.f),
        SEREX_OK);
    test_run_all(fx->manual);
    assert_edeadlk(&w); /* RUNNING, still keyed */
    assert_int_equal(serex_future_wait(w.f, 0), SEREX_OK);
    serex_future_release(w.f);
}

static void future_wait_from_same_key_is_edeadlk_other_key_is_not(
    void **state)
{
    struct fixture *fx = *state;
    struct self_wait same = {.fx = fx, .submit = submit_to_key, .key = 1};
    struct self_wait other = {.fx = fx, .submit = submit_to_key, .key = 2};
    struct self_wait keyless = {.fx = fx, .submit = submit_keyless};

    assert_int_equal(serex_striped_create(fx->manual, NULL, &fx->striped),
                     SEREX_OK);
    assert_int_equal(
        serex_striped_execute(fx->striped, 1, self_wait_task, &same),
        SEREX_OK);
    assert_int_equal(
        serex_striped_execute(fx->striped, 1, self_wait_task, &other),
        SEREX_OK);
    assert_int_equal(
        serex_striped_execute(fx->striped, 1, self_wait_task, &keyless),
        SEREX_OK);
    assert_true(serex_manual_run_one(fx->manual)); /* key 1's drain */
    assert_edeadlk(&same);
    /* key 2's lane and a keyless task queue on the manual executor, not
     * behind key 1's task: a plain timeout, no EDEADLK */
    assert_int_equal(other.wait0, SEREX_ETIMEDOUT);
    assert_int_equal(keyless.wait0, SEREX_ETIMEDOUT);
    test_run_all(fx->manual);
    assert_int_equal(serex_future_wait(same.f, 0), SEREX_OK);
    assert_int_equal(serex_future_wait(other.f, 0), SEREX_OK);
    assert_int_equal(serex_future_wait(keyless.f, 0), SEREX_OK);
    serex_future_release(same.f);
    serex_future_release(other.f);
    serex_future_release(keyless.f);
}

static void future_wait_inside_manual_run_is_edeadlk(void **state)
{
    struct fixture *fx = *state;
    struct self_wait w = {.fx = fx, .submit = submit_to_manual};

    assert_int_equal(serex_execute(fx->manual, self_wait_task, &w), SEREX_OK);
    assert_true(serex_manual_run_one(fx->manual));
    assert_edeadlk(&w);
    assert_true(serex_manual_run_one(fx->manual));
    assert_int_equal(serex_future_wait(w.f, 0), SEREX_OK);
    serex_future_release(w.f);
}

static void future_wait_from_own_pool_is_not_edeadlk(void **state)
{
    struct fixture *fx = *state;
    struct self_wait w = {.fx = fx, .submit = submit_to_pool};
    serex_future *outer = NULL;

    make_pool(fx, 2); /* another worker runs the inner future */
    assert_int_equal(serex_submit(fx->pool, wait_inner_call, &w, &outer),
                     SEREX_OK);
    assert_int_equal(serex_future_wait(outer, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(w.wait_forever, SEREX_OK);
    assert_ptr_equal(serex_future_value(w.f), (int *)(void *)&w + 1);
    serex_future_release(w.f);
    serex_future_release(outer);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(future_on_done_runs_continuations_in_add_order),
        T(future_on_done_of_ended_future_is_posted_at_once),
        T(future_on_done_of_cancelled_future_runs_and_sees_ecanceled),
        T(future_on_done_of_future_taken_back_runs),
        T(future_on_done_to_a_serial_runs_in_add_order),
        T(future_on_done_target_refusing_runs_inline_where_it_ends),
        T(future_on_done_taken_back_by_shutdown_now_runs_inline),
        T(future_on_done_dropped_by_destroy_runs_inline),
        T(future_on_done_added_while_posting_runs_after_earlier_ones),
        T(future_on_done_with_future_released_early_still_runs),
        T(future_on_done_bad_input_is_einval),
        T(future_on_done_allocation_failure_is_enomem),
        T(future_on_done_racing_the_end_keeps_add_order),
        T(future_on_done_to_a_pool_runs_on_a_worker),
        T(future_then_chains_values),
        T(future_then_and_on_done_are_posted_in_add_order),
        T(future_then_cancelled_source_cancels_the_chain),
        T(future_then_source_taken_back_cancels_next),
        T(future_then_next_cancelled_before_start_never_calls),
        T(future_then_source_released_early_still_completes),
        T(future_then_next_released_early_still_runs),
        T(future_then_of_ended_future_is_posted_at_once),
        T(future_then_target_refusing_runs_inline),
        T(future_then_taken_back_by_its_target_runs_inline),
        T(future_then_long_chain_is_cancelled_without_recursion),
        T(future_then_long_chain_runs_inline_without_recursion),
        T(future_then_on_a_pool_chains_across_workers),
        T(future_then_bad_input_is_einval),
        T(future_then_allocation_failure_is_enomem),
        T(future_wait_from_own_serial_is_edeadlk),
        T(future_wait_from_own_serial_on_ended_future_is_ok),
        T(future_wait_on_itself_from_a_lane_is_edeadlk),
        T(future_wait_from_same_key_is_edeadlk_other_key_is_not),
        T(future_wait_inside_manual_run_is_edeadlk),
        T(future_wait_from_own_pool_is_not_edeadlk),
    };
#undef T

    return cmocka_run_group_tests_name("future_then", tests, NULL, NULL);
}
