/* SPDX-License-Identifier: MIT */
/*
 * nodecache.c - per-thread block lists with a bounded global depot (see
 * nodecache_internal.h for the design).
 *
 * Under AddressSanitizer every byte of a block the cache holds is poisoned,
 * so any access to it is reported. The cache's own links then cannot live
 * in the block: LeakSanitizer does not follow pointers stored in poisoned
 * memory, and would report every block past the head of a list as leaked.
 * So in that build each block carries its links after its class size,
 * where no user of the block reaches: the links are unpoisoned while the
 * block is in the cache and poisoned (with the rest of the allocation's
 * tail) while it is handed out, so an overflow is still caught. In every
 * other build the links overlay the first 16 bytes of the free block and
 * cost nothing. A block goes back to free() unpoisoned, as malloc made it.
 */
#include "nodecache_internal.h"

#include <stdbool.h>

#ifdef SEREX__CACHE_POISONS
#  include <sanitizer/asan_interface.h>
#endif

#include "alloc_internal.h"
#include "common_internal.h"
#include "spinlock_internal.h"
#include "thread_internal.h"

#define CHAIN 64                /* blocks moved to or from the depot at once */
#define LOCAL_MAX (2 * CHAIN)   /* a thread's list never holds more */
#define DEPOT_MAX_CHAINS 256    /* per class: 16384 blocks */

static const size_t class_size[SEREX__NCLASSES] = {32, 64, 128};

/* A free block's links; every class has room for them (32 bytes or more). */
struct links {
    void *next;       /* in a thread list or a chain */
    void *next_chain; /* first block of a chain: the depot's list */
};

struct tcache {
    void *head[SEREX__NCLASSES];
    unsigned count[SEREX__NCLASSES];
    int registered; /* the exit destructor is armed for this thread */
};

struct depot {
    serex__spinlock lock; /* held for a pointer swap only */
    void *chains;
    unsigned nchains;
};

/*
 * The calling thread's lists, TC. Normally a _Thread_local struct. Where
 * the compiler emulates thread-local storage (SEREX__TLS_EMULATED, see
 * thread_internal.h) that storage may be freed before our thread-exit
 * destructor runs, so the struct lives on the heap, the destructor gets
 * it as its argument and never reads a _Thread_local; until a thread
 * registers, its pointer aims at an empty stand-in that nobody writes.
 */
#ifdef SEREX__TLS_EMULATED
static struct tcache tc_empty; /* read only: registered is 0 */
static SEREX__THREAD_LOCAL struct tcache *tcp = &tc_empty;
#  define TC (*tcp)
#else
static SEREX__THREAD_LOCAL struct tcache tc;
#  define TC tc
#endif
static struct depot depots[SEREX__NCLASSES]; /* zero: unlocked, empty */
static serex__once key_once = SEREX__ONCE_INIT;
static serex__tls_key exit_key;
static int key_ok;

/* --- where the links are, and poisoning (AddressSanitizer only) --- */

#ifdef SEREX__CACHE_POISONS
#  define LINKS_AT(cls) class_size[cls]
#  define LINKS_ROOM sizeof(struct links)
#  define cache_poison(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#  define cache_unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#  define LINKS_AT(cls) ((void)(cls), (size_t)0)
#  define LINKS_ROOM ((size_t)0)
#  define cache_poison(p, n) ((void)(p), (void)(n))
#  define cache_unpoison(p, n) ((void)(p), (void)(n))
#endif

static struct links *links_of(enum serex__cache_class cls, void *b)
{
    return (struct links *)(void *)((char *)b + LINKS_AT(cls));
}

static size_t block_align(enum serex__cache_class cls)
{
    return class_size[cls] % 64 == 0 ? 64 : 32;
}

/* What a block takes from malloc: its class, plus its links under ASan,
 * rounded up to its alignment (aligned_alloc wants a multiple). */
static size_t block_room(enum serex__cache_class cls)
{
    size_t align = block_align(cls);

    return (class_size[cls] + LINKS_ROOM + align - 1) / align * align;
}

/* A block leaves the cache: all of its class size is the caller's again,
 * and nothing after it. */
static void *block_hand_out(enum serex__cache_class cls, void *b)
{
    size_t size = class_size[cls];

    cache_unpoison(b, size);
    cache_poison((char *)b + size, block_room(cls) - size);
    return b;
}

/* A block enters the cache: only its links may be touched, by the cache. */
static void block_take_in(enum serex__cache_class cls, void *b)
{
    cache_poison(b, class_size[cls]);
    cache_unpoison(links_of(cls, b), sizeof(struct links));
}

/* Gives every block of a chain (or list) linked by `next` back to free(). */
static void chain_free(enum serex__cache_class cls, void *chain)
{
    while (chain != NULL) {
        void *next = links_of(cls, chain)->next;

        cache_unpoison(chain, block_room(cls));
        serex__free(chain);
        chain = next;
    }
}

/* --- the depot --- */

static void depot_lock(struct depot *d)
{
    serex__spin_lock(&d->lock);
}

static void depot_unlock(struct depot *d)
{
    serex__spin_unlock(&d->lock);
}

/* Gives a chain of CHAIN blocks to the depot, or frees it if it is full. */
static void depot_put(enum serex__cache_class cls, void *chain)
{
    struct depot *d = &depots[cls];

    depot_lock(d);
    if (d->nchains < DEPOT_MAX_CHAINS) {
        links_of(cls, chain)->next_chain = d->chains;
        d->chains = chain;
        d->nchains++;
        chain = NULL;
    }
    depot_unlock(d);
    chain_free(cls, chain);
}

static void *depot_take(enum serex__cache_class cls)
{
    struct depot *d = &depots[cls];
    void *chain;

    depot_lock(d);
    chain = d->chains;
    if (chain != NULL) {
        d->chains = links_of(cls, chain)->next_chain;
        d->nchains--;
    }
    depot_unlock(d);
    return chain;
}

/* --- the thread lists --- */

/* Detaches the first CHAIN blocks of @t's list as a chain. */
static void *local_detach_chain(struct tcache *t, enum serex__cache_class cls)
{
    void *first = t->head[cls], *last = first;

    for (unsigned i = 1; i < CHAIN; i++)
        last = links_of(cls, last)->next;
    t->head[cls] = links_of(cls, last)->next;
    links_of(cls, last)->next = NULL;
    t->count[cls] -= CHAIN;
    return first;
}

/* Gives @t's blocks to the depot (whole chains) or back to free(). */
static void cache_flush(struct tcache *t)
{
    for (int c = 0; c < SEREX__NCLASSES; c++) {
        enum serex__cache_class cls = (enum serex__cache_class)c;

        while (t->count[cls] >= CHAIN)
            depot_put(cls, local_detach_chain(t, cls));
        chain_free(cls, t->head[cls]);
        t->head[cls] = NULL;
        t->count[cls] = 0;
    }
}

/* A registered thread ends: @arg is its lists (see TC). */
static void cache_thread_exit(void *arg)
{
    cache_flush(arg);
#ifdef SEREX__TLS_EMULATED
    serex__free(arg);
#endif
}

static void key_init(void)
{
    key_ok = serex__tls_key_create(&exit_key, cache_thread_exit) == SEREX_OK;
}

/*
 * Arms the exit destructor, so a thread's blocks outlive it in the depot.
 * False only with emulated TLS, when the thread's lists could not be
 * allocated: the thread then caches nothing (each block goes to and comes
 * from the allocator), and tries again on its next call.
 */
static bool cache_register_thread(void)
{
#ifdef SEREX__TLS_EMULATED
    struct tcache *t = serex__calloc(1, sizeof *t);

    if (t == NULL)
        return false;
    tcp = t;
#endif
    serex__call_once(&key_once, key_init);
    if (key_ok)
        serex__tls_set(exit_key, &TC);
    TC.registered = 1;
    return true;
}

static void *cache_refill(enum serex__cache_class cls)
{
    /* unregistered and no lists to be had: no depot chain either */
    bool lists = TC.registered || cache_register_thread();
    void *b = lists ? depot_take(cls) : NULL;

    if (b != NULL) {
        TC.head[cls] = links_of(cls, b)->next;
        TC.count[cls] = CHAIN - 1;
    } else {
        b = serex__alloc_aligned(block_align(cls), block_room(cls));
        if (b == NULL)
            return NULL;
    }
    return block_hand_out(cls, b);
}

void *serex__cache_alloc_local(enum serex__cache_class cls)
{
    void *b = TC.head[cls];

    if (b == NULL)
        return NULL;
    TC.head[cls] = links_of(cls, b)->next;
    TC.count[cls]--;
    return block_hand_out(cls, b);
}

void *serex__cache_alloc(enum serex__cache_class cls)
{
    void *b = TC.head[cls];

    if (serex__likely(b != NULL)) {
        void *next = links_of(cls, b)->next;

        /* The next block's line is fetched now, while the caller fills
         * this one: a list's blocks were often last written by another
         * thread (the one that ran and freed them), and the next alloc
         * reads its link first thing. */
        if (next != NULL)
            serex__prefetch_w(links_of(cls, next));
        TC.head[cls] = next;
        TC.count[cls]--;
        return block_hand_out(cls, b);
    }
    return cache_refill(cls);
}

void serex__cache_free(enum serex__cache_class cls, void *block)
{
    if (serex__unlikely(!TC.registered) && !cache_register_thread()) {
        serex__free(block); /* no lists for this thread (see above) */
        return;
    }
    block_take_in(cls, block);
    links_of(cls, block)->next = TC.head[cls];
    TC.head[cls] = block;
    if (serex__unlikely(++TC.count[cls] > LOCAL_MAX))
        depot_put(cls, local_detach_chain(&TC, cls));
}

void serex__cache_trim(void)
{
    cache_flush(&TC);
    for (int c = 0; c < SEREX__NCLASSES; c++) {
        enum serex__cache_class cls = (enum serex__cache_class)c;
        void *chain;

        while ((chain = depot_take(cls)) != NULL)
            chain_free(cls, chain);
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
