/* SPDX-License-Identifier: MIT */
/*
 * serex/serex.h - the one header users include.
 *
 * serex is an embeddable C11 library of serializing executors. See
 * executor.h for the vtable and the promises every executor keeps.
 */
#ifndef SEREX_SEREX_H
#define SEREX_SEREX_H

#define SEREX_VERSION_MAJOR 0
#define SEREX_VERSION_MINOR 1
#define SEREX_VERSION_PATCH 0

#include "executor.h" /* statuses, serex_fn, the vtable */
#include "pool.h"     /* the thread pool */
#include "serial.h"   /* one task at a time, in order, on any executor */
#include "striped.h"  /* per-key order on a shared executor */
#include "future.h"   /* results, waiting, cancellation */
#include "sync.h"     /* the event */
#include "manual.h"   /* the manual executor, for deterministic tests */
#include "scheduler.h" /* timers onto any executor */

#endif /* SEREX_SEREX_H */
