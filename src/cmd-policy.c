/* balloonmgr policy check [--host] [--proc DIR] FILE...: parse policy files, list every error,
 * and warn about sizes that are likely misread (bare KiB) or absurd against this host. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "cli.h"
#include "session.h"
#include "conn.h"
#include "error.h"
#include "file.h"
#include "hostmem.h"
#include "policy-lint.h"
#include "policy.h"
#include "snapshot.h"

enum { OPT_HOST = 0x100 };


static const BmOptDef options[] = {
    {0, "host", OPT_HOST, NULL, "also check sizes against MemTotal and the domains",
     BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_PROC("read MemTotal from DIR/meminfo"),
    BM_OPTDEF_HELP("show this help (an option anywhere, also after 'check')"),
    BM_OPTDEF_END,
};

static const char help_after[] =
    "  --               the arguments after it are files, even '-h'\n"
    "\nFILE '-' is standard input. Warnings (a bare number under 1 MiB is KiB, ...)\n"
    "leave the exit status 0.\n";

/* The host of --host: MemTotal and every domain's maximum; *ret_snap holds the names. Returns
 * 0, or -errno with the detail when the domains cannot be read (a runtime failure). */
static int read_host(const BmGlobal *g, const char *proc_dir, BmLintHost *ret, BmSnapshot *ret_snap,
                     BmLintDomain **ret_doms)
{
    BmHost h;
    *ret = (BmLintHost){.mem_total_bytes = BM_ABSENT};
    int r = bm_hostmem_read(proc_dir, &h);
    if (r == 0)
        ret->mem_total_bytes = h.mem_total_bytes;
    else
        bm_report("policy check", NULL, "warning: host memory: %s; MemTotal not checked",
                  bm_error_detail(r));
    _cleanup_(virConnectClosep) virConnectPtr conn = NULL;
    if ((r = bm_cli_connect(g, true, &conn)) < 0)
        return r;
    if ((r = bm_snapshot_take(conn, 0, ret_snap)) < 0)
        return bm_as_failure(r);
    *ret_doms = bm_malloc0((ret_snap->n_domains + 1) * sizeof(BmLintDomain));
    for (size_t i = 0; i < ret_snap->n_domains; i++)
        (*ret_doms)[i] = (BmLintDomain){ret_snap->domains[i].name, ret_snap->domains[i].max_bytes};
    ret->domains = *ret_doms;
    ret->n_domains = ret_snap->n_domains;
    return 0;
}

/* Checks one policy file (path), or standard input (path NULL: named "<stdin>" in messages),
 * printing "NAME: ok" or its errors, and its warnings (against host unless NULL). Returns 0, or
 * -EINVAL when it has errors (reported). */
static int check_one(const char *path, const BmLintHost *host)
{
    const char *name = !path ? "<stdin>" : *path ? path : "''";
    _cleanup_(bm_policy_freep) BmPolicy *p = NULL;
    _cleanup_free_ char *errors = NULL, *text = NULL, *warnings = NULL;
    size_t len = 0, n_warnings = 0;
    int r = path ? bm_file_read(path, BM_POLICY_MAX_BYTES, &text, &len)
                 : bm_file_read_fd(STDIN_FILENO, BM_POLICY_MAX_BYTES, &text, &len);
    if (r < 0) {
        bm_report("policy check", NULL, "%s: %s", name, bm_error_detail(r));
        return -EINVAL;
    }
    if (bm_policy_parse_n(text, len, name, &p, &errors) < 0) {
        bm_report_lines(LOG_ERR, "policy check", errors);
        return -EINVAL;
    }
    n_warnings = bm_policy_lint(text, len, name, p, host, &warnings);
    bm_report_lines(LOG_WARNING, "policy check", warnings);
    if (n_warnings)
        printf("%s: ok, %zu warning(s)\n", name, n_warnings);
    else
        printf("%s: ok\n", name);
    return 0;
}

static int run(BmGlobal *g, int argc, char **argv)
{
    bool host = false;
    const char *proc_dir = g->proc_dir;
    int c;
    /* options anywhere ("policy check -h"); "--" ends them: "policy check -- -h" checks a
     * file named -h */
    while ((c = bm_cli_getopt(g, &bm_verb_policy, argc, argv)) != -1) {
        switch (c) {
        case OPT_HOST: host = true; break;
        case BM_OPT_PROC: proc_dir = optarg; break;
        case BM_OPT_HELP: bm_verb_usage(&bm_verb_policy, stdout); return BM_EXIT_OK;
        default: return bm_report_failure("policy", NULL, -EINVAL); /* bm_cli_getopt()'s */
        }
    }
    if (optind >= argc || strcmp(argv[optind], "check") != 0)
        return bm_report_failure("policy", NULL, bm_error(-EINVAL, "expected 'check FILE...' "
                                                          "(see 'balloonmgr policy --help')"));
    if (optind + 1 >= argc)
        return bm_report_failure("policy check", NULL,
                                 bm_error(-EINVAL, "expected at least one FILE"));
    int r = bm_session_proc_check(proc_dir);
    BmLintHost lh;
    BmSnapshot snap = {0};
    _cleanup_free_ BmLintDomain *doms = NULL;
    if (r >= 0 && host)
        r = read_host(g, proc_dir, &lh, &snap, &doms);
    if (r < 0)
        return bm_report_failure("policy check", NULL, r);
    int ret = BM_EXIT_OK;
    bool stdin_read = false;
    for (int i = optind + 1; i < argc; i++) {
        bool from_stdin = strcmp(argv[i], "-") == 0;
        if (from_stdin && stdin_read) {
            bm_report("policy check", NULL, "'-': standard input given twice");
            ret = BM_EXIT_USAGE;
            continue;
        }
        stdin_read |= from_stdin;
        if (check_one(from_stdin ? NULL : argv[i], host ? &lh : NULL) < 0)
            ret = BM_EXIT_USAGE;
    }
    bm_snapshot_clear(&snap);
    return ret;
}

const BmVerb bm_verb_policy = {
    .name = "policy",
    .options = options,
    .help_column = 19,
    .help_after = help_after,
    .run = run,
    .synopsis = "policy check [--host] [--proc DIR] FILE...",
    .summary = "Check policy files (balloonmgr.policy(5)): every error as FILE:LINE:COL, then\n"
               "warnings about sizes likely misread or absurd (--host: on this host).",
    .brief = "check policy files",
    .reads_host = true,
};
