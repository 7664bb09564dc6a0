/* SPDX-License-Identifier: MIT */
/*
 * future.c - a task's result, waiting and cancellation, on any executor.
 *
 * A future is a 32-byte block from the node cache: the internal-operation
 * header its task is queued with (op_internal.h), two atomic words, and
 * the call (fn and arg), whose fn slot holds the value once it has run.
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
 * refs:  HANDLE, the caller's (cleared by serex_future_release), and one
 *        for the queued task (dropped when the task runs, or when
 *        shutdown_now or a destroy takes the task back: its `dropped`
 *        hook cancels it). Whoever leaves refs at 0 frees. A release that
 *        finds HANDLE clear, or a wait, value or cancel on such a future,
 *        is a misuse: the program stops with a message (promise 8: never
 *        a silent corruption). refs sits past the first 16 bytes, which
 *        the node cache links through, so a freed future still reads 0
 *        there until the block is handed out again (and under ASan the
 *        freed block is poisoned: any touch is reported).
 */
#include <stdatomic.h>

#include "common_internal.h"
#include "future_internal.h"
#include "nodecache_internal.h"
#include "op_internal.h"
#include "park_internal.h"
#include "thread_internal.h"

enum {
    PENDING = 0,
    RUNNING = 1,
    DONE = 2,
    CANCELLED = 3,
    STATE_MASK = 3,
    WAITERS = 4
};

#define REF_TASK 1u                 /* the queued task's reference */
#define REF_HANDLE (UINT32_C(1) << 31) /* the caller's */

struct serex_future {
    struct serex__op op; /* the task is queued as this op */
    union {
        serex_call_fn fn; /* until the task calls it */
        void *value;      /* then: written before DONE is published */
    };
    void *arg;
    _Atomic uint32_t state; /* see the essay above; written by the task,
                               cancel and waiters (WAITERS) */
    _Atomic uint32_t refs;  /* REF_HANDLE | task refs; see the essay */
};

_Static_assert(sizeof(struct serex_future) <= 32, "a future fits class 32");
_Static_assert(offsetof(struct serex_future, op) == 0,
               "the task's argument is the future itself");
_Static_assert(offsetof(struct serex_future, refs) >= 16,
               "refs outlives the node cache's links in a freed block");

static void future_free(serex_future *f)
{
    /* what a second release finds, until the block is handed out again */
    atomic_store_explicit(&f->refs, 0, memory_order_relaxed);
    serex__cache_free(SEREX__CLASS_32, f);
}

/* Drops the task's reference. */
static void future_unref(serex_future *f)
{
    /*
     * acq_rel: the release orders this holder's last use of the future
     * before the free; the acquire makes the last holder see every other
     * holder's uses before it frees.
     */
    if (atomic_fetch_sub_explicit(&f->refs, REF_TASK, memory_order_acq_rel) ==
        REF_TASK)
        future_free(f);
}

/* Stops the program if the caller's handle was released already. */
static void future_check_handle(const serex_future *f, const char *call)
{
    /* relaxed: only the handle's owner clears the bit, on its own thread
     * (a race with its own release is the misuse itself) */
    if (serex__unlikely(!(atomic_load_explicit(&f->refs,
                                               memory_order_relaxed) &
                          REF_HANDLE)))
        serex__misuse(call, "future used after serex_future_release");
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

static void future_run(struct serex__op *op)
{
    serex_future *f = serex__container_of(op, serex_future, op);
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
    f->value = f->fn(f->arg); /* fn is read before value overwrites it */
    /* release: publishes value and the task's writes (pairs with the
     * acquire loads in serex_future_wait and serex_future_value) */
    old = atomic_exchange_explicit(&f->state, DONE, memory_order_release);
    if (old & WAITERS)
        serex__park_wake_all(&f->state);
    future_unref(f);
}

/* Taken back or dropped by its executor: complete as cancelled. */
static void future_dropped(struct serex__op *op, serex_pending_fn on_pending,
                           void *ctx)
{
    serex_future *f = serex__container_of(op, serex_future, op);

    (void)on_pending; /* a future's task is never the user's to run */
    (void)ctx;
    future_cancel_pending(f);
    future_unref(f);
}

static const struct serex__op_class future_class = {
    "future", future_run, future_dropped,
};

serex_future *serex__future_new(serex_call_fn fn, void *arg, serex_fn *task)
{
    serex_future *f = serex__cache_alloc(SEREX__CLASS_32);

    if (f != NULL) {
        f->op.cls = &future_class;
        atomic_init(&f->state, PENDING);
        atomic_init(&f->refs, REF_HANDLE | REF_TASK);
        f->fn = fn;
        f->arg = arg;
        *task = serex__op_run;
    }
    return f;
}

void serex__future_abort(serex_future *f)
{
    future_free(f); /* never shared: free at once */
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
    rc = serex_execute(ex, task, &f->op);
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
    future_check_handle(f, "serex_future_wait");
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
    if (f == NULL)
        return NULL;
    future_check_handle(f, "serex_future_value");
    /* acquire: pairs with the release that publishes DONE and the value */
    if ((atomic_load_explicit(&f->state, memory_order_acquire) & STATE_MASK) !=
        DONE)
        return NULL;
    return f->value;
}

bool serex_future_cancel(serex_future *f)
{
    if (f == NULL)
        return false;
    future_check_handle(f, "serex_future_cancel");
    return future_cancel_pending(f);
}

void serex_future_release(serex_future *f)
{
    uint32_t old;

    if (f == NULL)
        return;
    /* acq_rel: as future_unref (the last holder frees) */
    old = atomic_fetch_and_explicit(&f->refs, ~REF_HANDLE,
                                    memory_order_acq_rel);
    if (serex__unlikely(!(old & REF_HANDLE)))
        serex__misuse("serex_future_release", "future released twice");
    if (old == REF_HANDLE)
        future_free(f);
}
