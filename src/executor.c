/* SPDX-License-Identifier: MIT */
/*
 * executor.c - status strings, the generic serex_* calls that check their
 * arguments once and dispatch through the vtable, the per-thread frames
 * that let await and destroy detect a wait on the calling task itself, and
 * the room signal that serex_execute_wait parks on.
 *
 * --- Waiting for room, demystified ---
 * Two words serve every executor in the process: `waiters`, the threads in
 * serex_execute_wait counted for a signal, and `gen`, a generation they
 * park on (park_internal.h). A bounded executor that signals room
 * (serial, striped, the pool) keeps the rules of executor_internal.h:
 *
 *   waiter: try; EFULL, signalled: waiters++ (seq_cst), then in a loop:
 *             g = gen (acquire); try (its look at the count: seq_cst);
 *             EFULL: park while gen == g, until the deadline
 *   freer:  count -= 1 (seq_cst RMW, the place is free);
 *             if (waiters != 0 (seq_cst load)) { gen++ (release); wake all }
 *
 * Why a freed place is never lost: each side writes its own word and then
 * reads the other's (the Dekker, or store-buffering, pattern), and all four
 * operations are seq_cst, so they fall in one total order S. If the freer's
 * load of `waiters` misses the waiter, that load precedes the waiter's
 * increment in S, so the free precedes the waiter's look at the count: the
 * try sees the free. It may still say EFULL if another producer took the
 * place first (that is who wins the race, see serial.c); then the waiter
 * parks, and that producer's task frees a place again later in the
 * count's modification order, so after the waiter's look in S, and that
 * freer's load of `waiters` sees the waiter. If the freer sees the waiter,
 * it bumps `gen` after its free: a waiter whose g was read before the bump
 * returns from park at once (the parking lot re-reads gen under its bucket
 * lock, so a bump before the sleep is seen and one after finds it asleep);
 * a waiter that read g after the bump read it with acquire from the
 * release RMW (or a later one of its release sequence), so the free
 * happens-before its next try, which sees it. gen is 32 bits: it would
 * take 2^32 bumps between a waiter's read and its park to fool it.
 * A change that is not a freed place but ends a wait (shutdown, a wrapper
 * broken by its target's refusal: the next try says SEREX_EREJECTED) bumps
 * `gen` without looking at `waiters` (serex__room_wake): such changes
 * are rare (shutdown, shutdown_now, a refusal that breaks a wrapper), and
 * the flag each sets happens-before any try that reads the bumped
 * generation, while a waiter that read an older one returns from park.
 * Spurious wake-ups are harmless: waiters retry.
 *
 * Which SEREX_EFULL is signalled: a thread-local flag, cleared before each
 * try and set by serex__room_full on the refusing path of an executor that
 * keeps the rules. A wrapper passes on what its target said, flag
 * included: a serial over a bounded pool is signalled when the pool is. A
 * try that says SEREX_EFULL without the flag (an executor a user wrote, a
 * target with no signal) is retried after growing sleeps, 1 us doubling to
 * at most 1 ms, and the waiter does not count itself for it.
 *
 * The cost: an unbounded executor pays nothing; a bounded one, with nobody
 * waiting, one seq_cst load of a line that nobody writes per freed place.
 * While anyone waits, every freed place in the process bumps `gen` and
 * wakes every waiter, each of which tries once more: the price of one
 * pair of words for all executors, fine where waiting is the exception.
 */
#include <stdio.h>  /* fprintf: SEREX_ASSERT_ON */
#include <stdlib.h> /* abort */
#include <string.h> /* memset */

#include "common_internal.h"
#include "cancel_internal.h"
#include "executor_internal.h"
#include "exec_class_internal.h"
#include "op_internal.h"
#include "park_internal.h"
#include "thread_internal.h"

#define ROOM_NAP_MIN_NS INT64_C(1000)    /* unsignalled retries: 1 us ... */
#define ROOM_NAP_MAX_NS INT64_C(1000000) /* ... doubling up to 1 ms */

const char *serex_strerror(int status)
{
    switch (status) {
    case SEREX_OK: return "success";
    case SEREX_EINVAL: return "invalid argument";
    case SEREX_ENOMEM: return "out of memory";
    case SEREX_EREJECTED: return "rejected: the executor is shut down";
    case SEREX_EFULL: return "the queue is full";
    case SEREX_ETIMEDOUT: return "timed out";
    case SEREX_ECANCELED: return "cancelled";
    case SEREX_EDEADLK: return "would deadlock: called from its own task";
    default: return "unknown status";
    }
}

/* --- frames: which executors this thread is running a task for --- */

static SEREX__THREAD_LOCAL struct serex__frame *current_frame;
SEREX__THREAD_LOCAL bool serex__op_yielding; /* op_internal.h */

void serex__frame_push(struct serex__frame *f, serex_executor *ex)
{
    f->ex = ex;
    f->prev = current_frame;
    f->key = 0;
    f->serial = false;
    f->lane = false;
    current_frame = f;
}

void serex__frame_push_serial(struct serex__frame *f, serex_executor *ex,
                              const uint64_t *key)
{
    serex__frame_push(f, ex);
    f->serial = true;
    f->lane = key != NULL;
    f->key = key != NULL ? *key : 0;
}

void serex__frame_pop(struct serex__frame *f)
{
    SEREX_ASSERT(current_frame == f);
    current_frame = f->prev;
}

static bool frame_running(serex_executor *ex)
{
    for (struct serex__frame *f = current_frame; f != NULL; f = f->prev)
        if (f->ex == ex)
            return true;
    return false;
}

/* The frames are the thread's own: what it runs, innermost first. */
bool serex_executor_is_current(serex_executor *ex)
{
    return ex != NULL && frame_running(ex);
}

/* SEREX_ASSERT_ON and SEREX_ASSERT_NOT_ON (executor.h): the check, and the
 * stop with the executor's kind and the call site. */
void serex_assert_on(serex_executor *ex, bool on, const char *file, int line,
                     const char *func)
{
    const struct serex__exec_class *cls;
    const char *kind = "NULL";

    if (serex_executor_is_current(ex) == on)
        return;
    /* The kind from the class record alone: no lock on the way out (the
     * config's name is read under the executor's lock, which the failing
     * task may hold) */
    if (ex != NULL) {
        cls = serex__class_of(ex);
        kind = cls != NULL ? cls->name : "a user's executor";
    }
    fprintf(stderr, "serex: %s(%s at %p) failed at %s:%d in %s: %s\n",
            on ? "SEREX_ASSERT_ON" : "SEREX_ASSERT_NOT_ON", kind, (void *)ex,
            file != NULL ? file : "?", line, func != NULL ? func : "?",
            on ? "the calling thread runs no task of this executor"
               : "the calling thread runs a task of this executor");
    abort();
}

/*
 * A task of @ex, or of anything @ex waits on, waiting for @ex could be the
 * very task @ex needs to finish first (promise 7). The class says what
 * @ex waits on (a wrapper's target, a scheduler's timers' targets); the
 * recursion ends: a wrapper's target is fixed at creation, before the
 * wrapper exists, so wrappers form no cycle; schedulers aimed at each
 * other's faces can, and their walk stops at a scheduler already on it.
 */
static bool walk_blocks(serex_executor *ex)
{
    const struct serex__exec_class *cls;

    if (frame_running(ex))
        return true;
    cls = serex__class_of(ex);
    return cls != NULL && cls->waits_on != NULL &&
           cls->waits_on(ex, walk_blocks);
}

int serex__frame_blocks(serex_executor *ex)
{
    /* no frame: this thread runs no task, so nothing can wait on it */
    return current_frame != NULL && walk_blocks(ex);
}

/*
 * Only the thread's own frames are asked: a task queued on a wrapper
 * whose target is one of them (a serial over a manual executor the caller
 * runs) waits too, but telling would need each wrapper to name its target
 * for this walk, and the class hook that does (waits_on) also follows a
 * scheduler's timers, where its own tasks do not queue.
 */
bool serex__frame_behind(serex_executor *ex, const uint64_t *key)
{
    for (struct serex__frame *f = current_frame; f != NULL; f = f->prev)
        if (f->ex == ex && f->serial && f->lane == (key != NULL) &&
            (key == NULL || f->key == *key))
            return true;
    return false;
}

/* --- room: serex_execute_wait (see the essay at the top) --- */

static struct {
    /* threads in serex_execute_wait counted for a signal; written by
     * them (seq_cst in, relaxed out), read by every freer */
    _Alignas(SEREX__CACHELINE) _Atomic uint32_t waiters;
    /* bumped by room_bump; waiters park on it */
    _Alignas(SEREX__CACHELINE) _Atomic uint32_t gen;
} room;

/* The last try's SEREX_EFULL came with serex__room_full. */
static SEREX__THREAD_LOCAL bool room_signalled;

void serex__room_full(void)
{
    room_signalled = true;
}

static void room_bump(void)
{
    /* release: the freed place (or the shutdown) before the try of a
     * waiter that reads this generation (acquire, in room_wait) */
    atomic_fetch_add_explicit(&room.gen, 1, memory_order_release);
    serex__park_wake_all(&room.gen);
}

void serex__room_made(void)
{
    /* seq_cst: after the caller's seq_cst free of a place; pairs with the
     * seq_cst count in room_wait: one of the two sees the other */
    if (atomic_load_explicit(&room.waiters, memory_order_seq_cst) != 0)
        room_bump();
}

void serex__room_wake(void)
{
    room_bump();
}

/* Sleeps until @until (monotonic), or until @poke changes from 0 (a
 * token's hook, serex_execute_wait_token). */
static void room_nap(_Atomic uint32_t *poke, int64_t until)
{
    while (serex__park_wait(poke, 0, until) != SEREX_ETIMEDOUT)
        /* relaxed: the cause is read with acquire by the loop */
        if (atomic_load_explicit(poke, memory_order_relaxed) != 0)
            return; /* poked */
    /* else another word's wake-up shares the bucket: sleep on */
}

/* The wait's token, if any: its hook pokes the nap word and bumps the
 * room's generation, so that either sleep ends. */
struct room_token {
    struct serex__cancel_hook hook;
    const serex_cancel *tok;
    _Atomic uint32_t poke;
};

static void room_token_fire(struct serex__cancel_hook *h, int cause)
{
    struct room_token *t = serex__container_of(h, struct room_token, hook);

    (void)cause;
    /* relaxed: the waiter re-reads the cause with acquire; the word only
     * has to change for its park to return */
    atomic_store_explicit(&t->poke, 1, memory_order_relaxed);
    serex__park_wake_all(&t->poke);
    room_bump(); /* wakes every room waiter: they look, and sleep on */
}

/* The last try said SEREX_EFULL: wait and try again until it says
 * anything else, @deadline passes or @t's token is cancelled. */
static int room_wait(int (*try_fn)(void *), void *ctx, int64_t deadline,
                     struct room_token *t)
{
    int64_t nap = ROOM_NAP_MIN_NS;
    bool counted = false;
    uint32_t g = 0;
    int rc = SEREX_EFULL;

    while (rc == SEREX_EFULL) {
        int64_t now = serex__now_ns();
        int cause = t->tok != NULL ? serex_cancel_cause(t->tok) : 0;

        if (cause != 0) {
            rc = cause;
            break;
        }
        if (now >= deadline) {
            rc = SEREX_ETIMEDOUT;
            break;
        }
        if (!room_signalled) { /* no signal will come: sleep, then retry */
            room_nap(&t->poke, deadline - now > nap ? now + nap : deadline);
            nap = nap < ROOM_NAP_MAX_NS / 2 ? nap * 2 : ROOM_NAP_MAX_NS;
        } else if (!counted) {
            /* seq_cst: counted before the try below looks for room, so
             * either it sees a place freed before, or that place's freer
             * sees us (serex__room_made). Not parking yet: only a try made
             * after counting may send us to sleep. */
            atomic_fetch_add_explicit(&room.waiters, 1, memory_order_seq_cst);
            counted = true;
        } else {
            serex__park_wait(&room.gen, g, deadline);
        }
        /* acquire: pairs with room_bump's release; a bump seen here brings
         * the place it announced to the try below */
        g = atomic_load_explicit(&room.gen, memory_order_acquire);
        room_signalled = false;
        rc = try_fn(ctx);
    }
    if (counted) /* relaxed: leaving only stops wake-ups meant for us */
        atomic_fetch_sub_explicit(&room.waiters, 1, memory_order_relaxed);
    return rc;
}

/* serex__execute_wait with an optional @tok (see serex_execute_wait_token). */
static int execute_wait_tok(serex_executor *ex, int (*try_fn)(void *ctx),
                            void *ctx, int64_t timeout_ns, serex_cancel *tok)
{
    struct room_token t = {{NULL, NULL, room_token_fire}, tok, 0};
    int rc;

    /* Before the first try, not after a SEREX_EFULL: the call that could
     * wait for room that only its own return frees is refused every time,
     * as libdispatch stops every dispatch_sync onto the current queue,
     * not only when the target happens to be full (a path that passed
     * every test would then fail in production, under load). Cheap for a
     * producer thread: it has no frame. */
    if (serex__frame_blocks(ex))
        return SEREX_EDEADLK;
    room_signalled = false;
    rc = try_fn(ctx);
    if (rc != SEREX_EFULL)
        return rc;
    if (timeout_ns == 0)
        return SEREX_ETIMEDOUT;
    if (tok == NULL)
        return room_wait(try_fn, ctx, serex__deadline(timeout_ns), &t);
    rc = serex__cancel_hook_add(tok, &t.hook);
    if (rc != 0)
        return rc; /* cancelled already */
    rc = room_wait(try_fn, ctx, serex__deadline(timeout_ns), &t);
    serex__cancel_hook_remove(tok, &t.hook);
    return rc;
}

int serex__execute_wait(serex_executor *ex, int (*try_fn)(void *ctx), void *ctx,
                        int64_t timeout_ns)
{
    return execute_wait_tok(ex, try_fn, ctx, timeout_ns, NULL);
}

/* --- internal operations and classes --- */

void serex__op_run(void *arg)
{
    struct serex__op *op = arg;

    op->cls->run(op);
}

void serex__hand_back(serex_fn fn, void *arg, serex_pending_fn on_pending,
                      void *ctx)
{
    if (fn == serex__op_run) {
        struct serex__op *op = arg;

        op->cls->dropped(op, on_pending, ctx); /* never the user's */
    } else if (on_pending != NULL) {
        on_pending(fn, arg, ctx);
    }
}

static struct serex__reg *exec_reg(serex_executor *ex,
                                   const struct serex__exec_class *cls)
{
    return (struct serex__reg *)(void *)((char *)ex + cls->reg_offset);
}

void serex__class_destroy(serex_executor *ex)
{
    const struct serex__exec_class *cls = serex__class_of(ex);

    if (cls->reg_offset != 0) /* off the list before anything goes */
        serex__reg_remove(exec_reg(ex, cls));
    cls->destroy(ex);
}

void serex__exec_register(serex_executor *ex, const char *name)
{
    const struct serex__exec_class *cls = serex__class_of(ex);

    serex__reg_add(exec_reg(ex, cls), &cls->reg, ex,
                   name != NULL ? name : cls->name);
}

/* A histogram's summary: count, p50, p99, max. */
static void describe_hist(struct serex__dump *d, const char *key,
                          const serex_histogram *h)
{
    serex__dump_object_begin(d, key);
    serex__dump_u64(d, "count", h->count);
    serex__dump_u64(d, "p50_ns", serex_histogram_percentile(h, 0.5));
    serex__dump_u64(d, "p99_ns", serex_histogram_percentile(h, 0.99));
    serex__dump_u64(d, "max_ns", h->max_ns);
    serex__dump_object_end(d);
}

static void describe_metrics(serex_executor *ex,
                             const struct serex__exec_class *cls,
                             struct serex__dump *d)
{
    serex_metrics m; /* about 10 KiB of stack: a dump is no hot path */

    memset(&m, 0, sizeof m);
    cls->metrics(ex, &m);
    serex__dump_object_begin(d, "metrics");
    describe_hist(d, "wait", &m.wait);
    describe_hist(d, "run", &m.run);
    serex__dump_u64(d, "steals", m.steals);
    serex__dump_u64(d, "overflows", m.overflows);
    serex__dump_u64(d, "parks", m.parks);
    serex__dump_u64(d, "unparks", m.unparks);
    serex__dump_u64(d, "yields", m.yields);
    serex__dump_object_end(d);
}

void serex__exec_describe(struct serex__reg *r, struct serex__dump *d)
{
    /* the registry keeps the object const; describing it reads it */
    serex_executor *ex = (serex_executor *)(uintptr_t)r->obj;
    const struct serex__exec_class *cls = serex__class_of(ex);
    serex_stats st;

    memset(&st, 0, sizeof st);
    cls->stats(ex, &st);
    serex__dump_u64(d, "submitted", st.submitted);
    serex__dump_u64(d, "completed", st.completed);
    serex__dump_u64(d, "rejected", st.rejected);
    serex__dump_u64(d, "queued", st.queued);
    if (st.threads != 0)
        serex__dump_u64(d, "threads", st.threads);
    if (cls->metrics != NULL)
        describe_metrics(ex, cls, d);
    if (cls->describe != NULL)
        cls->describe(ex, d);
}

/* --- the generic calls --- */

static int executor_valid(const serex_executor *ex)
{
    return ex != NULL && ex->ops != NULL;
}

int serex_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    if (!executor_valid(ex) || fn == NULL)
        return SEREX_EINVAL;
    return ex->ops->execute(ex, fn, arg);
}

struct execute_call {
    serex_executor *ex;
    serex_fn fn;
    void *arg;
};

static int execute_call_try(void *ctx)
{
    struct execute_call *c = ctx;

    return c->ex->ops->execute(c->ex, c->fn, c->arg);
}

int serex_execute_wait(serex_executor *ex, serex_fn fn, void *arg,
                       int64_t timeout_ns)
{
    struct execute_call c = {ex, fn, arg};

    if (!executor_valid(ex) || fn == NULL || !serex__timeout_valid(timeout_ns))
        return SEREX_EINVAL;
    return serex__execute_wait(ex, execute_call_try, &c, timeout_ns);
}

int serex_execute_wait_token(serex_executor *ex, serex_fn fn, void *arg,
                             int64_t timeout_ns, serex_cancel *token)
{
    struct execute_call c = {ex, fn, arg};

    if (!executor_valid(ex) || fn == NULL || !serex__timeout_valid(timeout_ns))
        return SEREX_EINVAL;
    return execute_wait_tok(ex, execute_call_try, &c, timeout_ns, token);
}

void serex_shutdown(serex_executor *ex)
{
    if (executor_valid(ex))
        ex->ops->shutdown(ex);
}

struct pending_ctx {
    serex_pending_fn on_pending;
    void *ctx;
};

/* Interposed so that an internal operation (a future's task, a drain...)
 * runs its own hook instead of reaching on_pending, even when the executor
 * is a user's that knows nothing of them. */
static void pending_filter(serex_fn fn, void *arg, void *ctx)
{
    struct pending_ctx *pc = ctx;

    serex__hand_back(fn, arg, pc->on_pending, pc->ctx);
}

size_t serex_shutdown_now(serex_executor *ex, serex_pending_fn on_pending,
                          void *ctx)
{
    struct pending_ctx pc = {on_pending, ctx};

    if (!executor_valid(ex))
        return 0;
    return ex->ops->shutdown_now(ex, pending_filter, &pc);
}

void serex_run_task(serex_executor *ex, serex_fn fn, void *arg)
{
    struct serex__frame frame;

    if (ex == NULL || fn == NULL)
        return;
    serex__frame_push(&frame, ex);
    fn(arg);
    serex__frame_pop(&frame);
}

int serex_await_termination(serex_executor *ex, int64_t timeout_ns)
{
    if (!executor_valid(ex) || !serex__timeout_valid(timeout_ns))
        return SEREX_EINVAL;
    if (serex__frame_blocks(ex))
        return SEREX_EDEADLK;
    return ex->ops->await_termination(ex, timeout_ns);
}

int serex_destroy(serex_executor *ex)
{
    if (!executor_valid(ex))
        return SEREX_EINVAL;
    if (serex__frame_blocks(ex))
        return SEREX_EDEADLK;
    ex->ops->shutdown(ex);
    ex->ops->destroy(ex);
    return SEREX_OK;
}

int serex_executor_stats(serex_executor *ex, serex_stats *out)
{
    const struct serex__exec_class *cls;

    if (!executor_valid(ex) || out == NULL)
        return SEREX_EINVAL;
    cls = serex__class_of(ex);
    if (cls == NULL)
        return SEREX_EINVAL; /* a user's executor keeps no stats */
    memset(out, 0, sizeof *out);
    cls->stats(ex, out);
    if (out->name == NULL) /* the kind's own name: "manual", ... */
        out->name = cls->name;
    return SEREX_OK;
}

/* The class of a serex executor that keeps metrics, else NULL. */
static const struct serex__exec_class *metrics_class(serex_executor *ex)
{
    const struct serex__exec_class *cls;

    if (!executor_valid(ex))
        return NULL;
    cls = serex__class_of(ex);
    return cls != NULL && cls->metrics != NULL ? cls : NULL;
}

int serex_executor_metrics_enable(serex_executor *ex,
                                  const serex_metrics_config *cfg)
{
    const struct serex__exec_class *cls = metrics_class(ex);

    if (cls == NULL)
        return SEREX_EINVAL;
    return cls->metrics_enable(ex, cfg);
}

int serex_executor_metrics(serex_executor *ex, serex_metrics *out)
{
    const struct serex__exec_class *cls = metrics_class(ex);
    serex_stats st;

    if (cls == NULL || out == NULL)
        return SEREX_EINVAL;
    memset(out, 0, sizeof *out);
    memset(&st, 0, sizeof st);
    cls->stats(ex, &st);
    out->queue_length = st.queued; /* a kind may say otherwise */
    cls->metrics(ex, out);
    return SEREX_OK;
}
