/* SPDX-License-Identifier: MIT */
/*
 * bench_pool.c - the pool workloads of serex_bench: pool_throughput,
 * pool_latency, pool_idle_cpu, pool_wakeups, and pool_trickle with its
 * baseline trickle_floor (a plain mutex-and-condvar pool, impl=condvar-floor).
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include "pool_internal.h" /* pool_wakeups: the pool's own counters */

#include <inttypes.h> /* PRIu64 */
#include <pthread.h>  /* producer threads, the floor pool */
#include <sched.h>    /* sched_yield while producers wait for go */
#include <stdio.h>
#include <stdlib.h>
#include <string.h> /* strerror */

#define IDLE_TASKS 1000L /* pool_idle_cpu: work before the idle time */
#define IDLE_NS NS_PER_S /* pool_idle_cpu: the idle time measured */
/* pool_latency stops after this long, as the peers' lat_stop() does. */
#define LAT_TIME_CAP_NS (60 * NS_PER_S)

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
int bench_pool_throughput(const struct bench_cfg *cfg)
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

int bench_pool_latency(const struct bench_cfg *cfg)
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

/*
 * A pool that has just run work, then sits idle: a pool whose workers spin
 * to win pool_latency shows it here. The main thread sleeps, so the CPU
 * time is the workers'. Divided by the measured wall time, not a nominal
 * second, in case the sleep overran.
 */
int bench_pool_idle_cpu(const struct bench_cfg *cfg)
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

int bench_pool_wakeups(const struct bench_cfg *cfg)
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

int bench_pool_trickle(const struct bench_cfg *cfg)
{
    return trickle_run(cfg, IMPL, pool_start);
}

int bench_trickle_floor(const struct bench_cfg *cfg)
{
    return trickle_run(cfg, "condvar-floor", floor_start);
}
