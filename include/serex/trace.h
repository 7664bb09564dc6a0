/* SPDX-License-Identifier: MIT */
/*
 * serex/trace.h - the flight recorder: what every thread did, task by
 * task, written as Chrome Trace Event JSON that Perfetto
 * (ui.perfetto.dev) and chrome://tracing open. docs/trace.md is the
 * guide: how to record, what the file holds, how to plot it.
 *
 * While it records, each thread that serex runs a task on, or that
 * submits one, writes fixed-size events into a ring of its own: a task's
 * submit, begin and end, a worker's park and unpark, a steal, a timer's
 * set, fire and cancel. Nothing is allocated and nothing waits while it
 * records; a full ring overwrites its oldest events (the newest win), and
 * a thread beyond max_threads has its events dropped and counted. Written
 * out, each thread is a track, each task a slice named by its executor
 * and function, an arrow joins a submit to the task's start on the thread
 * that ran it, and parks, wake-ups, steals and timers are instants.
 *
 * The recorder is one per process: start, stop, write it out, start again
 * (which frees the previous trace) or discard it.
 *
 *   serex_trace_start(NULL);
 *   ... the work to look at ...
 *   serex_trace_stop();
 *   serex_trace_write(f);       then open the file in ui.perfetto.dev
 *   serex_trace_discard();
 */
#ifndef SEREX_TRACE_H
#define SEREX_TRACE_H

#include <stddef.h> /* size_t */
#include <stdio.h>  /* FILE */

#include "executor.h" /* SEREX_API, statuses */

#ifdef __cplusplus
extern "C" {
#endif

/* The most threads a trace can give a ring to (max_threads). */
#define SEREX_TRACE_MAX_THREADS 1024u
/* The most events one thread's ring can hold (events_per_thread). */
#define SEREX_TRACE_MAX_EVENTS (1ul << 24)

typedef struct serex_trace_config {
    /* The events each thread's ring keeps, the newest; rounded up to a
     * power of two. 0: 16384. At most SEREX_TRACE_MAX_EVENTS. An event
     * is 64 bytes (on 64-bit platforms). */
    size_t events_per_thread;
    /* The threads that get a ring, in the order of their first event;
     * the events of any further thread are dropped and counted. 0: 64.
     * At most SEREX_TRACE_MAX_THREADS. */
    unsigned max_threads;
} serex_trace_config;

/*
 * serex_trace_start - start recording, into a new trace: the rings of
 * max_threads threads, allocated now (events_per_thread x max_threads x
 * 64 bytes of address space, 64 MiB with the defaults; the memory of a
 * ring is touched only once a thread records into it, so on systems that
 * commit pages lazily (Linux, macOS, the BSDs) only the rings used cost
 * memory). A stopped trace not yet discarded is freed first.
 * Returns:   SEREX_OK; SEREX_EINVAL for a config above the limits;
 *            SEREX_EREJECTED if the recorder is already recording;
 *            SEREX_ENOMEM: not recording, and the previous trace (if any)
 *            is still there to write.
 * Ownership: @cfg is copied (NULL: the defaults). The trace is the
 *            recorder's until serex_trace_discard or the next start.
 * Threads:   any thread. The control calls (start, stop, write, discard)
 *            may be called from any threads at once: they take turns.
 *            Events that tasks and workers record while start runs are
 *            recorded or not, never half.
 */
SEREX_API int serex_trace_start(const serex_trace_config *cfg);

/*
 * serex_trace_stop - stop recording. When it returns, no thread writes
 * into the trace any more: an event being written as stop is called is
 * either finished and kept, or not recorded. Waits for those being
 * written (a few instructions each; longer only if their thread was
 * preempted in the middle).
 * Returns:   SEREX_OK; SEREX_EINVAL if the recorder was not recording.
 * Threads:   any thread, from a task too.
 */
SEREX_API int serex_trace_stop(void);

/*
 * serex_trace_write - write the stopped trace to @out as one JSON
 * document in the Chrome Trace Event format:
 *   {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}
 * ts and dur in microseconds from the start of the recording, with a
 * fractional part (nanoseconds); otherData holds the counts (events
 * kept, overwritten and dropped, threads dropped) and the clock used.
 * docs/trace.md says what each event holds. The trace stays: it may be
 * written again until discarded or replaced.
 * Returns:   SEREX_OK; SEREX_EINVAL if @out is NULL or there is no
 *            stopped trace (nothing written), or if writing to @out
 *            failed (the output stops there, unfinished); SEREX_EREJECTED
 *            while recording (stop first); SEREX_ENOMEM if the tables
 *            that pair submits with tasks could not be allocated (nothing
 *            written).
 * Ownership: @out stays the caller's; flushed (fflush), never closed.
 * Threads:   any thread. Blocks while writing, and the other control
 *            calls wait for it; recording threads never do.
 */
SEREX_API int serex_trace_write(FILE *out);

/*
 * serex_trace_discard - free the stopped trace. Does nothing while
 * recording (stop first) or when there is none.
 * Threads:   any thread.
 */
SEREX_API void serex_trace_discard(void);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_TRACE_H */
