#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# check_layers.sh - check that src/ keeps its layers (no build needed).
#
# Every file of src/ is in one layer of the table LAYERS below, lowest
# first. The script reads each file's #include lines and fails if:
#   1. a file includes a file of a higher layer (upward);
#   2. a file includes a file of another component: a component's files
#      (its .c and *_internal.h) are private to it; the layers under the
#      components are open to everything above them, and a component may
#      use another through the public headers ("serex/...", serex/serex.h);
#   3. a file is in no layer (a new file must be placed in the table), or
#      includes a quoted file that is neither in src/ nor a public header;
#   4. a file outside the platform layer includes an OS header (OS_HEADERS)
#      or tests an OS macro (OS_MACROS) in #if, #ifdef, #ifndef or #elif:
#      only the platform layer may know which OS it runs on.
# Tests are not checked: they may include any internal header.
#
# Usage: scripts/check_layers.sh [SRCDIR]   check SRCDIR (default: src/)
#        scripts/check_layers.sh --self-test
#   --self-test  checks this script: a clean tree passes, and trees with
#                each kind of violation (among them a copy of src/ whose
#                thread_unix.c includes pool_internal.h) fail, naming it
# Prints one line per violation; exit status 0 if none, 1 if any, 2 for a
# usage error or a broken LAYERS table.
set -euo pipefail

# ---- the layers, lowest first -----------------------------------------------
# layer       unit        files (a unit is one component, or a whole open
#                         layer); listed files that do not exist are ignored
LAYERS='
base        base        common_internal.h fatal.c version.c
platform    platform    thread_unix.c thread_win.c thread_internal.h cpus.c spinlock_internal.h alloc.c alloc_internal.h probe_internal.h probe.c
core        core        executor.c executor_internal.h exec_class_internal.h
core        core        op_internal.h future.c future_internal.h
core        core        task_internal.h mpsc_internal.h await_internal.h life_internal.h
core        core        stats_internal.h nodecache.c nodecache_internal.h
core        core        park.c park_internal.h fork.c fork_internal.h cancel.c cancel_internal.h
core        core        observe.c observe_internal.h ticks_internal.h trace.c trace_internal.h registry.c registry_internal.h histogram.c histogram_internal.h task_watch.c task_watch_internal.h
components  pool        pool.c pool_internal.h pool_thread.c pool_types_internal.h pool_runq_internal.h pool_inject.c pool_local.c pool_idle.c pool_level.c pool_watch.c pool_block.c pool_watchdog.c
components  serial      serial.c serial_internal.h
components  striped     striped.c striped_internal.h
components  scheduler   scheduler.c scheduler_internal.h wheel.c wheel_internal.h
components  scheduler   autoclock.c
components  gate        gate.c gate_internal.h
components  channel     channel.c channel_internal.h
components  event       event.c event_internal.h latch.c
components  manual      manual.c manual_internal.h
components  group       group.c group_internal.h
components  limiter     limiter.c limiter_internal.h
components  semaphore   semaphore.c semaphore_internal.h
components  deadline    deadline.c
'
# The one layer that may use the OS, and the layer whose units are private.
OS_LAYER=platform
PRIVATE_LAYER=components
# Extended regular expressions: an <...> include, and an OS macro.
OS_HEADERS='^(pthread|threads|unistd|windows|time|sched|signal|fcntl|semaphore)\.h$|^sys/'
OS_MACROS='__linux__|__linux|_WIN32|_WIN64|__APPLE__|__MACH__|__FreeBSD__|__NetBSD__|__OpenBSD__|__unix__|__CYGWIN__'

self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
repo=$(cd "$(dirname "$self")/.." && pwd)

# ---- the check ------------------------------------------------------------------
declare -A layer_of unit_of rank_of_layer

read_layers() {
    local layer unit files f rank=0
    while read -r layer unit files; do
        [ -n "$layer" ] || continue
        if [ -z "${rank_of_layer[$layer]+x}" ]; then
            rank_of_layer[$layer]=$rank
            rank=$((rank + 1))
        fi
        for f in $files; do
            if [ -n "${layer_of[$f]+x}" ]; then
                echo "check_layers.sh: $f is in LAYERS twice" >&2
                exit 2
            fi
            layer_of[$f]=$layer
            unit_of[$f]=$unit
        done
    done <<<"$LAYERS"
}

# scan FILE...: one line per finding, "file<TAB>line<TAB>kind<TAB>name",
# kind q (#include "name"), a (#include <name>) or m (OS macro tested).
scan() {
    awk -v macros="$OS_MACROS" '
    FNR == 1 { cond = 0; file = FILENAME }
    /^[ \t]*#[ \t]*include[ \t]*"/ {
        s = $0; sub(/^[^"]*"/, "", s); sub(/".*/, "", s)
        printf "%s\t%d\tq\t%s\n", file, FNR, s
    }
    /^[ \t]*#[ \t]*include[ \t]*</ {
        s = $0; sub(/^[^<]*</, "", s); sub(/>.*/, "", s)
        printf "%s\t%d\ta\t%s\n", file, FNR, s
    }
    /^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef)([ \t(!]|$)/ { cond = 1 }
    cond {
        s = $0
        while (match(s, "(^|[^A-Za-z0-9_])(" macros ")([^A-Za-z0-9_]|$)")) {
            m = substr(s, RSTART, RLENGTH)
            gsub(/[^A-Za-z0-9_]/, "", m)
            printf "%s\t%d\tm\t%s\n", file, FNR, m
            s = substr(s, RSTART + RLENGTH)
        }
        cond = /\\$/ # a directive continued on the next line
    }
    ' "$@"
}

# check SRCDIR: prints the violations; returns 1 if there are any.
check() {
    local dir=$1 label=$1 bad=0 nfiles=0 f file line kind name
    local fl il fr ir
    local -a files=()

    [ -d "$dir" ] || { echo "check_layers.sh: no directory $dir" >&2; return 2; }
    [ "$dir" = "$repo/src" ] && label=src
    while IFS= read -r f; do
        files+=("$f")
    done < <(cd "$dir" && find . -type f \( -name '*.c' -o -name '*.h' \) |
        sed 's|^\./||' | LC_ALL=C sort)
    for f in "${files[@]}"; do
        nfiles=$((nfiles + 1))
        if [ -z "${layer_of[$f]+x}" ]; then
            echo "$label/$f: in no layer: add it to LAYERS at the top of" \
                "scripts/check_layers.sh"
            bad=$((bad + 1))
        fi
    done
    [ "${#files[@]}" -gt 0 ] || { echo "check_layers.sh: no sources in $dir" >&2; return 2; }

    while IFS=$'\t' read -r file line kind name; do
        fl=${layer_of[$file]-}
        [ -n "$fl" ] || continue # reported above
        fr=${rank_of_layer[$fl]}
        case $kind in
        q)
            il=${layer_of[$name]-}
            if [ -z "$il" ] || [ ! -f "$dir/$name" ]; then
                case $name in
                serex/*) ;; # the public API: open to every layer
                *)
                    echo "$label/$file:$line: #include \"$name\": not a file" \
                        "of $label in LAYERS, nor a public serex/ header"
                    bad=$((bad + 1))
                    ;;
                esac
                continue
            fi
            ir=${rank_of_layer[$il]}
            if [ "$ir" -gt "$fr" ]; then
                echo "$label/$file:$line: #include \"$name\": upward:" \
                    "$file is in layer $fl, $name in the higher layer $il"
                bad=$((bad + 1))
            elif [ "$il" = "$PRIVATE_LAYER" ] &&
                [ "${unit_of[$name]}" != "${unit_of[$file]}" ]; then
                echo "$label/$file:$line: #include \"$name\": across" \
                    "components: $name is private to component" \
                    "${unit_of[$name]} ($il), $file is in" \
                    "${unit_of[$file]} ($fl); use the public header, or" \
                    "move what both need to core"
                bad=$((bad + 1))
            fi
            ;;
        a)
            if [ "$fl" != "$OS_LAYER" ] && [[ $name =~ $OS_HEADERS ]]; then
                echo "$label/$file:$line: #include <$name>: an OS header" \
                    "outside layer $OS_LAYER ($file is in layer $fl)"
                bad=$((bad + 1))
            fi
            ;;
        m)
            if [ "$fl" != "$OS_LAYER" ]; then
                echo "$label/$file:$line: tests $name: an OS macro outside" \
                    "layer $OS_LAYER ($file is in layer $fl)"
                bad=$((bad + 1))
            fi
            ;;
        esac
    done < <(cd "$dir" && scan "${files[@]}")

    if [ "$bad" -gt 0 ]; then
        echo "check_layers.sh: $label: $bad violation(s) in $nfiles files"
        return 1
    fi
    echo "check_layers.sh: $label: $nfiles files, layers" \
        "$(layer_names) respected"
}

layer_names() {
    local l out=''
    for l in $(for k in "${!rank_of_layer[@]}"; do
        echo "${rank_of_layer[$k]} $k"
    done | sort -n | cut -d' ' -f2); do
        out=${out:+$out < }$l
    done
    echo "$out"
}

# ---- the self-test ------------------------------------------------------------
indent() {
    local l
    while IFS= read -r l; do
        printf '    %s\n' "$l"
    done <<<"$1"
}

# expect NAME WANT_STATUS DIR [PATTERN...]: run the check on DIR; it must exit
# WANT_STATUS and print one line matching every PATTERN (grep -E).
expect() {
    local name=$1 want=$2 dir=$3 out rc=0 line_ok
    shift 3
    out=$("$self" "$dir" 2>&1) || rc=$?
    if [ "$rc" != "$want" ]; then
        echo "self-test $name: FAILED: exit $rc, wanted $want; output:"
        indent "$out"
        return 1
    fi
    if [ "$#" -gt 0 ]; then
        # ENVIRON, not -v: -v would eat the patterns' backslashes
        line_ok=$(echo "$out" | PATS=$(printf '%s\n' "$@") awk '
            BEGIN { n = split(ENVIRON["PATS"], p, "\n") }
            { ok = 1; for (i = 1; i <= n; i++) if ($0 !~ p[i]) ok = 0
              if (ok) { print; exit } }')
        if [ -z "$line_ok" ]; then
            echo "self-test $name: FAILED: no line matches all of: $*; output:"
            indent "$out"
            return 1
        fi
    fi
    echo "self-test $name: ok"
}

# clean_tree DIR: a small tree that keeps every rule, one file per kind of
# allowed include.
clean_tree() {
    local d=$1
    mkdir -p "$d"
    printf '#include "serex/serex.h"\n' >"$d/common_internal.h"
    printf '#include <stdlib.h>\n#include "common_internal.h"\n' >"$d/alloc.c"
    printf '#include <pthread.h>\n#if defined(__linux__)\n#endif\n' \
        >"$d/thread_internal.h"
    printf '#include "thread_internal.h"\n#include "common_internal.h"\n#include <unistd.h>\n' \
        >"$d/thread_unix.c"
    printf '#include "thread_internal.h"\n' >"$d/park_internal.h"
    printf '#include "park_internal.h"\n#include "common_internal.h"\n' \
        >"$d/park.c"
    printf '#include "park_internal.h"\n' >"$d/fork.c"
    printf '#include "serex/serex.h"\n' >"$d/pool_internal.h"
    printf '#include "pool_internal.h"\n#include "park_internal.h"\n#include "thread_internal.h"\n#include <stdio.h>\n' \
        >"$d/pool.c"
    printf '#include "common_internal.h"\n' >"$d/wheel_internal.h"
    printf '#include "wheel_internal.h"\n#include <string.h>\n#ifdef NDEBUG\n#endif\n' \
        >"$d/scheduler.c"
}

self_test() {
    local tmp failed=0
    tmp=$(mktemp -d)
    # shellcheck disable=SC2064 # expand $tmp now: it is local
    trap "rm -rf '$tmp'" EXIT

    clean_tree "$tmp/clean"
    expect clean-tree-passes 0 "$tmp/clean" || failed=1

    # The real src/ with an upward include injected into the platform layer.
    cp -R "$repo/src" "$tmp/upward"
    awk '{ print } /^#include "/ && !done { print "#include \"pool_internal.h\""; done = 1 }' \
        "$repo/src/thread_unix.c" >"$tmp/upward/thread_unix.c"
    grep -q '^#include "pool_internal.h"' "$tmp/upward/thread_unix.c" || {
        echo "self-test: could not inject the include into thread_unix.c"
        return 1
    }
    expect src-thread-includes-pool 1 "$tmp/upward" 'thread_unix\.c:[0-9]+:' \
        'pool_internal\.h' 'upward' 'layer platform' 'layer components' ||
        failed=1

    clean_tree "$tmp/core-up"
    printf '#include "pool_internal.h"\n' >>"$tmp/core-up/fork.c"
    expect core-includes-component 1 "$tmp/core-up" 'fork\.c:2:' \
        'upward' 'layer core' 'components' || failed=1

    clean_tree "$tmp/across"
    printf '#include "wheel_internal.h"\n' >>"$tmp/across/pool.c"
    expect component-includes-other-component 1 "$tmp/across" 'pool\.c:5:' \
        'wheel_internal\.h' 'across components' 'scheduler' || failed=1

    clean_tree "$tmp/unplaced"
    printf '#include "common_internal.h"\n' >"$tmp/unplaced/stray.c"
    expect unplaced-file 1 "$tmp/unplaced" 'stray\.c' 'in no layer' ||
        failed=1

    clean_tree "$tmp/unknown"
    printf '#include "nowhere_internal.h"\n' >>"$tmp/unknown/park.c"
    expect unknown-include 1 "$tmp/unknown" 'park\.c:3:' 'nowhere_internal' ||
        failed=1

    clean_tree "$tmp/os-header"
    printf '#include <sys/mman.h>\n' >>"$tmp/os-header/park.c"
    expect os-header-outside-platform 1 "$tmp/os-header" 'park\.c:3:' \
        'sys/mman\.h' 'OS header' 'layer core' || failed=1

    clean_tree "$tmp/os-macro"
    printf '#if defined(NDEBUG) && \\\n    defined(_WIN32)\n#endif\n' \
        >>"$tmp/os-macro/pool.c"
    expect os-macro-outside-platform 1 "$tmp/os-macro" 'pool\.c:6:' \
        '_WIN32' 'OS macro' 'components' || failed=1

    [ "$failed" = 0 ] || { echo "check_layers.sh: self-test FAILED"; return 1; }
    echo "check_layers.sh: self-test passed"
}

# ---- main -----------------------------------------------------------------------
read_layers
case ${1-} in
--self-test) self_test ;;
-h | --help)
    # shellcheck source=scripts/lib.sh
    . "$repo/scripts/lib.sh"
    usage "$self"
    ;;
-*)
    echo "check_layers.sh: unknown option '$1' (try --help)" >&2
    exit 2
    ;;
*) check "${1:-$repo/src}" ;;
esac
