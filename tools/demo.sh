#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the main job on the demo host
# (libvirt's embedded test driver: no daemon, no VMs): the domains' memory, then one policy
# pass with a host under memory pressure (a fake /proc), showing each decision and its reason.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh build
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
uri="test://$PWD/demo/host.xml"
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
run() { echo "\$ balloonmgr $*"; build/src/balloonmgr "$@"; echo; }
run -c "$uri" status
run -c "$uri" run --once --table --policy demo/demo.policy --proc demo/proc --state "$state/state.json"
