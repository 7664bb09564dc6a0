/* SPDX-License-Identifier: MIT */
/*
 * pool_watch.c - what the pool shows of itself: the submit time and the
 * task hooks with the task's identity, the histograms and counters of
 * serex_executor_metrics, and its part of serex_dump.
 *
 * The busy path pays one predictable branch per submit and per task for
 * all of it (pool.c): a submit looks at the pool's `watch` word and the
 * recorder's (observe_internal.h); a worker only at the task's mark `t`,
 * which a watched submit sets (histogram_internal.h: 0 unwatched, 1 for
 * the recorder alone, else the submit time). A pool with any task hook
 * watches every submit, so its hooks see every task. The probes fire on
 * the busy path itself: NOPs while no tool is attached.
 *
 * Timing. A watched submit stores its time in the task's record: every
 * submit when an info hook is set, one in `every` of the calling
 * thread's submits when only the histograms want it (sampling, as Go's
 * scheduler-latency metric does: a clock read costs about what a small
 * task does). The worker that takes a timed task reads the clock before
 * and after it and records the wait and the run in its own part of the
 * histograms: one writer per part, no shared atomic.
 */
#include "exec_class_internal.h"
#include "pool_types_internal.h"

void serex__pool_watch_submit(struct pool *p, struct serex__task_rec *r)
{
    /* relaxed: fixed at create, or set once by enable (then the set is
     * read with acquire below) */
    uint32_t watch = atomic_load_explicit(&p->watch, memory_order_relaxed);
    struct serex__metrics *ms = NULL;

    if (watch & WATCH_METRICS)
        ms = serex__metrics_get(&p->metrics);
    if ((watch & WATCH_HOOKS) || SEREX__PROBE_TASK_ACTIVE() ||
        (ms != NULL && serex__metrics_sample(ms)))
        r->t = serex__metrics_stamp(serex__metrics_now_or_mono(ms));
    else if (serex__obs_listening())
        r->t = SEREX__T_UNTIMED;
}

/* The identity the info hooks get. */
static void watch_info(struct pool *p, struct slot *s,
                       const struct serex__task_rec *r, int64_t start,
                       serex_task_info *info)
{
    info->executor = &p->base;
    info->fn = r->fn;
    info->arg = r->arg;
    info->id = r->stamp;
    info->submit_ns = serex__metrics_timed(r->t) ? serex__metrics_time_of(r->t)
                                                 : 0;
    info->start_ns = start;
    info->worker = s->index;
}

static void watch_hooks_begin(struct pool *p, const serex_task_info *info)
{
    if (p->on_task_start != NULL)
        p->on_task_start(p->hook_ctx);
    if (p->on_task_begin != NULL)
        p->on_task_begin(p->hook_ctx, info);
}

static void watch_hooks_end(struct pool *p, const serex_task_info *info)
{
    if (p->on_task_finish != NULL)
        p->on_task_finish(p->hook_ctx, info);
    if (p->on_task_end != NULL)
        p->on_task_end(p->hook_ctx);
}

/* A timed task's wait and run, in this worker's part. */
static void pool_watch_record(struct pool *p, struct slot *s, uint64_t wait,
                              uint64_t run)
{
    struct serex__metrics *ms = serex__metrics_get(&p->metrics);

    /* this worker's own part; the last part is shared by the workers of
     * slots made after metrics were enabled (pool_block.c, a resize) */
    if (ms != NULL)
        serex__meter_add(&ms->m[s->index < ms->n - 1 ? s->index : ms->n - 1],
                         s->index >= ms->n - 1, wait, run);
}

void serex__pool_watch_run(struct pool *p, struct slot *s,
                           const struct serex__task_rec *r)
{
    struct serex__metrics *ms = serex__metrics_get(&p->metrics);
    bool timed = serex__metrics_timed(r->t);
    int64_t start = timed ? serex__metrics_now_or_mono(ms) : 0;
    int64_t wait = timed ? (int64_t)serex__metrics_since(r->t, start) : -1;
    int64_t run = -1;
    serex_task_info info;

    bool told = serex__obs_told();

    watch_info(p, s, r, start, &info);
    if (told)
        serex__obs_begin(&p->base, r->fn, r->arg, r->stamp, wait);
    watch_hooks_begin(p, &info);
    r->fn(r->arg);
    watch_hooks_end(p, &info);
    if (timed) {
        run = (int64_t)serex__metrics_since(serex__metrics_stamp(start),
                                            serex__metrics_now_or_mono(ms));
        pool_watch_record(p, s, (uint64_t)wait, (uint64_t)run);
    }
    if (told)
        serex__obs_end(&p->base, r->fn, r->stamp, run);
}

/* --- serex_dump --- */

/*
 * Each worker: what it runs now (the fn; null between tasks), the tasks it
 * has run, and whether it is parked. Two dumps a while apart that show a
 * worker on the same fn with the same count: that task is stuck. relaxed
 * (all): a picture, each word a value it had recently.
 */
void serex__pool_describe(serex_executor *ex, struct serex__dump *d)
{
    struct pool *p = serex__container_of(ex, struct pool, base);

    /* relaxed (both): a picture */
    serex__dump_u64(d, "core_threads",
                    atomic_load_explicit(&p->want_core, memory_order_relaxed));
    serex__dump_u64(d, "max_threads",
                    atomic_load_explicit(&p->want_max, memory_order_relaxed));
    serex__dump_u64(d, "capacity", p->capacity);
    serex__dump_array_begin(d, "workers");
    for (unsigned i = 0; i < serex__pool_nslots(p); i++) {
        struct slot *s = serex__pool_slot(p, i);
        uint64_t parks = atomic_load_explicit(&s->parks, memory_order_relaxed);
        uint64_t unparks = atomic_load_explicit(&s->unparks,
                                                memory_order_relaxed);

        serex__dump_object_begin(d, NULL);
        serex__dump_u64(d, "index", i);
        serex__dump_fn(d, "running",
                       atomic_load_explicit(&s->running, memory_order_relaxed));
        serex__dump_u64(d, "done",
                        atomic_load_explicit(&s->done, memory_order_relaxed));
        serex__dump_bool(d, "parked", parks != unparks);
        serex__dump_object_end(d);
    }
    serex__dump_array_end(d);
}

/* --- metrics.h --- */

int serex__pool_metrics_enable(serex_executor *ex,
                               const serex_metrics_config *cfg)
{
    struct pool *p = serex__container_of(ex, struct pool, base);
    /* a part per slot made, and one shared by any made later */
    int rc = serex__metrics_enable(&p->metrics, cfg, serex__pool_nslots(p) + 1);

    /* relaxed: submitters then read the set itself with acquire */
    if (rc == SEREX_OK)
        atomic_fetch_or_explicit(&p->watch, WATCH_METRICS,
                                 memory_order_relaxed);
    return rc;
}

void serex__pool_metrics(serex_executor *ex, serex_metrics *out)
{
    struct pool *p = serex__container_of(ex, struct pool, base);

    serex__metrics_read_slot(&p->metrics, out);
    for (unsigned i = 0; i < serex__pool_nslots(p); i++) {
        struct slot *s = serex__pool_slot(p, i);

        /* relaxed (all): statistics */
        out->steals += atomic_load_explicit(&s->steals, memory_order_relaxed);
        out->overflows += atomic_load_explicit(&s->overflows,
                                               memory_order_relaxed);
        out->parks += atomic_load_explicit(&s->parks, memory_order_relaxed);
        out->unparks += atomic_load_explicit(&s->unparks, memory_order_relaxed);
    }
}

void serex__pool_metrics_free(struct pool *p)
{
    /* relaxed: the pool is being freed; no one records any more */
    serex__metrics_free(
        atomic_load_explicit(&p->metrics, memory_order_relaxed));
}
