/* SPDX-License-Identifier: MIT */
/*
 * observe.c - where an executor's events go: the flight recorder, when it
 * records, and the static probes (observe_internal.h). Every call here is
 * on a slow path the executor took because a task was watched (its mark)
 * or a listener was there, or because the event is rare (a park, a
 * steal). Each fires its probe (a NOP while no tool is attached) and
 * records when the recorder records.
 */
#include "observe_internal.h"
#include "trace_internal.h"

_Atomic unsigned serex__obs_flags;

void serex__obs_submit(serex_executor *ex, serex_fn fn, uint64_t id)
{
    SEREX__PROBE_TASK_ENQUEUED(ex, fn, id);
    if (serex__obs_listening())
        serex__trace_record(SEREX__OBS_SUBMIT, ex, fn, id, 0, 0);
}

void serex__obs_begin(serex_executor *ex, serex_fn fn, void *arg, uint64_t id,
                      int64_t wait_ns)
{
    SEREX__PROBE_TASK_START(ex, fn, id, wait_ns);
    if (serex__obs_listening())
        serex__trace_record(SEREX__OBS_BEGIN, ex, fn, id, wait_ns,
                            (int64_t)(intptr_t)arg);
}

void serex__obs_end(serex_executor *ex, serex_fn fn, uint64_t id,
                    int64_t run_ns)
{
    SEREX__PROBE_TASK_DONE(ex, fn, id, run_ns);
    if (serex__obs_listening())
        serex__trace_record(SEREX__OBS_END, ex, fn, id, run_ns, 0);
}

void serex__obs_park(serex_executor *ex, unsigned worker)
{
    SEREX__PROBE_WORKER_PARK(ex, worker);
    if (serex__obs_listening())
        serex__trace_record(SEREX__OBS_PARK, ex, NULL, 0, worker, 0);
}

void serex__obs_unpark(serex_executor *ex, unsigned worker)
{
    SEREX__PROBE_WORKER_UNPARK(ex, worker);
    if (serex__obs_listening())
        serex__trace_record(SEREX__OBS_UNPARK, ex, NULL, 0, worker, 0);
}

void serex__obs_steal(serex_executor *ex, unsigned victim, unsigned n)
{
    SEREX__PROBE_STEAL(ex, victim, n);
    if (serex__obs_listening())
        serex__trace_record(SEREX__OBS_STEAL, ex, NULL, 0, victim, n);
}

void serex__obs_timer_set(serex_executor *sched, serex_fn fn, uint64_t id,
                          int64_t delay_ns)
{
    SEREX__PROBE_TIMER_SCHEDULE(sched, fn, id, delay_ns);
    if (serex__obs_listening())
        serex__trace_record(SEREX__OBS_TIMER_SET, sched, fn, id, delay_ns, 0);
}

void serex__obs_timer_fire(serex_executor *sched, serex_fn fn, uint64_t id,
                           int64_t late_ns)
{
    SEREX__PROBE_TIMER_FIRE(sched, fn, id, late_ns);
    if (serex__obs_listening())
        serex__trace_record(SEREX__OBS_TIMER_FIRE, sched, fn, id, late_ns, 0);
}

void serex__obs_timer_cancel(serex_executor *sched, uint64_t id)
{
    SEREX__PROBE_TIMER_CANCEL(sched, id);
    if (serex__obs_listening())
        serex__trace_record(SEREX__OBS_TIMER_CANCEL, sched, NULL, id, 0, 0);
}
