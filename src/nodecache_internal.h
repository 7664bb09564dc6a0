/* SPDX-License-Identifier: MIT */
/*
 * nodecache_internal.h - fixed-size blocks (task nodes, futures) without a
 * malloc per task.
 *
 * As libdispatch's continuation cache: each thread keeps a small list of
 * free blocks per size class; a thread that frees more than it allocates (a
 * pool worker) passes chains of CHAIN blocks to a per-class depot, and a
 * thread that allocates more than it frees (a producer) takes chains from
 * it. So the steady state of "producer allocates, worker frees" costs one
 * depot lock per 64 tasks and no malloc. The depot and the thread lists are
 * bounded; beyond them blocks go back to free(), so memory returns to its
 * baseline after a burst. A thread's list is flushed when it exits.
 *
 * The depot is process-wide (as libdispatch's is): pools share spare memory
 * but no behaviour.
 */
#ifndef SEREX_NODECACHE_INTERNAL_H
#define SEREX_NODECACHE_INTERNAL_H

#include <stddef.h>

enum serex__cache_class {
    SEREX__CLASS_32,  /* 32 bytes: gate nodes, keyless wrappers */
    SEREX__CLASS_64,  /* 64 bytes, cache-line aligned: task nodes, futures,
                         future continuations, channel waiters */
    SEREX__CLASS_128, /* 128 bytes, cache-line aligned: striped lanes */
    SEREX__NCLASSES
};

/*
 * Under AddressSanitizer a block is poisoned for its whole class size from
 * serex__cache_free until serex__cache_alloc hands it out again, so a use
 * after free through the cache (a future waited on after its release) is
 * reported as use-after-poison, with the stack of the access. Without
 * this, the cache would hide such a bug from ASan: free() is never called.
 */
#if defined(__SANITIZE_ADDRESS__)
#  define SEREX__CACHE_POISONS 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define SEREX__CACHE_POISONS 1
#  endif
#endif

/* A block of the class (aligned to 64 when its size is a multiple of 64,
 * else to 32); NULL if out of memory. */
void *serex__cache_alloc(enum serex__cache_class cls);
/* A block from the calling thread's own list, or NULL when it is empty:
 * never the depot, never the system allocator, never a lock (safe under a
 * spinlock; serex__cache_alloc then refills). */
void *serex__cache_alloc_local(enum serex__cache_class cls);
/* Gives a block back; it may be handed to another thread's allocation. */
void serex__cache_free(enum serex__cache_class cls, void *block);
/* Frees the depot and the calling thread's list (tests: leak checks). */
void serex__cache_trim(void);

/* fork(): hold every depot across it (fork.c; see fork_internal.h). */
void serex__cache_fork_lock(void);
void serex__cache_fork_unlock(void);

#endif /* SEREX_NODECACHE_INTERNAL_H */
