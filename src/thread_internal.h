/* SPDX-License-Identifier: MIT */
/*
 * thread_internal.h - the platform layer: everything serex needs of the
 * operating system (threads and their stack sizes, mutexes, condition
 * variables, once, thread exit destructors, the monotonic clock, CPU count
 * and affinity, thread names, timer slack, yielding, the fork hook) behind
 * one interface. No other file of
 * src/ includes an OS header or tests an OS macro (scripts/check_layers.sh
 * enforces it).
 *
 * --- Three back ends for threads, locks and condition variables ---
 *   SEREX__THREADS_C11    C11 <threads.h>, where the C library has it
 *                         (glibc, musl, FreeBSD): thread_unix.c
 *   SEREX__THREADS_POSIX  POSIX threads, where it has not (macOS, OpenBSD,
 *                         NetBSD, Android < 30), and always under
 *                         ThreadSanitizer, which cannot run threads started
 *                         by thrd_create and sees no order in mtx_/cnd_:
 *                         thread_unix.c
 *   SEREX__THREADS_WIN32  SRWLOCK, CONDITION_VARIABLE, InitOnceExecuteOnce,
 *                         FLS destructors, QueryPerformanceCounter:
 *                         thread_win.c
 * The build picks one by feature detection (CMakeLists.txt checks that
 * thrd_create links) and passes SEREX_THREADS_C11, _POSIX or _WIN32; a
 * user may force one (-DSEREX_THREADS=posix), so every back end that can
 * run on Linux is tested on Linux. Without a define (the two-file drop-in
 * built by plain cc) the choice is made here: Windows -> Win32; TSan ->
 * POSIX; <threads.h> present and __STDC_NO_THREADS__ not defined -> C11;
 * else POSIX.
 *
 * Time is monotonic nanoseconds everywhere (serex__now_ns). Timed waits
 * take a monotonic deadline; a back end whose wait wants a wall-clock or a
 * relative time converts at the wait, and no single wait is longer than
 * SEREX__WAIT_MAX_NS (a day): a 32-bit time_t cannot hold a deadline far in
 * the future, and callers re-check their condition and the clock after
 * every wake-up anyway, so a long wait is a few more wake-ups a year.
 */
#ifndef SEREX_THREAD_INTERNAL_H
#define SEREX_THREAD_INTERNAL_H

#include <stdbool.h> /* bool */
#include <stddef.h>  /* size_t */
#include <stdint.h>  /* int64_t */

#include "common_internal.h" /* SEREX__THREAD_LOCAL */

/* ThreadSanitizer, with either compiler. */
#if defined(__SANITIZE_THREAD__)
#  define SEREX__TSAN 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define SEREX__TSAN 1
#  endif
#endif

/* The back end: the build's choice, else detected (see above). */
#if defined(SEREX_THREADS_WIN32)
#  define SEREX__THREADS_WIN32 1
#elif defined(SEREX_THREADS_POSIX)
#  define SEREX__THREADS_POSIX 1
#elif defined(SEREX_THREADS_C11) && !defined(SEREX__TSAN)
#  define SEREX__THREADS_C11 1
#elif defined(_WIN32)
#  define SEREX__THREADS_WIN32 1
#elif defined(SEREX__TSAN) || defined(__STDC_NO_THREADS__)
#  define SEREX__THREADS_POSIX 1
#elif defined(__has_include)
#  if __has_include(<threads.h>)
#    define SEREX__THREADS_C11 1
#  else
#    define SEREX__THREADS_POSIX 1
#  endif
#else
#  define SEREX__THREADS_POSIX 1
#endif

/*
 * Thread-local storage that the compiler emulates with heap blocks freed
 * by a thread-exit destructor of its own (GCC on mingw-w64, OpenBSD,
 * Android before API 29; clang -femulated-tls): a destructor of ours may
 * run after it, so our per-thread data must not live in _Thread_local
 * storage that a destructor reads (nodecache.c). The build may say so
 * (SEREX_TLS_EMULATED, as the emulated-TLS test stage does).
 */
#if defined(SEREX_TLS_EMULATED) || defined(__OpenBSD__) || \
    (defined(__MINGW32__) && !defined(__clang__)) ||       \
    (defined(__ANDROID__) && defined(__ANDROID_API__) && __ANDROID_API__ < 29)
#  define SEREX__TLS_EMULATED 1
#endif

#if defined(SEREX__THREADS_WIN32)
#  ifndef WIN32_LEAN_AND_MEAN
#    define WIN32_LEAN_AND_MEAN
#  endif
#  ifndef NOMINMAX
#    define NOMINMAX
#  endif
#  include <windows.h>
typedef HANDLE serex__thread;
typedef SRWLOCK serex__mutex;
typedef CONDITION_VARIABLE serex__cond;
typedef INIT_ONCE serex__once;
typedef DWORD serex__tls_key; /* an FLS index: its callback runs at exit */
#  define SEREX__ONCE_INIT INIT_ONCE_STATIC_INIT
#elif defined(SEREX__THREADS_POSIX)
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
/* The longest single timed wait (see above). */
#define SEREX__WAIT_MAX_NS (INT64_C(86400) * SEREX__NS_PER_S)

typedef int (*serex__thread_fn)(void *arg);

/*
 * How to start a thread (serex__thread_start_opts); zero-initialise it
 * for the defaults, which are serex__thread_start's.
 *
 * stack_size: bytes of stack for the new thread; 0: the platform's
 *   default. POSIX: rounded up to whole pages and to at least
 *   PTHREAD_STACK_MIN (pthread_attr_setstacksize). Win32: the stack's
 *   reservation (_beginthreadex with STACK_SIZE_PARAM_IS_A_RESERVATION;
 *   Windows rounds it to its allocation granularity), at most UINT_MAX.
 *   C11 <threads.h> cannot ask for one: non-zero is SEREX_EINVAL there.
 * on_start, on_stop: run on the new thread, with hook_ctx and index:
 *   on_start before fn, on_stop after fn returns. With on_start, the start
 *   call waits until it has returned (so a thread is either running fn or
 *   gone when the call returns); non-zero from it ends the thread without
 *   fn or on_stop, and the start call joins it and says SEREX_EREJECTED.
 *   Neither runs inside a serex task frame (executor_internal.h): fn
 *   pushes its own, so a hook that waits for the executor the thread
 *   serves is not told SEREX_EDEADLK.
 */
struct serex__thread_opts {
    size_t stack_size;
    int (*on_start)(void *ctx, unsigned index);
    void (*on_stop)(void *ctx, unsigned index);
    void *hook_ctx;
    unsigned index;
};

/* All return SEREX_OK or a negative serex status (ENOMEM for resources). */
int serex__thread_start(serex__thread *t, serex__thread_fn fn, void *arg);
/*
 * serex__thread_start with @opts (NULL: none). SEREX_EINVAL if the back
 * end cannot honour them (serex__thread_opts_check), SEREX_EREJECTED if
 * on_start refused (the thread is joined), SEREX_ENOMEM.
 */
int serex__thread_start_opts(serex__thread *t, serex__thread_fn fn, void *arg,
                             const struct serex__thread_opts *opts);
/* SEREX_OK if this back end can honour @opts, else SEREX_EINVAL (a stack
 * size with C11 threads); starts nothing. */
int serex__thread_opts_check(const struct serex__thread_opts *opts);
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
 * Returns SEREX_OK or SEREX_ENOMEM; SEREX_OK and nothing to do where the
 * platform has no fork() (Windows).
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
/* now + timeout, saturating at INT64_MAX; SEREX_FOREVER gives INT64_MAX.
 * On a thread with a wait driver (below), it also calls the driver's note. */
int64_t serex__deadline(int64_t timeout_ns);

/*
 * A driver of one thread's waits: NULL on every thread but one bound by
 * serex_autoclock_start (autoclock.c), whose waits run tasks and move a
 * manual clock instead of sleeping. There serex__deadline tells it when a
 * wait starts (note), and the parking lot (park.c) calls step where it
 * would sleep. Each costs one thread-local load, made only where a wait
 * computes its deadline or is about to sleep: never on a task's path.
 */
struct serex__wait_driver {
    /* A wait starts: its deadline is @now_ns + @timeout_ns (monotonic;
     * @timeout_ns < 0: none), as serex__deadline is about to return. */
    void (*note)(struct serex__wait_driver *d, int64_t now_ns,
                 int64_t timeout_ns);
    /* Instead of sleeping until monotonic @deadline_ns (INT64_MAX: none):
     * one step of progress. 0: something ran or the clock moved, the
     * caller looks at its condition again; SEREX_ETIMEDOUT: the deadline
     * has come, on the driver's clock. */
    int (*step)(struct serex__wait_driver *d, int64_t deadline_ns);
};

/* The calling thread's driver (defined in thread_unix.c / thread_win.c;
 * set and cleared on its own thread only, by autoclock.c). */
extern SEREX__THREAD_LOCAL struct serex__wait_driver *serex__wait_driver_tls;

/* Online CPUs, at least 1 (the scheduler's shards). Allocates nothing. */
unsigned serex__cpu_count(void);
/*
 * The CPUs this process may use, at least 1 (serex_cpu_count, a pool of
 * threads = 0): the calling thread's affinity mask (which the threads it
 * starts inherit; Windows: the process's mask, or every active CPU when
 * the process spans processor groups), and on Linux the cgroup CPU quota,
 * rounded up (serex__cpu_count_at with root ""). If the memory to read
 * them cannot be had: the online CPUs. Reads the OS at each call.
 */
unsigned serex__cpu_usable(void);
/*
 * cpus.c: the cgroup CPU bandwidth limit of the calling process, read
 * from the files under @root ("" for the real ones; tests build a fake
 * tree): /proc/self/cgroup, /proc/self/mountinfo, and cpu.max (v2) or
 * cpu.cfs_quota_us and cpu.cfs_period_us (v1) of its cgroup and each
 * parent up to the mount; the smallest quota / period, rounded up.
 * Returns SEREX_OK with *@cpus set (0: no limit found, whatever the
 * reason), or SEREX_ENOMEM (*@cpus 0) if its scratch block could not be
 * allocated. Keeps no state: any thread, any time.
 */
int serex__cgroup_cpu_limit(const char *root, unsigned *cpus);
/*
 * min(@affinity, the limit under @root), at least 1; @online (at least
 * 1) if @affinity is 0 (unknown) or the limit could not be read for want
 * of memory. serex__cpu_count's rule, with its inputs given.
 */
unsigned serex__cpu_count_at(const char *root, unsigned affinity,
                             unsigned online);

/*
 * Hard affinity: pinning a thread to a set of CPUs, numbered as the OS
 * numbers them. Linux: sched_setaffinity on the calling thread, any back
 * end; CPUs below CPU_SETSIZE (1024). Windows: SetThreadAffinityMask, in
 * the process's processor group only: CPUs below 64 (32 on 32-bit
 * Windows) and in the process's affinity mask; no processor groups.
 * Elsewhere (macOS, whose affinity is only a hint; the BSDs; others) there
 * is none, and every call below says so.
 */
/*
 * What can be checked before any thread runs: SEREX_OK, or SEREX_EINVAL
 * where the platform has no hard affinity, @n is 0, or a CPU is out of
 * the platform's range (Windows: not in the process's mask either).
 */
int serex__cpus_check(const unsigned *cpus, size_t n);
/*
 * Pins the calling thread to the set @cpus[0..n) (duplicates allowed).
 * SEREX_OK; SEREX_EINVAL where there is no hard affinity or the OS refused
 * a CPU. Linux reads the set back: a CPU that is offline, absent or
 * outside the process's cpuset (which the kernel drops silently while it
 * keeps the others) is SEREX_EINVAL too; the thread may then be pinned to
 * part of the set.
 */
int serex__thread_pin_self(const unsigned *cpus, size_t n);
/*
 * The calling thread's CPUs, ascending: writes the first @cap of them to
 * @cpus and returns how many there are; 0 where unknown (no hard
 * affinity). For tests.
 */
size_t serex__thread_get_affinity(unsigned *cpus, size_t cap);

/*
 * The name of function @fn, for serex_dump (SEREX_DUMP_SYMBOLS), written
 * NUL-ended to @buf[0..n) (cut short if longer): its symbol where the
 * program or library it is in exports one at exactly that address, else
 * "module+0xoffset" (the file's base name and @fn's offset from where the
 * file is loaded: for a shared library or a position-independent program,
 * the address `addr2line -e module` takes). The nearest exported symbol
 * below @fn is not used: for a static function it is another function.
 * Unix: dladdr (which takes the dynamic loader's lock: never call this
 * under a lock of serex's). Windows, and systems without dladdr: false.
 * Returns true if @buf holds a name.
 */
bool serex__fn_symbol(void (*fn)(void *), char *buf, size_t n);

/* A pause for spin loops (x86 PAUSE, ARM YIELD, or nothing). */
static inline void serex__cpu_relax(void)
{
#if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
    YieldProcessor();
#elif defined(_MSC_VER) && (defined(_M_ARM64) || defined(_M_ARM))
    __yield();
#elif defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || (defined(__arm__) && __ARM_ARCH >= 7)
    __asm__ __volatile__("yield");
#endif
}

/*
 * Memory for serex__alloc (alloc.c): the C library's, aligned to @align (a
 * power of two, at least sizeof(void *)). Every block, aligned or not,
 * comes from here and goes back through serex__os_free: Windows' CRT has
 * no aligned_alloc, and its _aligned_malloc blocks need _aligned_free.
 */
void *serex__os_alloc(size_t align, size_t size);
/* @n * @size zeroed bytes (the caller checked the product fits). */
void *serex__os_calloc(size_t n, size_t size);
void serex__os_free(void *p);

#endif /* SEREX_THREAD_INTERNAL_H */
