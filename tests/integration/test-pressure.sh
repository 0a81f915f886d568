#!/usr/bin/env bash
# The closed loop under real memory pressure (issues #14, #21), the short form of
# bench/scenario.sh: five 1 GiB guests (idle after touching and freeing 800 MiB, never touched,
# steady 384 MiB, one that grows from 96 to 700 MiB while ballooned, one whose memory is 600 MiB
# of page cache), a host process taking the real MemAvailable below default.policy's
# reclaim_below (never below 1.5 GiB), then ending.
# With the agent (default.policy, interval 2s, stats every 1 s):
#   - no guest workload is OOM-killed, no guest panics;
#   - the host is relieved: MemAvailable comes back above reclaim_below before the hog ends (an
#     ordering of the two events, no margin in seconds)
#     (from the first reading below it: a sample, or the agent's own reading in its mode record
#     "to=reclaim reason='host MemAvailable ... < reclaim_below ...'": an agent that relieves
#     the host within a second may leave no 1 s sample below it);
#   - the host gets back at least 0.7 GiB of QEMU RSS per GiB inflated (the bench's target is
#     0.9; a generous bound for a shared machine);
#   - the grower, ballooned when its demand steps up, gets room, with no OOM kill (how
#     soon is bench/scenario.sh's: its target is a median of 5 s; a busy machine's TCG guests
#     and agent are slower, which is no failure of the policy);
#   - nothing moves in the steady phase;
#   - after the pressure, at least half of what the balloons held is given back;
#   - (issue 53) the idle guest is 256 MiB and a 768 MiB virtio-mem device (BM_SCENARIO_VMEM=1,
#     moved through the device by `device = virtio-mem`): it unplugs at least 128 MiB, in whole
#     2 MiB blocks, never below its base, and its QEMU RSS falls by at least 0.7 of it (the
#     timer run checks the same, with `timer_inflate = always` for that guest: it cannot plug
#     by itself between two timer runs, so the default leaves it to the agent);
#   - at most one balloon reversal per domain in the pressure episode (in the samples and in
#     the agent's change records).
# The control run (no agent, one `virsh setmem` per guest when the pressure begins) must
# show the failure the agent avoids: the grower's workload is OOM-killed.
# The timer run (run --once every timer_interval, as balloonmgr-policy.timer; issue #21; here
# every 20 s, default.policy with timer_interval = 20s: the checks count timer runs, and at the
# shipped 60 s the run takes 2-3 minutes longer; bench/scenario.sh runs the timer at 60 s):
#   - no guest workload OOM-killed, no allocation failure, every guest running;
#   - the host is relieved within 2 timer runs of MemAvailable crossing reclaim_below (before
#     the hog ends: the scenario holds the pressure until 15 s after the 2nd run);
#   - nothing is still ballooned 2 timer runs after the host is comfortable (MemAvailable above
#     release_above; read 15 s after the start of the 2nd run);
#   - at most one balloon reversal per domain in the pressure episode.
# The agent-fpr run (the agent, every guest with freePageReporting='on'):
#   - no guest workload OOM-killed, no panic, every guest running;
#   - the premise: reporting returned freed memory at rest (its QEMU RSS at rest at least
#     256 MiB below the agent run's);
#   - the agent takes what reporting cannot: the QEMU processes' lowest total RSS under
#     pressure at least 256 MiB below their total at rest. (The issue's bound, <= 0.8 x the fpr
#     mode's, needs an fpr run: bench/scenario.sh bench compares them.)
# Each run boots its guests (30-90 s on two loaded cores), then 20 s steady (10 agent passes;
# the grower freed its 600 MiB 10 s before it ends), 125 s pressure (bench/scenario.sh --short
# with BM_SCENARIO_AFTER=35: the demand step 90 s into it, its ramp to 700 MiB over 24 s, 11 s
# more; the crossing of reclaim_below came 33-105 s into it in the bench's runs), 30 s release
# (the agent gives back within 2 passes of comfort); the timer's pressure is extended until 2
# runs after the crossing (+5-55 s at 20 s a run) and its release is 65 s: 4-5 minutes a run.
# BM_PRESSURE_MODES="agent ...": run and check only these of control, agent, timer and
# agent-fpr. The default, in the suite: agent, timer and agent-fpr (about 12 minutes); the
# agent run is test-stack-trixie's too (the agent alone, on Debian 13's QEMU, libvirt and
# kernel: the fleet's stack); the control run, the premise that the scenario hurts without balloonmgr, is the
# bench's (bench/scenario.sh bench: 3 runs a mode) and each agent run checks its own premise
# (the grower ballooned when its demand steps up). All four: BM_PRESSURE_MODES="control agent
# timer agent-fpr" (about 20 minutes).
# BM_PRESSURE_KEEP=DIR: copy the runs' JSON (control.json, agent.json, timer.json,
# agent-fpr.json) into DIR. BM_PRESSURE_FROM=DIR: run nothing, check the runs in DIR (the same
# four files, from bench/scenario.sh run MODE DIR/MODE.json --short or BM_PRESSURE_KEEP).
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
ROOT=${BM_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
bm_require_root
modes=" ${BM_PRESSURE_MODES:-agent timer agent-fpr} "
for m in $modes; do
    case "$m" in control|agent|timer|agent-fpr) ;; *) bm_fail "BM_PRESSURE_MODES: mode '$m': expected control, agent, timer or agent-fpr" ;; esac
done
want() { case "$modes" in *" $1 "*) return 0 ;; esac; return 1; }
if [ -n "${BM_PRESSURE_FROM:-}" ]; then
    out=$BM_PRESSURE_FROM
    bm_log "checking the runs in $out (BM_PRESSURE_FROM), running none"
else
    out=$(mktemp -d /var/tmp/balloonmgr-pressure.XXXXXX)
    # the five guests only: the hot guest of issue #32 re-reads its disk with a vCPU of its own
    # at 100% (two cores here); its work is measured by bench/scenario.sh bench, its handling
    # checked by test-hotcache
    export BM_SCENARIO_HOT=${BM_SCENARIO_HOT:-none}
    # 35 s of pressure after the demand step, not --short's 50 (its ramp ends 24 s in): 45 s
    # less over the suite's three runs
    export BM_SCENARIO_AFTER=${BM_SCENARIO_AFTER:-35}

    if want control; then
        bm_log "control run (no agent)"
        BM_PREFIX=bmpc-$$- BM_WORKDIR=$out/control-work "$ROOT/bench/scenario.sh" run control "$out/control.json" --short ||
            bm_fail "the control run did not complete (logs in $out)"
    fi
    if want agent; then
        bm_log "agent run (the idle guest through virtio-mem)"
        BM_SCENARIO_VMEM=1 BM_PREFIX=bmpa-$$- BM_WORKDIR=$out/agent-work "$ROOT/bench/scenario.sh" run agent "$out/agent.json" --short ||
            bm_fail "the agent run did not complete (logs in $out)"
    fi
    if want timer; then
        bm_log "timer run (run --once every 20 s; the idle guest through virtio-mem)"
        sed 's/^timer_interval = .*/timer_interval = 20s/' "${BM_SCENARIO_POLICY:-$ROOT/policies/default.policy}" \
            >"$out/timer.policy"
        grep -q '^timer_interval = 20s$' "$out/timer.policy" || bm_fail "no timer_interval line in the policy to set"
        BM_SCENARIO_VMEM=1 BM_SCENARIO_POLICY=$out/timer.policy BM_PREFIX=bmpt-$$- BM_WORKDIR=$out/timer-work \
            "$ROOT/bench/scenario.sh" run timer "$out/timer.json" --short ||
            bm_fail "the timer run did not complete (logs in $out)"
    fi
    if want agent-fpr; then
        bm_log "agent-fpr run (the agent, free page reporting on in every guest)"
        BM_PREFIX=bmpf-$$- BM_WORKDIR=$out/agent-fpr-work "$ROOT/bench/scenario.sh" run agent-fpr "$out/agent-fpr.json" --short ||
            bm_fail "the agent-fpr run did not complete (logs in $out)"
    fi
fi

fails=0
check() { # check NAME JQ_EXPR FILE: the expression must be true (checks of a mode not run: none)
    local name=$1 expr=$2 file=$3
    want "${name%%:*}" || return 0
    if jq -e "$expr" "$file" >/dev/null; then
        bm_pass "$name"
    else
        echo "FAIL: $name ($(jq -c "$4" "$file" 2>/dev/null))" >&2
        fails=$((fails + 1))
    fi
}
A=$out/agent.json C=$out/control.json T=$out/timer.json F=$out/agent-fpr.json
check "control: the grower's workload is OOM-killed without the agent" \
    '.guests.grower.oom_kills >= 1 or .guests.grower.panic' "$C" '.guests.grower'
check "agent: no guest workload OOM-killed, no panic, every guest running" \
    '[.guests[] | select(.oom_kills > 0 or .panic or .final_state != "running")] | length == 0' "$A" \
    '.guests | map_values({oom_kills, panic, final_state})'
check "agent: the host is relieved: MemAvailable back above reclaim_below before the hog ends" \
    '.host.relief.below and .host.relief.to != null and .host.relief.to < .phases.pressure[1]' "$A" \
    '{relief: .host.relief, pressure: .phases.pressure, unmet_bytes_max: .host.unmet_bytes_max}'
check "agent: >= 0.7 GiB of QEMU RSS back per GiB inflated" \
    '.host.balloon_reclaimed_bytes > 0 and .host.rss_dropped_bytes >= 0.7 * .host.balloon_reclaimed_bytes' "$A" \
    '.host | {balloon_reclaimed_bytes, rss_dropped_bytes}'
check "agent: the grower was ballooned when its demand stepped up (the premise)" \
    '.give_back.grower_ballooned_at_step == true' "$A" '.give_back'
check "agent: the grower got room after its demand step (no OOM kill above; how soon: printed)" \
    '.give_back.latency_s != null' "$A" '.give_back'
check "agent: no balloon moved in the steady phase" \
    '[.guests[] | .steady_changes_per_min] | max == 0' "$A" '.guests | map_values(.steady_changes_per_min)'
check "agent: after the pressure, at least half of what the balloons held is given back" \
    '([.guests[] | .release_end_reclaimed_bytes] | add) <= 0.5 * ([.guests[] | .max_bytes - .min_current_bytes] | add)' "$A" \
    '.guests | map_values({release_end_reclaimed_bytes, min_current_bytes})'
# (jq: null <= 1 is true; a reversal count that was not measured must fail)
ONE_REVERSAL='.host.reversals.samples_max != null and .host.reversals.samples_max <= 1 and
    .host.reversals.records_max != null and .host.reversals.records_max <= 1'
check "agent: at most one balloon reversal per domain in the pressure episode" \
    "$ONE_REVERSAL" "$A" '.host.reversals'

# issue 53: the idle guest (256 MiB and a 768 MiB virtio-mem device, all plugged, 800 MiB touched
# and freed) is moved through virtio-mem by the agent and by the timer; what it unplugged comes
# back to the host as its QEMU RSS falls (the same bound as the balloons' above)
VMEM_UNPLUGGED='.vmem_guest == "idle" and (.guests.idle | (.max_bytes - .min_current_bytes) as $u |
    $u >= 128 * 1048576 and $u % (2 * 1048576) == 0 and .min_current_bytes >= 256 * 1048576 and
    .rss_at_rest_bytes != null and .min_rss_under_pressure_bytes != null and
    .rss_at_rest_bytes - .min_rss_under_pressure_bytes >= 0.7 * $u)'
VMEM_SHOW='{vmem_guest, idle: (.guests.idle | {max_bytes, min_current_bytes, rss_at_rest_bytes, min_rss_under_pressure_bytes, release_end_reclaimed_bytes})}'
check "agent: the virtio-mem guest unplugged >= 128 MiB in whole 2 MiB blocks, never below its base, its QEMU RSS down by >= 0.7 of it" \
    "$VMEM_UNPLUGGED" "$A" "$VMEM_SHOW"
check "timer: the virtio-mem guest unplugged >= 128 MiB in whole 2 MiB blocks, never below its base, its QEMU RSS down by >= 0.7 of it" \
    "$VMEM_UNPLUGGED" "$T" "$VMEM_SHOW"

check "timer: no guest workload OOM-killed, no allocation failure, no panic, every guest running" \
    '[.guests[] | select(.oom_kills > 0 or .allocation_failures > 0 or .panic or .final_state != "running")] | length == 0' "$T" \
    '.guests | map_values({oom_kills, allocation_failures, panic, final_state})'
# (relief when the hog ends is not the timer's: the scenario keeps the pressure on until 15 s
# after the 2nd timer run that can follow the crossing)
check "timer: the host is relieved within 2 timer runs of MemAvailable crossing reclaim_below, before the hog ends" \
    '.host.relief.below and .host.relief.to != null and .host.relief.to < .phases.pressure[1] and
     .host.relief.passes != null and .host.relief.passes <= 2' "$T" \
    '{relief: .host.relief, pressure: .phases.pressure, timer_passes}'
check "timer: nothing still ballooned 2 timer runs after the host is comfortable" \
    '.host.after_comfortable.still_ballooned_bytes == 0' "$T" \
    '{after_comfortable: .host.after_comfortable, timer_passes, end: (.guests | map_values(.end_current_bytes))}'
check "timer: at most one balloon reversal per domain in the pressure episode" \
    "$ONE_REVERSAL" "$T" '.host.reversals'

check "agent-fpr: no guest workload OOM-killed, no panic, every guest running" \
    '[.guests[] | select(.oom_kills > 0 or .panic or .final_state != "running")] | length == 0' "$F" \
    '.guests | map_values({oom_kills, panic, final_state})'
# (without reporting the two hold at rest all they touched: 1020 and 813 MiB in the kept
# reference run, bench/scenario/reference/agent-1.json; with it 262 and 340 MiB)
check "agent-fpr: the premise: reporting returned freed memory at rest (idle and grower, which touched and freed 800 and 600 MiB, hold at least 512 MiB less at rest)" \
    '(.guests.idle.rss_at_rest_bytes // null) != null and (.guests.grower.rss_at_rest_bytes // null) != null and
     .guests.idle.rss_at_rest_bytes + .guests.grower.rss_at_rest_bytes <= (800 + 600 - 512) * 1048576' "$F" \
    '.guests | map_values(.rss_at_rest_bytes)'
check "agent-fpr: the lowest QEMU RSS under pressure is >= 256 MiB below the RSS at rest" \
    '.host.qemu_rss.at_rest_bytes != null and .host.qemu_rss.min_under_pressure_bytes != null and
     .host.qemu_rss.min_under_pressure_bytes <= .host.qemu_rss.at_rest_bytes - 256 * 1048576' "$F" '.host.qemu_rss'
"$ROOT/bench/scenario.sh" table "$out" || true
if [ -n "${BM_PRESSURE_KEEP:-}" ]; then
    mkdir -p "$BM_PRESSURE_KEEP"
    for f in "$A" "$C" "$T" "$F"; do [ ! -f "$f" ] || cp "$f" "$BM_PRESSURE_KEEP/"; done
fi
if [ "$fails" -gt 0 ]; then
    bm_fail "$fails check(s) failed; runs in $out"
fi
[ -n "${BM_PRESSURE_FROM:-}" ] || rm -rf "$out"
bm_pass "runs of$(printf ' %s' $modes): every check held"
