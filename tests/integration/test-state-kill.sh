#!/usr/bin/env bash
# The agent killed (SIGKILL) while it saves its state file, on libvirt's test driver (no
# libvirtd): a host of BM_KILL_DOMAINS (2000) domains makes a state file of about 1 MB, the
# policy's interval is 1 s (the minimum), and the agent is killed at a random moment, again and
# again:
# - phase 1, BM_KILLS (25) kills with the agent under strace, every fsync() delayed by
#   300 ms (strace fault injection: the write path is the production one, only slower), so
#   that many kills land while a temporary file exists;
# - phase 2, BM_KILLS kills without strace: the real window.
# After every kill the state file parses, is whole (every running domain) and a dry run reads
# it without a warning. A kill that left a temporary file (one written after that agent
# started) landed mid-write; they are counted, and every start removes those at least 2 s old:
# at the end every one of them was removed, and said so.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
ROOT=${BM_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
KILLS=${BM_KILLS:-25}
DOMAINS=${BM_KILL_DOMAINS:-2000}
command -v jq >/dev/null || bm_skip "jq is needed"

BM_WORKDIR=$(mktemp -d /tmp/bm-state-kill.XXXXXX)
work=$BM_WORKDIR
bm_cleanup_at_exit

export BALLOONMGR_RUNTIME_DIR=$work/run
"$ROOT/bench/gen-node.sh" "$DOMAINS" >"$work/node.xml"
uri="test://$work/node.xml"
running=$((DOMAINS - DOMAINS / 10)) # gen-node.sh shuts every tenth domain off
printf '[host]\ninterval = 1s\n[guest]\nmax_stats_age = off\n' >"$work/p.policy"
state=$work/state/state.json
run_once() { # run_once [-c URI] [options...]: rc, stderr in $work/err
    local u=$uri
    if [ "${1:-}" = -c ]; then u=$2; shift 2; fi
    set +e
    "$BM" -c "$u" run --once --policy "$work/p.policy" --proc "$ROOT/demo/proc" --state "$state" \
        "$@" >/dev/null 2>"$work/err"
    rc=$?
    set -e
}
temps() { find "$work/state" -maxdepth 1 -name 'state.json.tmp.*' | wc -l; }
check_state() { # check_state WHAT: the state file parses, is whole, and reads without a warning
    jq -e --argjson n "$running" '.version == 1 and (.domains | length) == $n' "$state" >/dev/null ||
        bm_fail "$1: the state file is not a whole state ($(stat -c %s "$state") bytes)"
    # (on the demo host: reading the state is the same, the 2000 domains' pass is not needed)
    run_once -c "test://$ROOT/demo/host.xml" --dry-run
    if [ "$rc" -ne 0 ] || grep -q warning "$work/err"; then
        cat "$work/err"
        bm_fail "$1: a dry run exits $rc or warns"
    fi
}

run_once
[ "$rc" -eq 0 ] || { cat "$work/err"; bm_fail "first run --once exited $rc"; }
check_state "first state"
bm_log "$DOMAINS domains ($running running), state file $(stat -c %s "$state") bytes"

# one_kill TRACED: start the agent (under strace when TRACED=1), wait until it is connected,
# kill -9 it at a random moment within the next 2 s (about two passes and saves), check.
mid=0 kills=0 removed=0
connected_or_dead() { grep -q "connected to" "$work/agent.log" || ! bm_agent_alive; }
one_kill() {
    local traced=$1 delay n new
    local agent=("$BM" -c "$uri" agent --policy "$work/p.policy" --proc "$ROOT/demo/proc"
                 --listen 127.0.0.1:0 --state "$state")
    touch "$work/start.stamp"
    if [ "$traced" = 1 ]; then
        bm_start_agent --child "$work/agent.log" strace -f -qq -o /dev/null -e trace=fsync \
            -e inject=fsync:delay_enter=300000 "${agent[@]}"
    else
        bm_start_agent "$work/agent.log" "${agent[@]}"
    fi
    BM_WAIT_INTERVAL=0.01 bm_wait_until 15 "the agent to connect" connected_or_dead || true
    bm_agent_alive || { cat "$work/agent.log"; bm_fail "the agent died"; }
    delay=$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", r / 32767 * 2 }')
    sleep "$delay"
    bm_stop_agent KILL || bm_fail "the agent outlived SIGKILL"
    kills=$((kills + 1))
    n=$(sed -n 's/.*removed \([0-9]*\) temporary file(s) left by interrupted writes$/\1/p' "$work/agent.log")
    removed=$((removed + ${n:-0}))
    new=$(find "$work/state" -maxdepth 1 -name 'state.json.tmp.*' -newer "$work/start.stamp")
    if [ -n "$new" ]; then
        mid=$((mid + 1))
        bm_log "kill $kills at +${delay}s landed mid-write (temporary file of $(stat -c %s "$new") bytes left)"
    fi
    check_state "kill $kills (+${delay}s)"
}

total_mid=0 total_removed=0
if command -v strace >/dev/null; then
    for ((k = 0; k < KILLS; k++)); do one_kill 1; done
    bm_pass "phase 1 (fsync delayed 300 ms by strace): $kills kills, $mid mid-write, the state file whole after each"
    [ "$mid" -gt 0 ] || bm_fail "no kill landed mid-write: the test proved nothing"
    total_mid=$mid total_removed=$removed
else
    bm_log "strace not installed: phase 1 skipped"
fi
mid=0 kills=0 removed=0
for ((k = 0; k < KILLS; k++)); do one_kill 0; done
bm_pass "phase 2 (no strace): $kills kills, $mid mid-write, the state file whole after each"
total_mid=$((total_mid + mid)) total_removed=$((total_removed + removed))

# the leftovers of killed writers: removed by the starts after them once 2 s old
left=$(temps)
bm_log "$total_mid kills landed mid-write; the agents' starts removed $total_removed temporary files, $left left"
[ $((total_removed + left)) -eq "$total_mid" ] ||
    bm_fail "$total_removed removed + $left left is not the $total_mid mid-write kills"
sleep 2
run_once
cat "$work/err"
[ "$rc" -eq 0 ] || bm_fail "run --once after the kills exited $rc"
if [ "$left" -gt 0 ]; then
    grep -qx "balloonmgr: run: state '$state': removed $left temporary file(s) left by interrupted writes" "$work/err" ||
        bm_fail "no message about the $left temporary files removed"
fi
[ "$(temps)" -eq 0 ] || bm_fail "temporary files still there: $(temps)"
check_state "after the cleanup"
bm_pass "the $total_mid temporary files of killed writers were removed ($total_removed by agent starts, $left by the last run); the state reads cleanly"
