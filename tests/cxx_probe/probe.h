/* SPDX-License-Identifier: MIT */
/* The target's fingerprint as a symbol name (see CMakeLists.txt). */
#include <stdio.h> /* the C library's own macros (__GLIBC__) */

#if defined(__GLIBC__)
#  define SEREX_PROBE_LIBC glibc
#elif defined(_WIN32)
#  define SEREX_PROBE_LIBC windows
#elif defined(__APPLE__)
#  define SEREX_PROBE_LIBC apple
#else
#  define SEREX_PROBE_LIBC other
#endif
#if defined(__SIZEOF_POINTER__)
#  define SEREX_PROBE_PTR __SIZEOF_POINTER__
#elif defined(_WIN64)
#  define SEREX_PROBE_PTR 8
#else
#  define SEREX_PROBE_PTR 0
#endif
#define SEREX_PROBE_CAT(a, b, c) a##_##b##_##c
#define SEREX_PROBE_NAME(a, b, c) SEREX_PROBE_CAT(a, b, c)
#define SEREX_PROBE_SYMBOL \
  SEREX_PROBE_NAME(serex_cxx_probe, SEREX_PROBE_LIBC, SEREX_PROBE_PTR)
