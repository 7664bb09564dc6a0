/* SPDX-License-Identifier: MIT */
/*
 * striped_internal.h - what other components need of striped.c.
 */
#ifndef SEREX_STRIPED_INTERNAL_H
#define SEREX_STRIPED_INTERNAL_H

#include "serex/serex.h"

/* The target of a striped executor's face; NULL if @ex is not one. */
serex_executor *serex__striped_target(serex_executor *ex);

/* An executor dropped a task unrun: a lane drain or a keyless task gives
 * back its reference (see serex__serial_drain_dropped). */
void serex__striped_task_dropped(serex_fn fn, void *arg);

#endif /* SEREX_STRIPED_INTERNAL_H */
