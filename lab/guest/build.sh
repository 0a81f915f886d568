#!/bin/bash
# lab/guest/build.sh [-k KERNEL_VERSION] [-o OUT.ko] [-f]
#
# Builds virtio_balloon_sg.ko (the SG lab's guest balloon driver, see
# lab/PROTOCOL.md) for the kernel of balloonmgr's test guest, without
# installing any kernel package on the host:
#
#   1. kernel version: -k, else $BM_GUEST_DIR/kernel-version (written by
#      tests/integration/lib/build-guest.sh), e.g. 6.1.0-57-amd64 or, with
#      BM_KERNEL_SUITE=trixie, 6.12.117+deb13-amd64;
#   2. apt-get download (never install) linux-headers-VERSION,
#      linux-headers-VERSION-common (VERSION minus the flavour) and the
#      linux-kbuild package those headers depend on, pinned to the version
#      of the linux-image .deb build-guest.sh cached when there is one; with
#      BM_KERNEL_SUITE through that suite's own apt state (build-guest.sh's,
#      BM_GUEST_CACHE/apt-SUITE: this host's apt untouched);
#   3. dpkg-deb -x all three into one root under the cache; the headers
#      only use relative symlinks there except for one absolute include in
#      linux-headers-VERSION/Makefile, which is pointed into that root;
#   4. make -C ROOT/usr/src/linux-headers-VERSION M=BUILDDIR modules with
#      the compiler the headers depend on (their .kernelvariables pick it):
#      on this host when it has that gcc (Debian 12: gcc-12, for 6.1 and
#      bookworm-backports' 6.12); else (trixie's 6.12 wants gcc-14) in the
#      suite's container root of the real-host lanes (container.sh's
#      bm_ct_root, cached; not booted: bm_ct_run, an overlay and chroot);
#   5. check the module's vermagic against VERSION and install it.
#
# Cache (BM_SG_CACHE, default ${BM_GUEST_CACHE:-/var/cache/balloonmgr-test}/sg-module, with
# BM_KERNEL_SUITE sg-module-SUITE):
#   debs/                      the three downloaded .debs
#   headers-VERSION_DEBVER/    the extracted root (.extracted marks it done)
#   build/                     sources + virtio_balloon_sg.ko + .hash (sha256 of
#                              the sources, this script, VERSION and DEBVER):
#                              a matching .hash means no rebuild
# Output (-o, else BM_SG_MODULE_OUT, else $BM_GUEST_DIR/virtio_balloon_sg.ko):
# the module, mode 0644. build-guest.sh picks up
# $BM_GUEST_DIR/virtio_balloon_sg.ko by itself (or BM_GUEST_SG_MODULE=PATH).
# The last line printed is the output path.
#
# Environment: BM_KERNEL_SUITE (e.g. trixie: the guest kernel of that suite, as
# build-guest.sh), BM_GUEST_DIR [/var/lib/libvirt/images/balloonmgr-test, with
# BM_KERNEL_SUITE balloonmgr-test-SUITE], BM_GUEST_CACHE, BM_SG_CACHE,
# BM_SG_MODULE_OUT, BM_SG_FORCE=1 (= -f: rebuild even if cached).
set -euo pipefail

HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
SOURCES=(virtio_balloon_sg.c Kbuild Makefile build.sh)
SUITE=${BM_KERNEL_SUITE:-}
case "$SUITE" in *[!a-z0-9-]*) echo "sg-build: ERROR: BM_KERNEL_SUITE '$SUITE': not a suite name" >&2; exit 1 ;; esac
GUEST_CACHE=${BM_GUEST_CACHE:-/var/cache/balloonmgr-test}
GUEST_DIR=${BM_GUEST_DIR:-/var/lib/libvirt/images/balloonmgr-test${SUITE:+-$SUITE}}
CACHE=${BM_SG_CACHE:-$GUEST_CACHE/sg-module${SUITE:+-$SUITE}}
# Where build-guest.sh keeps the kernel .deb, and the suite's apt state (build-guest.sh's).
IMG_DEBS=$GUEST_CACHE${SUITE:+/suite-$SUITE}/debs
APT_OPTS=()
if [ -n "$SUITE" ]; then
    APT_DIR=$GUEST_CACHE/apt-$SUITE
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
    echo "deb http://deb.debian.org/debian $SUITE main" >"$APT_DIR/sources.list"
    APT_OPTS=(-o "Dir::Etc::SourceList=$APT_DIR/sources.list" -o Dir::Etc::SourceParts=/dev/null
              -o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::Cache=$APT_DIR/cache")
fi
OUT=${BM_SG_MODULE_OUT:-}
KVER=""
FORCE=${BM_SG_FORCE:-0}

msg() { echo "sg-build: $*" >&2; }
die() { echo "sg-build: ERROR: $*" >&2; exit 1; }

while getopts "k:o:fh" opt; do
    case "$opt" in
        k) KVER=$OPTARG ;;
        o) OUT=$OPTARG ;;
        f) FORCE=1 ;;
        h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) exit 2 ;;
    esac
done
OUT=${OUT:-$GUEST_DIR/virtio_balloon_sg.ko}

if [ -z "$KVER" ]; then
    [ -s "$GUEST_DIR/kernel-version" ] ||
        die "no $GUEST_DIR/kernel-version: run tests/integration/lib/build-guest.sh first, or pass -k VERSION"
    KVER=$(cat "$GUEST_DIR/kernel-version")
fi
case "$KVER" in
    [0-9]*.[0-9]*.*-*) ;;
    *) die "unexpected kernel version '$KVER' (want e.g. 6.1.0-57-amd64 or 6.12.117+deb13-amd64)" ;;
esac
KABI=${KVER%-*}                             # 6.1.0-57, 6.12.117+deb13
PKG_HDR=linux-headers-$KVER
PKG_COMMON=linux-headers-$KABI-common

export DEBIAN_FRONTEND=noninteractive
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
# host_can_have PKG: PKG is installed on this host or its apt has a candidate for it.
host_can_have() {
    local c
    pkg_installed "$1" && return 0
    c=$(apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: *//p')
    [ -n "$c" ] && [ "$c" != "(none)" ]
}
# ensure_host_pkgs PKG...: apt-get install those missing on this host.
ensure_host_pkgs() {
    local missing=() p
    for p in "$@"; do pkg_installed "$p" || missing+=("$p"); done
    [ "${#missing[@]}" -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || die "missing ${missing[*]} (need root to install them)"
    msg "installing ${missing[*]}"
    apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null ||
        { apt-get update -qq >/dev/null; apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null; } ||
        die "apt-get install ${missing[*]} failed"
}

mkdir -p "$CACHE/debs"
exec 9>"$CACHE/.lock"
flock 9

# ---------------------------------------------------------------------------
# Headers: which Debian version, download, extract
# ---------------------------------------------------------------------------
# The version of the linux-image .deb build-guest.sh used, if cached.
DEBVER=""
img=$(ls -1 "$IMG_DEBS"/linux-image-"$KVER"*_*.deb 2>/dev/null | sort -V | tail -n1 || true)
[ -n "$img" ] && DEBVER=$(basename "$img" | cut -d_ -f2)

# cached_deb PKG [VERSION]: newest cached .deb of PKG (of that VERSION).
cached_deb() {
    if [ -n "${2:-}" ]; then
        ls -1 "$CACHE/debs/${1}_${2}_"*.deb 2>/dev/null | sort -V | tail -n1 || true
    else
        ls -1 "$CACHE/debs/${1}_"*.deb 2>/dev/null | sort -V | tail -n1 || true
    fi
}

# download PKG [VERSION]: apt-get download into debs/ (pinned if VERSION).
download() {
    local pkg=$1 ver=${2:-} spec
    spec=$pkg${ver:+=$ver}
    [ -n "$(cached_deb "$pkg" "$ver")" ] && return 0
    msg "downloading $spec"
    # APT::Sandbox::User=root: the cache dir is not writable by _apt.
    if ! (cd "$CACHE/debs" && apt-get "${APT_OPTS[@]}" download -q -o APT::Sandbox::User=root "$spec" >/dev/null 2>&1); then
        apt-get "${APT_OPTS[@]}" update -qq >/dev/null 2>&1 || true
        (cd "$CACHE/debs" && apt-get "${APT_OPTS[@]}" download -q -o APT::Sandbox::User=root "$spec" >/dev/null) ||
            return 1
    fi
}

if [ -z "$DEBVER" ]; then
    DEBVER=$(apt-cache "${APT_OPTS[@]}" policy "$PKG_HDR" 2>/dev/null | sed -n 's/^ *Candidate: *//p')
    [ -n "$DEBVER" ] && [ "$DEBVER" != "(none)" ] || DEBVER=""
    if [ -z "$DEBVER" ]; then
        d=$(cached_deb "$PKG_HDR")
        [ -n "$d" ] && DEBVER=$(basename "$d" | cut -d_ -f2)
    fi
fi
[ -n "$DEBVER" ] || die "cannot tell which version of $PKG_HDR to use"
msg "kernel $KVER, headers $DEBVER"

download "$PKG_HDR" "$DEBVER" || die "apt-get download $PKG_HDR=$DEBVER failed"
download "$PKG_COMMON" "$DEBVER" || die "apt-get download $PKG_COMMON=$DEBVER failed"
# The headers name their kbuild package (linux-kbuild-6.1, linux-kbuild-6.12.117+deb13) and
# compiler (gcc-12, gcc-14) in Depends.
HDR_DEPENDS=$(dpkg-deb -f "$(cached_deb "$PKG_HDR" "$DEBVER")" Depends)
PKG_KBUILD=$(echo "$HDR_DEPENDS" | tr ',|' '\n\n' | sed -n 's/^ *\(linux-kbuild-[^ ]*\).*/\1/p' | head -n1)
CC_PKG=$(echo "$HDR_DEPENDS" | tr ',|' '\n\n' | sed -n 's/^ *\(gcc-[0-9][0-9]*\)\( .*\)\{0,1\}$/\1/p' | head -n1)
[ -n "$PKG_KBUILD" ] || die "$PKG_HDR=$DEBVER names no linux-kbuild package in Depends: $HDR_DEPENDS"
[ -n "$CC_PKG" ] || CC_PKG=gcc-12
# linux-headers depends on linux-kbuild (>= DEBVER): same version if possible.
download "$PKG_KBUILD" "$DEBVER" || download "$PKG_KBUILD" ||
    die "apt-get download $PKG_KBUILD failed"
KBUILD_DEB=$(cached_deb "$PKG_KBUILD" "$DEBVER")
[ -n "$KBUILD_DEB" ] || KBUILD_DEB=$(cached_deb "$PKG_KBUILD")

HROOT_DIR="$CACHE/headers-${KVER}_$DEBVER"
HROOT="$HROOT_DIR/root"
HDR="$HROOT/usr/src/linux-headers-$KVER"
if [ ! -f "$HROOT_DIR/.extracted" ]; then
    msg "extracting headers into $HROOT_DIR"
    rm -rf "$HROOT_DIR"
    mkdir -p "$HROOT"
    for d in "$(cached_deb "$PKG_HDR" "$DEBVER")" "$(cached_deb "$PKG_COMMON" "$DEBVER")" "$KBUILD_DEB"; do
        dpkg-deb -x "$d" "$HROOT"
    done
    [ -f "$HDR/Makefile" ] || die "no usr/src/linux-headers-$KVER/Makefile in $PKG_HDR"
    # Debian's flavour Makefile is "include /usr/src/linux-headers-ABI-common/Makefile":
    # point it into the extracted root. All other links in there are relative
    # (scripts, tools -> ../../lib/linux-kbuild-MAJOR.MINOR/...).
    sed -i "s|^include /usr/src/|include $HROOT/usr/src/|" "$HDR/Makefile"
    for l in "$HDR/scripts" "$HDR/tools"; do
        [ -e "$l/" ] || die "dangling $(readlink "$l") in the extracted headers ($PKG_KBUILD missing?)"
    done
    touch "$HROOT_DIR/.extracted"
fi

# Drop other kernels' headers and debs (an ABI bump would pile them up).
for old in "$CACHE"/headers-*; do
    [ -d "$old" ] && [ "$old" != "$HROOT_DIR" ] && { msg "pruning $old"; rm -rf "$old"; }
done
for old in "$CACHE"/debs/*.deb; do
    case "$(basename "$old")" in
        "$PKG_HDR"_"$DEBVER"_*|"$PKG_COMMON"_"$DEBVER"_*|"$(basename "$KBUILD_DEB")") ;;
        *) [ -f "$old" ] && { msg "pruning $old"; rm -f "$old"; } ;;
    esac
done

# ---------------------------------------------------------------------------
# Build (cached by hash)
# ---------------------------------------------------------------------------
HASH=$( { for f in "${SOURCES[@]}"; do echo "== $f"; cat "$HERE/$f"; done
          echo "$KVER $DEBVER $(basename "$KBUILD_DEB")"; } | sha256sum | cut -c1-16)
# Always the same directory: the module's build-id covers the build path, so
# the same sources give a byte-identical module (and no initramfs rebuild).
BDIR="$CACHE/build"
KO="$BDIR/virtio_balloon_sg.ko"
if [ "$FORCE" = 1 ] || [ ! -s "$KO" ] || [ "$(cat "$BDIR/.hash" 2>/dev/null)" != "$HASH" ]; then
    rm -rf "$BDIR"
    mkdir -p "$BDIR"
    for f in "${SOURCES[@]}"; do cp "$HERE/$f" "$BDIR/"; done
    t0=$(date +%s.%N)
    # No BTF for the module (6.12's headers would run pahole, which neither this host nor the
    # container root has; the module is stripped of debug info anyway).
    MAKE_VARS=(CONFIG_DEBUG_INFO_BTF_MODULES=)
    if host_can_have "$CC_PKG"; then
        ensure_host_pkgs "$CC_PKG" make
        msg "building in $BDIR ($CC_PKG on this host)"
        build=(make -C "$HDR" M="$BDIR" "${MAKE_VARS[@]}" modules)
    else
        # Not in this host's archive (trixie's gcc-14 on Debian 12): the suite's container root.
        [ -n "$SUITE" ] || die "$PKG_HDR wants $CC_PKG, which this host cannot install (BM_KERNEL_SUITE unset)"
        ensure_host_pkgs mmdebstrap util-linux
        # shellcheck source=../../tests/integration/lib/lib.sh
        . "$HERE/../../tests/integration/lib/lib.sh"
        # shellcheck source=../../tests/integration/lib/container.sh
        . "$BM_LIB_DIR/container.sh"
        ct_root=$(bm_ct_root "$SUITE")
        msg "building in $BDIR ($CC_PKG in the $SUITE container root $ct_root)"
        build=(bm_ct_run "$ct_root" "$CACHE/ct" --bind "$CACHE" -- make -C "$HDR" M="$BDIR" "${MAKE_VARS[@]}" modules)
    fi
    if ! "${build[@]}" >"$BDIR/build.log" 2>&1; then
        cat "$BDIR/build.log" >&2
        rm -f "$KO"
        die "module build failed (log above, also $BDIR/build.log)"
    fi
    grep -E 'warning|error' "$BDIR/build.log" >&2 || true
    # Debug info is ~90% of the file; the initramfs does not need it.
    strip --strip-debug "$KO"
    echo "$HASH" >"$BDIR/.hash"
    msg "built in $(awk -v s="$t0" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s"
else
    msg "cached: $KO"
fi

vermagic=$(modinfo -F vermagic "$KO" 2>/dev/null || true)
case "$vermagic" in
    "$KVER "*) ;;
    *) die "$KO has vermagic '$vermagic', not $KVER" ;;
esac


mkdir -p "$(dirname "$OUT")"
if ! cmp -s "$KO" "$OUT" 2>/dev/null; then
    cp "$KO" "$OUT.tmp.$$"
    chmod 0644 "$OUT.tmp.$$"
    mv -f "$OUT.tmp.$$" "$OUT"
    msg "installed $OUT"
else
    msg "$OUT up to date"
fi
msg "vermagic: $vermagic; sha256 $(sha256sum <"$OUT" | cut -c1-16)"
echo "$OUT"
