/* SPDX-License-Identifier: MIT */
/*
 * channel.c - a bounded channel whose send and receive never block a
 * thread: each carries a continuation, posted to its target executor when
 * the operation completes.
 *
 * --- The state, and why each item is delivered exactly once ---
 * Under `mu`: a ring of buffered items, a FIFO of parked senders (each
 * with its item) and a FIFO of parked receivers, and `closed`. The
 * invariants: receivers park only while the buffer is empty and no sender
 * is parked; senders park only while the buffer is full. So:
 *   send: a parked receiver takes the item directly; else the buffer takes
 *         it if there is room; else the sender parks with it.
 *   recv: the buffer's oldest item is taken, and the oldest parked sender
 *         (if any) moves its item into the freed slot; else, closed, the
 *         receiver gets NULL; else it parks.
 *   close: refuses new sends; if nothing is buffered (hence no sender is
 *         parked), every parked receiver gets NULL now; else they are
 *         served by the items left, and later receivers get NULL once the
 *         buffer is empty.
 * Every item moves from one place to one other under `mu`, so it is
 * delivered once; both FIFOs and the ring keep arrival order.
 * Continuations are collected under `mu` and posted after it is released,
 * in order (a target's execute, or the continuation itself, may call back
 * into the channel). The record each operation needs (to park, or to post
 * its continuation) is allocated before `mu` is taken, so SEREX_ENOMEM
 * leaves the channel unchanged.
 *
 * --- A continuation its target will not run ---
 * A continuation is an internal operation (op_internal.h). If its target
 * refuses it, it runs on the thread that completed the operation; if the
 * target accepts it and later takes it back (shutdown_now) or drops it (a
 * manual executor's destroy), its hook runs it on the thread doing that.
 * Either way the item it carries reaches its receiver and the record is
 * freed: never lost, never leaked, and never handed to a user's
 * on_pending (promise 2a, docs/contract.md).
 */
#include "alloc_internal.h"
#include "common_internal.h"
#include "nodecache_internal.h"
#include "op_internal.h"
#include "registry_internal.h"
#include "thread_internal.h"

typedef void (*item_fn)(void *item, void *arg);

/* A sender's or receiver's continuation: parked, or on its way to run. */
struct waiter {
    struct serex__op op; /* posted to its target as this op */
    struct waiter *next;
    serex_executor *target;
    serex_fn sent;      /* a sender's; NULL for a receiver */
    item_fn got;        /* a receiver's; NULL for a sender */
    void *item;         /* a sender's item, or the item a receiver gets */
    void *arg;
};

_Static_assert(sizeof(struct waiter) <= 64, "a waiter fits class 64");

struct fifo {
    struct waiter *head, *tail;
};

struct serex_channel {
    serex__mutex mu;
    void **ring;        /* capacity slots, under mu */
    size_t capacity, first, count;
    struct fifo senders, receivers;
    bool closed;
    struct serex__reg reg; /* serex_dump's list */
};

static void fifo_push(struct fifo *f, struct waiter *w)
{
    w->next = NULL;
    if (f->tail != NULL)
        f->tail->next = w;
    else
        f->head = w;
    f->tail = w;
}

static struct waiter *fifo_pop(struct fifo *f)
{
    struct waiter *w = f->head;

    if (w != NULL) {
        f->head = w->next;
        if (f->head == NULL)
            f->tail = NULL;
    }
    return w;
}

static void ring_put(serex_channel *ch, void *item)
{
    ch->ring[(ch->first + ch->count) % ch->capacity] = item;
    ch->count++;
}

static void *ring_take(serex_channel *ch)
{
    void *item = ch->ring[ch->first];

    ch->first = (ch->first + 1) % ch->capacity;
    ch->count--;
    return item;
}

/* --- continuations --- */

static void waiter_run(struct serex__op *op)
{
    struct waiter w = *serex__container_of(op, struct waiter, op);

    serex__cache_free(SEREX__CLASS_64, op);
    if (w.sent != NULL)
        w.sent(w.arg);
    else
        w.got(w.item, w.arg);
}

/* Taken back or dropped by its target: run it here (see the essay). */
static void waiter_dropped(struct serex__op *op, serex_pending_fn on_pending,
                           void *ctx)
{
    (void)on_pending;
    (void)ctx;
    waiter_run(op);
}

static const struct serex__op_class waiter_class = {
    "channel continuation", waiter_run, waiter_dropped,
};

/* Posts collected continuations, in order; outside mu. */
static void post_all(struct fifo *posts)
{
    struct waiter *w;

    while ((w = fifo_pop(posts)) != NULL)
        if (serex__op_submit(w->target, &w->op) != SEREX_OK)
            waiter_run(&w->op); /* refused: run here rather than lose it */
}

static struct waiter *waiter_new(serex_executor *target, serex_fn sent,
                                 item_fn got, void *item, void *arg)
{
    struct waiter *w = serex__cache_alloc(SEREX__CLASS_64);

    if (w != NULL)
        *w = (struct waiter){{&waiter_class}, NULL, target, sent, got, item,
                             arg};
    return w;
}

/* --- the channel --- */

static size_t fifo_length(const struct fifo *f)
{
    size_t n = 0;

    for (const struct waiter *w = f->head; w != NULL; w = w->next)
        n++;
    return n;
}

/* serex_dump: fill, and parked continuations (under mu, briefly). */
static void channel_describe(struct serex__reg *r, struct serex__dump *d)
{
    serex_channel *ch = (serex_channel *)(uintptr_t)r->obj;

    serex__mutex_lock(&ch->mu);
    serex__dump_u64(d, "capacity", ch->capacity);
    serex__dump_u64(d, "items", ch->count);
    serex__dump_bool(d, "closed", ch->closed);
    serex__dump_u64(d, "parked_senders", fifo_length(&ch->senders));
    serex__dump_u64(d, "parked_receivers", fifo_length(&ch->receivers));
    serex__mutex_unlock(&ch->mu);
}

static const struct serex__reg_class channel_reg = {"channel",
                                                    channel_describe};

int serex_channel_create(size_t capacity, serex_channel **out)
{
    serex_channel *ch;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    if (capacity == 0)
        return SEREX_EINVAL;
    ch = serex__calloc(1, sizeof *ch);
    if (ch == NULL)
        return SEREX_ENOMEM;
    ch->ring = serex__calloc(capacity, sizeof *ch->ring);
    if (ch->ring == NULL || serex__mutex_init(&ch->mu) != SEREX_OK) {
        serex__free(ch->ring);
        serex__free(ch);
        return SEREX_ENOMEM;
    }
    ch->capacity = capacity;
    serex__reg_add(&ch->reg, &channel_reg, ch, NULL);
    *out = ch;
    return SEREX_OK;
}

int serex_channel_send(serex_channel *ch, void *item, serex_executor *target,
                       serex_fn on_sent, void *arg)
{
    struct fifo posts = {NULL, NULL};
    struct waiter *me, *r;

    if (ch == NULL || item == NULL || target == NULL || target->ops == NULL ||
        on_sent == NULL)
        return SEREX_EINVAL;
    me = waiter_new(target, on_sent, NULL, item, arg);
    if (me == NULL)
        return SEREX_ENOMEM;
    serex__mutex_lock(&ch->mu);
    if (ch->closed) {
        serex__mutex_unlock(&ch->mu);
        serex__cache_free(SEREX__CLASS_64, me);
        return SEREX_EREJECTED;
    }
    if ((r = fifo_pop(&ch->receivers)) != NULL) {
        r->item = item; /* straight to the oldest waiting receiver */
        fifo_push(&posts, r);
        fifo_push(&posts, me);
    } else if (ch->count < ch->capacity) {
        ring_put(ch, item);
        fifo_push(&posts, me);
    } else {
        fifo_push(&ch->senders, me); /* full: park with the item */
    }
    serex__mutex_unlock(&ch->mu);
    post_all(&posts);
    return SEREX_OK;
}

int serex_channel_recv(serex_channel *ch, serex_executor *target,
                       item_fn on_item, void *arg)
{
    struct fifo posts = {NULL, NULL};
    struct waiter *me, *s;

    if (ch == NULL || target == NULL || target->ops == NULL || on_item == NULL)
        return SEREX_EINVAL;
    me = waiter_new(target, NULL, on_item, NULL, arg);
    if (me == NULL)
        return SEREX_ENOMEM;
    serex__mutex_lock(&ch->mu);
    if (ch->count > 0) {
        me->item = ring_take(ch);
        if ((s = fifo_pop(&ch->senders)) != NULL) {
            ring_put(ch, s->item); /* the oldest parked sender gets in */
            fifo_push(&posts, s);
        }
        fifo_push(&posts, me);
    } else if (ch->closed) {
        fifo_push(&posts, me); /* closed and empty: item NULL */
    } else {
        fifo_push(&ch->receivers, me);
    }
    serex__mutex_unlock(&ch->mu);
    post_all(&posts);
    return SEREX_OK;
}

void serex_channel_close(serex_channel *ch)
{
    struct fifo posts = {NULL, NULL};

    if (ch == NULL)
        return;
    serex__mutex_lock(&ch->mu);
    if (!ch->closed) {
        ch->closed = true;
        /* Receivers park only while nothing is buffered or parked to
         * send: none will ever come now. */
        posts = ch->receivers;
        ch->receivers.head = ch->receivers.tail = NULL;
    }
    serex__mutex_unlock(&ch->mu);
    post_all(&posts);
}

static void fifo_drop(struct fifo *f)
{
    struct waiter *w;

    while ((w = fifo_pop(f)) != NULL)
        serex__cache_free(SEREX__CLASS_64, w);
}

void serex_channel_destroy(serex_channel *ch)
{
    if (ch == NULL)
        return;
    serex__reg_remove(&ch->reg); /* off the list before anything goes */
    fifo_drop(&ch->senders);
    fifo_drop(&ch->receivers);
    serex__mutex_destroy(&ch->mu);
    serex__free(ch->ring);
    serex__free(ch);
}
