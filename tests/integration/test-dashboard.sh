#!/bin/bash
# test-dashboard: the one-host dashboard and the alerts on the demo host, end to end (issue 52).
# Two agents on libvirt's test driver with the demo host (demo/host.xml, demo/proc, its
# policy): a with --no-libvirt-duplicates, b without; a libvirt exporter's series of the same
# host (127.0.0.1) pushed to a Pushgateway (job libvirt, instance 127.0.0.1:9177: the
# libvirt_domain_info_* and libvirt_domain_memory_stats_* families the libvirt exporters
# export, with values of their own); one real Prometheus scraping all three with contrib's
# alerts loaded. Asserted:
#   - every dashboard target that reads a series --no-libvirt-duplicates leaves out returns,
#     for agent a, one series per active domain with the libvirt exporter's value; for agent
#     b balloonmgr's own value where it exports one (each domain once; shut-off domains too),
#     the exporter's where not (the test driver has no RSS);
#   - the label values of what the agents export are snake_case (state="shut_off");
#   - the demo host fires no BalloonmgrStatsStale: its statistics' 1989 timestamp (the test
#     driver's) is not exported, and the alert's expression is empty.
# Root (as every integration test); no libvirtd needed. About 30 s.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
. "$(dirname "$0")/lib/prom.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
ROOT=${BM_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
bm_require_root
bm_prom_ensure

work=$(mktemp -d)
export BALLOONMGR_RUNTIME_DIR=$work/run
DEMO="test://$ROOT/demo/host.xml"

start_agent() { # start_agent NAME [ARGS...]: sets port_NAME
    local name=$1 port; shift
    "$BM" -c "$DEMO" agent --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --listen 127.0.0.1:0 \
        --state "$work/$name-state.json" "$@" >"$work/$name.log" 2>&1 &
    bm_add_cleanup "kill $! 2>/dev/null || true"
    port=$(bm_agent_port "$work/$name.log")
    printf -v "port_$name" %s "$port"
}
start_agent a --no-libvirt-duplicates
start_agent b
bm_add_cleanup "sleep 0.5; rm -rf '$work'"
bm_pass "two demo agents: a (--no-libvirt-duplicates) on :$port_a, b on :$port_b"

# the libvirt exporter of this host: the active domains (running and paused), values that
# are no one else's (a domain's balloonmgr value + 4096 + 512 * its index)
doms=$("$BM" -c "$DEMO" list | sort)
declare -A lib=()
i=0
{
    for d in $doms; do
        i=$((i + 1))
        s=$("$BM" -c "$DEMO" status --bytes --raw --no-headings -o NAME,MAXIMUM,CURRENT,AVAIL,USABLE,CACHES "$d")
        read -r _ max cur avail usable caches <<<"$s"
        off=$((4096 + 512 * i))
        for kv in "libvirt_domain_info_maximum_memory_bytes $max" "libvirt_domain_info_memory_usage_bytes $cur" \
                  "libvirt_domain_memory_stats_available_bytes $avail" \
                  "libvirt_domain_memory_stats_usable_bytes $usable" \
                  "libvirt_domain_memory_stats_disk_cache_bytes $caches" \
                  "libvirt_domain_memory_stats_rss_bytes $((1 << 30))" \
                  "libvirt_domain_memory_stats_swap_in_bytes 0" "libvirt_domain_memory_stats_swap_out_bytes 0" \
                  "libvirt_domain_memory_stats_major_fault_total 0"; do
            read -r m v <<<"$kv"
            [ "$v" = - ] && v=0
            echo "$m{domain=\"$d\"} $((v + off))"
            lib[$m/$d]=$((v + off))
        done
    done
} >"$work/libvirt.prom"
[ -n "$doms" ] && [ "${#lib[@]}" -ge 9 ] || bm_fail "no active demo domains ($doms)"

bm_prom_start_pushgateway
# one family at a time, so each keeps its samples together as the text format wants them
sort "$work/libvirt.prom" >"$work/libvirt.sorted.prom"
bm_prom_push "job/libvirt/instance/127.0.0.1:9177" "$work/libvirt.sorted.prom" ||
    bm_fail "push of the libvirt exporter's series failed"
BM_PROM_RULES="$ROOT/contrib/prometheus/balloonmgr-alerts.yml" \
    bm_prom_start "127.0.0.1:$port_a" "127.0.0.1:$port_b" pushgateway
for p in "$port_a" "$port_b"; do
    bm_prom_wait "balloonmgr_passes_total{instance=\"127.0.0.1:$p\"} >= 2" 60 >/dev/null ||
        bm_fail "Prometheus has no two passes of the agent on :$p ($(bm_prom_targets))"
done
bm_prom_wait 'libvirt_domain_memory_stats_rss_bytes' 30 >/dev/null || bm_fail "no libvirt exporter series in Prometheus"
# rate() needs two samples of each
bm_prom_wait "count(count_over_time(balloonmgr_passes_total{instance=\"127.0.0.1:$port_a\"}[1m]) >= 3)" 30 >/dev/null ||
    bm_fail "too few scrapes of agent a"
bm_pass "Prometheus scrapes both agents and the libvirt exporter's series (job libvirt, 127.0.0.1:9177)"

# the dashboard's targets that read a family --no-libvirt-duplicates leaves out
dash=$ROOT/contrib/grafana/balloonmgr-dashboard.json
mapfile -t targets < <(jq -r '.. | objects | select(has("targets")) | .title as $t | .targets[] |
    select(.expr | test("balloonmgr_domain_(maximum|balloon_current|guest_available|guest_usable|guest_disk_caches|rss|guest_swap_in|guest_swap_out|guest_major_faults)_")) |
    [$t, .refId, (.expr | @base64)] | @tsv' "$dash")
[ "${#targets[@]}" -eq 9 ] || bm_fail "expected 9 dashboard targets on duplicated families, found ${#targets[@]}"
# values SERIES-JSON: "domain value" lines, sorted, values as integers
values() { jq -r '.[] | "\(.metric.domain) \(.value[1] | tonumber | floor)"' | sort; }
for t in "${targets[@]}"; do
    IFS=$'\t' read -r title ref b64 <<<"$t"
    expr=$(base64 -d <<<"$b64")
    own=$(grep -o 'balloonmgr_domain_[a-z_]*' <<<"$expr" | head -1)
    libname=$(grep -o 'libvirt_domain_[a-z_]*' <<<"$expr" | head -1 || true)
    [ -n "$libname" ] || bm_fail "$title/$ref: no libvirt exporter family to fall back on: $expr"
    rate=0; [[ $expr == *rate\(* ]] && rate=1
    for agent in a b; do
        port=port_$agent
        q=$(sed -e 's/\$job/balloonmgr/g' -e "s/\\\$instance/127.0.0.1:${!port}/g" -e 's/\$domain/.*/g' \
                -e 's/\$__rate_interval/1m/g' <<<"$expr")
        got=$(bm_prom_query "$q" | values) || bm_fail "$title/$ref: query failed: $q"
        # what it should be: balloonmgr's own series of this agent where there is one, else the
        # libvirt exporter's; with rate() the values are 0 (counters that do not move): domains only
        mine=$(bm_prom_query "$own{instance=\"127.0.0.1:${!port}\"}" | values)
        want=""
        for d in $( { echo "$doms"; awk '{ print $1 }' <<<"$mine"; } | sort -u); do
            v=$(awk -v d="$d" '$1 == d { print $2 }' <<<"$mine")
            [ -n "$v" ] || v=${lib[$libname/$d]:-}
            [ -n "$v" ] || continue
            [ "$rate" = 1 ] && v=0
            want+="$d $v"$'\n'
        done
        want=$(sort <<<"${want%$'\n'}")
        [ "$rate" = 1 ] && got=$(awk '{ print $1, 0 }' <<<"$got" | sort)
        [ "$got" = "$want" ] ||
            bm_fail "$title/$ref for agent $agent: got [$(tr '\n' ',' <<<"$got")], want [$(tr '\n' ',' <<<"$want")] ($q)"
        if [ "$agent" = a ]; then
            [ -z "$mine" ] || bm_fail "agent a exports $own under --no-libvirt-duplicates"
        fi
    done
    bm_pass "$title/$ref: agent a ($own left out) shows $libname; agent b its own where it has one, each domain once"
done

# snake_case label values of both agents (the domain, uuid, version, revision and le labels
# are names, not words)
bad=$(bm_prom_query '{__name__=~"balloonmgr_.+", job="balloonmgr"}' |
      jq -r '.[].metric | to_entries[] | select(.key | IN("__name__", "domain", "uuid", "version", "revision", "le", "job", "instance") | not)
             | select(.value | test("^[a-z][a-z0-9]*(_[a-z0-9]+)*$") | not) | "\(.key)=\(.value)"' | sort -u)
[ -z "$bad" ] || bm_fail "label values that are not snake_case: $bad"
states=$(bm_prom_query 'count by (state) (balloonmgr_domain_info)' | jq -r '.[].metric.state' | sort | tr '\n' ' ')
[[ $states == *shut_off* ]] || bm_fail "balloonmgr_domain_info has no state=\"shut_off\" on the demo host: $states"
bm_pass "label values snake_case (balloonmgr_domain_info states: $states)"

# the demo fires no BalloonmgrStatsStale: no 1989 timestamp exported, the alert's expression empty
n=$(bm_prom_query 'balloonmgr_domain_stats_last_update_timestamp_seconds < 946684800' | jq length)
[ "$n" -eq 0 ] || bm_fail "$n statistics timestamps from before 2000 exported (the test driver's 1989)"
stale=$(awk '/alert: BalloonmgrStatsStale/ { f = 1; next } f && /expr:/ { g = 1; next }
             g && /for:/ { exit } g { sub(/^ +/, ""); printf "%s ", $0 }' "$ROOT/contrib/prometheus/balloonmgr-alerts.yml")
[ -n "$stale" ] || bm_fail "BalloonmgrStatsStale's expression not found"
n=$(bm_prom_query "$stale" | jq length)
pending=$(bm_prom_query 'ALERTS{alertname="BalloonmgrStatsStale"}' | jq length)
[ "$n" -eq 0 ] && [ "$pending" -eq 0 ] || bm_fail "BalloonmgrStatsStale: $n series, $pending pending or firing ($stale)"
bm_pass "the demo host fires no BalloonmgrStatsStale ($stale: empty)"
