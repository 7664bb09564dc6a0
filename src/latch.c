/* SPDX-License-Identifier: MIT */
/*
 * latch.c - a count that goes down once to zero (serex/latch.h).
 *
 * One word: the count left. A count-down is a CAS that takes n from it
 * (never below zero: a count-down of more than is left is refused and
 * changes nothing); the one that takes it to 0 wakes every waiter. A
 * waiter parks while the word still reads the nonzero value it read: a
 * count-down between its read and its park changes the word, so the park
 * returns at once (the parking lot re-reads the word under its lock). So
 * no wake-up is lost: the last count-down either comes before a waiter's
 * read (it sees 0 and returns) or after (its park sees a changed word, or
 * is woken by the wake-all that follows the change).
 */
#include <stdatomic.h>

#include "alloc_internal.h"
#include "common_internal.h"
#include "park_internal.h"
#include "thread_internal.h"

#define LATCH_MAX (UINT32_MAX - 1u)

struct serex_latch {
    _Atomic uint32_t left; /* count-downs still to come */
};

int serex_latch_create(uint64_t count, serex_latch **out)
{
    serex_latch *l;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    if (count > LATCH_MAX)
        return SEREX_EINVAL;
    l = serex__alloc(sizeof *l);
    if (l == NULL)
        return SEREX_ENOMEM;
    atomic_init(&l->left, (uint32_t)count);
    *out = l;
    return SEREX_OK;
}

void serex_latch_destroy(serex_latch *l)
{
    serex__free(l);
}

int serex_latch_count_down(serex_latch *l, uint64_t n)
{
    uint32_t left;

    if (l == NULL || n == 0)
        return SEREX_EINVAL;
    /* relaxed: a first guess for the CAS, which orders */
    left = atomic_load_explicit(&l->left, memory_order_relaxed);
    do {
        if (n > left)
            return SEREX_EINVAL; /* never below zero; nothing taken */
        /* acq_rel: release, this counter's writes to every waiter let
         * through (their acquire load of 0 reads from the last RMW, and
         * the RMWs form a release sequence); acquire, so the counter that
         * opens it has seen the others' writes before it wakes anyone */
    } while (!atomic_compare_exchange_weak_explicit(
        &l->left, &left, left - (uint32_t)n, memory_order_acq_rel,
        memory_order_relaxed));
    if (left == n)
        serex__park_wake_all(&l->left);
    return SEREX_OK;
}

bool serex_latch_is_open(const serex_latch *l)
{
    /* acquire: as a wait that returns, the counters' writes are ours */
    return l != NULL &&
           atomic_load_explicit(&((serex_latch *)(uintptr_t)l)->left,
                                memory_order_acquire) == 0;
}

int serex_latch_wait(serex_latch *l, int64_t timeout_ns)
{
    int64_t deadline;

    if (l == NULL || !serex__timeout_valid(timeout_ns))
        return SEREX_EINVAL;
    deadline = timeout_ns == 0 ? 0 : serex__deadline(timeout_ns);
    for (;;) {
        /* acquire: pairs with the count-downs' release (see above) */
        uint32_t left = atomic_load_explicit(&l->left, memory_order_acquire);

        if (left == 0)
            return SEREX_OK;
        if (timeout_ns == 0 ||
            serex__park_wait(&l->left, left, deadline) == SEREX_ETIMEDOUT)
            /* one last look: opened as the time ran out */
            return atomic_load_explicit(&l->left, memory_order_acquire) == 0
                       ? SEREX_OK
                       : SEREX_ETIMEDOUT;
    }
}
