#!/usr/bin/env bash
# tests/integration/lib/check-promql.sh -- run every PromQL expression of the Grafana
# dashboard and of the alert rules against a live Prometheus.
#
# Usage: check-promql.sh [--require-data] [--url URL] [--dashboard FILE]...
#                        [--rules FILE]... [--interval DUR] [--range DUR]
#                        [--empty-ok METRIC]... [--quiet]
#
#   --url URL         Prometheus to ask [$BM_PROM_URL]
#   --dashboard FILE  Grafana dashboard JSON [contrib/grafana/balloonmgr-dashboard.json]
#   --rules FILE      Prometheus rule file [contrib/prometheus/balloonmgr-alerts.yml]
#                     (the defaults apply only when neither option is given)
#   --interval DUR    what $__interval / $__rate_interval become [1m]
#   --range DUR       what $__range becomes [1h]
#   --require-data    also fail (exit 2) when an expression that should have
#                     data returns none (or only NaN)
#   --empty-ok METRIC with --require-data: an expression that reads METRIC may
#                     return no data (a host that cannot have that series); it is
#                     listed as "empty-ok", not failed
#   --quiet           print only problems and the summary
#
# What is checked (one table row each: KIND SERIES STATUS SOURCE EXPR):
#   panel  every targets[].expr of every panel (rows' nested panels included).
#          Grafana variables are replaced: $__rate_interval/$__interval by
#          --interval, $__range by --range (and the _s/_ms forms), label="$var"
#          by label=~".*", any other $var / ${var} / ${var:fmt} / [[var]] by .*
#   var    every query variable: label_values(M, l) is run as count by (l) (M),
#          label_values(l) as count by (l) ({l!=""}), query_result(E) as E
#   record every recording rule's expr (data required like a panel's)
#   series every recording rule of the files that the Prometheus at URL has loaded: the
#          recorded name itself (the rule ran and produced its series; data
#          required like a panel's)
#   alert  every alerting rule's expr as written. An alert expression
#          returns series only while its condition holds, so it is only required
#          not to error; SERIES is how many series fire now, STATUS firing/quiet
#   probe  the data an alert expression is computed from: the expression with
#          its top-level comparisons cut off (their left side, and the right
#          side unless it is a number), split at top-level or / and / unless
#          (the right side of unless dropped), absent(X) replaced by X. E.g.
#          "up{job="b"} == 0 or absent(up{job="b"})" probes up{job="b"} twice.
#          With --require-data each probe must return data: this catches a
#          misspelt metric or label that would leave an alert silent forever.
#   eval   rules that the Prometheus at URL has loaded and whose last
#          evaluation failed (/api/v1/rules health "err") count as errors.
#
# Exit: 0 all fine; 1 an expression errored (parse error, unknown function,
# many-to-many match, ...) or a rule file could not be read; 2 (--require-data)
# some panel/var/probe expression returned no data. Not a test by itself:
# integration tests run it against a Prometheus scraping a real agent
# (see prom.sh).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
url=${BM_PROM_URL:-}
require_data=0 quiet=0 interval=1m range=1h
dashboards=() rules=() empty_ok=()

usage() { sed -n '4,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 1; }
while [ $# -gt 0 ]; do
    case "$1" in
        --url) url=$2; shift 2 ;;
        --dashboard) dashboards+=("$2"); shift 2 ;;
        --rules) rules+=("$2"); shift 2 ;;
        --interval) interval=$2; shift 2 ;;
        --range) range=$2; shift 2 ;;
        --require-data) require_data=1; shift ;;
        --empty-ok) empty_ok+=("$2"); shift 2 ;;
        --quiet) quiet=1; shift ;;
        -h|--help) usage ;;
        *) echo "check-promql: unknown argument '$1'" >&2; usage ;;
    esac
done
if [ ${#dashboards[@]} -eq 0 ] && [ ${#rules[@]} -eq 0 ]; then
    dashboards=("$repo/contrib/grafana/balloonmgr-dashboard.json")
    rules=("$repo/contrib/prometheus/balloonmgr-alerts.yml")
fi
[ -n "$url" ] || { echo "check-promql: no Prometheus (--url or BM_PROM_URL)" >&2; exit 1; }
for t in curl jq awk; do
    command -v "$t" >/dev/null || { echo "check-promql: $t missing" >&2; exit 1; }
done

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# seconds DUR: a Prometheus duration (1m, 90s, 1h30m) in seconds.
seconds() {
    awk -v d="$1" 'BEGIN {
        split("ms s m h d w y", u, " "); f["ms"] = 0.001; f["s"] = 1; f["m"] = 60; f["h"] = 3600
        f["d"] = 86400; f["w"] = 604800; f["y"] = 31536000; t = 0; s = d
        while (match(s, /^[0-9]+(ms|s|m|h|d|w|y)/)) {
            part = substr(s, 1, RLENGTH); s = substr(s, RLENGTH + 1)
            match(part, /^[0-9]+/); n = substr(part, 1, RLENGTH); unit = substr(part, RLENGTH + 1)
            t += n * f[unit]
        }
        if (s != "" || d == "") exit 1
        printf "%d\n", t }'
}
interval_s=$(seconds "$interval") || { echo "check-promql: bad --interval $interval" >&2; exit 1; }
range_s=$(seconds "$range") || { echo "check-promql: bad --range $range" >&2; exit 1; }

# subst EXPR: Grafana variables -> PromQL (see the top of this file).
subst() {
    sed -E \
        -e "s/\\\$\\{?__rate_interval\\}?/$interval/g" \
        -e "s/\\\$\\{?__interval_ms\\}?/$((interval_s * 1000))/g" \
        -e "s/\\\$\\{?__interval\\}?/$interval/g" \
        -e "s/\\\$\\{?__range_ms\\}?/$((range_s * 1000))/g" \
        -e "s/\\\$\\{?__range_s\\}?/$range_s/g" \
        -e "s/\\\$\\{?__range\\}?/$range/g" \
        -e 's/=[[:space:]]*"\$\{?[A-Za-z_][A-Za-z0-9_]*(:[^}"]*)?\}?"/=~".*"/g' \
        -e 's/\$\{[A-Za-z_][A-Za-z0-9_]*(:[^}]*)?\}/.*/g' \
        -e 's/\[\[[A-Za-z_][A-Za-z0-9_]*(:[^]]*)?\]\]/.*/g' \
        -e 's/\$[A-Za-z_][A-Za-z0-9_]*/.*/g' <<<"$1"
}

# oneline EXPR: whitespace squeezed, for display.
oneline() { tr '\n\t' '  ' <<<"$1" | sed -E 's/  +/ /g; s/^ //; s/ $//'; }

# The checks: parallel arrays.
kinds=() srcs=() exprs=()
add() { kinds+=("$1"); srcs+=("$2"); exprs+=("$3"); }

# ---------------------------------------------------------------------------
# Dashboard expressions
# ---------------------------------------------------------------------------
# file_error MSG: a dashboard or rule file that cannot be checked.
file_errors=()
file_error() { echo "check-promql: $*" >&2; file_errors+=("$*"); }

for f in "${dashboards[@]}"; do
    if ! jq -e . "$f" >/dev/null 2>&1; then
        file_error "$f: not readable JSON"; continue
    fi
    while IFS= read -r item; do
        src=$(jq -r '.src' <<<"$item" | base64 -d)
        expr=$(jq -r '.expr' <<<"$item" | base64 -d)
        add panel "$src" "$(subst "$expr")"
    done < <(jq -c '[.. | objects | select(has("targets") and (.targets | type) == "array")
                     | . as $p | .targets[] | select((.expr // "") != "")
                     | {src: ("\($p.title // "untitled")/\(.refId // "?")" | @base64),
                        expr: (.expr | @base64)}] | .[]' "$f")
    while IFS= read -r item; do
        name=$(jq -r '.name' <<<"$item")
        q=$(jq -r '.q' <<<"$item" | base64 -d)
        q=$(oneline "$q")
        if [[ $q =~ ^label_values\((.*),[[:space:]]*([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*\)$ ]]; then
            q="count by (${BASH_REMATCH[2]}) (${BASH_REMATCH[1]})"
        elif [[ $q =~ ^label_values\([[:space:]]*([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*\)$ ]]; then
            q="count by (${BASH_REMATCH[1]}) ({${BASH_REMATCH[1]}!=\"\"})"
        elif [[ $q =~ ^query_result\((.*)\)$ ]]; then
            q=${BASH_REMATCH[1]}
        elif [[ $q =~ ^(metrics|label_names)\( ]]; then
            continue
        fi
        add var "\$$name" "$(subst "$q")"
    done < <(jq -c '.templating.list[]? | select(.type == "query")
                    | {name, q: ((if (.query | type) == "object" then .query.query else .query end)
                                 // "" | @base64)} | select(.q != "")' "$f")
done

# ---------------------------------------------------------------------------
# Rule expressions (a YAML subset: the rule items of groups[].rules[], expr as
# a plain, quoted or block scalar). The number found is checked against
# promtool's count, so a form this parser misses is an error, not a skip.
# ---------------------------------------------------------------------------
# shellcheck disable=SC2016
parse_rules='
function flush() {
    if (kind != "") { n++; print kind > (dir "/" n ".kind"); print name > (dir "/" n ".name")
                      printf "%s", unquote(ex) > (dir "/" n ".expr")
                      close(dir "/" n ".kind"); close(dir "/" n ".name"); close(dir "/" n ".expr") }
    kind = ""; name = ""; ex = ""; inexpr = 0
}
function unquote(s,   q, out, i, c) {
    sub(/^[ \t\n]+/, "", s); sub(/[ \t\n]+$/, "", s)
    q = substr(s, 1, 1)
    if ((q == "\"" || q == "\047") && substr(s, length(s), 1) == q) {
        s = substr(s, 2, length(s) - 2)
        if (q == "\047") { gsub(/\047\047/, "\047", s); return s }
        out = ""
        for (i = 1; i <= length(s); i++) {
            c = substr(s, i, 1)
            if (c == "\\") { i++; c = substr(s, i, 1); if (c == "n") c = "\n"; else if (c == "t") c = "\t" }
            out = out c
        }
        return out
    }
    return s
}
function indent(s) { match(s, /^ */); return RLENGTH }
{
    line = $0; ind = indent(line); body = substr(line, ind + 1)
    if (inexpr) {
        if (body == "" || ind > exind) {
            if (block == "plain") sub(/[ \t]+#.*$/, "", body)
            ex = ex (ex == "" ? "" : (block == "|" ? "\n" : " ")) body
            next
        }
        inexpr = 0
    }
    if (body ~ /^#/ || body == "") next
    if (body ~ /^rules:[ \t]*(#.*)?$/) { flush(); ruleind = -1; inrules = 1; rulesind = ind; next }
    # The rules block ends at a line less indented than "rules:", or as indented
    # but not an item of it (YAML lets the items sit at the key'"'"'s indentation).
    if (inrules && (ind < rulesind || (ind == rulesind &&
                    !(body ~ /^- / && (ruleind < 0 || ruleind == rulesind))))) { flush(); inrules = 0 }
    if (!inrules) next
    if (body ~ /^- /) {
        if (ruleind < 0) ruleind = ind
        if (ind == ruleind) {
            flush(); body = substr(body, 3); ind += 2
            match(body, /^ */); ind += RLENGTH; body = substr(body, RLENGTH + 1); keyind = ind
        }
    }
    if (ind != keyind) next
    if (match(body, /^(alert|record):[ \t]*/)) {
        kind = substr(body, 1, index(body, ":") - 1); name = unquote(substr(body, RLENGTH + 1)); next
    }
    if (match(body, /^expr:[ \t]*/)) {
        v = substr(body, RLENGTH + 1); hdr = v; sub(/[ \t]+#.*$/, "", hdr)
        inexpr = 1; exind = ind
        if (hdr ~ /^[|>][-+0-9]*$/) { block = substr(hdr, 1, 1); ex = "" }
        else { block = "plain"; ex = v; if (v !~ /^["\047]/) { sub(/[ \t]+#.*$/, "", ex) } else block = "quoted" }
    }
}
END { flush() }'

for f in "${rules[@]}"; do
    if [ ! -r "$f" ]; then
        file_error "$f: not readable"; continue
    fi
    d=$tmp/rules.${#kinds[@]}; mkdir -p "$d"
    awk -v dir="$d" "$parse_rules" "$f"
    found=$(find "$d" -name '*.kind' | wc -l)
    if command -v promtool >/dev/null; then
        out=$(promtool check rules "$f" 2>&1)
        want=$(sed -n 's/.*SUCCESS: \([0-9]*\) rules found.*/\1/p' <<<"$out")
        if [ -z "$want" ]; then
            echo "$out" >&2; file_error "promtool check rules $f failed"; continue
        fi
        if [ "$want" != "$found" ]; then
            file_error "$f: found $found rules, promtool counts $want (a YAML form this script does not parse)"
            continue
        fi
    fi
    for ((i = 1; i <= found; i++)); do
        add "$(cat "$d/$i.kind")" "$(cat "$d/$i.name")" "$(cat "$d/$i.expr")"
    done
done

# probes EXPR: the data expressions under an alert expression, one a line.
# shellcheck disable=SC2016
probe_awk='
function trim(s) { sub(/^[ \t\n]+/, "", s); sub(/[ \t\n]+$/, "", s); return s }
# decomment: drop # comments (outside strings), make the expression one line
function decomment(s,   i, n, c, q, out) {
    n = length(s); q = ""; out = ""
    for (i = 1; i <= n; i++) {
        c = substr(s, i, 1)
        if (q != "") { out = out c; if (c == "\\" && q != "`") { i++; out = out substr(s, i, 1) }
                       else if (c == q) q = ""; continue }
        if (c == "\"" || c == "\047" || c == "`") q = c
        if (c == "#") { while (i <= n && substr(s, i, 1) != "\n") i++; c = " " }
        if (c == "\n" || c == "\t") c = " "
        out = out c
    }
    return out
}
# close_of(s, i): index of the bracket closing the one at i, 0 if none
function close_of(s, i,   n, c, q, depth) {
    n = length(s); q = ""; depth = 0
    for (; i <= n; i++) {
        c = substr(s, i, 1)
        if (q != "") { if (c == "\\" && q != "`") i++; else if (c == q) q = ""; continue }
        if (c == "\"" || c == "\047" || c == "`") { q = c; continue }
        if (c == "(" || c == "[" || c == "{") depth++
        else if (c == ")" || c == "]" || c == "}") { depth--; if (depth == 0) return i }
    }
    return 0
}
# last_top(s, what): position of the last top-level keyword of the
# space-separated list what ("or", "and unless"), or of a comparison when
# what is "cmp"; sets OPLEN. 0 if none.
function last_top(s, what,   n, i, c, c2, q, depth, pos, k, nk, kws, lw, prev, nxt) {
    n = length(s); q = ""; depth = 0; pos = 0; nk = split(what, kws, " ")
    for (i = 1; i <= n; i++) {
        c = substr(s, i, 1)
        if (q != "") { if (c == "\\" && q != "`") i++; else if (c == q) q = ""; continue }
        if (c == "\"" || c == "\047" || c == "`") { q = c; continue }
        if (c == "(" || c == "[" || c == "{") { depth++; continue }
        if (c == ")" || c == "]" || c == "}") { depth--; continue }
        if (depth != 0) continue
        if (what == "cmp") {
            c2 = substr(s, i, 2)
            if (c2 == "==" || c2 == "!=" || c2 == ">=" || c2 == "<=") { pos = i; OPLEN = 2; i++; continue }
            if (c == ">" || c == "<") { pos = i; OPLEN = 1 }
            continue
        }
        for (k = 1; k <= nk; k++) {
            lw = length(kws[k])
            if (tolower(substr(s, i, lw)) != kws[k]) continue
            prev = (i == 1) ? " " : substr(s, i - 1, 1); nxt = substr(s, i + lw, 1)
            if (prev ~ /[A-Za-z0-9_:]/ || nxt ~ /[A-Za-z0-9_:]/) continue
            pos = i; OPLEN = lw; KW = kws[k]
        }
    }
    return pos
}
function strip_outer(s,   e) {
    s = trim(s)
    while (substr(s, 1, 1) == "(" && close_of(s, 1) == length(s)) s = trim(substr(s, 2, length(s) - 2))
    return s
}
# strip_mods: leading bool / on(...) / ignoring(...) / group_left(...) / group_right(...)
function strip_mods(s,   e) {
    while (1) {
        s = trim(s)
        if (match(s, /^(on|ignoring|group_left|group_right)[ \t]*\(/)) {
            e = close_of(s, RLENGTH); if (!e) return s; s = substr(s, e + 1); continue
        }
        if (match(s, /^(bool|group_left|group_right)([^A-Za-z0-9_:]|$)/)) {
            match(s, /^[a-z_]+/); s = substr(s, RLENGTH + 1); continue
        }
        return s
    }
}
function is_number(s) {
    s = strip_outer(s)
    return s ~ /^[-+]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|0[xX][0-9a-fA-F]+|[Ii][Nn][Ff]|[Nn][Aa][Nn])$/
}
function emit(s) { s = trim(s); if (s != "" && !(s in seen)) { seen[s] = 1; print s } }
function probe(s,   p, l, r, k, kw) {
    s = strip_outer(s)
    p = last_top(s, "or")
    if (p) { l = substr(s, 1, p - 1); r = strip_mods(substr(s, p + OPLEN)); probe(l); probe(r); return }
    p = last_top(s, "and unless")
    if (p) { kw = KW; l = substr(s, 1, p - 1); r = strip_mods(substr(s, p + OPLEN)); probe(l)
             if (kw == "and") probe(r); return }
    p = last_top(s, "cmp")
    if (p) { l = substr(s, 1, p - 1); r = strip_mods(substr(s, p + OPLEN)); probe(l)
             if (!is_number(r)) probe(r); return }
    if (match(s, /^absent(_over_time)?[ \t]*\(/)) {
        k = close_of(s, RLENGTH)
        if (k == length(s)) { probe(substr(s, RLENGTH + 1, k - RLENGTH - 1)); return }
    }
    emit(s)
}
BEGIN { probe(decomment(ENVIRON["EXPR"])) }'

# The recorded series: a recording rule of the files that the Prometheus at URL has loaded
# must have produced its series (what a dashboard on recorded names reads).
rules_json=$(curl -sS -m 30 "$url/api/v1/rules" 2>/dev/null || true)
loaded_records=$(jq -r '.data.groups[]?.rules[]? | select(.type == "recording") | .name' <<<"$rules_json" 2>/dev/null)
n=${#kinds[@]}
for ((i = 0; i < n; i++)); do
    [ "${kinds[i]}" = record ] || continue
    grep -qxF -- "${srcs[i]}" <<<"$loaded_records" && add series "${srcs[i]}" "${srcs[i]}"
done

n=${#kinds[@]}
for ((i = 0; i < n; i++)); do
    [ "${kinds[i]}" = alert ] || continue
    while IFS= read -r p; do
        [ -n "$p" ] && add probe "${srcs[i]}" "$p"
    done < <(EXPR=${exprs[i]} awk "$probe_awk")
done

# ---------------------------------------------------------------------------
# Evaluate
# ---------------------------------------------------------------------------
# evaluate EXPR: prints "STATUS COUNT MESSAGE" (STATUS ok, empty, nan, error).
evaluate() {
    local body
    body=$(curl -sS -m 60 --data-urlencode "query=$1" "$url/api/v1/query" 2>&1) ||
        { echo "error 0 curl: $body"; return; }
    jq -r 'if .status != "success" then "error 0 \(.errorType): \(.error)"
           else .data as $d
           | (if ($d.resultType == "scalar" or $d.resultType == "string")
              then [{value: $d.result}] else $d.result end) as $r
           | ($r | length) as $n
           | (if $n == 0 then "empty"
              elif ([$r[] | (.value[1]? // .values[-1][1]?)] | all(. == "NaN")) then "nan"
              else "ok" end) + " \($n) -" end' <<<"$body" 2>/dev/null ||
        echo "error 0 not a Prometheus API answer: $(head -c 200 <<<"$body")"
}

n=${#kinds[@]}
nodata=() failed=()
row() { printf '%-6s %6s %-7s %-34s %s\n' "$@"; }
[ "$quiet" = 1 ] || row KIND SERIES STATUS SOURCE EXPR
for ((i = 0; i < n; i++)); do
    read -r status count msg < <(evaluate "${exprs[i]}")
    show=$status
    if [ "${kinds[i]}" = alert ] && [ "$status" != error ]; then
        [ "$count" -gt 0 ] && show=firing || show=quiet
    fi
    line=$(row "${kinds[i]}" "$count" "$show" "${srcs[i]:0:34}" "$(oneline "${exprs[i]}")")
    case "$status" in
        error)
            failed+=("$line")
            echo "$line"; echo "       -> $msg" ;;
        empty|nan)
            allowed=0
            [ "${kinds[i]}" = alert ] || for m in "${empty_ok[@]}"; do
                [[ "${exprs[i]}" =~ (^|[^a-zA-Z0-9_:])"$m"([^a-zA-Z0-9_:]|$) ]] && allowed=1
            done
            if [ "$allowed" = 1 ]; then
                line=$(row "${kinds[i]}" "$count" empty-ok "${srcs[i]:0:34}" "$(oneline "${exprs[i]}")")
            elif [ "${kinds[i]}" != alert ]; then nodata+=("$line"); fi
            [ "$quiet" = 1 ] || echo "$line" ;;
        *)  [ "$quiet" = 1 ] || echo "$line" ;;
    esac
done

# Rules loaded in that Prometheus whose evaluation failed.
loaded=$(jq -r '[.data.groups[]?.rules[]?] | length' <<<"$rules_json" 2>/dev/null || echo 0)
while IFS= read -r l; do
    [ -n "$l" ] || continue
    failed+=("eval   $l")
    echo "eval   error   $l"
done < <(jq -r '.data.groups[]? | .name as $g | .rules[]? | select(.health == "err")
                | "\($g)/\(.name): \(.lastError)"' <<<"$rules_json" 2>/dev/null)

for l in "${file_errors[@]}"; do failed+=("file   $l"); done
echo
echo "check-promql: ${n} expressions against $url ($( ((n)) && printf '%s\n' "${kinds[@]}" |
    sort | uniq -c | awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }' || echo none)); $loaded rules" \
    "loaded there; ${#failed[@]} errors; ${#nodata[@]} without data"
if [ ${#failed[@]} -gt 0 ]; then
    echo "errors:"; printf '  %s\n' "${failed[@]}"
    exit 1
fi
if [ ${#nodata[@]} -gt 0 ]; then
    echo "no data (empty or NaN):"; printf '  %s\n' "${nodata[@]}"
    [ "$require_data" = 1 ] && exit 2
fi
exit 0
