/* SPDX-License-Identifier: MIT */
/*
 * test_wheel.c - the timing wheel against a naive model (an array of
 * pending timers), with serex__wheel_check after every step, as timeout.c
 * checks its wheel: random adds (delays from 0 to far past one turn of the
 * top level), deletes and advances (by one key, a few, a whole turn, huge
 * jumps), for several wheel sizes and ticks of 1 and of 7 keys (keys
 * inside a tick must still come out exactly when reached, never early).
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>

#include "wheel_internal.h"

#define NT 512

struct fixture {
    struct serex__wheel w;
    struct serex__wtimer t[NT];
    bool pending[NT];       /* the model: which timers are in the wheel */
    int64_t expires[NT];
    uint64_t added[NT];     /* add order, for ties */
    uint64_t next_add;
    uint64_t x;             /* the LCG of WORKLOADS.md */
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    f->x = 42;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    serex__wheel_fini(&f->w);
    free(f);
    return 0;
}

static uint64_t rnd(struct fixture *f)
{
    f->x = f->x * UINT64_C(6364136223846793005) +
           UINT64_C(1442695040888963407);
    return f->x >> 33;
}

static size_t index_of(struct fixture *f, struct serex__wtimer *t)
{
    return (size_t)(t - f->t);
}

/* A delay spread over every scale: 0, small, one turn, many turns, huge. */
static int64_t random_delay(struct fixture *f)
{
    switch (rnd(f) % 6) {
    case 0: return 0;
    case 1: return rnd(f) % 8;
    case 2: return rnd(f) % 1024;
    case 3: return rnd(f) % (1u << 20);
    case 4: return (rnd(f) << 20) % (UINT64_C(1) << 44);
    default: return (int64_t)(rnd(f) << 31 | rnd(f)); /* up to 2^62 */
    }
}

static int64_t random_step(struct fixture *f)
{
    switch (rnd(f) % 5) {
    case 0: return 1;
    case 1: return rnd(f) % 16;
    case 2: return rnd(f) % 2048;
    case 3: return rnd(f) % (1u << 22);
    default: return (int64_t)((rnd(f) << 24) % (UINT64_C(1) << 50));
    }
}

static void model_add(struct fixture *f)
{
    size_t i = rnd(f) % NT;
    int64_t d, e;

    if (f->pending[i])
        return;
    d = random_delay(f);
    /* no wrap: saturate, as the scheduler does */
    e = d > INT64_MAX - f->w.now_key ? INT64_MAX : f->w.now_key + d;
    atomic_store(&f->t[i].tag, f->next_add << SEREX__WTAG_SHIFT);
    serex__wheel_add(&f->w, &f->t[i], e);
    f->pending[i] = true;
    f->expires[i] = e;
    f->added[i] = f->next_add++;
}

static void model_del(struct fixture *f)
{
    size_t i = rnd(f) % NT;

    assert_int_equal(serex__wheel_del(&f->w, &f->t[i]), f->pending[i]);
    assert_false(serex__wtimer_pending(&f->t[i]));
    f->pending[i] = false;
}

/* The model's earliest pending expiry. */
static int64_t model_min(struct fixture *f)
{
    int64_t m = INT64_MAX;

    for (size_t i = 0; i < NT; i++)
        if (f->pending[i] && f->expires[i] < m)
            m = f->expires[i];
    return m;
}

static void model_advance(struct fixture *f)
{
    int64_t step = random_step(f), now, last_e = 0;
    uint64_t last_a = 0;
    struct serex__wtimer *t;
    size_t fired = 0, due = 0;
    bool first = true;

    now = step > INT64_MAX - f->w.now_key ? INT64_MAX : f->w.now_key + step;
    for (size_t i = 0; i < NT; i++)
        due += f->pending[i] && f->expires[i] <= now;
    for (t = serex__wheel_advance(&f->w, now); t != NULL; t = t->next) {
        size_t i = index_of(f, t);

        /* exactly the due ones, never early, in expiry then add order */
        assert_true(f->pending[i]);
        assert_true(f->expires[i] <= now);
        assert_true(first || f->expires[i] > last_e ||
                    (f->expires[i] == last_e && f->added[i] > last_a));
        assert_false(serex__wtimer_pending(t));
        last_e = f->expires[i];
        last_a = f->added[i];
        first = false;
        f->pending[i] = false;
        fired++;
    }
    assert_int_equal(fired, due);
    assert_int_equal(f->w.now_key, now);
}

static void check_next(struct fixture *f)
{
    int64_t next = serex__wheel_next(&f->w), min = model_min(f);

    /* never later than the earliest expiry (a tickless sleeper wakes in
     * time); it may be a slot's start, time to take that slot */
    assert_true(next <= min);
    if (min == INT64_MAX)
        assert_int_equal(next, INT64_MAX);
}

static void run_random(struct fixture *f, unsigned size, int64_t tick,
                       unsigned steps)
{
    assert_int_equal(serex__wheel_init(&f->w, size, tick, (int64_t)rnd(f)),
                     SEREX_OK);
    for (size_t i = 0; i < NT; i++)
        serex__wtimer_init(&f->t[i]);
    for (unsigned s = 0; s < steps; s++) {
        switch (rnd(f) % 4) {
        case 0:
        case 1: model_add(f); break;
        case 2: model_del(f); break;
        default: model_advance(f); break;
        }
        if (serex__wheel_check(&f->w, stderr) != 0)
            fail_msg("wheel invariant broken at step %u (size %u)", s, size);
        check_next(f);
    }
    /* drain it all: everything left fires by the end of time */
    while (model_min(f) != INT64_MAX) {
        int64_t target = model_min(f);

        for (struct serex__wtimer *t = serex__wheel_advance(&f->w, target);
             t != NULL; t = t->next)
            f->pending[index_of(f, t)] = false;
        assert_true(model_min(f) > target);
    }
    assert_int_equal(f->w.count, 0);
    assert_int_equal(serex__wheel_next(&f->w), INT64_MAX);
    serex__wheel_fini(&f->w);
}

static void wheel_random_against_model_size_512(void **state)
{
    run_random(*state, 512, 1, 20000);
}

static void wheel_random_against_model_coarse_ticks(void **state)
{
    run_random(*state, 512, 7, 10000);
    run_random(*state, 8, 1000, 5000);
}

static void wheel_random_against_model_small_sizes(void **state)
{
    run_random(*state, 2, 1, 5000);
    run_random(*state, 4, 1, 5000);
    run_random(*state, 64, 1, 5000);
    run_random(*state, 128, 1, 5000);
}

static void wheel_ties_fire_in_add_order(void **state)
{
    struct fixture *f = *state;
    struct serex__wtimer *t;
    size_t n = 0;

    assert_int_equal(serex__wheel_init(&f->w, 512, 1, 1000), SEREX_OK);
    for (size_t i = 0; i < 100; i++) { /* same expiry, across levels */
        serex__wtimer_init(&f->t[i]);
        atomic_store(&f->t[i].tag, (uint64_t)i << SEREX__WTAG_SHIFT | 5);
        serex__wheel_add(&f->w, &f->t[i], 1000 + 5000);
        if (i % 10 == 9) /* later adds land on lower levels */
            assert_null(serex__wheel_advance(&f->w, 1000 + 500 * (i / 10)));
    }
    assert_null(serex__wheel_advance(&f->w, 5999));
    for (t = serex__wheel_advance(&f->w, 6000); t != NULL; t = t->next)
        assert_int_equal(index_of(f, t), n++);
    assert_int_equal(n, 100);
}

/* Within one coarse tick: once the tick has come, next() names each exact
 * key in turn (the sorted due list's head), each advance hands out exactly
 * the timers of that key, and adds for the current tick (the incoming
 * list) and cancels in the middle keep the order. */
static void wheel_within_a_tick_exact_keys(void **state)
{
    struct fixture *f = *state;
    int64_t base = 1024 * 5, keys[64];
    size_t fired = 0;

    assert_int_equal(serex__wheel_init(&f->w, 64, 1024, 0), SEREX_OK);
    for (size_t i = 0; i < 64; i++) {
        keys[i] = base + 15 + (int64_t)((i * 37) % 64) * 15; /* shuffled */
        serex__wtimer_init(&f->t[i]);
        atomic_store(&f->t[i].tag, (uint64_t)i << SEREX__WTAG_SHIFT);
        if (i < 48) /* the rest join in the tick, on the incoming list */
            serex__wheel_add(&f->w, &f->t[i], keys[i]);
    }
    /* the tick comes: its slot goes onto the due list, sorted */
    assert_true(serex__wheel_next(&f->w) <= base + 15);
    assert_null(serex__wheel_advance(&f->w, base));
    for (size_t i = 48; i < 64; i++)
        serex__wheel_add(&f->w, &f->t[i], keys[i]);
    assert_true(serex__wheel_del(&f->w, &f->t[40]));
    for (int64_t expect = base + 15; expect < base + 15 + 64 * 15;
         expect += 15) {
        int64_t next = serex__wheel_next(&f->w);
        struct serex__wtimer *t;

        if (expect == keys[40])
            continue; /* cancelled */
        assert_int_equal(next, expect);
        t = serex__wheel_advance(&f->w, next);
        assert_non_null(t);
        assert_int_equal(t->key, expect);
        assert_null(t->next);
        fired++;
        assert_int_equal(serex__wheel_check(&f->w, stderr), 0);
    }
    assert_int_equal(fired, 63);
    assert_int_equal(serex__wheel_next(&f->w), INT64_MAX);
    serex__wheel_fini(&f->w);
}

/* Timers on level @level (slots only). */
static size_t level_population(const struct serex__wheel *w, unsigned level)
{
    size_t n = 0;

    for (uint64_t slot = 0; slot <= w->mask; slot++)
        for (const struct serex__wtimer *t =
                 w->slots[(size_t)level * (w->mask + 1) + slot];
             t != NULL; t = t->next)
            n++;
    return n;
}

/* Staged cascading: a unit's timers move down a share per advance, never
 * all at once when the unit begins (a classic wheel re-files the whole
 * slot in that one advance: here 6,000 timers). */
static void wheel_units_move_down_in_shares(void **state)
{
    enum { N = 12000, SIZE = 64 };
    struct fixture *f = *state;
    struct serex__wtimer *t, *ts = calloc(N, sizeof *ts);
    size_t fired = 0, before = N;
    int64_t last = -1;

    assert_non_null(ts);
    assert_int_equal(serex__wheel_init(&f->w, SIZE, 1, 0), SEREX_OK);
    for (size_t i = 0; i < N; i++) { /* units 2 and 3 of level 1 */
        serex__wtimer_init(&ts[i]);
        atomic_store(&ts[i].tag, (uint64_t)i << SEREX__WTAG_SHIFT);
        serex__wheel_add(&f->w, &ts[i],
                         2 * SIZE + (int64_t)((i * 7919) % (2 * SIZE)));
    }
    assert_int_equal(level_population(&f->w, 1), N);
    for (int64_t now = 1; now < 4 * SIZE; now++) {
        size_t out = 0, after;

        for (t = serex__wheel_advance(&f->w, now); t != NULL; t = t->next) {
            assert_true(t->key <= now && t->key >= last);
            last = t->key;
            out++;
        }
        fired += out;
        after = level_population(&f->w, 1);
        /* what left level 1 in this advance: one share, not a unit */
        assert_true(before - after <= 256 + 2 * out);
        before = after;
        assert_int_equal(serex__wheel_check(&f->w, stderr), 0);
    }
    assert_int_equal(fired, N);
    serex__wheel_fini(&f->w);
    free(ts);
}

static void wheel_bad_size_is_einval(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(serex__wheel_init(&f->w, 0, 1, 0), SEREX_EINVAL);
    assert_int_equal(serex__wheel_init(&f->w, 1, 1, 0), SEREX_EINVAL);
    assert_int_equal(serex__wheel_init(&f->w, 500, 1, 0), SEREX_EINVAL);
    assert_int_equal(serex__wheel_init(&f->w, 1u << 17, 1, 0), SEREX_EINVAL);
    assert_int_equal(serex__wheel_init(&f->w, 512, 0, 0), SEREX_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(wheel_random_against_model_size_512),
        T(wheel_random_against_model_coarse_ticks),
        T(wheel_random_against_model_small_sizes),
        T(wheel_ties_fire_in_add_order),
        T(wheel_within_a_tick_exact_keys),
        T(wheel_units_move_down_in_shares),
        T(wheel_bad_size_is_einval),
#undef T
    };

    return cmocka_run_group_tests_name("wheel", tests, NULL, NULL);
}
