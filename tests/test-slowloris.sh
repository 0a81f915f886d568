#!/usr/bin/env bash
# Slow clients against the agent's HTTP server (libvirt's test driver, no daemon): while one
# address holds 40 connections trickling a header byte a second and another holds 10 silent
# ones, scrapes from a third address get 200 in well under a second; the trickling address
# gets no more than the per-address limit (16), the silent connections are closed by the
# 10 s idle timeout. Then with basic auth (bcrypt cost 10, ~50 ms a check): while 8 clients
# send wrong passwords as fast as they can, scrapes with the right (cached) password stay fast,
# because each connection has its own thread (with one server thread they queued behind the
# bcrypt checks: 0.33-0.39 s each, measured before the change).
# Then 80 trickling connections from 5 addresses (more than the 64 slots): scrapes from a
# sixth stay answered, and every trickling request is ended 10 s after it began. SIGTERM ends
# the agent within a second during slow clients, during bcrypt checks at the maximum cost, and
# at a pass.
# Usage: test-slowloris.sh BALLOONMGR SLOW_CLIENT SOURCE_ROOT (TAP)
set -u
BM=$1 SLOW=$2 ROOT=$3
export BALLOONMGR_RUNTIME_DIR=$(mktemp -d)
work=$(mktemp -d)
agent=""
trap '[ -n "$agent" ] && kill "$agent" 2>/dev/null; rm -rf "$work" "$BALLOONMGR_RUNTIME_DIR"' EXIT
. "$ROOT/tests/tap.sh"

port=""
for _ in $(seq 20); do
    p=$((30000 + RANDOM % 20000))
    "$BM" -c "test://$ROOT/demo/host.xml" agent --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" \
        --dry-run --state "$work/state.json" --listen "127.0.0.1:$p" >"$work/agent.log" 2>&1 &
    agent=$!
    for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$p/metrics" && break; sleep 0.1; done
    if curl -sf -o /dev/null "http://127.0.0.1:$p/metrics"; then port=$p; break; fi
    kill "$agent" 2>/dev/null; wait "$agent" 2>/dev/null; agent=""
done
[ -n "$port" ]; ok $? "agent serves on a free port ($port)"
[ -n "$port" ] || { tap_done; exit 1; }

"$SLOW" 127.0.0.2 127.0.0.1 "$port" 40 1000 14 >"$work/trickle" &
trickle=$!
"$SLOW" 127.0.0.3 127.0.0.1 "$port" 10 0 14 >"$work/silent" &
silent=$!
sleep 1
worst=0 good=0
for _ in $(seq 10); do
    t=$(curl -s -o /dev/null -m 5 --interface 127.0.0.1 -w '%{http_code} %{time_total}' "http://127.0.0.1:$port/metrics")
    [ "${t%% *}" = 200 ] && good=$((good + 1))
    worst=$(awk -v a="$worst" -v b="${t##* }" 'BEGIN { print (b > a ? b : a) }')
    sleep 1
done
[ "$good" -eq 10 ]; ok $? "10 scrapes during the attack: $good got 200"
awk -v w="$worst" 'BEGIN { exit !(w < 1) }'; ok $? "slowest scrape during the attack: $worst s"
wait "$trickle" "$silent"
echo "# trickling address: $(cat "$work/trickle")"
echo "# silent address:    $(cat "$work/silent")"
read -r _ opened _ _ _ closed _ open <"$work/trickle"
[ "$open" -le 16 ] && [ "$closed" -ge $((opened - 16)) ]; ok $? "trickling address held at most 16 connections ($open still open of $opened)"
read -r _ opened _ _ _ closed _ open <"$work/silent"
[ "$opened" -ge 1 ] && [ "$open" -eq 0 ]; ok $? "silent connections closed by the idle timeout ($closed of $opened)"
kill -0 "$agent"; ok $? "agent still running"

# --- 80 trickling connections from 5 addresses: more than the 64 slots, 16 per address (the
# per-address limit). The server keeps room for new clients (a client holding fewer
# connections than the biggest holder gets in, the biggest gives up its oldest request) and
# ends every request 10 s after it began, however it trickles.
pids=()
for a in 2 3 4 5 6; do
    "$SLOW" 127.0.0.$a 127.0.0.1 "$port" 16 1000 14 >"$work/trickle5.$a" &
    pids+=($!)
done
sleep 1.5
worst=0 good=0
for _ in $(seq 10); do
    t=$(curl -s -o /dev/null -m 5 --interface 127.0.0.1 -w '%{http_code} %{time_total}' "http://127.0.0.1:$port/metrics")
    [ "${t%% *}" = 200 ] && good=$((good + 1))
    worst=$(awk -v a="$worst" -v b="${t##* }" 'BEGIN { print (b > a ? b : a) }')
    sleep 0.8
done
[ "$good" -eq 10 ]; ok $? "5 addresses x 16 trickling connections: 10 scrapes from 127.0.0.1, $good got 200"
awk -v w="$worst" 'BEGIN { exit !(w < 1) }'; ok $? "  slowest scrape: $worst s"
wait "${pids[@]}"
opened=0 still=0
for a in 2 3 4 5 6; do
    echo "# 127.0.0.$a: $(cat "$work/trickle5.$a")"
    read -r _ o _ _ _ _ _ st <"$work/trickle5.$a"
    opened=$((opened + o)) still=$((still + st))
done
[ "$opened" -ge 64 ] && [ "$still" -eq 0 ]
ok $? "  every trickling request was ended by the server within 14 s ($opened opened, $still still open): the 10 s request deadline"
kill -0 "$agent"; ok $? "agent still running"

# --- SIGTERM during a slow client: the agent is gone within a second
"$SLOW" 127.0.0.2 127.0.0.1 "$port" 16 1000 5 >/dev/null &
slowpid=$!
sleep 1
t0=$(date +%s.%N)
kill -TERM "$agent"; wait "$agent"; rc=$?
t1=$(date +%s.%N)
agent=""
took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
[ "$rc" -eq 0 ] && awk -v t="$took" 'BEGIN { exit !(t < 1) }'
ok $? "SIGTERM with 16 trickling connections open: exit $rc in $took s (< 1 s)"
wait "$slowpid"

# --- wrong-password flood against basic auth
printf 'basic_auth_users:\n  alice: %s\n' '$2b$10$jK6m/3JJcpCpdliHa0bX0eFXSh8pat8EzcLwNh1NAClRA0T2Y5v1K' >"$work/web.yml"
# no LeakSanitizer scan at exit in a sanitized build (test-leaks checks the agent for leaks):
# it stops every thread to scan, which on a busy host is counted as stop time below
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 "$BM" -c "test://$ROOT/demo/host.xml" agent --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" \
    --dry-run --state "$work/state.json" --listen "127.0.0.1:$port" --web-config "$work/web.yml" \
    >"$work/agent2.log" 2>&1 &
agent=$!
for _ in $(seq 50); do [ "$(curl -s -o /dev/null -w '%{http_code}' -u alice:secret "http://127.0.0.1:$port/metrics")" = 200 ] && break; sleep 0.1; done
c=$(curl -s -o /dev/null -w '%{http_code}' -u alice:secret "http://127.0.0.1:$port/metrics"); [ "$c" = 200 ]; ok $? "basic auth agent: right password 200 (cached from now on)"
flood=()
for i in $(seq 8); do
    ( for j in $(seq 40); do curl -s -o /dev/null --interface 127.0.0.2 -u "alice:wrong$j" "http://127.0.0.1:$port/metrics"; done ) &
    flood+=($!)
done
sleep 1
worst=0 good=0
for _ in $(seq 5); do
    t=$(curl -s -o /dev/null -m 5 -u alice:secret -w '%{http_code} %{time_total}' "http://127.0.0.1:$port/metrics")
    [ "${t%% *}" = 200 ] && good=$((good + 1))
    worst=$(awk -v a="$worst" -v b="${t##* }" 'BEGIN { print (b > a ? b : a) }')
    sleep 0.3
done
kill "${flood[@]}" 2>/dev/null; wait "${flood[@]}" 2>/dev/null
[ "$good" -eq 5 ]; ok $? "5 scrapes during a wrong-password flood (8 clients): $good got 200"
awk -v w="$worst" 'BEGIN { exit !(w < 0.2) }'; ok $? "slowest scrape during the flood: $worst s (< 0.2 s)"

# --- SIGTERM while credentialed requests are in flight (bcrypt cost 12, the maximum: wrong
# passwords are never cached, so each one is a bcrypt computation; 16 clients queue them)
printf 'basic_auth_users:\n  alice: %s\n' '$2b$12$TAdJQPTVWSkwDfpJ5Qtr0OcziFkfaWyUy/EcMamDXMuSKhWQ36bcO' >"$work/web.yml"
kill -HUP "$agent"
for _ in $(seq 50); do grep -q "web.yml reloaded" "$work/agent2.log" && break; sleep 0.1; done
flood=()
for i in $(seq 16); do
    ( for j in $(seq 20); do curl -s -o /dev/null -m 30 --interface 127.0.0.3 -u "alice:wrong$j" "http://127.0.0.1:$port/metrics"; done ) &
    flood+=($!)
done
sleep 1.5
t0=$(date +%s.%N)
kill -TERM "$agent"; wait "$agent"; rc=$?
t1=$(date +%s.%N)
agent=""
took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
kill "${flood[@]}" 2>/dev/null; wait "${flood[@]}" 2>/dev/null
[ "$rc" -eq 0 ] && awk -v t="$took" 'BEGIN { exit !(t < 1) }'
ok $? "SIGTERM during 16 clients' bcrypt checks at cost 12: exit $rc in $took s (< 1 s)"

# --- SIGTERM during a pass: right when the agent connected (its first pass runs then)
for i in 1 2 3; do
    "$BM" -c "test://$ROOT/demo/host.xml" agent --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" \
        --dry-run --state "$work/state.json" --listen "127.0.0.1:$port" >"$work/agent3.log" 2>&1 &
    agent=$!
    for _ in $(seq 200); do grep -q "connected to" "$work/agent3.log" && break; sleep 0.01; done
    t0=$(date +%s.%N)
    kill -TERM "$agent"; wait "$agent"; rc=$?
    t1=$(date +%s.%N)
    agent=""
    took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    [ "$rc" -eq 0 ] && awk -v t="$took" 'BEGIN { exit !(t < 1) }'
    ok $? "SIGTERM at the first pass ($i): exit $rc in $took s (< 1 s)"
done
tap_done
