#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# check_consumers.sh - prove the ways users consume serex, plain, under
# ThreadSanitizer and under AddressSanitizer, and that the shared library
# exports nothing but the public serex_* API.
#
#   1. install serex into a temporary prefix (cmake --install), then a
#      SEREX_SANITIZE=thread build into the same prefix (libserex-tsan.*,
#      serex::tsan, serex-tsan.pc), and a SEREX_SANITIZE=address,undefined
#      build (libserex-asan.*, serex::asan, serex-asan.pc), each of which
#      must leave the files already there untouched;
#   2. build and run examples/consumer with find_package(serex), shared and
#      static (BUILD_SHARED_LIBS=ON/OFF picks what serex::serex means);
#   3. build and run it with add_subdirectory(<serex source>), both ways;
#   4. build and run it with plain cc and pkg-config: serex (shared) and
#      serex-static (the archive: ldd shows no libserex.so); and from the
#      two-file drop-in (scripts/amalgamate.sh --check: examples/demo.c
#      built from serex.c and serex.h alone), and examples/consumer/main.c,
#      unchanged (#include <serex/serex.h>), against the drop-in with
#      -I<drop-in> (its serex/serex.h);
#   5. ThreadSanitizer: build examples/consumer (threads meeting through a
#      pool, a serial executor and a future) with -fsanitize=thread by
#      add_subdirectory (in CMAKE_C_FLAGS, and by add_compile_options()),
#      by find_package(serex COMPONENTS tsan) -> serex::tsan, and by
#      pkg-config serex-tsan, and from the drop-in's serex.c, and run each
#      with TSAN_OPTIONS=halt_on_error=1:
#      no report allowed. Compiler: SEREX_TSAN_CC, else clang if it builds
#      and runs a TSan program, else gcc (as stage c of scripts/test.sh);
#      skipped, and said so, when none can;
#  5b. AddressSanitizer (and UBSan): the installed variant's flags must
#      reach the user's program: a canary (a heap overflow built with
#      nothing but pkg-config serex-asan-static's flags) must be reported;
#      examples/consumer by find_package(serex COMPONENTS asan) ->
#      serex::asan and by pkg-config serex-asan, each run clean with
#      ASAN_OPTIONS=halt_on_error=1. Compiler: SEREX_ASAN_CC, else $CC,
#      else gcc, else clang: the first that builds and runs an ASan
#      program; skipped, and said so, when none can;
#   6. check the symbols: libserex.so exports only serex_* (never serex__*),
#      every SEREX_API function in include/ is exported, and every global
#      symbol of libserex.a is in the serex_ namespace.
#
# Usage: scripts/check_consumers.sh [--keep] [--no-tsan] [--no-asan]
#   --keep     keep the work directory (printed at the end)
#   --no-tsan  skip the ThreadSanitizer builds (in 1 and 5)
#   --no-asan  skip the AddressSanitizer builds (in 1 and 5b)
# Environment: CC (default cc), SEREX_TSAN_CC (default: clang, else gcc),
#   SEREX_ASAN_CC (default: $CC, else gcc, else clang), SEREX_JOBS
#   (default 2), SEREX_CONSUMER_WORK_DIR (default: a fresh mktemp -d,
#   removed at exit).
# Exits 0 when every check passed (skipped ones are listed), 1 otherwise.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$src/scripts/lib.sh"
jobs=${SEREX_JOBS:-2}
cc=${CC:-cc}
keep=0
tsan=1
asan=1
for arg in "$@"; do
    case $arg in
    --keep) keep=1 ;;
    --no-tsan) tsan=0 ;;
    --no-asan) asan=0 ;;
    -h | --help)
        usage "${BASH_SOURCE[0]}"
        exit 0
        ;;
    *)
        echo "check_consumers.sh: unknown option '$arg' (try --help)" >&2
        exit 2
        ;;
    esac
done

for tool in cmake pkg-config nm readelf ldd "$cc"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "check_consumers.sh: '$tool' is missing" >&2
        exit 2
    fi
done

if [ -n "${SEREX_CONSUMER_WORK_DIR:-}" ]; then
    work=$SEREX_CONSUMER_WORK_DIR
    rm -rf "$work"
    mkdir -p "$work"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/serex-consumers.XXXXXX")
    if [ "$keep" = 0 ]; then
        trap 'rm -rf "$work"' EXIT
    fi
fi
prefix=$work/prefix
consumer=$src/examples/consumer

passed=0
failed=0
failures=()
skipped=()

# check NAME CMD...: run CMD with its output in a log; print the log on failure.
check() {
    local name=$1 log
    shift
    log=$work/log.$((passed + failed))
    if "$@" >"$log" 2>&1; then
        echo "ok   - $name"
        passed=$((passed + 1))
    else
        echo "FAIL - $name"
        sed 's/^/       | /' "$log"
        failed=$((failed + 1))
        failures+=("$name")
    fi
}

# ---- 1. build and install serex --------------------------------------------
install_serex() {
    cmake -S "$src" -B "$work/serex-build" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_COMPILER="$cc" \
        -DCMAKE_INSTALL_PREFIX="$prefix" \
        -DSEREX_BUILD_TESTS=OFF -DSEREX_BUILD_EXAMPLES=OFF \
        -DSEREX_BUILD_BENCH=OFF -DSEREX_WERROR=ON &&
        cmake --build "$work/serex-build" -j "$jobs" &&
        cmake --install "$work/serex-build"
}
check "build serex and install it into $prefix" install_serex
if [ "$failed" -ne 0 ]; then
    echo "check_consumers.sh: nothing to check without an installed serex"
    echo "consumer checks: $passed passed, $failed failed"
    exit 1
fi

# GNUInstallDirs may say lib, lib64 or lib/<multiarch>: ask the install.
pcfile=$(find "$prefix" -name serex.pc -path '*/pkgconfig/*' | head -n 1)
libdir=$(dirname "$(dirname "${pcfile:-$prefix/lib/pkgconfig/serex.pc}")")
so=$(find "$libdir" -maxdepth 1 -name 'libserex.so.*.*' -type f | head -n 1)

installed_files_present() {
    local f ok=0
    for f in "$prefix/include/serex/serex.h" "$pcfile" \
        "$libdir/cmake/serex/serexConfig.cmake" \
        "$libdir/cmake/serex/serexConfigVersion.cmake" \
        "$libdir/cmake/serex/serexTargets.cmake" \
        "$libdir/pkgconfig/serex-static.pc" \
        "$libdir/libserex.a" "$libdir/libserex.so" "$so"; do
        if [ -n "$f" ] && [ -e "$f" ]; then
            echo "have ${f#"$prefix"/}"
        else
            echo "missing: ${f:-a versioned libserex.so.X.Y.Z}"
            ok=1
        fi
    done
    return "$ok"
}
check "install tree has headers, libraries, CMake package, serex.pc, serex-static.pc" \
    installed_files_present

# ---- 1b. the ThreadSanitizer variant, into the same prefix ----------------------
# tsan_probe COMPILER: can COMPILER build and run a threaded TSan program
# here? Sets tsan_run to the command prefix its programs need: nothing, or
# setarch -R where the sanitizer cannot live with the kernel's address
# randomisation (LLVM < 18 and gcc 12 with vm.mmap_rnd_bits 32).
tsan_run=()
tsan_probe() {
    local compiler=$1 dir=$work/tsan-probe
    command -v "$compiler" >/dev/null 2>&1 || return 1
    mkdir -p "$dir"
    "$compiler" -fsanitize=thread -g -pthread "$src/scripts/sanitizer_probe.c" -o "$dir/probe" \
        >/dev/null 2>&1 || return 1
    if timeout 30 "$dir/probe" >/dev/null 2>&1; then
        tsan_run=()
        return 0
    fi
    if command -v setarch >/dev/null 2>&1 &&
        timeout 30 setarch "$(uname -m)" -R "$dir/probe" >/dev/null 2>&1; then
        tsan_run=(setarch "$(uname -m)" -R)
        return 0
    fi
    return 1
}

tsan_cc=
if [ "$tsan" = 1 ]; then
    for c in ${SEREX_TSAN_CC:-clang gcc "$cc"}; do
        if tsan_probe "$c"; then
            tsan_cc=$c
            break
        fi
    done
    if [ -z "$tsan_cc" ]; then
        echo "skip - ThreadSanitizer: no compiler here builds and runs a" \
            "-fsanitize=thread program (tried ${SEREX_TSAN_CC:-clang gcc $cc})"
        skipped+=("ThreadSanitizer checks (no working TSan compiler)")
    else
        echo "ThreadSanitizer checks with $tsan_cc${tsan_run[*]:+, run under ${tsan_run[*]}}"
    fi
else
    skipped+=("ThreadSanitizer checks (--no-tsan)")
fi
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

# is_tsan FILE: does FILE (a program or an archive) carry TSan
# instrumentation? (grep reads all of nm's output: no SIGPIPE for pipefail)
is_tsan() {
    nm "$1" 2>/dev/null | grep -c '__tsan_func_entry' >/dev/null
}

# install_serex_tsan: a SEREX_SANITIZE=thread build installed beside the
# plain one; every file of the plain install must be left as it was.
install_serex_tsan() {
    local before after changed f ok=0
    before=$(cd "$prefix" && find . -type f -exec cksum {} + | sort)
    cmake -S "$src" -B "$work/serex-tsan-build" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_COMPILER="$tsan_cc" \
        -DCMAKE_INSTALL_PREFIX="$prefix" -DSEREX_SANITIZE=thread \
        -DSEREX_BUILD_TESTS=OFF -DSEREX_BUILD_EXAMPLES=OFF \
        -DSEREX_BUILD_BENCH=OFF -DSEREX_WERROR=ON &&
        cmake --build "$work/serex-tsan-build" -j "$jobs" &&
        cmake --install "$work/serex-tsan-build" || return 1
    after=$(cd "$prefix" && find . -type f -exec cksum {} + | sort)
    changed=$(comm -23 <(echo "$before") <(echo "$after"))
    if [ -n "$changed" ]; then
        echo "the TSan install changed files of the plain install:"
        echo "$changed"
        ok=1
    fi
    for f in "$libdir/libserex-tsan.a" "$libdir/libserex-tsan.so" \
        "$libdir/cmake/serex/serexTsanTargets.cmake" \
        "$libdir/pkgconfig/serex-tsan.pc" "$libdir/pkgconfig/serex-tsan-static.pc"; do
        if [ -e "$f" ]; then
            echo "have ${f#"$prefix"/}"
        else
            echo "missing: ${f#"$prefix"/}"
            ok=1
        fi
    done
    is_tsan "$libdir/libserex-tsan.a" ||
        { echo "libserex-tsan.a is not instrumented"; ok=1; }
    return "$ok"
}
if [ -n "$tsan_cc" ]; then
    check "SEREX_SANITIZE=thread installs libserex-tsan, serex::tsan, serex-tsan.pc beside it" \
        install_serex_tsan
fi

# ---- 1c. the AddressSanitizer variant, into the same prefix ---------------------
asan_flags=-fsanitize=address,undefined
# asan_probe COMPILER: can COMPILER build and run a threaded ASan+UBSan
# program here?
asan_probe() {
    local compiler=$1 dir=$work/asan-probe
    command -v "$compiler" >/dev/null 2>&1 || return 1
    mkdir -p "$dir"
    "$compiler" $asan_flags -g -pthread "$src/scripts/sanitizer_probe.c" \
        -o "$dir/probe" >/dev/null 2>&1 || return 1
    timeout 30 "$dir/probe" >/dev/null 2>&1
}

asan_cc=
if [ "$asan" = 1 ]; then
    for c in ${SEREX_ASAN_CC:-"$cc" gcc clang}; do
        if asan_probe "$c"; then
            asan_cc=$c
            break
        fi
    done
    if [ -z "$asan_cc" ]; then
        echo "skip - AddressSanitizer: no compiler here builds and runs a" \
            "$asan_flags program (tried ${SEREX_ASAN_CC:-$cc gcc clang})"
        skipped+=("AddressSanitizer checks (no working ASan compiler)")
    else
        echo "AddressSanitizer checks with $asan_cc"
    fi
else
    skipped+=("AddressSanitizer checks (--no-asan)")
fi
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

# is_asan FILE: does FILE (a program or an archive) carry ASan
# instrumentation?
is_asan() {
    nm "$1" 2>/dev/null | grep -c '__asan_report_' >/dev/null
}

# install_serex_asan: a SEREX_SANITIZE=address,undefined build installed
# beside the others; every file already installed must be left as it was,
# and its pkg-config files must bring the sanitizer flags.
install_serex_asan() {
    local before after changed f ok=0
    local -x PKG_CONFIG_PATH="$libdir/pkgconfig"
    before=$(cd "$prefix" && find . -type f -exec cksum {} + | sort)
    cmake -S "$src" -B "$work/serex-asan-build" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_COMPILER="$asan_cc" \
        -DCMAKE_INSTALL_PREFIX="$prefix" -DSEREX_SANITIZE=address,undefined \
        -DSEREX_BUILD_TESTS=OFF -DSEREX_BUILD_EXAMPLES=OFF \
        -DSEREX_BUILD_BENCH=OFF -DSEREX_WERROR=ON &&
        cmake --build "$work/serex-asan-build" -j "$jobs" &&
        cmake --install "$work/serex-asan-build" || return 1
    after=$(cd "$prefix" && find . -type f -exec cksum {} + | sort)
    changed=$(comm -23 <(echo "$before") <(echo "$after"))
    if [ -n "$changed" ]; then
        echo "the ASan install changed files installed before it:"
        echo "$changed"
        ok=1
    fi
    for f in "$libdir/libserex-asan.a" "$libdir/libserex-asan.so" \
        "$libdir/cmake/serex/serexAsanTargets.cmake" \
        "$libdir/pkgconfig/serex-asan.pc" "$libdir/pkgconfig/serex-asan-static.pc"; do
        if [ -e "$f" ]; then
            echo "have ${f#"$prefix"/}"
        else
            echo "missing: ${f#"$prefix"/}"
            ok=1
        fi
    done
    is_asan "$libdir/libserex-asan.a" ||
        { echo "libserex-asan.a is not instrumented"; ok=1; }
    for f in serex-asan serex-asan-static; do
        echo "pkg-config --cflags --libs $f: $(pkg-config --cflags --libs "$f")"
        if ! pkg-config --cflags "$f" | grep -q -- "$asan_flags" ||
            ! pkg-config --libs "$f" | grep -q -- "$asan_flags"; then
            echo "$f.pc does not bring $asan_flags"
            ok=1
        fi
    done
    # the plain serex.pc must not have changed its mind
    if pkg-config --cflags --libs serex | grep -q -- -fsanitize; then
        echo "serex.pc asks for a sanitizer"
        ok=1
    fi
    return "$ok"
}
if [ -n "$asan_cc" ]; then
    check "SEREX_SANITIZE=address,undefined installs libserex-asan, serex::asan, serex-asan.pc (with $asan_flags) beside them" \
        install_serex_asan
fi

# ---- 2 and 3. the CMake consumer ---------------------------------------------
# needs_libserex BIN: does BIN load libserex.so at run time?
needs_libserex() {
    readelf -d "$1" | grep -q 'NEEDED.*\[libserex\.so'
}

# cmake_consumer DIR LINKAGE ARGS...: configure, build and run the consumer.
# LINKAGE is shared or static: what serex::serex must have resolved to.
cmake_consumer() {
    local dir=$1 linkage=$2
    shift 2
    cmake -S "$consumer" -B "$dir" -DCMAKE_C_COMPILER="$cc" "$@" &&
        cmake --build "$dir" -j "$jobs" &&
        timeout 60 "$dir/consumer" || return 1
    if [ "$linkage" = shared ]; then
        needs_libserex "$dir/consumer" ||
            { echo "consumer does not load libserex.so"; return 1; }
    else
        ! needs_libserex "$dir/consumer" ||
            { echo "consumer loads libserex.so: expected static"; return 1; }
    fi
    echo "linked $linkage, as asked"
}

check "find_package(serex), serex::serex shared (BUILD_SHARED_LIBS=ON)" \
    cmake_consumer "$work/fp-shared" shared -DSEREX_CONSUMER_MODE=find_package \
    -DCMAKE_PREFIX_PATH="$prefix" -DBUILD_SHARED_LIBS=ON
check "find_package(serex), serex::serex static (BUILD_SHARED_LIBS=OFF)" \
    cmake_consumer "$work/fp-static" static -DSEREX_CONSUMER_MODE=find_package \
    -DCMAKE_PREFIX_PATH="$prefix" -DBUILD_SHARED_LIBS=OFF

# Vendored: serex must not configure its tests, examples or bench (they
# would need cmocka), nor turn warnings into errors in a user's build.
vendored_defaults() {
    local cache=$1/CMakeCache.txt opt ok=0
    for opt in SEREX_BUILD_TESTS SEREX_BUILD_EXAMPLES SEREX_BUILD_BENCH \
        SEREX_WERROR; do
        if grep -q "^$opt:BOOL=OFF$" "$cache"; then
            echo "$opt is OFF"
        else
            echo "$opt is not OFF under add_subdirectory:"
            grep "^$opt:" "$cache" || echo "($opt not in the cache)"
            ok=1
        fi
    done
    return "$ok"
}
check "add_subdirectory(serex), serex::serex static (BUILD_SHARED_LIBS=OFF)" \
    cmake_consumer "$work/sub-static" static -DSEREX_CONSUMER_MODE=subdirectory \
    -DSEREX_SOURCE_DIR="$src" -DBUILD_SHARED_LIBS=OFF
check "add_subdirectory(serex), serex::serex shared (BUILD_SHARED_LIBS=ON)" \
    cmake_consumer "$work/sub-shared" shared -DSEREX_CONSUMER_MODE=subdirectory \
    -DSEREX_SOURCE_DIR="$src" -DBUILD_SHARED_LIBS=ON
check "add_subdirectory(serex) leaves tests, examples, bench and -Werror off" \
    vendored_defaults "$work/sub-static"

# ---- 4. pkg-config ------------------------------------------------------------
pkg_config_consumer() {
    local flags
    local -x PKG_CONFIG_PATH="$libdir/pkgconfig"
    echo "pkg-config --modversion serex: $(pkg-config --modversion serex)"
    flags=$(pkg-config --cflags --libs serex) || return 1
    echo "pkg-config --cflags --libs serex: $flags"
    # shellcheck disable=SC2086 # $flags is a list of words by design
    "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror \
        "$consumer/main.c" -o "$work/pc-consumer" $flags \
        -Wl,-rpath,"$libdir" &&
        timeout 60 "$work/pc-consumer" &&
        needs_libserex "$work/pc-consumer"
}
check "pkg-config: cc main.c \$(pkg-config --cflags --libs serex)" \
    pkg_config_consumer

# pkg-config --static --libs serex says -lserex, which the linker resolves
# to libserex.so when both are installed; serex-static names the archive.
pkg_config_static_consumer() {
    local flags
    local -x PKG_CONFIG_PATH="$libdir/pkgconfig"
    flags=$(pkg-config --static --cflags --libs serex-static) || return 1
    echo "pkg-config --static --cflags --libs serex-static: $flags"
    local word archive=
    for word in $flags; do
        case $word in */libserex.a) archive=$word ;; esac
    done
    if [ -z "$archive" ] ||
        [ "$(realpath "$archive")" != "$(realpath "$libdir/libserex.a")" ]; then
        echo "serex-static.pc does not name $libdir/libserex.a"
        return 1
    fi
    # shellcheck disable=SC2086 # $flags is a list of words by design
    "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror \
        "$consumer/main.c" -o "$work/pc-static-consumer" $flags || return 1
    timeout 60 "$work/pc-static-consumer" || return 1
    echo "ldd pc-static-consumer:"
    ldd "$work/pc-static-consumer" | sed 's/^/  /'
    if ldd "$work/pc-static-consumer" | grep -q 'libserex'; then
        echo "linked libserex.so: expected the static archive"
        return 1
    fi
    ! needs_libserex "$work/pc-static-consumer"
}
check "pkg-config --static: cc main.c \$(pkg-config --static --cflags --libs serex-static), no libserex.so" \
    pkg_config_static_consumer

# The two-file drop-in: written into the work directory, self-checked by
# the script (-Wall -Wextra -Wpedantic -Wshadow -Werror), and the demo
# built from the two files alone and run.
dropin=$work/dropin
check "two-file drop-in: scripts/amalgamate.sh --check --strict (the demo from serex.c + serex.h; no name renamed)" \
    env CC="$cc" "$src/scripts/amalgamate.sh" --out "$dropin" --check --strict

# One source, both ways: examples/consumer/main.c includes <serex/serex.h>,
# as against the install; against the drop-in it needs only -I<drop-in>
# (amalgamate.sh writes serex/serex.h beside the two files).
dropin_installed_include() {
    local bin=$work/dropin-consumer
    [ -f "$dropin/serex.c" ] || { echo "no drop-in in $dropin"; return 1; }
    [ -f "$dropin/serex/serex.h" ] ||
        { echo "the drop-in has no serex/serex.h: <serex/serex.h> cannot be found"; return 1; }
    grep -q '#include <serex/serex.h>' "$consumer/main.c" ||
        { echo "examples/consumer/main.c does not include <serex/serex.h>"; return 1; }
    echo "$cc -std=c11 -Wall -Wextra -Wpedantic -Werror -I<drop-in> main.c serex.c -pthread"
    "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -I"$dropin" \
        "$consumer/main.c" "$dropin/serex.c" -pthread -o "$bin" || return 1
    timeout 60 "$bin"
}
check "drop-in, one source both ways: cc -I<drop-in> main.c serex.c, main.c with #include <serex/serex.h>" \
    dropin_installed_include

# ---- 5. ThreadSanitizer in the user's application ------------------------------
# tsan_clean LOG CMD...: run CMD under TSan; fail on a report or non-zero exit.
tsan_clean() {
    local log=$1
    shift
    if ! timeout 120 "${tsan_run[@]+"${tsan_run[@]}"}" "$@" >"$log" 2>&1; then
        cat "$log"
        echo "failed under ThreadSanitizer"
        return 1
    fi
    cat "$log"
    if grep -q 'ThreadSanitizer' "$log"; then
        echo "ThreadSanitizer reported something"
        return 1
    fi
    echo "ThreadSanitizer: clean"
}

# tsan_subdirectory DIR ARGS...: add_subdirectory with the parent's TSan
# flags; serex must pick the POSIX back end and compile its own objects
# with them.
tsan_subdirectory() {
    local dir=$1
    shift
    mkdir -p "$dir"
    cmake -S "$consumer" -B "$dir" -DCMAKE_C_COMPILER="$tsan_cc" \
        -DSEREX_CONSUMER_MODE=subdirectory -DSEREX_SOURCE_DIR="$src" \
        -DBUILD_SHARED_LIBS=OFF "$@" >"$dir/configure.log" 2>&1 ||
        { cat "$dir/configure.log"; return 1; }
    if ! grep -q 'serex: threads back end: posix' "$dir/configure.log"; then
        grep 'serex:' "$dir/configure.log"
        echo "serex did not see the parent's -fsanitize=thread: not the POSIX back end"
        return 1
    fi
    echo "serex: threads back end: posix (it saw -fsanitize=thread)"
    cmake --build "$dir" -j "$jobs" || return 1
    is_tsan "$dir/serex/libserex.a" ||
        { echo "serex's own objects were built without -fsanitize=thread"; return 1; }
    echo "serex's own objects (libserex.a) carry TSan instrumentation"
    tsan_clean "$dir/run.log" "$dir/consumer"
}

# tsan_find_package DIR: serex::tsan from the installed variant.
tsan_find_package() {
    local dir=$1
    cmake -S "$consumer" -B "$dir" -DCMAKE_C_COMPILER="$tsan_cc" \
        -DSEREX_CONSUMER_MODE=find_package -DSEREX_CONSUMER_TSAN=ON \
        -DCMAKE_PREFIX_PATH="$prefix" -DBUILD_SHARED_LIBS=OFF &&
        cmake --build "$dir" -j "$jobs" || return 1
    is_tsan "$dir/consumer" ||
        { echo "serex::tsan did not bring -fsanitize=thread"; return 1; }
    if needs_libserex "$dir/consumer"; then
        echo "loads libserex.so: expected libserex-tsan.a"
        return 1
    fi
    tsan_clean "$dir/run.log" "$dir/consumer"
}

# tsan_pkg_config: cc main.c $(pkg-config --cflags --libs serex-tsan).
tsan_pkg_config() {
    local flags bin=$work/pc-tsan-consumer
    local -x PKG_CONFIG_PATH="$libdir/pkgconfig"
    flags=$(pkg-config --cflags --libs serex-tsan) || return 1
    echo "pkg-config --cflags --libs serex-tsan: $flags"
    # shellcheck disable=SC2086 # $flags is a list of words by design
    "$tsan_cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -g \
        "$consumer/main.c" -o "$bin" $flags -Wl,-rpath,"$libdir" || return 1
    readelf -d "$bin" | grep -q 'NEEDED.*\[libserex-tsan\.so' ||
        { echo "does not load libserex-tsan.so"; return 1; }
    ! needs_libserex "$bin" || { echo "loads the plain libserex.so"; return 1; }
    tsan_clean "$work/pc-tsan.log" "$bin"
}

# tsan_canary: a racy program against the installed variant must be
# reported, or a clean run above would prove nothing.
tsan_canary() {
    local flags bin=$work/tsan-canary
    local -x PKG_CONFIG_PATH="$libdir/pkgconfig"
    cat >"$bin.c" <<'EOF'
#include <serex/serex.h>
#include <stdatomic.h>
/* Written by main after its submit, then by the pool's task once a
 * relaxed flag says main wrote: relaxed atomics order nothing, and main
 * does nothing between its write and the flag, nor the task between the
 * flag and its write, so this is a data race in every interleaving, and
 * TSan must say so. (The other way round, main writing last, a worker
 * that ran the task and parked before main's submit woke it would have
 * released the pool's mutex for main's wake-up to acquire: ordered, no
 * race, a canary that sometimes stays quiet.) */
static long n;
static atomic_int wrote, done;
static void bump(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&wrote, memory_order_relaxed))
        ;
    n++;
    atomic_store_explicit(&done, 1, memory_order_relaxed);
}
int main(void)
{
    serex_executor *pool;
    if (serex_pool_create(NULL, &pool) != SEREX_OK ||
        serex_execute(pool, bump, NULL) != SEREX_OK)
        return 1;
    n++;
    atomic_store_explicit(&wrote, 1, memory_order_relaxed);
    while (!atomic_load_explicit(&done, memory_order_relaxed))
        ;
    return serex_destroy(pool) == SEREX_OK && n == 2 ? 0 : 1;
}
EOF
    flags=$(pkg-config --cflags --libs serex-tsan-static) || return 1
    # shellcheck disable=SC2086 # $flags is a list of words by design
    "$tsan_cc" -std=c11 -g "$bin.c" -o "$bin" $flags || return 1
    if timeout 120 "${tsan_run[@]+"${tsan_run[@]}"}" "$bin" >"$bin.log" 2>&1; then
        echo "a racy program ran clean: ThreadSanitizer is not watching"
        return 1
    fi
    grep -q 'WARNING: ThreadSanitizer: data race' "$bin.log" ||
        { cat "$bin.log"; echo "failed, but not with a race report"; return 1; }
    echo "the race was reported, as it must be"
}

# tsan_dropin: the consumer (unchanged: <serex/serex.h> through -I) and
# the drop-in's serex.c, both with -fsanitize=thread: serex.c must pick
# POSIX threads by itself.
tsan_dropin() {
    local bin=$work/dropin-tsan-consumer
    [ -f "$dropin/serex.c" ] || { echo "no drop-in in $dropin"; return 1; }
    "$tsan_cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -g \
        -fsanitize=thread -pthread -I"$dropin" "$consumer/main.c" \
        "$dropin/serex.c" -o "$bin" || return 1
    tsan_clean "$bin.log" "$bin"
}

if [ -n "$tsan_cc" ]; then
    check "TSan canary: a racy program against serex-tsan-static is reported" \
        tsan_canary
    check "TSan, add_subdirectory, -DCMAKE_C_FLAGS=-fsanitize=thread: POSIX back end, clean run" \
        tsan_subdirectory "$work/tsan-sub-flags" -DCMAKE_C_FLAGS=-fsanitize=thread
    check "TSan, add_subdirectory after add_compile_options(-fsanitize=thread): clean run" \
        tsan_subdirectory "$work/tsan-sub-options" -DSEREX_CONSUMER_TSAN=ON
    check "TSan, find_package(serex COMPONENTS tsan) -> serex::tsan: clean run" \
        tsan_find_package "$work/tsan-fp"
    check "TSan, cc main.c \$(pkg-config --cflags --libs serex-tsan): clean run" \
        tsan_pkg_config
    check "TSan, two-file drop-in: cc -fsanitize=thread main.c serex.c: clean run" \
        tsan_dropin
fi

# ---- 5b. AddressSanitizer in the user's application ---------------------------
# asan_clean LOG CMD...: run CMD under ASan+UBSan; fail on a report or a
# non-zero exit.
asan_clean() {
    local log=$1
    shift
    if ! timeout 120 "$@" >"$log" 2>&1; then
        cat "$log"
        echo "failed under AddressSanitizer"
        return 1
    fi
    cat "$log"
    if grep -q 'Sanitizer' "$log"; then
        echo "a sanitizer reported something"
        return 1
    fi
    echo "AddressSanitizer: clean"
}

# asan_canary: a heap overflow built with serex-asan-static's flags and
# nothing else must be reported: the variant's .pc brings the sanitizer
# to the user's program, or the clean runs below would prove nothing.
asan_canary() {
    local flags bin=$work/asan-canary
    local -x PKG_CONFIG_PATH="$libdir/pkgconfig"
    cat >"$bin.c" <<'EOF'
#include <serex/serex.h>
#include <stdlib.h>
/* One int past a heap block, written by a pool task: ASan must say so. */
static void overflow(void *arg)
{
    ((volatile int *)arg)[4] = 1;
}
int main(void)
{
    serex_executor *pool;
    int *p = malloc(4 * sizeof *p);
    if (p == NULL || serex_pool_create(NULL, &pool) != SEREX_OK ||
        serex_execute(pool, overflow, p) != SEREX_OK)
        return 1;
    serex_destroy(pool);
    free(p);
    return 0;
}
EOF
    flags=$(pkg-config --cflags --libs serex-asan-static) || return 1
    echo "pkg-config --cflags --libs serex-asan-static: $flags"
    # shellcheck disable=SC2086 # $flags is a list of words by design
    "$asan_cc" -std=c11 -g "$bin.c" -o "$bin" $flags || return 1
    if timeout 120 "$bin" >"$bin.log" 2>&1; then
        echo "a heap overflow ran clean: AddressSanitizer is not watching"
        return 1
    fi
    grep -q 'ERROR: AddressSanitizer: heap-buffer-overflow' "$bin.log" ||
        { cat "$bin.log"; echo "failed, but not with an ASan report"; return 1; }
    echo "the overflow was reported, as it must be"
}

# asan_find_package DIR: serex::asan from the installed variant.
asan_find_package() {
    local dir=$1
    cmake -S "$consumer" -B "$dir" -DCMAKE_C_COMPILER="$asan_cc" \
        -DSEREX_CONSUMER_MODE=find_package -DSEREX_CONSUMER_ASAN=ON \
        -DCMAKE_PREFIX_PATH="$prefix" -DBUILD_SHARED_LIBS=OFF &&
        cmake --build "$dir" -j "$jobs" || return 1
    is_asan "$dir/consumer" ||
        { echo "serex::asan did not bring -fsanitize=address"; return 1; }
    if needs_libserex "$dir/consumer"; then
        echo "loads libserex.so: expected libserex-asan.a"
        return 1
    fi
    asan_clean "$dir/run.log" "$dir/consumer"
}

# asan_pkg_config: cc main.c $(pkg-config --cflags --libs serex-asan).
asan_pkg_config() {
    local flags bin=$work/pc-asan-consumer
    local -x PKG_CONFIG_PATH="$libdir/pkgconfig"
    flags=$(pkg-config --cflags --libs serex-asan) || return 1
    echo "pkg-config --cflags --libs serex-asan: $flags"
    # shellcheck disable=SC2086 # $flags is a list of words by design
    "$asan_cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -g \
        "$consumer/main.c" -o "$bin" $flags -Wl,-rpath,"$libdir" || return 1
    readelf -d "$bin" | grep -q 'NEEDED.*\[libserex-asan\.so' ||
        { echo "does not load libserex-asan.so"; return 1; }
    ! needs_libserex "$bin" || { echo "loads the plain libserex.so"; return 1; }
    asan_clean "$work/pc-asan.log" "$bin"
}

if [ -n "$asan_cc" ]; then
    check "ASan canary: a heap overflow built with serex-asan-static's flags alone is reported" \
        asan_canary
    check "ASan, find_package(serex COMPONENTS asan) -> serex::asan: clean run" \
        asan_find_package "$work/asan-fp"
    check "ASan, cc main.c \$(pkg-config --cflags --libs serex-asan): clean run" \
        asan_pkg_config
fi

# ---- 6. symbols -----------------------------------------------------------------
# Linker-defined symbols some toolchains put in the dynamic table.
linker_syms='^(_init|_fini|__bss_start|__bss_start__|__bss_end__|_bss_end__|_edata|_end|__end__)$'

shared_exports_only_api() {
    local syms bad
    syms=$(nm -D --defined-only "$so" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }')
    echo "$(echo "$syms" | grep -c '^serex_') serex_* symbols exported by ${so##*/}"
    [ -n "$syms" ] || { echo "no exported symbols at all"; return 1; }
    bad=$(echo "$syms" | grep -Ev '^serex_[a-z0-9]' | grep -Ev "$linker_syms" || true)
    if [ -n "$bad" ]; then
        echo "exported but not public serex_* API:"
        echo "$bad"
        return 1
    fi
}

api_all_exported() {
    local declared missing
    # The name before the first '(' of every "SEREX_API ... name(" in
    # include/, once comments and preprocessor lines are gone.
    declared=$(cat "$src"/include/serex/*.h |
        perl -0777 -pe 's{/\*.*?\*/}{ }gs' | grep -v '^[[:space:]]*#' |
        tr '\n' ' ' | grep -oE 'SEREX_API[^;(]*\(' |
        grep -oE 'serex_[a-z0-9_]+ *\($' | tr -d ' (' | sort -u)
    echo "$(echo "$declared" | grep -c .) SEREX_API functions declared in include/"
    missing=$(comm -23 <(echo "$declared") <(nm -D --defined-only "$so" |
        awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' | sort -u))
    if [ -n "$missing" ]; then
        echo "declared SEREX_API but not exported by ${so##*/}:"
        echo "$missing"
        return 1
    fi
}

static_namespace_clean() {
    local bad
    # _.stapsdt.base: <sys/sdt.h>'s own anchor of the probes' notes (weak,
    # hidden: one per program, shared by every library's probes)
    bad=$(nm -g --defined-only "$libdir/libserex.a" |
        awk 'NF >= 3 { print $3 }' | grep -v '^serex_' |
        grep -vx '_\.stapsdt\.base' || true)
    if [ -n "$bad" ]; then
        echo "global symbols of libserex.a outside the serex_ namespace:"
        echo "$bad"
        return 1
    fi
    echo "every global symbol of libserex.a starts with serex_"
}

check "libserex.so exports only serex_* (no serex__*, nothing else)" \
    shared_exports_only_api
check "libserex.so exports every SEREX_API function of include/serex" \
    api_all_exported
check "libserex.a defines globals only in the serex_ namespace" \
    static_namespace_clean

# ---- summary -------------------------------------------------------------------
if [ "$keep" = 1 ]; then
    echo "work directory kept: $work"
fi
for f in "${skipped[@]+"${skipped[@]}"}"; do
    echo "skipped: $f"
done
for f in "${failures[@]+"${failures[@]}"}"; do
    echo "failed: $f"
done
echo "consumer checks: $passed passed, $failed failed, ${#skipped[@]} skipped"
[ "$failed" -eq 0 ]
