/* SPDX-License-Identifier: MIT */
/*
 * serex/dump.h - every live serex object, written as JSON: for the "my
 * service is stuck" moment (docs/dump.md has the recipe and the fields).
 *
 * Pools, serials, striped executors, schedulers, limiters, groups, gates,
 * channels and manual executors put themselves on a process-wide list when
 * made and take themselves off when destroyed; serex_dump walks that list
 * and asks each object to describe itself: its kind, address and name,
 * an executor's counters (queued, completed, ...), what each pool worker
 * runs now, how many timers a scheduler holds, the continuations a gate
 * or a channel keeps parked.
 */
#ifndef SEREX_DUMP_H
#define SEREX_DUMP_H

#include <stdio.h> /* FILE */

#include "executor.h" /* SEREX_API, statuses */

#ifdef __cplusplus
extern "C" {
#endif

/* serex_dump flags. */
/* Name each function (a task's fn, a timer's) from the symbol table of
 * the program or library it is in (dladdr on Unix; nothing on Windows):
 * "symbol": "name" beside its address. Only exported (dynamic) symbols
 * have names: link the program with -rdynamic (CMake: ENABLE_EXPORTS) to
 * see its own; otherwise the symbol reads "module+0xoffset", which
 * addr2line -e module turns into a function and line. */
#define SEREX_DUMP_SYMBOLS 1u

/*
 * serex_dump - write every live serex object to @out as one JSON document:
 *   {"serex": {"version": "0.2.0", "time_ns": N, "objects": [
 *     {"kind": "pool", "address": "0x...", "name": "...", ...}, ...]}}
 * one object a line; docs/dump.md says what each kind writes.
 *
 * What "safe while everything runs" means: nothing stops. Each object is
 * read on its own, under its own lock taken briefly (as its stats are),
 * so the dump is a series of snapshots, one per object, not one instant
 * of the whole process; objects made during the dump may be missing,
 * objects destroyed during it are left out or listed as they were. The
 * process-wide list's lock is taken only to step from one object to the
 * next, never while writing to @out: a dump blocked on a full pipe holds
 * up nobody but its caller. A destroy that reaches an object the dump is
 * reading waits for that one object's description (microseconds), never
 * for the writing.
 * Returns:   SEREX_OK; SEREX_EINVAL if @out is NULL or @flags has a bit
 *            that is not a SEREX_DUMP_* flag (nothing written), or if
 *            writing to @out failed (the output stops there, unfinished);
 *            SEREX_ENOMEM if the memory to describe an object ran out:
 *            the document is still complete and valid, that object listed
 *            with "error": "out of memory" in place of its fields.
 * Ownership: @out stays the caller's; it is flushed (fflush) before the
 *            call returns, and never closed.
 * Threads:   any thread, any number at once, while other threads use,
 *            make and destroy serex objects; from a task too. Never from
 *            a signal handler (it takes locks and allocates): have the
 *            handler wake a thread that calls it (docs/dump.md shows a
 *            SIGUSR1 handler and a self-pipe). Blocks while writing.
 */
SEREX_API int serex_dump(FILE *out, unsigned flags);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_DUMP_H */
