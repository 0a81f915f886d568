#!/bin/sh
# meson install script: installs the default policy as SYSCONFDIR/balloonmgr/balloonmgr.policy
# only when there is none, so a reinstall never overwrites an operator's policy.
set -eu
src=$1 sysconfdir=$2
case "$sysconfdir" in /*) ;; *) sysconfdir="$MESON_INSTALL_PREFIX/$sysconfdir" ;; esac
dest="${DESTDIR:-}$sysconfdir/balloonmgr/balloonmgr.policy"
if [ -e "$dest" ]; then
    echo "keeping existing $dest"
else
    install -D -m 0644 "$src" "$dest"
    echo "installed $dest"
fi
