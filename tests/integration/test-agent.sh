#!/usr/bin/env bash
# The agent against a real guest with a real Prometheus (1 s scrapes) and Pushgateway:
# - after `set --wait` (CLI) and after the agent's own target change, Prometheus has the
#   latency histogram in the right direction/sg series and the reclaimed bytes match status;
# - /metrics passes promtool; SIGHUP with a broken policy keeps the agent running;
# - run --once --push reaches the Pushgateway; the textfile is always complete while
#   concurrent readers read it;
# - libvirtd killed and started again: the agent keeps serving, libvirt_up 0 then 1;
# - every PromQL expression of the dashboard and the alert rules returns data.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
. "$(dirname "$0")/lib/prom.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
ROOT=${BM_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
bm_setup
bm_prom_ensure

work=$BM_WORKDIR # kept if the test fails; $work/run is BALLOONMGR_RUNTIME_DIR (bm_setup)

# retouch: once the agent has given back what set --wait took (release gives back to every
# ballooned guest), the guest uses that memory again, so the agent's own inflate below takes
# memory the host backs and QEMU's RSS drops
bm_fixture_guest touched
dom=$BM_DOM
bm_wait_fresh_stats "$dom"

policy() { # policy FILE [host settings...]
    local f=$1; shift
    {
        # the SG label of the histogram and domain_info: this stock domain is asked (auto
        # would not: its XML does not set sg/ioeventfd)
        echo "[host]"; echo "interval = 2s"; echo "verify_features = always"; printf '%s\n' "$@"
        echo "[guest]"; echo "exclude = yes"
        echo "[domain \"$dom\"]"; echo "exclude = no"; echo "max_step = 50%"
    } >"$f"
}
policy "$work/calm.policy"
policy "$work/pressure.policy" "reclaim_below = 99%" "target_available = 99.5%" "release_above = 99.9%"
cp "$work/calm.policy" "$work/agent.policy"

bm_start_agent "$work/agent.log" "$BM" -c "$BM_URI" agent --policy "$work/agent.policy" \
    --listen 127.0.0.1:0 --state "$work/agent-state.json"
agent=$BM_AGENT_PID
port=$(bm_agent_port "$work/agent.log")
metrics() { curl -sf "127.0.0.1:$port/metrics"; }
# agent_fail MSG: what the agent logged and what a pass would decide now, then bm_fail MSG
agent_fail() {
    echo "--- the agent's log (last 40 lines):" >&2; tail -40 "$work/agent.log" >&2
    echo "--- a dry run of the agent's policy now:" >&2
    "$BM" -c "$BM_URI" run --once --dry-run --policy "$work/agent.policy" >&2 || true
    bm_fail "$@"
}
# grep that reads all its input: `metrics | grep -q` under pipefail fails when grep exits at
# the first match and curl then dies of SIGPIPE writing the rest (a false "not found")
has() { grep "$@" >/dev/null; }
# metrics_have REGEX: /metrics has a line matching REGEX
metrics_have() { metrics | has "$1"; }
bm_wait_until 5 "the agent to serve /metrics" curl -sf -o /dev/null "127.0.0.1:$port/metrics" || true
metrics | promtool check metrics || bm_fail "promtool check metrics failed on /metrics"
bm_pass "agent serves /metrics on 127.0.0.1:$port; promtool check metrics is clean"

bm_prom_start_pushgateway
BM_PROM_RULES=$ROOT/contrib/prometheus/balloonmgr-alerts.yml bm_prom_start "127.0.0.1:$port" pushgateway
bm_prom_wait 'balloonmgr_libvirt_up == 1' 30 >/dev/null || bm_fail "Prometheus never saw the agent up"
bm_prom_wait "balloonmgr_domain_info{domain=\"$dom\",sg=\"not_offered\"}" 30 >/dev/null ||
    bm_fail "domain_info with sg not_offered not in Prometheus"

# --- a CLI change: set --wait, handed to the agent through the spool. The agent is stopped
# while the change runs: on a comfortable host its release gives ballooned guests back, and a
# slower guest (Linux 6.12 under QEMU 10 in the trixie container) was deflated by it at 59 of
# 256 MiB, so the change never reached its target (set: stalled, exit 3). The order is what
# matters: the change ends, then the agent counts it from the spool and may release.
kill -STOP "$agent"
"$BM" -c "$BM_URI" set "$dom" 50% --wait --json | jq -c . || { kill -CONT "$agent"; bm_fail "set 50% --wait failed"; }
# and the guest has seen its balloon inflated (it looks once a second) before the agent may
# give it back: else it never touches its memory again (the agent released within 0.35 s once)
bm_wait_until 10 "$dom to see its balloon inflated" bm_console_has "$dom" "bm: retouch: balloon inflated" ||
    { kill -CONT "$agent"; bm_fail "$dom did not see its balloon inflated"; }
kill -CONT "$agent"
q='balloonmgr_balloon_change_duration_seconds_count{device="balloon",direction="inflate",sg="not_negotiated"} >= 1'
bm_prom_wait "$q" 30 >/dev/null || bm_fail "histogram count for inflate/not_negotiated never reached 1"
# the comfortable host's release may already be giving it back: compare status and Prometheus
# until both show the same value (the balloon settles at one)
prom_matches_status() {
    reclaimed_status=$("$BM" -c "$BM_URI" status --json "$dom" | jq '.domains[0].reclaimed_bytes')
    reclaimed_prom=$(bm_prom_value "balloonmgr_domain_reclaimed_bytes{domain=\"$dom\"}") || return 1
    awk -v a="$reclaimed_status" -v b="$reclaimed_prom" 'BEGIN { exit !(a + 0 == b + 0) }'
}
BM_WAIT_INTERVAL=1 bm_wait_until 45 "Prometheus' reclaimed bytes to match status" prom_matches_status ||
    bm_fail "Prometheus' reclaimed bytes never matched status (status $reclaimed_status, Prometheus $reclaimed_prom)"
bm_pass "after set --wait: Prometheus has the inflate/not_negotiated histogram and reclaimed $reclaimed_status bytes as status says"

# --- release: the comfortable host gives back what set --wait took; the guest uses it again
bm_wait_until 60 "$dom deflated by the agent and retouched" bm_console_has "$dom" "bm: retouched 400 MiB" ||
    bm_fail "$dom was not given its memory back by the agent (or did not retouch it)"
settled() { "$BM" -c "$BM_URI" status --json "$dom" | jq -e '.domains[0].usable_bytes >= 256 * 1048576' >/dev/null; }
BM_WAIT_INTERVAL=1 bm_wait_until 60 "statistics of $dom after the retouch" settled ||
    bm_fail "$dom: usable memory stayed below 256 MiB after the retouch was freed"
bm_pass "release: the agent gave back what set --wait took; the guest touched it again"

# --- the agent's own change: a policy under which the real host is under pressure
cp "$work/pressure.policy" "$work/agent.policy"
kill -HUP "$agent"
bm_prom_wait 'balloonmgr_target_changes_total{direction="inflate"} >= 1' 30 >/dev/null ||
    agent_fail "the agent made no inflate under the pressure policy"
bm_prom_wait 'balloonmgr_balloon_changes_total{device="balloon",direction="inflate",outcome="reached"} >= 2' 30 >/dev/null ||
    bm_fail "the agent's inflate was not counted as reached"
bm_prom_wait 'balloonmgr_balloon_change_duration_seconds_count{device="balloon",direction="inflate",sg="not_negotiated"} >= 2' 30 >/dev/null ||
    bm_fail "the agent's inflate is not in the histogram"
bm_prom_wait "balloonmgr_domain_last_change_rss_drop_bytes{domain=\"$dom\"} > 0" 30 >/dev/null ||
    bm_fail "no RSS drop observed after the inflate"
bm_pass "agent's own inflate: counted, in the histogram, RSS drop $(bm_prom_value "balloonmgr_domain_last_change_rss_drop_bytes{domain=\"$dom\"}") bytes"
reloads() { grep -c "policy $work/agent.policy reloaded" "$work/agent.log"; }
reloaded_since() { [ "$(reloads)" -gt "$1" ]; }
n=$(reloads)
cp "$work/calm.policy" "$work/agent.policy"
kill -HUP "$agent"
bm_wait_until 10 "the calm policy reloaded" reloaded_since "$n" || true

# --- SIGHUP with a broken policy: keeps running with the last good one
printf '[guest]\nfloor = 12X\n' >"$work/agent.policy"
kill -HUP "$agent"
bm_wait_until 10 "the broken policy refused" grep -q "not reloaded: keeping the last good one" "$work/agent.log" ||
    bm_fail "no message about the broken policy"
kill -0 "$agent" || bm_fail "agent died on a broken policy"
bm_wait_until 10 "the policy error counted" metrics_have '^balloonmgr_errors_total{kind="policy"} 1$' ||
    bm_fail "policy error not counted"
bm_pass "SIGHUP with a broken policy: agent keeps running, error counted"
cp "$work/calm.policy" "$work/agent.policy"
kill -HUP "$agent"

# --- timer runs: push and textfile
"$BM" -c "$BM_URI" run --once --policy "$work/calm.policy" --state "$work/timer-state.json" \
    --push "$BM_PUSHGATEWAY_URL" >/dev/null || bm_fail "run --once --push failed"
host=$(hostname)
bm_prom_wait "balloonmgr_passes_total{job=\"balloonmgr\",instance=\"$host\"} >= 1" 30 >/dev/null ||
    bm_fail "the pushed metrics did not reach Prometheus through the Pushgateway"
bm_pass "run --once --push: Pushgateway received it, Prometheus scraped it"
set +e
"$BM" -c "$BM_URI" run --once --policy "$work/calm.policy" --state "$work/timer-state.json" \
    --push "http://127.0.0.1:$(bm_prom_free_port)" >/dev/null 2>"$work/push.err"; rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q "push to http://127.0.0.1:.*/metrics/job/balloonmgr/instance/" "$work/push.err" ||
    bm_fail "push to a dead Pushgateway: exit $rc, $(cat "$work/push.err")"
bm_pass "push to a dead Pushgateway: exit 1 with a clear error"

mkdir -p "$work/textfile"
# a complete textfile ends with the last metric family: learn its name from a first run
"$BM" -c "$BM_URI" run --once --policy "$work/calm.policy" --state "$work/timer-state.json" \
    --textfile "$work/textfile" >/dev/null || bm_fail "a textfile run failed"
last=$(tail -1 "$work/textfile/balloonmgr.prom" | sed 's/[ {].*//')
( for _ in $(seq 15); do
      "$BM" -c "$BM_URI" run --once --policy "$work/calm.policy" --state "$work/timer-state.json" \
          --textfile "$work/textfile" >/dev/null || exit 1
  done ) &
writer=$!
reads=0 bad=0
while kill -0 "$writer" 2>/dev/null; do
    if [ -e "$work/textfile/balloonmgr.prom" ]; then
        # one open file, as a collector reads it (cp refuses a file renamed over meanwhile)
        cat "$work/textfile/balloonmgr.prom" >"$work/read.prom" 2>/dev/null || continue
        reads=$((reads + 1))
        [ "$(tail -1 "$work/read.prom" | sed 's/[ {].*//')" = "$last" ] || bad=$((bad + 1))
    fi
done
wait "$writer" || bm_fail "a textfile run failed"
promtool check metrics <"$work/textfile/balloonmgr.prom" || bm_fail "textfile fails promtool"
[ "$bad" -eq 0 ] && [ "$reads" -gt 10 ] || bm_fail "$bad of $reads concurrent reads saw an incomplete textfile"
passes=$(grep '^balloonmgr_passes_total ' "$work/textfile/balloonmgr.prom" | cut -d' ' -f2)
[ "$passes" -ge 16 ] || bm_fail "textfile passes_total $passes: counters not cumulative across runs"
bm_pass "textfile: $reads concurrent reads all complete (ending with $last); passes_total $passes is cumulative across runs"

# --- every PromQL expression of the dashboard and the alert rules returns data
"$ROOT/tests/integration/lib/check-promql.sh" --require-data || bm_fail "dashboard/alert expressions without data"
bm_pass "every dashboard and alert expression returns data"

# --- libvirtd killed and started again
old=$(_bm_daemon_pid libvirtd)
# a libvirtd of systemd's (a host with systemd as PID 1: test-stack) is started again by it, on
# its sockets; one started by hand (this host) by hand
by_systemd=0
if [ -d /run/systemd/system ] && [ "$(systemctl show -P MainPID libvirtd.service 2>/dev/null)" = "$old" ]; then
    by_systemd=1
fi
kill -KILL "$old"
bm_wait_until 5 "libvirt_up 0" metrics_have '^balloonmgr_libvirt_up 0$' ||
    bm_fail "libvirt_up did not drop to 0 with libvirtd killed"
bm_pass "libvirtd killed: agent still serving, libvirt_up 0"
if [ "$by_systemd" = 1 ]; then
    systemctl start libvirtd.service || bm_fail "systemctl start libvirtd failed"
else
    libvirtd -d
fi
bm_wait_until 10 "the new libvirtd's pid file" _bm_pidfile_live libvirtd || true
# the new libvirtd belongs to whoever owned the old one
for f in "$BM_IT_STATE"/daemons.*; do
    [ -e "$f" ] && sed -i "s/^libvirtd $old\$/libvirtd $(_bm_daemon_pid libvirtd)/" "$f"
done
passes_before=$(metrics | grep '^balloonmgr_passes_total ' | cut -d' ' -f2)
BM_WAIT_INTERVAL=0.25 bm_wait_until 40 "libvirt_up 1" metrics_have '^balloonmgr_libvirt_up 1$' ||
    bm_fail "agent did not reconnect to the new libvirtd"
passes_resumed() { [ "$(metrics | grep '^balloonmgr_passes_total ' | cut -d' ' -f2)" -gt "$passes_before" ]; }
BM_WAIT_INTERVAL=0.25 bm_wait_until 10 "a pass after the reconnect" passes_resumed || bm_fail "passes did not resume"
bm_pass "libvirtd restarted: agent reconnected, libvirt_up 1, passes resumed"

# --- a domain that disappears disappears from /metrics
metrics | has "domain=\"$dom\"" || bm_fail "domain not in /metrics before undefine"
# destroy may wait for the restarted libvirtd's reconnect to the QEMU process (a job on the
# domain): time it apart from the agent's reaction
t_destroy=$(bm_now)
bm_fixture_forget "$dom" # ended on purpose: the run's next fixture use boots another
bm_virsh destroy "$dom" >/dev/null
bm_virsh undefine "$dom" >/dev/null
t_gone=$(bm_now)
# (a failed scrape is not "gone": read the page first, then look for the domain)
series_gone() { local page; page=$(metrics) && ! grep -q "domain=\"$dom\"" <<<"$page"; }
BM_WAIT_INTERVAL=0.25 bm_wait_until 40 "the series of $dom to go" series_gone || true
echo "destroy+undefine took $(awk -v a="$t_destroy" -v b="$t_gone" 'BEGIN { printf "%.1f", b - a }') s;" \
    "series gone $(bm_elapsed "$t_gone") s after"
# and they stay gone (three more scrapes over a second)
for _ in 1 2 3; do
    page=$(metrics) || bm_fail "scrape failed"
    if grep "domain=\"$dom\"" <<<"$page" | head -3; then
        tail -5 "$work/agent.log"
        bm_virsh list --all
        bm_fail "series of the undefined domain still (or again) in /metrics"
    fi
    sleep 0.33
done
bm_pass "an undefined domain's series disappear from /metrics"

# --- SIGTERM: a clean exit (its time printed; the guard a busy machine's, not a bound)
t0=$(bm_now)
bm_stop_agent TERM 20 || bm_fail "agent still running 20 s after SIGTERM"
[ "$BM_AGENT_STATUS" -eq 0 ] || bm_fail "agent exited non-zero ($BM_AGENT_STATUS) on SIGTERM"
bm_pass "SIGTERM: agent exited cleanly in $(bm_elapsed "$t0") s"
