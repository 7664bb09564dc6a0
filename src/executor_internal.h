/* SPDX-License-Identifier: MIT */
/*
 * executor_internal.h - what executor.c gives the executors built on it:
 * the per-thread frames behind SEREX_EDEADLK, the room signal behind
 * serex_execute_wait, and the generic hand-back of a task taken back by
 * shutdown_now or a destroy.
 */
#ifndef SEREX_EXECUTOR_INTERNAL_H
#define SEREX_EXECUTOR_INTERNAL_H

#include "common_internal.h"

/*
 * Which executors the calling thread is running a task for, innermost first.
 * Frames live on the stack of the code that runs the task; a pool worker
 * pushes one for its whole life, a wrapper's drain one per drain.
 */
struct serex__frame {
    serex_executor *ex;
    struct serex__frame *prev;
    uint64_t key; /* the lane's key, if lane */
    bool serial;  /* pushed by serex__frame_push_serial */
    bool lane;    /* ... for a striped lane */
};
void serex__frame_push(struct serex__frame *f, serex_executor *ex);
/*
 * As serex__frame_push, by code that runs @ex's tasks one at a time, here:
 * a serial's drain, a manual executor's run calls, or, with @key not NULL,
 * the drain of a striped's lane for *@key. Any task queued there now waits
 * for the current one to return (serex__frame_behind).
 */
void serex__frame_push_serial(struct serex__frame *f, serex_executor *ex,
                              const uint64_t *key);
void serex__frame_pop(struct serex__frame *f);
/* true if the calling thread runs a task of @ex or of what @ex waits on
 * (its class says what: exec_class_internal.h). */
int serex__frame_blocks(serex_executor *ex);
/*
 * true if a task queued on @ex now (on the lane of *@key, if @key is not
 * NULL) would start only after the calling thread's current task returns:
 * the thread is inside a serex__frame_push_serial frame of the same @ex
 * (and key). serex_future_wait's SEREX_EDEADLK (promise 7b).
 */
bool serex__frame_behind(serex_executor *ex, const uint64_t *key);

/*
 * Room for serex_execute_wait (the protocol: executor.c). An executor
 * whose execute may say SEREX_EFULL for want of room, and that signals
 * room, keeps three rules:
 *  - on the refusing path, just before it returns SEREX_EFULL, it calls
 *    serex__room_full(): the waiter may then park rather than poll;
 *  - its execute looks for room with a seq_cst load or RMW of its count,
 *    and each place it frees is a seq_cst RMW of that count, followed by
 *    serex__room_made() (which costs one load while nobody waits);
 *  - after a change that makes a retried execute say something else
 *    without a place being freed (shutdown; a refusal by its target that
 *    leaves it refusing everything), it calls serex__room_wake().
 */
void serex__room_full(void);
void serex__room_made(void);
void serex__room_wake(void);

/*
 * serex_execute_wait for any call that may say SEREX_EFULL: tries
 * @try_fn(@ctx) until it says something else or @timeout_ns (checked by
 * the caller) runs out (SEREX_ETIMEDOUT). SEREX_EDEADLK, before any try
 * and whether or not @ex is full, when the calling thread runs a task of
 * @ex or of what @ex runs on (serex__frame_blocks).
 */
int serex__execute_wait(serex_executor *ex, int (*try_fn)(void *ctx), void *ctx,
                        int64_t timeout_ns);

/*
 * Hands back or drops one task taken back by shutdown_now or a destroy:
 * an internal operation runs its own `dropped` hook (op_internal.h); a
 * user's task goes to on_pending, or is dropped if it is NULL.
 */
void serex__hand_back(serex_fn fn, void *arg, serex_pending_fn on_pending,
                      void *ctx);

#endif /* SEREX_EXECUTOR_INTERNAL_H */
