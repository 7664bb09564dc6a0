/* SPDX-License-Identifier: MIT */
/*
 * striped_internal.h - what tests may observe of a striped executor's
 * insides.
 */
#ifndef SEREX_STRIPED_INTERNAL_H
#define SEREX_STRIPED_INTERNAL_H

#include <stdint.h>

/* The shard whose lock and lane map hold @key's lane (tests pick keys that
 * share one, to make its table grow and shrink). */
unsigned serex__striped_shard_of(uint64_t key);

#endif /* SEREX_STRIPED_INTERNAL_H */
