#!/usr/bin/env bash
# Log priorities and change records on libvirt's test driver (no daemon, no root). When stderr is
# the journal's stream ($JOURNAL_STREAM names its device:inode, as systemd sets it), every line
# starts with <N> (sd-daemon(3)): problems <4> or lower, change and mode records <5>, progress
# of the agent <6>; otherwise lines are plain. One record per balloon change, one per change of
# the host's mode.
# Usage: test-log.sh BALLOONMGR SOURCE_ROOT   (TAP output)
set -u
BM=$(realpath "$1")
ROOT=$(realpath "$2")
HOST="test:///$ROOT/demo/host.xml"
tmp=$(mktemp -d)
export BALLOONMGR_RUNTIME_DIR=$tmp/run
. "$ROOT/tests/tap.sh"
. "$ROOT/tests/agent.sh"
trap 'agent_stop; rm -rf "$tmp"' EXIT
# these are the lines of the stream: where a journald listens, balloonmgr would send its
# records there instead (tests/test-journal.sh), so hide its socket in a mount namespace
if [ -S /run/systemd/journal/socket ] && [ -z "${BM_LOG_HIDDEN_JOURNAL:-}" ]; then
    [ "$(id -u)" -eq 0 ] || tap_skip_all "a journald listens here: hiding its socket needs root"
    rm -rf "$tmp"
    BM_LOG_HIDDEN_JOURNAL=1 exec unshare -m --propagation private bash -c \
        'mount -t tmpfs bm-test-hide /run/systemd/journal && exec bash "$0" "$@"' "$0" "$@"
fi
# journal FILE CMD...: runs CMD with stderr appended to FILE and JOURNAL_STREAM naming FILE
journal() {
    local f=$1; shift
    : >"$f"
    JOURNAL_STREAM=$(stat -c '%d:%i' "$f") "$@" 2>>"$f"
}

# a timer pass under pressure (demo/proc): the demo host's two idle domains with deflate-on-oom
# are inflated (web1, without it, is not: timer_inflate)
journal "$tmp/run.err" "$BM" -c "$HOST" run --once --policy "$ROOT/demo/demo.policy" \
    --proc "$ROOT/demo/proc" --state "$tmp/state.json" >"$tmp/run.out"
ok $? "run --once exits 0"
# stdout is no terminal (the timer's journal): one summary line, not the table
sets=$(sed -n 's/^pass: mode reclaim (.*): \([0-9]*\) inflate(s), 0 deflate(s) set, 0 failed, 0 busy; 7 domain(s)$/\1/p' "$tmp/run.out")
ok $(( ${sets:-0} == 2 ? 0 : 1 )) "the pass set 2 balloon targets (got ${sets:-none})" "$(cat "$tmp/run.out")"
ok $([ "$(wc -l <"$tmp/run.out")" -eq 1 ]; echo $?) "stdout off a terminal: that one summary line, no table"
"$BM" -c "$HOST" run --once --table --dry-run --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" >"$tmp/table.out" 2>/dev/null
ok $(grep -q '^NAME  *ACTION  *CURRENT  *TARGET  *RESULT  *REASON$' "$tmp/table.out"; echo $?) "run --table: the table off a terminal too"
"$BM" -c "$HOST" run --once -q --dry-run --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" >"$tmp/quiet.out" 2>"$tmp/quiet.err"
ok $([ ! -s "$tmp/quiet.out" ] && grep -q '^balloonmgr: mode ' "$tmp/quiet.err"; echo $?) "run -q: nothing on stdout, the records on stderr"
ok $(grep -vc '^<[0-7]>' "$tmp/run.err" | grep -qx 0; echo $?) "every stderr line has a priority prefix"
changes=$(grep -c "^<5>balloonmgr: change domain='[a-z0-9]*' direction=inflate from_bytes=[0-9]* target_bytes=[0-9]* reached_bytes=[0-9]* outcome=reached duration_s=[0-9.]* why=[a-z-]* uuid=[0-9a-f-]*$" "$tmp/run.err")
ok $(( changes == sets ? 0 : 1 )) "one <5> change record per target set ($changes of $sets)"
for d in web2 cache1; do
    ok $(grep -c "^<5>balloonmgr: change domain='$d' " "$tmp/run.err" | grep -qx 1; echo $?) "exactly one record for $d"
done
ok $(grep -c "^<5>balloonmgr: mode from=hold to=reclaim reason='host MemAvailable 4 GiB < reclaim_below" "$tmp/run.err" | grep -qx 1; echo $?) \
    "one <5> record of the host's mode change hold -> reclaim"
# the next pass remembers the mode (state file): no second mode record
journal "$tmp/run2.err" "$BM" -c "$HOST" run --once --policy "$ROOT/demo/demo.policy" \
    --proc "$ROOT/demo/proc" --state "$tmp/state.json" >/dev/null
ok $(grep -c 'mode from=' "$tmp/run2.err" | grep -qx 0; echo $?) "no mode record when the mode stays reclaim"

# not the journal: plain lines, the same records
"$BM" -c "$HOST" run --once --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" \
    --state "$tmp/plain.json" >/dev/null 2>"$tmp/plain.err"
ok $(grep -c '^<' "$tmp/plain.err" | grep -qx 0; echo $?) "without JOURNAL_STREAM: no prefixes"
ok $(grep -c "^balloonmgr: change domain=" "$tmp/plain.err" | grep -qx 2; echo $?) "without JOURNAL_STREAM: 2 change records"
other=$(mktemp -p "$tmp")
JOURNAL_STREAM=$(stat -c '%d:%i' "$other") "$BM" -c "$HOST" run --once --policy "$ROOT/demo/demo.policy" \
    --proc "$ROOT/demo/proc" --state "$tmp/other.json" >/dev/null 2>"$tmp/other.err"
ok $(grep -c '^<' "$tmp/other.err" | grep -qx 0; echo $?) "JOURNAL_STREAM of another file: no prefixes"
JOURNAL_STREAM=garbage "$BM" -c "$HOST" run --once --policy "$ROOT/demo/demo.policy" \
    --proc "$ROOT/demo/proc" --state "$tmp/garbage.json" >/dev/null 2>"$tmp/garbage.err"
ok $(grep -c '^<' "$tmp/garbage.err" | grep -qx 0; echo $?) "malformed JOURNAL_STREAM: no prefixes"

# problems: errors <3>, warnings <4>
printf '[host]\nreclaim_below = lots\n' >"$tmp/bad.policy"
journal "$tmp/bad.err" "$BM" -c "$HOST" run --once --policy "$tmp/bad.policy" --proc "$ROOT/demo/proc" >/dev/null
ok $(( $? == 2 ? 0 : 1 )) "a bad policy exits 2"
ok $(grep -vc '^<3>' "$tmp/bad.err" | grep -qx 0; echo $?) "a bad policy: every line <3> ($(head -c 200 "$tmp/bad.err" | tr '\n' '|'))"
ok $(grep -q "^<3>balloonmgr: run: policy '$tmp/bad.policy' has errors" "$tmp/bad.err"; echo $?) "the summary line is <3>"
echo '{ corrupt' >"$tmp/corrupt.json"
journal "$tmp/corrupt.err" "$BM" -c "$HOST" run --once --dry-run --policy "$ROOT/demo/demo.policy" \
    --proc "$ROOT/demo/proc" --state "$tmp/corrupt.json" >/dev/null
ok $(grep -q "^<4>balloonmgr: run: warning: state '$tmp/corrupt.json': .*starting fresh" "$tmp/corrupt.err"; echo $?) \
    "a corrupt state file is a <4> warning"
ok $(grep -c 'change domain=' "$tmp/corrupt.err" | grep -qx 0; echo $?) "a dry run records no change"

# the agent: <6> for its own progress, <5> records, nothing below <6> about normal operation
: >"$tmp/agent.err"
agent_start "$tmp/agent.err" env JOURNAL_STREAM="$(stat -c '%d:%i' "$tmp/agent.err")" "$BM" -c "$HOST" agent \
    --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$tmp/agent.json" \
    --listen 127.0.0.1:0
agent_wait grep -q 'change domain=.cache1' "$tmp/agent.err"
agent_stop; arc=$?
ok $arc "agent stops with 0 on SIGTERM"
ok $(grep -q '^<6>balloonmgr: agent: serving /metrics on ' "$tmp/agent.err"; echo $?) "agent: 'serving' is <6>"
ok $(grep -q '^<6>balloonmgr: agent: stopping$' "$tmp/agent.err"; echo $?) "agent: 'stopping' is <6>"
ok $(grep -c '^<5>balloonmgr: change domain=' "$tmp/agent.err" | grep -qx 3; echo $?) "agent: 3 <5> change records"
ok $(grep -c '^<5>balloonmgr: mode from=hold to=reclaim' "$tmp/agent.err" | grep -qx 1; echo $?) "agent: 1 <5> mode record"
ok $(grep -c '^<[0-4]>' "$tmp/agent.err" | grep -qx 0; echo $?) "agent: no line at warning or worse ($(grep '^<[0-4]>' "$tmp/agent.err" | head -2 | tr '\n' '|'))"
ok $(grep -vc '^<[0-7]>' "$tmp/agent.err" | grep -qx 0; echo $?) "agent: every line has a prefix"

# the agent's decisions, <6>: one for each change it starts, with the reason; a domain it leaves
# as it is once, when the rule that leaves it changes, not every pass (build1 paused, db1 with
# nothing to take; web1 inflated, then left while its statistics predate that change, which on
# the test driver they always do: 4 passes, one record each)
sed 's/^interval = .*/interval = 1s/' "$ROOT/demo/demo.policy" >"$tmp/fast.policy"
: >"$tmp/dec.err"
agent_start "$tmp/dec.err" env JOURNAL_STREAM="$(stat -c '%d:%i' "$tmp/dec.err")" "$BM" -c "$HOST" agent \
    --policy "$tmp/fast.policy" --proc "$ROOT/demo/proc" --state "$tmp/dec.json" --listen 127.0.0.1:0
passes_done() { curl -sf "$agent_addr/metrics" | awk '$1 == "balloonmgr_passes_total" { n = $2 } END { exit !(n >= 4) }'; }
agent_wait passes_done
agent_stop
dec_re="^<6>balloonmgr: decision domain='[a-z0-9]*' action=inflate from_bytes=[0-9]* target_bytes=[0-9]* why=free reason='host needs [^']*; take [^']*' uuid=[0-9a-f-]*$"
decs=$(grep -c "$dec_re" "$tmp/dec.err")
chgs=$(grep -c "^<5>balloonmgr: change domain=.* direction=inflate " "$tmp/dec.err")
ok $(( chgs >= 3 && (decs == chgs || decs == chgs + 1) ? 0 : 1 )) \
    "agent: a <6> decision record with its reason for each inflate it started ($decs for $chgs changes)" \
    "$(grep -v 'change domain' "$tmp/dec.err" | head -8)"
for d in build1:paused db1:nothing-to-take; do
    ok $(grep -c "^<6>balloonmgr: decision domain='${d%%:*}' action=[a-z]* .* why=${d#*:} " "$tmp/dec.err" | grep -qx 1; echo $?) \
        "agent: ${d%%:*} left as it is (${d#*:}): one record in 4 passes"
done
web1=$(sed -n "s/^<6>balloonmgr: decision domain='web1' action=\([a-z]*\) .* why=\([a-z-]*\) .*/\1:\2/p" "$tmp/dec.err" | tr '\n' ' ')
ok $([ "$web1" = "inflate:free none:stats-predate " ]; echo $?) "agent: web1 inflated, then left as it is once in 4 passes ($web1)"

tap_done
