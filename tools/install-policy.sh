#!/bin/sh
# meson install script: installs SRC as SYSCONFDIR/PATH (default balloonmgr/balloonmgr.policy:
# the default policy; also default/balloonmgr, the units' ARGS=) only when there is none, so a
# reinstall never overwrites an operator's file.
# Usage: install-policy.sh SRC SYSCONFDIR [PATH]
set -eu
src=$1 sysconfdir=$2 path=${3:-balloonmgr/balloonmgr.policy}
case "$sysconfdir" in /*) ;; *) sysconfdir="$MESON_INSTALL_PREFIX/$sysconfdir" ;; esac
dest="${DESTDIR:-}$sysconfdir/$path"
if [ -e "$dest" ]; then
    echo "keeping existing $dest"
else
    install -D -m 0644 "$src" "$dest"
    echo "installed $dest"
fi
