/* SPDX-License-Identifier: MIT */
/*
 * deadline.c - a token's deadline (serex_cancel_deadline): a timer that
 * cancels the token with SEREX_ETIMEDOUT, and a hook that cancels the
 * timer when the token is cancelled first.
 *
 * A record holds both: the timer's task (an internal op, so a scheduler
 * that hands it back on shutdown calls our `dropped`, never a user's
 * on_rejected) and the hook on the token; and a reference to the token,
 * for the timer's request. Three references keep the record: the timer
 * side (dropped when the run ends, when a cancel of the timer wins, or
 * when the scheduler drops it), the hook side (dropped by whoever removes
 * the hook: the fire, or the timer's end) and the arming call's (so that
 * it can publish the timer's handle into a record that is still there).
 *
 * The fire needs the timer's handle, which the arming call gets only
 * from serex_schedule, after the timer may already be due. The `timer`
 * word settles it: the arming call CASes NULL -> handle; the fire
 * exchanges it with FIRED. If the fire came first, the arming call finds
 * FIRED and cancels the timer itself; else the fire gets the handle and
 * cancels it. A cancel that returns true means the run will never start:
 * the canceller drops the timer side. Otherwise the run (or the drop) is
 * under way and drops it. The hook is removed once: `unhooked` is
 * exchanged by the fire and by the timer's end; the first removes it.
 *
 * A future's deadline (serex_future_deadline) is a token of its own with
 * such a deadline, linked to the future so that it ends the future even
 * while its call runs; the link owns the token and cancels it once the
 * future has ended, which stops the timer.
 */
#include <stdatomic.h>

#include "alloc_internal.h"
#include "cancel_internal.h"
#include "common_internal.h"
#include "future_internal.h"
#include "op_internal.h"
#include "serex/scheduler.h"

#define FIRED ((uintptr_t)1)

struct deadline {
    struct serex__op op;            /* the timer's task */
    struct serex__cancel_hook hook; /* on the token */
    serex_cancel *c;                /* held: one reference */
    serex_timer *handle;            /* set by the arming call */
    _Atomic uintptr_t timer;        /* NULL, the handle, or FIRED */
    _Atomic uint32_t refs;          /* timer side, hook side, arming */
    _Atomic bool unhooked;          /* the hook was (being) removed */
};

static void deadline_unref(struct deadline *d)
{
    /* acq_rel: the last holder sees the others' uses (the handle) */
    if (atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (d->handle != NULL)
        serex_timer_release(d->handle);
    serex__cancel_unref(d->c);
    serex__free(d);
}

/* Removes the hook, if no one has yet, and drops the hook side. */
static void deadline_unhook(struct deadline *d)
{
    /* relaxed: the exchange only picks who removes; remove orders */
    if (atomic_exchange_explicit(&d->unhooked, true, memory_order_relaxed))
        return;
    serex__cancel_hook_remove(d->c, &d->hook);
    deadline_unref(d);
}

/* Cancels the timer; drops the timer side if the run will never start. */
static void deadline_stop(struct deadline *d, serex_timer *t)
{
    if (serex_timer_cancel(t))
        deadline_unref(d);
}

static void deadline_fire(struct serex__cancel_hook *h, int cause)
{
    struct deadline *d = serex__container_of(h, struct deadline, hook);
    /* acquire: pairs with the arming CAS, so the handle is the timer's */
    uintptr_t t = atomic_exchange_explicit(&d->timer, FIRED,
                                           memory_order_acquire);

    (void)cause;
    if (t != 0 && t != FIRED)
        deadline_stop(d, (serex_timer *)t);
    deadline_unhook(d); /* from inside the fire: returns at once */
}

static void deadline_run(struct serex__op *op)
{
    struct deadline *d = serex__container_of(op, struct deadline, op);

    serex_cancel_request(d->c, SEREX_ETIMEDOUT);
    deadline_unhook(d);
    deadline_unref(d); /* the timer side */
}

static void deadline_dropped(struct serex__op *op, serex_pending_fn on_pending,
                             void *ctx)
{
    struct deadline *d = serex__container_of(op, struct deadline, op);

    (void)on_pending; /* never the user's */
    (void)ctx;
    deadline_unhook(d); /* the deadline will never come */
    deadline_unref(d);
}

static const struct serex__op_class deadline_class = {
    "cancel deadline",
    deadline_run,
    deadline_dropped,
};

int serex_cancel_deadline(serex_cancel *c, serex_scheduler *s, int64_t delay_ns)
{
    struct deadline *d;
    serex_timer *t = NULL;
    uintptr_t expect = 0;
    int rc;

    if (c == NULL || s == NULL || delay_ns < 0)
        return SEREX_EINVAL;
    d = serex__alloc(sizeof *d);
    if (d == NULL)
        return SEREX_ENOMEM;
    d->op.cls = &deadline_class;
    d->hook.fire = deadline_fire;
    d->c = c;
    d->handle = NULL;
    atomic_init(&d->timer, 0);
    atomic_init(&d->refs, 3);
    atomic_init(&d->unhooked, false);
    serex__cancel_ref(c); /* the record's; the caller's handle holds c */
    if (serex__cancel_hook_add(c, &d->hook) != 0) {
        /* cancelled already: nothing to arm */
        atomic_store_explicit(&d->unhooked, true, memory_order_relaxed);
        atomic_store_explicit(&d->refs, 1, memory_order_relaxed);
        deadline_unref(d);
        return SEREX_OK;
    }
    rc = serex_schedule(s, NULL, delay_ns, serex__op_run, &d->op, &t);
    if (rc != SEREX_OK) {
        deadline_unhook(d);
        deadline_unref(d); /* the timer side: there is no timer */
        deadline_unref(d); /* ours */
        return rc;
    }
    d->handle = t;
    /* release: publishes the handle to the fire's exchange; relaxed on
     * failure: FIRED carries nothing */
    if (!atomic_compare_exchange_strong_explicit(
            &d->timer, &expect, (uintptr_t)t, memory_order_release,
            memory_order_relaxed))
        deadline_stop(d, t); /* the token was cancelled meanwhile */
    deadline_unref(d);
    return SEREX_OK;
}

int serex_future_deadline(serex_future *f, serex_scheduler *s, int64_t delay_ns)
{
    serex_cancel *tok;
    int rc;

    if (f == NULL || s == NULL || delay_ns < 0)
        return SEREX_EINVAL;
    rc = serex_cancel_create(NULL, &tok);
    if (rc != SEREX_OK)
        return rc;
    rc = serex_cancel_deadline(tok, s, delay_ns);
    if (rc == SEREX_OK)
        rc = serex__future_bind(f, tok, true, true); /* owns tok */
    if (rc != SEREX_OK) {
        serex_cancel_request(tok, 0); /* stops an armed timer */
        serex_cancel_release(tok);
    }
    return rc;
}
