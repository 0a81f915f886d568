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
# tls_fixup TEXT: (in $REPLY; the checks run in bash, not in processes: hundreds of them)
tls_fixup() {
    local line tls="" users=""
    while IFS= read -r line; do
        case $line in
        "  cert_file:"* | "  key_file:"* | "  min_version:"* | "  max_version:"* | \
            "  client_auth_type:"* | "  prefer_server_cipher_suites:"*) tls+=$line$'\n' ;;
        "  alice:"*) users+=$line$'\n' ;;
        esac
    done <<<"$1"
    REPLY="tls_server_config:"$'\n'$tls"basic_auth_users:"$'\n'$users
}

# config_for KEYSPEC VARIANT: the config text, in $REPLY
config_for() {
    local name type good tmpl v
    IFS='|' read -r name type good tmpl <<<"$1"
    v=${2//@S@/$good}
    tmpl=${tmpl//@V@/$v}
    tmpl=${tmpl//@N@/$'\n'}
    case $name in
    min_version|max_version|client_auth_type|prefer_server_cipher_suites) tls_fixup "$tmpl" ;;
    *) REPLY=$tmpl$'\n' ;;
    esac
}

# codes [CURL ARGS...]: the HTTP status of /metrics over https, then over http (000: no HTTP
# answer), "HTTPS HTTP", from one curl
codes() {
    curl -s -o /dev/null -w '%{http_code} ' --max-time 5 -k "$@" "https://127.0.0.1:$port/metrics" \
        --next -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" "http://127.0.0.1:$port/metrics"
}

# start_agent FILE: an agent on a free port with that web config; returns its exit status if
# it exits first, 0 once it answers on /metrics (apid set), 1 if it neither answers nor exits
answers() { [ "$(codes -u alice:secret)" != "000 000" ]; }
start_agent() {
    agent_start "$T/agent.log" "$BM" -c test:///default agent --policy "$ROOT/demo/demo.policy" --proc "$ROOT/demo/proc" \
        --state "$T/state.json" --listen 127.0.0.1:0 --web-config "$1" || return
    port=$agent_port apid=$agent_pid
    agent_wait answers
}

# served: "SCHEME ANON AUTHED": the scheme that answers, the status without and with
# credentials (one curl: https and http, each without and with them)
served() {
    local c
    read -r -a c < <(curl -s -o /dev/null -w '%{http_code} ' --max-time 5 -k "https://127.0.0.1:$port/metrics" \
        --next -s -o /dev/null -w '%{http_code} ' --max-time 5 -k -u alice:secret "https://127.0.0.1:$port/metrics" \
        --next -s -o /dev/null -w '%{http_code} ' --max-time 5 "http://127.0.0.1:$port/metrics" \
        --next -s -o /dev/null -w '%{http_code}' --max-time 5 -u alice:secret "http://127.0.0.1:$port/metrics")
    if [ "${c[0]:-000}" != 000 ]; then echo "https ${c[0]} ${c[1]:-000}"
    elif [ "${c[2]:-000}" != 000 ]; then echo "http ${c[2]} ${c[3]:-000}"
    else echo "none 000 000"
    fi
}

# what a well-formed config serves: the scheme, 401 without credentials if it has users
expect_served() { # expect_served CONFIG_TEXT
    local scheme=http anon=200
    [[ $'\n'$1 == *$'\n'"tls_server_config:"* ]] && scheme=https
    [[ $'\n'$1 == *$'\n'"  alice:"* ]] && anon=401
    echo "$scheme $anon 200"
}

# --- at start
for spec in "${KEYS[@]}"; do
    IFS='|' read -r name type _ <<<"$spec"
    for v in "${VARIANTS[@]}"; do
        config_for "$spec" "$v"
        printf '%s' "$REPLY" >"$T/web.yml"
        start_agent "$T/web.yml"
        rc=$?
        if valid_for "$type" "$v"; then
            want=$(expect_served "$REPLY")
            got=$(served)
            [ "$rc" -eq 0 ] && [ "$got" = "$want" ]
            ok_files $? "start, $name: '$v' is well-formed: serves '$want' (got exit $rc, '$got')" \
                "$T/web.yml" "$T/agent.log"
            stop_agent
        else
            [ "$rc" -eq 2 ] && grep -q "^balloonmgr: agent: web config '$T/web.yml' has errors" "$T/agent.log" &&
                grep -q "^$T/web.yml:[0-9]*:[0-9]*: " "$T/agent.log"
            ok_files $? "start, $name: '$v' is refused: exit 2 naming file:line:col (got $rc)" \
                "$T/web.yml" "$T/agent.log"
            stop_agent
        fi
    done
done

# --- on SIGHUP: an agent with basic auth, then with HTTPS and basic auth
# words: the agent's words on the live web config so far ("reloaded", "not reloaded" or "not
# applied" lines), in the array WORDS; security: how many lines say "security change"
words() {
    local line
    WORDS=() SECURITY=0
    while IFS= read -r line; do
        case $line in
        *"web config $T/live.yml reloaded"* | *"web config $T/live.yml not reloaded"* | \
            *"web config $T/live.yml not applied"*) WORDS+=("$line") ;;
        esac
        case $line in *"security change"*) SECURITY=$((SECURITY + 1)) ;; esac
    done <"$T/agent.log"
}
# hup CONFIG_TEXT: writes it, SIGHUP, waits for the agent's word on this web config (the
# first after those already in the log); sets R to "reloaded", "refused" or "none" (no
# subshell: it runs in this shell, the log read in bash)
hup() {
    local before
    words
    before=${#WORDS[@]}
    printf '%s\n' "$1" >"$T/live.yml"
    kill -HUP "$apid"
    word() { words; [ "${#WORDS[@]}" -gt "$before" ]; }
    R=none
    if agent_wait word; then
        case ${WORDS[$before]} in *"not reloaded"* | *"not applied"*) R=refused ;; *) R=reloaded ;; esac
    fi
}

printf '%s\n' "$BASE_AUTH" >"$T/live.yml"
start_agent "$T/live.yml"
ok_files $? "an agent with basic auth serves" "$T/agent.log"
[ "$(served)" = "http 401 200" ]; ok $? "  401 without credentials, 200 with them"
base=$BASE_AUTH
for spec in "${KEYS[@]}"; do
    IFS='|' read -r name type _ <<<"$spec"
    case $name in min_version|max_version|client_auth_type|prefer_server_cipher_suites)
        if [ "$base" != "$BASE_TLS" ]; then
            base=$BASE_TLS
            hup "$BASE_TLS"
            got=$(served)
            [ "$R" = reloaded ] && [ "$got" = "https 401 200" ]
            ok_files $? "SIGHUP to HTTPS with basic auth: reloaded, https 401/200 (got $R, $got)" "$T/agent.log"
        fi ;;
    esac
    for v in "${VARIANTS[@]}"; do
        config_for "$spec" "$v"
        text=${REPLY%$'\n'}
        before=$(served)
        words
        warnings=$SECURITY
        hup "$text"
        got=$(served)
        if valid_for "$type" "$v"; then
            want=$(expect_served "$text")
            drop=0
            [ "${before#* }" != "${want#* }" ] && [ "${want#* }" = "200 200" ] && drop=1
            [ "$R" = reloaded ] && [ "$got" = "$want" ]
            ok_files $? "SIGHUP, $name: '$v' is well-formed: applied, serves '$want' (got $R, '$got')" \
                "$T/live.yml" "$T/agent.log"
            if [ "$drop" = 1 ]; then
                words
                [ "$SECURITY" -gt "$warnings" ] &&
                    grep 'security change' "$T/agent.log" | tail -1 |
                    grep -q "^balloonmgr: agent: warning: web config $T/live.yml reloaded: http, no auth; security change: basic auth -> no auth"
                ok_files $? "  dropping basic auth is a warning: security change" "$T/agent.log"
            fi
            # back to the base for the next one
            hup "$base"
            got=$(served)
            [ "$R" = reloaded ] && [ "$got" = "$before" ]
            ok_files $? "  and back: '$before' (got $R, '$got')" "$T/agent.log"
        else
            words
            [ "$R" = refused ] && [ "$got" = "$before" ] && [ "$SECURITY" -eq "$warnings" ]
            ok_files $? "SIGHUP, $name: '$v' is refused, the last good config kept: '$before' (got $R, '$got')" \
                "$T/live.yml" "$T/agent.log"
        fi
    done
done
stop_agent
tap_done
