/* SPDX-License-Identifier: MIT */
/*
 * probe.c - the static probes' semaphores (probe_internal.h), defined once
 * for the whole library. Each is the counter a tool increments while it is
 * attached to that probe: in the .probes section (file-backed, so the
 * kernel's uprobe reference counter can reach it as well as a tool writing
 * /proc/PID/mem), as `dtrace -G` defines them. Without SEREX_HAVE_USDT this
 * file defines nothing.
 */
#include "probe_internal.h"

#ifdef SEREX_HAVE_USDT

#  define SEREX__PROBE_DEFINE(name)                  \
    volatile unsigned short serex_##name##_semaphore \
        __attribute__((section(".probes"), visibility("hidden"))) = 0

SEREX__PROBE_DEFINE(task__enqueued);
SEREX__PROBE_DEFINE(task__start);
SEREX__PROBE_DEFINE(task__done);
SEREX__PROBE_DEFINE(worker__park);
SEREX__PROBE_DEFINE(worker__unpark);
SEREX__PROBE_DEFINE(steal);
SEREX__PROBE_DEFINE(timer__schedule);
SEREX__PROBE_DEFINE(timer__fire);
SEREX__PROBE_DEFINE(timer__cancel);

#else

/* ISO C wants at least one declaration in a translation unit. */
typedef int serex__probe_none;

#endif
