#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# amalgamate.sh - write serex as two files, as SQLite ships itself:
#   DIR/serex.h  every public header of include/serex/, in dependency order,
#                under one include guard
#   DIR/serex.c  the platform layer's feature macros (hoisted from the
#                prologue of src/thread_unix.c, before every system header),
#                then #include "serex.h", every src/*_internal.h once (each
#                before its users), and every src/*.c, each followed by an
#                #undef of the macros it defined
# so that any build system compiles serex with one command:
#   cc -std=c11 -c serex.c            (add -pthread on Unix)
# and, beside them, DIR/serex/serex.h: one line, #include "../serex.h", so
# that a program written against the install (#include <serex/serex.h>)
# builds against the drop-in too, with -IDIR; the two files alone serve a
# program that includes "serex.h".
#
# Static names that two src/*.c files both define at file scope (functions,
# variables, struct/union/enum tags, enum constants, typedefs) would clash
# in one translation unit, and one file's static that a later file uses for
# a local or parameter would draw -Wshadow. The script finds both, lists
# them on stderr, and renames them in the amalgamated text only (NAME ->
# <file stem>_NAME; src/ is never touched); --strict fails instead. Macros
# need no renaming: each file's are #undef'd after it. The result is then
# compiled as a self-check with -Wall -Wextra -Wpedantic -Wshadow -Werror
# (and again with -DNDEBUG); the script fails if it does not compile
# cleanly. Files only one platform compiles (thread_win.c) are inventoried
# from their text but compiled only by that platform's build.
#
# Usage: scripts/amalgamate.sh [--out DIR] [--check] [--strict] [--no-compile]
#   --out DIR     where to write serex.c, serex.h and serex/serex.h (default:
#                 <repo>/dist); the two files are all a drop-in build needs
#   --check       also build examples/demo.c from the two files alone with
#                 cc -std=c11 -Wall -Wextra -Wpedantic -Werror -pthread, and
#                 run it: once including "serex.h", once as it is
#                 (<serex/serex.h>, found through -IDIR)
#   --strict      fail (exit 3, nothing written) when a name needs a rename
#   --no-compile  skip the self-check compile (e.g. no host compiler)
# Environment: CC (default cc) for the self-check and --check (a cross
#   compiler works for the self-check, which only compiles). Needs perl.
# Exits 0 on success, 1 when the self-check or --check fails, 2 on bad
# usage, 3 for --strict with names to rename.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$src/scripts/lib.sh"
out=$src/dist
check=0 strict=0 compile=1
cc=${CC:-cc}
while [ "$#" -gt 0 ]; do
    case $1 in
    --out)
        [ "$#" -ge 2 ] || { echo "amalgamate.sh: --out needs a directory" >&2; exit 2; }
        out=$2
        shift
        ;;
    --out=*) out=${1#--out=} ;;
    --check) check=1 ;;
    --strict) strict=1 ;;
    --no-compile) compile=0 ;;
    -h | --help)
        usage "${BASH_SOURCE[0]}"
        exit 0
        ;;
    *)
        echo "amalgamate.sh: unknown option '$1' (try --help)" >&2
        exit 2
        ;;
    esac
    shift
done
if [ "$check" = 1 ] && [ "$compile" = 0 ]; then
    echo "amalgamate.sh: --check needs a compiler: drop --no-compile" >&2
    exit 2
fi
command -v perl >/dev/null 2>&1 || { echo "amalgamate.sh: perl is missing" >&2; exit 2; }
if [ "$compile" = 1 ] && ! command -v "$cc" >/dev/null 2>&1; then
    echo "amalgamate.sh: '$cc' is missing (set CC, or pass --no-compile)" >&2
    exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The sources in the order of SEREX_SOURCES in CMakeLists.txt (base, platform,
# core, components); any other src/*.c after them, by name.
sources=$(sed -n '/^set(SEREX_SOURCES/,/)/p' "$src/CMakeLists.txt" |
    grep -oE 'src/[A-Za-z0-9_]+\.c' || true)
for f in "$src"/src/*.c; do
    rel=src/${f##*/}
    if ! printf '%s\n' "$sources" | grep -qxF "$rel"; then
        sources=$(printf '%s\n%s' "$sources" "$rel")
    fi
done

# ---- the text: perl writes serex.h and serex.c --------------------------------
set +e
# shellcheck disable=SC2086 # $sources is a list of paths without spaces
perl - "$src" "$out" "$strict" $sources <<'PERL'
use strict;
use warnings;

my ($root, $out, $strict, @sources) = @ARGV;
my $inc = "$root/include/serex";

sub slurp {
    my $f = shift;
    open my $fh, '<', $f or die "amalgamate.sh: $f: $!\n";
    local $/;
    my $t = <$fh>;
    close $fh;
    $t .= "\n" unless $t =~ /\n\z/;
    return $t;
}

sub spew {
    my ($f, $t) = @_;
    open my $fh, '>', "$f.tmp" or die "amalgamate.sh: $f.tmp: $!\n";
    print $fh $t;
    close $fh or die "amalgamate.sh: $f.tmp: $!\n";
    rename "$f.tmp", $f or die "amalgamate.sh: $f: $!\n";
}

# #if/#endif depth a text leaves open (negative: closes more than it opens).
sub cond_depth {
    my $t = shift;
    my $d = 0;
    for my $l (split /\n/, $t) {
        $d++ if $l =~ /^\s*#\s*if/;
        $d-- if $l =~ /^\s*#\s*endif\b/;
    }
    return $d;
}

my $version = slurp("$inc/version.h") =~ /#\s*define\s+SEREX_VERSION_STRING\s+"([^"]+)"/
    ? $1 : die "amalgamate.sh: no SEREX_VERSION_STRING in include/serex/version.h\n";

# ---- serex.h -----------------------------------------------------------------
my (%pub_seen, @pub);
sub pub_visit {
    my $h = shift;
    return if $pub_seen{$h}++;
    for my $d (slurp("$inc/$h") =~ /^\s*#\s*include\s+"([^"]+)"/mg) {
        (my $n = $d) =~ s{^serex/}{};
        die "amalgamate.sh: include/serex/$h includes \"$d\", not a public header\n"
            unless -f "$inc/$n";
        pub_visit($n);
    }
    push @pub, $h;
}
pub_visit('serex.h');
pub_visit($_) for sort map { (my $b = $_) =~ s{.*/}{}; $b } glob("$inc/*.h");

my (@guards, $hbody);
for my $h (@pub) {
    my $t = slurp("$inc/$h");
    $t =~ s/^\s*#\s*ifndef\s+(\w+)[ \t]*\n\s*#\s*define\s+\1[ \t]*\n//m
        or die "amalgamate.sh: include/serex/$h: no #ifndef/#define guard\n";
    push @guards, $1;
    $t =~ s/^\s*#\s*endif\b[^\n]*\n(?![\s\S]*^\s*#\s*endif\b)//m
        or die "amalgamate.sh: include/serex/$h: no closing #endif\n";
    $t =~ s/^[ \t]*#[ \t]*include[ \t]+"[^"]*"[^\n]*\n//mg;
    die "amalgamate.sh: include/serex/$h: unbalanced #if once its guard is gone\n"
        if cond_depth($t) != 0;
    $t =~ s/\n{3,}/\n\n/g;
    $hbody .= "\n/* ---- include/serex/$h ---- */\n$t";
}

my $header = <<"EOF";
/* SPDX-License-Identifier: MIT */
/*
 * serex.h - serex $version, amalgamated: every public header of
 * include/serex/ in one file. Generated by scripts/amalgamate.sh from the
 * serex sources; do not edit (edit include/serex/ and regenerate).
 *
 * Use with serex.c, its companion: compile serex.c with your program
 * (cc -std=c11 -c serex.c, plus -pthread on Unix) and include "serex.h"
 * where you would include <serex/serex.h>; or keep serex/serex.h, written
 * beside this file, and build with -I<this directory>: then
 * #include <serex/serex.h> works unchanged, as with an installed serex.
 */
#ifndef SEREX_AMALGAMATION_H
#define SEREX_AMALGAMATION_H

/* The include guards of the headers inlined below: including one of them
 * as well (<serex/pool.h>) adds nothing. */
EOF
$header .= "#define $_\n" for @guards;
$header .= <<'EOF';

/* Compiled into your program, not a DLL: no dllimport on Windows. Define
 * SEREX_DLL (for serex.c and its users) to build a DLL of it instead. */
#if !defined(SEREX_STATIC) && !defined(SEREX_DLL)
#  define SEREX_STATIC 1
#endif
EOF
$header .= $hbody . "\n#endif /* SEREX_AMALGAMATION_H */\n";

# ---- serex.c: read the sources ---------------------------------------------
my %internal;    # name -> text
for my $f (glob("$root/src/*_internal.h")) {
    (my $n = $f) =~ s{.*/}{};
    $internal{$n} = slurp($f);
}

# Checks every quoted #include of a src/ file; returns the internal headers
# it names, in order.
sub internal_deps {
    my ($file, $t) = @_;
    my @deps;
    for my $d ($t =~ /^\s*#\s*include\s+"([^"]+)"/mg) {
        if (exists $internal{$d}) {
            push @deps, $d;
        } elsif ($d =~ m{^serex/(.+)$} && -f "$inc/$1") {
            # in serex.h
        } else {
            die "amalgamate.sh: $file includes \"$d\": neither a src/*_internal.h"
                . " nor a public serex/ header\n";
        }
    }
    return @deps;
}

sub drop_quoted_includes {
    my $t = shift;
    $t =~ s/^[ \t]*#[ \t]*include[ \t]+"[^"]*"[^\n]*\n//mg;
    return $t;
}

my (%seen_h, @hdr_order);
sub hdr_visit {
    my $h = shift;
    return if $seen_h{$h};
    $seen_h{$h} = 1;
    hdr_visit($_) for internal_deps("src/$h", $internal{$h});
    push @hdr_order, $h;
}

my (%csrc, @cfiles);
for my $rel (@sources) {
    die "amalgamate.sh: $rel is listed in CMakeLists.txt but missing\n" unless -f "$root/$rel";
    (my $base = $rel) =~ s{.*/}{};
    $csrc{$base} = slurp("$root/$rel");
    push @cfiles, $base;
    hdr_visit($_) for internal_deps($rel, $csrc{$base});
}
hdr_visit($_) for sort keys %internal;    # any that no .c includes

# ---- the prologue: feature macros before the first #include -----------------
# A .c file's lines before its first #include that #define a macro (the
# platform layer's _GNU_SOURCE / _DARWIN_C_SOURCE) go to the very top of
# serex.c, before any system header, with the conditionals they sit in.
my ($hoisted, %prologue_macros) = ('');
for my $c (@cfiles) {
    my ($pro) = $csrc{$c} =~ /\A((?:(?!^[ \t]*#[ \t]*include)[^\n]*\n)*)/m;
    next unless $pro =~ /^[ \t]*#[ \t]*define/m;
    $pro =~ s/\\\n/\x01/g;    # keep continued lines whole
    my @dir = grep { /^[ \t]*#/ } split /\n/, $pro;
    s/\x01/\\\n/g for @dir;
    my $block = join("\n", @dir) . "\n";
    my $open = cond_depth($block);
    die "amalgamate.sh: src/$c: its prologue closes a conditional it did not open\n" if $open < 0;
    $block .= "#endif\n" x $open;
    $prologue_macros{$_} = 1 for $block =~ /^[ \t]*#[ \t]*define[ \t]+(\w+)/mg;
    $hoisted .= "/* from the prologue of src/$c */\n$block";
}

# ---- an inventory of each .c file's file-scope names ------------------------
# Comments, literals and preprocessor lines out; both branches of every #if
# count. Returns { name => kind } for static functions and variables,
# typedefs and enum constants (one name space) and { tag => 'tag' }.
sub strip_c {
    my $t = shift;
    $t =~ s/\\\n//g;
    $t =~ s{(/\*.*?\*/)|(//[^\n]*)|("(?:\\.|[^"\\\n])*")|('(?:\\.|[^'\\\n])*')}
           {defined $1 ? ' ' : defined $2 ? '' : defined $3 ? '""' : "''"}gse;
    $t =~ s/^[ \t]*#[^\n]*//mg;
    return $t;
}

sub inventory {
    my $text = shift;
    my %fnmacro = map { $_ => 1 } $text =~ /^[ \t]*#[ \t]*define[ \t]+(\w+)\(/mg;
    my @tok = strip_c($text) =~ /[A-Za-z_]\w*|\d[\w.]*|""|''|->|\S/g;
    my (%ord, %tag, @stmt);
    my $i = 0;

    # the matching close of the group opening at $j; returns its index
    my $match = sub {
        my ($j, $o, $c) = @_;
        my $d = 0;
        for (; $j < @tok; $j++) {
            $d++ if $tok[$j] eq $o;
            $d-- if $tok[$j] eq $c;
            return $j if $d == 0;
        }
        return $#tok;
    };
    # tags and enum constants defined anywhere in a declaration
    my $aggregates = sub {
        my $s = shift;
        for (my $k = 0; $k < @$s; $k++) {
            next unless $s->[$k] =~ /^(struct|union|enum)$/;
            my $kw = $1;
            my $n = $k + 1;
            my $name = '';
            if ($n < @$s && $s->[$n] =~ /^[A-Za-z_]\w*$/) { $name = $s->[$n]; $n++; }
            next unless $n < @$s && $s->[$n] eq '{';
            $tag{$name} = 'tag' if $name ne '';
            next unless $kw eq 'enum';
            my ($d, $p, $want) = (0, 0, 1);
            for (my $m = $n; $m < @$s; $m++) {
                my $x = $s->[$m];
                if ($x eq '{') { $d++; next; }
                if ($x eq '}') { last if --$d == 0; next; }
                $p++ if $x eq '(';
                $p-- if $x eq ')';
                if ($d == 1 && $p == 0) {
                    if ($x eq ',') { $want = 1; next; }
                    if ($want && $x =~ /^[A-Za-z_]\w*$/) { $ord{$x} = 'enum constant'; }
                    $want = 0;
                }
            }
        }
    };
    # the declared name of one declarator (tokens, no initializer)
    my $declarator = sub {
        my @d = @_;
        my $p = -1;
        for my $k (0 .. $#d) { if ($d[$k] eq '(') { $p = $k; last; } }
        if ($p >= 0) {
            my ($q, $depth) = ($p, 0);
            for (; $q < @d; $q++) {
                $depth++ if $d[$q] eq '(';
                $depth-- if $d[$q] eq ')';
                last if $depth == 0;
            }
            my @g = @d[$p + 1 .. $q - 1];
            # (*name)(...), (*name[N])(...), (CALL *name)(...): a pointer
            # declarator starts with '*' (or one word and '*') and is
            # followed by its parameters or dimensions; name(...) is a
            # function.
            my $ptr = @g && ($g[0] eq '*' || (@g > 1 && $g[0] =~ /^[A-Za-z_]\w*$/ && $g[1] eq '*'))
                && $q + 1 < @d && $d[$q + 1] =~ /^[\[(]$/;
            if ($ptr) {
                my $k = 0;
                $k++ while $k < @g && $g[$k] ne '*';
                $k++ while $k < @g && $g[$k] =~ /^(\*|const|volatile|restrict)$/;
                return $k < @g && $g[$k] =~ /^[A-Za-z_]\w*$/ ? $g[$k] : undef;
            }
            return $p > 0 && $d[$p - 1] =~ /^[A-Za-z_]\w*$/ ? $d[$p - 1] : undef;
        }
        my $last;
        for my $x (@d) { last if $x eq '['; $last = $x if $x =~ /^[A-Za-z_]\w*$/; }
        return $last;
    };
    my $kinds = sub {
        my ($s, $is_fn) = @_;
        my @t = @$s;
        # type forms with parentheses of their own
        for (my $k = 0; $k < @t; $k++) {
            if ($t[$k] =~ /^(_Atomic|_Alignas|alignas|__attribute__|__declspec|__typeof__|typeof)$/
                && $k + 1 < @t && $t[$k + 1] eq '(') {
                my $depth = 0;
                my $e = $k + 1;
                for (; $e < @t; $e++) {
                    $depth++ if $t[$e] eq '(';
                    $depth-- if $t[$e] eq ')';
                    last if $depth == 0;
                }
                splice @t, $k, $e - $k + 1, 'TYPEFORM';
            }
        }
        # aggregate bodies and initializers out: "struct x { ... } y" -> "struct x y"
        my @u;
        my ($d, $init) = (0, 0);
        for my $x (@t) {
            if ($x eq '{') { $d++; next; }
            if ($x eq '}') { $d--; next; }
            next if $d > 0;
            push @u, $x;
        }
        my $is_typedef = grep { $_ eq 'typedef' } @u;
        my $is_static = grep { $_ eq 'static' } @u;
        return unless $is_typedef || $is_static;
        my $kind = $is_typedef ? 'typedef' : $is_fn ? 'static function' : 'static';
        # declarators: split at commas outside parentheses and brackets
        my (@parts, @cur);
        my $pd = 0;
        for my $x (@u) {
            $pd++ if $x eq '(' || $x eq '[';
            $pd-- if $x eq ')' || $x eq ']';
            if ($x eq ',' && $pd == 0) { push @parts, [@cur]; @cur = (); next; }
            push @cur, $x;
        }
        push @parts, [@cur];
        for my $part (@parts) {
            my @q;
            my $pd2 = 0;
            for my $x (@$part) {
                $pd2++ if $x eq '(' || $x eq '[';
                $pd2-- if $x eq ')' || $x eq ']';
                last if $x eq '=' && $pd2 == 0;
                push @q, $x;
            }
            my $name = $declarator->(@q);
            next unless defined $name;
            next if $name =~ /^(static|const|volatile|TYPEFORM|struct|union|enum|typedef)$/;
            $ord{$name} = $kind eq 'static' && (grep { $_ eq '(' } @q) && !(grep { $_ eq '*' } @q)
                ? 'static function' : $kind;
        }
    };

    while ($i < @tok) {
        my $x = $tok[$i];
        if (!@stmt && $fnmacro{$x} && $i + 1 < @tok && $tok[$i + 1] eq '(') {
            $i = $match->($i + 1, '(', ')') + 1;    # a macro that defines things
            next;
        }
        if ($x eq ';') {
            $aggregates->(\@stmt);
            $kinds->(\@stmt, 0);
            @stmt = ();
            $i++;
            next;
        }
        if ($x eq '{') {
            my $agg = @stmt && ($stmt[-1] =~ /^(struct|union|enum)$/
                || (@stmt > 1 && $stmt[-2] =~ /^(struct|union|enum)$/));
            my $paren = 0;
            my $eq = 0;
            for my $y (@stmt) {
                $paren++ if $y eq '(';
                $paren-- if $y eq ')';
                $eq = 1 if $y eq '=' && $paren == 0;
            }
            my $end = $match->($i, '{', '}');
            if ($agg || $eq) {
                push @stmt, @tok[$i .. $end];
            } else {    # a function body
                $kinds->(\@stmt, 1);
                @stmt = ();
            }
            $i = $end + 1;
            next;
        }
        push @stmt, $x;
        $i++;
    }
    return (\%ord, \%tag);
}

# A file wrapped whole in "#if COND ... #endif" (the platform files): two
# files whose conditions exclude each other never meet in one compilation.
sub wrapper_cond {
    my $t = shift;
    my @dir = map { s/^[ \t]*#[ \t]*//r } grep { /^[ \t]*#/ } split /\n/, strip_comments_keep_pp($t);
    return undef unless @dir && $dir[0] =~ /^if[ \t]+(.*)$/;
    my $cond = $1;
    my $d = 0;
    for my $k (0 .. $#dir) {
        $d++ if $dir[$k] =~ /^if/;
        return undef if $d == 1 && $k > 0 && $dir[$k] =~ /^elif/;
        $d-- if $dir[$k] =~ /^endif\b/;
        return undef if $d == 0 && $k != $#dir;
    }
    $cond =~ s/\s+//g;
    return $cond;
}

sub strip_comments_keep_pp {
    my $t = shift;
    $t =~ s/\\\n//g;
    $t =~ s{(/\*.*?\*/)|(//[^\n]*)}{defined $1 ? ' ' : ''}gse;
    return $t;
}

sub exclusive {
    my ($a, $b) = @_;
    return 0 unless defined $a && defined $b;
    return $a eq "!$b" || $b eq "!$a" || $a eq "!($b)" || $b eq "!($a)";
}

my (%ord_of, %tag_of, %cond);
for my $c (@cfiles) {
    my ($o, $t) = inventory(drop_quoted_includes($csrc{$c}));
    $ord_of{$c} = $o;
    $tag_of{$c} = $t;
    $cond{$c} = wrapper_cond($csrc{$c});
}

# name -> [files] for names defined in two files that can meet
my (%clash_ord, %clash_tag);
for my $space ([\%ord_of, \%clash_ord], [\%tag_of, \%clash_tag]) {
    my ($inv, $clash) = @$space;
    my %where;
    for my $c (@cfiles) { push @{$where{$_}}, $c for keys %{$inv->{$c}}; }
    for my $n (keys %where) {
        my @f = @{$where{$n}};
        next if @f < 2;
        my %hit;
        for my $x (0 .. $#f) {
            for my $y ($x + 1 .. $#f) {
                next if exclusive($cond{$f[$x]}, $cond{$f[$y]});
                $hit{$f[$x]} = $hit{$f[$y]} = 1;
            }
        }
        $clash->{$n} = [grep { $hit{$_} } @f] if %hit;
    }
}

# Names one file defines at file scope and a later file uses for a local,
# a parameter or a member (never the same object: the first is static):
# legal, but -Wshadow warns. Renamed in the defining file only.
my %clash_shadow;    # name -> [defining file]
{
    my %tokens;    # file -> { identifier not after . or -> => 1 }
    for my $c (@cfiles) {
        my @t = strip_c(drop_quoted_includes($csrc{$c})) =~ /[A-Za-z_]\w*|->|\S/g;
        for my $k (0 .. $#t) {
            next unless $t[$k] =~ /^[A-Za-z_]/;
            next if $k > 0 && ($t[$k - 1] eq '.' || $t[$k - 1] eq '->');
            $tokens{$c}{$t[$k]} = 1;
        }
    }
    for my $a (0 .. $#cfiles) {
        my $fa = $cfiles[$a];
        for my $n (keys %{$ord_of{$fa}}) {
            next if $clash_ord{$n};
            my @users = grep {
                my $fb = $cfiles[$_];
                $tokens{$fb}{$n} && !exclusive($cond{$fa}, $cond{$fb})
            } $a + 1 .. $#cfiles;
            $clash_shadow{$n} = [$fa, map { $cfiles[$_] } @users] if @users;
        }
    }
}

my $nclash = keys(%clash_ord) + keys(%clash_tag);
my $nshadow = keys %clash_shadow;
if ($nshadow) {
    print STDERR "amalgamate.sh: $nshadow file-scope name(s) of one src/*.c that a later one"
        . " uses for a local, parameter or member (-Wshadow);"
        . ($strict ? " (--strict: failing)" : " renamed in their own file only (NAME -> <stem>_NAME)")
        . ":\n";
    for my $n (sort keys %clash_shadow) {
        my ($def, @users) = @{$clash_shadow{$n}};
        printf STDERR "  %-22s %-16s defined in src/%s, used in %s\n", $n, $ord_of{$def}{$n},
            $def, join(' ', map { "src/$_" } @users);
    }
}
if ($nclash) {
    print STDERR "amalgamate.sh: $nclash file-scope name(s) defined in more than one src/*.c"
        . ($strict ? " (--strict: failing)" : "; renamed in the amalgamation only (NAME -> <stem>_NAME)")
        . ":\n";
    for my $n (sort keys %clash_ord) {
        my @k = map { $ord_of{$_}{$n} } @{$clash_ord{$n}};
        printf STDERR "  %-22s %-16s %s\n", $n, $k[0], join(' ', map { "src/$_" } @{$clash_ord{$n}});
    }
    for my $n (sort keys %clash_tag) {
        printf STDERR "  %-22s %-16s %s\n", $n, 'tag', join(' ', map { "src/$_" } @{$clash_tag{$n}});
    }
}
exit 3 if $strict && ($nclash || $nshadow);

# ---- serex.c: write it ---------------------------------------------------------
my %header_macro;
for my $t (values %internal, map { slurp("$inc/$_") } @pub) {
    $header_macro{$_} = 1 for $t =~ /^[ \t]*#[ \t]*define[ \t]+(\w+)/mg;
}

my $body = "#define SEREX_BUILDING 1 /* a DLL built of serex.c exports the API */\n"
    . "#include \"serex.h\"\n";
# A static inline function of a header that this build does not call is
# fine in a header, but clang warns about it in the main file.
$body .= "\n#if defined(__clang__)\n#  pragma clang diagnostic push\n"
    . "#  pragma clang diagnostic ignored \"-Wunused-function\"\n#endif\n";
for my $h (@hdr_order) {
    my $t = drop_quoted_includes($internal{$h});
    $body .= "\n/* ---- src/$h ---- */\n$t";
}
$body .= "\n#if defined(__clang__)\n#  pragma clang diagnostic pop\n#endif\n";
my $nundef = 0;
my %shared_macro;
my %macro_files;
for my $c (@cfiles) {
    my $t = drop_quoted_includes($csrc{$c});
    (my $stem = $c) =~ s/\.c$//;
    for my $n (grep { my $f = $clash_ord{$_}; $f && grep { $_ eq $c } @$f } keys %clash_ord) {
        $t =~ s/(?<![\w.])(?<!->)\Q$n\E(?!\w)/${stem}_$n/g;
    }
    for my $n (grep { $clash_shadow{$_}[0] eq $c } keys %clash_shadow) {
        $t =~ s/(?<![\w.])(?<!->)\Q$n\E(?!\w)/${stem}_$n/g;
    }
    for my $n (grep { my $f = $clash_tag{$_}; $f && grep { $_ eq $c } @$f } keys %clash_tag) {
        $t =~ s/\b(struct|union|enum)(\s+)\Q$n\E(?!\w)/$1$2${stem}_$n/g;
    }
    my %seen;
    my @macros = grep { !$seen{$_}++ } $t =~ /^[ \t]*#[ \t]*define[ \t]+(\w+)/mg;
    my @undef;
    for my $m (@macros) {
        next if $prologue_macros{$m};
        if ($header_macro{$m}) {
            print STDERR "amalgamate.sh: src/$c defines $m, a macro of a header: not undefined after it\n";
            next;
        }
        push @{$macro_files{$m}}, $c;
        push @undef, $m;
    }
    $body .= "\n/* ---- src/$c ---- */\n$t";
    if (@undef) {
        $body .= "\n/* the macros of src/$c end with it */\n";
        $body .= "#undef $_\n" for @undef;
        $nundef += @undef;
    }
}
my $nshared = grep { @{$macro_files{$_}} > 1 } keys %macro_files;

my $csource = <<"EOF";
/* SPDX-License-Identifier: MIT */
/*
 * serex.c - serex $version, amalgamated: every source file of the library
 * in one translation unit. Generated by scripts/amalgamate.sh from the
 * serex sources; do not edit (edit src/ and regenerate).
 *
 * Build it with your program, beside its companion serex.h:
 *     cc -std=c11 -c serex.c          (add -pthread on Unix)
 * The threads back end is chosen here (see the src/thread_internal.h
 * part): C11 <threads.h> where the C library has it, POSIX threads where
 * it has not and under ThreadSanitizer, Win32 on Windows; define
 * SEREX_THREADS_POSIX (or _C11, _WIN32) to force one.
 */

/* Feature macros first, before any system header. */
EOF
$csource .= $hoisted . "\n" . $body;
# Both or neither: a failed run (--strict) leaves no half-new pair.
spew("$out/serex.h", $header);
spew("$out/serex.c", $csource);

my $nlines = () = $csource =~ /\n/g;
printf "amalgamate.sh: wrote %s/serex.h (%d headers) and %s/serex.c (%d lines: %d internal headers,"
    . " %d sources, %d macros #undef'd after their file, %d of them defined in more than one),"
    . " %d name(s) renamed\n",
    $out, scalar @pub, $out, $nlines, scalar @hdr_order, scalar @cfiles, $nundef, $nshared, $nclash + $nshadow;
PERL
rc=$?
set -e
[ "$rc" -eq 0 ] || exit "$rc"

# serex/serex.h: <serex/serex.h> for a program built with -I"$out".
mkdir -p "$out/serex"
cat >"$out/serex/serex.h.tmp" <<'EOF'
/* SPDX-License-Identifier: MIT */
/* serex/serex.h - generated by scripts/amalgamate.sh: the amalgamated
 * header beside this directory, so that #include <serex/serex.h> finds it
 * with -I<the directory of serex.h and serex.c>. */
#include "../serex.h"
EOF
mv "$out/serex/serex.h.tmp" "$out/serex/serex.h"
echo "amalgamate.sh: wrote $out/serex/serex.h (#include \"../serex.h\")"

# ---- the self-check: it compiles as one translation unit, warning-free ------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/serex-amalgamation.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
selfcheck_flags=(-std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes
    -Wmissing-prototypes -Wundef -Werror)
if [ "$compile" = 1 ]; then
    for variant in "" -DNDEBUG; do
        # shellcheck disable=SC2086 # $variant is empty or one flag
        if ! "$cc" "${selfcheck_flags[@]}" $variant -pthread -c "$out/serex.c" \
            -o "$tmp/serex.o" 2>"$tmp/cc.log"; then
            echo "amalgamate.sh: $out/serex.c does not compile cleanly with" \
                "$cc ${selfcheck_flags[*]} $variant:" >&2
            cat "$tmp/cc.log" >&2
            exit 1
        fi
    done
    echo "amalgamate.sh: self-check passed: $cc ${selfcheck_flags[*]} -c serex.c" \
        "(and with -DNDEBUG)"
fi

# ---- --check: the demo, from the two files alone -------------------------------
# Twice: as a drop-in user writes it ("serex.h", the two files alone), and
# unchanged (<serex/serex.h>, through -I and serex/serex.h).
if [ "$check" = 1 ]; then
    mkdir -p "$tmp/demo" "$tmp/demo-installed/serex"
    cp "$out/serex.c" "$out/serex.h" "$tmp/demo/"
    sed 's|#include <serex/serex.h>|#include "serex.h"|' "$src/examples/demo.c" \
        >"$tmp/demo/demo.c"
    grep -q '#include "serex.h"' "$tmp/demo/demo.c" ||
        { echo "amalgamate.sh: examples/demo.c does not include <serex/serex.h>" >&2; exit 1; }
    flags=(-std=c11 -Wall -Wextra -Wpedantic -Werror -pthread)
    echo "amalgamate.sh: --check: $cc ${flags[*]} demo.c serex.c -o demo"
    (cd "$tmp/demo" && "$cc" "${flags[@]}" demo.c serex.c -o demo) ||
        { echo "amalgamate.sh: --check: the demo does not build from the two files" >&2; exit 1; }
    if ! (cd "$tmp/demo" && timeout 120 ./demo >demo.log 2>&1); then
        echo "amalgamate.sh: --check: the demo failed:" >&2
        cat "$tmp/demo/demo.log" >&2
        exit 1
    fi
    echo "amalgamate.sh: --check passed: the demo built from serex.c + serex.h runs" \
        "($(wc -l <"$tmp/demo/demo.log") lines of output)"
    # <serex/serex.h>: the demo as it is, through -I and serex/serex.h
    d=$tmp/demo-installed
    cp "$out/serex.c" "$out/serex.h" "$d/"
    cp "$out/serex/serex.h" "$d/serex/"
    echo "amalgamate.sh: --check: $cc ${flags[*]} -I<drop-in> examples/demo.c serex.c -o demo"
    (cd "$d" && "$cc" "${flags[@]}" -I"$d" "$src/examples/demo.c" serex.c -o demo) ||
        { echo "amalgamate.sh: --check: examples/demo.c (<serex/serex.h>) does not build against the drop-in with -I" >&2; exit 1; }
    if ! (cd "$d" && timeout 120 ./demo >demo.log 2>&1); then
        echo "amalgamate.sh: --check: the demo (<serex/serex.h>) failed:" >&2
        cat "$d/demo.log" >&2
        exit 1
    fi
    echo "amalgamate.sh: --check passed: examples/demo.c, <serex/serex.h> and all," \
        "builds against the drop-in (-I, serex/serex.h) and runs"
fi
