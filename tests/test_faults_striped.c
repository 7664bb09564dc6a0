/* SPDX-License-Identifier: MIT */
/*
 * test_faults_striped.c - allocation failure in a striped executor over a
 * manual one, with many keys (a shard table that must grow), unbounded and
 * with capacities the scenario fills exactly (a place kept by a failed
 * execute would show as a SEREX_EFULL), and in the making of a new key's
 * lane (tests/test_faults.h says how a scenario runs).
 */
#include "test_faults.h"

#include "striped_internal.h"

/* --- striped over a manual executor, many keys --- */

#define NSAME 40  /* keys sharing one shard: its table must grow */
#define NSPREAD 8 /* keys anywhere */
#define NKEYS (NSAME + NSPREAD)
/* The most tasks the scenario has waiting at once: in all lanes (at its
 * end), and in one lane (keys 6 and 9). */
#define STRIPED_PEAK 67
#define LANE_PEAK 3

static void striped_keys(uint64_t *keys)
{
    const uint64_t spread[NSPREAD] = {1, 2, 64, UINT64_C(1) << 32,
                                      UINT64_C(1) << 63, UINT64_MAX,
                                      12345, 7};
    size_t n = 0;

    for (uint64_t k = 1000; n < NSAME; k++)
        if (serex__striped_shard_of(k) == 0)
            keys[n++] = k;
    for (size_t i = 0; i < NSPREAD; i++)
        keys[NSAME + i] = spread[i];
}

/* The striped's own view (lanes, stats) against the tally of the run. */
static void check_striped(struct run *r, serex_striped *st,
                          serex_executor *m)
{
    struct tally t = tally_of(r);
    serex_stats s = stats_of(serex_striped_executor(st));

    assert_int_equal(serex_striped_lanes(st), t.busy_keys);
    assert_int_equal(s.lanes, t.busy_keys);
    assert_int_equal(s.completed, t.ran);
    assert_int_equal(s.submitted, t.accepted);
    assert_int_equal(s.queued, t.waiting);
    /* one drain on the target per busy lane */
    assert_int_equal(manual_queued(m), t.busy_keys);
}

static void striped_execute_one(struct run *r, serex_striped *st,
                                serex_executor *m, const uint64_t *keys,
                                int kidx)
{
    struct task *t = task_new(r, keys[kidx]);

    t->kidx = kidx;
    accept(r, t, serex_striped_execute(st, t->key, log_task, t));
    check_striped(r, st, m); /* a failure changed nothing */
}

/*
 * At the peak of a bounded striped: one more task for key index @kidx is
 * refused with SEREX_EFULL exactly when its lane or the striped is full
 * by the run's own tally, else accepted: failed executes gave their
 * places back.
 */
static void striped_execute_at_cap(struct run *r, serex_striped *st,
                                   serex_executor *m, const uint64_t *keys,
                                   int kidx)
{
    struct tally before = tally_of(r);
    int in_lane = 0;
    struct task *t;
    int rc;

    for (int id = 0; id < r->ntasks; id++)
        in_lane += r->accepted[id] && r->tasks[id].kidx == kidx &&
                   atomic_load(&r->ran[id]) == 0 && r->handed[id] == 0;
    t = task_new(r, keys[kidx]);
    t->kidx = kidx;
    rc = serex_striped_execute(st, t->key, log_task, t);
    if (before.waiting == STRIPED_PEAK || in_lane == LANE_PEAK)
        status_refused(r, rc, SEREX_EFULL);
    else
        accept(r, t, rc);
    check_striped(r, st, m);
}

/* variant bit 0: 0, the target runs the lanes' last drains, then
 * destroy; 1, destroy, then the target's destroy drops those drains. Bit
 * 1: both capacities set, at the scenario's peaks. */
static void scenario_striped(struct run *r)
{
    const bool capped = r->variant & 2;
    serex_striped_config cfg = {
        .batch = 2,
        .queue_capacity = capped ? STRIPED_PEAK : 0,
        .lane_capacity = capped ? LANE_PEAK : 0,
    };
    serex_executor sentinel, *m = &sentinel, *face;
    serex_striped *st = (serex_striped *)r; /* must be overwritten */
    serex_future *fu;
    struct task *ft;
    uint64_t keys[NKEYS];
    int handed0, nlog0;
    size_t n;

    if (!manual_created(r, &m))
        return;
    striped_keys(keys);
    if (!status_ok(r, serex_striped_create(m, &cfg, &st))) {
        assert_null(st);
        assert_int_equal(serex_destroy(m), SEREX_OK);
        return;
    }
    face = serex_striped_executor(st);
    check_striped(r, st, m);
    for (int k = 0; k < NKEYS; k++)
        striped_execute_one(r, st, m, keys, k);
    for (int k = 0; k < NKEYS; k += 3)
        striped_execute_one(r, st, m, keys, k);
    ft = task_new(r, keys[NSAME]);
    ft->kidx = NSAME;
    fu = (serex_future *)ft;
    if (!accept(r, ft, serex_striped_submit(st, ft->key, call_logged, ft,
                                            &fu)))
        assert_null(fu);
    check_striped(r, st, m);
    for (int i = 0; i < 6; i++) {
        manual_run_one_checked(m);
        check_striped(r, st, m);
    }
    for (int k = 0; k < 10; k++)
        striped_execute_one(r, st, m, keys, k);
    if (capped) /* key 6's lane, and all lanes, are full unless one failed */
        striped_execute_at_cap(r, st, m, keys, 6);
    serex_manual_run_pending(m);
    check_striped(r, st, m);

    handed0 = r->nhanded;
    n = serex_shutdown_now(face, on_pending, r);
    assert_int_equal(serex_striped_lanes(st), 0);
    assert_int_equal(stats_of(face).queued, 0);
    status_refused(r, serex_striped_execute(st, keys[0], log_task,
                                            task_new(r, keys[0])),
                   SEREX_EREJECTED);
    assert_int_equal(serex_await_termination(face, 0), SEREX_OK);
    nlog0 = r->nlog;
    if ((r->variant & 1) == 0) {
        test_run_all(m); /* the drains find nothing, free their lanes */
        assert_int_equal(serex_striped_lanes(st), 0);
    }
    assert_int_equal(serex_destroy(face), SEREX_OK);
    end_on_manual(r, m, nlog0, n, handed0, fu, ft);
}

/* --- the tests --- */

FAULTS_CASE(faults_striped_many_keys_run_out_loses_nothing,
            "striped (drains run out)", scenario_striped, 0)

FAULTS_CASE(faults_striped_many_keys_drains_dropped_loses_nothing,
            "striped (drains dropped)", scenario_striped, 1)

FAULTS_CASE(faults_striped_bounded_gives_each_place_back,
            "striped, bounded (drains run out)", scenario_striped, 2)

FAULTS_CASE(faults_striped_bounded_drains_dropped_gives_each_place_back,
            "striped, bounded (drains dropped)", scenario_striped, 3)

/*
 * A bug these scenarios found (fixed): striped_push counts a keyed task
 * (shard `submitted`) before the key's new lane has its drain started on
 * the target. When the target refuses
 * that drain (here: its node allocation fails; a shut-down or full target
 * does the same), lane_refused takes the task back and frees the lane,
 * and serex_striped_execute says SEREX_ENOMEM (or the target's status):
 * nothing is queued. The count stayed, so serex_executor_stats said one
 * task more submitted and queued, for ever. lane_refused now undoes it.
 */
static void faults_striped_new_lane_enomem_leaves_stats_unchanged(
    void **state)
{
    struct fixture *f = *state;
    struct run *r = run_new(f, 1, 0);
    serex_stats st;
    int rc = SEREX_ENOMEM, failures = 0;
    struct task *t = NULL;

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_striped_create(f->manual, NULL, &f->st), SEREX_OK);
    /* a new key: its node, its lane and the target's node for the lane's
     * drain; each failure must leave everything as it was */
    for (unsigned long k = 1; k < 16 && rc != SEREX_OK; k++) {
        t = task_new(r, 77);
        serex__cache_trim();
        serex__alloc_fail_nth(k);
        rc = serex_striped_execute(f->st, 77, log_task, t);
        serex__alloc_fail_nth(0);
        if (rc == SEREX_OK)
            break;
        assert_int_equal(rc, SEREX_ENOMEM);
        failures++;
        assert_int_equal(serex_striped_lanes(f->st), 0);
        assert_int_equal(manual_queued(f->manual), 0);
        st = stats_of(serex_striped_executor(f->st));
        assert_int_equal(st.queued, 0);    /* fails: 1 after the third */
        assert_int_equal(st.submitted, 0); /* allocation failed */
    }
    assert_int_equal(rc, SEREX_OK);
    assert_true(failures >= 3);
    test_run_all(f->manual);
    assert_int_equal(atomic_load(&r->ran[t->id]), 1);
    st = stats_of(serex_striped_executor(f->st));
    assert_int_equal(st.submitted, 1);
    assert_int_equal(st.completed, 1);
    assert_int_equal(st.queued, 0);
}

/*
 * A new key's lane on a striped with room for one task, in all and per
 * lane: whichever allocation fails (the task's node, the lane, the
 * target's node for the drain), the places taken are given back, so the
 * next try still finds room, and when one finally succeeds the striped is
 * full.
 */
static void faults_striped_new_lane_enomem_gives_places_back(void **state)
{
    struct fixture *f = *state;
    struct run *r = run_new(f, 1, 0);
    serex_striped_config cfg = {.queue_capacity = 1, .lane_capacity = 1};
    int rc = SEREX_ENOMEM;
    struct task *t = NULL;

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_striped_create(f->manual, &cfg, &f->st), SEREX_OK);
    for (unsigned long k = 1; k < 16 && rc != SEREX_OK; k++) {
        t = task_new(r, 77);
        serex__cache_trim();
        serex__alloc_fail_nth(k);
        rc = serex_striped_execute(f->st, 77, log_task, t);
        serex__alloc_fail_nth(0);
        if (rc != SEREX_OK)
            assert_int_equal(rc, SEREX_ENOMEM); /* never SEREX_EFULL */
    }
    assert_int_equal(rc, SEREX_OK);
    assert_int_equal(serex_striped_execute(f->st, 78, never_task, NULL),
                     SEREX_EFULL);
    assert_int_equal(serex_striped_execute(f->st, 77, never_task, NULL),
                     SEREX_EFULL);
    test_run_all(f->manual);
    assert_int_equal(atomic_load(&r->ran[t->id]), 1);
    assert_int_equal(
        serex_striped_execute(f->st, 78, log_task, task_new(r, 78)), SEREX_OK);
    test_run_all(f->manual);
}

/*
 * Issue 20: an execute that fails for want of memory is a refused call, as
 * a pool counts it (pool_execute): stats.rejected counts it, whichever
 * allocation failed (the task's node, a new lane, the target's node for
 * the lane's drain, a keyless task's wrapper). The striped counted none.
 */
static void faults_striped_enomem_counts_as_rejected(void **state)
{
    struct fixture *f = *state;
    struct run *r = run_new(f, 1, 0);
    serex_executor *face;
    uint64_t failures = 0;

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_striped_create(f->manual, NULL, &f->st), SEREX_OK);
    face = serex_striped_executor(f->st);
    /* keyed, a new key (mode 0) and a live lane (1); keyless (2) */
    for (int mode = 0; mode < 3; mode++) {
        int rc = SEREX_ENOMEM;

        if (mode == 1) /* key 77's lane stays: its drain is queued */
            assert_int_equal(
                serex_striped_execute(f->st, 77, log_task, task_new(r, 77)),
                SEREX_OK);
        for (unsigned long k = 1; k < 16 && rc != SEREX_OK; k++) {
            struct task *t = task_new(r, 78);

            serex__cache_trim();
            serex__alloc_fail_nth(k);
            rc = mode == 2 ? serex_execute(face, log_task, t)
                           : serex_striped_execute(f->st, mode ? 77 : 78,
                                                   log_task, t);
            serex__alloc_fail_nth(0);
            if (rc == SEREX_OK)
                break;
            assert_int_equal(rc, SEREX_ENOMEM);
            failures++;
            assert_int_equal(stats_of(face).rejected, failures);
        }
        assert_int_equal(rc, SEREX_OK);
    }
    assert_true(failures >= 5); /* 3 for a new key, 1 each for the others */
    test_run_all(f->manual);
    assert_int_equal(stats_of(face).rejected, failures);
    assert_int_equal(stats_of(face).queued, 0);
}

FAULTS_MAIN(
    "faults_striped",
    FAULTS_TEST(faults_striped_many_keys_run_out_loses_nothing),
    FAULTS_TEST(faults_striped_many_keys_drains_dropped_loses_nothing),
    FAULTS_TEST(faults_striped_bounded_gives_each_place_back),
    FAULTS_TEST(faults_striped_bounded_drains_dropped_gives_each_place_back),
    FAULTS_TEST(faults_striped_new_lane_enomem_leaves_stats_unchanged),
    FAULTS_TEST(faults_striped_new_lane_enomem_gives_places_back),
    FAULTS_TEST(faults_striped_enomem_counts_as_rejected))
