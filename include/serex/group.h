/* SPDX-License-Identifier: MIT */
/*
 * serex/group.h - (being written)
 */
#ifndef SEREX_GROUP_H
#define SEREX_GROUP_H

#include "executor.h"

#endif
