/* SPDX-License-Identifier: MIT */
/*
 * probe_internal.h - serex's static probes (USDT): the one file that may
 * include <sys/sdt.h>. The executors fire them through observe_internal.h
 * (its serex__obs_* calls, or these macros where a busy path stands).
 *
 * Provider serex; a tool sees each as usdt:<libserex or the program>:
 * serex:<name> (docs/probes.md lists them with their arguments). Each probe
 * is one NOP instruction and an entry in the .note.stapsdt section that
 * says where its arguments are (registers, memory): a tool that attaches
 * turns the NOP into a trap. While nobody listens a probe costs the NOP
 * and getting its arguments where the note says, nothing more.
 *
 * Every probe has a USDT semaphore: a 16-bit counter in the .probes
 * section that a tool increments while it is attached to that probe
 * (bpftrace, perf, SystemTap: through the kernel's uprobe reference
 * counter, or by writing /proc/PID/mem). The three per-task probes
 * (task__enqueued, task__start, task__done) share one (probe.c defines
 * their names as aliases of serex_task_semaphore), and the three timer
 * probes another: SEREX__PROBE_TASK_ACTIVE() and SEREX__PROBE_TIMER_ACTIVE()
 * are one load each, which an executor's submit folds into the one branch
 * it takes anyway, to time its tasks (a task's wait and run in
 * task__start and task__done, a run's lateness in timer__fire) only while
 * a tool listens. The others' semaphores are there only because
 * <sys/sdt.h> gives every probe of a file one or none; nothing reads them.
 *
 * Built with SEREX_HAVE_USDT (cmake/SerexProbes.cmake: option SEREX_USDT,
 * on by default on Linux when <sys/sdt.h> is there). Without it every
 * probe is ((void)0), the *_ACTIVE() macros are 0u, and no note,
 * semaphore or NOP is in the library.
 *
 * Arguments are 64-bit on 64-bit targets: pointers (executor, fn) as
 * uintptr_t, ids as uint64_t, times as int64_t nanoseconds, worker
 * indexes and counts as unsigned (32-bit).
 */
#ifndef SEREX_PROBE_INTERNAL_H
#define SEREX_PROBE_INTERNAL_H

#ifdef SEREX_HAVE_USDT

#  include <stdint.h> /* uintptr_t, uint64_t, int64_t: the probes' arguments */

/* Every probe in this file notes its semaphore's address (dtrace -h). */
#  define _SDT_HAS_SEMAPHORES 1
#  include <sys/sdt.h> /* STAP_PROBEn */

/* Hidden: one library's semaphores, reached PC-relative from its code. */
#  define SEREX__PROBE_SEMAPHORE(name)                      \
    extern volatile unsigned short serex_##name##_semaphore \
        __attribute__((section(".probes"), visibility("hidden")))

SEREX__PROBE_SEMAPHORE(task);  /* the three task probes' (probe.c) */
SEREX__PROBE_SEMAPHORE(timer); /* the three timer probes' */
SEREX__PROBE_SEMAPHORE(task__enqueued);
SEREX__PROBE_SEMAPHORE(task__start);
SEREX__PROBE_SEMAPHORE(task__done);
SEREX__PROBE_SEMAPHORE(worker__park);
SEREX__PROBE_SEMAPHORE(worker__unpark);
SEREX__PROBE_SEMAPHORE(steal);
SEREX__PROBE_SEMAPHORE(timer__schedule);
SEREX__PROBE_SEMAPHORE(timer__fire);
SEREX__PROBE_SEMAPHORE(timer__cancel);

/* Nonzero while a tool is attached to a per-task probe. Three loads of
 * words only tools write (volatile: a tool attaches at any moment; never
 * cached across a worker's loop). */
#  define SEREX__PROBE_TASK_ACTIVE() ((unsigned)serex_task_semaphore)

/* Nonzero while a tool is attached to a timer probe. */
#  define SEREX__PROBE_TIMER_ACTIVE() ((unsigned)serex_timer_semaphore)

/* The probes fire from these functions rather than from macros at the
 * call sites: <sys/sdt.h> calls a variadic macro of its own with no
 * variadic argument, which -Wpedantic reports where the expansion is
 * (clang always, gcc when the header is not in a system directory); here
 * it is in one place, and silenced there. Both compilers read the GCC
 * pragmas, but gcc before 13 does not apply them to the preprocessor's
 * warnings: for it the rest of this file is a system header. */
#  pragma GCC diagnostic push
#  pragma GCC diagnostic ignored "-Wpedantic"
#  if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13 && \
      __INCLUDE_LEVEL__ > 0 /* not pasted into the drop-in's serex.c */
#    pragma GCC system_header
#  endif

/* (executor, fn, id) */
static inline void serex__probe_task_enqueued(uintptr_t ex, uintptr_t fn,
                                              uint64_t id)
{
    STAP_PROBE3(serex, task__enqueued, ex, fn, id);
}

/* (executor, fn, id, wait ns: enqueued to start; -1 if not measured) */
static inline void serex__probe_task_start(uintptr_t ex, uintptr_t fn,
                                           uint64_t id, int64_t wait_ns)
{
    STAP_PROBE4(serex, task__start, ex, fn, id, wait_ns);
}

/* (executor, fn, id, run ns; -1 if not measured) */
static inline void serex__probe_task_done(uintptr_t ex, uintptr_t fn,
                                          uint64_t id, int64_t run_ns)
{
    STAP_PROBE4(serex, task__done, ex, fn, id, run_ns);
}

/* (pool, worker index) */
static inline void serex__probe_worker_park(uintptr_t ex, unsigned worker)
{
    STAP_PROBE2(serex, worker__park, ex, worker);
}

/* (pool, worker index) */
static inline void serex__probe_worker_unpark(uintptr_t ex, unsigned worker)
{
    STAP_PROBE2(serex, worker__unpark, ex, worker);
}

/* (pool, victim worker index, tasks taken) */
static inline void serex__probe_steal(uintptr_t ex, unsigned victim, unsigned n)
{
    STAP_PROBE3(serex, steal, ex, victim, n);
}

/* (scheduler's executor, fn, timer id, delay ns) */
static inline void serex__probe_timer_schedule(uintptr_t sched, uintptr_t fn,
                                               uint64_t id, int64_t delay_ns)
{
    STAP_PROBE4(serex, timer__schedule, sched, fn, id, delay_ns);
}

/* (scheduler's executor, fn, timer id, late ns: start minus due time;
 * -1 if not measured) */
static inline void serex__probe_timer_fire(uintptr_t sched, uintptr_t fn,
                                           uint64_t id, int64_t late_ns)
{
    STAP_PROBE4(serex, timer__fire, sched, fn, id, late_ns);
}

/* (scheduler's executor, timer id) */
static inline void serex__probe_timer_cancel(uintptr_t sched, uint64_t id)
{
    STAP_PROBE2(serex, timer__cancel, sched, id);
}

#  pragma GCC diagnostic pop

/* Pointers, function pointers included, go as integers: an integer is
 * what a tool reads, and ISO C converts a function pointer to one. */
#  define SEREX__PROBE_P(p) ((uintptr_t)(p))

#  define SEREX__PROBE_TASK_ENQUEUED(ex, fn, id)                       \
    serex__probe_task_enqueued(SEREX__PROBE_P(ex), SEREX__PROBE_P(fn), \
                               (uint64_t)(id))
#  define SEREX__PROBE_TASK_START(ex, fn, id, wait_ns)              \
    serex__probe_task_start(SEREX__PROBE_P(ex), SEREX__PROBE_P(fn), \
                            (uint64_t)(id), (int64_t)(wait_ns))
#  define SEREX__PROBE_TASK_DONE(ex, fn, id, run_ns)               \
    serex__probe_task_done(SEREX__PROBE_P(ex), SEREX__PROBE_P(fn), \
                           (uint64_t)(id), (int64_t)(run_ns))
#  define SEREX__PROBE_WORKER_PARK(ex, worker) \
    serex__probe_worker_park(SEREX__PROBE_P(ex), (unsigned)(worker))
#  define SEREX__PROBE_WORKER_UNPARK(ex, worker) \
    serex__probe_worker_unpark(SEREX__PROBE_P(ex), (unsigned)(worker))
#  define SEREX__PROBE_STEAL(ex, victim, n) \
    serex__probe_steal(SEREX__PROBE_P(ex), (unsigned)(victim), (unsigned)(n))
#  define SEREX__PROBE_TIMER_SCHEDULE(sched, fn, id, delay_ns)             \
    serex__probe_timer_schedule(SEREX__PROBE_P(sched), SEREX__PROBE_P(fn), \
                                (uint64_t)(id), (int64_t)(delay_ns))
#  define SEREX__PROBE_TIMER_FIRE(sched, fn, id, late_ns)              \
    serex__probe_timer_fire(SEREX__PROBE_P(sched), SEREX__PROBE_P(fn), \
                            (uint64_t)(id), (int64_t)(late_ns))
#  define SEREX__PROBE_TIMER_CANCEL(sched, id) \
    serex__probe_timer_cancel(SEREX__PROBE_P(sched), (uint64_t)(id))

#else /* no probes */

#  define SEREX__PROBE_TASK_ACTIVE() 0u
#  define SEREX__PROBE_TIMER_ACTIVE() 0u
#  define SEREX__PROBE_TASK_ENQUEUED(ex, fn, id) ((void)0)
#  define SEREX__PROBE_TASK_START(ex, fn, id, wait_ns) ((void)0)
#  define SEREX__PROBE_TASK_DONE(ex, fn, id, run_ns) ((void)0)
#  define SEREX__PROBE_WORKER_PARK(ex, worker) ((void)0)
#  define SEREX__PROBE_WORKER_UNPARK(ex, worker) ((void)0)
#  define SEREX__PROBE_STEAL(ex, victim, n) ((void)0)
#  define SEREX__PROBE_TIMER_SCHEDULE(sched, fn, id, delay_ns) ((void)0)
#  define SEREX__PROBE_TIMER_FIRE(sched, fn, id, late_ns) ((void)0)
#  define SEREX__PROBE_TIMER_CANCEL(sched, id) ((void)0)

#endif /* SEREX_HAVE_USDT */

#endif /* SEREX_PROBE_INTERNAL_H */
