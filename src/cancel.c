/* SPDX-License-Identifier: MIT */
/*
 * cancel.c - the cancellation token (serex/cancel.h) and its hooks
 * (cancel_internal.h).
 *
 * --- the token ---
 * `cause` is 0 until the token is cancelled, then the cause, for good. A
 * spinlock guards the list of hooks (operations, registrations, children)
 * and `running`, the hook whose fire is being called. The lock is never
 * held while a fire runs, nor while memory is allocated or freed.
 *
 * request: under the lock, if `cause` is 0, store the cause; then, one at
 * a time, unlink the first hook, mark it `running`, unlock, call its fire,
 * lock, clear `running` and bump `seq` (waking removers that wait on it).
 * Hooks added after the cause was stored are refused (add returns the
 * cause), so the list only shrinks once cancelled and the loop ends.
 *
 * Who wins each race (all decided under the lock):
 *  - add vs request: add sees cause 0 and links the hook (request's loop
 *    then fires it), or sees the cause and is refused (the caller acts on
 *    the cause itself). Never both, never neither.
 *  - remove vs request: remove finds the hook linked (pprev set): it
 *    unlinks it, and fire is never called (true). Else request has
 *    unlinked it: its fire has been called or is being called; remove
 *    waits until `running` is no longer this hook (false), unless the
 *    calling thread is inside that fire (the `firing` stack, a thread
 *    local), where it would wait for itself: it returns at once.
 *  - two requests: the first stores the cause and fires every hook; the
 *    second sees a cause and returns false at once. It does not wait for
 *    the first one's fires (C++'s request_stop neither).
 * Memory: every linked hook holds a reference (add to remove), each child
 * holds one on its parent, each registration one until it is freed (its
 * callback may read the token's cause after the handle was released),
 * the caller's handle is one (a bit), and a request holds one while it
 * fires (a fire may drop the last other one).
 * Whoever takes `refs` to 0 frees the token; a child freed removes its
 * hook from its parent first.
 * Order: the cause is stored with release and read with acquire
 * (serex_cancel_requested), so the canceller's writes before the request
 * are visible to whoever sees it cancelled; a fire is called after the
 * store, on the requesting thread.
 *
 * --- a registration (serex_cancel_on_cancel) ---
 * A hook whose fire posts an op (fn, arg) to its target. Its state word:
 * REG_ARMED until fired, REG_POSTED from fire (or from on_cancel when the
 * token was cancelled already) until fn has returned, then REG_DONE.
 * unregister removes the hook: true, it never fires: free. Else it fired:
 * unless the caller is the thread running fn (the `reg_running` thread
 * local), it waits for REG_DONE (parking on the word, REG_WAITERS bit
 * set), then frees. From inside fn it sets REG_UNREG and returns false;
 * the runner sees REG_UNREG when it moves to REG_DONE and frees it. The
 * runner's REG_DONE exchange and unregister's REG_UNREG (or REG_WAITERS)
 * CAS are on one word: exactly one of them sees the other, so the record
 * is freed once, by the last one.
 */
#include <stdatomic.h>

#include "alloc_internal.h"
#include "cancel_internal.h"
#include "common_internal.h"
#include "op_internal.h"
#include "park_internal.h"
#include "spinlock_internal.h"
#include "thread_internal.h"

#define REF_ONE 1u
#define REF_HANDLE (UINT32_C(1) << 31)

struct serex_cancel {
    _Atomic int cause;     /* 0, then the cause (release; see the essay) */
    _Atomic uint32_t refs; /* REF_HANDLE | the others' */
    _Atomic uint32_t seq;  /* bumped after each fire; removers park on it */
    serex__spinlock lock;  /* guards the fields below */
    uint32_t waiting;      /* removers parked on seq */
    struct serex__cancel_hook *head, **tail;  /* in the order added */
    const struct serex__cancel_hook *running; /* being fired, or NULL */
    serex_cancel *parent;                     /* NULL, or held by `child` */
    struct serex__cancel_hook child;          /* on the parent's list */
};

/* The hooks this thread is firing, innermost first (a fire may request
 * another token: a child's). */
struct firing {
    const struct serex__cancel_hook *h;
    struct firing *up;
};
static SEREX__THREAD_LOCAL struct firing *cancel_firing;

static void cancel_free(serex_cancel *c);

static bool cancel_is_firing(const struct serex__cancel_hook *h)
{
    for (const struct firing *f = cancel_firing; f != NULL; f = f->up)
        if (f->h == h)
            return true;
    return false;
}

/* Appends @h: a request fires hooks in the order they were added (a
 * group's own hook, added when it was made, closes it and records the
 * cause before the hooks of its members end them). */
static void hook_link(serex_cancel *c, struct serex__cancel_hook *h)
{
    h->next = NULL;
    h->pprev = c->tail;
    *c->tail = h;
    c->tail = &h->next;
}

static void hook_unlink(serex_cancel *c, struct serex__cancel_hook *h)
{
    *h->pprev = h->next;
    if (h->next != NULL)
        h->next->pprev = h->pprev;
    else
        c->tail = h->pprev; /* it was the last */
    h->pprev = NULL;
}

int serex__cancel_hook_add(serex_cancel *c, struct serex__cancel_hook *h)
{
    int cause;

    /* relaxed: the caller holds a reference (its handle, or an operation
     * that holds one), so the count cannot reach 0 meanwhile */
    atomic_fetch_add_explicit(&c->refs, REF_ONE, memory_order_relaxed);
    serex__spin_lock(&c->lock);
    /* relaxed: written under this lock; the acquire that makes the
     * canceller's writes visible is the lock's */
    cause = atomic_load_explicit(&c->cause, memory_order_relaxed);
    if (cause == 0)
        hook_link(c, h);
    serex__spin_unlock(&c->lock);
    if (cause != 0)
        serex__cancel_unref(c); /* refused: no remove is owed */
    return cause;
}

bool serex__cancel_hook_remove(serex_cancel *c, struct serex__cancel_hook *h)
{
    bool removed = false;

    serex__spin_lock(&c->lock);
    if (h->pprev != NULL) {
        hook_unlink(c, h);
        removed = true;
    }
    while (!removed && c->running == h && !cancel_is_firing(h)) {
        /* relaxed: read under the lock that orders its bumps; the park
         * re-reads it under its bucket lock */
        uint32_t v = atomic_load_explicit(&c->seq, memory_order_relaxed);

        c->waiting++;
        serex__spin_unlock(&c->lock);
        serex__park_wait(&c->seq, v, INT64_MAX);
        serex__spin_lock(&c->lock);
        c->waiting--;
    }
    serex__spin_unlock(&c->lock);
    serex__cancel_unref(c);
    return removed;
}

/* --- the token --- */

static void cancel_free(serex_cancel *c)
{
    serex_cancel *parent = c->parent;

    if (parent != NULL)
        serex__cancel_hook_remove(parent, &c->child); /* drops its ref */
    serex__free(c);
}

void serex__cancel_ref(serex_cancel *c)
{
    /* relaxed: the caller holds a reference already */
    atomic_fetch_add_explicit(&c->refs, REF_ONE, memory_order_relaxed);
}

void serex__cancel_unref(serex_cancel *c)
{
    /* acq_rel: the release orders our uses before the free; the acquire
     * makes the last holder see every other holder's */
    uint32_t old = atomic_fetch_sub_explicit(&c->refs, REF_ONE,
                                             memory_order_acq_rel);

    if (old == REF_ONE)
        cancel_free(c);
}

/* Calls one hook's fire, on the firing stack, with the lock released. */
static void cancel_fire(serex_cancel *c, struct serex__cancel_hook *h,
                        int cause)
{
    struct firing frame = {h, cancel_firing};
    bool wake;

    c->running = h;
    serex__spin_unlock(&c->lock);
    cancel_firing = &frame;
    h->fire(h, cause); /* h may be gone once it returns */
    cancel_firing = frame.up;
    serex__spin_lock(&c->lock);
    c->running = NULL;
    /* relaxed: under the lock; the wake below (or the remover's re-read
     * under the lock) does the rest */
    atomic_fetch_add_explicit(&c->seq, 1, memory_order_relaxed);
    wake = c->waiting != 0;
    if (wake) {
        serex__spin_unlock(&c->lock);
        serex__park_wake_all(&c->seq);
        serex__spin_lock(&c->lock);
    }
}

/* The request, for a cause already checked; the caller holds a ref. */
static bool cancel_request(serex_cancel *c, int cause)
{
    serex__spin_lock(&c->lock);
    /* relaxed: under the lock (see add) */
    if (atomic_load_explicit(&c->cause, memory_order_relaxed) != 0) {
        serex__spin_unlock(&c->lock);
        return false;
    }
    /* release: pairs with serex_cancel_requested's acquire */
    atomic_store_explicit(&c->cause, cause, memory_order_release);
    while (c->head != NULL) {
        struct serex__cancel_hook *h = c->head;

        hook_unlink(c, h);
        cancel_fire(c, h, cause);
    }
    serex__spin_unlock(&c->lock);
    return true;
}

/* A child's hook on its parent: the parent's cause cancels the child. */
static void cancel_child_fire(struct serex__cancel_hook *h, int cause)
{
    serex_cancel *c = serex__container_of(h, serex_cancel, child);
    /* relaxed: a first guess for the CAS */
    uint32_t refs = atomic_load_explicit(&c->refs, memory_order_relaxed);

    /* The child's memory is there: its free removes this hook first,
     * which waits for this fire. But it may be on its way to the free
     * (refs 0): then no one can see it any more, and it is left alone.
     * relaxed: the ref only keeps it alive while we request; cancel_unref
     * orders the rest */
    do {
        if (refs == 0)
            return;
    } while (!atomic_compare_exchange_weak_explicit(
        &c->refs, &refs, refs + REF_ONE, memory_order_relaxed,
        memory_order_relaxed));
    cancel_request(c, cause);
    serex__cancel_unref(c);
}

int serex_cancel_create(serex_cancel *parent, serex_cancel **out)
{
    serex_cancel *c;
    int cause;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    c = serex__calloc(1, sizeof *c);
    if (c == NULL)
        return SEREX_ENOMEM;
    atomic_init(&c->cause, 0);
    atomic_init(&c->refs, REF_HANDLE);
    atomic_init(&c->seq, 0);
    atomic_init(&c->lock, 0);
    c->tail = &c->head;
    c->child.fire = cancel_child_fire;
    if (parent != NULL) {
        cause = serex__cancel_hook_add(parent, &c->child);
        if (cause != 0)
            atomic_init(&c->cause, cause); /* born cancelled */
        else
            c->parent = parent; /* its hook holds the parent */
    }
    *out = c;
    return SEREX_OK;
}

bool serex_cancel_request(serex_cancel *c, int cause)
{
    bool done;

    if (c == NULL || cause > 0 || cause < SEREX_ERROR_MIN)
        return false;
    /* relaxed: the caller's handle keeps c alive while we take this */
    atomic_fetch_add_explicit(&c->refs, REF_ONE, memory_order_relaxed);
    done = cancel_request(c, cause == 0 ? SEREX_ECANCELED : cause);
    serex__cancel_unref(c);
    return done;
}

bool serex_cancel_requested(const serex_cancel *c)
{
    /* acquire: pairs with the request's release store */
    return c != NULL &&
           atomic_load_explicit(&c->cause, memory_order_acquire) != 0;
}

int serex_cancel_cause(const serex_cancel *c)
{
    /* acquire: as serex_cancel_requested */
    return c == NULL ? 0
                     : atomic_load_explicit(&c->cause, memory_order_acquire);
}

void serex_cancel_release(serex_cancel *c)
{
    uint32_t old;

    if (c == NULL)
        return;
    /* acq_rel: as cancel_unref */
    old = atomic_fetch_and_explicit(&c->refs, ~REF_HANDLE,
                                    memory_order_acq_rel);
    if (serex__unlikely(!(old & REF_HANDLE)))
        serex__misuse("serex_cancel_release", "token released twice");
    if (old == REF_HANDLE)
        cancel_free(c);
}

/* --- registrations --- */

enum {
    REG_ARMED = 0,
    REG_POSTED = 1,
    REG_DONE = 2,
    REG_STATE = 3,
    REG_WAITERS = 4,
    REG_UNREG = 8
};

struct serex_cancel_reg {
    struct serex__op op;
    struct serex__cancel_hook hook;
    serex_cancel *c;
    serex_executor *target;
    serex_fn fn;
    void *arg;
    _Atomic uint32_t state; /* see the essay */
    bool hooked;            /* on c's list (a remove is owed) */
};

static SEREX__THREAD_LOCAL const serex_cancel_reg *reg_running;

/* Frees @r and drops its hold on the token (fn may read the token's
 * cause until then, even if the token's handle was released). */
static void reg_free(serex_cancel_reg *r)
{
    serex__cancel_unref(r->c);
    serex__free(r);
}

static const struct serex__op_class reg_class;

/* Runs fn (on the target, or where it was refused or dropped). */
static void reg_run(struct serex__op *op)
{
    serex_cancel_reg *r = serex__container_of(op, serex_cancel_reg, op);
    const serex_cancel_reg *outer = reg_running;
    uint32_t old;

    reg_running = r;
    r->fn(r->arg);
    reg_running = outer;
    /* acq_rel: the release publishes fn's writes to a waiting unregister
     * (its acquire load of REG_DONE); the acquire orders an inner
     * unregister's REG_UNREG before our free */
    old = atomic_exchange_explicit(&r->state, REG_DONE, memory_order_acq_rel);
    if (old & REG_UNREG)
        reg_free(r); /* unregistered from inside fn: ours to free */
    else if (old & REG_WAITERS)
        serex__park_wake_all(&r->state);
}

static void reg_dropped(struct serex__op *op, serex_pending_fn on_pending,
                        void *ctx)
{
    (void)on_pending;
    (void)ctx;
    reg_run(op); /* a continuation: runs where it is (promise 2a) */
}

static const struct serex__op_class reg_class = {
    "cancel callback",
    reg_run,
    reg_dropped,
};

static void reg_post(serex_cancel_reg *r)
{
    if (serex__op_submit(r->target, &r->op) != SEREX_OK)
        reg_run(&r->op); /* refused: run here (promise 2a) */
}

static void reg_fire(struct serex__cancel_hook *h, int cause)
{
    serex_cancel_reg *r = serex__container_of(h, serex_cancel_reg, hook);

    (void)cause; /* fn asks serex_cancel_cause */
    /* relaxed: only this fire moves REG_ARMED to REG_POSTED; unregister waits
     * for the fire (the token's `running`) before it reads the word */
    atomic_store_explicit(&r->state, REG_POSTED, memory_order_relaxed);
    reg_post(r);
}

int serex_cancel_on_cancel(serex_cancel *c, serex_executor *target, serex_fn fn,
                           void *arg, serex_cancel_reg **reg)
{
    serex_cancel_reg *r;

    if (reg == NULL)
        return SEREX_EINVAL;
    *reg = NULL;
    if (c == NULL || target == NULL || target->ops == NULL || fn == NULL)
        return SEREX_EINVAL;
    r = serex__alloc(sizeof *r);
    if (r == NULL)
        return SEREX_ENOMEM;
    r->op.cls = &reg_class;
    r->hook.fire = reg_fire;
    r->c = c;
    r->target = target;
    r->fn = fn;
    r->arg = arg;
    atomic_init(&r->state, REG_ARMED);
    *reg = r;             /* before the post: fn may unregister it */
    serex__cancel_ref(c); /* the registration's, until it is freed */
    r->hooked = serex__cancel_hook_add(c, &r->hook) == 0;
    if (!r->hooked) { /* cancelled already: post from here */
        atomic_init(&r->state, REG_POSTED);
        reg_post(r);
    }
    return SEREX_OK;
}

/* Waits for fn's end, or hands the free to it from inside fn. */
static void reg_settle(serex_cancel_reg *r)
{
    /* acquire: pairs with the runner's exchange (fn's writes) */
    uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);

    while ((s & REG_STATE) != REG_DONE) {
        uint32_t mark = reg_running == r ? REG_UNREG : REG_WAITERS;

        /* acq_rel: our mark is seen by the runner's exchange, or we see
         * REG_DONE (then acquire fn's writes) */
        if (!atomic_compare_exchange_weak_explicit(&r->state, &s, s | mark,
                                                   memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        if (mark == REG_UNREG)
            return; /* the runner frees it once fn returns */
        serex__park_wait(&r->state, s | mark, INT64_MAX);
        s = atomic_load_explicit(&r->state, memory_order_acquire);
    }
    reg_free(r);
}

bool serex_cancel_unregister(serex_cancel_reg *r)
{
    if (r == NULL)
        return false;
    if (r->hooked && serex__cancel_hook_remove(r->c, &r->hook)) {
        reg_free(r); /* never fired: fn will never run */
        return true;
    }
    reg_settle(r);
    return false;
}
