#!/usr/bin/env bash
# The modules of src/ include each other without a cycle: an edge A -> B for every file A.c or
# A.h that includes "B.h", and the graph of modules sorts (tsort(1) names a cycle when it does
# not). util.c's file I/O is file.c's for this reason: util.c included file.h, file.c util.h.
# Usage: test-includes.sh SOURCE_ROOT   (TAP output)
set -u
ROOT=$1
. "$ROOT/tests/tap.sh"
edges=$(cd "$ROOT/src" && grep -H '^#include "' -- *.c *.h |
    sed -n 's/^\([^.]*\)\.[ch]:#include "\([^"]*\)\.h".*/\1 \2/p' | awk '$1 != $2')
n=$(printf '%s\n' "$edges" | grep -c .)
ok $((n > 0 ? 0 : 1)) "includes read from src/ ($n between modules)"
out=$(printf '%s\n' "$edges" | tsort 2>&1 >/dev/null)
[ -z "$out" ]; ok $? "no include cycle between the modules of src/" "$out"
# the one that was: util.c included file.h while file.c includes util.h
! grep -q '^#include "file.h"' "$ROOT/src/util.c"; ok $? "util.c does not include file.h"
# tsort itself finds a cycle (the check above can fail)
out=$(printf 'a b\nb a\n' | tsort 2>&1 >/dev/null)
[ -n "$out" ]; ok $? "a cycle is found (a -> b -> a)"
tap_done
