/* SPDX-License-Identifier: MIT */
/*
 * wheel.c - the hierarchical timing wheel (see wheel_internal.h for keys,
 * ticks, placement, links and the order of expiry).
 */
#include "wheel_internal.h"

#include <string.h>

#include "alloc_internal.h"
#include "common_internal.h"


static uint64_t tick_of(const struct serex__wheel *w, int64_t key)
{
    return key <= w->origin ? 0 : (uint64_t)(key - w->origin) >> w->shift;
}

/* The first key of tick @t, saturating. */
static int64_t key_of_tick(const struct serex__wheel *w, uint64_t t)
{
    if (t > (uint64_t)(INT64_MAX - w->origin) >> w->shift)
        return INT64_MAX;
    return w->origin + (int64_t)(t << w->shift);
}

static size_t nslots(const struct serex__wheel *w)
{
    return (size_t)w->levels * (w->mask + 1);
}

static struct serex__wtimer **slot_head(const struct serex__wheel *w,
                                        unsigned level, uint64_t slot)
{
    return &w->slots[(size_t)level * (w->mask + 1) + slot];
}

/* The due list (timers in the current tick or before, not yet handed
 * out) has its head after the last slot, and no bitmap bit. */
static struct serex__wtimer **due_head(const struct serex__wheel *w)
{
    return &w->slots[nslots(w)];
}

static uint64_t *bitmap_word(const struct serex__wheel *w, unsigned level,
                             uint64_t slot)
{
    return &w->bitmap[(size_t)level * w->words + slot / 64];
}

int serex__wheel_init(struct serex__wheel *w, unsigned size, int64_t tick_ns,
                      int64_t origin)
{
    memset(w, 0, sizeof *w);
    if (size < 2 || size > (1u << 16) || (size & (size - 1)) != 0 ||
        tick_ns < 1)
        return SEREX_EINVAL;
    w->bits = serex__fls64(size);
    w->levels = (64 + w->bits - 1) / w->bits;
    w->mask = size - 1;
    w->origin = origin;
    w->shift = serex__fls64((uint64_t)tick_ns); /* a shift, not a division */
    w->now_key = origin;
    w->words = (size + 63) / 64;
    w->slots = serex__calloc(nslots(w) + 1, sizeof *w->slots);
    w->bitmap = serex__calloc((size_t)w->levels * w->words, sizeof *w->bitmap);
    if (w->slots == NULL || w->bitmap == NULL) {
        serex__wheel_fini(w);
        return SEREX_ENOMEM;
    }
    return SEREX_OK;
}

void serex__wheel_fini(struct serex__wheel *w)
{
    serex__free(w->slots);
    serex__free(w->bitmap);
    w->slots = NULL;
    w->bitmap = NULL;
}

static void list_push(struct serex__wtimer **head, struct serex__wtimer *t)
{
    t->next = *head;
    if (t->next != NULL)
        t->next->pprev = &t->next;
    *head = t;
    t->pprev = head;
}

static void list_unlink(struct serex__wtimer *t)
{
    *t->pprev = t->next;
    if (t->next != NULL)
        t->next->pprev = t->pprev;
    t->next = NULL;
    t->pprev = NULL;
}

/* Files @t by its key: in its slot, or on the due list. */
static void wheel_file(struct serex__wheel *w, struct serex__wtimer *t)
{
    uint64_t tick = tick_of(w, t->key), slot;
    unsigned level;

    if (tick <= w->now) {
        list_push(due_head(w), t);
        return;
    }
    level = serex__fls64(tick ^ w->now) / w->bits;
    slot = (tick >> (w->bits * level)) & w->mask;
    list_push(slot_head(w, level, slot), t);
    *bitmap_word(w, level, slot) |= UINT64_C(1) << (slot % 64);
}

void serex__wheel_add(struct serex__wheel *w, struct serex__wtimer *t,
                      int64_t key)
{
    SEREX_ASSERT(t->pprev == NULL);
    t->key = key < w->origin ? w->origin : key;
    wheel_file(w, t);
    w->count++;
}

bool serex__wheel_del(struct serex__wheel *w, struct serex__wtimer *t)
{
    struct serex__wtimer **pp = t->pprev;
    uintptr_t off;

    if (pp == NULL)
        return false;
    list_unlink(t);
    w->count--;
    /* If @t was first in a slot that is empty now, clear the slot's bit:
     * the head's address says which slot it is. */
    off = (uintptr_t)pp - (uintptr_t)w->slots;
    if (*pp == NULL && off < nslots(w) * sizeof *w->slots) {
        size_t i = off / sizeof *w->slots;
        uint64_t slot = i & w->mask;

        *bitmap_word(w, (unsigned)(i >> w->bits), slot) &=
            ~(UINT64_C(1) << (slot % 64));
    }
    return true;
}

/* Moves a whole list onto the singly linked list at *@todo. */
static void wlist_take(struct serex__wtimer **head, struct serex__wtimer **todo)
{
    struct serex__wtimer *t = *head, *next;

    for (; t != NULL; t = next) {
        next = t->next;
        t->next = *todo;
        *todo = t;
    }
    *head = NULL;
}

static void slot_take(struct serex__wheel *w, unsigned level, uint64_t slot,
                      struct serex__wtimer **todo)
{
    wlist_take(slot_head(w, level, slot), todo);
    *bitmap_word(w, level, slot) &= ~(UINT64_C(1) << (slot % 64));
}

/* Ties are ordered by the tie-breaker only: the low bits may change
 * under us (relaxed: the tie-breaker bits are stable while filed). */
static bool before(const struct serex__wtimer *a, const struct serex__wtimer *b)
{
    uint64_t ta = atomic_load_explicit(&a->tag, memory_order_relaxed);
    uint64_t tb = atomic_load_explicit(&b->tag, memory_order_relaxed);

    return a->key < b->key ||
           (a->key == b->key &&
            (ta >> SEREX__WTAG_SHIFT) < (tb >> SEREX__WTAG_SHIFT));
}

struct serex__wtimer *serex__wtimer_merge(struct serex__wtimer *a,
                                          struct serex__wtimer *b)
{
    struct serex__wtimer head, *tail = &head;

    while (a != NULL && b != NULL) {
        struct serex__wtimer **pick = before(b, a) ? &b : &a;

        tail->next = *pick;
        tail = *pick;
        *pick = (*pick)->next;
    }
    tail->next = a != NULL ? a : b;
    return head.next;
}

struct serex__wtimer *serex__wtimer_sort(struct serex__wtimer *l)
{
    struct serex__wtimer *slow = l, *fast, *second;

    if (l == NULL || l->next == NULL)
        return l;
    for (fast = l->next; fast != NULL && fast->next != NULL;
         fast = fast->next->next)
        slow = slow->next;
    second = slow->next;
    slow->next = NULL;
    return serex__wtimer_merge(serex__wtimer_sort(l),
                               serex__wtimer_sort(second));
}

/* Collects the slots of @level that time crosses from w->now to @now. */
static void level_take(struct serex__wheel *w, unsigned level, uint64_t now,
                       struct serex__wtimer **todo)
{
    unsigned shift = w->bits * level;
    uint64_t from = w->now >> shift, to = now >> shift;

    if (to - from > w->mask) { /* a whole turn or more: every slot */
        for (uint64_t s = 0; s <= w->mask; s++)
            slot_take(w, level, s, todo);
        return;
    }
    for (uint64_t u = from + 1; u <= to; u++)
        slot_take(w, level, u & w->mask, todo);
}

struct serex__wtimer *serex__wheel_advance(struct serex__wheel *w,
                                           int64_t now)
{
    struct serex__wtimer *todo = NULL, *expired = NULL, *t;
    uint64_t tick;

    if (now < w->now_key)
        now = w->now_key;
    tick = tick_of(w, now);
    wlist_take(due_head(w), &todo);
    if (tick > w->now) {
        for (unsigned level = 0; level < w->levels; level++) {
            if ((w->now >> (w->bits * level)) == (tick >> (w->bits * level)))
                break; /* this level, and all above, did not move */
            level_take(w, level, tick, &todo);
        }
        w->now = tick;
    }
    w->now_key = now;
    /* Due ones out; the rest re-filed lower down (cascading), or on the
     * due list if their tick has come but not their key. */
    while ((t = todo) != NULL) {
        todo = t->next;
        if (t->key <= now) {
            t->pprev = NULL;
            t->next = expired;
            expired = t;
            w->count--;
        } else {
            wheel_file(w, t);
        }
    }
    return serex__wtimer_sort(expired);
}

struct serex__wtimer *serex__wheel_take_all(struct serex__wheel *w)
{
    struct serex__wtimer *all = NULL;

    for (size_t i = 0; i <= nslots(w); i++)
        wlist_take(&w->slots[i], &all);
    memset(w->bitmap, 0, (size_t)w->levels * w->words * sizeof *w->bitmap);
    for (struct serex__wtimer *t = all; t != NULL; t = t->next)
        t->pprev = NULL;
    w->count = 0;
    return all;
}

/* The first set bit of @level's bitmap after slot @after, or -1. */
static int64_t bitmap_after(const struct serex__wheel *w, unsigned level,
                            uint64_t after)
{
    for (uint64_t s = after + 1; s <= w->mask;) {
        uint64_t word = *bitmap_word(w, level, s) >> (s % 64);

        if (word != 0)
            return (int64_t)(s + serex__ffs64(word));
        s = (s / 64 + 1) * 64;
    }
    return -1;
}

static int64_t list_min_key(const struct serex__wtimer *t)
{
    int64_t m = INT64_MAX;

    for (; t != NULL; t = t->next)
        if (t->key < m)
            m = t->key;
    return m;
}

int64_t serex__wheel_next(const struct serex__wheel *w)
{
    int64_t m = list_min_key(*due_head(w));

    for (unsigned level = 0; level < w->levels; level++) {
        unsigned shift = w->bits * level;
        uint64_t units = w->now >> shift;
        int64_t slot = bitmap_after(w, level, units & w->mask);
        int64_t k;

        if (slot < 0)
            continue;
        /* Level 0 slots are one tick: their exact keys are known. Above,
         * the slot's start: time to cascade. Lower levels come first. */
        k = level == 0 ? list_min_key(*slot_head(w, 0, (uint64_t)slot))
                       : key_of_tick(w, ((units & ~w->mask) | (uint64_t)slot)
                                            << shift);
        return k < m ? k : m;
    }
    return m;
}

/* --- the invariant checker --- */

static int check_list(const struct serex__wheel *w, unsigned level,
                      uint64_t slot, size_t *count, FILE *out)
{
    bool due = level == w->levels;
    struct serex__wtimer *const *head =
        due ? due_head(w) : slot_head(w, level, slot);
    const struct serex__wtimer *t;
    struct serex__wtimer *const *pp = head;
    bool bit = !due && (*bitmap_word(w, level, slot) >> (slot % 64)) & 1;
    int bad = 0;

    if (!due && bit != (*head != NULL)) {
        fprintf(out, "wheel: level %u slot %llu bitmap %d list %s\n", level,
                (unsigned long long)slot, bit, *head ? "full" : "empty");
        bad++;
    }
    for (t = *head; t != NULL && bad < 100; pp = &t->next, t = t->next) {
        uint64_t tick = tick_of(w, t->key);
        bool here = due ? tick <= w->now
                        : tick > w->now &&
                              serex__fls64(tick ^ w->now) / w->bits == level &&
                              ((tick >> (w->bits * level)) & w->mask) == slot;

        if (!here || t->pprev != pp || t->key < w->origin) {
            fprintf(out, "wheel: key %lld (tick %llu) misfiled at level %u "
                    "slot %llu, now %llu\n", (long long)t->key,
                    (unsigned long long)tick, level, (unsigned long long)slot,
                    (unsigned long long)w->now);
            bad++;
        }
        ++*count;
    }
    return bad;
}

int serex__wheel_check(const struct serex__wheel *w, FILE *out)
{
    size_t count = 0;
    int bad = check_list(w, w->levels, 0, &count, out);

    if (tick_of(w, w->now_key) != w->now) {
        fprintf(out, "wheel: tick %llu but key %lld\n",
                (unsigned long long)w->now, (long long)w->now_key);
        bad++;
    }
    for (unsigned level = 0; level < w->levels; level++)
        for (uint64_t s = 0; s <= w->mask; s++)
            bad += check_list(w, level, s, &count, out);
    if (count != w->count) {
        fprintf(out, "wheel: %zu timers linked, %zu counted\n", count,
                w->count);
        bad++;
    }
    return bad;
}
