/* SPDX-License-Identifier: MIT */
/* registry.c - live objects and serex_dump. STUB (being written). */
#include "registry_internal.h"

void serex__reg_add(struct serex__reg *r, const struct serex__reg_class *cls,
                    const void *obj, const char *name)
{
    r->cls = cls, r->obj = obj, r->name = name;
    r->prev = r->next = NULL;
}

void serex__reg_remove(struct serex__reg *r)
{
    (void)r;
}
