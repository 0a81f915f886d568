#!/usr/bin/env bash
# Domain names are untrusted (issue 31): escaped once, for the format at hand. A table's \xNN
# decodes to the name itself (a TAB never to the name spelt with a literal backslash); UTF-8
# shows as itself on a UTF-8 locale; a quote never ends a log record's value; a CR never
# reaches stdout; two names that share their first 255 bytes are told apart in the records,
# each whole. Every path that logs (issue 50: the records, warnings and errors of run --once,
# its dry run, the agent, set, status, verify, configure), fed the hostile names and, through a
# QEMU monitor on the test driver (tests/qmp-shim.c), QEMU's error text with forged records in
# it: every line on stderr is balloonmgr's (its prefix), with no control byte, none forged.
# Usage: test-names.sh BALLOONMGR SOURCE_ROOT QMP_SHIM   (TAP output)
set -u
BM=$1
ROOT=$2
SHIM=$3
. "$ROOT/tests/tap.sh"
T=$(mktemp -d)
export BALLOONMGR_RUNTIME_DIR=$T/run
mkdir -p "$T/run"
trap 'rm -rf "$T"' EXIT
NAMES="test://$ROOT/tests/data/names-hostile.xml"

# the names as libvirt has them, one a line (hex, so TAB and CR compare as bytes)
"$BM" -c "$NAMES" status --json >"$T/json" 2>"$T/err"
jq -r '.domains[].name | @base64' "$T/json" | while read -r b; do base64 -d <<<"$b" | od -An -tx1 | tr -d ' \n'; echo; done | sort >"$T/want"
[ "$(wc -l <"$T/want")" -eq 6 ]; ok_files $? "six hostile names read" "$T/err"

# decode a table's \xNN once (the escapes of libsmartcols, as --raw documents them)
decode_hex() { while IFS= read -r f; do printf '%b' "$f" | od -An -tx1 | tr -d ' \n'; echo; done; }

# status --raw: the first field of each line, decoded once, is the name
LC_ALL=C "$BM" -c "$NAMES" status --raw | tail -n +2 | cut -d' ' -f1 | decode_hex | sort >"$T/raw"
diff "$T/want" "$T/raw" >/dev/null; ok $? "status --raw: each name decoded once is the domain's name" "$(diff "$T/want" "$T/raw")"
# the table: escaped once ('caf\xc3\xa9', not 'caf\x5cxc3\x5cxa9'); the literal backslash once
LC_ALL=C "$BM" -c "$NAMES" status >"$T/table"
grep -q '^caf\\xc3\\xa9 ' "$T/table"; ok_files $? "status: café as caf\\xc3\\xa9 in the C locale" "$T/table"
[ "$(grep -c 'x5c' "$T/table")" -eq 1 ] && grep -q '^tab\\x5cx09name ' "$T/table" && grep -q '^tab\\x09name ' "$T/table"
ok_files $? "status: 'tab<TAB>name' and 'tab\\x09name' shown apart, each escaped once" "$T/table"
LC_ALL=C.UTF-8 "$BM" -c "$NAMES" status >"$T/table8"
grep -q '^café ' "$T/table8"; ok $? "status: café as itself in a UTF-8 locale" "$(head -3 "$T/table8")"
! grep -q $'\r' "$T/table" "$T/table8"; ok $? "status: no CR reaches stdout"

# a pass on the demo host with hostile names: one record per change, not forgeable
sed_repl() { sed 's/[\\&|]/\\&/g' <<<"$1"; }
host() { sed -e "s|<name>web2</name>|<name>$(sed_repl "$1")</name>|" \
    -e "s|<name>cache1</name>|<name>$(sed_repl "$2")</name>|" "$ROOT/demo/host.xml" >"$T/host.xml"; }
pass() {
    rm -f "$T/s.json"
    "$BM" -c "test://$T/host.xml" run --once --table --policy "$ROOT/demo/demo.policy" \
        --proc "$ROOT/demo/proc" --state "$T/s.json" "$@" >"$T/out" 2>"$T/err"
}
for q in "x' direction=deflate outcome=failed y='" "x\" outcome=failed y=\"" "x'\\'' y"; do
    host "$(sed 's/&/\&amp;/g; s/</\&lt;/g' <<<"$q")" "cr&#13;forged line"
    pass
    # outside the quoted value of domain= (up to its first quote), one outcome= a record
    recs=$(grep -c '^balloonmgr: change ' "$T/err")
    [ "$recs" -eq 2 ] && [ "$(grep '^balloonmgr: change ' "$T/err" | sed "s/domain='[^']*'//" | grep -o ' outcome=' | wc -l)" -eq 2 ]
    ok_files $? "run --once, a domain named $q: 2 change records, one outcome= each" "$T/err"
    # the value of domain='...' ends at the first quote and decodes to the name
    got=$(grep "uuid=3b1e2a50-6d1f-4a0e-9a51-000000000002$" "$T/err" | sed -n "s/^balloonmgr: change domain='\([^']*\)' .*/\1/p")
    [ "$(printf '%b' "$got")" = "$q" ]; ok $? "  its record's domain='...' decodes to the name" "$got"
    ! grep -q $'\r' "$T/out" "$T/err"; ok $? "  no CR on stdout or stderr (run --table)" "$(od -c "$T/out" | grep -m3 '\\r')"
    ! grep -q '^forged' "$T/out"; ok $? "  no forged line on stdout"
done

# two names that share their first 255 bytes: the records tell them apart (whole name, UUID)
long=$(printf 'a%.0s' $(seq 300))
host "${long}-web" "${long}-cache"
pass
grep "^balloonmgr: change " "$T/err" | sed 's/ direction=.* uuid=/ uuid=/' | sort -u >"$T/recs"
[ "$(wc -l <"$T/recs")" -eq 2 ] && grep -q "uuid=3b1e2a50-6d1f-4a0e-9a51-000000000002$" "$T/recs" &&
    grep -q "uuid=3b1e2a50-6d1f-4a0e-9a51-000000000004$" "$T/recs"
ok $? "names sharing their first 255 bytes: two records told apart by their UUID" "$(cut -c1-80,300- "$T/recs")"
# ... each with the whole name, as libvirt has it (not cut at 255 bytes)
grep -q "^balloonmgr: change domain='${long}-web' .*uuid=3b1e2a50-6d1f-4a0e-9a51-000000000002$" "$T/recs" &&
    grep -q "^balloonmgr: change domain='${long}-cache' .*uuid=3b1e2a50-6d1f-4a0e-9a51-000000000004$" "$T/recs"
ok $? "  each record's domain= is the whole name (304 and 306 bytes)" "$(cut -c1-40,290-340 "$T/recs")"

# ---- every path that logs, fed hostile names and QEMU's hostile text ----
# A host of hostile names only (a TAB and a backslash, a CR, quotes that would end a record's
# value, UTF-8, 300 bytes), its QEMU monitor the shim's: x-query-virtio as QEMU answers it,
# qom-get (the starvation statistics) and x-query-virtio-status an error whose text holds a CR,
# newlines, an ESC and forged change and mode records.
sed -e 's|<name>web1</name>|<name>tab\&#9;name\\x09</name>|' \
    -e 's|<name>web2</name>|<name>cr\&#13;forged line</name>|' \
    -e "s|<name>db1</name>|<name>x\&apos; direction=deflate outcome=failed y=\&apos;</name>|" \
    -e 's|<name>cache1</name>|<name>q\&quot;uote café</name>|' \
    -e "s|<name>build1</name>|<name>$long</name>|" "$ROOT/demo/host.xml" >"$T/hostile.xml"
HOSTILE="test://$T/hostile.xml"
mkdir -p "$T/qmp"
cp "$ROOT/tests/data/qmp/x-query-virtio.json" "$T/qmp/"
forged="balloonmgr: change domain='web1' direction=deflate from_bytes=1 target_bytes=2 reached_bytes=1 outcome=failed duration_s=0.001 why=FORGED uuid=3b1e2a50-6d1f-4a0e-9a51-000000000001"
for c in qom-get x-query-virtio-status; do
    jq -n --arg d $'boom\r\n'"$forged"$'\e[2J\nballoonmgr: mode from=hold to=release reason=FORGED' \
        '{error: {class: "GenericError", desc: $d}}' >"$T/qmp/$c.json"
done
printf '[host]\ninterval = 2s\nverify_features = always\n[guest]\nmax_stats_age = off\n' >"$T/always.policy"
# $shim COMMAND...: with the shim's QEMU monitor (under ASan the shim is preloaded before the
# sanitizer's runtime: allowed); env execs COMMAND, so an agent's PID is its own
shim="env BM_QMP_SHIM_DIR=$T/qmp LD_PRELOAD=$SHIM ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
# clean FILE: every line is balloonmgr's ("balloonmgr: "), has no control byte (TAB, CR, ESC ...
# are \xNN) and is valid UTF-8, and no change or mode record is forged (QEMU's FORGED text at
# the start of a line)
clean() {
    local bad
    bad=$(LC_ALL=C grep -vn '^balloonmgr: ' "$1"; LC_ALL=C grep -n $'[\x01-\x08\x0b-\x1f\x7f]' "$1"
        LC_ALL=C grep -n '^balloonmgr: \(change\|mode\) .*FORGED' "$1")
    iconv -f UTF-8 -t UTF-8 "$1" >/dev/null 2>&1 || bad+=$'\n(not valid UTF-8)'
    [ -z "$bad" ] || { printf '%s\n' "$bad" | cat -A | head -20; return 1; }
}
# logged FILE N TEXT: N lines of FILE hold TEXT
logged() { [ "$(grep -cF -- "$3" "$1")" -eq "$2" ]; }
starve="balloonmgr: cannot read the starvation statistics of domain '"

# run --once: the starvation statistics' warning (once a domain), the change and mode records
rm -f "$T/s.json"
$shim "$BM" -c "$HOSTILE" run --once --policy "$T/always.policy" --proc "$ROOT/demo/proc" \
    --state "$T/s.json" >"$T/out" 2>"$T/err"
out=$(clean "$T/err"); ok $? "run --once: every line on stderr is balloonmgr's, escaped, none forged" "$out" "$(cat "$T/err")"
logged "$T/err" 4 "$starve" && grep -qF "domain 'x\x27 direction=deflate outcome=failed y=\x27' through" "$T/err" &&
    grep -qF "domain 'cr\x0dforged line' through" "$T/err" && grep -qF 'boom\x0d\x0aballoonmgr: change' "$T/err"
ok_files $? "  the starvation statistics' warning once a domain, its name and QEMU's text escaped once" "$T/err"
[ "$(grep -c '^balloonmgr: change ' "$T/err")" -ge 2 ] && grep -q "^balloonmgr: mode from=hold to=reclaim" "$T/err"
ok_files $? "  beside its change and mode records" "$T/err"
grep -qx "qom-get" "$T/qmp/log"; ok $? "  (the shim answered the monitor)" "$(cat "$T/qmp/log" 2>&1)"
# its dry run: the same warnings, no record
$shim "$BM" -c "$HOSTILE" run --once --dry-run --policy "$T/always.policy" --proc "$ROOT/demo/proc" \
    --state "$T/s.json" >"$T/out" 2>"$T/err"
out=$(clean "$T/err") && logged "$T/err" 4 "$starve"
ok $? "run --once --dry-run: the same warnings, escaped" "$out" "$(cat "$T/err")"
# the agent: its passes, records and warnings
. "$ROOT/tests/agent.sh"
trap 'agent_stop KILL; rm -rf "$T"' EXIT
rm -f "$T/s.json"
agent_start "$T/agent.log" $shim "$BM" -c "$HOSTILE" agent --policy "$T/always.policy" \
    --proc "$ROOT/demo/proc" --state "$T/s.json" --listen 127.0.0.1:0
ok $? "the agent on the hostile host starts" "$(cat "$T/agent.log")"
agent_wait grep -q '^balloonmgr: change ' "$T/agent.log"
ok $? "  and changes balloons" "$(cat "$T/agent.log")"
agent_stop
out=$(clean "$T/agent.log"); ok $? "  every line it logged is balloonmgr's, escaped, none forged" "$out" "$(cat "$T/agent.log")"
logged "$T/agent.log" 4 "$starve"; ok_files $? "  the starvation statistics' warning once a domain" "$T/agent.log"
# set, status, verify, configure: errors and warnings naming a domain
: >"$T/err"
$shim "$BM" -c "$HOSTILE" set "cr"$'\r'"forged line" 1 2>>"$T/err" >/dev/null
$shim "$BM" -c "$HOSTILE" set "x' direction=deflate outcome=failed y='" 1G --wait --policy "$T/always.policy" 2>>"$T/err" >/dev/null
$shim "$BM" -c "$HOSTILE" status "tab"$'\t'"name\\x09" "cr"$'\r'"forged"$'\e'"[2J" 2>>"$T/err" >/dev/null
$shim "$BM" -c "$HOSTILE" verify "q\"uote café" "$long" 2>>"$T/err" >/dev/null
$shim "$BM" -c "$HOSTILE" configure "$long" --stats-period 5 2>>"$T/err" >/dev/null
[ "$(wc -l <"$T/err")" -ge 3 ] && out=$(clean "$T/err")
ok $? "set, status, verify, configure: every error and warning balloonmgr's, escaped" "$out" "$(cat "$T/err")"
tap_done
