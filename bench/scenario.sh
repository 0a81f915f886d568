#!/usr/bin/env bash
# bench/scenario.sh -- the closed loop under real memory pressure (issues #14, #21).
#
# Five 1 GiB TCG guests with different memory demand (bm-guest-load in the test guest):
#   idle     touches 800 MiB at boot and frees it: resident in QEMU, free in the guest,
#            so an inflate gives it back to the host
#   fresh    never touches its free memory: an inflate gives the host nothing
#   steady   holds 384 MiB, touched every second
#   grower   touches and frees 600 MiB (memory the host backs, so it is ballooned under
#            pressure), holds 96 MiB, later grows to 700 MiB at 25 MiB/s while the host is still short
#   cache    reads 600 MiB of its disk (a read-only virtio disk of random bytes) into its page
#            cache at boot and keeps it open, holds 32 MiB: memory free page reporting cannot
#            return, an inflate can (the guest drops cache)
#   hot      (issue #32) re-reads the first 400 MiB of its own 512 MiB disk for ever with
#            buffered read()s (a database's or web server's working set: a HOT page cache; the
#            disk has cache='none', so a miss is a real read and no page fault); its re-read
#            rate is its work, measured before, under and after the pressure. BM_SCENARIO_HOT=
#            mmap: the same through mmap (a miss is a major fault); none: no such guest;
#            pgbench (issue 49): a real server instead, PostgreSQL 15 in a Debian 12 guest
#            (tests/integration/lib/build-server-guest.sh, built and cached on first use, about
#            4 minutes) with pgbench -S (1 client, read-only selects by primary key over 418 MiB
#            of database files in the guest's page cache, shared_buffers 16MB: read through
#            read()), its disk a copy-on-write overlay of the image, cache='none'; its rate is
#            pgbench's transactions a second (its "progress: ... tps" line each second)
# With BM_SCENARIO_SPARE=cache (the page-cache scenario of issue #21) the idle guest's spare
# memory is page cache too: it reads 700 MiB of its own disk and keeps it open instead of
# touching and freeing 800 MiB (the default, BM_SCENARIO_SPARE=free: its spare memory is free).
# and a host process (bm-mem-hog) that takes the host's real MemAvailable down to 8% of
# MemTotal (below default.policy's reclaim_below, 10%), never below a 1.5 GiB safety floor.
# Phases: steady (nothing should change) -> host pressure begins -> the grower's demand
# steps up while the host is still short -> the hog ends (release).
# BM_SCENARIO_LAYOUT=issue49: the scenario of issue 49 instead: five 1 GiB guests, the hot one
# (BM_SCENARIO_HOT: the re-reader, or the server with pgbench), a cold cache guest ("cache",
# 700 MiB of its disk read at boot, then 32 MiB held), two idle guests whose free memory the
# host backs ("idle", "idle2": 800 MiB touched and freed) and "steady" (384 MiB); no grower, no
# fresh guest. The hog takes MemAvailable to 9% of MemTotal (BM_HOG_TARGET), a second hog to 7%
# halfway through (BM_HOG_STEP, default LEAD:7%), both with a floor of 1.3 GiB (BM_HOG_FLOOR;
# bm-mem-hog needs a target 256 MiB above it, and the floor stays above half of reclaim_below:
# the host far from its own OOM, as the issue's steps are); five minutes of pressure (150 s + 150 s;
# --short: 70 + 70; BM_SCENARIO_AFTER: the second half). Its control mode sets no balloon (no
# balloonmgr at all; the default layout's control sets each guest once).
#
# Usage:
#   bench/scenario.sh run MODE OUT.json [--short]
#       one run; MODE: agent (balloonmgr agent, stats period 1 s), timer (run --once each
#       minute with --state, as the systemd timer; its release phase holds two timer runs
#       after the hog ends; every guest with deflate-on-oom, which the timer's default
#       timer_inflate asks for), timer-stock (the same with guests without it), control (no balloonmgr: one `virsh setmem` per guest when the
#       pressure begins, balloons left there), fpr (no balloonmgr, every guest's balloon with
#       freePageReporting='on', nothing else done), agent-fpr (the agent, every guest with
#       freePageReporting='on')
#   bench/scenario.sh bench [RUNS=3] [MODES=agent,control,timer,fpr,agent-fpr]
#       RUNS runs of each mode into $BM_BENCH_RESULTS/scenario/MODE-N.json (outside the
#       repository: /var/tmp/balloonmgr-bench by default), then the table (median)
#   bench/scenario.sh table [DIR=$BM_BENCH_RESULTS/scenario]   the table of the JSON files in DIR
#   bench/scenario.sh reanalyse RUN.json...         the measurements again from RUN.d/ (runs
#       since issue #21 keep what that needs)
#   bench/scenario.sh plot RUN.json OUT.png          the timeline picture (gnuplot)
# --short: the integration test's timing (steady 20 s, pressure 140 s, release 30 s instead of
# 60, 210 and 90 s; the timer's pressure and release are longer, see run_one).
#
# Results stay out of the tree; bench/scenario/reference/ holds one kept run, the analyser's
# fixture (`reanalyse` and `table` work on it; bench/README.md).
# Environment: BM_BENCH_RESULTS (default /var/tmp/balloonmgr-bench), BALLOONMGR (default build/src/balloonmgr), BM_MEM_HOG, BM_GUEST_LOAD (default:
# the build dir's), BM_SCENARIO_POLICY (default policies/default.policy), BM_GUEST_DIR (guest
# image, see tests/integration/lib/lib.sh), BM_HOG_TARGET (default 8%), BM_HOG_FLOOR (default 1.5G),
# BM_HOG_CHASE=1 (the hog keeps MemAvailable at its target all through the pressure, taking
# what the balloons give back: the host stays short whatever is taken, so the guests' last
# memory, a hot page cache, is what is left; issue #32's near-OOM case; said in the run's
# "pressure: bm-mem-hog started" event),
# BM_SCENARIO_GUEST_OPTS (bm_define_guest options for every guest, e.g. autodeflate=on; in the
# JSON as guest_options), BM_SCENARIO_SPARE (free or cache: the idle guest's spare memory, above;
# in the JSON as spare), BM_SCENARIO_VMEM=1 (issue 53: the idle guest is 256 MiB and a 768 MiB
# virtio-mem device, moved through it by the policy's `device = virtio-mem`, and for the timer
# `timer_inflate = always`; its memory is its base and what it has plugged; in the JSON as
# vmem_guest), BM_SCENARIO_HOT (read, mmap or none: the hot guest, above; in the JSON as hot),
# BM_SCENARIO_HOT_MIB=MIB (the re-reader's working set, default 400; its label then says
# +MIBm), BM_SCENARIO_HOT_TOUCH=MIB (the hot guest first writes MIB MiB and frees them: all
# its memory is then backed by QEMU and an inflate of it gives the host memory; without it
# the inflate mostly takes pages the guest never touched), BM_SCENARIO_PIN=1 (the hot guest on
# CPU 1 alone, its vCPU and emulator threads pinned; the other guests, libvirtd, the hog, the
# agent or timer and the sampler on CPU 0: the hot guest's rate then measures its cache, not
# the CPU the rest of the run takes; 2 CPUs or more), BM_SCENARIO_ISOLATE=1 (with
# BM_SCENARIO_PIN=1: every other process of the machine, this run's and others', is moved to
# CPU 0 while the run lasts, checked every 2 s so that processes started meanwhile follow, and
# moved back at its end: the hot guest's CPU is its own whatever else the machine does, another
# session's builds beside a run; the hot guest's label says +isolated), BM_HOG_STEP=SECS:TARGET (a second hog,
# chasing TARGET (as BM_HOG_TARGET) from SECS s into the pressure to its end, with the same
# floor: a deeper step once the first is relieved), BM_SCENARIO_AFTER=SECS (the pressure's
# length after the grower's demand step, instead of 90 s, 50 with --short; test-pressure: 35;
# issue49: after the hog's second step), BM_SCENARIO_LAYOUT (default or issue49, above; in the
# JSON as layout), BM_SERVER_DIR (the server guest's image, default
# /var/cache/balloonmgr-test/server), BM_SCENARIO_COLD_LEFT=MIB (default 64: the check below).
# Measured for every run, besides issue #14's: the hot guest's rate before (the steady phase's
# last 40 s), under pressure and in the minute after, the worst window of 5 s and of 10 s from
# the start of the hog to a minute after, when after the hog a 10 s window is back at 0.9 x;
# its disk reads before and under pressure; the host's seconds below 10% of MemTotal under
# pressure; the QEMU processes' total RSS at rest, lowest and mean under pressure; guest OOM
# kills (the server guest: its kernel's "Killed process" lines); and the seconds in which the
# agent reported memory unmet (balloonmgr_host_unmet_bytes > 0) while the cold cache guest
# still held more than BM_SCENARIO_COLD_LEFT MiB of page cache above its keep_free (15%: the
# smaller of its page cache and its usable memory beyond that) and its balloon was not growing
# (issue 49: "no step stays unmet while another guest holds cold cache the host backs"); and
# what ran on the hot guest's CPU (CPU 1 when isolated, else the whole machine, where a
# one-vCPU guest at full speed is 0.5 of 2 CPUs) before, under pressure, in the minute after
# and in its worst 10 s window: its QEMU's share of that CPU, the hypervisor's steal, other
# work there, its QEMU's major and minor faults on the host (whether a dip of its rate came
# from its CPU or from within the guest).
# The hot guest's label in the JSON and the table says which of these a run had (e.g.
# read+touched+pinned).
# The timer runs every timer_interval of the policy (60 s without it).
# Needs root. Only one scenario runs at a time on a machine (flock on
# /run/lock/balloonmgr-scenario.lock): two hogs would share one MemAvailable.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BM=${BALLOONMGR:-$ROOT/build/src/balloonmgr}
HOG=${BM_MEM_HOG:-$ROOT/build/tests/integration/bm-mem-hog}
export BM_GUEST_LOAD=${BM_GUEST_LOAD:-$ROOT/build/tests/integration/bm-guest-load}
POLICY_SRC=${BM_SCENARIO_POLICY:-$ROOT/policies/default.policy}
# the guests: default (the five of issues #14 and #21 above, with the hot one) or issue49 (below)
LAYOUT=${BM_SCENARIO_LAYOUT:-default}
case "$LAYOUT" in default|issue49) ;; *) echo "scenario: BM_SCENARIO_LAYOUT '$LAYOUT': expected default or issue49" >&2; exit 2 ;; esac
HOG_TARGET=${BM_HOG_TARGET:-8%}
[ "$LAYOUT" = default ] || HOG_TARGET=${BM_HOG_TARGET:-9%}
HOG_FLOOR=${BM_HOG_FLOOR:-1.5G}
# issue49: 7% of MemTotal must be 256 MiB above the floor (bm-mem-hog), and the floor above half
# of reclaim_below (5%): the issue's steps keep the host far from its own OOM, and a hog that
# took MemAvailable below that line for a moment made the agent take a hot cache as near OOM
[ "$LAYOUT" = default ] || HOG_FLOOR=${BM_HOG_FLOOR:-1.3G}
HOG_CHASE=${BM_HOG_CHASE:-0}
case "$HOG_CHASE" in 0|1) ;; *) echo "scenario: BM_HOG_CHASE '$HOG_CHASE': expected 0 or 1" >&2; exit 2 ;; esac
GUESTS=(idle fresh steady grower cache)
[ "$LAYOUT" = default ] || GUESTS=(cache idle idle2 steady)
# the hot guest (issue #32): read (default), mmap, pgbench (issue 49: the server), none
HOT=${BM_SCENARIO_HOT:-read}
case "$HOT" in read|mmap|pgbench) GUESTS+=(hot) ;; none) ;; *) echo "scenario: BM_SCENARIO_HOT '$HOT': expected read, mmap, pgbench or none" >&2; exit 2 ;; esac
# the re-reader's working set (BM_SCENARIO_HOT_MIB, default 400 MiB of its 512 MiB disk; more:
# a disk of that and 112 MiB)
HOT_MIB=${BM_SCENARIO_HOT_MIB:-400}
case "$HOT_MIB" in [1-9][0-9]|[1-9][0-9][0-9]) ;; *) echo "scenario: BM_SCENARIO_HOT_MIB '$HOT_MIB': expected 10-999 MiB" >&2; exit 2 ;; esac
HOT_DISK_MIB=512
[ "$HOT_MIB" -le 400 ] || HOT_DISK_MIB=$((HOT_MIB + 112))
HOT_TOUCH=${BM_SCENARIO_HOT_TOUCH:-0}
case "$HOT_TOUCH" in ''|*[!0-9]*) echo "scenario: BM_SCENARIO_HOT_TOUCH '$HOT_TOUCH': expected MiB" >&2; exit 2 ;; esac
[ "$HOT" != pgbench ] || [ "$HOT_TOUCH" = 0 ] ||
    { echo "scenario: BM_SCENARIO_HOT_TOUCH is for the re-reader, not BM_SCENARIO_HOT=pgbench" >&2; exit 2; }
# the server guest's image (tests/integration/lib/build-server-guest.sh; built when missing)
SERVER_DIR=${BM_SERVER_DIR:-${BM_GUEST_CACHE:-/var/cache/balloonmgr-test}/server}
# the cold cache guest's page cache: its disk read at boot (600 MiB; issue49: 700)
CACHE_MIB=600
[ "$LAYOUT" = default ] || CACHE_MIB=700
# the check "a step unmet while the cold cache guest holds cache the host backs": page cache
# above its keep_free of more than this many MiB
COLD_LEFT=${BM_SCENARIO_COLD_LEFT:-64}
case "$COLD_LEFT" in ''|*[!0-9]*) echo "scenario: BM_SCENARIO_COLD_LEFT '$COLD_LEFT': expected MiB" >&2; exit 2 ;; esac
PIN=${BM_SCENARIO_PIN:-0}
ISOLATE=${BM_SCENARIO_ISOLATE:-0}
case "$ISOLATE" in 0|1) ;; *) echo "scenario: BM_SCENARIO_ISOLATE '$ISOLATE': expected 0 or 1" >&2; exit 2 ;; esac
[ "$ISOLATE" = 0 ] || [ "$PIN" = 1 ] || { echo "scenario: BM_SCENARIO_ISOLATE=1 needs BM_SCENARIO_PIN=1" >&2; exit 2; }
AFTER=${BM_SCENARIO_AFTER:-}
case "$AFTER" in ''|[1-9]|[1-9][0-9]|[1-9][0-9][0-9]) ;; *) echo "scenario: BM_SCENARIO_AFTER '$AFTER': expected seconds (1-999)" >&2; exit 2 ;; esac
case "$PIN" in 0|1) ;; *) echo "scenario: BM_SCENARIO_PIN '$PIN': expected 0 or 1" >&2; exit 2 ;; esac
HOG_STEP=${BM_HOG_STEP:-}
# issue49: the step to 7% halfway through the pressure unless BM_HOG_STEP says otherwise (set
# and empty: no step); resolved in run_one, where the pressure's length is known
HOG_STEP_DEFAULT=0
[ "$LAYOUT" = default ] || [ -n "${BM_HOG_STEP+set}" ] || HOG_STEP_DEFAULT=1
case "$HOG_STEP" in ''|[0-9]*:?*) ;; *) echo "scenario: BM_HOG_STEP '$HOG_STEP': expected SECS:TARGET" >&2; exit 2 ;; esac
# the hot guest's label: its read mode and the variants above
HOT_LABEL=$HOT
if [ "$HOT" != none ]; then
    [ "$HOT_TOUCH" = 0 ] || HOT_LABEL=$HOT_LABEL+touched
    [ "$HOT_MIB" = 400 ] || HOT_LABEL=$HOT_LABEL+${HOT_MIB}m
    [ "$PIN" = 0 ] || HOT_LABEL=$HOT_LABEL+pinned
    [ "$ISOLATE" = 0 ] || HOT_LABEL=$HOT_LABEL+isolated
fi
RESULTS=${BM_BENCH_RESULTS:-/var/tmp/balloonmgr-bench}
MIB=1048576
# as balloonmgr-policy.timer: OnUnitActiveSec=1min (the policy's timer_interval when it has one)
TIMER_INTERVAL=60
# extra bm_define_guest options for every guest (e.g. autodeflate=on), recorded in the JSON
GUEST_OPTS=${BM_SCENARIO_GUEST_OPTS:-}
# the idle guest's spare memory: free (touched and freed) or cache (its disk in the page cache)
SPARE=${BM_SCENARIO_SPARE:-free}
IDLE_CACHE_MIB=700
# issue 53: the idle guest moved through virtio-mem instead of its balloon (BM_SCENARIO_VMEM=1):
# 256 MiB of base memory and a 768 MiB virtio-mem device, all plugged, so it has the same 1 GiB;
# its balloon stays for the guest's statistics, the policy says `device = virtio-mem` for it
VMEM=${BM_SCENARIO_VMEM:-0}
case "$VMEM" in 0|1) ;; *) echo "scenario: BM_SCENARIO_VMEM '$VMEM': expected 0 or 1" >&2; exit 2 ;; esac
[ "$VMEM" = 0 ] || [ "$SPARE" = free ] ||
    { echo "scenario: BM_SCENARIO_VMEM=1 is for the idle guest's free memory, not BM_SCENARIO_SPARE=$SPARE" >&2; exit 2; }

die() { echo "scenario: $*" >&2; exit 2; }
now() { echo "$EPOCHREALTIME"; }

# isolate_loop HOT_PID SAVED: every process but the hot guest's QEMU (HOT_PID) whose CPUs
# include one beside CPU 0 is moved to CPU 0, every 2 s until killed; each moved process's list
# of CPUs is appended to SAVED ("PID LIST"), for unisolate. Pure bash reads of /proc (no process
# per PID a round); kernel threads bound to a CPU refuse the move and are left.
isolate_loop() {
    local hot=$1 saved=$2 f pid k v list
    while :; do
        for f in /proc/[0-9]*/status; do
            pid=${f#/proc/}; pid=${pid%/status}
            [ "$pid" != "$hot" ] && [ "$pid" != "$BASHPID" ] || continue
            list=""
            { while IFS=$' \t' read -r k v; do
                  [ "$k" = Cpus_allowed_list: ] && { list=$v; break; }
              done <"$f"; } 2>/dev/null
            [ -n "$list" ] && [ "$list" != 0 ] || continue
            taskset -a -p -c 0 "$pid" >/dev/null 2>&1 && echo "$pid $list" >>"$saved"
        done
        sleep 2
    done
}

# unisolate SAVED: the processes isolate_loop moved (and still alive) back to their CPUs.
unisolate() {
    local pid list
    [ -s "$1" ] || return 0
    while read -r pid list; do
        taskset -a -p -c "$list" "$pid" >/dev/null 2>&1 || true
    done <"$1"
}

# ---------------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------------
run_one() {
    local mode=$1 out=$2 short=${3:-} kind fpr_opt=""
    # kind: what runs balloonmgr (agent, timer, none)
    case "$mode" in
        agent) kind=$mode ;;
        # the timer inflates only guests with deflate-on-oom (timer_inflate's default): its
        # guests have it, as a host run by the timer should; timer-stock: guests without it
        timer) kind=timer; fpr_opt=autodeflate=on ;;
        timer-stock) kind=timer ;;
        agent-fpr) kind=agent; fpr_opt=freepagereporting=on ;;
        control) kind=none ;;
        fpr) kind=none; fpr_opt=freepagereporting=on ;;
        *) die "mode '$mode': expected agent, timer, timer-stock, control, fpr or agent-fpr" ;;
    esac
    case "$SPARE" in free|cache) ;; *) die "BM_SCENARIO_SPARE '$SPARE': expected free or cache" ;; esac
    [ -x "$BM" ] || die "no balloonmgr at $BM (meson setup build && ninja -C build, or BALLOONMGR=)"
    [ -x "$HOG" ] || die "no bm-mem-hog at $HOG (BM_MEM_HOG=)"
    # phase lengths (s): steady, pressure before the demand step, pressure after it, release
    # (the hog needs 30-90 s to take a loaded two-core host down to its target: the lead
    # leaves time for that and for the reclaim before the grower's demand steps up)
    local steady=60 lead=120 after=90 release=90
    if [ "$short" = --short ]; then steady=20 lead=90 after=50 release=30; fi
    # issue49: no grower; five minutes of pressure (--short: 140 s), the hog's second step
    # halfway (lead: up to it, after: from it)
    if [ "$LAYOUT" = issue49 ]; then
        lead=150 after=150
        [ "$short" != --short ] || lead=70 after=70
    fi
    [ -z "$AFTER" ] || after=$AFTER
    [ "$HOG_STEP_DEFAULT" = 0 ] || HOG_STEP=$lead:7%
    # each hog's target 256 MiB above the floor (bm-mem-hog refuses it otherwise): said now, not
    # minutes into the run
    hog_target_ok "$HOG_TARGET" || die "BM_HOG_TARGET $HOG_TARGET: not 256 MiB above the floor $HOG_FLOOR (BM_HOG_FLOOR)"
    [ -z "$HOG_STEP" ] || hog_target_ok "${HOG_STEP#*:}" ||
        die "BM_HOG_STEP's target ${HOG_STEP#*:}: not 256 MiB above the floor $HOG_FLOOR (BM_HOG_FLOOR)"
    # the grower's schedule counts from its own start, about when it is ready (polled every
    # 0.5 s): the steady phase starts then, its demand step comes `lead` s into the pressure
    local step_at=$((steady + lead))

    BM_PREFIX=${BM_PREFIX:-bmscen-$$-}
    . "$ROOT/tests/integration/lib/lib.sh"
    exec 9>/run/lock/balloonmgr-scenario.lock
    if ! flock -n 9; then
        bm_log "another scenario runs on this machine; waiting for it"
        flock 9
    fi
    # pinned: this shell and all it starts (libvirtd, its guests unless pinned elsewhere, the
    # hog, balloonmgr, the sampler) on CPU 0; the hot guest's threads on CPU 1 (its XML)
    local pin_other=() pin_hot=()
    if [ "$PIN" = 1 ]; then
        [ "$(nproc)" -ge 2 ] || die "BM_SCENARIO_PIN=1 needs 2 CPUs"
        taskset -pc 0 "$BASHPID" >/dev/null || die "taskset -pc 0 $BASHPID failed"
        pin_other=("extra=<cputune><vcpupin vcpu='0' cpuset='0'/><emulatorpin cpuset='0'/></cputune>")
        pin_hot=("extra=<cputune><vcpupin vcpu='0' cpuset='1'/><emulatorpin cpuset='1'/></cputune>")
    fi
    bm_setup
    W=$BM_WORKDIR; mkdir -p "$W"
    SAMPLES=$W/samples.jsonl EVENTS=$W/events.tsv
    : >"$SAMPLES"; : >"$EVENTS"

    # --- the policy: default.policy, with the keys this host needs changed (printed)
    local pol=$W/scenario.policy
    # the agent's interval 2 s; a timer host keeps the default (its pace is timer_interval /
    # interval times max_step)
    local iv_sed='s/^interval = 10s$/interval = 2s/'
    [ "$kind" = timer ] && iv_sed='s/^interval = 10s$/interval = 10s/'
    sed -e "$iv_sed" -e 's/^exclude = no$/exclude = yes/' \
        "$POLICY_SRC" >"$pol"
    printf '\n[domain "%s*"]\nexclude = no\n' "$BM_PREFIX" >>"$pol"
    if [ "$VMEM" = 1 ]; then
        printf '\n[domain "%sidle"]\ndevice = virtio-mem\n' "$BM_PREFIX" >>"$pol"
        # the timer inflates only guests that can take their memory back between its runs
        # (timer_inflate = deflate-on-oom); a virtio-mem guest cannot plug by itself, so it is
        # unplugged by the timer only when the policy says so
        [ "$kind" != timer ] || echo 'timer_inflate = always' >>"$pol"
    fi
    "$BM" policy check "$pol" >/dev/null || die "policy $pol does not check"
    bm_log "policy: $POLICY_SRC with these keys changed:"
    { diff "$POLICY_SRC" "$pol" || true; } | sed -n 's/^> \(.\)/    \1/p'
    [ "$kind" = timer ] ||
        bm_log "  interval 2s: with guest stats every 1 s, a pass every 10 s could not give a growing" \
            "guest room within the 5 s give-back target"
    bm_log "  exclude: the machine is shared; only this run's ${BM_PREFIX}* domains are managed"
    local total_b pct
    total_b=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo | jq '. * 1024')
    pct=$(awk '/^\[/ { sec = $0 } sec == "[host]" && $1 == "reclaim_below" { v = $3; sub(/%$/, "", v); print v }' "$pol")
    RECLAIM_BELOW=$(jq -n --argjson p "$pct" --argjson t "$total_b" '$p * $t / 100 | floor') ||
        die "reclaim_below in $pol is not a percentage"
    pct=$(awk '/^\[/ { sec = $0 } sec == "[host]" && $1 == "release_above" { v = $3; sub(/%$/, "", v); print v }' "$pol")
    RELEASE_ABOVE=$(jq -n --argjson p "$pct" --argjson t "$total_b" '$p * $t / 100 | floor') ||
        die "release_above in $pol is not a percentage"
    # the agent's pass interval in seconds (Ns or Nm)
    INTERVAL_S=$(awk '/^\[/ { sec = $0 } sec == "[host]" && $1 == "interval" { v = $3
        if (v ~ /^[0-9]+m$/) print v * 60; else if (v ~ /^[0-9]+s?$/) print v + 0 }' "$pol")
    [ -n "$INTERVAL_S" ] || die "interval in $pol: expected Ns or Nm"
    # the timer's interval: timer_interval (policies since issue #21), else 60 s
    local ti
    ti=$(awk '/^\[/ { sec = $0 } sec == "[host]" && $1 == "timer_interval" { v = $3
        if (v ~ /^[0-9]+m$/) print v * 60; else if (v ~ /^[0-9]+s?$/) print v + 0; else print "bad" }' "$pol")
    [ "$ti" != bad ] || die "timer_interval in $pol: expected Ns or Nm"
    [ -z "$ti" ] || TIMER_INTERVAL=$ti
    # the timer: the host is comfortable a few seconds after the hog ends, its second run after
    # that comes up to 2 timer intervals later, and its effect is read 15 s after that run
    # began (analyse: still ballooned 2 passes after comfortable)
    [ "$kind" = timer ] && release=$((2 * TIMER_INTERVAL + 25))

    # --- guests
    local t_boot; t_boot=$(now)
    [ -z "$GUEST_OPTS" ] || bm_log "every guest with: $GUEST_OPTS (BM_SCENARIO_GUEST_OPTS)"
    # the server guest's image (a no-op when it is up to date; minutes the first time)
    if [ "$HOT" = pgbench ]; then
        bash "$ROOT/tests/integration/lib/build-server-guest.sh" "$SERVER_DIR" ||
            die "tests/integration/lib/build-server-guest.sh $SERVER_DIR failed"
    fi
    # the idle guests (issue49: two) and the plain ones
    local idles=(idle) plain=(fresh steady) g
    [ "$LAYOUT" = default ] || idles=(idle idle2) plain=(steady)
    [ "$SPARE" = free ] || bm_log "the idle guests' spare memory is page cache (BM_SCENARIO_SPARE=cache)"
    [ "$VMEM" = 0 ] || bm_log "the idle guest: 256 MiB and a virtio-mem device of 768 MiB (BM_SCENARIO_VMEM=1)"
    for g in "${idles[@]}"; do
        if [ "$VMEM" = 1 ] && [ "$g" = idle ]; then
            # shellcheck disable=SC2086
            bm_define_guest "$g" 256 virtiomem=768 load=0:touch:800 "${pin_other[@]}" $fpr_opt $GUEST_OPTS
            continue
        fi
        # shellcheck disable=SC2086  # fpr_opt, GUEST_OPTS: words
        case "$SPARE" in
            free) bm_define_guest "$g" 1024 load=0:touch:800 "${pin_other[@]}" $fpr_opt $GUEST_OPTS ;;
            cache) bm_define_guest "$g" 1024 disk=$IDLE_CACHE_MIB load=0:cache:$IDLE_CACHE_MIB "${pin_other[@]}" $fpr_opt $GUEST_OPTS ;;
        esac
    done
    # shellcheck disable=SC2086
    [ "$LAYOUT" != default ] || bm_define_guest fresh 1024 "${pin_other[@]}" $fpr_opt $GUEST_OPTS
    # shellcheck disable=SC2086
    bm_define_guest steady 1024 load=0:384 "${pin_other[@]}" $fpr_opt $GUEST_OPTS
    # shellcheck disable=SC2086
    bm_define_guest cache 1024 disk=$CACHE_MIB load=0:cache:$CACHE_MIB,1:32 "${pin_other[@]}" $fpr_opt $GUEST_OPTS
    local t_anchor
    case "$HOT" in
        read|mmap)
            local hot_item=hot
            [ "$HOT" = mmap ] && hot_item=hotmap
            local hot_load=0:$hot_item:$HOT_MIB
            [ "$HOT_TOUCH" = 0 ] || hot_load=0:touch:$HOT_TOUCH,1:$hot_item:$HOT_MIB
            # shellcheck disable=SC2086
            bm_define_guest hot 1024 disk=$HOT_DISK_MIB load=$hot_load "${pin_hot[@]}" $fpr_opt $GUEST_OPTS ;;
        pgbench)
            # shellcheck disable=SC2086
            bm_define_guest hot 1024 root="$SERVER_DIR" "${pin_hot[@]}" $fpr_opt $GUEST_OPTS ;;
    esac
    for g in "${idles[@]}" "${plain[@]}" cache; do bm_wait_guest_ready "$g" 300; done
    if [ "$VMEM" = 1 ]; then
        # its device plugged in full before the steady phase (the guest plugs it block by block
        # after it boots: a sample of that would be a move in the steady phase)
        idle_plugged() { "$BM" -c "$BM_URI" status --json "$(bm_dom idle)" | jq '.domains[0].virtio_mem[0].current_bytes'; }
        plugged() { [ "$(idle_plugged)" = $((768 * MIB)) ]; }
        bm_wait_until 120 "the idle guest to plug its 768 MiB" plugged ||
            die "the idle guest plugged $(idle_plugged) bytes of 768 MiB"
    fi
    wait_cached cache "$CACHE_MIB"
    case "$HOT" in
        read|mmap)
            bm_wait_guest_ready hot 300
            # its working set read once (two rate lines: 10 s of re-reading) before the steady phase
            BM_WAIT_INTERVAL=0.5 bm_wait_until 180 "the hot guest to re-read its disk" \
                eval '[ "$(grep -c "bm-load: t=[0-9.]* hot: " "$(bm_console_log hot)")" -ge 2 ]' ||
                bm_fail "the hot guest does not re-read its disk: $(grep -a 'bm-load' "$(bm_console_log hot)" | tail -n 3)" ;;
        pgbench)
            # PostgreSQL up and its files read once (the guest's ready line), then 10 s of pgbench
            bm_wait_guest_ready hot 900
            BM_WAIT_INTERVAL=0.5 bm_wait_until 180 "the server guest's pgbench to run" \
                eval '[ "$(grep -c "bm-pgbench: progress: " "$(bm_console_log hot)")" -ge 10 ]' ||
                bm_fail "the server guest's pgbench does not run: $(grep -a 'bm-' "$(bm_console_log hot)" | tail -n 5)"
            bm_log "server guest: $(grep -a 'bm-server: ready' "$(bm_console_log hot)" | tail -n 1)" ;;
    esac
    if [ "$SPARE" = cache ]; then
        for g in "${idles[@]}"; do wait_cached "$g" "$IDLE_CACHE_MIB"; done
    fi
    if [ "$LAYOUT" = default ]; then
        # last, so that its schedule (from its start, just before it is ready) is t=0 of the phases
        # shellcheck disable=SC2086
        bm_define_guest grower 1024 "load=0:touch:600,10:96,$step_at:700@25" "${pin_other[@]}" $fpr_opt $GUEST_OPTS
        bm_wait_guest_ready grower 300
    fi
    t_anchor=$(now)
    local t_steady t_hog t_hog_end t_end
    t_steady=$(now)
    t_hog=$(awk -v a="$t_anchor" -v s="$step_at" -v l="$lead" 'BEGIN { printf "%.3f", a + s - l }')
    awk -v a="$t_steady" -v h="$t_hog" -v s="$steady" 'BEGIN { exit !(h - a >= s / 2) }' ||
        bm_fail "the guests took too long to boot: steady phase shorter than $((steady / 2)) s"
    bm_log "all guests ready after $(bm_elapsed "$t_boot") s; steady phase of" \
        "$(awk -v a="$t_steady" -v h="$t_hog" 'BEGIN { printf "%.0f", h - a }') s"

    # --- the sampler: host, guests, balloonmgr's metrics, console lines, every second
    local port="" agent="" sampler timer=""
    [ "$kind" = agent ] && port=$(bm_free_port)
    sample_loop() {
        local offs=() i c size off st met hog_rss t psi avail hp cpu hotq hotq_pid="" cpu_line=cpu
        [ "$ISOLATE" = 0 ] || cpu_line=cpu1
        for i in "${!GUESTS[@]}"; do offs[i]=0; done
        while :; do
            # the host's figures first, with the time they belong to
            t=$(awk -v s="$t_steady" -v n="$(now)" 'BEGIN { printf "%.1f", n - s }')
            avail=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
            hog_rss=0   # KiB
            for hp in "$W/hog.pid" "$W/hog2.pid"; do
                # (a hog that just ended, a zombie, has no VmRSS line)
                [ -s "$hp" ] && hog_rss=$((hog_rss + $(awk '/^VmRSS:/ { r = $2 } END { print r + 0 }' "/proc/$(cat "$hp")/status" 2>/dev/null || echo 0)))
            done
            psi=$(awk '{ split($2, a, "="); printf "%s%s", (NR > 1 ? "," : ""), a[2] }' /proc/pressure/memory 2>/dev/null || echo "0,0")
            # the CPU the hot guest runs on (CPU 1 when isolated, else the whole machine's
            # line): user nice system idle iowait irq softirq steal, in clock ticks; and the hot
            # guest's QEMU: its user and system ticks, minor and major faults (of the host)
            cpu=$(awk -v c="$cpu_line" '$1 == c { printf "[%s,%s,%s,%s,%s,%s,%s,%s]", $2, $3, $4, $5, $6, $7, $8, $9; exit }' /proc/stat 2>/dev/null)
            [ -n "$cpu" ] || cpu=null
            [ -n "$hotq_pid" ] || [ "$HOT" = none ] || hotq_pid=$(bm_qemu_pid hot 2>/dev/null) || hotq_pid=""
            hotq=null
            # (fields after the command's closing parenthesis: 8 minflt, 10 majflt, 12 utime, 13 stime)
            [ -z "$hotq_pid" ] || hotq=$(awk '{ sub(/^.*\) /, ""); printf "[%s,%s,%s,%s]", $12, $13, $8, $10 }' "/proc/$hotq_pid/stat" 2>/dev/null) || hotq=null
            [ -n "$hotq" ] || hotq=null
            st=$("$BM" -c "$BM_URI" status --json "${DOMS[@]}" 2>/dev/null) || st='{"domains":[]}'
            met='{}'
            if [ -n "$port" ]; then
                met=$(curl -sf "127.0.0.1:$port/metrics" 2>/dev/null | awk '
                    /^balloonmgr_passes_total / { p = $2 }
                    /^balloonmgr_host_mode\{/ && $2 == 1 { match($0, /mode="[a-z_]*"/); m = substr($0, RSTART + 6, RLENGTH - 7) }
                    /^balloonmgr_[a-z_]*unmet[a-z_]* / { u = $2 }
                    /^balloonmgr_hot_cache_inflated_bytes_total / { h = $2 }
                    END { printf "{\"passes\":%s,\"mode\":\"%s\",\"unmet\":%s,\"hot\":%s}", p == "" ? "null" : p, m,
                                 u == "" ? "null" : u, h == "" ? "null" : h }') || met='{}'
            fi
            jq -nc --argjson st "$st" --argjson met "$met" --arg t "$t" --arg psi "$psi" \
                --argjson hog "${hog_rss:-0}" --argjson cpu "$cpu" --argjson hotq "$hotq" \
                --argjson avail "$avail" '
                { t: ($t | tonumber), avail: ($avail * 1024), hog: ($hog * 1024),
                  psi_some: ($psi | split(",")[0] | tonumber), psi_full: ($psi | split(",")[1] | tonumber),
                  passes: $met.passes, mode: $met.mode, unmet: $met.unmet, hot_taken: $met.hot,
                  cpu: $cpu, hotq: $hotq,
                  # (a guest with a virtio-mem device: its base memory and what the devices have
                  # plugged, what the policy moves; the balloon figure of libvirt beside them,
                  # which status shows for a guest with a usable balloon, read the base alone in
                  # 1 sample of 13, those in which the bulk statistics lacked the balloon block)
                  doms: [$st.domains[] | { name, state,
                          cur: (if (.virtio_mem // []) != [] and .base_memory_bytes != null and
                                   all(.virtio_mem[]; .current_bytes != null)
                                then .base_memory_bytes + ([.virtio_mem[].current_bytes] | add)
                                else .current_bytes end),
                          max: .maximum_bytes,
                          usable: .usable_bytes, avail: .available_bytes, rss: .rss_bytes,
                          caches: .disk_caches_bytes, reads: .disk_read_bytes,
                          majflt: .major_faults, swapin: .swap_in_bytes, age: .stats_age_s }] }' \
                >>"$SAMPLES" 2>/dev/null || true
            for i in "${!GUESTS[@]}"; do
                c=$(bm_console_log "${GUESTS[i]}")
                size=$(stat -c %s "$c" 2>/dev/null || echo 0)
                off=${offs[i]}
                if [ "$size" -gt "$off" ]; then
                    # whole lines only: up to the last newline
                    tail -c +$((off + 1)) "$c" | head -c $((size - off)) >"$W/chunk"
                    local keep; keep=$(wc -c <"$W/chunk")
                    # a partial last line waits for the next round
                    [ "$(tail -c 1 "$W/chunk" | od -An -tx1 | tr -d ' ')" = 0a ] ||
                        keep=$((keep - $(tail -n 1 "$W/chunk" | wc -c)))
                    head -c "$keep" "$W/chunk" | tr -d '\r' |
                        awk -v t="$t" -v d="${GUESTS[i]}" 'NF { printf "%s\t%s\t%s\n", t, d, $0 }' >>"$EVENTS"
                    offs[i]=$((off + keep))
                fi
            done
            sleep 0.9
        done
    }
    DOMS=(); for g in "${GUESTS[@]}"; do DOMS+=("$(bm_dom "$g")"); done
    HOG_PID=""
    sample_loop &
    sampler=$!
    bm_add_cleanup "kill $sampler 2>/dev/null || true"
    event() { printf '%s\t-\t%s\n' "$(awk -v s="$t_steady" -v n="$(now)" 'BEGIN { printf "%.1f", n - s }')" "$*" >>"$EVENTS"; bm_log "$*"; }
    if [ "$ISOLATE" = 1 ]; then
        [ "$HOT" != none ] || die "BM_SCENARIO_ISOLATE=1 needs a hot guest"
        local hot_pid isolator
        hot_pid=$(bm_qemu_pid hot) || die "no QEMU pid of the hot guest"
        : >"$W/isolated"
        isolate_loop "$hot_pid" "$W/isolated" &
        isolator=$!
        bm_add_cleanup "kill $isolator 2>/dev/null || true; unisolate '$W/isolated'"
        event "isolated: every other process on CPU 0, the hot guest's QEMU ($hot_pid) alone on CPU 1"
    fi

    case "$mode" in
        agent|agent-fpr)
            # agent.log as the agent wrote it; agent-stamped.log: each line after the epoch time
            # it arrived (its change records carry no time)
            "$BM" -c "$BM_URI" agent --policy "$pol" --listen "127.0.0.1:$port" --state "$W/agent-state.json" \
                > >(stamp_lines "$W/agent.log" "$W/agent-stamped.log") 2>&1 &
            agent=$!
            bm_add_cleanup "kill $agent 2>/dev/null || true"
            event "agent started (pid $agent)" ;;
        timer|timer-stock)
            # as balloonmgr-policy.timer: a run every minute (OnUnitActiveSec=1min)
            ( next=$(now)
              while :; do
                  printf '=== %s\n' "$(awk -v s="$t_steady" -v n="$(now)" 'BEGIN { printf "%.1f", n - s }')"
                  "$BM" -c "$BM_URI" run --once --policy "$pol" --state "$W/timer-state.json" 2>&1 || true
                  next=$(awk -v n="$next" -v i="$TIMER_INTERVAL" 'BEGIN { printf "%.3f", n + i }')
                  sleep_until "$next"
              done ) >"$W/timer.log" 2>&1 &
            timer=$!
            bm_add_cleanup "stop_timer $timer"
            event "timer started: run --once every $TIMER_INTERVAL s" ;;
        control) event "control: no balloonmgr" ;;
        fpr) event "fpr: no balloonmgr, free page reporting on in every guest" ;;
    esac

    # --- steady, then the hog
    sleep_until "$t_hog"
    # The hog is a workload of a size that arrives: what takes MemAvailable to the target now
    # (--size), not "whatever keeps MemAvailable at the target": that one also ate what the
    # agent gave back while it still grew (its first inflates come at reclaim_below, 2% above
    # the target), and whether the host was relieved hung on which came first.
    local hog_size=()
    case "$HOG_TARGET" in
        *%) hog_size=(--size "$(awk -v p="${HOG_TARGET%\%}" '/^MemTotal:/ { t = $2 } /^MemAvailable:/ { a = $2 }
                END { s = (a - t * p / 100) / 1024; printf "%dM", (s > 0 ? s : 0) }' /proc/meminfo)") ;;
    esac
    # chasing: a size it never reaches (MemTotal), so it grows whenever MemAvailable is above
    # the target
    [ "$HOG_CHASE" = 0 ] || hog_size=(--size "$(awk '/^MemTotal:/ { printf "%dM", $2 / 1024 }' /proc/meminfo)")
    "$HOG" --target-available "$HOG_TARGET" "${hog_size[@]}" --floor "$HOG_FLOOR" --rate 4096 >"$W/hog.log" 2>&1 &
    HOG_PID=$!
    echo "$HOG_PID" >"$W/hog.pid"
    # a hog that refused its arguments ends at once: a run without pressure measures nothing
    sleep 0.5
    kill -0 "$HOG_PID" 2>/dev/null || die "the hog ended at its start: $(tail -n 2 "$W/hog.log")"
    bm_add_cleanup "kill $HOG_PID 2>/dev/null || true"
    event "pressure: bm-mem-hog started (pid $HOG_PID, target MemAvailable $HOG_TARGET, ${hog_size[*]:-no size}, floor $HOG_FLOOR$([ "$HOG_CHASE" = 0 ] || echo ', chasing the target'))"
    if [ "$mode" = control ] && [ "$LAYOUT" = issue49 ]; then
        event "control: no balloonmgr, no balloon set (the issue49 layout's control)"
    elif [ "$mode" = control ]; then
        sleep 10
        # what an administrator would set once: idle guests to the floor, the others to
        # their use plus some headroom (the grower to 400 MiB, as in the report of issue #14)
        bm_virsh setmem "$(bm_dom idle)" 256M --live >/dev/null || true
        bm_virsh setmem "$(bm_dom fresh)" 256M --live >/dev/null || true
        bm_virsh setmem "$(bm_dom steady)" 512M --live >/dev/null || true
        bm_virsh setmem "$(bm_dom grower)" 400M --live >/dev/null || true
        bm_virsh setmem "$(bm_dom cache)" 384M --live >/dev/null || true
        event "control: one-off virsh setmem idle 256M fresh 256M steady 512M grower 400M cache 384M"
    fi
    t_hog_end=$(awk -v h="$t_hog" -v l="$lead" -v a="$after" 'BEGIN { printf "%.3f", h + l + a }')
    local hog2=""
    if [ -n "$HOG_STEP" ]; then
        # the deeper step: a second hog that chases its target (a size it never reaches)
        sleep_until "$(awk -v h="$t_hog" -v s="${HOG_STEP%%:*}" 'BEGIN { printf "%.3f", h + s }')"
        "$HOG" --target-available "${HOG_STEP#*:}" --size "$(awk '/^MemTotal:/ { printf "%dM", $2 / 1024 }' /proc/meminfo)" \
            --floor "$HOG_FLOOR" --rate 4096 >"$W/hog2.log" 2>&1 &
        hog2=$!
        echo "$hog2" >"$W/hog2.pid"
        sleep 0.5
        kill -0 "$hog2" 2>/dev/null || die "the second hog ended at its start: $(tail -n 2 "$W/hog2.log")"
        bm_add_cleanup "kill $hog2 2>/dev/null || true"
        event "pressure step: a second bm-mem-hog (pid $hog2, chasing MemAvailable ${HOG_STEP#*:}, floor $HOG_FLOOR)"
    fi
    sleep_until "$t_hog_end"
    if [ "$kind" = timer ]; then
        # two timer runs must fit between MemAvailable crossing reclaim_below and the hog's end
        # (the hog takes 30-90 s to get there, the timer relieves within 2 runs or not): the
        # pressure lasts until 15 s after the 2nd run that can follow the crossing
        local c
        c=$(jq -sr --argjson rb "$RECLAIM_BELOW" --argjson s "$t_steady" --argjson h "$t_hog" \
            '[.[] | select(.t >= $h - $s and .avail < $rb)] | first | .t // empty' "$SAMPLES")
        if [ -n "$c" ]; then
            c=$(awk -v s="$t_steady" -v c="$c" -v i="$TIMER_INTERVAL" -v e="$t_hog_end" \
                'BEGIN { x = s + c + 2 * i + 15; printf "%.3f", (x > e ? x : e) }')
            if [ "$c" != "$t_hog_end" ]; then
                event "timer: the pressure extended by $(awk -v c="$c" -v e="$t_hog_end" 'BEGIN { printf "%.0f", c - e }') s (2 timer runs after MemAvailable crossed reclaim_below)"
                t_hog_end=$c
                sleep_until "$t_hog_end"
            fi
        fi
    fi
    kill "$HOG_PID" ${hog2:+"$hog2"} 2>/dev/null || true
    wait "$HOG_PID" ${hog2:+"$hog2"} 2>/dev/null || true
    rm -f "$W/hog.pid" "$W/hog2.pid"
    event "release: bm-mem-hog ended"
    t_end=$(awk -v h="$t_hog_end" -v r="$release" 'BEGIN { printf "%.3f", h + r }')
    sleep_until "$t_end"
    [ -n "$agent" ] && { kill "$agent" 2>/dev/null || true; wait "$agent" 2>/dev/null || true; }
    [ -n "$timer" ] && stop_timer "$timer"
    sleep 1.5
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    for g in "${GUESTS[@]}"; do
        printf '%s\t%s\tstate %s\n' "$(awk -v s="$t_steady" -v n="$(now)" 'BEGIN { printf "%.1f", n - s }')" \
            "$g" "$(bm_virsh domstate "$(bm_dom "$g")" 2>/dev/null || echo gone)" >>"$EVENTS"
    done

    local timer_passes='[]'
    [ "$kind" = timer ] && timer_passes=$(sed -n 's/^=== //p' "$W/timer.log" | jq -sc '.')
    # balloonmgr's change and mode records, "T<TAB>record" (T: seconds since the steady phase
    # began; the agent's: when the line arrived; the timer's: the start of the run that wrote it)
    RECORDS=$W/records.tsv
    case "$kind" in
        agent) awk -F '\t' -v s="$t_steady" '$2 ~ /change domain=|mode from=/ { printf "%.1f\t%s\n", $1 - s, $2 }' \
                   "$W/agent-stamped.log" >"$RECORDS" ;;
        timer) awk '/^=== / { t = $2 } /change domain=|mode from=/ { printf "%s\t%s\n", t, $0 }' "$W/timer.log" >"$RECORDS" ;;
        *) RECORDS="" ;;
    esac
    local args
    args=("$mode" "$out"
        "$(awk -v s="$t_steady" -v h="$t_hog" 'BEGIN { printf "%.1f", h - s }')"
        "$(awk -v s="$t_steady" -v h="$t_hog_end" 'BEGIN { printf "%.1f", h - s }')"
        "$(awk -v s="$t_steady" -v h="$t_end" 'BEGIN { printf "%.1f", h - s }')"
        "$timer_passes" "$total_b" "$short" "$kind")
    analyse "${args[@]}"
    # keep the raw material beside the JSON, with what `scenario.sh reanalyse` needs
    mkdir -p "${out%.json}.d"
    # (the arguments a line each through stdin: jq 1.6 takes a positional "--short" for an
    # option; none holds a newline)
    printf '%s\n' "${args[@]:2}" |
        jq -Rs '{ analyse: (split("\n")[:-1]), reclaim_below: $rb, release_above: $ra,
                  interval_s: $i, timer_interval_s: $ti, prefix: $p, guests: $g, records: $r,
                  guest_options: $o, spare: $sp, hot: $hot, layout: $layout, cold_left_mib: $cl,
                  vmem: $vm }' \
            --argjson rb "$RECLAIM_BELOW" --argjson ra "$RELEASE_ABOVE" --argjson i "$INTERVAL_S" \
            --argjson ti "$TIMER_INTERVAL" --arg p "$BM_PREFIX" --arg g "${GUESTS[*]}" \
            --argjson r "$([ -n "$RECORDS" ] && echo true || echo false)" --arg o "$GUEST_OPTS" --arg sp "$SPARE" --arg hot "$HOT_LABEL" \
            --arg layout "$LAYOUT" --argjson cl "$COLD_LEFT" --argjson vm "$VMEM" >"${out%.json}.d/analyse.json"
    cp "$pol" "$EVENTS" "$SAMPLES" ${RECORDS:+"$RECORDS"} "${out%.json}.d/" 2>/dev/null || true
    cp "$W"/*.log "${out%.json}.d/" 2>/dev/null || true
    for g in "${GUESTS[@]}"; do cp "$(bm_console_log "$g")" "${out%.json}.d/console-$g.log" 2>/dev/null || true; done
    bm_log "run written to $out"
}

# hog_target_ok TARGET: TARGET (as bm-mem-hog reads a size: N%, N, NK, NM, NG) is at least 256 MiB
# above HOG_FLOOR on this host
hog_target_ok() {
    awk -v t="$1" -v f="$HOG_FLOOR" '
        function size(s,   v) { v = s + 0
            if (s ~ /%$/) return v / 100 * total
            if (s ~ /[kK]$/) return v * 1024
            if (s ~ /[mM]$/) return v * 1048576
            if (s ~ /[gG]$/) return v * 1073741824
            return v }
        /^MemTotal:/ { total = $2 * 1024 }
        END { exit !(size(t) >= size(f) + 256 * 1048576) }' /proc/meminfo
}

# wait_cached GUEST MIB: waits until GUEST's load has read MIB MiB of its disk into its page
# cache (its "cached MIB MiB" console line); fails the run otherwise.
wait_cached() {
    local g=$1 mib=$2
    BM_WAIT_INTERVAL=0.5 bm_wait_until 120 "the $g guest to read its disk" \
        grep -q "bm-load: t=[0-9.]* cached $mib MiB" "$(bm_console_log "$g")" ||
        bm_fail "the $g guest did not read its disk: $(grep -a 'bm-load' "$(bm_console_log "$g")" | tail -n 3)"
}

# stamp_lines RAW STAMPED: copies stdin to RAW, and to STAMPED with each line after the epoch
# time it was read and a tab.
stamp_lines() {
    local l
    exec 3>"$1" 4>"$2"
    while IFS= read -r l; do
        printf '%s\n' "$l" >&3
        printf '%s\t%s\n' "$EPOCHREALTIME" "$l" >&4
    done
}

# stop_timer PID: ends the timer loop (the subshell PID) and the run --once or sleep it is in.
stop_timer() {
    local kids
    kids=$(ps -o pid= --ppid "$1" 2>/dev/null || true)
    kill "$1" 2>/dev/null || true
    # shellcheck disable=SC2086
    if [ -n "$kids" ]; then kill $kids 2>/dev/null || true; fi
}

sleep_until() {
    local d
    d=$(awk -v t="$1" -v n="$(now)" 'BEGIN { d = t - n; printf "%.3f", (d > 0 ? d : 0) }')
    sleep "$d"
}

bm_free_port() {
    local p
    for p in $(shuf -i 20000-40000 -n 50); do
        ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && { echo "$p"; return; }
    done
    die "no free port"
}

# ---------------------------------------------------------------------------------------------
# The measurements (issue #14, section 4) from the samples and the console events
# ---------------------------------------------------------------------------------------------
# analyse MODE OUT T_HOG T_HOG_END T_END TIMER_PASSES_JSON MEMTOTAL SHORT KIND
# (globals: SAMPLES, EVENTS, RECORDS (empty: no balloonmgr), RECLAIM_BELOW, RELEASE_ABOVE,
# INTERVAL_S, GUESTS, BM_PREFIX)
analyse() {
    local mode=$1 out=$2 t_hog=$3 t_hog_end=$4 t_end=$5 timer_passes=$6 total=$7 short=$8 kind=$9
    jq -n --slurpfile s "$SAMPLES" --rawfile ev "$EVENTS" --arg mode "$mode" --arg kind "$kind" \
        --rawfile rec "${RECORDS:-/dev/null}" --argjson have_rec "$([ -n "${RECORDS:-}" ] && echo true || echo false)" \
        --argjson release_above "$RELEASE_ABOVE" --argjson interval "$INTERVAL_S" \
        --argjson timer_interval "$TIMER_INTERVAL" --arg guest_opts "$GUEST_OPTS" --arg spare "$SPARE" --arg hot "$HOT_LABEL" \
        --argjson t_hog "$t_hog" --argjson t_hog_end "$t_hog_end" --argjson t_end "$t_end" \
        --argjson timer "$timer_passes" --argjson total "$total" --argjson reclaim_below "$RECLAIM_BELOW" \
        --argjson keep_free $((1024 * MIB * 15 / 100)) --argjson deadband $((32 * MIB)) \
        --arg host "$(uname -n)" --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
        --argjson ncpu "$(nproc)" --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg short "$short" \
        --arg names "${GUESTS[*]}" --arg prefix "$BM_PREFIX" --arg layout "$LAYOUT" --argjson vmem "$VMEM" \
        --argjson cold_left $((COLD_LEFT * MIB)) '
    def short_name: ltrimstr($prefix);
    # seconds for which COND held, in an array of samples (each lasts until the next one)
    def secs(cond): . as $a | [range(0; ($a | length) - 1) | select($a[.] | cond) | $a[. + 1].t - $a[.].t] | add // 0 | . * 10 | round / 10;
    def median: sort | if length == 0 then null else .[(length - 1) / 2 | floor] end;
    ($s) as $S |
    ($ev | split("\n") | map(select(length > 0) | split("\t") | { t: (.[0] | tonumber), dom: .[1], line: (.[2:] | join("\t")) })) as $E |
    ($names | split(" ")) as $G |
    # per-guest series
    def series($g): [$S[] | . as $x | ($x.doms[] | select(.name | short_name == $g)) + { t: $x.t }];
    def at($g; $t): (series($g) | map(select(.t <= $t)) | last) // (series($g) | first);
    # host relief: the first reading below reclaim_below after the hog started, then the first
    # sample back at or above it. A reading is a sample, or one of balloonmgr: its mode record
    # "mode from=X to=reclaim reason=(quote)host MemAvailable A < reclaim_below B" (an agent that
    # relieves the host within a second can leave no sample below it; the samples come every
    # second). "by" says which reading it was.
    ([$S[] | select(.t >= $t_hog and .t <= $t_hog_end + 5)]) as $P |
    (($rec | split("\n") | map(select(length > 0) | split("\t") |
        { t: (.[0] | tonumber), line: (.[1:] | join("\t")) } |
        select(.t >= $t_hog and .t <= $t_hog_end + 5) |
        select(.line | test("mode from=[a-z]+ to=reclaim reason=.host MemAvailable [^<]*< reclaim_below"))) | first) // null) as $seen |
    (($P | map(select(.avail < $reclaim_below)) | first) // null) as $sbelow |
    (if $sbelow != null and ($seen == null or $sbelow.t <= $seen.t) then { t: $sbelow.t, by: "samples" }
     elif $seen != null then { t: $seen.t, by: "balloonmgr" } else null end) as $below |
    (if $below == null then null else ($S | map(select(.t > $below.t and .avail >= $reclaim_below)) | first) end) as $back |
    # passes in a window (agent: the passes counter; timer: its runs)
    def passes($a; $b):
        if $kind == "agent" then
            (([$S[] | select(.t >= $a and .t <= $b and .passes != null) | .passes]) as $p |
             if ($p | length) == 0 then null else ($p | max) - ($p | min) end)
        elif $kind == "timer" then [$timer[] | select(. >= $a and . <= $b)] | length
        else 0 end;
    # Reversals in the pressure episode (from the start of the hog to the end of the release):
    # how often the balloon of a domain changed direction. From the samples: a move of at least
    # 1 MiB between two readings is a step (-1 inflate, +1 deflate; smaller moves are no step),
    # and a step against the step before it (pauses skipped) is a reversal. From the change
    # records of balloonmgr (in the log of the agent, at the time each line arrived: a record is
    # written when its change ends; in the output of a timer run, at the start of the run; lines
    # "change domain=QUOTED_NAME direction=inflate|deflate ..."): the same over their directions.
    def reversals: reduce .[] as $d ({dir: 0, n: 0};
        if $d == 0 then . else (if .dir != 0 and .dir != $d then .n += 1 else . end) | .dir = $d end) | .n;
    def steps: . as $c | [range(1; $c | length) | ($c[.] - $c[. - 1]) |
        if . <= -1048576 then -1 elif . >= 1048576 then 1 else 0 end];
    ($rec | split("\n") | map(select(length > 0) | split("\t") | { t: (.[0] | tonumber), line: (.[1:] | join("\t")) } |
        . + ((.line | capture("change domain=\u0027(?<dom>[^\u0027]*)\u0027 direction=(?<dir>[a-z]+)")) // { dom: null, dir: null }) |
        select(.dom != null))) as $REC |
    ([$G[] | . as $g | { key: $g, value: {
        samples: ([series($g)[] | select(.t >= $t_hog and .t <= $t_end) | .cur | select(. != null)] | steps | reversals),
        records: (if $have_rec | not then null
                  else [$REC[] | select((.dom | short_name) == $g and .t >= $t_hog and .t <= $t_end) |
                        if .dir == "inflate" then -1 elif .dir == "deflate" then 1 else 0 end] | reversals end) } }]
     | from_entries) as $rev |
    # records that do not parse (a changed log format) must not read as "no reversal": with
    # balloon moves in the samples and no record at all, the records count is unknown (null)
    ($have_rec and ($REC | length) == 0 and ([$G[] as $g | [series($g)[] | .cur | select(. != null)] | steps[] | select(. != 0)] | length) > 0) as $rec_lost |
    # The total RSS of the QEMU processes: per sample the sum over all guests (samples with the
    # RSS of every guest only); at rest: the last such sample of the steady phase; under
    # pressure: the lowest after the start of the hog up to its end.
    ([$S[] | . as $x | { t, rss: ([$G[] as $g | ($x.doms[] | select(.name | short_name == $g) | .rss)] |
        if length == ($G | length) and all(. != null) then add else null end) } | select(.rss != null)]) as $R |
    # Still ballooned 2 passes after the host is comfortable. Comfortable: the first sample from
    # the end of the hog on with MemAvailable above release_above. 2 passes: for the agent, 2 x
    # its interval after that; for the timer, 15 s after the start of its 2nd run from that
    # moment on (the changes of that run under way); none without balloonmgr. The value: the sum
    # over guests of (maximum - balloon) in the first sample from then on with every guest.
    (($S | map(select(.t >= $t_hog_end and .avail > $release_above)) | first) // null) as $comf |
    (if $comf == null then null
     elif $kind == "agent" then $comf.t + 2 * $interval
     elif $kind == "timer" then ([$timer[] | select(. >= $comf.t)] | .[1]) as $p | (if $p == null then null else $p + 15 end)
     else null end) as $t_x |
    (if $t_x == null then null
     else ($S | map(select(.t >= $t_x and (.doms | length) == ($G | length))) | first) end) as $sx |
    # the grower demand step: its "phase 3" line (1: touch and free, 2: hold 96 MiB)
    (($E | map(select(.dom == "grower" and (.line | test("bm-load: t=[0-9.]+ phase 3:")))) | first) // null) as $step |
    ($step.t // null) as $t_step |
    (if $t_step == null then null else at("grower"; $t_step) end) as $gs |
    (if $gs == null then null
     else ($S | map(select(.t >= $t_step)) | map(. as $x | { t: $x.t, cur: ($x.doms[] | select(.name | short_name == "grower") | .cur) })
           | map(select(.cur >= $gs.cur + $deadband)) | first) end) as $room |
    {
      scenario: "issue-14 pressure", layout: $layout, vmem_guest: (if $vmem == 1 then "idle" else null end), mode: $mode, short: ($short == "--short"), guest_options: $guest_opts, spare: $spare,
      machine: { host: $host, cpu: $cpu, cpus: $ncpu, mem_total_bytes: $total }, date: $date,
      phases: { steady: [0, $t_hog], pressure: [$t_hog, $t_hog_end], demand_step: $t_step,
                release: [$t_hog_end, $t_end] },
      reclaim_below_bytes: $reclaim_below,
      host: {
        min_available_bytes: ([$S[] | .avail] | min),
        seconds_below_reclaim_below: ($S | secs(.avail < $reclaim_below)),
        seconds_below_reclaim_below_in_pressure: ([$S[] | select(.t >= $t_hog and .t <= $t_hog_end)] | secs(.avail < $reclaim_below)),
        # the measure of issue 49, whatever reclaim_below the policy has
        seconds_below_10pct_in_pressure: ([$S[] | select(.t >= $t_hog and .t <= $t_hog_end)] | secs(.avail < $total / 10)),
        # issue 49: seconds under pressure in which the agent reported memory unmet
        # (balloonmgr_host_unmet_bytes > 0) while the cold cache guest still held more than
        # $cold_left of page cache above its keep_free (the smaller of its page cache and its
        # usable memory beyond keep_free: what the policy may take) and its balloon was not
        # growing (its current not down by 1 MiB by the next sample); null without metrics of
        # the agent or a cache guest
        unmet_with_cold_cache: (if ([$S[] | .unmet // empty] | length) == 0 or ($G | index("cache")) == null then null else
            ([$S[] | select(.t >= $t_hog and .t <= $t_hog_end)]) as $Q |
            [range(0; ($Q | length) - 1) as $i | $Q[$i] as $x | $Q[$i + 1] as $y |
             ([$x.doms[] | select(.name | short_name == "cache")] | first) as $c0 |
             ([$y.doms[] | select(.name | short_name == "cache")] | first) as $c1 |
             ([($c0.caches // 0), (($c0.usable // 0) - $keep_free)] | min) as $takable |
             select(($x.unmet // 0) > 0 and $c0 != null and $c1 != null and $takable > $cold_left and
                    ($c0.cur != null and $c1.cur != null and $c0.cur - $c1.cur < 1048576)) |
             { t: $x.t, d: ($y.t - $x.t), unmet: $x.unmet, caches: $c0.caches, takable: $takable }] |
            { seconds: (map(.d) | add // 0 | . * 10 | round / 10), first_at: (first.t // null),
              unmet_max_bytes: (map(.unmet) | max), cache_min_bytes: (map(.caches) | min),
              cache_above_keep_free_max_bytes: (map(.takable) | max), cold_left_bytes: $cold_left } end),
        relief: (if $below == null then { below: false }
                 else { below: true, by: $below.by, from: $below.t, to: ($back.t // null),
                        seconds: (if $back then ($back.t - $below.t) * 10 | round / 10 else null end),
                        passes: (if $back then passes($below.t; $back.t) else passes($below.t; $t_hog_end) end) } end),
        balloon_reclaimed_bytes: ([$G[] | . as $g | (at($g; $t_hog).cur // 0) - ([series($g)[] | select(.t >= $t_hog and .t <= $t_hog_end) | .cur] | min // 0)] | add),
        rss_dropped_bytes: ([$G[] | . as $g | ((at($g; $t_hog).rss // 0) - ([series($g)[] | select(.t >= $t_hog and .t <= $t_hog_end) | .rss] | min // 0))] | add),
        hog_max_bytes: ([$S[] | .hog] | max),
        psi_some_avg10_max: ([$S[] | .psi_some] | max), psi_full_avg10_max: ([$S[] | .psi_full] | max),
        passes_total: passes(0; $t_end), unmet_bytes_max: ([$S[] | .unmet // empty] | max),
        release_above_bytes: $release_above, interval_s: $interval, timer_interval_s: $timer_interval,
        reversals: { samples_max: ([$rev[] | .samples] | max), samples_sum: ([$rev[] | .samples] | add),
                     records_max: (if $have_rec and ($rec_lost | not) then [$rev[] | .records] | max else null end),
                     records_sum: (if $have_rec and ($rec_lost | not) then [$rev[] | .records] | add else null end),
                     records_parsed: (if $have_rec then $REC | length else null end),
                     per_domain: $rev },
        qemu_rss: { at_rest_bytes: ([$R[] | select(.t <= $t_hog)] | last | .rss // null),
                    min_under_pressure_bytes: ([$R[] | select(.t > $t_hog and .t <= $t_hog_end) | .rss] | min),
                    # issue 49: the mean of the total over the samples under pressure
                    mean_under_pressure_bytes: ([$R[] | select(.t > $t_hog and .t <= $t_hog_end) | .rss] |
                        if length == 0 then null else add / length | floor end) },
        after_comfortable: { comfortable_at: ($comf.t // null), due_at: $t_x, read_at: ($sx.t // null),
                             still_ballooned_bytes: (if $sx == null then null
                                 else [$sx.doms[] | (.max // 0) - (.cur // .max // 0)] | add end) }
      },
      guests: ([$G[] | . as $g | {
        key: $g, value: {
          # (the server guest of issue 49 has no bm-load: the "Killed process" lines of its kernel)
          oom_kills: (if $g == "hot" and ($hot | startswith("pgbench"))
                      then [$E[] | select(.dom == $g and (.line | test("Killed process")))] | length
                      else [$E[] | select(.dom == $g and (.line | test("bm-load: t=[0-9.]+ OOM:")))] | length end),
          kernel_oom_lines: ([$E[] | select(.dom == $g and (.line | test("Out of memory")))] | length),
          allocation_failures: ([$E[] | select(.dom == $g and (.line | test("allocation FAILED")))] | length),
          panic: ([$E[] | select(.dom == $g and (.line | test("Kernel panic")))] | length > 0),
          final_state: (([$E[] | select(.dom == $g and (.line | startswith("state ")))] | last | .line | ltrimstr("state ")) // null),
          major_faults: ((series($g) | map(.majflt // 0) | max) - (series($g) | map(.majflt // 0) | min)),
          swap_in_bytes: ((series($g) | map(.swapin // 0) | max) - (series($g) | map(.swapin // 0) | min)),
          min_current_bytes: (series($g) | map(.cur) | min),
          end_current_bytes: (series($g) | last | .cur),
          max_bytes: (series($g) | first | .max),
          seconds_usable_below_keep_free: (series($g) | secs(.usable != null and .usable < $keep_free)),
          steady_changes_per_min: (([series($g)[] | select(.t <= $t_hog) | .cur]) as $c |
              ([range(1; $c | length) | select($c[.] != $c[. - 1] and (($c[.] - $c[. - 1]) | fabs) >= 1048576)] | length) * 60 / ([$t_hog, 1] | max)),
          release_end_reclaimed_bytes: ((series($g) | last) as $l | $l.max - $l.cur),
          # issue #21: its QEMU RSS and its page cache (disk_caches), in the last sample of the
          # steady phase and the lowest after the start of the hog up to its end
          rss_at_rest_bytes: ([series($g)[] | select(.t <= $t_hog)] | last | .rss // null),
          min_rss_under_pressure_bytes: ([series($g)[] | select(.t > $t_hog and .t <= $t_hog_end) | .rss // empty] | min),
          disk_caches_at_rest_bytes: ([series($g)[] | select(.t <= $t_hog)] | last | .caches // null),
          min_disk_caches_under_pressure_bytes: ([series($g)[] | select(.t > $t_hog and .t <= $t_hog_end) | .caches // empty] | min)
        } }] | from_entries),
      # issue #32: the work of the hot guest, its re-read rate (the "hot: R MiB/s over S s"
      # lines of its console), or with the server of issue 49 the transactions a second of pgbench
      # (its "progress: P s, R tps" lines, each over the seconds since the one before), each
      # line at the time the sampler read it (the backlog of the first read, at t=0, is its
      # warm-up): before (the last 40 s of the steady phase), under pressure (from the start of
      # the hog to its end), in the minute after; as ratios to before; the worst window of 5 s
      # and of 10 s (runs of consecutive lines covering at least W - 0.5 s, their rates
      # weighted by their seconds: the 5 s window of the re-reader is its worst line) from the start
      # of the hog to a minute after; when after the hog a 10 s window first came back to 0.9 x
      # before ("back to 90%" of issue 49); the work it lost under pressure; and what it read from its disk (the block statistics
      # of QEMU) in the last 40 s of the steady phase and under pressure
      hot: (if ($G | index("hot")) == null then null else
        ([$E[] | select(.dom == "hot") | . as $e |
          ((.line | capture("bm-load: t=[0-9.]+ hot: (?<r>[0-9.]+) MiB/s( over (?<s>[0-9.]+) s)?")) //
           (.line | capture("bm-pgbench: progress: (?<p>[0-9.]+) s, (?<r>[0-9.]+) tps")) // null) |
          select(. != null) |
          { t: $e.t, r: (.r | tonumber), s: (.s // null | if . == null then null else tonumber end),
            p: (.p // null | if . == null then null else tonumber end) }] |
         # pgbench: a line covers the seconds since its line before (a pgbench started again
         # counts from 0)
         reduce .[] as $x ({ out: [], pp: null };
           .out += [$x + { s: ($x.s // (if $x.p == null then 5 elif .pp != null and $x.p > .pp then $x.p - .pp else $x.p end)) }] |
           .pp = $x.p) | .out) as $H |
        (if ([$H[] | select(.p != null)] | length) > 0 then "tps" else "MiB/s" end) as $unit |
        def mean: if length == 0 then null else add / length end;
        # the lowest mean over runs of consecutive lines of $L covering at least $w - 0.5 s
        def worst_at($L; $w): [range(0; $L | length) as $i |
            (reduce range($i; $L | length) as $j ({ n: 0, d: 0, done: false, to: null };
                if .done then . else .n += $L[$j].r * $L[$j].s | .d += $L[$j].s | .to = $L[$j].t |
                                     .done = (.d >= $w - 0.5) end)) |
            select(.done) | { r: (.n / .d), from: ($L[$i].t - $L[$i].s), to }] | min_by(.r);
        def worst($L; $w): worst_at($L; $w) | if . == null then null else .r end;
        # what ran on the CPU of the hot guest from $a to $z s (the first and the last sample
        # between with both readings): the CPU time of its QEMU as a share of that CPU, the time
        # the hypervisor under this machine took from it (steal), the rest of its busy time (the
        # kernel and other processes there), and the faults of that QEMU on the host
        def milli: . * 1000 | round / 1000;
        def cpu_in($a; $z): ([$S[] | select(.t >= $a and .t <= $z and .cpu != null and .hotq != null)]) as $c |
            if ($c | length) < 2 then null else ($c | first) as $p | ($c | last) as $q |
                ([range(0; 8) | $q.cpu[.] - $p.cpu[.]] | add) as $tot |
                if $tot <= 0 then null else
                ((($q.hotq[0] + $q.hotq[1]) - ($p.hotq[0] + $p.hotq[1])) / $tot) as $qemu |
                (($q.cpu[7] - $p.cpu[7]) / $tot) as $steal |
                ((($q.cpu[3] + $q.cpu[4]) - ($p.cpu[3] + $p.cpu[4])) / $tot) as $idle |
                { from: $p.t, to: $q.t, qemu: ($qemu | milli), steal: ($steal | milli), idle: ($idle | milli),
                  other: ((1 - $qemu - $steal - $idle) | if . < 0 then 0 else . end | milli),
                  major_faults: ($q.hotq[3] - $p.hotq[3]), minor_faults: ($q.hotq[2] - $p.hotq[2]) } end end;
        ([$H[] | select(.t >= 1 and .t > $t_hog - 40 and .t <= $t_hog) | .r] | mean) as $b |
        ([$H[] | select(.t > $t_hog and .t <= $t_hog_end) | .r] | mean) as $u |
        ([$H[] | select(.t > $t_hog_end and .t <= $t_hog_end + 60) | .r] | mean) as $a |
        ([$H[] | select(.t > $t_hog and .t <= $t_hog_end + 60)]) as $W |
        ([$H[] | select(.t > $t_hog_end)]) as $L |
        (if $b == null then null else
           [range(0; $L | length) as $i |
            (reduce range($i; $L | length) as $j ({ n: 0, d: 0, done: false };
                if .done then . else .n += $L[$j].r * $L[$j].s | .d += $L[$j].s | .done = (.d >= 9.5) end)) |
            select(.done and .n / .d >= 0.9 * $b) | $L[$i].t - $L[$i].s - $t_hog_end | if . < 0 then 0 else . end] | first
         end) as $back |
        def ratio($x): if $x == null or $b == null or $b == 0 then null else ($x / $b | milli) end;
        def reads($a; $z): ([series("hot")[] | select(.t >= $a and .t <= $z) | .reads // empty]) as $r |
            if ($r | length) < 2 then null else ($r | max) - ($r | min) end;
        { mode: $hot, rate_unit: $unit, rate_before: $b, rate_under_pressure: $u, rate_after: $a,
          under_pressure_ratio: ratio($u), after_ratio: ratio($a), worst_ratio: ratio(worst($W; 5)),
          # the seconds of its work before that the pressure cost it: (1 - under / before) x
          # the pressure (the issue 49 table: "its work lost under pressure")
          work_lost_s: (if $u == null or $b == null or $b == 0 then null
                        else (1 - $u / $b) * ($t_hog_end - $t_hog) | . * 10 | round / 10 end),
          worst_10s_ratio: ratio(worst($W; 10)),
          # the same window in the steady phase (from its first second to the hog), where
          # nothing but the guests runs: how low this guest goes on this machine by itself
          worst_10s_steady_ratio: ratio(worst([$H[] | select(.t >= 1 and .t <= $t_hog)]; 10)),
          # its CPU (cpu_in above) before, under pressure, in the minute after and in its worst
          # 10 s window
          cpu: { before: cpu_in($t_hog - 40; $t_hog), under_pressure: cpu_in($t_hog; $t_hog_end),
                 after: cpu_in($t_hog_end; $t_hog_end + 60),
                 worst_10s: (worst_at($W; 10) as $x | if $x == null then null
                             else cpu_in($x.from - 0.5; $x.to + 0.5) end) },
          back_to_90pct_s: (if $back == null then null else $back * 10 | round / 10 end),
          read_before_bytes: reads($t_hog - 40; $t_hog),
          read_under_pressure_bytes: reads($t_hog; $t_hog_end),
          min_current_bytes: ([series("hot")[] | select(.t >= $t_hog and .t <= $t_hog_end + 60) | .cur] | min) } end),
      give_back: {
        grower_current_at_step_bytes: ($gs.cur // null),
        grower_ballooned_at_step: (if $gs == null then null else $gs.cur < $gs.max end),
        latency_s: (if $gs == null or $gs.cur >= $gs.max then null
                    elif $room == null then null else ($room.t - $t_step) * 10 | round / 10 end)
      },
      timeline: [$S[] | . as $x | [.t, .avail, .hog, .passes, .psi_some] +
                  [$G[] as $g | (($x.doms[] | select(.name | short_name == $g)) // {}) | .cur, .usable, .rss]],
      timer_passes: $timer,
      timeline_columns: (["t", "avail", "hog", "passes", "psi_some"] +
                         [$G[] | "\(.)_cur", "\(.)_usable", "\(.)_rss"]),
      events: [$E[] | select(.dom == "-" or (.line | test("bm-load: t=[0-9.]+ (phase|OOM|holding|touched)|allocation FAILED|Out of memory|Killed process|Kernel panic|bm-server: (ready|postgres|pgbench)")))]
    }' >"$out.tmp"
    mv "$out.tmp" "$out"
    jq -r 'def mib: if . == null then "-" else (. / 1048576 | floor | tostring) end;
           "\(.mode): host relief \(.host.relief.seconds // "never") s in \(.host.relief.passes // "-") passes;" +
           " balloons \(.host.balloon_reclaimed_bytes / 1048576 | floor) MiB, QEMU RSS \(.host.rss_dropped_bytes / 1048576 | floor) MiB;" +
           " OOM kills \([.guests[] | .oom_kills] | add), alloc failures \([.guests[] | .allocation_failures] | add);" +
           " give-back \(.give_back.latency_s // "none") s;" +
           " reversals max \(.host.reversals.samples_max) sum \(.host.reversals.samples_sum)" +
           " (records: max \(.host.reversals.records_max // "-") sum \(.host.reversals.records_sum // "-"));" +
           " QEMU RSS total at rest \(.host.qemu_rss.at_rest_bytes | mib) MiB, lowest under pressure \(.host.qemu_rss.min_under_pressure_bytes | mib) MiB;" +
           " still ballooned 2 passes after comfortable \(.host.after_comfortable.still_ballooned_bytes | mib) MiB" +
           "; below 10% of MemTotal \(.host.seconds_below_10pct_in_pressure) s, QEMU RSS mean under pressure \(.host.qemu_rss.mean_under_pressure_bytes | mib) MiB" +
           (if .host.unmet_with_cold_cache == null then "" else "; unmet while the cold cache guest held cache \(.host.unmet_with_cold_cache.seconds) s" end) +
           (if .hot == null then "" else "; hot guest (\(.hot.mode)): rate before \(.hot.rate_before // "-" | if type == "number" then . * 10 | round / 10 else . end) \(.hot.rate_unit), under pressure \(.hot.under_pressure_ratio // "-") x before, after \(.hot.after_ratio // "-") x, worst 5 s \(.hot.worst_ratio // "-") x, worst 10 s \(.hot.worst_10s_ratio // "-") x (in the steady phase \(.hot.worst_10s_steady_ratio // "-") x), back to 0.9 x \(.hot.back_to_90pct_s // "-") s after the hog, work lost \(.hot.work_lost_s // "-") s, read \(.hot.read_before_bytes | mib) MiB in the last 40 s before and \(.hot.read_under_pressure_bytes | mib) MiB under pressure, balloon down to \(.hot.min_current_bytes | mib) MiB" +
              (if .hot.cpu.under_pressure == null then "" else "; its QEMU used \(.hot.cpu.under_pressure.qemu) of its CPU under pressure (steal \(.hot.cpu.under_pressure.steal), other work \(.hot.cpu.under_pressure.other))" +
                (if .hot.cpu.worst_10s == null then "" else ", \(.hot.cpu.worst_10s.qemu) in its worst 10 s (steal \(.hot.cpu.worst_10s.steal), other work \(.hot.cpu.worst_10s.other), \(.hot.cpu.worst_10s.major_faults) major faults on the host)" end) end) end)' "$out"
}

# reanalyse RUN.json: the measurements again, from the raw material a run kept in RUN.d/ (the
# analysis changed since the run); the machine and date stay those of the run.
reanalyse() {
    local out=$1 d=${1%.json}.d a
    [ -f "$d/analyse.json" ] || die "no $d/analyse.json (runs before it cannot be reanalysed)"
    a=$d/analyse.json
    SAMPLES=$d/samples.jsonl EVENTS=$d/events.tsv RECORDS=""
    [ "$(jq '.records' "$a")" = true ] && RECORDS=$d/records.tsv
    RECLAIM_BELOW=$(jq '.reclaim_below' "$a") RELEASE_ABOVE=$(jq '.release_above' "$a")
    INTERVAL_S=$(jq '.interval_s' "$a") TIMER_INTERVAL=$(jq '.timer_interval_s' "$a")
    BM_PREFIX=$(jq -r '.prefix' "$a") GUEST_OPTS=$(jq -r '.guest_options // ""' "$a")
    SPARE=$(jq -r '.spare // "free"' "$a") HOT=$(jq -r '.hot // "none"' "$a") HOT_LABEL=$HOT
    LAYOUT=$(jq -r '.layout // "default"' "$a") COLD_LEFT=$(jq -r ".cold_left_mib // $COLD_LEFT" "$a")
    VMEM=$(jq -r '.vmem // 0' "$a")
    read -r -a GUESTS <<<"$(jq -r '.guests' "$a")"
    local args=()
    mapfile -t args < <(jq -r '.analyse[]' "$a")
    cp "$out" "$out.before-reanalyse"
    analyse "$(jq -r '.mode' "$out")" "$out" "${args[@]}"
    jq --slurpfile old "$out.before-reanalyse" '.machine = $old[0].machine | .date = $old[0].date' "$out" >"$out.tmp"
    mv "$out.tmp" "$out"
    rm -f "$out.before-reanalyse"
}

# ---------------------------------------------------------------------------------------------
# The table: median of the runs of each mode
# ---------------------------------------------------------------------------------------------
table() {
    local dir=$1 files
    files=$(ls "$dir"/*.json 2>/dev/null) || die "no run JSON in $dir"
    # shellcheck disable=SC2086
    jq -rs '
    def median: map(select(. != null)) | sort | if length == 0 then null
        elif length % 2 == 1 then .[(length - 1) / 2] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    def mib: if . == null then "-" else (. / 1048576 | round | tostring) end;
    def num: if . == null then "-" else (. * 10 | round / 10 | tostring) end;
    # a ratio or a share (the median of an even number of runs is a mean: 3 decimals)
    def r3: if . == null then "-" else (. * 1000 | round / 1000 | tostring) end;
    # runs of the page-cache scenario (BM_SCENARIO_SPARE=cache), of another hot guest or of the
    # layout of issue 49 (BM_SCENARIO_LAYOUT=issue49) are a row of their own
    group_by([(.layout // "default"), (.spare // "free"), (.hot.mode // "none"), .mode]) | map(. as $runs | {
        mode: (.[0].mode + (if (.[0].layout // "default") == "default" then "" else " [\(.[0].layout)]" end) +
               (if (.[0].spare // "free") == "cache" then " (spare: cache)" else "" end) +
               (if (.[0].hot.mode // "none" | IN("none", "read")) then "" else " (hot: \(.[0].hot.mode))" end)),
        runs: length,
        relief: [$runs[] | .host.relief.seconds] | median,
        relieved: ([$runs[] | select(.host.relief.to != null and .host.relief.to < .phases.pressure[1] - 5)] | length),
        passes: [$runs[] | .host.relief.passes] | median,
        below: [$runs[] | .host.seconds_below_reclaim_below_in_pressure] | median,
        balloon: [$runs[] | .host.balloon_reclaimed_bytes] | median,
        rss: [$runs[] | .host.rss_dropped_bytes] | median,
        oom: [$runs[] | [.guests[] | .oom_kills] | add] | median,
        allocfail: [$runs[] | [.guests[] | .allocation_failures] | add] | median,
        dead: ([$runs[] | [.guests[] | select(.panic or (.final_state != null and .final_state != "running"))] | length] | add),
        majflt: [$runs[] | [.guests[] | .major_faults] | add] | median,
        swapin: [$runs[] | [.guests[] | .swap_in_bytes] | add] | median,
        giveback: [$runs[] | .give_back.latency_s] | median,
        ballooned: ([$runs[] | select(.give_back.grower_ballooned_at_step == true)] | length),
        steady: [$runs[] | [.guests[] | .steady_changes_per_min] | max] | median,
        starved: [$runs[] | .guests.grower.seconds_usable_below_keep_free] | median,
        left: [$runs[] | [.guests[] | .release_end_reclaimed_bytes] | add] | median,
        minavail: [$runs[] | .host.min_available_bytes] | median,
        psi: [$runs[] | .host.psi_some_avg10_max] | median,
        # issue #21 (runs before it have none of these: "-")
        rev: [$runs[] | .host.reversals.samples_max] | median,
        revsum: [$runs[] | .host.reversals.samples_sum] | median,
        recrev: [$runs[] | .host.reversals.records_max] | median,
        recrevsum: [$runs[] | .host.reversals.records_sum] | median,
        rssrest: [$runs[] | .host.qemu_rss.at_rest_bytes] | median,
        rssmin: [$runs[] | .host.qemu_rss.min_under_pressure_bytes] | median,
        left2: [$runs[] | .host.after_comfortable.still_ballooned_bytes] | median,
        # issue #32: the hot guest (runs before it: "-")
        hotu: [$runs[] | .hot.under_pressure_ratio] | median,
        hota: [$runs[] | .hot.after_ratio] | median,
        hotw: [$runs[] | .hot.worst_ratio] | median,
        hotread: [$runs[] | .hot.read_under_pressure_bytes] | median,
        hotmin: [$runs[] | .hot.min_current_bytes] | median,
        # issue 49 (runs before it: "-")
        hotb: [$runs[] | .hot.rate_before] | median,
        # its own rate under pressure and after (control is the reference: these compare modes
        # without the noise of the 40 s before of each run)
        hotru: [$runs[] | .hot.rate_under_pressure] | median,
        hotra: [$runs[] | .hot.rate_after] | median,
        hotunit: ([$runs[] | .hot.rate_unit // empty] | first // ""),
        hotw10: [$runs[] | .hot.worst_10s_ratio] | median,
        hotw10s: [$runs[] | .hot.worst_10s_steady_ratio] | median,
        hotback: [$runs[] | .hot.back_to_90pct_s] | median,
        hotlost: [$runs[] | .hot.work_lost_s] | median,
        below10: [$runs[] | .host.seconds_below_10pct_in_pressure] | median,
        rssmean: [$runs[] | .host.qemu_rss.mean_under_pressure_bytes] | median,
        coldunmet: [$runs[] | .host.unmet_with_cold_cache.seconds] | median,
        # the CPU of the hot guest (runs before it: "-")
        cpuu: [$runs[] | .hot.cpu.under_pressure.qemu] | median,
        cpuw: [$runs[] | .hot.cpu.worst_10s.qemu] | median,
        cpuws: [$runs[] | .hot.cpu.worst_10s.steal] | median,
        cpuwo: [$runs[] | .hot.cpu.worst_10s.other] | median
      }) |
    ("| mode | runs | host relief s (runs relieved before the hog ended) | passes | s below reclaim_below under pressure | balloons MiB | QEMU RSS drop MiB | guest OOM kills | alloc failures | panics/dead | major faults | swap-in MiB | give-back s (grower ballooned) | steady moves/min | grower s below keep_free | MiB still ballooned at end | min MemAvailable MiB | PSI some avg10 max | reversals/domain max (sum) | recorded reversals max (sum) | QEMU RSS at rest MiB | QEMU RSS lowest under pressure MiB | MiB ballooned 2 passes after comfortable | hot guest rate under pressure / before | in the minute after / before | worst 5 s / before | hot guest read from disk under pressure MiB | hot guest balloon lowest MiB | hot guest rate before | worst 10 s / before | back to 0.9 x after the hog s | hot guest work lost under pressure s | s below 10% of MemTotal under pressure | QEMU RSS mean under pressure MiB | s unmet while the cold cache guest held cache | hot QEMU share of its CPU under pressure | in the worst 10 s | steal there | other work there | hot guest rate under pressure | in the minute after | worst 10 s of the steady phase / before |"),
    ("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"),
    (.[] | "| \(.mode) | \(.runs) | \(.relief | num) (\(.relieved)/\(.runs)) | \(.passes | num) | \(.below | num) | \(.balloon | mib) | \(.rss | mib) | \(.oom | num) | \(.allocfail | num) | \(.dead) | \(.majflt | num) | \(.swapin | mib) | \(.giveback | num) (\(.ballooned)/\(.runs)) | \(.steady | num) | \(.starved | num) | \(.left | mib) | \(.minavail | mib) | \(.psi | num) | \(.rev | num) (\(.revsum | num)) | \(.recrev | num) (\(.recrevsum | num)) | \(.rssrest | mib) | \(.rssmin | mib) | \(.left2 | mib) | \(.hotu | r3) | \(.hota | r3) | \(.hotw | r3) | \(.hotread | mib) | \(.hotmin | mib) | \(if .hotb == null then "-" else "\(.hotb | num) \(.hotunit)" end) | \(.hotw10 | r3) | \(.hotback | num) | \(.hotlost | num) | \(.below10 | num) | \(.rssmean | mib) | \(.coldunmet | num) | \(.cpuu | r3) | \(.cpuw | r3) | \(.cpuws | r3) | \(.cpuwo | r3) | \(if .hotru == null then "-" else "\(.hotru | num) \(.hotunit)" end) | \(if .hotra == null then "-" else "\(.hotra | num) \(.hotunit)" end) | \(.hotw10s | r3) |")
    ' $files
}

# ---------------------------------------------------------------------------------------------
# The timeline picture
# ---------------------------------------------------------------------------------------------
plot() {
    local run=$1 png=$2 tmp
    command -v gnuplot >/dev/null || die "gnuplot is missing (tools/install-deps.sh bench)"
    tmp=$(mktemp -d)
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" RETURN
    jq -r '.timeline[] | map(if . == null then "NaN" else tostring end) | join("\t")' "$run" >"$tmp/t.tsv"
    jq -r '.events[] | select(.line | test("OOM:|Out of memory|Kernel panic")) | "\(.t)\t\(.dom)"' "$run" >"$tmp/oom.tsv"
    jq -r '.events[] | select(.line | test("OOM:")) | "\(.t)"' "$run" >"$tmp/oomk.tsv"
    local title cols t_hog t_end t_step rb
    title=$(jq -r '"balloonmgr scenario (issues #14, #21), mode \(.mode), \(.machine.cpus) CPUs, \(.machine.mem_total_bytes / 1073741824 | floor) GiB, \(.date)"' "$run")
    t_hog=$(jq '.phases.pressure[0]' "$run"); t_end=$(jq '.phases.pressure[1]' "$run")
    t_step=$(jq '.phases.demand_step // "NaN"' "$run"); rb=$(jq '.reclaim_below_bytes / 1073741824' "$run")
    cols=$(jq -r '.timeline_columns | join(" ")' "$run")
    # guests: 3 columns each after the 5 host columns (4 guests before issue #21, 5 since)
    local ng; ng=$(jq '(.timeline_columns | length) - 5 | . / 3 | floor' "$run")
    [ -s "$tmp/oomk.tsv" ] || echo "NaN" >"$tmp/oomk.tsv"
    # passes: the agent's counter, or a mark per timer run, or none (control)
    local passes_plot='"" using 1:4 axes x1y2 with steps lc rgb "black" title "passes (agent)"'
    if [ "$(jq '[.timeline[][3] | select(. != null)] | length' "$run")" -eq 0 ]; then
        jq -r '(.timer_passes // [])[] | "\(.)\t1"' "$run" >"$tmp/timer.tsv"
        if [ -s "$tmp/timer.tsv" ]; then
            passes_plot="\"$tmp/timer.tsv\" using 1:2 axes x1y2 with impulses lw 2 lc rgb \"black\" title \"run --once (timer)\""
        else
            passes_plot='NaN notitle'
        fi
    fi
    gnuplot <<EOF
set terminal pngcairo size 1200,1000 font ",10" noenhanced
set output "$png"
set multiplot layout 3,1 title "$title"
set grid
set xrange [0:*]
set lmargin at screen 0.07
set rmargin at screen 0.83
set xlabel "seconds since the steady phase began"
set style line 1 lc rgb "#1f77b4" lw 2
set arrow from $t_hog, graph 0 to $t_hog, graph 1 nohead dt 2 lc rgb "red"
set arrow from $t_end, graph 0 to $t_end, graph 1 nohead dt 2 lc rgb "dark-green"
set arrow from $t_step, graph 0 to $t_step, graph 1 nohead dt 2 lc rgb "orange"
set key outside right
set ylabel "GiB"
set title "host: MemAvailable, the hog (red: pressure begins, orange: grower demand step, green: hog ends)"
plot "$tmp/t.tsv" using 1:(\$2/1073741824) with lines ls 1 title "MemAvailable", \
     "" using 1:(\$3/1073741824) with lines lc rgb "gray" title "hog RSS", \
     $rb with lines dt 3 lc rgb "red" title "reclaim_below"
set title "balloon current (solid) and guest usable memory (dashed), MiB; x: OOM kill of the workload"
set ylabel "MiB"
plot for [i=0:$((ng - 1))] "$tmp/t.tsv" using 1:(column(6 + 3*i)/1048576) with lines lw 2 lc i+1 title word("$cols", 6 + 3*i), \
     for [i=0:$((ng - 1))] "" using 1:(column(7 + 3*i)/1048576) with lines dt 2 lc i+1 title word("$cols", 7 + 3*i), \
     "$tmp/oomk.tsv" using 1:(50) with points pt 2 ps 3 lc rgb "black" title "OOM kill"
set title "QEMU RSS per guest (MiB) and policy passes"
set y2label "passes"
set y2tics
plot for [i=0:$((ng - 1))] "$tmp/t.tsv" using 1:(column(8 + 3*i)/1048576) with lines lw 2 lc i+1 title word("$cols", 8 + 3*i), \
     $passes_plot
unset multiplot
EOF
    echo "scenario: wrote $png"
}

bench() {
    local runs=${1:-3} modes=${2:-agent,control,timer,fpr,agent-fpr} m i dir=$RESULTS/scenario
    mkdir -p "$dir"
    for ((i = 1; i <= runs; i++)); do
        for m in ${modes//,/ }; do
            ( run_one "$m" "$dir/$m-$i.json" ) || echo "scenario: run $m-$i failed" >&2
        done
    done
    table "$dir"
}

main() {
case "${1:-}" in
    run) [ $# -ge 3 ] || die "usage: scenario.sh run MODE OUT.json [--short]"
         run_one "$2" "$3" "${4:-}" ;;
    bench) bench "${2:-3}" "${3:-agent,control,timer,fpr,agent-fpr}" ;;
    table) table "${2:-$RESULTS/scenario}" ;;
    reanalyse) [ $# -ge 2 ] || die "usage: scenario.sh reanalyse RUN.json..."
               shift; for r in "$@"; do reanalyse "$r"; done ;;
    plot) [ $# -eq 3 ] || die "usage: scenario.sh plot RUN.json OUT.png"
          plot "$2" "$3" ;;
    *) die "usage: scenario.sh run MODE OUT.json [--short] | bench [RUNS] [MODES] | table [DIR] | reanalyse RUN.json... | plot RUN.json OUT.png" ;;
esac
}

# one line: bash has read all of it before running it, so editing this file during a run is safe
main "$@"; exit
