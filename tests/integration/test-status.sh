#!/usr/bin/env bash
# status/list on a real libvirtd with a real TCG guest: guest statistics arrive (non-null),
# the sizes match the definition, unknown names exit 2.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
bm_setup

# a fixture guest (512 MiB, 400 MiB touched): booted once per run, its balloon at the maximum
bm_fixture_guest touched
dom=$BM_DOM

bm_virsh list --name | grep -qx "$dom" || bm_fail "virsh does not list $dom"
"$BM" -c "$BM_URI" list | grep -qx "$dom" || bm_fail "balloonmgr list does not list $dom"
bm_pass "list shows $dom"

# The guest reports statistics every second (stats period 1) once its driver is up.
json=""
stats_arrived() {
    json=$("$BM" -c "$BM_URI" status --json "$dom") &&
        echo "$json" | jq -e '.domains[0].usable_bytes != null and .domains[0].unused_bytes != null' >/dev/null
}
BM_WAIT_INTERVAL=1 bm_wait_until 60 "guest statistics of $dom" stats_arrived || true
echo "$json" | jq -c '.domains[0]'
echo "$json" | jq -e --arg d "$dom" '.domains | length == 1 and .[0].name == $d and .[0].state == "running"' >/dev/null ||
    bm_fail "status --json does not show $dom running"
echo "$json" | jq -e '.domains[0] | .maximum_bytes == 536870912 and .current_bytes == 536870912 and .reclaimed_bytes == 0' >/dev/null ||
    bm_fail "maximum/current/reclaimed are not 512 MiB/512 MiB/0"
echo "$json" | jq -e '.domains[0] | [.available_bytes, .usable_bytes, .unused_bytes, .disk_caches_bytes, .rss_bytes, .swap_in_bytes, .major_faults] | all(. != null)' >/dev/null ||
    bm_fail "guest statistics are null on a real guest"
echo "$json" | jq -e '.domains[0] | .usable_bytes > 0 and .usable_bytes < .maximum_bytes and .rss_bytes > 134217728' >/dev/null ||
    bm_fail "guest statistics are implausible"
echo "$json" | jq -e '.domains[0] | .stats_period_s == 1 and .stats_age_s != null and .stats_age_s <= 10 and .error == null' >/dev/null ||
    bm_fail "stats period/age wrong"
bm_pass "status --json shows non-null guest statistics on a real guest"

# QEMU's own memory, measured per domain when the host is short (a policy that finds this host
# short whatever its memory), from the QEMU process's smaps: TCG's translated code and QEMU's
# heap beside the guest's RAM, of which 400 MiB is touched
echo "$json" | jq -e '.domains[0].qemu_own_bytes == null' >/dev/null ||
    bm_fail "status measured QEMU's own memory on a host that is not short"
printf '[host]\nreclaim_below = 97%%\ntarget_available = 98%%\nrelease_above = 99%%\n' >short.policy.$$
json=$("$BM" -c "$BM_URI" status --json --policy short.policy.$$ "$dom" 2>err.$$) || { cat err.$$; bm_fail "status --policy"; }
rm -f short.policy.$$
! grep -q "cannot measure" err.$$ || { cat err.$$; bm_fail "status could not measure QEMU's own memory"; }
rm -f err.$$
echo "$json" | jq -c '.domains[0] | {rss_bytes, qemu_own_bytes, backed_free_bytes}'
echo "$json" | jq -e '.domains[0] | .qemu_own_bytes != null and .qemu_own_bytes > 16777216 and
                      .qemu_own_bytes < .rss_bytes - 314572800' >/dev/null ||
    bm_fail "QEMU's own memory not measured, or implausible, on a short host"
bm_pass "status measures QEMU's own memory of a running domain when the host is short"

"$BM" -c "$BM_URI" status "$dom" | tee /dev/stderr | grep -q "^$dom  *running  *512 MiB  *512 MiB  *0 B " ||
    bm_fail "status table row for $dom"
bm_pass "status table"

set +e
"$BM" -c "$BM_URI" set "${BM_PREFIX}no-such-guest" 50% 2>err.$$; rc=$?
set -e
grep -q "set: '${BM_PREFIX}no-such-guest': no domain with this name, ID or UUID" err.$$ || { cat err.$$; rm -f err.$$; bm_fail "unknown domain message"; }
rm -f err.$$
[ "$rc" -eq 2 ] || bm_fail "set on an unknown domain exited $rc, want 2"
bm_pass "set on an unknown domain exits 2 and names it"
