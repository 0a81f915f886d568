#!/usr/bin/env bash
# The unit and cli tiers wait for conditions, never for a time, and check no durations
# (tests/meson.build says so; issue #33). Over every test meson lists in those suites (meson
# introspect), and the shell files they source:
#   - no fixed sleep: no `sleep` in a shell script but a poll's step (a line marked `# poll`:
#     it repeats until a condition holds), no sleep(), usleep() or nanosleep() in a C test;
#   - no timing threshold in a C test but through tap.h's timed_ok(), which the unit suite
#     skips (the slow suite's *-timing twins check them): no ok() line names a duration (a
#     variable set from now_s() - ...) but a timed_ok() one.
# The checks are shown to fail on planted offenders.
# Usage: test-tiers.sh SOURCE_ROOT BUILD_DIR   (TAP output)
set -u
ROOT=$1 BUILD=$2
. "$ROOT/tests/tap.sh"

# fixed_sleeps FILE...: the offending lines, FILE:LINE: TEXT (one grep for the scripts, one
# for the C files)
fixed_sleeps() {
    local f
    local -a sh=() c=()
    for f in "$@"; do
        case "$f" in *.sh) sh+=("$f") ;; *.c | *.h) c+=("$f") ;; esac
    done
    {
        [ ${#sh[@]} -eq 0 ] || grep -nHE '(^|[;&|({[:space:]])sleep([[:space:]]|$)' "${sh[@]}" | grep -v '# poll'
        [ ${#c[@]} -eq 0 ] || grep -nHE '\b(sleep|usleep|nanosleep|clock_nanosleep)[[:space:]]*\(' "${c[@]}"
    } | sed "s|^$ROOT/||"
}

# durations FILE: the names of the durations it measures: variables set from a clock read
# (now_s() - ..., cpu_s() - ..., bm_now_mono_ns() - ...) or from a call of a function of its
# own that reads one (any clock_gettime(): wall or CPU time)
durations() {
    awk '
        /^static [a-z_ ]+\*? *[a-z_][a-z0-9_]*\(/ { fn = $0; sub(/\(.*/, "", fn); sub(/.* \**/, "", fn) }
        /^}/ { fn = "" }
        /(now_s|cpu_s|bm_now_mono_ns)\(\)|clock_gettime\(CLOCK_/ && fn != "" { clock[fn] = 1 }
        { line[NR] = $0 }
        END {
            for (i = 1; i <= NR; i++) {
                if (match(line[i], /[a-z_][a-z0-9_]* *= *(now_s|cpu_s|bm_now_mono_ns)\(\) *-/)) {
                    v = substr(line[i], RSTART, RLENGTH); sub(/ *=.*/, "", v); print v
                }
                for (f in clock)
                    if (match(line[i], "[a-z_][a-z0-9_]* *= *" f "\\(")) {
                        v = substr(line[i], RSTART, RLENGTH); sub(/ *=.*/, "", v); print v
                    }
            }
        }' "$1" | sort -u
}

# untimed FILE...: checks of a duration outside timed_ok(), FILE:LINE: TEXT; counts the
# durations seen in $ndurations
untimed() {
    local f v
    ndurations=0
    for f in "$@"; do
        local -a vs
        mapfile -t vs < <(durations "$f")
        [ ${#vs[@]} -gt 0 ] || continue
        ndurations=$((ndurations + ${#vs[@]}))
        local IFS='|'
        # (string literals blanked: "unknown user" is no variable)
        sed -E 's/"([^"\\]|\\.)*"/""/g' "$f" | grep -nE "(^|[^_a-z])ok\(.*\b(${vs[*]})\b" |
            sed "s|^|${f#"$ROOT"/}:|"
        unset IFS
    done
}

# the tests of the two tiers: their scripts (and what those source) and their C sources
tests=$(meson introspect --tests "$BUILD" 2>/dev/null |
    jq -r '.[] | select(any(.suite[]; test(":(unit|cli)$"))) | .cmd[0]')
n=$(printf '%s\n' "$tests" | grep -c .)
ok $((n >= 40 ? 0 : 1)) "the unit and cli tiers: $n tests (meson introspect --tests)"
files=()
for c in $(printf '%s\n' "$tests" | sort -u); do
    case "$c" in
    *.sh) files+=("$c")
          for s in $(sed -nE 's|^[[:space:]]*\. "\$\(dirname "\$0"\)/([a-z.-]+\.sh)".*|\1|p; s|^[[:space:]]*\. "\$ROOT/tests/([a-z.-]+\.sh)".*|\1|p' "$c"); do
              files+=("$ROOT/tests/$s")
          done ;;
    */fuzz/fuzz-replay-*) files+=("$ROOT/fuzz/fuzz-${c##*/fuzz-replay-}.c" "$ROOT/fuzz/replay.c") ;;
    *) [ -f "$ROOT/tests/${c##*/}.c" ] && files+=("$ROOT/tests/${c##*/}.c") ;;
    esac
done
# (this script names what it looks for)
mapfile -t files < <(printf '%s\n' "${files[@]}" | grep -v '/test-tiers\.sh$' | sort -u)
for f in "${files[@]}"; do [ -f "$f" ] || ok 1 "a source of the tiers is missing: $f"; done
nsh=$(printf '%s\n' "${files[@]}" | grep -c '\.sh$')
nc=$(printf '%s\n' "${files[@]}" | grep -c '\.c$')
ok $((nsh >= 15 && nc >= 25 ? 0 : 1)) "their sources: $nsh shell scripts, $nc C files"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$(fixed_sleeps "${files[@]}")
[ -z "$out" ]; ok $? "no fixed sleep in them (but a poll's step, marked so)" "$out"
cfiles=()
for f in "${files[@]}"; do [[ $f == *.c ]] && cfiles+=("$f"); done
untimed "${cfiles[@]}" >"$tmp/untimed"
out=$(<"$tmp/untimed") nd=$ndurations
[ -z "$out" ]; ok $? "every duration they compare is a timed_ok() (skipped in the unit suite)" "$out"
ok $((nd >= 3 ? 0 : 1)) "  (the scan saw $nd durations measured, all checked by timed_ok())"

# the checks fail where they should
printf 'x=1\nsleep 2\nwhile :; do f && break; sleep 0.1; done\n' >"$tmp/a.sh"
printf 'while :; do sleep 0.02 # poll: until f\ndone\n' >"$tmp/b.sh"
printf 'int main(void) { usleep(1000); return 0; }\n' >"$tmp/c.c"
printf 'double took = now_s() - t0;\nok(took < 2, "fast");\ntimed_ok(took < 2, "fast");\n' >"$tmp/d.c"
printf 'static double cost(int n)\n{\n    uint64_t t0 = bm_now_mono_ns();\n    return n;\n}\nstatic void t(void)\n{\n    double a = cost(1), b = cost(2);\n    ok(a < b * 3, "alike");\n}\n' >"$tmp/e.c"
[ "$(fixed_sleeps "$tmp/a.sh" | wc -l)" -eq 2 ]; ok $? "planted: two fixed sleeps in a script are found"
[ -z "$(fixed_sleeps "$tmp/b.sh")" ]; ok $? "planted: a marked poll step is not"
[ "$(fixed_sleeps "$tmp/c.c" | wc -l)" -eq 1 ]; ok $? "planted: usleep() in C is found"
[ "$(untimed "$tmp/d.c")" = "$tmp/d.c:2:ok(took < 2, \"\");" ]
ok $? "planted: a duration checked in ok() is found, in timed_ok() not"
[ "$(untimed "$tmp/e.c")" = "$tmp/e.c:9:    ok(a < b * 3, \"\");" ]
ok $? "planted: a duration from a function of the test that reads the clock is found"
printf 'static double cpu(int n)\n{\n    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);\n    return n;\n}\nstatic void t(void)\n{\n    double a = cpu(1);\n    ok(a < 3, "cheap");\n}\n' >"$tmp/f.c"
[ "$(untimed "$tmp/f.c")" = "$tmp/f.c:9:    ok(a < 3, \"\");" ]
ok $? "planted: a CPU time checked in ok() is found too"
tap_done
