/* SPDX-License-Identifier: MIT */
/*
 * wheel.c - the hierarchical timing wheel (see wheel_internal.h for the
 * parameters, the placement rule and the order of expiry).
 */
#include "wheel_internal.h"

#include <string.h>

#include "common_internal.h"

#define OUT UINT32_MAX /* level of a timer in no slot */
#define DUE (UINT32_MAX - 1) /* level of a timer on the due list */

static unsigned fls64(uint64_t x) /* index of the highest set bit; x != 0 */
{
    return 63u - (unsigned)__builtin_clzll(x);
}

static struct serex__wtimer **slot_head(const struct serex__wheel *w,
                                        unsigned level, uint64_t slot)
{
    return &w->slots[(size_t)level * (w->mask + 1) + slot];
}

static uint64_t *bitmap_word(const struct serex__wheel *w, unsigned level,
                             uint64_t slot)
{
    return &w->bitmap[(size_t)level * w->words + slot / 64];
}

/* The due list (timers already expired when added) is slot 0 of an extra
 * level past the last. */
static struct serex__wtimer **due_head(const struct serex__wheel *w)
{
    return slot_head(w, w->levels, 0);
}

int serex__wheel_init(struct serex__wheel *w, unsigned size, uint64_t now)
{
    memset(w, 0, sizeof *w);
    if (size < 2 || size > (1u << 16) || (size & (size - 1)) != 0)
        return SEREX_EINVAL;
    w->bits = fls64(size);
    w->levels = (64 + w->bits - 1) / w->bits;
    w->mask = size - 1;
    w->now = now;
    w->words = (size + 63) / 64;
    w->slots = serex__calloc((size_t)(w->levels + 1) * size, sizeof *w->slots);
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

/* Links @t at the tail of list @head (ties keep their add order). */
static void list_append(struct serex__wtimer **head, struct serex__wtimer *t)
{
    struct serex__wtimer *first = *head;

    if (first == NULL) {
        t->next = t->prev = t;
        *head = t;
    } else {
        t->prev = first->prev;
        t->next = first;
        first->prev->next = t;
        first->prev = t;
    }
}

/* Unlinks @t from list @head; true if the list is empty now. */
static bool list_remove(struct serex__wtimer **head, struct serex__wtimer *t)
{
    if (t->next == t) {
        *head = NULL;
        return true;
    }
    t->prev->next = t->next;
    t->next->prev = t->prev;
    if (*head == t)
        *head = t->next;
    return false;
}

/* Files @t (expires > now) in its slot, or on the due list. */
static void wheel_file(struct serex__wheel *w, struct serex__wtimer *t)
{
    unsigned level;
    uint64_t slot;

    if (t->expires <= w->now) {
        t->level = DUE;
        t->slot = 0;
        list_append(due_head(w), t);
        return;
    }
    level = fls64(t->expires ^ w->now) / w->bits;
    slot = (t->expires >> (w->bits * level)) & w->mask;
    t->level = level;
    t->slot = (uint32_t)slot;
    list_append(slot_head(w, level, slot), t);
    *bitmap_word(w, level, slot) |= UINT64_C(1) << (slot % 64);
}

void serex__wheel_add(struct serex__wheel *w, struct serex__wtimer *t,
                      uint64_t expires)
{
    SEREX_ASSERT(t->level == OUT);
    t->expires = expires;
    t->seq = w->seq++;
    wheel_file(w, t);
    w->count++;
}

bool serex__wheel_del(struct serex__wheel *w, struct serex__wtimer *t)
{
    if (t->level == OUT)
        return false;
    if (t->level == DUE) {
        list_remove(due_head(w), t);
    } else if (list_remove(slot_head(w, t->level, t->slot), t)) {
        *bitmap_word(w, t->level, t->slot) &= ~(UINT64_C(1) << (t->slot % 64));
    }
    t->level = OUT;
    t->next = t->prev = NULL;
    w->count--;
    return true;
}

/* Moves a whole slot list onto the singly linked list at *@todo. */
static void slot_take(struct serex__wheel *w, unsigned level, uint64_t slot,
                      struct serex__wtimer **todo)
{
    struct serex__wtimer **head = slot_head(w, level, slot), *t = *head;

    if (t == NULL)
        return;
    t->prev->next = *todo; /* the ring's last links to the rest */
    *todo = t;
    *head = NULL;
    if (level < w->levels) /* the due list has no bitmap */
        *bitmap_word(w, level, slot) &= ~(UINT64_C(1) << (slot % 64));
}

/* Merges two lists sorted by (expires, seq). */
static struct serex__wtimer *merge(struct serex__wtimer *a,
                                   struct serex__wtimer *b)
{
    struct serex__wtimer head, *tail = &head;

    while (a != NULL && b != NULL) {
        bool a_first = a->expires < b->expires ||
                       (a->expires == b->expires && a->seq < b->seq);
        struct serex__wtimer **pick = a_first ? &a : &b;

        tail->next = *pick;
        tail = *pick;
        *pick = (*pick)->next;
    }
    tail->next = a != NULL ? a : b;
    return head.next;
}

/* Sorts a singly linked list by (expires, seq): merge sort, no memory. */
static struct serex__wtimer *sort(struct serex__wtimer *l)
{
    struct serex__wtimer *slow = l, *fast, *second;

    if (l == NULL || l->next == NULL)
        return l;
    for (fast = l->next; fast != NULL && fast->next != NULL;
         fast = fast->next->next)
        slow = slow->next;
    second = slow->next;
    slow->next = NULL;
    return merge(sort(l), sort(second));
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
                                           uint64_t now)
{
    struct serex__wtimer *todo = NULL, *expired = NULL, *t;

    slot_take(w, w->levels, 0, &todo); /* the due list */
    if (now > w->now) {
        for (unsigned level = 0; level < w->levels; level++) {
            if ((w->now >> (w->bits * level)) == (now >> (w->bits * level)))
                break; /* this level, and all above, did not move */
            level_take(w, level, now, &todo);
        }
        w->now = now;
    }
    /* Expired ones out; the rest re-filed lower down (cascading). */
    while ((t = todo) != NULL) {
        todo = t->next;
        if (t->expires <= w->now) {
            t->level = OUT;
            t->next = expired;
            expired = t;
            w->count--;
        } else {
            wheel_file(w, t);
        }
    }
    expired = sort(expired);
    for (t = expired; t != NULL; t = t->next)
        t->prev = NULL;
    return expired;
}

/* The first set bit of @level's bitmap after slot @after, or -1. */
static int64_t bitmap_after(const struct serex__wheel *w, unsigned level,
                            uint64_t after)
{
    for (uint64_t s = after + 1; s <= w->mask;) {
        uint64_t word = *bitmap_word(w, level, s) >> (s % 64);

        if (word != 0)
            return (int64_t)(s + (unsigned)__builtin_ctzll(word));
        s = (s / 64 + 1) * 64;
    }
    return -1;
}

uint64_t serex__wheel_next(const struct serex__wheel *w)
{
    if (*due_head(w) != NULL)
        return w->now;
    for (unsigned level = 0; level < w->levels; level++) {
        unsigned shift = w->bits * level;
        uint64_t units = w->now >> shift;
        int64_t slot = bitmap_after(w, level, units & w->mask);

        if (slot >= 0) /* the start of that slot: expiry, or cascade */
            return ((units & ~w->mask) | (uint64_t)slot) << shift;
    }
    return UINT64_MAX;
}

/* --- the invariant checker --- */

static int check_slot(const struct serex__wheel *w, unsigned level,
                      uint64_t slot, size_t *count, FILE *out)
{
    const struct serex__wtimer *first = *slot_head(w, level, slot), *t;
    bool bit = level < w->levels &&
               (*bitmap_word(w, level, slot) >> (slot % 64)) & 1;
    int bad = 0;

    if (level < w->levels && bit != (first != NULL)) {
        fprintf(out, "wheel: level %u slot %llu bitmap %d list %s\n", level,
                (unsigned long long)slot, bit, first ? "full" : "empty");
        bad++;
    }
    if (first == NULL)
        return bad;
    t = first;
    do {
        bool here = level == w->levels
                        ? t->level == DUE && t->expires <= w->now
                        : t->level == level && t->slot == slot &&
                              t->expires > w->now &&
                              fls64(t->expires ^ w->now) / w->bits == level &&
                              ((t->expires >> (w->bits * level)) & w->mask) ==
                                  slot;

        if (!here || t->next->prev != t) {
            fprintf(out, "wheel: timer %llu (expires %llu) misfiled at level "
                    "%u slot %llu, now %llu\n", (unsigned long long)t->seq,
                    (unsigned long long)t->expires, level,
                    (unsigned long long)slot, (unsigned long long)w->now);
            bad++;
        }
        ++*count;
        t = t->next;
    } while (t != first && bad < 100);
    return bad;
}

int serex__wheel_check(const struct serex__wheel *w, FILE *out)
{
    size_t count = 0;
    int bad = check_slot(w, w->levels, 0, &count, out);

    for (unsigned level = 0; level < w->levels; level++)
        for (uint64_t s = 0; s <= w->mask; s++)
            bad += check_slot(w, level, s, &count, out);
    if (count != w->count) {
        fprintf(out, "wheel: %zu timers linked, %zu counted\n", count,
                w->count);
        bad++;
    }
    return bad;
}
