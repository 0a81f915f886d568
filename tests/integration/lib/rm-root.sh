# shellcheck shell=bash
# bm_rm_root DIR: remove a root file system, never through a mount (an mmdebstrap or a build
# that was killed can leave /proc, /sys or /dev mounted inside it): anything mounted below DIR
# is unmounted first, deepest first, and rm stays on DIR's file system. Returns 1, saying
# which mount, when one cannot be unmounted (DIR is then left as it is). Sourced by
# container.sh and build-server-guest.sh.
bm_rm_root() {
    local m
    [ -e "$1" ] || return 0
    for m in $(findmnt -rn -o TARGET | grep -F "$1/" | sort -r || true); do
        umount -l "$m" || { echo "cannot unmount $m: not removing $1" >&2; return 1; }
    done
    rm -rf --one-file-system "$1"
}
