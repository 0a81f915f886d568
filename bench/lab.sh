#!/usr/bin/env bash
# The SG lab benchmark at the seeds' shape (issue 17; issue 6 measured 384 of 512 MiB):
#
# 1. Inflate 7/8 of a MEM MiB guest (MEM -> MEM/8) after the guest touched most of its memory
#    (7/8 less 64 MiB, written then freed, so it is resident in QEMU), with SG negotiated and
#    with PFN arrays (same driver, sg off), with init_on_alloc=0 (the 2017 series' kernel did
#    not zero pages on allocation; under TCG the zeroing dominates) and with the Debian default
#    (init_on_alloc=1); RUNS runs each, a fresh boot per run; then the deflate back (MEM/8 ->
#    MEM) in the same boot. Timed by balloonmgr set --wait; QEMU's RSS drop per second; and
#    the CPU time (user + system, all threads) QEMU spent meanwhile, which a loaded host does
#    not stretch as it stretches the wall time.
# 2. Where the time goes: one more boot per case with the device's timing on (lab property
#    x-lab-timing, patch 0003: a clock read per page on the PFN path, so these runs are not in
#    the medians): the guest driver's counters (allocating, building the lists, sending = add +
#    kick + wait) and the device's (mapping the elements, translating PFNs/ranges, discarding),
#    as shares of the driver's inflate time, beside the seed's breakdown of a 7 GB inflate.
# 3. ioeventfd on and off while the vCPU is contended (its cgroup quota set to QUOTA us per
#    100 ms with virsh schedinfo, as test-faults does; the device's work then runs either on
#    the throttled vCPU thread or in QEMU's main loop), init_on_alloc=0, PATHS (pfn and sg),
#    RUNS runs each; and what the agent's histogram shows for each case (balloonmgr agent
#    counting the set --wait changes; its /metrics scraped before and after each case).
#
# 4. (issue 25) The fragmented guest: after touching, it fills FRAG MiB with 2 MiB files and
#    deletes every other one (free memory in holes of about 2 MiB, rarely 2 MiB-aligned), then
#    the balloon takes 7/8 of the guest less what the files keep (MEM -> MEM/8 + FRAG/2), chunked
#    SG and today's SG, init_on_alloc=0, RUNS runs each; and the share of the balloon's pages the
#    driver took as blocks of order > 0 and of order 9 (2 MiB), from its order_allocs.
#
# The paths (the first word of a case): sgc = SG with the chunked driver (sg_chunk=1, the
# driver's default: 2 MiB blocks tracked once, freed whole), sg = SG as before issue 25
# (sg_chunk=0: the blocks split into pages on the balloon list), pfn = PFN arrays (the device's
# sg off, same driver). The host load average is sampled every 30 s while the runs go.
#
# Usage: bench/lab.sh [RUNS [MEM_MIB]]   (root; builds the lab if needed)
#   RUNS [5], MEM_MIB [2048]. Environment: BM_LAB_SUITE [bookworm] (the pair: QEMU 7.2 and 6.1
#   guests, or trixie: QEMU 10.0 and 6.12 guests; tests/integration/lib/lab-suite.sh),
#   BM_LAB_QEMU_DIR [/var/lib/libvirt/images/balloonmgr-lab, trixie: balloonmgr-lab-trixie],
#   BM_LAB_QUOTA [25000], BM_LAB_IOEVENTFD_PATHS ["pfn sg"],
#   BM_LAB_CASES ["sgc-0 sg-0 pfn-0 sgc-deb sg-deb pfn-deb"] (parts 1 and 2), BM_LAB_PARTS
#   ["1 2 3 4"] (which parts to run), BM_LAB_FRAG [MEM/2] (part 4), BM_LAB_FRAG_PATHS ["sgc sg"],
#   BM_LAB_TOUCH [MEM*7/8-64] (MiB the guest touches before the inflate; 0: an idle guest, the
#   seeds' shape), BM_LAB_RESULTS (keep the raw results there; BM_LAB_APPEND=1: add to what that
#   file and its .load hold, as bench/lab-pairs.sh does round by round), BM_LAB_LOCK=FILE (each boot under flock FILE),
#   BM_LAB_REPORT=FILE (run nothing: print the tables of PARTS from raw results kept earlier;
#   the histogram column of part 3 needs the agent of a real run and shows "-").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RUNS=${1:-5}
MEM=${2:-2048}
QUOTA=${BM_LAB_QUOTA:-25000}
IOEV_PATHS=${BM_LAB_IOEVENTFD_PATHS:-pfn sg}
PARTS=${BM_LAB_PARTS:-1 2 3 4}
TOUCH=${BM_LAB_TOUCH:-$((MEM * 7 / 8 - 64))}
case "$TOUCH" in ''|*[!0-9]*) echo "bench/lab.sh: BM_LAB_TOUCH '$TOUCH': expected MiB, a number" >&2; exit 2 ;; esac
TARGET=$((MEM / 8))
FRAG=${BM_LAB_FRAG:-$((MEM / 2))}
FRAG_TARGET=$((TARGET + FRAG / 2))
FRAG_PATHS=${BM_LAB_FRAG_PATHS:-sgc sg}
. tests/integration/lib/lab-suite.sh
. tests/integration/lib/lib.sh
LAB_QEMU_DIR=${BM_LAB_QEMU_DIR:-/var/lib/libvirt/images/balloonmgr-lab$LAB_SUFFIX}
EMU=$LAB_QEMU_DIR/qemu-system-x86_64
work=$(mktemp -d)
REPORT=${BM_LAB_REPORT:-}
start=$(bm_now)
if [ -n "$REPORT" ]; then
    RESULTS=$REPORT
    trap 'rm -rf "$work"' EXIT
else
[ -x build/src/balloonmgr ] || { meson setup build >/dev/null; ninja -C build >/dev/null; }
BM=$ROOT/build/src/balloonmgr
export BALLOONMGR=$BM
bm_setup >/dev/null
lab/build-qemu.sh "$LAB_QEMU_DIR" >/dev/null
lab/guest/build.sh >/dev/null
bm_guest_image >/dev/null
bm_add_cleanup "rm -rf '$work'"
export BALLOONMGR_RUNTIME_DIR=$work/run
mkdir -p "$work/run/changes"
RESULTS=${BM_LAB_RESULTS:-$work/results}
[ "${BM_LAB_APPEND:-0}" = 1 ] || : >"$RESULTS"

# an agent that manages nothing but counts the set --wait changes
printf '[host]\ninterval = 2s\n[guest]\nexclude = yes\n' >"$work/agent.policy"
# (on a free port; killed at exit, before $work is removed)
bm_start_agent "$work/agent.log" "$BM" -c "$BM_URI" agent --policy "$work/agent.policy" --listen 127.0.0.1:0 \
    --state "$work/agent-state.json"
port=$(bm_agent_port "$work/agent.log")
scrape() { sleep 5; curl -sf "http://127.0.0.1:$port/metrics" | grep '^balloonmgr_balloon_change_duration_seconds' >"$1" || true; }
fi

override() { # override SG IOEVENTFD
    echo "<qemu:override><qemu:device alias='balloon0'><qemu:frontend><qemu:property name='sg' type='bool' value='$1'/><qemu:property name='ioeventfd' type='bool' value='$2'/></qemu:frontend></qemu:device></qemu:override>"
}
DEV=/machine/peripheral/balloon0/virtio-backend
qom() { # qom DOM get|set PROPERTY [VALUE]
    local args="\"path\":\"$DEV\",\"property\":\"$3\""
    [ "$2" = set ] && args="$args,\"value\":$4"
    bm_virsh qemu-monitor-command "$1" "{\"execute\":\"qom-$2\",\"arguments\":{$args}}" | jq -r '.return'
}
DEVKEYS="elems pages pop-ns translate-ns discard-ns handle-ns"
devcounters() { local k; for k in $DEVKEYS; do printf '%s ' "$(qom "$1" get "x-lab-inflate-$k")"; done; }
HZ=$(getconf CLK_TCK)
cpu_s() { sed 's/.*) //' "/proc/$1/stat" | awk -v hz="$HZ" '{ printf "%.2f", ($12 + $13) / hz }'; } # utime + stime of the QEMU process
field() { echo "$1" | awk -v k="$2" -v n="$3" '$1 == k { for (i = 2; i < NF; i++) if ($i == n) { print $(i + 1); exit } }'; }
# order_share STATS: "% of the pages allocated in blocks of order > 0, % in blocks of order 9"
# (order_allocs: blocks per order since boot, i.e. of this boot's one inflate)
order_share() {
    echo "$1" | awk '$1 == "order_allocs:" { for (i = 2; i <= NF; i++) { split($i, p, ":"); n = p[2] * 2 ^ p[1]
        all += n; if (p[1] > 0) hi += n; if (p[1] == 9) top += n } }
        END { if (all) printf "%.1f %.1f", 100 * hi / all, 100 * top / all; else printf "- -" }'
}
# drvparams CASE: the driver's parameters of a case's path (sg: the blocks split, as before issue 25)
drvparams() { local m=${1#ioev-}; m=${m#frag-}; m=${m%%-*}; [ "$m" = sg ] && echo "sgparams=sg_chunk=0" || true; }

# wait_ready NAME SECS: the guest's ready line on its console (unlike bm_wait_guest_ready, a
# libvirtd restarted meanwhile by someone else is no failure: the guest runs on)
wait_ready() {
    local console; console=$(bm_console_log "$1")
    for _ in $(seq $(($2 * 2))); do
        grep -aq BALLOONMGR-GUEST-READY "$console" 2>/dev/null && return 0
        sleep 0.5
    done
    bm_fail "$1 not ready within $2 s"
}
# run_one CASE SG IOEVENTFD INIT QUOTA TIMED [FRAG]: one fresh boot, inflate 7/8 and deflate back
# (FRAG MiB fragmented first: inflate to FRAG_TARGET); appends "CASE TIMED inflate_s deflate_s
# rss_MiB/s guest... device..." to $work/results
n=0
run_one() {
    local case=$1 sg=$2 ioev=$3 init=$4 quota=$5 timed=$6 frag=${7:-0} name=b$n dom pid want cmd=() r1 r2 rss0 rss1 d0 d1 st c0 c1 c2 c3 target=$TARGET
    [ "$init" = 0 ] && cmd=(cmdline=init_on_alloc=0)
    [ "$TOUCH" != 0 ] && cmd+=(touch="$TOUCH")
    [ "$frag" != 0 ] && { cmd+=(at=0:frag2m:$frag); target=$FRAG_TARGET; }
    # shellcheck disable=SC2046 # drvparams: one word or none
    bm_define_guest "$name" "$MEM" emulator="$EMU" sgdriver=1 sgstats=1 "${cmd[@]}" $(drvparams "$case") \
        "extra=$(override "$sg" "$ioev")" >/dev/null
    wait_ready "$name" 900 # touching 7/8 of the guest under TCG on a loaded host takes minutes
    if [ "$TOUCH" != 0 ]; then
        grep -aq "bm: touched $TOUCH MiB" "$(bm_console_log "$name")" || bm_fail "$name: the guest did not touch $TOUCH MiB"
    fi
    if [ "$frag" != 0 ]; then
        for _ in $(seq 1200); do grep -aq "bm: fragment" "$(bm_console_log "$name")" && break; sleep 0.5; done
        grep -aq "bm: fragmented $frag MiB in 2 MiB files" "$(bm_console_log "$name")" || bm_fail "$name: the guest did not fragment $frag MiB"
    fi
    dom=$(bm_dom "$name")
    want=negotiated; [ "$sg" = false ] && want=not-offered
    for _ in $(seq 60); do
        "$BM" -c "$BM_URI" verify --json "$dom" | jq -e --arg w "$want" '.domains[0].driver_ok and .domains[0].features.sg.state == $w' >/dev/null && break
        sleep 0.5
    done
    "$BM" -c "$BM_URI" verify --json "$dom" | jq -e --arg w "$want" '.domains[0].features.sg.state == $w' >/dev/null ||
        bm_fail "$case: sg is not $want"
    [ "$(bm_virsh qemu-monitor-command "$dom" '{"execute":"qom-get","arguments":{"path":"/machine/peripheral/balloon0","property":"ioeventfd"}}' | jq -r .return)" = "$ioev" ] ||
        bm_fail "$case: ioeventfd is not $ioev"
    sleep 2
    if [ "$quota" != 0 ]; then
        bm_virsh schedinfo "$dom" --live vcpu_quota="$quota" vcpu_period=100000 >/dev/null || bm_fail "cannot set the vCPU quota"
    fi
    [ "$timed" = 1 ] && qom "$dom" set x-lab-timing 1 >/dev/null
    pid=$(bm_qemu_pid "$name")
    d0=$(devcounters "$dom")
    rss0=$(bm_rss_kib "$pid")
    c0=$(cpu_s "$pid")
    r1=$("$BM" -c "$BM_URI" set "$dom" "${target}M" --wait=900 --stall=120 --json) || bm_fail "$case: inflate: $r1"
    c1=$(cpu_s "$pid")
    rss1=$(bm_rss_kib "$pid")
    d1=$(devcounters "$dom")
    sleep 2.5 # the guest prints its driver counters once a second
    st=$(grep -a 'bm: sg_stats: ' "$(bm_console_log "$name")" | tr -d '\r' | sed 's/.*bm: sg_stats: //' | tac | awk '!seen[$1]++')
    c2=$(cpu_s "$pid")
    r2=$("$BM" -c "$BM_URI" set "$dom" 100% --wait=900 --stall=120 --json) || bm_fail "$case: deflate: $r2"
    c3=$(cpu_s "$pid")
    echo "$case $timed $(echo "$r1" | jq .duration_s) $(echo "$r2" | jq .duration_s)" \
        "$(awk -v a="$rss0" -v b="$rss1" -v d="$(echo "$r1" | jq .duration_s)" 'BEGIN { printf "%.0f", (a - b) / 1024 / d }')" \
        "$(for k in pages ranges elems kicks alloc_ns build_ns send_ns; do printf '%s ' "$(field "$st" inflate: $k)"; done)" \
        "$(awk -v a="$d1" -v b="$d0" 'BEGIN { n = split(a, x, " "); split(b, y, " "); for (i = 1; i <= n; i++) printf "%.0f ", x[i] - y[i] }')" \
        "$(awk -v a="$c0" -v b="$c1" -v c="$c2" -v d="$c3" 'BEGIN { printf "%.2f %.2f", b - a, d - c }')" \
        "$(order_share "$st")" >>"$RESULTS"
    bm_virsh destroy "$dom" >/dev/null; bm_virsh undefine "$dom" >/dev/null
}
# run CASE ...: run_one in a subshell; a run that fails (e.g. libvirtd restarted under it) is
# reported, its guest removed, and left out of the results
# With BM_LAB_LOCK=FILE each boot holds an exclusive flock on FILE while its guest lives (others'
# benchmarks that take the same lock run between the boots, not beside them).
run() {
    n=$((n + 1))
    if [ -n "${BM_LAB_LOCK:-}" ]; then
        ( exec 9>"$BM_LAB_LOCK"; flock 9; run_one "$@" ) && return 0
    else
        ( run_one "$@" ) && return 0
    fi
    bm_warn "$1: run b$n failed, left out"
    bm_virsh destroy "$(bm_dom "b$n")" >/dev/null 2>&1 || true
    bm_virsh undefine "$(bm_dom "b$n")" >/dev/null 2>&1 || true
    echo "$1 failed" >>"$RESULTS"
}
# results columns: 1 case 2 timed 3 inflate_s 4 deflate_s 5 rss_MiB/s, guest inflate counters
# 6 pages 7 ranges 8 elems 9 kicks 10 alloc_ns 11 build_ns 12 send_ns, device (timed runs)
# 13 elems 14 pages 15 pop_ns 16 translate_ns 17 discard_ns 18 handle_ns, and the CPU time
# (user + system, all threads) of the QEMU process during 19 the inflate 20 the deflate; the share
# of the inflate's pages the driver took in blocks of 21 order > 0 22 order 9 (%)
col() { awk -v c="$1" -v k="$2" -v t="$3" '$1 == c && $2 == t { print $k }' "$RESULTS"; }
med() { printf '%s\n' $1 | sort -g | awk 'NF { v[++n] = $1 } END { if (!n) { printf "-"; exit } printf "%.2f (%.2f-%.2f)", (n % 2) ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2, v[1], v[n] }'; }
medv() { printf '%s\n' $1 | sort -g | awk 'NF { v[++n] = $1 } END { if (!n) { print "nan"; exit } printf "%.4f", (n % 2) ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2 }'; }
ratio() { awk -v a="$(medv "$1")" -v b="$(medv "$2")" 'BEGIN { if (a == "nan" || b == "nan" || b == 0) print "-"; else printf "%.1fx", a / b }'; }
hist_delta() { # hist_delta BEFORE AFTER SG: "mean s (count) [buckets]" of the inflates between two scrapes
    [ -s "$1" ] && [ -s "$2" ] || { printf -- "-"; return 0; }
    awk -v sg="$3" '
        FNR == 1 { f++ }
        index($0, "direction=\"inflate\"") && index($0, "sg=\"" sg "\"") {
            key = $1; v = $2 + 0
            if (f == 1) before[key] = v; else after[key] = v - before[key]
        }
        END {
            for (k in after) {
                if (k ~ /_sum\{/) s = after[k]; else if (k ~ /_count\{/) c = after[k]
                else if (k ~ /_bucket\{/) { le = k; sub(/.*le="/, "", le); sub(/".*/, "", le); b[le] = after[k] }
            }
            if (!c) { printf "- (0)"; exit }
            printf "%.2f (%d); le:", s / c, c
            # the smallest bucket holding all, the largest holding none
            lo = "0"; hi = "+Inf"
            for (le in b) { if (le != "+Inf" && b[le] == c && (hi == "+Inf" || le + 0 < hi + 0)) hi = le
                            if (le != "+Inf" && b[le] == 0 && le + 0 > lo + 0) lo = le }
            printf " all in (%s, %s]", lo, hi
        }' "$1" "$2"
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
[ -n "$REPORT" ] || bm_log "bench/lab.sh: RUNS=$RUNS MEM=$MEM MiB (touch $TOUCH MiB, inflate to $TARGET MiB), parts $PARTS, load $load_start" >&2
CASES1=()
for init in 0 deb; do
    for mode in sgc sg pfn; do
        [[ " ${BM_LAB_CASES:-sgc-0 sg-0 pfn-0 sgc-deb sg-deb pfn-deb} " == *" $mode-$init "* ]] && CASES1+=("$mode-$init")
    done
done
sgval() { [ "${1%%-*}" = pfn ] && echo false || echo true; }
if [ -z "$REPORT" ]; then # the host's load while the runs go, every 30 s, beside the raw results
    [ "${BM_LAB_APPEND:-0}" = 1 ] || : >"$RESULTS.load"
    ( while :; do echo "$(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESULTS.load"; sleep 30; done ) &
    sampler=$!
    bm_add_cleanup "kill $sampler 2>/dev/null || true"
fi
if [ -z "$REPORT" ] && [[ " $PARTS " == *" 1 "* ]]; then
    for run in $(seq "$RUNS"); do # interleaved: each case's runs see the same load
        for c in "${CASES1[@]}"; do run "$c" "$(sgval "$c")" true "${c#*-}" 0 0; done
    done
fi
if [ -z "$REPORT" ] && [[ " $PARTS " == *" 2 "* ]]; then
    for c in "${CASES1[@]}"; do run "$c" "$(sgval "$c")" true "${c#*-}" 0 1; done
fi
if [ -z "$REPORT" ] && [[ " $PARTS " == *" 3 "* ]]; then
    for p in $IOEV_PATHS; do
        for ioev in true false; do
            c="ioev-$p-$ioev"
            scrape "$work/h0-$c"
            for run in $(seq "$RUNS"); do run "$c" "$([ "$p" = pfn ] && echo false || echo true)" "$ioev" 0 "$QUOTA" 0; done
            scrape "$work/h1-$c"
        done
    done
fi
if [ -z "$REPORT" ] && [[ " $PARTS " == *" 4 "* ]]; then
    for run in $(seq "$RUNS"); do
        for p in $FRAG_PATHS; do run "frag-$p" true true 0 0 0 "$FRAG"; done
    done
fi
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
# load_summary: "min-max (median M, N samples)" of the sampled 1-minute load average
load_summary() {
    [ -s "$RESULTS.load" ] || { printf -- "-"; return 0; }
    awk '{ print $2 }' "$RESULTS.load" | sort -g | awk '{ v[++n] = $1 } END { printf "%s-%s (median %s, %d samples every 30 s)", v[1], v[n], (n % 2) ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2, n }'
}

echo "## SG lab at the seeds' shape — $(date -u +%Y-%m-%d), $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), TCG, QEMU $("$EMU" --version 2>/dev/null | sed -n '1s/.*version \([0-9.]*\).*/\1/p') + lab patches ($LAB_SUITE pair), guest $(cat "$BM_GUEST_DIR/kernel-version")"
echo
[ -n "$REPORT" ] && echo "(Tables printed with BM_LAB_REPORT from the raw results of earlier runs; how many runs each case has is in the raw results below.)" && echo
echo "bench/lab.sh $RUNS $MEM: inflate $MEM -> $TARGET MiB (7/8) $(if [ "$TOUCH" = 0 ]; then echo "of an idle guest (nothing touched first)"; else echo "after the guest touched $TOUCH MiB"; fi), then deflate back; $RUNS runs per case, a fresh boot per run, cases interleaved; median (min-max) in s. $(if [ -n "$REPORT" ]; then echo "(Duration is not in the raw results.)"; else echo "Host load average (1, 5, 15 min) at start $load_start, at end $load_end. Took $(bm_elapsed "$start") s."; fi) 1-minute load average sampled during the runs: $(load_summary)."
echo
if [[ " $PARTS " == *" 1 "* ]]; then
    echo "### 1. SG vs PFN arrays"
    echo
    echo "| guest kernel | path | inflate s | inflate, QEMU CPU s | deflate s | deflate, QEMU CPU s | QEMU RSS freed MiB/s | driver: pages / ranges / elements / kicks (last run) |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
    # sgc: SG, chunked driver; sg: SG, blocks split into pages (before issue 25); pfn: PFN arrays
    for c in "${CASES1[@]}"; do
        k="init_on_alloc=0"; [ "${c#*-}" = deb ] && k="Debian default (init_on_alloc=1)"
        echo "| $k | ${c%%-*} | $(med "$(col "$c" 3 0)") | $(med "$(col "$c" 19 0)") | $(med "$(col "$c" 4 0)") | $(med "$(col "$c" 20 0)") | $(med "$(col "$c" 5 0)" | sed 's/\.00//g') | $(awk -v c="$c" '$1 == c && $2 == 0 { l = $6 " / " $7 " / " $8 " / " $9 } END { print l }' "$RESULTS") |"
    done
    echo
    echo "| guest kernel | speed-up (ratio of medians: slower / faster) | inflate | inflate, QEMU CPU | deflate | deflate, QEMU CPU |"
    echo "| --- | --- | --- | --- | --- | --- |"
    for init in 0 deb; do
        k="init_on_alloc=0"; [ "$init" = deb ] && k="Debian default"
        for pair in "sg sgc" "pfn sgc" "pfn sg"; do
            set -- $pair
            echo "| $k | $2 over $1 | $(ratio "$(col "$1-$init" 3 0)" "$(col "$2-$init" 3 0)") | $(ratio "$(col "$1-$init" 19 0)" "$(col "$2-$init" 19 0)") | $(ratio "$(col "$1-$init" 4 0)" "$(col "$2-$init" 4 0)") | $(ratio "$(col "$1-$init" 20 0)" "$(col "$2-$init" 20 0)") |"
        done
    done
    echo
    echo "Seeds: 2017 series, 7 GB of an 8 GB guest (KVM): 4126 ms -> ~541-597 ms (6.9-7.6x); 2016 RFC, 3 GB of 4 GB: 1577 -> 175 ms (9x)."
    echo
fi
if [[ " $PARTS " == *" 2 "* ]]; then
    echo "### 2. Where the inflate's time goes (one timed run per case; shares of the driver's time allocating + building + sending)"
    echo
    echo "| | seed (PFN, 7 GB, KVM) | $(for c in "${CASES1[@]}"; do printf '%s | ' "$c"; done | sed 's/ | $//') |"
    echo "| --- | --- | $(for c in "${CASES1[@]}"; do printf -- '--- | '; done | sed 's/ | $//') |"
    row() { # row LABEL SEED AWK-EXPR (of the timed run's columns, as a share of T)
        printf '| %s | %s |' "$1" "$2"
        for c in "${CASES1[@]}"; do
            printf ' %s |' "$(awk -v c="$c" '$1 == c && $2 == 1 { T = $10 + $11 + $12; if (T > 0) printf "%.1f%%", 100 * ('"$3"') / T; else printf "-" }' "$RESULTS")"
        done
        echo
    }
    row "guest: allocating pages" "6.5%" '$10'
    row "guest: building PFN arrays / sorted runs, balloon list" "(in sending)" '$11'
    row "guest: sending, less the device's handler (kick, exits, wake-ups)" "68.3% (all of sending)" '$12 - $18'
    row "device: mapping elements (virtqueue_pop)" "(in sending)" '$15'
    row "device: translating PFNs / ranges" "6.1%" '$16'
    row "device: discarding (madvise)" "19%" '$17'
    row "device: rest of the handler (push, notify)" "-" '$18 - $15 - $16 - $17'
    printf '| driver time, ms (set --wait s) | 4126 ms |'
    for c in "${CASES1[@]}"; do
        printf ' %s |' "$(awk -v c="$c" '$1 == c && $2 == 1 { printf "%.0f (%.2f)", ($10 + $11 + $12) / 1e6, $3 }' "$RESULTS")"
    done
    echo
    printf '| device: elements / 4 KiB pages |  |'
    for c in "${CASES1[@]}"; do printf ' %s |' "$(awk -v c="$c" '$1 == c && $2 == 1 { print $13 " / " $14 }' "$RESULTS")"; done
    echo
    echo
fi
if [[ " $PARTS " == *" 3 "* ]]; then
    echo "### 3. ioeventfd with the vCPU throttled to $((QUOTA / 1000)) ms per 100 ms (init_on_alloc=0)"
    echo
    echo "| path | ioeventfd | inflate s | inflate, QEMU CPU s | deflate s | agent histogram: inflate mean s (count); buckets |"
    echo "| --- | --- | --- | --- | --- | --- |"
    for p in $IOEV_PATHS; do
        for ioev in true false; do
            c="ioev-$p-$ioev"; sgl=not_negotiated; [ "$p" != pfn ] && sgl=negotiated
            echo "| $p | $([ "$ioev" = true ] && echo on || echo off) | $(med "$(col "$c" 3 0)") | $(med "$(col "$c" 19 0)") | $(med "$(col "$c" 4 0)") | $(hist_delta "$work/h0-$c" "$work/h1-$c" "$sgl") |"
        done
        echo "| $p | off/on | $(ratio "$(col "ioev-$p-false" 3 0)" "$(col "ioev-$p-true" 3 0)") | $(ratio "$(col "ioev-$p-false" 19 0)" "$(col "ioev-$p-true" 19 0)") | $(ratio "$(col "ioev-$p-false" 4 0)" "$(col "ioev-$p-true" 4 0)") | |"
    done
    echo
    echo "Seed: ioeventfd for the balloon, reclaiming 4 GB under CPU overcommit (SEV): 1400 s -> 263 s (5.3x)."
    echo
fi
if [[ " $PARTS " == *" 4 "* ]]; then
    echo "### 4. The fragmented guest (init_on_alloc=0): $FRAG MiB in 2 MiB files, every other one deleted, then inflate $MEM -> $FRAG_TARGET MiB and deflate back"
    echo
    echo "| path | inflate s | inflate, QEMU CPU s | deflate s | deflate, QEMU CPU s | QEMU RSS freed MiB/s | pages in blocks of order > 0, % | in 2 MiB blocks (order 9), % | driver: pages / ranges / elements / kicks (last run) |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    for p in $FRAG_PATHS; do
        c="frag-$p"
        echo "| $p | $(med "$(col "$c" 3 0)") | $(med "$(col "$c" 19 0)") | $(med "$(col "$c" 4 0)") | $(med "$(col "$c" 20 0)") | $(med "$(col "$c" 5 0)" | sed 's/\.00//g') | $(med "$(col "$c" 21 0)") | $(med "$(col "$c" 22 0)") | $(awk -v c="$c" '$1 == c && $2 == 0 { l = $6 " / " $7 " / " $8 " / " $9 } END { print l }' "$RESULTS") |"
    done
    echo
    echo "| speed-up | inflate | inflate, QEMU CPU | deflate | deflate, QEMU CPU |"
    echo "| --- | --- | --- | --- | --- |"
    echo "| sgc over sg | $(ratio "$(col frag-sg 3 0)" "$(col frag-sgc 3 0)") | $(ratio "$(col frag-sg 19 0)" "$(col frag-sgc 19 0)") | $(ratio "$(col frag-sg 4 0)" "$(col frag-sgc 4 0)") | $(ratio "$(col frag-sg 20 0)" "$(col frag-sgc 20 0)") |"
    echo
fi
echo "Raw results (case timed inflate_s deflate_s rss_MiB/s | driver pages ranges elems kicks alloc_ns build_ns send_ns | device elems pages pop_ns translate_ns discard_ns handle_ns | QEMU CPU s inflate deflate | % of the pages in blocks of order > 0, order 9):"
echo
echo '```'
cat "$RESULTS"
echo '```'
if [ -s "$RESULTS.load" ]; then
    echo
    echo "Load average samples (UTC, 1 5 15 min): $(awk '{ printf "%s%s %s", sep, $1, $2; sep = "; " }' "$RESULTS.load")"
fi
