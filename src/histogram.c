/* SPDX-License-Identifier: MIT */
/*
 * histogram.c - the histograms' bucket arithmetic, percentiles, and an
 * executor's set of them (histogram_internal.h says how they record).
 */
#include "histogram_internal.h"

SEREX__THREAD_LOCAL unsigned serex__metrics_left;

struct serex__fast_clock serex__fast_clock;
static serex__once fast_clock_once = SEREX__ONCE_INIT;

#if (defined(__GNUC__) || defined(__clang__)) && \
    (defined(__x86_64__) || defined(__i386__))
#  include <cpuid.h>
/* Whether the TSC is invariant: one rate on every core, in every power
 * state (CPUID 0x80000007, EDX bit 8). */
static bool ticks_constant(void)
{
    unsigned a, b, c, d;

    return __get_cpuid(0x80000007u, &a, &b, &c, &d) && (d & (1u << 8)) != 0;
}
#elif defined(SEREX__TICKS_ARE_NS)
static bool ticks_constant(void)
{
    return false; /* serex__ticks is serex__now_ns: nothing to scale */
}
#else
static bool ticks_constant(void)
{
    return true; /* arm64's generic timer; x86-64 under MSVC: invariant */
}
#endif

/* The ratio of ticks to nanoseconds over at least 200 us: the reads of
 * each pair are tens of nanoseconds apart, an error of 0.01 % at most. */
static void fast_clock_init(void)
{
    int64_t ns0 = serex__now_ns(), ns1;
    uint64_t t0 = serex__ticks(), t1;

    if (!ticks_constant())
        return;
    do {
        ns1 = serex__now_ns();
        t1 = serex__ticks();
    } while (ns1 - ns0 < 200000);
    if (t1 <= t0)
        return; /* a counter that does not count */
    serex__fast_clock.ns_per_tick = (double)(ns1 - ns0) / (double)(t1 - t0);
    serex__fast_clock.tick0 = t1;
    serex__fast_clock.ns0 = ns1;
}

unsigned serex_histogram_bucket_of(uint64_t ns)
{
    return serex__hist_bucket(ns);
}

uint64_t serex_histogram_bucket_low(unsigned i)
{
    unsigned g, sub;

    if (i < 16)
        return i;
    if (i >= SEREX_HISTOGRAM_BUCKETS)
        return UINT64_MAX;
    g = (i - 16u) / 16u; /* the power of two: 2^(g + 4) */
    sub = (i - 16u) % 16u;
    return (uint64_t)(16u + sub) << g;
}

uint64_t serex_histogram_percentile(const serex_histogram *h, double q)
{
    uint64_t rank, seen = 0;
    double x;

    if (h == NULL || h->count == 0 || !(q >= 0.0 && q <= 1.0))
        return 0;
    if (q >= 1.0)
        return h->max_ns;
    /* the value of rank ceil(q * count), at least the first */
    x = q * (double)h->count;
    rank = (uint64_t)x;
    if ((double)rank < x)
        rank++;
    if (rank == 0)
        rank = 1;
    for (unsigned i = 0; i < SEREX_HISTOGRAM_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t high = serex_histogram_bucket_low(i + 1) - 1;

            return high < h->max_ns ? high : h->max_ns;
        }
    }
    return h->max_ns; /* counts read while being written: the largest */
}

struct serex__metrics *serex__metrics_new(const serex_metrics_config *cfg,
                                          unsigned n)
{
    struct serex__metrics *ms = serex__calloc(1, sizeof(*ms));

    if (ms == NULL)
        return NULL;
    serex__call_once(&fast_clock_once, fast_clock_init);
    ms->m = serex__calloc_aligned(SEREX__CACHELINE, n * sizeof(*ms->m));
    if (ms->m == NULL) {
        serex__free(ms);
        return NULL;
    }
    ms->n = n;
    ms->every = SEREX__METRICS_EVERY;
    if (cfg != NULL) {
        ms->clock = cfg->clock;
        ms->clock_ctx = cfg->clock_ctx;
        if (cfg->sample_every != 0)
            ms->every = cfg->sample_every;
    }
    return ms;
}

void serex__metrics_free(struct serex__metrics *ms)
{
    if (ms == NULL)
        return;
    serex__free(ms->m);
    serex__free(ms);
}

int serex__metrics_publish(struct serex__metrics *_Atomic *slot,
                           struct serex__metrics *fresh)
{
    struct serex__metrics *old = NULL;

    /* acq_rel: release publishes the set's fields to the recorders'
     * acquire loads; acquire, on failure, reads the set already there */
    if (fresh != NULL &&
        atomic_compare_exchange_strong_explicit(
            slot, &old, fresh, memory_order_acq_rel, memory_order_acquire))
        return SEREX_OK;
    serex__metrics_free(fresh);
    if (old == NULL) /* relaxed: only whether one is there */
        old = atomic_load_explicit(slot, memory_order_relaxed);
    return old != NULL ? SEREX_OK : SEREX_ENOMEM;
}

/* relaxed (every load): statistics, read while written */
static void hist_merge(serex_histogram *out, const struct serex__hist *h)
{
    uint64_t max = atomic_load_explicit(&h->max, memory_order_relaxed);

    out->sum_ns += atomic_load_explicit(&h->sum, memory_order_relaxed);
    if (max > out->max_ns)
        out->max_ns = max;
    for (unsigned i = 0; i < SEREX_HISTOGRAM_BUCKETS; i++) {
        uint64_t n = atomic_load_explicit(&h->b[i], memory_order_relaxed);

        out->buckets[i] += n;
        out->count += n; /* so count and buckets always agree */
    }
}

void serex__metrics_read(const struct serex__metrics *ms, serex_metrics *out)
{
    for (unsigned i = 0; i < ms->n; i++) {
        hist_merge(&out->wait, &ms->m[i].wait);
        hist_merge(&out->run, &ms->m[i].run);
    }
}

void serex__metrics_read_slot(struct serex__metrics *_Atomic *slot,
                              serex_metrics *out)
{
    struct serex__metrics *ms = serex__metrics_get(slot);

    if (ms != NULL)
        serex__metrics_read(ms, out);
}

/* The calling thread's stripe: its own number, given on first use
 * (relaxed: only a number; spreading the threads is all it is for). */
static SEREX__THREAD_LOCAL unsigned stripe_of_thread;
static _Atomic unsigned stripe_next;

struct serex__meter *serex__metrics_stripe(struct serex__metrics *ms)
{
    if (stripe_of_thread == 0)
        stripe_of_thread = atomic_fetch_add_explicit(&stripe_next, 1,
                                                     memory_order_relaxed) +
                           1;
    return &ms->m[stripe_of_thread % ms->n];
}
