# shellcheck shell=bash
# container.sh: a Debian host with systemd as PID 1, in a container, for tests that need the
# real init (the package's maintainer scripts, the units under their sandbox, reboots).
#
# Sourced by tests/integration/test-host.sh. Root only. Needs mmdebstrap and systemd-nspawn
# (systemd-container); tools/install-deps.sh test installs both.
#
#   bm_ct_root SUITE            build (or reuse) a root file system of Debian SUITE (bookworm,
#                               trixie) with systemd, libvirt, QEMU and what builds the package;
#                               prints its path. Cached under $BM_CT_CACHE/SUITE with a stamp of
#                               the suite and the package list: a changed list builds it anew.
#                               One builder at a time (a lock file per suite beside it): the
#                               others wait and find it built.
#   bm_ct_boot NAME ROOT DIR [NSPAWN-OPTION...]
#                               boot ROOT (read-only lower layer) with an overlay whose upper
#                               layer is DIR/upper (kept: a second boot on the same DIR is a
#                               reboot of the same host), private network, DIR/shared bound at
#                               /bm, the host's /proc/sys/vm/stat_refresh writable (the rest of
#                               /proc/sys read-only, as nspawn makes it); waits until systemd
#                               inside says running (or degraded). Sets BM_CT_PID (nspawn) and
#                               BM_CT_LEADER (the container's PID 1, for nsenter).
#   bm_ct_lane TEST SUITE       what a test of SUITE in a container sets up first: root and
#                               the tools, BM_CT_SUITE, BM_CT_NAME, a work directory BM_CT_WORK
#                               (/var/tmp/balloonmgr-TEST-SUITE.*), and an EXIT trap that runs
#                               the test's bm_ct_on_failure (if defined) on failure, stops the
#                               container, runs the hooks registered with bm_add_cleanup (lib.sh)
#                               and removes BM_CT_WORK (kept on failure with BM_KEEP_WORKDIR=1)
#   bm_ct_guest_kernel          the guest image of BM_CT_SUITE's kernel (build-guest.sh; trixie:
#                               BM_KERNEL_SUITE=trixie); sets BM_CT_GDIR and BM_CT_KVER
#   bm_ct_copy_source SRC       the files git tracks in SRC (and its uncommitted changes) to
#                               BM_CT_WORK/ct/shared/src: /bm/src in the container
#   bm_ct_run ROOT DIR [--bind PATH]... -- CMD...
#                               run CMD in ROOT without booting it (a build with the suite's
#                               toolchain): a private mount namespace with an overlay of ROOT
#                               (upper layer under DIR, removed afterwards), each PATH bound at
#                               the same path inside, /proc, /dev and a tmpfs /tmp; chroot, an
#                               environment of PATH, HOME and LANG only. Returns CMD's status.
#   bm_ct_exec CMD...           run CMD inside the booted container (all its namespaces)
#   bm_ct_sh 'SCRIPT'           bash -c SCRIPT inside
#   bm_ct_stop                  power it off (SIGRTMIN+3 to its PID 1 through nspawn's SIGTERM),
#                               wait up to 60 s, then KILL nspawn; unmounts the overlay and removes
#                               the cgroup this lib made. Only what bm_ct_boot started is stopped.
#
# This host's cgroup layout is hybrid (v1 controllers, v2 at /sys/fs/cgroup/unified): systemd-
# nspawn's scope allocation fails there ("Failed to allocate scope"), so the container runs in a
# cgroup of its own under the unified hierarchy (--keep-unit --register=no) with
# SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1. On a pure cgroup v2 host the same works.

BM_CT_CACHE=${BM_CT_CACHE:-/var/cache/balloonmgr-test/ct}
BM_CT_TIMEOUT=${BM_CT_TIMEOUT:-120}

# What a host of the suite runs (systemd, libvirt with QEMU, node_exporter) and what builds the
# package there (debian/control's Build-Depends, so the .deb is built against the suite's own
# libvirt), curl and jq for the checks, python3 to leave free pages on a per-CPU list; what the
# integration tests run there by test-stack.sh need besides (lib.sh's bm_ensure_packages:
# busybox-static, cpio; test-agent: Prometheus and the Pushgateway).
_bm_ct_packages() {
    echo systemd systemd-sysv dbus libnss-systemd polkitd \
        libvirt-daemon-system libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 \
        prometheus-node-exporter curl jq procps iproute2 python3 \
        busybox-static cpio prometheus prometheus-pushgateway \
        debhelper dpkg-dev build-essential meson ninja-build pkgconf scdoc bash-completion \
        libvirt-dev libxml2-dev libjson-c-dev libcurl4-openssl-dev libmicrohttpd-dev libyaml-dev \
        libgnutls28-dev libcrypt-dev zlib1g-dev libsmartcols-dev libsystemd-dev
}

# _bm_ct_rm DIR: bm_rm_root (rm-root.sh), failing the test when a mount below DIR stays
. "$(dirname "${BASH_SOURCE[0]}")/rm-root.sh"
_bm_ct_rm() { bm_rm_root "$1" || bm_fail "not removing $1 (a mount below it stays)"; }

bm_ct_root() {
    local suite=$1 dir stamp want tmp log lock
    dir=$BM_CT_CACHE/$suite
    want=$(printf '%s\n' "$suite" $(_bm_ct_packages) | sha256sum | cut -c1-16)
    # one builder at a time: tools/test.sh runs the lab (its module is built in the trixie
    # root) beside the container tests, and a root is replaced (rm, mv) when it is rebuilt; a
    # second caller waits here and then finds the stamp (the lock is closed on each way out,
    # and mmdebstrap does not inherit it)
    mkdir -p "$BM_CT_CACHE"
    exec {lock}>"$BM_CT_CACHE/.$suite.lock"
    flock "$lock" || bm_fail "cannot lock $BM_CT_CACHE/.$suite.lock"
    stamp=$(cat "$dir/.bm-stamp" 2>/dev/null || true)
    if [ "$stamp" = "$want" ] && [ -x "$dir/root/lib/systemd/systemd" ]; then
        exec {lock}>&-
        echo "$dir/root"
        return 0
    fi
    tmp=$BM_CT_CACHE/.$suite.$$
    log=$BM_CT_CACHE/$suite.mmdebstrap.log
    _bm_ct_rm "$tmp"
    mkdir -p "$tmp"
    bm_log "mmdebstrap $suite into $tmp (log: $log)" >&2
    # niced: it is CPU-bound (about 100 s of two cores), and guests of the other lane run beside it
    if ! nice -n 10 mmdebstrap --mode=root --variant=apt \
            --include="$(_bm_ct_packages | tr ' ' ',')" \
            --customize-hook='echo bm-host >"$1/etc/hostname"' \
            --customize-hook='rm -f "$1/etc/machine-id"; : >"$1/etc/machine-id"' \
            "$suite" "$tmp/root" http://deb.debian.org/debian >"$log" 2>&1 {lock}>&-; then
        tail -20 "$log" >&2
        _bm_ct_rm "$tmp"
        bm_fail "mmdebstrap $suite failed (log: $log)"
    fi
    echo "$want" >"$tmp/.bm-stamp"
    _bm_ct_rm "$dir"
    mv "$tmp" "$dir"
    exec {lock}>&-
    echo "$dir/root"
}

# The container's PID 1: nspawn's child in a PID namespace of its own. Not any child: nspawn
# first forks an "outer child" in the host's namespace, which forks PID 1 and exits (a leader
# taken then was gone before the next nsenter: test-host-bookworm failed so, once).
_bm_ct_leader() {
    local child ns cns
    ns=$(readlink /proc/self/ns/pid)
    for child in $(pgrep -P "$BM_CT_PID" 2>/dev/null); do
        cns=$(readlink "/proc/$child/ns/pid" 2>/dev/null) || continue
        [ "$cns" != "$ns" ] || continue
        BM_CT_LEADER=$child
        return 0
    done
    return 1
}

_bm_ct_running() {
    local s
    s=$(nsenter -t "$BM_CT_LEADER" -a systemctl is-system-running 2>/dev/null) || true
    case "$s" in running|degraded) return 0 ;; *) return 1 ;; esac
}

bm_ct_boot() {
    local name=$1 root=$2 dir=$3 cg
    shift 3
    mkdir -p "$dir/upper" "$dir/work" "$dir/merged" "$dir/shared"
    mount -t overlay overlay -o "lowerdir=$root,upperdir=$dir/upper,workdir=$dir/work" \
        "$dir/merged" || bm_fail "cannot mount the overlay on $dir/merged"
    BM_CT_DIR=$dir
    # hybrid: the v2 hierarchy is /sys/fs/cgroup/unified; pure v2: /sys/fs/cgroup itself
    cg=/sys/fs/cgroup/bm-ct-$name
    [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ] || cg=/sys/fs/cgroup/unified/bm-ct-$name
    mkdir -p "$cg" || bm_fail "cannot make the cgroup $cg"
    BM_CT_CGROUP=$cg
    # nspawn mounts /proc/sys read-only; a host's /proc/sys is writable by root, and the units
    # open one file of it (ReadWritePaths=/proc/sys/vm/stat_refresh): that file is bound into
    # the container and made writable there after the boot, nothing else of /proc/sys
    local statref=""
    [ -w /proc/sys/vm/stat_refresh ] && statref=--bind=/proc/sys/vm/stat_refresh:/proc/sys/vm/stat_refresh
    # the launcher moves itself into the cgroup first, then becomes nspawn; its fds 3+ closed
    (
        echo $BASHPID >"$cg/cgroup.procs"
        exec env SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 systemd-nspawn -q -D "$dir/merged" -M "$name" \
            --boot --register=no --keep-unit --private-network --console=passive \
            --bind="$dir/shared:/bm" $statref "$@" </dev/null >"$dir/nspawn.log" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
    ) &
    BM_CT_PID=$!
    echo "$BM_CT_PID" >"$dir/nspawn.pid"
    BM_WAIT_INTERVAL=0.5 bm_wait_until 30 "the container's PID 1" _bm_ct_leader ||
        { cat "$dir/nspawn.log" >&2; bm_fail "systemd-nspawn did not start a container"; }
    if [ -n "$statref" ]; then
        nsenter -t "$BM_CT_LEADER" -m mount -o remount,rw,bind /proc/sys/vm/stat_refresh ||
            bm_fail "cannot make /proc/sys/vm/stat_refresh writable in $name"
    fi
    if ! BM_WAIT_INTERVAL=1 bm_wait_until "$BM_CT_TIMEOUT" "systemd in $name to boot" _bm_ct_running; then
        nsenter -t "$BM_CT_LEADER" -a systemctl --failed --no-pager >&2 || true
        bm_fail "$name: systemd did not reach running within $BM_CT_TIMEOUT s"
    fi
}

bm_ct_run() {
    local root=$1 dir=$2 binds=() rc=0
    shift 2
    while [ "${1:-}" = --bind ]; do binds+=("$2"); shift 2; done
    [ "${1:-}" = -- ] && shift
    _bm_ct_rm "$dir"
    mkdir -p "$dir/upper" "$dir/work" "$dir/merged"
    # shellcheck disable=SC2016  # expanded by the inner bash
    unshare --mount --propagation private --fork -- bash -c '
        set -e
        root=$1 dir=$2 n=$3
        shift 3
        mount -t overlay overlay -o "lowerdir=$root,upperdir=$dir/upper,workdir=$dir/work" "$dir/merged"
        for ((i = 0; i < n; i++)); do
            mkdir -p "$dir/merged$1"
            mount --bind "$1" "$dir/merged$1"
            shift
        done
        mount -t proc proc "$dir/merged/proc"
        mount --rbind /dev "$dir/merged/dev"
        mount -t tmpfs tmpfs "$dir/merged/tmp"
        exec chroot "$dir/merged" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 "$@"
    ' bm-ct-run "$root" "$dir" "${#binds[@]}" "${binds[@]}" "$@" || rc=$?
    _bm_ct_rm "$dir"
    return "$rc"
}

bm_ct_exec() { nsenter -t "$BM_CT_LEADER" -a -- "$@"; }
bm_ct_sh() { nsenter -t "$BM_CT_LEADER" -a -- bash -c "$1"; }

bm_ct_stop() {
    [ -n "${BM_CT_PID:-}" ] || return 0
    if kill -0 "$BM_CT_PID" 2>/dev/null; then
        kill -TERM "$BM_CT_PID" 2>/dev/null || true
        local i
        for ((i = 0; i < 120; i++)); do
            kill -0 "$BM_CT_PID" 2>/dev/null || break
            sleep 0.5
        done
        kill -KILL "$BM_CT_PID" 2>/dev/null || true
    fi
    wait "$BM_CT_PID" 2>/dev/null || true
    BM_CT_PID=""
    # whatever of the container outlived nspawn (a failed test's container ran on, reparented
    # to init, its agent seen by the next test): every process left in its cgroup, killed
    if [ -n "${BM_CT_CGROUP:-}" ] && [ -d "$BM_CT_CGROUP" ]; then
        # shellcheck disable=SC2038  # process ids, not file names
        find "$BM_CT_CGROUP" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    fi
    umount "$BM_CT_DIR/merged" 2>/dev/null || umount -l "$BM_CT_DIR/merged" 2>/dev/null || true
    # the container's systemd made its own cgroups below ours: remove them deepest first
    if [ -n "${BM_CT_CGROUP:-}" ] && [ -d "$BM_CT_CGROUP" ]; then
        find "$BM_CT_CGROUP" -depth -type d -exec rmdir {} + 2>/dev/null ||
            bm_warn "could not remove the cgroup $BM_CT_CGROUP"
    fi
    BM_CT_CGROUP=""
    return 0
}

bm_ct_lane() {
    BM_CT_SUITE=$2
    case "$BM_CT_SUITE" in
        bookworm|trixie) ;;
        *) bm_fail "$1: suite '$BM_CT_SUITE': expected bookworm or trixie" ;;
    esac
    bm_require_root
    local tool
    for tool in mmdebstrap systemd-nspawn nsenter; do
        command -v "$tool" >/dev/null || bm_fail "'$tool' missing (tools/install-deps.sh test)"
    done
    BM_CT_NAME=bm-$1-$BM_CT_SUITE-$$
    BM_CT_WORK=$(mktemp -d "/var/tmp/balloonmgr-$1-$BM_CT_SUITE.XXXXXX")
    trap _bm_ct_lane_exit EXIT
}

_bm_ct_lane_exit() {
    local rc=$?
    if [ "$rc" -ne 0 ] && [ -n "${BM_CT_PID:-}" ] && declare -F bm_ct_on_failure >/dev/null; then
        bm_ct_on_failure || true
    fi
    bm_ct_stop
    # what the lane registered with bm_add_cleanup (lib.sh), once the container has stopped
    bm_run_cleanups
    if [ "$rc" -eq 0 ] || [ "${BM_KEEP_WORKDIR:-0}" != 1 ]; then
        _bm_ct_rm "$BM_CT_WORK"
    else
        echo "kept $BM_CT_WORK" >&2
    fi
}

bm_ct_guest_kernel() {
    local ks=""
    [ "$BM_CT_SUITE" = bookworm ] || ks=$BM_CT_SUITE
    BM_CT_GDIR=/var/lib/libvirt/images/balloonmgr-test${ks:+-$ks}
    BM_KERNEL_SUITE=$ks bash "$BM_LIB_DIR/build-guest.sh" "$BM_CT_GDIR" >"$BM_CT_WORK/build-guest.log" 2>&1 ||
        { cat "$BM_CT_WORK/build-guest.log"; bm_fail "build-guest.sh ($BM_CT_SUITE kernel) failed"; }
    BM_CT_KVER=$(cat "$BM_CT_GDIR/kernel-version")
}

bm_ct_copy_source() {
    mkdir -p "$BM_CT_WORK/ct/shared/src"
    (cd "$1" && git ls-files -z --cached --others --exclude-standard |
        tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -C "$BM_CT_WORK/ct/shared/src" -xf -
}
