#!/usr/bin/env bash
# The systemd units as built, checked offline: each unit's exposure score of
# `systemd-analyze security` must stay at or below 2.0. TAP; skipped without systemd-analyze.
# Usage: test-units.sh BUILD_DIR
set -u
dir=$1/systemd
. "$(dirname "$0")/tap.sh"
systemd-analyze security --help 2>/dev/null | grep -q -- --offline ||
    tap_skip_all "systemd-analyze security --offline is not available"
units=(balloonmgr.service balloonmgr-monitor.service balloonmgr-policy.service)
for u in "${units[@]}"; do
    line=$(systemd-analyze security --offline=yes "$dir/$u" 2>&1 | tail -n 1)
    score=$(sed -n 's/.*exposure level for .*: \([0-9.]*\) .*/\1/p' <<<"$line")
    if [ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }'; then
        ok 0 "$u exposure $score"
    else
        ok 1 "$u: $line"
    fi
done
tap_done
