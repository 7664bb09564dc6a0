/* SPDX-License-Identifier: MIT */
/*
 * await_internal.h - await_termination for the wrappers (serial, striped):
 * one loop over a 64-bit state word that counts its waiters.
 *
 * The waiter counts itself in the word (a seq_cst CAS), then looks at the
 * wrapper's state; whoever ends the work looks for waiters after its own
 * change (seq_cst too) and, if any, changes the word and wakes the parking
 * lot. Either it sees the waiter or the waiter sees its change, so no
 * wake-up is lost (see serial.c). Past `waiters_max` waiters, a new waiter
 * is not counted and looks again every millisecond instead.
 *
 * The wrapper answers with one call, from one load of its flags: done,
 * not yet, or soon: an execute is between its flag check and counting its
 * task. "Soon" is never parked on: that execute ends counted or refused,
 * and a refused one wakes no one. (Two calls, "shut and idle?" and then
 * "anything in flight?", let an execute count, push and leave between
 * them: termination reported with its task still to run. The spin model
 * of the serial drain found that.)
 */
#ifndef SEREX_AWAIT_INTERNAL_H
#define SEREX_AWAIT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common_internal.h"
#include "park_internal.h"
#include "thread_internal.h"

#define SEREX__AWAIT_POLL_NS INT64_C(1000000)

enum serex__await_state {
    SEREX__AWAIT_NOT,   /* not shut down, or tasks left: park */
    SEREX__AWAIT_SOON,  /* shut down, an execute in flight: look again */
    SEREX__AWAIT_DONE   /* shut down, nothing in flight, every task done */
};

struct serex__await {
    _Atomic uint64_t *word;     /* parked on; waiters counted in it */
    uint64_t waiter;            /* one waiter in the word */
    unsigned shift;             /* the waiter count is (word >> shift) ... */
    uint64_t waiters_max;       /* ... & waiters_max (2^k - 1: a field) */
    enum serex__await_state (*state)(void *obj);
    void *obj;
};

/*
 * Tells awaiters parked on @word that something they wait for changed:
 * adds @gen, the lowest bit of the generation, the word's topmost field
 * (so their park, which compares the whole word, returns) and wakes them.
 * The waker side of the protocol above, written once (life_internal.h).
 * A counter, not a flipped bit: two bumps between an awaiter's load and
 * its park would flip a bit back, and the awaiter would sleep through
 * both (until its deadline: for ever with SEREX_FOREVER). The count
 * carries out of the top of the word, never into another field.
 */
static inline void serex__await_bump(_Atomic uint64_t *word, uint64_t gen)
{
    /* release: the change before an awaiter's re-check after the wake */
    atomic_fetch_add_explicit(word, gen, memory_order_release);
    serex__park_wake_all(word);
}

/*
 * The same, only if some awaiter is counted in @word (waiters are
 * word >> @shift): after a change made with a seq_cst RMW or store, this
 * seq_cst load and the awaiter's seq_cst count-then-look mean either we
 * see the awaiter or it sees the change. With no awaiter, the end of work
 * costs no system call.
 */
static inline void serex__await_notify(_Atomic uint64_t *word, uint64_t gen,
                                       unsigned shift, uint64_t waiters_max)
{
    if ((atomic_load_explicit(word, memory_order_seq_cst) >> shift &
         waiters_max) != 0)
        serex__await_bump(word, gen);
}

/* Waits for SEREX__AWAIT_DONE. @counted: see above. */
static inline int serex__await_loop(const struct serex__await *a,
                                    int64_t timeout_ns, bool counted)
{
    int64_t deadline = serex__deadline(timeout_ns);

    for (;;) {
        /* seq_cst: the look that follows counting ourselves */
        uint64_t v = atomic_load_explicit(a->word, memory_order_seq_cst);
        int64_t until = deadline;
        enum serex__await_state st = a->state(a->obj);

        if (st == SEREX__AWAIT_DONE)
            return SEREX_OK;
        if (st == SEREX__AWAIT_SOON && timeout_ns != 0) {
            serex__thread_yield(); /* counted or refused in a moment */
            continue;
        }
        if (!counted && deadline - serex__now_ns() > SEREX__AWAIT_POLL_NS)
            until = serex__now_ns() + SEREX__AWAIT_POLL_NS;
        if (timeout_ns == 0 ||
            (serex__park_wait64(a->word, v, until) == SEREX_ETIMEDOUT &&
             until == deadline))
            return a->state(a->obj) == SEREX__AWAIT_DONE ? SEREX_OK
                                                         : SEREX_ETIMEDOUT;
    }
}

/* await_termination: count ourselves (if there is room), wait, leave. */
static inline int serex__await(const struct serex__await *a,
                               int64_t timeout_ns)
{
    /* relaxed: a first guess for the CAS */
    uint64_t v = atomic_load_explicit(a->word, memory_order_relaxed);
    bool counted = false;
    int rc;

    /* seq_cst: counted before we look (see the header comment) */
    while ((v >> a->shift & a->waiters_max) < a->waiters_max && !counted)
        counted = atomic_compare_exchange_weak_explicit(
            a->word, &v, v + a->waiter, memory_order_seq_cst,
            memory_order_relaxed);
    rc = serex__await_loop(a, timeout_ns, counted);
    if (counted) /* relaxed: leaving only stops wake-ups meant for us */
        atomic_fetch_sub_explicit(a->word, a->waiter, memory_order_relaxed);
    return rc;
}

/*
 * The first half of a wrapper's destroy (serial, striped): wait for the
 * accepted tasks to run; if they never can (the target refused or dropped
 * a drain: @broken; or it has terminated), call @drop to take them back
 * and drop them instead. Waits in slices, so a target that terminates
 * meanwhile is noticed.
 */
static inline void serex__wrapper_settle(serex_executor *ex,
                                         serex_executor *target,
                                         bool (*broken)(serex_executor *ex),
                                         void (*drop)(serex_executor *ex))
{
    while (ex->ops->await_termination(ex, SEREX__AWAIT_POLL_NS * 10) !=
           SEREX_OK) {
        if (broken(ex) || serex_await_termination(target, 0) == SEREX_OK) {
            drop(ex);
            return;
        }
    }
}

#endif /* SEREX_AWAIT_INTERNAL_H */
