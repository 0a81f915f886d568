/* What every verb shares: global options, exit statuses, reporting and option tables (the
 * session of run and agent is session.h). Only main.c, cmd-*.c, agent.c, once.c and session.c
 * use this. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <getopt.h>
#include <stdio.h>

#include <libvirt/libvirt.h>

enum {
    BM_EXIT_OK = 0,
    BM_EXIT_FAILURE = 1, /* runtime error: libvirt, I/O */
    BM_EXIT_USAGE = 2,   /* bad usage or bad input: option, size, domain name, policy */
    BM_EXIT_UNMET = 3,   /* a requirement not met: --require, --wait timed out or stalled */
    BM_EXIT_BUSY = 4,    /* the state file is written by another process (its lock is held) */
};

/* What getopt returns for the options verbs share (as virsh's VIRSH_COMMON_OPT_*): a verb
 * lists those it takes in its table (BM_OPTDEF_*) and its switch handles the value each
 * returns. --state and --proc have no short form. */
enum {
    BM_OPT_POLICY = 'p',   /* --policy FILE */
    BM_OPT_DRY_RUN = 'n',  /* --dry-run */
    BM_OPT_JSON = 'j',     /* --json */
    BM_OPT_HELP = 'h',     /* --help */
    BM_OPT_STATE = 0x7e00, /* --state FILE */
    BM_OPT_PROC,           /* --proc DIR (before the verb too: BmGlobal.proc_dir) */
    BM_OPT_READONLY,       /* --readonly (-r unless the verb has an -r of its own) */
};

/* How the bash completion completes an option's argument. */
typedef enum {
    BM_COMPLETE_NONE,  /* nothing to offer (a URL, a number) */
    BM_COMPLETE_FILE,  /* a file name */
    BM_COMPLETE_DIR,   /* a directory name */
    BM_COMPLETE_WORDS, /* one of BmOptDef.words */
    BM_COMPLETE_LIST,  /* a comma-separated list of BmOptDef.words */
} BmComplete;

/* One option of a verb, declared once (virsh's vshCmdOptDef): getopt_long()'s row, the
 * verb's --help line and the bash completion (bash-completion/generate.c) are made from it.
 * A table ends with an entry whose name is NULL. */
typedef struct {
    char short_name;     /* -x, or 0 */
    const char *name;    /* the long name without "--" */
    /* what getopt_long() returns for it: short_name where there is one (-r is returned as 'r',
     * --readonly as BM_OPT_READONLY, as verify's -r is its --require) */
    int val;
    /* its argument as --help spells it after the name: " FILE" (the next word or =FILE),
     * "=N" (the same, shown with '='), "[=SECONDS]" (optional, only with '='); NULL: none */
    const char *arg;
    /* the help text, lines split by '\n' (the first empty: it starts below the option); NULL:
     * an alias, not listed in --help */
    const char *help;
    BmComplete complete; /* for an option with an argument */
    const char *words;   /* BM_COMPLETE_WORDS, BM_COMPLETE_LIST: the words, space-separated */
} BmOptDef;

#define BM_OPTDEF_POLICY(help) {'p', "policy", BM_OPT_POLICY, " FILE", help, BM_COMPLETE_FILE, NULL}
#define BM_OPTDEF_STATE(help) {0, "state", BM_OPT_STATE, " FILE", help, BM_COMPLETE_FILE, NULL}
#define BM_OPTDEF_PROC(help) {0, "proc", BM_OPT_PROC, " DIR", help, BM_COMPLETE_DIR, NULL}
#define BM_OPTDEF_DRY_RUN(help) {'n', "dry-run", BM_OPT_DRY_RUN, NULL, help, BM_COMPLETE_NONE, NULL}
#define BM_OPTDEF_JSON(help) {'j', "json", BM_OPT_JSON, NULL, help, BM_COMPLETE_NONE, NULL}
#define BM_OPTDEF_HELP(help) {'h', "help", BM_OPT_HELP, NULL, help, BM_COMPLETE_NONE, NULL}
#define BM_OPTDEF_END {0, NULL, 0, NULL, NULL, BM_COMPLETE_NONE, NULL}

/* The options before the verb (main.c); the first two, -c/--connect and -r/--readonly, are
 * taken after the verb too (bm_cli_getopt()). */
extern const BmOptDef bm_cli_global_options[];
#define BM_CLI_GLOBAL_HELP_COLUMN 21

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
    const BmOptDef *options; /* its options, BM_OPTDEF_END last */
    int help_column;         /* where --help's option texts start */
    const char *help_after;  /* --help's text after the options, or NULL */
    const char *brief;       /* a few words for the list of verbs ('balloonmgr help') */
} BmVerb;

extern const BmVerb bm_verb_list, bm_verb_status, bm_verb_set, bm_verb_verify,
    bm_verb_configure, bm_verb_run, bm_verb_policy, bm_verb_agent;

/* Every verb, in the order --help lists them, NULL last. */
extern const BmVerb *const bm_verbs[];

/* Prints "balloonmgr: VERB: 'OBJECT': MESSAGE" (object omitted when NULL) to stderr, one line
 * (the one form of every message: "balloonmgr: VERB: ..."):
 * the object is quoted and made printable, control characters in MESSAGE become \xNN. Its
 * priority (log.h: "<N>" when stderr is the journal) is LOG_WARNING when fmt starts with
 * "warning: ", else LOG_ERR. */
void bm_report(const char *verb, const char *object, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* bm_report() with an explicit priority (LOG_ERR ... LOG_DEBUG of <syslog.h>). */
void bm_reportp(int prio, const char *verb, const char *object, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reports each line of text (a list: a policy's errors or warnings, "FILE:LINE:COL: ...") as
 * its own message, "balloonmgr: VERB: LINE", at priority prio. NULL or "" prints nothing. */
void bm_report_lines(int prio, const char *verb, const char *text);

/* Reports the failure r (-errno) of a verb's step once, under verb and object: bm_report() of
 * its detail (bm_error_detail()). Returns its exit status, bm_exit_for(r). */
int bm_report_failure(const char *verb, const char *object, int r);

/* r (-errno, its detail stored) as a runtime failure, for a step that exits BM_EXIT_FAILURE
 * whatever its cause: r when bm_exit_for(r) gives that, else -EIO with r's detail. */
int bm_as_failure(int r);

/* The exit status for a failure r (-errno, its detail reported): BM_EXIT_USAGE for -ENOENT (no
 * such domain), -EINVAL and -ERANGE (bad usage or input), BM_EXIT_UNMET for -ENOPROTOOPT and -ETIME
 * (a requirement not met: a feature or device property missing; a wait that timed out or
 * stalled), BM_EXIT_BUSY for -EBUSY (the state
 * file's lock is held), BM_EXIT_FAILURE otherwise. A step whose failure means another status
 * than its cause's errno gives stores its detail with the errno that does (bm_error()). */
int bm_exit_for(int r);

/* getopt_long() for verb v's options (v->options): returns the val of the next of them, or
 * -1 at the end. The global options -c/--connect URI and -r/--readonly (-r only when the verb
 * has no -r of its own: verify's --require), anywhere among the verb's arguments, are applied
 * to g and not returned. For an unknown option, an ambiguous abbreviation, a missing or an
 * unexpected argument (or an empty -c) it returns '?' with -EINVAL's detail stored: one line
 * naming it and "see 'balloonmgr VERB --help'" (the verb reports it, exit BM_EXIT_USAGE). */
int bm_cli_getopt(BmGlobal *g, const BmVerb *v, int argc, char **argv);

/* getopt_long()'s tables for the options defs (BM_OPTDEF_END last): at most n_longs - 1 rows
 * into longs (a zero row after them) and the short options into shorts (n_shorts bytes),
 * after prefix (":" or "+:"). */
void bm_cli_getopt_tables(const BmOptDef *defs, const char *prefix, struct option *longs,
                          size_t n_longs, char *shorts, size_t n_shorts);

/* Prints the --help lines of the options defs, their texts from column help_column. */
void bm_cli_print_options(const BmOptDef *defs, int help_column, FILE *f);

/* A bad option of the global options before the verb (v NULL) or of verb v, after
 * getopt_long() returned c ('?' or ':', with opterr 0 and a ':' first in its shorts): returns
 * -EINVAL with the detail, one line naming it. */
int bm_cli_bad_option(const BmVerb *v, char **argv, const struct option *longs, int c);

/* Prints a verb's usage ("Usage: balloonmgr SYNOPSIS", its summary, its options from its
 * table, its help_after and where the full text is) to f: VERB --help and 'balloonmgr help
 * VERB', within 80 columns and 24 lines (test-help checks). */
void bm_verb_usage(const BmVerb *v, FILE *f);

/* The verb named name, or NULL. */
const BmVerb *bm_verb_find(const char *name);

/* getopt_long() would read a negative size such as "-512M" as options. Returns a copy of argv
 * (argc entries + NULL) in which such arguments are protected; bm_cli_unprotect() gives
 * back the original text of a positional argument. Free with bm_cli_free_protected(). */
char **bm_cli_protect_negative(int argc, char **argv);
void bm_cli_free_protected(char **copy);
const char *bm_cli_unprotect(const char *arg);

/* For verbs that change domains: returns 0, or under -r/--readonly -EINVAL with the detail
 * "WHAT needs a read-write connection (-r/--readonly given)" (and "; HINT"). */
int bm_cli_writable(const BmGlobal *g, const char *what, const char *hint);

/* Parses a whole number of seconds (0 .. max_s) from an option. Returns 0 or -EINVAL. */
int bm_cli_parse_seconds(const char *s, unsigned max_s, unsigned *ret_s);

/* Opens the connection of the global options (read-only when asked). Returns 0, or -errno with
 * the reason as its detail, an errno bm_exit_for() makes BM_EXIT_FAILURE (-EIO when libvirt's
 * would say otherwise): a connection that cannot be opened is a runtime failure. */
int bm_cli_connect(const BmGlobal *g, bool readonly, virConnectPtr *ret);

/* fflush(stdout), keeping the errno of the first write to it that failed (a closed pipe:
 * EPIPE, with SIGPIPE ignored) for the report at the exit, which fclose() alone would lose
 * once the buffer was dropped. */
void bm_cli_flush_stdout(void);

/* That errno, or 0. */
int bm_cli_stdout_errno(void);
