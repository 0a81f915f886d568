#!/usr/bin/env bash
# agent --web-config end to end, on libvirt's test driver (no daemon, no root): HTTPS with a
# self-signed certificate and basic auth, asserted with curl; SIGHUP with a broken web config
# keeps the old users, with a changed password swaps them, and from TLS to plain HTTP restarts
# the server on the same port; a bad web config at startup exits 2 and names file, line, key.
# Usage: test-webconfig-http.sh BALLOONMGR SOURCE_ROOT   (TAP output)
set -u
BM=$(realpath "$1")
ROOT=$2
. "$ROOT/tests/tap.sh"
for tool in curl openssl; do
    command -v $tool >/dev/null || tap_skip_all "$tool is not installed"
done
# bcrypt cost 6, made with crypt_gensalt/crypt (the same as htpasswd -nbB -C 6 alice secret)
HASH_SECRET='$2y$06$qvgJh/M1aEa1hNWRpZ.UtutuUBDvwg92FKESHEBH4JZGwSdMsUHpK'    # secret
HASH_NEWSECRET='$2b$06$KN.D2XQTf0Oc6mnO4g2O4OsYfk70r6cPhwwBshjSYtsOKy1fa3xSK' # newsecret

tmp=$(mktemp -d)
export BALLOONMGR_RUNTIME_DIR=$tmp/run
. "$ROOT/tests/agent.sh"
stop_agent() { agent_stop; agent_rc=$?; }
trap 'stop_agent; rm -rf "$tmp"' EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost \
    -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>"$tmp/openssl.log"
ok $? "openssl: a self-signed certificate for 127.0.0.1"

# relative paths: they resolve against the web config's directory, not the agent's cwd
write_tls_config() { # write_tls_config HASH
    printf 'tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  min_version: TLS12\nbasic_auth_users:\n  alice: %s\n' \
        "$1" >"$tmp/web.yml"
}
write_plain_config() { # write_plain_config HASH
    printf 'basic_auth_users:\n  alice: %s\n' "$1" >"$tmp/web.yml"
}

# code URL [CURL ARGS...]: the HTTP status curl saw (000: no HTTP answer)
code() {
    local url=$1; shift
    curl -s -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' --max-time 5 --cacert "$tmp/cert.pem" "$@" "$url"
}

# start_agent: on a free port, as a background job; waits until it answers; sets port, apid
answers_401() { [ "$(code "https://127.0.0.1:$agent_port/metrics")" = 401 ]; }
start_agent() {
    agent_start "$tmp/agent.log" env -C / "$BM" -c test:///default agent --policy "$ROOT/demo/demo.policy" \
        --proc "$ROOT/demo/proc" --state "$tmp/state.json" --listen 127.0.0.1:0 --web-config "$tmp/web.yml" &&
        port=$agent_port apid=$agent_pid && agent_wait answers_401
}

# wait_reload PATTERN [N]: waits until the agent's log has PATTERN N times (default 1; after SIGHUP)
reloaded_n() { [ "$(grep -c "$1" "$tmp/agent.log")" -ge "$2" ]; }
wait_reload() { agent_wait reloaded_n "$1" "${2:-1}"; }

# --- TLS and basic auth
write_tls_config "$HASH_SECRET"
start_agent; ok $? "agent --web-config with TLS and a user starts (port $port)" ||
    sed 's/^/# /' "$tmp/agent.log"
grep -q "serving /metrics on 127.0.0.1:0 (https, basic auth (1 user)) at 127.0.0.1:$port," "$tmp/agent.log"
ok $? "  and says https, basic auth"
URL=https://127.0.0.1:$port
c=$(code "$URL/metrics" -u alice:secret); [ "$c" = 200 ]; ok $? "https, right password: 200 (got $c)"
grep -q '^balloonmgr_build_info{' "$tmp/body"; ok $? "  the body has balloonmgr_build_info"
c=$(code "$URL/" -u alice:secret); [ "$c" = 200 ]; ok $? "https /, right password: 200 (got $c)"
c=$(code "$URL/metrics" -u alice:wrong); [ "$c" = 401 ]; ok $? "wrong password: 401 (got $c)"
c=$(code "$URL/metrics" -u mallory:secret); [ "$c" = 401 ]; ok $? "unknown user: 401 (got $c)"
c=$(code "$URL/metrics"); [ "$c" = 401 ]; ok $? "no credentials: 401 (got $c)"
grep -qi '^WWW-Authenticate: Basic realm="balloonmgr"' "$tmp/headers"; ok $? "  with WWW-Authenticate: Basic realm=\"balloonmgr\""
c=$(code "$URL/"); [ "$c" = 401 ]; ok $? "no credentials on /: 401 too (got $c)"
c=$(code "$URL/secret"); [ "$c" = 401 ]; ok $? "no credentials on an unknown path: 401, not 404 (got $c)"
c=$(code "$URL/secret" -u alice:secret); [ "$c" = 404 ]; ok $? "  with them: 404 (got $c)"
c=$(code "$URL/metrics" -u alice:secret -X POST); [ "$c" = 405 ]; ok $? "POST with them: 405 (got $c)"
c=$(code "$URL/metrics" -u alice:secret --tls-max 1.1); [ "$c" = 000 ]; ok $? "TLS 1.1 is refused (min_version TLS12) (got $c)"
c=$(code "http://127.0.0.1:$port/metrics" -u alice:secret); rc=$?
[ "$c" = 000 ] && [ $rc -ne 0 ]; ok $? "plain http:// to the TLS port: no HTTP answer (curl exit $rc, code $c)"
for _ in 1 2 3 4 5; do code "http://127.0.0.1:$port/metrics" >/dev/null; done
[ "$(grep -c 'libmicrohttpd' "$tmp/agent.log")" -le 1 ]; ok $? "  6 bad handshakes: at most one log line (rate-limited)"

# --- SIGHUP: a broken web config keeps the last good users
printf 'basic_auth_users:\n  alice: secret\n' >"$tmp/web.yml"
kill -HUP "$apid"
wait_reload "not reloaded: keeping the last good one"; ok $? "SIGHUP with a broken web config: reported, last good one kept"
grep -q "web.yml:2:10: basic_auth_users: 'alice': the password is not a bcrypt hash" "$tmp/agent.log"; ok $? "  with file:line:col and the key"
c=$(code "$URL/metrics" -u alice:secret); [ "$c" = 200 ]; ok $? "  the old password still works: 200 (got $c)"
curl -sk -u alice:secret "$URL/metrics" | grep -q '^balloonmgr_errors_total{kind="web_config"} 1$'
ok $? "  counted in balloonmgr_errors_total{kind=\"web_config\"}"

# --- fail closed: a web config not read in full (a NUL byte in the middle) is refused whole
printf 'tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n\0\nbasic_auth_users:\n  alice: %s\n' \
    "$HASH_SECRET" >"$tmp/web.yml"
kill -HUP "$apid"
wait_reload "not reloaded: keeping the last good one" 2; ok $? "SIGHUP with a NUL byte in the web config: not reloaded"
grep -q "web.yml:4:1: contains a NUL byte: refused whole" "$tmp/agent.log"; ok $? "  says where the NUL byte is"
c=$(code "http://127.0.0.1:$port/metrics"); [ "$c" = 000 ]; ok $? "  no plain HTTP (got $c)"
c=$(code "$URL/metrics"); [ "$c" = 401 ]; ok $? "  https still wants credentials: 401 (got $c)"
curl -sk -u alice:secret "$URL/metrics" | grep -q '^balloonmgr_errors_total{kind="web_config"} 2$'
ok $? "  counted in balloonmgr_errors_total{kind=\"web_config\"}"

# --- the Authorization header: "Basic" in any case; a NUL in the password is no prefix match
b64() { printf "$1" | base64 -w0; }
c=$(code "$URL/metrics" -H "Authorization: basic $(b64 'alice:secret')"); [ "$c" = 200 ]; ok $? "'basic' (lower case) works: 200 (got $c)"
c=$(code "$URL/metrics" -H "Authorization: BASIC $(b64 'alice:secret')"); [ "$c" = 200 ]; ok $? "'BASIC' works: 200 (got $c)"
c=$(code "$URL/metrics" -H "Authorization: Basic $(b64 'alice:secret\0junk')"); [ "$c" = 401 ]; ok $? "password 'secret\\0junk' is not 'secret': 401 (got $c)"
c=$(code "$URL/metrics" -H "Authorization: Basic $(b64 'alice:secre')"); [ "$c" = 401 ]; ok $? "  nor is a prefix: 401 (got $c)"

# --- SIGHUP: a changed password applies without restart
write_tls_config "$HASH_NEWSECRET"
kill -HUP "$apid"
wait_reload "web.yml reloaded: https, basic auth (1 user)$"; ok $? "SIGHUP with a new password: reloaded, TLS unchanged (no restart)"
c=$(code "$URL/metrics" -u alice:newsecret); [ "$c" = 200 ]; ok $? "  the new password: 200 (got $c)"
c=$(code "$URL/metrics" -u alice:secret); [ "$c" = 401 ]; ok $? "  the old password: 401 (got $c)"

# --- SIGHUP: TLS off restarts the server on the same port; basic auth without TLS
write_plain_config "$HASH_SECRET"
kill -HUP "$apid"
wait_reload "reloaded: http, basic auth (1 user); TLS settings changed"; ok $? "SIGHUP from TLS to plain HTTP: the server restarted on the same socket"
c=$(code "http://127.0.0.1:$port/metrics" -u alice:secret); [ "$c" = 200 ]; ok $? "basic auth without TLS: 200 (got $c)"
c=$(code "http://127.0.0.1:$port/metrics" -u alice:newsecret); [ "$c" = 401 ]; ok $? "  wrong password: 401 (got $c)"
c=$(code "http://127.0.0.1:$port/metrics"); [ "$c" = 401 ]; ok $? "  no credentials: 401 (got $c)"
c=$(code "$URL/metrics" -u alice:secret); [ "$c" = 000 ]; ok $? "  https:// no longer answers (got $c)"

# raw REQUEST: the first line of what the server answers to the bytes of REQUEST (printf
# format), sent in one write (printf alone writes line by line, and libmicrohttpd answers and
# closes after a bad line, before the rest arrives)
raw() {
    printf "$1" >"$tmp/request"
    (
        exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
        cat "$tmp/request" >&3
        timeout 5 head -1 <&3 | tr -d '\r'
    )
}
logged=$(grep -c libmicrohttpd "$tmp/agent.log")
[ "$(raw 'GET /metrics HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n')" = "HTTP/1.1 400 Bad Request" ]
ok $? "a malformed header line: 400 from libmicrohttpd (before auth)"
[ "$(raw 'GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n')" = "HTTP/1.1 400 Bad Request" ]
ok $? "a malformed Content-Length: 400"
[ "$(raw 'GET /metrics HTTP/7.0\r\nHost: x\r\n\r\n')" = "HTTP/1.1 505 HTTP Version Not Supported" ]
ok $? "an unknown HTTP version: 505"
[ -z "$(raw 'GARBAGE\r\n\r\n')" ]
ok $? "a request line without target and version: closed without an answer (libmicrohttpd 0.9.75)"
[ "$(grep -c libmicrohttpd "$tmp/agent.log")" -le $((logged + 1)) ]
ok $? "  those four: at most one more log line"

# --- and back to TLS
write_tls_config "$HASH_SECRET"
kill -HUP "$apid"
wait_reload "reloaded: https, basic auth (1 user); TLS settings changed"; ok $? "SIGHUP back to TLS: restarted"
c=$(code "$URL/metrics" -u alice:secret); [ "$c" = 200 ]; ok $? "  https again: 200 (got $c)"
stop_agent
[ "$agent_rc" = 0 ] && grep -q "agent: stopping" "$tmp/agent.log"; ok $? "SIGTERM: the agent stopped, exit 0 (got $agent_rc)"

# --- fail closed at startup: a NUL byte in a web config with TLS and users: exit 2, no server
printf 'tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n\0\nbasic_auth_users:\n  alice: %s\n' \
    "$HASH_SECRET" >"$tmp/nul.yml"
timeout 10 "$BM" -c test:///default agent --listen 127.0.0.1:1 --web-config "$tmp/nul.yml" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -qx "$tmp/nul.yml:4:1: contains a NUL byte: refused whole" "$tmp/err"
ok $? "a web config with a NUL byte at startup: exit 2 (got $rc), names the line"

# --- a bcrypt cost above the maximum (12) is refused at load: every check would take hours
printf 'basic_auth_users:\n  alice: $2y$31$qvgJh/M1aEa1hNWRpZ.UtutuUBDvwg92FKESHEBH4JZGwSdMsUHpK\n' >"$tmp/cost.yml"
timeout 10 "$BM" -c test:///default agent --listen 127.0.0.1:1 --web-config "$tmp/cost.yml" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "cost.yml:2:10: basic_auth_users: 'alice': bcrypt cost 31 is above the maximum 12" "$tmp/err"
ok $? "bcrypt cost 31: exit 2 (got $rc), names the maximum"

# --- a bad web config at startup: exit 2, file:line:col and the key named
printf 'tls_server_config:\n  cert_file: cert.pem\n  key_fle: key.pem\n' >"$tmp/bad.yml"
"$BM" -c test:///default agent --listen 127.0.0.1:1 --web-config "$tmp/bad.yml" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ]; ok $? "a bad web config at startup: exit 2 (got $rc)"
grep -qx "$tmp/bad.yml:1:1: tls_server_config: key_file is missing" "$tmp/err"; ok $? "  names the missing key_file"
grep -qx "$tmp/bad.yml:3:3: unknown key 'key_fle' in tls_server_config (did you mean 'key_file'?)" "$tmp/err"; ok $? "  and the unknown key, with line and column"
[ "$(tail -1 "$tmp/err")" = "balloonmgr: agent: web config '$tmp/bad.yml' has errors" ]; ok $? "  then one summary line"
printf 'tls_server_config:\n  cert_file: nope.pem\n  key_file: key.pem\n' >"$tmp/bad.yml"
"$BM" -c test:///default agent --listen 127.0.0.1:1 --web.config.file "$tmp/bad.yml" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ]; ok $? "a missing cert_file (alias --web.config.file): exit 2 (got $rc)"
grep -qx "$tmp/bad.yml:2:14: cert_file '$tmp/nope.pem': cannot read: No such file or directory" "$tmp/err"; ok $? "  names the file, resolved beside the config"
"$BM" -c test:///default agent --listen 127.0.0.1:1 --web-config "$tmp/none.yml" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -qx "$tmp/none.yml: cannot read: No such file or directory" "$tmp/err"; ok $? "a missing web config: exit 2, named (got $rc)"

tap_done
