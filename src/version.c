/* SPDX-License-Identifier: MIT */
/*
 * version.c - the version of the library itself, fixed when it is built:
 * a program reads it at run time to learn which serex it loaded, whatever
 * headers it was compiled with.
 */
#include "serex/version.h"

const char *serex_version(void)
{
    return SEREX_VERSION_STRING;
}

unsigned serex_version_number(void)
{
    return SEREX_VERSION_NUMBER;
}
