/* SPDX-License-Identifier: MIT */
/*
 * serial.c - the serial executor: one task at a time, in order, on top of
 * any executor, by the queue-drain pattern.
 *
 * --- The drain, demystified ---
 * Tasks go into a Vyukov MPSC queue (one exchange per push, see
 * mpsc_internal.h). `wip` counts tasks pushed and not yet accounted for:
 * a producer adds 1 after its push; the drain subtracts the number it ran
 * at the end of each batch; shutdown_now subtracts what it took back.
 *
 *   producer: push(t); if (wip++ == 0) submit the drain to the target.
 *   drain:    run up to `batch` tasks, popping each under `pop_lock`;
 *             left = (wip -= ran);
 *             left == 0: return (the queue is empty and accounted for);
 *             ran == batch: resubmit itself and return (fairness);
 *             else: loop (a task was pushed while we looked).
 *
 * Who drains: exactly one drain exists from the 0 -> 1 transition of
 * `wip` to the decrement that brings it back to 0, because only the
 * producer that sees 0 submits, and a drain only ends on seeing 0 (or by
 * handing over to its own resubmission). So no two drains ever run at
 * once, and no task waits without a drain: a producer whose increment
 * comes after the drain's final decrement sees 0 and submits a new one; one
 * whose increment comes before it makes the decrement leave a remainder,
 * and the drain goes on. A remainder always means a pushed node (the push
 * comes before the increment), so the drain may have to wait for a link in
 * progress (mpsc BUSY) but never finds the queue empty while owing a task.
 *
 * Why each task happens-before the next: within a drain, program order.
 * Across drains: the decrement that ends a drain is a release RMW, the
 * increment that sees 0 is an acquire RMW on the same word, and the target
 * orders the submission before the new drain runs. Resubmission after a
 * batch is the target's own happens-before.
 *
 * The memory orders: push's exchange is acq_rel and its link is a release
 * store, read by pop with acquire (fn and arg are visible). `wip` RMWs are
 * acq_rel for the hand-over above.
 *
 * --- Shutdown, shutdown_now, a target that refuses ---
 * `ctl` holds SHUT, STOP and BROKEN flags and, above them, the number of
 * execute calls between their flag check and their increment of `wip`.
 * shutdown_now sets STOP, waits for that number to reach 0 (so every
 * accepted push is in the queue and counted), then takes the whole queue
 * under `pop_lock` (the drain pops under the same lock, so each task has
 * one taker: a task the drain popped has started) and subtracts it from
 * `wip`. If the target refuses to start a drain, BROKEN is set: the tasks
 * stay queued (the one being submitted too: it is accepted), execute
 * refuses new ones, shutdown_now hands them back, destroy drops them. If
 * the target refuses a resubmission, the drain keeps running where it is.
 *
 * --- Termination and destroy ---
 * `life` counts drains submitted and not finished (bits 0-7), a generation
 * bumped once by shutdown and once by shutdown_now (bits 8-23), and the
 * threads in await_termination (bits 24-31). A drain's very last act is to
 * decrement it and, if its old value counted a waiter, wake the parking lot
 * by address (without reading the serial), so an awaiter, which parks on
 * `life`, can free the serial the moment it sees SHUT, wip == 0 and no
 * drain. Every change an awaiter waits for changes `life`, and a waiter
 * counts itself in `life` before it looks, so no wake-up is lost; with no
 * waiter, ending a drain costs one atomic subtraction.
 */
#include <string.h> /* memset */

#include "common_internal.h"
#include "mpsc_internal.h"
#include "park_internal.h"
#include "serial_internal.h"
#include "spinlock_internal.h"
#include "thread_internal.h"

#define DEFAULT_BATCH 64u

#define CTL_SHUT 1u
#define CTL_STOP 2u
#define CTL_BROKEN 4u
#define CTL_INFLIGHT 8u /* one execute between its check and its increment */

#define LIFE_DRAIN 1u         /* one drain submitted and not finished */
#define LIFE_GEN (1u << 8)    /* one shutdown or shutdown_now */
#define LIFE_WAITER (1u << 24) /* one thread in await_termination */
#define LIFE_DRAINS(x) ((x) & (LIFE_GEN - 1))

struct serial {
    serex_executor base;
    serex_executor *target;
    unsigned batch;

    /* Producers' line: the queue's tail and the producers' counters. */
    _Alignas(SEREX__CACHELINE) struct serex__task *_Atomic tail;
    _Atomic uint64_t ctl;   /* CTL_* | in flight */
    _Atomic uint64_t wip;   /* pushed and not yet accounted for */

    /* The drain's line: the queue's consumer side. */
    _Alignas(SEREX__CACHELINE) serex__spinlock pop_lock;
    struct serex__task *head;
    struct serex__task stub;

    _Atomic uint32_t life;  /* drains in flight | generation (see essay) */
};

static const serex_executor_ops serial_ops;

static struct serial *serial_of(serex_executor *ex)
{
    return serex__container_of(ex, struct serial, base);
}

static struct serex__mpsc_ends serial_queue(struct serial *s)
{
    return (struct serex__mpsc_ends){&s->tail, &s->head, &s->stub};
}

/* --- the drain --- */

/* Pops the oldest task, or NULL if none is queued. */
static struct serex__task *serial_pop(struct serial *s)
{
    struct serex__task *t;

    serex__spin_lock(&s->pop_lock);
    t = serex__mpsc_pop_wait_ends(serial_queue(s));
    serex__spin_unlock(&s->pop_lock);
    return t;
}

/* Runs up to s->batch tasks; returns how many ran. */
static unsigned serial_run_batch(struct serial *s)
{
    unsigned ran = 0;
    struct serex__task *t;

    while (ran < s->batch && (t = serial_pop(s)) != NULL) {
        serex_fn fn = t->fn;
        void *arg = t->arg;

        serex__task_free(t);
        fn(arg);
        ran++;
    }
    return ran;
}

static void serial_drain(void *arg);

/* A drain is over: its last touch of the serial (see the essay). */
static void serial_drain_exit(struct serial *s)
{
    _Atomic uint32_t *life = &s->life;

    /* release: the drain's tasks happen-before an awaiter that sees it gone */
    if (atomic_fetch_sub_explicit(life, LIFE_DRAIN, memory_order_release) >=
        LIFE_WAITER)
        serex__park_wake_all(life); /* by address only: s may be gone now */
}

static void serial_drain(void *arg)
{
    struct serial *s = arg;
    struct serex__frame frame;

    serex__frame_push(&frame, &s->base);
    for (;;) {
        unsigned ran = serial_run_batch(s);
        /* acq_rel: see the essay (the hand-over to the next drain) */
        uint64_t left = atomic_fetch_sub_explicit(&s->wip, ran,
                                                  memory_order_acq_rel) - ran;

        if (left == 0)
            break;
        /* A full batch: give the thread back, unless the target refuses
         * (it is shutting down, say): then keep going here. */
        if (ran == s->batch &&
            serex_execute(s->target, serial_drain, s) == SEREX_OK) {
            serex__frame_pop(&frame);
            return; /* the resubmitted drain owns `life` now */
        }
    }
    serex__frame_pop(&frame);
    serial_drain_exit(s);
}

/* The producer whose increment found wip at 0: start a drain. */
static void serial_start_drain(struct serial *s)
{
    /* relaxed: ordered before the submission, which the target orders */
    atomic_fetch_add_explicit(&s->life, LIFE_DRAIN, memory_order_relaxed);
    if (serex_execute(s->target, serial_drain, s) == SEREX_OK)
        return;
    /* Refused: keep every task for shutdown_now; refuse new ones. */
    atomic_fetch_or_explicit(&s->ctl, CTL_BROKEN, memory_order_relaxed);
    serial_drain_exit(s);
}

/* --- the executor --- */

static int serial_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct serial *s = serial_of(ex);
    struct serex__task *t = serex__task_new(fn, arg);
    bool first;
    uint64_t c;

    if (serex__unlikely(t == NULL))
        return SEREX_ENOMEM;
    /* relaxed: the flags and the in-flight count share one modification
     * order, so shutdown_now either is seen here or waits for us */
    c = atomic_fetch_add_explicit(&s->ctl, CTL_INFLIGHT, memory_order_relaxed);
    if (serex__unlikely(c & (CTL_SHUT | CTL_BROKEN))) {
        atomic_fetch_sub_explicit(&s->ctl, CTL_INFLIGHT, memory_order_relaxed);
        serex__task_free(t);
        return SEREX_EREJECTED;
    }
    serex__mpsc_push_ends(serial_queue(s), t);
    /* acq_rel: see the essay (the 0 -> 1 hand-over) */
    first = atomic_fetch_add_explicit(&s->wip, 1, memory_order_acq_rel) == 0;
    /* release: our push and increment before shutdown_now's acquire */
    atomic_fetch_sub_explicit(&s->ctl, CTL_INFLIGHT, memory_order_release);
    if (first)
        serial_start_drain(s);
    return SEREX_OK;
}

static void serial_bump_life(struct serial *s)
{
    /* release: orders the flag change before an awaiter's re-check */
    atomic_fetch_add_explicit(&s->life, LIFE_GEN, memory_order_release);
    serex__park_wake_all(&s->life);
}

static void serial_shutdown(serex_executor *ex)
{
    struct serial *s = serial_of(ex);

    /* release: nothing but the flag; awaiters re-check after the bump */
    if (!(atomic_fetch_or_explicit(&s->ctl, CTL_SHUT, memory_order_release) &
          CTL_SHUT))
        serial_bump_life(s); /* once: the generation has 16 bits */
}

/*
 * Takes every queued task, in order, as a private list; subtracts them
 * from wip. @flags are set first (SHUT and STOP: shutdown_now; for destroy
 * too).
 */
static struct serex__task *serial_take_all(struct serial *s, size_t *n)
{
    struct serex__task *first = NULL, *last = NULL, *t;

    /* acquire: pairs with the release drop in serial_execute; at zero every
     * accepted push is queued and counted in wip */
    while (atomic_load_explicit(&s->ctl, memory_order_acquire) >= CTL_INFLIGHT)
        serex__thread_yield();
    *n = 0;
    while ((t = serial_pop(s)) != NULL) {
        /* relaxed: the node is ours; the list is private */
        atomic_store_explicit(&t->next, NULL, memory_order_relaxed);
        if (last != NULL)
            atomic_store_explicit(&last->next, t, memory_order_relaxed);
        else
            first = t;
        last = t;
        ++*n;
    }
    /* acq_rel: as the drain's decrement; an awaiter sees it with acquire */
    atomic_fetch_sub_explicit(&s->wip, *n, memory_order_acq_rel);
    return first;
}

/* Hands a private list back (or drops it: on_pending NULL). */
static void serial_hand_back_list(struct serex__task *t,
                                  serex_pending_fn on_pending, void *ctx)
{
    while (t != NULL) {
        struct serex__task *next =
            atomic_load_explicit(&t->next, memory_order_relaxed);
        serex_fn fn = t->fn;
        void *arg = t->arg;

        serex__task_free(t);
        serex__hand_back(fn, arg, on_pending, ctx);
        t = next;
    }
}

static size_t serial_shutdown_now(serex_executor *ex,
                                  serex_pending_fn on_pending, void *ctx)
{
    struct serial *s = serial_of(ex);
    struct serex__task *list;
    size_t n;

    uint64_t old = atomic_fetch_or_explicit(&s->ctl, CTL_SHUT | CTL_STOP,
                                            memory_order_relaxed);

    list = serial_take_all(s, &n); /* orders the flags (acquire) */
    if (!(old & CTL_STOP))
        serial_bump_life(s); /* once: the generation has 16 bits */
    serial_hand_back_list(list, on_pending, ctx);
    return n;
}

/* Shut down, nothing queued or counted, no drain in flight. */
static bool serial_terminated(struct serial *s, uint32_t life)
{
    /* acquire (both): pair with the drain's release decrements, so its
     * tasks' writes are visible once we report termination */
    return (atomic_load_explicit(&s->ctl, memory_order_acquire) & CTL_SHUT) &&
           LIFE_DRAINS(life) == 0 &&
           atomic_load_explicit(&s->wip, memory_order_acquire) == 0;
}

static int serial_await_counted(struct serial *s, int64_t timeout_ns)
{
    int64_t deadline = serex__deadline(timeout_ns);

    for (;;) {
        /* acquire: pairs with serial_drain_exit and serial_bump_life */
        uint32_t life = atomic_load_explicit(&s->life, memory_order_acquire);

        if (serial_terminated(s, life))
            return SEREX_OK;
        if (timeout_ns == 0 ||
            serex__park_wait(&s->life, life, deadline) == SEREX_ETIMEDOUT)
            return serial_terminated(s, atomic_load_explicit(
                                            &s->life, memory_order_acquire))
                       ? SEREX_OK
                       : SEREX_ETIMEDOUT;
    }
}

static int serial_await(serex_executor *ex, int64_t timeout_ns)
{
    struct serial *s = serial_of(ex);
    int rc;

    /* relaxed (both): the count only tells a finishing drain to wake us;
     * it is an RMW on `life`, so a drain's decrement either sees it or
     * comes before our look (coherence of one word) */
    atomic_fetch_add_explicit(&s->life, LIFE_WAITER, memory_order_relaxed);
    rc = serial_await_counted(s, timeout_ns);
    atomic_fetch_sub_explicit(&s->life, LIFE_WAITER, memory_order_relaxed);
    return rc;
}

/* The target can no longer run anything: it has terminated. */
static bool serial_target_gone(struct serial *s)
{
    return serex_await_termination(s->target, 0) == SEREX_OK;
}

static void serial_destroy(serex_executor *ex)
{
    struct serial *s = serial_of(ex);

    /*
     * Wait for the queued tasks to run; if the drain cannot run any more
     * (the target refused it, or has terminated), drop them instead, and
     * stop waiting for a drain the target will never run.
     */
    while (serial_await(ex, 10 * INT64_C(1000000)) != SEREX_OK) {
        bool broken = atomic_load_explicit(&s->ctl, memory_order_relaxed) &
                      CTL_BROKEN;

        if (broken || serial_target_gone(s)) {
            size_t n;

            serial_hand_back_list(serial_take_all(s, &n), NULL, NULL);
            if (serial_await(ex, 0) != SEREX_OK && !serial_target_gone(s))
                continue;
            break;
        }
    }
    serex__free(s);
}

static const serex_executor_ops serial_ops = {
    .execute = serial_execute,
    .shutdown = serial_shutdown,
    .shutdown_now = serial_shutdown_now,
    .await_termination = serial_await,
    .destroy = serial_destroy,
};

int serex_serial_create(serex_executor *target, const serex_serial_config *cfg,
                        serex_executor **out)
{
    struct serial *s;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    if (target == NULL || target->ops == NULL)
        return SEREX_EINVAL;
    s = serex__alloc_aligned(SEREX__CACHELINE, sizeof *s);
    if (s == NULL)
        return SEREX_ENOMEM;
    memset(s, 0, sizeof *s);
    s->base.ops = &serial_ops;
    s->target = target;
    s->batch = cfg != NULL && cfg->batch != 0 ? cfg->batch : DEFAULT_BATCH;
    serex__mpsc_init_ends(serial_queue(s));
    *out = &s->base;
    return SEREX_OK;
}

serex_executor *serex__serial_target(serex_executor *ex)
{
    return ex->ops == &serial_ops ? serial_of(ex)->target : NULL;
}
