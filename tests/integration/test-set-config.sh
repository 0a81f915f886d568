#!/usr/bin/env bash
# set --config / --current / --live against a real libvirtd (issue 23.3), with no guest booted:
# a domain is defined (never started) and undefined again.
# - set DOMAIN SIZE on the shut-off domain: refused, exit 1, nothing changed (virsh setmem's
#   default is the running domain);
# - --config, and --current (the definition of a domain that is not running), set its
#   <currentMemory>: `virsh dumpxml --inactive` shows the new value; relative sizes start from
#   the definition's value;
# - --live on it: refused, exit 1; --current with --config: exit 2; --wait with --config: exit 2;
# - by UUID and by name alike.
# Root only (the system libvirtd); starts libvirtd only if none answers (and stops only that).
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
bm_require_root
BM_WORKDIR=$(mktemp -d /tmp/bm-set-config.XXXXXX)
work=$BM_WORKDIR
trap bm_on_exit EXIT
bm_start_daemons
export BALLOONMGR_RUNTIME_DIR=$work/run

qemu=$(command -v qemu-system-x86_64) || bm_skip "qemu-system-x86_64 is needed to define a domain"
dom=$(bm_dom setcfg)
cat >"$work/dom.xml" <<XML
<domain type='qemu'>
  <name>$dom</name>
  <memory unit='MiB'>512</memory>
  <currentMemory unit='MiB'>512</currentMemory>
  <os><type arch='x86_64'>hvm</type></os>
  <devices>
    <emulator>$qemu</emulator>
    <memballoon model='virtio'/>
  </devices>
</domain>
XML
bm_virsh define "$work/dom.xml" >/dev/null || bm_fail "virsh define $dom"
bm_add_cleanup "virsh -q -c '$BM_URI' undefine '$dom' >/dev/null 2>&1 || true"
uuid=$(bm_virsh domuuid "$dom")
current_kib() { bm_virsh dumpxml --inactive "$dom" | sed -n "s|.*<currentMemory unit='KiB'>\([0-9]*\)</currentMemory>.*|\1|p"; }
[ "$(current_kib)" = 524288 ] || bm_fail "defined $dom with currentMemory $(current_kib) KiB, want 524288"

"$BM" -c "$BM_URI" set "$dom" 256M >"$work/out" 2>"$work/err" && bm_fail "set on a shut-off domain without --config worked"
grep -qxF "balloonmgr: set: '$dom': domain is not running (--config or --current sets the balloon of its next boot)" "$work/err" ||
    bm_fail "set on a shut-off domain: $(cat "$work/err")"
[ "$(current_kib)" = 524288 ] || bm_fail "a refused set changed currentMemory"
bm_pass "set DOMAIN SIZE on a shut-off domain: refused as virsh setmem's default, nothing changed"

"$BM" -c "$BM_URI" set "$dom" 256M --config >"$work/out" 2>"$work/err" ||
    bm_fail "set --config: $(cat "$work/err")"
[ "$(current_kib)" = 262144 ] || bm_fail "set --config 256M: currentMemory $(current_kib) KiB, want 262144"
grep -qxF "$dom: next boot's balloon (<currentMemory>) from 512 MiB to 256 MiB" "$work/out" ||
    bm_fail "set --config printed: $(cat "$work/out")"
bm_pass "set --config 256M: virsh dumpxml --inactive shows currentMemory 262144 KiB"

"$BM" -c "$BM_URI" set "$uuid" +128M --current --json >"$work/out" 2>"$work/err" ||
    bm_fail "set UUID +128M --current: $(cat "$work/err")"
[ "$(current_kib)" = 393216 ] || bm_fail "set --current +128M: currentMemory $(current_kib) KiB, want 393216"
jq -e --arg d "$dom" '.domain == $d and .config and (.live | not) and .from_bytes == 268435456 and .target_bytes == 402653184' "$work/out" >/dev/null ||
    bm_fail "set --current --json: $(cat "$work/out")"
bm_pass "set UUID +128M --current on a shut-off domain: its definition, from its currentMemory (384 MiB now)"

for args in "--live|1|domain is not running" "--current --config|2|options --current and --config are mutually exclusive" \
            "--config --wait|2|--wait with --config"; do
    IFS='|' read -r opts want msg <<<"$args"
    # shellcheck disable=SC2086
    rc=0
    "$BM" -c "$BM_URI" set "$dom" 200M $opts >"$work/out" 2>"$work/err" || rc=$?
    [ "$rc" -eq "$want" ] && grep -qF -- "$msg" "$work/err" && [ "$(wc -l <"$work/err")" -eq 1 ] ||
        bm_fail "set $opts: exit $rc, want $want with '$msg': $(cat "$work/err")"
    [ "$(current_kib)" = 393216 ] || bm_fail "set $opts changed currentMemory"
done
bm_pass "refused as virsh refuses: --live on a shut-off domain (1), --current with --config (2); --wait with --config (2); nothing changed"
