/* SPDX-License-Identifier: MIT */
/*
 * probe_internal.h - serex's static probes (USDT). STUB: to be written.
 */
#ifndef SEREX_PROBE_INTERNAL_H
#define SEREX_PROBE_INTERNAL_H

#define SEREX__PROBE_TASK_ACTIVE() 0u
#define SEREX__PROBE_TASK_ENQUEUED(ex, fn, id) ((void)0)
#define SEREX__PROBE_TASK_START(ex, fn, id, wait_ns) ((void)0)
#define SEREX__PROBE_TASK_DONE(ex, fn, id, run_ns) ((void)0)
#define SEREX__PROBE_WORKER_PARK(ex, worker) ((void)0)
#define SEREX__PROBE_WORKER_UNPARK(ex, worker) ((void)0)
#define SEREX__PROBE_STEAL(ex, victim, n) ((void)0)
#define SEREX__PROBE_TIMER_SCHEDULE(sched, fn, id, delay_ns) ((void)0)
#define SEREX__PROBE_TIMER_FIRE(sched, fn, id, late_ns) ((void)0)
#define SEREX__PROBE_TIMER_CANCEL(sched, id) ((void)0)

#endif /* SEREX_PROBE_INTERNAL_H */
