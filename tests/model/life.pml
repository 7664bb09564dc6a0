/*
 * life.pml - the lifetime helper (src/life_internal.h): the entry word
 * (flags and calls in flight) and the life word (holders and DETACHED),
 * as the wrappers and the pool use them.
 *
 * Processes: NPROD producers, each one call of execute: enter (read the
 * flags), refuse if closed, else queue a task and, if it is the first,
 * hold the object for a drain and start one; then leave. Drains run the
 * queued tasks and release their hold; a drain may also be dropped by its
 * target without running (DROP: it releases all the same). A destroyer
 * shuts the object (close), quiesces the entry, waits for the work to end
 * (await_termination) unless the target dropped a drain, then detaches.
 * No call begins after destroy does (a call that did would be the
 * caller's use after free); the ones that began before may be anywhere.
 * Every touch of the object by a producer, a drain or the destroyer
 * asserts that it is not freed yet; the one who frees asserts it frees
 * once; when nothing can move any more the object must have been freed
 * exactly once.
 *
 * What it proves, for these sizes: no touch after the free, no double
 * free, no leak. Mutations (each must make spin find a violation):
 *  MUT_HOLD_AFTER_LEAVE  a producer takes the drain's hold after leaving
 *                        its entry (the pool's defect: nothing counted
 *                        the execute still returning)
 *  MUT_NO_QUIESCE        destroy detaches without waiting for the calls
 *                        in flight
 *  MUT_FREE_ON_ZERO      release frees when holders reach 0, DETACHED or
 *                        not
 */
#ifndef NPROD
#define NPROD 2
#endif

bit shut;          /* the entry word's flag */
byte inflight;     /* the entry word's count */
byte holders;      /* the life word's count */
bit detached;      /* the life word's DETACHED */
byte queued;       /* tasks queued, not run */
bit dropped;       /* ghost: a drain was dropped by its target */
byte freed;        /* ghost: frees so far */
byte entered;      /* ghost: producers that have begun their call */

inline touch()
{
    assert(freed == 0)
}

inline do_free()
{
    freed++;
    assert(freed == 1)
}

/* serex__life_release: true when last holder and DETACHED */
inline release()
{
    atomic {
        touch();
        holders--;
#ifdef MUT_FREE_ON_ZERO
        if
        :: holders == 0 -> do_free()
        :: else -> skip
        fi
#else
        if
        :: holders == 0 && detached -> do_free()
        :: else -> skip
        fi
#endif
    }
}

proctype drain()
{
    if
    :: true ->   /* runs the tasks */
        do
        :: atomic { queued > 0 -> touch(); queued-- }
        :: atomic { queued == 0 -> break }
        od
    :: true ->   /* dropped by its target (DROP) */
        dropped = 1
    fi;
    release()
}

proctype producer()
{
    bit first;

    atomic { touch(); inflight++; entered++ }; /* serex__entry_enter */
    if
    :: shut ->
        atomic { touch(); inflight-- }         /* serex__entry_abort */
    :: else ->
        atomic { touch(); first = (queued == 0); queued++ };
#ifndef MUT_HOLD_AFTER_LEAVE
        if
        :: first -> atomic { touch(); holders++ }; run drain()
        :: else -> skip
        fi;
        atomic { touch(); inflight-- }         /* serex__entry_leave */
#else
        atomic { touch(); inflight-- };
        if
        :: first -> atomic { touch(); holders++ }; run drain()
        :: else -> skip
        fi
#endif
    fi
}

active proctype destroyer()
{
    atomic { touch(); shut = 1 };              /* serex__entry_close */
    /* No call begins after destroy (that is the caller's use after free):
     * the calls that race with it began before, and may be anywhere. */
    (entered == NPROD);
#ifndef MUT_NO_QUIESCE
    (inflight == 0);                           /* serex__entry_quiesce */
#endif
    /* await_termination (a drain may still be on its way out: it holds),
     * or a drain was dropped: the queued tasks are dropped instead */
    (queued == 0 || dropped);
    atomic { touch(); queued = 0 };
    atomic {                                   /* serex__life_detach */
        touch();
        detached = 1;
        if
        :: holders == 0 -> do_free()
        :: else -> skip
        fi
    }
}

init
{
    byte i = 0;

    atomic {
        do
        :: i < NPROD -> run producer(); i++
        :: else -> break
        od
    }
}

active proctype leakcheck()
{
    timeout -> assert(freed == 1)
}
