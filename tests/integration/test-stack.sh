#!/bin/bash
# test-stack SUITE [TEST...]: integration tests on another Debian release's QEMU, libvirt and
# guest kernel, with systemd as PID 1.
#
# Boots SUITE's root file system (lib/container.sh; trixie: QEMU 10.0, libvirt 11.3), builds
# this tree there with meson against SUITE's libraries, and runs the given integration tests
# (default: status, set --wait, verify, configure, run, agent, reporting, autodeflate, and a
# short pressure run: test-pressure's agent run alone, BM_PRESSURE_MODES=agent) inside it
# with `meson test`, against the libvirtd its systemd started and guests booting SUITE's kernel
# (build-guest.sh BM_KERNEL_SUITE=SUITE, built here and bound in). Each test's own PASS lines
# and its result are printed; the test fails when one of them fails.
# Root only (77 otherwise).
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
. "$(dirname "$0")/lib/container.sh"

suite=${1:-trixie}
shift || true
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(test-status test-set-wait test-verify test-configure test-run
                                  test-agent test-reporting test-autodeflate test-pressure)
case "$suite" in
    bookworm) kernel_suite="" ;;
    trixie) kernel_suite=trixie ;;
    *) bm_fail "test-stack: suite '$suite': expected bookworm or trixie" ;;
esac
src=${BM_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
bm_require_root
for tool in mmdebstrap systemd-nspawn nsenter; do
    command -v "$tool" >/dev/null || bm_fail "'$tool' missing (tools/install-deps.sh test)"
done

name=bm-stack-$suite-$$
work=$(mktemp -d "/var/tmp/balloonmgr-stack-$suite.XXXXXX")
cleanup() {
    local rc=$?
    bm_ct_stop
    if [ "$rc" -eq 0 ] || [ "${BM_KEEP_WORKDIR:-0}" != 1 ]; then
        _bm_ct_rm "$work"
    else
        echo "kept $work" >&2
    fi
}
trap cleanup EXIT
ct() { bm_ct_exec "$@"; }

t_all=$(bm_now)
root=$(bm_ct_root "$suite")
gdir=/var/lib/libvirt/images/balloonmgr-test${kernel_suite:+-$kernel_suite}
BM_KERNEL_SUITE=$kernel_suite bash "$BM_LIB_DIR/build-guest.sh" "$gdir" >"$work/build-guest.log" 2>&1 ||
    { cat "$work/build-guest.log"; bm_fail "build-guest.sh ($suite kernel) failed"; }
kver=$(cat "$gdir/kernel-version")
# the guest directory at the path the tests use; its files are the host's (the tests' disk
# images are made there, and libvirt labels the kernel for the QEMU user while a guest runs)
# (and the extracted kernel tree it names in modules-dir, read-only, where it is on the host:
# build-guest.sh's stamp check wants it)
mdir=$(cat "$gdir/modules-dir")
bm_ct_boot "$name" "$root" "$work/ct" --bind="$gdir:/var/lib/libvirt/images/balloonmgr-test" \
    --bind-ro="$mdir:$mdir"
# Debian's prometheus packages start their services at boot: the tests start their own
ct systemctl disable --now prometheus.service prometheus-pushgateway.service >/dev/null 2>&1 || true
mkdir -p "$work/ct/shared/src"
(cd "$src" && git ls-files -z --cached --others --exclude-standard |
    tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -C "$work/ct/shared/src" -xf -
t0=$(bm_now)
ct bash -c 'meson setup /bm/build /bm/src -Dfuzz=false && ninja -C /bm/build' >"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log"; bm_fail "the build against $suite's libraries failed"; }
bm_log "built in $suite in $(bm_elapsed "$t0") s (libvirt $(ct dpkg-query -W -f '${Version}' libvirt-dev), QEMU $(ct dpkg-query -W -f '${Version}' qemu-system-x86), guest kernel $kver)"

# build-guest.sh in the container finds the image up to date (same script, kernel, workload):
# the package is named so that it asks no apt (the container has no network)
status=0
ct env BM_KERNEL_PKG="linux-image-$kver" BM_PRESSURE_MODES=agent meson test -C /bm/build --print-errorlogs \
    --num-processes 1 "${tests[@]}" >"$work/meson-test.log" 2>&1 || status=1
grep -E '^(PASS|FAIL|SKIP): ' "$work/ct/shared/build/meson-logs/testlog.txt" || true
grep -E '^ *[0-9]+/[0-9]+ ' "$work/meson-test.log" || cat "$work/meson-test.log"
[ "$status" -eq 0 ] || { tail -60 "$work/ct/shared/build/meson-logs/testlog.txt"; bm_fail "integration tests on $suite failed"; }
bm_pass "${#tests[@]} integration tests on $suite (QEMU $(ct dpkg-query -W -f '${Version}' qemu-system-x86), libvirt $(ct dpkg-query -W -f '${Version}' libvirt-daemon), kernel $kver) in $(bm_elapsed "$t_all") s"
