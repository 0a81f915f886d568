#!/usr/bin/env bash
# Issue 52, help that fits: 'balloonmgr --help' and every verb's --help fit 80 columns and one
# screen (24 lines), the full text being balloonmgr(8); 'balloonmgr help [VERB]' (virsh's help
# VERB) prints the same; an unknown verb or a second word is bad usage.
# Usage: test-help.sh BALLOONMGR SOURCE_ROOT   (TAP output)
set -u
BM=$1 ROOT=$2
. "$ROOT/tests/tap.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# fits FILE: at most 80 columns and 24 lines
fits() { [ "$(wc -L <"$1")" -le 80 ] && [ "$(wc -l <"$1")" -le 24 ]; }

"$BM" --help >"$T/main"; rc=$?
[ $rc -eq 0 ] && fits "$T/main"; ok_files $? "--help: fits 80x24 ($(wc -L <"$T/main") columns, $(wc -l <"$T/main") lines)" "$T/main"
"$BM" help >"$T/help"; rc=$?
[ $rc -eq 0 ] && cmp -s "$T/main" "$T/help"; ok_files $? "help: the same as --help (exit $rc)" "$T/help"
for v in list status set verify configure run policy agent; do
    "$BM" "$v" --help >"$T/$v"; rc=$?
    [ $rc -eq 0 ] && fits "$T/$v" && grep -q '^Usage: balloonmgr ' "$T/$v" && grep -q 'balloonmgr(8)' "$T/$v"
    ok_files $? "$v --help: fits 80x24 ($(wc -L <"$T/$v") columns, $(wc -l <"$T/$v") lines) and names balloonmgr(8)" "$T/$v"
    "$BM" help "$v" >"$T/help-$v"; rc=$?
    [ $rc -eq 0 ] && cmp -s "$T/$v" "$T/help-$v"; ok $? "help $v: the same as $v --help (exit $rc)"
    grep -q "^  $v  *[a-z]" "$T/main"; ok $? "--help lists $v with a few words"
done
"$BM" help bogus >"$T/out" 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && [ ! -s "$T/out" ] && [ "$(cat "$T/err")" = "balloonmgr: help: unknown verb 'bogus' (see 'balloonmgr help')" ]
ok_files $? "help bogus: bad usage, one line (exit $rc)" "$T/err"
"$BM" help set web1 >"$T/out" 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && [ "$(cat "$T/err")" = "balloonmgr: help: too many arguments: 'web1' (see 'balloonmgr help')" ]
ok_files $? "help set web1: too many arguments (exit $rc)" "$T/err"
tap_done
