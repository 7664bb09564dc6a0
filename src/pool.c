/* SPDX-License-Identifier: MIT */
/*
 * pool.c - the thread pool: fixed or elastic, bounded or unbounded queue.
 *
 * --- The queue ---
 * One intrusive multi-producer queue (Vyukov's): a producer links its node
 * with one atomic exchange on `tail` and one store to the previous node's
 * `next`, so execute never takes a lock. Workers take from the `head` end
 * one at a time under `take_lock`, a spinlock held for a few pointer moves
 * (Vyukov's queue has a single consumer; the lock makes workers take turns).
 * Between a producer's exchange and its link, a consumer may see a node
 * that is not linked yet: it waits for the link (`busy`), it never skips.
 * The queue is empty exactly when `tail` is the embedded stub node, which
 * workers can test with one load and no lock (queue_nonempty).
 *
 * --- Parking: who sleeps, who wakes, why no wake-up is lost ---
 * A worker that finds the queue empty becomes the one spinner if there is
 * none (`spinning` 0 -> 1): it polls the queue for SPIN_NS, so a burst or a
 * ping-pong never pays a futex wake. Every other idle worker parks at once
 * (at most one spins: on a 2-core machine two spinners would steal the
 * producer's core). To park, a worker takes `mu`, increments `sleepers`,
 * (the spinner then clears `spinning`), re-checks the queue, and waits on
 * `work_cv` for a wake-up token (`wakeups`).
 * A producer, after its exchange on `tail`, reads `spinning`, then
 * `sleepers`: if there is a spinner it does nothing; else if someone sleeps
 * it takes `mu`, adds a token and signals one worker; else it makes no
 * system call at all (a busy pool costs no syscall per task).
 * The exchange, the loads of `spinning`/`sleepers`, the increment of
 * `sleepers`, the clearing of `spinning` and the worker's re-check of `tail`
 * are all seq_cst: in their single total order, either the producer's load
 * comes after the worker's announcement (it sees a sleeper or no spinner,
 * and wakes), or the worker's re-check comes after the producer's exchange
 * (it sees the task and does not sleep). The token is handed over under
 * `mu`, which the parking worker holds from its re-check until it waits, so
 * the signal cannot fall between the re-check and the wait. Tokens never
 * outnumber sleepers, and a token nobody needed only costs one extra loop.
 * A worker woken from idle that finds more work behind its task wakes the
 * next sleeper (as Tokio's last searching worker does), so a burst after
 * an idle period fans out to every worker.
 *
 * --- Shutdown and the in-flight count ---
 * `ctl` holds SHUTDOWN and STOP flags and, above them, the number of
 * execute calls between their state check and their push. execute adds
 * itself, checks the flags, pushes, removes itself (release). shutdown_now
 * sets STOP, waits for that count to reach zero (acquire), then drains the
 * queue: every task whose execute said SEREX_OK is either in what it
 * drains or was taken by a worker before, so nothing is stranded. After
 * shutdown, workers exit only when the count is zero and the queue is
 * empty, for the same reason. Workers never park after shutdown: shutdown
 * sets the flag and then broadcasts under `mu`, and a parking worker checks
 * the flag under `mu`.
 *
 * --- Threads ---
 * Core threads start in create and live until shutdown. If max_threads is
 * larger, a producer that finds no spinner and no sleeper starts one more
 * thread (under `mu`, up to max); a worker beyond the core count that has
 * waited keep_alive_ns for a token retires. Every thread is joined, by the
 * next start in its slot or by destroy. The last thread to exit marks the
 * pool terminated and broadcasts `term_cv`; await_termination waits for it
 * under `mu`, which also makes every task's writes visible to the caller.
 */
#include <stdio.h>  /* snprintf for thread names */
#include <string.h> /* memcpy, strlen */

#include "common_internal.h"
#include "task_internal.h"
#include "thread_internal.h"

#define ST_SHUTDOWN UINT64_C(1)
#define ST_STOP UINT64_C(2)
#define SUBMITTER UINT64_C(4) /* ctl counts in-flight execute calls above */

#define SPIN_NS INT64_C(50000)         /* poll an empty queue this long */
#define DEFAULT_KEEP_ALIVE_NS (60 * SEREX__NS_PER_S)
#define NAME_MAX_LEN 15                /* what Linux keeps of a thread name */

enum slot_state { SLOT_FREE, SLOT_LIVE, SLOT_EXITED };

struct pool;

struct slot {
    struct pool *p;
    serex__thread thread;
    enum slot_state state; /* under mu */
    unsigned id;           /* the n of "<name>-<n>" */
    bool retired;          /* left by keep-alive; live already counted */
};

struct pool {
    serex_executor base;

    /* Producers' line: every execute touches these two. */
    _Alignas(SEREX__CACHELINE) struct serex__task *_Atomic tail;
    _Atomic uint64_t ctl; /* ST_* flags | in-flight execute calls */

    /* Consumers' line: the worker holding take_lock moves head. */
    _Alignas(SEREX__CACHELINE) _Atomic uint32_t take_lock;
    struct serex__task *head; /* under take_lock */

    /* Idle accounting: read by every execute, written on idle changes. */
    _Alignas(SEREX__CACHELINE) _Atomic uint32_t spinning; /* 0 or 1 */
    _Atomic uint32_t sleepers; /* parked or parking; changed under mu */

    /* Bounded pools only: tasks waiting to start. */
    _Alignas(SEREX__CACHELINE) _Atomic size_t queued;

    _Alignas(SEREX__CACHELINE) struct serex__task stub;

    /* Cold: parking, thread management, configuration. */
    _Alignas(SEREX__CACHELINE) serex__mutex mu;
    serex__cond work_cv;   /* parked workers wait here for a token */
    serex__cond term_cv;   /* await_termination waits here */
    unsigned wakeups;      /* tokens for parked workers, under mu */
    _Atomic unsigned live; /* threads started and not exited; under mu */
    bool terminated;       /* under mu: shut down and every thread gone */
    unsigned next_id;      /* under mu */
    unsigned core, max;
    int64_t keep_alive_ns;
    size_t capacity;
    char name[NAME_MAX_LEN + 1];
    struct slot *slots;    /* max of them */
};

static const serex_executor_ops pool_ops;

static struct pool *pool_of(serex_executor *ex)
{
    return serex__container_of(ex, struct pool, base);
}

/* --- the queue --- */

static void queue_push(struct pool *p, struct serex__task *t)
{
    /*
     * seq_cst: the publishing half of the park handshake (see the essay):
     * it must be ordered before the producer's loads of spinning and
     * sleepers. It also has acquire and release: it orders our write of
     * t's fields before a consumer that reaches t through `tail`.
     */
    struct serex__task *prev = atomic_exchange_explicit(&p->tail, t,
                                                        memory_order_seq_cst);

    /* release: pairs with the acquire loads of next in queue_pop, so the
     * consumer that follows this link sees fn and arg */
    atomic_store_explicit(&prev->next, t, memory_order_release);
}

static bool queue_nonempty(struct pool *p)
{
    /* seq_cst: the re-check half of the park handshake (see the essay) */
    return atomic_load_explicit(&p->tail, memory_order_seq_cst) != &p->stub;
}

/*
 * Pops the oldest node, under take_lock. NULL with *busy set when a
 * producer has swapped `tail` but not linked its node yet: retry shortly.
 */
static struct serex__task *queue_pop(struct pool *p, bool *busy)
{
    struct serex__task *head = p->head, *next, *tail;

    /* acquire (each load of next): pairs with the release link in
     * queue_push, making the node's fn and arg visible */
    next = atomic_load_explicit(&head->next, memory_order_acquire);
    if (head == &p->stub) {
        if (next == NULL) {
            *busy = queue_nonempty(p);
            return NULL;
        }
        p->head = head = next;
        next = atomic_load_explicit(&head->next, memory_order_acquire);
    }
    if (next != NULL) {
        p->head = next;
        return head;
    }
    /* acquire: as above; `head` is the last node only if tail is head */
    tail = atomic_load_explicit(&p->tail, memory_order_acquire);
    if (tail != head) {
        *busy = true;
        return NULL;
    }
    /* head is the last node: queue the stub behind it so head can move. */
    atomic_store_explicit(&p->stub.next, NULL, memory_order_relaxed);
    queue_push(p, &p->stub);
    next = atomic_load_explicit(&head->next, memory_order_acquire);
    if (next != NULL) {
        p->head = next;
        return head;
    }
    *busy = true;
    return NULL;
}

static void take_lock(struct pool *p)
{
    unsigned spins = 0;

    /* acquire: pairs with the release in take_unlock; the previous
     * holder's moves of head are visible */
    while (atomic_exchange_explicit(&p->take_lock, 1, memory_order_acquire)) {
        do {
            if (++spins % 64 == 0)
                serex__thread_yield(); /* the holder may be preempted */
            else
                serex__cpu_relax();
            /* relaxed: only waits for a chance; the exchange orders */
        } while (atomic_load_explicit(&p->take_lock, memory_order_relaxed));
    }
}

static void take_unlock(struct pool *p)
{
    /* release: publishes our moves of head to the next holder */
    atomic_store_explicit(&p->take_lock, 0, memory_order_release);
}

/* Takes the oldest task, or NULL if the queue is empty. */
static struct serex__task *pool_take(struct pool *p)
{
    for (unsigned spins = 0;; spins++) {
        struct serex__task *t;
        bool busy = false;

        take_lock(p);
        t = queue_pop(p, &busy);
        take_unlock(p);
        if (t != NULL) {
            if (p->capacity != 0) /* relaxed: a count, orders nothing */
                atomic_fetch_sub_explicit(&p->queued, 1, memory_order_relaxed);
            return t;
        }
        if (!busy)
            return NULL;
        /* A producer is between its exchange and its link: wait for it. */
        if (spins % 64 == 63)
            serex__thread_yield();
        else
            serex__cpu_relax();
    }
}

/* --- waking and growing --- */

static void pool_wake_one(struct pool *p)
{
    serex__mutex_lock(&p->mu);
    /* relaxed: sleepers only changes under mu, which we hold */
    if (p->wakeups < atomic_load_explicit(&p->sleepers, memory_order_relaxed)) {
        p->wakeups++;
        serex__cond_signal(&p->work_cv);
    }
    serex__mutex_unlock(&p->mu);
}

static int worker_main(void *arg);

/* Starts a thread in a free slot. Under mu. */
static int pool_start_thread(struct pool *p)
{
    struct slot *s = NULL;
    int rc;

    for (unsigned i = 0; i < p->max && s == NULL; i++)
        if (p->slots[i].state != SLOT_LIVE)
            s = &p->slots[i];
    if (s == NULL)
        return SEREX_EFULL;
    if (s->state == SLOT_EXITED) {
        /* It marked itself exited as its last step under mu: this join
         * only waits for it to return. */
        serex__thread_join(s->thread);
        s->state = SLOT_FREE;
    }
    s->p = p;
    s->id = ++p->next_id;
    s->retired = false;
    rc = serex__thread_start(&s->thread, worker_main, s);
    if (rc == SEREX_OK) {
        s->state = SLOT_LIVE;
        /* relaxed: under mu; lock-free readers only use it as a hint */
        atomic_fetch_add_explicit(&p->live, 1, memory_order_relaxed);
    }
    return rc;
}

/* Every worker is busy: start one more, if the pool may grow. */
static void pool_grow(struct pool *p)
{
    /* relaxed: a hint; re-checked under mu */
    if (atomic_load_explicit(&p->live, memory_order_relaxed) >= p->max)
        return;
    serex__mutex_lock(&p->mu);
    /* relaxed: under mu, or a flag re-checked by the new thread */
    if (!(atomic_load_explicit(&p->ctl, memory_order_relaxed) & ST_SHUTDOWN) &&
        atomic_load_explicit(&p->live, memory_order_relaxed) < p->max)
        (void)pool_start_thread(p); /* on failure the live workers run it */
    serex__mutex_unlock(&p->mu);
}

/* After a push: make sure some worker will look at the queue. */
static void pool_signal_work(struct pool *p)
{
    /* seq_cst (both): the load half of the park handshake (see essay) */
    if (atomic_load_explicit(&p->spinning, memory_order_seq_cst) != 0)
        return;
    if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) != 0)
        pool_wake_one(p);
    else if (p->max > p->core)
        pool_grow(p);
}

/* --- the worker --- */

enum spin_result { SPIN_NOT_SPINNER, SPIN_FOUND, SPIN_GAVE_UP };

/* Polls the queue for SPIN_NS, if this worker can be the one spinner. */
static enum spin_result worker_spin(struct pool *p)
{
    uint32_t zero = 0;
    int64_t end;

    /* relaxed: the flag only elects one spinner; the handshake's ordering
     * comes from the seq_cst clear below or in worker_park */
    if (!atomic_compare_exchange_strong_explicit(&p->spinning, &zero, 1,
                                                 memory_order_relaxed,
                                                 memory_order_relaxed))
        return SPIN_NOT_SPINNER;
    end = serex__now_ns() + SPIN_NS;
    for (unsigned i = 1;; i++) {
        if (queue_nonempty(p)) {
            /* seq_cst: ordered before our next look at the queue, so a
             * producer that saw us spinning has its task seen (essay) */
            atomic_store_explicit(&p->spinning, 0, memory_order_seq_cst);
            return SPIN_FOUND;
        }
        serex__cpu_relax();
        /* relaxed: the flag is re-read with acquire in worker_idle */
        if (i % 64 == 0 &&
            ((atomic_load_explicit(&p->ctl, memory_order_relaxed) &
              ST_SHUTDOWN) ||
             serex__now_ns() >= end))
            return SPIN_GAVE_UP; /* still the spinner: worker_park clears */
    }
}

/* True when this worker may retire: extra, and idle for keep_alive. */
static bool worker_retire(struct pool *p, struct slot *s)
{
    /* relaxed: live changes under mu, which we hold */
    if (atomic_load_explicit(&p->live, memory_order_relaxed) <= p->core)
        return false;
    atomic_fetch_sub_explicit(&p->live, 1, memory_order_relaxed);
    s->retired = true;
    return true;
}

/*
 * Parks until a token, work or shutdown. Returns false if the worker must
 * exit (it retired). @spinner: we still hold the spinning flag.
 */
static bool worker_park(struct pool *p, struct slot *s, bool spinner)
{
    bool elastic = p->max > p->core, keep = true;
    int64_t deadline = elastic ? serex__deadline(p->keep_alive_ns) : INT64_MAX;
    uint32_t left;

    serex__mutex_lock(&p->mu);
    /* seq_cst: announce before the re-check below (see the essay) */
    atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
    if (spinner) /* seq_cst: after the announcement, before the re-check */
        atomic_store_explicit(&p->spinning, 0, memory_order_seq_cst);
    for (;;) {
        /* relaxed: shutdown sets the flag before taking mu to broadcast */
        if (queue_nonempty(p) ||
            (atomic_load_explicit(&p->ctl, memory_order_relaxed) & ST_SHUTDOWN))
            break;
        if (p->wakeups > 0) {
            p->wakeups--;
            break;
        }
        if (elastic && serex__now_ns() >= deadline && worker_retire(p, s)) {
            keep = false;
            break;
        }
        serex__cond_wait_until(&p->work_cv, &p->mu, deadline);
    }
    /* relaxed: sleepers changes only under mu, which we hold */
    left = atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed) - 1;
    if (p->wakeups > left) /* a token nobody will take */
        p->wakeups = left;
    serex__mutex_unlock(&p->mu);
    return keep;
}

/* The queue looked empty. Returns false when the worker must exit. */
static bool worker_idle(struct pool *p, struct slot *s)
{
    /* acquire: pairs with the release in pool_execute's count drop, so a
     * count of zero means every accepted push is visible to the check */
    uint64_t c = atomic_load_explicit(&p->ctl, memory_order_acquire);
    enum spin_result spin;

    if (c & ST_STOP)
        return false;
    if (c & ST_SHUTDOWN) {
        if (c < SUBMITTER && !queue_nonempty(p))
            return false;
        serex__thread_yield(); /* an execute is mid-push: wait for it */
        return true;
    }
    spin = worker_spin(p);
    if (spin == SPIN_FOUND)
        return true;
    return worker_park(p, s, spin == SPIN_GAVE_UP);
}

static void worker_exit(struct pool *p, struct slot *s)
{
    serex__mutex_lock(&p->mu);
    /* relaxed: live changes under mu, which we hold */
    if (!s->retired &&
        atomic_fetch_sub_explicit(&p->live, 1, memory_order_relaxed) == 1) {
        p->terminated = true;
        serex__cond_broadcast(&p->term_cv);
    }
    s->state = SLOT_EXITED; /* our last touch of the pool */
    serex__mutex_unlock(&p->mu);
}

static void worker_name_self(struct pool *p, unsigned id)
{
    char name[32];

    snprintf(name, sizeof name, "%s-%u", p->name, id);
    serex__thread_set_name(name);
}

static int worker_main(void *arg)
{
    struct slot *s = arg;
    struct pool *p = s->p;
    struct serex__frame frame;
    bool was_idle = false;

    worker_name_self(p, s->id);
    /* Everything on this thread is a task of the pool (for EDEADLK). */
    serex__frame_push(&frame, &p->base);
    for (;;) {
        struct serex__task *t = pool_take(p);
        serex_fn fn;
        void *arg_;

        if (t == NULL) {
            if (!worker_idle(p, s))
                break;
            was_idle = true;
            continue;
        }
        if (was_idle) { /* more work behind ours: fan the burst out */
            was_idle = false;
            if (queue_nonempty(p))
                pool_signal_work(p);
        }
        fn = t->fn;
        arg_ = t->arg;
        serex__task_free(t);
        fn(arg_);
    }
    serex__frame_pop(&frame);
    worker_exit(p, s);
    return 0;
}

/* --- the executor --- */

static int pool_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct pool *p = pool_of(ex);
    struct serex__task *t = serex__task_new(fn, arg);
    uint64_t c;
    int rc = SEREX_OK;

    if (serex__unlikely(t == NULL))
        return SEREX_ENOMEM;
    /* relaxed: the flags and this count share one modification order, so
     * either shutdown_now's STOP is seen here, or it waits for our drop */
    c = atomic_fetch_add_explicit(&p->ctl, SUBMITTER, memory_order_relaxed);
    if (serex__unlikely(c & ST_SHUTDOWN))
        rc = SEREX_EREJECTED;
    else if (p->capacity != 0 &&
             /* relaxed: a count, orders nothing */
             atomic_fetch_add_explicit(&p->queued, 1, memory_order_relaxed) >=
                 p->capacity) {
        atomic_fetch_sub_explicit(&p->queued, 1, memory_order_relaxed);
        rc = SEREX_EFULL;
    }
    if (serex__likely(rc == SEREX_OK))
        queue_push(p, t);
    /* release: our push happens-before whoever sees the count at zero
     * (shutdown_now, an exiting worker), with acquire */
    atomic_fetch_sub_explicit(&p->ctl, SUBMITTER, memory_order_release);
    if (serex__unlikely(rc != SEREX_OK)) {
        serex__task_free(t);
        return rc;
    }
    pool_signal_work(p);
    return SEREX_OK;
}

static void pool_wake_all(struct pool *p)
{
    serex__mutex_lock(&p->mu);
    serex__cond_broadcast(&p->work_cv);
    serex__mutex_unlock(&p->mu);
}

static void pool_shutdown(serex_executor *ex)
{
    struct pool *p = pool_of(ex);

    /* release: nothing to publish but the flag; parked workers read it
     * under mu, which we take next */
    atomic_fetch_or_explicit(&p->ctl, ST_SHUTDOWN, memory_order_release);
    pool_wake_all(p);
}

/* Unlinks every queued task, in order, onto a private list. */
static struct serex__task *pool_drain(struct pool *p, size_t *n)
{
    struct serex__task *first = NULL, *last = NULL, *t;
    bool busy = false;

    take_lock(p);
    while ((t = queue_pop(p, &busy)) != NULL) {
        /* relaxed: the node is ours now; the list is private */
        atomic_store_explicit(&t->next, NULL, memory_order_relaxed);
        if (last != NULL)
            atomic_store_explicit(&last->next, t, memory_order_relaxed);
        else
            first = t;
        last = t;
        ++*n;
    }
    take_unlock(p);
    SEREX_ASSERT(!busy); /* no execute is in flight any more */
    return first;
}

static size_t pool_shutdown_now(serex_executor *ex, serex_pending_fn on_pending,
                                void *ctx)
{
    struct pool *p = pool_of(ex);
    struct serex__task *t;
    size_t n = 0;

    /* release: only the flags; the drop loop below does the ordering */
    atomic_fetch_or_explicit(&p->ctl, ST_SHUTDOWN | ST_STOP,
                             memory_order_release);
    /* acquire: pairs with the release drop in pool_execute; once the count
     * is zero every accepted push is visible and no more can come */
    while (atomic_load_explicit(&p->ctl, memory_order_acquire) >= SUBMITTER)
        serex__thread_yield();
    t = pool_drain(p, &n);
    if (p->capacity != 0) /* relaxed: a count */
        atomic_fetch_sub_explicit(&p->queued, n, memory_order_relaxed);
    pool_wake_all(p);
    /* Outside every lock: on_pending may call back into the pool. */
    while (t != NULL) {
        struct serex__task *next =
            atomic_load_explicit(&t->next, memory_order_relaxed);
        serex_fn fn = t->fn;
        void *arg = t->arg;

        serex__task_free(t);
        serex__hand_back(fn, arg, on_pending, ctx);
        t = next;
    }
    return n;
}

static int pool_await(serex_executor *ex, int64_t timeout_ns)
{
    struct pool *p = pool_of(ex);
    int64_t deadline = serex__deadline(timeout_ns);
    int rc = SEREX_OK;

    serex__mutex_lock(&p->mu);
    while (!p->terminated) {
        if (timeout_ns == 0 || serex__now_ns() >= deadline) {
            rc = SEREX_ETIMEDOUT;
            break;
        }
        serex__cond_wait_until(&p->term_cv, &p->mu, deadline);
    }
    serex__mutex_unlock(&p->mu);
    return rc;
}

/* Joins every thread ever started and frees the pool. */
static void pool_free(struct pool *p)
{
    for (unsigned i = 0; i < p->max; i++)
        if (p->slots[i].state != SLOT_FREE)
            serex__thread_join(p->slots[i].thread);
    serex__cond_destroy(&p->term_cv);
    serex__cond_destroy(&p->work_cv);
    serex__mutex_destroy(&p->mu);
    serex__free(p->slots);
    serex__free(p);
}

static void pool_destroy(serex_executor *ex)
{
    struct pool *p = pool_of(ex);

    pool_await(ex, SEREX_FOREVER); /* serex_destroy shut it down */
    pool_free(p);
}

static const serex_executor_ops pool_ops = {
    .execute = pool_execute,
    .shutdown = pool_shutdown,
    .shutdown_now = pool_shutdown_now,
    .await_termination = pool_await,
    .destroy = pool_destroy,
};

/* --- creation --- */

/* Resolves defaults; SEREX_EINVAL for contradictory values. */
static int pool_config(const serex_pool_config *cfg, struct pool *p)
{
    serex_pool_config c = {0};

    if (cfg != NULL)
        c = *cfg;
    if (c.keep_alive_ns < 0 || (c.max_threads != 0 && c.threads != 0 &&
                                c.max_threads < c.threads))
        return SEREX_EINVAL;
    p->core = c.threads;
    if (p->core == 0) { /* online CPUs, but never above an explicit max */
        p->core = serex__cpu_count();
        if (c.max_threads != 0 && c.max_threads < p->core)
            p->core = c.max_threads;
    }
    p->max = c.max_threads != 0 ? c.max_threads : p->core;
    p->keep_alive_ns = c.keep_alive_ns != 0 ? c.keep_alive_ns
                                            : DEFAULT_KEEP_ALIVE_NS;
    p->capacity = c.queue_capacity;
    snprintf(p->name, sizeof p->name, "%s",
             c.name != NULL && c.name[0] != '\0' ? c.name : "serex");
    return SEREX_OK;
}

static int pool_init_sync(struct pool *p)
{
    if (serex__mutex_init(&p->mu) != SEREX_OK)
        return SEREX_ENOMEM;
    if (serex__cond_init(&p->work_cv) != SEREX_OK)
        goto fail_mu;
    if (serex__cond_init(&p->term_cv) != SEREX_OK)
        goto fail_work;
    return SEREX_OK;
fail_work:
    serex__cond_destroy(&p->work_cv);
fail_mu:
    serex__mutex_destroy(&p->mu);
    return SEREX_ENOMEM;
}

/* Starts the core threads; on failure stops and joins those started. */
static int pool_start_core(struct pool *p)
{
    int rc = SEREX_OK;

    serex__mutex_lock(&p->mu);
    for (unsigned i = 0; i < p->core && rc == SEREX_OK; i++)
        rc = pool_start_thread(p);
    serex__mutex_unlock(&p->mu);
    if (rc == SEREX_OK)
        return SEREX_OK;
    atomic_fetch_or_explicit(&p->ctl, ST_SHUTDOWN | ST_STOP,
                             memory_order_release);
    pool_wake_all(p);
    return SEREX_ENOMEM;
}

int serex_pool_create(const serex_pool_config *cfg, serex_executor **out)
{
    struct pool *p;
    int rc;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    p = serex__alloc_aligned(SEREX__CACHELINE, sizeof *p);
    if (p == NULL)
        return SEREX_ENOMEM;
    memset(p, 0, sizeof *p);
    rc = pool_config(cfg, p);
    if (rc != SEREX_OK) {
        serex__free(p);
        return rc;
    }
    p->slots = serex__calloc(p->max, sizeof *p->slots);
    if (p->slots == NULL || pool_init_sync(p) != SEREX_OK) {
        serex__free(p->slots);
        serex__free(p);
        return SEREX_ENOMEM;
    }
    p->base.ops = &pool_ops;
    atomic_init(&p->stub.next, NULL);
    atomic_init(&p->tail, &p->stub);
    p->head = &p->stub;
    rc = pool_start_core(p);
    if (rc != SEREX_OK) {
        pool_free(p); /* joins the threads that did start */
        return rc;
    }
    *out = &p->base;
    return SEREX_OK;
}
