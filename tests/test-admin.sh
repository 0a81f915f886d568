#!/usr/bin/env bash
# Issue 23, an administrator's habits, on libvirt's test driver: a pass whose textfile
# directory is missing still acts (textfile), options before or after the verb and one-line
# option errors (options), domains by name, ID or UUID (domains), set --live/--config/--current
# (set-flags), sizes that cannot be misread (sizes), output for scripts (raw), the listen
# addresses of an exporter (listen). The journal's fields are tests/test-journal.sh; the
# Debian paths are tests/integration/test-deb.sh. A dry run reads the guests' starvation
# statistics as the real pass does (dryrun; QMP_SHIM: tests/qmp-shim.c, a QEMU monitor on the
# test driver).
# Usage: test-admin.sh BALLOONMGR SOURCE_ROOT QMP_SHIM   (TAP output)
set -u
BM=$1
ROOT=$2
SHIM=$3
. "$ROOT/tests/tap.sh"
. "$ROOT/tests/agent.sh"
DEMO="test://$ROOT/demo/host.xml"
export BALLOONMGR_RUNTIME_DIR=$(mktemp -d)
T=$(mktemp -d)
out=$T/out err=$T/err
trap 'agent_stop; rm -rf "$T" "$BALLOONMGR_RUNTIME_DIR"' EXIT
PASS=(--policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc")

# run_bm ARGS...: runs balloonmgr with stdout in $out and stderr in $err; sets rc
run_bm() { "$BM" "$@" </dev/null >"$out" 2>"$err"; rc=$?; }
# one_line: stderr is one line (the records of balloon and mode changes are not messages)
one_line() { messages "$err"; [ "$NMSG" -eq 1 ]; }

# --- textfile: a pass whose textfile directory is missing acts, saves, then reports (exit 1)
run_bm -c "$DEMO" run --once --json "${PASS[@]}" --state "$T/s.json" --textfile "$T/missing"
[ "$rc" -eq 1 ]; ok_files $? "textfile: run --once --textfile MISSING exits 1 (got $rc)" "$err"
jq -e '[.decisions[] | select(.action == "inflate") | .applied] == [true, true]' "$out" >/dev/null
ok $? "textfile:   the pass applied its two inflates first" "$(head -c 2000 "$out")"
grep -c '^balloonmgr: change domain=' "$err" | grep -qx 2; ok $? "textfile:   two change records"
grep -qxF "balloonmgr: run: --textfile '$T/missing': No such file or directory; the pass acted, its metrics are not exported (counted in balloonmgr_errors_total{kind=\"push\"})" "$err"
ok_files $? "textfile:   then one line names the directory and says the pass acted" "$err"
jq -e '.counters.errors.push == 1 and (.domains | length) == 5' "$T/s.json" >/dev/null
ok $? "textfile:   the state is saved with the failed export counted"
run_bm -c "$DEMO" run --once "${PASS[@]}" --state "$T/s2.json" --textfile ''
[ "$rc" -eq 2 ] && [ ! -e "$T/s2.json" ]; ok $? "textfile: --textfile '' is still refused before the pass (exit 2, got $rc)"
mkdir "$T/tf"
run_bm -c "$DEMO" run --once "${PASS[@]}" --state "$T/s3.json" --textfile "$T/tf"
[ "$rc" -eq 0 ] && grep -q '^balloonmgr_passes_total ' "$T/tf/balloonmgr.prom"
ok $? "textfile: an existing directory gets balloonmgr.prom (exit $rc)"

# --- options: the global ones after the verb too, one line for a bad option, --quiet, --table
run_bm status web1 -c "$DEMO" --no-headings
[ "$rc" -eq 0 ] && grep -q '^web1 ' "$out" && [ "$(wc -l <"$out")" -eq 1 ]
ok_files $? "options: status web1 -c URI: -c after the verb and its argument (exit $rc)" "$err"
run_bm list --connect="$DEMO" --all
[ "$rc" -eq 0 ] && [ "$(wc -l <"$out")" -eq 7 ]; ok_files $? "options: list --connect=URI --all (exit $rc)" "$err"
run_bm set web1 1G -r -c "$DEMO"
[ "$rc" -eq 2 ] && grep -qxF "balloonmgr: set: setting a balloon target needs a read-write connection (-r/--readonly given)" "$err"
ok_files $? "options: set DOMAIN SIZE -r: -r after the verb is --readonly (exit $rc)" "$err"
run_bm -c "$DEMO" verify -r sg --readonly
[ "$rc" -eq 2 ] && grep -q "verify: asking the QEMU monitor needs a read-write connection" "$err"
ok_files $? "options: verify's -r stays its --require, --readonly is global (exit $rc)" "$err"
run_bm -c "$DEMO" --proc "$ROOT/demo/proc" status --json
[ "$rc" -eq 0 ] && jq -e '.host.mem_total_bytes == 68719476736' "$out" >/dev/null
ok_files $? "options: --proc DIR before the verb (exit $rc)" "$err"
run_bm -c "$DEMO" --proc "$ROOT/demo/proc" set web1 1G
[ "$rc" -eq 2 ] && grep -qxF "balloonmgr: set: --proc: 'set' reads no host memory (see 'balloonmgr set --help')" "$err"
ok_files $? "options: --proc before a verb that reads no host memory: refused (exit $rc)" "$err"
for args in "set web1 1G --bogus|balloonmgr: set: unknown option '--bogus' (see 'balloonmgr set --help')" \
            "status -Z|balloonmgr: status: unknown option '-Z' (see 'balloonmgr status --help')" \
            "list --all=yes|balloonmgr: list: option '--all' takes no argument (see 'balloonmgr list --help')" \
            "set web1 1G --stall|balloonmgr: set: option '--stall' needs an argument (see 'balloonmgr set --help')" \
            "--frob list|balloonmgr: unknown option '--frob' (see 'balloonmgr --help')"; do
    want=${args#*|}
    read -r -a argv <<<"${args%%|*}"
    run_bm -c "$DEMO" "${argv[@]}"
    [ "$rc" -eq 2 ] && [ "$(cat "$err")" = "$want" ]
    ok_files $? "options: ${args%%|*}: exit 2 (got $rc) and one line: $want" "$err"
done
run_bm -c "$DEMO" status --pro
[ "$rc" -eq 2 ] && [ "$(cat "$err")" = "balloonmgr: status: option '--pro' is ambiguous: --proc, --probe (see 'balloonmgr status --help')" ]
ok_files $? "options: an ambiguous abbreviation names the candidates, one line (exit $rc)" "$err"
run_bm -c "$DEMO" run --once --dry-run "${PASS[@]}"
[ "$rc" -eq 0 ] && [ "$(wc -l <"$out")" -eq 1 ] &&
    grep -qx 'pass: mode reclaim (host MemAvailable 4 GiB < reclaim_below 6.4 GiB): 2 inflate(s), 0 deflate(s) planned, 0 failed, 0 busy; 7 domain(s) (dry run: nothing is changed)' "$out"
ok_files $? "options: run off a terminal: one summary line, no table (exit $rc)" "$out"
run_bm -c "$DEMO" run --once --dry-run --table "${PASS[@]}"
grep -q '^NAME  *ACTION ' "$out"; ok $? "options: run --table: the table off a terminal"
if command -v script >/dev/null; then
    script -qec "$(printf '%q ' "$BM" -c "$DEMO" run --once --dry-run "${PASS[@]}")" /dev/null >"$out" 2>&1
    grep -q 'NAME  *ACTION ' "$out"; ok_files $? "options: run on a terminal: the table" "$out"
fi
run_bm -c "$DEMO" run --once -q "${PASS[@]}" --state "$T/q.json"
[ "$rc" -eq 0 ] && [ ! -s "$out" ] && [ "$(grep -c '^balloonmgr: change ' "$err")" -eq 2 ]
ok $? "options: run -q: nothing on stdout, one record per change on stderr (exit $rc)" "$(cat "$out" "$err")"
run_bm -c "$DEMO" set web1 2G --quiet
[ "$rc" -eq 0 ] && [ ! -s "$out" ] && [ ! -s "$err" ]; ok $? "options: set --quiet: nothing printed, exit 0 (got $rc)"
run_bm -c "$DEMO" set web1 2G -q --json
[ "$rc" -eq 2 ]; ok $? "options: set -q --json: refused (exit $rc)"

# --- domains: by name, ID or UUID, in virsh's order; named by their name in what is printed
run_bm -c "$DEMO" status --json 3 3b1e2a50-6d1f-4a0e-9a51-000000000006 web2
[ "$rc" -eq 0 ] && jq -e '[.domains[].name] == ["batch1", "db1", "web2"]' "$out" >/dev/null
ok_files $? "domains: status ID UUID NAME (exit $rc)" "$err"
run_bm -c "$DEMO" set 1 2G
[ "$rc" -eq 0 ] && grep -qx 'web1: inflate from 3 GiB to target 2 GiB (not waiting)' "$out"
ok $? "domains: set ID: the domain is web1, printed by its name (exit $rc)" "$(cat "$out" "$err")"
run_bm -c "$DEMO" set 3B1E2A50-6D1F-4A0E-9A51-000000000002 2G --json
[ "$rc" -eq 0 ] && jq -e '.domain == "web2"' "$out" >/dev/null; ok $? "domains: set UUID (upper case) (exit $rc)"
run_bm -c "$DEMO" verify 4 --json
jq -e '.domains[0].name == "cache1"' "$out" >/dev/null; ok $? "domains: verify ID names the domain" "$(cat "$out" "$err")"
run_bm -c "$DEMO" configure 2 --stats-period 5
[ "$rc" -eq 0 ] && ! grep -q "'2'" "$out" "$err"; ok $? "domains: configure ID (exit $rc)" "$(cat "$out" "$err")"
run_bm -c "$DEMO" set 9 2G
[ "$rc" -eq 2 ] && [ "$(cat "$err")" = "balloonmgr: set: '9': no domain with this name, ID or UUID" ]
ok_files $? "domains: an ID no domain has: one line, exit 2 (got $rc)" "$err"
run_bm -c "$DEMO" status 3b1e2a50-6d1f-4a0e-9a51-00000000000f
[ "$rc" -eq 2 ] && grep -qF "no domain with this name, ID or UUID" "$err"; ok $? "domains: an unknown UUID (exit $rc)"
run_bm -c "$DEMO" list --id
[ "$(tr '\n' ' ' <"$out")" = "5 4 3 1 2 " ]; ok_files $? "domains: list --id, in the order of the names" "$out"
run_bm -c "$DEMO" list --uuid --all
[ "$(wc -l <"$out")" -eq 7 ] && head -1 "$out" | grep -qx 3b1e2a50-6d1f-4a0e-9a51-000000000006
ok_files $? "domains: list --uuid --all" "$out"

# --- set-flags: --live, --config, --current as virsh setmem (the definition's value itself is
# checked against a real libvirtd: tests/integration/test-set-config.sh)
run_bm -c "$DEMO" set batch1 1G
[ "$rc" -eq 1 ] && [ "$(cat "$err")" = "balloonmgr: set: 'batch1': domain is not running (--config or --current sets the balloon of its next boot)" ]
ok_files $? "set-flags: a shut-off domain without --config: refused as virsh's default, exit 1 (got $rc)" "$err"
run_bm -c "$DEMO" set batch1 1G --config
[ "$rc" -eq 0 ] && grep -qx "batch1: next boot's balloon (<currentMemory>) from 8 GiB to 1 GiB" "$out"
ok $? "set-flags: --config on a shut-off domain sets its definition (exit $rc)" "$(cat "$out" "$err")"
run_bm -c "$DEMO" set 3b1e2a50-6d1f-4a0e-9a51-000000000006 50% --current --json
[ "$rc" -eq 0 ] && jq -e '.config and (.live | not) and .target_bytes == 4294967296' "$out" >/dev/null
ok $? "set-flags: --current on a shut-off domain is --config (exit $rc)" "$(cat "$out" "$err")"
run_bm -c "$DEMO" set web1 2G --current --json
[ "$rc" -eq 0 ] && jq -e '.live and (.config | not)' "$out" >/dev/null; ok $? "set-flags: --current on a running domain is --live"
run_bm -c "$DEMO" set web1 2G --config --json
[ "$rc" -eq 0 ] && jq -e '(.live | not) and .config and .from_bytes == 3221225472' "$out" >/dev/null
ok_files $? "set-flags: --config on a running domain: its definition only" "$out"
for args in "batch1 1G --live|1|balloonmgr: set: 'batch1': domain is not running (--config or --current sets the balloon of its next boot)" \
            "web1 1G --current --live|2|balloonmgr: set: options --current and --live are mutually exclusive" \
            "web1 1G --current --config|2|balloonmgr: set: options --current and --config are mutually exclusive" \
            "web1 1G --config --wait|2|balloonmgr: set: --wait with --config: the definition's balloon is the next boot's, there is nothing to wait for (--live --config changes both)" \
            "batch1 1G --current --wait|2|balloonmgr: set: 'batch1': --wait: the domain is not running, --current changes the balloon of its next boot: there is nothing to wait for"; do
    IFS='|' read -r a want msg <<<"$args"
    read -r -a argv <<<"$a"
    run_bm -c "$DEMO" set "${argv[@]}"
    [ "$rc" -eq "$want" ] && [ "$(cat "$err")" = "$msg" ]
    ok_files $? "set-flags: set $a: exit $want (got $rc): $msg" "$err"
done

# --- sizes: a bare number is KiB; policy check warns where that is likely misread or absurd
printf '[host]\nreclaim_below = 40G\ntarget_available = 50G\nrelease_above = 128G\n[guest]\nfloor = 25\nkeep_free = 0\ndeadband = 0\n[domain "web*"]\nfloor = 6G\nmax_step = 512.5\n' >"$T/sizes.policy"
run_bm policy check "$T/sizes.policy"
[ "$rc" -eq 0 ] && grep -qx "$T/sizes.policy: ok, 3 warning(s)" "$out"
ok $? "sizes: policy check: exit 0, ok with 3 warnings (exit $rc)" "$(cat "$out" "$err")"
grep -qxF "balloonmgr: policy check: $T/sizes.policy:6:9: warning: floor: '25' is 25 KiB: a bare number is KiB (as in virsh); write '25K' if you meant that, else the unit you meant ('25%', '25M')" "$err"
ok_files $? "sizes:   floor = 25: a bare number under 1 MiB, at file:line:col" "$err"
grep -qxF "balloonmgr: policy check: $T/sizes.policy:7:13: warning: keep_free: '0' is 0: an inflate may leave the guest no usable memory at all (the default is 15%)" "$err"
ok_files $? "sizes:   keep_free = 0" "$err"
grep -qF "balloonmgr: policy check: $T/sizes.policy:11:12: warning: max_step: '512.5' is 512.5 KiB" "$err" && ! grep -qF "'512.5%'" "$err"
ok_files $? "sizes:   max_step = 512.5 (no percentage above 100 suggested)" "$err"
! grep -q ":8:.*deadband" "$err"; ok $? "sizes:   deadband = 0 is not misread (0 is 0 in every unit)"
# issue 31: a floor below the absolute minimum (128 MiB, 5% of the maximum) is said to be
printf '[guest]\nfloor = 0%%\n[domain "a*"]\nfloor = 64M\n[domain "b*"]\nfloor = 5%%\n[domain "c*"]\nfloor = 128M\n' >"$T/minimum.policy"
run_bm policy check "$T/minimum.policy"
[ "$rc" -eq 0 ] && grep -qx "$T/minimum.policy: ok, 2 warning(s)" "$out" &&
    grep -qxF "balloonmgr: policy check: $T/minimum.policy:2:9: warning: floor: '0%' is below the absolute minimum, the larger of 128 MiB and 5% of the maximum: no pass aims a guest below that" "$err" &&
    grep -qF "balloonmgr: policy check: $T/minimum.policy:4:9: warning: floor: '64M' is below the absolute minimum" "$err"
ok $? "minimum: policy check warns of floor = 0% and 64M, not of 5% or 128M (exit $rc)" "$(cat "$out" "$err")"
run_bm -c "$DEMO" policy check --host --proc "$ROOT/demo/proc" "$T/sizes.policy"
[ "$rc" -eq 0 ] && grep -qx "$T/sizes.policy: ok, 5 warning(s)" "$out"
ok $? "sizes: policy check --host: 2 more warnings (exit $rc)" "$(cat "$out" "$err")"
grep -qxF "balloonmgr: policy check: $T/sizes.policy:4:17: warning: release_above 128 GiB is not below this host's MemTotal of 64 GiB" "$err"
ok_files $? "sizes:   release_above above MemTotal" "$err"
grep -qxF "balloonmgr: policy check: $T/sizes.policy:10:9: warning: floor 6 GiB is not below the maximum of domain 'web1' (4 GiB): it is never inflated; a percentage of the maximum fits every domain" "$err"
ok_files $? "sizes:   a floor above a domain's maximum, at the [domain] line that sets it" "$err"
run_bm policy check "$ROOT"/policies/*.policy "$ROOT/demo/demo.policy"
[ "$rc" -eq 0 ] && [ ! -s "$err" ]; ok_files $? "sizes: the shipped policies have no warning" "$err"
run_bm -c test:///default set test -1
[ "$rc" -eq 2 ] && [ "$(cat "$err")" = "balloonmgr: set: 'test': size '-1': a relative size needs a unit: '-1' would be 1 KiB (a bare number is KiB); write '-1K' for that, or '-1M', '-1G'" ]
ok_files $? "sizes: set test -1: refused with the reason, exit 2 (got $rc)" "$err"
run_bm -c test:///default set test -256M --json
[ "$rc" -eq 0 ] && jq -e '.target_bytes == 2147483648 - 268435456' "$out" >/dev/null; ok $? "sizes: set test -256M: relative with a unit (exit $rc)"
run_bm -c test:///default set test 1048576 --json
[ "$rc" -eq 0 ] && jq -e '.target_bytes == 1073741824' "$out" >/dev/null; ok $? "sizes: set test 1048576: an absolute bare number is KiB as in virsh"

# --- raw: status --bytes, --raw; tables fit a terminal, and are as before elsewhere
run_bm -c "$DEMO" status --bytes --raw
[ "$rc" -eq 0 ] && head -1 "$out" | grep -qx 'NAME STATE MAXIMUM CURRENT RECLAIMED AVAIL USABLE UNUSED CACHES RSS SWAPIN SWAPOUT MAJFLT PERIOD AGE SG FPR AUTODEFL'
ok $? "raw: status --bytes --raw: the header row first, no host line (exit $rc)" "$(head -2 "$out")"
[ "$(wc -l <"$out")" -eq 8 ] && awk 'NF != 18 { exit 1 }' "$out"
ok_files $? "raw:   one domain a line, 18 fields on every line" "$out"
grep -qx 'batch1 shut\\x20off 8589934592 8589934592 0 - - - - - - - - off - unknown off off' "$out"
ok $? "raw:   'shut off' is one field (shut\\x20off), sizes in bytes" "$(grep batch1 "$out")"
grep -q '^web1 running 4294967296 3221225472 1073741824 ' "$out"; ok $? "raw:   web1 in bytes" "$(grep web1 "$out")"
run_bm -c "$DEMO" status --raw --no-headings -o NAME,STATE web1 legacy1
[ "$(cat "$out")" = "$(printf 'legacy1 shut\\x20off\nweb1 running')" ]; ok_files $? "raw: --raw --no-headings -o NAME,STATE" "$out"
run_bm -c "$DEMO" status --bytes --no-headings -o NAME,CURRENT web1
grep -qx 'web1  3221225472' "$out"; ok_files $? "raw: --bytes in the aligned table" "$out"
run_bm -c "$DEMO" status --json --raw
[ "$rc" -eq 2 ]; ok $? "raw: --json --raw refused (exit $rc)"
# off a terminal the tables are what they were (tests/data/table: the output before libsmartcols,
# which had the columns up to SG)
"$BM" -c "$DEMO" status --no-headings -o NAME,STATE,MAXIMUM,CURRENT,RECLAIMED,AVAIL,USABLE,UNUSED,CACHES,RSS,SWAPIN,SWAPOUT,MAJFLT,PERIOD,AGE,SG 2>/dev/null |
    cmp -s - "$ROOT/tests/data/table/status-no-headings.out"
ok $? "raw: status off a terminal: byte for byte as before"
"$BM" -c "$DEMO" run --once --table --dry-run "${PASS[@]}" 2>/dev/null | tail -n +2 >"$out"
tail -n +2 "$ROOT/tests/data/table/run-dry.out" | cmp -s - "$out"
ok_files $? "raw: run --table off a terminal: byte for byte as before (after the policy's path)" "$out"
LONG="test://$ROOT/tests/data/host/long-name.xml"
name=customer-4711-production-web-frontend-europe-west-replica-0042
run_bm -c "$LONG" status --no-headings
grep -q "^$name " "$out" && [ "$(awk '{ print length($0) }' "$out" | sort -n | tail -1)" -gt 150 ]
ok_files $? "raw: off a terminal a long name is whole (the lines are wider than 150)" "$out"
if command -v script >/dev/null; then
    COLUMNS=150 script -qec "$(printf '%q ' "$BM" -c "$LONG" status --no-headings)" /dev/null | tr -d '\r' >"$out"
    [ "$(awk '{ print length($0) }' "$out" | sort -n | tail -1)" -le 150 ] && grep -q "^$name " "$out"
    ok_files $? "raw: on a 150-column terminal the name is whole and other columns give way to fit" "$out"
    COLUMNS=80 script -qec "$(printf '%q ' "$BM" -c "$DEMO" run --once --dry-run "${PASS[@]}") 2>/dev/null" /dev/null | tr -d '\r' >"$out"
    sed -n '/^NAME  *ACTION/,$p' "$out" >"$out.table"
    [ "$(wc -l <"$out.table")" -gt 8 ] && [ "$(awk '{ print length($0) }' "$out.table" | sort -n | tail -1)" -le 80 ] &&
        [ "$(grep -o 'nothing to take: .*' "$out" | head -1)" != "" ]
    ok_files $? "raw: run on an 80-column terminal: REASON wraps, every table line fits" "$out"
fi

# --- listen: host names, [::1]:PORT and :PORT, as exporters take them; each address of a name
# agent_on LISTEN [PREFIX...]: starts the agent with --listen LISTEN (PORT in it replaced by 0:
# a free port), PREFIX before the command (e.g. unshare); sets port. The log in $T/agent.log.
# Returns 0 when it says it serves /metrics.
agent_on() {
    local spec=$1; shift
    agent_start "$T/agent.log" "$@" "$BM" -c "$DEMO" agent --dry-run --policy "$ROOT/demo/demo.policy" \
        --proc "$ROOT/demo/proc" --state "$T/agent.json" --listen "${spec//PORT/0}"
    local rc=$?
    port=$agent_port
    return $rc
}
stop_agent() { agent_stop; }
answers() { curl -sf -o /dev/null --max-time 3 "http://$1/metrics"; }
agent_on localhost:PORT
ok_files $? "listen: --listen localhost:PORT starts" "$T/agent.log"
answers "127.0.0.1:$port"; ok $? "listen:   and answers on 127.0.0.1 (localhost here: $(getent ahosts localhost | awk '$2 == "STREAM" { print $1 }' | tr '\n' ' '))"
grep -q "serving /metrics on localhost:0 (http, no auth) at 127.0.0.1:$port" "$T/agent.log"
ok $? "listen:   its message names the addresses" "$(head -1 "$T/agent.log")"
stop_agent
# an address given as it is served: named once (the port just freed, taken again)
agent_on "127.0.0.1:$port"
ok_files $? "listen: --listen 127.0.0.1:$port starts" "$T/agent.log"
line=$(grep -m1 "serving /metrics" "$T/agent.log")
[[ $line == *"serving /metrics (http, no auth) at 127.0.0.1:$port, policy "* ]] &&
    [ "$(grep -o "127.0.0.1:$port" <<<"$line" | wc -l)" -eq 1 ]
ok $? "listen:   its message names the address once" "$line"
stop_agent
if [ -e /proc/net/if_inet6 ] && grep -q '^0*1 ' /proc/net/if_inet6; then
    agent_on '[::1]:PORT'
    ok_files $? "listen: --listen [::1]:PORT starts" "$T/agent.log"
    answers "[::1]:$port" && ! answers "127.0.0.1:$port"; ok $? "listen:   answers on ::1 only"
    stop_agent
    agent_on ':PORT'
    answers "[::1]:$port" && answers "127.0.0.1:$port"; ok $? "listen: --listen :PORT answers on ::1 and 127.0.0.1"
    stop_agent
    # a name with two addresses (a private /etc/hosts in a mount namespace): both are served
    if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
        printf '127.0.0.1 bm-two-addrs\n::1 bm-two-addrs\n' >"$T/hosts"
        agent_on bm-two-addrs:PORT unshare -m --propagation private sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$T/hosts"
        ok_files $? "listen: --listen NAME:PORT with a name of two addresses starts" "$T/agent.log"
        answers "127.0.0.1:$port" && answers "[::1]:$port"; ok $? "listen:   and answers on each: 127.0.0.1 and ::1"
        grep -qE "at (127\.0\.0\.1:$port, \[::1\]:$port|\[::1\]:$port, 127\.0\.0\.1:$port)," "$T/agent.log"
        ok $? "listen:   its message names both" "$(head -1 "$T/agent.log")"
        stop_agent
    else
        tap_skip "a name of two addresses needs a private /etc/hosts: root"
    fi
else
    tap_skip "no IPv6 loopback: [::1]:PORT and a name of two addresses not checked"
fi
run_bm -c "$DEMO" agent --dry-run --listen 999.1.1.1:80
[ "$rc" -eq 2 ] && grep -qxF "balloonmgr: agent: --listen '999.1.1.1:80': '999.1.1.1' is not an IP address" "$err"
ok_files $? "listen: digits and dots are an address, not a name to look up (exit $rc)" "$err"

# --- dryrun: run --once --dry-run reads what the real pass reads, the guests' starvation
# statistics too (the QEMU monitor as verify_features allows; tests/qmp-shim.c stands in for it
# on the test driver): after an OOM kill it plans what the real pass does
mkdir -p "$T/qmp"
cp "$ROOT/tests/data/qmp/x-query-virtio.json" "$T/qmp/"
oom_kills() { jq '.return.stats["stat-oom-kills"] = $n' --argjson n "$1" "$ROOT/tests/data/qmp/guest-stats-qemu10-linux612.json" >"$T/qmp/qom-get.json"; }
printf '[host]\nverify_features = always\n[guest]\nmax_stats_age = off\n' >"$T/always.policy"
shim=(env "BM_QMP_SHIM_DIR=$T/qmp" "LD_PRELOAD=$SHIM" "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0")
DRY=(-c "$DEMO" run --once --json --policy "$T/always.policy" --proc "$ROOT/demo/proc" --state "$T/oom.json")
oom_kills 0
"${shim[@]}" "$BM" "${DRY[@]}" >"$out" 2>"$err"
ok_files $? "dryrun: a pass reads the guests' statistics: no OOM kill yet" "$err"
oom_kills 1
# a decision: name, action, target, the OOM kills it saw and its reason's first words
plan() { jq -c '.decisions[] | select(.action != "skip") | [.name, .action, .target_bytes, .oom_kills, (.reason | .[0:20])]' "$1"; }
"${shim[@]}" "$BM" "${DRY[@]}" --dry-run >"$out" 2>"$err"
plan "$out" >"$T/dry"
"${shim[@]}" "$BM" "${DRY[@]}" >"$out" 2>"$err"
plan "$out" >"$T/real"
grep -q '"web1","deflate",4294967296,1,"OOM kill in the gues' "$T/dry"
ok $? "dryrun:   then an OOM kill in every guest: the dry run deflates web1 to its maximum, as 'OOM kill'" "$(cat "$T/dry")"
diff "$T/dry" "$T/real" >/dev/null; ok $? "dryrun:   the real pass decides the same" "$(diff "$T/dry" "$T/real")"
# -r: the read-only socket has no QEMU monitor: no statistics (null), nothing asked
: >"$T/qmp/log"
"${shim[@]}" "$BM" -r "${DRY[@]}" --dry-run >"$out" 2>"$err"
jq -e '[.decisions[] | select(.action != "skip") | .oom_kills] | all(. == null)' "$out" >/dev/null && [ ! -s "$T/qmp/log" ]
ok $? "dryrun: with -r nothing is asked of the monitor (oom_kills null)" "$(plan "$out")" "$(cat "$T/qmp/log")"

tap_done
