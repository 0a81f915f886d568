#!/usr/bin/env bash
# Slow clients against the agent's HTTP server (libvirt's test driver, no daemon): while one
# address holds 40 connections trickling a header byte a second and another holds 10 silent
# ones, scrapes from a third address get 200 (each within curl's 5 s, half the 10 s the slow
# ones would hold a queue); the trickling address gets no more than the per-address limit
# (16), the silent connections are closed by the 10 s idle timeout. Then with basic auth
# (bcrypt cost 10, ~50 ms a check): while 8 clients send wrong passwords as fast as they can,
# scrapes with the right (cached) password are not queued behind their bcrypt checks: the
# slowest scrape ends sooner than the typical wrong-password request of the same flood (one
# server thread queued them: 0.33-0.39 s each, measured before the change).
# Then 80 trickling connections from 5 addresses (more than the 64 slots): scrapes from a
# sixth stay answered, and every trickling request is ended by the server (10 s after it
# began), not by its client. SIGTERM ends the agent while the slow clients and the bcrypt
# flood still run (it waits for neither), and at a pass. No wall-clock bound decides: the
# latencies are printed; the clients' own durations are guards, scaled by
# $BM_TIMEOUT_MULTIPLIER (tools/test.sh).
# Usage: test-slowloris.sh BALLOONMGR SLOW_CLIENT SOURCE_ROOT (TAP)
set -u
BM=$1 SLOW=$2 ROOT=$3
export BALLOONMGR_RUNTIME_DIR=$(mktemp -d)
work=$(mktemp -d)
. "$ROOT/tests/tap.sh"
. "$ROOT/tests/agent.sh"
trap 'agent_stop; rm -rf "$work" "$BALLOONMGR_RUNTIME_DIR"' EXIT

# scrapes N PAUSE [CURL_ARGS...]: N scrapes of /metrics, PAUSE s apart; sets good (how many
# got 200) and worst (the slowest, in seconds)
scrapes() {
    local n=$1 pause=$2 t
    shift 2
    worst=0 good=0
    for _ in $(seq "$n"); do
        t=$(curl -s -o /dev/null -m 5 "$@" -w '%{http_code} %{time_total}' "http://127.0.0.1:$port/metrics")
        [ "${t%% *}" = 200 ] && good=$((good + 1))
        worst=$(awk -v a="$worst" -v b="${t##* }" 'BEGIN { print (b > a ? b : a) }')
        sleep "$pause"
    done
}

# sigterm_ok DESC [PID...]: SIGTERM to the agent ($agent_pid) and wait for it (agent_stop's
# guard); ok if it exited 0 while every PID (the clients it must not wait for) still ran
sigterm_ok() {
    local t0 t1 rc took p alive=0 n=0
    local desc=$1
    shift
    t0=$(date +%s.%N)
    agent_stop; rc=$?
    t1=$(date +%s.%N)
    for p in "$@"; do n=$((n + 1)); kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
    took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    [ "$rc" -eq 0 ] && [ "$alive" -eq "$n" ]
    ok $? "$desc: exit $rc in $took s, before the $n client(s) it must not wait for ended ($alive of $n still running)"
}
# how long the slow clients hold on: the server ends them at 10 s; the rest is a guard
hold=$((10 + 4 * ${BM_TIMEOUT_MULTIPLIER:-1}))

port=""
agent_start "$work/agent.log" "$BM" -c "test://$ROOT/demo/host.xml" agent --policy "$ROOT/demo/demo.policy" \
    --proc "$ROOT/demo/proc" --dry-run --state "$work/state.json" --listen 127.0.0.1:0 &&
    agent_wait curl -sf -o /dev/null "http://127.0.0.1:$agent_port/metrics" && port=$agent_port
[ -n "$port" ]; ok $? "agent serves on a free port ($port)"
[ -n "$port" ] || { tap_done; exit 1; }

"$SLOW" 127.0.0.2 127.0.0.1 "$port" 40 1000 "$hold" >"$work/trickle" &
trickle=$!
"$SLOW" 127.0.0.3 127.0.0.1 "$port" 10 0 "$hold" >"$work/silent" &
silent=$!
sleep 1
scrapes 10 1 --interface 127.0.0.1
[ "$good" -eq 10 ]; ok $? "10 scrapes during the attack: $good got 200 (slowest $worst s)"
wait "$trickle" "$silent"
echo "# trickling address: $(cat "$work/trickle")"
echo "# silent address:    $(cat "$work/silent")"
read -r _ opened _ _ _ closed _ open <"$work/trickle"
[ "$open" -le 16 ] && [ "$closed" -ge $((opened - 16)) ]; ok $? "trickling address held at most 16 connections ($open still open of $opened)"
read -r _ opened _ _ _ closed _ open <"$work/silent"
[ "$opened" -ge 1 ] && [ "$open" -eq 0 ]; ok $? "silent connections closed by the idle timeout ($closed of $opened)"
kill -0 "$agent_pid"; ok $? "agent still running"

# --- 80 trickling connections from 5 addresses: more than the 64 slots, 16 per address (the
# per-address limit). The server keeps room for new clients (a client holding fewer
# connections than the biggest holder gets in, the biggest gives up its oldest request) and
# ends every request 10 s after it began, however it trickles.
pids=()
for a in 2 3 4 5 6; do
    "$SLOW" 127.0.0.$a 127.0.0.1 "$port" 16 1000 "$hold" >"$work/trickle5.$a" &
    pids+=($!)
done
sleep 1.5
scrapes 10 0.8 --interface 127.0.0.1
[ "$good" -eq 10 ]; ok $? "5 addresses x 16 trickling connections: 10 scrapes from 127.0.0.1, $good got 200 (slowest $worst s)"
wait "${pids[@]}"
opened=0 still=0
for a in 2 3 4 5 6; do
    echo "# 127.0.0.$a: $(cat "$work/trickle5.$a")"
    read -r _ o _ _ _ _ _ st <"$work/trickle5.$a"
    opened=$((opened + o)) still=$((still + st))
done
[ "$opened" -ge 64 ] && [ "$still" -eq 0 ]
ok $? "  every trickling request was ended by the server before its client gave up at $hold s ($opened opened, $still still open): the 10 s request deadline"
kill -0 "$agent_pid"; ok $? "agent still running"

# --- SIGTERM during a slow client: the agent is gone within a second
"$SLOW" 127.0.0.2 127.0.0.1 "$port" 16 1000 "$hold" >"$work/slow-term" &
slowpid=$!
sleep 1 # the client connects (were it late, the check below would still hold: an ordering)
sigterm_ok "SIGTERM with 16 trickling connections open" "$slowpid"
wait "$slowpid"

# --- wrong-password flood against basic auth
printf 'basic_auth_users:\n  alice: %s\n' '$2b$10$jK6m/3JJcpCpdliHa0bX0eFXSh8pat8EzcLwNh1NAClRA0T2Y5v1K' >"$work/web.yml"
# no LeakSanitizer scan at exit in a sanitized build (test-leaks checks the agent for leaks):
# it stops every thread to scan, which on a busy host is counted as stop time below
agent_start "$work/agent2.log" env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$BM" \
    -c "test://$ROOT/demo/host.xml" agent --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" \
    --dry-run --state "$work/state.json" --listen 127.0.0.1:0 --web-config "$work/web.yml"
port=$agent_port
authed_200() { [ "$(curl -s -o /dev/null -w '%{http_code}' -u alice:secret "http://127.0.0.1:$port/metrics")" = 200 ]; }
agent_wait authed_200
c=$(curl -s -o /dev/null -w '%{http_code}' -u alice:secret "http://127.0.0.1:$port/metrics"); [ "$c" = 200 ]; ok $? "basic auth agent: right password 200 (cached from now on)"
flood=()
for i in $(seq 8); do
    ( for j in $(seq 40); do curl -s -o /dev/null -w '%{time_total}\n' --interface 127.0.0.2 -u "alice:wrong$j" \
        "http://127.0.0.1:$port/metrics" >>"$work/flood.$i"; done ) &
    flood+=($!)
done
sleep 1
scrapes 5 0.3 -u alice:secret
kill "${flood[@]}" 2>/dev/null; wait "${flood[@]}" 2>/dev/null
[ "$good" -eq 5 ]; ok $? "5 scrapes during a wrong-password flood (8 clients): $good got 200"
# the median wrong-password request of the same flood, under the same load: a scrape queued
# behind bcrypt checks takes at least one of them
median=$(cat "$work"/flood.* | sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : 0 }')
awk -v w="$worst" -v m="$median" 'BEGIN { exit !(w < m) }'
ok $? "slowest scrape during the flood: $worst s, sooner than the flood's median wrong-password request ($median s): not queued behind them"

# --- SIGTERM while credentialed requests are in flight (bcrypt cost 12, the maximum: wrong
# passwords are never cached, so each one is a bcrypt computation; 16 clients queue them)
printf 'basic_auth_users:\n  alice: %s\n' '$2b$12$TAdJQPTVWSkwDfpJ5Qtr0OcziFkfaWyUy/EcMamDXMuSKhWQ36bcO' >"$work/web.yml"
kill -HUP "$agent_pid"
agent_wait grep -q "web.yml reloaded" "$work/agent2.log"
flood=()
for i in $(seq 16); do
    ( for j in $(seq 20); do curl -s -o /dev/null -m 30 --interface 127.0.0.3 -u "alice:wrong$j" "http://127.0.0.1:$port/metrics"; done ) &
    flood+=($!)
done
sleep 1.5
sigterm_ok "SIGTERM during 16 clients' bcrypt checks at cost 12" "${flood[@]}"
kill "${flood[@]}" 2>/dev/null; wait "${flood[@]}" 2>/dev/null

# --- SIGTERM during a pass: right when the agent connected (its first pass runs then)
for i in 1 2 3; do
    agent_start "$work/agent3.log" "$BM" -c "test://$ROOT/demo/host.xml" agent --policy "$ROOT/demo/demo.policy" \
        --proc "$ROOT/demo/proc" --dry-run --state "$work/state.json" --listen 127.0.0.1:0
    agent_wait grep -q "connected to" "$work/agent3.log"
    sigterm_ok "SIGTERM at the first pass ($i)"
done
tap_done
