/* SPDX-License-Identifier: MIT */
/*
 * wheel_internal.h - a hierarchical timing wheel (the data structure under
 * the delayed scheduler; single-threaded: its owner serialises every call).
 *
 * --- Keys and ticks ---
 * A timer's key is its due time in the owner's clock (int64 ns, >= the
 * wheel's origin). The wheel files it by tick = (key - origin) / tick,
 * rounded down, but hands it out only once time has reached the key
 * itself: timers in the current tick whose key is still ahead wait on a
 * "due list". So the wheel is as exact as its keys, and the tick only sets
 * how coarse the index is. That is why the tick may be the power of two
 * at or below the tick_ns asked for (1 ms: 2^19 ns, 524 us): filing a
 * timer then takes a shift, not a 64-bit division, and nothing fires
 * later for it. (With tick_ns 1 and origin 0, key == tick.)
 *
 * --- Levels and placement: each level reaches into the next unit ---
 * Level L counts in units of 2^(bits*L) ticks (size = 2^bits units make
 * one unit of level L+1), and enough levels cover all 64 bits, so no delay
 * is ever clamped or refused. Unlike timeout.c and the Linux wheel, a
 * level has 2 * size slots, a ring, and holds the timers of the CURRENT
 * and the NEXT unit of the level above: a timer of tick E, seen at tick
 * `now` (E > now), goes to the lowest level L whose reach holds it,
 * (E >> bits*(L+1)) <= (now >> bits*(L+1)) + 1, at slot
 * (E >> bits*L) mod 2*size. A level's timers then lie in units now+1 ..
 * now+2*size-1 of its own: one unit a slot.
 *
 * --- Staged cascading: no burst when a unit begins ---
 * In a classic wheel, when time enters a slot of level L > 0, all its
 * timers are re-filed lower down at once: with a million timers over a
 * second, 270,000 records walked in one go, 30 ms in which nothing fires.
 * Here, while time is in unit U of level L, the slot of unit U+1 is
 * "staged": its timers already belong a level lower (whose reach covers
 * U+1), and every advance moves a share of them down (at least 256, and
 * twice what that advance handed out), so under load the unit is down
 * long before it begins; when it begins, whatever is left is moved then
 * (all of it, if no advance came between: only an idle wheel gets there).
 * A bitmap per level marks the non-empty slots, so the next expiry is
 * found with a few bit scans: a tickless owner sleeps until then.
 *
 * --- Links: what a timer record costs ---
 * A timer is 32 bytes: next, pprev, key and a tag the owner keeps (its
 * state and tie-breaker). Lists are singly linked with a back pointer to
 * whatever points at the node (the Linux hlist), so removal is O(1)
 * without the timer remembering its level or slot: when a removal empties
 * a slot, the head's address says which slot, and its bitmap bit goes.
 *
 * --- Order ---
 * serex__wheel_advance hands out the timers that came due sorted by key,
 * ties by tag >> SEREX__WTAG_SHIFT (the owner's add order), whatever
 * levels they came from. The due list is kept sorted (each timer is sorted
 * once, when its tick comes), and an advance over many ticks moves one
 * occupied tick at a time: it costs O(timers handed out, times the log of
 * a tick's timers), never O(timers waiting in the tick) or the log of all
 * that came due.
 */
#ifndef SEREX_WHEEL_INTERNAL_H
#define SEREX_WHEEL_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Bits of the tag below the tie-breaker: the owner's own state. */
#define SEREX__WTAG_SHIFT 10

/* A timer's place in the wheel: embed it in the owner's timer record. */
struct serex__wtimer {
    struct serex__wtimer *next;   /* slot list, due list or expired list */
    struct serex__wtimer **pprev; /* what points at us; NULL: in no list */
    int64_t key;                  /* due time */
    /* The owner's word: the wheel only reads it (relaxed), to order ties
     * by tag >> SEREX__WTAG_SHIFT; the owner may change the low bits from
     * other threads, never the tie-breaker while the timer is filed. */
    _Atomic uint64_t tag;
};

struct serex__wheel {
    unsigned bits, levels;
    uint64_t mask;           /* 2 * size - 1: a level's ring of slots */
    int64_t origin;          /* tick = (key - origin) >> shift */
    unsigned shift;          /* log2 of the tick, rounded down */
    uint64_t now;            /* the current tick */
    int64_t now_key;         /* the key of the last advance */
    size_t count;            /* timers in the wheel, due list included */
    int64_t incoming_min;    /* a key <= every key on the incoming list */
    struct serex__wtimer **slots; /* levels * size heads, the due list, then
                                     the incoming list (wheel.c) */
    uint64_t *bitmap;        /* levels * words: non-empty slots */
    uint32_t occupied[64];   /* per level: bits set in its bitmap */
    unsigned words;          /* bitmap words per level */
};

/* Returns SEREX_OK, SEREX_EINVAL (size not a power of two in [2, 2^16],
 * tick_ns < 1), SEREX_ENOMEM. The wheel starts at key @origin. */
int serex__wheel_init(struct serex__wheel *w, unsigned size, int64_t tick_ns,
                      int64_t origin);
void serex__wheel_fini(struct serex__wheel *w);

/* Adds @t, due at @key (clamped up to the origin; a key already reached
 * comes due at the next advance). @t must be in no list; its tag is set. */
void serex__wheel_add(struct serex__wheel *w, struct serex__wtimer *t,
                      int64_t key);

/* Removes @t if it is in the wheel: O(1). Returns whether it was. */
bool serex__wheel_del(struct serex__wheel *w, struct serex__wtimer *t);

/* True if @t is in the wheel. */
static inline bool serex__wtimer_pending(const struct serex__wtimer *t)
{
    return t->pprev != NULL;
}

/* Marks a new timer as not in any wheel. */
static inline void serex__wtimer_init(struct serex__wtimer *t)
{
    t->next = NULL;
    t->pprev = NULL;
}

/*
 * Moves time to @now (never backwards) and returns the timers with
 * key <= @now, out of the wheel, as a list linked through `next`, sorted by
 * key then tag. NULL if none.
 */
struct serex__wtimer *serex__wheel_advance(struct serex__wheel *w,
                                           int64_t now);

/* A key at which to advance next: never later than the earliest key in
 * the wheel (it may be earlier: the start of a slot, time to cascade);
 * INT64_MAX if the wheel is empty. O(levels): a bit scan per level. */
int64_t serex__wheel_next(const struct serex__wheel *w);

/* Removes every timer and returns them as one list (no order). */
struct serex__wtimer *serex__wheel_take_all(struct serex__wheel *w);

/* Sorts a `next`-linked list by key then tag (stable merge sort). */
struct serex__wtimer *serex__wtimer_sort(struct serex__wtimer *l);
/* Merges two sorted lists into one. */
struct serex__wtimer *serex__wtimer_merge(struct serex__wtimer *a,
                                          struct serex__wtimer *b);

/* Checks every invariant; prints what is wrong to @out. Returns 0 if all
 * hold, else the number of violations. For tests. */
int serex__wheel_check(const struct serex__wheel *w, FILE *out);

#endif /* SEREX_WHEEL_INTERNAL_H */
