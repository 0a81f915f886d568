#!/bin/bash
# test-stack SUITE [TEST... | !TEST...]: integration tests on another Debian release's QEMU,
# libvirt and guest kernel, with systemd as PID 1. !TEST: the default list without TEST (meson
# runs it as two tests: the guest tests beside the host's lane, test-pressure alone).
#
# Boots SUITE's root file system (lib/container.sh; trixie: QEMU 10.0, libvirt 11.3), builds
# this tree there with meson against SUITE's libraries, and runs the given integration tests
# (default: status, set --wait, verify, configure, run, agent, test-fixture-stop, reporting,
# autodeflate, hotcache, starve, virtio-mem, and a
# short pressure run: test-pressure's agent run alone, BM_PRESSURE_MODES=agent) inside it
# with `meson test`, against the libvirtd its systemd started and guests booting SUITE's kernel
# (build-guest.sh BM_KERNEL_SUITE=SUITE, built here and bound in). Each test's own PASS lines
# and its result are printed; the test fails when one of them fails.
# Root only (77 otherwise).
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
. "$(dirname "$0")/lib/container.sh"

bm_ct_lane stack "${1:-trixie}"
shift || true
# (test-fixture-stop: the fixture guests the first ones share stopped before the others run)
# (test-virtio-mem: not its huge-page twin by default: it needs the host's huge pages, which
# are one pool for every guest of the host, so it runs where nothing runs beside it,
# test-stack-trixie-pressure, named; the container's /proc/sys is read-only, so the pages are
# reserved here, on the host, and the test is told: BM_HUGEPAGES_RESERVED=1)
all=(test-status test-set-wait test-verify test-configure test-run test-agent test-fixture-stop
     test-reporting test-autodeflate test-hotcache test-starve test-virtio-mem test-pressure)
tests=() without=" "
for a in "$@"; do
    case $a in
        '!'*) without+="${a#!} " ;;
        *) tests+=("$a") ;;
    esac
done
if [ ${#tests[@]} -eq 0 ]; then
    for a in "${all[@]}"; do
        case $without in *" $a "*) ;; *) tests+=("$a") ;; esac
    done
fi
[ ${#tests[@]} -gt 0 ] || bm_fail "no test left to run (arguments: $*)"
suite=$BM_CT_SUITE work=$BM_CT_WORK
src=${BM_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
ct() { bm_ct_exec "$@"; }

t_all=$(bm_now)
root=$(bm_ct_root "$suite")
bm_ct_guest_kernel
gdir=$BM_CT_GDIR kver=$BM_CT_KVER
# the guest directory at the path the tests use; its files are the host's (the tests' disk
# images are made there, and libvirt labels the kernel for the QEMU user while a guest runs)
# (and the extracted kernel tree it names in modules-dir, read-only, where it is on the host:
# build-guest.sh's stamp check wants it)
mdir=$(cat "$gdir/modules-dir")
bm_ct_boot "$BM_CT_NAME" "$root" "$work/ct" --bind="$gdir:/var/lib/libvirt/images/balloonmgr-test" \
    --bind-ro="$mdir:$mdir"
# Debian's prometheus packages start their services at boot: the tests start their own
ct systemctl disable --now prometheus.service prometheus-pushgateway.service >/dev/null 2>&1 || true
bm_ct_copy_source "$src"
t0=$(bm_now)
ct bash -c 'meson setup /bm/build /bm/src -Dfuzz=false && nice -n 10 ninja -C /bm/build' >"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log"; bm_fail "the build against $suite's libraries failed"; }
bm_log "built in $suite in $(bm_elapsed "$t0") s (libvirt $(ct dpkg-query -W -f '${Version}' libvirt-dev), QEMU $(ct dpkg-query -W -f '${Version}' qemu-system-x86), guest kernel $kver)"

# the huge-page test's pages (its guest's 256 + 512 MiB and 16 more), reserved on the host for
# the container's run and given back after it
hp_reserved=0
case " ${tests[*]} " in
    *" test-virtio-mem-hugepages "*)
        hp_before=$(cat /proc/sys/vm/nr_hugepages)
        bm_add_cleanup "echo $hp_before >/proc/sys/vm/nr_hugepages"
        echo $((hp_before + 400)) >/proc/sys/vm/nr_hugepages
        hp_free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
        [ "$hp_free" -ge 400 ] || bm_fail "could reserve $hp_free of 400 huge pages for the container's test"
        bm_log "huge pages for the container's test-virtio-mem-hugepages: $hp_before -> $((hp_before + 400)), $hp_free free"
        hp_reserved=1 ;;
esac

# build-guest.sh in the container finds the image up to date (same script, kernel, workload):
# the package is named so that it asks no apt (the container has no network)
status=0
# (the host's timeout multiplier too: the guards in the tests scale with it, as on the host)
mult=${BM_TIMEOUT_MULTIPLIER:-3}
ct env BM_KERNEL_PKG="linux-image-$kver" BM_PRESSURE_MODES=agent BM_HUGEPAGES_RESERVED=$hp_reserved \
    BM_TIMEOUT_MULTIPLIER="$mult" meson test -C /bm/build --print-errorlogs \
    --timeout-multiplier "$mult" --num-processes 1 "${tests[@]}" >"$work/meson-test.log" 2>&1 || status=1
grep -E '^(PASS|FAIL|SKIP): ' "$work/ct/shared/build/meson-logs/testlog.txt" || true
grep -E '^ *[0-9]+/[0-9]+ ' "$work/meson-test.log" || cat "$work/meson-test.log"
# on failure: meson's error logs of the failed tests (--print-errorlogs), not only the last test's
[ "$status" -eq 0 ] || { sed -n '/^=\{10,\} [0-9]*\/[0-9]* =\{10,\}$/,$p' "$work/meson-test.log" | tail -200
                         bm_fail "integration tests on $suite failed"; }
bm_pass "${#tests[@]} integration tests on $suite (QEMU $(ct dpkg-query -W -f '${Version}' qemu-system-x86), libvirt $(ct dpkg-query -W -f '${Version}' libvirt-daemon), kernel $kver) in $(bm_elapsed "$t_all") s"
