/* SPDX-License-Identifier: MIT */
/*
 * test_life.c - the lifetime helper (src/life_internal.h) on its own: who
 * frees, the entry word's close and quiesce, and the awaiters' wake-ups.
 * The helper's races are checked by its spin model (tests/model/life.pml);
 * these tests pin each rule down in one thread, so that a change to one of
 * them fails here first.
 */
#include "test_util.h"

#include <stdlib.h>

#include "life_internal.h"
#include "thread_internal.h"

struct fixture {
    struct serex__life life;
    struct serex__entry entry;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

/* The last of {the last release, detach} frees, and only it. */
static void life_last_holder_after_detach_frees(void **state)
{
    struct fixture *f = *state;

    serex__life_hold(&f->life);
    serex__life_hold(&f->life);
    assert_false(serex__life_release(&f->life)); /* not detached */
    assert_false(serex__life_detach(&f->life));  /* a holder is left */
    assert_int_equal(serex__life_holders(&f->life), 1);
    assert_true(serex__life_release(&f->life)); /* last, detached */
}

static void life_detach_with_no_holder_frees_at_once(void **state)
{
    struct fixture *f = *state;

    serex__life_hold(&f->life);
    assert_false(serex__life_release(&f->life));
    assert_true(serex__life_detach(&f->life));
}

/* Flags and calls in flight share the word: a close is seen by every later
 * enter, and a call in flight keeps the word busy until it leaves. */
static void life_entry_close_is_seen_and_quiesce_waits_for_none(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex__entry_enter(&f->entry), 0);
    assert_int_equal(serex__entry_close(&f->entry, 1, memory_order_relaxed),
                     0);
    assert_true(serex__entry_busy(serex__entry_load(&f->entry)));
    assert_int_equal(serex__entry_enter(&f->entry), 1); /* sees the flag */
    serex__entry_abort(&f->entry);
    serex__entry_leave(&f->entry);
    serex__entry_quiesce(&f->entry); /* none in flight: returns */
    assert_false(serex__entry_busy(serex__entry_load(&f->entry)));
    assert_int_equal(serex__entry_clear(&f->entry, 1, memory_order_relaxed),
                     1);
    assert_int_equal(serex__entry_load(&f->entry), 0);
}

/*
 * Two wake-ups between an awaiter's look at the word and its park must not
 * cancel out: the park compares the whole word, so it must differ. With a
 * generation that was one flipped bit, the word came back to what the
 * awaiter saw, and it slept through both (here until the deadline; with
 * SEREX_FOREVER, for ever).
 */
static void life_two_bumps_are_not_undone(void **state)
{
    struct fixture *f = *state;
    uint64_t seen;

    serex__life_hold(&f->life);
    /* an awaiter counts itself and looks */
    atomic_fetch_add(&f->life.word, SEREX__LIFE_WAITER);
    seen = atomic_load(&f->life.word);
    serex__life_notify(&f->life); /* two ends of work meanwhile */
    serex__life_notify(&f->life);
    assert_true(atomic_load(&f->life.word) != seen);
    assert_int_equal(serex__park_wait64(&f->life.word, seen,
                                        test_now_ns() + 2 * SEC),
                     SEREX_OK);
    /* the bumps touched neither the holders nor the waiters */
    assert_int_equal(serex__life_holders(&f->life), 1);
    assert_int_equal(atomic_load(&f->life.word) >> SEREX__LIFE_WAITER_SHIFT &
                         SEREX__LIFE_WAITERS_MAX,
                     1);
}

/* The generation wraps out of the top of the word, into nothing else. */
static void life_generation_wraps_into_no_other_field(void **state)
{
    struct fixture *f = *state;

    serex__life_hold(&f->life);
    atomic_fetch_add(&f->life.word, SEREX__LIFE_WAITER);
    for (int i = 0; i < 70000; i++) /* past 2^16 bumps */
        serex__life_bump(&f->life);
    assert_int_equal(serex__life_holders(&f->life), 1);
    assert_int_equal(atomic_load(&f->life.word) >> SEREX__LIFE_WAITER_SHIFT &
                         SEREX__LIFE_WAITERS_MAX,
                     1);
    assert_false(atomic_load(&f->life.word) & SEREX__LIFE_DETACHED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(life_last_holder_after_detach_frees),
        T(life_detach_with_no_holder_frees_at_once),
        T(life_entry_close_is_seen_and_quiesce_waits_for_none),
        T(life_two_bumps_are_not_undone),
        T(life_generation_wraps_into_no_other_field),
#undef T
    };

    return cmocka_run_group_tests_name("life", tests, NULL, NULL);
}
