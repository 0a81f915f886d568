#!/usr/bin/env bash
# Installs the Debian packages balloonmgr needs that are missing: to build (build), and also
# to run the whole test suite (test: libvirtd, QEMU, busybox for the guests, ...).
# Usage: tools/install-deps.sh [build|test|bench]     Runs apt-get update once, only if needed.
# bench: everything of test, and gnuplot for the scenario's timeline (bench/scenario.sh plot).
set -euo pipefail
what=${1:-build}

build_pkgs=(meson ninja-build pkg-config gcc libc6-dev scdoc libvirt-dev libxml2-dev libjson-c-dev
            libcurl4-openssl-dev libmicrohttpd-dev libyaml-dev libgnutls28-dev libcrypt-dev zlib1g-dev
            libsmartcols-dev libsystemd-dev jq bash-completion)
# libsmartcols-dev: util-linux's tables (status, run, verify), as lsblk prints them
# libsystemd-dev: sd_journal_send, the journal's records with fields when stderr is the journal
test_pkgs=(libvirt-daemon-system libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86
           qemu-utils seabios ipxe-qemu busybox-static cpio xz-utils zstd kmod procps
           prometheus prometheus-pushgateway curl dbus polkitd openssl valgrind strace
           debhelper dpkg-dev build-essential lintian systemd clang libclang-rt-14-dev python3
           mmdebstrap systemd-container
           flex bison libglib2.0-dev libpixman-1-dev libfdt-dev ccache make python3-venv python3-pip
           qemu-system-data tmux man-db groff-base)
# libc6-dev: libc.a, for the static workload of the test guest (tests/integration/lib/guest-load.c).
# valgrind: tests/test-leaks.sh runs the normal build's binary under it (the ASan build uses
# LeakSanitizer instead).
# strace: fault injection (ENOSPC at fsync, EDQUOT at close, slow fsync) in the state tests.
# prometheus: promtool (test-metrics checks the exposition) and the private Prometheus of
# tests/integration/lib/prom.sh, which also starts the Pushgateway and queries with curl.
# dbus, polkitd: libvirt asks polkit whether a non-root client may use its read-only socket
# (test-readonly runs the monitoring-only agent as nobody).
# debhelper, dpkg-dev, build-essential, lintian: tests/integration/test-deb.sh builds the
# Debian package (debian/) with dpkg-buildpackage, checks it with lintian and installs it.
# mmdebstrap, systemd-container: tests/integration/test-host.sh builds a Debian 12 and a Debian
# 13 root file system and boots each with systemd-nspawn (systemd as PID 1) to install the
# package there and run its units.
# systemd: systemd-journald, journalctl and systemd-cat for tests/test-journal.sh (a private
# journald in a mount namespace).
# openssl: the self-signed certificate of tests/test-webconfig-http.sh (HTTPS with curl).
# flex ... qemu-system-data: what lab/build-qemu.sh builds the lab's QEMU 10.0 with (test-lab-trixie);
# installed here, before the lanes of tools/test.sh, so that no apt-get runs beside test-deb's.
# clang, libclang-rt-14-dev: the libFuzzer targets of fuzz/ (tools/test.sh builds
# build-fuzz/ and runs each target a few seconds on its corpus with bench/fuzz).
# tmux: tests/test-watch.sh drives status --watch in a real terminal (send-keys, capture-pane).
# man-db, groff-base: tests/test-docs.sh renders balloonmgr(8) at 80 columns (man --warnings).
# python3: the notify socket (tests/test-notify.sh), a pipe closed before the program starts
# (tests/test-stdout.sh).

bench_pkgs=(gnuplot-nox)

pkgs=("${build_pkgs[@]}")
case "$what" in
    build) ;;
    test) pkgs+=("${test_pkgs[@]}") ;;
    bench) pkgs+=("${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
    *) echo "install-deps: unknown group '$what' (build, test or bench)" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Packages such as prometheus start their service on install; the tests start their own
# on free loopback ports, so keep packages from starting anything (policy-rc.d, 101 = deny).
guard=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    guard=/usr/sbin/policy-rc.d
fi
trap '[ -n "$guard" ] && rm -f "$guard"' EXIT
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
