#!/usr/bin/env bash
# No tainted domains: on a real guest with a stock balloon (no <qemu:override> of sg/ioeventfd),
# the default `status`, `run --once` and the agent send no QEMU monitor command, so libvirt
# does not mark the domain "tainted: custom monitor control commands issued" (virsh dominfo);
# `verify` still works (and taints it, as expected). `configure --sg/--ioeventfd` asks the QEMU
# binary, not the monitor (only `configure --probe` asks a running domain's monitor). With
# verify_features = always a timer run asks once per domain start and keeps the verdict in the
# state file, where `status` finds it without asking.
# Other processes on a shared host may send monitor commands to every domain (an older
# balloonmgr, virsh qemu-monitor-command): the LD_PRELOAD shim qmp-log.so logs the commands
# balloonmgr itself sends, and a domain tainted before a step is started again first (a new
# start carries no taint).
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
. "$(dirname "$0")/lib/prom.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
SHIM=${BM_QMP_LOG_SO:?set BM_QMP_LOG_SO to the qmp-log.so shim}
bm_setup

work=$(mktemp -d)
export BALLOONMGR_RUNTIME_DIR=$work/run
bm_add_cleanup "rm -rf '$work'"

bm_define_guest tn1 384 touch=64
# for run --once stopped during its wait: its balloon driver goes 1 s after boot, so a target
# set later never moves (the change would stall only after 10 s)
bm_define_guest tn2 384 touch=250 at=1:rmmod
bm_wait_guest_ready tn1
dom=$(bm_dom tn1)
bm_wait_fresh_stats tn1

export BM_QMP_LOG=$work/qmp.log
# an ASan build's runtime must come first in LD_PRELOAD, before the shim
preload=$SHIM
asan=$(ldd "$BM" | awk '/libasan\.so/ { print $3; exit }')
[ -z "$asan" ] || preload="$asan $SHIM"
bm() { LD_PRELOAD=$preload "$BM" -c "$BM_URI" "$@"; }
tainted() { bm_virsh dominfo "$dom" | grep -q "tainted: custom monitor control commands issued"; }
sent() { grep -c "^$dom " "$BM_QMP_LOG" 2>/dev/null || true; }
fresh() { # fresh: an untainted start of the domain (another process may have tainted it)
    local i
    for i in 1 2 3 4 5; do
        sleep 2 # another process probing new domains does so within a second or two
        tainted || return 0
        bm_log "$dom tainted by another process: starting it again ($i)"
        bm_virsh destroy "$dom" >/dev/null; bm_virsh start "$dom" >/dev/null
    done
    bm_fail "$dom tainted again within 2 s of each of 5 new starts: another process sends monitor commands to every domain"
}
untainted() { # untainted WHAT: balloonmgr sent nothing to the domain, and libvirt agrees
    local n; n=$(sent)
    [ "$n" -eq 0 ] || { cat "$BM_QMP_LOG" >&2; bm_fail "$1 sent $n QEMU monitor command(s) to $dom"; }
    if tainted; then bm_virsh dominfo "$dom" >&2; bm_fail "$1: $dom tainted (balloonmgr sent it no monitor command: another process?)"; fi
}
: >"$BM_QMP_LOG"

# only this test's domain is managed; thresholds the host never crosses (mode hold)
policy() { # policy FILE [host settings...]
    local f=$1; shift
    {
        echo "[host]"; echo "interval = 1s"; echo "reclaim_below = 1%"; echo "target_available = 2%"
        echo "release_above = 100%"; echo "psi_reclaim_above = off"; printf '%s\n' "$@"
        echo "[guest]"; echo "exclude = yes"
        echo "[domain \"${BM_PREFIX}*\"]"; echo "exclude = no"
    } >"$f"
}
policy "$work/auto.policy"
policy "$work/always.policy" "verify_features = always"

# --- status: SG not probed, no monitor command
fresh
bm status "$dom" | tee "$work/status.txt"
grep -q "^$dom .* not-probed  *off  *off$" "$work/status.txt" || bm_fail "status: SG is not 'not-probed' (FPR and AUTODEFL off)"
bm status --json "$dom" | jq -e '.domains[0].sg == "not-probed"' >/dev/null ||
    bm_fail "status --json: sg is not 'not-probed'"
untainted "status"
bm_pass "default status: SG not-probed, $dom not tainted"

# --- run --once (verify_features = auto, the default): no monitor command for a stock domain
fresh
bm run --once --policy "$work/auto.policy" --state "$work/auto-state.json" >/dev/null ||
    bm_fail "run --once failed"
untainted "run --once"
jq -e '[.counters.domains[] | select(.features)] | length == 0' "$work/auto-state.json" >/dev/null ||
    bm_fail "run --once (auto) recorded an SG verdict it should not have asked for"
bm_pass "run --once with verify_features = auto: $dom not tainted, nothing probed"

# --- the agent: several passes, then stopped
fresh
LD_PRELOAD=$preload "$BM" -c "$BM_URI" agent --policy "$work/auto.policy" --listen 127.0.0.1:0 \
    --state "$work/agent-state.json" >"$work/agent.log" 2>&1 &
agent=$!
bm_add_cleanup "kill $agent 2>/dev/null || true"
port=$(bm_agent_port "$work/agent.log")
passes=0
for _ in $(seq "$(bm_mult 100)"); do
    passes=$(curl -sf "127.0.0.1:$port/metrics" | sed -n 's/^balloonmgr_passes_total \([0-9]*\)$/\1/p' || true)
    [ "${passes:-0}" -ge 5 ] && break
    sleep 0.2
done
[ "${passes:-0}" -ge 5 ] || { cat "$work/agent.log" >&2; bm_fail "the agent made ${passes:-0} passes, want 5"; }
curl -sf "127.0.0.1:$port/metrics" | grep "^balloonmgr_domain_info{domain=\"$dom\"" || true
kill -TERM "$agent"; wait "$agent" || true
untainted "the agent ($passes passes)"
bm_pass "agent ($passes passes, verify_features = auto): $dom not tainted"

# --- configure --sg / --ioeventfd on the running stock guest: checked by running its QEMU
# binary (-device virtio-balloon-pci,help), no monitor command; refused (stock QEMU lacks both)
fresh
xml_before=$(bm_virsh dumpxml --inactive "$dom" | sha256sum)
for opt in sg ioeventfd; do
    set +e; bm configure "$dom" --$opt on >"$work/cf.out" 2>"$work/cf.err"; rc=$?; set -e
    cat "$work/cf.err"
    [ "$rc" -eq 3 ] || bm_fail "configure --$opt on exited $rc, want 3 (stock QEMU has no '$opt')"
    grep -q "configure: '$dom': --$opt: QEMU .* has no virtio-balloon-pci property '$opt'" "$work/cf.err" ||
        bm_fail "configure --$opt on: message"
done
[ "$(bm_virsh dumpxml --inactive "$dom" | sha256sum)" = "$xml_before" ] || bm_fail "a refused configure changed the XML"
untainted "configure --sg on / --ioeventfd on"
bm_pass "configure --sg on / --ioeventfd on on a running stock guest: refused (exit 3) by asking the QEMU binary, $dom not tainted"

# the lab QEMU (test-lab builds it) has both: accepted with no domain of it running
lab_emu=${BM_LAB_QEMU_DIR:-/var/lib/libvirt/images/balloonmgr-lab}/qemu-system-x86_64
if [ -x "$lab_emu" ]; then
    labdom=${dom}-lab
    bm_virsh dumpxml --inactive "$dom" | sed -e "s|<name>$dom</name>|<name>$labdom</name>|" -e '/<uuid>/d' \
        -e '/<mac address=/d' -e "s|<emulator>.*</emulator>|<emulator>$lab_emu</emulator>|" >"$work/lab.xml"
    bm_virsh define "$work/lab.xml" >/dev/null || bm_fail "cannot define $labdom"
    bm_add_cleanup "virsh -c '$BM_URI' undefine '$labdom' >/dev/null 2>&1 || true"
    bm configure "$labdom" --sg on --ioeventfd on || bm_fail "configure --sg on --ioeventfd on refused with the lab QEMU"
    bm_virsh dumpxml --inactive "$labdom" | grep -q "<qemu:property name='sg' type='bool' value='true'/>" ||
        bm_fail "no sg override in $labdom's definition"
    bm_pass "configure --sg on --ioeventfd on with the lab QEMU accepted while no domain of it runs"
else
    bm_log "SKIP: no lab QEMU at $lab_emu (test-lab builds it): only the refusal was checked"
fi

# --- verify works, and taints (expected)
# (the guest may have been started again just now: wait for its balloon driver)
for _ in $(seq "$(bm_mult 120)"); do
    bm verify --json "$dom" >"$work/verify.json" || bm_fail "verify failed"
    jq -e '.domains[0].driver_ok' "$work/verify.json" >/dev/null && break
    sleep 0.5
done
jq -c '.domains[0] | {name, driver_ok, sg: .features.sg.state}' "$work/verify.json"
sg=$(jq -r '.domains[0].features.sg.state' "$work/verify.json")
[ "$sg" = "not-offered" ] || bm_fail "verify: sg is '$sg' on a stock QEMU, want not-offered"
tainted || bm_fail "verify did not taint $dom"
[ "$(sent)" -gt 0 ] || bm_fail "verify sent no QEMU monitor command (is the shim working?)"
bm_pass "verify works on $dom (sg $sg) and taints it, as expected"

# --- configure --probe asks the QEMU monitor of a running domain of the binary (and taints)
: >"$BM_QMP_LOG"
set +e; bm configure "$dom" --sg on --probe 2>"$work/cf.err"; rc=$?; set -e
cat "$work/cf.err"
[ "$rc" -eq 3 ] || bm_fail "configure --sg on --probe exited $rc, want 3"
grep -q "^$dom .*device-list-properties" "$BM_QMP_LOG" ||
    { cat "$BM_QMP_LOG" >&2; bm_fail "configure --probe sent no device-list-properties to $dom"; }
bm_pass "configure --sg on --probe: asked $dom's QEMU monitor (device-list-properties), refused (exit 3)"

# --- verify_features = always: a timer run asks once, keeps it; status shows it unasked
bm run --once --policy "$work/always.policy" --state "$work/always-state.json" >/dev/null ||
    bm_fail "run --once (always) failed"
jq -c --arg d "$dom" '.counters.domains[] | select(.name == $d) | .features' "$work/always-state.json"
jq -e --arg d "$dom" --arg id "$(bm_virsh domid "$dom")" '.counters.domains[] | select(.name == $d) |
    .features.sg == "not-offered" and (.features.boot | endswith("/" + $id))' "$work/always-state.json" >/dev/null ||
    bm_fail "run --once (always): no SG verdict of this start in the state file"
bm status --json --state "$work/always-state.json" "$dom" >"$work/s.json"
jq -e '.domains[0].sg == "not-offered" and (.domains[0].sg_reason | test("state file"))' "$work/s.json" >/dev/null ||
    { jq -c '.domains[0] | {sg, sg_reason}' "$work/s.json"; bm_fail "status did not take SG from the state file"; }
bm_pass "verify_features = always: run --once keeps the verdict of this start; status shows it from the state file"

# --- run --once stopped by SIGTERM while it waits for its change: state and textfile saved
bm_wait_guest_ready tn2
dom2=$(bm_dom tn2)
for _ in $(seq "$(bm_mult 60)"); do grep -q "bm: at: all done" "$(bm_console_log tn2)" && break; sleep 0.5; done
grep -q "bm: at: all done" "$(bm_console_log tn2)" || bm_fail "$dom2: the balloon driver was not removed"
# its last statistics stay (stale: max_stats_age off for this run)
bm_pressure_policy "$work/pressure.policy"
printf 'max_stats_age = off\n' >>"$work/pressure.policy"
mkdir -p "$work/textfile"
t0=$(date +%s%N)
"$BM" -c "$BM_URI" run --once --policy "$work/pressure.policy" --state "$work/term-state.json" \
    --textfile "$work/textfile" >"$work/term.out" 2>"$work/term.err" &
run=$!
# the pass's summary line is on stdout once it decided and started its change (run flushes it
# before it waits): the wait is under way from then on
passed() { grep -q '^pass: ' "$work/term.out"; }
BM_WAIT_INTERVAL=0.2 bm_wait_until 60 "run --once's pass to start its change" passed ||
    { cat "$work/term.out" "$work/term.err"; bm_fail "run --once printed no pass"; }
kill -TERM "$run" 2>/dev/null || true
set +e; wait "$run"; rc=$?; set -e
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
cat "$work/term.out" "$work/term.err"
[ "$rc" -lt 128 ] || bm_fail "run --once died of the signal (exit $rc)"
grep -q "SIGTERM while [1-9][0-9]* change(s) were in flight" "$work/term.err" || bm_fail "run --once did not say it stopped waiting"
[ -s "$work/term-state.json" ] && jq -e '.counters.passes == 1' "$work/term-state.json" >/dev/null ||
    bm_fail "run --once stopped by SIGTERM did not write its state file"
grep -q '^balloonmgr_passes_total 1$' "$work/textfile/balloonmgr.prom" || bm_fail "no textfile after SIGTERM"
# (that it stopped waiting is its message above, with the change still in flight, and its
# exit: no stall was waited for; the time is printed, not bounded)
bm_pass "run --once stopped by SIGTERM during its wait: exit $rc after $ms ms, state file and textfile written"

# --- a new start of the domain: the kept verdict no longer applies, and is not asked again
# (only the shim's log counts here: another process may taint a new start at any time)
bm_virsh destroy "$dom" >/dev/null
bm_virsh start "$dom" >/dev/null
bm status --json --state "$work/always-state.json" "$dom" | jq -e '.domains[0].sg == "not-probed"' >/dev/null ||
    bm_fail "status after a restart still shows the previous start's verdict"
: >"$BM_QMP_LOG"
bm run --once --policy "$work/auto.policy" --state "$work/always-state.json" >/dev/null ||
    bm_fail "run --once after the restart failed"
[ "$(sent)" -eq 0 ] || { cat "$BM_QMP_LOG" >&2; bm_fail "run --once (auto) asked the new start of $dom"; }
jq -e --arg d "$dom" '.counters.domains[] | select(.name == $d) | .features == null' "$work/always-state.json" >/dev/null ||
    bm_fail "the previous start's verdict was kept for the new start"
bm_pass "after a restart: status not-probed again; an auto run sends the new start nothing and drops the old verdict"
