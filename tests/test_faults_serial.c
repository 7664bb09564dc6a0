/* SPDX-License-Identifier: MIT */
/*
 * test_faults_serial.c - allocation failure in a serial over a manual
 * executor, its last drain run or dropped by the target after destroy,
 * unbounded and with a queue_capacity the scenario fills exactly (a place
 * kept by a failed execute would show as a SEREX_EFULL); tests/test_faults.h
 * says how a scenario runs.
 */
#include "test_faults.h"

/* --- serial over a manual executor --- */

/* The most tasks the scenario has waiting at once (after its first ten). */
#define SERIAL_PEAK 10

static void check_serial(struct run *r, serex_executor *serial,
                         serex_executor *m)
{
    struct tally t = tally_of(r);
    serex_stats st = stats_of(serial);

    assert_int_equal(st.submitted, t.accepted);
    assert_int_equal(st.completed, t.ran);
    assert_int_equal(st.queued, t.waiting);
    /* one drain on the target while the serial has work */
    assert_int_equal(manual_queued(m), t.waiting > 0 ? 1 : 0);
}

static void serial_execute_one(struct run *r, serex_executor *serial,
                               serex_executor *m)
{
    struct task *t = task_new(r, 0);

    accept(r, t, serex_execute(serial, log_task, t));
    check_serial(r, serial, m); /* a failure changed nothing */
}

/*
 * At the peak of a bounded serial: one more execute is refused with
 * SEREX_EFULL exactly when SERIAL_PEAK tasks wait (none of the ten
 * failed), else accepted: a failed execute gave its place back.
 */
static void serial_execute_at_cap(struct run *r, serex_executor *serial,
                                  serex_executor *m)
{
    struct task *t = task_new(r, 0);
    bool full = tally_of(r).waiting == SERIAL_PEAK;
    int rc = serex_execute(serial, log_task, t);

    if (full)
        status_refused(r, rc, SEREX_EFULL);
    else
        accept(r, t, rc);
    check_serial(r, serial, m);
}

/* variant bit 0: 0, the target runs the serial's last drain after
 * destroy; 1, the target's destroy drops it. Bit 1: bounded, at
 * SERIAL_PEAK, and named. */
static void scenario_serial(struct run *r)
{
    const bool capped = r->variant & 2;
    serex_serial_config cfg = {.batch = 3,
                               .queue_capacity = capped ? SERIAL_PEAK : 0,
                               .name = capped ? "capped" : NULL};
    serex_executor sentinel, *m = &sentinel, *serial = &sentinel;
    serex_future *fu;
    struct task *ft;
    int handed0, nlog0;
    size_t n;

    if (!manual_created(r, &m))
        return;
    if (!status_ok(r, serex_serial_create(m, &cfg, &serial))) {
        assert_null(serial);
        assert_int_equal(serex_destroy(m), SEREX_OK);
        return;
    }
    check_serial(r, serial, m);
    assert_string_equal(stats_of(serial).name, capped ? "capped" : "serial");
    for (int i = 0; i < SERIAL_PEAK; i++)
        serial_execute_one(r, serial, m);
    if (capped)
        serial_execute_at_cap(r, serial, m);
    for (int i = 0; i < 2; i++) {
        manual_run_one_checked(m);
        check_serial(r, serial, m);
    }
    for (int i = 0; i < 4; i++)
        serial_execute_one(r, serial, m);
    ft = task_new(r, 0);
    fu = (serex_future *)ft;
    if (!accept(r, ft, serex_submit(serial, call_logged, ft, &fu)))
        assert_null(fu);
    check_serial(r, serial, m);
    manual_run_one_checked(m);
    check_serial(r, serial, m);

    handed0 = r->nhanded;
    n = serex_shutdown_now(serial, on_pending, r);
    assert_int_equal(stats_of(serial).queued, 0);
    status_refused(r, serex_execute(serial, log_task, task_new(r, 0)),
                   SEREX_EREJECTED);
    assert_int_equal(serex_await_termination(serial, 0), SEREX_OK);
    nlog0 = r->nlog;
    assert_int_equal(serex_destroy(serial), SEREX_OK);
    if ((r->variant & 1) == 0)
        test_run_all(m); /* a drain may still be queued: it runs nothing */
    end_on_manual(r, m, nlog0, n, handed0, fu, ft);
}

/* --- the tests --- */

FAULTS_CASE(faults_serial_drain_run_after_destroy_loses_nothing,
            "serial (drain run after destroy)", scenario_serial, 0)

FAULTS_CASE(faults_serial_drain_dropped_by_target_loses_nothing,
            "serial (drain dropped)", scenario_serial, 1)

FAULTS_CASE(faults_serial_bounded_gives_each_place_back,
            "serial, bounded (drain run after destroy)", scenario_serial, 2)

FAULTS_CASE(faults_serial_bounded_drain_dropped_gives_each_place_back,
            "serial, bounded (drain dropped)", scenario_serial, 3)

FAULTS_MAIN(
    "faults_serial",
    FAULTS_TEST(faults_serial_drain_run_after_destroy_loses_nothing),
    FAULTS_TEST(faults_serial_drain_dropped_by_target_loses_nothing),
    FAULTS_TEST(faults_serial_bounded_gives_each_place_back),
    FAULTS_TEST(faults_serial_bounded_drain_dropped_gives_each_place_back))
