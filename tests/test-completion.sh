#!/usr/bin/env bash
# Bash completion: verbs, options, and domain names from `balloonmgr list` on the given -c URI.
# Usage: test-completion.sh BALLOONMGR SOURCE_ROOT   (TAP output; skipped without bash-completion)
set -u
BM=$1 ROOT=$2
. "$ROOT/tests/tap.sh"
[ -r /usr/share/bash-completion/bash_completion ] || tap_skip_all "bash-completion is not installed"
# shellcheck disable=SC1091
. /usr/share/bash-completion/bash_completion
. "$ROOT/bash-completion/balloonmgr"
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

complete_is "balloonmgr " "agent configure list policy run set status verify "
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
complete_is "balloonmgr list --" "--all --help --id --uuid "
complete_is "balloonmgr -c $DEMO set 1" "1 "
complete_is "balloonmgr -c $DEMO set 3b1e2a50-6d1f-4a0e-9a51-00000000000" "3b1e2a50-6d1f-4a0e-9a51-000000000001 3b1e2a50-6d1f-4a0e-9a51-000000000002 3b1e2a50-6d1f-4a0e-9a51-000000000003 3b1e2a50-6d1f-4a0e-9a51-000000000004 3b1e2a50-6d1f-4a0e-9a51-000000000005 "
complete_is "balloonmgr -c $DEMO status 3b1e2a50-6d1f-4a0e-9a51-0000000000" "3b1e2a50-6d1f-4a0e-9a51-000000000001 3b1e2a50-6d1f-4a0e-9a51-000000000002 3b1e2a50-6d1f-4a0e-9a51-000000000003 3b1e2a50-6d1f-4a0e-9a51-000000000004 3b1e2a50-6d1f-4a0e-9a51-000000000005 3b1e2a50-6d1f-4a0e-9a51-000000000006 3b1e2a50-6d1f-4a0e-9a51-000000000007 "
complete_is "balloonmgr status --j" "--json "
complete_is "balloonmgr status --n" "--no-headings "
complete_is "balloonmgr status -o NAME,CU" "NAME,CURRENT "
complete_is "balloonmgr status -o NAME,F" "NAME,FPR "
complete_is "balloonmgr status -o SG,A" "SG,AGE SG,AUTODEFL SG,AVAIL "
complete_is "balloonmgr verify --require s" "sg stats "
complete_is "balloonmgr verify --require sg,io" "sg,ioeventfd "
complete_is "balloonmgr -c $DEMO verify w" "web1 web2 "
complete_is "balloonmgr configure web1 --sg " "off on "
complete_is "balloonmgr configure web1 --s" "--sg --stats-period "
complete_is "balloonmgr -c $DEMO configure l" "legacy1 "

# every long option of every verb's --help is in the man page and in the completion
for v in list status set verify configure run policy agent; do
    missing=""
    for o in $("$BM" "$v" --help | sed -n '/^Options:/,$p' | grep -oE -- '--[a-z][a-z.-]+' | sort -u); do
        grep -qF -- "*$o" "$ROOT/man/balloonmgr.8.scd" || missing+=" man:$o"
        grep -qF -- "$o" "$ROOT/bash-completion/balloonmgr" || missing+=" completion:$o"
    done
    if [ -z "$missing" ]; then ok 0 "$v --help options are in the man page and the completion"; else
        ok 1 "$v --help options missing in:$missing"; fi
done
tap_done
