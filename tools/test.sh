#!/usr/bin/env bash
# README command 2: install what is missing, build, and run every test: the unit tests (also
# under AddressSanitizer + UBSan) and the integration tests (real libvirtd, QEMU TCG guests;
# they need root). Ends with one line "N passed, N failed, N skipped"; exits 1 if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh test

[ -d build ] || meson setup build >/dev/null
ninja -C build
[ -d build-asan ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
ninja -C build-asan

status=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
meson test -C build --suite unit --print-errorlogs --logbase unit || status=1
meson test -C build-asan --suite unit --print-errorlogs --logbase unit || status=1
# Integration tests start libvirtd/virtlogd themselves when run alone; here they are started
# once for all of them (in a subshell, so lib.sh's settings stay out of this shell) and only
# what was started is stopped.
if [ "$(id -u)" -eq 0 ]; then
    (. tests/integration/lib/lib.sh && bm_start_daemons)
    trap '(. tests/integration/lib/lib.sh && bm_stop_daemons)' EXIT
fi
meson test -C build --suite integration --print-errorlogs --logbase integration || status=1
# the libFuzzer targets (fuzz/) build with clang and run 5 s each on their corpus, so that
# they cannot rot: bench/fuzz builds build-fuzz/ and exits 1 on a finding or a failed build
bench/fuzz 5 || { echo "test: bench/fuzz failed (build-fuzz/fuzz-work/*.log)" >&2; status=1; }

# one summary line over the three runs (meson writes one JSON object per test)
cat build/meson-logs/unit.json build-asan/meson-logs/unit.json \
    build/meson-logs/integration.json | jq -rs '
    def n(s): map(select(.result == s)) | length;
    "\(n("OK") + n("EXPECTEDFAIL")) passed, \(n("FAIL") + n("ERROR") + n("TIMEOUT") + n("UNEXPECTEDPASS")) failed, \(n("SKIP")) skipped"'
exit $status
