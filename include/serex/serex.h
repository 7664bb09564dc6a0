/* SPDX-License-Identifier: MIT */
/*
 * serex/serex.h - the one header users include.
 *
 * serex is an embeddable C11 library of serializing executors. See
 * executor.h for the vtable, and docs/contract.md for the numbered
 * promises every executor keeps. Each header below may also be included
 * on its own (sync.h, which older code includes, is event.h, gate.h and
 * channel.h together).
 */
#ifndef SEREX_SEREX_H
#define SEREX_SEREX_H

#include "version.h"   /* SEREX_VERSION_*, serex_version() */
#include "executor.h"  /* statuses, serex_fn, the vtable */
#include "pool.h"      /* the thread pool */
#include "serial.h"    /* one task at a time, in order, on any executor */
#include "striped.h"   /* per-key order on a shared executor */
#include "future.h"    /* results, waiting, cancellation */
#include "event.h"     /* the event: a wake-up never lost (it blocks) */
#include "latch.h"     /* the latch: counts down once, then open */
#include "cancel.h"    /* the cancellation token */
#include "gate.h"      /* the gate: tasks parked until it opens */
#include "channel.h"   /* the channel: send and receive park, never block */
#include "manual.h"    /* the manual executor, for deterministic tests */
#include "scheduler.h" /* timers onto any executor */
#include "group.h"     /* task groups: wait or be told when all are done */
#include "limiter.h"   /* at most N tasks at once on any executor */
#include "semaphore.h" /* asynchronous permits: bound operations in flight */
#include "metrics.h"   /* histograms of waits and runs, per executor */
#include "trace.h"     /* the flight recorder: Chrome trace JSON */
#include "dump.h"      /* every live object, as JSON */

#endif /* SEREX_SEREX_H */
