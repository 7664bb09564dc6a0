/* SPDX-License-Identifier: MIT */
/*
 * scheduler_internal.h - what other components need of the scheduler: the
 * task it hands to targets, so that a run a target takes back (shutdown_now)
 * or drops (destroy) ends its timer instead of leaking it.
 */
#ifndef SEREX_SCHEDULER_INTERNAL_H
#define SEREX_SCHEDULER_INTERNAL_H

#include "serex/serex.h"

/* The task a timer's run is handed to its target as (arg: the timer). */
void serex__timer_task(void *arg);

/* A run of serex__timer_task taken back or dropped by its target: the
 * timer ends; a one-shot's own task goes to @on_pending (NULL: dropped,
 * a future's task cancelled). */
void serex__timer_taken_back(void *arg, serex_pending_fn on_pending,
                             void *ctx);

#endif /* SEREX_SCHEDULER_INTERNAL_H */
