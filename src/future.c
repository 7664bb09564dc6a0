/* SPDX-License-Identifier: MIT */
/*
 * future.c - a task's result, waiting, cancellation and continuations, on
 * any executor.
 *
 * A future is a 64-byte block from the node cache: a continuation header
 * (the internal-operation header its task is queued with, op_internal.h,
 * a link and the executor its task runs on), the call (fn and arg), whose
 * fn slot holds the value once it has run, two 32-bit atomic words, the
 * head of its own continuation list and, for a striped submission, the
 * key. The header lets a future made by serex_future_then sit on its
 * source's continuation list and then be queued as its own task.
 *
 * --- state: one future's life ---
 * PENDING -> RUNNING -> DONE, or PENDING -> CANCELLED; plus a WAITERS bit
 * set by a waiter before it parks, and a KEYED bit set at creation (the
 * key field is valid) and kept until the future ends.
 *   - the task (future_call) moves PENDING -> RUNNING by CAS; if it finds
 *     CANCELLED it runs nothing. So cancel and start race on one CAS and
 *     exactly one wins: serex_future_cancel returns true only if the task
 *     had not started and never will.
 *   - the task publishes the value, then exchanges the state to DONE with
 *     release; a waiter's acquire load of DONE sees the value and every
 *     write of the task.
 *   - whoever ends the future (DONE or CANCELLED: the "ender", exactly
 *     one) wakes the parking lot if the WAITERS bit was set (see
 *     park_internal.h for why none is lost), then settles the
 *     continuations (below).
 *
 * --- conts: the continuation list, demystified ---
 * serex_future_on_done and serex_future_then add a record (struct cont) to
 * the future; the ender posts each to its target, in the order they were
 * added. `conts` is one pointer word with four kinds of value:
 *   NULL or a list ending in NULL   open: the future has not ended;
 *   POSTING or a list ending in it  the ender is posting;
 *   CLOSED                          every record is posted; closed for good.
 * Records are pushed at the head (a LIFO, one CAS each), so a list is
 * newest first and is reversed before it is posted.
 *   add (conts_push): CAS the record in front of the head, unless the head
 *       is CLOSED: then the adder posts the record itself, at once.
 *   ender (conts_drain), after publishing the state: exchange the word
 *       with POSTING, taking the list; post it oldest first; then CAS
 *       POSTING -> CLOSED. If that CAS fails, records were pushed (onto
 *       POSTING) while it posted: exchange again, post those, and retry.
 * Who wins each race: the word has one modification order. A push that
 * lands before the ender's exchange is in the first batch; one that lands
 * between an exchange and the closing CAS makes that CAS fail, so it is
 * in a later batch of the same ender; a push attempted after the CAS reads
 * CLOSED and posts itself. Nothing is lost (each record is in exactly one
 * of these cases) and nothing is posted twice (a taken list is private).
 * Order: batches are posted one after the other, each oldest first; and
 * a record that finds CLOSED was added after the closing CAS, which comes
 * after every earlier record was posted. (Closing at once and posting
 * after would let a record added meanwhile, say by a continuation run
 * inline, overtake the ones still being posted.) No one ever waits: the
 * ender never waits for an adder, and an adder only retries a failed CAS.
 * Pushes only ever add at the head, and the list is only ever taken
 * whole, so a recycled record at the head (ABA) is harmless.
 * The outcome is visible inside a continuation: the ender publishes the
 * state before its first exchange, so the records it posts carry it (the
 * executor orders a post before the run); the closing CAS is a release
 * and an adder's read of CLOSED an acquire, so what an adder posts itself
 * carries it too. Hence serex_future_wait(f, 0) answers at once in every
 * continuation.
 * A future made by serex_future_then (`then_class`) is itself a record:
 * when its source ends with a value, the value becomes its argument and
 * it is posted as its own task; when its source is cancelled, it is
 * cancelled too (cancellation passes down the chain). A record whose
 * target refuses it runs at once where it is (promise 2a). Futures that
 * end while one is settled (a then-future cancelled with its source, or
 * run inline) are settled by the same loop, through a FIFO of them, not by
 * recursion: a chain of any length costs no stack.
 *
 * --- refs: who keeps the block alive ---
 * HANDLE, the caller's (cleared by serex_future_release), and task
 * references: one for the queued task (a then-future's: held by its
 * record, from serex_future_then until it runs or is cancelled; dropped
 * when the task runs, or when shutdown_now or a destroy takes it back: its
 * `dropped` hook ends it), and one that serex_future_cancel holds while it
 * settles (a continuation run inline may release the caller's handle).
 * The ender always holds one while it settles. Whoever leaves refs at 0
 * frees. A record on the list holds no reference to the future it waits
 * for, so serex_future_release right after on_done or then is fine. A
 * release that finds HANDLE clear, or a wait, value, cancel, on_done or
 * then on such a future, is a misuse: the program stops with a message
 * (promise 8: never a silent corruption). refs sits past the first 16
 * bytes, which the node cache links through, so a freed future still
 * reads 0 there until the block is handed out again (and under ASan the
 * freed block is poisoned: any touch is reported).
 *
 * --- where: SEREX_EDEADLK ---
 * The header's `target` is the executor the task was submitted to (for a
 * then-future, the one it will be posted to), and KEYED says `key` is the
 * striped key. serex_future_wait asks the calling thread's frames
 * (serex__frame_behind, executor.c) whether a task queued there would
 * start only after the caller's current task returns (promise 7b).
 */
#include <stdatomic.h>

#include "common_internal.h"
#include "executor_internal.h"
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
    WAITERS = 4,
    KEYED = 8
};

#define REF_TASK 1u                 /* a task's (or a settler's) reference */
#define REF_HANDLE (UINT32_C(1) << 31) /* the caller's */

/* A record on a continuation list: an on_done continuation, or a future
 * made by serex_future_then (its class says which). */
struct cont {
    struct serex__op op;    /* posted to target as this op */
    struct cont *next;      /* the list (then a private list) */
    serex_executor *target; /* where it runs; a future's: where its task
                               runs (SEREX_EDEADLK) */
};

struct serex_future {
    struct cont c; /* the task is queued as c.op */
    union {
        serex_call_fn fn; /* until the task calls it */
        void *value;      /* then: written before DONE is published */
    };
    void *arg;
    _Atomic uint32_t state;     /* see the essay; written by the task,
                                   cancel and waiters (WAITERS) */
    _Atomic uint32_t refs;      /* REF_HANDLE | task refs; see the essay */
    struct cont *_Atomic conts; /* see the essay; pushed by adders, taken
                                   and closed by the ender */
    uint64_t key;               /* the striped key, if KEYED */
};

/* A serex_future_on_done continuation. */
struct on_done {
    struct cont c;
    serex_fn fn;
    void *arg;
};

_Static_assert(sizeof(struct serex_future) <= 64, "a future fits class 64");
_Static_assert(sizeof(struct on_done) <= 64, "an on_done fits class 64");
_Static_assert(offsetof(struct serex_future, c.op) == 0,
               "the task's argument is the future itself");
_Static_assert(offsetof(struct serex_future, refs) >= 16,
               "refs outlives the node cache's links in a freed block");

/* The two marks of `conts` (see the essay); never dereferenced. */
static struct cont conts_posting, conts_closed;
#define POSTING (&conts_posting)
#define CLOSED (&conts_closed)

static const struct serex__op_class future_class, then_class, on_done_class;

/* Futures ended while settling, still to settle: a FIFO linked through
 * c.next (each is off its source's list); each holds a task reference. */
struct ended {
    struct cont *head, **tail;
};

static void future_free(serex_future *f)
{
    /* what a second release finds, until the block is handed out again */
    atomic_store_explicit(&f->refs, 0, memory_order_relaxed);
    serex__cache_free(SEREX__CLASS_64, f);
}

/* Drops a task's reference. */
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

/* --- ending a future --- */

/* Ends a PENDING future as cancelled; false if it had left PENDING. The
 * caller settles it if true. */
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

/* Runs the call unless cancelled first. true if it ran: the future is
 * DONE and its waiters are woken; the caller settles it. */
static bool future_call(serex_future *f)
{
    /* relaxed: a first guess for the CAS */
    uint32_t s = atomic_load_explicit(&f->state, memory_order_relaxed);
    uint32_t old;

    /*
     * relaxed: the executor (or the settler that runs it inline) already
     * ordered the submission before this run, so the CAS only has to
     * decide the race with cancel, which the single modification order of
     * the word does. Keeps WAITERS and KEYED: a wait from inside the call
     * still needs its key.
     */
    do {
        if ((s & STATE_MASK) == CANCELLED)
            return false; /* cancelled: the call never runs */
        SEREX_ASSERT((s & STATE_MASK) == PENDING);
    } while (!atomic_compare_exchange_weak_explicit(
        &f->state, &s, (s & (WAITERS | KEYED)) | RUNNING,
        memory_order_relaxed, memory_order_relaxed));
    f->value = f->fn(f->arg); /* fn is read before value overwrites it */
    /* release: publishes value and the call's writes (pairs with the
     * acquire loads in serex_future_wait and serex_future_value) */
    old = atomic_exchange_explicit(&f->state, DONE, memory_order_release);
    if (old & WAITERS)
        serex__park_wake_all(&f->state);
    return true;
}

/* --- continuations --- */

static void ended_push(struct ended *e, serex_future *f)
{
    f->c.next = NULL;
    *e->tail = &f->c;
    e->tail = &f->c.next;
}

/* An on_done continuation: runs (on its target, or where it is when its
 * target refused or dropped it: promise 2a) and frees its record. */
static void on_done_run(struct serex__op *op)
{
    struct on_done d = *serex__container_of(op, struct on_done, c.op);

    serex__cache_free(SEREX__CLASS_64, op);
    d.fn(d.arg);
}

/*
 * Posts record @c of @x, which has ended: the caller is @x's ender, or an
 * adder that found the list CLOSED (its acquire read makes @x's end
 * visible), and holds a reference to @x. A then-future that ends here is
 * put on @more, holding its task reference, for the caller to settle.
 */
static void cont_dispatch(struct cont *c, serex_future *x, struct ended *more)
{
    serex_future *g;
    /* relaxed: x's end is our own write, or made visible by the acquire
     * that found CLOSED; it never changes after */
    uint32_t s = atomic_load_explicit(&x->state, memory_order_relaxed);

    if (c->op.cls == &on_done_class) {
        if (serex__op_submit(c->target, &c->op) != SEREX_OK)
            on_done_run(&c->op); /* refused: run here (promise 2a) */
        return;
    }
    g = serex__container_of(c, serex_future, c);
    if ((s & STATE_MASK) == DONE) {
        /* relaxed: a hint only (a cancelled g needs no post); the CAS in
         * future_call decides */
        if ((atomic_load_explicit(&g->state, memory_order_relaxed) &
             STATE_MASK) != CANCELLED) {
            g->arg = x->value; /* the call's argument: the source's value */
            if (serex__op_submit(c->target, &c->op) == SEREX_OK)
                return; /* its reference passes to the queued task */
            if (future_call(g)) { /* refused: run here (promise 2a) */
                ended_push(more, g);
                return;
            }
        }
    } else if (future_cancel_pending(g)) { /* cancellation passes down */
        ended_push(more, g);
        return;
    }
    future_unref(g); /* cancelled by its holder, who settled it */
}

/* Reverses a list taken from `conts` (newest first, ending in NULL or
 * POSTING) into a private list, oldest first. */
static struct cont *conts_reverse(struct cont *c)
{
    struct cont *out = NULL;

    while (c != NULL && c != POSTING) {
        struct cont *next = c->next;

        c->next = out;
        out = c;
        c = next;
    }
    return out;
}

/* The ender's side of the list protocol (see the essay): post every
 * record of @x, batch by batch, then close the list. */
static void conts_drain(serex_future *x, struct ended *more)
{
    /* acquire: pairs with the release of each push, so every record's
     * fields and link are visible */
    struct cont *c = atomic_exchange_explicit(&x->conts, POSTING,
                                              memory_order_acquire);

    for (;;) {
        struct cont *expect = POSTING;

        for (c = conts_reverse(c); c != NULL;) {
            struct cont *next = c->next; /* c may be gone once posted */

            cont_dispatch(c, x, more);
            c = next;
        }
        /* release: our end of x (published before the first exchange)
         * and our posts happen-before an adder that reads CLOSED; relaxed
         * on failure: the exchange below acquires what was pushed */
        if (atomic_compare_exchange_strong_explicit(&x->conts, &expect, CLOSED,
                                                    memory_order_release,
                                                    memory_order_relaxed))
            return;
        /* acquire: as the first exchange */
        c = atomic_exchange_explicit(&x->conts, POSTING, memory_order_acquire);
    }
}

/* Settles the futures on @more, and those they end, until none is left. */
static void ended_settle(struct ended *more)
{
    while (more->head != NULL) {
        serex_future *g = serex__container_of(more->head, serex_future, c);

        more->head = g->c.next;
        if (more->head == NULL)
            more->tail = &more->head;
        conts_drain(g, more);
        future_unref(g);
    }
}

/* @f has just ended by the caller, who holds a reference: post what hangs
 * on it, and settle every then-future that ends with it. */
static void future_settle(serex_future *f)
{
    struct ended more = {NULL, &more.head};

    conts_drain(f, &more);
    ended_settle(&more);
}

/* An adder's side of the list protocol: false if the list is CLOSED (the
 * future has ended, and its end is visible to the caller). */
static bool conts_push(serex_future *f, struct cont *c)
{
    /* acquire: on reading CLOSED, pairs with the closing release CAS in
     * conts_drain: the end of the future happens-before what we post */
    struct cont *head = atomic_load_explicit(&f->conts, memory_order_acquire);

    do {
        if (head == CLOSED)
            return false;
        c->next = head;
        /* acq_rel: the release publishes the record's fields and link to
         * the ender's acquire exchange; acquire on failure, as the load */
    } while (!atomic_compare_exchange_weak_explicit(
        &f->conts, &head, c, memory_order_acq_rel, memory_order_acquire));
    return true;
}

/* Adds record @c to @f: the ender posts it, or, @f ended, we do now. */
static void future_add(serex_future *f, struct cont *c)
{
    struct ended more = {NULL, &more.head};

    if (conts_push(f, c))
        return;
    cont_dispatch(c, f, &more);
    ended_settle(&more);
}

/* --- the task's hooks --- */

static void future_run(struct serex__op *op)
{
    serex_future *f = serex__container_of(op, serex_future, c.op);

    if (future_call(f))
        future_settle(f);
    future_unref(f);
}

/* Taken back or dropped by its executor: complete as cancelled. */
static void future_dropped(struct serex__op *op, serex_pending_fn on_pending,
                           void *ctx)
{
    serex_future *f = serex__container_of(op, serex_future, c.op);

    (void)on_pending; /* a future's task is never the user's to run */
    (void)ctx;
    if (future_cancel_pending(f))
        future_settle(f);
    future_unref(f);
}

/* A then-future taken back or dropped by its target: it is a
 * continuation, so it runs here (promise 2a), as a refused one does. */
static void then_dropped(struct serex__op *op, serex_pending_fn on_pending,
                         void *ctx)
{
    (void)on_pending;
    (void)ctx;
    future_run(op);
}

static void on_done_dropped(struct serex__op *op, serex_pending_fn on_pending,
                            void *ctx)
{
    (void)on_pending;
    (void)ctx;
    on_done_run(op); /* runs here (promise 2a) */
}

static const struct serex__op_class future_class = {
    "future", future_run, future_dropped,
};
static const struct serex__op_class then_class = {
    "future then", future_run, then_dropped,
};
static const struct serex__op_class on_done_class = {
    "future continuation", on_done_run, on_done_dropped,
};

static serex_future *future_new(const struct serex__op_class *cls,
                                serex_executor *ex, const uint64_t *key,
                                serex_call_fn fn, void *arg)
{
    serex_future *f = serex__cache_alloc(SEREX__CLASS_64);

    if (f != NULL) {
        f->c.op.cls = cls;
        f->c.next = NULL;
        f->c.target = ex;
        atomic_init(&f->state, key != NULL ? PENDING | KEYED : PENDING);
        atomic_init(&f->refs, REF_HANDLE | REF_TASK);
        atomic_init(&f->conts, NULL);
        f->key = key != NULL ? *key : 0;
        f->fn = fn;
        f->arg = arg;
    }
    return f;
}

serex_future *serex__future_new(serex_executor *ex, const uint64_t *key,
                                serex_call_fn fn, void *arg, serex_fn *task)
{
    serex_future *f = future_new(&future_class, ex, key, fn, arg);

    if (f != NULL)
        *task = serex__op_run;
    return f;
}

void serex__future_abort(serex_future *f)
{
    future_free(f); /* never shared: free at once */
}

/* --- the calls --- */

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
    f = serex__future_new(ex, NULL, fn, arg, &task);
    if (f == NULL)
        return SEREX_ENOMEM;
    rc = serex_execute(ex, task, &f->c.op);
    if (rc != SEREX_OK) {
        serex__future_abort(f);
        return rc;
    }
    *out = f;
    return SEREX_OK;
}

/* Whether @f's task, not ended (state @s), is queued behind the caller's
 * current task (promise 7b). */
static bool future_behind(const serex_future *f, uint32_t s)
{
    return serex__frame_behind(f->c.target, (s & KEYED) ? &f->key : NULL);
}

int serex_future_wait(serex_future *f, int64_t timeout_ns)
{
    int64_t deadline = INT64_MAX;

    if (f == NULL || !serex__timeout_valid(timeout_ns))
        return SEREX_EINVAL;
    future_check_handle(f, "serex_future_wait");
    if (timeout_ns > 0)
        deadline = serex__deadline(timeout_ns);
    for (bool first = true;; first = false) {
        /* acquire: pairs with the release that ends the future */
        uint32_t s = atomic_load_explicit(&f->state, memory_order_acquire);

        if ((s & STATE_MASK) == DONE)
            return SEREX_OK;
        if ((s & STATE_MASK) == CANCELLED)
            return SEREX_ECANCELED;
        if (first && future_behind(f, s))
            return SEREX_EDEADLK; /* it could never end while we wait */
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
    if (!future_cancel_pending(f))
        return false;
    /* relaxed: we hold the handle, so the future is alive; this reference
     * keeps it so while its continuations run here (one may release the
     * handle), and future_unref's acq_rel orders the rest */
    atomic_fetch_add_explicit(&f->refs, REF_TASK, memory_order_relaxed);
    future_settle(f);
    future_unref(f);
    return true;
}

int serex_future_on_done(serex_future *f, serex_executor *target, serex_fn fn,
                         void *arg)
{
    struct on_done *d;

    if (f == NULL || target == NULL || target->ops == NULL || fn == NULL)
        return SEREX_EINVAL;
    future_check_handle(f, "serex_future_on_done");
    d = serex__cache_alloc(SEREX__CLASS_64);
    if (d == NULL)
        return SEREX_ENOMEM;
    *d = (struct on_done){{{&on_done_class}, NULL, target}, fn, arg};
    future_add(f, &d->c);
    return SEREX_OK;
}

int serex_future_then(serex_future *f, serex_executor *target,
                      serex_call_fn call_fn, serex_future **next)
{
    serex_future *g;

    if (next == NULL)
        return SEREX_EINVAL;
    *next = NULL;
    if (f == NULL || target == NULL || target->ops == NULL || call_fn == NULL)
        return SEREX_EINVAL;
    future_check_handle(f, "serex_future_then");
    g = future_new(&then_class, target, NULL, call_fn, NULL);
    if (g == NULL)
        return SEREX_ENOMEM;
    *next = g; /* ours to hand out: the handle keeps it alive */
    future_add(f, &g->c);
    return SEREX_OK;
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
