/* SPDX-License-Identifier: MIT */
/*
 * crawler.c - a crawler as a new user wanted to write it: one token per
 * request with a deadline, a semaphore that bounds the fetches in flight
 * (a permit held until the fetch's I/O completes, after its task has
 * returned), a fail-fast group, and serex_future_any over mirrors.
 * docs/cancellation.md explains each piece.
 *
 * The "I/O" is a timer that completes a promise a few milliseconds later
 * (a real crawler would complete it from its HTTP library's callback).
 * Three requests: one that succeeds, one whose fetch #5 fails (the rest
 * are cancelled at once, waiting permits and timers included), one whose
 * fetch #2 never answers (the request's deadline ends it). No thread
 * blocks but main's waits.
 */
#include <serex/serex.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NURLS 24
#define MAX_IN_FLIGHT 4
#define ERR_FETCH (-1001) /* our own code: >= SEREX_ERROR_MIN */

struct request {
    serex_executor *pool;
    serex_scheduler *sched;
    serex_semaphore *permits; /* fetches in flight */
    serex_group *g;           /* fail-fast; its token cancels the rest */
    int fail_at, hang_at;     /* which url fails / never answers: -1 none */
    atomic_int in_flight, max_in_flight, fetched, cancelled;
    serex_cancel *req; /* the request's token */
    int why;           /* its cause, if it was cancelled while at work */
    size_t errors;     /* errors the group counted */
};

/* The process's "shutting down" token: every request's is its child. */
static serex_cancel *shutting_down;

struct fetch {
    struct request *rq;
    int url;
    serex_future *done; /* a promise: the I/O completes it */
    serex_timer *io;    /* the simulated I/O, or NULL */
};

static void check(int rc, const char *what)
{
    if (rc != SEREX_OK) {
        fprintf(stderr, "crawler: %s: %s\n", what, serex_strerror(rc));
        exit(1);
    }
}

/* The I/O's end, on a pool thread: complete the fetch's promise. */
static void io_done(void *arg)
{
    struct fetch *f = arg;

    if (f->url == f->rq->fail_at)
        serex_future_fail(f->done, ERR_FETCH);
    else
        serex_future_complete(f->done, f); /* the "page" */
}

/* Last: the timer's run (if any) has returned; nothing uses f any more. */
static void fetch_free(void *arg)
{
    struct fetch *f = arg;
    serex_group *g = f->rq->g;

    serex_timer_release(f->io);
    serex_future_release(f->done);
    free(f);
    serex_group_leave(g); /* may empty the group: nothing after */
}

/* The fetch has ended, one way or another (its promise's continuation). */
static void fetch_end(void *arg)
{
    struct fetch *f = arg;
    struct request *rq = f->rq;
    int rc = serex_future_error(f->done);

    atomic_fetch_sub(&rq->in_flight, 1);
    serex_semaphore_release(rq->permits, 1); /* the next fetch may go */
    if (rc == 0)
        atomic_fetch_add(&rq->fetched, 1);
    else if (serex_cancel_requested(serex_group_token(rq->g)))
        /* stopped by the first error or the deadline (the group's token
         * carries it as its cause, so the code alone does not tell) */
        atomic_fetch_add(&rq->cancelled, 1);
    else
        serex_group_fail(rq->g, rc); /* the first: cancels the rest */
    /* A run of io_done may still be returning: free f once it has. */
    if (f->io == NULL)
        fetch_free(f);
    else
        check(serex_timer_cancel_notify(f->io, rq->pool, fetch_free, f, NULL),
              "cancel_notify");
}

/* A permit, or why not: start the I/O. */
static void on_permit(void *arg, int status)
{
    struct fetch *f = arg;
    struct request *rq = f->rq;
    serex_cancel *tok = serex_group_token(rq->g);
    int64_t delay = f->url == rq->hang_at ? SEREX_SEC(60)
                                          : SEREX_MS(1 + f->url % 3);
    int n, max, rc;

    if (status != SEREX_OK) { /* cancelled while waiting: no permit */
        atomic_fetch_add(&rq->cancelled, 1);
        fetch_free(f);
        return;
    }
    n = atomic_fetch_add(&rq->in_flight, 1) + 1;
    max = atomic_load(&rq->max_in_flight);
    while (n > max &&
           !atomic_compare_exchange_weak(&rq->max_in_flight, &max, n))
        ;
    check(serex_promise_create(&f->done), "promise");
    /* The I/O obeys the group's token: cancelled, it never runs. */
    rc = serex_schedule_token(rq->sched, rq->pool, delay, tok, io_done, f,
                              &f->io);
    if (rc != SEREX_OK)
        serex_future_fail(f->done, rc); /* cancelled meanwhile */
    check(serex_future_cancel_on(f->done, tok), "cancel_on");
    check(serex_future_on_done(f->done, rq->pool, fetch_end, f), "on_done");
}

/* Posted when the request's token is cancelled: note why. */
static void note_why(void *arg)
{
    struct request *rq = arg;

    rq->why = serex_cancel_cause(rq->req);
}

static int crawl(serex_executor *pool, serex_scheduler *sched, int fail_at,
                 int hang_at, int64_t deadline, struct request *rq)
{
    serex_cancel *req;
    serex_cancel_reg *reg;
    serex_group_config gc = {.flags = SEREX_GROUP_FAIL_FAST};
    int rc;

    *rq = (struct request){
        .pool = pool, .sched = sched, .fail_at = fail_at, .hang_at = hang_at};
    check(serex_cancel_create(shutting_down, &req), "token");
    rq->req = req;
    check(serex_cancel_on_cancel(req, pool, note_why, rq, &reg), "on_cancel");
    check(serex_cancel_deadline(req, sched, deadline), "deadline");
    gc.parent = req;
    check(serex_group_create_config(&gc, &rq->g), "group");
    check(serex_semaphore_create(MAX_IN_FLIGHT, &rq->permits), "semaphore");
    for (int i = 0; i < NURLS; i++) {
        struct fetch *f = calloc(1, sizeof *f);

        if (f == NULL)
            check(SEREX_ENOMEM, "fetch");
        f->rq = rq;
        f->url = i;
        serex_group_enter(rq->g); /* the fetch, until fetch_free */
        check(serex_semaphore_acquire(rq->permits, 1, pool, on_permit, f,
                                      serex_group_token(rq->g)),
              "acquire");
    }
    serex_group_close(rq->g);
    rc = serex_group_wait(rq->g, SEREX_FOREVER); /* OK or the first error */
    rq->errors = serex_group_error_count(rq->g);
    if (rc != serex_group_error(rq->g) && rc != SEREX_OK)
        check(rc, "group outcome");
    /* Take note_why back before our own request below: true, it never
     * ran; false, it has finished (why is then safe to read) */
    (void)serex_cancel_unregister(reg);
    serex_cancel_request(req, 0); /* the work is over: stop the deadline */
    serex_cancel_release(req);
    serex_group_destroy(rq->g);
    serex_semaphore_destroy(rq->permits);
    return rc;
}

/* serex_future_any: the first of three mirrors to answer. */
static void mirror_answers(void *arg)
{
    serex_future_complete(arg, arg);
}

static void race_mirrors(serex_scheduler *sched, serex_executor *pool)
{
    serex_future *m[3], *first, *every;
    serex_timer *t[3];
    int winner = -1;

    for (int i = 0; i < 3; i++) {
        check(serex_promise_create(&m[i]), "mirror");
        check(serex_schedule(sched, pool, SEREX_MS(3 - i), mirror_answers, m[i],
                             &t[i]),
              "mirror timer");
    }
    check(serex_future_any(m, 3, SEREX_FUTURE_CANCEL_REST, &first), "any");
    check(serex_future_deadline(first, sched, SEREX_SEC(10)), "deadline");
    /* a wait that shutting down would end too */
    check(serex_future_wait_token(first, SEREX_FOREVER, shutting_down),
          "mirrors");
    /* all three settled: the losers cancelled (SEREX_ECANCELED), unless
     * they answered first under a stall */
    check(serex_future_all(m, 3, 0, &every), "all");
    for (int i = 0; i < 3; i++)
        if (serex_future_value(first) == m[i])
            winner = i;
    printf("crawler: mirror %d answered first; all three: %s\n", winner,
           serex_strerror(serex_future_wait(every, SEREX_FOREVER)));
    serex_future_release(every);
    serex_future_release(first);
    for (int i = 0; i < 3; i++) { /* a loser's timer may still run: */
        check(serex_timer_cancel_wait(t[i], SEREX_FOREVER, NULL), "wait");
        serex_timer_release(t[i]);
        serex_future_release(m[i]); /* no one completes it any more */
    }
}

int main(void)
{
    serex_executor *pool;
    serex_scheduler *sched;
    struct request rq;
    int rc;

    check(serex_pool_create(NULL, &pool), "pool");
    check(serex_scheduler_create(NULL, &sched), "scheduler");
    check(serex_cancel_create(NULL, &shutting_down), "shutdown token");

    rc = crawl(pool, sched, -1, -1, SEREX_SEC(30), &rq);
    printf("crawler: request 1: %s, %d fetched, at most %d in flight\n",
           serex_strerror(rc), atomic_load(&rq.fetched),
           atomic_load(&rq.max_in_flight));
    if (rc != SEREX_OK || atomic_load(&rq.fetched) != NURLS ||
        atomic_load(&rq.max_in_flight) > MAX_IN_FLIGHT)
        return 1;

    rc = crawl(pool, sched, 5, -1, SEREX_SEC(30), &rq);
    printf("crawler: request 2: fetch 5 failed (%d, %zu error), %d fetched, "
           "%d cancelled\n",
           rc, rq.errors, atomic_load(&rq.fetched), atomic_load(&rq.cancelled));
    if (rc != ERR_FETCH || rq.errors != 1 || rq.why != 0 ||
        atomic_load(&rq.fetched) + atomic_load(&rq.cancelled) != NURLS - 1)
        return 1;

    rc = crawl(pool, sched, -1, 2, SEREX_MS(100), &rq);
    printf("crawler: request 3: %s (its token: %s), %d fetched, %d "
           "cancelled\n",
           serex_strerror(rc), serex_strerror(rq.why), atomic_load(&rq.fetched),
           atomic_load(&rq.cancelled));
    if (rc != SEREX_ETIMEDOUT || rq.why != SEREX_ETIMEDOUT ||
        atomic_load(&rq.cancelled) < 1)
        return 1;

    race_mirrors(sched, pool);
    check(serex_destroy(serex_scheduler_executor(sched)), "scheduler");
    check(serex_destroy(pool), "pool");
    serex_cancel_release(shutting_down);
    printf("crawler: ok\n");
    return 0;
}
