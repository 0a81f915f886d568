#!/usr/bin/env bash
# The agent as a Prometheus exporter, on libvirt's test driver (no daemon, no root):
# --web.listen-address :PORT answers on IPv4 and IPv6 loopback, gzip when the scraper sends
# Accept-Encoding: gzip (and plain text otherwise, with the same content), process_* metrics
# that follow the agent's process, build info, --no-libvirt-duplicates leaves out the series
# libvirt exporters export, and promtool check metrics is clean on what is served.
# Usage: test-exporter.sh BALLOONMGR SOURCE_ROOT   (TAP output)
set -u
BM=$(realpath "$1")
ROOT=$(realpath "$2")
if ! command -v curl >/dev/null; then
    echo "1..0 # SKIP curl is not installed"
    exit 0
fi
tmp=$(mktemp -d)
export BALLOONMGR_RUNTIME_DIR=$tmp/run
. "$ROOT/tests/tap.sh"
. "$ROOT/tests/agent.sh"
trap 'agent_stop; rm -rf "$tmp"' EXIT

# start_agent FLAG ARG...: the agent on a free port given as FLAG :0 (every address); returns
# once /metrics has its first pass
first_pass() {
    curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" 2>/dev/null | grep -q '^balloonmgr_passes_total [1-9]'
}
start_agent() {
    local flag=$1; shift
    agent_start "$tmp/agent.log" env -C / "$BM" -c test:///default agent --policy "$ROOT/demo/demo.policy" \
        --proc "$ROOT/demo/proc" --state "$tmp/state.json" --dry-run "$flag" ":0" "$@" || return 1
    port=$agent_port apid=$agent_pid
    agent_wait first_pass
}
stop_agent() { agent_stop; }

started=$(date +%s)
start_agent --web.listen-address
ok $? "agent --web.listen-address :PORT starts (port $port)" || cat "$tmp/agent.log" >&2
curl -s --max-time 5 -D "$tmp/h4" -o "$tmp/plain" "http://127.0.0.1:$port/metrics"
ok $? "  :PORT answers on 127.0.0.1"
if [ -e /proc/net/if_inet6 ]; then
    curl -s --max-time 5 -o /dev/null "http://[::1]:$port/metrics"
    ok $? "  :PORT answers on [::1]"
fi
[ -s "$tmp/h4" ] && ! grep -qi '^Content-Encoding' "$tmp/h4"
ok $? "  without Accept-Encoding: not compressed"
grep -qi '^Vary: Accept-Encoding' "$tmp/h4"
ok $? "  Vary: Accept-Encoding"
curl -s --max-time 5 -H 'Accept-Encoding: gzip' -D "$tmp/hz" -o "$tmp/gz" "http://127.0.0.1:$port/metrics"
grep -qi '^Content-Encoding: gzip' "$tmp/hz"
ok $? "  Accept-Encoding: gzip: Content-Encoding: gzip"
zcat "$tmp/gz" >"$tmp/unzipped" 2>/dev/null
ok $? "  the body is gzip ($(stat -c %s "$tmp/gz") bytes for $(stat -c %s "$tmp/plain"))"
[ -s "$tmp/plain" ] && diff <(grep -v '^process_' "$tmp/plain") <(grep -v '^process_' "$tmp/unzipped") >/dev/null
ok $? "  gzip and plain carry the same exposition (process_* aside: read at each scrape)"
curl -s --max-time 5 -H 'Accept-Encoding: gzip;q=0, identity' -D "$tmp/hq" -o /dev/null "http://127.0.0.1:$port/metrics"
[ -s "$tmp/hq" ] && ! grep -qi '^Content-Encoding' "$tmp/hq"
ok $? "  Accept-Encoding: gzip;q=0: not compressed"

for m in process_cpu_seconds_total process_resident_memory_bytes process_virtual_memory_bytes \
         process_open_fds process_max_fds process_start_time_seconds; do
    grep -q "^$m [0-9]" "$tmp/plain"
    ok $? "  $m"
done
rss=$(awk '/^process_resident_memory_bytes /{print $2}' "$tmp/plain")
want=$(awk '/^VmRSS:/{print $2 * 1024}' "/proc/$apid/status")
# within 25 %: the kernel's two counts of the same pages, read a moment apart
awk -v a="$rss" -v b="$want" 'BEGIN { exit !(a > 0.75 * b && a < 1.25 * b) }'
ok $? "  process_resident_memory_bytes $rss is the agent's VmRSS ($want)"
start=$(awk '/^process_start_time_seconds /{print $2}' "$tmp/plain")
# between the script's clock before the start and now (whole seconds: 1 s either side)
awk -v s="$start" -v a="$started" -v now="$(date +%s)" 'BEGIN { exit !(s >= a - 1 && s <= now + 1) }'
ok $? "  process_start_time_seconds $start: the agent started after $started, before now"
fds=$(awk '/^process_open_fds /{print $2}' "$tmp/plain")
nfd=$(ls "/proc/$apid/fd" | wc -l)
[ "$fds" -ge 3 ] && [ "$fds" -le $((nfd + 2)) ]
ok $? "  process_open_fds $fds (the agent has $nfd now)"
grep -q '^balloonmgr_build_info{version="[0-9][^"]*",revision="[^"][^"]*"} 1$' "$tmp/plain"
ok $? "  balloonmgr_build_info{version=...,revision=...}"
grep -q '^balloonmgr_domain_balloon_current_bytes{domain="test"}' "$tmp/plain"
ok $? "  per-domain series by default"
# the plan of the last pass (demo/proc: the host reclaims)
awk '/^balloonmgr_host_need_bytes / { exit !($2 > 0) }' "$tmp/plain" && grep -q '^balloonmgr_host_need_bytes ' "$tmp/plain"
ok $? "  balloonmgr_host_need_bytes > 0 (reclaim)"
grep -q '^balloonmgr_host_planned_bytes{direction="inflate"} [0-9]' "$tmp/plain" &&
    grep -q '^balloonmgr_host_planned_bytes{direction="deflate"} [0-9]' "$tmp/plain" &&
    grep -q '^balloonmgr_host_unmet_bytes [0-9]' "$tmp/plain"
ok $? "  balloonmgr_host_planned_bytes by direction, balloonmgr_host_unmet_bytes"
grep -qE '^balloonmgr_domain_short_of_memory\{domain="test"\} [01]$' "$tmp/plain"
ok $? "  balloonmgr_domain_short_of_memory per domain"
if command -v promtool >/dev/null; then
    promtool check metrics <"$tmp/plain" >"$tmp/promtool.log" 2>&1
    ok $? "  promtool check metrics is clean" || cat "$tmp/promtool.log" >&2
fi
stop_agent

start_agent --listen --no-libvirt-duplicates
ok $? "agent --listen :PORT --no-libvirt-duplicates starts"
curl -s --max-time 5 -o "$tmp/nodup" "http://127.0.0.1:$port/metrics"
dups=$(grep -cE '^balloonmgr_domain_(maximum_bytes|balloon_current_bytes|guest_[a-z_]+|rss_bytes)\{' "$tmp/nodup")
[ "$dups" -eq 0 ]
ok $? "  no balloon current, maximum, guest statistics or RSS series ($dups)"
grep -q '^balloonmgr_domain_reclaimed_bytes{domain="test",device="balloon"}' "$tmp/nodup" &&
    grep -q '^balloonmgr_domain_info{domain="test"' "$tmp/nodup" &&
    grep -q '^balloonmgr_domain_balloon_target_bytes{domain="test"}' "$tmp/nodup"
ok $? "  balloonmgr's own per-domain series stay (info, target, reclaimed)"
stop_agent

"$BM" -c test:///default agent --listen ':99999' --dry-run --state "$tmp/state.json" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "port '99999' is not a number from 0 to 65535" "$tmp/err"
ok $? "--listen :99999: exit 2, names the port ($(cat "$tmp/err"))"

tap_done
