#!/usr/bin/env bash
# Issue 52, the live view: 'balloonmgr status --watch' in a real terminal (tmux, a server of
# its own): the host line and each domain's balloon, usable memory, RSS and the policy's
# decision, sorted by --sort, redrawn every interval; 's' sorts by the next column, a resize
# redraws to the new width, 'q' quits and gives the terminal back. Every step waits for what
# the screen shows (tests/agent.sh's wait_until), never for a time.
# Usage: test-watch.sh BALLOONMGR SOURCE_ROOT   (TAP; skipped without tmux)
set -u
BM=$1 ROOT=$2
. "$ROOT/tests/tap.sh"
. "$ROOT/tests/agent.sh"
command -v tmux >/dev/null || tap_skip_all "tmux is not installed"
export LC_ALL=C.UTF-8
DEMO="test://$ROOT/demo/host.xml"
T=$(mktemp -d)
TM=(tmux -L "bm-watch-$$" -f /dev/null)
trap '"${TM[@]}" kill-server 2>/dev/null; rm -rf "$T"' EXIT

screen() { "${TM[@]}" capture-pane -p -t view >"$T/screen" 2>/dev/null; }
# shows TEXT: the screen has a line containing TEXT (fixed string)
shows() { screen && grep -qF -- "$1" "$T/screen"; }

# the command ends in 'exec cat': the pane stays after balloonmgr exits, and shows what it left
cmd=$(printf '%q ' "$BM" -c "$DEMO" status --watch=1 --sort RSS --proc "$ROOT/demo/proc" --policy "$ROOT/demo/demo.policy")
"${TM[@]}" new-session -d -s view -x 100 -y 40 "$cmd; echo EXITED rc=\$?; exec cat"
wait_until shows "sorted by RSS; s: sort, q: quit"
ok_files $? "watch: the view starts, sorted by --sort RSS" "$T/screen"
wait_until shows "legacy1"
ok_files $? "watch:   every domain is shown" "$T/screen"
head -1 "$T/screen" | grep -q '^balloonmgr status --watch: every 1 s' &&
    sed -n 2p "$T/screen" | grep -q '^host: MemTotal 64 GiB, MemAvailable 4 GiB'
ok_files $? "watch:   the view's line, then the host line" "$T/screen"
[ "$(grep -m1 '^NAME ' "$T/screen" | tr -s ' ')" = "NAME STATE CURRENT USABLE RSS ACTION TARGET REASON" ]
ok_files $? "watch:   the balloon, usable memory, RSS and the policy's decision" "$T/screen"
[ "$(grep -oE '^(batch1|build1|cache1|db1|legacy1|web1|web2) ' "$T/screen" | tr -d ' ' | tr '\n' ' ')" = "cache1 db1 build1 web2 web1 batch1 legacy1 " ]
ok_files $? "watch:   largest RSS first, absent last" "$T/screen"
grep -q '^cache1 .* inflate  *19.3 GiB  host needs 5.6 GiB' "$T/screen"
ok_files $? "watch:   cache1's decision: inflate to 19.3 GiB, with its reason" "$T/screen"
# redrawn every interval: the clock on the first line moves
first=$(head -1 "$T/screen")
wait_until eval 'shows "sorted by RSS" && [ "$(head -1 "$T/screen")" != "$first" ]'
ok_files $? "watch: redrawn every interval (the clock moves)" "$T/screen"
# s: the next sort column
"${TM[@]}" send-keys -t view s
wait_until shows "sorted by SWAPIN"
ok_files $? "watch: 's' sorts by the next column (SWAPIN)" "$T/screen"
# a narrower terminal: redrawn to fit it, the names whole
"${TM[@]}" resize-window -t view -x 60
wait_until eval 'shows "sorted by SWAPIN" && [ "$(wc -L <"$T/screen")" -le 60 ] && grep -q "^web1 " "$T/screen"'
ok_files $? "watch: a resize redraws the view at 60 columns, names whole" "$T/screen"
# q: the view ends, exit 0, the terminal's own screen back
"${TM[@]}" send-keys -t view q
wait_until shows "EXITED rc=0"
ok_files $? "watch: 'q' quits with exit status 0" "$T/screen"
! grep -q "sorted by" "$T/screen"
ok_files $? "watch:   the alternate screen is left (the view is gone from the terminal)" "$T/screen"
# bad usage: --watch with --json, a bad interval, a column that does not sort
"$BM" -c "$DEMO" status --watch --json >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && grep -qxF "balloonmgr: status: --watch is a view for people: not with --json or --raw" "$T/err"
ok_files $? "watch: --watch --json refused (exit $rc)" "$T/err"
"$BM" -c "$DEMO" status --watch=0 >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && grep -qxF "balloonmgr: status: --watch '0': expected a number of seconds from 1 to 3600" "$T/err"
ok_files $? "watch: --watch=0 refused (exit $rc)" "$T/err"
"$BM" -c "$DEMO" status --sort SG >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "^balloonmgr: status: --sort 'SG': not a column to sort by" "$T/err"
ok_files $? "--sort SG refused, naming the columns (exit $rc)" "$T/err"
# --sort without --watch, off a terminal
"$BM" -c "$DEMO" status --no-headings --sort CURRENT -o NAME,CURRENT --proc "$ROOT/demo/proc" 2>/dev/null >"$T/out"
[ "$(awk '{ print $1 }' "$T/out" | tr '\n' ' ')" = "cache1 db1 batch1 build1 web2 web1 legacy1 " ]
ok_files $? "status --sort CURRENT: largest first, ties by name" "$T/out"
tap_done
