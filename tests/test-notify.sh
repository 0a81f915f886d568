#!/usr/bin/env bash
# The agent and the service manager (Type=notify): a datagram unix socket stands in for systemd
# ($NOTIFY_SOCKET, as `systemd-notify` and sd_notify(3) use it; a path and an '@' abstract
# name), $WATCHDOG_USEC asks for pings. The agent speaks through libsystemd (sd_notify(3),
# sd_watchdog_enabled(3)): the binary imports both. The agent on libvirt's test driver must send READY=1
# with its first pass, a STATUS= line (mode, reclaimed, domains) each pass, WATCHDOG=1 at half
# the interval, and STOPPING=1 at SIGTERM; a WATCHDOG_PID of another process means no pings.
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
    for _ in $(seq 50); do [ -e "$2.bound" ] && return 0; sleep 0.1; done
    return 1
}

# agent ADDR OUT [ENV...]: runs the agent for 2 s with NOTIFY_SOCKET=ADDR, then SIGTERM;
# its exit status
agent() {
    local addr=$1 out=$2 rc; shift 2
    agent_start "$out.err" env NOTIFY_SOCKET="$addr" "$@" "$BM" -c "$HOST" agent --policy "$tmp/demo.policy" \
        --proc "$ROOT/demo/proc" --state "$tmp/state.json" --listen 127.0.0.1:0 || return 1
    sleep 2.5 # the watchdog's rate is counted over this time (this test is in the slow tier)
    kill -0 "$agent_pid" 2>/dev/null || return 1
    agent_stop; rc=$?
    sleep 0.3 # the listener writes what is still queued
    return "$rc"
}

listen "$tmp/notify" "$tmp/path.out"; ok $? "a datagram socket to listen on"
agent "$tmp/notify" "$tmp/path.out" WATCHDOG_USEC=400000; ok $? "agent with NOTIFY_SOCKET and WATCHDOG_USEC runs and stops with 0"
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
[ "$w" -ge 8 ] && [ "$w" -le 16 ]; ok $? "WATCHDOG=1 every 200 ms (half of WATCHDOG_USEC 400 ms): $w in about 2.5 s"
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
