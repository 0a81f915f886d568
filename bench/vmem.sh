#!/usr/bin/env bash
# virtio-mem against the balloon (issue 53): on guests of the same size (MEM MiB: a balloon guest
# of MEM MiB; a virtio-mem guest of BASE MiB and a device of MEM - BASE MiB, all plugged), after
# the guest touched TOUCH MiB (written, then freed: backed on the host), `balloonmgr set DOM
# MEM-1024M --wait` takes 1 GiB from it, and this prints
#   - how long set --wait took (an inflate of 1 GiB, or an unplug of 1 GiB),
#   - QEMU's CPU time (user + system, all threads) meanwhile,
#   - the host memory that came back per GiB asked: the QEMU process's RSS drop for a guest on
#     normal pages, HugePages_Free's rise x 2 MiB for a guest on the host's 2 MiB huge pages
#     (hugepages=1: reserved for its run and given back after), both read 3 s after set ended.
# Cases (BM_VMEM_CASES):
#   pfn     Debian's QEMU, the guest's own virtio_balloon (PFN arrays)
#   pfnlab  the lab's QEMU and driver with the device's sg off (bench/lab.sh's pfn)
#   sg      the lab's QEMU and driver, SG negotiated (bench/lab.sh's sgc: the driver's default)
#   vmem    Debian's QEMU, a virtio-mem device and no balloon (set moves the device)
# and each with -hp: the guest's memory on huge pages. The lab pair is BM_LAB_SUITE's
# [trixie: QEMU 10.0 and Linux 6.12, whose lab QEMU has no virtio-mem device]; every case boots
# that pair's guest kernel, so only the QEMU differs between the lab's cases and the others.
#
# A fresh boot per run, RUNS runs per case, taking turns case by case; each boot and measurement
# in a process of its own under an exclusive flock on BM_VMEM_LOCK (other heavy runs of this host
# go between the boots, never beside them), which starts the daemons it needs and stops what it
# started. The host's load average is sampled every 30 s.
#
# Usage: bench/vmem.sh [RUNS]        (root; RUNS [3]) runs and prints the table
#        bench/vmem.sh --report DIR  prints the table of a run kept in DIR
# Environment: BM_VMEM_CASES ["pfn sg vmem pfn-hp sg-hp vmem-hp"], BM_VMEM_MEM [2048],
#   BM_VMEM_BASE [512], BM_VMEM_TOUCH [MEM*3/4], BM_VMEM_LOCK [/run/lock/balloonmgr-heavy.lock],
#   BM_VMEM_OUT [/var/tmp/balloonmgr-bench/vmem/DATE-TIME]: results, load samples, guests' logs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SELF=$ROOT/bench/vmem.sh
export BM_LAB_SUITE=${BM_LAB_SUITE:-trixie}
MEM=${BM_VMEM_MEM:-2048}
BASE=${BM_VMEM_BASE:-512}
TOUCH=${BM_VMEM_TOUCH:-$((MEM * 3 / 4))}
ASK=1024
LOCK=${BM_VMEM_LOCK:-/run/lock/balloonmgr-heavy.lock}
CASES=${BM_VMEM_CASES:-pfn sg vmem pfn-hp sg-hp vmem-hp}
for v in "$MEM" "$BASE" "$TOUCH"; do
    case "$v" in ''|*[!0-9]*) echo "bench/vmem.sh: '$v': expected MiB, a number" >&2; exit 2 ;; esac
done
if [ "$MEM" -le $((ASK + 256)) ] || [ "$BASE" -ge $((MEM - ASK)) ]; then
    echo "bench/vmem.sh: MEM $MEM, BASE $BASE: the guest must keep more than BASE after giving 1 GiB" >&2
    exit 2
fi

# med VALUES: "median (min-max)" of the numbers, "-" when none
med() {
    # shellcheck disable=SC2086 # one number a word
    printf '%s\n' $1 | sort -g | awk 'NF { v[++n] = $1 } END { if (!n) { printf "-"; exit }
        m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        if (n == 1) printf "%.2f", m; else printf "%.2f (%.2f-%.2f)", m, v[1], v[n] }'
}
# results columns: 1 case 2 run 3 set_s 4 qemu_cpu_s 5 asked_MiB 6 rss_drop_MiB
# 7 hugepages_freed_MiB 8 ready_s (boot and touch) 9 load1 at the set
col() { awk -v c="$1" -v k="$2" '$1 == c && NF >= 9 { print $k }' "$3"; }
# per_gib CASE FILE: MiB back per GiB asked, each run (huge pages for -hp, else RSS)
per_gib() {
    local k=6
    [[ "$1" == *-hp ]] && k=7
    awk -v c="$1" -v k="$k" '$1 == c && NF >= 9 && $5 > 0 { printf "%.0f\n", $k * 1024 / $5 }' "$2"
}
report() {
    local dir=$1 r=$1/results c label
    [ -s "$r" ] || { echo "bench/vmem.sh: no results in $dir" >&2; exit 1; }
    [ ! -s "$dir/info" ] || { cat "$dir/info"; echo; }
    echo "| case | runs | set --wait s | QEMU CPU s | host memory back, MiB per GiB asked | QEMU RSS drop, MiB | HugePages_Free rise x 2 MiB | boot + touch s |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
    # shellcheck disable=SC2013 # the case names: one word each
    for c in $(awk '{ print $1 }' "$r" | awk '!seen[$0]++'); do
        case "${c%-hp}" in
            pfn) label="balloon, PFN (Debian's QEMU, in-tree driver)" ;;
            pfnlab) label="balloon, PFN (lab QEMU + driver, sg off)" ;;
            sg) label="balloon, SG (lab QEMU + driver)" ;;
            vmem) label="virtio-mem ($BASE MiB + $((MEM - BASE)) MiB device)" ;;
            *) label=$c ;;
        esac
        [[ "$c" == *-hp ]] && label="$label, huge pages"
        echo "| $label | $(col "$c" 3 "$r" | wc -l)$(awk -v c="$c" '$1 == c && $2 == "failed" { n++ } END { if (n) printf " (+%d failed)", n }' "$r") |" \
            "$(med "$(col "$c" 3 "$r")") | $(med "$(col "$c" 4 "$r")") | $(med "$(per_gib "$c" "$r")" | sed 's/\.00//g') |" \
            "$(med "$(col "$c" 6 "$r")" | sed 's/\.00//g') | $(med "$(col "$c" 7 "$r")" | sed 's/\.00//g') | $(med "$(col "$c" 8 "$r")") |"
    done
    echo
    echo "Raw results (case run set_s qemu_cpu_s asked_MiB rss_drop_MiB hugepages_freed_MiB ready_s load1):"
    echo
    echo '```'
    cat "$r"
    echo '```'
    if [ -s "$dir/load" ]; then
        echo
        echo "Load average samples (UTC, 1 5 15 min): $(awk '{ printf "%s%s %s %s %s", sep, $1, $2, $3, $4; sep = "; " }' "$dir/load")"
    fi
}
if [ "${1:-}" = --report ]; then
    report "${2:?bench/vmem.sh --report DIR}"
    exit 0
fi

. tests/integration/lib/lab-suite.sh
EMU=${BM_LAB_QEMU_DIR:-/var/lib/libvirt/images/balloonmgr-lab$LAB_SUFFIX}/qemu-system-x86_64
export BM_VMEM_OUT=${BM_VMEM_OUT:-/var/tmp/balloonmgr-bench/vmem/$(date -u +%Y%m%d-%H%M%S)}
OUT=$BM_VMEM_OUT
HZ=$(getconf CLK_TCK)
cpu_s() { sed 's/.*) //' "/proc/$1/stat" | awk -v hz="$HZ" '{ printf "%.2f", ($12 + $13) / hz }'; }
hp_free() { awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo; }
hp_total() { awk '/^HugePages_Total:/ { print $2 }' /proc/meminfo; }
override() { # override SG: the lab balloon's sg property
    echo "<qemu:override><qemu:device alias='balloon0'><qemu:frontend><qemu:property name='sg' type='bool' value='$1'/></qemu:frontend></qemu:device></qemu:override>"
}

# sg_is STATE: the guest's balloon has sg STATE (verify); plugged: its device is all plugged
sg_is() { "$BM" -c "$BM_URI" verify --json "$dom" | jq -e --arg w "$1" '.domains[0].driver_ok and .domains[0].features.sg.state == $w' >/dev/null; }
plugged() { [ "$("$BM" -c "$BM_URI" status "$dom" --json | jq -r '.domains[0].virtio_mem[0].current_bytes')" = $(((MEM - BASE) * 1048576)) ]; }

# run_one CASE RUN: one boot and one set --wait of 1 GiB; appends a line to $OUT/results (this
# process holds the lock; its EXIT trap removes the guest and stops the daemons it started)
run_one() {
    local case=$1 run=$2 kind=${1%-hp} hp=0 opts=() pid before need res rss0 rss1 f0 f1 c0 c1 asked load
    [[ "$case" == *-hp ]] && hp=1
    export BM_PREFIX=bmvm-$$- BM_WORKDIR=$OUT/work/$case-$run BM_KEEP_WORKDIR=1
    . tests/integration/lib/lib.sh
    BM=$ROOT/build/src/balloonmgr
    export BALLOONMGR=$BM
    bm_setup >/dev/null
    if [ "$hp" = 1 ]; then
        awk '$3 == "hugetlbfs" { f = 1 } END { exit !f }' /proc/mounts || bm_fail "no hugetlbfs mount"
        before=$(cat /proc/sys/vm/nr_hugepages)
        need=$((before + MEM / 2 + 16))
        bm_add_cleanup "bm_virsh destroy $(bm_dom g) >/dev/null 2>&1; echo $before >/proc/sys/vm/nr_hugepages"
        echo "$need" >/proc/sys/vm/nr_hugepages
        [ "$(hp_total)" -ge "$need" ] || bm_fail "could reserve $(hp_total) of $need huge pages"
        opts+=(hugepages=1)
    fi
    case "$kind" in
        pfn) bm_define_guest g "$MEM" touch="$TOUCH" "${opts[@]}" >/dev/null ;;
        pfnlab|sg)
            local sg=true
            [ "$kind" = pfnlab ] && sg=false
            bm_define_guest g "$MEM" touch="$TOUCH" emulator="$EMU" sgdriver=1 "extra=$(override $sg)" \
                "${opts[@]}" >/dev/null ;;
        vmem) bm_define_guest g "$BASE" virtiomem=$((MEM - BASE)) balloon=none touch="$TOUCH" "${opts[@]}" >/dev/null ;;
        *) bm_fail "unknown case '$case'" ;;
    esac
    dom=$BM_DOM
    bm_wait_guest_ready g 900 >/dev/null
    bm_console_has g "bm: touched $TOUCH MiB" || bm_fail "$case: the guest did not touch $TOUCH MiB"
    case "$kind" in
        pfnlab|sg)
            local w=negotiated
            [ "$kind" = pfnlab ] && w=not-offered
            bm_wait_until 30 "sg $w" sg_is "$w" || bm_fail "$case: sg is not $w" ;;
        vmem)
            bm_wait_until 60 "the device to be plugged" plugged || bm_fail "$case: the device is not all plugged" ;;
    esac
    sleep 2
    pid=$(bm_qemu_pid g)
    rss0=$(bm_rss_kib "$pid"); f0=$(hp_free); c0=$(cpu_s "$pid")
    load=$(cut -d' ' -f1 /proc/loadavg)
    res=$("$BM" -c "$BM_URI" set "$dom" $((MEM - ASK))M --wait=900 --stall=120 --json) || bm_fail "$case: set: $res"
    c1=$(cpu_s "$pid")
    sleep 3
    rss1=$(bm_rss_kib "$pid"); f1=$(hp_free)
    echo "$res" | jq -c . >>"$BM_WORKDIR/set.json"
    if [ "$kind" = vmem ]; then
        echo "$res" | jq -e '.device == "virtio-mem" and .outcome == "reached"' >/dev/null || bm_fail "$case: not a virtio-mem unplug reached: $res"
        asked=$(echo "$res" | jq '.unplugged_bytes / 1048576')
    else
        echo "$res" | jq -e '.device != "virtio-mem" and .outcome == "reached"' >/dev/null || bm_fail "$case: not a balloon inflate reached: $res"
        asked=$(echo "$res" | jq '(.from_bytes - .reached_bytes) / 1048576')
    fi
    echo "$case $run $(echo "$res" | jq .duration_s) $(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }') $asked" \
        "$(((rss0 - rss1) / 1024)) $(((f1 - f0) * 2)) $BM_READY_SECONDS $load" >>"$OUT/results"
    bm_log "$case run $run: $(tail -n 1 "$OUT/results")" >&2
}
if [ "${1:-}" = --run ]; then
    run_one "$2" "$3"
    exit 0
fi

# the run: prepare once, then each boot under the lock
[ "$(id -u)" = 0 ] || { echo "SKIP: bench/vmem.sh needs root"; exit 77; }
RUNS=${1:-3}
mkdir -p "$OUT"
export BM_PREFIX=bmvm-$$- BM_WORKDIR=$OUT/work BM_KEEP_WORKDIR=1
. tests/integration/lib/lib.sh
[ -x build/src/balloonmgr ] || { meson setup build >/dev/null; ninja -C build >/dev/null; }
bm_ensure_packages
if [[ " $CASES " == *" sg"* ]] || [[ " $CASES " == *" pfnlab"* ]]; then
    lab/build-qemu.sh "$(dirname "$EMU")" >/dev/null
    lab/guest/build.sh >/dev/null
fi
bm_guest_image >/dev/null
# a hugetlbfs mount for the -hp cases, made before any libvirtd of the runs starts (libvirtd
# looks for one at its start): this run's own where there is none, unmounted at its end
if [[ " $CASES " == *-hp* ]] && ! awk '$3 == "hugetlbfs" { f = 1 } END { exit !f }' /proc/mounts; then
    mkdir -p /dev/hugepages
    mount -t hugetlbfs -o pagesize=2M hugetlbfs /dev/hugepages || bm_fail "cannot mount hugetlbfs on /dev/hugepages"
    bm_add_cleanup "umount /dev/hugepages || bm_warn 'could not unmount /dev/hugepages'"
fi
{
    echo "Host: $(nproc) cores, $(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(awk '/^MemTotal:/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r); TCG guests"
    echo "Guest kernel $BM_KERNEL_VERSION; QEMU: $(qemu-system-x86_64 --version | head -1 | sed 's/QEMU emulator version //') (pfn, vmem), lab $("$EMU" --version | head -1 | sed 's/QEMU emulator version //') (sg, pfnlab)"
    echo "Guests: $MEM MiB (vmem: $BASE MiB + a $((MEM - BASE)) MiB device), touched $TOUCH MiB; set to $((MEM - ASK)) MiB; $RUNS runs per case; balloonmgr $(git -C "$ROOT" rev-parse --short HEAD)"
    echo "Started $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/info"
: >>"$OUT/results"
( while :; do echo "$(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/load"; sleep 30; done ) &
sampler=$!
bm_add_cleanup "kill $sampler 2>/dev/null || true"
bm_log "bench/vmem.sh: $RUNS runs of $CASES; results in $OUT" >&2
for run in $(seq "$RUNS"); do
    for c in $CASES; do
        flock "$LOCK" "$SELF" --run "$c" "$run" >>"$OUT/log" 2>&1 ||
            { bm_warn "$c run $run failed (see $OUT/log), left out"; echo "$c failed" >>"$OUT/results"; }
    done
done
echo "Ended $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/info"
report "$OUT"
