/* SPDX-License-Identifier: MIT */
/*
 * probe_target.c - the program scripts/check_probes.sh traces. Through the
 * public API only, it makes a known number of the events of every static
 * probe (src/probe_internal.h, docs/probes.md), then prints what a tool
 * attached to all of them must have counted, one line per check:
 *
 *   expect KEY OP COUNT       the count KEY is OP (== or >=) COUNT
 *   expect-sum KEY = KEY [+ KEY]  sums of ids agree: each task's or
 *                             timer's events carry the same id
 *
 *   name NUMBER LABEL         what a number in the keys is (for messages)
 *
 * KEY is a bpftrace map entry as bpftrace prints it, decimal, without the
 * space after commas: n_<probe>[executor,fn] or n_<probe>[executor]
 * counts events, id_<probe>[...] sums their ids.
 *
 * The events: TASKS tasks of task_run on a pool of 4 workers; one task of
 * fan_run that submits SUBS tasks of sub_run from its worker (into that
 * worker's own run queue) and blocks until they are done, so other
 * workers must steal them; TIMERS_FIRED timers of timer_run that fire
 * onto the pool and TIMERS_CANCELLED that are cancelled first. Parks and
 * unparks have no exact count: the pool is left idle twice (20 ms) so its
 * workers park, and is woken after; at least one of each is expected.
 * Each task counts its runs and the program fails (status 1) if a count
 * is off, so it is a test with no tool attached too.
 *
 * Usage: probe_target [--wait-for-semaphore[=SECONDS]] [--tasks=N]
 *   --wait-for-semaphore  first wait (at most SECONDS, default 30) until
 *                         a tool is attached to every probe: all nine
 *                         semaphores are nonzero (exit status 3 if not).
 *                         Not in probe_target_so (the shared library
 *                         keeps its semaphores to itself)
 *   --tasks=N             TASKS (default 1000)
 */
#include <serex/serex.h>

#include <inttypes.h> /* PRIuPTR, PRId64 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(SEREX_HAVE_USDT) && !defined(SEREX_TEST_SHARED)
#  include "probe_internal.h" /* the semaphores */
#  define PROBE_TARGET_SEMAPHORES 1
#endif

#define SUBS 64
#define TIMERS_FIRED 16
#define TIMERS_CANCELLED 8
#define WAIT SEREX_SEC(30) /* for anything that should take milliseconds */

struct target {
    serex_executor *pool;
    serex_event *idle; /* never signalled: a sleep */
    serex_event *tasks_done, *subs_done, *fan_done, *timers_done;
    unsigned tasks; /* TASKS */
    atomic_uint task_runs, sub_runs, timer_runs;
    bool fan_saw_subs; /* the subs ran while fan_run blocked */
};

static void fail(const char *what, int status)
{
    fprintf(stderr, "probe_target: %s: %s\n", what, serex_strerror(status));
    exit(1);
}

static void check(int status, const char *what)
{
    if (status != SEREX_OK)
        fail(what, status);
}

/* Counts one run in @runs; the @last one signals @ev. */
static void count_run(atomic_uint *runs, unsigned last, serex_event *ev)
{
    /* relaxed: the event orders what the waiter reads after */
    if (atomic_fetch_add_explicit(runs, 1, memory_order_relaxed) + 1 == last)
        serex_event_signal(ev);
}

static void task_run(void *arg)
{
    struct target *t = arg;

    count_run(&t->task_runs, t->tasks, t->tasks_done);
}

static void sub_run(void *arg)
{
    struct target *t = arg;

    count_run(&t->sub_runs, SUBS, t->subs_done);
}

/* On a worker: its SUBS tasks go to its own queue, which only thieves can
 * empty while it waits here. */
static void fan_run(void *arg)
{
    struct target *t = arg;

    for (unsigned i = 0; i < SUBS; i++)
        check(serex_execute(t->pool, sub_run, t), "execute sub_run");
    t->fan_saw_subs = serex_event_wait(t->subs_done, WAIT) == SEREX_OK;
    serex_event_signal(t->fan_done);
}

static void timer_run(void *arg)
{
    struct target *t = arg;

    count_run(&t->timer_runs, TIMERS_FIRED, t->timers_done);
}

static void wait_for(serex_event *ev, const char *what)
{
    check(serex_event_wait(ev, WAIT), what);
}

/* Leaves the pool idle long enough for its workers to park. */
static void idle(struct target *t)
{
    int status = serex_event_wait(t->idle, SEREX_MS(20));

    if (status != SEREX_ETIMEDOUT)
        fail("an idle wait", status);
}

static void make_tasks(struct target *t)
{
    for (unsigned i = 0; i < t->tasks; i++)
        check(serex_execute(t->pool, task_run, t), "execute task_run");
    wait_for(t->tasks_done, "waiting for task_run");
    idle(t);
    check(serex_execute(t->pool, fan_run, t), "execute fan_run");
    wait_for(t->fan_done, "waiting for fan_run");
    if (!t->fan_saw_subs) /* the event is auto-reset: fan_run took it */
        wait_for(t->subs_done, "waiting for sub_run");
}

static serex_executor *make_timers(struct target *t)
{
    serex_scheduler *s;
    serex_timer *cancelled[TIMERS_CANCELLED];

    check(serex_scheduler_create(NULL, &s), "serex_scheduler_create");
    for (unsigned i = 0; i < TIMERS_FIRED; i++)
        check(serex_schedule(s, t->pool, SEREX_MS(1 + i), timer_run, t, NULL),
              "serex_schedule");
    for (unsigned i = 0; i < TIMERS_CANCELLED; i++)
        check(serex_schedule(s, t->pool, SEREX_SEC(3600), timer_run, t,
                             &cancelled[i]),
              "serex_schedule");
    for (unsigned i = 0; i < TIMERS_CANCELLED; i++) {
        if (!serex_timer_cancel(cancelled[i])) {
            fprintf(stderr, "probe_target: a timer due in an hour was not "
                            "cancelled\n");
            exit(1);
        }
        serex_timer_release(cancelled[i]);
    }
    wait_for(t->timers_done, "waiting for timer_run");
    return serex_scheduler_executor(s);
}

static void check_runs(const char *what, unsigned runs, unsigned want)
{
    if (runs != want) {
        fprintf(stderr, "probe_target: %s ran %u times, not %u\n", what, runs,
                want);
        exit(1);
    }
}

/* --- what a tool must have seen --- */

static void expect_task(uintptr_t ex, const char *fn_name, uintptr_t fn,
                        unsigned n)
{
    static const char *const probes[] = {"task__enqueued", "task__start",
                                         "task__done"};

    printf("name %" PRIuPTR " %s\n", fn, fn_name);
    for (size_t i = 0; i < 3; i++)
        printf("expect n_%s[%" PRIuPTR ",%" PRIuPTR "] == %u\n", probes[i], ex,
               fn, n);
    for (size_t i = 1; i < 3; i++)
        printf("expect-sum id_%s[%" PRIuPTR ",%" PRIuPTR "] = id_%s[%" PRIuPTR
               ",%" PRIuPTR "]\n",
               probes[0], ex, fn, probes[i], ex, fn);
}

static void expect_all(uintptr_t pool, uintptr_t sched, unsigned tasks,
                       bool stole)
{
    printf("name %" PRIuPTR " pool\nname %" PRIuPTR " scheduler\n", pool,
           sched);
    /* ISO C converts a function pointer to an integer, never to void * */
    expect_task(pool, "task_run", (uintptr_t)task_run, tasks);
    expect_task(pool, "fan_run", (uintptr_t)fan_run, 1);
    expect_task(pool, "sub_run", (uintptr_t)sub_run, SUBS);
    printf("expect n_worker__park[%" PRIuPTR "] >= 1\n", pool);
    printf("expect n_worker__unpark[%" PRIuPTR "] >= 1\n", pool);
    printf("expect n_steal[%" PRIuPTR "] >= %d\n", pool, stole ? 1 : 0);
    printf("name %" PRIuPTR " timer_run\n", (uintptr_t)timer_run);
    printf("expect n_timer__schedule[%" PRIuPTR ",%" PRIuPTR "] == %d\n", sched,
           (uintptr_t)timer_run, TIMERS_FIRED + TIMERS_CANCELLED);
    printf("expect n_timer__fire[%" PRIuPTR ",%" PRIuPTR "] == %d\n", sched,
           (uintptr_t)timer_run, TIMERS_FIRED);
    printf("expect n_timer__cancel[%" PRIuPTR "] == %d\n", sched,
           TIMERS_CANCELLED);
    printf("expect-sum id_timer__schedule[%" PRIuPTR
           "] = id_timer__fire[%" PRIuPTR "] + id_timer__cancel[%" PRIuPTR
           "]\n",
           sched, sched, sched);
}

/* --- the semaphores --- */

#ifdef PROBE_TARGET_SEMAPHORES
static unsigned attached_probes(void)
{
    /* the three task probes share one counter, the three timer probes
     * another (probe.c): a group counts as its three once its counter
     * says one of them is attached (bpftrace -c attaches all before the
     * program starts; see check_probes.sh) */
    const volatile unsigned short *sems[] = {
        &serex_task_semaphore, &serex_worker__park_semaphore,
        &serex_worker__unpark_semaphore, &serex_steal_semaphore,
        &serex_timer_semaphore};
    const unsigned probes[] = {3, 1, 1, 1, 3};
    unsigned n = 0;

    for (size_t i = 0; i < sizeof sems / sizeof sems[0]; i++)
        n += *sems[i] != 0 ? probes[i] : 0;
    return n;
}

static void wait_for_tool(struct target *t, int64_t timeout_s)
{
    unsigned n = 0;

    for (int64_t ms = 0; ms < timeout_s * 1000; ms++) {
        if ((n = attached_probes()) == 9)
            break;
        serex_event_wait(t->idle, SEREX_MS(1));
    }
    if (n != 9) {
        fprintf(stderr,
                "probe_target: after %" PRId64 " s, a tool is "
                "attached to %u of the 9 probes (semaphores)\n",
                timeout_s, n);
        exit(3);
    }
    printf("probe_target: a tool is attached to all 9 probes\n");
}
#endif

static void parse(int argc, char **argv, struct target *t, int64_t *wait_s)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "--wait-for-semaphore") == 0)
            *wait_s = 30;
        else if (strncmp(a, "--wait-for-semaphore=", 21) == 0)
            *wait_s = strtol(a + 21, NULL, 10);
        else if (strncmp(a, "--tasks=", 8) == 0)
            t->tasks = (unsigned)strtoul(a + 8, NULL, 10);
        else {
            fprintf(stderr, "usage: probe_target [--wait-for-semaphore"
                            "[=SECONDS]] [--tasks=N]\n");
            exit(2);
        }
    }
#ifndef PROBE_TARGET_SEMAPHORES
    if (*wait_s > 0) {
        fprintf(stderr, "probe_target: --wait-for-semaphore: this build "
                        "cannot read the probes' semaphores\n");
        exit(2);
    }
#endif
    if (t->tasks == 0 || *wait_s < 0) {
        fprintf(stderr, "probe_target: --tasks and the wait must be > 0\n");
        exit(2);
    }
}

int main(int argc, char **argv)
{
    static struct target t = {.tasks = 1000};
    serex_pool_config cfg = {.threads = 4, .name = "probe"};
    serex_executor *sched;
    int64_t wait_s = 0;

    parse(argc, argv, &t, &wait_s);
    check(serex_event_create(&t.idle), "serex_event_create");
    check(serex_event_create(&t.tasks_done), "serex_event_create");
    check(serex_event_create(&t.subs_done), "serex_event_create");
    check(serex_event_create(&t.fan_done), "serex_event_create");
    check(serex_event_create(&t.timers_done), "serex_event_create");
#ifdef PROBE_TARGET_SEMAPHORES
    if (wait_s > 0)
        wait_for_tool(&t, wait_s);
#endif
    check(serex_pool_create(&cfg, &t.pool), "serex_pool_create");
    idle(&t);
    make_tasks(&t);
    sched = make_timers(&t);
    check(serex_destroy(sched), "serex_destroy(scheduler)");
    check(serex_destroy(t.pool), "serex_destroy(pool)");
    /* relaxed: the pool and the scheduler are destroyed; their ends
     * happen-before their destroys' returns */
    check_runs("task_run",
               atomic_load_explicit(&t.task_runs, memory_order_relaxed),
               t.tasks);
    check_runs("sub_run",
               atomic_load_explicit(&t.sub_runs, memory_order_relaxed), SUBS);
    check_runs("timer_run",
               atomic_load_explicit(&t.timer_runs, memory_order_relaxed),
               TIMERS_FIRED);
    printf("probe_target: %u + 1 + %d tasks, %d timers fired, %d cancelled;"
           " the subtasks %s while their parent waited\n",
           t.tasks, SUBS, TIMERS_FIRED, TIMERS_CANCELLED,
           t.fan_saw_subs ? "ran" : "did not run");
    expect_all((uintptr_t)t.pool, (uintptr_t)sched, t.tasks, t.fan_saw_subs);
    serex_event_destroy(t.idle);
    serex_event_destroy(t.tasks_done);
    serex_event_destroy(t.subs_done);
    serex_event_destroy(t.fan_done);
    serex_event_destroy(t.timers_done);
    return 0;
}
