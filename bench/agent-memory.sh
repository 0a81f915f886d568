#!/usr/bin/env bash
# The agent's memory and first pass over libvirtd RPC at N domains: bench/agent-memory.sh [RUNS] [N]
# Prints a table (median (min-max) of RUNS agents, each started on a fresh state file):
#   start -> first pass (ms, as bench/run.sh: until /metrics says passes_total 1), that pass's
#   own duration (balloonmgr_pass_duration_seconds), and after 8 s: peak RSS (VmHWM), RSS,
#   RssAnon (the agent's own heap, arenas and stacks) and RssFile (pages of the shared
#   libraries it maps), from /proc/PID/status; and from /proc/PID/smaps_rollup its private
#   memory (USS: Private_Clean + Private_Dirty, the pages no other process maps, which its exit
#   would free) and PSS (shared pages divided among the processes that map them);
# and the floor: the RSS of a process that does nothing but open the same libvirt connection.
# BM=BINARY selects the binary (default: build-bench/src/balloonmgr, built by bench/run.sh).
# Needs root (libvirtd for test+unix://).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RUNS=${1:-5} N=${2:-1000}
BM=${BM:-$ROOT/build-bench/src/balloonmgr}
work=$(mktemp -d /tmp/bm-bench-mem.XXXXXX)
export BALLOONMGR_RUNTIME_DIR=$work/run
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
(. tests/integration/lib/lib.sh && bm_start_daemons >/dev/null)

bench/gen-node.sh "$N" >"$work/node.xml"
mkdir -p "$work/proc/pressure"
printf 'MemTotal: 67108864 kB\nMemAvailable: 50331648 kB\n' >"$work/proc/meminfo"
printf 'some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n' \
    >"$work/proc/pressure/memory"
printf '[guest]\n# the test driver stamps its made-up guest stats in 1989\nmax_stats_age = off\n' >"$work/bench.policy"
uri="test+unix://$work/node.xml"

stats() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%s (%s-%s)", fmt(m), fmt(v[1]), fmt(v[NR]) }
    function fmt(x) { return x >= 100 ? sprintf("%.0f", x) : x >= 10 ? sprintf("%.1f", x) : sprintf("%.2f", x) }'; }
now() { date +%s.%N; }
status_mib() { awk -v k="$1:" '$1 == k { printf "%.1f", $2 / 1024 }' "/proc/$2/status"; }
uss_mib() { awk '$1 == "Private_Clean:" || $1 == "Private_Dirty:" { kb += $2 } END { printf "%.1f", kb / 1024 }' "/proc/$1/smaps_rollup"; }
pss_mib() { awk '$1 == "Pss:" { printf "%.1f", $2 / 1024 }' "/proc/$1/smaps_rollup"; }
metric() { curl -sf "127.0.0.1:$2/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

port=$((30000 + RANDOM % 20000))
first=() pass=() hwm=() rss=() anon=() file=() uss=() pss=()
for _ in $(seq "$RUNS"); do
    rm -f "$work/state.json"
    t0=$(now)
    "$BM" -c "$uri" agent --policy "$work/bench.policy" --proc "$work/proc" --listen "127.0.0.1:$port" \
        --state "$work/state.json" 2>/dev/null &
    pid=$!
    until [ "$(metric balloonmgr_passes_total "$port" 2>/dev/null || true)" = 1 ]; do sleep 0.005; done
    t1=$(now)
    first+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", (b - a) * 1000 }')")
    pass+=("$(metric balloonmgr_pass_duration_seconds "$port" | awk '{ printf "%.0f", $1 * 1000 }')")
    sleep 8
    hwm+=("$(status_mib VmHWM "$pid")") rss+=("$(status_mib VmRSS "$pid")")
    anon+=("$(status_mib RssAnon "$pid")") file+=("$(status_mib RssFile "$pid")")
    uss+=("$(uss_mib "$pid")") pss+=("$(pss_mib "$pid")")
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
done

# the floor: a process that only opens the connection (what libvirt's client library costs)
cat >"$work/floor.c" <<'EOF'
#include <libvirt/libvirt.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv)
{
    virConnectPtr c = argc > 1 ? virConnectOpen(argv[1]) : NULL;
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            fputs(line, stdout);
    if (f)
        fclose(f);
    f = fopen("/proc/self/smaps_rollup", "r");
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "Private_", 8) == 0)
            fputs(line, stdout);
    if (f)
        fclose(f);
    if (c)
        virConnectClose(c);
    return c ? 0 : 1;
}
EOF
# shellcheck disable=SC2046
cc -O2 -o "$work/floor" "$work/floor.c" $(pkg-config --cflags --libs libvirt)
"$work/floor" "$uri" >"$work/floor.out"
floor=$(awk '$1 == "VmRSS:" { printf "%.1f", $2 / 1024 }' "$work/floor.out")
floor_uss=$(awk '$1 ~ /^Private_/ { kb += $2 } END { printf "%.1f", kb / 1024 }' "$work/floor.out")

echo "### The agent at N=$N over RPC (test+unix://), median (min-max) of $RUNS; $(basename "$(dirname "$(dirname "$BM")")")"
echo
echo "| start -> first pass (ms) | first pass itself (ms) | peak RSS (MiB) | RSS after 8 s | RssAnon | RssFile | USS (private) | PSS |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
echo "| $(stats "${first[@]}") | $(stats "${pass[@]}") | $(stats "${hwm[@]}") | $(stats "${rss[@]}") | $(stats "${anon[@]}") | $(stats "${file[@]}") | $(stats "${uss[@]}") | $(stats "${pss[@]}") |"
echo
echo "A process that only opens the same libvirt connection: RSS ${floor} MiB, USS ${floor_uss} MiB."
