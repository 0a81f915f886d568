#!/usr/bin/env bash
# Domain names are untrusted (issue 31): escaped once, for the format at hand. A table's \xNN
# decodes to the name itself (a TAB never to the name spelt with a literal backslash); UTF-8
# shows as itself on a UTF-8 locale; a quote never ends a log record's value; a CR never
# reaches stdout; two names that share their first 255 bytes are told apart in the records.
# Usage: test-names.sh BALLOONMGR SOURCE_ROOT   (TAP output)
set -u
BM=$1
ROOT=$2
. "$ROOT/tests/tap.sh"
T=$(mktemp -d)
export BALLOONMGR_RUNTIME_DIR=$T/run
mkdir -p "$T/run"
trap 'rm -rf "$T"' EXIT
NAMES="test://$ROOT/tests/data/names-hostile.xml"

# the names as libvirt has them, one a line (hex, so TAB and CR compare as bytes)
"$BM" -c "$NAMES" status --json >"$T/json" 2>"$T/err"
jq -r '.domains[].name | @base64' "$T/json" | while read -r b; do base64 -d <<<"$b" | od -An -tx1 | tr -d ' \n'; echo; done | sort >"$T/want"
[ "$(wc -l <"$T/want")" -eq 6 ]; ok_files $? "six hostile names read" "$T/err"

# decode a table's \xNN once (the escapes of libsmartcols, as --raw documents them)
decode_hex() { while IFS= read -r f; do printf '%b' "$f" | od -An -tx1 | tr -d ' \n'; echo; done; }

# status --raw: the first field of each line, decoded once, is the name
LC_ALL=C "$BM" -c "$NAMES" status --raw | tail -n +2 | cut -d' ' -f1 | decode_hex | sort >"$T/raw"
diff "$T/want" "$T/raw" >/dev/null; ok $? "status --raw: each name decoded once is the domain's name" "$(diff "$T/want" "$T/raw")"
# the table: escaped once ('caf\xc3\xa9', not 'caf\x5cxc3\x5cxa9'); the literal backslash once
LC_ALL=C "$BM" -c "$NAMES" status >"$T/table"
grep -q '^caf\\xc3\\xa9 ' "$T/table"; ok_files $? "status: café as caf\\xc3\\xa9 in the C locale" "$T/table"
[ "$(grep -c 'x5c' "$T/table")" -eq 1 ] && grep -q '^tab\\x5cx09name ' "$T/table" && grep -q '^tab\\x09name ' "$T/table"
ok_files $? "status: 'tab<TAB>name' and 'tab\\x09name' shown apart, each escaped once" "$T/table"
LC_ALL=C.UTF-8 "$BM" -c "$NAMES" status >"$T/table8"
grep -q '^café ' "$T/table8"; ok $? "status: café as itself in a UTF-8 locale" "$(head -3 "$T/table8")"
! grep -q $'\r' "$T/table" "$T/table8"; ok $? "status: no CR reaches stdout"

# a pass on the demo host with hostile names: one record per change, not forgeable
sed_repl() { sed 's/[\\&|]/\\&/g' <<<"$1"; }
host() { sed -e "s|<name>web2</name>|<name>$(sed_repl "$1")</name>|" \
    -e "s|<name>cache1</name>|<name>$(sed_repl "$2")</name>|" "$ROOT/demo/host.xml" >"$T/host.xml"; }
pass() {
    rm -f "$T/s.json"
    "$BM" -c "test://$T/host.xml" run --once --table --policy "$ROOT/demo/demo.policy" \
        --proc "$ROOT/demo/proc" --state "$T/s.json" "$@" >"$T/out" 2>"$T/err"
}
for q in "x' direction=deflate outcome=failed y='" "x\" outcome=failed y=\"" "x'\\'' y"; do
    host "$(sed 's/&/\&amp;/g; s/</\&lt;/g' <<<"$q")" "cr&#13;forged line"
    pass
    # outside the quoted value of domain= (up to its first quote), one outcome= a record
    recs=$(grep -c '^balloonmgr: change ' "$T/err")
    [ "$recs" -eq 2 ] && [ "$(grep '^balloonmgr: change ' "$T/err" | sed "s/domain='[^']*'//" | grep -o ' outcome=' | wc -l)" -eq 2 ]
    ok_files $? "run --once, a domain named $q: 2 change records, one outcome= each" "$T/err"
    # the value of domain='...' ends at the first quote and decodes to the name
    got=$(grep "uuid=3b1e2a50-6d1f-4a0e-9a51-000000000002$" "$T/err" | sed -n "s/^balloonmgr: change domain='\([^']*\)' .*/\1/p")
    [ "$(printf '%b' "$got")" = "$q" ]; ok $? "  its record's domain='...' decodes to the name" "$got"
    ! grep -q $'\r' "$T/out" "$T/err"; ok $? "  no CR on stdout or stderr (run --table)" "$(od -c "$T/out" | grep -m3 '\\r')"
    ! grep -q '^forged' "$T/out"; ok $? "  no forged line on stdout"
done

# two names that share their first 255 bytes: the records tell them apart (whole name, UUID)
long=$(printf 'a%.0s' $(seq 300))
host "${long}-web" "${long}-cache"
pass
grep "^balloonmgr: change " "$T/err" | sed 's/ direction=.* uuid=/ uuid=/' | sort -u >"$T/recs"
[ "$(wc -l <"$T/recs")" -eq 2 ] && grep -q "uuid=3b1e2a50-6d1f-4a0e-9a51-000000000002$" "$T/recs" &&
    grep -q "uuid=3b1e2a50-6d1f-4a0e-9a51-000000000004$" "$T/recs"
ok $? "names sharing their first 255 bytes: two records told apart by their UUID" "$(cut -c1-80,300- "$T/recs")"
tap_done
