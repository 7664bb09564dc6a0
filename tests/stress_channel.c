/* SPDX-License-Identifier: MIT */
/*
 * stress_channel.c - channels under many senders and receivers on a real
 * pool, with close at the end and close racing sends; an event ping-pong
 * runs alongside.
 *
 * Senders are either chains (on_sent sends the next item, so a chain has
 * one send in flight, from a pool worker) or plain threads that send in a
 * loop and let the sends park. Receivers are chains: on_item records the
 * item and receives again, until it gets NULL. A chain's state is plain
 * (non-atomic): only the channel's hand-over from one continuation to the
 * next orders it, so under TSan (scripts/test.sh runs the stress label
 * there) a missing happens-before is a reported race. Exactly-once is
 * counted per item; per-sender order is checked per receiver chain (a
 * chain receives one item at a time, so it sees each sender's items in
 * channel order). The ping-pong passes a plain counter between two threads
 * through two events: a lost wake-up is a timeout, a missing
 * happens-before a TSan report.
 */
#include "test_util.h"

#include <stdlib.h> /* calloc, free */

#define SENDERS 4
#define PER_SENDER 20000
#define NITEMS (SENDERS * PER_SENDER)
#define MAX_RECEIVERS 4
#define CAPACITY 64
#define PINGS 10000

struct fixture;

/* A thread sender's on_sent argument: which item it sent. */
struct sent_arg {
    struct fixture *f;
    size_t idx;
};

/* An item: who sent it and its place in the sender's sequence. */
struct item {
    unsigned sender;
    size_t seq;
};

/* Sender chain or thread. Plain fields: one chain or thread owns them. */
struct sender {
    struct fixture *f;
    unsigned id;
    size_t next;                  /* chain: the next item to send */
    serex__thread thread;         /* thread senders */
    long accepted, rejected;
    long accepted_after_rejected; /* must stay 0: close is sticky */
};

/* Receiver chain: plain state, ordered by the channel's hand-over. */
struct receiver {
    struct fixture *f;
    long count;
    long nulls;
    long disorder;
    size_t next[SENDERS];
};

struct fixture {
    serex_executor *pool;
    serex_channel *ch;
    struct item *items;          /* sender s's i-th is s * PER_SENDER + i */
    _Atomic unsigned char *seen; /* per item: deliveries */
    _Atomic unsigned char *sent; /* per item: on_sent runs (thread senders) */
    struct sent_arg *sent_args;  /* per item: thread senders' on_sent args */
    struct sender senders[SENDERS];
    struct receiver receivers[MAX_RECEIVERS];
    size_t nreceivers;
    size_t per_sender;           /* items per sender in this test */
    atomic_long bad;             /* unexpected statuses seen on workers */
    atomic_long sent_total;      /* thread senders: on_sent runs */
    atomic_long progress;        /* thread senders: sends made */
    atomic_int senders_left;
    atomic_int receivers_left;
    _Atomic int go;
    serex_event *senders_done;
    serex_event *receivers_done;
    /* the ping-pong */
    serex_event *ping, *pong;
    serex__thread pinger, ponger;
    long ball;                   /* plain: the events order it */
    atomic_long ping_timeouts;
};

/* --- receivers --- */

static void on_item(void *it, void *arg);

static void recv_again(struct receiver *r)
{
    if (serex_channel_recv(r->f->ch, r->f->pool, on_item, r) != SEREX_OK)
        atomic_fetch_add(&r->f->bad, 1);
}

static void on_item(void *it, void *arg)
{
    struct receiver *r = arg;
    struct fixture *f = r->f;
    struct item *x = it;

    if (x == NULL) {
        r->nulls++;
        /* acq_rel: the last chain to end sees every chain's writes, and
         * the event passes them on to the test */
        if (atomic_fetch_sub_explicit(&f->receivers_left, 1,
                                      memory_order_acq_rel) == 1)
            serex_event_signal(f->receivers_done);
        return;
    }
    /* relaxed: read after receivers_done, which orders */
    atomic_fetch_add_explicit(&f->seen[x - f->items], 1,
                              memory_order_relaxed);
    r->count++;
    if (x->seq < r->next[x->sender])
        r->disorder++;
    r->next[x->sender] = x->seq + 1;
    recv_again(r);
}

static void start_receivers(struct fixture *f, size_t n)
{
    f->nreceivers = n;
    atomic_store(&f->receivers_left, (int)n);
    for (size_t i = 0; i < n; i++) {
        f->receivers[i].f = f;
        recv_again(&f->receivers[i]);
    }
}

/* Closes the channel and waits for every receiver chain to get NULL. */
static void close_and_drain(struct fixture *f)
{
    serex_channel_close(f->ch);
    assert_signalled(f->receivers_done);
    for (size_t i = 0; i < f->nreceivers; i++) {
        assert_int_equal(f->receivers[i].nulls, 1);
        assert_int_equal(f->receivers[i].disorder, 0);
    }
    assert_int_equal(atomic_load(&f->bad), 0);
}

/* Every item of the first @accepted[s] of each sender delivered exactly
 * once, the rest never; returns how many receivers counted. */
static long check_delivery(struct fixture *f, const long *accepted)
{
    long counted = 0;

    for (unsigned s = 0; s < SENDERS; s++)
        for (size_t i = 0; i < f->per_sender; i++) {
            unsigned char v = atomic_load_explicit(
                &f->seen[s * PER_SENDER + i], memory_order_relaxed);

            if (v != ((long)i < accepted[s] ? 1 : 0))
                /* %lu: cmocka's print_error is the C library's printf,
                 * which has no %zu on Windows (msvcrt) */
                print_error("sender %u item %lu delivered %u times\n", s,
                            (unsigned long)i, v);
            assert_int_equal(v, (long)i < accepted[s] ? 1 : 0);
        }
    for (size_t r = 0; r < f->nreceivers; r++)
        counted += f->receivers[r].count;
    return counted;
}

/* --- sender chains --- */

static void chain_send(struct sender *s);

static void chain_on_sent(void *arg)
{
    struct sender *s = arg;

    s->next++;
    if (s->next < s->f->per_sender) {
        chain_send(s);
    } else if (atomic_fetch_sub_explicit(&s->f->senders_left, 1,
                                         memory_order_acq_rel) == 1) {
        serex_event_signal(s->f->senders_done);
    }
}

static void chain_send(struct sender *s)
{
    struct fixture *f = s->f;

    if (serex_channel_send(f->ch, &f->items[s->id * PER_SENDER + s->next],
                           f->pool, chain_on_sent, s) != SEREX_OK)
        atomic_fetch_add(&f->bad, 1);
}

static void start_sender_chains(struct fixture *f)
{
    atomic_store(&f->senders_left, SENDERS);
    for (unsigned i = 0; i < SENDERS; i++) {
        f->senders[i].f = f;
        f->senders[i].id = i;
        chain_send(&f->senders[i]);
    }
}

/* --- sender threads --- */

static void count_sent(void *arg)
{
    struct sent_arg *a = arg;
    struct fixture *f = a->f;

    /* relaxed: read after senders_done or after the pool is gone */
    atomic_fetch_add_explicit(&f->sent[a->idx], 1, memory_order_relaxed);
    /* acq_rel: the last one passes every sender's writes to the event */
    if (atomic_fetch_add_explicit(&f->sent_total, 1, memory_order_acq_rel) +
            1 ==
        (long)(SENDERS * f->per_sender))
        serex_event_signal(f->senders_done);
}

static int sender_thread_main(void *arg)
{
    struct sender *s = arg;
    struct fixture *f = s->f;

    /* acquire: start together, to make the races likely */
    while (!atomic_load_explicit(&f->go, memory_order_acquire))
        serex__thread_yield();
    for (size_t i = 0; i < f->per_sender; i++) {
        size_t idx = s->id * PER_SENDER + i;
        int rc = serex_channel_send(f->ch, &f->items[idx], f->pool,
                                    count_sent, &f->sent_args[idx]);

        /* relaxed: only paces the test's close */
        atomic_fetch_add_explicit(&f->progress, 1, memory_order_relaxed);
        if (rc == SEREX_OK) {
            s->accepted++;
            if (s->rejected > 0)
                s->accepted_after_rejected++;
        } else if (rc == SEREX_EREJECTED) {
            s->rejected++;
        } else {
            atomic_fetch_add(&f->bad, 1);
        }
    }
    return 0;
}

static void start_sender_threads(struct fixture *f)
{
    for (unsigned i = 0; i < SENDERS; i++) {
        f->senders[i].f = f;
        f->senders[i].id = i;
        assert_int_equal(serex__thread_start(&f->senders[i].thread,
                                             sender_thread_main,
                                             &f->senders[i]),
                         SEREX_OK);
    }
    atomic_store_explicit(&f->go, 1, memory_order_release);
}

static void join_sender_threads(struct fixture *f, long *accepted)
{
    for (unsigned i = 0; i < SENDERS; i++) {
        struct sender *s = &f->senders[i];

        serex__thread_join(s->thread);
        assert_int_equal(s->accepted_after_rejected, 0);
        assert_int_equal(s->accepted + s->rejected, (long)f->per_sender);
        accepted[i] = s->accepted;
    }
}

/* --- the event ping-pong --- */

static int pinger_main(void *arg)
{
    struct fixture *f = arg;

    for (long i = 0; i < PINGS; i++) {
        f->ball++;
        serex_event_signal(f->ping);
        if (serex_event_wait(f->pong, TEST_TIMEOUT) != SEREX_OK) {
            atomic_fetch_add(&f->ping_timeouts, 1);
            return 0;
        }
    }
    return 0;
}

static int ponger_main(void *arg)
{
    struct fixture *f = arg;

    for (long i = 0; i < PINGS; i++) {
        if (serex_event_wait(f->ping, TEST_TIMEOUT) != SEREX_OK) {
            atomic_fetch_add(&f->ping_timeouts, 1);
            return 0;
        }
        f->ball++;
        serex_event_signal(f->pong);
    }
    return 0;
}

static void start_ping_pong(struct fixture *f)
{
    assert_int_equal(serex__thread_start(&f->pinger, pinger_main, f),
                     SEREX_OK);
    assert_int_equal(serex__thread_start(&f->ponger, ponger_main, f),
                     SEREX_OK);
}

static void join_ping_pong(struct fixture *f)
{
    serex__thread_join(f->pinger);
    serex__thread_join(f->ponger);
    assert_int_equal(atomic_load(&f->ping_timeouts), 0);
    assert_int_equal(f->ball, 2 * PINGS);
}

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    serex_pool_config cfg = {.threads = 4, .name = "stress-chan"};

    assert_non_null(f);
    f->items = calloc(NITEMS, sizeof *f->items);
    f->seen = calloc(NITEMS, sizeof *f->seen);
    f->sent = calloc(NITEMS, sizeof *f->sent);
    f->sent_args = calloc(NITEMS, sizeof *f->sent_args);
    assert_non_null(f->items);
    assert_non_null(f->seen);
    assert_non_null(f->sent);
    assert_non_null(f->sent_args);
    for (unsigned s = 0; s < SENDERS; s++)
        for (size_t i = 0; i < PER_SENDER; i++) {
            size_t idx = s * PER_SENDER + i;

            f->items[idx] = (struct item){s, i};
            f->sent_args[idx] = (struct sent_arg){f, idx};
        }
    f->per_sender = PER_SENDER;
    assert_int_equal(serex_event_create(&f->senders_done), SEREX_OK);
    assert_int_equal(serex_event_create(&f->receivers_done), SEREX_OK);
    assert_int_equal(serex_event_create(&f->ping), SEREX_OK);
    assert_int_equal(serex_event_create(&f->pong), SEREX_OK);
    assert_int_equal(serex_channel_create(CAPACITY, &f->ch), SEREX_OK);
    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    /* the pool first: a continuation may still be inside a channel call
     * (the one that re-armed a chain) when the test has seen the end */
    if (f->pool != NULL)
        assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    serex_channel_destroy(f->ch);
    serex_event_destroy(f->senders_done);
    serex_event_destroy(f->receivers_done);
    serex_event_destroy(f->ping);
    serex_event_destroy(f->pong);
    free(f->sent_args);
    free(f->sent);
    free(f->seen);
    free(f->items);
    free(f);
    return 0;
}

/* --- tests --- */

static void stress_channel_sender_chains_one_receiver_keep_order(
    void **state)
{
    struct fixture *f = *state;
    const long all[SENDERS] = {PER_SENDER, PER_SENDER, PER_SENDER,
                               PER_SENDER};

    start_ping_pong(f);
    start_receivers(f, 1);
    start_sender_chains(f);
    assert_signalled(f->senders_done);
    close_and_drain(f);
    assert_int_equal(check_delivery(f, all), NITEMS);
    for (unsigned s = 0; s < SENDERS; s++) {
        assert_int_equal(f->senders[s].next, PER_SENDER);
        assert_int_equal(f->receivers[0].next[s], PER_SENDER);
    }
    join_ping_pong(f);
}

static void stress_channel_sender_threads_one_receiver_keep_order(
    void **state)
{
    struct fixture *f = *state;
    long accepted[SENDERS];

    start_ping_pong(f);
    start_receivers(f, 1);
    start_sender_threads(f);
    join_sender_threads(f, accepted);
    for (unsigned s = 0; s < SENDERS; s++)
        assert_int_equal(accepted[s], PER_SENDER);
    assert_signalled(f->senders_done);
    close_and_drain(f);
    assert_int_equal(check_delivery(f, accepted), NITEMS);
    for (size_t i = 0; i < NITEMS; i++)
        assert_int_equal(atomic_load(&f->sent[i]), 1);
    for (unsigned s = 0; s < SENDERS; s++)
        assert_int_equal(f->receivers[0].next[s], PER_SENDER);
    join_ping_pong(f);
}

static void stress_channel_many_receivers_each_item_once(void **state)
{
    struct fixture *f = *state;
    const long all[SENDERS] = {PER_SENDER, PER_SENDER, PER_SENDER,
                               PER_SENDER};

    start_ping_pong(f);
    start_receivers(f, MAX_RECEIVERS);
    start_sender_chains(f);
    assert_signalled(f->senders_done);
    close_and_drain(f);
    assert_int_equal(check_delivery(f, all), NITEMS);
    join_ping_pong(f);
}

static void stress_channel_close_racing_sends_loses_nothing(void **state)
{
    struct fixture *f = *state;
    long accepted[SENDERS], total = 0;

    start_receivers(f, 2);
    start_sender_threads(f);
    /* relaxed: pacing only */
    while (atomic_load_explicit(&f->progress, memory_order_relaxed) <
           NITEMS / 4)
        serex__thread_yield();
    serex_channel_close(f->ch);
    join_sender_threads(f, accepted);
    for (unsigned s = 0; s < SENDERS; s++)
        total += accepted[s];
    assert_true(total >= NITEMS / 4 - SENDERS);
    /* close_and_drain closes again (idempotent) and waits for the NULLs:
     * by then every accepted item was delivered */
    close_and_drain(f);
    assert_int_equal(check_delivery(f, accepted), total);
    /* every accepted send completed: its on_sent runs once (the pool's
     * destroy in teardown would also wait for it; count it here) */
    assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    f->pool = NULL;
    for (unsigned s = 0; s < SENDERS; s++)
        for (size_t i = 0; i < PER_SENDER; i++)
            assert_int_equal(atomic_load(&f->sent[s * PER_SENDER + i]),
                             (long)i < accepted[s] ? 1 : 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(stress_channel_sender_chains_one_receiver_keep_order),
        T(stress_channel_sender_threads_one_receiver_keep_order),
        T(stress_channel_many_receivers_each_item_once),
        T(stress_channel_close_racing_sends_loses_nothing),
#undef T
    };

    return cmocka_run_group_tests_name("stress_channel", tests, NULL, NULL);
}
