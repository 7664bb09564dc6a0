/* SPDX-License-Identifier: MIT */
/* consumer - the smallest program built against serex, as a user would. */
#include <serex/serex.h>
#include <stdio.h>

static void *answer(void *arg)
{
    return arg; /* what the task returns becomes the future's value */
}

static int fail(const char *what, int status)
{
    fprintf(stderr, "consumer: %s: %s\n", what, serex_strerror(status));
    return 1;
}

int main(void)
{
    static int value = 42;
    serex_pool_config cfg = {.threads = 2, .name = "consumer"};
    serex_executor *pool;
    serex_future *f;
    int *got = NULL;

    int rc = serex_pool_create(&cfg, &pool);
    if (rc != SEREX_OK)
        return fail("serex_pool_create", rc);
    if ((rc = serex_submit(pool, answer, &value, &f)) == SEREX_OK) {
        rc = serex_future_wait(f, SEREX_FOREVER);
        got = serex_future_value(f);
        serex_future_release(f);
    }
    int drc = serex_destroy(pool);
    if (rc != SEREX_OK || drc != SEREX_OK)
        return fail("submit, wait or destroy", rc != SEREX_OK ? rc : drc);
    printf("consumer: serex %d.%d says %d\n", SEREX_VERSION_MAJOR,
           SEREX_VERSION_MINOR, got ? *got : -1);
    return got == &value ? 0 : 1;
}
