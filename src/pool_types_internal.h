/* SPDX-License-Identifier: MIT */
/*
 * pool_types_internal.h - the pool's private state, shared by the files
 * that make up the pool, one per mechanism (as Tokio splits its
 * scheduler): pool_inject.c (the shared queue's shards, and the stamps),
 * pool_local.c (each worker's run queue and next-task slot, taking and
 * stealing), pool_idle.c (the spinner, parking's re-check and wake-ups),
 * pool_level.c (the priority levels and their faces), pool_thread.c (each
 * worker thread's life: start, park, retire, grow, stop, resize),
 * pool_block.c (blocking regions), pool_watchdog.c (the starvation
 * watchdog) and pool.c (the worker loop, the executor: execute, shutdown,
 * shutdown_now, destroy, stats, create). The banner above each group of
 * prototypes says which file defines them. What a task's submission or take
 * runs across files is a static inline here, in its file's group (the stamps,
 * the push onto a shard and the look at one, the local push, the wake-up
 * decision, the take by level), so that the split adds no call to the busy
 * path.
 * Nothing outside the pool includes it; tests see pool_internal.h.
 */
#ifndef SEREX_POOL_TYPES_INTERNAL_H
#define SEREX_POOL_TYPES_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common_internal.h"
#include "life_internal.h"
#include "histogram_internal.h"
#include "observe_internal.h"
#include "op_internal.h"
#include "park_internal.h"
#include "pool_internal.h"
#include "pool_runq_internal.h"
#include "registry_internal.h"
#include "spinlock_internal.h"
#include "stats_internal.h"
#include "thread_internal.h"

#define ST_SHUTDOWN 1u /* no new tasks; workers leave once it is empty */
#define ST_STOP 2u     /* shutdown_now: workers leave at once */

#define SPIN_NS INT64_C(50000)         /* the longest poll of an empty queue */
#define SPIN_MIN_NS INT64_C(1000)       /* the shortest (see worker_spin) */
#define RING_MIN SEREX__POOL_RING_MIN  /* slots; 16 KiB, power of two */
#define REFILL_MAX (SEREX__RUNQ_CAP / 2) /* tasks a worker takes at once */
#define NEXT_RUN 3u /* next-slot tasks a worker runs in a row, at most */
#ifndef SLOT_STEAL_NS /* a build may say, to measure the choice */
#define SLOT_STEAL_NS INT64_C(20000) /* a slot task's wait before a steal */
#endif
#define DEFAULT_KEEP_ALIVE_NS (60 * SEREX__NS_PER_S)
#define NAME_MAX_LEN 15                /* what Linux keeps of a thread name */
#define LEVEL_RING_MIN 32u /* an extra level's first ring; power of two */
#define LEVELS_EXTRA (SEREX_POOL_PRIORITIES - 1) /* HIGH and LOW */
#define DEFAULT_MAX_BLOCKING 256u /* compensating workers at most */
#define SLOT_CHUNKS 32u   /* chunk 0, then chunks of SLOT_EXTRA << (k - 1) */
#define SLOT_EXTRA_LOG 3u /* the first chunk after chunk 0: 8 slots */

enum { LV_HIGH, LV_LOW }; /* which struct level: p->lv[LV_HIGH] */

#define WATCH_HOOKS 1u   /* a task hook is set: time every task */
#define WATCH_METRICS 2u /* metrics on: time a sample */

/* A slot's state, under mu (the life of its thread: pool_thread.c). */
enum slot_state {
    SLOT_FREE,     /* no thread, nothing to join */
    SLOT_LIVE,     /* a thread starting up or serving: counted in `live` */
    SLOT_RETIRING, /* a thread past keep-alive, running its stop hook:
                      counted in `retiring` */
    SLOT_EXITED    /* its thread made its last touch: to be joined */
};

struct pool;

/*
 * One shard of the shared queue: a growable ring under two spinlocks, one
 * per end (pool_inject.c's essay). A pool has one shard, or (fixed and
 * unbounded) one per worker up to INJECT_MAX, and each submitting thread
 * outside the pool uses the shard its number picks.
 */
struct inject {
    /* Producers' line: written by every execute from outside. */
    _Alignas(SEREX__CACHELINE) serex__spinlock put_lock;
    uint64_t put_tail;  /* under put_lock: the next slot to fill */
    uint64_t head_seen; /* under put_lock: a stale copy of head */
    uint64_t accepted;  /* under put_lock: execute calls taken */
    uint64_t rejected;  /* under put_lock: execute calls refused */

    /* Published ends, each written by one side, read by the other. */
    _Alignas(SEREX__CACHELINE) _Atomic uint64_t tail;
    _Alignas(SEREX__CACHELINE) _Atomic uint64_t head; /* under take_lock */

    /* Consumers' line. */
    _Alignas(SEREX__CACHELINE) serex__spinlock take_lock;
    uint64_t tail_seen; /* under take_lock: a stale copy of tail, >= head */

    /* The ring: changed under both locks, read under either. */
    _Alignas(SEREX__CACHELINE) struct serex__task_rec *ring;
    uint64_t mask;               /* slots - 1 */
    _Atomic uint32_t ring_grown; /* hint for idle workers: shrink it */
    uint64_t claim_h, claim_t;   /* what shutdown_now took (its call only) */
    uint64_t claim_next;         /* its hand-back's cursor */
};

/* A parked worker's token (struct slot's `token`). */
#define TOKEN_WAKE 1u  /* woken: look at the queues */
#define TOKEN_SPIN 2u  /* and the spinner's flag with it (pool_idle.c) */

#define INJECT_MAX 16u /* shards at most; a power of two */

struct slot {
    struct serex__runq q;       /* first: keeps it cache-line aligned */
    struct serex__runq_next next; /* the next-task slot */
    struct pool *p;
    unsigned index; /* its place: the hooks' index, its name's */
    serex__thread thread;
    enum slot_state state; /* under mu */
    /* Blocking regions (pool_block.c), its worker's only: */
    unsigned blocking;             /* regions open (nesting counts) */
    struct serex__blocker blocker; /* what the parking lot tells */
    /* Owner only: */
    unsigned tick;         /* tasks taken: the shared queue every 61st */
    unsigned next_run;     /* next-slot tasks run in a row */
    uint64_t batch_end;    /* q's tail after the last batch from a shard */
    bool seen;             /* a thief's candidate: a victim's slot task */
    unsigned seen_victim;
    uint64_t seen_stamp;
    int64_t seen_at;
    _Atomic uint64_t done; /* tasks run; written by this slot's worker */
    _Atomic uint64_t pushed;   /* its executes taken locally (relaxed) */
    _Atomic uint64_t refused;  /* its executes refused locally (relaxed) */
    /* metrics.h's counters, written by this slot's worker (relaxed) */
    _Atomic uint64_t steals, overflows, parks, unparks;
    /* What it runs now, for serex_dump: the task's fn, or NULL between
     * tasks (relaxed: a picture; written by this slot's worker) */
    _Atomic(serex_fn) running;
    _Atomic uint32_t moving; /* a steal or a local push in progress (for
                                shutdown_now); written by this worker */
    /* Parked (pool_idle.c's essay): the token a waker hands this worker,
     * 0 until then (TOKEN_*); the worker waits on this word alone. */
    _Atomic uint32_t token;
    struct slot *idle_next; /* under mu: the next parked worker */
    bool idle_listed;       /* under mu: on the list (a waker that took it
                               off stores its token after unlocking) */
    /* What shutdown_now took (only the call that set STOP uses them):
     * q's tasks and the slot's, in claim[0, claim_n) */
    struct serex__task_rec *claim; /* room for them all, made at create */
    uint64_t claim_n, claim_next;
    bool report;           /* set before the thread starts: create waits
                              for its setup's verdict */
};

/*
 * A priority level other than NORMAL: its face and its queue, a ring
 * under one lock for both ends (pool_level.c's essay).
 */
struct level {
    serex_executor face; /* what serex_pool_executor_at returns */
    struct pool *p;
    _Alignas(SEREX__CACHELINE) serex__spinlock lock;
    struct serex__task_rec *ring; /* under lock; NULL until a task comes */
    uint64_t mask;          /* under lock: slots - 1 (0 without a ring) */
    uint64_t rejected;      /* under lock: execute calls refused */
    _Atomic uint64_t head;  /* written under lock, read without */
    _Atomic uint64_t tail;  /* = tasks accepted; written under lock
                               (seq_cst: the park handshake), read without */
};

struct pool {
    serex_executor base;
    struct serex__reg reg; /* serex_dump's list */

    /* Read by every execute; written at shutdown. */
    _Alignas(SEREX__CACHELINE) _Atomic uint32_t state; /* ST_* flags */
    struct inject *inj;    /* the shared queue's shards */
    unsigned ninj;         /* how many: a power of two */
    _Atomic uint32_t levels_on;  /* 0 -> 1 once: a HIGH or LOW face was
                                    made; workers look at the levels */
    /* What watches each submission (WATCH_*): the task hooks (fixed at
     * create), metrics (set once by their enable). relaxed on the busy
     * path: a task submitted as it changes is timed or not. */
    _Atomic uint32_t watch;
    struct serex__metrics *_Atomic metrics; /* NULL: off */
    bool thread_setup;           /* workers pin or run a start hook */

    /* Idle accounting: read by every execute, written on idle changes. */
    _Alignas(SEREX__CACHELINE) _Atomic uint32_t spinning; /* 0 or 1 */
    _Atomic int64_t spin_ns;   /* the spin window; only the spinner writes */
    _Atomic uint32_t sleepers; /* parked, without a token; under mu: the
                                  length of `idle` */

    /* Cold: parking, thread management, configuration. */
    _Alignas(SEREX__CACHELINE) serex__mutex mu;
    serex__cond term_cv;   /* await_termination waits here */
    struct slot *idle;     /* under mu: parked workers without a token,
                              the last parked first */
    _Atomic unsigned live; /* LIVE slots; under mu (pool_thread.c) */
    unsigned retiring;     /* under mu: RETIRING slots */
    /* Sizes now (serex_pool_resize changes them): written under mu, read
     * anywhere (relaxed: hints; decisions are re-taken under mu) */
    _Atomic unsigned want_core, want_max;
    /* Workers in a blocking region (pool_block.c: seq_cst, the blocking
     * handshake), and workers the watchdog takes as stuck (pool_block.c;
     * under mu, read without) */
    _Atomic unsigned blocked, starved;
    /* 0 until the pool may have a thread to add: elastic at create, a
     * blocking region, a resize, the watchdog (sticky; pool_block.c) */
    _Atomic uint32_t growable;
    unsigned max_blocking; /* compensating workers at most (config) */
    int64_t starvation_ns; /* the watchdog's patience; 0: off (config) */
    /* The watchdog (pool_watchdog.c): its thread, its bell (what it
     * parks on), its quit flag; asleep: under mu, parked with no deadline
     * (the pool idle), to be rung by whoever wakes a worker. */
    serex__thread dog;
    bool dog_on;
    bool dog_asleep;
    _Atomic uint32_t dog_bell;
    _Atomic uint32_t dog_quit;
    bool mark_waits;       /* serex's waits in tasks are regions */
    bool shedding;         /* under mu: a resize made workers surplus: those
                              above the cap retire as soon as idle */
    bool grow_owed;        /* under mu: a start found every slot taken by a
                              live or retiring thread (pool_thread.c) */
    bool reap_owed;        /* under mu: `reap` holds a thread to join */
    serex__thread reap;    /* under mu: a retired thread whose slot went
                              to its successor at once */
    unsigned unreported;   /* under mu: create's threads still setting up */
    int start_rc;          /* under mu: the first refusal among them */
    _Atomic bool terminated; /* set under mu: shut down, every thread gone */
    struct serex__life life; /* executes still waking after their publish
                                (holders); destroy detaches */
    unsigned long wakes;   /* under mu: tokens handed out (for tests) */
    _Atomic unsigned long spin_resets; /* for tests: see spin_adapt */
    unsigned core, max;
    int64_t keep_alive_ns;
    size_t capacity;       /* 0: unbounded */
    uint32_t gen;          /* fork generation it was made in */
    bool batching;         /* fixed and unbounded: workers take batches */
    char name[NAME_MAX_LEN + 1];
    bool named; /* the config gave a name (stats show it) */
    /*
     * The workers' slots, in chunks that never move (a worker holds its
     * slot): chunk 0 has the `max` slots of create, chunk k > 0 has
     * SLOT_EXTRA << (k - 1), made under mu when a compensating worker or
     * a resize needs more (serex__pool_slot finds slot i). `nslots` is
     * how many are made: written under mu (release: the chunk before the
     * count), read anywhere (acquire).
     */
    struct slot *chunk[SLOT_CHUNKS];
    struct serex__task_rec *claims[SLOT_CHUNKS]; /* each chunk's claims */
    unsigned nslots0;                            /* chunk 0's slots */
    unsigned nchunks;                            /* under mu: chunks made */
    _Atomic unsigned nslots;                     /* slots made */

    /* The configuration's hooks and placement; read-only. */
    int (*on_thread_start)(void *ctx, unsigned index);
    void (*on_thread_stop)(void *ctx, unsigned index);
    void (*on_task_start)(void *ctx);
    void (*on_task_end)(void *ctx);
    void (*on_task_begin)(void *ctx, const serex_task_info *task);
    void (*on_task_finish)(void *ctx, const serex_task_info *task);
    void *hook_ctx;
    size_t stack_size;
    unsigned *cpus; /* our copy; NULL when ncpus is 0 */
    size_t ncpus;
    bool cpu_per_worker;

    struct level lv[LEVELS_EXTRA]; /* HIGH and LOW */
};

/* What shutdown_now took from a level: its ring, to hand back. */
struct level_claim {
    struct serex__task_rec *ring;
    uint64_t mask, h, t;
};

/*
 * A bigger ring for a full one (a shard's, or a level's), allocated with
 * no lock held: a push that finds no room says RING_NEED_ROOM and how many
 * slots it wants; its caller lets the lock go, allocates, takes the lock
 * again and pushes once more, and the push swaps the spare in if it is
 * still the size wanted (else it asks again). The replaced ring is freed
 * after the lock is let go too. A spinlock is then held only for the copy
 * of the live slots, never across the allocator.
 */
#define RING_NEED_ROOM 1 /* not a status: the push wants sp->slots slots */

struct ring_spare {
    struct serex__task_rec *ring; /* NULL, or sp->slots slots */
    uint64_t slots;
    struct serex__task_rec *old; /* replaced under the lock, freed after */
    bool nomem;                  /* the spare's allocation failed */
};

/*
 * Each task carries its submitting thread's number and that thread's
 * count of submissions (to any pool), so shutdown_now can hand back each
 * thread's tasks in the order it submitted them however they moved
 * between queues, and an outside thread always uses the same shard. A
 * thread-local count: no line is shared. 24 bits of thread (numbers are
 * reused after 16M threads: two threads with the same number still each
 * keep their order) and 40 of count, compared modulo 2^40
 * (serex__pool_stamp_cmp): right while a thread's oldest waiting task is
 * less than 2^39 of its submissions old.
 */
#define STAMP_SEQ_BITS 40
#define STAMP_SEQ_MASK ((UINT64_C(1) << STAMP_SEQ_BITS) - 1)

/* After a push: who must look at the queue (serex__pool_wake_need). */
enum wake_need { WAKE_NONE, WAKE_ONE, WAKE_GROW };

/* What an idle worker does next (serex__pool_worker_idle). */
enum idle_result { IDLE_AGAIN, IDLE_EXIT, IDLE_RETIRED };

/* --- slots (made in pool_thread.c) --- */

/* Slots made so far; acquire: the chunks they are in are visible. */
static inline unsigned serex__pool_nslots(struct pool *p)
{
    return atomic_load_explicit(&p->nslots, memory_order_acquire);
}

/* Slot @i, below serex__pool_nslots. */
static inline struct slot *serex__pool_slot(struct pool *p, unsigned i)
{
    unsigned j, k;

    if (serex__likely(i < p->nslots0))
        return &p->chunk[0][i];
    /* chunk k + 1 holds j in [E (2^k - 1), E (2^(k+1) - 1)), E the first
     * extra chunk's size */
    j = i - p->nslots0;
    k = serex__fls64((uint64_t)(j >> SLOT_EXTRA_LOG) + 1);
    return &p->chunk[k + 1][j - (((1u << k) - 1) << SLOT_EXTRA_LOG)];
}

/*
 * The most workers that may live now: the size's max, and one more per
 * worker in a blocking region or taken as stuck by the watchdog, up to
 * max_blocking more (pool_block.c's essay).
 */
static inline unsigned serex__pool_cap(struct pool *p)
{
    /* relaxed (max, starved): hints re-read under mu; seq_cst (blocked):
     * the load half of the blocking handshake (pool_block.c) */
    uint64_t extra = (uint64_t)atomic_load_explicit(&p->blocked,
                                                    memory_order_seq_cst) +
                     atomic_load_explicit(&p->starved, memory_order_relaxed);
    uint64_t cap = atomic_load_explicit(&p->want_max, memory_order_relaxed) +
                   (extra < p->max_blocking ? extra : p->max_blocking);

    return cap > UINT32_MAX ? UINT32_MAX : (unsigned)cap;
}

/* --- pool_inject.c: the shared queue's shards, and the stamps --- */
/* (The push onto a shard, the shard look and the stamps are static
 * inlines below: every execute from outside the pool runs them.) */

/* A ring of @slots task records, cache-line aligned (NULL: no memory). */
struct serex__task_rec *serex__pool_ring_alloc(uint64_t slots);
/* The spare, if it has @slots slots: taken (true). Else asks for them. */
bool serex__pool_spare_take(struct ring_spare *sp, uint64_t slots,
                            struct serex__task_rec **out);
/* serex__pool_ring_push's slow path: room for @n more in shard @q (a
 * fresh look at head, then a grow), or SEREX_EFULL. Under put_lock. */
int serex__pool_ring_make_room(struct pool *p, struct inject *q, uint64_t n,
                               struct ring_spare *sp);
/* Takes up to @max tasks from the shards (the first into *out, the rest
 * into @me's run queue), starting at @me's own. Returns how many. */
unsigned serex__pool_inject_take(struct pool *p, struct slot *me,
                                 struct serex__task_rec *out, unsigned max);
/* Appends @n tasks accepted already (a run queue's overflow) to shard @q:
 * SEREX_OK, or SEREX_ENOMEM when the ring could not grow. */
int serex__pool_inject_push_moved(struct pool *p, struct inject *q,
                                  struct serex__task_rec *r, unsigned n);
/* A shrink of a grown, empty ring by an idle worker. */
void serex__pool_ring_try_shrink(struct pool *p);
/* Shut down: every shard empty, and no push to one can come any more. */
bool serex__pool_shards_drained(struct pool *p);
/* The calling thread's first stamp: a number of its own, count 0. */
uint64_t serex__pool_stamp_thread(void);
/* Hand-back order of two task records: by thread, then by its count. */
int serex__pool_stamp_cmp(const void *a, const void *b);

/* The calling thread's last stamp; 0: no number yet. */
extern SEREX__THREAD_LOCAL uint64_t serex__pool_stamp_last;

static inline bool serex__pool_shard_nonempty(struct inject *q)
{
    /* seq_cst (both): the re-check half of the park handshake
     * (pool_idle.c's essay) */
    return atomic_load_explicit(&q->tail, memory_order_seq_cst) !=
           atomic_load_explicit(&q->head, memory_order_seq_cst);
}

static inline bool serex__pool_queue_nonempty(struct pool *p)
{
    for (unsigned i = 0; i < p->ninj; i++)
        if (serex__pool_shard_nonempty(&p->inj[i]))
            return true;
    return false;
}

/* Appends @n tasks to shard @q. Under put_lock. RING_NEED_ROOM: see
 * ring_spare. */
static inline int serex__pool_ring_push(struct pool *p, struct inject *q,
                                        struct serex__task_rec *r, unsigned n,
                                        struct ring_spare *sp)
{
    uint64_t t = q->put_tail, used = t - q->head_seen;

    if (serex__unlikely(used + n > q->mask + 1 ||
                        (p->capacity != 0 && used + n > p->capacity))) {
        int rc = serex__pool_ring_make_room(p, q, n, sp);

        if (rc != SEREX_OK)
            return rc;
    }
    for (unsigned i = 0; i < n; i++) {
        if (!p->batching) /* one shard: its index is the order (and the
                             caller's id of the task: observe_internal.h) */
            r[i].stamp = t + i;
        q->ring[(t + i) & q->mask] = r[i];
    }
    q->put_tail = t + n;
    /*
     * seq_cst: the publishing half of the park handshake (pool_idle.c's
     * essay): ordered before the producer's loads of spinning and
     * sleepers. Its release half makes the slots written above visible
     * to the worker that reads this tail with acquire.
     */
    atomic_store_explicit(&q->tail, t + n, memory_order_seq_cst);
    return SEREX_OK;
}

static inline uint64_t serex__pool_stamp_next(void)
{
    uint64_t s = serex__pool_stamp_last;

    if (serex__unlikely(s == 0))
        s = serex__pool_stamp_thread();
    s = (s & ~STAMP_SEQ_MASK) | ((s + 1) & STAMP_SEQ_MASK);
    if ((s & STAMP_SEQ_MASK) == 0) /* 0 means "no number yet" */
        s++;
    serex__pool_stamp_last = s;
    return s;
}

static inline struct inject *serex__pool_stamp_shard(struct pool *p,
                                                     uint64_t stamp)
{
    return &p->inj[(unsigned)(stamp >> STAMP_SEQ_BITS) & (p->ninj - 1)];
}

/* --- pool_local.c: run queues, next-task slots, stealing --- */
/* (The local push is a static inline below: pool_execute runs it for
 * every task a worker submits, and out of line it cost a call and a
 * frame, about 20 instructions a task.) */

/* A task in some worker's run queue? */
bool serex__pool_batches_nonempty(struct pool *p);
/* A task in some worker's next-task slot? */
bool serex__pool_nexts_nonempty(struct pool *p);
/* The spinner's look: a next-task slot that waited long enough? */
bool serex__pool_next_ripe(struct pool *p, struct slot *me);
/* Takes a task for @me (NORMAL only); *more: it took more than one. */
bool serex__pool_take(struct pool *p, struct slot *me,
                      struct serex__task_rec *out, bool *more);
/* @me's run queue is full: its older half to the shared queue, then
 * @r behind the rest (SEREX_ENOMEM: no room made). Cold. */
int serex__pool_runq_overflow(struct pool *p, struct slot *me,
                              const struct serex__task_rec *r);

/* The calling thread's slot, if it is a worker of a fixed, unbounded
 * pool (set by the worker loop, around its tasks). */
extern SEREX__THREAD_LOCAL struct slot *serex__pool_self_slot;

static inline struct slot *serex__pool_self(void)
{
    return serex__pool_self_slot;
}

/*
 * A local push or a steal moves tasks between queues in steps: it marks
 * its slot `moving` first, then reads the state flags (returned); at its
 * end it clears the mark. shutdown_now sets STOP, then waits until no
 * slot is moving: seq_cst (both loads and stores), so one of the two sees
 * the other (tests/model/pool_runq.pml). A flag in our own slot, not a
 * count for all: every such move writes it.
 */
static inline uint32_t serex__pool_moving_begin(struct pool *p,
                                                struct slot *me)
{
    /* seq_cst (both): the store-then-load against shutdown_now's (above) */
    atomic_store_explicit(&me->moving, 1, memory_order_seq_cst);
    return atomic_load_explicit(&p->state, memory_order_seq_cst);
}

static inline void serex__pool_moving_end(struct slot *me)
{
    /* release: our queues before shutdown_now's acquire load */
    atomic_store_explicit(&me->moving, 0, memory_order_release);
}

/*
 * The local push: a task that one of the pool's own workers submits goes
 * to that worker's next-task slot (the task there before moves to the back
 * of its run queue), or, for a yield (a serial or lane giving its thread
 * back after its batch: promise 4), to the back of its run queue. A full
 * run queue sends its older half to the shared queue first
 * (serex__pool_runq_overflow). It marks `moving` around the push, as a
 * steal does: shutdown_now then never claims the queues while a push is
 * half done, and a push that sees STOP (or SHUTDOWN) says
 * SEREX_EREJECTED without queuing.
 */
static inline int serex__pool_push_local(struct pool *p, struct slot *me,
                                         struct serex__task_rec r)
{
    struct serex__task_rec old;
    int rc = SEREX_OK;

    if (serex__unlikely(serex__pool_moving_begin(p, me) & ST_SHUTDOWN)) {
        rc = SEREX_EREJECTED;
    } else if (serex__unlikely(serex__yield_requested())) {
        if (!serex__runq_push(&me->q, &r))
            rc = serex__pool_runq_overflow(p, me, &r);
    } else {
        /* the slot's task moves behind the run queue (a thief may have
         * taken it meanwhile: then the slot is free) */
        if (!serex__next_free(&me->next) &&
            serex__next_take(&me->next, &old, NULL) &&
            !serex__runq_push(&me->q, &old) &&
            serex__pool_runq_overflow(p, me, &old) != SEREX_OK) {
            rc = SEREX_ENOMEM; /* no room for it: it stays, ours goes */
            r = old;
        }
        serex__next_put(&me->next, &r);
    }
    serex__pool_moving_end(me);
    /* counts written by this worker only */
    serex__stat_add(rc == SEREX_OK ? &me->pushed : &me->refused, 1);
    return rc;
}

/* --- pool_idle.c: idle workers and their wake-up --- */

/* Work anywhere (the idle re-check of the park handshake); a next-task
 * slot's counts for the spinner, or while no one spins. */
bool serex__pool_has_work(struct pool *p, bool spinner);
/* The wake-up serex__pool_wake_need decided (WAKE_NONE: nothing). */
void serex__pool_wake(struct pool *p, enum wake_need w);
/* Under mu: hands every parked worker a token (shutdown, a failed
 * create): each then looks at the pool's state. */
void serex__pool_wake_every(struct pool *p);
/* Under mu: @s goes on the list of parked workers (its token cleared), or
 * comes off it (it is on it). */
void serex__pool_idle_push(struct pool *p, struct slot *s);
void serex__pool_idle_remove(struct pool *p, struct slot *s);
/* The queue looked empty: spin, park, or leave. */
enum idle_result serex__pool_worker_idle(struct pool *p, struct slot *s);

/* After a push: what it takes for some worker to look at the queue. */
static inline enum wake_need serex__pool_wake_need(struct pool *p)
{
    /* seq_cst (both): the load half of the park handshake (pool_idle.c's
     * essay) */
    if (atomic_load_explicit(&p->spinning, memory_order_seq_cst) != 0)
        return WAKE_NONE;
    if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) != 0)
        return WAKE_ONE;
    /* seq_cst: 0 for a fixed pool that never blocked nor was resized (one
     * load, as the two fields it replaced); else the load half of the
     * blocking handshake (pool_block.c). relaxed (live): a hint; the grow
     * re-checks under mu */
    if (atomic_load_explicit(&p->growable, memory_order_seq_cst) != 0 &&
        atomic_load_explicit(&p->live, memory_order_relaxed) <
            serex__pool_cap(p))
        return WAKE_GROW;
    return WAKE_NONE;
}

/* A worker's push (a batch it took, a local push): the worker keeps the
 * pool alive, so no hold is taken. */
static inline void serex__pool_signal_work(struct pool *p)
{
    enum wake_need w = serex__pool_wake_need(p);

    if (w != WAKE_NONE) /* the busy path makes no call */
        serex__pool_wake(p, w);
}

/* --- pool_level.c: the priority levels HIGH and LOW, and their faces --- */

/* Appends a task to level @lv. Under its lock. RING_NEED_ROOM: see
 * ring_spare. */
int serex__pool_level_push(struct pool *p, struct level *lv, serex_fn fn,
                           void *arg, uint64_t submit, struct ring_spare *sp);
/* Takes level @lv's oldest task into *out; *more: others wait. */
bool serex__pool_level_pop(struct pool *p, struct level *lv,
                           struct serex__task_rec *out, bool *more);
/* A task in HIGH or LOW? (seq_cst: the park re-check) */
bool serex__pool_levels_nonempty(struct pool *p);
/* Shut down: HIGH and LOW empty, and no push to them can come. */
bool serex__pool_levels_drained(struct pool *p);
/* shutdown_now: takes every task of a level. */
void serex__pool_level_claim(struct level *lv, struct level_claim *c);
/* Hands back what serex__pool_level_claim took, in order, and frees it. */
size_t serex__pool_level_hand_back(struct level_claim *c,
                                   serex_pending_fn on_pending, void *ctx);
/* At create: each level's face, bound to @p. */
void serex__pool_levels_init(struct pool *p);

/* Takes a task by priority: HIGH, else NORMAL, else LOW. Inlined into
 * the worker loop, which runs it for every task once levels are on. */
static inline bool serex__pool_take_levels(struct pool *p, struct slot *me,
                                           struct serex__task_rec *out,
                                           bool *more)
{
    return serex__pool_level_pop(p, &p->lv[LV_HIGH], out, more) ||
           serex__pool_take(p, me, out, more) ||
           serex__pool_level_pop(p, &p->lv[LV_LOW], out, more);
}

/* --- pool.c: the worker loop and the executor --- */

struct serex__exec_class;

/* The worker loop, a thread's body. */
int serex__pool_worker_main(void *arg);
/* The pool's class (its ops, stats, destroy): the faces pass to it. */
extern const struct serex__exec_class serex__pool_class;
/* A face's execute: a push onto level @lv, and the wake-up it owes. */
int serex__pool_push_level(struct level *lv, serex_fn fn, void *arg);

/* --- pool_watch.c: timing, task hooks, metrics, the dump --- */

/* A submit that something watches: its time in r->t, if wanted. */
SEREX__NOINLINE void serex__pool_watch_submit(struct pool *p,
                                              struct serex__task_rec *r);
/* Runs a task with the hooks, the timing and the events it is owed. */
SEREX__NOINLINE void serex__pool_watch_run(struct pool *p, struct slot *s,
                                           const struct serex__task_rec *r);
/*
 * A submit's look at what watches it (a hook, metrics, the recorder, a
 * tool attached to the task probes): one predictable branch while nothing
 * does. Marks r->t when something wants the task (pool_watch.c); a
 * metrics-only pool's submits between two samples only count down.
 */
static inline void serex__pool_watch(struct pool *p, struct serex__task_rec *r)
{
    /* relaxed (all): see pool_watch.c (a task submitted as one of them
     * changes is watched or not, either is right) */
    uint32_t watch = atomic_load_explicit(&p->watch, memory_order_relaxed);
    uint32_t others = atomic_load_explicit(&serex__obs_flags,
                                           memory_order_relaxed) |
                      SEREX__PROBE_TASK_ACTIVE();

    if (serex__likely((watch | others) == 0))
        return;
    if (watch == WATCH_METRICS && others == 0 && serex__metrics_left > 1) {
        serex__metrics_left--; /* not a sample (serex__metrics_sample) */
        return;
    }
    serex__pool_watch_submit(p, r);
}
int serex__pool_metrics_enable(serex_executor *ex,
                               const serex_metrics_config *cfg);
void serex__pool_metrics(serex_executor *ex, serex_metrics *out);
void serex__pool_metrics_free(struct pool *p);
/* serex_dump's fields of a pool: its workers. */
void serex__pool_describe(serex_executor *ex, struct serex__dump *d);

/* --- pool_block.c: blocking regions --- */

/* The calling thread's slot while it runs a pool's tasks (NULL: none). */
extern SEREX__THREAD_LOCAL struct slot *serex__pool_worker_slot;
/* The worker loop's start: its regions, and (mark_waits) its blocker. */
void serex__pool_block_enter(struct pool *p, struct slot *s);
/* The loop's end: no region from here on (the stop hook's waits). */
void serex__pool_block_leave(struct slot *s);
/* Going idle: a task that left a region open is a misuse (a stop). */
void serex__pool_block_check(struct slot *s);

/* --- pool_watchdog.c: the starvation watchdog --- */

/* Starts it if the config asks (SEREX_ENOMEM: no thread); stops and joins
 * it (destroy, after the workers). */
int serex__pool_dog_start(struct pool *p);
void serex__pool_dog_stop(struct pool *p);
/* Under mu, by whoever wakes a parked worker: true if the watchdog was
 * asleep (the mark is cleared): then ring it (serex__pool_dog_ring). */
bool serex__pool_dog_wake_locked(struct pool *p);
void serex__pool_dog_ring(struct pool *p);

/* --- pool_thread.c: each worker thread's life --- */

/*
 * pool_thread.c: the life of the pool's threads (the essay is there).
 * Functions marked "under mu" need the caller to hold p->mu.
 */
int serex__pool_threads_start_core(struct pool *p);
/* Makes slots until @want are made (chunk 0 first: the create's max).
 * SEREX_OK, or SEREX_ENOMEM (those made stay). Under mu, or at create. */
int serex__pool_slots_reserve(struct pool *p, unsigned want);
/* Frees every chunk of slots. */
void serex__pool_slots_free(struct pool *p);
/* serex_pool_resize: new sizes, checked. SEREX_EREJECTED after shutdown,
 * SEREX_ENOMEM (nothing changed). */
int serex__pool_threads_resize(struct pool *p, unsigned core, unsigned max);
/* Every worker is busy: start one more, if the pool may grow. */
void serex__pool_threads_grow(struct pool *p);
/* A new worker: names and pins itself, runs on_thread_start. false:
 * refused, it has left the pool and must only return. */
bool serex__pool_thread_setup(struct pool *p, struct slot *s);
/* Parks until a token, work or shutdown; false: the worker retired. */
bool serex__pool_thread_park(struct pool *p, struct slot *s, bool spinner,
                             bool *handed);
/* The worker's last steps: its stop hook, then its last touch. */
void serex__pool_thread_exit(struct pool *p, struct slot *s, bool retired);
/* Joins every thread ever started (after termination). */
void serex__pool_threads_join(struct pool *p);

#endif /* SEREX_POOL_TYPES_INTERNAL_H */
