/* SPDX-License-Identifier: MIT */
/*
 * demo.c - a small shop on serex, every layer on one 4-thread pool.
 *
 * Orders for 8 accounts arrive interleaved; a striped executor keyed by
 * account handles each account's orders one at a time, in order, accounts
 * in parallel. A checkout future queued after an account's orders sees
 * them all and starts the payment. The gateway declines some attempts;
 * each retry is scheduled onto the pool after a doubling backoff, no thread
 * sleeping. Receipts go through a channel of 2 to a ledger with
 * continuations, never blocking a thread; the ledger signals an event when
 * the closed channel is drained. Any failure exits non-zero.
 */
#include <serex/serex.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define ACCOUNTS 8
#define ORDERS 100 /* per account: amounts 1..100, 5050 in all */

struct account {        /* plain fields: one task at a time touches them */
    unsigned next;      /* the seq its next order must carry */
    uint64_t total;
    bool disorder;      /* an order ran out of turn */
    unsigned attempts;  /* payment attempts: the first (index % 3) fail */
};
struct order { struct account *acct; unsigned seq; };

static serex_executor *pool;
static serex_scheduler *sched;
static serex_channel *receipts;
static serex_event *ledger_done;
static struct account accts[ACCOUNTS];
static struct order orders[ORDERS][ACCOUNTS];
static atomic_uint unpaid = ACCOUNTS;
static unsigned ledger_n; /* the ledger's: one receive in flight at a time */
static uint64_t revenue;

static void check(int status, const char *what)
{
    if (status != SEREX_OK) {
        fprintf(stderr, "demo: %s: %s\n", what, serex_strerror(status));
        exit(1);
    }
}

static void place_order(void *arg) /* on the account's stripe */
{
    struct order *o = arg;

    o->acct->disorder |= o->seq != o->acct->next++;
    o->acct->total += o->seq + 1;
}

static void receipt_sent(void *arg) /* the send's continuation */
{
    (void)arg;
    if (atomic_fetch_sub_explicit(&unpaid, 1, memory_order_acq_rel) == 1)
        serex_channel_close(receipts); /* the last receipt is in */
}

static void pay(void *arg) /* one attempt at a time: each schedules the next */
{
    struct account *a = arg;

    if (++a->attempts <= (unsigned)(a - accts) % 3) /* declined: back off */
        check(serex_schedule(sched, pool, SEREX_MS(1) << (a->attempts - 1),
                             pay, a, NULL),
              "schedule");
    else
        check(serex_channel_send(receipts, a, pool, receipt_sent, NULL),
              "channel_send");
}

static void *checkout(void *arg) /* a future's task, after the orders */
{
    struct account *a = arg;
    uintptr_t total = a->total;

    check(serex_execute(pool, pay, a), "execute");
    return (void *)total;
}

static void ledger(void *item, void *arg) /* the receive's continuation */
{
    (void)arg;
    if (item == NULL) { /* closed and drained */
        serex_event_signal(ledger_done);
        return;
    }
    ledger_n++;
    revenue += ((struct account *)item)->total;
    check(serex_channel_recv(receipts, pool, ledger, NULL), "channel_recv");
}

int main(void)
{
    serex_pool_config cfg = {.threads = 4, .name = "demo"};
    serex_striped *striped;
    serex_future *checkouts[ACCOUNTS];
    unsigned in_order = 0, paid = 0, retries = 0;

    check(serex_pool_create(&cfg, &pool), "pool_create");
    check(serex_striped_create(pool, NULL, &striped), "striped_create");
    check(serex_scheduler_create(NULL, &sched), "scheduler_create");
    check(serex_channel_create(2, &receipts), "channel_create");
    check(serex_event_create(&ledger_done), "event_create");
    check(serex_channel_recv(receipts, pool, ledger, NULL), "channel_recv");
    for (unsigned i = 0; i < ORDERS; i++) /* interleaved arrivals */
        for (unsigned a = 0; a < ACCOUNTS; a++) {
            orders[i][a] = (struct order){&accts[a], i};
            check(serex_striped_execute(striped, a, place_order,
                                        &orders[i][a]), "striped_execute");
        }
    for (unsigned a = 0; a < ACCOUNTS; a++)
        check(serex_striped_submit(striped, a, checkout, &accts[a],
                                   &checkouts[a]), "striped_submit");
    for (unsigned a = 0; a < ACCOUNTS; a++) { /* then the orders are ours */
        check(serex_future_wait(checkouts[a], SEREX_FOREVER), "future_wait");
        in_order += !accts[a].disorder
                    && (uintptr_t)serex_future_value(checkouts[a]) == 5050;
        serex_future_release(checkouts[a]);
    }
    check(serex_event_wait(ledger_done, SEREX_SEC(30)), "wait for the ledger");
    /* Feeders before the pool; then every task's writes are ours. */
    check(serex_destroy(serex_scheduler_executor(sched)), "destroy scheduler");
    check(serex_destroy(serex_striped_executor(striped)), "destroy striped");
    check(serex_destroy(pool), "destroy pool");
    serex_channel_destroy(receipts);
    serex_event_destroy(ledger_done);
    for (unsigned a = 0; a < ACCOUNTS; a++) { /* a % 3 declines each */
        retries += accts[a].attempts - 1;
        paid += accts[a].attempts == a % 3 + 1;
    }
    printf("demo: %u accounts x %u orders, striped by account on a 4-thread "
           "pool: %u in order\ndemo: %u declined payments retried with "
           "backoff by the scheduler: %u paid\ndemo: %u receipts through a "
           "channel to the ledger: revenue %llu\n", ACCOUNTS, ORDERS,
           in_order, retries, paid, ledger_n, (unsigned long long)revenue);
    if (in_order != ACCOUNTS || paid != ACCOUNTS || ledger_n != ACCOUNTS
        || revenue != ACCOUNTS * UINT64_C(5050)) {
        fprintf(stderr, "demo: wrong order or count\n");
        return 1;
    }
    printf("demo: ok\n");
    return 0;
}
