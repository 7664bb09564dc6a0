/* SPDX-License-Identifier: MIT */
/*
 * test_wrap_executor.h - a test's executor in front of another one: its
 * execute is the test's own hook (refuse, yield, slip a task in), and
 * everything else goes to the executor behind it. Written against the
 * public vtable only, as a user would. The test owns both executors:
 * destroy does nothing.
 *
 * And the target most wrapper tests need: one that is full for a moment
 * (a passing refusal), with a racing producer's task slipped in behind the
 * task whose drain it refuses.
 */
#ifndef SEREX_TEST_WRAP_EXECUTOR_H
#define SEREX_TEST_WRAP_EXECUTOR_H

#include <stdatomic.h>
#include <string.h>

#include <serex/serex.h>

struct test_wrap;
/* The hook: what execute does; serex_execute(w->inner, fn, arg) passes a
 * task on. */
typedef int (*test_wrap_fn)(struct test_wrap *w, serex_fn fn, void *arg);

struct test_wrap {
    serex_executor base; /* first member, as the vtable requires */
    serex_executor *inner;
    test_wrap_fn execute;
};

static inline struct test_wrap *test_wrap_of(serex_executor *ex)
{
    return (struct test_wrap *)(void *)ex;
}

static inline int test_wrap_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    return test_wrap_of(ex)->execute(test_wrap_of(ex), fn, arg);
}

static inline void test_wrap_shutdown(serex_executor *ex)
{
    serex_shutdown(test_wrap_of(ex)->inner);
}

static inline size_t test_wrap_shutdown_now(serex_executor *ex,
                                            serex_pending_fn on_pending,
                                            void *ctx)
{
    return serex_shutdown_now(test_wrap_of(ex)->inner, on_pending, ctx);
}

static inline int test_wrap_await(serex_executor *ex, int64_t timeout_ns)
{
    return serex_await_termination(test_wrap_of(ex)->inner, timeout_ns);
}

static inline void test_wrap_destroy(serex_executor *ex)
{
    (void)ex; /* the test owns it and the executor behind it */
}

static const serex_executor_ops test_wrap_ops = {
    .execute = test_wrap_execute,
    .shutdown = test_wrap_shutdown,
    .shutdown_now = test_wrap_shutdown_now,
    .await_termination = test_wrap_await,
    .destroy = test_wrap_destroy,
};

static inline void test_wrap_init(struct test_wrap *w, serex_executor *inner,
                                  test_wrap_fn execute)
{
    w->base.ops = &test_wrap_ops;
    w->inner = inner;
    w->execute = execute;
}

/*
 * A bounded target that is full for a moment: it refuses the next
 * `refusals` submissions with SEREX_EFULL and passes the rest on. At its
 * first refusal a racing producer's task (racer_fn(racer)) enters
 * `wrapper` (a serial, a limiter), queued behind the task whose drain is
 * being refused, as a second producer would between the first one's count
 * and its drain's submission. The test sets `wrapper` once it is made.
 */
struct test_full_target {
    struct test_wrap w;
    serex_executor *wrapper;
    serex_fn racer_fn;
    void *racer;
    atomic_int refusals;
    atomic_int calls; /* submissions seen, refused or passed on */
};

static inline int test_full_execute(struct test_wrap *w, serex_fn fn, void *arg)
{
    struct test_full_target *ft = (struct test_full_target *)(void *)w;
    void *racer = ft->racer;

    atomic_fetch_add(&ft->calls, 1);
    if (atomic_load(&ft->refusals) > 0) {
        atomic_fetch_sub(&ft->refusals, 1);
        if (racer != NULL) {
            ft->racer = NULL;
            /* queued behind: it starts no drain of its own */
            assert_int_equal(serex_execute(ft->wrapper, ft->racer_fn, racer),
                             SEREX_OK);
        }
        return SEREX_EFULL;
    }
    return serex_execute(w->inner, fn, arg);
}

static inline void test_full_init(struct test_full_target *ft,
                                  serex_executor *inner, int refusals,
                                  serex_fn racer_fn, void *racer)
{
    memset(ft, 0, sizeof *ft);
    test_wrap_init(&ft->w, inner, test_full_execute);
    ft->racer_fn = racer_fn;
    ft->racer = racer;
    atomic_store(&ft->refusals, refusals);
}

#endif /* SEREX_TEST_WRAP_EXECUTOR_H */
