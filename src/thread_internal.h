/* SPDX-License-Identifier: MIT */
/*
 * thread_internal.h - the one layer between serex and the platform's threads.
 *
 * Normally C11 <threads.h>. ThreadSanitizer on this toolchain cannot run
 * threads started by thrd_create (they crash inside TSan, and mtx_/cnd_
 * order nothing for it), so when built with -fsanitize=thread the same
 * calls map onto POSIX threads, which TSan models. Tests that start threads
 * use this layer too.
 *
 * Time is monotonic nanoseconds everywhere (serex__now_ns). C11 timed waits
 * take a wall-clock deadline, so serex__cond_wait_until converts at the
 * wait; callers re-check the monotonic clock after every wake-up, so a
 * wall-clock jump can delay a wake-up but never end a wait early.
 */
#ifndef SEREX_THREAD_INTERNAL_H
#define SEREX_THREAD_INTERNAL_H

#include <stdint.h> /* int64_t */

#if defined(__SANITIZE_THREAD__)
#  define SEREX__USE_PTHREAD 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define SEREX__USE_PTHREAD 1
#  endif
#endif

#ifdef SEREX__USE_PTHREAD
#  include <pthread.h>
typedef pthread_t serex__thread;
typedef pthread_mutex_t serex__mutex;
typedef pthread_cond_t serex__cond;
typedef pthread_once_t serex__once;
typedef pthread_key_t serex__tls_key;
#  define SEREX__ONCE_INIT PTHREAD_ONCE_INIT
#else
#  include <threads.h>
typedef thrd_t serex__thread;
typedef mtx_t serex__mutex;
typedef cnd_t serex__cond;
typedef once_flag serex__once;
typedef tss_t serex__tls_key;
#  define SEREX__ONCE_INIT ONCE_FLAG_INIT
#endif

#define SEREX__NS_PER_S INT64_C(1000000000)

typedef int (*serex__thread_fn)(void *arg);

/* All return SEREX_OK or a negative serex status (ENOMEM for resources). */
int serex__thread_start(serex__thread *t, serex__thread_fn fn, void *arg);
void serex__thread_join(serex__thread t);
void serex__thread_yield(void);
/* Sets the calling thread's name where the platform has names. */
void serex__thread_set_name(const char *name);
/* The calling thread's timed waits end as close to their deadline as the
 * OS allows (Linux: timer slack 1 ns instead of 50 us). */
void serex__thread_precise_timers(void);

/*
 * Runs @prepare before fork() and @parent / @child after it, in the parent
 * and the child (pthread_atfork). The policy, what is locked and what a
 * child may still do, is fork.c's; this is only the platform's hook.
 * Returns SEREX_OK or SEREX_ENOMEM.
 */
int serex__atfork(void (*prepare)(void), void (*parent)(void),
                  void (*child)(void));

int serex__mutex_init(serex__mutex *m);
void serex__mutex_destroy(serex__mutex *m);
void serex__mutex_lock(serex__mutex *m);
void serex__mutex_unlock(serex__mutex *m);

int serex__cond_init(serex__cond *c);
void serex__cond_destroy(serex__cond *c);
/*
 * Waits until signalled or until monotonic time @deadline_ns (may wake
 * early or spuriously: the caller re-checks its condition and the clock).
 * A deadline of INT64_MAX waits without limit.
 */
void serex__cond_wait_until(serex__cond *c, serex__mutex *m,
                            int64_t deadline_ns);
void serex__cond_signal(serex__cond *c);
void serex__cond_broadcast(serex__cond *c);

void serex__call_once(serex__once *flag, void (*fn)(void));

/* Thread-specific values whose destructor runs when a thread exits. */
int serex__tls_key_create(serex__tls_key *key, void (*dtor)(void *));
void serex__tls_set(serex__tls_key key, void *value);

/* Monotonic clock in nanoseconds. */
int64_t serex__now_ns(void);
/* now + timeout, saturating at INT64_MAX; SEREX_FOREVER gives INT64_MAX. */
int64_t serex__deadline(int64_t timeout_ns);

/* Online CPUs, at least 1. */
unsigned serex__cpu_count(void);

/* A pause for spin loops (the x86 PAUSE instruction, or nothing). */
static inline void serex__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif /* SEREX_THREAD_INTERNAL_H */
