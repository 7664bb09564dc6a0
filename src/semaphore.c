/* SPDX-License-Identifier: MIT */
/*
 * semaphore.c - asynchronous permits (serex/semaphore.h): an acquire parks
 * a continuation, never a thread; a release, by anyone and at any later
 * time, posts the continuations its permits complete, in FIFO order.
 *
 * --- The state ---
 * Under `lock` (a spinlock: each critical section is a few pointer moves
 * and additions; nothing allocates, frees, posts or calls into a token
 * under it): `avail`, the permits nobody holds; a FIFO of parked waiters;
 * `closed`. The invariant at every unlock: the first *live* waiter (one
 * not being cancelled, below) needs more than `avail`. Hence acquire
 * takes permits at once only when no live waiter is parked (it never
 * jumps the queue); release grants from the head while the head fits and
 * stops at the first that does not (a large request is never overtaken,
 * so never starved); and a waiter that leaves (cancelled) grants those
 * behind it that now fit, since it may have been the one holding them.
 *
 * --- A waiter's life: grant, close and cancel race cleanly ---
 * A waiter is one record (class 128): the op posted to its target, the
 * FIFO links, and the token's hook. Its `state` word says who completes
 * it:
 *   INIT      made by acquire, hook added, not yet in the FIFO;
 *   WAITING   in the FIFO;
 *   TAKEN     completed under the lock: granted (acquire's fast path, a
 *             release, a cancel's re-check) or rejected (close);
 *   < 0       completed by the token's fire: the value is the cause.
 * Completing is a CAS from INIT or WAITING. Lock holders make theirs
 * under the lock (acquire: INIT -> WAITING or TAKEN; grants and close:
 * WAITING -> TAKEN); the fire makes its own without the lock (it runs on
 * the cancelling thread, which may not wait for us). Exactly one CAS from
 * INIT or WAITING succeeds, so exactly one of grant, close and cancel
 * completes a waiter, and its completer alone posts it:
 *  - fire wins from WAITING: the waiter is still in the FIFO, because
 *    only its fire unlinks a cancelled waiter (grants and close pass over
 *    it); so the semaphore still lives (destroy with a live waiter
 *    parked is misuse, and destroy waits for a cancelled one to be
 *    unlinked). fire takes the lock, unlinks it, grants the live waiters
 *    that now fit, unlocks, posts those, and posts its own waiter last,
 *    with the cause. It took no permit, so it gives none back.
 *  - fire wins from INIT: acquire has not queued it; fire does nothing
 *    more, and acquire, whose CAS then fails under the lock, posts it
 *    with the cause (read from the word).
 *  - fire loses: the waiter is TAKEN, posted or about to be. fire returns
 *    having read only the word: the semaphore may be gone by then (a
 *    granted continuation may release and destroy it before the token is
 *    ever cancelled).
 * A grant takes its permits in the critical section of its CAS, so
 * `avail` and the waiters always agree.
 *
 * --- The hook's removal, and the record's end ---
 * Every hook added is removed exactly once, before the record is freed
 * and fn called. A fire that won from WAITING removes its own hook (from
 * inside the fire, remove returns at once) before it posts. Otherwise the
 * waiter's run removes it (on its target, or on the thread where the
 * target refused or dropped it): remove waits for a fire of this hook in
 * progress (one that lost reads only `state`; one that won from INIT
 * returns right after its CAS), so no fire touches a freed record; and
 * the run never holds the semaphore's lock, so the fire it waits for can
 * take it (remove under that lock could deadlock). Completers never touch
 * the semaphore after their unlock, nor a record after posting it: a
 * posted continuation may run at once, release the last permit and
 * destroy the semaphore, or free its record.
 *
 * tests/model/semaphore.pml checks this life with spin (exactly one
 * completer, no touch of a freed record or semaphore, every hook removed
 * once, permits conserved, FIFO grants all it can), and catches the
 * mutations of its README section.
 */
#include <stdatomic.h>

#include "alloc_internal.h"
#include "cancel_internal.h"
#include "common_internal.h"
#include "nodecache_internal.h"
#include "op_internal.h"
#include "registry_internal.h"
#include "spinlock_internal.h"
#include "thread_internal.h"

enum { W_INIT = 1, W_WAITING = 2, W_TAKEN = 3 }; /* or < 0: the cause */

struct sem_waiter {
    struct serex__op op; /* posted to its target as this op */
    /* the FIFO (under lock), then a list of posts */
    struct sem_waiter *next, *prev;
    serex_semaphore *sem;
    serex_executor *target;
    serex_permit_fn fn;
    void *arg;
    serex_cancel *token; /* NULL: no hook to remove */
    struct serex__cancel_hook hook;
    _Atomic int state; /* see the essay */
    int status;        /* written by the completer, read by the run */
    uint32_t n;
};

_Static_assert(sizeof(struct sem_waiter) <= 128, "a waiter fits class 128");

struct sem_list {
    struct sem_waiter *head, *tail;
};

struct serex_semaphore {
    serex__spinlock lock;
    /* under lock; atomic only for serex_semaphore_available's look */
    _Atomic uint64_t avail;
    /* written under lock; read without it only as an early refusal */
    _Atomic bool closed;
    uint64_t max;          /* never changes */
    struct sem_list queue; /* under lock: parked waiters, oldest first */
    struct serex__reg reg; /* serex_dump's list */
};

/* --- lists --- */

static void sem_list_push(struct sem_list *l, struct sem_waiter *w)
{
    w->next = NULL;
    w->prev = l->tail;
    if (l->tail != NULL)
        l->tail->next = w;
    else
        l->head = w;
    l->tail = w;
}

static void sem_list_unlink(struct sem_list *l, struct sem_waiter *w)
{
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        l->head = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    else
        l->tail = w->prev;
}

/* --- a waiter's completion --- */

/*
 * Completes @w if it is still in state @from (INIT or WAITING): true if
 * this call did. relaxed: the word decides alone, and its value is the
 * whole message (a cause, or TAKEN); the record's other fields are
 * ordered by the token's lock (acquire's writes before add, fire after
 * the request took that lock), by the semaphore's lock (the links), and
 * by the post (status, for the run).
 */
static bool sem_waiter_take(struct sem_waiter *w, int from)
{
    int expected = from;

    return atomic_compare_exchange_strong_explicit(
        &w->state, &expected, W_TAKEN, memory_order_relaxed,
        memory_order_relaxed);
}

/* A fire is passing: @w is cancelled but still linked (see the essay). */
static bool sem_waiter_cancelled(const struct sem_waiter *w)
{
    /* relaxed: a hint under the lock; sem_waiter_take's CAS decides */
    return atomic_load_explicit(&((struct sem_waiter *)(uintptr_t)w)->state,
                                memory_order_relaxed) < 0;
}

static void sem_waiter_run(struct serex__op *op)
{
    struct sem_waiter *w = serex__container_of(op, struct sem_waiter, op);
    serex_permit_fn fn = w->fn;
    void *arg = w->arg;
    int status = w->status;

    /* waits for a fire of this hook in progress: after it, no fire
     * touches the record (the essay) */
    if (w->token != NULL)
        (void)serex__cancel_hook_remove(w->token, &w->hook);
    serex__cache_free(SEREX__CLASS_128, w);
    fn(arg, status);
}

/* Taken back or dropped by its target: it runs here (promise 2a). */
static void sem_waiter_dropped(struct serex__op *op,
                               serex_pending_fn on_pending, void *ctx)
{
    (void)on_pending;
    (void)ctx;
    sem_waiter_run(op);
}

static const struct serex__op_class sem_waiter_class = {
    "semaphore continuation",
    sem_waiter_run,
    sem_waiter_dropped,
};

/* Posts a completed waiter; refused, it runs here (promise 2a). */
static void sem_waiter_post(struct sem_waiter *w)
{
    if (serex__op_submit(w->target, &w->op) != SEREX_OK)
        sem_waiter_run(&w->op);
}

/* Posts a list of completed waiters, in order; outside the lock. */
static void sem_post_all(struct sem_list *posts)
{
    struct sem_waiter *w = posts->head;

    while (w != NULL) {
        struct sem_waiter *next = w->next; /* w may be gone once posted */

        sem_waiter_post(w);
        w = next;
    }
}

/* --- the queue --- */

/* The oldest waiter not being cancelled, or NULL; under the lock. */
static struct sem_waiter *sem_first_live(const serex_semaphore *s)
{
    struct sem_waiter *w = s->queue.head;

    while (w != NULL && sem_waiter_cancelled(w))
        w = w->next;
    return w;
}

/* relaxed, both: `avail` is written only under the lock, which orders */
static uint64_t sem_avail(const serex_semaphore *s)
{
    return atomic_load_explicit(&((serex_semaphore *)(uintptr_t)s)->avail,
                                memory_order_relaxed);
}

static void sem_set_avail(serex_semaphore *s, uint64_t v)
{
    atomic_store_explicit(&s->avail, v, memory_order_relaxed);
}

/*
 * Grants parked waiters from the head while they fit, onto @posts in
 * order; under the lock. A cancelled waiter holds no place: it is passed
 * over (its fire unlinks it). Restores the invariant of the essay.
 */
static void sem_grant_locked(serex_semaphore *s, struct sem_list *posts)
{
    uint64_t avail = sem_avail(s);
    struct sem_waiter *w = s->queue.head;

    while (w != NULL) {
        struct sem_waiter *next = w->next;

        if (!sem_waiter_cancelled(w)) {
            if (w->n > avail)
                break; /* FIFO: nobody overtakes the first live one */
            if (sem_waiter_take(w, W_WAITING)) {
                avail -= w->n;
                w->status = SEREX_OK;
                sem_list_unlink(&s->queue, w);
                sem_list_push(posts, w);
            }
        }
        w = next;
    }
    sem_set_avail(s, avail);
}

/* The token's fire (the essay: fire wins, or loses). */
static void sem_waiter_fire(struct serex__cancel_hook *h, int cause)
{
    struct sem_waiter *w = serex__container_of(h, struct sem_waiter, hook);
    struct sem_list posts = {NULL, NULL};
    serex_semaphore *s;
    /* relaxed: a first guess for the CAS, which decides (sem_waiter_take) */
    int was = atomic_load_explicit(&w->state, memory_order_relaxed);

    SEREX_ASSERT(cause < 0);
    do {
        if (was != W_INIT && was != W_WAITING)
            return; /* completed already: touch nothing more */
        /* relaxed: as sem_waiter_take */
    } while (!atomic_compare_exchange_weak_explicit(
        &w->state, &was, cause, memory_order_relaxed, memory_order_relaxed));
    if (was == W_INIT)
        return; /* acquire has not queued it: it posts it (the essay) */
    s = w->sem;
    serex__spin_lock(&s->lock);
    sem_list_unlink(&s->queue, w);
    sem_grant_locked(s, &posts); /* it may have held them back */
    serex__spin_unlock(&s->lock);
    /* the record is ours alone now: its remove, from inside this fire,
     * returns at once, and the run has none left to wait for */
    (void)serex__cancel_hook_remove(w->token, h);
    w->token = NULL;
    w->status = cause;
    sem_post_all(&posts);
    sem_waiter_post(w);
}

/* --- the semaphore --- */

/* What a dump shows of one waiter, copied under the lock. */
struct sem_seen {
    serex_permit_fn fn;
    const void *target;
    uint32_t n;
    bool cancelled;
};

/* A look at the semaphore, taken under the lock and written after it:
 * the dump's writers may allocate, never under a spinlock. */
struct sem_view {
    uint64_t avail;
    size_t waiting, listed;
    bool closed;
    struct sem_seen first[SEREX__DUMP_LIST_MAX];
};

static void sem_look(serex_semaphore *s, struct sem_view *l)
{
    serex__spin_lock(&s->lock);
    l->avail = sem_avail(s);
    /* relaxed: under the lock that orders its store */
    l->closed = atomic_load_explicit(&s->closed, memory_order_relaxed);
    l->waiting = l->listed = 0;
    for (const struct sem_waiter *w = s->queue.head; w != NULL; w = w->next) {
        if (l->listed < SEREX__DUMP_LIST_MAX)
            l->first[l->listed++] = (struct sem_seen){w->fn, w->target, w->n,
                                                      sem_waiter_cancelled(w)};
        l->waiting++;
    }
    serex__spin_unlock(&s->lock);
}

/* serex_dump: the permits and who waits (a look under the lock). */
static void sem_describe(struct serex__reg *r, struct serex__dump *d)
{
    serex_semaphore *s = (serex_semaphore *)(uintptr_t)r->obj;
    struct sem_view l;

    sem_look(s, &l);
    serex__dump_u64(d, "permits", s->max);
    serex__dump_u64(d, "available", l.avail);
    serex__dump_bool(d, "closed", l.closed);
    serex__dump_array_begin(d, "waiters");
    for (size_t i = 0; i < l.listed; i++) {
        serex__dump_object_begin(d, NULL);
        serex__dump_u64(d, "n", l.first[i].n);
        /* only printed, never called through this type */
        serex__dump_fn(d, "fn", (serex_fn)(void (*)(void))l.first[i].fn);
        serex__dump_ptr(d, "target", l.first[i].target);
        serex__dump_bool(d, "cancelled", l.first[i].cancelled);
        serex__dump_object_end(d);
    }
    serex__dump_array_end(d);
    serex__dump_u64(d, "waiting", l.waiting);
}

static const struct serex__reg_class sem_reg = {"semaphore", sem_describe};

int serex_semaphore_create(uint64_t permits, serex_semaphore **out)
{
    serex_semaphore *s;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    if (permits == 0)
        return SEREX_EINVAL;
    s = serex__calloc(1, sizeof *s);
    if (s == NULL)
        return SEREX_ENOMEM;
    atomic_init(&s->lock, 0);
    atomic_init(&s->avail, permits);
    atomic_init(&s->closed, false);
    s->max = permits;
    serex__reg_add(&s->reg, &sem_reg, s, NULL);
    *out = s;
    return SEREX_OK;
}

enum entry { ENTRY_PARKED, ENTRY_POST, ENTRY_CLOSED };

/*
 * Acquire's critical section for @w (INIT): takes the permits if they are
 * free and no live waiter is parked, else parks it; or finds it cancelled
 * by its fire already, or the semaphore closed.
 */
static enum entry sem_enter_locked(serex_semaphore *s, struct sem_waiter *w)
{
    uint64_t avail = sem_avail(s);
    int was = W_INIT;

    /* relaxed: under the lock that orders close's store */
    if (atomic_load_explicit(&s->closed, memory_order_relaxed))
        return ENTRY_CLOSED;
    if (sem_first_live(s) == NULL && w->n <= avail) {
        if (!sem_waiter_take(w, W_INIT))
            goto cancelled;
        sem_set_avail(s, avail - w->n);
        w->status = SEREX_OK;
        return ENTRY_POST;
    }
    /* relaxed: as sem_waiter_take */
    if (!atomic_compare_exchange_strong_explicit(&w->state, &was, W_WAITING,
                                                 memory_order_relaxed,
                                                 memory_order_relaxed))
        goto cancelled;
    sem_list_push(&s->queue, w);
    return ENTRY_PARKED;
cancelled:
    /* relaxed: the fire's CAS wrote the cause into the word itself */
    w->status = atomic_load_explicit(&w->state, memory_order_relaxed);
    return ENTRY_POST;
}

static struct sem_waiter *sem_waiter_new(serex_semaphore *s, uint32_t n,
                                         serex_executor *target,
                                         serex_permit_fn fn, void *arg)
{
    struct sem_waiter *w = serex__cache_alloc(SEREX__CLASS_128);

    if (w == NULL)
        return NULL;
    w->op.cls = &sem_waiter_class;
    w->next = w->prev = NULL;
    w->sem = s;
    w->target = target;
    w->fn = fn;
    w->arg = arg;
    w->token = NULL;
    w->hook.fire = sem_waiter_fire;
    atomic_init(&w->state, W_INIT);
    w->status = SEREX_OK;
    w->n = n;
    return w;
}

int serex_semaphore_acquire(serex_semaphore *s, uint32_t n,
                            serex_executor *target, serex_permit_fn fn,
                            void *arg, serex_cancel *token)
{
    struct sem_waiter *w;
    enum entry e;

    if (s == NULL || target == NULL || target->ops == NULL || fn == NULL ||
        n == 0 || n > s->max)
        return SEREX_EINVAL;
    /* relaxed: closed never goes back; the check under the lock decides */
    if (atomic_load_explicit(&s->closed, memory_order_relaxed))
        return SEREX_EREJECTED;
    w = sem_waiter_new(s, n, target, fn, arg);
    if (w == NULL)
        return SEREX_ENOMEM;
    if (token != NULL) {
        int cause = serex__cancel_hook_add(token, &w->hook);

        if (cause != 0) { /* cancelled already: no hook, posted at once */
            w->status = cause;
            sem_waiter_post(w);
            return SEREX_OK;
        }
        w->token = token;
    }
    serex__spin_lock(&s->lock);
    e = sem_enter_locked(s, w);
    serex__spin_unlock(&s->lock);
    if (e == ENTRY_POST) {
        sem_waiter_post(w);
    } else if (e == ENTRY_CLOSED) { /* never queued: undo, nothing ran */
        if (w->token != NULL)
            (void)serex__cancel_hook_remove(w->token, &w->hook);
        serex__cache_free(SEREX__CLASS_128, w);
        return SEREX_EREJECTED;
    }
    return SEREX_OK;
}

bool serex_semaphore_try_acquire(serex_semaphore *s, uint32_t n)
{
    bool taken = false;
    uint64_t avail;

    if (s == NULL || n == 0 || n > s->max)
        return false;
    serex__spin_lock(&s->lock);
    avail = sem_avail(s);
    /* relaxed: under the lock that orders close's store */
    if (!atomic_load_explicit(&s->closed, memory_order_relaxed) &&
        sem_first_live(s) == NULL && n <= avail) {
        sem_set_avail(s, avail - n);
        taken = true;
    }
    serex__spin_unlock(&s->lock);
    return taken;
}

void serex_semaphore_release(serex_semaphore *s, uint32_t n)
{
    struct sem_list posts = {NULL, NULL};
    uint64_t avail;

    if (s == NULL || n == 0)
        return;
    serex__spin_lock(&s->lock);
    avail = sem_avail(s);
    if (n > s->max - avail)
        serex__misuse("serex_semaphore_release",
                      "more permits released than were acquired");
    sem_set_avail(s, avail + n);
    sem_grant_locked(s, &posts);
    serex__spin_unlock(&s->lock);
    sem_post_all(&posts); /* s may be gone once the first is posted */
}

uint64_t serex_semaphore_available(const serex_semaphore *s)
{
    return s != NULL ? sem_avail(s) : 0;
}

void serex_semaphore_close(serex_semaphore *s)
{
    struct sem_list posts = {NULL, NULL};
    struct sem_waiter *w;

    if (s == NULL)
        return;
    serex__spin_lock(&s->lock);
    /* relaxed: under the lock; acquire's early look needs no more */
    atomic_store_explicit(&s->closed, true, memory_order_relaxed);
    w = s->queue.head;
    while (w != NULL) {
        struct sem_waiter *next = w->next;

        /* a cancelled one is left to its fire, which unlinks it */
        if (sem_waiter_take(w, W_WAITING)) {
            w->status = SEREX_EREJECTED;
            sem_list_unlink(&s->queue, w);
            sem_list_push(&posts, w);
        }
        w = next;
    }
    serex__spin_unlock(&s->lock);
    sem_post_all(&posts);
}

void serex_semaphore_destroy(serex_semaphore *s)
{
    if (s == NULL)
        return;
    serex__spin_lock(&s->lock);
    while (s->queue.head != NULL) {
        if (sem_first_live(s) != NULL) {
            serex__spin_unlock(&s->lock);
            serex__misuse("serex_semaphore_destroy",
                          "a continuation still waits for permits (close "
                          "the semaphore, or cancel its token, first)");
        }
        /* Only cancelled waiters are left: their fires have won and are
         * on their way to unlink them (the essay), with nothing to wait
         * for but this lock. Let them, so that close then destroy is
         * safe while tokens are being cancelled. */
        serex__spin_unlock(&s->lock);
        serex__thread_yield();
        serex__spin_lock(&s->lock);
    }
    serex__spin_unlock(&s->lock);
    serex__reg_remove(&s->reg); /* off the list before it goes */
    serex__free(s);
}
