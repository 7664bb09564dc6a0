#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# check_probes.sh - check serex's static probes (USDT, docs/probes.md) in a
# build tree configured with -DSEREX_USDT=ON (and the tests: it needs
# tests/probe_target and tests/probe_target_so).
#
#   1. notes: readelf -n lists every probe of provider serex (the PROBES
#      list below) in .note.stapsdt: in the static library's objects, in
#      the shared library and in tests/probe_target, the last two with a
#      semaphore each; and no probe that PROBES lacks (a new probe must be
#      added here and to tests/probe_target.c). Fails naming what is
#      missing.
#   2. counts: where bpftrace can attach (root, a kernel with uprobes and
#      BPF), it attaches to every probe and runs tests/probe_target under
#      it (bpftrace -c; probes and semaphores in the program, from the
#      static library), then attaches to the shared library by its path
#      and runs tests/probe_target_so. Each program makes a known number of
#      every probe's events and prints what a tool must count
#      (tests/probe_target.c): the counts must match exactly (parks,
#      unparks and steals: at least one), the ids of a task's enqueued,
#      start and done events and of a timer's events must pair up, and no
#      event may carry an impossible argument (a wait, run or late time
#      below -1, the value for "not measured": a timer fired early; a
#      negative delay; a steal of nothing). Where bpftrace is missing or
#      cannot attach, it says why on a line of its own and skips this half.
#
# Usage: scripts/check_probes.sh [options] [BUILD_DIR]
#   BUILD_DIR     the build tree (default: build-test/probes)
#   --notes-only  check the notes only (no bpftrace)
#   -h, --help    this text
# Exit status: 0 if the notes are right and the counts are right or were
# skipped; 1 if a check failed; 2 for a usage error or a tree without the
# libraries or programs.
set -euo pipefail

PROBES='task__enqueued task__start task__done worker__park worker__unpark
steal timer__schedule timer__fire timer__cancel'

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$src/scripts/lib.sh"

dir=
notes_only=0
for arg in "$@"; do
    case $arg in
    --notes-only) notes_only=1 ;;
    -h | --help)
        usage "${BASH_SOURCE[0]}"
        exit 0
        ;;
    -*)
        echo "check_probes.sh: unknown option '$arg' (try --help)" >&2
        exit 2
        ;;
    *)
        if [ -n "$dir" ]; then
            echo "check_probes.sh: one BUILD_DIR only" >&2
            exit 2
        fi
        dir=$arg
        ;;
    esac
done
dir=${dir:-$src/build-test/probes}
dir=$(cd "$dir" 2>/dev/null && pwd) ||
    { echo "check_probes.sh: no build tree $dir" >&2; exit 2; }

say() { echo "check_probes.sh: $*"; }

# ---- 1. the notes -----------------------------------------------------------

# probes_in FILE: "provider name semaphore" for each probe note in FILE (an
# archive's members included).
probes_in() {
    LC_ALL=C readelf -n "$1" 2>/dev/null | awk '
        function field(label,   s) {
            s = $0; sub(".*" label ":[ \t]*", "", s); sub(/[ \t,].*/, "", s)
            return s
        }
        /Provider:/  { prov = field("Provider") }
        /Name:/      { name = field("Name") }
        /Semaphore:/ { print prov, name, field("Semaphore") }'
}

# check_notes FILE WHAT SEMAPHORES: every probe in FILE once at least, with a
# nonzero semaphore address when SEMAPHORES is 1 (in an object file the
# address is a relocation, 0 until linked).
check_notes() {
    local file=$1 what=$2 want_sem=$3 found missing=() nosem=() extra=() p
    found=$(probes_in "$file" | awk '$1 == "serex"')
    for p in $PROBES; do
        if ! grep -q "^serex $p " <<<"$found"; then
            missing+=("$p")
        elif [ "$want_sem" = 1 ] &&
            grep "^serex $p " <<<"$found" | grep -Eq ' 0x0+$'; then
            nosem+=("$p")
        fi
    done
    while read -r p; do
        [ -n "$p" ] || continue
        case " ${PROBES//$'\n'/ } " in
        *" $p "*) ;;
        *) extra+=("$p") ;;
        esac
    done < <(awk '{ print $2 }' <<<"$found" | sort -u)
    if [ ${#missing[@]} -gt 0 ] || [ ${#nosem[@]} -gt 0 ] ||
        [ ${#extra[@]} -gt 0 ]; then
        [ ${#missing[@]} -eq 0 ] ||
            say "FAIL: $what: no note for ${missing[*]}"
        [ ${#nosem[@]} -eq 0 ] ||
            say "FAIL: $what: no semaphore for ${nosem[*]}"
        [ ${#extra[@]} -eq 0 ] ||
            say "FAIL: $what: probes not in PROBES (add them to" \
                "scripts/check_probes.sh and tests/probe_target.c):" \
                "${extra[*]}"
        return 1
    fi
    say "ok: $what: the $(wc -w <<<"$PROBES") probes of provider serex" \
        "($(wc -l <<<"$found") notes)"
}

lib_a=$dir/libserex.a
lib_so=$(readlink -f "$dir/libserex.so" 2>/dev/null || true)
target=$dir/tests/probe_target
target_so=$dir/tests/probe_target_so
for f in "$lib_a" "$lib_so" "$target" "$target_so"; do
    if [ -z "$f" ] || [ ! -f "$f" ]; then
        say "${f:-$dir/libserex.so}: missing: build $dir with" \
            "-DSEREX_USDT=ON and the tests first"
        exit 2
    fi
done
command -v readelf >/dev/null 2>&1 ||
    { say "readelf is missing (binutils)" >&2; exit 2; }

rc=0
check_notes "$lib_a" "libserex.a" 0 || rc=1
check_notes "$lib_so" "${lib_so#"$dir"/}" 1 || rc=1
check_notes "$target" "tests/probe_target" 1 || rc=1
if [ "$notes_only" = 1 ]; then
    exit "$rc"
fi

# ---- 2. the counts ----------------------------------------------------------

work=$(mktemp -d)
# shellcheck disable=SC2064 # expand $work now
trap "rm -rf '$work'" EXIT

# bpftrace's noise on machines without tracefs or a locked-memory limit to
# raise: it attaches through perf events all the same.
noise='RLIMIT_MEMLOCK|uprobe_events|failed to detach probe'

# script BINARY: the bpftrace program: for each probe, its events counted
# by executor (and fn), the sums of their ids, and any impossible argument.
script() {
    local u="usdt:$1:serex"
    cat <<EOF
BEGIN { printf("serex-probes-ready\n"); }
$u:task__enqueued { @n_task__enqueued[arg0, arg1] = count();
    @id_task__enqueued[arg0, arg1] = sum(arg2); }
$u:task__start { @n_task__start[arg0, arg1] = count();
    @id_task__start[arg0, arg1] = sum(arg2);
    if ((int64)arg3 >= 0) { @timed_task__start[arg0, arg1] = count(); }
    if ((int64)arg3 < -1) { @bad["task__start: wait_ns below -1"] = count(); } }
$u:task__done { @n_task__done[arg0, arg1] = count();
    @id_task__done[arg0, arg1] = sum(arg2);
    if ((int64)arg3 >= 0) { @timed_task__done[arg0, arg1] = count(); }
    if ((int64)arg3 < -1) { @bad["task__done: run_ns below -1"] = count(); } }
$u:worker__park { @n_worker__park[arg0] = count(); }
$u:worker__unpark { @n_worker__unpark[arg0] = count(); }
$u:steal { @n_steal[arg0] = count();
    if (arg2 == 0) { @bad["steal: no task taken"] = count(); } }
$u:timer__schedule { @n_timer__schedule[arg0, arg1] = count();
    @id_timer__schedule[arg0] = sum(arg2);
    if ((int64)arg3 < 0) { @bad["timer__schedule: delay_ns negative"] = count(); } }
$u:timer__fire { @n_timer__fire[arg0, arg1] = count();
    @id_timer__fire[arg0] = sum(arg2);
    if ((int64)arg3 >= 0) { @timed_timer__fire[arg0, arg1] = count(); }
    if ((int64)arg3 < -1) { @bad["timer__fire: late_ns below -1 (early)"] = count(); } }
$u:timer__cancel { @n_timer__cancel[arg0] = count();
    @id_timer__cancel[arg0] = sum(arg1); }
EOF
}

# can_attach: bpftrace runs and attaches a probe to probe_target; else
# prints why.
can_attach() {
    local out
    if ! command -v bpftrace >/dev/null 2>&1; then
        echo "bpftrace is not installed (Debian: apt-get install bpftrace)"
        return 1
    fi
    if out=$(timeout 120 bpftrace -e "usdt:$target:serex:steal { }
        BEGIN { exit(); }" 2>&1) &&
        ! grep -Ev "$noise" <<<"$out" | grep -q '^ERROR'; then
        return 0
    fi
    echo "bpftrace cannot attach here ($(id -un 2>/dev/null || id -u)):" \
        "$(grep -Ev "$noise" <<<"$out" | grep -m1 . || echo 'no output')"
    return 1
}

# counts LOG: "key<TAB>value" for each map entry bpftrace printed, the key
# without spaces (n_task__start[1,2]), as probe_target writes it.
counts() {
    awk '/^@/ { k = $0; sub(/^@/, "", k); v = k
                sub(/: -?[0-9]+$/, "", k); sub(/.*: /, "", v)
                gsub(/ /, "", k); print k "\t" v }' "$1"
}

# pretty OUT: a filter that writes the names OUT gives ("name NUMBER
# LABEL") for the numbers in keys.
pretty() {
    local num label
    while read -r _ num label; do
        printf 's/\\b%s\\b/%s/g\n' "$num" "$label"
    done < <(grep '^name ' "$1") >"$work/names.sed"
    sed -f "$work/names.sed"
}

# verify NAME LOG OUT: the expectations probe_target printed in OUT against
# the counts in LOG; prints a line per expectation.
verify() {
    local name=$1 log=$2 out=$3 bad=0 kind key op want rest have sum k v p
    local -A val=()
    while IFS=$'\t' read -r k v; do
        val[$k]=$v
    done < <(counts "$log")
    for p in $PROBES; do
        grep -q "^expect n_$p\\[" "$out" || {
            echo "  FAIL  $name makes no $p event it checks"
            bad=1
        }
    done
    while read -r kind key op want rest; do
        case $kind in
        expect)
            have=${val[$key]:-0}
            if { [ "$op" = '==' ] && [ "$have" -eq "$want" ]; } ||
                { [ "$op" = '>=' ] && [ "$have" -ge "$want" ]; }; then
                echo "  ok    $key $op $want: counted $have"
            else
                echo "  FAIL  $key $op $want: counted $have"
                bad=1
            fi
            # with a tool attached from the start, every task is timed
            # (its wait and run) and every fire (its lateness): the
            # semaphores make the executors read the clock
            case $key in
            n_task__start\[* | n_task__done\[* | n_timer__fire\[*)
                timed=${val[timed_${key#n_}]:-0}
                if [ "$timed" -eq "$have" ]; then
                    echo "  ok    $timed of $have with a time"
                else
                    echo "  FAIL  $timed of $have with a time (the others" \
                        "-1: the semaphore did not make them timed)"
                    bad=1
                fi
                ;;
            esac
            ;;
        expect-sum)
            # key = want [+ k]...: ids summed modulo 2^64, as bpftrace does
            sum=$((${val[$want]:-0}))
            for k in $rest; do
                [ "$k" = + ] || sum=$((sum + ${val[$k]:-0}))
            done
            if [ -n "${val[$key]:-}" ] &&
                [ $((${val[$key]} - sum)) -eq 0 ]; then
                echo "  ok    ids: $key = $want${rest:+ $rest}"
            else
                echo "  FAIL  ids: $key (${val[$key]:-none}) !=" \
                    "$want${rest:+ $rest} ($sum)"
                bad=1
            fi
            ;;
        esac
    done < <(grep -E '^expect(-sum)? ' "$out") >"$work/$name.report"
    pretty "$out" <"$work/$name.report"
    if grep -q '^@bad\[' "$log"; then
        grep '^@bad\[' "$log" | sed 's/^/  FAIL  impossible argument: /'
        bad=1
    fi
    return "$bad"
}

# show_log LOG ERR OUT: what bpftrace said, for a failure (numbers named
# as OUT names them).
show_log() {
    echo "  bpftrace printed:"
    cat "$1" "$2" | grep -Ev "$noise|^(expect|expect-sum|name) |^$" |
        sed 's/^/    /' | tail -n 40 | pretty "$3"
}

# run_static: bpftrace starts probe_target itself (-c), so every probe is
# attached before main; the program still checks its semaphores.
run_static() {
    local log=$work/static.log err=$work/static.err
    script "$target" >"$work/static.bt"
    say "bpftrace -c 'tests/probe_target --wait-for-semaphore=60'"
    timeout 600 bpftrace -c "$target --wait-for-semaphore=60" \
        "$work/static.bt" >"$log" 2>"$err" || true
    grep -E '^(expect|expect-sum|name) ' "$log" >"$work/static.out" || true
    grep '^probe_target:' "$log" | sed 's/^/  /' || true
    if ! grep -q '^expect ' "$work/static.out"; then
        say "FAIL: probe_target printed no expectations"
        show_log "$log" "$err" "$work/static.out"
        return 1
    fi
    verify probe_target "$log" "$work/static.out" || {
        show_log "$log" "$err" "$work/static.out"
        return 1
    }
}

# run_shared: bpftrace attaches to the shared library by its path (every
# process that maps it), then probe_target_so runs; an interrupt ends
# bpftrace, which prints its maps.
run_shared() {
    local log=$work/shared.log err=$work/shared.err bp i rc=0
    script "$lib_so" >"$work/shared.bt"
    say "bpftrace on ${lib_so#"$dir"/}, then tests/probe_target_so"
    timeout 600 bpftrace "$work/shared.bt" >"$log" 2>"$err" &
    bp=$!
    for ((i = 0; i < 1200; i++)); do
        grep -q '^serex-probes-ready' "$log" && break
        kill -0 "$bp" 2>/dev/null || break
        sleep 0.1
    done
    if ! grep -q '^serex-probes-ready' "$log"; then
        kill -INT "$bp" 2>/dev/null || true
        wait "$bp" || true
        say "FAIL: bpftrace did not attach to ${lib_so#"$dir"/}"
        show_log "$log" "$err" /dev/null
        return 1
    fi
    "$target_so" >"$work/shared.out" 2>&1 || rc=$?
    kill -INT "$bp"
    wait "$bp" || true
    sed -n 's/^probe_target:/  probe_target:/p' "$work/shared.out"
    if [ "$rc" -ne 0 ]; then
        say "FAIL: probe_target_so exited with status $rc"
        sed 's/^/    /' "$work/shared.out"
        return 1
    fi
    verify probe_target_so "$log" "$work/shared.out" || {
        show_log "$log" "$err" "$work/shared.out"
        return 1
    }
}

if ! why=$(can_attach); then
    say "SKIPPED the counts: $why"
    exit "$rc"
fi
run_static || rc=1
run_shared || rc=1
if [ "$rc" = 0 ]; then
    say "ok: every probe's notes, and bpftrace counted exactly the events" \
        "probe_target and probe_target_so made"
else
    say "FAILED"
fi
exit "$rc"
