#!/usr/bin/env bash
# set --wait on a real guest: the inflate's reported duration lies between what two
# independent clocks say of the same events (our own query-balloon polling over the QEMU
# monitor, and QEMU's BALLOON_CHANGE event timestamps; an ordering, no wall-clock bound: how
# close it comes is bench/run.sh's), the host gets the memory back (QEMU RSS falls by >= 80% of
# what was inflated), and deflating back works. A target below the floor (2048 KiB) is refused, exit 2,
# and the balloon stays; with --force it is taken.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
WATCH=${BALLOON_WATCH:?set BALLOON_WATCH to the balloon-watch helper}
bm_setup

MEM_MIB=512
# a fixture guest (512 MiB, 400 MiB touched, touched again after each inflate and deflate)
bm_fixture_guest touched
dom=$BM_DOM
pid=$(bm_qemu_pid "$dom")
# no settling time: the guest's touch ends before it says it is ready, and a fixture guest is
# handed over once it has touched its memory again after its last deflate

# measure_set SIZE TARGET_KIB: runs `balloonmgr set --wait --json` under balloon-watch and
# checks the reported duration against both independent clocks. Leaves JSON in $result.
# The duration D (set -> the reading that saw the target) must lie between:
#   at most  the command's exit - its launch (the shell's clock): set after the launch, the
#            reading before the exit;
#   at least the latest the target can have been reached after (QEMU's timestamp of the event
#            at the target, and the start of balloon-watch's last query that saw it not yet
#            reached) - the end of balloon-watch's first query that saw a change (the target
#            was set before it), less half of the reading's own call (reading_s: the value
#            was read somewhere inside it, D ends at its middle).
# (The numbers are printed with microseconds: 10 us of rounding allowed, no more.)
measure_set() {
    local size=$1 target_kib=$2 watch_out watch_err
    watch_out=$BM_WORKDIR/watch.out watch_err=$BM_WORKDIR/watch.err
    "$WATCH" "$BM_URI" "$dom" "$target_kib" 120 >"$watch_out" 2>"$watch_err" &
    local wpid=$!
    bm_wait_until 10 "balloon-watch to start" grep -q watching "$watch_err" ||
        bm_fail "balloon-watch did not start: $(cat "$watch_err")"

    local t_launch t_exit
    t_launch=$(bm_now)
    result=$("$BM" -c "$BM_URI" set "$dom" "$size" --wait --json) || bm_fail "set $size --wait failed"
    t_exit=$(bm_now)
    wait "$wpid" || bm_fail "balloon-watch did not see the target reached: $(cat "$watch_out" "$watch_err")"
    local watch
    watch=$(cat "$watch_out")
    rm -f "$watch_out" "$watch_err"
    echo "balloonmgr: $(echo "$result" | jq -c .)"
    echo "watch:      $watch"

    echo "$result" | jq -e --argjson t $((target_kib * 1024)) '.outcome == "reached" and .target_bytes == $t' >/dev/null ||
        bm_fail "set $size: outcome/target wrong"
    # the bounds, and (printed only) how far balloonmgr's end is from the poller's and QEMU's
    local bounds
    bounds=$(jq -n --argjson r "$result" --argjson w "$watch" --argjson launch "$t_launch" \
        --argjson exit "$t_exit" '
        ([$w.last_unreached_from, (if $w.event_reached_at > 0 then $w.event_reached_at else 0 end)]
         | max) as $reached_after
      | {duration_ms: ($r.duration_s * 1000), at_most_ms: (($exit - $launch) * 1000),
         at_least_ms: (($reached_after - $w.first_change_by - $r.reading_s / 2) * 1000),
         reading_ms: ($r.reading_s * 1000),
         poll_delta_ms: (($r.finished_at - $w.reached_at) * 1000 | round),
         event_delta_ms: (if $w.event_reached_at > 0 then (($r.finished_at - $w.event_reached_at) * 1000 | round) else null end)}
      | map_values(if type == "number" then (. * 1000 | round) / 1000 else . end)')
    echo "bounds:     $(echo "$bounds" | jq -c .)"
    echo "$bounds" | jq -e '.at_least_ms - 0.01 <= .duration_ms and .duration_ms <= .at_most_ms + 0.01' >/dev/null ||
        bm_fail "set $size: the reported duration does not lie between the independent clocks' readings: $(echo "$bounds" | jq -c .)"
    echo "$watch" | jq -e '.event_reached_at > 0' >/dev/null ||
        bm_warn "no BALLOON_CHANGE event at the target was seen; bounded by polling only"
}

rss_before=$(bm_rss_kib "$pid")
echo "QEMU RSS before inflate: $((rss_before / 1024)) MiB"
[ "$rss_before" -gt $((400 * 1024)) ] || bm_fail "guest did not touch its memory (RSS $rss_before KiB)"

measure_set 50% $((MEM_MIB * 1024 / 2))
echo "$result" | jq -e '.direction == "inflate" and .from_bytes == 536870912' >/dev/null ||
    bm_fail "50%: not an inflate from 512 MiB"
inflated_kib=$(( ($(echo "$result" | jq '.from_bytes - .reached_bytes')) / 1024 ))
bm_pass "set 50% --wait: the inflate's duration lies between the independent clocks' readings ($(echo "$result" | jq .duration_s) s)"

# QEMU frees the pages as the guest hands them over: a condition, not a second's sleep
rss_dropped() { rss_after=$(bm_rss_kib "$pid"); drop=$((rss_before - rss_after)); [ "$drop" -ge $((inflated_kib * 8 / 10)) ]; }
bm_wait_until 30 "QEMU's RSS to fall by 80% of the inflate" rss_dropped ||
    bm_fail "QEMU RSS fell by $drop KiB, less than 80% of the $inflated_kib KiB inflated"
echo "QEMU RSS after inflate: $((rss_after / 1024)) MiB; dropped $((drop / 1024)) MiB of $((inflated_kib / 1024)) MiB inflated"
bm_pass "host RSS fell by $((drop * 100 / inflated_kib))% of the inflated amount"

status=$("$BM" -c "$BM_URI" status --json "$dom")
echo "$status" | jq -e '.domains[0] | .current_bytes == 268435456 and .reclaimed_bytes == 268435456' >/dev/null ||
    bm_fail "status does not show 256 MiB reclaimed: $(echo "$status" | jq -c '.domains[0]')"
bm_pass "status shows the reclaimed 256 MiB"

measure_set 100% $((MEM_MIB * 1024))
# reached: within set --wait's 1 MiB tolerance of the target
echo "$result" | jq -e '.direction == "deflate" and .reached_bytes >= 536870912 - 1048576 and .reached_bytes <= 536870912' >/dev/null ||
    bm_fail "100%: not a deflate back to 512 MiB"
bm_pass "set 100% --wait: the deflate's duration lies between the independent clocks' readings ($(echo "$result" | jq .duration_s) s)"

# Relative sizes on a real guest, text output (reached within the 1 MiB tolerance); relative to
# the balloon now, so first let it finish the last MiB of the deflate
at_512m() { [ "$("$BM" -c "$BM_URI" status --json "$dom" | jq '.domains[0].current_bytes')" -eq 536870912 ]; }
bm_wait_until 5 "$dom back at 512 MiB" at_512m || true
# the fixture guest touches what a deflate gave back: that first, then the next inflate
bm_wait_retouched "$dom"
out=$("$BM" -c "$BM_URI" set "$dom" -128M --wait) || bm_fail "set -128M --wait failed"
echo "$out"
echo "$out" | grep -qE "^$dom: inflate from 512 MiB to target 384 MiB: reached 38[45] MiB after" ||
    bm_fail "set -128M output"
bm_pass "relative inflate with text output"

# A target below the floor is refused on a real guest too, and the balloon does not move:
# 2048 (KiB, i.e. 2 MiB) on a 512 MiB guest is below 128 MiB, the absolute minimum
actual_before=$(bm_virsh dommemstat "$dom" | awk '$1 == "actual" { print $2 }')
err=$(mktemp)
bm_add_cleanup "rm -f '$err'"
rc=0
"$BM" -c "$BM_URI" set "$dom" 2048 2>"$err" || rc=$?
cat "$err"
[ "$rc" -eq 2 ] || bm_fail "set 2048: exit $rc, want 2"
grep -qF "set: '$dom': size '2048' (2 MiB) is below the domain's floor of 128 MiB" "$err" ||
    bm_fail "set 2048: message"
sleep 2
actual_after=$(bm_virsh dommemstat "$dom" | awk '$1 == "actual" { print $2 }')
[ "$actual_before" = "$actual_after" ] || bm_fail "the balloon moved: $actual_before -> $actual_after KiB"
bm_pass "set 2048 (2 MiB) refused below the 128 MiB floor, exit 2; balloon stays at $actual_after KiB"
out=$("$BM" -c "$BM_URI" set "$dom" 120M --force) || bm_fail "set 120M --force failed"
echo "$out" | grep -q "to target 120 MiB (not waiting)" || bm_fail "set 120M --force output: $out"
bm_pass "set 120M --force: below the floor on purpose, accepted"
"$BM" -c "$BM_URI" set "$dom" 100% --wait >/dev/null || bm_fail "set 100% back failed"
bm_wait_retouched "$dom"
# --- the spool: a set --wait is counted by the agent of its own connection only. An agent on
# the real host and a set --wait on libvirt's test driver share one spool directory: the
# agent counts the real guest's change and leaves the test driver's entry alone.
work=$BM_WORKDIR/spool
export BALLOONMGR_RUNTIME_DIR=$work/run
mkdir -p "$BALLOONMGR_RUNTIME_DIR"
printf '[guest]\nexclude = yes\n' >"$work/none.policy"
bm_start_agent "$work/agent.log" "$BM" -c "$BM_URI" agent --dry-run --policy "$work/none.policy" \
    --state "$work/agent-state.json" --listen 127.0.0.1:0
agent=$BM_AGENT_PID
port=$(bm_agent_port "$work/agent.log")
serving_with_spool() { curl -sf "127.0.0.1:$port/metrics" >/dev/null && [ -d "$BALLOONMGR_RUNTIME_DIR/changes" ]; }
bm_wait_until 10 "the agent to serve and make its spool" serving_with_spool || true
curl -sf "127.0.0.1:$port/metrics" >/dev/null || bm_fail "the agent does not serve: $(cat "$work/agent.log")"
changes() { # changes DIRECTION: the agent's count of reached changes in that direction
    curl -sf "127.0.0.1:$port/metrics" |
        awk -v d="$1" '$1 == "balloonmgr_balloon_changes_total{device=\"balloon\",direction=\"" d "\",outcome=\"reached\"}" { print $2; f = 1 } END { if (!f) print 0 }'
}
counted() { [ "$(changes "$1")" = "$2" ]; } # counted DIRECTION N
[ "$(changes inflate)" = 0 ] || bm_fail "a dry-run agent counted an inflate before any change"

"$BM" -c test:///default set test 1G --wait >/dev/null || bm_fail "set --wait on test:///default failed"
other=$(grep -l '"uri": "test:\\/\\/\\/default"' "$BALLOONMGR_RUNTIME_DIR"/changes/*.json) ||
    bm_fail "set --wait on test:///default left no entry naming its URI: $(ls -la "$BALLOONMGR_RUNTIME_DIR/changes")"
"$BM" -c "$BM_URI" set "$dom" 50% --wait >/dev/null || bm_fail "set 50% --wait failed"
BM_WAIT_INTERVAL=0.2 bm_wait_until 10 "the inflate counted" counted inflate 1 || true
[ "$(changes inflate)" = 1 ] || bm_fail "the agent did not count the real guest's inflate (count $(changes inflate))"
sleep 2 # a few more ingests
[ "$(changes inflate)" = 1 ] && [ -f "$other" ] ||
    bm_fail "the agent on $BM_URI counted the test driver's change (count $(changes inflate), entry $(ls "$BALLOONMGR_RUNTIME_DIR/changes"))"
grep -q "warning" "$work/agent.log" && bm_fail "the agent warned: $(cat "$work/agent.log")"
bm_pass "spool: the agent on $BM_URI counted its guest's set --wait (1 inflate) and left the test:///default one alone"

# anything but an entry file in the spool is skipped, reported once and left alone; the agent
# keeps ingesting (the FIFO and the link to /dev/zero do not stop it)
mkfifo "$BALLOONMGR_RUNTIME_DIR/changes/fifo00.json"
ln -s /dev/zero "$BALLOONMGR_RUNTIME_DIR/changes/zero00.json"
"$BM" -c "$BM_URI" set "$dom" 100% --wait >/dev/null || bm_fail "set 100% --wait failed"
BM_WAIT_INTERVAL=0.2 bm_wait_until 10 "the deflate counted" counted deflate 1 || true
[ "$(changes deflate)" = 1 ] || bm_fail "a FIFO and a link to /dev/zero in the spool stopped the agent's ingest"
[ -p "$BALLOONMGR_RUNTIME_DIR/changes/fifo00.json" ] && [ -L "$BALLOONMGR_RUNTIME_DIR/changes/zero00.json" ] ||
    bm_fail "the FIFO or the link was removed"
[ "$(grep -c "skipped 2 entries" "$work/agent.log")" = 1 ] ||
    bm_fail "expected one warning about the 2 skipped entries: $(cat "$work/agent.log")"
agent_rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$agent/status")
[ "$agent_rss" -lt $((200 * 1024)) ] || bm_fail "the agent grew to $agent_rss KiB"
bm_pass "spool: a FIFO and a link to /dev/zero skipped with one warning, left alone; the deflate counted; agent RSS $agent_rss KiB"
bm_stop_agent TERM || bm_fail "the agent did not stop on SIGTERM"
[ "$BM_AGENT_STATUS" -eq 0 ] || bm_fail "the agent did not exit 0 on SIGTERM (exit $BM_AGENT_STATUS)"

bm_wait_retouched "$dom"

# Progress: on a terminal (a pty from script(1)) stderr shows the balloon's size, rate and ETA
# while it moves, and erases the line before the result; not on a terminal, nothing.
pty_out=$BM_WORKDIR/pty.out
script -qec "$(printf '%q ' "$BM" -c "$BM_URI" set "$dom" -128M --wait)" /dev/null >"$pty_out" ||
    { cat -v "$pty_out"; bm_fail "set -128M --wait on a pty failed"; }
cat -v "$pty_out"
grep -aqE $'\r'"$dom: inflate [0-9.]+ MiB -> [0-9.]+ MiB: at [0-9.]+ [KM]iB, [0-9.]+ [KMG]?i?B/s, ETA [0-9.]+ s"$'\e\\[K' "$pty_out" ||
    { rm -f "$pty_out"; bm_fail "no progress line (size, rate, ETA) on the terminal"; }
grep -aqE $'\r\e\\[K'"$dom: inflate from [0-9.]+ MiB to target [0-9.]+ MiB: reached [0-9.]+ MiB after" "$pty_out" ||
    { rm -f "$pty_out"; bm_fail "the progress line was not erased before the result"; }
rm -f "$pty_out"
bm_pass "set --wait on a terminal: progress with size, rate and ETA, erased before the result"
err=$("$BM" -c "$BM_URI" set "$dom" -64M --wait 2>&1 >/dev/null) || bm_fail "set -64M --wait failed"
[ -z "$err" ] || bm_fail "stderr not a terminal, yet set --wait printed: $err"
bm_pass "set --wait with stderr not a terminal: nothing on stderr"
