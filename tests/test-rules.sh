#!/usr/bin/env bash
# The Prometheus rules of contrib/: promtool check rules on the alerts and the fleet
# recording rules, promtool test rules on tests/data/prometheus/rules.test.yml (every alert
# fires when it should and not before, no BalloonmgrStatsStale for a paused domain, no
# BalloonmgrStalledInflates for deflates, the fleet
# totals), and both dashboards are valid JSON whose expressions use only recorded or
# documented names. Usage: test-rules.sh SOURCE_ROOT   (TAP output)
set -u
ROOT=$1
if ! command -v promtool >/dev/null; then
    echo "1..0 # SKIP promtool is not installed (tools/install-deps.sh test)"
    exit 0
fi
. "$ROOT/tests/tap.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for f in balloonmgr-alerts.yml balloonmgr-rules.yml; do
    promtool check rules "$ROOT/contrib/prometheus/$f" >"$log" 2>&1
    ok $? "promtool check rules $f ($(grep -o '[0-9]* rules found' "$log"))" || sed 's/^/# /' "$log"
done
(cd "$ROOT/tests/data/prometheus" && promtool test rules rules.test.yml) >"$log" 2>&1
ok $? "promtool test rules: alerts and fleet rules on made-up series" || sed 's/^/# /' "$log"
for d in balloonmgr-fleet-dashboard balloonmgr-dashboard; do
    dash=$ROOT/contrib/grafana/$d.json
    jq -e '.panels | length > 0' "$dash" >/dev/null 2>&1
    ok $? "$d: valid JSON with panels"
    # every name an expression uses is recorded by balloonmgr-rules.yml or documented in
    # docs/metrics.md (a renamed metric left behind fails here)
    names=$(jq -r '.. | objects | .expr? // empty' "$dash" |
            grep -oE '(instance)?:?[a-z_]*balloonmgr_[a-z_]+(:[a-z0-9_]+)?' | sort -u)
    missing=""
    for m in $names; do
        base=${m%_bucket}
        grep -q "record: $m\$" "$ROOT/contrib/prometheus/balloonmgr-rules.yml" ||
            grep -q "^| \`$base\` | [a-z]" "$ROOT/docs/metrics.md" || missing="$missing $m"
    done
    [ -z "$missing" ] && [ -n "$names" ]
    ok $? "$d: every name is recorded or documented (${missing:- $(echo $names | wc -w) names})"
done
tap_done
