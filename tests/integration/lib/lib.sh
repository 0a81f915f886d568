# shellcheck shell=bash
# tests/integration/lib/lib.sh -- helpers for balloonmgr's integration tests.
#
# Source it from a bash test script:
#
#   #!/bin/bash
#   set -euo pipefail
#   . "$(dirname "$0")/lib/lib.sh"
#   bm_setup                                  # root, daemons, guest image, EXIT trap
#   bm_define_guest g1 512 touch=300          # defines + starts ${BM_PREFIX}g1
#   bm_wait_guest_ready g1
#   virsh -c qemu:///system dommemstat "$(bm_dom g1)"
#   ...
#   bm_pass "whatever was checked"
#
# or, for a plain guest, one booted once per run and shared (see bm_fixture_guest):
#
#   bm_fixture_guest touched                  # BM_DOM: bmfix-OWNER-touched, balloon at max
#
# Exit codes of a test script: 0 pass, 1 fail, 77 skip.
#
# Guest names: every function taking NAME accepts either the short name
# ("g1") or the full domain name ("${BM_PREFIX}g1"); bm_dom NAME prints the
# full one. Every test domain carries $BM_PREFIX, which is what
# bm_cleanup_guests uses to find (and only find) this test's domains.
#
# Environment (all optional; defaults in brackets):
#   BM_PREFIX          domain-name prefix [bmtest-$$-] ($$ = the test script)
#   BM_IT_STATE        state dir for daemon ownership records [/run/balloonmgr-test]
#   BM_GUEST_DIR       guest image dir [/var/lib/libvirt/images/balloonmgr-test]
#   BM_GUEST_CACHE     build-guest.sh's download cache [/var/cache/balloonmgr-test]
#   BM_WORKDIR         per-test dir for domain XML + console logs
#                      [/var/tmp/balloonmgr-test/${BM_PREFIX%-}]
#   BM_KEEP_WORKDIR=1  keep BM_WORKDIR even when the test passed
#   BM_DAEMON_TIMEOUT  seconds to wait for libvirtd to answer [60]
#   BM_URI             libvirt URI [qemu:///system]
#   BM_FIX_KVM_PERMS=0 do not touch /dev/kvm permissions (see _bm_fix_kvm_perms)
#   BM_FIXTURE_SHARE=1 fixture guests (bm_fixture_guest) belong to the process that runs the
#                      test (meson test: the integration suite sets it), so the tests of one
#                      run share them; unset: they belong to the test and end with it
#   BM_FIXTURE_DIR     fixture guests' XML and console logs [/var/tmp/balloonmgr-test/fixture]
# Set by the library:
#   BM_LIB_DIR                 directory of this file
#   BM_KERNEL, BM_INITRD       guest kernel / initramfs (bm_guest_image)
#   BM_KERNEL_VERSION          e.g. 6.1.0-57-amd64 (bm_guest_image)
#   BM_MODULES_DIR             extracted /lib/modules/VERSION tree (bm_guest_image)
#   BM_DOM                     full name of the last domain bm_define_guest made
#   BM_READY_SECONDS           boot time measured by the last bm_wait_guest_ready

BM_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BM_PREFIX=${BM_PREFIX:-bmtest-$$-}
BM_IT_STATE=${BM_IT_STATE:-/run/balloonmgr-test}
BM_GUEST_DIR=${BM_GUEST_DIR:-/var/lib/libvirt/images/balloonmgr-test}
BM_WORKDIR=${BM_WORKDIR:-/var/tmp/balloonmgr-test/${BM_PREFIX%-}}
BM_DAEMON_TIMEOUT=${BM_DAEMON_TIMEOUT:-60}
BM_URI=${BM_URI:-qemu:///system}
BM_FIXTURE_PREFIX=bmfix-
BM_FIXTURE_DIR=${BM_FIXTURE_DIR:-/var/tmp/balloonmgr-test/fixture}
export BM_PREFIX BM_IT_STATE BM_GUEST_DIR BM_WORKDIR BM_URI BM_FIXTURE_DIR

# ---------------------------------------------------------------------------
# Messages and results
# ---------------------------------------------------------------------------
bm_log()  { echo "[$(date +%H:%M:%S)] $*"; }
bm_warn() { echo "[$(date +%H:%M:%S)] WARNING: $*" >&2; }
# bm_fail MSG: print "FAIL: MSG" and exit 1 (call it from the test's own shell,
# not from inside $(...), where it would only end the subshell).
bm_fail() { echo "FAIL: $*" >&2; exit 1; }
# bm_pass MSG: print "PASS: MSG" (does not exit; use once per passed check).
bm_pass() { echo "PASS: $*"; }
# bm_skip MSG: print "SKIP: MSG" and exit 77.
bm_skip() { echo "SKIP: $*"; exit 77; }

# bm_now: seconds since the epoch with microseconds (for timings).
bm_now() { echo "${EPOCHREALTIME:-$(date +%s.%N)}"; }
# bm_mult N: N times BM_TIMEOUT_MULTIPLIER, whole (the tries of a wait loop: a guard that a
# machine busy with other work stretches, as tools/test.sh's meson timeouts).
bm_mult() { echo $(( $1 * ${BM_TIMEOUT_MULTIPLIER:-1} )); }
# bm_elapsed START: seconds since START (from bm_now), 1 decimal.
bm_elapsed() { awk -v s="$1" -v e="$(bm_now)" 'BEGIN { printf "%.1f", e - s }'; }

bm_virsh() { virsh -q -c "$BM_URI" "$@"; }

bm_require_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "SKIP: integration tests need root (libvirtd, qemu:///system)"
        exit 77
    fi
}

# bm_ensure_packages: install the host packages the tests need (only those
# that are missing), non-interactively and without recommends.
bm_ensure_packages() {
    local want=(libvirt-daemon-system libvirt-daemon-driver-qemu libvirt-clients
                qemu-system-x86 seabios busybox-static cpio jq procps)
    local missing=() p
    for p in "${want[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$p")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    bm_log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null; then
        apt-get update -qq >/dev/null
        apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null ||
            bm_fail "apt-get install ${missing[*]} failed"
    fi
}

# ---------------------------------------------------------------------------
# Daemons
# ---------------------------------------------------------------------------
# Ownership: the daemons a call of bm_start_daemons started (and a /dev/kvm
# mode it changed, see _bm_fix_kvm_perms) are recorded in
# $BM_IT_STATE/daemons.<PID of the calling shell> as "NAME PID" lines.
# bm_stop_daemons only reads the file of its own shell, so a test script that
# found the daemons already running (started by a runner) never stops them.

_bm_owner_file() { echo "$BM_IT_STATE/daemons.$$"; }

# _bm_pid_is NAME PID: PID is alive and its comm is NAME.
_bm_pid_is() {
    [ -n "$2" ] && [ -r "/proc/$2/comm" ] && [ "$(cat "/proc/$2/comm" 2>/dev/null)" = "$1" ]
}

# _bm_daemon_pid NAME: PID of a running daemon NAME (pidfile first, then any
# process whose comm is NAME), empty if none.
_bm_daemon_pid() {
    local pid=""
    [ -r "/run/$1.pid" ] && pid=$(cat "/run/$1.pid" 2>/dev/null || true)
    if _bm_pid_is "$1" "$pid"; then echo "$pid"; return 0; fi
    _bm_pgrep_here "$1"
}

# _bm_pgrep_here NAME: the first process called NAME in this shell's mount namespace (a
# libvirtd in a container, which the host's pgrep also lists, serves none of our sockets: the
# scenario took a container's libvirtd for the host's and found no socket).
_bm_pgrep_here() {
    local pid here
    here=$(readlink /proc/self/ns/mnt)
    for pid in $(pgrep -x "$1" 2>/dev/null); do
        [ "$(readlink "/proc/$pid/ns/mnt" 2>/dev/null)" = "$here" ] && { echo "$pid"; return 0; }
    done
    return 0
}

_bm_libvirt_answers() { timeout 30 virsh -q -c "$BM_URI" version >/dev/null 2>&1; }

# _bm_pidfile_live NAME: /run/NAME.pid names a running NAME.
_bm_pidfile_live() { _bm_pid_is "$1" "$(cat "/run/$1.pid" 2>/dev/null)"; }

# _bm_start_one NAME: start "NAME -d" unless running; record it if we did.
_bm_start_one() {
    local name=$1 pid
    pid=$(_bm_daemon_pid "$name")
    if [ -n "$pid" ]; then
        bm_log "$name already running (pid $pid), leaving it alone"
        return 0
    fi
    bm_log "starting $name -d"
    "$name" -d || bm_fail "'$name -d' failed"
    # -d forks; the daemon writes /run/NAME.pid once it is set up.
    bm_wait_until 10 "/run/$name.pid" _bm_pidfile_live "$name" ||
        bm_fail "$name did not come up (no live /run/$name.pid after 10 s)"
    pid=$(cat "/run/$name.pid")
    echo "$name $pid" >>"$(_bm_owner_file)"
    bm_log "$name started, pid $pid"
}

_bm_polkit_on_bus() {
    dbus-send --system --print-reply --dest=org.freedesktop.DBus / \
        org.freedesktop.DBus.GetNameOwner string:org.freedesktop.PolicyKit1 >/dev/null 2>&1
}
_bm_bus_answers() {
    [ -S /run/dbus/system_bus_socket ] &&
        dbus-send --system --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.GetId >/dev/null 2>&1
}
# _bm_started_before PID1 PID2: process PID1 started before PID2 (/proc/PID/stat's starttime)
_bm_started_before() {
    local a b
    a=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20) &&
        b=$(sed 's/.*) //' "/proc/$2/stat" 2>/dev/null | cut -d' ' -f20) &&
        [ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ]
}
# _bm_bus_pid: the system bus's dbus-daemon (its pid file, else the first here), or empty
_bm_bus_pid() {
    local pid
    pid=$(cat /run/dbus/pid 2>/dev/null || true)
    _bm_pid_is dbus-daemon "$pid" && { echo "$pid"; return 0; }
    _bm_pgrep_here dbus-daemon
}

# _bm_start_polkit: libvirt asks polkit (over the system bus) whether a
# non-root client may use a socket: the read-only socket is open to any local
# user by libvirt's polkit policy (org.libvirt.unix.monitor, allow_any), the
# read-write one is not. Without a system bus (a container without systemd)
# libvirtd refuses every non-root client, so the monitoring-only mode could not
# be tested as it runs on a host. Starts dbus-daemon --system and polkitd when
# they do not answer on the bus, each waited for until it answers there (polkitd
# takes seconds on a busy machine), records them like the daemons; libvirtd is
# started after them (bm_start_daemons: libvirt keeps the bus it found at its start
# for its life). BM_POLKIT=0 disables this.
_bm_start_polkit() {
    local pid polkitd=/usr/lib/polkit-1/polkitd
    [ "${BM_POLKIT:-1}" = 1 ] && command -v dbus-daemon >/dev/null && [ -x "$polkitd" ] || return 0
    if _bm_bus_answers; then
        bm_log "system bus already running, leaving it alone"
    else
        mkdir -p /run/dbus
        rm -f /run/dbus/pid /run/dbus/system_bus_socket    # stale: no bus answers on it
        pid=$(dbus-daemon --system --fork --print-pid) || bm_fail "'dbus-daemon --system' failed"
        echo "dbus-daemon $pid" >>"$(_bm_owner_file)"
        bm_wait_until 30 "the system bus (dbus-daemon $pid) to answer" _bm_bus_answers ||
            bm_fail "dbus-daemon $pid does not answer on /run/dbus/system_bus_socket"
        bm_log "dbus-daemon --system started, pid $pid"
    fi
    # a polkitd that is not on this bus (one of a bus since stopped) serves nobody: polkit
    # counts as running only when it owns its name on the bus
    if _bm_polkit_on_bus; then
        bm_log "polkit already on the system bus, leaving it alone"
        return 0
    fi
    "$polkitd" --no-debug </dev/null >/dev/null 2>&1 &
    pid=$!
    echo "polkitd $pid" >>"$(_bm_owner_file)"
    bm_wait_until 60 "polkitd $pid to own org.freedesktop.PolicyKit1 on the system bus" _bm_polkit_on_bus ||
        bm_fail "polkitd $pid is not on the system bus: libvirt could not ask it about non-root clients"
    bm_log "polkitd started, pid $pid"
}

# _bm_fix_kvm_perms: libvirt 9.0's QMP probe reports KVM, but its cache
# validity check (access to /dev/kvm as the QEMU user) fails while /dev/kvm
# is not read/writable by libvirt-qemu, so the capability cache is stale on
# every lookup ("KVM was enabled when probing ..., but it
# is not available now"), re-probing QEMU for ~4 s per binary on each API
# call (virsh start took ~45 s). Without udev, /dev/kvm stays root:root 0600,
# so give it the ownership Debian's udev rules would (root:kvm 0660). Our
# guests still use TCG (<domain type='qemu'>). The old mode is recorded like
# a started daemon and restored by bm_stop_daemons of the same shell.
# BM_FIX_KVM_PERMS=0 disables this.
_bm_fix_kvm_perms() {
    local before
    [ "${BM_FIX_KVM_PERMS:-1}" = 1 ] && [ -c /dev/kvm ] || return 0
    getent group kvm >/dev/null && getent passwd libvirt-qemu >/dev/null || return 0
    runuser -u libvirt-qemu -- test -r /dev/kvm -a -w /dev/kvm 2>/dev/null && return 0
    before=$(stat -c '%u:%g:%a' /dev/kvm)
    chown root:kvm /dev/kvm && chmod 0660 /dev/kvm || { bm_warn "could not fix /dev/kvm permissions"; return 0; }
    echo "kvmperms $before" >>"$(_bm_owner_file)"
    bm_log "/dev/kvm was $before, set to root:kvm 0660 (libvirt capability cache)"
}

# bm_start_daemons: make sure virtlogd and libvirtd run and qemu:///system
# answers; records what this call started (see above). Idempotent.
bm_start_daemons() {
    local f owner
    mkdir -p "$BM_IT_STATE"
    # Forget records of shells that no longer exist.
    for f in "$BM_IT_STATE"/daemons.*; do
        [ -e "$f" ] || continue
        owner=${f##*.}
        kill -0 "$owner" 2>/dev/null || rm -f "$f"
    done
    _bm_fix_kvm_perms
    _bm_start_polkit
    _bm_start_one virtlogd
    # A daemon that already answers (libvirtd or a modular virtqemud) is fine, unless it is a
    # libvirtd older than the system bus: libvirt connects to the system bus once, at its start,
    # and keeps that connection, or the failure, for its life (virGDBusGetSystemBus()). One
    # started before any bus (Debian's package starts libvirtd at its install, before the suite
    # starts a bus) answers every non-root client "Unable to get system bus connection: Could
    # not connect: No such file or directory", one whose bus has since stopped (a run's end)
    # gives the bus's error: it cannot tell polkit's answer for the read-only socket. It is
    # started again, after the bus, and is ours from then on.
    local lpid bpid
    if _bm_libvirt_answers; then
        lpid=$(_bm_daemon_pid libvirtd) bpid=$(_bm_bus_pid)
        if [ -n "$lpid" ] && [ -n "$bpid" ] && _bm_started_before "$lpid" "$bpid"; then
            bm_log "libvirtd (pid $lpid) started before the system bus (dbus-daemon $bpid): starting it again after it"
            bm_terminate libvirtd "$lpid" 30 _bm_pid_is libvirtd "$lpid"
            rm -f /run/libvirtd.pid
            _bm_start_one libvirtd
        else
            bm_log "libvirt already answers on $BM_URI"
        fi
    else
        _bm_start_one libvirtd
    fi
    BM_WAIT_INTERVAL=0.5 bm_wait_until "$BM_DAEMON_TIMEOUT" "libvirt on $BM_URI" _bm_libvirt_answers ||
        bm_fail "libvirt did not answer on $BM_URI within $BM_DAEMON_TIMEOUT s" \
            "(see /var/log/libvirt/ and 'libvirtd -v')"
    bm_log "libvirt answers on $BM_URI"
}

# bm_hugetlbfs: a hugetlbfs mount for a guest on huge pages (<memoryBacking><hugepages/>):
# /dev/hugepages is mounted here when no hugetlbfs is (and unmounted at the test's exit, after
# its guests: register this before them), and a running libvirtd, which looks for hugetlbfs
# mounts once at its start, is started again after the mount (ours from then on, as after the
# system bus in bm_start_daemons).
bm_hugetlbfs() {
    local lpid
    awk '$3 == "hugetlbfs" { found = 1 } END { exit !found }' /proc/mounts && return 0
    mkdir -p /dev/hugepages
    mount -t hugetlbfs -o pagesize=2M hugetlbfs /dev/hugepages || bm_fail "cannot mount hugetlbfs on /dev/hugepages"
    bm_add_cleanup "umount /dev/hugepages || bm_warn 'could not unmount /dev/hugepages'"
    bm_log "mounted hugetlbfs on /dev/hugepages"
    lpid=$(_bm_daemon_pid libvirtd)
    if [ -n "$lpid" ]; then
        bm_log "libvirtd (pid $lpid) started before the hugetlbfs mount: starting it again after it"
        bm_terminate libvirtd "$lpid" 30 _bm_pid_is libvirtd "$lpid"
        rm -f /run/libvirtd.pid
        _bm_start_one libvirtd
        BM_WAIT_INTERVAL=0.5 bm_wait_until "$BM_DAEMON_TIMEOUT" "libvirt on $BM_URI" _bm_libvirt_answers ||
            bm_fail "libvirt did not answer on $BM_URI after its restart"
    fi
}

# bm_stop_daemons: stop exactly the daemons bm_start_daemons started in this
# shell: TERM, wait up to 15 s, then KILL. Anything else is left running.
bm_stop_daemons() {
    local f name pid
    f=$(_bm_owner_file)
    [ -f "$f" ] || return 0
    # Stop in reverse start order (libvirtd before virtlogd).
    while read -r name pid; do
        if [ "$name" = kvmperms ]; then          # "kvmperms UID:GID:MODE"
            bm_log "restoring /dev/kvm to $pid"
            chown "${pid%:*}" /dev/kvm && chmod "${pid##*:}" /dev/kvm ||
                bm_warn "could not restore /dev/kvm to $pid"
            continue
        fi
        if ! _bm_pid_is "$name" "$pid"; then
            bm_log "$name (pid $pid) already gone"
            continue
        fi
        bm_log "stopping $name (pid $pid)"
        bm_terminate "$name" "$pid" 15 _bm_pid_is "$name" "$pid"
        # the bus's files with it: a socket nobody listens on makes every later client's
        # connect fail with "Connection refused" instead of starting a bus
        if [ "$name" = dbus-daemon ] && [ "$(cat /run/dbus/pid 2>/dev/null)" = "$pid" ]; then
            rm -f /run/dbus/pid
            _bm_bus_answers || rm -f /run/dbus/system_bus_socket
        fi
    done < <(tac "$f")
    rm -f "$f"
}

# ---------------------------------------------------------------------------
# Guest image
# ---------------------------------------------------------------------------
# bm_guest_image: build (or reuse) the guest; sets BM_KERNEL, BM_INITRD,
# BM_KERNEL_VERSION, BM_MODULES_DIR.
bm_guest_image() {
    local t0
    t0=$(bm_now)
    bash "$BM_LIB_DIR/build-guest.sh" "$BM_GUEST_DIR" || bm_fail "build-guest.sh failed"
    BM_KERNEL=$BM_GUEST_DIR/vmlinuz
    BM_INITRD=$BM_GUEST_DIR/initrd.img
    BM_KERNEL_VERSION=$(cat "$BM_GUEST_DIR/kernel-version")
    BM_MODULES_DIR=$(cat "$BM_GUEST_DIR/modules-dir")
    export BM_KERNEL BM_INITRD BM_KERNEL_VERSION BM_MODULES_DIR
    bm_log "guest image ready in $(bm_elapsed "$t0") s (kernel $BM_KERNEL_VERSION)"
}

# ---------------------------------------------------------------------------
# Guests
# ---------------------------------------------------------------------------
# bm_dom NAME: full domain name (adds $BM_PREFIX unless already there; a fixture guest's
# name, bmfix-..., is its own).
bm_dom() {
    case "$1" in
        "$BM_PREFIX"*|"$BM_FIXTURE_PREFIX"*) echo "$1" ;;
        *) echo "$BM_PREFIX$1" ;;
    esac
}
# bm_guest_dir NAME: per-guest dir under BM_WORKDIR (domain XML, console log); a fixture
# guest's is under BM_FIXTURE_DIR (it outlives the test).
bm_guest_dir() {
    local dom
    dom=$(bm_dom "$1")
    case "$dom" in
        "$BM_FIXTURE_PREFIX"*) echo "$BM_FIXTURE_DIR/$dom" ;;
        *) echo "$BM_WORKDIR/$dom" ;;
    esac
}
# bm_console_log NAME: path of the guest's serial console log.
bm_console_log() { echo "$(bm_guest_dir "$1")/console.log"; }
# bm_console_since NAME: the guest's console from where this test took it over (a fixture
# guest's earlier tests wrote the lines before; another guest's: all of it).
declare -A BM_CONSOLE_FROM=()
bm_console_since() {
    local dom
    dom=$(bm_dom "$1")
    tail -c +"$((${BM_CONSOLE_FROM[$dom]:-0} + 1))" "$(bm_console_log "$dom")" 2>/dev/null
}
# bm_console_has NAME REGEX: a line of bm_console_since NAME matches REGEX (grep's)
bm_console_has() {
    local c
    c=$(bm_console_since "$1")
    grep -q -- "$2" <<<"$c"
}

_bm_xml_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e "s/'/\&apos;/g"; }

# bm_define_guest NAME MEM_MIB [key=value ...]
#   Defines (persistent) and starts a TCG guest with direct kernel boot.
#   Options:
#     touch=MIB            guest touches then frees MIB MiB (bm.touch=MIB)
#     load=SCHEDULE        the guest runs bm-guest-load SCHEDULE (bm.load=, see
#                          build-guest.sh and guest-load.c): demand over time
#     noballoon=1          guest does not load virtio_balloon
#     current=MIB          <currentMemory> (default MEM_MIB)
#     vcpus=N              default 1
#     stats=SECONDS        balloon stats period (default 1; 0 = no <stats>)
#     balloon=none         <memballoon model='none'/> (no balloon device)
#     autodeflate=on|off   memballoon autodeflate attribute
#     freepagereporting=on|off  memballoon freePageReporting attribute
#     disk=MIB             a read-only virtio disk (the guest's /dev/vda, virtio_blk) of MIB
#                          MiB of random bytes (bm_disk_image; bm.load's cache:MIB reads it
#                          into the guest's page cache)
#     root=DIR             boot a real distribution's root: DIR as build-server-guest.sh
#                          makes it (DIR/boot's kernel and initramfs, DIR/root.img); the image
#                          through a qcow2 overlay of the guest's own (in its dir, made anew at
#                          each start: the image is never written), read-write, cache='none'
#                          (a miss is a real read); bm.root=/dev/vda and
#                          bm.rootinit=/usr/local/sbin/bm-server-init on the command line. Not
#                          with disk=.
#     virtiomem=SIZE[:REQ[:BLOCK]]  a virtio-mem device of SIZE MiB asking REQ MiB (default
#                          SIZE) in BLOCK KiB blocks (default 2048) on guest NUMA node 0 (a
#                          NUMA cell of MEM_MIB, <maxMemory slots='2'>; <memory> is MEM_MIB +
#                          SIZE and <currentMemory> that too unless current=), its memory onlined
#                          movable (memhp_default_state=online_movable: unplugged again);
#                          the guest is ready once its MemTotal shows REQ (bm.memtotal: its
#                          base and REQ less 128 MiB and REQ/32 of the kernel's own: 653 MiB
#                          of 256 + 512 on Linux 6.1; a REQ of some 256 MiB or more), unless
#                          novirtiomem=1: the guest loads no virtio_mem driver
#     hugepages=1          <memoryBacking><hugepages/>: all guest memory (the virtio-mem
#                          device's too) from the host's 2 MiB huge pages, reserved by the test
#     emulator=PATH        <emulator> (e.g. a patched QEMU)
#     devices=XML          extra XML appended inside <devices>
#     extra=XML            extra XML appended at the end of <domain> (e.g. <iothreads>,
#                          <qemu:override>; the qemu: namespace is declared)
#     cmdline=STRING       appended verbatim to the kernel command line
#     anything else K=V    passed to the guest as bm.K=V
#   Sets BM_DOM to the full domain name.
# Extra domain XML (bm_define_guest ... "extra=$BM_FPH_XML") for a balloon with QEMU's
# free-page-hint on; it needs an iothread. Free page hinting uses feature bit 3, the bit of
# the 2017 SG series: a guest with it must never be reported as SG.
BM_FPH_XML="<iothreads>1</iothreads><qemu:override><qemu:device alias='balloon0'><qemu:frontend>\
<qemu:property name='iothread' type='string' value='iothread1'/>\
<qemu:property name='free-page-hint' type='bool' value='true'/>\
</qemu:frontend></qemu:device></qemu:override>"

# bm_qemu_balloon_has PROP: the default emulator's virtio-balloon-pci has property PROP (QEMU
# >= 10.0 has ioeventfd; 7.2 has not). Asks the binary itself (-device ...,help), no guest.
bm_qemu_balloon_has() {
    local qemu
    qemu=$(command -v qemu-system-x86_64) || return 1
    "$qemu" -nodefaults -machine none -device virtio-balloon-pci,help 2>/dev/null |
        grep -q "^ *$1="
}

# bm_disk_image MIB: prints the path of $BM_GUEST_DIR/disk-MIBM.img, MIB MiB from /dev/urandom
# (random: no zero pages for KSM or the host to share), made once and kept for the next runs,
# 0644: libvirt-qemu reads it.
bm_disk_image() {
    local img=$BM_GUEST_DIR/disk-$1M.img
    case "$1" in ''|*[!0-9]*|0) bm_fail "bm_disk_image: size '$1': expected MiB > 0" ;; esac
    if [ "$(stat -c %s "$img" 2>/dev/null || echo 0)" != $(($1 * 1048576)) ]; then
        bm_log "making $img ($1 MiB from /dev/urandom)" >&2
        dd if=/dev/urandom of="$img.tmp.$$" bs=1M count="$1" status=none ||
            bm_fail "cannot write $img.tmp.$$"
        chmod 0644 "$img.tmp.$$"
        mv -f "$img.tmp.$$" "$img"
    fi
    echo "$img"
}

bm_define_guest() {
    [ $# -ge 2 ] || bm_fail "usage: bm_define_guest NAME MEM_MIB [key=value ...]"
    local dom mem cur vcpus=1 stats=1 balloon=virtio autodeflate="" fpr=""
    # no_timer_check: under TCG on a loaded host the guest kernel's IO-APIC timer check can
    # miss its ticks and panic at boot ("IO-APIC + timer doesn't work!"); seen with the suite
    # running beside other guests.
    local emulator="" devices="" extra="" cmdline="console=ttyS0 quiet panic=-1 no_timer_check"
    local dir console xml opt key val battrs="" bstats="" emu_xml="" disk="" img dcache=none
    local root="" kernel=${BM_KERNEL:-} initrd=${BM_INITRD:-} overlay
    local vmem="" vmem_xml="" max_xml="" numa_xml="" backing_xml="" total cur_set=0
    dom=$(bm_dom "$1"); mem=$2; cur=$2; shift 2
    for opt in "$@"; do
        case "$opt" in *=*) ;; *) bm_fail "bm_define_guest: option '$opt' is not key=value" ;; esac
        key=${opt%%=*}; val=${opt#*=}
        case "$key" in
            current)           cur=$val; cur_set=1 ;;
            virtiomem)         vmem=$val ;;
            hugepages)         [ "$val" = 1 ] && backing_xml="<memoryBacking><hugepages/></memoryBacking>" ;;
            vcpus)             vcpus=$val ;;
            stats)             stats=$val ;;
            balloon)           balloon=$val ;;
            autodeflate)       autodeflate=$val ;;
            freepagereporting) fpr=$val ;;
            disk)              disk=$val ;;
            root)              root=$val ;;
            emulator)          emulator=$val ;;
            devices)           devices="$devices$val" ;;
            extra)             extra="$extra$val" ;;
            cmdline)           cmdline="$cmdline $val" ;;
            *)                 cmdline="$cmdline bm.$key=$val" ;;
        esac
    done
    if [ -z "$root" ] && { [ -z "${BM_KERNEL:-}" ] || [ -z "${BM_INITRD:-}" ]; }; then
        bm_fail "bm_define_guest: call bm_guest_image (or bm_setup) first"
    fi

    total=$mem
    if [ -n "$vmem" ]; then
        local vsize vreq vblock
        IFS=: read -r vsize vreq vblock <<<"$vmem"
        vreq=${vreq:-$vsize}; vblock=${vblock:-2048}
        case "$vsize$vreq$vblock" in ''|*[!0-9]*) bm_fail "bm_define_guest: virtiomem='$vmem': expected SIZE[:REQ[:BLOCK]] in MiB, MiB, KiB" ;; esac
        total=$((mem + vsize))
        [ "$cur_set" = 1 ] || cur=$total
        max_xml="<maxMemory slots='2' unit='MiB'>$((total + 1024))</maxMemory>"
        local cpus=0
        [ "$vcpus" -le 1 ] || cpus="0-$((vcpus - 1))"
        numa_xml="<cpu><numa><cell id='0' cpus='$cpus' memory='$mem' unit='MiB'/></numa></cpu>"
        vmem_xml="<memory model='virtio-mem'><target><size unit='MiB'>$vsize</size><node>0</node>\
<block unit='KiB'>$vblock</block><requested unit='MiB'>$vreq</requested></target></memory>"
        cmdline="$cmdline memhp_default_state=online_movable"
        case " $* " in
            *" novirtiomem=1 "*) ;;
            *) [ "$vreq" -eq 0 ] || cmdline="$cmdline bm.memtotal=$((mem + vreq - 128 - vreq / 32))" ;;
        esac
    fi

    dir=$(bm_guest_dir "$dom"); console="$dir/console.log"; xml="$dir/domain.xml"
    mkdir -p "$dir"
    chmod 0755 "${dir%/*}" "$dir"
    rm -f "$console"

    if [ "$balloon" = none ]; then
        battrs=" model='none'"
    else
        battrs=" model='$balloon'"
        [ -n "$autodeflate" ] && battrs="$battrs autodeflate='$autodeflate'"
        [ -n "$fpr" ] && battrs="$battrs freePageReporting='$fpr'"
        [ "$stats" != 0 ] && bstats="<stats period='$stats'/>"
    fi
    [ -n "$emulator" ] && emu_xml="<emulator>$(printf '%s' "$emulator" | _bm_xml_escape)</emulator>"
    [ -z "$root" ] || [ -z "$disk" ] || bm_fail "bm_define_guest: root= and disk= together"
    if [ -n "$root" ]; then
        for img in "$root/boot/vmlinuz" "$root/boot/initrd.img" "$root/root.img"; do
            [ -s "$img" ] || bm_fail "bm_define_guest: root=$root: no $img (build-server-guest.sh)"
        done
        kernel=$root/boot/vmlinuz; initrd=$root/boot/initrd.img
        overlay=$dir/root-overlay.qcow2
        rm -f "$overlay"
        qemu-img create -q -f qcow2 -o backing_file="$root/root.img",backing_fmt=raw "$overlay" ||
            bm_fail "cannot make the overlay $overlay of $root/root.img"
        # the overlay is QEMU's to write (libvirt labels it); the image below only read, as root's
        # 0644 file (relabel='no', the backing store named here so that libvirt leaves it alone)
        dd if="$root/root.img" of=/dev/null bs=4096 count=1 iflag=direct status=none 2>/dev/null || dcache=default
        devices="<disk type='file' device='disk'><driver name='qemu' type='qcow2' cache='$dcache'/>\
<source file='$overlay'/>\
<backingStore type='file'><format type='raw'/><source file='$root/root.img'><seclabel model='dac' relabel='no'/></source><backingStore/></backingStore>\
<target dev='vda' bus='virtio'/></disk>$devices"
        cmdline="$cmdline bm.root=/dev/vda bm.rootinit=/usr/local/sbin/bm-server-init"
    fi
    if [ -n "$disk" ]; then
        # read-only and shared by the guests of a run; cache='none' (O_DIRECT) where the file
        # system has it (tmpfs before Linux 6.6 has not): the guest's reads land in its own
        # memory, not in the host's page cache too; relabel='no': the image stays root's, 0644
        img=$(bm_disk_image "$disk") || exit 1
        dd if="$img" of=/dev/null bs=4096 count=1 iflag=direct status=none 2>/dev/null || dcache=default
        devices="<disk type='file' device='disk'><driver name='qemu' type='raw' cache='$dcache'/>\
<source file='$img'><seclabel model='dac' relabel='no'/></source>\
<target dev='vda' bus='virtio'/><readonly/></disk>$devices"
    fi

    cat >"$xml" <<EOF
<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>$dom</name>
  $max_xml
  <memory unit='MiB'>$total</memory>
  <currentMemory unit='MiB'>$cur</currentMemory>
  $backing_xml
  <vcpu placement='static'>$vcpus</vcpu>
  $numa_xml
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$kernel</kernel>
    <initrd>$initrd</initrd>
    <cmdline>$(printf '%s' "$cmdline" | _bm_xml_escape)</cmdline>
  </os>
  <features><acpi/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    $emu_xml
    <controller type='usb' model='none'/>
    <serial type='file'>
      <source path='$console'/>
      <target port='0'/>
    </serial>
    <console type='file'>
      <source path='$console'/>
      <target type='serial' port='0'/>
    </console>
    <memballoon$battrs>$bstats</memballoon>
    $vmem_xml
    $devices
  </devices>
  $extra
</domain>
EOF
    bm_virsh define "$xml" >/dev/null || bm_fail "virsh define $xml failed"
    bm_virsh start "$dom" >/dev/null || bm_fail "virsh start $dom failed"
    # shellcheck disable=SC2034  # used by the calling test
    BM_DOM=$dom
    bm_log "started $dom (${mem} MiB, cmdline: $cmdline)"
}

# bm_wait_guest_ready NAME [TIMEOUT_S=120]: wait for BALLOONMGR-GUEST-READY
# on the guest's console. Sets BM_READY_SECONDS. On timeout (or if the domain
# stops) prints the console tail and fails the test.
bm_wait_guest_ready() {
    local dom console timeout=${2:-120} t0
    dom=$(bm_dom "$1"); console=$(bm_console_log "$dom")
    t0=$(bm_now)
    _BM_READY_TRIES=0
    if ! BM_WAIT_INTERVAL=0.5 bm_wait_until "$timeout" "$dom to boot" _bm_guest_ready "$dom" "$console"; then
        _bm_console_tail "$dom" "$console"
        bm_fail "$dom not ready within $timeout s"
    fi
    BM_READY_SECONDS=$(bm_elapsed "$t0")
    bm_log "$dom ready after $BM_READY_SECONDS s of waiting"
}

# _bm_guest_ready DOM CONSOLE: the guest said it is ready; every 4th call (2 s) fails the
# test if the domain no longer runs.
_bm_guest_ready() {
    local state
    grep -q "BALLOONMGR-GUEST-READY" "$2" 2>/dev/null && return 0
    if ((_BM_READY_TRIES++ % 4 == 0)); then
        state=$(bm_virsh domstate "$1" 2>/dev/null || echo "undefined")
        if [ "$state" != running ]; then
            _bm_console_tail "$1" "$2"
            bm_fail "$1 is '$state' while waiting for it to become ready"
        fi
    fi
    return 1
}

_bm_console_tail() {
    echo "--- console of $1 ($2), tail ---" >&2
    tail -n 40 "$2" >&2 2>/dev/null || true
}

# bm_cleanup_guests: destroy and undefine every domain named $BM_PREFIX*, all at once (a
# TCG guest's QEMU takes 1-3 s to end; five of them one by one were 9 s of each pressure run)
bm_cleanup_guests() {
    local dom pids=()
    if ! _bm_libvirt_answers; then
        bm_warn "libvirt not answering; cannot clean up ${BM_PREFIX}* domains"
        return 0
    fi
    while read -r dom; do
        case "$dom" in "$BM_PREFIX"*) ;; *) continue ;; esac
        bm_log "cleaning up $dom"
        {
            bm_virsh destroy "$dom" >/dev/null 2>&1 || true
            bm_virsh undefine "$dom" >/dev/null 2>&1 || bm_warn "undefine $dom failed"
        } &
        pids+=($!)
    done < <(bm_virsh list --all --name 2>/dev/null)
    [ ${#pids[@]} -eq 0 ] || wait "${pids[@]}" || true
}

# ---------------------------------------------------------------------------
# Fixture guests: booted once, shared by the tests of a run
# ---------------------------------------------------------------------------
# bm_fixture_guest KIND... sets BM_DOM to a running guest of KIND (see _bm_fixture_spec),
# booted by an earlier test of the same run or now, and put back in a known state: the
# balloon at its maximum again (reached), a guest with retouch has touched its memory again
# after the last inflate and deflate, its persistent XML as it was booted. The test may move
# the balloon; it must leave the persistent XML alone and the guest running, else it fails at
# its exit and the guest is stopped (bm_fixture_forget first if it ends the guest on purpose).
# Its names are bmfix-OWNER-KIND, outside $BM_PREFIX (bm_pressure_policy manages the fixture
# guests the test took too); the console lines since the test took it: bm_console_since.
#
# A fixture guest belongs to a process, its owner (named in its <description>): the test
# itself, or with BM_FIXTURE_SHARE=1 the process that runs the test (meson test), so the tests
# of one run share it (not when the test started virtlogd or libvirtd itself: they end with
# it, and the guest's console with them). It is stopped, by its exact name:
#   - at the test's exit when the test owns it (a test run alone, by hand);
#   - by test-fixture-stop (bm_fixture_stop) after the last test that uses one in the suite;
#   - by a reaper (a detached process started with the first guest of an owner) once the owner
#     has ended: `meson test test-status` alone, a run killed;
#   - by the first fixture use on this host after its owner has ended (a reaper killed too).
BM_FIXTURE_TAKEN=()

# _bm_fixture_spec KIND: MEM_MIB and bm_define_guest's options of KIND
_bm_fixture_spec() {
    case "$1" in
        touched)  echo "512 touch=400 retouch=400 retouchloop=1" ;; # 400 MiB backed, idle
        light)    echo "512 touch=100" ;;
        stock256) echo "256" ;;
        nodriver) echo "256 noballoon=1" ;;
        *) return 1 ;;
    esac
}

# _bm_proc_start PID: PID's start time (clock ticks since boot; with the PID, the process)
_bm_proc_start() {
    local stat f
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    read -ra f <<<"${stat##*) }"
    echo "${f[19]}"
}

# _bm_fixture_owner: "PID START" of the process the fixture guests of this test belong to:
# the test itself when it started virtlogd or libvirtd (it stops them at its exit, and a guest
# whose virtlogd ended writes no more console lines: `meson test test-status test-run` without
# tools/test.sh's daemons), else with BM_FIXTURE_SHARE=1 the process that runs it
_bm_fixture_owner() {
    local pid=$$ f
    f=$(_bm_owner_file)
    if [ "${BM_FIXTURE_SHARE:-0}" = 1 ] && ! { [ -f "$f" ] && grep -qE '^(virtlogd|libvirtd) ' "$f"; }; then
        pid=$PPID
    fi
    echo "$pid $(_bm_proc_start "$pid")"
}

# _bm_fixture_owner_of DOM: "PID START" from DOM's persistent <description>
_bm_fixture_owner_of() {
    bm_virsh dumpxml --inactive "$1" 2>/dev/null |
        sed -n 's:.*<description>balloonmgr test fixture, owner \([0-9]*\) \([0-9]*\)</description>.*:\1 \2:p'
}

# _bm_fixture_owner_alive DOM: the process DOM belongs to still runs
_bm_fixture_owner_alive() {
    local pid start
    read -r pid start <<<"$(_bm_fixture_owner_of "$1")"
    [ -n "$start" ] && [ "$(_bm_proc_start "$pid")" = "$start" ]
}

# _bm_fixture_doms: the names of the fixture guests libvirt knows
_bm_fixture_doms() { bm_virsh list --all --name 2>/dev/null | grep "^$BM_FIXTURE_PREFIX" || true; }

# _bm_fixture_stop DOM WHY [keep]: destroys and undefines the fixture guest DOM; removes its
# directory (console log, XML) unless "keep" (a guest a test broke: its console tells how)
_bm_fixture_stop() {
    bm_log "stopping fixture guest $1 ($2)"
    bm_virsh destroy "$1" >/dev/null 2>&1 || true
    bm_virsh undefine "$1" >/dev/null 2>&1 || bm_warn "undefine $1 failed"
    if [ "${3:-}" = keep ]; then
        bm_log "its console log is kept in $(bm_guest_dir "$1")"
    else
        rm -rf "$(bm_guest_dir "$1")"
    fi
}

# bm_fixture_stop: stops the fixture guests of this test's owner (the run's, with
# BM_FIXTURE_SHARE=1) and those whose owner has ended; leaves other runs' alone. Sets
# BM_FIXTURE_STOPPED to how many it stopped.
bm_fixture_stop() {
    local dom pid
    pid=$(_bm_fixture_owner)
    pid=${pid%% *}
    BM_FIXTURE_STOPPED=0
    while read -r dom; do
        [ -n "$dom" ] || continue
        if [[ $dom == "$BM_FIXTURE_PREFIX$pid-"* ]]; then
            _bm_fixture_stop "$dom" "the end of its run"
        elif ! _bm_fixture_owner_alive "$dom"; then
            _bm_fixture_stop "$dom" "left by a run that ended"
        else
            continue
        fi
        BM_FIXTURE_STOPPED=$((BM_FIXTURE_STOPPED + 1))
    done < <(_bm_fixture_doms)
}

# _bm_fixture_reaper PID START: (a detached process) waits until the owner PID ends, then
# stops its fixture guests
_bm_fixture_reaper() {
    local dom
    [ "$(_bm_proc_start "$1")" = "$2" ] && tail --pid="$1" -f /dev/null
    while read -r dom; do
        [ "$(_bm_fixture_owner_of "$dom")" = "$1 $2" ] && _bm_fixture_stop "$dom" "its owner, pid $1, ended"
    done < <(_bm_fixture_doms)
    rm -f "$BM_IT_STATE/fixture-reaper.$1"
}

# _bm_fixture_start_reaper "PID START": one reaper per owner, detached from the test (its own
# session, no descriptor of the test's: meson waits for its pipes' ends)
_bm_fixture_start_reaper() {
    local pid start f rpid rstart
    read -r pid start <<<"$1"
    f=$BM_IT_STATE/fixture-reaper.$pid
    # "REAPER_PID REAPER_START": that reaper still waits
    read -r rpid rstart 2>/dev/null <"$f" && [ -n "$rstart" ] && [ "$(_bm_proc_start "$rpid")" = "$rstart" ] &&
        return 0
    mkdir -p "$BM_IT_STATE"
    # shellcheck disable=SC2016  # expanded by the reaper's shell
    setsid bash -c '. "$1"; _bm_fixture_reaper "$2" "$3"' bm-fixture-reaper "$BM_LIB_DIR/lib.sh" \
        "$pid" "$start" </dev/null >>"$BM_FIXTURE_DIR/reaper.log" 2>&1 &
    echo "$! $(_bm_proc_start $!)" >"$f"
}

# _bm_fixture_xml_same DOM: DOM's persistent XML is the one it was booted with
_bm_fixture_xml_same() {
    bm_virsh dumpxml --inactive "$1" 2>/dev/null | cmp -s - "$(bm_guest_dir "$1")/persistent.xml"
}

# _bm_used_kib DOM: the balloon's size as libvirt reports it (a guest without driver: never
# moves)
_bm_used_kib() { bm_virsh dominfo "$1" | awk '/^Used memory:/ { print $3 }'; }
_bm_balloon_at() { [ "$(_bm_used_kib "$1")" = "$2" ]; }
# _bm_retouch_done DOM: the guest has touched its memory again after every inflate it saw
_bm_retouch_done() {
    local c
    c=$(bm_console_log "$1")
    [ "$(grep -c 'bm: retouch: balloon inflated' "$c")" -le "$(grep -cE 'bm: retouch(ed|ing) ' "$c")" ]
}
# bm_wait_retouched NAME: waits (up to 90 s) until a guest with bm.retouchloop has touched its
# memory again after every inflate (>= 32 MiB) it saw and the deflate after it: the order a
# test needs before it inflates again (a retouch during an inflate competes with the balloon
# for the guest's memory). Returns at once for a guest that saw none; fails the test if the
# guest does not.
bm_wait_retouched() {
    local dom
    dom=$(bm_dom "$1")
    BM_WAIT_INTERVAL=0.5 bm_wait_until 90 "$dom to touch its memory again" _bm_retouch_done "$dom" ||
        bm_fail "$dom did not touch its memory again after its deflate"
}

# _bm_fixture_reset DOM SPEC: the balloon at the maximum (QEMU's target too: a guest without
# driver never moved), and memory touched again where SPEC retouches
_bm_fixture_reset() {
    local dom=$1 max
    max=$(bm_virsh dominfo "$dom" | awk '/^Max memory:/ { print $3 }')
    [ "$(_bm_used_kib "$dom")" = "$max" ] || bm_log "fixture guest $dom: balloon back to $max KiB"
    bm_virsh setmem "$dom" "$max" --live >/dev/null || bm_fail "virsh setmem $dom $max --live failed"
    BM_WAIT_INTERVAL=0.2 bm_wait_until 60 "the balloon of $dom at $max KiB" _bm_balloon_at "$dom" "$max" ||
        bm_fail "fixture guest $dom: balloon not back at its maximum within 60 s"
    case " $2 " in
        *" retouch="*) bm_wait_retouched "$dom" ;;
    esac
}

# bm_fixture_guest KIND...: see above; sets BM_DOMS to the guests' names (in the order of the
# KINDs) and BM_DOM to the last. The guests to boot boot side by side.
bm_fixture_guest() {
    local kind spec owner dom state why d boot=() i
    [ -n "${BM_KERNEL:-}" ] || bm_fail "bm_fixture_guest: call bm_setup first"
    mkdir -p "$BM_FIXTURE_DIR"
    owner=$(_bm_fixture_owner)
    if [ -z "${_BM_FIXTURE_SWEPT:-}" ]; then   # once per test: guests of runs that ended
        _BM_FIXTURE_SWEPT=1
        while read -r d; do
            [ -n "$d" ] && ! _bm_fixture_owner_alive "$d" && _bm_fixture_stop "$d" "left by a run that ended"
        done < <(_bm_fixture_doms)
    fi
    BM_DOMS=()
    for kind in "$@"; do
        spec=$(_bm_fixture_spec "$kind") || bm_fail "bm_fixture_guest: unknown kind '$kind'"
        dom=$BM_FIXTURE_PREFIX${owner%% *}-$kind
        BM_DOMS+=("$dom")
        state=$(bm_virsh domstate "$dom" 2>/dev/null || true)
        why=""
        if [ -n "$state" ]; then
            if [ "$(_bm_fixture_owner_of "$dom")" != "$owner" ]; then why="not of this run"
            elif [ "$state" != running ]; then why="$state"
            elif ! _bm_fixture_xml_same "$dom"; then why="its persistent XML changed"
            fi
            if [ -n "$why" ]; then
                _bm_fixture_stop "$dom" "$why; booting it again"
                state=""
            fi
        fi
        if [ -z "$state" ]; then
            # shellcheck disable=SC2086  # spec: MEM and options, split
            bm_define_guest "$dom" $spec \
                "extra=<description>balloonmgr test fixture, owner $owner</description>"
            bm_virsh dumpxml --inactive "$dom" >"$(bm_guest_dir "$dom")/persistent.xml" ||
                bm_fail "virsh dumpxml --inactive $dom failed"
            boot+=("$dom")
        else
            bm_log "fixture guest $dom: reused"
        fi
        BM_FIXTURE_TAKEN+=("$dom")
    done
    bm_add_cleanup _bm_fixture_release
    [ "${#boot[@]}" -eq 0 ] || _bm_fixture_start_reaper "$owner"
    for dom in "${boot[@]}"; do
        bm_wait_guest_ready "$dom"
    done
    i=0
    for kind in "$@"; do
        dom=${BM_DOMS[i++]}
        _bm_fixture_reset "$dom" "$(_bm_fixture_spec "$kind")"
        BM_CONSOLE_FROM[$dom]=$(stat -c %s "$(bm_console_log "$dom")")
    done
    # shellcheck disable=SC2034  # used by the calling test
    BM_DOM=$dom
}

# bm_fixture_forget DOM: the test ends the fixture guest DOM on purpose (destroys or
# undefines it): no check at its exit
bm_fixture_forget() {
    local d keep=()
    for d in "${BM_FIXTURE_TAKEN[@]}"; do
        [ "$d" = "$1" ] || keep+=("$d")
    done
    BM_FIXTURE_TAKEN=("${keep[@]}")
}

# _bm_fixture_release: the cleanup hook of a test that took fixture guests: each must still
# run with its persistent XML unchanged (else the test fails and the guest is stopped); those
# the test owns are stopped.
_bm_fixture_release() {
    local dom state pid
    pid=$(_bm_fixture_owner)
    pid=${pid%% *}
    for dom in "${BM_FIXTURE_TAKEN[@]}"; do
        state=$(bm_virsh domstate "$dom" 2>/dev/null || echo undefined)
        if [ "$state" != running ]; then
            BM_FIXTURE_FAILED="the test left fixture guest $dom $state"
            _bm_fixture_stop "$dom" "$state after the test" keep
        elif ! _bm_fixture_xml_same "$dom"; then
            bm_virsh dumpxml --inactive "$dom" | diff -u "$(bm_guest_dir "$dom")/persistent.xml" - >&2
            BM_FIXTURE_FAILED="the test changed the persistent XML of fixture guest $dom (diff above)"
            _bm_fixture_stop "$dom" "its persistent XML changed" keep
        elif [ "$pid" = $$ ]; then
            _bm_fixture_stop "$dom" "the end of the test that owns it"
        fi
    done
    BM_FIXTURE_TAKEN=()
}

# ---------------------------------------------------------------------------
# Extra cleanup hooks
# ---------------------------------------------------------------------------
# Helpers that start things of their own (e.g. prom.sh's Prometheus) register
# a command here; bm_on_exit runs the registered commands first, in reverse
# order of registration, each once. A test that never calls bm_setup still
# gets them run: if no EXIT trap is set when the first hook is added,
# bm_add_cleanup installs _bm_cleanup_on_exit as the EXIT trap, and INT/TERM
# traps that exit (as bm_setup's) where none are set (bm_setup replaces
# them with bm_on_exit later, which runs the hooks too). A test that
# sets its own EXIT trap should call bm_on_exit (or bm_run_cleanups) from it.
BM_CLEANUP_HOOKS=()

# bm_add_cleanup CMD: run CMD (eval'd, in this shell) at exit. Adding the
# same CMD twice registers it once.
bm_add_cleanup() {
    local h
    for h in "${BM_CLEANUP_HOOKS[@]}"; do
        [ "$h" = "$1" ] && return 0
    done
    BM_CLEANUP_HOOKS+=("$1")
    [ -n "$(trap -p EXIT)" ] || bm_cleanup_at_exit
}

# bm_cleanup_at_exit: the EXIT trap of a test that does not call bm_setup (no
# libvirtd): at exit the hooks run, then BM_WORKDIR is removed if the test
# passed, else kept (and said so); INT/TERM exit through it unless they are
# trapped already.
bm_cleanup_at_exit() {
    trap _bm_cleanup_on_exit EXIT
    [ -n "$(trap -p INT)" ] || trap 'exit 130' INT
    [ -n "$(trap -p TERM)" ] || trap 'exit 143' TERM
}

# bm_run_cleanups: run (and forget) the registered hooks, newest first. A
# failing hook is reported and does not stop the others.
bm_run_cleanups() {
    local hooks=("${BM_CLEANUP_HOOKS[@]}") i
    BM_CLEANUP_HOOKS=()
    for ((i = ${#hooks[@]} - 1; i >= 0; i--)); do
        eval "${hooks[i]}" || bm_warn "cleanup '${hooks[i]}' failed"
    done
    return 0
}

# _bm_exit RC: BM_WORKDIR removed if RC is 0 (unless BM_KEEP_WORKDIR=1), else
# kept for the logs; exit RC.
_bm_exit() {
    if [ "$1" -eq 0 ] && [ "${BM_KEEP_WORKDIR:-0}" != 1 ]; then
        rm -rf "$BM_WORKDIR"
    elif [ -d "$BM_WORKDIR" ]; then
        bm_log "logs kept in $BM_WORKDIR"
    fi
    exit "$1"
}

# _bm_cleanup_on_exit: EXIT trap of a test that did not call bm_setup: the
# hooks, then BM_WORKDIR like bm_on_exit.
_bm_cleanup_on_exit() {
    local rc=$?
    trap - EXIT
    set +e
    bm_run_cleanups
    rc=$(_bm_fixture_verdict "$rc")
    _bm_exit "$rc"
}

# _bm_fixture_verdict RC: RC, or 1 when the test left a fixture guest broken (its
# persistent config changed, or it ended), which fails the test that did it.
_bm_fixture_verdict() {
    if [ "$1" -eq 0 ] && [ -n "${BM_FIXTURE_FAILED:-}" ]; then
        echo "FAIL: $BM_FIXTURE_FAILED" >&2
        echo 1
    else
        echo "$1"
    fi
}

# bm_on_exit: the EXIT trap installed by bm_setup. Runs the cleanup hooks
# (bm_add_cleanup), cleans up guests, stops daemons this shell started,
# removes BM_WORKDIR when the test passed (kept on failure for the console
# logs). A test needing its own EXIT trap should call bm_on_exit from it.
bm_on_exit() {
    local rc=$?
    trap - EXIT
    set +e
    bm_run_cleanups
    rc=$(_bm_fixture_verdict "$rc")
    bm_cleanup_guests
    bm_stop_daemons
    _bm_exit "$rc"
}

# bm_setup: bm_require_root + packages + EXIT trap + bm_start_daemons +
# bm_guest_image. The trap is installed before anything is started, so a
# failure in setup still cleans up.
bm_setup() {
    bm_require_root
    bm_ensure_packages
    # set --wait hands its measurements to /run/balloonmgr/changes: keep the tests' away from
    # the host's (a test that needs its own sets it before)
    if [ -z "${BALLOONMGR_RUNTIME_DIR:-}" ]; then
        export BALLOONMGR_RUNTIME_DIR=$BM_WORKDIR/run
        mkdir -p "$BALLOONMGR_RUNTIME_DIR"
    fi
    trap bm_on_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    bm_start_daemons
    bm_guest_image
}

# ---------------------------------------------------------------------------
# Waiting, and agents
# ---------------------------------------------------------------------------
# bm_wait_until TIMEOUT_S DESCRIPTION CMD...: runs CMD (in this shell: a function works) until
# it succeeds, every BM_WAIT_INTERVAL seconds [0.1], TIMEOUT_S / BM_WAIT_INTERVAL times and
# once more; returns 0 as soon as it succeeds, else says what it waited for and returns 1 (the
# caller decides: bm_wait_until ... || bm_fail ...). Set BM_WAIT_INTERVAL for one call:
#   BM_WAIT_INTERVAL=1 bm_wait_until 60 "fresh stats" stats_are_fresh
bm_wait_until() {
    local timeout what=$2 interval=${BM_WAIT_INTERVAL:-0.1} tries i
    # (a guard, not a measure: times BM_TIMEOUT_MULTIPLIER, meson's timeout multiplier that
    # tools/test.sh sets for a machine busy with other work)
    timeout=$(awk -v t="$1" -v m="${BM_TIMEOUT_MULTIPLIER:-1}" 'BEGIN { print t * m }')
    shift 2
    tries=$(awk -v t="$timeout" -v i="$interval" 'BEGIN { n = t / i; print (n == int(n)) ? n : int(n) + 1 }')
    for ((i = 0; i < tries; i++)); do
        "$@" && return 0
        sleep "$interval"
    done
    "$@" && return 0
    bm_log "waited $timeout s for $what: not reached"
    return 1
}

# The agents a test started (bm_start_agent): their PIDs, stopped at exit if still running.
BM_AGENT_PIDS=()

# bm_agent_alive [PID]: PID [BM_AGENT_PID] is a running balloonmgr (not a reused PID, not a
# zombie). Builtins only: bm_stop_agent asks every 10 ms.
bm_agent_alive() {
    local comm stat pid=${1:-${BM_AGENT_PID:-}}
    [ -n "$pid" ] && read -r comm 2>/dev/null <"/proc/$pid/comm" && [ "$comm" = balloonmgr ] &&
        read -r stat 2>/dev/null <"/proc/$pid/stat" || return 1
    stat=${stat##*) }
    [ "${stat%% *}" != Z ]
}

# bm_not CMD...: succeeds when CMD fails (for bm_wait_until: wait until something ends).
bm_not() { ! "$@"; }

# bm_terminate NAME PID TIMEOUT_S CHECK...: SIGTERM to PID, then waits up to TIMEOUT_S while
# CHECK (a command: PID is still that process) succeeds; SIGKILL if it still does.
bm_terminate() {
    local name=$1 pid=$2 timeout=$3
    shift 3
    kill -TERM "$pid" 2>/dev/null || true
    bm_wait_until "$timeout" "$name (pid $pid) to end" bm_not "$@" && return 0
    bm_warn "$name (pid $pid) ignored TERM for $timeout s, sending KILL"
    kill -KILL "$pid" 2>/dev/null || true
}

# _bm_agent_found CHILD: BM_AGENT_JOB is balloonmgr (CHILD 0), or has a balloonmgr child
# (CHILD 1); sets BM_AGENT_PID to it.
_bm_agent_found() {
    local comm
    if [ "$1" = 1 ]; then
        BM_AGENT_PID=$(pgrep -P "$BM_AGENT_JOB" -x balloonmgr || true)
    elif read -r comm 2>/dev/null <"/proc/$BM_AGENT_JOB/comm" && [ "$comm" = balloonmgr ]; then
        BM_AGENT_PID=$BM_AGENT_JOB
    fi
    [ -n "$BM_AGENT_PID" ]
}

# bm_start_agent [--child] LOG CMD...: starts CMD (a balloonmgr agent command line, or one under
# a wrapper that execs it in place, such as setpriv) in the background, its stdout and stderr
# into LOG, and waits (up to 5 s) until the process is balloonmgr. --child: CMD is a wrapper
# that runs the agent as its child (strace -f): the agent is the wrapper's balloonmgr child.
# Sets BM_AGENT_PID (the agent) and BM_AGENT_JOB (the background job: the agent itself or the
# wrapper). At exit an agent still running is killed (by its PID). Fails the test when no
# balloonmgr process appears.
bm_start_agent() {
    local child=0 log
    [ "$1" = --child ] && { child=1; shift; }
    log=$1
    shift
    "$@" >"$log" 2>&1 &
    BM_AGENT_JOB=$!
    BM_AGENT_PID=""
    if ! BM_WAIT_INTERVAL=0.01 bm_wait_until 5 "balloonmgr in job $BM_AGENT_JOB" _bm_agent_found "$child"; then
        kill -KILL "$BM_AGENT_JOB" 2>/dev/null
        bm_fail "'$*' (pid $BM_AGENT_JOB) did not become balloonmgr: $(cat "$log")"
    fi
    BM_AGENT_PIDS+=("$BM_AGENT_PID")
    bm_add_cleanup _bm_stop_agents
}

# bm_agent_port LOG [TIMEOUT_S]: waits up to TIMEOUT_S [30] for the "serving /metrics on ... at
# ADDR:PORT" line of an agent started with --listen ADDR:0 (a free port the kernel picks; no
# random port and retry) and prints PORT; fails the test when no line comes. The line is read
# as tests/agent.sh's agent_addr_in reads it.
bm_agent_port() {
    local log=$1 addr
    # the address once the comma after it is written: the line can be read half-written (a
    # port cut short made curl exit 3 on a malformed URL in test-agent on Debian 13)
    _bm_serving_addr() { sed -n 's/.*serving \/metrics .* at \([^ ,]*:[0-9][0-9]*\),.*/\1/p' "$log" | head -1; }
    _bm_serving() { [ -n "$(_bm_serving_addr)" ]; }
    BM_WAIT_INTERVAL=0.02 bm_wait_until "${2:-30}" "the agent's serving line in $log" _bm_serving ||
        bm_fail "the agent never said where it serves: $(cat "$log")"
    addr=$(_bm_serving_addr)
    echo "${addr##*:}"
}

# bm_stop_agent [SIGNAL [TIMEOUT_S]]: sends SIGNAL [TERM] to the last agent started
# (BM_AGENT_PID), waits up to TIMEOUT_S [15] for it to end; returns 1 if it still runs then.
# Else reaps it and sets BM_AGENT_STATUS to the exit status of its job (the wrapper's with
# --child; 128 + the signal's number when the signal killed it).
bm_stop_agent() {
    local sig=${1:-TERM} timeout=${2:-15} p keep=()
    # (stderr: bash's "Killed" notice when it reaps the job meanwhile)
    {
        kill -s "$sig" "$BM_AGENT_PID"
        BM_WAIT_INTERVAL=0.01 bm_wait_until "$timeout" "agent $BM_AGENT_PID to end on SIG$sig" \
            bm_not bm_agent_alive "$BM_AGENT_PID"
    } 2>/dev/null || return 1
    wait "$BM_AGENT_JOB" 2>/dev/null && BM_AGENT_STATUS=0 || BM_AGENT_STATUS=$?
    for p in "${BM_AGENT_PIDS[@]}"; do
        [ "$p" = "$BM_AGENT_PID" ] || keep+=("$p")
    done
    BM_AGENT_PIDS=("${keep[@]}")
    return 0
}

# _bm_stop_agents: the cleanup hook: KILL every agent started and still running, and wait
# (up to 5 s each) until it has ended (its files closed).
_bm_stop_agents() {
    local p
    for p in "${BM_AGENT_PIDS[@]}"; do
        bm_agent_alive "$p" || continue
        {
            kill -KILL "$p"
            BM_WAIT_INTERVAL=0.01 bm_wait_until 5 "agent $p to end on SIGKILL" bm_not bm_agent_alive "$p"
            wait "$p"
        } 2>/dev/null
    done
    BM_AGENT_PIDS=()
    return 0
}

# ---------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------
# bm_qemu_pid NAME: PID of the domain's QEMU process.
bm_qemu_pid() {
    local dom pid
    dom=$(bm_dom "$1")
    pid=$(cat "/run/libvirt/qemu/$dom.pid" 2>/dev/null || true)
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
        echo "bm_qemu_pid: no running QEMU for $dom" >&2
        return 1
    fi
    echo "$pid"
}

# bm_rss_kib PID: VmRSS of PID in KiB.
bm_rss_kib() {
    local v
    v=$(awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || true)
    [ -n "$v" ] || { echo "bm_rss_kib: no VmRSS for pid $1" >&2; return 1; }
    echo "$v"
}

# bm_memstat NAME KEY: value of KEY (actual, usable, unused, rss, ...) from
# 'virsh dommemstat', empty if not reported.
bm_memstat() {
    bm_virsh dommemstat "$(bm_dom "$1")" 2>/dev/null | awk -v k="$2" '$1 == k { print $2 }'
}

_bm_stats_fresh() {
    "${BALLOONMGR:?}" -c "$BM_URI" status --json "$@" |
        jq -e 'all(.domains[]; .usable_bytes != null and .stats_age_s != null and .stats_age_s < 5)' >/dev/null
}
# bm_wait_fresh_stats NAME...: waits (up to 60 s) until balloonmgr status shows guest
# statistics of every named domain no older than 5 s; fails otherwise. Uses $BALLOONMGR.
bm_wait_fresh_stats() {
    local doms=() d
    for d in "$@"; do doms+=("$(bm_dom "$d")"); done
    BM_WAIT_INTERVAL=1 bm_wait_until 60 "fresh guest statistics of ${doms[*]}" _bm_stats_fresh "${doms[@]}" ||
        bm_fail "no fresh guest statistics for ${doms[*]}"
}

# bm_wait_would_inflate "DOM..." RUN_ARG...: waits up to 60 s until a dry-run pass
#   (`$BM run --once --dry-run --json RUN_ARG...`: it changes nothing and writes no state) would
#   inflate every DOM (full names); fails the test with their decisions otherwise. Fresh
#   statistics are not enough: statistics taken during a touch read a guest short, and memory a
#   deflate gave back is not backed until the guest touches it again.
# _bm_dry_run_decisions "DOM..." RUN_ARG...: the dry-run pass's decisions of DOMs, a JSON line each
_bm_dry_run_decisions() {
    local doms=$1
    shift
    "$BM" -c "$BM_URI" run --once --dry-run --json "$@" 2>/dev/null |
        jq -c --arg d "$doms" '($d | split(" ")) as $w | .decisions[] | select(.name | IN($w[])) |
            {name, action, reason}'
}
_bm_would_inflate() {
    local n
    n=$(_bm_dry_run_decisions "$@" | jq -s '[.[] | select(.action == "inflate")] | length') || return 1
    [ "$n" -eq "$(wc -w <<<"$1")" ]
}
bm_wait_would_inflate() {
    BM_WAIT_INTERVAL=1 bm_wait_until 60 "a pass that would inflate $1" _bm_would_inflate "$@" && return 0
    _bm_dry_run_decisions "$@" || true
    bm_fail "no pass would inflate $1 within 60 s"
}

# bm_pressure_policy FILE [INTERVAL] [MAX_STEP] [TIMER_INFLATE]: a policy under which the real
# host is "under pressure" (every threshold just below 100% of MemTotal) and only this test's
# domains are managed; INTERVAL and MAX_STEP set when given. The tests' guests have no
# deflate-on-oom, so `run --once` would leave them alone (timer_inflate's default): the policy
# sets timer_inflate = always unless TIMER_INFLATE says otherwise ("-": the default). The
# fixture guests the test took (bm_fixture_guest) are this test's too. Append sections for more.
bm_pressure_policy() {
    local d
    {
        echo "# every threshold just below 100% of MemTotal: the real host is \"under pressure\""
        echo "[host]"
        if [ -n "${2:-}" ]; then echo "interval = $2"; fi
        echo "reclaim_below = 99%"
        echo "target_available = 99.5%"
        echo "release_above = 99.9%"
        echo "[guest]"
        echo "exclude = yes"
        for d in "${BM_PREFIX}*" "${BM_FIXTURE_TAKEN[@]}"; do
            echo "[domain \"$d\"]"
            echo "exclude = no"
            if [ -n "${3:-}" ]; then echo "max_step = $3"; fi
            if [ "${4:-always}" != - ]; then echo "timer_inflate = ${4:-always}"; fi
        done
    } >"$1"
}
