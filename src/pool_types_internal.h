/* SPDX-License-Identifier: MIT */
/*
 * pool_types_internal.h - the pool's private state, shared by the files
 * that make up the pool: pool.c (the queue, batches, levels, idle and
 * wake-up, the worker loop, the executor) and pool_thread.c (each worker
 * thread's life: start, park, retire, grow, stop). Nothing outside the
 * pool includes it; tests see pool_internal.h.
 */
#ifndef SEREX_POOL_TYPES_INTERNAL_H
#define SEREX_POOL_TYPES_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common_internal.h"
#include "life_internal.h"
#include "pool_internal.h"
#include "pool_runq_internal.h"
#include "spinlock_internal.h"
#include "thread_internal.h"

#define ST_SHUTDOWN 1u /* no new tasks; workers leave once it is empty */
#define ST_STOP 2u     /* shutdown_now: workers leave at once */

#define SPIN_NS INT64_C(50000)         /* the longest poll of an empty queue */
#define SPIN_MIN_NS INT64_C(1000)       /* the shortest (see worker_spin) */
#define RING_MIN SEREX__POOL_RING_MIN  /* slots; 16 KiB, power of two */
#define REFILL_MAX (SEREX__RUNQ_CAP / 2) /* tasks a worker takes at once */
#define NEXT_RUN 3u /* next-slot tasks a worker runs in a row, at most */
#define SLOT_STEAL_NS INT64_C(20000) /* a slot task's wait before a steal */
#define DEFAULT_KEEP_ALIVE_NS (60 * SEREX__NS_PER_S)
#define NAME_MAX_LEN 15                /* what Linux keeps of a thread name */
#define LEVEL_RING_MIN 32u /* an extra level's first ring; power of two */
#define LEVELS_EXTRA (SEREX_POOL_PRIORITIES - 1) /* HIGH and LOW */

enum { LV_HIGH, LV_LOW }; /* which struct level: p->lv[LV_HIGH] */

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

#define INJECT_MAX 16u /* shards at most; a power of two */

struct slot {
    struct serex__runq q;       /* first: keeps it cache-line aligned */
    struct serex__runq_next next; /* the next-task slot */
    struct pool *p;
    serex__thread thread;
    enum slot_state state; /* under mu */
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
    _Atomic uint32_t moving; /* a steal or a local push in progress (for
                                shutdown_now); written by this worker */
    /* What shutdown_now took (only the call that set STOP uses them) */
    uint64_t taken_h, taken_t;      /* of q */
    bool next_taken;
    struct serex__task_rec next_rec;
    struct serex__task_rec *claim; /* room for them all, made at create */
    uint64_t claim_n, claim_next;
    bool report;           /* set before the thread starts: create waits
                              for its setup's verdict */
};

/*
 * A priority level other than NORMAL: its face and its queue, a ring
 * under one lock for both ends (see the essay).
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

    /* Read by every execute; written at shutdown. */
    _Alignas(SEREX__CACHELINE) _Atomic uint32_t state; /* ST_* flags */
    struct inject *inj;    /* the shared queue's shards */
    unsigned ninj;         /* how many: a power of two */
    _Atomic uint32_t levels_on;  /* 0 -> 1 once: a HIGH or LOW face was
                                    made; workers look at the levels */
    bool task_hooks;             /* on_task_start or on_task_end is set */
    bool thread_setup;           /* workers pin or run a start hook */

    /* Idle accounting: read by every execute, written on idle changes. */
    _Alignas(SEREX__CACHELINE) _Atomic uint32_t spinning; /* 0 or 1 */
    _Atomic int64_t spin_ns;   /* the spin window; only the spinner writes */
    _Atomic uint32_t sleepers; /* parked, without a token; under mu */

    /* Cold: parking, thread management, configuration. */
    _Alignas(SEREX__CACHELINE) serex__mutex mu;
    serex__cond work_cv;   /* parked workers wait here for a token */
    serex__cond term_cv;   /* await_termination waits here */
    unsigned wakeups;      /* tokens for parked workers, under mu */
    bool spin_handed;      /* under mu: a token carries `spinning` (see
                              pool_wake_one) */
    _Atomic unsigned live; /* LIVE slots; under mu (pool_thread.c) */
    unsigned retiring;     /* under mu: RETIRING slots */
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
    struct slot *slots;    /* max of them */
    struct serex__task_rec *claims; /* the slots' claim arrays */

    /* The configuration's hooks and placement; read-only. */
    int (*on_thread_start)(void *ctx, unsigned index);
    void (*on_thread_stop)(void *ctx, unsigned index);
    void (*on_task_start)(void *ctx);
    void (*on_task_end)(void *ctx);
    void *hook_ctx;
    size_t stack_size;
    unsigned *cpus; /* our copy; NULL when ncpus is 0 */
    size_t ncpus;
    bool cpu_per_worker;

    struct level lv[LEVELS_EXTRA]; /* HIGH and LOW */
};

/* --- between pool.c and pool_thread.c --- */

/* pool.c: the worker loop, a thread's body. */
int serex__pool_worker_main(void *arg);
/* pool.c: work anywhere (the idle re-check of the park handshake); a
 * next-task slot's counts for the spinner, or while no one spins. */
bool serex__pool_has_work(struct pool *p, bool spinner);
/* pool.c: a shrink of a grown, empty ring by an idle worker. */
void serex__pool_ring_try_shrink(struct pool *p);

/*
 * pool_thread.c: the life of the pool's threads (the essay is there).
 * Functions marked "under mu" need the caller to hold p->mu.
 */
int serex__pool_threads_start_core(struct pool *p);
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
