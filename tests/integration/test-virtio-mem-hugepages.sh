#!/usr/bin/env bash
# virtio-mem beside huge pages (issue 53): a guest whose memory is all 2 MiB huge pages
# (<memoryBacking><hugepages/>; reserved here and given back at the end) has a balloon that
# returns nothing, so `set` moves its virtio-mem device; the guest's unplug gives whole huge
# pages back to the host: HugePages_Free rises by what it unplugged.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
bm_setup
MiB=1048576

hp_free() { awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo; }
hp_total() { awk '/^HugePages_Total:/ { print $2 }' /proc/meminfo; }
[ "$(awk '/^Hugepagesize:/ { print $2 }' /proc/meminfo)" = 2048 ] ||
    bm_fail "the host's default huge page is not 2 MiB"

# a hugetlbfs mount for libvirt (the test's own where there is none; unmounted last)
bm_hugetlbfs
# the pages the guest needs (256 MiB base, a 512 MiB device, QEMU's own beside them on 4 KiB
# pages), reserved on top of what the host had; the test's own, given back after the guest is
# gone (a page in use when the count drops is freed when QEMU lets it go). In a container
# (/proc/sys read-only: test-stack-trixie) the host reserved them for it: BM_HUGEPAGES_RESERVED=1,
# and the free pages must be there.
need=$(((256 + 512) / 2 + 16))
bm_add_cleanup "bm_virsh destroy $(bm_dom hp) >/dev/null 2>&1"
if [ "${BM_HUGEPAGES_RESERVED:-0}" = 1 ]; then
    [ "$(hp_free)" -ge "$need" ] ||
        bm_fail "BM_HUGEPAGES_RESERVED=1 but $(hp_free) huge pages free, not the $need needed"
    bm_log "huge pages: $(hp_free) free of $(hp_total), reserved by the host (BM_HUGEPAGES_RESERVED)"
else
    before=$(cat /proc/sys/vm/nr_hugepages)
    want=$((before + need))
    echo "$want" >/proc/sys/vm/nr_hugepages
    bm_add_cleanup "echo $before >/proc/sys/vm/nr_hugepages"
    [ "$(hp_total)" -ge "$want" ] ||
        bm_fail "could reserve $(hp_total) of $want huge pages (host memory fragmented?)"
    bm_log "huge pages: $before -> $(hp_total) reserved, $(hp_free) free"
fi

bm_define_guest hp 256 virtiomem=512:512 hugepages=1 touch=500
hp=$BM_DOM
bm_wait_guest_ready hp
dev() { "$BM" -c "$BM_URI" status "$hp" --json | jq -r ".domains[0].virtio_mem[0].$1"; }
plugged_is() { [ "$(dev current_bytes)" = "$1" ]; }
bm_wait_until 60 "$hp to have plugged 512 MiB" plugged_is $((512 * MiB)) ||
    bm_fail "$hp: $(dev current_bytes) bytes plugged, not 512 MiB"
"$BM" -c "$BM_URI" status "$hp" --json | jq -e '.domains[0].returns_nothing != null' >/dev/null ||
    bm_fail "status: the huge-page guest's balloon is not said to return nothing"

free0=$(hp_free)
res=$("$BM" -c "$BM_URI" set "$hp" 512M --wait --json) || bm_fail "set $hp 512M --wait failed: $res"
echo "$res" | jq -c .
echo "$res" | jq -e --argjson m $MiB '.device == "virtio-mem" and .outcome == "reached" and
    .unplugged_bytes == 256 * $m' >/dev/null ||
    bm_fail "set 512M on the huge-page guest: not virtio-mem, or not 256 MiB unplugged"
bm_pass "set chose virtio-mem on a huge-page guest (its balloon returns nothing) and unplugged 256 MiB"

# 256 MiB unplugged is 128 huge pages; the guest touched its memory at boot, so they were all
# backed: the host gets them back (QEMU punches them out of its hugetlbfs file)
risen() { [ $(($(hp_free) - free0)) -ge 128 ]; }
bm_wait_until 30 "HugePages_Free to rise by 128 (from $free0)" risen ||
    bm_fail "HugePages_Free rose by $(($(hp_free) - free0)) pages, not the 128 unplugged"
bm_pass "HugePages_Free rose by $(($(hp_free) - free0)) pages (256 MiB unplugged: 128 pages)"

free1=$(hp_free)
res=$("$BM" -c "$BM_URI" set "$hp" 768M --wait --json) || bm_fail "set $hp 768M --wait failed: $res"
echo "$res" | jq -c .
echo "$res" | jq -e --argjson m $MiB '.outcome == "reached" and .plugged_bytes == 256 * $m' >/dev/null ||
    bm_fail "set 768M: not a plug of 256 MiB"
bm_log "HugePages_Free $free1 -> $(hp_free) after the plug (pages are taken when the guest touches them, or at once with prealloc)"
bm_pass "plugged back to 768 MiB"
