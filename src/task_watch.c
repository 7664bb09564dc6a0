/* SPDX-License-Identifier: MIT */
/*
 * task_watch.c - timing and events for task nodes (task_watch_internal.h
 * says when each runs).
 */
#include "task_watch_internal.h"

void serex__task_watch_submit(serex_executor *ex,
                              struct serex__metrics *_Atomic *slot,
                              struct serex__task *t)
{
    struct serex__metrics *ms = serex__metrics_get(slot);

    if (SEREX__PROBE_TASK_ACTIVE() || (ms != NULL && serex__metrics_sample(ms)))
        t->t = serex__metrics_stamp(serex__metrics_now_or_mono(ms));
    else if (serex__obs_listening())
        t->t = SEREX__T_UNTIMED;
    if (t->t != 0 && serex__obs_told()) /* a listener wants its events */
        serex__obs_submit(ex, t->fn, (uint64_t)(uintptr_t)t);
}

/* A serial's one part, or the calling thread's stripe of a shared set. */
static void task_watch_record(struct serex__metrics *ms, bool shared,
                              uint64_t wait, uint64_t run)
{
    serex__meter_add(shared ? serex__metrics_stripe(ms) : &ms->m[0], shared,
                     wait, run);
}

void serex__task_watch_run(serex_executor *ex,
                           struct serex__metrics *_Atomic *slot, bool shared,
                           const struct serex__task_run *r)
{
    struct serex__metrics *ms = serex__metrics_get(slot);
    bool timed = serex__metrics_timed(r->t);
    int64_t start = timed ? serex__metrics_now_or_mono(ms) : 0;
    int64_t wait = timed ? (int64_t)serex__metrics_since(r->t, start) : -1;
    int64_t run = -1;

    bool told = serex__obs_told();

    if (told)
        serex__obs_begin(ex, r->fn, r->arg, r->id, wait);
    r->fn(r->arg);
    if (timed) {
        run = (int64_t)serex__metrics_since(serex__metrics_stamp(start),
                                            serex__metrics_now_or_mono(ms));
        if (ms != NULL)
            task_watch_record(ms, shared, (uint64_t)wait, (uint64_t)run);
    }
    if (told)
        serex__obs_end(ex, r->fn, r->id, run);
}
