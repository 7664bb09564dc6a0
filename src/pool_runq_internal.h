/* SPDX-License-Identifier: MIT */
/*
 * pool_runq_internal.h - a pool worker's own run queue and its next-task
 * slot: where a task that one of the pool's workers submits goes, so that
 * the path writes no line another core writes.
 *
 * --- The run queue (Go's runq, Tokio's local queue) ---
 * A ring of RUNQ_CAP task records with two 64-bit indices, `head` and
 * `tail`. Only the owner writes `tail` and the records at `tail`; anyone
 * takes from `head` with a CAS: the owner's pop (one record), a thief
 * (half of what is there), the owner's overflow (the older half, on its
 * way to the shared queue) and shutdown_now's claim (everything). Whoever
 * wins the CAS from h to h + n owns records [h, h + n); the others' CAS
 * fails and they look again. A taker reads the records before its CAS,
 * with relaxed loads: they may be torn by an owner refilling them, but
 * then the owner has seen a head past them, so head is no longer h and
 * the CAS fails (indices never repeat: 64 bits do not wrap). The owner
 * writes a record only where tail - head < RUNQ_CAP by a head it loaded
 * with acquire, which pairs with the taker's acq_rel CAS: the taker's
 * reads of that record happen before the owner's write.
 * The owner publishes `tail` seq_cst: its release half makes the record
 * visible to takers that load tail with acquire, and its seq_cst half is
 * the publishing side of the pool's park handshake (pool_idle.c's essay).
 *
 * --- The next-task slot (Tokio's LIFO slot, Go's runnext) ---
 * The same protocol on a ring of one: full when tail != head. The owner
 * puts a task there only when it is empty, and takes it (CAS on head)
 * to move it behind the run queue when a newer task comes. A thief takes
 * it with the same CAS, so who runs it is decided once. The pool decides
 * when a thief may (pool_local.c: a slot is stolen only once it has waited
 * SLOT_STEAL_NS while its owner was busy).
 *
 * Every record carries a stamp: the submitting thread's number and its
 * count of submissions (pool_inject.c), by which shutdown_now hands back each
 * thread's tasks in the order that thread submitted them.
 */
#ifndef SEREX_POOL_RUNQ_INTERNAL_H
#define SEREX_POOL_RUNQ_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common_internal.h"

#define SEREX__RUNQ_CAP 256u /* records; a power of two */

/* A task as queues hold it: what to run and the order it came in. */
struct serex__task_rec {
    serex_fn fn;
    void *arg;
    uint64_t stamp; /* submitting thread << 40 | its submission count */
    uint64_t t;     /* its submit time (serex__metrics_stamp), 0: untimed */
};

/* A record a taker may read while its owner rewrites it (see above). */
struct serex__runq_slot {
    _Atomic(serex_fn) fn;
    void *_Atomic arg;
    _Atomic uint64_t stamp;
    _Atomic uint64_t t;
};

struct serex__runq {
    _Alignas(SEREX__CACHELINE) _Atomic uint64_t head; /* CAS by any taker */
    _Atomic uint64_t tail; /* written by the owner only */
    struct serex__runq_slot buf[SEREX__RUNQ_CAP];
};

struct serex__runq_next {
    _Atomic uint64_t head; /* CAS by any taker */
    _Atomic uint64_t tail; /* written by the owner only: head or head + 1 */
    struct serex__runq_slot rec;
};

static inline void serex__runq_write(struct serex__runq_slot *s,
                                     const struct serex__task_rec *r)
{
    /* relaxed: published by the owner's seq_cst store of tail */
    atomic_store_explicit(&s->fn, r->fn, memory_order_relaxed);
    atomic_store_explicit(&s->arg, r->arg, memory_order_relaxed);
    atomic_store_explicit(&s->stamp, r->stamp, memory_order_relaxed);
    atomic_store_explicit(&s->t, r->t, memory_order_relaxed);
}

static inline void serex__runq_read(struct serex__runq_slot *s,
                                    struct serex__task_rec *r)
{
    /* relaxed: ordered by the acquire load of tail before, and validated
     * by the taker's CAS after (see the essay) */
    r->fn = atomic_load_explicit(&s->fn, memory_order_relaxed);
    r->arg = atomic_load_explicit(&s->arg, memory_order_relaxed);
    r->stamp = atomic_load_explicit(&s->stamp, memory_order_relaxed);
    r->t = atomic_load_explicit(&s->t, memory_order_relaxed);
}

static inline struct serex__runq_slot *serex__runq_at(struct serex__runq *q,
                                                      uint64_t i)
{
    return &q->buf[i & (SEREX__RUNQ_CAP - 1)];
}

/* Empty? Anyone. seq_cst (both): the re-check half of the park
 * handshake (pool_idle.c's essay). */
static inline bool serex__runq_empty(struct serex__runq *q)
{
    return atomic_load_explicit(&q->head, memory_order_seq_cst) ==
           atomic_load_explicit(&q->tail, memory_order_seq_cst);
}

/* Records the owner may still write at tail. The owner only. */
static inline unsigned serex__runq_room(struct serex__runq *q)
{
    /* acquire: pairs with takers' CAS: their reads of the records we may
     * now rewrite are done; relaxed: tail is ours */
    uint64_t h = atomic_load_explicit(&q->head, memory_order_acquire);
    uint64_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);

    return SEREX__RUNQ_CAP - (unsigned)(t - h);
}

/* Writes @r at tail + @i, not yet published. The owner only, with room. */
static inline void serex__runq_put_at(struct serex__runq *q, unsigned i,
                                      const struct serex__task_rec *r)
{
    /* relaxed: tail is ours */
    uint64_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);

    serex__runq_write(serex__runq_at(q, t + i), r);
}

/* Publishes the @n records written by serex__runq_put_at. */
static inline void serex__runq_publish(struct serex__runq *q, unsigned n)
{
    /* relaxed: tail is ours */
    uint64_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);

    /* seq_cst: makes the records visible to takers (release) and is the
     * publishing half of the park handshake (pool_idle.c's essay) */
    atomic_store_explicit(&q->tail, t + n, memory_order_seq_cst);
}

/* Appends @r if there is room. The owner only. */
static inline bool serex__runq_push(struct serex__runq *q,
                                    const struct serex__task_rec *r)
{
    if (serex__runq_room(q) == 0)
        return false;
    serex__runq_put_at(q, 0, r);
    serex__runq_publish(q, 1);
    return true;
}

/*
 * Takes up to @max of the oldest records into @out (room for @max): the
 * owner's pop (max 1) and overflow, or shutdown_now's claim. Any thread.
 * Returns how many.
 */
static inline unsigned serex__runq_take(struct serex__runq *q,
                                        struct serex__task_rec *out,
                                        unsigned max)
{
    /* acquire: the records were written before the tail we read next */
    uint64_t h = atomic_load_explicit(&q->head, memory_order_acquire);

    for (;;) {
        /* acquire: pairs with the owner's seq_cst (release) tail store */
        uint64_t t = atomic_load_explicit(&q->tail, memory_order_acquire);
        uint64_t avail = t - h;
        unsigned n;

        if (avail == 0)
            return 0;
        if (avail > SEREX__RUNQ_CAP) { /* h went stale: others took */
            /* acquire: as above */
            h = atomic_load_explicit(&q->head, memory_order_acquire);
            continue;
        }
        n = avail < max ? (unsigned)avail : max;
        for (unsigned i = 0; i < n; i++)
            serex__runq_read(serex__runq_at(q, h + i), &out[i]);
        /* acq_rel: decides the records' one taker (see the essay); on
         * failure h is reloaded (acquire) */
        if (atomic_compare_exchange_weak_explicit(&q->head, &h, h + n,
                                                  memory_order_acq_rel,
                                                  memory_order_acquire))
            return n;
    }
}

/*
 * Moves half of @v's records into @q, which must be empty (a thief's own
 * queue; the caller is @q's owner). Returns how many.
 */
static inline unsigned serex__runq_steal(struct serex__runq *q,
                                         struct serex__runq *v)
{
    /* relaxed: tail is ours */
    uint64_t lt = atomic_load_explicit(&q->tail, memory_order_relaxed);

    for (int tries = 0; tries < 4; tries++) {
        /* acquire (both): the owner's records come before its tail */
        uint64_t h = atomic_load_explicit(&v->head, memory_order_acquire);
        uint64_t t = atomic_load_explicit(&v->tail, memory_order_acquire);
        unsigned n;

        if (t - h == 0 || t - h > SEREX__RUNQ_CAP) /* empty, or torn */
            return 0;
        n = (unsigned)((t - h + 1) / 2);
        for (unsigned i = 0; i < n; i++) {
            struct serex__task_rec r;

            serex__runq_read(serex__runq_at(v, h + i), &r);
            serex__runq_write(serex__runq_at(q, lt + i), &r);
        }
        /* acq_rel: claims [h, h + n) against the owner and other takers */
        if (atomic_compare_exchange_strong_explicit(&v->head, &h, h + n,
                                                    memory_order_acq_rel,
                                                    memory_order_relaxed)) {
            serex__runq_publish(q, n);
            return n;
        }
    }
    return 0;
}

/* --- the next-task slot --- */

/* Empty? Anyone. seq_cst (both): as serex__runq_empty. */
static inline bool serex__next_empty(struct serex__runq_next *n)
{
    return atomic_load_explicit(&n->head, memory_order_seq_cst) ==
           atomic_load_explicit(&n->tail, memory_order_seq_cst);
}

/* Fills the empty slot. The owner only (it has seen it empty). */
static inline void serex__next_put(struct serex__runq_next *n,
                                   const struct serex__task_rec *r)
{
    /* relaxed: tail is ours */
    uint64_t t = atomic_load_explicit(&n->tail, memory_order_relaxed);

    serex__runq_write(&n->rec, r);
    /* seq_cst: as serex__runq_publish */
    atomic_store_explicit(&n->tail, t + 1, memory_order_seq_cst);
}

/* Is the slot empty, as its owner sees it (before a put)? */
static inline bool serex__next_free(struct serex__runq_next *n)
{
    /* acquire: pairs with a taker's CAS: its read of the record is done
     * before we rewrite it; relaxed: tail is ours */
    return atomic_load_explicit(&n->head, memory_order_acquire) ==
           atomic_load_explicit(&n->tail, memory_order_relaxed);
}

/*
 * Takes the slot's task into *out. Anyone. If @stamp is not NULL, only a
 * task with that stamp (a thief's delayed steal). Returns whether it did.
 */
static inline bool serex__next_take(struct serex__runq_next *n,
                                    struct serex__task_rec *out,
                                    const uint64_t *stamp)
{
    /* acquire: the record was written before the tail we read next */
    uint64_t h = atomic_load_explicit(&n->head, memory_order_acquire);

    /* acquire: pairs with the owner's seq_cst (release) tail store */
    if (atomic_load_explicit(&n->tail, memory_order_acquire) == h)
        return false;
    serex__runq_read(&n->rec, out);
    if (stamp != NULL && out->stamp != *stamp)
        return false;
    /* acq_rel: decides the task's one taker; strong: a spurious failure
     * would look like a lost race */
    return atomic_compare_exchange_strong_explicit(
        &n->head, &h, h + 1, memory_order_acq_rel, memory_order_relaxed);
}

/* The stamp of the slot's task, if any (a thief's look). Anyone. */
static inline bool serex__next_peek(struct serex__runq_next *n,
                                    uint64_t *stamp)
{
    /* acquire (both): as serex__next_take; the stamp may be stale by the
     * time it is used, which serex__next_take's check then catches */
    uint64_t h = atomic_load_explicit(&n->head, memory_order_acquire);

    if (atomic_load_explicit(&n->tail, memory_order_acquire) == h)
        return false;
    /* relaxed: a hint, validated by serex__next_take */
    *stamp = atomic_load_explicit(&n->rec.stamp, memory_order_relaxed);
    return true;
}

#endif /* SEREX_POOL_RUNQ_INTERNAL_H */
