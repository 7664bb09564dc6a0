/* SPDX-License-Identifier: MIT */
/*
 * observe.c - where an executor's events go: the flight recorder, when it
 * records, and the static probes (observe_internal.h). Every call here is
 * on a slow path the executor took because serex__obs_listening() said
 * someone listens, or because the event is rare (a park, a steal).
 */
#include "observe_internal.h"
#include "trace_internal.h"

_Atomic unsigned serex__obs_flags;

/* The calling thread's ids: its number in the top 24 bits, its count
 * below (2^40 ids a thread; a thread that wraps reuses old ids, which
 * only the recorder's flows could confuse, 2^40 events later). */
static SEREX__THREAD_LOCAL uint64_t obs_last;
static _Atomic uint64_t obs_threads;

uint64_t serex__obs_id(void)
{
    if (serex__unlikely(obs_last == 0)) {
        /* relaxed: a unique number is all we need */
        uint64_t n = atomic_fetch_add_explicit(&obs_threads, 1,
                                               memory_order_relaxed);

        obs_last = (n + 1) << 40;
    }
    return ++obs_last;
}

/* relaxed: a hint; the recorder's own flag decides inside */
static bool obs_tracing(void)
{
    return (atomic_load_explicit(&serex__obs_flags, memory_order_relaxed) &
            SEREX__OBS_TRACE) != 0;
}

void serex__obs_submit(serex_executor *ex, serex_fn fn, uint64_t id)
{
    SEREX__PROBE_TASK_ENQUEUED(ex, fn, id);
    if (obs_tracing())
        serex__trace_record(SEREX__OBS_SUBMIT, ex, fn, id, 0, 0);
}

void serex__obs_begin(serex_executor *ex, serex_fn fn, void *arg, uint64_t id,
                      int64_t wait_ns)
{
    SEREX__PROBE_TASK_START(ex, fn, id, wait_ns);
    if (obs_tracing())
        serex__trace_record(SEREX__OBS_BEGIN, ex, fn, id, wait_ns,
                            (int64_t)(intptr_t)arg);
}

void serex__obs_end(serex_executor *ex, serex_fn fn, uint64_t id,
                    int64_t run_ns)
{
    SEREX__PROBE_TASK_DONE(ex, fn, id, run_ns);
    if (obs_tracing())
        serex__trace_record(SEREX__OBS_END, ex, fn, id, run_ns, 0);
}

void serex__obs_park(serex_executor *ex, unsigned worker)
{
    SEREX__PROBE_WORKER_PARK(ex, worker);
    if (obs_tracing())
        serex__trace_record(SEREX__OBS_PARK, ex, NULL, 0, worker, 0);
}

void serex__obs_unpark(serex_executor *ex, unsigned worker)
{
    SEREX__PROBE_WORKER_UNPARK(ex, worker);
    if (obs_tracing())
        serex__trace_record(SEREX__OBS_UNPARK, ex, NULL, 0, worker, 0);
}

void serex__obs_steal(serex_executor *ex, unsigned victim, unsigned n)
{
    SEREX__PROBE_STEAL(ex, victim, n);
    if (obs_tracing())
        serex__trace_record(SEREX__OBS_STEAL, ex, NULL, 0, victim, n);
}

void serex__obs_timer_set(serex_executor *sched, serex_fn fn, uint64_t id,
                          int64_t delay_ns)
{
    SEREX__PROBE_TIMER_SCHEDULE(sched, fn, id, delay_ns);
    if (obs_tracing())
        serex__trace_record(SEREX__OBS_TIMER_SET, sched, fn, id, delay_ns, 0);
}

void serex__obs_timer_fire(serex_executor *sched, serex_fn fn, uint64_t id,
                           int64_t late_ns)
{
    SEREX__PROBE_TIMER_FIRE(sched, fn, id, late_ns);
    if (obs_tracing())
        serex__trace_record(SEREX__OBS_TIMER_FIRE, sched, fn, id, late_ns, 0);
}

void serex__obs_timer_cancel(serex_executor *sched, uint64_t id)
{
    SEREX__PROBE_TIMER_CANCEL(sched, id);
    if (obs_tracing())
        serex__trace_record(SEREX__OBS_TIMER_CANCEL, sched, NULL, id, 0, 0);
}
