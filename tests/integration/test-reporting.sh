#!/usr/bin/env bash
# Free page reporting and deflate-on-oom as users see them, on two real guests that touched
# 200 MiB and freed it: "rep" with <memballoon freePageReporting='on' autodeflate='on'>,
# "plain" with neither.
# - plain `status` reads both settings from the XML and sends no QEMU monitor command (the
#   LD_PRELOAD shim qmp-log.so logs the commands balloonmgr sends; libvirt shows no taint);
# - the free memory plain's QEMU holds (backed free) is shown per domain and on the host line,
#   with the `configure` command that turns reporting on; rep's guest hands its free pages
#   back by itself (its backed free is far below plain's) and gets no such line;
# - `status --probe` and `verify` show both features negotiated for rep, off for plain;
# - a timer run with verify_features = always exports configured, negotiated and backed free,
#   and keeps the verdicts in the state file, where a plain `status` finds them.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
SHIM=${BM_QMP_LOG_SO:?set BM_QMP_LOG_SO to the qmp-log.so shim}
bm_setup

work=$(mktemp -d)
export BALLOONMGR_RUNTIME_DIR=$work/run
bm_add_cleanup "rm -rf '$work'"

bm_define_guest rep 384 freepagereporting=on autodeflate=on load=0:touch:200
bm_define_guest plain 384 load=0:touch:200
bm_wait_guest_ready rep
bm_wait_guest_ready plain
rep=$(bm_dom rep) plain=$(bm_dom plain)
# Statistics taken while a guest touches read it short (usable 110 MiB, not 300): the checks
# below start from statistics both guests sent after their touch ended (QEMU's last_update,
# host time, past the second the console said so).
touched() { grep -q "touched and freed 200 MiB" "$(bm_console_log rep)" && grep -q "touched and freed 200 MiB" "$(bm_console_log plain)"; }
bm_wait_until 60 "both guests touched and freed 200 MiB" touched || bm_fail "a guest did not touch and free 200 MiB (console logs)"
touched_s=$(date +%s)
stats_after() { [ "$(bm_memstat rep last_update)" -gt "$touched_s" ] && [ "$(bm_memstat plain last_update)" -gt "$touched_s" ]; }
BM_WAIT_INTERVAL=0.5 bm_wait_until 30 "statistics of both guests taken after the touch" stats_after || bm_fail "no guest statistics after the touch"
bm_wait_fresh_stats rep plain

export BM_QMP_LOG=$work/qmp.log
# an ASan build's runtime must come first in LD_PRELOAD, before the shim
preload=$SHIM
asan=$(ldd "$BM" | awk '/libasan\.so/ { print $3; exit }')
[ -z "$asan" ] || preload="$asan $SHIM"
bm() { LD_PRELOAD=$preload "$BM" -c "$BM_URI" "$@"; }
tainted() { bm_virsh dominfo "$1" | grep -q "tainted: custom monitor control commands issued"; }
: >"$BM_QMP_LOG"

# --- the XML's settings, no monitor command
tainted_before=""
for d in "$rep" "$plain"; do tainted "$d" && tainted_before="$tainted_before $d"; done
bm status --json "$rep" "$plain" >"$work/status.json" || bm_fail "status --json failed"
jq -c '.domains[] | {name, free_page_reporting_configured, free_page_reporting, deflate_on_oom_configured, deflate_on_oom, backed_free_bytes}' "$work/status.json"
jq -e --arg r "$rep" --arg p "$plain" '[.domains[] | [.name, .free_page_reporting_configured, .deflate_on_oom_configured, .free_page_reporting, .deflate_on_oom]] ==
    [[$p, false, false, "not-probed", "not-probed"], [$r, true, true, "not-probed", "not-probed"]]' "$work/status.json" >/dev/null ||
    bm_fail "status --json: want rep configured on/on, plain off/off, both not probed"
bm status -o name,fpr,autodefl "$rep" "$plain" >"$work/status.txt" || bm_fail "status -o failed"
cat "$work/status.txt"
grep -Eq "^$rep +on +on$" "$work/status.txt" && grep -Eq "^$plain +off +off$" "$work/status.txt" ||
    bm_fail "status table: want FPR/AUTODEFL on on for $rep, off off for $plain"
[ ! -s "$BM_QMP_LOG" ] || { cat "$BM_QMP_LOG" >&2; bm_fail "plain status sent QEMU monitor commands"; }
for d in "$rep" "$plain"; do
    case "$tainted_before" in *" $d"*) bm_log "$d was tainted before status (another process): not checked"; continue ;; esac
    if tainted "$d"; then bm_virsh dominfo "$d" >&2; bm_fail "status: $d tainted"; fi
done
bm_pass "status: free page reporting and deflate-on-oom from the XML (on/on, off/off), not probed, no monitor command sent, no taint"

# --- backed free: plain's QEMU keeps the 200 MiB its guest freed, rep's guest reports them
backed() { jq -r --arg d "$1" '.domains[] | select(.name == $d) | .backed_free_bytes // 0' "$work/status.json"; }
handed_back() {
    bm status --json "$rep" "$plain" >"$work/status.json" || return 1
    local r p
    r=$(backed "$rep"); p=$(backed "$plain")
    [ "$p" -ge $((100 << 20)) ] && [ "$r" -lt $((p / 2)) ]
}
BM_WAIT_INTERVAL=2 bm_wait_until 90 "$plain holding >= 100 MiB backed free, $rep less than half of it" handed_back || {
    jq -c '.host, (.domains[] | {name, rss_bytes, available_bytes, usable_bytes, backed_free_bytes})' "$work/status.json" >&2
    bm_fail "backed free: want >= 100 MiB for $plain and less than half of it for $rep (reporting)"
}
bm_log "backed free: $plain $(($(backed "$plain") >> 20)) MiB, $rep $(($(backed "$rep") >> 20)) MiB, QEMU's own estimated $(($(jq .host.qemu_overhead_bytes "$work/status.json") >> 20)) MiB"
want="balloonmgr -c $BM_URI configure $plain --free-page-reporting on"
jq -e --arg p "$plain" --arg r "$rep" --arg w "$want" '
    (.domains[] | select(.name == $p) | .free_page_reporting_command) == $w and
    (.domains[] | select(.name == $r) | .free_page_reporting_command) == null and
    .host.backed_free_bytes >= ([.domains[].backed_free_bytes] | add) and
    .host.backed_free_without_reporting_bytes >= (.domains[] | select(.name == $p) | .backed_free_bytes)' "$work/status.json" >/dev/null ||
    bm_fail "status --json: want the configure command for $plain only, host sums at least these two"
bm_pass "status --json: $plain's QEMU holds its guest's free memory, with the configure command; $rep's guest handed it back"
bm status "$rep" "$plain" >"$work/status.txt" || bm_fail "status failed"
cat "$work/status.txt"
head -1 "$work/status.txt" | grep -Eq ', backed free [0-9.]+ [KMG]iB \([0-9.]+ [KMG]iB in [0-9]+ domains? without free page reporting\), overcommit' ||
    bm_fail "host line: want 'backed free SIZE (SIZE in N domains without free page reporting)'"
grep -qF "$plain: QEMU holds " "$work/status.txt" && grep -qF "'$want', then shut the domain down and start it again" "$work/status.txt" ||
    bm_fail "status: want the line with the configure command for $plain"
! grep -q "^$rep: QEMU holds" "$work/status.txt" || bm_fail "status: a configure line for $rep, which reports already"
bm_pass "status: backed free on the host line and the configure command for $plain"

# --- probed: negotiated
drivers_ok() { "$BM" -c "$BM_URI" verify --json "$rep" "$plain" | jq -e 'all(.domains[]; .driver_ok)' >/dev/null; }
BM_WAIT_INTERVAL=0.5 bm_wait_until 10 "DRIVER_OK in $rep and $plain" drivers_ok || true
bm status --probe --json "$rep" "$plain" >"$work/probe.json" || bm_fail "status --probe failed"
jq -e --arg r "$rep" --arg p "$plain" '[.domains[] | [.name, .free_page_reporting, .deflate_on_oom]] ==
    [[$p, "not-offered", "not-offered"], [$r, "negotiated", "negotiated"]]' "$work/probe.json" >/dev/null ||
    { jq -c '.domains[] | {name, free_page_reporting, deflate_on_oom}' "$work/probe.json" >&2; bm_fail "status --probe --json: want $rep negotiated twice, $plain not offered"; }
bm status --probe -o name,fpr,autodefl "$rep" "$plain" >"$work/probe.txt" || bm_fail "status --probe -o failed"
cat "$work/probe.txt"
grep -Eq "^$rep +on\+negotiated +on\+negotiated$" "$work/probe.txt" && grep -Eq "^$plain +off +off$" "$work/probe.txt" ||
    bm_fail "status --probe table: want on+negotiated twice for $rep, off off for $plain"
grep -q "^$rep .*query-virtio" "$BM_QMP_LOG" || { cat "$BM_QMP_LOG" >&2; bm_fail "status --probe sent no monitor command to $rep"; }
bm_pass "status --probe: reporting and deflate-on-oom negotiated for $rep (on+negotiated), off for $plain"

bm verify --json "$rep" "$plain" >"$work/verify.json" || bm_fail "verify --json failed"
jq -e --arg r "$rep" --arg p "$plain" '
    (.domains[] | select(.name == $r) | .features | .reporting.state == "negotiated" and .reporting.configured and
        .deflate_on_oom.state == "negotiated" and .deflate_on_oom.configured) and
    (.domains[] | select(.name == $p) | .features | .reporting.state == "not-offered" and (.reporting.configured | not) and
        .deflate_on_oom.state == "not-offered" and (.deflate_on_oom.configured | not))' "$work/verify.json" >/dev/null ||
    bm_fail "verify --json: want reporting and deflate_on_oom negotiated and configured for $rep, neither for $plain"
bm verify "$rep" "$plain" >"$work/verify.txt" || bm_fail "verify failed"
cat "$work/verify.txt"
awk -v d="$rep" '$1 == d { exit !($5 == "on+negotiated" && $7 == "on+negotiated") }' "$work/verify.txt" ||
    bm_fail "verify table: want DEFLATE-ON-OOM and REPORTING on+negotiated for $rep"
bm verify --require reporting,deflate-on-oom "$rep" >/dev/null || bm_fail "verify --require reporting,deflate-on-oom $rep: want exit 0"
rc=0; bm verify --require reporting "$plain" >/dev/null 2>"$work/require.err" || rc=$?
cat "$work/require.err"
[ "$rc" -eq 3 ] && grep -qF "verify: '$plain': reporting is not-offered: the device does not offer it; the domain XML leaves it off ('balloonmgr -c $BM_URI configure $plain --free-page-reporting on' turns it on at the next start)" "$work/require.err" ||
    bm_fail "verify --require reporting $plain: want exit 3 (got $rc) with the configure command"
bm_pass "verify: reporting and deflate-on-oom configured and negotiated for $rep, --require both exits 0; for $plain exit 3 with the configure command"

# --- a timer run that asks: the metrics, and the verdicts in the state file
{
    echo "[host]"; echo "reclaim_below = 1%"; echo "target_available = 2%"; echo "release_above = 100%"
    echo "psi_reclaim_above = off"; echo "verify_features = always"
    echo "[guest]"; echo "exclude = yes"
    echo "[domain \"$rep\"]"; echo "exclude = no"
    echo "[domain \"$plain\"]"; echo "exclude = no"
} >"$work/always.policy"
mkdir -p "$work/textfile"
bm run --once --json --policy "$work/always.policy" --state "$work/state.json" --textfile "$work/textfile" >"$work/run.json" ||
    bm_fail "run --once failed"
jq -c '(.host | {mode, reason, qemu_overhead_bytes}), (.decisions[] | {name, action, current_bytes, target_bytes, idle_bytes, backed_free_bytes, reason})' "$work/run.json"
bm status --json "$rep" "$plain" >"$work/status-after.json" || bm_fail "status --json failed"
jq -c '(.host | {mem_available_bytes, qemu_overhead_bytes}), (.domains[] | {name, rss_bytes, available_bytes, usable_bytes, backed_free_bytes})' "$work/status-after.json"
prom=$work/textfile/balloonmgr.prom
grep -E "^balloonmgr_(domain_feature_|domain_backed_free|host_backed_free)" "$prom" | grep -E "$rep|$plain|host_backed" || true
for l in "balloonmgr_domain_feature_configured{domain=\"$rep\",feature=\"free_page_reporting\"} 1" \
         "balloonmgr_domain_feature_configured{domain=\"$rep\",feature=\"deflate_on_oom\"} 1" \
         "balloonmgr_domain_feature_configured{domain=\"$plain\",feature=\"free_page_reporting\"} 0" \
         "balloonmgr_domain_feature_negotiated{domain=\"$rep\",feature=\"free_page_reporting\"} 1" \
         "balloonmgr_domain_feature_negotiated{domain=\"$rep\",feature=\"deflate_on_oom\"} 1" \
         "balloonmgr_domain_feature_negotiated{domain=\"$plain\",feature=\"free_page_reporting\"} 0"; do
    grep -qxF "$l" "$prom" || bm_fail "textfile: want '$l'"
done
awk -v d="balloonmgr_domain_backed_free_bytes{domain=\"$plain\"}" '$1 == d { found = 1; ok = $2 >= 100 * 2^20 } END { exit !(found && ok) }' "$prom" ||
    bm_fail "textfile: want balloonmgr_domain_backed_free_bytes >= 100 MiB for $plain"
grep -Eq '^balloonmgr_host_backed_free_bytes [0-9]' "$prom" || bm_fail "textfile: want balloonmgr_host_backed_free_bytes"
if command -v promtool >/dev/null; then promtool check metrics <"$prom" || bm_fail "promtool check metrics on the textfile"; fi
bm_pass "metrics: configured and negotiated per feature, backed free per domain and on the host"
bm status -o name,fpr,autodefl --state "$work/state.json" "$rep" >"$work/known.txt" || bm_fail "status --state failed"
grep -Eq "^$rep +on\+negotiated +on\+negotiated$" "$work/known.txt" ||
    { cat "$work/known.txt" >&2; bm_fail "status: want the timer's verdict of this start (on+negotiated) without --probe"; }
bm_pass "status without --probe: the verdicts a timer run kept in the state file"
