/* SPDX-License-Identifier: MIT */
/*
 * bench_group.c - the group workload of serex_bench: group_fanout,
 * rounds of tasks gathered by one group's notify (--variant 1: the same
 * rounds with no group, impl=serex-nogroup).
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <inttypes.h> /* PRIu64 */
#include <stdio.h>

/* --- group_fanout: a group's cost per task --- */

#define FANOUT_ROUNDS 1000
#define FANOUT_TASKS 1000

struct fanout_run {
    atomic_uint_fast64_t count; /* tasks run */
    atomic_long left;           /* no group: the round's tasks not yet run */
    struct done done;           /* a round's notify */
};

static void fanout_task(void *arg)
{
    struct fanout_run *r = arg;

    /* relaxed: a count; the group's emptying orders it before the notify */
    atomic_fetch_add_explicit(&r->count, 1, memory_order_relaxed);
}

/* The same round without a group: the round's last task signals. */
static void fanout_task_counted(void *arg)
{
    struct fanout_run *r = arg;

    atomic_fetch_add_explicit(&r->count, 1, memory_order_relaxed);
    /* acq_rel: the last one's signal follows every task of the round */
    if (atomic_fetch_sub_explicit(&r->left, 1, memory_order_acq_rel) == 1)
        done_signal(&r->done);
}

/* One round with no group: what the rounds cost without one. */
static bool fanout_round_plain(serex_executor *pool, struct fanout_run *r)
{
    atomic_store_explicit(&r->left, FANOUT_TASKS, memory_order_relaxed);
    for (int i = 0; i < FANOUT_TASKS; i++)
        if (serex_execute(pool, fanout_task_counted, r) != SEREX_OK)
            return false;
    done_wait(&r->done);
    return true;
}

static void fanout_round_done(void *arg)
{
    done_signal(&((struct fanout_run *)arg)->done);
}

/*
 * FANOUT_ROUNDS rounds: the main thread puts FANOUT_TASKS tasks of one
 * group on the pool, then one serex_group_notify, and waits for that
 * notify before the next round (the gather of a fan-out). Reports tasks
 * per second over the rounds; compare with pool_throughput P=1 of the same
 * run (the same tasks, no group): the goal is at least 0.8 of it. Each
 * round ends in a wake-up of the main thread, which no group can save:
 * --variant 1 runs the same rounds with no group (the round's last task
 * signals), printed as impl=serex-nogroup, so the group's own cost is the
 * ratio between the two.
 */
int bench_group_fanout(const struct bench_cfg *cfg)
{
    serex_executor *pool = pool_start(cfg->threads);
    serex_group *g = NULL;
    struct fanout_run r;
    long rounds = FANOUT_ROUNDS;
    int64_t t0, elapsed;
    int ok = pool != NULL && done_init(&r.done) == 0 &&
             serex_group_create(&g) == SEREX_OK;

    atomic_init(&r.count, 0);
    atomic_init(&r.left, 0);
    t0 = now_ns();
    for (long k = 0; ok && cfg->variant == 1 && k < rounds; k++)
        ok = fanout_round_plain(pool, &r);
    for (long k = 0; ok && cfg->variant != 1 && k < rounds; k++) {
        for (int i = 0; ok && i < FANOUT_TASKS; i++)
            ok = serex_group_execute(g, pool, fanout_task, &r) == SEREX_OK;
        ok = ok && serex_group_notify(g, pool, fanout_round_done, &r) ==
                       SEREX_OK;
        if (ok)
            done_wait(&r.done);
    }
    elapsed = now_ns() - t0;
    if (!ok) {
        report_error("serex_group_execute", SEREX_ENOMEM);
    } else {
        uint64_t n = (uint64_t)rounds * FANOUT_TASKS;

        printf("RESULT bench=group_fanout impl=%s threads=%d rounds=%ld "
               "tasks=%" PRIu64 " tasks_per_sec=%.0f violations=%" PRIu64
               "\n",
               cfg->variant == 1 ? "serex-nogroup" : IMPL, cfg->threads,
               rounds, n, (double)n * 1e9 / elapsed,
               (uint64_t)atomic_load(&r.count) != n ? UINT64_C(1) : 0);
        fflush(stdout);
    }
    if (g != NULL) {
        serex_group_wait(g, SEREX_FOREVER);
        serex_group_destroy(g);
    }
    if (pool != NULL && pool_stop(pool) != 0)
        ok = 0;
    sem_destroy(&r.done.sem);
    return ok ? 0 : -1;
}
