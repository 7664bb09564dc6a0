/* SPDX-License-Identifier: MIT */
/*
 * test_faults.h - allocation failure everywhere: the driver and the checks
 * that tests/test_faults_*.c share (one file per component).
 *
 * Each scenario is a fixed sequence of public calls. It runs once with
 * injection off, counting its allocations (n), then n more times with the
 * k-th allocation failing, k = 1..n. Every status is checked:
 *  - a call that fails says SEREX_ENOMEM (at most once a run: one
 *    allocation fails) and changes nothing visible (stats, lanes, queues,
 *    pending timers); a refusal whose path allocates first (execute after
 *    shutdown) may say SEREX_ENOMEM instead of SEREX_EREJECTED;
 *  - a failure the library absorbs (a shard table that does not grow, a
 *    continuation run inline, a drain that keeps running rather than
 *    resubmit, a gate task its target refused, a timer run its target
 *    refused) still loses nothing;
 *  - every task accepted (SEREX_OK) runs exactly once, or comes back
 *    exactly once: from shutdown_now or a gate's destroy (on_pending), a
 *    scheduler's on_rejected, or a cancel that said true (a future that
 *    says SEREX_ECANCELED). Counted per task id.
 * Every object is destroyed on every path, so the ASan stage's
 * LeakSanitizer sees any leak; a pool whose creation failed must leave no
 * thread behind (counted in /proc/self/task on Linux).
 *
 * The node cache would make the allocations of a run depend on what the
 * runs before it left there, so each run starts and ends with
 * serex__cache_trim. On the manual executor a run is then deterministic:
 * run k reaches its k-th allocation (checked), and it fails.
 *
 * A file runs a scenario with fail_each from a case registered with
 * FAULTS_TEST (the fixture below); what is here is static inline, so a
 * file that does not use a piece of it is not warned about it.
 */
#ifndef SEREX_TEST_FAULTS_H
#define SEREX_TEST_FAULTS_H

#include "test_util.h"

#include <stdlib.h> /* calloc, free */

#include "nodecache_internal.h" /* serex__cache_trim */

#define MAXT 128  /* task ids one run may hand out */
#define MAXK 64   /* distinct keys of one run */

struct run;

/* A task's argument; also a channel operation (kind SEND or RECV). */
struct task {
    struct run *r;
    int id;
    int kidx;      /* which key (striped), or which kind (channel) */
    uint64_t key;
    bool periodic; /* a periodic timer's: runs any number of times */
};

/* Everything one run of a scenario saw. */
struct run {
    unsigned long fail_at; /* the allocation that fails; 0: none */
    int variant;           /* scenario-specific: which way to end */
    int enomem;            /* SEREX_ENOMEM statuses seen */
    int ntasks;
    struct task tasks[MAXT];
    bool accepted[MAXT];   /* its call said SEREX_OK */
    atomic_int ran[MAXT];  /* it ran (pool workers too) */
    int handed[MAXT];      /* given to an on_pending */
    int refused[MAXT];     /* given to a scheduler's on_rejected */
    int cancelled[MAXT];   /* a cancel said true, or its future ECANCELED */
    int got[MAXT];         /* channel receives: item id, or NONE (-1) */
    int log[MAXT];         /* ids in the order they ran (one thread) */
    int nlog;
    int handed_log[MAXT];  /* ids in the order they were handed back */
    int nhanded;
};

struct fixture {
    struct run *run; /* the current run; freed by the next or teardown */
    serex_executor *manual; /* tests outside the driver: teardown ends */
    serex_striped *st;      /* them even after a failed check */
};

typedef void (*scenario_fn)(struct run *r);

/* --- tasks and callbacks --- */

static inline struct task *task_new(struct run *r, uint64_t key)
{
    struct task *t;

    assert_true(r->ntasks < MAXT);
    t = &r->tasks[r->ntasks];
    *t = (struct task){.r = r, .id = r->ntasks, .key = key};
    r->ntasks++;
    return t;
}

/* Runs on the calling thread of a manual executor: logs its order. */
static inline void log_task(void *arg)
{
    struct task *t = arg;
    struct run *r = t->r;

    /* relaxed: one thread here; the pool's count_task shares the field */
    atomic_fetch_add_explicit(&r->ran[t->id], 1, memory_order_relaxed);
    if (r->nlog < MAXT)
        r->log[r->nlog++] = t->id;
}

/* Runs on any thread (pool workers): counts only. */
static inline void count_task(void *arg)
{
    struct task *t = arg;

    /* relaxed: read after destroy or a future's wait, which order it */
    atomic_fetch_add_explicit(&t->r->ran[t->id], 1, memory_order_relaxed);
}

static inline void periodic_task(void *arg)
{
    count_task(arg);
}

static inline void *call_logged(void *arg)
{
    log_task(arg);
    return arg;
}

static inline void *call_counted(void *arg)
{
    count_task(arg);
    return arg;
}

static inline struct task *our_task(serex_fn fn, void *arg, struct run *r)
{
    struct task *t = arg;

    assert_true(fn == log_task || fn == count_task || fn == periodic_task);
    assert_ptr_equal(t->r, r);
    return t;
}

static inline void on_pending(serex_fn fn, void *arg, void *ctx)
{
    struct run *r = ctx;
    struct task *t = our_task(fn, arg, r);

    r->handed[t->id]++;
    if (r->nhanded < MAXT)
        r->handed_log[r->nhanded++] = t->id;
}

/* --- statuses --- */

/* A call that may allocate: SEREX_OK, or SEREX_ENOMEM while armed. */
static inline bool status_ok(struct run *r, int rc)
{
    if (rc == SEREX_OK)
        return true;
    assert_int_equal(rc, SEREX_ENOMEM);
    assert_true(r->fail_at != 0);
    r->enomem++;
    return false;
}

/* A call that must be refused with @want; its path may allocate first. */
static inline void status_refused(struct run *r, int rc, int want)
{
    if (rc == SEREX_ENOMEM && r->fail_at != 0) {
        r->enomem++;
        return;
    }
    assert_int_equal(rc, want);
}

/* Records @t as accepted if @rc says so. */
static inline bool accept(struct run *r, struct task *t, int rc)
{
    if (!status_ok(r, rc))
        return false;
    r->accepted[t->id] = true;
    return true;
}

static inline serex_stats stats_of(serex_executor *ex)
{
    serex_stats st;

    assert_int_equal(serex_executor_stats(ex, &st), SEREX_OK);
    return st;
}

static inline uint64_t manual_queued(serex_executor *m)
{
    return stats_of(m).queued;
}

/*
 * A future the run still holds: done (its call ran once and the value is
 * its task) or cancelled (its call never ran). Releases it. Returns
 * whether it was cancelled.
 */
static inline bool settle_future(struct run *r, serex_future *fu,
                                 struct task *t)
{
    int rc;

    if (fu == NULL)
        return false;
    rc = serex_future_wait(fu, 0);
    if (rc == SEREX_OK) {
        assert_int_equal(atomic_load(&r->ran[t->id]), 1);
        assert_ptr_equal(serex_future_value(fu), t);
    } else {
        assert_int_equal(rc, SEREX_ECANCELED);
        assert_int_equal(atomic_load(&r->ran[t->id]), 0);
        assert_null(serex_future_value(fu));
        r->cancelled[t->id] = 1;
    }
    assert_false(serex_future_cancel(fu));
    serex_future_release(fu);
    return rc == SEREX_ECANCELED;
}

/* --- what every run must show --- */

/* Accepted tasks done exactly once; the others never touched. */
static inline void check_run(struct run *r)
{
    if (r->fail_at == 0)
        assert_int_equal(r->enomem, 0);
    else
        assert_true(r->enomem <= 1);
    for (int id = 0; id < r->ntasks; id++) {
        int ran = atomic_load(&r->ran[id]);

        if (!r->accepted[id]) {
            assert_int_equal(ran + r->handed[id] + r->refused[id] +
                                 r->cancelled[id],
                             0);
        } else if (r->tasks[id].periodic) {
            assert_int_equal(r->handed[id], 0); /* cancelled, not handed */
            assert_true(r->refused[id] <= 1);
        } else {
            assert_int_equal(ran + r->handed[id] + r->refused[id] +
                                 r->cancelled[id],
                             1);
        }
    }
}

static inline void assert_ascending(const int *ids, int n)
{
    for (int i = 1; i < n; i++)
        assert_true(ids[i - 1] < ids[i]);
}

/* Per key: what ran (in run order), then what was handed back (in that
 * order), has increasing ids: FIFO per key, and nothing ran behind a
 * task that was handed back. */
static inline void assert_fifo_per_key(struct run *r)
{
    int last[MAXK];

    for (int k = 0; k < MAXK; k++)
        last[k] = -1;
    for (int i = 0; i < r->nlog; i++) {
        int id = r->log[i], k = r->tasks[id].kidx;

        assert_true(id > last[k]);
        last[k] = id;
    }
    for (int i = 0; i < r->nhanded; i++) {
        int id = r->handed_log[i], k = r->tasks[id].kidx;

        assert_true(id > last[k]);
        last[k] = id;
    }
}

/* Accepted tasks, and of those: ran, still waiting; keys with waiters. */
struct tally {
    uint64_t accepted, ran, waiting;
    size_t busy_keys;
};

static inline struct tally tally_of(struct run *r)
{
    struct tally t = {0};
    int per_key[MAXK] = {0};

    for (int id = 0; id < r->ntasks; id++) {
        if (!r->accepted[id])
            continue;
        t.accepted++;
        if (atomic_load(&r->ran[id]) != 0) {
            t.ran++;
        } else if (r->handed[id] == 0 && r->cancelled[id] == 0) {
            t.waiting++;
            if (per_key[r->tasks[id].kidx]++ == 0)
                t.busy_keys++;
        }
    }
    return t;
}

/*
 * The end of a scenario on the manual executor @m, after shutdown_now
 * (which said @n, r->nhanded being @handed0 before it) and the destroy of
 * what ran on @m: destroys @m; nothing ran since shutdown_now (the log
 * still holds @nlog0 ids); @n is what it handed back plus @fu if it
 * cancelled that (settled here, @ft its task); FIFO per key.
 */
static inline void end_on_manual(struct run *r, serex_executor *m,
                                 int nlog0, size_t n, int handed0,
                                 serex_future *fu, struct task *ft)
{
    assert_int_equal(serex_destroy(m), SEREX_OK);
    assert_int_equal(r->nlog, nlog0);
    assert_int_equal(n, (size_t)(r->nhanded - handed0) +
                            settle_future(r, fu, ft));
    assert_fifo_per_key(r);
}

/* Makes a scenario's manual executor: false, with nothing made, if its
 * allocation failed. */
static inline bool manual_created(struct run *r, serex_executor **m)
{
    if (status_ok(r, serex_manual_create(m)))
        return true;
    assert_null(*m);
    return false;
}

/* Runs one task of @m: it finds one exactly when one was queued. */
static inline void manual_run_one_checked(serex_executor *m)
{
    bool had = manual_queued(m) > 0;

    assert_int_equal(serex_manual_run_one(m), had);
}

/* --- the driver --- */

static inline struct run *run_new(struct fixture *f, unsigned long fail_at,
                                  int variant)
{
    free(f->run);
    f->run = calloc(1, sizeof *f->run);
    assert_non_null(f->run);
    f->run->fail_at = fail_at;
    f->run->variant = variant;
    return f->run;
}

/* One run, the fail_at-th allocation failing (0: none). Returns how many
 * allocations it made. */
static inline unsigned long run_once(struct fixture *f, scenario_fn sc,
                                     unsigned long fail_at, int variant)
{
    struct run *r = run_new(f, fail_at, variant);
    unsigned long made;

    serex__cache_trim();
    serex__alloc_fail_nth(fail_at); /* also restarts the count */
    sc(r);
    made = serex__alloc_fail_nth(0);
    serex__cache_trim();
    check_run(r);
    return made;
}

/*
 * Counts the scenario's allocations, then fails each in turn. A first run,
 * not counted, lets this thread make what it makes once in its life:
 * where thread-locals are emulated (SEREX__TLS_EMULATED: mingw-w64's gcc,
 * clang -femulated-tls) the node cache allocates a thread's lists on its
 * first use, so the counting run would make one allocation that no later
 * run makes, and run n would never reach its n-th.
 */
static inline unsigned long fail_each(struct fixture *f, const char *name,
                                      scenario_fn sc, int variant)
{
    unsigned long n;

    (void)run_once(f, sc, 0, variant);
    n = run_once(f, sc, 0, variant);

    assert_true(n >= 1);
    for (unsigned long k = 1; k <= n; k++)
        /* it reached its k-th allocation (which failed) */
        assert_true(run_once(f, sc, k, variant) >= k);
    print_message("[ faults   ] %s: %lu allocations, each failed in turn\n",
                  name, n);
    return n;
}

/* --- the fixture: a case's state is its struct fixture --- */

static inline int faults_setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    if (f == NULL)
        return -1;
    *state = f;
    return 0;
}

static inline int faults_teardown(void **state)
{
    struct fixture *f = *state;

    serex__alloc_fail_nth(0);
    if (f->st != NULL) {
        serex_shutdown_now(serex_striped_executor(f->st), NULL, NULL);
        test_run_all(f->manual);
        assert_int_equal(serex_destroy(serex_striped_executor(f->st)),
                         SEREX_OK);
    }
    if (f->manual != NULL)
        assert_int_equal(serex_destroy(f->manual), SEREX_OK);
    serex__cache_trim();
    free(f->run);
    free(f);
    return 0;
}

/* A case with the fixture above. */
#define FAULTS_TEST(name) \
    cmocka_unit_test_setup_teardown(name, faults_setup, faults_teardown)

/* Defines the case @name: @scenario (@variant) with each allocation
 * failed in turn; @label names it in the output. */
#define FAULTS_CASE(name, label, scenario, variant)  \
    static void name(void **state)                   \
    {                                                \
        fail_each(*state, label, scenario, variant); \
    }

/* A file's main: runs its cases (FAULTS_TEST(name), ...) as @group. */
#define FAULTS_MAIN(group, ...)                                       \
    int main(void)                                                    \
    {                                                                 \
        const struct CMUnitTest tests[] = {__VA_ARGS__};              \
                                                                      \
        return cmocka_run_group_tests_name(group, tests, NULL, NULL); \
    }

#endif /* SEREX_TEST_FAULTS_H */
