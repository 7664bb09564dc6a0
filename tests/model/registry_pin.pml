/*
 * registry_pin.pml - the dump registry's life cycle (src/registry.c; the
 * essay "How a dump walks the list while objects come and go" in
 * src/registry_internal.h): the circular doubly linked list around a
 * sentinel, under the one lock `mu`; the dumps' cursors and pins;
 * serex__reg_add, serex__reg_remove's wait for pins, and the owner's free
 * right after it; the fork hooks.
 *
 * Processes:
 *  - NDUMP dumps (dump_objects): the cursor linked after the head; then,
 *    for each object, reg_step under the lock (reg_next_live: past
 *    cursors and leaving nodes; the cursor moved past the node found; its
 *    pins++), the describe without the lock (it reads the object), the
 *    unpin under the lock (reg_unpin), the write-out with no lock and no
 *    pin (with WERR a failed write may end the walk there); at the end the
 *    cursor unlinked.
 *  - NOWN owners, each NCYC times: the object made (a node at the same
 *    address each time: NCYC 2 is a new object in the memory of a freed
 *    one), serex__reg_add (at the end of the list), serex__reg_remove (mark
 *    leaving; while pins != 0, unlock, yield, relock; unlink), then the
 *    free. Owners add and remove at any moment of the dumps' walks.
 *  - NSTAY objects on the list from the start that stay (something for
 *    the dumps to walk past and describe whatever the owners do).
 *  - FORK 1: owner 0, between its add and its remove, forks once:
 *    fork_prepare takes mu (no critical section is in progress), the
 *    child gets a copy of the list, serex__reg_fork_child runs in it (all
 *    pins to 0, every cursor unlinked, walking with the next saved before
 *    an unlink), then the child's one thread destroys every object it may
 *    (each one not leaving: the objects whose remove was in progress
 *    belong to threads the child does not have). The parent goes on as
 *    before (fork_parent's unlock). The child runs in one step: it has
 *    one thread.
 *  - FORK_IN_DUMP (not a configuration of the script, see the README): dump
 *    0 forks during its write-out, and the child's dump goes on with its
 *    walk.
 *
 * Abstractions: every critical section under mu is one indivisible step
 * (everything that touches the list's fields does so under mu, so this is
 * the lock), and the remover's unlock-yield-relock loop is a blocking wait
 * for pins == 0 with the unlink in the same step (a remover that waits for
 * ever is stuck, which the end check reports). A describe is one step that
 * reads the object (its fields other than the list's are written before
 * the add and never again). The JSON, the buffer, out-of-memory, symbols,
 * serex__reg_count and memory orders are left out (the spinlock's
 * acquire/release makes the steps under it sequentially consistent).
 *
 * Properties (assertions; the end check runs when nothing can move):
 *  1. a describe, and the unpin after it, never touch a freed object, nor
 *     a new object made in the memory of the one pinned (ghost gen);
 *  2. serex__reg_remove returns (unlinks) only when no dump is between its
 *     pin of the node and the end of its describe (ghost desc);
 *  3. at every step under the lock the list is well formed: from the head,
 *     next and prev agree, it comes back to the head, visits every node
 *     that is linked and no other, and count is the real nodes on it; at
 *     the end every cursor is unlinked, every owner's node too and freed,
 *     and no pin is left;
 *  4. no invalid end state, and when nothing can move every dump and
 *     owner has finished (no remover waits for ever); a dump describes
 *     each object (node and gen) at most once, so it terminates;
 *  5. a dump never pins a leaving node, nor a cursor;
 *  6. a dump that ends its walk has described every object that was on
 *     the list, not leaving, when its cursor went in and still is (same
 *     gen, not leaving) when it comes out;
 *  7. fork: the child's list is well formed, with no cursor; each remove
 *     the child makes finds no pin (else it would wait for ever: the
 *     dumps that pinned are not in the child).
 *
 * Mutations (each must make spin find a violation):
 *  MUT_REMOVE_NO_WAIT    serex__reg_remove marks and unlinks without
 *                        waiting for pins
 *  MUT_PIN_LEAVING       reg_next_live skips cursors only: a dump pins a
 *                        leaving node
 *  MUT_UNPIN_UNLOCKED    reg_unpin outside the lock, as a load and a store
 *  MUT_PIN_CURSOR        reg_next_live skips leaving nodes only: a dump
 *                        pins another dump's cursor
 *  MUT_NO_CURSOR         the dump keeps a pointer to the node it described
 *                        instead of a cursor, and steps from its next
 *  MUT_FORK_KEEP_PINS    serex__reg_fork_child leaves the pins (FORK 1)
 *
 * Check (scripts/check_model.sh runs its configurations the same way):
 *   spin -a -DNDUMP=2 -DNOWN=2 registry_pin.pml
 *   gcc -O1 -w -DSAFETY -o pan pan.c && ./pan -m200000 -w24
 * Configurations and what they give: see tests/model/README.md and
 * scripts/check_model.sh (registry-*).
 */
#ifndef NDUMP
#define NDUMP 2
#endif
#ifndef NOWN
#define NOWN 2
#endif
#ifndef NSTAY
#define NSTAY 1
#endif
#ifndef NCYC
#define NCYC 1
#endif
#ifndef FORK
#define FORK 0
#endif
#ifndef WERR
#define WERR 0
#endif

/* nodes: the head, the staying objects, the owners', the cursors */
#define HEAD 0
#define FIRSTOWN (1 + NSTAY)
#define FIRSTCUR (1 + NSTAY + NOWN)
#define N (1 + NSTAY + NOWN + NDUMP)
#define NIL 255
#define ISCUR(x) ((x) >= FIRSTCUR)

#if FORK || defined(FORK_IN_DUMP)
#define NL 2 /* two lists: the process's, and at N its child's copy */
#else
#define NL 1
#endif
byte ln[NL * N], lp[NL * N]; /* next, prev; NIL while not on the list */
#define CH N /* the child's list: ln[CH + i] */
byte pins[N];
bit leaving[N];
byte count;          /* real nodes linked */

/* ghosts */
bit freed[N];   /* the object's memory is freed */
byte gen[N];    /* objects made at the node's address so far */
byte desc[N];   /* dumps between their pin of the node and their describe's end */
byte ndone;     /* dumps and owners finished */

/* scratch, 0 between steps */
byte wi, wn, wc, la;

#if FORK || defined(FORK_IN_DUMP)
byte cpi[N]; /* the child's pins (its list: ln[CH + i]) */
byte cc, fr, fx;
bit forked;
#endif

/* Under mu: links r in after at (a variable, read before the moves). */
inline link_after(B, lr, lat)
{
    lp[B + lr] = lat;
    ln[B + lr] = ln[B + lat];
    lp[B + ln[B + lat]] = lr;
    ln[B + lat] = lr
}

/* Under mu. */
inline unlink(B, ur)
{
    ln[B + lp[B + ur]] = ln[B + ur];
    lp[B + ln[B + ur]] = lp[B + ur];
    ln[B + ur] = NIL;
    lp[B + ur] = NIL
}

/* Property 3: the list well formed, CNT real nodes on it. */
inline wf(B, CNT)
{
    wi = HEAD;
    wn = 0;
    do
    :: assert(ln[B + wi] != NIL && lp[B + ln[B + wi]] == wi);
        wi = ln[B + wi];
        wn++;
        if
        :: wi == HEAD -> break
        :: else -> assert(wn < N)
        fi
    od;
    wi = 0;
    do
    :: wi < N ->
        assert((ln[B + wi] == NIL) == (lp[B + wi] == NIL));
        if
        :: ln[B + wi] != NIL ->
            wn--;
            if
            :: wi != HEAD && !ISCUR(wi) -> wc++
            :: else -> skip
            fi
        :: else -> skip
        fi;
        wi++
    :: else -> break
    od;
    assert(wn == 0 && wc == CNT);
    wi = 0;
    wc = 0
}

/* Under mu: reg_next_live from nc into nres. */
inline next_live(nc, nres)
{
    nres = ln[nc];
    do
#if defined(MUT_PIN_LEAVING)
    :: nres != HEAD && ISCUR(nres) ->
#elif defined(MUT_PIN_CURSOR)
    :: nres != HEAD && leaving[nres] ->
#else
    :: nres != HEAD && (ISCUR(nres) || leaving[nres]) ->
#endif
        nres = ln[nres];
        wn++;
        assert(wn < N)
    :: else -> break
    od;
    wn = 0
}

#if FORK || defined(FORK_IN_DUMP)
/* fork() by the thread whose node (object or cursor) is who, holding no
 * lock: prepare takes mu (one step: nobody is in a critical section), the
 * child's memory is a copy, serex__reg_fork_child runs in it, and the
 * child's one thread goes on; the parent's state is left as it was. */
inline fork(who)
{
    d_step {
        forked = 1;
        wi = 0;
        do
        :: wi < N ->
            ln[CH + wi] = ln[wi];
            lp[CH + wi] = lp[wi];
            cpi[wi] = pins[wi];
            wi++
        :: else -> break
        od;
        wi = 0;
        cc = count;
        /* serex__reg_fork_child */
        fr = ln[CH + HEAD];
        do
        :: fr != HEAD ->
            fx = ln[CH + fr];
#ifndef MUT_FORK_KEEP_PINS
            cpi[fr] = 0;
#endif
            if
            :: ISCUR(fr) -> unlink(CH, fr)
            :: else -> skip
            fi;
            fr = fx
        :: else -> break
        od;
        wf(CH, cc);
        /* the child's thread goes on: a dump from its cursor */
        if
        :: ISCUR(who) -> assert(ln[CH + who] != NIL)
        :: else -> skip
        fi;
        /* it destroys what it may: each remove waits for 0 pins, which
         * only its own thread could drop */
        fr = ln[CH + HEAD];
        do
        :: fr != HEAD ->
            fx = ln[CH + fr];
            assert(!ISCUR(fr) && !freed[fr]);
            if
            :: !leaving[fr] ->
                assert(cpi[fr] == 0);
                unlink(CH, fr);
                cc--
            :: else -> skip
            fi;
            fr = fx
        :: else -> break
        od;
        wf(CH, cc);
        /* the child's state back to 0 */
        wi = 0;
        do
        :: wi < N ->
            ln[CH + wi] = 0;
            lp[CH + wi] = 0;
            cpi[wi] = 0;
            wi++
        :: else -> break
        od;
        wi = 0;
        cc = 0;
        fr = 0;
        fx = 0
    }
}
#endif

/* An owner's object at node x: made, added, removed, freed, NCYC times. */
proctype owner(byte x)
{
    byte k;
    bit gone;

    do
    :: k < NCYC ->
        d_step { /* made, then serex__reg_add */
            assert(ln[x] == NIL);
            freed[x] = 0;
            gen[x]++;
            pins[x] = 0;
            leaving[x] = 0;
            la = lp[HEAD];
            link_after(0, x, la);
            la = 0;
            count++;
            wf(0, count)
        };
#if FORK
        if
        :: x == FIRSTOWN && !forked -> fork(x)
        :: skip
        fi;
#endif
        /* serex__reg_remove */
#ifdef MUT_REMOVE_NO_WAIT
        d_step {
            leaving[x] = 1;
            unlink(0, x);
            count--;
            wf(0, count);
            assert(desc[x] == 0)
        };
#else
        d_step {
            leaving[x] = 1;
            if
            :: pins[x] == 0 ->
                unlink(0, x);
                count--;
                wf(0, count);
                assert(desc[x] == 0);
                gone = 1
            :: else -> skip
            fi
        };
        if
        :: !gone ->
            /* unlock, yield, relock until pins == 0 */
            d_step {
                pins[x] == 0 ->
                unlink(0, x);
                count--;
                wf(0, count);
                assert(desc[x] == 0)
            }
        :: else -> skip
        fi;
#endif
        d_step { /* the destroy frees the object right after */
            freed[x] = 1;
            gone = 0;
            k++
        }
    :: else -> break
    od;
    atomic { ndone++; k = 0 }
}

/* dump_objects, with cursor node c. */
proctype dump(byte c)
{
    byte r;       /* the node pinned; HEAD: none */
    byte pg;      /* its gen at the pin */
    byte seen[N]; /* gen of each node described (property 4) */
    byte pre[N];  /* gen of each object on the list at the start */
    bit stopped;  /* a failed write ended the walk */
#ifdef MUT_NO_CURSOR
    byte p;       /* the node described last; HEAD at first */
#endif
#ifdef MUT_UNPIN_UNLOCKED
    byte t;
#endif

    d_step {
#ifndef MUT_NO_CURSOR
        la = HEAD;
        link_after(0, c, la);
        la = 0;
#endif
        wi = 0;
        do
        :: wi < N ->
            if
            :: wi != HEAD && !ISCUR(wi) && ln[wi] != NIL && !leaving[wi] ->
                pre[wi] = gen[wi]
            :: else -> skip
            fi;
            wi++
        :: else -> break
        od;
        wi = 0;
        wf(0, count)
    };
    do
    :: d_step { /* reg_step */
#ifdef MUT_NO_CURSOR
            assert(p == HEAD || (!freed[p] && ln[p] != NIL));
            next_live(p, r);
#else
            next_live(c, r);
#endif
            if
            :: r != HEAD ->
                assert(!ISCUR(r)); /* a cursor has no class to describe */
                assert(!leaving[r] && !freed[r]);
#ifdef MUT_NO_CURSOR
                p = r;
#else
                unlink(0, c);
                link_after(0, c, r);
#endif
                pins[r]++;
                desc[r]++;
                pg = gen[r];
                assert(seen[r] != pg);
                seen[r] = pg
            :: else -> skip
            fi;
            wf(0, count)
        };
        if
        :: r == HEAD -> break
        :: else -> skip
        fi;
        /* the describe, without the lock: it reads the object */
        d_step {
            assert(!freed[r] && gen[r] == pg);
            desc[r]--
        };
        /* reg_unpin */
#ifdef MUT_UNPIN_UNLOCKED
        t = pins[r];
        d_step {
            assert(!freed[r] && gen[r] == pg);
            pins[r] = t - 1;
            t = 0;
            r = HEAD;
            pg = 0
        };
#else
        d_step {
            assert(!freed[r] && gen[r] == pg);
            pins[r]--;
            r = HEAD;
            pg = 0
        };
#endif
        /* the write-out: no lock, no pin */
#ifdef FORK_IN_DUMP
        if
        :: c == FIRSTCUR && !forked -> fork(c)
        :: skip
        fi;
#endif
#if WERR
        if
        :: skip
        :: stopped = 1; break /* a failed write */
        fi
#else
        skip
#endif
    od;
    atomic { /* the cursor out, under mu */
#ifndef MUT_NO_CURSOR
        unlink(0, c);
#endif
        wf(0, count);
        /* property 6 */
        wi = 0;
        do
        :: wi < N ->
            if
            :: !stopped && pre[wi] != 0 && ln[wi] != NIL && !leaving[wi] &&
                gen[wi] == pre[wi] ->
                assert(seen[wi] == pre[wi])
            :: else -> skip
            fi;
            seen[wi] = 0;
            pre[wi] = 0;
            wi++
        :: else -> break
        od;
        wi = 0;
        stopped = 0;
#ifdef MUT_NO_CURSOR
        p = 0;
#endif
        ndone++
    }
}

init
{
    byte i;

    atomic {
        ln[HEAD] = HEAD;
        lp[HEAD] = HEAD;
        i = 1;
        do
        :: i < N ->
            ln[i] = NIL;
            lp[i] = NIL;
            i++
        :: else -> break
        od;
        i = 1;
        do
        :: i < FIRSTOWN -> /* the staying objects */
            gen[i] = 1;
            la = lp[HEAD];
            link_after(0, i, la);
            la = 0;
            count++;
            i++
        :: else -> break
        od;
        i = 0;
        do
        :: i < NOWN -> run owner(FIRSTOWN + i); i++
        :: else -> break
        od;
        i = 0;
        do
        :: i < NDUMP -> run dump(FIRSTCUR + i); i++
        :: else -> break
        od;
        i = 0
    };
    /* the end check: nothing can move */
    timeout ->
    d_step {
        assert(ndone == NOWN + NDUMP);
        wf(0, count);
        assert(count == NSTAY);
        i = 0;
        do
        :: i < N ->
            assert(pins[i] == 0 && desc[i] == 0);
            if
            :: ISCUR(i) -> assert(ln[i] == NIL)
            :: i >= FIRSTOWN && !ISCUR(i) -> assert(ln[i] == NIL && freed[i])
            :: else -> skip
            fi;
            i++
        :: else -> break
        od
    }
}
