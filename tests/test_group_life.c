/* SPDX-License-Identifier: MIT */
/*
 * test_group_life.c - groups with a life (group.h, issue 23): close
 * refuses later members, errors are collected (first kept, all counted)
 * and reported by wait, fail-fast cancels and closes at the first error,
 * a parent token or its deadline cancels the group, and the group's own
 * token. On manual executors: every order is the test's.
 */
#include "test_util.h"

#include <stdatomic.h>

#define ERR_A (-300)
#define ERR_B (-301)

static atomic_int ran;

static void count_task(void *arg)
{
    (void)arg;
    atomic_fetch_add(&ran, 1);
}

static void *count_call(void *arg)
{
    atomic_fetch_add(&ran, 1);
    return arg;
}

static void *fail_call(void *arg)
{
    assert_int_equal(serex_future_set_error(*(int *)arg), SEREX_OK);
    return NULL;
}

static void close_refuses_later_members(void **state)
{
    serex_executor *m;
    serex_group *g;
    serex_future *f = (serex_future *)&f;

    (void)state;
    atomic_store(&ran, 0);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_group_create(&g), SEREX_OK);
    assert_int_equal(serex_group_execute(g, m, count_task, NULL), SEREX_OK);
    serex_group_close(g);
    serex_group_close(g); /* idempotent */
    assert_int_equal(serex_group_execute(g, m, count_task, NULL),
                     SEREX_EREJECTED);
    assert_int_equal(serex_group_submit(g, m, count_call, NULL, &f),
                     SEREX_EREJECTED);
    assert_null(f);
    serex_group_enter(g); /* not refused: work already under way */
    serex_group_leave(g);
    assert_int_equal(serex_group_wait(g, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_manual_run_pending(m), 1); /* the one before */
    assert_int_equal(serex_group_wait(g, 0), SEREX_OK);
    assert_int_equal(atomic_load(&ran), 1);
    assert_null(serex_group_token(g)); /* a plain group has none */
    serex_group_destroy(g);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

static void errors_are_collected_and_reported(void **state)
{
    serex_executor *m;
    serex_group *g;
    serex_future *fa, *fb;
    int a = ERR_A, b = ERR_B;

    (void)state;
    atomic_store(&ran, 0);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_group_create_config(NULL, &g), SEREX_OK);
    assert_non_null(serex_group_token(g));
    assert_int_equal(serex_group_submit(g, m, fail_call, &a, &fa), SEREX_OK);
    assert_int_equal(serex_group_submit(g, m, fail_call, &b, &fb), SEREX_OK);
    assert_int_equal(serex_group_execute(g, m, count_task, NULL), SEREX_OK);
    assert_int_equal(serex_manual_run_pending(m), 3); /* nothing cancelled */
    assert_int_equal(atomic_load(&ran), 1);
    assert_int_equal(serex_future_wait(fa, 0), ERR_A);
    assert_int_equal(serex_future_wait(fb, 0), ERR_B);
    serex_group_fail(g, 5); /* out of range: nothing */
    serex_group_fail(NULL, ERR_B);
    serex_group_fail(g, -7); /* from anywhere: counted */
    assert_int_equal(serex_group_wait(g, 0), ERR_A); /* the first */
    assert_int_equal(serex_group_error(g), ERR_A);
    assert_int_equal(serex_group_error_count(g), 3);
    assert_false(serex_cancel_requested(serex_group_token(g)));
    assert_int_equal(serex_group_execute(g, m, count_task, NULL), SEREX_OK);
    assert_int_equal(serex_manual_run_pending(m), 1); /* still open */
    serex_future_release(fa);
    serex_future_release(fb);
    serex_group_destroy(g);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

static void fail_fast_cancels_and_closes(void **state)
{
    serex_group_config cfg = {.flags = SEREX_GROUP_FAIL_FAST};
    serex_executor *m;
    serex_group *g;
    serex_future *fa, *fb;
    int a = ERR_A;

    (void)state;
    atomic_store(&ran, 0);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_group_create_config(&cfg, &g), SEREX_OK);
    assert_int_equal(serex_group_submit(g, m, fail_call, &a, &fa), SEREX_OK);
    assert_int_equal(serex_group_submit(g, m, count_call, NULL, &fb), SEREX_OK);
    assert_int_equal(serex_group_execute(g, m, count_task, NULL), SEREX_OK);
    assert_true(serex_manual_run_one(m)); /* the failure */
    assert_int_equal(serex_cancel_cause(serex_group_token(g)), ERR_A);
    assert_int_equal(serex_group_execute(g, m, count_task, NULL),
                     SEREX_EREJECTED);                /* closed */
    assert_int_equal(serex_manual_run_pending(m), 2); /* skipped */
    /* (a cancelled task's future ends when its slot is reached) */
    assert_int_equal(serex_future_wait(fb, 0), SEREX_ECANCELED);
    assert_int_equal(atomic_load(&ran), 0);
    assert_int_equal(serex_group_wait(g, SEREX_FOREVER), ERR_A);
    assert_int_equal(serex_group_error_count(g), 1);
    serex_future_release(fa);
    serex_future_release(fb);
    serex_group_destroy(g);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

static void parent_deadline_cancels_the_group(void **state)
{
    serex_scheduler_config scfg = {.manual = true};
    serex_scheduler *s;
    serex_executor *m;
    serex_cancel *req;
    serex_group_config cfg = {0};
    serex_group *g;

    (void)state;
    atomic_store(&ran, 0);
    assert_int_equal(serex_scheduler_create(&scfg, &s), SEREX_OK);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &req), SEREX_OK);
    assert_int_equal(serex_cancel_deadline(req, s, 200 * MS), SEREX_OK);
    cfg.parent = req;
    assert_int_equal(serex_group_create_config(&cfg, &g), SEREX_OK);
    serex_cancel_release(req); /* the group holds what it needs */
    assert_int_equal(serex_group_execute(g, m, count_task, NULL), SEREX_OK);
    assert_true(serex_manual_run_one(m));
    assert_int_equal(serex_group_execute(g, m, count_task, NULL), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 200 * MS), SEREX_OK);
    assert_int_equal(serex_group_execute(g, m, count_task, NULL),
                     SEREX_EREJECTED);
    assert_int_equal(serex_manual_run_pending(m), 1); /* cancelled */
    assert_int_equal(atomic_load(&ran), 1);
    assert_int_equal(serex_group_wait(g, 0), SEREX_ETIMEDOUT); /* the cause */
    assert_int_equal(serex_group_error(g), SEREX_ETIMEDOUT);
    serex_group_destroy(g);
    assert_int_equal(serex_destroy(m), SEREX_OK);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
}

static void cancelled_parent_makes_a_closed_group(void **state)
{
    serex_executor *m;
    serex_cancel *req;
    serex_group_config cfg = {0};
    serex_group *g;

    (void)state;
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &req), SEREX_OK);
    assert_true(serex_cancel_request(req, ERR_B));
    cfg.parent = req;
    assert_int_equal(serex_group_create_config(&cfg, &g), SEREX_OK);
    assert_int_equal(serex_group_execute(g, m, count_task, NULL),
                     SEREX_EREJECTED);
    assert_int_equal(serex_group_wait(g, 0), ERR_B);
    serex_group_destroy(g);
    serex_cancel_release(req);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

/* Cancelling the group's own token cancels the group. */
static void own_token_cancels(void **state)
{
    serex_executor *m;
    serex_group *g;

    (void)state;
    atomic_store(&ran, 0);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_group_create_config(NULL, &g), SEREX_OK);
    assert_int_equal(serex_group_execute(g, m, count_task, NULL), SEREX_OK);
    assert_true(serex_cancel_request(serex_group_token(g), 0));
    assert_int_equal(serex_manual_run_pending(m), 1);
    assert_int_equal(atomic_load(&ran), 0);
    assert_int_equal(serex_group_wait(g, 0), SEREX_ECANCELED);
    serex_group_destroy(g);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

static void config_bad_input(void **state)
{
    serex_group_config cfg = {.flags = 2};
    serex_group *g = (serex_group *)&g;

    (void)state;
    assert_int_equal(serex_group_create_config(&cfg, &g), SEREX_EINVAL);
    assert_null(g);
    assert_int_equal(serex_group_create_config(NULL, NULL), SEREX_EINVAL);
    assert_int_equal(serex_group_error(NULL), 0);
    assert_int_equal(serex_group_error_count(NULL), 0);
    assert_null(serex_group_token(NULL));
    serex_group_close(NULL);
}

/* Fail-fast on a pool: many tasks, several fail at once on different
 * workers: exactly one error is first, every task runs or is cancelled
 * once, and the wait reports the first (TSan sees the races). */
#define POOL_TASKS 64

static void *maybe_fail(void *arg)
{
    int i = (int)(intptr_t)arg;

    if (i % 8 == 3)
        assert_int_equal(serex_future_set_error(-1000 - i), SEREX_OK);
    atomic_fetch_add(&ran, 1);
    return arg;
}

static void fail_fast_on_a_pool(void **state)
{
    serex_group_config cfg = {.flags = SEREX_GROUP_FAIL_FAST};
    serex_executor *pool;
    serex_future *fs[POOL_TASKS];

    (void)state;
    assert_int_equal(serex_pool_create(NULL, &pool), SEREX_OK);
    for (int round = 0; round < 20; round++) {
        serex_group *g;
        int rc, cancelled = 0, failed = 0;

        atomic_store(&ran, 0);
        assert_int_equal(serex_group_create_config(&cfg, &g), SEREX_OK);
        for (int i = 0; i < POOL_TASKS; i++) {
            rc = serex_group_submit(g, pool, maybe_fail, (void *)(intptr_t)i,
                                    &fs[i]);
            assert_true(rc == SEREX_OK || rc == SEREX_EREJECTED);
            if (rc != SEREX_OK)
                fs[i] = NULL;
        }
        rc = serex_group_wait(g, SEREX_FOREVER);
        assert_true(rc <= -1000 && rc > -1000 - POOL_TASKS);
        assert_int_equal(serex_group_error(g), rc);
        for (int i = 0; i < POOL_TASKS; i++) {
            int r;

            if (fs[i] == NULL)
                continue;
            r = serex_future_wait(fs[i], 0);
            if (r == SEREX_ECANCELED)
                cancelled++;
            else if (r != SEREX_OK)
                failed++;
            serex_future_release(fs[i]);
        }
        assert_int_equal(serex_group_error_count(g), failed);
        assert_true(failed >= 1);
        (void)cancelled;
        serex_group_destroy(g);
    }
    assert_int_equal(serex_destroy(pool), SEREX_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(close_refuses_later_members),
        cmocka_unit_test(errors_are_collected_and_reported),
        cmocka_unit_test(fail_fast_cancels_and_closes),
        cmocka_unit_test(parent_deadline_cancels_the_group),
        cmocka_unit_test(cancelled_parent_makes_a_closed_group),
        cmocka_unit_test(own_token_cancels),
        cmocka_unit_test(config_bad_input),
        cmocka_unit_test(fail_fast_on_a_pool),
    };

    return cmocka_run_group_tests_name("group_life", tests, NULL, NULL);
}
