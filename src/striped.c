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
 * and a few stores, never while a task runs, never across an allocation
 * of the map's table nor a whole rehash (see "The map" below).
 *
 * --- The lifetime helper (life_internal.h): entry and life ---
 * `entry` holds the SHUT and BROKEN flags and the keyless executes
 * in flight; `life` the holders, DETACHED, and the threads in
 * await_termination. Same rules as the serial, the limiter and the pool:
 * enter/leave around a call that may queue, hold while the object is
 * known to be alive, the last of {final release, detach} frees.
 *   Keyed executes do not enter: each reads the flags under its shard
 * lock, in the critical section where it pushes and counts its lane busy;
 * shutdown and shutdown_now set them (release) before they, or an awaiter
 * that saw them (acquire), take any shard lock. So each submission is
 * either seen by them or sees the flag, and the keyed path touches no
 * line shared by all shards (the shard lock is its entry). Keyless
 * executes, rare, enter and leave `entry`, so a termination judgement
 * sees one between its flag check and its count (SEREX__AWAIT_SOON).
 *   Holders: each shard holds the striped (one holder in `life`, taken
 * at create) until destroy has let go of it and its last drain, out or
 * owed, is over: `drains` counts them under the shard lock, and destroy,
 * once settled, marks every shard `detached` under its lock and gives
 * back the holds of those with none; a shard with drains left gives its
 * hold back when the last one ends (shard_unhold says so, under the lock;
 * the release comes once the lock is released, as the lock is the
 * striped's memory). This is the per-shard count the striped always had,
 * with the last-frees rule moved into the helper: a lane's life costs no
 * atomic operation on a line shared by every shard. Each keyless task is
 * a holder of its own, from its execute to the end of its run (or its
 * drop); a call that must touch the striped after a drain's hold could go
 * (lane_owe, a resize after a lane's end) holds for itself meanwhile.
 * destroy detaches after that: no call that could hold is left by then
 * (no execute may overlap destroy, and every drain already counts), so
 * whichever of the last release and the detach comes last frees the
 * striped. Drains still queued on a target nobody runs, or on their way
 * out, keep it alive that long.
 *   Termination: shut down, no keyless execute in flight, no keyless task
 * out (`keyless`), no busy lane (one whose `wip` is above 0). Busy lanes
 * are counted per shard (`busy`), under the shard lock that the producer
 * starting a lane and the drain ending it hold anyway. An awaiter counts
 * itself in `life` and sums the shards under their locks; whoever ends a
 * lane or a keyless task looks for awaiters after its count and, if any,
 * bumps `life` (seq_cst on both sides: one sees the other).
 *
 * --- Owed drains: a refusal costs nothing ---
 * If the target refuses a lane's first drain (it is full, say) while a
 * second producer's task already queued behind the first, neither task
 * can be given back. The drain is then owed: the lane goes on the owed
 * list (`owed_lock`; `owed` counts it, read by everyone as a hint), its
 * drain still counted in its shard's `drains` (so the striped stays
 * alive), and whoever comes next resubmits it (striped_retry): any
 * execute, keyed or keyless, as it starts; any drain or keyless task as
 * it starts (the target has just made room for one); await_termination
 * and destroy while they wait (an awaiter counts itself, then looks at
 * `owed`; lane_owe counts the lane, then looks for awaiters: one sees the
 * other, and the awaiter resubmits, polling every millisecond while the
 * target still refuses). Each owed drain has one taker: the list, under
 * its lock. If the target says SEREX_EREJECTED (shut down: for good), or
 * takes a drain back or drops it, the striped is BROKEN: it refuses new
 * tasks (promise 5), the owed lanes keep theirs for shutdown_now, and
 * destroy drops them instead of waiting (so it never hangs on a drain
 * nobody can run); no more retries are made. The first producer's task
 * is accepted (SEREX_OK) in every case but one: if it is still its lane's
 * only task, it is taken back and execute reports the target's status,
 * with nothing queued and no lane left. What is given up: between the
 * refusal and the next comer, the lane's tasks wait with no drain on the
 * target (a caller that waits on one of them by other means, a future
 * say, waits that long); each execute and drain pays one load of `owed`,
 * on a line written only when a drain is refused.
 *
 * --- Who frees a lane (each case decided under the lane's shard lock) ---
 *   the lane's state when its work ends           who unlinks    who frees
 *   drain running, its decrement leaves wip 0     the drain      the drain
 *     (lane_settle)
 *   first drain refused, ours the only task       the producer   the producer
 *     (lane_refused: undone)
 *   drain owed (on the owed list): shutdown_now   shutdown_now   shutdown_now
 *     or destroy empties it (shard_take_all)                     (dead list)
 *   drain out (queued, running, or being          shutdown_now   whoever holds
 *     submitted: first, or a retry) when          (`unlinked`)   the drain:
 *     shutdown_now empties the lane                              the drain as
 *                                                                it settles;
 *                                                                the target's
 *                                                                drop hook; the
 *                                                                submitter the
 *                                                                target refused
 *                                                                (lane_owe)
 * Exactly one row applies to a lane: `unlinked` is set under the shard
 * lock, `owed` under the shard lock and `owed_lock` (and cleared under
 * `owed_lock` by the one retrier that takes the lane off the list), and
 * each row's freer is the last to touch it. The fourth row is where a
 * lane once leaked: shutdown_now emptied and unlinked a new lane between
 * its first push and the target's refusal of its first drain, and the
 * refused producer, not finding its task there, freed nothing (issue 20).
 *
 * --- The map: resizing without holding a lock across it ---
 * A shard's table grows at a load of 2 and shrinks at 1/16, never below
 * BUCKETS_SHRINK buckets. The call that changes the count decides, under
 * the lock, that another size is wanted (and marks the shard `sizing`,
 * so only one call resizes at a time); once unlocked it allocates the
 * new table, locks, re-checks that this size is still the one wanted and
 * installs it as `buckets`, the old one as `old`; then it moves the old
 * buckets over MIGRATE_STEP at a time, unlocking between steps, and frees
 * the old table unlocked. A table that lost the re-check is freed
 * unlocked too. Meanwhile a lane lives in old[hash & old_mask] if that
 * bucket is not moved yet (index >= `moved`), else in the new table: one
 * rule for find, insert and unlink (shard_bucket). A failed allocation
 * only leaves the chains longer until the next change of the count.
 *   A new lane's memory is not allocated under the lock either: a push
 * that finds no lane takes one from the calling thread's own node-cache
 * list (serex__cache_alloc_local: no depot, no allocator, no lock); only
 * when that list is empty does it unlock, get a lane with a refill, and
 * push again with it. Nothing in this file allocates under a spinlock
 * (test_striped counts it in Debug builds). (A guess, per shard, of
 * whether to allocate before locking cost 25-33 % at 64 and 4,096 keys in
 * paired runs: a lane allocated and freed again per wrong guess.)
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
 * behind; its memory was allocated before the lock (see "The map"), and
 * a failure to allocate it takes no place at all. The
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
 *
 * --- Statistics ---
 * stats.rejected counts every execute call, keyed or keyless, that
 * passed its argument checks and returned an error: shut down, full (the
 * striped's cap, a lane's, or the target's status for a new lane whose
 * only task was taken back), and SEREX_ENOMEM, as a pool counts them.
 */
#include <string.h> /* memset; strlen, memcpy: the name */

#include "alloc_internal.h"
#include "await_internal.h"
#include "common_internal.h"
#include "exec_class_internal.h"
#include "registry_internal.h"
#include "executor_internal.h"
#include "future_internal.h"
#include "life_internal.h"
#include "mpsc_internal.h"
#include "op_internal.h"
#include "spinlock_internal.h"
#include "stats_internal.h"
#include "task_watch_internal.h"
#include "striped_internal.h"
#include "thread_internal.h"

#define DEFAULT_BATCH 64u
#define SHARDS 256u           /* power of two */
#define BUCKETS_MIN 16u       /* per shard; power of two */
#define BUCKETS_SHRINK 256u   /* tables this small never shrink */
#define MIGRATE_STEP 32u      /* old buckets moved per hold of the lock */

/* The entry word's flags (life_internal.h: its bits 0-3). */
#define ST_SHUT UINT64_C(1)   /* shutdown (or shutdown_now) was called */
#define ST_BROKEN UINT64_C(2) /* the target refused a drain for good */

struct serex_striped;

/*
 * Two cache lines: what producers write (the queue's tail, `wip`) and read
 * (the chain, the key) apart from what the drain writes (the queue's head
 * and stub, the pop lock), or every push would bounce the drain's line.
 * The owed list's links, written only when the target refuses a drain,
 * fill the drain's line.
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
    /* taken out of the map by shutdown_now, its drain out; shard lock */
    bool unlinked;
    /* on the owed list; under owed_lock (set under the shard lock too) */
    bool owed;

    /* The drain's line. */
    _Alignas(SEREX__CACHELINE) serex__spinlock pop_lock;
    struct serex__task *head;
    struct serex__task stub;
    struct lane *owed_next, **owed_pprev; /* the owed list; owed_lock */
};

_Static_assert(sizeof(struct lane) <= 128, "a lane fits cache class 128");

static struct serex__mpsc_ends lane_queue(struct lane *l)
{
    return (struct serex__mpsc_ends){&l->tail, &l->head, &l->stub};
}

struct stripe_shard {
    _Alignas(SEREX__CACHELINE) serex__spinlock lock;
    bool sizing;            /* a resize is under way; under lock */
    bool detached;          /* destroy let go: the last drain releases
                               the shard's hold; under lock */
    _Atomic size_t count;   /* lanes in the table; written under lock */
    _Atomic size_t busy;    /* lanes with wip > 0; written under lock */
    size_t drains;          /* drains out or owed; under lock */
    size_t mask;            /* buckets - 1 */
    struct lane **buckets;
    struct lane **old;      /* a resize's old table; NULL: none */
    size_t old_mask, moved; /* old buckets below `moved` are empty */
    uint64_t submitted, completed, taken; /* keyed tasks; under lock */
};

struct serex_striped {
    serex_executor face;    /* the life-cycle face; keyless execute */
    struct serex__reg reg;  /* serex_dump's list */
    serex_executor *target;
    unsigned batch;

    /* The capacities (read-only; see the essay). */
    bool bounded;         /* either set: the drain frees places */
    size_t capacity;      /* queue_capacity: all lanes; 0: no cap */
    size_t lane_capacity; /* per lane; 0: no cap */
    struct serex__metrics *_Atomic metrics; /* NULL: off (metrics.h) */

    /* ST_* flags | keyless executes in flight (see the essay) */
    _Alignas(SEREX__CACHELINE) struct serex__entry entry;
    _Atomic uint64_t keyless;   /* keyless tasks out */
    _Atomic uint64_t rejected;  /* execute calls refused */
    _Atomic uint64_t yields;    /* lane drains that gave the thread back */
    /* holders | DETACHED | awaiters */
    _Alignas(SEREX__CACHELINE) struct serex__life life;
    /* Owed drains: written when the target refuses one, read (`owed`)
     * by every execute and drain; a line of its own. */
    _Alignas(SEREX__CACHELINE) serex__spinlock owed_lock;
    _Atomic size_t owed; /* lanes on the list; written under the lock */
    struct lane *owed_head, **owed_tail;
    /* queue_capacity only: places taken in all lanes (see the essay);
     * every producer and drain writes it: a line of its own */
    _Alignas(SEREX__CACHELINE) _Atomic uint64_t waiting;
    struct stripe_shard shards[SHARDS];
    char name[]; /* serex_stats' name, copied at create */
};

/* A keyless task, a holder of the striped while it is the target's. */
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

/* The flags, as a keyed execute reads them under its shard lock. */
static uint64_t striped_flags(struct serex_striped *s)
{
    /* relaxed: shutdown sets them (release) before it, or an awaiter
     * that saw them (acquire), takes a shard lock; so either our push
     * comes first and they see it, or we see the flag (see the essay) */
    return atomic_load_explicit(&s->entry.word, memory_order_relaxed) &
           SEREX__ENTRY_FLAGS;
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

static unsigned shard_index(uint64_t hash)
{
    return (unsigned)(hash >> 56 & (SHARDS - 1));
}

static struct stripe_shard *lane_shard(struct serex_striped *s, uint64_t hash)
{
    return &s->shards[shard_index(hash)];
}

unsigned serex__striped_shard_of(uint64_t key)
{
    return shard_index(key_hash(key));
}

static size_t sh_count(struct stripe_shard *sh)
{
    /* relaxed: callers hold the shard lock, which orders every change */
    return atomic_load_explicit(&sh->count, memory_order_relaxed);
}

/* relaxed (every count change): under the shard lock; read relaxed by
 * serex_striped_lanes, a snapshot */
static void sh_count_add(struct stripe_shard *sh, int delta)
{
    atomic_store_explicit(&sh->count, sh_count(sh) + (size_t)(ptrdiff_t)delta,
                          memory_order_relaxed);
}

/* The bucket a key of @hash lives in: the old table's while a resize has
 * not moved that bucket yet, else the table's (see the essay). */
static struct lane **shard_bucket(struct stripe_shard *sh, uint64_t hash)
{
    if (serex__unlikely(sh->old != NULL) && (hash & sh->old_mask) >= sh->moved)
        return &sh->old[hash & sh->old_mask];
    return &sh->buckets[hash & sh->mask];
}

/* The size the table should have for its count. Under the shard lock. */
static size_t shard_size_for_count(struct stripe_shard *sh)
{
    size_t n = sh->mask + 1;

    if (sh_count(sh) > 2 * n)
        return n * 2;
    if (n > BUCKETS_SHRINK && sh_count(sh) < n / 16)
        return n / 2;
    return n;
}

/*
 * After a change of the count: the size of a new table to make once the
 * lock is released (shard_resize), or 0. Grows at a load of 2 and shrinks
 * at 1/16 but never below BUCKETS_SHRINK: lanes come and go all the time,
 * and a table that resized on every small swing would call the allocator
 * per task. Big tables still shrink, so memory comes back after a burst.
 * One resize at a time (`sizing`). Under the shard lock.
 */
static size_t shard_want(struct stripe_shard *sh)
{
    size_t want;

    if (sh->sizing || sh->detached ||
        (want = shard_size_for_count(sh)) == sh->mask + 1)
        return 0; /* (a striped being destroyed needs no resize) */
    sh->sizing = true;
    return want;
}

/* Moves up to MIGRATE_STEP old buckets into the table; returns the old
 * table once all are moved (the caller frees it unlocked). Under lock. */
static struct lane **shard_migrate(struct stripe_shard *sh)
{
    struct lane **old;

    for (unsigned i = 0; i < MIGRATE_STEP && sh->moved <= sh->old_mask;
         i++, sh->moved++) {
        struct lane *l = sh->old[sh->moved], *next;

        for (; l != NULL; l = next) {
            struct lane **b = &sh->buckets[key_hash(l->key) & sh->mask];

            next = l->next;
            l->next = *b;
            *b = l;
        }
        sh->old[sh->moved] = NULL;
    }
    if (sh->moved <= sh->old_mask)
        return NULL;
    old = sh->old;
    sh->old = NULL;
    sh->sizing = false;
    return old;
}

/*
 * Gives @sh a table of @want buckets (shard_want said so): allocates it
 * unlocked, installs it under the lock if that size is still the one
 * wanted, then moves the old buckets over a step at a time, unlocking
 * between steps; every table that is not kept is freed unlocked. A failed
 * allocation leaves the chains longer until the next change of the count.
 * The caller is inside the striped's life (a call, or a holder).
 */
static void shard_resize(struct stripe_shard *sh, size_t want)
{
    struct lane **b = serex__calloc(want, sizeof *b), **old = NULL;
    bool installed = false;

    serex__spin_lock(&sh->lock);
    if (b != NULL && shard_size_for_count(sh) == want) {
        sh->old = sh->buckets;
        sh->old_mask = sh->mask;
        sh->moved = 0;
        sh->buckets = b;
        sh->mask = want - 1;
        installed = true;
    } else {
        sh->sizing = false; /* the count moved on meanwhile, or no memory */
    }
    serex__spin_unlock(&sh->lock);
    if (!installed) {
        serex__free(b);
        return;
    }
    while (old == NULL) {
        serex__spin_lock(&sh->lock);
        old = shard_migrate(sh);
        serex__spin_unlock(&sh->lock);
    }
    serex__free(old);
}

static struct lane *shard_find(struct stripe_shard *sh, uint64_t hash,
                               uint64_t key)
{
    struct lane *l = *shard_bucket(sh, hash);

    while (l != NULL && l->key != key)
        l = l->next;
    return l;
}

/* Memory for a lane, allocated before the shard lock is taken. */
static struct lane *lane_alloc(void)
{
    return serex__cache_alloc(SEREX__CLASS_128);
}

/* @l, allocated (lane_alloc), made @key's lane, in the map. Under the
 * shard lock; *@want: see shard_want. */
static struct lane *lane_new(struct serex_striped *s, struct stripe_shard *sh,
                             uint64_t hash, uint64_t key, struct lane *l,
                             size_t *want)
{
    struct lane **b;

    memset(l, 0, sizeof *l);
    serex__mpsc_init_ends(lane_queue(l));
    l->drain.cls = &lane_drain_class;
    l->key = key;
    l->s = s;
    b = shard_bucket(sh, hash);
    l->next = *b;
    *b = l;
    sh_count_add(sh, +1);
    *want = shard_want(sh);
    return l;
}

/* Takes @l out of the map. Under the shard lock; *@want: see shard_want. */
static void shard_unlink(struct stripe_shard *sh, struct lane *l, size_t *want)
{
    struct lane **p = shard_bucket(sh, key_hash(l->key));

    while (*p != l)
        p = &(*p)->next;
    *p = l->next;
    sh_count_add(sh, -1);
    *want = shard_want(sh);
}

static void lane_free(struct lane *l)
{
    serex__cache_free(SEREX__CLASS_128, l);
}

/* --- life: holders, awaiters --- */

static void striped_free(struct serex_striped *s);

/* Wakes awaiters, if any (see the essay). */
static void striped_notify(struct serex_striped *s)
{
    /* after our seq_cst change of a busy count or of `keyless` */
    serex__life_notify(&s->life);
}

/* Gives back a hold of the striped: the last, after destroy, frees it. */
static void striped_release(struct serex_striped *s)
{
    if (serex__life_release(&s->life))
        striped_free(s);
}

/* Changes @sh's busy count by @delta (+1 or -1). Under its lock. */
static void shard_busy(struct stripe_shard *sh, int delta)
{
    /* seq_cst: read by awaiters (see striped_notify) */
    atomic_store_explicit(&sh->busy,
                          atomic_load_explicit(&sh->busy,
                                               memory_order_relaxed) +
                              (size_t)(ptrdiff_t)delta,
                          memory_order_seq_cst);
}

/* One more drain of @sh's out (or owed). Under the shard lock. */
static void shard_hold(struct stripe_shard *sh)
{
    sh->drains++;
}

/* A drain of @sh's is over. Under the shard lock. Returns true if the
 * shard's hold goes with it (its last drain, after destroy let go of the
 * shard): the caller then calls striped_release once it has unlocked (the
 * lock is the striped's memory). */
static bool shard_unhold(struct stripe_shard *sh)
{
    return --sh->drains == 0 && sh->detached;
}

/* Keyless tasks: one fewer out (run or dropped); the task's hold goes. */
static void keyless_end(struct serex_striped *s)
{
    /* seq_cst: against an awaiter's look (see striped_notify); release:
     * the task's writes before an awaiter that sees it done */
    atomic_fetch_sub_explicit(&s->keyless, 1, memory_order_seq_cst);
    striped_notify(s);
    striped_release(s);
}

/* The target refused a drain for good (SEREX_EREJECTED) or took one back:
 * refuse new tasks, make no more retries, let destroy drop. */
static void striped_break(struct serex_striped *s)
{
    /* relaxed: BROKEN only makes execute refuse, retries stop and destroy
     * drop; each reads it again after its own waits */
    serex__entry_close(&s->entry, ST_BROKEN, memory_order_relaxed);
    serex__room_wake(); /* waiters for room retry: SEREX_EREJECTED */
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

/* --- owed drains (see the essay) --- */

/* Puts @l on the owed list (@front: where a retry took it from). Under
 * owed_lock, and @l's shard lock. */
static void owed_add(struct serex_striped *s, struct lane *l, bool front)
{
    size_t n = atomic_load_explicit(&s->owed, memory_order_relaxed);

    if (front) {
        l->owed_next = s->owed_head;
        l->owed_pprev = &s->owed_head;
        if (s->owed_head != NULL)
            s->owed_head->owed_pprev = &l->owed_next;
        else
            s->owed_tail = &l->owed_next;
        s->owed_head = l;
    } else {
        l->owed_next = NULL;
        l->owed_pprev = s->owed_tail;
        *s->owed_tail = l;
        s->owed_tail = &l->owed_next;
    }
    l->owed = true;
    /* seq_cst: before lane_owe looks for awaiters, against an awaiter
     * that counts itself and then looks here (striped_look) */
    atomic_store_explicit(&s->owed, n + 1, memory_order_seq_cst);
}

/* Takes @l off the owed list. Under owed_lock. */
static void owed_remove(struct serex_striped *s, struct lane *l)
{
    *l->owed_pprev = l->owed_next;
    if (l->owed_next != NULL)
        l->owed_next->owed_pprev = l->owed_pprev;
    else
        s->owed_tail = l->owed_pprev;
    l->owed = false;
    /* relaxed: a hint for the readers; the list is under the lock */
    atomic_store_explicit(
        &s->owed, atomic_load_explicit(&s->owed, memory_order_relaxed) - 1,
        memory_order_relaxed);
}

/*
 * @l's drain is back in our hands, refused by the target (@rc; also
 * SEREX_EREJECTED when the target took it back or dropped it): owe it,
 * for the next execute, drain or wait to resubmit (striped_retry). But if
 * shutdown_now emptied and unlinked the lane meanwhile, no drain is
 * needed and nobody else will free it: free it here, with the drain's
 * hold (the fourth row of the essay's table). @front: a retry's lane,
 * back where it was on the list.
 */
static void lane_owe(struct serex_striped *s, struct lane *l, int rc,
                     bool front)
{
    struct stripe_shard *sh = lane_shard(s, key_hash(l->key));
    bool orphan, drop = false;

    serex__spin_lock(&sh->lock);
    orphan = l->unlinked;
    if (orphan) {
        drop = shard_unhold(sh);
    } else {
        /* ours, for the touches below: once the lane is on the list,
         * shutdown_now may free it and give its hold back meanwhile */
        serex__life_hold(&s->life);
        serex__spin_lock(&s->owed_lock);
        owed_add(s, l, front);
        serex__spin_unlock(&s->owed_lock);
    }
    serex__spin_unlock(&sh->lock);
    if (orphan) {
        lane_free(l);
        if (drop)
            striped_release(s); /* the last touch (a drop after destroy) */
        return;
    }
    if (rc == SEREX_EREJECTED)
        striped_break(s);
    serex__life_notify(&s->life); /* an awaiter comes back to resubmit */
    striped_release(s);
}

/*
 * Resubmits owed drains, oldest first, until the list is empty or the
 * target refuses one (which goes back to the front). The caller is inside
 * the striped's life: a call, or a holder (a drain, a keyless task).
 */
static void striped_retry(struct serex_striped *s)
{
    for (;;) {
        struct lane *l = NULL;
        int rc;

        if (striped_flags(s) & ST_BROKEN)
            return; /* for good: the lanes wait for shutdown_now, destroy */
        serex__spin_lock(&s->owed_lock);
        if (s->owed_head != NULL) {
            l = s->owed_head;
            owed_remove(s, l); /* ours now: one taker */
        }
        serex__spin_unlock(&s->owed_lock);
        if (l == NULL)
            return;
        rc = serex__op_submit(s->target, &l->drain);
        if (rc != SEREX_OK) {
            lane_owe(s, l, rc, true);
            return;
        }
    }
}

/* The check every execute and drain makes: one load of a line written
 * only when the target refuses a drain. */
static void striped_retry_hint(struct serex_striped *s)
{
    /* relaxed: a hint; a drain owed meanwhile is for the next comer, and
     * awaiters look again with seq_cst (striped_look) */
    if (serex__unlikely(atomic_load_explicit(&s->owed, memory_order_relaxed) !=
                        0))
        striped_retry(s);
}

/* --- the lane drain --- */

/*
 * Accounts for @ran tasks. If that leaves none, the lane's work and its
 * drain are over: the lane is unlinked (unless shutdown_now did it and
 * counted it already), uncounted and freed. Returns whether it was over;
 * then *@drop: the shard's hold goes (striped_release, once unlocked),
 * and *@want: a resize to make (shard_resize), with a hold of its own
 * (the shard's may go meanwhile with the other drains).
 */
static bool lane_settle(struct serex_striped *s, struct stripe_shard *sh,
                        struct lane *l, unsigned ran, bool *drop, size_t *want)
{
    bool over;

    serex__spin_lock(&sh->lock);
    sh->completed += ran;
    /* acq_rel: the hand-over to the next drain, as in serial.c */
    over = atomic_fetch_sub_explicit(&l->wip, ran, memory_order_acq_rel) == ran;
    if (over) {
        if (!l->unlinked) {
            shard_unlink(sh, l, want);
            shard_busy(sh, -1);
            striped_notify(s); /* before our hold goes */
        }
        *drop = shard_unhold(sh);
        if (*want != 0) /* the resize is ours to make: hold for it */
            serex__life_hold(&s->life);
    }
    serex__spin_unlock(&sh->lock);
    if (over)
        lane_free(l);
    return over;
}

/*
 * A lane's drain loop: pops (under pop_lock, which shutdown_now also
 * takes, so it cannot take back a task behind one that has started) and
 * runs up to @max tasks, freeing each node before its task runs (the task
 * may queue more). A bounded striped's places are freed as a task leaves
 * the queue; a watched task's slice and times are recorded
 * (task_watch_internal.h). Returns how many ran.
 */
static unsigned lane_run_each(struct serex_striped *s, struct lane *l,
                              unsigned max)
{
    unsigned ran = 0;

    while (ran < max) {
        struct serex__task *t;

        serex__spin_lock(&l->pop_lock);
        t = serex__mpsc_pop_wait_ends(lane_queue(l));
        serex__spin_unlock(&l->pop_lock);
        if (t == NULL)
            break;
        if (s->lane_capacity != 0)
            lane_give_back(l, 1);
        if (s->bounded)
            striped_give_back(s, 1);
        serex__task_free_run(&s->face, &s->metrics, true, t);
        ran++;
    }
    return ran;
}

static void lane_drain(struct serex__op *op)
{
    struct lane *l = serex__container_of(op, struct lane, drain);
    struct serex_striped *s = l->s;
    struct stripe_shard *sh = lane_shard(s, key_hash(l->key));
    struct serex__frame frame;
    bool drop = false;
    size_t want = 0;

    serex__frame_push_serial(&frame, &s->face, &l->key); /* promise 7b */
    striped_retry_hint(s); /* the target just made room: owed drains */
    /* `visit`: tasks run since the target gave us this thread. A short
     * round (a counted task's push still under way) loops without giving
     * the thread back, so the count carries over rounds: at most `batch`
     * a visit (promise 4; the serial's spin model found the same case). */
    for (unsigned visit = 0;;) {
        unsigned ran = lane_run_each(s, l, s->batch - visit);

        if (lane_settle(s, sh, l, ran, &drop, &want))
            break; /* the lane is gone; the shard's hold keeps s */
        if ((visit += ran) < s->batch)
            continue;
        /* relaxed: a statistic; lanes of one striped yield at once */
        atomic_fetch_add_explicit(&s->yields, 1, memory_order_relaxed);
        if (serex__op_yield(s->target, &l->drain) == SEREX_OK)
            break; /* the lane and its hold pass on: no more touches */
        visit = 0; /* refused: a new batch here */
    }
    serex__frame_pop(&frame);
    if (want != 0) {
        shard_resize(sh, want);
        striped_release(s); /* lane_settle's hold for it */
    }
    if (drop)
        striped_release(s); /* the shard's: our last touch */
}

/*
 * The target refused a new lane's first drain (@rc). If ours is still the
 * lane's only task, undo it all: execute reports @rc, nothing queued, no
 * lane left. Else the drain is owed (lane_owe), or, if shutdown_now took
 * the lane's tasks back meanwhile, the lane is freed there; either way
 * ours was accepted: SEREX_OK.
 */
static int lane_refused(struct serex_striped *s, struct lane *l, uint64_t hash,
                        int rc)
{
    struct stripe_shard *sh = lane_shard(s, hash);
    struct serex__task *t = NULL;
    bool undo, drop = false;
    size_t want = 0;

    serex__spin_lock(&sh->lock);
    /* relaxed: wip changes under this lock only now (no drain runs) */
    undo = !l->unlinked &&
           atomic_load_explicit(&l->wip, memory_order_relaxed) == 1;
    if (undo) {
        serex__spin_lock(&l->pop_lock);
        t = serex__mpsc_pop_wait_ends(lane_queue(l)); /* ours: the only one */
        serex__spin_unlock(&l->pop_lock);
        atomic_store_explicit(&l->wip, 0, memory_order_relaxed);
        shard_unlink(sh, l, &want);
        shard_busy(sh, -1);
        striped_notify(s); /* an awaiter may have seen it busy */
        sh->submitted--; /* taken back: it was never accepted */
        drop = shard_unhold(sh);
    }
    serex__spin_unlock(&sh->lock);
    if (!undo) {
        lane_owe(s, l, rc, false);
        return SEREX_OK;
    }
    serex__task_free(t);
    lane_free(l); /* its count goes with it */
    if (s->bounded)
        striped_give_back(s, 1); /* nothing queued: its place is free */
    if (want != 0)
        shard_resize(sh, want);
    if (drop)
        striped_release(s); /* never the last: destroy overlaps no call */
    return rc;
}

/* The submission that made the lane busy: start its drain (the lane is
 * counted busy, and the drain's hold taken, in striped_push). */
static int lane_start(struct serex_striped *s, struct lane *l, uint64_t hash)
{
    int rc = serex__op_submit(s->target, &l->drain);

    return rc == SEREX_OK ? SEREX_OK : lane_refused(s, l, hash, rc);
}

/* --- submission --- */

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

/* striped_push: the key has no lane, and no memory was brought for one
 * (nothing taken; allocate one unlocked and push again). */
#define PUSH_NEEDS_LANE 1

/*
 * Queues @t on @key's lane; *@lane is set if it needs a drain started,
 * *@want if the shard's table wants another size (shard_resize). A new
 * key's lane is made of *@spare, allocated by the caller before the lock
 * (taken: *@spare is set to NULL); with none, PUSH_NEEDS_LANE.
 */
static int striped_push(struct serex_striped *s, struct stripe_shard *sh,
                        uint64_t key, uint64_t hash, struct serex__task *t,
                        struct lane **spare, struct lane **lane, size_t *want)
{
    struct lane *l;
    uint64_t prev;

    serex__spin_lock(&sh->lock);
    if (striped_flags(s) & (ST_SHUT | ST_BROKEN)) {
        serex__spin_unlock(&sh->lock);
        return SEREX_EREJECTED;
    }
    l = shard_find(sh, hash, key);
    if (l == NULL && *spare == NULL &&
        (*spare = serex__cache_alloc_local(SEREX__CLASS_128)) == NULL) {
        serex__spin_unlock(&sh->lock);
        return PUSH_NEEDS_LANE;
    }
    if (s->bounded && striped_take_places(s, l) != SEREX_OK) {
        serex__spin_unlock(&sh->lock);
        serex__room_full(); /* our frees call serex__room_made */
        return SEREX_EFULL;
    }
    if (l == NULL) {
        l = lane_new(s, sh, hash, key, *spare, want);
        *spare = NULL;
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
    if (prev == 0) { /* the lane is busy now, and its drain holds */
        shard_busy(sh, +1);
        shard_hold(sh);
    }
    serex__spin_unlock(&sh->lock);
    *lane = prev == 0 ? l : NULL;
    return SEREX_OK;
}

/* An execute call refused (any status but SEREX_OK): counted. */
static int striped_refused(struct serex_striped *s, int rc)
{
    if (serex__unlikely(rc != SEREX_OK))
        /* relaxed: a statistic, on the refusing path only */
        atomic_fetch_add_explicit(&s->rejected, 1, memory_order_relaxed);
    return rc;
}

int serex_striped_execute(serex_striped *s, uint64_t key, serex_fn fn,
                          void *arg)
{
    struct serex__task *t;
    struct lane *start = NULL, *spare = NULL;
    uint64_t hash = key_hash(key);
    struct stripe_shard *sh;
    size_t want = 0;
    int rc;

    if (s == NULL || fn == NULL)
        return SEREX_EINVAL;
    striped_retry_hint(s); /* owed drains first: their tasks are older */
    if ((t = serex__task_new(fn, arg)) == NULL)
        return striped_refused(s, SEREX_ENOMEM);
    serex__task_watch(&s->face, &s->metrics, t);
    sh = lane_shard(s, hash);
    /* No allocation under the shard lock: a new key's lane comes from the
     * thread's own cache list there, or, that list empty, is allocated
     * after the push unlocked, which then pushes again (see the essay). */
    rc = striped_push(s, sh, key, hash, t, &spare, &start, &want);
    if (rc == PUSH_NEEDS_LANE)
        rc = (spare = lane_alloc()) == NULL
                 ? SEREX_ENOMEM
                 : striped_push(s, sh, key, hash, t, &spare, &start, &want);
    if (spare != NULL) /* not needed after all */
        lane_free(spare);
    if (rc != SEREX_OK)
        serex__task_free(t);
    else if (start != NULL) /* the lane counts busy: nothing ends meanwhile */
        rc = lane_start(s, start, hash);
    if (want != 0)
        shard_resize(sh, want);
    return striped_refused(s, rc);
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
    striped_retry_hint(k.s); /* the target just made room: owed drains */
    serex__frame_push(&frame, &k.s->face);
    k.fn(k.arg);
    serex__frame_pop(&frame);
    keyless_end(k.s); /* our last touch */
}

static int striped_face_execute(serex_executor *ex, serex_fn fn, void *arg)
{
    struct serex_striped *s = striped_of(ex);
    struct keyless *k;
    int rc;

    striped_retry_hint(s); /* owed drains first: their tasks are older */
    if ((k = serex__cache_alloc(SEREX__CLASS_32)) == NULL)
        return striped_refused(s, SEREX_ENOMEM);
    *k = (struct keyless){{&keyless_class}, fn, arg, s};
    if (serex__entry_enter(&s->entry) & (ST_SHUT | ST_BROKEN)) {
        serex__entry_abort(&s->entry);
        rc = SEREX_EREJECTED;
    } else {
        /* relaxed: published to awaiters by our leave (release), which
         * they read before `keyless` (striped_state) */
        atomic_fetch_add_explicit(&s->keyless, 1, memory_order_relaxed);
        serex__life_hold(&s->life); /* the task's, until it ends */
        rc = serex__op_submit(s->target, &k->op);
        if (rc != SEREX_OK)
            keyless_end(s); /* never the last: destroy overlaps no call */
        serex__entry_leave(&s->entry);
    }
    if (rc != SEREX_OK)
        serex__cache_free(SEREX__CLASS_32, k);
    return striped_refused(s, rc);
}

static void striped_shutdown(serex_executor *ex)
{
    struct serex_striped *s = striped_of(ex);

    /* release: a producer or awaiter that takes a shard lock after seeing
     * or publishing the flag is ordered after it (see striped_push) */
    if (serex__entry_close(&s->entry, ST_SHUT, memory_order_release) & ST_SHUT)
        return; /* a second shutdown changes nothing */
    serex__life_bump(&s->life); /* the flag before a re-check */
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

/* What striped_take_all gathers. */
struct take {
    struct serex__task **tail; /* the tasks taken, in order */
    size_t count;
    struct lane *dead; /* lanes to free */
};

/*
 * Empties one chain's lanes, unlinking those left with nothing: the keys
 * have no task any more, so they have no lane (serex_striped_lanes says
 * 0). A lane whose drain is owed is freed here (it goes to the dead list,
 * with its hold); one whose drain is out is freed by whoever holds that
 * drain (`unlinked`). Under the shard lock. Returns whether the shard's
 * hold goes (the caller releases it once unlocked).
 */
static bool chain_take_all(struct serex_striped *s, struct stripe_shard *sh,
                           struct lane **pl, struct take *tk)
{
    bool drop = false;

    while (*pl != NULL) {
        struct lane *l = *pl;
        size_t n = lane_take_all(l, &tk->tail);
        uint64_t left;
        bool owed;

        if (s->lane_capacity != 0 && n != 0)
            lane_give_back(l, n);
        /* acq_rel: as a drain's decrement */
        left = atomic_fetch_sub_explicit(&l->wip, n, memory_order_acq_rel) - n;
        tk->count += n;
        sh->taken += n;
        if (left != 0) { /* a drain runs a task of it: it settles later */
            pl = &l->next;
            continue;
        }
        shard_busy(sh, -1);
        *pl = l->next; /* unlink without resizing: we are iterating */
        sh_count_add(sh, -1);
        serex__spin_lock(&s->owed_lock);
        owed = l->owed;
        if (owed)
            owed_remove(s, l); /* ours now: no retry can take it */
        serex__spin_unlock(&s->owed_lock);
        if (owed) {
            l->next = tk->dead;
            tk->dead = l;
            drop |= shard_unhold(sh);
        } else {
            l->unlinked = true;
        }
    }
    return drop;
}

/*
 * Takes every lane's queue (each in order) onto a private list; accounts
 * for what it took. The caller is a call inside the striped's life
 * (shutdown_now, destroy before it detaches): no hold it gives back here
 * is the last.
 */
static struct serex__task *striped_take_all(struct serex_striped *s,
                                            size_t *count)
{
    struct serex__task *first = NULL;
    struct take tk = {&first, 0, NULL};

    for (unsigned i = 0; i < SHARDS; i++) {
        struct stripe_shard *sh = &s->shards[i];
        size_t want;
        bool drop = false;

        serex__spin_lock(&sh->lock);
        for (size_t b = sh->moved; sh->old != NULL && b <= sh->old_mask; b++)
            drop |= chain_take_all(s, sh, &sh->old[b], &tk);
        for (size_t b = 0; b <= sh->mask; b++)
            drop |= chain_take_all(s, sh, &sh->buckets[b], &tk);
        want = shard_want(sh);
        serex__spin_unlock(&sh->lock);
        if (want != 0)
            shard_resize(sh, want);
        if (drop)
            striped_release(s);
    }
    while (tk.dead != NULL) {
        struct lane *next = tk.dead->next;

        lane_free(tk.dead);
        tk.dead = next;
    }
    if (s->bounded && tk.count != 0)
        striped_give_back(s, tk.count); /* the lanes' counts: done above */
    *count = tk.count;
    return first;
}

static size_t striped_shutdown_now(serex_executor *ex,
                                   serex_pending_fn on_pending, void *ctx)
{
    struct serex_striped *s = striped_of(ex);
    struct serex__task *list;
    size_t n;

    /* release: as in striped_shutdown */
    serex__entry_close(&s->entry, ST_SHUT, memory_order_release);
    list = striped_take_all(s, &n); /* each shard lock orders the flags */
    serex__life_bump(&s->life);     /* once: lanes emptied, flags set */
    serex__room_wake(); /* waiters for room retry: SEREX_EREJECTED */
    serex__task_hand_back_list(list, on_pending, ctx);
    return n;
}

/* Shut down with nothing busy, as await_internal.h asks. */
static enum serex__await_state striped_state(struct serex_striped *s)
{
    /* acquire: one load decides SHUT and that no keyless submission is in
     * flight (as serial_state; a keyless task is counted in `keyless`
     * before its submitter leaves) */
    uint64_t w = serex__entry_load(&s->entry);

    if (!(w & ST_SHUT))
        return SEREX__AWAIT_NOT;
    if (serex__entry_busy(w))
        return SEREX__AWAIT_SOON;
    /* seq_cst: read after the entry word (so it counts that submitter),
     * and the look that follows an awaiter counting itself */
    if (atomic_load_explicit(&s->keyless, memory_order_seq_cst) != 0)
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

/* Drains are owed, and retries are still made (not BROKEN). */
static bool striped_owes(struct serex_striped *s)
{
    /* seq_cst: an awaiter's look after counting itself, against
     * owed_add's store and lane_owe's look for awaiters */
    return atomic_load_explicit(&s->owed, memory_order_seq_cst) != 0 &&
           !(striped_flags(s) & ST_BROKEN);
}

/* One look of an awaiter: striped_state, and whether a drain is owed. */
static enum serex__await_state striped_look(void *p, bool *owed)
{
    struct serex_striped *s = p;
    enum serex__await_state st = striped_state(s);

    *owed = st == SEREX__AWAIT_NOT && striped_owes(s);
    return st;
}

/* An awaiter found a drain owed: resubmit what it can. Returns whether
 * one is still owed (the target still refuses). */
static bool striped_retry_cb(void *s)
{
    striped_retry(s);
    return striped_owes(s);
}

/*
 * await_termination: the helper's wait with a drain owed (life_internal.h),
 * which ends early when it sees one: nothing would wake us when the target
 * has room, so we resubmit it here, and while the target still refuses,
 * look again every SEREX__AWAIT_POLL_NS (or at the next bump). So an owed
 * drain never leaves an awaiter waiting for tasks nothing would start.
 */
static int striped_await(serex_executor *ex, int64_t timeout_ns)
{
    return serex__life_await_owed(&striped_of(ex)->life, striped_look,
                                  striped_retry_cb, striped_of(ex), timeout_ns);
}

static void striped_free(struct serex_striped *s)
{
    for (unsigned i = 0; i < SHARDS; i++) {
        serex__free(s->shards[i].buckets);
        serex__free(s->shards[i].old);
    }
    /* relaxed: the last holder; no one records any more */
    serex__metrics_free(
        atomic_load_explicit(&s->metrics, memory_order_relaxed));
    serex__free(s);
}

static bool striped_broken(serex_executor *ex)
{
    /* relaxed: a hint; serex__wrapper_settle looks again after waiting */
    return striped_flags(striped_of(ex)) & ST_BROKEN;
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

    /*
     * Wait for the accepted tasks (striped_await resubmits owed drains);
     * drop them once they never can run: the target refused a drain for
     * good (BROKEN) or has terminated. Then let go of each shard (its
     * hold goes now, or with its last drain: one on its way out, or queued
     * on a target nobody runs) and detach: the last holder frees it.
     */
    serex__wrapper_settle(ex, s->target, striped_broken, striped_drop_all);
    for (unsigned i = 0; i < SHARDS; i++) {
        struct stripe_shard *sh = &s->shards[i];
        bool drop;

        serex__spin_lock(&sh->lock);
        sh->detached = true;
        drop = sh->drains == 0; /* else its last drain releases it */
        serex__spin_unlock(&sh->lock);
        if (drop)
            (void)serex__life_release(&s->life); /* not detached yet */
    }
    if (serex__life_detach(&s->life))
        striped_free(s);
}

static void striped_stats(serex_executor *ex, serex_stats *out);

/* serex_dump: what it runs on, its lanes and bounds. */
static void striped_describe(serex_executor *ex, struct serex__dump *d)
{
    struct serex_striped *s = striped_of(ex);

    serex__dump_ptr(d, "target", s->target);
    serex__dump_u64(d, "lanes", serex_striped_lanes(s));
    serex__dump_u64(d, "batch", s->batch);
    serex__dump_u64(d, "queue_capacity", s->capacity);
    serex__dump_u64(d, "lane_capacity", s->lane_capacity);
}

/* Stripes: a striped's lanes run at once (task_watch_internal.h). */
static int striped_metrics_enable(serex_executor *ex,
                                  const serex_metrics_config *cfg)
{
    struct serex_striped *s = striped_of(ex);

    return serex__metrics_enable(&s->metrics, cfg, SEREX__METRICS_STRIPES);
}

static void striped_metrics(serex_executor *ex, serex_metrics *out)
{
    struct serex_striped *s = striped_of(ex);

    serex__metrics_read_slot(&s->metrics, out);
    /* relaxed: a statistic */
    out->yields = atomic_load_explicit(&s->yields, memory_order_relaxed);
}

/* A striped waits on its target (promise 7). */
static bool striped_waits_on(serex_executor *ex,
                             bool (*blocks)(serex_executor *))
{
    return blocks(striped_of(ex)->target);
}

static const struct serex__exec_class striped_class = {
    SEREX__CLASS_OPS(striped_face_execute, striped_shutdown,
                     striped_shutdown_now, striped_await),
    "striped",
    striped_stats,
    striped_waits_on,
    striped_destroy,
    striped_metrics_enable,
    striped_metrics,
    SEREX__CLASS_REG(struct serex_striped, face, reg, "striped",
                     striped_describe),
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
    s->owed_tail = &s->owed_head;
    for (unsigned i = 0; i < SHARDS; i++)
        serex__life_hold(&s->life); /* each shard's, until destroy */
    serex__exec_register(&s->face, s->name); /* serex_dump lists it */
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
 * The target took a lane's drain back or dropped it: it is shut down, and
 * the lane's tasks can never run from there. The drain is ours again:
 * owed, and the striped BROKEN (lane_owe): its tasks wait for the
 * striped's own shutdown_now or destroy, new ones are refused. If
 * shutdown_now had emptied the lane, it is freed with the drain's hold
 * instead. Not the user's: on_pending never sees it.
 */
static void lane_drain_dropped(struct serex__op *op,
                               serex_pending_fn on_pending, void *ctx)
{
    struct lane *l = serex__container_of(op, struct lane, drain);

    (void)on_pending;
    (void)ctx;
    lane_owe(l->s, l, SEREX_EREJECTED, false);
}

/* The target took a keyless task back or dropped it: the user's own task
 * goes on to on_pending (NULL: dropped), and the wrapper is done with. */
static void keyless_dropped(struct serex__op *op, serex_pending_fn on_pending,
                            void *ctx)
{
    struct keyless k = *serex__container_of(op, struct keyless, op);

    serex__cache_free(SEREX__CLASS_32, op);
    keyless_end(k.s); /* taken back: done, as far as awaiters go */
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
