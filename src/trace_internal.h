/* SPDX-License-Identifier: MIT */
/*
 * trace_internal.h - the flight recorder's entry for observe.c; the
 * recorder itself and its protocol are trace.c's.
 */
#ifndef SEREX_TRACE_INTERNAL_H
#define SEREX_TRACE_INTERNAL_H

#include <stdint.h>

#include "common_internal.h"

/*
 * Records one event of @kind (enum serex__obs_kind) in the calling
 * thread's ring, time-stamped now: @obj the executor (or scheduler), @fn
 * the task's function or NULL, @id the task's id, @a and @b the kind's
 * numbers (observe_internal.h says which). Never allocates, never blocks;
 * does nothing unless the recorder is on (a call after stop records
 * nothing: it may come, since observe.c's look at the flag is a hint).
 * @obj must be a live executor (its kind is read now) or NULL. Any thread.
 */
void serex__trace_record(unsigned kind, const void *obj, serex_fn fn,
                         uint64_t id, int64_t a, int64_t b);

#endif /* SEREX_TRACE_INTERNAL_H */
