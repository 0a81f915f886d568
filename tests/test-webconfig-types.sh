#!/usr/bin/env bash
# A web config never fails open: every key of the --web-config YAML given every YAML type and
# explicit tag ("!!str", "!!str null", "!!binary", "!!int", an empty "!!seq", a local tag,
# a flow sequence, ...), at start and on SIGHUP, with what /metrics serves after:
# - at start, a value of the wrong type is an error: exit 2 naming the key, nothing served;
#   a well-formed one serves as it says;
# - on SIGHUP to an agent with basic auth (and then with HTTPS and basic auth), a value of the
#   wrong type is refused and the last good config kept: 401 without credentials stays 401,
#   200 with them; a well-formed config is applied, and one that drops basic auth is logged
#   at warning as a security change.
# The property itself, every key with every variant, is checked in-process against the parser
# by test-webconfig (unit); this is the end-to-end side.
# Usage: test-webconfig-types.sh BALLOONMGR SOURCE_ROOT [few|all]   (TAP output, libvirt's test
# driver; few (the default): three variants per key, all: every variant)
set -u
BM=$(realpath "$1")
ROOT=$2
WHICH=${3:-few}
. "$ROOT/tests/tap.sh"
. "$ROOT/tests/agent.sh"
command -v curl >/dev/null || tap_skip_all "curl is not installed"
HASH='$2y$06$qvgJh/M1aEa1hNWRpZ.UtutuUBDvwg92FKESHEBH4JZGwSdMsUHpK' # secret, cost 6
CERT=$ROOT/tests/data/webconfig/load/cert.pem
KEY=$ROOT/tests/data/webconfig/load/key.pem
T=$(mktemp -d)
export BALLOONMGR_RUNTIME_DIR=$T/run
stop_agent() { agent_stop; apid=""; }
trap 'stop_agent; rm -rf "$T"' EXIT

# Every value tried; @S@ is a good value of the key's own type (a string, true).
VARIANTS=(
    '' '~' 'null' '!!null' '!!null ~'
    '!!str' '!!str null' '!!str ~' '!!str ""' '!!str @S@' '!<tag:yaml.org,2002:str> @S@'
    '!!binary' '!!binary aGk=' '!!int' '!!int 5' '!!float 1.5' '!!bool' '!!bool true'
    '!!timestamp 2001-12-14' '!!seq' '!!seq []' '[]' '[@S@]' '!!map' '!!map {}' '{}' '!!set {}'
    '!!omap []' '!local @S@' '! @S@' '""' "''" '"@S@"' '@S@' '5'
)
# few: well-formed for the maps (''), for strings and booleans ('@S@'), and a tag of the wrong type
[ "$WHICH" = all ] || VARIANTS=('' '@S@' '!!binary aGk=')
# the variants that are well-formed for each type of key
valid_for() { # valid_for TYPE VARIANT
    case $1:$2 in
    map:|map:'~'|map:null|map:'{}'|map:'!!map {}') return 0 ;;
    str:'!!str @S@'|str:'!<tag:yaml.org,2002:str> @S@'|str:'"@S@"'|str:'@S@') return 0 ;;
    bool:'!!bool true'|bool:'@S@') return 0 ;;
    esac
    return 1
}

# The keys: name|type|good value|the config around it (@V@: the value tried, @N@: a newline);
# the base configs are what the SIGHUP part runs on.
BASE_AUTH="basic_auth_users:@N@  alice: $HASH"
BASE_TLS="tls_server_config:@N@  cert_file: $CERT@N@  key_file: $KEY@N@basic_auth_users:@N@  alice: $HASH"
KEYS=(
    "basic_auth_users|map|x|basic_auth_users: @V@"
    "http_server_config|map|x|$BASE_AUTH@N@http_server_config: @V@"
    "tls_server_config|tlsmap|x|$BASE_AUTH@N@tls_server_config: @V@"
    "http2|bool|true|$BASE_AUTH@N@http_server_config:@N@  http2: @V@"
    "the password|str|$HASH|basic_auth_users:@N@  alice: @V@"
    "cert_file|str|$CERT|tls_server_config:@N@  cert_file: @V@@N@  key_file: $KEY@N@basic_auth_users:@N@  alice: $HASH"
    "key_file|str|$KEY|tls_server_config:@N@  cert_file: $CERT@N@  key_file: @V@@N@basic_auth_users:@N@  alice: $HASH"
    "min_version|str|TLS12|$BASE_TLS@N@  min_version: @V@"
    "max_version|str|TLS13|$BASE_TLS@N@  max_version: @V@"
    "client_auth_type|str|NoClientCert|$BASE_TLS@N@  client_auth_type: @V@"
    "prefer_server_cipher_suites|bool|true|$BASE_TLS@N@  prefer_server_cipher_suites: @V@"
)
nl() { printf '%s\n' "${1//@N@/$'\n'}"; } # nl TEXT: with its @N@ as newlines
BASE_AUTH=$(nl "$BASE_AUTH")
BASE_TLS=$(nl "$BASE_TLS")
# BASE_TLS ends with basic_auth_users: the TLS key tried goes back under tls_server_config
tls_fixup() { # tls_fixup TEXT
    printf 'tls_server_config:\n%s\nbasic_auth_users:\n%s\n' \
        "$(grep -E '^  (cert_file|key_file|min_version|max_version|client_auth_type|prefer_server_cipher_suites):' <<<"$1")" \
        "$(grep -E '^  alice:' <<<"$1")"
}

# config_for KEYSPEC VARIANT: the config text
config_for() {
    local name type good tmpl v
    IFS='|' read -r name type good tmpl <<<"$1"
    v=${2//@S@/$good}
    tmpl=$(nl "${tmpl//@V@/$v}")
    case $name in
    min_version|max_version|client_auth_type|prefer_server_cipher_suites) tls_fixup "$tmpl" ;;
    *) printf '%s\n' "$tmpl" ;;
    esac
}

# code SCHEME [CURL ARGS...]: the HTTP status of /metrics (000: no HTTP answer)
code() {
    local scheme=$1; shift
    curl -s -o /dev/null -w '%{http_code}' --max-time 5 -k "$@" "$scheme://127.0.0.1:$port/metrics"
}

# start_agent FILE: an agent on a free port with that web config; returns its exit status if
# it exits first, 0 once it answers on /metrics (apid set), 1 if it neither answers nor exits
answers() {
    local c
    c=$(code https -u alice:secret); [ "$c" = 000 ] && c=$(code http -u alice:secret)
    [ "$c" != 000 ]
}
start_agent() {
    agent_start "$T/agent.log" "$BM" -c test:///default agent --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" \
        --state "$T/state.json" --listen 127.0.0.1:0 --web-config "$1" || return
    port=$agent_port apid=$agent_pid
    agent_wait answers
}

# served: "SCHEME ANON AUTHED": the scheme that answers, the status without and with
# credentials
served() {
    local s
    for s in https http; do
        local a
        a=$(code $s)
        if [ "$a" != 000 ]; then
            echo "$s $a $(code $s -u alice:secret)"
            return
        fi
    done
    echo "none 000 000"
}

# what a well-formed config serves: the scheme, 401 without credentials if it has users
expect_served() { # expect_served CONFIG_TEXT
    local scheme=http anon=200
    grep -q '^tls_server_config:' <<<"$1" && scheme=https
    grep -q '^  alice:' <<<"$1" && anon=401
    echo "$scheme $anon 200"
}

# --- at start
for spec in "${KEYS[@]}"; do
    IFS='|' read -r name type _ <<<"$spec"
    for v in "${VARIANTS[@]}"; do
        config_for "$spec" "$v" >"$T/web.yml"
        start_agent "$T/web.yml"
        rc=$?
        if valid_for "$type" "$v"; then
            want=$(expect_served "$(cat "$T/web.yml")")
            got=$(served)
            [ "$rc" -eq 0 ] && [ "$got" = "$want" ]
            ok $? "start, $name: '$v' is well-formed: serves '$want' (got exit $rc, '$got')" \
                "$(cat "$T/web.yml")" "$(cat "$T/agent.log")"
            stop_agent
        else
            [ "$rc" -eq 2 ] && grep -q "^balloonmgr: agent: web config '$T/web.yml' has errors" "$T/agent.log" &&
                grep -q "^$T/web.yml:[0-9]*:[0-9]*: " "$T/agent.log"
            ok $? "start, $name: '$v' is refused: exit 2 naming file:line:col (got $rc)" \
                "$(cat "$T/web.yml")" "$(cat "$T/agent.log")"
            stop_agent
        fi
    done
done

# --- on SIGHUP: an agent with basic auth, then with HTTPS and basic auth
# hup CONFIG_TEXT: writes it, SIGHUP, waits for the agent's word on this web config (the
# first after those already in the log); echoes "reloaded", "refused" or "none"
hup() {
    local pattern="web config $T/live.yml \(reloaded\|not reloaded\|not applied\)" before
    before=$(grep -c "$pattern" "$T/agent.log")
    printf '%s\n' "$1" >"$T/live.yml"
    kill -HUP "$apid"
    local line
    word() { line=$(grep "$pattern" "$T/agent.log" | sed -n "$((before + 1))p"); [ -n "$line" ]; }
    if agent_wait word; then
        case $line in *"not reloaded"* | *"not applied"*) echo refused ;; *) echo reloaded ;; esac
        return
    fi
    echo none
}

printf '%s\n' "$BASE_AUTH" >"$T/live.yml"
start_agent "$T/live.yml"
ok $? "an agent with basic auth serves" "$(cat "$T/agent.log")"
[ "$(served)" = "http 401 200" ]; ok $? "  401 without credentials, 200 with them"
base=$BASE_AUTH
for spec in "${KEYS[@]}"; do
    IFS='|' read -r name type _ <<<"$spec"
    case $name in min_version|max_version|client_auth_type|prefer_server_cipher_suites)
        if [ "$base" != "$BASE_TLS" ]; then
            base=$BASE_TLS
            r=$(hup "$BASE_TLS")
            [ "$r" = reloaded ] && [ "$(served)" = "https 401 200" ]
            ok $? "SIGHUP to HTTPS with basic auth: reloaded, https 401/200 (got $r, $(served))" "$(tail -3 "$T/agent.log")"
        fi ;;
    esac
    for v in "${VARIANTS[@]}"; do
        text=$(config_for "$spec" "$v")
        before=$(served)
        warnings=$(grep -c 'security change' "$T/agent.log")
        r=$(hup "$text")
        got=$(served)
        if valid_for "$type" "$v"; then
            want=$(expect_served "$text")
            drop=0
            [ "${before#* }" != "${want#* }" ] && [ "${want#* }" = "200 200" ] && drop=1
            [ "$r" = reloaded ] && [ "$got" = "$want" ]
            ok $? "SIGHUP, $name: '$v' is well-formed: applied, serves '$want' (got $r, '$got')" \
                "$text" "$(tail -3 "$T/agent.log")"
            if [ "$drop" = 1 ]; then
                [ "$(grep -c 'security change' "$T/agent.log")" -gt "$warnings" ] &&
                    grep 'security change' "$T/agent.log" | tail -1 |
                    grep -q "^balloonmgr: agent: warning: web config $T/live.yml reloaded: http, no auth; security change: basic auth -> no auth"
                ok $? "  dropping basic auth is a warning: security change" "$(tail -2 "$T/agent.log")"
            fi
            # back to the base for the next one
            r=$(hup "$base")
            [ "$r" = reloaded ] && [ "$(served)" = "$before" ]
            ok $? "  and back: '$before'" "$(tail -2 "$T/agent.log")"
        else
            [ "$r" = refused ] && [ "$got" = "$before" ] &&
                [ "$(grep -c 'security change' "$T/agent.log")" -eq "$warnings" ]
            ok $? "SIGHUP, $name: '$v' is refused, the last good config kept: '$before' (got $r, '$got')" \
                "$text" "$(tail -4 "$T/agent.log")"
        fi
    done
done
stop_agent
tap_done
