/* SPDX-License-Identifier: MIT */
/* serex/trace.h - STUB (being written). */
#ifndef SEREX_TRACE_H
#define SEREX_TRACE_H

#include "executor.h"

#endif
