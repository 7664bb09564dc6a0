/* SPDX-License-Identifier: MIT */
/*
 * observe_internal.h - the points where serex's executors tell whoever
 * watches what happens: the flight recorder (trace.c) and the static
 * probes (probe_internal.h).
 *
 * What the busy path pays. The probes are NOPs until a tool attaches, so
 * the busy path fires them where it stands (SEREX__PROBE_* at the call
 * site), with the values it has in hand: no clock read for them (a task's
 * wait and run are -1 in its probes unless something timed it). The
 * recorder is a word, serex__obs_flags, that a submit looks at once (with
 * its executor's own `watch` word, in one predictable branch); a submit
 * that sees it marks its task (the record's or node's `t`, 1 when untimed:
 * histogram_internal.h) and the runner, which looks only at `t`, records
 * the task's slice. So a task submitted before the recorder starts has no
 * slice: a trace begins with the tasks submitted after its start.
 * The serex__obs_* calls below fire the probe and record; a site calls
 * either one of them (slow path) or the probe alone (busy path), never
 * both.
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

/* A task that runs unwatched: its two probes around it (NOPs unless a
 * tool attached). */
static inline void serex__obs_run_plain(serex_executor *ex, serex_fn fn,
                                        void *arg, uint64_t id)
{
    (void)ex, (void)id; /* the probes' only (none in some builds) */
    SEREX__PROBE_TASK_START(ex, fn, id, -1);
    fn(arg);
    SEREX__PROBE_TASK_DONE(ex, fn, id, -1);
}

/* A new id for a task of an executor that has none of its own: the
 * calling thread's number and its count (no shared counter). */
uint64_t serex__obs_id(void);

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
