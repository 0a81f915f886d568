#!/bin/bash
# test-host SUITE: the Debian package as installed on a host with systemd as PID 1.
#
# A Debian SUITE (bookworm: Debian 12, QEMU 7.2, libvirt 9.0; trixie: Debian 13, QEMU 10.0,
# libvirt 11.3) root file system booted with systemd-nspawn (lib/container.sh), libvirtd
# started by its systemd, two TCG guests booting SUITE's own kernel (6.1 / 6.12). Inside it:
#   package   debian/changelog bumped by a new entry, dpkg-buildpackage against SUITE's
#             libvirt-dev, apt-get install: the agent enabled and not started, and a message
#             saying so; the docs at the paths the message, README and balloonmgr(8) name (not
#             gzipped); --version and build_info{version,revision} from the changelog
#   agent     starts under its sandbox (READY), STATUS=, WATCHDOG=1 (a 4 s WatchdogSec= drop-in:
#             not restarted), the URI in the log, the QEMU processes' RSS in /metrics and in
#             `balloonmgr status`, a change record with journal fields, the per-CPU drain through
#             /proc/sys/vm/stat_refresh, the state file; journalctl -x explains a change record
#             and the agent's decision record (the package's catalog); ARGS= of /etc/default/balloonmgr on the agent's command
#             line; reload with a good policy and with a broken one (reload fails, the status
#             says so, the agent runs on); a pass started by hand is refused by the lock (exit
#             4), the agent keeps running and no unit is left failed
#   timer     README's steps (the agent disabled, the textfile drop-in): the timer's own pass,
#             node_exporter serves the textfile; after a reboot only the timer is active
#   monitor   README's steps: connects as its dynamic user, serves the guests' RSS, changes no
#             balloon and no state; after a reboot only the monitor is active
#   life      upgrade with the timer, then with the agent running: each runs again on the new
#             binary, units reloaded; remove: nothing of balloonmgr runs, node_exporter serves
#             no balloonmgr_ series (the timer's textfile gone); purge: state and conffiles
#             gone; reinstall: enabled, not started
# Root only (77 otherwise). The root file system is cached (BM_CT_CACHE); the first run on a
# machine builds it (about 3-4 minutes a suite).
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
. "$(dirname "$0")/lib/container.sh"

bm_ct_lane host "${1:-${BM_HOST_SUITE:-bookworm}}"
suite=$BM_CT_SUITE name=$BM_CT_NAME work=$BM_CT_WORK
src=${BM_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
checks=0
ok() { checks=$((checks + 1)); bm_pass "[$suite] $*"; }
bm_ct_on_failure() {
    echo "--- journal of the balloonmgr units in $name (tail) ---" >&2
    ct journalctl --no-pager -n 60 -u balloonmgr -u balloonmgr-policy -u balloonmgr-monitor >&2
}

ct() { bm_ct_exec "$@"; }
cts() { bm_ct_sh "$1"; }
prop() { ct systemctl show -P "$2" "$1"; }
active() { [ "$(ct systemctl is-active "$1" 2>/dev/null || true)" = active ]; }

t_all=$(bm_now)
# --- the root file system and the guests' kernel -------------------------------------------
t0=$(bm_now)
root=$(bm_ct_root "$suite")
bm_log "root file system of $suite: $root ($(bm_elapsed "$t0") s)"
bm_ct_guest_kernel
gdir=$BM_CT_GDIR kver=$BM_CT_KVER

# --- boot, copy the source in, build the package against SUITE's libraries ----------------
boot() {
    local t
    t=$(bm_now)
    bm_ct_boot "$name" "$root" "$work/ct"
    bm_log "$name: systemd running after $(bm_elapsed "$t") s"
}
boot
bm_ct_copy_source "$src"
# a new changelog entry, as a packager bumps it: the version the package, --version and
# build_info must say (meson.build reads it: one source)
cl=$work/ct/shared/src/debian/changelog
bumped="$(dpkg-parsechangelog -l "$cl" -S Version)+lane1"
{ printf 'balloonmgr (%s) unstable; urgency=medium\n\n  * Test build of test-host.\n\n -- %s  %s\n\n' \
      "$bumped" "$(dpkg-parsechangelog -l "$cl" -S Maintainer)" "$(date -R)"; cat "$cl"; } >"$cl.new"
mv "$cl.new" "$cl"
t0=$(bm_now)
if ! cts 'cd /bm/src && DEB_BUILD_OPTIONS="nocheck parallel=2" nice -n 10 dpkg-buildpackage -us -uc -b -Pnocheck' \
        >"$work/dpkg-buildpackage.log" 2>&1; then
    tail -30 "$work/dpkg-buildpackage.log"
    bm_fail "dpkg-buildpackage failed in $suite"
fi
version=$(dpkg-parsechangelog -l "$cl" -S Version)
[ "$version" = "$bumped" ] || bm_fail "the copied changelog says $version, not $bumped"
deb=/bm/balloonmgr_${version}_amd64.deb
libvirt_v=$(ct dpkg-query -W -f '${Version}' libvirt-dev)
qemu_v=$(ct dpkg-query -W -f '${Version}' qemu-system-x86)
ok "dpkg-buildpackage against libvirt-dev $libvirt_v built $(basename "$deb") in $(bm_elapsed "$t0") s"

# Rebuilt versions for the upgrades: the same package, a newer version, a unit file changed (the
# upgrade must reload systemd's view of it).
repack() {
    local v=$1 d=$work/repack-$1
    rm -rf "$d"
    dpkg-deb -R "$work/ct/shared/balloonmgr_${version}_amd64.deb" "$d"
    sed -i "s/^Version: .*/Version: $v/" "$d/DEBIAN/control"
    # /lib/systemd/system on bookworm, /usr/lib/systemd/system on trixie
    find "$d" -path '*/systemd/system/balloonmgr.service' -o -path '*/systemd/system/balloonmgr-policy.timer' |
        while read -r u; do echo "# upgraded to $v" >>"$u"; done
    (cd "$d" && find . -path ./DEBIAN -prune -o -type f -print0 | sed -z 's|^\./||' |
        xargs -0 md5sum >DEBIAN/md5sums)
    dpkg-deb -b "$d" "$work/ct/shared/balloonmgr_${v}_amd64.deb" >/dev/null
}
repack "$version+up1"
repack "$version+up2"

# --- install --------------------------------------------------------------------------------
out=$(ct env DEBIAN_FRONTEND=noninteractive apt-get install -y "$deb" 2>&1) ||
    { echo "$out"; bm_fail "apt-get install $deb failed"; }
install_out=$out
[ "$(ct systemctl is-enabled balloonmgr.service)" = enabled ] || bm_fail "install: agent not enabled"
! active balloonmgr.service || bm_fail "install: the agent was started"
for u in balloonmgr-monitor.service balloonmgr-policy.timer; do
    [ "$(ct systemctl is-enabled "$u" || true)" = disabled ] || bm_fail "install: $u is not disabled"
done
ok "apt-get install: the agent enabled and not started, the monitor and the timer disabled"

# --- two guests on SUITE's QEMU, booting SUITE's kernel -------------------------------------
ct mkdir -p /var/lib/libvirt/images/bm
cp "$gdir/vmlinuz" "$gdir/initrd.img" "$work/ct/merged/var/lib/libvirt/images/bm/"
chmod 0644 "$work/ct/merged/var/lib/libvirt/images/bm/"*
define_guest() {
    cat >"$work/ct/shared/$1.xml" <<EOF
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>512</memory>
  <currentMemory unit='MiB'>512</currentMemory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>/var/lib/libvirt/images/bm/vmlinuz</kernel>
    <initrd>/var/lib/libvirt/images/bm/initrd.img</initrd>
    <cmdline>console=ttyS0 quiet panic=-1 no_timer_check bm.touch=200</cmdline>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <controller type='usb' model='none'/>
    <serial type='file'><source path='/var/lib/libvirt/images/bm/$1.console'/><target port='0'/></serial>
    <memballoon model='virtio'><stats period='1'/></memballoon>
  </devices>
</domain>
EOF
    ct virsh -q -c qemu:///system define "/bm/$1.xml" >/dev/null
}
start_guests() {
    local g
    for g in bm-a bm-b; do
        ct rm -f "/var/lib/libvirt/images/bm/$g.console"
        ct virsh -q -c qemu:///system start "$g" >/dev/null || bm_fail "virsh start $g failed in $suite"
    done
    for g in bm-a bm-b; do
        BM_WAIT_INTERVAL=1 bm_wait_until 180 "$g to boot" \
            ct grep -q BALLOONMGR-GUEST-READY "/var/lib/libvirt/images/bm/$g.console" || {
            ct tail -20 "/var/lib/libvirt/images/bm/$g.console" || true
            bm_fail "$g did not boot in $suite"
        }
    done
}
define_guest bm-a
define_guest bm-b
t0=$(bm_now)
start_guests
ok "two guests ready on QEMU $qemu_v with kernel $kver after $(bm_elapsed "$t0") s"

# --- the agent ------------------------------------------------------------------------------
# every threshold just below MemTotal: this host is "under pressure", the agent inflates
policy='[host]
interval = 2s
reclaim_below = 99%
target_available = 99.5%
release_above = 99.9%
[guest]
max_step = 64M
timer_inflate = always
'
printf '%s' "$policy" | ct tee /etc/balloonmgr/balloonmgr.policy >/dev/null
ct systemctl start balloonmgr.service ||
    bm_fail "systemctl start balloonmgr: $(prop balloonmgr.service Result) (signal/status $(prop balloonmgr.service ExecMainStatus))"
pid=$(prop balloonmgr.service MainPID)
[ "$pid" -gt 0 ] && active balloonmgr.service || bm_fail "agent not running after start"
ok "agent started under its sandbox (Type=notify: READY=1 arrived), MainPID $pid"

# (checked after the start, the most severe finding: a failed start is what a run on a tree
# without the fixes reports first)
grep -q "balloonmgr.service (the agent) is enabled but not started" <<<"$install_out" ||
    { echo "$install_out"; bm_fail "install: no message that the agent is enabled and not started"; }
# every doc path the install message, the installed README and balloonmgr(8) name, as named
# (dh_compress would have made README.md and metrics.md .gz)
named=$( { echo "$install_out"; ct cat /usr/share/doc/balloonmgr/README.md 2>/dev/null
           ct sh -c 'zcat /usr/share/man/man8/balloonmgr.8.gz'; } |
         grep -o '/usr/share/doc/balloonmgr/[A-Za-z0-9._/-]*' | sed 's/[.,)]*$//' | sort -u || true)
for f in $named /usr/share/doc/balloonmgr/README.md /usr/share/doc/balloonmgr/metrics.md \
         /usr/share/doc/balloonmgr/examples/prometheus/balloonmgr-alerts.yml \
         /usr/share/doc/balloonmgr/examples/grafana/balloonmgr-dashboard.json; do
    ct test -e "$f" || bm_fail "install: $f missing (named by the install message, README or balloonmgr(8))"
done
ok "the install said the agent is enabled and not started; the docs where they are named: $(echo $named | tr ' ' ',')"
v_out=$(ct balloonmgr --version)
[ "$v_out" = "balloonmgr $version" ] || bm_fail "--version says '$v_out', the changelog $version"
ok "the version from the bumped debian/changelog: $v_out"

status_has() { case "$(prop balloonmgr.service StatusText)" in *"$1"*) return 0 ;; esac; return 1; }
BM_WAIT_INTERVAL=0.5 bm_wait_until 20 "STATUS= with the domains" status_has "2 domains (2 running)" ||
    bm_fail "StatusText: '$(prop balloonmgr.service StatusText)'"
ok "STATUS=: $(prop balloonmgr.service StatusText)"
grep -q "connected to qemu:///system" <<<"$(ct journalctl -u balloonmgr -o cat)" ||
    bm_fail "the log does not say which URI the agent connected to"
ok "the log names the URI: connected to qemu:///system"

metrics() { ct curl -sf http://127.0.0.1:9736/metrics; }
rss_of() { metrics | awk -v d="$1" '$1 == "balloonmgr_domain_rss_bytes{domain=\"" d "\"}" { print int($2) }'; }
rss_seen() { [ "$(rss_of bm-a)" -gt 0 ] 2>/dev/null && [ "$(rss_of bm-b)" -gt 0 ] 2>/dev/null; }
BM_WAIT_INTERVAL=0.5 bm_wait_until 20 "RSS of both QEMU processes in /metrics" rss_seen ||
    { metrics | grep rss >&2 || true; bm_fail "/metrics has no RSS of the QEMU processes"; }
st=$(ct balloonmgr status --bytes --raw -o NAME,RSS)
for g in bm-a bm-b; do
    [ "$(awk -v g="$g" '$1 == g { print $2 }' <<<"$st")" -gt 0 ] 2>/dev/null ||
        { echo "$st"; bm_fail "balloonmgr status shows no RSS of $g"; }
done
ok "the QEMU processes' RSS in /metrics (bm-a $(( $(rss_of bm-a) >> 20 )) MiB, bm-b $(( $(rss_of bm-b) >> 20 )) MiB) and in balloonmgr status"

bi=$(grep '^balloonmgr_build_info{' <<<"$(metrics)" || true)
[ "$bi" = "balloonmgr_build_info{version=\"$version\",revision=\"$version\"} 1" ] ||
    bm_fail "build_info '$bi': not version and revision $version (the changelog's; revision: the Debian version)"
ok "$bi"

# the change records (MESSAGE_ID of src/log.h's BM_LOG_ID_CHANGE) and the agent's decisions
# (BM_LOG_ID_DECISION): both carry BALLOONMGR_DOMAIN
ID_CHANGE=3ba2784d5db84fee9b552b0a796039b4 ID_DECISION=6c00230db7734be9b69ca3effe535c84
changed() { [ -n "$(ct journalctl -u balloonmgr MESSAGE_ID=$ID_CHANGE BALLOONMGR_DOMAIN="$1" -o cat 2>/dev/null)" ]; }
BM_WAIT_INTERVAL=1 bm_wait_until 60 "a change record of bm-a in the journal" changed bm-a ||
    bm_fail "no journal change record with BALLOONMGR_DOMAIN=bm-a"
ok "journal: $(ct journalctl -u balloonmgr MESSAGE_ID=$ID_CHANGE BALLOONMGR_DOMAIN=bm-a -o cat | head -1)"
# the package's catalog (/usr/lib/systemd/catalog, systemd's dpkg trigger updated the database)
for kind in change decision; do
    if [ $kind = change ]; then id=$ID_CHANGE subject="Balloon of bm-a: .*flate"
    else id=$ID_DECISION subject="Decision for bm-a: [a-z]* ([a-z-]*)"; fi
    xtext=$(ct journalctl -x --no-pager -u balloonmgr MESSAGE_ID=$id BALLOONMGR_DOMAIN=bm-a -n 1)
    grep -q "Subject: $subject" <<<"$xtext" && grep -q "Defined-By: balloonmgr" <<<"$xtext" &&
        ! grep -q '@BALLOONMGR_' <<<"$xtext" ||
        { echo "$xtext" >&2; bm_fail "journalctl -x does not explain the $kind record (catalog)"; }
    printf '%s\n' "$xtext" | sed 's/^/    /'
    ok "journalctl -x explains the $kind record: $(grep -m1 'Subject:' <<<"$xtext" | sed 's/^[^S]*//')"
done

# the per-CPU drain: 512 MiB touched and freed on one CPU stay on its per-CPU list; the host
# is below release_above (the policy), so the next pass gives them back through stat_refresh.
# Another process allocating on that CPU before the pass takes them off the list (tools/test.sh
# runs the host's guest tests beside this one): then they are parked again, up to 5 times, each
# given 3 passes (6 s).
drained() { grep -q "per-CPU free lists: gave" <<<"$(ct journalctl -u balloonmgr -o cat)"; }
for try in 1 2 3 4 5; do
    ct taskset -c 0 python3 -c 'b = b"\1" * (512 << 20); del b'
    BM_WAIT_INTERVAL=0.5 bm_wait_until 6 "the per-CPU drain (512 MiB parked, try $try)" drained && break
done
drained || {
    ct journalctl -u balloonmgr -o cat | grep -i "per-cpu" >&2 || true
    bm_fail "no per-CPU drain by the agent under its sandbox (512 MiB parked on CPU 0 five times)"
}
! grep -q "cannot give the" <<<"$(ct journalctl -u balloonmgr -o cat)" || bm_fail "the drain failed in the sandbox"
ok "$(ct journalctl -u balloonmgr -o cat | grep "per-CPU free lists: gave" | tail -1)"

ct jq -e '.domains | length >= 2' /var/lib/balloonmgr/state.json >/dev/null 2>&1 ||
    ct jq -e '. | tostring | contains("bm-a")' /var/lib/balloonmgr/state.json >/dev/null ||
    bm_fail "no state file with the domains in /var/lib/balloonmgr"
ok "state file /var/lib/balloonmgr/state.json saved"

# WATCHDOG=1: with WatchdogSec=4s the agent pings every 2 s; systemd would kill it otherwise
ct mkdir -p /etc/systemd/system/balloonmgr.service.d
printf '[Service]\nWatchdogSec=4s\n' | ct tee /etc/systemd/system/balloonmgr.service.d/wd.conf >/dev/null
ct systemctl daemon-reload
ct systemctl restart balloonmgr.service
pid=$(prop balloonmgr.service MainPID)
w1=$(prop balloonmgr.service WatchdogTimestampMonotonic)
sleep 10  # the condition is "not killed for 10 s at a 4 s watchdog": a duration by nature
w2=$(prop balloonmgr.service WatchdogTimestampMonotonic)
[ "$(prop balloonmgr.service MainPID)" = "$pid" ] && active balloonmgr.service ||
    bm_fail "the agent did not survive a 4 s watchdog (Result $(prop balloonmgr.service Result))"
[ "$w2" -gt "$w1" ] || bm_fail "WatchdogTimestamp did not advance ($w1 -> $w2)"
ct rm -rf /etc/systemd/system/balloonmgr.service.d
ct systemctl daemon-reload
ct systemctl restart balloonmgr.service
ok "WATCHDOG=1 reaches systemd: alive 10 s under WatchdogSec=4s, last ping advanced $(( (w2 - w1) / 1000 )) ms"

# ARGS= in /etc/default/balloonmgr (a conffile): on the agent's command line after a restart
ct dpkg-query -W -f='${Conffiles}\n' balloonmgr | grep -q '^ /etc/default/balloonmgr ' ||
    bm_fail "/etc/default/balloonmgr is not a conffile"
ct sed -i 's/^ARGS=.*/ARGS="--no-libvirt-duplicates"/' /etc/default/balloonmgr
ct systemctl restart balloonmgr.service
pid=$(prop balloonmgr.service MainPID)
cmd=$(ct cat "/proc/$pid/cmdline" | tr '\0' ' ')
info_seen() { grep -q '^balloonmgr_domain_info{domain="bm-a"' <<<"$(metrics)"; }
BM_WAIT_INTERVAL=0.5 bm_wait_until 20 "/metrics after the restart with ARGS" info_seen ||
    bm_fail "no /metrics after the restart with ARGS"
m=$(metrics)
[[ $cmd == *" --no-libvirt-duplicates "* || $cmd == *" --no-libvirt-duplicates" ]] &&
    ! grep -q '^balloonmgr_domain_rss_bytes{' <<<"$m" ||
    bm_fail "ARGS=--no-libvirt-duplicates: command line '$cmd', rss series $(grep -c '^balloonmgr_domain_rss_bytes{' <<<"$m")"
ok "ARGS=\"--no-libvirt-duplicates\" from /etc/default/balloonmgr: $cmd; /metrics without balloonmgr_domain_rss_bytes"
ct sed -i 's/^ARGS=.*/ARGS=""/' /etc/default/balloonmgr
ct systemctl restart balloonmgr.service
BM_WAIT_INTERVAL=0.5 bm_wait_until 20 "RSS back in /metrics with ARGS empty" rss_seen ||
    bm_fail "ARGS emptied again: no RSS in /metrics"

pid=$(prop balloonmgr.service MainPID)
printf '%s# reloaded\n' "$policy" | ct tee /etc/balloonmgr/balloonmgr.policy >/dev/null
ct systemctl reload balloonmgr.service || bm_fail "systemctl reload with a good policy failed"
grep -q "policy /etc/balloonmgr/balloonmgr.policy reloaded" <<<"$(ct journalctl -u balloonmgr -o cat)" ||
    bm_fail "no 'reloaded' in the journal"
printf '[guest]\nfloor = zz\n' | ct tee /etc/balloonmgr/balloonmgr.policy >/dev/null
if ct systemctl reload balloonmgr.service 2>/dev/null; then
    bm_fail "systemctl reload with a broken policy exited 0"
fi
ct kill -HUP "$pid"  # as if sent by hand: the agent keeps the last good one and says so
BM_WAIT_INTERVAL=0.5 bm_wait_until 10 "the status to name the failed reload" status_has "policy not reloaded" ||
    bm_fail "StatusText after a broken reload: '$(prop balloonmgr.service StatusText)'"
[ "$(prop balloonmgr.service MainPID)" = "$pid" ] && active balloonmgr.service || bm_fail "the agent died on a broken reload"
printf '%s' "$policy" | ct tee /etc/balloonmgr/balloonmgr.policy >/dev/null
ct systemctl reload balloonmgr.service || bm_fail "reload after the fix failed"
BM_WAIT_INTERVAL=0.5 bm_wait_until 10 "the status to drop the failed reload" bm_not status_has "policy not reloaded" ||
    bm_fail "StatusText still names the failed reload"
ok "reload: a good policy reloads; a broken one fails 'systemctl reload' and shows in the status line; the agent runs on"

sys_before=$(ct systemctl is-system-running || true)
ct systemctl start balloonmgr-policy.service ||
    bm_fail "systemctl start balloonmgr-policy.service beside the agent failed ($(prop balloonmgr-policy.service Result), status $(prop balloonmgr-policy.service ExecMainStatus))"
[ "$(prop balloonmgr.service MainPID)" = "$pid" ] && active balloonmgr.service ||
    bm_fail "starting balloonmgr-policy.service by hand stopped the agent"
grep -q "in use by PID $pid" <<<"$(ct journalctl -u balloonmgr-policy -o cat)" ||
    bm_fail "the refused pass does not name the agent"
[ "$(prop balloonmgr-policy.service ExecMainStatus)" = 4 ] ||
    bm_fail "the pass beside the agent exited $(prop balloonmgr-policy.service ExecMainStatus), not 4 (refused by the lock)"
[ "$(prop balloonmgr-policy.service Result)" = success ] && ! ct systemctl -q is-failed balloonmgr-policy.service ||
    bm_fail "the refused pass left balloonmgr-policy.service $(prop balloonmgr-policy.service Result)"
failed=$(ct systemctl list-units --failed --plain --no-legend | awk '{ print $1 }' | grep balloonmgr || true)
sys_after=$(ct systemctl is-system-running || true)
[ -z "$failed" ] && { [ "$sys_after" = running ] || [ "$sys_before" != running ]; } ||
    bm_fail "after the refused pass: failed units '$failed', system $sys_before -> $sys_after"
ok "a pass started by hand meets the lock (exit 4, SuccessExitStatus=): unit $(prop balloonmgr-policy.service Result), system $sys_after, the agent runs on"

# --- the timer, as README says ----------------------------------------------------------
cts 'systemctl disable --now balloonmgr.service &&
     mkdir -p /etc/systemd/system/balloonmgr-policy.service.d &&
     cp /usr/share/balloonmgr/systemd/textfile.conf /etc/systemd/system/balloonmgr-policy.service.d/ &&
     systemctl daemon-reload && systemctl enable --now balloonmgr-policy.timer' 2>/dev/null ||
    bm_fail "README's timer steps failed"
passed() { [ "$(prop balloonmgr-policy.service ExecMainExitTimestampMonotonic)" -gt 0 ]; }
BM_WAIT_INTERVAL=1 bm_wait_until 75 "the timer's first pass" passed || bm_fail "the timer ran no pass"
[ "$(prop balloonmgr-policy.service Result)" = success ] ||
    bm_fail "the timer's pass: $(prop balloonmgr-policy.service Result), status $(prop balloonmgr-policy.service ExecMainStatus)"
ct systemctl start prometheus-node-exporter.service
textfile() { ct curl -sf http://127.0.0.1:9100/metrics | grep -c '^balloonmgr_domain_rss_bytes{'; }
BM_WAIT_INTERVAL=1 bm_wait_until 20 "node_exporter to serve the textfile" test "$(textfile || echo 0)" -ge 2 ||
    bm_fail "node_exporter serves no balloonmgr_domain_rss_bytes"
ok "timer: its pass succeeded; node_exporter serves $(textfile) domains' RSS from the textfile"

reboot() {
    bm_ct_stop
    boot
}
reboot
active balloonmgr-policy.timer && ! active balloonmgr.service && ! active balloonmgr-monitor.service ||
    bm_fail "after a reboot with the timer chosen: timer $(ct systemctl is-active balloonmgr-policy.timer), agent $(ct systemctl is-active balloonmgr.service)"
ok "reboot: only the timer is active"

# --- the monitor, as README says --------------------------------------------------------
start_guests
cts 'systemctl disable --now balloonmgr-policy.timer && systemctl enable --now balloonmgr-monitor.service' \
    2>/dev/null || bm_fail "README's monitor steps failed"
state_before=$(ct stat -c %Y.%s /var/lib/balloonmgr/state.json)
actual_before=$(ct virsh -q -c qemu:///system dommemstat bm-a | awk '$1 == "actual" { print $2 }')
BM_WAIT_INTERVAL=0.5 bm_wait_until 30 "the monitor's RSS" rss_seen || {
    ct journalctl -u balloonmgr-monitor -o cat | tail -20 >&2
    bm_fail "the monitor serves no RSS"
}
sleep 5  # "changes nothing" over a few of its 2 s passes: a duration by nature
! grep -q "Failed to find user record" <<<"$(ct journalctl -u balloonmgr-monitor -o cat)" ||
    bm_fail "the monitor's dynamic user does not resolve"
[ "$(ct stat -c %Y.%s /var/lib/balloonmgr/state.json)" = "$state_before" ] || bm_fail "the monitor wrote the state"
[ "$(ct virsh -q -c qemu:///system dommemstat bm-a | awk '$1 == "actual" { print $2 }')" = "$actual_before" ] ||
    bm_fail "the monitor moved a balloon"
ok "monitor: connects as its dynamic user, serves the RSS, moved no balloon, wrote no state"
reboot
active balloonmgr-monitor.service && ! active balloonmgr.service && ! active balloonmgr-policy.timer ||
    bm_fail "after a reboot with the monitor chosen: monitor $(ct systemctl is-active balloonmgr-monitor.service), agent $(ct systemctl is-active balloonmgr.service)"
ok "reboot: only the monitor is active"

# --- upgrades, removal, purge, reinstall ------------------------------------------------
cts 'systemctl disable --now balloonmgr-monitor.service && systemctl enable --now balloonmgr-policy.timer' 2>/dev/null
upgrade() {
    ct env DEBIAN_FRONTEND=noninteractive apt-get install -y "/bm/balloonmgr_$1_amd64.deb" >"$work/upgrade-$1.log" 2>&1 ||
        { cat "$work/upgrade-$1.log"; bm_fail "upgrade to $1 failed"; }
    ! grep -qi "changed on disk" "$work/upgrade-$1.log" || bm_fail "upgrade to $1: units not reloaded"
    [ "$(prop "$2" NeedDaemonReload)" = no ] || bm_fail "upgrade to $1: $2 needs a daemon-reload"
}
upgrade "$version+up1" balloonmgr-policy.timer
active balloonmgr-policy.timer || bm_fail "the upgrade left the timer stopped"
ok "upgrade to $version+up1 with the timer: the timer active again, units reloaded"
cts 'systemctl disable --now balloonmgr-policy.timer && systemctl enable --now balloonmgr.service' 2>/dev/null
old=$(prop balloonmgr.service MainPID)
upgrade "$version+up2" balloonmgr.service
pid=$(prop balloonmgr.service MainPID)
active balloonmgr.service && [ "$pid" -gt 0 ] || bm_fail "the upgrade left the agent stopped"
[ "$pid" != "$old" ] || bm_fail "the agent was not restarted by the upgrade"
case "$(ct readlink "/proc/$pid/exe")" in *deleted*) bm_fail "the agent runs the old binary" ;; esac
ok "upgrade to $version+up2 with the agent: PID $old -> $pid, on the new /usr/bin/balloonmgr"

# the timer's textfile is still there (node_exporter serves it) until the package goes
ct systemctl start prometheus-node-exporter.service
ne_series() { ct curl -sf http://127.0.0.1:9100/metrics | grep -c '^balloonmgr_' || true; }
BM_WAIT_INTERVAL=1 bm_wait_until 20 "node_exporter to serve the timer's textfile" test "$(ne_series)" -gt 0 ||
    bm_fail "before remove: node_exporter serves no balloonmgr_ series"
before_remove=$(ne_series)
ct env DEBIAN_FRONTEND=noninteractive apt-get remove -y balloonmgr >"$work/remove.log" 2>&1 ||
    { cat "$work/remove.log"; bm_fail "apt-get remove failed"; }
! ct test -e /var/lib/prometheus/node-exporter/balloonmgr.prom ||
    bm_fail "remove left the textfile /var/lib/prometheus/node-exporter/balloonmgr.prom"
[ "$(ne_series)" -eq 0 ] || bm_fail "after remove node_exporter still serves $(ne_series) balloonmgr_ series"
ok "remove: node_exporter served $before_remove balloonmgr_ series before, none after (the textfile removed)"
if ct pgrep -x balloonmgr >/dev/null; then
    bm_fail "balloonmgr still runs after remove: $(ct pgrep -a -x balloonmgr)"
fi
ct test -f /etc/balloonmgr/balloonmgr.policy || bm_fail "remove took the conffile"
ok "remove: nothing of balloonmgr runs; the policy (a conffile) stays"
ct env DEBIAN_FRONTEND=noninteractive apt-get purge -y balloonmgr >"$work/purge.log" 2>&1 ||
    { cat "$work/purge.log"; bm_fail "apt-get purge failed"; }
for f in /etc/balloonmgr /etc/default/balloonmgr /var/lib/balloonmgr /usr/bin/balloonmgr; do
    ! ct test -e "$f" || bm_fail "purge left $f"
done
ok "purge: the state and the conffile are gone"
out=$(ct env DEBIAN_FRONTEND=noninteractive apt-get install -y "$deb" 2>&1) || { echo "$out"; bm_fail "reinstall failed"; }
grep -q "enabled but not started" <<<"$out" || bm_fail "reinstall: no message"
[ "$(ct systemctl is-enabled balloonmgr.service)" = enabled ] && ! active balloonmgr.service ||
    bm_fail "reinstall: the agent is not enabled-and-stopped"
ok "reinstall: the agent enabled and not started again"

echo "test-host $suite: $checks checks passed in $(bm_elapsed "$t_all") s (libvirt $libvirt_v, QEMU $qemu_v, guest kernel $kver)"
