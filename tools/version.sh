#!/bin/sh
# The version of balloonmgr: the upstream part of debian/changelog's newest entry, its one
# source (meson.build's project version, so `balloonmgr --version` and the package agree).
# "balloonmgr (1:0.2.0-3) unstable; ..." prints 0.2.0: no epoch, no Debian revision.
# Usage: version.sh [CHANGELOG]   (default: the tree's debian/changelog)
set -eu
line=$(head -n 1 "${1:-$(dirname "$0")/../debian/changelog}")
v=$(printf '%s\n' "$line" | sed -n 's/^[a-z0-9][a-z0-9.+-]* (\([^)]*\)).*/\1/p')
[ -n "$v" ] || { echo "version.sh: no version in debian/changelog's first line: $line" >&2; exit 1; }
v=${v#*:}
case "$v" in *-*) v=${v%-*} ;; esac
printf '%s\n' "$v"
