#!/bin/bash
# tests/integration/test-harness.sh -- smoke test of the integration harness.
#
# Uses only lib.sh and virsh (not balloonmgr): boots a 512 MiB guest that
# touches 300 MiB, checks the balloon reports 'actual' and guest stats, that
# the QEMU process holds > 300 MiB, then inflates the balloon to 256 MiB with
# 'virsh setmem' and checks 'actual' follows and QEMU's RSS drops by at least
# 80% of the 256 MiB difference.
#
# Exit: 0 pass, 1 fail, 77 skip (not root).
set -euo pipefail

. "$(dirname "$0")/lib/lib.sh"

MEM_MIB=512
TOUCH_MIB=300
TARGET_KIB=262144                                   # 256 MiB
DIFF_KIB=$(( MEM_MIB * 1024 - TARGET_KIB ))         # 262144
MIN_DROP_KIB=$(( DIFF_KIB * 80 / 100 ))
INFLATE_TIMEOUT=60

t_all=$(bm_now)
bm_setup
t_setup=$(bm_elapsed "$t_all")

# --- boot --------------------------------------------------------------------
t0=$(bm_now)
bm_define_guest h1 "$MEM_MIB" touch="$TOUCH_MIB"
DOM=$BM_DOM
bm_wait_guest_ready h1 120
t_boot=$(bm_elapsed "$t0")
CONSOLE=$(bm_console_log h1)
grep -q "bm: touched $TOUCH_MIB MiB" "$CONSOLE" || bm_fail "guest did not report touching $TOUCH_MIB MiB"
grep -q "bm: module virtio_balloon loaded" "$CONSOLE" || bm_fail "virtio_balloon not loaded in the guest"
bm_pass "guest $DOM booted in $t_boot s (define+start+ready)"

# --- balloon reports ---------------------------------------------------------
actual=$(bm_memstat h1 actual)
[ -n "$actual" ] || bm_fail "dommemstat shows no 'actual'"
[ "$actual" -eq $(( MEM_MIB * 1024 )) ] || bm_fail "actual=$actual, expected $(( MEM_MIB * 1024 ))"
bm_pass "dommemstat actual=$actual KiB"

# the guest's first statistics: waited for (the driver reports once its stats period starts)
have_stats() { [ -n "$(bm_memstat h1 usable)" ] && [ -n "$(bm_memstat h1 unused)" ]; }
bm_wait_until 30 "the guest's first statistics (usable, unused)" have_stats || true
stats=$(bm_virsh dommemstat "$DOM")
usable=$(bm_memstat h1 usable)
unused=$(bm_memstat h1 unused)
if [ -z "$usable" ] || [ -z "$unused" ]; then
    echo "$stats" >&2
    bm_fail "no guest stats (usable/unused) after 3 s with stats period 1"
fi
bm_pass "guest stats: usable=$usable KiB unused=$unused KiB"

# --- RSS before --------------------------------------------------------------
QPID=$(bm_qemu_pid h1) || bm_fail "no QEMU pid for $DOM"
rss0=$(bm_rss_kib "$QPID")
[ "$rss0" -gt $(( TOUCH_MIB * 1024 )) ] ||
    bm_fail "QEMU RSS $rss0 KiB is not > $TOUCH_MIB MiB after the guest touched $TOUCH_MIB MiB"
bm_pass "QEMU pid $QPID RSS before inflate: $rss0 KiB"

# --- inflate -----------------------------------------------------------------
t0=$(bm_now)
bm_virsh setmem "$DOM" "$TARGET_KIB" --live >/dev/null || bm_fail "virsh setmem failed"
t_actual=""
t_rss=""
rss1=$rss0
inflated() { # notes when 'actual' reached the target and when the RSS fell enough: both?
    [ -z "$t_actual" ] && [ "$(bm_memstat h1 actual)" = "$TARGET_KIB" ] && t_actual=$(bm_elapsed "$t0")
    rss1=$(bm_rss_kib "$QPID")
    [ -z "$t_rss" ] && [ $(( rss0 - rss1 )) -ge "$MIN_DROP_KIB" ] && t_rss=$(bm_elapsed "$t0")
    [ -n "$t_actual" ] && [ -n "$t_rss" ]
}
if ! BM_WAIT_INTERVAL=0.2 bm_wait_until "$INFLATE_TIMEOUT" "the inflate to $TARGET_KIB KiB" inflated; then
    bm_virsh dommemstat "$DOM" >&2 || true
    [ -n "$t_actual" ] || bm_fail "actual=$(bm_memstat h1 actual), not $TARGET_KIB, after $INFLATE_TIMEOUT s"
    bm_fail "QEMU RSS fell only $(( rss0 - rss1 )) KiB (from $rss0 to $rss1), need >= $MIN_DROP_KIB KiB"
fi
bm_pass "actual reached $TARGET_KIB KiB in $t_actual s"
bm_pass "QEMU RSS $rss0 -> $rss1 KiB (-$(( rss0 - rss1 )) KiB, need -$MIN_DROP_KIB) in $t_rss s"

echo "timings: setup ${t_setup}s, boot ${t_boot}s, actual ${t_actual}s," \
     "rss-drop ${t_rss}s, total $(bm_elapsed "$t_all")s"
echo "rss: before ${rss0} KiB, after ${rss1} KiB"
