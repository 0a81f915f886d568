#!/bin/bash
# build-server-guest.sh [DIR]
#
# Builds (and caches) the server guest of bench/scenario.sh (issue 49, BM_SCENARIO_HOT=pgbench):
# a real database nobody here wrote, PostgreSQL 15 from Debian 12, with its own benchmark client
# (pgbench) inside the guest, over a data set that lives in the guest's page cache.
#
#   DIR/root.img     an ext4 image (raw, mkfs.ext4 -d) of a Debian bookworm root made with
#                    mmdebstrap: postgresql-15 (pgbench with it), a cluster in
#                    /var/lib/postgresql/bm initialized here on the host (pgbench -i -s SCALE in
#                    the chroot, then CHECKPOINT), so that a run does not wait for pgbench -i
#                    under TCG; its init is /usr/local/sbin/bm-server-init (below)
#   DIR/boot/        the test guest's kernel and initramfs (build-guest.sh with BM_GUEST_ROOTFS=1:
#                    the ext4 stack besides the virtio modules); boot with bm.root=/dev/vda
#                    bm.rootinit=/usr/local/sbin/bm-server-init
#   DIR/info         key=value lines: scale, data_mib (the database's files), root_mib,
#                    postgres version, built (UTC)
#   DIR/.stamp       sha256 of this script and the scale: a matching stamp makes the next run a
#                    no-op (the kernel and initramfs are checked by build-guest.sh each time)
# DIR defaults to $BM_SERVER_DIR, else $BM_GUEST_CACHE/server (BM_GUEST_CACHE: build-guest.sh's
# cache, default /var/cache/balloonmgr-test). Everything 0644 / 0755: libvirt-qemu reads it.
# The image is never written by a guest: bm_define_guest root=DIR boots it through a qcow2
# overlay of the guest's own (lib.sh).
#
# The guest's init (PID 1 after the initramfs switched to the image; no systemd):
#   mounts /proc, /sys, /dev, /dev/shm, /run; starts PostgreSQL (shared_buffers 16MB: the data
#   set is read through read() from the guest's page cache, not from PostgreSQL's own buffers);
#   reads the database's files once (cat: the page cache warmed sequentially, not by the
#   benchmark's random reads under TCG); prints "bm-server: ready ..." and
#   BALLOONMGR-GUEST-READY on ttyS0; then runs `pgbench -S` (read-only selects by primary key,
#   uniformly over all the accounts) for ever, its progress lines on ttyS0 prefixed
#   "bm-pgbench: " ("bm-pgbench: progress: 12.0 s, 402.0 tps, lat 2.481 ms stddev 0.601, 0
#   failed"), started again if it ends ("bm-server: pgbench ended with status N, again in 1 s").
#   Every 30 s: "bm-server: meminfo MemFree: .. Cached: .. MemAvailable: .. kB".
#   Kernel command line: bm.pgprogress=SECS (pgbench -P, default 1), bm.pgclients=N (-c, default
#   1), bm.pgprewarm=0 (skip the cat).
#
# Environment:
#   BM_SERVER_DIR      DIR (above)
#   BM_SERVER_SCALE    pgbench scale (default 26: about 400 MiB of database files)
#   BM_SERVER_FORCE=1  rebuild even if the stamp matches
#   BM_GUEST_CACHE, BM_GUEST_LOAD, BM_KERNEL_PKG: as build-guest.sh
#
# Needs root (mmdebstrap --mode=root, chroot) and Debian's archive (deb.debian.org). Takes about
# 3-5 minutes the first time (most of it mmdebstrap and pgbench -i).
set -euo pipefail

SCRIPT_PATH=$(readlink -f "${BASH_SOURCE[0]}")
LIB_DIR=$(dirname "$SCRIPT_PATH")
CACHE=${BM_GUEST_CACHE:-/var/cache/balloonmgr-test}
DIR=${1:-${BM_SERVER_DIR:-$CACHE/server}}
SCALE=${BM_SERVER_SCALE:-26}
PGVER=15
PGDATA=/var/lib/postgresql/bm
INIT=/usr/local/sbin/bm-server-init

msg() { echo "build-server-guest: $*"; }
die() { echo "build-server-guest: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (mmdebstrap --mode=root, chroot)"
case "$SCALE" in ''|*[!0-9]*|0) die "BM_SERVER_SCALE '$SCALE': expected a positive integer" ;; esac
command -v mmdebstrap >/dev/null || die "no mmdebstrap (tools/install-deps.sh test)"
command -v mkfs.ext4 >/dev/null || die "no mkfs.ext4 (e2fsprogs)"

# the kernel and the initramfs with the ext4 stack (its own stamp; a no-op when up to date)
mkdir -p "$DIR"
chmod 0755 "$DIR"
BM_GUEST_ROOTFS=1 BM_GUEST_SG_MODULE=none bash "$LIB_DIR/build-guest.sh" "$DIR/boot" |
    sed 's/^/build-server-guest: /' || die "build-guest.sh $DIR/boot failed"

# one builder at a time (a second caller waits, then finds the stamp)
exec 9>"$DIR/.lock"
flock 9 || die "cannot lock $DIR/.lock"
STAMP=$( { sha256sum <"$SCRIPT_PATH"; echo "scale $SCALE"; } | sha256sum | cut -d' ' -f1)
if [ "${BM_SERVER_FORCE:-0}" != 1 ] && [ "$(cat "$DIR/.stamp" 2>/dev/null)" = "$STAMP" ] &&
   [ -s "$DIR/root.img" ] && [ -s "$DIR/info" ]; then
    msg "up to date: $DIR ($(tr '\n' ' ' <"$DIR/info"))"
    exit 0
fi

# rm_root DIR: bm_rm_root (rm-root.sh: never through a mount a killed build left inside it)
. "$(dirname "${BASH_SOURCE[0]}")/rm-root.sh"
rm_root() { bm_rm_root "$1" || die "not removing $1 (a mount below it stays)"; }

TMP=$DIR/.build.$$
LOG=$DIR/build.log
rm_root "$TMP"
mkdir -p "$TMP"
trap 'rm_root "$TMP"' EXIT
: >"$LOG"

# --- the guest's init, written into the root by a hook
cat >"$TMP/bm-server-init" <<'EOF'
#!/bin/sh
# bm-server-init: PID 1 of balloonmgr's server guest (tests/integration/lib/build-server-guest.sh):
# PostgreSQL and pgbench -S for ever, their lines on the console.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LANG=C
PGBIN=/usr/lib/postgresql/15/bin
PGDATA=/var/lib/postgresql/bm
mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t tmpfs -o mode=1777,size=64m tmpfs /dev/shm
mount -t tmpfs -o mode=0755,size=16m tmpfs /run
mount -t tmpfs -o mode=1777,size=64m tmpfs /tmp
mkdir -p /run/postgresql
chown postgres:postgres /run/postgresql
hostname bm-server
ip link set lo up 2>/dev/null || true
progress=1 clients=1 prewarm=1
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        bm.pgprogress=*) progress=${arg#bm.pgprogress=} ;;
        bm.pgclients=*)  clients=${arg#bm.pgclients=} ;;
        bm.pgprewarm=*)  prewarm=${arg#bm.pgprewarm=} ;;
    esac
done
say() { echo "bm-server: $*"; }
meminfo() { awk '/^(MemTotal|MemFree|Cached|MemAvailable):/ { printf "%s %s ", $1, $2 } END { print "kB" }' /proc/meminfo; }
say "up (Debian $(cat /etc/debian_version), kernel $(uname -r)); $(meminfo)"
t0=$(cut -d' ' -f1 /proc/uptime)
if ! su postgres -s /bin/sh -c "$PGBIN/pg_ctl -D $PGDATA -l /var/log/postgresql/bm.log -w -t 600 start" >/dev/null; then
    say "postgres FAILED to start:"
    tail -n 20 /var/log/postgresql/bm.log
    while :; do sleep 3600; done
fi
say "postgres $($PGBIN/postgres --version | awk '{ print $3 }') started in $(awk -v a="$t0" '{ printf "%.1f", $1 - a }' /proc/uptime) s"
data_mib=$(du -sm "$PGDATA/base" | cut -f1)
if [ "$prewarm" = 1 ]; then
    t0=$(cut -d' ' -f1 /proc/uptime)
    find "$PGDATA/base" -type f -exec cat {} + >/dev/null
    say "read the $data_mib MiB of database files into the page cache in $(awk -v a="$t0" '{ printf "%.1f", $1 - a }' /proc/uptime) s"
fi
say "ready: pgbench -S -c $clients -P $progress, data set $data_mib MiB; $(meminfo)"
echo "BALLOONMGR-GUEST-READY"
( while :; do sleep 30; say "meminfo $(meminfo)"; done ) &
while :; do
    su postgres -s /bin/sh -c "$PGBIN/pgbench -S -n -c $clients -j 1 -P $progress -T 100000000 -h /run/postgresql bench" 2>&1 |
        sed -u 's/^/bm-pgbench: /'
    say "pgbench ended with status $?, again in 1 s"
    sleep 1
done
EOF
chmod 0755 "$TMP/bm-server-init"

# --- the root: mmdebstrap, then the cluster initialized in it (postgres in the chroot, its
# socket in the data directory, dynamic shared memory in files: the chroot has no /dev/shm of
# its own to count on)
msg "mmdebstrap bookworm with postgresql-$PGVER into $TMP/root (log: $LOG)"
# niced: CPU-bound, and guests may run beside it
SETUP="set -e; r=\$1; pg=/usr/lib/postgresql/$PGVER/bin
chroot \"\$r\" pg_dropcluster --stop $PGVER main 2>/dev/null || true
chroot \"\$r\" su postgres -s /bin/sh -c \"\$pg/initdb -D $PGDATA -E UTF8 --locale=C -A trust --no-sync\" >/dev/null
cat >>\"\$r$PGDATA/postgresql.conf\" <<CONF
# balloonmgr's server guest (build-server-guest.sh): small buffers, so that the data set is
# read through read() from the guest's page cache
shared_buffers = 16MB
listen_addresses = ''
unix_socket_directories = '/run/postgresql'
max_connections = 20
dynamic_shared_memory_type = posix
fsync = off
synchronous_commit = off
full_page_writes = off
autovacuum = off
min_wal_size = 32MB
max_wal_size = 128MB
log_destination = 'stderr'
CONF
mkdir -p \"\$r/var/log/postgresql\"; chroot \"\$r\" chown postgres:postgres /var/log/postgresql
chroot \"\$r\" su postgres -s /bin/sh -c \"\$pg/pg_ctl -D $PGDATA -l /var/log/postgresql/init.log -w -t 600 \\
    -o '-c unix_socket_directories=$PGDATA -c dynamic_shared_memory_type=mmap' start\"
chroot \"\$r\" su postgres -s /bin/sh -c \"\$pg/createdb -h $PGDATA bench && \$pg/pgbench -i -q -s $SCALE -h $PGDATA bench &&
    \$pg/psql -qAt -h $PGDATA -c CHECKPOINT bench\" || { chroot \"\$r\" su postgres -s /bin/sh -c \"\$pg/pg_ctl -D $PGDATA -m fast stop\"; exit 1; }
chroot \"\$r\" su postgres -s /bin/sh -c \"\$pg/pg_ctl -D $PGDATA -m fast -w stop\"
rm -f \"\$r/var/log/postgresql/init.log\"
install -m 0755 \"$TMP/bm-server-init\" \"\$r$INIT\"
echo bm-server >\"\$r/etc/hostname\"
rm -f \"\$r/etc/machine-id\"; : >\"\$r/etc/machine-id\"
apt-get -o RootDir=\"\$r\" clean"
if ! nice -n 10 mmdebstrap --mode=root --variant=minbase \
        --include=postgresql-$PGVER,procps,iproute2 \
        --customize-hook="$SETUP" \
        bookworm "$TMP/root" http://deb.debian.org/debian >>"$LOG" 2>&1; then
    tail -n 30 "$LOG" >&2
    die "mmdebstrap failed (log: $LOG)"
fi
DATA_MIB=$(du -sm "$TMP/root$PGDATA/base" | cut -f1)
ROOT_MIB=$(du -sm "$TMP/root" | cut -f1)
msg "root $ROOT_MIB MiB, database files $DATA_MIB MiB (scale $SCALE)"

# --- the image: the root and room for what PostgreSQL writes (its WAL, temporary files)
IMG_MIB=$((ROOT_MIB + ROOT_MIB / 4 + 512))
mkfs.ext4 -q -F -L bm-server -d "$TMP/root" "$TMP/root.img" "${IMG_MIB}M" >>"$LOG" 2>&1 ||
    die "mkfs.ext4 -d failed (log: $LOG)"
chmod 0644 "$TMP/root.img"
{
    echo "scale=$SCALE"
    echo "data_mib=$DATA_MIB"
    echo "root_mib=$ROOT_MIB"
    echo "image_mib=$IMG_MIB"
    echo "postgres=$(sed -n 's/^Version: //p' <(chroot "$TMP/root" dpkg -s postgresql-$PGVER))"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$TMP/info"
chmod 0644 "$TMP/info" "$LOG"
mv -f "$TMP/root.img" "$DIR/root.img"
mv -f "$TMP/info" "$DIR/info"
echo "$STAMP" >"$DIR/.stamp"
chmod 0644 "$DIR/.stamp"
msg "built $DIR/root.img ($IMG_MIB MiB; $(tr '\n' ' ' <"$DIR/info"))"
