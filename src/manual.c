/* SPDX-License-Identifier: MIT */
/*
 * manual.c - the manual executor: a mutex-protected FIFO that runs tasks
 * only when serex_manual_run_one/run_pending is called. It exists for
 * deterministic tests, so it is simple rather than fast.
 *
 * await_termination parks (park_internal.h) on a generation that every
 * change toward "terminated" bumps under mu, rather than on a condition
 * variable: so on an autoclock's thread (autoclock.c) the wait runs the
 * queued tasks itself instead of sleeping.
 */
#include "alloc_internal.h"
#include "common_internal.h"
#include "executor_internal.h"
#include "exec_class_internal.h"
#include "park_internal.h"
#include "registry_internal.h"
#include "stats_internal.h"
#include "task_internal.h"
#include "thread_internal.h"

struct manual {
    serex_executor base;
    struct serex__reg reg; /* serex_dump's list */
    serex__mutex mu;
    /* Bumped under mu when a run ends or the queue empties (idle_bump);
     * await parks on it. */
    _Atomic uint32_t idle_gen;
    struct serex__task *head;   /* FIFO, under mu */
    struct serex__task *tail;
    size_t queued;              /* under mu */
    unsigned running;           /* tasks being run now, under mu */
    uint64_t submitted, completed, rejected; /* under mu */
    bool shut;                  /* under mu */
};

static const struct serex__exec_class manual_class;

static struct manual *manual_of(serex_executor *ex)
{
    return serex__container_of(ex, struct manual, base);
}

/* Done: shut down, nothing queued, nothing running. Under mu. */
static bool manual_terminated(const struct manual *m)
{
    return m->shut && m->head == NULL && m->running == 0;
}

/* Tells awaiters to look again. Under mu; wake them after unlocking. */
static void idle_bump(struct manual *m)
{
    /* relaxed: an awaiter reads the state it announces under mu, after
     * its park sees the new value (re-read under the bucket lock) */
    atomic_fetch_add_explicit(&m->idle_gen, 1, memory_order_relaxed);
}

static int manual_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct manual *m = manual_of(ex);
    struct serex__task *t = serex__task_new(fn, arg);
    int rc = SEREX_OK;

    if (t == NULL)
        return SEREX_ENOMEM;
    serex__mutex_lock(&m->mu);
    if (m->shut) {
        rc = SEREX_EREJECTED;
        m->rejected++;
    } else {
        m->submitted++;
        if (m->tail != NULL) /* relaxed: the list is under mu */
            atomic_store_explicit(&m->tail->next, t, memory_order_relaxed);
        else
            m->head = t;
        m->tail = t;
        m->queued++;
    }
    serex__mutex_unlock(&m->mu);
    if (rc != SEREX_OK)
        serex__task_free(t);
    return rc;
}

/* Unlinks the oldest task. Under mu. */
static struct serex__task *manual_pop(struct manual *m)
{
    struct serex__task *t = m->head;

    if (t != NULL) { /* relaxed: the list is under mu */
        m->head = atomic_load_explicit(&t->next, memory_order_relaxed);
        if (m->head == NULL)
            m->tail = NULL;
        m->queued--;
    }
    return t;
}

static void manual_shutdown(serex_executor *ex)
{
    struct manual *m = manual_of(ex);

    serex__mutex_lock(&m->mu);
    m->shut = true;
    idle_bump(m);
    serex__mutex_unlock(&m->mu);
    serex__park_wake_all(&m->idle_gen);
}

/* Takes the whole queue (shut down first) and hands it back in order. */
static size_t manual_drain(struct manual *m, serex_pending_fn on_pending,
                           void *ctx)
{
    struct serex__task *t;
    size_t n;

    serex__mutex_lock(&m->mu);
    m->shut = true;
    t = m->head;
    n = m->queued;
    m->head = m->tail = NULL;
    m->queued = 0;
    idle_bump(m);
    serex__mutex_unlock(&m->mu);
    serex__park_wake_all(&m->idle_gen);
    serex__task_hand_back_list(t, on_pending, ctx);
    return n;
}

static size_t manual_shutdown_now(serex_executor *ex,
                                  serex_pending_fn on_pending, void *ctx)
{
    return manual_drain(manual_of(ex), on_pending, ctx);
}

static int manual_await(serex_executor *ex, int64_t timeout_ns)
{
    struct manual *m = manual_of(ex);
    int64_t deadline = timeout_ns == 0 ? 0 : serex__deadline(timeout_ns);

    for (;;) {
        bool done;
        uint32_t g;

        serex__mutex_lock(&m->mu);
        done = manual_terminated(m);
        /* relaxed: bumped under mu, which we hold */
        g = atomic_load_explicit(&m->idle_gen, memory_order_relaxed);
        serex__mutex_unlock(&m->mu);
        if (done)
            return SEREX_OK;
        /* a bump after our unlock changes the word: the park returns */
        if (timeout_ns == 0 ||
            serex__park_wait(&m->idle_gen, g, deadline) == SEREX_ETIMEDOUT)
            return SEREX_ETIMEDOUT;
    }
}

static void manual_destroy(serex_executor *ex)
{
    struct manual *m = manual_of(ex);

    /* Nobody is left to run the queue: drop it (futures are cancelled),
     * then wait only for a run in progress on another thread. */
    manual_drain(m, NULL, NULL);
    manual_await(ex, SEREX_FOREVER);
    serex__mutex_destroy(&m->mu);
    serex__free(m);
}

static void manual_stats(serex_executor *ex, serex_stats *out);

/* Runs on the threads that call run_one: it waits on no other executor. */
static const struct serex__exec_class manual_class = {
    SEREX__CLASS_OPS(manual_execute, manual_shutdown, manual_shutdown_now,
                     manual_await),
    "manual",
    manual_stats,
    NULL,
    manual_destroy,
    NULL,
    NULL,
    SEREX__CLASS_REG(struct manual, base, reg, "manual", NULL),
};

int serex_manual_create(serex_executor **out)
{
    struct manual *m;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    m = serex__calloc(1, sizeof *m);
    if (m == NULL)
        return SEREX_ENOMEM;
    if (serex__mutex_init(&m->mu) != SEREX_OK) {
        serex__free(m);
        return SEREX_ENOMEM;
    }
    m->base.ops = &manual_class.ops;
    serex__exec_register(&m->base, NULL); /* serex_dump lists it */
    *out = &m->base;
    return SEREX_OK;
}

bool serex_manual_run_one(serex_executor *ex)
{
    struct manual *m;
    struct serex__task *t;
    struct serex__frame frame;
    serex_fn fn;
    void *arg;
    bool done;

    if (ex == NULL || serex__class_of(ex) != &manual_class)
        return false;
    m = manual_of(ex);
    serex__mutex_lock(&m->mu);
    t = manual_pop(m);
    if (t != NULL)
        m->running++;
    serex__mutex_unlock(&m->mu);
    if (t == NULL)
        return false;
    fn = t->fn;
    arg = t->arg;
    serex__task_free(t);
    serex__frame_push_serial(&frame, ex, NULL); /* run calls: one thread */
    fn(arg);
    serex__frame_pop(&frame);
    serex__mutex_lock(&m->mu);
    m->running--;
    m->completed++;
    done = manual_terminated(m);
    if (done)
        idle_bump(m);
    serex__mutex_unlock(&m->mu);
    if (done) /* the address only: a destroy may free m once it sees done */
        serex__park_wake_all(&m->idle_gen);
    return true;
}

size_t serex_manual_run_pending(serex_executor *ex)
{
    size_t n, ran = 0;

    if (ex == NULL || serex__class_of(ex) != &manual_class)
        return 0;
    serex__mutex_lock(&manual_of(ex)->mu);
    n = manual_of(ex)->queued;
    serex__mutex_unlock(&manual_of(ex)->mu);
    while (ran < n && serex_manual_run_one(ex))
        ran++;
    return ran;
}

static void manual_stats(serex_executor *ex, serex_stats *out)
{
    struct manual *m = manual_of(ex);

    serex__mutex_lock(&m->mu);
    out->submitted = m->submitted;
    out->completed = m->completed;
    out->rejected = m->rejected;
    out->queued = m->queued;
    serex__mutex_unlock(&m->mu);
}
