/* SPDX-License-Identifier: MIT */
/* serex/dump.h - STUB (being written). */
#ifndef SEREX_DUMP_H
#define SEREX_DUMP_H

#include "executor.h"

#endif
