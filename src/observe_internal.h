/* SPDX-License-Identifier: MIT */
/*
 * observe_internal.h - the points where serex's executors tell whoever
 * watches what happens: the flight recorder (trace.c) and the static
 * probes (probe_internal.h).
 *
 * What the busy path pays: one predictable branch to submit a task, and
 * one to run it. A submit looks at its executor's own `watch` word (or
 * metrics pointer), at serex__obs_flags (the recorder) and at the task
 * probes' semaphore (a tool attached: probe_internal.h), all words almost
 * never written, and goes on unless one is set. Else it marks the task
 * (the record's or node's `t`: its submit time, or 1 when untimed:
 * histogram_internal.h) and, when a listener wants the task's events (the
 * recorder, a tool), tells them the submit; the runner looks only at `t`
 * and, when it is set, runs the task through the slow path that times it
 * and fires its begin and end. So a task submitted before a listener came
 * has no events: a trace, or a tool's count, begins with the tasks
 * submitted after. The timers do the same with the timer probes'
 * semaphore. The serex__obs_* calls below fire the probe (a NOP while no
 * tool is attached) and record when the recorder records.
 *
 * An id names one task among those of one executor: the pool's stamp (its
 * submitting thread and that thread's count, or its index in a one-shard
 * pool), a node's address for serials, lanes and limiters, a timer's
 * record's address. The recorder pairs a submit with its begin by
 * (executor, id), which draws the flow from one thread to the other.
 */
#ifndef SEREX_OBSERVE_INTERNAL_H
#define SEREX_OBSERVE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common_internal.h"
#include "probe_internal.h"

/* serex__obs_flags: who listens to the whole process. */
#define SEREX__OBS_TRACE 1u /* the flight recorder records */

extern _Atomic unsigned serex__obs_flags;

/* Whether the recorder records. relaxed: a hint; an event missed while
 * it starts is one from before its start. */
static inline bool serex__obs_listening(void)
{
    return atomic_load_explicit(&serex__obs_flags, memory_order_relaxed) != 0;
}

/* Whether a task's begin and end have a listener: the recorder, or a tool
 * attached to the task probes (relaxed: as serex__obs_listening). */
static inline bool serex__obs_told(void)
{
    return (atomic_load_explicit(&serex__obs_flags, memory_order_relaxed) |
            SEREX__PROBE_TASK_ACTIVE()) != 0;
}

/* Whether the timer events have a listener: the recorder, or a tool
 * attached to a timer probe (relaxed: as serex__obs_listening). */
static inline bool serex__obs_timers_listening(void)
{
    return (atomic_load_explicit(&serex__obs_flags, memory_order_relaxed) |
            SEREX__PROBE_TIMER_ACTIVE()) != 0;
}

/* Event kinds, as the recorder stores them. */
enum serex__obs_kind {
    SEREX__OBS_SUBMIT = 1,  /* a task accepted: (ex, fn, id) */
    SEREX__OBS_BEGIN,       /* a task starts: (ex, fn, id, wait ns or -1) */
    SEREX__OBS_END,         /* it returned: (ex, fn, id, run ns) */
    SEREX__OBS_PARK,        /* a worker parks: (ex, worker) */
    SEREX__OBS_UNPARK,      /* it woke: (ex, worker) */
    SEREX__OBS_STEAL,       /* a worker stole: (ex, victim, n) */
    SEREX__OBS_TIMER_SET,   /* a timer scheduled: (sched, fn, id, delay) */
    SEREX__OBS_TIMER_FIRE,  /* its run started: (sched, fn, id, late ns) */
    SEREX__OBS_TIMER_CANCEL /* cancelled before it ran: (sched, id) */
};

/* The recorders: each goes to the flight recorder when it is on and to
 * its probe. Called on the executors' slow path, never under a lock that a
 * task could want. */
void serex__obs_submit(serex_executor *ex, serex_fn fn, uint64_t id);
void serex__obs_begin(serex_executor *ex, serex_fn fn, void *arg, uint64_t id,
                      int64_t wait_ns);
void serex__obs_end(serex_executor *ex, serex_fn fn, uint64_t id,
                    int64_t run_ns);
void serex__obs_park(serex_executor *ex, unsigned worker);
void serex__obs_unpark(serex_executor *ex, unsigned worker);
void serex__obs_steal(serex_executor *ex, unsigned victim, unsigned n);
void serex__obs_timer_set(serex_executor *sched, serex_fn fn, uint64_t id,
                          int64_t delay_ns);
void serex__obs_timer_fire(serex_executor *sched, serex_fn fn, uint64_t id,
                           int64_t late_ns);
void serex__obs_timer_cancel(serex_executor *sched, uint64_t id);

#endif /* SEREX_OBSERVE_INTERNAL_H */
