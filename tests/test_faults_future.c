/* SPDX-License-Identifier: MIT */
/*
 * test_faults_future.c - allocation failure in submit on a manual
 * executor: futures waited, cancelled, released, and cancelled by
 * shutdown_now (tests/test_faults.h says how a scenario runs).
 */
#include "test_faults.h"

/* --- futures on a manual executor --- */

static void scenario_futures(struct run *r)
{
    serex_executor sentinel, *m = &sentinel;
    serex_future *fu[6], *late;
    struct task *ft[6];
    size_t accepted = 0;

    if (!manual_created(r, &m))
        return;
    for (int i = 0; i < 6; i++) {
        ft[i] = task_new(r, 0);
        fu[i] = (serex_future *)ft[i]; /* must be overwritten */
        if (accept(r, ft[i], serex_submit(m, call_logged, ft[i], &fu[i]))) {
            accepted++;
            assert_non_null(fu[i]);
        } else {
            assert_null(fu[i]);
        }
        /* a failed submit queued nothing */
        assert_int_equal(manual_queued(m), accepted);
    }
    if (fu[1] != NULL) {
        assert_true(serex_future_cancel(fu[1]));
        r->cancelled[ft[1]->id] = 1;
        assert_false(serex_future_cancel(fu[1]));
        assert_int_equal(serex_future_wait(fu[1], 0), SEREX_ECANCELED);
    }
    if (fu[0] != NULL) {
        assert_int_equal(serex_future_wait(fu[0], 0), SEREX_ETIMEDOUT);
        assert_null(serex_future_value(fu[0]));
    }
    if (fu[2] != NULL) { /* released before it runs: it still runs */
        serex_future_release(fu[2]);
        fu[2] = NULL;
    }
    /* at least five were accepted: the first three queued run (one of
     * them may be the cancelled one, which runs nothing) */
    for (int i = 0; i < 3; i++)
        assert_true(serex_manual_run_one(m));
    assert_int_equal(atomic_load(&r->ran[ft[2]->id]),
                     r->accepted[ft[2]->id] ? 1 : 0);
    /* the rest are futures: cancelled and counted, not handed back */
    assert_int_equal(serex_shutdown_now(m, on_pending, r), accepted - 3);
    assert_int_equal(r->nhanded, 0);
    late = (serex_future *)r;
    status_refused(r, serex_submit(m, call_logged, task_new(r, 0), &late),
                   SEREX_EREJECTED);
    assert_null(late);
    for (int i = 0; i < 6; i++)
        settle_future(r, fu[i], ft[i]);
    assert_int_equal(serex_destroy(m), SEREX_OK);
    assert_ascending(r->log, r->nlog);
}

/* --- the tests --- */

FAULTS_CASE(faults_futures_on_manual_lose_nothing,
            "futures", scenario_futures, 0)

FAULTS_MAIN("faults_future",
            FAULTS_TEST(faults_futures_on_manual_lose_nothing))
