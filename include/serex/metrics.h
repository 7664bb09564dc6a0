/* SPDX-License-Identifier: MIT */
/*
 * serex/metrics.h - histograms of how long tasks wait and run, per
 * executor, and the counters behind them (Tokio's runtime metrics, Go's
 * /sched/latencies:seconds). Off until serex_executor_metrics_enable; an
 * executor without them pays nothing for them.
 *
 * A histogram is log-linear (HdrHistogram's layout): values 0 to 15 ns
 * each have a bucket of their own; above, every power of two is cut into
 * 16 buckets, so a bucket is at most 1/16 of its values wide (a reported
 * percentile is within 6.25 % of the truth) up to 2^41 ns (about 36
 * minutes); larger values land in the last bucket, and max is exact.
 */
#ifndef SEREX_METRICS_H
#define SEREX_METRICS_H

#include <stdint.h>

#include "executor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SEREX_HISTOGRAM_BUCKETS 608

typedef struct serex_histogram {
    uint64_t count;  /* values recorded */
    uint64_t sum_ns; /* their sum (mean = sum_ns / count) */
    uint64_t max_ns; /* the largest, exactly */
    uint64_t buckets[SEREX_HISTOGRAM_BUCKETS]; /* counts per bucket */
} serex_histogram;

/*
 * serex_histogram_bucket_of - the bucket @ns falls in.
 * serex_histogram_bucket_low - the smallest value of bucket @i (for i
 * beyond the last: UINT64_MAX). A bucket holds [low(i), low(i + 1)).
 * Threads: any; pure functions.
 */
SEREX_API unsigned serex_histogram_bucket_of(uint64_t ns);
SEREX_API uint64_t serex_histogram_bucket_low(unsigned i);

/*
 * serex_histogram_percentile - the value below which a fraction @q of the
 * recorded values lie (q = 0.5: the median, 0.99: p99), as the upper bound
 * of the bucket that holds it, never above max_ns. q >= 1 gives max_ns.
 * Returns:   nanoseconds; 0 for an empty histogram, NULL, or q not a
 *            number in [0, 1].
 * Threads:   any; reads only *@h.
 */
SEREX_API uint64_t serex_histogram_percentile(const serex_histogram *h,
                                              double q);

/*
 * A clock for the histograms: monotonic nanoseconds. The same type as the
 * scheduler's clock (scheduler.h), so a test's manual clock serves both.
 */
typedef int64_t (*serex_metrics_clock_fn)(void *ctx);

typedef struct serex_metrics_config {
    /* Time 1 task in every `sample_every` submitted from a thread (Go
     * samples its scheduler latency for the same reason: timing a task
     * costs about 100 ns, more than a small task). 0: 64, which keeps
     * the cost within a few percent on tasks of ~30 ns (measured:
     * CHANGELOG, docs/observability.md); 1: every task, exact. The
     * counters below count every event whatever this says. */
    unsigned sample_every;
    serex_metrics_clock_fn clock; /* NULL: the monotonic clock (read
                                     from the CPU's counter, scaled) */
    void *clock_ctx;
} serex_metrics_config;

/*
 * serex_executor_metrics_enable - start recording @ex's histograms (a
 * pool, serial, striped (pass serex_striped_executor), limiter or
 * scheduler (pass serex_scheduler_executor)). Tasks submitted before the
 * call are not timed. Once enabled, they stay on until destroy; a second
 * call returns SEREX_OK and changes nothing (the first config stays).
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL, or an executor that has no
 *            metrics (a manual or user-written one); SEREX_ENOMEM: off,
 *            as before.
 * Ownership: @cfg is copied (NULL: the defaults); clock_ctx must outlive
 *            @ex. The memory (about 10 KiB per worker, per stripe) is
 *            freed by serex_destroy.
 * Threads:   any thread, at any time before destroy, while tasks run.
 */
SEREX_API int serex_executor_metrics_enable(serex_executor *ex,
                                            const serex_metrics_config *cfg);

typedef struct serex_metrics {
    /* Queue wait: from submit to start (OpenTelemetry's
     * *.schedule.duration); for a scheduler, the lateness of each run:
     * from its due time to its start on its target. Sampled. */
    serex_histogram wait;
    /* Run time of the timed tasks (*.task.duration). Sampled. */
    serex_histogram run;
    /* Counted always, enabled or not (0 where they do not apply): */
    uint64_t steals;       /* pool: tasks taken from another worker's queue */
    uint64_t overflows;    /* pool: a worker's full queue moved to the shared */
    uint64_t parks;        /* pool: a worker went to sleep */
    uint64_t unparks;      /* pool: a parked worker was woken */
    uint64_t yields;       /* serial, striped: a drain gave its thread back
                           after its batch bound */
    uint64_t queue_length; /* now (*.queue.length): as serex_stats'
                              queued */
} serex_metrics;

/*
 * serex_executor_metrics - fill *@out: the histograms (empty unless
 * enabled) merged from every worker's or stripe's part, and the counters.
 * Read without stopping anyone: while tasks run it is a recent picture,
 * not one instant (a count and its buckets may differ by the values
 * being recorded); once idle, exact.
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL or an executor that has no
 *            metrics.
 * Threads:   any thread, at any time before destroy. *@out is about
 *            10 KiB: not a small stack object.
 */
SEREX_API int serex_executor_metrics(serex_executor *ex, serex_metrics *out);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_METRICS_H */
