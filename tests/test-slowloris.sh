#!/usr/bin/env bash
# Slow clients against the agent's HTTP server (libvirt's test driver, no daemon): while one
# address holds 40 connections trickling a header byte a second and another holds 10 silent
# ones, scrapes from a third address get 200 in well under a second; the trickling address
# gets no more than the per-address limit (16), the silent connections are closed by the
# 10 s idle timeout. Then with basic auth (bcrypt cost 10, ~50 ms a check): while 8 clients
# send wrong passwords as fast as they can, scrapes with the right (cached) password stay fast,
# because each connection has its own thread (with one server thread they queued behind the
# bcrypt checks: 0.33-0.39 s each, measured before the change).
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
kill "$agent"; wait "$agent" 2>/dev/null; agent=""

# --- wrong-password flood against basic auth
printf 'basic_auth_users:\n  alice: %s\n' '$2b$10$jK6m/3JJcpCpdliHa0bX0eFXSh8pat8EzcLwNh1NAClRA0T2Y5v1K' >"$work/web.yml"
"$BM" -c "test://$ROOT/demo/host.xml" agent --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" \
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
tap_done
