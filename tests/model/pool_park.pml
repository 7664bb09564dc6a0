/*
 * pool_park.pml - the pool's park handshake (src/pool_idle.c, "Parking" in its
 * essay), with the hand-over of the spinner's flag to a woken worker.
 *
 * Processes: NPROD producers, each making NTASK calls to pool_execute
 * (push, then pool_signal_work), and NWORK workers (take, or spin, or
 * park). Every shared variable is one seq_cst atomic or lives under `mu`,
 * as in the C code; Promela's interleavings are sequentially consistent,
 * which is what the seq_cst accesses of the handshake give.
 *
 * What is checked (scripts/check_model.sh; tests/model/README.md):
 *  - no lost wake-up: when nothing can move any more (every producer done,
 *    every worker waiting on its token word), no task is queued;
 *  - the spinner's flag is not left set, nor a token unserved, then;
 *  - at most one worker ever holds the flag (a token that carries it
 *    counts as its holder until a worker takes it).
 *
 * Abstractions: the ring and the workers' batches are one count `q`
 * (pool_has_work reads both: a task in a batch is seen as a task in the
 * ring); the spin window is a nondeterministic choice (a spinner may give
 * up at any step). Parked workers are a list under `mu` (`listed`; the C
 * code pops the last parked, here any listed one: that covers it), and
 * each waits on its own token word until a waker, having taken it off the
 * list under `mu`, stores a token there (after unlocking, in C: the store
 * is one step here, and a worker waits for the word, not for a signal, so
 * a store before the worker sleeps is not lost).
 *
 * Mutations (each must make spin find a violation):
 *  MUT_TOKEN_NO_ROLE          the worker that takes a token carrying the
 *                             flag does not act as the spinner
 *  MUT_RECHECK_BEFORE_ANNOUNCE a parking worker re-checks the queue before
 *                             it counts in `sleepers`
 *  MUT_LIST_AFTER_UNLOCK      a parking worker counts in `sleepers` under
 *                             `mu` but goes on the list after unlocking:
 *                             a waker can find `sleepers` without a worker
 *                             to hand the token to
 *  MUT_RETIRE_UNLISTED        (ELASTIC) a worker whose keep-alive passes
 *                             retires without asking whether it is still
 *                             on the list (a waker that took it off stores
 *                             its token after unlocking)
 * NO_HANDOFF: the protocol before the hand-over (must pass as well).
 * ELASTIC: a parked worker's keep-alive may pass at any moment; under `mu`
 * it retires if it is still on the list and more than one worker is left
 * (the core count), else waits on (pool_thread.c's park).
 */
#ifndef NPROD
#define NPROD 1
#endif
#ifndef NTASK
#define NTASK 2
#endif
#ifndef NWORK
#define NWORK 2
#endif
#ifndef ELASTIC
#define ELASTIC 0
#endif

byte q;          /* tasks queued and not taken: the ring and the batches */
bit spinning;    /* p->spinning */
byte sleepers;   /* p->sleepers */
bit mu;          /* p->mu */
bit listed[NWORK]; /* on p->idle, under mu */
byte token[NWORK]; /* slot->token: 0, WAKE (1), WAKE|SPIN (3) */
byte roles;      /* ghost: holders of the flag (a carrying token counts) */
byte prods_done; /* ghost */
byte live = NWORK; /* workers not retired (ELASTIC: the core count is 1) */

inline lock()
{
    atomic { mu == 0 -> mu = 1 }
}

inline unlock()
{
    mu = 0
}

/* pool_wake_one: the last parked worker (any listed one here) off the
 * list, and a token to it; the token carries the flag when no one spins
 * (the CAS of `spinning` from 0 to 1). */
inline wake_one()
{
    lock();
    if
    :: sleepers > 0 ->
        /* sleepers is the list's length under mu */
        assert(listed[0] || (NWORK > 1 && listed[1]) ||
               (NWORK > 2 && listed[2]));
        if
        :: listed[0] -> who = 0
#if NWORK > 1
        :: listed[1] -> who = 1
#endif
#if NWORK > 2
        :: listed[2] -> who = 2
#endif
        fi;
        listed[who] = 0;
        sleepers--;
        tok = 1;
#ifndef NO_HANDOFF
        atomic {
            if
            :: spinning == 0 ->
                spinning = 1;
                tok = 3;
                roles++;
                assert(roles <= 1)
            :: else -> skip
            fi
        }
#endif
        unlock();
        /* token_give, after unlocking */
        atomic { token[who] = tok; who = 0; tok = 0 }
    :: else -> unlock()
    fi
}

/* pool_signal_work: two loads, then perhaps a wake-up. */
inline signal_work()
{
    if
    :: spinning != 0 -> skip
    :: else ->
        if
        :: sleepers != 0 -> wake_one()
        :: else -> skip
        fi
    fi
}

active [NPROD] proctype producer()
{
    byte i = 0, who, tok;

    do
    :: i < NTASK ->
        q++; /* ring_push's store of tail */
        i++;
        signal_work()
    :: else -> break
    od;
    prods_done++
}

proctype worker(byte me)
{
    byte who, tok;
    bit was_idle = 1;
    bit owned = 0;
    bit spinner = 0;

take:
    if
    :: atomic { q > 0 -> q-- } ->
        /* took a task; a worker back from idle with more queued makes
         * sure a sleeper helps */
        if
        :: was_idle && q > 0 -> signal_work()
        :: else -> skip
        fi;
        was_idle = 0;
        goto take
    :: else -> skip
    fi;
    /* worker_idle */
    was_idle = 1;
    owned = 0;
spin:
    /* worker_spin: become the one spinner, unless handed the flag */
    spinner = 0;
    if
    :: owned -> spinner = 1
    :: else ->
        atomic {
            if
            :: spinning == 0 ->
                spinning = 1;
                roles++;
                assert(roles <= 1);
                spinner = 1
            :: else -> skip
            fi
        }
    fi;
    if
    :: spinner ->
        do
        :: q > 0 ->
            /* found: clear the flag, then look (take) */
            atomic { spinning = 0; roles-- };
            goto take
        :: true -> break /* the window is over */
        od
    :: else -> skip
    fi;
    /* worker_park */
    lock();
#ifdef MUT_RECHECK_BEFORE_ANNOUNCE
    if
    :: q > 0 ->
        if
        :: spinner -> atomic { spinning = 0; roles-- }
        :: else -> skip
        fi;
        unlock();
        goto take
    :: else -> skip
    fi;
    sleepers++;
    if
    :: spinner -> atomic { spinning = 0; roles-- }
    :: else -> skip
    fi;
#else
    sleepers++;
    if
    :: spinner -> atomic { spinning = 0; roles-- }
    :: else -> skip
    fi;
    if
    :: q > 0 ->
        sleepers--;
        unlock();
        goto take
    :: else -> skip
    fi;
#endif
#ifndef MUT_LIST_AFTER_UNLOCK
    listed[me] = 1;
    unlock();
#else
    unlock();
    listed[me] = 1;
#endif
end_wait: /* park_wait on the word until a token is there */
    if
    :: atomic {
        token[me] != 0 ->
#ifndef MUT_TOKEN_NO_ROLE
        owned = (token[me] == 3);
#else
        owned = 0;
#endif
        token[me] = 0
       }
#if ELASTIC
    :: token[me] == 0 ->
        /* the keep-alive passes: under mu, retire if still on the list and
         * above the core count (one worker), else wait on */
        lock();
        if
#ifndef MUT_RETIRE_UNLISTED
        :: listed[me] && live > 1 ->
#else
        :: live > 1 ->
            assert(listed[me]); /* serex__pool_idle_remove finds it */
#endif
            listed[me] = 0;
            sleepers--;
            live--;
            unlock();
            goto retired
        :: else -> unlock(); goto end_wait
        fi
#endif
    fi;
    if
    :: owned -> goto spin /* a token made us the spinner */
    :: else -> goto take
    fi;
retired:
    skip
}

init
{
    byte i = 0;

    atomic {
        do
        :: i < NWORK -> run worker(i); i++
        :: else -> break
        od
    }
}

/* When nothing can move: no task is left, no flag, no unserved token. */
active proctype checker()
{
    timeout ->
        assert(prods_done == NPROD);
        assert(q == 0);
        assert(spinning == 0 && roles == 0);
        assert(token[0] == 0 && (NWORK < 2 || token[1] == 0) &&
               (NWORK < 3 || token[2] == 0))
}
