#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sweep_plot.sh - turn a thread-count sweep (bench/sweep.sh) into
# docs/scaling.md and one plot per workload, docs/img/sweep-<bench>.png.
#
#   bench/sweep_plot.sh [--out DIR] [FILE]
#
# FILE        the sweep's RESULT lines, as bench/sweep.sh saves them
#             (default: the newest bench/results/*-sweep.txt)
# --out DIR   where scaling.md and img/ go (default: docs/)
#
# It runs nothing but python3 and gnuplot: never a benchmark.
# bench/table.py --sweep reads the RESULT lines (medians per bench, case,
# T and impl) and writes the table and the gnuplot data (into a temporary
# folder: only the PNGs are kept, so bench/plots.sh, which replaces every
# DIR/img/*.dat, and this script stay out of each other's way). Each plot
# has throughput against T (log2 axis), a line per impl, a panel per case
# (P for pool_throughput, K for striped_throughput); T above the CPU count
# in the file's "# machine:" line is shaded as oversubscribed.
# DIR/scaling.md is rewritten whole (do not edit it by hand).
# gnuplot: apt-get install gnuplot-nox. Without it the page is still
# written, without plots, and the exit status is 1. Exit status 2: bad
# usage or no RESULT lines.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
table=(python3 "$here/table.py")

log() { echo "[sweep_plot] $*" >&2; }
die() { log "$*"; exit 2; }

out="$repo/docs"
file=""
while [ $# -gt 0 ]; do
    case "$1" in
        --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift ;;
        -h|--help) sed -n '3,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option: $1" ;;
        *) [ -z "$file" ] || die "one sweep file only"; file="$1" ;;
    esac
    shift
done
if [ -z "$file" ]; then
    for f in "$repo"/bench/results/*-sweep.txt; do [ -e "$f" ] && file="$f"; done  # the last by name
    [ -n "$file" ] || die "no bench/results/*-sweep.txt: pass the sweep file"
fi
[ -r "$file" ] || die "cannot read $file"
img="$out/img"
mkdir -p "$img" || die "cannot make $img"

# Paths as the page shows them: relative to the repository when inside it.
show() { local p; p="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; echo "${p#"$repo"/}"; }
shown="$(show "$file")"
command_line="bench/sweep_plot.sh"
[ "$(show "$out")" != docs ] && command_line+=" --out $(show "$out")"
command_line+=" $shown"

# ---- what the file says about itself ----
head_line="$(grep -m1 '^# sweep.sh ' "$file" | sed 's/^# //')"
machine="$(grep -m1 '^# machine: ' "$file" | sed 's/^# machine: //')"
cpus="$(sed -n 's/^# machine: \([0-9][0-9]*\) online CPUs.*/\1/p' "$file" | head -1)"
field() { sed -n "s/.* $1=\"\\{0,1\\}\\([^\" ]*\\).*/\\1/p" <<< "$head_line"; }
quick="$(field quick)"
repeat="$(field repeat)"
threads_list="$(sed -n 's/.* threads="\([^"]*\)".*/\1/p' <<< "$head_line")"
[ -n "$threads_list" ] || threads_list="$(grep -o '^RESULT .* threads=[0-9]*' "$file" \
    | sed 's/.* threads=//' | sort -nu | paste -sd' ' -)"
cpuflag=()
[ -n "$cpus" ] && cpuflag=(--cpus "$cpus")

# ---- the data: one file per bench, written by table.py ----
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mapfile -t data < <("${table[@]}" --sweep --data "$tmp" "$file")
[ ${#data[@]} -gt 0 ] || die "no RESULT lines with a throughput metric in $shown"

# shellcheck source=bench/plot_colours.sh
. "$here/plot_colours.sh" # colour[impl], pick_colour

title_of() {
    case "$1" in
        pool_throughput) echo "Pool throughput" ;;
        serial_throughput) echo "Serial executor throughput" ;;
        serial_messaging) echo "Serial messaging (1,000 serials in a ring)" ;;
        striped_throughput) echo "Striped executor throughput" ;;
        timer_schedule_cancel) echo "Timer schedule + cancel" ;;
        channel_pipeline) echo "Channel pipeline (serex only)" ;;
        group_fanout) echo "Group fan-out (serex-nogroup: the same rounds, no group)" ;;
        *) echo "$1" ;;
    esac
}

# gnuplot commands for one bench: a panel per case, a line per impl.
plot_script() {  # bench datafile png
    local bench="$1" dat="$2" png="$3" metric cases impls n i c col impl
    metric="$(sed -n 's/^# bench=[^ ]* metric=\([^ ]*\).*/\1/p' "$dat")"
    mapfile -t cases < <(sed -n 's/^# case //p' "$dat")
    read -r -a impls <<< "$(sed -n 's/^# columns: threads //p' "$dat")"
    n=${#cases[@]}
    local cols=1 rows=1 w=760 h=460
    if [ "$n" -ge 2 ]; then cols=2; rows=$(((n + 1) / 2)); w=1200; h=$((rows * 420 + 40)); fi
    local tmin tmax tics
    tmin="$(awk '!/^#/ && NF { print $1 }' "$dat" | sort -n | head -1)"
    tmax="$(awk '!/^#/ && NF { print $1 }' "$dat" | sort -n | tail -1)"
    tics="$(awk '!/^#/ && NF { print $1 }' "$dat" | sort -nu | paste -sd, -)"
    cat <<EOF
set terminal pngcairo noenhanced size $w,$h font "sans,10"
set output '$png'
set multiplot layout $rows,$cols title "$(title_of "$bench"): $metric, higher is better"
set logscale x 2
set xrange [$tmin / 1.25 : $tmax * 1.25]
set xtics ($tics) nomirror
set ytics nomirror
set border 3
set yrange [0:*]
set format y "%.1s%c"
set grid xtics ytics lc rgb "#dddddd"
set key outside right top
set xlabel "pool threads T (log2)"
set ylabel "$metric"
EOF
    if [ -n "$cpus" ] && [ "$tmax" -gt "$cpus" ]; then
        echo "set object 1 rect from first $cpus, graph 0 to graph 1, graph 1 fc rgb '#f0f0f0' fs solid noborder behind"
        echo "set xlabel 'pool threads T (log2); shaded: T > $cpus CPUs, oversubscribed'"
    fi
    for i in "${!cases[@]}"; do
        c="${cases[$i]}"
        local lines=() ttl
        ttl="$c"
        [ "$c" = - ] && ttl=""
        echo "set title \"$ttl\""
        for col in "${!impls[@]}"; do
            impl="${impls[$col]}"
            # a line only for an impl with a value in this case's block
            awk -v b="$i" -v c=$((col + 2)) '
                /^# case / { k++ } !/^#/ && NF && k == b + 1 && $c != "NaN" { f = 1 }
                END { exit !f }' "$dat" || continue
            pick_colour "$impl"
            local lw=1.5
            [ "$impl" = serex ] && lw=3  # serex drawn thicker
            lines+=("'$dat' index $i using 1:$((col + 2)) with linespoints lw $lw pt 7 ps 0.8 lc rgb '${colour[$impl]}' title '$impl'")
        done
        if [ ${#lines[@]} -eq 0 ]; then
            echo "set multiplot next"
            continue
        fi
        local joined
        joined="$(printf '%s, ' "${lines[@]}")"
        echo "plot ${joined%, }"
    done
    echo "unset multiplot"
}

benches=()
made=()
have_gnuplot=1
command -v gnuplot > /dev/null || {
    have_gnuplot=0
    log "gnuplot not found (apt-get install gnuplot-nox): writing the page, no plots"
}
for dat in "${data[@]}"; do
    b="$(basename "$dat" .dat)"; b="${b#sweep-}"
    benches+=("$b")
    png="$img/sweep-$b.png"
    rm -f "$png"
    [ $have_gnuplot = 1 ] || continue
    plot_script "$b" "$dat" "$png" > "$tmp/$b.gp"
    if gnuplot "$tmp/$b.gp" 2> "$tmp/$b.err"; then
        made+=("$b")
    else
        log "gnuplot failed on $b:"; cat "$tmp/$b.err" >&2
        rm -f "$png"
    fi
    [ -z "${PLOTS_KEEP_GP:-}" ] || cp "$tmp/$b.gp" "$img/sweep-$b.gp"  # for debugging
done

# ---- the page ----
sizes="full sizes (not --quick: N = 2,000,000 tasks or hops, M = 1,000,000 timers)"
[ "$quick" = 1 ] && sizes="--quick sizes (N and M divided by 10)"
# the sweep.sh command that makes such a file
sweep_line="bench/sweep.sh"
[ -n "$threads_list" ] && [ "$threads_list" != "1 2 4 8 16" ] && sweep_line+=" --threads \"$threads_list\""
[ "$quick" = 1 ] && sweep_line+=" --quick"
defrep=3
[ "$quick" = 1 ] && defrep=1
[ -n "$repeat" ] && [ "$repeat" != "$defrep" ] && sweep_line+=" --repeat $repeat"
sweep_line+=" --out $shown"
notes="$(sed -n 's/^# note: /  Note: /p' "$file")"
times="${repeat:-?} times"
[ "$repeat" = 1 ] && times="once"
oversub=""
maxt="$(tr ' ' '\n' <<< "$threads_list" | sort -n | tail -1)"
if [ -n "$cpus" ] && [ -n "$maxt" ] && [ "$maxt" -le "$cpus" ]; then
    oversub="This machine has **$cpus CPUs**, at least one for every pool worker
at every T here (up to $maxt): the rows show how each implementation
**scales** with workers on cores of their own (vCPUs of a virtual
machine: neighbours can still take them)."
elif [ -n "$cpus" ]; then
    oversub="This machine has **$cpus CPUs**, so every row with T > $cpus (marked
\`(over)\` in the table, shaded in the plots) has more pool workers than
CPUs: it shows how each implementation copes with **oversubscription**,
not how it **scales**. Scaling to many cores needs a machine with that
many cores (16 for T = 16): run the same two commands there and add its
file here. [bench/results/2026-11-26-16core-device.txt](../bench/results/2026-11-26-16core-device.txt)
has earlier runs on a 16-vCPU machine (serex at T = 2 to 32, older serex
builds beside it, the C/C++ peers at T = 16 only, no JVM or Tokio peer):
not a sweep of every implementation."
fi

others=""
for f in "$repo"/bench/results/*-sweep.txt; do
    [ -e "$f" ] || continue
    rel="bench/results/$(basename "$f")"
    [ "$rel" = "$shown" ] && continue
    others+="- **Another sweep:** [$rel](../$rel) ($(sed -n 's/^# machine: //p' "$f" | head -1 | cut -d'(' -f1 | sed 's/ *$//')): \`bench/sweep_plot.sh $rel\` draws this page from it.
"
done
others="${others%$'\n'}"

page="$out/scaling.md"
{
    cat <<EOF
# Scaling: throughput against pool threads

<!-- Generated by bench/sweep_plot.sh from a bench/sweep.sh results file; do not edit by hand. -->

Every throughput workload run at several pool sizes T, serex and every
peer that runs the workload all at the same T (issue 21). The workloads are
those of [BENCHMARKS.md](BENCHMARKS.md) (defined in
[shared/bench/WORKLOADS.md](../../shared/bench/WORKLOADS.md) and
[bench/README.md](../bench/README.md)); that page has one thread count, this
one the sweep.

## What was run, and on what

- **Machine:** ${machine:-not recorded in the file}.
- **Runs:** \`bench/sweep.sh\` ran \`bench/compare.sh --threads T\` once for
  each T in ${threads_list:-?}, one after another, nothing else running
  (under \`flock /tmp/bench.lock\`), at $sizes. serex ran each
  measurement $times (\`--repeat ${repeat:-?}\`); the peers'
  runners kept their own counts (the C/C++ and Tokio peers 3 in a full run,
  1 with --quick; the JVM peers one measured pass after a warm-up pass in
  the same JVM), unless a note below says otherwise. Every value is the median of an impl's valid runs of
  that case at that T; \`runs\` says how many (serex / the best other).
  A Tokio case can have a run fewer: \`shared/peers/rust/run\` skips a
  measurement now and then (its \`bench_tokio --list | grep -q\` under
  pipefail fails when bench_tokio dies of the broken pipe).
- **The file:** [$shown](../$shown): \`$head_line\`.
$notes
$others
- **Rerun**: build \`serex_bench\` (Release, as in
  [bench/README.md](../bench/README.md)), then

      flock /tmp/bench.lock $sweep_line
      $command_line

  (\`bench/sweep.sh PATH/serex_bench\` for a binary elsewhere; the
  second command only draws this page and its plots.)

  \`bench/sweep.sh --help\` has the options (\`--threads "1 2 4"\`,
  \`--quick\`, \`--repeat R\`, a serex_bench path, workload names).

## Read this first

$oversub

Single runs on a shared virtual machine move by tens of percent from one
run to the next; read the shape of each line and the ratio between impls at
the same T, not one point. Some workloads do not use T the same way:

- **pool_throughput**: P=1 is one producer thread; P=T is T producers
  (at T = 16, 16 producer threads beside 16 workers). At T = 1 the one run
  (P=1) stands in both panels.
- **timer_schedule_cancel**: the main thread schedules and cancels and
  every implementation's timers run on one timer thread; T is only the
  size of a pool that has nothing to do, so a flat line is expected.
- **channel_pipeline** and **group_fanout** are serex's own: no peer runs
  them. For group_fanout the "best other" is \`serex-nogroup\`, the same
  rounds without a group: the ratio is the group's own cost (the
  workload's goal, at least 0.8 of pool_throughput P=1, is set against
  the pool_throughput rows).

## The table

serex against the best other implementation at each (workload, case, T);
serex/best > 1: serex is ahead.

EOF
    "${table[@]}" --sweep --markdown "${cpuflag[@]}" "$file" | sed '/^$/,$d'
    echo
    "${table[@]}" --sweep --markdown "${cpuflag[@]}" "$file" | sed '1,/^$/d' | sed 's/$/  /'
    echo
    echo "## The plots"
    echo
    echo "One per workload: throughput against T (log2 axis), a line per"
    echo "implementation, a panel per case."
    echo
    for b in "${benches[@]}"; do
        [[ " ${made[*]} " == *" $b "* ]] || continue
        printf '### %s\n\n![%s against threads](img/sweep-%s.png)\n\n' "$b" "$b" "$b"
    done
    if [ $have_gnuplot = 0 ]; then
        echo "(No plots: gnuplot was not installed when this page was made.)"
    fi
} > "$page.tmp" || die "cannot write $page.tmp"
mv "$page.tmp" "$page" || die "cannot write $page"

log "wrote $(show "$page") and ${#made[@]} plots in $(show "$img")"
[ $have_gnuplot = 1 ] || exit 1
exit 0
