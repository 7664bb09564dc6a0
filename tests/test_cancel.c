/* SPDX-License-Identifier: MIT */
/*
 * test_cancel.c - the cancellation token (cancel.h): the first request
 * wins with its cause, children follow their parent, on_cancel posts (at
 * once when cancelled already, inline when refused), unregister takes a
 * callback back or waits for its run (and does not wait from inside it),
 * deadlines on a manual clock, bad input, and a race of registrations
 * against a request on several threads.
 */
#include "test_util.h"

#include <stdatomic.h>

#include "thread_internal.h" /* serex__thread_start */

struct hit {
    atomic_int n;
    serex_cancel *c;
    int cause;              /* serex_cancel_cause inside the callback */
    serex_cancel_reg *self; /* unregistered from inside, when set */
    bool self_answer;
};

static void hit_cb(void *arg)
{
    struct hit *h = arg;

    h->cause = serex_cancel_cause(h->c);
    if (h->self != NULL)
        h->self_answer = serex_cancel_unregister(h->self);
    atomic_fetch_add(&h->n, 1);
}

static void request_first_wins_with_its_cause(void **state)
{
    serex_cancel *c;

    (void)state;
    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    assert_false(serex_cancel_requested(c));
    assert_int_equal(serex_cancel_cause(c), 0);
    assert_false(serex_cancel_request(c, 1)); /* positive: refused */
    assert_false(serex_cancel_request(c, SEREX_ERROR_MIN - 1));
    assert_false(serex_cancel_requested(c));
    assert_true(serex_cancel_request(c, -100));
    assert_true(serex_cancel_requested(c));
    assert_int_equal(serex_cancel_cause(c), -100);
    assert_false(serex_cancel_request(c, 0)); /* the first one won */
    assert_int_equal(serex_cancel_cause(c), -100);
    serex_cancel_release(c);

    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    assert_true(serex_cancel_request(c, 0)); /* 0: SEREX_ECANCELED */
    assert_int_equal(serex_cancel_cause(c), SEREX_ECANCELED);
    serex_cancel_release(c);
}

static void on_cancel_posts_to_its_target(void **state)
{
    serex_executor *m;
    serex_cancel *c;
    serex_cancel_reg *r1, *r2;
    struct hit h1 = {0}, h2 = {0};

    (void)state;
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    h1.c = h2.c = c;
    assert_int_equal(serex_cancel_on_cancel(c, m, hit_cb, &h1, &r1), SEREX_OK);
    assert_int_equal(serex_cancel_on_cancel(c, m, hit_cb, &h2, &r2), SEREX_OK);
    assert_int_equal(serex_manual_run_pending(m), 0); /* not yet */
    assert_true(serex_cancel_request(c, -42));
    assert_int_equal(atomic_load(&h1.n), 0); /* posted, not run */
    assert_int_equal(serex_manual_run_pending(m), 2);
    assert_int_equal(atomic_load(&h1.n), 1);
    assert_int_equal(atomic_load(&h2.n), 1);
    assert_int_equal(h1.cause, -42);           /* the cause is visible inside */
    assert_false(serex_cancel_unregister(r1)); /* it ran */
    assert_false(serex_cancel_unregister(r2));
    assert_int_equal(serex_manual_run_pending(m), 0); /* each once */
    serex_cancel_release(c);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

static void on_cancel_when_cancelled_posts_at_once(void **state)
{
    serex_executor *m;
    serex_cancel *c;
    serex_cancel_reg *r;
    struct hit h = {0};

    (void)state;
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    h.c = c;
    assert_true(serex_cancel_request(c, 0));
    assert_int_equal(serex_cancel_on_cancel(c, m, hit_cb, &h, &r), SEREX_OK);
    /* the registration holds the token: its callback may read the cause
     * after the handle is gone (a use after free before: the fuzzer) */
    serex_cancel_release(c);
    assert_int_equal(serex_manual_run_pending(m), 1);
    assert_int_equal(atomic_load(&h.n), 1);
    assert_int_equal(h.cause, SEREX_ECANCELED);
    assert_false(serex_cancel_unregister(r));
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

static void unregister_first_means_never(void **state)
{
    serex_executor *m;
    serex_cancel *c;
    serex_cancel_reg *r;
    struct hit h = {0};

    (void)state;
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    h.c = c;
    assert_int_equal(serex_cancel_on_cancel(c, m, hit_cb, &h, &r), SEREX_OK);
    assert_true(serex_cancel_unregister(r));
    assert_true(serex_cancel_request(c, 0));
    assert_int_equal(serex_manual_run_pending(m), 0);
    assert_int_equal(atomic_load(&h.n), 0);
    serex_cancel_release(c);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

/* A target that refuses: the callback runs inline, in the request. */
static void refused_callback_runs_in_the_request(void **state)
{
    serex_executor *m;
    serex_cancel *c;
    serex_cancel_reg *r;
    struct hit h = {0};

    (void)state;
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    h.c = c;
    assert_int_equal(serex_cancel_on_cancel(c, m, hit_cb, &h, &r), SEREX_OK);
    serex_shutdown(m);
    assert_true(serex_cancel_request(c, -9));
    assert_int_equal(atomic_load(&h.n), 1); /* ran here */
    assert_int_equal(h.cause, -9);
    assert_false(serex_cancel_unregister(r));
    serex_cancel_release(c);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

/* Taken back by shutdown_now: runs where it was taken back (2a). */
static void dropped_callback_runs_where_dropped(void **state)
{
    struct test_pending tp = {0};
    serex_executor *m;
    serex_cancel *c;
    serex_cancel_reg *r;
    struct hit h = {0};

    (void)state;
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    h.c = c;
    assert_int_equal(serex_cancel_on_cancel(c, m, hit_cb, &h, &r), SEREX_OK);
    assert_true(serex_cancel_request(c, 0));
    assert_int_equal(atomic_load(&h.n), 0);
    assert_int_equal(serex_shutdown_now(m, test_pending_cb, &tp), 1);
    assert_int_equal(tp.n, 0);              /* never an on_pending */
    assert_int_equal(atomic_load(&h.n), 1); /* it ran here */
    assert_false(serex_cancel_unregister(r));
    serex_cancel_release(c);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

/* From inside its own callback: false at once, freed after it returns
 * (ASan's leak check sees a record left behind). */
static void unregister_from_inside_does_not_wait(void **state)
{
    serex_executor *m;
    serex_cancel *c;
    serex_cancel_reg *r;
    struct hit h = {0};

    (void)state;
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    h.c = c;
    h.self_answer = true;
    assert_int_equal(serex_cancel_on_cancel(c, m, hit_cb, &h, &r), SEREX_OK);
    h.self = r;
    assert_true(serex_cancel_request(c, 0));
    assert_int_equal(serex_manual_run_pending(m), 1);
    assert_int_equal(atomic_load(&h.n), 1);
    assert_false(h.self_answer);
    serex_cancel_release(c);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

/* From another thread while the callback runs: returns only after it. */
struct slow {
    serex_event *go;
    atomic_int finished;
    serex_cancel_reg *r;
    atomic_int seen_finished; /* what unregister's caller saw after it */
};

static void slow_cb(void *arg)
{
    struct slow *s = arg;

    assert_int_equal(serex_event_wait(s->go, SEREX_FOREVER), SEREX_OK);
    atomic_store(&s->finished, 1);
}

static int unregister_thread(void *arg)
{
    struct slow *s = arg;

    assert_false(serex_cancel_unregister(s->r));
    atomic_store(&s->seen_finished, atomic_load(&s->finished) + 1);
    return 0;
}

static void unregister_waits_for_a_running_callback(void **state)
{
    serex_executor *pool;
    serex_cancel *c;
    struct slow s = {0};
    serex__thread t;

    (void)state;
    assert_int_equal(serex_pool_create(NULL, &pool), SEREX_OK);
    assert_int_equal(serex_event_create(&s.go), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    assert_int_equal(serex_cancel_on_cancel(c, pool, slow_cb, &s, &s.r),
                     SEREX_OK);
    assert_true(serex_cancel_request(c, 0));
    assert_int_equal(serex__thread_start(&t, unregister_thread, &s), SEREX_OK);
    /* Give the unregister time to get into its wait (if it did not wait,
     * it would see finished 0 whenever it ran before the signal). */
    test_sleep_ns(20 * MS);
    assert_int_equal(atomic_load(&s.seen_finished), 0); /* still waiting */
    serex_event_signal(s.go);
    serex__thread_join(t);
    assert_int_equal(atomic_load(&s.seen_finished), 2); /* after fn */
    serex_cancel_release(c);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    serex_event_destroy(s.go);
}

static void children_follow_their_parent(void **state)
{
    serex_cancel *p, *a, *b, *gc, *late;

    (void)state;
    assert_int_equal(serex_cancel_create(NULL, &p), SEREX_OK);
    assert_int_equal(serex_cancel_create(p, &a), SEREX_OK);
    assert_int_equal(serex_cancel_create(p, &b), SEREX_OK);
    assert_int_equal(serex_cancel_create(a, &gc), SEREX_OK);
    assert_true(serex_cancel_request(b, -5)); /* a child alone */
    assert_false(serex_cancel_requested(p));
    assert_false(serex_cancel_requested(a));
    serex_cancel_release(a); /* a stays while gc holds it */
    assert_true(serex_cancel_request(p, -7));
    assert_int_equal(serex_cancel_cause(gc), -7); /* through a */
    assert_int_equal(serex_cancel_cause(b), -5);  /* it was first */
    assert_int_equal(serex_cancel_create(p, &late), SEREX_OK);
    assert_int_equal(serex_cancel_cause(late), -7); /* born cancelled */
    serex_cancel_release(p);                        /* before its children */
    serex_cancel_release(gc);
    serex_cancel_release(b);
    serex_cancel_release(late);
}

static void deadline_cancels_with_etimedout(void **state)
{
    serex_scheduler_config cfg = {.manual = true};
    serex_scheduler *s;
    serex_executor *m;
    serex_cancel *c, *child;
    serex_cancel_reg *r;
    struct hit h = {0};

    (void)state;
    assert_int_equal(serex_scheduler_create(&cfg, &s), SEREX_OK);
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    assert_int_equal(serex_cancel_create(c, &child), SEREX_OK);
    h.c = child;
    assert_int_equal(serex_cancel_on_cancel(child, m, hit_cb, &h, &r),
                     SEREX_OK);
    assert_int_equal(serex_cancel_deadline(c, s, 100 * MS), SEREX_OK);
    assert_int_equal(serex_cancel_deadline(c, s, 300 * MS), SEREX_OK);
    assert_int_equal(serex_scheduler_pending(s), 2);
    assert_int_equal(serex_scheduler_advance(s, 99 * MS), SEREX_OK);
    assert_false(serex_cancel_requested(c));
    assert_int_equal(serex_scheduler_advance(s, 1 * MS), SEREX_OK);
    assert_int_equal(serex_cancel_cause(c), SEREX_ETIMEDOUT);
    assert_int_equal(serex_scheduler_pending(s), 0); /* the later one too */
    assert_int_equal(serex_manual_run_pending(m), 1);
    assert_int_equal(h.cause, SEREX_ETIMEDOUT); /* the child's */
    assert_false(serex_cancel_unregister(r));
    serex_cancel_release(child);
    serex_cancel_release(c);
    assert_int_equal(serex_destroy(m), SEREX_OK);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
}

static void deadline_stops_when_cancelled_first(void **state)
{
    serex_scheduler_config cfg = {.manual = true};
    serex_scheduler *s;
    serex_cancel *c;

    (void)state;
    assert_int_equal(serex_scheduler_create(&cfg, &s), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    assert_int_equal(serex_cancel_deadline(c, s, SEC), SEREX_OK);
    assert_int_equal(serex_scheduler_pending(s), 1);
    assert_true(serex_cancel_request(c, -3));
    assert_int_equal(serex_scheduler_pending(s), 0); /* the timer went */
    assert_int_equal(serex_scheduler_advance(s, 2 * SEC), SEREX_OK);
    assert_int_equal(serex_cancel_cause(c), -3);
    /* cancelled already: nothing to arm */
    assert_int_equal(serex_cancel_deadline(c, s, SEC), SEREX_OK);
    assert_int_equal(serex_scheduler_pending(s), 0);
    serex_cancel_release(c);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
}

/* A scheduler that drops its pending timers at shutdown: the deadline
 * never comes, the token stays usable and is freed (LeakSanitizer). */
static void dropped_deadline_never_comes(void **state)
{
    serex_scheduler_config cfg = {.manual = true,
                                  .on_shutdown = SEREX_PENDING_DROP};
    serex_scheduler *s;
    serex_cancel *c;

    (void)state;
    assert_int_equal(serex_scheduler_create(&cfg, &s), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    assert_int_equal(serex_cancel_deadline(c, s, SEC), SEREX_OK);
    serex_shutdown(serex_scheduler_executor(s));
    assert_int_equal(serex_cancel_deadline(c, s, SEC), SEREX_EREJECTED);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    assert_false(serex_cancel_requested(c));
    serex_cancel_release(c);
}

static void bad_input_is_einval(void **state)
{
    serex_executor *m;
    serex_cancel *c = (serex_cancel *)&c;
    serex_cancel_reg *r = (serex_cancel_reg *)&r;
    struct hit h = {0};

    (void)state;
    assert_int_equal(serex_manual_create(&m), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, NULL), SEREX_EINVAL);
    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    assert_int_equal(serex_cancel_on_cancel(NULL, m, hit_cb, &h, &r),
                     SEREX_EINVAL);
    assert_null(r);
    assert_int_equal(serex_cancel_on_cancel(c, NULL, hit_cb, &h, &r),
                     SEREX_EINVAL);
    assert_int_equal(serex_cancel_on_cancel(c, m, NULL, &h, &r), SEREX_EINVAL);
    assert_int_equal(serex_cancel_on_cancel(c, m, hit_cb, &h, NULL),
                     SEREX_EINVAL);
    assert_int_equal(serex_cancel_deadline(NULL, NULL, 0), SEREX_EINVAL);
    assert_int_equal(serex_cancel_deadline(c, NULL, 0), SEREX_EINVAL);
    assert_false(serex_cancel_request(NULL, 0));
    assert_false(serex_cancel_requested(NULL));
    assert_int_equal(serex_cancel_cause(NULL), 0);
    assert_false(serex_cancel_unregister(NULL));
    serex_cancel_release(NULL);
    assert_false(serex_cancel_requested(c)); /* nothing changed */
    serex_cancel_release(c);
    assert_int_equal(serex_destroy(m), SEREX_OK);
}

/* Threads register and unregister while another requests: every
 * registration either is taken back (true: its callback never ran) or
 * ran exactly once before its unregister returned. */
#define RACE_THREADS 3
#define RACE_ROUNDS 200
#define RACE_REGS 8

struct race {
    serex_cancel *c;
    serex_executor *pool;
    atomic_int ran[RACE_THREADS][RACE_REGS];
    atomic_int taken_back;
    atomic_int ran_total;
    int thread;
};

struct race_slot {
    struct race *race;
    atomic_int *ran;
};

static void race_cb(void *arg)
{
    struct race_slot *slot = arg;

    atomic_fetch_add(slot->ran, 1);
}

struct race_arg {
    struct race *race;
    int id;
};

static int race_thread(void *arg)
{
    struct race_arg *a = arg;
    struct race *race = a->race;
    struct race_slot slots[RACE_REGS];
    serex_cancel_reg *regs[RACE_REGS];

    for (int i = 0; i < RACE_REGS; i++) {
        slots[i].race = race;
        slots[i].ran = &race->ran[a->id][i];
        atomic_store(slots[i].ran, 0);
        assert_int_equal(serex_cancel_on_cancel(race->c, race->pool, race_cb,
                                                &slots[i], &regs[i]),
                         SEREX_OK);
    }
    for (int i = 0; i < RACE_REGS; i++) {
        if (serex_cancel_unregister(regs[i])) {
            assert_int_equal(atomic_load(slots[i].ran), 0);
            atomic_fetch_add(&race->taken_back, 1);
        } else {
            assert_int_equal(atomic_load(slots[i].ran), 1); /* finished */
            atomic_fetch_add(&race->ran_total, 1);
        }
    }
    return 0;
}

static void registrations_race_a_request(void **state)
{
    struct race race;
    struct race_arg args[RACE_THREADS];
    serex__thread t[RACE_THREADS];

    (void)state;
    assert_int_equal(serex_pool_create(NULL, &race.pool), SEREX_OK);
    for (int round = 0; round < RACE_ROUNDS; round++) {
        atomic_store(&race.taken_back, 0);
        atomic_store(&race.ran_total, 0);
        assert_int_equal(serex_cancel_create(NULL, &race.c), SEREX_OK);
        for (int i = 0; i < RACE_THREADS; i++) {
            args[i] = (struct race_arg){&race, i};
            assert_int_equal(serex__thread_start(&t[i], race_thread, &args[i]),
                             SEREX_OK);
        }
        assert_true(serex_cancel_request(race.c, 0));
        for (int i = 0; i < RACE_THREADS; i++)
            serex__thread_join(t[i]);
        assert_int_equal(atomic_load(&race.taken_back) +
                             atomic_load(&race.ran_total),
                         RACE_THREADS * RACE_REGS);
        serex_cancel_release(race.c);
    }
    assert_int_equal(serex_destroy(race.pool), SEREX_OK);
}

/* serex_execute_wait_token: a full pool (its one worker held, its queue
 * of 1 taken); a wait that the token ends, one that it ends at once. */
struct full {
    serex_event *in, *go;
};

static void hold_task(void *arg)
{
    struct full *f = arg;

    serex_event_signal(f->in);
    assert_int_equal(serex_event_wait(f->go, SEREX_FOREVER), SEREX_OK);
}

static void nop_task(void *arg)
{
    (void)arg;
}

static int cancel_soon(void *arg)
{
    test_sleep_ns(MS); /* most often after the waiter slept */
    assert_true(serex_cancel_request(arg, -55));
    return 0;
}

static void execute_wait_token_ends_on_cancel(void **state)
{
    serex_pool_config cfg = {.threads = 1, .queue_capacity = 1};
    serex_executor *pool;
    serex_cancel *c;
    struct full f;
    serex__thread t;

    (void)state;
    assert_int_equal(serex_pool_create(&cfg, &pool), SEREX_OK);
    assert_int_equal(serex_event_create(&f.in), SEREX_OK);
    assert_int_equal(serex_event_create(&f.go), SEREX_OK);
    assert_int_equal(serex_cancel_create(NULL, &c), SEREX_OK);
    assert_int_equal(serex_execute(pool, hold_task, &f), SEREX_OK);
    assert_int_equal(serex_event_wait(f.in, SEREX_FOREVER), SEREX_OK);
    assert_int_equal(serex_execute(pool, nop_task, NULL), SEREX_OK);
    assert_int_equal(serex_execute(pool, nop_task, NULL), SEREX_EFULL);
    assert_int_equal(serex__thread_start(&t, cancel_soon, c), SEREX_OK);
    assert_int_equal(
        serex_execute_wait_token(pool, nop_task, NULL, SEREX_FOREVER, c), -55);
    serex__thread_join(t);
    /* cancelled already, still full: at once */
    assert_int_equal(
        serex_execute_wait_token(pool, nop_task, NULL, SEREX_FOREVER, c), -55);
    assert_int_equal(serex_execute_wait_token(NULL, nop_task, NULL, 0, c),
                     SEREX_EINVAL);
    serex_event_signal(f.go);
    /* NULL: serex_execute_wait (waits for the room the release makes) */
    assert_int_equal(
        serex_execute_wait_token(pool, nop_task, NULL, SEREX_FOREVER, NULL),
        SEREX_OK);
    serex_cancel_release(c);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    serex_event_destroy(f.in);
    serex_event_destroy(f.go);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(request_first_wins_with_its_cause),
        cmocka_unit_test(on_cancel_posts_to_its_target),
        cmocka_unit_test(on_cancel_when_cancelled_posts_at_once),
        cmocka_unit_test(unregister_first_means_never),
        cmocka_unit_test(refused_callback_runs_in_the_request),
        cmocka_unit_test(dropped_callback_runs_where_dropped),
        cmocka_unit_test(unregister_from_inside_does_not_wait),
        cmocka_unit_test(unregister_waits_for_a_running_callback),
        cmocka_unit_test(children_follow_their_parent),
        cmocka_unit_test(deadline_cancels_with_etimedout),
        cmocka_unit_test(deadline_stops_when_cancelled_first),
        cmocka_unit_test(dropped_deadline_never_comes),
        cmocka_unit_test(bad_input_is_einval),
        cmocka_unit_test(registrations_race_a_request),
        cmocka_unit_test(execute_wait_token_ends_on_cancel),
    };

    return cmocka_run_group_tests_name("cancel", tests, NULL, NULL);
}
