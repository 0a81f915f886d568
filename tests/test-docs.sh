#!/usr/bin/env bash
# Issue 52, the docs are the binary's own: README's sample outputs of the demo host ('$
# balloonmgr -c test:///$PWD/demo/host.xml ...' in a ``` block, the lines after it up to the
# next '$' or the block's end) are what the binary prints today, and so is the summary line
# of a pass in README and balloonmgr(8); README's latency buckets are src/metrics.c's; the
# man page renders at 80 columns without a warning, its journal fields whole.
# Usage: test-docs.sh BALLOONMGR SOURCE_ROOT BUILD_ROOT   (TAP output)
set -u
BM=$(realpath "$1") ROOT=$(realpath "$2") BUILD=$(realpath "$3")
. "$ROOT/tests/tap.sh"
export LC_ALL=C.UTF-8
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$ROOT" || exit 1 # the samples name demo/ relative to the source tree

# --- README's samples of the demo host, each run again
n=0
while IFS= read -r -d '' sample; do
    n=$((n + 1))
    cmd=${sample%%$'\n'*}
    want=${sample#*$'\n'}
    read -r -a words <<<"${cmd#\$ balloonmgr }"
    words=("${words[@]//\$PWD/$ROOT}")
    # a pass that is not a dry run keeps its state in a file of the test's
    [[ " ${words[*]} " == *" run "* ]] && words+=(--state "$T/state-$n.json")
    # what was measured is not compared: 'inflate ended in 0.000 s' (the README's) is any time
    got=$("$BM" "${words[@]}" 2>/dev/null | sed -E 's/ ended in [0-9.]+ s$/ ended in 0.000 s/')
    [ "$got" = "${want%$'\n'}" ]
    ok $? "README: '${cmd:0:120}' prints what README shows" "$(diff <(printf '%s\n' "${want%$'\n'}") <(printf '%s\n' "$got"))"
done < <(awk '
    /^```/ { inblock = !inblock; if (cur != "") { printf "%s%c", cur, 0; cur = "" } next }
    inblock && /^\$ balloonmgr -c test:\/\/\/\$PWD\/demo\/host\.xml / { if (cur != "") printf "%s%c", cur, 0; cur = $0 "\n"; next }
    inblock && /^\$ / { if (cur != "") printf "%s%c", cur, 0; cur = ""; next }
    inblock && cur != "" { cur = cur $0 "\n" }
' README.md)
[ "$n" -ge 3 ]; ok $? "README: $n samples of the demo host checked (status, status -o, run --once)"

# --- the summary line of a pass off a terminal, in README and the man page
line=$("$BM" -c "test:///$ROOT/demo/host.xml" run --once --policy demo/demo.policy --proc demo/proc --state "$T/summary.json" 2>/dev/null)
grep -qxF "	$line" man/balloonmgr.8.scd; ok $? "balloonmgr(8): the summary line is the binary's" "$line"
counts=${line#*): }
tr '\n' ' ' <README.md | tr -s ' ' | grep -qF "mode reclaim (...): $counts"; ok $? "README: the summary line is the binary's" "$counts"

# --- README's latency buckets: src/metrics.c's first and last
buckets=$(sed -n '/bm_latency_buckets\[\] = {/,/};/p' src/metrics.c | tr -d ' \n' | sed 's/.*{//; s/}.*//')
first=${buckets%%,*} last=${buckets##*,}
tr '\n' ' ' <README.md | tr -s ' ' | grep -qF "buckets from $first to $last s"
ok $? "README: the latency buckets are src/metrics.c's ($first to $last s)"
! grep -q "no libsystemd" README.md; ok $? "README: no 'no libsystemd' (the binary links it)"

# --- balloonmgr(8) at 80 columns: no warning, the journal's field names whole
page=$BUILD/man/balloonmgr.8
if [ -r "$page" ] && command -v man >/dev/null; then
    MANWIDTH=80 man --warnings -l "$page" >"$T/man" 2>"$T/man.err"
    [ ! -s "$T/man.err" ]; ok_files $? "balloonmgr(8): MANWIDTH=80 man --warnings: no warning" "$T/man.err"
    missing=""
    for f in $(grep -oE 'BALLOONMGR_[A-Z_]+[A-Z]' man/balloonmgr.8.scd | sort -u); do
        grep -qE "^ +$f\$" "$T/man" || missing+=" $f"
    done
    [ -z "$missing" ]; ok $? "balloonmgr(8): every journal field on a line of its own, whole" "missing:$missing"
    ! grep -q '‐$' "$T/man"; ok $? "balloonmgr(8): no word hyphenated at a line's end"
else
    tap_skip "balloonmgr(8) not built or man not installed"
fi
tap_done
