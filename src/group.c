/* SPDX-License-Identifier: MIT */
/* group.c - (being written) */
#include "common_internal.h"
