#!/usr/bin/env bash
# The timings the unit tests measure but do not assert (issue 50: no wall-clock bound decides a
# test): the state file's largest load (16,384 domains) and a 62 MiB file of readings refused on
# its text, the spool's ingest of 20 changes beside 30,000 junk files, and bcrypt's CPU time
# for a wrong password and an unknown user. Runs the unit test binaries of an optimised build
# with BM_TEST_TIMING=1 and prints their "# timing:" lines; RUNS rounds (default 3).
# Usage: bench/unit-timings.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
[ -d build-bench ] || meson setup build-bench --buildtype=release -Db_ndebug=true >/dev/null
ninja -C build-bench tests/test-state tests/test-spool tests/test-basic-auth >/dev/null
echo "## unit timings — $(date -u +%Y-%m-%d), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for t in test-state test-spool test-basic-auth; do
    for r in $(seq "$runs"); do
        BM_TEST_TIMING=1 "build-bench/tests/$t" | sed -n "s/^# timing: /$t (run $r): /p"
    done
done
