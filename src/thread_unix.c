/* SPDX-License-Identifier: MIT */
/*
 * thread_unix.c - the platform layer on Unix-like systems (Linux, macOS,
 * the BSDs, Android): the OS services every back end shares (clock, CPU
 * count, thread names, timer slack, yield, fork hook, memory), then the
 * threads, locks and condition variables of the POSIX or the C11 back end
 * (see thread_internal.h for which and why). Where the systems differ,
 * each form is written out:
 *   thread names  Linux prctl(PR_SET_NAME); macOS pthread_setname_np(name)
 *                 (itself only); FreeBSD, OpenBSD pthread_set_name_np;
 *                 NetBSD pthread_setname_np(thread, "%s", name)
 *   timer slack   Linux only (PR_SET_TIMERSLACK); elsewhere nothing
 *   timed waits   POSIX: a CLOCK_MONOTONIC condition variable where
 *                 pthread_condattr_setclock works; macOS (no setclock):
 *                 pthread_cond_timedwait_relative_np; otherwise the
 *                 deadline converted to CLOCK_REALTIME at the wait. C11:
 *                 always converted to TIME_UTC.
 * The rest (clock_gettime(CLOCK_MONOTONIC), sysconf(_SC_NPROCESSORS_ONLN),
 * sched_yield, pthread_atfork) is the same call everywhere here.
 */
#if !defined(_WIN32)

/* Feature macros first, before any system header: the default view of
 * macOS and the BSDs already has the calls we need (a _POSIX_C_SOURCE
 * would hide pthread_setname_np and the BSD names). */
#if defined(__linux__) || defined(__CYGWIN__)
#  ifndef _GNU_SOURCE
#    define _GNU_SOURCE /* pthread_setname_np; implies POSIX 2008 */
#  endif
#elif defined(__APPLE__)
#  ifndef _DARWIN_C_SOURCE
#    define _DARWIN_C_SOURCE
#  endif
#endif

#include "thread_internal.h"

#include <pthread.h> /* pthread_atfork, names */
#include <sched.h>   /* sched_yield */
#include <stdatomic.h>
#include <stdlib.h>  /* malloc, aligned_alloc, free */
#include <string.h>  /* strncpy */
#include <time.h>    /* clock_gettime, timespec_get */
#include <unistd.h>  /* sysconf */
#if defined(__linux__)
#  include <sys/prctl.h> /* PR_SET_NAME, PR_SET_TIMERSLACK */
#endif
#if defined(__FreeBSD__) || defined(__OpenBSD__) || defined(__DragonFly__)
#  include <pthread_np.h> /* pthread_set_name_np */
#endif

#include "alloc_internal.h"
#include "common_internal.h"

/* --- time --- */

int64_t serex__now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * SEREX__NS_PER_S + ts.tv_nsec;
}

int64_t serex__deadline(int64_t timeout_ns)
{
    int64_t now = serex__now_ns();

    if (timeout_ns < 0 || timeout_ns > INT64_MAX - now)
        return INT64_MAX;
    return now + timeout_ns;
}

/* Nanoseconds left until @deadline_ns, at most SEREX__WAIT_MAX_NS (see
 * thread_internal.h); 0 if it has passed. */
static int64_t wait_left(int64_t deadline_ns)
{
    int64_t left = deadline_ns - serex__now_ns();

    if (left <= 0)
        return 0;
    return left < SEREX__WAIT_MAX_NS ? left : SEREX__WAIT_MAX_NS;
}

/* @now_ns + @left_ns as a timespec of the same clock. The sum fits: a
 * clock reading plus at most a day, and a day past any clock fits even a
 * 32-bit time_t until 2038 (realtime) or for 68 years of uptime. */
static struct timespec timespec_after(int64_t now_ns, int64_t left_ns)
{
    int64_t at = now_ns + left_ns;
    struct timespec ts;

    ts.tv_sec = (time_t)(at / SEREX__NS_PER_S);
    ts.tv_nsec = (long)(at % SEREX__NS_PER_S);
    return ts;
}

/* --- the rest of the OS --- */

unsigned serex__cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    return n > 0 ? (unsigned)n : 1u;
}

void serex__thread_yield(void)
{
    sched_yield();
}

void serex__thread_set_name(const char *name)
{
    char buf[16]; /* Linux keeps 15 characters; the others more */

    strncpy(buf, name, sizeof buf - 1);
    buf[sizeof buf - 1] = '\0';
#if defined(__linux__)
    prctl(PR_SET_NAME, (unsigned long)buf, 0UL, 0UL, 0UL);
#elif defined(__APPLE__)
    pthread_setname_np(buf); /* macOS names only the calling thread */
#elif defined(__FreeBSD__) || defined(__OpenBSD__) || defined(__DragonFly__)
    pthread_set_name_np(pthread_self(), buf);
#elif defined(__NetBSD__)
    pthread_setname_np(pthread_self(), "%s", (void *)buf);
#else
    (void)buf; /* no thread names here */
#endif
}

void serex__thread_precise_timers(void)
{
#if defined(__linux__) && defined(PR_SET_TIMERSLACK)
    /* Linux lets a sleeping thread's timer expire up to 50 us late by
     * default (timer slack), to batch wake-ups; a timer thread wants its
     * deadline. 1 ns is the smallest the kernel accepts. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
}

int serex__atfork(void (*prepare)(void), void (*parent)(void),
                  void (*child)(void))
{
    /* POSIX says pthread_atfork fails only for lack of memory */
    return pthread_atfork(prepare, parent, child) == 0 ? SEREX_OK
                                                       : SEREX_ENOMEM;
}

void *serex__os_alloc(size_t align, size_t size)
{
    if (align <= _Alignof(max_align_t))
        return malloc(size);
    /* aligned_alloc wants a size that is a multiple of the alignment */
    return aligned_alloc(align, (size + align - 1) / align * align);
}

void *serex__os_calloc(size_t n, size_t size)
{
    return calloc(n, size);
}

void serex__os_free(void *p)
{
    free(p);
}

#if defined(SEREX__THREADS_POSIX)

/* --- POSIX threads --- */

struct start_ctx {
    serex__thread_fn fn;
    void *arg;
};

static void *thread_trampoline(void *p)
{
    struct start_ctx ctx = *(struct start_ctx *)p;

    serex__free(p);
    return (void *)(intptr_t)ctx.fn(ctx.arg);
}

int serex__thread_start(serex__thread *t, serex__thread_fn fn, void *arg)
{
    struct start_ctx *ctx = serex__alloc(sizeof *ctx);

    if (ctx == NULL)
        return SEREX_ENOMEM;
    ctx->fn = fn;
    ctx->arg = arg;
    if (pthread_create(t, NULL, thread_trampoline, ctx) != 0) {
        serex__free(ctx);
        return SEREX_ENOMEM;
    }
    return SEREX_OK;
}

void serex__thread_join(serex__thread t)
{
    pthread_join(t, NULL);
}

int serex__mutex_init(serex__mutex *m)
{
    return pthread_mutex_init(m, NULL) == 0 ? SEREX_OK : SEREX_ENOMEM;
}

void serex__mutex_destroy(serex__mutex *m) { pthread_mutex_destroy(m); }
void serex__mutex_lock(serex__mutex *m) { pthread_mutex_lock(m); }
void serex__mutex_unlock(serex__mutex *m) { pthread_mutex_unlock(m); }

/*
 * 1 once a condition variable was made on CLOCK_MONOTONIC, 2 once that
 * failed (winpthreads refuses it, and some systems lack the call): then
 * timed waits convert to CLOCK_REALTIME. Relaxed: every init sets the
 * same value, and a wait reads the value its own cond's init stored
 * (that init happened before the wait, through whoever shared the cond).
 */
#if !defined(__APPLE__)
static _Atomic int cond_clock;
#endif

int serex__cond_init(serex__cond *c)
{
#if defined(__APPLE__)
    /* no pthread_condattr_setclock: waits are relative (see the top) */
    return pthread_cond_init(c, NULL) == 0 ? SEREX_OK : SEREX_ENOMEM;
#else
    pthread_condattr_t attr;
    int rc, mono;

    if (pthread_condattr_init(&attr) != 0)
        return SEREX_ENOMEM;
    mono = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0;
    rc = pthread_cond_init(c, &attr);
    if (rc != 0 && mono) { /* the clock was accepted, then refused */
        mono = 0;
        rc = pthread_cond_init(c, NULL);
    }
    pthread_condattr_destroy(&attr);
    atomic_store_explicit(&cond_clock, mono ? 1 : 2, memory_order_relaxed);
    return rc == 0 ? SEREX_OK : SEREX_ENOMEM;
#endif
}

void serex__cond_destroy(serex__cond *c) { pthread_cond_destroy(c); }
void serex__cond_signal(serex__cond *c) { pthread_cond_signal(c); }
void serex__cond_broadcast(serex__cond *c) { pthread_cond_broadcast(c); }

void serex__cond_wait_until(serex__cond *c, serex__mutex *m,
                            int64_t deadline_ns)
{
    int64_t left;
    struct timespec ts;

    if (deadline_ns == INT64_MAX) {
        pthread_cond_wait(c, m);
        return;
    }
    if ((left = wait_left(deadline_ns)) == 0)
        return;
#if defined(__APPLE__)
    ts.tv_sec = (time_t)(left / SEREX__NS_PER_S);
    ts.tv_nsec = (long)(left % SEREX__NS_PER_S);
    pthread_cond_timedwait_relative_np(c, m, &ts);
#else
    /* relaxed: see cond_clock */
    if (atomic_load_explicit(&cond_clock, memory_order_relaxed) == 1) {
        ts = timespec_after(serex__now_ns(), left);
    } else {
        clock_gettime(CLOCK_REALTIME, &ts);
        ts = timespec_after((int64_t)ts.tv_sec * SEREX__NS_PER_S + ts.tv_nsec,
                            left);
    }
    pthread_cond_timedwait(c, m, &ts);
#endif
}

void serex__call_once(serex__once *flag, void (*fn)(void))
{
    pthread_once(flag, fn);
}

int serex__tls_key_create(serex__tls_key *key, void (*dtor)(void *))
{
    return pthread_key_create(key, dtor) == 0 ? SEREX_OK : SEREX_ENOMEM;
}

void serex__tls_set(serex__tls_key key, void *value)
{
    pthread_setspecific(key, value);
}

#elif defined(SEREX__THREADS_C11)

/* --- C11 threads --- */

int serex__thread_start(serex__thread *t, serex__thread_fn fn, void *arg)
{
    return thrd_create(t, fn, arg) == thrd_success ? SEREX_OK : SEREX_ENOMEM;
}

void serex__thread_join(serex__thread t)
{
    thrd_join(t, NULL);
}

int serex__mutex_init(serex__mutex *m)
{
    return mtx_init(m, mtx_plain) == thrd_success ? SEREX_OK : SEREX_ENOMEM;
}

void serex__mutex_destroy(serex__mutex *m) { mtx_destroy(m); }
void serex__mutex_lock(serex__mutex *m) { mtx_lock(m); }
void serex__mutex_unlock(serex__mutex *m) { mtx_unlock(m); }

int serex__cond_init(serex__cond *c)
{
    return cnd_init(c) == thrd_success ? SEREX_OK : SEREX_ENOMEM;
}

void serex__cond_destroy(serex__cond *c) { cnd_destroy(c); }
void serex__cond_signal(serex__cond *c) { cnd_signal(c); }
void serex__cond_broadcast(serex__cond *c) { cnd_broadcast(c); }

void serex__cond_wait_until(serex__cond *c, serex__mutex *m,
                            int64_t deadline_ns)
{
    struct timespec utc;
    int64_t left;

    if (deadline_ns == INT64_MAX) {
        cnd_wait(c, m);
        return;
    }
    /*
     * cnd_timedwait wants a TIME_UTC deadline: convert the time left. If
     * the wall clock jumps, the wait ends early or late; callers re-check
     * the monotonic clock, so an early end only costs another wait.
     */
    if ((left = wait_left(deadline_ns)) == 0)
        return;
    timespec_get(&utc, TIME_UTC);
    utc = timespec_after((int64_t)utc.tv_sec * SEREX__NS_PER_S + utc.tv_nsec,
                         left);
    cnd_timedwait(c, m, &utc);
}

void serex__call_once(serex__once *flag, void (*fn)(void))
{
    call_once(flag, fn);
}

int serex__tls_key_create(serex__tls_key *key, void (*dtor)(void *))
{
    return tss_create(key, dtor) == thrd_success ? SEREX_OK : SEREX_ENOMEM;
}

void serex__tls_set(serex__tls_key key, void *value)
{
    tss_set(key, value);
}

#endif /* back ends */

#else /* _WIN32: thread_win.c */

/* ISO C wants at least one declaration in a translation unit. */
typedef int serex__thread_unix_unused;

#endif
