#!/usr/bin/env bash
# The SG lab (lab/, lab/PROTOCOL.md): the patched QEMU device and the SG guest driver, built
# from nothing (cached), and balloonmgr driving them. Two pairs (BM_LAB_SUITE):
#   bookworm (default, meson test test-lab): QEMU 7.2 + lab/qemu/*.patch, 6.1 guests;
#   trixie (meson test test-lab-trixie): QEMU 10.0 + lab/qemu-10.0/*.patch (its ioeventfd is
#     QEMU's own), Debian 13's 6.12 guests (image in BM_LAB_GUEST_DIR
#     [/var/lib/libvirt/images/balloonmgr-test-lab-trixie], module built with gcc-14 in the
#     trixie root); the lab QEMU shows the six statistics 6.12's driver sends (tags 10-15).
# Both, on this host's libvirtd:
# - configure --sg on --ioeventfd on (qemu:override) on a lab guest; after a restart
#   verify --require sg,ioeventfd exits 0 (SG negotiated by name, bit 6; the ioeventfd
#   property is the lab's patch on 7.2, QEMU's own on 10.0);
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
# Environment: BM_LAB_SUITE [bookworm], BM_LAB_QEMU_DIR, where build-qemu.sh installs the lab
# QEMU [/var/lib/libvirt/images/balloonmgr-lab, trixie: balloonmgr-lab-trixie].
set -euo pipefail
. "$(dirname "$0")/lib/lab-suite.sh"
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
ROOT=${BM_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
bm_setup

start=$(bm_now)
mkdir -p "$BM_WORKDIR"
LAB_QEMU_DIR=${BM_LAB_QEMU_DIR:-/var/lib/libvirt/images/balloonmgr-lab$LAB_SUFFIX}
"$ROOT/lab/build-qemu.sh" "$LAB_QEMU_DIR" >"$BM_WORKDIR/build-qemu.log" 2>&1 || { tail -30 "$BM_WORKDIR/build-qemu.log"; bm_fail "lab QEMU build failed"; }
EMU=$LAB_QEMU_DIR/qemu-system-x86_64
"$ROOT/lab/guest/build.sh" >"$BM_WORKDIR/build-module.log" 2>&1 || { tail -30 "$BM_WORKDIR/build-module.log"; bm_fail "SG driver build failed"; }
bm_guest_image >/dev/null   # again: the initramfs now carries virtio_balloon_sg.ko
bm_log "lab ($LAB_SUITE: $("$EMU" --version | head -n1), guest kernel $BM_KERNEL_VERSION) built (or found in cache) in $(bm_elapsed "$start") s"
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
"$BM" -c "$BM_URI" verify --json "$dom" | jq -e --arg s "$IOEVENTFD_SOURCE" '.domains[0].features.ioeventfd.source == $s' >/dev/null ||
    bm_fail "ioeventfd source not '$IOEVENTFD_SOURCE': $("$BM" -c "$BM_URI" verify --json "$dom" | jq -c '.domains[0].features.ioeventfd')"
bm_pass "configure --sg on --ioeventfd on + restart: verify --require sg,ioeventfd exits 0 (ioeventfd: $IOEVENTFD_SOURCE)"
if [ "$LAB_SUITE" = trixie ]; then
    # 6.12's statistics (tags 10-15) from the SG driver, named by QEMU 10 in guest-stats
    bm_wait_fresh_stats lab1
    gs=$(bm_virsh qemu-monitor-command "$dom" \
        '{"execute":"qom-get","arguments":{"path":"/machine/peripheral/balloon0","property":"guest-stats"}}')
    echo "$gs" | jq -c '.return.stats'
    echo "$gs" | jq -e '[.return.stats | ("stat-oom-kills", "stat-alloc-stalls", "stat-async-scans",
        "stat-direct-scans", "stat-async-reclaims", "stat-direct-reclaims") as $k | .[$k]] |
        all(. != null and . >= 0 and . < 1e19)' >/dev/null ||
        bm_fail "the SG driver's 6.12 statistics (tags 10-15) are not in QEMU's guest-stats"
    bm_pass "the SG driver on 6.12 sends the six new statistics; QEMU 10 names them in guest-stats"
fi
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
grep -E '^balloonmgr_balloon_change_duration_seconds_count\{device="balloon",direction="inflate",sg="(negotiated|not_negotiated)"\}' "$work/textfile/balloonmgr.prom"
grep -q '^balloonmgr_balloon_change_duration_seconds_count{device="balloon",direction="inflate",sg="negotiated"} 1$' "$work/textfile/balloonmgr.prom" ||
    bm_fail "no sg=negotiated inflate in the histogram"
grep -q '^balloonmgr_balloon_change_duration_seconds_count{device="balloon",direction="inflate",sg="not_negotiated"} 1$' "$work/textfile/balloonmgr.prom" ||
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
for _ in $(seq "$(bm_mult 40)"); do
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
    # (10 looks of 2.5 s, times BM_TIMEOUT_MULTIPLIER on a slow machine: a guard, not a bound)
    for i in $(seq $((10 * ${BM_TIMEOUT_MULTIPLIER:-1}))); do
        st=$(stats); held=$(field "$st" queues: held); a=$(actual_kib)
        # settled: nothing in flight (a failing device's elements come back later than the
        # balloon's size settles: one run's stats line showed one still in flight) and actual
        # == the pages held
        [ -n "$held" ] && [ "$held" != - ] && [ "$(field "$st" queues: inflight)" = 0 ] &&
            [ $((MAX_KIB - held * 4)) -eq "$a" ] && break
    done
    echo "$label: $(field "$st" queues: inflight) in flight; inflate ring $(field "$st" queues: inflate_free)/$(field "$st" queues: inflate_size) free, deflate $(field "$st" queues: deflate_free)/$(field "$st" queues: deflate_size); balloon holds $held pages, QEMU actual $a KiB"
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
for _ in $(seq "$(bm_mult 60)"); do [ "$(actual_kib)" -le $((MAX_KIB / 4 + 1024)) ] && break; sleep 1; done
at_rest "inflate, one element dropped" 1
[ "$(field "$STATS" inflate: abandoned)" = 1 ] || bm_fail "the driver abandoned $(field "$STATS" inflate: abandoned) elements, not 1"
[ "$(actual_kib)" -le $((MAX_KIB / 4 + 1024)) ] || bm_fail "the balloon did not go on inflating after the abandoned element"
setw 100% --wait=120 || bm_fail "deflate after a dropped element failed"
at_rest "deflate after the dropped element" 1
! grep -qiE 'BUG|Oops|WARNING:|Call Trace' "$(bm_console_log lab3)" || bm_fail "kernel warning in the guest"
bm_pass "a dropped element: abandoned after sg_timeout_ms (its pages stay in the balloon, one ring slot stays the device's), set --wait stalls, the balloon goes on to its target, the next deflate reaches"

"$BM" -c "$BM_URI" run --once --policy "$work/p.policy" --state "$work/s2.json" --textfile "$work/textfile" >/dev/null
grep '^balloonmgr_balloon_changes_total' "$work/textfile/balloonmgr.prom"
grep -q '^balloonmgr_balloon_changes_total{device="balloon",direction="inflate",outcome="stalled"} 2$' "$work/textfile/balloonmgr.prom" &&
    grep -q '^balloonmgr_balloon_changes_total{device="balloon",direction="deflate",outcome="stalled"} 1$' "$work/textfile/balloonmgr.prom" ||
    bm_fail "the agent's counters do not have the 2 stalled inflates and the stalled deflate"
bm_pass "the agent's counters record the stalled changes (2 inflates, 1 deflate)"

# --- chunked blocks (sg_chunk=1, the default): a 2 MiB block is tracked once, sent as one range
# and freed whole; a deflate of part of a block splits it; an inflate of less than a block takes
# a smaller one; a fragmented guest reaches its target through the order fallback; compaction
# during and after an inflate neither crashes the guest nor corrupts the balloon or its memory.
# The guest waits for the host's signals, balloon sizes no inflate passes through by chance:
# at exactly 7172 KiB it fragments 192 MiB (2 MiB files, every other one deleted) and 48 MiB
# more (4 KiB files, every other one deleted: single free pages); when the balloon grows by
# exactly 8 KiB it compacts once and checks its files; at 9220 KiB it compacts for 10 s over and
# over (the host inflates and deflates meanwhile) and checks its files again.
for d in lab1 lab2 lab3; do bm_virsh destroy "$(bm_dom "$d")" >/dev/null 2>&1 || true; done
export BALLOONMGR_RUNTIME_DIR=$work/run3
mkdir -p "$work/run3/changes"
bm_define_guest lab4 512 emulator="$EMU" sgdriver=1 touch=300 sgstats=1 sgparams=sg_count_held=1 \
    at=0:await:7172,0:frag2m:192,0:frag:48,0:meminfo,0:fragcheck,0:await:+8,0:compact:0,0:fragcheck,0:await:9220,0:compact:10,0:fragcheck \
    "extra=<qemu:override><qemu:device alias='balloon0'><qemu:frontend><qemu:property name='sg' type='bool' value='true'/></qemu:frontend></qemu:device></qemu:override>"
bm_wait_guest_ready lab4 300
dom3=$(bm_dom lab4) # the helpers above (qom, stats, actual_kib, at_rest, setw) now act on lab4
console4=$(bm_console_log lab4)
stats() { sleep 2.5; grep -a 'bm: sg_stats: ' "$console4" | tr -d '\r' | sed 's/.*bm: sg_stats: //' | tac | awk '!seen[$1]++'; }
for _ in $(seq "$(bm_mult 40)"); do
    "$BM" -c "$BM_URI" verify --json "$dom3" | jq -e '.domains[0].features.sg.state == "negotiated"' >/dev/null && break; sleep 0.5
done
# held_order ORDER: chunked blocks of that order in the balloon (the "blocks:" line of $STATS)
held_order() { echo "$STATS" | awk -v o="$1" '$1 == "blocks:" { for (i = 2; i <= NF; i++) if ($i ~ "^" o ":") { sub(/.*:/, "", $i); print $i } }'; }
list_pages() { echo $(($(field "$STATS" queues: held) - $(field "$STATS" blocks: pages))); }
setexact() { # setexact KIB LABEL: virsh setmem (below set --wait's 1 MiB tolerance), wait for actual == KIB
    bm_virsh setmem "$dom3" "$1" --live >/dev/null || bm_fail "$2: setmem $1 KiB refused"
    for _ in $(seq "$(bm_mult 240)"); do [ "$(actual_kib)" = "$1" ] && return 0; sleep 0.5; done
    bm_fail "$2: QEMU actual $(actual_kib) KiB, not $1"
}
console_wait() { # console_wait SECS PATTERN: until the guest prints PATTERN
    for _ in $(seq "$(bm_mult $(($1 * 2)))"); do grep -aq "$2" "$console4" && return 0; sleep 0.5; done
    bm_fail "lab4 did not print '$2' within $1 s"
}

STATS=$(stats)
[ "$(field "$STATS" blocks: chunk)" = 1 ] || bm_fail "the driver does not run chunked by default"
setw 128M --wait=120 || bm_fail "chunked inflate failed"
at_rest "chunked inflate to 128 MiB"
echo "$(echo "$STATS" | grep '^blocks:')"
[ "$(held_order 9)" = 192 ] && [ "$(field "$STATS" blocks: pages)" = 98304 ] && [ "$(list_pages)" = 0 ] ||
    bm_fail "384 MiB of clean memory not held as 192 blocks of 2 MiB off the balloon list ($(held_order 9) blocks, $(list_pages) pages on the list)"
bm_pass "chunked inflate: 384 MiB held as 192 blocks of order 9, none of its pages on the balloon list, actual == pages held"

setexact 132096 "partial deflate" # 1 MiB of a balloon of 2 MiB blocks: one block split
at_rest "deflate of half a block"
[ "$(field "$STATS" blocks: splits)" = 1 ] && [ "$(held_order 9)" = 191 ] && [ "$(list_pages)" = 256 ] ||
    bm_fail "partial deflate: splits $(field "$STATS" blocks: splits), $(held_order 9) blocks left, $(list_pages) pages on the list (want 1, 191, 256)"
bm_pass "deflate of part of a block: the block split, 1 MiB released, its other 256 pages on the balloon list, actual == pages held"

setexact 131072 "small inflate" # 1 MiB: fewer pages than a 2 MiB block
at_rest "inflate of less than a block"
echo "$(echo "$STATS" | grep '^blocks:')"
[ "$(held_order 8)" = 1 ] && [ "$(held_order 9)" = 191 ] && [ "$(list_pages)" = 256 ] ||
    bm_fail "a 1 MiB inflate did not take one block of order 8 ($(echo "$STATS" | grep '^blocks:'))"
bm_pass "inflate of fewer pages than a block: one block of order 8, actual == pages held"
setw 100% --wait=120 || bm_fail "deflate of the chunked balloon failed"
at_rest "chunked deflate"
[ "$(field "$STATS" queues: held)" = 0 ] && [ "$(field "$STATS" blocks: pages)" = 0 ] || bm_fail "chunked deflate: pages left in the balloon"
bm_pass "deflate of whole blocks: nothing left in the balloon, every ring slot free"

# fragmented: the guest fills 256 MiB with 2 MiB files and deletes every other one
setexact $((MAX_KIB - 7172)) "signal 1"
console_wait 300 'bm: fragcheck:'
grep -a 'bm: fragmented\|bm: at: meminfo' "$console4" | tr -d '\r'
setw 100% --wait=120 || bm_fail "deflate after signal 1"
# the balloon takes all the guest's free memory but 13 MiB (20 MiB less the 7 MiB of signal 1,
# free again now): more than is free outside the 24 MiB of single free pages
free_kib=$(grep -a 'bm: at: meminfo' "$console4" | tail -1 | sed 's/.*MemFree: \([0-9]*\) kB.*/\1/')
frag_kib=$((MAX_KIB - (free_kib - 13 * 1024) / 4 * 4))
STATS=$(stats)
a0=$(echo "$STATS" | awk '$1 == "order_allocs:"'); f0=$(echo "$STATS" | awk '$1 == "order_fails:"')
setw "${frag_kib}KiB" --wait=300 || bm_fail "fragmented guest: inflate to $frag_kib KiB did not reach"
at_rest "fragmented inflate"
a1=$(echo "$STATS" | awk '$1 == "order_allocs:"'); f1=$(echo "$STATS" | awk '$1 == "order_fails:"')
# per order: blocks taken (and failed) during this inflate; the share of its pages in blocks of order > 0
share=$(awk -v a0="$a0" -v a1="$a1" -v f0="$f0" -v f1="$f1" 'BEGIN {
    n = split(a1, x, " "); split(a0, y, " "); split(f1, u, " "); split(f0, v, " ")
    for (i = 2; i <= n; i++) { split(x[i], p, ":"); split(y[i], q, ":"); split(u[i], s, ":"); split(v[i], t, ":")
        d = p[2] - q[2]; pages = d * 2 ^ p[1]; all += pages; if (p[1] > 0) high += pages
        if (p[1] == 9) top = pages; if (p[1] == 0) singles = d; fails += (p[1] > 0) ? s[2] - t[2] : 0
        if (d || s[2] - t[2]) printf "order %d: %d blocks (%d failed)\n", p[1], d, s[2] - t[2] > "/dev/stderr" }
    printf "%.1f %.1f %d %d %d", 100 * high / all, 100 * top / all, all, fails, singles }')
echo "fragmented inflate: $(echo "$share" | awk '{ printf "%d pages, %.1f%% of them in blocks of order > 0, %.1f%% in 2 MiB blocks, %d single pages; %d failed high-order attempts", $3, $1, $2, $5, $4 }')"
# the balloon must go below order 9 to reach the target; whether it needs single pages too
# depends on where the deleted 4 KiB files' pages lie: 6.1 mostly leaves some isolated (the
# fallback then goes down to single pages), but a fresh-clone run of 2026-12-03 needed none
# (orders 9, 8 and 5 only), and 6.12 did not isolate them (2026-12-02: order 3, no single
# page): the fallback below order 9 is what is checked, the single pages are counted
[ "$(echo "$share" | awk '{ print ($4 > 0 && $2 < 100) }')" = 1 ] ||
    bm_fail "fragmented guest: no fallback below order 9 seen ($share)"
bm_pass "fragmented guest (2 MiB and 4 KiB holes): the inflate to $frag_kib KiB reached through the order fallback below order 9, $(echo "$share" | awk '{ printf "%.1f%% of its pages in blocks of order > 0, %d single pages", $1, $5 }'), actual == pages held"

# compaction after an inflate: the balloon of the fragmented inflate (its single pages are
# movable balloon pages, its blocks are not) grows by 8 KiB, the guest compacts once and checks
# its files; then compaction during inflates: the guest compacts over and over for 10 s, the
# balloon goes up (as far as in the fragmented inflate) and down in it, the files are checked
echo "the balloon: $(field "$STATS" queues: held) pages, $(list_pages) single pages on the balloon list (movable), $(echo "$STATS" | grep '^blocks:')"
setexact $((frag_kib - 8)) "signal 2" # 8 KiB more: then the guest compacts once
console_wait 120 'bm: compacted 1 time(s) in 0 s'
console_wait 120 'bm: at 0 s: await 9220'
at_rest "after the compaction after an inflate"
setw 100% --wait=120 || bm_fail "deflate after the fragmented inflate"
setexact $((MAX_KIB - 9220)) "signal 3"
console_wait 60 'bm: at 0 s: compact 10'
for i in 1 2 3; do
    setw "${frag_kib}KiB" --wait=300 || bm_fail "inflate $i during compaction failed"
    [ "$i" = 1 ] && grep -aq 'bm: compacted [0-9]* time(s) in 10 s' "$console4" && bm_fail "the guest's compaction ended before the first inflate did"
    setw 352M --wait=300 || bm_fail "deflate $i during compaction failed"
done
console_wait 120 'bm: at: all done'
grep -a 'bm: at: balloon grew\|bm: compacted\|bm: fragcheck' "$console4" | tr -d '\r'
at_rest "after the compaction during inflates"
grep -a 'bm: compacted' "$console4" | tr -d '\r' | awk '$3 < 1 { bad = 1 } END { exit bad || NR != 2 }' || bm_fail "the guest did not compact twice"
grep -a 'bm: fragcheck:' "$console4" | tr -d '\r' | awk '{ if ($5 != 0 || $3 == 0) bad = 1 } END { exit bad || NR != 3 }' ||
    bm_fail "the guest's files changed (a page of theirs given to the host?)"
setw 100% --wait=120 || bm_fail "deflate after compaction failed"
at_rest "deflate after compaction"
[ "$(field "$STATS" queues: held)" = 0 ] || bm_fail "pages left in the balloon after compaction"
! grep -qiE 'BUG|Oops|WARNING:|Call Trace' "$console4" || bm_fail "kernel warning in the guest"
bm_pass "compaction after and during chunked inflates of a fragmented guest: no kernel warning, the guest's files intact (3 checks), actual == pages held, the balloon emptied ($(grep -a 'bm: compacted' "$console4" | tr -d '\r' | sed 's/.*bm: //' | paste -sd';'))"
