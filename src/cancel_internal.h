/* SPDX-License-Identifier: MIT */
/*
 * cancel_internal.h - how an operation obeys a token (cancel.c): a hook
 * the operation embeds, called once on the cancelling thread.
 *
 * An operation given a token adds its hook; the token's request calls
 * hook->fire(hook, cause) on the requesting thread, without the token's
 * lock held, so fire may take the operation's own lock, post, or end a
 * future. fire must not block; it may remove its own hook (remove then
 * returns false at once). When the
 * operation ends by itself (it ran, was granted, was dropped), it removes
 * the hook: remove says whether fire will never be called (true) or has
 * been (false); in the second case it returns only once fire has
 * returned, unless the caller is inside that very fire (then it returns
 * at once). So after remove, the hook's memory is the operation's again.
 * Every add that returned 0 is matched by exactly one remove, even after
 * fire: the hook holds a reference to the token from add to remove.
 */
#ifndef SEREX_CANCEL_INTERNAL_H
#define SEREX_CANCEL_INTERNAL_H

#include <stdbool.h>

#include "common_internal.h"
#include "serex/cancel.h"

struct serex__cancel_hook {
    /* the token's list, under its lock; pprev NULL: not on it */
    struct serex__cancel_hook *next, **pprev;
    void (*fire)(struct serex__cancel_hook *h, int cause);
};

/*
 * Adds @h to @c: 0 if added (fire will be called once on cancellation,
 * unless removed first); the cause if @c is cancelled already (then @h
 * is not added, fire is not called, and no remove is owed). @c must
 * not be NULL: an operation without a token adds nothing.
 */
int serex__cancel_hook_add(serex_cancel *c, struct serex__cancel_hook *h);

/* Removes @h from @c (see above): true if fire will never be called. */
bool serex__cancel_hook_remove(serex_cancel *c, struct serex__cancel_hook *h);

/* Takes and drops a reference to @c (the caller holds one to take). */
void serex__cancel_ref(serex_cancel *c);
void serex__cancel_unref(serex_cancel *c);

#endif /* SEREX_CANCEL_INTERNAL_H */
