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
 *   affinity      Linux sched_setaffinity on the calling thread (any back
 *                 end), read back to catch CPUs the kernel dropped;
 *                 elsewhere none (macOS's affinity tags are hints): every
 *                 pinning call says SEREX_EINVAL
 *   CPU count     Linux: the calling thread's affinity mask (a set sized
 *                 at run time, so more than 1024 CPUs count), capped by
 *                 the cgroup quota (cpus.c); elsewhere the online CPUs
 *   stack size    POSIX: pthread_attr_setstacksize, rounded up to whole
 *                 pages and PTHREAD_STACK_MIN; C11: none (SEREX_EINVAL)
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

#  include <errno.h>   /* EINVAL (sched_getaffinity) */
#  include <limits.h>  /* PTHREAD_STACK_MIN */
#  include <pthread.h> /* pthread_atfork, names */
#  include <sched.h>   /* sched_yield, sched_setaffinity */
#  include <stdatomic.h>
#  include <stdbool.h>
#  include <stdlib.h> /* malloc, aligned_alloc, free */
#  include <string.h> /* strncpy, memcpy, strrchr */
#  include <time.h>   /* clock_gettime, timespec_get */
#  include <unistd.h> /* sysconf */
#  if defined(__linux__)
#    include <sys/prctl.h> /* PR_SET_NAME, PR_SET_TIMERSLACK */
#  endif
#  if defined(__FreeBSD__) || defined(__OpenBSD__) || defined(__DragonFly__)
#    include <pthread_np.h> /* pthread_set_name_np */
#  endif

/*
 * dladdr (serex__fn_symbol): in the C library of glibc 2.34 and later,
 * musl, bionic, macOS and the BSDs; in libdl before glibc 2.34. The CMake
 * build links libdl where dladdr needs it and says whether it found one
 * (SEREX_HAVE_DLADDR=0 or 1, cmake/SerexPlatform.cmake). Without that
 * word (the two-file drop-in, built with no -ldl), an older glibc goes
 * without names rather than fail to link. __GLIBC__ comes from the
 * headers above.
 */
#  if defined(SEREX_HAVE_DLADDR)
#    define SEREX__DLADDR SEREX_HAVE_DLADDR
#  elif defined(__GLIBC__)
#    if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34)
#      define SEREX__DLADDR 1
#    else
#      define SEREX__DLADDR 0
#    endif
#  elif defined(__linux__) || defined(__APPLE__) || defined(__FreeBSD__) || \
      defined(__NetBSD__) || defined(__OpenBSD__) || defined(__DragonFly__)
#    define SEREX__DLADDR 1
#  else
#    define SEREX__DLADDR 0
#  endif
#  if SEREX__DLADDR
#    include <dlfcn.h>    /* dladdr */
#    include <inttypes.h> /* PRIxPTR */
#    include <stdio.h>    /* snprintf */
#  endif

#  include "alloc_internal.h"
#  include "common_internal.h"

/* --- time --- */

int64_t serex__now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * SEREX__NS_PER_S + ts.tv_nsec;
}

SEREX__THREAD_LOCAL struct serex__wait_driver *serex__wait_driver_tls;

int64_t serex__deadline(int64_t timeout_ns)
{
    int64_t now = serex__now_ns();
    struct serex__wait_driver *d = serex__wait_driver_tls;

    if (serex__unlikely(d != NULL)) /* an autoclock's thread */
        d->note(d, now, timeout_ns);
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

#  if defined(__linux__)

/* A bound on the affinity set's growth: 2^20 CPUs, a 128 KiB set. */
#    define AFFINITY_MAX_CPUS (UINT32_C(1) << 20)

/*
 * The CPUs in the calling thread's affinity mask; 0 if unknown (no memory
 * for the set, or the kernel refused). A cpu_set_t holds 1024 CPUs; a
 * kernel built for more wants a bigger set (EINVAL), so the set is sized
 * at run time, from the configured CPUs up, doubling until it fits.
 */
static unsigned affinity_count(void)
{
    long conf = sysconf(_SC_NPROCESSORS_CONF);
    size_t ncpus = conf > CPU_SETSIZE ? (size_t)conf : (size_t)CPU_SETSIZE;

    for (; ncpus <= AFFINITY_MAX_CPUS; ncpus *= 2) {
        size_t size = CPU_ALLOC_SIZE(ncpus);
        cpu_set_t *set = serex__alloc(size);
        int rc, err, n;

        if (set == NULL)
            return 0;
        CPU_ZERO_S(size, set);
        rc = sched_getaffinity(0, size, set); /* 0: the calling thread */
        err = errno;
        n = CPU_COUNT_S(size, set);
        serex__free(set);
        if (rc == 0)
            return n > 0 ? (unsigned)n : 0;
        if (err != EINVAL)
            return 0;
    }
    return 0;
}

unsigned serex__cpu_usable(void)
{
    /* "": the real /proc and cgroup files (cpus.c) */
    return serex__cpu_count_at("", affinity_count(), serex__cpu_count());
}

#  else /* no cgroups; affinity, where there is any, is per thread and hard
         to count (macOS has none): the online CPUs */

unsigned serex__cpu_usable(void)
{
    return serex__cpu_count();
}

#  endif

void serex__thread_yield(void)
{
    sched_yield();
}

/* --- CPU affinity --- */

#if defined(__linux__)

int serex__cpus_check(const unsigned *cpus, size_t n)
{
    if (n == 0)
        return SEREX_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (cpus[i] >= (unsigned)CPU_SETSIZE)
            return SEREX_EINVAL;
    return SEREX_OK;
}

int serex__thread_pin_self(const unsigned *cpus, size_t n)
{
    cpu_set_t want, got;

    if (serex__cpus_check(cpus, n) != SEREX_OK)
        return SEREX_EINVAL;
    CPU_ZERO(&want);
    for (size_t i = 0; i < n; i++)
        CPU_SET(cpus[i], &want);
    /* pid 0 is the calling thread. The kernel keeps only the CPUs that are
     * online and in our cpuset, failing only if none is: read it back. */
    if (sched_setaffinity(0, sizeof want, &want) != 0 ||
        sched_getaffinity(0, sizeof got, &got) != 0)
        return SEREX_EINVAL;
    return CPU_EQUAL(&want, &got) ? SEREX_OK : SEREX_EINVAL;
}

size_t serex__thread_get_affinity(unsigned *cpus, size_t cap)
{
    cpu_set_t set;
    size_t n = 0;

    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    for (unsigned c = 0; c < (unsigned)CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        if (n < cap)
            cpus[n] = c;
        n++;
    }
    return n;
}

#else /* no hard affinity here */

int serex__cpus_check(const unsigned *cpus, size_t n)
{
    (void)cpus;
    (void)n;
    return SEREX_EINVAL;
}

int serex__thread_pin_self(const unsigned *cpus, size_t n)
{
    (void)cpus;
    (void)n;
    return SEREX_EINVAL;
}

size_t serex__thread_get_affinity(unsigned *cpus, size_t cap)
{
    (void)cpus;
    (void)cap;
    return 0;
}

#endif

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

/* --- function names --- */

#  if SEREX__DLADDR
bool serex__fn_symbol(void (*fn)(void *), char *buf, size_t n)
{
    Dl_info info;
    const char *file;
    void *addr;

    /* POSIX makes function and object pointers the same size and
     * convertible (dlsym relies on it); memcpy says so without the cast
     * ISO C forbids */
    _Static_assert(sizeof addr == sizeof fn, "function pointer size");
    memcpy(&addr, &fn, sizeof addr);
    if (n == 0 || dladdr(addr, &info) == 0)
        return false;
    if (info.dli_sname != NULL && info.dli_saddr == addr) {
        snprintf(buf, n, "%s", info.dli_sname);
        return true;
    }
    if (info.dli_fname == NULL || info.dli_fname[0] == '\0')
        return false;
    file = strrchr(info.dli_fname, '/');
    file = file != NULL ? file + 1 : info.dli_fname;
    snprintf(buf, n, "%s+0x%" PRIxPTR, file,
             (uintptr_t)addr - (uintptr_t)info.dli_fbase);
    return true;
}
#  else
bool serex__fn_symbol(void (*fn)(void *), char *buf, size_t n)
{
    (void)fn;
    if (n > 0)
        buf[0] = '\0';
    return false;
}
#  endif

/* --- starting threads: options and start hooks (both back ends) --- */

/*
 * What serex__thread_start_opts waits on while the new thread runs its
 * on_start. It lives on the starter's stack, which it leaves only once it
 * has seen `done` under mu: the new thread's unlock is its last touch.
 */
struct start_sync {
    serex__mutex mu;
    serex__cond cv;
    bool done; /* under mu */
    int rc;    /* under mu: on_start's answer */
};

/* The new thread's start: a heap copy it frees first thing. */
struct start_ctx {
    serex__thread_fn fn;
    void *arg;
    struct serex__thread_opts o;
    struct start_sync *sync; /* the starter waits here; NULL: no on_start */
};

/* The new thread's life: on_start (reported), fn, on_stop. */
static int thread_body(void *p)
{
    struct start_ctx c = *(struct start_ctx *)p;
    int ret;

    serex__free(p);
    if (c.sync != NULL) {
        int rc = c.o.on_start(c.o.hook_ctx, c.o.index) != 0 ? SEREX_EREJECTED
                                                             : SEREX_OK;

        serex__mutex_lock(&c.sync->mu);
        c.sync->rc = rc;
        c.sync->done = true;
        serex__cond_signal(&c.sync->cv);
        serex__mutex_unlock(&c.sync->mu); /* our last touch of it */
        if (rc != SEREX_OK)
            return 0;
    }
    ret = c.fn(c.arg);
    if (c.o.on_stop != NULL)
        c.o.on_stop(c.o.hook_ctx, c.o.index);
    return ret;
}

#if defined(SEREX__THREADS_POSIX)

/* --- POSIX threads --- */

static void *thread_trampoline(void *p)
{
    return (void *)(intptr_t)thread_body(p);
}

/* Whole pages, at least PTHREAD_STACK_MIN: some systems (macOS) refuse
 * anything else. */
static int attr_stack_size(pthread_attr_t *attr, size_t size)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t pg = page > 0 ? (size_t)page : 4096;

#if defined(PTHREAD_STACK_MIN)
    if (size < (size_t)PTHREAD_STACK_MIN)
        size = (size_t)PTHREAD_STACK_MIN;
#endif
    if (size > SIZE_MAX - (pg - 1))
        return SEREX_EINVAL;
    size = (size + pg - 1) / pg * pg;
    return pthread_attr_setstacksize(attr, size) == 0 ? SEREX_OK
                                                      : SEREX_EINVAL;
}

static int thread_create(serex__thread *t, struct start_ctx *ctx,
                         size_t stack_size)
{
    pthread_attr_t attr;
    int rc;

    if (stack_size == 0)
        return pthread_create(t, NULL, thread_trampoline, ctx) == 0
                   ? SEREX_OK
                   : SEREX_ENOMEM;
    if (pthread_attr_init(&attr) != 0)
        return SEREX_ENOMEM;
    rc = attr_stack_size(&attr, stack_size);
    if (rc == SEREX_OK && pthread_create(t, &attr, thread_trampoline, ctx) != 0)
        rc = SEREX_ENOMEM;
    pthread_attr_destroy(&attr);
    return rc;
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

static int thread_create(serex__thread *t, struct start_ctx *ctx,
                         size_t stack_size)
{
    (void)stack_size; /* always 0: serex__thread_opts_check refused it */
    return thrd_create(t, thread_body, ctx) == thrd_success ? SEREX_OK
                                                            : SEREX_ENOMEM;
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

/* --- starting threads, continued --- */

int serex__thread_opts_check(const struct serex__thread_opts *opts)
{
#if defined(SEREX__THREADS_C11)
    if (opts != NULL && opts->stack_size != 0)
        return SEREX_EINVAL; /* <threads.h> has no way to ask for one */
#else
    (void)opts;
#endif
    return SEREX_OK;
}

static int start_sync_init(struct start_sync *s)
{
    s->done = false;
    s->rc = SEREX_OK;
    if (serex__mutex_init(&s->mu) != SEREX_OK)
        return SEREX_ENOMEM;
    if (serex__cond_init(&s->cv) != SEREX_OK) {
        serex__mutex_destroy(&s->mu);
        return SEREX_ENOMEM;
    }
    return SEREX_OK;
}

static void start_sync_fini(struct start_sync *s)
{
    serex__cond_destroy(&s->cv);
    serex__mutex_destroy(&s->mu);
}

/* Waits for the new thread's on_start; returns its answer. */
static int start_sync_wait(struct start_sync *s)
{
    int rc;

    serex__mutex_lock(&s->mu);
    while (!s->done)
        serex__cond_wait_until(&s->cv, &s->mu, INT64_MAX);
    rc = s->rc;
    serex__mutex_unlock(&s->mu);
    start_sync_fini(s);
    return rc;
}

int serex__thread_start_opts(serex__thread *t, serex__thread_fn fn, void *arg,
                             const struct serex__thread_opts *opts)
{
    struct start_sync sync;
    struct start_ctx *ctx;
    bool wait;
    int rc = serex__thread_opts_check(opts);

    if (rc != SEREX_OK)
        return rc;
    ctx = serex__alloc(sizeof *ctx);
    if (ctx == NULL)
        return SEREX_ENOMEM;
    *ctx = (struct start_ctx){.fn = fn, .arg = arg};
    if (opts != NULL)
        ctx->o = *opts;
    wait = ctx->o.on_start != NULL;
    if (wait && start_sync_init(&sync) != SEREX_OK) {
        serex__free(ctx);
        return SEREX_ENOMEM;
    }
    if (wait)
        ctx->sync = &sync;
    rc = thread_create(t, ctx, ctx->o.stack_size);
    if (rc != SEREX_OK) {
        serex__free(ctx);
        if (wait)
            start_sync_fini(&sync);
        return rc;
    }
    if (!wait)
        return SEREX_OK;
    rc = start_sync_wait(&sync);
    if (rc != SEREX_OK)
        serex__thread_join(*t); /* it returned without running fn */
    return rc;
}

int serex__thread_start(serex__thread *t, serex__thread_fn fn, void *arg)
{
    return serex__thread_start_opts(t, fn, arg, NULL);
}

#else /* _WIN32: thread_win.c */

/* ISO C wants at least one declaration in a translation unit. */
typedef int serex__thread_unix_unused;

#endif
