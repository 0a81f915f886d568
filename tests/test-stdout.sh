#!/usr/bin/env bash
# What a verb prints must reach stdout (coreutils' close_stdout): with stdout on /dev/full
# every verb that prints exits non-zero and says "write error on standard output"; on a pipe
# it prints in full and exits 0.
# Usage: test-stdout.sh BALLOONMGR SOURCE_ROOT   (TAP output)
set -u
BM=$1
ROOT=$2
. "$ROOT/tests/tap.sh"
[ -w /dev/full ] || tap_skip_all "no /dev/full"
DEMO="test://$ROOT/demo/host.xml"
T=$(mktemp -d)
export BALLOONMGR_RUNTIME_DIR=$T/run
mkdir -p "$T/run"
trap 'rm -rf "$T"' EXIT

RUN=(run --once --dry-run --json --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc"
     --state "$T/state.json")
cases=(
    "status"
    "status --json"
    "status web1"
    "list"
    "list --all"
    "set web1 3G --json"
    "verify --json"
    "policy check $ROOT/demo/demo.policy"
    "--help"
    "-V"
    "status --help"
    "run --help"
    "agent --help"
)
for c in "${cases[@]}" "RUN"; do
    if [ "$c" = RUN ]; then args=("${RUN[@]}"); else read -ra args <<<"$c"; fi
    "$BM" -c "$DEMO" "${args[@]}" >"$T/out" 2>"$T/err"
    st=$?
    [ "$st" -eq 0 ] && [ -s "$T/out" ]
    ok_files $? "balloonmgr ${args[*]}: prints and exits 0 on a file (got $st)" "$T/err"
    "$BM" -c "$DEMO" "${args[@]}" >/dev/full 2>"$T/err"
    st=$?
    [ "$st" -eq 1 ]; ok $? "  on /dev/full: exit 1 (got $st)"
    grep -q '^balloonmgr: write error on standard output' "$T/err"
    ok_files $? "  and says so" "$T/err"
done

# Issue 31: a pass that acted records what it did when its output pipe closes (| head -c1):
# no SIGPIPE before the wait, the state save and the textfile; the write error is reported
# and the exit status is 1. The pipe's reader is closed before balloonmgr starts (python3
# restores SIGPIPE's default action in the child); prints "rc=N" or "signal=N".
closed_pipe() {
    python3 -c '
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
st = subprocess.call(sys.argv[1:], stdout=w)
print("signal=%d" % -st if st < 0 else "rc=%d" % st)' "$@"
}
for fmt in --json --table ""; do
    rm -f "$T/acted.json" "$T/prom/"*
    mkdir -p "$T/prom"
    st=$(closed_pipe "$BM" -c "$DEMO" run --once $fmt --policy "$ROOT/demo/demo.policy" \
        --proc "$ROOT/demo/proc" --state "$T/acted.json" --textfile "$T/prom" 2>"$T/err")
    [ "$st" = rc=1 ]; ok_files $? "run --once ${fmt:-(summary)} | (closed): exit 1, not killed by SIGPIPE (got $st)" "$T/err"
    [ -s "$T/acted.json" ] && jq -e '.counters.target_changes.inflate >= 1' "$T/acted.json" >/dev/null
    ok $? "  the pass's changes are in the state file"
    [ -s "$T/prom/balloonmgr.prom" ]; ok $? "  and the textfile is written" "$(ls "$T/prom")"
    grep -q '^balloonmgr: write error on standard output: Broken pipe' "$T/err"; ok $? "  the write error is reported"
done
tap_done
