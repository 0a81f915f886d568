#!/usr/bin/env bash
# The state file when its file system fails, on libvirt's test driver (no libvirtd):
# - full (a 64 KiB tmpfs filled up): a short write then ENOSPC; ENOSPC at fsync and EDQUOT at
#   close (strace fault injection); read-only (remount ro); a directory the user may not write:
#   run --once exits 1 with one message naming the file and the reason, the previous file is
#   byte-identical (sha256) and still reads without a warning, no temporary file is left;
# - the agent with a full, then read-only state directory: keeps serving /metrics, counts
#   errors_total{kind="state"} every pass, says so once per reason (not every pass); once the
#   file system has room again the next pass saves and says so.
# Needs root (mounts); everything it mounts is unmounted by exact mount point.
set -euo pipefail
. "$(dirname "$0")/lib/lib.sh"
BM=${BALLOONMGR:?set BALLOONMGR to the balloonmgr binary}
ROOT=${BM_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
[ "$(id -u)" -eq 0 ] || bm_skip "test-state-faults needs root (tmpfs mounts)"
command -v jq >/dev/null || bm_skip "jq is needed"

BM_WORKDIR=$(mktemp -d /tmp/bm-state-faults.XXXXXX)
work=$BM_WORKDIR
mnt=$work/mnt
bm_cleanup_at_exit
bm_add_cleanup "! mountpoint -q '$mnt' || umount '$mnt'"

export BALLOONMGR_RUNTIME_DIR=$work/run
uri="test://$ROOT/demo/host.xml"
state=$mnt/state.json
mkdir -p "$mnt"
mount -t tmpfs -o size=64k,mode=0755 bm-state-faults "$mnt"

run_once() { # run_once STATE [balloonmgr run options...]: sets rc, stderr in $work/err
    local s=$1; shift
    set +e
    "$BM" -c "$uri" run --once --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" \
        --state "$s" "$@" >"$work/out" 2>"$work/err"
    rc=$?
    set -e
}
sha() { sha256sum "$1" | cut -d' ' -f1; }
temps() { find "$(dirname "$state")" -maxdepth 1 -name "$(basename "$state").tmp.*" | wc -l; }
# reads_clean FILE: parses as JSON and a dry run reads it without a warning
reads_clean() {
    jq -e '.version == 1 and (.domains | length) > 0' "$1" >/dev/null || return 1
    run_once "$1" --dry-run
    [ "$rc" -eq 0 ] && [ ! -s "$work/err" ]
}
# expect_kept WHAT REASON: the last run failed on the state only, and said so once
expect_kept() {
    local what=$1 reason=$2 msg
    msg="balloonmgr: run: state '$state': cannot write: $reason (previous state kept)"
    cat "$work/err"
    [ "$rc" -eq 1 ] || bm_fail "$what: run --once exited $rc, want 1"
    # (besides the records of the balloon and mode changes the pass made)
    [ "$(grep -v '^balloonmgr: \(change\|mode\) ' "$work/err")" = "$msg" ] ||
        bm_fail "$what: stderr is not the one line '$msg'"
    [ "$(sha "$state")" = "$good" ] || bm_fail "$what: the state file changed"
    [ "$(temps)" -eq 0 ] || bm_fail "$what: temporary files left: $(ls -A "$mnt")"
    reads_clean "$state" || bm_fail "$what: the previous state no longer reads cleanly"
    bm_pass "$what: exit 1, '$reason (previous state kept)', sha256 unchanged, no temporary file"
}

# --- a good state first
run_once "$state"
[ "$rc" -eq 0 ] || { cat "$work/err"; bm_fail "first run --once exited $rc"; }
good=$(sha "$state")
reads_clean "$state" || bm_fail "the first state does not read cleanly"
bm_log "state: $(stat -c %s "$state") bytes, sha256 $good"

# --- full: fill the tmpfs, then free one page: the write is short (one page), then ENOSPC
dd if=/dev/zero of="$mnt/fill" bs=4k 2>/dev/null || true
truncate -s -4096 "$mnt/fill"
avail=$(df --output=avail -B1 "$mnt" | tail -1)
[ "$avail" -le 4096 ] || bm_fail "tmpfs not full: $avail bytes free"
bm_log "tmpfs full but for $avail bytes; the state is $(stat -c %s "$state") bytes"
writes=""
if command -v strace >/dev/null; then
    strace -qq -o "$work/write.trace" -e trace=openat,write "$BM" -c "$uri" run --once \
        --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$state" \
        >/dev/null 2>"$work/err" && rc=0 || rc=$?
    # the writes to the temporary file
    writes=$(awk '/openat\(.*state\.json\.tmp\..*= [0-9]+$/ { fd = $NF; next }
                  fd != "" && $0 ~ "^write\\(" fd "," { match($0, / = [^=]*$/); print "write(" fd ", ...)" substr($0, RSTART) }' "$work/write.trace")
    while read -r w; do echo "  temporary file: $w"; done <<<"$writes"
else
    run_once "$state"
fi
expect_kept "file system full (write)" "No space left on device"
if [ -n "$writes" ]; then
    if ! echo "$writes" | head -1 | grep -qE '= [1-9][0-9]*$' || ! echo "$writes" | tail -1 | grep -q 'ENOSPC'; then
        bm_fail "not a short write then ENOSPC"
    fi
    bm_pass "the write was short ($(echo "$writes" | head -1 | awk '{ print $NF }') bytes), then ENOSPC"
fi
rm -f "$mnt/fill"

# --- ENOSPC at fsync, EDQUOT at close (delayed allocation, quotas): strace fault injection
if command -v strace >/dev/null; then
    inject() { # inject SPEC [run options...]
        local spec=$1; shift
        set +e
        strace -f -qq -o /dev/null -e trace="${spec%%:*}" -e inject="$spec" "$BM" -c "$uri" run --once \
            --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$state" "$@" \
            >"$work/out" 2>"$work/err"
        rc=$?
        set -e
    }
    inject fsync:error=ENOSPC:when=1
    expect_kept "ENOSPC at fsync" "No space left on device"
    # which close() of the main thread closes the temporary file: count them in a traced run
    cp "$state" "$work/state.copy"
    strace -qq -o "$work/close.trace" -e trace=openat,close "$BM" -c "$uri" run --once \
        --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$work/state.copy" >/dev/null 2>&1
    k=$(awk '/openat\(.*state\.copy\.tmp\..*= [0-9]+$/ { fd = $NF }
             /^close\(/ { n++; if (fd != "" && $0 ~ "^close\\(" fd "\\)") { print n; exit } }' "$work/close.trace")
    [ -n "$k" ] || bm_fail "could not find the close of the temporary file in a traced run"
    inject "close:error=EDQUOT:when=$k"
    expect_kept "EDQUOT at close (close #$k)" "Disk quota exceeded"
else
    bm_log "strace not installed: fsync/close errors not injected"
fi

# --- read-only file system
mount -o remount,ro "$mnt"
run_once "$state"
expect_kept "read-only file system" "Read-only file system"
mount -o remount,rw "$mnt"

# --- a directory the user may not write (root would ignore the mode: run as nobody)
if getent passwd nobody >/dev/null && runuser -u nobody -- test -x "$BM"; then
    mkdir -p "$work/nobody-run"
    chown nobody "$work/nobody-run"
    chmod 0711 "$work"
    set +e
    runuser -u nobody -- env BALLOONMGR_RUNTIME_DIR="$work/nobody-run" "$BM" -c "$uri" run --once \
        --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" --state "$state" \
        >"$work/out" 2>"$work/err"
    rc=$?
    set -e
    expect_kept "directory not writable by the user" "Permission denied"
else
    bm_log "no user 'nobody' able to run $BM: permission case skipped"
fi

# --- the agent: full, then read-only, then room again
printf '[host]\ninterval = 1s\n[guest]\nmax_stats_age = off\n' >"$work/agent.policy"
dd if=/dev/zero of="$mnt/fill" bs=4k 2>/dev/null || true
bm_start_agent "$work/agent.log" "$BM" -c "$uri" agent --policy "$work/agent.policy" --proc "$ROOT/demo/proc" \
    --listen 127.0.0.1:0 --state "$state"
port=$(bm_agent_port "$work/agent.log")
metric() { curl -sf "127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
errors() { metric 'balloonmgr_errors_total{kind="state"}'; }
errors_at_least() { local e; e=$(errors 2>/dev/null || true); [ -n "$e" ] && [ "$e" -ge "$1" ]; }
wait_errors() { bm_wait_until 20 "errors_total{kind=\"state\"} >= $1" errors_at_least "$1"; }
wait_errors 4 || bm_fail "errors_total{kind=\"state\"} did not reach 4 (it is '$(errors)')"
bm_agent_alive || bm_fail "the agent died"
passes=$(metric balloonmgr_passes_total)
full_msgs=$(grep -c "cannot write: No space left on device" "$work/agent.log" || true)
[ "$full_msgs" -eq 1 ] || { cat "$work/agent.log"; bm_fail "full: $full_msgs messages after $(errors) failures, want 1"; }
[ "$(sha "$state")" = "$good" ] || bm_fail "agent: the state file changed"
[ "$(temps)" -eq 0 ] || bm_fail "agent: temporary files left"
bm_pass "agent, full file system: serving /metrics ($passes passes), errors_total{kind=\"state\"} $(errors), one message"

mount -o remount,ro "$mnt"
n=$(errors); wait_errors $((n + 3)) || bm_fail "read-only: errors_total{kind=\"state\"} stuck at $(errors)"
ro_msgs=$(grep -c "cannot write: Read-only file system" "$work/agent.log" || true)
[ "$ro_msgs" -eq 1 ] || { cat "$work/agent.log"; bm_fail "read-only: $ro_msgs messages, want 1"; }
bm_pass "agent, read-only file system: a new reason, one more message; errors_total{kind=\"state\"} $(errors)"

mount -o remount,rw "$mnt"
rm -f "$mnt/fill"
bm_wait_until 5 "the agent to save again" grep -q "saved again" "$work/agent.log" || true
failed=$(errors)
grep "saved again" "$work/agent.log" || { cat "$work/agent.log"; bm_fail "no recovery message"; }
[ "$(sha "$state")" != "$good" ] || bm_fail "the agent did not save after recovery"
jq -e --argjson f "$failed" '.counters.errors.state == $f and .counters.passes > 1' "$state" >/dev/null ||
    bm_fail "the saved state does not count the $failed failed saves"
sleep 2.5
[ "$(grep -c "saved again" "$work/agent.log")" -eq 1 ] || bm_fail "recovery reported more than once"
[ "$(errors)" = "$failed" ] || bm_fail "errors still counted after recovery"
bm_stop_agent TERM || bm_fail "the agent did not stop on SIGTERM"
[ "$BM_AGENT_STATUS" -eq 0 ] || bm_fail "agent exited $BM_AGENT_STATUS on SIGTERM"
reads_clean "$state" || bm_fail "the state saved at stop does not read cleanly"
[ "$(temps)" -eq 0 ] || bm_fail "temporary files left after the agent"
echo "agent log:"; sed 's/^/  /' "$work/agent.log"
bm_pass "agent: recovery reported once, the next pass saved ($failed failures counted in the file), saved at stop"
