# shellcheck shell=bash
# tests/integration/lib/prom.sh -- a private Prometheus (and Pushgateway) for
# integration tests. Source it after lib.sh:
#
#   . "$(dirname "$0")/lib/lib.sh"
#   . "$(dirname "$0")/lib/prom.sh"
#   bm_setup                                   # optional: prom.sh needs no libvirt
#   bm_prom_ensure                             # apt-get install what is missing
#   bm_prom_start_pushgateway                  # optional; sets BM_PUSHGATEWAY_URL
#   BM_PROM_RULES=$repo/contrib/prometheus/balloonmgr-alerts.yml \
#       bm_prom_start 127.0.0.1:9736 pushgateway
#   bm_prom_wait 'balloonmgr_libvirt_up == 1' 30 || bm_fail "agent never up"
#   bm_prom_query 'balloonmgr_domain_info' | jq -r '.[].metric.domain'
#
# Everything started here listens on 127.0.0.1 only, on a port picked free at
# start, and is stopped by bm_prom_stop, which bm_prom_start* register with
# lib.sh's bm_add_cleanup, so the test's EXIT trap (bm_on_exit, or the
# hooks-only trap bm_add_cleanup installs when bm_setup was not called) stops
# them too. Only the PIDs these functions started are ever signalled (checked
# against the process start time, so a reused PID is left alone).
#
# Functions (failures of bm_prom_ensure / bm_prom_start* call bm_fail, i.e.
# exit the test; the query helpers return non-zero instead):
#   bm_prom_ensure                    install prometheus, prometheus-pushgateway,
#                                     curl, jq if missing
#   bm_prom_start TARGET...           start Prometheus scraping each TARGET
#                                     (host:port) as job $BM_PROM_JOB [balloonmgr].
#                                     The TARGET "pushgateway" (or
#                                     "pushgateway=HOST:PORT") adds the Pushgateway
#                                     (default: the one bm_prom_start_pushgateway
#                                     started) as job balloonmgr-pushgateway with
#                                     honor_labels: true, so pushed series keep their
#                                     job/instance labels. No TARGET at all is fine
#                                     (a Prometheus that only evaluates rules).
#   bm_prom_start_pushgateway         start a Pushgateway (persistence off)
#   bm_prom_stop [prometheus|pushgateway]
#                                     stop what we started (TERM, wait, KILL) and
#                                     remove the TSDB temp dir; default: both.
#                                     Idempotent. Unsets BM_PROM_URL/_PORT (resp.
#                                     BM_PUSHGATEWAY_URL/_PORT); the _PID variables
#                                     stay, to check the process is gone.
#   bm_prom_query EXPR [TIME]         instant query; prints the result as a JSON
#                                     array of {metric, value} (a scalar/string result
#                                     is wrapped as one element with metric {});
#                                     returns 1 on an API or HTTP error, 2 when
#                                     Prometheus rejects EXPR (bad_data); message on
#                                     stderr
#   bm_prom_wait EXPR TIMEOUT_S [STEP_S=0.5]
#                                     poll until EXPR returns a non-empty result,
#                                     print it; 1 on timeout or on a parse error
#   bm_prom_series_count EXPR         print the number of series EXPR returns
#   bm_prom_value EXPR                print the value of the only series of EXPR
#                                     (1 unless exactly one series)
#   bm_prom_targets                   print "job instance health last_error" lines
#   bm_prom_wait_targets [TIMEOUT_S=30]
#                                     wait until Prometheus has discovered every
#                                     configured target and scraped each once (up or
#                                     not). Prometheus' discovery hands targets to the
#                                     scraper only every 5 s: the first scrape comes
#                                     ~5 s after /-/ready, and bm_prom_start does not
#                                     wait for it.
#   bm_prom_wait_targets_up [TIMEOUT_S=30]
#                                     wait until every configured target is up
#   bm_prom_rule_errors               print rules whose evaluation failed (empty = ok)
#   bm_prom_push GROUP_PATH [FILE|-]  PUT a text-format file to the Pushgateway at
#                                     /metrics/GROUP_PATH (e.g. job/balloonmgr/instance/h1)
#   bm_prom_free_port                 print a TCP port nothing listens on
#
# Environment (optional; defaults in brackets):
#   BM_PROM_RULES            whitespace-separated rule files for rule_files []
#   BM_PROM_JOB              job name of the TARGETs [balloonmgr]
#   BM_PROM_SCRAPE_INTERVAL  scrape_interval = scrape_timeout [1s]
#   BM_PROM_EVAL_INTERVAL    evaluation_interval [1s]
#   BM_PROM_START_TIMEOUT    seconds to wait for /-/ready [60]
#   BM_PROM_STOP_TIMEOUT     seconds between TERM and KILL [15]
#   BM_PROM_BIN, BM_PUSHGATEWAY_BIN, BM_PROMTOOL_BIN
#                            [/usr/bin/prometheus, /usr/bin/prometheus-pushgateway,
#                             /usr/bin/promtool]
# Set by the functions (exported):
#   BM_PROM_URL, BM_PROM_PORT, BM_PROM_PID, BM_PROM_LOG, BM_PROM_CONFIG,
#   BM_PROM_STARTUP_SECONDS (spawn to /-/ready), BM_PROM_TARGET_COUNT
#   BM_PUSHGATEWAY_URL, BM_PUSHGATEWAY_PORT, BM_PUSHGATEWAY_PID,
#   BM_PUSHGATEWAY_LOG, BM_PUSHGATEWAY_STARTUP_SECONDS
#   BM_PROM_DIR  config + logs: $BM_WORKDIR/prom (kept with BM_WORKDIR when the
#                test fails). The TSDB lives in a mktemp dir removed by bm_prom_stop.
#
# Nothing here reaches the network: the config has no remote_write/remote_read
# and no alerting section (rules are evaluated, no Alertmanager is notified),
# Prometheus and the Pushgateway bind 127.0.0.1, and neither phones home.

# shellcheck source=tests/integration/lib/lib.sh
declare -F bm_log >/dev/null || . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BM_PROM_BIN=${BM_PROM_BIN:-/usr/bin/prometheus}
BM_PUSHGATEWAY_BIN=${BM_PUSHGATEWAY_BIN:-/usr/bin/prometheus-pushgateway}
BM_PROMTOOL_BIN=${BM_PROMTOOL_BIN:-/usr/bin/promtool}
BM_PROM_JOB=${BM_PROM_JOB:-balloonmgr}
BM_PROM_SCRAPE_INTERVAL=${BM_PROM_SCRAPE_INTERVAL:-1s}
BM_PROM_EVAL_INTERVAL=${BM_PROM_EVAL_INTERVAL:-1s}
BM_PROM_START_TIMEOUT=${BM_PROM_START_TIMEOUT:-60}
BM_PROM_STOP_TIMEOUT=${BM_PROM_STOP_TIMEOUT:-15}
BM_PROM_DIR=${BM_PROM_DIR:-$BM_WORKDIR/prom}

# What this shell started: "NAME PID STARTTIME" and the temp dirs it made.
_BM_PROM_OWNED=()
_BM_PROM_TMPDIRS=()

# ---------------------------------------------------------------------------
# Packages
# ---------------------------------------------------------------------------
# bm_prom_ensure: install the missing ones of prometheus, prometheus-pushgateway
# (promtool comes with prometheus), curl, jq. apt-get update runs only when the
# install failed for lack of package lists. The packages' init scripts must not
# start the system services (they would listen on 0.0.0.0:9090/9091 and outlive
# the test): when no /usr/sbin/policy-rc.d exists, one that denies every start
# is put in place for the install and removed afterwards.
bm_prom_ensure() {
    local want=(prometheus prometheus-pushgateway curl jq) missing=() p out rc policy=""
    for p in "${want[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$p")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || bm_skip "needs ${missing[*]} installed (or root to install them)"
    bm_log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        policy=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\n# temporary, balloonmgr tests/integration/lib/prom.sh\nexit 101\n' >"$policy"
        chmod 0755 "$policy"
    fi
    # Lock::Timeout: another apt-get (a parallel test, a developer) may hold the lock.
    rc=0
    out=$(apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 \
          "${missing[@]}" 2>&1) || rc=$?
    if [ "$rc" -ne 0 ] &&
       grep -qE 'Unable to locate package|has no installation candidate|Failed to fetch|not available' <<<"$out"; then
        bm_log "apt-get install failed for lack of package lists; running apt-get update"
        apt-get update -q -o DPkg::Lock::Timeout=300 >/dev/null 2>&1 || true
        rc=0
        out=$(apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 \
              "${missing[@]}" 2>&1) || rc=$?
    fi
    if [ -n "$policy" ]; then rm -f "$policy"; fi
    if [ "$rc" -ne 0 ]; then
        tail -n 20 <<<"$out" >&2
        bm_fail "apt-get install ${missing[*]} failed"
    fi
}

# ---------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------
# bm_prom_free_port: a port in 20000-29999 (below the ephemeral range) that no
# TCP socket listens on, per /proc/net/tcp{,6}. Racy by nature: the start
# functions retry with another port when the bind fails.
bm_prom_free_port() {
    local used=" " f local_addr st port i
    for f in /proc/net/tcp /proc/net/tcp6; do
        [ -r "$f" ] || continue
        while read -r _ local_addr _ st _; do
            if [ "$st" = 0A ]; then used="$used$((16#${local_addr##*:})) "; fi
        done < <(tail -n +2 "$f")
    done
    for ((i = 0; i < 200; i++)); do
        port=$((20000 + (RANDOM * 32768 + RANDOM) % 10000))
        case "$used" in *" $port "*) continue ;; esac
        echo "$port"
        return 0
    done
    echo "bm_prom_free_port: no free port found" >&2
    return 1
}

# _bm_prom_starttime PID: field 22 of /proc/PID/stat (start time in ticks).
_bm_prom_starttime() {
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    s=${s##*) }                      # fields from 3 on
    # shellcheck disable=SC2086
    set -- $s
    echo "${20}"
}

# _bm_prom_alive PID STARTTIME: PID still is the process we started, not a zombie.
_bm_prom_alive() {
    local s expect=$2
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $s
    [ "$1" != Z ] && [ "${20}" = "$expect" ]
}

_bm_prom_curl_ok() { curl -fsS -o /dev/null -m 2 "$1" 2>/dev/null; }

# _bm_prom_spawn NAME URL LOG CMD...: start CMD in the background (stdin
# /dev/null, output appended to LOG), record it, wait for URL/-/ready.
# Sets _BM_PROM_SPAWN_PID, _BM_PROM_SPAWN_SECONDS; returns 0 ready, 2 exited
# (e.g. port taken), 1 timeout (process left running and recorded for stop).
_bm_prom_spawn() {
    local name=$1 url=$2 log=$3 pid st t0
    shift 3
    t0=$(bm_now)
    echo "--- $(date '+%F %T') $*" >>"$log"
    "$@" </dev/null >>"$log" 2>&1 &
    pid=$!
    st=$(_bm_prom_starttime "$pid" || echo 0)
    _BM_PROM_OWNED+=("$name $pid $st")
    _BM_PROM_SPAWN_PID=$pid
    while :; do
        if _bm_prom_curl_ok "$url/-/ready"; then
            _BM_PROM_SPAWN_SECONDS=$(bm_elapsed "$t0")
            return 0
        fi
        if ! _bm_prom_alive "$pid" "$st"; then
            wait "$pid" 2>/dev/null || true
            _bm_prom_forget "$pid"
            return 2
        fi
        if awk -v s="$t0" -v e="$(bm_now)" -v t="$BM_PROM_START_TIMEOUT" \
               'BEGIN { exit !(e - s >= t) }'; then
            return 1
        fi
        sleep 0.1
    done
}

# _bm_prom_spawn_on_free_port NAME LOG CMD...: _bm_prom_spawn on a free port: @PORT@ in CMD's
# arguments is that port; another port when it was taken meanwhile (5 tries). Sets
# _BM_PROM_SPAWN_PORT; fails the test when NAME does not become ready.
_bm_prom_spawn_on_free_port() {
    local name=$1 log=$2 try port rc a args
    shift 2
    for ((try = 1; try <= 5; try++)); do
        port=$(bm_prom_free_port) || bm_fail "no free port for $name"
        args=()
        for a in "$@"; do args+=("${a//@PORT@/$port}"); done
        _bm_prom_spawn "$name" "http://127.0.0.1:$port" "$log" "${args[@]}" && rc=0 || rc=$?
        [ "$rc" -eq 2 ] && grep -q 'address already in use' "$log" && continue
        break
    done
    if [ "$rc" -ne 0 ]; then
        _bm_prom_log_tail "$name" "$log"
        bm_fail "$name did not become ready on 127.0.0.1:$port" \
            "($([ "$rc" = 2 ] && echo exited || echo "timeout $BM_PROM_START_TIMEOUT s"))"
    fi
    _BM_PROM_SPAWN_PORT=$port
}

# _bm_prom_started PREFIX LOG: after _bm_prom_spawn_on_free_port, sets and exports PREFIX_PORT,
# PREFIX_URL, PREFIX_PID, PREFIX_LOG (LOG) and PREFIX_STARTUP_SECONDS.
_bm_prom_started() {
    local p=$1
    declare -gx "${p}_PORT=$_BM_PROM_SPAWN_PORT" "${p}_URL=http://127.0.0.1:$_BM_PROM_SPAWN_PORT" \
        "${p}_PID=$_BM_PROM_SPAWN_PID" "${p}_LOG=$2" "${p}_STARTUP_SECONDS=$_BM_PROM_SPAWN_SECONDS"
}

# _bm_prom_forget PID: drop PID (it exited) from what we own.
_bm_prom_forget() {
    local keep=() o name pid st
    for o in "${_BM_PROM_OWNED[@]}"; do
        read -r name pid st <<<"$o"
        if [ "$pid" != "$1" ]; then keep+=("$o"); fi
    done
    _BM_PROM_OWNED=("${keep[@]}")
}

_bm_prom_log_tail() {
    echo "--- $1 ($2), tail ---" >&2
    tail -n 30 "$2" >&2 2>/dev/null || true
}

# _bm_prom_running NAME: one of ours named NAME is alive.
_bm_prom_running() {
    local o name pid st
    for o in "${_BM_PROM_OWNED[@]}"; do
        read -r name pid st <<<"$o"
        if [ "$name" = "$1" ] && _bm_prom_alive "$pid" "$st"; then return 0; fi
    done
    return 1
}

# bm_prom_start_pushgateway: Pushgateway on 127.0.0.1:<free port>, no
# persistence (Debian's default --persistence.file is
# /var/lib/prometheus/pushgateway.data: overridden with an empty one).
bm_prom_start_pushgateway() {
    local log
    if _bm_prom_running pushgateway; then bm_fail "bm_prom_start_pushgateway: already running ($BM_PUSHGATEWAY_URL)"; fi
    [ -x "$BM_PUSHGATEWAY_BIN" ] || bm_fail "$BM_PUSHGATEWAY_BIN missing (call bm_prom_ensure)"
    command -v curl >/dev/null || bm_fail "curl missing (call bm_prom_ensure)"
    mkdir -p "$BM_PROM_DIR"
    log=$BM_PROM_DIR/pushgateway.log
    bm_add_cleanup bm_prom_stop
    _bm_prom_spawn_on_free_port pushgateway "$log" \
        "$BM_PUSHGATEWAY_BIN" --web.listen-address=127.0.0.1:@PORT@ --persistence.file= --log.level=info
    _bm_prom_started BM_PUSHGATEWAY "$log"
    bm_log "Pushgateway $BM_PUSHGATEWAY_URL ready in $BM_PUSHGATEWAY_STARTUP_SECONDS s" \
        "(pid $BM_PUSHGATEWAY_PID, log $log)"
}

# _bm_prom_write_config FILE TARGET...: the scrape config (see bm_prom_start).
_bm_prom_write_config() {
    local file=$1 t pg="" r
    shift
    local targets=()
    for t in "$@"; do
        case "$t" in
            pushgateway)
                [ -n "${BM_PUSHGATEWAY_URL:-}" ] ||
                    bm_fail "bm_prom_start: target 'pushgateway' but no BM_PUSHGATEWAY_URL" \
                        "(call bm_prom_start_pushgateway first)"
                pg=${BM_PUSHGATEWAY_URL#http://} ;;
            pushgateway=*) pg=${t#pushgateway=} ;;
            *:*) targets+=("$t") ;;
            *) bm_fail "bm_prom_start: target '$t' is not host:port" ;;
        esac
    done
    {
        echo "# written by tests/integration/lib/prom.sh; no remote_write/remote_read/alerting"
        echo "global:"
        echo "  scrape_interval: $BM_PROM_SCRAPE_INTERVAL"
        echo "  scrape_timeout: $BM_PROM_SCRAPE_INTERVAL"
        echo "  evaluation_interval: $BM_PROM_EVAL_INTERVAL"
        if [ -n "${BM_PROM_RULES:-}" ]; then
            echo "rule_files:"
            for r in $BM_PROM_RULES; do
                [ -r "$r" ] || bm_fail "bm_prom_start: rule file $r not readable"
                echo "  - '$(realpath "$r")'"
            done
        fi
        echo "scrape_configs:"
        if [ "${#targets[@]}" -gt 0 ]; then
            echo "  - job_name: '$BM_PROM_JOB'"
            echo "    static_configs:"
            echo "      - targets:"
            for t in "${targets[@]}"; do echo "          - '$t'"; done
        fi
        if [ -n "$pg" ]; then
            echo "  - job_name: '$BM_PROM_JOB-pushgateway'"
            echo "    honor_labels: true"
            echo "    static_configs:"
            echo "      - targets: ['$pg']"
        fi
        [ "${#targets[@]}" -gt 0 ] || [ -n "$pg" ] || echo "  []"
    } >"$file"
    BM_PROM_TARGET_COUNT=$((${#targets[@]} + (${#pg} > 0)))
}

# bm_prom_start TARGET...: see the top of this file.
bm_prom_start() {
    local log cfg tsdb out
    if _bm_prom_running prometheus; then
        bm_fail "bm_prom_start: already running ($BM_PROM_URL); bm_prom_stop prometheus first"
    fi
    [ -x "$BM_PROM_BIN" ] || bm_fail "$BM_PROM_BIN missing (call bm_prom_ensure)"
    if ! command -v curl >/dev/null || ! command -v jq >/dev/null; then
        bm_fail "curl/jq missing (call bm_prom_ensure)"
    fi
    mkdir -p "$BM_PROM_DIR"
    log=$BM_PROM_DIR/prometheus.log
    cfg=$BM_PROM_DIR/prometheus.yml
    _bm_prom_write_config "$cfg" "$@"
    if [ -x "$BM_PROMTOOL_BIN" ]; then
        out=$("$BM_PROMTOOL_BIN" check config "$cfg" 2>&1) ||
            { echo "$out" >&2; bm_fail "promtool check config $cfg failed"; }
    fi
    bm_add_cleanup bm_prom_stop
    tsdb=$(mktemp -d "${TMPDIR:-/tmp}/bm-prom-tsdb.XXXXXX") || bm_fail "mktemp failed"
    _BM_PROM_TMPDIRS+=("$tsdb")
    _bm_prom_spawn_on_free_port prometheus "$log" \
        "$BM_PROM_BIN" --config.file="$cfg" --storage.tsdb.path="$tsdb" \
        --web.listen-address=127.0.0.1:@PORT@ --storage.tsdb.retention.time=1d --log.level=info
    _bm_prom_started BM_PROM "$log"
    export BM_PROM_CONFIG=$cfg BM_PROM_TARGET_COUNT
    bm_log "Prometheus $BM_PROM_URL ready in $BM_PROM_STARTUP_SECONDS s (pid $BM_PROM_PID," \
        "targets: ${*:-none}, rules: ${BM_PROM_RULES:-none}, log $log)"
}

# bm_prom_stop [prometheus|pushgateway]: stop what this shell started.
bm_prom_stop() {
    local which=${1:-all} o name pid st i keep=() d
    for ((i = ${#_BM_PROM_OWNED[@]} - 1; i >= 0; i--)); do
        o=${_BM_PROM_OWNED[i]}
        read -r name pid st <<<"$o"
        if [ "$which" != all ] && [ "$which" != "$name" ]; then
            keep=("$o" "${keep[@]}")
            continue
        fi
        if _bm_prom_alive "$pid" "$st"; then
            bm_log "stopping $name (pid $pid)"
            bm_terminate "$name" "$pid" "$BM_PROM_STOP_TIMEOUT" _bm_prom_alive "$pid" "$st"
        fi
        wait "$pid" 2>/dev/null || true    # reap it (our child, unless called from a subshell)
    done
    _BM_PROM_OWNED=("${keep[@]}")
    if [ "$which" = all ] || [ "$which" = prometheus ]; then
        for d in "${_BM_PROM_TMPDIRS[@]}"; do
            case "$d" in */bm-prom-tsdb.*) rm -rf "$d" ;; esac
        done
        _BM_PROM_TMPDIRS=()
        unset BM_PROM_URL BM_PROM_PORT
    fi
    if [ "$which" = all ] || [ "$which" = pushgateway ]; then
        unset BM_PUSHGATEWAY_URL BM_PUSHGATEWAY_PORT
    fi
    return 0
}

# ---------------------------------------------------------------------------
# Queries
# ---------------------------------------------------------------------------
# _bm_prom_api PATH [curl args...]: GET/POST the API; prints .data on success,
# the error on stderr and returns 1 otherwise (2 for a bad_data error).
_bm_prom_api() {
    local path=$1 body
    shift
    [ -n "${BM_PROM_URL:-}" ] || { echo "BM_PROM_URL not set (bm_prom_start)" >&2; return 1; }
    body=$(curl -sS -m 30 "$@" "$BM_PROM_URL$path" 2>&1) ||
        { echo "query failed: $body" >&2; return 1; }
    if ! jq -e '.status == "success"' >/dev/null 2>&1 <<<"$body"; then
        echo "prometheus: $(jq -r '"\(.errorType): \(.error)"' 2>/dev/null <<<"$body" || echo "$body")" >&2
        jq -e '.errorType == "bad_data"' >/dev/null 2>&1 <<<"$body" && return 2
        return 1
    fi
    jq -c '.data' <<<"$body"
}

# bm_prom_query EXPR [TIME]: the result as a JSON array (see top of file).
bm_prom_query() {
    local data args=(--data-urlencode "query=$1")
    [ -n "${2:-}" ] && args+=(--data-urlencode "time=$2")
    data=$(_bm_prom_api /api/v1/query "${args[@]}") || return
    jq -c 'if (.resultType == "scalar" or .resultType == "string")
           then [{metric: {}, value: .result}] else .result end' <<<"$data"
}

# bm_prom_wait EXPR TIMEOUT_S [STEP_S]: wait for a non-empty result; print it. TIMEOUT_S is a
# guard, not a measure: times BM_TIMEOUT_MULTIPLIER (tools/test.sh sets it for a busy machine).
bm_prom_wait() {
    local expr=$1 timeout step=${3:-0.5} t0 res rc err
    timeout=$(awk -v t="$2" -v m="${BM_TIMEOUT_MULTIPLIER:-1}" 'BEGIN { print t * m }')
    t0=$(bm_now)
    err=$(mktemp) || return 1
    while :; do
        rc=0
        res=$(bm_prom_query "$expr" 2>"$err") || rc=$?
        if [ "$rc" -eq 0 ] && [ "$(jq length <<<"$res")" -gt 0 ]; then
            rm -f "$err"
            echo "$res"
            return 0
        fi
        if [ "$rc" -eq 2 ]; then                # the expression itself is bad
            cat "$err" >&2; rm -f "$err"
            return 1
        fi
        if awk -v s="$t0" -v e="$(bm_now)" -v t="$timeout" 'BEGIN { exit !(e - s >= t) }'; then
            echo "bm_prom_wait: no result for '$expr' within $timeout s" >&2
            cat "$err" >&2; rm -f "$err"
            return 1
        fi
        sleep "$step"
    done
}

# bm_prom_series_count EXPR: number of series (1 for a scalar).
bm_prom_series_count() {
    local res
    res=$(bm_prom_query "$1") || return
    jq length <<<"$res"
}

# bm_prom_value EXPR: value of the only series.
bm_prom_value() {
    local res
    res=$(bm_prom_query "$1") || return
    [ "$(jq length <<<"$res")" -eq 1 ] ||
        { echo "bm_prom_value: '$1' returned $(jq length <<<"$res") series, not 1" >&2; return 1; }
    jq -r '.[0].value[1]' <<<"$res"
}

# bm_prom_targets: "job instance health last_error" per active target.
bm_prom_targets() {
    local data
    data=$(_bm_prom_api '/api/v1/targets?state=active') || return
    jq -r '.activeTargets[] | [.labels.job, .labels.instance, .health,
           (if .lastError == "" then "-" else .lastError end)] | join(" ")' <<<"$data"
}

# _bm_prom_wait_targets_cond NAME TIMEOUT_S AWK_COND: wait until all
# BM_PROM_TARGET_COUNT targets are listed and each satisfies AWK_COND over
# "job instance health last_error" lines.
_bm_prom_wait_targets_cond() {
    local name=$1 timeout=$2 cond=$3 t0 out
    t0=$(bm_now)
    while :; do
        out=$(bm_prom_targets) || return 1
        if awk -v want="${BM_PROM_TARGET_COUNT:-1}" \
               "NF >= 3 { n++ } NF >= 3 && $cond { ok++ } END { exit !(n == want && ok == n) }" \
               <<<"$out"; then
            return 0
        fi
        if awk -v s="$t0" -v e="$(bm_now)" -v t="$timeout" 'BEGIN { exit !(e - s >= t) }'; then
            echo "$name: not reached within $timeout s; targets:" >&2
            echo "${out:-(none yet)}" >&2
            return 1
        fi
        sleep 0.2
    done
}

# bm_prom_wait_targets [TIMEOUT_S=30]: every target discovered and scraped once.
bm_prom_wait_targets() {
    # shellcheck disable=SC2016  # awk code
    _bm_prom_wait_targets_cond bm_prom_wait_targets "${1:-30}" '$3 != "unknown"'
}

# bm_prom_wait_targets_up [TIMEOUT_S=30]: every target up.
bm_prom_wait_targets_up() {
    # shellcheck disable=SC2016  # awk code
    _bm_prom_wait_targets_cond bm_prom_wait_targets_up "${1:-30}" '$3 == "up"'
}

# bm_prom_rule_errors: "group/rule: error" for rules whose last evaluation failed.
bm_prom_rule_errors() {
    local data
    data=$(_bm_prom_api /api/v1/rules) || return
    jq -r '.groups[] | .name as $g | .rules[] | select(.health == "err")
           | "\($g)/\(.name): \(.lastError)"' <<<"$data"
}

# bm_prom_push GROUP_PATH [FILE|-]: PUT a text-format metrics file (default
# stdin) to the Pushgateway's /metrics/GROUP_PATH.
bm_prom_push() {
    local path=$1 file=${2:--} body code
    [ -n "${BM_PUSHGATEWAY_URL:-}" ] || { echo "BM_PUSHGATEWAY_URL not set" >&2; return 1; }
    body=$(mktemp) || return 1
    code=$(curl -sS -m 10 -o "$body" -w '%{http_code}' -X PUT --data-binary "@$file" \
           "$BM_PUSHGATEWAY_URL/metrics/$path") || code="curl failed"
    case "$code" in
        2??) rm -f "$body"; return 0 ;;
    esac
    echo "bm_prom_push: PUT /metrics/$path: HTTP $code: $(head -c 500 "$body")" >&2
    rm -f "$body"
    return 1
}
