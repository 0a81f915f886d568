#!/usr/bin/env bash
# balloonmgr benchmarks (issue 7). One command: bench/run.sh [--quick]
# Builds an optimised binary, generates test-driver hosts with N = 10, 100, 1000, 10000
# domains, and prints a table (median, min-max of RUNS runs) of:
#   1. one policy pass (run --once --dry-run, and applying), in-process (test:///FILE) and
#      over libvirtd RPC (test+unix:///FILE): the pass's own wall and CPU time (from
#      run --json's "timing"), the libvirt calls it made, and the whole process's wall time;
#   2. status --json, whole process;
#   3. the agent at N=1000: start -> first completed pass, CPU share over 60 s at a 10 s
#      interval, peak RSS;
#   4. /metrics scrape latency and size at N=1000 and 10000, and the export after a new reading;
#   5. reaction: host crosses reclaim_below (fake /proc) -> first target change, agent mode;
#   6. a real TCG guest: inflate of 256 MiB, set --wait's duration vs two independent clocks.
# Needs root for 1 (RPC), 6 (libvirtd, QEMU). --quick: 3 runs, no N=10000 RPC, 20 s CPU window.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RUNS=5 CPU_WINDOW=60 QUICK=0
[ "${1:-}" = --quick ] && { RUNS=3 CPU_WINDOW=20 QUICK=1; }

tools/install-deps.sh test >/dev/null
[ -d build-bench ] || meson setup build-bench --buildtype=release -Db_ndebug=true >/dev/null
ninja -C build-bench >/dev/null
BM=$ROOT/build-bench/src/balloonmgr
WATCH=$ROOT/build-bench/tests/integration/balloon-watch
work=$(mktemp -d /tmp/bm-bench.XXXXXX)
export BALLOONMGR_RUNTIME_DIR=$work/run
agent_pid=""
cleanup() { [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

printf '[guest]\n# the test driver stamps its made-up guest stats in 1989\nmax_stats_age = off\n' >"$work/bench.policy"
mkdir -p "$work/proc/pressure"
printf 'MemTotal: 67108864 kB\nMemAvailable: 50331648 kB\n' >"$work/proc/meminfo"   # comfortable
printf 'some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n' \
    >"$work/proc/pressure/memory"
mkdir -p "$work/hot/pressure"
printf 'MemTotal: 67108864 kB\nMemAvailable: 2097152 kB\n' >"$work/hot/meminfo"        # under pressure
cp "$work/proc/pressure/memory" "$work/hot/pressure/memory"

for n in 10 100 1000 10000; do bench/gen-node.sh $n >"$work/node-$n.xml"; done

# stats VALUES...: "median (min-max)"
stats() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%s (%s-%s)", fmt(m), fmt(v[1]), fmt(v[NR]) }
    function fmt(x) { return x >= 100 ? sprintf("%.0f", x) : x >= 10 ? sprintf("%.1f", x) : sprintf("%.2f", x) }'; }
now() { date +%s.%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b - a) * 1000 }'; }

if [ "$(id -u)" -eq 0 ]; then
    (. tests/integration/lib/lib.sh && bm_start_daemons >/dev/null)
    trap '(. tests/integration/lib/lib.sh && bm_stop_daemons >/dev/null); cleanup' EXIT
    have_rpc=1
else
    have_rpc=0
fi

echo "## balloonmgr benchmarks — $(date -u +%Y-%m-%d), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), libvirt $(libvirtd --version | awk '{print $3}')"
echo
echo "### 1. One policy pass, and 2. status --json (median (min-max) of $RUNS runs; times in ms)"
echo
echo "| N | driver | pass | pass CPU | libvirt calls | process wall | applying pass | applying calls | status --json wall |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for n in 10 100 1000 10000; do
    for drv in test test+unix; do
        [ "$drv" = test+unix ] && [ "$have_rpc" = 0 ] && continue
        [ "$drv" = test+unix ] && [ "$n" = 10000 ] && [ "$QUICK" = 1 ] && continue
        uri="$drv://$work/node-$n.xml"
        pw=() pc=() calls="" wall=() aw=() acalls="" sw=()
        for _ in $(seq "$RUNS"); do
            t0=$(now)
            j=$("$BM" -c "$uri" run --once --dry-run --json --policy "$work/bench.policy" --proc "$work/hot")
            t1=$(now)
            pw+=("$(echo "$j" | jq '.timing.pass_s * 1000')")
            pc+=("$(echo "$j" | jq '.timing.cpu_s * 1000')")
            calls=$(echo "$j" | jq '.timing.libvirt_calls')
            wall+=("$(ms "$t0" "$t1")")
            j=$("$BM" -c "$uri" run --once --json --policy "$work/bench.policy" --proc "$work/hot" --state "$work/s.json")
            rm -f "$work/s.json"
            aw+=("$(echo "$j" | jq '.timing.pass_s * 1000')")
            acalls=$(echo "$j" | jq '.timing.libvirt_calls')
            t0=$(now)
            "$BM" -c "$uri" status --json >/dev/null
            t1=$(now)
            sw+=("$(ms "$t0" "$t1")")
        done
        echo "| $n | $drv | $(stats "${pw[@]}") | $(stats "${pc[@]}") | $calls | $(stats "${wall[@]}") | $(stats "${aw[@]}") | $acalls | $(stats "${sw[@]}") |"
    done
done
echo
echo "\"pass\" is the pass itself (read host + domains, decide); \"process wall\" adds start-up and"
echo "connecting, which for the in-process test driver includes parsing the node file. The"
echo "applying pass is the first of a fresh state: it also asks every running domain's QEMU"
echo "monitor for SG (the test driver has none and says so) and sets the inflates."
echo

start_agent() { # start_agent N PROC_DIR PORT [DRIVER]; every start fresh: no state file
    rm -f "$work/agent-state.json"
    "$BM" -c "${4:-test}://$work/node-$1.xml" agent --policy "$work/bench.policy" --proc "$2" \
        --listen "127.0.0.1:$3" --state "$work/agent-state.json" 2>/dev/null &
    agent_pid=$!
}
stop_agent() { kill "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=""; }
metric() { curl -sf "127.0.0.1:$2/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
wait_first_pass() { # PORT -> prints seconds until passes_total >= 1
    local t0=$1 port=$2
    until [ "$(metric balloonmgr_passes_total "$port" 2>/dev/null || true)" = 1 ]; do sleep 0.005; done
    ms "$t0" "$(now)"
}

echo "### 3. The agent at N=1000 (10 s interval)"
echo
echo "| driver | start -> first pass (ms) | CPU over ${CPU_WINDOW} s | peak RSS |"
echo "| --- | --- | --- | --- |"
port=$((30000 + RANDOM % 20000))
for drv in test test+unix; do
    [ "$drv" = test+unix ] && [ "$have_rpc" = 0 ] && continue
    first=()
    for _ in $(seq "$RUNS"); do
        t0=$(now); start_agent 1000 "$work/proc" "$port" "$drv"
        first+=("$(wait_first_pass "$t0" "$port")"); stop_agent
    done
    t0=$(now); start_agent 1000 "$work/proc" "$port" "$drv"; wait_first_pass "$t0" "$port" >/dev/null
    sleep 5
    ticks=$(getconf CLK_TCK)
    c0=$(awk '{ print $14 + $15 }' "/proc/$agent_pid/stat"); s0=$(now)
    sleep "$CPU_WINDOW"
    c1=$(awk '{ print $14 + $15 }' "/proc/$agent_pid/stat"); s1=$(now)
    cpu=$(awk -v c0="$c0" -v c1="$c1" -v s0="$s0" -v s1="$s1" -v t="$ticks" 'BEGIN { printf "%.2f", (c1 - c0) / t / (s1 - s0) * 100 }')
    hwm=$(awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$agent_pid/status")
    stop_agent
    echo "| $drv | $(stats "${first[@]}") | ${cpu}% of a core | ${hwm} MiB |"
done
echo
echo "In-process (test://), the agent's RSS includes libvirt's test driver holding the 1000"
echo "domains; over RPC (test+unix://, as with qemu:///system) it is the agent's own."
echo

echo "### 4. /metrics scrape (20 scrapes each)"
echo
echo "| N | latency ms | size |"
echo "| --- | --- | --- |"
for n in 1000 10000; do
    t0=$(now); start_agent "$n" "$work/proc" "$port"; wait_first_pass "$t0" "$port" >/dev/null
    lat=() size=0
    for _ in $(seq 20); do
        lat+=("$(curl -s -o "$work/scrape" -w '%{time_total}' "127.0.0.1:$port/metrics" | awk '{ print $1 * 1000 }')")
        size=$(stat -c %s "$work/scrape")
    done
    stop_agent
    echo "| $n | $(stats "${lat[@]}") | $(awk -v s="$size" 'BEGIN { printf "%.1f MB", s / 1e6 }') |"
done
echo
echo "The export after a new reading with one domain more than the pass's plan (a domain defined"
echo "between a pass and a refresh: every index shifted, each decision found through its row's"
echo "ledger entry), in-process (bench/export-refresh.c):"
echo
echo "| N | export after a new reading, ms (best of 5) |"
echo "| --- | --- |"
for n in 1000 10000; do
    "$ROOT/build-bench/bench/export-refresh" "$n" | awk '{ printf "| %s | %s |\n", $1, $2 }'
done
echo

echo "### 5. Reaction: host crosses reclaim_below -> first target change (agent, N=100)"
echo
react=()
for _ in $(seq "$RUNS"); do
    rm -rf "$work/live"; cp -r "$work/proc" "$work/live"
    t0=$(now); start_agent 100 "$work/live" "$port"; wait_first_pass "$t0" "$port" >/dev/null
    sleep 0.3
    cp "$work/hot/meminfo" "$work/live/meminfo.new"
    t0=$(now); mv "$work/live/meminfo.new" "$work/live/meminfo"
    until [ "$(curl -sf "127.0.0.1:$port/metrics" | awk '$1 == "balloonmgr_target_changes_total{direction=\"inflate\"}" { print $2 }')" != 0 ]; do
        sleep 0.005
    done
    react+=("$(ms "$t0" "$(now)")")
    stop_agent
done
echo "| reaction ms |"
echo "| --- |"
echo "| $(stats "${react[@]}") |"
echo

if [ "$have_rpc" = 1 ]; then
    echo "### 6. A real TCG guest: inflate 512 -> 256 MiB, set --wait vs independent clocks"
    echo
    (
        . tests/integration/lib/lib.sh
        export BALLOONMGR=$BM BALLOON_WATCH=$WATCH
        bm_setup >/dev/null
        bm_define_guest bench 512 touch=400 >/dev/null
        bm_wait_guest_ready bench >/dev/null
        dom=$(bm_dom bench)
        sleep 2
        dur=() e_poll=() e_event=()
        for _ in $(seq "$RUNS"); do
            "$WATCH" "$BM_URI" "$dom" $((256 * 1024)) 120 >"$work/w.out" 2>"$work/w.err" &
            w=$!
            until grep -qs watching "$work/w.err"; do sleep 0.05; done
            r=$("$BM" -c "$BM_URI" set "$dom" 256M --wait --json)
            wait "$w"
            dur+=("$(echo "$r" | jq '.duration_s * 1000')")
            e_poll+=("$(jq -n --argjson r "$r" --slurpfile w "$work/w.out" '(($r.finished_at - $w[0].reached_at) * 1000) | fabs')")
            e_event+=("$(jq -n --argjson r "$r" --slurpfile w "$work/w.out" 'if $w[0].event_reached_at > 0 then (($r.finished_at - $w[0].event_reached_at) * 1000) | fabs else 0 end')")
            "$BM" -c "$BM_URI" set "$dom" 512M --wait >/dev/null
            sleep 1
        done
        echo "| inflate 256 MiB (ms) | error vs query-balloon polling (ms) | error vs QEMU BALLOON_CHANGE timestamp (ms) |"
        echo "| --- | --- | --- |"
        s() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f (%.1f-%.1f)", (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2, v[1], v[NR] }'; }
        echo "| $(s "${dur[@]}") | $(s "${e_poll[@]}") | $(s "${e_event[@]}") |"
    )
fi
