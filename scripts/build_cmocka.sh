#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# build_cmocka.sh - build cmocka for a target that Debian does not package it
# for (musl, mingw-w64), from Debian's own cmocka source package.
#
# Usage: scripts/build_cmocka.sh TOOLCHAIN_FILE PREFIX [CMAKE ARGS...]
# Builds cmocka's static library (lib/libcmocka-static.a) and header into
# PREFIX with CMake and TOOLCHAIN_FILE. Does nothing when PREFIX already holds
# a build from the same source and toolchain file (a stamp file says so).
#
# The source is Debian's (apt-get source --download-only cmocka: cmocka
# 1.1.5 on Debian 12), kept in SEREX_CMOCKA_SRC_DIR (default: cmocka-src
# beside PREFIX) so it is downloaded once. When apt has no deb-src entry,
# run as root this script adds one (/etc/apt/sources.list.d/
# serex-deb-src.sources, the same URIs and suites as the machine's Debian
# source list) and runs apt-get update once; not root, it prints what to do.
# Environment: SEREX_JOBS (default 2).
set -euo pipefail

if [ "$#" -lt 2 ]; then
    echo "usage: scripts/build_cmocka.sh TOOLCHAIN_FILE PREFIX [CMAKE ARGS...]" >&2
    exit 2
fi
toolchain=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
prefix=$2
shift 2
jobs=${SEREX_JOBS:-2}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
srcdir=${SEREX_CMOCKA_SRC_DIR:-$(dirname "$prefix")/cmocka-src}
mkdir -p "$srcdir"
deb_src_file=/etc/apt/sources.list.d/serex-deb-src.sources

tarball() {
    find "$srcdir" -maxdepth 1 -name 'cmocka_*.orig.tar.*' ! -name '*.asc' |
        sort | tail -n 1
}

# Writes a deb-src twin of the machine's Debian source list.
add_deb_src() {
    local f
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        sed 's/^Types:.*/Types: deb-src/' \
            /etc/apt/sources.list.d/debian.sources >"$deb_src_file"
    elif [ -f /etc/apt/sources.list ] &&
        grep -q '^deb[[:space:]]' /etc/apt/sources.list; then
        f=/etc/apt/sources.list.d/serex-deb-src.list
        sed -n 's/^deb[[:space:]]/deb-src /p' /etc/apt/sources.list >"$f"
    else
        echo "build_cmocka.sh: no Debian source list found to copy" >&2
        return 1
    fi
}

download_source() {
    (cd "$srcdir" && apt-get source --download-only cmocka) >/dev/null 2>&1
}

get_source() {
    [ -n "$(tarball)" ] && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "build_cmocka.sh: no apt-get: put cmocka's source tarball" \
            "(cmocka_<version>.orig.tar.xz) into $srcdir" >&2
        return 1
    fi
    if ! download_source; then
        if [ "$(id -u)" != 0 ]; then
            echo "build_cmocka.sh: apt-get source cmocka failed: apt has no" \
                "deb-src entry. As root, add one (a copy of your Debian" \
                "source list with 'Types: deb-src'), run apt-get update," \
                "or run scripts/test.sh as root, which does it." >&2
            return 1
        fi
        echo "build_cmocka.sh: adding deb-src ($deb_src_file), apt-get update"
        add_deb_src || return 1
        # An index that fails to download (a mirror mid-sync) makes
        # apt-get update fail as a whole: what matters is the source below.
        apt-get update >/dev/null 2>&1 || true
        if ! download_source; then
            echo "build_cmocka.sh: apt-get source --download-only cmocka" \
                "failed even with deb-src entries:" >&2
            (cd "$srcdir" && apt-get source --download-only cmocka) >&2 || true
            return 1
        fi
    fi
    [ -n "$(tarball)" ] || {
        echo "build_cmocka.sh: no cmocka_*.orig.tar.* in $srcdir" >&2
        return 1
    }
}

get_source
tar=$(tarball)
stamp="$(basename "$tar") $(sha256sum "$toolchain" | cut -d' ' -f1) $*"
if [ -f "$prefix/lib/libcmocka-static.a" ] &&
    [ "$(cat "$prefix/.serex-cmocka-stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "build_cmocka.sh: cmocka already built in $prefix"
    exit 0
fi

work=$prefix.build
rm -rf "$work" "$prefix"
mkdir -p "$work/src" "$prefix"
tar -xf "$tar" -C "$work/src" --strip-components=1
echo "build_cmocka.sh: building $(basename "$tar") into $prefix"
if ! {
    cmake -S "$work/src" -B "$work/build" \
        -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
        -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
        -DCMAKE_BUILD_TYPE=Release -DWITH_STATIC_LIB=ON \
        -DWITH_EXAMPLES=OFF -DUNIT_TESTING=OFF "$@" &&
        cmake --build "$work/build" -j "$jobs" &&
        cmake --install "$work/build"
} >"$work/build.log" 2>&1; then
    echo "build_cmocka.sh: building cmocka failed; the log:" >&2
    tail -n 40 "$work/build.log" >&2
    exit 1
fi
[ -f "$prefix/lib/libcmocka-static.a" ] || {
    echo "build_cmocka.sh: no lib/libcmocka-static.a after the install" >&2
    exit 1
}
echo "$stamp" >"$prefix/.serex-cmocka-stamp"
rm -rf "$work"
