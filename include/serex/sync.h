/* SPDX-License-Identifier: MIT */
/*
 * serex/sync.h - synchronisation that never blocks a task's thread: the gate
 * and the channel park continuations until they are unblocked; the event
 * never loses a wake-up.
 */
#ifndef SEREX_SYNC_H
#define SEREX_SYNC_H

#include "executor.h" /* status codes, serex_fn, serex_executor, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct serex_event serex_event;

/*
 * serex_event_create - an auto-reset event, initially not signalled.
 *
 * Returns:   SEREX_OK; SEREX_EINVAL if out is NULL; SEREX_ENOMEM.
 */
SEREX_API int serex_event_create(serex_event **out);

/*
 * serex_event_signal - set the event; wakes a waiter if there is one.
 *
 * A signal made before anyone waits is kept: the next wait returns at once.
 * Signals do not count: two signals before a wait release one wait.
 * NULL is ignored. Threads: any thread, a task included; never blocks.
 */
SEREX_API void serex_event_signal(serex_event *ev);

/*
 * serex_event_wait - wait for the event and reset it (auto-reset).
 *
 * Each signal releases exactly one wait. Spurious wake-ups are hidden.
 * Returns:   SEREX_OK; SEREX_ETIMEDOUT (0 polls); SEREX_EINVAL for NULL or a
 *            timeout below SEREX_FOREVER.
 * Threads:   any number of threads at once.
 */
SEREX_API int serex_event_wait(serex_event *ev, int64_t timeout_ns);

/*
 * serex_event_destroy - free the event. No thread may be waiting on it.
 * NULL is ignored.
 */
SEREX_API void serex_event_destroy(serex_event *ev);

/* --- gate --- */

typedef struct serex_gate serex_gate;

/*
 * serex_gate_create - a gate, open or closed.
 *
 * While closed, serex_gate_execute parks tasks (each with its own target
 * executor); serex_gate_open releases them to their targets in arrival
 * order; while open, serex_gate_execute forwards at once.
 * Returns:   SEREX_OK; SEREX_EINVAL if out is NULL; SEREX_ENOMEM.
 * Threads:   every gate call may run on any thread at once, but destroy.
 */
SEREX_API int serex_gate_create(bool open, serex_gate **out);

/*
 * serex_gate_execute - run fn(arg) on @target once the gate is open.
 *
 * Open: forwarded to @target now (its status is returned). Closed, or
 * still releasing: parked after every task parked before it; an execute
 * racing with open is never lost and never overtakes an earlier one.
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL g, target or fn; SEREX_ENOMEM;
 *            what @target said, when forwarded at once. Nothing is queued
 *            on error.
 */
SEREX_API int serex_gate_execute(serex_gate *g, serex_executor *target,
                                 serex_fn fn, void *arg);

/*
 * serex_gate_open - open the gate and release the parked tasks, in order.
 *
 * A task whose target refuses it is kept, parked, and comes back from
 * serex_gate_destroy (it no longer holds back later tasks). Opening an
 * open gate does nothing. NULL is ignored. Never blocks.
 */
SEREX_API void serex_gate_open(serex_gate *g);

/* serex_gate_close - close the gate: later tasks park. NULL is ignored. */
SEREX_API void serex_gate_close(serex_gate *g);

/*
 * serex_gate_destroy - free the gate, handing every parked task to
 * on_pending(fn, arg, ctx) in order (on_pending may be NULL: dropped).
 * Returns:   how many were parked. No other call may run on @g meanwhile.
 */
SEREX_API size_t serex_gate_destroy(serex_gate *g, serex_pending_fn on_pending,
                                    void *ctx);

/* --- channel --- */

typedef struct serex_channel serex_channel;

/*
 * serex_channel_create - a bounded channel of @capacity items (>= 1).
 *
 * Sends and receives never block a thread: each carries a continuation
 * (a function and its argument) that is posted to its target executor when
 * the operation completes. Items are any non-NULL pointer (NULL is what a
 * receiver gets from a closed, empty channel).
 * Returns:   SEREX_OK; SEREX_EINVAL if out is NULL or capacity is 0;
 *            SEREX_ENOMEM.
 * Threads:   send, recv and close may run on any thread at once; destroy
 *            with nothing else.
 */
SEREX_API int serex_channel_create(size_t capacity, serex_channel **out);

/*
 * serex_channel_send - send @item; on_sent(arg) runs on @target once it is
 * in the channel (at once if there is room or a receiver waits; else when
 * a receive makes room, senders served in FIFO order).
 * If posting a continuation to its target fails, it runs on the thread
 * that completed the operation instead: nothing is ever lost.
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL ch, item, target or on_sent;
 *            SEREX_EREJECTED once closed; SEREX_ENOMEM. On error nothing
 *            changed and on_sent will not run.
 */
SEREX_API int serex_channel_send(serex_channel *ch, void *item,
                                 serex_executor *target, serex_fn on_sent,
                                 void *arg);

/*
 * serex_channel_recv - receive the next item: on_item(item, arg) runs on
 * @target with it (at once if one is there; else when a send arrives,
 * receivers served in FIFO order). Each item is delivered exactly once.
 * After close, once the buffered items and those of parked senders are
 * all delivered, receivers get item NULL.
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL ch, target or on_item;
 *            SEREX_ENOMEM. On error nothing changed.
 */
SEREX_API int serex_channel_recv(serex_channel *ch, serex_executor *target,
                                 void (*on_item)(void *item, void *arg),
                                 void *arg);

/*
 * serex_channel_close - refuse new sends. Buffered items and items of
 * senders already parked are still delivered; once empty, every parked and
 * later receiver gets NULL. Idempotent; NULL is ignored.
 */
SEREX_API void serex_channel_close(serex_channel *ch);

/*
 * serex_channel_destroy - free the channel. Meant after close and drain;
 * continuations still parked then are dropped (they never run). NULL is
 * ignored.
 */
SEREX_API void serex_channel_destroy(serex_channel *ch);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_SYNC_H */
