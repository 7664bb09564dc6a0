/* SPDX-License-Identifier: MIT */
/*
 * event.c - an auto-reset event whose wake-ups are never lost.
 *
 * The state word: bit 0 is SIGNALLED, the bits above count waiters.
 *
 *   signal: sets SIGNALLED (fetch_or). If waiters were counted and the
 *           event was not already signalled, wakes the parking lot.
 *   wait:   consumes SIGNALLED with a CAS that clears it (and, for a waiter
 *           that counted itself, drops its count in the same CAS). If it is
 *           not set, counts itself a waiter and parks while the word still
 *           reads what it read (a signal changes the word, so a signal
 *           between the read and the park makes the park return at once).
 *
 * Each signal is consumed by exactly one CAS, so it releases one wait;
 * spurious wake-ups and losing the CAS race just loop. Signals do not
 * accumulate (a second signal before a wait changes nothing).
 *
 * A manual-reset event (`manual`, fixed at create) never consumes: a wait
 * that sees SIGNALLED returns (its acquire load pairs with the signal's
 * release), a signal wakes every waiter, and serex_event_reset clears the
 * bit. The same park argument holds: a signal between a waiter's read and
 * its park changes the word.
 */
#include <stdatomic.h>
#include <stdbool.h>

#include "alloc_internal.h"
#include "common_internal.h"
#include "park_internal.h"
#include "thread_internal.h"

#define SIGNALLED 1u
#define WAITER 2u

struct serex_event {
    _Atomic uint32_t word; /* SIGNALLED | waiters * WAITER */
    bool manual;           /* manual-reset: waits do not consume */
};

static int event_create(serex_event **out, bool manual)
{
    serex_event *ev;

    if (out == NULL)
        return SEREX_EINVAL;
    ev = serex__alloc(sizeof *ev);
    *out = ev;
    if (ev == NULL)
        return SEREX_ENOMEM;
    atomic_init(&ev->word, 0);
    ev->manual = manual;
    return SEREX_OK;
}

int serex_event_create(serex_event **out)
{
    return event_create(out, false);
}

int serex_event_create_manual(serex_event **out)
{
    return event_create(out, true);
}

void serex_event_reset(serex_event *ev)
{
    if (ev != NULL) /* relaxed: a reset publishes nothing */
        atomic_fetch_and_explicit(&ev->word, ~SIGNALLED, memory_order_relaxed);
}

void serex_event_destroy(serex_event *ev)
{
    serex__free(ev);
}

void serex_event_signal(serex_event *ev)
{
    uint32_t old;

    if (ev == NULL)
        return;
    /*
     * acq_rel. Release: what the signaller wrote before signalling is
     * visible to the waiter whose acquire CAS consumes this bit. Acquire:
     * orders the read of the waiter count that decides the wake.
     */
    old = atomic_fetch_or_explicit(&ev->word, SIGNALLED, memory_order_acq_rel);
    if (old >= WAITER && !(old & SIGNALLED))
        serex__park_wake_all(&ev->word);
}

/* Consumes the signal if set; @mine is what this waiter added to the count.
 * A manual-reset event's signal is seen, not consumed (the waiter's count
 * still drops). */
static int event_try_consume(serex_event *ev, uint32_t mine)
{
    /* relaxed: only a hint for the CAS, which orders */
    uint32_t s = atomic_load_explicit(&ev->word, memory_order_relaxed);

    if (ev->manual) {
        /* acquire: pairs with the release in serex_event_signal */
        if (!(atomic_load_explicit(&ev->word, memory_order_acquire) &
              SIGNALLED))
            return 0;
        if (mine != 0) /* relaxed: the count only decides wakes */
            atomic_fetch_sub_explicit(&ev->word, mine, memory_order_relaxed);
        return 1;
    }

    while (s & SIGNALLED) {
        /* acquire: pairs with the release in serex_event_signal */
        if (atomic_compare_exchange_weak_explicit(
                &ev->word, &s, (s & ~SIGNALLED) - mine, memory_order_acquire,
                memory_order_relaxed))
            return 1;
    }
    return 0;
}

int serex_event_wait(serex_event *ev, int64_t timeout_ns)
{
    int64_t deadline;

    if (ev == NULL || !serex__timeout_valid(timeout_ns))
        return SEREX_EINVAL;
    if (event_try_consume(ev, 0))
        return SEREX_OK;
    if (timeout_ns == 0)
        return SEREX_ETIMEDOUT;
    deadline = serex__deadline(timeout_ns);
    /* relaxed: the count only decides whether signal wakes; the park
     * re-reads the word under the bucket lock */
    atomic_fetch_add_explicit(&ev->word, WAITER, memory_order_relaxed);
    for (;;) {
        uint32_t s;

        if (event_try_consume(ev, WAITER))
            return SEREX_OK;
        /* relaxed: only the value to park on; the park re-reads the word
         * under its lock, and a consume's CAS (acquire) decides */
        s = atomic_load_explicit(&ev->word, memory_order_relaxed);
        if (s & SIGNALLED)
            continue;
        if (serex__park_wait(&ev->word, s, deadline) == SEREX_ETIMEDOUT)
            break;
    }
    /* Timed out: leave, unless a signal arrived at the last moment. */
    if (event_try_consume(ev, WAITER))
        return SEREX_OK;
    atomic_fetch_sub_explicit(&ev->word, WAITER, memory_order_relaxed);
    return SEREX_ETIMEDOUT;
}
