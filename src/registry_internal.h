/* SPDX-License-Identifier: MIT */
/*
 * registry_internal.h - the list of every live serex object, for
 * serex_dump (dump.h). STUB: the interface the objects call; the helper
 * that writes registry.c may refine the comments, not the names.
 *
 * Each object embeds a struct serex__reg, adds it once it is fully made
 * (serex__reg_add: cannot fail, allocates nothing) and removes it first
 * thing in its destroy, before it takes any lock of its own and before it
 * frees anything (serex__reg_remove waits for a dump that is describing
 * it: the registry's lock is held across each describe).
 */
#ifndef SEREX_REGISTRY_INTERNAL_H
#define SEREX_REGISTRY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common_internal.h"

struct serex__dump; /* a dump being written (registry.c) */
struct serex__reg;

struct serex__reg_class {
    const char *kind; /* "pool", "serial", "group", "channel", ... */
    /* Writes the object's own fields into the current JSON object with
     * the serex__dump_* calls below; may take the object's own locks
     * briefly (never one held across user code). NULL: only the kind,
     * the address and the name. */
    void (*describe)(struct serex__reg *r, struct serex__dump *d);
};

struct serex__reg {
    struct serex__reg *prev, *next; /* under the registry's lock */
    const struct serex__reg_class *cls;
    const void *obj; /* the object's address, as the dump prints it */
    const char *name; /* NULL: none; must live as long as the object */
};

void serex__reg_add(struct serex__reg *r, const struct serex__reg_class *cls,
                    const void *obj, const char *name);
void serex__reg_remove(struct serex__reg *r);

/* Writers for describe: each adds "key": value to the current object. */
void serex__dump_u64(struct serex__dump *d, const char *key, uint64_t v);
void serex__dump_i64(struct serex__dump *d, const char *key, int64_t v);
void serex__dump_str(struct serex__dump *d, const char *key, const char *v);
void serex__dump_bool(struct serex__dump *d, const char *key, bool v);
void serex__dump_ptr(struct serex__dump *d, const char *key, const void *p);
/* A function: "key": {"address": "0x...", "symbol": "name"} (symbol
 * only where the platform can say, and SEREX_DUMP_SYMBOLS asks) */
void serex__dump_fn(struct serex__dump *d, const char *key, serex_fn fn);
/* Nesting: an array under @key, objects in it (key NULL inside arrays) */
void serex__dump_array_begin(struct serex__dump *d, const char *key);
void serex__dump_array_end(struct serex__dump *d);
void serex__dump_object_begin(struct serex__dump *d, const char *key);
void serex__dump_object_end(struct serex__dump *d);
/* The dump's own clock reading (monotonic ns), for ages. */
int64_t serex__dump_now(const struct serex__dump *d);

#endif /* SEREX_REGISTRY_INTERNAL_H */
