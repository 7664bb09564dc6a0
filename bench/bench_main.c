/* SPDX-License-Identifier: MIT */
/*
 * bench_main.c - serex_bench's command line, its table of benches and the
 * loop that runs them: serex on the workloads of
 * shared/bench/WORKLOADS.md.
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
 * The benches live one file per family: bench_pool.c, bench_serial.c,
 * bench_striped.c, bench_timer.c, bench_channel.c, bench_future.c and
 * bench_group.c; what they share is in bench_common.h and bench_common.c.
 * Adding a bench: write `int bench_<name>(const struct bench_cfg *)` in
 * its family's file (a new family gets a new file, listed in
 * bench/CMakeLists.txt), returning 0 once its RESULT line is printed (-1
 * on a serex or system error, already reported); declare it in
 * bench_common.h and add it to bench_table[] below. bench/table.py says
 * which of its keys to tabulate.
 *
 * Exit status: 0; 1 if a bench failed; 2 on bad usage; 3 for a bench name
 * this program does not know (the peers' binaries say 3 there too).
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <errno.h> /* strtol's ERANGE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* sysconf: online CPUs */

/* Workload sizes, as in shared/peers/c/common.h; --quick divides N and M
 * by 10. */
#define FULL_N 2000000L        /* pool_throughput tasks */
#define FULL_LAT_ITERS 100000L /* pool_latency rounds */
#define FULL_M 1000000L        /* timer_schedule_cancel timers */
#define QUICK_LAT_ITERS 10000L
/* --variant: K up to 1e8 stripes (800 MB of counters); the workload's
 * largest is 1,000,000. */
#define MAX_VARIANT 100000000L

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
    else if (bench_watch_trace(true) != 0)
        failed = 1;
    else {
        failed = run_selected(sel, count, &cfg);
        bench_watch_trace(false);
    }
    free(sel);
    return failed;
}
