/* SPDX-License-Identifier: MIT */
/* histogram.c - STUB */
#include "histogram_internal.h"
typedef int serex__histogram_stub;
