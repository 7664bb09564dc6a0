/*
 * cancel_reg.pml - the cancellation token's hooks and a registration's
 * life (src/cancel.c, the essay at its top): request against add,
 * remove and unregister, and the registration's state word (ARMED,
 * POSTED, DONE with the WAITERS and UNREG marks) between the thread that
 * runs the callback and the one that unregisters it.
 *
 * Processes:
 *  - the owner: on_cancel (hook_add under the lock: linked, or refused
 *    because the token is cancelled, then it posts the callback itself),
 *    then, unless INSIDE (the callback unregisters itself), unregister:
 *    hook_remove under the lock (linked: unlink, never fires: free);
 *    else wait, lock released, while `running` is this hook; then settle:
 *    CAS a WAITERS mark unless DONE, park until DONE, free.
 *  - NREQ requesters: under the lock, the first sets the cause; then it
 *    unlinks the hook, sets `running`, unlocks, fires (state := POSTED,
 *    post to the runner's queue), relocks, clears `running`.
 *  - the runner (the target executor): takes the posted callback, runs
 *    fn (with INSIDE: fn unregisters from inside: hook_remove finds the
 *    hook fired and `running` cleared or this thread's own fire; settle
 *    sees its own run and sets UNREG), then exchanges the state to DONE:
 *    if UNREG was set it frees the record.
 *
 * Abstractions: every critical section under the spinlock is one atomic
 * step; an atomic RMW is one step; a park is a blocking wait on its
 * condition (the parking lot re-reads the word under its lock, so no
 * wake-up is lost: park_internal.h); a post is a channel send (the
 * executor accepts it; refusals run it inline on the poster, the same
 * path from the record's point of view). Memory orders are left out.
 *
 * Properties:
 *  1. fn runs at most once, and only after the token was cancelled;
 *  2. the record is freed exactly once, and nothing touches it after
 *     (the runner's exchange, the unregister's CAS and park);
 *  3. unregister's answer: true only if fn never runs; false only once
 *     fn has returned (or from inside fn);
 *  4. at the end: freed, and, if cancelled and not unregistered first,
 *     fn ran.
 * Mutations (-D): MUT_NO_RUNNING_WAIT (remove does not wait for a fire
 * in progress), MUT_FREE_BEFORE_DONE (settle frees without waiting for
 * DONE), MUT_RUNNER_NO_UNREG (the runner ignores UNREG: a leak, caught by
 * the end check).
 */

#ifndef NREQ
#define NREQ 2
#endif
#ifndef INSIDE
#define INSIDE 0
#endif

#define ARMED 0
#define POSTED 1
#define DONE 2
#define WAITERS 4
#define UNREG 8

bit lock = 0;
bit cancelled = 0;
bit linked = 0;
bit running = 0;        /* the token's `running` is our hook */
byte state = ARMED;     /* the record's word */
bit freed = 0;
byte frees = 0;
byte ran = 0;
bit fn_done = 0;
bit answered = 0;
bit answer = 0;
bit unreg_started = 0;
bit sleeping = 0;
chan post = [1] of { bit };

inline lock_acquire() { atomic { lock == 0 -> lock = 1 } }
inline lock_release() { lock = 0 }

inline rec_free() {
    assert(!freed);
    freed = 1;
    frees++
}

/* unregister's settle: wait for DONE or hand the free to fn. The park
 * is the parking lot's: it sleeps only if the word still holds what was
 * seen, and a sleeper wakes only by a wake (the runner's, if it saw
 * WAITERS in the word it exchanged): a lost wake-up blocks for ever. */
inline settle(inside) {
    byte seen;
    do
    :: atomic {
           assert(!freed);
           if
           :: (state & 3) == DONE -> break
           :: else ->
               if
               :: inside -> state = state | UNREG; goto settled_inside
               :: else -> state = state | WAITERS; seen = state
               fi
           fi
       }
#ifndef MUT_FREE_BEFORE_DONE
       atomic {
           if
           :: state != seen -> skip   /* changed: no sleep */
           :: else -> sleeping = 1
           fi
       }
       sleeping == 0
#else
       break
#endif
    od;
    rec_free();
settled_inside:
    skip
}

/* unregister: the remove, then settle (inside: from fn) */
inline unregister(inside) {
    bit removed = 0;
    unreg_started = 1;
    lock_acquire();
    if
    :: linked -> linked = 0; removed = 1
    :: else -> skip
    fi;
    lock_release();
#ifndef MUT_NO_RUNNING_WAIT
    if
    :: !removed -> running == 0  /* wait for a fire in progress */
    :: else -> skip
    fi;
#endif
    if
    :: removed ->
        rec_free();
        answer = 1
    :: else ->
        settle(inside);
        /* (3): false only once fn has returned, or from inside it */
        assert(inside || fn_done);
        answer = 0
    fi;
    answered = 1
}

proctype owner()
{
    /* on_cancel: add the hook, or post ourselves */
    atomic {
        lock == 0 ->
        if
        :: !cancelled -> linked = 1
        :: else -> state = POSTED; post ! 1
        fi
    }
#if !INSIDE
    unregister(0);
#endif
}

proctype requester()
{
    bit first = 0;
    lock_acquire();
    if
    :: !cancelled -> cancelled = 1; first = 1
    :: else -> skip
    fi;
    if
    :: first && linked -> linked = 0; running = 1; lock_release();
        /* fire: POSTED (a plain store: only the fire writes the word
         * before the post, as unregister waits for the fire), then post */
        atomic { assert(!freed); state = POSTED };
        post ! 1;
        lock_acquire(); running = 0; lock_release()
    :: else -> lock_release()
    fi
}

proctype runner()
{
    byte old;
end_idle:
    post ? _;
    assert(cancelled);
    atomic { assert(!freed); ran++ };
    assert(ran == 1);
#if INSIDE
    unregister(1);
#endif
    fn_done = 1;
    atomic {
        assert(!freed);
        old = state;
        state = DONE
    }
#ifndef MUT_RUNNER_NO_UNREG
    if
    :: old & UNREG -> rec_free()
    :: old & WAITERS -> sleeping = 0 /* the wake */
    :: else -> skip
    fi
#else
    if
    :: old & WAITERS -> sleeping = 0
    :: else -> skip
    fi
#endif
}

init {
    atomic {
        run owner();
        byte i = 0;
        do
        :: i < NREQ -> run requester(); i++
        :: else -> break
        od;
        run runner()
    }
    /* (4), once nothing else can move: freed once, answered, and fn ran
     * exactly when it was not taken back first */
    timeout ->
    assert(frees == 1 && answered);
    assert(answer == 1 -> ran == 0 : ran == 1)
}
