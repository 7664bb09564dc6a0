#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# trace_plot.sh - draw a flight-recorder trace (serex_trace_write's JSON)
# as a PNG timeline: one row per thread (the trace's tracks, named as in
# the trace), each task a bar from its start to its end, coloured by its
# executor (kind and address: "pool 0x55..."); a task run inside another
# (a serial's task in the pool task that drains it) is drawn thinner, over
# it. Parks, wake-ups, steals and timer events are dots above the row.
#
# Usage: scripts/trace_plot.sh [options] TRACE.json
#   -o FILE        the PNG to write (default: TRACE with .png for .json)
#   --from US      start the picture at US microseconds into the trace
#   --to US        end it there (default: the whole trace)
#   --flows        also draw each submit -> start arrow (busy pictures)
#   --no-instants  leave out the dots
#   --width PX     the picture's width (default 1600; height follows the
#                  number of threads)
#   -h, --help     this text
# Needs python3 (reads the JSON) and gnuplot with the pngcairo terminal
# (apt-get install gnuplot-nox). Exit status: 0 written; 1 gnuplot
# missing or failed; 2 bad usage or a file that is not a trace.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() {
    echo "trace_plot.sh: $*" >&2
    exit 2
}

out="" from="" to="" flows=0 instants=1 width=1600 trace=""
while [ $# -gt 0 ]; do
    case $1 in
    -o) [ $# -ge 2 ] || die "-o needs a file"; out=$2; shift ;;
    --from) [ $# -ge 2 ] || die "--from needs a time"; from=$2; shift ;;
    --to) [ $# -ge 2 ] || die "--to needs a time"; to=$2; shift ;;
    --flows) flows=1 ;;
    --no-instants) instants=0 ;;
    --width) [ $# -ge 2 ] || die "--width needs pixels"; width=$2; shift ;;
    -h | --help)
        # shellcheck source=scripts/lib.sh
        . "$here/lib.sh"
        usage "${BASH_SOURCE[0]}"
        exit 0
        ;;
    -*) die "unknown option '$1' (try --help)" ;;
    *) [ -z "$trace" ] || die "one trace at a time"; trace=$1 ;;
    esac
    shift
done
[ -n "$trace" ] || die "no trace given (try --help)"
[ -r "$trace" ] || die "cannot read $trace"
[[ $width =~ ^[0-9]+$ ]] || die "--width wants a number of pixels"
[ -n "$out" ] || out="${trace%.json}.png"
command -v python3 >/dev/null || die "python3 is needed to read the trace"
if ! command -v gnuplot >/dev/null; then
    echo "trace_plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The data (one block per executor, then the dots, then the arrows) and
# the gnuplot script that draws it.
python3 - "$trace" "$tmp" "$out" "$from" "$to" "$flows" "$instants" \
    "$width" <<'PY' || exit 2
import json, os, sys

trace, tmp, out, t_from, t_to, flows, instants, width = sys.argv[1:]
out = os.path.abspath(out)
flows, instants, width = flows == "1", instants == "1", int(width)
try:
    with open(trace) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
except (OSError, ValueError, KeyError, TypeError) as e:
    sys.exit(f"trace_plot.sh: {trace}: not a trace ({e})")

names, slices, dots, starts, ends = {}, [], [], {}, {}
for e in events:
    ph, tid = e.get("ph"), e.get("tid")
    if ph == "M" and e.get("name") == "thread_name":
        names[tid] = e["args"]["name"]
    elif ph == "X" and e.get("cat") != "submit":
        args = e.get("args", {})
        who = f'{e.get("cat", "?")} {args.get("executor", "")}'.strip()
        slices.append((tid, e["ts"], e["ts"] + e.get("dur", 0), who))
    elif ph == "i":
        dots.append((tid, e["ts"]))
    elif ph == "s":
        starts[e["id"]] = (tid, e["ts"])
    elif ph == "f":
        ends[e["id"]] = (tid, e["ts"])

tids = sorted(set(names) | {s[0] for s in slices} | {d[0] for d in dots})
if not tids:
    sys.exit(f"trace_plot.sh: {trace}: no threads in the trace")
row = {t: i for i, t in enumerate(tids)}
times = [s[1] for s in slices] + [s[2] for s in slices] + [d[1] for d in dots]
lo = float(t_from) if t_from else min(times, default=0.0)
hi = float(t_to) if t_to else max(times, default=1.0)
if hi <= lo:
    hi = lo + 1.0
span = hi - lo
unit, scale = ("us", 1.0) if span < 5e3 else ("ms", 1e-3) if span < 5e6 \
    else ("s", 1e-6)

# A slice's depth on its track: how many slices it is inside.
depth, open_ends = [], {}
for tid, a, b, who in slices:
    stack = open_ends.setdefault(tid, [])
    while stack and stack[-1] <= a:
        stack.pop()
    depth.append(len(stack))
    stack.append(b)

palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
order = []
for s in slices:
    if s[3] not in order:
        order.append(s[3])
blocks = {w: [] for w in order}
for (tid, a, b, who), d in zip(slices, depth):
    if b < lo or a > hi:
        continue
    h = max(0.38 - 0.1 * d, 0.08)
    y = row[tid]
    blocks[who].append(f"{(a - lo) * scale:.6f} {(b - lo) * scale:.6f} "
                       f"{y - h:.3f} {y + h:.3f}")
shown = [w for w in order if blocks[w]]

with open(os.path.join(tmp, "data"), "w") as f:
    for w in shown:
        f.write("\n".join(blocks[w]) + "\n\n\n")
    f.write("\n".join(f"{(t - lo) * scale:.6f} {row[tid] - 0.45:.3f}"
                      for tid, t in dots if lo <= t <= hi) or "0 -10")
    f.write("\n\n\n")
    arrows = [(starts[i], ends[i]) for i in starts if i in ends]
    f.write("\n".join(
        f"{(s[1] - lo) * scale:.6f} {row[s[0]]:.3f} "
        f"{(e[1] - s[1]) * scale:.6f} {row[e[0]] - row[s[0]]:.3f}"
        for s, e in arrows if lo <= s[1] <= hi) or "0 -10 0 0")
    f.write("\n")

other = doc.get("otherData", {})
title = (f"{os.path.basename(trace)}: {other.get('events', '?')} events, "
         f"{other.get('events_overwritten', 0)} overwritten, "
         f"{other.get('events_dropped', 0)} dropped")
ytics = ", ".join(
    '"{}" {}'.format(names.get(t, f"thread {t}").replace('"', "'"), row[t])
    for t in tids)
plots = [f"'data' index {i} using (($1+$2)/2):(($3+$4)/2):1:2:3:4 "
         f"with boxxyerror fs solid 0.85 noborder "
         f"lc rgb '{palette[i % len(palette)]}' "
         f"title '{w.replace(chr(39), chr(34))}'"
         for i, w in enumerate(shown)]
if instants and dots:
    plots.append(f"'data' index {len(shown)} using 1:2 with points pt 7 "
                 "ps 0.35 lc rgb '#444444' title 'park, unpark, steal, timer'")
if flows and arrows:
    plots.append(f"'data' index {len(shown) + 1} using 1:2:3:4 with vectors "
                 "nohead lw 0.5 lc rgb '#80000000' title 'submit -> start'")
if not plots:
    plots.append("NaN notitle")
height = 160 + 36 * len(tids)
with open(os.path.join(tmp, "plot.gp"), "w") as f:
    f.write(f"""set terminal pngcairo size {width},{height} font ',9'
set output '{out.replace("'", "''")}'
set title '{title.replace("'", "''")}' noenhanced
set xlabel 'time since the start of the recording ({unit})'
set xrange [0:{span * scale:.6f}]
set yrange [{len(tids) - 0.5}:-0.7]
set ytics ({ytics}) noenhanced
set grid xtics
set key above horizontal noenhanced
set border 3
set tics nomirror
cd '{tmp}'
plot {", ".join(plots)}
""")
PY

if ! gnuplot "$tmp/plot.gp"; then
    echo "trace_plot.sh: gnuplot failed on $tmp/plot.gp" >&2
    exit 1
fi
echo "trace_plot.sh: wrote $out"
