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
 *   CPUs         GetActiveProcessorCount(ALL_PROCESSOR_GROUPS)
 *   names        SetThreadDescription (Windows 10 1607+), looked up at
 *                run time in kernel32 so older systems still load us
 *   timer slack  nothing to do; fork: Windows has none (serex__atfork
 *                succeeds and registers nothing)
 *   memory       _aligned_malloc / _aligned_free for every block
 */
#if defined(_WIN32)

#include "thread_internal.h"

#include <malloc.h>  /* _aligned_malloc */
#include <process.h> /* _beginthreadex */
#include <stdatomic.h>
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

int64_t serex__deadline(int64_t timeout_ns)
{
    int64_t now = serex__now_ns();

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

void serex__thread_yield(void)
{
    SwitchToThread();
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

/* --- threads --- */

struct start_ctx {
    serex__thread_fn fn;
    void *arg;
};

static unsigned __stdcall thread_trampoline(void *p)
{
    struct start_ctx ctx = *(struct start_ctx *)p;

    serex__free(p);
    return (unsigned)ctx.fn(ctx.arg);
}

int serex__thread_start(serex__thread *t, serex__thread_fn fn, void *arg)
{
    struct start_ctx *ctx = serex__alloc(sizeof *ctx);
    uintptr_t h;

    if (ctx == NULL)
        return SEREX_ENOMEM;
    ctx->fn = fn;
    ctx->arg = arg;
    h = _beginthreadex(NULL, 0, thread_trampoline, ctx, 0, NULL);
    if (h == 0) {
        serex__free(ctx);
        return SEREX_ENOMEM;
    }
    *t = (HANDLE)h;
    return SEREX_OK;
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
