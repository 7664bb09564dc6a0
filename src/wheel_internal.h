/* SPDX-License-Identifier: MIT */
/*
 * wheel_internal.h - a hierarchical timing wheel (the data structure under
 * the delayed scheduler of issue 4; single-threaded: its owner serialises
 * every call).
 *
 * --- Parameters ---
 * Time is counted in ticks (uint64). Each level has `size` slots (a power
 * of two, 2^bits); level L's slots are 2^(bits*L) ticks wide, and enough
 * levels cover all 64 bits, so any expiry fits: no delay is ever clamped
 * or refused. With size 512 (bits 9): level 0 covers 512 ticks one by one,
 * level 1 a slot per 512 ticks, ... 8 levels reach 2^72 > 2^64.
 *
 * --- Placement (as timeout.c) ---
 * A timer expiring at E, seen at time `now` (E > now), goes to the level of
 * the highest bit in which E and now differ (that level is the first whose
 * slot boundary lies between them), at slot (E >> (bits*L)) & mask. When
 * time crosses into a slot of level L > 0, the timers there are re-filed
 * one level down (cascading) or fire. Every timer is in exactly one slot
 * list, doubly linked, and remembers its slot, so removing it is O(1); a
 * bitmap per level marks the non-empty slots, so the next expiry is found
 * with a few bit scans (a tickless owner sleeps until then).
 *
 * --- Order ---
 * serex__wheel_advance hands out expired timers sorted by expiry, ties in
 * the order they were added (a sequence number), whatever levels they came
 * from.
 */
#ifndef SEREX_WHEEL_INTERNAL_H
#define SEREX_WHEEL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A timer's place in the wheel: embed it in the owner's timer record. */
struct serex__wtimer {
    struct serex__wtimer *next, *prev; /* slot list, or an expired list */
    uint64_t expires;                  /* absolute tick */
    uint64_t seq;                      /* add order, for ties */
    uint32_t level, slot;              /* where it is; level UINT32_MAX: out */
};

struct serex__wheel {
    unsigned bits, levels;
    uint64_t mask;           /* size - 1 */
    uint64_t now;            /* the wheel's current tick */
    uint64_t seq;            /* next add's sequence number */
    size_t count;            /* timers in the wheel */
    struct serex__wtimer **slots; /* levels * size list heads */
    uint64_t *bitmap;        /* levels * words: non-empty slots */
    unsigned words;          /* bitmap words per level */
};

/* Returns SEREX_OK, SEREX_EINVAL (size not a power of two >= 2, or bigger
 * than 2^16), SEREX_ENOMEM. The wheel starts at tick @now. */
int serex__wheel_init(struct serex__wheel *w, unsigned size, uint64_t now);
void serex__wheel_fini(struct serex__wheel *w);

/* Adds @t to expire at tick @expires (a past or current tick expires at
 * the next advance). @t must not be in the wheel. */
void serex__wheel_add(struct serex__wheel *w, struct serex__wtimer *t,
                      uint64_t expires);

/* Removes @t if it is in the wheel: O(1). Returns whether it was. */
bool serex__wheel_del(struct serex__wheel *w, struct serex__wtimer *t);

/* True if @t is in the wheel. */
static inline bool serex__wtimer_pending(const struct serex__wtimer *t)
{
    return t->level != UINT32_MAX;
}

/* Marks a new timer as not in any wheel. */
static inline void serex__wtimer_init(struct serex__wtimer *t)
{
    t->next = t->prev = NULL;
    t->level = UINT32_MAX;
}

/*
 * Moves time to @now (never backwards) and returns the expired timers, out
 * of the wheel, as a list linked through `next`, sorted by expiry then by
 * add order. NULL if none.
 */
struct serex__wtimer *serex__wheel_advance(struct serex__wheel *w,
                                           uint64_t now);

/* The earliest tick at which a timer in the wheel expires; UINT64_MAX if
 * the wheel is empty. May be earlier than the true expiry of a timer on a
 * higher level (its slot's start: time to cascade), never later. */
uint64_t serex__wheel_next(const struct serex__wheel *w);

/* Checks every invariant; prints what is wrong to @out. Returns 0 if all
 * hold, else the number of violations. For tests. */
int serex__wheel_check(const struct serex__wheel *w, FILE *out);

#endif /* SEREX_WHEEL_INTERNAL_H */
