#!/usr/bin/env bash
# virtio-mem devices on libvirt's test driver (tests/data/vmem/host.xml): what status, list,
# verify and the metrics show of them, which device set chooses and what it refuses before it
# changes anything. The test driver cannot update a device and keeps no <current>: the real
# plug and unplug are tests/integration/test-virtio-mem.sh's.
# Usage: test-vmem-cli.sh BALLOONMGR SOURCE_ROOT   (TAP output)
set -u
BM=$1 ROOT=$2
. "$ROOT/tests/tap.sh"
U="test://$ROOT/tests/data/vmem/host.xml"
T=$(mktemp -d)
export BALLOONMGR_RUNTIME_DIR=$T/run
mkdir -m 0700 "$BALLOONMGR_RUNTIME_DIR"
trap 'rm -rf "$T"' EXIT
MiB=1048576

# run EXIT ARGS...: balloonmgr -c U ARGS with stdout in $T/out and stderr in $T/err; ok when the
# exit status is EXIT
run() {
    local want=$1; shift
    "$BM" -c "$U" "$@" >"$T/out" 2>"$T/err"; local got=$?
    [ "$got" -eq "$want" ]; ok_files $? "$* exits $want (got $got)" "$T/out" "$T/err"
}
# says TEXT: stderr is the one line TEXT
says() { [ "$(cat "$T/err")" = "$1" ]; ok_files $? "  says: $1" "$T/err"; }

# --- status --json: each device, the base memory
run 0 status --json --proc "$ROOT/demo/proc" --policy "$ROOT/demo/demo.policy"
jq -e --argjson m $MiB '.domains[] | select(.name == "vm1") |
    .base_memory_bytes == 256 * $m and (.virtio_mem | length) == 1 and
    .virtio_mem[0].device == "virtiomem0" and .virtio_mem[0].node == 0 and
    .virtio_mem[0].size_bytes == 1024 * $m and .virtio_mem[0].block_bytes == 2 * $m and
    .virtio_mem[0].requested_bytes == 512 * $m and .virtio_mem[0].current_bytes == 0 and
    .virtio_mem[0].unpluggable_bytes == 0 and .virtio_mem[0].pluggable_bytes == 1024 * $m' \
    "$T/out" >/dev/null
ok_files $? "status --json: vm1's device (size, block, requested, current, node) and base" "$T/out"
jq -e '.domains[] | select(.name == "vm3") | [.virtio_mem[] | [.device, .node, .block_bytes]] ==
    [["virtiomem0", 0, 2097152], ["virtiomem1", 1, 4194304]]' "$T/out" >/dev/null
ok_files $? "status --json: vm3's two devices in the XML's order, each with its node and block" "$T/out"
jq -e '.domains[] | select(.name == "plain") | .virtio_mem == [] and .base_memory_bytes == null' \
    "$T/out" >/dev/null
ok_files $? "status --json: a domain without one: an empty array, no base" "$T/out"

# --- status: a note per device and the domain's memory with them
run 0 status vm1 --proc "$ROOT/demo/proc" --policy "$ROOT/demo/demo.policy"
grep -qx 'vm1: virtio-mem virtiomem0: 0 B plugged of 1 GiB (requested 512 MiB, block 2 MiB, node 0): can unplug 0 B, plug 1 GiB more' "$T/out"
ok_files $? "status: the device's note" "$T/out"
grep -qx 'vm1: memory with virtio-mem: 256 MiB (base 256 MiB + 0 B plugged)' "$T/out"
ok_files $? "status: the domain's memory, base + plugged" "$T/out"
run 0 status plain --proc "$ROOT/demo/proc" --policy "$ROOT/demo/demo.policy"
! grep -q 'virtio-mem' "$T/out"; ok_files $? "status: no note without a device" "$T/out"

# --- list --virtio-mem
run 0 list --virtio-mem
[ "$(cat "$T/out")" = "$(printf 'vm1\nvm2\nvm3')" ]; ok_files $? "list --virtio-mem: the three with one" "$T/out"
run 0 list --virtio-mem --uuid
[ "$(wc -l <"$T/out")" -eq 3 ] && grep -qx '3b1e2a50-6d1f-4a0e-9a51-000000005301' "$T/out"
ok_files $? "list --virtio-mem --uuid: their UUIDs" "$T/out"

# --- the metrics: one sample per device and family
run 0 run --once --dry-run --quiet --textfile "$T" --state "$T/state.json" --proc "$ROOT/demo/proc" --policy "$ROOT/demo/demo.policy"
grep -qx 'balloonmgr_domain_virtio_mem_requested_bytes{domain="vm3",alias="virtiomem1",node="1"} 0' "$T/balloonmgr.prom" &&
    grep -qx 'balloonmgr_domain_virtio_mem_block_bytes{domain="vm3",alias="virtiomem1",node="1"} 4194304' "$T/balloonmgr.prom" &&
    grep -qx 'balloonmgr_domain_virtio_mem_current_bytes{domain="vm1",alias="virtiomem0",node="0"} 0' "$T/balloonmgr.prom" &&
    [ "$(grep -c '^balloonmgr_domain_virtio_mem_size_bytes{' "$T/balloonmgr.prom")" -eq 4 ] &&
    ! grep -q 'virtio_mem.*domain="plain"' "$T/balloonmgr.prom"
ok_files $? "metrics: size, block, requested, current of each of the four devices" "$T/balloonmgr.prom"

# --- set: which device, and what is refused before anything changes
run 2 set vm1 200M
says "balloonmgr: set: 'vm1': size '200M': 200 MiB is below what virtio-mem can unplug: the base memory of 256 MiB stays (the device unplugs only its own memory)"
run 2 set vm1 2G
says "balloonmgr: set: 'vm1': size '2G': exceeds the maximum of 1.3 GiB (1310720 KiB)"
run 2 set vm1 -2G
says "balloonmgr: set: 'vm1': size '-2G': would be negative (current size is 256 MiB)"
run 2 set vm3 3G
says "balloonmgr: set: 'vm3': it has no usable balloon and 2 virtio-mem devices: name one with --device (virtiomem0, virtiomem1)"
run 2 set vm3 3G --device mem
says "balloonmgr: set: 'vm3': --device mem: the domain has 2 virtio-mem devices: name one (virtiomem0, virtiomem1)"
run 2 set vm3 3G --device virtiomem7
says "balloonmgr: set: 'vm3': --device 'virtiomem7': not balloon, mem or a virtio-mem device of the domain (virtiomem0, virtiomem1)"
run 2 set vm3 1500M --device virtiomem1
says "balloonmgr: set: 'vm3': size '1500M': 1.5 GiB is below what virtio-mem can unplug: the base memory of 1 GiB and the other devices' requested sizes stays (the device unplugs only its own memory)"
run 2 set plain 600M --device mem
says "balloonmgr: set: 'plain': --device mem: the domain has no virtio-mem device"
run 2 set plain 600M --device ''
says "balloonmgr: set: --device '': expected balloon, mem or a virtio-mem device's alias"
# chosen: vm1 has no balloon, so virtio-mem; the test driver cannot update a device (exit 1),
# which shows the choice
run 1 set vm1 600M
says "balloonmgr: set: 'vm1': cannot set the virtio-mem device's requested size: this function is not supported by the connection driver: virDomainUpdateDeviceFlags"
run 1 set vm3 3G --device virtiomem1
says "balloonmgr: set: 'vm3': cannot set the virtio-mem device's requested size: this function is not supported by the connection driver: virDomainUpdateDeviceFlags"
# vm2 has a usable balloon: the balloon, unless --device mem
run 0 set vm2 2G --json
jq -e '.direction == "inflate" and .target_bytes == 2147483648 and (has("virtio_mem_device") | not)' "$T/out" >/dev/null
ok_files $? "set vm2 2G: the balloon (a usable one beside the device)" "$T/out"
run 1 set vm2 2G --device mem
says "balloonmgr: set: 'vm2': cannot set the virtio-mem device's requested size: this function is not supported by the connection driver: virDomainUpdateDeviceFlags"
# below the floor: refused as for the balloon (the definition's side: the test driver keeps no
# <current>, so a live change is never an unplug; the definition has requested 512 MiB, the
# domain 768 MiB; demo.policy's floor for it is 25% of 1.25 GiB)
run 2 set vm1 300M --config --policy "$ROOT/demo/demo.policy"
says "balloonmgr: set: 'vm1': size '300M' (300 MiB) is below the domain's floor of 320 MiB, the policy's floor in $ROOT/demo/demo.policy; --force sets it anyway"

# --- the policy's pass (dry): what moves each domain, a virtio-mem change in whole blocks
run 0 run --once --dry-run --json --proc "$ROOT/demo/proc" --policy "$ROOT/demo/demo.policy" --state "$T/state.json"
jq -e '[.decisions[] | [.name, .device]] ==
    [["plain","balloon"],["vm1","virtio-mem"],["vm2","balloon"],["vm3","virtio-mem"]]' "$T/out" >/dev/null
ok_files $? "run --json: virtio-mem moves vm1 (no balloon) and vm3 (huge pages), balloons the others" "$T/out"
# vm1 (base 256 MiB, nothing plugged: the test driver keeps no <current>) below its floor of
# 320 MiB: plugged to it, 64 MiB of 2 MiB blocks
jq -e --argjson m $MiB '.decisions[] | select(.name == "vm1") | .action == "deflate" and
    .current_bytes == 256 * $m and .maximum_bytes == 1280 * $m and .target_bytes == 320 * $m and
    .virtio_mem_requested_bytes == 64 * $m and .virtio_mem_block_bytes == 2 * $m' "$T/out" >/dev/null
ok_files $? "  vm1 below its floor: plugged to it in whole blocks (requested 64 MiB)" "$T/out"
# vm3 on huge pages, the demo host without a huge-page pool: nothing plugged into it
jq -e '.decisions[] | select(.name == "vm3") | .action == "none" and .virtio_mem_requested_bytes == null and
    (.reason | test("huge-page pool has 0 B free"))' "$T/out" >/dev/null
ok_files $? "  vm3 on huge pages: no plug without free huge pages" "$T/out"
# the key device: vm2's virtio-mem device instead of its balloon
printf '[domain "vm2"]\ndevice = virtio-mem\n' >"$T/device.policy"
run 0 run --once --dry-run --json --proc "$ROOT/demo/proc" --policy "$T/device.policy" --state "$T/state2.json"
jq -e '.decisions[] | select(.name == "vm2") | .device == "virtio-mem"' "$T/out" >/dev/null
ok_files $? "  device = virtio-mem: vm2 moved through its device" "$T/out"
printf '[domain "vm2"]\ndevice = mem\n' >"$T/device.policy"
run 2 run --once --dry-run --json --proc "$ROOT/demo/proc" --policy "$T/device.policy" --state "$T/state2.json"
head -1 "$T/err" | grep -qx "balloonmgr: run: $T/device.policy:2:10: device: 'mem': not auto, balloon or virtio-mem"
ok_files $? "  device = mem: refused, naming the place, the value and the words" "$T/err"

# --- verify --require virtio-mem
run 3 verify plain --require virtio-mem
says "balloonmgr: verify: 'plain': virtio-mem: the domain has no virtio-mem device"
run 3 verify vm1 --require virtio-mem
says "balloonmgr: verify: 'vm1': virtio-mem is unknown: the libvirt driver has no QEMU monitor"
run 0 verify vm1 --json
jq -e '.domains[0].virtio_mem == null and .domains[0].virtio_mem_error == "the libvirt driver has no QEMU monitor"' "$T/out" >/dev/null
ok_files $? "verify --json: virtio_mem null with its reason where QEMU cannot be asked" "$T/out"
tap_done
