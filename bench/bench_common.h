/* SPDX-License-Identifier: MIT */
/*
 * bench_common.h - what every file of serex_bench shares: the parsed
 * command line (struct bench_cfg), the clock, the end-of-run signal, pool
 * and serial set-up, CPU time and peak RSS, percentiles, the ordered runs
 * of serial_throughput and striped_throughput, and one entry point per
 * bench. The helpers live in bench_common.c, each bench in the file of its
 * family (bench_pool.c, bench_serial.c, ...), the table and the command
 * line in bench_main.c.
 *
 * now_ns() and cpu_relax() are static inline here: they run inside timed
 * regions, once per task or per spin, and a call into another file would
 * add to what is measured.
 */
#ifndef SEREX_BENCH_COMMON_H
#define SEREX_BENCH_COMMON_H

#include <serex/serex.h>

#include <semaphore.h> /* the end-of-run signal */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h> /* clock_gettime */

/* The impl= of every RESULT line but the baselines'. */
extern const char IMPL[];

#define NS_PER_S 1000000000LL
#define NS_PER_MS 1000000LL
#define NS_PER_US 1000LL

#define MAX_THREADS 65536L /* --threads, and producers for --variant */

/* What every bench is given: the parsed command line. */
struct bench_cfg {
    int threads;     /* T: pool worker threads */
    long variant;    /* producers for pool_throughput, stripes for
                        striped_throughput; 0 = every variant */
    uint64_t n;      /* tasks for the throughput benches */
    long m;          /* timers for timer_schedule_cancel */
    long lat_iters;  /* pool_latency rounds */
};

/* --- the benches, one file per family; 0 once the RESULT line is printed,
 * -1 on a serex or system error, already reported --- */

/* bench_pool.c */
int bench_pool_throughput(const struct bench_cfg *cfg);
int bench_pool_latency(const struct bench_cfg *cfg);
int bench_pool_idle_cpu(const struct bench_cfg *cfg);
int bench_pool_wakeups(const struct bench_cfg *cfg);
int bench_pool_trickle(const struct bench_cfg *cfg);
int bench_trickle_floor(const struct bench_cfg *cfg);
/* bench_serial.c */
int bench_serial_throughput(const struct bench_cfg *cfg);
int bench_serial_messaging(const struct bench_cfg *cfg);
/* bench_striped.c */
int bench_striped_throughput(const struct bench_cfg *cfg);
/* bench_timer.c */
int bench_timer_schedule_cancel(const struct bench_cfg *cfg);
int bench_timer_accuracy(const struct bench_cfg *cfg);
int bench_timer_periodic(const struct bench_cfg *cfg);
int bench_timer_load(const struct bench_cfg *cfg);
/* bench_channel.c */
int bench_channel_pipeline(const struct bench_cfg *cfg);
/* bench_future.c */
int bench_future_chain(const struct bench_cfg *cfg);
/* bench_group.c */
int bench_group_fanout(const struct bench_cfg *cfg);

/* --- clock, spinning, errors --- */

/* CLOCK_MONOTONIC, as the peers' now_ns() and std::chrono::steady_clock. */
static inline int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* The spin-wait hint the peers use, so our spinning costs what theirs do. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void report_error(const char *call, int status);

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

int done_init(struct done *d);
void done_signal(struct done *d);
void done_wait(struct done *d);
bool done_wait_for(struct done *d, int64_t cap_ns);

/* --- pools and serials --- */

int pool_run_tasks(serex_executor *pool, long n);
serex_executor *pool_start(int threads);
/* SEREX_BENCH_WATCH=metrics|metrics-all: turn @ex's metrics on. */
void bench_watch(serex_executor *ex);
/* SEREX_BENCH_WATCH=trace: start (or stop) the flight recorder; -1 if it
 * would not start (reported). */
int bench_watch_trace(bool start);
int pool_stop(serex_executor *pool);
serex_executor *serial_start(serex_executor *pool);

/* --- CPU time, sleeping, memory --- */

int64_t thread_cpu_ns(void);
int64_t cpu_time_ns(void);
void sleep_until(int64_t deadline_ns);
long peak_rss_kb(void);

/* --- percentiles --- */

int cmp_i64(const void *a, const void *b);
int64_t percentile(const int64_t *sorted, size_t n, unsigned p);
int64_t pct_sorted(const int64_t *v, long k, int p);

/* --- ordered runs: serial_throughput and striped_throughput --- */

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

extern struct ordered_run *ordered_current;

static inline void *index_arg(uint64_t i)
{
    return (void *)(uintptr_t)i;
}

/* Relaxed: a violation is only counted; serex_destroy orders it before the
 * final read. Never reached while the executor keeps its promise. */
static inline void ordered_violation(struct ordered_run *r)
{
    atomic_fetch_add_explicit(&r->violations, 1, memory_order_relaxed);
}

int ordered_init(struct ordered_run *r, uint64_t n, uint64_t k);
void ordered_fini(struct ordered_run *r);
long ordered_violations(struct ordered_run *r);

#endif /* SEREX_BENCH_COMMON_H */
