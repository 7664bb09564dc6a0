/* SPDX-License-Identifier: MIT */
/*
 * stress_serial.c - serial and striped executors under concurrent
 * producers on a real pool, with shutdown and shutdown_now racing execute.
 *
 * The tasks keep their state in plain (non-atomic) variables guarded only
 * by the executor's order, so under TSan (scripts/test.sh runs the stress
 * label there) a missing happens-before between consecutive tasks is a
 * reported race, and a task run out of its producer's order is counted.
 * Promise 1 is checked exactly: per producer, the tasks read "ran" for a
 * prefix, then "handed back" for the rest of what was accepted, then
 * nothing for what was rejected; never twice, never lost.
 */
#include "test_util.h"

#include <stdlib.h> /* calloc, free */

#define PRODUCERS 4
#define PER_PRODUCER 20000
#define NTASKS (PRODUCERS * PER_PRODUCER)
#define KEYS 64

enum { RAN = 1, HANDED = 2 };

struct fixture;

/* A task's argument: who made it, its place in its producer's sequence,
 * and (striped) its key. */
struct item {
    struct fixture *f;
    unsigned producer;
    size_t seq;
    uint64_t key;
};

/* Plain state of one serial (or one key): the executor's order guards it. */
struct order_state {
    long total;
    long disorder;
    size_t next[PRODUCERS];
};

struct producer {
    struct fixture *f;
    unsigned id;
    serex__thread thread;
    long accepted;
    long rejected;
    long accepted_after_rejected; /* must stay 0: shutdown is sticky */
    long bad_status;              /* anything but OK or EREJECTED */
};

struct fixture {
    serex_executor *pool;
    serex_executor *serial;     /* the target of the serial tests */
    serex_executor *outer;      /* serial on serial: serial runs on it */
    serex_striped *st;
    serex_executor *target;     /* where producers submit (serial tests) */
    struct item *items;         /* NTASKS: producer p's i-th is p*PER+i */
    _Atomic unsigned char *seen; /* per item: RAN and/or HANDED */
    struct order_state order;   /* the serial's tasks */
    struct order_state keys[KEYS];
    struct producer producers[PRODUCERS];
    _Atomic int go;
    _Atomic long progress;      /* executes made, all producers together */
    atomic_int inside;          /* serial-on-serial: tasks running now */
    atomic_int overlaps;
    long shared;                /* serial-on-serial: plain, both add */
    serex_fn task_fn;           /* what producers queue on a serial */
};

/* --- tasks --- */

static void mark(struct item *it, unsigned char how)
{
    /* relaxed: the counts are read after await_termination, which orders */
    atomic_fetch_add_explicit(&it->f->seen[it - it->f->items], how,
                              memory_order_relaxed);
}

/* A producer's tasks must run in increasing sequence; with each task
 * marked exactly once (check_accounting), that is exactly its order. On a
 * striped, a producer's tasks of one key are a subsequence: the same
 * check holds per key. */
static void check_order(struct order_state *os, const struct item *it)
{
    os->total++;
    if (it->seq < os->next[it->producer])
        os->disorder++;
    os->next[it->producer] = it->seq + 1;
}

static void serial_task(void *arg)
{
    struct item *it = arg;

    mark(it, RAN);
    check_order(&it->f->order, it);
}

/* As serial_task, and checks that no two tasks of the serial-on-serial
 * pair (inner's and outer's) ever run at once. */
static void exclusive_task(void *arg)
{
    struct item *it = arg;
    struct fixture *f = it->f;

    if (atomic_fetch_add(&f->inside, 1) != 0)
        atomic_fetch_add(&f->overlaps, 1);
    serial_task(arg);
    f->shared++;
    atomic_fetch_sub(&f->inside, 1);
}

static void key_task(void *arg)
{
    struct item *it = arg;

    mark(it, RAN);
    check_order(&it->f->keys[it->key], it);
}

static void mark_pending(serex_fn fn, void *arg, void *ctx)
{
    (void)ctx;
    assert_true(fn == serial_task || fn == key_task);
    mark(arg, HANDED);
}

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    serex_pool_config cfg = {.threads = 4, .name = "stress-serial"};

    assert_non_null(f);
    f->items = calloc(NTASKS, sizeof *f->items);
    f->seen = calloc(NTASKS, sizeof *f->seen);
    assert_non_null(f->items);
    assert_non_null(f->seen);
    for (unsigned p = 0; p < PRODUCERS; p++)
        for (size_t i = 0; i < PER_PRODUCER; i++) {
            struct item *it = &f->items[p * PER_PRODUCER + i];

            /* keys rotate fast: a lane often empties and is made again */
            *it = (struct item){f, p, i, (i * 7 + p) % KEYS};
        }
    atomic_init(&f->inside, 0);
    atomic_init(&f->overlaps, 0);
    f->task_fn = serial_task;
    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    if (f->st != NULL)
        assert_int_equal(serex_destroy(serex_striped_executor(f->st)),
                         SEREX_OK);
    if (f->serial != NULL)
        assert_int_equal(serex_destroy(f->serial), SEREX_OK);
    if (f->outer != NULL)
        assert_int_equal(serex_destroy(f->outer), SEREX_OK);
    assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    free(f->seen);
    free(f->items);
    free(f);
    return 0;
}

/* --- producers --- */

static int submit(struct fixture *f, struct item *it)
{
    if (f->st != NULL)
        return serex_striped_execute(f->st, it->key, key_task, it);
    return serex_execute(f->target, f->task_fn, it);
}

static int producer_main(void *arg)
{
    struct producer *pr = arg;
    struct fixture *f = pr->f;

    /* acquire: start together, to make the races likely */
    while (!atomic_load_explicit(&f->go, memory_order_acquire))
        serex__thread_yield();
    for (size_t i = 0; i < PER_PRODUCER; i++) {
        int rc = submit(f, &f->items[pr->id * PER_PRODUCER + i]);

        /* relaxed: only paces the main thread's shutdown */
        atomic_fetch_add_explicit(&f->progress, 1, memory_order_relaxed);
        if (rc == SEREX_OK) {
            pr->accepted++;
            if (pr->rejected > 0)
                pr->accepted_after_rejected++;
        } else if (rc == SEREX_EREJECTED) {
            pr->rejected++;
        } else {
            pr->bad_status++;
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
        struct producer *pr = &f->producers[i];

        serex__thread_join(pr->thread);
        assert_int_equal(pr->bad_status, 0);
        assert_int_equal(pr->accepted_after_rejected, 0);
        assert_int_equal(pr->accepted + pr->rejected, PER_PRODUCER);
        accepted += pr->accepted;
    }
    return accepted;
}

/* Waits until the producers are a quarter through: stop mid-stream. */
static void wait_for_progress(struct fixture *f)
{
    /* relaxed: pacing only */
    while (atomic_load_explicit(&f->progress, memory_order_relaxed) <
           NTASKS / 4)
        serex__thread_yield();
}

/*
 * Per producer: its accepted tasks (a prefix of its sequence) read RAN
 * for a prefix of them and HANDED for the rest, its rejected ones read 0,
 * and nothing was marked twice. With @by_key, the prefix rule holds per
 * (producer, key): each key's lane has its own order. Returns how many ran.
 */
static long check_accounting(struct fixture *f, bool by_key)
{
    long ran = 0;

    for (unsigned p = 0; p < PRODUCERS; p++) {
        const long accepted = f->producers[p].accepted;
        unsigned char phase[KEYS];

        for (size_t k = 0; k < KEYS; k++)
            phase[k] = RAN;
        for (long i = 0; i < PER_PRODUCER; i++) {
            const struct item *it = &f->items[p * PER_PRODUCER + i];
            unsigned char v = atomic_load_explicit(
                &f->seen[p * PER_PRODUCER + i], memory_order_relaxed);
            unsigned char *ph = &phase[by_key ? it->key : 0];

            if (i >= accepted) {
                assert_int_equal(v, 0); /* rejected: never queued */
                continue;
            }
            /* exactly once, and RAN never after HANDED */
            assert_true(v == RAN || v == HANDED);
            if (v == HANDED)
                *ph = HANDED;
            if (v != *ph)
                print_error("producer %u task %ld ran after an earlier task "
                            "of its %s was handed back\n",
                            p, i, by_key ? "key" : "serial");
            assert_int_equal(v, *ph);
            ran += v == RAN;
        }
    }
    return ran;
}

/* --- serial --- */

static void make_serial(struct fixture *f, unsigned batch)
{
    serex_serial_config cfg = {.batch = batch};

    assert_int_equal(serex_serial_create(f->pool, &cfg, &f->serial),
                     SEREX_OK);
    f->target = f->serial;
}

static void check_serial_order(struct fixture *f, long ran)
{
    /* plain reads after await: TSan checks the happens-before */
    assert_int_equal(f->order.total, ran);
    assert_int_equal(f->order.disorder, 0);
}

static void stress_serial_many_producers_keep_their_order(void **state)
{
    struct fixture *f = *state;
    long accepted;

    make_serial(f, 0);
    start_producers(f);
    accepted = join_producers(f);
    assert_int_equal(accepted, NTASKS);
    serex_shutdown(f->serial);
    assert_int_equal(serex_await_termination(f->serial, TEST_TIMEOUT),
                     SEREX_OK);
    assert_int_equal(check_accounting(f, false), NTASKS);
    check_serial_order(f, NTASKS);
    for (unsigned p = 0; p < PRODUCERS; p++)
        assert_int_equal(f->order.next[p], PER_PRODUCER);
}

static void stress_serial_small_batches_keep_their_order(void **state)
{
    struct fixture *f = *state;

    /* a resubmission every 2 tasks: many hand-overs between workers */
    make_serial(f, 2);
    start_producers(f);
    assert_int_equal(join_producers(f), NTASKS);
    serex_shutdown(f->serial);
    assert_int_equal(serex_await_termination(f->serial, TEST_TIMEOUT),
                     SEREX_OK);
    assert_int_equal(check_accounting(f, false), NTASKS);
    check_serial_order(f, NTASKS);
}

static void stress_serial_shutdown_racing_execute_runs_every_accepted(
    void **state)
{
    struct fixture *f = *state;
    long accepted;

    make_serial(f, 0);
    start_producers(f);
    wait_for_progress(f);
    serex_shutdown(f->serial);
    accepted = join_producers(f);
    assert_true(accepted >= NTASKS / 4 - PRODUCERS);
    assert_int_equal(serex_await_termination(f->serial, TEST_TIMEOUT),
                     SEREX_OK);
    /* shutdown hands nothing back: every accepted task ran */
    assert_int_equal(check_accounting(f, false), accepted);
    check_serial_order(f, accepted);
}

static void stress_serial_shutdown_now_racing_execute_loses_nothing(
    void **state)
{
    struct fixture *f = *state;
    long accepted, ran;
    size_t handed;

    make_serial(f, 0);
    start_producers(f);
    wait_for_progress(f);
    handed = serex_shutdown_now(f->serial, mark_pending, NULL);
    accepted = join_producers(f);
    assert_true(accepted >= NTASKS / 4 - PRODUCERS);
    assert_int_equal(serex_await_termination(f->serial, TEST_TIMEOUT),
                     SEREX_OK);
    ran = check_accounting(f, false);
    /* ran + handed back == accepted */
    assert_int_equal(ran + (long)handed, accepted);
    check_serial_order(f, ran);
}

static void outer_task(void *arg)
{
    struct fixture *f = arg;

    if (atomic_fetch_add(&f->inside, 1) != 0)
        atomic_fetch_add(&f->overlaps, 1);
    f->shared++;
    atomic_fetch_sub(&f->inside, 1);
}

static void stress_serial_on_serial_never_overlaps(void **state)
{
    struct fixture *f = *state;
    serex_serial_config cfg = {.batch = 8};
    const long own = 20000;

    /* producers feed the inner serial, whose drains are tasks of outer;
     * this thread queues outer's own tasks meanwhile: none may overlap,
     * and all of them share one plain counter */
    assert_int_equal(serex_serial_create(f->pool, &cfg, &f->outer), SEREX_OK);
    assert_int_equal(serex_serial_create(f->outer, &cfg, &f->serial),
                     SEREX_OK);
    f->target = f->serial;
    f->task_fn = exclusive_task;
    start_producers(f);
    for (long i = 0; i < own; i++)
        assert_int_equal(serex_execute(f->outer, outer_task, f), SEREX_OK);
    assert_int_equal(join_producers(f), NTASKS);
    serex_shutdown(f->serial);
    assert_int_equal(serex_await_termination(f->serial, TEST_TIMEOUT),
                     SEREX_OK);
    serex_shutdown(f->outer);
    assert_int_equal(serex_await_termination(f->outer, TEST_TIMEOUT),
                     SEREX_OK);
    assert_int_equal(atomic_load(&f->overlaps), 0);
    assert_int_equal(f->shared, NTASKS + own);
    assert_int_equal(check_accounting(f, false), NTASKS);
    check_serial_order(f, NTASKS);
}

/* --- striped --- */

static void make_striped(struct fixture *f, unsigned batch)
{
    serex_serial_config cfg = {.batch = batch};

    assert_int_equal(serex_striped_create(f->pool, &cfg, &f->st), SEREX_OK);
}

static void check_key_order(struct fixture *f, long ran)
{
    long total = 0;

    for (size_t k = 0; k < KEYS; k++) {
        assert_int_equal(f->keys[k].disorder, 0);
        total += f->keys[k].total;
    }
    assert_int_equal(total, ran);
}

static void stress_striped_lanes_churn_and_keep_per_key_order(void **state)
{
    struct fixture *f = *state;
    serex_executor *ex;

    make_striped(f, 4);
    ex = serex_striped_executor(f->st);
    start_producers(f);
    assert_int_equal(join_producers(f), NTASKS);
    serex_shutdown(ex);
    assert_int_equal(serex_await_termination(ex, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_striped_lanes(f->st), 0);
    assert_int_equal(check_accounting(f, true), NTASKS);
    check_key_order(f, NTASKS);
}

static void stress_striped_shutdown_now_racing_execute_loses_nothing(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *ex;
    long accepted, ran;
    size_t handed;

    make_striped(f, 4);
    ex = serex_striped_executor(f->st);
    start_producers(f);
    wait_for_progress(f);
    handed = serex_shutdown_now(ex, mark_pending, NULL);
    accepted = join_producers(f);
    assert_true(accepted >= NTASKS / 4 - PRODUCERS);
    assert_int_equal(serex_await_termination(ex, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_striped_lanes(f->st), 0);
    ran = check_accounting(f, true);
    assert_int_equal(ran + (long)handed, accepted);
    check_key_order(f, ran);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(stress_serial_many_producers_keep_their_order),
        T(stress_serial_small_batches_keep_their_order),
        T(stress_serial_shutdown_racing_execute_runs_every_accepted),
        T(stress_serial_shutdown_now_racing_execute_loses_nothing),
        T(stress_serial_on_serial_never_overlaps),
        T(stress_striped_lanes_churn_and_keep_per_key_order),
        T(stress_striped_shutdown_now_racing_execute_loses_nothing),
#undef T
    };

    return cmocka_run_group_tests_name("stress_serial", tests, NULL, NULL);
}
