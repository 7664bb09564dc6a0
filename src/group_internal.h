/* SPDX-License-Identifier: MIT */
/*
 * group_internal.h - what group.c shows its tests: the group's counters,
 * read without stopping anyone (exact once the group is quiet).
 */
#ifndef SEREX_GROUP_INTERNAL_H
#define SEREX_GROUP_INTERNAL_H

#include <stdint.h>

#include "common_internal.h"

struct serex__group_counts {
    uint64_t members;     /* tasks and enters in the group */
    uint64_t not_started; /* tasks that serex_group_cancel would cancel */
    uint64_t refs;        /* references on the memory (see group.c) */
    uint64_t waiters;     /* threads counted in serex_group_wait */
    bool notify;          /* notifications wait for the group to empty */
    bool posting;         /* a thread is handing out notifications due */
};

/* The counters of @g now. */
void serex__group_counts(serex_group *g, struct serex__group_counts *out);

#endif /* SEREX_GROUP_INTERNAL_H */
