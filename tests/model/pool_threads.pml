/*
 * pool_threads.pml - the life of a pool's worker threads (src/pool_thread.c,
 * its essay): start, park with the keep-alive, retire, grow, the debt a
 * grow leaves when every slot is taken by a retiring thread, stop.
 *
 * Processes: one submitter and the workers, one process per thread
 * started (a core thread in slot 0 at the start; extra ones started by a
 * grow or by a retiring thread's hand-over, in the slot it gives). An
 * elastic pool of CORE = 1 and MAX = 2 slots. The submitter queues three
 * tasks, in order: X, which waits until Z has run (tasks that wait on each
 * other, as in the defect); Y, which only runs; Z. Then it waits for all
 * three to run, shuts the pool down and waits for termination.
 *
 * Abstractions: the queue is a count `q` taken in order; the wake-up side
 * is taken under `mu` (the lock-free side of the handshake is
 * pool_park.pml's); a timed wait may end at any moment by the keep-alive
 * running out (at most TMAX times per thread, so that the state space is
 * finite: after that a thread waits for work only), and cond_wait_until
 * with a deadline already past returns at once without letting `mu` go, as
 * the platform layer's does. (Since the tokens went to each worker's own
 * word, the C code waits outside `mu` and takes it when the keep-alive
 * passes, to look for a token and retire: the same decisions under `mu`
 * as here, which is what this model checks; the token hand-over itself
 * is pool_park.pml's.)
 *
 * What is checked (scripts/check_model.sh):
 *  - every task runs, and the pool terminates after shutdown: any state
 *    where that cannot happen any more is an invalid end state (a thread
 *    blocked in X's wait, the submitter waiting for the tasks or for
 *    termination);
 *  - a parked thread never loops under `mu` without waiting (`held`);
 *  - live never goes above MAX, live + retiring never above the slots,
 *    and live never below CORE before shutdown.
 *
 *
 * With BLOCKING (src/pool_block.c): a fixed pool of CORE = MAX = 1 with
 * max_blocking MAXB = 1, so SLOTS = 2. X waits for Z inside a blocking
 * region: begin counts the worker in `blocked` (outside `mu`, as the C
 * code's seq_cst count: the model is sequentially consistent) and, if a
 * task is queued, makes the wake-up a submission makes (a sleeper, else a
 * start below the cap MAX + min(blocked, MAXB), else the debt); end takes
 * it out. A worker retires past its keep-alive only while more serve than
 * the core count (live - blocked > CORE); after a shutdown a start may
 * still come while a worker blocks. With SHUT_EARLY the submitter shuts
 * the pool down right after its three submissions instead of after they
 * ran: X may then block after the shutdown, Z still queued.
 *
 * Mutations (each must make spin find a violation):
 *  MUT_NO_DEBT    a grow that finds every slot taken owes nothing (the
 *                 defect: the task waits for a busy worker)
 *  MUT_NO_REARM   a core thread past its keep-alive keeps the old deadline
 *                 (the defect: it spins under mu for ever)
 *  MUT_NO_BEGIN_WAKE  (BLOCKING) begin only counts: a task queued before
 *                 it waits for the blocked worker
 *  MUT_NO_CAP     (BLOCKING) the cap is max_threads alone: a blocked
 *                 worker makes no room for another
 *  MUT_NO_SHUT_GROW   (BLOCKING, SHUT_EARLY) no start after a shutdown,
 *                 blocked or not: Z, queued, waits for X, which waits
 *                 for Z
 */
#ifdef BLOCKING
#define CORE 1
#define MAX 1
#define MAXB 1
#else
#define CORE 1
#define MAX 2
#define MAXB 0
#endif
#define SLOTS (MAX + MAXB)
#ifndef TMAX
#define TMAX 2
#endif
#define NTASK 3

#define FREE 0
#define LIVE 1
#define RETIRING 2
#define EXITED 3

byte state[SLOTS];
byte live;
byte blocked;    /* workers in a blocking region (BLOCKING) */
byte retiring;
bit grow_owed;
bit mu;
byte q;          /* tasks queued, not taken */
byte next_task;  /* the next task a take gets: 0 X, 1 Y, 2 Z */
byte ran;        /* tasks run */
bit z_ran;
byte sleepers;
byte wakeups;
bit shutdown;
bit terminated;

inline lock()
{
    atomic { mu == 0 -> mu = 1 }
}

inline unlock()
{
    mu = 0
}

inline invariants()
{
    assert(live <= SLOTS && live + retiring <= SLOTS);
    assert(shutdown || live >= CORE)
}

/* serex__pool_cap: MAX, plus one per blocked worker, at most MAXB more */
#ifndef MUT_NO_CAP
#define CAP (MAX + (blocked < MAXB -> blocked : MAXB))
#else
#define CAP MAX
#endif

/* thread_may_grow: below the cap; after a shutdown only while a worker
 * blocks */
#ifndef MUT_NO_SHUT_GROW
#define MAY_GROW ((!shutdown || blocked > 0) && live < CAP)
#else
#define MAY_GROW (!shutdown && live < CAP)
#endif

inline check_terminated()
{
    if
    :: live == 0 && retiring == 0 -> terminated = 1
    :: else -> skip
    fi
}

/* A free slot for a new thread (FREE or EXITED, joined), or SLOTS. */
inline find_slot(found)
{
    i = 0;
    found = SLOTS;
    do
    :: i < SLOTS ->
        if
        :: found == SLOTS && (state[i] == FREE || state[i] == EXITED) ->
            found = i
        :: else -> skip
        fi;
        i++
    :: else -> break
    od
}

/* thread_start under mu: the new thread's process, in slot @found. */
inline start_in(found)
{
    state[found] = LIVE;
    live++;
    invariants();
    run worker(found)
}

/*
 * The wake-up a push owes (serex__pool_wake_need, then pool_wake_one or
 * serex__pool_threads_grow): a sleeper, else a start below the cap, else,
 * with every slot taken, the debt. Under mu.
 */
inline wake_or_grow()
{
    lock();
    if
    :: sleepers > 0 -> sleepers--; wakeups++
    :: else ->
        if
        :: MAY_GROW ->
            find_slot(found);
            if
            :: found < SLOTS -> start_in(found)
            :: else ->
#ifndef MUT_NO_DEBT
                grow_owed = 1
#else
                skip
#endif
            fi
        :: else -> skip
        fi
    fi;
    unlock()
}

proctype worker(byte s)
{
    bit keep = 1, expired = 0;
    byte held = 0, tmo = 0, t, i, found;

serve:
    do
    :: atomic { q > 0 -> q--; t = next_task; next_task++ };
        if
        :: t == 0 ->            /* X waits until Z has run */
#ifdef BLOCKING
            blocked++;          /* block_begin: the count, then the look */
#ifndef MUT_NO_BEGIN_WAKE
            if
            :: q > 0 -> wake_or_grow()
            :: else -> skip
            fi;
#endif
            (z_ran);
            blocked--           /* block_end */
#else
            (z_ran)
#endif
        :: t == 2 -> z_ran = 1
        :: else -> skip
        fi;
        ran++
    :: atomic { q == 0 && shutdown } -> break
    :: q == 0 && !shutdown ->
        /* serex__pool_thread_park */
        lock();
        sleepers++;
        expired = 0; /* a fresh deadline, keep_alive away */
        held = 0;
        do
        :: wakeups > 0 || q > 0 || shutdown -> break
        :: else ->
            if
            :: expired ->
                if
                :: live - blocked > CORE ->  /* thread_retire */
                    live--;
                    retiring++;
                    state[s] = RETIRING;
                    invariants();
                    keep = 0;
                    break
                :: else ->
#ifndef MUT_NO_REARM
                    expired = 0   /* the next look a period away */
#else
                    skip
#endif
                fi
            :: else -> skip
            fi;
            if
            :: expired ->      /* past deadline: returns holding mu */
                held++;
                assert(held < 3)
            :: else ->
                held = 0;
                unlock();
end_park:
                if
                :: wakeups > 0 || q > 0 || shutdown -> skip
                :: tmo < TMAX -> tmo++; expired = 1 /* keep-alive ran out */
                fi;
                lock()
            fi
        od;
        if
        :: wakeups > 0 -> wakeups--
        :: else -> sleepers--
        fi;
        unlock();
        if
        :: keep == 0 -> break
        :: else -> skip
        fi
    od;
    /* on_thread_stop runs here: anything may happen meanwhile */
    lock();
    if
    :: keep == 0 ->
        retiring--;
        if
        :: grow_owed ->  /* thread_hand_over */
            grow_owed = 0;
            if
            :: MAY_GROW ->
                state[s] = FREE;
                find_slot(found);
                start_in(found)
            :: else -> state[s] = EXITED
            fi
        :: else -> state[s] = EXITED
        fi
    :: else ->
        live--;
        state[s] = EXITED
    fi;
    check_terminated();
    unlock()
}

/* pool_execute's push and its wake-up or grow (serex__pool_threads_grow) */
inline submit()
{
    q++;
    wake_or_grow()
}

active proctype submitter()
{
    byte i, found, n = 0;

    atomic {
        state[0] = LIVE;
        live = 1;
        run worker(0)
    };
    do
    :: n < NTASK -> submit(); n++
    :: else -> break
    od;
#ifndef SHUT_EARLY
    (ran == NTASK);
#endif
    lock();
    shutdown = 1;
    unlock();
    (terminated);
    assert(ran == NTASK);
    assert(live == 0 && retiring == 0 && q == 0 && blocked == 0)
}
