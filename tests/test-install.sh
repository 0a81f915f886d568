#!/usr/bin/env bash
# `meson install --destdir` of the build into a temporary directory: every file lands where the
# build's options say (prefix, bindir, sysconfdir, localstatedir, datadir, mandir, the systemd
# unit directory from systemd.pc), nothing else is installed, the units start the installed
# binary with the installed policy and the state in their StateDirectory=, the binary's
# compiled-in defaults follow sysconfdir and localstatedir, and a reinstall keeps an edited
# policy.
# Usage: test-install.sh BUILD_DIR SOURCE_ROOT   (TAP output)
set -u
BUILD=$(realpath "$1")
ROOT=$(realpath "$2")
. "$ROOT/tests/tap.sh"
for tool in jq meson; do
    command -v $tool >/dev/null || tap_skip_all "$tool is not installed"
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
opt() { jq -r --arg n "$1" '.[] | select(.name == $n) | .value' "$tmp/options.json"; }
abs() { case "$1" in /*) echo "$1" ;; *) echo "$prefix/$1" ;; esac; }

meson introspect "$BUILD" --buildoptions >"$tmp/options.json"
prefix=$(opt prefix)
bindir=$(abs "$(opt bindir)") sysconfdir=$(abs "$(opt sysconfdir)") localstatedir=$(abs "$(opt localstatedir)")
datadir=$(abs "$(opt datadir)") mandir=$(abs "$(opt mandir)") rundir=$(opt rundir)
unitdir=$(opt systemdsystemunitdir)
if [ -z "$unitdir" ]; then
    unitdir=$(pkg-config --define-variable=prefix="$prefix" --variable=systemdsystemunitdir systemd 2>/dev/null) ||
        unitdir=$prefix/lib/systemd/system
fi
compdir=$(pkg-config --define-variable=datadir="$datadir" --variable=completionsdir bash-completion 2>/dev/null) ||
    compdir=$datadir/bash-completion/completions
catalogdir=$(pkg-config --define-variable=prefix="$prefix" --variable=catalogdir systemd 2>/dev/null) ||
    catalogdir=$prefix/lib/systemd/catalog
echo "# prefix $prefix, sysconfdir $sysconfdir, localstatedir $localstatedir, units $unitdir"

D=$tmp/dest
DESTDIR= meson install -C "$BUILD" --destdir "$D" --no-rebuild >"$tmp/install.log" 2>&1
ok $? "meson install --destdir succeeds"

want=(
    "$bindir/balloonmgr"
    "$sysconfdir/balloonmgr/balloonmgr.policy"
    "$datadir/balloonmgr/policies/default.policy"
    "$datadir/balloonmgr/policies/conservative.policy"
    "$datadir/balloonmgr/policies/aggressive.policy"
    "$compdir/balloonmgr"
    "$unitdir/balloonmgr.service"
    "$unitdir/balloonmgr-monitor.service"
    "$unitdir/balloonmgr-policy.service"
    "$unitdir/balloonmgr-policy.timer"
    "$datadir/balloonmgr/systemd/textfile.conf"
    "$datadir/balloonmgr/systemd/push.conf"
    "$sysconfdir/default/balloonmgr"
    "$catalogdir/balloonmgr.catalog"
)
if command -v scdoc >/dev/null && [ "$(opt man-pages)" != disabled ]; then
    want+=("$mandir/man8/balloonmgr.8" "$mandir/man5/balloonmgr.policy.5")
fi
for f in "${want[@]}"; do
    [ -f "$D$f" ]; ok $? "installed $f"
done
(cd "$D" && find . -type f -o -type l | sed 's|^\.||' | sort) >"$tmp/got"
printf '%s\n' "${want[@]}" | sort >"$tmp/want"
extra=$(comm -23 "$tmp/got" "$tmp/want" | tr '\n' ' ')
ok $([ -z "$extra" ]; echo $?) "nothing else installed${extra:+: $extra}"
[ -x "$D$bindir/balloonmgr" ] && "$D$bindir/balloonmgr" --version | grep -q '^balloonmgr '
ok $? "the installed binary runs"
# one source of the version: debian/changelog's newest entry, its upstream part
want_v=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Version 2>/dev/null ||
         sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' "$ROOT/debian/changelog")
want_v=${want_v#*:} && want_v=${want_v%-*}
[ "$("$D$bindir/balloonmgr" --version)" = "balloonmgr $want_v" ]
ok $? "--version says debian/changelog's version $want_v"
printf 'balloonmgr (2:0.3.1-4) unstable; urgency=medium\n' >"$tmp/changelog-rev"
printf 'balloonmgr (0.3.1~rc2) unstable; urgency=medium\n' >"$tmp/changelog-native"
[ "$("$ROOT/tools/version.sh" "$tmp/changelog-rev")" = 0.3.1 ] &&
    [ "$("$ROOT/tools/version.sh" "$tmp/changelog-native")" = 0.3.1~rc2 ]
ok $? "tools/version.sh: 2:0.3.1-4 is 0.3.1, 0.3.1~rc2 stays"
cmp -s "$D$sysconfdir/balloonmgr/balloonmgr.policy" "$ROOT/policies/default.policy"
ok $? "the system policy is the default policy"

# the units: ExecStart= is the installed binary, --policy the installed policy, --state in
# systemd's state directory (%S: /var/lib), where StateDirectory= makes balloonmgr/ writable
for u in balloonmgr.service balloonmgr-monitor.service balloonmgr-policy.service; do
    exec_line=$(grep '^ExecStart=' "$D$unitdir/$u")
    read -r -a argv <<<"${exec_line#ExecStart=}"
    bin=${argv[0]}
    [ "$bin" = "$bindir/balloonmgr" ] && [ -x "$D$bin" ]
    ok $? "$u: ExecStart= runs the installed $bin"
    policy="" state=""
    for ((i = 0; i < ${#argv[@]}; i++)); do
        case "${argv[i]}" in
        --policy) policy=${argv[i + 1]} ;;
        --state) state=${argv[i + 1]} ;;
        esac
    done
    [ "$policy" = "$sysconfdir/balloonmgr/balloonmgr.policy" ] && [ -f "$D$policy" ]
    ok $? "$u: --policy is the installed $policy"
    if [ "$u" != balloonmgr-monitor.service ]; then
        [ "$state" = "%S/balloonmgr/state.json" ]
        ok $? "$u: --state $state is in StateDirectory="
        grep -q '^StateDirectory=balloonmgr$' "$D$unitdir/$u"
        ok $? "$u: StateDirectory=balloonmgr"
    fi
    ! grep -n '@[a-z]*@' "$D$unitdir/$u"
    ok $? "$u: no placeholder left"
    grep -qx "EnvironmentFile=-$sysconfdir/default/balloonmgr" "$D$unitdir/$u" && [ "${argv[-1]}" = '$ARGS' ]
    ok $? "$u: reads the installed $sysconfdir/default/balloonmgr, \$ARGS last on ExecStart="
done
# the binary's compiled-in defaults are the same paths
help=$("$D$bindir/balloonmgr" run --help)
grep -qxF "Policy: $sysconfdir/balloonmgr/balloonmgr.policy" <<<"$help"
ok $? "run --help: default policy $sysconfdir/balloonmgr/balloonmgr.policy"
grep -qxF "State:  $localstatedir/lib/balloonmgr/state.json" <<<"$help"
ok $? "run --help: default state $localstatedir/lib/balloonmgr/state.json"
grep -qF "$rundir/balloonmgr/changes" "$D$unitdir/balloonmgr.service"
ok $? "balloonmgr.service names the spool $rundir/balloonmgr/changes"

# the drop-ins (not active: for the administrator to copy) start the installed binary too
for d in textfile push; do
    grep -qF "ExecStart=$bindir/balloonmgr run --once --policy $sysconfdir/balloonmgr/balloonmgr.policy --state %S/balloonmgr/state.json --" \
        "$D$datadir/balloonmgr/systemd/$d.conf" && grep -q '^ExecStart=.* \$ARGS$' "$D$datadir/balloonmgr/systemd/$d.conf"
    ok $? "$d.conf drop-in: the installed binary, policy and state, \$ARGS last"
done
[ ! -e "$D$unitdir/balloonmgr-policy.service.d" ]
ok $? "no drop-in is installed active"

grep -qx 'ARGS=""' "$D$sysconfdir/default/balloonmgr"
ok $? "$sysconfdir/default/balloonmgr: ARGS empty"

# a reinstall keeps an operator's policy and ARGS
echo '# edited' >>"$D$sysconfdir/balloonmgr/balloonmgr.policy"
echo 'ARGS="--no-libvirt-duplicates"' >>"$D$sysconfdir/default/balloonmgr"
DESTDIR= meson install -C "$BUILD" --destdir "$D" --no-rebuild >"$tmp/install2.log" 2>&1
tail -n 1 "$D$sysconfdir/balloonmgr/balloonmgr.policy" | grep -qx '# edited' &&
    tail -n 1 "$D$sysconfdir/default/balloonmgr" | grep -qx 'ARGS="--no-libvirt-duplicates"'
ok $? "a reinstall keeps the edited policy and default/balloonmgr"

tap_done
