/* SPDX-License-Identifier: MIT */
/*
 * test_striped.c - the striped executor: per-key order, different keys in
 * parallel, lanes made on first use and freed when idle (a million keys
 * leave none), the keyless executor face, shutdown and shutdown_now over
 * every lane, EDEADLK, futures, bad input and allocation failure.
 *
 * Order, batching and hand-back are shown on the manual executor, where
 * the lane count is exact between runs; parallelism, happens-before and
 * the million keys on a pool. Every cross-thread wait is bounded.
 */
#include "test_util.h"

#include <stdlib.h> /* calloc, free */

#include "nodecache_internal.h" /* serex__cache_trim */
#include "striped_internal.h"
#include "test_user_executor.h"

#define NI 1000
#define NKEYS 5
#define PER_KEY 10

/* Producers x keys x tasks of the multi-producer order test. */
#define MP_PRODUCERS 4
_Static_assert(MP_PRODUCERS <= TEST_ORDER_PRODUCERS, "test_order size");
#define MP_KEYS 8
#define MP_PER 500

/*
 * The million distinct keys. ThreadSanitizer makes each execute and each
 * task several times slower (shadow memory for every lane and node): a
 * million keys took about 5 s there on a 2-core machine, so under it the
 * test uses a tenth of the keys to stay within a few seconds; the lane
 * life cycle it checks is the same per key.
 */
#if defined(__SANITIZE_THREAD__)
#  define MANY_KEYS 100000
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define MANY_KEYS 100000
#  endif
#endif
#ifndef MANY_KEYS
#  define MANY_KEYS 1000000
#endif

struct fixture;

/* A task's argument: the fixture to log into, its key and its sequence. */
struct item {
    struct fixture *f;
    uint64_t key;
    size_t seq;
};

/* Plain per-key state of the multi-producer test: only the key's order
 * protects it, so TSan reports a missing happens-before. */
struct mp_item {
    struct test_order *ks;
    unsigned producer;
    size_t seq;
};

struct mp_producer {
    serex_striped *st;
    const uint64_t *keys;
    struct mp_item *items; /* [key][seq] for this producer */
    serex__thread thread;
    long failed;
};

struct trap;

struct fixture {
    serex_executor *manual; /* made in setup */
    struct trap *trap;      /* a misbehaving target (trap_new), if any */
    serex_executor *pool;   /* made by the tests that need one */
    serex_striped *st;      /* destroyed before the targets */
    serex_event *done;
    _Atomic long ran;       /* count_task runs */
    _Atomic long target;    /* ran at which count_task signals done */
    atomic_int calls;       /* count_call runs */
    struct item items[NI];
    const struct item *log[NI]; /* written by log_task, in run order */
    size_t nlog;
    struct test_order ks[MP_KEYS];
    struct test_pending pending;
    serex_fn pending_fns[NI];
    void *pending_args[NI];
};

/* --- tasks --- */

static void log_task(void *arg)
{
    struct item *it = arg;

    it->f->log[it->f->nlog++] = it;
}

static void count_task(void *arg)
{
    struct fixture *f = arg;

    /* relaxed: the done event (or await) orders what the test reads */
    if (atomic_fetch_add_explicit(&f->ran, 1, memory_order_relaxed) + 1 ==
        atomic_load_explicit(&f->target, memory_order_relaxed))
        serex_event_signal(f->done);
}

static void *count_call(void *arg)
{
    struct item *it = arg;

    atomic_fetch_add(&it->f->calls, 1);
    log_task(it);
    return it;
}

/* As count_call, without the log: for keys that run in parallel. */
static void *value_call(void *arg)
{
    struct item *it = arg;

    atomic_fetch_add(&it->f->calls, 1);
    return it;
}

static void mp_task(void *arg)
{
    struct mp_item *it = arg;

    test_order_see(it->ks, it->producer, it->seq);
}

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_event_create(&f->done), SEREX_OK);
    for (size_t i = 0; i < NI; i++)
        f->items[i] = (struct item){f, 0, i};
    f->pending.cap = NI;
    f->pending.fns = f->pending_fns;
    f->pending.args = f->pending_args;
    *state = f;
    return 0;
}

static size_t trap_run_all(struct trap *t);

static int teardown(void **state)
{
    struct fixture *f = *state;

    serex__alloc_fail_nth(0);
    /* lane drains still queued run first, so destroy waits on nothing */
    if (f->manual != NULL)
        test_run_all(f->manual);
    if (f->trap != NULL && f->st != NULL) /* a trap test failed a check */
        serex_shutdown_now(serex_striped_executor(f->st), NULL, NULL);
    if (f->st != NULL)
        assert_int_equal(serex_destroy(serex_striped_executor(f->st)),
                         SEREX_OK);
    if (f->trap != NULL) /* drains left there find nothing, free lanes */
        trap_run_all(f->trap);
    if (f->manual != NULL)
        assert_int_equal(serex_destroy(f->manual), SEREX_OK);
    if (f->pool != NULL)
        assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    free(f->trap);
    serex_event_destroy(f->done);
    free(f);
    return 0;
}

static serex_striped *make_striped(struct fixture *f, serex_executor *target,
                                   unsigned batch)
{
    serex_serial_config cfg = {.batch = batch};

    assert_int_equal(serex_striped_create(target, batch ? &cfg : NULL,
                                          &f->st),
                     SEREX_OK);
    assert_non_null(f->st);
    return f->st;
}

static void make_pool(struct fixture *f, unsigned threads)
{
    serex_pool_config cfg = {.threads = threads, .name = "test-striped"};

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
}

/* relaxed: tasks read it relaxed too (see count_task) */
static void set_target(struct fixture *f, long target)
{
    atomic_store_explicit(&f->target, target, memory_order_relaxed);
}

/* Queues NKEYS x PER_KEY tasks, keys interleaved: items[k * PER_KEY + i]
 * is the i-th task of key k. */
static void queue_interleaved(struct fixture *f, serex_fn fn)
{
    for (size_t i = 0; i < PER_KEY; i++)
        for (uint64_t k = 0; k < NKEYS; k++) {
            struct item *it = &f->items[k * PER_KEY + i];

            it->key = k;
            assert_int_equal(serex_striped_execute(f->st, k, fn, it),
                             SEREX_OK);
        }
}

/* Shuts the striped down and waits: afterwards no lane may be left. */
static void shutdown_and_await(struct fixture *f)
{
    serex_executor *ex = serex_striped_executor(f->st);

    serex_shutdown(ex);
    assert_int_equal(serex_await_termination(ex, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_striped_lanes(f->st), 0);
}

/* --- order, lanes and batching, on the manual executor --- */

static void striped_same_key_runs_in_order(void **state)
{
    struct fixture *f = *state;
    size_t next[NKEYS] = {0};

    make_striped(f, f->manual, 0);
    queue_interleaved(f, log_task);
    assert_int_equal(f->nlog, 0); /* nothing runs until the target does */
    test_run_all(f->manual);
    assert_int_equal(f->nlog, NKEYS * PER_KEY);
    for (size_t i = 0; i < f->nlog; i++)
        assert_int_equal(f->log[i]->seq % PER_KEY, next[f->log[i]->key]++);
    for (size_t k = 0; k < NKEYS; k++)
        assert_int_equal(next[k], PER_KEY);
}

static void striped_lanes_count_live_keys_and_free_when_idle(void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 0);

    assert_int_equal(serex_striped_lanes(s), 0);
    assert_int_equal(serex_striped_execute(s, 7, log_task, &f->items[0]),
                     SEREX_OK);
    assert_int_equal(serex_striped_execute(s, 7, log_task, &f->items[1]),
                     SEREX_OK);
    assert_int_equal(serex_striped_execute(s, 8, log_task, &f->items[2]),
                     SEREX_OK);
    assert_int_equal(serex_striped_lanes(s), 2); /* one per key */
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 3);
    assert_int_equal(serex_striped_lanes(s), 0);
    /* a freed lane is made again on the key's next use */
    assert_int_equal(serex_striped_execute(s, 7, log_task, &f->items[3]),
                     SEREX_OK);
    assert_int_equal(serex_striped_lanes(s), 1);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 4);
    assert_ptr_equal(f->log[3], &f->items[3]);
    assert_int_equal(serex_striped_lanes(s), 0);
}

static void striped_distinct_keys_never_share_a_lane(void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 0);
    /* keys a hash or a modulus is likely to send to the same place */
    const uint64_t keys[] = {0,
                             1,
                             64,
                             256,
                             1024,
                             65536,
                             UINT64_C(1) << 32,
                             (UINT64_C(1) << 32) + 1,
                             UINT64_C(1) << 63,
                             UINT64_MAX,
                             UINT64_MAX - 1,
                             UINT64_C(0xffffffff)};
    const size_t nk = sizeof keys / sizeof keys[0];

    for (size_t i = 0; i < nk; i++) {
        f->items[i].key = keys[i];
        assert_int_equal(
            serex_striped_execute(s, keys[i], log_task, &f->items[i]),
            SEREX_OK);
    }
    assert_int_equal(serex_striped_lanes(s), nk);
    /* one drain per lane on the target */
    for (size_t i = 1; i <= nk; i++) {
        assert_true(serex_manual_run_one(f->manual));
        assert_int_equal(f->nlog, i);
        assert_int_equal(f->log[i - 1]->key, keys[i - 1]);
    }
    assert_false(serex_manual_run_one(f->manual));
    assert_int_equal(serex_striped_lanes(s), 0);
}

static void striped_lane_drain_runs_at_most_batch_and_lanes_interleave(
    void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 4);
    /* key 1's tasks are items 0..9, key 2's are items 10..19 */
    const size_t expect[] = {0,  1,  2,  3,  10, 11, 12, 13, 4,  5,
                             6,  7,  14, 15, 16, 17, 8,  9,  18, 19};

    for (size_t i = 0; i < 10; i++)
        assert_int_equal(serex_striped_execute(s, 1, log_task, &f->items[i]),
                         SEREX_OK);
    for (size_t i = 10; i < 20; i++)
        assert_int_equal(serex_striped_execute(s, 2, log_task, &f->items[i]),
                         SEREX_OK);
    for (size_t run = 1; run <= 4; run++) {
        assert_true(serex_manual_run_one(f->manual));
        assert_int_equal(f->nlog, 4 * run);
    }
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 20);
    for (size_t i = 0; i < 20; i++)
        assert_ptr_equal(f->log[i], &f->items[expect[i]]);
    assert_int_equal(serex_striped_lanes(s), 0);
}

/* A task that queues its successor on its own key while it runs. */
struct chain {
    serex_striped *st;
    uint64_t key;
    struct item *items;
    size_t left;
};

static void chain_task(void *arg)
{
    struct chain *c = arg;

    log_task(&c->items[0]);
    c->items++;
    if (--c->left > 0)
        assert_int_equal(serex_striped_execute(c->st, c->key, chain_task, c),
                         SEREX_OK);
}

static void striped_task_requeuing_its_key_keeps_the_lane(void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 4);
    struct chain c = {s, 9, &f->items[0], 10};

    assert_int_equal(serex_striped_execute(s, 9, chain_task, &c), SEREX_OK);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, 4);
    assert_int_equal(serex_striped_lanes(s), 1);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 10);
    for (size_t i = 0; i < 10; i++)
        assert_ptr_equal(f->log[i], &f->items[i]);
    assert_int_equal(serex_striped_lanes(s), 0);
}

static void striped_many_keys_on_manual_free_every_lane(void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 0);
    const long n = 100000;

    for (long k = 0; k < n; k++)
        assert_int_equal(serex_striped_execute(s, (uint64_t)k * 7919u,
                                               count_task, f),
                         SEREX_OK);
    assert_int_equal(serex_striped_lanes(s), (size_t)n);
    assert_int_equal(test_run_all(f->manual), (size_t)n);
    assert_int_equal(atomic_load(&f->ran), n);
    assert_int_equal(serex_striped_lanes(s), 0);
}

/*
 * The lane map under churn: lanes made and freed in a random mix, enough
 * keys that every shard's table grows past its floor and then shrinks
 * back (see shard_resize in striped.c: growth at a load of 2 from 256
 * buckets needs over 512 lanes in each of the 256 shards). Every few
 * steps the lanes alive are exactly the keys with tasks left (a lookup
 * that missed a key's lane, or a rehash that lost one, would make it a
 * second lane); each key's tasks run in order; every lane is freed.
 */
#define CHURN_KEYS (1u << 20)

struct churn {
    uint32_t next_run[CHURN_KEYS]; /* the sequence each key runs next */
    uint32_t queued[CHURN_KEYS];   /* accepted, not run */
    uint32_t submitted[CHURN_KEYS];
    size_t busy; /* keys with queued != 0 */
    long errors;
};

struct churn_item {
    struct churn *c;
    uint32_t key, seq;
};

static void churn_task(void *arg)
{
    struct churn_item *it = arg;
    struct churn *c = it->c;

    if (c->next_run[it->key] != it->seq)
        c->errors++;
    c->next_run[it->key] = it->seq + 1;
    if (--c->queued[it->key] == 0)
        c->busy--;
    free(it);
}

static void churn_submit(serex_striped *s, struct churn *c, uint32_t k)
{
    struct churn_item *it = malloc(sizeof *it);

    assert_non_null(it);
    *it = (struct churn_item){c, k, c->submitted[k]};
    /* spread over the shards and buckets as a user's keys would be */
    assert_int_equal(
        serex_striped_execute(s, (uint64_t)k * 40503u, churn_task, it),
        SEREX_OK);
    c->submitted[k]++;
    if (c->queued[k]++ == 0)
        c->busy++;
}

static void striped_lane_map_survives_churn(void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 2);
    struct churn *c = calloc(1, sizeof *c);
    uint64_t x = 99;
    size_t peak = 0;

    assert_non_null(c);
    for (long step = 0; step < 1600000; step++) {
        /* submit-heavy for the first half (the tables grow), run-heavy
         * after (they shrink) */
        unsigned submit_pct = step < 800000 ? 95 : 10;

        x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        if ((x >> 33) % 100 < submit_pct)
            churn_submit(s, c, (uint32_t)((x >> 13) % CHURN_KEYS));
        else
            (void)serex_manual_run_one(f->manual);
        if (step % 1024 == 0) {
            assert_int_equal(serex_striped_lanes(s), c->busy);
            peak = c->busy > peak ? c->busy : peak;
        }
    }
    /* the tables did grow past their floor (256 shards x 2 x 256) */
    assert_true(peak > 2 * 256 * 256 + 256 * 64);
    test_run_all(f->manual);
    assert_int_equal(c->errors, 0);
    assert_int_equal(c->busy, 0);
    assert_int_equal(serex_striped_lanes(s), 0);
    for (uint32_t k = 0; k < CHURN_KEYS; k++)
        assert_int_equal(c->next_run[k], c->submitted[k]);
    free(c);
}

static void striped_keyless_execute_bypasses_the_lanes(void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 0);
    serex_executor *ex = serex_striped_executor(s);

    assert_non_null(ex);
    assert_ptr_equal(serex_striped_executor(s), ex);
    assert_int_equal(serex_execute(ex, log_task, &f->items[0]), SEREX_OK);
    assert_int_equal(serex_striped_lanes(s), 0);
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, 1);
    assert_ptr_equal(f->log[0], &f->items[0]);
    assert_false(serex_manual_run_one(f->manual));
    assert_int_equal(serex_execute(ex, NULL, f), SEREX_EINVAL);
}

static void striped_keyless_execute_runs_on_pool(void **state)
{
    struct fixture *f = *state;
    serex_executor *ex;

    make_pool(f, 2);
    ex = serex_striped_executor(make_striped(f, f->pool, 0));
    set_target(f, 100);
    for (int i = 0; i < 100; i++)
        assert_int_equal(serex_execute(ex, count_task, f), SEREX_OK);
    assert_signalled(f->done);
    shutdown_and_await(f);
    assert_int_equal(atomic_load(&f->ran), 100);
}

/* --- shutdown, shutdown_now, await --- */

static void striped_shutdown_rejects_keyed_and_keyless_and_runs_accepted(
    void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 0);
    serex_executor *ex = serex_striped_executor(s);
    serex_future *fu = (serex_future *)f;

    queue_interleaved(f, log_task);
    serex_shutdown(ex);
    serex_shutdown(ex); /* idempotent */
    assert_int_equal(serex_striped_execute(s, 0, never_task, f),
                     SEREX_EREJECTED);
    assert_int_equal(serex_striped_execute(s, 999, never_task, f),
                     SEREX_EREJECTED);
    assert_int_equal(serex_execute(ex, never_task, f), SEREX_EREJECTED);
    assert_int_equal(serex_striped_submit(s, 1, count_call, &f->items[0], &fu),
                     SEREX_EREJECTED);
    assert_null(fu);
    assert_int_equal(serex_striped_lanes(s), NKEYS); /* no lane for 999 */
    assert_int_equal(serex_await_termination(ex, 0), SEREX_ETIMEDOUT);
    /* the target is not shut down: only the striped is */
    assert_int_equal(serex_execute(f->manual, count_task, f), SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, NKEYS * PER_KEY);
    assert_int_equal(atomic_load(&f->ran), 1);
    assert_int_equal(serex_await_termination(ex, 0), SEREX_OK);
    assert_int_equal(serex_striped_lanes(s), 0);
}

static void striped_shutdown_now_hands_back_every_lane_in_order(void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 4);
    size_t next[NKEYS] = {0}, handed;

    queue_interleaved(f, log_task);
    /* the lanes of keys 0 and 1 run a batch each */
    assert_true(serex_manual_run_one(f->manual));
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(f->nlog, 8);
    for (size_t i = 0; i < f->nlog; i++)
        assert_int_equal(f->log[i]->seq % PER_KEY, next[f->log[i]->key]++);
    assert_int_equal(next[0], 4);
    assert_int_equal(next[1], 4);
    handed = serex_shutdown_now(serex_striped_executor(s), test_pending_cb,
                                &f->pending);
    assert_int_equal(handed, NKEYS * PER_KEY - 8);
    assert_int_equal(f->pending.n, handed);
    /* every lane's rest, each lane in its own order */
    for (size_t i = 0; i < f->pending.n; i++) {
        const struct item *it = f->pending.args[i];

        assert_ptr_equal(f->pending.fns[i], log_task);
        assert_int_equal(it->seq % PER_KEY, next[it->key]++);
    }
    /* ran + handed back == accepted, for every key */
    for (size_t k = 0; k < NKEYS; k++)
        assert_int_equal(next[k], PER_KEY);
    assert_int_equal(serex_striped_execute(s, 0, never_task, f),
                     SEREX_EREJECTED);
    assert_int_equal(serex_shutdown_now(serex_striped_executor(s),
                                        test_pending_cb, &f->pending),
                     0);
    /* the drains left on the target find nothing to run */
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 8);
    assert_int_equal(
        serex_await_termination(serex_striped_executor(s), TEST_TIMEOUT),
        SEREX_OK);
    assert_int_equal(serex_striped_lanes(s), 0);
}

static void striped_shutdown_now_cancels_lane_futures(void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 0);
    serex_future *f0 = NULL, *f1 = NULL;

    assert_int_equal(serex_striped_submit(s, 3, count_call, &f->items[0], &f0),
                     SEREX_OK);
    assert_int_equal(serex_striped_execute(s, 3, never_task, &f->items[1]),
                     SEREX_OK);
    assert_int_equal(serex_striped_submit(s, 4, count_call, &f->items[2], &f1),
                     SEREX_OK);
    assert_int_equal(serex_shutdown_now(serex_striped_executor(s),
                                        test_pending_cb, &f->pending),
                     3);
    assert_int_equal(f->pending.n, 1);
    assert_ptr_equal(f->pending.args[0], &f->items[1]);
    assert_int_equal(serex_future_wait(f0, 0), SEREX_ECANCELED);
    assert_int_equal(serex_future_wait(f1, 0), SEREX_ECANCELED);
    test_run_all(f->manual);
    assert_int_equal(atomic_load(&f->calls), 0);
    serex_future_release(f0);
    serex_future_release(f1);
}

static void striped_await_after_shutdown_now_does_not_wait_for_the_target(
    void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 0);
    serex_executor *ex = serex_striped_executor(s);

    /*
     * shutdown_now took back every accepted task: none is left to wait
     * for, so await says OK and destroy returns, even though the target
     * has not run the lanes' (now empty) drains yet. Otherwise destroy
     * would hang on a manual executor nobody runs any more.
     */
    assert_int_equal(serex_striped_execute(s, 1, never_task, f), SEREX_OK);
    assert_int_equal(serex_striped_execute(s, 2, never_task, f), SEREX_OK);
    assert_int_equal(serex_shutdown_now(ex, NULL, NULL), 2);
    assert_int_equal(serex_await_termination(ex, 0), SEREX_OK);
    assert_int_equal(serex_destroy(ex), SEREX_OK);
    f->st = NULL;
    /* the target runs the stale drains later: they must be harmless */
    test_run_all(f->manual);
}

static void striped_shutdown_now_leaves_no_lane_alive(void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 0);
    serex_executor *ex = serex_striped_executor(s);

    /* lanes counts keys with queued or running tasks (striped.h): after
     * shutdown_now took every task back there are none, whether or not
     * the target has run the lanes' empty drains yet */
    assert_int_equal(serex_striped_execute(s, 1, never_task, f), SEREX_OK);
    assert_int_equal(serex_striped_execute(s, 2, never_task, f), SEREX_OK);
    assert_int_equal(serex_striped_lanes(s), 2);
    assert_int_equal(serex_shutdown_now(ex, NULL, NULL), 2);
    assert_int_equal(serex_await_termination(ex, 0), SEREX_OK);
    assert_int_equal(serex_striped_lanes(s), 0);
}

static void striped_await_times_out_until_shut_down_and_drained(void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 0);
    serex_executor *ex = serex_striped_executor(s);

    assert_int_equal(serex_await_termination(ex, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_await_termination(ex, MS), SEREX_ETIMEDOUT);
    assert_int_equal(serex_striped_execute(s, 1, log_task, &f->items[0]),
                     SEREX_OK);
    serex_shutdown(ex);
    assert_int_equal(serex_await_termination(ex, 0), SEREX_ETIMEDOUT);
    test_run_all(f->manual);
    assert_int_equal(serex_await_termination(ex, 0), SEREX_OK);
    assert_int_equal(serex_await_termination(ex, SEREX_FOREVER), SEREX_OK);
    assert_int_equal(serex_await_termination(ex, -2), SEREX_EINVAL);
}

static void striped_destroy_waits_for_lane_tasks(void **state)
{
    struct fixture *f = *state;
    serex_striped *s;

    make_pool(f, 2);
    s = make_striped(f, f->pool, 0);
    for (size_t i = 0; i < NI; i++)
        assert_int_equal(serex_striped_execute(s, i % 7, count_task, f),
                         SEREX_OK);
    assert_int_equal(serex_destroy(serex_striped_executor(s)), SEREX_OK);
    f->st = NULL;
    assert_int_equal(atomic_load(&f->ran), NI);
}

/* --- the target refuses --- */

static void striped_target_rejecting_a_new_lane_is_reported(void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 0);
    serex_future *fu = (serex_future *)f;

    serex_shutdown(f->manual);
    /* what the target said; nothing queued, no lane left */
    assert_int_equal(serex_striped_execute(s, 1, never_task, f),
                     SEREX_EREJECTED);
    assert_int_equal(serex_striped_submit(s, 2, count_call, &f->items[0], &fu),
                     SEREX_EREJECTED);
    assert_null(fu);
    assert_int_equal(serex_striped_lanes(s), 0);
    assert_false(serex_manual_run_one(f->manual));
    assert_int_equal(serex_shutdown_now(serex_striped_executor(s), NULL, NULL),
                     0);
    assert_int_equal(serex_await_termination(serex_striped_executor(s), 0),
                     SEREX_OK);
}

/* A task that holds its worker until released. */
struct blocker {
    serex_event *started;
    serex_event *release;
};

static void block_task(void *arg)
{
    struct blocker *b = arg;

    serex_event_signal(b->started);
    (void)serex_event_wait(b->release, TEST_TIMEOUT);
}

static void striped_target_full_is_reported_and_striped_still_works(
    void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {.threads = 1, .queue_capacity = 1};
    struct blocker b;
    serex_striped *s;

    assert_int_equal(serex_event_create(&b.started), SEREX_OK);
    assert_int_equal(serex_event_create(&b.release), SEREX_OK);
    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    s = make_striped(f, f->pool, 0);
    assert_int_equal(serex_execute(f->pool, block_task, &b), SEREX_OK);
    assert_signalled(b.started);
    set_target(f, 1);
    assert_int_equal(serex_execute(f->pool, count_task, f), SEREX_OK);
    /* the pool's queue is full: the new lane's drain is refused, and the
     * refusal is what execute says (striped.h): nothing queued */
    assert_int_equal(serex_striped_execute(s, 1, never_task, f), SEREX_EFULL);
    assert_int_equal(serex_striped_lanes(s), 0);
    serex_event_signal(b.release);
    assert_signalled(f->done); /* the queue has room again */
    /* a passing refusal does not stop the striped */
    set_target(f, 2);
    assert_int_equal(serex_striped_execute(s, 1, count_task, f), SEREX_OK);
    assert_signalled(f->done);
    shutdown_and_await(f);
    assert_int_equal(atomic_load(&f->ran), 2);
    serex_event_destroy(b.started);
    serex_event_destroy(b.release);
}

static void striped_target_rejecting_a_resubmission_loses_nothing(
    void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 2);
    size_t handed;

    for (size_t i = 0; i < 10; i++)
        assert_int_equal(serex_striped_execute(s, 5, log_task, &f->items[i]),
                         SEREX_OK);
    serex_shutdown(f->manual); /* the queued drain still runs */
    test_run_all(f->manual);
    handed = serex_shutdown_now(serex_striped_executor(s), test_pending_cb,
                                &f->pending);
    /* promise 1: every accepted task ran or came back, in order */
    assert_int_equal(f->nlog + handed, 10);
    for (size_t i = 0; i < f->nlog; i++)
        assert_ptr_equal(f->log[i], &f->items[i]);
    for (size_t i = 0; i < handed; i++)
        assert_ptr_equal(f->pending.args[i], &f->items[f->nlog + i]);
    assert_int_equal(serex_await_termination(serex_striped_executor(s), 0),
                     SEREX_OK);
    assert_int_equal(serex_striped_lanes(s), 0);
}

/* --- a target that misbehaves once, at the worst moment --- */

/*
 * A target whose next execute, when armed, does what another thread
 * could do in the window between a new lane's first push and its drain's
 * submission (a shutdown_now of the striped, a second producer of the same
 * key), forced here so that the window is hit every time, and then
 * refuses with @refuse_with. Otherwise it queues on its own FIFO, run by
 * hand (test_user_run_one), or forwards to @inner when that is set (a
 * pool: its workers call execute too, hence the atomics).
 */
enum trap_action { TRAP_NONE, TRAP_SHUTDOWN_NOW, TRAP_QUEUE_BEHIND };

struct trap {
    struct test_user u; /* first: test_user_of casts the base to it */
    serex_executor *inner;
    struct fixture *f;
    _Atomic int action; /* enum trap_action: the next execute's */
    int refuse_with;    /* what that execute then says */
    /* TRAP_QUEUE_BEHIND: the second producer's task */
    uint64_t behind_key;
    serex_fn behind_fn;
    void *behind_arg;
    serex_call_fn behind_call;    /* set: submit this, not execute */
    serex_future **behind_future; /* ... its future */
    int behind_rc;
    size_t handed;       /* TRAP_SHUTDOWN_NOW: what it handed back */
    _Atomic int refused; /* executes refused by the trap */
};

static struct trap *trap_of(serex_executor *ex)
{
    return (struct trap *)(void *)ex;
}

static int trap_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct trap *t = trap_of(ex);
    int action = atomic_exchange(&t->action, TRAP_NONE);

    if (action == TRAP_SHUTDOWN_NOW) {
        t->handed = serex_shutdown_now(serex_striped_executor(t->f->st),
                                       test_pending_cb, &t->f->pending);
    } else if (action == TRAP_QUEUE_BEHIND) {
        t->behind_rc = t->behind_call != NULL
                           ? serex_striped_submit(t->f->st, t->behind_key,
                                                  t->behind_call, t->behind_arg,
                                                  t->behind_future)
                           : serex_striped_execute(t->f->st, t->behind_key,
                                                   t->behind_fn, t->behind_arg);
    }
    if (action != TRAP_NONE) {
        atomic_fetch_add(&t->refused, 1);
        return t->refuse_with;
    }
    if (t->inner != NULL)
        return serex_execute(t->inner, fn, arg);
    return test_user_execute(ex, fn, arg);
}

static void trap_shutdown(serex_executor *ex)
{
    if (trap_of(ex)->inner != NULL)
        serex_shutdown(trap_of(ex)->inner);
    else
        test_user_shutdown(ex);
}

static size_t trap_shutdown_now(serex_executor *ex, serex_pending_fn on_pending,
                                void *ctx)
{
    if (trap_of(ex)->inner != NULL)
        return serex_shutdown_now(trap_of(ex)->inner, on_pending, ctx);
    return test_user_shutdown_now(ex, on_pending, ctx);
}

static int trap_await(serex_executor *ex, int64_t timeout_ns)
{
    if (trap_of(ex)->inner != NULL)
        return serex_await_termination(trap_of(ex)->inner, timeout_ns);
    return test_user_await(ex, timeout_ns);
}

static void trap_destroy(serex_executor *ex)
{
    if (trap_of(ex)->inner == NULL)
        test_user_destroy(ex); /* the test destroys the inner one */
}

static const serex_executor_ops trap_ops = {
    .execute = trap_execute,
    .shutdown = trap_shutdown,
    .shutdown_now = trap_shutdown_now,
    .await_termination = trap_await,
    .destroy = trap_destroy,
};

/* On the heap, and run and freed by teardown: a failed check leaves the
 * striped to teardown, which must still reach its target (and run what
 * it queued there). */
static struct trap *trap_new(struct fixture *f, serex_executor *inner)
{
    struct trap *t = calloc(1, sizeof *t);

    assert_non_null(t);
    free(f->trap); /* a loop's last: its striped is destroyed */
    f->trap = t;
    test_user_init(&t->u);
    t->u.base.ops = &trap_ops;
    t->inner = inner;
    t->f = f;
    atomic_init(&t->action, TRAP_NONE);
    atomic_init(&t->refused, 0);
    return t;
}

/* Arms @t: its next execute queues @fn(@arg) on @key behind the task
 * being started (as a second producer racing in), then says @rc. */
static void trap_queue_behind(struct trap *t, int rc, uint64_t key, serex_fn fn,
                              void *arg)
{
    t->refuse_with = rc;
    t->behind_key = key;
    t->behind_fn = fn;
    t->behind_arg = arg;
    t->behind_call = NULL;
    t->behind_future = NULL;
    t->behind_rc = -1;
    atomic_store(&t->action, TRAP_QUEUE_BEHIND);
}

/* Runs @t's FIFO until empty; returns how many ran. */
static size_t trap_run_all(struct trap *t)
{
    size_t n = 0;

    while (n < 100000 && test_user_run_one(&t->u))
        n++;
    return n;
}

static size_t trap_queued(struct trap *t)
{
    return t->u.tail - t->u.head;
}

/*
 * Issue 20: shutdown_now empties and unlinks a new lane between its first
 * push and the target's refusal of that lane's first drain. The task was
 * accepted and handed back, so execute says SEREX_OK; the lane, which no
 * drain will ever free, must be freed there. It leaked (LeakSanitizer:
 * the lane's block, every run), as lane_refused freed nothing for a lane
 * it did not find holding its only task.
 */
static void striped_shutdown_now_while_a_new_lane_starts_frees_the_lane(
    void **state)
{
    static const int refusals[] = {SEREX_EFULL, SEREX_EREJECTED};
    struct fixture *f = *state;

    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        struct trap *t;
        serex_striped *s;
        serex_executor *ex;
        serex_stats st;

        t = trap_new(f, NULL);
        s = make_striped(f, &t->u.base, 0);
        ex = serex_striped_executor(s);
        f->pending.n = 0;
        t->refuse_with = refusals[i];
        atomic_store(&t->action, TRAP_SHUTDOWN_NOW);
        assert_int_equal(serex_striped_execute(s, 1, log_task, &f->items[0]),
                         SEREX_OK);
        assert_int_equal(atomic_load(&t->refused), 1);
        assert_int_equal(t->handed, 1);
        assert_int_equal(f->pending.n, 1);
        assert_ptr_equal(f->pending.args[0], &f->items[0]);
        assert_int_equal(serex_striped_lanes(s), 0);
        assert_int_equal(trap_queued(t), 0);
        assert_int_equal(serex_executor_stats(ex, &st), SEREX_OK);
        assert_int_equal(st.submitted, 1);
        assert_int_equal(st.queued, 0);
        assert_int_equal(st.rejected, 0);
        assert_int_equal(serex_await_termination(ex, 0), SEREX_OK);
        assert_int_equal(serex_destroy(ex), SEREX_OK); /* frees everything */
        f->st = NULL;
        assert_int_equal(f->nlog, 0);
    }
}

/*
 * Issue 20: a passing refusal (a bounded target full for a moment) of a
 * new lane's drain while a second producer's task queues behind the first
 * costs nothing: the drain is owed, and the next execute on the lane
 * resubmits it. It broke the striped for good: every later execute said
 * SEREX_EREJECTED.
 */
static void striped_passing_refusal_owes_the_drain_to_the_next_execute(
    void **state)
{
    struct fixture *f = *state;
    struct trap *t;
    serex_striped *s;
    serex_stats st;

    t = trap_new(f, NULL);
    s = make_striped(f, &t->u.base, 0);
    trap_queue_behind(t, SEREX_EFULL, 1, log_task, &f->items[1]);
    /* our task is accepted (and the one queued behind it): not undone */
    assert_int_equal(serex_striped_execute(s, 1, log_task, &f->items[0]),
                     SEREX_OK);
    assert_int_equal(t->behind_rc, SEREX_OK);
    assert_int_equal(atomic_load(&t->refused), 1);
    assert_int_equal(serex_striped_lanes(s), 1);
    assert_int_equal(trap_queued(t), 0); /* the drain is owed */
    /* the next execute on the lane resubmits it */
    assert_int_equal(serex_striped_execute(s, 1, log_task, &f->items[2]),
                     SEREX_OK);
    assert_int_equal(trap_queued(t), 1);
    assert_int_equal(trap_run_all(t), 1);
    assert_int_equal(f->nlog, 3);
    for (size_t i = 0; i < 3; i++)
        assert_ptr_equal(f->log[i], &f->items[i]);
    assert_int_equal(serex_striped_lanes(s), 0);
    /* the striped goes on as if nothing happened */
    assert_int_equal(serex_striped_execute(s, 1, log_task, &f->items[3]),
                     SEREX_OK);
    assert_int_equal(trap_run_all(t), 1);
    assert_int_equal(f->nlog, 4);
    assert_int_equal(serex_executor_stats(serex_striped_executor(s), &st),
                     SEREX_OK);
    assert_int_equal(st.submitted, 4);
    assert_int_equal(st.completed, 4);
    assert_int_equal(st.rejected, 0);
    assert_int_equal(st.lanes, 0);
    serex_shutdown(serex_striped_executor(s));
    assert_int_equal(serex_await_termination(serex_striped_executor(s), 0),
                     SEREX_OK);
    assert_int_equal(serex_destroy(serex_striped_executor(s)), SEREX_OK);
    f->st = NULL;
}

/* The same, resubmitted by whatever comes next: an execute on another
 * key, a keyless execute, another lane's drain as it starts (the target
 * has just made room for one). Each key keeps its order. */
static void striped_owed_drain_is_resubmitted_by_any_execute_or_drain(
    void **state)
{
    struct fixture *f = *state;

    for (int via = 0; via < 3; via++) {
        struct trap *t;
        serex_striped *s;

        t = trap_new(f, NULL);
        s = make_striped(f, &t->u.base, 0);
        f->nlog = 0;
        if (via == 2) /* a lane of key 2 with its drain on the target */
            assert_int_equal(
                serex_striped_execute(s, 2, log_task, &f->items[5]), SEREX_OK);
        trap_queue_behind(t, SEREX_EFULL, 1, log_task, &f->items[1]);
        assert_int_equal(serex_striped_execute(s, 1, log_task, &f->items[0]),
                         SEREX_OK);
        assert_int_equal(t->behind_rc, SEREX_OK);
        assert_int_equal(trap_queued(t), via == 2 ? 1 : 0);
        if (via == 0)
            assert_int_equal(
                serex_striped_execute(s, 2, log_task, &f->items[5]), SEREX_OK);
        else if (via == 1)
            assert_int_equal(serex_execute(serex_striped_executor(s), log_task,
                                           &f->items[5]),
                             SEREX_OK);
        else /* key 2's drain runs: it resubmits key 1's first */
            assert_true(test_user_run_one(&t->u));
        assert_int_equal(trap_queued(t), via == 2 ? 1 : 2);
        assert_int_equal(trap_run_all(t), via == 2 ? 1 : 2);
        assert_int_equal(f->nlog, 3);
        /* key 1's two tasks in order, key 2's (or the keyless) one */
        for (size_t i = 0, next = 0; i < 3; i++)
            if (f->log[i] != &f->items[5])
                assert_ptr_equal(f->log[i], &f->items[next++]);
        assert_int_equal(serex_striped_lanes(s), 0);
        serex_shutdown(serex_striped_executor(s));
        assert_int_equal(serex_await_termination(serex_striped_executor(s), 0),
                         SEREX_OK);
        assert_int_equal(serex_destroy(serex_striped_executor(s)), SEREX_OK);
        f->st = NULL;
    }
}

/* await_termination resubmits an owed drain rather than wait for ever
 * for tasks that nothing would start. */
static void striped_await_resubmits_an_owed_drain(void **state)
{
    struct fixture *f = *state;
    struct trap *t;
    serex_striped *s;
    serex_executor *ex;

    t = trap_new(f, NULL);
    s = make_striped(f, &t->u.base, 0);
    ex = serex_striped_executor(s);
    trap_queue_behind(t, SEREX_EFULL, 1, log_task, &f->items[1]);
    assert_int_equal(serex_striped_execute(s, 1, log_task, &f->items[0]),
                     SEREX_OK);
    serex_shutdown(ex);
    /* a look: the drain goes to the target, whose queue nobody runs yet */
    assert_int_equal(serex_await_termination(ex, 0), SEREX_ETIMEDOUT);
    assert_int_equal(trap_queued(t), 1);
    assert_int_equal(trap_run_all(t), 1);
    assert_int_equal(f->nlog, 2);
    assert_ptr_equal(f->log[0], &f->items[0]);
    assert_ptr_equal(f->log[1], &f->items[1]);
    assert_int_equal(serex_await_termination(ex, 0), SEREX_OK);
    assert_int_equal(serex_striped_lanes(s), 0);
    assert_int_equal(serex_destroy(ex), SEREX_OK);
    f->st = NULL;
}

/* destroy resubmits an owed drain and waits for its tasks (on a pool:
 * nothing else will come); it drops them only once the target refuses
 * for good (SEREX_EREJECTED) or has terminated. */
static void striped_destroy_resubmits_an_owed_drain_and_waits(void **state)
{
    struct fixture *f = *state;
    struct trap *t;
    serex_striped *s;

    make_pool(f, 2);
    t = trap_new(f, f->pool);
    s = make_striped(f, &t->u.base, 0);
    trap_queue_behind(t, SEREX_EFULL, 1, count_task, f);
    assert_int_equal(serex_striped_execute(s, 1, count_task, f), SEREX_OK);
    assert_int_equal(t->behind_rc, SEREX_OK);
    assert_int_equal(serex_destroy(serex_striped_executor(s)), SEREX_OK);
    f->st = NULL;
    assert_int_equal(atomic_load(&f->ran), 2);
}

static void striped_destroy_drops_an_owed_drain_the_target_refuses(void **state)
{
    struct fixture *f = *state;
    struct trap *t;
    serex_striped *s;
    serex_future *fu = NULL;

    t = trap_new(f, NULL);
    s = make_striped(f, &t->u.base, 0);
    trap_queue_behind(t, SEREX_EFULL, 1, NULL, &f->items[1]);
    t->behind_call = count_call;
    t->behind_future = &fu;
    assert_int_equal(serex_striped_execute(s, 1, never_task, f), SEREX_OK);
    assert_int_equal(t->behind_rc, SEREX_OK);
    assert_non_null(fu);
    /* from now on the target says SEREX_EREJECTED, and it never
     * terminates (a task of its own it will never run) */
    assert_int_equal(test_user_execute(&t->u.base, never_task, f), SEREX_OK);
    t->u.shut = true;
    assert_int_equal(serex_destroy(serex_striped_executor(s)), SEREX_OK);
    f->st = NULL;
    assert_int_equal(trap_queued(t), 1); /* its own task, never run */
    t->u.head = t->u.tail;
    assert_int_equal(serex_future_wait(fu, 0), SEREX_ECANCELED);
    serex_future_release(fu);
    assert_int_equal(atomic_load(&f->calls), 0);
}

/* A refusal for good (SEREX_EREJECTED: shut down) of a drain with a task
 * behind its first: the striped keeps both for its shutdown_now, in
 * order, and refuses new tasks, keyed or keyless (promise 5). */
static void striped_target_refusing_for_good_breaks_the_striped(void **state)
{
    struct fixture *f = *state;
    struct trap *t = trap_new(f, NULL);
    serex_striped *s = make_striped(f, &t->u.base, 0);
    serex_executor *ex = serex_striped_executor(s);

    trap_queue_behind(t, SEREX_EREJECTED, 1, log_task, &f->items[1]);
    assert_int_equal(serex_striped_execute(s, 1, log_task, &f->items[0]),
                     SEREX_OK);
    assert_int_equal(t->behind_rc, SEREX_OK);
    assert_int_equal(serex_striped_execute(s, 2, never_task, f),
                     SEREX_EREJECTED);
    assert_int_equal(serex_striped_execute(s, 1, never_task, f),
                     SEREX_EREJECTED);
    assert_int_equal(serex_execute(ex, never_task, f), SEREX_EREJECTED);
    assert_int_equal(trap_queued(t), 0); /* no retry is made */
    assert_int_equal(serex_striped_lanes(s), 1);
    assert_int_equal(serex_shutdown_now(ex, test_pending_cb, &f->pending), 2);
    assert_ptr_equal(f->pending.args[0], &f->items[0]);
    assert_ptr_equal(f->pending.args[1], &f->items[1]);
    assert_int_equal(serex_striped_lanes(s), 0);
    assert_int_equal(serex_await_termination(ex, 0), SEREX_OK);
    assert_int_equal(serex_destroy(ex), SEREX_OK);
    f->st = NULL;
}

#define ONE_SHARD_KEYS 3000

/*
 * Issue 20: no allocation under a spinlock (a preempted holder would make
 * every spinner of its shard wait on the allocator), counted in Debug
 * builds by serex__alloc_spin_count. One shard's table grows from 16
 * buckets to 2,048 and shrinks back as 3,000 of its keys come and go,
 * lanes are made by the thousand (the node cache refills), and
 * shutdown_now empties half of them. The target is a FIFO that allocates
 * nothing. The table used to be allocated and rehashed whole under the
 * shard lock, and each lane allocated under it.
 */
static void striped_lane_map_allocates_under_no_spinlock(void **state)
{
    struct fixture *f = *state;
    uint64_t *keys = calloc(ONE_SHARD_KEYS, sizeof *keys);
    struct trap *t = trap_new(f, NULL);
    serex_striped *s;
    size_t n = 0;

    assert_non_null(keys);
    for (uint64_t k = 1; n < ONE_SHARD_KEYS; k++)
        if (serex__striped_shard_of(k) == 7)
            keys[n++] = k;
    s = make_striped(f, &t->u.base, 0);
    (void)serex__alloc_spin_count(); /* from now on */
    for (int round = 0; round < 2; round++) {
        size_t ran = 0;

        serex__cache_trim(); /* every lane from the allocator */
        for (size_t i = 0; i < ONE_SHARD_KEYS; i++) {
            assert_int_equal(serex_striped_execute(s, keys[i], count_task, f),
                             SEREX_OK);
            /* the FIFO holds 64: run the oldest as it fills */
            if (trap_queued(t) == TEST_USER_CAP)
                ran += test_user_run_one(&t->u);
        }
        assert_int_equal(serex_striped_lanes(s), ONE_SHARD_KEYS - ran);
        if (round == 0) {
            ran += trap_run_all(t); /* down to none: the table shrinks */
            assert_int_equal(ran, ONE_SHARD_KEYS);
        } else {
            assert_int_equal(
                serex_shutdown_now(serex_striped_executor(s), NULL, NULL),
                ONE_SHARD_KEYS - ran);
            trap_run_all(t); /* the emptied lanes' drains */
        }
        assert_int_equal(serex_striped_lanes(s), 0);
    }
    assert_int_equal(serex__alloc_spin_count(), 0);
    assert_int_equal(serex_destroy(serex_striped_executor(s)), SEREX_OK);
    f->st = NULL;
    free(keys);
}

/* --- futures --- */

static void striped_submit_futures_complete_and_cancel(void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 0);
    serex_future *fu[3];

    for (size_t i = 0; i < 3; i++)
        assert_int_equal(
            serex_striped_submit(s, 11, count_call, &f->items[i], &fu[i]),
            SEREX_OK);
    assert_true(serex_future_cancel(fu[1]));
    assert_false(serex_future_cancel(fu[1]));
    assert_int_equal(serex_future_wait(fu[0], 0), SEREX_ETIMEDOUT);
    test_run_all(f->manual);
    assert_int_equal(atomic_load(&f->calls), 2);
    assert_int_equal(f->nlog, 2);
    assert_ptr_equal(f->log[0], &f->items[0]);
    assert_ptr_equal(f->log[1], &f->items[2]);
    assert_int_equal(serex_future_wait(fu[0], 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(fu[0]), &f->items[0]);
    assert_int_equal(serex_future_wait(fu[1], 0), SEREX_ECANCELED);
    assert_null(serex_future_value(fu[1]));
    assert_int_equal(serex_future_wait(fu[2], 0), SEREX_OK);
    assert_ptr_equal(serex_future_value(fu[2]), &f->items[2]);
    assert_int_equal(serex_striped_lanes(s), 0);
    for (size_t i = 0; i < 3; i++)
        serex_future_release(fu[i]);
}

static void striped_submit_futures_on_pool_carry_values(void **state)
{
    struct fixture *f = *state;
    serex_striped *s;
    serex_future *fu[64];

    make_pool(f, 2);
    s = make_striped(f, f->pool, 0);
    for (size_t i = 0; i < 64; i++)
        assert_int_equal(
            serex_striped_submit(s, i % 4, value_call, &f->items[i], &fu[i]),
            SEREX_OK);
    for (size_t i = 0; i < 64; i++) {
        assert_int_equal(serex_future_wait(fu[i], TEST_TIMEOUT), SEREX_OK);
        assert_ptr_equal(serex_future_value(fu[i]), &f->items[i]);
        serex_future_release(fu[i]);
    }
    assert_int_equal(atomic_load(&f->calls), 64);
}

/* --- EDEADLK --- */

static void striped_await_and_destroy_from_lane_task_is_edeadlk(void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 0);
    struct test_self_wait w = {.ex = serex_striped_executor(s), .done = f->done};
    struct test_self_wait wt = w;

    assert_int_equal(serex_striped_execute(s, 1, test_self_wait_task, &w),
                     SEREX_OK);
    test_run_all(f->manual);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w);
    /* a task of the target the striped runs on (promise 7) */
    assert_int_equal(serex_execute(f->manual, test_self_wait_task, &wt), SEREX_OK);
    test_run_all(f->manual);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&wt);
    /* destroy did nothing: the striped still works */
    assert_int_equal(serex_striped_execute(s, 1, log_task, &f->items[0]),
                     SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 1);
}

static void striped_await_and_destroy_from_lane_task_on_pool_is_edeadlk(
    void **state)
{
    struct fixture *f = *state;
    struct test_self_wait w = {.done = f->done};
    struct test_self_wait wk = {.done = f->done};

    make_pool(f, 2);
    w.ex = wk.ex = serex_striped_executor(make_striped(f, f->pool, 0));
    assert_int_equal(serex_striped_execute(f->st, 42, test_self_wait_task, &w),
                     SEREX_OK);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w);
    /* a keyless task of the striped is its task too */
    assert_int_equal(serex_execute(wk.ex, test_self_wait_task, &wk), SEREX_OK);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&wk);
    set_target(f, 1);
    assert_int_equal(serex_striped_execute(f->st, 42, count_task, f),
                     SEREX_OK);
    assert_signalled(f->done);
}

/* --- threads: parallel keys, per-key order, a million keys --- */

/* Two tasks that each wait for the other to have started. */
struct rendezvous {
    serex_event *arrived[2];
    serex_event *finished[2];
    int rc[2];
};

struct meet {
    struct rendezvous *r;
    int side;
};

static void meet_task(void *arg)
{
    struct meet *m = arg;
    struct rendezvous *r = m->r;

    serex_event_signal(r->arrived[m->side]);
    r->rc[m->side] = serex_event_wait(r->arrived[1 - m->side], TEST_TIMEOUT);
    serex_event_signal(r->finished[m->side]);
}

static void striped_different_keys_run_in_parallel(void **state)
{
    struct fixture *f = *state;
    /* pairs a shared lane (by hash, modulus or shard) would serialise */
    const uint64_t pairs[][2] = {{1, 2},
                                 {0, UINT64_C(1) << 32},
                                 {0, UINT64_C(1) << 63},
                                 {5, 5 + 256},
                                 {7, 7 + 65536},
                                 {3, UINT64_MAX}};
    struct rendezvous r;
    serex_striped *s;

    make_pool(f, 2);
    s = make_striped(f, f->pool, 0);
    for (int e = 0; e < 2; e++) {
        assert_int_equal(serex_event_create(&r.arrived[e]), SEREX_OK);
        assert_int_equal(serex_event_create(&r.finished[e]), SEREX_OK);
    }
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        struct meet m[2] = {{&r, 0}, {&r, 1}};

        r.rc[0] = r.rc[1] = SEREX_EINVAL;
        for (int side = 0; side < 2; side++)
            assert_int_equal(serex_striped_execute(s, pairs[p][side],
                                                   meet_task, &m[side]),
                             SEREX_OK);
        for (int side = 0; side < 2; side++)
            assert_signalled(r.finished[side]);
        /* both waits succeeded only if both tasks ran at once */
        assert_int_equal(r.rc[0], SEREX_OK);
        assert_int_equal(r.rc[1], SEREX_OK);
    }
    shutdown_and_await(f);
    for (int e = 0; e < 2; e++) {
        serex_event_destroy(r.arrived[e]);
        serex_event_destroy(r.finished[e]);
    }
}

static int mp_producer_main(void *arg)
{
    struct mp_producer *p = arg;

    for (size_t i = 0; i < MP_PER; i++)
        for (size_t k = 0; k < MP_KEYS; k++)
            if (serex_striped_execute(p->st, p->keys[k], mp_task,
                                      &p->items[k * MP_PER + i]) != SEREX_OK)
                p->failed++;
    return 0;
}

static void striped_per_key_order_holds_with_many_producers(void **state)
{
    struct fixture *f = *state;
    const uint64_t keys[MP_KEYS] = {0, 1, 2, 64, UINT64_C(1) << 32,
                                    UINT64_C(1) << 63, UINT64_MAX, 12345};
    struct mp_item *items =
        calloc(MP_PRODUCERS * MP_KEYS * MP_PER, sizeof *items);
    struct mp_producer pr[MP_PRODUCERS];

    assert_non_null(items);
    make_pool(f, 2);
    make_striped(f, f->pool, 8);
    for (unsigned p = 0; p < MP_PRODUCERS; p++) {
        pr[p] = (struct mp_producer){.st = f->st, .keys = keys,
                                     .items = &items[p * MP_KEYS * MP_PER]};
        for (size_t k = 0; k < MP_KEYS; k++)
            for (size_t i = 0; i < MP_PER; i++)
                pr[p].items[k * MP_PER + i] =
                    (struct mp_item){&f->ks[k], p, i};
    }
    for (unsigned p = 0; p < MP_PRODUCERS; p++)
        assert_int_equal(serex__thread_start(&pr[p].thread, mp_producer_main,
                                             &pr[p]),
                         SEREX_OK);
    for (unsigned p = 0; p < MP_PRODUCERS; p++) {
        serex__thread_join(pr[p].thread);
        assert_int_equal(pr[p].failed, 0);
    }
    shutdown_and_await(f);
    /* plain reads after await: TSan checks the happens-before */
    for (size_t k = 0; k < MP_KEYS; k++) {
        assert_int_equal(f->ks[k].total, MP_PRODUCERS * MP_PER);
        assert_int_equal(f->ks[k].disorder, 0);
        for (unsigned p = 0; p < MP_PRODUCERS; p++)
            assert_int_equal(f->ks[k].next[p], MP_PER);
    }
    free(items);
}

static void striped_million_distinct_keys_leave_no_lanes(void **state)
{
    struct fixture *f = *state;
    serex_striped *s;

    make_pool(f, 2);
    s = make_striped(f, f->pool, 0);
    set_target(f, MANY_KEYS);
    for (long k = 0; k < MANY_KEYS; k++)
        assert_int_equal(serex_striped_execute(s, (uint64_t)k, count_task, f),
                         SEREX_OK);
    assert_signalled(f->done);
    shutdown_and_await(f);
    assert_int_equal(atomic_load(&f->ran), MANY_KEYS);
}

/* --- bad input and allocation failure --- */

static void striped_bad_input_is_einval(void **state)
{
    struct fixture *f = *state;
    serex_executor no_ops = {NULL};
    serex_striped *out = (serex_striped *)f; /* must be overwritten */
    serex_future *fu = (serex_future *)f;
    serex_striped *s;

    assert_int_equal(serex_striped_create(NULL, NULL, &out), SEREX_EINVAL);
    assert_null(out);
    out = (serex_striped *)f;
    assert_int_equal(serex_striped_create(&no_ops, NULL, &out), SEREX_EINVAL);
    assert_null(out);
    assert_int_equal(serex_striped_create(f->manual, NULL, NULL),
                     SEREX_EINVAL);
    s = make_striped(f, f->manual, 0);
    assert_int_equal(serex_striped_execute(NULL, 1, log_task, f),
                     SEREX_EINVAL);
    assert_int_equal(serex_striped_execute(s, 1, NULL, f), SEREX_EINVAL);
    assert_int_equal(serex_striped_submit(NULL, 1, count_call, f, &fu),
                     SEREX_EINVAL);
    assert_null(fu);
    fu = (serex_future *)f;
    assert_int_equal(serex_striped_submit(s, 1, NULL, f, &fu), SEREX_EINVAL);
    assert_null(fu);
    assert_int_equal(serex_striped_submit(s, 1, count_call, f, NULL),
                     SEREX_EINVAL);
    assert_null(serex_striped_executor(NULL));
    assert_int_equal(serex_striped_lanes(NULL), 0);
    /* nothing was queued by any of them */
    assert_int_equal(serex_striped_lanes(s), 0);
    assert_false(serex_manual_run_one(f->manual));
}

static void striped_create_allocation_failure_is_enomem(void **state)
{
    struct fixture *f = *state;
    unsigned long n, failures = 0;
    int rc = SEREX_ENOMEM;

    serex__cache_trim();
    for (n = 1; n < 1000; n++) {
        f->st = (serex_striped *)f;
        serex__alloc_fail_nth(n);
        rc = serex_striped_create(f->manual, NULL, &f->st);
        if (rc == SEREX_OK)
            break;
        assert_int_equal(rc, SEREX_ENOMEM);
        assert_null(f->st);
        failures++;
    }
    serex__alloc_fail_nth(0);
    assert_int_equal(rc, SEREX_OK);
    assert_true(failures >= 1);
    assert_int_equal(serex_striped_execute(f->st, 1, log_task, &f->items[0]),
                     SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 1);
}

static void striped_execute_allocation_failure_is_enomem_and_queues_nothing(
    void **state)
{
    struct fixture *f = *state;
    serex_striped *s = make_striped(f, f->manual, 0);
    unsigned long n, failures = 0;
    int rc = SEREX_ENOMEM;

    /* A new key: the node, the lane and the target's node for the lane's
     * drain may each fail; each failure is reported (the target's too:
     * striped.h) and leaves nothing queued and no lane. */
    for (n = 1; n < 100; n++) {
        serex__cache_trim();
        serex__alloc_fail_nth(n);
        rc = serex_striped_execute(s, 77, log_task, &f->items[0]);
        serex__alloc_fail_nth(0);
        if (rc == SEREX_OK)
            break;
        assert_int_equal(rc, SEREX_ENOMEM);
        assert_int_equal(serex_striped_lanes(s), 0);
        assert_false(serex_manual_run_one(f->manual));
        failures++;
    }
    assert_int_equal(rc, SEREX_OK);
    assert_true(failures >= 1);
    /* the accepted task runs */
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 1);
    assert_ptr_equal(f->log[0], &f->items[0]);
    /* a live lane (its drain queued): only the node is allocated */
    assert_int_equal(serex_striped_execute(s, 77, log_task, &f->items[1]),
                     SEREX_OK);
    serex__cache_trim();
    serex__alloc_fail_nth(1);
    assert_int_equal(serex_striped_execute(s, 77, never_task, f),
                     SEREX_ENOMEM);
    serex__alloc_fail_nth(0);
    assert_int_equal(serex_striped_execute(s, 77, log_task, &f->items[2]),
                     SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 3);
    assert_ptr_equal(f->log[1], &f->items[1]);
    assert_ptr_equal(f->log[2], &f->items[2]);
    assert_int_equal(serex_striped_lanes(s), 0);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(striped_same_key_runs_in_order),
        T(striped_lanes_count_live_keys_and_free_when_idle),
        T(striped_distinct_keys_never_share_a_lane),
        T(striped_lane_drain_runs_at_most_batch_and_lanes_interleave),
        T(striped_task_requeuing_its_key_keeps_the_lane),
        T(striped_many_keys_on_manual_free_every_lane),
        T(striped_lane_map_survives_churn),
        T(striped_keyless_execute_bypasses_the_lanes),
        T(striped_keyless_execute_runs_on_pool),
        T(striped_shutdown_rejects_keyed_and_keyless_and_runs_accepted),
        T(striped_shutdown_now_hands_back_every_lane_in_order),
        T(striped_shutdown_now_cancels_lane_futures),
        T(striped_await_after_shutdown_now_does_not_wait_for_the_target),
        T(striped_shutdown_now_leaves_no_lane_alive),
        T(striped_await_times_out_until_shut_down_and_drained),
        T(striped_destroy_waits_for_lane_tasks),
        T(striped_target_rejecting_a_new_lane_is_reported),
        T(striped_target_full_is_reported_and_striped_still_works),
        T(striped_target_rejecting_a_resubmission_loses_nothing),
        T(striped_shutdown_now_while_a_new_lane_starts_frees_the_lane),
        T(striped_passing_refusal_owes_the_drain_to_the_next_execute),
        T(striped_owed_drain_is_resubmitted_by_any_execute_or_drain),
        T(striped_await_resubmits_an_owed_drain),
        T(striped_destroy_resubmits_an_owed_drain_and_waits),
        T(striped_destroy_drops_an_owed_drain_the_target_refuses),
        T(striped_target_refusing_for_good_breaks_the_striped),
        T(striped_lane_map_allocates_under_no_spinlock),
        T(striped_submit_futures_complete_and_cancel),
        T(striped_submit_futures_on_pool_carry_values),
        T(striped_await_and_destroy_from_lane_task_is_edeadlk),
        T(striped_await_and_destroy_from_lane_task_on_pool_is_edeadlk),
        T(striped_different_keys_run_in_parallel),
        T(striped_per_key_order_holds_with_many_producers),
        T(striped_million_distinct_keys_leave_no_lanes),
        T(striped_bad_input_is_einval),
        T(striped_create_allocation_failure_is_enomem),
        T(striped_execute_allocation_failure_is_enomem_and_queues_nothing),
    };
#undef T

    return cmocka_run_group_tests_name("striped", tests, NULL, NULL);
}
