#!/usr/bin/env bash
# lab/guest/test-guest.sh [MODE]
#
# A real TCG guest running the SG lab driver (virtio_balloon_sg, loaded with
# bm.sgdriver=1 instead of virtio_balloon). MODE:
#   stock  (default) the distribution's QEMU, which does not offer
#          VIRTIO_BALLOON_F_SG: the driver must work like the stock one (PFN
#          arrays); stats reach libvirt; setmem 512 -> 256 MiB and back with
#          "actual" following and QEMU's RSS falling on inflate; the guest
#          fills 300 MiB again after the deflate.
#   sg     the patched QEMU (BM_LAB_QEMU, default
#          /var/lib/libvirt/images/balloonmgr-lab/qemu-system-x86_64), balloon
#          property sg=on: VIRTIO_BALLOON_F_SG negotiated
#          (x-query-virtio-status), 512 -> 128 MiB and back, RSS falls, the
#          driver's sg_stats show ranges, 300 MiB refill after the deflate.
#   sgoff  patched QEMU with sg=on, driver loaded with sg=0: SG offered but
#          not negotiated, the PFN path against the patched device.
#   frag   patched QEMU, sg=on, autodeflate=on, sg_elem_max=16: the guest
#          first fragments 120 MiB (every other 4 KiB tmpfs page freed), then
#          the balloon is asked for far more than is free (512 -> 64 MiB):
#          order fallback down to 0, thousands of ranges, many elements per
#          kick, ring-full flushes, "Out of puff", deflate-on-OOM through the
#          SG deflate path; then back to 512 MiB and a 300 MiB refill.
#   direct as frag, but the balloon without indirect descriptors
#          (indirect_desc=off) and the default range count per element (32):
#          elements of direct descriptors, the ring fills after 4 of them.
#   reload patched QEMU, sg=on: inflated to 128 MiB, the guest unloads the
#          driver (all pages released through the SG deflate path, MemTotal
#          back), loads it again (it inflates to the target by itself), then
#          back to 512 MiB.
# Every mode checks the console (loglevel=7) for WARNING/BUG/Oops/Call Trace.
# Uses tests/integration/lib/lib.sh; builds the module (lab/guest/build.sh) and
# the guest image (which then includes it) first. Exit: 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MODE=${1:-stock}
. "$ROOT/tests/integration/lib/lib.sh"
bm_require_root

LAB_QEMU=${BM_LAB_QEMU:-/var/lib/libvirt/images/balloonmgr-lab/qemu-system-x86_64}
prop() { echo "<qemu:property name='$1' type='bool' value='$2'/>"; }
props=$(prop sg true)
opts=(sgdriver=1 sgstats=2 "cmdline=loglevel=7")
case "$MODE" in
    stock)  opts+=(touch=300 retouch=300) ;;
    sg)     opts+=(touch=300 retouch=300) ;;
    sgoff)  opts+=(touch=300 retouch=300 sgparams=sg=0) ;;
    frag)   opts+=(touch=300 retouch=300 autodeflate=on sgparams=sg_elem_max=16 at=0:frag:120) ;;
    direct) opts+=(touch=300 retouch=300 autodeflate=on at=0:frag:120)
            props="$props$(prop indirect_desc false)" ;;
    reload) opts+=(touch=300 at=30:meminfo,32:rmmod,36:meminfo,40:insmod,60:meminfo) ;;
    *)      echo "usage: $0 [stock|sg|sgoff|frag|direct|reload]" >&2; exit 2 ;;
esac
if [ "$MODE" != stock ]; then
    [ -x "$LAB_QEMU" ] || bm_skip "no patched QEMU at $LAB_QEMU"
    opts+=("emulator=$LAB_QEMU"
           "extra=<qemu:override><qemu:device alias='balloon0'><qemu:frontend>$props</qemu:frontend></qemu:device></qemu:override>")
fi
want_sg=0
case "$MODE" in sg|frag|direct|reload) want_sg=1 ;; esac

# Module first, so build-guest.sh (in bm_setup) puts it into the initramfs.
t0=$(bm_now)
"$HERE/build.sh" >/dev/null || bm_fail "lab/guest/build.sh failed"
bm_log "module ready in $(bm_elapsed "$t0") s"
bm_setup
zcat "$BM_INITRD" | cpio -t 2>/dev/null | grep -q 'virtio_balloon_sg.ko$' ||
    bm_fail "virtio_balloon_sg.ko is not in $BM_INITRD"

bm_define_guest g 512 "${opts[@]}"
dom=$BM_DOM
console=$(bm_console_log g)
bm_wait_guest_ready g 600

grep -q "bm: module virtio_balloon_sg loaded" "$console" ||
    { tail -n 30 "$console"; bm_fail "virtio_balloon_sg not loaded"; }
grep -q "bm: module virtio_balloon loaded" "$console" &&
    bm_fail "the stock virtio_balloon was loaded too"
grep -Eq "bm: device virtio[0-9]+ bound to driver virtio_balloon_sg" "$console" ||
    { grep "bm:" "$console"; bm_fail "no virtio device bound to virtio_balloon_sg"; }
bm_pass "guest loaded virtio_balloon_sg instead of virtio_balloon and it bound the balloon"
grep -E "virtio_balloon_sg virtio|bm: module virtio_balloon_sg" "$console"

# --- features
qmp() { bm_virsh qemu-monitor-command "$dom" "$1"; }
path=$(qmp '{"execute":"x-query-virtio"}' |
       jq -r '.return[] | select(.name == "virtio-balloon") | .path' | head -n1)
[ -n "$path" ] || bm_fail "no virtio-balloon in x-query-virtio"
status=$(qmp "{\"execute\":\"x-query-virtio-status\",\"arguments\":{\"path\":\"$path\"}}")
gfeat=$(echo "$status" | jq -c '.return["guest-features"]["dev-features"]')
hfeat=$(echo "$status" | jq -c '.return["host-features"]["dev-features"]')
bm_log "host dev-features:  $hfeat"
bm_log "guest dev-features: $gfeat"
echo "$gfeat" | grep -q "VIRTIO_BALLOON_F_STATS_VQ" || bm_fail "STATS_VQ not negotiated: $gfeat"
if [ "$want_sg" = 1 ]; then
    echo "$gfeat" | grep -q "VIRTIO_BALLOON_F_SG" || bm_fail "SG not negotiated: $gfeat"
    bm_pass "VIRTIO_BALLOON_F_SG in guest-features"
else
    echo "$gfeat" | grep -q "VIRTIO_BALLOON_F_SG" && bm_fail "SG negotiated: $gfeat"
    if [ "$MODE" = sgoff ]; then
        echo "$hfeat" | grep -q "VIRTIO_BALLOON_F_SG" || bm_fail "SG not offered by the patched QEMU"
        bm_pass "SG offered, not negotiated (sg=0): PFN path"
    else
        bm_pass "stock QEMU: SG neither offered nor negotiated"
    fi
fi

# --- stats
for _ in $(seq 60); do
    [ -n "$(bm_memstat g usable)" ] && [ -n "$(bm_memstat g unused)" ] && break
    sleep 1
done
bm_virsh dommemstat "$dom" | tr '\n' ' '; echo
[ -n "$(bm_memstat g usable)" ] && [ -n "$(bm_memstat g unused)" ] ||
    bm_fail "dommemstat has no usable/unused (stats queue)"
bm_pass "guest stats: usable $(bm_memstat g usable) KiB, unused $(bm_memstat g unused) KiB"

# wait_actual MIB TIMEOUT: wait for dommemstat actual == MIB; prints seconds.
wait_actual() {
    local want=$(($1 * 1024)) timeout=$2 t0 a
    t0=$(bm_now)
    while :; do
        a=$(bm_memstat g actual)
        [ "$a" = "$want" ] && { bm_elapsed "$t0"; return 0; }
        if awk -v s="$t0" -v e="$(bm_now)" -v t="$timeout" 'BEGIN { exit !(e - s >= t) }'; then
            echo "actual=$a" >&2
            return 1
        fi
        sleep 0.2
    done
}
# wait_console REGEX TIMEOUT
wait_console() {
    local i
    for ((i = 0; i < $2 * 2; i++)); do
        grep -Eq "$1" "$console" && return 0
        sleep 0.5
    done
    return 1
}
# sgstat DIRECTION FIELD: FIELD of the last "bm: sg_stats: DIRECTION:" line.
sgstat() {
    grep "bm: sg_stats: $1:" "$console" | tail -n1 |
        awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'
}
rss() { echo $(($(bm_rss_kib "$pid") / 1024)); }
pid=$(bm_qemu_pid g)

setmem() { bm_virsh setmem "$dom" $(($1 * 1024)) --live; }

case "$MODE" in
stock|sg|sgoff)
    low=256; [ "$MODE" = sg ] && low=128
    sleep 3
    rss0=$(rss)
    setmem $low
    secs=$(wait_actual $low 300) || bm_fail "actual never reached $low MiB"
    sleep 2
    rss1=$(rss)
    [ $((rss0 - rss1)) -ge $(((512 - low) / 2)) ] || bm_fail "RSS fell by $((rss0 - rss1)) MiB only ($rss0 -> $rss1)"
    bm_pass "inflate 512 -> $low MiB: actual followed in $secs s, QEMU RSS $rss0 -> $rss1 MiB"
    setmem 512
    secs=$(wait_actual 512 300) || bm_fail "actual never came back to 512 MiB"
    bm_pass "deflate $low -> 512 MiB in $secs s"
    ;;
frag|direct)
    wait_console "bm: fragment" 300 || bm_fail "guest did not fragment its memory"
    grep "bm: fragment" "$console"
    grep -q "bm: fragmenting .*FAILED" "$console" && bm_fail "fragmenting failed"
    sleep 3
    rss0=$(rss)
    setmem 64
    bm_log "asked for 64 MiB (more than the guest can give); letting it work for 60 s"
    sleep 60
    a=$(bm_memstat g actual)
    rss1=$(rss)
    bm_log "after 60 s: actual $((a / 1024)) MiB, QEMU RSS $rss0 -> $rss1 MiB"
    grep "bm: sg_stats:" "$console" | tail -n 4
    r=$(sgstat inflate ranges); e=$(sgstat inflate elems); k=$(sgstat inflate kicks)
    o0=$(grep "bm: sg_stats: order_allocs:" "$console" | tail -n1 | sed 's/.* 0:\([0-9]*\) .*/\1/')
    [ "${o0:-0}" -gt 0 ] || bm_fail "no order-0 fallback allocations (order_allocs 0:$o0)"
    [ "${r:-0}" -gt 1000 ] && [ "${e:-0}" -gt "${k:-0}" ] ||
        bm_fail "expected > 1000 ranges and several elements per kick (ranges $r elems $e kicks $k)"
    bm_pass "fragmented inflate: $r ranges in $e elements, $k kicks; $o0 order-0 allocations"
    grep -c "Out of puff" "$console" | xargs echo "Out of puff messages:"
    d=$(sgstat deflate calls)
    bm_log "deflate calls (deflate-on-OOM and migration included): $d"
    setmem 512
    secs=$(wait_actual 512 300) || bm_fail "actual never came back to 512 MiB"
    bm_pass "deflate to 512 MiB in $secs s"
    ;;
reload)
    setmem 128
    secs=$(wait_actual 128 300) || bm_fail "actual never reached 128 MiB"
    bm_pass "inflate 512 -> 128 MiB in $secs s"
    wait_console "bm: at: all done" 180 || bm_fail "guest did not run its rmmod/insmod script"
    grep -E "bm: at" "$console"
    grep -q "bm: at: virtio_balloon_sg unloaded" "$console" || bm_fail "rmmod failed"
    grep -q "bm: at: virtio_balloon_sg loaded again" "$console" || bm_fail "insmod failed"
    mt=$(grep "bm: at: meminfo" "$console" | sed -n 's/.*MemTotal: \([0-9]*\) kB.*/\1/p' | tr '\n' ' ')
    bm_log "MemTotal (kB) while inflated / after rmmod / after insmod: $mt"
    set -- $mt
    [ "$2" -gt $(($1 + 300 * 1024)) ] || bm_fail "MemTotal did not come back after rmmod ($1 -> $2)"
    [ "$3" -lt $(($2 - 300 * 1024)) ] || bm_fail "balloon did not inflate again after insmod ($2 -> $3)"
    secs=$(wait_actual 128 60) || bm_fail "actual is not 128 MiB after the reload"
    bm_pass "rmmod released the balloon (MemTotal $1 -> $2 kB), insmod inflated it again ($3 kB)"
    setmem 512
    secs=$(wait_actual 512 300) || bm_fail "actual never came back to 512 MiB"
    bm_pass "deflate to 512 MiB in $secs s"
    ;;
esac

if [[ " ${opts[*]} " == *" retouch="* ]]; then
    wait_console "bm: retouch(ed|ing) 300 MiB" 180 || true
    grep "bm: retouch" "$console"
    grep -q "bm: retouching 300 MiB FAILED" "$console" && bm_fail "guest could not fill 300 MiB after the deflate"
    grep -q "bm: retouched 300 MiB" "$console" || bm_fail "no retouch result on the console"
    bm_pass "after the deflate the guest filled 300 MiB again"
fi

sleep 3
grep "bm: sg_stats:" "$console" | tail -n 4
if [ "$want_sg" = 1 ]; then
    bm_pass "SG totals: inflate $(sgstat inflate pages) pages in $(sgstat inflate ranges) ranges /" \
        "$(sgstat inflate elems) elements / $(sgstat inflate kicks) kicks (max range $(sgstat inflate max_range) pages);" \
        "deflate $(sgstat deflate pages) pages in $(sgstat deflate ranges) ranges, errors $(sgstat inflate errors)+$(sgstat deflate errors)"
    [ "$(sgstat inflate ranges)" -gt 0 ] && [ "$(sgstat deflate ranges)" -gt 0 ] || bm_fail "no SG ranges reported"
else
    [ "$(sgstat inflate ranges)" = 0 ] || bm_fail "SG ranges used without SG"
fi

# --- console health
if grep -nE "WARNING:|BUG:|Oops|Call Trace|general protection|page allocation failure|Kernel panic|soft lockup|hung_task|blocked for more than" "$console"; then
    bm_fail "kernel warning/oops on the console"
fi
state=$(bm_virsh domstate "$dom")
[ "$state" = running ] || bm_fail "domain is $state"
bm_pass "console clean (no WARNING/BUG/Oops/Call Trace), domain running"
