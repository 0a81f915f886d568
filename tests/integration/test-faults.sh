#!/usr/bin/env bash
# Faults on real guests, each with its observable outcome:
# - a domain busy in a long libvirt job (a live dump into a pipe nobody reads): `set` refuses
#   it at once instead of libvirt's 30 s job-lock wait; a policy pass skips it ("busy"),
#   inflates the other guest and ends in seconds; after the job ends the next pass inflates it;
# - a guest destroyed in the middle of an inflate (its vCPU throttled by a cgroup quota so the
#   inflate takes long enough to be caught in the middle): the agent counts that change as
#   failed, the other guest's change reaches its target, the agent keeps serving and passing.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
. "$(dirname "$0")/lib/prom.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
bm_setup

work=$BM_WORKDIR # kept if the test fails; $work/run is BALLOONMGR_RUNTIME_DIR (bm_setup)

bm_define_guest busy 512 touch=350 retouch=350
bm_define_guest free 512 touch=350
bm_wait_guest_ready busy
bm_wait_guest_ready free
busy=$(bm_dom busy) free=$(bm_dom free)
bm_wait_fresh_stats busy free
actual() { "$BM" -c "$BM_URI" status --json "$1" | jq '.domains[0].current_bytes'; }

bm_pressure_policy "$work/pressure.policy" 2s 50%

# a pass would inflate both (their freed memory in their statistics)
bm_wait_would_inflate "$busy $free" --policy "$work/pressure.policy"

# ---------------------------------------------------------------- busy in a long job
mkfifo "$work/dump.fifo"
sleep 600 <"$work/dump.fifo" &          # opens the pipe, never reads: the dump blocks
reader=$!
bm_add_cleanup "kill $reader 2>/dev/null || true"
bm_virsh dump --live "$busy" "$work/dump.fifo" >"$work/dump.log" 2>&1 &
dumper=$!
bm_add_cleanup "kill $dumper 2>/dev/null || true"
# (grep reads all of virsh's output: with grep -q under pipefail virsh could die of SIGPIPE)
dump_running() { bm_virsh domjobinfo "$busy" 2>/dev/null | grep "Operation: *Dump" >/dev/null; }
dump_started_or_ended() { dump_running || ! kill -0 "$dumper" 2>/dev/null; }
bm_wait_until 30 "the dump job of $busy" dump_started_or_ended || true
dump_running ||
    bm_fail "the dump job did not start: $(bm_virsh domjobinfo "$busy" 2>&1 | tr -s ' \n' ' '); virsh dump: $(cat "$work/dump.log")"
bm_log "$busy is busy: $(bm_virsh domjobinfo "$busy" | grep -E 'Job type|Operation' | tr -s ' ' | tr '\n' ' ')"

before_busy=$(actual "$busy")
t0=$(bm_now)
set +e
"$BM" -c "$BM_URI" set "$busy" 300M >/dev/null 2>"$work/err"; rc=$?
set -e
took=$(bm_elapsed "$t0")
cat "$work/err"
[ "$rc" -eq 1 ] && grep -q "set: '$busy': busy with a dump: libvirt lets no balloon change in" "$work/err" ||
    bm_fail "set on a busy domain: exit $rc, $(cat "$work/err")"
# not libvirt's answer after its 30 s wait for the job lock ("cannot acquire state change
# lock"), but ours, from the job check before the call; and the job still runs: set did not
# wait for it (an ordering: its time is printed, not bounded)
! grep -q "state change lock" "$work/err" && dump_running ||
    bm_fail "set on a busy domain went through libvirt's job-lock wait ($took s): $(cat "$work/err")"
bm_pass "set on a domain in a dump job: exit 1 from the job check, the job still running, after $took s (libvirt's own wait is 30 s)"

t0=$(bm_now)
"$BM" -c "$BM_URI" run --once --json --policy "$work/pressure.policy" --state "$work/state.json" \
    >"$work/run1.json" 2>"$work/run1.err" || bm_fail "run --once with a busy domain failed: $(cat "$work/run1.err")"
took=$(bm_elapsed "$t0")
cat "$work/run1.err"
jq -c --arg p "$BM_PREFIX" '.decisions[] | select(.name | startswith($p)) | {name, action, applied, busy, error}' "$work/run1.json"
jq -e --arg d "$busy" '.decisions[] | select(.name == $d) | .action == "inflate" and .busy and .applied == null
    and (.error | test("busy with a dump"))' "$work/run1.json" >/dev/null ||
    bm_fail "the busy domain was not skipped as busy"
jq -e --arg d "$free" '.decisions[] | select(.name == $d) | .action == "inflate" and .applied' "$work/run1.json" >/dev/null ||
    bm_fail "the other domain was not inflated"
grep -q "run: '$busy': busy with a dump: left alone this pass" "$work/run1.err" || bm_fail "no busy message"
[ "$(actual "$busy")" = "$before_busy" ] || bm_fail "the busy domain's balloon moved"
# the pass itself is the read, the decision and the set calls; run --once then waits for the
# free guest's inflate (seconds under TCG). Without the job check it would wait 30 s for
# the busy domain's job lock first and fail with libvirt's error, not skip it as busy (above)
! grep -q "state change lock" "$work/run1.err" && dump_running ||
    bm_fail "run --once went through libvirt's job-lock wait ($took s): $(cat "$work/run1.err")"
bm_pass "pass with a domain in a dump job: skipped as busy by the job check, the other inflated, run --once took $took s"

kill "$reader"
wait "$dumper" 2>/dev/null || true
no_job() { bm_virsh domjobinfo "$busy" 2>/dev/null | grep "Job type: *None" >/dev/null; }
bm_wait_until 10 "the dump job of $busy to end" no_job || true
# a state file of its own: the first pass's reading of the busy domain (taken during its job)
# would mark a balloon that rose since, and a guest given memory is not inflated again
"$BM" -c "$BM_URI" run --once --json --policy "$work/pressure.policy" --state "$work/state2.json" \
    >"$work/run2.json" 2>"$work/run2.err" || bm_fail "run --once after the job failed: $(cat "$work/run2.err")"
jq -e --arg d "$busy" '.decisions[] | select(.name == $d) | .action == "inflate" and .applied and (.busy | not)' \
    "$work/run2.json" >/dev/null || bm_fail "the formerly busy domain was not inflated after its job ended"
bm_pass "after the job ended the next pass inflated $busy"

# ---------------------------------------------------------------- destroyed mid-inflate
# the guest's retouch watch (it looks once a second) must have seen the balloon inflated before
# it deflates: its console says so
seen_inflated() { grep -q "bm: retouch: balloon inflated" "$(bm_console_log busy)"; }
BM_WAIT_INTERVAL=0.5 bm_wait_until 60 "$busy's retouch watch to see its balloon inflated" seen_inflated ||
    bm_fail "$busy's guest did not see its balloon inflated" 
"$BM" -c "$BM_URI" set "$busy" 100% --wait=60 >/dev/null
"$BM" -c "$BM_URI" set "$free" 100% --wait=60 >/dev/null
# memory a deflate gives back is not backed by the host until the guest touches it again (an
# inflate of it would return nothing, and balloonmgr knows it): the victim touches it again
retouched() { grep -q "bm: retouched" "$(bm_console_log busy)"; }
bm_wait_until 60 "$busy to touch its memory again" retouched || bm_fail "$busy did not touch its memory again"
bm_wait_fresh_stats busy free
victim=$busy
bm_wait_would_inflate "$victim" --policy "$work/pressure.policy"
# 5% of a CPU: the guest still reports its statistics, an inflate of 256 MiB takes ~10 s
bm_virsh schedinfo "$victim" --live vcpu_quota=5000 vcpu_period=100000 >/dev/null ||
    bm_fail "cannot throttle $victim (cgroup cpu controller?)"
# what a pass would do now (in the log, for a failure below)
"$BM" -c "$BM_URI" run --once --dry-run --json --policy "$work/pressure.policy" 2>/dev/null |
    jq -c --arg d "$victim" '.decisions[] | select(.name == $d) | {action, reason}' || true
bm_start_agent "$work/agent.log" "$BM" -c "$BM_URI" agent --policy "$work/pressure.policy" \
    --state "$work/agent-state.json" --listen 127.0.0.1:0
port=$(bm_agent_port "$work/agent.log")
metrics() { curl -sf "127.0.0.1:$port/metrics"; }
max=$((512 * 1024))
caught=""
inflating() { # the victim's balloon is on its way down: its size in $caught
    local a
    a=$(bm_memstat "$victim" actual 2>/dev/null || echo "$max")
    [ "$a" -lt $((max - 16 * 1024)) ] && caught=$a
}
bm_wait_until 30 "the agent to start inflating $victim" inflating ||
    bm_fail "the agent never started inflating $victim"
bm_virsh destroy "$victim" >/dev/null
bm_log "destroyed $victim with its balloon at $((caught / 1024)) MiB of 512 on its way down"
value() { metrics | awk -v k="$1" '$1 == k { print $2 }'; }
# value_at_least METRIC N: METRIC's value on /metrics is >= N
value_at_least() { local v; v=$(value "$1") && [ -n "$v" ] && [ "$v" -ge "$2" ]; }
failed=balloonmgr_balloon_changes_total'{device="balloon",direction="inflate",outcome="failed"}'
bm_wait_until 10 "an inflate counted as failed" value_at_least "$failed" 1 || true
metrics | grep '^balloonmgr_balloon_changes_total' || true
[ "$(value "$failed")" = 1 ] || bm_fail "the destroyed guest's inflate was not counted as failed"
# the other guest's memory, given back by its deflate and not touched since, is not backed by
# the host: the agent rightly leaves it alone (an inflate of it would return nothing), so what
# shows the agent going on after the destroy is its passes, below
passes=$(value balloonmgr_passes_total)
BM_WAIT_INTERVAL=0.2 bm_wait_until 10 "another pass" value_at_least balloonmgr_passes_total $((passes + 1)) ||
    bm_fail "passes stopped after the destroy"
kill -0 "$BM_AGENT_PID" || bm_fail "the agent died"
cat "$work/agent.log"
bm_pass "guest destroyed mid-inflate: its change failed, passes go on"
