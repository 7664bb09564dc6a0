/* SPDX-License-Identifier: MIT */
/*
 * serex_bench.c - serex on the workloads of shared/bench/WORKLOADS.md.
 *
 *     serex_bench [BENCH ...] [--threads T] [--quick] [--variant V] [--list]
 *
 * Every bench of WORKLOADS.md copies the peer benchmarks (shared/peers/c)
 * step for step (channel_pipeline is serex's own: no peer runs it):
 * same sizes, same untimed warm-up, same clock, same timed region, and the
 * same RESULT line with its keys in the same order, so bench/compare.sh can
 * set our numbers beside theirs. Only RESULT lines go to stdout; progress
 * and errors go to stderr.
 *
 * With no BENCH, every bench in bench_table[] runs, in this process. V picks
 * one variant (the producer count of pool_throughput, the stripe count K of
 * striped_throughput), so a runner can take one measurement per process as
 * the peers' runner does; benches without variants ignore it. --quick
 * divides N and M by 10 and runs 10,000 latency rounds; timer_accuracy
 * and timer_periodic keep their sizes, as the peers' do.
 *
 * Adding a bench: write `static int bench_<name>(const struct bench_cfg *)`,
 * returning 0 once its RESULT line is printed (-1 on a serex or system
 * error, already reported), and add it to bench_table[]. bench/table.py
 * says which of its keys to tabulate.
 *
 * Exit status: 0; 1 if a bench failed; 2 on bad usage; 3 for a bench name
 * this program does not know (the peers' binaries say 3 there too).
 */
#define _POSIX_C_SOURCE 200809L

#include <serex/serex.h>

#include "pool_internal.h" /* pool_wakeups: the pool's own counters */

#include <errno.h>       /* EINTR from sem_wait, clock_nanosleep */
#include <inttypes.h>    /* PRIu64 */
#include <pthread.h>     /* producer threads */
#include <sched.h>       /* sched_yield while waiting on untimed steps */
#include <semaphore.h>   /* the end-of-run signal */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h> /* getrusage: pool_idle_cpu, peak RSS */
#include <time.h>        /* clock_gettime, clock_nanosleep */
#include <unistd.h>      /* sysconf: online CPUs */

static const char IMPL[] = "serex";

#define NS_PER_S 1000000000LL
#define NS_PER_MS 1000000LL
#define NS_PER_US 1000LL

/* Workload sizes, as in shared/peers/c/common.h; --quick divides N and M
 * by 10. */
#define FULL_N 2000000L        /* pool_throughput tasks */
#define FULL_LAT_ITERS 100000L /* pool_latency rounds */
#define FULL_M 1000000L        /* timer_schedule_cancel timers */
#define QUICK_LAT_ITERS 10000L
#define WARMUP_TASKS 1000L     /* untimed tasks run on every new pool */
#define IDLE_TASKS 1000L       /* pool_idle_cpu: work before the idle time */
#define IDLE_NS NS_PER_S       /* pool_idle_cpu: the idle time measured */
/* pool_latency stops after this long, as the peers' lat_stop() does. */
#define LAT_TIME_CAP_NS (60 * NS_PER_S)
#define MAX_THREADS 65536L     /* --threads, and producers for --variant */
/* --variant: K up to 1e8 stripes (800 MB of counters); the workload's
 * largest is 1,000,000. */
#define MAX_VARIANT 100000000L

/* What every bench is given: the parsed command line. */
struct bench_cfg {
    int threads;     /* T: pool worker threads */
    long variant;    /* producers for pool_throughput, stripes for
                        striped_throughput; 0 = every variant */
    uint64_t n;      /* tasks for the throughput benches */
    long m;          /* timers for timer_schedule_cancel */
    long lat_iters;  /* pool_latency rounds */
};

/* --- clock, spinning, errors --- */

/* CLOCK_MONOTONIC, as the peers' now_ns() and std::chrono::steady_clock. */
static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* The spin-wait hint the peers use, so our spinning costs what theirs do. */
static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void report_error(const char *call, int status)
{
    fprintf(stderr, "serex_bench: %s: %s\n", call, serex_strerror(status));
}

/* --- the end-of-run signal --- */

/*
 * The task that ends a timed run records the time and posts the semaphore,
 * so the measuring thread sleeps in sem_wait instead of spinning: on a
 * 2-core machine a spinning observer would steal a worker's CPU. This is
 * the peers' done_signal()/done_wait(), per run instead of global.
 */
struct done {
    sem_t sem;
    int64_t t_end; /* written before sem_post, read after sem_wait */
};

static int done_init(struct done *d)
{
    d->t_end = 0;
    if (sem_init(&d->sem, 0, 0) == 0)
        return 0;
    perror("serex_bench: sem_init");
    return -1;
}

static void done_signal(struct done *d)
{
    d->t_end = now_ns();
    sem_post(&d->sem);
}

static void done_wait(struct done *d)
{
    while (sem_wait(&d->sem) != 0 && errno == EINTR)
        ;
}

/* --- pools --- */

/* Release: the submitter's acquire load then sees everything the task did. */
static void countdown_task(void *arg)
{
    atomic_fetch_sub_explicit((atomic_long *)arg, 1, memory_order_release);
}

/*
 * Runs n empty tasks on @pool and waits, yielding, until all have finished.
 * Untimed. Returns SEREX_OK or the status of the failed serex_execute;
 * even then it returns only once the tasks already sent have run, since
 * they point at this stack frame.
 */
static int pool_run_tasks(serex_executor *pool, long n)
{
    atomic_long left;
    long sent = 0;
    int rc = SEREX_OK;

    atomic_init(&left, n);
    while (sent < n
           && (rc = serex_execute(pool, countdown_task, &left)) == SEREX_OK)
        sent++;
    /* Relaxed: only this thread reads it, below. Unsent tasks never count. */
    atomic_fetch_sub_explicit(&left, n - sent, memory_order_relaxed);
    while (atomic_load_explicit(&left, memory_order_acquire) != 0)
        sched_yield();
    if (rc != SEREX_OK)
        report_error("serex_execute", rc);
    return rc;
}

/*
 * A pool of @threads workers, warmed with WARMUP_TASKS untimed tasks as the
 * peers warm theirs, so no timed run pays for starting workers or filling
 * node caches (libuv and TBB start their threads lazily). NULL on failure.
 */
static serex_executor *pool_start(int threads)
{
    serex_pool_config cfg = {.threads = (unsigned)threads};
    serex_executor *pool;
    int rc = serex_pool_create(&cfg, &pool);

    if (rc != SEREX_OK) {
        report_error("serex_pool_create", rc);
        return NULL;
    }
    if (pool_run_tasks(pool, WARMUP_TASKS) != SEREX_OK) {
        serex_destroy(pool);
        return NULL;
    }
    return pool;
}

/* Shuts the pool down and waits for its tasks: their writes are then ours. */
static int pool_stop(serex_executor *pool)
{
    int rc = serex_destroy(pool);

    if (rc != SEREX_OK)
        report_error("serex_destroy", rc);
    return rc == SEREX_OK ? 0 : -1;
}

/* --- pool_throughput --- */

/* One timed run: P producers submit n counting tasks in total. */
struct throughput {
    serex_executor *pool;
    uint64_t n;
    atomic_uint_fast64_t count; /* tasks run: the workload's shared counter */
    atomic_bool go;             /* releases the producers */
    atomic_int error;           /* first failed serex_execute status, or 0 */
    struct done done;
};

struct producer {
    struct throughput *run;
    uint64_t share;             /* tasks this producer submits */
    pthread_t thread;
};

static void count_task(void *arg)
{
    struct throughput *t = arg;

    /* Relaxed, as the workload says: only the N-th count matters, and
     * done_signal's sem_post publishes the end time. */
    if (atomic_fetch_add_explicit(&t->count, 1, memory_order_relaxed) + 1
        == t->n)
        done_signal(&t->done);
}

/*
 * A failed submission means the N-th count never comes: wake the measuring
 * thread instead. Only the first failure posts, so t_end has one writer.
 */
static void throughput_fail(struct throughput *t, int status)
{
    int none = 0;

    if (atomic_compare_exchange_strong_explicit(&t->error, &none, status,
                                                memory_order_relaxed,
                                                memory_order_relaxed))
        done_signal(&t->done);
}

static void *producer_main(void *arg)
{
    struct producer *p = arg;
    struct throughput *t = p->run;

    /* Acquire: pairs with the release store of go in throughput_measure. */
    while (!atomic_load_explicit(&t->go, memory_order_acquire))
        sched_yield();
    if (atomic_load_explicit(&t->error, memory_order_relaxed) != 0)
        return NULL; /* a sibling could not be started */
    for (uint64_t k = 0; k < p->share; k++) {
        int rc = serex_execute(t->pool, count_task, t);

        if (rc != SEREX_OK) {
            throughput_fail(t, rc);
            break;
        }
    }
    return NULL;
}

static void producers_join(struct producer *p, int count)
{
    for (int i = 0; i < count; i++)
        pthread_join(p[i].thread, NULL);
}

/*
 * Starts @count producers, each parked until t->go. Returns how many
 * started; on a shortfall t->error is set, so the started ones, once
 * released, submit nothing.
 */
static int producers_start(struct producer *p, int count,
                           struct throughput *t)
{
    for (int i = 0; i < count; i++) {
        p[i].run = t;
        p[i].share = t->n / (uint64_t)count + ((uint64_t)i < t->n % count);
        int rc = pthread_create(&p[i].thread, NULL, producer_main, &p[i]);

        if (rc != 0) {
            fprintf(stderr, "serex_bench: pthread_create: %s\n",
                    strerror(rc));
            atomic_store_explicit(&t->error, -1, memory_order_relaxed);
            return i;
        }
    }
    return count;
}

/*
 * The timed region, as the peers time it: from just before releasing the
 * producers to the end time recorded by the task that makes the N-th
 * count. Returns the elapsed ns, or -1 if a producer failed.
 */
static int64_t throughput_measure(struct throughput *t, int producers)
{
    struct producer *p = calloc((size_t)producers, sizeof *p);

    if (p == NULL) {
        perror("serex_bench: calloc");
        return -1;
    }
    int started = producers_start(p, producers, t);
    int64_t t0 = now_ns();
    /* Release: pairs with the acquire load in producer_main. */
    atomic_store_explicit(&t->go, true, memory_order_release);
    if (started == producers)
        done_wait(&t->done);
    producers_join(p, started);
    free(p);
    if (atomic_load_explicit(&t->error, memory_order_relaxed) != 0)
        return -1;
    return t->done.t_end - t0;
}

static void throughput_report(const struct bench_cfg *cfg, int producers,
                              uint64_t n, int64_t elapsed_ns, long viol)
{
    printf("RESULT bench=pool_throughput impl=%s threads=%d producers=%d "
           "tasks=%" PRIu64 " tasks_per_sec=%.0f violations=%ld\n",
           IMPL, cfg->threads, producers, n, (double)n * 1e9 / elapsed_ns,
           viol);
    fflush(stdout);
}

/* One pool_throughput measurement with @producers producers, on a new pool. */
static int throughput_once(const struct bench_cfg *cfg, int producers)
{
    struct throughput t = {.n = cfg->n};

    atomic_init(&t.count, 0);
    atomic_init(&t.go, false);
    atomic_init(&t.error, 0);
    if (done_init(&t.done) != 0)
        return -1;
    t.pool = pool_start(cfg->threads);
    int64_t elapsed = t.pool ? throughput_measure(&t, producers) : -1;
    /* Destroy waits for every task, so the count read below is final. */
    int rc = t.pool ? pool_stop(t.pool) : -1;
    sem_destroy(&t.done.sem);
    if (elapsed < 0 || rc != 0)
        return -1;
    /* Relaxed: serex_destroy ordered every task's add before this load. */
    long viol = atomic_load_explicit(&t.count, memory_order_relaxed) != t.n;
    throughput_report(cfg, producers, t.n, elapsed, viol);
    return 0;
}

/* P=1, then P=T (when T > 1), or only P=V with --variant V. */
static int bench_pool_throughput(const struct bench_cfg *cfg)
{
    if (cfg->variant > MAX_THREADS) {
        fprintf(stderr, "serex_bench: --variant %ld: at most %ld producers\n",
                cfg->variant, MAX_THREADS);
        return -1;
    }
    if (cfg->variant > 0)
        return throughput_once(cfg, (int)cfg->variant);
    if (throughput_once(cfg, 1) != 0)
        return -1;
    return cfg->threads > 1 ? throughput_once(cfg, cfg->threads) : 0;
}

/* --- pool_latency --- */

struct latency_probe {
    atomic_int flag; /* set by the task, cleared by the submitter */
    int64_t t1;      /* the task's clock read, published by flag */
};

static void latency_task(void *arg)
{
    struct latency_probe *p = arg;

    p->t1 = now_ns();
    /* Release: pairs with the acquire spin in latency_measure; orders the
     * write of t1 before the flag. */
    atomic_store_explicit(&p->flag, 1, memory_order_release);
}

/*
 * The peers' guard: past LAT_TIME_CAP_NS (checked every 1024 rounds) the
 * loop stops, and `iterations` in the RESULT line shows how far it got.
 */
static bool latency_stop(long i, int64_t start)
{
    if ((i & 1023) != 0 || now_ns() - start < LAT_TIME_CAP_NS)
        return false;
    fprintf(stderr, "pool_latency: stopped after %ld iterations (time cap)\n",
            i);
    return true;
}

/*
 * Up to @iters rounds of: t0, submit, spin until the task has run. Stores
 * t1 - t0 in lat[] and returns the number of rounds done; *rc is the
 * status of a failed submission, which ends the loop.
 */
static long latency_measure(serex_executor *pool, int64_t *lat, long iters,
                            int *rc)
{
    struct latency_probe probe = {.t1 = 0};
    long i = 0;

    atomic_init(&probe.flag, 0);
    *rc = SEREX_OK;
    for (int64_t start = now_ns(); i < iters && !latency_stop(i, start); i++) {
        int64_t t0 = now_ns();

        if ((*rc = serex_execute(pool, latency_task, &probe)) != SEREX_OK)
            break;
        while (!atomic_load_explicit(&probe.flag, memory_order_acquire))
            cpu_relax();
        /* Relaxed: the next serex_execute publishes it to the next task. */
        atomic_store_explicit(&probe.flag, 0, memory_order_relaxed);
        lat[i] = probe.t1 - t0;
    }
    return i;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* Nearest rank, ceil(n * p / 100), as the peers' pct_sorted(). */
static int64_t percentile(const int64_t *sorted, size_t n, unsigned p)
{
    size_t rank = (n * p + 99) / 100;

    return sorted[rank ? rank - 1 : 0];
}

/* The peers' report_latency(): a negative latency (the task ran before it
 * was submitted) is a violation. Sorts lat; n > 0. */
static void latency_report(const struct bench_cfg *cfg, int64_t *lat,
                           size_t n)
{
    long viol = 0;

    for (size_t i = 0; i < n; i++)
        viol += lat[i] < 0;
    qsort(lat, n, sizeof *lat, cmp_i64);
    printf("RESULT bench=pool_latency impl=%s threads=%d iterations=%zu "
           "p50_ns=%lld p99_ns=%lld max_ns=%lld violations=%ld\n",
           IMPL, cfg->threads, n, (long long)percentile(lat, n, 50),
           (long long)percentile(lat, n, 99), (long long)lat[n - 1], viol);
    fflush(stdout);
}

static int bench_pool_latency(const struct bench_cfg *cfg)
{
    int64_t *lat = calloc((size_t)cfg->lat_iters, sizeof *lat);
    serex_executor *pool = lat ? pool_start(cfg->threads) : NULL;
    int rc;

    if (pool == NULL) {
        free(lat);
        return -1;
    }
    long rounds = latency_measure(pool, lat, cfg->lat_iters, &rc);
    if (rc != SEREX_OK)
        report_error("serex_execute", rc);
    else if (rounds > 0)
        latency_report(cfg, lat, (size_t)rounds);
    free(lat);
    return pool_stop(pool) == 0 && rc == SEREX_OK ? 0 : -1;
}

/* --- pool_idle_cpu --- */

/* User + system CPU time of the whole process, every thread included. */
/* CPU time of the calling thread alone. */
static int64_t thread_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static int64_t cpu_time_ns(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * NS_PER_S
           + ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

/* Sleeps until the monotonic clock reads @deadline_ns, signals or not. */
static void sleep_until(int64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / NS_PER_S),
                          .tv_nsec = (long)(deadline_ns % NS_PER_S)};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)
           == EINTR)
        ;
}

/*
 * A pool that has just run work, then sits idle: a pool whose workers spin
 * to win pool_latency shows it here. The main thread sleeps, so the CPU
 * time is the workers'. Divided by the measured wall time, not a nominal
 * second, in case the sleep overran.
 */
static int bench_pool_idle_cpu(const struct bench_cfg *cfg)
{
    serex_executor *pool = pool_start(cfg->threads);

    if (pool == NULL)
        return -1;
    /* The workload's 1,000 tasks, after the warm-up every pool gets. */
    if (pool_run_tasks(pool, IDLE_TASKS) != SEREX_OK) {
        pool_stop(pool);
        return -1;
    }
    int64_t wall0 = now_ns(), cpu0 = cpu_time_ns();
    sleep_until(wall0 + IDLE_NS);
    int64_t cpu = cpu_time_ns() - cpu0, wall = now_ns() - wall0;
    if (pool_stop(pool) != 0)
        return -1;
    printf("RESULT bench=pool_idle_cpu impl=%s threads=%d idle_cpu_pct=%.2f\n",
           IMPL, cfg->threads, 100.0 * (double)cpu / (double)wall);
    fflush(stdout);
    return 0;
}

/* --- pool_wakeups: what the unit tests may not count --- */

/*
 * The pool's wake-ups and spin resets, counted through its internal
 * counters (pool_internal.h), for three shapes that once cost a system
 * call per task: a busy pool (wakes per 1,000 tasks), bursts of 1,000 onto
 * parked workers (wakes per burst; 25 before the spinner's hand-over at 16
 * workers), a trickle onto parked workers (spin-window resets per task;
 * near 1 before the first-look rule). And an elastic pool idle past its
 * keep-alive: the CPU it burns (a core before the keep-alive was re-armed).
 * Counts and CPU depend on the machine's load: they belong here, not in a
 * unit test.
 */
static void bench_noop(void *arg)
{
    (void)arg;
}

/* Shuts @pool down, waits for its tasks, sets *@wakes to the wake-ups made
 * since it read @w0, and frees it. */
static int wakeups_stop(serex_executor *pool, unsigned long w0,
                        unsigned long *wakes)
{
    serex_shutdown(pool);
    if (serex_await_termination(pool, SEREX_FOREVER) != SEREX_OK)
        return -1;
    *wakes = serex__pool_wakes(pool) - w0;
    return pool_stop(pool);
}

static int wakeups_burst(int threads, double *per_burst)
{
    serex_executor *pool = pool_start(threads);
    const int bursts = 100, per = 1000;

    if (pool == NULL)
        return -1;
    unsigned long w0 = serex__pool_wakes(pool), wakes = 0;
    for (int b = 0; b < bursts; b++) {
        sleep_until(now_ns() + 500000); /* 10x the longest spin: they park */
        for (int i = 0; i < per; i++)
            if (serex_execute(pool, bench_noop, NULL) != SEREX_OK)
                return -1;
    }
    int rc = wakeups_stop(pool, w0, &wakes);
    *per_burst = (double)wakes / bursts;
    return rc;
}

static int wakeups_busy(int threads, double *per_k)
{
    serex_executor *pool = pool_start(threads);
    const long n = 200000;

    if (pool == NULL)
        return -1;
    unsigned long w0 = serex__pool_wakes(pool), wakes = 0;
    for (long i = 0; i < n; i++)
        if (serex_execute(pool, bench_noop, NULL) != SEREX_OK)
            return -1;
    int rc = wakeups_stop(pool, w0, &wakes);
    *per_k = 1000.0 * (double)wakes / (double)n;
    return rc;
}

static int wakeups_trickle(int threads, double *resets_per_task)
{
    serex_executor *pool = pool_start(threads);
    const int tasks = 40;

    if (pool == NULL)
        return -1;
    unsigned long r0 = serex__pool_spin_resets(pool);
    for (int i = 0; i < tasks; i++) {
        sleep_until(now_ns() + 2000000); /* 40x the longest spin */
        if (pool_run_tasks(pool, 1) != SEREX_OK)
            return -1;
    }
    *resets_per_task =
        (double)(serex__pool_spin_resets(pool) - r0) / (double)tasks;
    return pool_stop(pool);
}

static int wakeups_elastic_idle(int threads, double *cpu_pct)
{
    serex_pool_config cfg = {.threads = (unsigned)threads,
                             .max_threads = 2 * (unsigned)threads,
                             .keep_alive_ns = 1000000};
    serex_executor *pool;

    if (serex_pool_create(&cfg, &pool) != SEREX_OK)
        return -1;
    sleep_until(now_ns() + 10000000); /* past the keep-alive */
    int64_t wall0 = now_ns(), cpu0 = cpu_time_ns();
    sleep_until(wall0 + IDLE_NS / 4);
    *cpu_pct = 100.0 * (double)(cpu_time_ns() - cpu0) /
               (double)(now_ns() - wall0);
    return pool_stop(pool);
}

static int bench_pool_wakeups(const struct bench_cfg *cfg)
{
    int threads = cfg->threads > 0 ? cfg->threads : 16;
    double burst = 0, busy = 0, resets = 0, idle = 0;

    if (wakeups_burst(threads, &burst) != 0 ||
        wakeups_busy(threads, &busy) != 0 ||
        wakeups_trickle(threads, &resets) != 0 ||
        wakeups_elastic_idle(threads, &idle) != 0)
        return -1;
    printf("RESULT bench=pool_wakeups impl=%s threads=%d "
           "wakes_per_burst=%.1f wakes_per_ktask=%.2f "
           "spin_resets_per_trickle_task=%.2f elastic_idle_cpu_pct=%.2f\n",
           IMPL, threads, burst, busy, resets, idle);
    fflush(stdout);
    return 0;
}

/* --- serial_throughput and striped_throughput --- */

/*
 * One run of an ordered workload. Task i's index travels in its arg (the
 * peers' lambdas capture i by value; a serex task has one void *), so the
 * run itself is reached through ordered_current, set before the first
 * submission: serex_execute publishes it to every task. One run at a time.
 */
struct ordered_run {
    uint64_t n;                    /* tasks */
    uint64_t k;                    /* stripes; 1 for the serial */
    uint64_t *counters;            /* plain, one per stripe: only that
                                      stripe's tasks touch it, in order */
    atomic_uint_fast64_t finished; /* striped: tasks run, for the N-th */
    atomic_long violations;        /* order breaks seen by tasks */
    struct done done;
};

static struct ordered_run *ordered_current;

static void *index_arg(uint64_t i)
{
    return (void *)(uintptr_t)i;
}

/* Relaxed: a violation is only counted; serex_destroy orders it before the
 * final read. Never reached while the executor keeps its promise. */
static void ordered_violation(struct ordered_run *r)
{
    atomic_fetch_add_explicit(&r->violations, 1, memory_order_relaxed);
}

/* serial_throughput's task i, as asio's: it is the N-th to run iff i is
 * the last index (a bug that reorders shows in violations instead). */
static void serial_task(void *arg)
{
    struct ordered_run *r = ordered_current;
    uint64_t i = (uint64_t)(uintptr_t)arg;

    if (r->counters[0] != i)
        ordered_violation(r);
    r->counters[0]++;
    if (i == r->n - 1)
        done_signal(&r->done);
}

/* striped_throughput's task i: stripe i % K, per-stripe sequence i / K. */
static void striped_task(void *arg)
{
    struct ordered_run *r = ordered_current;
    uint64_t i = (uint64_t)(uintptr_t)arg;
    uint64_t *ctr = &r->counters[i % r->k];

    if (*ctr != i / r->k)
        ordered_violation(r);
    (*ctr)++;
    /* Relaxed, as count_task: only the N-th matters, and done_signal's
     * sem_post publishes the end time. */
    if (atomic_fetch_add_explicit(&r->finished, 1, memory_order_relaxed) + 1
        == r->n)
        done_signal(&r->done);
}

/*
 * K zeroed counters, allocated up front as the peers do (8 MB for K =
 * 1,000,000). Written, not just calloc'd, so their pages count in peak RSS
 * as the peers' std::vector<uint64_t>(k, 0) does. 0 on success.
 */
static int ordered_init(struct ordered_run *r, uint64_t n, uint64_t k)
{
    r->n = n;
    r->k = k;
    atomic_init(&r->finished, 0);
    atomic_init(&r->violations, 0);
    if (k > SIZE_MAX / sizeof *r->counters
        || (r->counters = malloc((size_t)k * sizeof *r->counters)) == NULL) {
        perror("serex_bench: malloc");
        return -1;
    }
    memset(r->counters, 0, (size_t)k * sizeof *r->counters);
    if (done_init(&r->done) != 0) {
        free(r->counters);
        return -1;
    }
    ordered_current = r;
    return 0;
}

static void ordered_fini(struct ordered_run *r)
{
    sem_destroy(&r->done.sem);
    free(r->counters);
    ordered_current = NULL;
}

/*
 * After the drain: the violations the tasks saw, plus one per stripe whose
 * final count is not its share of N (a lost or doubled task). Call only
 * once every task has finished and its writes are visible.
 */
static long ordered_violations(struct ordered_run *r)
{
    long viol = atomic_load_explicit(&r->violations, memory_order_relaxed);

    for (uint64_t s = 0; s < r->k; s++)
        viol += r->counters[s] != r->n / r->k + (s < r->n % r->k);
    return viol;
}

/* Untimed: the serial over @pool. NULL on failure, reported. */
static serex_executor *serial_start(serex_executor *pool)
{
    serex_executor *serial;
    int rc = serex_serial_create(pool, NULL, &serial);

    if (rc != SEREX_OK) {
        report_error("serex_serial_create", rc);
        return NULL;
    }
    return serial;
}

/*
 * The timed region, as asio's: from just before the first submission to
 * the end time recorded by the last task. The main thread is the one
 * producer. Returns the elapsed ns, or -1 if a submission failed (the
 * tasks already sent still run: the caller's destroy waits for them).
 */
static int64_t serial_measure(serex_executor *serial, struct ordered_run *r)
{
    int64_t t0 = now_ns();

    for (uint64_t i = 0; i < r->n; i++) {
        int rc = serex_execute(serial, serial_task, index_arg(i));

        if (rc != SEREX_OK) {
            report_error("serex_execute", rc);
            return -1;
        }
    }
    done_wait(&r->done);
    return r->done.t_end - t0;
}

static int bench_serial_throughput(const struct bench_cfg *cfg)
{
    struct ordered_run r;

    if (ordered_init(&r, cfg->n, 1) != 0)
        return -1;
    serex_executor *pool = pool_start(cfg->threads);
    serex_executor *serial = pool ? serial_start(pool) : NULL;
    int64_t elapsed = serial ? serial_measure(serial, &r) : -1;
    /* The serial's destroy waits for its tasks: the counter is then final
     * and visible here. */
    int rc = serial ? serex_destroy(serial) : SEREX_OK;
    if (rc != SEREX_OK)
        report_error("serex_destroy", rc);
    bool ok = pool && pool_stop(pool) == 0 && elapsed >= 0 && rc == SEREX_OK;
    if (ok) {
        printf("RESULT bench=serial_throughput impl=%s threads=%d "
               "tasks=%" PRIu64 " tasks_per_sec=%.0f violations=%ld\n",
               IMPL, cfg->threads, r.n, (double)r.n * 1e9 / elapsed,
               ordered_violations(&r));
        fflush(stdout);
    }
    ordered_fini(&r);
    return ok ? 0 : -1;
}

/* The stripe counts of WORKLOADS.md, run in this order without --variant. */
static const uint64_t stripe_counts[] = {1, 64, 4096, 1000000};

/* As serial_measure, task i going to key i % K. */
static int64_t striped_measure(serex_striped *s, struct ordered_run *r)
{
    int64_t t0 = now_ns();

    for (uint64_t i = 0; i < r->n; i++) {
        int rc = serex_striped_execute(s, i % r->k, striped_task,
                                       index_arg(i));

        if (rc != SEREX_OK) {
            report_error("serex_striped_execute", rc);
            return -1;
        }
    }
    done_wait(&r->done);
    return r->done.t_end - t0;
}

/*
 * Shuts @s down, waits until its tasks have finished (their writes are
 * then visible here), reads how many lanes are left into *lanes, and
 * destroys it. The lanes are read before the destroy, which frees them.
 */
static int striped_stop(serex_striped *s, size_t *lanes)
{
    serex_executor *ex = serex_striped_executor(s);

    serex_shutdown(ex);
    int rc = serex_await_termination(ex, SEREX_FOREVER);
    if (rc != SEREX_OK)
        report_error("serex_await_termination", rc);
    *lanes = serex_striped_lanes(s);
    int drc = serex_destroy(ex);
    if (drc != SEREX_OK)
        report_error("serex_destroy", drc);
    return rc == SEREX_OK && drc == SEREX_OK ? 0 : -1;
}

/* Times one run on a new pool and striped; -1 on failure, reported. */
static int64_t striped_run(int threads, struct ordered_run *r, size_t *lanes)
{
    serex_executor *pool = pool_start(threads);
    serex_striped *s = NULL;

    if (pool == NULL)
        return -1;
    int rc = serex_striped_create(pool, NULL, &s);
    if (rc != SEREX_OK)
        report_error("serex_striped_create", rc);
    int64_t elapsed = s ? striped_measure(s, r) : -1;
    if (s && striped_stop(s, lanes) != 0)
        elapsed = -1;
    if (pool_stop(pool) != 0)
        elapsed = -1;
    return elapsed;
}

/* Peak resident set size of the process in kB, as the peers' peak_rss_kb(). */
static long peak_rss_kb(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/*
 * One measurement with @k stripes. peak_rss_kb is ru_maxrss, the process's
 * high-water mark, which never goes down: after several K in one process
 * each line shows the largest K so far. It means something only with one K
 * per process (--variant K), as compare.sh and the peers' runner run it.
 */
static int striped_once(const struct bench_cfg *cfg, uint64_t k)
{
    struct ordered_run r;
    size_t lanes = 0;

    if (ordered_init(&r, cfg->n, k) != 0)
        return -1;
    int64_t elapsed = striped_run(cfg->threads, &r, &lanes);
    if (elapsed >= 0) {
        printf("RESULT bench=striped_throughput impl=%s threads=%d "
               "stripes=%" PRIu64 " tasks=%" PRIu64 " tasks_per_sec=%.0f "
               "violations=%ld peak_rss_kb=%ld lanes_alive=%zu\n",
               IMPL, cfg->threads, k, r.n, (double)r.n * 1e9 / elapsed,
               ordered_violations(&r), peak_rss_kb(), lanes);
        fflush(stdout);
    }
    ordered_fini(&r);
    return elapsed >= 0 ? 0 : -1;
}

/* Every K of stripe_counts[], or only K=V with --variant V. */
static int bench_striped_throughput(const struct bench_cfg *cfg)
{
    int failed = 0;

    if (cfg->variant > 0)
        return striped_once(cfg, (uint64_t)cfg->variant);
    for (size_t i = 0; i < sizeof stripe_counts / sizeof *stripe_counts; i++)
        failed |= striped_once(cfg, stripe_counts[i]) != 0;
    return failed ? -1 : 0;
}

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

/* Waits for @d, at most @cap_ns: false on timeout (then d->t_end is 0). */
static bool done_wait_for(struct done *d, int64_t cap_ns)
{
    struct timespec ts;
    int rc;

    /* sem_timedwait takes a CLOCK_REALTIME deadline. */
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + cap_ns % NS_PER_S;
    ts.tv_sec += (time_t)(cap_ns / NS_PER_S + ns / NS_PER_S);
    ts.tv_nsec = (long)(ns % NS_PER_S);
    while ((rc = sem_timedwait(&d->sem, &ts)) != 0 && errno == EINTR)
        ;
    return rc == 0;
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

static int bench_timer_schedule_cancel(const struct bench_cfg *cfg)
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

static int bench_timer_accuracy(const struct bench_cfg *cfg)
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

static int bench_timer_periodic(const struct bench_cfg *cfg)
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

/* --- channel_pipeline --- */

/*
 * PIPE_PAIRS sender serials each send their share of N items through their
 * own channel of capacity PIPE_CAPACITY to their own receiver serial, all
 * over one pool. Nothing blocks a thread: a sender's send continuation
 * sends its next item, a receiver's receive continuation checks the item
 * and re-arms the receive, each on its own serial. Not in WORKLOADS.md:
 * no peer runs it.
 */
#define PIPE_PAIRS 1000
#define PIPE_CAPACITY 64

struct pipe_run;

/* One sender/receiver pair. The sender's fields are touched only by tasks
 * of the sender serial, the receiver's only by the receiver serial's: the
 * serial orders them, so they are plain. */
struct pipe_pair {
    struct pipe_run *run;
    serex_channel *ch;
    serex_executor *sender, *receiver; /* serials over the pool */
    uint64_t share;                    /* items on this channel */
    uint64_t sent;                     /* sender: items handed to send */
    uint64_t next;                     /* receiver: the seq expected next */
    unsigned nulls;                    /* receiver: NULLs seen (goal 1) */
};

struct pipe_run {
    struct pipe_pair *pairs;
    uint64_t n;
    atomic_long violations;   /* order breaks seen by receivers */
    atomic_long receiving;    /* receivers still short of their share */
    atomic_long open;         /* receivers that have not yet seen NULL */
    atomic_int error;         /* first failed send or recv, or 0 */
    struct done done;         /* the last item received */
    struct done drained;      /* the last receiver saw NULL */
};

/* Item seq travels as seq + 1: never NULL, which means closed. */
static void *pipe_item(uint64_t seq)
{
    return (void *)(uintptr_t)(seq + 1);
}

/* A continuation's send or recv failed: the run cannot finish, so wake the
 * measuring thread from both waits. Only the first failure posts. */
static void pipe_fail(struct pipe_run *r, const char *call, int status)
{
    int none = 0;

    if (atomic_compare_exchange_strong_explicit(&r->error, &none, status,
                                                memory_order_relaxed,
                                                memory_order_relaxed)) {
        report_error(call, status);
        sem_post(&r->done.sem);
        sem_post(&r->drained.sem);
    }
}

/* On the sender serial: send the next item, with this as its continuation.
 * sent moves first, in case the continuation runs here (a refused post). */
static void pipe_send_next(void *arg)
{
    struct pipe_pair *p = arg;

    if (p->sent == p->share)
        return;
    uint64_t seq = p->sent++;
    int rc = serex_channel_send(p->ch, pipe_item(seq), p->sender,
                                pipe_send_next, p);
    if (rc != SEREX_OK)
        pipe_fail(p->run, "serex_channel_send", rc);
}

static void pipe_on_item(void *item, void *arg);

static void pipe_recv(struct pipe_pair *p)
{
    int rc = serex_channel_recv(p->ch, p->receiver, pipe_on_item, p);

    if (rc != SEREX_OK)
        pipe_fail(p->run, "serex_channel_recv", rc);
}

/* Relaxed, as count_task: only the last matters, and done_signal's
 * sem_post publishes the end time. */
static void pipe_countdown(atomic_long *left, struct done *d)
{
    if (atomic_fetch_sub_explicit(left, 1, memory_order_relaxed) == 1)
        done_signal(d);
}

/* On the receiver serial: check the item's place, then receive again,
 * until the closed channel says NULL. */
static void pipe_on_item(void *item, void *arg)
{
    struct pipe_pair *p = arg;
    struct pipe_run *r = p->run;

    if (item == NULL) {
        p->nulls++;
        pipe_countdown(&r->open, &r->drained);
        return;
    }
    /* Relaxed: only counted; serex_destroy orders it before the read. */
    if ((uint64_t)(uintptr_t)item - 1 != p->next)
        atomic_fetch_add_explicit(&r->violations, 1, memory_order_relaxed);
    if (++p->next == p->share)
        pipe_countdown(&r->receiving, &r->done);
    pipe_recv(p);
}

/* Untimed: the channels and the 2 x PIPE_PAIRS serials. 0 on success. */
static int pipe_setup(struct pipe_run *r, serex_executor *pool)
{
    for (size_t i = 0; i < PIPE_PAIRS; i++) {
        struct pipe_pair *p = &r->pairs[i];
        int rc = serex_channel_create(PIPE_CAPACITY, &p->ch);

        p->run = r;
        p->share = r->n / PIPE_PAIRS + (i < r->n % PIPE_PAIRS);
        if (rc != SEREX_OK) {
            report_error("serex_channel_create", rc);
            return -1;
        }
        if ((p->sender = serial_start(pool)) == NULL
            || (p->receiver = serial_start(pool)) == NULL)
            return -1;
    }
    return 0;
}

/*
 * The timed region: from arming the first receive to the end time recorded
 * by the receiver of the last item. Then, untimed, closes every channel and
 * waits until every receiver has seen NULL. -1 if a call failed.
 */
static int64_t pipe_measure(struct pipe_run *r)
{
    int64_t t0 = now_ns();

    for (size_t i = 0; i < PIPE_PAIRS; i++) {
        struct pipe_pair *p = &r->pairs[i];
        int rc = serex_execute(p->sender, pipe_send_next, p);

        if (rc != SEREX_OK) {
            pipe_fail(r, "serex_execute", rc);
            break;
        }
        pipe_recv(p);
    }
    done_wait(&r->done);
    int64_t t_end = r->done.t_end;
    for (size_t i = 0; i < PIPE_PAIRS; i++)
        serex_channel_close(r->pairs[i].ch);
    done_wait(&r->drained);
    if (atomic_load_explicit(&r->error, memory_order_relaxed) != 0)
        return -1;
    return t_end - t0;
}

/*
 * Destroys the serials (each waits for its tasks: their writes are then
 * ours), then the channels, then the pool. Returns 0, or -1 if a destroy
 * failed.
 */
static int pipe_teardown(struct pipe_run *r, serex_executor *pool)
{
    int failed = 0;

    for (size_t i = 0; i < PIPE_PAIRS; i++) {
        serex_executor *s[2] = {r->pairs[i].sender, r->pairs[i].receiver};

        for (int j = 0; j < 2; j++) {
            int rc = s[j] ? serex_destroy(s[j]) : SEREX_OK;

            if (rc != SEREX_OK) {
                report_error("serex_destroy", rc);
                failed = 1;
            }
        }
    }
    for (size_t i = 0; i < PIPE_PAIRS; i++)
        serex_channel_destroy(r->pairs[i].ch);
    return pool_stop(pool) != 0 || failed ? -1 : 0;
}

/* Order breaks, plus one per receiver that did not get exactly its share,
 * or did not see exactly one NULL. After the teardown. */
static long pipe_violations(struct pipe_run *r)
{
    long viol = atomic_load_explicit(&r->violations, memory_order_relaxed);

    for (size_t i = 0; i < PIPE_PAIRS; i++)
        viol += (r->pairs[i].next != r->pairs[i].share)
                + (r->pairs[i].nulls != 1);
    return viol;
}

static int bench_channel_pipeline(const struct bench_cfg *cfg)
{
    struct pipe_run r = {.n = cfg->n};
    int64_t elapsed = -1;

    atomic_init(&r.violations, 0);
    /* Receivers with a share: all of them, unless N < PIPE_PAIRS. */
    atomic_init(&r.receiving, r.n < PIPE_PAIRS ? (long)r.n : PIPE_PAIRS);
    atomic_init(&r.open, PIPE_PAIRS);
    atomic_init(&r.error, 0);
    if (done_init(&r.done) != 0)
        return -1;
    if (done_init(&r.drained) != 0) {
        sem_destroy(&r.done.sem);
        return -1;
    }
    serex_executor *pool = pool_start(cfg->threads);
    r.pairs = pool ? calloc(PIPE_PAIRS, sizeof *r.pairs) : NULL;
    if (pool != NULL && r.pairs == NULL)
        perror("serex_bench: calloc");
    if (r.pairs != NULL && pipe_setup(&r, pool) == 0)
        elapsed = pipe_measure(&r);
    int rc = r.pairs ? pipe_teardown(&r, pool) : pool ? pool_stop(pool) : -1;
    if (elapsed >= 0 && rc == 0) {
        printf("RESULT bench=channel_pipeline impl=%s threads=%d "
               "tasks=%" PRIu64 " items_per_sec=%.0f violations=%ld "
               "peak_rss_kb=%ld\n",
               IMPL, cfg->threads, r.n, (double)r.n * 1e9 / elapsed,
               pipe_violations(&r), peak_rss_kb());
        fflush(stdout);
    }
    free(r.pairs);
    sem_destroy(&r.done.sem);
    sem_destroy(&r.drained.sem);
    return elapsed >= 0 && rc == 0 ? 0 : -1;
}

/* --- serial_messaging --- */

#define RING_SERIALS 1000 /* S serials in a ring */
#define RING_TOKENS 1000  /* R tokens; the hops are cfg->n */

/* A serial's state: a plain busy flag and counter, on its own line.
 * `busy` is volatile only so the compiler keeps the set and clear the
 * check relies on (as the peers do). */
struct ring_serial {
    _Alignas(64) volatile int busy;
    uint64_t count;
};

struct ring_run {
    serex_executor *serials[RING_SERIALS];
    struct ring_serial state[RING_SERIALS];
    atomic_long violations;
    atomic_long tokens_left; /* a token out of hops takes 1 */
    struct done done;
};

struct ring_token {
    struct ring_run *run;
    uint32_t at;  /* the serial it was sent to */
    int32_t left; /* hops still to go after this arrival */
    int status;   /* a failed forward, reported after the run */
};

static void ring_token_task(void *arg)
{
    struct ring_token *t = arg;
    struct ring_run *r = t->run;
    struct ring_serial *s = &r->state[t->at];

    if (s->busy)
        atomic_fetch_add_explicit(&r->violations, 1, memory_order_relaxed);
    s->busy = 1;
    s->count++;
    s->busy = 0;
    if (t->left > 0) {
        t->at = (t->at + 1) % RING_SERIALS;
        t->left--;
        t->status = serex_execute(r->serials[t->at], ring_token_task, t);
        if (t->status == SEREX_OK)
            return;
    }
    /* acq_rel: the last token out sees every other token's writes */
    if (atomic_fetch_sub_explicit(&r->tokens_left, 1, memory_order_acq_rel) ==
        1)
        done_signal(&r->done);
}

static int ring_make(struct ring_run *r, serex_executor *pool)
{
    for (int i = 0; i < RING_SERIALS; i++) {
        int rc = serex_serial_create(pool, NULL, &r->serials[i]);

        if (rc != SEREX_OK) {
            report_error("serex_serial_create", rc);
            while (i-- > 0)
                serex_destroy(r->serials[i]);
            return -1;
        }
    }
    return 0;
}

static int ring_destroy(struct ring_run *r)
{
    int failed = 0;

    for (int i = 0; i < RING_SERIALS; i++) {
        int rc = serex_destroy(r->serials[i]);

        if (rc != SEREX_OK) {
            report_error("serex_destroy", rc);
            failed = -1;
        }
    }
    return failed;
}

/* Timed: the R first submissions to the last arrival. -1 on failure. */
static int64_t ring_measure(struct ring_run *r, struct ring_token *tok,
                            uint64_t n)
{
    int64_t per_token = (int64_t)(n / RING_TOKENS), t0;

    atomic_init(&r->tokens_left, RING_TOKENS);
    for (uint32_t j = 0; j < RING_TOKENS; j++)
        tok[j] = (struct ring_token){r, j, (int32_t)(per_token - 1),
                                     SEREX_OK};
    t0 = now_ns();
    for (uint32_t j = 0; j < RING_TOKENS; j++) {
        int rc = serex_execute(r->serials[j], ring_token_task, &tok[j]);

        if (rc != SEREX_OK) { /* the tokens sent still run: wait for them */
            report_error("serex_execute", rc);
            atomic_fetch_sub(&r->tokens_left, (long)(RING_TOKENS - j));
            if (j != 0)
                done_wait(&r->done);
            return -1;
        }
    }
    done_wait(&r->done);
    return r->done.t_end - t0;
}

static int bench_serial_messaging(const struct bench_cfg *cfg)
{
    struct ring_run *r = calloc(1, sizeof *r);
    struct ring_token *tok = calloc(RING_TOKENS, sizeof *tok);
    uint64_t n = cfg->n, sum = 0;
    long viol;
    int64_t elapsed = -1;
    serex_executor *pool = NULL;
    int ok = 0;

    if (r == NULL || tok == NULL || done_init(&r->done) != 0)
        goto out;
    atomic_init(&r->violations, 0);
    pool = pool_start(cfg->threads);
    if (pool == NULL || ring_make(r, pool) != 0)
        goto out;
    elapsed = ring_measure(r, tok, n);
    ok = ring_destroy(r) == 0 && elapsed > 0;
    for (uint32_t j = 0; j < RING_TOKENS; j++)
        if (tok[j].status != SEREX_OK) {
            report_error("serex_execute (forward)", tok[j].status);
            ok = 0;
        }
    for (int i = 0; i < RING_SERIALS; i++)
        sum += r->state[i].count;
    viol = atomic_load(&r->violations) + (sum != n);
    if (ok) {
        printf("RESULT bench=serial_messaging impl=%s threads=%d hops=%" PRIu64
               " hops_per_sec=%.0f violations=%ld\n",
               IMPL, cfg->threads, n, (double)n * 1e9 / (double)elapsed, viol);
        fflush(stdout);
    }
out:
    if (pool != NULL && pool_stop(pool) != 0)
        ok = 0;
    if (r != NULL)
        sem_destroy(&r->done.sem);
    free(tok);
    free(r);
    return ok ? 0 : -1;
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

/* Percentile (nearest rank) of @k sorted values. */
static int64_t pct_sorted(const int64_t *v, long k, int p)
{
    long i = (long)((double)p / 100.0 * (double)k + 0.999999) - 1;

    return v[i < 0 ? 0 : (i >= k ? k - 1 : i)];
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
static int bench_timer_load(const struct bench_cfg *cfg)
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

/* --- pool_trickle --- */

#define TRICKLE_TASKS 10000L
#define TRICKLE_INTERVAL_NS (100 * NS_PER_US)

struct trickle_run {
    int64_t *lat;      /* per task: run time - submission time */
    atomic_long left;
    struct done done;
};

struct trickle_task {
    struct trickle_run *run;
    int64_t submitted;
    long i;
};

static void trickle_task_fn(void *arg)
{
    struct trickle_task *t = arg;
    struct trickle_run *r = t->run;

    r->lat[t->i] = now_ns() - t->submitted;
    if (atomic_fetch_sub_explicit(&r->left, 1, memory_order_acq_rel) == 1)
        done_signal(&r->done);
}

/*
 * The floor a trickle can reach by waking: the plainest pool there is, a
 * mutex, a condition variable and a list, whose workers never spin (a
 * serex_executor of the user's kind). Run as `trickle_floor`, it prints
 * pool_trickle lines with impl=condvar-floor, so the table sets serex
 * beside what a wake-up costs on this machine.
 */
struct floor_task {
    struct floor_task *next;
    serex_fn fn;
    void *arg;
};

struct floor_pool {
    serex_executor base;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct floor_task *head, **tail;
    bool stop;
    int nthreads;
    pthread_t th[64];
};

static void *floor_worker(void *arg)
{
    struct floor_pool *p = arg;

    pthread_mutex_lock(&p->mu);
    for (;;) {
        struct floor_task *t;

        while (p->head == NULL && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        if ((t = p->head) == NULL)
            break; /* stopped, and nothing left */
        if ((p->head = t->next) == NULL)
            p->tail = &p->head;
        pthread_mutex_unlock(&p->mu);
        t->fn(t->arg);
        free(t);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static int floor_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct floor_pool *p = (struct floor_pool *)ex;
    struct floor_task *t = malloc(sizeof *t);

    if (t == NULL)
        return SEREX_ENOMEM;
    *t = (struct floor_task){NULL, fn, arg};
    pthread_mutex_lock(&p->mu);
    *p->tail = t;
    p->tail = &t->next;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return SEREX_OK;
}

static void floor_shutdown(serex_executor *ex)
{
    struct floor_pool *p = (struct floor_pool *)ex;

    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static size_t floor_shutdown_now(serex_executor *ex, serex_pending_fn pend,
                                 void *ctx)
{
    (void)pend;
    (void)ctx;
    floor_shutdown(ex); /* the bench never takes tasks back */
    return 0;
}

static int floor_await(serex_executor *ex, int64_t timeout_ns)
{
    (void)ex;
    (void)timeout_ns;
    return SEREX_OK; /* destroy joins */
}

static void floor_destroy(serex_executor *ex)
{
    struct floor_pool *p = (struct floor_pool *)ex;

    floor_shutdown(ex);
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

static const serex_executor_ops floor_ops = {
    floor_execute, floor_shutdown, floor_shutdown_now, floor_await,
    floor_destroy,
};

static serex_executor *floor_start(int threads)
{
    struct floor_pool *p = calloc(1, sizeof *p);

    if (p == NULL)
        return NULL;
    p->base.ops = &floor_ops;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->tail = &p->head;
    for (; p->nthreads < threads && p->nthreads < 64; p->nthreads++)
        if (pthread_create(&p->th[p->nthreads], NULL, floor_worker, p) != 0)
            break;
    return &p->base;
}

/*
 * A trickle of work onto an idle pool: TRICKLE_TASKS tasks, one every
 * interval (100 us; --variant sets it in us), the submitter sleeping in
 * between. Reports the process CPU time as a percentage of one core over
 * the run, the part of it that is the pool's (the process less the
 * submitting thread's sleeps, which cost 25 us of CPU per 100 us gap on a
 * 2-core VM: more than the whole target; its serex_execute calls, where a
 * wake-up is made, count as the pool's), and each task's latency.
 */
static int trickle_run(const struct bench_cfg *cfg, const char *impl,
                       serex_executor *(*start)(int))
{
    int64_t interval = cfg->variant > 0 ? cfg->variant * NS_PER_US
                                        : TRICKLE_INTERVAL_NS;
    long n = TRICKLE_TASKS;
    struct trickle_run r;
    struct trickle_task *tasks = malloc((size_t)n * sizeof *tasks);
    serex_executor *pool = NULL;
    int64_t wall0, cpu0, self0, wall, cpu, self, next, in_exec = 0;
    int ok = 0;

    r.lat = malloc((size_t)n * sizeof *r.lat);
    atomic_init(&r.left, n);
    if (tasks == NULL || r.lat == NULL || done_init(&r.done) != 0)
        goto out;
    pool = start(cfg->threads);
    if (pool == NULL)
        goto out;
    sleep_until(now_ns() + 10 * NS_PER_MS); /* the pool settles idle */
    wall0 = now_ns();
    cpu0 = cpu_time_ns();
    self0 = thread_cpu_ns();
    next = wall0;
    for (long i = 0; i < n; i++) {
        int64_t c0;
        int rc;

        sleep_until(next);
        c0 = thread_cpu_ns();
        tasks[i] = (struct trickle_task){&r, now_ns(), i};
        rc = serex_execute(pool, trickle_task_fn, &tasks[i]);
        in_exec += thread_cpu_ns() - c0; /* the wake-up call is the pool's */
        if (rc != SEREX_OK) {
            report_error("serex_execute", rc);
            atomic_fetch_sub(&r.left, n - i);
            if (i == 0)
                goto out;
            break;
        }
        next += interval;
    }
    /* the submitter's own part (its sleeps), before it waits */
    self = thread_cpu_ns() - self0 - in_exec;
    done_wait(&r.done);
    wall = now_ns() - wall0;
    cpu = cpu_time_ns() - cpu0;
    ok = atomic_load(&r.left) == 0;
    if (ok) {
        qsort(r.lat, (size_t)n, sizeof *r.lat, cmp_i64);
        printf("RESULT bench=pool_trickle impl=%s threads=%d tasks=%ld "
               "interval_us=%lld cpu_pct=%.1f pool_cpu_pct=%.1f "
               "p50_us=%.1f p99_us=%.1f\n",
               impl, cfg->threads, n, (long long)(interval / NS_PER_US),
               100.0 * (double)cpu / (double)wall,
               100.0 * (double)(cpu - self) / (double)wall,
               (double)pct_sorted(r.lat, n, 50) / 1e3,
               (double)pct_sorted(r.lat, n, 99) / 1e3);
        fflush(stdout);
    }
out:
    if (pool != NULL && pool_stop(pool) != 0)
        ok = 0;
    sem_destroy(&r.done.sem);
    free(r.lat);
    free(tasks);
    return ok ? 0 : -1;
}

static int bench_pool_trickle(const struct bench_cfg *cfg)
{
    return trickle_run(cfg, IMPL, pool_start);
}

static int bench_trickle_floor(const struct bench_cfg *cfg)
{
    return trickle_run(cfg, "condvar-floor", floor_start);
}

/* --- future_chain: continuations, link by link --- */

#define CHAIN_LINKS 1000
#define CHAIN_ROUNDS 200

static void *chain_inc(void *value)
{
    return (void *)((uintptr_t)value + 1);
}

static void *chain_zero(void *arg)
{
    (void)arg;
    return (void *)(uintptr_t)0;
}

/*
 * CHAIN_ROUNDS chains of CHAIN_LINKS futures on the pool: a submit, then
 * each link made with serex_future_then on the one before (every link
 * but the first adds one), all made before the first has run, so most
 * links are parked continuations posted as their source ends. The main
 * thread waits only on each chain's last future. Reports the time from
 * the first submit to the last future's end per link, and violations
 * (a chain whose end is not CHAIN_LINKS - 1).
 */
static int bench_future_chain(const struct bench_cfg *cfg)
{
    serex_executor *pool = pool_start(cfg->threads);
    serex_future **link = malloc(CHAIN_LINKS * sizeof *link);
    long rounds = CHAIN_ROUNDS, bad = 0;
    int64_t t0, elapsed = 0;
    int ok = pool != NULL && link != NULL;

    for (long r = 0; ok && r < rounds; r++) {
        t0 = now_ns();
        ok = serex_submit(pool, chain_zero, NULL, &link[0]) == SEREX_OK;
        for (int i = 1; ok && i < CHAIN_LINKS; i++)
            ok = serex_future_then(link[i - 1], pool, chain_inc,
                                   &link[i]) == SEREX_OK;
        if (!ok) {
            report_error("serex_future_then", SEREX_ENOMEM);
            break;
        }
        if (serex_future_wait(link[CHAIN_LINKS - 1], SEREX_FOREVER) !=
            SEREX_OK)
            bad++;
        elapsed += now_ns() - t0;
        bad += (uintptr_t)serex_future_value(link[CHAIN_LINKS - 1]) !=
               CHAIN_LINKS - 1;
        for (int i = 0; i < CHAIN_LINKS; i++)
            serex_future_release(link[i]);
    }
    if (ok) {
        printf("RESULT bench=future_chain impl=%s threads=%d links=%d "
               "rounds=%ld ns_per_link=%.1f violations=%ld\n",
               IMPL, cfg->threads, CHAIN_LINKS, rounds,
               (double)elapsed / (double)(rounds * CHAIN_LINKS), bad);
        fflush(stdout);
    }
    if (pool != NULL && pool_stop(pool) != 0)
        ok = 0;
    free(link);
    return ok ? 0 : -1;
}

/* --- group_fanout: a group's cost per task --- */

#define FANOUT_ROUNDS 1000
#define FANOUT_TASKS 1000

struct fanout_run {
    atomic_uint_fast64_t count; /* tasks run */
    atomic_long left;           /* no group: the round's tasks not yet run */
    struct done done;           /* a round's notify */
};

static void fanout_task(void *arg)
{
    struct fanout_run *r = arg;

    /* relaxed: a count; the group's emptying orders it before the notify */
    atomic_fetch_add_explicit(&r->count, 1, memory_order_relaxed);
}

/* The same round without a group: the round's last task signals. */
static void fanout_task_counted(void *arg)
{
    struct fanout_run *r = arg;

    atomic_fetch_add_explicit(&r->count, 1, memory_order_relaxed);
    /* acq_rel: the last one's signal follows every task of the round */
    if (atomic_fetch_sub_explicit(&r->left, 1, memory_order_acq_rel) == 1)
        done_signal(&r->done);
}

/* One round with no group: what the rounds cost without one. */
static bool fanout_round_plain(serex_executor *pool, struct fanout_run *r)
{
    atomic_store_explicit(&r->left, FANOUT_TASKS, memory_order_relaxed);
    for (int i = 0; i < FANOUT_TASKS; i++)
        if (serex_execute(pool, fanout_task_counted, r) != SEREX_OK)
            return false;
    done_wait(&r->done);
    return true;
}

static void fanout_round_done(void *arg)
{
    done_signal(&((struct fanout_run *)arg)->done);
}

/*
 * FANOUT_ROUNDS rounds: the main thread puts FANOUT_TASKS tasks of one
 * group on the pool, then one serex_group_notify, and waits for that
 * notify before the next round (the gather of a fan-out). Reports tasks
 * per second over the rounds; compare with pool_throughput P=1 of the same
 * run (the same tasks, no group): the goal is at least 0.8 of it. Each
 * round ends in a wake-up of the main thread, which no group can save:
 * --variant 1 runs the same rounds with no group (the round's last task
 * signals), printed as impl=serex-nogroup, so the group's own cost is the
 * ratio between the two.
 */
static int bench_group_fanout(const struct bench_cfg *cfg)
{
    serex_executor *pool = pool_start(cfg->threads);
    serex_group *g = NULL;
    struct fanout_run r;
    long rounds = FANOUT_ROUNDS;
    int64_t t0, elapsed;
    int ok = pool != NULL && done_init(&r.done) == 0 &&
             serex_group_create(&g) == SEREX_OK;

    atomic_init(&r.count, 0);
    atomic_init(&r.left, 0);
    t0 = now_ns();
    for (long k = 0; ok && cfg->variant == 1 && k < rounds; k++)
        ok = fanout_round_plain(pool, &r);
    for (long k = 0; ok && cfg->variant != 1 && k < rounds; k++) {
        for (int i = 0; ok && i < FANOUT_TASKS; i++)
            ok = serex_group_execute(g, pool, fanout_task, &r) == SEREX_OK;
        ok = ok && serex_group_notify(g, pool, fanout_round_done, &r) ==
                       SEREX_OK;
        if (ok)
            done_wait(&r.done);
    }
    elapsed = now_ns() - t0;
    if (!ok) {
        report_error("serex_group_execute", SEREX_ENOMEM);
    } else {
        uint64_t n = (uint64_t)rounds * FANOUT_TASKS;

        printf("RESULT bench=group_fanout impl=%s threads=%d rounds=%ld "
               "tasks=%" PRIu64 " tasks_per_sec=%.0f violations=%" PRIu64
               "\n",
               cfg->variant == 1 ? "serex-nogroup" : IMPL, cfg->threads,
               rounds, n, (double)n * 1e9 / elapsed,
               (uint64_t)atomic_load(&r.count) != n ? UINT64_C(1) : 0);
        fflush(stdout);
    }
    if (g != NULL) {
        serex_group_wait(g, SEREX_FOREVER);
        serex_group_destroy(g);
    }
    if (pool != NULL && pool_stop(pool) != 0)
        ok = 0;
    sem_destroy(&r.done.sem);
    return ok ? 0 : -1;
}

/* --- the bench table and the command line --- */

struct bench {
    const char *name; /* the workload's name in WORKLOADS.md */
    int (*run)(const struct bench_cfg *cfg);
};

/* In the order they run when no bench is named. */
static const struct bench bench_table[] = {
    {"pool_throughput", bench_pool_throughput},
    {"pool_latency", bench_pool_latency},
    {"pool_idle_cpu", bench_pool_idle_cpu},
    {"serial_throughput", bench_serial_throughput},
    {"striped_throughput", bench_striped_throughput},
    {"timer_schedule_cancel", bench_timer_schedule_cancel},
    {"timer_accuracy", bench_timer_accuracy},
    {"timer_periodic", bench_timer_periodic},
    {"channel_pipeline", bench_channel_pipeline},
    {"serial_messaging", bench_serial_messaging},
    {"timer_load", bench_timer_load},
    {"pool_trickle", bench_pool_trickle},
    {"trickle_floor", bench_trickle_floor},
    {"future_chain", bench_future_chain},
    {"group_fanout", bench_group_fanout},
    {"pool_wakeups", bench_pool_wakeups},
};

#define BENCH_COUNT (sizeof bench_table / sizeof bench_table[0])

static const struct bench *bench_find(const char *name)
{
    for (size_t i = 0; i < BENCH_COUNT; i++)
        if (strcmp(bench_table[i].name, name) == 0)
            return &bench_table[i];
    return NULL;
}

static void usage(FILE *to, const char *argv0)
{
    fprintf(to, "usage: %s [BENCH ...] [--threads T] [--quick] "
                "[--variant V] [--list]\n", argv0);
}

/* Parses a whole decimal number >= @min into *out. */
static bool parse_long(const char *s, long min, long *out)
{
    char *end;

    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min)
        return false;
    *out = v;
    return true;
}

/* Defaults: T = online CPUs, full sizes, every variant. */
static void cfg_defaults(struct bench_cfg *cfg)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    cfg->threads = cpus > 0 ? (int)cpus : 1;
    cfg->variant = 0;
    cfg->n = FULL_N;
    cfg->m = FULL_M;
    cfg->lat_iters = FULL_LAT_ITERS;
}

/*
 * Option with a value (--threads T, --variant V) at argv[*i]: 1 if it was
 * one and parsed (then *i moves past the value), 0 if not such an option,
 * -1 on a bad or missing value.
 */
static int parse_valued(int argc, char **argv, int *i, struct bench_cfg *cfg)
{
    bool threads = strcmp(argv[*i], "--threads") == 0;
    long v;

    if (!threads && strcmp(argv[*i], "--variant") != 0)
        return 0;
    if (*i + 1 >= argc || !parse_long(argv[*i + 1], 1, &v)
        || v > (threads ? MAX_THREADS : MAX_VARIANT))
        return -1;
    if (threads)
        cfg->threads = (int)v;
    else
        cfg->variant = v;
    *i += 1;
    return 1;
}

/* A flag without a value: 1 if it was one (and is now applied), else 0. */
static int parse_flag(const char *arg, const char *argv0, bool *quick,
                      bool *list)
{
    if (strcmp(arg, "--quick") == 0)
        *quick = true;
    else if (strcmp(arg, "--list") == 0)
        *list = true;
    else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
        usage(stdout, argv0);
        exit(0);
    } else
        return 0;
    return 1;
}

/*
 * Reads the options into @cfg and the bench names into @sel (room for argc
 * entries), returning how many names; --list sets *list. Exits with 2 on
 * bad usage and 3 on an unknown bench, before anything has run.
 */
static size_t parse_args(int argc, char **argv, struct bench_cfg *cfg,
                         const struct bench **sel, bool *list)
{
    size_t count = 0;
    bool quick = false;

    for (int i = 1; i < argc; i++) {
        int valued = parse_valued(argc, argv, &i, cfg);

        if (valued > 0 || (valued == 0 && parse_flag(argv[i], argv[0], &quick,
                                                     list)))
            continue;
        if (valued < 0 || argv[i][0] == '-') {
            usage(stderr, argv[0]);
            exit(2);
        }
        if ((sel[count] = bench_find(argv[i])) == NULL) {
            fprintf(stderr, "%s: bench %s not implemented\n", IMPL, argv[i]);
            exit(3);
        }
        count++;
    }
    if (quick) {
        cfg->n /= 10;
        cfg->m /= 10;
        cfg->lat_iters = QUICK_LAT_ITERS;
    }
    return count;
}

/* Runs each selected bench in turn; a failure does not stop the others. */
static int run_selected(const struct bench **sel, size_t count,
                        const struct bench_cfg *cfg)
{
    int failed = 0;

    for (size_t i = 0; i < count; i++) {
        fprintf(stderr, "serex_bench: %s\n", sel[i]->name);
        if (sel[i]->run(cfg) != 0) {
            fprintf(stderr, "serex_bench: %s FAILED\n", sel[i]->name);
            failed = 1;
        }
    }
    return failed;
}

int main(int argc, char **argv)
{
    /* Room for every name on the command line, or the whole table. */
    const struct bench **sel = calloc((size_t)argc + BENCH_COUNT, sizeof *sel);
    struct bench_cfg cfg;
    bool list = false;

    if (sel == NULL)
        return 1;
    cfg_defaults(&cfg);
    size_t count = parse_args(argc, argv, &cfg, sel, &list);
    if (count == 0)
        for (size_t i = 0; i < BENCH_COUNT; i++)
            sel[count++] = &bench_table[i];
    int failed = 0;
    if (list)
        for (size_t i = 0; i < BENCH_COUNT; i++)
            printf("%s\n", bench_table[i].name);
    else
        failed = run_selected(sel, count, &cfg);
    free(sel);
    return failed;
}
