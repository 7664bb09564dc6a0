/* SPDX-License-Identifier: MIT */
/*
 * mpsc_internal.h - Dmitry Vyukov's intrusive multi-producer,
 * single-consumer queue of task nodes.
 *
 * push is one atomic exchange on `tail` and one store: it never blocks and
 * never fails. pop belongs to one consumer at a time (the caller provides
 * the exclusion). Between a producer's exchange and its store of the link,
 * the consumer can see a node that is not linked yet: pop then reports
 * MPSC_BUSY, and the consumer retries; it never skips the node. The queue
 * is empty exactly when `tail` is the stub and the stub has no successor.
 */
#ifndef SEREX_MPSC_INTERNAL_H
#define SEREX_MPSC_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "spinlock_internal.h"
#include "task_internal.h"
#include "thread_internal.h"

/*
 * The queue's three parts, passed separately: its users (a serial, a
 * striped lane) keep `tail` (written by producers) and `head` (written by
 * the consumer) on different cache lines, so a push never bounces the
 * consumer's line.
 */
struct serex__mpsc_ends {
    struct serex__task *_Atomic *tail;
    struct serex__task **head;
    struct serex__task *stub;
};

enum serex__mpsc_pop { SEREX__MPSC_EMPTY, SEREX__MPSC_BUSY, SEREX__MPSC_OK };

static inline void serex__mpsc_init_ends(struct serex__mpsc_ends q)
{
    atomic_init(&q.stub->next, NULL);
    atomic_init(q.tail, q.stub);
    *q.head = q.stub;
}

static inline void serex__mpsc_push_ends(struct serex__mpsc_ends q,
                                         struct serex__task *t)
{
    /*
     * acq_rel. Release: our writes of t (fn, arg, next = NULL) before the
     * next producer links behind it. Acquire: prev's fields are complete.
     */
    struct serex__task *prev = atomic_exchange_explicit(q.tail, t,
                                                        memory_order_acq_rel);

    /* release: pairs with the acquire loads of next in the pop, so the
     * consumer that follows this link sees t's fn and arg */
    atomic_store_explicit(&prev->next, t, memory_order_release);
}

/* Pops the oldest node into *out. One consumer at a time. */
static inline enum serex__mpsc_pop serex__mpsc_pop_ends(
    struct serex__mpsc_ends q, struct serex__task **out)
{
    struct serex__task *head = *q.head, *next, *tail;

    /* acquire (every load of next): pairs with the release link in push */
    next = atomic_load_explicit(&head->next, memory_order_acquire);
    if (head == q.stub) {
        if (next == NULL) /* acquire: as below */
            return atomic_load_explicit(q.tail, memory_order_acquire) == q.stub
                       ? SEREX__MPSC_EMPTY
                       : SEREX__MPSC_BUSY;
        *q.head = head = next;
        next = atomic_load_explicit(&head->next, memory_order_acquire);
    }
    if (next != NULL) {
        *q.head = next;
        *out = head;
        return SEREX__MPSC_OK;
    }
    /* acquire: head is the last node only if it is still the tail */
    tail = atomic_load_explicit(q.tail, memory_order_acquire);
    if (tail != head)
        return SEREX__MPSC_BUSY;
    /* head is the last node: queue the stub behind it so head can move */
    atomic_store_explicit(&q.stub->next, NULL, memory_order_relaxed);
    serex__mpsc_push_ends(q, q.stub);
    next = atomic_load_explicit(&head->next, memory_order_acquire);
    if (next == NULL)
        return SEREX__MPSC_BUSY;
    *q.head = next;
    *out = head;
    return SEREX__MPSC_OK;
}

/* Pops, waiting out a producer caught between its exchange and its link. */
static inline struct serex__task *serex__mpsc_pop_wait_ends(
    struct serex__mpsc_ends q)
{
    struct serex__task *t = NULL;
    enum serex__mpsc_pop r;

    for (unsigned spins = 0;
         (r = serex__mpsc_pop_ends(q, &t)) == SEREX__MPSC_BUSY; spins++) {
        if (spins % 64 == 63)
            serex__thread_yield(); /* the producer may be preempted */
        else
            serex__cpu_relax();
    }
    return r == SEREX__MPSC_OK ? t : NULL;
}

/*
 * Pops every queued task, in order, onto the private list whose end is at
 * *@tail (links through next; *@tail moves to the new end). The caller
 * holds the consumer side (its pop lock), so no drain starts a task
 * behind one taken here. Returns how many. relaxed: the nodes are ours.
 */
static inline size_t serex__mpsc_take_all(struct serex__mpsc_ends q,
                                          struct serex__task ***tail)
{
    struct serex__task *t;
    size_t n = 0;

    while ((t = serex__mpsc_pop_wait_ends(q)) != NULL) {
        atomic_store_explicit(&t->next, NULL, memory_order_relaxed);
        **tail = t;
        *tail = (struct serex__task **)&t->next;
        n++;
    }
    return n;
}

#endif /* SEREX_MPSC_INTERNAL_H */
