/* SPDX-License-Identifier: MIT */
/*
 * wheel.c - the hierarchical timing wheel (see wheel_internal.h for keys,
 * ticks, placement, links and the order of expiry).
 */
#include "wheel_internal.h"

#include <string.h>

#include "alloc_internal.h"
#include "common_internal.h"

/* The least a step moves of each level's staged unit (see advance_step). */
#define STAGE_MIN 256u


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

/* Timers in the current tick (or before) whose key time has not reached
 * yet wait on two lists after the last slot, with no bitmap bit: the due
 * list, sorted by key then tag, and the incoming list, unsorted, where
 * adds for the current tick go until the next advance sorts them in. So
 * each timer is sorted once, and an advance costs what it hands out, not
 * what is waiting (re-sorting the whole due list on every advance made the
 * cost per timer grow with the timers due in a tick). */
static struct serex__wtimer **due_head(const struct serex__wheel *w)
{
    return &w->slots[nslots(w)];
}

static struct serex__wtimer **incoming_head(const struct serex__wheel *w)
{
    return &w->slots[nslots(w) + 1];
}

static uint64_t *bitmap_word(const struct serex__wheel *w, unsigned level,
                             uint64_t slot)
{
    return &w->bitmap[(size_t)level * w->words + slot / 64];
}

/* Marks @slot of @level occupied, keeping the level's count of them. */
static void slot_mark(struct serex__wheel *w, unsigned level, uint64_t slot)
{
    uint64_t *word = bitmap_word(w, level, slot), bit = UINT64_C(1)
                                                          << (slot % 64);

    if (!(*word & bit))
        w->occupied[level]++;
    *word |= bit;
}

static void slot_clear(struct serex__wheel *w, unsigned level, uint64_t slot)
{
    uint64_t *word = bitmap_word(w, level, slot), bit = UINT64_C(1)
                                                          << (slot % 64);

    if (*word & bit)
        w->occupied[level]--;
    *word &= ~bit;
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
    w->mask = 2 * (uint64_t)size - 1; /* two turns a level: see the header */
    w->origin = origin;
    w->shift = serex__fls64((uint64_t)tick_ns); /* a shift, not a division */
    w->now_key = origin;
    w->words = (unsigned)((w->mask + 1 + 63) / 64);
    w->incoming_min = INT64_MAX;
    w->slots = serex__calloc(nslots(w) + 2, sizeof *w->slots);
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

/* The level for a timer of tick @e > w->now: the lowest whose reach, the
 * current and the next unit of the level above, holds it (the top level
 * holds everything). */
static unsigned level_for(const struct serex__wheel *w, uint64_t e)
{
    unsigned level = 0;

    for (; level + 1 < w->levels; level++) {
        unsigned up = w->bits * (level + 1);

        if ((e >> up) <= (w->now >> up) + 1)
            break;
    }
    return level;
}

/* Files @t by its key: in its slot, or on the incoming list. */
static void wheel_file(struct serex__wheel *w, struct serex__wtimer *t)
{
    uint64_t tick = tick_of(w, t->key), slot;
    unsigned level;

    if (tick <= w->now) {
        list_push(incoming_head(w), t);
        if (t->key < w->incoming_min)
            w->incoming_min = t->key;
        return;
    }
    level = level_for(w, tick);
    slot = (tick >> (w->bits * level)) & w->mask;
    list_push(slot_head(w, level, slot), t);
    slot_mark(w, level, slot);
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

        slot_clear(w, (unsigned)(i / (w->mask + 1)), slot);
    }
    return true;
}

/* What one step of an advance took out of the wheel. */
struct step_out {
    struct serex__wtimer *expired; /* key <= now: no order yet */
    struct serex__wtimer *fresh;   /* in the current tick, not due yet */
    size_t out;                    /* how many are on the two lists */
};

/* Sends @t, just taken from a list, where time (tick w->now, key @now)
 * says: out, onto the due list, or lower down (cascading). */
static void sort_out(struct serex__wheel *w, struct serex__wtimer *t,
                     int64_t now, struct step_out *o)
{
    if (t->key <= now) {
        t->pprev = NULL;
        t->next = o->expired;
        o->expired = t;
        w->count--;
        o->out++;
    } else if (tick_of(w, t->key) <= w->now) {
        t->next = o->fresh;
        o->fresh = t;
        o->out++;
    } else {
        wheel_file(w, t); /* a lower level: never a list being taken */
    }
}

/* Takes a whole list and sorts each timer out in the same walk: the walk
 * is a chain of cache misses (records lie where they were allocated), so
 * it is made once, not once to collect and again to file. */
static void list_take(struct serex__wheel *w, struct serex__wtimer **head,
                      int64_t now, struct step_out *o)
{
    struct serex__wtimer *t = *head, *next;

    *head = NULL;
    for (; t != NULL; t = next) {
        next = t->next;
        sort_out(w, t, now, o);
    }
}

static void slot_take(struct serex__wheel *w, unsigned level, uint64_t slot,
                      int64_t now, struct step_out *o)
{
    slot_clear(w, level, slot);
    list_take(w, slot_head(w, level, slot), now, o);
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

/* Takes the slots of @level's units after @from's up to w->now's (set
 * already), key @now: their timers all belong lower down now. */
static void level_take(struct serex__wheel *w, unsigned level, uint64_t from,
                       int64_t now, struct step_out *o)
{
    unsigned shift = w->bits * level;
    uint64_t f = from >> shift, to = w->now >> shift;

    if (to - f > w->mask) { /* the whole ring or more: every slot */
        for (uint64_t s = 0; s <= w->mask; s++)
            slot_take(w, level, s, now, o);
        return;
    }
    for (uint64_t u = f + 1; u <= to; u++)
        slot_take(w, level, u & w->mask, now, o);
}

/* Moves up to @budget timers of @level's next unit (its staged slot) down
 * a level: the unit must be empty by the time it begins. */
static void stage_drain(struct serex__wheel *w, unsigned level, size_t budget,
                        int64_t now, struct step_out *o)
{
    uint64_t slot = ((w->now >> (w->bits * level)) + 1) & w->mask;
    struct serex__wtimer **head = slot_head(w, level, slot), *t;

    for (; budget > 0 && (t = *head) != NULL; budget--) {
        *head = t->next;
        if (t->next != NULL)
            t->next->pprev = head;
        sort_out(w, t, now, o); /* never due: filed a level lower */
    }
    if (*head == NULL)
        slot_clear(w, level, slot);
}

/* Inserts the sorted singly linked list @l into the sorted due list,
 * keeping the back pointers: one walk, no longer than the due list. */
static void due_insert(struct serex__wheel *w, struct serex__wtimer *l)
{
    struct serex__wtimer **pp = due_head(w), *t;

    while ((t = l) != NULL) {
        l = t->next;
        while (*pp != NULL && !before(t, *pp))
            pp = &(*pp)->next;
        t->next = *pp;
        if (t->next != NULL)
            t->next->pprev = &t->next;
        *pp = t;
        t->pprev = pp;
        pp = &t->next;
    }
}

/* Takes the due list's head while its key has come: already in order. */
static struct serex__wtimer *due_take(struct serex__wheel *w, int64_t now)
{
    struct serex__wtimer **head = due_head(w), *first = *head, *t = first,
                         *last = NULL;

    for (; t != NULL && t->key <= now; t = t->next) {
        t->pprev = NULL;
        last = t;
        w->count--;
    }
    if (last == NULL)
        return NULL;
    last->next = NULL;
    *head = t;
    if (t != NULL)
        t->pprev = head;
    return first;
}

/* One step of an advance: time moves to @now, and what came due comes out
 * in order. The caller keeps a step within one tick of the first timer,
 * so what is sorted here is about one tick's timers. */
static struct serex__wtimer *advance_step(struct serex__wheel *w, int64_t now)
{
    struct step_out o = {NULL, NULL, 0};
    uint64_t tick = tick_of(w, now), from = w->now;
    size_t budget;

    /* Time moves first, so that what is taken files against the new tick.
     * Levels go top down: what a level hands down lands only in units
     * still ahead, or in crossed ones a lower level takes next. */
    w->now = tick;
    w->now_key = now;
    w->incoming_min = INT64_MAX;
    list_take(w, incoming_head(w), now, &o);
    for (unsigned level = w->levels; level-- > 0;)
        if ((from >> (w->bits * level)) != (tick >> (w->bits * level)))
            level_take(w, level, from, now, &o);
    /* The staged units move down a share at a time: at least STAGE_MIN,
     * and twice what this step handed out, so that under a steady load a
     * unit is down well before it begins, whatever its population. */
    budget = STAGE_MIN + 2 * o.out;
    for (unsigned level = 1; level < w->levels; level++)
        stage_drain(w, level, budget, now, &o);
    due_insert(w, serex__wtimer_sort(o.fresh));
    return serex__wtimer_merge(serex__wtimer_sort(o.expired),
                               due_take(w, now));
}

/*
 * Time may jump many ticks at once (an owner that fell behind, a manual
 * clock): then it moves one occupied tick at a time, so that each sort
 * is of one tick's timers, in cache, and the steps' lists simply follow
 * each other (a later step's keys are in later ticks). One sort of all
 * that came due would cost log(n) passes over records spread across
 * memory, more the further behind, which puts the owner further behind.
 */
struct serex__wtimer *serex__wheel_advance(struct serex__wheel *w,
                                           int64_t now)
{
    struct serex__wtimer *out = NULL, **tail = &out;

    if (now < w->now_key)
        now = w->now_key;
    for (;;) {
        int64_t k = serex__wheel_next(w), step = now;

        if (k < now) { /* stop at the end of the first occupied tick */
            uint64_t kt = tick_of(w, k);
            int64_t end = key_of_tick(w, (kt > w->now ? kt : w->now) + 1);

            if (end != INT64_MAX && end - 1 < now)
                step = end - 1;
        }
        *tail = advance_step(w, step);
        while (*tail != NULL)
            tail = &(*tail)->next;
        if (step == now)
            return out;
    }
}

struct serex__wtimer *serex__wheel_take_all(struct serex__wheel *w)
{
    struct serex__wtimer *all = NULL, *t, *next;

    for (size_t i = 0; i < nslots(w) + 2; i++) {
        for (t = w->slots[i]; t != NULL; t = next) {
            next = t->next;
            t->next = all;
            t->pprev = NULL;
            all = t;
        }
        w->slots[i] = NULL;
    }
    w->incoming_min = INT64_MAX;
    memset(w->bitmap, 0, (size_t)w->levels * w->words * sizeof *w->bitmap);
    memset(w->occupied, 0, sizeof w->occupied);
    w->count = 0;
    return all;
}

/* The first set bit of @level's bitmap at slot @from or after, in ring
 * order (wrapping), or -1. */
static int64_t bitmap_ring_first(const struct serex__wheel *w, unsigned level,
                                 uint64_t from)
{
    for (uint64_t n = 0, s = from; n <= w->mask;) {
        uint64_t word = *bitmap_word(w, level, s) >> (s % 64);
        uint64_t left = 64 - s % 64; /* bits of this word from s on */

        if (left > w->mask + 1 - s)
            left = w->mask + 1 - s; /* a ring smaller than a word */

        if (word != 0)
            return (int64_t)((s + serex__ffs64(word)) & w->mask);
        n += left;
        s = (s + left) & w->mask;
    }
    return -1;
}

int64_t serex__wheel_next(const struct serex__wheel *w)
{
    const struct serex__wtimer *first = *due_head(w);
    int64_t m = first != NULL ? first->key : INT64_MAX;

    /* incoming_min may be stale (a cancel): early, never late */
    if (*incoming_head(w) != NULL && w->incoming_min < m)
        m = w->incoming_min;
    for (unsigned level = 0; level < w->levels; level++) {
        unsigned shift = w->bits * level;
        uint64_t cur = w->now >> shift;
        int64_t slot, k;

        if (w->occupied[level] == 0)
            continue; /* most levels, most of the time: no scan */
        slot = bitmap_ring_first(w, level, (cur + 1) & w->mask);
        /* A level's timers lie in units cur + 1 .. cur + 2 * size - 1, one
         * a slot: the first in ring order is the earliest. Its first key:
         * time to take the slot (level 0: onto the due list, whose head
         * then says the exact key; above: down a level). Not the slot's
         * least key, which would cost a walk of the slot. Levels overlap
         * (each reaches into the next unit of the one above), so every
         * level is asked. */
        k = key_of_tick(w, (cur + 1 + (((uint64_t)slot - cur - 1) & w->mask))
                               << shift);
        if (k < m)
            m = k;
    }
    return m;
}

/* --- the invariant checker --- */

/* @level == levels: the due list; levels + 1: the incoming list. */
static int check_list(const struct serex__wheel *w, unsigned level,
                      uint64_t slot, size_t *count, FILE *out)
{
    bool due = level >= w->levels, sorted = level == w->levels;
    struct serex__wtimer *const *head =
        !due ? slot_head(w, level, slot)
             : (sorted ? due_head(w) : incoming_head(w));
    const struct serex__wtimer *t, *prev = NULL;
    struct serex__wtimer *const *pp = head;
    bool bit = !due && (*bitmap_word(w, level, slot) >> (slot % 64)) & 1;
    int bad = 0;

    if (!due && bit != (*head != NULL)) {
        fprintf(out, "wheel: level %u slot %llu bitmap %d list %s\n", level,
                (unsigned long long)slot, bit, *head ? "full" : "empty");
        bad++;
    }
    for (t = *head; t != NULL && bad < 100;
         prev = t, pp = &t->next, t = t->next) {
        uint64_t tick = tick_of(w, t->key);
        unsigned shift = w->bits * level, want = due ? 0 : level_for(w, tick);
        bool here = due ? tick <= w->now
                        : tick > w->now &&
                              ((tick >> shift) & w->mask) == slot &&
                              (want == level ||
                               (want < level &&
                                (tick >> shift) == (w->now >> shift) + 1));

        if (!here || t->pprev != pp || t->key < w->origin ||
            (sorted && prev != NULL && before(t, prev)) ||
            (due && !sorted && t->key < w->incoming_min)) {
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
    int bad = check_list(w, w->levels, 0, &count, out) +
              check_list(w, w->levels + 1, 0, &count, out);

    if (tick_of(w, w->now_key) != w->now) {
        fprintf(out, "wheel: tick %llu but key %lld\n",
                (unsigned long long)w->now, (long long)w->now_key);
        bad++;
    }
    for (unsigned level = 0; level < w->levels; level++) {
        uint32_t bits = 0;

        for (uint64_t s = 0; s <= w->mask; s++) {
            bad += check_list(w, level, s, &count, out);
            bits += (*bitmap_word(w, level, s) >> (s % 64)) & 1;
        }
        if (bits != w->occupied[level]) {
            fprintf(out, "wheel: level %u has %u slots marked, %u counted\n",
                    level, bits, w->occupied[level]);
            bad++;
        }
    }
    if (count != w->count) {
        fprintf(out, "wheel: %zu timers linked, %zu counted\n", count,
                w->count);
        bad++;
    }
    return bad;
}
