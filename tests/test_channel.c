/* SPDX-License-Identifier: MIT */
/*
 * test_channel.c - the bounded channel: completion at once when there is
 * room or an item, parking in FIFO order otherwise, hand-over from a send
 * to a parked receiver, the close protocol, bad input and allocation
 * failure.
 *
 * Every continuation is posted to a manual executor, so nothing runs until
 * the test runs it: after each operation the test knows exactly which
 * continuations are due. Each send and each receive has its own record
 * (which item it carried or got, how many times its continuation ran), so
 * exactly-once is checked per operation. A randomized test replays long
 * mixed sequences against a naive model of the channel.
 */
#include "test_util.h"

#include <stdlib.h> /* calloc, free */
#include <string.h> /* memset */

#include "nodecache_internal.h" /* serex__cache_trim */

#define N 512
#define NONE ((size_t)-1) /* "got NULL" in a receive's record */

struct fixture;

/* The argument of a continuation: which fixture, which operation. */
struct op {
    struct fixture *f;
    size_t id;
};

struct fixture {
    serex_executor *manual[2]; /* [0] senders' target, [1] receivers' */
    serex_channel *ch;
    char vals[N];              /* item i is &vals[i] */
    struct op sends[N], recvs[N];
    int sent_count[N];         /* per send: on_sent runs */
    size_t sent_order[N];      /* send ids, in on_sent run order */
    size_t nsent;
    int got_count[N];          /* per receive: on_item runs */
    size_t got[N];             /* per receive: item index, or NONE */
    size_t recv_order[N];      /* receive ids, in on_item run order */
    size_t nrecv;
};

/* --- continuations --- */

static void *item(struct fixture *f, size_t i)
{
    return &f->vals[i];
}

static void on_sent(void *arg)
{
    struct op *o = arg;
    struct fixture *f = o->f;

    f->sent_count[o->id]++;
    f->sent_order[f->nsent++] = o->id;
}

static void on_item(void *it, void *arg)
{
    struct op *o = arg;
    struct fixture *f = o->f;

    f->got_count[o->id]++;
    f->got[o->id] = it == NULL ? NONE : (size_t)((char *)it - f->vals);
    f->recv_order[f->nrecv++] = o->id;
}

static void never_sent(void *arg)
{
    (void)arg;
    fail_msg("an on_sent that must not run ran");
}

static void never_item(void *it, void *arg)
{
    (void)it;
    (void)arg;
    fail_msg("an on_item that must not run ran");
}

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(serex_manual_create(&f->manual[i]), SEREX_OK);
    for (size_t i = 0; i < N; i++) {
        f->sends[i] = (struct op){f, i};
        f->recvs[i] = (struct op){f, i};
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    serex__alloc_fail_nth(0);
    serex_channel_destroy(f->ch);
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(serex_destroy(f->manual[i]), SEREX_OK);
    free(f);
    return 0;
}

static void make(struct fixture *f, size_t capacity)
{
    assert_int_equal(serex_channel_create(capacity, &f->ch), SEREX_OK);
    assert_non_null(f->ch);
}

static int ch_send(struct fixture *f, size_t i)
{
    return serex_channel_send(f->ch, item(f, i), f->manual[0], on_sent,
                              &f->sends[i]);
}

static int ch_recv(struct fixture *f, size_t r)
{
    return serex_channel_recv(f->ch, f->manual[1], on_item, &f->recvs[r]);
}

static size_t run_all(struct fixture *f)
{
    return test_run_all(f->manual[0]) + test_run_all(f->manual[1]);
}

/* --- bad input --- */

static void channel_create_bad_arguments_are_einval(void **state)
{
    serex_channel *ch = NULL;

    (void)state;
    assert_int_equal(serex_channel_create(0, &ch), SEREX_EINVAL);
    assert_null(ch);
    assert_int_equal(serex_channel_create(1, NULL), SEREX_EINVAL);
    assert_int_equal(serex_channel_create(0, NULL), SEREX_EINVAL);
}

static void channel_send_null_arguments_are_einval(void **state)
{
    struct fixture *f = *state;
    serex_executor *t = f->manual[0];

    make(f, 1);
    assert_int_equal(serex_channel_send(NULL, item(f, 0), t, never_sent, f),
                     SEREX_EINVAL);
    assert_int_equal(serex_channel_send(f->ch, NULL, t, never_sent, f),
                     SEREX_EINVAL);
    assert_int_equal(serex_channel_send(f->ch, item(f, 0), NULL, never_sent,
                                        f),
                     SEREX_EINVAL);
    assert_int_equal(serex_channel_send(f->ch, item(f, 0), t, NULL, f),
                     SEREX_EINVAL);
    assert_int_equal(run_all(f), 0);
    /* nothing was buffered: a receive parks */
    assert_int_equal(ch_recv(f, 0), SEREX_OK);
    assert_int_equal(run_all(f), 0);
    assert_int_equal(f->got_count[0], 0);
}

static void channel_recv_null_arguments_are_einval(void **state)
{
    struct fixture *f = *state;
    serex_executor *t = f->manual[1];

    make(f, 1);
    assert_int_equal(serex_channel_recv(NULL, t, never_item, f), SEREX_EINVAL);
    assert_int_equal(serex_channel_recv(f->ch, NULL, never_item, f),
                     SEREX_EINVAL);
    assert_int_equal(serex_channel_recv(f->ch, t, NULL, f), SEREX_EINVAL);
    /* nothing parked: a send is buffered, not handed to a receiver */
    assert_int_equal(ch_send(f, 0), SEREX_OK);
    assert_int_equal(run_all(f), 1);
    assert_int_equal(f->sent_count[0], 1);
    assert_int_equal(f->nrecv, 0);
}

static void channel_null_close_and_destroy_are_ignored(void **state)
{
    (void)state;
    serex_channel_close(NULL);
    serex_channel_destroy(NULL);
}

/* --- send --- */

static void channel_send_with_room_completes_at_once(void **state)
{
    struct fixture *f = *state;

    make(f, 2);
    assert_int_equal(ch_send(f, 0), SEREX_OK);
    assert_int_equal(f->sent_count[0], 0); /* posted, not run inline */
    assert_true(serex_manual_run_one(f->manual[0]));
    assert_false(serex_manual_run_one(f->manual[0]));
    assert_int_equal(f->sent_count[0], 1);
    assert_int_equal(ch_send(f, 1), SEREX_OK);
    assert_int_equal(test_run_all(f->manual[0]), 1);
    assert_int_equal(f->sent_count[1], 1);
    assert_int_equal(test_run_all(f->manual[1]), 0);
}

static void channel_sends_beyond_capacity_complete_in_fifo_order(
    void **state)
{
    struct fixture *f = *state;
    const size_t cap = 3, n = 10;

    make(f, cap);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ch_send(f, i), SEREX_OK);
    /* only the first cap found room */
    assert_int_equal(run_all(f), cap);
    for (size_t i = 0; i < cap; i++)
        assert_int_equal(f->sent_order[i], i);
    for (size_t r = 0; r < n; r++) {
        assert_int_equal(ch_recv(f, r), SEREX_OK);
        run_all(f);
        /* receive r got item r and made room for send r + cap */
        assert_int_equal(f->got_count[r], 1);
        assert_int_equal(f->got[r], r);
        assert_int_equal(f->nsent, r + cap + 1 < n ? r + cap + 1 : n);
    }
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(f->sent_order[i], i);
        assert_int_equal(f->sent_count[i], 1);
    }
    /* drained: the next receive parks */
    assert_int_equal(ch_recv(f, n), SEREX_OK);
    assert_int_equal(run_all(f), 0);
}

static void channel_continuations_run_on_their_own_targets(void **state)
{
    struct fixture *f = *state;

    make(f, 1);
    assert_int_equal(ch_recv(f, 0), SEREX_OK);
    assert_int_equal(ch_send(f, 0), SEREX_OK);
    /* on_sent on manual 0, on_item on manual 1 */
    assert_int_equal(test_run_all(f->manual[0]), 1);
    assert_int_equal(f->sent_count[0], 1);
    assert_int_equal(f->nrecv, 0);
    assert_int_equal(test_run_all(f->manual[1]), 1);
    assert_int_equal(f->got[0], 0);
}

static void channel_post_refused_runs_continuation_inline(void **state)
{
    struct fixture *f = *state;

    make(f, 1);
    serex_shutdown(f->manual[0]);
    serex_shutdown(f->manual[1]);
    /* room: completes at once; its target refuses, so it runs here */
    assert_int_equal(ch_send(f, 0), SEREX_OK);
    assert_int_equal(f->sent_count[0], 1);
    /* full: parks, and completes inside the receive that makes room */
    assert_int_equal(ch_send(f, 1), SEREX_OK);
    assert_int_equal(f->sent_count[1], 0);
    assert_int_equal(ch_recv(f, 0), SEREX_OK);
    assert_int_equal(f->got_count[0], 1);
    assert_int_equal(f->got[0], 0);
    assert_int_equal(f->sent_count[1], 1);
    assert_int_equal(ch_recv(f, 1), SEREX_OK);
    assert_int_equal(f->got[1], 1);
    /* parked receiver completed inside a send, and by close */
    assert_int_equal(ch_recv(f, 2), SEREX_OK);
    assert_int_equal(f->got_count[2], 0);
    assert_int_equal(ch_send(f, 2), SEREX_OK);
    assert_int_equal(f->got_count[2], 1);
    assert_int_equal(f->got[2], 2);
    assert_int_equal(f->sent_count[2], 1);
    assert_int_equal(ch_recv(f, 3), SEREX_OK);
    serex_channel_close(f->ch);
    assert_int_equal(f->got_count[3], 1);
    assert_int_equal(f->got[3], NONE);
}

/* --- receive --- */

static void channel_recv_gets_buffered_items_in_fifo_order(void **state)
{
    struct fixture *f = *state;

    make(f, 8);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(ch_send(f, i), SEREX_OK);
    assert_int_equal(run_all(f), 5);
    for (size_t r = 0; r < 5; r++) {
        assert_int_equal(ch_recv(f, r), SEREX_OK);
        /* posted at once: one run runs it */
        assert_true(serex_manual_run_one(f->manual[1]));
        assert_false(serex_manual_run_one(f->manual[1]));
        assert_int_equal(f->got[r], r);
    }
}

static void channel_recv_on_empty_parks_and_receivers_are_served_fifo(
    void **state)
{
    struct fixture *f = *state;

    make(f, 2);
    for (size_t r = 0; r < 4; r++)
        assert_int_equal(ch_recv(f, r), SEREX_OK);
    assert_int_equal(run_all(f), 0);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(ch_send(f, i), SEREX_OK);
        /* handed to the oldest receiver: both continuations are due */
        assert_int_equal(test_run_all(f->manual[0]), 1);
        assert_int_equal(test_run_all(f->manual[1]), 1);
        assert_int_equal(f->recv_order[i], i);
        assert_int_equal(f->got[i], i);
    }
    for (size_t r = 0; r < 4; r++)
        assert_int_equal(f->got_count[r], 1);
    /* the items went straight to receivers: nothing is buffered, and the
     * buffer still has its whole capacity */
    assert_int_equal(ch_send(f, 4), SEREX_OK);
    assert_int_equal(ch_send(f, 5), SEREX_OK);
    assert_int_equal(ch_send(f, 6), SEREX_OK);
    assert_int_equal(run_all(f), 2);
    assert_int_equal(f->sent_count[6], 0);
    assert_int_equal(ch_recv(f, 4), SEREX_OK);
    run_all(f);
    assert_int_equal(f->got[4], 4);
    assert_int_equal(f->sent_count[6], 1);
}

static void channel_send_to_parked_receiver_does_not_buffer(void **state)
{
    struct fixture *f = *state;

    make(f, 1);
    assert_int_equal(ch_recv(f, 0), SEREX_OK);
    assert_int_equal(ch_send(f, 0), SEREX_OK);
    assert_int_equal(run_all(f), 2);
    assert_int_equal(f->got[0], 0);
    /* delivered once: a second receive parks */
    assert_int_equal(ch_recv(f, 1), SEREX_OK);
    assert_int_equal(run_all(f), 0);
    assert_int_equal(f->got_count[1], 0);
}

static void channel_capacity_one_ping_pong(void **state)
{
    struct fixture *f = *state;
    const size_t n = 200;

    make(f, 1);
    for (size_t i = 0; i < n; i++) {
        if (i % 2 == 0) {
            assert_int_equal(ch_send(f, i), SEREX_OK);
            assert_int_equal(ch_recv(f, i), SEREX_OK);
        } else {
            assert_int_equal(ch_recv(f, i), SEREX_OK);
            assert_int_equal(ch_send(f, i), SEREX_OK);
        }
        assert_int_equal(run_all(f), 2);
        assert_int_equal(f->got[i], i);
        assert_int_equal(f->sent_count[i], 1);
    }
}

/* --- close --- */

static void channel_send_after_close_is_rejected(void **state)
{
    struct fixture *f = *state;

    make(f, 4);
    serex_channel_close(f->ch);
    assert_int_equal(serex_channel_send(f->ch, item(f, 0), f->manual[0],
                                        never_sent, f),
                     SEREX_EREJECTED);
    serex_channel_close(f->ch); /* idempotent */
    assert_int_equal(serex_channel_send(f->ch, item(f, 0), f->manual[0],
                                        never_sent, f),
                     SEREX_EREJECTED);
    assert_int_equal(ch_recv(f, 0), SEREX_OK);
    assert_int_equal(run_all(f), 1);
    assert_int_equal(f->got[0], NONE);
}

static void channel_close_delivers_buffered_and_parked_then_null(
    void **state)
{
    struct fixture *f = *state;

    make(f, 2);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(ch_send(f, i), SEREX_OK);
    assert_int_equal(run_all(f), 2);
    serex_channel_close(f->ch);
    assert_int_equal(serex_channel_send(f->ch, item(f, 9), f->manual[0],
                                        never_sent, f),
                     SEREX_EREJECTED);
    assert_int_equal(run_all(f), 0); /* close completes no parked sender */
    for (size_t r = 0; r < 8; r++) {
        assert_int_equal(ch_recv(f, r), SEREX_OK);
        run_all(f);
        assert_int_equal(f->got_count[r], 1);
        assert_int_equal(f->got[r], r < 5 ? r : NONE);
    }
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(f->sent_count[i], 1);
        assert_int_equal(f->sent_order[i], i);
    }
    assert_int_equal(f->nsent, 5);
}

static void channel_close_gives_parked_and_later_receivers_null(
    void **state)
{
    struct fixture *f = *state;

    make(f, 2);
    for (size_t r = 0; r < 3; r++)
        assert_int_equal(ch_recv(f, r), SEREX_OK);
    assert_int_equal(run_all(f), 0);
    serex_channel_close(f->ch);
    assert_int_equal(test_run_all(f->manual[1]), 3);
    for (size_t r = 0; r < 3; r++) {
        assert_int_equal(f->recv_order[r], r);
        assert_int_equal(f->got_count[r], 1);
        assert_int_equal(f->got[r], NONE);
    }
    serex_channel_close(f->ch); /* nothing more to complete */
    assert_int_equal(run_all(f), 0);
    assert_int_equal(ch_recv(f, 3), SEREX_OK);
    assert_int_equal(run_all(f), 1);
    assert_int_equal(f->got[3], NONE);
}

static void channel_receivers_parked_after_items_get_items_then_null(
    void **state)
{
    struct fixture *f = *state;

    /* receive first, then close with items still coming from parked
     * senders: nobody gets NULL while an item remains */
    make(f, 1);
    assert_int_equal(ch_send(f, 0), SEREX_OK);
    assert_int_equal(ch_send(f, 1), SEREX_OK);
    serex_channel_close(f->ch);
    for (size_t r = 0; r < 3; r++)
        assert_int_equal(ch_recv(f, r), SEREX_OK);
    run_all(f);
    assert_int_equal(f->got[0], 0);
    assert_int_equal(f->got[1], 1);
    assert_int_equal(f->got[2], NONE);
    assert_int_equal(f->sent_count[1], 1);
}

static void channel_destroy_drops_parked_continuations(void **state)
{
    struct fixture *f = *state;
    serex_channel *a, *b;

    /* a parked receiver, and (on another channel) a parked sender and a
     * buffered item: destroy without close drops what is parked */
    assert_int_equal(serex_channel_create(1, &a), SEREX_OK);
    assert_int_equal(serex_channel_recv(a, f->manual[1], never_item, f),
                     SEREX_OK);
    assert_int_equal(serex_channel_create(1, &b), SEREX_OK);
    assert_int_equal(serex_channel_send(b, item(f, 0), f->manual[0], on_sent,
                                        &f->sends[0]),
                     SEREX_OK);
    assert_int_equal(serex_channel_send(b, item(f, 1), f->manual[0],
                                        never_sent, f),
                     SEREX_OK);
    serex_channel_destroy(a);
    serex_channel_destroy(b);
    assert_int_equal(run_all(f), 1);
    assert_int_equal(f->sent_count[0], 1);
}

static void channel_destroy_after_close_and_drain(void **state)
{
    struct fixture *f = *state;

    make(f, 4);
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(ch_send(f, i), SEREX_OK);
    serex_channel_close(f->ch);
    for (size_t r = 0; r < 7; r++)
        assert_int_equal(ch_recv(f, r), SEREX_OK);
    assert_int_equal(run_all(f), 6 + 7);
    assert_int_equal(f->got[6], NONE);
    serex_channel_destroy(f->ch);
    f->ch = NULL;
}

/* --- allocation failure --- */

static void channel_create_allocation_failure_is_enomem(void **state)
{
    struct fixture *f = *state;
    int rc = SEREX_ENOMEM, failures = 0;

    serex__cache_trim();
    for (unsigned long n = 1; n < 16; n++) {
        f->ch = (serex_channel *)f;
        serex__alloc_fail_nth(n);
        rc = serex_channel_create(4, &f->ch);
        if (rc == SEREX_OK)
            break;
        assert_int_equal(rc, SEREX_ENOMEM);
        assert_null(f->ch);
        failures++;
    }
    serex__alloc_fail_nth(0);
    assert_int_equal(rc, SEREX_OK);
    assert_true(failures >= 1);
    assert_int_equal(ch_send(f, 0), SEREX_OK);
    assert_int_equal(ch_recv(f, 0), SEREX_OK);
    assert_int_equal(run_all(f), 2);
    assert_int_equal(f->got[0], 0);
}

/*
 * Makes the n-th allocation of @try fail for n = 1, 2, ... until it
 * succeeds. Every failure must say SEREX_ENOMEM and leave no trace: no
 * continuation due. Returns the index of the attempt that succeeded (the
 * attempts use ids first, first + 1, ...).
 */
static size_t until_ok(struct fixture *f,
                       int (*op_fn)(struct fixture *, size_t), size_t first)
{
    int rc = SEREX_ENOMEM;
    size_t id = first;

    for (unsigned long n = 1; n < 32; n++, id++) {
        serex__cache_trim();
        serex__alloc_fail_nth(n);
        rc = op_fn(f, id);
        serex__alloc_fail_nth(0);
        if (rc == SEREX_OK)
            break;
        assert_int_equal(rc, SEREX_ENOMEM);
        assert_int_equal(run_all(f), 0);
    }
    assert_int_equal(rc, SEREX_OK);
    return id;
}

static void channel_parking_recv_allocation_failure_changes_nothing(
    void **state)
{
    struct fixture *f = *state;
    size_t ok;

    make(f, 1);
    ok = until_ok(f, ch_recv, 0);
    assert_true(ok > 0); /* parking must allocate: at least one failure */
    /* only the receive that succeeded is parked */
    assert_int_equal(ch_send(f, 0), SEREX_OK);
    run_all(f);
    assert_int_equal(f->nrecv, 1);
    assert_int_equal(f->got[ok], 0);
    /* and the next send is buffered, not handed to a phantom receiver */
    assert_int_equal(ch_send(f, 1), SEREX_OK);
    run_all(f);
    assert_int_equal(f->nrecv, 1);
    assert_int_equal(ch_recv(f, ok + 1), SEREX_OK);
    run_all(f);
    assert_int_equal(f->got[ok + 1], 1);
}

static void channel_parking_send_allocation_failure_changes_nothing(
    void **state)
{
    struct fixture *f = *state;
    size_t ok;

    make(f, 1);
    assert_int_equal(ch_send(f, 0), SEREX_OK);
    assert_int_equal(run_all(f), 1);
    ok = until_ok(f, ch_send, 1);
    /* the channel holds item 0 and one parked sender: item ok */
    for (size_t r = 0; r < 3; r++)
        assert_int_equal(ch_recv(f, r), SEREX_OK);
    run_all(f);
    assert_int_equal(f->nrecv, 2);
    assert_int_equal(f->got[0], 0);
    assert_int_equal(f->got[1], ok);
    assert_int_equal(f->nsent, 2);
    assert_int_equal(f->sent_count[ok], 1);
    serex_channel_close(f->ch);
    run_all(f);
    assert_int_equal(f->got[2], NONE);
}

static void channel_completing_ops_under_allocation_failure_lose_nothing(
    void **state)
{
    struct fixture *f = *state;
    size_t ok_send, ok_recv;

    /* send with room and receive with an item: if they fail they change
     * nothing; when a post fails, the continuation runs inline */
    make(f, 2);
    ok_send = until_ok(f, ch_send, 0);
    run_all(f);
    assert_int_equal(f->nsent, 1);
    assert_int_equal(f->sent_count[ok_send], 1);
    ok_recv = until_ok(f, ch_recv, 0);
    run_all(f);
    assert_int_equal(f->nrecv, 1);
    assert_int_equal(f->got[ok_recv], ok_send);
    assert_int_equal(ch_recv(f, ok_recv + 1), SEREX_OK); /* empty: parks */
    assert_int_equal(run_all(f), 0);
}

/* --- randomized, against a model --- */

/* A FIFO of indices, big enough for one round. */
struct fifo {
    size_t v[N];
    size_t head, tail;
};

static void fifo_push(struct fifo *q, size_t x)
{
    q->v[q->tail++ % N] = x;
}

static size_t fifo_pop(struct fifo *q)
{
    return q->v[q->head++ % N];
}

static size_t fifo_len(const struct fifo *q)
{
    return q->tail - q->head;
}

/* What the channel should have done: per send, completed or not; per
 * receive, what it got (NONE or not yet, told apart by want_got_set). */
struct model {
    size_t cap;
    bool closed;
    struct fifo buf, senders, receivers;
    int want_sent[N];
    int want_got_set[N];
    size_t want_got[N];
};

static void model_deliver(struct model *m, size_t r, size_t it)
{
    m->want_got_set[r] = 1;
    m->want_got[r] = it;
}

static int model_send(struct model *m, size_t i)
{
    if (m->closed)
        return SEREX_EREJECTED;
    if (fifo_len(&m->receivers) > 0) {
        model_deliver(m, fifo_pop(&m->receivers), i);
        m->want_sent[i] = 1;
    } else if (fifo_len(&m->buf) < m->cap) {
        fifo_push(&m->buf, i);
        m->want_sent[i] = 1;
    } else {
        fifo_push(&m->senders, i);
    }
    return SEREX_OK;
}

static void model_recv(struct model *m, size_t r)
{
    if (fifo_len(&m->buf) > 0) {
        model_deliver(m, r, fifo_pop(&m->buf));
        if (fifo_len(&m->senders) > 0) {
            size_t s = fifo_pop(&m->senders);

            fifo_push(&m->buf, s);
            m->want_sent[s] = 1;
        }
    } else if (m->closed) {
        model_deliver(m, r, NONE);
    } else {
        fifo_push(&m->receivers, r);
    }
}

static void model_close(struct model *m)
{
    m->closed = true;
    while (fifo_len(&m->receivers) > 0) /* only when the buffer is empty */
        model_deliver(m, fifo_pop(&m->receivers), NONE);
}

static void check_model(struct fixture *f, const struct model *m, size_t ns,
                        size_t nr)
{
    for (size_t i = 0; i < ns; i++)
        assert_int_equal(f->sent_count[i], m->want_sent[i]);
    for (size_t r = 0; r < nr; r++) {
        assert_int_equal(f->got_count[r], m->want_got_set[r]);
        if (m->want_got_set[r])
            assert_int_equal(f->got[r], m->want_got[r]);
    }
}

static uint64_t next_rand(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

static void channel_random_operations_match_a_model(void **state)
{
    struct fixture *f = *state;
    static struct model m; /* large: not on the stack; reset each round */

    for (uint64_t seed = 1; seed <= 40; seed++) {
        uint64_t rs = seed;
        size_t ns = 0, nr = 0;

        memset(&m, 0, sizeof m);
        memset(f->sent_count, 0, sizeof f->sent_count);
        memset(f->got_count, 0, sizeof f->got_count);
        f->nsent = f->nrecv = 0;
        m.cap = 1 + next_rand(&rs) % 4;
        make(f, m.cap);
        while (ns < N && nr < N) {
            uint64_t x = next_rand(&rs) % 200;
            /* lean towards sends or receives in phases, so both the
             * buffer fills and receivers pile up */
            bool send_bias = (ns + nr) / 40 % 2 == 0;

            if (x == 0 && nr > N / 2) {
                serex_channel_close(f->ch);
                model_close(&m);
            } else if (x < (send_bias ? 130u : 70u)) {
                assert_int_equal(ch_send(f, ns), model_send(&m, ns));
                ns++;
            } else {
                assert_int_equal(ch_recv(f, nr), SEREX_OK);
                model_recv(&m, nr);
                nr++;
            }
            run_all(f);
            check_model(f, &m, ns, nr);
        }
        serex_channel_close(f->ch);
        model_close(&m);
        run_all(f);
        check_model(f, &m, ns, nr);
        serex_channel_destroy(f->ch);
        f->ch = NULL;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(channel_create_bad_arguments_are_einval),
        T(channel_send_null_arguments_are_einval),
        T(channel_recv_null_arguments_are_einval),
        T(channel_null_close_and_destroy_are_ignored),
        T(channel_send_with_room_completes_at_once),
        T(channel_sends_beyond_capacity_complete_in_fifo_order),
        T(channel_continuations_run_on_their_own_targets),
        T(channel_post_refused_runs_continuation_inline),
        T(channel_recv_gets_buffered_items_in_fifo_order),
        T(channel_recv_on_empty_parks_and_receivers_are_served_fifo),
        T(channel_send_to_parked_receiver_does_not_buffer),
        T(channel_capacity_one_ping_pong),
        T(channel_send_after_close_is_rejected),
        T(channel_close_delivers_buffered_and_parked_then_null),
        T(channel_close_gives_parked_and_later_receivers_null),
        T(channel_receivers_parked_after_items_get_items_then_null),
        T(channel_destroy_drops_parked_continuations),
        T(channel_destroy_after_close_and_drain),
        T(channel_create_allocation_failure_is_enomem),
        T(channel_parking_recv_allocation_failure_changes_nothing),
        T(channel_parking_send_allocation_failure_changes_nothing),
        T(channel_completing_ops_under_allocation_failure_lose_nothing),
        T(channel_random_operations_match_a_model),
#undef T
    };

    return cmocka_run_group_tests_name("channel", tests, NULL, NULL);
}
