#!/usr/bin/env bash
# The modules of src/ depend on each other without a cycle, by their includes and by their
# calls: an edge A -> B for every file A.c or A.h that includes "B.h", and for every A.c that
# calls a function B.c defines (comments left out); the graph of modules sorts (tsort(1) names a
# cycle when it does not). util.c's file I/O is file.c's for this reason: util.c included
# file.h, file.c util.h. And the arrow that once ran back up the house: policy-eval.c wrote each
# decision's prose through policy-reason.c, which includes policy-eval.h; words are made where
# they are printed or logged, so policy-eval.c calls nothing of policy-reason.c.
# Usage: test-includes.sh SOURCE_ROOT   (TAP output)
set -u
ROOT=$1
. "$ROOT/tests/tap.sh"

# include_edges DIR: "A B" per module A including B.h
include_edges() {
    (cd "$1" && grep -H '^#include "' -- *.c *.h |
        sed -n 's/^\([^.]*\)\.[ch]:#include "\([^"]*\)\.h".*/\1 \2/p' | awk '$1 != $2')
}

# call_edges DIR: "A B" per module A.c calling a function bm_* that B.c defines (not static)
call_edges() {
    (cd "$1" && {
        for f in *.c; do
            grep -oE '^[A-Za-z][A-Za-z0-9_ *]*[ *]bm_[a-z0-9_]+\(' "$f" | grep -v '^static' |
                grep -oE 'bm_[a-z0-9_]+\($' | tr -d '(' | sed "s/^/def ${f%.c} /"
        done
        for f in *.c; do
            gcc -fpreprocessed -dD -E -P "$f" 2>/dev/null | grep -oE '\bbm_[a-z0-9_]+\(' |
                tr -d '(' | sort -u | sed "s/^/call ${f%.c} /"
        done
    } | awk '$1 == "def" { def[$3] = $2; next }
             ($3 in def) && def[$3] != $2 { print $2, def[$3] }' | sort -u)
}

edges=$(include_edges "$ROOT/src")
n=$(printf '%s\n' "$edges" | grep -c .)
ok $((n > 0 ? 0 : 1)) "includes read from src/ ($n between modules)"
out=$(printf '%s\n' "$edges" | tsort 2>&1 >/dev/null)
[ -z "$out" ]; ok $? "no include cycle between the modules of src/" "$out"
calls=$(call_edges "$ROOT/src")
n=$(printf '%s\n' "$calls" | grep -c .)
ok $((n > 100 ? 0 : 1)) "calls read from src/ ($n between modules)"
out=$(printf '%s\n%s\n' "$edges" "$calls" | tsort 2>&1 >/dev/null)
[ -z "$out" ]; ok $? "no cycle between the modules of src/, by includes and calls" "$out"
! printf '%s\n' "$calls" | grep -qx 'policy-eval policy-reason'
ok $? "policy-eval.c calls nothing of policy-reason.c (words only where printed or logged)"
# the one that was: util.c included file.h while file.c includes util.h
! grep -q '^#include "file.h"' "$ROOT/src/util.c"; ok $? "util.c does not include file.h"
# tsort itself finds a cycle (the check above can fail)
out=$(printf 'a b\nb a\n' | tsort 2>&1 >/dev/null)
[ -n "$out" ]; ok $? "a cycle is found (a -> b -> a)"
# and a back arrow by a call alone: b.c includes a.h, a.c calls what b.c defines
tmp=$(mktemp -d)
printf '#include "b.h"\n/* bm_c_x() in a comment is no call */\nint bm_a_f(void)\n{\n    return bm_b_g();\n}\n' >"$tmp/a.c"
printf '#include "a.h"\nint bm_b_g(void)\n{\n    return 0;\n}\n' >"$tmp/b.c"
printf 'int bm_c_x(void)\n{\n    return 0;\n}\n' >"$tmp/c.c"
: >"$tmp/a.h"
: >"$tmp/b.h"
fake=$(call_edges "$tmp")
[ "$fake" = "a b" ]; ok $? "a call is an edge, a name in a comment is not ($fake)"
out=$(printf 'b a\n%s\n' "$fake" | tsort 2>&1 >/dev/null)
[ -n "$out" ]; ok $? "a back arrow by a call is found (b includes a.h, a calls b)"
rm -rf "$tmp"
tap_done
