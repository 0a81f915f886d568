#!/usr/bin/env bash
# Issue 23, an administrator's habits, on libvirt's test driver: a pass whose textfile
# directory is missing still acts (textfile), options before or after the verb and one-line
# option errors (options), domains by name, ID or UUID (domains), set --live/--config/--current
# (set-flags), sizes that cannot be misread (sizes), output for scripts (raw), the listen
# addresses of an exporter (listen). The journal's fields are tests/test-journal.sh; the
# Debian paths are tests/integration/test-deb.sh.
# Usage: test-admin.sh BALLOONMGR SOURCE_ROOT   (TAP output)
set -u
BM=$1
ROOT=$2
. "$ROOT/tests/tap.sh"
DEMO="test://$ROOT/demo/host.xml"
export BALLOONMGR_RUNTIME_DIR=$(mktemp -d)
T=$(mktemp -d)
out=$T/out err=$T/err
trap 'rm -rf "$T" "$BALLOONMGR_RUNTIME_DIR"' EXIT
PASS=(--policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc")

# run_bm ARGS...: runs balloonmgr with stdout in $out and stderr in $err; sets rc
run_bm() { "$BM" "$@" </dev/null >"$out" 2>"$err"; rc=$?; }
# one_line: stderr is one line (the records of balloon and mode changes are not messages)
one_line() { [ "$(grep -cv '^balloonmgr: \(change\|mode\) ' "$err")" -eq 1 ]; }

# --- textfile: a pass whose textfile directory is missing acts, saves, then reports (exit 1)
run_bm -c "$DEMO" run --once --json "${PASS[@]}" --state "$T/s.json" --textfile "$T/missing"
[ "$rc" -eq 1 ]; ok $? "textfile: run --once --textfile MISSING exits 1 (got $rc)" "$(cat "$err")"
jq -e '[.decisions[] | select(.action == "inflate") | .applied] == [true, true, true]' "$out" >/dev/null
ok $? "textfile:   the pass applied its three inflates first" "$(head -c 2000 "$out")"
grep -c '^balloonmgr: change domain=' "$err" | grep -qx 3; ok $? "textfile:   three change records"
grep -qxF "balloonmgr: run: --textfile '$T/missing': No such file or directory; the pass acted, its metrics are not exported (counted in balloonmgr_errors_total{kind=\"push\"})" "$err"
ok $? "textfile:   then one line names the directory and says the pass acted" "$(cat "$err")"
jq -e '.counters.errors.push == 1 and (.domains | length) == 5' "$T/s.json" >/dev/null
ok $? "textfile:   the state is saved with the failed export counted"
run_bm -c "$DEMO" run --once "${PASS[@]}" --state "$T/s2.json" --textfile ''
[ "$rc" -eq 2 ] && [ ! -e "$T/s2.json" ]; ok $? "textfile: --textfile '' is still refused before the pass (exit 2, got $rc)"
mkdir "$T/tf"
run_bm -c "$DEMO" run --once "${PASS[@]}" --state "$T/s3.json" --textfile "$T/tf"
[ "$rc" -eq 0 ] && grep -q '^balloonmgr_passes_total ' "$T/tf/balloonmgr.prom"
ok $? "textfile: an existing directory gets balloonmgr.prom (exit $rc)"

tap_done
