/* SPDX-License-Identifier: MIT */
/*
 * gate.c - tasks parked until the gate opens.
 *
 * --- States and the race with open ---
 * Under `mu`: `open`, `releasing`, and a FIFO of parked tasks. execute
 * forwards at once only when the gate is open, not releasing and holds no
 * parked task; otherwise it appends. open sets `releasing`, then takes the
 * whole list, forwards it outside the lock (a target's execute may call
 * back into the gate), and looks again: tasks that arrived meanwhile were
 * appended behind the ones it released, so it releases them next, in
 * order, until it finds the list empty; only then does the gate count as
 * open. So an execute racing with open is either in a list that open
 * takes (and forwarded after every earlier task) or sees the gate open
 * with nothing parked: it is never lost and never overtakes. A close
 * during a release stops it after the batch in hand: what arrives after
 * stays parked. Only one open releases at a time (a second open while
 * releasing only asks for the gate to stay open).
 * A task whose target refuses it at release is kept aside, in order, and
 * handed back by destroy: it no longer holds back the tasks behind it.
 */
#include "alloc_internal.h"
#include "common_internal.h"
#include "executor_internal.h"
#include "nodecache_internal.h"
#include "registry_internal.h"
#include "thread_internal.h"

struct parked {
    struct parked *next;
    serex_executor *target;
    serex_fn fn;
    void *arg;
};

_Static_assert(sizeof(struct parked) <= 32, "a parked task fits class 32");

struct list {
    struct parked *head, *tail;
};

struct serex_gate {
    serex__mutex mu;
    bool open;          /* under mu: tasks are forwarded at once */
    bool releasing;     /* under mu: an open is forwarding the list */
    bool want_open;     /* under mu: the state when the release ends */
    struct list parked; /* under mu: waiting for open */
    struct list kept;   /* under mu: refused by their target at release */
    struct serex__reg reg; /* serex_dump's list */
};

static void list_append(struct list *l, struct parked *p)
{
    p->next = NULL;
    if (l->tail != NULL)
        l->tail->next = p;
    else
        l->head = p;
    l->tail = p;
}

static struct parked *parked_take(struct list *l)
{
    struct parked *p = l->head;

    l->head = l->tail = NULL;
    return p;
}

/* A list's first SEREX__DUMP_LIST_MAX continuations, and its length. */
static void describe_list(struct serex__dump *d, const char *key,
                          const struct list *l)
{
    size_t n = 0;

    serex__dump_array_begin(d, key);
    for (const struct parked *p = l->head; p != NULL; p = p->next, n++) {
        if (n >= SEREX__DUMP_LIST_MAX)
            continue;
        serex__dump_object_begin(d, NULL);
        serex__dump_fn(d, "fn", p->fn);
        serex__dump_ptr(d, "target", p->target);
        serex__dump_object_end(d);
    }
    serex__dump_array_end(d);
    serex__dump_u64(d, "parked_count", n);
}

/* serex_dump: open or shut, and what waits (under mu, briefly: mu is
 * never held across a task). */
static void gate_describe(struct serex__reg *r, struct serex__dump *d)
{
    serex_gate *g = (serex_gate *)(uintptr_t)r->obj;

    serex__mutex_lock(&g->mu);
    serex__dump_bool(d, "open", g->open);
    describe_list(d, "parked", &g->parked);
    serex__mutex_unlock(&g->mu);
}

static const struct serex__reg_class gate_reg = {"gate", gate_describe};

int serex_gate_create(bool open, serex_gate **out)
{
    serex_gate *g;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    g = serex__calloc(1, sizeof *g);
    if (g == NULL)
        return SEREX_ENOMEM;
    if (serex__mutex_init(&g->mu) != SEREX_OK) {
        serex__free(g);
        return SEREX_ENOMEM;
    }
    g->open = open;
    g->want_open = open;
    serex__reg_add(&g->reg, &gate_reg, g, NULL);
    *out = g;
    return SEREX_OK;
}

int serex_gate_execute(serex_gate *g, serex_executor *target, serex_fn fn,
                       void *arg)
{
    struct parked *p;
    bool now;

    if (g == NULL || target == NULL || target->ops == NULL || fn == NULL)
        return SEREX_EINVAL;
    serex__mutex_lock(&g->mu);
    now = g->open && !g->releasing && g->parked.head == NULL;
    if (!now) {
        /* Only parking allocates; a failure leaves nothing behind. */
        p = serex__cache_alloc(SEREX__CLASS_32);
        if (p == NULL) {
            serex__mutex_unlock(&g->mu);
            return SEREX_ENOMEM;
        }
        *p = (struct parked){NULL, target, fn, arg};
        list_append(&g->parked, p);
    }
    serex__mutex_unlock(&g->mu);
    return now ? serex_execute(target, fn, arg) : SEREX_OK;
}

/* Forwards a taken list in order; refused tasks go to the kept list. */
static void gate_forward(serex_gate *g, struct parked *p)
{
    while (p != NULL) {
        struct parked *next = p->next;

        if (serex_execute(p->target, p->fn, p->arg) == SEREX_OK) {
            serex__cache_free(SEREX__CLASS_32, p);
        } else {
            serex__mutex_lock(&g->mu);
            list_append(&g->kept, p);
            serex__mutex_unlock(&g->mu);
        }
        p = next;
    }
}

void serex_gate_open(serex_gate *g)
{
    struct parked *p;

    if (g == NULL)
        return;
    serex__mutex_lock(&g->mu);
    g->want_open = true;
    if (g->open || g->releasing) { /* open already, or being opened */
        serex__mutex_unlock(&g->mu);
        return;
    }
    g->releasing = true;
    /* a close meanwhile stops the release: later tasks stay parked */
    while (g->want_open && (p = parked_take(&g->parked)) != NULL) {
        serex__mutex_unlock(&g->mu);
        gate_forward(g, p);
        serex__mutex_lock(&g->mu);
    }
    g->releasing = false;
    g->open = g->want_open;
    serex__mutex_unlock(&g->mu);
}

void serex_gate_close(serex_gate *g)
{
    if (g == NULL)
        return;
    serex__mutex_lock(&g->mu);
    g->want_open = false;
    if (!g->releasing)
        g->open = false;
    serex__mutex_unlock(&g->mu);
}

/* Hands back a list in order; returns how many. */
static size_t gate_hand_back(struct parked *p, serex_pending_fn on_pending,
                             void *ctx)
{
    size_t n = 0;

    while (p != NULL) {
        struct parked *next = p->next;
        serex_fn fn = p->fn;
        void *arg = p->arg;

        serex__cache_free(SEREX__CLASS_32, p);
        serex__hand_back(fn, arg, on_pending, ctx);
        n++;
        p = next;
    }
    return n;
}

size_t serex_gate_destroy(serex_gate *g, serex_pending_fn on_pending,
                          void *ctx)
{
    size_t n;

    if (g == NULL)
        return 0;
    serex__reg_remove(&g->reg); /* off the list before anything goes */
    /* Kept ones first: they were released (and refused) before any task
     * still parked arrived. */
    n = gate_hand_back(parked_take(&g->kept), on_pending, ctx);
    n += gate_hand_back(parked_take(&g->parked), on_pending, ctx);
    serex__mutex_destroy(&g->mu);
    serex__free(g);
    return n;
}
