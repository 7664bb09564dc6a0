/* SPDX-License-Identifier: MIT */
/*
 * group.c - task groups: a count of members spread over any executors,
 * waiting for it to reach zero, notifications posted when it does, and
 * cancellation of the tasks that have not started, without a list of them.
 *
 * --- Members and their records ---
 * A member is a task of serex_group_execute or serex_group_submit, from
 * the call that accepts it until it has run, been dropped by its executor,
 * or been reached after a cancel; or an enter, until its leave. A task is
 * queued on its executor as an internal operation (op_internal.h): a
 * record from the node cache that holds the group, the user's task and
 * the epoch it joined in (below). Its `run` hook runs the task unless it
 * was cancelled; its `dropped` hook (shutdown_now, a destroy that drops)
 * hands the user's task to on_pending, or ends a future as cancelled
 * (serex__hand_back). Both then leave the group, so every record leaves
 * exactly once and the group still empties when an executor drops work.
 * execute's record is 40 bytes (class 64: op, group, arg, epoch, fn);
 * submit's is 32 (class 32: op, group, future, epoch), the future's task
 * being serex__op_run on the future (future_internal.h).
 *
 * --- `state`, demystified ---
 * One 64-bit word holds everything wait and notify decide on, so that
 * each decision is one atomic step:
 *
 *   bits  0-31  A         members
 *   bits 32-47  R         references on the group's memory (below)
 *   bits 48-59  W         threads counted in serex_group_wait
 *   bit  60     NOTIFY    the notify list is not empty
 *   bit  61     DETACHED  serex_group_destroy was called
 *   bit  62     POSTING   a thread is handing out the notifications due
 *
 * The group is *empty* (what wait waits for) when A == 0 and NOTIFY and
 * POSTING are clear: no member, and every notification due handed out
 * (its target's execute returned), so that a waiter may destroy a notify
 * target as soon as it returns; libdispatch, too, posts a group's
 * notifications before it wakes its waiters. notify posts at once when
 * A == 0 and NOTIFY is clear (POSTING set: the poster posts it).
 *   join  (execute, submit, enter):  A += 1, one fetch_add; the join
 *         that finds A == 0 opens a busy period and also takes R += 1
 *         (one CAS when a first look saw A == 0, else a second add).
 *   leave (a record's end, leave):   A -= 1, one fetch_sub. The leave
 *         that takes A from 1 to 0 is the period's *emptier*: if NOTIFY
 *         was set it runs the notify tail (below), else if W was not 0
 *         and POSTING clear it wakes the waiters (POSTING set: the poster
 *         wakes them); then it drops the period's reference. With
 *         nothing to do (a first look saw A == 1, no NOTIFY, no W) the
 *         leave and the drop are one CAS.
 * So a task costs: at execute, the add on `state` and one on `pend`
 * (cancel, below); when it starts, a CAS on `pend`; when it ends, the
 * subtraction on `state`. Both words share one cache line.
 *
 * --- R: why the emptier may still touch the group ---
 * After A reaches 0 a waiter may return and the user destroy the group,
 * yet the emptier still has to hand out notifications and wake waiters.
 * As libdispatch's groups retain themselves while not empty, each busy
 * period holds a reference, taken by its first join and dropped by its
 * emptier after its tail; a thread that hands out notifications holds one
 * too. serex_group_destroy sets DETACHED; whoever takes R to 0 with
 * DETACHED set (destroy itself, or the last tail) frees the group. Only
 * an emptier drops a period's reference, and only after its own tail, so
 * the memory outlives every tail: emptiers of older periods may still be
 * finishing while a new period runs (R counts them all: one per open
 * period and per thread in a tail, far below 2^16).
 * The period's reference is taken before its emptier can exist: the first
 * join's own member keeps A >= 1 until it leaves, and it leaves only after
 * the join call returned (a record is queued after its join; an enter's
 * leave happens after the enter, as group.h requires). That order is a
 * happens-before (the join's thread queues the record, the executor runs
 * it, or the user passes the enter on), so the take comes before the drop
 * in the word's modification order and R never goes below 0.
 * serex_group_destroy of a group with A != 0 (or W != 0: a thread is
 * still inside wait; or DETACHED already set) is the user's bug, and
 * stops the program.
 *
 * --- Waiting ---
 * A waiter counts itself in W with a CAS that also finds the group not
 * empty (W saturates at 4095: further waiters are not counted and look
 * again every millisecond), then sleeps in the parking lot on `gen`, a
 * 32-bit word of its own, while the group is not empty. Whoever makes the
 * group empty, an emptier's fetch_sub (POSTING clear) or a poster's
 * clearing of POSTING (A == 0, NOTIFY clear), gets W in the old value of
 * the same RMW: a waiter counted before that RMW is seen, one counted
 * after it finds the group empty in its CAS and does not wait. Seeing W,
 * it bumps `gen` (release) and wakes the lot: a waiter that read `gen`
 * before the bump has its park return (park_internal.h re-reads under the
 * bucket lock); one that read it after the bump sees, through that
 * release, the emptying RMW in its next look at `state`. No wake-up is
 * lost, and waiters park on a word that changes only when the group
 * empties, not at every task. A waiter wakes only to look: the group may
 * be busy again, and then it sleeps again. Exactly one of the two RMWs
 * that may end a busy period sees the other's work done: an emptier that
 * finds POSTING set leaves the waking to the poster, and a poster that
 * finds A != 0 or NOTIFY set leaves it to the emptier or tail to come.
 *
 * --- Notifications: the list, due, POSTING ---
 * Under `lock` (a spinlock, held for a few pointer moves): `list`, the
 * notifications waiting for the group to empty; `due`, those to post now.
 * NOTIFY is set iff `list` is not empty; POSTING iff a thread is posting
 * `due`: both bits change only under the lock (with A re-read by the CAS
 * that changes them), so the lock holder knows them.
 *   notify:  lock; one CAS decides on `state`: A == 0 and NOTIFY clear
 *            -> append to `due`, and if POSTING was clear, set it and take
 *            a reference (R) in that CAS and post; else set NOTIFY (if
 *            clear) and append to `list`. A notification registered while
 *            NOTIFY is set and A == 0 (an emptier's tail is on its way)
 *            waits for that tail, behind the ones registered before it.
 *   tail:    (an emptier that saw NOTIFY) lock; if A == 0 and NOTIFY is
 *            still set, one CAS clears NOTIFY and sets POSTING, and `list`
 *            moves to `due`; the tail posts if POSTING was clear (else the
 *            thread posting takes them). If A != 0, the group filled again
 *            first: leave `list` for the emptier of the new period (it
 *            will see NOTIFY).
 *   post:    take `due` under the lock, post each in order with the lock
 *            released, again until `due` is empty; then, in the same
 *            critical section that finds it empty, clear POSTING (a
 *            release RMW: the posts, our calls into the targets, happen
 *            before a waiter that sees the group empty returns). If that
 *            made the group empty (A == 0, NOTIFY clear) and W != 0, wake
 *            the waiters. A notification that becomes due meanwhile is
 *            posted by that same thread, after the ones before it: one
 *            poster at a time keeps the order of registration, and a
 *            notification run inline that registers another does not
 *            recurse. The poster holds a reference while it posts (the
 *            tail its period's, a registrant its own): a notification it
 *            runs inline may destroy the group. It posts inside a frame
 *            of the group (below): a notification run inline, refused by
 *            its target or run inside the target's execute, that waits
 *            for the group would wait for its own handing out.
 * Who wins: `list`, `due`, NOTIFY and POSTING change only under the lock,
 * and A == 0 is re-read there by the CAS that clears NOTIFY, so a
 * notification is due exactly when the group had no member at some
 * moment after it was registered, and the moment is one both wait and
 * notify can see: while NOTIFY is set the group is not empty to them, so
 * a join that slips in between an emptier's fetch_sub and its tail simply
 * continues the busy period (no observer could tell it came later). Each
 * notification is in exactly one of `list`, `due`, or a poster's private
 * batch, and a poster posts what it took: nothing is lost or posted twice.
 * A wait never returns while one is due and not yet handed out: from the
 * moment it is due until POSTING is cleared, NOTIFY or POSTING is set.
 * A notification is an internal operation: if its target refuses it or
 * later takes it back or drops it, it runs where it is (promise 2a).
 *
 * --- Cancel: `pend`, epochs without a list ---
 * `pend` packs E (bits 32-63, the epoch) and P (bits 0-31, tasks of epoch
 * E that have not started). A task's join adds 1 (one fetch_add) and
 * keeps the E it read in its record. When the record is reached, to run or
 * to be dropped, a CAS takes 1 from P if E is still its epoch ("claims"
 * it); else the task was cancelled. serex_group_cancel CASes (E + 1, 0)
 * when P != 0 and returns the old P. Start and cancel race on that one
 * word, so exactly one wins per task: a claimed task is no longer in P, so
 * no later cancel counts it; a cancelled one fails its claim, never runs
 * and is counted once. A cancelled record still leaves the group (A) when
 * it is reached or dropped, so the group's memory outlives it; wait after
 * cancel returns once those records are accounted for. P <= A < 2^32
 * keeps P from carrying into E. Only a record that stays queued across
 * 2^32 cancels that each cancelled something could meet its epoch again;
 * it then finds P == 0, or takes a later task's count (serex accepts that
 * bound, as it accepts a 64-bit counter's).
 * A submission that its executor refuses is taken back with a claim: if a
 * cancel counted it in between, the claim fails, and the call reports
 * SEREX_OK for a task that was accepted and cancelled (a submit's future
 * says SEREX_ECANCELED), so every cancelled task was one the caller was
 * told was accepted.
 *
 * --- SEREX_EDEADLK ---
 * A record runs its task inside a frame on a thread-local list of the
 * groups whose tasks this thread runs; serex_group_wait called from inside
 * one for the same group returns SEREX_EDEADLK (its own task keeps A > 0).
 * A poster posts inside one too (its own POSTING keeps the group busy).
 *
 * --- Failure, close and the group's token ---
 * serex_group_close sets `closed` (release); execute and submit look at
 * it (acquire) before they join and say SEREX_EREJECTED: a join that
 * starts after close returned is refused, one racing with it may still
 * be accepted (it is then a member like any other). Errors come from
 * serex_group_fail and from the futures of submitted tasks that set one
 * (the record reads serex__future_take_error after the call): `nerrors`
 * counts them, and the first CAS of `error` from 0 keeps the first. With
 * fail_fast, the thread whose report was first closes the group and
 * cancels its token with the error. A group made by
 * serex_group_create_config has a token (a child of cfg->parent): its
 * hook, called once when the token is cancelled (by that first error, by
 * the parent, by a deadline on it), closes the group, records the cause
 * as an error if none came first, and runs serex_group_cancel. Destroy
 * removes the hook before anything goes (the remove waits for a fire in
 * progress), then releases the token. wait and the error calls read
 * `error` with acquire once the group is empty: the reporter's release
 * CAS came before its leave.
 *
 * --- Memory orders (each is also explained where it is used) ---
 * Leaves are release RMWs on `state`, so every later RMW continues their
 * release sequence: wait's acquire loads and the emptier's acquire see
 * every task's writes (the emptier passes them on to what it posts; the
 * executor orders the post before the run). Joins are relaxed: a member
 * publishes nothing by joining. `pend` is all relaxed: the CAS only
 * decides a race, and the task's data travels with its executor. R drops
 * are acq_rel (the last one frees); R takes are relaxed (ordered as shown
 * above). The W count is relaxed (the single modification order of
 * `state` decides, see Waiting); `gen` is release/acquire.
 */
#include <stdatomic.h>

#include "alloc_internal.h"
#include "cancel_internal.h"
#include "common_internal.h"
#include "registry_internal.h"
#include "executor_internal.h"
#include "future_internal.h"
#include "group_internal.h"
#include "nodecache_internal.h"
#include "op_internal.h"
#include "park_internal.h"
#include "spinlock_internal.h"
#include "thread_internal.h"

#define A_UNIT UINT64_C(1)
#define A_MASK UINT64_C(0xffffffff)
#define A_LIMIT (UINT64_C(1) << 31) /* joins past it are refused */
#define R_SHIFT 32
#define R_UNIT (UINT64_C(1) << R_SHIFT)
#define R_MASK (UINT64_C(0xffff) << R_SHIFT)
#define W_SHIFT 48
#define W_UNIT (UINT64_C(1) << W_SHIFT)
#define W_MAX UINT64_C(0xfff)
#define W_MASK (W_MAX << W_SHIFT)
#define NOTIFY (UINT64_C(1) << 60)
#define DETACHED (UINT64_C(1) << 61)
#define POSTING (UINT64_C(1) << 62)

#define MEMBERS(v) ((v)&A_MASK)
#define REFS(v) (((v)&R_MASK) >> R_SHIFT)
#define STATE_WAITERS(v) (((v)&W_MASK) >> W_SHIFT)

#define EPOCH_SHIFT 32
#define P_MASK UINT64_C(0xffffffff)

/* A waiter that could not be counted looks again this often. */
#define POLL_NS INT64_C(1000000)

struct note;

struct serex_group {
    /* The hot line: every task touches both words. */
    _Alignas(SEREX__CACHELINE) _Atomic uint64_t state; /* see the essay */
    _Atomic uint64_t pend; /* E | P: see the essay; joins, claims, cancel */
    _Atomic bool closed;   /* joins refused (serex_group_close) */

    /* The cold line: waiting, notifications, enters. */
    _Alignas(SEREX__CACHELINE) _Atomic uint32_t gen; /* bumped by whoever
                                      empties the group with waiters */
    serex__spinlock lock; /* list, due (and NOTIFY's and POSTING's changes) */
    _Atomic uint64_t entered; /* enters without their leave: misuse check */
    struct note *list, **list_tail; /* waiting for the group to empty */
    struct note *due, **due_tail;   /* to post now, in order */
    struct serex__reg reg;          /* serex_dump's list */

    /* Its life (serex_group_create_config; see "Failure" in the essay) */
    _Atomic int error;        /* the first error reported, or 0 */
    _Atomic uint32_t nerrors; /* every error reported */
    bool fail_fast;           /* the first error cancels and closes */
    bool hooked;              /* hook is on token (a remove is owed) */
    serex_cancel *token;      /* the group's, or NULL (serex_group_create) */
    struct serex__cancel_hook hook; /* on token: cancels and closes */
};

/* A task's record (submit's; execute's adds fn). */
struct group_rec {
    struct serex__op op; /* queued as (serex__op_run, &op) */
    serex_group *g;
    void *arg;      /* the user's arg, or the future (submit) */
    uint32_t epoch; /* E when it joined */
};

struct group_task {
    struct group_rec r;
    serex_fn fn;
};

/* A notification. */
struct note {
    struct serex__op op; /* posted to target as this op */
    struct note *next;   /* list or due, then a poster's batch */
    serex_executor *target;
    serex_fn fn;
    void *arg;
};

_Static_assert(sizeof(struct group_rec) <= 32, "a submit record: class 32");
_Static_assert(sizeof(struct group_task) <= 64, "an execute record: class 64");
_Static_assert(sizeof(struct note) <= 64, "a notification: class 64");

/* Groups whose tasks the calling thread runs, innermost first. */
struct group_frame {
    serex_group *g;
    struct group_frame *prev;
};

static SEREX__THREAD_LOCAL struct group_frame *group_frames;

static bool state_empty(uint64_t v)
{
    return MEMBERS(v) == 0 && !(v & (NOTIFY | POSTING));
}

/* --- references: the memory outlives every tail --- */

static void group_free(serex_group *g)
{
    /* relaxed: the freeing thread's own last RMW made it see the rest */
    SEREX_ASSERT(
        g->list == NULL && g->due == NULL &&
        !(atomic_load_explicit(&g->state, memory_order_relaxed) & POSTING));
    serex__free(g);
}

/* Drops one reference (a period's or a poster's). */
static void group_unref(serex_group *g)
{
    /* acq_rel: the release orders our uses of the group before the free;
     * the acquire makes the freeing thread see every other holder's */
    uint64_t old = atomic_fetch_sub_explicit(&g->state, R_UNIT,
                                             memory_order_acq_rel);

    SEREX_ASSERT(REFS(old) != 0);
    if (REFS(old) == 1 && (old & DETACHED))
        group_free(g);
}

/* --- notifications --- */

/* Runs a notification and frees its block (on its target, or where it
 * is when its target refused, took back or dropped it: promise 2a). */
static void note_run(struct serex__op *op)
{
    struct note n = *serex__container_of(op, struct note, op);

    serex__cache_free(SEREX__CLASS_64, op);
    n.fn(n.arg);
}

static void note_dropped(struct serex__op *op, serex_pending_fn on_pending,
                         void *ctx)
{
    (void)on_pending; /* a notification never reaches on_pending */
    (void)ctx;
    note_run(op);
}

static const struct serex__op_class note_class = {"group notification",
                                                  note_run, note_dropped};

static void note_post(struct note *n)
{
    serex_executor *t = n->target;

    if (t->ops->execute(t, serex__op_run, &n->op) != SEREX_OK)
        note_run(&n->op); /* refused: runs here (promise 2a) */
}

/* Appends @n to the list at *@tail (under the lock). */
static void note_append(struct note ***tail, struct note *n)
{
    n->next = NULL;
    **tail = n;
    *tail = &n->next;
}

/* Wakes the threads in serex_group_wait (the caller saw W != 0 when it
 * emptied the group, and holds a reference). */
static void group_wake(serex_group *g)
{
    /* release: pairs with the acquire load of gen in group_wait_slow; our
     * emptying RMW is then visible to a waiter that reads the bump */
    atomic_fetch_add_explicit(&g->gen, 1, memory_order_release);
    serex__park_wake_all(&g->gen);
}

static void frame_push(struct group_frame *f, serex_group *g);
static void frame_pop(struct group_frame *f);

/*
 * The poster: posts `due` batch by batch, in order, until it is empty,
 * then clears POSTING, which may make the group empty: then it wakes the
 * waiters, so that none returns before every notification due was handed
 * out (its target's execute returned). The caller set POSTING and holds a
 * reference. A notification run here (refused, or run inside its target's
 * execute) that waits for @g would wait for itself: the frame makes that
 * wait say SEREX_EDEADLK.
 */
static void group_post(serex_group *g)
{
    struct group_frame f;
    uint64_t old = 0;

    frame_push(&f, g);
    for (;;) {
        struct note *n;

        serex__spin_lock(&g->lock);
        n = g->due;
        g->due = NULL;
        g->due_tail = &g->due;
        if (n == NULL)
            /* release: the posts (our calls into the targets) happen
             * before the return of a wait that sees the group empty
             * (its acquire load reads this RMW or a later one of its
             * release sequence) */
            old = atomic_fetch_and_explicit(&g->state, ~POSTING,
                                            memory_order_release);
        serex__spin_unlock(&g->lock);
        if (n == NULL)
            break;
        while (n != NULL) {
            struct note *next = n->next; /* n may be gone once posted */

            note_post(n);
            n = next;
        }
    }
    frame_pop(&f);
    SEREX_ASSERT(old & POSTING);
    /* Empty now (no member, no tail on its way: NOTIFY clear): the
     * waiters are ours to wake. Else the emptier of the open period, or
     * the tail on its way, sees them. */
    if (MEMBERS(old) == 0 && !(old & NOTIFY) && STATE_WAITERS(old) != 0)
        group_wake(g);
}

/* Moves `list` to the end of `due` (under the lock). */
static void notes_due(serex_group *g)
{
    if (g->list != NULL) {
        *g->due_tail = g->list;
        g->due_tail = g->list_tail;
        g->list = NULL;
        g->list_tail = &g->list;
    }
}

/* --- emptying --- */

/*
 * The notify tail of an emptier that saw NOTIFY (it holds its period's
 * reference): if the group is still without members, the notifications
 * registered so far are due. One CAS clears NOTIFY and sets POSTING, so
 * the group does not look empty until they are handed out: the poster
 * (we, or a thread already posting) clears POSTING and wakes the waiters.
 */
static void group_tail(serex_group *g)
{
    bool post = false;
    uint64_t v;

    serex__spin_lock(&g->lock);
    /* relaxed: a first guess; NOTIFY and POSTING cannot change while we
     * hold the lock, and the CAS below re-reads A */
    v = atomic_load_explicit(&g->state, memory_order_relaxed);
    while (MEMBERS(v) == 0 && (v & NOTIFY)) {
        /* acq_rel: continues the leaves' release sequence (waiters'
         * acquire sees the tasks' writes through it); relaxed on failure:
         * we only look again */
        if (atomic_compare_exchange_weak_explicit(
                &g->state, &v, (v & ~NOTIFY) | POSTING, memory_order_acq_rel,
                memory_order_relaxed)) {
            notes_due(g);
            post = !(v & POSTING); /* else that poster takes them */
            break;
        }
    }
    serex__spin_unlock(&g->lock);
    /* else: filled again (the new period's emptier will see NOTIFY), or
     * another tail took the list */
    if (post)
        group_post(g);
}

/* The caller's leave took A from 1 to 0 (@old: the value before). */
static void group_emptied(serex_group *g, uint64_t old)
{
    if (old & NOTIFY)
        group_tail(g);
    else if (STATE_WAITERS(old) != 0 && !(old & POSTING))
        group_wake(g); /* else the poster wakes them when it is done */
    group_unref(g); /* the period's: our last touch of the group */
}

/* --- joining and leaving --- */

/* Counts one member in; false (nothing counted) past A_LIMIT. */
static bool group_join(serex_group *g)
{
    /* relaxed: a first guess for the CAS */
    uint64_t v = atomic_load_explicit(&g->state, memory_order_relaxed);
    uint64_t old;

    /* relaxed (both RMWs): a member publishes nothing by joining; the
     * period's reference is ordered before its drop as the essay shows.
     * From empty: the member and the period's reference in one CAS. */
    if (MEMBERS(v) == 0 && atomic_compare_exchange_strong_explicit(
                               &g->state, &v, v + A_UNIT + R_UNIT,
                               memory_order_relaxed, memory_order_relaxed))
        return true;
    old = atomic_fetch_add_explicit(&g->state, A_UNIT, memory_order_relaxed);
    if (serex__unlikely(MEMBERS(old) == 0)) {
        /* relaxed: as above; the period is ours to open after all */
        atomic_fetch_add_explicit(&g->state, R_UNIT, memory_order_relaxed);
    } else if (serex__unlikely(MEMBERS(old) >= A_LIMIT)) {
        /* relaxed: we only take back our own add, far from 0 */
        atomic_fetch_sub_explicit(&g->state, A_UNIT, memory_order_relaxed);
        return false;
    }
    return true;
}

/* Ends one member: a task that ran or was dropped or cancelled, a leave. */
static void group_leave_member(serex_group *g)
{
    /* relaxed: a first guess for the CAS */
    uint64_t v = atomic_load_explicit(&g->state, memory_order_relaxed);
    uint64_t old;

    /* The last member, with no one to wake or notify: leave and drop the
     * period's reference in one CAS. release: publishes the member's
     * writes (as the fetch_sub below) and our uses before a free */
    if (MEMBERS(v) == 1 && !(v & (NOTIFY | W_MASK | DETACHED)) &&
        atomic_compare_exchange_strong_explicit(
            &g->state, &v, v - A_UNIT - R_UNIT, memory_order_release,
            memory_order_relaxed)) {
        SEREX_ASSERT(REFS(v) != 0); /* the period's, taken by its join */
        return;
    }
    /* acq_rel: release publishes the member's writes to wait and to the
     * emptier; acquire, when we are the emptier, gets every other
     * member's writes through their releases, for what we post */
    old = atomic_fetch_sub_explicit(&g->state, A_UNIT, memory_order_acq_rel);
    SEREX_ASSERT(MEMBERS(old) != 0);
    if (MEMBERS(old) == 1)
        group_emptied(g, old);
}

/* A task joins `pend` too: returns the epoch it joined in. */
static uint32_t group_join_pend(serex_group *g)
{
    /* relaxed: the word's modification order alone decides join against
     * cancel (see the essay) */
    return (uint32_t)(atomic_fetch_add_explicit(&g->pend, 1,
                                                memory_order_relaxed) >>
                      EPOCH_SHIFT);
}

/*
 * The record of a task that joined in epoch @e is reached (to run, to be
 * dropped, or taken back after a refused submission): true if it was not
 * cancelled, and then no cancel can count it any more.
 */
static bool group_claim(serex_group *g, uint32_t e)
{
    /* relaxed: a first guess for the CAS */
    uint64_t v = atomic_load_explicit(&g->pend, memory_order_relaxed);

    do {
        /* P == 0 in our epoch: it came round again, 2^32 cancels later */
        if ((uint32_t)(v >> EPOCH_SHIFT) != e || (v & P_MASK) == 0)
            return false;
        /* relaxed: decides the race with cancel only; the run's data is
         * ordered by the executor */
    } while (!atomic_compare_exchange_weak_explicit(
        &g->pend, &v, v - 1, memory_order_relaxed, memory_order_relaxed));
    return true;
}

/* --- the records --- */

static void frame_push(struct group_frame *f, serex_group *g)
{
    f->g = g;
    f->prev = group_frames;
    group_frames = f;
}

static void frame_pop(struct group_frame *f)
{
    SEREX_ASSERT(group_frames == f);
    group_frames = f->prev;
}

/* Whether the calling thread runs a task of @g. */
static bool group_running(const serex_group *g)
{
    for (const struct group_frame *f = group_frames; f != NULL; f = f->prev)
        if (f->g == g)
            return true;
    return false;
}

/* Hands fn(arg) back through serex__hand_back as a task of @g (its
 * on_pending, or a future's dropped hook, may call wait: EDEADLK). */
static void group_hand_back(serex_group *g, serex_fn fn, void *arg,
                            serex_pending_fn on_pending, void *ctx)
{
    struct group_frame f;

    frame_push(&f, g);
    serex__hand_back(fn, arg, on_pending, ctx);
    frame_pop(&f);
}

/* --- failure and close (see the essay) --- */

static void group_close_now(serex_group *g)
{
    /* release: pairs with the joins' acquire */
    atomic_store_explicit(&g->closed, true, memory_order_release);
}

/* Records @err; true if it was the first. */
static bool group_record(serex_group *g, int err)
{
    int none = 0;

    /* relaxed: a count, read once the group is quiet */
    atomic_fetch_add_explicit(&g->nerrors, 1, memory_order_relaxed);
    /* release: the reporter's writes before its leave, to whoever reads
     * the error with acquire; relaxed on failure: a later error is only
     * counted */
    return atomic_compare_exchange_strong_explicit(
        &g->error, &none, err, memory_order_release, memory_order_relaxed);
}

static void group_report(serex_group *g, int err)
{
    if (!group_record(g, err) || !g->fail_fast)
        return;
    group_close_now(g);
    if (g->token != NULL)
        serex_cancel_request(g->token, err); /* its hook cancels */
    else
        serex_group_cancel(g);
}

/* The group's token was cancelled: close, record why, cancel. */
static void group_token_fire(struct serex__cancel_hook *h, int cause)
{
    serex_group *g = serex__container_of(h, serex_group, hook);
    int none = 0;

    /* release: as group_record; the cause is an error only if none came
     * first (fail-fast's own request finds its error there). Before the
     * close: whoever sees the group closed (acquire) sees why. */
    if (atomic_compare_exchange_strong_explicit(&g->error, &none, cause,
                                                memory_order_release,
                                                memory_order_relaxed))
        atomic_fetch_add_explicit(&g->nerrors, 1, memory_order_relaxed);
    group_close_now(g);
    serex_group_cancel(g);
}

static void task_run(struct serex__op *op)
{
    struct group_task t = *serex__container_of(op, struct group_task, r.op);

    serex__cache_free(SEREX__CLASS_64, op);
    if (group_claim(t.r.g, t.r.epoch)) {
        struct group_frame f;

        frame_push(&f, t.r.g);
        t.fn(t.r.arg);
        frame_pop(&f);
    }
    group_leave_member(t.r.g);
}

/* Dropped by its executor: the user's task goes to on_pending, unless it
 * was cancelled (cancel won: it is neither run nor handed back). */
static void task_dropped(struct serex__op *op, serex_pending_fn on_pending,
                         void *ctx)
{
    struct group_task t = *serex__container_of(op, struct group_task, r.op);

    serex__cache_free(SEREX__CLASS_64, op);
    if (group_claim(t.r.g, t.r.epoch))
        group_hand_back(t.r.g, t.fn, t.r.arg, on_pending, ctx);
    group_leave_member(t.r.g);
}

static void future_rec_run(struct serex__op *op)
{
    struct group_rec r = *serex__container_of(op, struct group_rec, op);
    struct group_frame f;

    serex__cache_free(SEREX__CLASS_32, op);
    if (group_claim(r.g, r.epoch)) {
        int err;

        frame_push(&f, r.g);
        (void)serex__future_take_error(); /* clear a stale one */
        serex__op_run(r.arg); /* the future's task */
        err = serex__future_take_error();
        frame_pop(&f);
        if (err != 0)
            group_report(r.g, err); /* before the leave: wait sees it */
    } else { /* cancelled: the future's dropped hook ends it so */
        group_hand_back(r.g, serex__op_run, r.arg, NULL, NULL);
    }
    group_leave_member(r.g);
}

/* Dropped: the future completes as cancelled (never on_pending). */
static void future_rec_dropped(struct serex__op *op,
                               serex_pending_fn on_pending, void *ctx)
{
    struct group_rec r = *serex__container_of(op, struct group_rec, op);

    serex__cache_free(SEREX__CLASS_32, op);
    (void)group_claim(r.g, r.epoch); /* cancelled either way */
    group_hand_back(r.g, serex__op_run, r.arg, on_pending, ctx);
    group_leave_member(r.g);
}

static const struct serex__op_class task_class = {"group task", task_run,
                                                  task_dropped};
static const struct serex__op_class future_rec_class = {
    "group future", future_rec_run, future_rec_dropped};

/* --- the calls --- */

/* serex_dump: members and waiters (relaxed: a picture). */
static void group_describe(struct serex__reg *r, struct serex__dump *d)
{
    const serex_group *g = r->obj;
    uint64_t v = atomic_load_explicit(&g->state, memory_order_relaxed);

    serex__dump_u64(d, "members", MEMBERS(v));
    serex__dump_u64(d, "waiters", STATE_WAITERS(v));
}

static const struct serex__reg_class group_reg = {"group", group_describe};

/* A group with no token, not registered yet; NULL if out of memory. */
static serex_group *group_new(void)
{
    serex_group *g = serex__calloc_aligned(SEREX__CACHELINE, sizeof *g);

    if (g == NULL)
        return NULL;
    atomic_init(&g->state, 0);
    atomic_init(&g->pend, 0);
    atomic_init(&g->closed, false);
    atomic_init(&g->gen, 0);
    atomic_init(&g->lock, 0);
    atomic_init(&g->entered, 0);
    atomic_init(&g->error, 0);
    atomic_init(&g->nerrors, 0);
    g->list_tail = &g->list;
    g->due_tail = &g->due;
    return g;
}

int serex_group_create(serex_group **out)
{
    serex_group *g;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    g = group_new();
    if (g == NULL)
        return SEREX_ENOMEM;
    serex__reg_add(&g->reg, &group_reg, g, NULL);
    *out = g;
    return SEREX_OK;
}

int serex_group_create_config(const serex_group_config *cfg, serex_group **out)
{
    serex_group_config c = {0};
    serex_group *g;
    int rc, cause;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    if (cfg != NULL)
        c = *cfg;
    if ((c.flags & ~(unsigned)SEREX_GROUP_FAIL_FAST) != 0)
        return SEREX_EINVAL;
    g = group_new();
    if (g == NULL)
        return SEREX_ENOMEM;
    rc = serex_cancel_create(c.parent, &g->token);
    if (rc != SEREX_OK) {
        serex__free(g);
        return rc;
    }
    g->fail_fast = (c.flags & SEREX_GROUP_FAIL_FAST) != 0;
    g->hook.fire = group_token_fire;
    cause = serex__cancel_hook_add(g->token, &g->hook);
    if (cause != 0) /* born cancelled (its parent was): closed at once */
        group_token_fire(&g->hook, cause);
    else
        g->hooked = true;
    serex__reg_add(&g->reg, &group_reg, g, NULL);
    *out = g;
    return SEREX_OK;
}

void serex_group_close(serex_group *g)
{
    if (g != NULL)
        group_close_now(g);
}

void serex_group_fail(serex_group *g, int err)
{
    if (g == NULL || err >= 0 || err < SEREX_ERROR_MIN)
        return;
    group_report(g, err);
}

int serex_group_error(serex_group *g)
{
    /* acquire: pairs with the reporter's release */
    return g == NULL ? 0
                     : atomic_load_explicit(&g->error, memory_order_acquire);
}

size_t serex_group_error_count(serex_group *g)
{
    /* relaxed: a count; exact once the group is empty and waited for */
    return g == NULL ? 0
                     : atomic_load_explicit(&g->nerrors, memory_order_relaxed);
}

serex_cancel *serex_group_token(serex_group *g)
{
    return g == NULL ? NULL : g->token;
}

void serex_group_destroy(serex_group *g)
{
    uint64_t old;

    if (g == NULL)
        return;
    serex__reg_remove(&g->reg); /* off the list before anything goes */
    if (g->hooked)              /* waits for a fire in progress */
        serex__cancel_hook_remove(g->token, &g->hook);
    g->hooked = false;
    serex_cancel_release(g->token);
    g->token = NULL;
    /* acq_rel: as group_unref (whoever takes R to 0 with DETACHED frees) */
    old = atomic_fetch_or_explicit(&g->state, DETACHED, memory_order_acq_rel);
    if (MEMBERS(old) != 0)
        serex__misuse("serex_group_destroy",
                      "the group is not empty (tasks or enters are still in "
                      "it): serex_group_wait for it first");
    if (STATE_WAITERS(old) != 0)
        serex__misuse("serex_group_destroy",
                      "a thread is still inside serex_group_wait");
    if (old & DETACHED)
        serex__misuse("serex_group_destroy", "group destroyed twice");
    if (REFS(old) == 0)
        group_free(g);
}

/* The refused submission of a task that joined in epoch @e is taken back:
 * true if so; false if a cancel counted it first (it was accepted and
 * cancelled). The caller then leaves. */
static bool group_unjoin(serex_group *g, uint32_t e)
{
    return group_claim(g, e);
}

int serex_group_execute(serex_group *g, serex_executor *ex, serex_fn fn,
                        void *arg)
{
    struct group_task *t;
    bool kept;
    int rc;

    if (g == NULL || ex == NULL || ex->ops == NULL || fn == NULL)
        return SEREX_EINVAL;
    /* acquire: pairs with close's release */
    if (serex__unlikely(atomic_load_explicit(&g->closed, memory_order_acquire)))
        return SEREX_EREJECTED;
    t = serex__cache_alloc(SEREX__CLASS_64);
    if (serex__unlikely(t == NULL))
        return SEREX_ENOMEM;
    if (serex__unlikely(!group_join(g))) {
        serex__cache_free(SEREX__CLASS_64, t);
        return SEREX_EFULL;
    }
    t->r.op.cls = &task_class;
    t->r.g = g;
    t->r.arg = arg;
    t->r.epoch = group_join_pend(g);
    t->fn = fn;
    rc = serex__op_submit(ex, &t->r.op);
    if (serex__likely(rc == SEREX_OK))
        return SEREX_OK;
    kept = group_unjoin(g, t->r.epoch);
    serex__cache_free(SEREX__CLASS_64, t);
    group_leave_member(g);
    return kept ? rc : SEREX_OK; /* else accepted, and cancelled */
}

int serex_group_submit(serex_group *g, serex_executor *ex, serex_call_fn fn,
                       void *arg, serex_future **out)
{
    struct group_rec *r;
    serex_future *f;
    serex_fn task;
    int rc;

    if (out == NULL)
        return SEREX_EINVAL;
    *out = NULL;
    if (g == NULL || ex == NULL || ex->ops == NULL || fn == NULL)
        return SEREX_EINVAL;
    /* acquire: pairs with close's release */
    if (serex__unlikely(atomic_load_explicit(&g->closed, memory_order_acquire)))
        return SEREX_EREJECTED;
    f = serex__future_new(ex, NULL, fn, arg, &task);
    if (serex__unlikely(f == NULL))
        return SEREX_ENOMEM;
    /* the record runs and drops it as an internal operation */
    SEREX_ASSERT(task == serex__op_run);
    r = serex__cache_alloc(SEREX__CLASS_32);
    if (serex__unlikely(r == NULL)) {
        serex__future_abort(f);
        return SEREX_ENOMEM;
    }
    if (serex__unlikely(!group_join(g))) {
        serex__cache_free(SEREX__CLASS_32, r);
        serex__future_abort(f);
        return SEREX_EFULL;
    }
    *r = (struct group_rec){{&future_rec_class}, g, f, group_join_pend(g)};
    rc = serex__op_submit(ex, &r->op);
    if (serex__unlikely(rc != SEREX_OK)) {
        bool kept = group_unjoin(g, r->epoch);

        serex__cache_free(SEREX__CLASS_32, r);
        if (kept) {
            serex__future_abort(f);
            group_leave_member(g);
            return rc;
        }
        /* accepted, and cancelled: the future says so */
        group_hand_back(g, task, f, NULL, NULL);
        group_leave_member(g);
    }
    *out = f;
    return SEREX_OK;
}

void serex_group_enter(serex_group *g)
{
    if (g == NULL)
        return;
    if (!group_join(g))
        serex__misuse("serex_group_enter", "more than 2^31 members");
    /* relaxed: only leave reads it, for its misuse check, and a leave
     * happens after its enter */
    atomic_fetch_add_explicit(&g->entered, 1, memory_order_relaxed);
}

void serex_group_leave(serex_group *g)
{
    if (g == NULL)
        return;
    /* relaxed: as in enter */
    if (atomic_fetch_sub_explicit(&g->entered, 1, memory_order_relaxed) == 0)
        serex__misuse("serex_group_leave",
                      "leave without a matching serex_group_enter");
    group_leave_member(g);
}

/* Counts us among the waiters unless the group is empty: returns whether
 * we were counted; *@v is the value last seen. */
static bool group_count_waiter(serex_group *g, uint64_t *v)
{
    while (!state_empty(*v) && STATE_WAITERS(*v) < W_MAX)
        /* relaxed: the modification order of `state` alone decides
         * whether an emptier sees us (see the essay) */
        if (atomic_compare_exchange_weak_explicit(&g->state, v, *v + W_UNIT,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed))
            return true;
    return false;
}

static int group_wait_slow(serex_group *g, int64_t timeout_ns)
{
    int64_t deadline = serex__deadline(timeout_ns);
    /* relaxed: a first guess for the CAS */
    uint64_t v = atomic_load_explicit(&g->state, memory_order_relaxed);
    bool counted = group_count_waiter(g, &v);
    int rc;

    for (;;) {
        /* acquire (both): gen pairs with group_wake's bump, so a bump we
         * read makes its emptying visible to the load of state; state
         * pairs with the leaves' releases (the tasks' writes) */
        uint32_t seen = atomic_load_explicit(&g->gen, memory_order_acquire);
        int64_t until = deadline;

        if (state_empty(
                atomic_load_explicit(&g->state, memory_order_acquire))) {
            rc = SEREX_OK;
            break;
        }
        if (!counted && deadline - serex__now_ns() > POLL_NS)
            until = serex__now_ns() + POLL_NS;
        if (serex__park_wait(&g->gen, seen, until) == SEREX_ETIMEDOUT &&
            until == deadline) {
            /* acquire: as above */
            rc = state_empty(
                     atomic_load_explicit(&g->state, memory_order_acquire))
                     ? SEREX_OK
                     : SEREX_ETIMEDOUT;
            break;
        }
    }
    if (counted) /* relaxed: leaving only stops wake-ups meant for us */
        atomic_fetch_sub_explicit(&g->state, W_UNIT, memory_order_relaxed);
    return rc;
}

int serex_group_wait(serex_group *g, int64_t timeout_ns)
{
    int rc;

    if (g == NULL || !serex__timeout_valid(timeout_ns))
        return SEREX_EINVAL;
    if (group_running(g))
        return SEREX_EDEADLK; /* our own task keeps the group busy */
    /* acquire: pairs with the leaves' releases (the tasks' writes) */
    if (state_empty(atomic_load_explicit(&g->state, memory_order_acquire)))
        rc = SEREX_OK;
    else if (timeout_ns == 0)
        return SEREX_ETIMEDOUT;
    else
        rc = group_wait_slow(g, timeout_ns);
    /* empty: the outcome is its first error, if one was reported */
    return rc == SEREX_OK ? serex_group_error(g) : rc;
}

int serex_group_notify(serex_group *g, serex_executor *target, serex_fn fn,
                       void *arg)
{
    struct note *n;
    bool now = false, post = false;
    uint64_t v;

    if (g == NULL || target == NULL || target->ops == NULL || fn == NULL)
        return SEREX_EINVAL;
    n = serex__cache_alloc(SEREX__CLASS_64);
    if (serex__unlikely(n == NULL))
        return SEREX_ENOMEM;
    *n = (struct note){{&note_class}, NULL, target, fn, arg};
    serex__spin_lock(&g->lock);
    /* acquire: if the group is empty, its tasks' writes are visible to
     * what we post (pairs with the leaves' releases) */
    v = atomic_load_explicit(&g->state, memory_order_acquire);
    for (;;) {
        if (MEMBERS(v) == 0 && !(v & NOTIFY)) {
            now = true; /* empty, or only handing out: due now */
            if (v & POSTING)
                break; /* that poster posts it, after the ones before */
            /* ours to post: POSTING (the group is not empty to wait
             * until it is handed out) and a reference (a notification run
             * here may destroy the group), in one CAS that sees A == 0.
             * acq_rel: as the load; acquire on failure, as the load */
            if (atomic_compare_exchange_weak_explicit(
                    &g->state, &v, v + R_UNIT + POSTING, memory_order_acq_rel,
                    memory_order_acquire)) {
                post = true;
                break;
            }
            continue;
        }
        if (v & NOTIFY)
            break; /* list not empty: its emptier will see NOTIFY */
        /* release: the emptier that sees NOTIFY (acq_rel fetch_sub) then
         * takes the lock after our critical section; acquire on failure,
         * as the load */
        if (atomic_compare_exchange_weak_explicit(&g->state, &v, v | NOTIFY,
                                                  memory_order_acq_rel,
                                                  memory_order_acquire))
            break;
    }
    if (now)
        note_append(&g->due_tail, n);
    else
        note_append(&g->list_tail, n);
    serex__spin_unlock(&g->lock);
    if (post) {
        group_post(g);
        group_unref(g);
    }
    return SEREX_OK;
}

size_t serex_group_cancel(serex_group *g)
{
    uint64_t v;

    if (g == NULL)
        return 0;
    /* relaxed: a first guess for the CAS */
    v = atomic_load_explicit(&g->pend, memory_order_relaxed);
    do {
        if ((v & P_MASK) == 0)
            return 0; /* nothing to cancel: the epoch stays */
        /* relaxed: the word's modification order decides each task's
         * race between its claim and this CAS (see the essay) */
    } while (!atomic_compare_exchange_weak_explicit(
        &g->pend, &v, ((v >> EPOCH_SHIFT) + 1) << EPOCH_SHIFT,
        memory_order_relaxed, memory_order_relaxed));
    return (size_t)(v & P_MASK);
}

void serex__group_counts(serex_group *g, struct serex__group_counts *out)
{
    /* relaxed (both): a snapshot for tests */
    uint64_t v = atomic_load_explicit(&g->state, memory_order_relaxed);
    uint64_t p = atomic_load_explicit(&g->pend, memory_order_relaxed);

    out->members = MEMBERS(v);
    out->not_started = p & P_MASK;
    out->refs = REFS(v);
    out->waiters = STATE_WAITERS(v);
    out->notify = (v & NOTIFY) != 0;
    out->posting = (v & POSTING) != 0;
}
