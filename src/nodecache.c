/* SPDX-License-Identifier: MIT */
/*
 * nodecache.c - per-thread block lists with a bounded global depot (see
 * nodecache_internal.h for the design).
 */
#include "nodecache_internal.h"

#include <stdatomic.h>

#include "common_internal.h"
#include "spinlock_internal.h"
#include "thread_internal.h"

#define CHAIN 64                /* blocks moved to or from the depot at once */
#define LOCAL_MAX (2 * CHAIN)   /* a thread's list never holds more */
#define DEPOT_MAX_CHAINS 256    /* per class: 16384 blocks */

static const size_t class_size[SEREX__NCLASSES] = {32, 64, 96, 128};

struct block {
    struct block *next;       /* in a thread list or a chain */
    struct block *next_chain; /* first block of a chain: the depot's list */
};

struct tcache {
    struct block *head[SEREX__NCLASSES];
    unsigned count[SEREX__NCLASSES];
    int registered; /* the exit destructor is armed for this thread */
};

struct depot {
    serex__spinlock lock; /* held for a pointer swap only */
    struct block *chains;
    unsigned nchains;
};

static _Thread_local struct tcache tc;
static struct depot depots[SEREX__NCLASSES]; /* zero: unlocked, empty */
static serex__once key_once = SEREX__ONCE_INIT;
static serex__tls_key exit_key;
static int key_ok;

static void depot_lock(struct depot *d)
{
    serex__spin_lock(&d->lock);
}

static void depot_unlock(struct depot *d)
{
    serex__spin_unlock(&d->lock);
}

/* Gives a chain of CHAIN blocks to the depot, or frees it if it is full. */
static void depot_put(enum serex__cache_class cls, struct block *chain)
{
    struct depot *d = &depots[cls];

    depot_lock(d);
    if (d->nchains < DEPOT_MAX_CHAINS) {
        chain->next_chain = d->chains;
        d->chains = chain;
        d->nchains++;
        chain = NULL;
    }
    depot_unlock(d);
    while (chain != NULL) {
        struct block *next = chain->next;
        serex__free(chain);
        chain = next;
    }
}

static struct block *depot_take(enum serex__cache_class cls)
{
    struct depot *d = &depots[cls];
    struct block *chain;

    depot_lock(d);
    chain = d->chains;
    if (chain != NULL) {
        d->chains = chain->next_chain;
        d->nchains--;
    }
    depot_unlock(d);
    return chain;
}

/* Detaches the first CHAIN blocks of the thread's list as a chain. */
static struct block *local_detach_chain(enum serex__cache_class cls)
{
    struct block *first = tc.head[cls], *last = first;

    for (unsigned i = 1; i < CHAIN; i++)
        last = last->next;
    tc.head[cls] = last->next;
    last->next = NULL;
    tc.count[cls] -= CHAIN;
    return first;
}

static void cache_thread_exit(void *unused)
{
    (void)unused;
    for (int cls = 0; cls < SEREX__NCLASSES; cls++) {
        while (tc.count[cls] >= CHAIN)
            depot_put((enum serex__cache_class)cls, local_detach_chain(cls));
        while (tc.head[cls] != NULL) {
            struct block *b = tc.head[cls];
            tc.head[cls] = b->next;
            serex__free(b);
        }
        tc.count[cls] = 0;
    }
}

static void key_init(void)
{
    key_ok = serex__tls_key_create(&exit_key, cache_thread_exit) == SEREX_OK;
}

/* Arms the exit destructor, so a thread's blocks outlive it in the depot. */
static void cache_register_thread(void)
{
    serex__call_once(&key_once, key_init);
    if (key_ok)
        serex__tls_set(exit_key, &tc);
    tc.registered = 1;
}

static void *cache_refill(enum serex__cache_class cls)
{
    struct block *chain;
    size_t size = class_size[cls];

    if (serex__unlikely(!tc.registered))
        cache_register_thread();
    chain = depot_take(cls);
    if (chain == NULL)
        return serex__alloc_aligned(size % 64 == 0 ? 64 : 32, size);
    tc.head[cls] = chain->next;
    tc.count[cls] = CHAIN - 1;
    return chain;
}

void *serex__cache_alloc(enum serex__cache_class cls)
{
    struct block *b = tc.head[cls];

    if (serex__likely(b != NULL)) {
        tc.head[cls] = b->next;
        tc.count[cls]--;
        return b;
    }
    return cache_refill(cls);
}

void serex__cache_free(enum serex__cache_class cls, void *block)
{
    struct block *b = block;

    if (serex__unlikely(!tc.registered))
        cache_register_thread();
    b->next = tc.head[cls];
    tc.head[cls] = b;
    if (serex__unlikely(++tc.count[cls] > LOCAL_MAX))
        depot_put(cls, local_detach_chain(cls));
}

void serex__cache_trim(void)
{
    cache_thread_exit(NULL);
    for (int cls = 0; cls < SEREX__NCLASSES; cls++) {
        struct block *chain;
        while ((chain = depot_take((enum serex__cache_class)cls)) != NULL) {
            while (chain != NULL) {
                struct block *next = chain->next;
                serex__free(chain);
                chain = next;
            }
        }
    }
}

void serex__cache_fork_lock(void)
{
    for (int c = 0; c < SEREX__NCLASSES; c++)
        depot_lock(&depots[c]);
}

void serex__cache_fork_unlock(void)
{
    for (int c = SEREX__NCLASSES - 1; c >= 0; c--)
        depot_unlock(&depots[c]);
}
