/* SPDX-License-Identifier: MIT */
/*
 * bench_timer.c - the timer workloads of serex_bench, on the
 * scheduler: timer_schedule_cancel, timer_accuracy, timer_periodic and
 * timer_load.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>

/* --- timers: the scheduler, as the peers' timer benches --- */

/*
 * As in the peers (shared/peers/c/asio.cpp and libuv.c), one thread, the
 * main one, schedules and cancels, and the tasks run on the timer thread:
 * target NULL, as asio's handlers run on its one io_context thread and
 * netty-hwt's on its wheel's worker. The scheduler has the defaults, a
 * 1 ms tick and 512 slots a level, netty-hwt's wheel. Sizes and the
 * RESULT lines are those of shared/peers/c/common.h.
 */
#define ACCURACY_TIMERS 10000L          /* timer_accuracy, --quick too */
#define PERIOD_NS (10 * NS_PER_MS)      /* timer_periodic */
#define PERIODIC_RUN_NS (2 * NS_PER_S)
/* How long a timer bench waits past its last due time before it gives up
 * on timers that never ran (and counts them as violations): no hang. */
#define TIMER_WAIT_CAP_NS (30 * NS_PER_S)
/* A scheduler teardown slower than this is reported on stderr: with
 * nothing pending it has nothing to wait for. */
#define SLOW_TEARDOWN_NS (100 * NS_PER_MS)

/* The 64-bit LCG of WORKLOADS.md: every impl draws the same delays. */
struct lcg {
    uint64_t x;
};

static uint64_t lcg_next(struct lcg *g)
{
    g->x = g->x * 6364136223846793005ULL + 1442695040888963407ULL;
    return g->x >> 33;
}

/* A scheduler with the defaults. NULL on failure, reported. */
static serex_scheduler *scheduler_start(void)
{
    serex_scheduler *s;
    int rc = serex_scheduler_create(NULL, &s);

    if (rc != SEREX_OK) {
        report_error("serex_scheduler_create", rc);
        return NULL;
    }
    bench_watch(serex_scheduler_executor(s));
    return s;
}

/*
 * Hands back what is still pending (nothing, when the bench went well:
 * anything is reported), then destroys @s, which waits for the timer
 * thread: every task's writes are visible here on return. Every handle
 * must be released before. 0, or -1 if the destroy failed.
 */
static int scheduler_stop(serex_scheduler *s, const char *bench)
{
    serex_executor *ex = serex_scheduler_executor(s);
    int64_t t0 = now_ns();
    size_t left = serex_shutdown_now(ex, NULL, NULL);
    int rc = serex_destroy(ex);
    int64_t took = now_ns() - t0;

    if (left != 0)
        fprintf(stderr, "%s: shutdown_now handed back %zu timers\n", bench,
                left);
    if (took > SLOW_TEARDOWN_NS)
        fprintf(stderr, "%s: scheduler teardown took %.1f ms\n", bench,
                (double)took / NS_PER_MS);
    if (rc != SEREX_OK)
        report_error("serex_destroy", rc);
    return rc == SEREX_OK ? 0 : -1;
}

/* --- timer_schedule_cancel --- */

struct cancel_run {
    serex_scheduler *s;
    serex_timer **h;   /* the M handles, the caller's storage */
    long m;            /* timers to make */
    long made;         /* timers made (m unless a schedule failed) */
    long refused;      /* cancels that returned false (goal 0) */
    atomic_long fired; /* timers that ran (goal 0) */
};

/* Must never run: every timer is cancelled long before its 1 s. Relaxed:
 * only counted; the scheduler's destroy orders it before the read. */
static void cancel_fired_task(void *arg)
{
    atomic_fetch_add_explicit((atomic_long *)arg, 1, memory_order_relaxed);
}

/*
 * The timed region, as the peers': M schedule calls, then M cancels, on
 * this thread. The handles are released afterwards, untimed, as the peers
 * close their libuv timers and destroy their asio ones after theirs.
 * Returns the elapsed ns, or -1 if a schedule failed (the timers made are
 * cancelled even then).
 */
static int64_t cancel_measure(struct cancel_run *r)
{
    struct lcg g = {42};
    int rc = SEREX_OK;
    int64_t t0 = now_ns();

    for (; r->made < r->m; r->made++) {
        int64_t delay = NS_PER_S + (int64_t)(lcg_next(&g) % 59000) * NS_PER_MS;

        rc = serex_schedule(r->s, NULL, delay, cancel_fired_task, &r->fired,
                            &r->h[r->made]);
        if (rc != SEREX_OK)
            break;
    }
    for (long i = 0; i < r->made; i++)
        r->refused += !serex_timer_cancel(r->h[i]);
    int64_t elapsed = now_ns() - t0;
    if (rc != SEREX_OK)
        report_error("serex_schedule", rc);
    return rc == SEREX_OK ? elapsed : -1;
}

/*
 * Violations: timers that ran plus cancels that returned false (a timer
 * that ran shows in both). bytes_per_timer is the growth of ru_maxrss,
 * the process's peak RSS, over M, as the peers measure it: the baseline
 * is read once the scheduler is made and the handle array touched (that
 * array is the caller's, not the scheduler's: the JVM peers too allocate
 * theirs before their baseline), the peak after the timed region, which
 * holds the M timers at its middle. ru_maxrss never goes down, so this
 * means something only in a fresh process, as compare.sh runs it.
 */
static void cancel_report(const struct bench_cfg *cfg, struct cancel_run *r,
                          int64_t elapsed_ns, long grown_kb)
{
    long fired = atomic_load_explicit(&r->fired, memory_order_relaxed);

    if (fired != 0 || r->refused != 0)
        fprintf(stderr, "timer_schedule_cancel: %ld timers fired, %ld "
                "cancels returned false\n", fired, r->refused);
    printf("RESULT bench=timer_schedule_cancel impl=%s threads=%d "
           "timers=%ld ops_per_sec=%.0f bytes_per_timer=%.0f "
           "violations=%ld\n",
           IMPL, cfg->threads, r->m, 2.0 * (double)r->m * 1e9 / elapsed_ns,
           (double)grown_kb * 1024.0 / (double)r->m, fired + r->refused);
    fflush(stdout);
}

/*
 * Makes @p's pages resident, so they count in the baseline RSS. Through a
 * volatile pointer: the compiler turns malloc plus memset 0 into calloc,
 * whose fresh pages stay untouched.
 */
static void touch_pages(void *p, size_t n)
{
    volatile unsigned char *b = p;

    for (size_t off = 0; off < n; off += 4096)
        b[off] = 0;
}

int bench_timer_schedule_cancel(const struct bench_cfg *cfg)
{
    struct cancel_run r = {.m = cfg->m};

    atomic_init(&r.fired, 0);
    if ((r.s = scheduler_start()) == NULL)
        return -1;
    r.h = malloc((size_t)r.m * sizeof *r.h);
    if (r.h == NULL)
        perror("serex_bench: malloc");
    else
        touch_pages(r.h, (size_t)r.m * sizeof *r.h);
    long base_kb = peak_rss_kb();
    int64_t elapsed = r.h ? cancel_measure(&r) : -1;
    long grown_kb = peak_rss_kb() - base_kb;
    for (long i = 0; i < r.made; i++)
        serex_timer_release(r.h[i]);
    int rc = scheduler_stop(r.s, "timer_schedule_cancel");
    if (elapsed >= 0 && rc == 0)
        cancel_report(cfg, &r, elapsed, grown_kb);
    free(r.h);
    return elapsed >= 0 && rc == 0 ? 0 : -1;
}

/* --- timer_accuracy --- */

struct accuracy_run;

struct accuracy_probe {
    struct accuracy_run *run;
    int64_t due;   /* main: the clock read just before scheduling + delay */
    int64_t ran;   /* timer thread: the clock read when the task ran */
    int runs;      /* timer thread: times the task ran (goal 1) */
};

struct accuracy_run {
    struct accuracy_probe *p; /* one per timer */
    long n;
    atomic_long left;         /* timers that have not run yet */
    struct done done;         /* the last one ran */
};

/*
 * On the timer thread. Relaxed: every task runs on that one thread and
 * the scheduler's destroy publishes their writes to the main thread; the
 * count only says when to wake it.
 */
static void accuracy_task(void *arg)
{
    struct accuracy_probe *p = arg;

    p->ran = now_ns();
    p->runs++;
    if (atomic_fetch_sub_explicit(&p->run->left, 1, memory_order_relaxed)
        == 1)
        done_signal(&p->run->done);
}

/*
 * Schedules the n timers, all at once. due is read before the call:
 * serex reads its clock inside it, later, so its own due time is never
 * earlier than ours, and a run before ours is truly early. -1 if a
 * schedule failed (reported); the timers made then still run or are
 * handed back by the caller's scheduler_stop.
 */
static int accuracy_schedule(struct accuracy_run *r, serex_scheduler *s)
{
    struct lcg g = {42};

    for (long i = 0; i < r->n; i++) {
        struct accuracy_probe *p = &r->p[i];
        int64_t delay = NS_PER_MS
                        + (int64_t)(lcg_next(&g) % (499 * NS_PER_MS));

        p->run = r;
        p->due = now_ns() + delay;
        int rc = serex_schedule(s, NULL, delay, accuracy_task, p, NULL);
        if (rc != SEREX_OK) {
            report_error("serex_schedule", rc);
            return -1;
        }
    }
    return 0;
}

/* The peers' report_accuracy(), but an early run is also a violation:
 * serex promises never to run a timer early. */
static void accuracy_report(const struct bench_cfg *cfg,
                            const struct accuracy_run *r, int64_t *late)
{
    size_t k = 0;
    long viol = 0, early = 0;

    for (long i = 0; i < r->n; i++) {
        if (r->p[i].runs != 1) {
            viol++;
            continue;
        }
        late[k] = r->p[i].ran - r->p[i].due;
        early += late[k++] < 0;
    }
    if (k == 0)
        late[k++] = 0;
    qsort(late, k, sizeof *late, cmp_i64);
    printf("RESULT bench=timer_accuracy impl=%s threads=%d timers=%ld "
           "p50_us=%.1f p99_us=%.1f max_us=%.1f early=%ld violations=%ld\n",
           IMPL, cfg->threads, r->n, (double)percentile(late, k, 50) / 1e3,
           (double)percentile(late, k, 99) / 1e3, (double)late[k - 1] / 1e3,
           early, viol + early);
    fflush(stdout);
}

/* Schedules, waits for the last run (or the cap), stops the scheduler.
 * 0 if every call succeeded; timers that never ran show as violations. */
static int accuracy_measure(struct accuracy_run *r)
{
    serex_scheduler *s = scheduler_start();
    int ok = s != NULL && accuracy_schedule(r, s) == 0;

    /* The last due time is at most 500 ms away. */
    if (ok && !done_wait_for(&r->done, 500 * NS_PER_MS + TIMER_WAIT_CAP_NS))
        fprintf(stderr, "timer_accuracy: %ld timers had not run after "
                "30 s past their due time\n",
                atomic_load_explicit(&r->left, memory_order_relaxed));
    if (s != NULL && scheduler_stop(s, "timer_accuracy") != 0)
        ok = 0;
    return ok ? 0 : -1;
}

int bench_timer_accuracy(const struct bench_cfg *cfg)
{
    struct accuracy_run r = {.n = ACCURACY_TIMERS};
    int64_t *late = malloc((size_t)r.n * sizeof *late);

    atomic_init(&r.left, r.n);
    r.p = calloc((size_t)r.n, sizeof *r.p);
    if (r.p == NULL || late == NULL || done_init(&r.done) != 0) {
        if (r.p == NULL || late == NULL)
            perror("serex_bench: malloc");
        free(r.p);
        free(late);
        return -1;
    }
    int rc = accuracy_measure(&r);
    if (rc == 0)
        accuracy_report(cfg, &r, late);
    sem_destroy(&r.done.sem);
    free(r.p);
    free(late);
    return rc;
}

/* --- timer_periodic --- */

/*
 * Run k (k = 1, 2, ...) is due at start + k * period, start being read
 * just before the schedule call (serex's own start is later: an early run
 * here is truly early). Fields below `self` are the timer thread's alone
 * until the scheduler's destroy publishes them: a fixed-rate timer never
 * starts a run while the previous one runs, and target NULL keeps them
 * all on the timer thread.
 */
struct periodic_run {
    int64_t start;
    struct done done;            /* the stopping run has cancelled */
    _Atomic(serex_timer *) self; /* the handle, for the stopping run */
    long fires;
    long early;                  /* runs k before start + k * period */
    long after_stop;             /* runs after the stopping one (goal 0) */
    int64_t last;                /* when the last counted run ran */
    bool stopped;
    bool self_cancelled;         /* the stopping run's cancel said true */
};

/*
 * The peers' stop rule: the first run at or after start + 2 s - period/2
 * is the last counted (the 200th, for a punctual timer), and it cancels
 * its own timer (allowed from the timer's task), as asio's handler stops
 * re-arming there.
 */
static void periodic_task(void *arg)
{
    struct periodic_run *r = arg;
    int64_t now = now_ns();

    if (r->stopped) {
        r->after_stop++;
        return;
    }
    r->fires++;
    r->last = now;
    r->early += now < r->start + r->fires * PERIOD_NS;
    if (now - r->start < PERIODIC_RUN_NS - PERIOD_NS / 2)
        return;
    r->stopped = true;
    /* Acquire: pairs with the release store in periodic_measure. NULL
     * (not yet stored) cannot happen 2 s in; the main thread's cancel
     * after the wait covers it anyway. */
    serex_timer *t = atomic_load_explicit(&r->self, memory_order_acquire);
    r->self_cancelled = t != NULL && serex_timer_cancel(t);
    done_signal(&r->done);
}

/* Schedules the timer and waits for its stopping run (or the cap). Then
 * cancels it again (false is expected: it cancelled itself) and releases
 * the handle. 0, or -1 if the schedule failed. */
static int periodic_measure(struct periodic_run *r, serex_scheduler *s)
{
    serex_timer *t;

    r->start = now_ns();
    int rc = serex_schedule_fixed_rate(s, NULL, PERIOD_NS, PERIOD_NS,
                                       periodic_task, r, &t);
    if (rc != SEREX_OK) {
        report_error("serex_schedule_fixed_rate", rc);
        return -1;
    }
    /* Release: pairs with the acquire load in periodic_task. */
    atomic_store_explicit(&r->self, t, memory_order_release);
    if (!done_wait_for(&r->done, PERIODIC_RUN_NS + TIMER_WAIT_CAP_NS))
        fprintf(stderr, "timer_periodic: no run reached 2 s\n");
    else if (!r->self_cancelled)
        fprintf(stderr, "timer_periodic: its cancel from its own task "
                "returned false\n");
    if (serex_timer_cancel(t) && r->self_cancelled)
        fprintf(stderr, "timer_periodic: cancelled twice\n");
    serex_timer_release(t);
    return 0;
}

/* The peers' report_periodic(); violations add early runs and runs after
 * the timer's own successful cancel to a fire count outside 200 +/- 1. */
static void periodic_report(const struct bench_cfg *cfg,
                            const struct periodic_run *r)
{
    long expect = PERIODIC_RUN_NS / PERIOD_NS;
    long late_runs = r->self_cancelled ? r->after_stop : 0;
    long viol = (r->fires < expect - 1 || r->fires > expect + 1) + r->early
                + late_runs;

    if (late_runs != 0)
        fprintf(stderr, "timer_periodic: %ld runs after the timer "
                "cancelled itself\n", late_runs);
    printf("RESULT bench=timer_periodic impl=%s threads=%d period_us=%lld "
           "fires=%ld drift_us=%.1f early=%ld violations=%ld\n",
           IMPL, cfg->threads, (long long)(PERIOD_NS / NS_PER_US), r->fires,
           (double)(r->last - (r->start + r->fires * PERIOD_NS)) / 1e3,
           r->early, viol);
    fflush(stdout);
}

int bench_timer_periodic(const struct bench_cfg *cfg)
{
    struct periodic_run r = {.start = 0};

    atomic_init(&r.self, NULL);
    if (done_init(&r.done) != 0)
        return -1;
    serex_scheduler *s = scheduler_start();
    int rc = s ? periodic_measure(&r, s) : -1;
    if (s != NULL && scheduler_stop(s, "timer_periodic") != 0)
        rc = -1;
    if (rc == 0)
        periodic_report(cfg, &r);
    sem_destroy(&r.done.sem);
    return rc;
}

/* --- timer_load --- */

#define LATE_UNSET INT64_MIN

/* One timer's record: its due time, then the lateness its task saw. */
struct load_timer {
    struct load_run *run;
    int64_t due;
    int64_t late; /* LATE_UNSET until it fires */
};

struct load_run {
    atomic_long fires, twice;
    long m;
    int64_t cpu_end;
    struct done done;
};

static void load_task(void *arg)
{
    struct load_timer *t = arg;
    int64_t now = now_ns();
    struct load_run *r = t->run;

    if (t->late != LATE_UNSET)
        atomic_fetch_add_explicit(&r->twice, 1, memory_order_relaxed);
    t->late = now - t->due;
    if (atomic_fetch_add_explicit(&r->fires, 1, memory_order_acq_rel) + 1 ==
        r->m) {
        r->cpu_end = cpu_time_ns();
        done_signal(&r->done);
    }
}

static void load_report(const struct bench_cfg *cfg, struct load_timer *t,
                        long m, long fires, long twice, int64_t cpu_ns)
{
    int64_t *late = malloc((size_t)m * sizeof *late);
    long k = 0, early = 0, viol;

    if (late == NULL)
        return;
    for (long i = 0; i < m; i++) {
        if (t[i].late == LATE_UNSET)
            continue;
        early += t[i].late < 0;
        late[k++] = t[i].late;
    }
    viol = (m - k) + twice + (fires != m);
    if (k == 0)
        late[k++] = 0;
    qsort(late, (size_t)k, sizeof *late, cmp_i64);
    printf("RESULT bench=timer_load impl=%s threads=%d timers=%ld "
           "cpu_ns_per_timer=%.0f p50_us=%.1f p99_us=%.1f max_us=%.1f "
           "early=%ld fires=%ld violations=%ld\n",
           IMPL, cfg->threads, m, (double)cpu_ns / (double)m,
           (double)pct_sorted(late, k, 50) / 1e3,
           (double)pct_sorted(late, k, 99) / 1e3, (double)late[k - 1] / 1e3,
           early, fires, viol);
    fflush(stdout);
    free(late);
}

/* M one-shot timers, delays uniform in [0, 1 s), scheduled as fast as the
 * main thread can onto the pool; each task records its lateness. */
int bench_timer_load(const struct bench_cfg *cfg)
{
    long m = cfg->m;
    struct load_timer *t = malloc((size_t)m * sizeof *t);
    struct load_run r = {.m = m};
    serex_executor *pool = NULL;
    serex_scheduler *s = NULL;
    struct lcg g = {42};
    int64_t cpu0;
    int ok = 0;

    atomic_init(&r.fires, 0);
    atomic_init(&r.twice, 0);
    if (t == NULL || done_init(&r.done) != 0)
        goto out;
    pool = pool_start(cfg->threads);
    s = pool != NULL ? scheduler_start() : NULL;
    if (s == NULL)
        goto out;
    for (long i = 0; i < m; i++)
        t[i] = (struct load_timer){&r, 0, LATE_UNSET};
    cpu0 = cpu_time_ns();
    for (long i = 0; i < m; i++) {
        int64_t d = (int64_t)(lcg_next(&g) % 1000000u) * NS_PER_US;
        int rc;

        t[i].due = now_ns() + d;
        rc = serex_schedule(s, pool, d, load_task, &t[i], NULL);
        if (rc != SEREX_OK) {
            report_error("serex_schedule", rc);
            r.m = i; /* wait for the ones scheduled, then fail */
            m = i;
            break;
        }
    }
    ok = m == cfg->m;
    if (m > 0 && !done_wait_for(&r.done, 60 * NS_PER_S)) {
        fprintf(stderr, "timer_load: not every timer fired in 60 s\n");
        ok = 0;
    }
    /* the scheduler's destroy waits for its runs; the pool's, for theirs:
     * every record is final afterwards */
    if (scheduler_stop(s, "timer_load") != 0)
        ok = 0;
    s = NULL;
    if (pool_stop(pool) != 0)
        ok = 0;
    pool = NULL;
    if (ok)
        load_report(cfg, t, m, atomic_load(&r.fires), atomic_load(&r.twice),
                    r.cpu_end - cpu0);
out:
    if (s != NULL)
        scheduler_stop(s, "timer_load");
    if (pool != NULL)
        pool_stop(pool);
    sem_destroy(&r.done.sem);
    free(t);
    return ok ? 0 : -1;
}
