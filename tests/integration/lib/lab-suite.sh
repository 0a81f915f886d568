# shellcheck shell=bash
# The lab pair of BM_LAB_SUITE [bookworm], for test-lab.sh and bench/lab.sh; sourced before
# lib.sh (which takes BM_GUEST_DIR from it):
#   bookworm: QEMU 7.2 + lab/qemu/*.patch (ioeventfd is the lab's property), 6.1 guests;
#   trixie:   QEMU 10.0 + lab/qemu-10.0/*.patch (ioeventfd is QEMU's own), Debian 13's 6.12
#             guests in their own image directory (BM_LAB_GUEST_DIR
#             [/var/lib/libvirt/images/balloonmgr-test-lab-trixie]).
# Sets LAB_SUITE, IOEVENTFD_SOURCE (lab or upstream: what verify says of the property) and
# LAB_SUFFIX ("" or -trixie: the lab QEMU's directory, balloonmgr-lab$LAB_SUFFIX); exports
# BM_LAB_SUITE (lab/build-qemu.sh and lab/guest/build.sh read it) and, for trixie,
# BM_KERNEL_SUITE and BM_GUEST_DIR (build-guest.sh's 6.12 guest).
LAB_SUITE=${BM_LAB_SUITE:-bookworm}
case "$LAB_SUITE" in
    bookworm) IOEVENTFD_SOURCE=lab LAB_SUFFIX=""
        unset BM_KERNEL_SUITE ;;
    trixie)
        IOEVENTFD_SOURCE=upstream LAB_SUFFIX=-trixie
        export BM_KERNEL_SUITE=trixie
        export BM_GUEST_DIR=${BM_LAB_GUEST_DIR:-/var/lib/libvirt/images/balloonmgr-test-lab-trixie} ;;
    *) echo "FAIL: BM_LAB_SUITE '$LAB_SUITE': expected bookworm or trixie" >&2; exit 1 ;;
esac
export BM_LAB_SUITE=$LAB_SUITE
