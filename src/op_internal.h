/* SPDX-License-Identifier: MIT */
/*
 * op_internal.h - serex's own tasks: internal operations that carry their
 * own hooks.
 *
 * Components queue work of their own on executors they do not control: a
 * future's task, a timer's run, a serial's or a striped lane's drain, a
 * keyless striped task, a channel continuation. Each is a record that
 * begins with (or embeds) a struct serex__op pointing at the small class
 * table of its kind, and is queued as the task (serex__op_run, op). An
 * executor that takes such a task back (shutdown_now) or drops it (a
 * destroy that can never run it) does not know what it is; the generic
 * hand-back (serex__hand_back, executor.c) tests one thing, "is the task's
 * function serex__op_run?", and calls the op's `dropped` hook, which ends
 * the operation as its owner defines: a future completes as cancelled, a
 * timer ends and passes its one-shot task on, a drain gives back its
 * reference, a continuation runs where it is. So an internal operation
 * never reaches a user's on_pending, and adding a new kind needs no change
 * outside the component that defines it (as libdispatch's continuations
 * carry their vtables).
 *
 * The price is one indirect call per run (serex__op_run loads the class);
 * a record pays one pointer, or none where it overlays a field unused
 * while the operation is queued (a timer's wheel link).
 */
#ifndef SEREX_OP_INTERNAL_H
#define SEREX_OP_INTERNAL_H

#include "common_internal.h"

struct serex__op;

struct serex__op_class {
    const char *name; /* for diagnostics: "future", "serial drain", ... */
    /* Runs the operation (on the executor it was queued on). */
    void (*run)(struct serex__op *op);
    /*
     * The executor took it back or dropped it, unrun. Ends the operation
     * for good; may pass a user's task it carries to @on_pending (through
     * serex__hand_back, so NULL drops it). Called without any of the
     * executor's locks held; may call back into the executor.
     */
    void (*dropped)(struct serex__op *op, serex_pending_fn on_pending,
                    void *ctx);
};

struct serex__op {
    const struct serex__op_class *cls;
};

/* The function every internal operation is queued as (its arg: the op). */
void serex__op_run(void *arg);

/* Queues @op on @ex; a status as serex_execute's (nothing queued on error). */
static inline int serex__op_submit(serex_executor *ex, struct serex__op *op)
{
    return ex->ops->execute(ex, serex__op_run, op);
}

/*
 * A yield: @op gives its thread back after a batch (a serial's or a lane's
 * drain, a limiter's runner: promise 4) and queues itself again. Said to
 * the target for the length of the call, so that a pool puts it behind
 * the tasks it already has instead of in its worker's next-task slot,
 * where it would run again at once (as Tokio's yields skip its LIFO slot).
 */
extern SEREX__THREAD_LOCAL bool serex__op_yielding;

static inline int serex__op_yield(serex_executor *ex, struct serex__op *op)
{
    int rc;

    serex__op_yielding = true;
    rc = serex__op_submit(ex, op);
    serex__op_yielding = false;
    return rc;
}

/* Is the calling thread's execute a yield (serex__op_yield)? */
static inline bool serex__yield_requested(void)
{
    return serex__op_yielding;
}

#endif /* SEREX_OP_INTERNAL_H */
