/* SPDX-License-Identifier: MIT */
/*
 * custom_executor.c - your own executor: an event loop behind the vtable.
 *
 * Programs often have a loop on one thread that owns their state (a GUI, a
 * game). struct loop makes main's thread such a loop and a serex executor:
 * execute, from any thread, queues a task and wakes the loop, which runs
 * the tasks in order. serex's layers work on it unchanged: a serial over
 * it, timers fired onto it from the scheduler's thread. The five slots keep
 * the contract in serex/executor.h. A real adapter would use its loop's own
 * lock and wake-up call (uv_async_send, say).
 */
#include <serex/serex.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <threads.h> /* thrd_yield */

#define CAP 64 /* tasks the loop's queue holds */

struct task { serex_fn fn; void *arg; };
struct loop {
    serex_executor base;   /* first, so serex can use a struct loop */
    atomic_flag lock;      /* guards the rest, for a few instructions */
    struct task ring[CAP]; /* the queue: tail - head tasks, FIFO */
    unsigned head, tail;
    bool shut, done;       /* done: shut, drained, and loop_run returned */
    serex_event *wake, *finished;
};
static _Thread_local bool loop_thread; /* this thread runs the loop */

static void check(int status, const char *what)
{
    if (status != SEREX_OK) {
        fprintf(stderr, "custom_executor: %s: %s\n", what,
                serex_strerror(status));
        exit(1);
    }
}

static struct loop *lock(serex_executor *ex)
{
    struct loop *l = (struct loop *)(void *)ex;

    while (atomic_flag_test_and_set_explicit(&l->lock, memory_order_acquire))
        thrd_yield(); /* the holder was preempted: let it finish */
    return l;
}

static void unlock(struct loop *l)
{
    atomic_flag_clear_explicit(&l->lock, memory_order_release);
}

static int loop_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct loop *l = lock(ex);
    int status = l->shut ? SEREX_EREJECTED
                 : l->tail - l->head == CAP ? SEREX_EFULL : SEREX_OK;

    if (status == SEREX_OK)
        l->ring[l->tail++ % CAP] = (struct task){fn, arg};
    unlock(l);
    if (status == SEREX_OK) /* kept if the loop is not waiting yet */
        serex_event_signal(l->wake);
    return status;
}

/* Take the oldest task. With none, *@over says if the loop is done. */
static bool loop_pop(struct loop *l, struct task *t, bool *over)
{
    lock(&l->base);
    bool got = l->head != l->tail;
    if (got)
        *t = l->ring[l->head++ % CAP];
    else if (over != NULL) /* the loop's own call */
        *over = l->done = l->shut;
    unlock(l);
    return got;
}

static void loop_shutdown(serex_executor *ex) /* idempotent */
{
    struct loop *l = lock(ex);

    l->shut = true;
    unlock(l);
    serex_event_signal(l->wake); /* a waiting loop sees it is over */
}

static size_t loop_shutdown_now(serex_executor *ex, serex_pending_fn pending,
                                void *ctx)
{
    struct task t;
    size_t n = 0;

    loop_shutdown(ex);
    for (; loop_pop((struct loop *)(void *)ex, &t, NULL); n++)
        if (pending != NULL) /* in order; never run by the loop now */
            pending(t.fn, t.arg, ctx);
    return n;
}

static int loop_await(serex_executor *ex, int64_t timeout_ns)
{
    struct loop *l = lock(ex);
    bool done = l->done;

    unlock(l);
    if (done || loop_thread) /* the loop would wait for itself */
        return done ? SEREX_OK : SEREX_EDEADLK;
    int status = serex_event_wait(l->finished, timeout_ns);
    if (status == SEREX_OK)
        serex_event_signal(l->finished); /* pass it on to the next waiter */
    return status;
}

static void loop_destroy(serex_executor *ex) /* the loop is static here */
{
    /* On the loop's own thread what is queued can never run: drop it, with
     * the public call (it cancels futures' tasks; our slot would not). */
    if (loop_await(ex, SEREX_FOREVER) == SEREX_EDEADLK)
        serex_shutdown_now(ex, NULL, NULL);
}

static const serex_executor_ops loop_ops = {
    .execute = loop_execute, .shutdown = loop_shutdown,
    .shutdown_now = loop_shutdown_now, .await_termination = loop_await,
    .destroy = loop_destroy,
};
static struct loop loop = {.base = {&loop_ops}, .lock = ATOMIC_FLAG_INIT};

/* Run tasks in order until shut down and drained; on the loop's thread. */
static void loop_run(struct loop *l)
{
    struct task t;
    bool over = false;

    while (!over)
        if (loop_pop(l, &t, &over)) /* as a task of ours: EDEADLK works */
            serex_run_task(&l->base, t.fn, t.arg);
        else if (!over)
            check(serex_event_wait(l->wake, SEREX_FOREVER), "event_wait");
    serex_event_signal(l->finished);
}

/* --- the program: plain state, only the loop's thread touches it --- */

static const char *names[] = {"step-1", "step-2", "step-3", "timer"};
static unsigned ran, in_place; /* tasks recorded; of them, in order */
static size_t handed_back;
static int await_in_task;
static bool off_loop;

static void record(void *arg)
{
    off_loop |= !loop_thread;
    in_place += ran < 4 && *(const char **)arg == names[ran];
    ran++;
}

static void quit(void *arg) /* like a window's close button */
{
    await_in_task = serex_await_termination(&loop.base, SEREX_FOREVER);
    check(serex_execute(&loop.base, record, arg), "execute");
    handed_back = serex_shutdown_now(&loop.base, NULL, NULL); /* dropped */
}

int main(void)
{
    serex_executor *serial;
    serex_scheduler *sched;

    loop_thread = true; /* main's thread will run the loop */
    check(serex_event_create(&loop.wake), "event_create");
    check(serex_event_create(&loop.finished), "event_create");
    check(serex_serial_create(&loop.base, NULL, &serial), "serial_create");
    check(serex_scheduler_create(NULL, &sched), "scheduler_create");
    for (unsigned i = 0; i < 3; i++)
        check(serex_execute(serial, record, &names[i]), "execute");
    /* Both fire onto the loop from the timer thread, in due order. */
    check(serex_schedule(sched, &loop.base, SEREX_MS(1), record, &names[3],
                         NULL),
          "schedule");
    check(serex_schedule(sched, &loop.base, SEREX_MS(2), quit, &names[0],
                         NULL),
          "schedule");
    loop_run(&loop); /* main's thread is the loop until quit */

    int late = serex_execute(&loop.base, record, &names[0]);
    check(serex_await_termination(&loop.base, 0), "await_termination");
    check(serex_destroy(serex_scheduler_executor(sched)), "destroy scheduler");
    check(serex_destroy(serial), "destroy serial");
    check(serex_destroy(&loop.base), "destroy loop");
    serex_event_destroy(loop.wake);
    serex_event_destroy(loop.finished);
    printf("custom_executor: on the loop (main's thread%s): 3 serial steps, "
           "then a timer: %u of %u in order\n", off_loop ? ": NO" : "",
           in_place, ran);
    printf("custom_executor: quit: await from a task: \"%s\"; %zu task "
           "handed back; execute after: \"%s\"\n",
           serex_strerror(await_in_task), handed_back, serex_strerror(late));
    if (off_loop || ran != 4 || in_place != 4 || handed_back != 1
        || await_in_task != SEREX_EDEADLK || late != SEREX_EREJECTED) {
        fprintf(stderr, "custom_executor: wrong order or count\n");
        return 1;
    }
    printf("custom_executor: ok\n");
    return 0;
}
