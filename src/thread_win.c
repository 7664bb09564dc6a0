/* SPDX-License-Identifier: MIT */
/*
 * thread_win.c - the platform layer on Windows (mingw-w64 and MSVC): the
 * Win32 back end of thread_internal.h.
 *   threads      _beginthreadex (the CRT's, so the C library's per-thread
 *                state is set up and freed), WaitForSingleObject to join
 *   locks        SRWLOCK (exclusive): no kernel object, no init failure
 *   conditions   CONDITION_VARIABLE with SleepConditionVariableSRW; the
 *                relative timeout in ms is computed from the monotonic
 *                deadline at each wait, rounded up (never early)
 *   once         InitOnceExecuteOnce
 *   exit hooks   FlsAlloc: its callback runs when a thread ends, as a
 *                pthread key destructor does
 *   clock        QueryPerformanceCounter / QueryPerformanceFrequency
 *   CPUs         the process's affinity mask (GetProcessAffinityMask),
 *                counted; every active CPU when the process spans groups
 *                (GetActiveProcessorCount(ALL_PROCESSOR_GROUPS))
 *   affinity     SetThreadAffinityMask, within the process's processor
 *                group: CPUs below 64 (32 on 32-bit Windows) that are in
 *                GetProcessAffinityMask; no processor groups. Windows has
 *                no getter: reading sets the process's mask and puts the
 *                old one back
 *   stack size   _beginthreadex's, as a reservation
 *                (STACK_SIZE_PARAM_IS_A_RESERVATION), at most UINT_MAX
 *   names        SetThreadDescription (Windows 10 1607+), looked up at
 *                run time in kernel32 so older systems still load us
 *   timer slack  nothing to do; fork: Windows has none (serex__atfork
 *                succeeds and registers nothing)
 *   memory       _aligned_malloc / _aligned_free for every block
 */
#if defined(_WIN32)

#include "thread_internal.h"

#include <limits.h>  /* CHAR_BIT, UINT_MAX */
#include <malloc.h>  /* _aligned_malloc */
#include <process.h> /* _beginthreadex */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>  /* memset */

#include "alloc_internal.h"
#include "common_internal.h"

/* --- time --- */

/* Counts per second of QueryPerformanceCounter, read once (relaxed: every
 * thread computes and stores the same value). */
static _Atomic int64_t qpc_freq;

int64_t serex__now_ns(void)
{
    LARGE_INTEGER c, f;
    int64_t freq = atomic_load_explicit(&qpc_freq, memory_order_relaxed);

    if (freq == 0) {
        QueryPerformanceFrequency(&f);
        freq = f.QuadPart;
        atomic_store_explicit(&qpc_freq, freq, memory_order_relaxed);
    }
    QueryPerformanceCounter(&c);
    /* split, so counts * 1e9 cannot overflow */
    return c.QuadPart / freq * SEREX__NS_PER_S +
           c.QuadPart % freq * SEREX__NS_PER_S / freq;
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

/* --- the rest of the OS --- */

unsigned serex__cpu_count(void)
{
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);

    return n > 0 ? (unsigned)n : 1u;
}

/* The process's affinity mask, counted. A process whose threads span
 * processor groups has no one mask (both come back 0): then every active
 * CPU. Job objects' CPU rate limits are not read. */
unsigned serex__cpu_usable(void)
{
    DWORD_PTR proc, sys;
    unsigned n = 0;

    if (GetProcessAffinityMask(GetCurrentProcess(), &proc, &sys))
        for (; proc != 0; proc &= proc - 1)
            n++;
    return n > 0 ? n : serex__cpu_count();
}

void serex__thread_yield(void)
{
    SwitchToThread();
}

/* --- CPU affinity --- */

int serex__cpus_check(const unsigned *cpus, size_t n)
{
    DWORD_PTR proc, sys;

    if (n == 0 || !GetProcessAffinityMask(GetCurrentProcess(), &proc, &sys))
        return SEREX_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (cpus[i] >= sizeof(DWORD_PTR) * CHAR_BIT ||
            !((proc >> cpus[i]) & 1))
            return SEREX_EINVAL;
    return SEREX_OK;
}

int serex__thread_pin_self(const unsigned *cpus, size_t n)
{
    DWORD_PTR mask = 0;

    if (serex__cpus_check(cpus, n) != SEREX_OK)
        return SEREX_EINVAL;
    for (size_t i = 0; i < n; i++)
        mask |= (DWORD_PTR)1 << cpus[i];
    return SetThreadAffinityMask(GetCurrentThread(), mask) != 0 ? SEREX_OK
                                                                : SEREX_EINVAL;
}

size_t serex__thread_get_affinity(unsigned *cpus, size_t cap)
{
    DWORD_PTR proc, sys, old;
    size_t n = 0;

    if (!GetProcessAffinityMask(GetCurrentProcess(), &proc, &sys))
        return 0;
    old = SetThreadAffinityMask(GetCurrentThread(), proc);
    if (old == 0)
        return 0;
    SetThreadAffinityMask(GetCurrentThread(), old);
    for (unsigned c = 0; c < sizeof(DWORD_PTR) * CHAR_BIT; c++) {
        if (!((old >> c) & 1))
            continue;
        if (n < cap)
            cpus[n] = c;
        n++;
    }
    return n;
}

typedef HRESULT(WINAPI *set_description_fn)(HANDLE, PCWSTR);

void serex__thread_set_name(const char *name)
{
    HMODULE k32 = GetModuleHandleW(L"kernel32.dll");
    set_description_fn set = NULL;
    WCHAR wide[64];
    FARPROC p;

    if (k32 == NULL || (p = GetProcAddress(k32, "SetThreadDescription")) ==
                           NULL)
        return; /* before Windows 10 1607: no thread names */
    /* a function pointer through memcpy: ISO C has no cast between
     * FARPROC and another function pointer type that -Wpedantic accepts */
    memcpy(&set, &p, sizeof set);
    if (MultiByteToWideChar(CP_UTF8, 0, name, -1, wide, 64) == 0)
        return;
    set(GetCurrentThread(), wide);
}

void serex__thread_precise_timers(void)
{
    /* nothing: Windows has no per-thread timer slack */
}

int serex__atfork(void (*prepare)(void), void (*parent)(void),
                  void (*child)(void))
{
    (void)prepare; /* no fork() on Windows */
    (void)parent;
    (void)child;
    return SEREX_OK;
}

void *serex__os_alloc(size_t align, size_t size)
{
    /* _aligned_malloc for every block, so serex__os_free needs no tag */
    if (align < 16)
        align = 16;
    return _aligned_malloc(size != 0 ? size : 1, align);
}

void *serex__os_calloc(size_t n, size_t size)
{
    void *p = serex__os_alloc(0, n * size);

    if (p != NULL)
        memset(p, 0, n * size);
    return p;
}

void serex__os_free(void *p)
{
    _aligned_free(p);
}

/* --- function names --- */

bool serex__fn_symbol(void (*fn)(void *), char *buf, size_t n)
{
    /* DbgHelp's SymFromAddr could, but it needs SymInitialize, which is
     * not thread-safe and belongs to the program: no names here */
    (void)fn;
    if (n > 0)
        buf[0] = '\0';
    return false;
}

/* --- threads --- */

/*
 * What serex__thread_start_opts waits on while the new thread runs its
 * on_start (as in thread_unix.c). It lives on the starter's stack, which
 * it leaves only once it has seen `done` under mu.
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
static unsigned __stdcall thread_trampoline(void *p)
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
    return (unsigned)ret;
}

int serex__thread_opts_check(const struct serex__thread_opts *opts)
{
    if (opts != NULL && (uint64_t)opts->stack_size > UINT_MAX)
        return SEREX_EINVAL; /* _beginthreadex takes an unsigned */
    return SEREX_OK;
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
    return rc; /* an SRWLOCK and a CONDITION_VARIABLE need no destroy */
}

int serex__thread_start_opts(serex__thread *t, serex__thread_fn fn, void *arg,
                             const struct serex__thread_opts *opts)
{
    struct start_sync sync;
    struct start_ctx *ctx;
    uintptr_t h;
    unsigned stack;
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
    if (wait) {
        serex__mutex_init(&sync.mu); /* cannot fail on Windows */
        serex__cond_init(&sync.cv);
        sync.done = false;
        sync.rc = SEREX_OK;
        ctx->sync = &sync;
    }
    stack = (unsigned)ctx->o.stack_size;
    h = _beginthreadex(NULL, stack, thread_trampoline, ctx,
                       stack != 0 ? STACK_SIZE_PARAM_IS_A_RESERVATION : 0,
                       NULL);
    if (h == 0) {
        serex__free(ctx);
        return SEREX_ENOMEM;
    }
    *t = (HANDLE)h;
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

void serex__thread_join(serex__thread t)
{
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
}

/* --- locks and conditions --- */

int serex__mutex_init(serex__mutex *m)
{
    InitializeSRWLock(m);
    return SEREX_OK;
}

void serex__mutex_destroy(serex__mutex *m)
{
    (void)m; /* an SRWLOCK holds nothing to free */
}

void serex__mutex_lock(serex__mutex *m) { AcquireSRWLockExclusive(m); }
void serex__mutex_unlock(serex__mutex *m) { ReleaseSRWLockExclusive(m); }

int serex__cond_init(serex__cond *c)
{
    InitializeConditionVariable(c);
    return SEREX_OK;
}

void serex__cond_destroy(serex__cond *c)
{
    (void)c; /* nothing to free */
}

void serex__cond_signal(serex__cond *c) { WakeConditionVariable(c); }
void serex__cond_broadcast(serex__cond *c) { WakeAllConditionVariable(c); }

void serex__cond_wait_until(serex__cond *c, serex__mutex *m,
                            int64_t deadline_ns)
{
    DWORD ms = INFINITE;

    if (deadline_ns != INT64_MAX) {
        int64_t left = deadline_ns - serex__now_ns();

        if (left <= 0)
            return;
        if (left > SEREX__WAIT_MAX_NS)
            left = SEREX__WAIT_MAX_NS;
        /* rounded up: a wait never ends before its deadline on its own */
        ms = (DWORD)((left + 999999) / 1000000);
    }
    SleepConditionVariableSRW(c, m, ms, 0);
}

/* --- once and thread-exit hooks --- */

struct once_call {
    void (*fn)(void);
};

static BOOL CALLBACK once_trampoline(PINIT_ONCE once, PVOID param,
                                     PVOID *context)
{
    (void)once;
    (void)context;
    ((struct once_call *)param)->fn();
    return TRUE;
}

void serex__call_once(serex__once *flag, void (*fn)(void))
{
    struct once_call call = {fn};

    InitOnceExecuteOnce(flag, once_trampoline, &call, NULL);
}

/*
 * FLS callbacks are WINAPI (stdcall on 32-bit x86), ours are plain C
 * functions: each key gets a WINAPI trampoline that calls its destructor.
 * serex makes one key per process (the node cache's); a few spare slots.
 */
#define KEYS_MAX 4

static void (*key_dtor[KEYS_MAX])(void *);
static _Atomic unsigned keys_made; /* slots taken; each written once */

#define KEY_TRAMPOLINE(i)                                                    \
    static void WINAPI key_trampoline_##i(PVOID value)                       \
    {                                                                        \
        if (value != NULL)                                                   \
            key_dtor[i](value);                                              \
    }
KEY_TRAMPOLINE(0)
KEY_TRAMPOLINE(1)
KEY_TRAMPOLINE(2)
KEY_TRAMPOLINE(3)

static const PFLS_CALLBACK_FUNCTION key_trampoline[KEYS_MAX] = {
    key_trampoline_0, key_trampoline_1, key_trampoline_2, key_trampoline_3,
};

int serex__tls_key_create(serex__tls_key *key, void (*dtor)(void *))
{
    /* relaxed: the slot is ours alone; FlsAlloc publishes the callback
     * before any thread can run it (a thread must set a value first) */
    unsigned i = atomic_fetch_add_explicit(&keys_made, 1,
                                           memory_order_relaxed);
    DWORD k;

    if (i >= KEYS_MAX)
        return SEREX_ENOMEM;
    key_dtor[i] = dtor;
    k = FlsAlloc(key_trampoline[i]);
    if (k == FLS_OUT_OF_INDEXES)
        return SEREX_ENOMEM;
    *key = k;
    return SEREX_OK;
}

void serex__tls_set(serex__tls_key key, void *value)
{
    FlsSetValue(key, value);
}

#else /* not Windows: thread_unix.c */

/* ISO C wants at least one declaration in a translation unit. */
typedef int serex__thread_win_unused;

#endif
