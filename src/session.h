/* The session of run --once and the agent: the policy, the state file (checked, locked, loaded
 * and saved), the spool of set --wait's changes, and the report of a pass's failures. The
 * timer's pass (once.c, through cmd-run.c) and the agent (agent.c) both start and keep one
 * through these steps. A step that can fail returns -errno with its detail stored (error.h),
 * the whole message the verb reports after "VERB: " (bm_report(), bm_exit_for()); what a step
 * goes on after (a warning, a notice) it logs itself under the verb's name. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "ledger.h"
#include "policy.h"
#include "state.h"

/* Checks --state before anything is done: refused when it is empty or not a regular file (a
 * directory, FIFO, device or socket, or, when it will be written, a symbolic link: it would be
 * replaced). A missing or unreadable file is left to bm_session_state_load(). Returns 0, or
 * -EINVAL with the detail "state 'PATH': REASON" ("--state '': empty file name"). */
int bm_session_state_check(const char *path, bool writes);

/* Checks --proc DIR (NULL: nothing to check) before anything is done: a directory with a
 * readable regular meminfo of at most BM_HOSTMEM_FILE_MAX_BYTES, and a pressure/memory that is
 * missing or a regular file (what they say is checked by every pass). Returns 0, or -EINVAL
 * with the detail "--proc 'DIR': REASON". */
int bm_session_proc_check(const char *proc_dir);

/* The state file at the start of run or agent: removes temporary files of interrupted writes
 * (unless dry_run), then loads path into the ledger l (initialised). A missing file is a fresh
 * start; an unreadable or corrupt one is reported as a warning naming the file and the reason,
 * a corrupt one is moved aside (bm_state_set_aside(), unless dry_run), and counted in l's
 * state errors. Returns 0 (l loaded, or empty to start fresh), or -EIO with the detail "state
 * 'PATH': REASON; cannot be moved aside (...)..." when a corrupt file cannot be moved aside: a
 * save would replace it. */
int bm_session_state_load(const char *verb, const char *path, bool dry_run, BmLedger *l);

/* The lock of the state file, for a run or agent that writes it: returns 0 with the locked
 * descriptor in *ret_fd (-1 when the directory cannot be written: the save reports it), or
 * -EBUSY with the detail "state 'PATH': in use by PID N (...)", or -EIO with why it cannot be
 * locked ("state 'PATH': REASON"). */
int bm_session_state_lock(const char *path, int *ret_fd);

/* One save of the agent, with w; the first success after failures is logged (a notice under
 * verb). Returns 0 when it saved, or the save's -errno, counted in l's state errors: with the
 * detail to report ("state 'PATH': REASON; retrying every pass, ...") for the first failure
 * and one for another reason, with no detail stored (bm_error_code() is not r) for a failure
 * again for the same reason, which is only counted. */
int bm_session_state_save(const char *verb, BmStateWriter *w, const char *path, BmLedger *l,
                          uint64_t now_s);

/* The policy of run and agent: path, or the built-in defaults when path is the default one
 * (not explicit) and does not exist (bm_policy_load_or_default()). Returns 0 and *ret, or
 * -errno after reporting the policy's errors under verb (one message a line, at LOG_ERR); the
 * one line that says what follows ("has errors: nothing changed", "not reloaded") is the
 * caller's. */
int bm_session_policy_load(const char *verb, const char *path, bool explicit, BmPolicy **ret);

/* Counts the changes `set --wait` spooled for the connection uri into l (bm_spool_ingest()),
 * reporting a problem with the spool as a warning. A one-off pass (last_reported NULL)
 * creates the spool first and reports every problem, a failure with "; changes made by 'set
 * --wait' are not counted"; the agent, which created it at its start and reads it every
 * second, passes the problem it reported last (*last_reported, NULL at first, caller frees)
 * and a problem is reported only when it is new. Returns how many changes were counted, or
 * -errno. */
int bm_session_spool_ingest(const char *verb, BmLedger *l, const char *uri, char **last_reported);

/* Reports the domains the last pass of e left alone (busy: a warning) or failed to change
 * ("REASON, skipping domain"). Returns how many it failed to change. */
size_t bm_session_report_applied(const char *verb, const BmEngine *e);
