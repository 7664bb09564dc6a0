/* SPDX-License-Identifier: MIT */
/*
 * soak.c - a random mix of every operation, from several threads at once,
 * for a given time, checking every invariant it can see:
 *   serial      each producer's tasks run in its order (promise 3)
 *   striped     per key, each producer's tasks run in its order; lanes are
 *               all freed at the end (promises 3, 9)
 *   timers      never early; a one-shot runs exactly once unless cancel
 *               said true; periodic runs never overlap (promise 6)
 *   futures     wait says OK with the right value, or ECANCELED only if
 *               cancel said true
 *   channel     every item arrives once, each producer's in order
 *   gate        every parked task runs once after the gate opens
 *   on_done     0-3 continuations on a future run once each, on the pool
 *               or a serial, and see its outcome at once (wait(f, 0));
 *               those on one serial run in the order they were added
 *   then        a chain of 0-2 then-futures: each call runs with the
 *               value before it, or the future says ECANCELED exactly
 *               when a future above it in the chain was cancelled
 *   group       2-8 tasks (and futures) across the pool, serials, the
 *               striped's face and the limiter, with an enter held while
 *               they are added and a notify that finds every task ended
 *               (ran + cancelled + handed back = accepted); sometimes a
 *               group cancel, or a private serial whose shutdown_now hands
 *               the group's tasks back; wait(0) from a task of the group
 *               says EDEADLK; every future of the group answers wait(0)
 *               once group_wait said OK
 *   limiter     a limiter of 3 over the pool (of at least 4 threads), fed
 *               by every producer at once: never more than 3 of its tasks
 *               (its continuations included) inside their fn at once
 *   bserial     a serial of queue_capacity 8 over the pool's HIGH face:
 *               execute (SEREX_EFULL when full), execute_wait with a short
 *               timeout (SEREX_ETIMEDOUT, never EFULL) and SEREX_FOREVER
 *               (always OK: producers are no tasks), each producer's tasks
 *               in its order; from a task of the pool, execute_wait says
 *               SEREX_EDEADLK every time, room or not; never more than the
 *               capacity waiting (below)
 *   bstriped    a striped of queue_capacity 16, lane_capacity 3 over the
 *               HIGH face, 8 keys: the same, per key
 *   face        tasks through the pool's HIGH, NORMAL and LOW faces, and
 *               a serial over LOW whose tasks keep each producer's order
 *   pool        now and then a pool of its own (1-2 threads, maybe
 *               queue_capacity 4) with thread and task hooks, tasks on
 *               every face, then shutdown or shutdown_now (of the pool or
 *               a face): what comes back comes highest level first, each
 *               level in submission order; each thread's on_thread_start
 *               has its on_thread_stop by the time await_termination says
 *               OK; on_task_start = on_task_end = tasks run; sometimes a
 *               start hook refuses a core thread: create says
 *               SEREX_EREJECTED, and every other thread got its stop
 *   token       a token (with a deadline on the scheduler, maybe a child),
 *               on_cancel callbacks and a group's futures linked to it by
 *               cancel_on (some with a deadline of their own), a request
 *               racing the deadline: a future that says its token's cause
 *               never ran; a callback runs once, after the cancel, and
 *               unregister says true exactly for one that never runs
 *   all_any     serex_future_all / _any over futures that may set errors,
 *               with or without CANCEL_REST: the outcome is an input's
 *               value or error as each promises; an input says ECANCELED
 *               only under CANCEL_REST, and then never ran
 *   ffgroup     a fail-fast group (maybe the child of a token with a
 *               deadline): wait says its first error, a closed group
 *               refuses, and a future of it says ECANCELED only once the
 *               group failed, and then never ran
 * and at the end, for each kind, accepted = ran + cancelled + handed back
 * (promise 1); for the bounded kinds and the pool rounds, accepted +
 * refused (EFULL, ETIMEDOUT, EDEADLK) = attempted; the main pool's hooks
 * ran once per thread and once per task.
 *
 * "Never more than the capacity waiting": a counter goes up after each
 * accepted execute returns and down as each task starts, so it is never
 * above the tasks waiting plus those taken off the queue and not started
 * yet (one per serial or lane, one per worker across a striped): above
 * that bound, more tasks waited than the capacity.
 *
 *   soak [--seconds N] [--threads T] [--seed S]      (default 10 s, 4, 42)
 *
 * The environment variable SEREX_SOAK_SECONDS sets the default time. CI
 * runs it for 3 s in every build, TSan's included (CTest test `soak`,
 * label stress). For hours: build Release or TSan and run e.g.
 * `build-test/tsan/tests/soak --seconds 14400 --threads 8`; it prints the
 * counts per kind at the end and exits 1 on any violation.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <serex/serex.h>

#include "thread_internal.h" /* threads TSan can see */

#define MAXP 16
#define NKEYS 64
#define NPERIODIC 32 /* per producer */

#define LIMIT 3         /* the limiter's max_running */
#define BCAP 8          /* the bounded serial's queue_capacity */
#define BSQCAP 16       /* the bounded striped's queue_capacity */
#define BSLCAP 3        /* its lane_capacity */
#define NBKEYS 8        /* its keys */
#define NESTED MAXP     /* the producer of a submission made by a task */
#define MAX_ROUND 32    /* tasks in one pool round */
#define MAX_GROUP 8     /* tasks in one group round */
#define MAX_GROUP_FUT 4 /* of them futures */

enum kind {
    K_SERIAL,
    K_STRIPED,
    K_TIMER,
    K_PERIODIC,
    K_FUTURE,
    K_CHANNEL,
    K_GATE,
    K_ONDONE,
    K_THEN,
    K_GROUP,
    K_LIMITER,
    K_BSERIAL,
    K_BSTRIPED,
    K_FACE,
    K_POOL,
    K_TOKEN,   /* issue 23: a token round (do_token) */
    K_COMBINE, /* serex_future_all / _any (do_combine) */
    K_FFGROUP, /* a fail-fast group (do_ffgroup) */
    NKINDS
};
static const char *kind_name[NKINDS] = {
    "serial",   "striped", "timer", "periodic", "future",  "channel",
    "gate",     "on_done", "then",  "group",    "limiter", "bserial",
    "bstriped", "face",    "pool",  "token",    "all_any", "ffgroup"};

static struct {
    serex_executor *pool, *serial, *consumer, *lim;
    serex_executor *face[SEREX_POOL_PRIORITIES], *bserial, *low_serial;
    serex_striped *striped, *bstriped;
    serex_scheduler *sched;
    serex_channel *ch;
    serex_gate *gate;
    serex_event *drained;
    unsigned producers;
    int64_t end_ns;
    _Atomic uint64_t accepted[NKINDS], ran[NKINDS], cancelled[NKINDS];
    _Atomic uint64_t back[NKINDS]; /* handed back (on_pending) */
    _Atomic uint64_t violations;
    _Atomic int lim_inside, lim_max; /* the limiter's tasks inside fn */
    _Atomic uint64_t group_rounds, groups_cancelled, groups_dropped;
    /* the bounded kinds and the pool rounds: tries, and those refused */
    _Atomic uint64_t attempted[NKINDS], refused[NKINDS];
    /* accepted and returned, minus started (see the top); their peaks */
    _Atomic long bser_waiting, bstr_waiting, bstr_lane[NBKEYS];
    _Atomic long bser_peak, bstr_peak;
    _Atomic uint64_t deadlocks; /* EDEADLK said to a task (full) */
    _Atomic unsigned nested_out; /* tasks that submit: out on the pool */
    _Atomic uint64_t pool_rounds, pool_refused, pool_taken_back;
    /* the main pool's hooks */
    unsigned threads;
    _Atomic unsigned thread_starts, thread_stops;
    _Atomic uint64_t task_starts, task_ends;
    /* plain: each read and written only by tasks a serial or a lane
     * orders one after another */
    uint64_t serial_last[MAXP];
    uint64_t striped_last[NKEYS][MAXP];
    uint64_t channel_last[MAXP];
    uint64_t bserial_last[MAXP], bstriped_last[NBKEYS][MAXP];
    uint64_t low_last[MAXP];
} g;

struct rec {
    unsigned producer;
    unsigned key;
    uint64_t seq;
    int64_t due;
    _Atomic int in_run; /* periodic: runs never overlap */
};

static void violation(const char *what)
{
    if (atomic_fetch_add(&g.violations, 1) < 10)
        fprintf(stderr, "soak: violation: %s\n", what);
}

static void must(int rc, const char *what)
{
    if (rc != SEREX_OK) {
        fprintf(stderr, "soak: %s: %s\n", what, serex_strerror(rc));
        exit(2);
    }
}

static void ran(enum kind k)
{
    atomic_fetch_add_explicit(&g.ran[k], 1, memory_order_relaxed);
}

static uint64_t rnd(uint64_t *x)
{
    *x = *x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
    return *x >> 33;
}

static struct rec *rec_new(unsigned producer, uint64_t seq)
{
    struct rec *r = calloc(1, sizeof *r);

    if (r == NULL) {
        fprintf(stderr, "soak: out of memory\n");
        exit(2);
    }
    r->producer = producer;
    r->seq = seq;
    return r;
}

/* --- the tasks --- */

static void serial_task(void *arg)
{
    struct rec *r = arg;

    if (r->seq <= g.serial_last[r->producer])
        violation("serial out of order");
    g.serial_last[r->producer] = r->seq;
    ran(K_SERIAL);
    free(r);
}

static void striped_task(void *arg)
{
    struct rec *r = arg;

    if (r->seq <= g.striped_last[r->key][r->producer])
        violation("striped key out of order");
    g.striped_last[r->key][r->producer] = r->seq;
    ran(K_STRIPED);
    free(r);
}

static void timer_task(void *arg)
{
    struct rec *r = arg;

    if (serex_scheduler_now(g.sched) < r->due)
        violation("timer early");
    ran(K_TIMER);
    free(r);
}

static void periodic_task(void *arg)
{
    struct rec *r = arg;

    if (atomic_fetch_add(&r->in_run, 1) != 0)
        violation("periodic runs overlap");
    if (serex_scheduler_now(g.sched) < r->due)
        violation("periodic run early");
    atomic_fetch_sub(&r->in_run, 1);
    ran(K_PERIODIC);
}

static void *future_call(void *arg)
{
    return (char *)arg + 1;
}

static void sent_task(void *arg)
{
    (void)arg;
}

static void on_item(void *item, void *arg);

static void consumer_recv(void)
{
    if (serex_channel_recv(g.ch, g.consumer, on_item, NULL) != SEREX_OK)
        violation("recv failed");
}

static void on_item(void *item, void *arg)
{
    struct rec *r = item;

    (void)arg;
    if (r == NULL) { /* closed and drained */
        serex_event_signal(g.drained);
        return;
    }
    if (r->seq <= g.channel_last[r->producer])
        violation("channel out of order");
    g.channel_last[r->producer] = r->seq;
    ran(K_CHANNEL);
    free(r);
    consumer_recv();
}

static void gate_task(void *arg)
{
    ran(K_GATE);
    free(arg);
}

/* --- the limiter: never more than LIMIT of its tasks inside at once --- */

static void lim_enter(void)
{
    int in = atomic_fetch_add(&g.lim_inside, 1) + 1;
    int max = atomic_load_explicit(&g.lim_max, memory_order_relaxed);

    while (in > max && !atomic_compare_exchange_weak(&g.lim_max, &max, in))
        ;
    if (in > LIMIT)
        violation("more than 3 tasks of the limiter ran at once");
}

static void lim_leave(void)
{
    atomic_fetch_sub(&g.lim_inside, 1);
}

static void lim_task(void *arg)
{
    (void)arg;
    lim_enter();
    for (int i = 0; i < 256; i++) /* long enough for others to pile up */
        serex__cpu_relax();
    lim_leave();
    ran(K_LIMITER);
}

/* --- continuations: serex_future_on_done and serex_future_then --- */

/* A future some continuations look at: the last holder releases it. */
struct fut_ctx {
    serex_future *f;
    void *expect;         /* its call's value */
    _Atomic int refs;     /* the producer's and one per continuation */
    uint64_t serial_last; /* plain: only g.serial's tasks touch it */
};

struct cont {
    struct fut_ctx *ctx;
    uint64_t seq;   /* 1 + its place among the future's */
    bool on_serial; /* posted to g.serial: runs in add order */
    bool on_lim;    /* posted to the limiter: counts as its task */
};

static void fut_ctx_unref(struct fut_ctx *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1) {
        serex_future_release(c->f);
        free(c);
    }
}

static void cont_task(void *arg)
{
    struct cont *c = arg;
    int rc;

    if (c->on_lim)
        lim_enter();
    rc = serex_future_wait(c->ctx->f, 0); /* the outcome is there */
    if (rc == SEREX_OK) {
        if (serex_future_value(c->ctx->f) != c->ctx->expect)
            violation("on_done: the future's value is wrong");
    } else if (rc != SEREX_ECANCELED) {
        violation("on_done: wait(f, 0) did not give the outcome at once");
    }
    if (c->on_serial) {
        if (c->seq <= c->ctx->serial_last)
            violation("on_done: continuations of one future ran on one "
                      "serial out of the order they were added");
        c->ctx->serial_last = c->seq;
    }
    if (c->on_lim)
        lim_leave();
    ran(K_ONDONE);
    fut_ctx_unref(c->ctx);
    free(c);
}

static void *plus_one(void *value) /* a then's call: the value before + 1 */
{
    ran(K_THEN);
    return (char *)value + 1;
}

static void *plus_one_lim(void *value) /* the same, on the limiter */
{
    lim_enter();
    lim_leave();
    return plus_one(value);
}

/* --- groups --- */

/* One group round, on its producer's stack until its notify ran. */
struct ground {
    serex_group *grp;
    serex_event *noted; /* the notification ran (its producer's event) */
    unsigned n;         /* tasks the group accepted */
    size_t cancelled;   /* group_cancel's count */
    unsigned back;      /* handed back by the private serial */
    _Atomic unsigned ran;
    _Atomic int notes;
};

static void group_task(void *arg)
{
    struct ground *r = arg;

    if (atomic_load_explicit(&r->ran, memory_order_relaxed) % 4 == 0 &&
        serex_group_wait(r->grp, 0) != SEREX_EDEADLK)
        violation("group_wait from a task of the group did not say "
                  "EDEADLK");
    atomic_fetch_add(&r->ran, 1);
    ran(K_GROUP);
}

static void *group_call(void *arg)
{
    group_task(arg);
    return arg;
}

static void group_lim_task(void *arg)
{
    lim_enter();
    group_task(arg);
    lim_leave();
}

/* Posted once the group is empty: its tasks' writes, and those of the
 * producer before its leave (the counts), are visible here. */
static void group_note(void *arg)
{
    struct ground *r = arg;

    if (atomic_fetch_add(&r->notes, 1) != 0)
        violation("group notification ran twice");
    if (atomic_load(&r->ran) + r->cancelled + r->back != r->n)
        violation("group notification ran before every task ended "
                  "(ran + cancelled + handed back != accepted)");
    serex_event_signal(r->noted); /* r may be gone once it returns */
}

static void group_back(serex_fn fn, void *arg, void *ctx)
{
    struct ground *r = ctx;

    if (arg != r || (fn != group_task && fn != group_lim_task))
        violation("on_pending got a task that is not the group's");
    r->back++; /* on the producer's thread, inside its shutdown_now */
}

/* --- producers --- */

struct producer {
    unsigned id;
    uint64_t x;
    uint64_t seq[NKINDS];
    uint64_t key_seq[NKEYS];
    uint64_t bkey_seq[NBKEYS];
    serex_event *noted; /* its group rounds' notifications */
    struct rec *periodic[NPERIODIC];
    serex_timer *periodic_t[NPERIODIC];
    unsigned nperiodic;
};

static void accept(enum kind k, int rc, void *rec)
{
    if (rc == SEREX_OK) {
        atomic_fetch_add_explicit(&g.accepted[k], 1, memory_order_relaxed);
        return;
    }
    if (rc != SEREX_ENOMEM && rc != SEREX_EFULL)
        violation("an operation failed");
    free(rec);
}

static void do_timer(struct producer *p)
{
    struct rec *r = rec_new(p->id, 0);
    int64_t delay = (int64_t)(rnd(&p->x) % 2000000);
    serex_timer *t = NULL;
    bool handle = rnd(&p->x) % 2;
    int rc;

    r->due = serex_scheduler_now(g.sched) + delay;
    rc = serex_schedule(g.sched, rnd(&p->x) % 4 ? g.pool : NULL, delay,
                        timer_task, r, handle ? &t : NULL);
    accept(K_TIMER, rc, rc == SEREX_OK ? NULL : r);
    if (rc != SEREX_OK || t == NULL)
        return;
    if (rnd(&p->x) % 2 && serex_timer_cancel(t)) { /* it never runs */
        atomic_fetch_add(&g.cancelled[K_TIMER], 1);
        free(r);
    }
    serex_timer_release(t);
}

static void do_periodic(struct producer *p)
{
    unsigned i = p->nperiodic;
    struct rec *r;

    if (i > 0 && rnd(&p->x) % 2) { /* stop one; its record stays */
        i = (unsigned)(rnd(&p->x) % p->nperiodic);
        if (p->periodic_t[i] != NULL) {
            serex_timer_cancel(p->periodic_t[i]);
            serex_timer_release(p->periodic_t[i]);
            p->periodic_t[i] = NULL;
        }
        return;
    }
    if (i == NPERIODIC)
        return;
    r = p->periodic[i] = rec_new(p->id, 0);
    r->due = serex_scheduler_now(g.sched) + 100000;
    if (serex_schedule_fixed_rate(g.sched, g.pool, 100000, 300000,
                                  periodic_task, r, &p->periodic_t[i]) !=
        SEREX_OK)
        violation("fixed rate failed");
    p->nperiodic++;
}

/* A target for continuations: the pool, a serial, or the limiter. */
static serex_executor *cont_target(struct producer *p, bool *on_serial,
                                   bool *on_lim)
{
    switch (rnd(&p->x) % 4) {
    case 0: *on_serial = true; return g.serial;
    case 1: return g.consumer;
    case 2: *on_lim = true; return g.lim;
    default: return g.pool;
    }
}

/* 0-3 on_done continuations on @ctx's future. */
static void add_on_done(struct producer *p, struct fut_ctx *ctx)
{
    unsigned n = (unsigned)(rnd(&p->x) % 4);

    for (unsigned k = 0; k < n; k++) {
        struct cont *c = calloc(1, sizeof *c);
        serex_executor *target;
        int rc;

        if (c == NULL) {
            fprintf(stderr, "soak: out of memory\n");
            exit(2);
        }
        c->ctx = ctx;
        c->seq = k + 1;
        target = cont_target(p, &c->on_serial, &c->on_lim);
        atomic_fetch_add(&ctx->refs, 1);
        rc = serex_future_on_done(ctx->f, target, cont_task, c);
        accept(K_ONDONE, rc, rc == SEREX_OK ? NULL : c);
        if (rc != SEREX_OK)
            atomic_fetch_sub(&ctx->refs, 1); /* the producer's is left */
    }
}

static void do_future(struct producer *p)
{
    static char base[1];
    serex_future *f, *chain[2];
    struct fut_ctx *ctx;
    bool cancelled = false, chain_cancelled = false;
    unsigned nthen = (unsigned)(rnd(&p->x) % 3), made = 0;
    int rc = serex_submit(g.pool, future_call, base, &f);

    accept(K_FUTURE, rc, NULL);
    if (rc != SEREX_OK)
        return;
    if ((ctx = calloc(1, sizeof *ctx)) == NULL) {
        fprintf(stderr, "soak: out of memory\n");
        exit(2);
    }
    ctx->f = f;
    ctx->expect = base + 1;
    atomic_init(&ctx->refs, 1);
    add_on_done(p, ctx);
    for (serex_future *prev = f; made < nthen; prev = chain[made++]) {
        bool on_serial = false, on_lim = false;
        serex_executor *t = cont_target(p, &on_serial, &on_lim);

        rc = serex_future_then(prev, t, on_lim ? plus_one_lim : plus_one,
                               &chain[made]);
        accept(K_THEN, rc, NULL);
        if (rc != SEREX_OK)
            break;
    }
    if (rnd(&p->x) % 4 == 0)
        cancelled = serex_future_cancel(f);
    if (made > 0 && rnd(&p->x) % 8 == 0)
        chain_cancelled = serex_future_cancel(chain[0]);
    rc = serex_future_wait(f, SEREX_FOREVER);
    if (rc == SEREX_OK && serex_future_value(f) == base + 1 && !cancelled)
        ran(K_FUTURE);
    else if (rc == SEREX_ECANCELED && cancelled)
        atomic_fetch_add(&g.cancelled[K_FUTURE], 1);
    else
        violation("future");
    for (unsigned t = 0; t < made; t++) {
        /* cancelled exactly when a future above it was */
        bool dead = cancelled || chain_cancelled;

        rc = serex_future_wait(chain[t], SEREX_FOREVER);
        if (rc == SEREX_OK && !dead &&
            serex_future_value(chain[t]) == base + 2 + t)
            ; /* plus_one counted its run */
        else if (rc == SEREX_ECANCELED && dead)
            atomic_fetch_add(&g.cancelled[K_THEN], 1);
        else
            violation("then: a chained future's outcome is wrong");
        serex_future_release(chain[t]);
    }
    fut_ctx_unref(ctx); /* the producer's: f is released by the last */
}

/* A group round: tasks across executors, a notify, maybe a cancel or a
 * private serial whose shutdown_now hands the group's tasks back. */
static void do_group(struct producer *p)
{
    struct ground r = {0};
    serex_executor *priv = NULL;
    serex_future *futs[MAX_GROUP_FUT];
    unsigned want = 2 + (unsigned)(rnd(&p->x) % (MAX_GROUP - 1)), nf = 0;
    bool drop = rnd(&p->x) % 8 == 0;
    int rc;

    must(serex_group_create(&r.grp), "group");
    r.noted = p->noted;
    if (drop)
        must(serex_serial_create(g.pool, NULL, &priv), "private serial");
    serex_group_enter(r.grp); /* no notification before the cancel */
    for (unsigned i = 0; i < want; i++) {
        serex_executor *t;
        serex_fn fn = group_task;

        switch (rnd(&p->x) % 6) {
        case 0: t = g.serial; break;
        case 1: t = serex_striped_executor(g.striped); break;
        case 2: t = g.lim, fn = group_lim_task; break;
        case 3: t = drop ? priv : g.consumer; break;
        default: t = g.pool; break;
        }
        if (!drop && nf < MAX_GROUP_FUT && fn == group_task &&
            rnd(&p->x) % 3 == 0) {
            rc = serex_group_submit(r.grp, t, group_call, &r, &futs[nf]);
            nf += rc == SEREX_OK;
        } else {
            rc = serex_group_execute(r.grp, t, fn, &r);
        }
        accept(K_GROUP, rc, NULL);
        r.n += rc == SEREX_OK;
    }
    must(serex_group_notify(r.grp, rnd(&p->x) % 2 ? g.pool : g.serial,
                            group_note, &r),
         "notify");
    if (rnd(&p->x) % 4 == 0) {
        r.cancelled = serex_group_cancel(r.grp);
        atomic_fetch_add(&g.groups_cancelled, 1);
    }
    if (drop) {
        serex_shutdown_now(priv, group_back, &r);
        atomic_fetch_add(&g.groups_dropped, 1);
    }
    serex_group_leave(r.grp);
    must(serex_group_wait(r.grp, SEREX_FOREVER), "group wait");
    must(serex_event_wait(r.noted, 60 * INT64_C(1000000000)), "group note");
    if (atomic_load(&r.ran) + r.cancelled + r.back != r.n)
        violation("group: ran + cancelled + handed back != accepted");
    for (unsigned i = 0; i < nf; i++) {
        /* the group is empty: every future of it has ended */
        rc = serex_future_wait(futs[i], 0);
        if (rc == SEREX_OK ? serex_future_value(futs[i]) != &r
                           : rc != SEREX_ECANCELED || r.cancelled == 0)
            violation("group: a future's outcome is wrong after wait");
        serex_future_release(futs[i]);
    }
    atomic_fetch_add(&g.cancelled[K_GROUP], r.cancelled);
    atomic_fetch_add(&g.back[K_GROUP], r.back);
    atomic_fetch_add(&g.group_rounds, 1);
    if (priv != NULL)
        must(serex_destroy(priv), "private serial destroy");
    serex_group_destroy(r.grp);
}

/* --- bounded executors: capacities and execute_wait --- */

/* execute; execute_wait with 20 us or SEREX_FOREVER; from a task of the
 * pool, execute_wait with 100 ms or 0 (SEREX_EDEADLK every time, before
 * any try: executor.h). */
enum how { H_EXEC, H_WAIT, H_FOREVER, H_TASK, H_TASK_POLL };

static void peak(_Atomic long *p, long v)
{
    long m = atomic_load_explicit(p, memory_order_relaxed);

    while (v > m && !atomic_compare_exchange_weak(p, &m, v))
        ;
}

/* Slow enough for the producers to fill the bounded executors. */
static void bounded_work(void)
{
    for (int i = 0; i < 128; i++)
        serex__cpu_relax();
}

static void bserial_task(void *arg)
{
    struct rec *r = arg;

    atomic_fetch_sub(&g.bser_waiting, 1);
    bounded_work();
    if (r->producer < MAXP) {
        if (r->seq <= g.bserial_last[r->producer])
            violation("bounded serial out of order");
        g.bserial_last[r->producer] = r->seq;
    }
    ran(K_BSERIAL);
    free(r);
}

static void bstriped_task(void *arg)
{
    struct rec *r = arg;

    atomic_fetch_sub(&g.bstr_waiting, 1);
    atomic_fetch_sub(&g.bstr_lane[r->key], 1);
    bounded_work();
    if (r->producer < MAXP) {
        if (r->seq <= g.bstriped_last[r->key][r->producer])
            violation("bounded striped key out of order");
        g.bstriped_last[r->key][r->producer] = r->seq;
    }
    ran(K_BSTRIPED);
    free(r);
}

/* Counts an accepted task as waiting (see the top): above the bound,
 * the executor held more than its capacity. */
static void bounded_waits(bool striped, unsigned key)
{
    long w, l;

    if (!striped) {
        w = atomic_fetch_add(&g.bser_waiting, 1) + 1;
        peak(&g.bser_peak, w);
        if (w > BCAP + 1)
            violation("more tasks waited in a bounded serial than its "
                      "queue_capacity");
        return;
    }
    w = atomic_fetch_add(&g.bstr_waiting, 1) + 1;
    l = atomic_fetch_add(&g.bstr_lane[key], 1) + 1;
    peak(&g.bstr_peak, w);
    if (w > BSQCAP + (long)g.threads)
        violation("more tasks waited in a bounded striped than its "
                  "queue_capacity");
    if (l > BSLCAP + 1)
        violation("more tasks waited in a bounded striped's lane than its "
                  "lane_capacity");
}

/* What a refusal must be: execute says SEREX_EFULL; execute_wait never
 * EFULL, SEREX_ETIMEDOUT once its timeout ran out (never with
 * SEREX_FOREVER), and from a task of the pool under the executor
 * SEREX_EDEADLK, every time, never a wait (executor.h). */
static void bounded_refused(int rc, enum how how)
{
    if (rc == SEREX_ENOMEM)
        return;
    if (rc == SEREX_EFULL && how != H_EXEC)
        violation("execute_wait said EFULL");
    else if (rc == SEREX_ETIMEDOUT && how == H_FOREVER)
        violation("execute_wait(SEREX_FOREVER) outside any task gave up");
    else if (rc == SEREX_ETIMEDOUT && how >= H_TASK)
        violation("execute_wait from a task of the pool under a full "
                  "executor waited instead of saying EDEADLK at once");
    else if (rc == SEREX_EDEADLK && how < H_TASK)
        violation("execute_wait said EDEADLK outside any task");
    else if (rc != SEREX_EFULL && rc != SEREX_ETIMEDOUT &&
             rc != SEREX_EDEADLK)
        violation("a bounded executor refused a task, not for room");
}

/* One task for the bounded serial, or for @key of the bounded striped. */
static void bounded_submit(unsigned producer, uint64_t seq, bool striped,
                           unsigned key, enum how how)
{
    struct rec *r = rec_new(producer, seq);
    enum kind k = striped ? K_BSTRIPED : K_BSERIAL;
    int64_t timeout = how == H_FOREVER ? SEREX_FOREVER
                      : how == H_TASK  ? SEREX_MS(100)
                      : how == H_WAIT  ? SEREX_US(20)
                                       : 0;
    int rc;

    r->key = key;
    if (striped)
        rc = how == H_EXEC ? serex_striped_execute(g.bstriped, key,
                                                   bstriped_task, r)
                           : serex_striped_execute_wait(
                                 g.bstriped, key, bstriped_task, r, timeout);
    else
        rc = how == H_EXEC ? serex_execute(g.bserial, bserial_task, r)
                           : serex_execute_wait(g.bserial, bserial_task, r,
                                                timeout);
    atomic_fetch_add(&g.attempted[k], 1);
    if (rc == SEREX_OK && how >= H_TASK)
        violation("execute_wait from a task of the pool under the executor "
                  "was accepted: it must say EDEADLK every time");
    if (rc == SEREX_OK) { /* r may be gone: it ran */
        atomic_fetch_add_explicit(&g.accepted[k], 1, memory_order_relaxed);
        bounded_waits(striped, key);
        return;
    }
    free(r);
    atomic_fetch_add(&g.refused[k], 1);
    if (rc == SEREX_EDEADLK)
        atomic_fetch_add(&g.deadlocks, 1);
    bounded_refused(rc, how);
}

/* A task of the pool (NORMAL) that submits to a bounded executor the
 * pool runs under: its execute_wait must not wait for room. Its record:
 * seq says the striped (else the serial), key its key, due its how. */
static void nested_task(void *arg)
{
    struct rec *r = arg;

    bounded_submit(NESTED, 0, r->seq != 0, r->key, (enum how)r->due);
    free(r);
    atomic_fetch_sub(&g.nested_out, 1);
}

static void do_bounded(struct producer *p, bool striped)
{
    unsigned key = striped ? (unsigned)(rnd(&p->x) % NBKEYS) : 0;
    unsigned how = (unsigned)(rnd(&p->x) % 8);
    struct rec *r;

    if (how == 0) { /* from a task */
        r = rec_new(NESTED, striped);
        r->key = key;
        r->due = rnd(&p->x) % 2 ? H_TASK : H_TASK_POLL;
        atomic_fetch_add(&g.nested_out, 1);
        if (serex_execute(g.pool, nested_task, r) != SEREX_OK) {
            violation("the pool refused a task");
            atomic_fetch_sub(&g.nested_out, 1);
            free(r);
        }
        return;
    }
    /* a burst, to fill it now and then */
    for (unsigned n = 1 + (unsigned)(rnd(&p->x) % 6); n > 0; n--)
        bounded_submit(p->id,
                       striped ? ++p->bkey_seq[key] : ++p->seq[K_BSERIAL],
                       striped, key,
                       how < 4 ? H_EXEC : how < 6 ? H_WAIT : H_FOREVER);
}

/* --- the pool's priority faces --- */

/* A task runs between its on_task_start and its on_task_end: with ends
 * read first, starts - ends counts this task at least. */
static void hooks_around(_Atomic uint64_t *starts, _Atomic uint64_t *ends)
{
    uint64_t e = atomic_load(ends);

    if (atomic_load(starts) <= e)
        violation("a pool's task ran outside its on_task_start and "
                  "on_task_end");
}

static void face_task(void *arg)
{
    hooks_around(&g.task_starts, &g.task_ends);
    ran(K_FACE);
    free(arg);
}

static void low_task(void *arg) /* on the serial over LOW */
{
    struct rec *r = arg;

    if (r->seq <= g.low_last[r->producer])
        violation("a serial over the LOW face out of order");
    g.low_last[r->producer] = r->seq;
    ran(K_FACE);
    free(r);
}

static void do_face(struct producer *p)
{
    unsigned l = (unsigned)(rnd(&p->x) % (SEREX_POOL_PRIORITIES + 1));
    struct rec *r;
    int rc;

    if (l == SEREX_POOL_PRIORITIES) {
        r = rec_new(p->id, ++p->seq[K_FACE]);
        rc = serex_execute(g.low_serial, low_task, r);
    } else {
        r = rec_new(p->id, 0);
        rc = serex_execute(g.face[l], face_task, r);
    }
    accept(K_FACE, rc, rc == SEREX_OK ? NULL : r);
}

/* --- pool rounds: a pool of its own, its hooks and shutdown_now --- */

struct round {
    unsigned threads, refuse; /* refuse: the index refused; else >= 2 */
    _Atomic unsigned started, stopped;
    _Atomic uint64_t task_starts, task_ends, ran;
    unsigned back, last_level, last_seq; /* on_pending's (our thread) */
};

struct round_task {
    struct round *r;
    unsigned level, seq;
};

static int round_thread_start(void *ctx, unsigned index)
{
    struct round *r = ctx;

    if (index >= r->threads)
        violation("a core thread's index is not below threads");
    atomic_fetch_add(&r->started, 1);
    return index == r->refuse;
}

static void round_thread_stop(void *ctx, unsigned index)
{
    struct round *r = ctx;

    if (index == r->refuse)
        violation("on_thread_stop ran for a thread its start hook refused");
    atomic_fetch_add(&r->stopped, 1);
}

static void round_task_start(void *ctx)
{
    atomic_fetch_add(&((struct round *)ctx)->task_starts, 1);
}

static void round_task_end(void *ctx)
{
    atomic_fetch_add(&((struct round *)ctx)->task_ends, 1);
}

static void round_task(void *arg)
{
    struct round_task *t = arg;

    hooks_around(&t->r->task_starts, &t->r->task_ends);
    atomic_fetch_add(&t->r->ran, 1);
    ran(K_POOL);
}

static void round_back(serex_fn fn, void *arg, void *ctx)
{
    struct round_task *t = arg;
    struct round *r = ctx;

    if (fn != round_task || t->r != r)
        violation("on_pending got a task that is not the pool round's");
    if (r->back > 0 && (t->level < r->last_level ||
                        (t->level == r->last_level && t->seq <= r->last_seq)))
        violation("shutdown_now handed a pool's tasks back out of order: "
                  "not the highest level first, each in submission order");
    r->last_level = t->level;
    r->last_seq = t->seq;
    r->back++;
}

/* Creates the round's pool; false if a start hook refused (as asked). */
static bool round_create(struct producer *p, struct round *r,
                         serex_executor **pool)
{
    serex_pool_config pc = {0};
    int rc;

    r->threads = 1 + (unsigned)(rnd(&p->x) % 2);
    r->refuse = rnd(&p->x) % 8 == 0 ? (unsigned)(rnd(&p->x) % r->threads)
                                    : 2;
    pc.threads = pc.max_threads = r->threads;
    pc.queue_capacity = rnd(&p->x) % 2 ? 0 : 4;
    pc.on_thread_start = round_thread_start;
    pc.on_thread_stop = round_thread_stop;
    pc.on_task_start = round_task_start;
    pc.on_task_end = round_task_end;
    pc.hook_ctx = r;
    rc = serex_pool_create(&pc, pool);
    atomic_fetch_add(&g.pool_rounds, 1);
    if (r->refuse >= r->threads) {
        must(rc, "pool round");
        return true;
    }
    if (rc != SEREX_EREJECTED || *pool != NULL)
        violation("pool_create did not say EREJECTED when a start hook "
                  "refused a core thread");
    if (atomic_load(&r->started) != r->threads ||
        atomic_load(&r->stopped) != r->threads - 1)
        violation("a refused pool_create did not run every core thread's "
                  "start hook, and the stop hook of each it let start");
    if (*pool != NULL)
        must(serex_destroy(*pool), "pool round destroy");
    atomic_fetch_add(&g.pool_refused, 1);
    return false;
}

static void do_pool_round(struct producer *p)
{
    struct round r;
    struct round_task t[MAX_ROUND];
    serex_executor *pool = NULL, *face[SEREX_POOL_PRIORITIES], *end;
    unsigned n = 8 + (unsigned)(rnd(&p->x) % (MAX_ROUND - 7));
    uint64_t acc = 0;

    memset(&r, 0, sizeof r);
    if (!round_create(p, &r, &pool))
        return;
    for (unsigned l = 0; l < SEREX_POOL_PRIORITIES; l++)
        face[l] = serex_pool_executor_at(pool, l);
    for (unsigned i = 0; i < n; i++) {
        bool wait = rnd(&p->x) % 4 == 0;
        int rc;

        t[i] = (struct round_task){&r, (unsigned)(rnd(&p->x) % 3), i + 1};
        rc = wait ? serex_execute_wait(face[t[i].level], round_task, &t[i],
                                       SEREX_US(10))
                  : serex_execute(face[t[i].level], round_task, &t[i]);
        atomic_fetch_add(&g.attempted[K_POOL], 1);
        if (rc == SEREX_OK) {
            acc++;
            atomic_fetch_add(&g.accepted[K_POOL], 1);
        } else if (rc == (wait ? SEREX_ETIMEDOUT : SEREX_EFULL)) {
            atomic_fetch_add(&g.refused[K_POOL], 1);
        } else {
            violation("a pool's face refused a task, not for room");
        }
    }
    end = rnd(&p->x) % 2 ? pool : face[rnd(&p->x) % 3]; /* a face: the pool */
    if (rnd(&p->x) % 2) {
        if (serex_shutdown_now(end, round_back, &r) != r.back)
            violation("shutdown_now's count is not the tasks it handed "
                      "back");
        atomic_fetch_add(&g.pool_taken_back, 1);
    } else {
        serex_shutdown(end);
    }
    must(serex_await_termination(end, 60 * INT64_C(1000000000)),
         "pool round await");
    if (atomic_load(&r.started) != r.threads ||
        atomic_load(&r.stopped) != r.threads)
        violation("a pool's threads did not each run on_thread_start and "
                  "on_thread_stop once by the time await_termination said "
                  "OK");
    if (atomic_load(&r.task_starts) != atomic_load(&r.ran) ||
        atomic_load(&r.task_ends) != atomic_load(&r.ran))
        violation("on_task_start and on_task_end did not run once for each "
                  "task a pool ran");
    if (atomic_load(&r.ran) + r.back != acc)
        violation("a pool round's task neither ran nor came back");
    atomic_fetch_add(&g.back[K_POOL], r.back);
    must(serex_destroy(pool), "pool round destroy");
}

/* --- issue 23: tokens, all/any, fail-fast groups --- */

/* A future's call in a token round or an all/any: counts its runs, may
 * set an error (serex_future_set_error), may poll a token. */
struct call_rec {
    _Atomic int runs;
    int err;           /* the error it sets, 0: none */
    serex_cancel *tok; /* polled, NULL: none */
};

static void *counted_call(void *arg)
{
    struct call_rec *c = arg;

    if (atomic_fetch_add(&c->runs, 1) != 0)
        violation("a future's call ran twice");
    if (c->tok != NULL)
        (void)serex_cancel_requested(c->tok); /* a long task polls it */
    for (int i = 0; i < 64; i++)
        serex__cpu_relax();
    if (c->err != 0 && serex_future_set_error(c->err) != SEREX_OK)
        violation("serex_future_set_error from a future's call failed");
    return c;
}

/* An on_cancel callback: runs once, after its token was cancelled. */
struct cb_rec {
    _Atomic int runs;
    serex_cancel *tok;
};

static void cancel_cb(void *arg)
{
    struct cb_rec *cb = arg;

    if (atomic_fetch_add(&cb->runs, 1) != 0)
        violation("an on_cancel callback ran twice");
    if (!serex_cancel_requested(cb->tok))
        violation("an on_cancel callback ran before its token was "
                  "cancelled");
}

static serex_executor *any_target(struct producer *p)
{
    switch (rnd(&p->x) % 3) {
    case 0: return g.serial;
    case 1: return g.consumer;
    default: return g.pool;
    }
}

static void attempt(enum kind k, int rc)
{
    atomic_fetch_add(&g.attempted[k], 1);
    if (rc == SEREX_OK)
        atomic_fetch_add_explicit(&g.accepted[k], 1, memory_order_relaxed);
    else
        atomic_fetch_add(&g.refused[k], 1);
}

/*
 * A token round: a token (maybe with a deadline on the scheduler, maybe a
 * child), 0-2 on_cancel callbacks (some unregistered at once), 1-4
 * futures of a group linked to it or its child by cancel_on (some with a
 * deadline of their own), maybe a request racing the deadline. Once the
 * group is empty: a future that says the token's cause never ran; one
 * that says OK ran, with its value; SEREX_ETIMEDOUT from its own deadline
 * may have run (the deadline ends a running call's future too). Then the
 * token is cancelled (its work is over): unregister says true for a
 * callback that never runs, false for one that has run, once.
 */
static void do_token(struct producer *p)
{
    serex_cancel *tok, *child = NULL, *link[4];
    serex_group *grp;
    struct call_rec calls[4];
    struct cb_rec cbs[2];
    serex_future *fs[4];
    serex_cancel_reg *regs[2];
    bool fdl[4], reg_ok[2], requested = false;
    unsigned nf = 1 + (unsigned)(rnd(&p->x) % 4);
    unsigned ncb = (unsigned)(rnd(&p->x) % 3);
    int cause = -100 - (int)p->id, rc;

    must(serex_cancel_create(NULL, &tok), "token");
    if (rnd(&p->x) % 2)
        must(serex_cancel_create(tok, &child), "child token");
    must(serex_group_create(&grp), "group");
    if (rnd(&p->x) % 4 != 0)
        must(serex_cancel_deadline(tok, g.sched,
                                   (int64_t)(rnd(&p->x) % 2000) * 1000),
             "token deadline");
    for (unsigned i = 0; i < ncb; i++) {
        atomic_init(&cbs[i].runs, 0);
        cbs[i].tok = tok;
        rc = serex_cancel_on_cancel(tok, any_target(p), cancel_cb, &cbs[i],
                                    &regs[i]);
        attempt(K_TOKEN, rc);
        reg_ok[i] = rc == SEREX_OK;
        if (reg_ok[i] && rnd(&p->x) % 3 == 0) { /* taken back at once */
            if (serex_cancel_unregister(regs[i])) {
                atomic_fetch_add(&g.cancelled[K_TOKEN], 1);
                if (atomic_load(&cbs[i].runs) != 0)
                    violation("unregister said true for a callback that "
                              "ran");
            } else if (!serex_cancel_requested(tok) ||
                       atomic_load(&cbs[i].runs) != 1) {
                violation("unregister said false before its callback "
                          "finished");
            } else {
                ran(K_TOKEN);
            }
            reg_ok[i] = false;
        }
    }
    for (unsigned i = 0; i < nf; i++) {
        atomic_init(&calls[i].runs, 0);
        calls[i].err = 0;
        calls[i].tok = tok;
        link[i] = child != NULL && i % 2 ? child : tok;
        fdl[i] = rnd(&p->x) % 4 == 0;
        rc = serex_group_submit(grp, any_target(p), counted_call, &calls[i],
                                &fs[i]);
        attempt(K_TOKEN, rc);
        if (rc != SEREX_OK) {
            fs[i] = NULL;
            continue;
        }
        must(serex_future_cancel_on(fs[i], link[i]), "cancel_on");
        if (fdl[i])
            must(serex_future_deadline(fs[i], g.sched,
                                       (int64_t)(rnd(&p->x) % 1000) * 1000),
                 "future deadline");
    }
    if (rnd(&p->x) % 3 == 0)
        requested = serex_cancel_request(tok, cause);
    else if (child != NULL && rnd(&p->x) % 4 == 0)
        serex_cancel_request(child, cause - 50); /* the parent stays */
    must(serex_group_wait(grp, SEREX_FOREVER), "token round's group");
    for (unsigned i = 0; i < nf; i++) {
        int runs, lc;

        if (fs[i] == NULL)
            continue;
        rc = serex_future_wait(fs[i], 0); /* the group is empty: ended */
        runs = atomic_load(&calls[i].runs);
        lc = serex_cancel_cause(link[i]); /* set for good, if at all */
        if (rc == SEREX_OK && runs == 1 &&
            serex_future_value(fs[i]) == &calls[i])
            ran(K_TOKEN);
        else if (rc == SEREX_ETIMEDOUT && fdl[i] && runs == 1)
            ran(K_TOKEN); /* its deadline ended it while it ran */
        else if (rc != SEREX_OK && runs == 0 &&
                 (rc == lc || (rc == SEREX_ETIMEDOUT && fdl[i])))
            atomic_fetch_add(&g.cancelled[K_TOKEN], 1);
        else
            violation("token round: a future's outcome is not its value, "
                      "its token's cause (never run) or its deadline's");
        serex_future_release(fs[i]);
    }
    /* the work is over: stop the deadline, fire the rest. A request that
     * says true has fired every hook (children included) on this thread;
     * one that says false may return while another thread (the timer's)
     * is still firing them (cancel.h: the first request wins, a later one
     * waits for nothing) */
    if (!requested)
        requested = serex_cancel_request(tok, 0);
    if (child != NULL && serex_cancel_cause(child) != serex_cancel_cause(tok) &&
        serex_cancel_cause(child) != cause - 50 &&
        (requested || serex_cancel_cause(child) != 0))
        violation("a child token's cause is neither its parent's nor its "
                  "own request's");
    for (unsigned i = 0; i < ncb; i++) {
        if (!reg_ok[i])
            continue;
        /* true: taken back before the canceller reached it, never runs;
         * false: it has run, once, by the time unregister returns */
        if (serex_cancel_unregister(regs[i])) {
            if (requested || atomic_load(&cbs[i].runs) != 0)
                violation("unregister said true for a callback its own "
                          "request posted, or that ran");
            else
                atomic_fetch_add(&g.cancelled[K_TOKEN], 1);
        } else if (atomic_load(&cbs[i].runs) != 1) {
            violation("unregister said false before its callback ran once");
        } else {
            ran(K_TOKEN);
        }
    }
    serex_group_destroy(grp);
    serex_cancel_release(child);
    serex_cancel_release(tok);
}

/*
 * serex_future_all or _any over 2-4 futures on the pool and the serials
 * (some set an error), with or without SEREX_FUTURE_CANCEL_REST: all ends
 * with NULL if every input did with a value, else with an input's error;
 * any with an input's value if one had one, else an input's error. An
 * input says SEREX_ECANCELED only with CANCEL_REST, and then never ran.
 */
static void do_combine(struct producer *p)
{
    struct call_rec in[4];
    serex_future *fs[4], *out;
    unsigned n = 2 + (unsigned)(rnd(&p->x) % 3), made = 0;
    bool any = rnd(&p->x) % 2, rest = rnd(&p->x) % 2, some_ok = false;
    int orc, irc[4], rc;

    for (unsigned i = 0; i < n; i++) {
        atomic_init(&in[made].runs, 0);
        in[made].err = rnd(&p->x) % 3 == 0 ? -300 - (int)i : 0;
        in[made].tok = NULL;
        rc = serex_submit(any_target(p), counted_call, &in[made], &fs[made]);
        attempt(K_COMBINE, rc);
        made += rc == SEREX_OK;
    }
    if (made == 0)
        return;
    rc = any ? serex_future_any(fs, made, rest ? SEREX_FUTURE_CANCEL_REST : 0,
                                &out)
             : serex_future_all(fs, made, rest ? SEREX_FUTURE_CANCEL_REST : 0,
                                &out);
    must(rc, "all/any");
    orc = serex_future_wait(out, SEREX_FOREVER);
    for (unsigned i = 0; i < made; i++) {
        int runs;

        irc[i] = serex_future_wait(fs[i], SEREX_FOREVER);
        runs = atomic_load(&in[i].runs);
        if ((irc[i] == SEREX_OK && in[i].err == 0 && runs == 1 &&
             serex_future_value(fs[i]) == &in[i]) ||
            (irc[i] == in[i].err && irc[i] != 0 && runs == 1)) {
            ran(K_COMBINE);
        } else if (irc[i] == SEREX_ECANCELED && rest && runs == 0) {
            atomic_fetch_add(&g.cancelled[K_COMBINE], 1);
        } else {
            violation("all/any: an input's outcome is not its call's, nor "
                      "SEREX_ECANCELED (never run) under CANCEL_REST");
        }
        some_ok |= irc[i] == SEREX_OK;
    }
    if (orc == SEREX_OK) {
        bool found = false;

        for (unsigned i = 0; i < made && !found; i++)
            found = irc[i] == SEREX_OK &&
                    serex_future_value(out) == (void *)&in[i];
        if (any ? !found : (!some_ok || serex_future_value(out) != NULL))
            violation("all/any ended with a value it should not have");
        for (unsigned i = 0; i < made && !any; i++)
            if (irc[i] != SEREX_OK)
                violation("all ended with a value though an input failed");
    } else {
        bool found = false;

        for (unsigned i = 0; i < made && !found; i++)
            found = orc == in[i].err && in[i].err != 0 &&
                    atomic_load(&in[i].runs) == 1;
        if (!found || (any && some_ok))
            violation("all/any ended with an error no input's call set (or "
                      "any failed though an input had a value)");
    }
    serex_future_release(out);
    for (unsigned i = 0; i < made; i++)
        serex_future_release(fs[i]);
}

/*
 * A fail-fast group (maybe the child of a token with a deadline): 2-8
 * submitted futures across the pool and serials, some setting errors,
 * maybe a serex_group_fail from the producer, then serex_group_close (a
 * later submit says SEREX_EREJECTED). wait says the group's first error
 * (SEREX_OK if none), which is one of the errors reported or the
 * parent's cause; a future that says SEREX_ECANCELED never ran, and only
 * a group that failed cancels.
 */
static void do_ffgroup(struct producer *p)
{
    serex_group_config cfg = {SEREX_GROUP_FAIL_FAST, NULL};
    struct call_rec t[8], extra;
    serex_future *fs[8], *late;
    serex_group *grp;
    unsigned n = 2 + (unsigned)(rnd(&p->x) % 7);
    bool failed = rnd(&p->x) % 4 == 0;
    int wrc, err, rc;

    if (rnd(&p->x) % 3 == 0) {
        must(serex_cancel_create(NULL, &cfg.parent), "group's parent");
        must(serex_cancel_deadline(cfg.parent, g.sched,
                                   (int64_t)(rnd(&p->x) % 1500) * 1000),
             "group's parent deadline");
    }
    must(serex_group_create_config(&cfg, &grp), "fail-fast group");
    for (unsigned i = 0; i < n; i++) {
        atomic_init(&t[i].runs, 0);
        t[i].err = rnd(&p->x) % 4 == 0 ? -400 - (int)i : 0;
        t[i].tok = serex_group_token(grp);
        rc = serex_group_submit(grp, any_target(p), counted_call, &t[i],
                                &fs[i]);
        attempt(K_FFGROUP, rc);
        if (rc != SEREX_OK) { /* closed by a failure already (a parent's
                                 cancel closes the group, then records) */
            if (rc != SEREX_EREJECTED || (serex_group_error(grp) == 0 &&
                                          !serex_cancel_requested(cfg.parent)))
                violation("a fail-fast group refused a task, not closed by "
                          "an error");
            fs[i] = NULL;
        }
        if (failed && i == n / 2)
            serex_group_fail(grp, -499);
    }
    serex_group_close(grp);
    atomic_init(&extra.runs, 0);
    extra.err = 0;
    extra.tok = NULL;
    rc = serex_group_submit(grp, g.pool, counted_call, &extra, &late);
    attempt(K_FFGROUP, rc);
    if (rc != SEREX_EREJECTED || late != NULL)
        violation("a closed group accepted a task");
    wrc = serex_group_wait(grp, SEREX_FOREVER);
    err = serex_group_error(grp);
    if (wrc != (err != 0 ? err : SEREX_OK))
        violation("group_wait did not say the group's first error");
    if ((err == 0) != (serex_group_error_count(grp) == 0))
        violation("a group's error count disagrees with its first error");
    if (err != 0 && err != -499 && err != SEREX_ETIMEDOUT &&
        (err > -400 || err < -407))
        violation("a group's first error is none that was reported");
    if (failed && err == 0)
        violation("serex_group_fail left no error");
    for (unsigned i = 0; i < n; i++) {
        int runs;

        if (fs[i] == NULL)
            continue;
        rc = serex_future_wait(fs[i], 0); /* the group is empty: ended */
        runs = atomic_load(&t[i].runs);
        if ((rc == SEREX_OK && t[i].err == 0 && runs == 1) ||
            (rc == t[i].err && rc != 0 && runs == 1 && err != 0))
            ran(K_FFGROUP);
        else if (rc == SEREX_ECANCELED && runs == 0 && err != 0)
            atomic_fetch_add(&g.cancelled[K_FFGROUP], 1);
        else
            violation("fail-fast group: a future's outcome is not its "
                      "call's, nor SEREX_ECANCELED (never run) after the "
                      "group failed");
        serex_future_release(fs[i]);
    }
    serex_group_destroy(grp);
    if (cfg.parent != NULL) {
        serex_cancel_request(cfg.parent, 0); /* stops its deadline */
        serex_cancel_release(cfg.parent);
    }
}

/* --- the main pool's hooks --- */

static int main_thread_start(void *ctx, unsigned index)
{
    if (ctx != &g || index >= g.threads)
        violation("the pool's start hook got another ctx, or an index not "
                  "below threads");
    atomic_fetch_add(&g.thread_starts, 1);
    return 0;
}

static void main_thread_stop(void *ctx, unsigned index)
{
    if (ctx != &g || index >= g.threads)
        violation("the pool's stop hook got another ctx or index");
    atomic_fetch_add(&g.thread_stops, 1);
}

/* seq_cst (both, and hooks_around's loads): a task's end seen means its
 * start is seen too */
static void main_task_start(void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&g.task_starts, 1);
}

static void main_task_end(void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&g.task_ends, 1);
}

static void one_op(struct producer *p)
{
    enum kind k = (enum kind)(rnd(&p->x) % NKINDS);
    struct rec *r;
    int rc;

    switch (k) {
    case K_SERIAL:
        r = rec_new(p->id, ++p->seq[k]);
        rc = serex_execute(g.serial, serial_task, r);
        accept(k, rc, rc == SEREX_OK ? NULL : r);
        break;
    case K_STRIPED:
        r = rec_new(p->id, 0);
        r->key = (unsigned)(rnd(&p->x) % NKEYS);
        r->seq = ++p->key_seq[r->key];
        rc = serex_striped_execute(g.striped, r->key, striped_task, r);
        accept(k, rc, rc == SEREX_OK ? NULL : r);
        break;
    case K_TIMER: do_timer(p); break;
    case K_PERIODIC: do_periodic(p); break;
    case K_FUTURE: do_future(p); break;
    case K_CHANNEL:
        r = rec_new(p->id, ++p->seq[k]);
        rc = serex_channel_send(g.ch, r, g.pool, sent_task, NULL);
        accept(k, rc, rc == SEREX_OK ? NULL : r);
        break;
    case K_ONDONE: /* a future with continuations, more often */
    case K_THEN: do_future(p); break;
    case K_GROUP: do_group(p); break;
    case K_LIMITER:
        rc = serex_execute(g.lim, lim_task, NULL);
        accept(k, rc, NULL);
        break;
    case K_BSERIAL:
    case K_BSTRIPED: do_bounded(p, k == K_BSTRIPED); break;
    case K_FACE: do_face(p); break;
    case K_POOL: /* a pool of its own starts threads: now and then */
        if (rnd(&p->x) % 64 == 0)
            do_pool_round(p);
        else
            do_face(p);
        break;
    case K_TOKEN: do_token(p); break;
    case K_COMBINE: do_combine(p); break;
    case K_FFGROUP: do_ffgroup(p); break;
    case K_GATE:
        if (rnd(&p->x) % 8 == 0) {
            if (rnd(&p->x) % 2)
                serex_gate_open(g.gate);
            else
                serex_gate_close(g.gate);
            break;
        }
        r = rec_new(p->id, 0);
        rc = serex_gate_execute(g.gate, g.pool, gate_task, r);
        accept(k, rc, rc == SEREX_OK ? NULL : r);
        break;
    default: break;
    }
}

static int producer_main(void *arg)
{
    struct producer *p = arg;

    while (serex__now_ns() < g.end_ns)
        for (int i = 0; i < 64; i++)
            one_op(p);
    for (unsigned i = 0; i < p->nperiodic; i++)
        if (p->periodic_t[i] != NULL) {
            serex_timer_cancel(p->periodic_t[i]);
            serex_timer_release(p->periodic_t[i]);
        }
    return 0;
}

/* --- setup, run, teardown --- */

static void setup(void)
{
    /* at least LIMIT + 1 workers, so the limiter's bound is what holds */
    serex_pool_config pc = {0};
    serex_serial_config bc = {0};
    unsigned cpus = serex__cpu_count();

    pc.threads = cpus > LIMIT + 1 ? cpus : LIMIT + 1;
    g.threads = pc.threads;
    pc.on_thread_start = main_thread_start;
    pc.on_thread_stop = main_thread_stop;
    pc.on_task_start = main_task_start;
    pc.on_task_end = main_task_end;
    pc.hook_ctx = &g;
    must(serex_pool_create(&pc, &g.pool), "pool");
    for (unsigned l = 0; l < SEREX_POOL_PRIORITIES; l++)
        g.face[l] = serex_pool_executor_at(g.pool, l);
    bc.queue_capacity = BCAP;
    bc.name = "bserial";
    must(serex_serial_create(g.face[SEREX_POOL_PRIORITY_HIGH], &bc,
                             &g.bserial),
         "bounded serial");
    bc.queue_capacity = BSQCAP;
    bc.lane_capacity = BSLCAP;
    bc.name = "bstriped";
    must(serex_striped_create(g.face[SEREX_POOL_PRIORITY_HIGH], &bc,
                              &g.bstriped),
         "bounded striped");
    must(serex_serial_create(g.face[SEREX_POOL_PRIORITY_LOW], NULL,
                             &g.low_serial),
         "low serial");
    must(serex_limiter_create(g.pool, LIMIT, &g.lim), "limiter");
    must(serex_serial_create(g.pool, NULL, &g.serial), "serial");
    must(serex_serial_create(g.pool, NULL, &g.consumer), "consumer");
    must(serex_striped_create(g.pool, NULL, &g.striped), "striped");
    must(serex_scheduler_create(NULL, &g.sched), "scheduler");
    must(serex_channel_create(16, &g.ch), "channel");
    must(serex_gate_create(false, &g.gate), "gate");
    must(serex_event_create(&g.drained), "event");
    consumer_recv();
}

static int teardown(void)
{
    serex_stats st;

    while (atomic_load(&g.nested_out) != 0) /* they use the bounded ones */
        serex__thread_yield();
    serex_gate_open(g.gate);
    serex_channel_close(g.ch);
    must(serex_event_wait(g.drained, 60 * INT64_C(1000000000)), "drain");
    must(serex_destroy(serex_scheduler_executor(g.sched)), "scheduler");
    must(serex_destroy(g.serial), "serial");
    must(serex_destroy(g.consumer), "consumer");
    must(serex_executor_stats(serex_striped_executor(g.striped), &st),
         "stats");
    must(serex_destroy(serex_striped_executor(g.striped)), "striped");
    if (st.lanes != 0)
        violation("striped lanes left");
    must(serex_destroy(g.bserial), "bounded serial");
    must(serex_destroy(g.low_serial), "low serial");
    serex_shutdown(serex_striped_executor(g.bstriped));
    must(serex_await_termination(serex_striped_executor(g.bstriped),
                                 60 * INT64_C(1000000000)),
         "bounded striped await");
    must(serex_executor_stats(serex_striped_executor(g.bstriped), &st),
         "stats");
    if (st.lanes != 0 || st.queued != 0)
        violation("bounded striped lanes or tasks left once idle");
    must(serex_destroy(serex_striped_executor(g.bstriped)), "bstriped");
    if (atomic_load(&g.bser_waiting) != 0 || atomic_load(&g.bstr_waiting) != 0)
        violation("a bounded executor's accepted task never started");
    must(serex_destroy(g.lim), "limiter"); /* before the pool under it */
    serex_shutdown(g.pool);
    must(serex_await_termination(g.pool, 60 * INT64_C(1000000000)),
         "pool await");
    if (atomic_load(&g.thread_starts) != g.threads ||
        atomic_load(&g.thread_stops) != g.threads)
        violation("the pool's threads did not each run on_thread_start and "
                  "on_thread_stop once by the time await_termination said "
                  "OK");
    if (atomic_load(&g.task_starts) != atomic_load(&g.task_ends))
        violation("the pool's on_task_start and on_task_end counts differ");
    must(serex_destroy(g.pool), "pool"); /* gate tasks ran on it */
    serex_gate_destroy(g.gate, NULL, NULL);
    serex_channel_destroy(g.ch);
    serex_event_destroy(g.drained);
    return 0;
}

int main(int argc, char **argv)
{
    static struct producer prod[MAXP];
    serex__thread th[MAXP];
    int64_t seconds = 10, start = serex__now_ns();
    uint64_t seed = 42;

    g.producers = 4;
    if (getenv("SEREX_SOAK_SECONDS") != NULL)
        seconds = atoll(getenv("SEREX_SOAK_SECONDS"));
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seconds") == 0)
            seconds = atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0)
            g.producers = (unsigned)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--seed") == 0)
            seed = strtoull(argv[i + 1], NULL, 10);
    }
    if (g.producers < 1 || g.producers > MAXP || seconds < 0) {
        fprintf(stderr, "usage: soak [--seconds N] [--threads 1-%d] "
                "[--seed S]\n", MAXP);
        return 2;
    }
    setup();
    g.end_ns = start + seconds * INT64_C(1000000000);
    for (unsigned i = 0; i < g.producers; i++) {
        prod[i].id = i;
        prod[i].x = seed + i;
        must(serex_event_create(&prod[i].noted), "event");
        must(serex__thread_start(&th[i], producer_main, &prod[i]), "thread");
    }
    for (unsigned i = 0; i < g.producers; i++)
        serex__thread_join(th[i]);
    teardown();
    for (unsigned i = 0; i < g.producers; i++) {
        for (unsigned j = 0; j < prod[i].nperiodic; j++)
            free(prod[i].periodic[j]);
        serex_event_destroy(prod[i].noted);
    }
    for (int k = 0; k < NKINDS; k++) {
        uint64_t a = atomic_load(&g.accepted[k]), r = atomic_load(&g.ran[k]),
                 c = atomic_load(&g.cancelled[k]), b = atomic_load(&g.back[k]);

        uint64_t t = atomic_load(&g.attempted[k]),
                 f = atomic_load(&g.refused[k]);

        printf("soak: %-8s accepted %10llu ran %10llu cancelled %8llu "
               "back %6llu refused %8llu\n",
               kind_name[k], (unsigned long long)a, (unsigned long long)r,
               (unsigned long long)c, (unsigned long long)b,
               (unsigned long long)f);
        if (k != K_PERIODIC && a != r + c + b)
            violation("accepted != ran + cancelled + handed back");
        if (k >= K_BSERIAL && k != K_FACE && t != a + f)
            violation("accepted + refused != attempted");
    }
    printf("soak: %llu group rounds (%llu cancelled, %llu with tasks handed "
           "back); the limiter of %d ran at most %d at once\n",
           (unsigned long long)atomic_load(&g.group_rounds),
           (unsigned long long)atomic_load(&g.groups_cancelled),
           (unsigned long long)atomic_load(&g.groups_dropped), LIMIT,
           atomic_load(&g.lim_max));
    printf("soak: %llu pool rounds (%llu refused by a start hook, %llu ended "
           "by shutdown_now); at most %ld waiting in the bounded serial "
           "(capacity %d), %ld in the striped (%d); %llu EDEADLK to tasks\n",
           (unsigned long long)atomic_load(&g.pool_rounds),
           (unsigned long long)atomic_load(&g.pool_refused),
           (unsigned long long)atomic_load(&g.pool_taken_back),
           atomic_load(&g.bser_peak), BCAP, atomic_load(&g.bstr_peak),
           BSQCAP, (unsigned long long)atomic_load(&g.deadlocks));
    printf("soak: %lld s, %u threads, %llu violations\n", (long long)seconds,
           g.producers, (unsigned long long)atomic_load(&g.violations));
    return atomic_load(&g.violations) == 0 ? 0 : 1;
}
