/* SPDX-License-Identifier: MIT */
/*
 * test_trace.c - the flight recorder (serex/trace.h): the control calls'
 * statuses and misuse; events recorded from several threads through the
 * executors' entry points (observe_internal.h), written out, parsed back
 * (test_json.h) and checked: the document's shape, one track per thread,
 * time sorted per track, slices nested, every flow's start paired with
 * one end on another thread, the instants, and counts equal to what was
 * recorded; a full ring keeps its newest events and counts the others; a
 * thread beyond max_threads has its events dropped and counted; a thread
 * claims a new ring in a new trace; stop, write, start and discard while
 * threads record (nothing torn: ThreadSanitizer runs this too);
 * allocation failure in start and in write; a real pool's tasks.
 */
#include "test_util.h"

#include <stdio.h>  /* tmpfile */
#include <stdlib.h> /* malloc, qsort */
#include <string.h> /* strcmp, strncmp */

#include "observe_internal.h"
#include "test_json.h"
#include "trace_internal.h"

#define MAXTID ((int)SEREX_TRACE_MAX_THREADS + 1)
#define MAXDEPTH 64
#define NT 4      /* threads of the multi-thread case */
#define NTASK 100 /* tasks each of them submits */

struct fixture {
    serex_executor *ex[2]; /* manual executors: the events' executors */
    struct tj *doc;        /* the last trace read back */
};

/* --- reading a trace back, and what it holds --- */

struct flow_end {
    double id, ts;
    int tid;
};

/* One track while checking: its open slices, the last event's time, and
 * the last event (for the flow events that must follow their slice). */
struct track {
    double end[MAXDEPTH];
    int depth;
    double last_ts;
    const struct tj *last;
};

/* What a trace holds, counted by check_trace. */
struct seen {
    size_t tasks, submits, unfinished, instants, flows;
    size_t n_s, n_f;
    struct flow_end s[8192], f[8192];
    struct track tracks[MAXTID];
    bool named[MAXTID];
};

static double num(const struct tj *obj, const char *key)
{
    const struct tj *v = tj_get(obj, key);

    assert_non_null(v);
    assert_int_equal(v->type, TJ_NUM);
    return v->num;
}

static const char *str(const struct tj *obj, const char *key)
{
    const struct tj *v = tj_get(obj, key);

    assert_non_null(v);
    assert_int_equal(v->type, TJ_STR);
    return v->str;
}

static const char *cat_of(const struct tj *e)
{
    const struct tj *c = tj_get(e, "cat");

    return c != NULL && c->type == TJ_STR ? c->str : "";
}

/* A complete event: inside the slice it starts in, if any. */
static void see_slice(struct seen *s, struct track *t, const struct tj *e)
{
    double ts = num(e, "ts"), dur = num(e, "dur");

    assert_true(dur >= 0);
    /* a slice that ends where the next starts (one tick of a coarse
     * counter: arm64's, under qemu) is not its parent: 1e-6 for the
     * rounding of ts + dur in doubles */
    while (t->depth > 0 && t->end[t->depth - 1] <= ts + 1e-6)
        t->depth--;
    if (t->depth > 0) /* nested: ends inside its parent (1e-6: rounding) */
        assert_true(ts + dur <= t->end[t->depth - 1] + 1e-6);
    assert_true(t->depth < MAXDEPTH);
    t->end[t->depth++] = ts + dur;
    if (strcmp(cat_of(e), "submit") == 0) {
        s->submits++;
    } else {
        const struct tj *args = tj_get(e, "args");

        s->tasks++;
        if (tj_get(args, "unfinished") != NULL)
            s->unfinished++;
    }
}

/* A flow event: right after the slice it binds to, at its start. */
static void see_flow(struct seen *s, struct track *t, const struct tj *e,
                     int tid)
{
    const char *ph = str(e, "ph");
    struct flow_end fe = {num(e, "id"), num(e, "ts"), tid};

    assert_non_null(t->last);
    assert_string_equal(str(t->last, "ph"), "X");
    assert_true(num(t->last, "ts") == fe.ts);
    if (ph[0] == 's') {
        assert_string_equal(cat_of(t->last), "submit");
        assert_true(s->n_s < 8192);
        s->s[s->n_s++] = fe;
    } else {
        assert_string_not_equal(cat_of(t->last), "submit");
        assert_string_equal(str(e, "bp"), "e");
        assert_true(s->n_f < 8192);
        s->f[s->n_f++] = fe;
    }
}

static void see_event(struct seen *s, const struct tj *e)
{
    const char *ph = str(e, "ph");
    struct track *t;
    int tid;

    assert_true(num(e, "pid") == 1);
    if (strcmp(ph, "M") == 0) {
        if (strcmp(str(e, "name"), "thread_name") == 0)
            s->named[(int)num(e, "tid")] = true;
        return;
    }
    tid = (int)num(e, "tid");
    assert_true(tid >= 1 && tid < MAXTID);
    assert_true(s->named[tid]); /* its name came first */
    t = &s->tracks[tid];
    assert_true(num(e, "ts") >= t->last_ts); /* sorted per track */
    t->last_ts = num(e, "ts");
    if (strcmp(ph, "X") == 0) {
        see_slice(s, t, e);
    } else if (strcmp(ph, "s") == 0 || strcmp(ph, "f") == 0) {
        see_flow(s, t, e, tid);
    } else if (strcmp(ph, "i") == 0) {
        assert_string_equal(str(e, "s"), "t");
        s->instants++;
    } else
        fail_msg("unexpected phase %s", ph);
    if (ph[0] != 's' && ph[0] != 'f')
        t->last = e;
}

static int by_id(const void *a, const void *b)
{
    const struct flow_end *x = a, *y = b;

    return (x->id > y->id) - (x->id < y->id);
}

/* Every flow start has one end with its id, on another thread, no
 * earlier than the start. */
static void check_flows(struct seen *s)
{
    assert_int_equal(s->n_s, s->n_f);
    qsort(s->s, s->n_s, sizeof s->s[0], by_id);
    qsort(s->f, s->n_f, sizeof s->f[0], by_id);
    for (size_t i = 0; i < s->n_s; i++) {
        assert_true(s->s[i].id == s->f[i].id);
        assert_true(i == 0 || s->s[i].id != s->s[i - 1].id);
        assert_true(s->s[i].ts <= s->f[i].ts);
    }
    s->flows = s->n_s;
}

/* The document's shape, and what it holds, into @s. */
static void check_trace(const struct tj *doc, struct seen *s)
{
    const struct tj *evs = tj_get(doc, "traceEvents");

    memset(s, 0, sizeof *s);
    assert_non_null(evs);
    assert_int_equal(evs->type, TJ_ARR);
    assert_string_equal(str(doc, "displayTimeUnit"), "ns");
    assert_non_null(tj_get(doc, "otherData"));
    for (size_t i = 0; i < evs->n; i++)
        see_event(s, &evs->items[i]);
    check_flows(s);
}

/* Writes the stopped trace to a file, reads it back, parses it. */
static const struct tj *trace_read(struct fixture *f, struct seen *s)
{
    FILE *fp = tmpfile();
    long n;
    char *text;

    assert_non_null(fp);
    assert_int_equal(serex_trace_write(fp), SEREX_OK);
    n = ftell(fp);
    assert_true(n > 0);
    rewind(fp);
    text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, fp), (size_t)n);
    text[n] = '\0';
    fclose(fp);
    tj_free(f->doc);
    f->doc = tj_parse(text);
    free(text);
    assert_non_null(f->doc);
    check_trace(f->doc, s);
    return f->doc;
}

static double other(const struct tj *doc, const char *key)
{
    return num(tj_get(doc, "otherData"), key);
}

/* The events whose name is @name (and tid is @tid, unless 0). */
static size_t count_named(const struct tj *doc, const char *name, int tid)
{
    const struct tj *evs = tj_get(doc, "traceEvents");
    size_t n = 0;

    for (size_t i = 0; i < evs->n; i++) {
        const struct tj *nm = tj_get(&evs->items[i], "name");

        if (nm != NULL && strcmp(nm->str, name) == 0 &&
            (tid == 0 || num(&evs->items[i], "tid") == tid))
            n++;
    }
    return n;
}

/* --- fixture --- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    if (f == NULL)
        return -1;
    (void)serex_trace_stop(); /* whatever an earlier case left */
    serex_trace_discard();
    if (serex_manual_create(&f->ex[0]) != SEREX_OK ||
        serex_manual_create(&f->ex[1]) != SEREX_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    serex__alloc_fail_nth(0);
    (void)serex_trace_stop();
    serex_trace_discard();
    for (int i = 0; i < 2; i++)
        if (f->ex[i] != NULL)
            assert_int_equal(serex_destroy(f->ex[i]), SEREX_OK);
    tj_free(f->doc);
    free(f);
    return 0;
}

static void fn_a(void *arg)
{
    (void)arg;
}

static void fn_b(void *arg)
{
    (void)arg;
}

/* --- statuses --- */

static void trace_control_calls_say_what_state_they_found(void **state)
{
    serex_trace_config big = {.max_threads = SEREX_TRACE_MAX_THREADS + 1};
    serex_trace_config many = {.events_per_thread = SEREX_TRACE_MAX_EVENTS + 1};
    FILE *fp = tmpfile();

    (void)state;
    assert_non_null(fp);
    assert_int_equal(serex_trace_stop(), SEREX_EINVAL);    /* none */
    assert_int_equal(serex_trace_write(fp), SEREX_EINVAL); /* none */
    assert_int_equal(serex_trace_write(NULL), SEREX_EINVAL);
    assert_int_equal(serex_trace_start(&big), SEREX_EINVAL);
    assert_int_equal(serex_trace_start(&many), SEREX_EINVAL);
    assert_int_equal(serex_trace_stop(), SEREX_EINVAL); /* still none */
    assert_int_equal(serex_trace_start(NULL), SEREX_OK);
    assert_int_equal(serex_trace_start(NULL), SEREX_EREJECTED);
    assert_int_equal(serex_trace_write(fp), SEREX_EREJECTED);
    serex_trace_discard(); /* recording: nothing */
    assert_int_equal(ftell(fp), 0);
    assert_int_equal(serex_trace_stop(), SEREX_OK);
    assert_int_equal(serex_trace_stop(), SEREX_EINVAL);
    assert_int_equal(serex_trace_write(NULL), SEREX_EINVAL);
    assert_int_equal(serex_trace_write(fp), SEREX_OK);
    assert_true(ftell(fp) > 0);
    assert_int_equal(serex_trace_write(fp), SEREX_OK); /* again */
    serex_trace_discard();
    serex_trace_discard(); /* none: nothing */
    assert_int_equal(serex_trace_write(fp), SEREX_EINVAL);
    fclose(fp);
}

/* An empty trace is a valid document with its counts at zero. */
static void trace_with_no_events_is_an_empty_document(void **state)
{
    struct fixture *f = *state;
    static struct seen s;
    const struct tj *doc;

    assert_int_equal(serex_trace_start(NULL), SEREX_OK);
    assert_int_equal(serex_trace_stop(), SEREX_OK);
    doc = trace_read(f, &s);
    assert_int_equal(s.tasks + s.submits + s.instants, 0);
    assert_true(other(doc, "events") == 0);
    assert_true(other(doc, "threads") == 0);
    assert_true(other(doc, "events_per_thread") == 16384);
    assert_true(other(doc, "max_threads") == 64);
}

/* --- several threads --- */

struct mt {
    serex_executor *ex[2];
    atomic_int arrived; /* the barrier between submitting and running */
};

struct mt_thread {
    struct mt *mt;
    int t;
};

static uint64_t task_id(int t, int i)
{
    return (uint64_t)t << 32 | (uint64_t)i;
}

static void mt_barrier(struct mt *mt)
{
    int64_t deadline = test_now_ns() + TEST_TIMEOUT;

    /* seq_cst: a test's barrier, no protocol to argue */
    atomic_fetch_add(&mt->arrived, 1);
    while (atomic_load(&mt->arrived) < NT && test_now_ns() < deadline)
        serex__thread_yield();
}

/* Submits NTASK tasks, then runs those of the next thread (every 4th
 * with a task of ex[1] run inline in it), with instants between. */
static int mt_main(void *arg)
{
    struct mt_thread *me = arg;
    struct mt *mt = me->mt;
    int t = me->t, from = (t + 1) % NT;

    for (int i = 0; i < NTASK; i++)
        serex__obs_submit(mt->ex[0], fn_a, task_id(t, i));
    serex__obs_park(mt->ex[0], (unsigned)t);
    serex__obs_unpark(mt->ex[0], (unsigned)t);
    mt_barrier(mt);
    serex__obs_steal(mt->ex[0], (unsigned)from, 3);
    for (int i = 0; i < NTASK; i++) {
        serex__obs_begin(mt->ex[0], fn_a, NULL, task_id(from, i), i);
        if (i % 4 == 0) {
            serex__obs_begin(mt->ex[1], fn_b, NULL, task_id(t, i), -1);
            serex__obs_end(mt->ex[1], fn_b, task_id(t, i), 5);
        }
        serex__obs_end(mt->ex[0], fn_a, task_id(from, i), 10);
    }
    serex__obs_timer_set(mt->ex[1], fn_b, (uint64_t)t, 1000);
    serex__obs_timer_fire(mt->ex[1], fn_b, (uint64_t)t, 7);
    serex__obs_timer_cancel(mt->ex[1], (uint64_t)t);
    return 0;
}

/* A slice of the executor and fn: its name, and its args. */
static void check_a_slice(const struct tj *doc)
{
    const struct tj *evs = tj_get(doc, "traceEvents");
    char name[64];
    size_t n = 0;

    snprintf(name, sizeof name, "manual 0x%llx",
             (unsigned long long)(uintptr_t)fn_a);
    for (size_t i = 0; i < evs->n; i++) {
        const struct tj *e = &evs->items[i], *args = tj_get(e, "args");

        if (strcmp(str(e, "ph"), "X") != 0 || strcmp(str(e, "name"), name) != 0)
            continue;
        n++;
        assert_string_equal(cat_of(e), "manual");
        assert_string_equal(str(args, "fn"), name + strlen("manual "));
        assert_true(num(args, "run_ns") == 10);
        assert_true(num(args, "wait_ns") ==
                    (double)((uint64_t)num(args, "id") & 0xffffffffu));
    }
    assert_int_equal(n, NT * NTASK);
}

static void trace_events_of_threads_pair_up(void **state)
{
    struct fixture *f = *state;
    struct mt mt = {.ex = {f->ex[0], f->ex[1]}};
    struct mt_thread th[NT];
    serex__thread thr[NT];
    static struct seen s;
    const struct tj *doc;
    const size_t inner = NT * ((NTASK + 3) / 4);

    assert_int_equal(serex_trace_start(NULL), SEREX_OK);
    for (int t = 0; t < NT; t++) {
        th[t] = (struct mt_thread){&mt, t};
        assert_int_equal(serex__thread_start(&thr[t], mt_main, &th[t]),
                         SEREX_OK);
    }
    for (int t = 0; t < NT; t++)
        serex__thread_join(thr[t]);
    assert_int_equal(serex_trace_stop(), SEREX_OK);
    doc = trace_read(f, &s);

    assert_int_equal(s.submits, NT * NTASK);
    assert_int_equal(s.tasks, NT * NTASK + inner);
    assert_int_equal(s.unfinished, 0);
    assert_int_equal(s.flows, NT * NTASK); /* the inner ones: no submit */
    for (size_t i = 0; i < s.n_s; i++)
        assert_int_not_equal(s.s[i].tid, s.f[i].tid); /* across threads */
    assert_int_equal(s.instants, NT * 6);
    assert_int_equal(count_named(doc, "park", 0), NT);
    assert_int_equal(count_named(doc, "unpark", 0), NT);
    assert_int_equal(count_named(doc, "steal", 0), NT);
    assert_int_equal(count_named(doc, "timer set", 0), NT);
    assert_int_equal(count_named(doc, "timer fire", 0), NT);
    assert_int_equal(count_named(doc, "timer cancel", 0), NT);
    assert_int_equal(count_named(doc, "thread_name", 0), NT);
    check_a_slice(doc);
    assert_true(other(doc, "threads") == NT);
    assert_true(other(doc, "events") ==
                NT * (3.0 * NTASK + 2.0 * inner / NT + 6));
    assert_true(other(doc, "events_overwritten") == 0);
    assert_true(other(doc, "events_dropped") == 0);
    assert_true(other(doc, "threads_dropped") == 0);
}

/* --- limits --- */

/* 8 events a ring (5 rounds up to 8): of B0 E0 .. B4 E4 B5 the newest 8
 * stay: E1 (its BEGIN gone: left out), B2-E4 (three slices) and B5,
 * still running at stop. */
static void trace_full_ring_keeps_the_newest(void **state)
{
    struct fixture *f = *state;
    serex_trace_config cfg = {.events_per_thread = 5};
    static struct seen s;
    const struct tj *doc, *evs;
    double ids[8];
    size_t n = 0;

    assert_int_equal(serex_trace_start(&cfg), SEREX_OK);
    for (int i = 0; i < 6; i++) {
        serex__obs_begin(f->ex[0], fn_a, NULL, (uint64_t)i, 0);
        if (i < 5)
            serex__obs_end(f->ex[0], fn_a, (uint64_t)i, 1);
    }
    assert_int_equal(serex_trace_stop(), SEREX_OK);
    doc = trace_read(f, &s);
    assert_int_equal(s.tasks, 4);
    assert_int_equal(s.unfinished, 1);
    assert_true(other(doc, "events_per_thread") == 8);
    assert_true(other(doc, "events") == 8);
    assert_true(other(doc, "events_overwritten") == 3);
    evs = tj_get(doc, "traceEvents");
    for (size_t i = 0; i < evs->n; i++)
        if (strcmp(str(&evs->items[i], "ph"), "X") == 0 && n < 8)
            ids[n++] = num(tj_get(&evs->items[i], "args"), "id");
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++)
        assert_true(ids[i] == 2.0 + (double)i);
}

/* Instants too: a ring of 8 after 20 parks holds workers 12..19. */
static void trace_full_ring_counts_what_it_overwrote(void **state)
{
    struct fixture *f = *state;
    serex_trace_config cfg = {.events_per_thread = 8};
    static struct seen s;
    const struct tj *doc, *evs;
    unsigned want = 12;

    assert_int_equal(serex_trace_start(&cfg), SEREX_OK);
    for (unsigned i = 0; i < 20; i++)
        serex__obs_park(f->ex[0], i);
    assert_int_equal(serex_trace_stop(), SEREX_OK);
    doc = trace_read(f, &s);
    assert_int_equal(s.instants, 8);
    assert_true(other(doc, "events_overwritten") == 12);
    evs = tj_get(doc, "traceEvents");
    for (size_t i = 0; i < evs->n; i++)
        if (strcmp(str(&evs->items[i], "ph"), "i") == 0)
            assert_true(num(tj_get(&evs->items[i], "args"), "worker") ==
                        want++);
    assert_int_equal(want, 20);
}

static int record_ten(void *arg)
{
    serex_executor *ex = arg;

    for (unsigned i = 0; i < 10; i++)
        serex__obs_unpark(ex, i);
    return 0;
}

/* max_threads 2: this thread and the first other get rings; the next
 * two threads' 10 events each are dropped and counted. */
static void trace_threads_beyond_the_limit_are_counted(void **state)
{
    struct fixture *f = *state;
    serex_trace_config cfg = {.max_threads = 2};
    static struct seen s;
    const struct tj *doc;

    assert_int_equal(serex_trace_start(&cfg), SEREX_OK);
    serex__obs_park(f->ex[0], 99);
    for (int i = 0; i < 3; i++) { /* one after the other: the order */
        serex__thread thr;

        assert_int_equal(serex__thread_start(&thr, record_ten, f->ex[0]),
                         SEREX_OK);
        serex__thread_join(thr);
    }
    assert_int_equal(serex_trace_stop(), SEREX_OK);
    doc = trace_read(f, &s);
    assert_int_equal(s.instants, 11);
    assert_int_equal(count_named(doc, "park", 1), 1);
    assert_int_equal(count_named(doc, "unpark", 2), 10);
    assert_true(other(doc, "threads") == 2);
    assert_true(other(doc, "threads_dropped") == 2);
    assert_true(other(doc, "events_dropped") == 20);
    assert_true(other(doc, "events") == 11);
}

/* A thread's ring is its trace's: after a stop nothing is recorded, and
 * in the next trace the thread claims anew (here, with another size). */
static void trace_a_new_trace_gets_new_rings(void **state)
{
    struct fixture *f = *state;
    serex_trace_config small = {.events_per_thread = 4};
    static struct seen s;
    const struct tj *doc;

    assert_int_equal(serex_trace_start(NULL), SEREX_OK);
    serex__obs_park(f->ex[0], 1);
    assert_int_equal(serex_trace_stop(), SEREX_OK);
    serex__obs_park(f->ex[0], 2); /* stopped: not recorded */
    /* nor when observe.c's look at the flag was stale */
    serex__trace_record(SEREX__OBS_PARK, f->ex[0], NULL, 0, 3, 0);
    doc = trace_read(f, &s);
    assert_int_equal(s.instants, 1);

    assert_int_equal(serex_trace_start(&small), SEREX_OK); /* frees it */
    for (unsigned i = 0; i < 6; i++)
        serex__obs_unpark(f->ex[0], i);
    assert_int_equal(serex_trace_stop(), SEREX_OK);
    doc = trace_read(f, &s);
    assert_int_equal(count_named(doc, "park", 0), 0);
    assert_int_equal(count_named(doc, "unpark", 0), 4);
    assert_true(other(doc, "events_overwritten") == 2);
    assert_true(other(doc, "threads") == 1);
}

/* --- allocation failure --- */

/* start's one allocation failing: SEREX_ENOMEM, not recording, and the
 * stopped trace before it is still there; write's each failing in turn:
 * SEREX_ENOMEM and nothing written. */
static void trace_out_of_memory_changes_nothing(void **state)
{
    struct fixture *f = *state;
    static struct seen s;
    unsigned long made;
    FILE *fp;

    assert_int_equal(serex_trace_start(NULL), SEREX_OK);
    serex__obs_submit(f->ex[0], fn_a, 1);
    serex__obs_begin(f->ex[0], fn_a, NULL, 1, 0);
    serex__obs_end(f->ex[0], fn_a, 1, 0);
    assert_int_equal(serex_trace_stop(), SEREX_OK);

    serex__alloc_fail_nth(1);
    assert_int_equal(serex_trace_start(NULL), SEREX_ENOMEM);
    serex__alloc_fail_nth(0);
    assert_int_equal(serex_trace_stop(), SEREX_EINVAL); /* not recording */
    serex__obs_park(f->ex[0], 1);                       /* not recorded */
    (void)trace_read(f, &s);                            /* the old one */
    assert_int_equal(s.tasks, 1);
    assert_int_equal(s.flows, 1); /* on one thread: an arrow all the same */
    assert_int_equal(s.instants, 0);

    fp = tmpfile();
    assert_non_null(fp);
    serex__alloc_fail_nth(0);
    assert_int_equal(serex_trace_write(fp), SEREX_OK);
    made = serex__alloc_fail_nth(0);
    assert_true(made >= 2);
    for (unsigned long k = 1; k <= made; k++) {
        rewind(fp);
        serex__alloc_fail_nth(k);
        assert_int_equal(serex_trace_write(fp), SEREX_ENOMEM);
        assert_int_equal(ftell(fp), 0);
    }
    serex__alloc_fail_nth(0);
    fclose(fp);
}

/* --- racing the control calls --- */

#define NREC 3

struct racer {
    serex_executor *ex;
    atomic_bool done;
    atomic_long made[NREC]; /* events each thread has recorded so far */
};

struct racer_thread {
    struct racer *r;
    int t;
};

/* Records timer sets numbered 0, 1, 2 ... (delay = 7 x the number)
 * until told to stop, whatever the recorder does meanwhile. */
static int racer_main(void *arg)
{
    struct racer_thread *me = arg;
    struct racer *r = me->r;

    for (long i = 0; !atomic_load(&r->done); i++) {
        serex__obs_timer_set(r->ex, fn_a, (uint64_t)i, 7 * i);
        atomic_store(&r->made[me->t], i + 1);
    }
    return 0;
}

/* Waits until every racer has recorded @n more events. */
static void racers_advance(struct racer *r, long n)
{
    long from[NREC];
    int64_t deadline = test_now_ns() + TEST_TIMEOUT;

    for (int t = 0; t < NREC; t++)
        from[t] = atomic_load(&r->made[t]);
    for (int t = 0; t < NREC; t++)
        while (atomic_load(&r->made[t]) < from[t] + n &&
               test_now_ns() < deadline)
            serex__thread_yield();
}

/* Each track's events are consecutive numbers, each whole. */
static void check_racers(const struct tj *doc)
{
    const struct tj *evs = tj_get(doc, "traceEvents");
    double last[MAXTID];

    for (int i = 0; i < MAXTID; i++)
        last[i] = -1;
    for (size_t i = 0; i < evs->n; i++) {
        const struct tj *e = &evs->items[i], *args;
        int tid;

        if (strcmp(str(e, "ph"), "i") != 0)
            continue;
        args = tj_get(e, "args");
        tid = (int)num(e, "tid");
        assert_true(num(args, "delay_ns") == 7 * num(args, "id"));
        assert_true(last[tid] < 0 || num(args, "id") == last[tid] + 1);
        last[tid] = num(args, "id");
    }
}

static void trace_control_calls_race_recording_threads(void **state)
{
    struct fixture *f = *state;
    struct racer r = {.ex = f->ex[0]};
    struct racer_thread th[NREC];
    serex__thread thr[NREC];
    serex_trace_config cfg = {.events_per_thread = 1024};
    static struct seen s;

    for (int t = 0; t < NREC; t++) {
        th[t] = (struct racer_thread){&r, t};
        assert_int_equal(serex__thread_start(&thr[t], racer_main, &th[t]),
                         SEREX_OK);
    }
    for (int round = 0; round < 4; round++) {
        const struct tj *doc;

        assert_int_equal(serex_trace_start(&cfg), SEREX_OK);
        racers_advance(&r, 2000);
        assert_int_equal(serex_trace_stop(), SEREX_OK);
        doc = trace_read(f, &s);
        assert_true(other(doc, "threads") == NREC);
        assert_int_equal(s.instants, NREC * 1024); /* every ring full */
        check_racers(doc);
    }
    assert_int_equal(serex_trace_start(&cfg), SEREX_OK);
    racers_advance(&r, 100);
    assert_int_equal(serex_trace_stop(), SEREX_OK);
    serex_trace_discard(); /* while they run */
    assert_int_equal(serex_trace_start(&cfg), SEREX_OK);
    atomic_store(&r.done, true);
    for (int t = 0; t < NREC; t++)
        serex__thread_join(thr[t]);
    assert_int_equal(serex_trace_stop(), SEREX_OK);
}

/* --- a real pool --- */

#define NPOOL 200

struct pool_run {
    atomic_int ran;
};

static void pool_task(void *arg)
{
    struct pool_run *pr = arg;

    atomic_fetch_add(&pr->ran, 1);
}

/* The track of the first submit slice. */
static int submitter_tid(const struct tj *doc)
{
    const struct tj *evs = tj_get(doc, "traceEvents");

    for (size_t i = 0; i < evs->n; i++)
        if (strcmp(cat_of(&evs->items[i]), "submit") == 0)
            return (int)num(&evs->items[i], "tid");
    fail_msg("no submit");
    return 0;
}

/* Tasks submitted from this thread to a pool of 2: a slice each, named
 * "pool <fn>", on the workers' tracks, each with its flow from here. */
static void trace_a_pool_draws_its_tasks(void **state)
{
    struct fixture *f = *state;
    serex_pool_config pc = {.threads = 2};
    serex_executor *pool;
    struct pool_run pr = {0};
    static struct seen s;
    const struct tj *doc;
    char name[64];
    int me;

    assert_int_equal(serex_pool_create(&pc, &pool), SEREX_OK);
    assert_int_equal(serex_trace_start(NULL), SEREX_OK);
    for (int i = 0; i < NPOOL; i++)
        assert_int_equal(serex_execute(pool, pool_task, &pr), SEREX_OK);
    serex_shutdown(pool);
    assert_int_equal(serex_await_termination(pool, TEST_TIMEOUT), SEREX_OK);
    assert_int_equal(serex_trace_stop(), SEREX_OK);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    assert_int_equal(atomic_load(&pr.ran), NPOOL);

    doc = trace_read(f, &s);
    snprintf(name, sizeof name, "pool 0x%llx",
             (unsigned long long)(uintptr_t)pool_task);
    assert_int_equal(count_named(doc, name, 0), NPOOL);
    assert_int_equal(count_named(doc, "submit pool", 0), NPOOL);
    assert_int_equal(s.unfinished, 0);
    assert_int_equal(s.flows, NPOOL);
    /* every submit on this thread's track, and no task there */
    me = submitter_tid(doc);
    assert_int_equal(count_named(doc, "submit pool", me), NPOOL);
    assert_int_equal(count_named(doc, name, me), 0);
}

/* --- the parser the checks rely on (test_json.h) --- */

static void trace_test_json_reads_json_and_only_json(void **state)
{
    static const char *const bad[] = {
        "",    "[1,]",    "{\"a\" 1}",   "01",         "1.",
        "-",   "\"\\x\"", "[1 2]",       "{\"a\":1}x", "\"\x01\"",
        "nul", "\"abc",   "\"\\ud800\"", "{1:2}"};
    struct tj *v;
    const struct tj *a;

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_null(tj_parse(bad[i]));
    v = tj_parse(" {\"a\": [1, -2.5e2, true, false, null, "
                 "\"q\\\"\\\\\\/\\n\\t\\u00e9\\ud83d\\ude00\"], \"b\": {}} ");
    assert_non_null(v);
    a = tj_get(v, "a");
    assert_non_null(a);
    assert_int_equal(a->type, TJ_ARR);
    assert_int_equal(a->n, 6);
    assert_true(a->items[0].num == 1 && a->items[1].num == -250);
    assert_true(a->items[2].b && !a->items[3].b);
    assert_int_equal(a->items[4].type, TJ_NULL);
    assert_string_equal(a->items[5].str, "q\"\\/\n\t\xc3\xa9\xf0\x9f\x98\x80");
    assert_int_equal(tj_get(v, "b")->type, TJ_OBJ);
    assert_null(tj_get(v, "c"));
    assert_null(tj_get(a, "a")); /* not an object */
    tj_free(v);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(trace_control_calls_say_what_state_they_found),
        T(trace_with_no_events_is_an_empty_document),
        T(trace_events_of_threads_pair_up),
        T(trace_full_ring_keeps_the_newest),
        T(trace_full_ring_counts_what_it_overwrote),
        T(trace_threads_beyond_the_limit_are_counted),
        T(trace_a_new_trace_gets_new_rings),
        T(trace_out_of_memory_changes_nothing),
        T(trace_control_calls_race_recording_threads),
        T(trace_a_pool_draws_its_tasks),
        T(trace_test_json_reads_json_and_only_json),
    };
#undef T

    return cmocka_run_group_tests_name("trace", tests, NULL, NULL);
}
