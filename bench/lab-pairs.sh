#!/usr/bin/env bash
# Both SG lab pairs side by side in one run (issue 35): Debian 12's (QEMU 7.2 + lab/qemu,
# Linux 6.1 guests) and Debian 13's (QEMU 10.0 + lab/qemu-10.0, Linux 6.12 guests).
#
# The pairs take turns round by round, so that both see the same machine: round r runs
# `bench/lab.sh 1 MEM` for each pair in turn (parts 1, 3 and 4 of BM_LAB_PARTS, one boot per
# case), then part 2's timed boots once per pair. Each pair's raw results gather in one file
# (bench/lab.sh's BM_LAB_RESULTS + BM_LAB_APPEND); at the end each pair's tables are printed
# from them (BM_LAB_REPORT; part 3's histogram column is in the rounds' own outputs), then one
# table of both: the medians of each case on both pairs, the speed-ups per pair, and
# HyperAlloc's normalisation (EuroSys'25: VM size / time, "GiB/s") beside QEMU's RSS freed per
# second.
#
# Usage: bench/lab-pairs.sh [RUNS [MEM_MIB]]   (root; builds both labs if needed)
#   RUNS [3], MEM_MIB [2048]. Environment: BM_LAB_PAIRS ["bookworm trixie"], BM_LAB_OUT
#   [/var/tmp/balloonmgr-lab/DATE-MEM]: the raw results (PAIR.raw, PAIR.raw.load), each
#   round's output (PAIR-rR.md, PAIR-timed.md) and the report (report.md, also printed);
#   outside the repository. bench/lab.sh's BM_LAB_PARTS, BM_LAB_CASES, BM_LAB_TOUCH,
#   BM_LAB_QUOTA, BM_LAB_FRAG... pass through; BM_LAB_REPORT_ONLY=1 runs nothing and prints
#   the report of the raw results already in BM_LAB_OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
MEM=${2:-2048}
PAIRS=${BM_LAB_PAIRS:-bookworm trixie}
PARTS=${BM_LAB_PARTS:-1 2 3 4}
for v in "$RUNS" "$MEM"; do
    case "$v" in ''|*[!0-9]*) echo "usage: bench/lab-pairs.sh [RUNS [MEM_MIB]]: '$v' is not a number" >&2; exit 2 ;; esac
done
for p in $PAIRS; do
    case "$p" in bookworm|trixie) ;; *) echo "bench/lab-pairs.sh: BM_LAB_PAIRS: unknown pair '$p' (bookworm, trixie)" >&2; exit 2 ;; esac
done
OUT=${BM_LAB_OUT:-/var/tmp/balloonmgr-lab/$(date -u +%Y%m%d-%H%M%S)-$MEM}
mkdir -p "$OUT"
t0=$(date +%s)
log() { echo "[lab-pairs $(date -u +%T)] $*" >&2; }

# the parts that run round by round, and whether part 2 runs (once per pair, after the rounds)
round_parts=$(for p in $PARTS; do [ "$p" != 2 ] && printf '%s ' "$p"; done)
if [ -z "${BM_LAB_REPORT_ONLY:-}" ]; then
    # virtlogd and libvirtd once for all rounds (as tools/test.sh does): each bench/lab.sh
    # finds them answering; only what this started is stopped at the end
    (. tests/integration/lib/lib.sh && bm_start_daemons) >&2
    trap '(. tests/integration/lib/lib.sh && bm_stop_daemons) >&2' EXIT
    for p in $PAIRS; do rm -f "$OUT/$p.raw" "$OUT/$p.raw.load"; done
    for r in $(seq "$RUNS"); do
        [ -n "$round_parts" ] || break
        for p in $PAIRS; do
            log "round $r of $RUNS: $p (parts $round_parts)"
            BM_LAB_SUITE=$p BM_LAB_PARTS=$round_parts BM_LAB_RESULTS=$OUT/$p.raw BM_LAB_APPEND=1 \
                bench/lab.sh 1 "$MEM" >"$OUT/$p-r$r.md"
        done
    done
    if [[ " $PARTS " == *" 2 "* ]]; then
        for p in $PAIRS; do
            log "part 2 (timed boots): $p"
            BM_LAB_SUITE=$p BM_LAB_PARTS=2 BM_LAB_RESULTS=$OUT/$p.raw BM_LAB_APPEND=1 \
                bench/lab.sh 1 "$MEM" >"$OUT/$p-timed.md"
        done
    fi
fi

# --- the report ---------------------------------------------------------------------------------
# med FILE CASE COL: the median of column COL over CASE's untimed runs ("-" if none)
med() {
    awk -v c="$2" -v k="$3" '$1 == c && $2 == 0 && $k != "" { print $k }' "$1" 2>/dev/null | sort -g |
        awk '{ v[++n] = $1 } END { if (!n) { printf "-"; exit } m = (n % 2) ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2
                                    printf (m >= 100 ? "%.0f" : "%.3g"), m }'
}
# runs FILE CASE: how many untimed runs CASE has
runs() { awk -v c="$2" '$1 == c && $2 == 0 { n++ } END { print n + 0 }' "$1" 2>/dev/null || echo 0; }
# ratio A B: A / B of two medians, "Nx" ("-" if either is missing or B is 0)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.1fx", a / b }'; }
# gibs MEDIAN_S: HyperAlloc's normalisation, the VM's size in GiB over the time
gibs() { awk -v s="$1" -v m="$MEM" 'BEGIN { if (s == "-" || s + 0 == 0) print "-"; else printf "%.1f", m / 1024 / s }'; }
# per_pair FUNC ARGS...: "bookworm / trixie": FUNC PAIR ARGS... for each pair, joined
per_pair() {
    local p sep="" out=""
    for p in $PAIRS; do out+="$sep$("$1" "$p" "${@:2}")"; sep=" / "; done
    printf '%s' "$out"
}
# a pair's figures: the median of a column, its GiB/s, the ratio of two cases' medians
med_of() { med "$OUT/$1.raw" "$2" "$3"; }
gibs_of() { gibs "$(med_of "$1" "$2" 3)"; }
ratio_of() { ratio "$(med_of "$1" "$2" "$4")" "$(med_of "$1" "$3" "$4")"; } # PAIR SLOWER FASTER COL
cell() { per_pair med_of "$1" "$2"; } # cell CASE COL
pairname() {
    case "$1" in bookworm) echo "QEMU 7.2 + Linux 6.1 (Debian 12)" ;; trixie) echo "QEMU 10.0 + Linux 6.12 (Debian 13)" ;; esac
}
names=$(per_pair echo)
cases_of() { # the cases of one part present in any pair's raw results, in bench/lab.sh's order
    local want=$1 c
    for c in $want; do
        for p in $PAIRS; do [ "$(runs "$OUT/$p.raw" "$c")" -gt 0 ] && { echo "$c"; break; }; done
    done
    return 0
}
report() {
    local p c init k
    echo "# The SG lab, both pairs side by side — $(date -u +%Y-%m-%d), $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), TCG"
    echo
    echo "\`bench/lab-pairs.sh $RUNS $MEM\` (pairs taking turns round by round), $((($(date +%s) - t0) / 60)) min; raw results and each round's output in $OUT."
    echo "Pairs (cells below read $names):"
    for p in $PAIRS; do echo "- $p: $(pairname "$p"), $(runs "$OUT/$p.raw" sgc-0) runs of sgc-0, failed runs: $(grep -c ' failed$' "$OUT/$p.raw" 2>/dev/null || true)"; done
    echo
    local c1; c1=$(cases_of "sgc-0 sg-0 pfn-0 sgc-deb sg-deb pfn-deb")
    if [ -n "$c1" ]; then
        echo "## Inflate 7/8 of $MEM MiB and deflate back (medians, s; HyperAlloc's GiB/s = $((MEM / 1024)) GiB VM / inflate s)"
        echo
        echo "| path | guest kernel | inflate s | inflate, QEMU CPU s | deflate s | deflate, QEMU CPU s | QEMU RSS freed MiB/s | VM GiB / inflate s |"
        echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
        for c in $c1; do
            k="init_on_alloc=0"; [ "${c#*-}" = deb ] && k="Debian default"
            echo "| ${c%%-*} | $k | $(cell "$c" 3) | $(cell "$c" 19) | $(cell "$c" 4) | $(cell "$c" 20) | $(cell "$c" 5) | $(per_pair gibs_of "$c") |"
        done
        echo
        echo "| guest kernel | speed-up (ratio of medians) | inflate | inflate, QEMU CPU | deflate | deflate, QEMU CPU |"
        echo "| --- | --- | --- | --- | --- | --- |"
        for init in 0 deb; do
            k="init_on_alloc=0"; [ "$init" = deb ] && k="Debian default"
            for pr in "pfn sgc" "sg sgc" "pfn sg"; do
                set -- $pr
                local row="| $k | $2 over $1 |" col
                for col in 3 19 4 20; do row+=" $(per_pair ratio_of "$1-$init" "$2-$init" "$col") |"; done
                echo "$row"
            done
        done
        echo
    fi
    local c3; c3=$(cases_of "ioev-pfn-true ioev-pfn-false ioev-sg-true ioev-sg-false ioev-sgc-true ioev-sgc-false")
    if [ -n "$c3" ]; then
        echo "## ioeventfd with the vCPU throttled (bench/lab.sh part 3; 7.2: the lab's patch, 10.0: QEMU's own property)"
        echo
        echo "| path | ioeventfd | inflate s | inflate, QEMU CPU s | deflate s |"
        echo "| --- | --- | --- | --- | --- |"
        for c in $c3; do
            local pth=${c#ioev-}; pth=${pth%-*}
            echo "| $pth | $([ "${c##*-}" = true ] && echo on || echo off) | $(cell "$c" 3) | $(cell "$c" 19) | $(cell "$c" 4) |"
        done
        for pth in pfn sg sgc; do
            [[ " $(echo $c3) " == *" ioev-$pth-true "* ]] || continue
            echo "| $pth | off over on (inflate) | $(per_pair ratio_of "ioev-$pth-false" "ioev-$pth-true" 3) | | |"
        done
        echo
    fi
    local c4; c4=$(cases_of "frag-sgc frag-sg")
    if [ -n "$c4" ]; then
        echo "## The fragmented guest (bench/lab.sh part 4)"
        echo
        echo "| path | inflate s | deflate s | pages in blocks of order > 0, % | in order-9 blocks, % |"
        echo "| --- | --- | --- | --- | --- |"
        for c in $c4; do echo "| ${c#frag-} | $(cell "$c" 3) | $(cell "$c" 4) | $(cell "$c" 21) | $(cell "$c" 22) |"; done
        echo
    fi
    for p in $PAIRS; do
        echo "## $p: $(pairname "$p"), bench/lab.sh's own tables"
        echo
        BM_LAB_SUITE=$p BM_LAB_PARTS=$PARTS BM_LAB_REPORT=$OUT/$p.raw bench/lab.sh "$RUNS" "$MEM" | sed 's/^#/##/'
        echo
    done
}
report | tee "$OUT/report.md"
log "report: $OUT/report.md"
