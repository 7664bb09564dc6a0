/* SPDX-License-Identifier: MIT */
/*
 * executor.c - status strings, the generic serex_* calls that check their
 * arguments once and dispatch through the vtable, and the per-thread frames
 * that let await and destroy detect a wait on the calling task itself.
 */
#include <string.h> /* memset */

#include "common_internal.h"
#include "serial_internal.h"
#include "stats_internal.h"
#include "striped_internal.h"

const char *serex_strerror(int status)
{
    switch (status) {
    case SEREX_OK: return "success";
    case SEREX_EINVAL: return "invalid argument";
    case SEREX_ENOMEM: return "out of memory";
    case SEREX_EREJECTED: return "rejected: the executor is shut down";
    case SEREX_EFULL: return "the queue is full";
    case SEREX_ETIMEDOUT: return "timed out";
    case SEREX_ECANCELED: return "cancelled";
    case SEREX_EDEADLK: return "would deadlock: called from its own task";
    default: return "unknown status";
    }
}

/* --- frames: which executors this thread is running a task for --- */

static _Thread_local struct serex__frame *current_frame;

void serex__frame_push(struct serex__frame *f, serex_executor *ex)
{
    f->ex = ex;
    f->prev = current_frame;
    current_frame = f;
}

void serex__frame_pop(struct serex__frame *f)
{
    SEREX_ASSERT(current_frame == f);
    current_frame = f->prev;
}

/* What @ex runs on, if it is one of our wrappers. */
static serex_executor *executor_target(serex_executor *ex)
{
    serex_executor *t = serex__serial_target(ex);

    return t != NULL ? t : serex__striped_target(ex);
}

static int frame_running(serex_executor *ex)
{
    for (struct serex__frame *f = current_frame; f != NULL; f = f->prev)
        if (f->ex == ex)
            return 1;
    return 0;
}

int serex__frame_blocks(serex_executor *ex)
{
    /* A task of @ex, or of anything @ex runs on, waiting for @ex could be
     * the very task @ex needs to finish first (DESIGN promise 7). The
     * chain is finite: a wrapper's target is fixed at creation. */
    for (; ex != NULL; ex = executor_target(ex))
        if (frame_running(ex))
            return 1;
    return 0;
}

/* --- the generic calls --- */

static int executor_valid(const serex_executor *ex)
{
    return ex != NULL && ex->ops != NULL;
}

int serex_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    if (!executor_valid(ex) || fn == NULL)
        return SEREX_EINVAL;
    return ex->ops->execute(ex, fn, arg);
}

void serex_shutdown(serex_executor *ex)
{
    if (executor_valid(ex))
        ex->ops->shutdown(ex);
}

struct pending_ctx {
    serex_pending_fn on_pending;
    void *ctx;
};

/* Interposed so that a future's task is cancelled, not handed back, even
 * when the executor is a user's that knows nothing of futures. */
static void pending_filter(serex_fn fn, void *arg, void *ctx)
{
    struct pending_ctx *pc = ctx;

    serex__hand_back(fn, arg, pc->on_pending, pc->ctx);
}

size_t serex_shutdown_now(serex_executor *ex, serex_pending_fn on_pending,
                          void *ctx)
{
    struct pending_ctx pc = {on_pending, ctx};

    if (!executor_valid(ex))
        return 0;
    return ex->ops->shutdown_now(ex, pending_filter, &pc);
}

void serex_run_task(serex_executor *ex, serex_fn fn, void *arg)
{
    struct serex__frame frame;

    if (ex == NULL || fn == NULL)
        return;
    serex__frame_push(&frame, ex);
    fn(arg);
    serex__frame_pop(&frame);
}

int serex_await_termination(serex_executor *ex, int64_t timeout_ns)
{
    if (!executor_valid(ex) || !serex__timeout_valid(timeout_ns))
        return SEREX_EINVAL;
    if (serex__frame_blocks(ex))
        return SEREX_EDEADLK;
    return ex->ops->await_termination(ex, timeout_ns);
}

int serex_destroy(serex_executor *ex)
{
    if (!executor_valid(ex))
        return SEREX_EINVAL;
    if (serex__frame_blocks(ex))
        return SEREX_EDEADLK;
    ex->ops->shutdown(ex);
    ex->ops->destroy(ex);
    return SEREX_OK;
}

int serex_executor_stats(serex_executor *ex, serex_stats *out)
{
    if (!executor_valid(ex) || out == NULL)
        return SEREX_EINVAL;
    memset(out, 0, sizeof *out);
    if (serex__pool_stats(ex, out) || serex__serial_stats(ex, out) ||
        serex__striped_stats(ex, out) || serex__manual_stats(ex, out) ||
        serex__scheduler_stats(ex, out))
        return SEREX_OK;
    return SEREX_EINVAL;
}
