/* SPDX-License-Identifier: MIT */
/*
 * sanitizer_probe.c - the smallest threaded program: test.sh and
 * check_consumers.sh build it with a sanitizer to learn whether that
 * compiler's runtime works on this machine before trusting a clean run.
 */
#include <pthread.h>
#include <stdlib.h>

static void *work(void *arg) { return arg; }

int main(void)
{
    pthread_t t;
    void *p = malloc(16), *r = NULL;

    if (pthread_create(&t, NULL, work, p) != 0 || pthread_join(t, &r) != 0)
        return 1;
    free(r);
    return 0;
}
