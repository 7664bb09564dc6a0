/* SPDX-License-Identifier: MIT */
/*
 * autoclock.c - a clock that moves itself in tests (serex_autoclock_start,
 * manual.h): the waits of one thread run a manual scheduler's manual
 * executors and move its clock, instead of sleeping.
 *
 * --- How a wait is driven ---
 * The bound thread's serex__wait_driver_tls (thread_internal.h) is ours.
 * Waits do not know about us: they compute a monotonic deadline with
 * serex__deadline and park (park.c) while their word is unchanged. So:
 *
 *   note  serex__deadline tells us a wait starts, with the monotonic time
 *         it read and the wait's time-out. We keep the gap between the two
 *         clocks then: offset = scheduler now - monotonic now. The wait's
 *         deadline D maps to D + offset on the scheduler's clock: exactly
 *         its time-out after the scheduler's time when it began, however
 *         long the test really takes.
 *   step  where the wait would sleep, park.c calls us, once per park, no
 *         lock held. One step does the first of these that applies:
 *     1. a registered executor has a task: run one (the executors take
 *        turns: the search starts after the one that ran last) -> 0;
 *     2. a timer is due by the wait's deadline (or by now): move the clock
 *        to the next due time, firing it -> 0;
 *     3. the deadline has come -> SEREX_ETIMEDOUT;
 *     4. the deadline is finite, nothing before it: move the clock to it
 *        -> SEREX_ETIMEDOUT;
 *     5. no deadline, nothing to run, no timer: nothing can ever end the
 *        wait -> the program stops (serex__misuse), as Go's synctest
 *        panics when every goroutine of its bubble is blocked.
 *     0 sends the wait back to look at its condition: it returns as soon
 *     as the task or timer it waits for has run, with nothing run after
 *     it and the clock at that task's time. Work at the deadline's very
 *     time runs before the time-out (1 and 2 come before 3).
 *
 * The scheduler's next due time may be a lower bound (a wheel slot's
 * start, serex__scheduler_next_due): moving there fires nothing but
 * cascades, and the next step sees the exact time. The clock never passes
 * a due time, so every task still sees the exact time it was due.
 *
 * --- Nested waits ---
 * A task that step runs may wait too; its wait is driven the same way (the
 * tasks it waits for run inside it). Its note changes the offset, so step
 * saves it before running anything and puts it back after: the outer
 * wait's deadline keeps its meaning. serex_scheduler_advance is not
 * re-entrant (a mutex): a wait inside a task that advance runs itself (a
 * timer with no target) may run tasks but cannot move the clock, and stops
 * the program if that is all that could end it.
 *
 * --- What is not exact ---
 * A wait that recomputes its time left on the monotonic clock (the awaits
 * of serial, striped and limiter executors, serex__life_await_owed) notes
 * a time-out shorter by the real time that passed: it ends that much
 * early on our clock (nanoseconds). A wait that reads the monotonic clock
 * itself between parks (the room wait of serex_execute_wait, an await
 * whose drain is owed to a full target, a group's 4096th waiter) ends its
 * time-out on that clock: its condition is still driven, but it times out
 * late, in real time, spinning meanwhile. The others pass their own
 * deadline to the park.
 *
 * One thread only: no atomics, no lock of ours.
 */
#include <stdbool.h>
#include <stdint.h>

#include "alloc_internal.h"
#include "common_internal.h"
#include "scheduler_internal.h" /* serex__scheduler_next_due */
#include "thread_internal.h"    /* serex__wait_driver_tls */

struct autoclock {
    struct serex__wait_driver driver; /* the thread's: first */
    serex_scheduler *s;
    int64_t offset; /* scheduler now - monotonic now, at the latest note */
    unsigned depth; /* steps in progress on this thread (nested waits) */
    bool advancing; /* inside serex_scheduler_advance: cannot move it */
    size_t turn;    /* where the next search for a task starts */
    size_t n;
    serex_executor *exs[]; /* the caller's, copied */
};

static struct autoclock *autoclock_of(struct serex__wait_driver *d)
{
    return serex__container_of(d, struct autoclock, driver);
}

/* @a + @b, saturating at both ends. */
static int64_t autoclock_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}

static void autoclock_note(struct serex__wait_driver *d, int64_t now_ns,
                           int64_t timeout_ns)
{
    struct autoclock *c = autoclock_of(d);

    (void)timeout_ns; /* the deadline carries it: D = now_ns + timeout */
    c->offset = autoclock_add(serex_scheduler_now(c->s), -now_ns);
}

/* Rule 1: runs one queued task, the executors taking turns. */
static bool autoclock_run_one(struct autoclock *c)
{
    for (size_t k = 0; k < c->n; k++) {
        size_t i = (c->turn + k) % c->n;
        int64_t offset = c->offset; /* a nested wait's note changes it */
        bool ran = serex_manual_run_one(c->exs[i]);

        c->offset = offset;
        if (ran) {
            c->turn = (i + 1) % c->n;
            return true;
        }
    }
    return false;
}

/* Moves the clock to @to (>= now), firing what comes due on the way. */
static void autoclock_advance(struct autoclock *c, int64_t now, int64_t to)
{
    int64_t offset = c->offset;
    int rc;

    c->advancing = true;
    rc = serex_scheduler_advance(c->s, to - now);
    c->advancing = false;
    c->offset = offset;
    if (rc != SEREX_OK) /* a child after fork() cannot move the clock */
        serex__misuse("serex_autoclock_start",
                      "the scheduler refused to move its clock (a "
                      "scheduler made before fork(), in the child)");
}

static _Noreturn void autoclock_stuck(const struct autoclock *c)
{
    serex__misuse("serex_autoclock_start",
                  c->advancing
                      ? "deadlock: a wait inside a timer's task that the "
                        "clock runs itself (no target) can only run tasks, "
                        "and none is queued"
                      : "deadlock: a wait on the clock's thread has no "
                        "time-out and nothing can end it (no task queued on "
                        "its executors, no timer pending)");
}

/* Rules 2 to 5 (see the essay), once nothing is queued. */
static int autoclock_step_time(struct autoclock *c, int64_t deadline)
{
    int64_t now = serex_scheduler_now(c->s), next = INT64_MAX;
    bool any = false;

    (void)serex__scheduler_next_due(c->s, &next, &any); /* s is manual */
    if (any && next <= (deadline > now ? deadline : now) && !c->advancing) {
        autoclock_advance(c, now, next > now ? next : now);
        return 0;
    }
    if (now >= deadline)
        return SEREX_ETIMEDOUT;
    if (deadline == INT64_MAX || c->advancing)
        autoclock_stuck(c);
    autoclock_advance(c, now, deadline);
    return SEREX_ETIMEDOUT;
}

static int autoclock_step(struct serex__wait_driver *d, int64_t deadline_ns)
{
    struct autoclock *c = autoclock_of(d);
    /* the wait's deadline, on the scheduler's clock */
    int64_t deadline = deadline_ns == INT64_MAX
                           ? INT64_MAX
                           : autoclock_add(deadline_ns, c->offset);
    int rc = 0;

    c->depth++;
    if (!autoclock_run_one(c))
        rc = autoclock_step_time(c, deadline);
    c->depth--;
    return rc;
}

int serex_autoclock_start(serex_scheduler *s, serex_executor *const *exs,
                          size_t n)
{
    struct autoclock *c;
    int64_t next;
    bool any;

    if (s == NULL || (n > 0 && exs == NULL) || serex__wait_driver_tls != NULL)
        return SEREX_EINVAL;
    if (serex__scheduler_next_due(s, &next, &any) != SEREX_OK)
        return SEREX_EINVAL; /* not manual: a clock we cannot move */
    for (size_t i = 0; i < n; i++)
        if (exs[i] == NULL)
            return SEREX_EINVAL;
    if (n > (SIZE_MAX - sizeof *c) / sizeof c->exs[0])
        return SEREX_ENOMEM;
    c = serex__calloc(1, sizeof *c + n * sizeof c->exs[0]);
    if (c == NULL)
        return SEREX_ENOMEM;
    c->driver.note = autoclock_note;
    c->driver.step = autoclock_step;
    c->s = s;
    c->offset = autoclock_add(serex_scheduler_now(s), -serex__now_ns());
    c->n = n;
    for (size_t i = 0; i < n; i++)
        c->exs[i] = exs[i];
    serex__wait_driver_tls = &c->driver;
    return SEREX_OK;
}

void serex_autoclock_stop(void)
{
    struct serex__wait_driver *d = serex__wait_driver_tls;

    if (d == NULL)
        return;
    if (autoclock_of(d)->depth > 0)
        serex__misuse("serex_autoclock_stop",
                      "called from a task that a wait on this thread runs; "
                      "stop the clock outside every wait");
    serex__wait_driver_tls = NULL;
    serex__free(autoclock_of(d));
}
