#!/usr/bin/env bash
# The systemd units as built, checked offline: each unit's exposure score of
# `systemd-analyze security` must stay at or below 2.0, also with the shipped --textfile and
# --push drop-ins; `systemd-analyze verify` is clean for the units and with each drop-in (the
# binary path pointed at the build's); the timer's TimeoutStartSec= leaves room for the default
# policy's apply_timeout; the agent and the timer conflict; the agents are Type=notify with a
# watchdog. TAP; the systemd-analyze checks are
# skipped without it.
# Usage: test-units.sh BUILD_DIR SOURCE_ROOT
set -u
BUILD=$(realpath "$1")
ROOT=$(realpath "$2")
dir=$BUILD/systemd
. "$ROOT/tests/tap.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# seconds of a systemd time span such as 90s, 2min, 1min 30s
span_s() {
    local total=0 v
    for v in $1; do
        case "$v" in
        *min) total=$((total + ${v%min} * 60)) ;;
        *s) total=$((total + ${v%s})) ;;
        *) total=$((total + v)) ;;
        esac
    done
    echo "$total"
}
timeout=$(span_s "$(sed -n 's/^TimeoutStartSec=//p' "$dir/balloonmgr-policy.service")")
apply=$(span_s "$(sed -n 's/^apply_timeout *= *//p' "$ROOT/policies/default.policy")")
[ "$timeout" -ge $((apply + 20)) ]
ok $? "policy pass: TimeoutStartSec ${timeout}s leaves 20 s above apply_timeout ${apply}s for the pass"
every=$(span_s "$(sed -n 's/^OnUnitActiveSec=//p' "$ROOT/systemd/balloonmgr-policy.timer")")
planned=$(span_s "$(sed -n 's/^timer_interval *= *//p' "$ROOT/policies/default.policy")")
[ -n "$every" ] && [ "$every" -eq "$planned" ]
ok $? "the timer runs a pass every ${every}s, the timer_interval ${planned}s the policy plans for"
grep -q '^Conflicts=.*balloonmgr-policy.timer' "$dir/balloonmgr.service" &&
    ! grep -q '^Conflicts=.*balloonmgr-policy.service' "$dir/balloonmgr.service" &&
    ! grep -q '^Conflicts=' "$dir/balloonmgr-policy.service" &&
    grep -q '^Conflicts=balloonmgr.service' "$ROOT/systemd/balloonmgr-policy.timer"
ok $? "the agent conflicts with the timer, not with a pass started by hand (the lock refuses that)"
for u in balloonmgr.service balloonmgr-monitor.service; do
    grep -qx 'Type=notify' "$dir/$u" && grep -q '^WatchdogSec=[1-9]' "$dir/$u"
    ok $? "$u: Type=notify with WatchdogSec= (READY=1, STATUS=, WATCHDOG=1: test-notify)"
done

grep -qx 'SuccessExitStatus=4' "$dir/balloonmgr-policy.service"
ok $? "policy pass: exit 4 (the state file's lock held: the agent runs) is a clean skip, not a failed unit"

# the journal's catalog: each MESSAGE_ID of src/log.h has its entry, and every @FIELD@ an
# entry fills in is a field balloonmgr sends (journalctl -x would print the @FIELD@ as it is)
cat=$ROOT/systemd/balloonmgr.catalog
ids=$(sed -n 's/^#define BM_LOG_ID_[A-Z]* "\([0-9a-f]\{32\}\)"$/\1/p' "$ROOT/src/log.h")
missing=""
for id in $ids; do grep -qx -- "-- $id" "$cat" || missing="$missing $id"; done
[ "$(wc -w <<<"$ids")" -eq 4 ] && [ -z "$missing" ]
ok $? "the catalog has an entry for each of the $(wc -w <<<"$ids") MESSAGE_IDs${missing:+; missing:$missing}"
unknown=""
for f in $(grep -o '@[A-Z_]*@' "$cat" | tr -d @ | sort -u); do
    grep -q "\"$f=" "$ROOT/src/log.c" || unknown="$unknown $f"
done
[ -z "$unknown" ]
ok $? "the catalog fills in only fields the records have${unknown:+; not sent:$unknown}"
if command -v journalctl >/dev/null; then
    # journalctl's own parser: the catalog database of a root with only this catalog
    mkdir -p "$tmp/root/usr/lib/systemd/catalog" "$tmp/root/var/lib/systemd/catalog"
    cp "$cat" "$tmp/root/usr/lib/systemd/catalog/"
    journalctl --root="$tmp/root" --update-catalog 2>"$tmp/catalog.err" &&
        journalctl --root="$tmp/root" --list-catalog >"$tmp/catalog.list" 2>>"$tmp/catalog.err"
    ok $? "journalctl --update-catalog takes it" "$(cat "$tmp/catalog.err")"
    listed=0
    for id in $ids; do grep -q "^$id " "$tmp/catalog.list" && listed=$((listed + 1)); done
    [ "$listed" -eq 4 ]
    ok $? "journalctl --list-catalog lists the 4 entries with their subjects" "$(cat "$tmp/catalog.list")"
else
    tap_skip "journalctl is not installed"
fi

units=(balloonmgr.service balloonmgr-monitor.service balloonmgr-policy.service)
if ! systemd-analyze security --help 2>/dev/null | grep -q -- --offline; then
    tap_skip "systemd-analyze security --offline is not available"
    tap_done
    exit
fi

# a unit directory of the built units, their ExecStart= pointed at the build's binary
mkdir -p "$tmp/units"
bindir=$(sed -n 's|^ExecStart=\(.*\)/balloonmgr .*|\1|p' "$dir/balloonmgr.service")
for u in "${units[@]}"; do
    sed "s|$bindir/balloonmgr |$BUILD/src/balloonmgr |" "$dir/$u" >"$tmp/units/$u"
done
cp "$ROOT/systemd/balloonmgr-policy.timer" "$tmp/units/"

# security: exposure of each unit, alone and with each drop-in
exposure() { # exposure UNIT_NAME: the score line of the unit found in $tmp/units
    SYSTEMD_UNIT_PATH=$tmp/units: systemd-analyze security --offline=yes "$1" 2>&1 | tail -n 1
}
check_exposure() { # check_exposure UNIT_NAME WHAT
    local line score
    line=$(exposure "$1")
    score=$(sed -n 's/.*exposure level for .*: \([0-9.]*\) .*/\1/p' <<<"$line")
    [ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }'
    ok $? "$2 exposure ${score:-?} ($line)"
}
for u in "${units[@]}"; do
    check_exposure "$u" "$u"
done

verify() { # verify UNIT...: systemd-analyze verify output, empty when clean
    SYSTEMD_UNIT_PATH=$tmp/units: systemd-analyze verify --man=no "$@" 2>&1
}
out=$(verify "${units[@]}" balloonmgr-policy.timer)
ok $([ -z "$out" ]; echo $?) "systemd-analyze verify: the units and the timer are clean${out:+: $(tr '\n' '|' <<<"$out")}"

for d in textfile push; do
    mkdir -p "$tmp/units/balloonmgr-policy.service.d"
    sed "s|$bindir/balloonmgr |$BUILD/src/balloonmgr |" "$dir/$d.conf" >"$tmp/units/balloonmgr-policy.service.d/$d.conf"
    out=$(verify balloonmgr-policy.service)
    ok $([ -z "$out" ]; echo $?) "systemd-analyze verify with the $d drop-in is clean${out:+: $(tr '\n' '|' <<<"$out")}"
    check_exposure balloonmgr-policy.service "balloonmgr-policy.service with the $d drop-in"
    rm -r "$tmp/units/balloonmgr-policy.service.d"
done
# what the drop-ins open, and only that
grep -q '^ReadWritePaths=-/var/lib/prometheus/node-exporter$' "$dir/textfile.conf" &&
    grep -q -- '--textfile /var/lib/prometheus/node-exporter' "$dir/textfile.conf"
ok $? "textfile drop-in: --textfile and the one directory it writes, Debian's node_exporter's (-Dtextfiledir default)"
grep -q '^IPAddressAllow=' "$dir/push.conf" && grep -q -- '--push http' "$dir/push.conf" &&
    ! grep -q '^IPAddressDeny=$' "$dir/push.conf"
ok $? "push drop-in: --push and an IPAddressAllow= for the Pushgateway, IPAddressDeny=any kept"

tap_done
