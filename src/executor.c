/* SPDX-License-Identifier: MIT */
/*
 * executor.c - status strings, the generic serex_* calls that check their
 * arguments once and dispatch through the vtable, and the per-thread frames
 * that let await and destroy detect a wait on the calling task itself.
 */
#include <string.h> /* memset */

#include "common_internal.h"
#include "executor_internal.h"
#include "exec_class_internal.h"
#include "op_internal.h"

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

static SEREX__THREAD_LOCAL struct serex__frame *current_frame;

void serex__frame_push(struct serex__frame *f, serex_executor *ex)
{
    f->ex = ex;
    f->prev = current_frame;
    f->key = 0;
    f->serial = false;
    f->lane = false;
    current_frame = f;
}

void serex__frame_push_serial(struct serex__frame *f, serex_executor *ex,
                              const uint64_t *key)
{
    serex__frame_push(f, ex);
    f->serial = true;
    f->lane = key != NULL;
    f->key = key != NULL ? *key : 0;
}

void serex__frame_pop(struct serex__frame *f)
{
    SEREX_ASSERT(current_frame == f);
    current_frame = f->prev;
}

static bool frame_running(serex_executor *ex)
{
    for (struct serex__frame *f = current_frame; f != NULL; f = f->prev)
        if (f->ex == ex)
            return true;
    return false;
}

/*
 * A task of @ex, or of anything @ex waits on, waiting for @ex could be the
 * very task @ex needs to finish first (promise 7). The class says what
 * @ex waits on (a wrapper's target, a scheduler's timers' targets); the
 * recursion ends: a wrapper's target is fixed at creation, before the
 * wrapper exists, so wrappers form no cycle; schedulers aimed at each
 * other's faces can, and their walk stops at a scheduler already on it.
 */
static bool walk_blocks(serex_executor *ex)
{
    const struct serex__exec_class *cls;

    if (frame_running(ex))
        return true;
    cls = serex__class_of(ex);
    return cls != NULL && cls->waits_on != NULL &&
           cls->waits_on(ex, walk_blocks);
}

int serex__frame_blocks(serex_executor *ex)
{
    /* no frame: this thread runs no task, so nothing can wait on it */
    return current_frame != NULL && walk_blocks(ex);
}

/*
 * Only the thread's own frames are asked: a task queued on a wrapper
 * whose target is one of them (a serial over a manual executor the caller
 * runs) waits too, but telling would need each wrapper to name its target
 * for this walk, and the class hook that does (waits_on) also follows a
 * scheduler's timers, where its own tasks do not queue.
 */
bool serex__frame_behind(serex_executor *ex, const uint64_t *key)
{
    for (struct serex__frame *f = current_frame; f != NULL; f = f->prev)
        if (f->ex == ex && f->serial && f->lane == (key != NULL) &&
            (key == NULL || f->key == *key))
            return true;
    return false;
}

/* --- internal operations and classes --- */

void serex__op_run(void *arg)
{
    struct serex__op *op = arg;

    op->cls->run(op);
}

void serex__hand_back(serex_fn fn, void *arg, serex_pending_fn on_pending,
                      void *ctx)
{
    if (fn == serex__op_run) {
        struct serex__op *op = arg;

        op->cls->dropped(op, on_pending, ctx); /* never the user's */
    } else if (on_pending != NULL) {
        on_pending(fn, arg, ctx);
    }
}

void serex__class_destroy(serex_executor *ex)
{
    serex__class_of(ex)->destroy(ex);
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

/* Interposed so that an internal operation (a future's task, a drain...)
 * runs its own hook instead of reaching on_pending, even when the executor
 * is a user's that knows nothing of them. */
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
    const struct serex__exec_class *cls;

    if (!executor_valid(ex) || out == NULL)
        return SEREX_EINVAL;
    cls = serex__class_of(ex);
    if (cls == NULL)
        return SEREX_EINVAL; /* a user's executor keeps no stats */
    memset(out, 0, sizeof *out);
    cls->stats(ex, out);
    return SEREX_OK;
}
