#!/usr/bin/env bash
# The systemd units as built, checked offline: each unit's exposure score of
# `systemd-analyze security` must stay at or below 2.0. TAP; skipped without systemd-analyze.
# Usage: test-units.sh BUILD_DIR
set -u
dir=$1/systemd
if ! systemd-analyze security --help 2>/dev/null | grep -q -- --offline; then
    echo "1..0 # SKIP systemd-analyze security --offline is not available"
    exit 0
fi
units=(balloonmgr.service balloonmgr-monitor.service balloonmgr-policy.service)
echo "1..${#units[@]}"
n=0 failed=0
for u in "${units[@]}"; do
    n=$((n + 1))
    line=$(systemd-analyze security --offline=yes "$dir/$u" 2>&1 | tail -n 1)
    score=$(sed -n 's/.*exposure level for .*: \([0-9.]*\) .*/\1/p' <<<"$line")
    if [ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }'; then
        echo "ok $n - $u exposure $score"
    else
        echo "not ok $n - $u: $line"
        failed=1
    fi
done
exit $failed
