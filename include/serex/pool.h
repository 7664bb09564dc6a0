/* SPDX-License-Identifier: MIT */
/*
 * serex/pool.h - the thread pool: fixed or elastic, bounded or unbounded.
 */
#ifndef SEREX_POOL_H
#define SEREX_POOL_H

#include "executor.h" /* serex_executor, SEREX_API */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Priority levels (since 0.2.0): each pool has SEREX_POOL_PRIORITIES
 * queues, 0 the highest. The pool's own executor is level
 * SEREX_POOL_PRIORITY_NORMAL; serex_pool_executor_at gives the others (as
 * the Windows thread pool's TP_CALLBACK_PRIORITY_HIGH, _NORMAL, _LOW).
 */
#define SEREX_POOL_PRIORITIES 3
#define SEREX_POOL_PRIORITY_HIGH 0
#define SEREX_POOL_PRIORITY_NORMAL 1 /* the pool itself */
#define SEREX_POOL_PRIORITY_LOW 2

/* max_blocking's value for "no compensating worker at all" (0 is the
 * default, 256). */
#define SEREX_POOL_BLOCKING_NONE (~0u)

/*
 * serex_cpu_count - the CPUs this process may use: what a pool of
 * `threads = 0` starts (since 0.2.0).
 *
 * Linux: the CPUs in the calling thread's affinity mask (taskset, a
 * cpuset; threads it starts inherit it), any number of them, capped by
 * the cgroup CPU quota of the process's cgroup and its parents, rounded
 * up (cgroup v2 cpu.max "150000 100000" is 1.5 CPUs: 2; v1
 * cpu.cfs_quota_us / cpu.cfs_period_us), as Go 1.25 sizes GOMAXPROCS.
 * Windows: the process's affinity mask (every active CPU when it spans
 * processor groups). Elsewhere: the online CPUs. Missing or malformed
 * cgroup files mean no quota. If the few kilobytes it reads the files
 * with cannot be allocated, the online CPUs.
 * The OS is read at each call: a container's quota changed at run time
 * shows in the next call (pools already made keep their size).
 * Returns:   at least 1; never fails.
 * Ownership: nothing changes hands; it keeps no state.
 * Threads:   any thread, any time.
 */
SEREX_API unsigned serex_cpu_count(void);

/*
 * Pool configuration; zero-initialise it (or pass NULL) for the defaults.
 * New fields are only ever added at the end. The fields from
 * on_thread_start on are since 0.2.0.
 */
/*
 * What a pool's task hooks are told about the task (on_task_begin and
 * on_task_finish in the config).
 */
typedef struct serex_task_info {
    serex_executor *executor; /* the pool (a priority face's tasks: the
                                 face, serex_pool_executor_at) */
    serex_fn fn;              /* what was submitted */
    void *arg;
    /* The task's id: no other task of this pool has the same while both
     * are known to the pool, and one thread's submissions get increasing
     * ids (in a pool with one shared queue, an elastic or a bounded one,
     * they increase in submission order across all threads). Not a dense
     * count: counting every submission in one shared word would cost the
     * scalable submission its point. The same id is the task's in the
     * probes and the flight recorder. 0 for a priority face's task. */
    uint64_t id;
    int64_t submit_ns; /* monotonic time of the submit (the metrics
                          clock, metrics.h, once enabled) */
    int64_t start_ns;  /* when it started on this worker (same clock) */
    unsigned worker;   /* the worker's index, as the thread hooks' */
} serex_task_info;

typedef struct serex_pool_config {
    unsigned threads;      /* core threads; 0: serex_cpu_count(), the
                              CPUs this process may use (at most max) */
    unsigned max_threads;  /* 0: = threads; > threads: grows when all busy */
    int64_t keep_alive_ns; /* idle time before an extra thread exits; 0: 60 s */
    size_t queue_capacity; /* tasks waiting to start, per priority level;
                              0: unbounded */
    const char *name;      /* thread names "<name>-<index>" (the hooks'
                              index below), and stats.name (cut
                              to 15 bytes); NULL: "serex", stats "pool" */

    /*
     * Worker thread hooks; NULL: none. Each runs on the worker thread
     * itself, with hook_ctx and the worker's index: its slot, in
     * [0, max_threads); no two live workers share one, and a slot an
     * extra thread left may be taken by a later one. The core threads
     * started by serex_pool_create have 0 .. threads - 1. "Extra" is a
     * count, not a slot: while more than `threads` workers live, any one
     * idle for keep_alive_ns exits, whatever its index (slot 0 included).
     * on_thread_start runs before the thread's first task. Returns: 0 to
     * let the thread serve; anything else refuses it: for a core thread,
     * serex_pool_create then fails with SEREX_EREJECTED (it stops and
     * joins every thread it started first, running their on_thread_stop,
     * and leaves nothing behind); an extra thread (max_threads > threads)
     * just ends, and the pool goes on with the threads it has (a later
     * submission that finds every worker busy may start another).
     * on_thread_stop runs after the thread's last task, once for every
     * thread whose on_thread_start returned 0 (or that had none); all
     * have returned when serex_await_termination says SEREX_OK.
     * Ownership: hook_ctx stays the caller's; it must outlive the pool.
     * Threads: serex_pool_create waits for its core threads' start hooks,
     * which run at the same time on their threads; an extra thread's
     * runs inside no caller. A hook runs as the pool's tasks do (await or
     * destroy of the pool from it say SEREX_EDEADLK) and must return.
     */
    int (*on_thread_start)(void *ctx, unsigned index);
    void (*on_thread_stop)(void *ctx, unsigned index);
    void *hook_ctx; /* given to every hook, thread and task hooks alike */

    /*
     * stack_size: each worker's stack in bytes; 0: the platform's
     * default. POSIX threads: rounded up to whole pages and at least
     * PTHREAD_STACK_MIN; Windows: the stack's reservation. The C11
     * <threads.h> back end (SEREX_THREADS=c11, the usual choice on glibc,
     * musl and FreeBSD) has no way to set one: there a non-zero
     * stack_size is SEREX_EINVAL (build with SEREX_THREADS=posix to use
     * it).
     */
    size_t stack_size;

    /*
     * Placement: the CPUs the workers may run on, numbered as the OS
     * numbers them; ncpus 0: anywhere (cpus is ignored). Every worker is
     * pinned to the whole set, or with cpu_per_worker, worker i to
     * cpus[i % ncpus] (i its index, as for the hooks). Applied by each
     * worker to itself before its start hook and its first task: Linux
     * sched_setaffinity, Windows SetThreadAffinityMask.
     * Returns (from serex_pool_create): SEREX_EINVAL where the platform
     * has no hard affinity (macOS, whose affinity is only a hint; the
     * BSDs; others), rather than ignoring it; for a CPU that is not
     * present, not online or not allowed to the process (Linux: its
     * cpuset), or 1024 or above (Linux) or 64 or above (Windows, which
     * serex does not pin across processor groups; 32 on 32-bit Windows);
     * and for ncpus > 0 with cpus NULL, or cpu_per_worker with ncpus 0.
     * Ownership: cpus is copied; the caller may free it on return.
     */
    const unsigned *cpus;
    size_t ncpus;
    bool cpu_per_worker;

    /*
     * Task hooks, for tracing (Java's beforeExecute and afterExecute):
     * on_task_start(hook_ctx) just before each task the pool runs, and
     * on_task_end(hook_ctx) just after it, on the worker that runs it. A
     * task here is what the pool runs: a serial's or a striped lane's
     * drain is one task that runs many of yours; a task handed back by
     * shutdown_now never ran, and no hook sees it. NULL: none; a pool
     * without task hooks pays one predictable branch per task.
     * Threads: every worker at once; each hook must return.
     */
    void (*on_task_start)(void *ctx);
    void (*on_task_end)(void *ctx);

    /*
     * Task hooks with the task's identity (Java's beforeExecute(Thread,
     * Runnable), Tokio's TaskMeta): as on_task_start and on_task_end
     * (after on_task_start, before on_task_end), with what the pool knows
     * of the task (serex_task_info, above). *task lives until the hook
     * returns; the finish hook gets the same fields as the begin hook
     * (arg may be freed by then: compare it, do not read through it). A
     * pool with any task hook (these two, or on_task_start and
     * on_task_end) reads the clock at each submit and around each task
     * (about 20 ns a read).
     * Threads: every worker at once; each hook must return.
     */
    void (*on_task_begin)(void *ctx, const serex_task_info *task);
    void (*on_task_finish)(void *ctx, const serex_task_info *task);

    /*
     * Tasks that block (since 0.3.0; docs/pool.md, "Blocking tasks").
     * max_blocking: while some of the pool's tasks are in blocking
     * regions (serex_blocking_begin), the pool may run up to one more
     * worker per such task, beyond max_threads, and at most max_blocking
     * more: a compensating worker, started when work waits and no worker
     * is free. 0: 256 (ForkJoinPool's spares: far above what tasks that
     * wait on tasks need, far below a system's thread limit);
     * SEREX_POOL_BLOCKING_NONE: none (regions are then only counted).
     * mark_waits: serex's own waits in the pool's tasks are blocking
     * regions while they sleep (serex_future_wait, serex_event_wait,
     * serex_latch_wait, serex_group_wait, serex_execute_wait, and
     * serex_await_termination of a serial, striped executor or limiter;
     * not a pool's or a manual executor's await); false: only explicit
     * regions.
     * starvation_ns: the starvation watchdog (serex_pool_create); 0: off
     * (it adds threads past max_threads, which is a promise of its own:
     * ask for it); negative: SEREX_EINVAL. .NET's is 500 ms.
     */
    unsigned max_blocking;
    bool mark_waits;
    int64_t starvation_ns;
} serex_pool_config;

/*
 * serex_pool_create - start a pool of worker threads.
 *
 * Core threads start at once and live until the pool is shut down. When
 * max_threads > threads, a submission that finds every worker busy starts an
 * extra thread (up to max_threads), at once or, if every slot is taken by
 * a thread still running its on_thread_stop, as soon as one is left; while
 * more than `threads` workers live, any one idle for keep_alive_ns exits
 * (an idle pool at its core count makes one wake-up per keep_alive_ns per
 * thread, nothing more). With queue_capacity > 0, execute says SEREX_EFULL while that many
 * tasks wait to start. When the queue empties, one idle worker polls it
 * for up to 50 us (pausing, then yielding) and the others park at once.
 * fork(): in a child process, a pool made before the fork refuses tasks
 * (SEREX_EREJECTED; its threads are not in the child), reports termination
 * at once, and serex_destroy only frees its memory. New pools work.
 * Thread hooks, stack size, placement and task hooks: see the config.
 * Tasks that block: see serex_blocking_begin. With starvation_ns > 0 a
 * watchdog thread starts with the pool: when tasks have waited to start
 * for starvation_ns while every worker was busy and none finished a
 * task, it counts one worker as stuck and starts one more (within
 * max_threads + max_blocking, at most one per starvation_ns; they leave
 * as compensating workers do). While the pool is idle it sleeps with no
 * deadline; while a worker is busy it looks twice per starvation_ns.
 * @cfg, cfg->name and cfg->cpus are copied. *@out is set on success, NULL
 * on failure.
 * Returns:   SEREX_OK; SEREX_EINVAL if out is NULL, max_threads is non-zero
 *            and below threads, keep_alive_ns or starvation_ns is
 *            negative, stack_size
 *            cannot be honoured, or the placement cannot (see the
 *            config); SEREX_EREJECTED if a core thread's on_thread_start
 *            refused it; SEREX_ENOMEM (also when a core thread or the
 *            watchdog cannot be started). No thread is left behind on
 *            failure.
 * Ownership: the caller owns the pool; free it with serex_destroy.
 * Threads:   any thread. execute never waits for a task, a hook or
 *            another thread's work and may be called from any number of
 *            threads at once (on an elastic pool it may start a thread,
 *            and join one that has already exited, under the pool's own
 *            lock); two pools share no state. An execute by another thread
 *            (a continuation, say) still returning when the pool is
 *            destroyed is safe: the pool stays until it has returned.
 */
SEREX_API int serex_pool_create(const serex_pool_config *cfg,
                                serex_executor **out);

/*
 * serex_pool_executor_at - the executor that queues tasks on @pool at
 * priority @level (since 0.2.0).
 *
 * A worker always takes a task of the highest level that has one, and
 * within a level tasks start in submission order, as on the pool. The
 * priority is strict, as in the Windows thread pool and folly's
 * executors: while higher levels always have work, lower ones never run
 * (they starve); use them for work that can wait, not for fairness.
 * Levels only order the start of tasks waiting for a worker: a running
 * task is never interrupted, and with several workers a lower task may
 * start while a higher one still waits for its worker to look.
 * The level's executor (its face) is one more way into the same pool:
 * any layer can run on it (a serial, a striped, a scheduler's target, a
 * group); its execute queues at @level and says what the pool's would
 * (SEREX_EREJECTED once the pool is shut down, SEREX_EFULL when
 * queue_capacity tasks wait at that level, SEREX_ENOMEM: a level's queue
 * is allocated at its first task). serex_shutdown,
 * serex_shutdown_now, serex_await_termination and serex_executor_stats
 * on a face act on the whole pool, exactly as on the pool itself;
 * shutdown_now hands back every level's waiting tasks, the highest level
 * first, each level in submission order. A pool that never made a face
 * keeps the speed of a single queue: the other levels cost its workers
 * one predictable branch per task.
 * Returns:   @pool itself for SEREX_POOL_PRIORITY_NORMAL; the face of
 *            @level, the same pointer on every call, for the others; NULL
 *            if @pool is NULL or not a pool (a face is taken for its
 *            pool), or @level >= SEREX_POOL_PRIORITIES.
 * Ownership: the pool owns its faces: they live until serex_destroy of
 *            the pool. serex_destroy of a face is a misuse, which stops
 *            the program (promise 8a, docs/contract.md).
 * Threads:   any thread, any number at once, until the pool is destroyed.
 */
SEREX_API serex_executor *serex_pool_executor_at(serex_executor *pool,
                                                 unsigned level);

/*
 * serex_pool_resize - change a pool's core count and its max at run time
 * (since 0.3.0).
 *
 * @threads and @max_threads mean what they mean in the config (0: online
 * CPUs, at most @max_threads; 0: = @threads). Growing starts the core
 * threads missing at once, before it returns (their on_thread_start runs
 * on them meanwhile); one that cannot be started (no memory, no thread)
 * or whose start hook refuses it is as an elastic pool's extra thread
 * that could not start: the pool goes on with the threads it has, and a
 * later submission that finds every worker busy starts another. A larger
 * max lets the pool grow as an elastic pool does.
 * Shrinking never interrupts a task: a worker above the new max (with the
 * compensation of blocked workers, max_blocking) retires as soon as it is
 * idle; one above the new core count, as an elastic pool's extra thread
 * does, once idle for keep_alive_ns. Every parked worker wakes once to
 * look. The shared queue's shards stay as create made them, and a pool
 * that create made fixed and unbounded keeps its per-worker queues (and
 * hands back each thread's tasks in its order, promise 2b) at any size.
 * The thread hooks' index may reach max_threads + max_blocking of the
 * largest max_threads a resize gave.
 * Returns:   SEREX_OK; SEREX_EINVAL if @pool is NULL or not a pool (a
 *            face is taken for its pool) or @max_threads is non-zero and
 *            below @threads; SEREX_EREJECTED once the pool is shut down
 *            (or in a child process after fork); SEREX_ENOMEM if the
 *            slots for @max_threads workers cannot be made (nothing
 *            changed).
 * Ownership: nothing changes hands.
 * Threads:   any thread, its own tasks included; calls are serialised
 *            under the pool's lock. It waits for no task (only for the
 *            thread starts it makes, under the pool's lock).
 */
SEREX_API int serex_pool_resize(serex_executor *pool, unsigned threads,
                                unsigned max_threads);

/*
 * serex_blocking_begin, serex_blocking_end - mark a region of a pool's
 * task that blocks: a wait on a future, a lock, a syscall (since 0.3.0).
 *
 * While a task is in a region its worker does not count as one that
 * serves: the pool hands the worker's own queued tasks to its shared
 * queue, sends the task's submissions there too, and, if work waits and
 * no worker is free, wakes one or starts a compensating worker (up to
 * max_threads plus one per task in a region, at most max_blocking more;
 * see the config). So tasks that wait for tasks they submitted, each in
 * a region, no longer deadlock a fixed pool: without the regions, two
 * workers whose tasks both wait for tasks queued behind them wait for
 * ever. A compensating worker that cannot be started (no memory, no
 * thread) is not: the pool goes on with the workers it has.
 * A compensating worker is an extra thread as an elastic pool's: it
 * retires once idle for keep_alive_ns while more workers serve than the
 * core count.
 * Regions nest: only the outermost begin and end count. Outside a pool's
 * task (another thread, a pool's thread hooks), both do nothing; so does
 * an end without a begin. A task must end every region it begins before
 * it returns: a worker that goes idle with a region open stops the
 * program with a message (a misuse, promise 8a).
 * Returns:   nothing.
 * Ownership: nothing changes hands.
 * Threads:   the task's own thread; a region belongs to the thread that
 *            began it. begin never waits (it may start a thread, under
 *            the pool's lock); end is two atomic operations at most.
 */
SEREX_API void serex_blocking_begin(void);
SEREX_API void serex_blocking_end(void);

/*
 * serex_blocking - run @fn(@arg) as a blocking region (since 0.3.0):
 * serex_blocking_begin, the call, serex_blocking_end.
 *
 * Returns:   SEREX_OK once @fn has returned; SEREX_EINVAL if @fn is NULL
 *            (nothing runs).
 * Ownership: @arg stays the caller's; @fn gets it.
 * Threads:   @fn runs on the calling thread, before the call returns.
 */
SEREX_API int serex_blocking(serex_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_POOL_H */
