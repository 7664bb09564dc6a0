#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sweep.sh - the throughput workloads at several pool sizes: bench/compare.sh
# once per thread count T (serex, then every peer that knows the workload,
# all at that T), every RESULT line saved in one file.
#
#   bench/sweep.sh [PATH/serex_bench] [--threads "T ..."] [--quick]
#                  [--repeat R] [--out FILE] [--note TEXT] [--no-peers]
#                  [BENCH ...]
#
# PATH/serex_bench  the binary (default: build/bench/serex_bench); any
#                   argument containing a '/' is taken as the binary
# --threads "T ..." the thread counts (default "1 2 4 8 16")
# --quick           N and M divided by 10 (compare.sh --quick)
# --repeat R        compare.sh --repeat: serex's runs per measurement
#                   (compare.sh's default: 3, 1 with --quick); the peers'
#                   runners keep their own count (3 for the C/C++ and Tokio
#                   peers in a full run, 1 with --quick; the JVM peers
#                   measure one pass after a warm-up). A full sweep of 5 T
#                   took 6 minutes on 2 cores with 3, 5.5 with 1.
# --out FILE        where the RESULT lines go (default:
#                   bench/results/YYYY-MM-DD-<nproc>core-sweep.txt)
# --note TEXT       one more '#' line for the file's header (e.g. which
#                   tree the binary was built from)
# --no-peers        serex only
# BENCH             workloads (default: the throughput ones serex_bench
#                   knows: pool_throughput serial_throughput serial_messaging
#                   striped_throughput timer_schedule_cancel channel_pipeline
#                   group_fanout; the last two are serex's own)
#
# The file starts with '#' lines on the machine (CPU count, lscpu's model
# name; a T above the CPU count is oversubscribed), then each T's
# compare.sh output: its '# compare.sh ... threads=T' line and its RESULT
# lines, and a last '# sweep.sh done' line with the time taken. compare.sh's
# own --sweep (serex's pools only) is turned off.
# bench/sweep_plot.sh draws docs/scaling.md and docs/img/sweep-*.png from
# the file. Nothing runs in parallel; hold the benchmark lock:
#     flock /tmp/bench.lock bench/sweep.sh
# Exit status: 0; 1 if a compare.sh run reported a failed measurement;
# 2 on bad usage or when no RESULT line was saved.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"

log() { echo "[sweep] $*" >&2; }
die() { log "$*"; exit 2; }

bin="$repo/build/bench/serex_bench"
threads_list="1 2 4 8 16"
repeat=""
quick=()
peers=()
out=""
note=""
benches=()
while [ $# -gt 0 ]; do
    case "$1" in
        --threads) [ $# -ge 2 ] || die "--threads needs a value"; threads_list="$2"; shift ;;
        --repeat) [ $# -ge 2 ] || die "--repeat needs a value"; repeat="$2"; shift ;;
        --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift ;;
        --note) [ $# -ge 2 ] || die "--note needs a value"; note="$2"; shift ;;
        --quick) quick=(--quick) ;;
        --no-peers) peers=(--no-peers) ;;
        -h|--help) sed -n '3,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option: $1" ;;
        */*) bin="$1" ;;
        *) benches+=("$1") ;;
    esac
    shift
done
[ -n "$threads_list" ] || die "--threads: no thread count"
for t in $threads_list; do [[ "$t" =~ ^[1-9][0-9]*$ ]] || die "bad --threads: $threads_list"; done
[ -n "$repeat" ] || { [ ${#quick[@]} -gt 0 ] && repeat=1 || repeat=3; }
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || die "bad --repeat: $repeat"
[ -x "$bin" ] || die "no serex_bench at $bin: build it (see bench/README.md) or pass its path"

if [ ${#benches[@]} -eq 0 ]; then
    mapfile -t known < <("$bin" --list)
    for b in pool_throughput serial_throughput serial_messaging striped_throughput \
             timer_schedule_cancel channel_pipeline group_fanout; do
        [[ " ${known[*]} " == *" $b "* ]] && benches+=("$b")
    done
    [ ${#benches[@]} -gt 0 ] || die "$bin knows none of the throughput workloads"
fi

cpus="$(nproc)"
[ -n "$out" ] || out="$repo/bench/results/$(date +%F)-${cpus}core-sweep.txt"
model="$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
hyper="$(lscpu 2>/dev/null | sed -n 's/^Hypervisor vendor: *//p' | head -1)"
rev="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo none)"
quickword=0
[ ${#quick[@]} -gt 0 ] && quickword=1
{
    echo "# sweep.sh $(date -Is) rev=$rev threads=\"$threads_list\" quick=$quickword repeat=$repeat benches=\"${benches[*]}\""
    echo "# machine: $cpus online CPUs (lscpu: ${model:-model unknown}${hyper:+, $hyper guest}); T > $cpus is oversubscribed (more pool workers than CPUs): those rows show oversubscription, not scaling"
    [ -z "$note" ] || echo "# note: $note"
} > "$out" || die "cannot write $out"

tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
failed=0
for t in $threads_list; do
    log "T=$t: compare.sh --threads $t --repeat $repeat ${quick[*]} ${peers[*]} ${benches[*]}"
    start=$SECONDS
    # compare.sh's table goes to stderr: stdout is the caller's log only
    "$here/compare.sh" "$bin" --threads "$t" --repeat "$repeat" --sweep "" \
        "${quick[@]}" "${peers[@]}" --out "$tmp" "${benches[@]}" >&2
    rc=$?
    [ "$rc" = 0 ] || { log "T=$t: compare.sh exited with $rc"; failed=1; }
    cat "$tmp" >> "$out" || die "cannot append to $out"
    log "T=$t: $(grep -c '^RESULT ' "$tmp") RESULT lines in $((SECONDS - start)) s"
done

n="$(grep -c '^RESULT ' "$out")"
echo "# sweep.sh done $(date -Is): $n RESULT lines in $SECONDS s" >> "$out"
log "$n RESULT lines saved in $out (draw: bench/sweep_plot.sh $out)"
[ "$n" -gt 0 ] || exit 2
exit $failed
