/* SPDX-License-Identifier: MIT */
/*
 * life_internal.h - one lifetime helper for every object that outlives its
 * destroy for a while: the pool, and the wrappers (serial, limiter,
 * striped, scheduler) whose work sits on a target they do not own.
 *
 * Two words, each on the line of the code that writes it most:
 *
 * --- The entry word (struct serex__entry): who is inside execute ---
 *   bits 0-3   the object's own flags (SHUT, STOP, BROKEN, ...)
 *   bits 4-63  calls between their flag check and the end of their push
 *              (and of their drain's submission, if they start one)
 *
 *   execute:   c = enter();  c has a closing flag: refused(); return;
 *              ... count, push, maybe submit ...; leave()
 *   shutdown:  close(FLAG)             (later enters see it and refuse)
 *   shutdown_now, destroy: close(); quiesce()
 *
 * One word for both, so the flags and the in-flight count share one
 * modification order: an enter that comes before close in that order is
 * counted when close's caller quiesces, and waits for it; one that comes
 * after sees the flag. leave is a release and quiesce an acquire, so at
 * zero every push of an accepted call happens-before whatever the closer
 * does next (take the queue, judge termination). An enter is relaxed: it
 * publishes nothing, and what it reads is only a flag that the modification
 * order already decides.
 *
 * --- The life word (struct serex__life): who still holds the object ---
 *   bits 0-31  holders: a drain, a run or a waker that will touch the
 *              object after the user could have destroyed it
 *   bit  32    DETACHED: destroy was called
 *   bits 33-47 threads in await_termination (past 32,767, a new one is
 *              not counted and polls: await_internal.h)
 *   bits 48-63 the generation: counted up to wake awaiters (a counter,
 *              not a flipped bit: two wake-ups must not cancel out)
 *
 *   hold:      holders += 1, while the object is known to be alive (the
 *              holder's own entry, or a reference it already has)
 *   release:   holders -= 1; true when it took them to 0 with DETACHED
 *   detach:    DETACHED |= 1; true when there were no holders
 *
 * Who frees: exactly one caller sees "true", the one whose RMW is last in
 * the word's modification order among {the final release, detach}. Both
 * are acq_rel: every holder's use of the object happens-before the free.
 * Nothing can hold after detach: a holder is taken only by a call that is
 * itself inside the object's life (its entry, or another holder), and the
 * destroy that detaches comes after every such call has left (quiesce),
 * or after the work that takes it has ended (await_termination).
 * Holders are 32 bits: four billion drains or runs in flight at once is
 * beyond any memory; serex__life_hold checks it in debug builds.
 *
 * Awaiters count themselves in the high bits of the life word and park on
 * it (await_internal.h has the no-lost-wake-up argument); whoever ends work
 * calls serex__life_notify after its seq_cst change, which costs one load
 * while nobody waits. tests/model/life.pml checks both halves with spin
 * (no touch after the free, no double free, no leak; three mutations).
 */
#ifndef SEREX_LIFE_INTERNAL_H
#define SEREX_LIFE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "await_internal.h"
#include "common_internal.h"
#include "thread_internal.h"

/* --- the entry word --- */

#define SEREX__ENTRY_FLAGS UINT64_C(15) /* bits the owner may use */
#define SEREX__ENTRY_ONE UINT64_C(16)   /* one call in flight */

struct serex__entry {
    _Atomic uint64_t word; /* flags | calls in flight */
};

/*
 * Counts the caller in flight; returns the flags it found. The caller
 * must end with serex__entry_leave or serex__entry_abort, whatever it
 * does.
 */
static inline uint64_t serex__entry_enter(struct serex__entry *e)
{
    /* relaxed: see the essay (the modification order decides) */
    return atomic_fetch_add_explicit(&e->word, SEREX__ENTRY_ONE,
                                     memory_order_relaxed) &
           SEREX__ENTRY_FLAGS;
}

/* Leaves, publishing what the caller pushed (to quiesce's acquire). */
static inline void serex__entry_leave(struct serex__entry *e)
{
    /* release: pairs with the acquire in serex__entry_quiesce */
    atomic_fetch_sub_explicit(&e->word, SEREX__ENTRY_ONE, memory_order_release);
}

/* Leaves having changed nothing a closer reads (a refused call). */
static inline void serex__entry_abort(struct serex__entry *e)
{
    /* relaxed: nothing to publish */
    atomic_fetch_sub_explicit(&e->word, SEREX__ENTRY_ONE, memory_order_relaxed);
}

/* Sets @flags; returns the flags there were. @order: what the caller
 * needs the set to order (relaxed when it quiesces next). */
static inline uint64_t serex__entry_close(struct serex__entry *e,
                                          uint64_t flags, memory_order order)
{
    return atomic_fetch_or_explicit(&e->word, flags, order) &
           SEREX__ENTRY_FLAGS;
}

/* Clears @flags; returns the flags there were (the one whose RMW cleared
 * a flag owns what it stood for: a drain owed, say). */
static inline uint64_t serex__entry_clear(struct serex__entry *e,
                                          uint64_t flags, memory_order order)
{
    return atomic_fetch_and_explicit(&e->word, ~flags, order) &
           SEREX__ENTRY_FLAGS;
}

/* The word, once (flags and count together: one decision). */
static inline uint64_t serex__entry_load(struct serex__entry *e)
{
    /* acquire: a zero count then means every accepted push is visible */
    return atomic_load_explicit(&e->word, memory_order_acquire);
}

static inline bool serex__entry_busy(uint64_t word)
{
    return word >= SEREX__ENTRY_ONE;
}

/* Waits until no call is in flight (after a close: no new one stays). */
static inline void serex__entry_quiesce(struct serex__entry *e)
{
    while (serex__entry_busy(serex__entry_load(e)))
        serex__thread_yield(); /* a call between two of its own steps */
}

/* --- the life word --- */

#define SEREX__LIFE_HOLDER UINT64_C(1)
#define SEREX__LIFE_DETACHED (UINT64_C(1) << 32)
#define SEREX__LIFE_WAITER_SHIFT 33
#define SEREX__LIFE_WAITER (UINT64_C(1) << SEREX__LIFE_WAITER_SHIFT)
#define SEREX__LIFE_WAITERS_MAX ((UINT64_C(1) << 15) - 1) /* a mask */
#define SEREX__LIFE_GEN (UINT64_C(1) << 48)
#define SEREX__LIFE_HOLDERS(x) ((x) & (SEREX__LIFE_DETACHED - 1))

struct serex__life {
    _Atomic uint64_t word; /* holders | DETACHED | waiters | generation */
};

/* One more holder; the caller's own entry or reference keeps it alive. */
static inline void serex__life_hold(struct serex__life *l)
{
    /* relaxed: the holder is published to the detacher by what made the
     * caller's work visible (its leave, a submission, a lock) */
    uint64_t old = atomic_fetch_add_explicit(&l->word, SEREX__LIFE_HOLDER,
                                             memory_order_relaxed);

    SEREX_ASSERT(SEREX__LIFE_HOLDERS(old) + 1 < SEREX__LIFE_DETACHED);
    (void)old;
}

/* One holder fewer. Returns true if the caller must free the object: it
 * was the last holder, and destroy has been called. */
static inline bool serex__life_release(struct serex__life *l)
{
    /* acq_rel: every holder's use before the free (see the essay) */
    uint64_t old = atomic_fetch_sub_explicit(&l->word, SEREX__LIFE_HOLDER,
                                             memory_order_acq_rel);

    SEREX_ASSERT(SEREX__LIFE_HOLDERS(old) != 0);
    return SEREX__LIFE_HOLDERS(old) == 1 && (old & SEREX__LIFE_DETACHED);
}

/* destroy's last step. Returns true if the caller must free the object
 * now: no holder is left (else the last release frees it). */
static inline bool serex__life_detach(struct serex__life *l)
{
    /* acq_rel: as serex__life_release */
    uint64_t old = atomic_fetch_or_explicit(&l->word, SEREX__LIFE_DETACHED,
                                            memory_order_acq_rel);

    SEREX_ASSERT(!(old & SEREX__LIFE_DETACHED));
    return SEREX__LIFE_HOLDERS(old) == 0;
}

/* Holders now (a seq_cst look, for a termination judgement). */
static inline uint64_t serex__life_holders(struct serex__life *l)
{
    return SEREX__LIFE_HOLDERS(atomic_load_explicit(&l->word,
                                                    memory_order_seq_cst));
}

/* Something awaiters wait for changed: wake them (always). */
static inline void serex__life_bump(struct serex__life *l)
{
    serex__await_bump(&l->word, SEREX__LIFE_GEN);
}

/* The same, only if an awaiter is counted (after a seq_cst change). */
static inline void serex__life_notify(struct serex__life *l)
{
    serex__await_notify(&l->word, SEREX__LIFE_GEN, SEREX__LIFE_WAITER_SHIFT,
                        SEREX__LIFE_WAITERS_MAX);
}

/* await_termination on @l: @state judges, from one load of the object's
 * flags, whether the work is done (await_internal.h). */
static inline int serex__life_await(struct serex__life *l,
                                    enum serex__await_state (*state)(void *),
                                    void *obj, int64_t timeout_ns)
{
    const struct serex__await a = {
        &l->word, SEREX__LIFE_WAITER, SEREX__LIFE_WAITER_SHIFT,
        SEREX__LIFE_WAITERS_MAX, state, obj,
    };

    return serex__await(&a, timeout_ns);
}

/* --- await with a drain owed --- */

/* What one look of an awaiter found (serex__life_await_owed). */
struct serex__owed_look {
    enum serex__await_state (*state)(void *obj, bool *owed);
    void *obj;
    bool owed; /* not done, and a drain is owed: retry it, then wait on */
};

static inline enum serex__await_state serex__owed_look_cb(void *p)
{
    struct serex__owed_look *look = p;
    enum serex__await_state st = look->state(look->obj, &look->owed);

    /* owed: "done" only ends serex__await's loop; the caller retries */
    return look->owed ? SEREX__AWAIT_DONE : st;
}

/* What is left of @timeout_ns, whose deadline is @deadline. */
static inline int64_t serex__time_left(int64_t timeout_ns, int64_t deadline)
{
    int64_t now;

    if (timeout_ns == SEREX_FOREVER)
        return SEREX_FOREVER;
    now = serex__now_ns();
    return deadline > now ? deadline - now : 0;
}

/*
 * await_termination for a wrapper whose drain (or runner) may be owed: its
 * target refused it as full. @state judges as serex__life_await's does,
 * and sets *owed when the work is not done and a drain is owed. Nothing
 * would wake us when the target has room again, so @retry(@obj) submits
 * the drain here and returns whether one is still owed (the target still
 * full): then we look again after SEREX__AWAIT_POLL_NS, or at the next
 * bump of @l (shutdown_now, the end of work), whichever comes first.
 */
static inline int serex__life_await_owed(
    struct serex__life *l, enum serex__await_state (*state)(void *, bool *),
    bool (*retry)(void *), void *obj, int64_t timeout_ns)
{
    int64_t deadline = serex__deadline(timeout_ns);

    for (;;) {
        struct serex__owed_look look = {state, obj, false};
        int rc = serex__life_await(l, serex__owed_look_cb, &look,
                                   serex__time_left(timeout_ns, deadline));
        int64_t now;

        if (!look.owed)
            return rc;
        if (retry(obj)) { /* still full: a nap */
            /* relaxed: the bump that ends the nap early needs no order */
            uint64_t v = atomic_load_explicit(&l->word, memory_order_relaxed);

            now = serex__now_ns();
            if (now >= deadline)
                return SEREX_ETIMEDOUT;
            (void)serex__park_wait64(&l->word, v,
                                     deadline - now > SEREX__AWAIT_POLL_NS
                                         ? now + SEREX__AWAIT_POLL_NS
                                         : deadline);
        }
    }
}

#endif /* SEREX_LIFE_INTERNAL_H */
