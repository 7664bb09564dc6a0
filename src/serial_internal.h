/* SPDX-License-Identifier: MIT */
/*
 * serial_internal.h - what other components need of serial.c.
 */
#ifndef SEREX_SERIAL_INTERNAL_H
#define SEREX_SERIAL_INTERNAL_H

#include "serex/serex.h"

/* The target of a serial executor; NULL if @ex is not one. */
serex_executor *serex__serial_target(serex_executor *ex);

#endif /* SEREX_SERIAL_INTERNAL_H */
