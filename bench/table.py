#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""table.py - set serex's RESULT lines beside the best peer's.

    table.py [--impl serex] [--markdown] [--detail] [--bench NAME ...]
             [--wide] [--data DIR] [--sweep [--cpus N]] [FILE ...]

Reads RESULT lines (shared/bench/WORKLOADS.md) from the files, or from
stdin when there are none or a file is "-"; other lines are ignored, so a
whole log can be fed in. Prints one row per (bench, case, metric):

    serex      median of serex's runs
    best peer  the best median among the other impls, and which impl it is
    serex/best and best/serex
    better     which way is better for that metric; "winner" applies it

Where TARGETS names the peers a bench's goal is set against (the timer
benches), those peers are marked "(target)", and each gets a row of its own
when it is not the best peer anyway; a target with no RESULT lines is noted
below the table.

A case is the thread count plus the workload's case keys (producers,
stripes), and the size (tasks, timers) when results of several sizes were
mixed. Runs are grouped per (bench, impl, case) and each metric is the
median of that group's runs, so repeated measurements (the peers' runner
does --repeat 3) count once. Runs with violations > 0 are invalid: they
are left out of the medians; an impl with only invalid runs is shown with
"!" and never chosen as the best.

Other views of the same medians (bench/plots.sh uses them for
docs/BENCHMARKS.md and docs/img/):
    --bench NAME  only that bench (repeatable)
    --wide        one table per bench, every impl side by side (columns:
                  the impl compared first, then the others by name); with
                  --markdown the best valid value of each row is in bold
    --data DIR    no table: write gnuplot data files DIR/<bench>.<metric>.dat
                  (a row per case, a column per impl, NaN where an impl has
                  no valid run) and print their paths
    --sweep       a thread-count sweep (bench/sweep.sh; bench/sweep_plot.sh
                  uses it for docs/scaling.md): one row per (bench, case,
                  T) of the bench's throughput metric, the impl against the
                  best other (P equal to T is "P=T"); --cpus N marks T > N
                  as oversubscribed; with --data DIR, DIR/sweep-<bench>.dat
                  instead: a block per case, a row per T, a column per impl
"""

import argparse
import statistics
import sys
from collections import defaultdict

# Which keys of each bench to tabulate, and which way is better:
# "higher", "lower", "abs" (closer to 0), or "show" (values only, no ratio:
# used where values near 0 make a ratio meaningless). A bench not listed
# here gets every *_per_sec key as "higher".
METRICS = {
    "pool_throughput": [("tasks_per_sec", "higher")],
    "pool_latency": [("p50_ns", "lower"), ("p99_ns", "lower")],
    "pool_idle_cpu": [("idle_cpu_pct", "show")],
    "serial_throughput": [("tasks_per_sec", "higher")],
    # lanes_alive: per-key records left after the drain (goal 0); only
    # impls that can count them report it (serex, the JVM striped-map).
    "striped_throughput": [("tasks_per_sec", "higher"),
                           ("peak_rss_kb", "lower"),
                           ("lanes_alive", "show")],
    # serex's own: no peer runs it, so only serex's value is shown.
    "channel_pipeline": [("items_per_sec", "higher"),
                         ("peak_rss_kb", "lower")],
    "timer_schedule_cancel": [("ops_per_sec", "higher"),
                              ("bytes_per_timer", "lower")],
    "timer_accuracy": [("p50_us", "lower"), ("p99_us", "lower")],
    "timer_periodic": [("drift_us", "abs")],
    "serial_messaging": [("hops_per_sec", "higher")],
    "timer_load": [("cpu_ns_per_timer", "lower"), ("p99_us", "lower"),
                   ("early", "show")],
    # serex's own; its "peer" is trickle_floor (impl=condvar-floor): the
    # plainest condvar pool, what waking a worker costs on this machine.
    "pool_trickle": [("cpu_pct", "lower"), ("pool_cpu_pct", "lower"),
                     ("p50_us", "lower"), ("p99_us", "lower")],
    # serex's own: no peer runs these.
    "future_chain": [("ns_per_link", "lower")],
    "group_fanout": [("tasks_per_sec", "higher")],
}

# The peers each bench's goal ratio is set against, by impl name. "timeout"
# (William Ahern's timeout.c) has no peer benchmark in shared/peers yet, so
# it is only noted as missing.
TARGETS = {
    "timer_schedule_cancel": ["netty-hwt", "timeout"],
    "timer_accuracy": ["asio"],
    "timer_periodic": ["asio"],
}

CASE_KEYS = [("producers", "P"), ("stripes", "K")]
SIZE_KEYS = [("tasks", "N"), ("timers", "M")]

BETTER_TEXT = {"higher": "higher", "lower": "lower", "abs": "nearer 0",
               "show": "lower (no ratio)"}


def parse_line(line):
    """The key=value pairs of a RESULT line as a dict, or None."""
    words = line.split()
    if not words or words[0] != "RESULT":
        return None
    rec = {}
    for w in words[1:]:
        key, sep, value = w.partition("=")
        if sep:
            rec[key] = value
    if "bench" not in rec or "impl" not in rec:
        return None
    return rec


def read_records(paths):
    """Every RESULT record in the files (stdin for none or "-")."""
    recs = []
    for path in paths or ["-"]:
        f = sys.stdin if path == "-" else open(path, encoding="utf-8")
        with f:
            recs.extend(r for r in map(parse_line, f) if r)
    return recs


def number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def metrics_of(bench, recs):
    if bench in METRICS:
        return METRICS[bench]
    keys = sorted({k for r in recs for k in r if k.endswith("_per_sec")})
    return [(k, "higher") for k in keys]


def case_key(rec):
    """Group key of a record: bench, threads, case keys, size keys."""
    case = tuple((k, rec.get(k)) for k, _ in CASE_KEYS)
    size = tuple((k, rec.get(k)) for k, _ in SIZE_KEYS)
    return (rec["bench"], int(number(rec.get("threads")) or 0), case, size)


def case_label(key, show_size):
    _, threads, case, size = key
    parts = ["T=%d" % threads]
    names = dict(CASE_KEYS + SIZE_KEYS)
    parts += ["%s=%s" % (names[k], v) for k, v in case if v is not None]
    if show_size:
        parts += ["%s=%s" % (names[k], v) for k, v in size if v is not None]
    return " ".join(parts)


def is_valid(rec):
    return (number(rec.get("violations")) or 0) == 0


class Summary:
    """One impl's runs of one case: the median of each metric."""

    def __init__(self, runs):
        self.valid = [r for r in runs if is_valid(r)]
        self.invalid = len(runs) - len(self.valid)
        # Only invalid runs: show them, marked, rather than nothing.
        self.use = self.valid or runs

    def median(self, metric):
        vals = [v for v in (number(r.get(metric)) for r in self.use)
                if v is not None]
        return statistics.median(vals) if vals else None

    def runs(self):
        return len(self.use)


def better(direction, a, b):
    """True if value a beats value b for this direction."""
    if direction == "higher":
        return a > b
    if direction == "abs":
        return abs(a) < abs(b)
    return a < b


def best_peer(summaries, metric, direction, impl):
    """(impl, value) of the best valid peer median, or (None, None)."""
    best = (None, None)
    for name, s in sorted(summaries.items()):
        v = s.median(metric)
        if name == impl or v is None or not s.valid:
            continue
        if best[1] is None or better(direction, v, best[1]):
            best = (name, v)
    return best


def fmt(v, invalid=False):
    if v is None:
        return "-"
    mark = "!" if invalid else ""
    a = abs(v)
    if a >= 1e6:
        return "%.2fM%s" % (v / 1e6, mark)
    if a >= 1e4:
        return "%.1fk%s" % (v / 1e3, mark)
    if v == int(v):
        return "%d%s" % (v, mark)
    return "%.3g%s" % (v, mark)


def fmt_wide(v, invalid=False):
    """fmt, but 1052.1 rather than 1.05e+03 (fmt's rows stay as they are)."""
    if v is not None and 1e3 <= abs(v) < 1e4 and v != int(v):
        return "%.0f%s" % (v, "!" if invalid else "")
    return fmt(v, invalid)


def ratio(a, b, direction):
    """a / b; of magnitudes where nearer 0 is better (a drift of -50 us
    is as good as one of +50 us)."""
    if a is None or b is None or b == 0:
        return "-"
    if direction == "abs":
        a, b = abs(a), abs(b)
    return "%.2f" % (a / b)


def winner(direction, s, b, peer):
    if s is None or b is None or direction == "show":
        return "-"
    if s == b:
        return "tie"
    return "serex" if better(direction, s, b) else peer


def row(key, label, metric, direction, summaries, impl, target=None):
    """One table row (list of cells) for a case and metric: against the
    best peer, or against @target when given."""
    own = summaries.get(impl)
    s = own.median(metric) if own else None
    if target is None:
        peer, b = best_peer(summaries, metric, direction, impl)
    else:
        peer, b = target, summaries[target].median(metric)
    name = peer or "-"
    if peer in TARGETS.get(key[0], []):
        name += " (target)"
    peer_s = summaries[peer] if peer else None
    no_ratio = direction == "show"
    return [key[0], label, metric, BETTER_TEXT[direction],
            fmt(s, own is not None and not own.valid),
            fmt(b, peer_s is not None and not peer_s.valid), name,
            "-" if no_ratio else ratio(s, b, direction),
            "-" if no_ratio else ratio(b, s, direction),
            winner(direction, s, b, peer),
            "%s/%s" % (own.runs() if own else 0,
                       peer_s.runs() if peer_s else 0)]


def target_rows(key, label, metric, direction, summaries, impl):
    """Rows against the bench's TARGETS peers that ran this case and are
    not already the best peer."""
    best, _ = best_peer(summaries, metric, direction, impl)
    return [row(key, label, metric, direction, summaries, impl, t)
            for t in TARGETS.get(key[0], [])
            if t in summaries and t != best and t != impl]


def detail_rows(key, label, metric, summaries):
    """Every impl's median, for --detail."""
    return [[key[0], label, metric, name,
             fmt(s.median(metric), not s.valid), str(s.runs()),
             str(s.invalid)] for name, s in sorted(summaries.items())]


def group(recs):
    """{case key: {impl: [records]}}, in first-seen order."""
    groups = defaultdict(lambda: defaultdict(list))
    for r in recs:
        groups[case_key(r)][r["impl"]].append(r)
    return groups


def sizes_mixed(groups):
    """True if one (bench, threads, case) was run at several sizes."""
    seen = defaultdict(set)
    for key in groups:
        seen[key[:3]].add(key[3])
    return any(len(s) > 1 for s in seen.values())


def build(recs, impl, detail):
    groups = group(recs)
    show_size = sizes_mixed(groups)
    rows, extra = [], []
    for key, by_impl in groups.items():
        summaries = {name: Summary(runs) for name, runs in by_impl.items()}
        label = case_label(key, show_size)
        runs = [r for v in by_impl.values() for r in v]
        for metric, direction in metrics_of(key[0], runs):
            rows.append(row(key, label, metric, direction, summaries, impl))
            rows += target_rows(key, label, metric, direction, summaries,
                                impl)
            if detail:
                extra += detail_rows(key, label, metric, summaries)
    return rows, extra


def impl_order(impls, impl):
    """@impl first, then the others by name."""
    return sorted(set(impls), key=lambda name: (name != impl, name))


def bench_impls(groups, bench, impl):
    return impl_order([name for key, by_impl in groups.items()
                       if key[0] == bench for name in by_impl], impl)


def benches_of(groups):
    """The benches in first-seen order."""
    seen = []
    for key in groups:
        if key[0] not in seen:
            seen.append(key[0])
    return seen


def wide_tables(recs, impl, markdown):
    """{bench: (header, rows)}: every impl's median side by side."""
    groups = group(recs)
    show_size = sizes_mixed(groups)
    tables = {}
    for bench in benches_of(groups):
        impls = bench_impls(groups, bench, impl)
        rows = []
        for key, by_impl in groups.items():
            if key[0] != bench:
                continue
            summaries = {name: Summary(runs) for name, runs in by_impl.items()}
            runs = [r for v in by_impl.values() for r in v]
            for metric, direction in metrics_of(bench, runs):
                rows.append(wide_row(case_label(key, show_size), metric,
                                     direction, summaries, impls, markdown))
        tables[bench] = ([bench, "metric", "better"] + impls, rows)
    return tables


def wide_row(label, metric, direction, summaries, impls, markdown):
    vals = {name: s.median(metric) for name, s in summaries.items()}
    best = None
    valid = [n for n, s in summaries.items()
             if s.valid and vals[n] is not None]
    if direction != "show" and len(valid) > 1:
        for name, s in summaries.items():
            v = vals[name]
            if v is not None and s.valid and (
                    best is None or better(direction, v, vals[best])):
                best = name
    cells = []
    for name in impls:
        s = summaries.get(name)
        if s is None:
            cells.append("-")
            continue
        text = fmt_wide(vals[name], not s.valid)
        if markdown and best is not None and vals[name] == vals[best] \
                and s.valid:
            text = "**%s**" % text
        cells.append(text)
    return [label, metric, BETTER_TEXT[direction]] + cells


def data_label(key, uniform_threads):
    """A case's label in a data file: the case keys (the thread count too
    when results of several thread counts were mixed, or when it is all
    there is)."""
    _, threads, case, size = key
    names = dict(CASE_KEYS + SIZE_KEYS)
    parts = ["%s=%s" % (names[k], v) for k, v in case if v is not None]
    if not parts or not uniform_threads:
        parts.insert(0, "T=%d" % threads)
    return " ".join(parts)


def write_data(recs, impl, outdir):
    """gnuplot data files, one per (bench, metric); returns their paths."""
    import os
    groups = group(recs)
    uniform = len({key[1] for key in groups}) == 1
    os.makedirs(outdir, exist_ok=True)
    paths = []
    for bench in benches_of(groups):
        impls = bench_impls(groups, bench, impl)
        keys = [k for k in groups if k[0] == bench]
        runs = [r for k in keys for v in groups[k].values() for r in v]
        for metric, direction in metrics_of(bench, runs):
            lines, invalid = [], set()
            for key in keys:
                summaries = {n: Summary(r) for n, r in groups[key].items()}
                cells = []
                for name in impls:
                    s = summaries.get(name)
                    v = s.median(metric) if s else None
                    if s is not None and not s.valid and v is not None:
                        invalid.add(name)
                        v = None
                    cells.append("NaN" if v is None else "%.10g" % v)
                if any(c != "NaN" for c in cells):
                    lines.append('"%s" %s' % (data_label(key, uniform),
                                              " ".join(cells)))
            if not lines:
                continue
            path = os.path.join(outdir, "%s.%s.dat" % (bench, metric))
            with open(path, "w", encoding="utf-8") as f:
                f.write("# bench=%s metric=%s better=%s\n"
                        % (bench, metric, direction))
                f.write("# medians per (case, impl), by bench/table.py; "
                        "NaN: no valid run\n")
                if invalid:
                    f.write("# only invalid runs (NaN here): %s\n"
                            % " ".join(sorted(invalid)))
                f.write("# columns: case %s\n" % " ".join(impls))
                f.write("\n".join(lines) + "\n")
            paths.append(path)
    return paths


def sweep_metric(bench, recs):
    """The throughput metric a sweep shows for a bench: its first
    *_per_sec metric where higher is better, or None."""
    for metric, direction in metrics_of(bench, recs):
        if direction == "higher" and metric.endswith("_per_sec"):
            return metric
    return None


def sweep_cases(rec, show_size):
    """The sweep cases a record belongs to: its case keys with the thread
    count left out (the x axis). Producers equal to the thread count are
    "P=T", so P=T is one line across T; at T=1, P=1 is also P=T."""
    threads = int(number(rec.get("threads")) or 0)
    parts = []
    names = dict(CASE_KEYS + SIZE_KEYS)
    for k, _ in CASE_KEYS + (SIZE_KEYS if show_size else []):
        v = rec.get(k)
        if v is None:
            continue
        if k == "producers" and threads > 1 and number(v) == threads:
            v = "T"
        parts.append("%s=%s" % (names[k], v))
    label = " ".join(parts)
    if rec.get("producers") is not None and threads == 1 \
            and number(rec.get("producers")) == 1:
        return [label, label.replace("P=1", "P=T", 1)]
    return [label]


def sweep_groups(recs):
    """{bench: {case: {threads: {impl: [records]}}}}, benches and cases in
    first-seen order; only benches with a throughput metric."""
    sizes = defaultdict(set)
    for r in recs:
        sizes[r["bench"]].add(tuple(r.get(k) for k, _ in SIZE_KEYS))
    out = {}
    for r in recs:
        bench = r["bench"]
        if sweep_metric(bench, [r]) is None:
            continue
        threads = int(number(r.get("threads")) or 0)
        for case in sweep_cases(r, len(sizes[bench]) > 1):
            by_t = out.setdefault(bench, {}).setdefault(case, {})
            by_t.setdefault(threads, defaultdict(list))[r["impl"]].append(r)
    return out


def sweep_rows(recs, impl, cpus):
    """One row per (bench, case, T): the impl's median, the best other
    impl's, their ratio (higher is better for every metric shown)."""
    rows = []
    for bench, cases in sweep_groups(recs).items():
        runs = [r for r in recs if r["bench"] == bench]
        metric = sweep_metric(bench, runs)
        for case, by_t in cases.items():
            for threads in sorted(by_t):
                summaries = {n: Summary(rs)
                             for n, rs in by_t[threads].items()}
                own = summaries.get(impl)
                s = own.median(metric) if own else None
                peer, b = best_peer(summaries, metric, "higher", impl)
                peer_s = summaries[peer] if peer else None
                t = str(threads)
                if cpus and threads > cpus:
                    t += " (over)"
                rows.append([bench, case or "-", t, metric,
                             fmt(s, own is not None and not own.valid),
                             fmt(b, peer_s is not None and not peer_s.valid),
                             peer or "-", ratio(s, b, "higher"),
                             "%s/%s" % (own.runs() if own else 0,
                                        peer_s.runs() if peer_s else 0)])
    return rows


def write_sweep_data(recs, impl, outdir):
    """gnuplot data files for a sweep, one per bench: DIR/sweep-<bench>.dat,
    one block per case (gnuplot's index; a "# case" line before each), a
    row per thread count, a column per impl (NaN: no valid run). Returns
    their paths."""
    import os
    os.makedirs(outdir, exist_ok=True)
    paths = []
    for bench, cases in sweep_groups(recs).items():
        runs = [r for r in recs if r["bench"] == bench]
        metric = sweep_metric(bench, runs)
        impls = impl_order([r["impl"] for r in runs], impl)
        blocks = []
        for case, by_t in cases.items():
            lines = ["# case %s" % (case or "-")]
            for threads in sorted(by_t):
                cells = []
                for name in impls:
                    rs = by_t[threads].get(name)
                    s = Summary(rs) if rs else None
                    v = s.median(metric) if s and s.valid else None
                    cells.append("NaN" if v is None else "%.10g" % v)
                lines.append("%d %s" % (threads, " ".join(cells)))
            blocks.append("\n".join(lines) + "\n")
        path = os.path.join(outdir, "sweep-%s.dat" % bench)
        with open(path, "w", encoding="utf-8") as f:
            f.write("# bench=%s metric=%s better=higher\n" % (bench, metric))
            f.write("# medians per (case, threads, impl), by bench/table.py "
                    "--sweep; NaN: no valid run\n")
            f.write("# columns: threads %s\n" % " ".join(impls))
            f.write("\n\n".join(blocks))
        paths.append(path)
    return paths


def print_table(header, rows, markdown):
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join(" --- " for _ in header) + "|")
        for r in rows:
            print("| " + " | ".join(r) + " |")
        return
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    for r in [header] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def invalid_note(recs):
    bad = [r for r in recs if not is_valid(r)]
    if not bad:
        return None
    which = sorted({"%s/%s" % (r["bench"], r["impl"]) for r in bad})
    return ("%d run(s) with violations > 0 left out of the medians: %s"
            % (len(bad), ", ".join(which)))


def missing_targets_note(recs):
    """Target peers named in TARGETS that printed nothing for a bench that
    is in the input."""
    benches = {r["bench"] for r in recs}
    ran = {(r["bench"], r["impl"]) for r in recs}
    missing = ["%s (%s)" % (t, b) for b in sorted(benches)
               for t in TARGETS.get(b, []) if (b, t) not in ran]
    if not missing:
        return None
    return "target peers with no RESULT lines: " + ", ".join(missing)


def main():
    ap = argparse.ArgumentParser(
        description="Tabulate RESULT lines: serex beside the best peer.")
    ap.add_argument("files", nargs="*", help="files of RESULT lines "
                    "(default: stdin)")
    ap.add_argument("--impl", default="serex",
                    help="the impl compared with the others (default serex)")
    ap.add_argument("--markdown", action="store_true",
                    help="print Markdown tables")
    ap.add_argument("--detail", action="store_true",
                    help="also print every impl's median")
    ap.add_argument("--bench", action="append", metavar="NAME",
                    help="only this bench (repeatable)")
    ap.add_argument("--wide", action="store_true",
                    help="one table per bench, every impl side by side")
    ap.add_argument("--data", metavar="DIR",
                    help="write gnuplot data files into DIR instead of "
                    "printing a table")
    ap.add_argument("--sweep", action="store_true",
                    help="a thread-count sweep: one row per (bench, case, "
                    "T) of the throughput metric; with --data, one data "
                    "file per bench, T down, impls across")
    ap.add_argument("--cpus", type=int, default=0, metavar="N",
                    help="with --sweep: mark T > N as oversubscribed")
    args = ap.parse_args()

    recs = read_records(args.files)
    if args.bench:
        recs = [r for r in recs if r["bench"] in args.bench]
    if not recs:
        print("table.py: no RESULT lines", file=sys.stderr)
        return 1
    if args.sweep:
        return print_sweep(recs, args)
    if args.data:
        for path in write_data(recs, args.impl, args.data):
            print(path)
        return 0
    if args.wide:
        return print_wide(recs, args.impl, args.markdown)
    rows, extra = build(recs, args.impl, args.detail)
    print_table(["bench", "case", "metric", "better", args.impl, "best peer",
                 "peer", "%s/best" % args.impl, "best/%s" % args.impl,
                 "winner", "runs"], rows, args.markdown)
    if args.detail:
        print()
        print_table(["bench", "case", "metric", "impl", "median", "runs",
                     "invalid"], extra, args.markdown)
    print()
    print("Values are medians per (bench, impl, case); runs = %s/best-peer "
          "runs used." % args.impl)
    print("%s/best > 1 wins where higher is better; best/%s > 1 wins where "
          "lower is better. ! = only invalid runs." % (args.impl, args.impl))
    for note in (invalid_note(recs), missing_targets_note(recs)):
        if note:
            print(note)
    return 0


def print_sweep(recs, args):
    if args.data:
        for path in write_sweep_data(recs, args.impl, args.data):
            print(path)
        return 0
    impl = args.impl
    print_table(["bench", "case", "T", "metric", impl, "best other",
                 "which", "%s/best" % impl, "runs"],
                sweep_rows(recs, impl, args.cpus), args.markdown)
    print()
    print("Values are medians per (bench, case, T, impl); higher is better; "
          "%s/best > 1: %s ahead. ! = only invalid runs." % (impl, impl))
    if args.cpus:
        print("(over): T > %d, more pool workers than CPUs." % args.cpus)
    note = invalid_note(recs)
    if note:
        print(note)
    return 0


def print_wide(recs, impl, markdown):
    for i, (header, rows) in enumerate(
            wide_tables(recs, impl, markdown).values()):
        if i:
            print()
        print_table(header, rows, markdown)
    print()
    print("Values are medians per (bench, impl, case); - = no result. "
          "! = only invalid runs%s." % (", bold = best valid value"
                                         if markdown else ""))
    note = invalid_note(recs)
    if note:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
