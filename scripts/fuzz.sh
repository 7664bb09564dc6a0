#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# fuzz.sh - build the API fuzzer (tests/fuzz/fuzz_api.c) with libFuzzer and
# run it for a time budget (tests/fuzz/README.md says what it checks).
#
# Builds with clang -fsanitize=fuzzer,address,undefined: the library's
# sources (the SEREX_SOURCES list of CMakeLists.txt) and the harness in one
# binary, in its own tree (build-test/fuzz; rebuilt when a source changed).
# Runs it for SECONDS (default 30) on the checked-in corpus, read only:
# new inputs go to build-test/fuzz/corpus, which is kept between runs.
# A crash, a leak, a timeout (10 s an input) or an out-of-memory input
# stops the run; the input is saved under tests/fuzz/crashes/ and the exit
# status is non-zero. Replay one with: build-test/fuzz/fuzz_api FILE
# (or the plain build's fuzz_api_replay FILE, SEREX_FUZZ_TRACE=1 to see
# each operation).
#
# Usage: scripts/fuzz.sh [options] [SECONDS] [-- LIBFUZZER-ARGS...]
#   --merge      afterwards, add the inputs found that reach new coverage
#                to the checked-in corpus tests/fuzz/corpus (libFuzzer
#                -merge=1); without it the checked-in corpus never changes
#   --build-only build, then stop
#   --clean      remove the fuzz build tree first
# Environment: CC (default clang; it must ship libFuzzer), SEREX_FUZZ_DIR
#   (default <repo>/build-test/fuzz), SEREX_FUZZ_MAX_LEN (default 1024:
#   the longest input libFuzzer makes).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$src/scripts/lib.sh"
dir=${SEREX_FUZZ_DIR:-$src/build-test/fuzz}
cc=${CC:-clang}
max_len=${SEREX_FUZZ_MAX_LEN:-1024}
seconds=30 merge=0 build_only=0 clean=0
extra=()

while [ "$#" -gt 0 ]; do
    case $1 in
    --merge) merge=1 ;;
    --build-only) build_only=1 ;;
    --clean) clean=1 ;;
    --)
        shift
        extra=("$@")
        break
        ;;
    -h | --help)
        usage "${BASH_SOURCE[0]}"
        exit 0
        ;;
    '' | *[!0-9]*)
        echo "fuzz.sh: unknown argument '$1' (try --help)" >&2
        exit 2
        ;;
    *) seconds=$1 ;;
    esac
    shift
done

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz.sh: '$cc' not found: install clang (Debian: apt-get install" \
        "clang), or set CC to a clang that ships libFuzzer" >&2
    exit 2
fi
[ "$clean" = 1 ] && rm -rf "$dir"
mkdir -p "$dir/corpus" "$src/tests/fuzz/crashes"

# ---- build -----------------------------------------------------------------
# The library's sources, as CMakeLists.txt lists them.
mapfile -t sources < <(sed -n '/^set(SEREX_SOURCES/,/^)/p' \
    "$src/CMakeLists.txt" | grep -o 'src/[A-Za-z0-9_]*\.c')
if [ "${#sources[@]}" -eq 0 ]; then
    echo "fuzz.sh: found no SEREX_SOURCES in CMakeLists.txt" >&2
    exit 2
fi
bin=$dir/fuzz_api
inputs=("${sources[@]/#/$src/}" "$src/tests/fuzz/fuzz_api.c")
stale=0
if [ ! -x "$bin" ]; then
    stale=1
else
    for f in "${inputs[@]}" "$src"/src/*.h "$src"/include/serex/*.h \
        "${BASH_SOURCE[0]}"; do
        [ "$f" -nt "$bin" ] && stale=1 && break
    done
fi
if [ "$stale" = 1 ]; then
    echo "fuzz.sh: building $bin with $cc"
    # -O1 as the ASan stage of test.sh; -g for the stacks in crash reports
    "$cc" -std=c11 -g -O1 -fno-omit-frame-pointer \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
        -D_POSIX_C_SOURCE=200809L -DSEREX_STATIC -DSEREX_LIBFUZZER \
        -I"$src/include" -I"$src/src" "${inputs[@]}" -pthread \
        -o "$bin.tmp"
    mv "$bin.tmp" "$bin"
fi
[ "$build_only" = 1 ] && exit 0

# ---- run -------------------------------------------------------------------
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

# ASan of LLVM < 18 cannot start where the kernel randomises mmap with 32
# bits ("unexpected memory mapping"): run under setarch -R there, as
# test.sh does.
prefix=()
if ! "$bin" -runs=1 -timeout=10 >"$dir/probe.log" 2>&1; then
    if grep -q 'unexpected memory mapping' "$dir/probe.log" &&
        command -v setarch >/dev/null 2>&1; then
        prefix=(setarch "$(uname -m)" -R)
        echo "fuzz.sh: running under setarch -R (ASan and mmap randomisation)"
    else
        echo "fuzz.sh: the fuzzer does not start:" >&2
        tail -40 "$dir/probe.log" >&2
        exit 1
    fi
fi

echo "fuzz.sh: fuzzing for ${seconds}s; new inputs go to $dir/corpus," \
    "crashes to tests/fuzz/crashes/"
set +e
"${prefix[@]+"${prefix[@]}"}" "$bin" -max_total_time="$seconds" -timeout=10 \
    -max_len="$max_len" -print_final_stats=1 \
    -artifact_prefix="$src/tests/fuzz/crashes/" \
    "${extra[@]+"${extra[@]}"}" "$dir/corpus" "$src/tests/fuzz/corpus" \
    2>&1 | tee "$dir/fuzz.log"
rc=${PIPESTATUS[0]}
set -e

echo
echo "=================== fuzz summary ==================="
grep -E '^#[0-9]+' "$dir/fuzz.log" | tail -1 || true
grep -E '^stat::(number_of_executed_units|average_exec_per_sec)' \
    "$dir/fuzz.log" || true
grep -E '^stat::(new_units_added|peak_rss_mb)' "$dir/fuzz.log" || true
if [ "$rc" -ne 0 ]; then
    echo "fuzz.sh: the fuzzer stopped with status $rc; the input:" >&2
    grep -E "^(Test unit written to|artifact_prefix)" "$dir/fuzz.log" >&2 ||
        true
    echo "Replay: $bin FILE  (or fuzz_api_replay FILE with" \
        "SEREX_FUZZ_TRACE=1)" >&2
    exit "$rc"
fi
if [ "$merge" = 1 ]; then
    echo "fuzz.sh: merging new coverage into tests/fuzz/corpus"
    "${prefix[@]+"${prefix[@]}"}" "$bin" -merge=1 -max_len="$max_len" \
        "$src/tests/fuzz/corpus" "$dir/corpus" 2>&1 | tail -3
fi
echo "fuzz.sh: no crash in ${seconds}s. To fuzz longer: scripts/fuzz.sh 3600"
echo "  (or run $bin -max_total_time=3600 $dir/corpus $src/tests/fuzz/corpus"
echo "   directly; add -jobs=N -workers=N for N processes)"
