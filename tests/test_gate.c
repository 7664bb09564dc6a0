/* SPDX-License-Identifier: MIT */
/*
 * test_gate.c - the gate: parking while closed, release in arrival order
 * to each task's own target, forwarding while open, hand-back at destroy,
 * and the race between execute and open.
 *
 * Targets are manual executors, seen through a small recording executor
 * that logs every task the gate hands it (so the order of release across
 * several targets is exact) and can refuse like a shut-down executor. An
 * inline variant runs a task inside execute, so a released task can call
 * back into the gate while the release is still going on. The race tests
 * start real threads and check, per producer, exactly-once and order.
 */
#include "test_util.h"

#include <stdlib.h> /* calloc, free */

#include "nodecache_internal.h" /* serex__cache_trim */

#define N 64
#define NT 3 /* recording targets */
#define RACE_PRODUCERS 4
#define RACE_PER_PRODUCER 5000

struct fixture;

/* A task's argument: which fixture to log into and the value to log. */
struct item {
    struct fixture *f;
    size_t v;
};

/* A target that logs what the gate hands it, then queues it on @inner
 * (or runs it at once when inner is NULL); refuses when @refuse is set. */
struct rec_ex {
    serex_executor base;
    struct fixture *f;
    serex_executor *inner;
    size_t id;
    bool refuse;
};

struct race_item {
    _Atomic int ran;
    unsigned producer;
    size_t seq;
    struct race_state *s;
};

/* Plain state: only the manual executor's single runner writes it. */
struct race_state {
    long total;
    long disorder;
    size_t next[RACE_PRODUCERS];
};

struct race_producer {
    serex_gate *g;
    serex_executor *target;
    struct race_item *items;
    _Atomic int *go;
    atomic_long *progress;
    serex__thread thread;
    long bad_status;
};

struct fixture {
    serex_executor *manual[NT];
    struct rec_ex rec[NT];
    serex_gate *g;
    struct item items[N];
    size_t log[N];        /* values, in run order */
    size_t nlog;
    size_t posted[N];     /* values, in the order targets received them */
    size_t posted_to[N];  /* which target received each */
    size_t nposted;
    struct test_pending pending;
    serex_fn pending_fns[N];
    void *pending_args[N];
    serex_gate *reenter;  /* reenter_task executes on it */
};

/* --- tasks --- */

static void log_task(void *arg)
{
    struct item *it = arg;

    it->f->log[it->f->nlog++] = it->v;
}

/* Logs itself, and the first time (v == 0) queues item N-1 on the gate. */
static void reenter_task(void *arg)
{
    struct item *it = arg;
    struct fixture *f = it->f;

    log_task(arg);
    if (it->v == 0)
        assert_int_equal(serex_gate_execute(f->reenter, &f->rec[0].base,
                                            log_task, &f->items[N - 1]),
                         SEREX_OK);
}

/* --- the recording executor --- */

static struct rec_ex *rec_of(serex_executor *ex)
{
    return serex__container_of(ex, struct rec_ex, base);
}

static int rec_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct rec_ex *r = rec_of(ex);
    struct fixture *f = r->f;
    struct item *it = arg;

    if (r->refuse)
        return SEREX_EREJECTED;
    assert_true(f->nposted < N);
    f->posted[f->nposted] = it->v;
    f->posted_to[f->nposted++] = r->id;
    if (r->inner == NULL) {
        fn(arg);
        return SEREX_OK;
    }
    return serex_execute(r->inner, fn, arg);
}

static void rec_shutdown(serex_executor *ex)
{
    rec_of(ex)->refuse = true;
}

static size_t rec_shutdown_now(serex_executor *ex, serex_pending_fn on_pending,
                               void *ctx)
{
    (void)on_pending;
    (void)ctx;
    rec_shutdown(ex); /* holds nothing itself */
    return 0;
}

static int rec_await(serex_executor *ex, int64_t timeout_ns)
{
    (void)ex;
    (void)timeout_ns;
    return SEREX_OK;
}

static void rec_destroy(serex_executor *ex)
{
    (void)ex; /* lives in the fixture */
}

static const serex_executor_ops rec_ops = {
    .execute = rec_execute,
    .shutdown = rec_shutdown,
    .shutdown_now = rec_shutdown_now,
    .await_termination = rec_await,
    .destroy = rec_destroy,
};

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    for (size_t i = 0; i < NT; i++) {
        assert_int_equal(serex_manual_create(&f->manual[i]), SEREX_OK);
        f->rec[i] = (struct rec_ex){{&rec_ops}, f, f->manual[i], i, false};
    }
    for (size_t i = 0; i < N; i++)
        f->items[i] = (struct item){f, i};
    f->pending.cap = N;
    f->pending.fns = f->pending_fns;
    f->pending.args = f->pending_args;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    serex__alloc_fail_nth(0);
    if (f->g != NULL)
        serex_gate_destroy(f->g, NULL, NULL);
    for (size_t i = 0; i < NT; i++)
        assert_int_equal(serex_destroy(f->manual[i]), SEREX_OK);
    free(f);
    return 0;
}

static size_t run_everything(struct fixture *f)
{
    size_t n = 0;

    for (size_t i = 0; i < NT; i++)
        n += test_run_all(f->manual[i]);
    return n;
}

/* --- bad input --- */

static void gate_create_null_out_is_einval(void **state)
{
    (void)state;
    assert_int_equal(serex_gate_create(true, NULL), SEREX_EINVAL);
    assert_int_equal(serex_gate_create(false, NULL), SEREX_EINVAL);
}

static void gate_execute_null_arguments_are_einval(void **state)
{
    struct fixture *f = *state;
    serex_executor *t = f->manual[0];

    for (int open = 0; open < 2; open++) {
        serex_gate *g;

        assert_int_equal(serex_gate_create(open, &g), SEREX_OK);
        assert_non_null(g);
        assert_int_equal(serex_gate_execute(NULL, t, never_task, f),
                         SEREX_EINVAL);
        assert_int_equal(serex_gate_execute(g, NULL, never_task, f),
                         SEREX_EINVAL);
        assert_int_equal(serex_gate_execute(g, t, NULL, f), SEREX_EINVAL);
        serex_gate_open(g);
        assert_int_equal(serex_gate_destroy(g, test_pending_cb, &f->pending),
                         0);
    }
    assert_int_equal(f->pending.n, 0);
    assert_int_equal(run_everything(f), 0);
}

static void gate_null_open_and_close_are_ignored(void **state)
{
    (void)state;
    serex_gate_open(NULL);
    serex_gate_close(NULL);
}

static void gate_create_allocation_failure_is_enomem(void **state)
{
    struct fixture *f = *state;
    int rc = SEREX_ENOMEM, failures = 0;

    serex__cache_trim();
    for (unsigned long n = 1; n < 16; n++) {
        f->g = (serex_gate *)f;
        serex__alloc_fail_nth(n);
        rc = serex_gate_create(false, &f->g);
        if (rc == SEREX_OK)
            break;
        assert_int_equal(rc, SEREX_ENOMEM);
        assert_null(f->g);
        failures++;
    }
    serex__alloc_fail_nth(0);
    assert_int_equal(rc, SEREX_OK);
    assert_true(failures >= 1);
    assert_int_equal(serex_gate_execute(f->g, f->manual[0], log_task,
                                        &f->items[0]),
                     SEREX_OK);
    serex_gate_open(f->g);
    assert_int_equal(test_run_all(f->manual[0]), 1);
}

/* --- closed, open, close --- */

static void gate_closed_parks_and_open_releases_in_arrival_order(void **state)
{
    struct fixture *f = *state;
    const size_t n = 30;

    assert_int_equal(serex_gate_create(false, &f->g), SEREX_OK);
    /* targets interleave: 0 1 2 0 1 2 ... but not in a fixed rhythm */
    for (size_t i = 0; i < n; i++)
        assert_int_equal(serex_gate_execute(f->g, &f->rec[(i * 7) % NT].base,
                                            log_task, &f->items[i]),
                         SEREX_OK);
    assert_int_equal(f->nposted, 0); /* parked: no target saw anything */
    assert_int_equal(run_everything(f), 0);
    serex_gate_open(f->g);
    assert_int_equal(f->nposted, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(f->posted[i], i);
        assert_int_equal(f->posted_to[i], (i * 7) % NT);
    }
    /* each target runs its share in arrival order */
    for (size_t t = 0; t < NT; t++) {
        size_t before = f->nlog;

        test_run_all(f->manual[t]);
        for (size_t k = before + 1; k < f->nlog; k++)
            assert_true(f->log[k - 1] < f->log[k]);
        for (size_t k = before; k < f->nlog; k++)
            assert_int_equal((f->log[k] * 7) % NT, t);
    }
    assert_int_equal(f->nlog, n);
    assert_int_equal(serex_gate_destroy(f->g, test_pending_cb, &f->pending),
                     0);
    f->g = NULL;
    assert_int_equal(f->pending.n, 0);
}

static void gate_open_forwards_at_once(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex_gate_create(true, &f->g), SEREX_OK);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(serex_gate_execute(f->g, &f->rec[i].base, log_task,
                                            &f->items[i]),
                         SEREX_OK);
        assert_int_equal(f->nposted, i + 1);
        assert_int_equal(f->posted_to[i], i);
        /* queued on its target: one run runs it */
        assert_true(serex_manual_run_one(f->manual[i]));
        assert_false(serex_manual_run_one(f->manual[i]));
        assert_int_equal(f->nlog, i + 1);
        assert_int_equal(f->log[i], i);
    }
}

static void gate_opened_later_forwards_at_once(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex_gate_create(false, &f->g), SEREX_OK);
    serex_gate_open(f->g); /* nothing parked: opens at once */
    assert_int_equal(serex_gate_execute(f->g, &f->rec[0].base, log_task,
                                        &f->items[0]),
                     SEREX_OK);
    assert_int_equal(f->nposted, 1);
    assert_int_equal(test_run_all(f->manual[0]), 1);
}

static void gate_close_again_parks(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex_gate_create(true, &f->g), SEREX_OK);
    assert_int_equal(serex_gate_execute(f->g, &f->rec[0].base, log_task,
                                        &f->items[0]),
                     SEREX_OK);
    serex_gate_close(f->g);
    serex_gate_close(f->g); /* closing a closed gate changes nothing */
    assert_int_equal(serex_gate_execute(f->g, &f->rec[1].base, log_task,
                                        &f->items[1]),
                     SEREX_OK);
    assert_int_equal(serex_gate_execute(f->g, &f->rec[0].base, log_task,
                                        &f->items[2]),
                     SEREX_OK);
    assert_int_equal(f->nposted, 1);
    assert_int_equal(run_everything(f), 1);
    serex_gate_open(f->g);
    assert_int_equal(f->nposted, 3);
    assert_int_equal(f->posted[1], 1);
    assert_int_equal(f->posted[2], 2);
    assert_int_equal(run_everything(f), 2);
    /* and open again forwards at once */
    assert_int_equal(serex_gate_execute(f->g, &f->rec[2].base, log_task,
                                        &f->items[3]),
                     SEREX_OK);
    assert_int_equal(f->nposted, 4);
    assert_int_equal(run_everything(f), 1);
    assert_int_equal(f->nlog, 4);
}

static void gate_open_twice_releases_once(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex_gate_create(false, &f->g), SEREX_OK);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(serex_gate_execute(f->g, &f->rec[0].base, log_task,
                                            &f->items[i]),
                         SEREX_OK);
    serex_gate_open(f->g);
    serex_gate_open(f->g);
    assert_int_equal(f->nposted, 4);
    assert_int_equal(test_run_all(f->manual[0]), 4);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(f->log[i], i);
}

static void gate_execute_during_release_waits_for_earlier_tasks(void **state)
{
    struct fixture *f = *state;

    /* rec[0] runs tasks inside execute: task 0 runs while the gate is
     * still releasing 1..3 and queues N-1, which must come after them */
    f->rec[0].inner = NULL;
    assert_int_equal(serex_gate_create(false, &f->g), SEREX_OK);
    f->reenter = f->g;
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(serex_gate_execute(f->g, &f->rec[0].base,
                                            reenter_task, &f->items[i]),
                         SEREX_OK);
    assert_int_equal(f->nlog, 0);
    serex_gate_open(f->g);
    assert_int_equal(f->nlog, 5);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(f->log[i], i);
    assert_int_equal(f->log[4], N - 1);
    /* the release has ended: the gate is open */
    assert_int_equal(serex_gate_execute(f->g, &f->rec[0].base, log_task,
                                        &f->items[4]),
                     SEREX_OK);
    assert_int_equal(f->nlog, 6);
    assert_int_equal(f->log[5], 4);
}

/* --- destroy and refusal --- */

static void gate_destroy_hands_back_parked_tasks_in_order(void **state)
{
    struct fixture *f = *state;
    serex_gate *g;

    assert_int_equal(serex_gate_create(false, &g), SEREX_OK);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(serex_gate_execute(g, &f->rec[i % NT].base, log_task,
                                            &f->items[i]),
                         SEREX_OK);
    assert_int_equal(serex_gate_destroy(g, test_pending_cb, &f->pending), 5);
    assert_int_equal(f->pending.n, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_ptr_equal(f->pending_fns[i], log_task);
        assert_ptr_equal(f->pending_args[i], &f->items[i]);
    }
    assert_int_equal(f->nposted, 0);
    assert_int_equal(run_everything(f), 0);
}

static void gate_destroy_null_on_pending_drops_and_counts(void **state)
{
    struct fixture *f = *state;
    serex_gate *g;

    assert_int_equal(serex_gate_create(false, &g), SEREX_OK);
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(serex_gate_execute(g, f->manual[0], never_task, f),
                         SEREX_OK);
    assert_int_equal(serex_gate_destroy(g, NULL, NULL), 7);
    assert_int_equal(run_everything(f), 0);
}

static void gate_destroy_of_open_gate_hands_back_nothing(void **state)
{
    struct fixture *f = *state;
    serex_gate *g;

    assert_int_equal(serex_gate_create(true, &g), SEREX_OK);
    assert_int_equal(serex_gate_execute(g, f->manual[0], log_task,
                                        &f->items[0]),
                     SEREX_OK);
    assert_int_equal(serex_gate_destroy(g, test_pending_cb, &f->pending), 0);
    assert_int_equal(f->pending.n, 0);
    assert_int_equal(test_run_all(f->manual[0]), 1);
}

static void gate_task_refused_at_open_is_kept_for_destroy(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex_gate_create(false, &f->g), SEREX_OK);
    /* 0 -> manual 0, 1 -> a shut-down manual, 2 -> manual 0, 3 -> refusing
     * recorder, 4 -> manual 2 */
    serex_shutdown(f->manual[1]);
    f->rec[1].refuse = true;
    assert_int_equal(serex_gate_execute(f->g, f->manual[0], log_task,
                                        &f->items[0]),
                     SEREX_OK);
    assert_int_equal(serex_gate_execute(f->g, f->manual[1], log_task,
                                        &f->items[1]),
                     SEREX_OK);
    assert_int_equal(serex_gate_execute(f->g, f->manual[0], log_task,
                                        &f->items[2]),
                     SEREX_OK);
    assert_int_equal(serex_gate_execute(f->g, &f->rec[1].base, log_task,
                                        &f->items[3]),
                     SEREX_OK);
    assert_int_equal(serex_gate_execute(f->g, f->manual[2], log_task,
                                        &f->items[4]),
                     SEREX_OK);
    serex_gate_open(f->g);
    /* the refused ones do not hold back those behind them */
    assert_int_equal(test_run_all(f->manual[0]), 2);
    assert_int_equal(test_run_all(f->manual[2]), 1);
    assert_int_equal(f->nlog, 3);
    assert_int_equal(f->log[0], 0);
    assert_int_equal(f->log[1], 2);
    assert_int_equal(f->log[2], 4);
    /* still open: forwards at once */
    assert_int_equal(serex_gate_execute(f->g, f->manual[0], log_task,
                                        &f->items[5]),
                     SEREX_OK);
    assert_int_equal(test_run_all(f->manual[0]), 1);
    assert_int_equal(serex_gate_destroy(f->g, test_pending_cb, &f->pending),
                     2);
    f->g = NULL;
    assert_int_equal(f->pending.n, 2);
    assert_ptr_equal(f->pending_args[0], &f->items[1]);
    assert_ptr_equal(f->pending_args[1], &f->items[3]);
    assert_ptr_equal(f->pending_fns[0], log_task);
    assert_ptr_equal(f->pending_fns[1], log_task);
}

static void gate_open_forward_refused_returns_target_status(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex_gate_create(true, &f->g), SEREX_OK);
    serex_shutdown(f->manual[0]);
    assert_int_equal(serex_gate_execute(f->g, f->manual[0], never_task, f),
                     SEREX_EREJECTED);
    /* nothing queued on error */
    assert_int_equal(serex_gate_destroy(f->g, test_pending_cb, &f->pending),
                     0);
    f->g = NULL;
    assert_int_equal(f->pending.n, 0);
}

static void gate_execute_allocation_failure_is_enomem_and_parks_nothing(
    void **state)
{
    struct fixture *f = *state;
    int rc = SEREX_ENOMEM, failures = 0;

    assert_int_equal(serex_gate_create(false, &f->g), SEREX_OK);
    assert_int_equal(serex_gate_execute(f->g, f->manual[0], log_task,
                                        &f->items[0]),
                     SEREX_OK);
    for (unsigned long n = 1; n < 16; n++) {
        serex__cache_trim();
        serex__alloc_fail_nth(n);
        rc = serex_gate_execute(f->g, f->manual[0], log_task, &f->items[1]);
        if (rc == SEREX_OK)
            break;
        assert_int_equal(rc, SEREX_ENOMEM);
        failures++;
    }
    serex__alloc_fail_nth(0);
    assert_int_equal(rc, SEREX_OK);
    assert_true(failures >= 1);
    serex_gate_open(f->g);
    assert_int_equal(test_run_all(f->manual[0]), 2);
    assert_int_equal(f->log[0], 0);
    assert_int_equal(f->log[1], 1);
}

/* --- the race with open --- */

static void race_task(void *arg)
{
    struct race_item *it = arg;
    struct race_state *s = it->s;

    /* relaxed: the count is read after the runs, on this thread */
    atomic_fetch_add_explicit(&it->ran, 1, memory_order_relaxed);
    s->total++;
    if (it->seq != s->next[it->producer])
        s->disorder++;
    s->next[it->producer] = it->seq + 1;
}

static int race_producer_main(void *arg)
{
    struct race_producer *pr = arg;

    /* acquire: start together, to make the race likely */
    while (!atomic_load_explicit(pr->go, memory_order_acquire))
        serex__thread_yield();
    for (size_t i = 0; i < RACE_PER_PRODUCER; i++) {
        if (serex_gate_execute(pr->g, pr->target, race_task,
                               &pr->items[i]) != SEREX_OK)
            pr->bad_status++;
        /* relaxed: only paces the opener */
        atomic_fetch_add_explicit(pr->progress, 1, memory_order_relaxed);
    }
    return 0;
}

/*
 * Producers execute on a closed gate while this thread opens it (and,
 * with @toggles, closes and opens it again @toggles times). Every task
 * must run exactly once and each producer's tasks in its order: the
 * manual target runs tasks in the order the gate handed them over.
 */
static void race_with_open(struct fixture *f, int toggles)
{
    struct race_state s = {0};
    struct race_producer pr[RACE_PRODUCERS];
    struct race_item *items;
    _Atomic int go;
    atomic_long progress;
    size_t total = RACE_PRODUCERS * RACE_PER_PRODUCER;

    items = calloc(total, sizeof *items);
    assert_non_null(items);
    atomic_init(&go, 0);
    atomic_init(&progress, 0);
    assert_int_equal(serex_gate_create(false, &f->g), SEREX_OK);
    for (unsigned p = 0; p < RACE_PRODUCERS; p++) {
        pr[p] = (struct race_producer){.g = f->g, .target = f->manual[p % NT],
                                       .items = &items[p * RACE_PER_PRODUCER],
                                       .go = &go, .progress = &progress};
        for (size_t i = 0; i < RACE_PER_PRODUCER; i++) {
            struct race_item *it = &pr[p].items[i];

            atomic_init(&it->ran, 0);
            it->producer = p;
            it->seq = i;
            it->s = &s;
        }
        assert_int_equal(serex__thread_start(&pr[p].thread,
                                             race_producer_main, &pr[p]),
                         SEREX_OK);
    }
    atomic_store_explicit(&go, 1, memory_order_release);
    /* let a quarter park first, so open has a list to release while the
     * producers are still executing */
    while (atomic_load_explicit(&progress, memory_order_relaxed) <
           (long)total / 4)
        serex__thread_yield();
    serex_gate_open(f->g);
    for (int t = 0; t < toggles; t++) {
        for (int i = 0; i < 20; i++)
            serex__thread_yield();
        serex_gate_close(f->g);
        for (int i = 0; i < 20; i++)
            serex__thread_yield();
        serex_gate_open(f->g);
    }
    for (unsigned p = 0; p < RACE_PRODUCERS; p++) {
        serex__thread_join(pr[p].thread);
        assert_int_equal(pr[p].bad_status, 0);
    }
    /* everything was handed to the targets: none is parked */
    assert_int_equal(run_everything(f), total);
    assert_int_equal(serex_gate_destroy(f->g, test_pending_cb, &f->pending),
                     0);
    f->g = NULL;
    for (size_t i = 0; i < total; i++)
        assert_int_equal(atomic_load(&items[i].ran), 1);
    assert_int_equal(s.total, (long)total);
    assert_int_equal(s.disorder, 0);
    for (unsigned p = 0; p < RACE_PRODUCERS; p++)
        assert_int_equal(s.next[p], RACE_PER_PRODUCER);
    free(items);
}

static void gate_execute_racing_open_runs_each_once_in_order(void **state)
{
    race_with_open(*state, 0);
}

static void gate_execute_racing_open_and_close_runs_each_once_in_order(
    void **state)
{
    race_with_open(*state, 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(gate_create_null_out_is_einval),
        T(gate_execute_null_arguments_are_einval),
        T(gate_null_open_and_close_are_ignored),
        T(gate_create_allocation_failure_is_enomem),
        T(gate_closed_parks_and_open_releases_in_arrival_order),
        T(gate_open_forwards_at_once),
        T(gate_opened_later_forwards_at_once),
        T(gate_close_again_parks),
        T(gate_open_twice_releases_once),
        T(gate_execute_during_release_waits_for_earlier_tasks),
        T(gate_destroy_hands_back_parked_tasks_in_order),
        T(gate_destroy_null_on_pending_drops_and_counts),
        T(gate_destroy_of_open_gate_hands_back_nothing),
        T(gate_task_refused_at_open_is_kept_for_destroy),
        T(gate_open_forward_refused_returns_target_status),
        T(gate_execute_allocation_failure_is_enomem_and_parks_nothing),
        T(gate_execute_racing_open_runs_each_once_in_order),
        T(gate_execute_racing_open_and_close_runs_each_once_in_order),
#undef T
    };

    return cmocka_run_group_tests_name("gate", tests, NULL, NULL);
}
