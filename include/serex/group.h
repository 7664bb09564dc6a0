/* SPDX-License-Identifier: MIT */
/*
 * serex/group.h - task groups: count work spread over any executors, wait
 * for all of it or be told when it is done, cancel what has not started.
 *
 * A group counts its members: tasks given to serex_group_execute or
 * serex_group_submit, from the moment the call accepts them until they
 * have run, been cancelled or been dropped by their executor, and work
 * that is not a serex task, bracketed by serex_group_enter and
 * serex_group_leave. The group is empty when it has no member and every
 * notification due has been handed out. One group may span any number of
 * executors (pools, serials, stripeds, manual ones, a user's own), and an
 * executor may run tasks of any number of groups. docs/group.md is the
 * guide; it shows the idiom for timers and for striped keys.
 *
 * Threads: every call may be made from any thread, any number at once,
 * tasks of the group included, except serex_group_destroy, which may
 * overlap with nothing (as any object's destroy).
 */
#ifndef SEREX_GROUP_H
#define SEREX_GROUP_H

#include "cancel.h"   /* serex_cancel */
#include "executor.h" /* serex_executor, serex_fn, SEREX_API */
#include "future.h"   /* serex_future, serex_call_fn */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct serex_group serex_group;

/*
 * serex_group_create - make an empty group.
 *
 * *@out is set on success and set to NULL on failure.
 * Returns:   SEREX_OK; SEREX_EINVAL if out is NULL; SEREX_ENOMEM.
 * Ownership: the caller owns the group; free it with serex_group_destroy.
 * Threads:   any thread.
 */
SEREX_API int serex_group_create(serex_group **out);

/* serex_group_config flags */
/* The first error (serex_group_fail, or a submitted task's future ending
 * with serex_future_set_error) closes the group and cancels its token
 * with that error: every task not started is cancelled (as
 * serex_group_cancel), running ones see serex_cancel_requested on
 * serex_group_token (Java's ShutdownOnFailure, Go's errgroup.WithContext).
 * Without it every error is counted, the first kept, and nothing is
 * cancelled (collect). */
#define SEREX_GROUP_FAIL_FAST 1u

/* Group configuration (serex_group_create_config); zero for defaults. */
typedef struct serex_group_config {
    unsigned flags;       /* SEREX_GROUP_FAIL_FAST, or 0 (collect) */
    serex_cancel *parent; /* NULL, or a token whose cancellation cancels
                             the group (a request's token, a deadline) */
} serex_group_config;

/*
 * serex_group_create_config - a group with a life: its own token (a child
 * of cfg->parent), a failure policy, and the outcome reported by
 * serex_group_wait. When the token is cancelled (by the parent, a
 * deadline on it, fail-fast's first error, or serex_cancel_request on
 * serex_group_token), the group is closed (later execute and submit say
 * SEREX_EREJECTED), its tasks not started are cancelled, and the cause
 * is its error if none came first. @cfg NULL: the defaults.
 * Returns:   SEREX_OK; SEREX_EINVAL if out is NULL or flags has an
 *            unknown bit; SEREX_ENOMEM. *@out is NULL on error.
 * Ownership: as serex_group_create; the group holds what it needs of
 *            cfg->parent (release it whenever you like).
 * Threads:   any thread.
 */
SEREX_API int serex_group_create_config(const serex_group_config *cfg,
                                        serex_group **out);

/*
 * serex_group_close - refuse later members: serex_group_execute and
 * serex_group_submit say SEREX_EREJECTED once this has returned (a call
 * racing with it may still be accepted). Members already in finish;
 * serex_group_enter is not refused (it counts work already under way).
 * C++26's async_scope close. Idempotent; NULL is ignored.
 * Threads:   any thread, a task of @g included; never blocks.
 */
SEREX_API void serex_group_close(serex_group *g);

/*
 * serex_group_fail - report an error (in [SEREX_ERROR_MIN, -1]) for @g,
 * from a task of it or anywhere: counted, kept if it is the first, and
 * with SEREX_GROUP_FAIL_FAST the first one closes and cancels the group
 * (see the flag). A submitted task's future that ends with an error set
 * by serex_future_set_error reports it the same way, by itself. NULL or
 * an error out of range: nothing.
 * Threads:   any thread; never blocks.
 */
SEREX_API void serex_group_fail(serex_group *g, int err);

/* serex_group_error - @g's first error (or its token's cause), 0 if none;
 * serex_group_error_count - how many were reported. Exact once
 * serex_group_wait has returned (and inside a notification). 0 for NULL. */
SEREX_API int serex_group_error(serex_group *g);
SEREX_API size_t serex_group_error_count(serex_group *g);

/*
 * serex_group_token - the group's token (serex_group_create_config), for
 * its tasks to poll and to pass on (serex_future_cancel_on, a child
 * token, a semaphore wait); cancel it to cancel the group. NULL for a
 * group made by serex_group_create. Valid until the group is destroyed.
 */
SEREX_API serex_cancel *serex_group_token(serex_group *g);

/*
 * serex_group_destroy - free an empty group.
 *
 * The group must be empty: serex_group_wait said SEREX_OK, or this is
 * called from one of its notifications (serex_group_notify), and no thread
 * adds to it, waits on it or uses it any more. Destroying a group that
 * still has members (a task queued or running, an enter without its
 * leave) stops the program with "serex: serex_group_destroy: ..." on
 * stderr, in every build (promise 8a, docs/contract.md): its tasks would
 * touch freed memory when they end. So does a destroy that finds a thread
 * still counted in serex_group_wait, or a second destroy while serex still
 * holds the memory (later ones cannot always be told).
 * It never waits: if serex is still handing out the group's notifications
 * when it is called, the memory is freed when that ends. NULL is ignored.
 * Threads:   any thread, a notification of @g included (also one that runs
 *            inline, see notify); no other call on @g may overlap with it.
 */
SEREX_API void serex_group_destroy(serex_group *g);

/*
 * serex_group_execute - run fn(arg) on @ex as a task of @g.
 *
 * Works on any executor, a user-written one included. The task is a
 * member of @g from this call until it has run, or until @ex drops it
 * (shutdown_now, a destroy that can never run it: then fn and arg go to
 * that shutdown_now's on_pending, as any task of @ex). A task cancelled
 * by serex_group_cancel never runs, its arg is not handed back, and it
 * stays a member until @ex reaches (skips) or drops its queue slot.
 * Returns:   SEREX_OK; SEREX_EINVAL if g, ex, ex's ops or fn is NULL;
 *            SEREX_EREJECTED once the group is closed; SEREX_ENOMEM;
 *            SEREX_EFULL past 2^31 members; any error of @ex's execute.
 *            On error nothing was queued, @g is unchanged and arg is
 *            still the caller's. (If @ex refuses the task just
 *            as a serex_group_cancel counts it, the call says SEREX_OK:
 *            the task was accepted, and cancelled.)
 * Ownership: on SEREX_OK, arg passes to the task (or to on_pending). The
 *            group never owns @ex; keep both alive while the task may run.
 * Threads:   any thread, any number at once, a task of @g included; never
 *            blocks. Cost: two atomic additions here, a compare-and-swap
 *            when the task starts and a subtraction when it ends, all on
 *            one cache line of @g, plus one 64-byte block from serex's
 *            node cache.
 */
SEREX_API int serex_group_execute(serex_group *g, serex_executor *ex,
                                  serex_fn fn, void *arg);

/*
 * serex_group_submit - run fn(arg) on @ex as a task of @g, with a future.
 *
 * As serex_group_execute, and as serex_submit for the future: if @ex drops
 * the task, or serex_group_cancel cancels it, the future completes as
 * cancelled (serex_future_wait says SEREX_ECANCELED) and fn never runs.
 * The future's end is published before the task leaves @g, so once
 * serex_group_wait said SEREX_OK, every future of the group answers
 * serex_future_wait(f, 0) at once.
 * Returns:   SEREX_OK and *@out; SEREX_EINVAL if out is NULL or as
 *            serex_group_execute; the other errors of serex_group_execute
 *            (then *@out is NULL, nothing queued, @g unchanged).
 * Ownership: the caller holds one reference to *@out: release it.
 * Threads:   as serex_group_execute (the task's block is 32 bytes, and
 *            the future one of 64).
 */
SEREX_API int serex_group_submit(serex_group *g, serex_executor *ex,
                                 serex_call_fn fn, void *arg,
                                 serex_future **out);

/*
 * serex_group_enter - count one member that is not a serex task (work
 * another library calls back when done, a timer's run: docs/group.md).
 *
 * Each enter is matched by exactly one serex_group_leave, which must
 * happen after it (called later on the same thread, or on another thread
 * the enter was handed to through a task, a lock or an acquire/release
 * pair, as with a mutex). Never fails, never blocks. More than 2^31
 * members at once stops the program with a message. NULL is ignored.
 * Threads:   any thread, any number at once.
 */
SEREX_API void serex_group_enter(serex_group *g);

/*
 * serex_group_leave - end one member counted by serex_group_enter.
 *
 * If it was the last member, this call hands out the notifications due
 * (see notify: a refused one runs here) and wakes serex_group_wait. A
 * leave with no enter left to match stops the program with
 * "serex: serex_group_leave: ..." on stderr, in every build (promise 8a).
 * NULL is ignored.
 * Threads:   any thread, any number at once; never blocks.
 */
SEREX_API void serex_group_leave(serex_group *g);

/*
 * serex_group_wait - wait until @g is empty.
 *
 * Returns once the calling thread sees @g with no member and every
 * notification due handed out (its target's execute returned, or, refused,
 * it ran): the caller may then destroy a notify target. If tasks keep
 * joining, a wait may miss a moment when it was empty and go on waiting.
 * Tasks cancelled by serex_group_cancel stay members until their executor
 * reaches (skips) or drops their queue slot. An empty group counts its
 * members only: the executor that ran the last one (a serial's drain, a
 * pool worker) may still be on its way out (docs/group.md).
 * Returns:   SEREX_OK (the group is empty; every write of its tasks, and
 *            of the work between each enter and its leave, is visible to
 *            the caller); the group's first error instead, once empty,
 *            if one was reported (serex_group_error); SEREX_ETIMEDOUT;
 *            SEREX_EDEADLK at once, whatever the timeout, when called from a
 *            task of @g, from what a dropped task of @g calls (an on_pending,
 *            a future's continuation), or from a notification of @g run by the
 *            thread handing it out (its target refused it, or runs it inside
 *            execute): it would wait for itself. A task of a serial that runs
 *            other tasks of @g behind the caller is not detected. SEREX_EINVAL
 *            for NULL or a timeout below SEREX_FOREVER. A timeout of 0 only
 *            looks.
 * Threads:   any number of threads at once.
 */
SEREX_API int serex_group_wait(serex_group *g, int64_t timeout_ns);

/*
 * serex_group_notify - post fn(arg) to @target once, when @g is next
 * empty, without blocking anyone.
 *
 * If @g has no member now, fn(arg) is posted at once, from this call (or,
 * when another thread is handing out notifications of @g at that moment,
 * by that thread, after the ones before it). Else the thread that ends
 * @g's last member (its task, leave or dropped task) posts it.
 * Notifications are posted in the order they were registered, each once,
 * after the group's tasks' writes (visible in fn); serex_group_wait
 * returns only once the ones due were posted. If @target refuses fn (it
 * is shut down, say), or takes it back or drops it later (shutdown_now,
 * destroy), fn(arg) runs at once on the thread that did so: the one that
 * posted it, or the one inside shutdown_now or destroy; it never reaches
 * an on_pending and is never lost (promise 2a, docs/contract.md, as a
 * future's continuations).
 * Returns:   SEREX_OK; SEREX_EINVAL if g, target, target's ops or fn is
 *            NULL; SEREX_ENOMEM. On error nothing changed and fn will not
 *            run.
 * Ownership: on SEREX_OK, @arg passes to fn. fn may destroy @g (when it
 *            is the last user of the group).
 * Threads:   any thread, any number at once, a task of @g included. fn
 *            may run on another thread before this call returns.
 */
SEREX_API int serex_group_notify(serex_group *g, serex_executor *target,
                                 serex_fn fn, void *arg);

/*
 * serex_group_cancel - stop every task of @g that has not started.
 *
 * O(1): no list is walked. Each such task never runs: a submit's future
 * completes as cancelled, an execute's fn is not called and its arg is not
 * handed back (free it yourself if it owns memory, or use submit and look
 * at the future). Tasks already running are not interrupted and finish.
 * A cancelled task leaves @g when its executor reaches its queue slot
 * (which it skips at once) or drops it; serex_group_wait returns once
 * that has happened to every cancelled task and the running ones ended.
 * Tasks and enters added after this call are not affected.
 * Returns:   how many tasks this call cancelled; 0 for NULL.
 * Threads:   any thread, a task of @g included; never blocks. A task whose
 *            start races with this call either runs (not counted) or is
 *            cancelled (counted), never both.
 */
SEREX_API size_t serex_group_cancel(serex_group *g);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_GROUP_H */
