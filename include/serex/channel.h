/* SPDX-License-Identifier: MIT */
/*
 * serex/channel.h - the channel: a bounded queue of pointers whose send and
 * receive never block a thread.
 *
 * Each send and each receive carries a continuation (a function, its
 * argument and the executor to run it on). When the operation cannot
 * complete at once (the channel is full, or empty), the continuation is
 * parked in the channel and the call returns; when it completes, the
 * continuation is posted to its executor. No thread is held while an
 * operation waits, so any number of senders and receivers can share a
 * small pool.
 */
#ifndef SEREX_CHANNEL_H
#define SEREX_CHANNEL_H

#include "executor.h" /* status codes, serex_fn, serex_executor, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct serex_channel serex_channel;

/*
 * serex_channel_create - a bounded channel of @capacity items (>= 1).
 *
 * Items are any non-NULL pointer (NULL is what a receiver gets from a
 * closed, empty channel). *@out is set on success, NULL on failure.
 * Returns:   SEREX_OK; SEREX_EINVAL if out is NULL or capacity is 0;
 *            SEREX_ENOMEM.
 * Ownership: the caller owns the channel: serex_channel_destroy it. The
 *            channel never owns the targets of its continuations, nor
 *            the items (what an item points to is the sender's, then the
 *            receiver's).
 * Threads:
 *            call                          | may overlap with
 *            ------------------------------+--------------------------------
 *            send / recv / close           | every call but destroy
 *            destroy                       | nothing
 */
SEREX_API int serex_channel_create(size_t capacity, serex_channel **out);

/*
 * serex_channel_send - send @item; on_sent(arg) is posted to @target once
 * the item is in the channel: at once if there is room or a receiver
 * waits, else when a receive makes room (parked senders are served in
 * FIFO order).
 *
 * A continuation whose target refuses it runs at once on the thread that
 * completed the operation (this one, inside send, or the one inside recv
 * or close); since 0.2.0 one that its target takes back later
 * (shutdown_now, a destroy) runs at once on the thread that took it back.
 * Either way it is never lost, and neither is its item (promise 1,
 * docs/contract.md).
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL ch, item, target or on_sent;
 *            SEREX_EREJECTED once closed; SEREX_ENOMEM. On error nothing
 *            changed and on_sent will not run.
 * Ownership: on SEREX_OK, @item passes to the channel and then to exactly
 *            one receiver; @arg passes to on_sent.
 * Threads:   any thread, any number at once, a task included; never blocks
 *            (a short lock). Continuations may run on another thread
 *            before this call returns.
 */
SEREX_API int serex_channel_send(serex_channel *ch, void *item,
                                 serex_executor *target, serex_fn on_sent,
                                 void *arg);

/*
 * serex_channel_recv - receive the next item: on_item(item, arg) is posted
 * to @target with it, at once if one is there, else when a send arrives
 * (parked receivers are served in FIFO order). Each item is delivered
 * exactly once. After close, once the buffered items and those of parked
 * senders are all delivered, receivers get item NULL.
 *
 * A continuation whose target refuses it, or takes it back, runs as
 * serex_channel_send says.
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL ch, target or on_item;
 *            SEREX_ENOMEM. On error nothing changed and on_item will not
 *            run.
 * Ownership: on SEREX_OK, @arg passes to on_item, which also receives the
 *            item.
 * Threads:   any thread, any number at once, a task included; never blocks
 *            (a short lock). Continuations may run on another thread
 *            before this call returns.
 */
SEREX_API int serex_channel_recv(serex_channel *ch, serex_executor *target,
                                 void (*on_item)(void *item, void *arg),
                                 void *arg);

/*
 * serex_channel_close - refuse new sends (SEREX_EREJECTED). Buffered items
 * and items of senders already parked are still delivered; once empty,
 * every parked and later receiver gets NULL. Idempotent; NULL is ignored.
 * Threads:   any thread, a task included; never blocks. It may post (or,
 *            refused, run) the continuations of parked receivers.
 */
SEREX_API void serex_channel_close(serex_channel *ch);

/*
 * serex_channel_destroy - free the channel. Meant after close and drain;
 * continuations still parked then are dropped (they never run, and what
 * their arg or item owned is not freed by serex). NULL is ignored.
 * Ownership: @ch is gone on return.
 * Threads:   any thread, once no other call may run on @ch.
 */
SEREX_API void serex_channel_destroy(serex_channel *ch);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_CHANNEL_H */
