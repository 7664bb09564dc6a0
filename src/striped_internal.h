/* SPDX-License-Identifier: MIT */
/*
 * striped_internal.h - what other components need of striped.c.
 */
#ifndef SEREX_STRIPED_INTERNAL_H
#define SEREX_STRIPED_INTERNAL_H

#include "serex/serex.h"

/* The target of a striped executor's face; NULL if @ex is not one. */
serex_executor *serex__striped_target(serex_executor *ex);

#endif /* SEREX_STRIPED_INTERNAL_H */
