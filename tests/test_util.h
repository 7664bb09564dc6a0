/* SPDX-License-Identifier: MIT */
/*
 * test_util.h - what every serex test file shares: cmocka's includes in the
 * order it needs, threads through the library's thread layer (so the TSan
 * build sees real synchronisation), and bounded waits that fail a test
 * instead of hanging it.
 */
#ifndef SEREX_TEST_UTIL_H
#define SEREX_TEST_UTIL_H

#include <setjmp.h> /* cmocka needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdbool.h>

#include <serex/serex.h>

#ifndef SEREX_TEST_SHARED
#  include "common_internal.h"
#  include "thread_internal.h"
#endif

#define MS (INT64_C(1000000))
#define SEC (INT64_C(1000000000))
/* Waits in tests end after this: a failure, never a hang. */
#define TEST_TIMEOUT (20 * SEC)

/* A task that signals the event given as its argument. */
static inline void test_signal_task(void *arg)
{
    serex_event_signal(arg);
}

/* A task that must never run: fails the test if it does. */
static inline void never_task(void *arg)
{
    (void)arg;
    fail_msg("a task that must not run ran");
}

/* Waits for @ev with the test timeout; fails the test if it never comes. */
#define assert_signalled(ev) \
    assert_int_equal(serex_event_wait((ev), TEST_TIMEOUT), SEREX_OK)

/*
 * Per-producer order, seen from the tasks: each producer numbers its tasks
 * 0, 1, 2, ...; a task out of that order counts in `disorder`. Only the
 * executor under test orders the calls (plain fields).
 */
#define TEST_ORDER_PRODUCERS 8

struct test_order {
    long total;
    long disorder;
    size_t next[TEST_ORDER_PRODUCERS];
};

static inline void test_order_see(struct test_order *o, unsigned producer,
                                  size_t seq)
{
    o->total++;
    if (o->next[producer] != seq)
        o->disorder++;
    o->next[producer] = seq + 1;
}

/* Collects tasks handed back by shutdown_now, in order. */
struct test_pending {
    size_t n, cap;
    serex_fn *fns;
    void **args;
};

static inline void test_pending_cb(serex_fn fn, void *arg, void *ctx)
{
    struct test_pending *tp = ctx;

    if (tp->n < tp->cap) {
        tp->fns[tp->n] = fn;
        tp->args[tp->n] = arg;
    }
    tp->n++;
}

/*
 * Runs a manual executor until its queue is empty, tasks queued by the
 * tasks it runs included (drains that requeue themselves). Bounded, so a
 * drain that requeued itself forever fails the caller's count check
 * instead of hanging. Returns how many tasks ran.
 */
static inline size_t test_run_all(serex_executor *manual)
{
    size_t n = 0;

    while (n < ((size_t)1 << 24) && serex_manual_run_one(manual))
        n++;
    return n;
}

/*
 * An EDEADLK probe: a task that calls await_termination and destroy on
 * @ex from inside it (set ex and done before running it).
 */
struct test_self_wait {
    serex_executor *ex;
    serex_event *done;
    int await0, await_forever, destroy;
};

/* Await with timeout 0 first, so a missing check fails instead of hanging;
 * the calls that would hang are made only once it said EDEADLK. */
static inline void test_self_wait_task(void *arg)
{
    struct test_self_wait *w = arg;

    w->await0 = serex_await_termination(w->ex, 0);
    if (w->await0 == SEREX_EDEADLK) {
        w->await_forever = serex_await_termination(w->ex, SEREX_FOREVER);
        w->destroy = serex_destroy(w->ex);
    }
    serex_event_signal(w->done);
}

static inline void test_assert_all_edeadlk(const struct test_self_wait *w)
{
    assert_int_equal(w->await0, SEREX_EDEADLK);
    assert_int_equal(w->await_forever, SEREX_EDEADLK);
    assert_int_equal(w->destroy, SEREX_EDEADLK);
}

#endif /* SEREX_TEST_UTIL_H */
