#!/usr/bin/env bash
# The bad-input table (tests/data/bad-input.tsv): every row's input, its exit status (or HTTP
# status) and its message; a crash or a sanitizer report fails the row. One TAP line per row.
# Usage: test-bad-input.sh BALLOONMGR SOURCE_ROOT TEST_QMP RAW_CLIENT ROW_RUNNER
#        ['CLASS...' | 'not CLASS...']
# (only the rows of those classes, or of every class but those; default every row)
# About 450 rows, one balloonmgr each. With ROW_RUNNER (tests/row-runner.c) a row is a fork of
# that process, which has balloonmgr's main compiled in (about 75 ms a row under ASan instead
# of 150: no exec, no loading of libvirt's libraries); with ROW_RUNNER '' it is an exec of
# BALLOONMGR under timeout(1). The checks are in bash, with no other process unless a row fails.
set -u
BM=$1
ROOT=$2
TEST_QMP=$3
RAW_CLIENT=$4
ROW_RUNNER=$5
CLASSES=${6:-}
# in_classes CLASS: whether this run takes that class's rows
in_classes() {
    case $CLASSES in
    '') return 0 ;;
    'not '*) [[ " ${CLASSES#not } " != *" $1 "* ]] ;;
    *) [[ " $CLASSES " == *" $1 "* ]] ;;
    esac
}
TABLE=$ROOT/tests/data/bad-input.tsv
. "$ROOT/tests/tap.sh"
. "$ROOT/tests/agent.sh"

T=$(mktemp -d)
# keep set away from the system's /run/balloonmgr
export BALLOONMGR_RUNTIME_DIR=$T/run
mkdir -p "$T/run" "$T/dir"
: >"$T/empty.policy"
printf '\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe\n[host]\x00\n' >"$T/binary.policy"
printf 'a\0b = 1\n' >"$T/nul.policy"
# fail closed, bounded: web configs and policies not read in full or with thousands of errors
HASH='$2y$06$qvgJh/M1aEa1hNWRpZ.UtutuUBDvwg92FKESHEBH4JZGwSdMsUHpK' # secret
printf 'tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n\0\nbasic_auth_users:\n  alice: %s\n' "$HASH" >"$T/web-nul.yml"
printf 'basic_auth_users:\n  alice: $2y$31$qvgJh/M1aEa1hNWRpZ.UtutuUBDvwg92FKESHEBH4JZGwSdMsUHpK\n' >"$T/web-cost.yml"
printf 'basic_auth_users:\n  alice: %s\n' "$HASH" >"$T/web-auth.yml"
for i in $(seq 5000); do echo "k$i: 1"; done >"$T/web-many.yml"
{ echo '[host]'; for i in $(seq 5000); do echo "bogus$i = 1"; done; } >"$T/many.policy"
printf '[host]\n# caf\xff\n' >"$T/utf8.policy"
printf '[host]\nreclaim_below = 2G\n' >"$T/mixed.policy"
# /proc trees with what a kernel never writes
for d in nan inf hex unit over nokey; do mkdir -p "$T/proc-$d/pressure"; cp "$ROOT/demo/proc/meminfo" "$T/proc-$d/"; done
printf 'some avg10=nan avg60=0.00 avg300=0.00 total=0\n' >"$T/proc-nan/pressure/memory"
printf 'some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=inf avg60=0.00 avg300=0.00 total=0\n' >"$T/proc-inf/pressure/memory"
printf 'MemTotal:       0x1000000 kB\nMemAvailable:   100 kB\n' >"$T/proc-hex/meminfo"
printf 'MemTotal:       16 GB\nMemAvailable:   100 kB\n' >"$T/proc-unit/meminfo"
printf 'MemTotal:       1000 kB\nMemAvailable:   2000 kB\n' >"$T/proc-over/meminfo"
printf 'MemFree:        1000 kB\n' >"$T/proc-nokey/meminfo"
# a state file whose count overflowed
printf '{"version":1,"domains":[],"counters":{"passes":18446744073709551616}}\n' >"$T/overflow.json"
# numbers a state file never carries: a negative or infinite latency sum, a sum without a
# count, a negative duration; and more domains than a host runs
B0='"buckets":[1,0,0,0,0,0,0,0,0,0,0,0,0,0]'
printf '{"version":1,"domains":[],"counters":{"latency":[{"direction":"inflate","sg":"unknown",%s,"sum":-1000000000}]}}\n' "$B0" >"$T/sum-negative.json"
printf '{"version":1,"domains":[],"counters":{"latency":[{"direction":"inflate","sg":"unknown",%s,"sum":1e999}]}}\n' "$B0" >"$T/sum-inf.json"
printf '{"version":1,"domains":[],"counters":{"latency":[{"direction":"inflate","sg":"unknown","buckets":[0,0,0,0,0,0,0,0,0,0,0,0,0,0],"sum":3}]}}\n' >"$T/sum-nocount.json"
printf '{"version":1,"domains":[],"counters":{"last_pass_duration_s":-7}}\n' >"$T/duration-negative.json"
{ printf '{"version":1,"domains":['; for i in $(seq 16385); do printf '{"uuid":"u%d"},' "$i"; done; printf '{"uuid":"last"}]}\n'; } >"$T/many-domains.json"

# the "files" group: @T@/f/KIND for every kind of path that is not a readable regular file of
# a sane size (see the table's header)
F=$T/f
mkdir -p "$F/dir" "$F/notdir"
mkfifo "$F/fifo"
# a socket (bash cannot bind one)
"$RAW_CLIENT" --unix "$F/sock"
ln -s /dev/zero "$F/zero-link"
ln -s /dev/null "$F/null-link"
ln -s "$F/fifo" "$F/fifo-link"
: >"$F/empty"
echo x >"$F/unreadable"
chmod 000 "$F/unreadable"
# over the caps, sparse: policy 16 MiB, state 64 MiB, web config and PEM files 1 MiB
truncate -s $((16 * 1024 * 1024 + 1)) "$F/over-16M"
truncate -s $((64 * 1024 * 1024 + 1)) "$F/over-64M"
truncate -s $((1024 * 1024 + 1)) "$F/over-1M"
# the state file of a test, for the rows that write it
cp "$F/over-64M" "$F/state-over-64M"
# --proc directories whose meminfo (or pressure/memory) is each kind
for k in dir fifo zero-link empty unreadable over; do
    mkdir -p "$F/proc-$k/pressure"
    cp "$ROOT/demo/proc/pressure/memory" "$F/proc-$k/pressure/memory"
done
mkdir "$F/proc-dir/meminfo"
mkfifo "$F/proc-fifo/meminfo"
ln -s /dev/zero "$F/proc-zero-link/meminfo"
: >"$F/proc-empty/meminfo"
cp "$ROOT/demo/proc/meminfo" "$F/proc-unreadable/meminfo"
chmod 000 "$F/proc-unreadable/meminfo"
truncate -s $((64 * 1024 + 1)) "$F/proc-over/meminfo"
mkdir -p "$F/proc-psi-fifo/pressure"
cp "$ROOT/demo/proc/meminfo" "$F/proc-psi-fifo/meminfo"
mkfifo "$F/proc-psi-fifo/pressure/memory"
# web configs whose cert_file is each kind (the key is good)
for k in missing dir fifo zero-link empty unreadable over-1M; do
    printf 'tls_server_config:\n  cert_file: %s\n  key_file: %s\n' "$F/$k" \
        "$ROOT/tests/data/webconfig/load/key.pem" >"$F/wc-cert-$k.yml"
done
# --textfile directories where balloonmgr.prom is each kind
for k in dir fifo null-link; do mkdir -p "$F/tf-$k"; done
mkdir "$F/tf-dir/balloonmgr.prom"
mkfifo "$F/tf-fifo/balloonmgr.prom"
ln -s /dev/null "$F/tf-null-link/balloonmgr.prom"
# spools (BALLOONMGR_RUNTIME_DIR=@T@/f/spool-*): entries of every kind, and directories that
# are not safe to use
mkdir -p "$F/spool-bad/changes" "$F/spool-open/changes" "$F/spool-fifo"
chmod 700 "$F/spool-bad/changes"
mkfifo "$F/spool-bad/changes/fifo00.json"
ln -s /dev/zero "$F/spool-bad/changes/zero00.json"
mkdir "$F/spool-bad/changes/dir000.json"
truncate -s 5000 "$F/spool-bad/changes/big000.json"
chmod 777 "$F/spool-open/changes"
mkfifo "$F/spool-fifo/changes"
# a change measured on test:///default, left for a reader of that connection
printf '{"uri": "test:///default", "uuid": "6695eb01-f6a4-8304-79aa-97f2502e193f", "name": "test", "sg": "unknown", "from_bytes": 2147483648, "target_bytes": 1073741824, "reached_bytes": 1073741824, "outcome": 0, "duration_ns": 3139}' \
    >"$F/spool-bad/changes/other0.json"
# the commands that run as a user that permissions apply to (root reads anything)
as_user=()
[ "$(id -u)" -eq 0 ] && as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
chmod 755 "$T"
out=$T/out err=$T/err
apid=""
aapid="" aport=""
cleanup() {
    [ -n "$apid" ] && kill -TERM "$apid" 2>/dev/null && wait "$apid" 2>/dev/null
    [ -n "$aapid" ] && kill -TERM "$aapid" 2>/dev/null && wait "$aapid" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

LONG=$(printf '%05000d' 0 | tr 0 a)
LONG_CUT="$(printf '%0508d' 0 | tr 0 a)..."
HUGE=$(printf '%0100000d' 0 | tr 0 a)
port=""

# subst TEXT: the placeholders replaced (@VAR@ -> value), in $REPLY (no subshell)
subst() {
    local s=$1
    s=${s//@DEMO@/test://$ROOT/demo/host.xml}
    s=${s//@ROOT@/$ROOT}
    s=${s//@T@/$T}
    s=${s//@URL@/http://127.0.0.1:$port}
    s=${s//@LONG_CUT@/$LONG_CUT}
    s=${s//@LONG@/$LONG}
    s=${s//@HUGE@/$HUGE}
    s=${s//@KEY@/$ROOT/tests/data/webconfig/load/key.pem}
    REPLY=$s
}

# message_ok SPEC TEXT FILE: does TEXT (FILE's lines, stderr's messages) match the message
# column? TEXT ends in a newline unless empty.
message_ok() {
    local spec=$1 text=$2 file=$3
    case $spec in
    -) [ -z "$text" ] ;;
    '~'*) subst "${spec#\~}"; [[ $text == *"$REPLY"* ]] ;;
    '='*) subst "${spec#=}"; [ "$text" = "$REPLY"$'\n' ] ;;
    '<'*)
        local rel=${spec#<}
        printf '%s' "$text" | sed "s|^balloonmgr: policy check: $ROOT/tests/data/${rel%%/*}/||" |
            cmp -s - "$ROOT/tests/data/$rel" ;;
    *) subst "$spec"; [[ $'\n'$text == *$'\n'"$REPLY"$'\n'* ]] ;;
    esac
}

# sane STATUS TEXT: no crash, no sanitizer report in TEXT (what balloonmgr wrote on stderr)
sane() {
    [ "$1" -lt 128 ] && [[ $2 != *Sanitizer* && $2 != *"runtime error:"* && $2 != *"Segmentation fault"* ]]
}

# --- rows that run balloonmgr
run_cli_row() {
    local class=$1 input=$2 want=$3 msg=$4
    local -a args envs=() user=()
    subst "$input"
    eval "args=($REPLY)"
    # leading NAME=VALUE words: the command's environment; @USER@: run as a user (not root)
    while [ "${#args[@]}" -gt 0 ]; do
        case ${args[0]} in
        @USER@) user=("${as_user[@]}") ;;
        [A-Z_]*=*) envs+=("${args[0]}") ;;
        *) break ;;
        esac
        args=("${args[@]:1}")
    done
    # a hang fails the row (124) instead of blocking the suite
    local got
    if [ -n "$ROW_RUNNER" ]; then
        got=-1 # unless row-runner answers
        if [ -n "${RUNNER[1]:-}" ]; then
            printf '%s\0' "$((${#user[@]} > 0))" "$out" "$err" "${#envs[@]}" "${envs[@]}" \
                "${#args[@]}" "${args[@]}" >&"${RUNNER[1]}"
            read -r got <&"${RUNNER[0]}"
        else
            : >"$err" # (the runner exited: no stderr of an earlier row shown as this one's)
        fi
    elif [ ${#envs[@]} -gt 0 ]; then
        env "${envs[@]}" "${user[@]}" timeout 20 "$BM" "${args[@]}" </dev/null >"$out" 2>"$err"
        got=$?
    else
        "${user[@]}" timeout 20 "$BM" "${args[@]}" </dev/null >"$out" 2>"$err"
        got=$?
    fi
    local good=1
    messages "$err"
    [ "$got" -eq "$want" ] && message_ok "$msg" "$REPLY" "$err" && sane "$got" "$ALL" && good=0
    if [ $good -eq 0 ]; then
        ok 0 "$class: balloonmgr $input -> exit $want (got $got), says: $msg"
    else
        ok 1 "$class: balloonmgr $input -> exit $want (got $got), says: $msg" "stderr:" "$ALL"
    fi
}

# --- rows that talk HTTP to the agent
# start_agent [ARGS...]: on a free port, with ARGS (e.g. --web-config FILE); sets port, apid once
# its first pass is served. With a web config, its user is alice/secret.
served_pass() {
    curl -sf -u alice:secret "http://127.0.0.1:$agent_port/metrics" 2>/dev/null | grep -q '^balloonmgr_passes_total [1-9]'
}
start_agent() {
    agent_start "${AGENT_LOG:-$T/agent.err}" "$BM" -c "test://$ROOT/demo/host.xml" agent --policy "$ROOT/demo/demo.policy" \
        --proc "$ROOT/demo/proc" --state "${AGENT_STATE:-$T/agent-state.json}" --listen 127.0.0.1:0 "$@" || return 1
    port=$agent_port apid=$agent_pid
    agent_pid="" # stopped by this script (two at once)
    _agent_poll "$apid" served_pass
}

# raw FORMAT: sends printf FORMAT on a new connection, then ends its side (shutdown SHUT_WR:
# the server sees the request end, answers what it answers and closes); the answer, up to the
# close, goes to $out. No fixed wait: 'none' is a close without an answer (raw-client's 20 s
# are only a guard against a server that never closes).
raw() {
    : >"$out"
    # shellcheck disable=SC2059  # the table's input is the format
    printf "$1" | "$RAW_CLIENT" "$port" >"$out" 2>/dev/null
    return 0
}

run_http_row() {
    local input=$1 want=$2 msg=$3 got
    local -a args
    local line
    subst "$input"
    eval "args=($REPLY)"
    : >"$out"
    case ${args[0]} in
    curl)
        got=$(curl -s -i --max-time 5 -o "$out" -w '%{http_code}' "${args[@]:1}" 2>/dev/null)
        [ "$got" = 000 ] && got=none ;;
    raw)
        raw "${args[1]}"
        got=none
        IFS= read -r line <"$out"
        [[ $line =~ ^HTTP/1\.[01]\ ([0-9][0-9][0-9]) ]] && got=${BASH_REMATCH[1]} ;;
    esac
    local good=1
    [ "$got" = "$want" ] && { [ "$msg" = - ] || grep -qF -- "$msg" "$out"; } &&
        kill -0 "$apid" 2>/dev/null && good=0
    if [ $good -eq 0 ]; then
        ok 0 "http: ${input:0:120} -> $want (got $got)${msg:+, answer has: $msg}"
    else
        ok 1 "http: ${input:0:120} -> $want (got $got)${msg:+, answer has: $msg}" \
            "answer:" "$(head -c 600 "$out")" "agent stderr:" "$(tail -5 "$T/agent.err")"
    fi
}

# --- the qmp row: test-qmp replays tests/data/qmp/bad.txt; one TAP line per bad.txt row
run_qmp_row() {
    local want=$1 msg=$2
    "$TEST_QMP" >"$out" 2>"$err"
    local got=$?
    local good=1
    [ "$got" -eq "$want" ] && sane "$got" "$err" && good=0
    ok $good "qmp: test-qmp exits $want (got $got)" "$(grep -v '^ok' "$out")"
    local list=$ROOT/tests/data/${msg#<}
    [ -r "$list" ]
    ok $? "qmp: the list of bad replies $list is there"
    while IFS=$'\t' read -r file errno reason; do
        case $file in '#'* | '') continue ;; esac
        grep -q "^ok [0-9]* - $file refused with $errno " "$out" && grep -q "^ok [0-9]* - $file reason$" "$out"
        ok $? "qmp: $file ($list) refused with $errno: $reason" "$(grep -F "$file" "$out")"
    done <"$list"
}

# the row runner starts once, with this script's environment and directory
[ -z "$ROW_RUNNER" ] || coproc RUNNER { exec "$ROW_RUNNER"; }
while IFS=$'\t' read -r class input want msg; do
    case $class in '#'* | '') continue ;; esac
    in_classes "$class" || continue
    case $class in
    http)
        if [ -z "$apid" ]; then
            start_agent
            ok_files $? "http: agent on the demo host serves /metrics" "$T/agent.err"
        fi
        run_http_row "$input" "$want" "$msg" ;;
    http-auth)
        # an agent with basic_auth_users (alice/secret), beside the plain one
        plain_port=$port plain_apid=$apid
        if [ -z "$aapid" ]; then
            # its own state file: one writer per state (the other agent holds its lock)
            AGENT_LOG=$T/agent-auth.err AGENT_STATE=$T/agent-auth-state.json start_agent --web-config "$T/web-auth.yml"
            ok_files $? "http-auth: agent with basic auth serves /metrics" "$T/agent-auth.err"
            aport=$port aapid=$apid
        fi
        port=$aport apid=$aapid
        run_http_row "$input" "$want" "$msg"
        port=$plain_port apid=$plain_apid ;;
    qmp) run_qmp_row "$want" "$msg" ;;
    *) run_cli_row "$class" "$input" "$want" "$msg" ;;
    esac
done <"$TABLE"

# the files group replaced, renamed or removed nothing that is not the program's
if [ -d "$F" ] && in_classes files; then
    [ -c /dev/null ] && [ -c /dev/zero ] && [ -p "$F/fifo" ] && [ -L "$F/null-link" ] &&
        [ -L "$F/zero-link" ] && [ -d "$F/dir" ] && [ ! -e "$F/fifo.corrupt" ] &&
        [ ! -e "$F/null-link.corrupt" ] && [ ! -e "$F/dir.corrupt" ] && [ ! -e /dev/null.corrupt ]
    ok $? "files: nothing replaced: /dev/null and /dev/zero are devices, the FIFO, links and directory are as they were"
    [ -p "$F/tf-fifo/balloonmgr.prom" ] && [ -L "$F/tf-null-link/balloonmgr.prom" ] &&
        [ -d "$F/tf-dir/balloonmgr.prom" ]
    ok $? "files: --textfile replaced no FIFO, link or directory"
    [ -p "$F/spool-bad/changes/fifo00.json" ] && [ -L "$F/spool-bad/changes/zero00.json" ] &&
        [ -d "$F/spool-bad/changes/dir000.json" ] && [ -f "$F/spool-bad/changes/big000.json" ] &&
        [ -f "$F/spool-bad/changes/other0.json" ] && [ -p "$F/spool-fifo/changes" ]
    ok $? "files: the spool's FIFO, link, directory, oversized file and another connection's change are left alone" \
        "$(ls -la "$F/spool-bad/changes")"
fi

# after every bad request the agent still serves, and stops cleanly
if [ -n "$apid" ]; then
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/metrics")" = 200 ]
    ok $? "http: the agent still serves /metrics after the bad requests"
    kill -TERM "$apid"
    wait "$apid"
    st=$?
    apid=""
    [ "$st" -eq 0 ] && sane "$st" "$T/agent.err"
    ok $? "http: SIGTERM: the agent exits 0 (got $st), no sanitizer report" "$(tail -20 "$T/agent.err")"
fi

if [ -n "$aapid" ]; then
    kill -TERM "$aapid"
    wait "$aapid"
    st=$?
    aapid=""
    [ "$st" -eq 0 ] && sane "$st" "$T/agent-auth.err"
    ok $? "http-auth: SIGTERM: the agent exits 0 (got $st), no sanitizer report" "$(tail -20 "$T/agent-auth.err")"
fi

tap_done
