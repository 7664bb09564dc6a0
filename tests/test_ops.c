/* SPDX-License-Identifier: MIT */
/*
 * test_ops.c - serex's internal operations taken back or dropped by the
 * executor they were queued on (promise 5, docs/contract.md): each runs
 * its own hook, none reaches a user's on_pending, none leaks (the ASan
 * build's LeakSanitizer checks the last; the counts here check the rest
 * in every build). One test per kind of operation and per way of losing
 * it: a pool's or a manual executor's shutdown_now with and without
 * on_pending, a manual executor's destroy, and a user-written executor
 * through the generic serex_shutdown_now.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "test_user_executor.h"
#include "test_util.h"

/* --- what on_pending sees --- */

/* A user's task: counts its runs in the int its argument points at. */
static void user_task(void *arg)
{
    ++*(int *)arg;
}

/* A user's task whose argument is malloc'd: the task frees it. */
static void owned_task(void *arg)
{
    free(arg);
}

/*
 * on_pending as docs/pool.md writes it: frees arg (the user's own), and
 * remembers what it saw. Anything but the user's two functions is an
 * internal operation reaching it, the bug this file is about: counted
 * apart, and not freed (it is not the user's).
 */
struct give_back {
    int user;     /* user tasks seen */
    int internal; /* internal operations seen: must stay 0 */
};

static void give_back(serex_fn fn, void *arg, void *ctx)
{
    struct give_back *g = ctx;

    if (fn != user_task && fn != owned_task) {
        g->internal++;
        return;
    }
    g->user++;
    if (fn == owned_task)
        free(arg);
}

/* A pool task that holds the pool's one thread until released. */
struct blocker {
    serex_event *started, *release;
};

static void blocker_task(void *arg)
{
    struct blocker *b = arg;

    serex_event_signal(b->started);
    assert_int_equal(serex_event_wait(b->release, TEST_TIMEOUT), SEREX_OK);
}

struct one_thread {
    serex_executor *pool;
    struct blocker b;
};

/* A one-thread pool whose thread is busy until one_thread_release. */
static void one_thread_hold(struct one_thread *o)
{
    serex_pool_config cfg = {.threads = 1};

    assert_int_equal(serex_pool_create(&cfg, &o->pool), SEREX_OK);
    assert_int_equal(serex_event_create(&o->b.started), SEREX_OK);
    assert_int_equal(serex_event_create(&o->b.release), SEREX_OK);
    assert_int_equal(serex_execute(o->pool, blocker_task, &o->b), SEREX_OK);
    assert_signalled(o->b.started);
}

static void one_thread_release(struct one_thread *o)
{
    serex_event_signal(o->b.release);
    assert_int_equal(serex_destroy(o->pool), SEREX_OK);
    serex_event_destroy(o->b.started);
    serex_event_destroy(o->b.release);
}

/* --- serial and striped drains --- */

/*
 * The user's report, as a test: two serials on a one-thread pool, then
 * serex_shutdown_now(pool, give_back) with the pool guide's give_back.
 * It used to receive the serials' drains (and free a serial: the destroy
 * after was a use after free); now the drains give back their references
 * and the serials' own shutdown_now hands the user's tasks over.
 */
static void pool_shutdown_now_gives_only_user_tasks(void **state)
{
    struct one_thread o;
    serex_executor *serial[2];
    struct give_back g = {0, 0};

    (void)state;
    one_thread_hold(&o);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(serex_serial_create(o.pool, NULL, &serial[i]),
                         SEREX_OK);
        for (int k = 0; k < 3; k++)
            assert_int_equal(serex_execute(serial[i], owned_task,
                                           malloc(16)),
                             SEREX_OK);
    }
    assert_int_equal(serex_execute(o.pool, owned_task, malloc(16)), SEREX_OK);
    /* the pool holds two drains and one user task */
    assert_int_equal(serex_shutdown_now(o.pool, give_back, &g), 3);
    assert_int_equal(g.internal, 0);
    assert_int_equal(g.user, 1);
    /* the serials keep their tasks for their own shutdown_now */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(serex_shutdown_now(serial[i], give_back, &g), 3);
        assert_int_equal(serex_destroy(serial[i]), SEREX_OK);
    }
    assert_int_equal(g.internal, 0);
    assert_int_equal(g.user, 7);
    one_thread_release(&o);
}

/* The same with no on_pending: the drains' references come back (the
 * serials are freed by destroy, which drops their tasks: LSan checks). */
static void pool_drop_serial_drains(void **state)
{
    struct one_thread o;
    serex_executor *serial;
    int ran = 0;

    (void)state;
    one_thread_hold(&o);
    assert_int_equal(serex_serial_create(o.pool, NULL, &serial), SEREX_OK);
    assert_int_equal(serex_execute(serial, user_task, &ran), SEREX_OK);
    assert_int_equal(serex_shutdown_now(o.pool, NULL, NULL), 1);
    /* broken: its target dropped the drain, so it refuses new work */
    assert_int_equal(serex_execute(serial, user_task, &ran), SEREX_EREJECTED);
    assert_int_equal(serex_destroy(serial), SEREX_OK);
    assert_int_equal(ran, 0);
    one_thread_release(&o);
}

/* Striped lanes and keyless tasks on a manual executor taken back with
 * on_pending: the keyless task's own function is handed over (it is the
 * user's), the lanes' drains never are. */
static void striped_ops_taken_back(void **state)
{
    serex_executor *man;
    serex_striped *st;
    struct give_back g = {0, 0};
    int ran = 0;

    (void)state;
    assert_int_equal(serex_manual_create(&man), SEREX_OK);
    assert_int_equal(serex_striped_create(man, NULL, &st), SEREX_OK);
    for (uint64_t key = 0; key < 4; key++)
        assert_int_equal(serex_striped_execute(st, key, user_task, &ran),
                         SEREX_OK);
    assert_int_equal(serex_execute(serex_striped_executor(st), owned_task,
                                   malloc(16)),
                     SEREX_OK);
    /* four drains and one keyless task */
    assert_int_equal(serex_shutdown_now(man, give_back, &g), 5);
    assert_int_equal(g.internal, 0);
    assert_int_equal(g.user, 1);
    g.user = 0;
    assert_int_equal(serex_shutdown_now(serex_striped_executor(st), give_back,
                                        &g),
                     4);
    assert_int_equal(g.user, 4);
    assert_int_equal(serex_destroy(serex_striped_executor(st)), SEREX_OK);
    assert_int_equal(serex_destroy(man), SEREX_OK);
    assert_int_equal(ran, 0);
    assert_int_equal(g.internal, 0);
}

/* A striped's drains and keyless task dropped by their target (no
 * on_pending, as a manual executor's destroy does): everything is given
 * back or freed (LSan), nothing runs. */
static void striped_ops_dropped(void **state)
{
    serex_executor *man;
    serex_striped *st;
    int ran = 0;

    (void)state;
    assert_int_equal(serex_manual_create(&man), SEREX_OK);
    assert_int_equal(serex_striped_create(man, NULL, &st), SEREX_OK);
    assert_int_equal(serex_striped_execute(st, 7, user_task, &ran), SEREX_OK);
    assert_int_equal(serex_execute(serex_striped_executor(st), user_task,
                                   &ran),
                     SEREX_OK);
    assert_int_equal(serex_shutdown_now(man, NULL, NULL), 2);
    assert_int_equal(serex_destroy(serex_striped_executor(st)), SEREX_OK);
    assert_int_equal(serex_destroy(man), SEREX_OK);
    assert_int_equal(ran, 0);
}

/* --- futures and timers --- */

static void *square(void *arg)
{
    return (void *)((intptr_t)arg * (intptr_t)arg);
}

/* A future's task taken back with on_pending: the future completes as
 * cancelled, on_pending sees nothing. */
static void future_task_taken_back(void **state)
{
    serex_executor *man;
    serex_future *f;
    struct give_back g = {0, 0};

    (void)state;
    assert_int_equal(serex_manual_create(&man), SEREX_OK);
    assert_int_equal(serex_submit(man, square, (void *)3, &f), SEREX_OK);
    assert_int_equal(serex_shutdown_now(man, give_back, &g), 1);
    assert_int_equal(g.internal + g.user, 0);
    assert_int_equal(serex_future_wait(f, 0), SEREX_ECANCELED);
    serex_future_release(f);
    assert_int_equal(serex_destroy(man), SEREX_OK);
}

/* A timer's run taken back by its target: the one-shot's own task goes to
 * on_pending, the timer ends (nothing pending, no leak). */
static void timer_run_taken_back(void **state)
{
    serex_scheduler_config cfg = {.manual = true};
    serex_scheduler *s;
    serex_executor *man;
    struct give_back g = {0, 0};

    (void)state;
    assert_int_equal(serex_scheduler_create(&cfg, &s), SEREX_OK);
    assert_int_equal(serex_manual_create(&man), SEREX_OK);
    assert_int_equal(serex_schedule(s, man, 0, owned_task, malloc(16), NULL),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 0), SEREX_OK);
    assert_int_equal(serex_scheduler_pending(s), 1);
    assert_int_equal(serex_shutdown_now(man, give_back, &g), 1);
    assert_int_equal(g.internal, 0);
    assert_int_equal(g.user, 1);
    assert_int_equal(serex_scheduler_pending(s), 0);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    assert_int_equal(serex_destroy(man), SEREX_OK);
}

/* The same two dropped with no on_pending (as a manual executor's destroy
 * drops its queue): the future completes as cancelled, the timer ends and
 * its task is dropped; nothing leaks (LSan). */
static void future_and_timer_run_dropped(void **state)
{
    serex_scheduler_config cfg = {.manual = true};
    serex_scheduler *s;
    serex_executor *man;
    serex_future *f;
    int ran = 0;

    (void)state;
    assert_int_equal(serex_scheduler_create(&cfg, &s), SEREX_OK);
    assert_int_equal(serex_manual_create(&man), SEREX_OK);
    assert_int_equal(serex_submit(man, square, (void *)3, &f), SEREX_OK);
    assert_int_equal(serex_schedule(s, man, 0, user_task, &ran, NULL),
                     SEREX_OK);
    assert_int_equal(serex_scheduler_advance(s, 0), SEREX_OK);
    assert_int_equal(serex_shutdown_now(man, NULL, NULL), 2);
    assert_int_equal(serex_future_wait(f, 0), SEREX_ECANCELED);
    assert_int_equal(serex_scheduler_pending(s), 0);
    assert_int_equal(ran, 0);
    serex_future_release(f);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    assert_int_equal(serex_destroy(man), SEREX_OK);
}

/* --- channel continuations and gate releases --- */

struct got {
    int n;
    void *item;
};

static void on_item(void *item, void *arg)
{
    struct got *g = arg;

    g->n++;
    g->item = item;
}

static void on_sent(void *arg)
{
    ++*(int *)arg;
}

/*
 * The leak the issue reported: a receive's continuation posted to a
 * manual executor that is then destroyed. Its record used to leak (LSan)
 * and the item with it; now the continuation runs where it is dropped.
 */
static void channel_continuation_dropped_by_destroy(void **state)
{
    serex_executor *man;
    serex_channel *ch;
    struct got got = {0, NULL};
    int sent = 0, item = 42;

    (void)state;
    assert_int_equal(serex_manual_create(&man), SEREX_OK);
    assert_int_equal(serex_channel_create(1, &ch), SEREX_OK);
    assert_int_equal(serex_channel_recv(ch, man, on_item, &got), SEREX_OK);
    assert_int_equal(serex_channel_send(ch, &item, man, on_sent, &sent),
                     SEREX_OK);
    assert_int_equal(got.n, 0); /* both posted, neither run */
    assert_int_equal(serex_destroy(man), SEREX_OK);
    assert_int_equal(got.n, 1);
    assert_ptr_equal(got.item, &item);
    assert_int_equal(sent, 1);
    serex_channel_destroy(ch);
}

/* The same through a pool's shutdown_now, with and without on_pending. */
static void channel_continuation_taken_back(void **state)
{
    struct one_thread o;
    serex_channel *ch;
    struct got got = {0, NULL};
    struct give_back g = {0, 0};
    int sent = 0, item = 7;

    (void)state;
    one_thread_hold(&o);
    assert_int_equal(serex_channel_create(1, &ch), SEREX_OK);
    assert_int_equal(serex_channel_recv(ch, o.pool, on_item, &got), SEREX_OK);
    assert_int_equal(serex_channel_send(ch, &item, o.pool, on_sent, &sent),
                     SEREX_OK);
    assert_int_equal(serex_shutdown_now(o.pool, give_back, &g), 2);
    assert_int_equal(g.internal + g.user, 0);
    assert_int_equal(got.n, 1);
    assert_ptr_equal(got.item, &item);
    assert_int_equal(sent, 1);
    serex_channel_destroy(ch);
    one_thread_release(&o);
}

static void channel_continuation_dropped_without_on_pending(void **state)
{
    struct one_thread o;
    serex_channel *ch;
    struct got got = {0, NULL};
    int item = 9;

    (void)state;
    one_thread_hold(&o);
    assert_int_equal(serex_channel_create(1, &ch), SEREX_OK);
    assert_int_equal(serex_channel_send(ch, &item, o.pool, on_sent,
                                        &got.n),
                     SEREX_OK);
    assert_int_equal(serex_shutdown_now(o.pool, NULL, NULL), 1);
    assert_int_equal(got.n, 1); /* the send's continuation ran here */
    serex_channel_destroy(ch);
    one_thread_release(&o);
}

/* A gate releases the user's own task to its target (no record of the
 * gate's goes with it): dropped there, it reaches on_pending as the
 * user's, and the gate holds nothing more. */
static void gate_release_taken_back(void **state)
{
    serex_executor *man;
    serex_gate *gate;
    struct give_back g = {0, 0};

    (void)state;
    assert_int_equal(serex_manual_create(&man), SEREX_OK);
    assert_int_equal(serex_gate_create(false, &gate), SEREX_OK);
    assert_int_equal(serex_gate_execute(gate, man, owned_task, malloc(16)),
                     SEREX_OK);
    serex_gate_open(gate);
    assert_int_equal(serex_shutdown_now(man, give_back, &g), 1);
    assert_int_equal(g.user, 1);
    assert_int_equal(g.internal, 0);
    assert_int_equal(serex_gate_destroy(gate, give_back, &g), 0);
    assert_int_equal(serex_destroy(man), SEREX_OK);
}

/* --- a user-written executor --- */

/* Every kind of operation queued on an executor serex knows nothing of,
 * taken back through the generic serex_shutdown_now: the same hooks. */
static void user_executor_ops_taken_back(void **state)
{
    struct test_user u;
    serex_executor *serial;
    serex_striped *st;
    serex_future *f;
    serex_channel *ch;
    struct give_back g = {0, 0};
    struct got got = {0, NULL};
    int ran = 0, item = 1;

    (void)state;
    test_user_init(&u);
    assert_int_equal(serex_serial_create(&u.base, NULL, &serial), SEREX_OK);
    assert_int_equal(serex_striped_create(&u.base, NULL, &st), SEREX_OK);
    assert_int_equal(serex_channel_create(1, &ch), SEREX_OK);
    assert_int_equal(serex_execute(serial, user_task, &ran), SEREX_OK);
    assert_int_equal(serex_striped_execute(st, 1, user_task, &ran), SEREX_OK);
    assert_int_equal(serex_execute(serex_striped_executor(st), owned_task,
                                   malloc(16)),
                     SEREX_OK);
    assert_int_equal(serex_submit(&u.base, square, (void *)2, &f), SEREX_OK);
    assert_int_equal(serex_channel_send(ch, &item, &u.base, on_sent, &ran),
                     SEREX_OK);
    assert_int_equal(serex_channel_recv(ch, &u.base, on_item, &got),
                     SEREX_OK);
    /* drain, lane drain, keyless, future, two continuations */
    assert_int_equal(serex_shutdown_now(&u.base, give_back, &g), 6);
    assert_int_equal(g.internal, 0);
    assert_int_equal(g.user, 1); /* the keyless task's own */
    assert_int_equal(serex_future_wait(f, 0), SEREX_ECANCELED);
    assert_int_equal(ran, 1); /* on_sent, run where it was taken back */
    assert_int_equal(got.n, 1);
    assert_int_equal(serex_shutdown_now(serial, give_back, &g), 1);
    assert_int_equal(serex_shutdown_now(serex_striped_executor(st), give_back,
                                        &g),
                     1);
    assert_int_equal(g.user, 3);
    assert_int_equal(serex_destroy(serial), SEREX_OK);
    assert_int_equal(serex_destroy(serex_striped_executor(st)), SEREX_OK);
    serex_future_release(f);
    serex_channel_destroy(ch);
    assert_int_equal(serex_destroy(&u.base), SEREX_OK);
}

/* --- promise 7 through a scheduler's targets --- */

struct sched_wait {
    serex_scheduler *s;
    serex_executor *target;
    int await0, await_forever, destroy;
    int ran; /* the timer's runs */
    serex_event *done;
};

/* From a task of the one-thread pool: a timer of ours due now on this
 * very pool can only run after us. */
static void sched_wait_task(void *arg)
{
    struct sched_wait *w = arg;
    serex_executor *face = serex_scheduler_executor(w->s);

    assert_int_equal(serex_schedule(w->s, w->target, 0, user_task, &w->ran,
                                    NULL),
                     SEREX_OK);
    serex_shutdown(face);
    w->await0 = serex_await_termination(face, 0);
    if (w->await0 == SEREX_EDEADLK) { /* else this would hang */
        w->await_forever = serex_await_termination(face, SEREX_FOREVER);
        w->destroy = serex_destroy(face);
    }
    serex_event_signal(w->done);
}

static void scheduler_await_from_its_target(void **state)
{
    serex_pool_config cfg = {.threads = 1};
    serex_executor *pool, *serial;
    struct sched_wait w = {0};

    (void)state;
    assert_int_equal(serex_pool_create(&cfg, &pool), SEREX_OK);
    /* the timer aims at a serial over the pool: the walk goes through it */
    assert_int_equal(serex_serial_create(pool, NULL, &serial), SEREX_OK);
    assert_int_equal(serex_scheduler_create(NULL, &w.s), SEREX_OK);
    assert_int_equal(serex_event_create(&w.done), SEREX_OK);
    w.target = serial;
    assert_int_equal(serex_execute(pool, sched_wait_task, &w), SEREX_OK);
    assert_signalled(w.done);
    assert_int_equal(w.await0, SEREX_EDEADLK);
    assert_int_equal(w.await_forever, SEREX_EDEADLK);
    assert_int_equal(w.destroy, SEREX_EDEADLK);
    /* from outside the pool it terminates once the run has had its turn */
    assert_int_equal(serex_await_termination(serex_scheduler_executor(w.s),
                                             TEST_TIMEOUT),
                     SEREX_OK);
    assert_int_equal(serex_destroy(serial), SEREX_OK); /* the run is over */
    assert_int_equal(w.ran, 1);
    assert_int_equal(serex_destroy(serex_scheduler_executor(w.s)), SEREX_OK);
    assert_int_equal(serex_destroy(pool), SEREX_OK);
    serex_event_destroy(w.done);
}

/* A task of another executor, which no timer aims at, may wait. */
static void scheduler_await_from_elsewhere(void **state)
{
    serex_executor *man;
    serex_scheduler *s;
    struct sched_wait w = {0};

    (void)state;
    assert_int_equal(serex_manual_create(&man), SEREX_OK);
    assert_int_equal(serex_scheduler_create(NULL, &s), SEREX_OK);
    assert_int_equal(serex_event_create(&w.done), SEREX_OK);
    w.s = s;
    w.target = NULL; /* the timer runs on the timer thread */
    assert_int_equal(serex_execute(man, sched_wait_task, &w), SEREX_OK);
    assert_true(serex_manual_run_one(man));
    assert_int_not_equal(w.await0, SEREX_EDEADLK);
    assert_int_equal(serex_await_termination(serex_scheduler_executor(s),
                                             TEST_TIMEOUT),
                     SEREX_OK);
    assert_int_equal(w.ran, 1);
    assert_int_equal(serex_destroy(serex_scheduler_executor(s)), SEREX_OK);
    assert_int_equal(serex_destroy(man), SEREX_OK);
    serex_event_destroy(w.done);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pool_shutdown_now_gives_only_user_tasks),
        cmocka_unit_test(pool_drop_serial_drains),
        cmocka_unit_test(striped_ops_taken_back),
        cmocka_unit_test(striped_ops_dropped),
        cmocka_unit_test(future_task_taken_back),
        cmocka_unit_test(timer_run_taken_back),
        cmocka_unit_test(future_and_timer_run_dropped),
        cmocka_unit_test(channel_continuation_dropped_by_destroy),
        cmocka_unit_test(channel_continuation_taken_back),
        cmocka_unit_test(channel_continuation_dropped_without_on_pending),
        cmocka_unit_test(gate_release_taken_back),
        cmocka_unit_test(user_executor_ops_taken_back),
        cmocka_unit_test(scheduler_await_from_its_target),
        cmocka_unit_test(scheduler_await_from_elsewhere),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
