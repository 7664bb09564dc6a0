/* SPDX-License-Identifier: MIT */
/*
 * test_backpressure.c - bounded serial and striped executors
 * (queue_capacity, lane_capacity) and serex_execute_wait.
 *
 * The caps are checked exactly on the manual executor, where every drain
 * run is one explicit serex_manual_run_one: a capacity of 4 accepts 4, the
 * 5th says SEREX_EFULL with nothing queued, and each task run makes room
 * for exactly one more. The pool cases show what only threads can: a
 * burst held to the cap (the 200,000 tasks), producers paced by
 * serex_execute_wait, and a waiter woken by the room a drain makes, not by
 * polling (a polling waiter would be refused once per poll: the serial's
 * `rejected` count shows it). Cross-thread waits are bounded by
 * TEST_TIMEOUT.
 */
#include "test_util.h"

#include <stdlib.h> /* calloc, free */

#define BURST 200000
#define STRESS_PRODUCERS 4
#define STRESS_PER_PRODUCER 5000
#define STRESS_TASKS (STRESS_PRODUCERS * STRESS_PER_PRODUCER)
#define STRESS_CAP 8
#define STRESS_KEYS 16

struct fixture;

/* A task's argument: its fixture and its number. */
struct item {
    struct fixture *f;
    size_t id;
};

/* A waiter thread: one serex_execute_wait (or its striped twin). */
struct waiter {
    struct fixture *f;
    serex_executor *ex; /* or NULL: st and key */
    serex_striped *st;
    uint64_t key;
    int64_t timeout_ns;
    int rc;
    serex__thread thread;
};

/* A stress producer: its share of the items, through execute_wait. */
struct producer {
    struct fixture *f;
    unsigned id;
    long bad; /* execute_wait said anything but SEREX_OK */
    serex__thread thread;
};

/*
 * A user-written executor that says SEREX_EFULL for its first `fails`
 * tries, then runs tasks inline: no room signal comes from it, so
 * serex_execute_wait retries it after sleeps.
 */
struct fussy {
    serex_executor base; /* first, as the vtable requires */
    _Atomic int tries;
    int fails; /* < 0: always full */
};

struct fixture {
    serex_executor *manual; /* made in setup */
    serex_executor *pool;   /* made by the tests that need one */
    serex_executor *serial;
    serex_striped *st;
    serex_event *done;
    struct fussy fussy;
    _Atomic long ran;            /* tasks run */
    _Atomic long unfinished;     /* accepted (as seen by producers), not done */
    _Atomic long peak;           /* the most unfinished seen */
    _Atomic unsigned char *seen; /* stress: per item, times it ran */
    struct item items[64];
    struct item *many;                  /* stress items */
    int deadlk0, deadlk_forever, inner; /* the EDEADLK probe's statuses */
};

/* --- tasks --- */

static void count_task(void *arg)
{
    struct item *it = arg;

    /* relaxed: read after destroy or await, which order it */
    atomic_fetch_add_explicit(&it->f->ran, 1, memory_order_relaxed);
}

/* The producer saw its execute accept a task: count it unfinished. */
static void accepted(struct fixture *f)
{
    /* relaxed (all): counts only; the peak is read after the tasks end */
    long now = atomic_fetch_add_explicit(&f->unfinished, 1,
                                         memory_order_relaxed) +
               1;
    long peak = atomic_load_explicit(&f->peak, memory_order_relaxed);

    while (now > peak && !atomic_compare_exchange_weak_explicit(
                             &f->peak, &peak, now, memory_order_relaxed,
                             memory_order_relaxed))
        ;
}

/* Counts a run and marks its item; for the pool cases. */
static void burst_task(void *arg)
{
    struct item *it = arg;
    struct fixture *f = it->f;

    if (f->seen != NULL) /* relaxed: read after destroy */
        atomic_fetch_add_explicit(&f->seen[it->id], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&f->ran, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&f->unfinished, 1, memory_order_relaxed);
}

/* --- the fussy user executor --- */

static struct fussy *fussy_of(serex_executor *ex)
{
    return (struct fussy *)(void *)ex;
}

static int fussy_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct fussy *u = fussy_of(ex);
    int n = atomic_fetch_add(&u->tries, 1) + 1;

    if (u->fails < 0 || n <= u->fails)
        return SEREX_EFULL;
    serex_run_task(ex, fn, arg);
    return SEREX_OK;
}

static void fussy_shutdown(serex_executor *ex)
{
    (void)ex;
}

static size_t fussy_shutdown_now(serex_executor *ex,
                                 serex_pending_fn on_pending, void *ctx)
{
    (void)ex;
    (void)on_pending;
    (void)ctx;
    return 0; /* it runs tasks inline: none is ever pending */
}

static int fussy_await(serex_executor *ex, int64_t timeout_ns)
{
    (void)ex;
    (void)timeout_ns;
    return SEREX_OK;
}

static void fussy_destroy(serex_executor *ex)
{
    (void)ex;
}

static const serex_executor_ops fussy_ops = {
    .execute = fussy_execute,
    .shutdown = fussy_shutdown,
    .shutdown_now = fussy_shutdown_now,
    .await_termination = fussy_await,
    .destroy = fussy_destroy,
};

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_event_create(&f->done), SEREX_OK);
    for (size_t i = 0; i < 64; i++)
        f->items[i] = (struct item){f, i};
    f->fussy.base.ops = &fussy_ops;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    /* what is left on the manual executor is harmless: run it first, so
     * that no destroy waits on a drain nobody runs */
    test_run_all(f->manual);
    if (f->serial != NULL)
        assert_int_equal(serex_destroy(f->serial), SEREX_OK);
    if (f->st != NULL)
        assert_int_equal(serex_destroy(serex_striped_executor(f->st)),
                         SEREX_OK);
    assert_int_equal(serex_destroy(f->manual), SEREX_OK);
    if (f->pool != NULL)
        assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    serex_event_destroy(f->done);
    free(f->many);
    free((void *)f->seen);
    free(f);
    return 0;
}

static serex_executor *make_serial(struct fixture *f, serex_executor *target,
                                   size_t capacity, unsigned batch)
{
    serex_serial_config cfg = {.batch = batch, .queue_capacity = capacity};

    assert_int_equal(serex_serial_create(target, &cfg, &f->serial), SEREX_OK);
    return f->serial;
}

static serex_striped *make_striped(struct fixture *f, serex_executor *target,
                                   size_t capacity, size_t lane_capacity)
{
    serex_striped_config cfg = {
        .batch = 1, .queue_capacity = capacity, .lane_capacity = lane_capacity};

    assert_int_equal(serex_striped_create(target, &cfg, &f->st), SEREX_OK);
    return f->st;
}

static void make_pool(struct fixture *f, unsigned threads, size_t capacity)
{
    serex_pool_config cfg = {
        .threads = threads, .queue_capacity = capacity, .name = "test-bp"};

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
}

static serex_stats stats_of(serex_executor *ex)
{
    serex_stats st;

    assert_int_equal(serex_executor_stats(ex, &st), SEREX_OK);
    return st;
}

static long ran_of(struct fixture *f)
{
    return atomic_load_explicit(&f->ran, memory_order_relaxed);
}

/* --- exact caps, on the manual executor --- */

static void serial_capacity_is_exact(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, f->manual, 4, 1);

    for (int i = 0; i < 4; i++)
        assert_int_equal(serex_execute(s, count_task, &f->items[i]), SEREX_OK);
    assert_int_equal(serex_execute(s, never_task, NULL), SEREX_EFULL);
    assert_int_equal(serex_execute(s, never_task, NULL), SEREX_EFULL);
    assert_int_equal(stats_of(s).submitted, 4); /* nothing queued */
    assert_int_equal(stats_of(s).rejected, 2);
    /* one task runs: exactly one place is free */
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(ran_of(f), 1);
    assert_int_equal(serex_execute(s, count_task, &f->items[4]), SEREX_OK);
    assert_int_equal(serex_execute(s, never_task, NULL), SEREX_EFULL);
    assert_int_equal(test_run_all(f->manual), 4); /* a drain each, batch 1 */
    assert_int_equal(ran_of(f), 5);
    /* empty: the whole capacity again */
    for (int i = 0; i < 4; i++)
        assert_int_equal(serex_execute(s, count_task, &f->items[5 + i]),
                         SEREX_OK);
    assert_int_equal(serex_execute(s, never_task, NULL), SEREX_EFULL);
    test_run_all(f->manual);
    assert_int_equal(ran_of(f), 9);
    assert_string_equal(stats_of(s).name, "serial");
}

/* A task frees its place before it runs: it can always queue one more. */
static void resubmit_task(void *arg)
{
    struct item *it = arg;

    count_task(arg);
    if (it->id == 0)
        assert_int_equal(
            serex_execute(it->f->serial, resubmit_task, &it->f->items[1]),
            SEREX_OK);
}

static void serial_running_task_does_not_count(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, f->manual, 1, 8);

    assert_int_equal(serex_execute(s, resubmit_task, &f->items[0]), SEREX_OK);
    assert_int_equal(serex_execute(s, never_task, NULL), SEREX_EFULL);
    test_run_all(f->manual);
    assert_int_equal(ran_of(f), 2);
}

static void serial_shutdown_now_frees_the_places(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, f->manual, 3, 1);

    for (int i = 0; i < 3; i++)
        assert_int_equal(serex_execute(s, never_task, NULL), SEREX_OK);
    assert_int_equal(serex_execute(s, never_task, NULL), SEREX_EFULL);
    assert_int_equal(serex_shutdown_now(s, NULL, NULL), 3);
    /* shut down: refused as such, not as full */
    assert_int_equal(serex_execute(s, never_task, NULL), SEREX_EREJECTED);
    assert_int_equal(serex_execute_wait(s, never_task, NULL, SEREX_FOREVER),
                     SEREX_EREJECTED);
}

static void striped_capacities_are_exact(void **state)
{
    struct fixture *f = *state;
    serex_striped *st = make_striped(f, f->manual, 5, 2);

    /* key 1 fills its lane, keys 2 and 3 the rest of the striped */
    for (int i = 0; i < 2; i++)
        assert_int_equal(serex_striped_execute(st, 1, count_task, &f->items[i]),
                         SEREX_OK);
    assert_int_equal(serex_striped_execute(st, 1, never_task, NULL),
                     SEREX_EFULL); /* the lane's cap */
    for (int i = 2; i < 4; i++)
        assert_int_equal(serex_striped_execute(st, 2, count_task, &f->items[i]),
                         SEREX_OK);
    assert_int_equal(serex_striped_execute(st, 3, count_task, &f->items[4]),
                     SEREX_OK);
    assert_int_equal(serex_striped_execute(st, 3, never_task, NULL),
                     SEREX_EFULL); /* the striped's cap */
    assert_int_equal(serex_striped_execute(st, 4, never_task, NULL),
                     SEREX_EFULL); /* ... and no lane made for key 4 */
    assert_int_equal(serex_striped_lanes(st), 3);
    assert_int_equal(stats_of(serex_striped_executor(st)).submitted, 5);
    assert_int_equal(stats_of(serex_striped_executor(st)).rejected, 3);
    /* key 1's drain runs one task: one place, in its lane and in all */
    assert_true(serex_manual_run_one(f->manual));
    assert_int_equal(ran_of(f), 1);
    assert_int_equal(serex_striped_execute(st, 4, count_task, &f->items[5]),
                     SEREX_OK);
    assert_int_equal(serex_striped_execute(st, 1, never_task, NULL),
                     SEREX_EFULL);
    assert_int_equal(serex_striped_lanes(st), 4);
    test_run_all(f->manual);
    assert_int_equal(ran_of(f), 6);
    assert_int_equal(serex_striped_lanes(st), 0);
    /* empty again: 5 places, 2 a lane */
    for (int i = 0; i < 5; i++)
        assert_int_equal(serex_striped_execute(st, (uint64_t)i / 2 + 10,
                                               count_task, &f->items[6 + i]),
                         SEREX_OK);
    assert_int_equal(serex_striped_execute(st, 12, never_task, NULL),
                     SEREX_EFULL);
    test_run_all(f->manual);
    assert_int_equal(ran_of(f), 11);
    assert_string_equal(stats_of(serex_striped_executor(st)).name, "striped");
}

static void striped_lane_capacity_alone_caps_each_key(void **state)
{
    struct fixture *f = *state;
    serex_striped *st = make_striped(f, f->manual, 0, 1);

    for (uint64_t k = 0; k < 40; k++) {
        assert_int_equal(serex_striped_execute(st, k, count_task, &f->items[k]),
                         SEREX_OK);
        assert_int_equal(serex_striped_execute(st, k, never_task, NULL),
                         SEREX_EFULL);
    }
    assert_int_equal(serex_striped_lanes(st), 40);
    /* shutdown_now frees every place; then it is only shut down */
    assert_int_equal(serex_shutdown_now(serex_striped_executor(st), NULL, NULL),
                     40);
    assert_int_equal(serex_striped_execute(st, 0, never_task, NULL),
                     SEREX_EREJECTED);
}

/* --- the burst: a serial over a pool --- */

/*
 * 200,000 tasks into a serial of capacity 4 over a pool: each is accepted
 * or refused with SEREX_EFULL, and the tasks accepted and not finished
 * never pass 5. (The serial counts a task from its acceptance until its
 * drain takes it off the queue, just before it runs; seen from outside,
 * the one running adds one: 4 waiting + 1 running.)
 */
static void serial_over_pool_holds_a_burst_to_its_capacity(void **state)
{
    struct fixture *f = *state;
    struct item it = {f, 0};
    long ok = 0, full = 0;
    serex_executor *s;

    make_pool(f, 2, 0);
    s = make_serial(f, f->pool, 4, 0);
    for (long i = 0; i < BURST; i++) {
        int rc = serex_execute(s, burst_task, &it);

        if (rc == SEREX_OK) {
            ok++;
            accepted(f);
        } else {
            assert_int_equal(rc, SEREX_EFULL);
            full++;
        }
    }
    assert_int_equal(ok + full, BURST);
    assert_int_equal(serex_destroy(s), SEREX_OK); /* waits for its tasks */
    f->serial = NULL;
    assert_int_equal(ran_of(f), ok);
    assert_true(atomic_load(&f->peak) <= 4 + 1);
    print_message("[ burst    ] %ld accepted, %ld SEREX_EFULL, peak %ld "
                  "unfinished\n",
                  ok, full, (long)atomic_load(&f->peak));
}

/* --- serex_execute_wait --- */

static int waiter_main(void *arg)
{
    struct waiter *w = arg;

    if (w->ex != NULL)
        w->rc = serex_execute_wait(w->ex, count_task, &w->f->items[63],
                                   w->timeout_ns);
    else
        w->rc = serex_striped_execute_wait(w->st, w->key, count_task,
                                           &w->f->items[63], w->timeout_ns);
    serex_event_signal(w->f->done);
    return 0;
}

static void waiter_start(struct waiter *w)
{
    assert_int_equal(serex__thread_start(&w->thread, waiter_main, w), SEREX_OK);
}

static void execute_wait_returns_once_room_is_made(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, f->manual, 2, 1);
    struct waiter w = {.f = f, .ex = s, .timeout_ns = SEREX_FOREVER};

    for (int i = 0; i < 2; i++)
        assert_int_equal(serex_execute(s, count_task, &f->items[i]), SEREX_OK);
    waiter_start(&w);
    /* full, and nobody runs the serial: the waiter must not return */
    assert_int_equal(serex_event_wait(f->done, 100 * MS), SEREX_ETIMEDOUT);
    /* no polling: its first try and the one after it counted itself
     * were refused, then it slept (a poll every 1 ms would be ~100) */
    assert_true(stats_of(s).rejected <= 3);
    /* one task runs: the drain frees a place and wakes the waiter */
    assert_true(serex_manual_run_one(f->manual));
    assert_signalled(f->done);
    serex__thread_join(w.thread);
    assert_int_equal(w.rc, SEREX_OK);
    assert_int_equal(stats_of(s).submitted, 3);
    test_run_all(f->manual);
    assert_int_equal(ran_of(f), 3);
}

static void striped_execute_wait_returns_once_room_is_made(void **state)
{
    struct fixture *f = *state;
    serex_striped *st = make_striped(f, f->manual, 0, 1);
    struct waiter w = {.f = f, .st = st, .key = 5, .timeout_ns = TEST_TIMEOUT};

    assert_int_equal(serex_striped_execute(st, 5, count_task, &f->items[0]),
                     SEREX_OK);
    waiter_start(&w);
    assert_int_equal(serex_event_wait(f->done, 50 * MS), SEREX_ETIMEDOUT);
    assert_true(stats_of(serex_striped_executor(st)).rejected <= 3);
    assert_true(serex_manual_run_one(f->manual));
    assert_signalled(f->done);
    serex__thread_join(w.thread);
    assert_int_equal(w.rc, SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(ran_of(f), 2);
}

static void execute_wait_times_out_when_nobody_makes_room(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, f->manual, 1, 1);
    serex_striped *st = make_striped(f, f->manual, 1, 0);
    int64_t t0;

    assert_int_equal(serex_execute(s, count_task, &f->items[0]), SEREX_OK);
    t0 = test_now_ns();
    assert_int_equal(serex_execute_wait(s, never_task, NULL, 30 * MS),
                     SEREX_ETIMEDOUT);
    assert_true(test_now_ns() - t0 >= 30 * MS);
    assert_int_equal(
        serex_striped_execute_wait(st, 0, count_task, &f->items[1], 0),
        SEREX_OK);
    assert_int_equal(
        serex_striped_execute_wait(st, 1, never_task, NULL, 10 * MS),
        SEREX_ETIMEDOUT);
    test_run_all(f->manual);
    assert_int_equal(ran_of(f), 2);
    assert_int_equal(stats_of(s).submitted, 1); /* nothing else queued */
}

static void execute_wait_with_timeout_0_tries_once(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, f->manual, 1, 1);

    assert_int_equal(serex_execute_wait(s, count_task, &f->items[0], 0),
                     SEREX_OK);
    assert_int_equal(serex_execute_wait(s, never_task, NULL, 0),
                     SEREX_ETIMEDOUT);
    assert_int_equal(stats_of(s).rejected, 1); /* one try */
    test_run_all(f->manual);
    assert_int_equal(serex_execute_wait(s, count_task, &f->items[1], 0),
                     SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(ran_of(f), 2);
}

/* Inside a task of a full serial: waiting for its room would wait for the
 * task itself (its drain cannot pop while it runs). */
static void deadlock_probe_task(void *arg)
{
    struct fixture *f = arg;

    f->inner = serex_execute(f->serial, count_task, &f->items[0]);
    f->deadlk0 = serex_execute_wait(f->serial, never_task, NULL, 0);
    if (f->deadlk0 == SEREX_EDEADLK) /* else the next call would hang */
        f->deadlk_forever = serex_execute_wait(f->serial, never_task, NULL,
                                               SEREX_FOREVER);
}

static void execute_wait_from_a_task_of_its_full_serial_is_edeadlk(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, f->manual, 1, 1);

    assert_int_equal(serex_execute(s, deadlock_probe_task, f), SEREX_OK);
    test_run_all(f->manual);
    assert_int_equal(f->inner, SEREX_OK); /* its own place was free */
    assert_int_equal(f->deadlk0, SEREX_EDEADLK);
    assert_int_equal(f->deadlk_forever, SEREX_EDEADLK);
    assert_int_equal(ran_of(f), 1);
}

/*
 * Inside a task of its target, with room: serex_execute_wait (or its
 * striped twin) must refuse every time, not only when the target happens
 * to be full (the call that can deadlock fails in every test, as
 * libdispatch's dispatch_sync onto the current queue does). Four probes,
 * timeouts 0 and TEST_TIMEOUT (never SEREX_FOREVER: a missed refusal on a
 * full target fails the test instead of hanging it).
 */
#define SELF_PROBES 4

struct self_probe {
    struct fixture *f;
    serex_executor *ex; /* serex_execute_wait on it, or ... */
    serex_striped *st;  /* ... serex_striped_execute_wait on it */
    uint64_t key;
    serex_event *done; /* signalled at the end (the pool's probes) */
    int rc[SELF_PROBES];
};

static void self_probe_task(void *arg)
{
    struct self_probe *p = arg;

    for (int i = 0; i < SELF_PROBES; i++) {
        int64_t timeout = i % 2 == 0 ? 0 : TEST_TIMEOUT;

        if (p->ex != NULL)
            p->rc[i] = serex_execute_wait(p->ex, count_task, &p->f->items[i],
                                          timeout);
        else /* keys p->key and another one */
            p->rc[i] = serex_striped_execute_wait(
                p->st, p->key + (uint64_t)(i / 2), count_task, &p->f->items[i],
                timeout);
    }
    if (p->done != NULL)
        serex_event_signal(p->done);
}

static void assert_refused_every_time(const struct self_probe *p)
{
    for (int i = 0; i < SELF_PROBES; i++)
        assert_int_equal(p->rc[i], SEREX_EDEADLK);
}

static void execute_wait_from_a_task_of_its_target_with_room_is_edeadlk(
    void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, f->manual, 64, 1);
    serex_striped *st = make_striped(f, f->manual, 64, 64);
    struct self_probe on_serial = {.f = f, .ex = s};
    struct self_probe on_manual = {.f = f, .ex = f->manual};
    struct self_probe on_lane = {.f = f, .st = st, .key = 7};
    struct self_probe on_keyless = {.f = f, .st = st, .key = 9};
    struct self_probe on_pool = {.f = f, .done = f->done};
    struct self_probe on_serial_over_pool = {.f = f, .done = f->done};
    serex_serial_config cfg = {.queue_capacity = 64};
    serex_executor *over_pool;

    /* a bounded serial with 63 places free; its target, the manual
     * executor (unbounded: its run calls are a task's frame too) */
    assert_int_equal(serex_execute(s, self_probe_task, &on_serial), SEREX_OK);
    assert_true(serex_manual_run_one(f->manual));
    assert_refused_every_time(&on_serial);
    assert_int_equal(stats_of(s).submitted, 1); /* nothing else queued */
    assert_int_equal(serex_execute(f->manual, self_probe_task, &on_manual),
                     SEREX_OK);
    assert_true(serex_manual_run_one(f->manual));
    assert_refused_every_time(&on_manual);

    /* a striped's lane task and its keyless task, on the striped */
    assert_int_equal(serex_striped_execute(st, 7, self_probe_task, &on_lane),
                     SEREX_OK);
    assert_int_equal(
        serex_execute(serex_striped_executor(st), self_probe_task, &on_keyless),
        SEREX_OK);
    test_run_all(f->manual);
    assert_refused_every_time(&on_lane);
    assert_refused_every_time(&on_keyless);

    /* a bounded pool's worker, on the pool and on a serial over it */
    make_pool(f, 2, 64);
    on_pool.ex = f->pool;
    assert_int_equal(serex_serial_create(f->pool, &cfg, &over_pool), SEREX_OK);
    on_serial_over_pool.ex = over_pool;
    assert_int_equal(serex_execute(f->pool, self_probe_task, &on_pool),
                     SEREX_OK);
    assert_signalled(f->done);
    assert_int_equal(
        serex_execute(f->pool, self_probe_task, &on_serial_over_pool),
        SEREX_OK);
    assert_signalled(f->done);
    assert_int_equal(serex_destroy(over_pool), SEREX_OK);
    assert_refused_every_time(&on_pool);
    assert_refused_every_time(&on_serial_over_pool);
    test_run_all(f->manual);
    assert_int_equal(ran_of(f), 0); /* no probe's task was queued */
}

static void execute_wait_retries_a_user_executor_after_sleeps(void **state)
{
    struct fixture *f = *state;
    serex_executor *u = &f->fussy.base;
    int64_t t0 = test_now_ns();

    f->fussy.fails = 3;
    assert_int_equal(
        serex_execute_wait(u, count_task, &f->items[0], SEREX_FOREVER),
        SEREX_OK);
    assert_int_equal(atomic_load(&f->fussy.tries), 4);
    assert_int_equal(ran_of(f), 1);
    assert_true(test_now_ns() - t0 < TEST_TIMEOUT);
    /* always full: retried until the time runs out, at most 1 ms apart */
    f->fussy.fails = -1;
    atomic_store(&f->fussy.tries, 0);
    assert_int_equal(serex_execute_wait(u, never_task, NULL, 20 * MS),
                     SEREX_ETIMEDOUT);
    assert_true(atomic_load(&f->fussy.tries) >= 5);
    /* a serial over it passes the unsignalled SEREX_EFULL on */
    f->fussy.fails = 2;
    atomic_store(&f->fussy.tries, 0);
    assert_int_equal(serex_execute_wait(make_serial(f, u, 0, 0), count_task,
                                        &f->items[1], TEST_TIMEOUT),
                     SEREX_OK);
    assert_int_equal(ran_of(f), 2);
}

static void execute_wait_bad_input_is_einval(void **state)
{
    struct fixture *f = *state;
    serex_executor no_ops = {NULL};
    serex_striped *st = make_striped(f, f->manual, 1, 0);

    assert_int_equal(serex_execute_wait(NULL, never_task, NULL, 0),
                     SEREX_EINVAL);
    assert_int_equal(serex_execute_wait(&no_ops, never_task, NULL, 0),
                     SEREX_EINVAL);
    assert_int_equal(serex_execute_wait(f->manual, NULL, NULL, 0),
                     SEREX_EINVAL);
    assert_int_equal(serex_execute_wait(f->manual, never_task, NULL, -2),
                     SEREX_EINVAL);
    assert_int_equal(serex_striped_execute_wait(NULL, 0, never_task, NULL, 0),
                     SEREX_EINVAL);
    assert_int_equal(serex_striped_execute_wait(st, 0, NULL, NULL, 0),
                     SEREX_EINVAL);
    assert_int_equal(
        serex_striped_execute_wait(st, 0, never_task, NULL, INT64_MIN),
        SEREX_EINVAL);
    assert_int_equal(stats_of(f->manual).submitted, 0);
    assert_int_equal(stats_of(serex_striped_executor(st)).submitted, 0);
}

/* A waiter on a full serial hears of its shutdown at once. */
static void execute_wait_ends_with_erejected_on_shutdown(void **state)
{
    struct fixture *f = *state;
    serex_executor *s = make_serial(f, f->manual, 1, 1);
    struct waiter w = {.f = f, .ex = s, .timeout_ns = SEREX_FOREVER};

    assert_int_equal(serex_execute(s, count_task, &f->items[0]), SEREX_OK);
    waiter_start(&w);
    assert_int_equal(serex_event_wait(f->done, 20 * MS), SEREX_ETIMEDOUT);
    serex_shutdown(s);
    assert_signalled(f->done);
    serex__thread_join(w.thread);
    assert_int_equal(w.rc, SEREX_EREJECTED);
    test_run_all(f->manual);
    assert_int_equal(ran_of(f), 1);
}

/* --- producers paced by execute_wait, on a pool --- */

static void stress_init(struct fixture *f)
{
    f->many = calloc(STRESS_TASKS, sizeof *f->many);
    f->seen = calloc(STRESS_TASKS, sizeof *f->seen);
    assert_non_null(f->many);
    assert_non_null((void *)f->seen);
    for (size_t i = 0; i < STRESS_TASKS; i++)
        f->many[i] = (struct item){f, i};
}

static int producer_main(void *arg)
{
    struct producer *p = arg;
    struct fixture *f = p->f;

    for (size_t i = 0; i < STRESS_PER_PRODUCER; i++) {
        struct item *it = &f->many[p->id * STRESS_PER_PRODUCER + i];
        int rc = f->st != NULL
                     ? serex_striped_execute_wait(f->st, i % STRESS_KEYS,
                                                  burst_task, it, SEREX_FOREVER)
                     : serex_execute_wait(f->serial, burst_task, it,
                                          SEREX_FOREVER);

        if (rc == SEREX_OK)
            accepted(f);
        else
            p->bad++;
    }
    return 0;
}

static void run_producers(struct fixture *f)
{
    struct producer prod[STRESS_PRODUCERS];

    for (unsigned i = 0; i < STRESS_PRODUCERS; i++) {
        prod[i] = (struct producer){.f = f, .id = i};
        assert_int_equal(
            serex__thread_start(&prod[i].thread, producer_main, &prod[i]),
            SEREX_OK);
    }
    for (unsigned i = 0; i < STRESS_PRODUCERS; i++) {
        serex__thread_join(prod[i].thread);
        assert_int_equal(prod[i].bad, 0);
    }
}

/* Every item ran exactly once. */
static void assert_each_ran_once(struct fixture *f)
{
    assert_int_equal(ran_of(f), STRESS_TASKS);
    for (size_t i = 0; i < STRESS_TASKS; i++)
        assert_int_equal(atomic_load(&f->seen[i]), 1);
}

static void execute_wait_stress_serial_on_pool(void **state)
{
    struct fixture *f = *state;

    stress_init(f);
    make_pool(f, 4, 0);
    make_serial(f, f->pool, STRESS_CAP, 4);
    run_producers(f);
    assert_int_equal(serex_destroy(f->serial), SEREX_OK);
    f->serial = NULL;
    assert_each_ran_once(f);
    /* the cap, plus the one running */
    assert_true(atomic_load(&f->peak) <= STRESS_CAP + 1);
}

static void execute_wait_stress_striped_on_pool(void **state)
{
    struct fixture *f = *state;

    stress_init(f);
    make_pool(f, 4, 0);
    make_striped(f, f->pool, STRESS_CAP, 2);
    run_producers(f);
    assert_int_equal(serex_destroy(serex_striped_executor(f->st)), SEREX_OK);
    f->st = NULL;
    assert_each_ran_once(f);
    /* the cap, plus one running per pool thread */
    assert_true(atomic_load(&f->peak) <= STRESS_CAP + 4);
}

/*
 * A bounded pool: whether it signals room (parks) or not (sleeps and
 * retries), the producer gets every task in, never more than the cap
 * waiting. The pool's `queued` counts waiting tasks, in its ring (at most
 * the cap) and in each worker's batch (at most one: a bounded pool takes
 * one at a time).
 */
static void execute_wait_paces_a_producer_on_a_bounded_pool(void **state)
{
    struct fixture *f = *state;
    uint64_t peak = 0;

    stress_init(f);
    make_pool(f, 2, 4);
    for (size_t i = 0; i < 2000; i++) {
        assert_int_equal(
            serex_execute_wait(f->pool, burst_task, &f->many[i], SEREX_FOREVER),
            SEREX_OK);
        accepted(f);
        if (stats_of(f->pool).queued > peak)
            peak = stats_of(f->pool).queued;
    }
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(ran_of(f), 2000);
    assert_true(peak <= 4 + 2);
    /* accepted, not finished: the cap, and one per worker */
    assert_true(atomic_load(&f->peak) <= 4 + 2);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(serial_capacity_is_exact),
        T(serial_running_task_does_not_count),
        T(serial_shutdown_now_frees_the_places),
        T(striped_capacities_are_exact),
        T(striped_lane_capacity_alone_caps_each_key),
        T(serial_over_pool_holds_a_burst_to_its_capacity),
        T(execute_wait_returns_once_room_is_made),
        T(striped_execute_wait_returns_once_room_is_made),
        T(execute_wait_times_out_when_nobody_makes_room),
        T(execute_wait_with_timeout_0_tries_once),
        T(execute_wait_from_a_task_of_its_full_serial_is_edeadlk),
        T(execute_wait_from_a_task_of_its_target_with_room_is_edeadlk),
        T(execute_wait_retries_a_user_executor_after_sleeps),
        T(execute_wait_bad_input_is_einval),
        T(execute_wait_ends_with_erejected_on_shutdown),
        T(execute_wait_stress_serial_on_pool),
        T(execute_wait_stress_striped_on_pool),
        T(execute_wait_paces_a_producer_on_a_bounded_pool),
    };
#undef T

    return cmocka_run_group_tests_name("backpressure", tests, NULL, NULL);
}
