#!/usr/bin/env bash
# The journal as systemd users read it (issue 23.7): a real systemd-journald, started in a
# private mount namespace (tmpfs on /run and /var/log/journal there: the host's journal, if
# any, is not touched), and balloonmgr's stdout and stderr connected to it by systemd-cat with
# JOURNAL_STREAM naming that stream, as systemd sets it for a unit. Then journalctl, in the
# same namespace, finds:
# - one change record per balloon change by BALLOONMGR_DOMAIN=, with MESSAGE_ID, PRIORITY 5,
#   BALLOONMGR_DIRECTION, _OUTCOME, _TARGET_BYTES, SYSLOG_IDENTIFIER=balloonmgr, and a message
#   that does not repeat them as key=value pairs or start with "balloonmgr:";
# - one mode-change record by its MESSAGE_ID; errors (a bad policy) by theirs, PRIORITY 3;
# - the pass's summary line (stdout) as one record; no "<N>" line (nothing fell back);
# - a domain name of 304 bytes whole in BALLOONMGR_DOMAIN (not cut at 255);
# - the agent's decision records (PRIORITY 6, BALLOONMGR_ACTION, _WHY, _REASON), a domain left
#   as it is once over several passes.
# Root only (mount namespace); skipped without systemd-journald, journalctl or systemd-cat.
# Usage: test-journal.sh BALLOONMGR SOURCE_ROOT   (TAP output)
set -u
BM=$(realpath "$1")
ROOT=$(realpath "$2")
. "$ROOT/tests/tap.sh"
JOURNALD=/lib/systemd/systemd-journald
[ "$(id -u)" -eq 0 ] || tap_skip_all "a private journald needs a mount namespace: root"
[ -x "$JOURNALD" ] && command -v journalctl >/dev/null && command -v systemd-cat >/dev/null &&
    command -v unshare >/dev/null && command -v jq >/dev/null || tap_skip_all "systemd-journald, journalctl, systemd-cat, unshare and jq are needed"
ID_CHANGE=3ba2784d5db84fee9b552b0a796039b4
ID_MODE=8f562104ddb4427b81a1019ee7c29548
ID_ERROR=08f0feab6db641d4ae9c86b7f29d1225
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# inside: the namespace's journald, the runs, journalctl's JSON into $tmp
cat >"$tmp/inside.sh" <<'INSIDE'
set -u
BM=$1 ROOT=$2 tmp=$3
mount -t tmpfs bm-test-run /run || exit 10
mkdir -p /run/systemd/journal /run/log/journal
[ -d /var/log/journal ] && { mount -t tmpfs bm-test-journal /var/log/journal || exit 10; }
/lib/systemd/systemd-journald >"$tmp/journald.log" 2>&1 &
jpid=$!
for _ in $(seq $((100 * ${BM_TIMEOUT_MULTIPLIER:-1}))); do [ -S /run/systemd/journal/socket ] && [ -S /run/systemd/journal/stdout ] && break; sleep 0.1; done
[ -S /run/systemd/journal/stdout ] || { kill "$jpid"; exit 11; }
# as a unit's ExecStart: stdout and stderr the journal's stream, JOURNAL_STREAM naming it
as_unit() { systemd-cat -t bm-test bash -c 'export JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2); exec "$@"' bash "$@"; }
export BALLOONMGR_RUNTIME_DIR=$tmp/run
as_unit "$BM" -c "test://$ROOT/demo/host.xml" run --once --policy "$ROOT/demo/demo.policy" \
    --proc "$ROOT/demo/proc" --state "$tmp/state.json"
echo "$?" >"$tmp/run.rc"
printf '[host]\nreclaim_below = lots\n' >"$tmp/bad.policy"
as_unit "$BM" -c "test://$ROOT/demo/host.xml" run --once --policy "$tmp/bad.policy" --proc "$ROOT/demo/proc"
echo "$?" >"$tmp/bad.rc"
# every record written before journalctl reads (journald took them in order of arrival)
for _ in $(seq $((50 * ${BM_TIMEOUT_MULTIPLIER:-1}))); do
    journalctl --no-pager -o json MESSAGE_ID=08f0feab6db641d4ae9c86b7f29d1225 2>/dev/null | grep -q . && break
    sleep 0.1
done
journalctl --no-pager -o json BALLOONMGR_DOMAIN=web2 >"$tmp/web2.json"
journalctl --no-pager -o json MESSAGE_ID=3ba2784d5db84fee9b552b0a796039b4 >"$tmp/changes.json"
journalctl --no-pager -o json MESSAGE_ID=8f562104ddb4427b81a1019ee7c29548 >"$tmp/mode.json"
journalctl --no-pager -o json MESSAGE_ID=08f0feab6db641d4ae9c86b7f29d1225 >"$tmp/errors.json"
journalctl --no-pager -o json -t balloonmgr -t bm-test >"$tmp/all.json"
# a name of 304 bytes: BALLOONMGR_DOMAIN is all of it (the name as libvirt has it)
long=$(printf 'a%.0s' $(seq 300))-web
sed "s|<name>web2</name>|<name>$long</name>|" "$ROOT/demo/host.xml" >"$tmp/long.xml"
as_unit "$BM" -c "test://$tmp/long.xml" run --once --policy "$ROOT/demo/demo.policy" \
    --proc "$ROOT/demo/proc" --state "$tmp/state-long.json"
for _ in $(seq $((50 * ${BM_TIMEOUT_MULTIPLIER:-1}))); do
    journalctl --no-pager -o json BALLOONMGR_DOMAIN_UUID=3b1e2a50-6d1f-4a0e-9a51-000000000002 2>/dev/null | grep -q "$long" && break
    sleep 0.1 # poll: until journald has the record
done
journalctl --no-pager -o json BALLOONMGR_DOMAIN="$long" >"$tmp/long.json"
# the agent's decisions: its passes every second on the demo host, stopped once db1's record
# (left as it is) and an inflate's are in (or the guard passes)
sed 's/^interval = .*/interval = 1s/' "$ROOT/demo/demo.policy" >"$tmp/fast.policy"
as_unit "$BM" -c "test://$ROOT/demo/host.xml" agent --policy "$tmp/fast.policy" \
    --proc "$ROOT/demo/proc" --state "$tmp/agent.json" --listen 127.0.0.1:0 &
apid=$!
for _ in $(seq $((100 * ${BM_TIMEOUT_MULTIPLIER:-1}))); do
    journalctl --no-pager -o json MESSAGE_ID=6c00230db7734be9b69ca3effe535c84 BALLOONMGR_DOMAIN=db1 2>/dev/null | grep -q . &&
        journalctl --no-pager -o json MESSAGE_ID=6c00230db7734be9b69ca3effe535c84 BALLOONMGR_DOMAIN=web2 2>/dev/null | grep -q . && break
    sleep 0.1 # poll: until journald has both records
done
sleep 3 # three more passes: a steady host logs db1 no more
kill "$apid"; wait "$apid"
journalctl --no-pager -o json MESSAGE_ID=6c00230db7734be9b69ca3effe535c84 >"$tmp/decisions.json"
kill "$jpid"; wait "$jpid"
exit 0
INSIDE
unshare -m --propagation private bash "$tmp/inside.sh" "$BM" "$ROOT" "$tmp"
rc=$?
ok $rc "a private systemd-journald ran in a mount namespace (exit $rc)" "$(cat "$tmp/journald.log" 2>/dev/null)"
[ "$rc" -eq 0 ] || tap_done
ok "$(cat "$tmp/run.rc")" "run --once as a unit would run it exits 0"

# the timer inflates cache1 and web2 of the demo host (web1 has no deflate-on-oom: timer_inflate)
ok $([ "$(jq -s 'length' "$tmp/web2.json")" -eq 1 ]; echo $?) "journalctl BALLOONMGR_DOMAIN=web2: one record" "$(cat "$tmp/web2.json")"
target=$(jq -r '.BALLOONMGR_TARGET_BYTES' "$tmp/web2.json")
jq -e --arg id "$ID_CHANGE" '.MESSAGE_ID == $id and .PRIORITY == "5" and .SYSLOG_IDENTIFIER == "balloonmgr" and
    .BALLOONMGR_DOMAIN == "web2" and .BALLOONMGR_DIRECTION == "inflate" and .BALLOONMGR_OUTCOME == "reached" and
    .BALLOONMGR_FROM_BYTES == "4294967296" and (.BALLOONMGR_TARGET_BYTES | tonumber) < 4294967296 and
    .BALLOONMGR_REACHED_BYTES == .BALLOONMGR_TARGET_BYTES' "$tmp/web2.json" >/dev/null
ok_files $? "  the change record: MESSAGE_ID, PRIORITY 5, domain, direction, outcome, from and target bytes" "$tmp/web2.json"
jq -e '.MESSAGE | (startswith("balloonmgr:") or test("domain=|direction=|outcome=|target_bytes=")) | not' "$tmp/web2.json" >/dev/null
ok $? "  its message repeats no field as key=value: $(jq -r .MESSAGE "$tmp/web2.json")"
ok $([ "$(jq -s '[.[].BALLOONMGR_DOMAIN] | sort == ["cache1","web2"]' "$tmp/changes.json")" = true ]; echo $?) \
    "journalctl MESSAGE_ID=<change>: the two changes of the pass (target of web2: $target)" "$(cat "$tmp/changes.json")"
jq -s -e 'length == 1 and .[0].BALLOONMGR_MODE == "reclaim" and .[0].BALLOONMGR_MODE_FROM == "hold" and .[0].PRIORITY == "5"' "$tmp/mode.json" >/dev/null
ok_files $? "journalctl MESSAGE_ID=<mode change>: hold -> reclaim, once" "$tmp/mode.json"
ok $([ "$(cat "$tmp/bad.rc")" -eq 2 ]; echo $?) "a bad policy exits 2"
jq -s -e --arg p "$tmp/bad.policy" 'length >= 2 and all(.[]; .PRIORITY == "3") and
    any(.[]; .MESSAGE == "run: policy '"'"'\($p)'"'"' has errors: nothing changed")' "$tmp/errors.json" >/dev/null
ok_files $? "journalctl MESSAGE_ID=<error>: its errors, PRIORITY 3, one record a line" "$tmp/errors.json"
jq -s -e 'map(select(.SYSLOG_IDENTIFIER == "bm-test")) | length == 1 and (.[0].MESSAGE | startswith("pass: mode reclaim"))' "$tmp/all.json" >/dev/null
ok $? "the pass's summary line (stdout) is one record" "$(jq -r '.SYSLOG_IDENTIFIER + ": " + .MESSAGE' "$tmp/all.json")"
jq -s -e 'all(.[]; .MESSAGE | test("^<[0-7]>") | not)' "$tmp/all.json" >/dev/null
ok $? "no record fell back to a <N> line"
jq -s -e --arg n "$(printf 'a%.0s' $(seq 300))-web" 'length == 1 and .[0].BALLOONMGR_DOMAIN == $n' "$tmp/long.json" >/dev/null
ok_files $? "a name of 304 bytes: journalctl BALLOONMGR_DOMAIN=NAME finds its record, the field the whole name" "$tmp/long.json"

# the agent's decisions: info records with their fields; db1 left as it is once
ID_DECISION=6c00230db7734be9b69ca3effe535c84
jq -s -e --arg id "$ID_DECISION" 'map(select(.BALLOONMGR_DOMAIN == "web2" and .BALLOONMGR_ACTION == "inflate")) | length == 1 and .[0].MESSAGE_ID == $id and
    .[0].PRIORITY == "6" and .[0].BALLOONMGR_WHY == "free" and
    .[0].BALLOONMGR_FROM_BYTES == "4294967296" and (.[0].BALLOONMGR_REASON | startswith("host needs")) and
    (.[0].MESSAGE | startswith("web2: inflate from 4 GiB to "))' "$tmp/decisions.json" >/dev/null
ok_files $? "the agent's decision to inflate web2: one, PRIORITY 6, why, from bytes, reason, the message in words" "$tmp/decisions.json"
jq -s -e 'map(select(.BALLOONMGR_DOMAIN == "db1")) | length == 1 and .[0].BALLOONMGR_ACTION == "none" and
    .[0].BALLOONMGR_WHY == "nothing-to-take" and (.[0].MESSAGE | startswith("db1: left as it is (nothing-to-take): nothing to take"))' \
    "$tmp/decisions.json" >/dev/null
ok $? "db1 left as it is: one record over the agent's passes ($(jq -s 'map(select(.BALLOONMGR_DOMAIN == "db1")) | length' "$tmp/decisions.json"))"
tap_done
