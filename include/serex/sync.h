/* SPDX-License-Identifier: MIT */
/*
 * serex/sync.h - an umbrella for the three synchronisation objects, kept so
 * that code which includes it goes on compiling. It declares nothing
 * itself: each object has its own header, which may be included alone.
 *
 *   event.h    the event: serex_event_wait blocks the calling thread until
 *              a signal; a signal sent before the wait is never lost.
 *   gate.h     the gate: parks tasks (continuations) while closed and
 *              posts them to their executors when it opens.
 *   channel.h  the channel: a bounded queue whose send and receive park
 *              continuations instead of blocking a thread.
 */
#ifndef SEREX_SYNC_H
#define SEREX_SYNC_H

#include "event.h"   /* serex_event */
#include "gate.h"    /* serex_gate */
#include "channel.h" /* serex_channel */

#endif /* SEREX_SYNC_H */
