/* SPDX-License-Identifier: MIT */
/*
 * bench_common.c - the helpers every bench family of serex_bench shares
 * (declared in bench_common.h): errors, the end-of-run signal, warmed
 * pools and serials, CPU time, sleeping, peak RSS, percentiles, and the
 * ordered runs of serial_throughput and striped_throughput.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <errno.h> /* EINTR from sem_wait, clock_nanosleep */
#include <sched.h> /* sched_yield while waiting on untimed steps */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h> /* getrusage: pool_idle_cpu, peak RSS */

const char IMPL[] = "serex";

#define WARMUP_TASKS 1000L /* untimed tasks run on every new pool */

void report_error(const char *call, int status)
{
    fprintf(stderr, "serex_bench: %s: %s\n", call, serex_strerror(status));
}

/* --- the end-of-run signal --- */

int done_init(struct done *d)
{
    d->t_end = 0;
    if (sem_init(&d->sem, 0, 0) == 0)
        return 0;
    perror("serex_bench: sem_init");
    return -1;
}

void done_signal(struct done *d)
{
    d->t_end = now_ns();
    sem_post(&d->sem);
}

void done_wait(struct done *d)
{
    while (sem_wait(&d->sem) != 0 && errno == EINTR)
        ;
}

/* Waits for @d, at most @cap_ns: false on timeout (then d->t_end is 0). */
bool done_wait_for(struct done *d, int64_t cap_ns)
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
int pool_run_tasks(serex_executor *pool, long n)
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
 * What the run watches, to measure what watching costs: the environment's
 * SEREX_BENCH_WATCH, "metrics" (serex_executor_metrics_enable on every
 * pool, serial and scheduler the benchmarks make, default sampling),
 * "metrics-all" (sampling every task) or "trace" (the flight recorder on
 * for the whole run, its default rings: the newest 16384 events of each
 * thread kept). Unset: nothing (the numbers every other table shows).
 */
int bench_watch_trace(bool start)
{
    const char *w = getenv("SEREX_BENCH_WATCH");
    int rc;

    if (w == NULL || strcmp(w, "trace") != 0)
        return 0;
    if (!start) {
        serex_trace_stop();
        serex_trace_discard();
        return 0;
    }
    rc = serex_trace_start(NULL);
    if (rc != SEREX_OK)
        report_error("serex_trace_start", rc);
    return rc == SEREX_OK ? 0 : -1;
}

void bench_watch(serex_executor *ex)
{
    const char *w = getenv("SEREX_BENCH_WATCH");
    serex_metrics_config all = {1, NULL, NULL};
    int rc = SEREX_OK;

    if (w == NULL || *w == '\0')
        return;
    if (strcmp(w, "metrics") == 0)
        rc = serex_executor_metrics_enable(ex, NULL);
    else if (strcmp(w, "metrics-all") == 0)
        rc = serex_executor_metrics_enable(ex, &all);
    if (rc != SEREX_OK)
        report_error("serex_executor_metrics_enable", rc);
}

/*
 * A pool of @threads workers, warmed with WARMUP_TASKS untimed tasks as the
 * peers warm theirs, so no timed run pays for starting workers or filling
 * node caches (libuv and TBB start their threads lazily). NULL on failure.
 */
serex_executor *pool_start(int threads)
{
    serex_pool_config cfg = {.threads = (unsigned)threads};
    serex_executor *pool;
    int rc = serex_pool_create(&cfg, &pool);

    if (rc != SEREX_OK) {
        report_error("serex_pool_create", rc);
        return NULL;
    }
    bench_watch(pool);
    if (pool_run_tasks(pool, WARMUP_TASKS) != SEREX_OK) {
        serex_destroy(pool);
        return NULL;
    }
    return pool;
}

/* Shuts the pool down and waits for its tasks: their writes are then ours. */
int pool_stop(serex_executor *pool)
{
    int rc = serex_destroy(pool);

    if (rc != SEREX_OK)
        report_error("serex_destroy", rc);
    return rc == SEREX_OK ? 0 : -1;
}

/* Untimed: the serial over @pool. NULL on failure, reported. */
serex_executor *serial_start(serex_executor *pool)
{
    serex_executor *serial;
    int rc = serex_serial_create(pool, NULL, &serial);

    if (rc != SEREX_OK) {
        report_error("serex_serial_create", rc);
        return NULL;
    }
    bench_watch(serial);
    return serial;
}

/* --- CPU time, sleeping, memory --- */

/* CPU time of the calling thread alone. */
int64_t thread_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* User + system CPU time of the whole process, every thread included. */
int64_t cpu_time_ns(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * NS_PER_S
           + ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

/* Sleeps until the monotonic clock reads @deadline_ns, signals or not. */
void sleep_until(int64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / NS_PER_S),
                          .tv_nsec = (long)(deadline_ns % NS_PER_S)};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)
           == EINTR)
        ;
}

/* Peak resident set size of the process in kB, as the peers' peak_rss_kb(). */
long peak_rss_kb(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* --- percentiles --- */

int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* Nearest rank, ceil(n * p / 100), as the peers' pct_sorted(). */
int64_t percentile(const int64_t *sorted, size_t n, unsigned p)
{
    size_t rank = (n * p + 99) / 100;

    return sorted[rank ? rank - 1 : 0];
}

/* Percentile (nearest rank) of @k sorted values. */
int64_t pct_sorted(const int64_t *v, long k, int p)
{
    long i = (long)((double)p / 100.0 * (double)k + 0.999999) - 1;

    return v[i < 0 ? 0 : (i >= k ? k - 1 : i)];
}

/* --- ordered runs: serial_throughput and striped_throughput --- */

struct ordered_run *ordered_current;

/*
 * K zeroed counters, allocated up front as the peers do (8 MB for K =
 * 1,000,000). Written, not just calloc'd, so their pages count in peak RSS
 * as the peers' std::vector<uint64_t>(k, 0) does. 0 on success.
 */
int ordered_init(struct ordered_run *r, uint64_t n, uint64_t k)
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

void ordered_fini(struct ordered_run *r)
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
long ordered_violations(struct ordered_run *r)
{
    long viol = atomic_load_explicit(&r->violations, memory_order_relaxed);

    for (uint64_t s = 0; s < r->k; s++)
        viol += r->counters[s] != r->n / r->k + (s < r->n % r->k);
    return viol;
}
