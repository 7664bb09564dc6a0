/* SPDX-License-Identifier: MIT */
/*
 * thread.c - threads, mutexes, condition variables, the monotonic clock,
 * CPU count and the fork hook, over C11 <threads.h> (or POSIX threads under
 * TSan; see thread_internal.h for why). The platform layer: it calls
 * nothing of serex above it, so every other file may call it.
 */
#include "thread_internal.h"

#include <sched.h>  /* sched_yield */
#include <string.h> /* strncpy */
#include <time.h>   /* clock_gettime, timespec_get */
#include <pthread.h> /* pthread_atfork */
#include <unistd.h> /* sysconf */
#if defined(__linux__)
#  include <sys/prctl.h> /* PR_SET_NAME */
#endif

#include "common_internal.h"

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
#if defined(__linux__)
    char buf[16]; /* the kernel keeps 15 characters */

    strncpy(buf, name, sizeof buf - 1);
    buf[sizeof buf - 1] = '\0';
    prctl(PR_SET_NAME, (unsigned long)buf, 0UL, 0UL, 0UL);
#else
    (void)name;
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

#ifdef SEREX__USE_PTHREAD

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

int serex__cond_init(serex__cond *c)
{
    pthread_condattr_t attr;
    int rc;

    if (pthread_condattr_init(&attr) != 0)
        return SEREX_ENOMEM;
    /* Monotonic deadlines: no conversion needed on this path. */
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(c, &attr);
    pthread_condattr_destroy(&attr);
    return rc == 0 ? SEREX_OK : SEREX_ENOMEM;
}

void serex__cond_destroy(serex__cond *c) { pthread_cond_destroy(c); }
void serex__cond_signal(serex__cond *c) { pthread_cond_signal(c); }
void serex__cond_broadcast(serex__cond *c) { pthread_cond_broadcast(c); }

void serex__cond_wait_until(serex__cond *c, serex__mutex *m,
                            int64_t deadline_ns)
{
    struct timespec ts;

    if (deadline_ns == INT64_MAX) {
        pthread_cond_wait(c, m);
        return;
    }
    ts.tv_sec = (time_t)(deadline_ns / SEREX__NS_PER_S);
    ts.tv_nsec = (long)(deadline_ns % SEREX__NS_PER_S);
    pthread_cond_timedwait(c, m, &ts);
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

#else /* C11 threads */

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
    int64_t left, at;

    if (deadline_ns == INT64_MAX) {
        cnd_wait(c, m);
        return;
    }
    /*
     * cnd_timedwait wants a TIME_UTC deadline: convert the time left. If
     * the wall clock jumps, the wait ends early or late; callers re-check
     * the monotonic clock, so an early end only costs another wait.
     */
    left = deadline_ns - serex__now_ns();
    if (left <= 0)
        return;
    timespec_get(&utc, TIME_UTC);
    at = (int64_t)utc.tv_sec * SEREX__NS_PER_S + utc.tv_nsec;
    at = left > INT64_MAX - at ? INT64_MAX : at + left;
    utc.tv_sec = (time_t)(at / SEREX__NS_PER_S);
    utc.tv_nsec = (long)(at % SEREX__NS_PER_S);
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

#endif
