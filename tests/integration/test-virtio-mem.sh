#!/usr/bin/env bash
# virtio-mem on real guests (issue 53): a TCG guest with a virtio-mem device and no balloon plugs
# what it is asked at boot; status --json, status, verify and the metrics show the device;
# `set --wait` unplugs and plugs it (the domain's total, rounded to the device's block), waits
# for what the guest really did by libvirt's events, and the device's <current> follows; the
# QEMU RSS falls with an unplug of memory the guest had touched. A guest without the virtio_mem
# driver: verify says so, set --wait stalls (exit 3). Below the base memory: refused (exit 2).
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
bm_setup
MiB=1048576

# vm: 256 MiB base + a 1 GiB device asking 512 MiB; once plugged it touches 500 MiB (tmpfs, freed
# again), so the plugged memory is backed on the host
bm_define_guest vm 256 virtiomem=1024:512 balloon=none touch=500
vm=$BM_DOM
bm_define_guest nodrv 256 virtiomem=512:256 balloon=none novirtiomem=1
nodrv=$BM_DOM
bm_wait_guest_ready vm
bm_wait_guest_ready nodrv
bm_console_has "$vm" 'module virtio_mem loaded' || bm_fail "the guest did not load virtio_mem"

# dev DOM FIELD: the first virtio-mem device's FIELD in status --json
dev() { "$BM" -c "$BM_URI" status "$1" --json | jq -r ".domains[0].virtio_mem[0].$2"; }
plugged_is() { [ "$(dev "$1" current_bytes)" = "$2" ]; }

bm_wait_until 60 "$vm to have plugged 512 MiB" plugged_is "$vm" $((512 * MiB)) ||
    bm_fail "$vm: the device has $(dev "$vm" current_bytes) bytes plugged, not 512 MiB"
json=$("$BM" -c "$BM_URI" status "$vm" --json)
echo "$json" | jq -c '.domains[0] | {maximum_bytes, current_bytes, base_memory_bytes, virtio_mem}'
echo "$json" | jq -e --argjson m $MiB '.domains[0] | .base_memory_bytes == 256 * $m and
    .maximum_bytes == 1280 * $m and (.virtio_mem | length) == 1 and
    .virtio_mem[0].device == "virtiomem0" and .virtio_mem[0].address != null and
    .virtio_mem[0].node == 0 and .virtio_mem[0].size_bytes == 1024 * $m and
    .virtio_mem[0].block_bytes == 2 * $m and .virtio_mem[0].requested_bytes == 512 * $m and
    .virtio_mem[0].unpluggable_bytes == 512 * $m and .virtio_mem[0].pluggable_bytes == 512 * $m' \
    >/dev/null || bm_fail "status --json: the device or the base is not what the domain has"
bm_pass "status --json: the device (size, block, requested, current, node, address) and the base"
out=$("$BM" -c "$BM_URI" status "$vm")
echo "$out"
grep -q "^$vm: virtio-mem virtiomem0: 512 MiB plugged of 1 GiB (requested 512 MiB, block 2 MiB, node 0): can unplug 512 MiB, plug 512 MiB more$" <<<"$out" &&
    grep -q "^$vm: memory with virtio-mem: 768 MiB (base 256 MiB + 512 MiB plugged)$" <<<"$out" ||
    bm_fail "status: no note of the device"
bm_pass "status: the device's note and the domain's memory"

# verify: QEMU's view and the driver
out=$("$BM" -c "$BM_URI" verify "$vm" --require virtio-mem) || bm_fail "verify --require virtio-mem $vm failed"
echo "$out"
grep -q "^$vm: virtio-mem virtiomem0: driver ready (DRIVER_OK); 512 MiB plugged of 1 GiB, requested 512 MiB, block 2 MiB$" <<<"$out" ||
    bm_fail "verify: QEMU's view of the device not shown"
rc=0
"$BM" -c "$BM_URI" verify "$nodrv" --require virtio-mem >"$BM_WORKDIR/out" 2>"$BM_WORKDIR/err" || rc=$?
cat "$BM_WORKDIR/out" "$BM_WORKDIR/err"
[ "$rc" -eq 3 ] && grep -q "virtio-mem device virtiomem0: no driver (no DRIVER_OK)" "$BM_WORKDIR/err" ||
    bm_fail "verify --require virtio-mem on the guest without driver: exit $rc, not 3 naming the driver"
bm_pass "verify: the driver ready where loaded; --require virtio-mem exits 3 where not"

# the metrics of one pass (read only)
"$BM" -c "$BM_URI" run --once --dry-run --quiet --textfile "$BM_WORKDIR" --state "$BM_WORKDIR/state.json" 2>/dev/null ||
    bm_fail "run --once --dry-run --textfile failed"
grep -qx "balloonmgr_domain_virtio_mem_current_bytes{domain=\"$vm\",alias=\"virtiomem0\",node=\"0\"} $((512 * MiB))" "$BM_WORKDIR/balloonmgr.prom" ||
    bm_fail "metrics: no current size of the device: $(grep virtio_mem "$BM_WORKDIR/balloonmgr.prom")"
bm_pass "metrics: the device's current size"

# set --wait: unplug 256 MiB (the domain from 768 to 512 MiB)
pid=$(bm_qemu_pid "$vm")
rss0=$(bm_rss_kib "$pid")
res=$("$BM" -c "$BM_URI" set "$vm" 512M --wait --json) || bm_fail "set $vm 512M --wait failed: $res"
rss1=$(bm_rss_kib "$pid")
echo "$res" | jq -c .
echo "$res" | jq -e --argjson m $MiB '.device == "virtio-mem" and .virtio_mem_device == "virtiomem0" and
    .outcome == "reached" and .direction == "unplug" and .from_bytes == 768 * $m and
    .target_bytes == 512 * $m and .reached_bytes == 512 * $m and .requested_bytes == 256 * $m and
    .unplugged_bytes == 256 * $m and .plugged_bytes == 0 and .rounded == false and .polls >= 1' \
    >/dev/null || bm_fail "set 512M: not an unplug of 256 MiB reached"
plugged_is "$vm" $((256 * MiB)) && [ "$(dev "$vm" requested_bytes)" = $((256 * MiB)) ] ||
    bm_fail "status after the unplug: current $(dev "$vm" current_bytes), requested $(dev "$vm" requested_bytes)"
echo "QEMU RSS $((rss0 / 1024)) -> $((rss1 / 1024)) MiB"
bm_pass "set --wait 512M: the guest unplugged 256 MiB, <current> followed"
# the unplugged blocks were touched at boot: QEMU gives them back (RSS falls by at least half)
[ $((rss0 - rss1)) -ge $((128 * 1024)) ] ||
    bm_fail "QEMU RSS fell by $(((rss0 - rss1) / 1024)) MiB after an unplug of 256 MiB touched memory"
bm_pass "QEMU RSS fell by $(((rss0 - rss1) / 1024)) MiB with the unplug of 256 MiB"

# plug: back to 1 GiB (768 MiB plugged)
res=$("$BM" -c "$BM_URI" set "$vm" 1G --wait --json) || bm_fail "set $vm 1G --wait failed: $res"
echo "$res" | jq -c .
echo "$res" | jq -e --argjson m $MiB '.outcome == "reached" and .direction == "plug" and
    .reached_bytes == 1024 * $m and .plugged_bytes == 512 * $m' >/dev/null ||
    bm_fail "set 1G: not a plug of 512 MiB reached"
plugged_is "$vm" $((768 * MiB)) || bm_fail "status after the plug: current $(dev "$vm" current_bytes)"
bm_pass "set --wait 1G: the guest plugged 512 MiB"

# a size off the block: 601 MiB is 345 MiB beyond the base, rounded to 346 MiB (half a block up)
res=$("$BM" -c "$BM_URI" set "$vm" 601M --wait --json) || bm_fail "set $vm 601M --wait failed: $res"
echo "$res" | jq -c .
echo "$res" | jq -e --argjson m $MiB '.outcome == "reached" and .rounded and .asked_bytes == 345 * $m and
    .requested_bytes == 346 * $m and .reached_bytes == 602 * $m' >/dev/null ||
    bm_fail "set 601M: not rounded to 346 MiB requested"
out=$("$BM" -c "$BM_URI" set "$vm" 601M --wait) || bm_fail "set $vm 601M --wait (text) failed"
echo "$out"
grep -q "^$vm: virtio-mem virtiomem0: 345 MiB is not a whole number of its 2 MiB blocks: requested 346 MiB$" <<<"$out" ||
    bm_fail "set 601M: the rounding not said"
bm_pass "set 601M: rounded to whole blocks, and said"

# below the base: refused, nothing changes
rc=0
"$BM" -c "$BM_URI" set "$vm" 200M --wait 2>"$BM_WORKDIR/err" || rc=$?
cat "$BM_WORKDIR/err"
[ "$rc" -eq 2 ] && grep -q "below what virtio-mem can unplug: the base memory of 256 MiB stays" "$BM_WORKDIR/err" &&
    [ "$(dev "$vm" requested_bytes)" = $((346 * MiB)) ] || bm_fail "set 200M: exit $rc, not refused"
bm_pass "set below the base memory: refused (exit 2), the device as it was"

# no driver: the device does not move; set --wait stalls
rc=0
"$BM" -c "$BM_URI" set "$nodrv" 384M --wait --stall=3 --json >"$BM_WORKDIR/out" 2>"$BM_WORKDIR/err" || rc=$?
cat "$BM_WORKDIR/out" "$BM_WORKDIR/err"
[ "$rc" -eq 3 ] && jq -e '.outcome == "stalled" and .plugged_bytes == 0 and .unplugged_bytes == 0' "$BM_WORKDIR/out" >/dev/null &&
    grep -q "stalled: virtio-mem device virtiomem0 did not move for 3 s (is the guest's virtio_mem driver loaded?)" "$BM_WORKDIR/err" ||
    bm_fail "set --wait on the guest without driver: exit $rc, not stalled"
bm_pass "set --wait on a guest without the driver: stalled (exit 3), naming the driver"
