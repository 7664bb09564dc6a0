/* SPDX-License-Identifier: MIT */
/*
 * test_striped_model.c - the striped executor on a manual executor,
 * replayed against a per-key FIFO model.
 *
 * Random operations (the LCG of bench/WORKLOADS.md, several seeds):
 * execute on a key from a small key space (long queues, batches, lanes
 * reused) or from a large one (a new lane almost every time), run_one and
 * run_pending on the manual executor, and at the end either shutdown_now
 * or shutdown and a full run. Phases lean towards submitting or towards
 * running, so backlogs build up and drain to idle; each round ends in a
 * submitting phase, so shutdown_now has a backlog to hand back.
 *
 * After every step:
 *  - the tasks that ran since the last step are, for each key, exactly
 *    the front of the model's FIFO of that key, in order (and the tasks
 *    handed back by shutdown_now are the rest, in order);
 *  - one run_one runs tasks of one key only, at least one and at most
 *    `batch` (promise 4), and finds something to run exactly when the
 *    model has a task queued (no key waits without a drain);
 *  - serex_striped_lanes equals the number of keys with tasks queued or
 *    running in the model (lanes are freed as soon as they are idle), and
 *    the manual executor holds exactly one drain per such lane;
 *  - serex_executor_stats of the striped agrees with the model:
 *    submitted, completed, queued, rejected, lanes.
 * At the end every accepted task ran or was handed back, exactly once.
 *
 * Half the rounds run the striped on a gate in front of the manual
 * executor that refuses chosen submissions with SEREX_EFULL (a bounded
 * target, full for a moment), and the model says what must follow
 * (striped.c's essay, "Owed drains"): a new lane's first drain refused
 * takes its only task back (execute says SEREX_EFULL, counted rejected)
 * or, if a second producer's task of the key queued behind it meanwhile
 * (the gate does that execute from inside the refused one), leaves the
 * drain owed with both tasks accepted; an execute resubmits the owed
 * drains first, oldest first, and stops at a refusal; a drain as it
 * starts resubmits them all. The manual executor then holds one drain
 * per busy lane whose drain is not owed.
 */
#include "test_util.h"
#include "test_wrap_executor.h"

#include <stdlib.h> /* calloc, free */
#include <string.h> /* memset */

#define PHASE 250             /* steps of one phase */
#define STEPS (13 * PHASE)     /* ends with a submitting phase */
#define MAXTASKS (2 * STEPS + 8) /* an execute may make two */
#define TABLE 16384 /* key table slots: a power of two > 2 * MAXTASKS */
#define NSMALL 8
#define NLARGE 4096

struct fixture;

/*
 * The gate: forwards to the manual executor, except that an armed execute
 * refuses with SEREX_EFULL, after queuing `behind` on `behind_key` through
 * the striped when that is set (a second producer racing in).
 */
struct gate {
    struct test_wrap w; /* first: forwards to the manual executor */
    struct fixture *f;
    bool armed;
    struct mtask *behind;
    int behind_rc;
};

struct mtask {
    struct fixture *f;
    int id;
    int kidx; /* the model's record of its key */
};

/* The model of one key: a FIFO of task ids, linked through next[]. */
struct mkey {
    uint64_t key;
    int head, tail; /* -1: empty */
    int queued;
};

struct fixture {
    serex_executor *manual;
    serex_striped *st;
    unsigned batch;
    bool shut;
    uint64_t rng;

    struct mtask tasks[MAXTASKS];
    int ntasks;
    int next[MAXTASKS];     /* the model FIFOs' links */
    int ran[MAXTASKS];      /* per task: runs seen */
    int handed[MAXTASKS];   /* per task: hand-backs seen */
    bool accepted[MAXTASKS]; /* per task: execute said SEREX_OK */
    int log[MAXTASKS];      /* ids run since the last step was checked */
    int nlog;

    struct mkey keys[MAXTASKS];
    int nkeys;
    struct gate gate; /* the striped's target when refusing */
    bool refusing;
    size_t owed;                         /* lanes whose drain is owed */
    int undone, owings, refused_retries; /* what the gate caused */
    int slot[TABLE];        /* open addressing: key index + 1; 0 empty */
    size_t busy;            /* keys with queued tasks */
    uint64_t submitted, completed, taken, rejected, queued;
};

/* --- random numbers: bench/WORKLOADS.md's LCG --- */

static uint64_t next_rand(uint64_t *x)
{
    *x = *x * 6364136223846793005u + 1442695040888963407u;
    return *x >> 33;
}

/* Eight keys, the edges of the key space among them. */
static const uint64_t small_keys[NSMALL] = {
    0, 1, 2, 64, UINT64_C(1) << 32, UINT64_C(1) << 63, UINT64_MAX, 12345};

static uint64_t pick_key(struct fixture *f)
{
    if (next_rand(&f->rng) % 10 < 6)
        return small_keys[next_rand(&f->rng) % NSMALL];
    /* NLARGE keys spread over all 64 bits (an odd multiplier) */
    return (next_rand(&f->rng) % NLARGE) * UINT64_C(0x9e3779b97f4a7c15);
}

/* --- the model --- */

static int key_index(struct fixture *f, uint64_t key)
{
    uint64_t h = key * UINT64_C(0xff51afd7ed558ccd);
    size_t i = (size_t)(h >> 40) & (TABLE - 1);

    for (; f->slot[i] != 0; i = (i + 1) & (TABLE - 1))
        if (f->keys[f->slot[i] - 1].key == key)
            return f->slot[i] - 1;
    assert_true(f->nkeys < MAXTASKS);
    f->keys[f->nkeys] = (struct mkey){key, -1, -1, 0};
    f->slot[i] = ++f->nkeys;
    return f->nkeys - 1;
}

static void model_push(struct fixture *f, int kidx, int id)
{
    struct mkey *k = &f->keys[kidx];

    f->next[id] = -1;
    if (k->tail >= 0)
        f->next[k->tail] = id;
    else
        k->head = id;
    k->tail = id;
    if (k->queued++ == 0)
        f->busy++;
    f->queued++;
}

/* @id left the striped (ran or handed back): it must be its key's head. */
static void model_pop(struct fixture *f, int id)
{
    struct mkey *k = &f->keys[f->tasks[id].kidx];

    assert_int_equal(k->head, id);
    k->head = f->next[id];
    if (k->head < 0)
        k->tail = -1;
    if (--k->queued == 0)
        f->busy--;
    f->queued--;
}

/* --- tasks --- */

static void model_task(void *arg)
{
    struct mtask *t = arg;
    struct fixture *f = t->f;

    f->ran[t->id]++;
    f->log[f->nlog++] = t->id;
}

static void on_pending(serex_fn fn, void *arg, void *ctx)
{
    struct fixture *f = ctx;
    struct mtask *t = arg;

    assert_ptr_equal(fn, model_task);
    assert_ptr_equal(t->f, f);
    f->handed[t->id]++;
    model_pop(f, t->id); /* each lane's tasks come back in order */
    f->taken++;
}

/* --- the gate --- */

static void model_execute_behind(struct fixture *f, struct mtask *t);

static int gate_execute(struct test_wrap *w, serex_fn fn, void *arg)
{
    struct gate *g = (struct gate *)(void *)w;

    if (!g->armed)
        return serex_execute(w->inner, fn, arg);
    g->armed = false;
    if (g->behind != NULL)
        model_execute_behind(g->f, g->behind);
    return SEREX_EFULL;
}

/* --- checks --- */

/* Takes what ran since the last call off the model, in order. */
static void consume_log(struct fixture *f)
{
    for (int i = 0; i < f->nlog; i++)
        model_pop(f, f->log[i]);
    f->completed += (uint64_t)f->nlog;
    f->nlog = 0;
}

static void check_invariants(struct fixture *f)
{
    serex_stats st, ms;

    assert_int_equal(f->nlog, 0);
    assert_int_equal(serex_striped_lanes(f->st), f->busy);
    assert_int_equal(
        serex_executor_stats(serex_striped_executor(f->st), &st), SEREX_OK);
    assert_int_equal(st.submitted, f->submitted);
    assert_int_equal(st.completed, f->completed);
    assert_int_equal(st.queued, f->queued);
    assert_int_equal(st.rejected, f->rejected);
    assert_int_equal(st.lanes, f->busy);
    assert_int_equal(f->submitted, f->completed + f->taken + f->queued);
    if (!f->shut) { /* one drain waits per busy lane, unless owed */
        assert_int_equal(serex_executor_stats(f->manual, &ms), SEREX_OK);
        assert_int_equal(ms.queued, f->busy - f->owed);
    }
}

/* --- operations --- */

static struct mtask *new_task(struct fixture *f, uint64_t key)
{
    struct mtask *t;

    assert_true(f->ntasks < MAXTASKS);
    t = &f->tasks[f->ntasks];
    *t = (struct mtask){f, f->ntasks, key_index(f, key)};
    f->ntasks++;
    return t;
}

static void model_accept(struct fixture *f, struct mtask *t)
{
    f->accepted[t->id] = true;
    model_push(f, t->kidx, t->id);
    f->submitted++;
}

/* The gate's second producer: its task queues behind the refused one's
 * (the lane is busy: no drain of its own, and nothing owed to retry). */
static void model_execute_behind(struct fixture *f, struct mtask *t)
{
    f->gate.behind_rc = serex_striped_execute(f->st, f->keys[t->kidx].key,
                                              model_task, t);
}

static void op_execute(struct fixture *f, uint64_t key)
{
    struct mtask *t = new_task(f, key);
    /* this execute submits something: an owed drain first, else the
     * drain of the key's new lane */
    bool submits = f->owed > 0 || f->keys[t->kidx].queued == 0;
    bool refuse = f->refusing && !f->shut && submits &&
                  next_rand(&f->rng) % 5 == 0;
    /* refused: the lane's first drain, with a task behind it */
    bool behind = refuse && f->owed == 0 && next_rand(&f->rng) % 2 == 0;
    struct mtask *t2 = behind ? new_task(f, key) : NULL;
    int rc;

    f->gate.armed = refuse;
    f->gate.behind = t2;
    f->gate.behind_rc = -1;
    rc = serex_striped_execute(f->st, key, model_task, t);
    assert_false(f->gate.armed); /* the refusal went where the model said */
    if (!refuse || f->owed > 0)
        f->owed = refuse ? f->owed : 0; /* resubmitted, or refused first */
    if (f->shut) {
        assert_int_equal(rc, SEREX_EREJECTED);
        f->rejected++;
        return;
    }
    if (refuse && f->owed > 0)
        f->refused_retries++;
    if (refuse && f->owed == 0 && !behind) { /* ours alone: taken back */
        assert_int_equal(rc, SEREX_EFULL);
        f->rejected++;
        f->undone++;
        return;
    }
    assert_int_equal(rc, SEREX_OK);
    model_accept(f, t);
    if (behind) {
        assert_int_equal(f->gate.behind_rc, SEREX_OK);
        model_accept(f, t2);
        f->owed++; /* both accepted; the lane's drain is owed */
        f->owings++;
    }
}

/* One drain: one key's tasks, 1..batch of them, exactly when any wait. */
static void op_run_one(struct fixture *f)
{
    bool any = f->busy > f->owed;

    assert_int_equal(serex_manual_run_one(f->manual), any);
    if (any)
        f->owed = 0; /* the drain resubmitted every owed one as it began */
    if (any) {
        assert_true(f->nlog >= 1 && (unsigned)f->nlog <= f->batch);
        for (int i = 1; i < f->nlog; i++)
            assert_int_equal(f->tasks[f->log[i]].kidx,
                             f->tasks[f->log[0]].kidx);
    } else {
        assert_int_equal(f->nlog, 0);
    }
    consume_log(f);
}

/* Runs the drains queued now: one per busy lane. */
static void op_run_pending(struct fixture *f)
{
    size_t lanes = f->busy - f->owed;

    assert_int_equal(serex_manual_run_pending(f->manual), lanes);
    if (lanes != 0)
        f->owed = 0; /* resubmitted by the first drain, run next time */
    assert_true((size_t)f->nlog >= lanes &&
                (size_t)f->nlog <= lanes * f->batch);
    consume_log(f);
}

/* --- the run --- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    if (f == NULL)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    if (f->st != NULL) /* a failed check left it: leave nothing queued */
        serex_shutdown_now(serex_striped_executor(f->st), NULL, NULL);
    if (f->manual != NULL)
        test_run_all(f->manual);
    if (f->st != NULL)
        assert_int_equal(serex_destroy(serex_striped_executor(f->st)),
                         SEREX_OK);
    if (f->manual != NULL)
        assert_int_equal(serex_destroy(f->manual), SEREX_OK);
    free(f);
    return 0;
}

/* Ends a round with shutdown_now: the rest comes back, per key in order. */
static void finish_with_shutdown_now(struct fixture *f)
{
    serex_executor *ex = serex_striped_executor(f->st);
    uint64_t queued = f->queued;

    f->shut = true;
    assert_int_equal(serex_shutdown_now(ex, on_pending, f), queued);
    f->owed = 0; /* their lanes emptied, and freed */
    assert_int_equal(f->queued, 0);
    assert_int_equal(f->busy, 0);
    check_invariants(f);
    op_execute(f, small_keys[0]);
    op_execute(f, pick_key(f));
    /* the lanes' drains still queued find nothing to run */
    test_run_all(f->manual);
    assert_int_equal(f->nlog, 0);
    check_invariants(f);
    assert_int_equal(serex_await_termination(ex, 0), SEREX_OK);
}

/* Ends a round with shutdown and a full run: everything runs. */
static void finish_with_shutdown(struct fixture *f)
{
    serex_executor *ex = serex_striped_executor(f->st);

    f->shut = true;
    serex_shutdown(ex);
    op_execute(f, pick_key(f));
    check_invariants(f);
    test_run_all(f->manual);
    consume_log(f);
    assert_int_equal(f->queued, 0);
    check_invariants(f);
    assert_int_equal(serex_await_termination(ex, 0), SEREX_OK);
}

static void run_seed(struct fixture *f, uint64_t seed, unsigned batch,
                     bool end_with_shutdown_now, bool refusing)
{
    serex_serial_config cfg = {.batch = batch};

    memset(f, 0, sizeof *f);
    f->rng = seed;
    f->batch = batch;
    f->refusing = refusing;
    f->gate = (struct gate){.f = f, .behind_rc = -1};
    assert_int_equal(serex_manual_create(&f->manual), SEREX_OK);
    test_wrap_init(&f->gate.w, f->manual, gate_execute);
    assert_int_equal(serex_striped_create(refusing ? &f->gate.w.base : f->manual,
                                          &cfg, &f->st),
                     SEREX_OK);
    check_invariants(f);
    for (int step = 0; step < STEPS; step++) {
        uint64_t x = next_rand(&f->rng) % 100;
        /* phases: mostly submitting (backlogs, long per-key queues), then
         * mostly running (down to idle, lanes freed) */
        bool submitting = (step / PHASE) % 2 == 0;

        if (x < (submitting ? 85u : 30u))
            op_execute(f, pick_key(f));
        else if (x < (submitting ? 99u : 90u))
            op_run_one(f);
        else
            op_run_pending(f);
        check_invariants(f);
    }
    if (end_with_shutdown_now)
        finish_with_shutdown_now(f);
    else
        finish_with_shutdown(f);
    for (int id = 0; id < f->ntasks; id++) /* accepted: exactly once */
        assert_int_equal(f->ran[id] + f->handed[id], f->accepted[id] ? 1 : 0);
    if (refusing) /* the gate did refuse, each way */
        assert_true(f->undone > 0 && f->owings > 0 && f->refused_retries > 0);
    assert_int_equal(serex_destroy(serex_striped_executor(f->st)), SEREX_OK);
    f->st = NULL;
    assert_int_equal(serex_destroy(f->manual), SEREX_OK);
    f->manual = NULL;
}

static void striped_random_operations_match_per_key_fifo_model(void **state)
{
    struct fixture *f = *state;
    /* 42 first (WORKLOADS.md's seed); batches 1 (a drain per task) to the
     * default; a third of the rounds end with shutdown_now */
    const uint64_t seeds[] = {42, 1,  2,  3,  4,  5,  6,  7,
                              8,  9,  10, 11, 12, 13, 14, 15,
                              16, 17, 18, 19, 20, 21, 22, 23};
    const unsigned batches[] = {1, 2, 3, 4, 64};

    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        for (int refusing = 0; refusing < 2; refusing++)
            run_seed(f, seeds[i], batches[i % 5], i % 3 == 1, refusing);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(striped_random_operations_match_per_key_fifo_model),
    };
#undef T

    return cmocka_run_group_tests_name("striped_model", tests, NULL, NULL);
}
