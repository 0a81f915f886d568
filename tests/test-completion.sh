#!/usr/bin/env bash
# Bash completion: verbs, options, and domain names from `balloonmgr list` on the given -c URI.
# The completion is generated from the verbs' option tables (bash-completion/generate.c): the
# one that meson built is tested, and that it agrees with every verb's --help.
# Usage: test-completion.sh BALLOONMGR SOURCE_ROOT COMPLETION   (TAP; skipped without bash-completion)
set -u
BM=$1 ROOT=$2 COMPLETION=$3
. "$ROOT/tests/tap.sh"
[ -r /usr/share/bash-completion/bash_completion ] || tap_skip_all "bash-completion is not installed"
# shellcheck disable=SC1091
. /usr/share/bash-completion/bash_completion
. "$COMPLETION"
PATH="$(dirname "$BM"):$PATH"
DEMO="test://$ROOT/demo/host.xml"

# complete "WORDS..." EXPECTED: completes the last word (may be empty) and compares
complete_is() {
    local line=$1 want=$2
    # bash splits words at COMP_WORDBREAKS characters such as ':' (a URI becomes 3 words)
    read -r -a COMP_WORDS <<<"${line//:/ : }"
    [[ $line == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE=$line COMP_POINT=${#line}
    COMPREPLY=()
    _balloonmgr
    local got
    got=$(printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ')
    if [ "$got" = "$want" ]; then ok 0 "'$line' -> $want"; else ok 1 "'$line' -> '$got', want '$want'"; fi
}

complete_is "balloonmgr " "agent configure help list policy run set status verify "
complete_is "balloonmgr help s" "set status "
complete_is "balloonmgr help status " " "
complete_is "balloonmgr agent --l" "--listen "
complete_is "balloonmgr agent --web-c" "--web-config "
complete_is "balloonmgr agent --web.l" "--web.listen-address "
complete_is "balloonmgr agent --no-l" "--no-libvirt-duplicates "
complete_is "balloonmgr agent --web-config $ROOT/tests/data/webconfig/load/good." "$ROOT/tests/data/webconfig/load/good.yml "
complete_is "balloonmgr agent --s" "--state "
complete_is "balloonmgr agent --state $ROOT/demo/h" "$ROOT/demo/host.xml "
complete_is "balloonmgr run --te" "--textfile "
complete_is "balloonmgr run --ta" "--table "
complete_is "balloonmgr --proc $ROOT/demo/proc s" "set status "
complete_is "balloonmgr set web1 1G --q" "--quiet "
complete_is "balloonmgr run --o" "--once "
complete_is "balloonmgr run --d" "--dry-run "
complete_is "balloonmgr policy " "check "
complete_is "balloonmgr policy check --ho" "--host "
complete_is "balloonmgr s" "set status "
complete_is "balloonmgr --v" "--version "
complete_is "balloonmgr -c $DEMO set " "build1 cache1 db1 web1 web2 "
complete_is "balloonmgr -c $DEMO set w" "web1 web2 "
complete_is "balloonmgr -c $DEMO status b" "batch1 build1 "
complete_is "balloonmgr -c $DEMO set web1 5" "50% 512M "
complete_is "balloonmgr set web1 1G --w" "--wait --wait= "
complete_is "balloonmgr -c $DEMO set --config b" "batch1 build1 "
complete_is "balloonmgr set web1 1G --c" "--config --connect --current "
complete_is "balloonmgr list --" "--all --connect --help --id --readonly --uuid --virtio-mem "
complete_is "balloonmgr verify --r" "--readonly --require "
complete_is "balloonmgr agent --listen loc" "localhost:9736 "
complete_is "balloonmgr status --proc $ROOT/demo/pro" "$ROOT/demo/proc "
complete_is "balloonmgr run " "--connect --dry-run --help --json --no-libvirt-duplicates --once --policy --proc --push --quiet --readonly --state --table --textfile "
complete_is "balloonmgr -c $DEMO status --policy $ROOT/demo/demo.policy w" "web1 web2 "
complete_is "balloonmgr -c $DEMO set 1" "1 "
complete_is "balloonmgr -c $DEMO set 3b1e2a50-6d1f-4a0e-9a51-00000000000" "3b1e2a50-6d1f-4a0e-9a51-000000000001 3b1e2a50-6d1f-4a0e-9a51-000000000002 3b1e2a50-6d1f-4a0e-9a51-000000000003 3b1e2a50-6d1f-4a0e-9a51-000000000004 3b1e2a50-6d1f-4a0e-9a51-000000000005 "
complete_is "balloonmgr -c $DEMO status 3b1e2a50-6d1f-4a0e-9a51-0000000000" "3b1e2a50-6d1f-4a0e-9a51-000000000001 3b1e2a50-6d1f-4a0e-9a51-000000000002 3b1e2a50-6d1f-4a0e-9a51-000000000003 3b1e2a50-6d1f-4a0e-9a51-000000000004 3b1e2a50-6d1f-4a0e-9a51-000000000005 3b1e2a50-6d1f-4a0e-9a51-000000000006 3b1e2a50-6d1f-4a0e-9a51-000000000007 "
complete_is "balloonmgr status --j" "--json "
complete_is "balloonmgr status --n" "--no-headings "
complete_is "balloonmgr status -o NAME,CU" "NAME,CURRENT "
complete_is "balloonmgr status -o NAME,F" "NAME,FPR "
complete_is "balloonmgr status -o SG,A" "SG,AGE SG,AUTODEFL SG,AVAIL "
complete_is "balloonmgr status -o +RE" "+READ +RECLAIMED "
complete_is "balloonmgr status -o +READ,SW" "+READ,SWAPIN +READ,SWAPOUT "
complete_is "balloonmgr verify --require s" "sg stats "
complete_is "balloonmgr verify --require sg,io" "sg,ioeventfd "
complete_is "balloonmgr -c $DEMO verify w" "web1 web2 "
complete_is "balloonmgr configure web1 --sg " "off on "
complete_is "balloonmgr configure web1 --s" "--sg --stats-period "
complete_is "balloonmgr -c $DEMO configure l" "legacy1 "

# the completion's options of every verb are its --help's (aliases named there, the global
# -c/-r after the verb), and each --help option is in the man page
man=$(<"$ROOT/man/balloonmgr.8.scd")
for v in list status set verify configure run policy agent; do
    help=$("$BM" "$v" --help)
    listed=$(sed -n '/^Options:/,/^$/p' <<<"$help" | grep -oE -- '^ +(-[a-zA-Z], )?--[a-z][a-z.-]+' |
        grep -oE -- '--[a-z][a-z.-]+' | sort -u)
    offered=$(_balloonmgr_opts "$v" | tr ' ' '\n' | sed 's/=$//' | sort -u)
    missing=""
    # (matched in bash: no process per option)
    for o in $listed; do
        [[ $man == *"*$o"* ]] || missing+=" man:$o"
        [[ $'\n'$offered$'\n' == *$'\n'"$o"$'\n'* ]] || missing+=" completion:$o"
    done
    for o in $offered; do
        [[ $'\n'$listed$'\n' == *$'\n'"$o"$'\n'* ]] || [[ $help == *"alias $o"* ]] ||
            [[ $o == --connect || $o == --readonly ]] || missing+=" help:$o"
    done
    if [ -z "$missing" ]; then ok 0 "$v: --help, the man page and the completion list the same options"; else
        ok 1 "$v: options missing in:$missing"; fi
done
tap_done
