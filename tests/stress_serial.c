/* SPDX-License-Identifier: MIT */
/*
 * stress_serial.c - serial executors under concurrent producers on a real
 * pool, with shutdown and shutdown_now racing execute (the striped
 * executor's are in stress_striped.c; both race through test_util.h's
 * test_race).
 *
 * The tasks keep their state in plain (non-atomic) variables guarded only
 * by the executor's order, so under TSan (scripts/test.sh runs the stress
 * label there) a missing happens-before between consecutive tasks is a
 * reported race, and a task run out of its producer's order is counted.
 * Promise 1 is checked exactly: per producer, the tasks read "ran" for a
 * prefix, then "handed back" for the rest of what was accepted, then
 * nothing for what was rejected; never twice, never lost. Serials and
 * limiters on a small bounded pool check that a full target's refusals
 * cost only the lone task they give back (the owed drain).
 */
#include "test_util.h"

#define PRODUCERS TEST_RACE_PRODUCERS
#define PER_PRODUCER TEST_RACE_PER_PRODUCER
#define NTASKS TEST_RACE_TASKS

struct fixture {
    struct test_race race;        /* producers, items and the pool */
    serex_executor *serial;       /* the target of the serial tests */
    serex_executor *outer;        /* serial on serial: serial runs on it */
    serex_executor *target;       /* where producers submit */
    struct test_race_order order; /* the serial's tasks */
    atomic_int inside;            /* serial-on-serial: tasks running now */
    atomic_int overlaps;
    long shared;                  /* serial-on-serial: plain, both add */
};

/* --- tasks --- */

static void serial_task(void *arg)
{
    struct test_race_item *it = arg;
    struct fixture *f = it->race->ctx;

    test_race_mark(it, TEST_RACE_RAN);
    test_race_order_see(&f->order, it);
}

/* As serial_task, and checks that no two tasks of the serial-on-serial
 * pair (inner's and outer's) ever run at once. */
static void exclusive_task(void *arg)
{
    struct test_race_item *it = arg;
    struct fixture *f = it->race->ctx;

    if (atomic_fetch_add(&f->inside, 1) != 0)
        atomic_fetch_add(&f->overlaps, 1);
    serial_task(arg);
    f->shared++;
    atomic_fetch_sub(&f->inside, 1);
}

static int submit(struct test_race *race, struct test_race_item *it)
{
    struct fixture *f = race->ctx;

    return serex_execute(f->target, race->task_fn, it);
}

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    test_race_init(&f->race, "stress-serial", submit, serial_task, f);
    atomic_init(&f->inside, 0);
    atomic_init(&f->overlaps, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    if (f->serial != NULL)
        assert_int_equal(serex_destroy(f->serial), SEREX_OK);
    if (f->outer != NULL)
        assert_int_equal(serex_destroy(f->outer), SEREX_OK);
    test_race_fini(&f->race);
    free(f);
    return 0;
}

/* --- serial --- */

static void make_serial(struct fixture *f, unsigned batch)
{
    serex_serial_config cfg = {.batch = batch};

    assert_int_equal(serex_serial_create(f->race.pool, &cfg, &f->serial),
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
    test_race_start(&f->race);
    accepted = test_race_join(&f->race);
    assert_int_equal(accepted, NTASKS);
    serex_shutdown(f->serial);
    assert_int_equal(serex_await_termination(f->serial, TEST_TIMEOUT),
                     SEREX_OK);
    assert_int_equal(test_race_check_accounting(&f->race, false), NTASKS);
    check_serial_order(f, NTASKS);
    for (unsigned p = 0; p < PRODUCERS; p++)
        assert_int_equal(f->order.next[p], PER_PRODUCER);
}

static void stress_serial_small_batches_keep_their_order(void **state)
{
    struct fixture *f = *state;

    /* a resubmission every 2 tasks: many hand-overs between workers */
    make_serial(f, 2);
    test_race_start(&f->race);
    assert_int_equal(test_race_join(&f->race), NTASKS);
    serex_shutdown(f->serial);
    assert_int_equal(serex_await_termination(f->serial, TEST_TIMEOUT),
                     SEREX_OK);
    assert_int_equal(test_race_check_accounting(&f->race, false), NTASKS);
    check_serial_order(f, NTASKS);
}

static void stress_serial_shutdown_racing_execute_runs_every_accepted(
    void **state)
{
    struct fixture *f = *state;
    long accepted;

    make_serial(f, 0);
    test_race_start(&f->race);
    test_race_wait_for_progress(&f->race);
    serex_shutdown(f->serial);
    accepted = test_race_join(&f->race);
    assert_true(accepted >= NTASKS / 4 - PRODUCERS);
    assert_int_equal(serex_await_termination(f->serial, TEST_TIMEOUT),
                     SEREX_OK);
    /* shutdown hands nothing back: every accepted task ran */
    assert_int_equal(test_race_check_accounting(&f->race, false), accepted);
    check_serial_order(f, accepted);
}

static void stress_serial_shutdown_now_racing_execute_loses_nothing(
    void **state)
{
    struct fixture *f = *state;
    long accepted, ran;
    size_t handed;

    make_serial(f, 0);
    test_race_start(&f->race);
    test_race_wait_for_progress(&f->race);
    handed = serex_shutdown_now(f->serial, test_race_handed, &f->race);
    accepted = test_race_join(&f->race);
    assert_true(accepted >= NTASKS / 4 - PRODUCERS);
    assert_int_equal(serex_await_termination(f->serial, TEST_TIMEOUT),
                     SEREX_OK);
    ran = test_race_check_accounting(&f->race, false);
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
    assert_int_equal(serex_serial_create(f->race.pool, &cfg, &f->outer),
                     SEREX_OK);
    assert_int_equal(serex_serial_create(f->outer, &cfg, &f->serial),
                     SEREX_OK);
    f->target = f->serial;
    f->race.task_fn = exclusive_task;
    test_race_start(&f->race);
    for (long i = 0; i < own; i++)
        assert_int_equal(serex_execute(f->outer, outer_task, f), SEREX_OK);
    assert_int_equal(test_race_join(&f->race), NTASKS);
    serex_shutdown(f->serial);
    assert_int_equal(serex_await_termination(f->serial, TEST_TIMEOUT),
                     SEREX_OK);
    serex_shutdown(f->outer);
    assert_int_equal(serex_await_termination(f->outer, TEST_TIMEOUT),
                     SEREX_OK);
    assert_int_equal(atomic_load(&f->overlaps), 0);
    assert_int_equal(f->shared, NTASKS + own);
    assert_int_equal(test_race_check_accounting(&f->race, false), NTASKS);
    check_serial_order(f, NTASKS);
}

/* --- a bounded pool under many serials: passing refusals --- */

#define FULL_WRAPPERS 8
#define FULL_PER_PRODUCER 8000

/* One wrapper's plain state: its order guards it. */
struct full_lane {
    long total;
    long disorder;
    size_t next[PRODUCERS];
};

struct full_item {
    struct full_lane *lane;
    unsigned producer;
    size_t seq; /* in its producer's sequence for this wrapper */
};

struct full_race {
    serex_executor *pool;
    serex_executor *wrappers[FULL_WRAPPERS];
    struct full_lane lanes[FULL_WRAPPERS];
    struct full_item *items; /* producer p's i-th is p*PER+i */
    serex__thread threads[PRODUCERS];
    _Atomic int go;
    atomic_long full;  /* SEREX_EFULL answers: the lone task taken back */
    atomic_long other; /* anything but SEREX_OK or SEREX_EFULL */
};

struct full_producer {
    struct full_race *race;
    unsigned id;
};

static void full_task(void *arg)
{
    struct full_item *it = arg;
    struct full_lane *lane = it->lane;

    lane->total++;
    if (it->seq < lane->next[it->producer])
        lane->disorder++;
    lane->next[it->producer] = it->seq + 1;
}

static int full_producer_main(void *arg)
{
    struct full_producer *pr = arg;
    struct full_race *race = pr->race;

    while (!atomic_load_explicit(&race->go, memory_order_acquire))
        serex__thread_yield();
    for (size_t i = 0; i < FULL_PER_PRODUCER; i++) {
        struct full_item *it = &race->items[pr->id * FULL_PER_PRODUCER + i];
        serex_executor *w = race->wrappers[i % FULL_WRAPPERS];
        int rc;

        /* a full pool refuses the drain of a lone task: it comes back to
         * us (nothing queued), and we offer it again */
        while ((rc = serex_execute(w, full_task, it)) == SEREX_EFULL) {
            atomic_fetch_add(&race->full, 1);
            serex__thread_yield();
        }
        if (rc != SEREX_OK)
            atomic_fetch_add(&race->other, 1);
    }
    return 0;
}

/*
 * Eight wrappers (serials, or limiters of 1) on a pool of 2 threads that
 * holds at most 2 waiting tasks: their drains are refused again and again,
 * often with a second producer's task already queued behind the first.
 * That costs only the lone task, given back: every execute ends SEREX_OK
 * (after retries of SEREX_EFULL), never SEREX_EREJECTED (a broken
 * wrapper, as before the owed drain); each destroy submits a drain still
 * owed and returns once every task ran; and each wrapper ran exactly its
 * tasks, each producer's in order.
 */
static void full_race_run(bool limiter)
{
    serex_pool_config cfg = {
        .threads = 2, .queue_capacity = 2, .name = "stress-full"};
    struct full_producer prs[PRODUCERS];
    struct full_race *race = calloc(1, sizeof *race);

    assert_non_null(race);
    race->items = calloc((size_t)PRODUCERS * FULL_PER_PRODUCER,
                         sizeof *race->items);
    assert_non_null(race->items);
    assert_int_equal(serex_pool_create(&cfg, &race->pool), SEREX_OK);
    for (unsigned w = 0; w < FULL_WRAPPERS; w++) {
        serex_serial_config scfg = {.batch = 4};

        assert_int_equal(
            limiter
                ? serex_limiter_create(race->pool, 1, &race->wrappers[w])
                : serex_serial_create(race->pool, &scfg, &race->wrappers[w]),
            SEREX_OK);
    }
    for (unsigned p = 0; p < PRODUCERS; p++)
        for (size_t i = 0; i < FULL_PER_PRODUCER; i++)
            race->items[p * FULL_PER_PRODUCER + i] = (struct full_item){
                &race->lanes[i % FULL_WRAPPERS], p, i / FULL_WRAPPERS};
    for (unsigned p = 0; p < PRODUCERS; p++) {
        prs[p] = (struct full_producer){race, p};
        assert_int_equal(
            serex__thread_start(&race->threads[p], full_producer_main, &prs[p]),
            SEREX_OK);
    }
    atomic_store_explicit(&race->go, 1, memory_order_release);
    for (unsigned p = 0; p < PRODUCERS; p++)
        serex__thread_join(race->threads[p]);
    assert_int_equal(atomic_load(&race->other), 0);
    for (unsigned w = 0; w < FULL_WRAPPERS; w++)
        assert_int_equal(serex_destroy(race->wrappers[w]), SEREX_OK);
    /* plain reads after destroy: TSan checks the happens-before */
    for (unsigned w = 0; w < FULL_WRAPPERS; w++) {
        assert_int_equal(race->lanes[w].total,
                         PRODUCERS * FULL_PER_PRODUCER / FULL_WRAPPERS);
        assert_int_equal(race->lanes[w].disorder, 0);
    }
    print_message("  %ld lone tasks given back by a full pool\n",
                  atomic_load(&race->full));
    assert_int_equal(serex_destroy(race->pool), SEREX_OK);
    free(race->items);
    free(race);
}

static void stress_serial_full_pool_costs_only_lone_tasks(void **state)
{
    (void)state;
    full_race_run(false);
}

static void stress_limiter_full_pool_costs_only_lone_tasks(void **state)
{
    (void)state;
    full_race_run(true);
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
#undef T
        cmocka_unit_test(stress_serial_full_pool_costs_only_lone_tasks),
        cmocka_unit_test(stress_limiter_full_pool_costs_only_lone_tasks),
    };

    return cmocka_run_group_tests_name("stress_serial", tests, NULL, NULL);
}
