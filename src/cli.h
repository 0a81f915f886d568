/* What every verb shares: global options, exit statuses, reporting, and the steps run and
 * agent share. Only main.c, cmd-*.c and agent.c (the agent verb's loop) use this. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <getopt.h>
#include <stdio.h>

#include <libvirt/libvirt.h>

#include "engine.h"
#include "policy.h"
#include "state.h"

enum {
    BM_EXIT_OK = 0,
    BM_EXIT_FAILURE = 1, /* runtime error: libvirt, I/O */
    BM_EXIT_USAGE = 2,   /* bad usage or bad input: option, size, domain name, policy */
    BM_EXIT_UNMET = 3,   /* a requirement not met: --require, --wait timed out or stalled */
    BM_EXIT_BUSY = 4,    /* the state file is written by another process (its lock is held) */
};

/* The options verbs share, one entry each for the verbs' getopt_long() tables (as virsh's
 * VIRSH_COMMON_OPT_*): a verb lists those it takes among its own, and its switch handles the
 * value each returns. The short forms (-p, -n, -j, -h) are in the verb's shorts as before;
 * --state and --proc have none. */
enum {
    BM_OPT_POLICY = 'p',   /* --policy FILE */
    BM_OPT_DRY_RUN = 'n',  /* --dry-run */
    BM_OPT_JSON = 'j',     /* --json */
    BM_OPT_HELP = 'h',     /* --help */
    BM_OPT_STATE = 0x7e00, /* --state FILE */
    BM_OPT_PROC,           /* --proc DIR (before the verb too: BmGlobal.proc_dir) */
};

#define BM_CLI_OPT_POLICY {"policy", required_argument, NULL, BM_OPT_POLICY}
#define BM_CLI_OPT_STATE {"state", required_argument, NULL, BM_OPT_STATE}
#define BM_CLI_OPT_PROC {"proc", required_argument, NULL, BM_OPT_PROC}
#define BM_CLI_OPT_DRY_RUN {"dry-run", no_argument, NULL, BM_OPT_DRY_RUN}
#define BM_CLI_OPT_JSON {"json", no_argument, NULL, BM_OPT_JSON}
#define BM_CLI_OPT_HELP {"help", no_argument, NULL, BM_OPT_HELP}

typedef struct {
    const char *uri;      /* -c/--connect, else $BALLOONMGR_URI, else NULL */
    bool readonly;        /* -r/--readonly: libvirt's read-only socket, never change anything */
    const char *proc_dir; /* --proc DIR before the verb (verbs that read host memory), or NULL */
} BmGlobal;

typedef struct {
    const char *name;
    /* g: the global options before the verb; bm_cli_getopt() adds those after it */
    int (*run)(BmGlobal *g, int argc, char **argv);
    const char *synopsis; /* after "balloonmgr " */
    const char *summary;
    bool reads_host;      /* takes --proc DIR (also as a global option before the verb) */
} BmVerb;

extern const BmVerb bm_verb_list, bm_verb_status, bm_verb_set, bm_verb_verify,
    bm_verb_configure, bm_verb_run, bm_verb_policy, bm_verb_agent;

/* Prints "balloonmgr: VERB 'OBJECT': MESSAGE" (object omitted when NULL) to stderr, one line:
 * the object is quoted and made printable, control characters in MESSAGE become \xNN. Its
 * priority (log.h: "<N>" when stderr is the journal) is LOG_WARNING when fmt starts with
 * "warning: ", else LOG_ERR. */
void bm_report(const char *verb, const char *object, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* bm_report() with an explicit priority (LOG_ERR ... LOG_DEBUG of <syslog.h>). */
void bm_reportp(int prio, const char *verb, const char *object, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Exit status for a failure of a library call: 2 for -ENOENT (no such domain) and -EINVAL
 * raised by parsing user input, 1 otherwise. */
int bm_exit_for(int r);

/* getopt_long() for verb v's options (shorts and longs as getopt_long() takes them): returns
 * the next option of the verb's own, or -1 at the end. The global options, anywhere among the
 * verb's arguments, are applied to g and not returned: -c URI / --connect URI and
 * --readonly, and -r unless shorts has an -r of its own (verify's --require). An unknown
 * option, an ambiguous abbreviation, a missing or an unexpected argument is reported in one
 * line naming it and "see 'balloonmgr VERB --help'", and '?' is returned (the verb exits
 * BM_EXIT_USAGE). */
int bm_cli_getopt(BmGlobal *g, const BmVerb *v, int argc, char **argv, const char *shorts,
                  const struct option *longs);

/* Reports a bad option of the global options before the verb (verb NULL) or of verb v in one
 * line, after getopt_long() returned c ('?' or ':', with opterr 0 and a ':' first in its
 * shorts). */
void bm_cli_bad_option(const BmVerb *v, char **argv, const struct option *longs, int c);

/* Prints a verb's usage ("Usage: balloonmgr SYNOPSIS" and its option help) to f. */
void bm_verb_usage(const BmVerb *v, const char *options_help, FILE *f);

/* getopt_long() would read a negative size such as "-512M" as options. Returns a copy of argv
 * (argc entries + NULL) in which such arguments are protected; bm_cli_unprotect() gives
 * back the original text of a positional argument. Free with bm_cli_free_protected(). */
char **bm_cli_protect_negative(int argc, char **argv);
void bm_cli_free_protected(char **copy);
const char *bm_cli_unprotect(const char *arg);

/* For verbs that change domains: under -r/--readonly reports "VERB: WHAT needs a read-write
 * connection (-r/--readonly given)" (and "; HINT") and returns false (the caller exits BM_EXIT_USAGE). */
bool bm_cli_writable(const BmGlobal *g, const char *verb, const char *what, const char *hint);

/* Parses a whole number of seconds (0 .. max_s) from an option. Returns 0 or -EINVAL. */
int bm_cli_parse_seconds(const char *s, unsigned max_s, unsigned *ret_s);

/* Checks --state before anything is done: refused, with one line naming it and what it is,
 * when it is empty or not a regular file (a directory, FIFO, device or socket, or, when it
 * will be written, a symbolic link: it would be replaced). A missing or unreadable file is
 * left to bm_cli_state_load(). Returns false after the report (the caller exits
 * BM_EXIT_USAGE). */
bool bm_cli_state_check(const char *verb, const char *path, bool writes);

/* Checks --proc DIR (NULL: nothing to check) before anything is done: a directory with a
 * readable regular meminfo of at most BM_HOSTMEM_FILE_MAX_BYTES, and a pressure/memory that is
 * missing or a regular file (what they say is checked by every pass). Returns false after reporting "--proc 'DIR': REASON"
 * (the caller exits BM_EXIT_USAGE). */
bool bm_cli_proc_check(const char *verb, const char *proc_dir);

/* The state file at the start of run or agent: removes temporary files of interrupted writes
 * (unless dry_run), then loads path into the ledger l (initialised). A missing file is a fresh
 * start; an unreadable or corrupt one is reported as a warning naming the file and the reason,
 * a corrupt one is moved aside (bm_state_set_aside(), unless dry_run), and counted in l's
 * state errors. Returns -1 to go on (l loaded, or empty to start fresh), or BM_EXIT_FAILURE
 * after reporting when a corrupt file cannot be moved aside: a save would replace it. */
int bm_cli_state_load(const char *verb, const char *path, bool dry_run, BmLedger *l);

/* The lock of the state file, for a run or agent that writes it: returns -1 (go on) with
 * the locked descriptor in *ret_fd (-1 when the directory cannot be written: the save
 * reports it), or an exit status after reporting "VERB: state 'PATH': in use by PID N (...)"
 * (BM_EXIT_BUSY) or why it cannot be locked (BM_EXIT_FAILURE). */
int bm_cli_state_lock(const char *verb, const char *path, int *ret_fd);

/* One save of the agent, with w: the first failure and a failure for another reason are
 * reported, later ones only counted (l's state errors, as every failure), and the first
 * success after failures is reported. Returns whether it saved. */
bool bm_cli_state_save(const char *verb, BmStateWriter *w, const char *path, BmLedger *l,
                       uint64_t now_s);

/* Opens the connection of the global options (read-only when asked); when it fails, reports
 * "VERB: REASON" and returns its -errno. */
int bm_cli_connect(const BmGlobal *g, const char *verb, bool readonly, virConnectPtr *ret);

/* The policy of run and agent: path, or the built-in defaults when path is the default one
 * (not explicit) and does not exist (bm_policy_load_or_default()). Returns 0 and *ret, or
 * -errno after logging the policy's errors (the error list, at LOG_ERR); the one line that
 * says what follows ("has errors: nothing changed", "not reloaded") is the caller's. */
int bm_cli_policy_load(const char *path, bool explicit, BmPolicy **ret);

/* Counts the changes `set --wait` spooled for the connection uri into l (bm_spool_ingest()),
 * reporting a problem with the spool as a warning. A one-off pass (last_reported NULL)
 * creates the spool first and reports every problem, a failure with "; changes made by 'set
 * --wait' are not counted"; the agent, which created it at its start and reads it every
 * second, passes the problem it reported last (*last_reported, NULL at first, caller frees)
 * and a problem is reported only when it is new. Returns how many changes were counted, or
 * -errno. */
int bm_cli_spool_ingest(const char *verb, BmLedger *l, const char *uri, char **last_reported);

/* Reports the domains the last pass of e left alone (busy: a warning) or failed to change
 * ("REASON, skipping domain"). Returns how many it failed to change. */
size_t bm_cli_report_applied(const char *verb, const BmEngine *e);

/* fflush(stdout), keeping the errno of the first write to it that failed (a closed pipe:
 * EPIPE, with SIGPIPE ignored) for the report at the exit, which fclose() alone would lose
 * once the buffer was dropped. */
void bm_cli_flush_stdout(void);

/* That errno, or 0. */
int bm_cli_stdout_errno(void);
