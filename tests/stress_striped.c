/* SPDX-License-Identifier: MIT */
/*
 * stress_striped.c - the striped executor under concurrent producers on a
 * real pool: lanes made and freed as keys rotate, and shutdown_now racing
 * execute (the serial executor's are in stress_serial.c; both race
 * through test_util.h's test_race).
 *
 * Each key's tasks keep their state in plain (non-atomic) variables
 * guarded only by the lane's order, so under TSan (scripts/test.sh runs
 * the stress label there) a missing happens-before between consecutive
 * tasks of a key is a reported race, and a task run out of its producer's
 * order within its key is counted. Promise 1 is checked exactly: per
 * producer and key, the tasks read "ran" for a prefix, then "handed back"
 * for the rest of what was accepted, then nothing for what was rejected;
 * never twice, never lost.
 */
#include "test_util.h"
#include "test_wrap_executor.h"

#define PRODUCERS TEST_RACE_PRODUCERS
#define NTASKS TEST_RACE_TASKS
#define KEYS TEST_RACE_KEYS

struct fixture {
    struct test_race race;             /* producers, items and the pool */
    serex_striped *st;
    struct test_race_order keys[KEYS]; /* each key's tasks */
};

static void key_task(void *arg)
{
    struct test_race_item *it = arg;
    struct fixture *f = it->race->ctx;

    test_race_mark(it, TEST_RACE_RAN);
    test_race_order_see(&f->keys[it->key], it);
}

static int submit(struct test_race *race, struct test_race_item *it)
{
    struct fixture *f = race->ctx;

    return serex_striped_execute(f->st, it->key, race->task_fn, it);
}

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    /* a lane's drain runs at most 4 tasks: lanes hand over often */
    serex_serial_config cfg = {.batch = 4};

    assert_non_null(f);
    test_race_init(&f->race, "stress-striped", submit, key_task, f);
    assert_int_equal(serex_striped_create(f->race.pool, &cfg, &f->st),
                     SEREX_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex_destroy(serex_striped_executor(f->st)), SEREX_OK);
    test_race_fini(&f->race);
    free(f);
    return 0;
}

/* --- striped --- */

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
    serex_executor *ex = serex_striped_executor(f->st);

    test_race_start(&f->race);
    assert_int_equal(test_race_join(&f->race), NTASKS);
    serex_shutdown(ex);
    assert_int_equal(serex_await_termination(ex, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_striped_lanes(f->st), 0);
    assert_int_equal(test_race_check_accounting(&f->race, true), NTASKS);
    check_key_order(f, NTASKS);
}

static void stress_striped_shutdown_now_racing_execute_loses_nothing(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *ex = serex_striped_executor(f->st);
    long accepted, ran;
    size_t handed;

    test_race_start(&f->race);
    test_race_wait_for_progress(&f->race);
    handed = serex_shutdown_now(ex, test_race_handed, &f->race);
    accepted = test_race_join(&f->race);
    assert_true(accepted >= NTASKS / 4 - PRODUCERS);
    assert_int_equal(serex_await_termination(ex, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_striped_lanes(f->st), 0);
    ran = test_race_check_accounting(&f->race, true);
    assert_int_equal(ran + (long)handed, accepted);
    check_key_order(f, ran);
}

/*
 * Issue 20: passing refusals racing producers. The target is a pool of
 * 2 workers whose queue holds 2 tasks, so new lanes' drains are refused
 * with SEREX_EFULL all the time, often while another producer's task of
 * the same key has queued behind the first (the drain is then owed, and
 * resubmitted by the next execute or drain, or by await). A producer
 * told SEREX_EFULL tries the same task again (nothing was queued). Every
 * task must run once, in per-key order, every execute end in SEREX_OK
 * (never SEREX_EREJECTED: a passing refusal must not break the striped),
 * await must end, and no lane may be left. It broke the striped at the
 * first such race before.
 */
#define FULL_PRODUCERS 4
#define FULL_PER 5000
#define FULL_KEYS 16

/*
 * The target: the pool, behind an executor that gives the CPU away
 * before it passes each task on, so that another producer often queues
 * a task of the same key behind a new lane's first while that lane's
 * drain is being submitted (the window in which a refusal must owe the
 * drain). It forwards everything else.
 */
static int slow_execute(struct test_wrap *w, serex_fn fn, void *arg)
{
    serex__thread_yield();
    return serex_execute(w->inner, fn, arg);
}

struct full_item {
    struct full_race *race;
    unsigned producer;
    size_t seq;
    uint64_t key;
};

struct full_race {
    serex_striped *st;
    struct full_item items[FULL_PRODUCERS][FULL_PER];
    _Atomic unsigned char ran[FULL_PRODUCERS][FULL_PER];
    size_t next[FULL_KEYS][FULL_PRODUCERS]; /* the key's order guards it */
    long disorder[FULL_KEYS];
    serex__thread threads[FULL_PRODUCERS];
    long efull[FULL_PRODUCERS], bad[FULL_PRODUCERS];
    _Atomic int go;
};

static void full_task(void *arg)
{
    struct full_item *it = arg;
    struct full_race *r = it->race;

    /* a producer's tasks of one key: increasing, not consecutive */
    if (it->seq < r->next[it->key][it->producer])
        r->disorder[it->key]++;
    r->next[it->key][it->producer] = it->seq + 1;
    /* relaxed: read after await_termination, which orders */
    atomic_fetch_add_explicit(&r->ran[it->producer][it->seq], 1,
                              memory_order_relaxed);
}

static int full_producer(void *arg)
{
    struct full_item *first = arg;
    struct full_race *r = first->race;
    unsigned p = first->producer;

    /* acquire: start together */
    while (!atomic_load_explicit(&r->go, memory_order_acquire))
        serex__thread_yield();
    for (size_t i = 0; i < FULL_PER; i++) {
        struct full_item *it = &r->items[p][i];
        int rc;

        while ((rc = serex_striped_execute(r->st, it->key, full_task, it)) ==
               SEREX_EFULL) {
            r->efull[p]++;
            serex__thread_yield();
        }
        if (rc != SEREX_OK && r->bad[p]++ == 0)
            print_message("producer %u: execute said %d\n", p, rc);
    }
    return 0;
}

static void stress_striped_refusals_racing_producers_lose_nothing(void **state)
{
    serex_pool_config pcfg = {
        .threads = 2, .queue_capacity = 2, .name = "stress-full"};
    serex_serial_config cfg = {.batch = 4};
    struct full_race *r = calloc(1, sizeof *r);
    struct test_wrap slow;
    serex_executor *pool, *ex;
    serex_stats st;
    long efull = 0;

    (void)state;
    assert_non_null(r);
    assert_int_equal(serex_pool_create(&pcfg, &pool), SEREX_OK);
    test_wrap_init(&slow, pool, slow_execute);
    assert_int_equal(serex_striped_create(&slow.base, &cfg, &r->st), SEREX_OK);
    ex = serex_striped_executor(r->st);
    for (unsigned p = 0; p < FULL_PRODUCERS; p++)
        for (size_t i = 0; i < FULL_PER; i++)
            /* few keys, shared by every producer: tasks of one key from
             * two producers often meet at a lane's start */
            r->items[p][i] = (struct full_item){r, p, i,
                                                (i / 3 + p) % FULL_KEYS};
    for (unsigned p = 0; p < FULL_PRODUCERS; p++)
        assert_int_equal(
            serex__thread_start(&r->threads[p], full_producer, &r->items[p][0]),
            SEREX_OK);
    atomic_store_explicit(&r->go, 1, memory_order_release);
    for (unsigned p = 0; p < FULL_PRODUCERS; p++) {
        serex__thread_join(r->threads[p]);
        assert_int_equal(r->bad[p], 0);
        efull += r->efull[p];
    }
    serex_shutdown(ex);
    assert_int_equal(serex_await_termination(ex, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_striped_lanes(r->st), 0);
    for (unsigned p = 0; p < FULL_PRODUCERS; p++)
        for (size_t i = 0; i < FULL_PER; i++)
            assert_int_equal(atomic_load(&r->ran[p][i]), 1);
    for (size_t k = 0; k < FULL_KEYS; k++)
        assert_int_equal(r->disorder[k], 0);
    assert_int_equal(serex_executor_stats(ex, &st), SEREX_OK);
    assert_int_equal(st.submitted, FULL_PRODUCERS * FULL_PER);
    assert_int_equal(st.completed, FULL_PRODUCERS * FULL_PER);
    assert_int_equal(st.rejected, (uint64_t)efull);
    print_message("[ stress   ] %ld SEREX_EFULL refusals retried\n", efull);
    assert_int_equal(serex_destroy(ex), SEREX_OK);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(stress_striped_lanes_churn_and_keep_per_key_order),
        T(stress_striped_shutdown_now_racing_execute_loses_nothing),
#undef T
        cmocka_unit_test(stress_striped_refusals_racing_producers_lose_nothing),
    };

    return cmocka_run_group_tests_name("stress_striped", tests, NULL, NULL);
}
