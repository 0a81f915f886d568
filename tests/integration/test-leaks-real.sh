#!/usr/bin/env bash
# tests/test-leaks.sh against a real libvirtd and a real guest (issue #8 item 2): status and
# verify through the QEMU monitor, set --wait, run --once and the agent applying and tracking
# real inflates under a policy that puts the real host under pressure, scrapes, reloads and
# SIGTERM, each under valgrind: no definite or indirect leak, no memory error.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
ROOT=${BM_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
bm_setup
command -v valgrind >/dev/null || bm_skip "valgrind is not installed (tools/install-deps.sh test)"

work=$BM_WORKDIR # kept if the test fails; $work/run is BALLOONMGR_RUNTIME_DIR (bm_setup)
bm_fixture_guest touched
dom=$BM_DOM
bm_wait_fresh_stats "$dom"
bm_pressure_policy "$work/pressure.policy" 2s 25%
before=$(bm_memstat "$dom" actual)
t0=$(bm_now)
set +e
BM_LEAK_URI=$BM_URI BM_LEAK_DOMAIN=$dom BM_LEAK_WRITE=1 BM_LEAK_POLICY=$work/pressure.policy \
    BM_LEAK_PROC=/proc "$ROOT/tests/test-leaks.sh" "$BM" "$ROOT" none | tee "$work/tap"
rc=${PIPESTATUS[0]}
set -e
after=$(bm_memstat "$dom" actual)
bm_log "balloon of $dom: $((before / 1024)) MiB before, $((after / 1024)) MiB after the runs"
[ "$rc" -eq 0 ] || bm_fail "test-leaks.sh on $BM_URI: $(grep -c '^not ok' "$work/tap") failed"
grep -q '^ok .* valgrind: run --once: ' "$work/tap" || bm_fail "test-leaks.sh ran no valgrind run --once"
[ "$after" -lt "$before" ] || bm_fail "no balloon change was made under valgrind (the apply paths were not run)"
bm_pass "valgrind on a real libvirtd: $(grep -c '^ok' "$work/tap") checks, no leak, no memory error, in $(bm_elapsed "$t0") s"
