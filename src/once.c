/* The timer's pass: pass, wait, read again, export, save (once.h). */
#include "once.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "session.h"
#include "error.h"
#include "log.h"
#include "push.h"
#include "state.h"
#include "util.h"

#define PUSH_TIMEOUT_S 10

/* Waits for the changes of the pass (the policy's apply_timeout) so that their latency is
 * observed, then reads the domains again: what the metrics say is what the changes left. */
static void observe(BmEngine *e, const BmPolicy *pol, const BmOnceOptions *o, const BmOnceHooks *h)
{
    const BmPlan *plan = bm_engine_plan(e);
    const BmApplied *ap = bm_engine_applied(e);
    size_t n_applied = 0;
    for (size_t k = 0; plan && k < plan->n_decisions; k++)
        n_applied += ap[k].applied;
    if (!n_applied)
        return;
    size_t left = bm_engine_wait(e, pol->apply_timeout_s);
    if (h->waited)
        h->waited(h->ctx);
    sig_atomic_t stopped = o->stop ? *o->stop : 0;
    if (left && stopped)
        bm_reportp(LOG_WARNING, "run", NULL, "%s while %zu change(s) were in flight: not waiting "
                   "longer, saving what is known", stopped == SIGTERM ? "SIGTERM" : "SIGINT", left);
    else if (left)
        bm_reportp(LOG_WARNING, "run", NULL, "%zu change(s) still in flight after apply_timeout %u s; "
                   "not waiting longer", left, pol->apply_timeout_s);
    bm_error_reset();
    int r = bm_engine_refresh(e);
    if (r < 0)
        bm_reportp(LOG_WARNING, "run", NULL, "cannot read the domains after the changes: %s",
                   bm_error_detail(r));
    if (h->observed)
        h->observed(h->ctx, e);
}

/* Writes the metrics to the textfile and/or pushes them. Returns an exit status. */
static int export_metrics(BmEngine *e, const BmOnceOptions *o)
{
    int ret = BM_EXIT_OK;
    _cleanup_free_ char *text = bm_engine_render(e, true);
    if (o->textfile_dir) {
        bm_error_reset();
        /* checked after the pass, not before: a pass that cannot export still acts */
        char quoted[512];
        int r = bm_push_check_textfile(o->textfile_dir);
        if (r < 0) {
            bm_report("run", NULL, "--textfile '%s': %s; the pass acted, "
                      "its metrics are not exported (counted in balloonmgr_errors_total{kind=\"push\"})",
                      bm_printable(o->textfile_dir, quoted, sizeof(quoted)), bm_error_detail(r));
            bm_engine_count_error(e, BM_ERR_PUSH);
            ret = BM_EXIT_FAILURE;
        } else if ((r = bm_push_textfile(o->textfile_dir, text)) < 0) {
            bm_report("run", NULL, "textfile: %s", bm_error_detail(r));
            bm_engine_count_error(e, BM_ERR_PUSH);
            ret = BM_EXIT_FAILURE;
        }
    }
    if (o->push_url) {
        char host[256] = "localhost";
        gethostname(host, sizeof(host) - 1);
        bm_error_reset();
        int r = bm_push_gateway(o->push_url, host, text, PUSH_TIMEOUT_S);
        if (r < 0) {
            bm_report("run", NULL, "%s", bm_error_detail(r));
            bm_engine_count_error(e, BM_ERR_PUSH);
            ret = BM_EXIT_FAILURE;
        }
    }
    return ret;
}

BmEngineOptions bm_once_engine_options(bool dry_run, bool readonly)
{
    return (BmEngineOptions){.dry_run = dry_run, .probe_features = !readonly, .timer = true};
}

int bm_once_run(BmEngine *e, const BmPolicy *pol, const BmOnceOptions *o, const BmOnceHooks *h)
{
    bm_error_reset();
    int ret = BM_EXIT_OK, r = bm_engine_pass(e);
    if (r < 0) {
        bm_report("run", NULL, "%s", bm_error_detail(r));
        ret = BM_EXIT_FAILURE;
    } else {
        if (bm_session_report_applied("run", e))
            ret = BM_EXIT_FAILURE;
        if (h->passed)
            h->passed(h->ctx, e);
    }
    if (!o->dry_run)
        observe(e, pol, o, h);
    if ((o->textfile_dir || o->push_url) && export_metrics(e, o) != BM_EXIT_OK)
        ret = BM_EXIT_FAILURE;
    /* a failure here cannot be counted in what this run writes (the textfile and the push are
     * done, the counters are what failed to be saved): the exit status says it */
    if (!o->dry_run && o->state_path) {
        bm_error_reset();
        r = bm_state_save(o->state_path, bm_engine_ledger(e), bm_engine_pass_time_s(e));
        if (r < 0) {
            bm_report("run", NULL, "state '%s': %s", o->state_path, bm_error_detail(r));
            ret = BM_EXIT_FAILURE;
        }
    }
    return ret;
}
