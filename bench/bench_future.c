/* SPDX-License-Identifier: MIT */
/*
 * bench_future.c - the future workload of serex_bench: future_chain,
 * chains of serex_future_then continuations.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>

/* --- future_chain: continuations, link by link --- */

#define CHAIN_LINKS 1000
#define CHAIN_ROUNDS 200

static void *chain_inc(void *value)
{
    return (void *)((uintptr_t)value + 1);
}

static void *chain_zero(void *arg)
{
    (void)arg;
    return (void *)(uintptr_t)0;
}

/*
 * CHAIN_ROUNDS chains of CHAIN_LINKS futures on the pool: a submit, then
 * each link made with serex_future_then on the one before (every link
 * but the first adds one), all made before the first has run, so most
 * links are parked continuations posted as their source ends. The main
 * thread waits only on each chain's last future. Reports the time from
 * the first submit to the last future's end per link, and violations
 * (a chain whose end is not CHAIN_LINKS - 1).
 */
int bench_future_chain(const struct bench_cfg *cfg)
{
    serex_executor *pool = pool_start(cfg->threads);
    serex_future **link = malloc(CHAIN_LINKS * sizeof *link);
    long rounds = CHAIN_ROUNDS, bad = 0;
    int64_t t0, elapsed = 0;
    int ok = pool != NULL && link != NULL;

    for (long r = 0; ok && r < rounds; r++) {
        t0 = now_ns();
        ok = serex_submit(pool, chain_zero, NULL, &link[0]) == SEREX_OK;
        for (int i = 1; ok && i < CHAIN_LINKS; i++)
            ok = serex_future_then(link[i - 1], pool, chain_inc,
                                   &link[i]) == SEREX_OK;
        if (!ok) {
            report_error("serex_future_then", SEREX_ENOMEM);
            break;
        }
        if (serex_future_wait(link[CHAIN_LINKS - 1], SEREX_FOREVER) !=
            SEREX_OK)
            bad++;
        elapsed += now_ns() - t0;
        bad += (uintptr_t)serex_future_value(link[CHAIN_LINKS - 1]) !=
               CHAIN_LINKS - 1;
        for (int i = 0; i < CHAIN_LINKS; i++)
            serex_future_release(link[i]);
    }
    if (ok) {
        printf("RESULT bench=future_chain impl=%s threads=%d links=%d "
               "rounds=%ld ns_per_link=%.1f violations=%ld\n",
               IMPL, cfg->threads, CHAIN_LINKS, rounds,
               (double)elapsed / (double)(rounds * CHAIN_LINKS), bad);
        fflush(stdout);
    }
    if (pool != NULL && pool_stop(pool) != 0)
        ok = 0;
    free(link);
    return ok ? 0 : -1;
}
