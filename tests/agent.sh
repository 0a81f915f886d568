# shellcheck shell=bash
# tests/agent.sh -- one way for the test scripts to start, wait for and stop an agent. The agent
# is told --listen ADDR:0 (a free port the kernel picks, no retry) and its 'serving /metrics on
# ... at ADDR:PORT' line says which port. Source it:  . "$ROOT/tests/agent.sh"
#
#   agent_start LOG CMD...   runs CMD (the whole command line: env, prefixes, "$BM" ... agent
#       ... --listen 127.0.0.1:0 ...) in the background, its stderr to LOG (emptied first, then
#       appended to: an inode taken before stays valid). Waits for the serving line; sets
#       agent_pid, agent_addr (the first address served, "127.0.0.1:41873") and agent_port.
#       Returns 0, the agent's exit status (1 if that was 0) when it exits first, or 1 when no
#       line comes within $AGENT_WAIT_S seconds (default 60: a guard, not a measure; times
#       $BM_TIMEOUT_MULTIPLIER, which tools/test.sh sets as meson's timeout multiplier).
#   agent_wait CMD...        polls CMD until it succeeds (0), the agent exits (1) or
#       $AGENT_WAIT_S seconds pass (1). A condition, not a fixed sleep.
#   wait_until CMD...        the same without an agent: polls CMD until it succeeds or
#       $AGENT_WAIT_S seconds pass.
#   agent_addr_in LOG        prints the first address of LOG's serving line (for an agent
#       started otherwise, e.g. under valgrind: poll with _agent_poll PID CMD...).
#   agent_stop [SIGNAL]      sends SIGNAL (TERM) to the agent and waits for it; returns its exit
#       status (0 when none runs) and clears agent_pid.
# Several agents at once: save agent_pid/agent_port after agent_start, set them back before
# agent_stop. The scripts' EXIT trap calls agent_stop.

agent_pid=""
agent_addr=""
agent_port=""

# _agent_poll PID CMD...: 0 once CMD succeeds; 1 if PID (when not empty) exits or the time is up.
# Its step waits in bash itself (read -t on a pipe nobody writes to, open only while it polls:
# nothing started later inherits it), not in a process of its own: a process costs about 5 ms
# here, and the scripts poll thousands of times.
_agent_poll() {
    local pid=$1 end=$((SECONDS + ${AGENT_WAIT_S:-60} * ${BM_TIMEOUT_MULTIPLIER:-1})) step rc
    shift
    exec {step}<> <(:)
    while :; do
        "$@" && { rc=0; break; }
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
            "$@" && { rc=0; break; } # what it did just before it exited
            rc=1
            break
        fi
        [ "$SECONDS" -ge "$end" ] && { rc=1; break; }
        read -r -t 0.02 -u "$step" _agent_junk # poll: until CMD succeeds, PID exits or the time is up
    done
    exec {step}<&-
    return $rc
}

wait_until() { _agent_poll "" "$@"; }
agent_wait() { _agent_poll "$agent_pid" "$@"; }

# _agent_addr_of LOG: the first address of LOG's serving line in $_agent_addr (in bash: no
# process);
# 1 if there is none yet (the address counts once the comma after it is written: a line can be
# read half-written)
_agent_addr_of() {
    local line re='serving /metrics .*at ([^ ,]*:[0-9]+),'
    _agent_addr=""
    while IFS= read -r line; do
        if [[ $line =~ $re ]]; then
            _agent_addr=${BASH_REMATCH[1]}
            return 0
        fi
    done <"$1"
    return 1
}
_agent_serving() { _agent_addr_of "$1"; }

agent_addr_in() { _agent_addr_of "$1" && printf '%s\n' "$_agent_addr"; }

agent_start() {
    local log=$1 rc
    shift
    : >"$log"
    "$@" 2>>"$log" &
    agent_pid=$!
    agent_addr="" agent_port=""
    if ! agent_wait _agent_serving "$log"; then
        if kill -0 "$agent_pid" 2>/dev/null; then
            agent_stop KILL
            return 1
        fi
        wait "$agent_pid"
        rc=$?
        agent_pid=""
        [ "$rc" -eq 0 ] && rc=1
        return "$rc"
    fi
    _agent_addr_of "$log"
    agent_addr=$_agent_addr
    agent_port=${agent_addr##*:}
    return 0
}

agent_stop() {
    local rc=0
    if [ -n "$agent_pid" ]; then
        kill -"${1:-TERM}" "$agent_pid" 2>/dev/null
        wait "$agent_pid" 2>/dev/null
        rc=$?
    fi
    agent_pid=""
    return "$rc"
}
