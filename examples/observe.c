/* SPDX-License-Identifier: MIT */
/*
 * observe.c - looking inside a running program (docs/observability.md): a
 * small service (a pool, a serial that owns a counter, a striped executor
 * keyed by session) with
 *   - metrics on, printed every second by a timer (and once at the end);
 *   - the flight recorder on for the run, written to a Chrome trace JSON
 *     file that Perfetto opens and scripts/trace_plot.sh draws;
 *   - serex_dump on SIGUSR1: the handler only writes a byte to a pipe;
 *     a thread of its own reads the pipe and dumps (a dump takes locks and
 *     allocates: never inside a handler). The program sends itself one
 *     SIGUSR1 to show it; `kill -USR1 <pid>` does the same from outside.
 *
 *   observe [TRACE.json] [--seconds N]
 *
 * Without --seconds it runs a fixed amount of work and stops (it is a
 * CTest test); with it, it keeps the service busy for N seconds, to be
 * dumped and watched. POSIX (signals, pipes, pthreads).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <serex/serex.h>

#define SESSIONS 16
#define REQUESTS 20000

static serex_executor *pool, *ledger; /* ledger: a serial over the pool */
static serex_striped *sessions;
static long total; /* owned by the ledger */
static atomic_long handled;

/* --- the service --- */

static atomic_long sink; /* keeps the work from being optimised away */

static void spin_for(long n)
{
    long x = 0;

    for (long i = 0; i < n; i++)
        x += i;
    atomic_store_explicit(&sink, x, memory_order_relaxed); /* a result */
}

/* The tasks are not static: exported (the program links with
 * ENABLE_EXPORTS, -rdynamic), serex_dump names them. */
void count_on_ledger(void *arg);
void handle_request(void *arg);

void count_on_ledger(void *arg)
{
    SEREX_ASSERT_ON(ledger); /* the counter is the ledger's alone */
    total += (long)(intptr_t)arg;
}

/* A request of a session: some work, then a line in the ledger. */
void handle_request(void *arg)
{
    spin_for(200 + 50 * ((long)(intptr_t)arg % 7));
    if (serex_execute(ledger, count_on_ledger, arg) != SEREX_OK)
        abort();
    atomic_fetch_add_explicit(&handled, 1, memory_order_relaxed);
}

/* --- metrics every second --- */

static void print_metrics(const char *what, serex_executor *ex)
{
    serex_metrics *m = malloc(sizeof *m); /* about 10 KiB */

    if (m == NULL || serex_executor_metrics(ex, m) != SEREX_OK) {
        free(m);
        return;
    }
    printf("%-9s wait p50 %6llu ns p99 %8llu ns | run p50 %6llu ns p99 %8llu "
           "ns | timed %llu, steals %llu, parks %llu\n",
           what, (unsigned long long)serex_histogram_percentile(&m->wait, 0.5),
           (unsigned long long)serex_histogram_percentile(&m->wait, 0.99),
           (unsigned long long)serex_histogram_percentile(&m->run, 0.5),
           (unsigned long long)serex_histogram_percentile(&m->run, 0.99),
           (unsigned long long)m->run.count, (unsigned long long)m->steals,
           (unsigned long long)m->parks);
    free(m);
}

static void print_all_metrics(void *arg)
{
    (void)arg;
    print_metrics("pool", pool);
    print_metrics("ledger", ledger);
    print_metrics("sessions", serex_striped_executor(sessions));
}

/* --- the dump on SIGUSR1, through a self-pipe --- */

static int dump_pipe[2];
static serex_event *dumped;

static void on_sigusr1(int sig)
{
    int saved = errno; /* write may change it; the interrupted code's */
    char c = 'd';

    (void)sig;
    (void)!write(dump_pipe[1], &c, 1); /* async-signal-safe */
    errno = saved;
}

/* The dumper thread: a dump per byte; a 'q' ends it. */
static void *dumper_main(void *arg)
{
    char c;

    (void)arg;
    while (read(dump_pipe[0], &c, 1) == 1 && c != 'q') {
        if (serex_dump(stdout, SEREX_DUMP_SYMBOLS) != SEREX_OK)
            fprintf(stderr, "observe: serex_dump failed\n");
        serex_event_signal(dumped);
    }
    return NULL;
}

static int install_dumper(pthread_t *t)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (pipe(dump_pipe) != 0 || serex_event_create(&dumped) != SEREX_OK ||
        pthread_create(t, NULL, dumper_main, NULL) != 0)
        return -1;
    return sigaction(SIGUSR1, &sa, NULL);
}

/* --- the run --- */

static int make_service(void)
{
    serex_pool_config pc = {.threads = 4, .name = "web"};
    serex_serial_config sc = {.name = "ledger"};
    serex_striped_config stc = {.name = "sessions"};

    if (serex_pool_create(&pc, &pool) != SEREX_OK ||
        serex_serial_create(pool, &sc, &ledger) != SEREX_OK ||
        serex_striped_create(pool, &stc, &sessions) != SEREX_OK)
        return -1;
    /* NULL: one task in 64 timed per submitting thread */
    if (serex_executor_metrics_enable(pool, NULL) != SEREX_OK ||
        serex_executor_metrics_enable(ledger, NULL) != SEREX_OK ||
        serex_executor_metrics_enable(serex_striped_executor(sessions), NULL) !=
            SEREX_OK)
        return -1;
    return 0;
}

static void submit_requests(long n)
{
    for (long i = 0; i < n; i++)
        while (serex_striped_execute(sessions, (uint64_t)(i % SESSIONS),
                                     handle_request,
                                     (void *)(intptr_t)i) != SEREX_OK)
            ;
}

static int write_trace(const char *path)
{
    FILE *f = fopen(path, "w");
    int rc;

    if (f == NULL)
        return -1;
    rc = serex_trace_write(f);
    if (fclose(f) != 0 || rc != SEREX_OK)
        return -1;
    printf("observe: trace in %s (open it in https://ui.perfetto.dev, or "
           "scripts/trace_plot.sh %s timeline.png)\n",
           path, path);
    return 0;
}

int main(int argc, char **argv)
{
    const char *trace_path = "observe-trace.json";
    serex_trace_config tc = {.events_per_thread = 1 << 16};
    long seconds = 0, rounds = 1, per_round;
    serex_scheduler *sched;
    serex_timer *every_second;
    pthread_t dumper;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atol(argv[++i]);
        else
            trace_path = argv[i];
    }
    if (make_service() != 0 || install_dumper(&dumper) != 0 ||
        serex_scheduler_create(NULL, &sched) != SEREX_OK ||
        serex_schedule_fixed_rate(sched, pool, 1000000000, 1000000000,
                                  print_all_metrics, NULL,
                                  &every_second) != SEREX_OK ||
        serex_trace_start(&tc) != SEREX_OK) {
        fprintf(stderr, "observe: setup failed\n");
        return 1;
    }
    printf("observe: pid %ld; kill -USR1 %ld dumps every serex object\n",
           (long)getpid(), (long)getpid());
    if (seconds > 0)
        rounds = seconds * 50; /* about 20 ms of work a round */
    per_round = seconds > 0 ? REQUESTS / 20 : REQUESTS;
    for (long r = 0; r < rounds; r++)
        submit_requests(per_round);
    /* the service is busy: what does it look like now? */
    raise(SIGUSR1);
    if (serex_event_wait(dumped, SEREX_FOREVER) != SEREX_OK)
        return 1;
    /* the sessions' tasks, then the ledger's lines they queued */
    serex_shutdown(serex_striped_executor(sessions));
    if (serex_await_termination(serex_striped_executor(sessions),
                                SEREX_FOREVER) != SEREX_OK)
        return 1;
    serex_shutdown(ledger);
    if (serex_await_termination(ledger, SEREX_FOREVER) != SEREX_OK)
        return 1;
    serex_trace_stop();
    print_all_metrics(NULL);
    if (write_trace(trace_path) != 0) {
        fprintf(stderr, "observe: could not write %s\n", trace_path);
        return 1;
    }
    serex_trace_discard();
    serex_timer_cancel(every_second);
    serex_timer_release(every_second);
    if (serex_destroy(serex_scheduler_executor(sched)) != SEREX_OK ||
        serex_destroy(serex_striped_executor(sessions)) != SEREX_OK ||
        serex_destroy(ledger) != SEREX_OK || serex_destroy(pool) != SEREX_OK)
        return 1;
    if (write(dump_pipe[1], "q", 1) != 1 || pthread_join(dumper, NULL) != 0)
        return 1;
    serex_event_destroy(dumped);
    /* the ledger saw every request: each round adds 0 + 1 + ... + n-1 */
    if (total != rounds * (per_round * (per_round - 1) / 2) ||
        atomic_load(&handled) != rounds * per_round) {
        fprintf(stderr, "observe: the ledger lost requests\n");
        return 1;
    }
    printf("observe: ok (%ld requests)\n", atomic_load(&handled));
    return 0;
}
