/* SPDX-License-Identifier: MIT */
/*
 * serex/limiter.h - (being written)
 */
#ifndef SEREX_LIMITER_H
#define SEREX_LIMITER_H

#include "executor.h"

#endif
