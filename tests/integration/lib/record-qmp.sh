#!/usr/bin/env bash
# Records real QMP replies of QEMU's virtio-balloon from TCG guests into tests/data/qmp/, the
# fixtures of the qmp/features unit tests. Not part of the suite: run it (as root) when the
# QEMU version changes, and review the diff.
#   stock-*      balloon driver loaded, free-page-hint off
#   nodriver-*   initramfs without virtio_balloon (no DRIVER_OK)
#   fph-*        free-page-hint=on (needs an iothread), driver loaded
set -euo pipefail
. "$(dirname "$0")/lib.sh"
OUT=${1:-$(cd "$(dirname "$0")/../../data/qmp" && pwd)}
bm_setup


bm_define_guest stock 256
bm_define_guest nodriver 256 noballoon=1
bm_define_guest fph 256 "extra=$BM_FPH_XML"
for g in stock nodriver fph; do bm_wait_guest_ready $g; done
sleep 2

qmp() { bm_virsh qemu-monitor-command "$(bm_dom "$1")" --pretty "$2"; }
# replies are stored as QEMU sends them through libvirt: {"return": ..., "id": ...}
save() { jq 'del(.id)' >"$OUT/$1"; echo "recorded $1"; }

qmp stock '{"execute":"x-query-virtio"}' | save x-query-virtio.json
path=$(jq -r '.return[] | select(.name == "virtio-balloon") | .path' "$OUT/x-query-virtio.json")
proxy=${path%/virtio-backend}
for g in stock nodriver fph; do
    qmp $g "{\"execute\":\"x-query-virtio-status\",\"arguments\":{\"path\":\"$path\"}}" |
        save "$g-virtio-status.json"
done
qmp stock "{\"execute\":\"qom-list\",\"arguments\":{\"path\":\"$proxy\"}}" | save qom-list-proxy.json
qmp stock "{\"execute\":\"qom-get\",\"arguments\":{\"path\":\"$proxy\",\"property\":\"ioeventfd\"}}" |
    save qom-get-ioeventfd-missing.json || true
qmp stock '{"execute":"device-list-properties","arguments":{"typename":"virtio-balloon-pci"}}' |
    save device-list-properties-balloon-pci.json
qmp stock '{"execute":"x-query-virtio-nosuch"}' | save error-command-not-found.json || true
qmp stock '{"execute":"query-version"}' | save query-version.json
