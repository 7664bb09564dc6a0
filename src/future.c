/* SPDX-License-Identifier: MIT */
/*
 * future.c - a task's result, waiting and cancellation, on any executor.
 *
 * A future is a 32-byte block from the node cache with two atomic words.
 *
 * state: PENDING -> RUNNING -> DONE, or PENDING -> CANCELLED; plus a
 *        WAITERS bit set by a waiter before it parks.
 *   - the task (future_task) moves PENDING -> RUNNING by CAS; if it finds
 *     CANCELLED it runs nothing. So cancel and start race on one CAS and
 *     exactly one wins: serex_future_cancel returns true only if the task
 *     had not started and never will.
 *   - the task publishes the value, then exchanges the state to DONE with
 *     release; a waiter's acquire load of DONE sees the value and every
 *     write of the task.
 *   - whoever ends the future (DONE or CANCELLED) wakes the parking lot if
 *     the WAITERS bit was set (see park_internal.h for why none is lost).
 * refs:  one for the caller (serex_future_release) and one for the queued
 *        task (dropped when the task runs, or when shutdown_now or a
 *        destroy takes the task back and cancels it). The last one frees.
 */
#include <stdatomic.h>

#include "common_internal.h"
#include "nodecache_internal.h"
#include "park_internal.h"
#include "scheduler_internal.h"
#include "serial_internal.h"
#include "striped_internal.h"
#include "thread_internal.h"

enum {
    PENDING = 0,
    RUNNING = 1,
    DONE = 2,
    CANCELLED = 3,
    STATE_MASK = 3,
    WAITERS = 4
};

struct serex_future {
    _Atomic uint32_t state; /* see the essay above */
    _Atomic uint32_t refs;
    serex_call_fn fn;
    void *arg;
    void *value; /* written by the task before DONE is published */
};

_Static_assert(sizeof(struct serex_future) <= 32, "a future fits class 32");

static void future_unref(serex_future *f)
{
    /*
     * acq_rel: the release orders this holder's last use of the future
     * before the free; the acquire makes the last holder see every other
     * holder's uses before it frees.
     */
    if (atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1)
        serex__cache_free(SEREX__CLASS_32, f);
}

/* Ends a PENDING future as cancelled; false if it had left PENDING. */
static bool future_cancel_pending(serex_future *f)
{
    /* relaxed: a first guess for the CAS */
    uint32_t s = atomic_load_explicit(&f->state, memory_order_relaxed);

    do {
        if ((s & STATE_MASK) != PENDING)
            return false;
        /* acq_rel: the release publishes the end to waiters (their
         * acquire load); the acquire orders the WAITERS read */
    } while (!atomic_compare_exchange_weak_explicit(
        &f->state, &s, CANCELLED, memory_order_acq_rel, memory_order_relaxed));
    if (s & WAITERS)
        serex__park_wake_all(&f->state);
    return true;
}

static void future_task(void *arg)
{
    serex_future *f = arg;
    /* relaxed: a first guess for the CAS */
    uint32_t s = atomic_load_explicit(&f->state, memory_order_relaxed);
    uint32_t old;

    /*
     * relaxed: the executor already ordered the submission before this
     * run, so the CAS only has to decide the race with cancel, which the
     * single modification order of the word does. Keeps the WAITERS bit.
     */
    do {
        if ((s & STATE_MASK) == CANCELLED) {
            future_unref(f); /* cancelled: the task never runs */
            return;
        }
        SEREX_ASSERT((s & STATE_MASK) == PENDING);
    } while (!atomic_compare_exchange_weak_explicit(
        &f->state, &s, (s & WAITERS) | RUNNING, memory_order_relaxed,
        memory_order_relaxed));
    f->value = f->fn(f->arg);
    /* release: publishes value and the task's writes (pairs with the
     * acquire loads in serex_future_wait and serex_future_value) */
    old = atomic_exchange_explicit(&f->state, DONE, memory_order_release);
    if (old & WAITERS)
        serex__park_wake_all(&f->state);
    future_unref(f);
}

void serex__hand_back(serex_fn fn, void *arg, serex_pending_fn on_pending,
                      void *ctx)
{
    if (fn == future_task) {
        future_cancel_pending(arg);
        future_unref(arg);
    } else if (fn == serex__timer_task) {
        serex__timer_taken_back(arg, on_pending, ctx);
    } else if (on_pending != NULL) {
        on_pending(fn, arg, ctx);
    } else {
        /* a wrapper's drain holds a reference: give it back */
        serex__serial_drain_dropped(fn, arg);
        serex__striped_task_dropped(fn, arg);
    }
}

serex_future *serex__future_new(serex_call_fn fn, void *arg, serex_fn *task)
{
    serex_future *f = serex__cache_alloc(SEREX__CLASS_32);

    if (f != NULL) {
        atomic_init(&f->state, PENDING);
        atomic_init(&f->refs, 2); /* the caller's and the task's */
        f->fn = fn;
        f->arg = arg;
        f->value = NULL;
        *task = future_task;
    }
    return f;
}

void serex__future_abort(serex_future *f)
{
    serex__cache_free(SEREX__CLASS_32, f); /* never shared: free at once */
}

int serex_submit(serex_executor *ex, serex_call_fn fn, void *arg,
                 serex_future **out)
{
    serex_future *f;
    serex_fn task;
    int rc;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    if (ex == NULL || ex->ops == NULL || fn == NULL)
        return SEREX_EINVAL;
    f = serex__future_new(fn, arg, &task);
    if (f == NULL)
        return SEREX_ENOMEM;
    rc = serex_execute(ex, task, f);
    if (rc != SEREX_OK) {
        serex__future_abort(f);
        return rc;
    }
    *out = f;
    return SEREX_OK;
}

int serex_future_wait(serex_future *f, int64_t timeout_ns)
{
    int64_t deadline = INT64_MAX;

    if (f == NULL || !serex__timeout_valid(timeout_ns))
        return SEREX_EINVAL;
    if (timeout_ns > 0)
        deadline = serex__deadline(timeout_ns);
    for (;;) {
        /* acquire: pairs with the release that ends the future */
        uint32_t s = atomic_load_explicit(&f->state, memory_order_acquire);

        if ((s & STATE_MASK) == DONE)
            return SEREX_OK;
        if ((s & STATE_MASK) == CANCELLED)
            return SEREX_ECANCELED;
        if (timeout_ns == 0)
            return SEREX_ETIMEDOUT;
        /* relaxed: the mark only asks the ender to wake the lot; the park
         * re-reads the word under its lock */
        if (!(s & WAITERS) &&
            !atomic_compare_exchange_weak_explicit(&f->state, &s, s | WAITERS,
                                                   memory_order_relaxed,
                                                   memory_order_relaxed))
            continue;
        if (serex__park_wait(&f->state, s | WAITERS, deadline) ==
            SEREX_ETIMEDOUT)
            timeout_ns = 0; /* one last look, then ETIMEDOUT */
    }
}

void *serex_future_value(serex_future *f)
{
    /* acquire: pairs with the release that publishes DONE and the value */
    if (f == NULL || (atomic_load_explicit(&f->state, memory_order_acquire) &
                      STATE_MASK) != DONE)
        return NULL;
    return f->value;
}

bool serex_future_cancel(serex_future *f)
{
    return f != NULL && future_cancel_pending(f);
}

void serex_future_release(serex_future *f)
{
    if (f != NULL)
        future_unref(f);
}
