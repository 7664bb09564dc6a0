/*
 * sched_batch.pml - a batch of timer runs (src/scheduler.c, "Batches: one
 * task per target per fire") racing cancels and handle releases.
 *
 * NT timers came due in one fire onto one target and were linked into one
 * batch, in order: link[0] = 1, link[1] = 2, ... (batch_next, overlaying
 * the wheel's pprev). Each is QUEUED, and its user holds a handle. Timer
 * PER (if PER < NT) is periodic; the others are one-shots.
 *
 * Processes:
 *  - the batch's owner. The target decides once what becomes of the task,
 *    as any executor does: it runs it (timer_run: run_timer on each run in
 *    turn), takes it back or drops it (timer_run_dropped: each run settled,
 *    a one-shot's task handed to on_pending if it was still QUEUED), or,
 *    with REFUSE, refused the submission (batch_dispatch then walks the
 *    batch itself: run_refused on each, a one-shot to on_rejected if
 *    still QUEUED, a periodic one re-armed from QUEUED as a missed run,
 *    SEREX_REFUSED_MISS). Each walk takes a record's link and clears it
 *    (batch_take_next) before it runs, re-arms or settles the record.
 *  - one user per timer: cancels it at any moment, or never
 *    (serex_timer_cancel: a QUEUED or RUNNING periodic run stopped by a
 *    CAS to STOPPED; a RUNNING one-shot is too late; PENDING, back in the
 *    wheel, is cancelled under the shard lock to DONE), then releases its
 *    handle (serex_timer_release: frees a DONE record, else clears HANDLE
 *    by CAS, leaving the free to whoever makes it DONE).
 *  - with REFIRE, the timer thread's next fire: the periodic timer, once
 *    re-armed (PENDING) by the first batch, may come due again at any
 *    moment and go out alone in a new batch (its link rewritten), which
 *    the target again runs, takes back or refuses, while the first
 *    batch's owner may still be walking.
 * settle (settle_into: the CAS loop to DONE, lock-free in C) is one
 * step; the free of a record with no handle is one more, made at once
 * for a refused run (sched_settle) and at the end of the owner's walk for
 * a run or a drop (settle_flush: the batch gathers its records and frees
 * them under one lock); so is each CAS, and the load before a
 * CAS is merged with it where a failed CAS only leads to looking again.
 * A record's state and HANDLE share the tag word in C; a CAS on one that
 * fails because the other changed retries with the same outcome, so they
 * are two variables here.
 *
 *  - with WAITER, each user may instead cancel and wait
 *    (serex_timer_cancel_wait: the cancel, then, while a run is in
 *    progress - RUNNING or STOPPING - the WAITERS mark by CAS and a park
 *    on the word, which sleeps only if the word still reads what it
 *    expects and wakes only by the settle's wake) or cancel and notify
 *    (serex_timer_cancel_notify: under the shard lock, the continuation
 *    filed and the mark set if a run is in progress, else posted at
 *    once). A run's settle that reads the mark goes slow (settle_waited:
 *    under the lock, DONE, the mark cleared, the filed continuation
 *    taken; then the wake, then the post). A run is "in progress" (a
 *    ghost) from its start to its task's return, a step of its own.
 *  - with TOKEN, a token cancelled at any moment, or never, fires each
 *    timer's hook in turn (tok_stop: under the shard lock, PENDING ->
 *    DONE out of the wheel, QUEUED -> STOPPED, a periodic RUNNING ->
 *    STOPPING; a PENDING one that no handle holds is the fire's to free:
 *    its own hook removed at once, then the record). Every free removes
 *    the record's hook first, and a remove waits while its fire is under
 *    way (hook FIRING).
 *
 * Properties (assertions):
 *  - no access to a freed record, by the owner (the chain is intact until
 *    walked), the users or the frees (no double free);
 *  - a cancel that said true is never followed by a run that starts;
 *  - each one-shot ends exactly once: it ran, was handed back, was
 *    refused, or a cancel said true (exactly one of these);
 *  - at the end every record is freed exactly once, unless it is a
 *    periodic timer back in its wheel (PENDING), which is not freed;
 *  - WAITER: when a cancel_wait returns, and when a notify's continuation
 *    is posted, no run is in progress, and no run starts after; each
 *    notify is posted exactly once; no waiter sleeps for ever (spin's
 *    invalid end states);
 *  - TOKEN: no record is freed with its hook still on the token (or its
 *    fire under way), no hook is removed twice, and a one-shot the token
 *    stopped ends by that (the sum above counts it).
 *
 * Mutations (each must make spin find a violation):
 *  MUT_LINK_AFTER     the owner reads a record's link after running or
 *                     settling it (a use after free; with REFIRE also a
 *                     link the next fire rewrote: the rest of the batch
 *                     is lost)
 *  MUT_CANCEL_FREES   cancel of a QUEUED run settles it at once (DONE, so
 *                     the release frees it) instead of STOPPED: the batch
 *                     still links to it
 *  MUT_DROP_NO_STATE  the hand-back passes every one-shot's task on,
 *                     without asking whether cancel stopped it
 *  MUT_GATHER_HELD    a run's settle gathers its record for the batch's
 *                     free even while the user holds a handle (whose
 *                     release frees a DONE record too)
 *  MUT_STOPPING_IDLE  (WAITER) a periodic run stopped while RUNNING reads
 *                     as not in progress (only RUNNING does, as if it
 *                     were STOPPED): the wait returns while it runs
 *  MUT_NO_WAKE        (WAITER) the slow settle does not wake the parked:
 *                     a waiter sleeps for ever
 *  MUT_NOTIFY_SPLIT   (WAITER) notify looks at the state and files its
 *                     continuation in two steps (the settle's lock-free
 *                     CAS between them): the continuation is lost
 *  MUT_FREE_HOOKED    (TOKEN) a batch frees what it gathered without
 *                     removing the hooks: the fire touches a freed record
 *  MUT_FIRE_FREES_HELD (TOKEN) the fire frees a PENDING record even while
 *                     a handle holds it: freed twice
 *
 * Check (scripts/check_model.sh runs its configurations the same way):
 *   spin -a -DNT=3 -DPER=1 sched_batch.pml
 *   gcc -O1 -w -DSAFETY -o pan pan.c && ./pan -m200000 -w24
 * Configurations and what they give: see tests/model/README.md and
 * scripts/check_model.sh (sched-*).
 */
#ifndef NT
#define NT 3
#endif
#ifndef PER
#define PER 1 /* the periodic timer's index; NT or more: none */
#endif
#ifndef REFUSE
#define REFUSE 0
#endif
#ifndef REFIRE
#define REFIRE 0
#endif
#ifndef WAITER
#define WAITER 0
#endif
#ifndef TOKEN
#define TOKEN 0
#endif

#define NIL 255

/* states (the low bits of the tag) */
#define PENDING 0
#define QUEUED 1
#define RUNNING 2
#define STOPPED 3
#define DONE 4
#define STOPPING 5

/* hook states (TOKEN) */
#define LINKED 0
#define FIRING 1
#define FIRED 2
#define REMOVED 3

byte st[NT];
bit handle[NT];
byte link[NT];
byte freed[NT];       /* ghost: frees of the record */
byte ran[NT];         /* ghost: runs started */
byte handed[NT];      /* ghost: passed to on_pending */
byte rejected[NT];    /* ghost: passed to on_rejected */
bit cancel_true[NT];  /* ghost: a cancel returned true */
byte finished;        /* ghost: users and firer done */
byte owners = 1;      /* ghost: batches out (the first, and a re-fire) */
byte owners_done;     /* ghost: batches whose walk ended */
byte gathered[NT];    /* the owner (pid + 1) that frees it at its end */
bit waiters[NT];      /* WAITER: the mark (F_WAITERS) */
bit inprog[NT];       /* ghost: a run started and not returned */
bit closed[NT];       /* ghost: a wait said OK or a notify was posted */
bit filed[NT];        /* a notify on the shard's list */
bit parked[NT];       /* a cancel_wait asleep on the word */
byte notified[NT];    /* ghost: continuations posted */
bit asked[NT];        /* ghost: the user called cancel_notify */
byte hook[NT];        /* TOKEN: LINKED, FIRING, FIRED, REMOVED */
bit tok_stopped[NT];  /* ghost: the token stopped a one-shot's run */

#define periodic(r) ((r) == PER)
#ifndef MUT_STOPPING_IDLE
#define in_progress(r) (st[r] == RUNNING || st[r] == STOPPING)
#else
#define in_progress(r) (st[r] == RUNNING)
#endif

inline touch(r)
{
    assert(freed[r] == 0)
}

inline do_free(r)
{
#if TOKEN
    assert(hook[r] == REMOVED);
#endif
    freed[r]++;
    assert(freed[r] == 1)
}

/* serex__cancel_hook_remove before a free: waits while the fire is under
 * way (its remove from inside the fire is the fire's own step) */
inline remove_hook(r)
{
#if TOKEN
    atomic {
        hook[r] != FIRING ->
        assert(hook[r] != REMOVED);
        hook[r] = REMOVED
    }
#else
    skip
#endif
}

/* The continuation is posted: no run in progress, none to start. */
inline post_notify(r)
{
    atomic {
        assert(!inprog[r]);
        notified[r]++;
        closed[r] = 1
    }
}

/* settle_into: DONE from any state but PENDING; the state it had goes to
 * @old. With no handle the record is ours to free: at once (@later 0:
 * sched_settle), or gathered and freed at the end of the walk (@later 1:
 * settle_flush). */
inline settle_done(r, old)
{
    old = st[r];
    assert(old != DONE && old != PENDING);
    st[r] = DONE;
    if
    :: !handle[r] -> gathered[r] = _pid + 1
#ifdef MUT_GATHER_HELD
    :: handle[r] -> gathered[r] = _pid + 1
#endif
    :: else -> skip
    fi
}

/* settle_flush: removes the hooks of what this owner gathered (no lock
 * held: a remove may wait for a fire), then frees them (under the shard
 * lock in C: one step) */
inline flush()
{
#if TOKEN && !defined(MUT_FREE_HOOKED)
    k = 0;
    do
    :: k < NT ->
        if
        :: gathered[k] == _pid + 1 -> remove_hook(k)
        :: else -> skip
        fi;
        k++
    :: else -> break
    od;
#endif
    atomic {
        k = 0;
        do
        :: k < NT ->
            if
            :: gathered[k] == _pid + 1 ->
                gathered[k] = 0;
#if TOKEN && defined(MUT_FREE_HOOKED)
                hook[k] = REMOVED; /* freed as if removed: it is not */
#endif
                do_free(k)
            :: else -> skip
            fi;
            k++
        :: else -> break
        od
    }
}

/* settle_into: the CAS to DONE, or, with the mark, settle_waited (under
 * the lock: DONE, the mark cleared, the filed continuation taken; then
 * the wake; then the post). The records with no handle are gathered, and
 * freed by flush (at once for a refused run: @later 0). */
inline settle(r, old, later)
{
    atomic {
        touch(r);
        if
        :: WAITER && waiters[r] -> slow = 1
        :: else -> slow = 0; settle_done(r, old)
        fi
    }
    if
    :: slow ->
        atomic {
            touch(r);
            settle_done(r, old);
            waiters[r] = 0;
            took = filed[r];
            filed[r] = 0
        };
#ifndef MUT_NO_WAKE
        parked[r] = 0; /* the wake, by address */
#endif
        if
        :: took -> post_notify(r)
        :: else -> skip
        fi
    :: else -> skip
    fi;
    if
    :: !later -> flush()
    :: else -> skip
    fi
}

/* rearm: back into the wheel if the state is still @from; else false.
 * Under the shard lock in C: one step. */
inline rearm(r, from, ok)
{
    atomic {
        touch(r);
        if
        :: st[r] == from -> st[r] = PENDING; ok = 1
        :: else -> ok = 0
        fi
    }
}

/* run_timer */
inline run_one(r)
{
    atomic { /* the CAS QUEUED -> RUNNING: the run starts, or not */
        touch(r);
        if
        :: st[r] == QUEUED ->
            st[r] = RUNNING; started = 1;
            assert(!cancel_true[r] && !closed[r]); ran[r]++;
            inprog[r] = WAITER /* without waiters, it returns at once */
        :: else -> started = 0
        fi
    }
    if
    :: started ->
#if WAITER
        inprog[r] = 0; /* the task returns: a step of its own */
#endif
        if
        :: periodic(r) ->
            rearm(r, RUNNING, ok);
            if
            :: !ok -> settle(r, old, 1)
            :: else -> skip
            fi
        :: else -> settle(r, old, 1)
        fi
    :: else -> settle(r, old, 1) /* stopped */
    fi
}

/* timer_run_dropped's step for one run */
inline drop_one(r)
{
    settle(r, old, 1);
#ifndef MUT_DROP_NO_STATE
    if
    :: old == QUEUED && !periodic(r) -> handed[r]++
    :: else -> skip
    fi
#else
    if
    :: !periodic(r) -> handed[r]++
    :: else -> skip
    fi
#endif
}

/* run_refused (a full target, SEREX_REFUSED_MISS) */
inline refuse_one(r)
{
    ok = 0;
    if
    :: periodic(r) -> rearm(r, QUEUED, ok) /* run_missed */
    :: else -> skip
    fi;
    if
    :: !ok ->
        settle(r, old, 0);
        if
        :: old == QUEUED && !periodic(r) -> rejected[r]++
        :: else -> skip
        fi
    :: else -> skip
    fi
}

proctype owner(byte first)
{
    byte r = first, nx, how, old, k;
    bit started, ok, slow, took;

    if
    :: how = 0 /* the target runs the batch */
    :: how = 1 /* it takes it back (shutdown_now) or drops it */
#if REFUSE
    :: how = 2 /* it refused the submission */
#endif
    fi;
    do
    :: r == NIL -> break
    :: else ->
#ifndef MUT_LINK_AFTER
        atomic { touch(r); nx = link[r]; link[r] = NIL };
#endif
        if
        :: how == 0 -> run_one(r)
        :: how == 1 -> drop_one(r)
        :: how == 2 -> refuse_one(r)
        fi;
#ifdef MUT_LINK_AFTER
        atomic { touch(r); nx = link[r]; link[r] = NIL };
#endif
        r = nx
    od;
    flush();
    owners_done++
}

#if REFIRE
/* The timer thread's next fire: the periodic timer, re-armed by a run or
 * a miss of the first batch, comes due again (at once: any moment) and
 * goes out alone in a new batch, which rewrites its link - while the
 * first batch's owner may still be walking. Or it never does. */
proctype firer()
{
    do
    :: atomic {
           st[PER] == PENDING ->
           st[PER] = QUEUED; link[PER] = NIL; owners++;
           run owner(PER)
       };
       break
    :: owners_done > 0 -> break /* the first batch ended: no more */
    od;
    finished++
}
#endif

/* serex_timer_cancel (one step: a CAS, or PENDING under the lock) */
inline cancel_step(r)
{
    do
    :: atomic {
           touch(r);
           if
           :: st[r] == PENDING -> /* cancel_pending, under the lock */
               st[r] = DONE; cancel_true[r] = 1; done_cancel = 1
           :: st[r] == RUNNING && !periodic(r) -> done_cancel = 1
           :: (st[r] == QUEUED) || (st[r] == RUNNING && periodic(r)) ->
#ifndef MUT_CANCEL_FREES
               if
               :: st[r] == QUEUED -> st[r] = STOPPED
               :: else -> st[r] = STOPPING
               fi;
#else
               if
               :: st[r] == QUEUED -> st[r] = DONE
               :: else -> st[r] = STOPPING
               fi;
#endif
               cancel_true[r] = 1; done_cancel = 1
           :: st[r] == STOPPED || st[r] == DONE || st[r] == STOPPING ->
               done_cancel = 1
           fi
       }
    :: done_cancel -> break
    od
}

#if WAITER
/* serex_timer_cancel_wait's wait: the look; the mark by CAS; the park
 * (sleeps only if the word still reads the marked value, wakes only by
 * the settle's wake) */
inline wait_step(r)
{
    do
    :: atomic {
           touch(r);
           if
           :: !in_progress(r) ->
               assert(!inprog[r]); closed[r] = 1; waited = 1
           :: else -> waiters[r] = 1; expect = st[r]
           fi
       };
       if
       :: waited -> break
       :: else ->
           atomic { /* park_wait64: the re-read under the bucket lock */
               if
               :: st[r] == expect && waiters[r] -> parked[r] = 1
               :: else -> skip
               fi
           };
           parked[r] == 0 /* asleep until woken */
       fi
    od
}

/* serex_timer_cancel_notify's filing, under the shard lock */
inline notify_step(r)
{
    asked[r] = 1;
#ifndef MUT_NOTIFY_SPLIT
    atomic {
        touch(r);
        if
        :: !in_progress(r) -> post_notify(r)
        :: else -> waiters[r] = 1; filed[r] = 1
        fi
    }
#else
    atomic { touch(r); expect = in_progress(r) };
    atomic {
        if
        :: !expect -> post_notify(r)
        :: else -> waiters[r] = 1; filed[r] = 1
        fi
    }
#endif
}
#endif

proctype user(byte r)
{
    bit done_cancel, waited, will_free;
    byte expect;

    /* a cancel at any moment (then, with WAITER, maybe a wait or a
     * notify), or none */
    if
    :: true -> cancel_step(r)
#if WAITER
    :: true -> cancel_step(r); wait_step(r)
    :: true -> cancel_step(r); notify_step(r)
#endif
    :: true -> skip
    fi;
    /* serex_timer_release: free if DONE (its hook off first), else clear
     * HANDLE (one CAS on the word: the state is read with it) */
    atomic {
        touch(r);
        if
        :: st[r] == DONE -> will_free = 1
        :: else -> will_free = 0
        fi;
        handle[r] = 0
    };
    if
    :: will_free -> remove_hook(r); atomic { touch(r); do_free(r) }
    :: else -> skip
    fi;
    finished++
}

#if TOKEN
/* The token is cancelled at any moment, or never: its request fires each
 * hook still on it, in turn (tok_stop under the shard lock; a PENDING
 * record no handle holds is the fire's: its own hook off at once, then
 * the free), and marks each fire returned. */
proctype token()
{
    byte r = 0;
    bit f, mine;

    if
    :: true ->
        do
        :: r < NT ->
            atomic {
                if
                :: hook[r] == LINKED -> hook[r] = FIRING; f = 1
                :: else -> f = 0
                fi
            };
            if
            :: f ->
                atomic {
                    touch(r);
                    mine = 0;
                    if
                    :: st[r] == PENDING ->
                        st[r] = DONE;
#ifndef MUT_FIRE_FREES_HELD
                        mine = !handle[r]
#else
                        mine = 1
#endif
                    :: st[r] == QUEUED ->
                        st[r] = STOPPED;
                        if
                        :: !periodic(r) -> tok_stopped[r] = 1
                        :: else -> skip
                        fi
                    :: st[r] == RUNNING && periodic(r) -> st[r] = STOPPING
                    :: else -> skip
                    fi
                };
                if
                :: mine ->
                    hook[r] = REMOVED; /* its own: at once */
                    atomic { touch(r); do_free(r) }
                :: else -> skip
                fi;
                atomic {
                    if
                    :: hook[r] == FIRING -> hook[r] = FIRED
                    :: else -> skip
                    fi
                }
            :: else -> skip
            fi;
            r++
        :: else -> break
        od
    :: true -> skip
    fi;
    finished++
}
#endif

init
{
    byte i;

    atomic {
        for (i : 0 .. NT - 1) {
            st[i] = QUEUED;
            handle[i] = 1;
            link[i] = (i + 1 < NT -> i + 1 : NIL)
        }
        run owner(0);
        for (i : 0 .. NT - 1) {
            run user(i)
        }
#if REFIRE
        run firer();
#endif
#if TOKEN
        run token();
#endif
    }
    (finished == NT + REFIRE + TOKEN && owners_done == owners);
    /* the end: every process done */
    for (i : 0 .. NT - 1) {
        if
        :: st[i] == PENDING -> assert(periodic(i) && freed[i] == 0)
        :: else -> assert(st[i] == DONE && freed[i] == 1)
        fi;
        if
        :: !periodic(i) ->
            assert(ran[i] + handed[i] + rejected[i] + cancel_true[i] +
                   tok_stopped[i] == 1) /* ends */
        :: else -> assert(ran[i] <= 1 + REFIRE && handed[i] == 0)
        fi;
        assert(notified[i] == asked[i] && !filed[i])
    }
}
