/* SPDX-License-Identifier: MIT */
/*
 * serex/pool.h - the thread pool: fixed or elastic, bounded or unbounded.
 */
#ifndef SEREX_POOL_H
#define SEREX_POOL_H

#include "executor.h" /* serex_executor, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Pool configuration; zero-initialise it (or pass NULL) for the defaults.
 * New fields are only ever added at the end.
 */
typedef struct serex_pool_config {
    unsigned threads;      /* core threads; 0: online CPUs (at most max) */
    unsigned max_threads;  /* 0: = threads; > threads: grows when all busy */
    int64_t keep_alive_ns; /* idle time before an extra thread exits; 0: 60 s */
    size_t queue_capacity; /* tasks waiting to start; 0: unbounded */
    const char *name;      /* thread names "<name>-<n>", and stats.name (cut
                              to 15 bytes); NULL: "serex", stats "pool" */
} serex_pool_config;

/*
 * serex_pool_create - start a pool of worker threads.
 *
 * Core threads start at once and live until the pool is shut down. When
 * max_threads > threads, a submission that finds every worker busy starts an
 * extra thread (up to max_threads); extra threads exit after keep_alive_ns
 * idle. With queue_capacity > 0, execute says SEREX_EFULL while that many
 * tasks wait to start. When the queue empties, one idle worker polls it
 * for up to 50 us (pausing, then yielding) and the others park at once.
 * fork(): in a child process, a pool made before the fork refuses tasks
 * (SEREX_EREJECTED; its threads are not in the child), reports termination
 * at once, and serex_destroy only frees its memory. New pools work.
 * @cfg and cfg->name are copied. *@out is set on success, NULL on failure.
 * Returns:   SEREX_OK; SEREX_EINVAL if out is NULL, max_threads is non-zero
 *            and below threads, or keep_alive_ns is negative; SEREX_ENOMEM
 *            (also when a core thread cannot be started). No thread is
 *            left behind on failure.
 * Ownership: the caller owns the pool; free it with serex_destroy.
 * Threads:   any thread. execute never blocks and may be called from any
 *            number of threads at once; two pools share no state.
 */
SEREX_API int serex_pool_create(const serex_pool_config *cfg,
                                serex_executor **out);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_POOL_H */
