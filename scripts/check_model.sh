#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# check_model.sh - check the serial executor's drain protocol, the pool's
# park handshake and its per-worker run queues exhaustively with the spin
# model checker (tests/model/serial_drain.pml, pool_park.pml,
# pool_runq.pml, limiter_cap.pml and the others; what they model and what each property
# means: tests/model/README.md).
#
# For each configuration below: spin -a generates the verifier (pan.c), cc
# compiles it, and pan explores every interleaving (no bitstate, no
# compression: the state counts printed are of complete searches). Prints
# one line per configuration: states stored, errors, seconds.
# A model with no mutation is src/serial.c (or src/pool.c) as it is; every
# configuration of it must pass (fix-* check the two fixes of the README's Findings in
# the configurations that found them). The configurations named mut-* are
# mutations of the protocol (two of them the code before those fixes): for
# those the check passes only if spin does find the expected violation, so
# the model is shown able to fail.
# Needs spin (Debian package `spin`; installed with apt-get when missing
# and run as root) and a C compiler. Works in a temporary directory.
#
# Usage: scripts/check_model.sh [--keep] [NAME...]
#   --keep   keep the work directory (printed at the end)
#   NAME     run only the configurations whose names are given
# Environment: CC (default gcc, else cc).
# Exits 0 when every configuration gave what it expects, 1 otherwise, 2 on
# a missing tool or a bad argument.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$src/scripts/lib.sh"
models=$src/tests/model
keep=0
only=()
for arg in "$@"; do
    case $arg in
    --keep) keep=1 ;;
    -h | --help)
        usage "${BASH_SOURCE[0]}"
        exit 0
        ;;
    -*)
        echo "check_model.sh: unknown option '$arg' (try --help)" >&2
        exit 2
        ;;
    *) only+=("$arg") ;;
    esac
done

# name; expect (pass, or an ERE the first error must match); mode; -D...;
# model (default serial_drain.pml)
# mode: safety (assertions, invalid end states) or liveness (LTL, pan -a -f)
configs=(
    "2p2t-b1-now;pass;safety;-DNPROD=2 -DNTASK=2 -DBATCH=1 -DSTOPPER=1"
    "3p1t-b2-now;pass;safety;-DNPROD=3 -DNTASK=1 -DBATCH=2 -DSTOPPER=1"
    "2p2t-b2-refuse-now;pass;safety;-DNPROD=2 -DNTASK=2 -DBATCH=2 -DSTOPPER=1 -DREFUSE=1"
    "3p1t-b2-target-now;pass;safety;-DNPROD=3 -DNTASK=1 -DBATCH=2 -DSTOPPER=1 -DREFUSE=1 -DTSHUT=1 -DTSTOP=1"
    "2p2t-b2-target-keep;pass;safety;-DNPROD=2 -DNTASK=2 -DBATCH=2 -DSTOPPER=0 -DREFUSE=1 -DTSHUT=1 -DTSTOP=1"
    "2p2t-b2-shut-await;pass;safety;-DNPROD=2 -DNTASK=2 -DBATCH=2 -DSTOPPER=2 -DAWAITER=1"
    "3p1t-b1-now-await;pass;safety;-DNPROD=3 -DNTASK=1 -DBATCH=1 -DSTOPPER=1 -DAWAITER=1"
    "3p1t-b2-refuse-await;pass;safety;-DNPROD=3 -DNTASK=1 -DBATCH=2 -DSTOPPER=2 -DAWAITER=1 -DREFUSE=1"
    "2p1t-b1-all-live;pass;liveness;-DNPROD=2 -DNTASK=1 -DBATCH=1 -DSTOPPER=1 -DREFUSE=1 -DNFULL=2 -DTSHUT=1 -DTSTOP=1 -DAWAITER=1"
    "fix-await-order;pass;safety;-DNPROD=2 -DNTASK=1 -DBATCH=1 -DSTOPPER=2 -DAWAITER=1"
    "fix-batch-per-visit;pass;safety;-DNPROD=2 -DNTASK=2 -DBATCH=2 -DSTOPPER=0"
    "2p2t-b2-cap2-now;pass;safety;-DNPROD=2 -DNTASK=2 -DBATCH=2 -DSTOPPER=1 -DCAP=2"
    "3p1t-b1-cap1-target-now;pass;safety;-DNPROD=3 -DNTASK=1 -DBATCH=1 -DSTOPPER=1 -DREFUSE=1 -DTSHUT=1 -DTSTOP=1 -DCAP=1"
    "2p1t-b1-cap1-wait-keep;pass;safety;-DNPROD=2 -DNTASK=1 -DBATCH=1 -DSTOPPER=0 -DCAP=1 -DWAITER=1"
    "2p1t-b1-cap1-wait-now;pass;safety;-DNPROD=2 -DNTASK=1 -DBATCH=1 -DSTOPPER=1 -DCAP=1 -DWAITER=1"
    "2p1t-b2-cap1-wait-shut-await;pass;safety;-DNPROD=2 -DNTASK=1 -DBATCH=2 -DSTOPPER=2 -DAWAITER=1 -DCAP=1 -DWAITER=1"
    "1p2t-b2-cap1-wait-target-now;pass;safety;-DNPROD=1 -DNTASK=2 -DBATCH=2 -DSTOPPER=1 -DREFUSE=1 -DTSHUT=1 -DTSTOP=1 -DCAP=1 -DWAITER=1"
    "2p1t-b1-cap2-wait-keep;pass;safety;-DNPROD=2 -DNTASK=1 -DBATCH=1 -DSTOPPER=0 -DCAP=2 -DWAITER=1"
    "1p1t-b1-cap1-wait-live;pass;liveness;-DNPROD=1 -DNTASK=1 -DBATCH=1 -DSTOPPER=1 -DREFUSE=1 -DNFULL=2 -DTSHUT=1 -DTSTOP=1 -DCAP=1 -DWAITER=1"
    "2p2t-b1-full-keep;pass;safety;-DNPROD=2 -DNTASK=2 -DBATCH=1 -DSTOPPER=0 -DREFUSE=1"
    "2p1t-b1-full-target-shut-await;pass;safety;-DNPROD=2 -DNTASK=1 -DBATCH=1 -DSTOPPER=2 -DAWAITER=1 -DREFUSE=1 -DTSHUT=1"
    "2p1t-b1-cap1-wait-full;pass;safety;-DNPROD=2 -DNTASK=1 -DBATCH=1 -DSTOPPER=0 -DCAP=1 -DWAITER=1 -DREFUSE=1 -DNFULL=3"
    "2p1t-b1-full-live;pass;liveness;-DNPROD=2 -DNTASK=1 -DBATCH=1 -DSTOPPER=2 -DREFUSE=1 -DNFULL=3 -DAWAITER=1"
    "mut-await-two-loads;assertion violated \\((running|.*status);safety;-DNPROD=2 -DNTASK=1 -DBATCH=1 -DSTOPPER=2 -DAWAITER=1 -DAWAIT_TWO_LOADS"
    "mut-batch-per-round;assertion violated \\(visit_ran;safety;-DNPROD=2 -DNTASK=2 -DBATCH=2 -DSTOPPER=0 -DBATCH_PER_ROUND"
    "mut-push-before-count;assertion violated;safety;-DNPROD=2 -DNTASK=2 -DBATCH=2 -DSTOPPER=1 -DPUSH_BEFORE_COUNT"
    "mut-cap-look-then-add;assertion violated \\((waiting|inq);safety;-DNPROD=2 -DNTASK=1 -DBATCH=1 -DSTOPPER=0 -DCAP=1 -DCAP_LOOK_THEN_ADD"
    "mut-room-no-retry;invalid end state;safety;-DNPROD=2 -DNTASK=1 -DBATCH=1 -DSTOPPER=0 -DCAP=1 -DWAITER=1 -DROOM_NO_RETRY"
    "mut-idle-waits-for-push;invalid end state;safety;-DNPROD=2 -DNTASK=2 -DBATCH=1 -DSTOPPER=1 -DIDLE_WAITS_FOR_PUSH"
    "mut-full-breaks;assertion violated \\(.*rejected_seen;safety;-DNPROD=2 -DNTASK=1 -DBATCH=1 -DSTOPPER=0 -DREFUSE=1 -DFULL_BREAKS"
    "mut-owed-look-then-clear;assertion violated \\(+(ndrain|owner);safety;-DNPROD=2 -DNTASK=2 -DBATCH=1 -DSTOPPER=0 -DREFUSE=1 -DAWAITER=1 -DOWED_LOOK_THEN_CLEAR"
    "mut-owed-no-wait-retry;assertion violated \\(.*(ran|wip);safety;-DNPROD=2 -DNTASK=1 -DBATCH=1 -DSTOPPER=2 -DREFUSE=1 -DAWAITER=1 -DOWED_NO_WAIT_RETRY"
    "park-1p3t-3w;pass;safety;-DNPROD=1 -DNTASK=3 -DNWORK=3;pool_park.pml"
    "park-2p2t-2w;pass;safety;-DNPROD=2 -DNTASK=2 -DNWORK=2;pool_park.pml"
    "park-3p1t-2w;pass;safety;-DNPROD=3 -DNTASK=1 -DNWORK=2;pool_park.pml"
    "park-2p2t-3w;pass;safety;-DNPROD=2 -DNTASK=2 -DNWORK=3;pool_park.pml"
    "park-elastic-1p2t-2w;pass;safety;-DNPROD=1 -DNTASK=2 -DNWORK=2 -DELASTIC=1;pool_park.pml"
    "park-elastic-1p2t-3w;pass;safety;-DNPROD=1 -DNTASK=2 -DNWORK=3 -DELASTIC=1;pool_park.pml"
    "park-no-handoff;pass;safety;-DNPROD=2 -DNTASK=2 -DNWORK=2 -DNO_HANDOFF;pool_park.pml"
    "mut-park-token-no-role;assertion violated \\(q;safety;-DNPROD=1 -DNTASK=2 -DNWORK=2 -DMUT_TOKEN_NO_ROLE;pool_park.pml"
    "mut-park-recheck-first;assertion violated \\(q;safety;-DNPROD=1 -DNTASK=2 -DNWORK=2 -DMUT_RECHECK_BEFORE_ANNOUNCE;pool_park.pml"
    "mut-park-retire-unlisted;assertion violated listed;safety;-DNPROD=1 -DNTASK=2 -DNWORK=2 -DELASTIC=1 -DMUT_RETIRE_UNLISTED;pool_park.pml"
    "mut-park-list-after-unlock;assertion violated \\(\\(listed;safety;-DNPROD=1 -DNTASK=2 -DNWORK=2 -DMUT_LIST_AFTER_UNLOCK;pool_park.pml"
    "slot-2w-busy;pass;safety;-DNWORK=2 -DXFROM=0;pool_park_slot.pml"
    "slot-3w-busy;pass;safety;-DNWORK=3 -DXFROM=0;pool_park_slot.pml"
    "slot-2w;pass;safety;-DNWORK=2 -DXFROM=1;pool_park_slot.pml"
    "slot-3w;pass;safety;-DNWORK=3 -DXFROM=1;pool_park_slot.pml"
    "slot-2w-2plain;pass;safety;-DNWORK=2 -DXFROM=1 -DNPLAIN=2;pool_park_slot.pml"
    "slot-waiter-3w-busy;pass;safety;-DNWORK=3 -DXFROM=0 -DWAITER=1;pool_park_slot.pml"
    "slot-waiter-3w;pass;safety;-DNWORK=3 -DXFROM=1 -DWAITER=1;pool_park_slot.pml"
    "mut-slot-spinner-ignores;invalid end state;safety;-DNWORK=2 -DXFROM=0 -DMUT_SPINNER_NO_SLOT;pool_park_slot.pml"
    "mut-slot-when-spinning;invalid end state;safety;-DNWORK=2 -DXFROM=1 -DMUT_SLOT_WHEN_SPINNING;pool_park_slot.pml"
    "mut-slot-no-wake;invalid end state;safety;-DNWORK=2 -DXFROM=0 -DMUT_NO_SLOT_WAKE;pool_park_slot.pml"
    "mut-slot-others-never;invalid end state;safety;-DNWORK=2 -DXFROM=1 -DMUT_OTHERS_NO_SLOT;pool_park_slot.pml"
    "mut-slot-no-idle-wake;invalid end state;safety;-DNWORK=3 -DXFROM=1 -DWAITER=1 -DMUT_NO_IDLE_SLOT_WAKE;pool_park_slot.pml"
    "threads-tmax2;pass;safety;-DTMAX=2;pool_threads.pml"
    "threads-tmax3;pass;safety;-DTMAX=3;pool_threads.pml"
    "mut-threads-no-debt;invalid end state;safety;-DTMAX=2 -DMUT_NO_DEBT;pool_threads.pml"
    "mut-threads-no-rearm;assertion violated \\(held;safety;-DTMAX=2 -DMUT_NO_REARM;pool_threads.pml"
    "threads-blocking;pass;safety;-DTMAX=2 -DBLOCKING;pool_threads.pml"
    "threads-blocking-shut;pass;safety;-DTMAX=3 -DBLOCKING -DSHUT_EARLY;pool_threads.pml"
    "mut-threads-no-begin-wake;invalid end state;safety;-DTMAX=2 -DBLOCKING -DMUT_NO_BEGIN_WAKE;pool_threads.pml"
    "mut-threads-no-cap;invalid end state;safety;-DTMAX=2 -DBLOCKING -DMUT_NO_CAP;pool_threads.pml"
    "mut-threads-no-shut-grow;invalid end state;safety;-DTMAX=2 -DBLOCKING -DSHUT_EARLY -DMUT_NO_SHUT_GROW;pool_threads.pml"
    "life-2p;pass;safety;-DNPROD=2;life.pml"
    "life-3p;pass;safety;-DNPROD=3;life.pml"
    "mut-life-hold-after-leave;assertion violated \\(freed;safety;-DNPROD=2 -DMUT_HOLD_AFTER_LEAVE;life.pml"
    "mut-life-no-quiesce;assertion violated \\(freed;safety;-DNPROD=2 -DMUT_NO_QUIESCE;life.pml"
    "mut-life-free-on-zero;assertion violated \\(freed;safety;-DNPROD=2 -DMUT_FREE_ON_ZERO;life.pml"
    "runq-c2-3t-yield-now;pass;safety;-DCAP=2 -DNTASK=3 -DYIELD=2 -DSHUT=1;pool_runq.pml"
    "runq-c2-3t-yield-keep;pass;safety;-DCAP=2 -DNTASK=3 -DYIELD=2 -DSHUT=0;pool_runq.pml"
    "runq-c2-4t-slot-now;pass;safety;-DCAP=2 -DNTASK=4 -DYIELD=0 -DSLOTS=1 -DSHUT=1;pool_runq.pml"
    "runq-c2-3t-mixed-now;pass;safety;-DCAP=2 -DNTASK=3 -DYIELD=1 -DSLOTS=1 -DSHUT=1;pool_runq.pml"
    "runq-c4-4t-yield-now;pass;safety;-DCAP=4 -DNTASK=4 -DYIELD=2 -DSHUT=1;pool_runq.pml"
    "runq-c4-5t-yield-now;pass;safety;-DCAP=4 -DNTASK=5 -DYIELD=2 -DSHUT=1;pool_runq.pml"
    "mut-runq-thief-store;assertion violated \\(\\(+(ran|gf);safety;-DCAP=2 -DNTASK=3 -DYIELD=2 -DMUT_THIEF_STORE;pool_runq.pml"
    "mut-runq-no-room;assertion violated \\(\\(+gf;safety;-DCAP=2 -DNTASK=3 -DYIELD=2 -DMUT_NO_ROOM;pool_runq.pml"
    "mut-runq-no-wait;assertion violated \\( !\\(stop\\)\\|\\|\\(inq;safety;-DCAP=2 -DNTASK=3 -DSLOTS=1 -DMUT_NO_WAIT;pool_runq.pml"
    "mut-runq-stop-first;assertion violated \\( !\\(stop\\)\\|\\|\\(inq;safety;-DCAP=2 -DNTASK=3 -DSLOTS=1 -DMUT_STOP_FIRST;pool_runq.pml"
    "sched-3t-per1;pass;safety;-DNT=3 -DPER=1;sched_batch.pml"
    "sched-3t-oneshots;pass;safety;-DNT=3 -DPER=3;sched_batch.pml"
    "sched-4t-per2-refuse;pass;safety;-DNT=4 -DPER=2 -DREFUSE=1;sched_batch.pml"
    "sched-3t-per1-refuse-refire;pass;safety;-DNT=3 -DPER=1 -DREFUSE=1 -DREFIRE=1;sched_batch.pml"
    "sched-3t-per0-refuse-refire;pass;safety;-DNT=3 -DPER=0 -DREFUSE=1 -DREFIRE=1;sched_batch.pml"
    "mut-sched-link-after;assertion violated \\(freed;safety;-DNT=2 -DPER=2 -DREFUSE=1 -DMUT_LINK_AFTER;sched_batch.pml"
    "mut-sched-cancel-frees;assertion violated \\(freed;safety;-DNT=2 -DPER=2 -DREFUSE=1 -DMUT_CANCEL_FREES;sched_batch.pml"
    "mut-sched-drop-no-state;assertion violated \\(+ran;safety;-DNT=2 -DPER=2 -DREFUSE=1 -DMUT_DROP_NO_STATE;sched_batch.pml"
    "mut-sched-gather-held;assertion violated \\(freed;safety;-DNT=2 -DPER=2 -DMUT_GATHER_HELD;sched_batch.pml"
    "sched-3t-per1-wait;pass;safety;-DNT=3 -DPER=1 -DWAITER=1;sched_batch.pml"
    "sched-2t-per0-wait-refuse-refire;pass;safety;-DNT=2 -DPER=0 -DWAITER=1 -DREFUSE=1 -DREFIRE=1;sched_batch.pml"
    "sched-3t-per1-token;pass;safety;-DNT=3 -DPER=1 -DTOKEN=1;sched_batch.pml"
    "sched-2t-per0-token-refuse-refire;pass;safety;-DNT=2 -DPER=0 -DTOKEN=1 -DREFUSE=1 -DREFIRE=1;sched_batch.pml"
    "sched-2t-per0-wait-token;pass;safety;-DNT=2 -DPER=0 -DWAITER=1 -DTOKEN=1;sched_batch.pml"
    "mut-sched-stopping-idle;assertion violated +!\\(inprog;safety;-DNT=2 -DPER=0 -DWAITER=1 -DMUT_STOPPING_IDLE;sched_batch.pml"
    "mut-sched-no-wake;invalid end state;safety;-DNT=2 -DPER=0 -DWAITER=1 -DMUT_NO_WAKE;sched_batch.pml"
    "mut-sched-notify-split;assertion violated \\(+notified;safety;-DNT=2 -DPER=1 -DWAITER=1 -DMUT_NOTIFY_SPLIT;sched_batch.pml"
    "mut-sched-free-hooked;assertion violated \\(freed;safety;-DNT=2 -DPER=0 -DTOKEN=1 -DMUT_FREE_HOOKED;sched_batch.pml"
    "mut-sched-fire-frees-held;assertion violated \\(freed;safety;-DNT=2 -DPER=0 -DTOKEN=1 -DMUT_FIRE_FREES_HELD;sched_batch.pml"
    "trace-ring;pass;safety;-DNTHR=3 -DNREC=2 -DNR1=2 -DNR2=1;trace_ring.pml"
    "trace-ring-2t3r;pass;safety;-DNTHR=2 -DNREC=3 -DNR1=2 -DNR2=2;trace_ring.pml"
    "trace-ring-2t-1ring;pass;safety;-DNTHR=2 -DNREC=2 -DNR1=1 -DNR2=2;trace_ring.pml"
    "mut-trace-stop-no-wait;assertion violated \\(+rs\\[mine\\];safety;-DNTHR=3 -DNREC=2 -DNR1=2 -DNR2=1 -DMUT_STOP_NO_WAIT;trace_ring.pml"
    "mut-trace-owner-no-cas;assertion violated \\(+(h==ndone|rs\\[mine\\]|.*stopped);safety;-DNTHR=3 -DNREC=2 -DNR1=2 -DNR2=1 -DMUT_OWNER_NO_CAS;trace_ring.pml"
    "mut-trace-no-gen;assertion violated \\(+(.*b==mygen|owner);safety;-DNTHR=3 -DNREC=2 -DNR1=2 -DNR2=1 -DMUT_NO_GEN;trace_ring.pml"
    "mut-trace-stop-skips-free;assertion violated \\(+(h==ndone|.*stopped);safety;-DNTHR=3 -DNREC=2 -DNR1=2 -DNR2=1 -DMUT_STOP_SKIPS_FREE;trace_ring.pml"
    "mut-trace-stop-waits-idle;(assertion violated \\(+ended|invalid end state);safety;-DNTHR=3 -DNREC=2 -DNR1=2 -DNR2=1 -DMUT_STOP_WAITS_FOR_IDLE;trace_ring.pml"
    "mut-trace-claim-ignores-on;assertion violated \\(+ndone;safety;-DNTHR=3 -DNREC=2 -DNR1=2 -DNR2=1 -DMUT_CLAIM_IGNORES_ON;trace_ring.pml"
    "mut-trace-drop-no-gen;assertion violated \\(+dgen;safety;-DNTHR=3 -DNREC=2 -DNR1=2 -DNR2=1 -DMUT_DROP_NO_GEN;trace_ring.pml"
    "registry-pin;pass;safety;-DNDUMP=2 -DNOWN=2 -DNSTAY=1;registry_pin.pml"
    "registry-pin-werr;pass;safety;-DNDUMP=2 -DNOWN=2 -DNSTAY=1 -DWERR=1;registry_pin.pml"
    "registry-pin-stay2;pass;safety;-DNDUMP=2 -DNOWN=2 -DNSTAY=2;registry_pin.pml"
    "registry-pin-reuse;pass;safety;-DNDUMP=2 -DNOWN=1 -DNSTAY=1 -DNCYC=2;registry_pin.pml"
    "registry-pin-reuse-1d2o;pass;safety;-DNDUMP=1 -DNOWN=2 -DNSTAY=1 -DNCYC=2;registry_pin.pml"
    "registry-pin-fork;pass;safety;-DNDUMP=2 -DNOWN=2 -DNSTAY=1 -DFORK=1;registry_pin.pml"
    "mut-registry-remove-no-wait;assertion violated \\(+( !\\(freed|desc);safety;-DNDUMP=2 -DNOWN=2 -DNSTAY=1 -DMUT_REMOVE_NO_WAIT;registry_pin.pml"
    "mut-registry-pin-leaving;assertion violated \\(+ !\\(leaving;safety;-DNDUMP=2 -DNOWN=2 -DNSTAY=1 -DMUT_PIN_LEAVING;registry_pin.pml"
    "mut-registry-unpin-unlocked;assertion violated \\(+(ndone|desc| !\\(freed);safety;-DNDUMP=2 -DNOWN=2 -DNSTAY=1 -DMUT_UNPIN_UNLOCKED;registry_pin.pml"
    "mut-registry-pin-cursor;assertion violated +!\\(\\(r>=;safety;-DNDUMP=2 -DNOWN=2 -DNSTAY=1 -DMUT_PIN_CURSOR;registry_pin.pml"
    "mut-registry-no-cursor;assertion violated \\(+p==0;safety;-DNDUMP=2 -DNOWN=2 -DNSTAY=1 -DMUT_NO_CURSOR;registry_pin.pml"
    "mut-registry-fork-keep-pins;assertion violated \\(+cpi;safety;-DNDUMP=2 -DNOWN=2 -DNSTAY=1 -DFORK=1 -DMUT_FORK_KEEP_PINS;registry_pin.pml"
    "cancel-2req;pass;safety;-DNREQ=2;cancel_reg.pml"
    "cancel-3req;pass;safety;-DNREQ=3;cancel_reg.pml"
    "cancel-inside-2req;pass;safety;-DNREQ=2 -DINSIDE=1;cancel_reg.pml"
    "cancel-inside-3req;pass;safety;-DNREQ=3 -DINSIDE=1;cancel_reg.pml"
    "mut-cancel-no-running-wait;assertion violated \\(\\(frees;safety;-DNREQ=2 -DMUT_NO_RUNNING_WAIT;cancel_reg.pml"
    "mut-cancel-free-before-done;assertion violated  !\\(freed;safety;-DNREQ=2 -DMUT_FREE_BEFORE_DONE;cancel_reg.pml"
    "mut-cancel-runner-no-unreg;assertion violated \\(\\(frees;safety;-DNREQ=2 -DINSIDE=1 -DMUT_RUNNER_NO_UNREG;cancel_reg.pml"
    "limiter-cap-lower;pass;safety;-DNPROD=2 -DNTASK=2 -DCAP0=3 -DCAP1=1;limiter_cap.pml"
    "limiter-cap-raise;pass;safety;-DNPROD=2 -DNTASK=2 -DCAP0=1 -DCAP1=3;limiter_cap.pml"
    "limiter-cap-raise-lower;pass;safety;-DNPROD=2 -DNTASK=2 -DCAP0=1 -DCAP1=3 -DCAP2=1;limiter_cap.pml"
    "limiter-cap-lower-raise;pass;safety;-DNPROD=2 -DNTASK=2 -DCAP0=3 -DCAP1=1 -DCAP2=2;limiter_cap.pml"
    "limiter-cap-3p-lower;pass;safety;-DNPROD=3 -DNTASK=1 -DCAP0=2 -DCAP1=1;limiter_cap.pml"
    "mut-limiter-shed-last;assertion violated \\(+\\(+Q==0;safety;-DNPROD=2 -DNTASK=2 -DCAP0=3 -DCAP1=1 -DMUT_SHED_LAST;limiter_cap.pml"
    "mut-limiter-no-peak;assertion violated \\(running<=cap;safety;-DNPROD=2 -DNTASK=2 -DCAP0=1 -DCAP1=3 -DCAP2=1 -DMUT_NO_PEAK;limiter_cap.pml"
    "mut-limiter-cap-unlocked;assertion violated \\(running<=cap;safety;-DNPROD=2 -DNTASK=2 -DCAP0=3 -DCAP1=1 -DMUT_CAP_UNLOCKED;limiter_cap.pml"
    "sem-2w-cancel;pass;safety;-DNW=2;semaphore.pml"
    "sem-2w-close-refuse;pass;safety;-DNW=2 -DCLOSE=1 -DREFUSE=1 -DTOKMASK=3;semaphore.pml"
    "sem-3w-cancel;pass;safety;-DNW=3;semaphore.pml"
    "sem-3w-free-close-refuse;pass;safety;-DNW=3 -DHOLD=0 -DTOKMASK=1 -DCLOSE=1 -DREFUSE=1;semaphore.pml"
    "sem-3w-close;pass;safety;-DNW=3 -DHOLD=1 -DTOKMASK=3 -DCLOSE=1 -DCANCEL=0;semaphore.pml"
    "mut-sem-no-recheck;assertion violated \\(+first==;safety;-DNW=3 -DHOLD=0 -DTOKMASK=1 -DMUT_NO_RECHECK;semaphore.pml"
    "mut-sem-fire-locks-first;assertion violated +!\\(sem_freed\\)$;safety;-DNW=2 -DMUT_FIRE_LOCKS_FIRST;semaphore.pml"
    "mut-sem-run-no-remove;assertion violated \\(+adds;safety;-DNW=2 -DMUT_RUN_NO_REMOVE;semaphore.pml"
    "mut-sem-park-by-store;assertion violated \\(completers;safety;-DNW=2 -DMUT_PARK_BY_STORE;semaphore.pml"
    "mut-sem-destroy-no-wait;assertion violated \\( !\\(sem_freed\\)&&linked;safety;-DNW=2 -DMUT_DESTROY_NO_WAIT;semaphore.pml"
)

ensure_spin() {
    command -v spin >/dev/null 2>&1 && return 0
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        echo "check_model.sh: installing spin with apt-get"
        if apt-get update >/dev/null &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y spin >/dev/null &&
            command -v spin >/dev/null 2>&1; then
            return 0
        fi
    fi
    echo "check_model.sh: spin is missing; install it (Debian: apt-get" \
        "install spin) and run scripts/check_model.sh again." >&2
    exit 2
}
ensure_spin
cc=${CC:-$(command -v gcc || echo cc)}
command -v "$cc" >/dev/null 2>&1 ||
    { echo "check_model.sh: no C compiler ('$cc')" >&2; exit 2; }
for m in serial_drain.pml pool_park.pml pool_park_slot.pml pool_threads.pml life.pml pool_runq.pml sched_batch.pml trace_ring.pml registry_pin.pml limiter_cap.pml semaphore.pml; do
    [ -r "$models/$m" ] || { echo "check_model.sh: $models/$m is missing" >&2; exit 2; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/serex-model.XXXXXX")
if [ "$keep" = 0 ]; then
    trap 'rm -rf "$work"' EXIT
fi

wanted() {
    [ ${#only[@]} = 0 ] && return 0
    local n
    for n in "${only[@]}"; do [ "$n" = "$1" ] && return 0; done
    return 1
}

# check NAME EXPECT MODE DEFINES MODEL: one configuration; prints its line.
check() {
    local name=$1 expect=$2 mode=$3 defs=$4 model=${5:-serial_drain.pml}
    local dir=$work/$name start end out states errors secs first verdict
    mkdir -p "$dir"
    cp "$models/$model" "$dir/"
    start=$(date +%s.%N)
    local -a panflags=(-m200000 -w24) ccflags=(-DSAFETY)
    if [ "$mode" = liveness ]; then
        defs="$defs -DLIVENESS"
        panflags+=(-a -f)
        ccflags=(-DNFAIR=8)
    fi
    # shellcheck disable=SC2086 # $defs is a list of -D options
    if ! (cd "$dir" && spin -a $defs "$model" >spin.log 2>&1); then
        printf '%-24s FAIL  spin -a failed:\n' "$name"
        sed 's/^/    /' "$dir/spin.log"
        return 1
    fi
    # -w: the generated C has harmless warnings that vary by compiler
    if ! (cd "$dir" && "$cc" -O1 -w "${ccflags[@]}" -o pan pan.c \
        >cc.log 2>&1); then
        printf '%-24s FAIL  cc pan.c failed:\n' "$name"
        sed 's/^/    /' "$dir/cc.log"
        return 1
    fi
    (cd "$dir" && ./pan "${panflags[@]}" >pan.log 2>&1) || true
    end=$(date +%s.%N)
    out=$dir/pan.log
    states=$(awk '/states, stored/ { print $1; exit }' "$out")
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" | head -n 1)
    secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
    first=$(grep -m 1 -oE '(assertion violated.*\(at depth|invalid end state|acceptance cycle|out of memory|max search depth too small).*' "$out" || true)
    first=${first% (at depth*}
    if [ -z "$states" ] || [ -z "$errors" ]; then
        verdict="FAIL  pan did not finish (see $out)"
    elif [ "$expect" = pass ]; then
        if [ "$errors" = 0 ] && ! grep -qE 'max search depth too small|Search not completed|out of memory' "$out"; then
            verdict="ok    exhaustive, no violation"
        else
            verdict="FAIL  ${first:-search incomplete}"
        fi
    elif [ "$errors" != 0 ] && printf '%s' "$first" | grep -qE "$expect"; then
        verdict="ok    mutation caught: $first"
    else
        verdict="FAIL  expected a violation ($expect), got: ${first:-none}"
    fi
    printf '%-24s %-8s states %9s  errors %s  %5s s  %s\n' "$name" \
        "$mode" "${states:-?}" "${errors:-?}" "$secs" "$verdict"
    [ "${verdict%% *}" = ok ]
}

echo "check_model.sh: spin $(spin -V | awk '{ print $3 }'), $("$cc" --version | head -n 1)"
failed=0 ran=0
for entry in "${configs[@]}"; do
    IFS=';' read -r name expect mode defs model <<<"$entry"
    wanted "$name" || continue
    ran=$((ran + 1))
    check "$name" "$expect" "$mode" "$defs" "$model" || failed=$((failed + 1))
done
[ "$keep" = 1 ] && echo "check_model.sh: work directory kept: $work"
if [ "$ran" = 0 ]; then
    echo "check_model.sh: no configuration named ${only[*]}" >&2
    exit 2
fi
if [ "$failed" != 0 ]; then
    echo "check_model.sh: $failed of $ran configurations FAILED"
    exit 1
fi
echo "check_model.sh: all $ran configurations as expected"
