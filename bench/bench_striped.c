/* SPDX-License-Identifier: MIT */
/*
 * bench_striped.c - the striped workload of serex_bench:
 * striped_throughput, N tasks over K keys of one striped executor (its
 * ordered run is shared with serial_throughput, in bench_common.c).
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <inttypes.h> /* PRIu64 */
#include <stdio.h>

/* --- striped_throughput --- */

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
int bench_striped_throughput(const struct bench_cfg *cfg)
{
    int failed = 0;

    if (cfg->variant > 0)
        return striped_once(cfg, (uint64_t)cfg->variant);
    for (size_t i = 0; i < sizeof stripe_counts / sizeof *stripe_counts; i++)
        failed |= striped_once(cfg, stripe_counts[i]) != 0;
    return failed ? -1 : 0;
}
