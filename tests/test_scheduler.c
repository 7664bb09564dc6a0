/* SPDX-License-Identifier: MIT */
/*
 * test_scheduler.c - the delayed scheduler (promise 6 of docs/contract.md,
 * and 1, 2, 7, 8): bad input; manual mode (never early, exact due times,
 * due order and ties, delays far past one turn of a tiny wheel, fixed rate
 * without drift and with coalescing, fixed delay, the missed-run policies
 * and serex_timer_overrun); cancel in every state (after shutdown too),
 * and racing with firing on a pool; release; the pending count and its
 * cap (exact under producers on several shards); a target that refuses
 * or takes back a run (a full one: a periodic timer's run missed, or its
 * end, by policy); shutdown and shutdown_now accounting; the executor
 * face; EDEADLK; destroy waiting for runs on targets (a pool, a manual
 * executor), and not for a run that cannot come; allocation failure; the
 * threaded timer thread (never early, coalescing, custom clocks, periodic
 * runs never overlapping); and batches (issue 21: one task per target per
 * fire, its runs in due order; more targets than the batcher holds;
 * cancel inside a batch; a batch taken back, refused, or awaiting its
 * scheduler from inside; a pool's shutdown_now taking batches back while
 * cancels race).
 */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#include "scheduler_internal.h" /* the coalescing window */
#include "test_wrap_executor.h" /* a target that counts its executes */

#define US INT64_C(1000)

#define NLOG 4096
/* Tasks a batch of @n runs makes on its target: 8 runs a task (the
 * scheduler's BATCH_RUNS; each passes the rest on). */
#define RUN_TASKS(n) (((n) + 7) / 8)

struct fixture {
    serex_scheduler *s;
    serex_executor *manual; /* a manual executor target, when used */
    _Atomic size_t nlog;
    int log[NLOG];        /* which task ran, in order */
    int64_t at[NLOG];     /* the scheduler's clock when it ran */
    int ids[NLOG];        /* arguments: &ids[i] == task i */
};

static struct fixture *fx_of(void *arg);
static struct fixture *current; /* the fixture of the running test */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    for (int i = 0; i < NLOG; i++)
        f->ids[i] = i;
    current = f;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    if (f->s != NULL) {
        serex_executor *face = serex_scheduler_executor(f->s);

        serex_shutdown_now(face, NULL, NULL);
        /* destroy waits for runs handed to targets: drop those still
         * queued on the manual executor (each timer ends), so it need
         * not wait for a run that nobody will make */
        if (f->manual != NULL)
            serex_shutdown_now(f->manual, NULL, NULL);
        assert_int_equal(serex_destroy(face), SEREX_OK);
    }
    if (f->manual != NULL)
        assert_int_equal(serex_destroy(f->manual), SEREX_OK);
    free(f);
    return 0;
}

static struct fixture *fx_of(void *arg)
{
    (void)arg;
    return current;
}

/* Logs which task ran, and when on the scheduler's clock. */
static void log_task(void *arg)
{
    struct fixture *f = fx_of(arg);
    /* relaxed: a slot index; the log is read after await or advance */
    size_t n = atomic_fetch_add_explicit(&f->nlog, 1, memory_order_relaxed);

    if (n < NLOG) {
        f->log[n] = *(int *)arg;
        f->at[n] = serex_scheduler_now(f->s);
    }
}

static size_t nlog(struct fixture *f)
{
    return atomic_load(&f->nlog);
}

static serex_scheduler *make_manual(struct fixture *f, unsigned wheel_size)
{
    serex_scheduler_config c = {0};

    c.manual = true;
    c.wheel_size = wheel_size;
    assert_int_equal(serex_scheduler_create(&c, &f->s), SEREX_OK);
    return f->s;
}

/* --- bad input (promise 8) --- */

static void bad_input_is_einval(void **state)
{
    struct fixture *f = *state;
    serex_scheduler_config c = {0};
    serex_scheduler *s = (serex_scheduler *)&c, *threaded;
    serex_timer *t = (serex_timer *)&c;
    serex_executor bad = {NULL};

    assert_int_equal(serex_scheduler_create(NULL, NULL), SEREX_EINVAL);
    c.wheel_size = 500;
    assert_int_equal(serex_scheduler_create(&c, &s), SEREX_EINVAL);
    assert_null(s);
    c.wheel_size = 1u << 17;
    assert_int_equal(serex_scheduler_create(&c, &s), SEREX_EINVAL);
    c.wheel_size = 1;
    assert_int_equal(serex_scheduler_create(&c, &s), SEREX_EINVAL);
    c.wheel_size = 0;
    c.tick_ns = -1;
    assert_int_equal(serex_scheduler_create(&c, &s), SEREX_EINVAL);
    c.tick_ns = 0;
    c.coalesce_ns = SEC + 1; /* over a second */
    assert_int_equal(serex_scheduler_create(&c, &s), SEREX_EINVAL);
    assert_null(s);
    c.coalesce_ns = 0;

    make_manual(f, 0);
    s = f->s;
    assert_int_equal(serex_schedule(NULL, NULL, 0, log_task, f->ids, &t),
                     SEREX_EINVAL);
    assert_null(t);
    assert_int_equal(serex_schedule(s, NULL, -1, log_task, f->ids, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_schedule(s, NULL, 0, NULL, f->ids, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_schedule(s, &bad, 0, log_task, f->ids, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_schedule_fixed_rate(s, NULL, 0, 0, log_task,
                                               f->ids, &t), SEREX_EINVAL);
    assert_null(t);
    assert_int_equal(serex_schedule_fixed_rate(s, NULL, -1, MS, log_task,
                                               f->ids, NULL), SEREX_EINVAL);
    assert_int_equal(serex_schedule_fixed_rate(s, NULL, 0, -MS, log_task,
                                               f->ids, NULL), SEREX_EINVAL);
    assert_int_equal(serex_schedule_fixed_delay(s, NULL, 0, 0, log_task,
                                                f->ids, NULL), SEREX_EINVAL);
    assert_int_equal(serex_schedule_fixed_delay(s, NULL, -5, MS, log_task,
                                                f->ids, NULL), SEREX_EINVAL);
    assert_int_equal(serex_scheduler_advance(s, -1), SEREX_EINVAL);
    assert_int_equal(serex_scheduler_advance(NULL, 1), SEREX_EINVAL);
    assert_int_equal(serex_scheduler_pending(s), 0);
    assert_false(serex_timer_cancel(NULL));
    serex_timer_release(NULL);
    assert_null(serex_scheduler_executor(NULL));

    /* advance on a scheduler that has its own thread */
    assert_int_equal(serex_scheduler_create(NULL, &threaded), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(threaded, MS), SEREX_EINVAL);
    assert_int_equal(serex_scheduler_run_until(threaded, NULL, 0, 0),
                     SEREX_EINVAL); /* not manual */
    assert_int_equal(serex_destroy(serex_scheduler_executor(threaded)),
                     SEREX_OK);
    assert_int_equal(nlog(f), 0);
}

/* --- manual mode: exact, never early, in order --- */

static void manual_one_shot_fires_at_due_never_before(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);

    assert_int_equal(serex_schedule(s, NULL, 5 * MS, log_task, &f->ids[1],
                                    NULL), SEREX_OK);
    assert_int_equal(serex_scheduler_pending(s), 1);
    assert_int_equal(serex_scheduler_advance(s, 5 * MS - 1), SEREX_OK);
    assert_int_equal(nlog(f), 0);
    assert_int_equal(serex_scheduler_advance(s, 1), SEREX_OK);
    assert_int_equal(nlog(f), 1);
    assert_int_equal(f->at[0], 5 * MS);
    assert_int_equal(serex_scheduler_pending(s), 0);
    /* a zero delay is due now: it fires on the next advance, even of 0 */
    assert_int_equal(serex_schedule(s, NULL, 0, log_task, &f->ids[2], NULL),
                     SEREX_OK);
    assert_int_equal(nlog(f), 1);
    assert_int_equal(serex_scheduler_advance(s, 0), SEREX_OK);
    assert_int_equal(nlog(f), 2);
}

static void manual_fires_in_due_order_ties_in_schedule_order(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    /* sub-tick differences, equal times, and times on higher levels */
    const int64_t delay[] = {3 * MS, 1 * MS + 500, 1 * MS + 200, 3 * MS,
                             2000 * SEC, 1 * MS + 200, 0, 3 * MS, 600 * SEC};
    const int order[] = {6, 2, 5, 1, 0, 3, 7, 8, 4};
    const size_t n = sizeof delay / sizeof delay[0];

    for (size_t i = 0; i < n; i++)
        assert_int_equal(serex_schedule(s, NULL, delay[i], log_task,
                                        &f->ids[i], NULL), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 3000 * SEC), SEREX_OK);
    assert_int_equal(nlog(f), n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(f->log[i], order[i]);
        /* the clock is set to each due time as it fires */
        assert_int_equal(f->at[i], delay[order[i]]);
    }
}

/* A tiny wheel (4 slots a level), delays over many turns of every level,
 * random advances: every timer fires exactly at its due time. */
static void manual_far_delays_on_a_tiny_wheel(void **state)
{
    struct fixture *f = *state;
    serex_scheduler_config c = {0};
    enum { N = 1000 };
    static int64_t due[N];
    uint64_t x = 42;
    size_t fired;

    c.manual = true;
    c.wheel_size = 4;
    c.tick_ns = 1000;
    assert_int_equal(serex_scheduler_create(&c, &f->s), SEREX_OK);
    for (int i = 0; i < N; i++) {
        x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        due[i] = (int64_t)((x >> 33) % (3600 * (uint64_t)SEC)) >> (i % 30);
        assert_int_equal(serex_schedule(f->s, NULL, due[i], log_task,
                                        &f->ids[i], NULL), SEREX_OK);
    }
    while ((fired = nlog(f)) < N) {
        x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        assert_int_equal(serex_scheduler_advance(f->s, (int64_t)(x >> 33) *
                                                           1000), SEREX_OK);
        for (size_t i = fired; i < nlog(f); i++) {
            assert_int_equal(f->at[i], due[f->log[i]]);
            assert_true(i == 0 || f->at[i] >= f->at[i - 1]);
        }
        /* nothing left that is due */
        for (int i = 0; i < N; i++) {
            bool ran = false;

            for (size_t j = 0; j < nlog(f) && !ran; j++)
                ran = f->log[j] == i;
            if (!ran)
                assert_true(due[i] > serex_scheduler_now(f->s));
        }
    }
    assert_int_equal(serex_scheduler_pending(f->s), 0);
}

static void manual_fixed_rate_has_no_drift(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    serex_timer *t;

    assert_int_equal(serex_schedule_fixed_rate(s, NULL, 3 * MS, 10 * MS,
                                               log_task, f->ids, &t),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 3 * MS + 1000 * MS - 1),
                     SEREX_OK);
    assert_int_equal(nlog(f), 100);
    for (size_t i = 0; i < 100; i++)
        assert_int_equal(f->at[i], 3 * MS + (int64_t)i * 10 * MS);
    assert_int_equal(serex_scheduler_advance(s, 1), SEREX_OK);
    assert_int_equal(nlog(f), 101);
    assert_true(serex_timer_cancel(t));
    assert_false(serex_timer_cancel(t));
    serex_timer_release(t);
    assert_int_equal(serex_scheduler_advance(s, SEC), SEREX_OK);
    assert_int_equal(nlog(f), 101);
    assert_int_equal(serex_scheduler_pending(s), 0);
}

/* Runs wait on a manual executor: a stall coalesces the missed runs into
 * one, and the next run is back on the grid. */
static void manual_fixed_rate_coalesces_missed_runs(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_schedule_fixed_rate(s, f->manual, 0, 10 * MS,
                                               log_task, f->ids, NULL),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 55 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->manual), 1); /* one run, not six */
    assert_int_equal(f->at[0], 55 * MS);
    assert_int_equal(serex_scheduler_advance(s, 5 * MS - 1), SEREX_OK);
    assert_int_equal(test_run_all(f->manual), 0);
    assert_int_equal(serex_scheduler_advance(s, 1), SEREX_OK); /* at 60 */
    assert_int_equal(test_run_all(f->manual), 1);
    assert_int_equal(f->at[1], 60 * MS);
    assert_int_equal(serex_scheduler_advance(s, 10 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->manual), 1);
    assert_int_equal(f->at[2], 70 * MS);
}

/* A run longer than the period: the points passed while it ran make one
 * run at once, then the grid again (runs back to back, never queued). */
static void long_task(void *arg)
{
    struct fixture *f = fx_of(arg);

    log_task(arg);
    /* the run takes 25 ms of manual time: a nested advance moves the
     * clock, as time passing would */
    if (nlog(f) == 1)
        assert_int_equal(serex_scheduler_advance(f->s, 25 * MS), SEREX_OK);
}

static void manual_fixed_rate_long_run_is_followed_at_once(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_schedule_fixed_rate(s, f->manual, 0, 10 * MS,
                                               long_task, f->ids, NULL),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 0), SEREX_OK);
    assert_int_equal(test_run_all(f->manual), 1); /* 0 .. 25 ms */
    assert_int_equal(serex_scheduler_advance(s, 0), SEREX_OK);
    assert_int_equal(test_run_all(f->manual), 1); /* for 10 and 20, at 25 */
    assert_int_equal(f->at[1], 25 * MS);
    assert_int_equal(serex_scheduler_advance(s, 5 * MS - 1), SEREX_OK);
    assert_int_equal(test_run_all(f->manual), 0);
    assert_int_equal(serex_scheduler_advance(s, 1), SEREX_OK); /* 30 */
    assert_int_equal(test_run_all(f->manual), 1);
    assert_int_equal(f->at[2], 30 * MS);
}

/* --- missed-run policies (serex_schedule_fixed_rate_missed) --- */

struct missed_log {
    int64_t long_ms;          /* the first run takes this long */
    size_t n;
    int64_t at[16];           /* the clock at each run's start */
    uint64_t overrun[16];     /* serex_timer_overrun() in each run */
};

static struct missed_log *missed_current;

static void missed_task(void *arg)
{
    struct fixture *f = fx_of(arg);
    struct missed_log *m = missed_current;

    if (m->n < 16) {
        m->at[m->n] = serex_scheduler_now(f->s);
        m->overrun[m->n] = serex_timer_overrun();
    }
    if (m->n++ == 0 && m->long_ms > 0) /* a long run: time passes in it */
        assert_int_equal(serex_scheduler_advance(f->s, m->long_ms * MS),
                         SEREX_OK);
}

/*
 * A fixed-rate timer, 10 ms grid from 10 ms, whose runs wait on a manual
 * executor: the first waits @stall_ms before the test runs it (a busy
 * target), or takes @long_ms. Then time moves 1 ms at a time to 70 ms,
 * every due run taken at once. @want: "at:overrun" pairs, in ms.
 */
static void missed_case(struct fixture *f, serex_missed_policy policy,
                        int64_t stall_ms, int64_t long_ms,
                        const int64_t (*want)[2], size_t nwant)
{
    struct missed_log m = {.long_ms = long_ms};
    serex_scheduler *s = make_manual(f, 0);

    missed_current = &m;
    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_schedule_fixed_rate_missed(
                         s, f->manual, 10 * MS, 10 * MS, policy, missed_task,
                         f->ids, NULL),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 10 * MS), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, stall_ms * MS), SEREX_OK);
    while (serex_scheduler_now(s) < 70 * MS) {
        do
            assert_int_equal(serex_scheduler_advance(s, 0), SEREX_OK);
        while (test_run_all(f->manual) > 0);
        assert_int_equal(serex_scheduler_advance(s, 1 * MS), SEREX_OK);
    }
    assert_true(m.n >= nwant);
    for (size_t i = 0; i < nwant; i++) {
        if (m.at[i] != want[i][0] * MS || m.overrun[i] != (uint64_t)want[i][1])
            fail_msg("policy %d run %zu: at %lld ms overrun %llu, want %lld "
                     "ms overrun %lld", (int)policy, i,
                     (long long)(m.at[i] / MS),
                     (unsigned long long)m.overrun[i], (long long)want[i][0],
                     (long long)want[i][1]);
    }
    missed_current = NULL;
}

/* Each policy's runs ("at:overrun", ms) in two scenarios; up to 6. */
struct missed_want {
    serex_missed_policy policy;
    size_t n;
    int64_t runs[6][2];
};

static void missed_cases(void **state, int64_t stall_ms, int64_t long_ms,
                         const struct missed_want *w)
{
    for (int i = 0; i < 4; i++) {
        if (i > 0) /* a fresh scheduler and executor for each policy */
            teardown(state), setup(state);
        missed_case(*state, w[i].policy, stall_ms, long_ms, w[i].runs,
                    w[i].n);
    }
}

/* The first run starts 35 ms late, at 45 ms: points 20, 30, 40 missed. */
static void missed_policies_after_a_stall(void **state)
{
    static const struct missed_want w[4] = {
        {SEREX_MISSED_COALESCE, 3, {{45, 3}, {50, 0}, {60, 0}}},
        {SEREX_MISSED_BURST, 6,
         {{45, 0}, {45, 0}, {45, 0}, {45, 0}, {50, 0}, {60, 0}}},
        {SEREX_MISSED_SKIP, 3, {{45, 3}, {50, 0}, {60, 0}}},
        {SEREX_MISSED_DELAY, 3, {{45, 3}, {55, 0}, {65, 0}}},
    };

    missed_cases(state, 35, 0, w);
}

/* The first run starts on time at 10 ms and ends at 35 ms. */
static void missed_policies_after_a_long_run(void **state)
{
    static const struct missed_want w[4] = {
        {SEREX_MISSED_COALESCE, 3, {{10, 0}, {35, 1}, {40, 0}}},
        {SEREX_MISSED_BURST, 4, {{10, 0}, {35, 0}, {35, 0}, {40, 0}}},
        /* 20 and 30 passed with no run: the run at 40 says 2 */
        {SEREX_MISSED_SKIP, 3, {{10, 0}, {40, 2}, {50, 0}}},
        {SEREX_MISSED_DELAY, 4, {{10, 0}, {35, 1}, {45, 0}, {55, 0}}},
    };

    missed_cases(state, 0, 25, w);
}

static void missed_policy_bad_input_and_overrun_outside(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    serex_timer *t = (serex_timer *)1;

    assert_int_equal(serex_schedule_fixed_rate_missed(
                         s, NULL, 0, 10 * MS, (serex_missed_policy)4,
                         log_task, f->ids, &t),
                     SEREX_EINVAL);
    assert_null(t);
    assert_int_equal(serex_schedule_fixed_rate_missed(
                         s, NULL, 0, 0, SEREX_MISSED_SKIP, log_task, f->ids,
                         NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_timer_overrun(), 0); /* not in a run */
}

/* --- serex_scheduler_run_until: the test's whole clock --- */

struct retry {
    serex_scheduler *s;
    serex_executor *ex;
    int64_t backoff, at[8];
    int attempts, failures;
};

static void retry_attempt(void *arg)
{
    struct retry *r = arg;

    r->at[r->attempts] = serex_scheduler_now(r->s);
    if (++r->attempts <= r->failures) {
        assert_int_equal(serex_schedule(r->s, r->ex, r->backoff,
                                        retry_attempt, r, NULL),
                         SEREX_OK);
        r->backoff *= 2;
    }
}

/* Retry with backoff, over a serial on a manual executor: one call runs
 * it all, each attempt at its exact due time. */
static void run_until_gives_every_task_its_exact_time(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    serex_executor *serial, *exs[1];
    struct retry r = {.s = s, .backoff = 100 * MS, .failures = 3};

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_serial_create(f->manual, NULL, &serial), SEREX_OK);
    r.ex = serial;
    exs[0] = f->manual;
    assert_int_equal(serex_execute(serial, retry_attempt, &r), SEREX_OK);
    /* a one-shot due at 260 ms on the same executor sees 260, not 1 s */
    assert_int_equal(serex_schedule(s, f->manual, 260 * MS, log_task,
                                    &f->ids[7], NULL),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_run_until(s, exs, 1, 1 * SEC), SEREX_OK);
    assert_int_equal(r.attempts, 4);
    assert_int_equal(r.at[0], 0);
    assert_int_equal(r.at[1], 100 * MS);
    assert_int_equal(r.at[2], 300 * MS);
    assert_int_equal(r.at[3], 700 * MS);
    assert_int_equal(nlog(f), 1);
    assert_int_equal(f->at[0], 260 * MS);
    assert_int_equal(serex_scheduler_now(s), 1 * SEC);
    assert_int_equal(serex_scheduler_pending(s), 0);
    assert_int_equal(serex_destroy(serial), SEREX_OK);
}

/* A periodic timer: each run at its grid point; the clock ends at the
 * deadline, and what is due after it waits. */
static void run_until_stops_at_the_deadline(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    serex_executor *exs[1];
    serex_timer *t;

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    exs[0] = f->manual;
    assert_int_equal(serex_schedule_fixed_rate(s, f->manual, 10 * MS, 10 * MS,
                                               log_task, &f->ids[1], &t),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_run_until(s, exs, 1, 55 * MS), SEREX_OK);
    assert_int_equal(nlog(f), 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(f->at[i], (int64_t)(i + 1) * 10 * MS);
    assert_int_equal(serex_scheduler_now(s), 55 * MS);
    assert_int_equal(serex_scheduler_run_until(s, exs, 1, 60 * MS), SEREX_OK);
    assert_int_equal(nlog(f), 6); /* 60 is not after the deadline */
    assert_int_equal(serex_scheduler_run_until(s, exs, 1, 59 * MS),
                     SEREX_EINVAL); /* time never moves back */
    assert_int_equal(serex_scheduler_run_until(NULL, exs, 1, 60 * MS),
                     SEREX_EINVAL);
    assert_int_equal(serex_scheduler_run_until(s, NULL, 1, 60 * MS),
                     SEREX_EINVAL);
    assert_true(serex_timer_cancel(t));
    serex_timer_release(t);
}

/* --- the timer thread's hooks --- */

struct hook_log {
    _Atomic int starts, stops, refuse;
    _Atomic int ran_after_start; /* a timer ran after the start hook */
};

static int hook_start(void *ctx, unsigned index)
{
    struct hook_log *h = ctx;

    assert_int_equal(index, 0);
    atomic_fetch_add(&h->starts, 1);
    return atomic_load(&h->refuse);
}

static void hook_stop(void *ctx, unsigned index)
{
    struct hook_log *h = ctx;

    assert_int_equal(index, 0);
    atomic_fetch_add(&h->stops, 1);
}

static void hook_timer(void *arg)
{
    struct hook_log *h = arg;

    /* on the timer thread (target NULL): its start hook came first */
    atomic_store(&h->ran_after_start, atomic_load(&h->starts) == 1 &&
                                          atomic_load(&h->stops) == 0);
}

static void timer_thread_hooks_run_around_it(void **state)
{
    struct hook_log h;
    serex_scheduler_config c = {0};
    serex_scheduler *s;

    (void)state;
    atomic_init(&h.starts, 0);
    atomic_init(&h.stops, 0);
    atomic_init(&h.refuse, 0);
    atomic_init(&h.ran_after_start, 0);
    c.on_thread_start = hook_start;
    c.on_thread_stop = hook_stop;
    c.hook_ctx = &h;
    assert_int_equal(serex_scheduler_create(&c, &s), SEREX_OK);
    assert_int_equal(atomic_load(&h.starts), 1); /* before create returns */
    assert_int_equal(serex_schedule(s, NULL, 0, hook_timer, &h, NULL),
                     SEREX_OK);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    assert_int_equal(atomic_load(&h.ran_after_start), 1);
    assert_int_equal(atomic_load(&h.stops), 1); /* after its last run */

    atomic_store(&h.refuse, 1); /* a refusing start hook: nothing left */
    s = (serex_scheduler *)&c;
    assert_int_equal(serex_scheduler_create(&c, &s), SEREX_EREJECTED);
    assert_null(s);
    assert_int_equal(atomic_load(&h.starts), 2);
    assert_int_equal(atomic_load(&h.stops), 1); /* refused: no stop hook */

    c.manual = true; /* no thread, no hooks */
    assert_int_equal(serex_scheduler_create(&c, &s), SEREX_OK);
    assert_int_equal(atomic_load(&h.starts), 2);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
}

/* --- what shutdown does with pending one-shots (cfg.on_shutdown) --- */

static void count_handed(serex_fn fn, void *arg, void *ctx)
{
    struct fixture *f = ctx;
    size_t n = atomic_fetch_add(&f->nlog, 1);

    (void)fn;
    if (n < NLOG)
        f->log[n] = 1000 + *(int *)arg; /* handed back, not run */
}

/* A time-out service: its destroy must not wait an hour for a pending
 * time-out. If it did, this test would hang (and ctest fail it). */
static void shutdown_policy_hand_back_and_drop(void **state)
{
    struct fixture *f = *state;
    serex_scheduler_config c = {0};
    serex_scheduler *s;

    c.on_shutdown = SEREX_PENDING_HAND_BACK; /* needs on_rejected */
    assert_int_equal(serex_scheduler_create(&c, &s), SEREX_EINVAL);
    c.on_shutdown = (serex_pending_policy)3;
    assert_int_equal(serex_scheduler_create(&c, &s), SEREX_EINVAL);

    c.on_shutdown = SEREX_PENDING_HAND_BACK;
    c.on_rejected = count_handed;
    c.on_rejected_ctx = f;
    assert_int_equal(serex_scheduler_create(&c, &s), SEREX_OK);
    f->s = s;
    /* due in this order: task 2 (1 h), task 1 (2 h) */
    assert_int_equal(serex_schedule(s, NULL, 7200 * SEC, log_task, &f->ids[1],
                                    NULL),
                     SEREX_OK);
    assert_int_equal(serex_schedule(s, NULL, 3600 * SEC, log_task, &f->ids[2],
                                    NULL),
                     SEREX_OK);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    f->s = NULL;
    assert_int_equal(nlog(f), 2); /* handed back, in due order, not run */
    assert_int_equal(f->log[0], 1002);
    assert_int_equal(f->log[1], 1001);

    c.on_shutdown = SEREX_PENDING_DROP;
    assert_int_equal(serex_scheduler_create(&c, &s), SEREX_OK);
    assert_int_equal(serex_schedule(s, NULL, 3600 * SEC, log_task, &f->ids[3],
                                    NULL),
                     SEREX_OK);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    assert_int_equal(nlog(f), 2); /* dropped: neither run nor handed */
}

static void manual_fixed_delay_counts_from_the_end_of_a_run(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_schedule_fixed_delay(s, f->manual, 1 * MS, 10 * MS,
                                                log_task, f->ids, NULL),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 4 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->manual), 1); /* ends at 4 ms */
    assert_int_equal(serex_scheduler_advance(s, 10 * MS - 1), SEREX_OK);
    assert_int_equal(test_run_all(f->manual), 0);
    assert_int_equal(serex_scheduler_advance(s, 1), SEREX_OK); /* 14 ms */
    assert_int_equal(test_run_all(f->manual), 1);
    assert_int_equal(f->at[1], 14 * MS);
}

static void manual_delays_saturate_never_wrap(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    serex_timer *t;

    assert_int_equal(serex_scheduler_advance(s, SEC), SEREX_OK);
    assert_int_equal(serex_schedule(s, NULL, INT64_MAX, log_task, f->ids,
                                    &t), SEREX_OK);
    assert_int_equal(serex_schedule_fixed_rate(s, NULL, INT64_MAX - 5,
                                               INT64_MAX, log_task, f->ids,
                                               NULL), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, INT64_MAX / 2), SEREX_OK);
    assert_int_equal(nlog(f), 0);
    assert_int_equal(serex_scheduler_pending(s), 2);
    assert_true(serex_timer_cancel(t));
    serex_timer_release(t);
    assert_int_equal(serex_scheduler_pending(s), 1);
}

/* Found by the fuzzer: advance once the clock saturates at INT64_MAX
 * looped for ever (INT64_MAX was both "no timer" and a due time); and a
 * periodic timer whose next run saturates ends instead of re-firing. */
static void manual_advance_at_the_end_of_time_returns(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);

    assert_int_equal(serex_scheduler_advance(s, INT64_MAX - 20), SEREX_OK);
    assert_int_equal(serex_schedule_fixed_rate(s, NULL, 10, 5, log_task,
                                               f->ids, NULL), SEREX_OK);
    assert_int_equal(serex_schedule(s, NULL, INT64_MAX, log_task, f->ids,
                                    NULL), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 19), SEREX_OK);
    assert_int_equal(nlog(f), 2); /* MAX - 10, MAX - 5 */
    assert_int_equal(serex_scheduler_advance(s, 1), SEREX_OK);
    assert_int_equal(nlog(f), 4); /* at MAX: the periodic one, the other */
    assert_int_equal(serex_scheduler_advance(s, 1000), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, INT64_MAX), SEREX_OK);
    assert_int_equal(nlog(f), 4);
    assert_int_equal(serex_scheduler_pending(s), 0);
    assert_int_equal(serex_scheduler_now(s), INT64_MAX);
}

/* --- cancel and release --- */

static void cancel_in_every_state(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    serex_timer *pending, *queued, *ran;

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_schedule(s, f->manual, 10 * MS, log_task,
                                    &f->ids[1], &pending), SEREX_OK);
    assert_int_equal(serex_schedule(s, f->manual, 1 * MS, log_task,
                                    &f->ids[2], &queued), SEREX_OK);
    assert_int_equal(serex_schedule(s, f->manual, 1 * MS, log_task,
                                    &f->ids[3], &ran), SEREX_OK);
    assert_int_equal(serex_scheduler_pending(s), 3);
    /* pending: unlinked at once */
    assert_true(serex_timer_cancel(pending));
    assert_int_equal(serex_scheduler_pending(s), 2);
    assert_int_equal(serex_scheduler_advance(s, 1 * MS), SEREX_OK);
    /* handed to its target, not started: the run is skipped */
    assert_true(serex_timer_cancel(queued));
    assert_int_equal(test_run_all(f->manual), 1); /* one batch: both runs */
    assert_int_equal(nlog(f), 1);
    assert_int_equal(f->log[0], 3);
    /* done: too late */
    assert_false(serex_timer_cancel(ran));
    assert_false(serex_timer_cancel(queued));
    assert_false(serex_timer_cancel(pending));
    assert_int_equal(serex_scheduler_advance(s, 100 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->manual), 0);
    assert_int_equal(nlog(f), 1);
    assert_int_equal(serex_scheduler_pending(s), 0);
    serex_timer_release(pending);
    serex_timer_release(queued);
    serex_timer_release(ran);
}

static void release_does_not_cancel(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    serex_timer *t;

    assert_int_equal(serex_schedule(s, NULL, MS, log_task, f->ids, &t),
                     SEREX_OK);
    serex_timer_release(t);
    assert_int_equal(serex_scheduler_advance(s, MS), SEREX_OK);
    assert_int_equal(nlog(f), 1);
}

struct self_cancel {
    serex_timer *t;
    int runs;
    bool cancelled;
};

static void self_cancel_task(void *arg)
{
    struct self_cancel *sc = arg;

    if (++sc->runs == 3)
        sc->cancelled = serex_timer_cancel(sc->t);
}

static void periodic_cancelled_from_its_own_run(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    struct self_cancel sc = {0};

    assert_int_equal(serex_schedule_fixed_rate(s, NULL, MS, MS,
                                               self_cancel_task, &sc, &sc.t),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 100 * MS), SEREX_OK);
    assert_int_equal(sc.runs, 3);
    assert_true(sc.cancelled);
    assert_int_equal(serex_scheduler_pending(s), 0);
    serex_timer_release(sc.t);
}

static void cap_gives_efull(void **state)
{
    struct fixture *f = *state;
    serex_scheduler_config c = {0};
    serex_timer *t[3], *extra;

    c.manual = true;
    c.max_timers = 3;
    assert_int_equal(serex_scheduler_create(&c, &f->s), SEREX_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(serex_schedule(f->s, NULL, SEC, log_task, f->ids,
                                        &t[i]), SEREX_OK);
    assert_int_equal(serex_schedule(f->s, NULL, SEC, log_task, f->ids,
                                    &extra), SEREX_EFULL);
    assert_null(extra);
    assert_true(serex_timer_cancel(t[1]));
    assert_int_equal(serex_schedule(f->s, NULL, SEC, log_task, f->ids, NULL),
                     SEREX_OK);
    for (int i = 0; i < 3; i++)
        serex_timer_release(t[i]);
    assert_int_equal(serex_scheduler_advance(f->s, SEC), SEREX_OK);
    assert_int_equal(nlog(f), 3);
}

/*
 * The cap is exact with producers on several shards (issue 20: the sum of
 * the shards' counts was read under one shard's lock, and two producers
 * on two shards could both take the last place: 1001 with a cap of 1000).
 * No timer finishes (they are due in an hour), so every producer scheduling
 * until SEREX_EFULL must end with exactly the cap scheduled, in every
 * round; new threads each round land on other shards.
 */
enum { CAP_THREADS = 4, CAP_N = 32, CAP_ROUNDS = 400 };

struct cap_race {
    serex_scheduler *s;
    _Atomic int ready, go, bad;
    _Atomic size_t ok;
    serex_timer *t[CAP_THREADS][CAP_N + 1];
    size_t n[CAP_THREADS];
};

static struct cap_race *cap_of;

static int cap_producer(void *arg)
{
    struct cap_race *c = cap_of;
    int p = (int)(intptr_t)arg;

    atomic_fetch_add(&c->ready, 1);
    while (!atomic_load(&c->go))
        serex__thread_yield();
    for (;;) {
        serex_timer *t;
        int rc = serex_schedule(c->s, NULL, 3600 * SEC, log_task, NULL, &t);

        if (rc == SEREX_EFULL)
            break;
        if (rc != SEREX_OK || c->n[p] > CAP_N) {
            atomic_store(&c->bad, 1);
            break;
        }
        c->t[p][c->n[p]++] = t;
        atomic_fetch_add(&c->ok, 1);
    }
    return 0;
}

static void cap_is_exact_under_producers_on_several_shards(void **state)
{
    struct fixture *f = *state;
    serex_scheduler_config c = {0};
    struct cap_race *r = calloc(1, sizeof *r);
    serex__thread th[CAP_THREADS];

    assert_non_null(r);
    cap_of = r;
    c.max_timers = CAP_N;
    assert_int_equal(serex_scheduler_create(&c, &f->s), SEREX_OK);
    r->s = f->s;
    for (int round = 0; round < CAP_ROUNDS; round++) {
        atomic_store(&r->ready, 0);
        atomic_store(&r->go, 0);
        atomic_store(&r->ok, 0);
        memset(r->n, 0, sizeof r->n);
        for (int p = 0; p < CAP_THREADS; p++)
            assert_int_equal(
                serex__thread_start(&th[p], cap_producer, (void *)(intptr_t)p),
                0);
        while (atomic_load(&r->ready) < CAP_THREADS)
            serex__thread_yield();
        atomic_store(&r->go, 1);
        for (int p = 0; p < CAP_THREADS; p++)
            serex__thread_join(th[p]);
        assert_int_equal(atomic_load(&r->bad), 0);
        if (atomic_load(&r->ok) != CAP_N)
            fail_msg("round %d: %zu timers scheduled under a cap of %d", round,
                     atomic_load(&r->ok), CAP_N);
        assert_int_equal(serex_scheduler_pending(f->s), CAP_N);
        for (int p = 0; p < CAP_THREADS; p++)
            for (size_t i = 0; i < r->n[p]; i++) {
                assert_true(serex_timer_cancel(r->t[p][i]));
                serex_timer_release(r->t[p][i]);
            }
        assert_int_equal(serex_scheduler_pending(f->s), 0);
    }
    free(r);
}

/* --- targets that refuse or take back runs --- */

struct rejected {
    int n;
    serex_fn fn;
    void *arg;
};

static void on_rejected(serex_fn fn, void *arg, void *ctx)
{
    struct rejected *r = ctx;

    r->n++;
    r->fn = fn;
    r->arg = arg;
}

static void refused_runs_are_counted_and_handed_over(void **state)
{
    struct fixture *f = *state;
    serex_scheduler_config c = {0};
    struct rejected r = {0};
    serex_timer *periodic;

    c.manual = true;
    c.on_rejected = on_rejected;
    c.on_rejected_ctx = &r;
    assert_int_equal(serex_scheduler_create(&c, &f->s), SEREX_OK);
    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_schedule(f->s, f->manual, MS, log_task,
                                    &f->ids[7], NULL), SEREX_OK);
    assert_int_equal(serex_schedule_fixed_rate(f->s, f->manual, MS, MS,
                                               log_task, &f->ids[8],
                                               &periodic), SEREX_OK);
    serex_shutdown(f->manual);
    assert_int_equal(serex_scheduler_advance(f->s, 10 * MS), SEREX_OK);
    assert_int_equal(serex_scheduler_rejected(f->s), 2);
    assert_int_equal(r.n, 2);
    assert_ptr_equal(r.fn, log_task);
    assert_int_equal(nlog(f), 0);
    /* the periodic timer ended there */
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    assert_false(serex_timer_cancel(periodic));
    serex_timer_release(periodic);
}

/*
 * A periodic timer aimed at a bounded target that is full (issue 20: it
 * ended at the first refused run, silently without on_rejected). By
 * default the run is missed: counted as rejected, not handed to
 * on_rejected (the timer still uses its argument), and told to the next
 * run by serex_timer_overrun; the timer goes on. With SEREX_REFUSED_END it
 * ends there, its task handed to on_rejected. The target: a serial with
 * room for one task, on a manual executor, filled by another task.
 */
struct overruns {
    size_t n;
    uint64_t v[8];
    int64_t at[8];
};

static void overrun_task(void *arg)
{
    struct overruns *o = arg;

    if (o->n < 8) {
        o->v[o->n] = serex_timer_overrun();
        o->at[o->n] = serex_scheduler_now(current->s);
    }
    o->n++;
}

/* Makes f->s (manual, on_rejected into @r, @policy) and a bounded serial
 * over f->manual, full; schedules the fixed-rate timer, 10 ms from 10 ms,
 * onto it. */
static serex_executor *refused_setup(struct fixture *f, struct rejected *r,
                                     int policy, struct overruns *o,
                                     serex_timer **t)
{
    serex_scheduler_config c = {0};
    serex_serial_config sc = {0};
    serex_executor *ser;

    c.manual = true;
    c.on_rejected = on_rejected;
    c.on_rejected_ctx = r;
    if (policy >= 0)
        c.periodic_refused = (serex_refused_policy)policy;
    assert_int_equal(serex_scheduler_create(&c, &f->s), SEREX_OK);
    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    sc.queue_capacity = 1;
    assert_int_equal(serex_serial_create(f->manual, &sc, &ser), SEREX_OK);
    assert_int_equal(serex_schedule_fixed_rate(f->s, ser, 10 * MS, 10 * MS,
                                               overrun_task, o, t),
                     SEREX_OK);
    assert_int_equal(serex_execute(ser, log_task, &f->ids[1]), SEREX_OK);
    assert_int_equal(serex_execute(ser, log_task, &f->ids[2]), SEREX_EFULL);
    return ser;
}

static void refused_periodic_run_is_missed_and_the_timer_goes_on(void **state)
{
    struct fixture *f = *state;
    struct rejected r = {0};
    struct overruns o = {0};
    serex_timer *t;
    serex_executor *ser = refused_setup(f, &r, -1, &o, &t);

    assert_int_equal(serex_scheduler_advance(f->s, 10 * MS), SEREX_OK);
    assert_int_equal(serex_scheduler_rejected(f->s), 1); /* the run at 10 */
    assert_int_equal(r.n, 0);
    assert_int_equal(serex_scheduler_pending(f->s), 1); /* it goes on */
    assert_int_equal(test_run_all(f->manual), 1);       /* the filler */
    assert_int_equal(nlog(f), 1);
    assert_int_equal(o.n, 0);
    assert_int_equal(serex_scheduler_advance(f->s, 10 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->manual), 1);
    assert_int_equal(serex_scheduler_advance(f->s, 10 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->manual), 1);
    assert_int_equal(o.n, 2);
    assert_int_equal(o.at[0], 20 * MS);
    assert_int_equal(o.v[0], 1); /* the point at 10 had no run */
    assert_int_equal(o.at[1], 30 * MS);
    assert_int_equal(o.v[1], 0);
    assert_true(serex_timer_cancel(t));
    serex_timer_release(t);
    assert_int_equal(serex_scheduler_rejected(f->s), 1);
    assert_int_equal(serex_destroy(ser), SEREX_OK);
}

static void refused_periodic_run_ends_the_timer_by_policy(void **state)
{
    struct fixture *f = *state;
    struct rejected r = {0};
    struct overruns o = {0};
    serex_timer *t;
    serex_executor *ser = refused_setup(f, &r, SEREX_REFUSED_END, &o, &t);
    serex_scheduler *s2;
    serex_scheduler_config bad = {0};

    assert_int_equal(serex_scheduler_advance(f->s, 10 * MS), SEREX_OK);
    assert_int_equal(serex_scheduler_rejected(f->s), 1);
    assert_int_equal(r.n, 1); /* ended: its task handed over */
    assert_ptr_equal(r.fn, overrun_task);
    assert_ptr_equal(r.arg, &o);
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    assert_false(serex_timer_cancel(t));
    serex_timer_release(t);
    assert_int_equal(test_run_all(f->manual), 1); /* the filler */
    assert_int_equal(serex_scheduler_advance(f->s, 50 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->manual), 0);
    assert_int_equal(o.n, 0);
    assert_int_equal(serex_destroy(ser), SEREX_OK);
    bad.periodic_refused = (serex_refused_policy)2;
    assert_int_equal(serex_scheduler_create(&bad, &s2), SEREX_EINVAL);
}

/* A target's shutdown_now hands back the user's own task in place of the
 * timer's run, and the timer ends. */
static void target_shutdown_now_hands_back_the_users_task(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    serex_fn fns[4];
    void *args[4];
    struct test_pending tp = {0, 4, fns, args};

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_schedule(s, f->manual, MS, log_task, &f->ids[5],
                                    NULL), SEREX_OK);
    assert_int_equal(serex_schedule_fixed_rate(s, f->manual, MS, MS,
                                               log_task, &f->ids[6], NULL),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, MS), SEREX_OK);
    assert_int_equal(serex_scheduler_pending(s), 2);
    /* both came due in one fire: one task, a batch of the two runs */
    assert_int_equal(serex_shutdown_now(f->manual, test_pending_cb, &tp), 1);
    assert_int_equal(tp.n, 1); /* the one-shot; the periodic one ended */
    assert_ptr_equal(fns[0], log_task);
    assert_ptr_equal(args[0], &f->ids[5]);
    assert_int_equal(serex_scheduler_pending(s), 0);
    assert_int_equal(nlog(f), 0);
}

/*
 * --- batches (issue 21): one task per target per fire ---
 * The due runs of one fire go to each target as one task that runs them
 * in due order (the essay in src/scheduler.c). The target here counts its
 * executes and passes them to the manual executor behind it, or refuses
 * them with `refuse`.
 */
struct counting {
    struct test_wrap w; /* first: the executor */
    atomic_int calls;
    int refuse; /* 0: pass on; else the status to refuse with */
};

/* Counted once the task is queued (the timer thread's test waits for
 * the count, then runs the queue). */
static int counting_execute(struct test_wrap *w, serex_fn fn, void *arg)
{
    struct counting *c = (struct counting *)(void *)w;
    int rc = c->refuse != 0 ? c->refuse : serex_execute(w->inner, fn, arg);

    atomic_fetch_add(&c->calls, 1);
    return rc;
}

static serex_executor *counting_init(struct counting *c, serex_executor *inner)
{
    memset(c, 0, sizeof *c);
    test_wrap_init(&c->w, inner, counting_execute);
    return &c->w.base;
}

/* 100 timers due at once onto one target: one execute, the 100 runs in
 * schedule order (ties), a periodic one among them; the next fire is
 * another task. */
static void batch_one_task_per_target_per_fire_in_order(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    struct counting c;
    serex_executor *w;
    serex_timer *p;
    serex_stats st;
    size_t k = 0;

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    w = counting_init(&c, f->manual);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(
            serex_schedule(s, w, 5 * MS, log_task, &f->ids[i], NULL), SEREX_OK);
        if (i == 49) /* the 51st of the fire: due 5, 7, 9 ... ms */
            assert_int_equal(serex_schedule_fixed_rate(s, w, 5 * MS, 2 * MS,
                                                       log_task, &f->ids[1000],
                                                       &p),
                             SEREX_OK);
    }
    for (int i = 100; i < 103; i++)
        assert_int_equal(
            serex_schedule(s, w, 7 * MS, log_task, &f->ids[i], NULL), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 5 * MS), SEREX_OK);
    assert_int_equal(atomic_load(&c.calls), 1);
    assert_int_equal(serex_scheduler_pending(s), 104);
    assert_int_equal(nlog(f), 0);
    assert_int_equal(test_run_all(f->manual), RUN_TASKS(101)); /* passed on */
    assert_int_equal(nlog(f), 101);
    for (int i = 0; i < 100; i++, k++) {
        if (i == 50) /* scheduled between the 50th and the 51st */
            assert_int_equal(f->log[k++], 1000);
        assert_int_equal(f->log[k], i);
        assert_int_equal(f->at[k], 5 * MS);
    }
    assert_int_equal(serex_scheduler_pending(s), 4); /* 3, and p re-armed */
    /* at 7 ms: the three, then p (re-armed after they were scheduled) */
    assert_int_equal(serex_scheduler_advance(s, 2 * MS), SEREX_OK);
    /* the first batch's tasks passed on the rest, and one from this fire */
    assert_int_equal(atomic_load(&c.calls), RUN_TASKS(101) + 1);
    assert_int_equal(test_run_all(f->manual), 1);
    assert_int_equal(nlog(f), 105);
    assert_int_equal(f->log[101], 100);
    assert_int_equal(f->log[102], 101);
    assert_int_equal(f->log[103], 102);
    assert_int_equal(f->log[104], 1000);
    assert_true(serex_timer_cancel(p));
    serex_timer_release(p);
    assert_int_equal(serex_scheduler_pending(s), 0);
    /* the scheduler's counts are of timers, as before */
    memset(&st, 0, sizeof st);
    assert_int_equal(serex_executor_stats(serex_scheduler_executor(s), &st),
                     SEREX_OK);
    assert_int_equal(st.submitted, 104);
    assert_int_equal(st.completed, 104);
    assert_int_equal(st.pending_timers, 0);
}

/* Two targets and the timer thread, interleaved in one fire: one task
 * each, in the order their first run came due; each in due order; the
 * timer thread's runs in place, during the advance. */
static void batch_per_target_two_targets_and_the_timer_thread(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    struct counting c1, c2;
    serex_executor *w1, *w2;

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    w1 = counting_init(&c1, f->manual);
    w2 = counting_init(&c2, f->manual);
    for (int i = 0; i < 30; i++)
        assert_int_equal(serex_schedule(s,
                                        i % 3 == 0   ? w1
                                        : i % 3 == 1 ? w2
                                                     : NULL,
                                        5 * MS, log_task, &f->ids[i], NULL),
                         SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 5 * MS), SEREX_OK);
    assert_int_equal(atomic_load(&c1.calls), 1);
    assert_int_equal(atomic_load(&c2.calls), 1);
    assert_int_equal(nlog(f), 10); /* the timer thread's, in place */
    for (int i = 0; i < 10; i++)
        assert_int_equal(f->log[i], 3 * i + 2);
    assert_int_equal(test_run_all(f->manual), 2 * RUN_TASKS(10));
    assert_int_equal(nlog(f), 30);
    /* each batch runs 8 and passes the other 2 on, behind the other
     * target's batch: w1's 8, w2's 8, w1's 2, w2's 2; each in due order */
    for (int i = 0; i < 10; i++) {
        int at1 = i < 8 ? 10 + i : 26 + (i - 8);
        int at2 = i < 8 ? 18 + i : 28 + (i - 8);

        assert_int_equal(f->log[at1], 3 * i);     /* w1's */
        assert_int_equal(f->log[at2], 3 * i + 1); /* w2's */
    }
    assert_int_equal(serex_scheduler_pending(s), 0);
}

/* More distinct targets in one fire than the batcher holds (64, in
 * src/scheduler.c): the first 64 get a batch each; a run on a target
 * beyond them is handed out alone, as before batches. Each target's runs
 * still run once each, in due order. */
#define BATCH_TARGETS_HELD 64
#define BATCH_MANY (BATCH_TARGETS_HELD + 6)

static void batch_more_targets_than_the_table(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    struct counting *c = calloc(BATCH_MANY, sizeof *c);
    int first[BATCH_MANY], second[BATCH_MANY];

    assert_non_null(c);
    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    for (int k = 0; k < BATCH_MANY; k++)
        counting_init(&c[k], f->manual);
    for (int r = 0; r < 2; r++) /* interleaved: each target's 2 runs */
        for (int k = 0; k < BATCH_MANY; k++)
            assert_int_equal(serex_schedule(s, &c[k].w.base, 5 * MS, log_task,
                                            &f->ids[r * BATCH_MANY + k], NULL),
                             SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 5 * MS), SEREX_OK);
    for (int k = 0; k < BATCH_MANY; k++)
        assert_int_equal(atomic_load(&c[k].calls),
                         k < BATCH_TARGETS_HELD ? 1 : 2);
    assert_int_equal(test_run_all(f->manual), BATCH_TARGETS_HELD + 12);
    assert_int_equal(nlog(f), 2 * BATCH_MANY);
    for (int k = 0; k < BATCH_MANY; k++)
        first[k] = second[k] = -1;
    for (int i = 0; i < 2 * BATCH_MANY; i++) {
        int id = f->log[i], k = id % BATCH_MANY;

        if (id < BATCH_MANY) {
            assert_int_equal(first[k], -1);
            first[k] = i;
        } else {
            assert_int_equal(second[k], -1);
            second[k] = i;
        }
    }
    for (int k = 0; k < BATCH_MANY; k++) /* each target in due order */
        assert_true(first[k] >= 0 && second[k] > first[k]);
    assert_int_equal(serex_scheduler_pending(s), 0);
    free(c);
}

/* A task that cancels another timer of its own batch (cancel_me). */
static serex_timer *cancel_me;
static bool cancel_said;

static void cancelling_task(void *arg)
{
    log_task(arg);
    cancel_said = serex_timer_cancel(cancel_me);
}

/*
 * Cancel of a run inside a batch that was handed to its target and has
 * not reached it: as cancel of a lone run handed over and not started.
 * True; the run is skipped; the timer counts as pending until the batch
 * passes it, and its record is free once that happened and the handle is
 * released (the next timer gets it). Also from a run of the same batch.
 */
static void batch_cancel_inside_a_batch_skips_and_frees(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    struct counting c;
    serex_executor *w;
    serex_timer *h[100], *again, *keeper;

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    w = counting_init(&c, f->manual);
    /* keeps the slab from emptying (an empty one starts afresh) */
    assert_int_equal(
        serex_schedule(s, NULL, SEC, log_task, &f->ids[0], &keeper), SEREX_OK);
    for (int i = 0; i < 100; i++)
        assert_int_equal(serex_schedule(s, w, 5 * MS,
                                        i == 9 ? cancelling_task : log_task,
                                        &f->ids[i], &h[i]),
                         SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 5 * MS), SEREX_OK);
    assert_int_equal(atomic_load(&c.calls), 1);
    /* the 50th: after the fire, before the batch runs */
    assert_true(serex_timer_cancel(h[49]));
    assert_false(serex_timer_cancel(h[49]));           /* once */
    assert_int_equal(serex_scheduler_pending(s), 101); /* as a lone run */
    cancel_me = h[60]; /* the 10th run cancels the 61st */
    cancel_said = false;
    assert_int_equal(test_run_all(f->manual), RUN_TASKS(100));
    assert_true(cancel_said);
    assert_int_equal(nlog(f), 98);
    for (int i = 0, k = 0; i < 100; i++) {
        if (i == 49 || i == 60)
            continue;
        assert_int_equal(f->log[k++], i);
    }
    assert_int_equal(serex_scheduler_pending(s), 1); /* the keeper */
    for (int i = 0; i < 100; i++) {
        assert_false(serex_timer_cancel(h[i])); /* ran, or cancelled */
        if (i != 49)
            serex_timer_release(h[i]);
    }
    serex_timer_release(h[49]); /* its record is free now: reused first */
    assert_int_equal(serex_schedule(s, w, MS, log_task, &f->ids[0], &again),
                     SEREX_OK);
    assert_ptr_equal(again, h[49]);
    assert_true(serex_timer_cancel(again));
    serex_timer_release(again);
    assert_true(serex_timer_cancel(keeper));
    serex_timer_release(keeper);
    assert_int_equal(serex_scheduler_pending(s), 0);
}

/*
 * A batch settles its runs in groups (src/scheduler.c, "Settling in
 * groups"): each run is DONE at once, and the records with no handle are
 * freed under one shard lock when the batch's task ends. 20 one-shots
 * whose handles are released before they run: after the two tasks of the
 * batch, every record is free again, and the next 20 schedules get those
 * very records back (a record the gather failed to free would leave the
 * new ones to come from unused slab space).
 */
static void batch_settles_in_groups_and_frees_every_record(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    serex_timer *h[20], *again[20], *keeper;
    int found;

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    /* keeps the slab from emptying (an empty one starts afresh) */
    assert_int_equal(
        serex_schedule(s, NULL, SEC, log_task, &f->ids[0], &keeper), SEREX_OK);
    for (int i = 0; i < 20; i++)
        assert_int_equal(
            serex_schedule(s, f->manual, MS, log_task, &f->ids[i], &h[i]),
            SEREX_OK);
    for (int i = 0; i < 20; i++)
        serex_timer_release(h[i]); /* the runs' settles free them */
    assert_int_equal(serex_scheduler_advance(s, MS), SEREX_OK);
    assert_true(serex_manual_run_one(f->manual)); /* 8 run, 12 passed on */
    assert_int_equal(nlog(f), 8);
    assert_int_equal(serex_scheduler_pending(s), 13); /* the keeper too */
    assert_int_equal(test_run_all(f->manual), RUN_TASKS(12));
    assert_int_equal(nlog(f), 20);
    assert_int_equal(serex_scheduler_pending(s), 1);
    for (int i = 0; i < 20; i++)
        assert_int_equal(
            serex_schedule(s, f->manual, SEC, log_task, &f->ids[i], &again[i]),
            SEREX_OK);
    for (int i = 0; i < 20; i++) {
        found = 0;
        for (int j = 0; j < 20; j++)
            found += again[i] == h[j];
        assert_int_equal(found, 1);
        assert_true(serex_timer_cancel(again[i]));
        serex_timer_release(again[i]);
    }
    assert_true(serex_timer_cancel(keeper));
    serex_timer_release(keeper);
    assert_int_equal(serex_scheduler_pending(s), 0);
}

/* The target's shutdown_now takes the batch back: one task; each run in
 * it ends, in order, a one-shot's task handed to on_pending (not the
 * cancelled one's, nor the periodic timer's: it ends) - promise 2a. */
/*
 * The rest a started batch passes on (the runs after its first 8) is a task
 * of its own: the target's shutdown_now takes it back, each one-shot's
 * task handed back in order (@drop 0), or its destroy drops it (@drop 1:
 * the op's dropped hook without an on_pending), each run ended and its
 * record freed: the ASan stage's leak check fails if the dropped rest
 * leaks a timer.
 */
static void batch_rest_taken_back_or_dropped(struct fixture *f, int drop)
{
    serex_scheduler *s = make_manual(f, 0);
    serex_fn fns[16];
    void *args[16];
    struct test_pending tp = {0, 16, fns, args};

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    for (int i = 0; i < 20; i++)
        assert_int_equal(
            serex_schedule(s, f->manual, MS, log_task, &f->ids[i], NULL),
            SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, MS), SEREX_OK);
    assert_true(serex_manual_run_one(f->manual)); /* 8 run, 12 passed on */
    assert_int_equal(nlog(f), 8);
    assert_int_equal(serex_scheduler_pending(s), 12);
    if (drop) {
        assert_int_equal(serex_destroy(f->manual), SEREX_OK);
        f->manual = NULL;
    } else {
        assert_int_equal(serex_shutdown_now(f->manual, test_pending_cb, &tp),
                         1);
        assert_int_equal(serex_await_termination(f->manual, 0), SEREX_OK);
    }
    assert_int_equal(nlog(f), 8);
    assert_int_equal(serex_scheduler_pending(s), 0);
    assert_int_equal(tp.n, drop ? 0 : 12);
    for (size_t k = 0; k < tp.n; k++) {
        assert_ptr_equal(fns[k], log_task);
        assert_ptr_equal(args[k], &f->ids[8 + k]);
    }
}

static void batch_rest_taken_back_hands_back_in_order(void **state)
{
    batch_rest_taken_back_or_dropped(*state, 0);
}

static void batch_rest_dropped_ends_each_run(void **state)
{
    batch_rest_taken_back_or_dropped(*state, 1);
}

static void batch_taken_back_hands_back_each_one_shot_in_order(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    struct counting c;
    serex_executor *w;
    serex_fn fns[16];
    void *args[16];
    struct test_pending tp = {0, 16, fns, args};
    serex_timer *h3, *hp;
    int k = 0;

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    w = counting_init(&c, f->manual);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(serex_schedule(s, w, 5 * MS, log_task, &f->ids[i],
                                        i == 3 ? &h3 : NULL),
                         SEREX_OK);
        if (i == 5)
            assert_int_equal(serex_schedule_fixed_rate(
                                 s, w, 5 * MS, MS, log_task, &f->ids[100], &hp),
                             SEREX_OK);
    }
    assert_int_equal(serex_scheduler_advance(s, 5 * MS), SEREX_OK);
    assert_int_equal(atomic_load(&c.calls), 1);
    assert_true(serex_timer_cancel(h3));
    assert_int_equal(serex_shutdown_now(f->manual, test_pending_cb, &tp), 1);
    assert_int_equal(tp.n, 9);
    for (int i = 0; i < 10; i++) {
        if (i == 3)
            continue;
        assert_ptr_equal(fns[k], log_task);
        assert_ptr_equal(args[k++], &f->ids[i]);
    }
    assert_int_equal(nlog(f), 0);
    assert_int_equal(serex_scheduler_pending(s), 0);
    assert_false(serex_timer_cancel(hp)); /* it ended there */
    serex_timer_release(hp);
    serex_timer_release(h3);
    assert_int_equal(serex_await_termination(f->manual, 0), SEREX_OK);
}

/*
 * A target that refuses the batch: each run in it meets what a lone run
 * refused met, in order. Full: the one-shots go to on_rejected, the
 * periodic run is missed and the timer goes on (its next run's overrun
 * says so); shut down: the periodic timer ends too, its task handed over.
 */
static void batch_refused_is_refused_run_by_run(void **state)
{
    struct fixture *f = *state;
    serex_scheduler_config cfg = {0};
    serex_fn fns[16];
    void *args[16];
    struct test_pending tp = {0, 16, fns, args};
    struct overruns o = {0};
    struct counting c;
    serex_executor *w;

    cfg.manual = true;
    cfg.on_rejected = test_pending_cb;
    cfg.on_rejected_ctx = &tp;
    assert_int_equal(serex_scheduler_create(&cfg, &f->s), SEREX_OK);
    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    w = counting_init(&c, f->manual);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(
            serex_schedule(f->s, w, 10 * MS, log_task, &f->ids[i], NULL),
            SEREX_OK);
        if (i == 1)
            assert_int_equal(serex_schedule_fixed_rate(f->s, w, 10 * MS,
                                                       10 * MS, overrun_task,
                                                       &o, NULL),
                             SEREX_OK);
    }
    c.refuse = SEREX_EFULL;
    assert_int_equal(serex_scheduler_advance(f->s, 10 * MS), SEREX_OK);
    assert_int_equal(atomic_load(&c.calls), 1);
    assert_int_equal(serex_scheduler_rejected(f->s), 6); /* missed: counted */
    assert_int_equal(tp.n, 5); /* the one-shots, in order */
    for (int i = 0; i < 5; i++) {
        assert_ptr_equal(fns[i], log_task);
        assert_ptr_equal(args[i], &f->ids[i]);
    }
    assert_int_equal(serex_scheduler_pending(f->s), 1); /* it goes on */
    c.refuse = 0;
    assert_int_equal(serex_scheduler_advance(f->s, 10 * MS), SEREX_OK);
    assert_int_equal(test_run_all(f->manual), 1);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.v[0], 1); /* the point at 10 had no run */
    /* shut down: at 30 the periodic run (re-armed first) and a one-shot */
    assert_int_equal(
        serex_schedule(f->s, w, 10 * MS, log_task, &f->ids[5], NULL), SEREX_OK);
    c.refuse = SEREX_EREJECTED;
    assert_int_equal(serex_scheduler_advance(f->s, 10 * MS), SEREX_OK);
    assert_int_equal(atomic_load(&c.calls), 3);
    assert_int_equal(serex_scheduler_rejected(f->s), 8);
    assert_int_equal(tp.n, 7);
    assert_ptr_equal(fns[5], overrun_task); /* it ended: handed over */
    assert_ptr_equal(args[5], &o);
    assert_ptr_equal(args[6], &f->ids[5]);
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    assert_int_equal(nlog(f), 0);
    assert_int_equal(o.n, 1);
}

/* Promise 7a from a run in the middle of a batch: the scheduler waits on
 * its target, so await and destroy from there say EDEADLK; the batch's
 * other runs still run. */
static void batch_run_awaiting_its_scheduler_is_edeadlk(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    struct test_self_wait sw = {0};

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    sw.ex = serex_scheduler_executor(s);
    assert_int_equal(serex_event_create(&sw.done), SEREX_OK);
    assert_int_equal(
        serex_schedule(s, f->manual, MS, log_task, &f->ids[0], NULL), SEREX_OK);
    assert_int_equal(
        serex_schedule(s, f->manual, MS, test_self_wait_task, &sw, NULL),
        SEREX_OK);
    assert_int_equal(
        serex_schedule(s, f->manual, MS, log_task, &f->ids[2], NULL), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, MS), SEREX_OK);
    assert_int_equal(test_run_all(f->manual), 1);
    test_assert_all_edeadlk(&sw);
    assert_int_equal(nlog(f), 2);
    assert_int_equal(f->log[0], 0);
    assert_int_equal(f->log[1], 2);
    assert_int_equal(serex_scheduler_pending(s), 0);
    serex_event_destroy(sw.done);
}

/* --- shutdown, shutdown_now (promises 2, 6) --- */

static void shutdown_cancels_periodic_lets_one_shots_fire(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    serex_executor *face = serex_scheduler_executor(s);
    serex_timer *p;

    assert_int_equal(serex_schedule_fixed_rate(s, NULL, MS, MS, log_task,
                                               &f->ids[1], &p), SEREX_OK);
    assert_int_equal(serex_schedule(s, NULL, 50 * MS, log_task, &f->ids[2],
                                    NULL), SEREX_OK);
    serex_shutdown(face);
    assert_int_equal(serex_schedule(s, NULL, MS, log_task, f->ids, NULL),
                     SEREX_EREJECTED);
    assert_int_equal(serex_execute(face, log_task, f->ids), SEREX_EREJECTED);
    assert_false(serex_timer_cancel(p)); /* shutdown ended it */
    assert_int_equal(serex_await_termination(face, 0), SEREX_ETIMEDOUT);
    assert_int_equal(serex_scheduler_advance(s, 100 * MS), SEREX_OK);
    assert_int_equal(nlog(f), 1);
    assert_int_equal(f->log[0], 2);
    assert_int_equal(serex_await_termination(face, 0), SEREX_OK);
    serex_timer_release(p);
}

/*
 * Shutdown ends a periodic timer whose run is queued on its target (the
 * run is skipped): a cancel after it says false, as for one shutdown took
 * out of the wheel (issue 20: it said true). A one-shot's queued run is
 * still made after shutdown, so cancelling it still says true.
 */
static void cancel_after_shutdown_ended_a_queued_periodic_is_false(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    serex_executor *face = serex_scheduler_executor(s);
    serex_timer *p, *once;

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_schedule_fixed_rate(s, f->manual, MS, MS, log_task,
                                               &f->ids[1], &p),
                     SEREX_OK);
    assert_int_equal(
        serex_schedule(s, f->manual, MS, log_task, &f->ids[2], &once),
        SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, MS), SEREX_OK);
    assert_int_equal(serex_scheduler_pending(s), 2); /* both queued */
    serex_shutdown(face);
    assert_false(serex_timer_cancel(p));          /* shutdown ended it */
    assert_true(serex_timer_cancel(once));        /* it would still run */
    assert_int_equal(test_run_all(f->manual), 1); /* one batch: both skipped */
    assert_int_equal(nlog(f), 0);
    assert_int_equal(serex_scheduler_pending(s), 0);
    assert_int_equal(serex_await_termination(face, 0), SEREX_OK);
    assert_false(serex_timer_cancel(p));
    serex_timer_release(p);
    serex_timer_release(once);
}

static void shutdown_now_hands_back_one_shots_in_due_order(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    serex_executor *face = serex_scheduler_executor(s);
    serex_fn fns[8];
    void *args[8];
    struct test_pending tp = {0, 8, fns, args};
    serex_timer *h;

    assert_int_equal(serex_schedule(s, NULL, 30 * MS, log_task, &f->ids[3],
                                    NULL), SEREX_OK);
    assert_int_equal(serex_schedule(s, NULL, 10 * MS, log_task, &f->ids[1],
                                    &h), SEREX_OK);
    assert_int_equal(serex_schedule_fixed_delay(s, NULL, MS, MS, log_task,
                                                &f->ids[9], NULL), SEREX_OK);
    assert_int_equal(serex_schedule(s, NULL, 20 * MS, log_task, &f->ids[2],
                                    NULL), SEREX_OK);
    assert_int_equal(serex_execute(face, log_task, &f->ids[0]), SEREX_OK);
    assert_int_equal(serex_shutdown_now(face, test_pending_cb, &tp), 4);
    assert_int_equal(tp.n, 4);
    for (int i = 0; i < 4; i++) {
        assert_ptr_equal(fns[i], log_task);
        assert_ptr_equal(args[i], &f->ids[i]);
    }
    assert_false(serex_timer_cancel(h)); /* handed back: not ours now */
    serex_timer_release(h);
    assert_int_equal(serex_await_termination(face, 0), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, SEC), SEREX_OK);
    assert_int_equal(nlog(f), 0);
    assert_int_equal(serex_scheduler_pending(s), 0);
}

static void *nop_call(void *arg)
{
    return arg;
}

/* destroy of a manual scheduler drops what is pending; a future made on
 * its face is cancelled, not left waiting */
static void manual_destroy_drops_pending_and_cancels_futures(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    serex_future *fut;

    assert_int_equal(serex_schedule(s, NULL, SEC, log_task, f->ids, NULL),
                     SEREX_OK);
    assert_int_equal(serex_submit(serex_scheduler_executor(s), nop_call,
                                  NULL, &fut), SEREX_OK);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    f->s = NULL;
    assert_int_equal(serex_future_wait(fut, 0), SEREX_ECANCELED);
    serex_future_release(fut);
    assert_int_equal(nlog(f), 0);
}

/*
 * destroy waits, as await_termination does, for the runs handed to
 * targets (issue 20: it returned at once, and a caller that freed what the
 * task used right after destroy had a use after free). Each test destroys
 * on a second thread while the run is held, and reads, as soon as destroy
 * returns, whether the task had returned.
 */
struct destroyer {
    serex_executor *face;
    serex__thread thread;
    _Atomic int *task_ended; /* set at the very end of the task */
    _Atomic int seen;        /* 0: destroy has not returned; 1 + ended */
};

static int destroyer_main(void *arg)
{
    struct destroyer *d = arg;
    int rc = serex_destroy(d->face);

    atomic_store(&d->seen, 1 + atomic_load(d->task_ended));
    return rc;
}

static void destroyer_start(struct destroyer *d, serex_scheduler *s,
                            _Atomic int *task_ended)
{
    d->face = serex_scheduler_executor(s);
    d->task_ended = task_ended;
    atomic_init(&d->seen, 0);
    assert_int_equal(serex__thread_start(&d->thread, destroyer_main, d), 0);
}

struct held {
    serex_event *started, *release;
    _Atomic int ended;
};

static void held_task(void *arg)
{
    struct held *h = arg;

    serex_event_signal(h->started);
    assert_int_equal(serex_event_wait(h->release, TEST_TIMEOUT), SEREX_OK);
    atomic_store(&h->ended, 1);
}

static void destroy_waits_for_a_run_on_a_pool(void **state)
{
    struct fixture *f = *state;
    serex_executor *pool;
    struct destroyer d;
    struct held h;

    atomic_init(&h.ended, 0);
    assert_int_equal(serex_event_create(&h.started), SEREX_OK);
    assert_int_equal(serex_event_create(&h.release), SEREX_OK);
    assert_int_equal(serex_scheduler_create(NULL, &f->s), SEREX_OK);
    assert_int_equal(serex_pool_create(NULL, &pool), SEREX_OK);
    assert_int_equal(serex_schedule(f->s, pool, 0, held_task, &h, NULL),
                     SEREX_OK);
    assert_signalled(h.started); /* the run is in progress, held */
    destroyer_start(&d, f->s, &h.ended);
    f->s = NULL;
    /* not a proof that it waits (the destroyer may not have started): a
     * destroy that does not wait is caught here, or by the check below */
    test_sleep_ns(20 * MS);
    assert_int_equal(atomic_load(&d.seen), 0);
    serex_event_signal(h.release);
    serex__thread_join(d.thread);
    assert_int_equal(atomic_load(&d.seen), 2); /* the task had returned */
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    serex_event_destroy(h.started);
    serex_event_destroy(h.release);
}

/* A run queued on a manual executor: destroy waits until it is made (a
 * one-shot's run, and a periodic one's that shutdown ended: skipped). */
static void destroy_waits_for_runs_queued_on_a_manual_target(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    struct destroyer d;
    _Atomic int ended = 0;

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(serex_schedule(s, f->manual, MS, log_task, &f->ids[4],
                                    NULL), SEREX_OK);
    assert_int_equal(serex_schedule_fixed_rate(s, f->manual, MS, MS,
                                               log_task, &f->ids[5], NULL),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, MS), SEREX_OK);
    destroyer_start(&d, s, &ended);
    f->s = NULL;
    test_sleep_ns(20 * MS);
    assert_int_equal(atomic_load(&d.seen), 0);
    /* from here on, destroy may return: once both runs are made */
    atomic_store(&ended, 1);
    /* the one-shot runs; the periodic one was ended by shutdown (one
     * task: both came due in one fire, a batch) */
    assert_int_equal(test_run_all(f->manual), 1);
    serex__thread_join(d.thread);
    assert_int_equal(atomic_load(&d.seen), 2);
    assert_int_equal(nlog(f), 1);
    assert_int_equal(f->log[0], 4);
}

/* A target that takes back or drops the run ends the timer: destroy
 * does not wait for it (here on the destroying thread itself). */
static void destroy_after_the_target_dropped_the_run(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);

    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    assert_int_equal(
        serex_schedule(s, f->manual, MS, log_task, &f->ids[4], NULL), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, MS), SEREX_OK);
    assert_int_equal(serex_destroy(f->manual), SEREX_OK); /* drops it */
    f->manual = NULL;
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    f->s = NULL;
    assert_int_equal(nlog(f), 0);
}

/*
 * A user's executor that breaks the contract: it terminates with a task
 * still queued, neither run nor handed back. The scheduler's destroy then
 * cannot wait for that run (it never comes): it falls back to detaching,
 * and should the run come after all, it finds the memory it needs and
 * frees it (ASan: no use after free, no leak).
 */
struct forgetful {
    serex_executor base;
    serex_fn fn;
    void *arg;
    bool shut;
};

static int forgetful_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct forgetful *u = (struct forgetful *)(void *)ex;

    if (u->shut || u->fn != NULL)
        return u->shut ? SEREX_EREJECTED : SEREX_EFULL;
    u->fn = fn;
    u->arg = arg;
    return SEREX_OK;
}

static void forgetful_shutdown(serex_executor *ex)
{
    ((struct forgetful *)(void *)ex)->shut = true;
}

static size_t forgetful_shutdown_now(serex_executor *ex,
                                     serex_pending_fn on_pending, void *ctx)
{
    (void)on_pending;
    (void)ctx;
    forgetful_shutdown(ex);
    return 0; /* the broken part: the queued task is forgotten */
}

static int forgetful_await(serex_executor *ex, int64_t timeout_ns)
{
    (void)timeout_ns;
    return ((struct forgetful *)(void *)ex)->shut ? SEREX_OK : SEREX_ETIMEDOUT;
}

static void forgetful_destroy(serex_executor *ex)
{
    (void)ex;
}

static void destroy_detaches_from_a_run_that_cannot_come(void **state)
{
    static const serex_executor_ops ops = {
        forgetful_execute, forgetful_shutdown, forgetful_shutdown_now,
        forgetful_await,   forgetful_destroy,
    };
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    struct forgetful u = {{&ops}, NULL, NULL, false};

    assert_int_equal(serex_schedule(s, &u.base, MS, log_task, &f->ids[6], NULL),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, MS), SEREX_OK);
    assert_non_null(u.fn);
    serex_shutdown(&u.base); /* terminated, the run still in its hands */
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    f->s = NULL;
    current->s = NULL;
    u.fn(u.arg); /* it comes after all: runs, and frees the scheduler */
    assert_int_equal(nlog(f), 1);
    assert_int_equal(f->log[0], 6);
}

/* --- the executor face, EDEADLK --- */

static void face_execute_runs_on_the_timer_thread(void **state)
{
    struct fixture *f = *state;
    serex_event *ev;

    assert_int_equal(serex_scheduler_create(NULL, &f->s), SEREX_OK);
    assert_int_equal(serex_event_create(&ev), SEREX_OK);
    assert_int_equal(serex_execute(serex_scheduler_executor(f->s),
                                   test_signal_task, ev), SEREX_OK);
    assert_signalled(ev);
    serex_event_destroy(ev);
}

static void await_and_destroy_from_own_task_is_edeadlk(void **state)
{
    struct fixture *f = *state;
    serex_executor *pool;
    struct test_self_wait inline_w = {0}, pool_w = {0};

    assert_int_equal(serex_scheduler_create(NULL, &f->s), SEREX_OK);
    assert_int_equal(serex_pool_create(NULL, &pool), SEREX_OK);
    inline_w.ex = pool_w.ex = serex_scheduler_executor(f->s);
    assert_int_equal(serex_event_create(&inline_w.done), SEREX_OK);
    assert_int_equal(serex_event_create(&pool_w.done), SEREX_OK);
    /* on the timer thread, and in a run on a pool */
    assert_int_equal(serex_schedule(f->s, NULL, MS, test_self_wait_task,
                                    &inline_w, NULL), SEREX_OK);
    assert_int_equal(serex_schedule(f->s, pool, MS, test_self_wait_task,
                                    &pool_w, NULL), SEREX_OK);
    assert_signalled(inline_w.done);
    assert_signalled(pool_w.done);
    test_assert_all_edeadlk(&inline_w);
    test_assert_all_edeadlk(&pool_w);
    serex_event_destroy(inline_w.done);
    serex_event_destroy(pool_w.done);
    assert_int_equal(serex_destroy(serex_scheduler_executor(f->s)), SEREX_OK);
    f->s = NULL;
    assert_int_equal(serex_destroy(pool), SEREX_OK);
}

/* --- allocation failure --- */

static void allocation_failure_changes_nothing(void **state)
{
    struct fixture *f = *state;
    serex_scheduler_config c = {0};
    unsigned long n;
    serex_timer *t = NULL;

    c.manual = true;
    serex__alloc_fail_nth(0);
    assert_int_equal(serex_scheduler_create(&c, &f->s), SEREX_OK);
    n = serex__alloc_fail_nth(0);
    assert_int_equal(serex_destroy(serex_scheduler_executor(f->s)), SEREX_OK);
    f->s = NULL;
    for (unsigned long i = 1; i <= n; i++) {
        serex_scheduler *s = (serex_scheduler *)&c;

        serex__alloc_fail_nth(i);
        assert_int_equal(serex_scheduler_create(&c, &s), SEREX_ENOMEM);
        assert_null(s);
    }
    serex__alloc_fail_nth(0);
    make_manual(f, 0);
    serex__alloc_fail_nth(1); /* the first schedule needs a slab */
    assert_int_equal(serex_schedule(f->s, NULL, MS, log_task, f->ids, &t),
                     SEREX_ENOMEM);
    serex__alloc_fail_nth(0);
    assert_null(t);
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    assert_int_equal(serex_schedule(f->s, NULL, MS, log_task, f->ids, &t),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(f->s, MS), SEREX_OK);
    assert_int_equal(nlog(f), 1);
    serex_timer_release(t);
}

/* Records are reused and slabs given back: a burst far past one slab. */
static void burst_of_timers_is_reclaimed(void **state)
{
    struct fixture *f = *state;
    serex_scheduler *s = make_manual(f, 0);
    enum { N = 20000 };
    static serex_timer *t[N];

    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++)
            assert_int_equal(serex_schedule(s, NULL, SEC + i, log_task,
                                            f->ids, &t[i]), SEREX_OK);
        assert_int_equal(serex_scheduler_pending(s), N);
        for (int i = 0; i < N; i += 2)
            assert_true(serex_timer_cancel(t[i]));
        for (int i = 0; i < N; i++)
            serex_timer_release(t[i]);
        assert_int_equal(serex_scheduler_advance(s, 2 * SEC), SEREX_OK);
        assert_int_equal(nlog(f), (size_t)(round + 1) * N / 2);
        assert_int_equal(serex_scheduler_pending(s), 0);
    }
}

/* --- the timer thread --- */

struct stamp {
    serex_scheduler *s;
    int64_t due;
    _Atomic int64_t ran_at;
    serex_event *ev;
};

static void stamp_task(void *arg)
{
    struct stamp *st = arg;

    atomic_store(&st->ran_at, serex_scheduler_now(st->s));
    serex_event_signal(st->ev);
}

/* --- coalescing wake-ups under load (scheduler_internal.h) --- */

static void coalesce_window_opens_doubles_to_max_and_shuts(void **state)
{
    int64_t w = 0, max = 200 * US;
    int steps = 0;

    (void)state;
    /* small fires keep it shut */
    for (size_t n = 0; n < SEREX__COALESCE_BATCH; n++)
        assert_int_equal(serex__coalesce_adapt(0, n, max), 0);
    /* a big fire opens it at the minimum; each one after doubles it */
    w = serex__coalesce_adapt(w, SEREX__COALESCE_BATCH, max);
    assert_int_equal(w, SEREX__COALESCE_MIN_NS);
    while (w < max) {
        int64_t next = serex__coalesce_adapt(w, 1000, max);

        assert_true(next == 2 * w || (next == max && 2 * w > max));
        w = next;
        steps++;
    }
    assert_int_equal(w, max); /* and it stays there */
    assert_int_equal(serex__coalesce_adapt(w, 1000, max), max);
    assert_true(steps < 10);
    /* small fires halve it, and below the minimum it shuts */
    assert_int_equal(serex__coalesce_adapt(max, 1, max), max / 2);
    for (steps = 0; w != 0; steps++)
        w = serex__coalesce_adapt(w, 1, max);
    assert_true(steps <= 8);
    /* max 0 (coalesce_ns negative): never opens */
    assert_int_equal(serex__coalesce_adapt(0, 100000, 0), 0);
    /* a max below the minimum is still the most */
    assert_int_equal(serex__coalesce_adapt(0, 100, 300), 300);
}

/*
 * A lone timer after a burst (docs/scheduler.md): the window shrinks by
 * wake-ups, not by time. Idle after a burst, with nothing due, the thread
 * sleeps with the window open and a new timer rings it; that wake-up
 * hands out nothing and halves the window, and the timer, if due within
 * the halved window, runs at its end; further ahead, on time.
 */
static void coalesce_lone_timer_after_a_burst(void **state)
{
    int64_t max = 200 * US, w = max, now = 5 * SEC;

    (void)state;
    /* idle, nothing due: a timer due at any time before the end rings */
    assert_int_equal(serex__coalesce_deadline(INT64_MAX, now, w), INT64_MAX);
    assert_int_equal(serex__coalesce_ring_below(INT64_MAX, now, INT64_MAX, w),
                     INT64_MAX - w);
    /* the ring's wake-up, an hour later, hands out nothing: halved */
    now += 3600 * SEC;
    w = serex__coalesce_adapt(w, 0, max);
    assert_int_equal(w, max / 2);
    /* due 30 us after it: at the window's end, 70 us late */
    assert_int_equal(serex__coalesce_deadline(now + 30 * US, now, w), now + w);
    /* due 150 us after it, beyond the window: on time */
    assert_int_equal(serex__coalesce_deadline(now + 150 * US, now, w),
                     now + 150 * US);
}

static void coalesce_deadline_is_never_early_and_within_the_window(void **state)
{
    uint64_t x = 11;

    (void)state;
    /* shut, nothing due, already due, or beyond the window: next itself */
    assert_int_equal(serex__coalesce_deadline(5 * US, 0, 0), 5 * US);
    assert_int_equal(serex__coalesce_deadline(INT64_MAX, 0, 100 * US),
                     INT64_MAX);
    assert_int_equal(serex__coalesce_deadline(-5, 0, 100 * US), -5);
    assert_int_equal(serex__coalesce_deadline(300 * US, 0, 100 * US), 300 * US);
    /* inside the window: its end */
    assert_int_equal(serex__coalesce_deadline(10 * US, 0, 100 * US), 100 * US);
    /* no overflow at the clock's end */
    assert_int_equal(
        serex__coalesce_deadline(INT64_MAX - 1, INT64_MAX - 10, 100 * US),
        INT64_MAX);
    for (int i = 0; i < 100000; i++) {
        int64_t now, next, window, d, ring;

        x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        now = (int64_t)(x >> 40);
        next = now + (int64_t)((x >> 20) % (400 * (uint64_t)US)) - 10 * US;
        window = (int64_t)((x >> 8) % 4 == 0 ? 0 : (x >> 12) % (250 * US));
        d = serex__coalesce_deadline(next, now, window);
        assert_true(d >= next);                      /* never early */
        assert_true(d == next || d - next < window); /* within the window */
        ring = serex__coalesce_ring_below(next, now, d, window);
        assert_true(ring <= next);
        /* a timer due at or after the threshold (and after now) is not
         * rung for: it waits for d, less than a window more */
        if (d != next)
            assert_true(d - (ring > now ? ring : now) <= window);
        else
            assert_true(d - ring <= window);
    }
}

struct burst {
    serex_scheduler *s;
    _Atomic long fired, early;
    serex_event *all;
    long n;
};

struct burst_timer {
    struct burst *b;
    int64_t due;
};

static void burst_task(void *arg)
{
    struct burst_timer *t = arg;
    struct burst *b = t->b;

    if (serex_scheduler_now(b->s) < t->due)
        atomic_fetch_add(&b->early, 1);
    if (atomic_fetch_add(&b->fired, 1) + 1 == b->n)
        serex_event_signal(b->all);
}

/*
 * Clumps of 64 timers due at the same instant, 100 us apart: every fire
 * hands out at least one clump (a clump's timers share a due time), so
 * the window opens whatever the machine's speed, even if one fire hands
 * out everything (and never with coalesce_ns negative). Every timer
 * fires, none early.
 */
static void burst_case(struct fixture *f, int64_t coalesce_ns)
{
    enum { CLUMPS = 40, PER = 64, N = CLUMPS * PER };
    static struct burst_timer t[N];
    serex_scheduler_config c = {.coalesce_ns = coalesce_ns};
    struct burst b = {.n = N};
    int64_t start, peak, deadline;

    assert_int_equal(serex_scheduler_create(&c, &f->s), SEREX_OK);
    b.s = f->s;
    assert_int_equal(serex_event_create(&b.all), SEREX_OK);
    start = serex_scheduler_now(f->s) + 20 * MS;
    for (int i = 0; i < N; i++) {
        int64_t now = serex_scheduler_now(f->s);

        t[i] = (struct burst_timer){&b, start + (i / PER) * 100 * US};
        assert_int_equal(serex_schedule(f->s, NULL,
                                        t[i].due > now ? t[i].due - now : 0,
                                        burst_task, &t[i], NULL),
                         SEREX_OK);
    }
    assert_signalled(b.all);
    assert_int_equal(atomic_load(&b.fired), N);
    assert_int_equal(atomic_load(&b.early), 0);
    /* the thread publishes the window after its fire returns */
    deadline = test_now_ns() + TEST_TIMEOUT;
    while ((peak = serex__scheduler_window(f->s, true)) == 0 &&
           coalesce_ns >= 0 && test_now_ns() < deadline)
        test_sleep_ns(MS);
    if (coalesce_ns < 0)
        assert_int_equal(peak, 0);
    else
        assert_true(peak >= SEREX__COALESCE_MIN_NS &&
                    peak <= (coalesce_ns == 0 ? SEREX__COALESCE_DEFAULT_NS
                                              : coalesce_ns));
    serex_event_destroy(b.all);
}

static void threaded_bursts_open_the_window_never_early(void **state)
{
    burst_case(*state, 0);
}

static void threaded_bursts_with_coalescing_off_keep_it_shut(void **state)
{
    burst_case(*state, -1);
}

/* After a burst opened the window, a lone timer is still not held up by a
 * far one: its producer rings (the threshold in wake_at is right), and
 * lone fires shut the window again. */
static void threaded_window_shuts_and_new_timers_still_ring(void **state)
{
    struct fixture *f = *state;
    struct stamp st[11] = {{0}};
    serex_timer *hour;
    int64_t deadline;

    burst_case(f, 0);
    st[0].s = f->s; /* cancelled below: never runs */
    assert_int_equal(
        serex_schedule(f->s, NULL, 3600 * SEC, stamp_task, &st[0], &hour),
        SEREX_OK);
    for (int i = 1; i < 11; i++) {
        st[i].s = f->s;
        atomic_store(&st[i].ran_at, 0);
        assert_int_equal(serex_event_create(&st[i].ev), SEREX_OK);
        st[i].due = serex_scheduler_now(f->s) + 2 * MS;
        assert_int_equal(
            serex_schedule(f->s, NULL, 2 * MS, stamp_task, &st[i], NULL),
            SEREX_OK);
        assert_signalled(st[i].ev); /* not an hour */
        assert_true(atomic_load(&st[i].ran_at) >= st[i].due);
        serex_event_destroy(st[i].ev);
    }
    /* ten fires of one (and the rings' empty ones): 200 us halved eight
     * times is below 1 us. The thread publishes the window after its fire
     * returns, so look until it does. */
    deadline = test_now_ns() + TEST_TIMEOUT;
    while (serex__scheduler_window(f->s, false) != 0 &&
           test_now_ns() < deadline)
        test_sleep_ns(MS);
    assert_int_equal(serex__scheduler_window(f->s, false), 0);
    assert_true(serex_timer_cancel(hour));
    serex_timer_release(hour);
}

static void threaded_timers_never_fire_early(void **state)
{
    struct fixture *f = *state;
    enum { N = 200 };
    static struct stamp st[N];
    serex_executor *pool;
    uint64_t x = 7;

    assert_int_equal(serex_scheduler_create(NULL, &f->s), SEREX_OK);
    assert_int_equal(serex_pool_create(NULL, &pool), SEREX_OK);
    for (int i = 0; i < N; i++) {
        int64_t d;

        x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        d = (int64_t)((x >> 33) % (30 * (uint64_t)MS));
        st[i].s = f->s;
        atomic_store(&st[i].ran_at, 0);
        assert_int_equal(serex_event_create(&st[i].ev), SEREX_OK);
        st[i].due = serex_scheduler_now(f->s) + d;
        assert_int_equal(serex_schedule(f->s, i % 2 ? pool : NULL, d,
                                        stamp_task, &st[i], NULL), SEREX_OK);
    }
    for (int i = 0; i < N; i++) {
        assert_signalled(st[i].ev);
        assert_true(atomic_load(&st[i].ran_at) >= st[i].due);
        serex_event_destroy(st[i].ev);
    }
    serex_shutdown(serex_scheduler_executor(f->s));
    assert_int_equal(serex_await_termination(serex_scheduler_executor(f->s),
                                             TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
}

/* A custom clock that the test moves: the thread never fires by the OS
 * clock, only when the custom clock says so. */
static _Atomic int64_t fake_now;

static int64_t fake_clock(void *ctx)
{
    (void)ctx;
    return atomic_load(&fake_now);
}

static void threaded_custom_clock_is_honoured(void **state)
{
    struct fixture *f = *state;
    serex_scheduler_config c = {0};
    struct stamp st = {0};

    atomic_store(&fake_now, 1000 * SEC);
    c.clock = fake_clock;
    assert_int_equal(serex_scheduler_create(&c, &f->s), SEREX_OK);
    st.s = f->s;
    assert_int_equal(serex_event_create(&st.ev), SEREX_OK);
    assert_int_equal(serex_scheduler_now(f->s), 1000 * SEC);
    assert_int_equal(serex_schedule(f->s, NULL, 50 * MS, stamp_task, &st,
                                    NULL), SEREX_OK);
    test_sleep_ns(150 * MS); /* real time; the clock stood still */
    assert_int_equal(serex_event_wait(st.ev, 0), SEREX_ETIMEDOUT);
    atomic_store(&fake_now, 1000 * SEC + 50 * MS);
    assert_signalled(st.ev); /* noticed within the 100 ms nap */
    assert_int_equal(atomic_load(&st.ran_at), 1000 * SEC + 50 * MS);
    serex_event_destroy(st.ev);
}

/*
 * The timer thread, its custom clock moved past several due times at
 * once: one fire, one task for the target, the runs in due order (ties in
 * schedule order), none early.
 */
static void threaded_fire_of_several_due_times_is_one_batch(void **state)
{
    struct fixture *f = *state;
    serex_scheduler_config cfg = {0};
    struct counting c;
    serex_executor *w;
    static const int64_t due_ms[4] = {30, 10, 20, 20};
    static const int order[4] = {1, 2, 3, 0};

    atomic_store(&fake_now, 1000 * SEC);
    cfg.clock = fake_clock;
    assert_int_equal(serex_scheduler_create(&cfg, &f->s), SEREX_OK);
    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    w = counting_init(&c, f->manual);
    for (int i = 0; i < 4; i++)
        assert_int_equal(
            serex_schedule(f->s, w, due_ms[i] * MS, log_task, &f->ids[i], NULL),
            SEREX_OK);
    test_sleep_ns(20 * MS); /* real time; the clock stands still */
    assert_int_equal(atomic_load(&c.calls), 0);
    atomic_store(&fake_now, 1000 * SEC + 30 * MS);
    for (int64_t waited = 0;
         atomic_load(&c.calls) == 0 && waited < TEST_TIMEOUT; waited += MS)
        test_sleep_ns(MS);
    assert_int_equal(atomic_load(&c.calls), 1);
    assert_int_equal(test_run_all(f->manual), 1);
    assert_int_equal(nlog(f), 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(f->log[i], order[i]);
        assert_true(f->at[i] >= 1000 * SEC + due_ms[order[i]] * MS);
    }
    assert_int_equal(atomic_load(&c.calls), 1);
    assert_int_equal(serex_scheduler_pending(f->s), 0);
}

struct overlap {
    _Atomic int in_run, overlaps, runs;
};

static void slow_periodic_task(void *arg)
{
    struct overlap *o = arg;

    if (atomic_fetch_add(&o->in_run, 1) != 0)
        atomic_fetch_add(&o->overlaps, 1);
    test_sleep_ns(3 * MS); /* longer than the period */
    atomic_fetch_sub(&o->in_run, 1);
    atomic_fetch_add(&o->runs, 1);
}

/* One periodic timer of each kind whose runs outlast the period; a run in
 * progress when cancel returns may finish, but never two at once. */
static void periodic_never_overlaps(serex_scheduler *s, serex_executor *pool,
                                    bool fixed_rate, struct overlap *o)
{
    serex_timer *t;

    assert_int_equal(fixed_rate
                         ? serex_schedule_fixed_rate(s, pool, 0, MS,
                                                     slow_periodic_task, o,
                                                     &t)
                         : serex_schedule_fixed_delay(s, pool, 0, MS,
                                                      slow_periodic_task, o,
                                                      &t),
                     SEREX_OK);
    test_sleep_ns(100 * MS);
    assert_true(serex_timer_cancel(t));
    serex_timer_release(t);
}

static void threaded_periodic_runs_never_overlap(void **state)
{
    struct fixture *f = *state;
    serex_executor *pool;
    static struct overlap rate, delay; /* runs may outlive a stack frame */

    memset(&rate, 0, sizeof rate);
    memset(&delay, 0, sizeof delay);
    assert_int_equal(serex_scheduler_create(NULL, &f->s), SEREX_OK);
    assert_int_equal(serex_pool_create(NULL, &pool), SEREX_OK);
    periodic_never_overlaps(f->s, pool, true, &rate);
    periodic_never_overlaps(f->s, pool, false, &delay);
    serex_shutdown(serex_scheduler_executor(f->s));
    /* every run has ended, and its writes are visible */
    assert_int_equal(serex_await_termination(serex_scheduler_executor(f->s),
                                             TEST_TIMEOUT), SEREX_OK);
    assert_true(atomic_load(&rate.runs) >= 2);
    assert_true(atomic_load(&delay.runs) >= 2);
    assert_int_equal(atomic_load(&rate.overlaps), 0);
    assert_int_equal(atomic_load(&delay.overlaps), 0);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
}

/*
 * Cancel racing with firing, on a pool, with a canceller thread: for each
 * timer, cancel's answer and whether the task ran agree exactly (true: it
 * never runs; false: it ran, exactly once).
 */
enum { RACE_N = 2000 };

struct race {
    serex_scheduler *s;
    serex_timer *t[RACE_N];
    _Atomic int ran[RACE_N];
    bool cancelled[RACE_N];
    int idx[RACE_N];
};

static struct race *race_of;

static void race_task(void *arg)
{
    atomic_fetch_add(&race_of->ran[*(int *)arg], 1);
}

static int race_canceller(void *arg)
{
    struct race *r = arg;

    for (int i = RACE_N - 1; i >= 0; i--)
        r->cancelled[i] = serex_timer_cancel(r->t[i]);
    return 0;
}

static void cancel_races_firing(void **state)
{
    struct fixture *f = *state;
    struct race *r = calloc(1, sizeof *r);
    serex_executor *pool;
    serex__thread th;

    assert_non_null(r);
    race_of = r;
    assert_int_equal(serex_scheduler_create(NULL, &f->s), SEREX_OK);
    assert_int_equal(serex_pool_create(NULL, &pool), SEREX_OK);
    for (int i = 0; i < RACE_N; i++) {
        r->idx[i] = i;
        assert_int_equal(serex_schedule(f->s, i % 3 ? pool : NULL,
                                        (i % 50) * 20000, race_task,
                                        &r->idx[i], &r->t[i]), SEREX_OK);
    }
    assert_int_equal(serex__thread_start(&th, race_canceller, r), 0);
    serex__thread_join(th);
    serex_shutdown(serex_scheduler_executor(f->s));
    assert_int_equal(serex_await_termination(serex_scheduler_executor(f->s),
                                             TEST_TIMEOUT), SEREX_OK);
    for (int i = 0; i < RACE_N; i++) {
        assert_int_equal(atomic_load(&r->ran[i]), r->cancelled[i] ? 0 : 1);
        serex_timer_release(r->t[i]);
    }
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    free(r);
}

/*
 * A pool's shutdown_now takes batches back while a canceller cancels
 * timers in them: every one-shot runs once, is handed back once
 * (shutdown_now's on_pending), is refused once (fired onto the pool after
 * it stopped: on_rejected), or was cancelled (true), and only one of
 * these. About 100 timers are due at each due time; the pool's one
 * thread is held by a task until after the shutdown_now, so the batches
 * wait in its queue.
 */
enum { TB_N = 3000 };

struct takeback {
    _Atomic int ran[TB_N], handed[TB_N], refused[TB_N];
    _Atomic int strangers; /* a task handed over that is not ours */
    bool cancelled[TB_N];
    int idx[TB_N];
    serex_timer *t[TB_N];
};

static struct takeback *takeback_of;

static void takeback_task(void *arg)
{
    atomic_fetch_add(&takeback_of->ran[*(int *)arg], 1);
}

static void takeback_blocker(void *arg)
{
    serex_event_wait(arg, TEST_TIMEOUT);
}

/* on_pending (the test's thread) and on_rejected (the timer thread); the
 * blocker comes back if the pool had not started it yet */
static void takeback_handed(serex_fn fn, void *arg, void *ctx)
{
    struct takeback *r = ctx;

    if (fn == takeback_blocker)
        return;
    if (fn != takeback_task)
        atomic_fetch_add(&r->strangers, 1);
    else
        atomic_fetch_add(&r->handed[*(int *)arg], 1);
}

static void takeback_refused(serex_fn fn, void *arg, void *ctx)
{
    struct takeback *r = ctx;

    if (fn != takeback_task)
        atomic_fetch_add(&r->strangers, 1);
    else
        atomic_fetch_add(&r->refused[*(int *)arg], 1);
}

static int takeback_canceller(void *arg)
{
    struct takeback *r = arg;

    for (int i = TB_N - 1; i >= 0; i -= 2)
        r->cancelled[i] = serex_timer_cancel(r->t[i]);
    return 0;
}

static void batches_taken_back_racing_cancel_lose_nothing(void **state)
{
    struct fixture *f = *state;
    struct takeback *r = calloc(1, sizeof *r);
    serex_scheduler_config cfg = {0};
    serex_pool_config pc = {0};
    serex_executor *pool;
    serex__thread th;
    serex_event *unblock;

    assert_non_null(r);
    takeback_of = r;
    cfg.on_rejected = takeback_refused;
    cfg.on_rejected_ctx = r;
    assert_int_equal(serex_scheduler_create(&cfg, &f->s), SEREX_OK);
    pc.threads = 1;
    assert_int_equal(serex_pool_create(&pc, &pool), SEREX_OK);
    assert_int_equal(serex_event_create(&unblock), SEREX_OK);
    assert_int_equal(serex_execute(pool, takeback_blocker, unblock), SEREX_OK);
    for (int i = 0; i < TB_N; i++) {
        r->idx[i] = i;
        assert_int_equal(serex_schedule(f->s, pool, (i % 30) * 50 * US,
                                        takeback_task, &r->idx[i], &r->t[i]),
                         SEREX_OK);
    }
    assert_int_equal(serex__thread_start(&th, takeback_canceller, r), 0);
    test_sleep_ns(500 * US);
    serex_shutdown_now(pool, takeback_handed, r);
    serex_event_signal(unblock);
    serex__thread_join(th);
    for (int i = 0; i < TB_N; i++) /* before destroy: done or not */
        serex_timer_release(r->t[i]);
    /* destroy joins the timer thread: every on_rejected call is over */
    serex_shutdown(serex_scheduler_executor(f->s));
    assert_int_equal(serex_destroy(serex_scheduler_executor(f->s)), SEREX_OK);
    f->s = NULL;
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    serex_event_destroy(unblock);
    assert_int_equal(atomic_load(&r->strangers), 0);
    for (int i = 0; i < TB_N; i++) {
        int ends = atomic_load(&r->ran[i]) + atomic_load(&r->handed[i]) +
                   atomic_load(&r->refused[i]);

        assert_int_equal(ends, r->cancelled[i] ? 0 : 1);
    }
    free(r);
}

/*
 * Producers on several threads (so several shards) schedule one-shot and
 * periodic timers onto a pool and the timer thread while it fires, and
 * cancel every other one: each one-shot runs exactly once unless its
 * cancel said true, and then never.
 */
enum { MP_THREADS = 4, MP_PER = 1500 };

struct mp {
    serex_scheduler *s;
    serex_executor *pool;
    _Atomic int ran[MP_THREADS][MP_PER];
    bool cancelled[MP_THREADS][MP_PER];
    int idx[MP_THREADS][MP_PER];
    _Atomic int ticks[MP_THREADS];
    _Atomic int rc;
};

static struct mp *mp_of;

static void mp_task(void *arg)
{
    int i = *(int *)arg;

    atomic_fetch_add(&mp_of->ran[i / MP_PER][i % MP_PER], 1);
}

static void mp_tick(void *arg)
{
    atomic_fetch_add((_Atomic int *)arg, 1);
}

static int mp_producer(void *arg)
{
    int p = (int)(intptr_t)arg;
    struct mp *m = mp_of;
    static _Thread_local serex_timer *t[MP_PER];
    serex_timer *tick;

    int64_t deadline;

    if (serex_schedule_fixed_rate(m->s, p % 2 ? m->pool : NULL, 0, 100000,
                                  mp_tick, &m->ticks[p], &tick) != SEREX_OK)
        atomic_store(&m->rc, 1);
    for (int i = 0; i < MP_PER; i++) {
        m->idx[p][i] = p * MP_PER + i;
        if (serex_schedule(m->s, i % 3 ? m->pool : NULL, (i % 40) * 25000,
                           mp_task, &m->idx[p][i], &t[i]) != SEREX_OK)
            atomic_store(&m->rc, 1);
        if (i % 2 == 1) { /* cancel the one before, maybe while it fires */
            m->cancelled[p][i - 1] = serex_timer_cancel(t[i - 1]);
            serex_timer_release(t[i - 1]);
        }
    }
    for (int i = 0; i < MP_PER; i += 2)
        serex_timer_release(t[i + 1]);
    /* the periodic timer has run, and been re-armed, before we stop it */
    deadline = serex__now_ns() + TEST_TIMEOUT;
    while (atomic_load(&m->ticks[p]) < 2 && serex__now_ns() < deadline)
        serex__thread_yield();
    if (atomic_load(&m->ticks[p]) < 2 || !serex_timer_cancel(tick))
        atomic_store(&m->rc, 1);
    serex_timer_release(tick);
    return 0;
}

static void many_producers_schedule_and_cancel(void **state)
{
    struct fixture *f = *state;
    struct mp *m = calloc(1, sizeof *m);
    serex__thread th[MP_THREADS];

    assert_non_null(m);
    mp_of = m;
    assert_int_equal(serex_scheduler_create(NULL, &f->s), SEREX_OK);
    assert_int_equal(serex_pool_create(NULL, &m->pool), SEREX_OK);
    m->s = f->s;
    for (int p = 0; p < MP_THREADS; p++)
        assert_int_equal(serex__thread_start(&th[p], mp_producer,
                                             (void *)(intptr_t)p), 0);
    for (int p = 0; p < MP_THREADS; p++)
        serex__thread_join(th[p]);
    assert_int_equal(atomic_load(&m->rc), 0);
    serex_shutdown(serex_scheduler_executor(f->s));
    assert_int_equal(serex_await_termination(serex_scheduler_executor(f->s),
                                             TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_scheduler_pending(f->s), 0);
    for (int p = 0; p < MP_THREADS; p++)
        for (int i = 0; i < MP_PER; i++)
            assert_int_equal(atomic_load(&m->ran[p][i]),
                             m->cancelled[p][i] ? 0 : 1);
    assert_int_equal(serex_destroy(m->pool), SEREX_OK);
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(bad_input_is_einval),
        T(manual_one_shot_fires_at_due_never_before),
        T(manual_fires_in_due_order_ties_in_schedule_order),
        T(manual_far_delays_on_a_tiny_wheel),
        T(manual_fixed_rate_has_no_drift),
        T(manual_fixed_rate_coalesces_missed_runs),
        T(manual_fixed_rate_long_run_is_followed_at_once),
        T(manual_fixed_delay_counts_from_the_end_of_a_run),
        T(missed_policies_after_a_stall),
        T(missed_policies_after_a_long_run),
        T(missed_policy_bad_input_and_overrun_outside),
        T(shutdown_policy_hand_back_and_drop),
        T(run_until_gives_every_task_its_exact_time),
        T(run_until_stops_at_the_deadline),
        T(timer_thread_hooks_run_around_it),
        T(manual_delays_saturate_never_wrap),
        T(manual_advance_at_the_end_of_time_returns),
        T(cancel_in_every_state),
        T(release_does_not_cancel),
        T(periodic_cancelled_from_its_own_run),
        T(cap_gives_efull),
        T(cap_is_exact_under_producers_on_several_shards),
        T(refused_runs_are_counted_and_handed_over),
        T(refused_periodic_run_is_missed_and_the_timer_goes_on),
        T(refused_periodic_run_ends_the_timer_by_policy),
        T(target_shutdown_now_hands_back_the_users_task),
        T(batch_one_task_per_target_per_fire_in_order),
        T(batch_per_target_two_targets_and_the_timer_thread),
        T(batch_more_targets_than_the_table),
        T(batch_cancel_inside_a_batch_skips_and_frees),
        T(batch_settles_in_groups_and_frees_every_record),
        T(batch_taken_back_hands_back_each_one_shot_in_order),
        T(batch_rest_taken_back_hands_back_in_order),
        T(batch_rest_dropped_ends_each_run),
        T(batch_refused_is_refused_run_by_run),
        T(batch_run_awaiting_its_scheduler_is_edeadlk),
        T(shutdown_cancels_periodic_lets_one_shots_fire),
        T(cancel_after_shutdown_ended_a_queued_periodic_is_false),
        T(shutdown_now_hands_back_one_shots_in_due_order),
        T(manual_destroy_drops_pending_and_cancels_futures),
        T(destroy_waits_for_a_run_on_a_pool),
        T(destroy_waits_for_runs_queued_on_a_manual_target),
        T(destroy_after_the_target_dropped_the_run),
        T(destroy_detaches_from_a_run_that_cannot_come),
        T(face_execute_runs_on_the_timer_thread),
        T(await_and_destroy_from_own_task_is_edeadlk),
        T(allocation_failure_changes_nothing),
        T(burst_of_timers_is_reclaimed),
        T(threaded_timers_never_fire_early),
        T(coalesce_window_opens_doubles_to_max_and_shuts),
        T(coalesce_deadline_is_never_early_and_within_the_window),
        T(coalesce_lone_timer_after_a_burst),
        T(threaded_bursts_open_the_window_never_early),
        T(threaded_bursts_with_coalescing_off_keep_it_shut),
        T(threaded_window_shuts_and_new_timers_still_ring),
        T(threaded_custom_clock_is_honoured),
        T(threaded_fire_of_several_due_times_is_one_batch),
        T(threaded_periodic_runs_never_overlap),
        T(cancel_races_firing),
        T(batches_taken_back_racing_cancel_lose_nothing),
        T(many_producers_schedule_and_cancel),
#undef T
    };

    return cmocka_run_group_tests_name("scheduler", tests, NULL, NULL);
}
