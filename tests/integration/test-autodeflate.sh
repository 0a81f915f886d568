#!/usr/bin/env bash
# deflate-on-oom (configure --autodeflate on) as the safety net, on real guests: two 768 MiB
# guests, one with <memballoon autodeflate='on'>, one with it off, are ballooned down to
# 320 MiB by a one-off set (no policy, no agent), then each writes 500 MiB into a tmpfs.
# - autodeflate on: the guest deflates its own balloon (the balloon grows back by at least
#   the memory it lacked), the write completes, and no process is OOM-killed;
# - autodeflate off: the guest runs out of memory (OOM killer, failed write, or a panic that
#   ends the domain): what balloonmgr must prevent by deflating in time.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
bm_setup

# the write starts 20 s after the guest is ready: time to balloon it down first (which takes
# 1-3 s after the host sees it ready; the check below fails the test if the write came first)
for g in adon adoff; do
    bm_define_guest $g 768 autodeflate=${g#ad} at=20:touch:500,21:meminfo
done
bm_wait_guest_ready adon 240
bm_wait_guest_ready adoff 240
for g in adon adoff; do
    "$BM" -c "$BM_URI" set "$(bm_dom $g)" 320M --wait=60 >/dev/null || bm_fail "set $g 320M failed"
done
for g in adon adoff; do
    grep -q "bm: at" "$(bm_console_log $g)" && bm_fail "$g: the write started before the balloon was down"
    a=$(bm_memstat $g actual)
    bm_log "$g ballooned to $((a / 1024)) MiB before its write"
done

# wait for both writes to end (or the guest to die)
outcome() { # outcome NAME: touched | failed | oom-killed | dead | running
    local log; log=$(bm_console_log "$1")
    if grep -q "bm: at: touched 500 MiB" "$log"; then echo touched
    elif grep -q "bm: at: touching 500 MiB FAILED" "$log"; then echo failed
    elif grep -q "Out of memory: Killed process" "$log"; then echo oom-killed
    elif [ "$(bm_virsh domstate "$(bm_dom "$1")" 2>/dev/null)" != running ]; then echo dead
    else echo running; fi
}
for _ in $(seq "$(bm_mult 300)"); do
    [ "$(outcome adon)" != running ] && [ "$(outcome adoff)" != running ] && break
    sleep 1
done
oom() { grep -cE "invoked oom-killer|Out of memory|Kernel panic" "$(bm_console_log "$1")" || true; }

on=$(outcome adon); off=$(outcome adoff)
bm_log "autodeflate on: $on, OOM lines $(oom adon); autodeflate off: $off, OOM lines $(oom adoff)"
[ "$on" = touched ] || { tail -30 "$(bm_console_log adon)"; bm_fail "autodeflate on: the write did not complete ($on)"; }
[ "$(oom adon)" -eq 0 ] || { grep -E "oom|Out of memory" "$(bm_console_log adon)" | head; bm_fail "autodeflate on: OOM killer ran"; }
a=$(bm_memstat adon actual)
[ "$a" -ge $(((320 + 150) * 1024)) ] || bm_fail "autodeflate on: balloon only at $((a / 1024)) MiB after the write"
bm_pass "autodeflate on: the guest deflated its balloon itself (320 -> $((a / 1024)) MiB), wrote 500 MiB, no OOM kill"

if [ "$off" = touched ] && [ "$(oom adoff)" -eq 0 ]; then
    bm_fail "autodeflate off: the 500 MiB write into 320 MiB completed without OOM: the test shows nothing"
fi
grep -E "invoked oom-killer|Killed process|Kernel panic|FAILED" "$(bm_console_log adoff)" | head -5 || true
bm_pass "autodeflate off: the guest ran out of memory ($off, $(oom adoff) OOM/panic lines): the failure the safety net and a timely deflate avoid"
