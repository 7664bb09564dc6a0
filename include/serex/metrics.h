/* SPDX-License-Identifier: MIT */
/* serex/metrics.h - STUB (being written). */
#ifndef SEREX_METRICS_H
#define SEREX_METRICS_H

#include "executor.h"

#endif
