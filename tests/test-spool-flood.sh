#!/usr/bin/env bash
# The agent (--dry-run: it changes nothing itself, but counts what set --wait spooled) and a
# spool flooded with junk: 20 changes measured by set --wait beside 30000
# junk files are all counted (one ingest counts them all: test-spool; here the agent, waited
# for as a condition, its time printed, never bounded), the log says once how many files were
# skipped, and the junk is left alone. Test driver, no root.
# Usage: test-spool-flood.sh BALLOONMGR SOURCE_ROOT   (TAP output)
set -u
BM=$1
ROOT=$2
. "$ROOT/tests/tap.sh"
. "$ROOT/tests/agent.sh"
command -v curl >/dev/null || tap_skip_all "curl is not installed"
base=/tmp
[ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm # 30000 files: in memory when possible
T=$(mktemp -d "$base/bm-spool-flood.XXXXXX")
apid=""
cleanup() {
    agent_stop
    rm -rf "$T"
}
trap cleanup EXIT
export BALLOONMGR_RUNTIME_DIR=$T/run
mkdir -p "$T/run/changes"
chmod 700 "$T/run" "$T/run/changes"

# 20 changes on test:///default, as set --wait records them
bad=0
for i in $(seq 20); do
    size=$((i % 2 ? 1024 : 1536))M # every one a change (test starts at 2 GiB)
    "$BM" -c test:///default set test "$size" --wait >/dev/null 2>"$T/set.err" || bad=1
done
n=$(find "$T/run/changes" -name '??????.json' | wc -l)
[ "$bad" = 0 ] && [ "$n" -eq 20 ]; ok_files $? "20 set --wait changes spooled (found $n)" "$T/set.err"
(cd "$T/run/changes" && seq -f 'junk-%05g' 0 29999 | xargs touch)
[ "$(find "$T/run/changes" -name 'junk-*' | wc -l)" -eq 30000 ]; ok $? "and 30000 junk files beside them"

apid=""
agent_start "$T/agent.log" "$BM" -c test:///default agent --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" \
    --listen 127.0.0.1:0 --state "$T/state.json" --dry-run &&
    agent_wait curl -sf "127.0.0.1:$agent_port/metrics" -o /dev/null && apid=$agent_pid port=$agent_port
[ -n "$apid" ]; ok_files $? "an agent on test:///default serves" "$T/agent.log"
start=$(date +%s%N)
counted=0
all_counted() {
    counted=$(curl -sf "127.0.0.1:$port/metrics" |
        sed -n 's/^balloonmgr_balloon_changes_total{device="balloon",direction="\(inflate\|deflate\)",outcome="reached"} \([0-9]*\)$/\2/p' |
        awk '{ s += $1 } END { print s + 0 }')
    [ "$counted" -ge 20 ]
}
agent_wait all_counted
took_ms=$((($(date +%s%N) - start) / 1000000))
[ "$counted" -eq 20 ]
ok_files $? "all 20 changes counted by the agent (got $counted; in $took_ms ms)" "$T/agent.log"
grep -q "^balloonmgr: agent: warning: $T/run/changes: skipped 30000 entries: 'junk-[0-9]*' is not a change file (left alone)" "$T/agent.log"
ok $? "  its log says it skipped 30000 entries" "$(grep -v '^balloonmgr: change' "$T/agent.log" | head -5)"
[ "$(grep -c 'skipped 30000 entries' "$T/agent.log")" -eq 1 ]; ok $? "  once"
[ "$(find "$T/run/changes" -name '??????.json' | wc -l)" -eq 0 ] &&
    [ "$(find "$T/run/changes" -name 'junk-*' | wc -l)" -eq 30000 ]
ok $? "  the changes are removed, the junk left alone"
tap_done
