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

#include "balloon.h"
#include "cli.h"
#include "conn.h"
#include "error.h"
#include "hostmem.h"
#include "policy-eval.h"
#include "policy.h"
#include "size.h"
#include "snapshot.h"
#include "state.h"
#include "table.h"

#define DEFAULT_POLICY "/etc/balloonmgr/balloonmgr.policy"

static const char options_help[] =
    "      --once          one pass, then exit (what the systemd timer runs)\n"
    "  -p, --policy FILE   policy file (default " DEFAULT_POLICY ";\n"
    "                      built-in defaults when that file does not exist)\n"
    "  -n, --dry-run       decide and print, change nothing (no balloon, no state file)\n"
    "  -j, --json          print JSON\n"
    "      --state FILE    state file (default " BM_STATE_DEFAULT_PATH ")\n"
    "      --proc DIR      read host memory from DIR/meminfo and DIR/pressure/memory\n"
    "                      instead of /proc (for tests and demos)\n"
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
} RunOptions;

/* Per decision: what applying it did. */
typedef struct {
    bool attempted, applied;
    char *error;
} Applied;

static json_object *u64j(uint64_t v)
{
    return bm_present(v) ? json_object_new_uint64(v) : NULL;
}

static json_object *ratej(double v)
{
    return v >= 0 ? json_object_new_double(v) : NULL;
}

static void print_json(const RunOptions *o, const BmPolicy *pol, const BmHost *h, const BmPlan *plan,
                       const Applied *ap)
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
    json_object_object_add(root, "host", host);
    json_object_object_add(root, "policy", json_object_new_string(pol->path));
    json_object_object_add(root, "dry_run", json_object_new_boolean(o->dry_run));
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < plan->n_decisions; i++) {
        const BmDecision *d = &plan->decisions[i];
        json_object *x = json_object_new_object();
        json_object_object_add(x, "name", json_object_new_string(d->name));
        json_object_object_add(x, "action", json_object_new_string(bm_action_name(d->action)));
        json_object_object_add(x, "current_bytes", u64j(d->current_bytes));
        json_object_object_add(x, "target_bytes", u64j(d->target_bytes));
        json_object_object_add(x, "maximum_bytes", u64j(d->max_bytes));
        json_object_object_add(x, "floor_bytes", u64j(d->floor_bytes));
        json_object_object_add(x, "idle_bytes", json_object_new_uint64(d->idle_bytes));
        json_object_object_add(x, "reason", json_object_new_string(d->reason));
        json_object_object_add(x, "major_fault_rate", ratej(d->pressure.major_fault_rate));
        json_object_object_add(x, "swap_in_rate_bytes", ratej(d->pressure.swap_in_rate));
        json_object_object_add(x, "stats_age_s", u64j(d->pressure.stats_age_s));
        json_object_object_add(x, "stale", json_object_new_boolean(d->pressure.stale));
        json_object_object_add(x, "under_pressure", json_object_new_boolean(d->pressure.under_pressure));
        json_object_object_add(x, "applied", ap[i].attempted ? json_object_new_boolean(ap[i].applied) : NULL);
        json_object_object_add(x, "error", ap[i].error ? json_object_new_string(ap[i].error) : NULL);
        json_object_array_add(arr, x);
    }
    json_object_object_add(root, "decisions", arr);
    puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
}

static void print_text(const RunOptions *o, const BmPolicy *pol, const BmHost *h, const BmPlan *plan,
                       const Applied *ap)
{
    char a[32], b[32];
    printf("policy %s%s\n", pol->path, o->dry_run ? " (dry run: nothing is changed)" : "");
    printf("host: %s: %s", bm_host_mode_name(plan->mode), plan->reason);
    printf(" [MemAvailable %s of %s", bm_size_format(h->mem_available_bytes, a, sizeof(a)),
           bm_size_format(h->mem_total_bytes, b, sizeof(b)));
    if (h->psi_present)
        printf(", PSI some avg10 %.1f%%", h->psi_some_avg10);
    printf("]\n");
    if (plan->mode == BM_HOST_RECLAIM)
        printf("host needs %s back; planned %s\n", bm_size_format(plan->need_bytes, a, sizeof(a)),
               bm_size_format(plan->planned_inflate_bytes, b, sizeof(b)));
    static const char *headers[] = {"NAME", "ACTION", "CURRENT", "TARGET", "RESULT", "REASON"};
    _cleanup_(bm_table_freep) BmTable *t = bm_table_new(BM_ARRAY_SIZE(headers), headers, "llrrll");
    for (size_t i = 0; i < plan->n_decisions; i++) {
        const BmDecision *d = &plan->decisions[i];
        char name[256];
        bm_table_cell(t, "%s", bm_printable(d->name, name, sizeof(name)));
        bm_table_cell(t, "%s", bm_action_name(d->action));
        bm_table_cell(t, "%s", bm_present(d->current_bytes) ? bm_size_format(d->current_bytes, a, sizeof(a)) : "-");
        bm_table_cell(t, "%s", bm_present(d->target_bytes) ? bm_size_format(d->target_bytes, b, sizeof(b)) : "-");
        bm_table_cell(t, "%s", !ap[i].attempted ? (d->action == BM_ACT_INFLATE || d->action == BM_ACT_DEFLATE ? "dry-run" : "-")
                               : ap[i].applied ? "set" : "FAILED");
        bm_table_cell(t, "%s", d->reason);
    }
    bm_table_print(t, stdout);
}

/* One pass. Returns an exit status. prev is updated for the next pass. */
static int pass(virConnectPtr conn, const RunOptions *o, const BmPolicy *pol, BmPrevious *prev)
{
    BmHost host;
    int r = bm_hostmem_read(o->proc_dir, &host);
    if (r < 0) {
        bm_report("run", NULL, "host memory: %s", bm_error_detail(r));
        return BM_EXIT_FAILURE;
    }
    BmSnapshot snap;
    r = bm_snapshot_take(conn, NULL, BM_SNAPSHOT_XML, &snap);
    if (r < 0) {
        bm_report("run", NULL, "%s", bm_error_detail(r));
        return BM_EXIT_FAILURE;
    }
    uint64_t now_s = bm_now_real_ns() / 1000000000ull;
    BmPlan plan;
    r = bm_policy_eval(&host, &snap, prev, pol, now_s, &plan);
    if (r < 0) {
        bm_report("run", NULL, "%s", bm_error_detail(r));
        bm_snapshot_clear(&snap);
        return BM_EXIT_FAILURE;
    }

    int ret = BM_EXIT_OK;
    _cleanup_free_ Applied *ap = bm_malloc0((plan.n_decisions + 1) * sizeof(Applied));
    for (size_t i = 0; i < plan.n_decisions && !o->dry_run; i++) {
        const BmDecision *d = &plan.decisions[i];
        if (d->action != BM_ACT_INFLATE && d->action != BM_ACT_DEFLATE)
            continue;
        ap[i].attempted = true;
        _cleanup_(virDomainFreep) virDomainPtr dom = NULL;
        BmChange ch;
        r = bm_conn_lookup(conn, d->name, &dom);
        if (r >= 0)
            r = bm_balloon_change(dom, d->current_bytes, d->target_bytes, NULL, &ch);
        if (r < 0) {
            ap[i].error = bm_strdup(bm_error_detail(r));
            bm_report("run", d->name, "%s, skipping domain", ap[i].error);
            ret = BM_EXIT_FAILURE;
        } else {
            ap[i].applied = true;
        }
    }

    if (o->json)
        print_json(o, pol, &host, &plan, ap);
    else
        print_text(o, pol, &host, &plan, ap);
    fflush(stdout);

    bm_previous_clear(prev);
    bm_previous_from(&snap, plan.mode, now_s, prev);
    if (!o->dry_run && o->state_path) {
        r = bm_state_save(o->state_path, prev, now_s);
        if (r < 0) {
            bm_report("run", NULL, "state: %s", bm_error_detail(r));
            ret = BM_EXIT_FAILURE;
        }
    }
    for (size_t i = 0; i < plan.n_decisions; i++)
        free(ap[i].error);
    bm_plan_clear(&plan);
    bm_snapshot_clear(&snap);
    return ret;
}

/* Loads the policy: an explicit file must exist; the default path may be missing. */
static int load_policy(const RunOptions *o, BmPolicy **ret)
{
    _cleanup_free_ char *errors = NULL;
    if (!o->policy_explicit && access(o->policy_path, F_OK) < 0) {
        *ret = bm_policy_new_default();
        return 0;
    }
    int r = bm_policy_load(o->policy_path, ret, &errors);
    if (r < 0) {
        fputs(errors ? errors : "", stderr);
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
        case 'h': bm_verb_usage(&bm_verb_run, options_help, stdout); return BM_EXIT_OK;
        default: bm_verb_usage(&bm_verb_run, options_help, stderr); return BM_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        bm_report("run", NULL, "unexpected argument '%s'", argv[optind]);
        return BM_EXIT_USAGE;
    }

    _cleanup_(bm_policy_freep) BmPolicy *pol = NULL;
    if (load_policy(&o, &pol) < 0)
        return BM_EXIT_USAGE;

    BmPrevious prev = {.mode = BM_HOST_HOLD};
    int r = bm_state_load(o.state_path, &prev);
    if (r < 0 && r != -ENOENT)
        bm_report("run", NULL, "warning: state: %s; starting fresh", bm_error_detail(r));

    _cleanup_(virConnectClosep) virConnectPtr conn = NULL;
    r = bm_conn_open(g->uri, o.dry_run, &conn);
    if (r < 0) {
        bm_report("run", NULL, "%s", bm_error_detail(r));
        bm_previous_clear(&prev);
        return BM_EXIT_FAILURE;
    }

    int ret;
    if (o.once) {
        ret = pass(conn, &o, pol, &prev);
    } else {
        struct sigaction sa = {.sa_handler = on_signal};
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        ret = BM_EXIT_OK;
        while (!stop_requested) {
            if (reload_requested) {
                reload_requested = 0;
                BmPolicy *fresh = NULL;
                if (load_policy(&o, &fresh) == 0) {
                    bm_policy_free(pol);
                    pol = fresh;
                    fprintf(stderr, "balloonmgr: run: policy %s reloaded\n", pol->path);
                } else {
                    bm_report("run", NULL, "policy %s not reloaded: keeping the last good one",
                              o.policy_path);
                }
            }
            pass(conn, &o, pol, &prev);
            /* sleep the interval in small steps so that signals are seen at once */
            for (unsigned t = 0; t < pol->interval_s * 10 && !stop_requested && !reload_requested; t++)
                bm_sleep_ms(100);
        }
    }
    bm_previous_clear(&prev);
    return ret;
}

const BmVerb bm_verb_run = {
    .name = "run",
    .run = run,
    .synopsis = "run [--once] [--policy FILE] [--dry-run] [--json] [--state FILE] [--proc DIR]",
    .summary = "Run policy passes: read the host's and every domain's memory, decide by the policy,\n"
               "and move balloon targets; print each decision and its reason. --once: one pass.",
};
