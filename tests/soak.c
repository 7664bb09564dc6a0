/* SPDX-License-Identifier: MIT */
/*
 * soak.c - a random mix of every operation, from several threads at once,
 * for a given time, checking every invariant it can see:
 *   serial      each producer's tasks run in its order (promise 3)
 *   striped     per key, each producer's tasks run in its order; lanes are
 *               all freed at the end (promises 3, 9)
 *   timers      never early; a one-shot runs exactly once unless cancel
 *               said true; periodic runs never overlap (promise 6)
 *   futures     wait says OK with the right value, or ECANCELED only if
 *               cancel said true
 *   channel     every item arrives once, each producer's in order
 *   gate        every parked task runs once after the gate opens
 * and at the end, for each kind, accepted = ran + cancelled (promise 1).
 *
 *   soak [--seconds N] [--threads T] [--seed S]      (default 10 s, 4, 42)
 *
 * The environment variable SEREX_SOAK_SECONDS sets the default time. CI
 * runs it for 3 s in every build, TSan's included (CTest test `soak`,
 * label stress). For hours: build Release or TSan and run e.g.
 * `build-test/tsan/tests/soak --seconds 14400 --threads 8`; it prints the
 * counts per kind at the end and exits 1 on any violation.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <serex/serex.h>

#include "thread_internal.h" /* threads TSan can see */

#define MAXP 16
#define NKEYS 64
#define NPERIODIC 32 /* per producer */

enum kind { K_SERIAL, K_STRIPED, K_TIMER, K_PERIODIC, K_FUTURE, K_CHANNEL,
            K_GATE, NKINDS };
static const char *kind_name[NKINDS] = {"serial", "striped", "timer",
                                        "periodic", "future", "channel",
                                        "gate"};

static struct {
    serex_executor *pool, *serial, *consumer;
    serex_striped *striped;
    serex_scheduler *sched;
    serex_channel *ch;
    serex_gate *gate;
    serex_event *drained;
    unsigned producers;
    int64_t end_ns;
    _Atomic uint64_t accepted[NKINDS], ran[NKINDS], cancelled[NKINDS];
    _Atomic uint64_t violations;
    /* plain: each read and written only by tasks a serial or a lane
     * orders one after another */
    uint64_t serial_last[MAXP];
    uint64_t striped_last[NKEYS][MAXP];
    uint64_t channel_last[MAXP];
} g;

struct rec {
    unsigned producer;
    unsigned key;
    uint64_t seq;
    int64_t due;
    _Atomic int in_run; /* periodic: runs never overlap */
};

static void violation(const char *what)
{
    if (atomic_fetch_add(&g.violations, 1) < 10)
        fprintf(stderr, "soak: violation: %s\n", what);
}

static void ran(enum kind k)
{
    atomic_fetch_add_explicit(&g.ran[k], 1, memory_order_relaxed);
}

static uint64_t rnd(uint64_t *x)
{
    *x = *x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
    return *x >> 33;
}

static struct rec *rec_new(unsigned producer, uint64_t seq)
{
    struct rec *r = calloc(1, sizeof *r);

    if (r == NULL) {
        fprintf(stderr, "soak: out of memory\n");
        exit(2);
    }
    r->producer = producer;
    r->seq = seq;
    return r;
}

/* --- the tasks --- */

static void serial_task(void *arg)
{
    struct rec *r = arg;

    if (r->seq <= g.serial_last[r->producer])
        violation("serial out of order");
    g.serial_last[r->producer] = r->seq;
    ran(K_SERIAL);
    free(r);
}

static void striped_task(void *arg)
{
    struct rec *r = arg;

    if (r->seq <= g.striped_last[r->key][r->producer])
        violation("striped key out of order");
    g.striped_last[r->key][r->producer] = r->seq;
    ran(K_STRIPED);
    free(r);
}

static void timer_task(void *arg)
{
    struct rec *r = arg;

    if (serex_scheduler_now(g.sched) < r->due)
        violation("timer early");
    ran(K_TIMER);
    free(r);
}

static void periodic_task(void *arg)
{
    struct rec *r = arg;

    if (atomic_fetch_add(&r->in_run, 1) != 0)
        violation("periodic runs overlap");
    if (serex_scheduler_now(g.sched) < r->due)
        violation("periodic run early");
    atomic_fetch_sub(&r->in_run, 1);
    ran(K_PERIODIC);
}

static void *future_call(void *arg)
{
    return (char *)arg + 1;
}

static void sent_task(void *arg)
{
    (void)arg;
}

static void on_item(void *item, void *arg);

static void consumer_recv(void)
{
    if (serex_channel_recv(g.ch, g.consumer, on_item, NULL) != SEREX_OK)
        violation("recv failed");
}

static void on_item(void *item, void *arg)
{
    struct rec *r = item;

    (void)arg;
    if (r == NULL) { /* closed and drained */
        serex_event_signal(g.drained);
        return;
    }
    if (r->seq <= g.channel_last[r->producer])
        violation("channel out of order");
    g.channel_last[r->producer] = r->seq;
    ran(K_CHANNEL);
    free(r);
    consumer_recv();
}

static void gate_task(void *arg)
{
    ran(K_GATE);
    free(arg);
}

/* --- producers --- */

struct producer {
    unsigned id;
    uint64_t x;
    uint64_t seq[NKINDS];
    uint64_t key_seq[NKEYS];
    struct rec *periodic[NPERIODIC];
    serex_timer *periodic_t[NPERIODIC];
    unsigned nperiodic;
};

static void accept(enum kind k, int rc, void *rec)
{
    if (rc == SEREX_OK) {
        atomic_fetch_add_explicit(&g.accepted[k], 1, memory_order_relaxed);
        return;
    }
    if (rc != SEREX_ENOMEM && rc != SEREX_EFULL)
        violation("an operation failed");
    free(rec);
}

static void do_timer(struct producer *p)
{
    struct rec *r = rec_new(p->id, 0);
    int64_t delay = (int64_t)(rnd(&p->x) % 2000000);
    serex_timer *t = NULL;
    bool handle = rnd(&p->x) % 2;
    int rc;

    r->due = serex_scheduler_now(g.sched) + delay;
    rc = serex_schedule(g.sched, rnd(&p->x) % 4 ? g.pool : NULL, delay,
                        timer_task, r, handle ? &t : NULL);
    accept(K_TIMER, rc, rc == SEREX_OK ? NULL : r);
    if (rc != SEREX_OK || t == NULL)
        return;
    if (rnd(&p->x) % 2 && serex_timer_cancel(t)) { /* it never runs */
        atomic_fetch_add(&g.cancelled[K_TIMER], 1);
        free(r);
    }
    serex_timer_release(t);
}

static void do_periodic(struct producer *p)
{
    unsigned i = p->nperiodic;
    struct rec *r;

    if (i > 0 && rnd(&p->x) % 2) { /* stop one; its record stays */
        i = (unsigned)(rnd(&p->x) % p->nperiodic);
        if (p->periodic_t[i] != NULL) {
            serex_timer_cancel(p->periodic_t[i]);
            serex_timer_release(p->periodic_t[i]);
            p->periodic_t[i] = NULL;
        }
        return;
    }
    if (i == NPERIODIC)
        return;
    r = p->periodic[i] = rec_new(p->id, 0);
    r->due = serex_scheduler_now(g.sched) + 100000;
    if (serex_schedule_fixed_rate(g.sched, g.pool, 100000, 300000,
                                  periodic_task, r, &p->periodic_t[i]) !=
        SEREX_OK)
        violation("fixed rate failed");
    p->nperiodic++;
}

static void do_future(struct producer *p)
{
    static char base[1];
    serex_future *f;
    bool cancelled = false;
    int rc = serex_submit(g.pool, future_call, base, &f);

    accept(K_FUTURE, rc, NULL);
    if (rc != SEREX_OK)
        return;
    if (rnd(&p->x) % 4 == 0)
        cancelled = serex_future_cancel(f);
    rc = serex_future_wait(f, SEREX_FOREVER);
    if (rc == SEREX_OK && serex_future_value(f) == base + 1 && !cancelled)
        ran(K_FUTURE);
    else if (rc == SEREX_ECANCELED && cancelled)
        atomic_fetch_add(&g.cancelled[K_FUTURE], 1);
    else
        violation("future");
    serex_future_release(f);
}

static void one_op(struct producer *p)
{
    enum kind k = (enum kind)(rnd(&p->x) % NKINDS);
    struct rec *r;
    int rc;

    switch (k) {
    case K_SERIAL:
        r = rec_new(p->id, ++p->seq[k]);
        rc = serex_execute(g.serial, serial_task, r);
        accept(k, rc, rc == SEREX_OK ? NULL : r);
        break;
    case K_STRIPED:
        r = rec_new(p->id, 0);
        r->key = (unsigned)(rnd(&p->x) % NKEYS);
        r->seq = ++p->key_seq[r->key];
        rc = serex_striped_execute(g.striped, r->key, striped_task, r);
        accept(k, rc, rc == SEREX_OK ? NULL : r);
        break;
    case K_TIMER: do_timer(p); break;
    case K_PERIODIC: do_periodic(p); break;
    case K_FUTURE: do_future(p); break;
    case K_CHANNEL:
        r = rec_new(p->id, ++p->seq[k]);
        rc = serex_channel_send(g.ch, r, g.pool, sent_task, NULL);
        accept(k, rc, rc == SEREX_OK ? NULL : r);
        break;
    case K_GATE:
        if (rnd(&p->x) % 8 == 0) {
            if (rnd(&p->x) % 2)
                serex_gate_open(g.gate);
            else
                serex_gate_close(g.gate);
            break;
        }
        r = rec_new(p->id, 0);
        rc = serex_gate_execute(g.gate, g.pool, gate_task, r);
        accept(k, rc, rc == SEREX_OK ? NULL : r);
        break;
    default: break;
    }
}

static int producer_main(void *arg)
{
    struct producer *p = arg;

    while (serex__now_ns() < g.end_ns)
        for (int i = 0; i < 64; i++)
            one_op(p);
    for (unsigned i = 0; i < p->nperiodic; i++)
        if (p->periodic_t[i] != NULL) {
            serex_timer_cancel(p->periodic_t[i]);
            serex_timer_release(p->periodic_t[i]);
        }
    return 0;
}

/* --- setup, run, teardown --- */

static void must(int rc, const char *what)
{
    if (rc != SEREX_OK) {
        fprintf(stderr, "soak: %s: %s\n", what, serex_strerror(rc));
        exit(2);
    }
}

static void setup(void)
{
    must(serex_pool_create(NULL, &g.pool), "pool");
    must(serex_serial_create(g.pool, NULL, &g.serial), "serial");
    must(serex_serial_create(g.pool, NULL, &g.consumer), "consumer");
    must(serex_striped_create(g.pool, NULL, &g.striped), "striped");
    must(serex_scheduler_create(NULL, &g.sched), "scheduler");
    must(serex_channel_create(16, &g.ch), "channel");
    must(serex_gate_create(false, &g.gate), "gate");
    must(serex_event_create(&g.drained), "event");
    consumer_recv();
}

static int teardown(void)
{
    serex_stats st;

    serex_gate_open(g.gate);
    serex_channel_close(g.ch);
    must(serex_event_wait(g.drained, 60 * INT64_C(1000000000)), "drain");
    must(serex_destroy(serex_scheduler_executor(g.sched)), "scheduler");
    must(serex_destroy(g.serial), "serial");
    must(serex_destroy(g.consumer), "consumer");
    must(serex_executor_stats(serex_striped_executor(g.striped), &st),
         "stats");
    must(serex_destroy(serex_striped_executor(g.striped)), "striped");
    if (st.lanes != 0)
        violation("striped lanes left");
    must(serex_destroy(g.pool), "pool"); /* gate tasks ran on it */
    serex_gate_destroy(g.gate, NULL, NULL);
    serex_channel_destroy(g.ch);
    serex_event_destroy(g.drained);
    return 0;
}

int main(int argc, char **argv)
{
    static struct producer prod[MAXP];
    serex__thread th[MAXP];
    int64_t seconds = 10, start = serex__now_ns();
    uint64_t seed = 42;

    g.producers = 4;
    if (getenv("SEREX_SOAK_SECONDS") != NULL)
        seconds = atoll(getenv("SEREX_SOAK_SECONDS"));
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seconds") == 0)
            seconds = atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0)
            g.producers = (unsigned)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--seed") == 0)
            seed = strtoull(argv[i + 1], NULL, 10);
    }
    if (g.producers < 1 || g.producers > MAXP || seconds < 0) {
        fprintf(stderr, "usage: soak [--seconds N] [--threads 1-%d] "
                "[--seed S]\n", MAXP);
        return 2;
    }
    setup();
    g.end_ns = start + seconds * INT64_C(1000000000);
    for (unsigned i = 0; i < g.producers; i++) {
        prod[i].id = i;
        prod[i].x = seed + i;
        must(serex__thread_start(&th[i], producer_main, &prod[i]), "thread");
    }
    for (unsigned i = 0; i < g.producers; i++)
        serex__thread_join(th[i]);
    teardown();
    for (unsigned i = 0; i < g.producers; i++)
        for (unsigned j = 0; j < prod[i].nperiodic; j++)
            free(prod[i].periodic[j]);
    for (int k = 0; k < NKINDS; k++) {
        uint64_t a = atomic_load(&g.accepted[k]), r = atomic_load(&g.ran[k]),
                 c = atomic_load(&g.cancelled[k]);

        printf("soak: %-8s accepted %10llu ran %10llu cancelled %8llu\n",
               kind_name[k], (unsigned long long)a, (unsigned long long)r,
               (unsigned long long)c);
        if (k != K_PERIODIC && a != r + c)
            violation("accepted != ran + cancelled");
    }
    printf("soak: %lld s, %u threads, %llu violations\n", (long long)seconds,
           g.producers, (unsigned long long)atomic_load(&g.violations));
    return atomic_load(&g.violations) == 0 ? 0 : 1;
}
