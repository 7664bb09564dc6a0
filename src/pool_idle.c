/* SPDX-License-Identifier: MIT */
/*
 * pool_idle.c - idle workers and their wake-up: the one spinner and its
 * adaptive window, the park re-check, what a push owes (the producer's
 * half of the park handshake: serex__pool_wake_need and
 * serex__pool_signal_work, static inlines in pool_types_internal.h, as
 * every execute calls them) and the wake-up itself, and an idle worker's
 * choice to spin, park or leave. The parking worker's half of the
 * handshake (serex__pool_thread_park) is in pool_thread.c, with the rest
 * of a thread's life.
 *
 * --- Parking: who sleeps, who wakes, why no wake-up is lost ---
 * A worker that finds the queue empty becomes the one spinner if there is
 * none (`spinning` 0 -> 1): it polls the queue for the spin window
 * (pausing, then yielding its core to any thread that wants it), so a
 * burst or a ping-pong never pays a futex wake. The window adapts between
 * SPIN_MIN_NS and SPIN_NS (spin_adapt): a trickle of work no longer keeps
 * a core spinning between tasks. Every other idle worker parks at once
 * (at most one spins: on a 2-core machine two spinners would steal the
 * producer's core). To park, a worker takes `mu`, increments `sleepers`,
 * (the spinner then clears `spinning`), re-checks every shard, run
 * queue and level, and, finding nothing, puts itself on the list of
 * parked workers (`idle`, whose length `sleepers` is) in the same hold of
 * `mu`, and waits on its own word (`token`) for a wake-up token.
 * A next-task slot's task counts in that re-check for the spinner, and
 * for the others only while no one spins (they come back to spin): the
 * spinner steals it once it has waited, and idle workers do not wake for
 * every message a busy worker passes to itself. A local push publishes
 * its queue's tail seq_cst and makes the producer's loads below, so the
 * handshake covers run queues and slots as it covers the shards.
 * A producer, after its store of `tail`, reads `spinning`, then
 * `sleepers`: if there is a spinner it does nothing; else if someone sleeps
 * it takes `mu`, takes the last parked worker off the list (so later
 * producers see one sleeper fewer and leave `mu` alone), unlocks, and
 * stores a token in that worker's word and wakes it; else it makes no
 * system call at all (a busy pool costs no syscall per task).
 * The store, the loads of `spinning`/`sleepers`, the increment of
 * `sleepers`, the clearing of `spinning` and the worker's re-check of `tail`
 * are all seq_cst: in their single total order, either the producer's load
 * comes after the worker's announcement (it sees a sleeper or no spinner,
 * and wakes), or the worker's re-check comes after the producer's store
 * (it sees the task and does not sleep). A worker is on the list from
 * the hold of `mu` in which it re-checked, so a waker that finds
 * `sleepers` under `mu` finds a worker to wake; the token goes to that
 * worker's word, which it waits on alone (the parking lot re-reads the
 * word before it sleeps), so a token stored before the worker sleeps is
 * not lost, and no other worker can take it. A worker whose keep-alive
 * passes looks under `mu`, where the list changes: still on the list, it
 * may retire (taking itself off); taken off by a waker, it waits for the
 * token that waker stores after unlocking.
 * A worker woken from idle that finds more work behind its task wakes the
 * next sleeper (as Tokio's last searching worker does), so a burst after
 * an idle period fans out to every worker.
 * A wake-up hands over the spinner's flag when no one spins: the waker sets
 * `spinning` (a CAS from 0, under `mu`) and marks the token (TOKEN_SPIN);
 * the worker that takes that token is the spinner from
 * then on and clears the flag only as a spinner does (found work: clear,
 * then take; window over: announce, clear, re-check under `mu`). So a
 * producer that sees the flag set before the woken worker runs leaves its
 * task to that worker, who looks after clearing: the handshake above, with
 * the taker as the spinner. Without it, each execute of a burst that came
 * before the woken worker ran woke one more sleeper, a system call per
 * task: with 16 workers and one producer on a 16-core machine,
 * pool_throughput fell to 0.8M tasks/s. tests/model/pool_park.pml checks
 * the handshake and the hand-over with spin; tests/model/pool_runq.pml
 * the run queue, the slot, their steals and shutdown_now's claim.
 *
 * --- Threads ---
 * Each worker's life (start, park with the keep-alive, retire, grow, stop)
 * is one state machine in pool_thread.c, with its essay and a spin model
 * (tests/model/pool_threads.pml). This file calls it where the idle
 * protocol meets it: a producer that finds no spinner and no sleeper on an
 * elastic pool grows it; a worker parks through it.
 */
#include "common_internal.h"
#include "park_internal.h"
#include "thread_internal.h"

#include "pool_types_internal.h"

/* --- the park re-check --- */

/* Work in a queue anyone may take from at once: a shard, a run queue (if
 * @batches), a level. */
static bool pool_has_work_in(struct pool *p, bool batches)
{
    /* seq_cst: the flag's part of the park handshake (see the essay) */
    return serex__pool_queue_nonempty(p) ||
           (batches && serex__pool_batches_nonempty(p)) ||
           (atomic_load_explicit(&p->levels_on, memory_order_seq_cst) &&
            serex__pool_levels_nonempty(p));
}

/*
 * The park re-check. A task in a next-task slot keeps the spinner up (it
 * steals it once it has waited: pool_steal), and keeps others up only
 * while nobody spins: then they come back to become the spinner. So idle
 * workers do not wake for every message a busy worker passes to itself,
 * yet a slot task whose owner blocks is never left without a thief.
 */
bool serex__pool_has_work(struct pool *p, bool spinner)
{
    /* seq_cst: as the other re-checks (the essay) */
    return pool_has_work_in(p, true) ||
           (p->batching && serex__pool_nexts_nonempty(p) &&
            (spinner ||
             atomic_load_explicit(&p->spinning, memory_order_seq_cst) == 0));
}

/* --- waking and growing --- */

static void (*test_before_token)(void *ctx); /* pool_internal.h's seam */
static void *test_before_token_ctx;

void serex__pool_test_before_token(void (*fn)(void *ctx), void *ctx)
{
    test_before_token_ctx = ctx;
    test_before_token = fn;
}

/* --- the list of parked workers (under mu; `sleepers` is its length) --- */

void serex__pool_idle_push(struct pool *p, struct slot *s)
{
    /* relaxed: under mu, before a waker can find us on the list */
    atomic_store_explicit(&s->token, 0, memory_order_relaxed);
    s->idle_next = p->idle;
    s->idle_listed = true;
    p->idle = s;
}

void serex__pool_idle_remove(struct pool *p, struct slot *s)
{
    struct slot **at = &p->idle;

    SEREX_ASSERT(s->idle_listed);
    while (*at != s)
        at = &(*at)->idle_next;
    *at = s->idle_next;
    s->idle_next = NULL;
    s->idle_listed = false; /* a waker's token is on its way, if any */
    /* relaxed: sleepers only changes under mu, which we hold; its
     * lock-free readers use it only to decide whether to come here */
    atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed);
}

/* The last parked worker, taken off the list (NULL: none). Under mu. */
static struct slot *idle_pop(struct pool *p)
{
    struct slot *s = p->idle;

    if (s != NULL)
        serex__pool_idle_remove(p, s);
    return s;
}

/*
 * Hands @s, taken off the list under mu, its token, after the caller has
 * unlocked mu: the store wakes it if it has not slept yet, the wake-up if
 * it has (the parking lot's rule: change the word, then wake). The slot
 * outlives the call: a producer waking holds the pool (pool_wake_held),
 * and a worker is in it.
 */
static void token_give(struct slot *s, uint32_t token)
{
    /* release: what the waker did before (the push it wakes for) is
     * visible to the worker that reads the token with acquire */
    atomic_store_explicit(&s->token, token, memory_order_release);
    serex__park_wake_all(&s->token);
}

/*
 * Takes the last parked worker off the list and hands it a token. Taking
 * it off moves it out of `sleepers` at once, so producers that come before
 * it wakes see no sleeper and take no lock: one mutex round trip per
 * actual wake-up, not per task. The token also carries the spinner's flag
 * when no one spins: until the woken worker runs (a few microseconds),
 * every execute then sees a spinner and leaves `mu` alone, instead of each
 * waking one more sleeper (with 16 workers and one fast producer, a system
 * call per task: pool_throughput fell from 8M tasks/s at 2 threads to
 * 0.9M at 16). The worker that takes the token is the spinner from then
 * on (serex__pool_worker_idle), as Tokio hands its searching state to the
 * worker it unparks. The token goes to that one worker's own word, after
 * mu is released: no condition variable that every parked worker and
 * every waker share (its futex, and the mutex each woken worker took
 * again, were 12 % of striped_throughput's CPU on 16 cores, in the
 * kernel's lock of one futex bucket), and the worker parked last, whose
 * lines are warmest, goes first.
 */
static void pool_wake_one(struct pool *p)
{
    struct slot *s;
    uint32_t token = TOKEN_WAKE, zero = 0;

    serex__mutex_lock(&p->mu);
    s = idle_pop(p);
    if (s != NULL) {
        p->wakes++;
        if (serex__unlikely(serex__pool_dog_wake_locked(p)))
            serex__pool_dog_ring(p); /* the pool leaves idle */
        /* seq_cst: a producer that reads this 1 leaves its task to the
         * token's taker, who clears the flag as a spinner does and then
         * looks (the handshake of the essay, with the taker as spinner).
         * It fails while a token handed earlier still carries the flag:
         * its taker has not cleared it yet. */
        if (atomic_compare_exchange_strong_explicit(&p->spinning, &zero, 1,
                                                    memory_order_seq_cst,
                                                    memory_order_relaxed))
            token |= TOKEN_SPIN;
    }
    serex__mutex_unlock(&p->mu);
    if (s == NULL)
        return;
    if (test_before_token != NULL)
        test_before_token(test_before_token_ctx);
    token_give(s, token);
}

void serex__pool_wake_every(struct pool *p)
{
    struct slot *s;

    if (serex__pool_dog_wake_locked(p))
        serex__pool_dog_ring(p);
    while ((s = idle_pop(p)) != NULL) /* under mu: shutdown is rare */
        token_give(s, TOKEN_WAKE);
}

void serex__pool_wake(struct pool *p, enum wake_need w)
{
    if (w == WAKE_ONE)
        pool_wake_one(p);
    else if (w == WAKE_GROW)
        serex__pool_threads_grow(p);
}

/* --- the spinner --- */

enum spin_result { SPIN_NOT_SPINNER, SPIN_FOUND, SPIN_GAVE_UP };

/*
 * The spin window adapts: a spin that found work sets it back to SPIN_NS,
 * one that gave up halves it (down to SPIN_MIN_NS). Under a steady stream
 * of work, a ping-pong or bursts (a striped executor's lane drains), spins
 * find work and the window stays long, so a task is picked up in well
 * under a microsecond and producers make no wake-up calls; under a
 * trickle (a task every 100 us onto an idle pool) every spin of the full
 * window was a wasted 50 us of a core (80 % of a core measured at 100 us
 * gaps), and now the window shrinks to a microsecond within a few tasks:
 * each task then costs a wake-up instead, which takes about what it took
 * anyway (the trickle's latency was the wake-up's, spin or not). Growing
 * back by doubling instead of at once cost bursts dearly: striped
 * throughput at 4,096 keys fell from 8-9M to 3.4M tasks/s, the window
 * shrinking in every short lull and every burst then paying wake-ups.
 * Only the spinner (elected by `spinning`) writes the window; relaxed, as
 * a hint.
 */
static void spin_adapt(struct pool *p, bool found)
{
    int64_t w = atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
    int64_t next = found ? SPIN_NS
                         : (w <= 2 * SPIN_MIN_NS ? SPIN_MIN_NS : w / 2);

    /* only a change is written: the line is read by every execute */
    if (next == w)
        return;
    atomic_store_explicit(&p->spin_ns, next, memory_order_relaxed);
    /* A reset from a shorter window, counted for tests: not in a ping-pong
     * (the window stays at its longest), so the busy path writes nothing.
     * relaxed: a count; one spinner at a time */
    if (found)
        atomic_store_explicit(
            &p->spin_resets,
            atomic_load_explicit(&p->spin_resets, memory_order_relaxed) + 1,
            memory_order_relaxed);
}

/* Polls the queue for the spin window, if this worker can be the one
 * spinner; @owned: it is already (a token handed it the flag). */
static enum spin_result worker_spin(struct pool *p, struct slot *s,
                                    bool owned)
{
    uint32_t zero = 0;
    int64_t end;

    /* relaxed: the flag only elects one spinner; the handshake's ordering
     * comes from the seq_cst clear below or in serex__pool_thread_park */
    if (!owned &&
        !atomic_compare_exchange_strong_explicit(
            &p->spinning, &zero, 1, memory_order_relaxed, memory_order_relaxed))
        return SPIN_NOT_SPINNER;
    /* relaxed: see spin_adapt */
    end = serex__now_ns() +
          atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
    for (unsigned i = 1;; i++) {
        /*
         * The run queues and slots every 16th look only: each is a line
         * its owner writes at every task, and a spinner reading them all
         * in a tight loop takes them from every busy worker (16 lines
         * with 16 workers). A run queue is never stranded: its owner runs
         * it, and the park re-check reads every one.
         */
        if (pool_has_work_in(p, i % 16 == 1) ||
            (i % 16 == 1 && p->batching && serex__pool_next_ripe(p, s))) {
            /* still the spinner: ours to write. A token's taker that finds
             * at its first look the work it was woken for learned nothing
             * of spinning: resetting the window then made a trickle of
             * work (a task per 100 us) spin a full window per task */
            if (!owned || i > 1)
                spin_adapt(p, true);
            /* seq_cst: ordered before our next look at the queue, so a
             * producer that saw us spinning has its task seen (essay) */
            atomic_store_explicit(&p->spinning, 0, memory_order_seq_cst);
            return SPIN_FOUND;
        }
        /*
         * Pause first (a ping-pong comes back within a microsecond), then
         * yield: on a machine with fewer cores than threads a spinner must
         * not hold the core its producer needs.
         */
        if (i > 128)
            serex__thread_yield();
        else
            serex__cpu_relax();
        /* Every 64 pauses, and after every yield: on a loaded machine a
         * yield can cost a whole time slice, and a spinner that overstays
         * its window while preempted makes producers skip a wake-up that
         * an idle worker could have served.
         * relaxed: the flag is re-read with acquire in
         * serex__pool_worker_idle */
        if ((i % 64 == 0 || i > 128) &&
            ((atomic_load_explicit(&p->state, memory_order_relaxed) &
              ST_SHUTDOWN) ||
             serex__now_ns() >= end)) {
            spin_adapt(p, false);
            /* still the spinner: serex__pool_thread_park clears */
            return SPIN_GAVE_UP;
        }
    }
}

/* --- an idle worker: spin, park or leave --- */

/*
 * Shut down: true once the ring is empty and nothing more can come, and no
 * batch is left that we could steal (tasks in other workers' batches run
 * there or here, never nowhere).
 */
static bool pool_drained(struct pool *p)
{
    /* The shards first (serex__pool_shards_drained). A run queue's
     * overflow only moves tasks a worker still holds: that worker looks
     * again before it leaves. */
    return serex__pool_shards_drained(p) &&
           !serex__pool_batches_nonempty(p) &&
           !serex__pool_nexts_nonempty(p) && serex__pool_levels_drained(p);
}

/* The queue looked empty: spin, park, or leave. */
enum idle_result serex__pool_worker_idle(struct pool *p, struct slot *s)
{
    /* acquire: the flags only; pool_drained does the ordering */
    uint32_t st = atomic_load_explicit(&p->state, memory_order_acquire);
    enum spin_result spin;

    if (st & ST_STOP)
        return IDLE_EXIT;
    if (st & ST_SHUTDOWN) {
        if (pool_drained(p))
            return IDLE_EXIT;
        serex__thread_yield(); /* a batch is being emptied or stolen */
        return IDLE_AGAIN;
    }
    for (bool handed = false;;) {
        spin = worker_spin(p, s, handed);
        if (spin == SPIN_FOUND)
            return IDLE_AGAIN;
        if (!serex__pool_thread_park(p, s, spin == SPIN_GAVE_UP, &handed))
            return IDLE_RETIRED;
        serex__pool_ring_try_shrink(p);
        if (!handed)
            return IDLE_AGAIN;
        /* a token made us the spinner: look as one (clear, then take) */
    }
}
