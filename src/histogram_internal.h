/* SPDX-License-Identifier: MIT */
/*
 * histogram_internal.h - the histograms behind serex_executor_metrics
 * (metrics.h): the bucket layout, recording, and an executor's set of
 * them (struct serex__metrics), made by serex_executor_metrics_enable.
 *
 * Recording costs no shared atomic on the busy path. An executor whose
 * tasks one thread at a time run (a pool worker's own part, a serial)
 * records with a load and a store (one writer: serex__hist_add_owned); an
 * executor whose tasks run on many threads at once (striped, limiter,
 * scheduler) gives each thread one of SEREX__METRICS_STRIPES parts, picked
 * by the thread's number, and adds with a relaxed RMW on a line that few
 * threads share (serex__hist_add_shared). Readers sum every part.
 */
#ifndef SEREX_HISTOGRAM_INTERNAL_H
#define SEREX_HISTOGRAM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common_internal.h"
#include "serex/metrics.h"
#include "alloc_internal.h"
#include "thread_internal.h"
#include "ticks_internal.h"

#define SEREX__METRICS_STRIPES 8u /* parts of a shared set */
#define SEREX__METRICS_EVERY 64u  /* the default sampling period */

struct serex__hist {
    _Atomic uint64_t sum, max; /* the count is the buckets' sum */
    _Atomic uint64_t b[SEREX_HISTOGRAM_BUCKETS];
};

/* One writer's part (or one stripe's): cache-line aligned, so two parts
 * never share a line. */
struct serex__meter {
    _Alignas(SEREX__CACHELINE) struct serex__hist wait;
    struct serex__hist run;
};

struct serex__metrics {
    serex_metrics_clock_fn clock; /* NULL: serex__now_ns */
    void *clock_ctx;
    unsigned every;         /* time 1 task in `every` */
    unsigned n;             /* parts */
    struct serex__meter *m; /* n parts (serex__calloc_aligned) */
};

/* A set of @n parts, zeroed; NULL: out of memory. @cfg NULL: defaults. */
struct serex__metrics *serex__metrics_new(const serex_metrics_config *cfg,
                                          unsigned n);
void serex__metrics_free(struct serex__metrics *ms);
/* Adds every part's histograms into out->wait and out->run. */
void serex__metrics_read(const struct serex__metrics *ms, serex_metrics *out);
/* The same from an executor's slot: nothing while metrics are off. */
void serex__metrics_read_slot(struct serex__metrics *_Atomic *slot,
                              serex_metrics *out);
/*
 * Publishes @fresh as *@slot unless a set is there already (then frees
 * @fresh): an executor's enable. Returns SEREX_OK; @fresh NULL:
 * SEREX_ENOMEM unless a set is there already.
 */
int serex__metrics_publish(struct serex__metrics *_Atomic *slot,
                           struct serex__metrics *fresh);

/* An executor's enable: a set of @parts published in *@slot (the first
 * enable wins; a later one changes nothing). SEREX_OK or SEREX_ENOMEM. */
static inline int serex__metrics_enable(struct serex__metrics *_Atomic *slot,
                                        const serex_metrics_config *cfg,
                                        unsigned parts)
{
    return serex__metrics_publish(slot, serex__metrics_new(cfg, parts));
}

/* An executor's set, or NULL while off. acquire: the set's fields, written
 * before its publication (serex__metrics_publish's release). */
static inline struct serex__metrics *serex__metrics_get(
    struct serex__metrics *_Atomic *slot)
{
    return atomic_load_explicit(slot, memory_order_acquire);
}

/*
 * The histograms' clock when the config names none: monotonic
 * nanoseconds from the CPU's counter (ticks_internal.h), scaled by a ratio
 * measured against serex__now_ns once, by the first enable (a 200 us
 * look: histogram.c), about 8 ns a read where serex__now_ns costs ~20.
 * It measures durations (waits, runs); over hours it may drift from the
 * monotonic clock by the few hundred parts per million NTP slews that
 * one by. Where the counter is not known to tick at a constant rate,
 * serex__now_ns itself (ns_per_tick 0).
 */
struct serex__fast_clock {
    uint64_t tick0;
    int64_t ns0;
    double ns_per_tick; /* 0: use serex__now_ns */
};

/* Written once, before the first set is published (whose acquire load
 * orders these reads after it). */
extern struct serex__fast_clock serex__fast_clock;

static inline int64_t serex__fast_ns(void)
{
    const struct serex__fast_clock *c = &serex__fast_clock;

    if (c->ns_per_tick == 0.0)
        return serex__now_ns();
    return c->ns0 +
           (int64_t)((double)(serex__ticks() - c->tick0) * c->ns_per_tick);
}

static inline int64_t serex__metrics_now(const struct serex__metrics *ms)
{
    return ms->clock != NULL ? ms->clock(ms->clock_ctx) : serex__fast_ns();
}

/* Whether the calling thread times this submission: 1 in ms->every of its
 * submissions to executors with metrics on (a thread-local countdown). */
extern SEREX__THREAD_LOCAL unsigned serex__metrics_left;

static inline bool serex__metrics_sample(const struct serex__metrics *ms)
{
    if (serex__metrics_left > 1) {
        serex__metrics_left--;
        return false;
    }
    serex__metrics_left = ms->every;
    return true;
}

/*
 * A submission's mark as a queue stores it (a pool record's or a node's
 * `t`): 0, nothing watches the task; SEREX__T_UNTIMED, the recorder wants
 * its slice but nothing timed it; else its submit time plus 2 (so a clock
 * that reads 0, a manual one at its start, is a time too), which
 * serex__metrics_time_of takes back.
 */
#define SEREX__T_UNTIMED UINT64_C(1)

static inline uint64_t serex__metrics_stamp(int64_t now)
{
    return (uint64_t)now + 2;
}

static inline bool serex__metrics_timed(uint64_t t)
{
    return t > SEREX__T_UNTIMED;
}

static inline int64_t serex__metrics_time_of(uint64_t stamp)
{
    return (int64_t)(stamp - 2);
}

static inline uint64_t serex__metrics_since(uint64_t stamp, int64_t now)
{
    int64_t then = serex__metrics_time_of(stamp);

    return now > then ? (uint64_t)(now - then) : 0;
}

/* The clock of a set, or the monotonic one without a set. */
static inline int64_t serex__metrics_now_or_mono(
    const struct serex__metrics *ms)
{
    return ms != NULL ? serex__metrics_now(ms) : serex__now_ns();
}

/* The stripe of a shared set the calling thread writes. */
struct serex__meter *serex__metrics_stripe(struct serex__metrics *ms);

static inline unsigned serex__hist_bucket(uint64_t v)
{
    unsigned e;

    if (v < 16)
        return (unsigned)v;
    e = serex__fls64(v); /* v >= 2^e, e >= 4 */
    if (e > 40)
        return SEREX_HISTOGRAM_BUCKETS - 1;
    return 16u + (e - 4u) * 16u + (unsigned)((v >> (e - 4u)) & 15u);
}

/* One writer: loads and stores (relaxed: statistics; readers take what
 * they see, and the part's next writer is ordered after this one by
 * whatever hands it the executor's work). */
static inline void serex__hist_add_owned(struct serex__hist *h, uint64_t v)
{
    _Atomic uint64_t *b = &h->b[serex__hist_bucket(v)];

    atomic_store_explicit(b, atomic_load_explicit(b, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(
        &h->sum, atomic_load_explicit(&h->sum, memory_order_relaxed) + v,
        memory_order_relaxed);
    if (v > atomic_load_explicit(&h->max, memory_order_relaxed))
        atomic_store_explicit(&h->max, v, memory_order_relaxed);
}

/* Writers at once (a stripe's threads): relaxed RMWs, statistics. */
static inline void serex__hist_add_shared(struct serex__hist *h, uint64_t v)
{
    uint64_t m = atomic_load_explicit(&h->max, memory_order_relaxed);

    atomic_fetch_add_explicit(&h->b[serex__hist_bucket(v)], 1,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
    while (v > m &&
           !atomic_compare_exchange_weak_explicit(
               &h->max, &m, v, memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* One timed task's wait and run in part @m: @shared, by one of the
 * threads that share a stripe; else by its one writer. */
static inline void serex__meter_add(struct serex__meter *m, bool shared,
                                    uint64_t wait, uint64_t run)
{
    if (shared) {
        serex__hist_add_shared(&m->wait, wait);
        serex__hist_add_shared(&m->run, run);
    } else {
        serex__hist_add_owned(&m->wait, wait);
        serex__hist_add_owned(&m->run, run);
    }
}

#endif /* SEREX_HISTOGRAM_INTERNAL_H */
