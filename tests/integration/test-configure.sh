#!/usr/bin/env bash
# configure on a real guest: the stats period changes what status shows within seconds; sg is
# refused (stock QEMU has none) and the persistent XML stays byte-identical; ioeventfd is refused
# the same way on QEMU 7.2 and set for the next start on QEMU >= 10.0 (its own property), which
# verify then reads back; autodeflate set with --config survives a restart and is negotiated.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
bm_setup

bm_define_guest cf1 256
bm_wait_guest_ready cf1
dom=$(bm_dom cf1)

# --- stats period, live and persistent
"$BM" -c "$BM_URI" status --json "$dom" | jq -e '.domains[0].stats_period_s == 1' >/dev/null ||
    bm_fail "stats period is not 1 to begin with"
out=$("$BM" -c "$BM_URI" configure "$dom" --stats-period 2) || bm_fail "configure --stats-period 2 failed"
echo "$out"
[ "$out" = "$dom: stats period: 1 s -> 2 s (live and persistent)" ] || bm_fail "configure output: $out"
start=$(bm_now)
new_period_stats() {
    "$BM" -c "$BM_URI" status --json "$dom" |
        jq -e '.domains[0] | .stats_period_s == 2 and .usable_bytes != null and .stats_age_s <= 3' >/dev/null
}
BM_WAIT_INTERVAL=0.2 bm_wait_until 10 "statistics every 2 s from $dom" new_period_stats || true
"$BM" -c "$BM_URI" status --json "$dom" | jq -e '.domains[0].stats_period_s == 2' >/dev/null ||
    bm_fail "status does not show the new stats period"
"$BM" -c "$BM_URI" status "$dom" | grep -q "  2s " || bm_fail "status table does not show 2s"
bm_virsh dumpxml --inactive "$dom" | grep -q "<stats period='2'/>" || bm_fail "persistent period not 2"
bm_pass "configure --stats-period 2: status shows it after $(bm_elapsed "$start") s; persistent too"

# --- ioeventfd: QEMU >= 10.0 has the property itself (on by default): configure sets it for the
# next start with no patched QEMU; 7.2 has not, and it is refused like sg
io_stock=0
refused=("--sg on" "--sg off --autodeflate on")
if bm_qemu_balloon_has ioeventfd; then
    io_stock=1
    out=$("$BM" -c "$BM_URI" configure "$dom" --ioeventfd off) || bm_fail "configure --ioeventfd off on a stock QEMU failed"
    echo "$out"
    bm_virsh dumpxml --inactive "$dom" | grep -q "name='ioeventfd'" ||
        bm_fail "configure --ioeventfd off: the persistent XML does not set the property"
    bm_pass "configure --ioeventfd off on a stock $(qemu-system-x86_64 --version | head -1) (no lab patch): persistent, for the next start"
else
    refused=("--ioeventfd on" "${refused[@]}")
fi

# --- refusals leave the persistent XML byte-identical
for opt in "${refused[@]}"; do
    before=$(bm_virsh dumpxml --inactive "$dom" | sha256sum)
    set +e
    # shellcheck disable=SC2086
    "$BM" -c "$BM_URI" configure "$dom" $opt >out.$$ 2>err.$$; rc=$?
    set -e
    cat err.$$
    after=$(bm_virsh dumpxml --inactive "$dom" | sha256sum)
    prop=${opt#--}; prop=${prop%% *}
    grep -q "configure: '$dom': --$prop: QEMU .* has no virtio-balloon-pci property '$prop': a QEMU with that option is needed; nothing changed" err.$$ ||
        { rm -f out.$$ err.$$; bm_fail "configure $opt: message"; }
    [ ! -s out.$$ ] || { rm -f out.$$ err.$$; bm_fail "configure $opt printed a change"; }
    rm -f out.$$ err.$$
    [ "$rc" -eq 3 ] || bm_fail "configure $opt exited $rc, want 3"
    [ "$before" = "$after" ] || bm_fail "configure $opt changed the persistent XML"
    bm_pass "configure $opt refused on $(qemu-system-x86_64 --version | head -1) (exit 3), persistent XML byte-identical"
done

# --- autodeflate survives a restart and is then negotiated
"$BM" -c "$BM_URI" verify --json "$dom" | jq -e '.domains[0].features.deflate_on_oom.state == "not-offered"' >/dev/null ||
    bm_fail "deflate-on-oom offered before configure"
out=$("$BM" -c "$BM_URI" configure "$dom" --autodeflate on --config) || bm_fail "configure --autodeflate on failed"
echo "$out"
[ "$out" = "$dom: memballoon autodeflate: unset -> on (persistent; applies on the next start)" ] ||
    bm_fail "configure output: $out"
out=$("$BM" -c "$BM_URI" configure "$dom" --autodeflate on --config)
[ "$out" = "$dom: device settings already as requested" ] || bm_fail "second configure: $out"
bm_virsh destroy "$dom" >/dev/null
: >"$(bm_console_log cf1)"
bm_virsh start "$dom" >/dev/null
bm_wait_guest_ready cf1
bm_virsh dumpxml "$dom" | grep -q "autodeflate='on'" || bm_fail "autodeflate lost after restart"
deflate_on_oom_negotiated() {
    "$BM" -c "$BM_URI" verify --json "$dom" | jq -e '.domains[0].features.deflate_on_oom.state == "negotiated"' >/dev/null
}
BM_WAIT_INTERVAL=0.5 bm_wait_until 10 "deflate-on-oom negotiated in $dom" deflate_on_oom_negotiated || true
"$BM" -c "$BM_URI" verify --require deflate-on-oom "$dom" >/dev/null || bm_fail "deflate-on-oom not negotiated after restart"
bm_pass "configure --autodeflate on --config survives a restart; deflate-on-oom negotiated"
if [ "$io_stock" = 1 ]; then
    "$BM" -c "$BM_URI" verify --json "$dom" | jq -e '.domains[0].features.ioeventfd.state == "off"' >/dev/null ||
        bm_fail "ioeventfd not off after the restart: $("$BM" -c "$BM_URI" verify --json "$dom" | jq -c '.domains[0].features.ioeventfd')"
    bm_pass "after the restart verify reads ioeventfd off from the device's own property"
fi
