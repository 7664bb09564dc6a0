#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# check_consumers.sh - prove the three ways users consume serex, and that the
# shared library exports nothing but the public serex_* API.
#
#   1. install serex into a temporary prefix (cmake --install);
#   2. build and run examples/consumer with find_package(serex), shared and
#      static (BUILD_SHARED_LIBS=ON/OFF picks what serex::serex means);
#   3. build and run it with add_subdirectory(<serex source>), both ways;
#   4. build and run it with plain cc and pkg-config;
#   5. check the symbols: libserex.so exports only serex_* (never serex__*),
#      every SEREX_API function in include/ is exported, and every global
#      symbol of libserex.a is in the serex_ namespace.
#
# Usage: scripts/check_consumers.sh [--keep]
#   --keep   keep the work directory (printed at the end)
# Environment: CC (default cc), SEREX_JOBS (default 2),
#   SEREX_CONSUMER_WORK_DIR (default: a fresh mktemp -d, removed at exit).
# Exits 0 when every check passed, 1 otherwise.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$src/scripts/lib.sh"
jobs=${SEREX_JOBS:-2}
cc=${CC:-cc}
keep=0
for arg in "$@"; do
    case $arg in
    --keep) keep=1 ;;
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

for tool in cmake pkg-config nm readelf "$cc"; do
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
check "install tree has headers, libraries, CMake package and serex.pc" \
    installed_files_present

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

# ---- 5. symbols -----------------------------------------------------------------
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
    bad=$(nm -g --defined-only "$libdir/libserex.a" |
        awk 'NF >= 3 { print $3 }' | grep -v '^serex_' || true)
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
for f in "${failures[@]+"${failures[@]}"}"; do
    echo "failed: $f"
done
echo "consumer checks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
