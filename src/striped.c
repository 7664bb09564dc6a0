/* SPDX-License-Identifier: MIT */
/*
 * striped.c - per-key order on a shared executor, with lanes freed as soon
 * as they are idle.
 *
 * --- Lanes ---
 * A lane is what serial.c is, for one key: a Vyukov MPSC queue, a `wip`
 * count and a drain submitted to the target on the 0 -> 1 transition of
 * `wip` (see serial.c for why that gives one drain at a time, in order,
 * each task happening-before the next). Lanes live in a hash map split
 * into SHARDS shards, each a spinlock and a chained table; the key's hash
 * picks the shard, so producers of different keys rarely meet, and no
 * single lock is taken by every submission. Each key has its own lane:
 * keys never share one (no hash-collision serialisation).
 *
 * --- The life cycle, and the free-while-submitting race ---
 * A lane is created by the first submission for its key and freed by its
 * drain when `wip` returns to 0. The race is a producer that found the
 * lane while its drain is deciding to free it. Both decide under the
 * shard lock: the producer finds (or makes) the lane, pushes its task and
 * increments `wip` holding the lock; the drain subtracts what it ran
 * holding the lock, and unlinks and frees the lane only if that leaves 0.
 * So a producer either comes first (the drain sees its increment and goes
 * on) or after (the lane is gone from the map and it makes a new one,
 * whose first task submits a new drain). The lock is held for a lookup
 * and a few stores, never while a task runs.
 *
 * --- Shutdown, termination, and who frees what ---
 * `ctl` holds the SHUT, STOP and BROKEN flags. A keyed execute reads them
 * under its shard lock, in the critical section where it pushes and
 * counts its lane busy; shutdown and shutdown_now set them (release)
 * before they, or an awaiter that saw them (acquire), take any shard lock.
 * So each submission is either seen by them or sees the flag: no
 * submission is ever "in flight" unseen, and the submit path touches no
 * line shared by all shards. (Keyless submissions, rare, still count
 * themselves in flight in `ctl`.) shutdown_now takes every lane's queue
 * under its shard lock and pop lock (each task has one taker, and a drain
 * cannot start a task behind one taken back), and subtracts what it took
 * from the lane's `wip`.
 * The striped is terminated when shut down, with no busy lane (one whose
 * `wip` is above 0), no keyless task out and none in flight. Busy
 * lanes are counted per shard, under the shard lock that the producer
 * starting a lane and the drain ending it hold anyway, so a lane's life
 * costs no atomic operation on a line shared by every shard. An awaiter
 * counts itself in `life` and sums the shards; a drain that ends a lane
 * looks for waiters after its count and, if any, flips a bit of `life`
 * and wakes them (seq_cst on both sides: one sees the other).
 * A drain still on its way out, or still queued on a target nobody runs,
 * holds a reference, counted in its lane's shard (keyless tasks count in
 * shard 0), so memory outlives termination as long as needed: destroy
 * registers every shard that holds references in `remaining`, and the
 * shard that drops its last one afterwards takes it out; whoever takes
 * `remaining` to 0 frees the striped.
 *
 * --- Who frees a lane (each case decided under the lane's shard lock) ---
 *   the lane's state when its work ends           who unlinks    who frees
 *   drain running, its decrement leaves wip 0     the drain      the drain
 *     (lane_settle)
 *   target refused the first drain, ours is the   the producer   the producer
 *     lane's only task (lane_refused: undone)
 *   target refused the first drain, more tasks    shutdown_now   shutdown_now
 *     queued (broken): shutdown_now or destroy                   (the dead
 *     empties it (shard_take_all)                                list)
 *   drain queued on the target, shutdown_now      shutdown_now   the drain,
 *     empties the lane first (`unlinked`)         (counted)      when it runs
 *                                                                (lane_settle)
 *   drain queued, then its target takes it back   shutdown_now   the drain's
 *     or drops it (lane_drain_dropped) after                     dropped hook
 *     shutdown_now emptied the lane (`unlinked`)
 *   drain dropped before the lane was emptied     shutdown_now   shutdown_now
 *     (lane_drain_dropped marks it broken)        or destroy     (dead list)
 * Exactly one row applies to a lane: `unlinked` and `broken` are set only
 * under the shard lock, by the one party that still holds the lane, and
 * each row's freer is the last to touch it.
 *
 * --- Capacities: the waiting counts ---
 * queue_capacity caps the tasks waiting (accepted, not started) in all
 * lanes together, counted in the striped's `waiting`; lane_capacity caps
 * those of one lane, counted in the lane's `waiting`. Each count is kept
 * only when its cap is set. A place is taken in striped_push, under the
 * shard lock, after the flag check and before the push: first the lane's
 * (its count is read and raised under the shard lock, which every
 * producer of the key holds, so producers never race on it; only the
 * drain's decrements do, and an RMW never loses one), then the striped's
 * (a CAS from w to w + 1 with w < capacity, as serial.c's count: racing
 * producers of all shards meet there, and the modification order decides
 * who wins the last place; the loser says SEREX_EFULL). A new key's lane
 * is made only once both places are taken, so a refusal leaves no lane
 * behind; if making it fails, the striped's place is given back. The
 * drain frees a task's places as it pops it, before it runs; shutdown_now
 * frees those of the tasks it takes back, lane_refused that of the task it
 * undoes. Neither count ever passes its cap (a place is taken only below
 * the cap) or falls below the tasks queued under it (taken before the push,
 * freed after the pop): the caps are exact. As in serial.c, every look for
 * room is a seq_cst load (or CAS) and every free a seq_cst RMW followed by
 * serex__room_made, so a waiter in serex_execute_wait either sees the
 * place or is woken; a refusal at a cap calls serex__room_full; shutdown,
 * shutdown_now and BROKEN call serex__room_wake. A striped with no cap
 * touches no count: it tests `bounded` and `lane_capacity` (both false
 * then) in each push, and `bounded` once per drain round.
 */
#include <string.h> /* memset; strlen, memcpy: the name */

#include "alloc_internal.h"
#include "await_internal.h"
#include "common_internal.h"
#include "exec_class_internal.h"
#include "executor_internal.h"
#include "future_internal.h"
#include "mpsc_internal.h"
#include "op_internal.h"
#include "park_internal.h"
#include "spinlock_internal.h"
#include "stats_internal.h"
#include "thread_internal.h"

#define DEFAULT_BATCH 64u
#define SHARDS 256u           /* power of two */
#define BUCKETS_MIN 16u       /* per shard; power of two */
#define BUCKETS_SHRINK 256u   /* tables this small never shrink */

#define CTL_SHUT 1u
#define CTL_STOP 2u
#define CTL_BROKEN 4u
#define CTL_INFLIGHT 8u

/* `life`: keyless tasks out, and what awaiters park on (see the essay). */
#define LIFE_ACTIVE UINT64_C(1)          /* bits 0-31: keyless tasks out */
#define LIFE_GEN (UINT64_C(1) << 54)     /* bits 54-55: flipped to wake */
#define LIFE_WAITER_SHIFT 56
#define LIFE_WAITER (UINT64_C(1) << LIFE_WAITER_SHIFT) /* bits 56-62: await */
#define LIFE_ACTIVES(x) ((x) & (LIFE_GEN - 1))
#define LIFE_WAITERS(x) ((x) >> LIFE_WAITER_SHIFT)
#define LIFE_WAITERS_MAX 127u

struct serex_striped;

/*
 * Two cache lines: what producers write (the queue's tail, `wip`) and read
 * (the chain, the key) apart from what the drain writes (the queue's head
 * and stub, the pop lock), or every push would bounce the drain's line.
 */
struct lane {
    /* Producers' line. */
    _Alignas(SEREX__CACHELINE) struct serex__task *_Atomic tail;
    _Atomic uint64_t wip;   /* pushed and not yet accounted for */
    _Atomic uint64_t waiting; /* lane_capacity only: places taken */
    struct serex__op drain; /* what the target runs: the lane's drain */
    struct lane *next;      /* the shard's chain, under its lock */
    uint64_t key;
    struct serex_striped *s;
    bool broken;            /* the target refused its drain; under shard lock */
    bool unlinked;          /* taken out of the map by shutdown_now, drain
                               pending; under shard lock */

    /* The drain's line. */
    _Alignas(SEREX__CACHELINE) serex__spinlock pop_lock;
    struct serex__task *head;
    struct serex__task stub;
};

_Static_assert(sizeof(struct lane) <= 128, "a lane fits cache class 128");

static struct serex__mpsc_ends lane_queue(struct lane *l)
{
    return (struct serex__mpsc_ends){&l->tail, &l->head, &l->stub};
}

struct stripe_shard {
    _Alignas(SEREX__CACHELINE) serex__spinlock lock;
    _Atomic size_t count;   /* lanes in the table; written under lock */
    _Atomic size_t busy;    /* lanes with wip > 0; written under lock */
    size_t refs;            /* drains (and keyless tasks) out; under lock */
    bool counted;           /* destroy counts us in `remaining`; under lock */
    size_t mask;            /* buckets - 1 */
    struct lane **buckets;
    uint64_t submitted, completed, taken; /* keyed tasks; under lock */
};

struct serex_striped {
    serex_executor face;    /* the life-cycle face; keyless execute */
    serex_executor *target;
    unsigned batch;

    /* The capacities (read-only; see the essay). */
    bool bounded;         /* either set: the drain frees places */
    size_t capacity;      /* queue_capacity: all lanes; 0: no cap */
    size_t lane_capacity; /* per lane; 0: no cap */

    _Alignas(SEREX__CACHELINE) _Atomic uint64_t ctl; /* CTL_* | in flight */
    _Alignas(SEREX__CACHELINE) _Atomic uint64_t life; /* see the essay */
    _Atomic uint64_t remaining; /* after destroy: shards with refs, + 1 */
    _Atomic uint64_t rejected;  /* execute calls refused */
    /* queue_capacity only: places taken in all lanes (see the essay);
     * every producer and drain writes it: a line of its own */
    _Alignas(SEREX__CACHELINE) _Atomic uint64_t waiting;
    struct stripe_shard shards[SHARDS];
    char name[]; /* serex_stats' name, copied at create */
};

/* A keyless task, counted in `life` while it is the target's. */
struct keyless {
    struct serex__op op; /* queued on the target as this op */
    serex_fn fn;
    void *arg;
    struct serex_striped *s;
};

_Static_assert(sizeof(struct keyless) <= 32, "a keyless task fits class 32");

static const struct serex__op_class lane_drain_class, keyless_class;

static struct serex_striped *striped_of(serex_executor *ex)
{
    return serex__container_of(ex, struct serex_striped, face);
}

/* --- the map --- */

static uint64_t key_hash(uint64_t key)
{
    /* splitmix64's finaliser: every key bit moves every hash bit */
    key ^= key >> 30;
    key *= UINT64_C(0xbf58476d1ce4e5b9);
    key ^= key >> 27;
    key *= UINT64_C(0x94d049bb133111eb);
    return key ^ (key >> 31);
}

static struct stripe_shard *lane_shard(struct serex_striped *s, uint64_t hash)
{
    return &s->shards[hash >> 56 & (SHARDS - 1)];
}

static size_t sh_count(struct stripe_shard *sh)
{
    /* relaxed: callers hold the shard lock, which orders every change */
    return atomic_load_explicit(&sh->count, memory_order_relaxed);
}

static struct lane **shard_bucket(struct stripe_shard *sh, uint64_t hash)
{
    return &sh->buckets[hash & sh->mask];
}

/* Rehashes into @buckets (a power of two @n). Under the shard lock. */
static void shard_rehash(struct stripe_shard *sh, struct lane **buckets,
                         size_t n)
{
    for (size_t i = 0; i <= sh->mask; i++) {
        struct lane *l = sh->buckets[i], *next;

        for (; l != NULL; l = next) {
            next = l->next;
            l->next = buckets[key_hash(l->key) & (n - 1)];
            buckets[key_hash(l->key) & (n - 1)] = l;
        }
    }
    serex__free(sh->buckets);
    sh->buckets = buckets;
    sh->mask = n - 1;
}

/*
 * Grows at a load of 2 and shrinks at 1/16 but never below BUCKETS_SHRINK:
 * lanes come and go all the time, and a table that resized on every small
 * swing would call the allocator per task. Big tables still shrink, so
 * memory comes back after a burst. A failed allocation only leaves the
 * chains longer. Under the shard lock.
 */
static void shard_resize(struct stripe_shard *sh)
{
    size_t n = sh->mask + 1, want = n;
    struct lane **b;

    if (sh_count(sh) > 2 * n)
        want = n * 2;
    else if (n > BUCKETS_SHRINK && sh_count(sh) < n / 16)
        want = n / 2;
    if (want == n || (b = serex__calloc(want, sizeof *b)) == NULL)
        return;
    shard_rehash(sh, b, want);
}

static struct lane *shard_find(struct stripe_shard *sh, uint64_t hash,
                               uint64_t key)
{
    struct lane *l = *shard_bucket(sh, hash);

    while (l != NULL && l->key != key)
        l = l->next;
    return l;
}

static struct lane *lane_new(struct serex_striped *s, struct stripe_shard *sh,
                             uint64_t hash, uint64_t key)
{
    struct lane *l = serex__cache_alloc(SEREX__CLASS_128);
    struct lane **b;

    if (l == NULL)
        return NULL;
    memset(l, 0, sizeof *l);
    serex__mpsc_init_ends(lane_queue(l));
    l->drain.cls = &lane_drain_class;
    l->key = key;
    l->s = s;
    b = shard_bucket(sh, hash);
    l->next = *b;
    *b = l;
    /* relaxed (every count change): under the shard lock; read relaxed
     * by serex_striped_lanes, a snapshot */
    atomic_store_explicit(&sh->count, sh_count(sh) + 1, memory_order_relaxed);
    shard_resize(sh);
    return l;
}

static void shard_unlink(struct stripe_shard *sh, struct lane *l)
{
    struct lane **p = shard_bucket(sh, key_hash(l->key));

    while (*p != l)
        p = &(*p)->next;
    *p = l->next;
    /* relaxed: as in lane_new */
    atomic_store_explicit(&sh->count, sh_count(sh) - 1, memory_order_relaxed);
    shard_resize(sh);
}

static void lane_free(struct lane *l)
{
    serex__cache_free(SEREX__CLASS_128, l);
}

/* --- life and references --- */

static void striped_free(struct serex_striped *s);

/* Wakes awaiters, if any (see the essay): flips a bit they park on. */
static void striped_notify(struct serex_striped *s)
{
    /* after our change of a busy count (seq_cst) */
    serex__await_notify(&s->life, LIFE_GEN, LIFE_WAITER_SHIFT);
}

/* Changes @sh's busy count by @delta (+1 or -1). Under its lock. */
static void shard_busy(struct stripe_shard *sh, int delta)
{
    /* seq_cst: read lock-free by awaiters (see striped_notify) */
    atomic_store_explicit(&sh->busy,
                          atomic_load_explicit(&sh->busy,
                                               memory_order_relaxed) +
                              (size_t)(ptrdiff_t)delta,
                          memory_order_seq_cst);
}

/*
 * Drops a reference counted in @sh. Under its lock. True if the caller
 * must free the striped once it has unlocked (it was the last holder).
 */
static bool shard_unref(struct serex_striped *s, struct stripe_shard *sh)
{
    if (--sh->refs != 0 || !sh->counted)
        return false;
    sh->counted = false;
    /* acq_rel: every holder's use happens-before the free */
    return atomic_fetch_sub_explicit(&s->remaining, 1, memory_order_acq_rel) ==
           1;
}

/* One keyless task more out (or, @delta -1, done): counted for await. */
static void life_keyless(struct serex_striped *s, int delta)
{
    uint64_t old;

    if (delta > 0) {
        /* relaxed: ordered before the task can run (the target orders it) */
        atomic_fetch_add_explicit(&s->life, LIFE_ACTIVE, memory_order_relaxed);
        return;
    }
    /* seq_cst: as striped_notify; release: the task's writes before an
     * awaiter that sees it done */
    old = atomic_fetch_sub_explicit(&s->life, LIFE_ACTIVE,
                                    memory_order_seq_cst);
    if (LIFE_WAITERS(old) != 0)
        serex__await_bump(&s->life, LIFE_GEN);
}

/* A keyless task's reference, in shard 0. */
static void keyless_ref(struct serex_striped *s)
{
    serex__spin_lock(&s->shards[0].lock);
    s->shards[0].refs++;
    serex__spin_unlock(&s->shards[0].lock);
}

static void keyless_unref(struct serex_striped *s)
{
    bool last;

    serex__spin_lock(&s->shards[0].lock);
    last = shard_unref(s, &s->shards[0]);
    serex__spin_unlock(&s->shards[0].lock);
    if (last)
        striped_free(s);
}

/* --- the waiting counts (see the essay) --- */

/* Takes a place in the striped's count, if one is free. */
static bool striped_take_place(struct serex_striped *s)
{
    /* seq_cst: the look for room that a waiter's count comes before,
     * against the seq_cst free in striped_give_back (executor.c) */
    uint64_t w = atomic_load_explicit(&s->waiting, memory_order_seq_cst);

    while (w < s->capacity)
        /* seq_cst: as the load; a failure reloads w, the same look */
        if (atomic_compare_exchange_weak_explicit(&s->waiting, &w, w + 1,
                                                  memory_order_seq_cst,
                                                  memory_order_seq_cst))
            return true;
    return false;
}

/* Frees @n places of @l's count (lane_capacity set). */
static void lane_give_back(struct lane *l, uint64_t n)
{
    /* seq_cst: the free that a waiter's look sees, or whose
     * serex__room_made (which follows) sees the waiter (executor.c) */
    atomic_fetch_sub_explicit(&l->waiting, n, memory_order_seq_cst);
}

/* Frees @n places of the striped's count, if it keeps one, after those of
 * their lanes; then tells waiters for room. A bounded striped only. */
static void striped_give_back(struct serex_striped *s, uint64_t n)
{
    if (s->capacity != 0)
        /* seq_cst: as in lane_give_back */
        atomic_fetch_sub_explicit(&s->waiting, n, memory_order_seq_cst);
    serex__room_made();
}

/* --- the lane drain --- */


/*
 * Accounts for @ran tasks. If that leaves none, the lane's work and its
 * drain are over: the lane is unlinked (unless shutdown_now did it and
 * counted it already), uncounted, freed, and the drain's reference is
 * dropped. Returns whether it was over; *@last: free the striped.
 */
static bool lane_settle(struct serex_striped *s, struct lane *l, unsigned ran,
                        bool *last)
{
    struct stripe_shard *sh = lane_shard(s, key_hash(l->key));
    bool over;

    serex__spin_lock(&sh->lock);
    sh->completed += ran;
    /* acq_rel: the hand-over to the next drain, as in serial.c */
    over = atomic_fetch_sub_explicit(&l->wip, ran, memory_order_acq_rel) == ran;
    if (over) {
        if (!l->unlinked) {
            shard_unlink(sh, l);
            shard_busy(sh, -1);
            striped_notify(s); /* before our reference goes */
        }
        *last = shard_unref(s, sh);
    }
    serex__spin_unlock(&sh->lock);
    if (over)
        lane_free(l);
    return over;
}

/*
 * serex__mpsc_run for a bounded striped: each task's places are freed when
 * it leaves the queue, before it runs. Returns how many ran.
 */
static unsigned lane_run_bounded(struct serex_striped *s, struct lane *l,
                                 unsigned max)
{
    unsigned ran = 0;

    while (ran < max) {
        struct serex__task *t;
        serex_fn fn;
        void *arg;

        serex__spin_lock(&l->pop_lock);
        t = serex__mpsc_pop_wait_ends(lane_queue(l));
        serex__spin_unlock(&l->pop_lock);
        if (t == NULL)
            break;
        if (s->lane_capacity != 0)
            lane_give_back(l, 1);
        striped_give_back(s, 1);
        fn = t->fn;
        arg = t->arg;
        serex__task_free(t);
        fn(arg);
        ran++;
    }
    return ran;
}

static void lane_drain(struct serex__op *op)
{
    struct lane *l = serex__container_of(op, struct lane, drain);
    struct serex_striped *s = l->s;
    struct serex__frame frame;
    bool last = false;

    serex__frame_push_serial(&frame, &s->face, &l->key); /* promise 7b */
    /* `visit`: tasks run since the target gave us this thread. A short
     * round (a counted task's push still under way) loops without giving
     * the thread back, so the count carries over rounds: at most `batch`
     * a visit (promise 4; the serial's spin model found the same case). */
    for (unsigned visit = 0;;) {
        unsigned ran = s->bounded ? lane_run_bounded(s, l, s->batch - visit)
                                  : serex__mpsc_run(lane_queue(l), &l->pop_lock,
                                                    s->batch - visit);

        if (lane_settle(s, l, ran, &last))
            break; /* our reference is gone: no more touches of s */
        if ((visit += ran) < s->batch)
            continue;
        if (serex__op_submit(s->target, &l->drain) == SEREX_OK)
            break; /* the lane and our reference pass on */
        visit = 0; /* refused: a new batch here */
    }
    serex__frame_pop(&frame);
    if (last)
        striped_free(s);
}

/*
 * The target refused a new lane's drain. If ours is the lane's only task,
 * undo it all (the caller reports the target's status: nothing queued);
 * else others queued behind it: keep the lane for shutdown_now (BROKEN).
 * Either way the drain's reference goes. Returns whether it was undone.
 */
static bool lane_refused(struct serex_striped *s, struct lane *l, uint64_t hash)
{
    struct stripe_shard *sh = lane_shard(s, hash);
    struct serex__task *t = NULL;
    bool undo;

    serex__spin_lock(&sh->lock);
    /* relaxed: wip changes under this lock only now (no drain runs) */
    undo = atomic_load_explicit(&l->wip, memory_order_relaxed) == 1;
    if (undo) {
        serex__spin_lock(&l->pop_lock);
        t = serex__mpsc_pop_wait_ends(lane_queue(l)); /* ours: the only one */
        serex__spin_unlock(&l->pop_lock);
        atomic_store_explicit(&l->wip, 0, memory_order_relaxed);
        shard_unlink(sh, l);
        shard_busy(sh, -1);
        sh->submitted--; /* taken back: it was never accepted */
    } else {
        l->broken = true;
    }
    /* never the last: destroy overlaps with no other call (striped.h) */
    (void)shard_unref(s, sh);
    serex__spin_unlock(&sh->lock);
    if (undo) {
        serex__task_free(t);
        lane_free(l); /* its count goes with it */
        if (s->bounded)
            striped_give_back(s, 1); /* nothing queued: its place is free */
    } else {
        /* relaxed: BROKEN only makes execute refuse and destroy drop;
         * l->broken, under the shard lock, is what shutdown_now reads */
        atomic_fetch_or_explicit(&s->ctl, CTL_BROKEN, memory_order_relaxed);
        serex__room_wake(); /* waiters for room retry: SEREX_EREJECTED */
    }
    return undo;
}

/* The submission that made the lane busy: start its drain (the lane is
 * counted busy, and the drain's reference taken, in striped_push). */
static int lane_start(struct serex_striped *s, struct lane *l, uint64_t hash)
{
    int rc = serex__op_submit(s->target, &l->drain);

    if (rc == SEREX_OK || !lane_refused(s, l, hash))
        return SEREX_OK;
    return rc;
}

/* --- submission --- */

static int striped_enter(struct serex_striped *s)
{
    /* relaxed: one modification order with shutdown_now's flags */
    uint64_t c = atomic_fetch_add_explicit(&s->ctl, CTL_INFLIGHT,
                                           memory_order_relaxed);

    if (serex__likely(!(c & (CTL_SHUT | CTL_BROKEN))))
        return SEREX_OK;
    /* relaxed: we queued nothing, so there is nothing to publish */
    atomic_fetch_sub_explicit(&s->ctl, CTL_INFLIGHT, memory_order_relaxed);
    return SEREX_EREJECTED;
}

static void striped_leave(struct serex_striped *s)
{
    /* release: our push and increment before shutdown_now's acquire */
    atomic_fetch_sub_explicit(&s->ctl, CTL_INFLIGHT, memory_order_release);
}

/*
 * Room for a task in the lane @l (NULL: the key has none yet, so room) and
 * in the striped, under the shard lock: SEREX_OK with the striped's place
 * taken (the caller raises the lane's count once the lane exists), or
 * SEREX_EFULL with nothing taken.
 */
static int striped_take_places(struct serex_striped *s, struct lane *l)
{
    /* seq_cst: the look for room, as in striped_take_place; only the
     * drain's decrements race with it (we hold the shard lock) */
    if (l != NULL && s->lane_capacity != 0 &&
        atomic_load_explicit(&l->waiting, memory_order_seq_cst) >=
            s->lane_capacity)
        return SEREX_EFULL;
    if (s->capacity != 0 && !striped_take_place(s))
        return SEREX_EFULL;
    return SEREX_OK;
}

/* Queues @t on @key's lane; *@lane is set if it needs a drain started. */
static int striped_push(struct serex_striped *s, uint64_t key, uint64_t hash,
                        struct serex__task *t, struct lane **lane)
{
    struct stripe_shard *sh = lane_shard(s, hash);
    struct lane *l;
    uint64_t prev;

    serex__spin_lock(&sh->lock);
    /*
     * relaxed: shutdown sets the flag (release) before it, or an awaiter
     * that saw it (acquire), takes this lock; so either our push comes
     * first and they see it, or we see the flag (see the essay).
     */
    if (atomic_load_explicit(&s->ctl, memory_order_relaxed) &
        (CTL_SHUT | CTL_BROKEN)) {
        serex__spin_unlock(&sh->lock);
        return SEREX_EREJECTED;
    }
    l = shard_find(sh, hash, key);
    if (s->bounded && striped_take_places(s, l) != SEREX_OK) {
        serex__spin_unlock(&sh->lock);
        serex__room_full(); /* our frees call serex__room_made */
        return SEREX_EFULL;
    }
    if (l == NULL && (l = lane_new(s, sh, hash, key)) == NULL) {
        serex__spin_unlock(&sh->lock);
        if (s->bounded)
            striped_give_back(s, 1); /* the striped's place: no lane */
        return SEREX_ENOMEM;
    }
    if (s->lane_capacity != 0)
        /* relaxed: under the shard lock, which every producer of this
         * lane holds to look and add; only the drain's RMWs race with
         * it, and no RMW is lost, so the count stays within the cap */
        atomic_fetch_add_explicit(&l->waiting, 1, memory_order_relaxed);
    serex__mpsc_push_ends(lane_queue(l), t);
    sh->submitted++;
    /* acq_rel: the 0 -> 1 hand-over (see serial.c) */
    prev = atomic_fetch_add_explicit(&l->wip, 1, memory_order_acq_rel);
    if (prev == 0) { /* the lane is busy now, and its drain will hold a ref */
        shard_busy(sh, +1);
        sh->refs++;
    }
    serex__spin_unlock(&sh->lock);
    *lane = prev == 0 ? l : NULL;
    return SEREX_OK;
}

int serex_striped_execute(serex_striped *s, uint64_t key, serex_fn fn,
                          void *arg)
{
    struct serex__task *t;
    struct lane *start;
    uint64_t hash = key_hash(key);
    int rc;

    if (s == NULL || fn == NULL)
        return SEREX_EINVAL;
    if ((t = serex__task_new(fn, arg)) == NULL)
        return SEREX_ENOMEM;
    rc = striped_push(s, key, hash, t, &start);
    if (rc != SEREX_OK)
        serex__task_free(t);
    else if (start != NULL) /* the lane counts busy: nothing ends meanwhile */
        rc = lane_start(s, start, hash);
    if (serex__unlikely(rc != SEREX_OK && rc != SEREX_ENOMEM))
        /* relaxed: a statistic, on the refusing path only */
        atomic_fetch_add_explicit(&s->rejected, 1, memory_order_relaxed);
    return rc;
}

struct striped_call {
    serex_striped *s;
    uint64_t key;
    serex_fn fn;
    void *arg;
};

static int striped_call_try(void *ctx)
{
    struct striped_call *c = ctx;

    return serex_striped_execute(c->s, c->key, c->fn, c->arg);
}

int serex_striped_execute_wait(serex_striped *s, uint64_t key, serex_fn fn,
                               void *arg, int64_t timeout_ns)
{
    struct striped_call c = {s, key, fn, arg};

    if (s == NULL || fn == NULL || !serex__timeout_valid(timeout_ns))
        return SEREX_EINVAL;
    return serex__execute_wait(&s->face, striped_call_try, &c, timeout_ns);
}

int serex_striped_submit(serex_striped *s, uint64_t key, serex_call_fn fn,
                         void *arg, serex_future **out)
{
    serex_future *f;
    serex_fn task;
    int rc;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    if (s == NULL || fn == NULL)
        return SEREX_EINVAL;
    if ((f = serex__future_new(&s->face, &key, fn, arg, &task)) == NULL)
        return SEREX_ENOMEM;
    rc = serex_striped_execute(s, key, task, f);
    if (rc != SEREX_OK) {
        serex__future_abort(f);
        return rc;
    }
    *out = f;
    return SEREX_OK;
}

/* --- the executor face: keyless tasks and the life cycle --- */

static void keyless_run(struct serex__op *op)
{
    struct keyless k = *serex__container_of(op, struct keyless, op);
    struct serex__frame frame;

    serex__cache_free(SEREX__CLASS_32, op);
    serex__frame_push(&frame, &k.s->face);
    k.fn(k.arg);
    serex__frame_pop(&frame);
    life_keyless(k.s, -1);
    keyless_unref(k.s);
}

static int striped_face_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct serex_striped *s = striped_of(ex);
    struct keyless *k = serex__cache_alloc(SEREX__CLASS_32);
    int rc;

    if (k == NULL)
        return SEREX_ENOMEM;
    *k = (struct keyless){{&keyless_class}, fn, arg, s};
    rc = striped_enter(s);
    if (rc == SEREX_OK) {
        life_keyless(s, +1);
        keyless_ref(s);
        rc = serex__op_submit(s->target, &k->op);
        if (rc != SEREX_OK) {
            life_keyless(s, -1);
            keyless_unref(s); /* never the last: we are in flight */
        }
        striped_leave(s);
    }
    if (rc != SEREX_OK)
        serex__cache_free(SEREX__CLASS_32, k);
    if (serex__unlikely(rc != SEREX_OK && rc != SEREX_ENOMEM))
        /* relaxed: a statistic, on the refusing path only */
        atomic_fetch_add_explicit(&s->rejected, 1, memory_order_relaxed);
    return rc;
}

static void striped_shutdown(serex_executor *ex)
{
    struct serex_striped *s = striped_of(ex);

    /* release: a producer or awaiter that takes a shard lock after seeing
     * or publishing the flag is ordered after it (see striped_push) */
    if (atomic_fetch_or_explicit(&s->ctl, CTL_SHUT, memory_order_release) &
        CTL_SHUT)
        return; /* a second shutdown changes nothing */
    serex__await_bump(&s->life, LIFE_GEN); /* the flag before a re-check */
    serex__room_wake(); /* waiters for room retry: SEREX_EREJECTED */
}

/*
 * Appends @l's queue to the list at *@tail; returns how many. Under the
 * shard lock. Holds the pop lock for the whole queue, so the lane's drain
 * cannot start a task behind one taken back here.
 */
static size_t lane_take_all(struct lane *l, struct serex__task ***tail)
{
    size_t n;

    serex__spin_lock(&l->pop_lock);
    n = serex__mpsc_take_all(lane_queue(l), tail);
    serex__spin_unlock(&l->pop_lock);
    return n;
}

/*
 * Empties one shard's lanes onto the list at *@tail, unlinking the lanes
 * left with nothing: the keys have no task any more, so they have no lane
 * (serex_striped_lanes says 0). A lane whose drain is still pending is
 * freed by that drain; one whose drain the target refused, here. Under
 * the shard lock.
 */
static size_t shard_take_all(struct serex_striped *s, struct stripe_shard *sh,
                             struct serex__task ***tail, struct lane **dead,
                             uint64_t *emptied)
{
    size_t count = 0;

    for (size_t b = 0; b <= sh->mask; b++) {
        struct lane **pl = &sh->buckets[b];

        while (*pl != NULL) {
            struct lane *l = *pl;
            size_t n = lane_take_all(l, tail);

            if (s->lane_capacity != 0 && n != 0)
                lane_give_back(l, n);
            /* acq_rel: as a drain's decrement */
            uint64_t left = atomic_fetch_sub_explicit(&l->wip, n,
                                                      memory_order_acq_rel) -
                            n;

            count += n;
            sh->taken += n;
            if (left != 0) {
                pl = &l->next;
                continue;
            }
            ++*emptied;
            shard_busy(sh, -1);
            *pl = l->next; /* unlink without resizing: we are iterating */
            atomic_store_explicit(&sh->count, sh_count(sh) - 1,
                                  memory_order_relaxed);
            if (l->broken) { /* no drain will come: free it (later) */
                l->next = *dead;
                *dead = l;
            } else {
                l->unlinked = true;
            }
        }
    }
    shard_resize(sh);
    return count;
}

/*
 * Takes every lane's queue (each in order) onto a private list; accounts
 * for what it took.
 */
static struct serex__task *striped_take_all(struct serex_striped *s,
                                            size_t *count)
{
    struct serex__task *first = NULL, **tail = &first;
    struct lane *dead = NULL;
    uint64_t emptied = 0;

    *count = 0;
    for (unsigned i = 0; i < SHARDS; i++) {
        serex__spin_lock(&s->shards[i].lock);
        *count += shard_take_all(s, &s->shards[i], &tail, &dead, &emptied);
        serex__spin_unlock(&s->shards[i].lock);
    }
    while (dead != NULL) {
        struct lane *next = dead->next;

        lane_free(dead);
        dead = next;
    }
    if (s->bounded && *count != 0)
        striped_give_back(s, *count); /* the lanes' counts: done above */
    if (emptied != 0)
        striped_notify(s);
    return first;
}

static size_t striped_shutdown_now(serex_executor *ex,
                                   serex_pending_fn on_pending, void *ctx)
{
    struct serex_striped *s = striped_of(ex);
    struct serex__task *list;
    size_t n;

    /* release: as in striped_shutdown */
    uint64_t old = atomic_fetch_or_explicit(&s->ctl, CTL_SHUT | CTL_STOP,
                                            memory_order_release);

    list = striped_take_all(s, &n); /* each shard lock orders the flags */
    if (!(old & CTL_STOP)) /* once: the generation has 2 bits */
        serex__await_bump(&s->life, LIFE_GEN << 1);
    serex__room_wake(); /* waiters for room retry: SEREX_EREJECTED */
    serex__task_hand_back_list(list, on_pending, ctx);
    return n;
}

/* Shut down with nothing busy, as await_internal.h asks. */
static enum serex__await_state striped_state(struct serex_striped *s)
{
    /* acquire: one load decides SHUT and that no keyless submission is in
     * flight (as serial_state; a keyless task is counted in `life` before
     * its submitter leaves) */
    uint64_t c = atomic_load_explicit(&s->ctl, memory_order_acquire);

    if (!(c & CTL_SHUT))
        return SEREX__AWAIT_NOT;
    if (c >= CTL_INFLIGHT)
        return SEREX__AWAIT_SOON;
    /* seq_cst: read after ctl (so it counts that submitter), and the look
     * that follows an awaiter counting itself (striped_notify) */
    if (LIFE_ACTIVES(atomic_load_explicit(&s->life, memory_order_seq_cst)) !=
        0)
        return SEREX__AWAIT_NOT;
    for (unsigned i = 0; i < SHARDS; i++) {
        struct stripe_shard *sh = &s->shards[i];
        size_t busy;

        /*
         * Under the shard lock: a producer that checked the flag before
         * shutdown counts its lane busy in the same critical section, so
         * we see that count or it sees the flag. The lock also orders a
         * drain's last task before us, and our count as a waiter before
         * a drain that ends a lane after us (striped_notify).
         */
        serex__spin_lock(&sh->lock);
        busy = atomic_load_explicit(&sh->busy, memory_order_relaxed);
        serex__spin_unlock(&sh->lock);
        if (busy != 0)
            return SEREX__AWAIT_NOT;
    }
    return SEREX__AWAIT_DONE;
}

static enum serex__await_state striped_state_cb(void *s)
{
    return striped_state(s);
}

static int striped_await(serex_executor *ex, int64_t timeout_ns)
{
    struct serex_striped *s = striped_of(ex);
    const struct serex__await a = {
        &s->life, LIFE_WAITER, LIFE_WAITER_SHIFT, LIFE_WAITERS_MAX,
        striped_state_cb, s,
    };

    return serex__await(&a, timeout_ns);
}

static void striped_free(struct serex_striped *s)
{
    for (unsigned i = 0; i < SHARDS; i++)
        serex__free(s->shards[i].buckets);
    serex__free(s);
}

static bool striped_broken(serex_executor *ex)
{
    /* relaxed: a hint; serex__wrapper_settle looks again after waiting */
    return atomic_load_explicit(&striped_of(ex)->ctl, memory_order_relaxed) &
           CTL_BROKEN;
}

static void striped_drop_all(serex_executor *ex)
{
    size_t n;

    serex__task_hand_back_list(striped_take_all(striped_of(ex), &n), NULL,
                               NULL);
}

static void striped_destroy(serex_executor *ex)
{
    struct serex_striped *s = striped_of(ex);
    uint64_t old;

    serex__wrapper_settle(ex, s->target, striped_broken, striped_drop_all);
    /*
     * Count the shards still holding references (drains on their way out
     * or queued on a target nobody runs); each takes itself out when its
     * last goes (shard_unref). Our own token keeps `remaining` above 0
     * until the count is done. No reference can be taken any more: no
     * execute is in flight after termination.
     */
    atomic_store_explicit(&s->remaining, 1, memory_order_relaxed);
    for (unsigned i = 0; i < SHARDS; i++) {
        struct stripe_shard *sh = &s->shards[i];

        serex__spin_lock(&sh->lock);
        if (sh->refs != 0) {
            sh->counted = true;
            /* relaxed: before any shard can take it down (its lock) */
            atomic_fetch_add_explicit(&s->remaining, 1, memory_order_relaxed);
        }
        serex__spin_unlock(&sh->lock);
    }
    /* acq_rel: as in shard_unref */
    old = atomic_fetch_sub_explicit(&s->remaining, 1, memory_order_acq_rel);
    if (old == 1)
        striped_free(s);
}

static void striped_stats(serex_executor *ex, serex_stats *out);

/* A striped waits on its target (promise 7). */
static bool striped_waits_on(serex_executor *ex,
                             bool (*blocks)(serex_executor *))
{
    return blocks(striped_of(ex)->target);
}

static const struct serex__exec_class striped_class = {
    SEREX__CLASS_OPS(striped_face_execute, striped_shutdown,
                     striped_shutdown_now, striped_await),
    "striped", striped_stats, striped_waits_on, striped_destroy,
};

int serex_striped_create(serex_executor *target,
                         const serex_striped_config *cfg, serex_striped **out)
{
    const char *name = "striped";
    struct serex_striped *s;
    size_t len;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    if (target == NULL || target->ops == NULL)
        return SEREX_EINVAL;
    if (cfg != NULL && cfg->name != NULL && cfg->name[0] != '\0')
        name = cfg->name;
    len = strlen(name);
    s = serex__calloc_aligned(SEREX__CACHELINE, sizeof *s + len + 1);
    if (s == NULL)
        return SEREX_ENOMEM;
    memcpy(s->name, name, len + 1);
    for (unsigned i = 0; i < SHARDS; i++) {
        s->shards[i].buckets =
            serex__calloc(BUCKETS_MIN, sizeof(struct lane *));
        s->shards[i].mask = BUCKETS_MIN - 1;
        if (s->shards[i].buckets == NULL) {
            striped_free(s);
            return SEREX_ENOMEM;
        }
    }
    s->face.ops = &striped_class.ops;
    s->target = target;
    s->batch = cfg != NULL && cfg->batch != 0 ? cfg->batch : DEFAULT_BATCH;
    s->capacity = cfg != NULL ? cfg->queue_capacity : 0;
    s->lane_capacity = cfg != NULL ? cfg->lane_capacity : 0;
    s->bounded = s->capacity != 0 || s->lane_capacity != 0;
    *out = s;
    return SEREX_OK;
}

serex_executor *serex_striped_executor(serex_striped *s)
{
    return s != NULL ? &s->face : NULL;
}

size_t serex_striped_lanes(serex_striped *s)
{
    size_t n = 0;

    if (s == NULL)
        return 0;
    for (unsigned i = 0; i < SHARDS; i++) /* relaxed: a snapshot */
        n += atomic_load_explicit(&s->shards[i].count, memory_order_relaxed);
    return n;
}

/*
 * The target took a lane's drain back or dropped it: the lane's tasks can
 * never run from there. Keep them for the striped's own shutdown_now or
 * destroy (which also free the lane), refuse new ones, and release the
 * drain's reference. Not the user's: on_pending never sees it.
 */
static void lane_drain_dropped(struct serex__op *op,
                               serex_pending_fn on_pending, void *ctx)
{
    struct lane *l = serex__container_of(op, struct lane, drain);
    struct serex_striped *s = l->s;
    struct stripe_shard *sh = lane_shard(s, key_hash(l->key));
    bool orphan, last;

    (void)on_pending;
    (void)ctx;
    /* relaxed: BROKEN only makes execute refuse and destroy drop; the
     * shard lock below orders it before whoever frees */
    atomic_fetch_or_explicit(&s->ctl, CTL_BROKEN, memory_order_relaxed);
    serex__room_wake(); /* waiters for room retry: SEREX_EREJECTED */
    serex__spin_lock(&sh->lock);
    orphan = l->unlinked; /* emptied and unlinked: nobody else frees it */
    l->broken = true;
    last = shard_unref(s, sh);
    serex__spin_unlock(&sh->lock);
    if (orphan)
        lane_free(l);
    if (last)
        striped_free(s);
}

/* The target took a keyless task back or dropped it: the user's own task
 * goes on to on_pending (NULL: dropped), and the wrapper is done with. */
static void keyless_dropped(struct serex__op *op, serex_pending_fn on_pending,
                            void *ctx)
{
    struct keyless k = *serex__container_of(op, struct keyless, op);

    serex__cache_free(SEREX__CLASS_32, op);
    life_keyless(k.s, -1); /* taken back: done, as far as awaiters go */
    keyless_unref(k.s);
    serex__hand_back(k.fn, k.arg, on_pending, ctx);
}

static const struct serex__op_class lane_drain_class = {
    "striped lane drain", lane_drain, lane_drain_dropped,
};

static const struct serex__op_class keyless_class = {
    "striped keyless task", keyless_run, keyless_dropped,
};

static void striped_stats(serex_executor *ex, serex_stats *out)
{
    struct serex_striped *s = striped_of(ex);
    uint64_t taken = 0;

    for (unsigned i = 0; i < SHARDS; i++) {
        struct stripe_shard *sh = &s->shards[i];

        serex__spin_lock(&sh->lock);
        out->submitted += sh->submitted;
        out->completed += sh->completed;
        taken += sh->taken;
        /* relaxed: written under the lock we hold */
        out->lanes += atomic_load_explicit(&sh->count, memory_order_relaxed);
        serex__spin_unlock(&sh->lock);
    }
    out->queued = out->submitted - out->completed - taken;
    /* relaxed: a statistic */
    out->rejected = atomic_load_explicit(&s->rejected, memory_order_relaxed);
    out->name = s->name;
}
