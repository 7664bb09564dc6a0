/* SPDX-License-Identifier: MIT */
/*
 * registry_internal.h - the list of every live serex object, for
 * serex_dump (dump.h), and the JSON writers an object's describe uses.
 *
 * Each object embeds a struct serex__reg, adds it once it is fully made
 * (serex__reg_add: cannot fail, allocates nothing) and removes it first
 * thing in its destroy, before it takes any lock of its own and before it
 * frees anything.
 *
 * --- How a dump walks the list while objects come and go ---
 * The list is circular around a sentinel, under one process-wide mutex
 * that is only ever held for a few pointer moves: never across a describe
 * nor across the dump's writes to its FILE, so it is a leaf lock (nothing
 * is taken under it) and a dump blocked on a full pipe stalls no create or
 * destroy. A dump keeps its place with a cursor: a node of its own (cls
 * NULL) linked into the list right after the object it is at. For each
 * object it
 *   1. under the lock, moves its cursor past the next real node that is
 *      not leaving and pins that node (pins++);
 *   2. without the lock, calls the node's describe, which writes into the
 *      dump's memory buffer (no I/O), taking the object's locks briefly;
 *   3. under the lock, unpins it, waking a remover that waits for 0;
 *   4. without the lock or any pin, writes the buffer to the FILE (and
 *      looks up function names, with SEREX_DUMP_SYMBOLS).
 * serex__reg_remove marks its node leaving (no dump pins it after that),
 * waits until its pins are 0, and unlinks it: so a destroy waits for a
 * describe of its own object in progress, and for nothing else. Cursors
 * are list nodes like any other, so unlinking a neighbour fixes them up.
 *
 * Synchronization rules for a describe (the lead's objects keep them):
 *  - it may take the object's own locks, briefly; never one held across
 *    user code (a task, a callback), which could run for ever;
 *  - it reads the object and writes nothing of it: two dumps may
 *    describe one object at once;
 *  - it must not call serex__reg_add/remove, serex_dump, nor destroy
 *    anything;
 *  - serex__reg_remove waits for a describe of its object in progress:
 *    never call it while holding a lock that object's describe takes.
 */
#ifndef SEREX_REGISTRY_INTERNAL_H
#define SEREX_REGISTRY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common_internal.h"

struct serex__dump; /* a dump being written (registry.c) */
struct serex__reg;

struct serex__reg_class {
    const char *kind; /* "pool", "serial", "group", "channel", ...: a
                         string that lives for ever (a literal) */
    /* Writes the object's own fields into the current JSON object with
     * the serex__dump_* calls below (see the rules above). NULL: only the
     * kind, the address and the name. */
    void (*describe)(struct serex__reg *r, struct serex__dump *d);
};

/*
 * In the object; zero it before adding (calloc'd objects are). Every field
 * is under the registry's lock and belongs to registry.c once added.
 */
struct serex__reg {
    struct serex__reg *prev, *next;     /* NULL while not on the list */
    const struct serex__reg_class *cls; /* NULL: a dump's cursor */
    const void *obj;  /* the object's address, as the dump prints it */
    const char *name; /* NULL: none; must live as long as the object */
    unsigned pins;    /* dumps describing it now */
    bool leaving;     /* serex__reg_remove waits: no new pins */
};

/*
 * Puts @r on the list (it appears in dumps from now on). Never fails and
 * allocates nothing. @r must not be on the list already.
 */
void serex__reg_add(struct serex__reg *r, const struct serex__reg_class *cls,
                    const void *obj, const char *name);
/*
 * Takes @r off the list, waiting first for a dump that is describing it
 * (a describe is short: it takes only the object's own locks, briefly).
 * Once it returns, no dump touches @r or its object again. A zeroed @r
 * that was never added, or one removed already, is left as it is, so a
 * destroy may call it whether or not its create got as far as adding.
 */
void serex__reg_remove(struct serex__reg *r);
/* Objects on the list now (for tests). */
size_t serex__reg_count(void);

/* The fork hooks (fork.c): the lock is taken across fork(); in the
 * child, the parent's dumps are gone, so their pins and cursors go. */
void serex__reg_fork_lock(void);
void serex__reg_fork_unlock(void);
void serex__reg_fork_child(void);

/*
 * Writers for describe: each adds "key": value to the current object (key
 * non-NULL), or a value to the current array (key NULL). They write to
 * memory only; out of memory, the dump marks the object and carries on.
 * Strings are escaped; bytes that are not UTF-8 come out as U+FFFD.
 */
void serex__dump_u64(struct serex__dump *d, const char *key, uint64_t v);
void serex__dump_i64(struct serex__dump *d, const char *key, int64_t v);
void serex__dump_str(struct serex__dump *d, const char *key, const char *v);
void serex__dump_bool(struct serex__dump *d, const char *key, bool v);
/* "0x..." as a string (JSON numbers lose bits above 2^53); NULL: null */
void serex__dump_ptr(struct serex__dump *d, const char *key, const void *p);
/* A function: "key": {"address": "0x...", "symbol": "name"} (symbol
 * only where the platform can say, and SEREX_DUMP_SYMBOLS asks; looked up
 * after the describe returns, with no lock held); NULL: null */
void serex__dump_fn(struct serex__dump *d, const char *key, serex_fn fn);
/* Nesting: an array or an object under @key (NULL inside an array), at
 * most SEREX__DUMP_DEPTH deep below the object's own level (deeper ones
 * are left out); every begin needs its end. */
void serex__dump_array_begin(struct serex__dump *d, const char *key);
void serex__dump_array_end(struct serex__dump *d);
void serex__dump_object_begin(struct serex__dump *d, const char *key);
void serex__dump_object_end(struct serex__dump *d);
#define SEREX__DUMP_DEPTH 16

/*
 * The monotonic clock (serex__now_ns), read just before this object's
 * describe began: for ages ("the oldest task has waited now - t ns"). A
 * thing stamped while the describe runs is younger than that reading, so
 * clamp ages at 0.
 */
int64_t serex__dump_now(const struct serex__dump *d);

/* The most items a describe lists of one kind (timers, parked
 * continuations, queued tasks); it writes their total count beside, so a
 * dump of a huge queue stays small and quick. */
#define SEREX__DUMP_LIST_MAX 32

#endif /* SEREX_REGISTRY_INTERNAL_H */
