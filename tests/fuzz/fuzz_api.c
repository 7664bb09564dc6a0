/* SPDX-License-Identifier: MIT */
/*
 * fuzz_api.c - a libFuzzer harness: its input bytes become a sequence of
 * serex calls on one manual executor and one manual scheduler (no thread
 * anywhere, so a run is a pure function of its input), and every promise
 * of docs/contract.md that a single thread can observe is checked as it goes.
 * A violation calls abort(), which libFuzzer reports as a crash.
 *
 * Built two ways from this one file:
 *  - with -DSEREX_LIBFUZZER and -fsanitize=fuzzer,address,undefined by
 *    scripts/fuzz.sh: libFuzzer's main calls LLVMFuzzerTestOneInput;
 *  - without it, as a plain program (the CTest test fuzz_corpus) whose
 *    main replays every file named on its command line, or every file in
 *    a directory so named, e.g. tests/fuzz/corpus.
 *
 * --- The input ---
 * Byte 0 configures the scheduler: wheel_size 2 << (b & 7); tick_ns
 * 4^((b >> 3) & 7) ns (0 there: the default 1 ms); max_timers
 * {off, 4, 16, 64}[b >> 6]. Byte 1: the batch of every serial and striped
 * (b & 3; 0: the default 64); bit 7 starts the scheduler's clock 1 ms
 * before it saturates at INT64_MAX (what found the hang at saturation,
 * fixed: see README.md). Then each
 * byte picks an operation (byte % NOPS, see enum op) and the bytes after
 * it are its arguments; a missing byte reads as 0. When the input ends,
 * teardown_drain() takes everything down in a valid order and
 * teardown_check() runs the end-of-run checks.
 *
 * --- What is checked ---
 * Every task carries its own record (struct rec). Exactly once: a task
 * whose execute, schedule, gate execute or send said SEREX_OK runs once,
 * or comes back once (to on_pending, or a scheduler's on_rejected), or
 * was cancelled by a cancel that said true; never two of these, and never
 * anything for a task whose submission failed. Order: tasks given to the
 * manual executor, to one serial, or to one key of one striped run (and
 * come back) in the order their execute calls returned; tasks a gate
 * forwards to one target run in the order they entered the gate. Never
 * early: a one-shot timer runs at or after its due time (exactly at it on
 * the timer "thread", which advance drives), fixed-rate run n at or after
 * start + n * period, fixed-delay runs at least the delay apart; no
 * periodic run starts after a cancel or a scheduler shutdown. Channels:
 * the k-th receive gets the k-th item sent, each item once, and NULL only
 * once every item is delivered. Futures agree with what their task did.
 * A task running on the manual executor that calls await_termination or
 * destroy on it (or on a wrapper over it) gets SEREX_EDEADLK; outside any
 * task, never. Bad input says SEREX_EINVAL and leaves nothing behind.
 * Leaks are LeakSanitizer's (libFuzzer's -detect_leaks).
 *
 * Tasks that serex hands back but that are not ours (a serial's drain, a
 * channel's continuation, a keyless striped task, all handed back by a
 * shutdown_now of the executor they were queued on) are the caller's to
 * run: they go to a FIFO (struct foreign) that the harness runs later,
 * as a user would, so nothing they carry is lost.
 *
 * Wrappers are destroyed mid-run only when that is valid and cannot
 * block: nothing (timer, parked gate task, channel continuation) still
 * names the serial as its target, and after shutdown_now the wrapper says
 * terminated to await_termination(ex, 0).
 *
 * The one internal name used is serex__alloc_fail_nth (fails the n-th
 * allocation from now; the static library has it), for op OP_ALLOC_FAIL.
 * Define SEREX_FUZZ_NO_ALLOC_FAIL to build against the shared library.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <serex/serex.h>

#ifndef SEREX_LIBFUZZER
#  include <dirent.h>   /* replaying a directory */
#  include <sys/stat.h> /* telling files from directories */
#endif

#ifndef SEREX_FUZZ_NO_ALLOC_FAIL
/* src/common_internal.h: the n-th allocation from now fails; 0: none. */
unsigned long serex__alloc_fail_nth(unsigned long n);
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NSERIAL 3
#define NSTRIPED 2
#define NKEYS 4
#define NGATE 2
#define NCHAN 2
#define NFUT 16
#define NTIMER 32
#define MAX_RECS 4096
#define MAX_OPS 2048
#define MAX_PERIODIC 16       /* bounds the runs one advance can make */
#define SETTLE_BUDGET (1u << 22)
#define SEREX_FUZZ_SATURATE_NS INT64_C(1000000)

/* Executors an operation can name (a "dest"), for execute and submit. */
enum {
    D_MANUAL,
    D_SERIAL0,
    D_STRIPED0 = D_SERIAL0 + NSERIAL,      /* striped i, key k */
    D_FACE0 = D_STRIPED0 + NSTRIPED * NKEYS, /* striped i's keyless face */
    D_SCHED = D_FACE0 + NSTRIPED,          /* the scheduler's face */
    ND
};

/* Executors for the life-cycle calls (shutdown, await, ...): a "sel". */
enum { SEL_MANUAL, SEL_SERIAL0, SEL_FACE0 = SEL_SERIAL0 + NSERIAL,
       SEL_SCHED = SEL_FACE0 + NSTRIPED, NSEL };

/* Order streams: the manual executor, each serial, each striped key
 * (their runs and hand-backs together), each gate and target (runs). */
enum { S_MANUAL, S_SERIAL0, S_STRIPED0 = S_SERIAL0 + NSERIAL,
       S_GATE0 = S_STRIPED0 + NSTRIPED * NKEYS,
       NSTREAMS = S_GATE0 + NGATE * (1 + NSERIAL) };

enum kind { K_UNUSED, K_EXEC, K_GATE, K_ONESHOT, K_RATE, K_DELAY, K_SEND,
            K_RECV, K_FUTURE };

/* What a task does when it runs, besides being counted. */
enum act { A_CHILD, A_SHUTDOWN, A_SHUTDOWN_NOW, A_PROBE, A_TIMER_CANCEL,
           A_FUTURE_CANCEL, A_SCHEDULE, A_SEND, NACT };

/* Who is running code now: the top level, a task the manual executor
 * runs, a task advance runs on the timer "thread", a handed-back task. */
enum ctx { CTX_TOP, CTX_MANUAL, CTX_TIMER, CTX_FOREIGN };

/* Why a periodic timer can start no more runs. */
enum stop { STOP_NO, STOP_CANCEL, STOP_SHUTDOWN, STOP_REJECTED };

enum op {
    OP_SERIAL_CREATE, OP_STRIPED_CREATE, OP_WRAPPER_DESTROY, OP_EXECUTE,
    OP_SUBMIT, OP_FUTURE_CANCEL, OP_FUTURE_WAIT, OP_FUTURE_RELEASE,
    OP_SCHEDULE, OP_TIMER_CANCEL, OP_TIMER_RELEASE, OP_ADVANCE, OP_RUN_ONE,
    OP_RUN_PENDING, OP_RUN_HANDED_BACK, OP_GATE_CREATE, OP_GATE_EXECUTE,
    OP_GATE_OPEN, OP_GATE_CLOSE, OP_GATE_DESTROY, OP_CHAN_CREATE,
    OP_CHAN_SEND, OP_CHAN_RECV, OP_CHAN_CLOSE, OP_SHUTDOWN, OP_SHUTDOWN_NOW,
    OP_AWAIT, OP_ALLOC_FAIL, OP_STATS, OP_BAD_INPUT, NOPS
};

static const char *const op_names[NOPS] = {
    "serial_create", "striped_create", "wrapper_destroy", "execute",
    "submit", "future_cancel", "future_wait", "future_release",
    "schedule", "timer_cancel", "timer_release", "advance", "run_one",
    "run_pending", "run_handed_back", "gate_create", "gate_execute",
    "gate_open", "gate_close", "gate_destroy", "chan_create", "chan_send",
    "chan_recv", "chan_close", "shutdown", "shutdown_now", "await",
    "alloc_fail", "stats", "bad_input",
};

/* One task: what it is, where it went, and what has become of it. */
struct rec {
    uint8_t kind;           /* enum kind; K_UNUSED: submission failed */
    uint8_t act, act_arg;   /* enum act (NACT: none) and its argument */
    uint8_t stop;           /* periodic: enum stop */
    int8_t stream;          /* order stream, -1: none */
    int8_t ext;             /* serial slot it names as a target, -1: none */
    int8_t chan;            /* K_SEND, K_RECV: channel slot */
    bool null_target;       /* a timer run on the timer "thread" */
    bool cancelled;         /* a cancel said true (or wait: cancelled) */
    uint32_t runs, backs;   /* ran; came back (on_pending, on_rejected) */
    uint32_t delivered;     /* K_SEND: receivers that got the item */
    uint32_t seq;           /* place in its stream or channel */
    int32_t got;            /* K_RECV: 1 + item's index, 0: NULL, -1: none */
    int64_t due, period;    /* timers: first due time; period */
    int64_t last;           /* fixed delay: the clock at the last run */
};

struct stream {
    uint32_t next;          /* seq of the last accepted task */
    uint32_t last_run, last_event;
};

/* A handed-back task that is not ours: run later, in order. */
struct foreign {
    serex_fn fn;
    void *arg;
};

struct fuzz {
    const uint8_t *in;
    size_t len, pos;
    unsigned op;            /* operations decoded so far (for messages) */
    bool trace;             /* SEREX_FUZZ_TRACE set: print each op */
    enum ctx ctx;
    serex_serial_config wcfg; /* every serial's and striped's */
    serex_executor *manual;
    serex_executor *serial[NSERIAL];
    serex_striped *striped[NSTRIPED];
    serex_scheduler *sched;
    serex_gate *gate[NGATE];
    serex_channel *chan[NCHAN];
    uint32_t sends[NCHAN], recvs[NCHAN]; /* accepted so far */
    struct { serex_future *f; struct rec *r; } fut[NFUT];
    struct { serex_timer *t; struct rec *r; } timer[NTIMER];
    struct stream streams[NSTREAMS];
    uint64_t rejected;      /* on_rejected calls */
    unsigned periodic;      /* periodic timers scheduled */
    struct foreign *foreign;
    size_t nforeign, foreign_head, foreign_cap;
    struct {                /* the teardown's receive in flight */
        int pending;
        uint32_t seq;
        int chan;
        bool got_null;
    } td;
    size_t nrecs;
    struct rec recs[MAX_RECS];
};

static struct fuzz fz; /* libFuzzer runs one input at a time */

/* --- failing --- */

static _Noreturn void fuzz_fail(const char *what, const struct rec *r)
{
    fprintf(stderr, "fuzz_api: VIOLATION: %s (after op %u", what, fz.op);
    if (r != NULL)
        fprintf(stderr, "; task %td kind %d runs %u backs %u cancelled %d",
                r - fz.recs, r->kind, (unsigned)r->runs, (unsigned)r->backs,
                r->cancelled);
    fprintf(stderr, ")\n");
    abort();
}

#define CHECK(cond, what, r)                                                 \
    do {                                                                     \
        if (!(cond))                                                         \
            fuzz_fail(what, r);                                              \
    } while (0)

static uint8_t next_byte(void)
{
    return fz.pos < fz.len ? fz.in[fz.pos++] : 0;
}

static int64_t sat_add(int64_t a, int64_t b) /* b >= 0 */
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static void alloc_fail(unsigned long n)
{
#ifndef SEREX_FUZZ_NO_ALLOC_FAIL
    serex__alloc_fail_nth(n);
#else
    (void)n;
#endif
}

/* --- records and order streams --- */

static struct rec *rec_new(enum kind kind)
{
    struct rec *r;

    if (fz.nrecs == MAX_RECS)
        return NULL;
    r = &fz.recs[fz.nrecs++];
    memset(r, 0, sizeof *r);
    r->kind = (uint8_t)kind;
    r->act = NACT;
    r->stream = r->ext = r->chan = -1;
    r->got = -1;
    return r;
}

/* The submission said no: the record stays, marked, to catch a run. */
static void rec_unused(struct rec *r)
{
    r->kind = K_UNUSED;
}

/* Takes the next place in stream @s (given back by rec_unused). */
static void stream_begin(struct rec *r, int s)
{
    r->stream = (int8_t)s;
    r->seq = fz.streams[s].next + 1;
}

static void stream_commit(struct rec *r)
{
    if (r->stream >= 0 && fz.streams[r->stream].next < r->seq)
        fz.streams[r->stream].next = r->seq;
}

static void stream_event(struct rec *r, bool run)
{
    struct stream *st;

    if (r->stream < 0)
        return;
    st = &fz.streams[r->stream];
    if (run) {
        CHECK(r->seq > st->last_run, "order: a task ran before an earlier "
              "one of its executor, serial, key or gate", r);
        st->last_run = r->seq;
    }
    if (r->stream < S_GATE0) {
        CHECK(r->seq > st->last_event, "order: a task ran or came back "
              "out of submission order", r);
        st->last_event = r->seq;
    }
}

/* Done with its target: nothing will reach that executor for it. */
static bool rec_settled(const struct rec *r)
{
    switch (r->kind) {
    case K_ONESHOT: return r->runs + r->backs > 0 || r->cancelled;
    case K_RATE:
    case K_DELAY: return r->stop != STOP_NO;
    case K_GATE:
    case K_SEND: return r->runs + r->backs > 0;
    case K_RECV: return r->runs > 0;
    default: return true;
    }
}

static bool serial_in_use(int slot)
{
    for (size_t i = 0; i < fz.nrecs; i++)
        if (fz.recs[i].ext == slot && !rec_settled(&fz.recs[i]))
            return true;
    return false;
}

static void periodic_stop_all(enum stop why)
{
    for (size_t i = 0; i < fz.nrecs; i++) {
        struct rec *r = &fz.recs[i];

        if ((r->kind == K_RATE || r->kind == K_DELAY) && r->stop == STOP_NO)
            r->stop = (uint8_t)why;
    }
}

/* --- the executors an operation names --- */

static serex_executor *striped_face(int i)
{
    return serex_striped_executor(fz.striped[i]); /* NULL for NULL */
}

static serex_executor *sel_ex(unsigned sel)
{
    sel %= NSEL;
    if (sel == SEL_MANUAL)
        return fz.manual;
    if (sel < SEL_FACE0)
        return fz.serial[sel - SEL_SERIAL0];
    if (sel < SEL_SCHED)
        return striped_face((int)(sel - SEL_FACE0));
    return serex_scheduler_executor(fz.sched);
}

/* A target for timers (-1: the timer thread), gates and channels. */
static serex_executor *target_ex(int t)
{
    return t < 0 ? NULL : t == 0 ? fz.manual : fz.serial[t - 1];
}

static const uint64_t keys[NKEYS] = {0, 1, 2, UINT64_MAX};

/* The order stream of a dest, or -1. */
static int dest_stream(unsigned d)
{
    if (d == D_MANUAL)
        return S_MANUAL;
    if (d < D_STRIPED0)
        return S_SERIAL0 + (int)(d - D_SERIAL0);
    if (d < D_FACE0)
        return S_STRIPED0 + (int)(d - D_STRIPED0);
    return -1;
}

/* NULL if the dest's slot is empty. */
static serex_executor *dest_ex(unsigned d)
{
    if (d == D_MANUAL)
        return fz.manual;
    if (d < D_STRIPED0)
        return fz.serial[d - D_SERIAL0];
    if (d < D_FACE0)
        return striped_face((int)((d - D_STRIPED0) / NKEYS));
    if (d < D_SCHED)
        return striped_face((int)(d - D_FACE0));
    return serex_scheduler_executor(fz.sched);
}

static bool status_ok(int rc)
{
    CHECK(serex_strerror(rc) != NULL, "strerror gave NULL", NULL);
    return rc == SEREX_OK || rc == SEREX_EREJECTED || rc == SEREX_ENOMEM ||
           rc == SEREX_EFULL;
}

/* --- what tasks do --- */

static void task_run(void *arg);
static void on_pending(serex_fn fn, void *arg, void *ctx);

static void timer_ran(struct rec *r)
{
    int64_t now = serex_scheduler_now(fz.sched);

    switch (r->kind) {
    case K_ONESHOT:
        CHECK(now >= r->due, "a timer fired early (promise 6)", r);
        CHECK(!r->null_target || now == r->due,
              "advance did not run a timer at its due time", r);
        break;
    case K_RATE:
        CHECK(r->stop == STOP_NO, "a periodic run started after cancel "
              "or shutdown", r);
        CHECK(now >= sat_add(r->due, (int64_t)r->runs * r->period),
              "a fixed-rate run came early (promise 6)", r);
        break;
    default: /* K_DELAY */
        CHECK(r->stop == STOP_NO, "a periodic run started after cancel "
              "or shutdown", r);
        CHECK(now >= (r->runs == 0 ? r->due : sat_add(r->last, r->period)),
              "a fixed-delay run came early (promise 6)", r);
        r->last = now;
        break;
    }
}

/* A new plain task on dest @d; false if there was no room or no dest. */
static bool exec_new(unsigned d, uint8_t act, uint8_t act_arg)
{
    serex_executor *ex = dest_ex(d %= ND);
    int s = dest_stream(d), rc;
    struct rec *r;

    if (ex == NULL || (r = rec_new(K_EXEC)) == NULL)
        return false;
    r->act = act;
    r->act_arg = act_arg;
    if (s >= 0)
        stream_begin(r, s);
    if (d >= D_STRIPED0 && d < D_FACE0)
        rc = serex_striped_execute(fz.striped[(d - D_STRIPED0) / NKEYS],
                                   keys[(d - D_STRIPED0) % NKEYS], task_run,
                                   r);
    else
        rc = serex_execute(ex, task_run, r);
    CHECK(status_ok(rc), "execute gave an unexpected status", r);
    if (rc == SEREX_OK)
        stream_commit(r);
    else
        rec_unused(r);
    return true;
}

static void timer_cancel(unsigned i);
static void future_cancel(unsigned i);
static void schedule_new(int kind, int target, int64_t delay, int64_t period,
                         bool keep, uint8_t act, uint8_t act_arg);
static void chan_send(unsigned c, int target);
static void sel_shutdown(unsigned sel, bool now);

/*
 * Promise 7 from inside a task: on the manual executor, await and destroy
 * of it or of a wrapper over it must say EDEADLK; on the timer thread, of
 * the scheduler. destroy is tried only once await said EDEADLK.
 */
static void probe(unsigned sel)
{
    serex_executor *ex = sel_ex(sel);
    bool must;
    int rc;

    if (ex == NULL)
        return;
    sel %= NSEL;
    must = (fz.ctx == CTX_MANUAL && sel != SEL_SCHED) ||
           (fz.ctx == CTX_TIMER && sel == SEL_SCHED);
    rc = serex_await_termination(ex, 0);
    if (must) {
        CHECK(rc == SEREX_EDEADLK, "await_termination from its own task "
              "did not say EDEADLK (promise 7)", NULL);
        CHECK(serex_destroy(ex) == SEREX_EDEADLK, "destroy from its own "
              "task did not say EDEADLK (promise 7)", NULL);
    } else {
        CHECK(rc == SEREX_OK || rc == SEREX_ETIMEDOUT || rc == SEREX_EDEADLK,
              "await_termination(0) gave an unexpected status", NULL);
    }
}

static void task_act(struct rec *r)
{
    uint8_t a = r->act_arg;

    switch (r->act) {
    case A_CHILD: exec_new(a, NACT, 0); break;
    case A_SHUTDOWN: sel_shutdown(a, false); break;
    case A_SHUTDOWN_NOW: sel_shutdown(a, true); break;
    case A_PROBE: probe(a); break;
    case A_TIMER_CANCEL: timer_cancel(a); break;
    case A_FUTURE_CANCEL: future_cancel(a); break;
    case A_SCHEDULE:
        schedule_new(0, (a & 3) - 1, (int64_t)(a >> 2) * 64, 0, false, NACT,
                     0);
        break;
    case A_SEND: chan_send(a & 1, 0); break;
    default: break;
    }
}

static void task_run(void *arg)
{
    struct rec *r = arg;

    CHECK(r->kind != K_UNUSED, "a task ran though its submission failed "
          "(promise 1)", r);
    switch (r->kind) {
    case K_EXEC:
    case K_GATE:
    case K_SEND:
        CHECK(r->runs + r->backs == 0, "a task ran twice, or ran after it "
              "came back (promise 1)", r);
        break;
    case K_ONESHOT:
        CHECK(r->runs + r->backs == 0 && !r->cancelled, "a one-shot timer "
              "ran twice, or after it came back or was cancelled", r);
        timer_ran(r);
        break;
    case K_RATE:
    case K_DELAY: timer_ran(r); break;
    default: fuzz_fail("task_run got a record of the wrong kind", r);
    }
    r->runs++;
    stream_event(r, true);
    task_act(r);
}

static void *task_call(void *arg)
{
    struct rec *r = arg;

    CHECK(r->kind == K_FUTURE, "a future's task ran though submit failed",
          r);
    CHECK(r->runs == 0 && !r->cancelled, "a future's task ran twice, or "
          "after it was cancelled", r);
    r->runs++;
    stream_event(r, true);
    return r;
}

static void task_item(void *item, void *arg)
{
    struct rec *r = arg, *it = item;

    CHECK(r->kind == K_RECV, "a receive ran though recv failed", r);
    CHECK(r->runs == 0, "a receive's continuation ran twice", r);
    r->runs++;
    if (it == NULL) {
        r->got = 0;
        return;
    }
    CHECK(it >= fz.recs && it < fz.recs + fz.nrecs && it->kind == K_SEND &&
          it->chan == r->chan, "a receiver got an item never sent on its "
          "channel", r);
    CHECK(it->delivered == 0, "an item was delivered twice", it);
    it->delivered++;
    r->got = (int32_t)(it - fz.recs) + 1;
}

/* --- what comes back --- */

static void foreign_push(serex_fn fn, void *arg)
{
    if (fz.nforeign == fz.foreign_cap) {
        size_t cap = fz.foreign_cap ? 2 * fz.foreign_cap : 64;
        struct foreign *p = realloc(fz.foreign, cap * sizeof *p);

        if (p == NULL)
            fuzz_fail("out of memory for handed-back tasks", NULL);
        fz.foreign = p;
        fz.foreign_cap = cap;
    }
    fz.foreign[fz.nforeign++] = (struct foreign){fn, arg};
}

/* Runs the handed-back tasks that are not ours, oldest first (those
 * they hand back meanwhile too). Returns whether any ran. */
static bool foreign_run_all(void)
{
    enum ctx saved = fz.ctx;
    bool ran = false;

    fz.ctx = CTX_FOREIGN;
    while (fz.foreign_head < fz.nforeign) {
        struct foreign f = fz.foreign[fz.foreign_head++];

        f.fn(f.arg);
        ran = true;
    }
    fz.foreign_head = fz.nforeign = 0;
    fz.ctx = saved;
    return ran;
}

static void on_pending(serex_fn fn, void *arg, void *ctx)
{
    struct rec *r = arg;

    (void)ctx;
    if (fn != task_run) {
        CHECK(fn != NULL, "on_pending got a NULL task", NULL);
        foreign_push(fn, arg);
        return;
    }
    CHECK(r->kind != K_UNUSED, "a task came back though its submission "
          "failed (promise 1)", r);
    CHECK(r->kind != K_RATE && r->kind != K_DELAY, "a periodic timer was "
          "handed back (periodic timers are cancelled)", r);
    CHECK(r->runs + r->backs == 0 && !r->cancelled, "a task came back "
          "twice, or after it ran or was cancelled", r);
    r->backs++;
    stream_event(r, false);
}

static void on_rejected(serex_fn fn, void *arg, void *ctx)
{
    struct rec *r = arg;

    (void)ctx;
    CHECK(fn == task_run, "on_rejected got a task that is not a timer's",
          NULL);
    CHECK(r->kind == K_ONESHOT || r->kind == K_RATE || r->kind == K_DELAY,
          "on_rejected got a task that is not a timer's", r);
    CHECK(!r->cancelled && r->stop != STOP_CANCEL, "on_rejected got a "
          "timer that cancel had stopped", r);
    CHECK(r->kind != K_ONESHOT || r->runs + r->backs == 0,
          "on_rejected got a one-shot that had run or come back", r);
    r->backs++;
    if (r->stop == STOP_NO && r->kind != K_ONESHOT)
        r->stop = STOP_REJECTED; /* a refused run ends a periodic timer */
    fz.rejected++;
}

/* --- running --- */

static bool manual_run_one(void)
{
    enum ctx saved = fz.ctx;
    bool ran;

    fz.ctx = CTX_MANUAL;
    ran = serex_manual_run_one(fz.manual);
    fz.ctx = saved;
    return ran;
}

static void manual_run_pending(void)
{
    enum ctx saved = fz.ctx;

    fz.ctx = CTX_MANUAL;
    serex_manual_run_pending(fz.manual);
    fz.ctx = saved;
}

/* Runs everything runnable: the manual queue and the handed-back tasks. */
static void settle(void)
{
    unsigned budget = SETTLE_BUDGET;
    bool progress = true;

    while (progress) {
        progress = false;
        while (manual_run_one()) {
            progress = true;
            CHECK(--budget > 0, "the manual executor never empties", NULL);
        }
        if (foreign_run_all())
            progress = true;
    }
}

static void advance(int64_t delta)
{
    enum ctx saved = fz.ctx;

    fz.ctx = CTX_TIMER;
    CHECK(serex_scheduler_advance(fz.sched, delta) == SEREX_OK,
          "advance failed", NULL);
    fz.ctx = saved;
}

/* --- wrappers --- */

static void serial_create(unsigned slot)
{
    slot %= NSERIAL;
    if (fz.serial[slot] == NULL)
        CHECK(status_ok(serex_serial_create(fz.manual, &fz.wcfg,
                                            &fz.serial[slot])),
              "serial_create failed", NULL);
}

static void striped_create(unsigned slot)
{
    slot %= NSTRIPED;
    if (fz.striped[slot] == NULL)
        CHECK(status_ok(serex_striped_create(fz.manual, &fz.wcfg,
                                             &fz.striped[slot])),
              "striped_create failed", NULL);
}

/* Destroys a serial or striped when valid and non-blocking (see top). */
static void wrapper_destroy(unsigned w)
{
    bool is_serial = (w %= NSERIAL + NSTRIPED) < NSERIAL;
    serex_executor *ex = is_serial ? fz.serial[w]
                                   : striped_face((int)(w - NSERIAL));

    if (ex == NULL || (is_serial && serial_in_use((int)w)))
        return;
    serex_shutdown_now(ex, on_pending, NULL);
    if (serex_await_termination(ex, 0) != SEREX_OK)
        return; /* a keyless task or drain is still out: not now */
    CHECK(serex_destroy(ex) == SEREX_OK, "destroy of a terminated wrapper "
          "failed", NULL);
    if (is_serial)
        fz.serial[w] = NULL;
    else
        fz.striped[w - NSERIAL] = NULL;
}

static void sel_shutdown(unsigned sel, bool now)
{
    serex_executor *ex = sel_ex(sel);

    if (ex == NULL)
        return;
    if (now)
        serex_shutdown_now(ex, on_pending, NULL);
    else
        serex_shutdown(ex);
    if (sel % NSEL == SEL_SCHED)
        periodic_stop_all(STOP_SHUTDOWN);
}

static void sel_await(unsigned sel)
{
    serex_executor *ex = sel_ex(sel);
    int rc;

    if (ex == NULL)
        return;
    rc = serex_await_termination(ex, 0);
    CHECK(rc == SEREX_OK || rc == SEREX_ETIMEDOUT, "await_termination(0) "
          "outside any task said neither OK nor ETIMEDOUT", NULL);
}

static void sel_stats(unsigned sel)
{
    serex_executor *ex = sel_ex(sel);
    serex_stats st;

    if (ex == NULL)
        return;
    CHECK(serex_executor_stats(ex, &st) == SEREX_OK, "stats failed", NULL);
    CHECK(st.completed <= st.submitted, "stats: more completed than "
          "submitted", NULL);
    if (sel % NSEL >= SEL_FACE0 && sel % NSEL < SEL_SCHED)
        (void)serex_striped_lanes(fz.striped[sel % NSEL - SEL_FACE0]);
    (void)serex_scheduler_pending(fz.sched);
}

/* --- futures --- */

static void submit_new(unsigned d)
{
    serex_executor *ex = dest_ex(d %= ND);
    int s = dest_stream(d), slot = -1, rc;
    struct rec *r;

    for (int i = 0; i < NFUT && slot < 0; i++)
        if (fz.fut[i].f == NULL)
            slot = i;
    if (ex == NULL || slot < 0 || (r = rec_new(K_FUTURE)) == NULL)
        return;
    if (s >= 0)
        stream_begin(r, s);
    if (d >= D_STRIPED0 && d < D_FACE0)
        rc = serex_striped_submit(fz.striped[(d - D_STRIPED0) / NKEYS],
                                  keys[(d - D_STRIPED0) % NKEYS], task_call,
                                  r, &fz.fut[slot].f);
    else
        rc = serex_submit(ex, task_call, r, &fz.fut[slot].f);
    CHECK(status_ok(rc), "submit gave an unexpected status", r);
    CHECK((rc == SEREX_OK) == (fz.fut[slot].f != NULL),
          "submit's *out disagrees with its status", r);
    if (rc != SEREX_OK) {
        rec_unused(r);
        return;
    }
    stream_commit(r);
    fz.fut[slot].r = r;
}

/* wait(0) must agree with what the task did. */
static int future_check(unsigned i)
{
    struct rec *r = fz.fut[i].r;
    int rc = serex_future_wait(fz.fut[i].f, 0);

    switch (rc) {
    case SEREX_OK:
        CHECK(r->runs == 1, "wait said OK but the task never ran", r);
        CHECK(serex_future_value(fz.fut[i].f) == r, "a future's value is "
              "not what its task returned", r);
        break;
    case SEREX_ECANCELED:
        CHECK(r->runs == 0, "wait said ECANCELED but the task ran", r);
        r->cancelled = true;
        break;
    case SEREX_ETIMEDOUT:
        CHECK(r->runs == 0 && !r->cancelled, "wait said ETIMEDOUT but the "
              "task ran or was cancelled", r);
        break;
    default: fuzz_fail("future_wait gave an unexpected status", r);
    }
    return rc;
}

static void future_cancel(unsigned i)
{
    struct rec *r;

    if (fz.fut[i %= NFUT].f == NULL)
        return;
    r = fz.fut[i].r;
    if (serex_future_cancel(fz.fut[i].f)) {
        CHECK(r->runs == 0 && !r->cancelled, "future_cancel said true for a "
              "task that ran or was cancelled", r);
        r->cancelled = true;
        CHECK(future_check(i) == SEREX_ECANCELED, "a cancelled future does "
              "not say ECANCELED", r);
    } else {
        CHECK(future_check(i) != SEREX_ETIMEDOUT, "future_cancel said false "
              "for a task that had not started", r);
    }
}

static void future_release(unsigned i)
{
    if (fz.fut[i %= NFUT].f == NULL)
        return;
    future_check(i);
    serex_future_release(fz.fut[i].f);
    fz.fut[i].f = NULL;
    fz.fut[i].r = NULL;
}

/* --- timers --- */

/* @kind 0 one-shot, 1 fixed rate, 2 fixed delay; @target -1: none. */
static void schedule_new(int kind, int target, int64_t delay, int64_t period,
                         bool keep, uint8_t act, uint8_t act_arg)
{
    static const uint8_t kinds[3] = {K_ONESHOT, K_RATE, K_DELAY};
    serex_executor *ex = target_ex(target);
    serex_timer *t = NULL, **out = NULL;
    int slot = -1, rc;
    struct rec *r;

    if ((target >= 0 && ex == NULL) ||
        (kind > 0 && fz.periodic >= MAX_PERIODIC))
        return;
    for (int i = 0; keep && i < NTIMER && slot < 0; i++)
        if (fz.timer[i].t == NULL)
            slot = i;
    if ((r = rec_new((enum kind)kinds[kind])) == NULL)
        return;
    r->act = act;
    r->act_arg = act_arg;
    r->ext = (int8_t)(target > 0 ? target - 1 : -1);
    r->null_target = target < 0;
    r->due = sat_add(serex_scheduler_now(fz.sched), delay);
    r->period = period;
    out = slot >= 0 ? &t : NULL;
    if (kind == 0)
        rc = serex_schedule(fz.sched, ex, delay, task_run, r, out);
    else if (kind == 1)
        rc = serex_schedule_fixed_rate(fz.sched, ex, delay, period, task_run,
                                       r, out);
    else
        rc = serex_schedule_fixed_delay(fz.sched, ex, delay, period,
                                        task_run, r, out);
    CHECK(status_ok(rc), "schedule gave an unexpected status", r);
    CHECK(rc == SEREX_OK || t == NULL, "a failed schedule set *out", r);
    if (rc != SEREX_OK) {
        rec_unused(r);
        return;
    }
    fz.periodic += kind > 0;
    if (slot >= 0) {
        fz.timer[slot].t = t;
        fz.timer[slot].r = r;
    }
}

static void timer_cancel(unsigned i)
{
    struct rec *r;
    bool ok;

    if (fz.timer[i %= NTIMER].t == NULL)
        return;
    r = fz.timer[i].r;
    ok = serex_timer_cancel(fz.timer[i].t);
    if (r->kind == K_ONESHOT) {
        if (ok) {
            CHECK(r->runs + r->backs == 0 && !r->cancelled, "timer_cancel "
                  "said true for a timer that ran, came back or was "
                  "cancelled", r);
            r->cancelled = true;
        } else {
            CHECK(r->runs + r->backs > 0 || r->cancelled, "timer_cancel said "
                  "false for a one-shot that never ran", r);
        }
    } else if (r->stop == STOP_NO) {
        r->stop = STOP_CANCEL; /* true or false: no run starts from now */
    }
}

static void timer_release(unsigned i)
{
    if (fz.timer[i %= NTIMER].t == NULL)
        return;
    serex_timer_release(fz.timer[i].t);
    fz.timer[i].t = NULL;
    fz.timer[i].r = NULL;
}

/* --- gates --- */

static void gate_execute(uint8_t a, uint8_t act, uint8_t act_arg)
{
    unsigned g = a & 1, t = (unsigned)(a >> 1) % (1 + NSERIAL);
    serex_executor *ex = target_ex((int)t);
    struct rec *r;
    int rc;

    if (fz.gate[g] == NULL || ex == NULL || (r = rec_new(K_GATE)) == NULL)
        return;
    r->act = act;
    r->act_arg = act_arg;
    r->ext = (int8_t)((int)t - 1);
    stream_begin(r, S_GATE0 + (int)(g * (1 + NSERIAL) + t));
    rc = serex_gate_execute(fz.gate[g], ex, task_run, r);
    CHECK(status_ok(rc), "gate_execute gave an unexpected status", r);
    if (rc == SEREX_OK)
        stream_commit(r);
    else
        rec_unused(r);
}

static void gate_destroy(unsigned g)
{
    if (fz.gate[g] == NULL)
        return;
    serex_gate_destroy(fz.gate[g], on_pending, NULL);
    fz.gate[g] = NULL;
}

/* --- channels --- */

static void chan_send(unsigned c, int target)
{
    serex_executor *ex = target_ex(target);
    struct rec *r;
    int rc;

    if (fz.chan[c] == NULL || ex == NULL || (r = rec_new(K_SEND)) == NULL)
        return;
    r->chan = (int8_t)c;
    r->ext = (int8_t)(target - 1);
    r->seq = fz.sends[c];
    rc = serex_channel_send(fz.chan[c], r, ex, task_run, r);
    CHECK(status_ok(rc), "channel_send gave an unexpected status", r);
    if (rc == SEREX_OK)
        fz.sends[c]++;
    else
        rec_unused(r);
}

static void chan_recv(unsigned c, int target)
{
    serex_executor *ex = target_ex(target);
    struct rec *r;
    int rc;

    if (fz.chan[c] == NULL || ex == NULL || (r = rec_new(K_RECV)) == NULL)
        return;
    r->chan = (int8_t)c;
    r->ext = (int8_t)(target - 1);
    r->seq = fz.recvs[c];
    rc = serex_channel_recv(fz.chan[c], ex, task_item, r);
    CHECK(status_ok(rc), "channel_recv gave an unexpected status", r);
    if (rc == SEREX_OK)
        fz.recvs[c]++;
    else
        rec_unused(r);
}

/* The teardown's receiver: one at a time, each settled before the next. */
static void td_item(void *item, void *arg)
{
    struct rec *it = item;

    (void)arg;
    CHECK(fz.td.pending == 1, "a teardown receive ran twice", NULL);
    fz.td.pending = 0;
    if (it == NULL) {
        CHECK(fz.td.seq >= fz.sends[fz.td.chan], "a closed channel said "
              "empty with items still in it", NULL);
        fz.td.got_null = true;
        return;
    }
    CHECK(it >= fz.recs && it < fz.recs + fz.nrecs && it->kind == K_SEND &&
          it->chan == fz.td.chan, "a receiver got an item never sent on its "
          "channel", NULL);
    CHECK(it->delivered == 0, "an item was delivered twice", it);
    CHECK(it->seq == fz.td.seq, "a channel delivered out of send order", it);
    it->delivered++;
}

/* Closes channel @c and receives until it says empty. */
static void chan_drain(unsigned c)
{
    uint32_t limit = fz.sends[c] + fz.recvs[c] + 2;

    serex_channel_close(fz.chan[c]);
    fz.td.chan = (int)c;
    fz.td.got_null = false;
    for (uint32_t i = 0; !fz.td.got_null; i++) {
        CHECK(i < limit, "a closed channel never said empty", NULL);
        fz.td.pending = 1;
        fz.td.seq = fz.recvs[c]++;
        CHECK(serex_channel_recv(fz.chan[c], fz.manual, td_item, NULL) ==
              SEREX_OK, "channel_recv failed in teardown", NULL);
        settle();
        CHECK(fz.td.pending == 0, "a teardown receive never completed",
              NULL);
    }
}

/* --- bad input (promise 8) --- */

/* One invalid call, chosen by @a: it must say SEREX_EINVAL and leave
 * nothing behind; its task (an unused record) must never run. */
static void bad_input(uint8_t a)
{
    struct rec *r = rec_new(K_EXEC);
    serex_timer *t = (serex_timer *)&fz;
    serex_channel *ch = (serex_channel *)&fz;
    int64_t neg = -1 - (int64_t)(a >> 4);
    int rc;

    if (r == NULL)
        return;
    rec_unused(r);
    switch (a % 10) {
    case 0: rc = serex_schedule(fz.sched, NULL, neg, task_run, r, &t); break;
    case 1:
        rc = serex_schedule_fixed_rate(fz.sched, fz.manual, 0, 0, task_run, r,
                                       &t);
        break;
    case 2:
        rc = serex_schedule_fixed_delay(fz.sched, NULL, neg, 1, task_run, r,
                                        &t);
        break;
    case 3: rc = serex_channel_create(0, &ch); break;
    case 4: rc = serex_scheduler_advance(fz.sched, neg); break;
    case 5: rc = serex_execute(fz.manual, NULL, r); break;
    case 6: rc = serex_await_termination(fz.manual, neg - 1); break;
    case 7:
        rc = fz.gate[0] ? serex_gate_execute(fz.gate[0], NULL, task_run, r)
                        : SEREX_EINVAL;
        break;
    case 8:
        rc = fz.chan[0] ? serex_channel_send(fz.chan[0], NULL, fz.manual,
                                             task_run, r)
                        : SEREX_EINVAL;
        break;
    default:
        rc = fz.striped[0] ? serex_striped_execute(fz.striped[0], a, NULL, r)
                           : SEREX_EINVAL;
        break;
    }
    CHECK(rc == SEREX_EINVAL, "bad input did not say EINVAL (promise 8)", r);
    CHECK(t == NULL || t == (serex_timer *)&fz, "a refused schedule left "
          "*out set", r);
    CHECK(ch == NULL || ch == (serex_channel *)&fz, "a refused "
          "channel_create left *out set", r);
}

/* --- decoding --- */

static void op_schedule(void)
{
    uint8_t k = next_byte(), lo = next_byte(), hi = next_byte();
    uint8_t p = next_byte(), act = next_byte(), arg = next_byte();

    schedule_new(k % 3, (k / 3) % (2 + NSERIAL) - 1,
                 (int64_t)(lo | hi << 8), 256 * (int64_t)(1 + p),
                 (k / 15) % 4 != 3, act % 16, arg);
}

static void op_execute(void)
{
    uint8_t d = next_byte(), act = next_byte(), arg = next_byte();

    exec_new(d, act % 16, arg);
}

static void op_gate(enum op op, uint8_t a)
{
    unsigned g = a & 1;

    switch (op) {
    case OP_GATE_CREATE:
        if (fz.gate[g] == NULL)
            CHECK(status_ok(serex_gate_create(a & 2, &fz.gate[g])),
                  "gate_create failed", NULL);
        break;
    case OP_GATE_EXECUTE: {
        uint8_t act = next_byte(), arg = next_byte();

        gate_execute(a, act % 16, arg);
        break;
    }
    case OP_GATE_OPEN: serex_gate_open(fz.gate[g]); break;
    case OP_GATE_CLOSE: serex_gate_close(fz.gate[g]); break;
    default: gate_destroy(g); break;
    }
}

static void op_chan(enum op op, uint8_t a)
{
    unsigned c = a & 1;

    switch (op) {
    case OP_CHAN_CREATE:
        if (fz.chan[c] == NULL)
            CHECK(status_ok(serex_channel_create(1 + ((a >> 1) & 3),
                                                 &fz.chan[c])),
                  "channel_create failed", NULL);
        break;
    case OP_CHAN_SEND: chan_send(c, (a >> 1) % (1 + NSERIAL)); break;
    case OP_CHAN_RECV: chan_recv(c, (a >> 1) % (1 + NSERIAL)); break;
    default: serex_channel_close(fz.chan[c]); break;
    }
}

static void fuzz_op(enum op op)
{
    uint8_t a;

    if (fz.trace)
        fprintf(stderr, "op %u: %s\n", fz.op, op_names[op]);
    switch (op) {
    case OP_EXECUTE: op_execute(); return;
    case OP_SCHEDULE: op_schedule(); return;
    case OP_RUN_ONE: manual_run_one(); return;
    case OP_RUN_PENDING: manual_run_pending(); return;
    case OP_RUN_HANDED_BACK: foreign_run_all(); return;
    default: break;
    }
    a = next_byte();
    switch (op) {
    case OP_SERIAL_CREATE: serial_create(a); break;
    case OP_STRIPED_CREATE: striped_create(a); break;
    case OP_WRAPPER_DESTROY: wrapper_destroy(a); break;
    case OP_SUBMIT: submit_new(a); break;
    case OP_FUTURE_CANCEL: future_cancel(a); break;
    case OP_FUTURE_WAIT:
        if (fz.fut[a % NFUT].f != NULL)
            future_check(a % NFUT);
        break;
    case OP_FUTURE_RELEASE: future_release(a); break;
    case OP_TIMER_CANCEL: timer_cancel(a); break;
    case OP_TIMER_RELEASE: timer_release(a); break;
    case OP_ADVANCE: advance((int64_t)(a | next_byte() << 8)); break;
    case OP_SHUTDOWN: sel_shutdown(a, false); break;
    case OP_SHUTDOWN_NOW: sel_shutdown(a, true); break;
    case OP_AWAIT: sel_await(a); break;
    case OP_ALLOC_FAIL: alloc_fail(1 + a % 16); break;
    case OP_STATS: sel_stats(a); break;
    case OP_BAD_INPUT: bad_input(a); break;
    case OP_CHAN_CREATE:
    case OP_CHAN_SEND:
    case OP_CHAN_RECV:
    case OP_CHAN_CLOSE: op_chan(op, a); break;
    default: op_gate(op, a); break;
    }
}

/* --- setup and teardown --- */

static void fuzz_setup(const uint8_t *data, size_t size)
{
    static const size_t caps[4] = {0, 4, 16, 64};
    serex_scheduler_config cfg = {0};
    uint8_t b;

    memset(&fz, 0, offsetof(struct fuzz, recs));
    fz.in = data;
    fz.len = size;
    fz.trace = getenv("SEREX_FUZZ_TRACE") != NULL;
    alloc_fail(0);
    b = next_byte();
    cfg.manual = true;
    cfg.wheel_size = 2u << (b & 7);
    cfg.tick_ns = (b >> 3) & 7 ? INT64_C(1) << (2 * ((b >> 3) & 7)) : 0;
    cfg.max_timers = caps[b >> 6];
    cfg.on_rejected = on_rejected;
    b = next_byte();
    fz.wcfg.batch = b & 3;
    CHECK(serex_manual_create(&fz.manual) == SEREX_OK,
          "manual_create failed", NULL);
    CHECK(serex_scheduler_create(&cfg, &fz.sched) == SEREX_OK,
          "scheduler_create failed", NULL);
    /* Opt-in (see README.md): start 1 ms before the clock saturates. */
    if (b & 0x80)
        advance(INT64_MAX - SEREX_FUZZ_SATURATE_NS);
}

/* Every end-of-run promise of the records (see the top of the file). */
static void check_recs(void)
{
    for (size_t i = 0; i < fz.nrecs; i++) {
        struct rec *r = &fz.recs[i];
        uint32_t n = r->runs + r->backs;

        switch (r->kind) {
        case K_EXEC:
        case K_GATE:
            CHECK(n == 1, "a task was lost: it never ran nor came back "
                  "(promise 1)", r);
            break;
        case K_ONESHOT:
            CHECK(n + r->cancelled == 1, "a one-shot timer was lost: it "
                  "never ran, came back, nor was cancelled", r);
            break;
        case K_SEND:
            CHECK(n == 1, "a send's continuation never ran", r);
            CHECK(r->delivered == 1, "a sent item was never received", r);
            break;
        case K_RECV:
            CHECK(r->runs == 1, "a receive's continuation never ran", r);
            if (r->seq < fz.sends[r->chan])
                CHECK(r->got > 0 && fz.recs[r->got - 1].seq == r->seq,
                      "a channel delivered out of send order", r);
            else
                CHECK(r->got == 0, "a receive past the last item got one",
                      r);
            break;
        default: break;
        }
    }
}

static void check_terminated(serex_executor *ex)
{
    if (ex != NULL)
        CHECK(serex_await_termination(ex, 0) == SEREX_OK, "an executor "
              "is not terminated after shutdown_now and running "
              "everything", NULL);
}

/* With SEREX_FUZZ_TRACE: what became of the tasks, by kind. */
static void trace_summary(void)
{
    static const char *const names[] = {"unused", "exec", "gate", "oneshot",
                                        "rate", "delay", "send", "recv",
                                        "future"};
    unsigned long n[9] = {0}, runs[9] = {0}, backs[9] = {0}, canc[9] = {0};

    for (size_t i = 0; i < fz.nrecs; i++) {
        const struct rec *r = &fz.recs[i];

        n[r->kind]++;
        runs[r->kind] += r->runs;
        backs[r->kind] += r->backs;
        canc[r->kind] += r->cancelled;
    }
    for (int k = 0; k < 9; k++)
        if (n[k] > 0)
            fprintf(stderr, "  %-7s %4lu tasks: %lu runs, %lu back, %lu "
                    "cancelled\n", names[k], n[k], runs[k], backs[k],
                    canc[k]);
    fprintf(stderr, "  clock %lld ns, %lu rejected\n",
            (long long)serex_scheduler_now(fz.sched),
            (unsigned long)fz.rejected);
}

/* Teardown, part 1: shut everything down and run what is left, so every
 * task has run or come back. */
static void teardown_drain(void)
{
    alloc_fail(0);
    fz.ctx = CTX_TOP;
    for (unsigned g = 0; g < NGATE; g++)
        gate_destroy(g);
    for (unsigned c = 0; c < NCHAN; c++)
        if (fz.chan[c] != NULL)
            chan_drain(c);
    serex_shutdown_now(serex_scheduler_executor(fz.sched), on_pending, NULL);
    periodic_stop_all(STOP_SHUTDOWN);
    settle();
    for (unsigned w = 0; w < NSERIAL + NSTRIPED; w++) {
        serex_shutdown_now(w < NSERIAL ? fz.serial[w]
                                       : striped_face((int)(w - NSERIAL)),
                           on_pending, NULL);
        settle();
    }
    serex_shutdown_now(fz.manual, on_pending, NULL);
    settle();
}

/* Teardown, part 2: the end-of-run checks, then free everything. */
static void teardown_check(void)
{
    for (unsigned i = 0; i < NFUT; i++) {
        if (fz.fut[i].f != NULL)
            CHECK(future_check(i) != SEREX_ETIMEDOUT, "a future never "
                  "completed: its task was lost", fz.fut[i].r);
        future_release(i);
    }
    for (unsigned i = 0; i < NTIMER; i++)
        timer_release(i);
    for (unsigned i = 0; i < NSEL; i++)
        check_terminated(sel_ex(i));
    check_recs();
    if (fz.trace)
        trace_summary();
    CHECK(serex_scheduler_rejected(fz.sched) == fz.rejected, "the "
          "scheduler's rejected count disagrees with on_rejected", NULL);
    CHECK(serex_destroy(serex_scheduler_executor(fz.sched)) == SEREX_OK,
          "scheduler destroy failed", NULL);
    for (unsigned w = 0; w < NSERIAL + NSTRIPED; w++)
        wrapper_destroy(w);
    for (unsigned w = 0; w < NSERIAL + NSTRIPED; w++)
        CHECK(w < NSERIAL ? fz.serial[w] == NULL
                          : fz.striped[w - NSERIAL] == NULL,
              "a terminated wrapper could not be destroyed", NULL);
    CHECK(serex_destroy(fz.manual) == SEREX_OK, "manual destroy failed",
          NULL);
    for (unsigned c = 0; c < NCHAN; c++)
        serex_channel_destroy(fz.chan[c]);
    CHECK(fz.nforeign == 0, "handed-back tasks left over", NULL);
    free(fz.foreign);
    fz.foreign = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup(data, size);
    while (fz.pos < fz.len && fz.op < MAX_OPS) {
        uint8_t b = next_byte();

        fz.op++;
        fuzz_op((enum op)(b % NOPS));
    }
    teardown_drain();
    teardown_check();
    return 0;
}

/* --- replay: the build without libFuzzer --- */

#ifndef SEREX_LIBFUZZER

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (f == NULL) {
        perror(path);
        return -1;
    }
    do {
        if (len == cap) {
            uint8_t *p = realloc(buf, cap = cap ? 2 * cap : 4096);

            if (p == NULL) {
                fclose(f);
                free(buf);
                return -1;
            }
            buf = p;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    fclose(f);
    if (getenv("SEREX_FUZZ_TRACE") != NULL)
        fprintf(stderr, "replaying %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends a copy of "@dir/@name" to *@names; false if out of memory. */
static bool names_add(char ***names, size_t *n, size_t *cap, const char *dir,
                      const char *name)
{
    char *path;

    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        char **p = realloc(*names, c * sizeof *p);

        if (p == NULL)
            return false;
        *names = p;
        *cap = c;
    }
    if ((path = malloc(strlen(dir) + strlen(name) + 2)) == NULL)
        return false;
    sprintf(path, "%s/%s", dir, name);
    (*names)[(*n)++] = path;
    return true;
}

/* Replays every plain file in @dir, in name order (dot files skipped);
 * returns how many, or -1 on an error. */
static long replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0;
    long done = 0;

    if (d == NULL) {
        perror(dir);
        return -1;
    }
    while (done >= 0 && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' &&
            !names_add(&names, &n, &cap, dir, e->d_name))
            done = -1;
    closedir(d);
    if (n > 0)
        qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) {
        struct stat st;

        if (done >= 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            done = replay_file(names[i]) == 0 ? done + 1 : -1;
        free(names[i]);
    }
    free(names);
    return done;
}

int main(int argc, char **argv)
{
    long total = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n"
                "Replays fuzz inputs; SEREX_FUZZ_TRACE=1 prints each op.\n",
                argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        long n;

        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        n = S_ISDIR(st.st_mode) ? replay_dir(argv[i])
                                : (replay_file(argv[i]) == 0 ? 1 : -1);
        if (n < 0)
            return 1;
        total += n;
    }
    printf("fuzz_api: replayed %ld input(s), no violation\n", total);
    return total > 0 ? 0 : 1;
}

#endif /* SEREX_LIBFUZZER */
