# SPDX-License-Identifier: MIT
# plot_colours.sh - sourced by bench/plots.sh and bench/sweep_plot.sh: one
# colour per implementation, so a peer looks the same in every plot of
# docs/BENCHMARKS.md and docs/scaling.md, and pick_colour for one not
# listed (from a spare palette, in order of first use).
# shellcheck shell=bash
declare -A colour=(
    [serex]="#d95f02" [asio]="#1b9e77" [cthreadpool]="#7570b3"
    [libuv]="#e7298a" [tbb]="#66a61e" [jdk-tpe]="#e6ab02"
    [jdk-serial]="#a6761d" [striped-map]="#666666" [jdk-stpe]="#1f78b4"
    [netty-hwt]="#a6cee3" [tokio]="#17becf" [tokio-spawn]="#fb9a99"
    [tokio-delayqueue]="#cab2d6" [caf]="#6a3d9a" [serex-nogroup]="#fdbf6f"
)
spare=("#b15928" "#b2df8a" "#ff7f00" "#33a02c" "#e31a1c" "#ffff99")
nspare=0
pick_colour() { # impl: colour[impl] set (not in a subshell, so it sticks)
    if [ -z "${colour[$1]:-}" ]; then
        colour[$1]="${spare[$((nspare % ${#spare[@]}))]}"
        nspare=$((nspare + 1))
    fi
}
