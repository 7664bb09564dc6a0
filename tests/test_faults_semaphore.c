/* SPDX-License-Identifier: MIT */
/*
 * test_faults_semaphore.c - allocation failure in the semaphore (its
 * create, and the record of each acquire: granted at once, parked,
 * cancelled by a token, refused once closed), with and without a token
 * (tests/test_faults.h says how a scenario runs). An acquire that says
 * SEREX_ENOMEM changes nothing: no permit taken, nothing posted, nothing
 * parked (a later release grants exactly the others); every acquire that
 * said SEREX_OK has its continuation run exactly once; and at the end
 * every permit is back.
 */
#include "test_faults.h"

#define PERMITS 3

/* The continuation: logs its task; got[] keeps its status. */
static void permit_logged(void *arg, int status)
{
    struct task *t = arg;

    t->r->got[t->id] = status;
    log_task(t);
}

/* One acquire of @n (kept in the task's kidx); on SEREX_ENOMEM nothing
 * changed. */
static void acquire_one(struct run *r, serex_semaphore *s, serex_executor *m,
                        uint32_t n, serex_cancel *c)
{
    struct task *t = task_new(r, 0);
    uint64_t avail = serex_semaphore_available(s);
    uint64_t queued = manual_queued(m);

    t->kidx = (int)n;
    if (!accept(r, t, serex_semaphore_acquire(s, n, m, permit_logged, t, c))) {
        assert_int_equal(serex_semaphore_available(s), avail);
        assert_int_equal(manual_queued(m), queued);
    }
}

/* Runs what is queued, then gives back the permits of each task that ran
 * granted (once: @back marks them). */
static void run_and_release(struct run *r, serex_semaphore *s,
                            serex_executor *m, bool *back)
{
    test_run_all(m);
    for (int id = 0; id < r->ntasks; id++) {
        if (back[id] || atomic_load(&r->ran[id]) == 0 || r->got[id] != SEREX_OK)
            continue;
        back[id] = true;
        serex_semaphore_release(s, (uint32_t)r->tasks[id].kidx);
    }
    test_run_all(m); /* what those releases granted */
}

static void scenario_semaphore(struct run *r)
{
    serex_semaphore *s = (serex_semaphore *)r; /* must be overwritten */
    serex_executor sentinel, *m = &sentinel;
    serex_cancel *c = NULL;
    bool back[MAXT] = {false};

    if (!status_ok(r, serex_semaphore_create(PERMITS, &s))) {
        assert_null(s);
        return;
    }
    if (!manual_created(r, &m)) {
        serex_semaphore_destroy(s);
        return;
    }
    if (r->variant == 1 && !status_ok(r, serex_cancel_create(NULL, &c)))
        c = NULL;                  /* go on without a token */
    acquire_one(r, s, m, 2, NULL); /* granted at once */
    acquire_one(r, s, m, 2, c);    /* parks (1 free) */
    acquire_one(r, s, m, 1, NULL); /* parks behind it */
    if (c != NULL)
        assert_true(serex_cancel_request(c, 0)); /* the 2 leaves */
    run_and_release(r, s, m, back);
    run_and_release(r, s, m, back); /* the ones behind, granted now */
    acquire_one(r, s, m, 3, c);     /* cancelled already, or granted */
    acquire_one(r, s, m, 1, NULL);  /* parks, or granted */
    run_and_release(r, s, m, back);
    run_and_release(r, s, m, back);
    assert_true(serex_semaphore_try_acquire(s, PERMITS));
    acquire_one(r, s, m, 1, NULL); /* parks: closed below */
    serex_semaphore_close(s);
    status_refused(r, serex_semaphore_acquire(s, 1, m, permit_logged, r, c),
                   SEREX_EREJECTED);
    serex_semaphore_release(s, PERMITS);
    run_and_release(r, s, m, back);
    /* every permit is back: none leaked by a failed acquire */
    assert_int_equal(serex_semaphore_available(s), PERMITS);
    for (int id = 0; id < r->ntasks; id++)
        if (r->accepted[id] && r->got[id] == SEREX_ECANCELED)
            assert_ptr_not_equal(c, NULL); /* only a token cancels */
    serex_semaphore_destroy(s);
    assert_int_equal(serex_destroy(m), SEREX_OK);
    serex_cancel_release(c);
}

FAULTS_CASE(semaphore_faults, "semaphore", scenario_semaphore, 0)
FAULTS_CASE(semaphore_faults_with_token, "semaphore with a token",
            scenario_semaphore, 1)

FAULTS_MAIN("faults_semaphore", FAULTS_TEST(semaphore_faults),
            FAULTS_TEST(semaphore_faults_with_token))
