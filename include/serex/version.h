/* SPDX-License-Identifier: MIT */
/*
 * serex/version.h - the version of serex: the one these headers describe
 * (macros, fixed when your code is compiled) and the one of the library
 * loaded at run time (functions), which differ when a program built
 * against one release runs with the shared library of another.
 *
 * Releases are numbered major.minor.patch; CHANGELOG.md says what each one
 * changed. The shared library's soname carries the major version
 * (libserex.so.0), and find_package(serex X.Y) accepts an installed serex
 * of the same major version, X.Y or newer.
 */
#ifndef SEREX_VERSION_H
#define SEREX_VERSION_H

#include "executor.h" /* SEREX_API */

/* Keep in step with project(serex VERSION ...) in CMakeLists.txt
 * (test_version checks that they agree). */
#define SEREX_VERSION_MAJOR 0
#define SEREX_VERSION_MINOR 2
#define SEREX_VERSION_PATCH 0

/* "major.minor.patch", e.g. "0.2.0". */
#define SEREX_VERSION_STRING "0.2.0"

/* major * 10000 + minor * 100 + patch, e.g. 200 for 0.2.0: for #if. */
#define SEREX_VERSION_NUMBER                                 \
  (SEREX_VERSION_MAJOR * 10000 + SEREX_VERSION_MINOR * 100 + \
   SEREX_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/*
 * serex_version - the version of the serex library loaded at run time, as
 * "major.minor.patch" (SEREX_VERSION_STRING of the release it was built
 * from, not of the headers the caller was compiled with).
 *
 * Returns:   a static string; never NULL.
 * Threads:   any thread, at any time (no initialisation needed).
 */
SEREX_API const char *serex_version(void);

/*
 * serex_version_number - the version of the serex library loaded at run
 * time, as major * 10000 + minor * 100 + patch (200 for 0.2.0), so that
 * serex_version_number() >= SEREX_VERSION_NUMBER checks that the library
 * is at least as new as the headers.
 *
 * Returns:   the number; never fails.
 * Threads:   any thread, at any time (no initialisation needed).
 */
SEREX_API unsigned serex_version_number(void);

#ifdef __cplusplus
}
#endif

#endif /* SEREX_VERSION_H */
