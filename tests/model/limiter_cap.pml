/*
 * limiter_cap.pml - the limiter's state word and runners (src/limiter.c)
 * with the cap changed while it runs (serex_limiter_set_max): the essay's
 * "Changing the cap".
 *
 * Processes, as in the C code:
 *  - NPROD producers, NTASK executes each: a relaxed read of the cap
 *    (which may be stale by the time of the CAS), the count (Q+1, and R+1
 *    if R is below the cap read: the CAS as one step), the push (a later
 *    step: a runner may find the queue empty with Q > 0), and a runner
 *    started if a slot was taken.
 *  - runners, one process per submission, started at any later moment:
 *    limiter_pop under pop_lock (the cap read under the lock; below its
 *    peak, the shed: R > cap -> R-1, U-1 if holding, as one step, since
 *    the load-and-CAS loop changes nothing when it fails; else the pop:
 *    a node and Q-1, U+1 unless holding), the task's run (its return is
 *    a later step), and with an empty queue limiter_leave (R-1 and U-1 if
 *    holding, only while Q == 0; else pop again).
 *  - the setter: serex_limiter_set_max to CAP1, then to CAP2 if set: the
 *    store of the cap and of peak under pop_lock, then, if raised, the
 *    fill: R+1 while R is below the cap and Q > R - U (one step each, as
 *    the CAS), a runner started for each.
 * Left out: the batch's resubmission (a runner keeps its slot through it:
 *    nothing here changes), refused and dropped runners (R-1 by
 *    limiter_release_slot; a shed leaves R >= 1, so their "last one out"
 *    rule is as before), shutdown, shutdown_now, awaiters, the life word
 *    and memory orders (steps are sequentially consistent; the acquire
 *    that makes a cap of 1 a serial again is argued in the essay and left
 *    to TSan, test_limiter.c's limiter_lowered_to_one_is_a_serial_again).
 *
 * Properties:
 *  1. The bound: a task starts (is popped) only with running tasks,
 *     itself included, at most the cap of that moment (pop_lock holds the
 *     cap still). So after a lowering, once the running ones drain, the
 *     new cap holds; before it, nothing new starts.
 *  2. R never passes the largest cap ever set (a ghost peak).
 *  3. Nothing lost, nothing stuck: when every process has ended, each task
 *     ran exactly once, Q, U, R and running are 0, the queue is empty;
 *     no invalid end state (no process blocked for ever).
 *  4. Order: tasks are popped in the order of their pushes (the queue),
 *     and each producer's in its order (checked at each pop).
 * Mutations (each must make spin find a violation):
 *  MUT_SHED_LAST       the shed takes R >= cap: the last runner may shed
 *                      with tasks queued (property 3)
 *  MUT_NO_PEAK         set_max does not raise peak: after a raise and a
 *                      lowering back to the old peak, pops skip the check
 *                      (property 1)
 *  MUT_CAP_UNLOCKED    the pop reads the cap before taking pop_lock: a
 *                      lowering between the read and the pop goes unseen
 *                      (property 1)
 */
#ifndef NPROD
#define NPROD 2
#endif
#ifndef NTASK
#define NTASK 2
#endif
#ifndef CAP0
#define CAP0 2 /* the cap at create */
#endif
#ifndef CAP1
#define CAP1 1 /* the setter's first set_max */
#endif
#ifndef CAP2
#define CAP2 0 /* its second; 0: none */
#endif
#define NT (NPROD * NTASK)
#define NONE 255

byte R, U, Q;         /* st: runners out, holding a task, counted tasks */
byte cap = CAP0;      /* max_running */
byte peak = CAP0;     /* the largest cap set; under pop_lock */
bit pop_lock;
byte qbuf[NT];        /* the queue: task ids, pushed at qtail */
byte qhead, qtail;
byte ran[NT];         /* ghost: runs of each task */
byte running;         /* ghost: tasks popped and not returned */
byte gpeak = CAP0;    /* ghost: the largest cap ever set */
byte nextseq[NPROD];  /* ghost: each producer's next task to pop */

inline lock()
{
    atomic { pop_lock == 0 -> pop_lock = 1 }
}

inline unlock()
{
    pop_lock = 0
}

/* A slot taken: the ghost bound on R (property 2). */
inline took_slot()
{
    assert(R <= gpeak)
}

proctype runner()
{
    bit held = 0;
    bit shed;
    byte t, m;

pop:
#ifdef MUT_CAP_UNLOCKED
    m = cap;
    lock();
#else
    lock();
    m = cap;
#endif
    shed = 0;
    /* the shed (limiter_shed): only below the peak */
    if
#ifdef MUT_SHED_LAST
    :: m < peak ->
        atomic {
            if
            :: R >= m -> R--; if :: held -> U-- :: else fi; shed = 1
            :: else
            fi
        }
#else
    :: m < peak ->
        atomic {
            if
            :: R > m -> R--; if :: held -> U-- :: else fi; shed = 1
            :: else
            fi
        }
#endif
    :: else
    fi;
    m = 0; /* dead from here: fewer states */
    if
    :: shed -> unlock(); goto out
    :: else
    fi;
    /* the pop: a node, Q-1 and U+1 unless holding; the task starts */
    atomic {
        if
        :: qhead != qtail ->
            t = qbuf[qhead % NT];
            qhead++;
            Q--;
            if :: !held -> U++ :: else fi;
            held = 1;
            running++;
            assert(running <= cap); /* property 1: cap is still under lock */
            ran[t]++;
            assert(t % NTASK == nextseq[t / NTASK]); /* property 4 */
            nextseq[t / NTASK]++
        :: else -> t = NONE
        fi
    }
    unlock();
    if
    :: t != NONE ->
        atomic { running--; t = 0 }; /* the task returns */
        goto pop
    :: else
    fi;
    /* limiter_leave: exit only with Q == 0; else a push is under way */
    if
    :: atomic { Q == 0 -> R--; if :: held -> U-- :: else fi }
    :: atomic { Q != 0 } -> goto pop
    fi;
out:
    skip
}

proctype producer(byte id)
{
    byte i = 0, m, t;
    bit start;

    do
    :: i < NTASK ->
        t = id * NTASK + i;
        m = cap; /* relaxed: may be stale at the CAS */
        atomic {
            start = (R < m);
            Q++;
            if :: start -> R++; took_slot() :: else fi;
            m = 0
        };
        atomic { qbuf[qtail % NT] = t; qtail++; t = 0 }; /* the push */
        if :: start -> run runner(); start = 0 :: else fi;
        i++
    :: else -> break
    od
}

/* serex_limiter_set_max(l, c) */
inline set_max(c)
{
    lock();
    atomic {
        old = cap;
        cap = c;
#ifndef MUT_NO_PEAK
        if :: c > peak -> peak = c :: else fi;
#endif
        if :: c > gpeak -> gpeak = c :: else fi
    };
    unlock();
    if
    :: c > old -> /* the fill */
        do
        :: atomic { R < c && Q > R - U -> R++; took_slot() }; run runner()
        :: atomic { !(R < c && Q > R - U) } -> break
        od
    :: else
    fi
}

proctype setter()
{
    byte old;

    set_max(CAP1);
    if
    :: CAP2 != 0 -> set_max(CAP2)
    :: else
    fi
}

init {
    byte p;

    atomic {
        p = 0;
        do
        :: p < NPROD -> run producer(p); p++
        :: else -> break
        od;
        run setter()
    };
    /* the end: every other process has finished (property 3) */
    (_nr_pr == 1);
    assert(Q == 0 && U == 0 && R == 0 && running == 0 && qhead == qtail);
    p = 0;
    do
    :: p < NT -> assert(ran[p] == 1); p++
    :: else -> break
    od
}
