#!/usr/bin/env bash
# The SG lab benchmark (issue 6): the same guest (512 MiB, 400 MiB touched then freed, a fresh
# boot per run so every run starts from the same resident memory), inflating 75% (512 ->
# 128 MiB) with SG negotiated and without (same driver, sg off), RUNS runs each. Measured by
# balloonmgr set --wait and by the agent's histogram (scraped by a real Prometheus), with the
# QEMU RSS reclaimed per second; and a perf profile of the QEMU process during one inflate of
# each kind. Usage: bench/lab.sh [RUNS]   (root; builds the lab if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RUNS=${1:-5}
. tests/integration/lib/lib.sh
. tests/integration/lib/prom.sh
[ -x build/src/balloonmgr ] || { meson setup build >/dev/null; ninja -C build >/dev/null; }
BM=$ROOT/build/src/balloonmgr
export BALLOONMGR=$BM
bm_setup >/dev/null
bm_prom_ensure >/dev/null
command -v perf >/dev/null || apt-get install -y -q --no-install-recommends linux-perf >/dev/null 2>&1 || true
lab/build-qemu.sh >/dev/null
lab/guest/build.sh >/dev/null
bm_guest_image >/dev/null
EMU=/var/lib/libvirt/images/balloonmgr-lab/qemu-system-x86_64
work=$(mktemp -d)
bm_add_cleanup "rm -rf '$work'"
export BALLOONMGR_RUNTIME_DIR=$work/run
mkdir -p "$work/run/changes"

# an agent that manages nothing but counts the set --wait changes, scraped by Prometheus
printf '[host]\ninterval = 5s\n[guest]\nexclude = yes\n' >"$work/agent.policy"
port=$(bm_prom_free_port)
"$BM" -c "$BM_URI" agent --policy "$work/agent.policy" --listen "127.0.0.1:$port" --state "$work/agent-state.json" \
    2>"$work/agent.log" &
agent=$!
bm_add_cleanup "kill $agent 2>/dev/null || true"
bm_prom_start "127.0.0.1:$port" >/dev/null

override() { echo "<qemu:override><qemu:device alias='balloon0'><qemu:frontend><qemu:property name='sg' type='bool' value='$1'/></qemu:frontend></qemu:device></qemu:override>"; }

declare -A dur rss_rate
i=0
for mode in sg nosg; do
    v=true; [ "$mode" = nosg ] && v=false
    for run in $(seq "$RUNS"); do
        i=$((i + 1))
        name="b$i"
        bm_define_guest "$name" 512 emulator="$EMU" sgdriver=1 sgstats=1 touch=400 "extra=$(override $v)" >/dev/null
        bm_wait_guest_ready "$name" >/dev/null
        dom=$(bm_dom "$name")
        for _ in $(seq 40); do "$BM" -c "$BM_URI" verify --json "$dom" | jq -e '.domains[0].driver_ok' >/dev/null && break; sleep 0.5; done
        sleep 1
        pid=$(bm_qemu_pid "$name")
        want=negotiated; [ "$mode" = nosg ] && want=not-offered
        "$BM" -c "$BM_URI" verify --json "$dom" | jq -e --arg w "$want" '.domains[0].features.sg.state == $w' >/dev/null ||
            bm_fail "$mode: sg is not $want"
        rss0=$(bm_rss_kib "$pid")
        prof=""
        if [ "$run" = 1 ] && command -v perf >/dev/null; then
            perf record -q -p "$pid" -o "$work/perf-$mode.data" -- sleep 4 >/dev/null 2>&1 &
            prof=$!
            sleep 0.5
        fi
        r=$("$BM" -c "$BM_URI" set "$dom" 25% --wait --json)
        [ -n "$prof" ] && wait "$prof" || true
        rss1=$(bm_rss_kib "$pid")
        sleep 1.5 # the guest prints its driver counters once a second
        d=$(echo "$r" | jq '.duration_s')
        dur[$mode]+="$d "
        rss_rate[$mode]+="$(awk -v a="$rss0" -v b="$rss1" -v d="$d" 'BEGIN { printf "%.0f", (a - b) / 1024 / d }') "
        grep 'bm: sg_stats: inflate' "$(bm_console_log "$name")" | tail -1 >"$work/sgstats-$mode" || true
        bm_virsh destroy "$dom" >/dev/null; bm_virsh undefine "$dom" >/dev/null
    done
done

med() { printf '%s\n' $1 | sort -g | awk '{ v[NR] = $1 } END { printf "%.3f (%.3f-%.3f)", (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2, v[1], v[NR] }'; }
medi() { printf '%s\n' $1 | sort -g | awk '{ v[NR] = $1 } END { printf "%.0f (%.0f-%.0f)", (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2, v[1], v[NR] }'; }
sleep 3
hist() { bm_prom_value "sum(balloonmgr_balloon_change_duration_seconds_sum{direction=\"inflate\",sg=\"$1\"}) / sum(balloonmgr_balloon_change_duration_seconds_count{direction=\"inflate\",sg=\"$1\"})" 2>/dev/null | awk '{ printf "%.3f", $1 }'; }
cnt() { bm_prom_value "sum(balloonmgr_balloon_change_duration_seconds_count{direction=\"inflate\",sg=\"$1\"})" 2>/dev/null; }

echo "## SG lab benchmark — $(date -u +%Y-%m-%d), $(nproc) cores, TCG, QEMU 7.2 + lab patches, guest $(cat /var/lib/libvirt/images/balloonmgr-test/kernel-version)"
echo
echo "Inflate 512 -> 128 MiB (75%) of a 512 MiB guest that touched 400 MiB; $RUNS runs each, fresh boot per run."
echo
echo "| mode | set --wait duration s, median (min-max) | QEMU RSS reclaimed MiB/s | Prometheus: histogram mean s (count) |"
echo "| --- | --- | --- | --- |"
echo "| SG negotiated | $(med "${dur[sg]}") | $(medi "${rss_rate[sg]}") | $(hist negotiated) ($(cnt negotiated)) |"
echo "| no SG (PFN arrays) | $(med "${dur[nosg]}") | $(medi "${rss_rate[nosg]}") | $(hist not_negotiated) ($(cnt not_negotiated)) |"
echo
echo "Guest driver's counters (cumulative since boot, so: this one inflate) of the last run of each mode:"
echo
for mode in sg nosg; do echo "- $mode: $(sed 's/.*sg_stats: //' "$work/sgstats-$mode" 2>/dev/null)"; done
echo
for mode in sg nosg; do
    [ -e "$work/perf-$mode.data" ] || continue
    echo "QEMU process profile during one $mode inflate (perf, self time, top 12):"
    echo
    echo '```'
    perf report -q -i "$work/perf-$mode.data" --sort dso,symbol --percent-limit 1.5 2>/dev/null | grep "%" | head -12
    echo '```'
    echo
done
