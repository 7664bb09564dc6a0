/*
 * pool_runq.pml - a pool worker's run queue and next-task slot
 * (src/pool_runq_internal.h) as src/pool_local.c and src/pool.c use them: the owner's local
 * push (pool_push_local, runq_overflow), its pop (pool_take), a thief's
 * steal (pool_steal: serex__runq_steal, then the delayed steal of the
 * slot, next_look) and shutdown_now's claim (pool_shutdown_now,
 * normal_claim, slot_claim), with the `moving` flag and STOP between them.
 *
 * Processes:
 *  - the owner (worker 0): pushes tasks 1..NTASK in order, each one call
 *    of pool_push_local: `moving` = 1, the STOP check (SHUTDOWN in C,
 *    which shutdown_now sets with STOP), then the slot push (the slot's
 *    task, if its CAS takes it, moves behind the run queue, or, with the
 *    run queue full, runq_overflow: the older half to the shared queue,
 *    then the task), or with YIELD the push straight into the run queue;
 *    `moving` = 0. Between pushes it pops: the slot, else the run queue
 *    (serex__runq_take of one), and runs what it took. It may stop at any
 *    point (a worker that leaves, or never comes back to its queues).
 *  - a thief (worker 1; THIEF 0 leaves it out): pool_steal: `moving` = 1,
 *    gives up at STOP, else serex__runq_steal of half the owner's run
 *    queue into its own (read the records, copy them, CAS the owner's
 *    head, publish its own tail) and takes one of them to run; if it
 *    found none and SLOTS, next_look: a peek at the owner's slot (its
 *    stamp), then serex__next_take with that stamp; `moving` = 0. It also
 *    pops its own run queue and takes from the shared queue, and may stop
 *    at any point.
 *  - shutdown_now (SHUT 1): sets STOP, waits until each slot's `moving`
 *    is 0 (the owner's, then the thief's, as the C loop), then under the
 *    shared queue's lock takes the shared queue, and claims each worker's
 *    run queue (CAS of head to tail) and slot (serex__next_take), and
 *    reads the claimed records after the claim. (The C code claims with
 *    serex__runq_take, reading before its CAS as a thief does; with no
 *    writer left once every `moving` is 0, both orders read the same.)
 *
 * Memory: every index and every field of a record is one atomic variable,
 * read and written in its own step (a record's `fn` and `stamp` apart, so
 * a reader can see them torn); Promela's interleavings are sequentially
 * consistent (README: what the models leave out). Indices are bytes that
 * never wrap in these sizes (the 64-bit indices of the C code), the ring
 * is CAP records (a power of two: 2 wraps after two tasks), and a task's
 * `fn` and `stamp` are both its number (stamps are unique per task, and
 * the owner submits in the order of the numbers).
 *
 * What is checked:
 *  - a task is never run or handed back twice, nor both (at the moment it
 *    is run or handed back);
 *  - no torn record: a taker whose CAS succeeds (pop, overflow, steal,
 *    claim, the slot's take) read, for each index it took, the `fn` and
 *    the `stamp` that the queue's owner wrote at that index (a ghost per
 *    index; the ring's records are rewritten after a wrap with another
 *    task); shutdown_now's reads after its claim as well;
 *  - when every process is done: each task whose push returned OK is
 *    exactly once run, handed back, or still in a queue; a refused one is
 *    nowhere; after shutdown_now every queue is empty (its claim was
 *    complete: nothing it must hand back can be left or come later), and
 *    each record it handed back carried its own stamp (the hand-back
 *    sorts by it; the sort itself is not modelled).
 *
 * Mutations (each must make spin find a violation):
 *  MUT_THIEF_STORE    the thief's CAS (on the run queue's head and on the
 *                     slot's) is a plain store: a task taken twice
 *  MUT_NO_ROOM        the owner's push does not check room against the
 *                     head it loads: it overwrites a record not yet taken
 *  MUT_NO_WAIT        shutdown_now does not wait for `moving` == 0: a
 *                     push that passed the STOP check lands after the
 *                     claim
 *  MUT_STOP_FIRST     the owner's push reads STOP before it sets `moving`
 */
#ifndef CAP
#define CAP 2 /* records in a run queue: SEREX__RUNQ_CAP */
#endif
#ifndef NTASK
#define NTASK 3 /* tasks the owner submits */
#endif
#ifndef SHUT
#define SHUT 1 /* a shutdown_now may come at any moment */
#endif
#ifndef YIELD
#define YIELD 0 /* pushes: 0 to the slot, 1 to the slot or a yield (straight
                 * into the run queue), 2 yields only */
#endif
#ifndef SLOTS
#define SLOTS 0 /* the thief steals the owner's slot too (next_look) */
#endif
#ifndef THIEF
#define THIEF 1 /* a thief */
#endif

#define HALF (CAP / 2)      /* the most a steal or an overflow takes */
#define IDX (NTASK + CAP)   /* logical indices per run queue (ghosts) */
#define OWN 0               /* the owner's run queue */
#define THF 1               /* the thief's */
#define NPROC (1 + THIEF + SHUT)

byte head[2];          /* q.head: CAS by any taker */
byte tail[2];          /* q.tail: its owner only */
byte rfn[2 * CAP];     /* the records' fn (task number; 0: never written) */
byte rst[2 * CAP];     /* the records' stamp */
byte wid[2 * IDX];     /* ghost: what the queue's owner wrote at an index */
byte nh;               /* the owner's next.head: CAS by any taker */
byte nt;               /* next.tail: the owner only */
byte nfn;              /* next.rec.fn */
byte nst;              /* next.rec.stamp */
byte nw[NTASK + 1];    /* ghost: what the owner put at a slot index */
bit moving[2];         /* slot->moving, the owner's and the thief's */
bit stop;              /* ST_STOP (with ST_SHUTDOWN) */
bit shlock;            /* the shared queue's locks (put and take) */
bit insh[NTASK + 1];   /* the shared queue, as a set */
bit acc[NTASK + 1];    /* ghost: its push returned SEREX_OK */
byte ran[NTASK + 1];   /* ghost: times run */
byte hb[NTASK + 1];    /* ghost: times handed back */
byte done;             /* ghost: processes finished */

#define REC(q, i) ((q) * CAP + (i) % CAP)
#define GHOST(q, i) wid[(q) * IDX + (i)]

/* A task leaves the queues for good: run it, or hand it back. */
inline run_task(id)
{
    assert(id >= 1 && id <= NTASK);
    assert(ran[id] + hb[id] == 0);
    ran[id]++
}

inline hand_back(id)
{
    assert(id >= 1 && id <= NTASK);
    assert(ran[id] + hb[id] == 0);
    hb[id]++
}

/* The locals every process uses with the inlines below. */
#define LOCALS \
    byte h, t, k, n, lt, s, old; \
    bit ok, rej; \
    byte gf[HALF]; \
    byte gs[HALF]

inline clear()
{
    h = 0; t = 0; k = 0; n = 0; lt = 0; s = 0; old = 0; ok = 0; rej = 0;
    gf[0] = 0; gs[0] = 0;
#if HALF > 1
    gf[1] = 0; gs[1] = 0;
#endif
}

/* Checks what a taker read for [h, h + n) against what was written. */
inline check_reads(q)
{
    k = 0;
    do
    :: k < n ->
        assert(gf[k] == GHOST(q, h + k) && gs[k] == GHOST(q, h + k));
        k++
    :: else -> break
    od
}

/* serex__runq_push: the owner of q only. ok: there was room. */
inline runq_push(q, id)
{
    /* head: acquire (a fresh load); tail is ours */
    atomic { h = head[q]; t = tail[q] };
#ifdef MUT_NO_ROOM
    if
    :: false -> ok = 0
#else
    if
    :: t - h == CAP -> ok = 0
#endif
    :: else ->
        atomic { rfn[REC(q, t)] = id; GHOST(q, t) = id };
        rst[REC(q, t)] = id;
        tail[q] = t + 1; /* seq_cst: publishes */
        ok = 1
    fi
}

/*
 * serex__runq_take of at most mx (1: a pop; HALF: an overflow; or a
 * claim of everything, mx CAP, whose reads come after the CAS). Anyone.
 * n: how many; gf/gs: what was read.
 */
inline runq_take(q, mx)
{
    h = head[q];
    do
    :: t = tail[q];
        if
        :: t == h -> n = 0; break
        :: t - h > CAP -> h = head[q] /* h went stale */
        :: else ->
            n = (t - h < mx -> t - h : mx);
            k = 0;
            do
            :: k < n ->
                gf[k] = rfn[REC(q, h + k)];
                gs[k] = rst[REC(q, h + k)];
                k++
            :: else -> break
            od;
            atomic {
                if
                :: head[q] == h -> head[q] = h + n; ok = 1
                :: else -> h = head[q]; ok = 0 /* the failed CAS loads */
                fi
            };
            if
            :: ok -> check_reads(q); break
            :: else -> skip
            fi
        fi
    od
}

/*
 * serex__next_take on the owner's slot: want 0, any task; else only the
 * one with that stamp (a thief's delayed steal). ok: it took gf[0].
 */
inline next_take(want, thief)
{
    h = nh;                   /* acquire */
    if
    :: nt == h -> ok = 0      /* acquire: empty */
    :: else ->
        gf[0] = nfn;
        gs[0] = nst;
        if
        :: want != 0 && gs[0] != want -> ok = 0
        :: else ->
            atomic {
                if
#ifdef MUT_THIEF_STORE
                :: thief -> nh = h + 1; ok = 1 /* a plain store */
                :: !thief && nh == h -> nh = h + 1; ok = 1
                :: !thief && nh != h -> ok = 0
#else
                :: nh == h -> nh = h + 1; ok = 1
                :: else -> ok = 0
#endif
                fi;
                if
                :: ok -> assert(gf[0] == nw[h] && gs[0] == nw[h])
                :: else -> skip
                fi
            }
        fi
    fi
}

/* serex__next_put: the owner, on a slot it saw empty. */
inline next_put(id)
{
    atomic { t = nt; nfn = id; nw[t] = id };
    nst = id;
    nt = t + 1 /* seq_cst: publishes */
}

/* runq_overflow: the older half to the shared queue, then id behind. */
inline runq_overflow(id)
{
    runq_take(OWN, HALF);
    if
    :: n != 0 ->
        /* inject_push_moved, under put_lock */
        atomic {
            shlock == 0 ->
            k = 0;
            do
            :: k < n -> insh[gf[k]] = 1; k++
            :: else -> break
            od
        }
    :: else -> skip
    fi;
    runq_push(OWN, id);
    assert(ok) /* we took n, or it was empty: there is room */
}

/* pool_push_local: id's push; acc[id] says whether it returned OK. */
inline push(id)
{
#ifdef MUT_STOP_FIRST
    rej = stop;
    moving[OWN] = 1;
#else
    moving[OWN] = 1;          /* seq_cst */
    rej = stop;               /* seq_cst */
#endif
    if
    :: rej -> skip            /* SEREX_EREJECTED */
#if YIELD != 0
    :: !rej ->                /* a yield: the back of the run queue */
        runq_push(OWN, id);
        if
        :: !ok -> runq_overflow(id)
        :: else -> skip
        fi
#endif
#if YIELD != 2
    :: !rej ->
        /* the slot's task moves behind the run queue (unless a thief
         * took it meanwhile: then the slot is free) */
        if
        :: nh != nt -> /* !serex__next_free (tail is ours) */
            next_take(0, 0);
            if
            :: ok ->
                old = gf[0];
                runq_push(OWN, old);
                if
                :: !ok -> runq_overflow(old)
                :: else -> skip
                fi
            :: else -> skip
            fi
        :: else -> skip
        fi;
        next_put(id)
#endif
    fi;
    atomic { moving[OWN] = 0; acc[id] = !rej; clear() } /* release */
}

active proctype owner()
{
    byte id = 1;
    LOCALS;

    do
    :: id <= NTASK -> push(id); id++
    :: /* pool_take: the slot, else the run queue */
        next_take(0, 0);
        if
        :: ok -> atomic { run_task(gf[0]); clear() }
        :: else ->
            runq_take(OWN, 1);
            atomic {
                if
                :: n != 0 -> run_task(gf[0])
                :: else -> skip
                fi;
                clear()
            }
        fi
    :: break
    od;
    atomic { done++; id = 0 }
}

#if THIEF
/* pool_steal: half the owner's run queue, else (SLOTS) its slot. */
inline steal()
{
    moving[THF] = 1;          /* seq_cst */
    if
    :: stop -> skip           /* seq_cst: STOP, give up */
    :: else ->
        /* serex__runq_steal(&thief's q, &owner's q) */
        lt = tail[THF];       /* ours */
        do
        :: h = head[OWN];
            t = tail[OWN];
            if
            :: t == h || t - h > CAP -> n = 0; break /* empty, or torn */
            :: else ->
                n = (t - h + 1) / 2;
                k = 0;
                do
                :: k < n ->
                    gf[k] = rfn[REC(OWN, h + k)];
                    gs[k] = rst[REC(OWN, h + k)];
                    atomic {
                        rfn[REC(THF, lt + k)] = gf[k];
                        GHOST(THF, lt + k) = gf[k]
                    };
                    rst[REC(THF, lt + k)] = gs[k];
                    k++
                :: else -> break
                od;
                atomic {
#ifdef MUT_THIEF_STORE
                    head[OWN] = h + n; ok = 1
#else
                    if
                    :: head[OWN] == h -> head[OWN] = h + n; ok = 1
                    :: else -> ok = 0
                    fi
#endif
                };
                if
                :: ok -> check_reads(OWN); break
                :: !ok -> skip /* another try (4 in C), or give up: */
                :: !ok -> n = 0; break
                fi
            fi
        od;
        if
        :: n != 0 ->
            tail[THF] = lt + n; /* seq_cst: publishes */
            runq_take(THF, 1);
            assert(n == 1);     /* nobody else takes from it now */
            atomic { run_task(gf[0]); clear() }
#if SLOTS
        :: else ->
            /* next_look: the peek, then (SLOT_STEAL_NS later) the take
             * of the same task, by its stamp */
            h = nh;
            if
            :: nt != h ->
                s = nst;
                next_take(s, 1);
                if
                :: ok -> atomic { run_task(gf[0]); clear() }
                :: else -> skip
                fi
            :: else -> skip
            fi
#else
        :: else -> skip
#endif
        fi
    fi;
    atomic { moving[THF] = 0; clear() } /* release */
}

active proctype thief()
{
    LOCALS;

    do
    :: head[THF] == tail[THF] -> steal() /* its own queue is empty */
    :: /* its own run queue */
        runq_take(THF, 1);
        atomic {
            if
            :: n != 0 -> run_task(gf[0])
            :: else -> skip
            fi;
            clear()
        }
    :: /* inject_take, under take_lock: one task of the shared queue */
        atomic {
            shlock == 0 ->
            k = 1;
            do
            :: k <= NTASK && insh[k] -> insh[k] = 0; run_task(k); break
            :: k <= NTASK && !insh[k] -> k++
            :: k > NTASK -> break
            od;
            k = 0
        }
    :: break
    od;
    done++
}
#endif

#if SHUT
/* pool_shutdown_now: STOP, wait for `moving`, claim, hand back. */
active proctype shutter()
{
    byte oh, ot, th, tt, id; /* what slot_claim took of each run queue */
    bit nok;
    LOCALS;

    stop = 1; /* the fetch_or of ST_SHUTDOWN | ST_STOP, seq_cst */
#ifndef MUT_NO_WAIT
    moving[OWN] == 0;
    moving[THF] == 0;
#endif
    atomic { shlock == 0 -> shlock = 1 }; /* every shard's locks */
    /* the shared queue: head moves to tail */
    atomic {
        k = 1;
        do
        :: k <= NTASK && insh[k] -> insh[k] = 0; hand_back(k); k++
        :: k <= NTASK && !insh[k] -> k++
        :: k > NTASK -> break
        od;
        k = 0
    };
    /* slot_claim(owner): its run queue, then its slot */
    h = head[OWN];
    do
    :: t = tail[OWN];
        if
        :: h == t -> break
        :: else ->
            atomic {
                if
                :: head[OWN] == h -> head[OWN] = t; oh = h; ot = t; ok = 1
                :: else -> h = head[OWN]; ok = 0
                fi
            };
            if
            :: ok -> break
            :: else -> skip
            fi
        fi
    od;
    next_take(0, 0);
    nok = ok;
    id = gf[0];
    /* slot_claim(thief): its run queue (its slot is never used) */
    h = head[THF];
    do
    :: t = tail[THF];
        if
        :: h == t -> break
        :: else ->
            atomic {
                if
                :: head[THF] == h -> head[THF] = t; th = h; tt = t; ok = 1
                :: else -> h = head[THF]; ok = 0
                fi
            };
            if
            :: ok -> break
            :: else -> skip
            fi
        fi
    od;
    shlock = 0;
    /* claimed_each: the records, read after the claim, handed back */
    do
    :: oh != ot ->
        atomic {
            assert(rfn[REC(OWN, oh)] == GHOST(OWN, oh) &&
                   rst[REC(OWN, oh)] == rfn[REC(OWN, oh)]);
            hand_back(rfn[REC(OWN, oh)]);
            oh++
        }
    :: th != tt ->
        atomic {
            assert(rfn[REC(THF, th)] == GHOST(THF, th) &&
                   rst[REC(THF, th)] == rfn[REC(THF, th)]);
            hand_back(rfn[REC(THF, th)]);
            th++
        }
    :: oh == ot && th == tt -> break
    od;
    if
    :: nok -> assert(gs[0] == id); hand_back(id)
    :: else -> skip
    fi;
    done++
}
#endif

/* When every process is done: each accepted task is exactly once run,
 * handed back or still queued; a refused one nowhere; after shutdown_now
 * nothing is queued. */
active proctype checker()
{
    byte id, i, cnt, inq;

    atomic {
        done == NPROC ->
        id = 1;
        do
        :: id <= NTASK ->
            inq = insh[id];
            if
            :: nh != nt && nfn == id -> inq++
            :: else -> skip
            fi;
            i = head[OWN];
            do
            :: i != tail[OWN] ->
                if
                :: rfn[REC(OWN, i)] == id -> inq++
                :: else -> skip
                fi;
                i++
            :: else -> break
            od;
            i = head[THF];
            do
            :: i != tail[THF] ->
                if
                :: rfn[REC(THF, i)] == id -> inq++
                :: else -> skip
                fi;
                i++
            :: else -> break
            od;
            cnt = ran[id] + hb[id] + inq;
            assert(cnt == acc[id]);
            assert(!stop || inq == 0);
            id++
        :: else -> break
        od
    }
}
