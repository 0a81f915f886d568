#!/usr/bin/env bash
# README command 2: install what is missing, build, and run the tests tier by tier (meson
# suites, see tests/meson.build): unit and cli in the normal build and under AddressSanitizer +
# UBSan, then slow (normal build), integration and pressure (real libvirtd, QEMU TCG guests,
# real host memory pressure; they need root; the host's lane and suite `beside` at once, then
# suite `alone`) and the fuzz targets.
#   tools/test.sh           every tier (about 35-40 minutes on two cores)
#   tools/test.sh --quick   unit + cli in both builds only (1-3 minutes, no root, no guests)
#   tools/test.sh --full    every tier, then the two suites the per-push run leaves out:
#                           exhaustive (about 1.5 minutes) and lab-bookworm (the lab on QEMU 7.2
#                           and Linux 6.1; the per-push run has it on QEMU 10.0 and 6.12)
# Ends with one line "N passed, N failed, N skipped" over every suite it ran; exits 1 if any
# failed.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0 full=0
case "${1:-}" in
--quick) quick=1 ;;
--full) full=1 ;;
"") ;;
*) echo "usage: tools/test.sh [--quick | --full]" >&2; exit 2 ;;
esac
tools/install-deps.sh test

[ -d build ] || meson setup build >/dev/null
ninja -C build
# -O0: the same tests take as long as at -O2 (process start-up is most of them), the build
# half as long (16 s instead of 35 here)
[ -d build-asan ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Doptimization=0 >/dev/null
ninja -C build-asan

status=0
logs=()
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# meson's timeouts (30 s by default, a test's own where it sets one) guard against a hang; they
# are no measure: scaled by BM_TEST_TIMEOUT_MULTIPLIER (default 3) so that a machine busy with
# other work (issue 50: a load of 8-14 on two cores failed test-state and test-completion on
# meson's 30 s) does not fail them, and 3 times that in the ASan lane (2-3 times slower).
timeout_mult=${BM_TEST_TIMEOUT_MULTIPLIER:-3}
# the scripts' own guards (tests/agent.sh's waits, lib.sh's bm_wait_until) scale with it
export BM_TIMEOUT_MULTIPLIER=$timeout_mult
# lane BUILD_DIR NAME SUITE...: one meson test run of those suites (!SUITE: without that one);
# its JSON log is summed at the end. --no-rebuild: both builds are complete (ninja above), and
# two lanes share build/ at once. lane_mult (default timeout_mult): its timeout multiplier
lane() {
    local dir=$1 name=$2 s args=()
    shift 2
    for s in "$@"; do
        case $s in '!'*) args+=(--no-suite "${s#!}") ;; *) args+=(--suite "$s") ;; esac
    done
    meson test -C "$dir" --no-rebuild "${args[@]}" --timeout-multiplier "${lane_mult:-$timeout_mult}" \
        --print-errorlogs --logbase "$name" || status=1
    logs+=("$dir/meson-logs/$name.json")
}
# lane_bg BUILD_DIR NAME SUITE...: lane() in the background, its console to a file;
# lane_join TITLE: waits for it, then shows its console under TITLE and sums its log
lane_bg() {
    bg_console=$1/meson-logs/$2-console.txt bg_log=$1/meson-logs/$2.json
    mkdir -p "$1/meson-logs"
    (lane "$@"; exit "$status") >"$bg_console" 2>&1 &
    bg_pid=$!
}
lane_join() {
    wait "$bg_pid" || status=1
    echo "--- $1:"
    cat "$bg_console"
    logs+=("$bg_log") # (lane's own, in the subshell, is lost)
}

# unit + cli in both builds, side by side: both lanes are CPU-bound (a process costs about
# 5 ms here, balloonmgr 45 ms and 150 ms under ASan), and one after the other each ends on
# one long test with a core idle. The ASan lane's console goes to a file, shown after the
# plain one's. Suite `once`: checks of the sources, the completion and the install layout
# (test-tiers, test-includes, test-rules, test-units, test-install, test-completion) that a
# sanitized build changes nothing in; the ASan lane leaves them out.
lane_mult=$((timeout_mult * 3)) lane_bg build-asan quick unit cli '!once'
lane build quick unit cli
lane_join "the ASan+UBSan lane (build-asan)"
if [ $quick -eq 0 ]; then
    lane build slow slow
    # Integration tests start libvirtd/virtlogd themselves when run alone; here they are started
    # once for all of them (in a subshell, so lib.sh's settings stay out of this shell) and only
    # what was started is stopped.
    if [ "$(id -u)" -eq 0 ]; then
        (. tests/integration/lib/lib.sh && bm_start_daemons)
        trap '(. tests/integration/lib/lib.sh && bm_stop_daemons)' EXIT
    fi
    # Two lanes at once, both mostly waiting on guests (a core or more idle in each): the
    # host's (its libvirtd: the integration tests, the lab, then the fuzz targets) and, in the
    # background, suite `beside` (the containers with their own libvirtd and guests, the
    # package, the state file under SIGKILL). Then suite `alone`, nothing beside it: real
    # host memory pressure. The background lane's console goes to a file, shown after.
    lane_bg build beside beside
    lane build integration integration pressure '!beside' '!alone'
    # the libFuzzer targets (fuzz/) build with clang and run 3 s each on their corpus, so that
    # they cannot rot: bench/fuzz builds build-fuzz/ and exits 1 on a finding or a failed build
    nice -n 10 bench/fuzz 3 || { echo "test: bench/fuzz failed (build-fuzz/fuzz-work/*.log)" >&2; status=1; }
    lane_join "the lane beside it (suite beside)"
    lane build alone alone
    [ $full -eq 0 ] || lane build full exhaustive lab-bookworm
fi

# one summary line over the lanes (meson writes one JSON object per test)
cat "${logs[@]}" | jq -rs '
    def n(s): map(select(.result == s)) | length;
    "\(n("OK") + n("EXPECTEDFAIL")) passed, \(n("FAIL") + n("ERROR") + n("TIMEOUT") + n("UNEXPECTEDPASS")) failed, \(n("SKIP")) skipped"'
exit $status
