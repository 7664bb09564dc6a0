#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# plots.sh - turn saved RESULT lines into docs/BENCHMARKS.md and its plots.
#
#   bench/plots.sh [--machine TEXT] [--out DIR] [FILE ...]
#
# FILE          files of RESULT lines, as compare.sh saves them
#               (default: bench/results/*.txt but the thread-count sweeps,
#               *-sweep.txt, which bench/sweep_plot.sh draws in
#               docs/scaling.md; passed by name they are tabulated too,
#               each T a case of its own)
# --machine T   one line on the machine the results were taken on, for the
#               page (default: what the files say: their threads= count);
#               also $SEREX_BENCH_MACHINE
# --out DIR     where BENCHMARKS.md and img/ go (default: docs/)
#
# It runs nothing but python3 and gnuplot: never a benchmark. bench/table.py
# reads the RESULT lines (the one parser) and writes the medians as gnuplot
# data files into DIR/img/ (table.py --data) and the Markdown tables (table.py
# --markdown, --wide); gnuplot draws DIR/img/*.png from the data files. Every
# *.dat and every plot this script draws in DIR/img/ is replaced on each run;
# DIR/BENCHMARKS.md is rewritten whole (do not edit it by hand).
# gnuplot comes from Debian: apt-get install gnuplot-nox. Without it the page
# and the data files are still written, without plots, and the exit status
# is 1. Exit status 2: bad usage or no RESULT lines.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
table=(python3 "$here/table.py")

log() { echo "[plots] $*" >&2; }
die() { log "$*"; exit 2; }

machine="${SEREX_BENCH_MACHINE:-}"
out="$repo/docs"
files=()
while [ $# -gt 0 ]; do
    case "$1" in
        --machine) [ $# -ge 2 ] || die "--machine needs a value"; machine="$2"; shift ;;
        --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift ;;
        -h|--help) sed -n '3,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option: $1" ;;
        *) files+=("$1") ;;
    esac
    shift
done
if [ ${#files[@]} -eq 0 ]; then
    shopt -s nullglob
    for f in "$repo"/bench/results/*.txt; do
        [[ "$f" == *-sweep.txt ]] || files+=("$f")  # sweeps: sweep_plot.sh
    done
    shopt -u nullglob
fi
[ ${#files[@]} -gt 0 ] || die "no results files (bench/results/*.txt is empty)"
for f in "${files[@]}"; do [ -r "$f" ] || die "cannot read $f"; done
img="$out/img"
mkdir -p "$img" || die "cannot make $img"

# Paths as the page shows them: relative to the repository when inside it.
show() { local p; p="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; echo "${p#"$repo"/}"; }
shown=()
for f in "${files[@]}"; do shown+=("$(show "$f")"); done
quote() {  # a word as the shell would need it typed
    case "$1" in
        *"'"*) local q="${1//\\/\\\\}"; q="${q//\"/\\\"}"; q="${q//\$/\\\$}"; q="${q//\`/\\\`}"; echo "\"$q\"" ;;
        *) echo "'$1'" ;;
    esac
}
command_line="bench/plots.sh"
[ -n "$machine" ] && command_line+=" --machine $(quote "$machine")"
[ "$(show "$out")" != docs ] && command_line+=" --out $(show "$out")"
command_line+=" ${shown[*]}"

# ---- the data: one file per (bench, metric), written by table.py ----
rm -f "$img"/*.dat
mapfile -t data < <("${table[@]}" --data "$img" "${files[@]}")
[ ${#data[@]} -gt 0 ] || die "no RESULT lines in ${shown[*]}"
has_data() { [ -f "$img/$1.dat" ]; }
benches=()
for d in "${data[@]}"; do
    b="$(basename "$d")"; b="${b%%.*}"
    [[ " ${benches[*]} " == *" $b "* ]] || benches+=("$b")
done
has_bench() { [[ " ${benches[*]} " == *" $1 "* ]]; }

# ---- the plots ----
# name | title | y label | lin, log or abslog (log of |value|) | data files
plots=(
    "pool_throughput|Pool throughput (higher is better)|tasks/s|lin|pool_throughput.tasks_per_sec"
    "pool_latency|Pool latency, submit to start (lower is better)|ns (log scale)|log|pool_latency.p50_ns pool_latency.p99_ns"
    "serial_throughput|Serial executor throughput (higher is better)|tasks/s|lin|serial_throughput.tasks_per_sec"
    "striped_throughput|Striped throughput per stripe count K (higher is better)|tasks/s|lin|striped_throughput.tasks_per_sec"
    "striped_rss|Striped peak RSS per stripe count K (lower is better)|KiB (log scale)|log|striped_throughput.peak_rss_kb"
    "timer_schedule_cancel|Schedule + cancel of one-shot timers (higher is better)|operations/s|lin|timer_schedule_cancel.ops_per_sec"
    "timer_memory|Memory per pending timer (lower is better)|bytes (peak RSS growth / M)|lin|timer_schedule_cancel.bytes_per_timer"
    "timer_lateness|Timer lateness, one-shots due in [1, 500) ms (lower is better)|us (log scale)|log|timer_accuracy.p50_us timer_accuracy.p99_us"
    "timer_drift|Fixed-rate drift after 2 s at 10 ms (nearer 0 is better)|abs(drift), us (log scale)|abslog|timer_periodic.drift_us"
    "channel_pipeline|Channel pipeline (serex only)|items/s|lin|channel_pipeline.items_per_sec"
)

# A fixed colour per impl, so a peer looks the same in every plot.
# shellcheck source=bench/plot_colours.sh
. "$here/plot_colours.sh" # colour[impl], pick_colour

# The impls of a data file, from its "# columns: case IMPL ..." line.
columns_of() { sed -n 's/^# columns: case //p' "$1"; }
# True if column $2 of data file $1 has a value (gnuplot refuses a bar set
# with none, e.g. a peer whose only runs were invalid).
column_has_value() {
    awk -v c="$2" '!/^#/ { sub(/^"[^"]*"/, "x"); if ($c != "NaN") f = 1 } END { exit !f }' "$1"
}

# gnuplot commands for one plot: a cluster of bars per case, a bar per impl.
plot_script() {  # name title ylabel scale files...
    local name="$1" title="$2" ylabel="$3" scale="$4" f impl col expr
    shift 4
    local multi=0 parts=() titled=() at=0
    [ $# -gt 1 ] && multi=1
    cat <<EOF
set terminal pngcairo noenhanced size 900,460 font "sans,10"
set output '$img/$name.png'
set title "$title"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border rgb "#333333"
set boxwidth 0.9 relative
set grid ytics lc rgb "#dddddd"
set key outside right top
set ylabel "$ylabel"
set xtics nomirror
set ytics nomirror
set border 3
EOF
    local bad=""
    for f in "$@"; do  # peers left out of the plot: say so on it
        bad+="$(sed -n 's/^# only invalid runs (NaN here): //p' "$img/$f.dat") "
    done
    # shellcheck disable=SC2086 # split on purpose
    bad="$(printf '%s\n' $bad | sort -u | paste -sd" " -)"
    [ -n "$bad" ] && echo "set label \"not drawn (only invalid runs): $bad\" at graph 0.02, graph 0.97"
    if [ "$scale" = lin ]; then
        echo 'set yrange [0:*]'
        echo 'set format y "%.1s%c"'
    else
        echo 'set logscale y'
        echo 'set format y "%.0s%c"'
    fi
    for f in "$@"; do
        local metric="${f#*.}" path="$img/$f.dat" idx bars=()
        read -r -a impls <<< "$(columns_of "$path")"
        for idx in "${!impls[@]}"; do
            impl="${impls[$idx]}"
            col=$((idx + 2))
            column_has_value "$path" "$col" || continue
            expr="$col"
            [ "$scale" = abslog ] && expr="(abs(\$$col))"
            local src="''" tic="" ttl="notitle"
            if [ ${#bars[@]} -eq 0 ]; then  # the first bar names the file and the tics
                src="'$path'"
                # several files: the metric names each cluster (and the
                # case, unless it is only the thread count)
                if [ $multi = 1 ]; then tic=":xtic(strcol(1)[1:2] eq \"T=\" ? \"$metric\" : sprintf(\"$metric %s\", strcol(1)))"
                else tic=":xtic(1)"; fi
            fi
            [[ " ${titled[*]} " == *" $impl "* ]] || { ttl="title '$impl'"; titled+=("$impl"); }
            pick_colour "$impl"
            bars+=("$src using $expr$tic $ttl lc rgb '${colour[$impl]}'")
        done
        [ ${#bars[@]} -gt 0 ] || continue
        local joined
        joined="$(printf '%s, ' "${bars[@]}")"
        # each file's clusters after the last one's, one slot apart
        parts+=("newhistogram '' at $at, ${joined%, }")
        at=$((at + $(grep -vc '^#' "$path") + 1))
    done
    local all
    all="$(printf '%s, ' "${parts[@]}")"
    echo "plot ${all%, }"
}

made=()
have_gnuplot=1
command -v gnuplot > /dev/null || {
    have_gnuplot=0
    log "gnuplot not found (apt-get install gnuplot-nox): writing the page and the data, no plots"
}
for p in "${plots[@]}"; do
    IFS='|' read -r name title ylabel scale list <<< "$p"
    rm -f "$img/$name.png" "$img/$name.gp"
    present=()
    for f in $list; do has_data "$f" && present+=("$f"); done
    [ ${#present[@]} -gt 0 ] || continue
    plot_script "$name" "$title" "$ylabel" "$scale" "${present[@]}" > "$img/$name.gp"
    if [ $have_gnuplot = 1 ]; then
        if gnuplot "$img/$name.gp" 2> "$img/$name.err"; then
            made+=("$name")
            rm -f "$img/$name.err"
        else
            log "gnuplot failed on $img/$name.gp:"; cat "$img/$name.err" >&2
            rm -f "$img/$name.png" "$img/$name.err"
        fi
    fi
    [ -n "${PLOTS_KEEP_GP:-}" ] || rm -f "$img/$name.gp"  # kept on request, for debugging
done

# ---- the page ----
threads="$("${table[@]}" "${files[@]}" | awk 'NR > 1 { split($2, t, "="); if (t[1] == "T") print t[2] }' | sort -u | paste -sd, -)"
[ -n "$machine" ] || machine="not recorded in the results files; they were taken with threads=${threads:-?} (compare.sh defaults to one pool worker per online CPU)"

image() {  # name alt
    [[ " ${made[*]} " == *" $1 "* ]] && printf '![%s](img/%s.png)\n\n' "$2" "$1"
}
wide() {  # benches present among the arguments, one table each
    local b
    for b in "$@"; do
        has_bench "$b" || continue
        "${table[@]}" --wide --markdown --bench "$b" "${files[@]}" | sed -n '/^|/p'
        echo
    done
}
section() {  # title, "benches", "plots name:alt ..."
    local title="$1" bs="$2" ps="$3" b any=0 p
    for b in $bs; do has_bench "$b" && any=1; done
    [ $any = 1 ] || return 0
    printf '## %s\n\n' "$title"
    for p in $ps; do image "${p%%:*}" "${p#*:}"; done
    # shellcheck disable=SC2086
    wide $bs
}

known="pool_throughput pool_latency pool_idle_cpu serial_throughput striped_throughput timer_schedule_cancel timer_accuracy timer_periodic channel_pipeline"
others=()
for b in "${benches[@]}"; do [[ " $known " == *" $b "* ]] || others+=("$b"); done

page="$out/BENCHMARKS.md"
{
    cat <<EOF
# Benchmarks: serex beside its peers

<!-- Generated by bench/plots.sh from RESULT lines; do not edit by hand. -->

serex and other executor libraries run the same workloads
([shared/bench/WORKLOADS.md](../../shared/bench/WORKLOADS.md); serex's side
is \`serex_bench\` ([bench/bench_main.c](../bench/bench_main.c) and one file
per workload family beside it), described in
[bench/README.md](../bench/README.md)). \`bench/compare.sh\` runs serex, then
every peer, one at a time, and saves the RESULT lines; this page is drawn
from such files. The throughput workloads at T = 1, 2, 4, 8 and 16 pool
threads, serex and every peer at each T, are in [scaling.md](scaling.md)
(\`bench/sweep.sh\`, drawn by \`bench/sweep_plot.sh\`).

Regenerate it (and its plots in \`img/\`) with:

    $command_line

## How to read these numbers

- **Machine:** $machine.
- **One run, side by side:** each results file is one \`compare.sh\` session:
  serex and then the peers, one after another, on the same machine, nothing
  else running. Every value is the **median** of that impl's repeats of
  that case in the file (3 in a full run); the raw lines are in the files
  below.
- **Compare ratios, not absolute numbers.** On a shared machine the
  absolute figures can move by tens of percent from one session to the
  next, and between repeats; the ratio between impls measured in the same
  session is what carries over. Numbers from different files were not taken side by side (and if
  several files hold the same bench, their runs are pooled into one
  median: pass the files of one session for a clean comparison).
- Throughput (\`*_per_sec\`): higher is better. Latency, memory, lateness:
  lower is better. Drift: nearer 0 is better. A run with \`violations\` > 0
  (a lost task, a broken order, a timer fired outside its promise) is
  invalid: it is left out of the medians, and an impl with only invalid
  runs shows \`!\` and is never "best". Bold: the best valid value of a row.
- Plots use a log scale where the impls differ by orders of magnitude; the
  tables have the numbers.

The results files:

EOF
    for i in "${!files[@]}"; do
        hdr="$(grep -m1 '^# compare.sh' "${files[$i]}" | sed 's/^# //')"
        printf -- '- [%s](../%s)%s\n' "${shown[$i]}" "${shown[$i]}" "${hdr:+: \`$hdr\`}"
    done
    cat <<'EOF'

## The peers

| impl | what it is | runs |
| --- | --- | --- |
| `serex` | this library (`bench/serex_bench`) | every bench |
| `asio` | Boost.Asio 1.74: `thread_pool`, strands (an array of K for striped), `steady_timer` on one `io_context` thread | pool, serial, striped, timers |
| `cthreadpool` | Pithikos C-Thread-Pool (one mutex, a malloc per task) | pool |
| `libuv` | libuv 1.44: `uv_queue_work`, `uv_timer_*` (millisecond timers) | pool, timers |
| `tbb` | oneTBB 2021.8 `task_arena::enqueue` (idle workers spin) | pool |
| `jdk-tpe` | JDK `ThreadPoolExecutor` with a `LinkedBlockingQueue` | pool |
| `jdk-serial` | the serial executor of the JDK `Executor` javadoc over that pool; for striped, K of them made up front | serial, striped |
| `striped-map` | a JVM striped executor after Kabutz's StripedExecutorService: one lock, lanes made on first use and removed when idle | striped |
| `jdk-stpe` | JDK `ScheduledThreadPoolExecutor(1)`, remove-on-cancel | timers |
| `netty-hwt` | Netty 4.1 `HashedWheelTimer`, 1 ms tick, 512 slots | timers |

How each peer is driven: `shared/peers/c/README.md` and
`shared/peers/java/README.md`. The JVM peers run each workload twice in one
JVM and measure the second pass (after JIT warm-up).

## Summary: serex against the best peer

EOF
    "${table[@]}" --markdown "${files[@]}" | sed '/^$/d; /^Values are medians/,$d'
    echo
    "${table[@]}" --markdown "${files[@]}" | sed -n '/^Values are medians/,$p' | sed 's/$/  /'
    echo
    section "Pool" "pool_throughput pool_latency pool_idle_cpu" \
        "pool_throughput:pool-throughput pool_latency:pool-latency"
    if has_bench pool_idle_cpu; then
        cat <<'EOF'
`pool_idle_cpu` is serex's own check that spinning for latency costs
nothing once idle (CPU time in an idle second, % of one core); no peer runs
it.

EOF
    fi
    section "Serial executor" "serial_throughput" "serial_throughput:serial-throughput"
    section "Striped executor" "striped_throughput" \
        "striped_throughput:striped-throughput striped_rss:striped-peak-rss"
    if has_bench striped_throughput; then
        cat <<'EOF'
`lanes_alive` is the number of per-key records left after the drain (the
goal is 0): serex frees a key's lane as soon as it is idle; `jdk-serial`
keeps its K executors for the whole run, which favours it (no lookup, no
reclamation), and asio's K strands live in the caller's array (not
reported). `peak_rss_kb` is the whole process's: the JVM's includes its
heap.

EOF
    fi
    section "Timers" "timer_schedule_cancel timer_accuracy timer_periodic" \
        "timer_schedule_cancel:timer-schedule-cancel timer_memory:timer-memory timer_lateness:timer-lateness timer_drift:timer-drift"
    if has_bench timer_accuracy || has_bench timer_periodic; then
        cat <<'EOF'
Every serex timer task runs on the timer thread (target NULL), as asio's
handlers run on its one `io_context` thread. serex promises never to fire
early; libuv's timers have millisecond resolution and run off a cached loop
time, so some of its timers fire before their due time (`early` in the raw
lines, counted apart for the C peers), and its repeat timer, its only
periodic one, re-arms from the loop time, so it drifts and misses fires:
such timer_periodic runs are invalid. `timeout` (timeout.c), a target of
timer_schedule_cancel, has no peer benchmark yet.

EOF
    fi
    section "Channel pipeline" "channel_pipeline" "channel_pipeline:channel-pipeline"
    if [ ${#others[@]} -gt 0 ]; then
        printf '## Other benches\n\n'
        wide "${others[@]}"
    fi
    echo "Values are medians per (bench, impl, case); - = no result; ! = only"
    echo "invalid runs; bold = the best valid value of the row."
    if [ $have_gnuplot = 0 ]; then
        echo
        echo "(No plots: gnuplot was not installed when this page was made.)"
    fi
} > "$page.tmp" || die "cannot write $page.tmp"
mv "$page.tmp" "$page" || die "cannot write $page"

log "wrote $(show "$page"), ${#data[@]} data files and ${#made[@]} plots in $(show "$img")"
[ $have_gnuplot = 1 ] || exit 1
exit 0
