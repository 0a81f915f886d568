# shellcheck shell=bash
# tests/tap.sh -- TAP output for the unit-suite scripts (meson runs them with protocol 'tap'),
# the shell twin of tap.h. Source it:  . "$(dirname "$0")/tap.sh"
#
#   ok STATUS DESCRIPTION [DIAGNOSTIC...]  one TAP line: "ok N - ..." when STATUS is 0, else
#       "not ok N - ..." followed by each non-empty DIAGNOSTIC (its first 4000 bytes) as '#'
#       lines. The description is kept to one line: a newline shows as \n, '#' (it would start
#       a directive) and other unprintable bytes as '?'; at most 500 characters are shown.
#   ok_files STATUS DESCRIPTION FILE...    the same, the diagnostics being the FILEs' contents,
#       read only when STATUS is not 0 (a $(cat FILE) argument costs a process on every check)
#   tap_skip REASON                        a skipped check: "ok N # SKIP REASON"
#   diag TEXT...                           a '#' line
#   tap_skip_all REASON                    "1..0 # SKIP REASON" and exit 0
#   tap_done                               the plan "1..N"; returns 1 if any check failed
# Variables: tap_n (checks so far), tap_failed (failed so far).

tap_n=0
tap_failed=0

ok() {
    local status=$1 desc=$2 d LC_ALL=C
    shift 2
    desc=${desc:0:500}
    desc=${desc//$'\n'/\\n}
    desc=${desc//[^[:print:]]/?}
    desc=${desc//#/?}
    tap_n=$((tap_n + 1))
    if [ "$status" -eq 0 ]; then
        echo "ok $tap_n - $desc"
        return 0
    fi
    tap_failed=$((tap_failed + 1))
    echo "not ok $tap_n - $desc"
    for d in "$@"; do
        [ -n "$d" ] && printf '%s\n' "${d:0:4000}" | sed 's/^/#   /'
    done
    return 0
}

ok_files() {
    local status=$1 desc=$2 f d=()
    shift 2
    if [ "$status" -ne 0 ]; then
        for f in "$@"; do d+=("$f:" "$(cat "$f" 2>&1)"); done
    fi
    ok "$status" "$desc" "${d[@]}"
}

# messages FILE: balloonmgr's stderr in FILE but the records a pass logs of its balloon and
# mode changes (they are no messages about the input), in $REPLY, and how many lines those are
# in $NMSG; the whole file in $ALL. Read in bash: no process per check.
messages() {
    local line
    ALL="" REPLY="" NMSG=0
    while IFS= read -r line || [ -n "$line" ]; do
        ALL+=$line$'\n'
        case $line in "balloonmgr: change "* | "balloonmgr: mode "*) ;; *) REPLY+=$line$'\n' NMSG=$((NMSG + 1)) ;; esac
    done <"$1"
}

tap_skip() {
    tap_n=$((tap_n + 1))
    echo "ok $tap_n # SKIP $1"
}

diag() { echo "# $*"; }

tap_skip_all() {
    echo "1..0 # SKIP $1"
    exit 0
}

tap_done() {
    echo "1..$tap_n"
    [ "$tap_failed" -eq 0 ]
}
