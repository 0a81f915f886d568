#!/usr/bin/env bash
# The SG lab (lab/, lab/PROTOCOL.md): the patched QEMU 7.2 device and the SG guest driver,
# built from nothing (cached), and balloonmgr driving them:
# - configure --sg on --ioeventfd on (qemu:override) on a lab guest; after a restart
#   verify --require sg,ioeventfd exits 0 (SG negotiated by name, bit 6);
# - sg off with the same driver: verify --require sg exits 3, sg not-offered;
# - the stock driver on the patched device with sg on: sg offered;
# - inflate and deflate work in both modes; the guest allocates the memory back after deflate;
# - the latency histogram gets sg="negotiated" and sg="not_negotiated" series;
# - the review points of the 2017 SG series, on a lab guest with SG negotiated: the driver
#   batches (many pages per kick); no used buffer is left behind (after every inflate and
#   deflate nothing is in flight and every ring slot is free again); on a device error (the
#   device's lab properties x-sg-fail: the Nth element and all later ones come back "not
#   handled"; x-sg-drop: the Nth element never comes back) the driver bails out, the balloon
#   stays consistent (QEMU's actual == the pages on the driver's balloon list), set --wait
#   reports the change as stalled (exit 3) and the agent's counters record it, and the next
#   change works.
# Environment: BM_LAB_QEMU_DIR, where build-qemu.sh installs the lab QEMU
# [/var/lib/libvirt/images/balloonmgr-lab].
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
ROOT=${BM_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
bm_setup

start=$(bm_now)
mkdir -p "$BM_WORKDIR"
LAB_QEMU_DIR=${BM_LAB_QEMU_DIR:-/var/lib/libvirt/images/balloonmgr-lab}
"$ROOT/lab/build-qemu.sh" "$LAB_QEMU_DIR" >"$BM_WORKDIR/build-qemu.log" 2>&1 || { tail -30 "$BM_WORKDIR/build-qemu.log"; bm_fail "lab QEMU build failed"; }
EMU=$LAB_QEMU_DIR/qemu-system-x86_64
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
    bm_wait_guest_ready "$1" 300 # a TCG boot on a loaded 2-core host can take minutes
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
bm_wait_guest_ready lab1 300
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
bm_wait_guest_ready lab2 300
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

# --- the review points: batching, no leaked used buffers, bailing out on device errors
export BALLOONMGR_RUNTIME_DIR=$work/run2
mkdir -p "$work/run2/changes"
MAX_KIB=524288
bm_define_guest lab3 512 emulator="$EMU" sgdriver=1 touch=300 sgstats=1 \
    sgparams=sg_count_held=1,sg_timeout_ms=15000,sg_elem_max=8 \
    "extra=<qemu:override><qemu:device alias='balloon0'><qemu:frontend><qemu:property name='sg' type='bool' value='true'/></qemu:frontend></qemu:device></qemu:override>"
bm_wait_guest_ready lab3 300
dom3=$(bm_dom lab3)
for _ in $(seq 40); do
    "$BM" -c "$BM_URI" verify --json "$dom3" | jq -e '.domains[0].features.sg.state == "negotiated"' >/dev/null && break; sleep 0.5
done
qom() { # qom get|set PROPERTY [VALUE]: the lab properties of lab3's balloon device
    local args="\"path\":\"/machine/peripheral/balloon0/virtio-backend\",\"property\":\"$2\""
    [ "$1" = set ] && args="$args,\"value\":$3"
    bm_virsh qemu-monitor-command "$dom3" "{\"execute\":\"qom-$1\",\"arguments\":{$args}}" | jq -r '.return'
}
# stats: the driver's counters as the guest last printed them (it looks once a second)
stats() { sleep 2.5; grep -a 'bm: sg_stats: ' "$(bm_console_log lab3)" | tr -d '\r' | sed 's/.*bm: sg_stats: //' | tac | awk '!seen[$1]++'; }
field() { echo "$1" | awk -v k="$2" -v n="$3" '$1 == k { for (i = 2; i < NF; i++) if ($i == n) { print $(i + 1); exit } }'; }
actual_kib() { bm_virsh dommemstat "$dom3" | awk '$1 == "actual" { print $2 }'; }
# at_rest LABEL [LOST]: nothing in flight, every ring slot free (but LOST inflate slots of
# abandoned elements), and QEMU's actual is the memory less the pages on the balloon list
at_rest() {
    local label=$1 lost=${2:-0} st held a i
    for i in $(seq 10); do
        st=$(stats); held=$(field "$st" queues: held); a=$(actual_kib)
        [ -n "$held" ] && [ "$held" != - ] && [ $((MAX_KIB - held * 4)) -eq "$a" ] && break
    done
    echo "$label: $(field "$st" queues: inflight) in flight; inflate ring $(field "$st" queues: inflate_free)/$(field "$st" queues: inflate_size) free, deflate $(field "$st" queues: deflate_free)/$(field "$st" queues: deflate_size); balloon list $held pages, QEMU actual $a KiB"
    [ "$(field "$st" queues: inflight)" = 0 ] || bm_fail "$label: elements still in flight"
    [ "$(field "$st" queues: inflate_free)" -eq $(($(field "$st" queues: inflate_size) - lost)) ] &&
        [ "$(field "$st" queues: deflate_free)" -eq "$(field "$st" queues: deflate_size)" ] ||
        bm_fail "$label: used buffers left in the rings"
    [ $((MAX_KIB - held * 4)) -eq "$a" ] || bm_fail "$label: QEMU actual $a KiB, but the balloon holds $held pages"
    STATS=$st
}
setw() { # setw SIZE ARGS...: set --wait, prints the outcome, returns its exit status
    local rc=0 r
    r=$("$BM" -c "$BM_URI" set "$dom3" "$@" --json 2>"$work/set.err") || rc=$?
    echo "set $*: exit $rc $(echo "$r" | jq -c '{outcome, duration_s, reached_bytes}' 2>/dev/null) $(cat "$work/set.err")"
    return $rc
}

setw 25% --wait=120 || bm_fail "inflate failed"
at_rest "inflate"
pages=$(field "$STATS" inflate: pages); kicks=$(field "$STATS" inflate: kicks); elems=$(field "$STATS" inflate: elems)
echo "inflate: $pages pages in $(field "$STATS" inflate: ranges) ranges, $elems elements, $kicks kicks"
[ "$pages" -ge 98304 ] && [ "$kicks" -ge 1 ] && [ $((pages / kicks)) -ge 4096 ] ||
    bm_fail "inflate not batched: $pages pages in $kicks kicks (want >= 4096 pages per kick; the PFN path does 256)"
setw 100% --wait=120 || bm_fail "deflate failed"
at_rest "deflate"
[ "$(field "$STATS" queues: held)" = 0 ] || bm_fail "deflate: pages left in the balloon"
bm_pass "SG batches (>= 4096 pages per kick); after inflate and deflate no element in flight, every ring slot free, actual == pages held"

# the 2nd element from now on fails: the first goes through, then the balloon stalls
[ "$(qom set x-sg-fail 2)" = "{}" ] || bm_fail "qom-set x-sg-fail refused"
rc=0; setw 25% --wait=120 --stall=5 || rc=$?
[ "$rc" -eq 3 ] || bm_fail "inflate against a failing device: set --wait exited $rc, not 3 (stalled)"
failed=$(qom get x-sg-failed)
at_rest "inflate, device failing"
[ "$failed" -ge 1 ] && [ "$(field "$STATS" inflate: failed)" -ge 1 ] ||
    bm_fail "inflate: the device failed $failed element(s), the driver saw $(field "$STATS" inflate: failed)"
[ "$(actual_kib)" -gt $((MAX_KIB / 4 + 1024)) ] || bm_fail "inflate reached its target although the device failed"
qom set x-sg-fail 0 >/dev/null
setw 25% --wait=120 || bm_fail "inflate after the device recovered failed"
at_rest "inflate after recovery"
bm_pass "device fails inflate elements: the driver bails out ($(field "$STATS" inflate: failed) failed), set --wait stalls (exit 3), actual == pages held; the next inflate reaches"

[ "$(qom set x-sg-fail 1)" = "{}" ] || bm_fail "qom-set x-sg-fail refused"
rc=0; setw 100% --wait=120 --stall=5 || rc=$?
[ "$rc" -eq 3 ] || bm_fail "deflate against a failing device: set --wait exited $rc, not 3"
at_rest "deflate, device failing"
[ "$(field "$STATS" deflate: failed)" -ge 1 ] || bm_fail "deflate: the driver saw no failed element"
[ "$(field "$STATS" queues: held)" -ge 98304 ] || bm_fail "deflate: pages left the balloon the device did not take"
qom set x-sg-fail 0 >/dev/null
setw 100% --wait=120 || bm_fail "deflate after the device recovered failed"
at_rest "deflate after recovery"
bm_pass "device fails deflate elements: the pages stay in the balloon, set --wait stalls, actual == pages held; the next deflate reaches"

# the next element is dropped: the driver waits sg_timeout_ms (15 s), abandons it, goes on;
# set --wait's stall window (8 s) is longer than a loaded host's pause before the first kick
[ "$(qom set x-sg-drop 1)" = "{}" ] || bm_fail "qom-set x-sg-drop refused"
rc=0; setw 25% --wait=120 --stall=8 || rc=$?
[ "$(qom get x-sg-dropped)" = 1 ] || bm_fail "the device dropped no element"
[ "$rc" -eq 3 ] || bm_fail "inflate with a dropped element: set --wait exited $rc, not 3 (stalled)"
for _ in $(seq 60); do [ "$(actual_kib)" -le $((MAX_KIB / 4 + 1024)) ] && break; sleep 1; done
at_rest "inflate, one element dropped" 1
[ "$(field "$STATS" inflate: abandoned)" = 1 ] || bm_fail "the driver abandoned $(field "$STATS" inflate: abandoned) elements, not 1"
[ "$(actual_kib)" -le $((MAX_KIB / 4 + 1024)) ] || bm_fail "the balloon did not go on inflating after the abandoned element"
setw 100% --wait=120 || bm_fail "deflate after a dropped element failed"
at_rest "deflate after the dropped element" 1
! grep -qiE 'BUG|Oops|WARNING:|Call Trace' "$(bm_console_log lab3)" || bm_fail "kernel warning in the guest"
bm_pass "a dropped element: abandoned after sg_timeout_ms (its pages stay in the balloon, one ring slot stays the device's), set --wait stalls, the balloon goes on to its target, the next deflate reaches"

"$BM" -c "$BM_URI" run --once --policy "$work/p.policy" --state "$work/s2.json" --textfile "$work/textfile" >/dev/null
grep '^balloonmgr_balloon_changes_total' "$work/textfile/balloonmgr.prom"
grep -q '^balloonmgr_balloon_changes_total{direction="inflate",outcome="stalled"} 2$' "$work/textfile/balloonmgr.prom" &&
    grep -q '^balloonmgr_balloon_changes_total{direction="deflate",outcome="stalled"} 1$' "$work/textfile/balloonmgr.prom" ||
    bm_fail "the agent's counters do not have the 2 stalled inflates and the stalled deflate"
bm_pass "the agent's counters record the stalled changes (2 inflates, 1 deflate)"
