#!/usr/bin/env bash
# run --once on two real guests: with a policy under which the real host counts as under
# pressure (and again through a fake /proc), it inflates the idle guest, keeps the other at
# its floor, and the QEMU processes' RSS falls; --dry-run changes nothing; a bad policy
# exits 2 and changes nothing. Only this test's domains are managed (exclude by glob).
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
bm_setup

# fixture guests: idle touched 400 MiB (and touches it again after each inflate and deflate),
# floor 100 MiB
bm_fixture_guest touched light
idle=${BM_DOMS[0]} floor=${BM_DOMS[1]}
work=$BM_WORKDIR # kept if the test fails; $work/run is BALLOONMGR_RUNTIME_DIR (bm_setup)

# wait for fresh guest stats of both, and for the idle guest's to show the 400 MiB it touched
# freed again: statistics taken during the touch make it a guest short of memory, which the
# policy rightly does not inflate
bm_wait_fresh_stats "$idle" "$floor"
idle_settled() { "$BM" -c "$BM_URI" status --json "$idle" | jq -e '.domains[0].usable_bytes >= 256 * 1048576' >/dev/null; }
BM_WAIT_INTERVAL=1 bm_wait_until 60 "statistics of $idle after its touch" idle_settled ||
    bm_fail "$idle: usable memory stayed below 256 MiB after the touch was freed"

bm_pressure_policy "$work/pressure.policy" "" 50%
printf '[domain "%s"]\nfloor = 90%%\n' "$floor" >>"$work/pressure.policy"
"$BM" policy check "$work/pressure.policy" >/dev/null || bm_fail "test policy does not pass policy check"

actual() { "$BM" -c "$BM_URI" status --json "$1" | jq '.domains[0].current_bytes'; }
rss_total() { echo $(( $(bm_rss_kib "$(bm_qemu_pid "$idle")") + $(bm_rss_kib "$(bm_qemu_pid "$floor")") )); }
# the decisions of this test's two domains
# shellcheck disable=SC2016  # jq's variables
mine='select(.name == $i or .name == $f)'

# --- dry run: a plan, no change
before_idle=$(actual "$idle") before_floor=$(actual "$floor")
"$BM" -c "$BM_URI" run --once --dry-run --json --policy "$work/pressure.policy" --state "$work/state.json" >"$work/dry.json" ||
    bm_fail "dry run failed"
jq -c --arg i "$idle" --arg f "$floor" '.host, (.decisions[] | '"$mine"' | {name, action, current_bytes, target_bytes, floor_bytes, reason})' "$work/dry.json"
jq -e --arg d "$idle" '.host.mode == "reclaim" and (.decisions[] | select(.name == $d) | .action == "inflate")' "$work/dry.json" >/dev/null ||
    bm_fail "dry run: the idle guest is not planned to inflate"
sleep 2
[ "$(actual "$idle")" = "$before_idle" ] && [ "$(actual "$floor")" = "$before_floor" ] ||
    bm_fail "--dry-run changed a balloon"
[ ! -e "$work/state.json" ] || bm_fail "--dry-run wrote the state file"
bm_pass "run --once --dry-run: plan printed, nothing changed"

# --- the timer's default (timer_inflate = deflate-on-oom): these guests cannot deflate
# themselves, so a pass that nothing follows for a minute leaves them alone, saying why
bm_pressure_policy "$work/default-timer.policy" "" 50% -
"$BM" -c "$BM_URI" run --once --dry-run --json --policy "$work/default-timer.policy" --state "$work/state.json" >"$work/dt.json" ||
    bm_fail "run --once --dry-run (timer_inflate default) failed"
jq -e --arg d "$idle" '.decisions[] | select(.name == $d) | .action == "none" and
        (.reason | contains("cannot deflate itself (no deflate-on-oom)"))' "$work/dt.json" >/dev/null ||
    bm_fail "timer_inflate default: the idle guest without deflate-on-oom was planned to change: $(jq -c --arg d "$idle" '.decisions[] | select(.name == $d)' "$work/dt.json")"
bm_pass "run --once leaves a guest without deflate-on-oom alone by default (timer_inflate), with the reason"

# --- a bad policy: exit 2, nothing changed
printf '[guest]\nfloor = 12X\n' >"$work/bad.policy"
set +e
"$BM" -c "$BM_URI" run --once --policy "$work/bad.policy" --state "$work/state.json" >/dev/null 2>"$work/err"; rc=$?
set -e
[ "$rc" -eq 2 ] || bm_fail "bad policy: exit $rc, want 2"
grep -q "bad.policy:2:9: floor: '12X': unknown unit 'X'" "$work/err" || bm_fail "bad policy: no file:line:col error"
sleep 1
[ "$(actual "$idle")" = "$before_idle" ] || bm_fail "bad policy changed a balloon"
bm_pass "run --once with a bad policy exits 2 and changes nothing"

# --- the real pass (real /proc)
rss_before=$(rss_total)
# stderr as the journal's stream (systemd's JOURNAL_STREAM): lines carry their priority (with
# no journald socket to send records to: where one listens it is hidden in a mount namespace;
# the records themselves are tests/test-journal.sh's)
: >"$work/run.err"
hide_journal=()
[ -S /run/systemd/journal/socket ] &&
    hide_journal=(unshare -m --propagation private sh -c 'mount -t tmpfs bm-hide /run/systemd/journal && exec "$@"' sh)
JOURNAL_STREAM=$(stat -c '%d:%i' "$work/run.err") \
    "${hide_journal[@]}" "$BM" -c "$BM_URI" run --once --json --policy "$work/pressure.policy" --state "$work/state.json" >"$work/run.json" 2>>"$work/run.err" ||
    { cat "$work/run.err" >&2; bm_fail "run --once failed"; }
jq -c --arg i "$idle" --arg f "$floor" '.decisions[] | '"$mine"' | {name, action, current_bytes, target_bytes, floor_bytes, applied}' "$work/run.json"
target_idle=$(jq --arg d "$idle" '.decisions[] | select(.name == $d) | .target_bytes' "$work/run.json")
floor_bytes=$(jq --arg d "$floor" '.decisions[] | select(.name == $d) | .floor_bytes' "$work/run.json")
jq -e --arg d "$idle" '.decisions[] | select(.name == $d) | .action == "inflate" and .applied' "$work/run.json" >/dev/null ||
    bm_fail "the idle guest was not inflated"
[ "$target_idle" -lt "$before_idle" ] || bm_fail "idle target not below current"
[ "$floor_bytes" -eq $((512 * 1024 * 1024 * 9 / 10)) ] || bm_fail "floor guest's floor is $floor_bytes, want 90%"
jq -e --arg d "$floor" '.decisions[] | select(.name == $d) | .target_bytes >= .floor_bytes' "$work/run.json" >/dev/null ||
    bm_fail "floor guest targeted below its floor"
jq -e --arg i "$idle" --arg f "$floor" '[.decisions[] | select(.name != $i and .name != $f) | .action] | all(. == "skip")' "$work/run.json" >/dev/null ||
    bm_fail "a domain outside the test was touched"
jq -e '.version == 1 and .host_mode == "reclaim"' "$work/state.json" >/dev/null || bm_fail "state file not written"

near_target() { [ "$(actual "$idle")" -le $((target_idle + 1048576)) ]; }
bm_wait_until 10 "$idle near its target" near_target || bm_fail "idle guest did not reach its target"
[ "$(actual "$floor")" -ge "$floor_bytes" ] || bm_fail "floor guest went below its floor"
inflated=$(( (before_idle - $(actual "$idle")) / 1024 ))
# QEMU frees the pages as the guest hands them over: waited for, not a second's sleep
rss_fell() { rss_after=$(rss_total); [ $((rss_before - rss_after)) -ge $((inflated * 7 / 10)) ]; }
bm_wait_until 30 "both QEMUs' RSS to fall by 70% of the inflate" rss_fell ||
    bm_fail "QEMU RSS did not fall by most of the inflated memory ($((rss_before / 1024)) -> $((rss_after / 1024)) MiB)"
echo "RSS of both QEMUs: $((rss_before / 1024)) -> $((rss_after / 1024)) MiB; idle guest inflated $((inflated / 1024)) MiB"
# one structured record per change, with the numbers of the change, and one of the mode
cat "$work/run.err"
n_applied=$(jq '[.decisions[] | select(.applied)] | length' "$work/run.json")
n_records=$(grep -c "^<[45]>balloonmgr: change domain=" "$work/run.err" || true)
[ "$n_records" -eq "$n_applied" ] || bm_fail "$n_records change records for $n_applied changes"
grep -Eq "^<5>balloonmgr: change domain='$idle' direction=inflate from_bytes=$before_idle target_bytes=$target_idle reached_bytes=[0-9]+ outcome=reached duration_s=[0-9]+\.[0-9]{3} why=[a-z-]+ uuid=[0-9a-f-]{36}$" "$work/run.err" ||
    bm_fail "no <5> change record of the idle guest's inflate from $before_idle to $target_idle"
[ "$(grep -c '^<5>balloonmgr: mode from=hold to=reclaim ' "$work/run.err")" -eq 1 ] || bm_fail "no single <5> mode record hold -> reclaim"
! grep -q '^<[0-4]>' "$work/run.err" || bm_fail "a pass without problems logged at warning or worse"
bm_pass "run --once: $n_records <5> change record(s) for $n_applied change(s), one <5> mode record"
bm_pass "run --once (real /proc): idle guest inflated $((inflated / 1024)) MiB, floor kept, QEMU RSS fell $(((rss_before - rss_after) / 1024)) MiB"

# --- the same through a fake /proc: a 24 GiB host with 1 GiB available
mkdir -p "$work/proc/pressure"
printf 'MemTotal: 25165824 kB\nMemFree: 524288 kB\nMemAvailable: 1048576 kB\n' >"$work/proc/meminfo"
printf 'some avg10=20.00 avg60=10.00 avg300=5.00 total=1\nfull avg10=5.00 avg60=2.00 avg300=1.00 total=1\n' >"$work/proc/pressure/memory"
cat >"$work/fake.policy" <<POL
[guest]
exclude = yes
[domain "$idle"]
exclude = no
timer_inflate = always
[domain "$floor"]
exclude = no
timer_inflate = always
floor = 90%
POL
# the idle guest back at its maximum (the pass above took all it could give), settled; first
# the guest has seen its balloon inflated (once a second), else it would not touch again
bm_wait_until 10 "$idle to see its balloon inflated" bm_console_has "$idle" "bm: retouch: balloon inflated" ||
    bm_fail "$idle did not see its balloon inflated"
"$BM" -c "$BM_URI" set "$idle" 512M --wait=60 >/dev/null || bm_fail "set $idle 512M failed"
# memory a deflate gives back is not backed by the host until the guest touches it again (an
# inflate of it would return nothing, and balloonmgr knows it): the guest touches it again
bm_wait_until 60 "$idle to touch its memory again" bm_console_has "$idle" "bm: retouched" || bm_fail "$idle did not touch its memory again"
bm_wait_until 60 "$idle to settle" idle_settled || bm_fail "$idle did not settle after its deflate"
# and until a pass under the fake /proc would inflate it
bm_wait_would_inflate "$idle" --policy "$work/fake.policy" --proc "$work/proc"
before_idle=$(actual "$idle")
# stderr on a terminal (a pty from script(1)), stdout to the file: progress while it waits
script -qec "$(printf '%q ' "$BM" -c "$BM_URI" run --once --json --policy "$work/fake.policy" --proc "$work/proc" --state "$work/fake-state.json") >$(printf '%q' "$work/fake.json")" "$work/pty.out" >/dev/null ||
    { cat -v "$work/pty.out"; bm_fail "run --once with fake /proc failed"; }
cat -v "$work/pty.out"
grep -aqE $'\r'"$idle: inflate [0-9.]+ MiB -> [0-9.]+ MiB: at [0-9.]+ [KM]iB(, [0-9.]+ [KMG]?i?B/s, ETA [0-9.]+ s)?"$'\e\\[K' "$work/pty.out" ||
    bm_fail "run --once on a terminal: no progress line while waiting for the change"
grep -aqE $'\r\e\\[K'"balloonmgr: change domain='$idle' " "$work/pty.out" ||
    bm_fail "run --once on a terminal: the progress line was not erased before the change record"
bm_pass "run --once on a terminal: progress while waiting, erased before the record"
jq -c '.host' "$work/fake.json"
jq -e --arg d "$idle" '.host.mode == "reclaim" and .host.mem_available_bytes == 1073741824 and
    (.decisions[] | select(.name == $d) | .action == "inflate" and .applied)' "$work/fake.json" >/dev/null ||
    bm_fail "fake /proc under pressure: idle guest not inflated"
jq -e --arg d "$floor" '.decisions[] | select(.name == $d) | .target_bytes >= .floor_bytes' "$work/fake.json" >/dev/null ||
    bm_fail "fake /proc: floor broken"
bm_pass "run --once with a fake /proc under pressure inflates the idle guest again, floor kept"
