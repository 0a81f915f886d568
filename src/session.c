#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "engine.h"
#include "error.h"
#include "file.h"
#include "hostmem.h"
#include "ledger.h"
#include "log.h"
#include "policy.h"
#include "spool.h"
#include "state.h"
#include "util.h"

int bm_session_state_check(const char *path, bool writes)
{
    bm_error_reset();
    if (!*path)
        return bm_error(-EINVAL, "--state '': empty file name");
    /* read: what the path leads to; written: the path itself (a link would be replaced) */
    int r = writes ? bm_file_check_replaceable(path) : 0;
    if (r >= 0) {
        int fd = bm_file_open(AT_FDCWD, path, false, NULL);
        r = fd >= 0 ? close(fd), 0 : fd;
    }
    if (!bm_file_not_regular(r))
        return 0; /* missing or unreadable: load reports it and starts fresh */
    return bm_error(-EINVAL, "state '%s': %s%s", path, bm_error_detail(r),
                    r == -ELOOP ? " (it would be replaced: give the path of the file itself)" : "");
}

int bm_session_proc_check(const char *proc_dir)
{
    bm_error_reset();
    if (!proc_dir)
        return 0;
    int r = *proc_dir ? bm_file_check_dir(proc_dir) : bm_error(-ENOENT, "empty directory name");
    if (r >= 0) {
        /* the files must be there and regular; what they say is the passes' business */
        _cleanup_free_ char *meminfo = bm_asprintf("%s/meminfo", proc_dir);
        _cleanup_free_ char *psi = bm_asprintf("%s/pressure/memory", proc_dir);
        _cleanup_free_ char *text = NULL;
        r = bm_file_read(meminfo, BM_HOSTMEM_FILE_MAX_BYTES, &text, NULL);
        if (r < 0)
            r = bm_error_prefix(r, "%s", meminfo);
        else {
            int fd = bm_file_open(AT_FDCWD, psi, false, NULL);
            if (fd >= 0)
                close(fd);
            else if (bm_file_not_regular(fd))
                r = bm_error_prefix(fd, "%s", psi);
        }
    }
    if (r >= 0)
        return 0;
    return bm_error(-EINVAL, "--proc '%s': %s", proc_dir, bm_error_detail(r));
}

int bm_session_state_load(const char *verb, const char *path, bool dry_run, BmLedger *l)
{
    bm_error_reset();
    if (!dry_run) {
        int n = bm_state_cleanup(path);
        if (n > 0)
            bm_reportp(LOG_NOTICE, verb, NULL, "state '%s': removed %d temporary file(s) left by interrupted "
                      "writes", path, n);
    }
    int r = bm_state_load(path, l);
    if (r >= 0 || r == -ENOENT || r == -ENOTDIR) /* none yet: the first save creates it */
        return 0;
    bm_ledger_count_error(l, BM_ERR_STATE);
    char why[1024];
    snprintf(why, sizeof(why), "%s", bm_error_detail(r));
    if (r != -EINVAL && r != -EFBIG) { /* unreadable, not corrupt: the next save replaces it */
        bm_report(verb, NULL, "warning: state '%s': %s; starting fresh", path, why);
        return 0;
    }
    if (dry_run) {
        bm_report(verb, NULL, "warning: state '%s': %s; starting fresh (dry run: the file is "
                  "left as it is)", path, why);
        return 0;
    }
    _cleanup_free_ char *aside = NULL;
    int aside_r = bm_state_set_aside(path, &aside);
    if (aside_r == 0) {
        bm_report(verb, NULL, "warning: state '%s': %s; moved to '%s', starting fresh", path,
                  why, aside);
        return 0;
    }
    /* the next save would replace it: the corrupt file would be lost */
    return bm_error(-EIO, "state '%s': %s; cannot be moved aside (%s): left as it is, never "
                    "overwritten", path, why, bm_error_detail(aside_r));
}

int bm_session_state_lock(const char *path, int *ret_fd)
{
    bm_error_reset();
    int r = bm_state_lock(path, ret_fd);
    if (r >= 0)
        return 0;
    /* held: exit 4; any other reason (a missing directory too) a runtime error: exit 1 */
    return bm_error(r == -EBUSY ? r : -EIO, "state '%s': %s", path, bm_error_detail(r));
}

int bm_session_state_save(const char *verb, BmStateWriter *w, const char *path, BmLedger *l,
                          uint64_t now_s)
{
    bm_error_reset();
    BmSaveOutcome o = bm_state_save_tracked(w, path, l, now_s);
    int r = bm_error_code() < 0 ? bm_error_code() : -EIO;
    switch (o) {
    case BM_SAVE_OK:
        return 0;
    case BM_SAVE_RECOVERED:
        bm_reportp(LOG_NOTICE, verb, NULL, "state '%s': saved again (%u attempt(s) had failed)", path,
                  w->failed_before);
        return 0;
    case BM_SAVE_FAILED:
        bm_ledger_count_error(l, BM_ERR_STATE);
        return bm_error(r, "state '%s': %s; retrying every pass, reported again when it "
                        "works (counted in balloonmgr_errors_total{kind=\"state\"})", path,
                        w->reported);
    case BM_SAVE_FAILED_QUIET:
        bm_ledger_count_error(l, BM_ERR_STATE);
        bm_error_reset(); /* reported already: nothing to report again */
        return r;
    }
    return r;
}

int bm_session_policy_load(const char *verb, const char *path, bool explicit, BmPolicy **ret)
{
    bm_error_reset();
    _cleanup_free_ char *errors = NULL;
    int r = bm_policy_load_or_default(path, explicit, ret, &errors);
    if (r < 0)
        bm_report_lines(LOG_ERR, verb, errors);
    return r;
}

int bm_session_spool_ingest(const char *verb, BmLedger *l, const char *uri, char **last_reported)
{
    bm_error_reset();
    _cleanup_free_ char *skipped = NULL;
    int r = last_reported ? 0 : bm_spool_create(); /* the agent created it at its start */
    if (r >= 0)
        r = bm_spool_ingest(l, uri, bm_now_real_ns() / 1000000000ull, &skipped);
    if (!last_reported) {
        if (r < 0)
            bm_report(verb, NULL, "warning: %s; changes made by 'set --wait' are not counted",
                      bm_error_detail(r));
        if (skipped)
            bm_report(verb, NULL, "warning: %s", skipped);
        return r;
    }
    const char *problem = r < 0 ? bm_error_detail(r) : skipped;
    if (problem && (!*last_reported || strcmp(problem, *last_reported) != 0))
        bm_report(verb, NULL, "warning: %s", problem);
    free(*last_reported);
    *last_reported = problem ? bm_strdup(problem) : NULL;
    return r;
}

size_t bm_session_report_applied(const char *verb, const BmEngine *e)
{
    const BmPlan *plan = bm_engine_plan(e);
    const BmApplied *ap = bm_engine_applied(e);
    size_t failed = 0;
    for (size_t i = 0; plan && i < plan->n_decisions; i++) {
        if (ap[i].busy)
            bm_reportp(LOG_WARNING, verb, plan->decisions[i].name, "%s", ap[i].error);
        if (ap[i].attempted && !ap[i].applied) {
            bm_report(verb, plan->decisions[i].name, "%s, skipping domain", ap[i].error);
            failed++;
        }
    }
    return failed;
}
