/* SPDX-License-Identifier: MIT */
/*
 * serial_drain.pml - the serial executor's drain protocol (src/serial.c and
 * src/mpsc_internal.h) as a Promela model for the spin model checker.
 *
 * What it proves (tests/model/README.md has the details): in every
 * interleaving of the configurations that scripts/check_model.sh checks
 * (up to 3 producers, 6 tasks, batch 1 or 2, a target that may be full,
 * shut down or stop, shutdown or shutdown_now, await_termination's looks
 * and destroy's wait, which resubmit an owed drain), under sequential
 * consistency: no accepted task is lost, run twice, or both run and
 * handed back; at most one drain owns the queue and one task runs at a
 * time, and the target never holds two drains (an owed one counted); a
 * full target never breaks the serial; tasks leave the queue, run and are
 * handed back in push order; a drain runs at most `batch` tasks per visit
 * to the target's thread unless the target refused it; await_termination
 * never reports termination with an accepted task still to run; nothing
 * deadlocks and every counter (wip, the in-flight count, drain
 * references) returns to 0.
 * With CAP (a bounded serial, queue_capacity): the waiting count never
 * passes the cap, nor do the tasks in the queue, every place comes back;
 * and with WAITER, a thread in serex_execute_wait is never left asleep
 * while a place it could take was freed (its wake-up is never lost).
 * What it does not prove: that the C memory orders are strong enough (no
 * weak memory here: TSan and the stress tests cover that); anything for
 * larger sizes; node reuse, statistics, the awaiters' parking-lot
 * wake-ups, destroy's freeing, allocation failure, a target's on_pending
 * for drains, striped.c. Nor that this model is the C code: it is compared
 * by hand.
 *
 * Every atomic operation of the C code is one step here, and every plain
 * access to shared state that the C code makes outside a lock is one step
 * too; the MPSC push's exchange and its link are two steps, so a consumer
 * can see a node that is not linked yet. Steps that touch only the local
 * state of one process (or state under a lock it holds) are merged with
 * the shared access next to them. Spin explores every interleaving of
 * these steps under sequential consistency: the model checks the
 * protocol's logic, not the C memory orders (see README.md).
 *
 * Busy-waits are modelled as blocking on the condition that ends them
 * (`(cond)` in Promela), so a wait that could spin forever becomes a
 * process that can never move, and spin reports it as an invalid end
 * state. See README.md for why each such guard is exact.
 *
 * Configuration (spin -D...; scripts/check_model.sh sets them):
 *   NPROD       producers (1-3)               default 2
 *   NTASK       execute calls per producer    default 2
 *   BATCH       the serial's batch            default 1
 *   REFUSE      1: the target may refuse any submission as full (a
 *               bounded pool, SEREX_EFULL), at most NFULL times in all
 *   NFULL       the full refusals allowed in a run; default 255: any
 *               number (the liveness checks need a bound)
 *   TSHUT       1: the target may be shut down (refuses every submission
 *               after with SEREX_EREJECTED; already accepted drains still
 *               run)
 *   TSTOP       1: ... or stopped: shutdown_now with no on_pending, which
 *               drops accepted drains that have not started
 *               (serex__serial_drain_dropped)
 *   STOPPER     0: nobody shuts the serial down
 *               1: shutdown_now at a nondeterministic point, or never
 *               2: shutdown at a nondeterministic point, or never
 *   AWAITER     1: a thread looks, at any moment, as await_termination
 *               does (serial_state: one load of ctl for SHUT and no
 *               execute in flight, then wip); a look that finds a drain
 *               owed submits it again (serial_retry_owed_waiting) and
 *               looks again, else the awaiter stops
 *   CAP         the serial's queue_capacity; 0 (default): unbounded, and
 *               the model is exactly the unbounded one
 *   WAITER      1 (with CAP): one more thread submits one task with
 *               serex_execute_wait(..., SEREX_FOREVER) (executor.c's
 *               room_wait: an uncounted try, then count itself in the
 *               room's waiters, then read the generation, try, and park
 *               until the generation changes); it waits for the serial's
 *               own cap only (a refusal by the target ends its call)
 *   LIVENESS    defined: add the LTL claim all_finish (run pan -a -f)
 *
 * With none of the mutations below, the model is src/serial.c as it is.
 *
 * Mutations (defined: spin must find a violation; the check can fail):
 *   PUSH_BEFORE_COUNT    push, then count in wip (the old bug: two drains)
 *   IDLE_WAITS_FOR_PUSH  an idle drain that owes work waits for a push
 *                        only, not for shutdown_now's subtraction (hangs)
 *   AWAIT_TWO_LOADS      the awaiter as it was: SHUT from one load of
 *                        ctl, then wip, and the in-flight count only in
 *                        a later load of its own (README.md,
 *                        "Findings", 1: reports termination early)
 *   BATCH_PER_ROUND      serial_drain as it was: each round runs up to
 *                        BATCH tasks, not counting the short rounds before
 *                        it (README.md, "Findings", 2: a visit runs more
 *                        than BATCH tasks)
 *   CAP_LOOK_THEN_ADD    serial_take_place as a load, then an increment
 *                        in a later step instead of a CAS (the cap is
 *                        passed)
 *   ROOM_NO_RETRY        room_wait parks right after counting itself,
 *                        on the generation it read before its uncounted
 *                        try (a freed place's wake-up is lost: the waiter
 *                        sleeps for ever)
 *   FULL_BREAKS          a full target breaks the serial, as it did
 *                        before the owed drain (BROKEN with no rejection)
 *   OWED_LOOK_THEN_CLEAR serial_retry_owed claims by a load of OWED and a
 *                        later clear instead of one RMW (two drains)
 *   OWED_NO_WAIT_RETRY   await_termination and destroy do not submit an
 *                        owed drain (a task is left with no drain)
 */

#ifndef NPROD
#define NPROD 2
#endif
#ifndef NTASK
#define NTASK 2
#endif
#ifndef BATCH
#define BATCH 1
#endif
#ifndef REFUSE
#define REFUSE 0
#endif
#ifndef NFULL
#define NFULL 255
#endif
#if defined(LIVENESS) && REFUSE && NFULL == 255
#error "LIVENESS with REFUSE needs NFULL: a target full for ever never ends"
#endif
#ifndef TSHUT
#define TSHUT 0
#endif
#ifndef TSTOP
#define TSTOP 0
#endif
#ifndef STOPPER
#define STOPPER 1
#endif
#ifndef AWAITER
#define AWAITER 0
#endif
#ifndef CAP
#define CAP 0
#endif
#ifndef WAITER
#define WAITER 0
#endif
#if WAITER && !CAP
#error "WAITER needs CAP: it waits for the serial's own room"
#endif
#if defined(AWAIT_FIXED) || defined(BATCH_PER_VISIT)
#error "AWAIT_FIXED and BATCH_PER_VISIT are gone: the fixes are the default"
#endif

#define NPT (NPROD * NTASK)  /* the producers' tasks 0 .. NPT-1 */
#define NT (NPT + WAITER)    /* task nodes 0 .. NT-1: the waiter's is NPT */
#define STUB NT              /* the queue's stub node */
#define NIL 255

/* ctl (the entry word): flags, and above them the calls in flight */
#define CTL_SHUT 1
#define CTL_STOP 2
#define CTL_BROKEN 4
#define CTL_OWED 8     /* the target was full: a drain is owed */
#define CTL_INFLIGHT 16
#define FLAG(x, f) (((x) / (f)) % 2 == 1)

/* the target's state */
#define T_RUNNING 0
#define T_SHUT 1
#define T_STOPPED 2

/* what pop found */
#define R_NONE 0
#define R_EMPTY 1
#define R_BUSY 2
#define R_OK 3

/* who took a task out of the queue */
#define BY_NONE 0
#define BY_DRAIN 1
#define BY_STOP 2      /* shutdown_now (or the final take, see init) */
#define BY_REFUSED 3   /* serial_take_back: the producer took its own back */

/* status[t]: what execute returned (SEREX_EFULL is an error) */
#define ST_PENDING 0
#define ST_OK 1
#define ST_ERROR 2

/* what one execute call said */
#define X_OK 0
#define X_ERR 1     /* refused: shut down, broken, the target's status */
#define X_FULL 2    /* SEREX_EFULL: the serial's own cap */

/* --- the serial's shared state --- */
byte tail = STUB;      /* atomic: producers' exchange, the consumer's too */
byte head = STUB;      /* the consumer's; only under pop_lock */
byte next[NT + 1];     /* atomic: each node's link */
byte wip;              /* atomic */
byte ctl;              /* atomic */
bit pop_lock;          /* serex__spinlock */
byte life;             /* atomic: drains holding a reference (LIFE_DRAIN) */
byte tstate = T_RUNNING;
byte waiting;          /* atomic (CAP): places taken */
byte room_waiters;     /* atomic (executor.c): waiters counted for room */
byte room_gen;         /* atomic (executor.c): the generation they park on */
byte fulls;            /* full refusals so far (at most NFULL) */

/* --- ghost state: what the properties talk about --- */
byte seq[NT];          /* position of the task's push exchange, from 1 */
byte pushed;           /* push exchanges so far */
byte popped;           /* seq of the last task taken out of the queue */
byte last_run;         /* seq of the last task run */
byte last_hb;          /* seq of the last task handed back */
byte taker[NT];        /* BY_* */
bit ran[NT];           /* the task's function was called */
bit hb[NT];            /* handed back by shutdown_now */
byte status[NT];       /* ST_* */
byte running;          /* drains inside a task's function */
byte owner;            /* drains inside their loop, owing work */
bit stop_called;       /* shutdown_now took the queue */
bit terminated;        /* an awaiter saw termination */
bit finished;          /* init checked the end state */
byte inq;              /* tasks pushed (exchange) and not taken out */
byte ndrain;           /* drains accepted by the target and not done (a
                        * resubmission passes on the same one; done: its
                        * subtraction took wip to 0, or it was dropped) */
bit rejected_seen;     /* the target said SEREX_EREJECTED or dropped a
                        * drain (the only causes of BROKEN) */

#ifdef LIVENESS
/* (5) as a liveness property: every run ends, checked end state included
 * (pan -a -f: under weak fairness, so an awaiter that polls forever
 * while others could move does not count) */
ltl all_finish { <> finished }
#endif

/* wip in unsigned arithmetic, as the C uint64_t (wraps, never traps) */
#define WIP_ADD(n) wip = (wip + (n)) % 256
#define WIP_SUB(n) wip = (wip + 256 - (n)) % 256

/* --- the MPSC queue (mpsc_internal.h) --- */

/* serex__mpsc_push_ends: the exchange, then the link, two steps */
inline mpsc_push(node, prev) {
    atomic {
        prev = tail;
        tail = node;
        if
        :: node != STUB ->
            pushed++; seq[node] = pushed; inq++;
#if CAP
            /* the cap: never more tasks queued than places */
            assert(inq <= waiting && waiting <= CAP)
#endif
        :: else
        fi
    }
    atomic { next[prev] = node; prev = 0 }
}

/* A task leaves the queue: checks FIFO (no task skipped, none twice). */
inline took(node, by) {
    assert(node != STUB && node < NT);
    assert(taker[node] == BY_NONE);
    assert(seq[node] == popped + 1);
    popped = seq[node];
    taker[node] = by;
    inq--
}

/*
 * serex__mpsc_pop_wait_ends, the caller holding pop_lock: out is the
 * oldest task, or NIL if the queue is empty. On BUSY the C code spins on
 * pop; here we wait for what ends BUSY: the missing link behind head.
 * Scratch variables are zeroed as they die, so that stale values do not
 * split states.
 */
inline mpsc_pop_wait(out, by) {
    do
    :: atomic { h = head; nx = next[h] }
        if
        :: h == STUB && nx == NIL ->
            if
            :: tail == STUB -> r = R_EMPTY
            :: else -> r = R_BUSY
            fi
        :: h == STUB && nx != NIL ->
            atomic { head = nx; h = nx; nx = next[h] } /* past the stub */
        :: else
        fi;
        if
        :: r == R_NONE && nx != NIL ->
            d_step { head = nx; out = h; took(h, by); r = R_OK }
        :: r == R_NONE && nx == NIL ->
            if
            :: tail != h -> r = R_BUSY
            :: else ->
                /* head is the last node: queue the stub behind it */
                next[STUB] = NIL;
                mpsc_push(STUB, pv);
                nx = next[h];
                if
                :: nx == NIL -> r = R_BUSY
                :: else -> d_step { head = nx; out = h; took(h, by); r = R_OK }
                fi
            fi
        :: else
        fi;
        if
        :: r == R_BUSY ->
            /* a producer links the node behind head */
            atomic { next[head] != NIL -> r = R_NONE; h = 0; nx = 0 }
        :: atomic { r == R_EMPTY -> out = NIL; r = R_NONE; h = 0; nx = 0 }; break
        :: atomic { r == R_OK -> r = R_NONE; h = 0; nx = 0 }; break
        fi
    od
}

inline lock() { atomic { pop_lock == 0 -> pop_lock = 1 } }
inline unlock() { pop_lock = 0 }

/* --- room (executor.c) and the waiting count (serial.c) --- */

/* serex__room_made: a seq_cst load of the waiters, then (if any) the
 * generation's bump and the wake-up: two steps */
inline room_made() {
    if
    :: room_waiters > 0 -> room_gen = (room_gen + 1) % 256
    :: else
    fi
}

/* serex__room_wake: the bump, unconditional (shutdown, BROKEN) */
inline room_wake() {
    room_gen = (room_gen + 1) % 256
}

/* serial_give_back: the seq_cst RMW, then serex__room_made */
inline give_back(n) {
    atomic { assert(waiting >= n); waiting = waiting - n };
    room_made()
}

/*
 * serial_take_place: the load and the CAS loop. One step: a CAS that fails
 * changes nothing and the look is made again, so each outcome is decided
 * by one atomic access (the successful CAS, or the load that sees the cap).
 */
inline take_place(placed) {
#ifdef CAP_LOOK_THEN_ADD
    /* mutation: look, then add in a later step */
    placed = (waiting < CAP);
    if
    :: placed -> waiting++; assert(waiting <= CAP)
    :: else
    fi
#else
    atomic {
        if
        :: waiting < CAP -> waiting++; placed = true
        :: else -> placed = false
        fi;
        assert(waiting <= CAP)
    }
#endif
}

/* --- the target --- */

/*
 * The target frees a place some time after it said full (a bounded pool
 * runs a task): serex__room_made, which wakes a serex_execute_wait
 * counted by then. Only a waiter listens, so only then is it modelled.
 */
proctype troom()
{
    room_made()
}

/*
 * serex_execute(target, serial_drain, s): accepted (a drain process
 * starts, the target runs it some time later) or refused, as full
 * (SEREX_EFULL: isfull = true) or shut down (SEREX_EREJECTED). For a
 * resubmission the old drain leaves its loop in the same step.
 */
inline submit(ok, isfull, resub) {
    if
    :: atomic {
           tstate == T_RUNNING ->
           ok = true;
           isfull = false;
           if
           :: resub -> owner--
           :: else -> ndrain++; assert(ndrain == 1) /* (2) one drain */
           fi;
           run drain()
       }
#if REFUSE
    :: atomic {
#if NFULL < 255
           tstate == T_RUNNING && fulls < NFULL ->
           fulls++;
#else
           tstate == T_RUNNING -> /* any number: no count to split states */
#endif
           ok = false; isfull = true;
#if WAITER
           run troom()
#else
           skip
#endif
       }
#endif
    :: atomic {
           tstate != T_RUNNING -> ok = false; isfull = false; rejected_seen = 1
       }
    fi
}

/* --- the drain (serial_drain) --- */

/* serial_drain_exit: a reference to the serial goes (a drain's, or a
 * refused submitter's hold) */
inline drain_exit() {
    atomic { assert(life > 0); life-- }
}

/* A drain is done for good (wip back at 0, or dropped): ghost */
inline drain_gone() {
    assert(ndrain == 1); ndrain--
}

proctype drain()
{
    byte nran, left, t, h, nx, r, pv;
    bool ok, isfull;
    byte visit;       /* serial_drain's `visit`: tasks run since the target
                       * gave us this thread, counted after each round */
    byte visit_ran;   /* ghost, for promise 4: tasks started this visit */

#if TSTOP
    /* a target stopped before the drain started drops it:
     * serex__hand_back -> serex__serial_drain_dropped */
    if
    :: atomic { tstate == T_STOPPED -> rejected_seen = 1; drain_gone() };
        ctl = ctl | CTL_BROKEN;
#if CAP
        room_wake();
#endif
        drain_exit();
        goto done
    :: atomic { tstate != T_STOPPED -> owner++; assert(owner == 1) }
    fi;
#else
    atomic { owner++; assert(owner == 1) }
#endif
    do
    :: nran = 0;
        /* serial_run_batch(s, s->batch - visit) */
        do
#ifdef BATCH_PER_ROUND
        :: nran < BATCH ->   /* mutation: serial_run_batch(s, s->batch) */
#else
        :: nran < BATCH - visit ->
#endif
            lock();
            mpsc_pop_wait(t, BY_DRAIN);
            unlock();
            if
            :: t == NIL -> break
            :: else ->
#if CAP
                /* serial_run (bounded): the place is free before the task
                 * runs */
                give_back(1);
#endif
                /* fn(arg): the task runs; its properties are checked as
                 * it starts */
                d_step {
                    assert(running == 0);   /* (2) one at a time */
                    assert(owner == 1);
                    /* (3) taken by this drain, not run, not handed back */
                    assert(taker[t] == BY_DRAIN && !ran[t] && !hb[t]);
                    assert(!terminated);
                    /* (4) in the order of the push exchanges, and so of
                     * each producer's calls: its previous task (if
                     * accepted) has left the queue */
                    assert(seq[t] > last_run);
                    assert(t % NTASK == 0 || t >= NPT ||
                           status[t - 1] == ST_ERROR ||
                           taker[t - 1] != BY_NONE);
                    /* (7) promise 4: at most BATCH tasks between two
                     * hand-overs to the target, unless it refused */
                    visit_ran++;
                    assert(visit_ran <= BATCH);
                    running = 1;
                    ran[t] = 1;
                    last_run = seq[t];
                    seq[t] = 0
                }
                atomic { running = 0; t = 0 }
                nran++
            fi
        :: else -> break
        od;
        /* left = (wip -= ran); then, if left != 0, visit += ran (local:
         * in the same step) */
        atomic {
#ifndef PUSH_BEFORE_COUNT
            assert(wip >= nran);
#endif
            WIP_SUB(nran);
            left = wip;
            if
            :: left == 0 -> owner--; drain_gone()
#ifdef BATCH_PER_ROUND
            :: else
#else
            :: else -> visit = visit + nran
#endif
            fi
        }
        if
        :: left == 0 -> break  /* serial_idle: no waiter is modelled */
        :: else -> left = 0
        fi;
#ifdef BATCH_PER_ROUND
        /* mutation: a full round gives the thread back */
        if
        :: nran == BATCH ->
#else
        /* visit reaches batch: give the thread back unless the target
         * refuses */
        if
        :: visit == BATCH ->
#endif
            submit(ok, isfull, true);
            if
            :: ok -> goto done /* our reference passes on */
            :: else -> visit = 0; visit_ran = 0; isfull = 0 /* refused: go on */
            fi
        :: else
        fi;
        /* Nothing ran and work is owed: the C code spins. Its next round
         * can only differ once a push begins or wip reaches 0. */
        if
#ifdef IDLE_WAITS_FOR_PUSH
        :: nran == 0 -> (tail != STUB) /* mutation: forgets shutdown_now */
#else
        :: nran == 0 -> (tail != STUB || wip == 0)
#endif
        :: else
        fi
    od;
    drain_exit();
done:
    atomic { nran = 0; left = 0; t = 0; ok = 0; visit = 0; visit_ran = 0 }
}

/* --- the producers (serial_execute) --- */

/*
 * serial_drain_refused: the target refused a drain with tasks queued.
 * Full: the drain is owed (the flag is the only thing that holds it);
 * shut down: the serial is broken, as before.
 */
inline drain_refused(isfull) {
    if
#ifdef FULL_BREAKS
    :: isfull -> ctl = ctl | CTL_BROKEN /* mutation: a full target breaks */
#if CAP
        ; room_wake()
#endif
#else
    :: isfull ->
        atomic {
            /* the owed drain stands for the one drain: none exists, and
             * tasks are owed (the caller is in flight, so shutdown_now
             * has not taken them) */
            assert(ndrain == 0 && wip > 0 && !FLAG(ctl, CTL_OWED));
            ctl = ctl | CTL_OWED
        }
#endif
    :: else ->
        ctl = ctl | CTL_BROKEN;
#if CAP
        room_wake()
#else
        skip
#endif
    fi
}

/* serial_take_back (and serial_start_drain's end): the target refused
 * the drain our task started */
inline refused(mine, taken, isfull) {
    lock();
    atomic {
        if
        :: wip == 1 -> wip = 0; cas = true
        :: else -> cas = false
        fi
    }
    back = NIL;
    if
    :: cas ->
        mpsc_pop_wait(back, BY_REFUSED);
        atomic { assert(back == mine); seq[back] = 0 }
    :: else
    fi;
    unlock();
    if
    :: back == NIL ->
        drain_refused(isfull);
        taken = false
    :: else ->
#if CAP
        give_back(1);
#endif
        taken = true /* freed: nothing is queued */
    fi
}

/*
 * serial_retry_owed: claim the owed drain (one RMW clears OWED; the one
 * that cleared it submits) and submit it again. The caller is in flight.
 */
inline retry_owed() {
#ifdef OWED_LOOK_THEN_CLEAR
    claimed = FLAG(ctl, CTL_OWED);  /* mutation: look, then clear */
    if
    :: claimed -> atomic { ctl = ctl & ~CTL_OWED }
    :: else
    fi;
#else
    atomic {
        claimed = FLAG(ctl, CTL_OWED);
        if
        :: claimed -> ctl = ctl - CTL_OWED
        :: else
        fi
    }
#endif
    if
    :: claimed ->
        atomic { life++ };
        submit(ok, isfull, false);
        if
        :: !ok -> drain_exit(); drain_refused(isfull)
        :: else
        fi
    :: else
    fi;
    atomic { claimed = 0; ok = 0; isfull = 0 }
}

/*
 * serial_execute for task t: res is X_OK, X_ERR or X_FULL (status[t] is
 * ST_OK, or ST_ERROR for both refusals). The caller's locals: c, first,
 * ok, full, owed, claimed, cas, taken, back, prev, placed, and the
 * queue's h, nx, r, pv.
 */
inline execute(t, res) {
    atomic { c = ctl; ctl = ctl + CTL_INFLIGHT }
    if
    :: FLAG(c, CTL_SHUT) || FLAG(c, CTL_BROKEN) ->
        atomic {
            ctl = ctl - CTL_INFLIGHT; status[t] = ST_ERROR; res = X_ERR; c = 0
        }
    :: else ->
        atomic { owed = FLAG(c, CTL_OWED); c = 0 };
#if CAP
        take_place(placed);
        if
        :: !placed ->
            /* serial_full, after a look at an owed drain (nothing frees
             * a place until it runs) */
            if
            :: owed -> retry_owed()
            :: else
            fi;
            /* nothing counted, nothing queued */
            atomic {
                ctl = ctl - CTL_INFLIGHT; status[t] = ST_ERROR; res = X_FULL;
                owed = 0
            }
        :: else ->
#endif
#ifdef PUSH_BEFORE_COUNT
        mpsc_push(t, prev);
        atomic { first = (wip == 0); WIP_ADD(1) }
#else
        atomic { first = (wip == 0); WIP_ADD(1) }
        mpsc_push(t, prev);
#endif
        ok = true;
        if
        :: first ->
            /* serial_start_drain */
            atomic { life++ };
            submit(ok, isfull, false);
            if
            :: !ok ->
                drain_exit();
                refused(t, taken, isfull);
                ok = !taken
            :: else
            fi
        :: !first && owed -> retry_owed(); ok = true
        :: else
        fi;
        /* the in-flight count drops, and execute returns */
        atomic {
            ctl = ctl - CTL_INFLIGHT;
            if
            :: ok ->
                status[t] = ST_OK;
                res = X_OK;
                /* an awaiter already said "terminated": then our
                 * task must be done (ran or taken back) */
                assert(!terminated || ran[t] || taker[t] == BY_STOP)
            :: else -> status[t] = ST_ERROR; res = X_ERR
            fi;
            first = 0; ok = 0; cas = 0; taken = 0; back = 0; isfull = 0;
            owed = 0
        }
#if CAP
        fi;
        placed = 0
#endif
    fi
}

proctype producer(byte p)
{
    byte i, t, c, h, nx, r, pv, prev, back, res;
    bool first, ok, isfull, owed, claimed, cas, taken, placed;

    do
    :: i < NTASK ->
        t = p * NTASK + i;
        execute(t, res);
        atomic { i++; t = 0; res = 0 }
    :: else -> break
    od
}

#if WAITER
/*
 * serex_execute_wait(serial, ..., SEREX_FOREVER) for task NPT (executor.c:
 * serex__execute_wait, then room_wait): an uncounted try; on SEREX_EFULL
 * (the serial's, so signalled) count itself in room_waiters (seq_cst) and
 * try again; from then on read the generation, try, and on SEREX_EFULL
 * park until the generation is no longer the one read (the parking lot
 * sleeps while the word holds its expected value, and a bump wakes it: a
 * blocking guard here). A lost wake-up leaves it asleep for ever: an
 * invalid end state.
 */
proctype waiter()
{
    byte t = NPT, c, h, nx, r, pv, prev, back, res, g;
    bool first, ok, isfull, owed, claimed, cas, taken, placed, counted;

    g = room_gen;  /* (only the mutation parks on it) */
    execute(t, res);
    do
    :: res == X_FULL ->
        if
        :: !counted ->
            room_waiters++;
            counted = true
#ifdef ROOM_NO_RETRY
            ; (room_gen != g) /* mutation: park without a counted try */
#endif
        :: else -> (room_gen != g)
        fi;
        g = room_gen;
        execute(t, res)
    :: else -> break
    od;
    if
    :: counted -> room_waiters--
    :: else
    fi;
    atomic { res = 0; g = 0; counted = 0; t = 0 }
}
#endif

/* --- shutdown_now and its helpers --- */

/* serial_take_all, the wait for in-flight calls included */
inline take_all(n) {
    (ctl < CTL_INFLIGHT);
    lock();
    n = 0;
    do
    :: true ->
        mpsc_pop_wait(t, BY_STOP);
        if
        :: t == NIL -> break
        :: else -> list[n] = t; n++
        fi
    od;
    unlock();
#if CAP
    if
    :: n > 0 -> give_back(n)
    :: else
    fi;
#endif
    atomic {
        assert(wip >= n);
        WIP_SUB(n);
        stop_called = 1
    }
}

/* serex__task_hand_back_list: to on_pending, in order (it touches
 * nothing of the serial's, so one step) */
inline hand_back(n) {
    d_step {
        i = 0;
        do
        :: i < n ->
            t = list[i];
            assert(taker[t] == BY_STOP && !ran[t] && !hb[t]);
            assert(seq[t] > last_hb);
            last_hb = seq[t];
            seq[t] = 0;
            hb[t] = 1;
            list[i] = 0;
            i++
        :: else -> break
        od;
        i = 0; t = 0; n = 0
    }
}

proctype stopper()
{
    byte list[NT];
    byte n, i, t, h, nx, r, pv;

    if
    :: skip    /* never */
#if STOPPER == 1
    :: ctl = ctl | (CTL_SHUT | CTL_STOP);
        take_all(n);
#if CAP
        room_wake();
#endif
        hand_back(n)
#elif STOPPER == 2
    :: ctl = ctl | CTL_SHUT
#if CAP
        ; room_wake()
#endif
#endif
    fi
}

/* The target is shut down (or stopped) at some point, or never. */
proctype target()
{
    if
    :: skip
#if TSHUT
    :: tstate = T_SHUT
#endif
#if TSTOP
    :: tstate = T_STOPPED
#endif
    fi
}

/*
 * serial_retry_owed_waiting: an awaiter (or destroy's wait) that found a
 * drain owed enters as an execute does, and unless the queue was taken
 * (STOP) or kept for good (BROKEN) submits the drain again.
 */
inline retry_waiting() {
    atomic { c = ctl; ctl = ctl + CTL_INFLIGHT }
    if
    :: FLAG(c, CTL_STOP) || FLAG(c, CTL_BROKEN) -> skip
    :: else -> retry_owed()
    fi;
    atomic { ctl = ctl - CTL_INFLIGHT; c = 0 }
}

/* An owed drain, as serial_look sees it (its own load of ctl) */
#define OWED_LOOK (FLAG(ctl, CTL_OWED) && !FLAG(ctl, CTL_STOP) && \
                   !FLAG(ctl, CTL_BROKEN))

/*
 * await_termination: serial_state (one load of ctl: SHUT and no execute in
 * flight, else not done; then wip == 0). serex__await_loop looks again
 * at once when an execute is in flight, rather than park. A look that is
 * not done and finds a drain owed (serial_look, a load of its own) submits
 * it again and looks again; any other look is the last. Looks are
 * read-only, so a failed look changes nothing and a later one is the same
 * as a first one made then; whether the awaiter parks and is woken in
 * time (the generation in `life`) is not modelled.
 */
proctype awaiter()
{
    bool quiet;   /* what the loads so far say; a look that fails stops */
    bool owed, ok, isfull, claimed;
    byte i, c;

    do
    :: 
#ifdef AWAIT_TWO_LOADS
        /* mutation, the old awaiter: SHUT, then wip == 0, then in flight */
        quiet = FLAG(ctl, CTL_SHUT);
        if
        :: quiet -> quiet = (wip == 0)
        :: else
        fi;
        if
        :: quiet -> quiet = (ctl < CTL_INFLIGHT)
        :: else
        fi;
#else
        /* serial_state: SHUT and not submitting from one load of ctl ... */
        quiet = FLAG(ctl, CTL_SHUT) && ctl < CTL_INFLIGHT;
        /* ... then wip */
        if
        :: quiet -> quiet = (wip == 0)
        :: else
        fi;
#endif
        d_step {
            if
            :: quiet ->
                /* SEREX_OK: every accepted task has run or was taken */
                terminated = 1;
                assert(running == 0);
                i = 0;
                do
                :: i < NT ->
                    assert(status[i] != ST_OK || ran[i] ||
                           taker[i] == BY_STOP);
                    i++
                :: else -> break
                od
            :: else    /* SEREX_ETIMEDOUT */
            fi;
            i = 0
        }
        if
#ifndef OWED_NO_WAIT_RETRY
        :: !quiet && OWED_LOOK -> retry_waiting(); quiet = 0
#endif
        :: else -> break
        fi
    od;
    quiet = 0
}

/* --- the whole system, and what must hold at its end --- */

init
{
    byte list[NT];
    byte n, i, t, h, nx, r, pv, c;
    bool ok, isfull, claimed;

    atomic {
        i = 0;
        do
        :: i < NT -> next[i] = NIL; i++
        :: else -> break
        od;
        next[STUB] = NIL;
        i = 0;
        do
        :: i < NPROD -> run producer(i); i++
        :: else -> break
        od;
        run stopper();
#if TSHUT || TSTOP
        run target();
#endif
#if AWAITER
        run awaiter();
#endif
#if WAITER
        run waiter();
#endif
    }
    /* everyone else has finished (with an LTL claim, _nr_pr counts the
     * claim too) */
#ifdef LIVENESS
#define ALONE (_nr_pr == 2)
#else
#define ALONE (_nr_pr == 1)
#endif
    ALONE;

    /*
     * destroy's wait (serex__wrapper_settle, serial_await): while a drain
     * is owed it submits it again, and waits for what that starts.
     */
    do
#ifndef OWED_NO_WAIT_RETRY
    :: OWED_LOOK -> retry_waiting(); ALONE
#endif
    :: else -> break
    od;

    /*
     * Nothing is owed to a drain now. If the serial is not broken and
     * shutdown_now never ran, every accepted task must have run; if it is
     * broken, what it kept comes back from a last shutdown_now (destroy
     * drops it the same way). Only a rejection breaks it.
     */
    assert(!FLAG(ctl, CTL_BROKEN) || rejected_seen);
    if
    :: !stop_called && FLAG(ctl, CTL_BROKEN) ->
        take_all(n);
        hand_back(n)
    :: else
    fi;
    skip;   /* (spin: a jump may not land on a d_step's first statement) */
    d_step {
        assert(wip == 0 && life == 0 && owner == 0 && running == 0);
        assert(ndrain == 0);
        assert(ctl < CTL_INFLIGHT && pop_lock == 0);
        assert(head == STUB && tail == STUB && next[STUB] == NIL);
        assert(waiting == 0 && room_waiters == 0 && inq == 0);
        i = 0;
        do
        :: i < NT ->
            assert(status[i] != ST_PENDING);
            /* (1) accepted: exactly once, run or handed back;
             * refused: neither */
            assert(status[i] != ST_OK || ran[i] + hb[i] == 1);
            assert(status[i] != ST_ERROR || ran[i] + hb[i] == 0);
            i++
        :: else -> break
        od;
        finished = 1
    }
}
