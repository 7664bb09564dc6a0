/* SPDX-License-Identifier: MIT */
/*
 * test_user_executor.h - a user-written executor for tests: a FIFO that the
 * test runs by hand on its own thread, written against the public vtable
 * only, as a user would (it keeps the contract in serex/executor.h).
 */
#ifndef SEREX_TEST_USER_EXECUTOR_H
#define SEREX_TEST_USER_EXECUTOR_H

#include <stdbool.h>
#include <string.h>

#include <serex/serex.h>

#define TEST_USER_CAP 64

struct test_user {
    serex_executor base; /* first member, as the vtable requires */
    serex_fn fns[TEST_USER_CAP];
    void *args[TEST_USER_CAP];
    size_t head, tail;
    bool shut;
    int destroyed; /* destroy calls: the test owns the memory */
};

static inline struct test_user *test_user_of(serex_executor *ex)
{
    return (struct test_user *)(void *)ex;
}

static inline int test_user_execute(serex_executor *ex, serex_fn fn,
                                    void *arg)
{
    struct test_user *u = test_user_of(ex);

    if (u->shut)
        return SEREX_EREJECTED;
    if (u->tail - u->head == TEST_USER_CAP)
        return SEREX_EFULL;
    u->fns[u->tail % TEST_USER_CAP] = fn;
    u->args[u->tail % TEST_USER_CAP] = arg;
    u->tail++;
    return SEREX_OK;
}

static inline void test_user_shutdown(serex_executor *ex)
{
    test_user_of(ex)->shut = true;
}

static inline size_t test_user_shutdown_now(serex_executor *ex,
                                            serex_pending_fn on_pending,
                                            void *ctx)
{
    struct test_user *u = test_user_of(ex);
    size_t n = 0;

    u->shut = true;
    for (; u->head != u->tail; u->head++, n++)
        if (on_pending != NULL)
            on_pending(u->fns[u->head % TEST_USER_CAP],
                       u->args[u->head % TEST_USER_CAP], ctx);
    return n;
}

static inline int test_user_await(serex_executor *ex, int64_t timeout_ns)
{
    struct test_user *u = test_user_of(ex);

    (void)timeout_ns; /* nothing runs concurrently: no point waiting */
    return u->shut && u->head == u->tail ? SEREX_OK : SEREX_ETIMEDOUT;
}

static inline void test_user_destroy(serex_executor *ex)
{
    /* drop what never ran as the contract says (futures cancelled, a
     * wrapper's drain given back); the memory is the test's */
    serex_shutdown_now(ex, NULL, NULL);
    test_user_of(ex)->destroyed++;
}

static const serex_executor_ops test_user_ops = {
    .execute = test_user_execute,
    .shutdown = test_user_shutdown,
    .shutdown_now = test_user_shutdown_now,
    .await_termination = test_user_await,
    .destroy = test_user_destroy,
};

static inline void test_user_init(struct test_user *u)
{
    memset(u, 0, sizeof *u);
    u->base.ops = &test_user_ops;
}

/* Runs the oldest task as a task of the executor; false if none. */
static inline bool test_user_run_one(struct test_user *u)
{
    serex_fn fn;
    void *arg;

    if (u->head == u->tail)
        return false;
    fn = u->fns[u->head % TEST_USER_CAP];
    arg = u->args[u->head % TEST_USER_CAP];
    u->head++;
    serex_run_task(&u->base, fn, arg);
    return true;
}

#endif /* SEREX_TEST_USER_EXECUTOR_H */
