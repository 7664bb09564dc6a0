/* SPDX-License-Identifier: MIT */
/*
 * fuzz_api.c - a libFuzzer harness: its input bytes become a sequence of
 * serex calls on one manual executor and one manual scheduler (no thread
 * anywhere but in a pool round, whose workers are held in blockers while
 * it submits, so a run is still a pure function of its input), and every
 * promise of docs/contract.md that a single thread can observe is checked
 * as it goes. A violation calls abort(), which libFuzzer reports as a
 * crash.
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
 * (b & 3; 0: the default 64); bits 2-3 the scheduler's cfg.on_shutdown
 * (1 HAND_BACK, 2 DROP, else FIRE); bit 7 starts the scheduler's clock
 * 1 ms before it saturates at INT64_MAX (what found the hang at
 * saturation, fixed: see README.md). Then each
 * byte picks an operation (byte % NOPS, see enum op) and the bytes after
 * it are its arguments; a missing byte reads as 0. When the input ends,
 * teardown_drain() takes everything down in a valid order and
 * teardown_check() runs the end-of-run checks.
 *
 * --- What is checked ---
 * Every task carries its own record (struct rec). Exactly once: a task
 * whose execute, schedule, gate execute, send or group execute said
 * SEREX_OK runs once, or comes back once (to on_pending, or a scheduler's
 * on_rejected), or was cancelled by a cancel that said true (a group
 * cancel included); never two of these, and never anything for a task
 * whose submission failed. Order: tasks given to the manual executor, to
 * one serial, to one key of one striped or to one limiter run (and come
 * back) in the order their execute calls returned; tasks a gate forwards
 * to one target run in the order they entered the gate. Never early: a
 * one-shot timer runs at or after its due time (exactly at it on the
 * timer "thread", which advance drives, and under run_until), fixed-rate
 * run n at or after start + n * period and at or after the grid point its
 * missed-run policy gives (exactly there on the timer thread and under
 * run_until), with serex_timer_overrun() as that policy says, fixed-delay
 * runs at least the delay apart; no periodic run starts after a cancel or
 * a scheduler shutdown. Channels: the k-th receive gets the k-th item
 * sent, each item once, and NULL only once every item is delivered.
 * Futures agree with what their task did. A task running on the manual
 * executor that calls await_termination or destroy on it (or on a wrapper
 * over it) gets SEREX_EDEADLK; outside any task, never. Bad input says
 * SEREX_EINVAL and leaves nothing behind. Leaks are LeakSanitizer's
 * (libFuzzer's -detect_leaks).
 *
 * Continuations (0.2.0): an on_done continuation runs exactly once; a
 * then-future's call runs exactly once with its source's value if the
 * source ran and the then-future was not cancelled, and never otherwise
 * (cancelling a future cancels its then-futures at once); inside either,
 * serex_future_wait(source, 0) gives the outcome at once. Continuations of
 * one future that run on one serial (or the manual executor) run in the
 * order they were added. serex_future_wait(f, 0) from a task says
 * SEREX_EDEADLK exactly when f has not ended and is queued behind the
 * caller (promise 7b: f's executor is the manual executor the caller runs
 * in, a serial or striped key or limiter of 1 the caller is a task of;
 * a then-future counts as queued on its target), and a then-future's call
 * waiting for itself gets it too.
 * Groups: a group cancel returns the group's tasks not yet started; a
 * cancelled task never runs and never comes back; wait(0) says empty
 * exactly when no member is left (SEREX_EDEADLK from a task of the group);
 * a notification runs once, never before the members it was registered
 * after have left, and never from notify while the group has members.
 * Limiters: never more of a limiter's tasks inside their fn at once than
 * its max_running (tasks nest serex_manual_run_one to overlap). Promise
 * 2a: on_pending and on_rejected only ever get the harness's own tasks.
 *
 * Bounded executors (0.2.0: two serials and a striped over the manual
 * executor, with queue_capacity and lane_capacity, reached by the bx ops
 * and act A_BX only): the model counts the tasks waiting in each (and in
 * each key's lane), so every answer is known: with room SEREX_OK, full
 * SEREX_EFULL with nothing queued; serex_execute_wait and
 * serex_striped_execute_wait never say EFULL: from a task of the manual
 * executor (which they run on), SEREX_EDEADLK every time, room or not;
 * elsewhere, full, SEREX_ETIMEDOUT (timeout 0 or 1 to 1501 ns: nobody
 * makes room), and
 * SEREX_OK with SEREX_FOREVER where there is room; keyless tasks never
 * count; shut down, SEREX_EREJECTED. Each accepted task runs (or comes
 * back) once, in per-serial and per-key order; stats say queued = the
 * tasks waiting (never above the capacity), submitted and completed as
 * accepted and run, the config's name (copied), and the striped a lane per
 * key with tasks waiting, none other.
 * A pool round (the one op with threads: pool_round) holds 1 or 2 workers
 * in blockers, submits through the three priority faces, a serial (maybe
 * bounded) and a striped over faces, with the pool's queue_capacity per
 * level, and checks: every answer as its model says (a wrapper's first
 * task takes a place at its face's level for the drain); a blocker's
 * execute_wait on a face says SEREX_EDEADLK every time (and await of its pool,
 * promise 7); shutdown_now, of the pool or a face, hands back every task
 * waiting, the highest level first, each in submission order, and the
 * wrappers' own shutdown_now their tasks in order (promise 5); or, run,
 * one worker takes the highest level's oldest task first, wrappers keep
 * their order; each thread's on_thread_start and on_thread_stop run once
 * by the time await_termination says OK, a refusing start hook makes
 * create say SEREX_EREJECTED after every other thread's stop hook; every
 * task runs between on_task_start and on_task_end, counted once each;
 * pool_executor_at gives the pool for NORMAL, a face's faces are its
 * pool's, and stats of a face are its pool's.
 *
 * Issue 23 (ops 46 to 60 and act A_TOKEN; the model's essay is at
 * "issue 23: the model of futures' ends"): a token's first valid request
 * wins, children get the parent's cause, deadlines fire at exactly their
 * due time on the manual clock; an on_cancel callback runs once after
 * its token is cancelled and never after an unregister said true; a
 * future linked to a token cancelled before its call started never runs
 * and says the cause; a call's serex_future_set_error ends its future
 * with it, and errors pass down then-chains; a promise ends once; an
 * all/any ends exactly when, and with what, the model says; a closed
 * group refuses, fail-fast cancels what has not started, and wait says
 * the first error; a call that says SEREX_ENOMEM changed nothing.
 *
 * The model of the harness is exact where a single thread can know the
 * answer, and gives a range where serex ends work out of sight (a group's
 * cancelled task skipped by its executor, a future dropped by a
 * shutdown_now and never looked at): then a check accepts what the range
 * allows, and learns from the answer.
 *
 * Wrappers (serials, stripeds, limiters) are destroyed mid-run only when
 * that is valid and cannot block: nothing (timer, parked gate task,
 * channel continuation, a future's or group's continuation not yet
 * posted, a limiter over it) still names the wrapper as its target, and
 * after shutdown_now the wrapper says terminated to
 * await_termination(ex, 0). Groups are destroyed only once wait(0) says
 * empty.
 *
 * The internal names used are serex__alloc_fail_nth (fails the n-th
 * allocation from now; the static library has it), for op OP_ALLOC_FAIL,
 * and serex__cache_trim, which empties the node caches after each input:
 * a block an input left in the calling thread's list (or the depot) would
 * spare the next input an allocation, and so move which allocation an
 * armed failure hits, and the outcome with it (a crash found by libFuzzer
 * then did not replay alone, nor did its leak check's second run match
 * the first). Every input starts from empty caches, so its outcome is a
 * function of its bytes, wherever it runs in a process.
 * Define SEREX_FUZZ_NO_ALLOC_FAIL to build against the shared library.
 */
#include <stdatomic.h> /* the pool round's counters, hooks' and tasks' */
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
/* src/common_internal.h: the n-th allocation from now fails; 0: none.
 * Returns the allocations made since it was last set. */
unsigned long serex__alloc_fail_nth(unsigned long n);
/* src/nodecache_internal.h: frees the depot and the calling thread's
 * lists. */
void serex__cache_trim(void);
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NSERIAL 3
#define NSTRIPED 2
#define NKEYS 4
#define NGATE 2
#define NCHAN 2
#define NLIM 2
#define NGROUP 2
#define NFUT 16
#define NTIMER 32
#define NTHEN_FN 8     /* then-futures on one future: one fn each */
#define MAX_CONTS 16   /* continuations on one future */
#define MAX_NEST 4     /* serex_manual_run_one nested from tasks */
#define MAX_RUNNING 32 /* tasks inside task_run at once */
#define MAX_RECS 4096
#define MAX_OPS 2048
#define MAX_PERIODIC 16       /* bounds the runs one advance can make */
#define SETTLE_BUDGET (1u << 22)
#define SEREX_FUZZ_SATURATE_NS INT64_C(1000000)
#define NBX 3             /* bounded executors: serials 0 and 1, a striped */
#define BX_STRIPED 2      /* the bounded striped's slot */
#define NPOOL_TASKS 16    /* a pool round's tasks, its probe's included */
#define MAX_POOL_ROUNDS 4 /* per input: each round starts threads */
#define POOL_WAIT_NS SEREX_SEC(10) /* bounds each wait for a pool's thread */
#define NTOK 4                     /* token slots (issue 23's ops) */
#define MAX_TOKS 96     /* tokens (and groups' tokens) made per input */
#define MAX_HOOKS 384   /* what was registered on them, in order */
#define NREG 8          /* on_cancel registrations held */
#define NCOMB_IN 4      /* inputs of one all/any */
#define MAX_COMBS 48    /* all/any made per input */
#define NGRAVE 48       /* witnessed futures released by the input, held */
#define MAX_LIST 40     /* records on one future's list, witnesses included */
#define NO_DL INT64_MIN /* no deadline armed (due times are >= 0) */

/* Executors an operation can name (a "dest"), for execute and submit.
 * Continuations and groups take executors, not keys: a striped key dest
 * means the striped's keyless face there (dest_norm). */
enum {
    D_MANUAL,
    D_SERIAL0,
    D_STRIPED0 = D_SERIAL0 + NSERIAL,        /* striped i, key k */
    D_FACE0 = D_STRIPED0 + NSTRIPED * NKEYS, /* striped i's keyless face */
    D_SCHED = D_FACE0 + NSTRIPED,            /* the scheduler's face */
    D_LIM0,                                  /* limiter j */
    ND = D_LIM0 + NLIM,
    D_TIMER = ND, /* not a dest: a timer's run on the timer "thread" */
    D_NONE = 0xff
};

/* Executors for the life-cycle calls (shutdown, await, ...): a "sel". */
enum {
    SEL_MANUAL,
    SEL_SERIAL0,
    SEL_FACE0 = SEL_SERIAL0 + NSERIAL,
    SEL_SCHED = SEL_FACE0 + NSTRIPED,
    SEL_LIM0,
    NSEL = SEL_LIM0 + NLIM
};

/* Order streams: the manual executor, each serial, each striped key
 * (their runs and hand-backs together), each gate and target (runs),
 * each limiter (runs and hand-backs: a single thread starts its tasks in
 * submission order whatever its max_running). */
enum {
    S_MANUAL,
    S_SERIAL0,
    S_STRIPED0 = S_SERIAL0 + NSERIAL,
    S_GATE0 = S_STRIPED0 + NSTRIPED * NKEYS,
    S_LIM0 = S_GATE0 + NGATE * (1 + NSERIAL),
    S_BX0 = S_LIM0 + NLIM, /* bounded serial i; the bounded striped's keys */
    NSTREAMS = S_BX0 + BX_STRIPED + NKEYS
};

/* Wrappers a record may still post to (its "ext"): serials, stripeds,
 * limiters, in wrapper_destroy's numbering. */
enum {
    X_SERIAL0,
    X_STRIPED0 = X_SERIAL0 + NSERIAL,
    X_LIM0 = X_STRIPED0 + NSTRIPED,
    NX = X_LIM0 + NLIM
};

enum kind {
    K_UNUSED,
    K_EXEC,
    K_GATE,
    K_ONESHOT,
    K_RATE,
    K_DELAY,
    K_SEND,
    K_RECV,
    K_FUTURE,
    K_THEN,
    K_ONDONE,
    K_NOTE,
    /* issue 23 */
    K_PROMISE, /* serex_promise_create */
    K_COMB,    /* serex_future_all / _any */
    K_CB,      /* a serex_cancel_on_cancel callback */
    K_WITNESS, /* the harness's own on_done on a future (see witness_add) */
    K_CWATCH,  /* an all/any's watch on one of its inputs (model only) */
    NKINDS
};

/* What a task does when it runs, besides being counted. Values from NACT
 * to 15 (an act byte is taken % 16) do nothing. */
enum act {
    A_CHILD,
    A_SHUTDOWN,
    A_SHUTDOWN_NOW,
    A_PROBE,
    A_TIMER_CANCEL,
    A_FUTURE_CANCEL,
    A_SCHEDULE,
    A_SEND,
    A_FUTURE_WAIT,
    A_RUN_ONE,
    A_GROUP,
    A_CONT,
    A_BX,    /* a task to a bounded executor, as op bx_exec */
    A_TOKEN, /* issue 23: a token, a group's failure, wait_token (token_act) */
    NACT
};

/* Who is running code now: the top level, a task the manual executor
 * runs, a task advance runs on the timer "thread", a handed-back task
 * (none since promise 2a), or serex_scheduler_run_until (task_run tells
 * its two parts apart by where the task runs). */
enum ctx { CTX_TOP, CTX_MANUAL, CTX_TIMER, CTX_FOREIGN, CTX_RUN_UNTIL };

/* Why a periodic timer can start no more runs. */
enum stop { STOP_NO, STOP_CANCEL, STOP_SHUTDOWN, STOP_REJECTED };

/* New operations go at the end, so corpus inputs keep most of their
 * meaning (those in corpus/ were re-encoded when NOPS grew: README.md). */
enum op {
    OP_SERIAL_CREATE,
    OP_STRIPED_CREATE,
    OP_WRAPPER_DESTROY,
    OP_EXECUTE,
    OP_SUBMIT,
    OP_FUTURE_CANCEL,
    OP_FUTURE_WAIT,
    OP_FUTURE_RELEASE,
    OP_SCHEDULE,
    OP_TIMER_CANCEL,
    OP_TIMER_RELEASE,
    OP_ADVANCE,
    OP_RUN_ONE,
    OP_RUN_PENDING,
    OP_RUN_HANDED_BACK,
    OP_GATE_CREATE,
    OP_GATE_EXECUTE,
    OP_GATE_OPEN,
    OP_GATE_CLOSE,
    OP_GATE_DESTROY,
    OP_CHAN_CREATE,
    OP_CHAN_SEND,
    OP_CHAN_RECV,
    OP_CHAN_CLOSE,
    OP_SHUTDOWN,
    OP_SHUTDOWN_NOW,
    OP_AWAIT,
    OP_ALLOC_FAIL,
    OP_STATS,
    OP_BAD_INPUT,
    /* 0.2.0 */
    OP_ON_DONE,
    OP_THEN,
    OP_GROUP_CREATE,
    OP_GROUP_EXEC,
    OP_GROUP_ENTER_LEAVE,
    OP_GROUP_NOTIFY,
    OP_GROUP_CANCEL,
    OP_GROUP_WAIT,
    OP_LIMITER_CREATE,
    OP_SCHEDULE_MISSED,
    OP_RUN_UNTIL,
    OP_BAD_INPUT2,
    /* bounded executors, execute_wait, the pool's faces and hooks */
    OP_BX_CREATE,
    OP_BX_EXEC,
    OP_BX_LIFE,
    OP_POOL_ROUND,
    /* issue 23: tokens, futures with errors, promises, all/any, groups
     * with a life */
    OP_TOK_CREATE,
    OP_TOK_REQUEST,
    OP_TOK_DEADLINE,
    OP_TOK_ON_CANCEL,
    OP_TOK_UNREGISTER,
    OP_TOK_RELEASE,
    OP_SUBMIT_ERR,
    OP_PROMISE,
    OP_CANCEL_ON,
    OP_FUTURE_DEADLINE,
    OP_WAIT_TOKEN,
    OP_COMBINE,
    OP_GROUP_CREATE_CONFIG,
    OP_GROUP_LIFE,
    OP_BAD_INPUT3,
    NOPS
};

static const char *const op_names[NOPS] = {
    "serial_create",
    "striped_create",
    "wrapper_destroy",
    "execute",
    "submit",
    "future_cancel",
    "future_wait",
    "future_release",
    "schedule",
    "timer_cancel",
    "timer_release",
    "advance",
    "run_one",
    "run_pending",
    "run_handed_back",
    "gate_create",
    "gate_execute",
    "gate_open",
    "gate_close",
    "gate_destroy",
    "chan_create",
    "chan_send",
    "chan_recv",
    "chan_close",
    "shutdown",
    "shutdown_now",
    "await",
    "alloc_fail",
    "stats",
    "bad_input",
    "on_done",
    "then",
    "group_create",
    "group_exec",
    "group_enter_leave",
    "group_notify",
    "group_cancel",
    "group_wait",
    "limiter_create",
    "schedule_missed",
    "run_until",
    "bad_input2",
    "bx_create",
    "bx_exec",
    "bx_life",
    "pool_round",
    "tok_create",
    "tok_request",
    "tok_deadline",
    "tok_on_cancel",
    "tok_unregister",
    "tok_release",
    "submit_err",
    "promise",
    "cancel_on",
    "future_deadline",
    "wait_token",
    "combine",
    "group_create_config",
    "group_life",
    "bad_input3",
};

/* One task: what it is, where it went, and what has become of it. */
struct rec {
    uint8_t kind;           /* enum kind; K_UNUSED: submission failed */
    uint8_t act, act_arg;   /* enum act (NACT: none) and its argument */
    uint8_t stop;           /* periodic: enum stop */
    int8_t stream;          /* order stream, -1: none */
    int8_t ext;             /* wrapper (X_*) it will post to, -1: none */
    int8_t chan;            /* K_SEND, K_RECV: channel slot */
    uint8_t dest;           /* where it runs: a dest, D_TIMER or D_NONE */
    int8_t bx;              /* bounded executor it was given to, -1 */
    uint8_t bkey;           /* its key there (NKEYS: keyless, the face) */
    bool null_target;       /* a timer run on the timer "thread" */
    bool cancelled;         /* ended without running: a cancel said true,
                               wait said ECANCELED, or known to follow */
    bool cancel_said;       /* a serex_future_cancel of it said true */
    bool gcancelled;        /* a group cancel counted it (or may have) */
    bool greached;          /* group task: known to have left its group */
    bool maybe_dropped;     /* a DROP shutdown of the scheduler may have
                               dropped it (no run, no hand-back) */
    bool on_target;         /* continuation: known to have run on its
                               target, not at once where it was posted */
    bool sat_end;           /* fixed rate: its grid saturated, it ended */
    uint8_t policy;         /* K_RATE: serex_missed_policy */
    uint8_t tidx;           /* K_THEN: its call is then_fns[tidx] */
    uint8_t nconts, nthens; /* futures: continuations added (thens) */
    uint8_t cseq;           /* continuation: place among its source's */
    uint16_t gid;           /* group task or K_NOTE: its group, 0: none */
    int16_t src;            /* continuation: its future's record, -1 */
    int16_t prev_cont;      /* continuation: the one added before it */
    int16_t last_cont;      /* future: its last continuation, -1 */
    uint32_t runs, backs;   /* ran; came back (on_pending, on_rejected) */
    uint32_t delivered;     /* K_SEND: receivers that got the item */
    uint32_t seq;           /* place in its stream or channel */
    int32_t got;            /* K_RECV: 1 + item's index, 0: NULL, -1: none */
    uint32_t snow_at;       /* fz.snows when accepted */
    uint32_t afail_at;      /* fz.afail_epoch at creation; UINT32_MAX if
                               a failure was armed */
    uint32_t enters_at;     /* K_NOTE: its group's enters at registration */
    int64_t due, period;    /* timers: first due time; period */
    int64_t last;           /* fixed delay: the clock at the last run */
    int64_t next_due;       /* fixed rate: the grid point of its next run */
    /* issue 23: futures' ends, tokens' callbacks, all/any. aux: K_COMB's
     * and K_CWATCH's all/any (fz.comb), K_CB's token (fz.toks); err: the
     * error a future ended with (cancelled, or ran_err); plan: 1 + the
     * err_codes index a K_FUTURE's call sets (serex_future_set_error), 0
     * for a value */
    int16_t aux;
    int16_t err;
    bool ran_err;   /* K_FUTURE: its call ran and set err */
    bool witnessed; /* futures: the harness's witness is on it */
    bool newapi;    /* futures: checked after every op */
    uint8_t plan;
    uint8_t nlist;     /* futures: records on its list */
    uint8_t rslot;     /* K_CB: its registration slot */
    uint8_t unreg;     /* K_CB: 0, or unregister said 1 true 2 false */
    bool fired;        /* K_CB: posted (its token was cancelled) */
    bool self_unreg;   /* K_CB: unregisters itself when it runs */
    int64_t end_at;    /* futures: when it ended (the model's) */
    int64_t posted_at; /* K_CB: when it was posted */
    int64_t fdl_due;   /* futures: earliest deadline armed; NO_DL */
    uint32_t fdl_adv;  /* fz.nadv when that one was armed */
    const void *val;   /* K_COMB: the value it ended with */
};

/* A token (or a group's) as the model knows it: what it was made from,
 * when and why it was cancelled, its earliest deadline still to come. */
struct mtok {
    serex_cancel *c; /* valid while a slot, group or registration holds it */
    int16_t parent;  /* its parent's index, -1 */
    uint16_t gid;    /* a group's token: the group's gid (0: none) */
    int cause;       /* 0, or the cause it was cancelled with */
    int64_t at;      /* when it was cancelled */
    int64_t dl_due;  /* earliest deadline pending; NO_DL: none */
    uint32_t dl_adv; /* fz.nadv when it was armed */
};

/* What was registered on a token, in the order it was: a token's request
 * fires them in that order (cancel.h), which decides, e.g., which input
 * of an all with CANCEL_REST ends with the cause and which with
 * SEREX_ECANCELED, and that a group's own hook (added as it was made)
 * closes it before its members' links end them. */
enum hook_kind { H_CHILD, H_REG, H_LINK, H_GROUP };
struct mhook {
    int16_t tok;  /* the token it is on */
    uint8_t kind; /* enum hook_kind */
    bool dead;    /* removed, or fired */
    int16_t obj;  /* H_CHILD the child token, H_REG the K_CB record, H_LINK
                     the future's record, H_GROUP the group's gid */
};

/* An all/any: its inputs and what it has seen of them (future.c's comb). */
struct mcomb {
    int16_t out;          /* the K_COMB record */
    int16_t in[NCOMB_IN]; /* the inputs' records */
    int16_t w[NCOMB_IN];  /* the K_CWATCH records on them */
    uint8_t n, left;
    bool any, rest, decided;
    int err; /* the first error seen */
};

struct stream {
    uint32_t next;          /* seq of the last accepted task */
    uint32_t last_run, last_event;
};

struct fuzz {
    const uint8_t *in;
    size_t len, pos;
    unsigned op;            /* operations decoded so far (for messages) */
    bool trace;             /* SEREX_FUZZ_TRACE set: print each op */
    enum ctx ctx;
    serex_serial_config wcfg; /* every serial's and striped's */
    serex_pending_policy on_shutdown; /* the scheduler's */
    size_t max_timers;                /* the scheduler's cap (0: none) */
    serex_executor *manual;
    serex_executor *serial[NSERIAL];
    serex_striped *striped[NSTRIPED];
    serex_executor *lim[NLIM];
    uint8_t lim_target[NLIM]; /* 0: the manual executor, 1 + i: serial i */
    uint8_t lim_max[NLIM];
    unsigned lim_in[NLIM]; /* its tasks inside their fn now */
    unsigned lim_peak;     /* the most seen at once (trace) */
    serex_scheduler *sched;
    serex_gate *gate[NGATE];
    serex_channel *chan[NCHAN];
    uint32_t sends[NCHAN], recvs[NCHAN]; /* accepted so far */
    struct { serex_future *f; struct rec *r; } fut[NFUT];
    struct { serex_timer *t; struct rec *r; } timer[NTIMER];
    struct {
        serex_group *g;
        uint16_t gid;
        uint32_t enters, leaves;
        /* issue 23: serex_group_create_config's life */
        bool cfg, ff, closed; /* has a token; fail-fast; refuses joins */
        int16_t node;         /* its token (fz.toks), -1 */
        int err;              /* the first error reported */
        uint32_t nerr;        /* errors reported */
    } grp[NGROUP];
    uint16_t gids; /* groups made so far */
    struct stream streams[NSTREAMS];
    /* Bounded executors over the manual executor, reached by the bx ops
     * only: a model of each count, exact while nothing but the count can
     * refuse (see bx_check). */
    struct bx {
        serex_executor *ex; /* the serial, or the striped's face */
        serex_striped *st;  /* the striped slot: the striped */
        size_t cap, lane_cap;
        unsigned waiting;      /* keyed: accepted, not started nor back */
        unsigned lane[NKEYS];  /* of them, per key (the striped) */
        unsigned keyless;      /* keyless tasks out (they count nowhere) */
        bool shut, keyless_ever;
        uint64_t accepted, ran, refused; /* keyed; refused: by execute */
        char name[8];          /* its config's name */
    } bx[NBX];
    unsigned long bx_calls[5]; /* trace: OK, EFULL, ETIMEDOUT, EDEADLK,
                                  other (EREJECTED, ENOMEM) */
    unsigned pool_rounds;      /* pool rounds run so far */
    uint64_t rejected;      /* on_rejected calls for refused runs */
    uint64_t handed;        /* on_rejected calls from a HAND_BACK shutdown */
    bool handing_back;      /* inside such a shutdown */
    unsigned periodic;      /* periodic timers scheduled */
    /* Ever shut down (since the slot's executor was made): a
     * continuation posted there may have run at once where it was. */
    bool shut_manual, shut_sched, shut_x[NX];
    uint32_t snows;           /* shutdown_now, destroy, dropping shutdowns */
    uint32_t afail_epoch;     /* allocation failures armed so far */
    bool afail_armed;         /* one may still come */
    unsigned long afail_left; /* allocations until it does */
    bool in_ru;               /* inside serex_scheduler_run_until */
    int64_t ru_start;         /* the clock when it was called */
    unsigned nest;            /* serex_manual_run_one nested from tasks */
    unsigned depth;           /* tasks inside task_run now */
    struct rec *running[MAX_RUNNING];
    const struct rec *reg_note; /* must not run inside this notify call */
    struct {                /* the teardown's receive in flight */
        int pending;
        uint32_t seq;
        int chan;
        bool got_null;
    } td;
    /* issue 23: tokens, registrations, all/any (the model), and the
     * harness's own executor for witnesses: shut down from the start, so
     * that an on_done posted there runs at once on the thread that ends
     * its future (promise 2a) */
    serex_executor *sink;
    bool used23;         /* an issue-23 object was made */
    int16_t tslot[NTOK]; /* the token in each slot, -1 */
    struct mtok toks[MAX_TOKS];
    unsigned ntoks;
    struct mhook hooks[MAX_HOOKS];
    unsigned nhooks;
    struct {
        serex_cancel_reg *reg;
        struct rec *r;
    } reg[NREG];
    struct mcomb comb[MAX_COMBS];
    unsigned ncombs;
    struct {
        serex_future *f;
        struct rec *r;
    } grave[NGRAVE];
    bool in_adv;     /* inside advance or run_until */
    uint32_t nadv;   /* advances (and run_untils) done */
    int64_t adv_now; /* the clock after the last one */
    /* trace: requests, deadlines fired, callbacks run, links ended,
     * errors set, promises ended, all/any ended, refused joins */
    unsigned long n23[8];
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
    fz.afail_left = n;
    fz.afail_armed = n != 0;
    fz.afail_epoch += n != 0;
#else
    (void)n;
#endif
}

/* Whether an armed allocation failure may still come: asks the hook how
 * many allocations were made and sets it again for the rest. */
static bool alloc_armed(void)
{
#ifndef SEREX_FUZZ_NO_ALLOC_FAIL
    if (fz.afail_armed) {
        unsigned long made = serex__alloc_fail_nth(0);

        if (made >= fz.afail_left) {
            fz.afail_armed = false;
            fz.afail_left = 0;
        } else {
            fz.afail_left -= made;
            serex__alloc_fail_nth(fz.afail_left);
        }
    }
#endif
    return fz.afail_armed;
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
    r->dest = D_NONE;
    r->bx = -1;
    r->src = r->prev_cont = r->last_cont = -1;
    r->got = -1;
    r->aux = -1;
    r->fdl_due = NO_DL;
    r->snow_at = fz.snows;
    r->afail_at = alloc_armed() ? UINT32_MAX : fz.afail_epoch;
    return r;
}

static int rec_index(const struct rec *r)
{
    return (int)(r - fz.recs);
}

/* Whether @p points at a record in use (a value a task returned). */
static bool rec_valid(const void *p)
{
    const struct rec *r = p;

    return r >= fz.recs && r < fz.recs + fz.nrecs;
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

/* Streams whose hand-backs keep the order too (not a gate's). */
static bool stream_fifo(int s)
{
    return s < S_GATE0 || s >= S_LIM0;
}

static void stream_event(struct rec *r, bool run)
{
    struct stream *st;

    if (r->stream < 0)
        return;
    st = &fz.streams[r->stream];
    if (run) {
        CHECK(r->seq > st->last_run,
              "order: a task ran before an earlier "
              "one of its executor, serial, key, limiter or gate",
              r);
        st->last_run = r->seq;
    }
    if (stream_fifo(r->stream)) {
        CHECK(r->seq > st->last_event, "order: a task ran or came back "
              "out of submission order", r);
        st->last_event = r->seq;
    }
}

/* A FIFO stream's later task ran or came back: @r was reached before. */
static bool stream_passed(const struct rec *r)
{
    return r->stream >= 0 && stream_fifo(r->stream) &&
           fz.streams[r->stream].last_event > r->seq;
}

static bool future_kind(const struct rec *r)
{
    return r->kind == K_FUTURE || r->kind == K_THEN || r->kind == K_PROMISE ||
           r->kind == K_COMB;
}

/* A future's end is known: its call ran (a promise completed, an all/any
 * ended with a value: runs is 1 for them too), or it ended without. */
static bool future_ended(const struct rec *f)
{
    return f->runs > 0 || f->cancelled;
}

/* It ended with a value (its call ran and set no error). */
static bool fut_value(const struct rec *f)
{
    return f->runs > 0 && !f->ran_err;
}

/* What serex_future_wait(f, 0) says once it ended: 0 (SEREX_OK) or the
 * error it ended with. */
static int fut_code(const struct rec *f)
{
    return fut_value(f) ? SEREX_OK : f->err;
}

/* The value it ends with: a call's (the harness's calls return their
 * record), a promise's (completed with its record) or an all/any's. */
static const void *fut_val(const struct rec *f)
{
    return f->kind == K_COMB ? f->val : (const void *)f;
}

/* Done with its target: nothing will reach that executor for it. A
 * continuation is posted once its future ends (then a destroy of the
 * target takes it back and runs it at once); a notification we count
 * as out only once it ran. */
static bool rec_settled(const struct rec *r)
{
    switch (r->kind) {
    case K_ONESHOT:
        return r->runs + r->backs > 0 || r->cancelled || r->maybe_dropped;
    case K_RATE:
    case K_DELAY: return r->stop != STOP_NO || r->sat_end;
    case K_GATE:
    case K_SEND: return r->runs + r->backs > 0;
    case K_RECV: return r->runs > 0;
    case K_ONDONE: return r->runs > 0 || future_ended(&fz.recs[r->src]);
    case K_THEN:
        return r->runs > 0 || r->cancelled || future_ended(&fz.recs[r->src]);
    case K_NOTE: return r->runs > 0;
    case K_CB: return r->runs > 0 || r->unreg != 0;
    default: return true;
    }
}

static bool wrapper_in_use(int x)
{
    for (size_t i = 0; i < fz.nrecs; i++)
        if (fz.recs[i].ext == x && !rec_settled(&fz.recs[i]))
            return true;
    for (int j = 0; x < X_STRIPED0 && j < NLIM; j++)
        if (fz.lim[j] != NULL && fz.lim_target[j] == 1 + x)
            return true; /* a limiter over the serial */
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
    if (sel == SEL_SCHED)
        return serex_scheduler_executor(fz.sched);
    return fz.lim[sel - SEL_LIM0];
}

/* A target for timers (-1: the timer thread), gates and channels. */
static serex_executor *target_ex(int t)
{
    return t < 0 ? NULL : t == 0 ? fz.manual : fz.serial[t - 1];
}

/* The dest of such a target. */
static uint8_t target_dest(int t)
{
    return (uint8_t)(t < 0 ? D_TIMER : t == 0 ? D_MANUAL : D_SERIAL0 + t - 1);
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
    if (d >= D_LIM0 && d < ND)
        return S_LIM0 + (int)(d - D_LIM0);
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
    if (d == D_SCHED)
        return serex_scheduler_executor(fz.sched);
    return fz.lim[d - D_LIM0];
}

/* For calls that take an executor: a striped key means its face. */
static unsigned dest_norm(unsigned d)
{
    d %= ND;
    if (d >= D_STRIPED0 && d < D_FACE0)
        return D_FACE0 + (d - D_STRIPED0) / NKEYS;
    return d;
}

/* The wrapper a (normalised) dest is, -1 if none. */
static int8_t dest_ext(unsigned d)
{
    if (d >= D_SERIAL0 && d < D_STRIPED0)
        return (int8_t)(X_SERIAL0 + d - D_SERIAL0);
    if (d >= D_FACE0 && d < D_SCHED)
        return (int8_t)(X_STRIPED0 + d - D_FACE0);
    if (d >= D_LIM0 && d < ND)
        return (int8_t)(X_LIM0 + d - D_LIM0);
    return -1;
}

static int dest_limiter(unsigned d)
{
    return d >= D_LIM0 && d < ND ? (int)(d - D_LIM0) : -1;
}

/* Whether nothing under dest @d (a continuation's target) was ever shut
 * down, so that it accepts and keeps what is posted to it. Only asked for
 * the manual executor, serials and limiters (all over the manual one). */
static bool dest_never_shut(unsigned d)
{
    int j = dest_limiter(d);

    if (fz.shut_manual)
        return false;
    if (d == D_MANUAL)
        return true;
    if (d >= D_SERIAL0 && d < D_STRIPED0)
        return !fz.shut_x[X_SERIAL0 + d - D_SERIAL0];
    if (j < 0)
        return false;
    return !fz.shut_x[X_LIM0 + j] &&
           (fz.lim_target[j] == 0 || !fz.shut_x[fz.lim_target[j] - 1]);
}

/* Whether continuation @r, running now, surely runs on its target: the
 * target never refused nor took anything back (never shut down, and no
 * allocation could fail) since @r was made. */
static bool cont_on_target(const struct rec *r)
{
    return r->afail_at == fz.afail_epoch && !alloc_armed() &&
           dest_never_shut(r->dest);
}

static bool status_ok(int rc)
{
    CHECK(serex_strerror(rc) != NULL, "strerror gave NULL", NULL);
    return rc == SEREX_OK || rc == SEREX_EREJECTED || rc == SEREX_ENOMEM ||
           rc == SEREX_EFULL;
}

/* --- the tasks running now (promise 7b) --- */

static void run_push(struct rec *r)
{
    CHECK(fz.depth < MAX_RUNNING, "harness: tasks nested too deep", r);
    fz.running[fz.depth++] = r;
}

static void run_pop(void)
{
    fz.depth--;
}

static bool on_timer_thread(const struct rec *r)
{
    return r->dest == D_SCHED || r->dest == D_TIMER;
}

/* Whether a task running at dest @d runs inside serial @i's drain. */
static bool dest_in_serial(unsigned d, unsigned i)
{
    int j = dest_limiter(d);

    return d == D_SERIAL0 + i || (j >= 0 && fz.lim_target[j] == 1 + i);
}

/*
 * Whether a future queued at dest @d (its submission's, or a then's
 * target), not ended, could start only after a task running now returns:
 * promise 7b as serex tells it, from the executors each running task
 * runs inside (every task that is not on the timer thread runs inside
 * serex_manual_run_one or run_pending of the manual executor).
 */
static bool behind_running(unsigned d)
{
    int j = dest_limiter(d);

    for (unsigned k = 0; k < fz.depth; k++) {
        const struct rec *t = fz.running[k];

        if (d == D_MANUAL && !on_timer_thread(t))
            return true;
        if (d >= D_SERIAL0 && d < D_STRIPED0 &&
            dest_in_serial(t->dest, d - D_SERIAL0))
            return true;
        if (d >= D_STRIPED0 && d < D_FACE0 && t->dest == d)
            return true; /* the same key of the same striped */
        if (j >= 0 && fz.lim_max[j] == 1 && t->dest == d)
            return true;
    }
    return false;
}

/* Whether a periodic run is under way (serex_timer_overrun() is its). */
static bool periodic_running(void)
{
    for (unsigned k = 0; k < fz.depth; k++)
        if (fz.running[k]->kind == K_RATE || fz.running[k]->kind == K_DELAY)
            return true;
    return false;
}

/* Whether a task of group @gid runs now (its wait says SEREX_EDEADLK). */
static bool group_running(uint16_t gid)
{
    for (unsigned k = 0; k < fz.depth; k++)
        if (fz.running[k]->gid == gid && fz.running[k]->kind == K_EXEC)
            return true;
    return false;
}

/* --- issue 23: the model of futures' ends, tokens and all/any ---
 *
 * A future ends once: with a value (its call ran, a promise completed, an
 * all/any decided on one) or with an error (cancelled: err
 * SEREX_ECANCELED; a token's cause through serex_future_cancel_on; a
 * deadline's SEREX_ETIMEDOUT; its call's serex_future_set_error; its
 * source's error down a then-chain; a broken promise). When the model
 * ends one it settles it as serex's ender does (future.c): its list, in
 * the order the records were added, then-futures failing with its error
 * and all/any ending (queued, settled after, first in first out), each
 * all/any watching it deciding at once; the inputs not started that an
 * all/any with SEREX_FUTURE_CANCEL_REST cancels are settled at once,
 * each before the next (a settle inside the settle). So the model knows,
 * in order, what every input of an all/any saw, and so what it ends with.
 *
 * A token's request fires what was registered on it in the order it was
 * (its children, on_cancel callbacks, futures linked by cancel_on, its
 * group), depth first, as cancel.h says; the model does the same.
 * Deadlines (a token's, a future's) fire on the timer "thread" inside
 * advance or run_until at exactly their due time: after one returns,
 * every deadline due by then has fired (mtime_sync applies them in due
 * order); inside one, at time t, those due before t have, and one due at
 * t may have or not: an observation then tells (mtok_observe,
 * learn_fut_end), and the model takes the nearest cause that explains it.
 * The harness never arms two deadlines for one due time (dl_unique), so
 * their order never matters.
 *
 * What the model must see happen, it sees: every future given a token, a
 * deadline, or made an input of an all/any first gets a witness, an
 * on_done continuation posted to fz.sink, an executor shut down from the
 * start, so that it runs at once on the thread that ends the future, at
 * the moment it ends (promise 2a); the handle of such a future is kept
 * (fz.grave) when the input releases it, so the witness can read how it
 * ended. Where the model applies a change before the call that makes it
 * (a request, a complete, a cancel: the callbacks that run inside the
 * call see it), a call that can fail with SEREX_ENOMEM is bracketed by
 * model_save and model_restore.
 */

/* Errors a future's call sets or a group is failed with; causes a
 * request is given (0: SEREX_ECANCELED; the last two out of range, so
 * refused, as a fail of 0 is). */
static const int err_codes[8] = {-1000,           SEREX_ETIMEDOUT,
                                 SEREX_ECANCELED, SEREX_EDEADLK,
                                 SEREX_ERROR_MIN, -1,
                                 -4242,           -77};
static const int causes[8] = {
    0,     -1000, SEREX_ETIMEDOUT,    SEREX_ECANCELED, SEREX_ERROR_MIN,
    -4242, 1,     SEREX_ERROR_MIN - 1};

static bool cause_valid(int c)
{
    return c <= 0 && c >= SEREX_ERROR_MIN;
}

static int64_t now_ns(void)
{
    return serex_scheduler_now(fz.sched);
}

/* The settling queues (future.c's `more`): records ended, still to
 * settle. A settle inside a settle queues above the one it is in, and
 * gives the places back when it is done. Each record ends once, so
 * MAX_RECS places are enough. */
static struct {
    int16_t q[MAX_RECS];
    unsigned top; /* the first free place */
} bfs;

static void bfs_push(struct rec *r)
{
    CHECK(bfs.top < MAX_RECS, "harness: the settling queue", r);
    bfs.q[bfs.top++] = (int16_t)rec_index(r);
}

static void fut_fail(struct rec *f, int code, int64_t at, bool own);

/* @f ends without a value: cancelled, with @code (@own: a cause of its
 * own, not its source's and not a drop: still queued if it was). */
static void fail_mark(struct rec *f, int code, int64_t at, bool own)
{
    f->cancelled = true;
    f->err = (int16_t)code;
    f->end_at = at;
    if (own)
        f->cancel_said = true;
    bfs_push(f);
}

static void hooks_kill(enum hook_kind kind, int16_t obj)
{
    for (unsigned k = 0; k < fz.nhooks; k++)
        if (fz.hooks[k].kind == kind && fz.hooks[k].obj == obj)
            fz.hooks[k].dead = true;
}

/* An all/any decides: ends its future (if nothing ended it first) and
 * cancels the other inputs not started, if asked and @self decided. */
static void comb_decide(struct mcomb *cb, const struct rec *self,
                        const void *val, int err, int64_t at)
{
    struct rec *out = &fz.recs[cb->out];

    if (cb->decided)
        return;
    cb->decided = true;
    if (!future_ended(out)) {
        fz.n23[6]++;
        if (err == 0) {
            out->runs = 1;
            out->val = val;
            out->end_at = at;
            bfs_push(out);
        } else {
            fail_mark(out, err, at, false);
        }
    }
    if (!cb->rest || self == NULL)
        return;
    for (unsigned i = 0; i < cb->n; i++) /* each settled now, in order */
        if (cb->w[i] != rec_index(self))
            fut_fail(&fz.recs[cb->in[i]], SEREX_ECANCELED, at, true);
}

/* Input @y of @w's all/any has ended; its watch runs at @at (future.c's
 * comb_watch): as y ends, or as the all/any is made if it had ended. */
static void comb_watch(struct rec *w, struct rec *y, int64_t at)
{
    struct mcomb *cb = &fz.comb[w->aux];

    if (fut_value(y)) {
        if (cb->any)
            comb_decide(cb, w, fut_val(y), 0, at);
    } else {
        if (cb->err == 0)
            cb->err = fut_code(y);
        if (!cb->any && cb->rest)
            comb_decide(cb, w, NULL, fut_code(y), at);
    }
    CHECK(cb->left > 0, "harness: an all/any saw more ends than inputs", w);
    if (--cb->left == 0)
        comb_decide(cb, NULL, NULL, cb->err, at);
}

/* Settles what is queued from place @start on, first in first out. */
static void bfs_run(unsigned start)
{
    for (unsigned i = start; i < bfs.top; i++) {
        struct rec *y = &fz.recs[bfs.q[i]];
        int16_t order[MAX_LIST];
        unsigned n = 0;

        for (int j = y->last_cont; j >= 0; j = fz.recs[j].prev_cont) {
            CHECK(n < MAX_LIST, "harness: a future's list is too long", y);
            order[n++] = (int16_t)j;
        }
        hooks_kill(H_LINK, (int16_t)rec_index(y)); /* its links unhook */
        while (n-- > 0) {
            struct rec *c = &fz.recs[order[n]];

            if (c->kind == K_THEN && !fut_value(y) && !future_ended(c))
                fail_mark(c, fut_code(y), y->end_at, false);
            else if (c->kind == K_CWATCH)
                comb_watch(c, y, y->end_at);
        }
    }
    bfs.top = start;
}

/* @f has just ended (its fields say how, end_at set): settle it. */
static void fut_settle(struct rec *f)
{
    unsigned start = bfs.top;

    bfs_push(f);
    bfs_run(start);
}

/* @f, unless it has ended, ends with error @code at @at, and settles. */
static void fut_fail(struct rec *f, int code, int64_t at, bool own)
{
    unsigned start = bfs.top;

    if (future_ended(f))
        return;
    fail_mark(f, code, at, own);
    bfs_run(start);
}

/* Input @y, ended before the watch @w was added, is seen at once. */
static void comb_feed(struct rec *w, struct rec *y)
{
    unsigned start = bfs.top;

    comb_watch(w, y, now_ns());
    bfs_run(start);
}

/* --- tokens --- */

static bool hooks_room(unsigned n)
{
    return fz.nhooks + n <= MAX_HOOKS;
}

static void hook_add(int16_t tok, enum hook_kind kind, int16_t obj)
{
    struct mhook *h;

    CHECK(fz.nhooks < MAX_HOOKS, "harness: too many hooks", NULL);
    h = &fz.hooks[fz.nhooks++];
    h->tok = tok;
    h->kind = (uint8_t)kind;
    h->dead = false;
    h->obj = obj;
}

/* A new token @c, child of @parent (-1: none), a group's if @gid. */
static int16_t mtok_new(serex_cancel *c, int16_t parent, uint16_t gid)
{
    struct mtok *t = &fz.toks[fz.ntoks];
    int16_t n = (int16_t)fz.ntoks++;

    memset(t, 0, sizeof *t);
    t->c = c;
    t->parent = parent;
    t->gid = gid;
    t->dl_due = NO_DL;
    if (parent >= 0 && fz.toks[parent].cause != 0) {
        t->cause = fz.toks[parent].cause; /* born cancelled */
        t->at = now_ns();
    } else if (parent >= 0) {
        hook_add(parent, H_CHILD, n);
    }
    fz.used23 = true;
    return n;
}

static void group_token_fired(uint16_t gid, int cause);

/* Token @n is cancelled with @cause at @at: false if it was already. Its
 * hooks fire in the order they were added, each as serex's does. */
static bool mtok_cancel(int16_t n, int cause, int64_t at)
{
    struct mtok *t = &fz.toks[n];

    if (t->cause != 0)
        return false;
    t->cause = cause;
    t->at = at;
    t->dl_due = NO_DL; /* its deadlines' timers are cancelled */
    for (;;) {
        struct mhook *h = NULL;
        struct rec *r;

        for (unsigned k = 0; k < fz.nhooks && h == NULL; k++)
            if (fz.hooks[k].tok == n && !fz.hooks[k].dead)
                h = &fz.hooks[k];
        if (h == NULL)
            return true;
        h->dead = true;
        switch (h->kind) {
        case H_CHILD: mtok_cancel(h->obj, cause, at); break;
        case H_REG:
            r = &fz.recs[h->obj];
            r->fired = true;
            r->posted_at = at;
            break;
        case H_LINK:
            r = &fz.recs[h->obj];
            fz.n23[3] += !future_ended(r);
            fut_fail(r, cause, at, true);
            break;
        default: group_token_fired((uint16_t)h->obj, cause); break;
        }
    }
}

/* Whether a deadline due at @due, armed when fz.nadv was @adv, has
 * surely fired (@maybe: or may have, inside an advance at its due). */
static bool dl_fired(int64_t due, uint32_t adv, bool maybe)
{
    if (due == NO_DL)
        return false;
    if (fz.in_adv)
        return maybe ? due <= now_ns() : due < now_ns();
    return adv < fz.nadv && due <= fz.adv_now;
}

/* The nearest of @n and its ancestors whose deadline may have fired. */
static int16_t mtok_dl_candidate(int16_t n)
{
    for (; n >= 0; n = fz.toks[n].parent)
        if (fz.toks[n].cause == 0 &&
            dl_fired(fz.toks[n].dl_due, fz.toks[n].dl_adv, true))
            return n;
    return -1;
}

/* Applies every deadline that has surely fired and the model has not,
 * in due order (they fired so: dl_unique keeps their due times apart). */
static void mtime_sync(void)
{
    if (!fz.used23)
        return;
    for (;;) {
        int64_t best = 0;
        bool found = false;
        int tok = -1;
        struct rec *fut = NULL;

        for (unsigned n = 0; n < fz.ntoks; n++) {
            const struct mtok *t = &fz.toks[n];

            if (t->cause == 0 && dl_fired(t->dl_due, t->dl_adv, false) &&
                (!found || t->dl_due < best)) {
                found = true;
                best = t->dl_due;
                tok = (int)n;
            }
        }
        for (size_t i = 0; i < fz.nrecs; i++) {
            struct rec *f = &fz.recs[i];

            if (future_kind(f) && !future_ended(f) &&
                dl_fired(f->fdl_due, f->fdl_adv, false) &&
                (!found || f->fdl_due < best)) {
                found = true;
                best = f->fdl_due;
                fut = f;
                tok = -1;
            }
        }
        if (!found)
            return;
        fz.n23[1]++;
        if (fut != NULL) {
            fut->fdl_due = NO_DL;
            fut_fail(fut, SEREX_ETIMEDOUT, best, true);
        } else {
            mtok_cancel((int16_t)tok, SEREX_ETIMEDOUT, best);
        }
    }
}

/* The scheduler dropped its pending timers (a shutdown that does not
 * let them fire): no deadline pending now will ever come. */
static void deadlines_drop(void)
{
    for (unsigned n = 0; n < fz.ntoks; n++)
        fz.toks[n].dl_due = NO_DL;
    for (size_t i = 0; i < fz.nrecs; i++)
        fz.recs[i].fdl_due = NO_DL;
}

/* Whether a deadline still pending is due by now (inside an advance a
 * shutdown of the scheduler then could drop it or find it fired). */
static bool deadline_due_now(void)
{
    int64_t now = now_ns();

    for (unsigned n = 0; n < fz.ntoks; n++)
        if (fz.toks[n].cause == 0 && fz.toks[n].dl_due != NO_DL &&
            fz.toks[n].dl_due <= now)
            return true;
    for (size_t i = 0; i < fz.nrecs; i++)
        if (future_kind(&fz.recs[i]) && !future_ended(&fz.recs[i]) &&
            fz.recs[i].fdl_due != NO_DL && fz.recs[i].fdl_due <= now)
            return true;
    return false;
}

/* @due, or the first time after it that no pending deadline has (NO_DL
 * if none is left before the end of time). */
static int64_t dl_unique(int64_t due)
{
    for (;;) {
        bool taken = false;

        for (unsigned n = 0; n < fz.ntoks && !taken; n++)
            taken = fz.toks[n].cause == 0 && fz.toks[n].dl_due == due;
        for (size_t i = 0; i < fz.nrecs && !taken; i++)
            taken = future_kind(&fz.recs[i]) && !future_ended(&fz.recs[i]) &&
                    fz.recs[i].fdl_due == due;
        if (!taken)
            return due;
        if (due == INT64_MAX)
            return NO_DL;
        due++;
    }
}

/* What serex says token @n's cause is (@real): the model learns a
 * deadline that fired at this very time, and must agree. */
static void mtok_observe(int16_t n, int real)
{
    if (fz.toks[n].cause == 0 && real != 0) {
        int16_t d = mtok_dl_candidate(n);

        CHECK(real == SEREX_ETIMEDOUT && d >= 0,
              "a token was cancelled though no request, parent or deadline "
              "due by now cancelled it (a deadline early?)",
              NULL);
        fz.n23[1]++;
        mtok_cancel(d, SEREX_ETIMEDOUT, fz.toks[d].dl_due);
    }
    CHECK(real == fz.toks[n].cause,
          "a token's cause is not the model's (the first request wins; a "
          "child gets its parent's; a deadline SEREX_ETIMEDOUT at its due "
          "time)",
          NULL);
}

/* Inside an advance, token @n (held: its pointer is valid) may have been
 * cancelled by a deadline due at this very time: look. */
static void mtok_refresh(int16_t n)
{
    if (n >= 0 && fz.in_adv && fz.toks[n].cause == 0 &&
        mtok_dl_candidate(n) >= 0)
        mtok_observe(n, serex_cancel_cause(fz.toks[n].c));
}

/* Whether a deadline (its own, or a linked token's) may have ended @x. */
static bool fut_dl_may(const struct rec *x)
{
    if (dl_fired(x->fdl_due, x->fdl_adv, true))
        return true;
    for (unsigned k = 0; k < fz.nhooks; k++)
        if (fz.hooks[k].kind == H_LINK && !fz.hooks[k].dead &&
            fz.hooks[k].obj == rec_index(x) &&
            mtok_dl_candidate(fz.hooks[k].tok) >= 0)
            return true;
    return false;
}

/*
 * Serex says @x ended with @err; the model had not seen it end. The ends
 * it cannot see: a task future dropped by its executor or skipped after a
 * group cancel (SEREX_ECANCELED), a then-future whose source so ended,
 * and, inside an advance, a deadline due at this very time. Anything
 * else is an end nothing asked for.
 */
static void learn_fut_end(struct rec *x, int err)
{
    if (future_ended(x))
        return;
    if (err == SEREX_ETIMEDOUT && fut_dl_may(x)) {
        fz.n23[1]++;
        fut_fail(x, SEREX_ETIMEDOUT, now_ns(), true);
        return;
    }
    if (err == SEREX_ECANCELED && x->kind == K_FUTURE) {
        fut_fail(x, SEREX_ECANCELED, now_ns(), false);
        return;
    }
    if (err == SEREX_ECANCELED && x->kind == K_THEN && x->src >= 0) {
        learn_fut_end(&fz.recs[x->src], err); /* down the chain */
        if (future_ended(x))
            return;
    }
    fuzz_fail("a future ended with an error that nothing the model knows "
              "explains (a deadline early? an end nothing asked for?)",
              x);
}

/* The handle of @r's future: its slot's, or the one kept in the grave. */
static serex_future *handle_of(const struct rec *r)
{
    for (int i = 0; i < NFUT; i++)
        if (fz.fut[i].f != NULL && fz.fut[i].r == r)
            return fz.fut[i].f;
    for (int k = 0; k < NGRAVE; k++)
        if (fz.grave[k].f != NULL && fz.grave[k].r == r)
            return fz.grave[k].f;
    return NULL;
}

/*
 * What serex_future_wait(@h, 0) (@rc) and serex_future_error (@err) say
 * of @r's future, against the model (which learns an end it could not
 * see): 1 if it has not ended, else 0 (a value) or its error.
 */
static int fut_observe(struct rec *r, serex_future *h, int rc, int err)
{
    if (err != 0) {
        CHECK(rc == err,
              "serex_future_wait did not say the error the future ended "
              "with (serex_future_error)",
              r);
        CHECK(serex_future_value(h) == NULL,
              "a future that ended with an error gave a value", r);
        learn_fut_end(r, err);
        CHECK(future_ended(r) && !fut_value(r),
              "a future ended with an error though the model says it "
              "ended with a value",
              r);
        CHECK(r->err == err,
              "a future ended with another error than the model's (a "
              "cancel, a token's cause, a deadline, its call's error, its "
              "source's down a then-chain, or an all/any's first)",
              r);
        return err;
    }
    if (rc == SEREX_OK) {
        CHECK(fut_value(r),
              "wait said OK but the model says the future did not end with "
              "a value (its call never ran, or failed)",
              r);
        CHECK(serex_future_value(h) == fut_val(r),
              "a future's value is not what its call returned (or its "
              "promise was completed with, or its all/any's)",
              r);
        return SEREX_OK;
    }
    CHECK(!future_ended(r),
          "a future has not ended though the model says it has (a "
          "deadline late? a cancel, a token's cause or an error lost?)",
          r);
    return 1;
}

/* Snapshots of the model around a call that may fail with SEREX_ENOMEM
 * after the model applied what it does (nothing runs when it fails). */
static struct fuzz fz_saved;

static void model_save(void)
{
    memcpy(&fz_saved, &fz, offsetof(struct fuzz, recs));
    memcpy(fz_saved.recs, fz.recs, fz.nrecs * sizeof fz.recs[0]);
}

static void model_restore(void)
{
    unsigned long left = fz.afail_left;
    bool armed = fz.afail_armed;
    uint32_t epoch = fz.afail_epoch;

    memcpy(&fz, &fz_saved, offsetof(struct fuzz, recs));
    memcpy(fz.recs, fz_saved.recs, fz.nrecs * sizeof fz.recs[0]);
    fz.afail_left = left; /* the hook's, as it is now */
    fz.afail_armed = armed;
    fz.afail_epoch = epoch;
}

/* --- what tasks do --- */

static void task_run(void *arg);
static void *task_call(void *arg);
static void on_pending(serex_fn fn, void *arg, void *ctx);

/* The grid point after a fixed-rate run due at @key that started and
 * ended at @start (no time passes in a run here), by its missed-run
 * policy (docs/scheduler.md, "Missed runs"): BURST the next point, DELAY
 * one period after the late start, COALESCE and SKIP the first point
 * after the start. */
static int64_t rate_next(const struct rec *r, int64_t key, int64_t start)
{
    int64_t n;

    switch (r->policy) {
    case SEREX_MISSED_BURST: return sat_add(key, r->period);
    case SEREX_MISSED_DELAY:
        return sat_add(start > key ? start : key, r->period);
    default: break;
    }
    n = (start > key ? (start - key) / r->period : 0) + 1;
    return n > INT64_MAX / r->period ? INT64_MAX : sat_add(key, n * r->period);
}

/* Grid points a fixed-rate run due at @key, starting now, folds in. */
static uint64_t rate_overrun(const struct rec *r, int64_t key, int64_t now)
{
    if (r->policy == SEREX_MISSED_BURST || now <= key)
        return 0;
    return (uint64_t)((now - key) / r->period);
}

static void timer_ran(struct rec *r)
{
    int64_t now = serex_scheduler_now(fz.sched);
    /* run_until runs each run at its due time, if it came due there */
    bool exact_ru = fz.in_ru && !r->null_target;

    switch (r->kind) {
    case K_ONESHOT:
        CHECK(now >= r->due, "a timer fired early (promise 6)", r);
        CHECK(!r->null_target || now == r->due,
              "advance did not run a timer at its due time", r);
        CHECK(!exact_ru || r->due < fz.ru_start || now == r->due,
              "run_until did not run a timer at its due time", r);
        break;
    case K_RATE:
        CHECK(r->stop == STOP_NO, "a periodic run started after cancel "
              "or shutdown", r);
        CHECK(!r->sat_end,
              "a fixed-rate run came after its grid "
              "saturated at INT64_MAX",
              r);
        CHECK(now >= sat_add(r->due, (int64_t)r->runs * r->period),
              "a fixed-rate run came early (promise 6)", r);
        CHECK(now >= r->next_due,
              "a fixed-rate run came before the grid "
              "point of its missed-run policy",
              r);
        CHECK(!r->null_target || now == r->next_due,
              "advance did not run "
              "a fixed-rate timer at its grid point",
              r);
        CHECK(!exact_ru || r->next_due < fz.ru_start || now == r->next_due,
              "run_until did not run a fixed-rate run at its grid point", r);
        CHECK(serex_timer_overrun() == rate_overrun(r, r->next_due, now),
              "serex_timer_overrun() is not what the missed-run policy "
              "folds in",
              r);
        {
            int64_t next = rate_next(r, r->next_due, now);

            if (next <= r->next_due)
                r->sat_end = true; /* no later point: the timer ends */
            r->next_due = next;
        }
        break;
    default: /* K_DELAY */
        CHECK(r->stop == STOP_NO, "a periodic run started after cancel "
              "or shutdown", r);
        CHECK(now >= (r->runs == 0 ? r->due : sat_add(r->last, r->period)),
              "a fixed-delay run came early (promise 6)", r);
        CHECK(serex_timer_overrun() == 0,
              "serex_timer_overrun() is not 0 "
              "in a fixed-delay run",
              r);
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
    r->dest = (uint8_t)d;
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
                         bool keep, uint8_t act, uint8_t act_arg, int policy);
static void chan_send(unsigned c, int target);
static void sel_shutdown(unsigned sel, bool now);
static void future_wait_in_task(unsigned i);
static void group_act(uint8_t a);
static void cont_new(enum kind kind, unsigned i, unsigned d);
static bool manual_run_one(void);
static void bx_exec(uint8_t a, uint8_t act, uint8_t act_arg);
static void bx_left(struct rec *r, bool ran);
static void token_act(uint8_t a);
static void group_report(unsigned g, int err);
static int grp_slot_of(uint16_t gid);

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

/* Runs one or two manual tasks from inside a task: tasks of a limiter
 * overlap so (each level is one more inside its fn). */
static void nested_run(uint8_t a)
{
    if (fz.nest >= MAX_NEST)
        return;
    fz.nest++;
    for (int k = 0; k <= (a & 1); k++)
        manual_run_one();
    fz.nest--;
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
        schedule_new(0, (a & 3) - 1, (int64_t)(a >> 2) * 64, 0, false, NACT, 0,
                     -1);
        break;
    case A_SEND: chan_send(a & 1, 0); break;
    case A_FUTURE_WAIT: future_wait_in_task(a % NFUT); break;
    case A_RUN_ONE: nested_run(a); break;
    case A_GROUP: group_act(a); break;
    case A_CONT:
        cont_new(a & 1 ? K_THEN : K_ONDONE, (a >> 1) % NFUT, a >> 5);
        break;
    case A_BX: bx_exec(a, NACT, 0); break;
    case A_TOKEN: token_act(a); break;
    default: break;
    }
}

/* The limiter whose task @r is (always on its target), or -1. */
static int rec_limiter(const struct rec *r)
{
    return r->kind == K_EXEC || r->kind == K_FUTURE ? dest_limiter(r->dest)
                                                    : -1;
}

static void limiter_enter(int j, const struct rec *r)
{
    if (j < 0)
        return;
    CHECK(++fz.lim_in[j] <= fz.lim_max[j],
          "more tasks of a limiter ran "
          "at once than its max_running",
          r);
    if (fz.lim_in[j] > fz.lim_peak)
        fz.lim_peak = fz.lim_in[j];
}

static void limiter_leave(int j)
{
    if (j >= 0)
        fz.lim_in[j]--;
}

static void task_run(void *arg)
{
    struct rec *r = arg;
    enum ctx saved = fz.ctx;
    int lim;

    CHECK(rec_valid(r), "a task ran with an argument never given", NULL);
    CHECK(r->kind != K_UNUSED, "a task ran though its submission failed "
          "(promise 1)", r);
    mtime_sync();
    CHECK(!r->gcancelled, "a task ran after a group cancel counted it", r);
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
    if (r->kind != K_RATE && r->kind != K_DELAY && !periodic_running())
        CHECK(serex_timer_overrun() == 0,
              "serex_timer_overrun() is not 0 "
              "outside a periodic run",
              r);
    r->runs++;
    bx_left(r, true);
    stream_event(r, true);
    if (fz.ctx == CTX_RUN_UNTIL)
        fz.ctx = on_timer_thread(r) ? CTX_TIMER : CTX_MANUAL;
    lim = rec_limiter(r);
    limiter_enter(lim, r);
    run_push(r);
    task_act(r);
    run_pop();
    limiter_leave(lim);
    fz.ctx = saved;
}

static void *task_call(void *arg)
{
    struct rec *r = arg;
    int lim, g;

    CHECK(rec_valid(r), "a future's task ran with an argument never given",
          NULL);
    CHECK(r->kind == K_FUTURE, "a future's task ran though submit failed",
          r);
    mtime_sync();
    CHECK(r->runs == 0 && !r->cancelled,
          "a future's task ran twice, or "
          "after it was cancelled (by a cancel, its token, its deadline or "
          "an all/any's CANCEL_REST)",
          r);
    CHECK(!r->gcancelled,
          "a future's task ran after a group cancel "
          "counted it",
          r);
    r->runs++;
    stream_event(r, true);
    lim = rec_limiter(r);
    limiter_enter(lim, r);
    limiter_leave(lim);
    if (r->plan != 0) {
        /* the last call before the return wins; bad ones change nothing */
        r->ran_err = true;
        r->err = (int16_t)err_codes[r->plan - 1];
        CHECK(serex_future_set_error(-999) == SEREX_OK &&
                  serex_future_set_error(r->err) == SEREX_OK,
              "serex_future_set_error from inside a future's call failed", r);
        CHECK(serex_future_set_error(0) == SEREX_EINVAL &&
                  serex_future_set_error(1) == SEREX_EINVAL &&
                  serex_future_set_error(SEREX_ERROR_MIN - 1) == SEREX_EINVAL,
              "serex_future_set_error of an error out of range did not say "
              "EINVAL",
              r);
        fz.n23[4]++;
    }
    /* what happens once we return (the model's first, as inside) */
    r->end_at = now_ns();
    fut_settle(r);
    if (r->plan != 0 && r->gid != 0 && (g = grp_slot_of(r->gid)) >= 0)
        group_report((unsigned)g, r->err); /* after its end: group.c */
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

/* --- continuations (serex_future_on_done, serex_future_then) --- */

static int fut_slot_of(const struct rec *r)
{
    for (int i = 0; i < NFUT; i++)
        if (fz.fut[i].f != NULL && fz.fut[i].r == r)
            return i;
    return -1;
}

/* Future @f ended without its call, unseen (taken back, or dropped):
 * cancelled, and its then-futures with it, at once. */
static void future_cancelled(struct rec *f)
{
    CHECK(future_ended(f) || f->runs == 0,
          "a future ended cancelled though its call ran", f);
    fut_fail(f, SEREX_ECANCELED, now_ns(), false);
}

/* Continuation @r runs (r->runs counted): its future has ended, wait(0)
 * says how at once, and on one serial (or the manual executor) the
 * future's continuations run in the order they were added. */
static void cont_ran(struct rec *r)
{
    struct rec *f = &fz.recs[r->src];
    serex_future *h = handle_of(f);
    int rc;

    mtime_sync();
    if (h != NULL) {
        rc = serex_future_wait(h, 0);
        CHECK(fut_observe(f, h, rc, serex_future_error(h)) != 1,
              "wait(f, 0) inside f's continuation did not give its outcome "
              "at once",
              r);
    } else if (!future_ended(f)) {
        learn_fut_end(f, SEREX_ECANCELED); /* what its end must have been */
    }
    CHECK(f->runs <= 1, "a future's call ran twice", f);
    if (!cont_on_target(r))
        return;
    r->on_target = true;
    if (r->dest >= D_STRIPED0) /* the manual executor and serials */
        return;
    for (int j = f->last_cont; j != rec_index(r); j = fz.recs[j].prev_cont) {
        CHECK(j >= 0, "harness: a continuation is not on its list", r);
        CHECK(fz.recs[j].dest != r->dest || !fz.recs[j].on_target,
              "continuations of one future ran on one serial out of the "
              "order they were added",
              r);
    }
}

/* An on_done continuation: its argument is its record. */
static void cont_run(void *arg)
{
    struct rec *r = arg;
    int lim;

    CHECK(rec_valid(r), "a continuation ran with an argument never given",
          NULL);
    CHECK(r->kind == K_ONDONE,
          "an on_done continuation ran though "
          "on_done failed",
          r);
    CHECK(r->runs == 0, "an on_done continuation ran twice", r);
    r->runs++;
    cont_ran(r);
    lim = r->on_target ? dest_limiter(r->dest) : -1;
    limiter_enter(lim, r);
    limiter_leave(lim);
}

/*
 * The harness's witness on a future (witness_add): posted to fz.sink, it
 * runs on the thread that ends the future, as it ends (promise 2a). So:
 * the model knows the end (or learns it now, reading the kept handle),
 * and it came when the model says (a deadline's at its due time).
 */
static void wit_run(void *arg)
{
    struct rec *w = arg, *f;
    serex_future *h;

    CHECK(rec_valid(w), "a continuation ran with an argument never given",
          NULL);
    CHECK(w->kind == K_WITNESS, "a witness ran though on_done failed", w);
    CHECK(w->runs == 0, "an on_done continuation ran twice", w);
    w->runs++;
    f = &fz.recs[w->src];
    mtime_sync();
    if ((h = handle_of(f)) != NULL)
        CHECK(fut_observe(f, h, serex_future_wait(h, 0),
                          serex_future_error(h)) != 1,
              "a future's continuation ran before it ended", f);
    else /* a promise released: it broke then (the others are kept) */
        CHECK(future_ended(f),
              "a promise released ended though the model says it has not", f);
    CHECK(f->end_at == now_ns(),
          "a future ended at another time than the model's (a deadline "
          "early or late?)",
          f);
}

/*
 * A serex_cancel_on_cancel callback: runs once, after its token was
 * cancelled (the registration holds the token: its cause is readable),
 * never after an unregister said true; posted to the scheduler's face,
 * on the timer thread at the very time it was posted (a deadline's due
 * time). It may unregister itself: false, at once.
 */
static void cb_run(void *arg)
{
    struct rec *r = arg;
    int64_t now;

    CHECK(rec_valid(r),
          "an on_cancel callback ran with an argument never "
          "given",
          NULL);
    CHECK(r->kind == K_CB,
          "an on_cancel callback ran though on_cancel "
          "failed (promise 1)",
          r);
    CHECK(r->runs == 0, "an on_cancel callback ran twice", r);
    CHECK(r->unreg != 1,
          "an on_cancel callback ran after unregister said "
          "true",
          r);
    mtime_sync();
    mtok_observe(r->aux, serex_cancel_cause(fz.toks[r->aux].c));
    CHECK(r->fired,
          "an on_cancel callback ran though its token was not "
          "cancelled",
          r);
    now = now_ns();
    CHECK(now >= r->posted_at,
          "an on_cancel callback ran before its token "
          "was cancelled",
          r);
    CHECK(r->dest != D_SCHED || now == r->posted_at,
          "an on_cancel callback posted to the scheduler's face did not run "
          "at the time it was posted (its token's deadline early or late?)",
          r);
    r->runs++;
    fz.n23[2]++;
    if (r->self_unreg && fz.reg[r->rslot].r == r) {
        CHECK(!serex_cancel_unregister(fz.reg[r->rslot].reg),
              "unregister from inside its own callback did not say false", r);
        r->unreg = 2;
        fz.reg[r->rslot].reg = NULL;
        fz.reg[r->rslot].r = NULL;
    }
}

/* Then-future @i of future @value (its record, as every call returns). */
static void *then_call(unsigned i, void *value)
{
    struct rec *f = value, *r = NULL;
    int slot, lim, rc;

    CHECK(rec_valid(f) && future_kind(f),
          "a then's call got a value no "
          "future returned",
          NULL);
    mtime_sync();
    CHECK(fut_value(f),
          "a then's call ran though its future did not end with a value "
          "(errors and cancellation pass down then-chains)",
          f);
    for (int j = f->last_cont; j >= 0 && r == NULL; j = fz.recs[j].prev_cont)
        if (fz.recs[j].kind == K_THEN && fz.recs[j].tidx == i)
            r = &fz.recs[j];
    CHECK(r != NULL, "a then's call ran though then failed", f);
    CHECK(r->runs == 0 && !r->cancelled,
          "a then's call ran twice, or "
          "after it was cancelled",
          r);
    r->runs++;
    cont_ran(r);
    /* its own future has not ended: from its target, a wait is behind */
    if ((slot = fut_slot_of(r)) >= 0) {
        unsigned d = r->dest;
        int j = dest_limiter(d);
        bool serial = d < D_STRIPED0 || (j >= 0 && fz.lim_max[j] == 1);

        rc = serex_future_wait(fz.fut[slot].f, 0);
        CHECK(rc == SEREX_EDEADLK || rc == SEREX_ETIMEDOUT,
              "wait(0) on a "
              "then-future from its own call gave an unexpected status",
              r);
        CHECK(!r->on_target || !serial || rc == SEREX_EDEADLK,
              "a then's "
              "call waiting for its own future did not say EDEADLK "
              "(promise 7b)",
              r);
    }
    lim = r->on_target ? dest_limiter(r->dest) : -1;
    limiter_enter(lim, r);
    limiter_leave(lim);
    r->end_at = now_ns(); /* its future ends with r once we return */
    fut_settle(r);
    return r;
}

#define THEN_FN(i)                        \
  static void *then_call_##i(void *value) \
  {                                       \
    return then_call(i, value);           \
  }
THEN_FN(0)
THEN_FN(1)
THEN_FN(2)
THEN_FN(3)
THEN_FN(4)
THEN_FN(5)
THEN_FN(6)
THEN_FN(7)
#undef THEN_FN

static serex_call_fn const then_fns[NTHEN_FN] = {
    then_call_0, then_call_1, then_call_2, then_call_3,
    then_call_4, then_call_5, then_call_6, then_call_7,
};

/* --- what comes back --- */

static void on_pending(serex_fn fn, void *arg, void *ctx)
{
    struct rec *r = arg;

    (void)ctx;
    CHECK(fn == task_run,
          "on_pending got a task the harness never "
          "submitted (promise 2a)",
          NULL);
    CHECK(rec_valid(r), "on_pending got an argument never given", NULL);
    CHECK(r->kind != K_UNUSED, "a task came back though its submission "
          "failed (promise 1)", r);
    CHECK(r->kind != K_RATE && r->kind != K_DELAY, "a periodic timer was "
          "handed back (periodic timers are cancelled)", r);
    CHECK(r->runs + r->backs == 0 && !r->cancelled, "a task came back "
          "twice, or after it ran or was cancelled", r);
    CHECK(!r->gcancelled,
          "a task came back after a group cancel counted "
          "it",
          r);
    r->backs++;
    bx_left(r, false);
    stream_event(r, false);
}

static void on_rejected(serex_fn fn, void *arg, void *ctx)
{
    struct rec *r = arg;

    (void)ctx;
    CHECK(fn == task_run,
          "on_rejected got a task that is not the "
          "harness's (promise 2a)",
          NULL);
    CHECK(rec_valid(r), "on_rejected got an argument never given", NULL);
    if (fz.handing_back) { /* cfg.on_shutdown HAND_BACK: pending ones */
        CHECK(r->kind == K_ONESHOT || (r->kind == K_EXEC && r->dest == D_SCHED),
              "a HAND_BACK "
              "shutdown handed back a task that is no one-shot",
              r);
        CHECK(r->runs + r->backs == 0 && !r->cancelled && !r->gcancelled,
              "a HAND_BACK shutdown handed back a task that had run, come "
              "back or been cancelled",
              r);
        r->backs++;
        fz.handed++;
        return;
    }
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

/* Runs everything runnable on the manual executor. (Nothing comes back
 * that is not the harness's own any more, promise 2a: there is no
 * handed-back task to run.) */
static void settle(void)
{
    unsigned budget = SETTLE_BUDGET;

    while (manual_run_one())
        CHECK(--budget > 0, "the manual executor never empties", NULL);
}

static void advance(int64_t delta)
{
    enum ctx saved = fz.ctx;

    fz.ctx = CTX_TIMER;
    fz.in_adv = true;
    CHECK(serex_scheduler_advance(fz.sched, delta) == SEREX_OK,
          "advance failed", NULL);
    fz.in_adv = false;
    fz.nadv++;
    fz.adv_now = serex_scheduler_now(fz.sched);
    fz.ctx = saved;
}

/* serex_scheduler_run_until over the manual executor (and, by @hi's top
 * bit, serial 0 or a limiter too, which it must leave alone): every task
 * runs with the clock at its due time; then nothing due by the deadline
 * is left, and the manual executor is empty. */
static void run_until(uint8_t lo, uint8_t hi)
{
    serex_executor *exs[2] = {fz.manual, fz.serial[0]};
    int64_t start = serex_scheduler_now(fz.sched);
    int64_t deadline = sat_add(start, (int64_t)(lo | (hi & 0x7f) << 8));
    enum ctx saved = fz.ctx;
    size_t n = 1;
    serex_stats st;

    if (hi & 0x80) {
        if (exs[1] == NULL)
            exs[1] = fz.lim[0];
        n += exs[1] != NULL;
    }
    fz.ctx = CTX_RUN_UNTIL;
    fz.in_ru = true;
    fz.in_adv = true;
    fz.ru_start = start;
    CHECK(serex_scheduler_run_until(fz.sched, exs, n, deadline) == SEREX_OK,
          "run_until failed", NULL);
    fz.in_ru = false;
    fz.in_adv = false;
    fz.nadv++;
    fz.adv_now = serex_scheduler_now(fz.sched);
    fz.ctx = saved;
    CHECK(serex_scheduler_now(fz.sched) == deadline,
          "run_until did not "
          "leave the clock at its deadline",
          NULL);
    CHECK(serex_executor_stats(fz.manual, &st) == SEREX_OK && st.queued == 0,
          "run_until left tasks on the manual executor", NULL);
    for (size_t i = 0; i < fz.nrecs && !fz.shut_manual; i++) {
        const struct rec *r = &fz.recs[i];

        if (r->kind == K_ONESHOT && r->due <= deadline)
            CHECK(rec_settled(r),
                  "run_until returned with a one-shot due "
                  "before its deadline that never ran",
                  r);
    }
}

/* --- wrappers --- */

static void serial_create(unsigned slot)
{
    slot %= NSERIAL;
    if (fz.serial[slot] == NULL) {
        CHECK(status_ok(serex_serial_create(fz.manual, &fz.wcfg,
                                            &fz.serial[slot])),
              "serial_create failed", NULL);
        fz.shut_x[X_SERIAL0 + slot] = false;
    }
}

static void striped_create(unsigned slot)
{
    slot %= NSTRIPED;
    if (fz.striped[slot] == NULL) {
        CHECK(status_ok(serex_striped_create(fz.manual, &fz.wcfg,
                                             &fz.striped[slot])),
              "striped_create failed", NULL);
        fz.shut_x[X_STRIPED0 + slot] = false;
    }
}

/* A limiter of 1 to 4 over the manual executor or a serial. */
static void limiter_create(uint8_t a)
{
    unsigned j = a & 1, t = (unsigned)(a >> 1) % (1 + NSERIAL);
    unsigned max = 1 + ((a >> 3) & 3);
    serex_executor *target = target_ex((int)t);
    int rc;

    if (fz.lim[j] != NULL || target == NULL)
        return;
    rc = serex_limiter_create(target, max, &fz.lim[j]);
    CHECK(rc == SEREX_OK || rc == SEREX_ENOMEM,
          "limiter_create gave an "
          "unexpected status",
          NULL);
    CHECK((rc == SEREX_OK) == (fz.lim[j] != NULL),
          "limiter_create's *out "
          "disagrees with its status",
          NULL);
    fz.lim_target[j] = (uint8_t)t;
    fz.lim_max[j] = (uint8_t)max;
    fz.shut_x[X_LIM0 + j] = false;
}

static serex_executor *wrapper_ex(unsigned x)
{
    return x < X_STRIPED0 ? fz.serial[x]
           : x < X_LIM0   ? striped_face((int)(x - X_STRIPED0))
                          : fz.lim[x - X_LIM0];
}

static void wrapper_shutdown_now(unsigned x)
{
    serex_executor *ex = wrapper_ex(x);

    if (ex == NULL)
        return;
    fz.shut_x[x] = true;
    fz.snows++;
    serex_shutdown_now(ex, on_pending, NULL);
}

/* Destroys a serial, striped or limiter when valid and non-blocking (see
 * the top). */
static void wrapper_destroy(unsigned w)
{
    serex_executor *ex = wrapper_ex(w %= NX);

    if (ex == NULL || wrapper_in_use((int)w))
        return;
    wrapper_shutdown_now(w);
    if (serex_await_termination(ex, 0) != SEREX_OK)
        return; /* a keyless task or drain is still out: not now */
    CHECK(serex_destroy(ex) == SEREX_OK, "destroy of a terminated wrapper "
          "failed", NULL);
    if (w < X_STRIPED0)
        fz.serial[w] = NULL;
    else if (w < X_LIM0)
        fz.striped[w - X_STRIPED0] = NULL;
    else
        fz.lim[w - X_LIM0] = NULL;
}

/* --- bounded executors: queue_capacity, lane_capacity, execute_wait --- */

/*
 * Two serials and a striped over the manual executor, with capacities,
 * reached only by the bx ops (and act A_BX), so that the model knows every
 * task each one holds: `waiting` counts the keyed tasks accepted and
 * neither started nor handed back, which is what the capacities count
 * (serial.h: "waiting"), since nothing else ever runs on them. A task
 * leaves the count when it starts (task_run) or comes back (on_pending).
 */

static int bx_slot(const struct bx *b)
{
    return (int)(b - fz.bx);
}

/* A keyed task of @r's bounded executor started (@ran) or came back. */
static void bx_left(struct rec *r, bool ran)
{
    struct bx *b;

    if (r->bx < 0)
        return;
    b = &fz.bx[r->bx];
    if (r->bkey == NKEYS) {
        CHECK(b->keyless > 0, "harness: a keyless task left twice", r);
        b->keyless--;
        return;
    }
    CHECK(b->waiting > 0 && b->lane[r->bkey] > 0,
          "harness: a bounded executor's count went below 0", r);
    b->waiting--;
    b->lane[r->bkey]--;
    b->ran += ran;
}

/* Whether one more task of @key (NKEYS: keyless, never counted) fits. */
static bool bx_room(const struct bx *b, unsigned key)
{
    if (key == NKEYS)
        return true;
    return (b->cap == 0 || b->waiting < b->cap) &&
           (b->lane_cap == 0 || b->lane[key] < b->lane_cap);
}

/*
 * The stats of bounded executor @b at the top level, where none of its
 * tasks runs: queued is the tasks waiting (serial.h: accepted, not
 * finished), never above the capacity; submitted and completed are what
 * it accepted and ran; rejected counts at least the refusals execute gave;
 * the name is the config's, copied at create; a striped has a lane for
 * each key with tasks waiting, and no other (lanes are freed once idle).
 */
static void bx_stats(struct bx *b)
{
    serex_stats st;
    unsigned lanes = 0;

    if (b->ex == NULL || fz.depth > 0)
        return;
    CHECK(serex_executor_stats(b->ex, &st) == SEREX_OK, "stats of a bounded "
          "executor failed", NULL);
    CHECK(strcmp(st.name, b->name) == 0, "stats: a bounded executor's name "
          "is not the one its config gave (copied at create)", NULL);
    CHECK(st.rejected >= b->refused, "stats: rejected is below the refusals "
          "execute gave", NULL);
    if (b->keyless == 0)
        CHECK(st.queued == b->waiting, "stats: queued is not the tasks "
              "waiting in a bounded executor with none running", NULL);
    CHECK(b->cap == 0 || st.queued <= b->cap + b->keyless, "stats: more "
          "tasks wait in a bounded executor than its queue_capacity", NULL);
    if (!b->keyless_ever)
        CHECK(st.submitted == b->accepted && st.completed == b->ran,
              "stats: submitted or completed of a bounded executor is not "
              "what it accepted or ran", NULL);
    if (b->st == NULL || b->shut || fz.shut_manual)
        return;
    for (unsigned k = 0; k < NKEYS; k++)
        lanes += b->lane[k] > 0;
    CHECK(st.lanes == lanes && serex_striped_lanes(b->st) == lanes,
          "a bounded striped's lanes are not its keys with tasks waiting "
          "(promise 9)", NULL);
}

/* In slot (a & 3) % NBX, a bounded serial (slots 0, 1: capacity 1 + ((a
 * >> 2) & 3); lane_capacity (a >> 4) & 3 too, which a serial ignores) or
 * striped (slot 2: queue_capacity {0, 2, 3, 5}[(a >> 2) & 3],
 * lane_capacity (a >> 4) & 3, 1 if both are 0), named "bx<slot>". */
static void bx_create(uint8_t a)
{
    static const size_t qcaps[4] = {0, 2, 3, 5};
    unsigned s = (a & 3) % NBX;
    struct bx *b = &fz.bx[s];
    serex_serial_config cfg = fz.wcfg;
    char name[sizeof b->name];
    int rc;

    if (b->ex != NULL)
        return;
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "bx%u", s);
    memcpy(name, b->name, sizeof name);
    cfg.name = name;
    cfg.lane_capacity = (a >> 4) & 3;
    if (s < BX_STRIPED) {
        cfg.queue_capacity = 1 + ((a >> 2) & 3);
        rc = serex_serial_create(fz.manual, &cfg, &b->ex);
    } else {
        cfg.queue_capacity = qcaps[(a >> 2) & 3];
        if (cfg.queue_capacity == 0 && cfg.lane_capacity == 0)
            cfg.lane_capacity = 1;
        rc = serex_striped_create(fz.manual, &cfg, &b->st);
        CHECK(rc != SEREX_OK || b->st != NULL, "striped_create said OK "
              "with no striped", NULL);
        b->ex = serex_striped_executor(b->st);
    }
    memset(name, 'x', sizeof name - 1); /* the config's copy is serex's */
    CHECK(rc == SEREX_OK || rc == SEREX_ENOMEM, "creating a bounded "
          "executor gave an unexpected status", NULL);
    CHECK((rc == SEREX_OK) == (b->ex != NULL), "a bounded executor's *out "
          "disagrees with its status", NULL);
    b->cap = cfg.queue_capacity;
    b->lane_cap = s < BX_STRIPED ? 0 : cfg.lane_capacity;
}

/* Calls execute (@timeout unused) or execute_wait for @key of @b. */
static int bx_call(struct bx *b, unsigned key, struct rec *r, bool wait,
                   int64_t timeout)
{
    if (b->st == NULL || key == NKEYS)
        return wait ? serex_execute_wait(b->ex, task_run, r, timeout)
                    : serex_execute(b->ex, task_run, r);
    return wait ? serex_striped_execute_wait(b->st, keys[key], task_run, r,
                                             timeout)
                : serex_striped_execute(b->st, keys[key], task_run, r);
}

/*
 * What a call on @b must answer: execute_wait inside a task of the manual
 * executor (every bounded executor runs on it), SEREX_EDEADLK every time
 * (executor.h: the call that can deadlock is refused before it tries).
 * Else with room, SEREX_OK; full, SEREX_EFULL from execute, and
 * SEREX_ETIMEDOUT from execute_wait, never EFULL. Shut down: SEREX_EREJECTED (promise 2). Where the model cannot
 * know: SEREX_ENOMEM only with an allocation failure armed, and
 * SEREX_EREJECTED only once the manual executor was shut down (it refuses
 * a drain, or dropped one: promise 5).
 */
static void bx_check(const struct bx *b, bool wait, bool room, bool armed,
                     int rc, const struct rec *r)
{
    int full = !wait ? SEREX_EFULL : SEREX_ETIMEDOUT;

    if (wait && fz.ctx == CTX_MANUAL) {
        /* refused before the first try, room or not, shut or not */
        CHECK(rc == SEREX_EDEADLK, "execute_wait from a task of the "
              "executor it waits on did not say EDEADLK every time", r);
        return;
    }
    if (rc == SEREX_ENOMEM) {
        CHECK(armed, "a bounded executor said ENOMEM with no allocation "
              "failure armed", r);
        return;
    }
    if (b->shut) {
        CHECK(rc == SEREX_EREJECTED, "a bounded executor shut down did "
              "not say EREJECTED (promise 2)", r);
        return;
    }
    if (rc == SEREX_EREJECTED) {
        CHECK(fz.shut_manual, "a bounded executor refused a task though "
              "neither it nor its target was shut down", r);
        return;
    }
    if (room)
        CHECK(rc == SEREX_OK, "a bounded executor with room did not take a "
              "task (keyless tasks never count)", r);
    else if (!wait)
        CHECK(rc == SEREX_EFULL, "a full bounded executor did not say "
              "EFULL", r);
    else
        CHECK(rc == full, "execute_wait on a full executor did not say "
              "ETIMEDOUT outside its tasks", r);
}

/*
 * One task to a bounded executor, from the top level or a task (act
 * A_BX): @a & 3 picks serial 0 or 1, the striped with key (a >> 2) & 3,
 * or the striped's face (keyless); (a >> 4) & 3 the call: execute
 * (serex_striped_execute), or the _wait form with timeout 0, a tiny one
 * (1 + 500 * (a >> 6) ns: nobody makes room, so it times out), or
 * SEREX_FOREVER where the model knows there is room (else 0).
 */
static void bx_exec(uint8_t a, uint8_t act, uint8_t act_arg)
{
    unsigned s = a & 3, mode = (a >> 4) & 3;
    unsigned key = s == 3 ? NKEYS : s == BX_STRIPED ? (a >> 2) & 3 : 0;
    struct bx *b = &fz.bx[s < BX_STRIPED ? s : BX_STRIPED];
    bool room, armed;
    int64_t timeout = 0;
    struct rec *r;
    int rc, i;

    if (b->ex == NULL || (r = rec_new(K_EXEC)) == NULL)
        return;
    r->act = act;
    r->act_arg = act_arg;
    r->bx = (int8_t)bx_slot(b);
    r->bkey = (uint8_t)key;
    room = bx_room(b, key);
    armed = alloc_armed();
    if (mode == 2)
        timeout = 1 + 500 * (int64_t)(a >> 6);
    else if (mode == 3 && room && !armed && !fz.shut_manual && !b->shut)
        timeout = SEREX_FOREVER;
    if (key < NKEYS)
        stream_begin(r, S_BX0 + (s < BX_STRIPED ? (int)s
                                                : BX_STRIPED + (int)key));
    rc = bx_call(b, key, r, mode != 0, timeout);
    bx_check(b, mode != 0, room, armed, rc, r);
    i = rc == SEREX_OK ? 0 : rc == SEREX_EFULL ? 1 : rc == SEREX_ETIMEDOUT ? 2
        : rc == SEREX_EDEADLK ? 3 : 4;
    fz.bx_calls[i]++;
    if (rc != SEREX_OK) {
        rec_unused(r);
        if (mode == 0 && key < NKEYS && rc != SEREX_ENOMEM)
            b->refused++;
        return;
    }
    stream_commit(r);
    if (key == NKEYS) {
        b->keyless++;
        b->keyless_ever = true;
    } else {
        b->waiting++;
        b->lane[key]++;
        b->accepted++;
        CHECK((b->cap == 0 || b->waiting <= b->cap) &&
              (b->lane_cap == 0 || b->lane[key] <= b->lane_cap),
              "a bounded executor took more tasks than its capacity", r);
    }
    bx_stats(b);
}

static void bx_shutdown(struct bx *b, bool now)
{
    unsigned waiting = b->waiting;
    size_t n;

    if (b->ex == NULL)
        return;
    b->shut = true;
    fz.snows += now;
    if (!now) {
        serex_shutdown(b->ex);
        return;
    }
    n = serex_shutdown_now(b->ex, on_pending, NULL);
    CHECK(fz.depth > 0 || n == waiting, "shutdown_now of a bounded "
          "executor did not take back every task waiting (promise 2)", NULL);
    CHECK(b->waiting == 0, "shutdown_now of a bounded executor left tasks "
          "waiting (promise 2)", NULL);
}

/* Destroys bounded slot @b when valid and non-blocking (wrapper_destroy) */
static void bx_destroy(struct bx *b)
{
    if (b->ex == NULL)
        return;
    bx_shutdown(b, true);
    if (serex_await_termination(b->ex, 0) != SEREX_OK)
        return; /* a drain or keyless task is still out: not now */
    CHECK(b->keyless == 0, "a striped said terminated with a keyless task "
          "out", NULL);
    CHECK(serex_destroy(b->ex) == SEREX_OK, "destroy of a terminated "
          "bounded executor failed", NULL);
    b->ex = NULL;
    b->st = NULL;
}

/* One invalid call of the 0.2.0 calls without a record of their own
 * (execute_wait, striped_execute_wait, pool_executor_at), variant @v:
 * SEREX_EINVAL (or NULL), and the record never runs. */
static void bx_bad_input(const struct bx *b, unsigned which, unsigned v)
{
    struct rec *r = rec_new(K_EXEC);
    serex_executor *ex = b->ex != NULL ? b->ex : fz.manual;
    int64_t bad = -2 - (int64_t)(v >> 2);
    int rc = SEREX_EINVAL;

    if (r == NULL)
        return;
    rec_unused(r);
    switch (which) {
    case 0:
        rc = serex_execute_wait(v % 3 == 0 ? NULL : ex,
                                v % 3 == 1 ? NULL : task_run, r,
                                v % 3 == 2 ? bad : 0);
        break;
    case 1:
        rc = serex_striped_execute_wait(v % 3 == 0 ? NULL : b->st, v,
                                        v % 3 == 1 ? NULL : task_run, r,
                                        v % 3 == 2 ? bad : SEREX_FOREVER);
        break;
    default:
        CHECK(serex_pool_executor_at(v & 1 ? NULL : ex, v >> 1) == NULL,
              "pool_executor_at of NULL or of an executor that is no pool "
              "did not say NULL", r);
        break;
    }
    CHECK(rc == SEREX_EINVAL, "bad input to execute_wait or "
          "striped_execute_wait did not say EINVAL (promise 8)", r);
}

/* The life cycle of bounded slot (a & 3) % NBX, by (a >> 2) & 7:
 * shutdown, shutdown_now, await(0) (ETIMEDOUT before a shutdown), stats,
 * destroy, or one invalid call (5 to 7: bx_bad_input, variant a >> 5). */
static void bx_life(uint8_t a)
{
    struct bx *b = &fz.bx[(a & 3) % NBX];
    unsigned what = (a >> 2) & 7;
    int rc;

    if (what >= 5) {
        bx_bad_input(b, what - 5, a >> 5);
        return;
    }
    if (b->ex == NULL)
        return;
    switch (what) {
    case 0:
    case 1: bx_shutdown(b, what == 1); break;
    case 2:
        rc = serex_await_termination(b->ex, 0);
        CHECK(rc == SEREX_ETIMEDOUT || (rc == SEREX_OK && b->shut),
              "await_termination(0) of a bounded executor said OK before "
              "its shutdown, or neither OK nor ETIMEDOUT", NULL);
        break;
    case 3: bx_stats(b); break;
    default: bx_destroy(b); break;
    }
}

/* cfg.on_shutdown DROP: pending one-shots, and tasks of the scheduler's
 * face (one-shots too), may vanish with no call at all. */
static void sched_mark_dropped(void)
{
    for (size_t i = 0; i < fz.nrecs; i++) {
        struct rec *r = &fz.recs[i];

        if ((r->kind == K_ONESHOT ||
             (r->kind == K_EXEC && r->dest == D_SCHED)) &&
            r->runs + r->backs == 0 && !r->cancelled)
            r->maybe_dropped = true;
    }
}

static void sel_shutdown(unsigned sel, bool now)
{
    serex_executor *ex = sel_ex(sel);
    bool saved = fz.handing_back;

    if (ex == NULL)
        return;
    sel %= NSEL;
    /* inside an advance, a deadline due now may have fired or not: the
     * model could not tell what a shutdown that drops timers drops */
    if (sel == SEL_SCHED && fz.in_adv && fz.used23 && deadline_due_now())
        return;
    if (sel == SEL_SCHED && (now || fz.on_shutdown != SEREX_PENDING_FIRE))
        deadlines_drop();
    if (sel == SEL_MANUAL)
        fz.shut_manual = true;
    else if (sel < SEL_FACE0)
        fz.shut_x[X_SERIAL0 + sel - SEL_SERIAL0] = true;
    else if (sel < SEL_SCHED)
        fz.shut_x[X_STRIPED0 + sel - SEL_FACE0] = true;
    else if (sel == SEL_SCHED)
        fz.shut_sched = true;
    else
        fz.shut_x[X_LIM0 + sel - SEL_LIM0] = true;
    fz.snows += now;
    if (sel == SEL_SCHED && !now && fz.on_shutdown != SEREX_PENDING_FIRE) {
        fz.snows++; /* futures on its face may end unseen */
        if (fz.on_shutdown == SEREX_PENDING_DROP)
            sched_mark_dropped();
        else
            fz.handing_back = true;
    }
    if (now)
        serex_shutdown_now(ex, on_pending, NULL);
    else
        serex_shutdown(ex);
    fz.handing_back = saved;
    if (sel == SEL_SCHED)
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

static int fut_free_slot(void)
{
    for (int i = 0; i < NFUT; i++)
        if (fz.fut[i].f == NULL)
            return i;
    return -1;
}

/* A future on dest @d; its call sets error err_codes[@plan - 1] if @plan. */
static void submit_new(unsigned d, uint8_t plan)
{
    serex_executor *ex = dest_ex(d %= ND);
    int s = dest_stream(d), slot = fut_free_slot(), rc;
    struct rec *r;

    if (ex == NULL || slot < 0 || (r = rec_new(K_FUTURE)) == NULL)
        return;
    r->dest = (uint8_t)d;
    r->plan = plan;
    r->newapi = plan != 0;
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

/* wait(0) (and serex_future_error) must agree with the model: 1 if the
 * future has not ended, else 0 (a value) or its error. From a task,
 * SEREX_EDEADLK (not ended, queued behind the caller) reads as 1. */
static int future_check(unsigned i)
{
    serex_future *h = fz.fut[i].f;
    int rc = serex_future_wait(h, 0), err = serex_future_error(h);

    CHECK(rc == SEREX_OK || rc == SEREX_ETIMEDOUT || err != 0 ||
              (rc == SEREX_EDEADLK && fz.depth > 0),
          "future_wait gave an unexpected status", fz.fut[i].r);
    return fut_observe(fz.fut[i].r, h, rc, err);
}

/*
 * wait(0) from a task (promise 7b): SEREX_EDEADLK exactly when the future
 * has not ended and is queued behind a task running now; else as
 * future_check. A future that ended unseen (dropped) says ECANCELED. One
 * that ended with SEREX_EDEADLK as its error says it too: its
 * serex_future_error tells.
 */
static void future_wait_in_task(unsigned i)
{
    struct rec *r = fz.fut[i].r;
    serex_future *h = fz.fut[i].f;
    bool behind;
    int rc, err;

    if (h == NULL)
        return;
    mtime_sync();
    behind = behind_running(r->dest);
    rc = serex_future_wait(h, 0);
    err = serex_future_error(h);
    if (err == 0 && rc == SEREX_EDEADLK) {
        CHECK(!future_ended(r),
              "wait said EDEADLK for a "
              "future that had ended",
              r);
        CHECK(behind,
              "wait said EDEADLK for a future not queued behind "
              "its caller (promise 7b)",
              r);
        return;
    }
    if (err == 0 && rc == SEREX_ETIMEDOUT)
        CHECK(!behind,
              "wait on a future queued behind its caller did not "
              "say EDEADLK (promise 7b)",
              r);
    CHECK(rc == SEREX_OK || rc == SEREX_ETIMEDOUT || err != 0,
          "future_wait from a task gave an unexpected status", r);
    fut_observe(r, h, rc, err);
}

/* serex_future_cancel: true exactly when the future had not ended (nor
 * started); then it and its then-futures, and theirs, say so at once. The
 * model applies it first: continuations run inside the call. */
static void future_cancel(unsigned i)
{
    struct rec *r;
    bool expect, got;

    if (fz.fut[i %= NFUT].f == NULL)
        return;
    r = fz.fut[i].r;
    future_check(i); /* what ended out of sight is known now */
    expect = !future_ended(r);
    if (expect)
        fut_fail(r, SEREX_ECANCELED, now_ns(), true);
    got = serex_future_cancel(fz.fut[i].f);
    CHECK(got || !expect,
          "future_cancel said false for a task that had not "
          "started",
          r);
    CHECK(!got || expect,
          "future_cancel said true for a task that ran or "
          "was cancelled",
          r);
    if (!got)
        return;
    CHECK(future_check(i) == SEREX_ECANCELED,
          "a cancelled future does "
          "not say ECANCELED",
          r);
    /* at once, down the chain: every then-future on it says so too */
    for (unsigned k = 0; k < NFUT; k++)
        if (fz.fut[k].f != NULL)
            future_check(k);
}

/* Releases slot @i: a promise not ended breaks (SEREX_ECANCELED, at
 * once: its continuations run inside); the handle of a witnessed future
 * not ended is kept in the grave, for its witness to read how it ends
 * (the grave full, the slot keeps it: nothing is released). */
static void future_release(unsigned i)
{
    struct rec *r;
    int k = 0;

    if (fz.fut[i %= NFUT].f == NULL)
        return;
    r = fz.fut[i].r;
    future_check(i);
    if (r->kind == K_PROMISE && !future_ended(r)) {
        fz.n23[5]++;
        fut_fail(r, SEREX_ECANCELED, now_ns(), true);
    }
    if (r->witnessed && !future_ended(r)) {
        for (int j = 0; j < NGRAVE; j++) /* their witnesses have run */
            if (fz.grave[j].f != NULL && future_ended(fz.grave[j].r)) {
                serex_future_release(fz.grave[j].f);
                fz.grave[j].f = NULL;
                fz.grave[j].r = NULL;
            }
        while (k < NGRAVE && fz.grave[k].f != NULL)
            k++;
        if (k == NGRAVE)
            return;
        fz.grave[k].f = fz.fut[i].f;
        fz.grave[k].r = r;
    } else {
        serex_future_release(fz.fut[i].f);
    }
    fz.fut[i].f = NULL;
    fz.fut[i].r = NULL;
}

/*
 * Adds continuation @kind (K_ONDONE or K_THEN) to the future in slot @i,
 * posted to dest @d when it ends. A then-future takes a free slot, or is
 * released at once (fire and forget: it keeps what it needs).
 */
static void cont_new(enum kind kind, unsigned i, unsigned d)
{
    serex_future *next = (serex_future *)&fz;
    serex_executor *ex = dest_ex(d = dest_norm(d));
    struct rec *f = fz.fut[i %= NFUT].r, *r;
    int slot = -1, rc;

    if (fz.fut[i].f == NULL || ex == NULL || f->nconts >= MAX_CONTS ||
        f->nlist >= MAX_LIST ||
        (kind == K_THEN && (f->nthens >= NTHEN_FN || f->kind == K_COMB)) ||
        (r = rec_new(kind)) == NULL)
        return;
    if (fz.used23)
        future_check(i); /* an end out of sight is known now */
    r->src = (int16_t)rec_index(f);
    r->dest = (uint8_t)d;
    r->ext = dest_ext(d);
    r->cseq = f->nconts;
    r->tidx = f->nthens;
    /* on the list first: it may run inside the call (f has ended and the
     * target refuses it) */
    r->prev_cont = f->last_cont;
    f->last_cont = (int16_t)rec_index(r);
    f->nconts++;
    f->nlist++;
    if (kind == K_THEN) {
        f->nthens++;
        slot = fut_free_slot();
        rc = serex_future_then(fz.fut[i].f, ex, then_fns[r->tidx], &next);
        CHECK(rc != SEREX_OK || next != NULL, "then said OK with no future", r);
        CHECK(rc == SEREX_OK || next == NULL,
              "a failed then left *next "
              "set",
              r);
    } else {
        rc = serex_future_on_done(fz.fut[i].f, ex, cont_run, r);
    }
    CHECK(rc == SEREX_OK || rc == SEREX_ENOMEM,
          "on_done or then gave an "
          "unexpected status",
          r);
    if (rc != SEREX_OK) {
        CHECK(r->runs == 0, "a continuation ran though its call failed", r);
        f->last_cont = r->prev_cont;
        f->nconts--;
        f->nlist--;
        f->nthens -= kind == K_THEN;
        rec_unused(r);
        return;
    }
    if (kind != K_THEN)
        return;
    if (future_ended(f) && !fut_value(f)) /* its source's end, now */
        fut_fail(r, fut_code(f), now_ns(), false);
    if (slot < 0) {
        serex_future_release(next);
        return;
    }
    fz.fut[slot].f = next;
    fz.fut[slot].r = r;
    r->newapi = f->newapi;
    if (future_ended(f) && !fut_value(f))
        CHECK(future_check((unsigned)slot) == fut_code(f),
              "a then of a failed or cancelled future did not end with its "
              "error at once (errors pass down then-chains)",
              r);
}

/* --- groups --- */

/* What the model knows of a group task: left the group, a member
 * (queued, not started, not cancelled), or either. */
enum gstate { G_REACHED, G_MEMBER, G_UNKNOWN };

static enum gstate gtask_state(const struct rec *r)
{
    if (r->greached || stream_passed(r))
        return G_REACHED;
    if (r->kind == K_EXEC) {
        if (r->runs + r->backs > 0)
            return G_REACHED;
        return r->gcancelled || r->maybe_dropped ? G_UNKNOWN : G_MEMBER;
    }
    /* K_FUTURE: a future that ended without a cancel of its own was
     * dropped or reached after a group cancel: out either way */
    if (r->runs > 0 || (r->cancelled && !r->cancel_said))
        return G_REACHED;
    if (r->gcancelled || r->cancel_said || r->snow_at != fz.snows)
        return G_UNKNOWN; /* skipped, or dropped, out of sight */
    return G_MEMBER;
}

static bool gtask(const struct rec *r, uint16_t gid)
{
    return r->gid == gid && (r->kind == K_EXEC || r->kind == K_FUTURE);
}

struct gcount {
    unsigned member;  /* surely members */
    unsigned unknown; /* maybe */
    unsigned live;    /* maybe, and not counted by a cancel yet */
};

static void group_count(uint16_t gid, struct gcount *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < fz.nrecs; i++) {
        const struct rec *r = &fz.recs[i];

        if (!gtask(r, gid))
            continue;
        switch (gtask_state(r)) {
        case G_MEMBER: c->member++; break;
        case G_UNKNOWN:
            c->unknown++;
            c->live += !r->gcancelled;
            break;
        default: break;
        }
    }
}

/* Every task of @gid that may still be a member is out after all. */
static void group_all_reached(uint16_t gid)
{
    for (size_t i = 0; i < fz.nrecs; i++)
        if (gtask(&fz.recs[i], gid))
            fz.recs[i].greached = true;
}

static void group_create(uint8_t a)
{
    unsigned g = a % NGROUP;
    int rc;

    if (fz.grp[g].g != NULL)
        return;
    rc = serex_group_create(&fz.grp[g].g);
    CHECK(rc == SEREX_OK || rc == SEREX_ENOMEM,
          "group_create gave an "
          "unexpected status",
          NULL);
    CHECK((rc == SEREX_OK) == (fz.grp[g].g != NULL),
          "group_create's *out "
          "disagrees with its status",
          NULL);
    fz.grp[g].gid = ++fz.gids;
    fz.grp[g].enters = fz.grp[g].leaves = 0;
    fz.grp[g].cfg = fz.grp[g].ff = fz.grp[g].closed = false;
    fz.grp[g].node = -1;
    fz.grp[g].err = 0;
    fz.grp[g].nerr = 0;
}

/* group_execute (a plain task) or group_submit (a future, whose call sets
 * error err_codes[@plan - 1] if @plan) on dest @d. A closed group (its
 * serex_group_close, or its token cancelled) says SEREX_EREJECTED. */
static void group_exec(unsigned g, bool submit, unsigned d, uint8_t act,
                       uint8_t act_arg, uint8_t plan)
{
    serex_executor *ex = dest_ex(d = dest_norm(d));
    int s = dest_stream(d), slot = -1, rc;
    struct rec *r;
    bool closed;

    if (fz.grp[g].g == NULL || ex == NULL ||
        (submit && (slot = fut_free_slot()) < 0) ||
        (r = rec_new(submit ? K_FUTURE : K_EXEC)) == NULL)
        return;
    mtok_refresh(fz.grp[g].node);
    closed = fz.grp[g].closed;
    r->gid = fz.grp[g].gid;
    r->dest = (uint8_t)d;
    r->plan = submit ? plan : 0;
    r->newapi = plan != 0;
    if (!submit) {
        r->act = act;
        r->act_arg = act_arg;
    }
    if (s >= 0)
        stream_begin(r, s);
    if (submit) {
        rc = serex_group_submit(fz.grp[g].g, ex, task_call, r, &fz.fut[slot].f);
        CHECK((rc == SEREX_OK) == (fz.fut[slot].f != NULL),
              "group_submit's *out disagrees with its status", r);
    } else {
        rc = serex_group_execute(fz.grp[g].g, ex, task_run, r);
    }
    CHECK(status_ok(rc),
          "group_execute or group_submit gave an unexpected "
          "status",
          r);
    CHECK(!closed || rc == SEREX_EREJECTED,
          "a closed group accepted a task (serex_group_close, fail-fast, "
          "or its token cancelled)",
          r);
    if (rc != SEREX_OK) {
        fz.n23[7] += closed;
        rec_unused(r);
        return;
    }
    stream_commit(r);
    if (submit)
        fz.fut[slot].r = r;
}

static void group_enter_leave(uint8_t a)
{
    unsigned g = a % NGROUP;

    if (fz.grp[g].g == NULL)
        return;
    if ((a & 2) && fz.grp[g].enters > fz.grp[g].leaves) {
        fz.grp[g].leaves++; /* first: a notification may run inside */
        serex_group_leave(fz.grp[g].g);
    } else {
        fz.grp[g].enters++;
        serex_group_enter(fz.grp[g].g);
    }
}

/* What serex_group_wait(g, 0) told (group_wait_check). */
enum { GW_EMPTY, GW_BUSY, GW_UNSURE, GW_DEADLK };

/*
 * serex_group_wait(g, 0): SEREX_EDEADLK from a task of the group, else
 * empty exactly when no member is left, as far as the model can tell: an
 * empty group says its first error (SEREX_OK if none), which tells the
 * model that every maybe-member is out. A group whose first error is
 * SEREX_ETIMEDOUT (a deadline cancelled its token) says it whether it is
 * empty or not: GW_UNSURE.
 */
static int group_wait_check(unsigned g)
{
    uint16_t gid = fz.grp[g].gid;
    struct gcount c;
    unsigned lo;
    int rc;

    mtok_refresh(fz.grp[g].node);
    rc = serex_group_wait(fz.grp[g].g, 0);
    if (group_running(gid)) {
        CHECK(rc == SEREX_EDEADLK,
              "group_wait from a task of the group did "
              "not say EDEADLK",
              NULL);
        return GW_DEADLK;
    }
    group_count(gid, &c);
    lo = c.member + (fz.grp[g].enters - fz.grp[g].leaves);
    if (rc == SEREX_ETIMEDOUT && fz.grp[g].err == SEREX_ETIMEDOUT)
        return GW_UNSURE;
    if (rc == SEREX_ETIMEDOUT) {
        CHECK(lo + c.unknown > 0,
              "group_wait said not empty with no "
              "member left",
              NULL);
        return GW_BUSY;
    }
    CHECK(rc == (fz.grp[g].err != 0 ? fz.grp[g].err : SEREX_OK),
          "group_wait(0) on an empty group did not say its first error "
          "(SEREX_OK if none)",
          NULL);
    CHECK(lo == 0, "group_wait said empty with members left", NULL);
    group_all_reached(gid);
    return GW_EMPTY;
}

/* The count it returns is the group's tasks not started yet. */
static void group_cancel(unsigned g)
{
    uint16_t gid = fz.grp[g].gid;
    struct gcount c;
    size_t n;

    if (fz.grp[g].g == NULL)
        return;
    group_count(gid, &c);
    n = serex_group_cancel(fz.grp[g].g);
    CHECK(n >= c.member && n <= c.member + c.live,
          "group_cancel's count is "
          "not the group's tasks that had not started",
          NULL);
    for (size_t i = 0; i < fz.nrecs; i++) {
        struct rec *r = &fz.recs[i];

        if (!gtask(r, gid) || r->gcancelled)
            continue;
        switch (gtask_state(r)) {
        case G_MEMBER: r->gcancelled = true; break;
        case G_UNKNOWN:
            if (n == c.member)
                r->greached = true; /* not counted: it had left */
            else
                r->gcancelled = true;
            break;
        default: break;
        }
    }
}

/* A notification: its argument is its record. */
static void note_run(void *arg)
{
    struct rec *r = arg;
    int lim;

    CHECK(rec_valid(r), "a notification ran with an argument never given",
          NULL);
    CHECK(r->kind == K_NOTE, "a notification ran though notify failed", r);
    CHECK(r->runs == 0, "a notification ran twice", r);
    CHECK(r != fz.reg_note,
          "notify ran its notification at once though "
          "the group had members",
          r);
    r->runs++;
    for (int i = 0; i < rec_index(r); i++)
        CHECK(!gtask(&fz.recs[i], r->gid) ||
                  gtask_state(&fz.recs[i]) != G_MEMBER,
              "a notification ran "
              "before a task of its group, accepted before it, had ended",
              &fz.recs[i]);
    for (int g = 0; g < NGROUP; g++)
        if (fz.grp[g].g != NULL && fz.grp[g].gid == r->gid) {
            CHECK(fz.grp[g].leaves >= r->enters_at,
                  "a notification ran "
                  "before the enters made before it had left",
                  r);
            mtok_refresh(fz.grp[g].node);
            CHECK(serex_group_error(fz.grp[g].g) == fz.grp[g].err &&
                      serex_group_error_count(fz.grp[g].g) == fz.grp[g].nerr,
                  "inside a notification, serex_group_error (or its count) "
                  "is not the group's first error",
                  r);
        }
    lim = cont_on_target(r) ? dest_limiter(r->dest) : -1;
    limiter_enter(lim, r);
    limiter_leave(lim);
}

static void group_notify(unsigned g, unsigned d)
{
    serex_executor *ex = dest_ex(d = dest_norm(d));
    const struct rec *saved = fz.reg_note;
    struct gcount c;
    struct rec *r;
    int rc;

    if (fz.grp[g].g == NULL || ex == NULL || (r = rec_new(K_NOTE)) == NULL)
        return;
    r->gid = fz.grp[g].gid;
    r->dest = (uint8_t)d;
    r->ext = dest_ext(d);
    r->enters_at = fz.grp[g].enters;
    group_count(r->gid, &c);
    if (c.member + (fz.grp[g].enters - fz.grp[g].leaves) > 0 ||
        group_running(r->gid))
        fz.reg_note = r; /* a member is left: not posted from here */
    rc = serex_group_notify(fz.grp[g].g, ex, note_run, r);
    fz.reg_note = saved;
    CHECK(rc == SEREX_OK || rc == SEREX_ENOMEM,
          "group_notify gave an "
          "unexpected status",
          r);
    if (rc != SEREX_OK) {
        CHECK(r->runs == 0, "a notification ran though notify failed", r);
        rec_unused(r);
    }
}

/* Destroys the group if wait(0) says it is empty (top level only). */
static void group_wait_op(unsigned g, bool destroy)
{
    if (fz.grp[g].g == NULL)
        return;
    if (group_wait_check(g) == GW_EMPTY && destroy) {
        hooks_kill(H_GROUP, (int16_t)fz.grp[g].gid);
        serex_group_destroy(fz.grp[g].g);
        fz.grp[g].g = NULL;
    }
}

/* From a task: wait(0), cancel, a child task of the group, or notify. */
static void group_act(uint8_t a)
{
    unsigned g = a & 1;

    if (fz.grp[g].g == NULL)
        return;
    switch ((a >> 1) & 3) {
    case 0: group_wait_check(g); break;
    case 1: group_cancel(g); break;
    case 2: group_exec(g, false, a >> 3, NACT, 0, 0); break;
    default: group_notify(g, a >> 3); break;
    }
}

/* --- timers --- */

/* @kind 0 one-shot, 1 fixed rate, 2 fixed delay; @target -1: none;
 * @policy: a fixed rate's missed-run policy through
 * serex_schedule_fixed_rate_missed, -1: serex_schedule_fixed_rate. */
static void schedule_new(int kind, int target, int64_t delay, int64_t period,
                         bool keep, uint8_t act, uint8_t act_arg, int policy)
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
    r->dest = target_dest(target);
    r->null_target = target < 0;
    r->due = sat_add(serex_scheduler_now(fz.sched), delay);
    r->next_due = r->due;
    r->period = period;
    r->policy = (uint8_t)(policy < 0 ? SEREX_MISSED_COALESCE : policy);
    out = slot >= 0 ? &t : NULL;
    if (kind == 0)
        rc = serex_schedule(fz.sched, ex, delay, task_run, r, out);
    else if (kind == 1 && policy < 0)
        rc = serex_schedule_fixed_rate(fz.sched, ex, delay, period, task_run,
                                       r, out);
    else if (kind == 1)
        rc = serex_schedule_fixed_rate_missed(fz.sched, ex, delay, period,
                                              (serex_missed_policy)policy,
                                              task_run, r, out);
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
            CHECK(r->runs + r->backs > 0 || r->cancelled || r->maybe_dropped,
                  "timer_cancel said false for a one-shot that never ran", r);
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
    r->dest = target_dest((int)t);
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
    r->dest = target_dest(target);
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
    r->dest = target_dest(target);
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

/* The first future held, group made, or NULL. */
static serex_future *any_future(void)
{
    for (int i = 0; i < NFUT; i++)
        if (fz.fut[i].f != NULL)
            return fz.fut[i].f;
    return NULL;
}

static serex_group *any_group(void)
{
    return fz.grp[0].g != NULL ? fz.grp[0].g : fz.grp[1].g;
}

/* One invalid call of the 0.2.0 calls, chosen by @a (variant by @a >> 4):
 * SEREX_EINVAL, *out set to NULL where the call has one, nothing queued
 * or joined (the record is unused; the groups' later checks see no extra
 * member). */
static void bad_input2(uint8_t a)
{
    static const serex_missed_policy bad_policy = (serex_missed_policy)4;
    struct rec *r = rec_new(K_EXEC);
    serex_future *f = any_future(), *next = (serex_future *)&fz;
    serex_group *g = any_group();
    serex_executor *ex = (serex_executor *)&fz, *none[1] = {NULL};
    serex_timer *t = (serex_timer *)&fz;
    unsigned v = (unsigned)(a >> 4) % 3;
    int64_t now = serex_scheduler_now(fz.sched);
    int rc = SEREX_EINVAL;

    if (r == NULL)
        return;
    rec_unused(r);
    switch (a % 16) {
    case 0: rc = serex_future_on_done(NULL, fz.manual, cont_run, r); break;
    case 1:
        if (f != NULL)
            rc = serex_future_on_done(f, v ? NULL : fz.manual,
                                      v ? cont_run : NULL, r);
        break;
    case 2: rc = serex_future_then(NULL, fz.manual, then_fns[0], &next); break;
    case 3:
        if (f != NULL)
            rc = serex_future_then(f, v == 0 ? NULL : fz.manual,
                                   v == 1 ? NULL : then_fns[0],
                                   v == 2 ? NULL : &next);
        break;
    case 4: rc = serex_group_create(NULL); break;
    case 5:
        rc = serex_group_execute(v == 0 ? NULL : g, v == 1 ? NULL : fz.manual,
                                 v == 2 ? NULL : task_run, r);
        break;
    case 6:
        if (g != NULL)
            rc = v ? serex_group_submit(g, fz.manual, task_call, r, NULL)
                   : serex_group_submit(g, fz.manual, NULL, r, &next);
        break;
    case 7:
        rc = serex_group_notify(v == 0 ? NULL : g, v == 1 ? NULL : fz.manual,
                                v == 2 ? NULL : cont_run, r);
        break;
    case 8:
        rc = g ? serex_group_wait(g, -2 - (int64_t)v) : SEREX_EINVAL;
        CHECK(serex_group_wait(NULL, 0) == SEREX_EINVAL,
              "group_wait(NULL) "
              "did not say EINVAL",
              r);
        CHECK(serex_group_cancel(NULL) == 0,
              "group_cancel(NULL) did not "
              "say 0",
              r);
        serex_group_enter(NULL); /* NULL is ignored */
        serex_group_leave(NULL);
        serex_group_destroy(NULL);
        break;
    case 9:
        rc = serex_limiter_create(v == 2 ? NULL : fz.manual,
                                  v == 0 ? 0 : SEREX_LIMITER_MAX_RUNNING + v,
                                  &ex);
        break;
    case 10: rc = serex_limiter_create(fz.manual, 1, NULL); break;
    case 11:
        rc = serex_schedule_fixed_rate_missed(
            fz.sched, fz.manual, v == 0 ? -1 : 0, v == 1 ? 0 : 256,
            v == 2 ? bad_policy : SEREX_MISSED_BURST, task_run, r, &t);
        break;
    case 12:
        rc = serex_scheduler_run_until(fz.sched, v == 0 ? NULL : none, 1, now);
        if (v == 2 && now > 0)
            rc = serex_scheduler_run_until(fz.sched, &fz.manual, 1, now - 1);
        break;
    case 13:
        rc = f != NULL ? serex_future_wait(f, -2 - (int64_t)v) : SEREX_EINVAL;
        break;
    case 14: rc = serex_scheduler_run_until(NULL, &fz.manual, 1, now); break;
    default:
        rc = serex_schedule_fixed_rate_missed(
            NULL, NULL, 0, 1, SEREX_MISSED_SKIP, task_run, r, &t);
        break;
    }
    CHECK(rc == SEREX_EINVAL,
          "bad input to a 0.2.0 call did not say EINVAL "
          "(promise 8)",
          r);
    CHECK(next == NULL || next == (serex_future *)&fz,
          "a refused then or "
          "group_submit left *out set",
          r);
    CHECK(ex == NULL || ex == (serex_executor *)&fz,
          "a refused "
          "limiter_create left *out set",
          r);
    CHECK(t == NULL || t == (serex_timer *)&fz,
          "a refused schedule left "
          "*out set",
          r);
}

/* --- issue 23: the operations --- */

static int grp_slot_of(uint16_t gid)
{
    for (int g = 0; g < NGROUP; g++)
        if (fz.grp[g].g != NULL && fz.grp[g].gid == gid)
            return g;
    return -1;
}

/* The group's own serex_group_cancel (its token fired): every task not
 * started is cancelled; those the model is unsure of may have been. */
static void group_cancel_internal(unsigned g)
{
    uint16_t gid = fz.grp[g].gid;

    for (size_t i = 0; i < fz.nrecs; i++) {
        struct rec *r = &fz.recs[i];

        if (gtask(r, gid) && !r->gcancelled && gtask_state(r) != G_REACHED)
            r->gcancelled = true;
    }
}

/* The group's token was cancelled (group.c's group_token_fire). */
static void group_token_fired(uint16_t gid, int cause)
{
    int g = grp_slot_of(gid);

    if (g < 0)
        return;
    fz.grp[g].closed = true;
    if (fz.grp[g].err == 0) {
        fz.grp[g].err = cause;
        fz.grp[g].nerr++;
    }
    group_cancel_internal((unsigned)g);
}

/* An error reported to group @g (serex_group_fail, or a submitted task's
 * future that set one): counted, the first kept; fail-fast, the first
 * closes the group and cancels its token with it. */
static void group_report(unsigned g, int err)
{
    bool first = fz.grp[g].err == 0;

    fz.grp[g].nerr++;
    if (!first)
        return;
    fz.grp[g].err = err;
    if (!fz.grp[g].ff)
        return;
    fz.grp[g].closed = true;
    mtok_cancel(fz.grp[g].node, err, now_ns());
}

/* The harness's witness on the future in slot @i (see wit_run), unless
 * it has one or has ended: false if there was no room or on_done said
 * SEREX_ENOMEM (then nothing is on it). */
static bool witness_add(unsigned i)
{
    struct rec *f = fz.fut[i].r, *w;
    bool armed;
    int rc;

    if (f->witnessed || future_ended(f))
        return true;
    if (f->nlist >= MAX_LIST || (w = rec_new(K_WITNESS)) == NULL)
        return false;
    w->src = (int16_t)rec_index(f);
    w->prev_cont = f->last_cont;
    f->last_cont = (int16_t)rec_index(w);
    f->nlist++;
    armed = alloc_armed();
    rc = serex_future_on_done(fz.fut[i].f, fz.sink, wit_run, w);
    CHECK(rc == SEREX_OK || (rc == SEREX_ENOMEM && armed),
          "on_done gave an unexpected status", w);
    if (rc != SEREX_OK) {
        CHECK(w->runs == 0, "a continuation ran though its call failed", w);
        f->last_cont = w->prev_cont;
        f->nlist--;
        rec_unused(w);
        return false;
    }
    f->witnessed = f->newapi = true;
    fz.used23 = true;
    return true;
}

/* A token selector: slots 0-3, the token of group 0 or 1 (4, 5; groups
 * made by serex_group_create_config), else none: -1. */
static int16_t tsel_node(unsigned sel)
{
    sel &= 7;
    if (sel < NTOK)
        return fz.tslot[sel];
    if (sel < NTOK + NGROUP && fz.grp[sel - NTOK].g != NULL)
        return fz.grp[sel - NTOK].node;
    return -1;
}

/* serex_cancel_create in slot @a & 3, a child of selector (a >> 2) & 7. */
static void tok_create(uint8_t a)
{
    unsigned s = a & 3;
    int16_t p = tsel_node(a >> 2), n;
    serex_cancel *c = (serex_cancel *)&fz;
    bool armed;
    int rc;

    if (fz.tslot[s] >= 0 || fz.ntoks == MAX_TOKS || !hooks_room(1))
        return;
    mtok_refresh(p);
    armed = alloc_armed();
    rc = serex_cancel_create(p >= 0 ? fz.toks[p].c : NULL, &c);
    CHECK(rc == SEREX_OK || (rc == SEREX_ENOMEM && armed),
          "cancel_create gave an unexpected status", NULL);
    CHECK((rc == SEREX_OK) == (c != NULL),
          "cancel_create's *out disagrees with its status", NULL);
    if (rc != SEREX_OK)
        return;
    n = mtok_new(c, p, 0);
    fz.tslot[s] = n;
    CHECK(serex_cancel_cause(c) == fz.toks[n].cause,
          "a child of a cancelled token was not born cancelled with its "
          "parent's cause (or one of a live parent was)",
          NULL);
}

/* serex_cancel_request on selector @sel with causes[@ci]: true exactly for
 * the first valid request; the model applies it first (its callbacks,
 * children, linked futures and group run inside the call). */
static void tok_request(unsigned sel, unsigned ci)
{
    int16_t n = tsel_node(sel);
    int cause = causes[ci & 7];
    bool expect, got;
    serex_cancel *c;

    if (n < 0)
        return;
    c = fz.toks[n].c;
    mtok_refresh(n);
    expect = cause_valid(cause) && fz.toks[n].cause == 0;
    if (expect)
        mtok_cancel(n, cause == 0 ? SEREX_ECANCELED : cause, now_ns());
    got = serex_cancel_request(c, cause);
    CHECK(got == expect,
          "cancel_request did not say true exactly for the first request "
          "with a valid cause",
          NULL);
    CHECK(serex_cancel_requested(c) == (fz.toks[n].cause != 0) &&
              serex_cancel_cause(c) == fz.toks[n].cause,
          "after a request, a token's cause is not the first valid one", NULL);
    fz.n23[0] += got;
}

/* Arms a deadline @delay ns from now for selector @sel (@fut: for the
 * future in slot @sel instead), at a due time no other pending one has. */
static int64_t dl_due_for(int64_t delay)
{
    return dl_unique(sat_add(now_ns(), delay));
}

static void tok_deadline(unsigned sel, int64_t delay)
{
    int16_t n = tsel_node(sel);
    int64_t due;
    bool armed;
    int rc;

    if (n < 0)
        return;
    mtok_refresh(n);
    if ((due = dl_due_for(delay)) == NO_DL)
        return;
    armed = alloc_armed();
    rc = serex_cancel_deadline(fz.toks[n].c, fz.sched, due - now_ns());
    if (fz.toks[n].cause != 0) {
        CHECK(rc == SEREX_OK || (rc == SEREX_ENOMEM && armed),
              "cancel_deadline of a cancelled token did not say OK", NULL);
        return;
    }
    CHECK(rc == SEREX_OK || (rc == SEREX_ENOMEM && armed) ||
              (rc == SEREX_EREJECTED && fz.shut_sched) ||
              (rc == SEREX_EFULL && fz.max_timers != 0),
          "cancel_deadline gave an unexpected status", NULL);
    CHECK(!fz.shut_sched || rc != SEREX_OK,
          "cancel_deadline on a scheduler shut down said OK", NULL);
    if (rc == SEREX_OK &&
        (fz.toks[n].dl_due == NO_DL || due < fz.toks[n].dl_due)) {
        fz.toks[n].dl_due = due;
        fz.toks[n].dl_adv = fz.nadv;
    }
}

/* serex_cancel_on_cancel: registration slot @a & 7, the token of selector
 * (a >> 3) & 7, self-unregistering if a & 64, posted to dest @d. */
static void tok_on_cancel(uint8_t a, uint8_t d)
{
    unsigned slot = a & 7;
    int16_t n = tsel_node(a >> 3);
    serex_executor *ex = dest_ex(d = (uint8_t)dest_norm(d));
    struct rec *r;
    bool armed;
    int rc;

    if (fz.reg[slot].r != NULL || n < 0 || ex == NULL || !hooks_room(1) ||
        (r = rec_new(K_CB)) == NULL)
        return;
    mtok_refresh(n);
    r->aux = n;
    r->dest = d;
    r->ext = dest_ext(d);
    r->rslot = (uint8_t)slot;
    r->self_unreg = (a & 64) != 0;
    if (fz.toks[n].cause != 0) { /* posted from the call */
        r->fired = true;
        r->posted_at = now_ns();
    }
    fz.reg[slot].r = r; /* before: it may run, and unregister, inside */
    armed = alloc_armed();
    rc = serex_cancel_on_cancel(fz.toks[n].c, ex, cb_run, r, &fz.reg[slot].reg);
    if (rc != SEREX_OK) {
        CHECK(rc == SEREX_ENOMEM && armed,
              "on_cancel gave an unexpected status", r);
        CHECK(fz.reg[slot].reg == NULL, "a failed on_cancel left *reg set", r);
        CHECK(r->runs == 0,
              "an on_cancel callback ran though on_cancel "
              "failed",
              r);
        rec_unused(r);
        fz.reg[slot].r = NULL;
        return;
    }
    if (!r->fired)
        hook_add(n, H_REG, (int16_t)rec_index(r));
}

/* serex_cancel_unregister of slot @s: true exactly when its callback was
 * never posted. Not while it is posted and has not run: it would wait
 * for a task only this thread can run. */
static void tok_unregister(unsigned s)
{
    struct rec *r = fz.reg[s &= 7].r;
    bool got;

    if (r == NULL)
        return;
    mtok_refresh(r->aux); /* the registration holds the token */
    if (r->fired && r->runs == 0)
        return;
    got = serex_cancel_unregister(fz.reg[s].reg);
    CHECK(got == !r->fired,
          "unregister did not say true exactly when the callback had not "
          "been posted",
          r);
    r->unreg = got ? 1 : 2;
    if (got)
        hooks_kill(H_REG, (int16_t)rec_index(r));
    fz.reg[s].reg = NULL;
    fz.reg[s].r = NULL;
}

static void tok_release(unsigned s)
{
    int16_t n = fz.tslot[s &= 3];

    if (n < 0)
        return;
    serex_cancel_release(fz.toks[n].c);
    fz.tslot[s] = -1; /* the node stays: what holds the token uses it */
}

/* serex_promise_create into a free slot. */
static void promise_create(void)
{
    int slot = fut_free_slot(), rc;
    serex_future *f = (serex_future *)&fz;
    struct rec *r;
    bool armed;

    if (slot < 0 || (r = rec_new(K_PROMISE)) == NULL)
        return;
    r->dest = D_NONE;
    r->newapi = true;
    armed = alloc_armed();
    rc = serex_promise_create(&f);
    CHECK(rc == SEREX_OK || (rc == SEREX_ENOMEM && armed),
          "promise_create gave an unexpected status", r);
    CHECK((rc == SEREX_OK) == (f != NULL),
          "promise_create's *out disagrees with its status", r);
    if (rc != SEREX_OK) {
        rec_unused(r);
        return;
    }
    fz.fut[slot].f = f;
    fz.fut[slot].r = r;
    fz.used23 = true;
}

/* serex_future_complete (@fail false) or _fail with @code, of slot @i: true
 * exactly for the first end of a promise (a promise completes once),
 * false for a future that is no promise and for a bad code. */
static void promise_end(unsigned i, bool fail, int code)
{
    serex_future *f = fz.fut[i %= NFUT].f;
    struct rec *r = fz.fut[i].r;
    bool expect, got;

    if (f == NULL)
        return;
    future_check(i);
    expect = r->kind == K_PROMISE && !future_ended(r) &&
             (!fail || (code < 0 && code >= SEREX_ERROR_MIN));
    if (expect && fail) {
        fut_fail(r, code, now_ns(), true);
    } else if (expect) {
        r->runs = 1;
        r->end_at = now_ns();
        fut_settle(r);
    }
    fz.n23[5] += expect;
    got = fail ? serex_future_fail(f, code) : serex_future_complete(f, r);
    CHECK(got == expect,
          "complete or fail did not say true exactly for the first end of "
          "a promise (false for another future, and for a bad error)",
          r);
    future_check(i);
}

/* serex_future_cancel_on(slot @i, selector @sel): a future not started
 * when its token is cancelled ends with the cause (at once, if it is
 * cancelled already), and its call never runs. */
static void cancel_on(unsigned i, unsigned sel)
{
    struct rec *r = fz.fut[i %= NFUT].r;
    int16_t n = tsel_node(sel);
    bool armed;
    int rc;

    if (fz.fut[i].f == NULL || n < 0 || !hooks_room(1))
        return;
    future_check(i);
    mtok_refresh(n);
    if (!witness_add(i))
        return;
    armed = alloc_armed();
    if (armed)
        model_save();
    if (!future_ended(r) && fz.toks[n].cause != 0)
        fut_fail(r, fz.toks[n].cause, now_ns(), true);
    else if (!future_ended(r))
        hook_add(n, H_LINK, (int16_t)rec_index(r));
    rc = serex_future_cancel_on(fz.fut[i].f, fz.toks[n].c);
    if (rc != SEREX_OK) {
        CHECK(rc == SEREX_ENOMEM && armed,
              "cancel_on gave an unexpected status", r);
        model_restore();
    }
    future_check(i);
}

/* serex_future_deadline(slot @i, @delay): SEREX_ETIMEDOUT at its due time
 * unless it ended first. */
static void future_deadline(unsigned i, int64_t delay)
{
    struct rec *r = fz.fut[i %= NFUT].r;
    int64_t due;
    bool armed;
    int rc;

    if (fz.fut[i].f == NULL)
        return;
    future_check(i);
    if ((due = dl_due_for(delay)) == NO_DL || !witness_add(i))
        return;
    armed = alloc_armed();
    rc = serex_future_deadline(fz.fut[i].f, fz.sched, due - now_ns());
    CHECK(rc == SEREX_OK || (rc == SEREX_ENOMEM && armed) ||
              (rc == SEREX_EREJECTED && fz.shut_sched) ||
              (rc == SEREX_EFULL && fz.max_timers != 0),
          "future_deadline gave an unexpected status", r);
    CHECK(!fz.shut_sched || rc != SEREX_OK,
          "future_deadline on a scheduler shut down said OK", r);
    if (rc == SEREX_OK && !future_ended(r) &&
        (r->fdl_due == NO_DL || due < r->fdl_due)) {
        r->fdl_due = due;
        r->fdl_adv = fz.nadv;
    }
    future_check(i);
}

/* serex_future_wait_token(slot @i, 0, selector @sel): the future's
 * outcome if it ended; else SEREX_EDEADLK from a task it is queued
 * behind; else the token's cause if it is cancelled; else ETIMEDOUT. */
static void wait_token(unsigned i, unsigned sel)
{
    struct rec *r = fz.fut[i %= NFUT].r;
    serex_future *h = fz.fut[i].f;
    int16_t n = tsel_node(sel);
    int rc, want;

    if (h == NULL)
        return;
    future_check(i);
    mtok_refresh(n);
    rc = serex_future_wait_token(h, 0, n >= 0 ? fz.toks[n].c : NULL);
    if (future_ended(r))
        want = fut_code(r);
    else if (fz.depth > 0 && behind_running(r->dest))
        want = SEREX_EDEADLK;
    else if (n >= 0 && fz.toks[n].cause != 0)
        want = fz.toks[n].cause;
    else
        want = SEREX_ETIMEDOUT;
    CHECK(rc == want,
          "wait_token(0) did not say the future's outcome, else EDEADLK "
          "behind its caller, else its token's cause, else ETIMEDOUT",
          r);
}

/*
 * serex_future_all / _any over 0 to 4 slots (a & 7) % 5 (any if a & 8,
 * SEREX_FUTURE_CANCEL_REST if a & 16), read from the next bytes, into a
 * free slot. The model watches each input as future.c does, in order:
 * the all/any ends when, and with what, the model says (checked by every
 * later look at its slot).
 */
static void combine(uint8_t a)
{
    unsigned n = (a & 7) % 5, slots[NCOMB_IN];
    bool any = (a & 8) != 0, armed;
    unsigned flags = a & 16 ? SEREX_FUTURE_CANCEL_REST : 0;
    serex_future *fs[NCOMB_IN], *o = (serex_future *)&fz;
    struct rec *out, *w[NCOMB_IN];
    struct mcomb *cb;
    int slot = fut_free_slot(), rc;

    for (unsigned k = 0; k < n; k++)
        slots[k] = next_byte() % NFUT;
    if (any && n == 0) {
        CHECK(serex_future_any(NULL, 0, flags, &o) == SEREX_EINVAL && o == NULL,
              "serex_future_any of no input did not say EINVAL", NULL);
        return;
    }
    if (slot < 0 || fz.ncombs == MAX_COMBS || fz.nrecs + 2 * n + 1 > MAX_RECS)
        return;
    for (unsigned k = 0; k < n; k++) {
        if (fz.fut[slots[k]].f == NULL ||
            fz.fut[slots[k]].r->nlist + n + 1 >= MAX_LIST)
            return;
        future_check(slots[k]);
        if (!witness_add(slots[k]))
            return;
        fs[k] = fz.fut[slots[k]].f;
    }
    out = rec_new(K_COMB);
    for (unsigned k = 0; k < n; k++)
        w[k] = rec_new(K_CWATCH);
    out->dest = D_NONE;
    out->newapi = true;
    out->aux = (int16_t)fz.ncombs;
    armed = alloc_armed();
    if (armed)
        model_save();
    cb = &fz.comb[fz.ncombs++];
    memset(cb, 0, sizeof *cb);
    cb->out = (int16_t)rec_index(out);
    cb->n = cb->left = (uint8_t)n;
    cb->any = any;
    cb->rest = flags != 0;
    for (unsigned k = 0; k < n; k++) { /* all known before the first add */
        cb->in[k] = (int16_t)rec_index(fz.fut[slots[k]].r);
        cb->w[k] = (int16_t)rec_index(w[k]);
    }
    if (n == 0) { /* all of nothing: ended, with a value */
        cb->decided = true;
        out->runs = 1;
        out->end_at = now_ns();
    }
    for (unsigned k = 0; k < n; k++) { /* future.c adds them in order */
        struct rec *in = fz.fut[slots[k]].r;

        w[k]->src = (int16_t)rec_index(in);
        w[k]->aux = out->aux;
        w[k]->prev_cont = in->last_cont;
        in->last_cont = (int16_t)rec_index(w[k]);
        in->nlist++;
        if (future_ended(in))
            comb_feed(w[k], in);
    }
    rc = any ? serex_future_any(fs, n, flags, &o)
             : serex_future_all(fs, n, flags, &o);
    CHECK(rc == SEREX_OK || (rc == SEREX_ENOMEM && armed),
          "all or any gave an unexpected status", out);
    CHECK((rc == SEREX_OK) == (o != NULL),
          "all or any's *out disagrees with its status", out);
    if (rc != SEREX_OK) {
        model_restore();
        rec_unused(out);
        for (unsigned k = 0; k < n; k++)
            rec_unused(w[k]);
        return;
    }
    fz.fut[slot].f = o;
    fz.fut[slot].r = out;
    fz.used23 = true;
    future_check((unsigned)slot);
    for (unsigned k = 0; k < n; k++)
        future_check(slots[k]);
}

/* serex_group_create_config in slot a % NGROUP: fail-fast if a & 2, a
 * child token of selector (a >> 2) & 7. */
static void group_create_config(uint8_t a)
{
    unsigned g = a % NGROUP;
    int16_t p = tsel_node(a >> 2), n;
    serex_group_config cfg = {0};
    bool armed;
    int rc;

    if (fz.grp[g].g != NULL || fz.ntoks == MAX_TOKS || !hooks_room(2))
        return;
    mtok_refresh(p);
    cfg.flags = a & 2 ? SEREX_GROUP_FAIL_FAST : 0;
    cfg.parent = p >= 0 ? fz.toks[p].c : NULL;
    armed = alloc_armed();
    rc = serex_group_create_config(&cfg, &fz.grp[g].g);
    CHECK(rc == SEREX_OK || (rc == SEREX_ENOMEM && armed),
          "group_create_config gave an unexpected status", NULL);
    CHECK((rc == SEREX_OK) == (fz.grp[g].g != NULL),
          "group_create_config's *out disagrees with its status", NULL);
    if (rc != SEREX_OK)
        return;
    fz.grp[g].gid = ++fz.gids;
    fz.grp[g].enters = fz.grp[g].leaves = 0;
    fz.grp[g].cfg = true;
    fz.grp[g].ff = (a & 2) != 0;
    fz.grp[g].closed = false;
    fz.grp[g].err = 0;
    fz.grp[g].nerr = 0;
    CHECK(serex_group_token(fz.grp[g].g) != NULL,
          "a group made by group_create_config has no token", NULL);
    n = fz.grp[g].node = mtok_new(serex_group_token(fz.grp[g].g), p,
                                  fz.grp[g].gid);
    if (fz.toks[n].cause != 0) /* born cancelled: closed at once */
        group_token_fired(fz.grp[g].gid, fz.toks[n].cause);
    else
        hook_add(n, H_GROUP, (int16_t)fz.grp[g].gid);
}

/* serex_group_fail(@g, @err): a bad error changes nothing. */
static void group_fail(unsigned g, int err)
{
    if (fz.grp[g].g == NULL)
        return;
    mtok_refresh(fz.grp[g].node);
    if (err < 0 && err >= SEREX_ERROR_MIN)
        group_report(g, err);
    serex_group_fail(fz.grp[g].g, err);
    fz.used23 = true;
}

static void group_close(unsigned g)
{
    if (fz.grp[g].g == NULL)
        return;
    fz.grp[g].closed = true;
    serex_group_close(fz.grp[g].g);
    fz.used23 = true;
}

/* Group (a & 1)'s life, by (a >> 1) & 3: close, fail (causes[(a >> 3) &
 * 7]: a bad one changes nothing), its token requested, or a look at its
 * error, count and token. */
static void group_life(uint8_t a)
{
    unsigned g = a & 1;

    switch ((a >> 1) & 3) {
    case 0: group_close(g); break;
    case 1: group_fail(g, causes[(a >> 3) & 7]); break;
    case 2: tok_request(NTOK + g, a >> 3); break;
    default:
        if (fz.grp[g].g != NULL)
            group_wait_check(g);
        fz.used23 |= fz.grp[g].g != NULL;
        break;
    }
}

/* From a task (act A_TOKEN), by @a & 7: request a token (selector
 * (a >> 3) & 7, cause a >> 6); fail or close a group made by
 * group_create_config; wait_token on future slot (a >> 3) & 15 with the
 * first token held; serex_future_set_error from a task that is no
 * future's call (EINVAL); unregister slot (a >> 3) & 7. Each acts only on
 * objects of issue 23's ops. */
static void token_act(uint8_t a)
{
    unsigned g = (a >> 3) & 1;
    int16_t first = -1;

    switch (a & 7) {
    case 0:
    case 1: tok_request(a >> 3, a >> 6); break;
    case 2:
        if (fz.grp[g].cfg)
            group_fail(g, err_codes[a >> 5]);
        break;
    case 3:
        if (fz.grp[g].cfg)
            group_close(g);
        break;
    case 4:
        for (unsigned s = 0; s < NTOK && first < 0; s++)
            if (fz.tslot[s] >= 0)
                first = (int16_t)s;
        if (first >= 0)
            wait_token((a >> 3) & 15, (unsigned)first);
        break;
    case 5:
        if (fz.used23)
            CHECK(serex_future_set_error(-1000) == SEREX_EINVAL,
                  "serex_future_set_error from a task that is no future's "
                  "call did not say EINVAL",
                  NULL);
        break;
    case 6: tok_unregister(a >> 3); break;
    default: break;
    }
}

/* One invalid call of issue 23's calls, chosen by @a (variant a >> 4):
 * SEREX_EINVAL, false, 0 or NULL as each says; nothing changed (the
 * checks after each op see it), and the record never runs. */
static void bad_input3(uint8_t a)
{
    struct rec *r = rec_new(K_CB), *pr = NULL;
    serex_cancel *tok = NULL;
    serex_cancel_reg *reg = (serex_cancel_reg *)&fz;
    serex_future *f = any_future(), *out = (serex_future *)&fz, *fs[2];
    serex_group *g = (serex_group *)&fz;
    serex_group_config gc = {0};
    unsigned v = (unsigned)(a >> 4) % 3;
    int rc = SEREX_EINVAL;

    if (r == NULL)
        return;
    rec_unused(r);
    fz.used23 = true;
    for (unsigned s = 0; s < NTOK && tok == NULL; s++)
        if (fz.tslot[s] >= 0)
            tok = fz.toks[fz.tslot[s]].c;
    for (unsigned i = 0; i < NFUT && pr == NULL; i++)
        if (fz.fut[i].f != NULL && fz.fut[i].r->kind == K_PROMISE)
            pr = fz.fut[i].r;
    switch (a % 14) {
    case 0: rc = serex_cancel_create(v ? tok : NULL, NULL); break;
    case 1:
        CHECK(!serex_cancel_request(NULL, 0) &&
                  !serex_cancel_request(tok, v == 0   ? 1
                                             : v == 1 ? SEREX_ERROR_MIN - 1
                                                      : 1 << 20),
              "a request of NULL or with a bad cause said true", NULL);
        CHECK(!serex_cancel_requested(NULL) && serex_cancel_cause(NULL) == 0,
              "requested(NULL) or cause(NULL) said a cancellation", NULL);
        break;
    case 2:
        rc = serex_cancel_deadline(v == 0 ? NULL : tok,
                                   v == 1 ? NULL : fz.sched,
                                   v == 2 ? -1 - (int64_t)(a >> 6) : 0);
        if (tok == NULL)
            rc = SEREX_EINVAL;
        break;
    case 3:
        rc = serex_cancel_on_cancel(v == 0 ? NULL : tok,
                                    v == 1 ? NULL : fz.manual,
                                    v == 2 ? NULL : cb_run, r, &reg);
        CHECK(reg == NULL || tok == NULL, "a refused on_cancel left *reg set",
              r);
        if (serex_cancel_on_cancel(tok, fz.manual, cb_run, r, NULL) !=
            SEREX_EINVAL)
            rc = SEREX_OK;
        if (tok == NULL)
            rc = SEREX_EINVAL;
        break;
    case 4:
        CHECK(!serex_cancel_unregister(NULL), "unregister(NULL) said true",
              NULL);
        serex_cancel_release(NULL);
        break;
    case 5:
        rc = serex_future_set_error(v == 0   ? 0
                                    : v == 1 ? 1
                                             : SEREX_ERROR_MIN - 1);
        CHECK(serex_future_set_error(-1000) == SEREX_EINVAL,
              "serex_future_set_error outside any future's call did not say "
              "EINVAL",
              NULL);
        break;
    case 6:
        CHECK(serex_future_error(NULL) == 0 &&
                  !serex_future_complete(NULL, r) &&
                  !serex_future_fail(NULL, -1000),
              "future_error, complete or fail of NULL said otherwise than "
              "0 or false",
              NULL);
        rc = serex_promise_create(NULL);
        break;
    case 7:
        rc = serex_future_cancel_on(v == 0 ? f : NULL, v == 1 ? tok : NULL);
        break;
    case 8:
        rc = serex_future_deadline(v == 0 ? NULL : f, v == 1 ? NULL : fz.sched,
                                   v == 2 ? -1 : 0);
        if (f == NULL)
            rc = SEREX_EINVAL;
        break;
    case 9:
        rc = serex_future_wait_token(v == 0 ? NULL : f,
                                     v == 0 ? 0 : -2 - (int64_t)v, tok);
        if (f == NULL)
            rc = SEREX_EINVAL;
        break;
    case 10:
        fs[0] = f;
        fs[1] = NULL;
        if (v == 0)
            rc = serex_future_all(NULL, 1, 0, &out);
        else if (v == 1)
            rc = serex_future_any(fs, f != NULL ? 2 : 1, 0, &out);
        else
            rc = serex_future_all(fs, f != NULL, 2, &out);
        CHECK(out == NULL, "a refused all or any left *out set", r);
        if (f != NULL)
            CHECK(serex_future_all(fs, 1, 0, NULL) == SEREX_EINVAL,
                  "all with a NULL out did not say EINVAL", r);
        break;
    case 11:
        gc.flags = v == 0 ? 2u : v == 1 ? 4u : ~0u;
        rc = serex_group_create_config(&gc, &g);
        CHECK(g == NULL, "a refused group_create_config left *out set", r);
        CHECK(serex_group_create_config(NULL, NULL) == SEREX_EINVAL,
              "group_create_config with a NULL out did not say EINVAL", r);
        break;
    case 12:
        serex_group_close(NULL);
        serex_group_fail(NULL, -1000);
        CHECK(serex_group_error(NULL) == 0 &&
                  serex_group_error_count(NULL) == 0 &&
                  serex_group_token(NULL) == NULL,
              "group_error, error_count or token of NULL was not 0", r);
        if (any_group() != NULL) /* out of range: nothing */
            serex_group_fail(any_group(), v == 0   ? 0
                                          : v == 1 ? 1
                                                   : SEREX_ERROR_MIN - 1);
        break;
    default:
        if (f != NULL && handle_of(pr) != f)
            CHECK(!serex_future_complete(f, r) && !serex_future_fail(f, -1000),
                  "complete or fail of a future that is no promise said "
                  "true",
                  r);
        if (pr != NULL)
            CHECK(!serex_future_fail(handle_of(pr), 0) &&
                      !serex_future_fail(handle_of(pr), 1) &&
                      !serex_future_fail(handle_of(pr), SEREX_ERROR_MIN - 1),
                  "fail of a promise with an error out of range said true", r);
        break;
    }
    CHECK(rc == SEREX_EINVAL,
          "bad input to an issue-23 call did not say EINVAL (promise 8)", r);
}

/* After every op, once issue 23's objects exist: the deadlines due by
 * now have fired (and no other), every token held says the model's
 * cause, every group its first error and count, every future touched by
 * issue 23's ops its outcome. */
static void mcheck_top(void)
{
    if (!fz.used23)
        return;
    mtime_sync();
    for (unsigned s = 0; s < NTOK; s++)
        if (fz.tslot[s] >= 0) {
            const struct mtok *t = &fz.toks[fz.tslot[s]];

            CHECK(serex_cancel_cause(t->c) == t->cause &&
                      serex_cancel_requested(t->c) == (t->cause != 0),
                  "a token's cause is not the model's (a request, its "
                  "parent's, or a deadline at its due time: early, late or "
                  "lost?)",
                  NULL);
        }
    for (unsigned g = 0; g < NGROUP; g++) {
        serex_group *grp = fz.grp[g].g;

        if (grp == NULL)
            continue;
        CHECK(serex_group_error(grp) == fz.grp[g].err &&
                  serex_group_error_count(grp) == fz.grp[g].nerr,
              "a group's first error or error count is not the model's", NULL);
        CHECK(fz.grp[g].cfg
                  ? serex_group_token(grp) == fz.toks[fz.grp[g].node].c
                  : serex_group_token(grp) == NULL,
              "serex_group_token is not the group's token (NULL for "
              "serex_group_create's)",
              NULL);
        if (fz.grp[g].cfg)
            CHECK(serex_cancel_cause(serex_group_token(grp)) ==
                      fz.toks[fz.grp[g].node].cause,
                  "a group's token's cause is not the model's", NULL);
    }
    for (unsigned i = 0; i < NFUT; i++)
        if (fz.fut[i].f != NULL && fz.fut[i].r->newapi)
            future_check(i);
}

/* --- a pool round: the priority faces and the hooks --- */

/*
 * The one op that starts threads: a pool of 1 or 2 workers with thread
 * hooks (one start hook may refuse a core thread) and maybe task hooks,
 * its three faces, maybe a serial (bounded or not) and a striped over
 * faces. Each worker is held in a blocker task while the round submits,
 * so the model knows every level's count and what a shutdown_now hands
 * back: the round's outcome stays a pure function of its bytes. Its tasks
 * (struct ptask) touch only `pr`; a check that fails on a worker is
 * recorded in pr.fail and reported by the round's thread after
 * await_termination. Every thread is joined before the op returns, and
 * allocation failures are disarmed first (workers allocate too).
 */

enum { PR_DIRECT, PR_SERIAL, PR_STRIPED };

struct ptask {
    uint8_t level, route, key; /* key: the striped's, 0 or 1 */
    uint16_t seq;              /* 1 + its place in the round's submissions */
    int runs, backs;           /* runs: a worker's, read after the await */
};

static struct pround {
    serex_executor *pool, *face[SEREX_POOL_PRIORITIES], *ser;
    serex_striped *st;
    serex_event *ev, *release[2];
    unsigned threads, refuse; /* refuse: the index refused; else >= 2 */
    bool task_hooks, probe;
    size_t cap, scap;         /* the pool's and the serial's capacity */
    uint8_t ser_level, st_level;
    unsigned lvl[SEREX_POOL_PRIORITIES]; /* tasks and drains waiting */
    unsigned ser_wait, key_wait[2];
    unsigned ntask, probe_task, probe_level;
    struct ptask task[NPOOL_TASKS + 1]; /* the last: one that is refused */
    unsigned blk[2];          /* the blockers' arguments: their index */
    int blk_await[2];         /* await(pool, 0) from each blocker */
    int probe_rc;             /* blocker 0's execute_wait on a face */
    /* written by the hooks and the tasks, on the workers */
    _Atomic unsigned started[2], stopped[2];
    _Atomic unsigned long task_started, task_ended;
    _Atomic unsigned nlog;
    uint16_t log[NPOOL_TASKS]; /* direct tasks in the order they ran */
    uint16_t ser_last, key_last[2];
    _Atomic(const char *) fail;
    /* on_pending's, on the round's thread */
    unsigned nback;
    uint16_t back_last[4]; /* direct (level * 256 + seq), serial, keys */
} pr;

static void pr_fail(const char *what)
{
    const char *none = NULL;

    atomic_compare_exchange_strong(&pr.fail, &none, what);
}

static int pr_thread_start(void *ctx, unsigned index)
{
    if (ctx != &pr || index >= pr.threads) {
        pr_fail("on_thread_start got another ctx, or an index not below "
                "threads");
        return 0;
    }
    atomic_fetch_add(&pr.started[index], 1);
    return index == pr.refuse ? -1 : 0;
}

static void pr_thread_stop(void *ctx, unsigned index)
{
    if (ctx != &pr || index >= pr.threads || index == pr.refuse)
        pr_fail("on_thread_stop got another ctx or index, or ran for a "
                "thread its start hook refused");
    else
        atomic_fetch_add(&pr.stopped[index], 1);
}

static void pr_task_start(void *ctx)
{
    if (ctx != &pr)
        pr_fail("on_task_start got another ctx");
    atomic_fetch_add(&pr.task_started, 1);
}

static void pr_task_end(void *ctx)
{
    if (ctx != &pr)
        pr_fail("on_task_end got another ctx");
    atomic_fetch_add(&pr.task_ended, 1);
}

/* Inside a task: between its on_task_start and on_task_end. */
static void pr_hooks_around(void)
{
    /* ended first: then started - ended counts this task at least */
    unsigned long e = atomic_load(&pr.task_ended);
    unsigned long s = atomic_load(&pr.task_started);

    if (pr.task_hooks && (s <= e || (pr.threads == 1 && s - e != 1)))
        pr_fail("a pool's task ran outside its on_task_start and "
                "on_task_end");
}

static void pool_task(void *arg)
{
    struct ptask *t = arg;
    uint16_t *last = t->route == PR_SERIAL ? &pr.ser_last
                                           : &pr.key_last[t->key];

    if (t->runs++ != 0)
        pr_fail("a pool round's task ran twice (promise 1)");
    pr_hooks_around();
    if (t->route == PR_DIRECT) {
        unsigned i = atomic_fetch_add(&pr.nlog, 1);

        if (i < NPOOL_TASKS)
            pr.log[i] = (uint16_t)(t - pr.task);
        else
            pr_fail("a pool ran a task it had refused (promise 1)");
        return;
    }
    if (t->seq <= *last)
        pr_fail("a serial or striped key over a pool's face ran its tasks "
                "out of order (promise 3)");
    *last = t->seq;
}

/* Holds its worker until released. Blocker 0 then probes execute_wait
 * on a face, while the other worker (if any) is still held. */
static void pool_blocker(void *arg)
{
    unsigned i = *(const unsigned *)arg;

    pr_hooks_around();
    pr.blk_await[i] = serex_await_termination(pr.pool, 0);
    serex_event_signal(pr.ev);
    if (serex_event_wait(pr.release[i], POOL_WAIT_NS) != SEREX_OK)
        pr_fail("a pool round's blocker was never released");
    if (i != 0)
        return;
    if (pr.probe)
        pr.probe_rc = serex_execute_wait(pr.face[pr.probe_level], pool_task,
                                         &pr.task[pr.probe_task],
                                         SEREX_US(100));
    serex_event_signal(pr.ev); /* what we wrote, to the round's thread */
}

static void pr_pending(serex_fn fn, void *arg, void *ctx)
{
    struct ptask *t = arg;
    uint16_t key, *last;
    int which;

    CHECK(fn == pool_task && ctx == &pr && t >= pr.task &&
          t < pr.task + NPOOL_TASKS, "on_pending got a task that is not "
          "the pool round's (promise 2a)", NULL);
    CHECK(t->runs + t->backs == 0, "a pool round's task came back twice, "
          "or after it ran", NULL);
    t->backs++;
    pr.nback++;
    key = t->route == PR_DIRECT ? (uint16_t)(t->level * 256 + t->seq)
                                : t->seq;
    which = t->route == PR_STRIPED ? 2 + t->key : t->route;
    last = &pr.back_last[which];
    CHECK(key > *last, "shutdown_now handed back a pool's tasks out of "
          "order: not the highest level first, each level (serial, key) "
          "in submission order", NULL);
    *last = key;
}

static bool pr_room(unsigned level)
{
    return pr.cap == 0 || pr.lvl[level] < pr.cap;
}

/*
 * One task of the round, byte @t: level (t & 3) % 3; (t >> 2) & 3 the
 * route: 0, 1 the level's face, 2 the serial, 3 the striped with key
 * (t >> 4) & 1 (the face if there is none); (t >> 5) & 3 the call:
 * execute, execute_wait with timeout 0 or 1 us, or SEREX_FOREVER where
 * the model knows there is room (else 0). With the workers held: room
 * means SEREX_OK, else SEREX_EFULL (execute_wait: ETIMEDOUT). A serial
 * or key with nothing waiting starts a drain, which takes a place at its
 * face's level; a full level refuses it, and the wrapper says so.
 */
static void pr_submit(uint8_t t)
{
    struct ptask *k = &pr.task[pr.ntask];
    unsigned mode = (t >> 5) & 3, *w;
    bool room, drain;
    int64_t timeout = mode == 2 ? SEREX_US(1) : 0;
    int rc;

    memset(k, 0, sizeof *k);
    k->route = (t >> 2) & 2 ? ((t >> 2) & 1 ? PR_STRIPED : PR_SERIAL)
                            : PR_DIRECT;
    if ((k->route == PR_SERIAL && pr.ser == NULL) ||
        (k->route == PR_STRIPED && pr.st == NULL))
        k->route = PR_DIRECT;
    k->key = (t >> 4) & 1;
    k->seq = (uint16_t)(pr.ntask + 1);
    k->level = k->route == PR_DIRECT   ? (t & 3) % 3
               : k->route == PR_SERIAL ? pr.ser_level
                                       : pr.st_level;
    w = k->route == PR_SERIAL ? &pr.ser_wait : &pr.key_wait[k->key];
    drain = k->route != PR_DIRECT && *w == 0;
    room = pr_room(k->level) || (k->route != PR_DIRECT && !drain);
    if (k->route == PR_SERIAL && pr.scap != 0 && *w >= pr.scap)
        room = false;
    if (mode == 3 && room)
        timeout = SEREX_FOREVER;
    if (k->route == PR_DIRECT)
        rc = mode ? serex_execute_wait(pr.face[k->level], pool_task, k,
                                       timeout)
                  : serex_execute(pr.face[k->level], pool_task, k);
    else if (k->route == PR_SERIAL)
        rc = mode ? serex_execute_wait(pr.ser, pool_task, k, timeout)
                  : serex_execute(pr.ser, pool_task, k);
    else
        rc = mode ? serex_striped_execute_wait(pr.st, k->key, pool_task, k,
                                               timeout)
                  : serex_striped_execute(pr.st, k->key, pool_task, k);
    CHECK(rc == (room ? SEREX_OK : mode ? SEREX_ETIMEDOUT : SEREX_EFULL),
          room ? "a pool's face, or a wrapper over one, refused a task it "
                 "had room for"
               : "a full pool face (queue_capacity per level), or a wrapper "
                 "over one, did not say EFULL (execute_wait: ETIMEDOUT)",
          NULL);
    if (rc != SEREX_OK)
        return;
    pr.ntask++;
    if (k->route == PR_DIRECT || drain)
        pr.lvl[k->level]++;
    if (k->route != PR_DIRECT)
        (*w)++;
}

/* Starts the pool (or checks its refusal); false: the round is over. */
static bool pr_create(void)
{
    serex_pool_config cfg = {0};
    int rc;

    cfg.threads = cfg.max_threads = pr.threads;
    cfg.queue_capacity = pr.cap;
    cfg.on_thread_start = pr_thread_start;
    cfg.on_thread_stop = pr_thread_stop;
    cfg.hook_ctx = &pr;
    if (pr.task_hooks) {
        cfg.on_task_start = pr_task_start;
        cfg.on_task_end = pr_task_end;
    }
    rc = serex_pool_create(&cfg, &pr.pool);
    CHECK((rc == SEREX_OK) == (pr.pool != NULL), "pool_create's *out "
          "disagrees with its status", NULL);
    if (pr.refuse < pr.threads) {
        CHECK(rc == SEREX_EREJECTED, "pool_create did not say EREJECTED "
              "when a core thread's start hook refused it", NULL);
        for (unsigned i = 0; i < pr.threads; i++)
            CHECK(atomic_load(&pr.started[i]) == 1 &&
                  atomic_load(&pr.stopped[i]) == (i != pr.refuse),
                  "a refused pool_create left a core thread's start hook "
                  "not run, or its stop hook not run exactly once", NULL);
    }
    CHECK(atomic_load(&pr.fail) == NULL, atomic_load(&pr.fail), NULL);
    if (rc != SEREX_OK) {
        CHECK(rc == SEREX_EREJECTED || rc == SEREX_ENOMEM, "pool_create "
              "gave an unexpected status", NULL);
        return false;
    }
    return true;
}

/* The faces: the pool for NORMAL, the same pointer each time, a face's
 * face is its pool's; NULL past the last level. */
static void pr_faces(void)
{
    for (unsigned l = 0; l < SEREX_POOL_PRIORITIES; l++)
        pr.face[l] = serex_pool_executor_at(pr.pool, l);
    CHECK(pr.face[SEREX_POOL_PRIORITY_NORMAL] == pr.pool &&
          pr.face[SEREX_POOL_PRIORITY_HIGH] != NULL &&
          pr.face[SEREX_POOL_PRIORITY_LOW] != NULL &&
          pr.face[SEREX_POOL_PRIORITY_HIGH] != pr.face[SEREX_POOL_PRIORITY_LOW],
          "pool_executor_at did not give the pool for NORMAL and a face of "
          "its own for HIGH and LOW", NULL);
    CHECK(serex_pool_executor_at(pr.face[SEREX_POOL_PRIORITY_HIGH],
                                 SEREX_POOL_PRIORITY_LOW) ==
              pr.face[SEREX_POOL_PRIORITY_LOW] &&
          serex_pool_executor_at(pr.face[SEREX_POOL_PRIORITY_LOW],
                                 SEREX_POOL_PRIORITY_NORMAL) == pr.pool &&
          serex_pool_executor_at(pr.pool, SEREX_POOL_PRIORITIES) == NULL,
          "pool_executor_at: a face's faces are not its pool's, or a level "
          "past the last is not NULL", NULL);
}

/* Holds every worker in a blocker, one after the other (a held worker
 * takes nothing, so each blocker gets its own). */
static void pr_hold(void)
{
    for (unsigned i = 0; i < pr.threads; i++) {
        pr.blk[i] = i;
        CHECK(serex_execute(pr.pool, pool_blocker, &pr.blk[i]) == SEREX_OK,
              "a pool refused a blocker", NULL);
        CHECK(serex_event_wait(pr.ev, POOL_WAIT_NS) == SEREX_OK, "a pool "
              "never started a task", NULL);
    }
}

/* Releases the workers; blocker 0 probes first. @shut: the pool is shut
 * down by now. */
static void pr_release(bool shut)
{
    int want;

    if (pr.probe) {
        pr.probe_level = SEREX_POOL_PRIORITY_LOW;
        for (unsigned l = SEREX_POOL_PRIORITIES; l-- > 0;)
            if (!pr_room(l))
                pr.probe_level = l;
        pr.probe_task = pr.ntask;
        memset(&pr.task[pr.ntask], 0, sizeof pr.task[0]);
        pr.task[pr.ntask].level = (uint8_t)pr.probe_level;
        pr.task[pr.ntask].seq = (uint16_t)(pr.ntask + 1);
    }
    serex_event_signal(pr.release[0]);
    CHECK(serex_event_wait(pr.ev, POOL_WAIT_NS) == SEREX_OK, "a pool "
          "round's blocker never returned", NULL);
    if (pr.probe) {
        /* from a task of the pool: EDEADLK every time, full or not, shut
         * down or not (the call that can deadlock is refused at once) */
        want = SEREX_EDEADLK;
        (void)shut;
        CHECK(pr.probe_rc == want, "execute_wait from a task of a pool on "
              "one of its faces did not say EDEADLK at once", NULL);
        if (pr.probe_rc == SEREX_OK)
            pr.ntask++;
    }
    if (pr.threads > 1)
        serex_event_signal(pr.release[1]);
}

/* After the await: every task ran or came back once; hooks; order. */
static void pr_check(bool handed)
{
    unsigned long direct = 0, wrapped = 0;
    serex_stats a, b;

    CHECK(atomic_load(&pr.fail) == NULL, atomic_load(&pr.fail), NULL);
    for (unsigned i = 0; i < pr.threads; i++) {
        CHECK(pr.blk_await[i] == SEREX_EDEADLK, "await_termination of a "
              "pool from its own task did not say EDEADLK (promise 7)",
              NULL);
        CHECK(atomic_load(&pr.started[i]) == 1 &&
              atomic_load(&pr.stopped[i]) == 1, "a pool's thread did not "
              "run its start hook and then its stop hook once each, by the "
              "time await_termination said OK", NULL);
    }
    for (unsigned i = 0; i < pr.ntask; i++) {
        const struct ptask *t = &pr.task[i];

        CHECK(t->runs + t->backs == 1 && t->runs == !handed, "a pool "
              "round's task did not run (or, after shutdown_now, come back) "
              "exactly once (promise 1)", NULL);
        direct += t->route == PR_DIRECT && t->runs;
        wrapped += t->route != PR_DIRECT && t->runs;
    }
    CHECK(pr.task[NPOOL_TASKS].runs + pr.task[NPOOL_TASKS].backs == 0,
          "a task a pool refused ran or came back (promise 1)", NULL);
    CHECK(atomic_load(&pr.nlog) == direct, "harness: the run log", NULL);
    if (pr.task_hooks) {
        unsigned long s = atomic_load(&pr.task_started);

        CHECK(s == atomic_load(&pr.task_ended) &&
              s >= pr.threads + direct + (wrapped > 0) &&
              (wrapped > 0 || s == pr.threads + direct),
              "on_task_start and on_task_end did not each run once for "
              "every task the pool ran", NULL);
    }
    /* one worker: the highest level first, each in submission order */
    for (unsigned i = 1; pr.threads == 1 && i < direct; i++) {
        const struct ptask *x = &pr.task[pr.log[i - 1]];
        const struct ptask *y = &pr.task[pr.log[i]];

        CHECK(x->level < y->level || (x->level == y->level && x->seq < y->seq),
              "a pool's one worker did not take the highest level's oldest "
              "task first", NULL);
    }
    CHECK(serex_executor_stats(pr.pool, &a) == SEREX_OK &&
          serex_executor_stats(pr.face[SEREX_POOL_PRIORITY_LOW], &b) ==
              SEREX_OK && a.submitted == b.submitted &&
          a.completed == b.completed && a.rejected == b.rejected &&
          a.queued == 0 && b.queued == 0, "stats of a face are not its "
          "pool's", NULL);
}

/* Ends the round by @mode (see pool_round); @high: mode 2's face is
 * HIGH's, else LOW's. shutdown_now, with the workers held, hands back
 * every task waiting, the highest level first, each in submission order;
 * a wrapper's drain goes back to its wrapper (promise 2a), whose own
 * shutdown_now then hands back its tasks, in order (promise 5). */
static void pool_round_end(unsigned mode, bool high)
{
    serex_executor *face = pr.face[high ? SEREX_POOL_PRIORITY_HIGH
                                        : SEREX_POOL_PRIORITY_LOW];
    struct ptask *spare = &pr.task[NPOOL_TASKS];
    size_t n, direct = 0, drains;

    if (mode == 1 || mode == 2) {
        drains = (pr.ser_wait > 0) + (pr.key_wait[0] > 0) +
                 (pr.key_wait[1] > 0);
        for (unsigned i = 0; i < pr.ntask; i++)
            direct += pr.task[i].route == PR_DIRECT;
        n = serex_shutdown_now(mode == 1 ? pr.pool : face, pr_pending, &pr);
        CHECK(pr.nback == direct && n >= direct && n <= direct + drains,
              "shutdown_now of a pool (or of its face) did not hand back "
              "every task waiting at every level (promise 2)", NULL);
        if (pr.ser != NULL)
            CHECK(serex_shutdown_now(pr.ser, pr_pending, &pr) == pr.ser_wait,
                  "a serial whose drain its pool took back did not hand "
                  "back its tasks (promise 5)", NULL);
        if (pr.st != NULL)
            CHECK(serex_shutdown_now(serex_striped_executor(pr.st),
                                     pr_pending, &pr) ==
                      pr.key_wait[0] + pr.key_wait[1],
                  "a striped whose drains its pool took back did not hand "
                  "back its tasks (promise 5)", NULL);
        CHECK(pr.nback == pr.ntask, "shutdown_now left a pool round's task "
              "neither run nor handed back (promise 1)", NULL);
    } else if (mode == 3) {
        serex_shutdown(high ? face : pr.pool);
        memset(spare, 0, sizeof *spare);
        CHECK(serex_execute(pr.face[pr.ntask % SEREX_POOL_PRIORITIES],
                            pool_task, spare) == SEREX_EREJECTED,
              "a face of a pool shut down did not say EREJECTED", NULL);
    }
    pr_release(mode != 0);
    if (pr.ser != NULL)
        CHECK(serex_destroy(pr.ser) == SEREX_OK, "destroy of a serial over "
              "a face failed", NULL);
    if (pr.st != NULL)
        CHECK(serex_destroy(serex_striped_executor(pr.st)) == SEREX_OK,
              "destroy of a striped over a face failed", NULL);
    if (mode == 0)
        serex_shutdown(face); /* a face's shutdown is its pool's */
    CHECK(serex_await_termination(mode & 1 ? pr.pool : face, POOL_WAIT_NS) ==
              SEREX_OK, "a pool (awaited through a face, or itself) did not "
              "terminate once shut down with every worker free", NULL);
}

/*
 * The pool round, from bytes @a, @b, @c and @b & 15 task bytes:
 * a: threads 1 + (a & 1); queue_capacity {0, 1, 2, 4}[(a >> 1) & 3]; the
 *    start hook refuses index 0 ((a >> 3) & 3 == 2) or the last (3);
 *    task hooks if a & 32; the end (a >> 6): 0 release and run, 1
 *    shutdown_now of the pool, 2 of a face (HIGH if b & 128, else LOW),
 *    3 shutdown, then release and run;
 * b: tasks b & 15; a serial (b & 16) and a striped (b & 32) over faces;
 *    blocker 0 probes execute_wait (b & 64);
 * c: the serial's level c % 3 (an unbounded serial when (c >> 4) & 3 is
 *    0, else that capacity), the striped's (c >> 2) % 3 (no capacity).
 */
static void pool_round(uint8_t a)
{
    static const size_t caps[4] = {0, 1, 2, 4};
    uint8_t b = next_byte(), c = next_byte(), t[NPOOL_TASKS];
    unsigned n = b & 15, mode = a >> 6;
    serex_serial_config cfg = fz.wcfg;

    for (unsigned i = 0; i < n; i++)
        t[i] = next_byte();
    if (fz.pool_rounds >= MAX_POOL_ROUNDS || fz.depth > 0)
        return;
    fz.pool_rounds++;
    alloc_fail(0);
    memset(&pr, 0, sizeof pr);
    atomic_store(&pr.fail, NULL);
    pr.threads = 1 + (a & 1);
    pr.cap = caps[(a >> 1) & 3];
    pr.refuse = ((a >> 3) & 3) == 2 ? 0 : ((a >> 3) & 3) == 3 ? pr.threads - 1
                                                              : 2;
    pr.task_hooks = a & 32;
    pr.probe = b & 64;
    pr.ser_level = (uint8_t)(c % 3);
    pr.st_level = (uint8_t)((c >> 2) % 3);
    pr.scap = (c >> 4) & 3;
    if (fz.trace)
        fprintf(stderr, "  pool round: %u threads, capacity %zu, %u tasks, "
                "end %u\n", pr.threads, pr.cap, n, mode);
    CHECK(serex_event_create(&pr.ev) == SEREX_OK &&
          serex_event_create(&pr.release[0]) == SEREX_OK &&
          serex_event_create(&pr.release[1]) == SEREX_OK,
          "event_create failed", NULL);
    if (pr_create()) {
        pr_faces();
        pr_hold();
        cfg.queue_capacity = pr.scap;
        if (b & 16)
            CHECK(serex_serial_create(pr.face[pr.ser_level], &cfg, &pr.ser) ==
                  SEREX_OK, "serial_create over a face failed", NULL);
        cfg.queue_capacity = 0;
        if (b & 32)
            CHECK(serex_striped_create(pr.face[pr.st_level], &cfg, &pr.st) ==
                  SEREX_OK, "striped_create over a face failed", NULL);
        for (unsigned i = 0; i < n; i++)
            pr_submit(t[i]);
        pool_round_end(mode, b & 128);
        pr_check(mode == 1 || mode == 2);
        if (fz.trace)
            fprintf(stderr, "  pool round: %u tasks accepted (%u direct "
                    "ran), %u handed back, probe %s, %lu task hooks\n",
                    pr.ntask, atomic_load(&pr.nlog), pr.nback,
                    pr.probe ? serex_strerror(pr.probe_rc) : "none",
                    atomic_load(&pr.task_started));
        CHECK(serex_destroy(pr.pool) == SEREX_OK, "pool destroy failed",
              NULL);
    }
    serex_event_destroy(pr.ev);
    serex_event_destroy(pr.release[0]);
    serex_event_destroy(pr.release[1]);
}

/* --- decoding --- */

static void op_schedule(void)
{
    uint8_t k = next_byte(), lo = next_byte(), hi = next_byte();
    uint8_t p = next_byte(), act = next_byte(), arg = next_byte();

    schedule_new(k % 3, (k / 3) % (2 + NSERIAL) - 1, (int64_t)(lo | hi << 8),
                 256 * (int64_t)(1 + p), (k / 15) % 4 != 3, act % 16, arg, -1);
}

/* A fixed-rate timer with policy k & 3 (serex_schedule_fixed_rate_missed)
 * on target (k >> 2) % 5 - 1; handle kept unless k >> 5 is 7. */
static void op_schedule_missed(uint8_t k)
{
    uint8_t lo = next_byte(), hi = next_byte(), p = next_byte();
    uint8_t act = next_byte(), arg = next_byte();

    schedule_new(1, (k >> 2) % (2 + NSERIAL) - 1, (int64_t)(lo | hi << 8),
                 256 * (int64_t)(1 + p), (k >> 5) != 7, act % 16, arg, k & 3);
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

/* Issue 23's operations, each with its first argument byte @a. */
static void op_cancel(enum op op, uint8_t a)
{
    uint8_t b, lo, hi;

    switch (op) {
    case OP_TOK_CREATE: tok_create(a); break;
    case OP_TOK_REQUEST: tok_request(a & 7, a >> 3); break;
    case OP_TOK_DEADLINE:
        lo = next_byte();
        hi = next_byte();
        tok_deadline(a, (int64_t)(lo | hi << 8));
        break;
    case OP_TOK_ON_CANCEL: tok_on_cancel(a, next_byte()); break;
    case OP_TOK_UNREGISTER: tok_unregister(a); break;
    case OP_TOK_RELEASE: tok_release(a); break;
    case OP_SUBMIT_ERR: /* a future whose call sets err_codes[b & 7] */
        b = next_byte();
        if (b & 16)
            group_exec((b >> 3) & 1, true, a, NACT, 0, (uint8_t)(1 + (b & 7)));
        else
            submit_new(a, (uint8_t)(1 + (b & 7)));
        break;
    case OP_PROMISE:
        b = next_byte();
        switch (a & 3) {
        case 0: promise_create(); break;
        case 1: promise_end(b, false, 0); break;
        case 2: promise_end(b, true, causes[(a >> 2) & 7]); break;
        default: promise_end(b, true, err_codes[(a >> 2) & 7]); break;
        }
        break;
    case OP_CANCEL_ON: cancel_on(a, next_byte()); break;
    case OP_FUTURE_DEADLINE:
        lo = next_byte();
        hi = next_byte();
        future_deadline(a, (int64_t)(lo | hi << 8));
        break;
    case OP_WAIT_TOKEN: wait_token(a, next_byte()); break;
    case OP_COMBINE: combine(a); break;
    case OP_GROUP_CREATE_CONFIG: group_create_config(a); break;
    case OP_GROUP_LIFE: group_life(a); break;
    default: bad_input3(a); break;
    }
}

/* The 0.2.0 operations, each with its first argument byte @a. */
static void op_new(enum op op, uint8_t a)
{
    switch (op) {
    case OP_ON_DONE: cont_new(K_ONDONE, a, next_byte()); break;
    case OP_THEN: cont_new(K_THEN, a, next_byte()); break;
    case OP_GROUP_CREATE: group_create(a); break;
    case OP_GROUP_EXEC: {
        uint8_t act = next_byte(), arg = next_byte();

        group_exec(a % NGROUP, a & 2, a >> 2, act % 16, arg, 0);
        break;
    }
    case OP_GROUP_ENTER_LEAVE: group_enter_leave(a); break;
    case OP_GROUP_NOTIFY: group_notify(a % NGROUP, a >> 1); break;
    case OP_GROUP_CANCEL: group_cancel(a % NGROUP); break;
    case OP_GROUP_WAIT: group_wait_op(a % NGROUP, a & 2); break;
    case OP_LIMITER_CREATE: limiter_create(a); break;
    case OP_SCHEDULE_MISSED: op_schedule_missed(a); break;
    case OP_RUN_UNTIL: run_until(a, next_byte()); break;
    case OP_BAD_INPUT2: bad_input2(a); break;
    case OP_BX_CREATE: bx_create(a); break;
    case OP_BX_EXEC: {
        uint8_t act = next_byte(), arg = next_byte();

        bx_exec(a, act % 16, arg);
        break;
    }
    case OP_BX_LIFE: bx_life(a); break;
    case OP_POOL_ROUND: pool_round(a); break;
    default: op_cancel(op, a); break;
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
    case OP_RUN_HANDED_BACK: return; /* nothing comes back (promise 2a) */
    default: break;
    }
    a = next_byte();
    if (op >= OP_ON_DONE) {
        op_new(op, a);
        return;
    }
    switch (op) {
    case OP_SERIAL_CREATE: serial_create(a); break;
    case OP_STRIPED_CREATE: striped_create(a); break;
    case OP_WRAPPER_DESTROY: wrapper_destroy(a); break;
    case OP_SUBMIT: submit_new(a, 0); break;
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
    static const serex_pending_policy policies[4] = {
        SEREX_PENDING_FIRE, SEREX_PENDING_HAND_BACK, SEREX_PENDING_DROP,
        SEREX_PENDING_FIRE};
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
    cfg.max_timers = fz.max_timers = caps[b >> 6];
    cfg.on_rejected = on_rejected;
    /* A periodic run its target refused for want of room (here only
     * SEREX_ENOMEM, from an armed allocation failure: no timer's target
     * is bounded) ends the timer, its task to on_rejected, as the model
     * (on_rejected, timer_ran) has it. The default, SEREX_REFUSED_MISS,
     * would count the miss in serex_scheduler_rejected without calling
     * on_rejected, and fold it into the next run's serex_timer_overrun:
     * the model cannot see which timer missed. */
    cfg.periodic_refused = SEREX_REFUSED_END;
    b = next_byte();
    fz.wcfg.batch = b & 3;
    cfg.on_shutdown = fz.on_shutdown = policies[(b >> 2) & 3];
    CHECK(serex_manual_create(&fz.manual) == SEREX_OK,
          "manual_create failed", NULL);
    /* issue 23: witnesses' executor, shut down: what is posted there runs
     * at once where it is posted (promise 2a) */
    CHECK(serex_manual_create(&fz.sink) == SEREX_OK, "manual_create failed",
          NULL);
    serex_shutdown(fz.sink);
    for (unsigned s = 0; s < NTOK; s++)
        fz.tslot[s] = -1;
    for (unsigned g = 0; g < NGROUP; g++)
        fz.grp[g].node = -1;
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
            n += r->gcancelled;
            CHECK(n == 1 || (n == 0 && r->maybe_dropped),
                  "a task was lost: "
                  "it never ran nor came back (promise 1)",
                  r);
            break;
        case K_ONESHOT:
            n += r->cancelled;
            CHECK(n == 1 || (n == 0 && r->maybe_dropped),
                  "a one-shot timer "
                  "was lost: it never ran, came back, nor was cancelled",
                  r);
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
        case K_THEN:
            CHECK(r->runs == (fut_value(&fz.recs[r->src]) && !r->cancel_said),
                  "a then-future's call ran though its future was "
                  "cancelled, or never ran though its future ran",
                  r);
            break;
        case K_ONDONE:
            CHECK(r->runs == 1, "an on_done continuation never ran", r);
            break;
        case K_NOTE:
            CHECK(r->runs == 1, "a group notification never ran", r);
            break;
        case K_CB:
            CHECK(r->runs == (r->fired && r->unreg != 1),
                  "an on_cancel callback did not run exactly once after its "
                  "token was cancelled (or ran after unregister said true)",
                  r);
            break;
        case K_WITNESS:
            CHECK(r->runs == 1,
                  "a future never ended: its continuation "
                  "never ran",
                  r);
            break;
        case K_PROMISE:
        case K_COMB:
            CHECK(future_ended(r),
                  "a promise (broken at the latest when "
                  "released) or an all/any (all its inputs ended) never "
                  "ended",
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
    static const char *const names[NKINDS] = {
        "unused",  "exec",    "gate",      "oneshot", "rate",    "delay",
        "send",    "recv",    "future",    "then",    "on_done", "notify",
        "promise", "all_any", "on_cancel", "witness", "watch"};
    unsigned long n[NKINDS] = {0}, runs[NKINDS] = {0}, backs[NKINDS] = {0};
    unsigned long canc[NKINDS] = {0}, grp = 0, gcanc = 0;

    for (size_t i = 0; i < fz.nrecs; i++) {
        const struct rec *r = &fz.recs[i];

        n[r->kind]++;
        runs[r->kind] += r->runs;
        backs[r->kind] += r->backs;
        canc[r->kind] += r->cancelled;
        grp += r->gid != 0 && r->kind != K_NOTE && r->kind != K_UNUSED;
        gcanc += r->gcancelled;
    }
    for (int k = 0; k < NKINDS; k++)
        if (n[k] > 0)
            fprintf(stderr, "  %-7s %4lu tasks: %lu runs, %lu back, %lu "
                    "cancelled\n", names[k], n[k], runs[k], backs[k],
                    canc[k]);
    fprintf(stderr, "  clock %lld ns, %lu rejected\n",
            (long long)serex_scheduler_now(fz.sched),
            (unsigned long)fz.rejected);
    if (fz.bx_calls[0] + fz.bx_calls[1] + fz.bx_calls[2] + fz.bx_calls[3] +
        fz.bx_calls[4])
        fprintf(stderr, "  bounded: %lu accepted, %lu EFULL, %lu ETIMEDOUT, "
                "%lu EDEADLK, %lu other\n", fz.bx_calls[0], fz.bx_calls[1],
                fz.bx_calls[2], fz.bx_calls[3], fz.bx_calls[4]);
    if (fz.used23)
        fprintf(stderr,
                "  issue 23: %u tokens, %lu requests, %lu deadlines fired, "
                "%lu callbacks run, %lu linked futures ended, %lu errors "
                "set, %lu promises ended, %lu all/any ended, %lu joins "
                "refused\n",
                fz.ntoks, fz.n23[0], fz.n23[1], fz.n23[2], fz.n23[3], fz.n23[4],
                fz.n23[5], fz.n23[6], fz.n23[7]);
    if (grp + fz.gids + fz.lim_peak + fz.handed > 0)
        fprintf(stderr,
                "  %u groups, %lu group tasks (%lu group-cancelled), "
                "limiter peak %u, %lu handed back at shutdown\n",
                (unsigned)fz.gids, grp, gcanc, fz.lim_peak,
                (unsigned long)fz.handed);
}

/* Teardown, part 1: shut everything down and run what is left, so every
 * task has run or come back. Limiters go before the serials under them,
 * and every enter is left. */
static void teardown_drain(void)
{
    alloc_fail(0);
    fz.ctx = CTX_TOP;
    for (unsigned g = 0; g < NGROUP; g++)
        while (fz.grp[g].g != NULL && fz.grp[g].enters > fz.grp[g].leaves) {
            fz.grp[g].leaves++;
            serex_group_leave(fz.grp[g].g);
        }
    for (unsigned g = 0; g < NGATE; g++)
        gate_destroy(g);
    for (unsigned c = 0; c < NCHAN; c++)
        if (fz.chan[c] != NULL)
            chan_drain(c);
    fz.shut_sched = true;
    fz.snows++;
    deadlines_drop();
    serex_shutdown_now(serex_scheduler_executor(fz.sched), on_pending, NULL);
    periodic_stop_all(STOP_SHUTDOWN);
    settle();
    for (unsigned w = X_LIM0; w < NX; w++) {
        wrapper_shutdown_now(w);
        settle();
    }
    for (unsigned w = 0; w < X_LIM0; w++) {
        wrapper_shutdown_now(w);
        settle();
    }
    for (unsigned b = 0; b < NBX; b++) {
        bx_shutdown(&fz.bx[b], true);
        settle();
    }
    fz.shut_manual = true;
    fz.snows++;
    serex_shutdown_now(fz.manual, on_pending, NULL);
    settle();
}

/* Teardown, part 2: the end-of-run checks, then free everything. */
static void teardown_check(void)
{
    /* a promise not completed breaks as it is released (SEREX_ECANCELED):
     * all/any over it end then */
    for (unsigned i = 0; i < NFUT; i++)
        if (fz.fut[i].f != NULL && fz.fut[i].r->kind == K_PROMISE)
            future_release(i);
    for (unsigned i = 0; i < NFUT; i++) {
        if (fz.fut[i].f != NULL)
            CHECK(future_check(i) != 1,
                  "a future never "
                  "completed: its task was lost (or an all/any never "
                  "ended though its inputs did)",
                  fz.fut[i].r);
        future_release(i);
    }
    for (unsigned k = 0; k < NGRAVE; k++) {
        serex_future *h = fz.grave[k].f;

        if (h == NULL)
            continue;
        CHECK(fut_observe(fz.grave[k].r, h, serex_future_wait(h, 0),
                          serex_future_error(h)) != 1,
              "a future never completed", fz.grave[k].r);
        serex_future_release(h);
        fz.grave[k].f = NULL;
        fz.grave[k].r = NULL;
    }
    for (unsigned i = 0; i < NTIMER; i++)
        timer_release(i);
    /* Every executor is shut down and drained by now, so a future (or
     * then-future) whose call never ran ended cancelled, even one released
     * before it ended, that no wait or continuation told us of (its task
     * taken back by a shutdown_now, promise 2a): its then-futures are
     * cancelled too, and post nothing to their targets, which can go. */
    for (size_t i = 0; i < fz.nrecs; i++)
        if ((fz.recs[i].kind == K_FUTURE || fz.recs[i].kind == K_THEN) &&
            fz.recs[i].runs == 0)
            future_cancelled(&fz.recs[i]);
    /* every callback posted has run (its target drained, or it ran where
     * it was dropped): unregister says false for it, true for the others */
    for (unsigned k = 0; k < NREG; k++) {
        struct rec *r = fz.reg[k].r;

        if (r == NULL)
            continue;
        CHECK(!r->fired || r->runs == 1,
              "an on_cancel callback never ran "
              "though its token was cancelled",
              r);
        tok_unregister(k);
    }
    for (unsigned s = 0; s < NTOK; s++)
        tok_release(s);
    for (unsigned i = 0; i < NSEL; i++)
        check_terminated(sel_ex(i));
    for (unsigned b = 0; b < NBX; b++) {
        if (fz.bx[b].ex == NULL)
            continue;
        check_terminated(fz.bx[b].ex);
        CHECK(fz.bx[b].waiting == 0 && fz.bx[b].keyless == 0, "a bounded "
              "executor's task never ran nor came back (promise 1)", NULL);
        bx_destroy(&fz.bx[b]);
        CHECK(fz.bx[b].ex == NULL, "a terminated bounded executor could not "
              "be destroyed", NULL);
    }
    for (unsigned g = 0; g < NGROUP; g++) {
        int w;

        if (fz.grp[g].g == NULL)
            continue;
        /* GW_UNSURE: its error is SEREX_ETIMEDOUT, and the model says it
         * is empty (a destroy of a group that is not stops the program) */
        w = group_wait_check(g);
        CHECK(w == GW_EMPTY || w == GW_UNSURE,
              "a group is not empty after "
              "everything ran or came back",
              NULL);
        hooks_kill(H_GROUP, (int16_t)fz.grp[g].gid);
        serex_group_destroy(fz.grp[g].g);
        fz.grp[g].g = NULL;
    }
    check_recs();
    if (fz.trace)
        trace_summary();
    CHECK(serex_scheduler_rejected(fz.sched) == fz.rejected, "the "
          "scheduler's rejected count disagrees with on_rejected", NULL);
    CHECK(serex_destroy(serex_scheduler_executor(fz.sched)) == SEREX_OK,
          "scheduler destroy failed", NULL);
    for (unsigned w = X_LIM0; w < NX; w++)
        wrapper_destroy(w);
    for (unsigned w = 0; w < X_LIM0; w++)
        wrapper_destroy(w);
    for (unsigned w = 0; w < NX; w++)
        CHECK(wrapper_ex(w) == NULL,
              "a terminated wrapper could not be "
              "destroyed",
              NULL);
    CHECK(serex_destroy(fz.manual) == SEREX_OK, "manual destroy failed",
          NULL);
    CHECK(serex_destroy(fz.sink) == SEREX_OK, "manual destroy failed", NULL);
    for (unsigned c = 0; c < NCHAN; c++)
        serex_channel_destroy(fz.chan[c]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup(data, size);
    while (fz.pos < fz.len && fz.op < MAX_OPS) {
        uint8_t b = next_byte();

        fz.op++;
        fuzz_op((enum op)(b % NOPS));
        mcheck_top();
    }
    teardown_drain();
    teardown_check();
#ifndef SEREX_FUZZ_NO_ALLOC_FAIL
    /* the next input starts with empty caches, as the first one does (the
     * pool round's workers left theirs in the depot when they exited) */
    serex__cache_trim();
#endif
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
