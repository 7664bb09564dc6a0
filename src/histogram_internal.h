/* SPDX-License-Identifier: MIT */
/* histogram_internal.h - STUB (being written). */
#ifndef SEREX_HISTOGRAM_INTERNAL_H
#define SEREX_HISTOGRAM_INTERNAL_H
#endif
