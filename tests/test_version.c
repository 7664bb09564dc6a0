/* SPDX-License-Identifier: MIT */
/*
 * test_version.c - the version: what the loaded library says at run time
 * (serex_version, serex_version_number) is what the headers say
 * (SEREX_VERSION_*), and both are what CMake's project() says. Public API
 * only: built twice, against the static library and (test_version_shared)
 * against the shared one.
 */
#include "test_util.h"

#include <stdio.h>  /* snprintf */
#include <string.h> /* strcmp */

/* Parses a decimal number up to @max, without sign or leading zero;
 * returns where it ends, NULL if there is none. */
static const char *parse_number(const char *s, unsigned long max, unsigned *out)
{
    unsigned long n = 0;
    const char *start = s;

    while (*s >= '0' && *s <= '9') {
        n = n * 10 + (unsigned long)(*s - '0');
        if (n > max)
            return NULL;
        s++;
    }
    if (s == start || (*start == '0' && s - start > 1))
        return NULL;
    *out = (unsigned)n;
    return s;
}

/* Strictly "major.minor.patch": three numbers, two dots, nothing else. */
static bool parse_version(const char *s, unsigned v[3])
{
    for (int i = 0; i < 3; i++) {
        /* minor and patch have two digits in serex_version_number */
        s = parse_number(s, i == 0 ? 9999 : 99, &v[i]);
        if (s == NULL || *s != (i < 2 ? '.' : '\0'))
            return false;
        s++;
    }
    return true;
}

static void version_string_is_the_headers(void **state)
{
    (void)state;
    assert_non_null(serex_version());
    assert_string_equal(serex_version(), SEREX_VERSION_STRING);
}

static void version_number_is_the_headers(void **state)
{
    (void)state;
    assert_int_equal(serex_version_number(), SEREX_VERSION_NUMBER);
    assert_int_equal(serex_version_number(), SEREX_VERSION_MAJOR * 10000 +
                                                 SEREX_VERSION_MINOR * 100 +
                                                 SEREX_VERSION_PATCH);
}

static void version_string_is_major_minor_patch(void **state)
{
    unsigned v[3];
    char want[32];

    (void)state;
    assert_true(parse_version(serex_version(), v));
    assert_int_equal(v[0], SEREX_VERSION_MAJOR);
    assert_int_equal(v[1], SEREX_VERSION_MINOR);
    assert_int_equal(v[2], SEREX_VERSION_PATCH);
    assert_int_equal(serex_version_number(), v[0] * 10000 + v[1] * 100 + v[2]);
    snprintf(want, sizeof want, "%d.%d.%d", SEREX_VERSION_MAJOR,
             SEREX_VERSION_MINOR, SEREX_VERSION_PATCH);
    assert_string_equal(serex_version(), want);
}

static void version_parser_rejects_other_forms(void **state)
{
    static const char *const bad[] = {
        "",        "0",      "0.2",       "0.2.",   "0.2.0.",
        "0.2.0.1", "v0.2.0", "0.2.0-rc1", " 0.2.0", "+0.2.0",
        "00.2.0",  "0..0",   "0.100.0"};
    unsigned v[3];

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(parse_version(bad[i], v));
    assert_true(parse_version("10.0.99", v));
}

/* tests/CMakeLists.txt passes CMake's ${PROJECT_VERSION}. */
static void version_is_cmakes_project_version(void **state)
{
    (void)state;
#ifdef SEREX_PROJECT_VERSION
    assert_string_equal(SEREX_VERSION_STRING, SEREX_PROJECT_VERSION);
    assert_string_equal(serex_version(), SEREX_PROJECT_VERSION);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(version_string_is_the_headers),
        cmocka_unit_test(version_number_is_the_headers),
        cmocka_unit_test(version_string_is_major_minor_patch),
        cmocka_unit_test(version_parser_rejects_other_forms),
        cmocka_unit_test(version_is_cmakes_project_version),
    };

    return cmocka_run_group_tests_name("version", tests, NULL, NULL);
}
