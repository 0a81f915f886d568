#!/usr/bin/env bash
# One writer per state file: the agent holds STATE.lock for its life and run --once for its
# run; a second writer (agent or run --once) exits 4 naming the PID and command line of the
# holder, before serving or changing anything, and the holder's counters are not lost.
# A dry run (never writes) reads the state while the agent runs. Test driver, no root.
# Usage: test-state-lock.sh BALLOONMGR SOURCE_ROOT   (TAP output)
set -u
BM=$1
ROOT=$2
. "$ROOT/tests/tap.sh"
. "$ROOT/tests/agent.sh"
command -v curl >/dev/null || tap_skip_all "curl is not installed"
DEMO="test://$ROOT/demo/host.xml"
T=$(mktemp -d)
export BALLOONMGR_RUNTIME_DIR=$T/run
mkdir -p "$T/run"
cleanup() {
    agent_stop
    rm -rf "$T"
}
trap cleanup EXIT
S=$T/state.json
RUN=(-c "$DEMO" run --once --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$S")
passes() { jq -r '.counters.passes' "$1" 2>/dev/null; }

# the agent, on a free port, until its first pass is saved
saved_and_serving() { [ -s "$S" ] && curl -sf "127.0.0.1:$agent_port/metrics" >/dev/null 2>&1; }
agent_start "$T/agent.log" "$BM" -c "$DEMO" agent --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" \
    --listen 127.0.0.1:0 --state "$S" && agent_wait saved_and_serving && apid=$agent_pid || apid=""
[ -n "$apid" ]; ok_files $? "an agent on $S serves and saved its state" "$T/agent.log"
[ "$(head -1 "$S.lock")" = "$apid" ]; ok_files $? "  its lock file $S.lock holds its PID" "$S.lock"

# ten run --once on the agent's state: each refused, nothing written
cp "$S" "$T/before.json"
bad=0 statuses=""
for i in $(seq 10); do
    "$BM" "${RUN[@]}" >"$T/out" 2>"$T/err"
    st=$?
    statuses="$statuses $st"
    [ "$st" -eq 4 ] || bad=1
    grep -qx "balloonmgr: run: state '$S': in use by PID $apid (.* agent .*) (lock '$S.lock'): one writer at a time" "$T/err" || bad=1
done
[ "$bad" = 0 ]; ok_files $? "ten run --once while the agent runs: each exits 4 naming the agent's PID (got$statuses)" "$T/err"
[ "$(grep -cv '^balloonmgr: \(change\|mode\) ' "$T/err")" -eq 1 ] && ! grep -q '^balloonmgr: \(change\|mode\) ' "$T/err"
ok_files $? "  in one line, before any pass (no change or mode record)" "$T/err"

# a second agent: refused before it serves
timeout 10 "$BM" -c "$DEMO" agent --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" \
    --listen 127.0.0.1:0 --state "$S" >"$T/out" 2>"$T/err2"
st=$?
[ "$st" -eq 4 ] && grep -qx "balloonmgr: agent: state '$S': in use by PID $apid (.* agent .*) (lock '$S.lock'): one writer at a time" "$T/err2"
ok_files $? "a second agent on the same state exits 4 naming the first (got $st)" "$T/err2"
! grep -q "serving /metrics" "$T/err2"; ok_files $? "  and never served" "$T/err2"

# a dry run reads the state and writes nothing: no lock needed
"$BM" "${RUN[@]}" --dry-run >"$T/out" 2>"$T/err"
st=$?
[ "$st" -eq 0 ]; ok_files $? "run --once --dry-run while the agent runs: exit 0 (got $st)" "$T/err"

# the agent's counters: all its passes, none lost to another writer
agent_stop; st=$?
[ "$st" -eq 0 ]; ok $? "the agent stops: exit 0 (got $st)"
agent_passes=$(passes "$S")
[ -n "$agent_passes" ] && [ "$agent_passes" -ge "$(passes "$T/before.json")" ]
ok $? "  its last save counts its own passes ($(passes "$T/before.json") -> $agent_passes)"

# the lock is free again: run --once works and counts one more pass
"$BM" "${RUN[@]}" >"$T/out" 2>"$T/err"
st=$?
[ "$st" -eq 0 ] && [ "$(passes "$S")" -eq $((agent_passes + 1)) ]
ok_files $? "after the agent, run --once: exit 0, passes $agent_passes -> $(passes "$S")" "$T/err"
[ "$(head -1 "$S.lock")" != "$apid" ]; ok $? "  the lock file names the last holder"

# a lock held by another process (this shell, through flock(1) on fd 9) whose PID is in the file
if command -v flock >/dev/null; then
    echo "$$" >"$S.lock"
    exec 9<"$S.lock"
    flock -n 9; ok $? "this test holds the lock (flock -n)"
    cp "$S" "$T/before.json"
    "$BM" "${RUN[@]}" >"$T/out" 2>"$T/err"
    st=$?
    [ "$st" -eq 4 ] && grep -qx "balloonmgr: run: state '$S': in use by PID $$ (.*test-state-lock.sh.*) (lock '$S.lock'): one writer at a time" "$T/err"
    ok_files $? "a lock held by another program: run --once exits 4 naming PID $$ (got $st)" "$T/err"
    cmp -s "$S" "$T/before.json"; ok $? "  the state file untouched"
    exec 9<&-
    "$BM" "${RUN[@]}" >"$T/out" 2>"$T/err"
    st=$?
    [ "$st" -eq 0 ]; ok_files $? "  released: run --once exits 0 (got $st)" "$T/err"
else
    for _ in 1 2 3 4; do tap_skip "flock(1) is not installed"; done
fi

# a lock file that is not a regular file is refused, never replaced
for kind in dir fifo link; do
    D=$T/$kind
    mkdir -p "$D"
    case $kind in
    dir) mkdir "$D/s.json.lock" ;;
    fifo) mkfifo "$D/s.json.lock" ;;
    link) ln -s "$T/elsewhere" "$D/s.json.lock" ;;
    esac
    timeout 10 "$BM" -c "$DEMO" run --once --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$D/s.json" >"$T/out" 2>"$T/err"
    st=$?
    [ "$st" -eq 1 ] && grep -q "^balloonmgr: run: state '$D/s.json': .*lock file '$D/s.json.lock'" "$T/err" && [ ! -e "$D/s.json" ]
    ok_files $? "a lock file that is a $kind: run --once exits 1 naming it, nothing written (got $st)" "$T/err"
done
[ ! -e "$T/elsewhere" ]; ok $? "  the link's target was not created"

tap_done
