#!/usr/bin/env bash
# Issue 52, tables that fit: status, list, verify and run --table under a real terminal (a pty
# of script(1), its size set with stty) at 60, 80, 120 and 200 columns, on the demo host and on
# a host of long and non-ASCII names (tests/data/host/wide-names.xml): names are never cut,
# the optional columns give way in the order balloonmgr(8) states (TABLES), REASON wraps at
# blanks, -o +COL adds to the default columns, and off a terminal the output is byte for byte
# what main printed before (tests/data/table/).
# Usage: test-tables.sh BALLOONMGR SOURCE_ROOT   (TAP; skipped without script(1))
set -u
BM=$1 ROOT=$2
. "$ROOT/tests/tap.sh"
command -v script >/dev/null || tap_skip_all "script(1) (bsdutils) is not installed"
# display widths (wc -L) count a CJK character as two columns in a UTF-8 locale
export LC_ALL=C.UTF-8
DEMO="test://$ROOT/demo/host.xml"
WIDE="test://$ROOT/tests/data/host/wide-names.xml"
P=(--policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
out=$T/out

# on_tty COLS ARGS...: balloonmgr ARGS on a pty COLS wide (stdout and stderr the terminal);
# what it printed in $out, without the pty's carriage returns
on_tty() {
    local cols=$1
    shift
    script -qec "stty cols $cols rows 50; $(printf '%q ' "$BM" "$@") 2>/dev/null" /dev/null </dev/null |
        tr -d '\r' >"$out"
}

# widest FILE: the widest line's display width
widest() { wc -L <"$1"; }

# header: the column names of the table's header row in $out (the line starting with NAME)
header() { grep -m1 '^NAME ' "$out" | tr -s ' '; }

NAMES_DEMO=(batch1 build1 cache1 db1 legacy1 web1 web2)
NAMES_WIDE=(customer-4711-production-web-frontend-europe-west-replica-0042 db1
            räksmörgås-café-prod 数据库-主节点-01)
RUNNING_WIDE=("${NAMES_WIDE[@]}")

# names_whole NAME...: every NAME is in $out whole, at the start of a line
names_whole() {
    local n
    for n in "$@"; do grep -q "^$n " "$out" || grep -qx "$n" "$out" || return 1; done
}

# --- the demo host: every table fits every width, names whole
for cols in 60 80 120 200; do
    on_tty "$cols" -c "$DEMO" status "${P[@]}"
    [ "$(widest "$out")" -le "$cols" ] && names_whole "${NAMES_DEMO[@]}"
    ok_files $? "status at $cols columns: fits (widest $(widest "$out")), every name whole" "$out"
    on_tty "$cols" -c "$DEMO" run --once --dry-run --table "${P[@]}"
    [ "$(widest "$out")" -le "$cols" ] && names_whole "${NAMES_DEMO[@]}"
    ok_files $? "run --table at $cols columns: fits (widest $(widest "$out")), every name whole" "$out"
    on_tty "$cols" -c "$DEMO" verify
    [ "$(widest "$out")" -le "$cols" ] && names_whole build1 cache1 db1 web1 web2
    ok_files $? "verify at $cols columns: fits (widest $(widest "$out")), every name whole" "$out"
    on_tty "$cols" -c "$DEMO" list --all
    [ "$(widest "$out")" -le "$cols" ] && names_whole "${NAMES_DEMO[@]}"
    ok_files $? "list at $cols columns: one whole name a line" "$out"
done

# the columns that gave way, in balloonmgr(8)'s order (TABLES)
expect_header() {
    local cols=$1 want=$2
    shift 2
    on_tty "$cols" "$@"
    [ "$(header)" = "$want" ]; ok $? "$* at $cols columns: the columns are $want" "$(header)"
}
expect_header 60 "NAME STATE MAXIMUM CURRENT USABLE RSS" -c "$DEMO" status "${P[@]}"
expect_header 80 "NAME STATE MAXIMUM CURRENT RECLAIMED USABLE UNUSED RSS" -c "$DEMO" status "${P[@]}"
expect_header 120 "NAME STATE MAXIMUM CURRENT RECLAIMED AVAIL USABLE UNUSED CACHES RSS SG FPR AUTODEFL" -c "$DEMO" status "${P[@]}"
expect_header 200 "NAME STATE MAXIMUM CURRENT RECLAIMED AVAIL USABLE UNUSED CACHES RSS SWAPIN SWAPOUT MAJFLT PERIOD AGE SG FPR AUTODEFL" -c "$DEMO" status "${P[@]}"
expect_header 60 "NAME ACTION TARGET REASON" -c "$DEMO" run --once --dry-run --table "${P[@]}"
expect_header 80 "NAME ACTION CURRENT TARGET RESULT REASON" -c "$DEMO" run --once --dry-run --table "${P[@]}"
expect_header 60 "NAME SG IOEVENTFD NOTE" -c "$DEMO" verify
expect_header 120 "NAME SG IOEVENTFD STATS DEFLATE-ON-OOM FREE-PAGE-HINT REPORTING NOTE" -c "$DEMO" verify
# -o: the columns named never give way; +COL adds to the default ones, which still do
expect_header 60 "NAME STATE MAXIMUM CURRENT RECLAIMED AVAIL USABLE RSS" -c "$DEMO" status "${P[@]}" -o name,state,maximum,current,reclaimed,avail,usable,rss
expect_header 200 "NAME STATE MAXIMUM CURRENT RECLAIMED AVAIL USABLE UNUSED CACHES RSS SWAPIN SWAPOUT MAJFLT PERIOD AGE SG FPR AUTODEFL READ" -c "$DEMO" status "${P[@]}" -o +READ
expect_header 60 "NAME STATE MAXIMUM CURRENT USABLE RSS READ" -c "$DEMO" status "${P[@]}" -o +READ

# REASON wraps at blanks: each decision's lines joined with one blank are its reason
on_tty 60 -c "$DEMO" run --once --dry-run --table "${P[@]}"
col=$(grep -m1 '^NAME ' "$out" | grep -bo 'REASON' | cut -d: -f1)
sed -n '/^NAME /,$p' "$out" | tail -n +2 |
    awk -v c="$col" '{ r = substr($0, c + 1) } /^[^ ]/ { if (n) print line; line = r; n = 1; next } { line = line " " r } END { print line }' >"$T/wrapped"
"$BM" -c "$DEMO" run --once --dry-run --json "${P[@]}" 2>/dev/null | jq -r '.decisions[].reason' >"$T/reasons"
cmp -s "$T/wrapped" "$T/reasons" && [ "$(sed -n '/^NAME /,$p' "$out" | wc -l)" -gt 8 ]
ok_files $? "run at 60 columns: REASON wraps at blanks (its lines joined are the reasons)" "$out" "$T/wrapped" "$T/reasons"
! sed -n '/^NAME /,$p' "$out" | cut -c"$((col + 1))"- | grep -qE '^(B|KiB|MiB|GiB|TiB)\b'
ok_files $? "  a size stays with its unit" "$out"

# the host line is cut at blanks, its rest indented
on_tty 60 -c "$DEMO" status "${P[@]}"
[ "$(sed -n '1p' "$out" | cut -c1-6)" = "host: " ] && [ "$(sed -n '2p' "$out" | cut -c1-6)" = "      " ] &&
    [ "$(sed -n '/^NAME /q;p' "$out" | tr -s ' \n' ' ' | sed 's/ $//')" = "$("$BM" -c "$DEMO" status "${P[@]}" 2>/dev/null | head -1)" ]
ok_files $? "status at 60 columns: the host line cut at blanks, the same words" "$out"

# --- long and non-ASCII names: never cut, whatever the width; the table fits where it can
for cols in 60 80 120 200; do
    on_tty "$cols" -c "$WIDE" status "${P[@]}"
    names_whole "${NAMES_WIDE[@]}"; ok_files $? "wide names: status at $cols columns: every name whole" "$out"
    on_tty "$cols" -c "$WIDE" run --once --dry-run --table "${P[@]}"
    names_whole "${RUNNING_WIDE[@]}"; ok_files $? "wide names: run --table at $cols columns: every name whole" "$out"
    on_tty "$cols" -c "$WIDE" verify
    names_whole "${RUNNING_WIDE[@]}"; ok_files $? "wide names: verify at $cols columns: every name whole" "$out"
    on_tty "$cols" -c "$WIDE" list --all
    names_whole "${NAMES_WIDE[@]}"; ok_files $? "wide names: list at $cols columns: every name whole" "$out"
done
# a name of 62 columns: at 80 the status table is the name and what fits beside it
on_tty 80 -c "$WIDE" status "${P[@]}"
[ "$(header)" = "NAME CURRENT USABLE" ] && [ "$(widest "$out")" -le 80 ]
ok_files $? "wide names: status at 80 columns: NAME whole, CURRENT and USABLE beside it (widest $(widest "$out"))" "$out"
for cols in 120 200; do
    on_tty "$cols" -c "$WIDE" status "${P[@]}"
    [ "$(widest "$out")" -le "$cols" ]; ok_files $? "wide names: status at $cols columns fits (widest $(widest "$out"))" "$out"
    on_tty "$cols" -c "$WIDE" run --once --dry-run --table "${P[@]}"
    [ "$(widest "$out")" -le "$cols" ]; ok_files $? "wide names: run --table at $cols columns fits (widest $(widest "$out"))" "$out"
done
# the CJK name takes two columns a character: the next column starts where the others' does
on_tty 120 -c "$WIDE" status "${P[@]}"
a=$(grep '^db1 ' "$out" | sed 's/running.*//' | wc -L) b=$(grep '^数据库' "$out" | sed 's/running.*//' | wc -L)
[ "$a" -eq "$b" ] && [ "$a" -gt 60 ]; ok_files $? "wide names: a CJK name is aligned by its display width ($a, $b)" "$out"

# --- off a terminal: byte for byte what main printed before (tests/data/table/README)
golden() {
    local file=$1
    shift
    "$BM" "$@" 2>/dev/null | cmp -s - "$ROOT/tests/data/table/$file"
    ok $? "off a terminal: $* is byte for byte tests/data/table/$file"
}
golden status.out -c "$DEMO" status "${P[@]}"
golden status-wide.out -c "$WIDE" status "${P[@]}"
golden verify.out -c "$DEMO" verify
golden verify-wide.out -c "$WIDE" verify
golden list-wide.out -c "$WIDE" list --all
# a pipe on a terminal's COLUMNS changes nothing either
COLUMNS=60 "$BM" -c "$DEMO" status "${P[@]}" 2>/dev/null | cmp -s - "$ROOT/tests/data/table/status.out"
ok $? "off a terminal: COLUMNS=60 changes nothing"

tap_done
