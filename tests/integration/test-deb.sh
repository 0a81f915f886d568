#!/bin/bash
# test-deb: the Debian package, built and installed on this machine.
#
# Builds balloonmgr_*.deb with `dpkg-buildpackage -us -uc -b` from a copy of the source (the
# checkout stays clean), checks lintian reports no error, installs it with apt-get beside
# Debian's prometheus-node-exporter, runs the installed /usr/bin/balloonmgr against libvirt's
# test driver, checks every file is in place (binary, units, conffile policy, man pages,
# completion), that balloonmgr.service is enabled and nothing was started; enables the
# textfile drop-in, runs the policy service's command line (on the test driver) and checks
# that node_exporter (started here on a free loopback port) serves balloonmgr_* series from
# its own textfile directory; then removes the package (the policy, a conffile, stays) and
# purges it (nothing left: files, unit symlinks, state, the textfile). node_exporter is
# purged again if this test installed it.
#
# Root only (exit 77 otherwise). The build skips the package's own unit suite
# (DEB_BUILD_OPTIONS=nocheck): the unit suite runs on its own. About 2 minutes.
set -euo pipefail

src=${BM_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
log() { echo "[$(date +%H:%M:%S)] $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }

[ "$(id -u)" -eq 0 ] || { echo "SKIP: test-deb installs a package: needs root"; exit 77; }
for tool in dpkg-buildpackage dh lintian apt-get; do
    command -v "$tool" >/dev/null || fail "'$tool' missing (tools/install-deps.sh test)"
done
if dpkg-query -W -f='${Status}' balloonmgr 2>/dev/null | grep -q "ok installed"; then
    fail "the balloonmgr package is already installed here: not touching it"
fi
for f in /usr/bin/balloonmgr /etc/balloonmgr /var/lib/balloonmgr; do
    [ ! -e "$f" ] || fail "$f exists but is no package's: not touching it (purge would remove it)"
done

work=$(mktemp -d /var/tmp/balloonmgr-deb.XXXXXX)
installed=0
ne_pkg=prometheus-node-exporter ne_purge=0 ne_pid="" guard=""
dpkg-query -W -f='${Status}' "$ne_pkg" 2>/dev/null | grep -q "ok installed" || ne_purge=1
dropin_dir=/etc/systemd/system/balloonmgr-policy.service.d
[ ! -e "$dropin_dir" ] || fail "$dropin_dir exists: not touching it"
cleanup() {
    [ -n "$ne_pid" ] && kill "$ne_pid" 2>/dev/null && wait "$ne_pid" 2>/dev/null
    rm -rf "$dropin_dir"
    if [ "$installed" = 1 ]; then
        dpkg --purge balloonmgr >/dev/null 2>&1 || true
    fi
    rm -f /var/lib/prometheus/node-exporter/balloonmgr.prom
    if [ "$ne_purge" = 1 ]; then
        dpkg --purge "$ne_pkg" >/dev/null 2>&1 || true
    fi
    [ -n "$guard" ] && rm -f "$guard"
    rm -rf "$work"
}
trap cleanup EXIT

# the copy: the files git tracks (plus uncommitted changes of them), else the tree without builds
mkdir "$work/balloonmgr"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$src" && git ls-files -z --cached --others --exclude-standard |
        tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -C "$work/balloonmgr" -xf -
else
    tar -C "$src" --exclude='./build*' -cf - . | tar -C "$work/balloonmgr" -xf -
fi
[ -x "$work/balloonmgr/debian/rules" ] || fail "no debian/rules in the copy of $src"

log "dpkg-buildpackage -us -uc -b in $work"
if ! (cd "$work/balloonmgr" && DEB_BUILD_OPTIONS="nocheck parallel=2" \
        nice dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1); then
    tail -40 "$work/build.log"
    fail "dpkg-buildpackage failed"
fi
version=$(dpkg-parsechangelog -l "$work/balloonmgr/debian/changelog" -S Version)
deb=$(ls "$work"/balloonmgr_"$version"_*.deb)
[ -f "$deb" ] || fail "no balloonmgr_${version}_*.deb built"
pass "dpkg-buildpackage built $(basename "$deb")"

lintian --tag-display-limit 0 "$deb" >"$work/lintian.txt" 2>&1 || true
if grep -q '^E: ' "$work/lintian.txt"; then
    cat "$work/lintian.txt"
    fail "lintian reports errors on $(basename "$deb")"
fi
pass "lintian: no errors ($(grep -c '^W: ' "$work/lintian.txt" || true) warnings)"

# processes running the installed binary (none must appear: units are enabled, not started)
# (of this root's mount namespace only: the host's /proc shows every process, and the
# containers of test-host-bookworm/-trixie, which run beside this test, run their own
# /usr/bin/balloonmgr: a container a failed run left behind failed this check once)
installed_procs() {
    local p mnt
    mnt=$(readlink /proc/self/ns/mnt)
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/exe" 2>/dev/null)" = /usr/bin/balloonmgr ] &&
            [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$mnt" ] && echo "${p#/proc/}"
    done
    return 0
}

# packages must not start services here (node_exporter's would take port 9100)
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    guard=/usr/sbin/policy-rc.d
fi
log "apt-get install $deb $ne_pkg"
installed=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 "$deb" "$ne_pkg" \
    >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "apt-get install failed"; }
dpkg-query -W -f='${Status} ${Version}\n' balloonmgr | grep -qx "install ok installed $version" ||
    fail "dpkg does not list balloonmgr $version as installed"
pass "apt-get install ./$(basename "$deb")"

files=(/usr/bin/balloonmgr
       /lib/systemd/system/balloonmgr.service /lib/systemd/system/balloonmgr-monitor.service
       /lib/systemd/system/balloonmgr-policy.service /lib/systemd/system/balloonmgr-policy.timer
       /etc/balloonmgr/balloonmgr.policy /usr/share/balloonmgr/policies/default.policy
       /usr/share/man/man8/balloonmgr.8.gz /usr/share/man/man5/balloonmgr.policy.5.gz
       /usr/share/bash-completion/completions/balloonmgr /usr/lib/systemd/catalog/balloonmgr.catalog
       /etc/default/balloonmgr /usr/share/doc/balloonmgr/README.md /usr/share/doc/balloonmgr/metrics.md)
for f in "${files[@]}"; do
    [ -f "$f" ] || fail "$f not installed"
    dpkg -S "$f" >/dev/null 2>&1 || fail "$f is not the package's"
done
pass "${#files[@]} files in place"

dpkg-query -W -f='${Conffiles}\n' balloonmgr | grep -q '^ /etc/balloonmgr/balloonmgr.policy ' ||
    fail "/etc/balloonmgr/balloonmgr.policy is not a conffile"
dpkg-query -W -f='${Conffiles}\n' balloonmgr | grep -q '^ /etc/default/balloonmgr ' ||
    fail "/etc/default/balloonmgr is not a conffile"
cmp -s /etc/balloonmgr/balloonmgr.policy "$src/policies/default.policy" ||
    fail "/etc/balloonmgr/balloonmgr.policy is not the default policy"
pass "the policy and /etc/default/balloonmgr are conffiles, the policy the default one"

grep -q "ExecStart=/usr/bin/balloonmgr agent --policy /etc/balloonmgr/balloonmgr.policy" \
    /lib/systemd/system/balloonmgr.service || fail "balloonmgr.service does not run /usr/bin/balloonmgr"
wants=/etc/systemd/system/multi-user.target.wants
[ "$(readlink "$wants/balloonmgr.service")" = /lib/systemd/system/balloonmgr.service ] ||
    fail "balloonmgr.service is not enabled ($wants/balloonmgr.service)"
[ ! -e "$wants/balloonmgr-monitor.service" ] || fail "balloonmgr-monitor.service is enabled"
[ ! -e /etc/systemd/system/timers.target.wants/balloonmgr-policy.timer ] ||
    fail "balloonmgr-policy.timer is enabled"
procs=$(installed_procs)
[ -z "$procs" ] || fail "installing started /usr/bin/balloonmgr (pid $procs)"
pass "balloonmgr.service enabled, monitor and timer not, nothing started"

out=$(/usr/bin/balloonmgr -c test:///default status 2>&1) || fail "installed balloonmgr status: $out"
echo "$out"
echo "$out" | grep -Eq '^test +running ' || fail "status of test:///default does not list domain 'test'"
/usr/bin/balloonmgr --version | grep -qx "balloonmgr ${version%%-*}" ||
    fail "/usr/bin/balloonmgr --version is not $version"
pass "/usr/bin/balloonmgr -c test:///default status"

# the timer's textfile drop-in on Debian: node_exporter's own directory, its series served
textdir=$(prometheus-node-exporter --help 2>&1 |
    sed -n 's/.*--collector.textfile.directory="\([^"]*\)".*/\1/p')
[ "$textdir" = /var/lib/prometheus/node-exporter ] ||
    fail "Debian's node_exporter reads '$textdir', not /var/lib/prometheus/node-exporter"
[ -d "$textdir" ] || fail "$textdir: not a directory after installing $ne_pkg"
mkdir -p "$dropin_dir"
cp /usr/share/balloonmgr/systemd/textfile.conf "$dropin_dir/textfile.conf"
grep -qx "ReadWritePaths=-$textdir" "$dropin_dir/textfile.conf" ||
    fail "the textfile drop-in does not open $textdir"
# the policy service's command line with the drop-in: its last ExecStart=, %S as systemd
# expands it for a system unit; StateDirectory= would make /var/lib/balloonmgr
cmdline=$(sed -n 's/^ExecStart=\(..*\)$/\1/p' /lib/systemd/system/balloonmgr-policy.service \
    "$dropin_dir/textfile.conf" | tail -1)
cmdline=${cmdline//%S//var/lib}
echo "$cmdline" | grep -q -- "--textfile $textdir \\\$ARGS\$" || fail "the drop-in's ExecStart: $cmdline"
# $ARGS from /etc/default/balloonmgr (EnvironmentFile=), split at blanks as systemd does
grep -qx -- "EnvironmentFile=-/etc/default/balloonmgr" /lib/systemd/system/balloonmgr-policy.service ||
    fail "balloonmgr-policy.service does not read /etc/default/balloonmgr"
ARGS=x; . /etc/default/balloonmgr
[ -z "$ARGS" ] || fail "/etc/default/balloonmgr: ARGS is '$ARGS', not empty"
read -r -a argv <<<"${cmdline% \$ARGS}"
mkdir -p -m 0750 /var/lib/balloonmgr
BALLOONMGR_URI=test:///default "${argv[@]}" >"$work/run.out" 2>"$work/run.err" ||
    { cat "$work/run.out" "$work/run.err"; fail "the policy service's command line failed: $cmdline"; }
[ -f "$textdir/balloonmgr.prom" ] || fail "no $textdir/balloonmgr.prom after $cmdline"
grep -qx "balloonmgr_build_info{version=\"${version%%-*}\",revision=\"$version\"} 1" "$textdir/balloonmgr.prom" ||
    fail "build_info is not version ${version%%-*}, revision $version: $(grep build_info "$textdir/balloonmgr.prom")"
pass "the policy service with the textfile drop-in wrote $textdir/balloonmgr.prom (build_info revision $version)"
# node_exporter on a free loopback port, its textfile collector at its Debian default; another
# port when it exits (the port taken) or does not answer within 20 s (a loaded machine). Under
# set -e the kill and wait of one that already exited must not end the test (a CI run ended
# here, silently, after one attempt).
ne_port=""
for attempt in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 20000))
    echo "--- attempt $attempt, port $port" >>"$work/node-exporter.log"
    prometheus-node-exporter --web.listen-address="127.0.0.1:$port" --collector.disable-defaults \
        --collector.textfile >>"$work/node-exporter.log" 2>&1 &
    ne_pid=$!
    for _ in $(seq $((200 * ${BM_TIMEOUT_MULTIPLIER:-1}))); do
        curl -sf "http://127.0.0.1:$port/metrics" >"$work/ne.metrics" 2>/dev/null && { ne_port=$port; break 2; }
        kill -0 "$ne_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill "$ne_pid" 2>/dev/null || true
    wait "$ne_pid" 2>/dev/null || true
    ne_pid=""
done
[ -n "$ne_port" ] || { cat "$work/node-exporter.log"; fail "node_exporter did not serve /metrics in 5 attempts"; }
grep -q '^balloonmgr_passes_total 1$' "$work/ne.metrics" &&
    grep -q '^balloonmgr_domain_info{domain="test",' "$work/ne.metrics" &&
    grep -q '^node_textfile_scrape_error 0$' "$work/ne.metrics" ||
    { grep -E '^(balloonmgr|node_textfile)' "$work/ne.metrics"; cat "$work/node-exporter.log"
      fail "node_exporter's /metrics has no balloonmgr_* series from $textdir"; }
pass "node_exporter on 127.0.0.1:$ne_port serves $(grep -c '^balloonmgr_' "$work/ne.metrics") balloonmgr_* samples from $textdir"
kill "$ne_pid"; wait "$ne_pid" 2>/dev/null || true; ne_pid=""
rm -rf "$dropin_dir"

# read whole first: grep -q ends at the first match, and zcat's SIGPIPE would fail the pipe
zcat /usr/share/man/man8/balloonmgr.8.gz >"$work/balloonmgr.8" &&
    grep -q '^\.TH "balloonmgr" "8"' "$work/balloonmgr.8" ||
    fail "balloonmgr.8 is not a man page"
comp=$(bash -c '. /usr/share/bash-completion/completions/balloonmgr && complete -p balloonmgr' 2>&1) ||
    fail "the completion does not load: $comp"
pass "man page and completion ($comp)"

# remove: the program, the units and the enablement go; the conffile stays
cp /etc/balloonmgr/balloonmgr.policy "$work/policy.before"
echo "# an operator's edit" >>/etc/balloonmgr/balloonmgr.policy
DEBIAN_FRONTEND=noninteractive apt-get remove -y -q -o DPkg::Lock::Timeout=300 balloonmgr >"$work/remove.log" 2>&1 ||
    { cat "$work/remove.log"; fail "apt-get remove failed"; }
for f in "${files[@]}"; do
    [ "$f" = /etc/balloonmgr/balloonmgr.policy ] || [ "$f" = /etc/default/balloonmgr ] && continue
    [ ! -e "$f" ] || fail "$f left after remove"
done
# the textfile the timer wrote: nothing updates it any more, node_exporter would serve it frozen
[ ! -e "$textdir/balloonmgr.prom" ] || fail "$textdir/balloonmgr.prom left after remove (stale series)"
grep -q "an operator's edit" /etc/balloonmgr/balloonmgr.policy ||
    fail "remove did not keep the edited conffile"
pass "apt-get remove: files and the textfile gone, the edited policy kept"

# purge: nothing left
mkdir -p /var/lib/balloonmgr && echo '{}' >/var/lib/balloonmgr/state.json
dpkg --purge balloonmgr >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "dpkg --purge failed"; }
installed=0
for f in "${files[@]}" /etc/balloonmgr /usr/share/balloonmgr /var/lib/balloonmgr "$textdir/balloonmgr.prom" \
         "$wants/balloonmgr.service" /var/lib/systemd/deb-systemd-helper-enabled/balloonmgr.service.dsh-also \
         /var/lib/dpkg/info/balloonmgr.list; do
    [ ! -e "$f" ] && [ ! -L "$f" ] || fail "$f left after purge"
done
dpkg-query -W balloonmgr >/dev/null 2>&1 && fail "dpkg still knows balloonmgr after purge"
procs=$(installed_procs)
[ -z "$procs" ] || fail "a /usr/bin/balloonmgr process is left (pid $procs)"
pass "dpkg --purge: no files, no unit symlinks, no state left"
