# shellcheck shell=bash
# SPDX-License-Identifier: MIT
# lib.sh - what serex's scripts share; sourced, never run.

# usage SCRIPT: print SCRIPT's help, the comment block under its first
# three lines (shebang, licence, blank comment).
usage() {
    awk 'NR > 3 && !/^#/ { exit } NR > 3 { sub(/^# ?/, ""); print }' "$1"
}
