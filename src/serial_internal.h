/* SPDX-License-Identifier: MIT */
/*
 * serial_internal.h - what other components need of serial.c.
 */
#ifndef SEREX_SERIAL_INTERNAL_H
#define SEREX_SERIAL_INTERNAL_H

#include "serex/serex.h"

/* The target of a serial executor; NULL if @ex is not one. */
serex_executor *serex__serial_target(serex_executor *ex);

/*
 * An executor dropped a task without running it (serex__hand_back with no
 * on_pending). If it is a serial's drain, the serial releases the drain's
 * reference; anything else is ignored.
 */
void serex__serial_drain_dropped(serex_fn fn, void *arg);

#endif /* SEREX_SERIAL_INTERNAL_H */
