/* SPDX-License-Identifier: MIT */
/*
 * bench_channel.c - the channel workload of serex_bench:
 * channel_pipeline, sender and receiver serials joined by bounded channels
 * (serex's own; no peer runs it).
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <inttypes.h> /* PRIu64 */
#include <stdio.h>
#include <stdlib.h>

/* --- channel_pipeline --- */

/*
 * PIPE_PAIRS sender serials each send their share of N items through their
 * own channel of capacity PIPE_CAPACITY to their own receiver serial, all
 * over one pool. Nothing blocks a thread: a sender's send continuation
 * sends its next item, a receiver's receive continuation checks the item
 * and re-arms the receive, each on its own serial. Not in WORKLOADS.md:
 * no peer runs it.
 */
#define PIPE_PAIRS 1000
#define PIPE_CAPACITY 64

struct pipe_run;

/* One sender/receiver pair. The sender's fields are touched only by tasks
 * of the sender serial, the receiver's only by the receiver serial's: the
 * serial orders them, so they are plain. */
struct pipe_pair {
    struct pipe_run *run;
    serex_channel *ch;
    serex_executor *sender, *receiver; /* serials over the pool */
    uint64_t share;                    /* items on this channel */
    uint64_t sent;                     /* sender: items handed to send */
    uint64_t next;                     /* receiver: the seq expected next */
    unsigned nulls;                    /* receiver: NULLs seen (goal 1) */
};

struct pipe_run {
    struct pipe_pair *pairs;
    uint64_t n;
    atomic_long violations;   /* order breaks seen by receivers */
    atomic_long receiving;    /* receivers still short of their share */
    atomic_long open;         /* receivers that have not yet seen NULL */
    atomic_int error;         /* first failed send or recv, or 0 */
    struct done done;         /* the last item received */
    struct done drained;      /* the last receiver saw NULL */
};

/* Item seq travels as seq + 1: never NULL, which means closed. */
static void *pipe_item(uint64_t seq)
{
    return (void *)(uintptr_t)(seq + 1);
}

/* A continuation's send or recv failed: the run cannot finish, so wake the
 * measuring thread from both waits. Only the first failure posts. */
static void pipe_fail(struct pipe_run *r, const char *call, int status)
{
    int none = 0;

    if (atomic_compare_exchange_strong_explicit(&r->error, &none, status,
                                                memory_order_relaxed,
                                                memory_order_relaxed)) {
        report_error(call, status);
        sem_post(&r->done.sem);
        sem_post(&r->drained.sem);
    }
}

/* On the sender serial: send the next item, with this as its continuation.
 * sent moves first, in case the continuation runs here (a refused post). */
static void pipe_send_next(void *arg)
{
    struct pipe_pair *p = arg;

    if (p->sent == p->share)
        return;
    uint64_t seq = p->sent++;
    int rc = serex_channel_send(p->ch, pipe_item(seq), p->sender,
                                pipe_send_next, p);
    if (rc != SEREX_OK)
        pipe_fail(p->run, "serex_channel_send", rc);
}

static void pipe_on_item(void *item, void *arg);

static void pipe_recv(struct pipe_pair *p)
{
    int rc = serex_channel_recv(p->ch, p->receiver, pipe_on_item, p);

    if (rc != SEREX_OK)
        pipe_fail(p->run, "serex_channel_recv", rc);
}

/* Relaxed, as count_task: only the last matters, and done_signal's
 * sem_post publishes the end time. */
static void pipe_countdown(atomic_long *left, struct done *d)
{
    if (atomic_fetch_sub_explicit(left, 1, memory_order_relaxed) == 1)
        done_signal(d);
}

/* On the receiver serial: check the item's place, then receive again,
 * until the closed channel says NULL. */
static void pipe_on_item(void *item, void *arg)
{
    struct pipe_pair *p = arg;
    struct pipe_run *r = p->run;

    if (item == NULL) {
        p->nulls++;
        pipe_countdown(&r->open, &r->drained);
        return;
    }
    /* Relaxed: only counted; serex_destroy orders it before the read. */
    if ((uint64_t)(uintptr_t)item - 1 != p->next)
        atomic_fetch_add_explicit(&r->violations, 1, memory_order_relaxed);
    if (++p->next == p->share)
        pipe_countdown(&r->receiving, &r->done);
    pipe_recv(p);
}

/* Untimed: the channels and the 2 x PIPE_PAIRS serials. 0 on success. */
static int pipe_setup(struct pipe_run *r, serex_executor *pool)
{
    for (size_t i = 0; i < PIPE_PAIRS; i++) {
        struct pipe_pair *p = &r->pairs[i];
        int rc = serex_channel_create(PIPE_CAPACITY, &p->ch);

        p->run = r;
        p->share = r->n / PIPE_PAIRS + (i < r->n % PIPE_PAIRS);
        if (rc != SEREX_OK) {
            report_error("serex_channel_create", rc);
            return -1;
        }
        if ((p->sender = serial_start(pool)) == NULL
            || (p->receiver = serial_start(pool)) == NULL)
            return -1;
    }
    return 0;
}

/*
 * The timed region: from arming the first receive to the end time recorded
 * by the receiver of the last item. Then, untimed, closes every channel and
 * waits until every receiver has seen NULL. -1 if a call failed.
 */
static int64_t pipe_measure(struct pipe_run *r)
{
    int64_t t0 = now_ns();

    for (size_t i = 0; i < PIPE_PAIRS; i++) {
        struct pipe_pair *p = &r->pairs[i];
        int rc = serex_execute(p->sender, pipe_send_next, p);

        if (rc != SEREX_OK) {
            pipe_fail(r, "serex_execute", rc);
            break;
        }
        pipe_recv(p);
    }
    done_wait(&r->done);
    int64_t t_end = r->done.t_end;
    for (size_t i = 0; i < PIPE_PAIRS; i++)
        serex_channel_close(r->pairs[i].ch);
    done_wait(&r->drained);
    if (atomic_load_explicit(&r->error, memory_order_relaxed) != 0)
        return -1;
    return t_end - t0;
}

/*
 * Destroys the serials (each waits for its tasks: their writes are then
 * ours), then the channels, then the pool. Returns 0, or -1 if a destroy
 * failed.
 */
static int pipe_teardown(struct pipe_run *r, serex_executor *pool)
{
    int failed = 0;

    for (size_t i = 0; i < PIPE_PAIRS; i++) {
        serex_executor *s[2] = {r->pairs[i].sender, r->pairs[i].receiver};

        for (int j = 0; j < 2; j++) {
            int rc = s[j] ? serex_destroy(s[j]) : SEREX_OK;

            if (rc != SEREX_OK) {
                report_error("serex_destroy", rc);
                failed = 1;
            }
        }
    }
    for (size_t i = 0; i < PIPE_PAIRS; i++)
        serex_channel_destroy(r->pairs[i].ch);
    return pool_stop(pool) != 0 || failed ? -1 : 0;
}

/* Order breaks, plus one per receiver that did not get exactly its share,
 * or did not see exactly one NULL. After the teardown. */
static long pipe_violations(struct pipe_run *r)
{
    long viol = atomic_load_explicit(&r->violations, memory_order_relaxed);

    for (size_t i = 0; i < PIPE_PAIRS; i++)
        viol += (r->pairs[i].next != r->pairs[i].share)
                + (r->pairs[i].nulls != 1);
    return viol;
}

int bench_channel_pipeline(const struct bench_cfg *cfg)
{
    struct pipe_run r = {.n = cfg->n};
    int64_t elapsed = -1;

    atomic_init(&r.violations, 0);
    /* Receivers with a share: all of them, unless N < PIPE_PAIRS. */
    atomic_init(&r.receiving, r.n < PIPE_PAIRS ? (long)r.n : PIPE_PAIRS);
    atomic_init(&r.open, PIPE_PAIRS);
    atomic_init(&r.error, 0);
    if (done_init(&r.done) != 0)
        return -1;
    if (done_init(&r.drained) != 0) {
        sem_destroy(&r.done.sem);
        return -1;
    }
    serex_executor *pool = pool_start(cfg->threads);
    r.pairs = pool ? calloc(PIPE_PAIRS, sizeof *r.pairs) : NULL;
    if (pool != NULL && r.pairs == NULL)
        perror("serex_bench: calloc");
    if (r.pairs != NULL && pipe_setup(&r, pool) == 0)
        elapsed = pipe_measure(&r);
    int rc = r.pairs ? pipe_teardown(&r, pool) : pool ? pool_stop(pool) : -1;
    if (elapsed >= 0 && rc == 0) {
        printf("RESULT bench=channel_pipeline impl=%s threads=%d "
               "tasks=%" PRIu64 " items_per_sec=%.0f violations=%ld "
               "peak_rss_kb=%ld\n",
               IMPL, cfg->threads, r.n, (double)r.n * 1e9 / elapsed,
               pipe_violations(&r), peak_rss_kb());
        fflush(stdout);
    }
    free(r.pairs);
    sem_destroy(&r.done.sem);
    sem_destroy(&r.drained.sem);
    return elapsed >= 0 && rc == 0 ? 0 : -1;
}
