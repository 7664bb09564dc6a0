#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# check_format.sh - check the C layout with clang-format (.clang-format at
# the top of the tree), without asking anyone to reformat old code.
#
# What it checks, with clang-format --dry-run -Werror:
#   1. every file listed in scripts/format-files.txt, whole: the files that
#      are clean and must stay so. The list only grows: add a file once it
#      is clean (--suggest prints the candidates);
#   2. the C files (.c, .h, .cpp) changed since a base commit, in the lines
#      that changed only (clang-format --lines), so new code is formatted
#      and the old lines around it are left alone; a new file is all
#      changed lines. --whole checks these files whole instead.
# The base, first found of:
#   --base REF, or the environment variable SEREX_FORMAT_BASE;
#   the commit named in scripts/format-base (first line that is not a
#      comment), if that file exists and the commit is in this clone;
#   git merge-base HEAD origin/main, if origin/main exists.
# With none (a clean clone of main with no remote branch, a shallow clone
# without the commit), only the list is checked. The changed lines are
# those of `git diff <merge-base of base and HEAD>` against the work tree,
# so uncommitted edits count too.
# Skips (exit 0, with a message) when clang-format 14 or newer is missing:
# the layout is not worth failing a build on a machine without it. The
# config was tuned with clang-format 14 (Debian 12); clang-format-14 is
# preferred when several are installed.
#
# Usage: scripts/check_format.sh [--base REF] [--whole] [--list] [--suggest]
#   --base REF  compare with REF instead of the default base (above)
#   --whole     check changed files whole, not only their changed lines
#   --list      print what would be checked and exit
#   --suggest   print C files of src/ include/ tests/ examples/ bench/ that
#               are clean but not yet in scripts/format-files.txt, and exit
# Environment: CLANG_FORMAT (the binary to use), SEREX_FORMAT_BASE.
# Exits 0 when every checked file or line is formatted (or clang-format is
# missing), 1 when clang-format would change something, 2 on a bad argument
# or base.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$src/scripts/lib.sh"
cd "$src"

list_file=scripts/format-files.txt
base_file=scripts/format-base
base=${SEREX_FORMAT_BASE:-}
whole=0
mode=check
while [ $# -gt 0 ]; do
    case $1 in
    --base)
        [ $# -ge 2 ] || { echo "check_format.sh: --base needs a REF" >&2; exit 2; }
        base=$2
        shift
        ;;
    --whole) whole=1 ;;
    --list) mode=list ;;
    --suggest) mode=suggest ;;
    -h | --help)
        usage "${BASH_SOURCE[0]}"
        exit 0
        ;;
    *)
        echo "check_format.sh: unknown argument '$1' (try --help)" >&2
        exit 2
        ;;
    esac
    shift
done

# ---- clang-format: 14 or newer, else skip ------------------------------------
cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
    for c in clang-format-14 clang-format; do
        if command -v "$c" >/dev/null 2>&1; then
            cf=$c
            break
        fi
    done
fi
if [ -z "$cf" ] || ! command -v "$cf" >/dev/null 2>&1; then
    echo "check_format: clang-format not found; skipped (apt-get install clang-format)"
    exit 0
fi
cf_major=$("$cf" --version | sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p' | head -n 1)
if [ -z "$cf_major" ] || [ "$cf_major" -lt 14 ]; then
    echo "check_format: $cf is version ${cf_major:-unknown}, 14 or newer needed; skipped"
    exit 0
fi

is_c_file() {
    case $1 in
    *.c | *.h | *.cpp) return 0 ;;
    *) return 1 ;;
    esac
}

# ---- the list: files that must be clean, whole --------------------------------
listed=()
if [ -f "$list_file" ]; then
    while IFS= read -r line || [ -n "$line" ]; do
        line=${line%%#*}
        line=$(echo "$line" | tr -d '[:space:]')
        [ -n "$line" ] || continue
        if [ -f "$line" ]; then
            listed+=("$line")
        else
            echo "check_format: $list_file names $line, which does not exist; skipped"
        fi
    done <"$list_file"
fi

in_list() {
    local f
    for f in "${listed[@]+"${listed[@]}"}"; do
        [ "$f" = "$1" ] && return 0
    done
    return 1
}

clean() {
    "$cf" --style=file --dry-run -Werror "$1" >/dev/null 2>&1
}

if [ "$mode" = suggest ]; then
    { git ls-files -- src include tests examples bench
      git ls-files --others --exclude-standard -- src include tests examples bench
    } | sort -u | while IFS= read -r f; do
        { is_c_file "$f" && [ -f "$f" ]; } || continue
        in_list "$f" && continue
        clean "$f" && echo "$f"
    done
    exit 0
fi

# ---- the base and the files changed since it ----------------------------------
has_commit() {
    git rev-parse --verify --quiet "$1^{commit}" >/dev/null 2>&1
}

base_from=""
if [ -n "$base" ]; then
    if ! has_commit "$base"; then
        echo "check_format.sh: base '$base' is not a commit of this clone" >&2
        exit 2
    fi
    base_from="given"
elif [ -f "$base_file" ]; then
    b=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$base_file" | grep -m 1 . || true)
    if [ -n "$b" ] && has_commit "$b"; then
        base=$b
        base_from=$base_file
    elif [ -n "$b" ]; then
        echo "check_format: $base_file names $b, not in this clone (shallow?)"
    fi
fi
if [ -z "$base" ] && has_commit origin/main; then
    base=origin/main
    base_from="origin/main"
fi

changed=()
from=""
if [ -n "$base" ]; then
    from=$(git merge-base "$base" HEAD 2>/dev/null || true)
    if [ -z "$from" ]; then
        echo "check_format.sh: no merge base of $base and HEAD" >&2
        exit 2
    fi
    while IFS= read -r f; do
        { is_c_file "$f" && [ -f "$f" ]; } || continue
        in_list "$f" && continue # checked whole anyway
        changed+=("$f")
    done < <(git diff --name-only --diff-filter=ACMR "$from" --)
fi

# The changed lines of $1 since $from, as clang-format --lines=N:M options.
line_ranges() {
    git diff -U0 --no-color "$from" -- "$1" |
        sed -n 's/^@@ -[0-9,]* +\([0-9]*\)\(,\([0-9]*\)\)\{0,1\} @@.*/\1 \3/p' |
        while read -r start count; do
            count=${count:-1}
            [ "$count" -gt 0 ] || continue # a deletion: no new line
            echo "--lines=$start:$((start + count - 1))"
        done
}

if [ -n "$base" ]; then
    echo "check_format: $cf (version $cf_major); ${#listed[@]} listed files whole;" \
        "${#changed[@]} files changed since $base ($base_from, from ${from:0:12})" \
        "$([ "$whole" = 1 ] && echo whole || echo 'in their changed lines')"
else
    echo "check_format: $cf (version $cf_major); ${#listed[@]} listed files whole;" \
        "no base (no $base_file, no origin/main): changed files not checked"
fi

if [ "$mode" = list ]; then
    for f in "${listed[@]+"${listed[@]}"}"; do
        echo "whole    $f"
    done
    for f in "${changed[@]+"${changed[@]}"}"; do
        if [ "$whole" = 1 ]; then
            echo "whole    $f"
        else
            echo "changed  $f $(line_ranges "$f" | tr '\n' ' ')"
        fi
    done
    exit 0
fi

# ---- check ------------------------------------------------------------------
bad=()
for f in "${listed[@]+"${listed[@]}"}"; do
    "$cf" --style=file --dry-run -Werror "$f" || bad+=("$f")
done
for f in "${changed[@]+"${changed[@]}"}"; do
    if [ "$whole" = 1 ]; then
        "$cf" --style=file --dry-run -Werror "$f" || bad+=("$f")
        continue
    fi
    ranges=()
    while IFS= read -r r; do
        ranges+=("$r")
    done < <(line_ranges "$f")
    [ ${#ranges[@]} -gt 0 ] || continue
    "$cf" --style=file --dry-run -Werror "${ranges[@]}" "$f" || bad+=("$f")
done

if [ ${#bad[@]} -gt 0 ]; then
    echo "check_format: not formatted: ${bad[*]}"
    echo "  fix a listed file with: $cf --style=file -i FILE"
    if [ -n "$from" ]; then
        echo "  format only your changed lines with: git clang-format $from"
    fi
    exit 1
fi
echo "check_format: formatted"
