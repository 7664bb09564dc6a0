/* SPDX-License-Identifier: MIT */
/*
 * serex/executor.h - status codes, the task type and the executor vtable.
 *
 * Every serex executor (pool, serial, striped, scheduler, manual) and every
 * executor a user writes is reached through struct serex_executor, so each
 * layer can wrap any other.
 *
 * The promises every executor keeps are numbered ("promise 7") and written
 * out in docs/contract.md; the comments in these headers refer to them by
 * number.
 */
#ifndef SEREX_EXECUTOR_H
#define SEREX_EXECUTOR_H

#include <stdbool.h> /* bool in the API */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* int64_t timeouts and delays */

#if defined(_WIN32) && !defined(SEREX_STATIC)
#  if defined(SEREX_BUILDING)
#    define SEREX_API __declspec(dllexport)
#  else
#    define SEREX_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define SEREX_API __attribute__((visibility("default")))
#else
#  define SEREX_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A task: runs once with the argument it was submitted with. */
typedef void (*serex_fn)(void *arg);

/* Receives a task handed back (not run) by shutdown_now or a destroy. */
typedef void (*serex_pending_fn)(serex_fn fn, void *arg, void *ctx);

/* Timeout value: wait without limit. 0 polls; other negatives are EINVAL. */
#define SEREX_FOREVER ((int64_t)-1)

/* Durations in the nanoseconds every serex call takes: SEREX_MS(250) is a
 * quarter second. Integer arguments; the result is int64_t (no overflow
 * below 292 years). */
#define SEREX_US(x) ((int64_t)(x) * INT64_C(1000))
#define SEREX_MS(x) ((int64_t)(x) * INT64_C(1000000))
#define SEREX_SEC(x) ((int64_t)(x) * INT64_C(1000000000))

/*
 * Status codes. 0 is success, errors are negative. The values are fixed
 * (they never come from errno) so they are stable across platforms.
 */
enum serex_status {
    SEREX_OK = 0,
    SEREX_EINVAL = -1,    /* bad argument: NULL, negative time, bad config */
    SEREX_ENOMEM = -2,    /* an allocation failed; nothing was changed */
    SEREX_EREJECTED = -3, /* the executor is shut down (or its target is) */
    SEREX_EFULL = -4,     /* a bounded queue is full */
    SEREX_ETIMEDOUT = -5, /* the wait ended before the condition held */
    SEREX_ECANCELED = -6, /* the operation was cancelled */
    SEREX_EDEADLK = -7    /* the call would wait on the calling task itself */
};

/*
 * The lowest code serex carries for a caller (a token's cause, a future's
 * error, since 0.2.0): callers' own codes go from -8 down to this; serex
 * never returns them unless the caller gave them.
 */
#define SEREX_ERROR_MIN (-32767)

/*
 * serex_strerror - a short English description of a status code.
 *
 * Returns:   a static string for every value, "unknown status" for values
 *            that are not serex statuses; never NULL.
 * Threads:   any thread.
 */
SEREX_API const char *serex_strerror(int status);

typedef struct serex_executor serex_executor;

/*
 * The executor vtable. An executor is any struct whose first member is a
 * struct serex_executor pointing at a static table of these five calls.
 *
 * What a user-written executor must honour (the generic serex_* calls below
 * check the arguments first, so the slots may assume them valid):
 *  - execute: may be called from any number of threads at once. Return
 *    SEREX_OK only if fn(arg) will run exactly once, or be handed to
 *    on_pending by shutdown_now. Any error means nothing was queued and
 *    arg is still the caller's.
 *  - shutdown: idempotent; afterwards execute returns SEREX_EREJECTED and
 *    tasks already accepted still run.
 *  - shutdown_now: shutdown, then hand every accepted task that has not
 *    started to on_pending (which may be NULL: then drop them), in order,
 *    and return how many there were.
 *  - await_termination: SEREX_OK once shut down and every accepted task has
 *    finished (their writes are then visible to the caller); SEREX_ETIMEDOUT
 *    when timeout_ns (SEREX_FOREVER, 0 = poll, or > 0) ran out first.
 *  - destroy: called once, by serex_destroy, after shutdown. Wait for the
 *    accepted tasks that can still run (as await_termination does), drop
 *    the ones that never can (a manual executor's queue, a wrapper's tasks
 *    whose target is gone), then free everything. To drop tasks, call
 *    serex_shutdown_now(ex, NULL, NULL) rather than forgetting them: a task
 *    may be a future's, or a serial's drain, and that call completes the
 *    future as cancelled and gives the drain's hold back.
 *  - running a task: call serex_run_task(ex, fn, arg) rather than fn(arg),
 *    so that await_termination and destroy called from the task, on this
 *    executor or on a serial or striped over it, say SEREX_EDEADLK instead
 *    of waiting for the very task that waits (promise 7,
 *    docs/contract.md).
 */
typedef struct serex_executor_ops {
    int (*execute)(serex_executor *ex, serex_fn fn, void *arg);
    void (*shutdown)(serex_executor *ex);
    size_t (*shutdown_now)(serex_executor *ex, serex_pending_fn on_pending,
                           void *ctx);
    int (*await_termination)(serex_executor *ex, int64_t timeout_ns);
    void (*destroy)(serex_executor *ex);
} serex_executor_ops;

struct serex_executor {
    const serex_executor_ops *ops;
};

/*
 * serex_execute - submit fn(arg) to run on @ex.
 *
 * Returns:   SEREX_OK; SEREX_EINVAL if ex, ex->ops or fn is NULL;
 *            SEREX_EREJECTED after shutdown; SEREX_EFULL when a bounded queue
 *            is full; SEREX_ENOMEM. On any error nothing was queued.
 * Ownership: on SEREX_OK, arg passes to the task (or to on_pending).
 * Threads:   any thread, any number at once.
 */
SEREX_API int serex_execute(serex_executor *ex, serex_fn fn, void *arg);

/*
 * serex_execute_wait - as serex_execute, but wait for room when @ex is full.
 *
 * Tries serex_execute(@ex, @fn, @arg); while it says SEREX_EFULL, waits
 * for room and tries again, until the task is accepted or @timeout_ns
 * (SEREX_FOREVER; 0: one try, no wait; > 0) runs out. Every other status
 * is returned at once: a shutdown met while waiting ends the wait with
 * SEREX_EREJECTED.
 * How it waits: serex's bounded executors (queue_capacity of a pool, a
 * serial or a striped; a striped's lane_capacity) signal each freed
 * place, and the caller sleeps until one is freed, with no polling; a
 * place that goes to another producer first sends it back to sleep. For
 * an EFULL that no signal follows (an executor you wrote, or a target
 * that sends none), it tries again after growing sleeps of at most 1 ms
 * (docs/backpressure.md).
 * Returns:   SEREX_OK; SEREX_ETIMEDOUT (still full when the time ran out;
 *            never SEREX_EFULL); SEREX_EDEADLK, at once and every time,
 *            when the caller runs a task of @ex or of an executor @ex runs
 *            on (a serial's target, say), whether @ex is full or has room,
 *            with any timeout, 0 included: the room it could have to wait
 *            for may be freed only once the caller returns, so the call is
 *            refused before any try, as libdispatch refuses dispatch_sync
 *            onto the current queue (from a task, use serex_execute and
 *            handle SEREX_EFULL); SEREX_EINVAL if ex, ex->ops or fn is NULL
 *            or timeout_ns is below SEREX_FOREVER; otherwise what
 *            serex_execute said (SEREX_EREJECTED, SEREX_ENOMEM, ...). On
 *            any error nothing was queued.
 * Ownership: as serex_execute: on SEREX_OK, arg passes to the task.
 * Threads:   any thread, any number at once; blocks the caller while it
 *            waits.
 */
SEREX_API int serex_execute_wait(serex_executor *ex, serex_fn fn, void *arg,
                                 int64_t timeout_ns);

typedef struct serex_cancel serex_cancel; /* <serex/cancel.h> */

/*
 * serex_execute_wait_token - serex_execute_wait that also ends when
 * @token is cancelled while it waits for room: then it says the token's
 * cause and nothing was queued (also at once, when the token is
 * cancelled already and @ex is full). @token NULL: serex_execute_wait.
 * Returns:   as serex_execute_wait, or the token's cause.
 * Ownership, threads: as serex_execute_wait.
 */
SEREX_API int serex_execute_wait_token(serex_executor *ex, serex_fn fn,
                                       void *arg, int64_t timeout_ns,
                                       serex_cancel *token);

/*
 * serex_shutdown - stop accepting tasks; accepted tasks still run.
 *
 * Idempotent. Never blocks. NULL is ignored.
 * Threads:   any thread, a task of @ex included.
 */
SEREX_API void serex_shutdown(serex_executor *ex);

/*
 * serex_shutdown_now - shut down and take back every task not yet started.
 *
 * Each taken-back task goes to on_pending(fn, arg, ctx) in submission order
 * (on_pending may be NULL: the tasks are dropped). Tasks of futures
 * (serex_submit) are not passed to on_pending: their futures complete as
 * cancelled. Running tasks are not interrupted.
 * Since 0.2.0 on_pending receives only tasks a user submitted, whichever
 * executor hands them back: serex's own operations (a timer's run, a
 * serial's or a striped lane's drain, a channel continuation, ...) end
 * through their own hook instead (promise 2a, docs/contract.md).
 * Returns:   the number of tasks taken back; 0 for NULL. It counts every
 *            queued entry taken back, also those on_pending never sees:
 *            futures' tasks (cancelled) and serex's own operations queued
 *            on @ex (a future's continuation, a group's cancelled task or
 *            its notification, a channel's continuation, a wrapper's
 *            drain, a timer's run), so it may exceed the number of
 *            on_pending calls. Count those calls to know what came back.
 * Threads:   any thread, a task of @ex included.
 */
SEREX_API size_t serex_shutdown_now(serex_executor *ex,
                                    serex_pending_fn on_pending, void *ctx);

/*
 * serex_await_termination - wait until @ex is shut down and idle.
 *
 * Returns:   SEREX_OK (every accepted task has finished and its writes are
 *            visible to the caller); SEREX_ETIMEDOUT; SEREX_EINVAL for NULL
 *            or a timeout below SEREX_FOREVER; SEREX_EDEADLK when called
 *            from a task running on @ex, or on an executor @ex runs on
 *            (any timeout: the answer could never be SEREX_OK).
 * Threads:   any thread.
 */
SEREX_API int serex_await_termination(serex_executor *ex, int64_t timeout_ns);

/*
 * serex_run_task - for the authors of executors: run fn(arg) as a task of
 * @ex on the calling thread (see the vtable's contract above). While it
 * runs, await_termination and destroy of @ex, or of a serial or striped
 * running on @ex, called from this thread say SEREX_EDEADLK.
 * @ex or @fn NULL: nothing happens.
 * Threads:   the thread that runs the task; it may nest (a task of one
 *            executor running a task of another).
 */
SEREX_API void serex_run_task(serex_executor *ex, serex_fn fn, void *arg);

/*
 * serex_destroy - shutdown, wait for accepted tasks, then free @ex.
 *
 * Returns:   SEREX_OK; SEREX_EINVAL for NULL; SEREX_EDEADLK from a task of
 *            @ex (or of an executor @ex runs on): then nothing was done.
 * Ownership: @ex is gone on SEREX_OK. Wrappers (serial, striped) never
 *            destroy their target: destroy them before it.
 * Threads:   any thread but @ex's own.
 */
SEREX_API int serex_destroy(serex_executor *ex);

/*
 * Counters an executor keeps about itself. Fields that do not apply to an
 * executor are 0. They are read without stopping anyone, so while other
 * threads submit or run tasks they are approximate (each is a value it had
 * recently; together they need not add up); once the executor is idle they
 * are exact.
 */
typedef struct serex_stats {
    uint64_t submitted; /* tasks accepted since creation (scheduler: timers
                           scheduled) */
    uint64_t completed; /* of those, run to the end (scheduler: timers
                           done: ran, cancelled, handed back or refused) */
    uint64_t rejected;  /* execute calls that did not return SEREX_OK
                           (shut down, full, out of memory); the
                           scheduler: due runs its targets refused */
    uint64_t queued;    /* accepted, not finished yet (waiting, or running
                           for serial and striped) */
    uint64_t threads;   /* pool: threads alive */
    uint64_t lanes;     /* striped: lanes alive */
    uint64_t pending_timers; /* scheduler: timers not done */
    /* The executor's name: its config's name, else its kind ("pool",
     * "serial", "striped", "scheduler", "manual", ...). Valid until the
     * executor is destroyed; never NULL. */
    const char *name;
} serex_stats;

/*
 * serex_executor_stats - fill *@out with @ex's counters. Cheap: no counter
 * costs the hot paths a locked instruction (each is written by one thread,
 * or under a lock taken anyway); this call sums per-worker or per-shard
 * parts, taking each part's lock briefly where it has one.
 * Every kind fills `name`, whatever else applies to it.
 * Returns:   SEREX_OK; SEREX_EINVAL if ex or out is NULL, or @ex is not one
 *            of serex's executors (a user-written executor has no stats).
 *            For a striped, pass serex_striped_executor(st); for a
 *            scheduler, serex_scheduler_executor(s).
 * Threads:   any thread, at any time before destroy.
 */
SEREX_API int serex_executor_stats(serex_executor *ex, serex_stats *out);

/*
 * serex_executor_is_current - whether the calling thread is, right now,
 * inside a task of @ex: a task submitted to @ex, or a task of something
 * that runs its tasks on @ex (a serial, a striped executor's lane, a
 * limiter over @ex, a timer's run aimed at it), at any depth. Inside a task
 * of a serial over a pool, both the serial and the pool are current; in a
 * plain task of the pool, the serial is not. A worker between tasks, or a
 * thread that runs no task, is on no executor.
 * Returns:   true or false; false for NULL.
 * Threads:   any; it reads only the calling thread's own records (a few
 *            frames on its stack), takes no lock and never blocks.
 */
SEREX_API bool serex_executor_is_current(serex_executor *ex);

/*
 * SEREX_ASSERT_ON(ex) - stops the program, with a message naming the
 * executor and the call site, unless serex_executor_is_current(ex)
 * (libdispatch's dispatch_assert_queue). SEREX_ASSERT_NOT_ON(ex) - stops it
 * if the calling thread is inside a task of @ex (say, before waiting for
 * something that only @ex can run). Both are always checked, in every
 * build; wrap them in your own macro to compile them out.
 */
#define SEREX_ASSERT_ON(ex) \
    serex_assert_on((ex), true, __FILE__, __LINE__, __func__)
#define SEREX_ASSERT_NOT_ON(ex) \
    serex_assert_on((ex), false, __FILE__, __LINE__, __func__)

/*
 * serex_assert_on - what the two macros call: returns if
 * serex_executor_is_current(@ex) equals @on, else writes
 * "serex: SEREX_ASSERT_ON(KIND at ADDRESS) failed at FILE:LINE in FUNC:
 * ..." (KIND: "pool", "serial", ..., for serex's executors) to stderr and
 * aborts. It takes no lock on the way.
 * Threads:   any.
 */
SEREX_API void serex_assert_on(serex_executor *ex, bool on, const char *file,
                               int line, const char *func);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_EXECUTOR_H */
