#!/usr/bin/env bash
# verify on real QEMU 7.2 guests: stock (stats negotiated, SG not offered), free-page-hint on
# (bit 3 negotiated as FREE_PAGE_HINT, still not SG), and a guest without the balloon driver
# (unknown: driver not ready). --require sg exits 3 and says why.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
bm_setup

# the free-page-hint guest is this test's own (it boots while the fixture guests are taken);
# the stock and driverless ones are fixture guests, shared with the run's other tests
bm_define_guest fph 256 "extra=$BM_FPH_XML"
bm_fixture_guest stock256 nodriver
stock=${BM_DOMS[0]} nodrv=${BM_DOMS[1]}
bm_wait_guest_ready fph
fph=$(bm_dom fph)

# the driver sets DRIVER_OK shortly after the module loads; give it a moment
drivers_ok() { "$BM" -c "$BM_URI" verify --json "$@" | jq -e 'all(.domains[]; .driver_ok)' >/dev/null; }
BM_WAIT_INTERVAL=0.5 bm_wait_until 10 "DRIVER_OK in $stock and $fph" drivers_ok "$stock" "$fph" || true

json=$("$BM" -c "$BM_URI" verify --json "$stock" "$fph" "$nodrv")
echo "$json" | jq -c '.domains[] | {name, driver_ok, sg: .features.sg.state, stats: .features.stats.state, fph: .features.free_page_hint.state, ioeventfd: .features.ioeventfd.state, negotiated}'

# QEMU 7.2's virtio-balloon-pci has no ioeventfd property; QEMU >= 10.0 has it, on by default:
# verify reads the device's own property either way
want_io=unsupported
bm_qemu_balloon_has ioeventfd && want_io=on
echo "$json" | jq -e --arg d "$stock" --arg io "$want_io" '.domains[] | select(.name == $d) |
    .features.sg.state == "not-offered" and .features.stats.state == "negotiated" and
    .features.free_page_hint.state == "not-offered" and .driver_ok and
    .features.ioeventfd.state == $io and
    .balloon_path == "/machine/peripheral/balloon0/virtio-backend"' >/dev/null ||
    bm_fail "stock guest: want sg not-offered, stats negotiated, ioeventfd $want_io"
bm_pass "stock guest: sg not-offered, stats negotiated, ioeventfd $want_io ($(qemu-system-x86_64 --version | head -1))"

echo "$json" | jq -e --arg d "$fph" '.domains[] | select(.name == $d) |
    .features.free_page_hint.state == "negotiated" and .features.sg.state == "not-offered" and
    (.negotiated | index("VIRTIO_BALLOON_F_FREE_PAGE_HINT") != null)' >/dev/null ||
    bm_fail "free-page-hint guest: want FREE_PAGE_HINT negotiated and sg not-offered"
"$BM" -c "$BM_URI" verify --json --sg-bit=3 "$fph" | jq -e '.domains[0].features.sg.state == "not-offered"' >/dev/null ||
    bm_fail "free-page-hint guest is taken for SG with --sg-bit=3"
bm_pass "free-page-hint guest: bit 3 negotiated as FREE_PAGE_HINT, not reported as SG"

echo "$json" | jq -e --arg d "$nodrv" '.domains[] | select(.name == $d) |
    (.driver_ok | not) and .features.stats.state == "unknown" and
    .features.stats.reason == "driver not ready (no DRIVER_OK)"' >/dev/null ||
    bm_fail "no-driver guest: want stats unknown, driver not ready"
bm_pass "guest without balloon driver: unknown, driver not ready"

set +e
"$BM" -c "$BM_URI" verify --require sg "$stock" "$nodrv" >/dev/null 2>err.$$; rc=$?
set -e
cat err.$$
grep -q "verify: '$stock': sg is not-offered: the device does not offer it" err.$$ ||
    { rm -f err.$$; bm_fail "--require sg does not name the stock guest and the reason"; }
grep -q "verify: '$nodrv': sg is not-offered" err.$$ || { rm -f err.$$; bm_fail "--require sg: no-driver guest"; }
rm -f err.$$
[ "$rc" -eq 3 ] || bm_fail "--require sg exited $rc, want 3"
bm_pass "verify --require sg exits 3 on stock guests and names the reason"

"$BM" -c "$BM_URI" verify --require stats "$stock" "$fph" >/dev/null || bm_fail "--require stats failed on guests with stats"
bm_pass "verify --require stats exits 0 where stats are negotiated"

# status asks no QEMU monitor unless told to (test-taint checks the domain stays untainted)
"$BM" -c "$BM_URI" status --json "$stock" | jq -e '.domains[0].sg == "not-probed"' >/dev/null ||
    bm_fail "status without --probe does not show sg not-probed"
"$BM" -c "$BM_URI" status --probe --json "$stock" | jq -e '.domains[0].sg == "not-offered"' >/dev/null ||
    bm_fail "status --probe does not show sg not-offered"
"$BM" -c "$BM_URI" status --probe "$stock" | grep -q ' not-offered  *off  *off$' || bm_fail "status --probe: table SG column"
bm_pass "status shows the SG column: not-probed, and with --probe the monitor's verdict"
