#!/usr/bin/env bash
# A guest without a balloon driver: set --wait ends "stalled" (exit 3); the measurement goes to
# the spool, the next timer run counts it, marks the domain unresponsive and does not
# re-target it; the metrics say so.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
bm_setup

work=$BM_WORKDIR # kept if the test fails; $work/run is BALLOONMGR_RUNTIME_DIR (bm_setup)
mkdir -p "$work/run/changes" "$work/textfile"

bm_fixture_guest nodriver
dom=$BM_DOM

set +e
out=$("$BM" -c "$BM_URI" set "$dom" 50% --wait --stall=3 --json 2>"$work/err"); rc=$?
set -e
echo "$out" | jq -c .; cat "$work/err"
[ "$rc" -eq 3 ] || bm_fail "set --wait on a driverless guest exited $rc, want 3"
echo "$out" | jq -e '.outcome == "stalled" and .reached_bytes == 268435456' >/dev/null || bm_fail "outcome is not stalled"
grep -q "stalled: the balloon did not move for 3 s" "$work/err" || bm_fail "no stall message"
[ "$(ls "$work/run/changes" | wc -l)" -eq 1 ] || bm_fail "the stalled change was not spooled"
bm_pass "set --wait on a guest without balloon driver: stalled after 3 s, exit 3, spooled"

bm_pressure_policy "$work/p.policy"
for i in 1 2; do
    "$BM" -c "$BM_URI" run --once --json --policy "$work/p.policy" --state "$work/state.json" \
        --textfile "$work/textfile" >"$work/run$i.json"
    jq -c --arg d "$dom" '.decisions[] | select(.name == $d) | {action, reason}' "$work/run$i.json"
    jq -e --arg d "$dom" '.decisions[] | select(.name == $d) | .action == "skip" and (.reason | startswith("unresponsive"))' \
        "$work/run$i.json" >/dev/null || bm_fail "run $i: the unresponsive domain was not left alone"
done
[ "$(ls "$work/run/changes" | wc -l)" -eq 0 ] || bm_fail "the spool was not consumed"
grep -q "^balloonmgr_domain_unresponsive{domain=\"$dom\"} 1$" "$work/textfile/balloonmgr.prom" || bm_fail "not marked unresponsive in the metrics"
grep -q '^balloonmgr_balloon_changes_total{device="balloon",direction="inflate",outcome="stalled"} 1$' "$work/textfile/balloonmgr.prom" ||
    bm_fail "stalled change not counted exactly once across two runs"
grep -q '^balloonmgr_target_changes_total{direction="inflate"} 0$' "$work/textfile/balloonmgr.prom" ||
    bm_fail "the unresponsive domain was re-targeted"
bm_pass "next runs: counted once as stalled, marked unresponsive, not re-targeted"
