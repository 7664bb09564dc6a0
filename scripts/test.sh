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
#   g. model      scripts/check_model.sh: the serial drain protocol and the
#                 pool's park handshake checked exhaustively by spin
#                 (installed with apt-get when missing and run as root)
#   i. posix      SEREX_THREADS=posix (the back end of systems without
#                 <threads.h>) on Linux: everything plain, under ASan+UBSan
#                 and under TSan, as stages a, b and c; the drop-in demo
#   j. emutls     clang -femulated-tls -DSEREX_TLS_EMULATED (thread-locals
#                 on the heap, as on mingw-w64, OpenBSD, old Android): the
#                 unit tests, plain and under ASan+UBSan; the drop-in demo
#   k. musl       Linux x86-64 with musl (musl-gcc)
#   l. i386       Linux i386 (gcc -m32, Debian's i386 cmocka)
#   m. arm64      Linux aarch64 (clang --target and lld; run by
#                 qemu-aarch64 on Debian's arm64 packages unpacked into a
#                 sysroot under build-test/)
#   n. mingw      Windows x86-64 (mingw-w64's gcc; run by wine): the Win32
#                 back end
#                 k to n are the cross stages. Each builds the static and
#                 shared library, the examples and the tests with
#                 cmake/toolchains/<target>.cmake and -Werror, runs the
#                 ctest labels unit and example (no stress: qemu and wine
#                 are slow), and builds examples/demo.c from the two-file
#                 drop-in (scripts/amalgamate.sh) with the target's plain
#                 compiler and runs it. cmocka for musl and mingw is built
#                 from Debian's source package (scripts/build_cmocka.sh);
#                 it, the sysroot and the wine prefix are kept under
#                 build-test/ for the next run
#   o. probes     Linux: the static probes (USDT), a Release tree with
#                 -DSEREX_USDT=ON: scripts/check_probes.sh checks their
#                 .note.stapsdt entries and, where bpftrace can attach
#                 (root), counts every probe's events in a small program
#                 (systemtap-sdt-dev and bpftrace are installed with
#                 apt-get when missing and run as root; without bpftrace
#                 only the notes are checked)
#   h. static     scripts/check_layers.sh and its --self-test (the include
#                 graph of src/ keeps its layers), and scripts/check_format.sh
#                 when there is one: no build, a few seconds; runs last
# Each stage that builds has its own tree under build-test/. A failing stage is
# reported and the next one still runs; the exit status is non-zero if any
# stage failed. Stages i to n install what they need with apt-get when run
# as root (musl-tools, gcc-multilib, libcmocka-dev:i386, lld, qemu-user,
# mingw-w64, wine; the i386 and arm64 architectures; a deb-src entry for
# cmocka's source); not root, a stage that lacks something says what and
# fails.
#
# Usage: scripts/test.sh [options]
#   --quick         run only stage a
#   --no-asan       skip stage b
#   --no-tsan       skip stage c
#   --no-consumers  skip stage d
#   --no-clang      skip stage e
#   --no-fuzz       skip stage f
#   --no-model      skip stage g
#   --no-posix      skip stage i
#   --no-emutls     skip stage j
#   --no-musl       skip stage k
#   --no-i386       skip stage l
#   --no-arm64      skip stage m
#   --no-mingw      skip stage n
#   --no-cross      skip the cross stages (k, l, m, n)
#   --no-probes     skip stage o
#   --no-static     skip stage h
#   --only=LETTERS  run only these stages (e.g. --only=k,m)
#   --clean         remove the build trees first (default: reuse them)
#   --fail-fast     skip the remaining stages after a failure
# Environment: SEREX_TEST_BUILD_ROOT (default <repo>/build-test), SEREX_JOBS
#   (default 2), SEREX_TEST_TIMEOUT (seconds per test, default 300), CC for
#   stages a, b and d and the plain and ASan builds of stage i (default cc).
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
run_posix=1 run_emutls=1 run_musl=1 run_i386=1 run_arm64=1 run_mingw=1
run_probes=1
clean=0 fail_fast=0
only=
for arg in "$@"; do
    case $arg in
    --quick) run_asan=0 run_tsan=0 run_consumers=0 run_clang=0 run_fuzz=0 run_model=0 run_static=0
        run_posix=0 run_emutls=0 run_musl=0 run_i386=0 run_arm64=0 run_mingw=0
        run_probes=0 ;;
    --no-asan) run_asan=0 ;;
    --no-tsan) run_tsan=0 ;;
    --no-consumers) run_consumers=0 ;;
    --no-clang) run_clang=0 ;;
    --no-fuzz) run_fuzz=0 ;;
    --no-model) run_model=0 ;;
    --no-static) run_static=0 ;;
    --no-posix) run_posix=0 ;;
    --no-emutls) run_emutls=0 ;;
    --no-musl) run_musl=0 ;;
    --no-i386) run_i386=0 ;;
    --no-arm64) run_arm64=0 ;;
    --no-mingw) run_mingw=0 ;;
    --no-cross) run_musl=0 run_i386=0 run_arm64=0 run_mingw=0 ;;
    --no-probes) run_probes=0 ;;
    --only=*) only=${arg#--only=} ;;
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
        echo "  sudo sh -c 'apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs'" >&2
        echo "then run scripts/test.sh again." >&2
        exit 2
    fi
    echo "test.sh: installing $pkgs with apt-get"
    apt_update_once
    # shellcheck disable=SC2086 # $pkgs is a list of package names
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y \
        --no-install-recommends $pkgs; then
        echo "test.sh: apt-get could not install $pkgs" >&2
        exit 2
    fi
    if ! have_cmocka; then
        echo "test.sh: cmocka is still not found after apt-get install" >&2
        exit 2
    fi
}

# --only=LETTERS: every stage not named is off.
if [ -n "$only" ]; then
    for pair in a:plain b:asan c:tsan d:consumers e:clang f:fuzz g:model \
        h:static i:posix j:emutls k:musl l:i386 m:arm64 n:mingw o:probes; do
        case ",$only," in
        *",${pair%%:*},"*) ;;
        *) eval "run_${pair#*:}=0" ;;
        esac
    done
fi

if [ "$clean" = 1 ]; then
    rm -rf "$root"
fi
mkdir -p "$root"

# apt_update_once: apt-get update at most once per run (the stages run in
# subshells: a file remembers). An index that fails to download (a mirror
# mid-sync) makes apt-get update fail as a whole although the rest was
# fetched: what counts is whether the install or download after it works.
apt_update_once() {
    local mark=$root/.apt-updated
    [ "$(cat "$mark" 2>/dev/null)" = "$$" ] && return 0
    apt-get update >"$root/apt-update.log" 2>&1 ||
        echo "test.sh: apt-get update reported errors (going on):" \
            "$(grep -m1 '^E:' "$root/apt-update.log")" >&2
    echo "$$" >"$mark"
}

can_apt() {
    command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]
}

ensure_test_deps

# Stages c, e, f and j want clang with its sanitizer and fuzzer runtimes
# (Debian ships those apart, in libclang-rt-N-dev: without it the fuzzer
# cannot link and the clang sanitizer builds fall back to gcc), stage g
# spin: installed like cmocka when we can (one apt-get update for the
# whole run); otherwise the stages that need them say how and fail.
clang_runtime_missing() {
    local dir
    dir=$(clang -print-resource-dir 2>/dev/null) || return 0
    ! ls "$dir"/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1 &&
        ! ls "$dir"/lib/*/libclang_rt.fuzzer.a >/dev/null 2>&1
}
ensure_tools() {
    local pkgs=() major
    if [ "$run_clang" = 1 ] || [ "$run_fuzz" = 1 ] || [ "$run_emutls" = 1 ] ||
        [ "$run_tsan" = 1 ]; then
        command -v clang >/dev/null 2>&1 || pkgs+=(clang)
        if command -v clang >/dev/null 2>&1 && clang_runtime_missing; then
            major=$(clang -dumpversion | cut -d. -f1)
            pkgs+=("libclang-rt-$major-dev")
        elif ! command -v clang >/dev/null 2>&1; then
            pkgs+=(libclang-rt-14-dev) # Debian 12's clang
        fi
    fi
    [ "$run_model" = 1 ] && ! command -v spin >/dev/null 2>&1 && pkgs+=(spin)
    [ ${#pkgs[@]} -eq 0 ] && return 0
    if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
        echo "test.sh: missing ${pkgs[*]}: the stages that need them fail" \
            "(install them, or skip those stages: --help)" >&2
        return 0
    fi
    echo "test.sh: installing ${pkgs[*]} with apt-get"
    apt_update_once
    DEBIAN_FRONTEND=noninteractive apt-get install -y \
        --no-install-recommends "${pkgs[@]}" >"$root/apt-tools.log" 2>&1 ||
        echo "test.sh: apt-get could not install ${pkgs[*]}" \
            "(see $root/apt-tools.log)" >&2
}
ensure_tools
for tool in cmake ctest; do
    command -v "$tool" >/dev/null 2>&1 ||
        { echo "test.sh: '$tool' is missing" >&2; exit 2; }
done

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
    # shellcheck disable=SC2086 # $flags is a list of compiler flags
    if ! "$compiler" $flags -g -pthread "$src/scripts/sanitizer_probe.c" -o "$dir/probe" \
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
    asan_build "$root/asan"
}

# asan_build DIR [CMAKE ARGS...]: stage b's build and tests in DIR.
asan_build() {
    local dir=$1 prefix
    shift
    export CC=${CC:-cc}
    export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    prefix=$(sanitizer_prefix "$CC" -fsanitize=address,undefined) || return 1
    # -O1 keeps the stress tests quick; Debug keeps the assertions.
    configure "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG='-g -O1' \
        -DSEREX_SANITIZE=address,undefined -DSEREX_BUILD_BENCH=OFF "$@" &&
        build "$dir" || return 1
    # shellcheck disable=SC2086 # $prefix is empty or a command line
    run_ctest "$dir" $prefix -- -L "$labels"
}

stage_tsan() {
    tsan_build "$root/tsan"
}

# tsan_build DIR [CMAKE ARGS...]: stage c's build and tests in DIR.
tsan_build() {
    local dir=$1 prefix cc
    shift
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
        -DSEREX_SANITIZE=thread -DSEREX_BUILD_BENCH=OFF "$@" &&
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

# ---- stages i to n: other back ends and other targets ----------------------------
target_labels='^(unit|example)$'

# need_packages OPTION PKG...: installs the Debian packages PKG with
# apt-get when run as root; otherwise says what to install (or which
# option skips the stage) and fails.
need_packages() {
    local opt=$1
    shift
    if ! can_apt; then
        echo "test.sh: this stage needs $*: install them with" \
            "'apt-get install $*' as root, or pass $opt" >&2
        return 1
    fi
    echo "test.sh: installing $* with apt-get"
    apt_update_once
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y \
        --no-install-recommends "$@" >"$root/apt-install.log" 2>&1; then
        echo "test.sh: apt-get could not install $*:" >&2
        tail -n 20 "$root/apt-install.log" >&2
        return 1
    fi
}

# pkg_installed PKG[:ARCH]: dpkg says it is installed.
pkg_installed() {
    # shellcheck disable=SC2016 # ${Status} is dpkg-query's, not ours
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep 'install ok installed' >/dev/null
}

# need_foreign_arch OPTION ARCH: dpkg knows ARCH (multiarch).
need_foreign_arch() {
    dpkg --print-foreign-architectures 2>/dev/null | grep -x "$2" >/dev/null &&
        return 0
    if ! can_apt; then
        echo "test.sh: this stage needs Debian's $2 packages: as root, run" \
            "'dpkg --add-architecture $2 && apt-get update', or pass $1" >&2
        return 1
    fi
    echo "test.sh: dpkg --add-architecture $2"
    dpkg --add-architecture "$2" || return 1
    rm -f "$root/.apt-updated" # the new architecture's lists
    apt_update_once
}

# back_end_is DIR NAME: the library in DIR was built with back end NAME.
back_end_is() {
    local up
    up=$(echo "$2" | tr '[:lower:]' '[:upper:]')
    if ! grep -rqs "SEREX_THREADS_$up" "$1/CMakeFiles/serex_static.dir/"; then
        echo "test.sh: $1 was not built with the $2 back end" >&2
        return 1
    fi
    echo "test.sh: threads back end: $2"
}

# cross_build NAME TOOLCHAIN [CMAKE ARGS...]: configures and builds the
# library (static and shared), the examples and the tests in $root/NAME
# with cmake/toolchains/TOOLCHAIN.cmake. The build keeps going past a
# target that does not compile, so one run shows every error and the tests
# that did build still run. Returns 1 when the configure failed, 2 when
# some target did not build.
cross_build() {
    local name=$1 dir=$root/$1 tc=$src/cmake/toolchains/$2.cmake rc=0 k=-k exe
    shift 2
    if [ -f "$dir/CMakeCache.txt" ] &&
        ! grep -qx "CMAKE_TOOLCHAIN_FILE:[A-Z]*=$tc" "$dir/CMakeCache.txt"; then
        rm -rf "$dir" # configured otherwise before
    fi
    configure "$dir" -DCMAKE_TOOLCHAIN_FILE="$tc" -DCMAKE_BUILD_TYPE=Debug \
        -DSEREX_WERROR=ON -DSEREX_BUILD_BENCH=OFF "$@" || return 1
    grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja' "$dir/CMakeCache.txt" && k='-k 0'
    # shellcheck disable=SC2086 # $k is one or two words
    if ! cmake --build "$dir" -j "$jobs" -- $k; then
        echo "test.sh: some of $name did not build (the errors are above);" \
            "testing what did" >&2
        rc=2
    fi
    for exe in "$dir"/tests/test_api "$dir"/tests/test_api.exe; do
        if [ -f "$exe" ] && command -v file >/dev/null 2>&1; then
            echo "test.sh: built: $(file -b "$exe" | sed 's/, BuildID[^,]*//;
                s/, with debug_info//; s/, not stripped//')"
        fi
    done
    return "$rc"
}

# cross_stage NAME TOOLCHAIN BACKEND RUNNER... -- CC... [-- CMAKE ARGS...]:
# the body of every cross stage: build, check the threads back end, run the
# unit tests and examples, build and run the drop-in demo.
cross_stage() {
    local name=$1 tc=$2 backend=$3 rc=0 brc dropin=() cmake_args=()
    shift 3
    while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
        dropin+=("$1")
        shift
    done
    dropin+=(--)
    [ "$#" -gt 0 ] && shift
    while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
        dropin+=("$1")
        shift
    done
    [ "$#" -gt 0 ] && shift
    cmake_args=("$@")
    cross_build "$name" "$tc" "${cmake_args[@]+"${cmake_args[@]}"}"
    brc=$?
    [ "$brc" -eq 1 ] && return 1
    [ "$brc" -eq 0 ] || rc=1
    back_end_is "$root/$name" "$backend" || rc=1
    if [ "$brc" -eq 0 ]; then
        cross_ctest "$name" || rc=1
    else
        cross_ctest "$name" partial || rc=1
    fi
    build_dropin_demo "$name" "${dropin[@]}" || rc=1
    return "$rc"
}

# unbuilt_tests DIR: the tests of DIR whose program is missing (the build
# kept going past an error), one name a line. Their runs would only fail
# again (under wine, after hanging until the timeout).
unbuilt_tests() {
    local line n exe missing=" "
    while IFS= read -r line; do
        case $line in
        [0-9]*": Test command: "*)
            n=${line%%:*}
            exe=$(printf '%s\n' "$line" | grep -o '"[^"]*"' | head -n 1 | tr -d '"')
            if [ -n "$exe" ] && [ ! -e "$exe" ]; then
                missing="$missing$n "
            fi
            ;;
        "  Test"*"#"*": "*)
            n=${line#*#}
            n=${n%%:*}
            case $missing in *" $n "*) echo "${line##*: }" ;; esac
            ;;
        esac
    done < <(cd "$1" && ctest -N -V 2>/dev/null)
}

# cross_ctest NAME [PARTIAL]: the unit tests and the examples of $root/NAME;
# with PARTIAL (the build failed in part) those whose program did not
# build are named and left out.
cross_ctest() {
    local dir=$root/$1 n skip=() unbuilt
    for l in unit example; do
        n=$(count_tests "$dir" "$l")
        echo "test.sh: ${n:-0} tests labelled $l"
    done
    if [ "${2:-}" = partial ]; then
        unbuilt=$(unbuilt_tests "$dir")
        if [ -n "$unbuilt" ]; then
            echo "test.sh: not built, so not run (the stage fails):" \
                "$(echo "$unbuilt" | paste -sd' ')" >&2
            skip=(-E "^($(echo "$unbuilt" | paste -sd'|'))\$")
        fi
    fi
    run_ctest "$dir" -- -L "$target_labels" "${skip[@]+"${skip[@]}"}"
}

# cmocka_for TOOLCHAIN: cmocka built for the target (musl, mingw: Debian has
# no package), once; prints the CMake arguments that name it.
cmocka_for() {
    local prefix=$root/cmocka-$1
    SEREX_JOBS=$jobs SEREX_CMOCKA_SRC_DIR=$root/cmocka-src \
        "$src/scripts/build_cmocka.sh" "$src/cmake/toolchains/$1.cmake" \
        "$prefix" >&2 || return 1
    echo "-DCMOCKA_INCLUDE_DIR=$prefix/include"
    echo "-DCMOCKA_LIBRARY=$prefix/lib/libcmocka-static.a"
}

# build_dropin_demo NAME RUNNER... -- CC [FLAGS...]: examples/demo.c built
# from the two-file drop-in (scripts/amalgamate.sh writes serex.c and
# serex.h) with the target's plain compiler and nothing else, then run
# (under RUNNER: nothing, qemu, wine). A hook until amalgamate.sh exists:
# without it, it says so and passes.
build_dropin_demo() {
    local name=$1 dir=$root/$1/dropin runner=() cc=() exe=
    shift
    while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
        runner+=("$1")
        shift
    done
    shift
    cc=("$@")
    if [ ! -f "$src/scripts/amalgamate.sh" ]; then
        echo "test.sh: no scripts/amalgamate.sh yet: drop-in demo not built for $name"
        return 0
    fi
    case $name in mingw) exe=.exe ;; esac
    rm -rf "$dir"
    mkdir -p "$dir/include/serex"
    if ! bash "$src/scripts/amalgamate.sh" --out "$dir" --no-compile \
        >"$dir/amalgamate.log" 2>&1; then
        echo "test.sh: scripts/amalgamate.sh failed:" >&2
        cat "$dir/amalgamate.log" >&2
        return 1
    fi
    # The demo includes <serex/serex.h>: the amalgamated header stands in.
    cp "$dir/serex.h" "$dir/include/serex/serex.h"
    echo "test.sh: drop-in demo: ${cc[*]} -std=c11 -Wall -Wextra -Wpedantic" \
        "-Werror demo.c serex.c"
    "${cc[@]}" -std=c11 -Wall -Wextra -Wpedantic -Werror -I"$dir/include" \
        "$src/examples/demo.c" "$dir/serex.c" -o "$dir/demo$exe" || return 1
    if ! (cd "$dir" && timeout 300 "${runner[@]+"${runner[@]}"}" "./demo$exe" \
        >demo.log 2>&1); then
        echo "test.sh: the drop-in demo failed on $name:" >&2
        cat "$dir/demo.log" >&2
        return 1
    fi
    echo "test.sh: the drop-in demo ran on $name ($(wc -l <"$dir/demo.log") lines)"
}

# i. The POSIX back end, as a system without <threads.h> gets it. (Stage c
# uses it already, since ThreadSanitizer needs it; here it is asked for.)
stage_posix() {
    local rc=0 dir=$root/posix
    echo "test.sh: --- plain, Debug, -Werror: every label ---"
    if configure "$dir/plain" -DCMAKE_BUILD_TYPE=Debug -DSEREX_WERROR=ON \
        -DSEREX_THREADS=posix && build "$dir/plain" &&
        back_end_is "$dir/plain" posix; then
        run_ctest "$dir/plain" -- || rc=1
    else
        rc=1
    fi
    echo "test.sh: --- ASan + UBSan ---"
    (asan_build "$dir/asan" -DSEREX_THREADS=posix &&
        back_end_is "$dir/asan" posix) || rc=1
    echo "test.sh: --- TSan ---"
    (tsan_build "$dir/tsan" -DSEREX_THREADS=posix &&
        back_end_is "$dir/tsan" posix) || rc=1
    build_dropin_demo posix -- "${CC:-cc}" -DSEREX_THREADS_POSIX -pthread || rc=1
    return "$rc"
}

# j. Emulated thread-locals: the node cache keeps its per-thread lists on
# the heap (SEREX_TLS_EMULATED); what it does at thread exit is what
# matters, so ASan (use after free, leaks) runs it too.
stage_emutls() {
    local rc=0 dir=$root/emutls prefix
    local flags='-femulated-tls -DSEREX_TLS_EMULATED'
    if ! command -v clang >/dev/null 2>&1; then
        need_packages --no-emutls clang || return 1
    fi
    export CC=clang CXX=clang++
    echo "test.sh: --- plain, Debug, -Werror: unit ---"
    if configure "$dir/plain" -DCMAKE_BUILD_TYPE=Debug -DSEREX_WERROR=ON \
        -DSEREX_BUILD_BENCH=OFF -DCMAKE_C_FLAGS="$flags" &&
        build "$dir/plain"; then
        # the flag took: thread-locals are __emutls_v.* control variables
        if ! nm "$dir/plain/libserex.a" 2>/dev/null | grep '__emutls_v\.' >/dev/null; then
            echo "test.sh: libserex.a has no emulated thread-locals" >&2
            rc=1
        fi
        run_ctest "$dir/plain" -- -L '^unit$' || rc=1
    else
        rc=1
    fi
    echo "test.sh: --- ASan + UBSan: unit ---"
    export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    if prefix=$(sanitizer_prefix clang "-fsanitize=address,undefined -femulated-tls") &&
        configure "$dir/asan" -DCMAKE_BUILD_TYPE=Debug \
            -DCMAKE_C_FLAGS_DEBUG='-g -O1' -DCMAKE_C_FLAGS="$flags" \
            -DSEREX_SANITIZE=address,undefined -DSEREX_BUILD_BENCH=OFF &&
        build "$dir/asan"; then
        # shellcheck disable=SC2086 # $prefix is empty or a command line
        run_ctest "$dir/asan" $prefix -- -L '^unit$' || rc=1
    else
        rc=1
    fi
    # shellcheck disable=SC2086 # $flags is a list of compiler flags
    build_dropin_demo emutls -- clang $flags -pthread || rc=1
    return "$rc"
}

# k. Linux x86-64 with musl.
stage_musl() {
    local cm
    command -v musl-gcc >/dev/null 2>&1 ||
        need_packages --no-musl musl-tools || return 1
    cm=$(cmocka_for musl) || return 1
    # shellcheck disable=SC2086 # $cm is a list of -D arguments
    cross_stage musl musl c11 -- musl-gcc -pthread -- $cm
}

# unpack_debs OPTION DIR PKG:ARCH...: Debian's packages unpacked into DIR
# (apt-get download + dpkg-deb -x: nothing is installed, so they never have
# to match the versions of the host's packages), once: DIR keeps the list.
unpack_debs() {
    local opt=$1 dir=$2 debs=$2.debs list arch
    shift 2
    list="$*"
    if [ -f "$dir/.serex-debs" ] && [ "$(cat "$dir/.serex-debs")" = "$list" ]; then
        return 0
    fi
    arch=${1#*:}
    need_foreign_arch "$opt" "$arch" || return 1
    rm -rf "$dir" "$debs"
    mkdir -p "$dir" "$debs"
    echo "test.sh: unpacking $* into $dir"
    if ! (cd "$debs" && apt-get download "$@") >"$debs.log" 2>&1; then
        if can_apt; then
            apt_update_once
            (cd "$debs" && apt-get download "$@") >"$debs.log" 2>&1
        fi || {
            echo "test.sh: apt-get download of the $arch packages failed:" >&2
            tail -n 20 "$debs.log" >&2
            return 1
        }
    fi
    for deb in "$debs"/*.deb; do
        dpkg-deb -x "$deb" "$dir" || return 1
    done
    echo "$list" >"$dir/.serex-debs"
    rm -rf "$debs" "$debs.log"
}

# l. Linux i386: gcc -m32 and Debian's i386 cmocka (multiarch). When
# libcmocka-dev:i386 cannot be installed (its libc6:i386 must be the very
# version of the host's libc6, which a mirror's i386 index may lag), its
# files are unpacked under build-test/ and named to CMake instead.
stage_i386() {
    local cm=() d=$root/cmocka-i386
    if ! pkg_installed gcc-multilib; then
        need_packages --no-i386 gcc-multilib || return 1
    fi
    if ! pkg_installed libcmocka-dev:i386; then
        if ! { need_foreign_arch --no-i386 i386 &&
            need_packages --no-i386 libcmocka-dev:i386; }; then
            echo "test.sh: using libcmocka-dev:i386 unpacked instead"
            unpack_debs --no-i386 "$d" libcmocka0:i386 libcmocka-dev:i386 ||
                return 1
            cm=(-DCMOCKA_INCLUDE_DIR="$d/usr/include"
                -DCMOCKA_LIBRARY="$d/usr/lib/i386-linux-gnu/libcmocka.so")
        fi
    fi
    cross_stage i386 i386 c11 -- gcc -m32 -pthread -- "${cm[@]+"${cm[@]}"}"
}

# arm64_sysroot DIR: Debian's arm64 C library, libgcc and cmocka unpacked
# into DIR, the sysroot clang links against and qemu runs in.
arm64_sysroot() {
    local gccv pkgs=()
    gccv=$(gcc -dumpversion 2>/dev/null | cut -d. -f1)
    for p in libc6 libc6-dev linux-libc-dev "libgcc-${gccv:-12}-dev" \
        libgcc-s1 libatomic1 libcmocka0 libcmocka-dev; do
        pkgs+=("$p:arm64")
    done
    unpack_debs --no-arm64 "$1" "${pkgs[@]}"
}

# m. Linux aarch64: clang --target=aarch64-linux-gnu, lld, qemu-aarch64.
stage_arm64() {
    local sr=$root/sysroot-arm64 missing=()
    command -v clang >/dev/null 2>&1 || missing+=(clang)
    command -v ld.lld >/dev/null 2>&1 || missing+=(lld)
    command -v qemu-aarch64 >/dev/null 2>&1 || missing+=(qemu-user)
    if [ "${#missing[@]}" -gt 0 ]; then
        need_packages --no-arm64 "${missing[@]}" || return 1
    fi
    arm64_sysroot "$sr" || return 1
    cross_stage arm64 aarch64 c11 qemu-aarch64 -L "$sr" -- clang \
        --target=aarch64-linux-gnu --sysroot="$sr" -fuse-ld=lld -pthread \
        -- -DSEREX_AARCH64_SYSROOT="$sr"
}

# n. Windows x86-64: mingw-w64 and wine, the Win32 back end.
stage_mingw() {
    local cm missing=() mcc=x86_64-w64-mingw32-gcc
    command -v "$mcc" >/dev/null 2>&1 || missing+=(mingw-w64)
    command -v wine >/dev/null 2>&1 || missing+=(wine wine64)
    if [ "${#missing[@]}" -gt 0 ]; then
        need_packages --no-mingw "${missing[@]}" || return 1
    fi
    command -v "$mcc-win32" >/dev/null 2>&1 && mcc=$mcc-win32
    cm=$(cmocka_for mingw) || return 1
    # A wine prefix of our own, made once (half a minute); one wineserver
    # for the whole stage, so each test starts in a fraction of a second.
    export WINEPREFIX=$root/wine WINEDEBUG=-all
    if [ ! -f "$WINEPREFIX/system.reg" ]; then
        echo "test.sh: making the wine prefix $WINEPREFIX"
        timeout 300 wineboot -i >"$root/wineboot.log" 2>&1 || {
            cat "$root/wineboot.log" >&2
            return 1
        }
    fi
    wineserver -p 2>/dev/null # fails when one is running already: fine
    trap 'wineserver -k 2>/dev/null || true' EXIT
    # One program alone first, while wine starts its services: with a fresh
    # wineserver, the first programs ctest starts two at a time could hang
    # (test_wheel, which starts no thread, included) until the timeout.
    timeout 120 wine cmd /c exit >/dev/null 2>&1 || true
    # shellcheck disable=SC2086 # $cm is a list of -D arguments
    cross_stage mingw mingw win32 wine -- "$mcc" -static-libgcc -- $cm
}

# o. The static probes (USDT): their notes, and where bpftrace can attach,
# the exact count of each probe's events (scripts/check_probes.sh). Only
# what the check needs is built: the libraries and the two probe targets.
stage_probes() {
    local dir=$root/probes missing=()
    if [ "$(uname -s)" != Linux ]; then
        echo "test.sh: the static probes are checked on Linux only: skipped"
        return 0
    fi
    echo '#include <sys/sdt.h>' | "${CC:-cc}" -E -x c - >/dev/null 2>&1 ||
        missing+=(systemtap-sdt-dev)
    command -v bpftrace >/dev/null 2>&1 || missing+=(bpftrace)
    if [ ${#missing[@]} -gt 0 ]; then
        if can_apt || [ "${missing[0]}" = systemtap-sdt-dev ]; then
            need_packages --no-probes "${missing[@]}" || return 1
        else
            echo "test.sh: bpftrace is missing (as root: apt-get install" \
                "bpftrace): the probes' counts are not checked"
        fi
    fi
    configure "$dir" -DCMAKE_BUILD_TYPE=Release -DSEREX_WERROR=ON \
        -DSEREX_USDT=ON -DSEREX_BUILD_BENCH=OFF || return 1
    cmake --build "$dir" -j "$jobs" --target probe_target probe_target_so ||
        return 1
    "$src/scripts/check_probes.sh" "$dir"
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
stage "i posix (SEREX_THREADS=posix)" "$run_posix" stage_posix
stage "j emutls (-femulated-tls)" "$run_emutls" stage_emutls
stage "k musl (x86-64)" "$run_musl" stage_musl
stage "l i386 (-m32)" "$run_i386" stage_i386
stage "m arm64 (clang, qemu)" "$run_arm64" stage_arm64
stage "n mingw (Windows, wine)" "$run_mingw" stage_mingw
stage "o probes (USDT, bpftrace)" "$run_probes" stage_probes
stage "h static checks" "$run_static" stage_static

# ---- summary ---------------------------------------------------------------------
passed=0 failed=0
echo
echo "=================== summary ==================="
for i in "${!names[@]}"; do
    printf '%-8s %-34s %s\n' "${results[i]}" "${names[i]}" "${times[i]}"
    case ${results[i]} in
    passed) passed=$((passed + 1)) ;;
    FAILED) failed=$((failed + 1)) ;;
    esac
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
