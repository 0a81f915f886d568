#!/usr/bin/env bash
# The SG lab (lab/, lab/PROTOCOL.md): the patched QEMU 7.2 device and the SG guest driver,
# built from nothing (cached), and balloonmgr driving them:
# - configure --sg on --ioeventfd on (qemu:override) on a lab guest; after a restart
#   verify --require sg,ioeventfd exits 0 (SG negotiated by name, bit 6);
# - sg off with the same driver: verify --require sg exits 3, sg not-offered;
# - the stock driver on the patched device with sg on: sg offered;
# - inflate and deflate work in both modes; the guest allocates the memory back after deflate;
# - the latency histogram gets sg="negotiated" and sg="not_negotiated" series.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
ROOT=${BM_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
bm_setup

start=$(bm_now)
mkdir -p "$BM_WORKDIR"
"$ROOT/lab/build-qemu.sh" >"$BM_WORKDIR/build-qemu.log" 2>&1 || { tail -30 "$BM_WORKDIR/build-qemu.log"; bm_fail "lab QEMU build failed"; }
EMU=/var/lib/libvirt/images/balloonmgr-lab/qemu-system-x86_64
"$ROOT/lab/guest/build.sh" >"$BM_WORKDIR/build-module.log" 2>&1 || { tail -30 "$BM_WORKDIR/build-module.log"; bm_fail "SG driver build failed"; }
bm_guest_image >/dev/null   # again: the initramfs now carries virtio_balloon_sg.ko
bm_log "lab built (or found in cache) in $(bm_elapsed "$start") s"
"$EMU" -device virtio-balloon-pci,help 2>&1 | grep -q '^  sg=<bool>' || bm_fail "patched QEMU has no sg property"

work=$BM_WORKDIR # kept if the test fails; $work/run is BALLOONMGR_RUNTIME_DIR (bm_setup)
mkdir -p "$work/run/changes" "$work/textfile"

driver_ok() { "$BM" -c "$BM_URI" verify --json "$1" | jq -e '.domains[0].driver_ok' >/dev/null; }
restart() { # restart NAME: destroy, start, wait until ready and the driver is up
    local dom; dom=$(bm_dom "$1")
    bm_virsh destroy "$dom" >/dev/null
    : >"$(bm_console_log "$1")"
    bm_virsh start "$dom" >/dev/null
    bm_wait_guest_ready "$1"
    BM_WAIT_INTERVAL=0.5 bm_wait_until 20 "DRIVER_OK in $dom" driver_ok "$dom" || true
}
retouched() { grep -q "bm: retouched 300 MiB" "$(bm_console_log lab1)"; }
inflate_deflate() { # inflate_deflate DOM LABEL: 75% inflate and back, both must reach
    local dom=$1 label=$2 r
    r=$("$BM" -c "$BM_URI" set "$dom" 25% --wait --json) || bm_fail "$label: inflate failed"
    echo "$label inflate: $(echo "$r" | jq -c '{outcome, duration_s, from_bytes, reached_bytes}')"
    sleep 2 # the guest's retouch watcher looks once a second
    r=$("$BM" -c "$BM_URI" set "$dom" 100% --wait --json) || bm_fail "$label: deflate failed"
    echo "$label deflate: $(echo "$r" | jq -c '{outcome, duration_s, reached_bytes}')"
}

# --- a lab guest: patched QEMU, SG driver; turn SG and ioeventfd on with configure
bm_define_guest lab1 512 emulator="$EMU" sgdriver=1 touch=300 retouch=300
bm_wait_guest_ready lab1
dom=$(bm_dom lab1)
"$BM" -c "$BM_URI" configure "$dom" --sg on --ioeventfd on || bm_fail "configure --sg on --ioeventfd on refused on the patched QEMU"
restart lab1
"$BM" -c "$BM_URI" verify "$dom"
"$BM" -c "$BM_URI" verify --require sg,ioeventfd "$dom" >/dev/null || bm_fail "verify --require sg,ioeventfd failed on the lab guest"
"$BM" -c "$BM_URI" verify --json "$dom" | jq -e '.domains[0].features.sg.evidence == "name" and
    (.domains[0].negotiated | index("VIRTIO_BALLOON_F_SG") != null)' >/dev/null || bm_fail "SG not negotiated by name"
bm_pass "configure --sg on --ioeventfd on + restart: verify --require sg,ioeventfd exits 0"
inflate_deflate "$dom" "SG"
BM_WAIT_INTERVAL=0.5 bm_wait_until 30 "the SG guest to allocate 300 MiB again" retouched ||
    bm_fail "SG guest could not allocate its memory back after deflate"
! grep -qiE 'BUG|Oops|WARNING:|Call Trace' "$(bm_console_log lab1)" || bm_fail "kernel warning in the SG guest"
bm_pass "SG: inflate 75% and deflate reached; the guest allocated 300 MiB again; no kernel warning"

# --- same driver, sg off: not offered, PFN path
"$BM" -c "$BM_URI" configure "$dom" --sg off >/dev/null || bm_fail "configure --sg off"
restart lab1
set +e
"$BM" -c "$BM_URI" verify --require sg "$dom" >/dev/null 2>"$work/err"; rc=$?
set -e
cat "$work/err"
[ "$rc" -eq 3 ] && grep -q "sg is not-offered" "$work/err" || bm_fail "sg off: verify --require sg exited $rc"
bm_pass "sg off (same driver): verify --require sg exits 3, sg not-offered"
inflate_deflate "$dom" "no-SG"
BM_WAIT_INTERVAL=0.5 bm_wait_until 30 "the guest to allocate 300 MiB again" retouched ||
    bm_fail "guest could not allocate its memory back (PFN path)"
bm_pass "PFN path with the SG driver: inflate and deflate reached, memory allocated again"

# --- the stock driver on the patched device with sg on: offered, not acked
bm_define_guest lab2 256 emulator="$EMU" \
    "extra=<qemu:override><qemu:device alias='balloon0'><qemu:frontend><qemu:property name='sg' type='bool' value='true'/></qemu:frontend></qemu:device></qemu:override>"
bm_wait_guest_ready lab2
dom2=$(bm_dom lab2)
BM_WAIT_INTERVAL=0.5 bm_wait_until 20 "DRIVER_OK in $dom2" driver_ok "$dom2" || true
"$BM" -c "$BM_URI" verify --json "$dom2" | jq -e '.domains[0].features.sg.state == "offered"' >/dev/null ||
    bm_fail "stock driver on the patched device: sg is not 'offered'"
bm_pass "stock driver on the patched device: sg offered (not acknowledged)"

# --- both sg series in the histogram (set --wait measurements, counted by a timer run)
printf '[guest]\nexclude = yes\n' >"$work/p.policy"
"$BM" -c "$BM_URI" run --once --policy "$work/p.policy" --state "$work/s.json" --textfile "$work/textfile" >/dev/null
grep -E '^balloonmgr_balloon_change_duration_seconds_count\{direction="inflate",sg="(negotiated|not_negotiated)"\}' "$work/textfile/balloonmgr.prom"
grep -q '^balloonmgr_balloon_change_duration_seconds_count{direction="inflate",sg="negotiated"} 1$' "$work/textfile/balloonmgr.prom" ||
    bm_fail "no sg=negotiated inflate in the histogram"
grep -q '^balloonmgr_balloon_change_duration_seconds_count{direction="inflate",sg="not_negotiated"} 1$' "$work/textfile/balloonmgr.prom" ||
    bm_fail "no sg=not_negotiated inflate in the histogram"
bm_pass "the latency histogram has sg=negotiated and sg=not_negotiated inflates"
