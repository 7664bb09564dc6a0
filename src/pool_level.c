/* SPDX-License-Identifier: MIT */
/*
 * pool_level.c - a pool's priority levels HIGH and LOW: each level's ring,
 * the order in which workers take from the levels, shutdown_now's claim
 * and hand-back of a level, and the faces (serex_pool_executor_at) through
 * which tasks are submitted at a level.
 *
 * --- Priority levels ---
 * The shared queue (pool_inject.c), with the workers' run queues
 * (pool_local.c), is level NORMAL, the pool's own executor. HIGH and LOW
 * each have a face (an executor of their own, serex_pool_executor_at) and
 * a plain ring under one spinlock for both ends (struct level): they are
 * not the hot path. A level's ring is allocated at its first task
 * (LEVEL_RING_MIN slots), doubled when full and freed when a grown one
 * empties (promise 9). A face's execute follows the ring's rules: it reads
 * the state flags under the level's lock, publishes its tail seq_cst (the
 * park handshake) and calls serex__pool_signal_work, as pool_execute does;
 * a bounded level signals the places it frees, as the ring does.
 * Workers look at the levels only once `levels_on` is set, by the first
 * serex_pool_executor_at of HIGH or LOW; from then on a worker takes from
 * HIGH, else NORMAL (its queues, a steal, the shards), else LOW: strict
 * priority, checked before every task, batched ones included.
 * No task waits for a stale `levels_on`. A face comes only from
 * serex_pool_executor_at, after the flag's seq_cst store (or an acquire
 * load that saw it), so every push through it follows the store in the
 * seq_cst total order. The idle re-checks (the spinner's poll,
 * serex__pool_thread_park's) read the flag seq_cst: when the handshake
 * needs the worker to see a push (the producer's load of `sleepers` or
 * `spinning` came first), the re-check comes after that load, hence after
 * the flag's store: it sees the flag, then the level's tail. The busy path
 * reads the flag relaxed: a stale 0 there only lets a NORMAL task start
 * before a HIGH one that raced with it, an order that two racing
 * submissions were never promised.
 * Shutdown: whoever must not miss a push to a level takes its lock after
 * reading the flags (pool_drained in pool_idle.c, shutdown_now in pool.c),
 * as with `put_lock`. shutdown_now hands back HIGH, then NORMAL (promise
 * 2b's order), then LOW. queue_capacity bounds each level's waiting tasks
 * on its own: one count across levels would put a shared counter on the
 * ring's path.
 */
#include "alloc_internal.h"
#include "common_internal.h"
#include "exec_class_internal.h"
#include "executor_internal.h"
#include "spinlock_internal.h"

#include "pool_types_internal.h"

/* --- priority levels: HIGH and LOW (see the essay) --- */

static struct level *level_of(serex_executor *ex)
{
    return serex__container_of(ex, struct level, face);
}

/* Makes the level's first ring, or doubles a full one, with the spare
 * (ring_spare). Under its lock. */
static int level_grow(struct level *lv, uint64_t h, uint64_t t,
                      struct ring_spare *sp)
{
    uint64_t slots = lv->ring == NULL ? LEVEL_RING_MIN : (lv->mask + 1) * 2;
    struct serex__task_rec *bigger;

    if (lv->ring != NULL && slots <= lv->mask + 1)
        return SEREX_ENOMEM; /* no bigger ring can be counted */
    if (!serex__pool_spare_take(sp, slots, &bigger))
        return RING_NEED_ROOM;
    for (uint64_t i = h; i != t; i++) /* none when there was no ring */
        bigger[i & (slots - 1)] = lv->ring[i & lv->mask];
    sp->old = lv->ring;
    lv->ring = bigger;
    lv->mask = slots - 1;
    return SEREX_OK;
}

/* Appends a task. Under the level's lock. */
int serex__pool_level_push(struct pool *p, struct level *lv, serex_fn fn,
                           void *arg, uint64_t submit, struct ring_spare *sp)
{
    /* seq_cst: the look a waiter for room makes after it counts itself
     * (serex_execute_wait's handshake, executor.c); else the lock orders */
    uint64_t h = atomic_load_explicit(&lv->head, memory_order_seq_cst);
    /* relaxed: written under the lock, which we hold */
    uint64_t t = atomic_load_explicit(&lv->tail, memory_order_relaxed);

    if (p->capacity != 0 && t - h >= p->capacity) {
        serex__room_full(); /* a serex_execute_wait may park: we signal */
        return SEREX_EFULL;
    }
    if (lv->ring == NULL || t - h > lv->mask) {
        int rc = level_grow(lv, h, t, sp);

        if (rc != SEREX_OK)
            return rc;
    }
    lv->ring[t & lv->mask] = (struct serex__task_rec){fn, arg, 0, submit};
    /* seq_cst: the publishing half of the park handshake, as in
     * serex__pool_ring_push */
    atomic_store_explicit(&lv->tail, t + 1, memory_order_seq_cst);
    return SEREX_OK;
}

/*
 * Takes the level's oldest task into *out, and says in *more whether
 * others wait. A grown ring that empties is freed (the next task makes a
 * small one), so memory goes back after a burst.
 */
bool serex__pool_level_pop(struct pool *p, struct level *lv,
                           struct serex__task_rec *out, bool *more)
{
    struct serex__task_rec *drop = NULL;
    uint64_t h, t;

    /* relaxed (both): a look without the lock; the idle re-checks order
     * (serex__pool_levels_nonempty) */
    if (atomic_load_explicit(&lv->head, memory_order_relaxed) ==
        atomic_load_explicit(&lv->tail, memory_order_relaxed))
        return false;
    serex__spin_lock(&lv->lock);
    /* relaxed (both): written under the lock, which we hold */
    h = atomic_load_explicit(&lv->head, memory_order_relaxed);
    t = atomic_load_explicit(&lv->tail, memory_order_relaxed);
    if (h != t) {
        *out = lv->ring[h & lv->mask];
        /* seq_cst: a freed place, which a waiter for room must see before
         * we look for waiters (serex__room_made, executor.c); the lock
         * orders it for everyone else */
        atomic_store_explicit(&lv->head, h + 1, memory_order_seq_cst);
        *more = h + 1 != t;
        if (h + 1 == t && lv->mask + 1 > LEVEL_RING_MIN) {
            drop = lv->ring;
            lv->ring = NULL;
            lv->mask = 0;
        }
    }
    serex__spin_unlock(&lv->lock);
    serex__free(drop);
    if (h != t && p->capacity != 0)
        serex__room_made(); /* a place freed: wake serex_execute_wait */
    return h != t;
}

bool serex__pool_levels_nonempty(struct pool *p)
{
    for (unsigned i = 0; i < LEVELS_EXTRA; i++)
        /* seq_cst (both): the re-check half of the park handshake */
        if (atomic_load_explicit(&p->lv[i].tail, memory_order_seq_cst) !=
            atomic_load_explicit(&p->lv[i].head, memory_order_seq_cst))
            return true;
    return false;
}

/* As pool_drained for the ring: empty, and no push can come. */
bool serex__pool_levels_drained(struct pool *p)
{
    bool empty = true;

    for (unsigned i = 0; i < LEVELS_EXTRA; i++) {
        struct level *lv = &p->lv[i];

        serex__spin_lock(&lv->lock);
        /* relaxed (both): under the lock */
        empty = empty &&
                atomic_load_explicit(&lv->head, memory_order_relaxed) ==
                    atomic_load_explicit(&lv->tail, memory_order_relaxed);
        serex__spin_unlock(&lv->lock);
    }
    return empty;
}

/* Takes every task of a level; STOP is set, so none can come. */
void serex__pool_level_claim(struct level *lv, struct level_claim *c)
{
    serex__spin_lock(&lv->lock);
    c->ring = lv->ring;
    c->mask = lv->mask;
    /* relaxed (all): under the lock */
    c->h = atomic_load_explicit(&lv->head, memory_order_relaxed);
    c->t = atomic_load_explicit(&lv->tail, memory_order_relaxed);
    atomic_store_explicit(&lv->head, c->t, memory_order_relaxed);
    lv->ring = NULL;
    lv->mask = 0;
    serex__spin_unlock(&lv->lock);
}

/* Hands back what serex__pool_level_claim took, in order, and frees it. */
size_t serex__pool_level_hand_back(struct level_claim *c,
                                   serex_pending_fn on_pending, void *ctx)
{
    for (uint64_t i = c->h; i != c->t; i++)
        serex__hand_back(c->ring[i & c->mask].fn, c->ring[i & c->mask].arg,
                         on_pending, ctx);
    serex__free(c->ring);
    return (size_t)(c->t - c->h);
}

/* --- the faces of HIGH and LOW --- */

static int pool_face_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    return serex__pool_push_level(level_of(ex), fn, arg);
}

/* The rest of a face's life is its pool's: the pool's own ops (its class,
 * pool.c) with the pool. */
static void pool_face_shutdown(serex_executor *ex)
{
    serex__pool_class.ops.shutdown(&level_of(ex)->p->base);
}

static size_t pool_face_shutdown_now(serex_executor *ex,
                                     serex_pending_fn on_pending, void *ctx)
{
    return serex__pool_class.ops.shutdown_now(&level_of(ex)->p->base,
                                              on_pending, ctx);
}

static int pool_face_await(serex_executor *ex, int64_t timeout_ns)
{
    return serex__pool_class.ops.await_termination(&level_of(ex)->p->base,
                                                   timeout_ns);
}

static void pool_face_stats(serex_executor *ex, serex_stats *out)
{
    serex__pool_class.stats(&level_of(ex)->p->base, out);
}

/* A face's metrics are its pool's (metrics.h). */
static int pool_face_metrics_enable(serex_executor *ex,
                                    const serex_metrics_config *cfg)
{
    return serex__pool_metrics_enable(&level_of(ex)->p->base, cfg);
}

static void pool_face_metrics(serex_executor *ex, serex_metrics *out)
{
    serex__pool_metrics(&level_of(ex)->p->base, out);
}

/* Waiting for a face is waiting for its pool (SEREX_EDEADLK, promise 7). */
static bool pool_face_waits_on(serex_executor *ex,
                               bool (*blocks)(serex_executor *))
{
    return blocks(&level_of(ex)->p->base);
}

static void pool_face_destroy(serex_executor *ex)
{
    (void)ex;
    serex__misuse("serex_destroy", "a pool's priority face "
                                   "(serex_pool_executor_at) goes with its "
                                   "pool: destroy the pool");
}

static const struct serex__exec_class pool_face_class = {
    SEREX__CLASS_OPS(pool_face_execute, pool_face_shutdown,
                     pool_face_shutdown_now, pool_face_await),
    "pool",
    pool_face_stats,
    pool_face_waits_on,
    pool_face_destroy,
    pool_face_metrics_enable,
    pool_face_metrics,
    0,
    {NULL, NULL},
    NULL, /* not listed: its pool is */
};

/* At create: each level's face, bound to @p, answers as a face. */
void serex__pool_levels_init(struct pool *p)
{
    for (unsigned i = 0; i < LEVELS_EXTRA; i++) {
        p->lv[i].face.ops = &pool_face_class.ops;
        p->lv[i].p = p;
    }
}

serex_executor *serex_pool_executor_at(serex_executor *pool, unsigned level)
{
    const struct serex__exec_class *cls;
    struct pool *p;

    if (pool == NULL || level >= SEREX_POOL_PRIORITIES)
        return NULL;
    cls = serex__class_of(pool);
    if (cls == &pool_face_class)
        p = level_of(pool)->p;
    else if (cls == &serex__pool_class)
        p = serex__container_of(pool, struct pool, base);
    else
        return NULL;
    if (level == SEREX_POOL_PRIORITY_NORMAL)
        return &p->base;
    /* acquire: a flag set by another thread is then ordered before our
     * pushes; seq_cst store: before every push through the face (see the
     * essay). Stored once: a call per task must not write a shared line. */
    if (!atomic_load_explicit(&p->levels_on, memory_order_acquire))
        atomic_store_explicit(&p->levels_on, 1, memory_order_seq_cst);
    return &p->lv[level == SEREX_POOL_PRIORITY_HIGH ? LV_HIGH : LV_LOW].face;
}
