#!/usr/bin/env bash
# Linux 6.12's own starvation statistics on a real guest, read through the QEMU monitor
# (qom-get guest-stats; verify_features = always), by timer passes (run --once) whose host
# mode a fake /proc sets (hold: 4 of 24 GiB available; reclaim: 1 GiB):
# - a 6.12 guest under QEMU >= 9.2 (test-stack trixie: QEMU 10): one 512 MiB guest ballooned
#   to 256 MiB fills its page cache from its disk, then takes 150 MiB of anonymous memory:
#   its allocations stall in direct reclaim, and the pass after it deflates it, the reason
#   naming the stalls (not the faults, not keep_free); ballooned to 200 MiB it then takes
#   340 MiB: real OOM kills (bm-guest-load's worker, restarted each time), and the pass after
#   them deflates it to its maximum at once although the host reclaims; the worker then holds
#   its 340 MiB; idle again, the next reclaim pass leaves it alone for the episode (a dry run
#   without the ledger's OOM mark would inflate it); the counters are in the textfile;
# - where they do not exist (Debian 12: QEMU 7.2 names none; a guest before 6.10 sends none):
#   the pass reads them, says nothing of it, and shows them unknown (null, no sample), not 0.
# The replies of qom-get guest-stats are kept in the work directory (the fixtures of
# test-qmp's guest-stats cases come from them).
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
SHIM=${BM_QMP_LOG_SO:?set BM_QMP_LOG_SO to the qmp-log.so shim} # which monitor commands we sent
bm_setup
t_all=$(bm_now)

# the load's times count from the guest's start of bm-guest-load (about when it is ready):
# cache first (reclaimable), then anonymous memory over it (stalls), nothing, then more than
# a 200 MiB guest has (OOM), nothing. On Debian 13's stack each phase left the test's steps in
# it 9-27 s to spare (the console's "bm-load: t=" lines: cached at 10.8 s, 150 MiB held at
# 22.6, the OOM kill at 58.7, 340 MiB held at 60.8; 2026-12-03); a step that comes too late
# fails the test, it does not pass it ("... came before the baseline pass").
bm_define_guest starve 512 disk=256 load=10:cache:200,22:150,45:0,58:340,88:0
bm_wait_guest_ready starve 240
dom=$(bm_dom starve)
work=$BM_WORKDIR
con=$(bm_console_log starve)

# fake host readings: the mode of each pass
mkdir -p "$work/hold/pressure" "$work/reclaim/pressure" "$work/textfile"
printf 'MemTotal: 25165824 kB\nMemFree: 3145728 kB\nMemAvailable: 4194304 kB\n' >"$work/hold/meminfo"
printf 'MemTotal: 25165824 kB\nMemFree: 524288 kB\nMemAvailable: 1048576 kB\n' >"$work/reclaim/meminfo"
for m in hold reclaim; do
    printf 'some avg10=0.00 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\n' \
        >"$work/$m/pressure/memory"
done
cat >"$work/starve.policy" <<POL
[host]
verify_features = always
[guest]
exclude = yes
[domain "${BM_PREFIX}*"]
exclude = no
timer_inflate = always
POL
"$BM" policy check "$work/starve.policy" >/dev/null || bm_fail "the test policy does not pass policy check"

qom_stats() { # the balloon's guest-stats as QEMU names them
    local path
    path=$(bm_virsh qemu-monitor-command "$dom" '{"execute":"x-query-virtio"}' |
        jq -r '.return[] | select(.name == "virtio-balloon") | .path')
    bm_virsh qemu-monitor-command "$dom" --pretty \
        "{\"execute\":\"qom-get\",\"arguments\":{\"path\":\"$path\",\"property\":\"guest-stats\"}}" | jq 'del(.id)'
}
stat_of() { jq -r --arg k "stat-$2" '.return.stats[$k] // "none"' "$1"; }
n=0 F=
pass() { # pass MODE [RUN_ARG...]: a timer's pass under the fake /proc MODE; F: its JSON file
    local mode=$1
    shift
    n=$((n + 1))
    F=$work/run$n.json
    LD_PRELOAD=$SHIM BM_QMP_LOG=$work/qmp.log \
        "$BM" -c "$BM_URI" run --once --json --policy "$work/starve.policy" --proc "$work/$mode" \
        --textfile "$work/textfile" "$@" >"$F" 2>"$work/run$n.err" ||
        { cat "$work/run$n.err" >&2; bm_fail "pass $n ($mode) failed"; }
    cat "$work/run$n.err"
    jq -c --arg d "$dom" '.decisions[] | select(.name == $d) | {action, current_bytes, target_bytes,
        reason, oom_kills, alloc_stalls_per_second, direct_reclaim_bytes_per_second}' "$F"
}
decision() { jq -e --arg d "$dom" ".decisions[] | select(.name == \$d) | $2" "$1" >/dev/null; }
reason() { jq -r --arg d "$dom" '.decisions[] | select(.name == $d) | .reason' "$1"; }
actual_mib() { echo $(($(bm_memstat starve actual) / 1024)); }
logged() { grep -q "$1" "$con"; }
act() { # act MODE: a real pass (the test's state file) that logs no warning; f, r: its JSON, reason
    pass "$1" --state "$work/state.json"
    no_warning
    f=$F r=$(reason "$F")
}
no_warning() { ! grep -q "starvation statistics" "$work/run$n.err" || bm_fail "pass $n: $(cat "$work/run$n.err")"; }
# stats_after WHAT: waits for the guest's statistics taken after now (its last-update two
# whole seconds on: the one of this second may be from before it), what a pass reads of WHAT:
# a reading newer than the event, however long the guest takes to send it (never a sleep)
stats_after() {
    local since
    since=$(bm_memstat starve last_update)
    newer() { [ "$(bm_memstat starve last_update)" -gt $((since + 1)) ]; }
    BM_WAIT_INTERVAL=0.2 bm_wait_until 60 "the guest's statistics of after $1 (last update $since)" newer ||
        bm_fail "no guest statistics after $1 (last update still $(bm_memstat starve last_update))"
}

"$BM" -c "$BM_URI" set "$dom" 256M --wait=60 >/dev/null || bm_fail "set $dom 256M failed"
bm_wait_fresh_stats starve
qom_stats >"$work/guest-stats-ready.json"
cat "$work/guest-stats-ready.json"
oom=$(stat_of "$work/guest-stats-ready.json" oom-kills)

# --- where the statistics do not exist: unknown, not 0, and no complaint
if [ "$oom" = none ] || [ "$oom" = 18446744073709551615 ]; then
    bm_log "no starvation statistics here (QEMU $(bm_virsh qemu-monitor-command "$dom" \
        '{"execute":"query-version"}' | jq -r '.return.qemu | "\(.major).\(.minor)"'), guest kernel $BM_KERNEL_VERSION: stat-oom-kills $oom)"
    act hold
    # the second pass from the guest's next statistics: a rate needs two readings a second or
    # more apart (two passes in one second left major_faults_per_second null: CI, 2026-12-02)
    before=$(bm_memstat starve last_update)
    next_stats() { [ "$(bm_memstat starve last_update)" -gt "$before" ]; }
    BM_WAIT_INTERVAL=0.2 bm_wait_until 10 "the guest's next statistics" next_stats ||
        bm_fail "no guest statistics after $before"
    act hold
    decision "$f" '.oom_kills == null and .oom_at == null and .alloc_stalls_per_second == null and
        .direct_reclaim_bytes_per_second == null and .major_faults_per_second != null' ||
        bm_fail "statistics that do not exist are not shown unknown: $(jq -c '.decisions' "$f")"
    ! grep -qE "balloonmgr_domain_guest_(oom_kills|alloc_stalls|scanned_bytes|reclaimed_bytes)_total\{domain=\"$dom\"" \
        "$work/textfile/balloonmgr.prom" || bm_fail "a sample of statistics that do not exist"
    grep -q "balloonmgr_domain_guest_major_faults_total{domain=\"$dom\"}" "$work/textfile/balloonmgr.prom" ||
        bm_fail "the textfile lacks the domain's other statistics"
    decision "$f" '.action != "skip"' || bm_fail "the domain was skipped: $(reason "$f")"
    asked=$(grep -c "^$dom .*\"qom-get\".*\"guest-stats\"" "$work/qmp.log" || true)
    [ "$asked" -ge 2 ] || bm_fail "the passes did not ask for guest-stats: $(cat "$work/qmp.log" 2>/dev/null)"
    bm_pass "no starvation statistics (stat-oom-kills $oom): two passes asked the monitor ($asked qom-get guest-stats) without a warning, show them unknown (null, no sample), and decide as before ($(reason "$f"))"
    bm_pass "test-starve in $(bm_elapsed "$t_all") s"
    exit 0
fi

# --- allocation stalls: page cache, then anonymous memory over it
BM_WAIT_INTERVAL=0.5 bm_wait_until 120 "the guest's cache read" logged "bm-load: .*cached 200 MiB" ||
    bm_fail "the guest did not read its disk into its cache: $(grep bm-load "$con" | tail -3)"
logged "bm-load: .*phase 2" && bm_fail "the anonymous memory came before the baseline pass: the test shows nothing"
act hold
decision "$f" '.action != "deflate"' || bm_fail "the baseline pass deflated already: $(reason "$f")"
BM_WAIT_INTERVAL=0.5 bm_wait_until 60 "the guest's 150 MiB" logged "bm-load: .*holding 150 MiB" ||
    bm_fail "the guest did not take its 150 MiB: $(grep bm-load "$con" | tail -3)"
stats_after "its 150 MiB"
qom_stats >"$work/guest-stats-stalls.json"
before=$(actual_mib)
act hold
decision "$f" '.action == "deflate" and .under_pressure and (.alloc_stalls_per_second >= 1 or
    .direct_reclaim_bytes_per_second >= 1048576)' && grep -q "^guest under pressure (allocation stalls " <<<"$r" ||
    bm_fail "the stalls were not seen and acted on: $r; guest-stats $(jq -c .return.stats "$work/guest-stats-stalls.json")"
grep -q "balloonmgr_domain_guest_alloc_stalls_total{domain=\"$dom\"} [1-9]" "$work/textfile/balloonmgr.prom" ||
    bm_fail "no allocation stalls in the textfile"
bm_pass "allocation stalls: $(stat_of "$work/guest-stats-stalls.json" alloc-stalls) stalls, $(( $(stat_of "$work/guest-stats-stalls.json" direct-reclaims) >> 20 )) MiB direct reclaim; the pass deflated it $before -> $(actual_mib) MiB: $r"

# --- OOM kills: ballooned to 200 MiB, it takes 340 MiB
BM_WAIT_INTERVAL=0.5 bm_wait_until 90 "the guest to free its memory" logged "bm-load: .*phase 3" ||
    bm_fail "the guest's load did not end its phase 2"
"$BM" -c "$BM_URI" set "$dom" 200M --wait=60 >/dev/null || bm_fail "set $dom 200M failed"
logged "bm-load: .*phase 4" && bm_fail "the 340 MiB came before the baseline pass: the test shows nothing"
stats_after "the inflate to 200 MiB"
act hold
decision "$f" '.oom_kills == 0 and .action != "deflate"' ||
    bm_fail "the baseline pass: OOM kills before the load, or a deflate: $(reason "$f")"
BM_WAIT_INTERVAL=0.5 bm_wait_until 90 "an OOM kill in the guest" logged "bm-load: .*OOM: worker" ||
    bm_fail "no OOM kill in the guest: $(grep bm-load "$con" | tail -3)"
oom_stats() { qom_stats >"$work/guest-stats-oom.json"; [ "$(stat_of "$work/guest-stats-oom.json" oom-kills)" -ge 1 ]; }
BM_WAIT_INTERVAL=0.5 bm_wait_until 10 "stat-oom-kills to count it" oom_stats ||
    bm_fail "QEMU's stat-oom-kills did not count the OOM kill: $(cat "$work/guest-stats-oom.json")"
cat "$work/guest-stats-oom.json"
act reclaim
decision "$f" '.action == "deflate" and .target_bytes >= 511 * 1048576 and .oom_kills >= 1 and .applied' &&
    grep -q "^OOM kill in the guest ([0-9]* since the previous reading): give .* at once, to its maximum although the host is reclaiming; not inflated again in this pressure episode$" <<<"$r" ||
    bm_fail "the OOM kill was not acted on: $r"
target=$(jq --arg d "$dom" '.decisions[] | select(.name == $d) | .target_bytes' "$f")
grep -Eq "change domain='$dom' direction=deflate from_bytes=[0-9]+ target_bytes=$target .* outcome=reached .*uuid=" \
    "$work/run$n.err" || bm_fail "no change record of the deflate: $(cat "$work/run$n.err")"
grep -q "balloonmgr_domain_guest_oom_kills_total{domain=\"$dom\"} [1-9]" "$work/textfile/balloonmgr.prom" ||
    bm_fail "no OOM kills in the textfile"
BM_WAIT_INTERVAL=0.5 bm_wait_until 60 "the worker to hold its 340 MiB" logged "bm-load: .*holding 340 MiB" ||
    bm_fail "the guest's worker did not get its 340 MiB after the deflate"
bm_pass "OOM kill ($(stat_of "$work/guest-stats-oom.json" oom-kills) counted by QEMU): the reclaim pass deflated it to $(actual_mib) MiB at once and the worker then held its 340 MiB: $r; QEMU's qom-get guest-stats: $(jq -c .return "$work/guest-stats-oom.json")"

# --- idle again in the same episode: not inflated (the ledger's OOM mark, not its given_at)
BM_WAIT_INTERVAL=0.5 bm_wait_until 90 "the guest to free its memory" logged "bm-load: .*phase 5" ||
    bm_fail "the guest's load did not end its phase 4"
stats_after "its phase 5"
# the OOM kill counted in full: a guest can count it (or a second one) in a report later than
# the one the OOM pass read; one more pass then records that count, so that the pass below
# compares with it and sees the episode's mark alone (the trixie lane saw "1 since the previous
# reading" here when a fixed wait assumed which reading came when)
saved_ooms() { jq -r --arg a "$(bm_virsh domuuid "$dom")" '.domains[] | select(.uuid == $a) | .oom_kills' "$work/state.json"; }
qom_stats >"$work/guest-stats-idle.json"
if [ "$(stat_of "$work/guest-stats-idle.json" oom-kills)" != "$(saved_ooms)" ]; then
    bm_log "the guest counted OOM kills after the OOM pass's reading ($(saved_ooms) -> $(stat_of "$work/guest-stats-idle.json" oom-kills)): one more pass records them"
    act reclaim
    stats_after "the pass that recorded them"
fi
# as if its balloon had risen in an earlier pass and that mark had passed: only the OOM mark holds
jq --argjson a "$(($(bm_memstat starve actual) * 1024))" '.domains |= map(del(.given_at) | .actual_bytes = $a)' \
    "$work/state.json" >"$work/state.tmp" && mv "$work/state.tmp" "$work/state.json"
act reclaim
decision "$f" '.action == "none" and .oom_at != null' &&
    grep -q "^OOM kill in the guest (seen [0-9]* s ago): at its maximum; not inflated again in this pressure episode$" <<<"$r" ||
    bm_fail "the guest OOM-killed in this episode was not held: $r"
jq --argjson a "$(($(bm_memstat starve actual) * 1024))" '.domains |= map(del(.oom_at, .given_at) | .actual_bytes = $a)' \
    "$work/state.json" >"$work/nomark.json"
pass reclaim --dry-run --state "$work/nomark.json"
f=$F
decision "$f" '.action == "inflate"' ||
    bm_fail "without the OOM mark the pass would not inflate it either (the hold shows nothing): $(reason "$f")"
bm_pass "idle again ($(actual_mib) MiB) in the episode: the reclaim pass left it alone, a dry run without the OOM mark would inflate it"
bm_pass "test-starve in $(bm_elapsed "$t_all") s"
