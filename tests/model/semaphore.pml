/*
 * semaphore.pml - the semaphore's waiters (src/semaphore.c, its essay "A
 * waiter's life"): grant, close and the token's fire racing to complete a
 * waiter; the record's end (the hook's removal before the free); the
 * semaphore's end (destroy after the last waiter, while fires may still
 * come).
 *
 * Processes:
 *  - NW acquirers, waiter w asking N(w) permits, with the shared token if
 *    TOK(w): the early look at `closed`; the hook's add (refused when the
 *    token is cancelled: posted with the cause at once); under the lock,
 *    sem_enter_locked (closed; or the CAS INIT -> TAKEN with the permits
 *    when no live waiter is parked and they fit; or the CAS INIT ->
 *    WAITING and the link; a failed CAS means the fire won: posted with
 *    the cause); after the unlock the post, or on closed the hook's
 *    removal and the free.
 *  - the holder: holds HOLD of the MAXP permits at the start, gives them
 *    back one at a time (serex_semaphore_release: the misuse check, the
 *    add, sem_grant_locked, the posts after the unlock).
 *  - the canceller (CANCEL): cancels the token at any moment, then fires
 *    its hooks one at a time as cancel.c does (a hook unlinked and made
 *    `running` in one step under the token's lock; its fire; running
 *    cleared), in any order.
 *  - the closer (CLOSE): serex_semaphore_close at any moment.
 *  - the destroyer (DESTROY): once every acquire has returned, the holder
 *    is done and every waiter is completed (the ghost view: the earliest
 *    a user could know it), serex_semaphore_destroy: a live waiter left
 *    would be misuse (asserted absent), cancelled ones still linked are
 *    waited for; then the semaphore is freed.
 *  - a continuation's run: posted to a target that runs it later (a
 *    process), or refused and run at once on the posting thread (inline,
 *    inside a fire when the fire posts), chosen at each post. The run
 *    removes the hook if the record still holds one (waiting while this
 *    hook's fire is running, unless it is that fire), frees the record,
 *    then "calls fn" (the ghost counts). Continuations keep their permits
 *    (they never release): destroy may come while granted ones are still
 *    queued, and a permit is then never given back (the header's rule).
 *
 * Abstractions: each critical section under the semaphore's spinlock is
 * one indivisible step. The only thing that can happen inside one in the
 * C code is a fire's CAS (the one step made without the lock), and that
 * changes nothing the section would not also do with the CAS just before
 * or just after it, both of which are explored: a section reads a
 * waiter's state once as a hint and then CASes it; if the fire wins in
 * between, the CAS fails and the waiter is passed over, exactly as when
 * the hint had seen it cancelled; if the hint saw it live and too big,
 * the section stops before any CAS, as when the fire came after. The
 * token's lock is atomic blocks too. Posting order and the FIFO order of
 * grants are tested by test_semaphore.c, not here (posts are a set).
 *
 * Properties (assertions; the end check runs when nothing can move):
 *  1. exactly one completer per waiter (grant, close, or fire: ghost
 *     `completers`), and its continuation runs at most once, exactly once
 *     at the end unless it is still parked (live, linked, never posted);
 *  2. no touch of a freed record (the fire reads `state`; the run) and
 *     no touch of a freed semaphore (every lock, the fire's unlink);
 *  3. every hook added is removed exactly once, before its record is
 *     freed, and none is left on the token for a freed record;
 *  4. the permits are conserved: free + the holder's + those granted to
 *     runs == MAXP; no release passes MAXP;
 *  5. at the end, the first parked waiter (if any) does not fit (FIFO
 *     grants everything that can be granted); destroy never finds a live
 *     waiter.
 *
 * Mutations (each must make spin find a violation):
 *  MUT_NO_RECHECK       the fire does not grant the waiters behind the one
 *                       it unlinks
 *  MUT_FIRE_LOCKS_FIRST the fire takes the semaphore's lock before it
 *                       decides (a lock-only design): the semaphore may
 *                       be gone
 *  MUT_RUN_NO_REMOVE    the run frees the record without removing its
 *                       hook
 *  MUT_PARK_BY_STORE    acquire parks with a plain store of WAITING, not a
 *                       CAS from INIT (a fire that won from INIT is lost)
 *  MUT_DESTROY_NO_WAIT  destroy frees with cancelled waiters still linked
 *
 * Check: scripts/check_model.sh runs the configurations sem-*.
 */
#ifndef NW
#define NW 3
#endif
#ifndef MAXP
#define MAXP 2
#endif
#ifndef HOLD
#define HOLD 2
#endif
#ifndef CANCEL
#define CANCEL 1
#endif
#ifndef CLOSE
#define CLOSE 0
#endif
#ifndef DESTROY
#define DESTROY 1
#endif
#ifndef REFUSE
#define REFUSE 0
#endif
/* waiter 0 asks 2 (a big head), the others 1; TOKMASK: who has the token */
#define N(w) (w == 0 -> 2 : 1)
#ifndef TOKMASK
#define TOKMASK 5
#endif
#define TOK(w) ((TOKMASK >> w) & 1)

#define NONE 255
/* states: INIT, WAITING, TAKEN, CANCELLED (the cause, < 0 in C) */
#define S_INIT 1
#define S_WAITING 2
#define S_TAKEN 3
#define S_CANCELLED 4
/* statuses */
#define ST_OK 1
#define ST_CAUSE 2
#define ST_REJECTED 3

/* the semaphore (under its lock, i.e. inside the atomic sections) */
byte avail = MAXP - HOLD;
bit closed;
bit sem_freed;
byte seq;           /* arrival order of links */
byte pos[NW];
bit linked[NW];

/* the waiters' records */
byte state[NW];
byte status[NW];
bit tokref[NW];     /* the record's `token` is set: a remove is owed */
bit rec_made[NW];
bit rec_freed[NW];

/* the token */
bit cancelled;
bit on_list[NW];
byte running = NONE;
byte adds[NW];
byte removes[NW];

/* ghosts */
byte completers[NW];
byte posted[NW];
byte ran[NW];
byte granted;       /* permits held by runs that got ST_OK */
byte held = HOLD;   /* the holder's */
bit returned[NW];
bit refused_closed[NW]; /* acquire said SEREX_EREJECTED */
bit holder_done;
bit closer_done = !CLOSE; /* no other call overlaps destroy */
/* scratch of the atomic sections (reset before each section ends, so
 * they add no states) */
byte r, k, won;

/* the completer's CAS from @tfrom to TAKEN */
inline take(tw, tfrom)
{
    assert(!rec_freed[tw]);
    if
    :: state[tw] == tfrom -> state[tw] = S_TAKEN; completers[tw]++;
       assert(completers[tw] == 1); won = 1
    :: else -> won = 0
    fi
}

/* the first linked waiter not cancelled, or NONE */
inline first_live(flout)
{
    flout = NONE;
    r = 0;
    do
    :: r < seq ->
        k = 0;
        do
        :: k < NW && !(linked[k] && pos[k] == r) -> k++
        :: else -> break
        od;
        if
        :: k < NW && state[k] != S_CANCELLED -> flout = k; break
        :: else -> r++
        fi
    :: else -> break
    od;
    r = 0;
    k = 0
}

/* sem_grant_locked: from the head, grant live waiters while they fit,
 * passing over cancelled ones; a bit in @gposts per granted waiter */
inline grant_locked(gposts)
{
    r = 0;
    do
    :: r < seq ->
        k = 0;
        do
        :: k < NW && !(linked[k] && pos[k] == r) -> k++
        :: else -> break
        od;
        if
        :: k < NW && state[k] != S_CANCELLED && N(k) > avail ->
            break /* FIFO: nobody overtakes it */
        :: k < NW && state[k] != S_CANCELLED && N(k) <= avail ->
            take(k, S_WAITING);
            if
            :: won ->
                avail = avail - N(k);
                status[k] = ST_OK;
                linked[k] = 0;
                gposts = gposts | (1 << k)
            :: else -> skip
            fi
        :: else -> skip
        fi;
        r++
    :: else -> break
    od;
    r = 0;
    k = 0;
    won = 0
}

/* serex__cancel_hook_remove, from a thread firing hook @hme (or NONE) */
inline hook_remove(hw, hme)
{
    atomic {
        assert(adds[hw] == 1 && removes[hw] == 0);
        removes[hw]++;
        on_list[hw] = 0 /* unlinked if still listed: it never fires */
    };
    (running != hw || hme == hw) /* else: wait for its fire to return */
}

/* sem_waiter_run: remove the hook (if owed), free the record, call fn */
inline do_run(rw, rme)
{
    assert(!rec_freed[rw] && rec_made[rw]);
#ifndef MUT_RUN_NO_REMOVE
    if
    :: tokref[rw] -> hook_remove(rw, rme)
    :: else -> skip
    fi;
#endif
    atomic {
        /* no fire can come for a freed record: the hook is off the
         * list (a fire in progress has won and posted it, or lost and
         * returned: remove waited) */
        assert(!on_list[rw]);
        rec_freed[rw] = 1;
        ran[rw]++;
        assert(ran[rw] == 1);
        if
        :: status[rw] == ST_OK -> granted = granted + N(rw)
        :: else -> skip
        fi
    }
}

proctype runner(byte w)
{
    do_run(w, NONE)
}

/* sem_waiter_post: its target runs it later, or refuses it and it runs here
 * (with REFUSE; inside a fire always possible: the case where remove
 * must not wait for itself) */
inline post(pw, pme)
{
    posted[pw]++;
    assert(posted[pw] == 1);
    if
    :: run runner(pw)
    :: (REFUSE || pme != NONE) -> do_run(pw, pme)
    fi
}

/* post_all, outside the lock: @pi is the caller's own counter */
inline post_all(pposts, pame, pi)
{
    pi = 0;
    do
    :: pi < NW ->
        if
        :: pposts & (1 << pi) -> post(pi, pame)
        :: else -> skip
        fi;
        pi++
    :: else -> break
    od;
    pi = 0;
    pposts = 0
}

/* sem_waiter_fire(fw), on the canceller's thread */
inline fire(fw, fold, fposts, fx)
{
    atomic { /* the CAS: reads the record */
        assert(!rec_freed[fw]);
        if
        :: state[fw] == S_INIT || state[fw] == S_WAITING ->
            fold = state[fw]; state[fw] = S_CANCELLED; completers[fw]++;
            assert(completers[fw] == 1)
        :: else -> fold = 0
        fi
    };
#ifdef MUT_FIRE_LOCKS_FIRST
    atomic { assert(!sem_freed) };
#endif
    if
    :: fold == S_WAITING ->
        atomic {
            assert(!sem_freed && linked[fw]);
            linked[fw] = 0;
#ifndef MUT_NO_RECHECK
            grant_locked(fposts)
#endif
        };
        hook_remove(fw, fw); /* its own: at once */
        tokref[fw] = 0;
        status[fw] = ST_CAUSE;
        post_all(fposts, fw, fx);
        post(fw, fw)
    :: else -> skip /* lost, or won from INIT: acquire posts it */
    fi;
    fold = 0
}

proctype acquirer(byte w)
{
    byte e, first;

    atomic { /* the early look; then the record, private until added */
        if
        :: closed -> refused_closed[w] = 1; returned[w] = 1; goto done
        :: else -> rec_made[w] = 1; state[w] = S_INIT
        fi
    };
    if
    :: TOK(w) ->
        atomic {
            if
            :: cancelled -> status[w] = ST_CAUSE; completers[w]++; e = 1;
               returned[w] = 1 /* it touches the semaphore no more */
            :: else -> on_list[w] = 1; adds[w] = 1; tokref[w] = 1; e = 0
            fi
        };
        if
        :: e == 1 -> post(w, NONE); goto done
        :: else -> skip
        fi
    :: else -> skip
    fi;
    atomic { /* sem_enter_locked */
        assert(!sem_freed);
        if
        :: closed -> e = 2
        :: else ->
            first_live(first);
            if
            :: first == NONE && N(w) <= avail ->
                take(w, S_INIT);
                if
                :: won -> avail = avail - N(w); status[w] = ST_OK
                :: else -> status[w] = ST_CAUSE
                fi;
                e = 1
            :: else ->
#ifndef MUT_PARK_BY_STORE
                if
                :: state[w] == S_INIT -> state[w] = S_WAITING; won = 1
                :: else -> won = 0
                fi;
#else
                state[w] = S_WAITING;
                won = 1;
#endif
                if
                :: won -> linked[w] = 1; pos[w] = seq; seq++; e = 0
                :: else -> status[w] = ST_CAUSE; e = 1
                fi
            fi;
            first = 0;
            won = 0;
            /* the call touches the semaphore no more: from here on, as
             * far as destroy is concerned, it has returned */
            returned[w] = 1
        fi
    };
    if
    :: e == 1 -> post(w, NONE)
    :: e == 2 -> /* never queued: undo */
        if
        :: tokref[w] -> hook_remove(w, NONE)
        :: else -> skip
        fi;
        atomic { rec_freed[w] = 1; refused_closed[w] = 1; returned[w] = 1 }
    :: else -> skip
    fi;
done:
    skip
}

proctype holder()
{
    byte posts, i;

    do
    :: held > 0 ->
        atomic {
            assert(!sem_freed);
            assert(avail + 1 <= MAXP); /* the misuse check never fires */
            avail++;
            held--;
            grant_locked(posts)
        };
        post_all(posts, NONE, i)
    :: else -> break
    od;
    holder_done = 1
}

proctype canceller()
{
    byte w, old, fposts, fx;

    cancelled = 1;
    do
    :: atomic {
           /* cancel.c: the next hook unlinked and made `running`, under
            * the token's lock (here in any order) */
           if
           :: on_list[0] -> w = 0
           :: NW > 1 && on_list[1] -> w = 1
           :: NW > 2 && on_list[2] -> w = 2
           :: else -> w = NONE
           fi;
           if
           :: w != NONE -> on_list[w] = 0; running = w
           :: else -> skip
           fi
       };
       if
       :: w == NONE -> break
       :: else -> fire(w, old, fposts, fx); running = NONE
       fi
    od
}

proctype closer()
{
    byte posts, i;

    atomic {
        assert(!sem_freed);
        closed = 1;
        k = 0;
        do
        :: k < NW ->
            if
            :: linked[k] ->
                take(k, S_WAITING);
                if
                :: won -> status[k] = ST_REJECTED; linked[k] = 0;
                   posts = posts | (1 << k)
                :: else -> skip
                fi
            :: else -> skip
            fi;
            k++
        :: else -> break
        od;
        k = 0;
        won = 0
    };
    post_all(posts, NONE, i);
    closer_done = 1
}

/* a waiter a user may know is over: refused, or completed */
#define OVER(w) (returned[w] && (refused_closed[w] || \
                 state[w] == S_TAKEN || state[w] == S_CANCELLED || \
                 status[w] == ST_CAUSE))
#define ANYLINKED (linked[0] || (NW > 1 && linked[1]) || \
                   (NW > 2 && linked[2]))

proctype destroyer()
{
end_wait:
    (OVER(0) && (NW < 2 || OVER(1)) && (NW < 3 || OVER(2)) && holder_done &&
     closer_done);
#ifndef MUT_DESTROY_NO_WAIT
again:
    atomic {
        assert(!sem_freed);
        if
        :: ANYLINKED ->
            k = 0;
            do
            :: k < NW -> assert(!linked[k] || state[k] == S_CANCELLED); k++
            :: else -> break
            od;
            k = 0
        :: else -> skip
        fi
    };
    if
    :: ANYLINKED -> (!ANYLINKED); goto again /* a fire is on its way */
    :: else -> skip
    fi;
#endif
    sem_freed = 1
}

init
{
    byte w = 0;

    atomic {
        do
        :: w < NW -> run acquirer(w); w++
        :: else -> break
        od;
        run holder();
#if CANCEL
        run canceller();
#endif
#if CLOSE
        run closer();
#endif
#if DESTROY
        run destroyer();
#endif
        w = 0
    }
}

/* when nothing can move any more */
active proctype endcheck()
{
    byte w, first;

    timeout ->
    atomic {
        assert(avail + held + granted == MAXP);
        w = 0;
        do
        :: w < NW ->
            if
            :: refused_closed[w] -> assert(posted[w] == 0 && ran[w] == 0)
            :: else ->
                assert(returned[w]);
                assert(ran[w] == 1 || (linked[w] && state[w] == S_WAITING &&
                                       posted[w] == 0))
            fi;
            assert(adds[w] == removes[w] || (linked[w] && removes[w] == 0));
            assert(!rec_freed[w] || !on_list[w]);
            w++
        :: else -> break
        od;
        /* FIFO granted all it could: the first parked does not fit */
        first_live(first);
        assert(first == NONE || N(first) > avail)
    }
}
