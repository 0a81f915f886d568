/* balloonmgr run [--once] [--policy FILE] [--dry-run] [--json] [--state FILE] [--proc DIR]:
 * policy passes: snapshot -> decide -> apply, once (systemd timer) or every interval. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json-name.h"
#include "balloon.h"
#include "cli.h"
#include "engine.h"
#include "push.h"
#include "spool.h"
#include "conn.h"
#include "error.h"
#include "hostmem.h"
#include "log.h"
#include "progress.h"
#include "policy-eval.h"
#include "policy.h"
#include "size.h"
#include "snapshot.h"
#include "state.h"
#include "table.h"

#define DEFAULT_POLICY BM_POLICY_DEFAULT_PATH /* config.h: SYSCONFDIR/balloonmgr/... */

static const char options_help[] =
    "      --once          one pass, then exit (what the systemd timer runs)\n"
    "  -p, --policy FILE   policy file (default " DEFAULT_POLICY ";\n"
    "                      built-in defaults when that file does not exist)\n"
    "  -n, --dry-run       decide and print, change nothing (no balloon, no state file)\n"
    "  -j, --json          print JSON\n"
    "      --state FILE    state file (default " BM_STATE_DEFAULT_PATH ")\n"
    "      --proc DIR      read host memory from DIR/meminfo and DIR/pressure/memory\n"
    "                      instead of /proc (for tests and demos)\n"
    "      --textfile DIR  with --once: write the metrics to DIR/balloonmgr.prom\n"
    "                      (node_exporter's textfile collector), atomically\n"
    "      --push URL      with --once: PUT the metrics to the Pushgateway at URL\n"
    "                      (URL/metrics/job/balloonmgr/instance/HOSTNAME)\n"
    "  -h, --help          show this help\n";

DEFINE_CLEANUP(json_object *, json_object_put)

static volatile sig_atomic_t stop_requested, reload_requested;

static void on_signal(int sig)
{
    if (sig == SIGHUP)
        reload_requested = 1;
    else
        stop_requested = 1;
}

typedef struct {
    const char *policy_path;
    bool policy_explicit;
    bool dry_run, json, once;
    const char *state_path;
    const char *proc_dir;
    const char *textfile_dir;
    const char *push_url;
} RunOptions;

#define PUSH_TIMEOUT_S 10

static json_object *u64j(uint64_t v)
{
    return bm_present(v) ? json_object_new_uint64(v) : NULL;
}

static json_object *ratej(double v)
{
    return v >= 0 ? json_object_new_double(v) : NULL;
}

static void print_json(const RunOptions *o, const BmEngine *e, const BmPolicy *pol, const BmHost *h,
                       const BmPlan *plan, const BmApplied *ap)
{
    _cleanup_(json_object_putp) json_object *root = json_object_new_object();
    json_object *host = json_object_new_object();
    json_object_object_add(host, "mode", json_object_new_string(bm_host_mode_name(plan->mode)));
    json_object_object_add(host, "reason", json_object_new_string(plan->reason));
    json_object_object_add(host, "mem_total_bytes", u64j(h->mem_total_bytes));
    json_object_object_add(host, "mem_available_bytes", u64j(h->mem_available_bytes));
    json_object_object_add(host, "psi_some_avg10",
                           h->psi_present ? json_object_new_double(h->psi_some_avg10) : NULL);
    json_object_object_add(host, "need_bytes", json_object_new_uint64(plan->need_bytes));
    json_object_object_add(host, "budget_bytes", json_object_new_uint64(plan->budget_bytes));
    json_object_object_add(host, "guard_bytes", json_object_new_uint64(plan->guard_bytes));
    json_object_object_add(host, "expected_return_bytes", json_object_new_uint64(plan->expected_return_bytes));
    json_object_object_add(host, "unmet_bytes", json_object_new_uint64(plan->unmet_bytes));
    json_object_object_add(host, "qemu_overhead_bytes", json_object_new_uint64(plan->qemu_overhead_bytes));
    json_object_object_add(root, "host", host);
    json_object_object_add(root, "policy", json_object_new_string(pol->path));
    json_object_object_add(root, "dry_run", json_object_new_boolean(o->dry_run));
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < plan->n_decisions; i++) {
        const BmDecision *d = &plan->decisions[i];
        json_object *x = json_object_new_object();
        json_object_object_add(x, "name", bm_json_name(d->name));
        json_object_object_add(x, "action", json_object_new_string(bm_action_name(d->action)));
        json_object_object_add(x, "current_bytes", u64j(d->current_bytes));
        json_object_object_add(x, "target_bytes", u64j(d->target_bytes));
        json_object_object_add(x, "maximum_bytes", u64j(d->max_bytes));
        json_object_object_add(x, "floor_bytes", u64j(d->floor_bytes));
        json_object_object_add(x, "idle_bytes", json_object_new_uint64(d->idle_bytes));
        json_object_object_add(x, "backed_free_bytes", u64j(d->backed_free_bytes));
        json_object_object_add(x, "inflate_yield", json_object_new_double(d->yield_permille / 1000.0));
        json_object_object_add(x, "returns_nothing", json_object_new_boolean(d->returns_nothing));
        json_object_object_add(x, "reason", json_object_new_string(d->reason));
        json_object_object_add(x, "major_fault_rate", ratej(d->pressure.major_fault_rate));
        json_object_object_add(x, "swap_in_rate_bytes", ratej(d->pressure.swap_in_rate));
        json_object_object_add(x, "stats_age_s", u64j(d->pressure.stats_age_s));
        json_object_object_add(x, "stale", json_object_new_boolean(d->pressure.stale));
        json_object_object_add(x, "under_pressure", json_object_new_boolean(d->pressure.under_pressure));
        json_object_object_add(x, "applied", ap[i].attempted ? json_object_new_boolean(ap[i].applied) : NULL);
        json_object_object_add(x, "busy", json_object_new_boolean(ap[i].busy));
        json_object_object_add(x, "error", ap[i].error[0] ? json_object_new_string(ap[i].error) : NULL);
        json_object_array_add(arr, x);
    }
    json_object_object_add(root, "decisions", arr);
    json_object *t = json_object_new_object();
    json_object_object_add(t, "pass_s", json_object_new_double(e->counters.last_pass_duration_s));
    json_object_object_add(t, "read_s", json_object_new_double(e->t_read_s));
    json_object_object_add(t, "decide_s", json_object_new_double(e->t_eval_s));
    json_object_object_add(t, "apply_s", json_object_new_double(e->t_apply_s));
    json_object_object_add(t, "cpu_s", json_object_new_double(e->t_cpu_s));
    json_object_object_add(t, "libvirt_calls", json_object_new_uint64(e->pass_calls));
    json_object_object_add(root, "timing", t);
    puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
}

static void print_text(const RunOptions *o, const BmPolicy *pol, const BmHost *h, const BmPlan *plan,
                       const BmApplied *ap)
{
    char a[32], b[32];
    printf("policy %s%s\n", pol->path, o->dry_run ? " (dry run: nothing is changed)" : "");
    printf("host: %s: %s", bm_host_mode_name(plan->mode), plan->reason);
    printf(" [MemAvailable %s of %s", bm_size_format(h->mem_available_bytes, a, sizeof(a)),
           bm_size_format(h->mem_total_bytes, b, sizeof(b)));
    if (h->psi_present)
        printf(", PSI some avg10 %.1f%%", h->psi_some_avg10);
    printf("]\n");
    if (plan->mode == BM_HOST_RECLAIM) {
        printf("host needs %s back", bm_size_format(plan->need_bytes, a, sizeof(a)));
        if (plan->guard_bytes)
            printf(", and %s for guests short of memory",
                   bm_size_format(plan->guard_bytes, a, sizeof(a)));
        printf("; planned %s", bm_size_format(plan->planned_inflate_bytes, b, sizeof(b)));
        if (plan->unmet_bytes)
            printf("; unmet %s", bm_size_format(plan->unmet_bytes, a, sizeof(a)));
        printf("\n");
    }
    static const char *headers[] = {"NAME", "ACTION", "CURRENT", "TARGET", "RESULT", "REASON"};
    _cleanup_(bm_table_freep) BmTable *t = bm_table_new(BM_ARRAY_SIZE(headers), headers, "llrrll");
    for (size_t i = 0; i < plan->n_decisions; i++) {
        const BmDecision *d = &plan->decisions[i];
        char name[256];
        bm_table_cell(t, "%s", bm_printable(d->name, name, sizeof(name)));
        bm_table_cell(t, "%s", bm_action_name(d->action));
        bm_table_cell(t, "%s", bm_present(d->current_bytes) ? bm_size_format(d->current_bytes, a, sizeof(a)) : "-");
        bm_table_cell(t, "%s", bm_present(d->target_bytes) ? bm_size_format(d->target_bytes, b, sizeof(b)) : "-");
        bm_table_cell(t, "%s", ap[i].busy ? "busy"
                               : !ap[i].attempted ? (d->action == BM_ACT_INFLATE || d->action == BM_ACT_DEFLATE ? "dry-run" : "-")
                               : ap[i].applied ? "set" : "FAILED");
        bm_table_cell(t, "%s", d->reason);
    }
    bm_table_print(t, stdout);
}

/* One pass. Returns an exit status. */
static int pass(BmEngine *e, const RunOptions *o)
{
    int r = bm_engine_pass(e);
    if (r < 0) {
        bm_report("run", NULL, "%s", bm_error_detail(r));
        return BM_EXIT_FAILURE;
    }
    int ret = BM_EXIT_OK;
    for (size_t i = 0; i < e->plan.n_decisions; i++) {
        if (e->applied[i].busy)
            bm_reportp(LOG_WARNING, "run", e->plan.decisions[i].name, "%s", e->applied[i].error);
        if (e->applied[i].attempted && !e->applied[i].applied) {
            bm_report("run", e->plan.decisions[i].name, "%s, skipping domain", e->applied[i].error);
            ret = BM_EXIT_FAILURE;
        }
    }
    if (o->json)
        print_json(o, e, e->policy, &e->host, &e->plan, e->applied);
    else
        print_text(o, e->policy, &e->host, &e->plan, e->applied);
    fflush(stdout);
    return ret;
}

/* bm_engine_wait() that shows the changes in flight on stderr when it is a terminal: the
 * first one's size, rate and ETA, and how many others there are. */
static size_t wait_changes(BmEngine *e, unsigned timeout_s)
{
    BmProgress p;
    bm_progress_init(&p, stderr);
    if (!p.f)
        return bm_engine_wait(e, timeout_s);
    uint64_t deadline = bm_now_mono_ns() + (uint64_t)timeout_s * 1000000000ull;
    while (e->tracker.n_items && bm_now_mono_ns() < deadline) {
        uint64_t t = bm_now_mono_ns();
        bm_engine_poll(e);
        if (e->tracker.n_items) {
            const BmTracked *x = &e->tracker.items[0];
            char line[320], more[48] = "";
            size_t n = e->tracker.n_items;
            if (n > 1)
                snprintf(more, sizeof(more), " (and %zu more in flight)", n - 1);
            bm_progress_format(x->name, x->change.from_bytes, x->change.target_bytes,
                               x->last_actual_bytes, bm_now_mono_ns() - x->started_mono_ns, line,
                               sizeof(line) - sizeof(more));
            strcat(line, more);
            bm_progress_show(&p, line, false);
        }
        uint64_t spent_ms = (bm_now_mono_ns() - t) / 1000000ull;
        if (e->tracker.n_items && spent_ms < e->tracker.opts.poll_ms)
            bm_sleep_ms(e->tracker.opts.poll_ms - (unsigned)spent_ms);
    }
    bm_progress_clear(&p);
    return e->tracker.n_items;
}

/* After a timer pass: wait for the changes (policy apply_timeout) so their latency is
 * observed, then write/push the metrics and save the state with the counters. */
static int finish_once(BmEngine *e, const RunOptions *o, int ret)
{
    /* the changes this pass made, by UUID: the refresh below replaces the snapshot the plan's
     * indices refer to */
    size_t n_applied = 0;
    _cleanup_free_ char(*applied)[VIR_UUID_STRING_BUFLEN] =
        bm_malloc0((e->plan.n_decisions + 1) * VIR_UUID_STRING_BUFLEN);
    for (size_t k = 0; e->have_plan && k < e->plan.n_decisions; k++)
        if (e->applied[k].applied)
            memcpy(applied[n_applied++], e->snap.domains[k].uuid, VIR_UUID_STRING_BUFLEN);

    if (!o->dry_run && e->tracker.n_items) {
        size_t left = wait_changes(e, e->policy->apply_timeout_s);
        if (left)
            bm_reportp(LOG_WARNING, "run", NULL, "%zu change(s) still in flight after apply_timeout %u s; not "
                      "waiting longer", left, e->policy->apply_timeout_s);
        /* what the metrics say of the domains is what the changes left */
        if (bm_engine_refresh(e) < 0)
            bm_reportp(LOG_WARNING, "run", NULL, "cannot read the domains after the changes: %s",
                      bm_error_detail(-EIO));
    }
    for (size_t i = 0; !o->dry_run && !o->json && i < n_applied; i++) {
        const BmDomainRecord *d = bm_counters_find(&e->counters, applied[i]);
        if (d && d->last_duration_s >= 0)
            printf("%s: %s %s in %.3f s\n", d->name,
                   d->last_direction == BM_DIR_INFLATE ? "inflate" : "deflate",
                   d->unresponsive ? "did not complete (stalled or timed out)" : "ended",
                   d->last_duration_s);
    }
    if (o->textfile_dir || o->push_url) {
        _cleanup_free_ char *text = bm_engine_render(e, true);
        if (o->textfile_dir) {
            int r = bm_push_textfile(o->textfile_dir, text);
            if (r < 0) {
                bm_report("run", NULL, "textfile: %s", bm_error_detail(r));
                e->counters.errors[BM_ERR_PUSH]++;
                ret = BM_EXIT_FAILURE;
            }
        }
        if (o->push_url) {
            char host[256] = "localhost";
            gethostname(host, sizeof(host) - 1);
            int r = bm_push_gateway(o->push_url, host, text, PUSH_TIMEOUT_S);
            if (r < 0) {
                bm_report("run", NULL, "%s", bm_error_detail(r));
                e->counters.errors[BM_ERR_PUSH]++;
                ret = BM_EXIT_FAILURE;
            }
        }
    }
    /* a failure here cannot be counted in what this run writes (the textfile and the push are
     * done, the counters are what failed to be saved): the exit status says it */
    if (!o->dry_run && o->state_path) {
        int r = bm_state_save(o->state_path, &e->prev, &e->counters, e->pass_now_s);
        if (r < 0) {
            bm_report("run", NULL, "state '%s': %s", o->state_path, bm_error_detail(r));
            ret = BM_EXIT_FAILURE;
        }
    }
    return ret;
}

/* Loads the policy: an explicit file must exist; the default path may be missing. */
static int load_policy(const RunOptions *o, BmPolicy **ret)
{
    _cleanup_free_ char *errors = NULL;
    int r = bm_policy_load_or_default(o->policy_path, o->policy_explicit, ret, &errors);
    if (r < 0) {
        bm_log_text(LOG_ERR, errors);
        bm_report("run", NULL, "policy '%s' has errors: nothing changed", o->policy_path);
    }
    return r;
}

static int run(const BmGlobal *g, int argc, char **argv)
{
    static const struct option opts[] = {
        {"once", no_argument, NULL, 'o'},
        {"policy", required_argument, NULL, 'p'},
        {"dry-run", no_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {"state", required_argument, NULL, 's'},
        {"proc", required_argument, NULL, 'P'},
        {"textfile", required_argument, NULL, 't'},
        {"push", required_argument, NULL, 'u'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    RunOptions o = {.policy_path = DEFAULT_POLICY, .state_path = BM_STATE_DEFAULT_PATH};
    int c;
    while ((c = getopt_long(argc, argv, "p:njh", opts, NULL)) != -1) {
        switch (c) {
        case 'o': o.once = true; break;
        case 'p': o.policy_path = optarg; o.policy_explicit = true; break;
        case 'n': o.dry_run = true; break;
        case 'j': o.json = true; break;
        case 's': o.state_path = optarg; break;
        case 'P': o.proc_dir = optarg; break;
        case 't': o.textfile_dir = optarg; break;
        case 'u': o.push_url = optarg; break;
        case 'h': bm_verb_usage(&bm_verb_run, options_help, stdout); return BM_EXIT_OK;
        default: bm_verb_usage(&bm_verb_run, options_help, stderr); return BM_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        bm_report("run", NULL, "unexpected argument '%s'", argv[optind]);
        return BM_EXIT_USAGE;
    }

    if (!o.dry_run && !bm_cli_writable(g, "run", "changing balloons", "use --dry-run"))
        return BM_EXIT_USAGE;
    if ((o.textfile_dir || o.push_url) && !o.once) {
        bm_report("run", NULL, "--textfile and --push go with --once (the agent serves /metrics)");
        return BM_EXIT_USAGE;
    }
    if (o.push_url && bm_push_check_url(o.push_url) < 0) {
        char quoted[512];
        _cleanup_free_ char *shown = bm_push_redact_url(o.push_url);
        bm_report("run", NULL, "--push '%s': %s", bm_printable(shown, quoted, sizeof(quoted)),
                  bm_error_detail(-EINVAL));
        return BM_EXIT_USAGE;
    }
    if (o.textfile_dir && bm_push_check_textfile(o.textfile_dir) < 0) {
        char quoted[512];
        bm_report("run", NULL, "--textfile '%s': %s",
                  bm_printable(o.textfile_dir, quoted, sizeof(quoted)), bm_error_detail(-EINVAL));
        return BM_EXIT_USAGE;
    }
    _cleanup_(bm_policy_freep) BmPolicy *pol = NULL;
    if (load_policy(&o, &pol) < 0)
        return BM_EXIT_USAGE;
    if (!bm_cli_state_check("run", o.state_path, !o.dry_run) || !bm_cli_proc_check("run", o.proc_dir))
        return BM_EXIT_USAGE;

    BmEngine e;
    bm_engine_init(&e);
    if (bm_cli_state_load("run", o.state_path, o.dry_run, &e.prev, &e.counters) < 0)
        e.counters.errors[BM_ERR_STATE]++;

    _cleanup_(virConnectClosep) virConnectPtr conn = NULL;
    int r = bm_conn_open(g->uri, o.dry_run, &conn);
    if (r < 0) {
        bm_report("run", NULL, "%s", bm_error_detail(r));
        bm_engine_clear(&e);
        return BM_EXIT_FAILURE;
    }
    e.conn = conn;
    e.policy = pol;
    e.proc_dir = o.proc_dir;
    e.dry_run = o.dry_run;
    e.probe_features = !o.dry_run;

    if (!o.dry_run) {
        _cleanup_free_ char *uri = bm_conn_uri(conn), *skipped = NULL;
        r = bm_spool_create();
        if (r >= 0)
            r = bm_spool_ingest(&e.counters, uri, bm_now_real_ns() / 1000000000ull, &skipped);
        if (r < 0)
            bm_report("run", NULL, "warning: %s; changes made by 'set --wait' are not counted",
                      bm_error_detail(r));
        if (skipped)
            bm_report("run", NULL, "warning: %s", skipped);
    }
    int ret;
    if (o.once) {
        ret = pass(&e, &o);
        ret = finish_once(&e, &o, ret);
    } else {
        struct sigaction sa = {.sa_handler = on_signal};
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        ret = BM_EXIT_OK;
        BmStateWriter writer = {0};
        while (!stop_requested) {
            if (reload_requested) {
                reload_requested = 0;
                BmPolicy *fresh = NULL;
                if (load_policy(&o, &fresh) == 0) {
                    bm_policy_free(pol);
                    pol = fresh;
                    e.policy = pol;
                    bm_reportp(LOG_NOTICE, "run", NULL, "policy %s reloaded", pol->path);
                } else {
                    bm_report("run", NULL, "policy %s not reloaded: keeping the last good one",
                              o.policy_path);
                }
            }
            pass(&e, &o);
            /* until the next pass: follow the changes in flight, see signals at once */
            uint64_t next = bm_now_mono_ns() + (uint64_t)pol->interval_s * 1000000000ull;
            while (bm_now_mono_ns() < next && !stop_requested && !reload_requested) {
                bm_engine_poll(&e);
                bm_sleep_ms(e.tracker.n_items ? BM_WAIT_DEFAULT_POLL_MS : 100);
            }
            if (!o.dry_run && o.state_path)
                bm_cli_state_save("run", &writer, o.state_path, &e.prev, &e.counters, e.pass_now_s);
        }
    }
    bm_engine_clear(&e);
    return ret;
}

const BmVerb bm_verb_run = {
    .name = "run",
    .run = run,
    .synopsis = "run [--once] [--policy FILE] [--dry-run] [--json] [--state FILE] [--proc DIR]\n"
                "             [--textfile DIR] [--push URL]",
    .summary = "Run policy passes: read the host's and every domain's memory, decide by the policy,\n"
               "and move balloon targets; print each decision and its reason. --once: one pass.",
};
