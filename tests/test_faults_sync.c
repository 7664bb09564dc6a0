/* SPDX-License-Identifier: MIT */
/*
 * test_faults_sync.c - allocation failure in the synchronisation pieces:
 * a gate (parked, forwarded, kept, handed back), a channel (against a
 * model of what it should have done) and an event (tests/test_faults.h
 * says how a scenario runs).
 */
#include "test_faults.h"

/* --- gate --- */

static void gate_execute_one(struct run *r, serex_gate *g, serex_executor *m)
{
    struct task *t = task_new(r, 0);
    uint64_t before = manual_queued(m);

    if (!accept(r, t, serex_gate_execute(g, m, log_task, t)))
        assert_int_equal(manual_queued(m), before);
}

static void scenario_gate(struct run *r)
{
    serex_gate *g = (serex_gate *)r; /* must be overwritten */
    serex_executor sentinel, *m = &sentinel;
    struct tally t;
    uint64_t queued;
    int handed0;
    size_t n;

    if (!status_ok(r, serex_gate_create(false, &g))) {
        assert_null(g);
        return;
    }
    if (!manual_created(r, &m)) {
        assert_int_equal(serex_gate_destroy(g, on_pending, r), 0);
        return;
    }
    for (int i = 0; i < 6; i++) /* closed: parked */
        gate_execute_one(r, g, m);
    assert_int_equal(manual_queued(m), 0);
    serex_gate_open(g);
    /* released in order; one its target refused (ENOMEM) is kept */
    t = tally_of(r);
    queued = manual_queued(m);
    assert_true(queued <= t.accepted && t.accepted - queued <= 1);
    test_run_all(m);
    for (int i = 0; i < 3; i++) /* open: forwarded at once */
        gate_execute_one(r, g, m);
    serex_gate_close(g);
    queued = manual_queued(m);
    for (int i = 0; i < 3; i++) /* closed again: parked */
        gate_execute_one(r, g, m);
    assert_int_equal(manual_queued(m), queued);
    test_run_all(m);
    serex_gate_open(g);
    serex_gate_close(g);
    for (int i = 0; i < 2; i++)
        gate_execute_one(r, g, m);
    handed0 = r->nhanded;
    /* kept ones, then the parked ones, in order */
    n = serex_gate_destroy(g, on_pending, r);
    assert_int_equal(n, (size_t)(r->nhanded - handed0));
    test_run_all(m);
    assert_int_equal(serex_destroy(m), SEREX_OK);
    assert_ascending(r->log, r->nlog);
    assert_ascending(r->handed_log, r->nhanded);
}

/* --- channel --- */

#define NONE (-1) /* a receive that got NULL */

enum { SEND, RECV };

struct fifo {
    int v[MAXT];
    int head, tail;
};

static void fifo_push(struct fifo *q, int x)
{
    q->v[q->tail++] = x;
}

static int fifo_pop(struct fifo *q)
{
    return q->v[q->head++];
}

static int fifo_len(const struct fifo *q)
{
    return q->tail - q->head;
}

/* What the channel should have done (as test_channel.c's model). */
struct chan {
    struct run *r;
    serex_channel *ch;
    serex_executor *m;
    size_t cap;
    bool closed;
    struct fifo buf, senders, receivers;
    int want_done[MAXT]; /* the operation's continuation is due */
    int want_got[MAXT];  /* a receive's item id, or NONE */
};

static void on_sent(void *arg)
{
    count_task(arg);
}

static void on_item(void *item, void *arg)
{
    struct task *t = arg;
    const struct task *it = item;

    t->r->got[t->id] = it != NULL ? it->id : NONE;
    count_task(t);
}

static void model_deliver(struct chan *c, int recv, int item)
{
    c->want_done[recv] = 1;
    c->want_got[recv] = item;
}

static void model_send(struct chan *c, int id)
{
    if (fifo_len(&c->receivers) > 0) {
        model_deliver(c, fifo_pop(&c->receivers), id);
        c->want_done[id] = 1;
    } else if ((size_t)fifo_len(&c->buf) < c->cap) {
        fifo_push(&c->buf, id);
        c->want_done[id] = 1;
    } else {
        fifo_push(&c->senders, id);
    }
}

static void model_recv(struct chan *c, int id)
{
    if (fifo_len(&c->buf) > 0) {
        model_deliver(c, id, fifo_pop(&c->buf));
        if (fifo_len(&c->senders) > 0) {
            int s = fifo_pop(&c->senders);

            fifo_push(&c->buf, s);
            c->want_done[s] = 1;
        }
    } else if (c->closed) {
        model_deliver(c, id, NONE);
    } else {
        fifo_push(&c->receivers, id);
    }
}

/* Runs what is due, then compares every operation with the model. */
static void chan_check(struct chan *c)
{
    struct run *r = c->r;

    test_run_all(c->m);
    for (int id = 0; id < r->ntasks; id++) {
        int ran = atomic_load(&r->ran[id]);

        assert_int_equal(ran, r->accepted[id] ? c->want_done[id] : 0);
        if (ran && r->tasks[id].kidx == RECV)
            assert_int_equal(r->got[id], c->want_got[id]);
    }
}

static void chan_send(struct chan *c)
{
    struct task *t = task_new(c->r, 0);
    int rc;

    t->kidx = SEND;
    rc = serex_channel_send(c->ch, t, c->m, on_sent, t);
    if (c->closed)
        status_refused(c->r, rc, SEREX_EREJECTED);
    else if (accept(c->r, t, rc))
        model_send(c, t->id);
    chan_check(c);
}

static void chan_recv(struct chan *c)
{
    struct task *t = task_new(c->r, 0);

    t->kidx = RECV;
    if (accept(c->r, t, serex_channel_recv(c->ch, c->m, on_item, t)))
        model_recv(c, t->id);
    chan_check(c);
}

static void chan_close(struct chan *c)
{
    serex_channel_close(c->ch);
    c->closed = true;
    while (fifo_len(&c->receivers) > 0) /* only while nothing is buffered */
        model_deliver(c, fifo_pop(&c->receivers), NONE);
    chan_check(c);
}

static void scenario_channel(struct run *r)
{
    struct chan *c = calloc(1, sizeof *c);
    serex_executor sentinel;

    assert_non_null(c);
    c->r = r;
    c->cap = 2;
    c->ch = (serex_channel *)r; /* must be overwritten */
    c->m = &sentinel;
    if (!status_ok(r, serex_channel_create(c->cap, &c->ch))) {
        assert_null(c->ch);
        free(c);
        return;
    }
    if (!manual_created(r, &c->m)) {
        serex_channel_destroy(c->ch);
        free(c);
        return;
    }
    chan_recv(c); /* two receivers park */
    chan_recv(c);
    chan_send(c); /* handed to them */
    chan_send(c);
    for (int i = 0; i < 4; i++) /* two buffered, two senders park */
        chan_send(c);
    chan_recv(c); /* takes one; a parked sender moves in */
    for (int i = 0; i < 3; i++)
        chan_recv(c);
    chan_recv(c); /* empty: parks */
    chan_close(c); /* it gets NULL */
    chan_send(c); /* refused */
    chan_recv(c); /* closed and empty: NULL at once */
    /* a failed receive above left an item behind: drain it */
    for (int i = 0; i < 8 && fifo_len(&c->buf) + fifo_len(&c->senders) > 0;
         i++)
        chan_recv(c);
    assert_int_equal(fifo_len(&c->buf), 0);
    assert_int_equal(fifo_len(&c->senders), 0);
    assert_int_equal(fifo_len(&c->receivers), 0);
    serex_channel_destroy(c->ch);
    assert_int_equal(serex_destroy(c->m), SEREX_OK);
    free(c);
}

/* --- event --- */

static void scenario_event(struct run *r)
{
    serex_event *ev = (serex_event *)r; /* must be overwritten */

    if (!status_ok(r, serex_event_create(&ev))) {
        assert_null(ev);
        return;
    }
    assert_int_equal(serex_event_wait(ev, 0), SEREX_ETIMEDOUT);
    serex_event_signal(ev);
    assert_int_equal(serex_event_wait(ev, 0), SEREX_OK);
    serex_event_destroy(ev);
}

/* --- the tests --- */

FAULTS_CASE(faults_gate_loses_nothing, "gate", scenario_gate, 0)

FAULTS_CASE(faults_channel_matches_model, "channel", scenario_channel, 0)

FAULTS_CASE(faults_event_create_is_enomem, "event", scenario_event, 0)

FAULTS_MAIN("faults_sync",
            FAULTS_TEST(faults_gate_loses_nothing),
            FAULTS_TEST(faults_channel_matches_model),
            FAULTS_TEST(faults_event_create_is_enomem))
