/* SPDX-License-Identifier: MIT */
/* limiter.c - (being written) */
#include "common_internal.h"
