/* SPDX-License-Identifier: MIT */
/*
 * bench_serial.c - the serial workloads of serex_bench: serial_throughput
 * (one producer, N ordered tasks on one serial; its ordered run is shared
 * with striped_throughput, in bench_common.c) and serial_messaging (tokens
 * passed round a ring of serials).
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <inttypes.h> /* PRIu64 */
#include <stdio.h>
#include <stdlib.h>

/* --- serial_throughput --- */

/* serial_throughput's task i, as asio's: it is the N-th to run iff i is
 * the last index (a bug that reorders shows in violations instead). */
static void serial_task(void *arg)
{
    struct ordered_run *r = ordered_current;
    uint64_t i = (uint64_t)(uintptr_t)arg;

    if (r->counters[0] != i)
        ordered_violation(r);
    r->counters[0]++;
    if (i == r->n - 1)
        done_signal(&r->done);
}

/*
 * The timed region, as asio's: from just before the first submission to
 * the end time recorded by the last task. The main thread is the one
 * producer. Returns the elapsed ns, or -1 if a submission failed (the
 * tasks already sent still run: the caller's destroy waits for them).
 */
static int64_t serial_measure(serex_executor *serial, struct ordered_run *r)
{
    int64_t t0 = now_ns();

    for (uint64_t i = 0; i < r->n; i++) {
        int rc = serex_execute(serial, serial_task, index_arg(i));

        if (rc != SEREX_OK) {
            report_error("serex_execute", rc);
            return -1;
        }
    }
    done_wait(&r->done);
    return r->done.t_end - t0;
}

int bench_serial_throughput(const struct bench_cfg *cfg)
{
    struct ordered_run r;

    if (ordered_init(&r, cfg->n, 1) != 0)
        return -1;
    serex_executor *pool = pool_start(cfg->threads);
    serex_executor *serial = pool ? serial_start(pool) : NULL;
    int64_t elapsed = serial ? serial_measure(serial, &r) : -1;
    /* The serial's destroy waits for its tasks: the counter is then final
     * and visible here. */
    int rc = serial ? serex_destroy(serial) : SEREX_OK;
    if (rc != SEREX_OK)
        report_error("serex_destroy", rc);
    bool ok = pool && pool_stop(pool) == 0 && elapsed >= 0 && rc == SEREX_OK;
    if (ok) {
        printf("RESULT bench=serial_throughput impl=%s threads=%d "
               "tasks=%" PRIu64 " tasks_per_sec=%.0f violations=%ld\n",
               IMPL, cfg->threads, r.n, (double)r.n * 1e9 / elapsed,
               ordered_violations(&r));
        fflush(stdout);
    }
    ordered_fini(&r);
    return ok ? 0 : -1;
}

/* --- serial_messaging --- */

#define RING_SERIALS 1000 /* S serials in a ring */
#define RING_TOKENS 1000  /* R tokens; the hops are cfg->n */

/* A serial's state: a plain busy flag and counter, on its own line.
 * `busy` is volatile only so the compiler keeps the set and clear the
 * check relies on (as the peers do). */
struct ring_serial {
    _Alignas(64) volatile int busy;
    uint64_t count;
};

struct ring_run {
    serex_executor *serials[RING_SERIALS];
    struct ring_serial state[RING_SERIALS];
    atomic_long violations;
    atomic_long tokens_left; /* a token out of hops takes 1 */
    struct done done;
};

struct ring_token {
    struct ring_run *run;
    uint32_t at;  /* the serial it was sent to */
    int32_t left; /* hops still to go after this arrival */
    int status;   /* a failed forward, reported after the run */
};

static void ring_token_task(void *arg)
{
    struct ring_token *t = arg;
    struct ring_run *r = t->run;
    struct ring_serial *s = &r->state[t->at];

    if (s->busy)
        atomic_fetch_add_explicit(&r->violations, 1, memory_order_relaxed);
    s->busy = 1;
    s->count++;
    s->busy = 0;
    if (t->left > 0) {
        t->at = (t->at + 1) % RING_SERIALS;
        t->left--;
        t->status = serex_execute(r->serials[t->at], ring_token_task, t);
        if (t->status == SEREX_OK)
            return;
    }
    /* acq_rel: the last token out sees every other token's writes */
    if (atomic_fetch_sub_explicit(&r->tokens_left, 1, memory_order_acq_rel) ==
        1)
        done_signal(&r->done);
}

static int ring_make(struct ring_run *r, serex_executor *pool)
{
    for (int i = 0; i < RING_SERIALS; i++) {
        int rc = serex_serial_create(pool, NULL, &r->serials[i]);

        if (rc == SEREX_OK)
            bench_watch(r->serials[i]);
        if (rc != SEREX_OK) {
            report_error("serex_serial_create", rc);
            while (i-- > 0)
                serex_destroy(r->serials[i]);
            return -1;
        }
    }
    return 0;
}

static int ring_destroy(struct ring_run *r)
{
    int failed = 0;

    for (int i = 0; i < RING_SERIALS; i++) {
        int rc = serex_destroy(r->serials[i]);

        if (rc != SEREX_OK) {
            report_error("serex_destroy", rc);
            failed = -1;
        }
    }
    return failed;
}

/* Timed: the R first submissions to the last arrival. -1 on failure. */
static int64_t ring_measure(struct ring_run *r, struct ring_token *tok,
                            uint64_t n)
{
    int64_t per_token = (int64_t)(n / RING_TOKENS), t0;

    atomic_init(&r->tokens_left, RING_TOKENS);
    for (uint32_t j = 0; j < RING_TOKENS; j++)
        tok[j] = (struct ring_token){r, j, (int32_t)(per_token - 1),
                                     SEREX_OK};
    t0 = now_ns();
    for (uint32_t j = 0; j < RING_TOKENS; j++) {
        int rc = serex_execute(r->serials[j], ring_token_task, &tok[j]);

        if (rc != SEREX_OK) { /* the tokens sent still run: wait for them */
            report_error("serex_execute", rc);
            atomic_fetch_sub(&r->tokens_left, (long)(RING_TOKENS - j));
            if (j != 0)
                done_wait(&r->done);
            return -1;
        }
    }
    done_wait(&r->done);
    return r->done.t_end - t0;
}

int bench_serial_messaging(const struct bench_cfg *cfg)
{
    struct ring_run *r = calloc(1, sizeof *r);
    struct ring_token *tok = calloc(RING_TOKENS, sizeof *tok);
    uint64_t n = cfg->n, sum = 0;
    long viol;
    int64_t elapsed = -1;
    serex_executor *pool = NULL;
    int ok = 0;

    if (r == NULL || tok == NULL || done_init(&r->done) != 0)
        goto out;
    atomic_init(&r->violations, 0);
    pool = pool_start(cfg->threads);
    if (pool == NULL || ring_make(r, pool) != 0)
        goto out;
    elapsed = ring_measure(r, tok, n);
    ok = ring_destroy(r) == 0 && elapsed > 0;
    for (uint32_t j = 0; j < RING_TOKENS; j++)
        if (tok[j].status != SEREX_OK) {
            report_error("serex_execute (forward)", tok[j].status);
            ok = 0;
        }
    for (int i = 0; i < RING_SERIALS; i++)
        sum += r->state[i].count;
    viol = atomic_load(&r->violations) + (sum != n);
    if (ok) {
        printf("RESULT bench=serial_messaging impl=%s threads=%d hops=%" PRIu64
               " hops_per_sec=%.0f violations=%ld\n",
               IMPL, cfg->threads, n, (double)n * 1e9 / (double)elapsed, viol);
        fflush(stdout);
    }
out:
    if (pool != NULL && pool_stop(pool) != 0)
        ok = 0;
    if (r != NULL)
        sem_destroy(&r->done.sem);
    free(tok);
    free(r);
    return ok ? 0 : -1;
}
