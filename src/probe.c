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

/* One semaphore of each group's probes under the names <sys/sdt.h> gives
 * them: a tool that attaches to any of the group's probes increments the
 * one counter (each tool, each probe: a count of attachments), so the
 * busy path reads one word to know whether the group has a listener. */
#  define SEREX__PROBE_ALIAS(name, group)                                   \
    extern volatile unsigned short serex_##name##_semaphore __attribute__(( \
        alias("serex_" #group "_semaphore"), visibility("hidden")))

SEREX__PROBE_DEFINE(task);
SEREX__PROBE_ALIAS(task__enqueued, task);
SEREX__PROBE_ALIAS(task__start, task);
SEREX__PROBE_ALIAS(task__done, task);
SEREX__PROBE_DEFINE(worker__park);
SEREX__PROBE_DEFINE(worker__unpark);
SEREX__PROBE_DEFINE(steal);
SEREX__PROBE_DEFINE(timer);
SEREX__PROBE_ALIAS(timer__schedule, timer);
SEREX__PROBE_ALIAS(timer__fire, timer);
SEREX__PROBE_ALIAS(timer__cancel, timer);

#else

/* ISO C wants at least one declaration in a translation unit. */
typedef int serex__probe_none;

#endif
