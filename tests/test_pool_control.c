/* SPDX-License-Identifier: MIT */
/*
 * test_pool_control.c - what a real application controls of a pool
 * (include/serex/pool.h): worker thread hooks, stack size, placement on
 * CPUs, task hooks and priority levels; and the thread layer's start
 * options (serex__thread_start_opts) that the pool's hooks mirror.
 *
 * Hooks and tasks run on worker threads, where cmocka cannot fail a
 * test: they count what they see (errors, marks, logs) and the test
 * asserts on the counts once the pool has terminated, which makes every
 * write of the workers visible. Whether a hook ran on the worker itself
 * is told by a thread-local mark (the one global state here, because it
 * is the thread's): a start hook sets it, every task and the stop hook
 * check it, and the test's own thread must never get it.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#  define _GNU_SOURCE /* pthread_getattr_np, sched_getaffinity */
#endif

#include "test_util.h"

#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#  include <pthread.h> /* pthread_getattr_np: a worker's stack size */
#  include <sched.h>   /* sched_getaffinity: read back independently */
#endif
#if !defined(_WIN32)
#  include <signal.h>   /* SIGABRT: the death test */
#  include <sys/wait.h> /* waitpid */
#  include <unistd.h>   /* fork, pipe */
#endif

#include "pool_internal.h"

#define NTASKS 300
#define MAXW 8 /* worker slots a test uses, at most */
#define LOG_MAX 2048

/* What the calling thread is to the hooks: 0 never seen, then started,
 * then stopped. Only a start hook moves it from 0. */
enum mark { MARK_NONE, MARK_STARTED, MARK_STOPPED };
static _Thread_local int thread_mark;
static _Thread_local unsigned thread_index;
static _Thread_local long thread_tasks;
static _Thread_local int in_task; /* between on_task_start and _end */

/* A task that occupies its worker until released. */
struct blocker {
    serex_event *started;
    serex_event *release;
    _Atomic int index; /* the worker slot it occupies, by the start hook */
};

struct fixture;

/* A task's argument: which test, which task. */
struct item {
    struct fixture *f;
    int id;
};

struct fixture {
    serex_executor *pool;
    struct blocker block;
    serex_event *done;   /* the last counted task, or a hook, signals */
    serex_event *hooked; /* a hook of interest ran (per test) */
    _Atomic long ran;    /* tasks run */
    _Atomic long target; /* ran at which done is signalled */
    /* thread hooks */
    _Atomic int starts, stops, errors, refused;
    _Atomic int starts_at[MAXW], stops_at[MAXW];
    _Atomic long tasks_seen;    /* thread_tasks summed by the stop hooks */
    _Atomic int refuse;         /* the index a start hook refuses; -1: none,
                                MAXW: every index but 0 */
    _Atomic int signal_stop_at; /* stop hook of this index signals hooked;
                                   MAXW: any index */
    /* task hooks and order: written by one worker at a time */
    _Atomic long task_starts, task_ends;
    int log[LOG_MAX];
    _Atomic int nlog;
    struct item items[LOG_MAX];
    /* placement */
    unsigned want[MAXW][2];   /* per index: the CPUs it must see (n, cpu) */
    _Atomic int placed[MAXW]; /* 1: matched, -1: differed */
    _Atomic int arrived;      /* meeting point of two tasks */
    /* what shutdown_now handed back */
    int pending[LOG_MAX];
    int npending;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    assert_int_equal(serex_event_create(&f->block.started), SEREX_OK);
    assert_int_equal(serex_event_create(&f->block.release), SEREX_OK);
    assert_int_equal(serex_event_create(&f->done), SEREX_OK);
    assert_int_equal(serex_event_create(&f->hooked), SEREX_OK);
    atomic_store(&f->refuse, -1);
    atomic_store(&f->signal_stop_at, -1);
    atomic_store(&f->target, -1);
    for (int i = 0; i < LOG_MAX; i++)
        f->items[i] = (struct item){f, i};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    serex__alloc_fail_nth(0);
    if (f->pool != NULL) {
        serex_event_signal(f->block.release);
        assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    }
    serex_event_destroy(f->block.started);
    serex_event_destroy(f->block.release);
    serex_event_destroy(f->done);
    serex_event_destroy(f->hooked);
    free(f);
    return 0;
}

/* --- tasks --- */

static void block_task(void *arg)
{
    struct blocker *b = arg;

    atomic_store(&b->index, thread_mark == MARK_STARTED ? (int)thread_index
                                                        : -1);
    serex_event_signal(b->started);
    serex_event_wait(b->release, TEST_TIMEOUT);
}

/* Occupies the only worker of a 1-thread pool (or the pool @ex). */
static void occupy_worker(struct fixture *f, serex_executor *ex)
{
    assert_int_equal(serex_execute(ex, block_task, &f->block), SEREX_OK);
    assert_signalled(f->block.started);
}

static void count_done(struct fixture *f)
{
    /* relaxed (both): the event orders what the test reads */
    if (atomic_fetch_add_explicit(&f->ran, 1, memory_order_relaxed) + 1 ==
        atomic_load_explicit(&f->target, memory_order_relaxed))
        serex_event_signal(f->done);
}

/* Counts; checks that the thread's start hook ran first, and not its stop
 * hook yet. */
static void marked_task(void *arg)
{
    struct item *it = arg;

    if (thread_mark != MARK_STARTED)
        atomic_fetch_add(&it->f->errors, 1);
    thread_tasks++;
    count_done(it->f);
}

/* Logs its id (one worker, or one at a time: a serial). */
static void log_task(void *arg)
{
    struct item *it = arg;
    struct fixture *f = it->f;
    /* relaxed: one writer at a time; termination or the event publishes */
    int n = atomic_load_explicit(&f->nlog, memory_order_relaxed);

    if (n < LOG_MAX)
        f->log[n] = it->id;
    atomic_store_explicit(&f->nlog, n + 1, memory_order_relaxed);
    count_done(f);
}

/* --- thread hooks --- */

static int start_hook(void *ctx, unsigned index)
{
    struct fixture *f = ctx;
    int refuse = atomic_load(&f->refuse);

    if (thread_mark != MARK_NONE || index >= MAXW)
        atomic_fetch_add(&f->errors, 1);
    atomic_fetch_add(&f->starts, 1);
    if (index < MAXW)
        atomic_fetch_add(&f->starts_at[index], 1);
    if (refuse == (int)index || (refuse == MAXW && index != 0)) {
        atomic_fetch_add(&f->refused, 1);
        serex_event_signal(f->hooked);
        return -1;
    }
    thread_mark = MARK_STARTED;
    thread_index = index;
    return 0;
}

static void stop_hook(void *ctx, unsigned index)
{
    struct fixture *f = ctx;

    if (thread_mark != MARK_STARTED || thread_index != index)
        atomic_fetch_add(&f->errors, 1);
    thread_mark = MARK_STOPPED;
    atomic_fetch_add(&f->tasks_seen, thread_tasks);
    atomic_fetch_add(&f->stops, 1);
    if (index < MAXW)
        atomic_fetch_add(&f->stops_at[index], 1);
    if (atomic_load(&f->signal_stop_at) == (int)index ||
        atomic_load(&f->signal_stop_at) == MAXW)
        serex_event_signal(f->hooked);
}

static serex_pool_config hooked_config(struct fixture *f, unsigned threads)
{
    serex_pool_config cfg = {
        .threads = threads,
        .on_thread_start = start_hook,
        .on_thread_stop = stop_hook,
        .hook_ctx = f,
    };

    return cfg;
}

static void run_marked_tasks(struct fixture *f, serex_executor *ex, long n)
{
    atomic_store(&f->target, atomic_load(&f->ran) + n);
    for (long i = 0; i < n; i++)
        assert_int_equal(serex_execute(ex, marked_task, &f->items[0]),
                         SEREX_OK);
    assert_signalled(f->done);
}

static void pool_thread_hooks_run_on_each_worker_around_its_tasks(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = hooked_config(f, 3);

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    /* create waits for no hook here, but every one runs exactly once */
    run_marked_tasks(f, f->pool, NTASKS);
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    /* every stop hook has returned once await says so */
    assert_int_equal(atomic_load(&f->starts), 3);
    assert_int_equal(atomic_load(&f->stops), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(atomic_load(&f->starts_at[i]), 1);
        assert_int_equal(atomic_load(&f->stops_at[i]), 1);
    }
    /* each task ran after its thread's start hook, none after its stop */
    assert_int_equal(atomic_load(&f->errors), 0);
    assert_int_equal(atomic_load(&f->tasks_seen), NTASKS);
    assert_int_equal(thread_mark, MARK_NONE); /* never on this thread */
}

static void pool_thread_hooks_cover_extra_threads(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = hooked_config(f, 1);
    int busy, idle;

    cfg.max_threads = 2;
    cfg.keep_alive_ns = MS;
    atomic_store(&f->signal_stop_at, MAXW);
    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    occupy_worker(f, f->pool);
    /* every worker is busy: this task starts the extra thread. Which slot
     * holds the blocker is a race: if the core thread had not parked yet
     * when the blocker came, the blocker itself started slot 1. */
    run_marked_tasks(f, f->pool, 1);
    assert_int_equal(atomic_load(&f->starts_at[0]), 1);
    assert_int_equal(atomic_load(&f->starts_at[1]), 1);
    busy = atomic_load(&f->block.index);
    assert_true(busy == 0 || busy == 1);
    idle = 1 - busy;
    /* the idle one is beyond the core count for keep_alive: it retires
     * (either slot may: the pool keeps a count of threads, not which) and
     * its stop hook runs; the busy one stays */
    assert_signalled(f->hooked);
    assert_int_equal(atomic_load(&f->stops_at[idle]), 1);
    assert_int_equal(atomic_load(&f->stops_at[busy]), 0);
    assert_int_equal(atomic_load(&f->stops), 1);
    serex_event_signal(f->block.release);
    assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    f->pool = NULL;
    assert_int_equal(atomic_load(&f->starts), atomic_load(&f->stops));
    assert_int_equal(atomic_load(&f->stops_at[busy]), 1);
    assert_int_equal(atomic_load(&f->errors), 0);
    assert_int_equal(atomic_load(&f->tasks_seen), 1);
}


static void pool_refused_core_thread_fails_create_and_leaves_nothing(
    void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = hooked_config(f, 4);
    serex_executor *ex = (serex_executor *)f; /* must be overwritten */
    int base = test_thread_count();

    atomic_store(&f->refuse, 2);
    assert_int_equal(serex_pool_create(&cfg, &ex), SEREX_EREJECTED);
    assert_null(ex);
    /* all four start hooks ran; the three accepted threads were stopped
     * (their stop hooks run) and joined before create returned */
    assert_int_equal(atomic_load(&f->starts), 4);
    assert_int_equal(atomic_load(&f->refused), 1);
    assert_int_equal(atomic_load(&f->stops), 3);
    assert_int_equal(atomic_load(&f->stops_at[2]), 0);
    assert_int_equal(atomic_load(&f->errors), 0);
    test_assert_threads_back_to(base);
}

static void pool_refused_extra_thread_leaves_the_pool_working(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = hooked_config(f, 1);
    int64_t deadline;

    cfg.max_threads = 3;
    atomic_store(&f->refuse, MAXW); /* every extra thread */
    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    occupy_worker(f, f->pool);
    atomic_store(&f->target, 1);
    assert_int_equal(serex_execute(f->pool, marked_task, &f->items[0]),
                     SEREX_OK);
    assert_signalled(f->hooked); /* an extra thread was refused */
    deadline = test_now_ns() + TEST_TIMEOUT;
    while (serex__pool_threads(f->pool) != 1 && test_now_ns() < deadline)
        test_sleep_ns(MS);
    assert_int_equal(serex__pool_threads(f->pool), 1);
    serex_event_signal(f->block.release);
    assert_signalled(f->done); /* the core thread ran it */
    assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    f->pool = NULL;
    assert_true(atomic_load(&f->refused) >= 1);
    assert_int_equal(atomic_load(&f->stops),
                     atomic_load(&f->starts) - atomic_load(&f->refused));
    assert_int_equal(atomic_load(&f->stops_at[0]), 1);
    assert_int_equal(atomic_load(&f->errors), 0);
}

/* A task that came through a face, waiting for the face or the pool,
 * would wait for itself: SEREX_EDEADLK (promise 7). */
static void pool_face_task_waiting_for_its_pool_is_edeadlk(void **state)
{
    struct fixture *f = *state;
    struct test_self_wait w = {.done = f->done};

    assert_int_equal(serex_pool_create(NULL, &f->pool), SEREX_OK);
    w.ex = serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_HIGH);
    assert_int_equal(serex_execute(w.ex, test_self_wait_task, &w), SEREX_OK);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w);
    w.ex = f->pool;
    assert_int_equal(
        serex_execute(serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_LOW),
                      test_self_wait_task, &w),
        SEREX_OK);
    assert_signalled(f->done);
    test_assert_all_edeadlk(&w);
}

/* --- the thread layer's start options --- */

struct opts_probe {
    _Atomic int step; /* 1 start hook, 2 fn, 3 stop hook; -1: disorder */
    int refuse;
    int mark_in_fn;
};

static void opts_step(struct opts_probe *p, int want)
{
    if (atomic_load(&p->step) + 1 == want)
        atomic_store(&p->step, want);
    else
        atomic_store(&p->step, -1);
}

static int opts_start(void *ctx, unsigned index)
{
    struct opts_probe *p = ctx;

    opts_step(p, index == 7 ? 1 : -100);
    thread_mark = MARK_STARTED;
    return p->refuse;
}

static int opts_fn(void *arg)
{
    struct opts_probe *p = arg;

    p->mark_in_fn = thread_mark;
    opts_step(p, 2);
    return 0;
}

static void opts_stop(void *ctx, unsigned index)
{
    struct opts_probe *p = ctx;

    opts_step(p, thread_mark == MARK_STARTED && index == 7 ? 3 : -100);
}

static void thread_start_opts_runs_hooks_around_fn_on_the_thread(void **state)
{
    struct opts_probe p = {0};
    struct serex__thread_opts o = {.on_start = opts_start,
                                   .on_stop = opts_stop,
                                   .hook_ctx = &p,
                                   .index = 7};
    serex__thread t;

    (void)state;
    assert_int_equal(serex__thread_start_opts(&t, opts_fn, &p, &o), SEREX_OK);
    /* the call returned after on_start: step is at least 1 */
    assert_true(atomic_load(&p.step) >= 1);
    serex__thread_join(t);
    assert_int_equal(atomic_load(&p.step), 3);
    assert_int_equal(p.mark_in_fn, MARK_STARTED);
    assert_int_equal(thread_mark, MARK_NONE);

    /* refused: SEREX_EREJECTED, the thread is joined, fn and on_stop
     * never run */
    atomic_store(&p.step, 0);
    p.refuse = 1;
    assert_int_equal(serex__thread_start_opts(&t, opts_fn, &p, &o),
                     SEREX_EREJECTED);
    assert_int_equal(atomic_load(&p.step), 1);
}

/* --- stack size --- */

struct stack_probe {
    size_t size; /* what the worker's stack has, or 0 if unknown */
    serex_event *done;
};

static void stack_task(void *arg)
{
    struct stack_probe *sp = arg;

#if defined(__linux__) && defined(SEREX__THREADS_POSIX)
    pthread_attr_t attr;

    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstacksize(&attr, &sp->size);
        pthread_attr_destroy(&attr);
    }
#elif defined(_WIN32)
    ULONG_PTR lo, hi;

    GetCurrentThreadStackLimits(&lo, &hi);
    sp->size = (size_t)(hi - lo);
#endif
    serex_event_signal(sp->done);
}

static int stack_fn(void *arg)
{
    stack_task(arg);
    return 0;
}

/* The stack a thread gets by default, where it can be read; else 0. */
static size_t default_stack_size(struct fixture *f)
{
    struct stack_probe sp = {0, f->done};
    serex__thread t;

    assert_int_equal(serex__thread_start(&t, stack_fn, &sp), SEREX_OK);
    assert_signalled(f->done);
    serex__thread_join(t);
    return sp.size;
}

static void pool_stack_size_is_honoured_or_refused(void **state)
{
    struct fixture *f = *state;
    /* above the default, so a default stack fails the check; not a whole
     * page, so the rounding is exercised */
    const size_t want = default_stack_size(f) + (1u << 20) + 123;
    serex_pool_config cfg = {.threads = 1, .stack_size = want};
    struct serex__thread_opts o = {.stack_size = want};
    struct stack_probe sp = {0, f->done};
    serex__thread t;

#if defined(SEREX__THREADS_C11)
    /* <threads.h> cannot ask for a stack size: refused, not ignored */
    serex_executor *ex = (serex_executor *)f;

    assert_int_equal(serex_pool_create(&cfg, &ex), SEREX_EINVAL);
    assert_null(ex);
    assert_int_equal(serex__thread_start_opts(&t, stack_fn, &sp, &o),
                     SEREX_EINVAL);
#else
    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    assert_int_equal(serex_execute(f->pool, stack_task, &sp), SEREX_OK);
    assert_signalled(f->done);
#  if (defined(__linux__) && defined(SEREX__THREADS_POSIX)) || defined(_WIN32)
    assert_true(sp.size >= want);
#  endif
    sp.size = 0;
    assert_int_equal(serex__thread_start_opts(&t, stack_fn, &sp, &o), SEREX_OK);
    assert_signalled(f->done);
    serex__thread_join(t);
#  if (defined(__linux__) && defined(SEREX__THREADS_POSIX)) || defined(_WIN32)
    assert_true(sp.size >= want);
#  endif
#endif
}

/* --- placement --- */

/* The CPUs this thread may run on match @want[0..n)? Read with serex's
 * getter, and on Linux with sched_getaffinity too. */
static bool affinity_is(const unsigned *want, size_t n)
{
    unsigned got[64];
    size_t k = serex__thread_get_affinity(got, 64);

    if (k != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            return false;
#if defined(__linux__)
    {
        cpu_set_t set;

        if (sched_getaffinity(0, sizeof set, &set) != 0 ||
            (size_t)CPU_COUNT(&set) != n)
            return false;
        for (size_t i = 0; i < n; i++)
            if (!CPU_ISSET(want[i], &set))
                return false;
    }
#endif
    return true;
}

/* Records whether its worker sits where f->want says for its index, then
 * waits until two such tasks have arrived (so two workers run them). */
static void placed_task(void *arg)
{
    struct item *it = arg;
    struct fixture *f = it->f;
    unsigned i = thread_index;
    int64_t deadline = test_now_ns() + TEST_TIMEOUT;

    atomic_store(&f->placed[i],
                 affinity_is(&f->want[i][1], f->want[i][0]) ? 1 : -1);
    atomic_fetch_add(&f->arrived, 1);
    while (atomic_load(&f->arrived) < it->id && test_now_ns() < deadline)
        serex__thread_yield();
    count_done(f);
}

/* Two CPUs to test with, ascending: the last two this thread may use
 * (one twice if it has one; 0 where affinity is unknown). */
static void two_cpus(unsigned cpu[2])
{
    unsigned mine[1024];
    size_t n = serex__thread_get_affinity(mine, 1024);

    if (n > 1024)
        n = 1024;
    cpu[0] = n >= 2 ? mine[n - 2] : n == 1 ? mine[0] : 0;
    cpu[1] = n >= 1 ? mine[n - 1] : 0;
}

/* Where the platform has no hard affinity, create must say so. */
static bool placement_supported(void)
{
    unsigned cpu = 0;

#if defined(__linux__) || defined(_WIN32)
    assert_int_equal(serex__cpus_check(&cpu, 1), SEREX_OK);
#endif
    return serex__cpus_check(&cpu, 1) == SEREX_OK;
}

static void pool_workers_are_pinned_to_the_set(void **state)
{
    struct fixture *f = *state;
    unsigned cpu[2];
    serex_pool_config cfg = hooked_config(f, 2);

    two_cpus(cpu);
    cfg.cpus = &cpu[1];
    cfg.ncpus = 1;
    if (!placement_supported()) {
        assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_EINVAL);
        assert_null(f->pool);
        return;
    }
    for (int i = 0; i < 2; i++) {
        f->want[i][0] = 1;
        f->want[i][1] = cpu[1];
    }
    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    cpu[1] = 999; /* the pool copied the set */
    atomic_store(&f->target, 2);
    f->items[2].id = 2;
    for (int i = 0; i < 2; i++)
        assert_int_equal(serex_execute(f->pool, placed_task, &f->items[2]),
                         SEREX_OK);
    assert_signalled(f->done);
    assert_int_equal(atomic_load(&f->placed[0]), 1);
    assert_int_equal(atomic_load(&f->placed[1]), 1);
    assert_int_equal(thread_mark, MARK_NONE);
}

static void pool_cpu_per_worker_pins_worker_i_to_cpu_i(void **state)
{
    struct fixture *f = *state;
    unsigned cpu[2], set[2];
    serex_pool_config cfg = hooked_config(f, 2);

    two_cpus(cpu);
    set[0] = cpu[1]; /* reversed: index 0 gets the higher one */
    set[1] = cpu[0];
    cfg.cpus = set;
    cfg.ncpus = 2;
    cfg.cpu_per_worker = true;
    if (!placement_supported()) {
        assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_EINVAL);
        return;
    }
    for (int i = 0; i < 2; i++) {
        f->want[i][0] = 1;
        f->want[i][1] = set[i];
    }
    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    atomic_store(&f->target, 2);
    f->items[2].id = 2;
    for (int i = 0; i < 2; i++)
        assert_int_equal(serex_execute(f->pool, placed_task, &f->items[2]),
                         SEREX_OK);
    assert_signalled(f->done);
    /* both workers ran one (each waited for the other) */
    assert_int_equal(atomic_load(&f->placed[0]), 1);
    assert_int_equal(atomic_load(&f->placed[1]), 1);
}

static void assert_create_einval_leaves_nothing(struct fixture *f,
                                                serex_pool_config *cfg)
{
    serex_executor *ex = (serex_executor *)f;
    int base = test_thread_count();

    assert_int_equal(serex_pool_create(cfg, &ex), SEREX_EINVAL);
    assert_null(ex);
    /* a thread that could not be pinned never ran its start hook */
    assert_int_equal(atomic_load(&f->starts), atomic_load(&f->stops));
    test_assert_threads_back_to(base);
}

static void pool_bad_placement_is_einval_and_leaves_nothing(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = hooked_config(f, 2);
    unsigned beyond[2] = {0, 100000}; /* beyond any platform's range */
    unsigned absent[2] = {0, 1000};   /* in Linux's range, on no machine
                                        this runs on */

    cfg.cpus = NULL;
    cfg.ncpus = 1;
    assert_create_einval_leaves_nothing(f, &cfg);
    cfg.ncpus = 0;
    cfg.cpu_per_worker = true;
    assert_create_einval_leaves_nothing(f, &cfg);
    cfg.cpu_per_worker = false;
    cfg.cpus = beyond;
    cfg.ncpus = 2;
    assert_create_einval_leaves_nothing(f, &cfg);
    cfg.cpus = absent;
    assert_create_einval_leaves_nothing(f, &cfg);
    /* per worker: core thread 0 gets CPU 0, yet the set is checked whole */
    cfg.threads = 1;
    cfg.cpu_per_worker = true;
    assert_create_einval_leaves_nothing(f, &cfg);
}

/* --- task hooks --- */

#define TASK_START (-1)
#define TASK_END (-2)

static void task_start_hook(void *ctx)
{
    struct fixture *f = ctx;
    int n = atomic_load_explicit(&f->nlog, memory_order_relaxed);

    if (in_task++ != 0)
        atomic_fetch_add(&f->errors, 1);
    atomic_fetch_add(&f->task_starts, 1);
    if (n < LOG_MAX)
        f->log[n] = TASK_START;
    atomic_store_explicit(&f->nlog, n + 1, memory_order_relaxed);
}

static void task_end_hook(void *ctx)
{
    struct fixture *f = ctx;
    int n = atomic_load_explicit(&f->nlog, memory_order_relaxed);

    if (--in_task != 0)
        atomic_fetch_add(&f->errors, 1);
    atomic_fetch_add(&f->task_ends, 1);
    if (n < LOG_MAX)
        f->log[n] = TASK_END;
    atomic_store_explicit(&f->nlog, n + 1, memory_order_relaxed);
}

/* Checks, on its worker, that on_task_start ran just before it. */
static void hooked_task(void *arg)
{
    struct item *it = arg;

    if (in_task != 1)
        atomic_fetch_add(&it->f->errors, 1);
    count_done(it->f);
}

static void pool_task_hooks_wrap_every_task_in_order(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {.threads = 1,
                             .on_task_start = task_start_hook,
                             .on_task_end = task_end_hook,
                             .hook_ctx = f};
    const int n = 100;

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    atomic_store(&f->target, n);
    for (int i = 0; i < n; i++)
        assert_int_equal(serex_execute(f->pool, log_task, &f->items[i]),
                         SEREX_OK);
    assert_signalled(f->done);
    serex_shutdown(f->pool);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    /* one worker: start, task i, end, start, task i + 1, end, ... */
    assert_int_equal(atomic_load(&f->nlog), 3 * n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(f->log[3 * i], TASK_START);
        assert_int_equal(f->log[3 * i + 1], i);
        assert_int_equal(f->log[3 * i + 2], TASK_END);
    }
    assert_int_equal(atomic_load(&f->errors), 0);
}

static void count_only_start(void *ctx)
{
    struct fixture *f = ctx;

    if (in_task++ != 0)
        atomic_fetch_add(&f->errors, 1);
    atomic_fetch_add(&f->task_starts, 1);
}

static void count_only_end(void *ctx)
{
    struct fixture *f = ctx;

    if (--in_task != 0)
        atomic_fetch_add(&f->errors, 1);
    atomic_fetch_add(&f->task_ends, 1);
}

static void pool_task_hooks_see_run_tasks_only_on_every_worker(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {.threads = 3,
                             .on_task_start = count_only_start,
                             .on_task_end = count_only_end,
                             .hook_ctx = f};
    serex_executor *low;

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    low = serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_LOW);
    atomic_store(&f->target, NTASKS);
    for (int i = 0; i < NTASKS; i++)
        assert_int_equal(
            serex_execute(i % 2 ? low : f->pool, hooked_task, &f->items[i]),
            SEREX_OK);
    assert_signalled(f->done);
    assert_int_equal(serex_destroy(f->pool), SEREX_OK);
    f->pool = NULL;
    assert_int_equal(atomic_load(&f->task_starts), NTASKS);
    assert_int_equal(atomic_load(&f->task_ends), NTASKS);

    /* tasks handed back never ran: no hook sees them */
    cfg.threads = 1;
    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    low = serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_LOW);
    occupy_worker(f, f->pool); /* a task: the hooks see it */
    for (int i = 0; i < 10; i++)
        assert_int_equal(serex_execute(low, never_task, NULL), SEREX_OK);
    assert_int_equal(serex_shutdown_now(f->pool, NULL, NULL), 10);
    serex_event_signal(f->block.release);
    assert_int_equal(serex_await_termination(f->pool, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(atomic_load(&f->task_starts), NTASKS + 1);
    assert_int_equal(atomic_load(&f->task_ends), NTASKS + 1);
    assert_int_equal(atomic_load(&f->errors), 0);
}

/* --- priorities --- */

/* Submits task @id to @ex, which logs it when it runs. */
static void submit_logged(struct fixture *f, serex_executor *ex, int id)
{
    assert_int_equal(serex_execute(ex, log_task, &f->items[id]), SEREX_OK);
}

static void assert_log(struct fixture *f, const int *want, int n)
{
    assert_int_equal(atomic_load(&f->nlog), n);
    for (int i = 0; i < n; i++)
        assert_int_equal(f->log[i], want[i]);
}

static void pool_priorities_run_by_level_then_fifo(void **state)
{
    struct fixture *f = *state;
    /* batching (fixed, unbounded), then one task at a time (bounded) */
    const size_t capacity[2] = {0, 100};
    /* ids: 0-2 low, 10-12 high, 20-22 normal */
    const int want[9] = {10, 11, 12, 20, 21, 22, 0, 1, 2};

    for (int c = 0; c < 2; c++) {
        serex_pool_config cfg = {.threads = 1, .queue_capacity = capacity[c]};
        serex_executor *high, *low;

        atomic_store(&f->nlog, 0);
        atomic_store(&f->ran, 0);
        assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
        high = serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_HIGH);
        low = serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_LOW);
        occupy_worker(f, f->pool);
        for (int i = 0; i < 3; i++)
            submit_logged(f, low, i);
        for (int i = 0; i < 3; i++)
            submit_logged(f, high, 10 + i);
        for (int i = 0; i < 3; i++)
            submit_logged(f, f->pool, 20 + i);
        atomic_store(&f->target, 9);
        serex_event_signal(f->block.release);
        assert_signalled(f->done);
        assert_log(f, want, 9);
        assert_int_equal(serex_destroy(f->pool), SEREX_OK);
        f->pool = NULL;
    }
}

/* A worker with a batch of NORMAL tasks still takes a HIGH one first. */
static void high_submitter_task(void *arg)
{
    struct item *it = arg;
    struct fixture *f = it->f;
    serex_executor *high = serex_pool_executor_at(f->pool,
                                                  SEREX_POOL_PRIORITY_HIGH);

    log_task(arg);
    if (serex_execute(high, log_task, &f->items[100]) != SEREX_OK)
        atomic_fetch_add(&f->errors, 1);
}

static void pool_high_task_goes_before_a_batched_normal_one(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {.threads = 1};
    const int want[4] = {0, 100, 1, 2};

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    (void)serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_HIGH);
    occupy_worker(f, f->pool);
    atomic_store(&f->target, 4);
    assert_int_equal(serex_execute(f->pool, high_submitter_task, &f->items[0]),
                     SEREX_OK);
    submit_logged(f, f->pool, 1);
    submit_logged(f, f->pool, 2);
    serex_event_signal(f->block.release);
    assert_signalled(f->done);
    assert_log(f, want, 4);
    assert_int_equal(atomic_load(&f->errors), 0);
}

static void record_pending(serex_fn fn, void *arg, void *ctx)
{
    struct fixture *f = ctx;

    if (fn != log_task || f->npending >= LOG_MAX)
        fail_msg("handed back: not a logged task");
    f->pending[f->npending++] = ((struct item *)arg)->id;
}

static void pool_shutdown_now_hands_back_highest_level_first(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {.threads = 1};
    serex_executor *high, *low;
    const int want[6] = {10, 11, 20, 21, 0, 1};
    serex_stats st;

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    high = serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_HIGH);
    low = serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_LOW);
    occupy_worker(f, f->pool);
    for (int i = 0; i < 2; i++) {
        submit_logged(f, low, i);
        submit_logged(f, high, 10 + i);
        submit_logged(f, f->pool, 20 + i);
    }
    /* stats count every level, read through any face */
    assert_int_equal(serex_executor_stats(low, &st), SEREX_OK);
    assert_int_equal(st.submitted, 7);
    assert_int_equal(st.queued, 6);
    assert_int_equal(serex_shutdown_now(high, record_pending, f), 6);
    assert_int_equal(f->npending, 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(f->pending[i], want[i]);
    assert_int_equal(serex_execute(low, log_task, &f->items[0]),
                     SEREX_EREJECTED);
    assert_int_equal(serex_execute(high, log_task, &f->items[0]),
                     SEREX_EREJECTED);
    serex_event_signal(f->block.release);
    assert_int_equal(serex_await_termination(low, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_executor_stats(f->pool, &st), SEREX_OK);
    assert_int_equal(st.submitted, 7);
    assert_int_equal(st.completed, 1);
    assert_int_equal(st.rejected, 2);
    assert_int_equal(st.queued, 0);
    assert_int_equal(atomic_load(&f->nlog), 0);
}

static void pool_priority_faces_are_the_pool_s_executors(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {.threads = 1, .queue_capacity = 2};
    serex_executor *high, *low, *manual;
    serex_stats st;

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    high = serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_HIGH);
    low = serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_LOW);
    assert_non_null(high);
    assert_non_null(low);
    assert_ptr_not_equal(high, f->pool);
    assert_ptr_not_equal(high, low);
    assert_ptr_equal(serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_HIGH),
                     high);
    assert_ptr_equal(
        serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_NORMAL), f->pool);
    assert_ptr_equal(serex_pool_executor_at(high, SEREX_POOL_PRIORITY_NORMAL),
                     f->pool);
    assert_ptr_equal(serex_pool_executor_at(high, SEREX_POOL_PRIORITY_LOW),
                     low);
    assert_null(serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITIES));
    assert_null(serex_pool_executor_at(NULL, SEREX_POOL_PRIORITY_HIGH));
    assert_int_equal(serex_manual_create(&manual), SEREX_OK);
    assert_null(serex_pool_executor_at(manual, SEREX_POOL_PRIORITY_HIGH));
    assert_int_equal(serex_destroy(manual), SEREX_OK);
    assert_int_equal(serex_execute(high, NULL, NULL), SEREX_EINVAL);

    /* queue_capacity holds for each level on its own */
    occupy_worker(f, f->pool);
    for (int i = 0; i < 2; i++) {
        submit_logged(f, high, i);
        submit_logged(f, low, 10 + i);
        submit_logged(f, f->pool, 20 + i);
    }
    assert_int_equal(serex_execute(high, log_task, &f->items[0]), SEREX_EFULL);
    assert_int_equal(serex_execute(low, log_task, &f->items[0]), SEREX_EFULL);
    assert_int_equal(serex_execute(f->pool, log_task, &f->items[0]),
                     SEREX_EFULL);
    assert_int_equal(serex_executor_stats(high, &st), SEREX_OK);
    assert_int_equal(st.rejected, 3);
    assert_int_equal(st.queued, 6);
    assert_string_equal(st.name, "pool");

    /* shutdown and await through a face are the pool's */
    atomic_store(&f->target, 6);
    serex_shutdown(low);
    assert_int_equal(serex_execute(f->pool, log_task, &f->items[0]),
                     SEREX_EREJECTED);
    assert_int_equal(serex_await_termination(high, 0), SEREX_ETIMEDOUT);
    serex_event_signal(f->block.release);
    assert_signalled(f->done); /* accepted tasks still run */
    assert_int_equal(serex_await_termination(high, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_await_termination(f->pool, 0), SEREX_OK);
}

static void pool_level_queue_grows_in_order(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {.threads = 1};
    serex_executor *high;
    int want[LOG_MAX];
    const int n = 1000; /* many times a level's first ring */

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    high = serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_HIGH);
    for (int round = 0; round < 2; round++) { /* 2nd: after it was freed */
        atomic_store(&f->nlog, 0);
        atomic_store(&f->ran, 0);
        occupy_worker(f, f->pool);
        for (int i = 0; i < n; i++) {
            submit_logged(f, high, i);
            want[i] = i;
        }
        atomic_store(&f->target, n);
        serex_event_signal(f->block.release);
        assert_signalled(f->done);
        assert_log(f, want, n);
    }
}

static void pool_serial_over_a_face_runs_at_its_level(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {.threads = 1};
    serex_executor *serial;
    const int want[4] = {10, 11, 12, 0};

    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    assert_int_equal(serex_serial_create(serex_pool_executor_at(
                                             f->pool, SEREX_POOL_PRIORITY_HIGH),
                                         NULL, &serial),
                     SEREX_OK);
    occupy_worker(f, f->pool);
    submit_logged(f, f->pool, 0);
    for (int i = 0; i < 3; i++)
        submit_logged(f, serial, 10 + i);
    atomic_store(&f->target, 4);
    serex_event_signal(f->block.release);
    assert_signalled(f->done);
    assert_log(f, want, 4);
    assert_int_equal(serex_destroy(serial), SEREX_OK);
}

#if !defined(_WIN32)
/* In a child: destroying a face stops the program with a message. */
static void pool_destroying_a_face_stops_the_program(void **state)
{
    struct fixture *f = *state;
    serex_pool_config cfg = {.threads = 1};
    char out[1024];
    size_t len = 0;
    ssize_t n;
    int fds[2], status;
    pid_t pid;

    /* made here: a child that starts threads is beyond some sanitizers */
    assert_int_equal(serex_pool_create(&cfg, &f->pool), SEREX_OK);
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        serex_destroy(serex_pool_executor_at(f->pool, SEREX_POOL_PRIORITY_LOW));
        _exit(0); /* survived: the parent fails the test */
    }
    close(fds[1]);
    while (len < sizeof out - 1 &&
           (n = read(fds[0], out + len, sizeof out - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
        fail_msg("the child was not stopped by abort; it said: %s", out);
    if (strstr(out, "serex: serex_destroy: a pool's priority face") == NULL)
        fail_msg("unexpected message: %s", out);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(pool_thread_hooks_run_on_each_worker_around_its_tasks),
        T(pool_thread_hooks_cover_extra_threads),
        T(pool_refused_core_thread_fails_create_and_leaves_nothing),
        T(pool_refused_extra_thread_leaves_the_pool_working),
        T(pool_face_task_waiting_for_its_pool_is_edeadlk),
        T(thread_start_opts_runs_hooks_around_fn_on_the_thread),
        T(pool_stack_size_is_honoured_or_refused),
        T(pool_workers_are_pinned_to_the_set),
        T(pool_cpu_per_worker_pins_worker_i_to_cpu_i),
        T(pool_bad_placement_is_einval_and_leaves_nothing),
        T(pool_task_hooks_wrap_every_task_in_order),
        T(pool_task_hooks_see_run_tasks_only_on_every_worker),
        T(pool_priorities_run_by_level_then_fifo),
        T(pool_high_task_goes_before_a_batched_normal_one),
        T(pool_shutdown_now_hands_back_highest_level_first),
        T(pool_priority_faces_are_the_pool_s_executors),
        T(pool_level_queue_grows_in_order),
        T(pool_serial_over_a_face_runs_at_its_level),
#if !defined(_WIN32)
        T(pool_destroying_a_face_stops_the_program),
#endif
#undef T
    };

    return cmocka_run_group_tests_name("pool_control", tests, NULL, NULL);
}
