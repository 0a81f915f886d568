#!/usr/bin/env bash
# README command 1: install what is missing, build, and show balloonmgr on the demo host
# (libvirt's embedded test driver: no daemon, no VMs).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh build
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
uri="test://$PWD/demo/host.xml"
echo "\$ balloonmgr -c $uri status"
build/src/balloonmgr -c "$uri" status
