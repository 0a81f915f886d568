#!/usr/bin/env bash
# The agent and the service manager (Type=notify): a datagram unix socket stands in for systemd
# ($NOTIFY_SOCKET, as `systemd-notify` and sd_notify(3) use it; a path and an '@' abstract
# name), $WATCHDOG_USEC asks for pings. The agent speaks through libsystemd (sd_notify(3),
# sd_watchdog_enabled(3)): the binary imports both. The agent on libvirt's test driver must send READY=1
# with its first pass, a STATUS= line (mode, reclaimed, domains) each pass, WATCHDOG=1 at half
# the interval (not sooner; counted over 8 pings waited for, never over a fixed time), and
# STOPPING=1 at SIGTERM; a WATCHDOG_PID of another process means no pings (over 3 passes).
# Usage: test-notify.sh BALLOONMGR SOURCE_ROOT   (TAP output)
set -u
BM=$(realpath "$1")
ROOT=$(realpath "$2")
HOST="test:///$ROOT/demo/host.xml"
tmp=$(mktemp -d)
export BALLOONMGR_RUNTIME_DIR=$tmp/run
# the demo's policy, a pass every second
sed 's/^interval = .*/interval = 1s/' "$ROOT/demo/demo.policy" >"$tmp/demo.policy"
pids=""
trap 'agent_stop; for p in $pids; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
. "$ROOT/tests/tap.sh"
. "$ROOT/tests/agent.sh"

# listen ADDR OUT: a datagram socket at ADDR ('@name': abstract) writing each message, with
# its newlines as '|', as one line of OUT; prints its pid once bound
listen() {
    python3 -c '
import socket, sys
addr, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + addr[1:] if addr.startswith("@") else addr)
open(out + ".bound", "w").close()
with open(out, "a", buffering=1) as f:
    while True:
        f.write(s.recv(4096).decode().replace("\n", "|") + "\n")
' "$1" "$2" &
    pids="$pids $!"
    wait_until test -e "$2.bound"
}

# passes OUT N: OUT has N STATUS= lines (N passes, a second apart: the policy's interval)
passes() { [ "$(grep -c 'STATUS=' "$1")" -ge "$2" ]; }
pings() { [ "$(grep -c '^WATCHDOG=1$' "$1")" -ge "$2" ]; } # pings OUT N
# agent ADDR OUT [ENV...]: runs the agent with NOTIFY_SOCKET=ADDR until its third pass (the
# listener's OUT says so; when nobody listens, until its warning about that), then SIGTERM;
# its exit status
agent() {
    local addr=$1 out=$2 rc; shift 2
    agent_start "$out.err" env NOTIFY_SOCKET="$addr" "$@" "$BM" -c "$HOST" agent --policy "$tmp/demo.policy" \
        --proc "$ROOT/demo/proc" --state "$tmp/state.json" --listen 127.0.0.1:0 || return 1
    if [ -e "$out.bound" ]; then
        agent_wait passes "$out" 3
    else
        agent_wait grep -q "warning: NOTIFY_SOCKET" "$out.err"
    fi
    kill -0 "$agent_pid" 2>/dev/null || return 1
    agent_stop; rc=$?
    [ ! -e "$out.bound" ] || wait_until grep -q '^STOPPING=1$' "$out" # what is still queued
    return "$rc"
}

listen "$tmp/notify" "$tmp/path.out"; ok $? "a datagram socket to listen on"
# the watchdog's pace, by a count: 8 pings, waited for, took at least 7 of its 200 ms periods
# (a busy machine makes them later, never sooner; how much later is no test's business)
pace_ok=1
start_pings() {
    agent_wait pings "$tmp/path.out" 8 || return 1
    local took_ms=$((($(date +%s%N) - started_ns) / 1000000))
    [ "$took_ms" -ge 1400 ] && pace_ok=0
    pace="8 pings in $took_ms ms"
}
agent_with_pings() {
    local rc
    started_ns=$(date +%s%N)
    agent_start "$tmp/path.out.err" env NOTIFY_SOCKET="$tmp/notify" WATCHDOG_USEC=400000 "$BM" -c "$HOST" agent \
        --policy "$tmp/demo.policy" --proc "$ROOT/demo/proc" --state "$tmp/state.json" --listen 127.0.0.1:0 || return 1
    start_pings
    agent_wait passes "$tmp/path.out" 3
    kill -0 "$agent_pid" 2>/dev/null || return 1
    agent_stop; rc=$?
    wait_until grep -q '^STOPPING=1$' "$tmp/path.out" # what is still queued
    return "$rc"
}
agent_with_pings; ok $? "agent with NOTIFY_SOCKET and WATCHDOG_USEC runs and stops with 0"
sort "$tmp/path.out" | uniq -c | sed 's/^ */# /' | head -8
# the demo host: 7 domains, 5 running, 13 GiB reclaimed before the first pass
head -1 "$tmp/path.out" | grep -qx 'READY=1|STATUS=mode reclaim, reclaimed 13 GiB, 7 domains (5 running)'
ok $? "the first message: READY=1 with the first pass's STATUS= ($(head -1 "$tmp/path.out"))"
ok $(grep -c '^READY=1' "$tmp/path.out" | grep -qx 1; echo $?) "READY=1 once"
# demo/proc is under pressure: the first pass inflates the demo's three idle domains, so the
# next passes read more reclaimed
later=$(grep '^STATUS=' "$tmp/path.out" | tail -1)
echo "$later" | grep -q '^STATUS=mode reclaim, reclaimed [0-9.]* GiB, 7 domains (5 running)$' &&
    awk -v r="$(echo "$later" | sed 's/.*reclaimed \([0-9.]*\) GiB.*/\1/')" 'BEGIN { exit !(r > 13) }'
ok $? "STATUS= of a later pass: what the first pass reclaimed too ($later)"
w=$(grep -c '^WATCHDOG=1$' "$tmp/path.out")
[ "$pace_ok" -eq 0 ]; ok $? "WATCHDOG=1 at half of WATCHDOG_USEC (400 ms), not sooner: ${pace:-no 8 pings} ($w in all)"
tail -1 "$tmp/path.out" | grep -qx 'STOPPING=1'; ok $? "STOPPING=1 last, at SIGTERM"
ok $(grep -c '' "$tmp/path.out.err" | grep -qx 0 || ! grep -qi notify "$tmp/path.out.err"; echo $?) "no notify warning on stderr"

# the abstract namespace; WATCHDOG_PID of another process: no pings for this one
listen "@bm-notify-test-$$" "$tmp/abs.out"; ok $? "an abstract datagram socket"
agent "@bm-notify-test-$$" "$tmp/abs.out" WATCHDOG_USEC=400000 WATCHDOG_PID=1; ok $? "agent with an @abstract NOTIFY_SOCKET"
grep -q '^READY=1|STATUS=mode ' "$tmp/abs.out"; ok $? "READY=1 through the abstract socket"
ok $(grep -c '^WATCHDOG=1$' "$tmp/abs.out" | grep -qx 0; echo $?) "WATCHDOG_PID=1 (not the agent): no watchdog pings"

# WATCHDOG_USEC that is not a number: sd_watchdog_enabled(3) refuses it, no pings
listen "$tmp/bad-usec" "$tmp/bad.out"; ok $? "a third socket"
agent "$tmp/bad-usec" "$tmp/bad.out" WATCHDOG_USEC=soon; ok $? "agent with WATCHDOG_USEC=soon"
grep -q '^READY=1|STATUS=mode ' "$tmp/bad.out" && ! grep -q '^WATCHDOG=1$' "$tmp/bad.out"
ok $? "WATCHDOG_USEC=soon: READY=1, no watchdog pings"

# the protocol is libsystemd's, not a copy of it
syms=$(nm -D --undefined-only "$BM" 2>/dev/null | awk '{ print $NF }')
grep -q '^sd_notify@' <<<"$syms" && grep -q '^sd_watchdog_enabled@' <<<"$syms"
ok $? "the binary imports sd_notify and sd_watchdog_enabled from libsystemd"

# a NOTIFY_SOCKET nobody listens on: one warning, the agent runs on
agent "$tmp/nobody" "$tmp/none.out"; ok $? "agent with a NOTIFY_SOCKET that does not exist runs and stops with 0"
ok $(grep -c "warning: NOTIFY_SOCKET '$tmp/nobody'" "$tmp/none.out.err" | grep -qx 1; echo $?) "  one warning naming the socket ($(head -c 160 "$tmp/none.out.err" | tr '\n' '|'))"
env NOTIFY_SOCKET="relative/path" "$BM" -c "$HOST" run --once --dry-run --policy "$tmp/demo.policy" \
    --proc "$ROOT/demo/proc" >/dev/null 2>"$tmp/rel.err"
ok $? "run --once ignores NOTIFY_SOCKET (only the agent is Type=notify)"

tap_done
