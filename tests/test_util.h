/* SPDX-License-Identifier: MIT */
/*
 * test_util.h - what every serex test file shares: cmocka's includes in the
 * order it needs, threads through the library's thread layer (so the TSan
 * build sees real synchronisation), and bounded waits that fail a test
 * instead of hanging it.
 */
#ifndef SEREX_TEST_UTIL_H
#define SEREX_TEST_UTIL_H

#include <setjmp.h> /* cmocka needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdbool.h>

#if defined(_WIN32)
#  ifndef WIN32_LEAN_AND_MEAN
#    define WIN32_LEAN_AND_MEAN
#  endif
#  ifndef NOMINMAX
#    define NOMINMAX
#  endif
#  include <windows.h> /* QueryPerformanceCounter, Sleep, GetProcessTimes */
#else
#  include <errno.h> /* EINTR */
#  if defined(__linux__)
#    include <dirent.h> /* opendir: counting this process's threads */
#    include <stdlib.h> /* getenv */
#  endif
#  include <time.h>  /* clock_gettime, nanosleep, clock */
#endif

#include <serex/serex.h>

#ifndef SEREX_TEST_SHARED
#  include "alloc_internal.h"
#  include "common_internal.h"
#  include "thread_internal.h"
#endif

#define MS (INT64_C(1000000))
#define SEC (INT64_C(1000000000))
/* Waits in tests end after this: a failure, never a hang. */
#define TEST_TIMEOUT (20 * SEC)

/*
 * The OS's monotonic clock in nanoseconds, read directly: the tests check
 * serex's timeouts against it, not against serex's own clock.
 */
static inline int64_t test_now_ns(void)
{
#if defined(_WIN32)
    LARGE_INTEGER freq, count;

    QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&count);
    return (int64_t)(count.QuadPart / freq.QuadPart) * SEC +
           (int64_t)(count.QuadPart % freq.QuadPart) * SEC / freq.QuadPart;
#else
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * SEC + ts.tv_nsec;
#endif
}

/* Sleeps for at least @ns of test_now_ns time. */
static inline void test_sleep_ns(int64_t ns)
{
    const int64_t until = test_now_ns() + ns;
    int64_t left = ns;

    while (left > 0) {
#if defined(_WIN32)
        Sleep((DWORD)((left + MS - 1) / MS)); /* may end a tick early */
#else
        struct timespec ts = {(time_t)(left / SEC), (long)(left % SEC)};

        if (nanosleep(&ts, NULL) != 0 && errno != EINTR)
            break;
#endif
        left = until - test_now_ns();
    }
}

/* Threads of this process, or -1 where they cannot be counted: off Linux,
 * and under qemu-user, whose own threads come and go in /proc/self/task
 * (tests/CMakeLists.txt sets SEREX_TEST_NO_THREAD_COUNT there). */
static inline int test_thread_count(void)
{
#if defined(__linux__)
    DIR *d;
    struct dirent *e;
    int n = 0;

    if (getenv("SEREX_TEST_NO_THREAD_COUNT") != NULL ||
        (d = opendir("/proc/self/task")) == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
#else
    return -1;
#endif
}

/* A joined thread may stay listed for a moment: polls, bounded, until
 * the count is back to @base or below (nothing to check when @base is
 * -1). Below: @base itself may have counted a thread of an earlier run
 * still leaving (stage i saw 1 thread where its base had counted 2); a
 * thread left behind still fails it. */
static inline void test_assert_threads_back_to(int base)
{
    int64_t deadline = test_now_ns() + 5 * SEC;
    int n;

    if (base < 0)
        return;
    while ((n = test_thread_count()) > base && test_now_ns() < deadline)
        test_sleep_ns(MS);
    assert_true(n <= base);
}

/* CPU time the whole process has used (every thread), in nanoseconds.
 * clock() is that on POSIX systems but wall time on Windows. */
static inline int64_t test_cpu_ns(void)
{
#if defined(_WIN32)
    FILETIME created, exited, kernel, user;
    ULARGE_INTEGER k, u;

    if (!GetProcessTimes(GetCurrentProcess(), &created, &exited, &kernel,
                         &user))
        return 0;
    k.LowPart = kernel.dwLowDateTime;
    k.HighPart = kernel.dwHighDateTime;
    u.LowPart = user.dwLowDateTime;
    u.HighPart = user.dwHighDateTime;
    return (int64_t)(k.QuadPart + u.QuadPart) * 100; /* 100 ns units */
#else
    return (int64_t)((double)clock() / CLOCKS_PER_SEC * (double)SEC);
#endif
}

/* A task that signals the event given as its argument. */
static inline void test_signal_task(void *arg)
{
    serex_event_signal(arg);
}

/* A task that must never run: fails the test if it does. */
static inline void never_task(void *arg)
{
    (void)arg;
    fail_msg("a task that must not run ran");
}

/* Waits for @ev with the test timeout; fails the test if it never comes. */
#define assert_signalled(ev) \
    assert_int_equal(serex_event_wait((ev), TEST_TIMEOUT), SEREX_OK)

/*
 * Per-producer order, seen from the tasks: each producer numbers its tasks
 * 0, 1, 2, ...; a task out of that order counts in `disorder`. Only the
 * executor under test orders the calls (plain fields).
 */
#define TEST_ORDER_PRODUCERS 8

struct test_order {
    long total;
    long disorder;
    size_t next[TEST_ORDER_PRODUCERS];
};

static inline void test_order_see(struct test_order *o, unsigned producer,
                                  size_t seq)
{
    o->total++;
    if (o->next[producer] != seq)
        o->disorder++;
    o->next[producer] = seq + 1;
}

/* Collects tasks handed back by shutdown_now, in order. */
struct test_pending {
    size_t n, cap;
    serex_fn *fns;
    void **args;
};

static inline void test_pending_cb(serex_fn fn, void *arg, void *ctx)
{
    struct test_pending *tp = ctx;

    if (tp->n < tp->cap) {
        tp->fns[tp->n] = fn;
        tp->args[tp->n] = arg;
    }
    tp->n++;
}

/*
 * Runs a manual executor until its queue is empty, tasks queued by the
 * tasks it runs included (drains that requeue themselves). Bounded, so a
 * drain that requeued itself forever fails the caller's count check
 * instead of hanging. Returns how many tasks ran.
 */
static inline size_t test_run_all(serex_executor *manual)
{
    size_t n = 0;

    while (n < ((size_t)1 << 24) && serex_manual_run_one(manual))
        n++;
    return n;
}

/*
 * An EDEADLK probe: a task that calls await_termination and destroy on
 * @ex from inside it (set ex and done before running it).
 */
struct test_self_wait {
    serex_executor *ex;
    serex_event *done;
    int await0, await_forever, destroy;
};

/* Await with timeout 0 first, so a missing check fails instead of hanging;
 * the calls that would hang are made only once it said EDEADLK. */
static inline void test_self_wait_task(void *arg)
{
    struct test_self_wait *w = arg;

    w->await0 = serex_await_termination(w->ex, 0);
    if (w->await0 == SEREX_EDEADLK) {
        w->await_forever = serex_await_termination(w->ex, SEREX_FOREVER);
        w->destroy = serex_destroy(w->ex);
    }
    serex_event_signal(w->done);
}

static inline void test_assert_all_edeadlk(const struct test_self_wait *w)
{
    assert_int_equal(w->await0, SEREX_EDEADLK);
    assert_int_equal(w->await_forever, SEREX_EDEADLK);
    assert_int_equal(w->destroy, SEREX_EDEADLK);
}

#ifndef SEREX_TEST_SHARED
#  include <stdlib.h> /* calloc, free: test_race_init, test_race_fini */

/*
 * Racing producers (stress_serial.c, stress_striped.c): TEST_RACE_PRODUCERS
 * threads start together and each submit its TEST_RACE_PER_PRODUCER items,
 * in sequence, through the test's submit function. Every item is marked
 * when it runs (TEST_RACE_RAN) or is handed back (TEST_RACE_HANDED), and
 * test_race_check_accounting checks promise 1 exactly from those marks.
 */
#define TEST_RACE_PRODUCERS 4
#define TEST_RACE_PER_PRODUCER 20000
#define TEST_RACE_TASKS (TEST_RACE_PRODUCERS * TEST_RACE_PER_PRODUCER)
#define TEST_RACE_KEYS 64

enum { TEST_RACE_RAN = 1, TEST_RACE_HANDED = 2 };

struct test_race;

/* A task's argument: who made it, its place in its producer's sequence,
 * and (striped) its key. */
struct test_race_item {
    struct test_race *race;
    unsigned producer;
    size_t seq;
    uint64_t key;
};

/* Queues @it with the race's task_fn on the executor tested. */
typedef int (*test_race_submit_fn)(struct test_race *race,
                                   struct test_race_item *it);

/* Plain state of one serial (or one key): the executor's order guards it. */
struct test_race_order {
    long total;
    long disorder;
    size_t next[TEST_RACE_PRODUCERS];
};

struct test_race_producer {
    struct test_race *race;
    unsigned id;
    serex__thread thread;
    long accepted;
    long rejected;
    long accepted_after_rejected; /* must stay 0: shutdown is sticky */
    long bad_status;              /* anything but OK or EREJECTED */
};

struct test_race {
    serex_executor *pool;         /* 4 workers, under the tested one */
    struct test_race_item *items; /* producer p's i-th is p*PER+i */
    _Atomic unsigned char *seen;  /* per item: RAN and/or HANDED */
    struct test_race_producer producers[TEST_RACE_PRODUCERS];
    _Atomic int go;
    _Atomic long progress;        /* submits made, all producers together */
    test_race_submit_fn submit;
    serex_fn task_fn;             /* what producers queue (and get back) */
    void *ctx;                    /* the test's own state */
};

/* Makes @race's items (keys rotate fast: a lane often empties and is made
 * again) and its pool, named @name. */
static inline void test_race_init(struct test_race *race, const char *name,
                                  test_race_submit_fn submit,
                                  serex_fn task_fn, void *ctx)
{
    serex_pool_config cfg = {.threads = 4, .name = name};

    *race = (struct test_race){
        .submit = submit, .task_fn = task_fn, .ctx = ctx};
    race->items = calloc(TEST_RACE_TASKS, sizeof *race->items);
    race->seen = calloc(TEST_RACE_TASKS, sizeof *race->seen);
    assert_non_null(race->items);
    assert_non_null(race->seen);
    for (unsigned p = 0; p < TEST_RACE_PRODUCERS; p++)
        for (size_t i = 0; i < TEST_RACE_PER_PRODUCER; i++)
            race->items[p * TEST_RACE_PER_PRODUCER + i] =
                (struct test_race_item){race, p, i,
                                        (i * 7 + p) % TEST_RACE_KEYS};
    assert_int_equal(serex_pool_create(&cfg, &race->pool), SEREX_OK);
}

/* Destroys the pool (destroy what runs on it first) and frees the items. */
static inline void test_race_fini(struct test_race *race)
{
    assert_int_equal(serex_destroy(race->pool), SEREX_OK);
    free(race->seen);
    free(race->items);
}

static inline void test_race_mark(struct test_race_item *it,
                                  unsigned char how)
{
    /* relaxed: the counts are read after await_termination, which orders */
    atomic_fetch_add_explicit(&it->race->seen[it - it->race->items], how,
                              memory_order_relaxed);
}

/* A producer's tasks must run in increasing sequence; with each task
 * marked exactly once (test_race_check_accounting), that is exactly its
 * order. On a striped, a producer's tasks of one key are a subsequence:
 * the same check holds per key. */
static inline void test_race_order_see(struct test_race_order *os,
                                       const struct test_race_item *it)
{
    os->total++;
    if (it->seq < os->next[it->producer])
        os->disorder++;
    os->next[it->producer] = it->seq + 1;
}

/* shutdown_now's on_pending; ctx is the race. */
static inline void test_race_handed(serex_fn fn, void *arg, void *ctx)
{
    struct test_race *race = ctx;

    assert_true(fn == race->task_fn);
    test_race_mark(arg, TEST_RACE_HANDED);
}

static inline int test_race_producer_main(void *arg)
{
    struct test_race_producer *pr = arg;
    struct test_race *race = pr->race;

    /* acquire: start together, to make the races likely */
    while (!atomic_load_explicit(&race->go, memory_order_acquire))
        serex__thread_yield();
    for (size_t i = 0; i < TEST_RACE_PER_PRODUCER; i++) {
        int rc = race->submit(
            race, &race->items[pr->id * TEST_RACE_PER_PRODUCER + i]);

        /* relaxed: only paces the main thread's shutdown */
        atomic_fetch_add_explicit(&race->progress, 1, memory_order_relaxed);
        if (rc == SEREX_OK) {
            pr->accepted++;
            if (pr->rejected > 0)
                pr->accepted_after_rejected++;
        } else if (rc == SEREX_EREJECTED) {
            pr->rejected++;
        } else {
            pr->bad_status++;
        }
    }
    return 0;
}

static inline void test_race_start(struct test_race *race)
{
    for (unsigned i = 0; i < TEST_RACE_PRODUCERS; i++) {
        struct test_race_producer *pr = &race->producers[i];

        pr->race = race;
        pr->id = i;
        assert_int_equal(serex__thread_start(&pr->thread,
                                             test_race_producer_main, pr),
                         SEREX_OK);
    }
    atomic_store_explicit(&race->go, 1, memory_order_release);
}

/* Joins the producers; returns how many tasks they had accepted. */
static inline long test_race_join(struct test_race *race)
{
    long accepted = 0;

    for (unsigned i = 0; i < TEST_RACE_PRODUCERS; i++) {
        struct test_race_producer *pr = &race->producers[i];

        serex__thread_join(pr->thread);
        assert_int_equal(pr->bad_status, 0);
        assert_int_equal(pr->accepted_after_rejected, 0);
        assert_int_equal(pr->accepted + pr->rejected, TEST_RACE_PER_PRODUCER);
        accepted += pr->accepted;
    }
    return accepted;
}

/* Waits until the producers are a quarter through: stop mid-stream. */
static inline void test_race_wait_for_progress(struct test_race *race)
{
    /* relaxed: pacing only */
    while (atomic_load_explicit(&race->progress, memory_order_relaxed) <
           TEST_RACE_TASKS / 4)
        serex__thread_yield();
}

/*
 * Per producer: its accepted tasks (a prefix of its sequence) read RAN
 * for a prefix of them and HANDED for the rest, its rejected ones read 0,
 * and nothing was marked twice. With @by_key, the prefix rule holds per
 * (producer, key): each key's lane has its own order. Returns how many ran.
 */
static inline long test_race_check_accounting(struct test_race *race,
                                              bool by_key)
{
    long ran = 0;

    for (unsigned p = 0; p < TEST_RACE_PRODUCERS; p++) {
        const long accepted = race->producers[p].accepted;
        unsigned char phase[TEST_RACE_KEYS];

        for (size_t k = 0; k < TEST_RACE_KEYS; k++)
            phase[k] = TEST_RACE_RAN;
        for (long i = 0; i < TEST_RACE_PER_PRODUCER; i++) {
            const struct test_race_item *it =
                &race->items[p * TEST_RACE_PER_PRODUCER + i];
            unsigned char v = atomic_load_explicit(
                &race->seen[p * TEST_RACE_PER_PRODUCER + i],
                memory_order_relaxed);
            unsigned char *ph = &phase[by_key ? it->key : 0];

            if (i >= accepted) {
                assert_int_equal(v, 0); /* rejected: never queued */
                continue;
            }
            /* exactly once, and RAN never after HANDED */
            assert_true(v == TEST_RACE_RAN || v == TEST_RACE_HANDED);
            if (v == TEST_RACE_HANDED)
                *ph = TEST_RACE_HANDED;
            if (v != *ph)
                print_error("producer %u task %ld ran after an earlier task "
                            "of its %s was handed back\n",
                            p, i, by_key ? "key" : "serial");
            assert_int_equal(v, *ph);
            ran += v == TEST_RACE_RAN;
        }
    }
    return ran;
}
#endif /* !SEREX_TEST_SHARED */

#endif /* SEREX_TEST_UTIL_H */
