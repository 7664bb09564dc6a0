/* SPDX-License-Identifier: MIT */
/*
 * consumer - a small program built against serex, as a user would. Built
 * plain and under ThreadSanitizer by scripts/check_consumers.sh: its
 * threads meet only through serex (a pool, a serial executor on it, a
 * future), so a clean TSan run says that serex's ordering is visible to
 * the sanitizer.
 */
#include <serex/serex.h>
#include <stdio.h>

#define TASKS 1000

/* Written by serial tasks on pool threads, never with atomics: the serial
 * executor orders the tasks, and the future orders the last one before
 * main's read. */
static long total;
static int order_ok = 1;
static int next_expected;

struct step {
    int index;
};

static void add(void *arg)
{
    const struct step *s = arg;

    if (s->index != next_expected)
        order_ok = 0;
    next_expected = s->index + 1;
    total += s->index;
}

static void *read_total(void *arg)
{
    (void)arg;
    return &total; /* runs after every add(): the serial keeps the order */
}

static int fail(const char *what, int status)
{
    fprintf(stderr, "consumer: %s: %s\n", what, serex_strerror(status));
    return 1;
}

int main(void)
{
    static struct step steps[TASKS];
    serex_pool_config cfg = {.threads = 2, .name = "consumer"};
    serex_executor *pool, *serial;
    serex_future *f;
    long *got = NULL;

    int rc = serex_pool_create(&cfg, &pool);
    if (rc != SEREX_OK)
        return fail("serex_pool_create", rc);
    if ((rc = serex_serial_create(pool, NULL, &serial)) != SEREX_OK) {
        serex_destroy(pool);
        return fail("serex_serial_create", rc);
    }
    for (int i = 0; i < TASKS && rc == SEREX_OK; i++) {
        steps[i].index = i;
        rc = serex_execute(serial, add, &steps[i]);
    }
    if (rc == SEREX_OK &&
        (rc = serex_submit(serial, read_total, NULL, &f)) == SEREX_OK) {
        rc = serex_future_wait(f, SEREX_FOREVER);
        got = serex_future_value(f);
        serex_future_release(f);
    }
    int drc = serex_destroy(serial);
    if (drc == SEREX_OK)
        drc = serex_destroy(pool);
    if (rc != SEREX_OK || drc != SEREX_OK)
        return fail("execute, submit, wait or destroy",
                    rc != SEREX_OK ? rc : drc);

    long want = (long)TASKS * (TASKS - 1) / 2;
    printf("consumer: serex %d.%d (library %s): %d tasks in order on a serial"
           " over a pool, total %ld\n",
           SEREX_VERSION_MAJOR, SEREX_VERSION_MINOR, serex_version(), TASKS,
           got ? *got : -1);
    return got == &total && *got == want && order_ok ? 0 : 1;
}
