/* SPDX-License-Identifier: MIT */
/*
 * fatal.c - the two ways serex stops a program: an internal invariant that
 * failed (a bug of ours), and a misuse the API cannot report with a status
 * code because the object it would need is already gone (a future or a
 * timer handle released twice). Both print one line naming the cause and
 * abort, in every build: carrying on would corrupt memory silently.
 * (The user's own check, SEREX_ASSERT_ON, is in executor.c: it names the
 * executor's kind.)
 */
#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* abort */

#include "common_internal.h"

void serex__assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "serex: internal assertion failed: %s (%s:%d)\n", expr,
            file, line);
    abort();
}

void serex__misuse(const char *call, const char *what)
{
    fprintf(stderr, "serex: %s: %s\n", call, what);
    abort();
}
