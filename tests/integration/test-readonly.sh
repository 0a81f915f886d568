#!/usr/bin/env bash
# Monitoring-only mode (-r/--readonly) as an unprivileged user (nobody) on libvirt's read-only
# socket, against a real guest and a policy under which the host is under pressure:
# - nobody cannot open the read-write socket (so nothing below could write through libvirt);
# - `-r status` works, SG is "unknown" for want of the QEMU monitor, the reason says so;
# - `-r set/configure/verify/run` exit 2 with a message before connecting;
# - `-r run --once --dry-run` plans the inflate a read-write pass would make;
# - `-r agent` serves /metrics with the domain and the reclaim mode, runs passes, sets no target
#   and the balloon does not move.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
. "$(dirname "$0")/lib/prom.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
bm_setup

work=$BM_WORKDIR # kept if the test fails; $work/run is BALLOONMGR_RUNTIME_DIR (bm_setup)
chmod 0755 "$work"
# setpriv execs in place: $! of "${nobody[@]}" CMD & is the process itself
nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env --)
as_nobody() { "${nobody[@]}" "$@"; }
as_nobody test -x "$BM" || bm_skip "nobody cannot execute $BM (a build under a private directory)"

# touched: 400 MiB of free memory the host backs (touched again after an earlier test's
# inflate). The light guest an earlier test had inflated may have less than QEMU's own memory as
# the policy estimates it (the least RSS-minus-used of the running guests, up to 128 MiB), and
# then no pass would inflate it.
bm_fixture_guest touched
dom=$BM_DOM
bm_wait_fresh_stats "$dom"
actual() { "$BM" -c "$BM_URI" status --json "$dom" | jq '.domains[0].current_bytes'; }
before=$(actual)

# --- nobody and the read-write socket
set +e
as_nobody "$BM" -c "$BM_URI" set "$dom" 50% >/dev/null 2>"$work/err"; rc=$?
set -e
cat "$work/err"
[ "$rc" -eq 1 ] || bm_fail "nobody on the read-write socket: exit $rc, want 1"
grep -q "cannot connect to '$BM_URI'" "$work/err" || bm_fail "nobody on the read-write socket: no connect error"
bm_pass "nobody cannot open libvirt's read-write socket (exit 1: $(head -c 120 "$work/err"))"

# --- status on the read-only socket
as_nobody "$BM" -c "$BM_URI" -r status --json --probe "$dom" >"$work/status.json" 2>"$work/err" ||
    bm_fail "-r status as nobody failed: $(cat "$work/err")"
jq -c '.domains[0] | {name, current_bytes, usable_bytes, sg, sg_reason}' "$work/status.json"
jq -e --argjson b "$before" '.domains[0] | .current_bytes == $b and .usable_bytes != null and .sg == "unknown"
    and (.sg_reason | test("read-only"))' "$work/status.json" >/dev/null ||
    bm_fail "-r status: wrong balloon, no guest stats, or SG not unknown/read-only"
bm_pass "-r status as nobody: balloon and guest stats, SG unknown (read-only: no monitor)"

# --- verbs that change refuse before connecting
for args in "set $dom 50%" "configure $dom --stats-period 5" "verify $dom" "run --once"; do
    set +e
    # shellcheck disable=SC2086
    as_nobody "$BM" -c "$BM_URI" -r $args >/dev/null 2>"$work/err"; rc=$?
    set -e
    [ "$rc" -eq 2 ] || bm_fail "-r $args: exit $rc, want 2"
    grep -q "needs a read-write connection (-r/--readonly given)" "$work/err" ||
        bm_fail "-r $args: message: $(cat "$work/err")"
done
bm_pass "-r set/configure/verify/run exit 2: $(cat "$work/err")"

bm_pressure_policy "$work/pressure.policy" 1s 50%
chmod 0644 "$work/pressure.policy"

# --- a dry run plans what a read-write run would do
# The fixture deflated what an earlier test inflated; its memory is backed again once the guest
# has touched it: wait until a (root) pass would inflate it.
bm_wait_would_inflate "$dom" --policy "$work/pressure.policy"
as_nobody "$BM" -c "$BM_URI" -r run --once --dry-run --json --policy "$work/pressure.policy" \
    >"$work/dry.json" 2>"$work/err" || bm_fail "-r run --once --dry-run failed: $(cat "$work/err")"
jq -e --arg d "$dom" '.host.mode == "reclaim" and (.decisions[] | select(.name == $d) | .action == "inflate")' \
    "$work/dry.json" >/dev/null ||
    bm_fail "-r dry run: no planned inflate for $dom: $(jq -c --arg d "$dom" '.host.mode, (.decisions[] |
        select(.name == $d) | {action, reason})' "$work/dry.json")"
bm_pass "-r run --once --dry-run as nobody plans an inflate of $dom"

# --- the monitoring-only agent
bm_start_agent "$work/agent.log" "${nobody[@]}" "$BM" -c "$BM_URI" -r agent --policy "$work/pressure.policy" \
    --listen 127.0.0.1:0
agent=$BM_AGENT_PID
port=$(bm_agent_port "$work/agent.log")
metrics() { curl -sf "127.0.0.1:$port/metrics"; }
three_passes() { # /metrics (saved in $work/m) has the domain's series and 3 passes
    metrics >"$work/m" 2>/dev/null && grep -q "^balloonmgr_domain_balloon_current_bytes{domain=\"$dom\"}" "$work/m" &&
        awk '$1 == "balloonmgr_passes_total" && $2 >= 3 { f = 1 } END { exit !f }' "$work/m"
}
ok=0
BM_WAIT_INTERVAL=0.2 bm_wait_until 20 "3 passes of the -r agent" three_passes && ok=1
cat "$work/agent.log"
[ "$ok" = 1 ] || bm_fail "-r agent: no domain series or fewer than 3 passes on /metrics"
grep -q "monitoring only (read-only connection, no changes)" "$work/agent.log" || bm_fail "-r agent: no mode line"
grep -E "^balloonmgr_(passes_total|libvirt_up|host_mode\{mode=\"reclaim\"\}|target_changes_total\{direction=\"inflate\"\}) " "$work/m"
grep -q '^balloonmgr_libvirt_up 1$' "$work/m" || bm_fail "-r agent: libvirt_up not 1"
grep -q '^balloonmgr_host_mode{mode="reclaim"} 1$' "$work/m" || bm_fail "-r agent: host not in reclaim mode"
grep -q '^balloonmgr_target_changes_total{direction="inflate"} 0$' "$work/m" || bm_fail "-r agent set a target"
grep -q "^balloonmgr_domain_info{domain=\"$dom\",.*sg=\"unknown\"" "$work/m" || bm_fail "-r agent: SG not unknown"
[ "$(actual)" = "$before" ] || bm_fail "the balloon moved under the read-only agent"
[ "$(ps -o user= -p "$agent")" = nobody ] || bm_fail "the agent does not run as nobody"
bm_stop_agent TERM 5 || bm_fail "-r agent did not stop on SIGTERM"
bm_pass "-r agent as nobody: serves $dom, passes run in reclaim mode, no target set, balloon unchanged"
