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
 * PENDING -> RUNNING -> DONE, or PENDING -> FAILED, or RUNNING -> FAILED
 * (a deadline, or an error the call set); FAILED carries its code in the
 * top 16 bits (SEREX_ECANCELED for a cancel). Plus a WAITERS bit set by a
 * waiter before it parks, a KEYED bit set at creation (the key field is
 * valid) and kept until the future ends, PROMISE for a future with no
 * task (serex_promise_create), and POKE, flipped by a token to wake a
 * serex_future_wait_token.
 *   - the task (future_call) moves PENDING -> RUNNING by CAS; if it finds
 *     FAILED it runs nothing. So cancel and start race on one CAS and
 *     exactly one wins: serex_future_cancel returns true only if the task
 *     had not started and never will.
 *   - the task publishes the value, then CASes RUNNING to DONE (or to
 *     FAILED with the error it set) with release; a waiter's acquire load
 *     of DONE sees the value and every write of the task. If a deadline
 *     ended it first (RUNNING -> FAILED, serex__future_fail), the CAS
 *     finds FAILED and the value is dropped: the deadline was the ender.
 *   - whoever ends the future (the "ender", exactly one: the CAS that left
 *     PENDING or RUNNING for an end) wakes the parking lot if the WAITERS
 *     bit was set (see park_internal.h for why none is lost), then settles
 *     the continuations (below).
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
#include "alloc_internal.h"
#include "cancel_internal.h"
#include "future_internal.h"
#include "nodecache_internal.h"
#include "op_internal.h"
#include "park_internal.h"
#include "thread_internal.h"

enum {
    PENDING = 0,
    RUNNING = 1,
    DONE = 2,
    FAILED = 3, /* cancelled, or an error: the code is in ERR_SHIFT */
    STATE_MASK = 3,
    WAITERS = 4,
    KEYED = 8,
    PROMISE = 16, /* no task: ended by serex_future_complete or _fail */
    POKE = 32,    /* flipped by a token to wake serex_future_wait_token */
    ERR_SHIFT = 16
};

/* A FAILED state word with @code (SEREX_ERROR_MIN .. -1). */
static uint32_t failed_with(int code)
{
    return FAILED | (uint32_t)-code << ERR_SHIFT;
}

/* The code of a FAILED state word. */
static int state_error(uint32_t s)
{
    return -(int)(s >> ERR_SHIFT);
}

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

static const struct serex__op_class future_class, then_class, on_done_class,
    watch_class;

/*
 * A watch: serex's own record on a continuation list (a token's link, a
 * combinator's input), called inline by whoever settles the future, with
 * its end state @s. Never queued: its class has no run. It may end other
 * futures: it pushes each, with a task reference, on @more.
 */
struct ended;
struct watch {
    struct cont c;
    void (*fn)(struct watch *w, serex_future *x, uint32_t s,
               struct ended *more);
};

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

/* Ends @f with @code if it is PENDING (or RUNNING, with @running_too:
 * a deadline ends a future whose call still runs; the call's value is
 * then dropped); false if it had ended, or was RUNNING without
 * @running_too. The caller settles it if true. */
static bool future_fail_state(serex_future *f, int code, bool running_too)
{
    /* relaxed: a first guess for the CAS */
    uint32_t s = atomic_load_explicit(&f->state, memory_order_relaxed);

    do {
        uint32_t st = s & STATE_MASK;

        if (st != PENDING && !(running_too && st == RUNNING))
            return false;
        /* acq_rel: the release publishes the end to waiters (their
         * acquire load); the acquire orders the WAITERS read */
    } while (!atomic_compare_exchange_weak_explicit(
        &f->state, &s, failed_with(code), memory_order_acq_rel,
        memory_order_relaxed));
    if (s & WAITERS)
        serex__park_wake_all(&f->state);
    return true;
}

static bool future_cancel_pending(serex_future *f)
{
    return future_fail_state(f, SEREX_ECANCELED, false);
}

/* Ends @f, which the caller moved to RUNNING (a call, or a completer's
 * claim), with @end: DONE (the value is written) or FAILED. false if a
 * deadline ended it meanwhile (RUNNING -> FAILED): it stays so, and the
 * value is dropped. true: its waiters are woken; the caller settles it. */
static bool future_end_running(serex_future *f, uint32_t end)
{
    /* relaxed: a first guess for the CAS */
    uint32_t s = atomic_load_explicit(&f->state, memory_order_relaxed);

    /* release: publishes the value and the writes before it (pairs with
     * the acquire loads in serex_future_wait and serex_future_value) */
    do {
        if ((s & STATE_MASK) != RUNNING)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(
        &f->state, &s, end, memory_order_release, memory_order_relaxed));
    if (s & WAITERS)
        serex__park_wake_all(&f->state);
    return true;
}

/* The future whose call runs on this thread, and the error it set
 * (serex_future_set_error); saved and restored around each call. */
static SEREX__THREAD_LOCAL serex_future *future_running;
static SEREX__THREAD_LOCAL int future_running_error;
static SEREX__THREAD_LOCAL int future_last_error; /* the last call's */

int serex__future_take_error(void)
{
    int err = future_last_error;

    future_last_error = 0;
    return err;
}

/* Calls fn(arg) as @f's call; the error it set, or 0. */
static int future_invoke(serex_future *f)
{
    serex_future *outer = future_running;
    int outer_error = future_running_error;
    int err;

    future_running = f;
    future_running_error = 0;
    f->value = f->fn(f->arg); /* fn is read before value overwrites it */
    err = future_running_error;
    future_last_error = err;
    future_running = outer;
    future_running_error = outer_error;
    return err;
}

/* Runs the call unless cancelled first. true if it ran and ended the
 * future (DONE, or FAILED with the error the call set): its waiters are
 * woken; the caller settles it. false if it never ran, or a deadline
 * ended the future while it ran (the deadline settled it). */
static bool future_call(serex_future *f)
{
    /* relaxed: a first guess for the CAS */
    uint32_t s = atomic_load_explicit(&f->state, memory_order_relaxed);
    int err;

    /*
     * relaxed: the executor (or the settler that runs it inline) already
     * ordered the submission before this run, so the CAS only has to
     * decide the race with cancel, which the single modification order of
     * the word does. Keeps WAITERS, KEYED and POKE: a wait from inside
     * the call still needs its key.
     */
    do {
        if ((s & STATE_MASK) == FAILED)
            return false; /* cancelled: the call never runs */
        SEREX_ASSERT((s & STATE_MASK) == PENDING);
    } while (!atomic_compare_exchange_weak_explicit(
        &f->state, &s, (s & (WAITERS | KEYED | POKE)) | RUNNING,
        memory_order_relaxed, memory_order_relaxed));
    err = future_invoke(f);
    return future_end_running(f, err != 0 ? failed_with(err) : DONE);
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
    if (c->op.cls == &watch_class) { /* serex's own: runs here, inline */
        struct watch *w = serex__container_of(c, struct watch, c);

        w->fn(w, x, s, more);
        return;
    }
    g = serex__container_of(c, serex_future, c);
    if ((s & STATE_MASK) == DONE) {
        /* relaxed: a hint only (a cancelled g needs no post); the CAS in
         * future_call decides */
        if ((atomic_load_explicit(&g->state, memory_order_relaxed) &
             STATE_MASK) != FAILED) {
            g->arg = x->value; /* the call's argument: the source's value */
            if (serex__op_submit(c->target, &c->op) == SEREX_OK)
                return; /* its reference passes to the queued task */
            if (future_call(g)) { /* refused: run here (promise 2a) */
                ended_push(more, g);
                return;
            }
        }
    } else if (future_fail_state(g, state_error(s), false)) {
        ended_push(more, g); /* cancellation and errors pass down */
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
static const struct serex__op_class watch_class = {
    "future watch", NULL, NULL, /* never queued */
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

/* The wait: until @f ends, the time runs out, or @token (if not NULL) is
 * cancelled (its hook changes the word we park on). */
static int future_wait_or(serex_future *f, int64_t timeout_ns,
                          const serex_cancel *token)
{
    int64_t deadline = INT64_MAX;

    if (timeout_ns > 0)
        deadline = serex__deadline(timeout_ns);
    for (bool first = true;; first = false) {
        /* acquire: pairs with the release that ends the future */
        uint32_t s = atomic_load_explicit(&f->state, memory_order_acquire);
        int cause;

        if ((s & STATE_MASK) == DONE)
            return SEREX_OK;
        if ((s & STATE_MASK) == FAILED)
            return state_error(s);
        if (first && future_behind(f, s))
            return SEREX_EDEADLK; /* it could never end while we wait */
        if (token != NULL && (cause = serex_cancel_cause(token)) != 0)
            return cause;
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

int serex_future_wait(serex_future *f, int64_t timeout_ns)
{
    if (f == NULL || !serex__timeout_valid(timeout_ns))
        return SEREX_EINVAL;
    future_check_handle(f, "serex_future_wait");
    return future_wait_or(f, timeout_ns, NULL);
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
    /* A promise never completed is broken: no one else can end it, so its
     * continuations and chained futures get SEREX_ECANCELED now. relaxed:
     * PROMISE never changes; the CAS in future_fail_state decides. */
    if ((atomic_load_explicit(&f->state, memory_order_relaxed) & PROMISE) &&
        (atomic_load_explicit(&f->refs, memory_order_relaxed) & REF_HANDLE))
        serex__future_fail(f, SEREX_ECANCELED, false);
    /* acq_rel: as future_unref (the last holder frees) */
    old = atomic_fetch_and_explicit(&f->refs, ~REF_HANDLE,
                                    memory_order_acq_rel);
    if (serex__unlikely(!(old & REF_HANDLE)))
        serex__misuse("serex_future_release", "future released twice");
    if (old == REF_HANDLE)
        future_free(f);
}

/* --- errors and promises --- */

int serex_future_set_error(int err)
{
    if (err >= 0 || err < SEREX_ERROR_MIN || future_running == NULL)
        return SEREX_EINVAL;
    future_running_error = err;
    return SEREX_OK;
}

int serex_future_error(serex_future *f)
{
    uint32_t s;

    if (f == NULL)
        return 0;
    future_check_handle(f, "serex_future_error");
    /* acquire: as serex_future_wait */
    s = atomic_load_explicit(&f->state, memory_order_acquire);
    return (s & STATE_MASK) == FAILED ? state_error(s) : 0;
}

int serex_promise_create(serex_future **out)
{
    serex_future *f;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = f = future_new(&future_class, NULL, NULL, NULL, NULL);
    if (f == NULL)
        return SEREX_ENOMEM;
    atomic_init(&f->state, PENDING | PROMISE);
    atomic_init(&f->refs, REF_HANDLE); /* no task: the handle ends it */
    return SEREX_OK;
}

/* Ends @f (no task runs it) with @value, as a task would: claims it
 * (PENDING -> RUNNING, so no cancel or second end can overlap the value's
 * write), writes the value, publishes DONE. true if it ended it: the
 * caller settles it. */
static bool future_finish(serex_future *f, void *value)
{
    /* relaxed: a first guess for the CAS */
    uint32_t s = atomic_load_explicit(&f->state, memory_order_relaxed);

    do {
        if ((s & STATE_MASK) != PENDING)
            return false;
        /* relaxed: only decides who writes the value; the release below
         * publishes it */
    } while (!atomic_compare_exchange_weak_explicit(
        &f->state, &s, (s & ~(uint32_t)STATE_MASK) | RUNNING,
        memory_order_relaxed, memory_order_relaxed));
    f->value = value;
    return future_end_running(f, DONE);
}

/* Settles @f, just ended by the caller, holding a reference meanwhile
 * (a continuation run inline may release the last other one). */
static void future_settle_held(serex_future *f)
{
    /* relaxed: the caller's hold keeps f alive while we take this */
    atomic_fetch_add_explicit(&f->refs, REF_TASK, memory_order_relaxed);
    future_settle(f);
    future_unref(f);
}

static bool promise_check(serex_future *f, const char *call)
{
    if (f == NULL)
        return false;
    future_check_handle(f, call);
    /* relaxed: PROMISE is set at creation and never changes */
    return (atomic_load_explicit(&f->state, memory_order_relaxed) & PROMISE) !=
           0;
}

bool serex_future_complete(serex_future *f, void *value)
{
    if (!promise_check(f, "serex_future_complete") || !future_finish(f, value))
        return false;
    future_settle_held(f);
    return true;
}

bool serex_future_fail(serex_future *f, int err)
{
    if (err >= 0 || err < SEREX_ERROR_MIN ||
        !promise_check(f, "serex_future_fail") ||
        !future_fail_state(f, err, false))
        return false;
    future_settle_held(f);
    return true;
}

bool serex__future_fail(serex_future *f, int code, bool running_too)
{
    if (!future_fail_state(f, code, running_too))
        return false;
    future_settle_held(f);
    return true;
}

/* --- a token's link (serex_future_cancel_on, deadlines) --- */

/*
 * A bind is a watch on the future and a hook on the token. Whichever end
 * comes first: the token's fire ends the future with its cause (if it
 * has not started; with running_too, also while it runs), or the future
 * ends by itself and its watch removes the hook. The hook is removed
 * once (`unhooked`, exchanged by both): by the watch, or by the fire
 * after its work (a fire may remove its own hook). Two references keep
 * the record: the hook side (dropped by the fire, or by a remove that
 * said it never will fire) and the watch side (dropped by the watch).
 * The future is alive during a fire: its ender holds it while it
 * settles, and the watch's remove waits for a running fire.
 */
struct bind {
    struct watch w;
    struct serex__cancel_hook hook;
    serex_cancel *tok;
    serex_future *f;
    _Atomic uint32_t refs;
    _Atomic bool unhooked;
    bool running_too; /* a deadline: ends a running call too */
    bool owns;        /* holds tok's handle, and cancels it at the end */
};

static void bind_unref(struct bind *b)
{
    /* acq_rel: the last holder sees the other's uses */
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (b->owns)
        serex_cancel_release(b->tok);
    serex__free(b);
}

static void bind_unhook(struct bind *b)
{
    /* relaxed: only picks who removes; the remove orders */
    if (atomic_exchange_explicit(&b->unhooked, true, memory_order_relaxed))
        return;
    if (serex__cancel_hook_remove(b->tok, &b->hook))
        bind_unref(b); /* it never fires: the hook side is ours */
}

static void bind_fire(struct serex__cancel_hook *h, int cause)
{
    struct bind *b = serex__container_of(h, struct bind, hook);

    serex__future_fail(b->f, cause, b->running_too);
    bind_unhook(b); /* from inside the fire: at once */
    bind_unref(b);  /* the hook side */
}

static void bind_watch(struct watch *w, serex_future *x, uint32_t s,
                       struct ended *more)
{
    struct bind *b = serex__container_of(w, struct bind, w);

    (void)x;
    (void)s;
    (void)more;
    bind_unhook(b);
    if (b->owns) /* ours alone: stop what else it holds (a deadline) */
        serex_cancel_request(b->tok, 0);
    bind_unref(b); /* the watch side */
}

int serex__future_bind(serex_future *f, serex_cancel *tok, bool running_too,
                       bool owns)
{
    struct bind *b = serex__alloc(sizeof *b);
    int cause;

    if (b == NULL)
        return SEREX_ENOMEM;
    *b = (struct bind){.w = {{{&watch_class}, NULL, NULL}, bind_watch},
                       .hook = {NULL, NULL, bind_fire},
                       .tok = tok,
                       .f = f,
                       .running_too = running_too,
                       .owns = owns};
    atomic_init(&b->refs, 2);
    atomic_init(&b->unhooked, false);
    cause = serex__cancel_hook_add(tok, &b->hook);
    if (cause != 0) { /* cancelled already */
        serex__future_fail(f, cause, running_too);
        if (owns)
            serex_cancel_release(tok);
        serex__free(b);
        return SEREX_OK;
    }
    future_add(f, &b->w.c);
    return SEREX_OK;
}

int serex_future_cancel_on(serex_future *f, serex_cancel *token)
{
    if (f == NULL || token == NULL)
        return SEREX_EINVAL;
    future_check_handle(f, "serex_future_cancel_on");
    return serex__future_bind(f, token, false, false);
}

/* serex_future_wait_token's hook: wakes the waiter by changing the word
 * it parks on (POKE), so its park cannot sleep through the request. */
struct wait_poke {
    struct serex__cancel_hook hook;
    serex_future *f;
};

static void wait_poke_fire(struct serex__cancel_hook *h, int cause)
{
    struct wait_poke *p = serex__container_of(h, struct wait_poke, hook);

    (void)cause;
    /* relaxed: the waiter re-reads the token's cause with acquire; the
     * word only has to change for its park to return */
    atomic_fetch_xor_explicit(&p->f->state, POKE, memory_order_relaxed);
    serex__park_wake_all(&p->f->state);
}

int serex_future_wait_token(serex_future *f, int64_t timeout_ns,
                            serex_cancel *token)
{
    struct wait_poke p = {{NULL, NULL, wait_poke_fire}, f};
    int rc;

    if (token == NULL)
        return serex_future_wait(f, timeout_ns);
    if (f == NULL || !serex__timeout_valid(timeout_ns))
        return SEREX_EINVAL;
    future_check_handle(f, "serex_future_wait_token");
    if (serex__cancel_hook_add(token, &p.hook) != 0)
        return future_wait_or(f, 0, token); /* cancelled already */
    rc = future_wait_or(f, timeout_ns, token);
    serex__cancel_hook_remove(token, &p.hook);
    return rc;
}

/* --- combinators: serex_future_all, serex_future_any --- */

/*
 * A combinator watches each input (a watch on its list) and ends `out`,
 * a future with no task. Each input's end is counted down in `left`;
 * `decided` is set once, by whoever ends out first: the first error of
 * a fail-fast all, the first value of an any, or the last input's end.
 * `err` keeps the first error seen. Losers are cancelled (if asked) by
 * the one that decided, through the references the combinator holds on
 * every input. References to the combinator: one per input's watch and
 * one for its creation; the last frees it, dropping its holds on the
 * inputs and on out.
 */
struct comb_in {
    struct watch w;
    struct comb *cb;
    serex_future *f; /* held: one task reference */
};

struct comb {
    serex_future *out; /* held: one task reference */
    _Atomic uint32_t refs;
    _Atomic uint32_t left;
    _Atomic int err;
    _Atomic bool decided;
    bool any, cancel_rest;
    size_t n;
    struct comb_in in[]; /* n of them */
};

static void comb_unref(struct comb *cb)
{
    /* acq_rel: the last holder sees every watch's uses */
    if (atomic_fetch_sub_explicit(&cb->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < cb->n; i++)
        future_unref(cb->in[i].f);
    future_unref(cb->out);
    serex__free(cb);
}

/* Puts @f, just ended by us, on @more to be settled (with a reference). */
static void comb_ended(serex_future *f, struct ended *more)
{
    /* relaxed: our hold keeps f alive; ended_settle's unref orders */
    atomic_fetch_add_explicit(&f->refs, REF_TASK, memory_order_relaxed);
    ended_push(more, f);
}

/* Ends out (a value, or @err) if no one has; cancels the others if asked. */
static void comb_decide(struct comb *cb, const struct comb_in *self,
                        void *value, int err, struct ended *more)
{
    bool ended;

    /* relaxed: one winner; the futures' own words order the rest */
    if (atomic_exchange_explicit(&cb->decided, true, memory_order_relaxed))
        return;
    ended = err == 0 ? future_finish(cb->out, value)
                     : future_fail_state(cb->out, err, false);
    if (ended)
        comb_ended(cb->out, more);
    if (!cb->cancel_rest || self == NULL)
        return;
    /* Settled here, not through @more: an input made by
     * serex_future_then is still a record on its source's list, linked
     * through the very field that @more would overwrite. */
    for (size_t i = 0; i < cb->n; i++)
        if (&cb->in[i] != self)
            serex__future_fail(cb->in[i].f, SEREX_ECANCELED, false);
}

static void comb_watch(struct watch *w, serex_future *x, uint32_t s,
                       struct ended *more)
{
    struct comb_in *in = serex__container_of(w, struct comb_in, w);
    struct comb *cb = in->cb;
    int none = 0;

    if ((s & STATE_MASK) == DONE) {
        if (cb->any)
            comb_decide(cb, in, x->value, 0, more);
    } else {
        /* relaxed: the first error wins; read after `left` reaches 0 */
        atomic_compare_exchange_strong_explicit(&cb->err, &none, state_error(s),
                                                memory_order_relaxed,
                                                memory_order_relaxed);
        if (!cb->any && cb->cancel_rest)
            comb_decide(cb, in, NULL, state_error(s), more);
    }
    /* acq_rel: the last input's watch sees every other's err */
    if (atomic_fetch_sub_explicit(&cb->left, 1, memory_order_acq_rel) == 1)
        comb_decide(cb, NULL, NULL,
                    atomic_load_explicit(&cb->err, memory_order_relaxed), more);
    comb_unref(cb);
}

static int future_comb(serex_future *const *fs, size_t n, unsigned flags,
                       bool any, serex_future **out)
{
    struct comb *cb;
    serex_future *o;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    if ((fs == NULL && n > 0) || (any && n == 0) ||
        (flags & ~(unsigned)SEREX_FUTURE_CANCEL_REST) != 0 ||
        n > UINT32_MAX - 1)
        return SEREX_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (fs[i] == NULL)
            return SEREX_EINVAL;
        future_check_handle(fs[i],
                            any ? "serex_future_any" : "serex_future_all");
    }
    o = future_new(&future_class, NULL, NULL, NULL, NULL);
    if (o == NULL)
        return SEREX_ENOMEM;
    if (n == 0) { /* all of nothing: done */
        future_finish(o, NULL);
        atomic_store_explicit(&o->refs, REF_HANDLE, memory_order_relaxed);
        atomic_store_explicit(&o->conts, CLOSED, memory_order_relaxed);
        *out = o;
        return SEREX_OK;
    }
    cb = serex__alloc(sizeof *cb + n * sizeof cb->in[0]);
    if (cb == NULL) {
        future_free(o);
        return SEREX_ENOMEM;
    }
    cb->out = o;
    atomic_init(&cb->refs, (uint32_t)n + 1);
    atomic_init(&cb->left, (uint32_t)n);
    atomic_init(&cb->err, 0);
    atomic_init(&cb->decided, false);
    cb->any = any;
    cb->cancel_rest = (flags & SEREX_FUTURE_CANCEL_REST) != 0;
    cb->n = n;
    for (size_t i = 0; i < n; i++) {
        cb->in[i] = (struct comb_in){
            {{{&watch_class}, NULL, NULL}, comb_watch}, cb, fs[i]};
        /* relaxed: the caller's handle keeps it alive meanwhile */
        atomic_fetch_add_explicit(&fs[i]->refs, REF_TASK, memory_order_relaxed);
    }
    *out = o; /* the handle is the caller's; cb holds the task ref */
    for (size_t i = 0; i < n; i++)
        future_add(fs[i], &cb->in[i].w.c);
    comb_unref(cb);
    return SEREX_OK;
}

int serex_future_all(serex_future *const *fs, size_t n, unsigned flags,
                     serex_future **out)
{
    return future_comb(fs, n, flags, false, out);
}

int serex_future_any(serex_future *const *fs, size_t n, unsigned flags,
                     serex_future **out)
{
    return future_comb(fs, n, flags, true, out);
}
