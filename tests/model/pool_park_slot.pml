/*
 * pool_park_slot.pml - the park handshake's rule for the next-task slot
 * (src/pool_idle.c: serex__pool_has_work, worker_spin, worker_idle;
 * src/pool_thread.c: serex__pool_thread_park; src/pool_local.c and
 * pool_types_internal.h: the local push, next_look). pool_park.pml has
 * the handshake for the shared queue; this model adds the slot, a task
 * that blocks its worker, and the rule:
 *
 *   in the park re-check, a non-empty slot counts as work for the
 *   spinner (the worker that was spinning and is now parking) always,
 *   and for any other worker only while `spinning` is 0 (it then goes
 *   back to become the spinner); a spinner polls the slots and steals a
 *   ripe one.
 *
 * Processes: NWORK symmetric workers (take, or spin, or park) and one
 * outside producer. Task X is the owner's: the worker that runs it (O)
 * pushes T into its own slot (a seq_cst store of the slot's tail), makes
 * the producer's wake decision (serex__pool_signal_work: load `spinning`,
 * then `sleepers`, perhaps pool_wake_one), and then blocks until T has
 * run, so only another worker can run T. XFROM 0: worker 0 starts with
 * X in hand (busy from the start); XFROM 1: the producer submits X to
 * the shared queue and whoever takes it is O (it may have been the
 * spinner a moment before). The producer also submits NPLAIN plain tasks
 * and, with WAITER, task Y, which blocks its worker until T has run (a
 * second task waiting for the same result); it submits its tasks in any
 * order, each push followed by the wake decision, and then waits until
 * they have all run (a user's await: it makes a lost task visible).
 *
 * Checked: T runs exactly once (assertion); nothing is stranded: a state
 * where nothing can move while a task has not run (O waiting for T, the
 * producer for its tasks, every other worker parked) is an invalid end
 * state; when everything has run and every worker waits, `spinning` is 0
 * and no token is unserved; at most one holder of the spinner's flag.
 *
 * Abstractions: the shared queue's shards and the run queues are one
 * FIFO (a batch a worker takes is still there for thieves and for every
 * re-check: serex__pool_has_work reads every run queue; a take that
 * finds 3 or more takes a batch and says `more`, as shard_take does);
 * "ripe" (the thief's SLOT_STEAL_NS wait in next_look) is a
 * nondeterministic choice at each look that sees T, so it may come at
 * any later look, or never on a given path; the spin window is a
 * nondeterministic give-up; the condition variable wakes one thread
 * waiting at the signal (none if none waits), never spuriously. Slots
 * exist only on fixed, unbounded pools, whose parked workers wait with
 * no deadline (no keep-alive re-check to rescue them).
 *
 * Mutations (tests/model/README.md says which are caught, and why):
 *  MUT_SPINNER_AS_OTHER    (1) the spinner's re-check as a non-spinner's
 *                          (spinner=false: the slot counts while
 *                          `spinning` is 0)
 *  MUT_SPINNER_NO_SLOT     (1b) the spinner's re-check ignores slots
 *  MUT_SLOT_WHEN_SPINNING  (2) a non-spinner counts the slot only while
 *                          `spinning` is 1 (inverted)
 *  MUT_NO_SLOT_WAKE        (3) no wake decision after a push into the slot
 *  MUT_OTHERS_NO_SLOT      (4) a non-spinner never counts the slot
 *  MUT_NO_IDLE_SLOT_WAKE   a worker back from idle that takes a task
 *                          wakes a sleeper only for the shared queue, not
 *                          for a non-empty slot: the C code before the fix
 *                          this model found (with WAITER, 3 workers)
 * The worker loop as the C code has it since: back from idle with a task,
 * a worker wakes a sleeper (signal_work) when a slot is non-empty, as it
 * does when the shared queue is.
 */
#ifndef NWORK
#define NWORK 2
#endif
#ifndef XFROM
#define XFROM 1
#endif
#ifndef NPLAIN
#define NPLAIN 0
#endif
#ifndef WAITER
#define WAITER 0
#endif

#define TX 1 /* the owner's task: push T into its slot, block until T ran */
#define TY 2 /* the waiter: blocks until T ran */
#define TP 3 /* a plain task */
#define TT 4 /* T, the slot's task */

#if XFROM
#define NSUBX 1
#else
#define NSUBX 0
#endif
#if WAITER
#define NSUBY 1
#else
#define NSUBY 0
#endif
#define NSUB (NSUBX + NSUBY + NPLAIN) /* tasks the producer submits */
#define QN 4

byte shard[QN];  /* the shared queue (and the run queues): a FIFO */
byte sh;         /* its head */
byte st;         /* its tail */
bit slot;        /* O's next-task slot holds T */
bit tran;        /* T has run */
byte ran;        /* ghost: the producer's tasks that have run */
bit spinning;    /* p->spinning */
byte sleepers;   /* p->sleepers */
bit mu;          /* p->mu */
bit listed[NWORK]; /* on p->idle, under mu */
byte token[NWORK]; /* slot->token: 0, WAKE (1), WAKE|SPIN (3) */
byte roles;      /* ghost: holders of the flag (a carrying token counts) */

inline lock()
{
    atomic { mu == 0 -> mu = 1 }
}

inline unlock()
{
    mu = 0
}

/* pool_wake_one: the last parked worker (any listed one here) off the
 * list, and a token to its own word (after unlocking, as token_give);
 * the token carries the flag when no one spins (the CAS of `spinning`
 * from 0 to 1). */
inline wake_one()
{
    lock();
    if
    :: sleepers > 0 ->
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
        atomic {
            if
            :: spinning == 0 ->
                spinning = 1;
                tok = 3;
                roles++;
                assert(roles <= 1)
            :: else -> skip
            fi
        };
        unlock();
        atomic { token[who] = tok; who = 0; tok = 0 }
    :: else -> unlock()
    fi
}

/* serex__pool_signal_work (fixed pool: no grow): two loads, then perhaps
 * a wake-up. */
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

/* pool_execute from outside: the push (the shard's tail, seq_cst), then
 * the wake decision. */
inline submit(k)
{
    atomic { shard[st % QN] = k; st++ };
    signal_work()
}

active proctype producer()
{
    byte x = NSUBX, y = NSUBY, pl = NPLAIN, who, tok;

    do
    :: x > 0 -> x--; submit(TX)
    :: y > 0 -> y--; submit(TY)
    :: pl > 0 -> pl--; submit(TP)
    :: else -> break
    od;
    /* the user awaits its tasks: a task left queued with every worker
     * parked is a state where nothing can move (invalid end state) */
    ran == NSUB
}

proctype worker(byte me)
{
    bit was_idle = 1; /* serex__pool_worker_main's was_idle */
    bit more = 0;     /* it took a batch */
    bit owned = 0;    /* a token handed it the flag */
    bit spinner = 0;  /* worker_spin's spinner; park's `spinner` */
    byte task = 0, who, tok;
    bit found;

#if XFROM == 0
    if
    :: me == 0 -> task = TX; was_idle = 0; goto running
    :: else -> skip
    fi;
#endif
take:
    /* worker_take (serex__pool_take): the shared queue and the run
     * queues (a batch of half when 3 or more wait), then a slot steal
     * (pool_steal -> next_look) once the slot's task is ripe */
    more = 0;
    atomic {
        if
        :: sh != st ->
            more = (st - sh >= 3);
            task = shard[sh % QN];
            shard[sh % QN] = 0;
            sh++
        :: else -> task = 0
        fi
    };
    if
    :: task == 0 ->
        atomic {
            if
            :: slot -> slot = 0; task = TT /* ripe: stolen */
            :: true -> skip /* not ripe yet, or no slot task */
            fi
        }
    :: else -> skip
    fi;
    if
    :: task == 0 -> goto idle
    :: else -> skip
    fi;
    /* took a batch, or back from idle with more queued: make sure a
     * sleeper helps */
#ifndef MUT_NO_IDLE_SLOT_WAKE
    if
    :: more || (was_idle && (sh != st || slot)) -> signal_work()
    :: else -> skip
    fi;
#else
    if
    :: more || (was_idle && sh != st) -> signal_work()
    :: else -> skip
    fi;
#endif
    was_idle = 0;
running:
    if
    :: task == TX ->
        /* serex__pool_push_local into our empty slot: next_put's tail
         * store (seq_cst) */
        slot = 1;
#ifndef MUT_NO_SLOT_WAKE
        signal_work(); /* pool_execute: pool_wake(p, pool_wake_need(p)) */
#endif
#if XFROM
        ran++;
#endif
        tran == 1 /* blocks until T has run: not an end state */
    :: task == TY ->
        ran++;
        tran == 1 /* blocks until T has run */
    :: task == TT ->
        assert(!tran);
        tran = 1
    :: task == TP ->
        ran++
    fi;
    goto take;

idle:
    /* serex__pool_worker_idle */
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
        :: sh != st ->
            /* found work: clear the flag (seq_cst), then take */
            atomic { spinning = 0; roles-- };
            goto take
        :: slot ->
            /* every 16th look: serex__pool_next_ripe said ripe */
            atomic { spinning = 0; roles-- };
            goto take
        :: true -> break /* the window is over (SPIN_GAVE_UP) */
        od
    :: else -> skip /* SPIN_NOT_SPINNER */
    fi;
    /* serex__pool_thread_park(p, s, spinner, &handed) */
    lock();
    sleepers++; /* announce (seq_cst) */
    if
    :: spinner -> atomic { spinning = 0; roles-- } /* then clear */
    :: else -> skip
    fi;
    /* the re-check, serex__pool_has_work(p, spinner): its loads one by
     * one, as the C code makes them; a `break` is work found */
    found = 1;
    do
    :: true ->
        if
        :: sh != st -> break /* a shard, a run queue */
        :: else -> skip
        fi;
        if
        :: slot ->
#if defined(MUT_SPINNER_AS_OTHER)
            if
            :: spinning == 0 -> break
            :: else -> skip
            fi
#elif defined(MUT_SPINNER_NO_SLOT)
            if
            :: spinner -> skip
            :: else ->
                if
                :: spinning == 0 -> break
                :: else -> skip
                fi
            fi
#elif defined(MUT_SLOT_WHEN_SPINNING)
            if
            :: spinner -> break
            :: else ->
                if
                :: spinning == 1 -> break
                :: else -> skip
                fi
            fi
#elif defined(MUT_OTHERS_NO_SLOT)
            if
            :: spinner -> break
            :: else -> skip
            fi
#else
            if
            :: spinner -> break
            :: else ->
                if
                :: spinning == 0 -> break
                :: else -> skip
                fi
            fi
#endif
        :: else -> skip
        fi;
        found = 0;
        break
    od;
    if
    :: found ->
        sleepers--;
        unlock();
        goto take
    :: else -> skip
    fi;
    /* no work: on the list, in the same hold of mu, then wait on our
     * own token word */
    listed[me] = 1;
    unlock();
end_wait: /* park_wait on the word until a token is there */
    atomic { token[me] != 0 -> owned = (token[me] == 3); token[me] = 0 };
    if
    :: owned -> goto spin /* a token made us the spinner */
    :: else -> goto take  /* IDLE_AGAIN */
    fi
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

/* When nothing can move and everything has run: no flag, no token. (When
 * something has not run, a process waits outside an end state: spin
 * reports the invalid end state.) */
active proctype checker()
{
    timeout ->
        if
        :: tran && ran == NSUB && sh == st ->
            assert(spinning == 0 && roles == 0);
            assert(token[0] == 0 && (NWORK < 2 || token[1] == 0) &&
                   (NWORK < 3 || token[2] == 0))
        :: else -> skip
        fi
}
