/* SPDX-License-Identifier: MIT */
/*
 * pipeline.c - thousands of producers and consumers on 2 threads.
 *
 * 2,000 producer "coroutines" each send 50 numbers through 4 channels of
 * capacity 16 to 2,000 consumer coroutines that add up what they get. No
 * coroutine has a thread or ever blocks one: a channel operation carries a
 * continuation that runs on the pool when the operation completes. A
 * producer's continuation sends its next number; a consumer's adds the
 * number and receives again, until the closed, empty channel says NULL.
 * A coroutine has one operation in flight at a time: its fields need no
 * lock. The last producer to finish closes the channels.
 */
#include <serex/serex.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHANNELS 4
#define PRODUCERS 2000
#define CONSUMERS 2000
#define NUMBERS 50 /* per producer: 1..PRODUCERS * NUMBERS in all */

struct producer { unsigned id, sent; };
struct consumer { unsigned id; uint64_t sum; };

static serex_executor *pool;
static serex_channel *chans[CHANNELS];
static struct producer producers[PRODUCERS];
static struct consumer consumers[CONSUMERS];
static atomic_uint producing = PRODUCERS, consuming = CONSUMERS;
static serex_event *all_done;

static void check(int status, const char *what)
{
    if (status != SEREX_OK) {
        fprintf(stderr, "pipeline: %s: %s\n", what, serex_strerror(status));
        exit(1);
    }
}

/* A producer's step: send its next number (never 0: NULL means closed). */
static void produce(void *arg)
{
    struct producer *p = arg;

    if (p->sent < NUMBERS) {
        uintptr_t n = (uintptr_t)p->id * NUMBERS + ++p->sent;
        check(serex_channel_send(chans[p->id % CHANNELS], (void *)n, pool,
                                 produce, p), "channel_send");
    } else if (atomic_fetch_sub_explicit(&producing, 1,
                                         memory_order_acq_rel) == 1) {
        for (unsigned c = 0; c < CHANNELS; c++) /* the last one closes */
            serex_channel_close(chans[c]);
    }
}

/* A consumer's step: add the number and wait for the next, until NULL. */
static void consume(void *item, void *arg)
{
    struct consumer *c = arg;

    if (item == NULL) {
        if (atomic_fetch_sub_explicit(&consuming, 1,
                                      memory_order_acq_rel) == 1)
            serex_event_signal(all_done);
        return;
    }
    c->sum += (uintptr_t)item;
    check(serex_channel_recv(chans[c->id % CHANNELS], pool, consume, c),
          "channel_recv");
}

int main(void)
{
    serex_pool_config cfg = {.threads = 2, .name = "pipeline"};
    uint64_t total = 0, n = (uint64_t)PRODUCERS * NUMBERS;

    check(serex_pool_create(&cfg, &pool), "pool_create");
    check(serex_event_create(&all_done), "event_create");
    for (unsigned c = 0; c < CHANNELS; c++)
        check(serex_channel_create(16, &chans[c]), "channel_create");
    for (unsigned i = 0; i < CONSUMERS; i++) {
        consumers[i].id = i;
        check(serex_channel_recv(chans[i % CHANNELS], pool, consume,
                                 &consumers[i]), "channel_recv");
    }
    for (unsigned i = 0; i < PRODUCERS; i++) {
        producers[i].id = i;
        check(serex_execute(pool, produce, &producers[i]), "execute");
    }
    check(serex_event_wait(all_done, 30 * INT64_C(1000000000)), "event_wait");
    check(serex_destroy(pool), "destroy pool"); /* its writes are now ours */
    for (unsigned c = 0; c < CHANNELS; c++)
        serex_channel_destroy(chans[c]);
    serex_event_destroy(all_done);
    for (unsigned i = 0; i < CONSUMERS; i++)
        total += consumers[i].sum;
    printf("pipeline: %u producers -> %u channels -> %u consumers on a "
           "2-thread pool: sum of 1..%llu = %llu\n", PRODUCERS, CHANNELS,
           CONSUMERS, (unsigned long long)n, (unsigned long long)total);
    if (total != n * (n + 1) / 2) {
        fprintf(stderr, "pipeline: wrong sum (numbers lost or doubled)\n");
        return 1;
    }
    printf("pipeline: ok\n");
    return 0;
}
