/*
 * trace_ring.pml - the flight recorder's rings (src/trace.c, "The rings
 * and their state words, demystified"): the per-ring state word
 * (gen << 2 | FREE/IDLE/BUSY/CLOSED), the claim word (gen, ON, next
 * index), the drop word (gen, count), recording threads and the control
 * side (start, stop, write) of two traces in a row.
 *
 * Processes:
 *  - NTHR recording threads, NREC calls of serex__trace_record each, at
 *    any moment (before the first trace, during either, between them,
 *    after). A call is the fast path (the CAS from the thread's tag
 *    gen|IDLE to BUSY on its ring, then ring_put and ring_leave) or, when
 *    that fails or the thread has no ring, trace_record_slow: the relaxed
 *    first look at the claim word, the refused check (trace_refused),
 *    trace_claim (the draw of the next index on the claim word, then the
 *    CAS of that ring from gen|FREE to gen|BUSY), and on a refusal the
 *    drop word's increment (trace_count_drop). A thread that recorded in
 *    the first trace and calls again in the second is the stale owner:
 *    its tag has the old gen, and its swap may come at any moment after
 *    it "loaded" it (thread-local, so any delay before the swap is an
 *    interleaving here), including after the second start.
 *  - the controller (the control mutex makes it one process): start of
 *    trace 1 with NR1 rings (max_threads), stop, write, start of trace 2
 *    with NR2 rings, stop, write. start: the old buffer freed, each ring
 *    reset (its plain fields ev and head, then the release store of
 *    gen|FREE), the drop word, then the claim word gen|ON|0. stop: the
 *    fetch_and that clears ON (and gives `claimed`), then ring_close of
 *    each ring: FREE or IDLE -> CLOSED, waiting while BUSY. write: reads
 *    rings 0 .. min(claimed, nrings) - 1, head, then the event's two
 *    halves, and the drop word.
 * NS = 3 static ring headers (SEREX_TRACE_MAX_THREADS): a thread that
 * draws an index >= nrings finds a ring that is not FREE in this gen (never
 * reset, or still CLOSED from a trace with more rings) and is dropped.
 *
 * Abstractions: each trace's event buffer is one slot per ring (mask 0:
 * every event overwrites the last, as a full ring does), and an event is
 * two halves, ba and bb, that ring_put writes in two steps (the value
 * me * NREC + k + 1, unique per call), so a read racing a write can see
 * them torn; head++ goes with the second half. Buffers are indexed by
 * trace (gen), as each start allocates a new one and frees the last.
 * Each atomic operation is one step; the claim's load-and-CAS loop and
 * the drop's are one step each (a failed CAS only reloads and decides
 * again); ring_close's spin on BUSY is a blocking wait for "not BUSY"
 * followed by the swap in the same step (a stop that waits for ever is an
 * invalid end state). The observe.c hint flag, the clock, the JSON and
 * the pairing are left out; so are memory orders (the steps are
 * sequentially consistent: the release/acquire pairs are argued in the
 * essay) and the 24-bit saturation of the claim and drop counts.
 *
 * Properties (assertions; spin also checks end states):
 *  1. an event is written only while its ring's word is the writer's
 *     gen|BUSY, into a buffer not yet freed, of a trace whose stop has not
 *     returned (stopped[g]); the owner's release store finds its own BUSY
 *     (nobody closed or reset the ring under it); stop closes only FREE
 *     or IDLE words of its own gen (its SEREX_ASSERT);
 *  2. the writer, after stop: head of each ring it reads is the number of
 *     completed records in it (ring_leave done) in that trace, the slot
 *     holds the newest completed one, both halves equal (not torn), the
 *     ring's ev is that trace's buffer; a ring it skips (index >=
 *     claimed) has no completed record; the drop word is that trace's
 *     and counts no more than the calls refused in it;
 *  3. an owner writes only into the buffer of the trace it claimed its
 *     ring in (a stale owner never writes the new trace's events);
 *  4. each ring index is claimed by at most one thread per trace, and
 *     only that thread's fast-path swap succeeds on it;
 *  5. stop terminates: no invalid end state, and when nothing can move
 *     every thread and the controller have finished.
 *
 * Mutations (each must make spin find a violation):
 *  MUT_STOP_NO_WAIT      ring_close closes a BUSY ring without waiting
 *  MUT_OWNER_NO_CAS      the fast path is a plain load of the word, then a
 *                        store of BUSY if it held our tag
 *  MUT_NO_GEN            the state words and tags have no generation (a
 *                        stale owner's or claimer's swap can succeed in a
 *                        newer trace)
 *  MUT_STOP_SKIPS_FREE   stop closes IDLE rings only, leaving FREE ones
 *                        open (a claimer that drew before ON was cleared
 *                        takes its ring after stop)
 *  MUT_STOP_WAITS_FOR_IDLE  ring_close swaps from IDLE only (retrying on
 *                        FREE as on BUSY): a ring nobody claimed keeps
 *                        stop waiting for ever
 *  MUT_CLAIM_IGNORES_ON  trace_claim draws an index without checking ON
 *                        (a thread whose first look saw ON draws after
 *                        stop's fetch_and: beyond `claimed`)
 *  MUT_DROP_NO_GEN       the drop is counted whatever the drop word's gen
 *                        (a late drop of trace 1 counts in trace 2)
 *
 * Check (scripts/check_model.sh runs its configurations the same way):
 *   spin -a -DNTHR=3 -DNREC=2 trace_ring.pml
 *   gcc -O1 -w -DSAFETY -o pan pan.c && ./pan -m200000 -w24
 * Configurations and what they give: see tests/model/README.md and
 * scripts/check_model.sh (trace-*).
 */
#ifndef NTHR
#define NTHR 3
#endif
#ifndef NREC
#define NREC 2
#endif
#ifndef NR1
#define NR1 2 /* max_threads of trace 1 */
#endif
#ifndef NR2
#define NR2 1 /* of trace 2 */
#endif
#define NS 3    /* the static ring headers (SEREX_TRACE_MAX_THREADS) */
#define NG 3    /* traces 1 and 2; 0: none yet */
#define NONE 255

#define FREE 0
#define IDLE 1
#define BUSY 2
#define CLOSED 3
#ifdef MUT_NO_GEN
#define TAG(g, st) (st)
#else
#define TAG(g, st) ((g) * 4 + (st))
#endif
#define AT(g, r) ((g) * NS + (r))

byte rs[NS];      /* each ring's state word */
byte rev[NS];     /* its ev: the trace (gen) whose buffer it points to */
byte head[NS];    /* its head */
byte ba[NG * NS]; /* the buffers: trace g's slot of ring r, two halves */
byte bb[NG * NS];
bit con;          /* the claim word: ON, */
byte cgen;        /* gen, */
byte cnext;       /* next index */
byte dgen;        /* the drop word: gen, */
byte dcnt;        /* count */

/* ghosts */
byte rg[NS];       /* the trace whose FREE start stored in ring r last */
bit freed[NG];     /* trace g's buffer freed (by the next start) */
bit stopped[NG];   /* stop of trace g has returned */
byte owner[NG * NS]; /* the thread (+1) that claimed ring r in trace g */
byte ndone[NG * NS]; /* records completed (ring_leave) there */
byte last[NG * NS];  /* the newest one's value */
byte ndrop[NG];    /* record calls refused in trace g */
byte ended;        /* recording threads finished */

/* a record call's end: its dead locals back to 0 (fewer states) */
#define DONE() g = 0; idx = 0; b = 0; on = 0; ok = 0

/* ring_put into ring r by an owner of trace mygen: value v, two halves */
inline put(r, v)
{
    atomic {
        b = rev[r];
        assert(b == mygen && !freed[b] && !stopped[b]);
        assert(rs[r] == idle + 1);
        ba[AT(b, r)] = v
    };
    atomic {
        assert(!freed[b] && !stopped[b] && rs[r] == idle + 1);
        bb[AT(b, r)] = v;
        head[r]++
    }
}

/* ring_leave: the release store of our tag */
inline leave(r, v)
{
    atomic {
        assert(rs[r] == idle + 1); /* still our BUSY */
        rs[r] = idle;
        ndone[AT(b, r)]++;
        last[AT(b, r)] = v;
        DONE()
    }
}

/* trace_count_drop(g), after a refusal counted in ndrop[g] */
inline count_drop(g)
{
    atomic {
#ifdef MUT_DROP_NO_GEN
        dcnt++;
#else
        if
        :: dgen == g -> dcnt++
        :: else -> skip
        fi;
#endif
        DONE()
    }
}

proctype rec(byte me)
{
    byte mine = NONE; /* trace_mine: the ring's index */
    byte idle;        /* trace_mine_idle */
    byte refused;     /* trace_refused */
    byte mygen;       /* ghost: the trace we claimed mine in */
    byte k, v, g, idx, b;
    bit on, ok;
#ifdef MUT_OWNER_NO_CAS
    byte s;
#endif

    do
    :: /* serex__trace_record: the fast path, CAS our tag -> BUSY */
#ifdef MUT_OWNER_NO_CAS
        atomic {
            k < NREC ->
            k++;
            v = me * NREC + k;
            ok = 0;
            if
            :: mine != NONE -> s = rs[mine]
            :: else -> s = NONE
            fi
        };
        atomic {
            if
            :: mine != NONE && s == idle -> rs[mine] = idle + 1; ok = 1
            :: else -> skip
            fi
        };
        assert(!ok || owner[AT(rg[mine], mine)] == me + 1);
#else
        atomic {
            k < NREC ->
            k++;
            v = me * NREC + k;
            ok = 0;
            if
            :: mine != NONE && rs[mine] == idle ->
                rs[mine] = idle + 1; ok = 1;
                assert(owner[AT(rg[mine], mine)] == me + 1)
            :: else -> skip
            fi
        };
#endif
        if
        :: ok -> put(mine, v); leave(mine, v)
        :: else ->
            /* trace_record_slow: the first look, the refused check */
            atomic {
                g = cgen;
                on = con;
                if
                :: on && refused == g -> ndrop[g]++
                :: !on -> DONE()
                :: else -> skip
                fi
            };
            if
            :: !on -> skip
            :: on && refused == g -> count_drop(g)
            :: else ->
                /* trace_claim: the draw (load and CAS loop) */
                atomic {
                    g = cgen;
#ifdef MUT_CLAIM_IGNORES_ON
                    if
                    :: g == 0 -> DONE(); idx = NONE
                    :: else -> idx = cnext; cnext++
                    fi
#else
                    if
                    :: !con -> DONE(); idx = NONE
                    :: else -> idx = cnext; cnext++
                    fi
#endif
                };
                if
                :: idx == NONE -> idx = 0
                :: else ->
                    /* the ring's CAS gen|FREE -> gen|BUSY; on a failure
                     * trace_refused = gen */
                    atomic {
                        if
                        :: idx < NS && rs[idx] == TAG(g, FREE) ->
                            rs[idx] = TAG(g, BUSY); ok = 1;
                            assert(owner[AT(rg[idx], idx)] == 0);
                            owner[AT(rg[idx], idx)] = me + 1;
                            mine = idx;
                            idle = TAG(g, IDLE);
                            mygen = g
                        :: else -> refused = g; ndrop[g]++
                        fi
                    };
                    if
                    :: ok -> put(mine, v); leave(mine, v)
                    :: else -> count_drop(g)
                    fi
                fi
            fi
        fi
    :: atomic { k == NREC -> ended++ }; break
    od
}

/* start of trace g with nr rings */
inline start(g, nr)
{
    atomic { freed[g - 1] = 1; i = 0 }; /* serex__free(trace_ctl.events) */
    do
    :: atomic { i < nr -> rev[i] = g; head[i] = 0 }; /* ring_reset's plain fields */
        atomic { rs[i] = TAG(g, FREE); rg[i] = g; i++ } /* its release store */
    :: else -> break
    od;
    atomic { dgen = g; dcnt = 0 };
    atomic { cgen = g; cnext = 0; con = 1 } /* release */
}

/* stop of trace g with nr rings */
inline stop(g, nr)
{
    atomic { claimed = cnext; con = 0; i = 0 }; /* fetch_and ~ON */
    do
    :: i < nr ->
        /* ring_close */
#if defined(MUT_STOP_NO_WAIT)
        atomic {
            assert(rs[i] != TAG(g, CLOSED));
            rs[i] = TAG(g, CLOSED);
            i++
        }
#elif defined(MUT_STOP_WAITS_FOR_IDLE)
        atomic {
            rs[i] == TAG(g, IDLE) ->
            rs[i] = TAG(g, CLOSED);
            i++
        }
#elif defined(MUT_STOP_SKIPS_FREE)
        atomic {
            rs[i] != TAG(g, BUSY) ->
            assert(rs[i] == TAG(g, FREE) || rs[i] == TAG(g, IDLE));
            if
            :: rs[i] == TAG(g, IDLE) -> rs[i] = TAG(g, CLOSED)
            :: else -> skip
            fi;
            i++
        }
#else
        atomic {
            rs[i] != TAG(g, BUSY) ->
            assert(rs[i] == TAG(g, FREE) || rs[i] == TAG(g, IDLE));
            rs[i] = TAG(g, CLOSED);
            i++
        }
#endif
    :: else -> break
    od;
    atomic {
        stopped[g] = 1;
        if
        :: claimed < nr -> used = claimed
        :: else -> used = nr
        fi;
        i = 0
    }
}

/* serex_trace_write of trace g with nr rings: reads rings 0 .. used - 1 */
inline write(g, nr)
{
    do
    :: atomic {
            i < used ->
            assert(rev[i] == g);
            h = head[i];
            assert(h == ndone[AT(g, i)])
        };
        if
        :: h > 0 ->
            x = ba[AT(g, i)];
            atomic {
                y = bb[AT(g, i)];
                assert(x == y && x == last[AT(g, i)])
            }
        :: else -> skip
        fi;
        i++
    :: atomic {
            i >= used && i < nr ->
            assert(ndone[AT(g, i)] == 0); /* a ring the writer skips */
            i++
        }
    :: else -> break
    od;
    atomic {
        assert(dgen == g && dcnt <= ndrop[g]);
        i = 0; h = 0; x = 0; y = 0; claimed = 0; used = 0
    }
}

active proctype ctl()
{
    byte i, claimed, used, h, x, y;

    start(1, NR1);
    stop(1, NR1);
    write(1, NR1);
    start(2, NR2);
    stop(2, NR2);
    write(2, NR2)
}

active proctype endcheck()
{
    timeout -> assert(ended == NTHR && stopped[2])
}

init
{
    byte t = 0;

    atomic {
        do
        :: t < NTHR -> run rec(t); t++
        :: else -> break
        od
    }
}
