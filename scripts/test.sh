#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# test.sh - build serex and run every test (the README's second command).
#
# Needs a C compiler and CMake. Installs what the tests need when missing:
# cmocka and pkg-config from Debian's packages with apt-get when run as root;
# otherwise it prints the apt-get command and stops. Then, one after another:
#   a. plain      Debug, -Werror: every CTest test (unit, stress, example)
#   b. asan       -fsanitize=address,undefined: labels unit, stress, example
#   c. tsan       -fsanitize=thread, clang if present, else gcc: same labels
#   d. consumers  scripts/check_consumers.sh: find_package, add_subdirectory,
#                 pkg-config, and the shared library's exported symbols
#   e. clang      the plain build and tests again with clang, -Werror (clang
#                 is installed with apt-get when missing and run as root)
#   f. fuzz       scripts/fuzz.sh: the API fuzzer (libFuzzer, clang) for
#                 SEREX_FUZZ_SECONDS (default 30) on the checked-in corpus
#   g. model      scripts/check_model.sh: the serial drain protocol checked
#                 exhaustively by spin (installed with apt-get when missing
#                 and run as root)
#   h. static     scripts/check_layers.sh and its --self-test (the include
#                 graph of src/ keeps its layers), and scripts/check_format.sh
#                 when there is one: no build, a few seconds
# Each stage that builds has its own tree under build-test/. A failing stage is
# reported and the next one still runs; the exit status is non-zero if any
# stage failed.
#
# Usage: scripts/test.sh [options]
#   --quick         run only stage a
#   --no-asan       skip stage b
#   --no-tsan       skip stage c
#   --no-consumers  skip stage d
#   --no-clang      skip stage e
#   --no-fuzz       skip stage f
#   --no-model      skip stage g
#   --no-static     skip stage h
#   --clean         remove the build trees first (default: reuse them)
#   --fail-fast     skip the remaining stages after a failure
# Environment: SEREX_TEST_BUILD_ROOT (default <repo>/build-test), SEREX_JOBS
#   (default 2), SEREX_TEST_TIMEOUT (seconds per test, default 300), CC for
#   stages a, b and d (default cc).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$src/scripts/lib.sh"
root=${SEREX_TEST_BUILD_ROOT:-$src/build-test}
jobs=${SEREX_JOBS:-2}
test_timeout=${SEREX_TEST_TIMEOUT:-300}
labels='^(unit|stress|example)$'

run_plain=1 run_asan=1 run_tsan=1 run_consumers=1 run_clang=1 run_fuzz=1
run_model=1 run_static=1
clean=0 fail_fast=0
for arg in "$@"; do
    case $arg in
    --quick) run_asan=0 run_tsan=0 run_consumers=0 run_clang=0 run_fuzz=0 run_model=0 run_static=0 ;;
    --no-asan) run_asan=0 ;;
    --no-tsan) run_tsan=0 ;;
    --no-consumers) run_consumers=0 ;;
    --no-clang) run_clang=0 ;;
    --no-fuzz) run_fuzz=0 ;;
    --no-model) run_model=0 ;;
    --no-static) run_static=0 ;;
    --clean) clean=1 ;;
    --fail-fast) fail_fast=1 ;;
    -h | --help)
        usage "${BASH_SOURCE[0]}"
        exit 0
        ;;
    *)
        echo "test.sh: unknown option '$arg' (try --help)" >&2
        exit 2
        ;;
    esac
done

# ---- 0. what the tests need: cmocka and pkg-config ---------------------------
have_cmocka() {
    # shellcheck disable=SC2016 # ${Status} is dpkg-query's, not ours
    if command -v dpkg-query >/dev/null 2>&1 &&
        dpkg-query -W -f='${Status}' libcmocka-dev 2>/dev/null |
        grep -q 'install ok installed'; then
        return 0
    fi
    command -v pkg-config >/dev/null 2>&1 && pkg-config --exists cmocka
}

ensure_test_deps() {
    if have_cmocka && command -v pkg-config >/dev/null 2>&1; then
        return 0
    fi
    local pkgs='libcmocka-dev pkg-config'
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: cmocka or pkg-config is missing and this is not a" \
            "Debian-like system: install cmocka (>= 1.1, with its pkg-config" \
            "file) and pkg-config, then run scripts/test.sh again." >&2
        exit 2
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "test.sh: cmocka or pkg-config is missing. Install them with:" >&2
        echo "  sudo sh -c 'apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $pkgs'" >&2
        echo "then run scripts/test.sh again." >&2
        exit 2
    fi
    echo "test.sh: installing $pkgs with apt-get"
    # shellcheck disable=SC2086 # $pkgs is a list of package names
    if ! { apt-get update &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y $pkgs; }; then
        echo "test.sh: apt-get could not install $pkgs" >&2
        exit 2
    fi
    if ! have_cmocka; then
        echo "test.sh: cmocka is still not found after apt-get install" >&2
        exit 2
    fi
}

ensure_test_deps

# Stage e needs clang: installed like cmocka when we can; otherwise stage e
# says how (it fails rather than pass without having built anything).
ensure_clang() {
    command -v clang >/dev/null 2>&1 && return 0
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        echo "test.sh: installing clang with apt-get"
        apt-get update >/dev/null &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y clang >/dev/null
    fi
}
if [ "$run_clang" = 1 ] || [ "$run_fuzz" = 1 ]; then
    ensure_clang || echo "test.sh: apt-get could not install clang" >&2
fi
for tool in cmake ctest; do
    command -v "$tool" >/dev/null 2>&1 ||
        { echo "test.sh: '$tool' is missing" >&2; exit 2; }
done
if [ "$clean" = 1 ]; then
    rm -rf "$root"
fi
mkdir -p "$root"

# ---- helpers -------------------------------------------------------------------
configure() {
    local dir=$1
    shift
    cmake -S "$src" -B "$dir" -DSEREX_BUILD_TESTS=ON \
        -DSEREX_BUILD_EXAMPLES=ON "$@"
}

build() {
    cmake --build "$1" -j "$jobs"
}

# run_ctest DIR [PREFIX...] -- [CTEST ARGS...]: ctest in DIR, under PREFIX.
run_ctest() {
    local dir=$1 prefix=()
    shift
    while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
        prefix+=("$1")
        shift
    done
    [ "$#" -gt 0 ] && shift
    (cd "$dir" && "${prefix[@]+"${prefix[@]}"}" ctest --output-on-failure \
        -j "$jobs" --timeout "$test_timeout" --no-tests=error "$@")
}

# count_tests DIR LABEL: how many tests carry LABEL.
count_tests() {
    (cd "$1" && ctest -N -L "^$2\$" | sed -n 's/^Total Tests: //p')
}

# sanitizer_prefix COMPILER FLAGS: compile and run a threaded probe with the
# sanitizer. Prints the command prefix the tests need: nothing, or setarch -R
# where this toolchain's sanitizer cannot live with the kernel's address
# randomisation (TSan and ASan of LLVM < 18 and gcc 12 fail with "unexpected
# memory mapping" where vm.mmap_rnd_bits is 32). Fails if neither works.
sanitizer_prefix() {
    local compiler=$1 flags=$2 dir=$root/probe
    mkdir -p "$dir"
    cat >"$dir/probe.c" <<'EOF'
#include <pthread.h>
#include <stdlib.h>
static void *work(void *arg) { return arg; }
int main(void)
{
    pthread_t t;
    void *p = malloc(16), *r = NULL;
    if (pthread_create(&t, NULL, work, p) != 0 || pthread_join(t, &r) != 0)
        return 1;
    free(r);
    return 0;
}
EOF
    # shellcheck disable=SC2086 # $flags is a list of compiler flags
    if ! "$compiler" $flags -g -pthread "$dir/probe.c" -o "$dir/probe" \
        >"$dir/probe.log" 2>&1; then
        echo "test.sh: $compiler cannot build with $flags:" >&2
        cat "$dir/probe.log" >&2
        return 1
    fi
    if timeout 30 "$dir/probe" >"$dir/probe.log" 2>&1; then
        return 0
    fi
    if command -v setarch >/dev/null 2>&1 &&
        timeout 30 setarch "$(uname -m)" -R "$dir/probe" >/dev/null 2>&1; then
        echo "test.sh: $flags needs address randomisation off here;" \
            "running the tests under setarch -R" >&2
        echo "setarch $(uname -m) -R"
        return 0
    fi
    echo "test.sh: a program built by $compiler with $flags does not run:" >&2
    cat "$dir/probe.log" >&2
    return 1
}

# ---- the stages (each runs in a subshell: its environment stays its own) ------
stage_plain() {
    local dir=$root/plain n
    configure "$dir" -DCMAKE_BUILD_TYPE=Debug -DSEREX_WERROR=ON &&
        build "$dir" || return 1
    for l in unit stress example; do
        n=$(count_tests "$dir" "$l")
        echo "test.sh: ${n:-0} tests labelled $l"
        if [ "$l" = unit ] && [ "${n:-0}" -eq 0 ]; then
            echo "test.sh: no unit tests were configured" >&2
            return 1
        fi
    done
    run_ctest "$dir" --
}

stage_asan() {
    local dir=$root/asan prefix
    export CC=${CC:-cc}
    export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    prefix=$(sanitizer_prefix "$CC" -fsanitize=address,undefined) || return 1
    # -O1 keeps the stress tests quick; Debug keeps the assertions.
    configure "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG='-g -O1' \
        -DSEREX_SANITIZE=address,undefined -DSEREX_BUILD_BENCH=OFF &&
        build "$dir" || return 1
    # shellcheck disable=SC2086 # $prefix is empty or a command line
    run_ctest "$dir" $prefix -- -L "$labels"
}

stage_tsan() {
    local dir=$root/tsan prefix cc
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    if command -v clang >/dev/null 2>&1 &&
        prefix=$(sanitizer_prefix clang -fsanitize=thread); then
        export CC=clang CXX=clang++
    else
        cc=gcc
        command -v gcc >/dev/null 2>&1 || cc=cc
        prefix=$(sanitizer_prefix "$cc" -fsanitize=thread) || return 1
        export CC=$cc
    fi
    echo "test.sh: ThreadSanitizer build with $CC"
    if [ -f "$dir/CMakeCache.txt" ] &&
        ! grep -q "^CMAKE_C_COMPILER:[A-Z]*=.*$CC\$" "$dir/CMakeCache.txt"; then
        rm -rf "$dir" # configured with another compiler before
    fi
    configure "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG='-g -O1' \
        -DSEREX_SANITIZE=thread -DSEREX_BUILD_BENCH=OFF &&
        build "$dir" || return 1
    # shellcheck disable=SC2086 # $prefix is empty or a command line
    run_ctest "$dir" $prefix -- -L "$labels"
}

stage_clang() {
    local dir=$root/clang
    if ! command -v clang >/dev/null 2>&1; then
        echo "test.sh: clang is missing: apt-get install clang, or pass" \
            "--no-clang" >&2
        return 1
    fi
    export CC=clang CXX=clang++
    configure "$dir" -DCMAKE_BUILD_TYPE=Debug -DSEREX_WERROR=ON &&
        build "$dir" || return 1
    run_ctest "$dir" -- -L "$labels"
}

stage_fuzz() {
    SEREX_JOBS=$jobs "$src/scripts/fuzz.sh" "${SEREX_FUZZ_SECONDS:-30}"
}

stage_model() {
    "$src/scripts/check_model.sh"
}

# Every check runs even after one fails, so one run lists all the findings.
stage_static() {
    local rc=0
    "$src/scripts/check_layers.sh" || rc=1
    "$src/scripts/check_layers.sh" --self-test || rc=1
    if [ -f "$src/scripts/check_format.sh" ]; then
        bash "$src/scripts/check_format.sh" || rc=1
    else
        echo "test.sh: no scripts/check_format.sh yet: format not checked"
    fi
    return "$rc"
}

stage_consumers() {
    SEREX_CONSUMER_WORK_DIR=$root/consumers SEREX_JOBS=$jobs \
        "$src/scripts/check_consumers.sh"
}

names=() results=() times=()
failed_any=0

# stage NAME ENABLED FUNCTION: run one stage and record how it went.
stage() {
    local name=$1 enabled=$2 fn=$3 start rc
    if [ "$enabled" = 0 ] || { [ "$fail_fast" = 1 ] && [ "$failed_any" = 1 ]; }; then
        names+=("$name") results+=(skipped) times+=(-)
        return 0
    fi
    echo
    echo "=================== stage $name ==================="
    start=$SECONDS
    set +e
    ("$fn")
    rc=$?
    set -e
    names+=("$name") times+=("$((SECONDS - start))s")
    if [ "$rc" -eq 0 ]; then
        results+=(passed)
    else
        results+=(FAILED)
        failed_any=1
    fi
    echo "=================== stage $name: ${results[-1]} (${times[-1]}) ==="
}

echo "test.sh: source $src, build trees under $root, -j$jobs," \
    "${test_timeout}s per test"
# For the log only: which tools this run used.
cmake --version | sed -n 1p || true
"${CC:-cc}" --version 2>&1 | sed -n 1p || true

stage "a plain (Debug, -Werror)" "$run_plain" stage_plain
stage "b asan (address,undefined)" "$run_asan" stage_asan
stage "c tsan (thread)" "$run_tsan" stage_tsan
stage "d consumers" "$run_consumers" stage_consumers
stage "e clang (Debug, -Werror)" "$run_clang" stage_clang
stage "f fuzz (libFuzzer)" "$run_fuzz" stage_fuzz
stage "g model (spin)" "$run_model" stage_model
stage "h static checks" "$run_static" stage_static

# ---- summary ---------------------------------------------------------------------
passed=0 failed=0
echo
echo "=================== summary ==================="
for i in "${!names[@]}"; do
    printf '%-8s %-30s %s\n' "${results[i]}" "${names[i]}" "${times[i]}"
    case ${results[i]} in
    passed) passed=$((passed + 1)) ;;
    FAILED) failed=$((failed + 1)) ;;
    esac
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
