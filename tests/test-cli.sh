#!/usr/bin/env bash
# The CLI on libvirt's test driver: what an operator types, what it prints, its exit status.
# Usage: test-cli.sh BALLOONMGR SOURCE_ROOT   (TAP output)
set -u
BM=$1
ROOT=$2
. "$ROOT/tests/tap.sh"
. "$ROOT/tests/agent.sh"
DEMO="test://$ROOT/demo/host.xml"
# keep run/set away from the system's /run/balloonmgr
export BALLOONMGR_RUNTIME_DIR=$(mktemp -d)
out=$(mktemp) err=$(mktemp) tmp_floor=$(mktemp)
trap 'agent_stop; rm -rf "$out" "$err" "$tmp_floor" "$BALLOONMGR_RUNTIME_DIR"' EXIT

# expect STATUS STDERR_SUBSTRING -- ARGS...: runs balloonmgr, checks exit status and stderr
expect() {
    local want=$1 msg=$2; shift 3
    "$BM" "$@" >"$out" 2>"$err"; local got=$?
    [ "$got" -eq "$want" ]; ok $? "balloonmgr $* exits $want (got $got)"
    if [ -n "$msg" ]; then
        messages "$err"
        [[ $ALL == *"$msg"* ]]; ok $? "  and says: $msg"
        [ "$NMSG" -eq 1 ]; ok $? "  in one line"
    fi
}

# --- global
expect 0 "" -- --help
grep -q '^  set  *a domain' "$out"; ok $? "--help lists set"
expect 0 "" -- --version
grep -q '^balloonmgr [0-9]' "$out"; ok $? "--version prints a version"
expect 2 "unknown verb 'frobnicate'" -- frobnicate
expect 2 "" --
expect 1 "cannot connect to 'test:///nonexistent/file.xml'" -- -c test:///nonexistent/file.xml status
BALLOONMGR_URI=$DEMO "$BM" list >"$out" 2>"$err"; ok $? "\$BALLOONMGR_URI is used"
[ "$(cat "$out")" = "$(printf 'build1\ncache1\ndb1\nweb1\nweb2')" ]; ok $? "list: running domains, sorted"

# --- -r/--readonly: reading works, changing is refused before connecting
expect 0 "" -- -c "$DEMO" -r status --json web1
jq -e '.domains[0].current_bytes == 3221225472' "$out" >/dev/null; ok $? "-r status reads web1"
expect 2 "set: setting a balloon target needs a read-write connection (-r/--readonly given)" -- -c "$DEMO" -r set web1 2G
expect 2 "configure: changing a domain needs a read-write connection" -- -c "$DEMO" --readonly configure web1 --stats-period 5
expect 2 "verify: asking the QEMU monitor needs a read-write connection (-r/--readonly given); 'status' works read-only" -- -c "$DEMO" -r verify
expect 2 "run: changing balloons needs a read-write connection (-r/--readonly given); use --dry-run" -- -c "$DEMO" -r run --once
expect 0 "" -- -c "$DEMO" -r run --once --dry-run --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc"
grep -q "dry run" "$out"; ok $? "-r run --once --dry-run plans"

# --- list
expect 0 "" -- -c "$DEMO" list --all
[ "$(wc -l <"$out")" -eq 7 ]; ok $? "list --all: all seven"
expect 2 "unexpected argument 'x'" -- -c "$DEMO" list x

# --- status
expect 0 "" -- -c test:///default status --json
jq -e '.domains | length == 1 and .[0].name == "test"' "$out" >/dev/null; ok $? "status --json on test:///default: valid JSON with domain test"
expect 0 "" -- -c "$DEMO" status --json
jq -e '[.domains[].name] == ["batch1","build1","cache1","db1","legacy1","web1","web2"]' "$out" >/dev/null; ok $? "status --json lists every domain"
jq -e '.domains[] | select(.name=="web1") | .maximum_bytes == 4294967296 and .current_bytes == 3221225472 and .reclaimed_bytes == 1073741824 and .stats_period_s == 5' "$out" >/dev/null; ok $? "web1 sizes in bytes"
jq -e '.domains[] | select(.name=="batch1") | .usable_bytes == null and .unused_bytes == null and .rss_bytes == null and .state == "shut off"' "$out" >/dev/null; ok $? "shut-off domain: absent stats are null"
jq -e '[.domains[] | keys[] | select(test("^[a-z0-9_]+$") | not)] == []' "$out" >/dev/null; ok $? "keys are snake_case"
expect 0 "" -- -c "$DEMO" status
head -1 "$out" | grep -q '^host: MemTotal [0-9.]* [KMGT]iB, MemAvailable [0-9.]* [KMGT]iB, PSI some .*, mode [a-z]*, reclaimed 13 GiB, backed free -, overcommit [0-9.]* (64 GiB in 5 active domains), KSM '; ok $? "status starts with the host line: $(head -1 "$out")"
sed -n 2p "$out" | grep -q '^NAME  *STATE  *MAXIMUM  *CURRENT  *RECLAIMED'; ok $? "status table header"
grep -q '^web1 .* 4 GiB  *3 GiB  *1 GiB ' "$out"; ok $? "status table: human sizes"
grep -q '^legacy1 .* none ' "$out"; ok $? "status table: domain without balloon"
# the test driver's statistics carry a timestamp from 1989, before this host booted: never
# timestamped by a guest here, so AGE is '-', not 13526d
grep -q '^web1 .* 5s  *-  *not-probed  *off  *off$' "$out"; ok $? "status table: AGE '-' for stats the driver never timestamped, SG not probed by default, FPR and AUTODEFL off"
! grep -q '[0-9]d  *unknown' "$out"; ok $? "status table: no age in days"
expect 0 "" -- -c "$DEMO" status web1 db1
[ "$(wc -l <"$out")" -eq 4 ]; ok $? "status DOMAIN...: the host line, the header, those two"
grep -q '(64 GiB in 5 active domains)' "$out"; ok $? "status DOMAIN...: the host line still counts every active domain"
# the host line under a fake /proc and the demo policy: the policy's mode and numbers
# a --state given explicitly must exist (the default one is read only if it is there)
expect 2 "status: state '/nonexistent/state.json'" -- -c "$DEMO" status --proc "$ROOT/demo/proc" --state /nonexistent/state.json
expect 0 "" -- -c "$DEMO" status --proc "$ROOT/demo/proc" --policy "$ROOT/demo/demo.policy"
head -1 "$out" | grep -qx 'host: MemTotal 64 GiB, MemAvailable 4 GiB, PSI some 6.4%, mode reclaim, reclaimed 13 GiB, backed free -, overcommit 1.00 (64 GiB in 5 active domains), KSM .*'
ok $? "host line with the fake /proc: $(head -1 "$out")"
expect 0 "" -- -c "$DEMO" status --json --proc "$ROOT/demo/proc" --policy "$ROOT/demo/demo.policy"
jq -e '.host | .mem_total_bytes == 68719476736 and .mem_available_bytes == 4294967296 and .psi_some_avg10_ratio == 0.064 and .mode == "reclaim" and (.mode_reason | startswith("host MemAvailable 4 GiB < reclaim_below")) and .active_domains == 5 and .maximum_bytes == 68719476736 and .reclaimed_bytes == 13958643712 and .overcommit == 1' "$out" >/dev/null
ok $? "status --json: the host object"
jq -e '.host.ksm | has("present") and has("saved_bytes") and has("pages_sharing") and has("general_profit_bytes")' "$out" >/dev/null
ok $? "status --json: the host's KSM object"
jq -e '[.domains[] | select(.active) | .stats_age_s] | all(. == null)' "$out" >/dev/null
ok $? "status --json: stats_age_s null for stats the driver never timestamped"
# status makes the reading and the dry evaluation of 'run --once --dry-run' (the engine's): the
# same mode and reason, with the state file's mode for hysteresis
"$BM" -c "$DEMO" run --once -q --proc "$ROOT/demo/proc" --policy "$ROOT/demo/demo.policy" --state "$out.st" 2>/dev/null
expect 0 "" -- -c "$DEMO" run --once --dry-run --json --proc "$ROOT/demo/proc" --policy "$ROOT/demo/demo.policy" --state "$out.st"
jq -e '[.decisions[] | .device] | length == 7 and all(. == "balloon")' "$out" >/dev/null &&
    jq -e 'all(.decisions[]; .virtio_mem_requested_bytes == null and .virtio_mem_block_bytes == null)' "$out" >/dev/null
ok $? "run --json: each decision's device, the demo's balloons (no virtio-mem change)"
jq -r '.host | .mode + ": " + .reason' "$out" >"$out.run"
expect 0 "" -- -c "$DEMO" status --json --proc "$ROOT/demo/proc" --policy "$ROOT/demo/demo.policy" --state "$out.st"
jq -r '.host | .mode + ": " + .mode_reason' "$out" >"$out.status"
[ -s "$out.run" ] && diff "$out.run" "$out.status" >/dev/null
ok $? "status and run --once --dry-run: the same mode and reason ($(cat "$out.status"))"
rm -f "$out.st" "$out.run" "$out.status"
# a host memory that cannot be read: a warning, the domains shown, no mode
expect 0 "warning: host memory: $ROOT/tests/data/proc/bad-meminfo/meminfo: no MemTotal" -- -c "$DEMO" status --proc "$ROOT/tests/data/proc/bad-meminfo" web1
head -1 "$out" | grep -q '^host: MemTotal -, MemAvailable -, PSI some -, mode -, ' && grep -q '^web1 ' "$out"
ok $? "status with host memory unread: the host line without it, the domain: $(head -1 "$out")"
printf '[host]\nreclaim_below = lots\n' >"$out.bad.policy"
expect 2 "" -- -c "$DEMO" status --policy "$out.bad.policy"
grep -qxF "balloonmgr: status: policy '$out.bad.policy' has errors" "$err" && grep -q "bad.policy:2:17: reclaim_below" "$err"
ok $? "status --policy with errors: the errors and exit 2"
rm -f "$out.bad.policy"
# free page reporting and deflate-on-oom from the XML (<memballoon freePageReporting= autodeflate=>)
FPRHOST="test://$ROOT/tests/data/host/reporting.xml"
expect 0 "" -- -c "$FPRHOST" status -o name,fpr,AUTODEFL
[ "$(sed -n '2,$p' "$out" | tr -s ' ' | tr '\n' '|')" = "NAME FPR AUTODEFL|both1 on on|doom1 off on|fpr1 on off|none1 - -|plain1 off off|" ]
ok $? "status -o fpr,autodefl: on/off as the XML sets them, '-' without a balloon: $(sed -n '2,$p' "$out" | tr -s ' ' | tr '\n' '|')"
expect 0 "" -- -c "$FPRHOST" status --json
jq -e '[.domains[] | [.name, .free_page_reporting_configured, .deflate_on_oom_configured]] == [["both1",true,true],["doom1",false,true],["fpr1",true,false],["none1",null,null],["plain1",false,false]]' "$out" >/dev/null
ok $? "status --json: free_page_reporting_configured, deflate_on_oom_configured (null without a balloon)"
jq -e '[.domains[] | select(.name != "none1") | .free_page_reporting, .deflate_on_oom] | all(. == "not-probed")' "$out" >/dev/null
ok $? "status --json: free_page_reporting and deflate_on_oom not-probed without --probe"
# the test driver's RSS is what the guest uses: no backed free memory, no configure command
jq -e '.host.backed_free_bytes == null and all(.domains[]; .backed_free_bytes == null and .free_page_reporting_command == null)' "$out" >/dev/null
ok $? "status --json: no backed free memory on the test driver (its RSS is the guest's use), no command"
# a verdict of this start in the state file (written by a run that asked: the test driver's
# is unknown; made negotiated here) is shown without asking
fprd=$(mktemp -d)
printf '[host]\nverify_features = always\n' >"$fprd/always.policy"
"$BM" -c "$FPRHOST" run --once --policy "$fprd/always.policy" --proc "$ROOT/demo/proc" --state "$fprd/s.json" >/dev/null 2>&1
jq -e '[.counters.domains[] | select(.name == "both1") | .features | .reporting, .deflate_on_oom] == ["unknown","unknown"]' "$fprd/s.json" >/dev/null
ok $? "run with verify_features = always keeps the reporting and deflate-on-oom verdicts in the state file"
jq '(.counters.domains[] | select(.name == "both1" or .name == "plain1") | .features) |= (.reporting = "negotiated" | .deflate_on_oom = "offered")' \
    "$fprd/s.json" >"$fprd/s2.json"
# status reads the host's boot id through the same --proc root as the run that kept the verdicts
expect 0 "" -- -c "$FPRHOST" status -o name,fpr,autodefl --proc "$ROOT/demo/proc" --state "$fprd/s2.json" both1 plain1
[ "$(sed -n '3,$p' "$out" | tr -s ' ' | tr '\n' '|')" = "both1 on+negotiated on+offered|plain1 off+negotiated off+offered|" ]
ok $? "status: the state file's verdicts after the XML's setting: $(sed -n '3,$p' "$out" | tr -s ' ' | tr '\n' '|')"
expect 0 "" -- -c "$FPRHOST" status --json --proc "$ROOT/demo/proc" --state "$fprd/s2.json" both1
jq -e '.domains[0] | .free_page_reporting == "negotiated" and .deflate_on_oom == "offered" and .free_page_reporting_configured' "$out" >/dev/null
ok $? "status --json: the state file's verdicts"
expect 0 "" -- -c "$FPRHOST" status -o name,fpr,autodefl --state "$fprd/s.json" both1
[ "$(sed -n '3p' "$out" | tr -s ' ')" = "both1 on on" ]; ok $? "status: an unknown verdict adds nothing to the XML's setting"
rm -rf "$fprd"
# -o / --no-headings
expect 0 "" -- -c "$DEMO" status -o name,CURRENT,sg web1 db1
[ "$(sed -n 2p "$out")" = "NAME  CURRENT  SG" ]; ok $? "-o: the columns asked for, in that order"
[ "$(sed -n 3p "$out")" = "db1    12 GiB  not-probed" ]; ok $? "-o: the row fits those columns"
expect 0 "" -- -c "$DEMO" status --output RECLAIMED,NAME --no-headings web1 db1
[ "$(cat "$out")" = "4 GiB  db1"$'\n'"1 GiB  web1" ]; ok $? "--no-headings: rows only, no host line: $(tr '\n' '|' <"$out")"
expect 2 "status: --output 'NAME,BOGUS': unknown column 'BOGUS' (columns: NAME,STATE,MAXIMUM," -- -c "$DEMO" status -o NAME,BOGUS
expect 2 "status: --output 'NAME,': expected column names separated by commas" -- -c "$DEMO" status -o NAME,
expect 2 "status: --output is for the table, not --json" -- -c "$DEMO" status -o NAME --json
expect 2 "status: 'nope': no domain with this name, ID or UUID" -- -c "$DEMO" status web1 nope

# --- set: sizes
expect 2 "set: 'test': size '12X': unknown unit 'X'" -- -c test:///default set test 12X
expect 2 "set: 'test': size '9G': exceeds the maximum of 8 GiB" -- -c test:///default set test 9G
expect 2 "set: 'test': size '-3G': would be negative" -- -c test:///default set test -3G
expect 2 "set: 'test': size '0': must be greater than 0" -- -c test:///default set test 0
expect 2 "set: 'test': size '99999999999999999999': too large" -- -c test:///default set test 99999999999999999999
expect 2 "set: 'test': size 'abc': not a number" -- -c test:///default set test abc
expect 2 "set: 'test': size '1.5 G': contains white space" -- -c test:///default set test "1.5 G"
expect 2 "set: 'nope': no domain with this name, ID or UUID" -- -c test:///default set nope 1G
expect 2 "set: 'bad\\x0aname': no domain with this name, ID or UUID" -- -c test:///default set "bad
name" 1G
expect 1 "set: 'batch1': domain is not running" -- -c "$DEMO" set batch1 1G
expect 2 "expected DOMAIN and SIZE" -- -c test:///default set test
expect 2 "--wait 'x': expected a number of seconds" -- -c test:///default set test 1G --wait=x
expect 2 "--stall '0': expected a number of seconds" -- -c test:///default set test 1G --wait --stall=0

# --- set: moves
expect 0 "" -- -c test:///default set test 50% --wait --json
jq -e '.outcome == "reached" and .direction == "deflate" and .from_bytes == 2147483648 and .target_bytes == 4294967296 and .reached_bytes == 4294967296 and .duration_s >= 0' "$out" >/dev/null; ok $? "set 50% --wait --json: deflate 2 GiB -> 4 GiB reached"
expect 0 "" -- -c test:///default set test -512M --wait
grep -q '^test: inflate from 2 GiB to target 1.5 GiB: reached 1.5 GiB after' "$out"; ok $? "set -512M: relative inflate, text output"
expect 0 "" -- -c test:///default set test +1G
grep -q 'deflate from 2 GiB to target 3 GiB (not waiting)' "$out"; ok $? "set +1G without --wait"
expect 0 "" -- -c test:///default set test 1048576 --json
jq -e '.target_bytes == 1073741824 and .outcome == "pending" and .duration_s == null' "$out" >/dev/null; ok $? "bare number is KiB; pending without --wait"

# --- list: one name a line, control characters escaped as the other verbs do, UTF-8 kept
expect 0 "" -- -c "test://$ROOT/tests/data/names.xml" list --all
[ "$(cat "$out")" = "$(printf 'caf\xc3\xa9\ntab\\x09name')" ]; ok $? "list --all: 'tab\\x09name' escaped, 'café' kept"
expect 0 "" -- -c "test://$ROOT/tests/data/names.xml" status --json
jq -e '[.domains[].name] | sort == ["café", "tab\tname"]' "$out" >/dev/null; ok $? "status --json: valid JSON with the names"

# --- set: never below the domain's floor by accident
expect 2 "set: 'test': size '1.5' (1.5 KiB) is below the domain's floor of 409.6 MiB, the absolute minimum (the larger of 128 MiB and 5% of the maximum); --force sets it anyway" -- -c test:///default set test 1.5
expect 2 "set: 'test': size '2048' (2 MiB) is below the domain's floor of 409.6 MiB" -- -c test:///default set test 2048
expect 2 "set: 'db1': size '6G' (6 GiB) is below the domain's floor of 8 GiB, <memtune><min_guarantee>; --force sets it anyway" -- -c "$DEMO" set db1 6G
expect 0 "" -- -c "$DEMO" set db1 8G
grep -q 'target 8 GiB' "$out"; ok $? "set db1 8G: at <min_guarantee> is fine"
expect 0 "" -- -c test:///default set test 300M --force
grep -q 'inflate from 2 GiB to target 300 MiB' "$out"; ok $? "set 300M --force: below the floor on purpose"
printf '[guest]\nfloor = 50%%\n' >"$tmp_floor"
expect 2 "set: 'test': size '1.5G' (1.5 GiB) is below the domain's floor of 4 GiB, the policy's floor in $tmp_floor; --force sets it anyway" -- -c test:///default set test 1.5G --policy "$tmp_floor"
expect 0 "" -- -c test:///default set test 3G --policy "$tmp_floor"
grep -q 'deflate from 2 GiB to target 3 GiB' "$out"; ok $? "set 3G from 2 GiB under a 4 GiB floor: a deflate gives memory back, taken"

# --- verify (the test driver has no QEMU monitor: unknown, with the reason)
expect 0 "" -- -c "$DEMO" verify --json
jq -e '[.domains[].name] == ["build1","cache1","db1","web1","web2"]' "$out" >/dev/null; ok $? "verify without DOMAIN: the running domains"
jq -e '[.domains[].features.sg] | all(.state == "unknown" and .reason == "libvirt driver without QEMU monitor")' "$out" >/dev/null; ok $? "verify on the test driver: sg unknown, reason given"
jq -e '[.domains[0] | .. | objects | keys[] | select(test("^[a-z0-9_]+$") | not)] == []' "$out" >/dev/null; ok $? "verify keys are snake_case"
expect 3 "verify: 'web1': sg is unknown: libvirt driver without QEMU monitor" -- -c "$DEMO" verify web1 --require sg
expect 3 "verify: 'batch1': ioeventfd is unknown: domain not running" -- -c "$DEMO" verify batch1 --require ioeventfd
expect 2 "verify: --require 'fast': unknown feature" -- -c "$DEMO" verify --require sg,fast
expect 2 "verify: --sg-bit '64': expected a bit number" -- -c "$DEMO" verify --sg-bit=64
expect 2 "verify: 'nope': no domain with this name, ID or UUID" -- -c "$DEMO" verify web1 nope
[ ! -s "$out" ]; ok $? "  and prints no table"
expect 0 "" -- -c "$FPRHOST" verify --json
jq -e '[.domains[] | [.name, .features.reporting.configured, .features.deflate_on_oom.configured, .features.reporting.state]] == [["both1",true,true,"unknown"],["doom1",false,true,"unknown"],["fpr1",true,false,"unknown"],["none1",null,null,"unknown"],["plain1",false,false,"unknown"]]' "$out" >/dev/null
ok $? "verify --json: reporting and deflate_on_oom configured as the XML sets them, beside QEMU's verdict"
jq -e '.domains[0].features.sg | has("configured") | not' "$out" >/dev/null; ok $? "  no configured for a feature the XML does not set"
expect 0 "" -- -c "$FPRHOST" verify both1 doom1 none1
[ "$(awk '{print $1, $5, $7}' "$out" | tr '\n' '|')" = "NAME DEFLATE-ON-OOM REPORTING|both1 on on|doom1 on off|none1 unknown unknown|" ]
ok $? "verify table: DEFLATE-ON-OOM and REPORTING with the XML's setting: $(awk '{print $1, $5, $7}' "$out" | tr '\n' '|')"
expect 3 "verify: 'plain1': reporting is unknown: libvirt driver without QEMU monitor; the domain XML leaves it off ('balloonmgr -c $FPRHOST configure plain1 --free-page-reporting on' turns it on at the next start)" -- -c "$FPRHOST" verify --require reporting plain1
expect 3 "verify: 'both1': reporting is unknown: libvirt driver without QEMU monitor" -- -c "$FPRHOST" verify --require reporting both1
! grep -q "leaves it off" "$err"; ok $? "  no such hint for a domain whose XML turns it on"
expect 0 "" -- -c "$DEMO" verify web1
head -1 "$out" | grep -q '^NAME  SG  *IOEVENTFD  *STATS'; ok $? "verify table header"
expect 0 "" -- -c "$DEMO" status --json
jq -e '.domains[] | select(.name=="web1") | .sg == "not-probed" and (.sg_reason | startswith("not probed: "))' "$out" >/dev/null; ok $? "status --json without --probe: sg not-probed, and why"
expect 0 "" -- -c "$DEMO" status --json --probe
jq -e '.domains[] | select(.name=="web1") | .sg == "unknown" and .sg_reason == "libvirt driver without QEMU monitor"' "$out" >/dev/null; ok $? "status --json --probe has sg with its reason"
jq -e '.domains[] | select(.name=="legacy1") | .sg == "unknown" and .sg_reason == "domain not running"' "$out" >/dev/null; ok $? "status: shut-off domain sg unknown (not running)"

# --- configure (the test driver keeps changes for the connection only, and has no QEMU)
expect 0 "" -- -c "$DEMO" configure web1 --autodeflate on --stats-period 3
grep -qx "web1: memballoon autodeflate: unset -> on (persistent; applies on the next start)" "$out"; ok $? "configure prints the device change"
grep -qx "web1: stats period: 5 s -> 3 s (live and persistent)" "$out"; ok $? "configure prints the stats period change"
expect 2 "configure: 'legacy1': memballoon model is 'none': the domain has no balloon" -- -c "$DEMO" configure legacy1 --autodeflate on
expect 2 "configure: 'web1': device settings cannot change live" -- -c "$DEMO" configure web1 --live --sg on
expect 2 "configure: --sg 'maybe': expected on or off" -- -c "$DEMO" configure web1 --sg maybe
expect 2 "configure: --stats-period '-1': expected seconds" -- -c "$DEMO" configure web1 --stats-period=-1
expect 2 "configure: 'web1': nothing to change" -- -c "$DEMO" configure web1
expect 2 "configure: 'nope': no domain with this name, ID or UUID" -- -c "$DEMO" configure nope --autodeflate on
expect 1 "configure: 'batch1': --live: domain is not running" -- -c "$DEMO" configure batch1 --stats-period 2 --live
expect 3 "configure: 'web1': --sg is a QEMU device property and this domain has no QEMU (libvirt driver 'TEST': domain XML names no <emulator>); nothing changed" -- -c "$DEMO" configure web1 --sg on
[ ! -s "$out" ]; ok $? "  and changes nothing"

# --- policy check, run
expect 0 "" -- policy check "$ROOT"/policies/*.policy "$ROOT/demo/demo.policy"
[ "$(grep -c ': ok$' "$out")" -eq 4 ]; ok $? "every shipped policy passes policy check"
tmpd=$(mktemp -d)
printf '[guest]\nflor = 5%%\nfloor = 12X\n' >"$tmpd/bad.policy"
"$BM" policy check "$tmpd/bad.policy" >"$out" 2>"$err"; rc=$?
[ $rc -eq 2 ]; ok $? "policy check on a broken file exits 2"
grep -qx "balloonmgr: policy check: $tmpd/bad.policy:2:1: unknown key 'flor' in \[guest\] (did you mean 'floor'?)" "$err"; ok $? "  with file:line:col, after 'balloonmgr: policy check: '"
grep -qx "balloonmgr: policy check: $tmpd/bad.policy:3:9: floor: '12X': unknown unit 'X'" "$err"; ok $? "  and every error"
# '-': standard input, named <stdin> in messages
"$BM" policy check - <"$tmpd/bad.policy" >"$out" 2>"$err"; rc=$?
[ $rc -eq 2 ] && grep -qx "balloonmgr: policy check: <stdin>:3:9: floor: '12X': unknown unit 'X'" "$err"
ok_files $? "policy check -: reads standard input, its errors as <stdin>:LINE:COL (exit $rc)" "$err"
"$BM" policy check - "$ROOT/demo/demo.policy" <"$ROOT/policies/default.policy" >"$out" 2>"$err"; rc=$?
[ $rc -eq 0 ] && [ "$(cat "$out")" = "$(printf '<stdin>: ok\n%s: ok' "$ROOT/demo/demo.policy")" ]
ok_files $? "policy check - FILE: standard input and a file (exit $rc)" "$out" "$err"
printf '[guest]\nfloor = 25\n' | "$BM" policy check - >"$out" 2>"$err"; rc=$?
[ $rc -eq 0 ] && grep -q "^balloonmgr: policy check: <stdin>:2:9: warning: floor: '25' is 25 KiB" "$err" && grep -qx '<stdin>: ok, 1 warning(s)' "$out"
ok_files $? "policy check -: warnings too, in the one form (exit $rc)" "$out" "$err"
expect 2 "policy: expected 'check FILE...'" -- policy lint x
# a NUL byte: refused, as balloonmgr.policy(5) says in FORMAT and in ERRORS (one truth)
printf '[host]\nreclaim_below = 10%%\n\0\n[guest]\nflor = 5\n' >"$tmpd/nul.policy"
"$BM" policy check "$tmpd/nul.policy" >"$out" 2>"$err"; rc=$?
[ $rc -eq 2 ] && grep -q "^balloonmgr: policy check: $tmpd/nul.policy:3:1: " "$err"; ok_files $? "policy check on a file with a NUL byte exits 2 naming the line" "$err"
format=$(sed -n '/^# FORMAT/,/^# [A-Z]/p' "$ROOT/man/balloonmgr.policy.5.scd" | tr '\n' ' ')
errors=$(sed -n '/^# ERRORS/,/^# [A-Z]/p' "$ROOT/man/balloonmgr.policy.5.scd" | tr '\n' ' ')
! grep -qi 'NUL byte ends' <<<"$format" && grep -q 'NUL byte is refused' <<<"$format" &&
    grep -q 'NUL byte or invalid UTF-8 on a line is refused' <<<"$errors"
ok $? "balloonmgr.policy(5): FORMAT and ERRORS both say a NUL byte is refused"
"$BM" -c "$DEMO" run --once --policy "$tmpd/bad.policy" --state "$tmpd/s.json" >"$out" 2>"$err"; rc=$?
[ $rc -eq 2 ]; ok $? "run with a broken policy exits 2"
[ "$(tail -1 "$err")" = "balloonmgr: run: policy '$tmpd/bad.policy' has errors: nothing changed" ] && grep -qx "balloonmgr: run: $tmpd/bad.policy:3:9: floor: '12X': unknown unit 'X'" "$err"; ok $? "  lists the errors (as run's messages) and says nothing changed"
[ ! -e "$tmpd/s.json" ]; ok $? "  no state written"
expect 2 "" -- -c "$DEMO" run --once --policy "$tmpd/missing.policy"
expect 0 "" -- -c "$DEMO" run --once --dry-run --json --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$tmpd/s.json"
jq -e '(.decisions | length) == 7 and all(.decisions[]; (.reason | length) > 0 and .action != null)' "$out" >/dev/null; ok $? "run --dry-run --json: a decision and a reason per domain"
jq -e '.host.mode == "reclaim" and .dry_run and ([.decisions[] | select(.action == "inflate")] | length) == 2 and all(.decisions[]; .applied == null)' "$out" >/dev/null; ok $? "  reclaim, two inflates planned, nothing applied"
jq -e '(.decisions[] | select(.name == "web1") | .reason) | startswith("not inflated by the timer: ") and contains("cannot deflate itself (no deflate-on-oom) and nothing looks at it for 60 s")' "$out" >/dev/null; ok $? "  the timer leaves a guest without deflate-on-oom alone, with the reason"
jq -e '.decisions[] | select(.name == "db1") | .floor_bytes == 12884901888' "$out" >/dev/null; ok $? "  [domain \"db*\"] floor 75% of 16 GiB"
jq -e 'all(.decisions[]; (.short_of_memory | type) == "boolean" and (.inflate_yield_ratio | type) == "number" and .inflate_yield_ratio >= 0 and .inflate_yield_ratio <= 1)' "$out" >/dev/null; ok $? "  short_of_memory and inflate_yield_ratio (0..1) per decision"
[ ! -e "$tmpd/s.json" ]; ok $? "  dry run writes no state"
# domains where ballooning returns nothing to the host (VFIO, locked, hugepages): skipped
NORET="test://$ROOT/tests/data/host/no-return.xml"
expect 0 "" -- -c "$NORET" run --once --dry-run --json --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$tmpd/nr.json"
jq -e '[.decisions[] | select(.action == "skip") | .name] == ["gpu1","huge1","rt1"] and ([.decisions[] | select(.name == "usb1") | .action] == ["inflate"])' "$out" >/dev/null; ok $? "run: VFIO, locked and hugepage domains skipped, USB passthrough inflated"
jq -e '(.decisions[] | select(.name == "gpu1") | .reason) == "ballooning returns nothing to the host: VFIO passthrough (<hostdev>) pins its memory" and .host.unmet_bytes > 0' "$out" >/dev/null; ok $? "  with the reason, and the need they cannot meet is unmet"
expect 0 "" -- -c "$NORET" status
grep -qx "rt1: never inflated: ballooning returns nothing to the host: its memory is locked (<memoryBacking><locked/>)" "$out"; ok $? "status says which domains ballooning returns nothing for"
expect 0 "" -- -c "$NORET" status --json
jq -e '[.domains[] | .returns_nothing != null] == [true, true, true, false]' "$out" >/dev/null; ok $? "status --json: returns_nothing per domain"
expect 0 "" -- -c "$DEMO" run --once --json --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$tmpd/s.json"
jq -e '[.decisions[] | select(.action == "inflate") | .applied] == [true, true]' "$out" >/dev/null; ok $? "run --once applies the inflates"
jq -e '.version == 1 and .host_mode == "reclaim" and (.domains | length) == 5' "$tmpd/s.json" >/dev/null; ok $? "  and writes the state file"
echo '{"version": 1, "domains": [' >"$tmpd/s.json"
expect 0 "run: warning: state '$tmpd/s.json': not JSON (truncated); starting fresh (dry run: the file is left as it is)" -- -c "$DEMO" run --once --dry-run --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$tmpd/s.json"
[ "$(cat "$tmpd/s.json")" = '{"version": 1, "domains": [' ] && [ ! -e "$tmpd/s.json.corrupt" ]; ok $? "  dry run leaves the corrupt state as it is"
expect 0 "run: warning: state '$tmpd/s.json': not JSON (truncated); moved to '$tmpd/s.json.corrupt', starting fresh" -- -c "$DEMO" run --once --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$tmpd/s.json"
jq -e '.version == 1 and .counters.errors.state == 1' "$tmpd/s.json" >/dev/null; ok $? "  writes a fresh state, counting the error"
[ "$(cat "$tmpd/s.json.corrupt")" = '{"version": 1, "domains": [' ]; ok $? "  and keeps the corrupt one aside"
# .corrupt taken by a directory, a FIFO, a link: never replaced, the corrupt file never lost
for kind in dir fifo link; do
    d=$tmpd/aside-$kind
    mkdir -p "$d"
    echo '{"version": 1, "domains": [' >"$d/s.json"
    case $kind in dir) mkdir "$d/s.json.corrupt" ;; fifo) mkfifo "$d/s.json.corrupt" ;; link) ln -s "$d/target" "$d/s.json.corrupt" ;; esac
    expect 0 "run: warning: state '$d/s.json': not JSON (truncated); moved to '$d/s.json.corrupt.1', starting fresh" -- -c "$DEMO" run --once --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$d/s.json"
    [ "$(cat "$d/s.json.corrupt.1")" = '{"version": 1, "domains": [' ] && [ ! -e "$d/target" ] &&
        case $kind in dir) [ -d "$d/s.json.corrupt" ] ;; fifo) [ -p "$d/s.json.corrupt" ] ;; link) [ -L "$d/s.json.corrupt" ] ;; esac
    ok $? "  .corrupt a $kind: left alone, the corrupt file kept as .corrupt.1"
done
d=$tmpd/aside-full
mkdir -p "$d/s.json.corrupt"
for i in $(seq 99); do mkdir "$d/s.json.corrupt.$i"; done
echo '{"version": 1, "domains": [' >"$d/s.json"
expect 1 "run: state '$d/s.json': not JSON (truncated); cannot be moved aside (cannot rename: '$d/s.json.corrupt' is a directory and '$d/s.json.corrupt.1' to '.99' are taken): left as it is, never overwritten" -- -c "$DEMO" run --once --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$d/s.json"
[ "$(cat "$d/s.json")" = '{"version": 1, "domains": [' ]; ok $? "  every name taken: exit 1, the corrupt file never overwritten"
# a counter at 2^63-1 saturates: run twice, the file is read back both times
# (sed, not jq: jq's numbers are doubles, 2^63-1 would be rounded up past it)
sed -E 's/"passes": ?[0-9]+/"passes":9223372036854775807/; s/"state": ?[0-9]+/"state":9223372036854775807/' "$tmpd/s.json" >"$tmpd/max.json"
grep -Eq '"passes": ?9223372036854775807' "$tmpd/max.json" && grep -Eq '"state": ?9223372036854775807' "$tmpd/max.json"; ok $? "a state file with counters at 2^63-1"
expect 0 "" -- -c "$DEMO" run --once --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$tmpd/max.json"
expect 0 "" -- -c "$DEMO" run --once --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$tmpd/max.json"
grep -Eq '"passes": ?9223372036854775807,' "$tmpd/max.json" && grep -Eq '"state": ?9223372036854775807,' "$tmpd/max.json" &&
    [ ! -e "$tmpd/max.json.corrupt" ]
ok $? "counters at 2^63-1 stay there across runs (never overflow, never reset)" "$(grep '"passes"' "$tmpd/max.json")"
echo x >"$tmpd/file"
expect 1 "run: state '$tmpd/file/s.json': cannot write: Not a directory" -- -c "$DEMO" run --once --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$tmpd/file/s.json"
cp "$tmpd/s.json" "$tmpd/s.json.tmp.balloonmgr-AAAAAA"
cp "$tmpd/s.json" "$tmpd/s.json.tmp.backup"
touch -d '-1 min' "$tmpd/s.json.tmp.balloonmgr-AAAAAA" "$tmpd/s.json.tmp.backup"
expect 0 "run: state '$tmpd/s.json': removed 1 temporary file(s) left by interrupted writes" -- -c "$DEMO" run --once --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$tmpd/s.json"
[ ! -e "$tmpd/s.json.tmp.balloonmgr-AAAAAA" ] && [ -e "$tmpd/s.json.corrupt" ] && [ -e "$tmpd/s.json.tmp.backup" ]; ok $? "  only the temporary file (a user's s.json.tmp.backup stays)"
expect 2 "run: --proc '$tmpd/nope': No such file or directory" -- -c "$DEMO" run --once --proc "$tmpd/nope" --state "$tmpd/s.json"
rm -rf "$tmpd"

# --- agent: bad options, then a real one on the demo host
expect 2 "agent: --listen 'nowhere': expected ADDR:PORT" -- -c "$DEMO" agent --listen nowhere
expect 2 "agent: --listen '127.0.0.1:99999': port '99999' is not a number from 0 to 65535" -- -c "$DEMO" agent --listen 127.0.0.1:99999
expect 2 "run: --textfile and --push go with --once" -- -c "$DEMO" run --textfile /tmp
tmpd=$(mktemp -d)
agent_start "$tmpd/agent.log" "$BM" -c "$DEMO" agent --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --listen 127.0.0.1:0 --state "$tmpd/agent.json"
ok_files $? "agent --listen 127.0.0.1:0 serves on a free port ($agent_addr)" "$tmpd/agent.log"
port=$agent_port
first_pass() { curl -sf "127.0.0.1:$port/metrics" >"$out" 2>/dev/null && grep -q '^balloonmgr_passes_total 1' "$out"; }
agent_wait first_pass
grep -q '^balloonmgr_libvirt_up 1$' "$out"; ok $? "agent on the demo host serves /metrics"
grep -q '^balloonmgr_domain_info{domain="web1",uuid="3b1e2a50-6d1f-4a0e-9a51-000000000001",state="running",sg="unknown",ioeventfd="unknown"} 1$' "$out"; ok $? "  domain_info with uuid, state and sg"
if command -v promtool >/dev/null; then promtool check metrics <"$out" >/dev/null 2>&1; ok $? "  promtool check metrics is clean"; fi
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "127.0.0.1:$port/metrics")" = 405 ]; ok $? "  POST /metrics: 405"
[ "$(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$port/secret")" = 404 ]; ok $? "  GET /secret: 404"
[ "$(curl -s -o /dev/null -w '%{http_code}' -I "127.0.0.1:$port/metrics")" = 200 ]; ok $? "  HEAD /metrics: 200"
agent_stop; ok $? "  SIGTERM: exit 0"
jq -e '.version == 1 and .counters.passes >= 1 and (.domains | length) == 5' "$tmpd/agent.json" >/dev/null; ok $? "  and the agent saved its state"
rm -rf "$tmpd"

# --- every verb has --help
for v in list status set verify configure run policy agent; do
    expect 0 "" -- "$v" --help
    grep -q "^Usage: balloonmgr $v" "$out"; ok $? "$v --help"
done

tap_done
