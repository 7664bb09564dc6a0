/* SPDX-License-Identifier: MIT */
/*
 * test_semaphore.c - asynchronous permits (semaphore.h): FIFO grants, a
 * large request never overtaken, try_acquire never jumping the queue,
 * releases from anywhere, permits held across an asynchronous completion
 * bounding the operations in flight, tokens (cancelled before the grant,
 * after it, already at the call, by a deadline, shared by several
 * waiters), continuations whose target refuses or drops them, close, bad
 * input, and a stress run on several threads. Continuations go to manual
 * executors, so each test decides when they run.
 */
#include "test_util.h"

#include <stdatomic.h>
#include <stdio.h>  /* tmpfile: serex_dump's output */
#include <string.h> /* strstr */

#include "thread_internal.h" /* serex__thread_start: the stress threads */

#define MAXREC 64

struct fixture;

/* One acquire: its continuation records how it ran. */
struct rec {
    struct fixture *f;
    int id;
    uint32_t n;
    bool release; /* on SEREX_OK, release its permits from inside fn */
    atomic_int runs;
    int status;
    uint64_t avail_seen; /* serex_semaphore_available inside fn */
};

struct fixture {
    serex_executor *m, *m2; /* targets: nothing runs until we say */
    serex_semaphore *s;
    struct rec recs[MAXREC];
    int log[MAXREC]; /* ids in the order their continuations ran */
    int nlog;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);

    if (f == NULL || serex_manual_create(&f->m) != SEREX_OK ||
        serex_manual_create(&f->m2) != SEREX_OK)
        return -1;
    for (int i = 0; i < MAXREC; i++)
        f->recs[i] = (struct rec){.f = f, .id = i};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    /* a test that failed may have left waiters: close, so destroy may */
    serex_semaphore_close(f->s);
    serex_semaphore_destroy(f->s);
    f->s = NULL; /* continuations dropped below see no semaphore */
    assert_int_equal(serex_destroy(f->m), SEREX_OK);
    assert_int_equal(serex_destroy(f->m2), SEREX_OK);
    free(f);
    return 0;
}

static void permit_cb(void *arg, int status)
{
    struct rec *r = arg;
    struct fixture *f = r->f;

    r->status = status;
    r->avail_seen = serex_semaphore_available(f->s);
    atomic_fetch_add(&r->runs, 1);
    if (f->nlog < MAXREC)
        f->log[f->nlog++] = r->id;
    if (status == SEREX_OK && r->release)
        serex_semaphore_release(f->s, r->n);
}

static void never_cb(void *arg, int status)
{
    (void)arg;
    fail_msg("a continuation that must not run ran (status %d)", status);
}

/* Acquires @n for rec @id on @target (NULL: the fixture's m). */
static int acq(struct fixture *f, int id, uint32_t n, serex_executor *target,
               serex_cancel *token)
{
    struct rec *r = &f->recs[id];

    r->n = n;
    return serex_semaphore_acquire(f->s, n, target != NULL ? target : f->m,
                                   permit_cb, r, token);
}

static void make(struct fixture *f, uint64_t permits)
{
    assert_int_equal(serex_semaphore_create(permits, &f->s), SEREX_OK);
    assert_int_equal(serex_semaphore_available(f->s), permits);
}

static int runs(struct fixture *f, int id)
{
    return atomic_load(&f->recs[id].runs);
}

static void assert_log(struct fixture *f, const int *ids, int n)
{
    assert_int_equal(f->nlog, n);
    for (int i = 0; i < n; i++)
        assert_int_equal(f->log[i], ids[i]);
}

static uint64_t queued(serex_executor *m)
{
    serex_stats st;

    assert_int_equal(serex_executor_stats(m, &st), SEREX_OK);
    return st.queued;
}

/* --- bad input --- */

static void semaphore_create_bad_arguments_are_einval(void **state)
{
    serex_semaphore *s = (serex_semaphore *)state;

    (void)state;
    assert_int_equal(serex_semaphore_create(1, NULL), SEREX_EINVAL);
    assert_int_equal(serex_semaphore_create(0, &s), SEREX_EINVAL);
    assert_null(s);
    /* NULL is ignored or answered by every other call */
    serex_semaphore_destroy(NULL);
    serex_semaphore_close(NULL);
    serex_semaphore_release(NULL, 1);
    assert_int_equal(serex_semaphore_available(NULL), 0);
    assert_false(serex_semaphore_try_acquire(NULL, 1));
}

static void semaphore_acquire_bad_arguments_are_einval(void **state)
{
    struct fixture *f = *state;
    serex_executor no_ops = {NULL};
    struct rec *r = &f->recs[0];

    make(f, 3);
    assert_int_equal(serex_semaphore_acquire(NULL, 1, f->m, permit_cb, r, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_semaphore_acquire(f->s, 1, NULL, permit_cb, r, NULL),
                     SEREX_EINVAL);
    assert_int_equal(
        serex_semaphore_acquire(f->s, 1, &no_ops, permit_cb, r, NULL),
        SEREX_EINVAL);
    assert_int_equal(serex_semaphore_acquire(f->s, 1, f->m, NULL, r, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_semaphore_acquire(f->s, 0, f->m, never_cb, r, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_semaphore_acquire(f->s, 4, f->m, never_cb, r, NULL),
                     SEREX_EINVAL); /* more than it has: would never come */
    assert_false(serex_semaphore_try_acquire(f->s, 0));
    assert_false(serex_semaphore_try_acquire(f->s, 4));
    serex_semaphore_release(f->s, 0); /* ignored */
    /* nothing changed */
    assert_int_equal(serex_semaphore_available(f->s), 3);
    assert_int_equal(queued(f->m), 0);
}

/* --- granting --- */

static void semaphore_acquire_with_free_permits_posts_at_once(void **state)
{
    struct fixture *f = *state;

    make(f, 3);
    assert_int_equal(acq(f, 0, 2, NULL, NULL), SEREX_OK);
    assert_int_equal(serex_semaphore_available(f->s), 1); /* taken now */
    assert_int_equal(queued(f->m), 1);                    /* posted */
    assert_int_equal(runs(f, 0), 0); /* to its target: not run here */
    assert_true(serex_manual_run_one(f->m));
    assert_int_equal(runs(f, 0), 1);
    assert_int_equal(f->recs[0].status, SEREX_OK);
    assert_int_equal(f->recs[0].avail_seen, 1); /* held while it runs */
    serex_semaphore_release(f->s, 2);
    assert_int_equal(serex_semaphore_available(f->s), 3);
}

static void semaphore_waiters_are_granted_in_fifo_order(void **state)
{
    struct fixture *f = *state;
    const int order[] = {0, 1, 2, 3};

    make(f, 1);
    assert_true(serex_semaphore_try_acquire(f->s, 1));
    for (int i = 0; i < 4; i++)
        assert_int_equal(acq(f, i, 1, NULL, NULL), SEREX_OK);
    assert_int_equal(queued(f->m), 0); /* all parked */
    for (int i = 0; i < 4; i++) {
        serex_semaphore_release(f->s, 1); /* one release, one grant */
        assert_int_equal(queued(f->m), 1);
        assert_int_equal(serex_semaphore_available(f->s), 0);
        assert_true(serex_manual_run_one(f->m));
        assert_int_equal(f->recs[i].status, SEREX_OK);
    }
    assert_log(f, order, 4);
    serex_semaphore_release(f->s, 1);
    assert_int_equal(serex_semaphore_available(f->s), 1);
}

/* One release that makes room for several grants them all, in order. */
static void semaphore_one_release_grants_several_in_order(void **state)
{
    struct fixture *f = *state;
    const int order[] = {0, 1, 2};

    make(f, 4);
    assert_true(serex_semaphore_try_acquire(f->s, 4));
    assert_int_equal(acq(f, 0, 1, NULL, NULL), SEREX_OK);
    assert_int_equal(acq(f, 1, 2, NULL, NULL), SEREX_OK);
    assert_int_equal(acq(f, 2, 1, NULL, NULL), SEREX_OK);
    assert_int_equal(acq(f, 3, 1, NULL, NULL), SEREX_OK);
    serex_semaphore_release(f->s, 4); /* 1 + 2 + 1: the fourth waits */
    assert_int_equal(queued(f->m), 3);
    assert_int_equal(serex_semaphore_available(f->s), 0);
    test_run_all(f->m);
    assert_log(f, order, 3);
    assert_int_equal(runs(f, 3), 0);
    serex_semaphore_release(f->s, 1);
    assert_int_equal(serex_manual_run_pending(f->m), 1);
    assert_int_equal(runs(f, 3), 1);
    serex_semaphore_release(f->s, 4);
}

static void semaphore_big_request_blocks_later_small_ones(void **state)
{
    struct fixture *f = *state;
    const int order[] = {0, 1};

    make(f, 4);
    assert_true(serex_semaphore_try_acquire(f->s, 3));    /* 1 left */
    assert_int_equal(acq(f, 0, 4, NULL, NULL), SEREX_OK); /* parks */
    assert_int_equal(acq(f, 1, 1, NULL, NULL), SEREX_OK); /* behind it */
    assert_int_equal(queued(f->m), 0); /* 1 would do, but it waits */
    assert_int_equal(serex_semaphore_available(f->s), 1);
    serex_semaphore_release(f->s, 2); /* 3 free: still not 4 */
    assert_int_equal(queued(f->m), 0);
    serex_semaphore_release(f->s, 1); /* 4: the big one, alone */
    assert_int_equal(queued(f->m), 1);
    assert_int_equal(serex_semaphore_available(f->s), 0);
    f->recs[0].release = true; /* gives its 4 back from inside fn */
    assert_true(serex_manual_run_one(f->m));
    assert_int_equal(queued(f->m), 1); /* which granted the small one */
    assert_true(serex_manual_run_one(f->m));
    assert_log(f, order, 2);
    assert_int_equal(serex_semaphore_available(f->s), 3);
    serex_semaphore_release(f->s, 1);
}

static void semaphore_try_acquire_never_jumps_the_queue(void **state)
{
    struct fixture *f = *state;

    make(f, 4);
    assert_true(serex_semaphore_try_acquire(f->s, 3));
    assert_false(serex_semaphore_try_acquire(f->s, 2)); /* only 1 free */
    assert_int_equal(serex_semaphore_available(f->s), 1);
    assert_int_equal(acq(f, 0, 2, NULL, NULL), SEREX_OK); /* parks */
    assert_false(serex_semaphore_try_acquire(f->s, 1));   /* 1 free: no */
    assert_int_equal(serex_semaphore_available(f->s), 1);
    serex_semaphore_release(f->s, 1); /* 2 free: the waiter's */
    assert_int_equal(serex_semaphore_available(f->s), 0);
    assert_true(serex_manual_run_one(f->m));
    serex_semaphore_release(f->s, 2);
    assert_true(serex_semaphore_try_acquire(f->s, 1)); /* nobody waits */
    assert_int_equal(serex_semaphore_available(f->s), 1);
    serex_semaphore_release(f->s, 3);
    assert_int_equal(serex_semaphore_available(f->s), 4);
}

/* An acquire with free permits does not jump the queue either. */
static void semaphore_acquire_never_jumps_the_queue(void **state)
{
    struct fixture *f = *state;
    const int order[] = {0, 1};

    make(f, 2);
    assert_true(serex_semaphore_try_acquire(f->s, 1));
    assert_int_equal(acq(f, 0, 2, NULL, NULL), SEREX_OK); /* parks */
    assert_int_equal(acq(f, 1, 1, NULL, NULL), SEREX_OK); /* 1 free: parks */
    assert_int_equal(queued(f->m), 0);
    f->recs[0].release = true;
    serex_semaphore_release(f->s, 1);
    test_run_all(f->m);
    assert_log(f, order, 2);
    serex_semaphore_release(f->s, 1);
}

struct releaser {
    serex_semaphore *s;
    uint32_t n;
};

static int release_main(void *arg)
{
    struct releaser *r = arg;

    serex_semaphore_release(r->s, r->n);
    return 0;
}

static void semaphore_release_from_another_thread_grants(void **state)
{
    struct fixture *f = *state;
    struct releaser r;
    serex__thread t;

    make(f, 2);
    assert_true(serex_semaphore_try_acquire(f->s, 2)); /* on this thread */
    assert_int_equal(acq(f, 0, 2, NULL, NULL), SEREX_OK);
    r = (struct releaser){f->s, 2};
    assert_int_equal(serex__thread_start(&t, release_main, &r), SEREX_OK);
    serex__thread_join(t);
    assert_int_equal(queued(f->m), 1); /* posted by the other thread */
    assert_true(serex_manual_run_one(f->m));
    assert_int_equal(f->recs[0].status, SEREX_OK);
    serex_semaphore_release(f->s, 2);
}

/* --- permits held across an asynchronous completion --- */

#define OPS 40
#define CAP 3

struct op {
    struct ops *o;
    int id;
};

/* Operations that start on one executor and complete later, on another,
 * after the task that started them has returned (a fetch completing by
 * timer): the permit is released by the completion, not by the start. */
struct ops {
    serex_semaphore *s;
    serex_executor *starts, *completions;
    struct op op[OPS];
    int in_flight, most, started, completed;
};

static void op_complete(void *arg)
{
    struct op *op = arg;

    op->o->in_flight--;
    op->o->completed++;
    serex_semaphore_release(op->o->s, 1);
}

static void op_start(void *arg, int status)
{
    struct op *op = arg;
    struct ops *o = op->o;

    assert_int_equal(status, SEREX_OK);
    o->started++;
    if (++o->in_flight > o->most)
        o->most = o->in_flight;
    assert_true(o->in_flight <= CAP);
    /* its task returns now; the operation goes on */
    assert_int_equal(serex_execute(o->completions, op_complete, op), SEREX_OK);
}

static void semaphore_permits_bound_operations_across_completions(void **state)
{
    struct fixture *f = *state;
    struct ops o = {.starts = f->m, .completions = f->m2};
    unsigned step = 0;

    make(f, CAP);
    o.s = f->s;
    for (int i = 0; i < OPS; i++) {
        o.op[i] = (struct op){&o, i};
        assert_int_equal(serex_semaphore_acquire(f->s, 1, o.starts, op_start,
                                                 &o.op[i], NULL),
                         SEREX_OK);
    }
    /* start whatever may start, then complete one (varying which), and
     * again; the starts' tasks have all returned by then */
    while (o.completed < OPS) {
        size_t in_flight;

        test_run_all(o.starts);
        assert_int_equal(o.in_flight, o.started - o.completed);
        assert_true(o.in_flight <= CAP);
        in_flight = (size_t)o.in_flight; /* run_pending lowers it */
        if (step++ % 3 == 2)
            assert_int_equal(serex_manual_run_pending(o.completions),
                             in_flight);
        else
            assert_true(serex_manual_run_one(o.completions));
    }
    assert_int_equal(o.started, OPS);
    assert_int_equal(o.most, CAP); /* the bound was reached, never passed */
    assert_int_equal(serex_semaphore_available(f->s), CAP);
}

/* --- tokens --- */

static serex_cancel *token(void)
{
    serex_cancel *c;

    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    return c;
}

static void semaphore_cancel_before_grant_posts_cause_and_frees_place(
    void **state)
{
    struct fixture *f = *state;
    serex_cancel *c = token();
    const int order[] = {1, 0};

    make(f, 2);
    assert_true(serex_semaphore_try_acquire(f->s, 1));     /* 1 left */
    assert_int_equal(acq(f, 0, 2, NULL, c), SEREX_OK);     /* head: parks */
    assert_int_equal(acq(f, 1, 1, f->m2, NULL), SEREX_OK); /* behind */
    serex_cancel_release(c); /* the waiter holds what it needs */
    assert_int_equal(queued(f->m) + queued(f->m2), 0);
    assert_true(serex_cancel_request(c, -20));
    /* the head left with its cause; the one behind it fits now */
    assert_int_equal(queued(f->m), 1);
    assert_int_equal(queued(f->m2), 1);
    assert_int_equal(serex_semaphore_available(f->s), 0);
    assert_true(serex_manual_run_one(f->m2));
    assert_true(serex_manual_run_one(f->m));
    assert_log(f, order, 2);
    assert_int_equal(f->recs[0].status, -20);
    assert_int_equal(f->recs[1].status, SEREX_OK);
    serex_semaphore_release(f->s, 2); /* the cancelled one held none */
    assert_int_equal(serex_semaphore_available(f->s), 2);
}

static void semaphore_cancel_after_grant_changes_nothing(void **state)
{
    struct fixture *f = *state;
    serex_cancel *c = token();

    make(f, 2);
    /* granted at once, not yet run */
    assert_int_equal(acq(f, 0, 1, NULL, c), SEREX_OK);
    /* granted by a release, not yet run */
    assert_true(serex_semaphore_try_acquire(f->s, 1));
    assert_int_equal(acq(f, 1, 1, NULL, c), SEREX_OK);
    serex_semaphore_release(f->s, 1);
    assert_int_equal(queued(f->m), 2);
    assert_true(serex_cancel_request(c, 0));
    assert_int_equal(queued(f->m), 2); /* nothing more posted */
    assert_int_equal(serex_semaphore_available(f->s), 0);
    test_run_all(f->m);
    assert_int_equal(f->recs[0].status, SEREX_OK);
    assert_int_equal(f->recs[1].status, SEREX_OK);
    assert_int_equal(runs(f, 0) + runs(f, 1), 2);
    serex_cancel_release(c);
    serex_semaphore_release(f->s, 2);
}

static void semaphore_already_cancelled_token_posts_cause_at_once(void **state)
{
    struct fixture *f = *state;
    serex_cancel *c = token();

    make(f, 2);
    assert_true(serex_cancel_request(c, -33));
    assert_int_equal(acq(f, 0, 1, NULL, c), SEREX_OK);    /* permits free */
    assert_int_equal(serex_semaphore_available(f->s), 2); /* none taken */
    assert_int_equal(queued(f->m), 1);
    assert_true(serex_manual_run_one(f->m));
    assert_int_equal(f->recs[0].status, -33);
    assert_int_equal(runs(f, 0), 1);
    serex_cancel_release(c);
}

/* A token shared by several waiters: each leaves once, with the cause,
 * and their places go to the waiter behind them. */
static void semaphore_shared_token_cancels_each_waiter_once(void **state)
{
    struct fixture *f = *state;
    serex_cancel *c = token();

    make(f, 3);
    assert_true(serex_semaphore_try_acquire(f->s, 2)); /* 1 left */
    assert_int_equal(acq(f, 0, 2, NULL, c), SEREX_OK);
    assert_int_equal(acq(f, 1, 3, NULL, c), SEREX_OK);
    assert_int_equal(acq(f, 2, 1, NULL, NULL), SEREX_OK);
    assert_int_equal(queued(f->m), 0);
    assert_true(serex_cancel_request(c, 0));
    test_run_all(f->m);
    assert_int_equal(runs(f, 0) + runs(f, 1) + runs(f, 2), 3);
    assert_int_equal(f->recs[0].status, SEREX_ECANCELED);
    assert_int_equal(f->recs[1].status, SEREX_ECANCELED);
    assert_int_equal(f->recs[2].status, SEREX_OK);
    assert_int_equal(serex_semaphore_available(f->s), 0);
    serex_semaphore_release(f->s, 3);
    serex_cancel_release(c);
}

/* A deadline is a token: the waiter times out on the manual clock. */
static void semaphore_deadline_times_a_waiter_out(void **state)
{
    struct fixture *f = *state;
    serex_scheduler_config cfg = {.manual = true};
    serex_scheduler *sch;
    serex_cancel *c = token();

    make(f, 1);
    assert_int_equal(serex_scheduler_create(&cfg, &sch), SEREX_OK);
    assert_int_equal(serex_cancel_deadline(c, sch, 50 * MS), SEREX_OK);
    assert_true(serex_semaphore_try_acquire(f->s, 1));
    assert_int_equal(acq(f, 0, 1, NULL, c), SEREX_OK);
    assert_int_equal(serex_scheduler_advance(sch, 49 * MS), SEREX_OK);
    assert_int_equal(queued(f->m), 0);
    assert_int_equal(serex_scheduler_advance(sch, 1 * MS), SEREX_OK);
    assert_true(serex_manual_run_one(f->m));
    assert_int_equal(f->recs[0].status, SEREX_ETIMEDOUT);
    serex_semaphore_release(f->s, 1);
    assert_int_equal(serex_semaphore_available(f->s), 1);
    serex_cancel_release(c);
    assert_int_equal(serex_destroy(serex_scheduler_executor(sch)), SEREX_OK);
}

/* A granted continuation still queued when the semaphore is destroyed,
 * then its token cancelled: the fire and the run touch no semaphore
 * (an ASan build would see it). */
static void semaphore_destroy_before_granted_continuation_runs(void **state)
{
    struct fixture *f = *state;
    serex_cancel *c = token();

    make(f, 1);
    assert_true(serex_semaphore_try_acquire(f->s, 1));
    assert_int_equal(acq(f, 0, 1, NULL, c), SEREX_OK);
    serex_semaphore_release(f->s, 1); /* granted: queued on m */
    serex_semaphore_destroy(f->s);    /* no waiter left: allowed */
    f->s = NULL;
    assert_true(serex_cancel_request(c, 0)); /* its fire lost: no-op */
    assert_true(serex_manual_run_one(f->m));
    assert_int_equal(f->recs[0].status, SEREX_OK);
    assert_int_equal(runs(f, 0), 1);
    serex_cancel_release(c);
}

/* --- continuations whose target refuses or drops them --- */

static void semaphore_refused_continuation_runs_inline(void **state)
{
    struct fixture *f = *state;
    serex_executor *shut;
    serex_cancel *c = token();

    make(f, 2);
    assert_int_equal(serex_manual_create(&shut), SEREX_OK);
    serex_shutdown(shut); /* refuses everything from now on */
    /* granted at once: runs inside acquire, and holds its permit */
    assert_int_equal(acq(f, 0, 1, shut, NULL), SEREX_OK);
    assert_int_equal(runs(f, 0), 1);
    assert_int_equal(f->recs[0].status, SEREX_OK);
    assert_int_equal(f->recs[0].avail_seen, 1);
    /* parked, then granted by a release: runs inside release */
    assert_true(serex_semaphore_try_acquire(f->s, 1));
    assert_int_equal(acq(f, 1, 1, shut, NULL), SEREX_OK);
    assert_int_equal(runs(f, 1), 0);
    serex_semaphore_release(f->s, 1);
    assert_int_equal(runs(f, 1), 1);
    assert_int_equal(f->recs[1].status, SEREX_OK);
    /* parked, then cancelled: runs inside the request, with the cause */
    assert_int_equal(acq(f, 2, 1, shut, c), SEREX_OK);
    assert_true(serex_cancel_request(c, -9));
    assert_int_equal(runs(f, 2), 1);
    assert_int_equal(f->recs[2].status, -9);
    /* already cancelled: runs inside acquire */
    assert_int_equal(acq(f, 3, 1, shut, c), SEREX_OK);
    assert_int_equal(runs(f, 3), 1);
    assert_int_equal(f->recs[3].status, -9);
    /* parked, then closed: runs inside close */
    assert_int_equal(acq(f, 4, 1, shut, NULL), SEREX_OK);
    serex_semaphore_close(f->s);
    assert_int_equal(runs(f, 4), 1);
    assert_int_equal(f->recs[4].status, SEREX_EREJECTED);
    serex_semaphore_release(f->s, 2);
    assert_int_equal(serex_semaphore_available(f->s), 2);
    serex_cancel_release(c);
    assert_int_equal(serex_destroy(shut), SEREX_OK);
}

/* Accepted, then taken back (shutdown_now) or dropped (destroy): it runs
 * there, with its status, and never reaches an on_pending. */
static void semaphore_dropped_continuation_runs_where_dropped(void **state)
{
    struct fixture *f = *state;
    serex_executor *m;
    serex_cancel *c = token();
    struct test_pending tp = {0};

    make(f, 3);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(acq(f, 0, 1, m, NULL), SEREX_OK); /* granted */
    assert_true(serex_cancel_request(c, -5));
    assert_int_equal(acq(f, 1, 1, m, c), SEREX_OK); /* cancelled */
    assert_int_equal(queued(m), 2);
    (void)serex_shutdown_now(m, test_pending_cb, &tp);
    assert_int_equal(tp.n, 0); /* not handed back: run */
    assert_int_equal(runs(f, 0) + runs(f, 1), 2);
    assert_int_equal(f->recs[0].status, SEREX_OK);
    assert_int_equal(f->recs[1].status, -5);
    assert_int_equal(serex_destroy(m), SEREX_OK);

    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(acq(f, 2, 1, m, NULL), SEREX_OK);
    assert_int_equal(serex_destroy(m), SEREX_OK); /* dropped: runs here */
    assert_int_equal(runs(f, 2), 1);
    assert_int_equal(f->recs[2].status, SEREX_OK);
    assert_int_equal(serex_semaphore_available(f->s), 1); /* 2 held */
    serex_semaphore_release(f->s, 2);
    serex_cancel_release(c);
}

/* --- close --- */

static void semaphore_close_rejects_waiters_and_later_acquires(void **state)
{
    struct fixture *f = *state;
    const int order[] = {0, 1};

    make(f, 2);
    assert_true(serex_semaphore_try_acquire(f->s, 2));
    assert_int_equal(acq(f, 0, 1, NULL, NULL), SEREX_OK);
    assert_int_equal(acq(f, 1, 2, NULL, NULL), SEREX_OK);
    serex_semaphore_close(f->s);
    assert_int_equal(queued(f->m), 2);
    test_run_all(f->m);
    assert_log(f, order, 2);
    assert_int_equal(f->recs[0].status, SEREX_EREJECTED);
    assert_int_equal(f->recs[1].status, SEREX_EREJECTED);
    assert_int_equal(acq(f, 2, 1, NULL, NULL), SEREX_EREJECTED);
    assert_int_equal(queued(f->m), 0); /* fn will not run */
    serex_semaphore_release(f->s, 2);  /* holders still give back */
    assert_int_equal(serex_semaphore_available(f->s), 2);
    assert_false(serex_semaphore_try_acquire(f->s, 1)); /* refused */
    serex_semaphore_close(f->s);                        /* idempotent */
    assert_int_equal(runs(f, 2), 0);
}

/* Closed: refused before the token is looked at; nothing changed. */
static void semaphore_closed_acquire_with_token_is_rejected(void **state)
{
    struct fixture *f = *state;
    serex_cancel *c = token();

    make(f, 1);
    serex_semaphore_close(f->s);
    assert_int_equal(acq(f, 0, 1, NULL, c), SEREX_EREJECTED);
    assert_true(serex_cancel_request(c, 0));
    assert_int_equal(acq(f, 1, 1, NULL, c), SEREX_EREJECTED);
    assert_int_equal(queued(f->m), 0);
    serex_cancel_release(c);
}

/* --- what the lock covers --- */

/*
 * Nothing allocates under the semaphore's spinlock (a preempted holder
 * would make every spinner wait on the allocator's lock): Debug builds
 * count the allocations made under a serex spinlock.
 */
static void semaphore_allocates_under_no_spinlock(void **state)
{
    struct fixture *f = *state;
    serex_cancel *c = token();

#ifdef NDEBUG
    skip(); /* the count is kept in Debug builds only */
#endif
    (void)serex__alloc_spin_count();
    make(f, 2);
    assert_int_equal(acq(f, 0, 2, NULL, NULL), SEREX_OK); /* at once */
    assert_int_equal(acq(f, 1, 1, NULL, c), SEREX_OK);    /* parks */
    assert_int_equal(acq(f, 2, 2, NULL, NULL), SEREX_OK); /* parks */
    assert_true(serex_cancel_request(c, 0));
    serex_semaphore_release(f->s, 2);
    test_run_all(f->m);
    serex_semaphore_release(f->s, 2);
    assert_int_equal(acq(f, 3, 1, NULL, NULL), SEREX_OK);
    serex_semaphore_close(f->s);
    test_run_all(f->m);
    serex_semaphore_release(f->s, 1);
    serex_cancel_release(c);
    assert_int_equal(serex__alloc_spin_count(), 0);
}

/* serex_dump lists the semaphore: its permits and who waits. */
static void semaphore_dump_shows_permits_and_waiters(void **state)
{
    struct fixture *f = *state;
    FILE *out = tmpfile();
    char text[65536];
    size_t len;

    assert_non_null(out);
    make(f, 3);
    assert_true(serex_semaphore_try_acquire(f->s, 2));
    assert_int_equal(acq(f, 0, 3, NULL, NULL), SEREX_OK); /* parks */
    assert_int_equal(serex_dump(out, 0), SEREX_OK);
    rewind(out);
    len = fread(text, 1, sizeof text - 1, out);
    text[len] = '\0';
    fclose(out);
    assert_non_null(strstr(text, "\"kind\":\"semaphore\""));
    assert_non_null(strstr(text, "\"permits\":3"));
    assert_non_null(strstr(text, "\"available\":1"));
    assert_non_null(strstr(text, "\"waiting\":1"));
    serex_semaphore_release(f->s, 2); /* granted: fn releases nothing */
    assert_true(serex_manual_run_one(f->m));
    serex_semaphore_release(f->s, 3);
}

/* --- a stress run on several threads --- */

#define STRESS_THREADS 4
#define STRESS_OPS 3000
#define STRESS_CAP 5
#define STRESS_TOTAL (STRESS_THREADS * STRESS_OPS)

struct stress;

struct sop {
    struct stress *st;
    uint32_t n;
    serex_cancel *token; /* every third op; cancelled by the canceller */
    atomic_int runs;
    atomic_int status;
};

struct stress {
    serex_semaphore *s;
    serex_executor *pool;
    serex_latch *done;    /* one count per op */
    struct sop *ops;      /* STRESS_TOTAL */
    atomic_int in_flight; /* permits held by running operations */
    atomic_int over;      /* times in_flight passed the cap */
    atomic_int granted, cancelled, tries;
    atomic_int next_token; /* ops up to here may be cancelled */
};

static void sop_finish(void *arg)
{
    struct sop *op = arg;
    struct stress *st = op->st;

    atomic_fetch_sub(&st->in_flight, (int)op->n);
    serex_semaphore_release(st->s, op->n);
    assert_int_equal(serex_latch_count_down(st->done, 1), SEREX_OK);
}

static void sop_start(void *arg, int status)
{
    struct sop *op = arg;
    struct stress *st = op->st;

    atomic_store(&op->status, status);
    atomic_fetch_add(&op->runs, 1);
    if (status != SEREX_OK) {
        atomic_fetch_add(&st->cancelled, 1);
        assert_int_equal(serex_latch_count_down(st->done, 1), SEREX_OK);
        return;
    }
    atomic_fetch_add(&st->granted, 1);
    if (atomic_fetch_add(&st->in_flight, (int)op->n) + (int)op->n > STRESS_CAP)
        atomic_fetch_add(&st->over, 1);
    /* completes later, from another task */
    assert_int_equal(serex_execute(st->pool, sop_finish, op), SEREX_OK);
}

struct stress_thread {
    struct stress *st;
    int first;
};

static int stress_main(void *arg)
{
    struct stress_thread *t = arg;
    struct stress *st = t->st;

    for (int i = t->first; i < t->first + STRESS_OPS; i++) {
        struct sop *op = &st->ops[i];

        if (i % 7 == 0 && serex_semaphore_try_acquire(st->s, op->n)) {
            atomic_fetch_add(&st->tries, 1);
            sop_start(op, SEREX_OK); /* taken directly: run it here */
            continue;
        }
        assert_int_equal(serex_semaphore_acquire(st->s, op->n, st->pool,
                                                 sop_start, op, op->token),
                         SEREX_OK);
        if (op->token != NULL)
            /* release: the canceller's acquire sees the token made */
            atomic_store_explicit(&st->next_token, i, memory_order_release);
    }
    return 0;
}

/* Cancels the tokens of ops already issued, as they come. */
static int cancel_main(void *arg)
{
    struct stress *st = arg;
    int done = 0;

    while (!serex_latch_is_open(st->done) && done < STRESS_TOTAL) {
        int upto = atomic_load_explicit(&st->next_token, memory_order_acquire);

        for (; done <= upto; done++)
            if (st->ops[done].token != NULL && done % 2 == 0)
                serex_cancel_request(st->ops[done].token, 0);
        serex__thread_yield();
    }
    return 0;
}

static void semaphore_stress_cap_holds_and_each_runs_once(void **state)
{
    serex_pool_config cfg = {.threads = 4, .name = "sem-stress"};
    struct stress st = {0};
    struct stress_thread th[STRESS_THREADS];
    serex__thread t[STRESS_THREADS], canceller;

    (void)state;
    assert_int_equal(serex_semaphore_create(STRESS_CAP, &st.s), SEREX_OK);
    assert_int_equal(serex_pool_create(&cfg, &st.pool), SEREX_OK);
    assert_int_equal(serex_latch_create(STRESS_TOTAL, &st.done), SEREX_OK);
    st.ops = calloc(STRESS_TOTAL, sizeof *st.ops);
    assert_non_null(st.ops);
    for (int i = 0; i < STRESS_TOTAL; i++) {
        st.ops[i].st = &st;
        st.ops[i].n = 1 + (uint32_t)(i % 3); /* 1..3 of 5 */
        if (i % 3 == 0)
            assert_int_equal(serex_cancel_create(NULL, &st.ops[i].token),
                             SEREX_OK);
    }
    for (int i = 0; i < STRESS_THREADS; i++) {
        th[i] = (struct stress_thread){&st, i * STRESS_OPS};
        assert_int_equal(serex__thread_start(&t[i], stress_main, &th[i]),
                         SEREX_OK);
    }
    assert_int_equal(serex__thread_start(&canceller, cancel_main, &st),
                     SEREX_OK);
    for (int i = 0; i < STRESS_THREADS; i++)
        serex__thread_join(t[i]);
    assert_int_equal(serex_latch_wait(st.done, TEST_TIMEOUT), SEREX_OK);
    serex__thread_join(canceller);
    assert_int_equal(serex_destroy(st.pool), SEREX_OK);
    assert_int_equal(atomic_load(&st.over), 0);
    for (int i = 0; i < STRESS_TOTAL; i++) {
        assert_int_equal(atomic_load(&st.ops[i].runs), 1);
        if (atomic_load(&st.ops[i].status) != SEREX_OK)
            assert_non_null(st.ops[i].token); /* only tokens cancel */
        serex_cancel_release(st.ops[i].token);
    }
    assert_int_equal(atomic_load(&st.granted) + atomic_load(&st.cancelled),
                     STRESS_TOTAL);
    print_message("[ stress   ] %d granted (%d by try_acquire), %d "
                  "cancelled\n",
                  atomic_load(&st.granted), atomic_load(&st.tries),
                  atomic_load(&st.cancelled));
    assert_int_equal(serex_semaphore_available(st.s), STRESS_CAP);
    serex_semaphore_destroy(st.s);
    serex_latch_destroy(st.done);
    free(st.ops);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(semaphore_create_bad_arguments_are_einval),
        T(semaphore_acquire_bad_arguments_are_einval),
        T(semaphore_acquire_with_free_permits_posts_at_once),
        T(semaphore_waiters_are_granted_in_fifo_order),
        T(semaphore_one_release_grants_several_in_order),
        T(semaphore_big_request_blocks_later_small_ones),
        T(semaphore_try_acquire_never_jumps_the_queue),
        T(semaphore_acquire_never_jumps_the_queue),
        T(semaphore_release_from_another_thread_grants),
        T(semaphore_permits_bound_operations_across_completions),
        T(semaphore_cancel_before_grant_posts_cause_and_frees_place),
        T(semaphore_cancel_after_grant_changes_nothing),
        T(semaphore_already_cancelled_token_posts_cause_at_once),
        T(semaphore_shared_token_cancels_each_waiter_once),
        T(semaphore_deadline_times_a_waiter_out),
        T(semaphore_destroy_before_granted_continuation_runs),
        T(semaphore_refused_continuation_runs_inline),
        T(semaphore_dropped_continuation_runs_where_dropped),
        T(semaphore_close_rejects_waiters_and_later_acquires),
        T(semaphore_closed_acquire_with_token_is_rejected),
        T(semaphore_allocates_under_no_spinlock),
        T(semaphore_dump_shows_permits_and_waiters),
        T(semaphore_stress_cap_holds_and_each_runs_once),
    };

    return cmocka_run_group_tests_name("semaphore", tests, NULL, NULL);
}
