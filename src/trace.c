/* SPDX-License-Identifier: MIT */
/*
 * trace.c - the flight recorder (serex/trace.h): per-thread rings of
 * fixed-size events, recorded without allocating or waiting, and their
 * writing out as Chrome Trace Event JSON.
 *
 * --- The rings and their state words, demystified ---
 *
 * The ring headers are a static array (trace_rings), never freed; a
 * trace's events are one allocation that start makes and the next start
 * or discard frees, cut into one ring per header in use. Each header has
 * one atomic word, its state: the trace's generation (1, 2, ... one per
 * start) shifted left by two, and below it
 *
 *   FREE    the trace has not given this ring to a thread yet
 *   IDLE    a thread owns it and is not writing in it
 *   BUSY    its owner is writing an event in it
 *   CLOSED  stop has closed it: nobody writes in it again
 *
 * Transitions, and who makes each (gen is the current trace's):
 *   start:    any (an older gen, always CLOSED or never used) -> gen|FREE,
 *             after it wrote the header's plain fields (events, mask,
 *             head = 0); release
 *   claim:    gen|FREE -> gen|BUSY, by the one thread that drew this
 *             ring's index from the claim word; acquire
 *   record:   gen|IDLE -> gen|BUSY, by the owner only; write one event;
 *             gen|BUSY -> gen|IDLE with release
 *   stop:     gen|FREE or gen|IDLE -> gen|CLOSED, acquire; on gen|BUSY it
 *             waits (spins, then yields) for the owner's IDLE
 * A thread keeps its ring's address and the tag gen|IDLE in thread-local
 * storage; every event is one compare-and-swap from that tag to BUSY, so
 * an owner whose trace was stopped, or replaced by a newer one, fails its
 * swap (the word is CLOSED, or of another gen) and never touches the
 * events of a trace that is not its own. The header itself is static, so
 * the swap never reads freed memory.
 *
 * Who wins each race:
 *  - An owner and stop on one ring: both swap the same word, so one is
 *    first. Owner first: stop sees BUSY and waits for IDLE, whose release
 *    store pairs with stop's acquiring swap to CLOSED, so the event's
 *    bytes and the new head happen-before stop returns, and so before
 *    serex_trace_write reads them (it runs after stop, under the control
 *    mutex). Stop first: the owner's swap fails and the event is not
 *    recorded. No event is torn: the writer reads only closed rings.
 *  - Two threads claiming: the claim word (generation, an ON bit, the
 *    next index) is advanced by compare-and-swap, so each index goes to
 *    one thread; a claimer that drew index i then swaps ring i from
 *    gen|FREE, and nobody else can, since nobody else drew i in gen.
 *  - A claim and stop: stop clears ON first (no index is drawn after), and
 *    then closes every ring of the trace, FREE ones included. A claimer
 *    that drew i before either closes it first (stop waits for it like any
 *    owner) or finds it CLOSED and records nothing.
 *  - A thread left behind by an old trace (asleep between loading its tag
 *    and its swap across a stop and a new start): its tag has the old gen,
 *    the word has the new one, the swap fails; it claims again.
 *  - start, stop, write and discard among themselves: the control mutex.
 * Rings are freed only by start and discard, under the mutex, when the
 * trace is not recording: stop has closed every ring, so no thread is
 * inside one (each BUSY was waited for), and none can enter one.
 *
 * A thread beyond max_threads draws an index whose ring is not FREE in
 * this gen (or beyond the array): its events are dropped, counted in the
 * drop word (gen and count, so a late increment from a thread of an old
 * trace fails instead of counting in the new one). It remembers the gen it
 * was refused in, and does not draw again until the next trace.
 *
 * Cost of an event: a thread-local load, one compare-and-swap on a line
 * its own thread owns (stop touches it once per trace), a cycle-counter
 * read, a 64-byte store (one line: the events are line-aligned), and a
 * release store (a plain store on x86). No shared line is written.
 *
 * --- Time ---
 * An event's time is the CPU's cycle counter (x86 TSC, arm64's virtual
 * counter): tens of cycles, where the monotonic clock costs ~20 ns. Start
 * reads both clocks together; the writer reads them again (at least 1 ms
 * after start) and converts ticks to nanoseconds with the ratio between
 * the two pairs. That assumes a counter that ticks at one constant rate
 * on every core (x86's invariant TSC, which every x86-64 CPU of the last
 * decade has; arm64's generic timer); where there is no such counter,
 * events read serex__now_ns itself.
 */
#include "trace_internal.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h> /* FILE, fprintf */

#include "alloc_internal.h"
#include "common_internal.h"
#include "exec_class_internal.h" /* serex__class_of: an executor's kind */
#include "observe_internal.h"    /* serex__obs_flags, event kinds */
#include "thread_internal.h"     /* serex__now_ns, mutex, yield */
#include "ticks_internal.h"      /* serex__ticks: the events' times */

#define TRACE_DEFAULT_EVENTS 16384u
#define TRACE_DEFAULT_THREADS 64u

/* --- the cycle counter: ticks_internal.h --- */

#define TRACE_CLOCK SEREX__TICKS_NAME
#define trace_ticks serex__ticks

/* --- events, rings and the shared words --- */

struct trace_event {
    uint64_t t;      /* trace_ticks() when recorded */
    const void *obj; /* the executor (a scheduler, for timer events) */
    serex_fn fn;
    const char *cls; /* its kind ("pool"), a static string; NULL: none */
    uint64_t id;
    int64_t a, b;  /* the kind's numbers (observe_internal.h) */
    uint32_t kind; /* enum serex__obs_kind */
};

_Static_assert(sizeof(struct trace_event) <= SEREX__CACHELINE,
               "an event fits in one cache line");

enum { RING_FREE, RING_IDLE, RING_BUSY, RING_CLOSED };
#define RING_TAG(gen, st) (((uint64_t)(gen) << 2) | (uint64_t)(st))

struct trace_ring {
    /* gen << 2 | RING_*: see the essay. Written by start, the owner and
     * stop, only as the essay says. A line of its own, so the owner's
     * swaps never share a line with another thread's. */
    _Alignas(SEREX__CACHELINE) _Atomic uint64_t state;
    /* Plain: written by start before its release of FREE; then read and
     * written (head) by the owner while BUSY, and read by the writer once
     * CLOSED. */
    struct trace_event *ev;
    uint64_t mask; /* events - 1 (a power of two) */
    uint64_t head; /* events ever written; the newest is at head - 1 */
};

static struct trace_ring trace_rings[SEREX_TRACE_MAX_THREADS];

/*
 * The claim word: gen << CLAIM_GEN_SHIFT | CLAIM_ON while recording |
 * the next ring index to hand out (saturating). Written by start
 * (release), claimers (compare-and-swap) and stop (clears ON).
 */
#define CLAIM_GEN_SHIFT 24
#define CLAIM_ON (UINT64_C(1) << 23)
#define CLAIM_NEXT_MAX (CLAIM_ON - 1)
static _Atomic uint64_t trace_claims;

/* The drop word: gen << DROP_GEN_SHIFT | events dropped (saturating). */
#define DROP_GEN_SHIFT 24
#define DROP_MAX ((UINT64_C(1) << DROP_GEN_SHIFT) - 1)
static _Atomic uint64_t trace_drops;

/* The calling thread's ring (NULL: none yet) and its tag, gen|IDLE. */
static SEREX__THREAD_LOCAL struct trace_ring *trace_mine;
static SEREX__THREAD_LOCAL uint64_t trace_mine_idle;
/* The gen in which this thread was refused a ring (0: none). */
static SEREX__THREAD_LOCAL uint64_t trace_refused;

/* The control side: start, stop, write and discard, under trace_mu. */
enum { TRACE_NONE, TRACE_RECORDING, TRACE_STOPPED };

struct trace_ctl {
    int state;
    uint64_t gen;               /* the current (or last) trace's */
    struct trace_event *events; /* nrings * cap, line-aligned */
    unsigned nrings;
    uint64_t cap; /* events per ring, a power of two */
    int64_t start_ns, stop_ns;
    uint64_t start_tick, stop_tick;
    uint64_t claimed; /* indexes drawn: threads that recorded */
};

static struct trace_ctl trace_ctl;
static serex__mutex trace_mu;
static serex__once trace_mu_once = SEREX__ONCE_INIT;

/* --- recording --- */

/* The executor's kind, read while it is alive (it is recording). */
static inline const char *trace_class_name(const void *obj)
{
    const struct serex__exec_class *c;

    if (obj == NULL)
        return NULL;
    c = serex__class_of((const serex_executor *)obj);
    return c != NULL ? c->name : NULL;
}

/* Writes one event into @r's next slot; @r is BUSY and ours. Field by
 * field: a full ring overwrites its oldest slot in place. */
static inline void trace_ring_put(struct trace_ring *r, unsigned kind,
                                  const void *obj, serex_fn fn, uint64_t id,
                                  int64_t a, int64_t b)
{
    struct trace_event *e = &r->ev[r->head & r->mask];

    e->t = trace_ticks();
    e->obj = obj;
    e->fn = fn;
    e->cls = trace_class_name(obj);
    e->id = id;
    e->a = a;
    e->b = b;
    e->kind = kind;
    r->head++;
}

/* release: pairs with the acquiring swap in ring_close, so the event
 * written and the head moved happen-before stop closes the ring (and so
 * before the writer reads it). */
static inline void ring_leave(struct trace_ring *r, uint64_t idle)
{
    atomic_store_explicit(&r->state, idle, memory_order_release);
}

/* Adds one to the drops of trace @gen, unless a newer trace has begun. */
static void trace_count_drop(uint64_t gen)
{
    /* relaxed: a count, read by the writer after stop and the mutex */
    uint64_t d = atomic_load_explicit(&trace_drops, memory_order_relaxed);

    while ((d >> DROP_GEN_SHIFT) == gen && (d & DROP_MAX) != DROP_MAX &&
           !atomic_compare_exchange_weak_explicit(&trace_drops, &d, d + 1,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

/*
 * Draws the next ring index of the trace recording now, and takes that
 * ring (FREE -> BUSY). Returns the ring, BUSY; or NULL with *@gen the
 * trace that refused us (beyond max_threads, or stopped meanwhile), or 0
 * if none records.
 */
static struct trace_ring *trace_claim(uint64_t *gen)
{
    /* acquire: pairs with the release store that starts a trace, so the
     * FREE states it stored before are what the swap below compares. */
    uint64_t w = atomic_load_explicit(&trace_claims, memory_order_acquire);
    uint64_t idx, free_tag;

    do {
        *gen = w >> CLAIM_GEN_SHIFT;
        if ((w & CLAIM_ON) == 0) {
            *gen = 0;
            return NULL;
        }
        if ((w & CLAIM_NEXT_MAX) == CLAIM_NEXT_MAX)
            return NULL; /* millions of threads: refuse the rest */
        /* acquire: as the load above, for the word it swaps or reads */
    } while (!atomic_compare_exchange_weak_explicit(
        &trace_claims, &w, w + 1, memory_order_acquire, memory_order_acquire));
    idx = w & CLAIM_NEXT_MAX;
    if (idx >= SEREX_TRACE_MAX_THREADS)
        return NULL;
    free_tag = RING_TAG(*gen, RING_FREE);
    /* acquire: pairs with ring_reset's release, so the ring's events,
     * mask and head are start's. Fails if the ring is beyond max_threads
     * (not FREE in this gen) or stop closed it first. */
    if (!atomic_compare_exchange_strong_explicit(
            &trace_rings[idx].state, &free_tag, RING_TAG(*gen, RING_BUSY),
            memory_order_acquire, memory_order_relaxed))
        return NULL;
    return &trace_rings[idx];
}

/* The first event of this thread in this trace, or one of a thread that
 * has no ring in it. */
static void trace_record_slow(unsigned kind, const void *obj, serex_fn fn,
                              uint64_t id, int64_t a, int64_t b)
{
    /* relaxed: a first look; trace_claim orders what matters */
    uint64_t w = atomic_load_explicit(&trace_claims, memory_order_relaxed);
    uint64_t gen = w >> CLAIM_GEN_SHIFT;
    struct trace_ring *r;

    if ((w & CLAIM_ON) == 0)
        return; /* stopped: observe.c's flag was a stale hint */
    if (trace_refused == gen) {
        trace_count_drop(gen);
        return;
    }
    r = trace_claim(&gen);
    if (r == NULL) {
        if (gen != 0) {
            trace_refused = gen;
            trace_count_drop(gen);
        }
        return;
    }
    trace_mine = r;
    trace_mine_idle = RING_TAG(gen, RING_IDLE);
    trace_ring_put(r, kind, obj, fn, id, a, b);
    ring_leave(r, trace_mine_idle);
}

void serex__trace_record(unsigned kind, const void *obj, serex_fn fn,
                         uint64_t id, int64_t a, int64_t b)
{
    struct trace_ring *r = trace_mine;
    uint64_t idle = trace_mine_idle;

    /*
     * relaxed: only this thread moves the word away from gen|IDLE with
     * our tag except stop, which moves it to CLOSED; so a success means
     * the word still holds what our own release store left, and the
     * ring's fields are ours (ordered to us by the acquire of our claim).
     * A failure (CLOSED, or a newer trace) reads nothing of the ring.
     */
    if (serex__likely(r != NULL) &&
        atomic_compare_exchange_strong_explicit(
            &r->state, &idle, idle + 1, /* BUSY */
            memory_order_relaxed, memory_order_relaxed)) {
        trace_ring_put(r, kind, obj, fn, id, a, b);
        ring_leave(r, trace_mine_idle);
        return;
    }
    trace_record_slow(kind, obj, fn, id, a, b);
}

/* --- control: start, stop, discard --- */

static void trace_mu_init(void)
{
    /* Cannot fail where serex runs (glibc allocates nothing for a
     * mutex); if it did, the first lock would fail loudly, not hang. */
    int rc = serex__mutex_init(&trace_mu);

    SEREX_ASSERT(rc == SEREX_OK);
    (void)rc;
}

static void trace_lock(void)
{
    serex__call_once(&trace_mu_once, trace_mu_init);
    serex__mutex_lock(&trace_mu);
}

/* The two clocks read together: the tick is the middle of two reads
 * around the nanoseconds, and of a few tries the one whose reads were
 * closest (the first call of the clock, or a preemption, is slow). */
static void trace_clock_pair(int64_t *ns, uint64_t *tick)
{
    uint64_t best = UINT64_MAX;

    for (int i = 0; i < 4; i++) {
        uint64_t t0 = trace_ticks();
        int64_t now = serex__now_ns();
        uint64_t t1 = trace_ticks();

        if (t1 - t0 < best) {
            best = t1 - t0;
            *ns = now;
            *tick = t0 + (t1 - t0) / 2;
        }
    }
}

static uint64_t trace_round_pow2(uint64_t n)
{
    uint64_t p = 1;

    while (p < n)
        p <<= 1;
    return p;
}

/* Makes ring @r the empty ring @ev of @cap events in trace @gen. Every
 * ring is CLOSED or was never used: nobody reads these fields now. */
static void ring_reset(struct trace_ring *r, struct trace_event *ev,
                       uint64_t cap, uint64_t gen)
{
    r->ev = ev;
    r->mask = cap - 1;
    r->head = 0;
    /* release: pairs with the claimer's acquiring swap (trace_claim) */
    atomic_store_explicit(&r->state, RING_TAG(gen, RING_FREE),
                          memory_order_release);
}

static int trace_start_locked(unsigned nrings, uint64_t cap)
{
    struct trace_event *ev;
    uint64_t gen;

    if (trace_ctl.state == TRACE_RECORDING)
        return SEREX_EREJECTED;
    ev = serex__alloc_aligned(SEREX__CACHELINE,
                              (size_t)(nrings * cap) * sizeof *ev);
    if (ev == NULL)
        return SEREX_ENOMEM;
    serex__free(trace_ctl.events);
    gen = ++trace_ctl.gen;
    trace_ctl = (struct trace_ctl){.state = TRACE_RECORDING,
                                   .gen = gen,
                                   .events = ev,
                                   .nrings = nrings,
                                   .cap = cap};
    for (unsigned i = 0; i < nrings; i++)
        ring_reset(&trace_rings[i], ev + (size_t)i * cap, cap, gen);
    /* relaxed: a late dropper of an older trace fails its swap on the
     * new gen; the writer reads the word after stop and the mutex */
    atomic_store_explicit(&trace_drops, gen << DROP_GEN_SHIFT,
                          memory_order_relaxed);
    trace_clock_pair(&trace_ctl.start_ns, &trace_ctl.start_tick);
    /* release: pairs with trace_claim's acquire: a claimer that sees
     * this gen sees the rings reset above */
    atomic_store_explicit(&trace_claims, gen << CLAIM_GEN_SHIFT | CLAIM_ON,
                          memory_order_release);
    /* relaxed: observe.c's hint; the claim word above decides */
    atomic_fetch_or_explicit(&serex__obs_flags, SEREX__OBS_TRACE,
                             memory_order_relaxed);
    return SEREX_OK;
}

int serex_trace_start(const serex_trace_config *cfg)
{
    size_t events = cfg != NULL ? cfg->events_per_thread : 0;
    unsigned threads = cfg != NULL ? cfg->max_threads : 0;
    int rc;

    if (events == 0)
        events = TRACE_DEFAULT_EVENTS;
    if (threads == 0)
        threads = TRACE_DEFAULT_THREADS;
    if (events > SEREX_TRACE_MAX_EVENTS || threads > SEREX_TRACE_MAX_THREADS)
        return SEREX_EINVAL;
    events = (size_t)trace_round_pow2(events);
    if ((uint64_t)events * threads > SIZE_MAX / sizeof(struct trace_event))
        return SEREX_ENOMEM; /* more than the address space (32-bit) */
    trace_lock();
    rc = trace_start_locked(threads, events);
    serex__mutex_unlock(&trace_mu);
    return rc;
}

/* Moves ring @r of trace @gen to CLOSED, waiting out its owner's event. */
static void ring_close(struct trace_ring *r, uint64_t gen)
{
    uint64_t s = RING_TAG(gen, RING_IDLE);
    unsigned spins = 0;

    /* acquire: pairs with ring_leave's release (see there) */
    while (!atomic_compare_exchange_weak_explicit(
        &r->state, &s, RING_TAG(gen, RING_CLOSED), memory_order_acquire,
        memory_order_relaxed)) {
        SEREX_ASSERT(s >> 2 == gen && (s & 3) != RING_CLOSED);
        if (s == RING_TAG(gen, RING_BUSY)) {
            /* a few instructions to wait, unless the owner was
             * preempted in them: then give it the CPU */
            if (++spins % 64 == 0)
                serex__thread_yield();
            else
                serex__cpu_relax();
            s = RING_TAG(gen, RING_IDLE);
        }
    }
}

int serex_trace_stop(void)
{
    uint64_t w;

    trace_lock();
    if (trace_ctl.state != TRACE_RECORDING) {
        serex__mutex_unlock(&trace_mu);
        return SEREX_EINVAL;
    }
    /* relaxed: the hint; the claim word and the rings decide */
    atomic_fetch_and_explicit(&serex__obs_flags, ~SEREX__OBS_TRACE,
                              memory_order_relaxed);
    /* relaxed: no index is drawn after this (claims swap on the word);
     * the rings' own swaps order what a claimer did before */
    w = atomic_fetch_and_explicit(&trace_claims, ~CLAIM_ON,
                                  memory_order_relaxed);
    for (unsigned i = 0; i < trace_ctl.nrings; i++)
        ring_close(&trace_rings[i], trace_ctl.gen);
    trace_clock_pair(&trace_ctl.stop_ns, &trace_ctl.stop_tick);
    trace_ctl.claimed = w & CLAIM_NEXT_MAX;
    trace_ctl.state = TRACE_STOPPED;
    serex__mutex_unlock(&trace_mu);
    return SEREX_OK;
}

void serex_trace_discard(void)
{
    trace_lock();
    if (trace_ctl.state == TRACE_STOPPED) {
        serex__free(trace_ctl.events);
        trace_ctl.events = NULL;
        trace_ctl.state = TRACE_NONE;
    }
    serex__mutex_unlock(&trace_mu);
}

/* --- writing: pairing --- */

/* A submit, keyed by (executor, id), and the begin it pairs with. */
struct flow_slot {
    const void *obj; /* NULL: empty */
    uint64_t id;
    unsigned sub_ring, beg_ring;
    uint64_t sub_seq, beg_seq; /* their places in their rings (head) */
    uint64_t flow;             /* its number; 0: no begin found */
};

/* What one write needs: the output, the clock's conversion, the scratch
 * tables (allocated for the write, freed after). */
struct trace_out {
    FILE *f;
    double ns_per_tick;
    uint64_t t0;      /* start's tick */
    uint64_t last_ns; /* the ring's previous event: times never go back */
    int64_t stop_rel_ns;
    struct flow_slot *flows;
    uint64_t flow_mask; /* slots - 1; no table when flows is NULL */
    uint64_t nflows;
    uint32_t *end_of; /* per kept event of the ring: its END's place + 1 */
    uint32_t *stack;  /* the BEGINs open while pairing a ring */
};

/* The events ring @i keeps: seqs [*first, head). */
static uint64_t ring_kept(unsigned i, uint64_t *first)
{
    const struct trace_ring *r = &trace_rings[i];
    uint64_t n = r->head < trace_ctl.cap ? r->head : trace_ctl.cap;

    *first = r->head - n;
    return n;
}

static const struct trace_event *ring_at(unsigned i, uint64_t seq)
{
    return &trace_rings[i].ev[seq & trace_rings[i].mask];
}

static uint64_t flow_hash(const void *obj, uint64_t id)
{
    uint64_t h = (uint64_t)(uintptr_t)obj ^ (id * UINT64_C(0x9E3779B97F4A7C15));

    h ^= h >> 29;
    h *= UINT64_C(0xBF58476D1CE4E5B9);
    return h ^ (h >> 32);
}

/* The slot of (@obj, @id): its own, or the empty one where it would go. */
static struct flow_slot *flow_find(struct trace_out *o, const void *obj,
                                   uint64_t id)
{
    uint64_t i = flow_hash(obj, id) & o->flow_mask;

    while (o->flows[i].obj != NULL &&
           (o->flows[i].obj != obj || o->flows[i].id != id))
        i = (i + 1) & o->flow_mask;
    return &o->flows[i];
}

/* Calls @fn on every kept event of @kind, ring by ring, oldest first. */
static void trace_each(struct trace_out *o, uint32_t kind,
                       void (*fn)(struct trace_out *, unsigned, uint64_t,
                                  const struct trace_event *))
{
    for (unsigned i = 0; i < trace_ctl.nrings; i++) {
        uint64_t first, n = ring_kept(i, &first);

        for (uint64_t s = first; s < first + n; s++)
            if (ring_at(i, s)->kind == kind)
                fn(o, i, s, ring_at(i, s));
    }
}

static void flow_count(struct trace_out *o, unsigned ring, uint64_t seq,
                       const struct trace_event *e)
{
    (void)ring, (void)seq, (void)e;
    o->nflows++;
}

/* A submit: the first of its key keeps the slot (keys are unique). */
static void flow_add_submit(struct trace_out *o, unsigned ring, uint64_t seq,
                            const struct trace_event *e)
{
    struct flow_slot *s;

    if (e->obj == NULL)
        return;
    s = flow_find(o, e->obj, e->id);
    if (s->obj == NULL)
        *s = (struct flow_slot){
            .obj = e->obj, .id = e->id, .sub_ring = ring, .sub_seq = seq};
}

/* A begin: takes its submit's flow, the first begin of the key only. */
static void flow_add_begin(struct trace_out *o, unsigned ring, uint64_t seq,
                           const struct trace_event *e)
{
    struct flow_slot *s;

    if (e->obj == NULL)
        return;
    s = flow_find(o, e->obj, e->id);
    if (s->obj != NULL && s->flow == 0) {
        s->flow = ++o->nflows;
        s->beg_ring = ring;
        s->beg_seq = seq;
    }
}

/* Builds the table of flows: submits, then the begins that match. */
static int flow_build(struct trace_out *o)
{
    uint64_t slots;

    o->nflows = 0;
    trace_each(o, SEREX__OBS_SUBMIT, flow_count);
    if (o->nflows == 0)
        return SEREX_OK;
    slots = trace_round_pow2(o->nflows * 2);
    if (slots > SIZE_MAX / sizeof *o->flows)
        return SEREX_ENOMEM;
    o->flows = serex__calloc((size_t)slots, sizeof *o->flows);
    if (o->flows == NULL)
        return SEREX_ENOMEM;
    o->flow_mask = slots - 1;
    o->nflows = 0;
    trace_each(o, SEREX__OBS_SUBMIT, flow_add_submit);
    trace_each(o, SEREX__OBS_BEGIN, flow_add_begin);
    return SEREX_OK;
}

/* The flow a submit starts, or a begin ends (0: none). */
static uint64_t flow_of(struct trace_out *o, unsigned ring, uint64_t seq,
                        const struct trace_event *e)
{
    const struct flow_slot *s;

    if (o->flows == NULL || e->obj == NULL)
        return 0;
    s = flow_find(o, e->obj, e->id);
    if (s->obj == NULL || s->flow == 0)
        return 0;
    if (e->kind == SEREX__OBS_SUBMIT)
        return s->sub_ring == ring && s->sub_seq == seq ? s->flow : 0;
    return s->beg_ring == ring && s->beg_seq == seq ? s->flow : 0;
}

/* Whether END @e closes BEGIN @b: the same task of the same executor. */
static bool trace_same_task(const struct trace_event *b,
                            const struct trace_event *e)
{
    return b->obj == e->obj && b->id == e->id && b->fn == e->fn;
}

/*
 * Pairs ring @i's BEGINs with their ENDs: o->end_of[k] = place of the
 * END + 1, for the k-th kept event, or 0 (still running at stop). An END
 * whose BEGIN was overwritten has nothing open to close and is left out;
 * one that closes a BEGIN below the top of the stack closes the ones
 * above it too (they ended unseen).
 */
static void ring_pair(struct trace_out *o, unsigned i)
{
    uint64_t first, n = ring_kept(i, &first);
    uint32_t depth = 0;

    for (uint64_t k = 0; k < n; k++) {
        const struct trace_event *e = ring_at(i, first + k);
        uint32_t d = depth;

        o->end_of[k] = 0;
        if (e->kind == SEREX__OBS_BEGIN) {
            o->stack[depth++] = (uint32_t)k;
            continue;
        }
        if (e->kind != SEREX__OBS_END)
            continue;
        while (d > 0 &&
               !trace_same_task(ring_at(i, first + o->stack[d - 1]), e))
            d--;
        if (d == 0)
            continue; /* its BEGIN was overwritten */
        for (; depth >= d; depth--)
            o->end_of[o->stack[depth - 1]] = (uint32_t)k + 1;
    }
}

/* --- writing: JSON --- */

/* Nanoseconds since start of an event's tick, never before the ring's
 * previous event (a counter read early by the CPU could be). */
static uint64_t trace_rel_ns(struct trace_out *o, uint64_t t)
{
    double ns = t > o->t0 ? (double)(t - o->t0) * o->ns_per_tick : 0.0;
    uint64_t v = (uint64_t)ns;

    if (v < o->last_ns)
        v = o->last_ns;
    o->last_ns = v;
    return v;
}

/* Writes @ns as microseconds with three decimals (Chrome's unit). */
static void out_us(struct trace_out *o, uint64_t ns)
{
    fprintf(o->f, "%llu.%03llu", (unsigned long long)(ns / 1000),
            (unsigned long long)(ns % 1000));
}

/* Opens one event: {"ph":..,"pid":1,"tid":..,"ts":.. (the caller closes
 * it with "}"). Every event but the first (the process's name) follows a
 * comma. */
static void out_open(struct trace_out *o, const char *ph, unsigned tid,
                     uint64_t ns)
{
    fprintf(o->f, ",\n{\"ph\":\"%s\",\"pid\":1,\"tid\":%u,\"ts\":", ph, tid);
    out_us(o, ns);
}

/* An address as "0x..." on every platform (%p's form is the C library's:
 * "(nil)", no 0x on Windows), a function's too (which %p cannot take). */
static void out_addr(struct trace_out *o, const char *key, uintptr_t p)
{
    fprintf(o->f, ",\"%s\":\"0x%llx\"", key, (unsigned long long)p);
}

static const char *trace_cls(const struct trace_event *e)
{
    return e->cls != NULL ? e->cls : "executor";
}

/* Opens the args, with the executor every event has. */
static void out_args(struct trace_out *o, const struct trace_event *e)
{
    fprintf(o->f, ",\"args\":{\"executor\":\"0x%llx\"",
            (unsigned long long)(uintptr_t)e->obj);
}

/* The args every task-shaped event has: executor, fn, id. */
static void out_task_args(struct trace_out *o, const struct trace_event *e)
{
    out_args(o, e);
    out_addr(o, "fn", (uintptr_t)e->fn);
    fprintf(o->f, ",\"id\":%llu", (unsigned long long)e->id);
}

static void out_flow(struct trace_out *o, const char *ph, unsigned tid,
                     uint64_t ns, uint64_t flow)
{
    out_open(o, ph, tid, ns);
    fprintf(o->f, ",\"id\":%llu,\"name\":\"task\",\"cat\":\"flow\"%s}",
            (unsigned long long)flow, ph[0] == 'f' ? ",\"bp\":\"e\"" : "");
}

/* A BEGIN and its END as one complete event ("X"), and the arrow's end. */
static void out_task(struct trace_out *o, unsigned i, uint64_t first,
                     uint64_t k, uint64_t ns)
{
    const struct trace_event *e = ring_at(i, first + k);
    uint32_t end = o->end_of[k];
    uint64_t end_ns = o->stop_rel_ns > 0 ? (uint64_t)o->stop_rel_ns : ns;
    uint64_t flow = flow_of(o, i, first + k, e);

    if (end != 0) {
        uint64_t saved = o->last_ns;

        end_ns = trace_rel_ns(o, ring_at(i, first + end - 1)->t);
        o->last_ns = saved; /* the END's own turn comes later */
    }
    out_open(o, "X", i + 1, ns);
    fprintf(o->f, ",\"dur\":");
    out_us(o, end_ns > ns ? end_ns - ns : 0);
    fprintf(o->f, ",\"name\":\"%s ", trace_cls(e));
    fprintf(o->f, "0x%llx\",\"cat\":\"%s\"",
            (unsigned long long)(uintptr_t)e->fn, trace_cls(e));
    out_task_args(o, e);
    out_addr(o, "arg", (uintptr_t)e->b);
    if (e->a >= 0) /* -1: the executor did not time it */
        fprintf(o->f, ",\"wait_ns\":%lld", (long long)e->a);
    if (end == 0)
        fprintf(o->f, ",\"unfinished\":true");
    else if (ring_at(i, first + end - 1)->a >= 0)
        fprintf(o->f, ",\"run_ns\":%lld",
                (long long)ring_at(i, first + end - 1)->a);
    fprintf(o->f, "}}");
    if (flow != 0)
        out_flow(o, "f", i + 1, ns, flow);
}

/* A submit: a 1 ns slice, so that the arrow has a slice to start from
 * even on a thread that runs no task, and the arrow's start. */
static void out_submit(struct trace_out *o, unsigned i, uint64_t seq,
                       uint64_t ns)
{
    const struct trace_event *e = ring_at(i, seq);
    uint64_t flow = flow_of(o, i, seq, e);

    out_open(o, "X", i + 1, ns);
    fprintf(o->f, ",\"dur\":0.001,\"name\":\"submit %s\",\"cat\":\"submit\"",
            trace_cls(e));
    out_task_args(o, e);
    fprintf(o->f, "}}");
    if (flow != 0)
        out_flow(o, "s", i + 1, ns, flow);
}

/* Park, unpark, steal and the timers: instants on the thread's track. */
static void out_instant(struct trace_out *o, unsigned i,
                        const struct trace_event *e, uint64_t ns)
{
    static const char *const names[] = {
        [SEREX__OBS_PARK] = "park",
        [SEREX__OBS_UNPARK] = "unpark",
        [SEREX__OBS_STEAL] = "steal",
        [SEREX__OBS_TIMER_SET] = "timer set",
        [SEREX__OBS_TIMER_FIRE] = "timer fire",
        [SEREX__OBS_TIMER_CANCEL] = "timer cancel",
    };

    out_open(o, "i", i + 1, ns);
    fprintf(o->f, ",\"s\":\"t\",\"name\":\"%s\",\"cat\":\"%s\"", names[e->kind],
            trace_cls(e));
    switch (e->kind) {
    case SEREX__OBS_PARK:
    case SEREX__OBS_UNPARK:
        out_args(o, e);
        fprintf(o->f, ",\"worker\":%lld}}", (long long)e->a);
        return;
    case SEREX__OBS_STEAL:
        out_args(o, e);
        fprintf(o->f, ",\"victim\":%lld,\"n\":%lld}}", (long long)e->a,
                (long long)e->b);
        return;
    case SEREX__OBS_TIMER_CANCEL:
        out_args(o, e);
        fprintf(o->f, ",\"id\":%llu}}", (unsigned long long)e->id);
        return;
    default: /* TIMER_SET (delay), TIMER_FIRE (lateness) */
        out_task_args(o, e);
        fprintf(o->f, ",\"%s\":%lld}}",
                e->kind == SEREX__OBS_TIMER_SET ? "delay_ns" : "late_ns",
                (long long)e->a);
    }
}

/* Ring @i's events, oldest first: one track, sorted by time. */
static void out_ring(struct trace_out *o, unsigned i)
{
    uint64_t first, n = ring_kept(i, &first);

    ring_pair(o, i);
    o->last_ns = 0;
    for (uint64_t k = 0; k < n; k++) {
        const struct trace_event *e = ring_at(i, first + k);
        uint64_t ns = trace_rel_ns(o, e->t);

        switch (e->kind) {
        case SEREX__OBS_BEGIN: out_task(o, i, first, k, ns); break;
        case SEREX__OBS_END: break; /* written with its BEGIN */
        case SEREX__OBS_SUBMIT: out_submit(o, i, first + k, ns); break;
        case SEREX__OBS_PARK:
        case SEREX__OBS_UNPARK:
        case SEREX__OBS_STEAL:
        case SEREX__OBS_TIMER_SET:
        case SEREX__OBS_TIMER_FIRE:
        case SEREX__OBS_TIMER_CANCEL: out_instant(o, i, e, ns); break;
        default: break; /* a kind newer than this writer */
        }
    }
}

/* The first event of ring @i of one of two kinds, or NULL. */
static const struct trace_event *ring_find(unsigned i, uint32_t k1, uint32_t k2)
{
    uint64_t first, n = ring_kept(i, &first);

    for (uint64_t s = first; s < first + n; s++)
        if (ring_at(i, s)->kind == k1 || ring_at(i, s)->kind == k2)
            return ring_at(i, s);
    return NULL;
}

/* A name for ring @i's track: the worker it parked as, if it parked;
 * else the executor of the first task it ran, if it ran one. */
static void out_thread_name(struct trace_out *o, unsigned i)
{
    uint64_t first, n = ring_kept(i, &first);
    const struct trace_event *w, *b;

    w = ring_find(i, SEREX__OBS_PARK, SEREX__OBS_UNPARK);
    b = w != NULL ? NULL : ring_find(i, SEREX__OBS_BEGIN, SEREX__OBS_BEGIN);
    fprintf(o->f,
            ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%u,"
            "\"name\":\"thread_name\",\"args\":{\"name\":\"",
            i + 1);
    if (w != NULL)
        fprintf(o->f, "%s worker %lld (0x%llx)", trace_cls(w), (long long)w->a,
                (unsigned long long)(uintptr_t)w->obj);
    else if (b != NULL)
        fprintf(o->f, "thread %u (%s 0x%llx)", i + 1, trace_cls(b),
                (unsigned long long)(uintptr_t)b->obj);
    else
        fprintf(o->f, "thread %u", i + 1);
    fprintf(o->f, "\",\"events\":%llu,\"overwritten\":%llu}}",
            (unsigned long long)n,
            (unsigned long long)(trace_rings[i].head - n));
    fprintf(o->f,
            ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%u,"
            "\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%u}}",
            i + 1, i + 1);
}

/* The rings that threads claimed (the others are empty). */
static unsigned trace_used_rings(void)
{
    return trace_ctl.claimed < trace_ctl.nrings ? (unsigned)trace_ctl.claimed
                                                : trace_ctl.nrings;
}

static void out_other_data(struct trace_out *o)
{
    uint64_t kept = 0, over = 0, first;
    /* relaxed: read after stop (the mutex orders); a thread still in
     * its drop path as stop ran may add one after */
    uint64_t drops = atomic_load_explicit(&trace_drops, memory_order_relaxed);
    unsigned used = trace_used_rings();

    for (unsigned i = 0; i < used; i++) {
        uint64_t n = ring_kept(i, &first);

        kept += n;
        over += trace_rings[i].head - n;
    }
    fprintf(o->f,
            "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{"
            "\"serex_version\":\"%s\",\"clock\":\"%s\",\"ns_per_tick\":%.9g,"
            "\"duration_ns\":%lld,\"events_per_thread\":%llu,"
            "\"max_threads\":%u,\"threads\":%u,\"threads_dropped\":%llu,"
            "\"events\":%llu,\"events_overwritten\":%llu,"
            "\"events_dropped\":%llu}}\n",
            serex_version(), TRACE_CLOCK, o->ns_per_tick,
            (long long)o->stop_rel_ns, (unsigned long long)trace_ctl.cap,
            trace_ctl.nrings, used,
            (unsigned long long)(trace_ctl.claimed - used),
            (unsigned long long)kept, (unsigned long long)over,
            (unsigned long long)(drops & DROP_MAX));
}

/*
 * Nanoseconds per tick: the ratio between start's pair of clock readings
 * and a pair read now, at least TRACE_CALIBRATE_NS after start (the
 * counter's rate is constant, so a later pair only measures it better: a
 * pair is off by the tens of nanoseconds between its two reads, which on
 * a trace of a few microseconds would be percents). A trace written at
 * once after a short recording spins here for the rest of the 1 ms.
 */
#define TRACE_CALIBRATE_NS INT64_C(1000000)

static double trace_ns_per_tick(void)
{
    int64_t ns = 0; /* set by the first pair (gcc cannot tell) */
    uint64_t tick = 0;

    do
        trace_clock_pair(&ns, &tick);
    while (ns - trace_ctl.start_ns < TRACE_CALIBRATE_NS);
    if (tick <= trace_ctl.start_tick)
        return 1.0; /* a counter that does not count: ticks are taken as ns */
    return (double)(ns - trace_ctl.start_ns) /
           (double)(tick - trace_ctl.start_tick);
}

static int trace_out_init(struct trace_out *o, FILE *f)
{
    *o = (struct trace_out){.f = f, .t0 = trace_ctl.start_tick};
    o->ns_per_tick = trace_ns_per_tick();
    o->stop_rel_ns = trace_ctl.stop_ns - trace_ctl.start_ns;
    o->end_of = serex__alloc((size_t)trace_ctl.cap * sizeof *o->end_of);
    o->stack = serex__alloc((size_t)trace_ctl.cap * sizeof *o->stack);
    if (o->end_of == NULL || o->stack == NULL)
        return SEREX_ENOMEM;
    return flow_build(o);
}

static void trace_out_fini(struct trace_out *o)
{
    serex__free(o->flows);
    serex__free(o->stack);
    serex__free(o->end_of);
}

static int trace_write_locked(FILE *f)
{
    struct trace_out o;
    unsigned used = trace_used_rings();
    int rc;

    if (trace_ctl.state == TRACE_RECORDING)
        return SEREX_EREJECTED;
    if (trace_ctl.state != TRACE_STOPPED)
        return SEREX_EINVAL;
    rc = trace_out_init(&o, f);
    if (rc == SEREX_OK) {
        fprintf(f, "{\"traceEvents\":[\n{\"ph\":\"M\",\"pid\":1,\"name\":"
                   "\"process_name\","
                   "\"args\":{\"name\":\"serex\"}}");
        for (unsigned i = 0; i < used; i++)
            out_thread_name(&o, i);
        for (unsigned i = 0; i < used; i++)
            out_ring(&o, i);
        out_other_data(&o);
        if (fflush(f) != 0 || ferror(f))
            rc = SEREX_EINVAL;
    }
    trace_out_fini(&o);
    return rc;
}

int serex_trace_write(FILE *out)
{
    int rc;

    if (out == NULL)
        return SEREX_EINVAL;
    trace_lock();
    rc = trace_write_locked(out);
    serex__mutex_unlock(&trace_mu);
    return rc;
}
