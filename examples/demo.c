/* SPDX-License-Identifier: MIT */
/*
 * demo.c - serex in a few pages: a pool, tasks, futures, an event, a
 * serial, a striped executor, a gate and a channel.
 *
 * Sums the squares of 1..N in parallel: each chunk is a future on the pool;
 * then a plain task signals an event when it is done. Then lock-free bank
 * deposits on the same pool: in order on a serial, and per account on a
 * striped. Then tasks parked at a gate until the setup they need is done,
 * and a producer and a consumer passing numbers through a small channel
 * without ever blocking a thread. Every status is checked; any failure
 * exits non-zero.
 */
#include <serex/serex.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHUNKS 8
#define PER_CHUNK 1000000u
#define ACCOUNTS 4
#define DEPOSITS 100 /* per account: amounts 1..100, 5050 in all */
#define PARKED 8     /* tasks waiting at the gate */
#define ITEMS 100    /* numbers through the channel: 1..100, 5050 in all */
#define SECONDS(s) ((s) * INT64_C(1000000000))

struct chunk {
    uint64_t first, last, sum;
};

static void *sum_squares(void *arg)
{
    struct chunk *c = arg;

    for (uint64_t i = c->first; i <= c->last; i++)
        c->sum += i * i;
    return c;
}

/* Plain fields: the serial (or the account's stripe) orders every access. */
struct account {
    uint64_t balance;
    unsigned next;  /* the seq the next deposit must carry */
    bool disorder;  /* a deposit ran out of turn */
};
struct deposit {
    struct account *acct;
    unsigned seq;   /* 0, 1, 2, ... per account; the amount is seq + 1 */
};

static void *deposit(void *arg) /* a future's task */
{
    struct deposit *d = arg;

    d->acct->disorder |= d->seq != d->acct->next++;
    d->acct->balance += d->seq + 1;
    return arg;
}

static void deposit_task(void *arg) /* the same, as a plain task */
{
    deposit(arg);
}

static void say_done(void *arg)
{
    serex_event_signal(arg);
}

static int check(int status, const char *what)
{
    if (status != SEREX_OK) {
        fprintf(stderr, "demo: %s: %s\n", what, serex_strerror(status));
        exit(1);
    }
    return status;
}

/* Deposits as futures on a serial: on the pool, yet one at a time, in order. */
static bool bank_serial(serex_executor *pool)
{
    struct account acct = {0};
    struct deposit deps[DEPOSITS];
    serex_future *futures[DEPOSITS];
    serex_executor *serial;

    check(serex_serial_create(pool, NULL, &serial), "serial_create");
    for (unsigned i = 0; i < DEPOSITS; i++) {
        deps[i] = (struct deposit){&acct, i};
        check(serex_submit(serial, deposit, &deps[i], &futures[i]), "submit");
    }
    for (unsigned i = 0; i < DEPOSITS; i++) {
        check(serex_future_wait(futures[i], SEREX_FOREVER), "future_wait");
        serex_future_release(futures[i]);
    }
    check(serex_destroy(serial), "destroy serial");
    printf("demo: %u deposits on a serial: %s, balance %llu\n", DEPOSITS,
           acct.disorder ? "WRONG" : "in order",
           (unsigned long long)acct.balance);
    return !acct.disorder && acct.balance == 5050;
}

/* Interleaved deposits to several accounts, on a striped keyed by account. */
static bool bank_striped(serex_executor *pool)
{
    struct account accts[ACCOUNTS] = {{0}};
    struct deposit deps[DEPOSITS * ACCOUNTS];
    serex_striped *striped;
    bool ok = true;

    check(serex_striped_create(pool, NULL, &striped), "striped_create");
    for (unsigned i = 0; i < DEPOSITS * ACCOUNTS; i++) {
        deps[i] = (struct deposit){&accts[i % ACCOUNTS], i / ACCOUNTS};
        check(serex_striped_execute(striped, i % ACCOUNTS, deposit_task,
                                    &deps[i]), "striped_execute");
    }
    /* Destroying the striped waits for its deposits. */
    check(serex_destroy(serex_striped_executor(striped)), "destroy striped");
    for (unsigned a = 0; a < ACCOUNTS; a++)
        ok &= !accts[a].disorder && accts[a].balance == 5050;
    printf("demo: %u accounts x %u deposits on a striped: %s\n", ACCOUNTS,
           DEPOSITS, ok ? "each in order" : "WRONG");
    return ok;
}

/* Tasks parked at a gate until main has set up what they need. */
struct setup {
    int config;           /* plain: written before the gate opens */
    atomic_uint ok, left; /* tasks that saw it; tasks yet to run */
    serex_event *done;
};

static void use_config(void *arg)
{
    struct setup *s = arg;

    /* Relaxed: the acq_rel countdown, then the signal, publish it. */
    atomic_fetch_add_explicit(&s->ok, s->config == 42, memory_order_relaxed);
    if (atomic_fetch_sub_explicit(&s->left, 1, memory_order_acq_rel) == 1)
        serex_event_signal(s->done);
}

static bool gate_parking(serex_executor *pool, serex_event *done)
{
    struct setup s = {.done = done};
    serex_gate *gate;

    atomic_init(&s.ok, 0);
    atomic_init(&s.left, PARKED);
    check(serex_gate_create(false, &gate), "gate_create");
    for (unsigned i = 0; i < PARKED; i++) /* closed: each one parks */
        check(serex_gate_execute(gate, pool, use_config, &s), "gate_execute");
    s.config = 42;         /* set up; no parked task has run yet */
    serex_gate_open(gate); /* now they go to the pool, in order */
    check(serex_event_wait(done, SECONDS(10)), "event_wait");
    serex_gate_destroy(gate, NULL, NULL); /* none left parked */
    unsigned ok = atomic_load_explicit(&s.ok, memory_order_relaxed);
    printf("demo: %u tasks parked at a gate until set-up: %u saw it\n",
           PARKED, ok);
    return ok == PARKED;
}

/* A producer and a consumer, each one continuation at a time on the pool,
 * so neither needs a lock; no thread ever waits on the channel. */
struct relay {
    serex_executor *pool;
    serex_channel *ch;
    uintptr_t next;     /* producer: the number to send next */
    uintptr_t got, sum; /* consumer */
    bool disorder;      /* consumer: a number came out of turn */
    serex_event *done;
};

static void relay_send(void *arg) /* also the send's continuation */
{
    struct relay *r = arg;

    if (r->next > ITEMS) /* all in: the consumer drains it, then NULL */
        serex_channel_close(r->ch);
    else /* items are never NULL: NULL means closed */
        check(serex_channel_send(r->ch, (void *)r->next++, r->pool,
                                 relay_send, r), "channel_send");
}

static void relay_recv(void *item, void *arg)
{
    struct relay *r = arg;

    if (item == NULL) { /* closed and empty */
        serex_event_signal(r->done);
        return;
    }
    r->disorder |= (uintptr_t)item != ++r->got;
    r->sum += (uintptr_t)item;
    check(serex_channel_recv(r->ch, r->pool, relay_recv, r), "channel_recv");
}

static bool channel_relay(serex_executor *pool, serex_event *done)
{
    struct relay r = {.pool = pool, .next = 1, .done = done};

    check(serex_channel_create(4, &r.ch), "channel_create");
    check(serex_channel_recv(r.ch, pool, relay_recv, &r), "channel_recv");
    check(serex_execute(pool, relay_send, &r), "execute");
    check(serex_event_wait(done, SECONDS(10)), "event_wait");
    serex_channel_destroy(r.ch);
    printf("demo: %u numbers through a channel of 4: %s, sum %llu\n", ITEMS,
           r.disorder ? "WRONG order" : "in order", (unsigned long long)r.sum);
    return !r.disorder && r.got == ITEMS && r.sum == 5050;
}

int main(void)
{
    serex_pool_config cfg = {.threads = 4, .name = "demo"};
    serex_executor *pool;
    serex_future *futures[CHUNKS];
    struct chunk chunks[CHUNKS];
    serex_event *done;
    uint64_t total = 0, expect = 0, n = (uint64_t)CHUNKS * PER_CHUNK;

    check(serex_pool_create(&cfg, &pool), "pool_create");
    check(serex_event_create(&done), "event_create");
    for (unsigned i = 0; i < CHUNKS; i++) {
        chunks[i] = (struct chunk){i * PER_CHUNK + 1, (i + 1) * PER_CHUNK, 0};
        check(serex_submit(pool, sum_squares, &chunks[i], &futures[i]),
              "submit");
    }
    for (unsigned i = 0; i < CHUNKS; i++) {
        check(serex_future_wait(futures[i], SEREX_FOREVER), "future_wait");
        total += ((struct chunk *)serex_future_value(futures[i]))->sum;
        serex_future_release(futures[i]);
    }
    check(serex_execute(pool, say_done, done), "execute");
    check(serex_event_wait(done, SECONDS(10)), "event_wait");
    for (uint64_t i = 1; i <= n; i++) /* the same sum, on one thread */
        expect += i * i;
    if (total != expect) {
        fprintf(stderr, "demo: wrong sum %llu\n", (unsigned long long)total);
        return 1;
    }
    printf("demo: %u futures on a 4-thread pool summed the squares of 1..%llu"
           " = %llu\n", CHUNKS, (unsigned long long)n,
           (unsigned long long)total);
    if (!bank_serial(pool) || !bank_striped(pool) || !gate_parking(pool, done)
        || !channel_relay(pool, done))
        return 1;
    check(serex_destroy(pool), "destroy");
    serex_event_destroy(done);
    printf("demo: ok\n");
    return 0;
}
