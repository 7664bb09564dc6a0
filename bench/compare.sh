#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# compare.sh - run serex_bench, then the peer benchmarks, one after the
# other, save every RESULT line, and print serex beside the best peer.
#
#   bench/compare.sh [PATH/serex_bench] [--quick] [--threads T] [--repeat R]
#                    [--sweep "T ..."] [--out FILE] [--no-peers] [BENCH ...]
#
# PATH/serex_bench  the binary (default: build/bench/serex_bench in the repo);
#                   any argument containing a '/' is taken as the binary
# --quick           N and M divided by 10, 10,000 latency rounds (both)
# --threads T       pool worker threads (default: nproc; passed to both)
# --repeat R        serex runs every measurement R times, interleaved
#                   (default 3, 1 with --quick: what the C peers' runner does)
# --sweep "T ..."   serex's pools at each of these thread counts too, once
#                   each (default "1 2 4 8 16"; "" for none): pool_throughput,
#                   pool_latency and pool_idle_cpu, where they are run, so
#                   the table shows how a pool larger than the machine fares
# --out FILE        where the RESULT lines go (default: next to the binary,
#                   compare-YYYYmmdd-HHMMSS.txt); bench/table.py re-reads it
# --no-peers        run serex only (the table then has no peer column filled)
# BENCH             workload names (default: every bench serex_bench --list
#                   names). serex runs those it knows, the peers those they
#                   know; pool_idle_cpu and channel_pipeline are serex's
#                   alone.
#
# Like the peers' runner, every measurement runs in its own process: one
# serex_bench process per bench and variant. Nothing runs in parallel. For a
# full run hold the lock the peers' README asks for, so no other benchmark
# shares the machine:  flock /tmp/bench.lock bench/compare.sh
# Exit status: 0; 1 if a serex measurement failed; 2 if the peers' runner
# failed; the table is printed either way.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
peers="$repo/../shared/peers/run"
# The benches the peers' runners accept (shared/peers/c/run, java/run);
# they reject any other name, so only these are passed on (never
# pool_idle_cpu, pool_trickle or channel_pipeline, which are serex's
# alone).
peer_benches=(pool_throughput pool_latency serial_throughput
              striped_throughput timer_schedule_cancel timer_accuracy
              timer_periodic serial_messaging timer_load)

log() { echo "[compare] $*" >&2; }
die() { log "$*"; exit 2; }
has() { local x="$1" y; shift; for y in "$@"; do [ "$x" = "$y" ] && return 0; done; return 1; }

bin="$repo/build/bench/serex_bench"
quick=0
threads="$(nproc)"
repeat=""
out=""
run_peers=1
sweep="1 2 4 8 16"
benches=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --threads) [ $# -ge 2 ] || die "--threads needs a value"; threads="$2"; shift ;;
        --repeat) [ $# -ge 2 ] || die "--repeat needs a value"; repeat="$2"; shift ;;
        --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift ;;
        --no-peers) run_peers=0 ;;
        --sweep) [ $# -ge 2 ] || die "--sweep needs a value"; sweep="$2"; shift ;;
        -h|--help) sed -n '3,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option: $1" ;;
        */*) bin="$1" ;;
        *) benches+=("$1") ;;
    esac
    shift
done
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || die "bad --threads: $threads"
for t in $sweep; do [[ "$t" =~ ^[1-9][0-9]*$ ]] || die "bad --sweep: $sweep"; done
[ -n "$repeat" ] || { [ "$quick" = 1 ] && repeat=1 || repeat=3; }
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || die "bad --repeat: $repeat"
[ -x "$bin" ] || die "no serex_bench at $bin: build it (see bench/README.md) or pass its path"
[ "$run_peers" = 0 ] || [ -x "$peers" ] || die "no peers' runner at $peers"

# ---- which bench runs where ----
mapfile -t serex_known < <("$bin" --list)
[ ${#benches[@]} -gt 0 ] || benches=("${serex_known[@]}")
serex_run=()
peer_run=()
for b in "${benches[@]}"; do
    has "$b" "${serex_known[@]}" && serex_run+=("$b")
    has "$b" "${peer_benches[@]}" && peer_run+=("$b")
    has "$b" "${serex_known[@]}" "${peer_benches[@]}" || die "unknown bench: $b"
done
[ "$run_peers" = 1 ] || peer_run=()

# ---- the output file ----
[ -n "$out" ] || out="$(dirname "$bin")/compare-$(date +%Y%m%d-%H%M%S).txt"
rev="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo none)"
echo "# compare.sh $(date -Is) rev=$rev threads=$threads quick=$quick repeat=$repeat" > "$out" \
    || die "cannot write $out"

# ---- serex: one process per measurement, as the peers' runner does ----
# --variant is the producer count of pool_throughput and the stripe count K
# of striped_throughput: one K per process, so peak_rss_kb is that K's own.
variants() {  # bench -> variant values (0 = none), as in shared/peers/c/run
    case "$1" in
        pool_throughput) if [ "$threads" -gt 1 ]; then echo "1 $threads"; else echo 1; fi ;;
        striped_throughput) echo "1 64 4096 1000000" ;;
        group_fanout) echo "0 1" ;; # 1: the same rounds with no group
        *) echo 0 ;;
    esac
}

qflag=()
[ "$quick" = 1 ] && qflag=(--quick)
serex_failed=0
for ((rep = 1; rep <= repeat; rep++)); do
    for bench in "${serex_run[@]}"; do
        for v in $(variants "$bench"); do
            vflag=()
            [ "$v" != 0 ] && vflag=(--variant "$v")
            log "rep $rep/$repeat: serex $bench ${vflag[*]}"
            timeout 600 "$bin" "$bench" --threads "$threads" "${qflag[@]}" "${vflag[@]}" \
                | grep '^RESULT ' | tee -a "$out"
            rc=${PIPESTATUS[0]}
            [ "$rc" = 0 ] || { log "FAILED (exit $rc): serex $bench ${vflag[*]}"; serex_failed=1; }
        done
    done
done

# ---- the sweep: serex's pools at other thread counts (once each) ----
for t in $sweep; do
    [ "$t" = "$threads" ] && continue # measured above
    for bench in pool_throughput pool_latency pool_idle_cpu; do
        has "$bench" "${serex_run[@]}" || continue
        vflag=()
        [ "$bench" = pool_throughput ] && vflag=(--variant 1)
        log "sweep T=$t: serex $bench ${vflag[*]}"
        timeout 600 "$bin" "$bench" --threads "$t" "${qflag[@]}" "${vflag[@]}" \
            | grep '^RESULT ' | tee -a "$out"
        rc=${PIPESTATUS[0]}
        [ "$rc" = 0 ] || { log "FAILED (exit $rc): serex $bench T=$t"; serex_failed=1; }
    done
done

# ---- the peers, after serex, never beside it ----
peers_failed=0
if [ ${#peer_run[@]} -gt 0 ]; then
    log "peers: $peers ${qflag[*]} --threads $threads ${peer_run[*]}"
    "$peers" "${qflag[@]}" --threads "$threads" "${peer_run[@]}" \
        | grep '^RESULT ' | tee -a "$out"
    rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] || { log "the peers' runner exited with $rc"; peers_failed=1; }
fi

echo
python3 "$here/table.py" "$out"
echo "RESULT lines saved in $out (re-tabulate: python3 bench/table.py $out)"
[ "$serex_failed" = 1 ] && exit 1
[ "$peers_failed" = 1 ] && exit 2
exit 0
