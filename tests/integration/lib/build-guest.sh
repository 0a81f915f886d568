#!/bin/bash
# build-guest.sh [OUTDIR]
#
# Builds (and caches) the tiny guest used by balloonmgr's integration tests:
# a stock Debian kernel plus a busybox-static initramfs whose /init loads the
# virtio balloon stack (and virtio_blk, for a guest with a disk), optionally
# touches some memory, prints
# "BALLOONMGR-GUEST-READY" on ttyS0 and then idles forever.
#
# Output (OUTDIR, default /var/lib/libvirt/images/balloonmgr-test, or
# $BM_GUEST_DIR):
#   vmlinuz          the Debian kernel (boot/vmlinuz-VERSION)
#   initrd.img       gzip'ed newc cpio: busybox + /init + virtio modules
#   kernel-version   e.g. "6.1.0-57-amd64"
#   modules-dir      absolute path of the extracted /lib/modules/VERSION tree
#   modules-VERSION  symlink to that tree (for building out-of-tree modules)
#   .build-stamp     sha256 of (this script + kernel version [+ the SG lab
#                    module, see below]); a matching stamp makes the next
#                    run a no-op
# Everything in OUTDIR is readable by the libvirt-qemu user (0644 / 0755).
#
# Cache (BM_GUEST_CACHE, default /var/cache/balloonmgr-test):
#   debs/                      the downloaded linux-image .deb
#   kernel-VERSION/root/       the extracted .deb (dpkg-deb -x)
#   .lock                      held while this script runs: one build per cache at a time
#
# Environment:
#   BM_GUEST_DIR     default OUTDIR when no argument is given
#   BM_GUEST_CACHE   cache dir (see above)
#   BM_KERNEL_PKG    force a kernel package (e.g. linux-image-6.1.0-57-amd64
#                    or linux-image-6.1.0-57-amd64-unsigned) instead of the one
#                    behind linux-image-amd64
#   BM_KERNEL_SUITE  the kernel of another Debian suite (e.g. trixie: Linux 6.12), looked
#                    up and downloaded with an apt state of its own under
#                    BM_GUEST_CACHE/apt-SUITE (the host's apt is not touched) and cached
#                    in BM_GUEST_CACHE/suite-SUITE
#   BM_GUEST_FORCE=1 rebuild even if the stamp matches
#   BM_GUEST_ROOTFS=1
#                    also put the ext4 stack (crc16 mbcache jbd2 crc32c_generic ext4) into the
#                    initramfs, loaded after the virtio modules: for a guest whose root file
#                    system is a disk image (bm.root=, build-server-guest.sh builds one). Part
#                    of the stamp; the plain test guest has none of it.
#   BM_GUEST_LOAD    the static bm-guest-load binary meson builds (the integration
#                    tests' environment sets it); unset: built here from guest-load.c
#                    with cc -static. The source's sha256 is part of the stamp.
#   BM_GUEST_SG_MODULE=PATH|none
#                    the SG lab's virtio_balloon_sg.ko (lab/guest/build.sh)
#                    to put into the initramfs next to the stock modules; it
#                    is only loaded with bm.sgdriver=1. Default: the
#                    OUTDIR/virtio_balloon_sg.ko that lab/guest/build.sh
#                    installs, if present and built for this kernel (else
#                    skipped with a note); "none": never. An explicit PATH
#                    that is missing or built for another kernel is an error.
#                    Its sha256 is part of the stamp.
#
# Kernel command line understood by the guest's /init:
#   bm.touch=MIB     fill a tmpfs with MIB MiB of zeroes, then delete it: the
#                    memory stays resident in QEMU but is free in the guest
#   bm.noballoon=1   do not load virtio_balloon
#   bm.novirtiomem=1 do not load virtio_mem: a virtio-mem device without a driver (its
#                    requested size moves, what is plugged does not)
#   bm.memtotal=MIB  before the touch and BALLOONMGR-GUEST-READY, wait until MemTotal is
#                    MIB MiB or more (a virtio-mem device plugs its memory after its driver
#                    loaded): "bm: memtotal N kB" or "bm: memtotal MIB MiB not reached FAILED"
#                    after 120 s
#   bm.modules=DIR   prefer DIR/NAME.ko (a path inside the guest) over the
#                    built-in copy of module NAME
#   bm.sgdriver=1    load virtio_balloon_sg (SG lab driver) instead of
#                    virtio_balloon, at the same place in the load order
#   bm.sgparams=K=V[,K=V...]  module parameters for virtio_balloon_sg
#                    (sg=0, sg_max_order=N, sg_elem_max=N, sg_timeout_ms=N,
#                    sg_count_held=1)
#   bm.sgstats=SECS  with bm.sgdriver=1: print the driver's sg_stats on the
#                    console ("bm: sg_stats: ...") whenever they changed,
#                    checked every SECS seconds
#   bm.retouch=MIB   after the balloon has been inflated (>= 32 MiB) and
#                    deflated again (< 4 MiB left), fill a tmpfs with MIB MiB
#                    again ("bm: retouched MIB MiB" or "bm: retouching MIB
#                    MiB FAILED"): shows
#                    the guest got its memory back
#   bm.retouchloop=1 with bm.retouch: watch again after each retouch, so that
#                    every inflate and deflate is followed by one (a guest
#                    shared by several tests, lib.sh's bm_fixture_guest)
#   bm.at=SECS:ACTION[:ARG][,...]  actions run in order in the background,
#                    each SECS seconds after BALLOONMGR-GUEST-READY (console:
#                    "bm: at SECS s: ACTION ARG", at the end "bm: at: all
#                    done"). ACTION: touch:MIB (as bm.touch), frag:MIB (MIB
#                    MiB of 4 KiB tmpfs files, every other one deleted again:
#                    MIB/2 MiB of free memory in single pages), frag2m:MIB
#                    (MIB MiB of 2 MiB tmpfs files of a known pattern,
#                    every other one deleted again: MIB/2 MiB free in holes
#                    of about 2 MiB), fragcheck (the files frag and frag2m
#                    kept still hold what was written: "bm: fragcheck: N
#                    files, B corrupt"), compact:SECS (write
#                    /proc/sys/vm/compact_memory over and over for SECS
#                    seconds, 0: once; "bm: compacted N time(s) ...:
#                    balloon_migrate +M ..."), await:KIB (wait until the
#                    balloon holds exactly KIB KiB: the host's signal to go
#                    on; await:+KIB: until it grows by exactly KIB KiB from
#                    one reading to the next, a second apart), rmmod /
#                    insmod (the balloon driver that was
#                    loaded, with its parameters), meminfo
#                    (MemTotal/MemFree/MemAvailable)
#   bm.root=DEV      after loading the modules, mount DEV (ext4, read-write) and switch_root
#                    to it, running bm.rootinit=PATH (default /sbin/init) as PID 1: a guest
#                    with a real distribution's root (needs BM_GUEST_ROOTFS=1 unless ext4 is
#                    built in). Nothing else of this list is done then; "bm: root DEV FAILED"
#                    and the plain guest if DEV cannot be mounted.
#   bm.load=SCHEDULE  run the workload program bm-guest-load (guest-load.c) with
#                    SCHEDULE, e.g. 0:128,60:384@20,150:touch:600: demand that
#                    changes over time; its console lines start with "bm-load:"
#
# Needs root (apt-get, mknod). Never installs a linux-image package: the .deb
# is downloaded and extracted only.
set -euo pipefail

SCRIPT_PATH=$(readlink -f "${BASH_SOURCE[0]}")
OUTDIR=${1:-${BM_GUEST_DIR:-/var/lib/libvirt/images/balloonmgr-test}}
CACHE=${BM_GUEST_CACHE:-/var/cache/balloonmgr-test}
# BM_KERNEL_SUITE=SUITE (e.g. trixie): the kernel of another Debian suite than this host's,
# looked up and downloaded through an apt state of its own (this host's sources and
# packages untouched), cached apart (CACHE/suite-SUITE) so each suite prunes only its own.
APT_OPTS=()
if [ -n "${BM_KERNEL_SUITE:-}" ]; then
    case "$BM_KERNEL_SUITE" in *[!a-z0-9-]*) echo "build-guest: ERROR: BM_KERNEL_SUITE '$BM_KERNEL_SUITE': not a suite name" >&2; exit 1 ;; esac
    APT_DIR=$CACHE/apt-$BM_KERNEL_SUITE
    CACHE=$CACHE/suite-$BM_KERNEL_SUITE
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
    echo "deb http://deb.debian.org/debian $BM_KERNEL_SUITE main" >"$APT_DIR/sources.list"
    APT_OPTS=(-o "Dir::Etc::SourceList=$APT_DIR/sources.list" -o Dir::Etc::SourceParts=/dev/null
              -o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::Cache=$APT_DIR/cache")
fi

# Load order used by /init. Dependencies (from the modules' depends= info):
# virtio -> virtio_ring; virtio_pci -> virtio_ring, virtio, *_dev;
# virtio_balloon -> virtio, virtio_ring.
MODULES=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_balloon)
# Loaded after that stack when the kernel has them (left out with a note when not, or when a
# dependency is neither above nor built in): virtio_blk for the page-cache guest's disk
# (bm_define_guest disk=MIB, bm-guest-load's cache item); virtio_mem for a guest with a
# virtio-mem device (bm_define_guest virtiomem=...: it plugs and unplugs the device's memory,
# onlined movable by memhp_default_state=online_movable on the command line, so that it can be
# unplugged again). Both depend on virtio, virtio_ring.
OPTIONAL_MODULES=(virtio_blk virtio_mem)
# BM_GUEST_ROOTFS=1: the ext4 stack for a root file system on the guest's disk (bm.root=), after
# the above; ext4 depends on jbd2, mbcache, crc16 and asks the crypto API for crc32c (there is
# no modprobe in the initramfs to load it on demand). Each is either here or built in.
ROOTFS=${BM_GUEST_ROOTFS:-0}
case "$ROOTFS" in 0|1) ;; *) echo "build-guest: ERROR: BM_GUEST_ROOTFS '$ROOTFS': expected 0 or 1" >&2; exit 1 ;; esac
ROOTFS_MODULES=()
[ "$ROOTFS" = 0 ] || ROOTFS_MODULES=(crc16 mbcache jbd2 crc32c_generic ext4)
# The SG lab's replacement for virtio_balloon (same dependencies), optional.
SG_NAME=virtio_balloon_sg

msg() { echo "build-guest: $*"; }
die() { echo "build-guest: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get download, mknod)"

# One build per cache at a time: tools/test.sh runs the lab and the container tests beside the
# host's integration tests, and their guests share a kernel (and its cache, its downloads, its
# pruning, an output directory). Whoever comes second waits, then finds the stamp up to date.
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9 || die "cannot lock $CACHE/.lock"

export DEBIAN_FRONTEND=noninteractive
APT_UPDATED=0
apt_update_once() {
    if [ "$APT_UPDATED" -eq 0 ]; then
        msg "running apt-get update${BM_KERNEL_SUITE:+ ($BM_KERNEL_SUITE)}" >&2
        apt-get "${APT_OPTS[@]}" update -qq >/dev/null || die "apt-get update failed"
        APT_UPDATED=1
    fi
}

pkg_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# ensure_pkgs PKG...: apt-get install the packages that are not installed yet.
ensure_pkgs() {
    local missing=() p
    for p in "$@"; do pkg_installed "$p" || missing+=("$p"); done
    [ "${#missing[@]}" -eq 0 ] && return 0
    msg "installing ${missing[*]}"
    if ! apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null; then
        apt_update_once
        apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null ||
            die "apt-get install ${missing[*]} failed"
    fi
}

# ---------------------------------------------------------------------------
# 1. Which kernel?
# ---------------------------------------------------------------------------
# Prints the versioned package behind the linux-image-amd64 metapackage.
kernel_pkg_from_apt() {
    apt-cache "${APT_OPTS[@]}" depends linux-image-amd64 2>/dev/null |
        sed -n 's/^ *Depends: *<\{0,1\}\(linux-image-[0-9][^ >]*\)>\{0,1\}.*/\1/p' | head -n1
}

resolve_kernel_pkg() {
    local pkg=${BM_KERNEL_PKG:-}
    if [ -z "$pkg" ]; then
        pkg=$(kernel_pkg_from_apt)
        if [ -z "$pkg" ]; then
            apt_update_once
            pkg=$(kernel_pkg_from_apt)
        fi
    fi
    if [ -z "$pkg" ]; then
        # Offline fallback: newest .deb already in the cache.
        local deb
        deb=$(ls -1 "$CACHE"/debs/linux-image-[0-9]*.deb 2>/dev/null | sort -V | tail -n1 || true)
        [ -n "$deb" ] && pkg=$(basename "$deb" | sed 's/_.*//')
    fi
    [ -n "$pkg" ] || die "cannot resolve the package behind linux-image-amd64"
    echo "$pkg"
}

KPKG=$(resolve_kernel_pkg)
KVER=${KPKG#linux-image-}
KVER=${KVER%-unsigned}
msg "kernel package $KPKG"
msg "kernel version $KVER"

# ---------------------------------------------------------------------------
# 2. Cached?
# ---------------------------------------------------------------------------
# ko_vermagic KO: the module's vermagic string.
ko_vermagic() {
    if command -v modinfo >/dev/null 2>&1; then
        modinfo -F vermagic "$1" 2>/dev/null
    else
        tr '\0' '\n' <"$1" | sed -n 's/^vermagic=//p' | head -n1
    fi
}

# The SG lab module (optional, see BM_GUEST_SG_MODULE above).
SG_MODULE=${BM_GUEST_SG_MODULE:-}
case "$SG_MODULE" in
    none) SG_MODULE="" ;;
    "")
        if [ -f "$OUTDIR/$SG_NAME.ko" ]; then
            case "$(ko_vermagic "$OUTDIR/$SG_NAME.ko")" in
                "$KVER "*) SG_MODULE=$OUTDIR/$SG_NAME.ko ;;
                *) msg "note: $OUTDIR/$SG_NAME.ko is not built for $KVER, leaving it out (lab/guest/build.sh rebuilds it)" ;;
            esac
        fi ;;
    *)
        [ -f "$SG_MODULE" ] || die "BM_GUEST_SG_MODULE=$SG_MODULE: no such file"
        case "$(ko_vermagic "$SG_MODULE")" in
            "$KVER "*) ;;
            *) die "BM_GUEST_SG_MODULE=$SG_MODULE is built for '$(ko_vermagic "$SG_MODULE")', not $KVER" ;;
        esac ;;
esac
LOAD_SRC=$(dirname "$SCRIPT_PATH")/guest-load.c
[ -f "$LOAD_SRC" ] || die "no $LOAD_SRC (the guest workload's source)"
LOAD_HASH=$(sha256sum <"$LOAD_SRC" | cut -d' ' -f1)
SG_HASH=""
[ -n "$SG_MODULE" ] && SG_HASH=$(sha256sum <"$SG_MODULE" | cut -d' ' -f1)

STAMP=$( { sha256sum <"$SCRIPT_PATH"; echo "$KVER"; echo "load $LOAD_HASH"
           [ -z "$SG_HASH" ] || echo "sg $SG_HASH"
           [ "$ROOTFS" = 0 ] || echo "rootfs"; } | sha256sum | cut -d' ' -f1)
if [ "${BM_GUEST_FORCE:-0}" != 1 ] &&
   [ -f "$OUTDIR/.build-stamp" ] && [ "$(cat "$OUTDIR/.build-stamp")" = "$STAMP" ] &&
   [ -s "$OUTDIR/vmlinuz" ] && [ -s "$OUTDIR/initrd.img" ] &&
   [ -d "$(cat "$OUTDIR/modules-dir" 2>/dev/null || echo /nonexistent)" ]; then
    msg "up to date: $OUTDIR (kernel $KVER${SG_HASH:+, with $SG_NAME})"
    exit 0
fi

ensure_pkgs busybox-static cpio gzip

# ---------------------------------------------------------------------------
# 3. Download (once) and extract (once) the kernel .deb
# ---------------------------------------------------------------------------
mkdir -p "$CACHE/debs"
DEB=$(ls -1 "$CACHE/debs/${KPKG}"_*.deb 2>/dev/null | sort -V | tail -n1 || true)
if [ -z "$DEB" ]; then
    msg "downloading $KPKG into $CACHE/debs"
    # APT::Sandbox::User=root: the cache dir is not writable by _apt.
    if ! (cd "$CACHE/debs" && apt-get "${APT_OPTS[@]}" download -q -o APT::Sandbox::User=root "$KPKG" >/dev/null); then
        apt_update_once
        (cd "$CACHE/debs" && apt-get "${APT_OPTS[@]}" download -q -o APT::Sandbox::User=root "$KPKG" >/dev/null) ||
            die "apt-get download $KPKG failed"
    fi
    DEB=$(ls -1 "$CACHE/debs/${KPKG}"_*.deb | sort -V | tail -n1)
else
    msg "using cached $DEB"
fi

KROOT="$CACHE/kernel-$KVER/root"
if [ ! -f "$CACHE/kernel-$KVER/.extracted" ]; then
    msg "extracting $(basename "$DEB")"
    rm -rf "$CACHE/kernel-$KVER"
    mkdir -p "$KROOT"
    dpkg-deb -x "$DEB" "$KROOT"
    touch "$CACHE/kernel-$KVER/.extracted"
fi

# Drop older kernels from the cache (a kernel ABI bump would pile them up).
for old in "$CACHE"/kernel-*; do
    [ -d "$old" ] && [ "$old" != "$CACHE/kernel-$KVER" ] && { msg "pruning $old"; rm -rf "$old"; }
done
for old in "$CACHE"/debs/linux-image-*.deb; do
    [ -f "$old" ] && [ "$old" != "$DEB" ] && { msg "pruning $old"; rm -f "$old"; }
done

VMLINUZ="$KROOT/boot/vmlinuz-$KVER"
[ -f "$VMLINUZ" ] || die "no boot/vmlinuz-$KVER in $DEB"
MODDIR=""
for d in "$KROOT/lib/modules/$KVER" "$KROOT/usr/lib/modules/$KVER"; do
    [ -d "$d" ] && { MODDIR=$d; break; }
done
[ -n "$MODDIR" ] || die "no lib/modules/$KVER in $DEB"

# ---------------------------------------------------------------------------
# 4. Stage the initramfs
# ---------------------------------------------------------------------------
STAGE=$(mktemp -d /tmp/bm-initramfs.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE"/{bin,dev,proc,sys,mnt,tmp,etc,lib/modules/balloonmgr}
cp /bin/busybox "$STAGE/bin/busybox"
# The workload program: static, so that it needs nothing from the initramfs.
if [ -n "${BM_GUEST_LOAD:-}" ]; then
    [ -x "$BM_GUEST_LOAD" ] || die "BM_GUEST_LOAD=$BM_GUEST_LOAD: no such executable"
    cp "$BM_GUEST_LOAD" "$STAGE/bin/bm-guest-load"
    msg "workload bm-guest-load <- $BM_GUEST_LOAD"
else
    ensure_pkgs gcc libc6-dev
    cc -static -O2 -Wall -o "$STAGE/bin/bm-guest-load" "$LOAD_SRC" ||
        die "cc -static $LOAD_SRC failed"
    msg "workload bm-guest-load built from $LOAD_SRC"
fi
# The kernel opens /dev/console for /init before devtmpfs is mounted.
mknod -m 600 "$STAGE/dev/console" c 5 1
mknod -m 666 "$STAGE/dev/null" c 1 3
echo "$KVER" >"$STAGE/etc/bm-kernel-version"

# find_module NAME: path of NAME.ko[.xz|.zst|.gz] below MODDIR ('-' == '_').
find_module() {
    local pat=${1//_/[-_]}
    find "$MODDIR/kernel" -type f \( -name "$pat.ko" -o -name "$pat.ko.xz" \
        -o -name "$pat.ko.zst" -o -name "$pat.ko.gz" \) | head -n1
}

# install_ko SRC DST: the module SRC (.ko, .ko.xz, .ko.zst or .ko.gz), uncompressed, as DST.
install_ko() {
    case "$1" in
        *.ko.xz)  ensure_pkgs xz-utils; xz -dc "$1" >"$2" ;;
        *.ko.zst) ensure_pkgs zstd; zstd -qdc "$1" >"$2" ;;
        *.ko.gz)  gzip -dc "$1" >"$2" ;;
        *)        cp "$1" "$2" ;;
    esac
}

# ko_depends KO: the (uncompressed) module's dependencies, space-separated.
ko_depends() {
    tr '\0' '\n' <"$1" | sed -n 's/^depends=//p' | head -n1 | tr ',' ' '
}

ORDER="$STAGE/lib/modules/balloonmgr/modules.order"
: >"$ORDER"
for m in "${MODULES[@]}"; do
    src=$(find_module "$m")
    if [ -z "$src" ]; then
        if grep -qE "/${m//_/[-_]}\.ko$" "$MODDIR/modules.builtin" 2>/dev/null; then
            msg "module $m is built into the kernel, skipping"
            echo "$m builtin" >>"$ORDER"
            continue
        fi
        die "module $m not found in $MODDIR and not built in"
    fi
    install_ko "$src" "$STAGE/lib/modules/balloonmgr/$m.ko"
    msg "module $m <- ${src#"$MODDIR"/}"
    echo "$m file" >>"$ORDER"
done
for m in "${OPTIONAL_MODULES[@]}"; do
    src=$(find_module "$m")
    if [ -z "$src" ]; then
        msg "note: module $m not in $MODDIR, leaving it out"
        continue
    fi
    dst="$STAGE/lib/modules/balloonmgr/$m.ko"
    install_ko "$src" "$dst"
    absent=""
    for dep in $(ko_depends "$dst"); do
        grep -q "^$dep " "$ORDER" ||
            grep -qE "/${dep//_/[-_]}\.ko$" "$MODDIR/modules.builtin" 2>/dev/null ||
            absent="$absent $dep"
    done
    if [ -n "$absent" ]; then
        msg "note: module $m needs$absent, not in the initramfs: leaving it out"
        rm -f "$dst"
        continue
    fi
    msg "module $m <- ${src#"$MODDIR"/} (optional, depends: $(ko_depends "$dst"))"
    echo "$m file" >>"$ORDER"
done
for m in "${ROOTFS_MODULES[@]}"; do
    src=$(find_module "$m")
    if [ -z "$src" ]; then
        grep -qE "/${m//_/[-_]}\.ko$" "$MODDIR/modules.builtin" 2>/dev/null ||
            die "module $m (BM_GUEST_ROOTFS=1) not found in $MODDIR and not built in"
        msg "module $m is built into the kernel, skipping"
        echo "$m builtin" >>"$ORDER"
        continue
    fi
    install_ko "$src" "$STAGE/lib/modules/balloonmgr/$m.ko"
    msg "module $m <- ${src#"$MODDIR"/} (BM_GUEST_ROOTFS=1)"
    echo "$m file" >>"$ORDER"
done
# Not in modules.order: /init loads it in place of virtio_balloon on request.
if [ -n "$SG_MODULE" ]; then
    cp "$SG_MODULE" "$STAGE/lib/modules/balloonmgr/$SG_NAME.ko"
    msg "module $SG_NAME <- $SG_MODULE (loaded with bm.sgdriver=1)"
fi

cat >"$STAGE/init" <<'EOF'
#!/bin/busybox sh
# balloonmgr test guest /init (generated by tests/integration/lib/build-guest.sh)
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null || true

touch_mib=0
noballoon=0
novirtiomem=0
memtotal_mib=0
moddir=
sgdriver=0
sgparams=
sgstats=0
retouch_mib=0
retouchloop=0
at=
load=
root=
rootinit=/sbin/init
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        bm.touch=*)     touch_mib=${arg#bm.touch=} ;;
        bm.noballoon=*) noballoon=${arg#bm.noballoon=} ;;
        bm.novirtiomem=*) novirtiomem=${arg#bm.novirtiomem=} ;;
        bm.memtotal=*)  memtotal_mib=${arg#bm.memtotal=} ;;
        bm.modules=*)   moddir=${arg#bm.modules=} ;;
        bm.sgdriver=*)  sgdriver=${arg#bm.sgdriver=} ;;
        bm.sgparams=*)  sgparams=${arg#bm.sgparams=} ;;
        bm.sgstats=*)   sgstats=${arg#bm.sgstats=} ;;
        bm.retouch=*)   retouch_mib=${arg#bm.retouch=} ;;
        bm.retouchloop=*) retouchloop=${arg#bm.retouchloop=} ;;
        bm.at=*)        at=${arg#bm.at=} ;;
        bm.load=*)      load=${arg#bm.load=} ;;
        bm.root=*)      root=${arg#bm.root=} ;;
        bm.rootinit=*)  rootinit=${arg#bm.rootinit=} ;;
    esac
done
echo "bm: guest kernel $(uname -r) up; cmdline: $(cat /proc/cmdline)"

balloon_mod=
balloon_ko=
balloon_params=

while read -r mod kind; do
    if [ "$mod" = virtio_balloon ] && [ "$noballoon" = 1 ]; then
        echo "bm: module $mod skipped (bm.noballoon=1)"
        continue
    fi
    if [ "$mod" = virtio_mem ] && [ "$novirtiomem" = 1 ]; then
        echo "bm: module $mod skipped (bm.novirtiomem=1)"
        continue
    fi
    params=
    if [ "$mod" = virtio_balloon ] && [ "$sgdriver" = 1 ]; then
        mod=virtio_balloon_sg
        kind=file
        params=$(echo "$sgparams" | tr ',' ' ')
        if [ ! -f /lib/modules/balloonmgr/$mod.ko ] &&
           ! { [ -n "$moddir" ] && [ -f "$moddir/$mod.ko" ]; }; then
            echo "bm: module $mod FAILED to load (not in this initramfs: lab/guest/build.sh, then build-guest.sh)"
            continue
        fi
    fi
    if [ "$kind" = builtin ]; then
        echo "bm: module $mod is built in"
        continue
    fi
    ko=/lib/modules/balloonmgr/$mod.ko
    if [ -n "$moddir" ] && [ -f "$moddir/$mod.ko" ]; then
        ko=$moddir/$mod.ko
    fi
    # shellcheck disable=SC2086  # params: word splitting wanted
    if insmod "$ko" $params; then
        echo "bm: module $mod loaded ($ko${params:+ $params})"
        case "$mod" in
            virtio_balloon*) balloon_mod=$mod; balloon_ko=$ko; balloon_params=$params ;;
        esac
    else
        echo "bm: module $mod FAILED to load ($ko)"
    fi
done </lib/modules/balloonmgr/modules.order

sgstats_file() {
    for f in /sys/bus/virtio/drivers/virtio_balloon_sg/virtio*/sg_stats; do
        [ -f "$f" ] && { echo "$f"; return 0; }
    done
    return 1
}
if [ "$sgdriver" = 1 ]; then
    for d in /sys/bus/virtio/drivers/*/virtio*; do
        [ -e "$d" ] && echo "bm: device ${d##*/} bound to driver $(basename "${d%/*}")"
    done
    f=$(sgstats_file) && sed 's/^/bm: sg_stats: /' "$f"
fi

# bm.root=DEV: the root file system on DEV, its own init as PID 1 (the devices are there once
# virtio_blk is loaded; devtmpfs makes the node a moment later)
if [ -n "$root" ]; then
    i=0
    while [ ! -b "$root" ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
    mkdir -p /newroot
    if mount -t ext4 -o rw "$root" /newroot && [ -x "/newroot$rootinit" ]; then
        echo "bm: root $root mounted, switching to it (init $rootinit)"
        umount /sys /proc
        mount -o move /dev /newroot/dev 2>/dev/null || umount /dev
        exec switch_root /newroot "$rootinit"
    fi
    echo "bm: root $root FAILED (no such device, not ext4 or no $rootinit in it): going on without it"
    umount /newroot 2>/dev/null
fi

# touch_mem MIB DONE FAILED: write MIB MiB of zeroes into a tmpfs (page cache
# pages get written, so they become resident in the QEMU process), then free
# them again; prints "bm: DONE MIB MiB" or "bm: FAILED MIB MiB FAILED".
touch_mem() {
    mkdir -p /mnt/touch
    if mount -t tmpfs -o size=$(($1 + 16))m tmpfs /mnt/touch &&
       dd if=/dev/zero of=/mnt/touch/fill bs=1M count="$1" 2>/dev/null; then
        rm -f /mnt/touch/fill
        umount /mnt/touch
        echo "bm: $2 $1 MiB"
    else
        rm -f /mnt/touch/fill
        umount /mnt/touch 2>/dev/null
        echo "bm: $3 $1 MiB FAILED"
    fi
}

case "$memtotal_mib" in
    ''|*[!0-9]*) echo "bm: bad bm.memtotal=$memtotal_mib, ignored"; memtotal_mib=0 ;;
esac
if [ "$memtotal_mib" -gt 0 ]; then
    i=0
    while [ "$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)" -lt $((memtotal_mib * 1024)) ] &&
          [ $i -lt 1200 ]; do
        sleep 0.1; i=$((i + 1))
    done
    if [ $i -lt 1200 ]; then
        echo "bm: memtotal $(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) kB"
    else
        echo "bm: memtotal $memtotal_mib MiB not reached FAILED"
    fi
fi

case "$touch_mib" in
    ''|*[!0-9]*) echo "bm: bad bm.touch=$touch_mib, ignored"; touch_mib=0 ;;
esac
if [ "$touch_mib" -gt 0 ]; then
    touch_mem "$touch_mib" touched touching
fi

memtotal_kib() { awk '/^MemTotal:/ { print $2 }' /proc/meminfo; }
# balloon_kib BASE: the balloon's size in KiB: from sg_stats when the SG lab
# driver runs (exact, also with deflate-on-OOM), else BASE - MemTotal.
balloon_kib() {
    local f
    if f=$(sgstats_file); then
        awk '/num_pages:/ { for (i = 1; i < NF; i++) if ($i == "num_pages:") print $(i + 1) * 4 }' "$f"
    else
        echo $(($1 - $(memtotal_kib)))
    fi
}
case "$retouch_mib" in
    ''|*[!0-9]*) echo "bm: bad bm.retouch=$retouch_mib, ignored"; retouch_mib=0 ;;
esac
if [ "$retouch_mib" -gt 0 ]; then
    (
        base=$(memtotal_kib)
        while :; do
            echo "bm: retouch: waiting for the balloon to inflate and deflate (MemTotal $base kB)"
            while [ "$(balloon_kib "$base")" -lt 32768 ]; do sleep 1; done
            echo "bm: retouch: balloon inflated ($(balloon_kib "$base") kB, MemTotal $(memtotal_kib) kB)"
            while [ "$(balloon_kib "$base")" -ge 4096 ]; do sleep 1; done
            echo "bm: retouch: balloon deflated ($(balloon_kib "$base") kB, MemTotal $(memtotal_kib) kB)"
            touch_mem "$retouch_mib" retouched retouching
            [ "$retouchloop" = 1 ] || break
        done
    ) &
fi

case "$sgstats" in
    ''|*[!0-9]*) echo "bm: bad bm.sgstats=$sgstats, ignored"; sgstats=0 ;;
esac
if [ "$sgstats" -gt 0 ] && [ "$sgdriver" = 1 ]; then
    (
        last=
        while :; do
            if f=$(sgstats_file); then
                cur=$(cat "$f")
                [ "$cur" != "$last" ] && echo "$cur" | sed 's/^/bm: sg_stats: /'
                last=$cur
            fi
            sleep "$sgstats"
        done
    ) &
fi

# frag_mem MIB: MIB MiB of 4 KiB files in a tmpfs, then every other one
# deleted: the guest's free memory gets MIB/2 MiB of isolated free pages.
frag_mem() {
    local n=$(($1 * 256))
    mkdir -p /mnt/frag
    if mount -t tmpfs -o size=$(($1 + 16))m,nr_inodes=$((n + 1024)) tmpfs /mnt/frag &&
       awk -v n="$n" 'BEGIN { s = sprintf("%4096s", ""); for (i = 0; i < n; i++) {
                          f = "/mnt/frag/" i; printf "%s", s > f; close(f) } }' &&
       (cd /mnt/frag && rm -f -- *[02468]); then
        echo "bm: fragmented $1 MiB: $(ls /mnt/frag | wc -l) of $n 4 KiB files kept"
    else
        echo "bm: fragmenting $1 MiB FAILED"
    fi
}

# frag2m_mem MIB: MIB MiB of 2 MiB files of a pattern in a tmpfs, then every
# other one deleted: free memory in holes of about 2 MiB (rarely aligned to
# 2 MiB), the kept files checked by fragcheck.
frag2m_mem() {
    local n=$(($1 / 2)) i=0
    mkdir -p /mnt/frag2m
    if mount -t tmpfs -o size=$(($1 + 16))m tmpfs /mnt/frag2m &&
       yes 0123456789abcdef | head -c 2097152 >/mnt/frag2m/pattern; then
        while [ $i -lt $n ] && cp /mnt/frag2m/pattern /mnt/frag2m/f$i; do i=$((i + 1)); done
        i=1
        while [ $i -lt $n ]; do rm -f /mnt/frag2m/f$i; i=$((i + 2)); done
        echo "bm: fragmented $1 MiB in 2 MiB files: $(ls /mnt/frag2m | grep -c '^f') of $n kept"
    else
        echo "bm: fragmenting $1 MiB in 2 MiB files FAILED"
    fi
}
# frag_check: the files of frag_mem (4 KiB of spaces each) and frag2m_mem
# (the pattern) still hold what was written (a page the balloon gave the
# host by mistake reads back as zeros).
frag_check() {
    local files=0 bad=0 f
    if [ -f /mnt/frag2m/pattern ]; then
        for f in /mnt/frag2m/f*; do
            [ -f "$f" ] || continue
            files=$((files + 1))
            cmp -s /mnt/frag2m/pattern "$f" || bad=$((bad + 1))
        done
    fi
    if [ -d /mnt/frag ] && [ -n "$(ls /mnt/frag)" ]; then
        files=$((files + $(ls /mnt/frag | wc -l)))
        [ "$(cat /mnt/frag/* | tr -d ' ' | wc -c)" = 0 ] || bad=$((bad + 1))
    fi
    echo "bm: fragcheck: $files files, $bad corrupt"
}
vmstat_val() { awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }' /proc/vmstat; }
# compact_mem SECS: the guest compacts all its memory, over and over for SECS
# seconds (0: once).
compact_mem() {
    local n=0 end m0 s0
    m0=$(vmstat_val balloon_migrate); s0=$(vmstat_val compact_migrate_scanned)
    end=$(($(cut -d. -f1 /proc/uptime) + $1))
    while echo 1 >/proc/sys/vm/compact_memory; do
        n=$((n + 1))
        [ "$(cut -d. -f1 /proc/uptime)" -lt "$end" ] || break
    done
    echo "bm: compacted $n time(s) in $1 s: balloon_migrate +$(($(vmstat_val balloon_migrate) - m0)) compact_migrate_scanned +$(($(vmstat_val compact_migrate_scanned) - s0))"
}
base_kib=$(memtotal_kib)
run_action() {
    case "$1" in
        touch)   touch_mem "$2" "at: touched" "at: touching" ;;
        frag)    frag_mem "$2" ;;
        frag2m)  frag2m_mem "$2" ;;
        fragcheck) frag_check ;;
        compact) compact_mem "$2" ;;
        await)   case "$2" in
                     +*) # the balloon grows by exactly that much from one reading to the next
                         last=$(balloon_kib "$base_kib")
                         while sleep 1; do
                             cur=$(balloon_kib "$base_kib")
                             [ "$cur" = $((last + ${2#+})) ] && break
                             last=$cur
                         done
                         echo "bm: at: balloon grew by ${2#+} KiB to $cur KiB" ;;
                     *)  while [ "$(balloon_kib "$base_kib")" != "$2" ]; do sleep 1; done
                         echo "bm: at: balloon at $2 KiB" ;;
                 esac ;;
        rmmod)   if [ -n "$balloon_mod" ] && rmmod "$balloon_mod"; then
                     echo "bm: at: $balloon_mod unloaded"
                 else
                     echo "bm: at: rmmod $balloon_mod FAILED"
                 fi ;;
        insmod)  # shellcheck disable=SC2086
                 if [ -n "$balloon_ko" ] && insmod "$balloon_ko" $balloon_params; then
                     echo "bm: at: $balloon_mod loaded again"
                 else
                     echo "bm: at: insmod $balloon_ko FAILED"
                 fi ;;
        meminfo) echo "bm: at: meminfo $(awk '/^(MemTotal|MemFree|MemAvailable):/ { printf "%s %s kB ", $1, $2 }' /proc/meminfo)" ;;
        *)       echo "bm: at: unknown action '$1'" ;;
    esac
}
if [ -n "$at" ]; then
    (
        start=$(cut -d. -f1 /proc/uptime)
        for item in $(echo "$at" | tr ',' ' '); do
            secs=${item%%:*}; rest=${item#*:}; act=${rest%%:*}; arg=
            [ "$rest" != "$act" ] && arg=${rest#*:}
            case "$secs" in ''|*[!0-9]*) echo "bm: at: bad item '$item'"; continue ;; esac
            wait_s=$((start + secs - $(cut -d. -f1 /proc/uptime)))
            [ "$wait_s" -gt 0 ] && sleep "$wait_s"
            echo "bm: at $secs s: $act${arg:+ $arg}"
            run_action "$act" "$arg"
        done
        echo "bm: at: all done"
    ) &
fi

if [ -n "$load" ]; then
    # its lines go to the console; it never exits (its supervisor restarts a killed worker)
    /bin/bm-guest-load "$load" &
fi

echo "BALLOONMGR-GUEST-READY"
# PID 1 must never exit.
while :; do sleep 3600; done
EOF
chmod 0755 "$STAGE/init"

# ---------------------------------------------------------------------------
# 5. Install into OUTDIR (atomically per file) and stamp
# ---------------------------------------------------------------------------
mkdir -p "$OUTDIR"
chmod 0755 "$OUTDIR"
(cd "$STAGE" && find . -print0 | LC_ALL=C sort -z |
    cpio --null -o -H newc --owner=0:0 --quiet) | gzip -9 >"$OUTDIR/.initrd.img.tmp"
cp "$VMLINUZ" "$OUTDIR/.vmlinuz.tmp"
chmod 0644 "$OUTDIR/.initrd.img.tmp" "$OUTDIR/.vmlinuz.tmp"
mv -f "$OUTDIR/.initrd.img.tmp" "$OUTDIR/initrd.img"
mv -f "$OUTDIR/.vmlinuz.tmp" "$OUTDIR/vmlinuz"
echo "$KVER" >"$OUTDIR/kernel-version"
echo "$MODDIR" >"$OUTDIR/modules-dir"
for l in "$OUTDIR"/modules-*; do [ -L "$l" ] && rm -f "$l"; done   # old modules-VERSION links
ln -sfn "$MODDIR" "$OUTDIR/modules-$KVER"
echo "$STAMP" >"$OUTDIR/.build-stamp"
chmod 0644 "$OUTDIR/kernel-version" "$OUTDIR/modules-dir" "$OUTDIR/.build-stamp"

msg "built $OUTDIR: vmlinuz ($(stat -c %s "$OUTDIR/vmlinuz") bytes)," \
    "initrd.img ($(stat -c %s "$OUTDIR/initrd.img") bytes), kernel $KVER"
