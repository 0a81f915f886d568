#!/usr/bin/env bash
# No leaks and no memory errors (issue #8 item 2) in status, status --json, run --once, list,
# set --wait, policy check, and an agent that is scraped, reloaded with a good and a broken
# policy, and stopped with SIGTERM. One TAP line per run.
#
# Usage: test-leaks.sh BALLOONMGR SOURCE_ROOT [SANITIZE]
#   SANITIZE: meson's b_sanitize ('none' when absent). 'none': the binary runs under valgrind
#   (--leak-check=full; a definite or indirect leak or any memory error fails). Otherwise the
#   binary is instrumented: it runs natively and LeakSanitizer checks for leaks at exit.
# Environment:
#   BM_LEAK_URI     libvirt URI (default: the demo host on the test driver). On another URI
#                   nothing is changed: run and agent are --dry-run, set moves by +0.
#   BM_LEAK_DOMAIN  the domain for set (default: web1 on the demo host, else the first running
#                   domain of 'list')
#   BM_LEAK_VALGRIND  valgrind command (default: valgrind)
#   BM_LEAK_WRITE   1: changes are allowed on BM_LEAK_URI too (a test's own guests): run and
#                   agent apply, set moves by -16M (tests/integration/test-leaks-real.sh)
#   BM_LEAK_POLICY, BM_LEAK_PROC  policy and fake /proc of run and agent (default: the demo's)
set -u
BM=$1
ROOT=$2
SANITIZE=${3:-none}
. "$ROOT/tests/tap.sh"
. "$ROOT/tests/agent.sh"

DEMO="test://$ROOT/demo/host.xml"
URI=${BM_LEAK_URI:-$DEMO}
T=$(mktemp -d)
export BALLOONMGR_RUNTIME_DIR=$T/run # keep set --wait's spool away from /run/balloonmgr
mkdir -p "$T/run"
apid=""
cleanup() {
    [ -n "$apid" ] && kill -KILL "$apid" 2>/dev/null && wait "$apid" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

if [ "$SANITIZE" = none ]; then
    mode=valgrind
    VALGRIND=${BM_LEAK_VALGRIND:-valgrind}
    if ! command -v "${VALGRIND%% *}" >/dev/null; then
        tap_skip_all "valgrind is not installed (tools/install-deps.sh test)"
    fi
else
    mode=lsan
    # LeakSanitizer is part of ASan; make sure it is on, whatever meson's defaults
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1
fi

# On a real host nothing may change: dry runs, and set by +0.
POLICY=${BM_LEAK_POLICY:-$ROOT/demo/demo.policy}
PROC=${BM_LEAK_PROC:-$ROOT/demo/proc}
if [ "$URI" = "$DEMO" ]; then
    dry=()
    set_size=-512M
    domain=${BM_LEAK_DOMAIN:-web1}
else
    dry=(--dry-run)
    set_size=+0
    [ "${BM_LEAK_WRITE:-0}" = 1 ] && dry=() set_size=-16M
    domain=${BM_LEAK_DOMAIN:-$("$BM" -c "$URI" list 2>/dev/null | head -1)}
fi


# launch LOG -- ARGS...: runs balloonmgr in the background (under valgrind, or natively) with its
# stderr (and valgrind's report) in LOG; sets $pid
launch() {
    local log=$1
    shift 2
    if [ $mode = valgrind ]; then
        # --error-exitcode: any memory error, or a definite/indirect leak, makes the exit 99
        $VALGRIND --leak-check=full --show-leak-kinds=definite,indirect,possible \
            --errors-for-leak-kinds=definite,indirect --error-exitcode=99 --num-callers=40 \
            --suppressions="$ROOT/tests/valgrind.supp" --log-file="$log.vg" \
            "$BM" "$@" >"$log.out" 2>"$log" </dev/null &
    else
        "$BM" "$@" >"$log.out" 2>"$log" </dev/null &
    fi
    pid=$!
}

# verdict LOG STATUS WANT DESCRIPTION: one TAP line; the leak summary as a diagnostic
verdict() {
    local log=$1 got=$2 want=$3 what=$4 good=1 summary
    if [ $mode = valgrind ]; then
        cat "$log.vg" >>"$log"
        summary=$(grep -oE '(definitely|indirectly|possibly) lost: [0-9,]+ bytes|ERROR SUMMARY: [0-9,]+ errors' "$log.vg" | tr '\n' ' ')
        [ "$got" -eq "$want" ] &&
            grep -q 'ERROR SUMMARY: 0 errors' "$log.vg" &&
            ! grep -qE '(definitely|indirectly) lost: [1-9]' "$log.vg" &&
            ! grep -qE 'Invalid (read|write|free)|uninitialised|Mismatched free' "$log.vg" && good=0
    else
        summary=$(grep -oE 'SUMMARY: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer).*' "$log" | head -1)
        [ "$got" -eq "$want" ] && ! grep -qE 'Sanitizer|runtime error:' "$log" && good=0
    fi
    ok $good "$mode: $what: exit $want (got $got), no leak, no memory error" "$(tail -60 "$log" 2>/dev/null)"
    echo "#   ${summary:-no sanitizer report}"
}

# check WANT DESCRIPTION -- ARGS...: one run of balloonmgr to its end
check() {
    local want=$1 what=$2
    shift 3
    local log=$T/log.$tap_n
    launch "$log" -- "$@"
    wait "$pid"
    verdict "$log" $? "$want" "$what"
}

start=$(date +%s)
echo "# $mode on $URI"
check 0 "status" -- -c "$URI" status
check 0 "status --json" -- -c "$URI" status --json
check 0 "list" -- -c "$URI" list
check 0 "list --all" -- -c "$URI" list --all
check 0 "run --once" -- -c "$URI" run --once "${dry[@]}" --policy "$POLICY" \
    --proc "$PROC" --state "$T/state.json"
check 0 "run --once --json --textfile (a second pass, with the state of the first)" -- \
    -c "$URI" run --once "${dry[@]}" --json --policy "$POLICY" \
    --proc "$PROC" --state "$T/state.json" --textfile "$T"
if [ -n "$domain" ]; then
    check 0 "set $domain $set_size --wait" -- -c "$URI" set "$domain" "$set_size" --wait=60
    check 0 "set $domain $set_size --wait --json" -- -c "$URI" set "$domain" "$set_size" --wait=60 --json
else
    ok 1 "set: no running domain on $URI (BM_LEAK_DOMAIN)"
fi
if [ "$URI" != "$DEMO" ] && [ -n "$domain" ]; then
    # the QEMU monitor paths: libvirt's test driver has none
    check 0 "verify $domain (QMP)" -- -c "$URI" verify "$domain"
    check 0 "verify --json $domain (QMP)" -- -c "$URI" verify --json "$domain"
fi
check 0 "policy check (shipped policies)" -- policy check "$ROOT"/policies/*.policy "$ROOT/demo/demo.policy"
check 2 "policy check (a file with many errors, a missing file)" -- policy check \
    "$ROOT/tests/data/policy/bad/many-errors.policy" "$T/missing.policy"
check 2 "set with a bad size (an error path)" -- -c "$URI" set "${domain:-nope}" 12X
check 2 "status of an unknown domain (an error path)" -- -c "$URI" status "${domain:-web1}" nope-no-such-domain

# --- the agent: scrapes, a reload with a good policy and one with a broken policy, SIGTERM
cp "$POLICY" "$T/agent.policy"
log=$T/log.agent
agent_ok=1
launch "$log" -- -c "$URI" agent "${dry[@]}" --policy "$T/agent.policy" --state "$T/agent-state.json" \
    --proc "$PROC" --listen 127.0.0.1:0
apid=$pid
port=""
# under valgrind the first pass takes a few seconds
first_pass() {
    [ -n "$port" ] || port=$(agent_addr_in "$log" | sed 's/.*://')
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/metrics" 2>/dev/null | grep -q '^balloonmgr_passes_total [1-9]'
}
_agent_poll "$apid" first_pass && agent_ok=0
ok $agent_ok "agent: first pass done, serving on 127.0.0.1:$port" "$(tail -60 "$log" 2>/dev/null)"
if [ $agent_ok -eq 0 ]; then
    scrapes=0
    for _ in 1 2 3 4 5; do
        curl -sf -o /dev/null "http://127.0.0.1:$port/metrics" && scrapes=$((scrapes + 1))
        curl -sf -o /dev/null "http://127.0.0.1:$port/" && scrapes=$((scrapes + 1))
    done
    curl -s -o /dev/null "http://127.0.0.1:$port/nope"     # 404
    curl -s -o /dev/null -X POST "http://127.0.0.1:$port/" # 405
    curl -s -o /dev/null -d x "http://127.0.0.1:$port/metrics" # 413
    [ $scrapes -eq 10 ]
    ok $? "agent: 10 scrapes of /metrics and / answered (got $scrapes)"

    kill -HUP "$apid"
    _agent_poll "$apid" grep -q 'reloaded' "$log"
    grep -q "policy $T/agent.policy reloaded" "$log"
    ok $? "agent: SIGHUP with a good policy: reloaded" "$(tail -60 "$log" 2>/dev/null)"

    printf '[guest]\nflor = 5%%\n' >"$T/agent.policy"
    kill -HUP "$apid"
    _agent_poll "$apid" grep -q 'not reloaded' "$log"
    grep -q "not reloaded: keeping the last good one" "$log"
    ok $? "agent: SIGHUP with a broken policy: the last good one kept" "$(tail -60 "$log" 2>/dev/null)"

    curl -sf -o /dev/null "http://127.0.0.1:$port/metrics"
    ok $? "agent: still serving after the reloads"

    kill -TERM "$apid"
    wait "$apid"
    st=$?
    apid=""
    verdict "$log" $st 0 "agent (scrapes, 2 reloads, SIGTERM)"
fi

diag "$mode: $tap_n checks in $(($(date +%s) - start)) s"
tap_done
