/* balloonmgr run --once [--policy FILE] [--dry-run] [--json] [--state FILE] [--proc DIR]
 * [--textfile DIR] [--push URL]: one policy pass (what the systemd timer runs): read ->
 * evaluate -> apply -> observe -> export/save, run by once.c; here its options, its setup
 * (policy, state file, lock, connection, spool) and what it prints. The long-running loop is
 * `agent`. */
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
#include "session.h"
#include "engine.h"
#include "once.h"
#include "push.h"
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

static const BmOptDef options[] = {
    {0, "once", 'o', NULL, "one pass, then exit (required; the loop is 'agent')",
     BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_POLICY("policy file (default below; built-in if absent)"),
    BM_OPTDEF_DRY_RUN("decide and print, change nothing"),
    BM_OPTDEF_JSON("print JSON"),
    {0, "table", 'T', NULL, "the table also off a terminal (else one line)",
     BM_COMPLETE_NONE, NULL},
    {'q', "quiet", 'q', NULL, "print nothing on standard output", BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_STATE("state file (default below), locked: exit 4 if held"),
    BM_OPTDEF_PROC("read host memory from DIR instead of /proc"),
    {0, "textfile", 't', " DIR", "the metrics to DIR/balloonmgr.prom (node_exporter)",
     BM_COMPLETE_DIR, NULL},
    {0, "push", 'u', " URL", "PUT the metrics to a Pushgateway at URL", BM_COMPLETE_NONE, NULL},
    {0, "no-libvirt-duplicates", 'D', NULL, "leave out what libvirt exporters export",
     BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_HELP("show this help"),
    BM_OPTDEF_END,
};

static const char help_after[] =
    "\nPolicy: " DEFAULT_POLICY "\n"
    "State:  " BM_STATE_DEFAULT_PATH "\n";

DEFINE_CLEANUP(json_object *, json_object_put)

/* What goes to standard output: the decisions as JSON, as a table (on a terminal, or
 * --table), one summary line (the timer's journal), or nothing (--quiet). */
typedef enum { OUT_JSON, OUT_TABLE, OUT_SUMMARY, OUT_QUIET } RunOutput;

typedef struct {
    const char *policy_path;
    bool policy_explicit;
    bool dry_run, json, once, table, quiet;
    RunOutput output;
    const char *state_path;
    const char *proc_dir;
    const char *textfile_dir;
    const char *push_url;
    bool no_libvirt_duplicates;
} RunOptions;

static json_object *ratej(double v)
{
    return v >= 0 ? json_object_new_double(v) : NULL;
}

static json_object *host_json(const BmHost *h, const BmPlan *plan)
{
    json_object *host = json_object_new_object();
    json_object_object_add(host, "mode", json_object_new_string(bm_host_mode_name(plan->mode)));
    char why[BM_HOST_REASON_MAX];
    bm_host_reason_format(plan, why, sizeof(why));
    json_object_object_add(host, "reason", json_object_new_string(why));
    json_object_object_add(host, "mem_total_bytes", bm_json_u64_or_null(h->mem_total_bytes));
    json_object_object_add(host, "mem_available_bytes", bm_json_u64_or_null(h->mem_available_bytes));
    /* a ratio 0..1 as in the metrics (the kernel's avg10 is a percentage) */
    json_object_object_add(host, "psi_some_avg10_ratio",
                           h->psi_present ? json_object_new_double(h->psi_some_avg10 / 100) : NULL);
    json_object_object_add(host, "need_bytes", json_object_new_uint64(plan->need_bytes));
    json_object_object_add(host, "budget_bytes", json_object_new_uint64(plan->budget_bytes));
    json_object_object_add(host, "guard_bytes", json_object_new_uint64(plan->guard_bytes));
    json_object_object_add(host, "expected_return_bytes", json_object_new_uint64(plan->expected_return_bytes));
    json_object_object_add(host, "unmet_bytes", json_object_new_uint64(plan->unmet_bytes));
    json_object_object_add(host, "in_flight_bytes", json_object_new_uint64(plan->in_flight_bytes));
    json_object_object_add(host, "qemu_overhead_bytes", json_object_new_uint64(plan->qemu_overhead_bytes));
    return host;
}

static json_object *decision_json(const BmPlan *plan, const BmDecision *d, const BmApplied *ap)
{
    json_object *x = json_object_new_object();
    char reason[BM_REASON_MAX];
    bm_reason_format(plan, d, reason, sizeof(reason));
    const char *why = bm_reason_why(d);
    json_object_object_add(x, "name", bm_json_name(d->name));
    json_object_object_add(x, "action", json_object_new_string(bm_action_name(d->action)));
    json_object_object_add(x, "current_bytes", bm_json_u64_or_null(d->current_bytes));
    json_object_object_add(x, "target_bytes", bm_json_u64_or_null(d->target_bytes));
    json_object_object_add(x, "maximum_bytes", bm_json_u64_or_null(d->max_bytes));
    json_object_object_add(x, "floor_bytes", bm_json_u64_or_null(d->floor_bytes));
    json_object_object_add(x, "idle_bytes", json_object_new_uint64(d->idle_bytes));
    json_object_object_add(x, "backed_free_bytes", bm_json_u64_or_null(d->backed_free_bytes));
    json_object_object_add(x, "inflate_yield_ratio", json_object_new_double(d->yield_permille / 1000.0));
    json_object_object_add(x, "returns_nothing", json_object_new_boolean(d->returns_nothing));
    json_object_object_add(x, "reason", json_object_new_string(reason));
    json_object_object_add(x, "major_faults_per_second", ratej(d->pressure.major_fault_rate));
    json_object_object_add(x, "swap_in_bytes_per_second", ratej(d->pressure.swap_in_rate));
    json_object_object_add(x, "disk_read_bytes_per_second", ratej(d->pressure.disk_read_rate));
    json_object_object_add(x, "cpu_share", ratej(d->pressure.cpu_rate));
    json_object_object_add(x, "page_cache_hot", json_object_new_boolean(d->cache_hot));
    json_object_object_add(x, "why", why ? json_object_new_string(why) : NULL);
    json_object_object_add(x, "take_free_bytes", json_object_new_uint64(d->take_free_bytes));
    json_object_object_add(x, "take_page_cache_bytes", json_object_new_uint64(d->take_cache_bytes));
    json_object_object_add(x, "take_hot_page_cache_bytes", json_object_new_uint64(d->take_hot_bytes));
    /* what moves it; a virtio-mem change's device's new requested size and block */
    bool vmem_change = d->vmem && d->vmem_index >= 0;
    json_object_object_add(x, "device", json_object_new_string(d->vmem ? "virtio-mem" : "balloon"));
    json_object_object_add(x, "virtio_mem_requested_bytes",
                           vmem_change ? json_object_new_uint64(d->vmem_requested_bytes) : NULL);
    json_object_object_add(x, "virtio_mem_block_bytes",
                           vmem_change ? json_object_new_uint64(d->vmem_block_bytes) : NULL);
    json_object_object_add(x, "oom_kills", bm_json_u64_or_null(d->pressure.oom_kills));
    json_object_object_add(x, "oom_at", d->pressure.oom_s ? json_object_new_uint64(d->pressure.oom_s) : NULL);
    json_object_object_add(x, "alloc_stalls_per_second", ratej(d->pressure.alloc_stall_rate));
    json_object_object_add(x, "direct_reclaim_bytes_per_second", ratej(d->pressure.direct_reclaim_rate));
    json_object_object_add(x, "stats_age_s", bm_json_u64_or_null(d->pressure.stats_age_s));
    json_object_object_add(x, "stale", json_object_new_boolean(d->pressure.stale));
    json_object_object_add(x, "under_pressure", json_object_new_boolean(d->pressure.under_pressure));
    json_object_object_add(x, "short_of_memory", json_object_new_boolean(d->short_of_memory));
    json_object_object_add(x, "applied", ap->attempted ? json_object_new_boolean(ap->applied) : NULL);
    json_object_object_add(x, "busy", json_object_new_boolean(ap->busy));
    json_object_object_add(x, "error", ap->error[0] ? json_object_new_string(ap->error) : NULL);
    return x;
}

static json_object *timing_json(const BmPassTiming *tm)
{
    json_object *t = json_object_new_object();
    json_object_object_add(t, "pass_s", json_object_new_double(tm->pass_s));
    json_object_object_add(t, "read_s", json_object_new_double(tm->read_s));
    json_object_object_add(t, "decide_s", json_object_new_double(tm->eval_s));
    json_object_object_add(t, "apply_s", json_object_new_double(tm->apply_s));
    json_object_object_add(t, "cpu_s", json_object_new_double(tm->cpu_s));
    json_object_object_add(t, "libvirt_calls", json_object_new_uint64(tm->libvirt_calls));
    return t;
}

static void print_json(const RunOptions *o, const BmEngine *e, const BmPolicy *pol)
{
    const BmPlan *plan = bm_engine_plan(e);
    const BmApplied *ap = bm_engine_applied(e);
    _cleanup_(json_object_putp) json_object *root = json_object_new_object();
    json_object_object_add(root, "host", host_json(bm_engine_host(e), plan));
    json_object_object_add(root, "policy", json_object_new_string(pol->path));
    json_object_object_add(root, "dry_run", json_object_new_boolean(o->dry_run));
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < plan->n_decisions; i++)
        json_object_array_add(arr, decision_json(plan, &plan->decisions[i], &ap[i]));
    json_object_object_add(root, "decisions", arr);
    json_object_object_add(root, "timing", timing_json(bm_engine_timing(e)));
    puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
}

static void print_text(const RunOptions *o, const BmEngine *e, const BmPolicy *pol)
{
    const BmHost *h = bm_engine_host(e);
    const BmPlan *plan = bm_engine_plan(e);
    const BmApplied *ap = bm_engine_applied(e);
    char a[32], b[32], psi[48] = "", guard[96] = "", unmet[48] = "";
    char why[BM_HOST_REASON_MAX], reason[BM_REASON_MAX];
    bm_host_reason_format(plan, why, sizeof(why));
    /* on a terminal the lines are cut at blanks to its width; elsewhere as they always were */
    int width = bm_table_terminal_width(STDOUT_FILENO);
    _cleanup_free_ char *policy = bm_asprintf("policy %s%s", pol->path,
                                              o->dry_run ? " (dry run: nothing is changed)" : "");
    bm_table_print_line(stdout, width, 2, policy);
    if (h->psi_present)
        snprintf(psi, sizeof(psi), ", PSI some avg10 %.1f%%", h->psi_some_avg10);
    _cleanup_free_ char *host = bm_asprintf(
        "host: %s: %s [MemAvailable %s of %s%s]", bm_host_mode_name(plan->mode), why,
        bm_size_format(h->mem_available_bytes, a, sizeof(a)),
        bm_size_format(h->mem_total_bytes, b, sizeof(b)), psi);
    bm_table_print_line(stdout, width, 6, host);
    if (plan->mode == BM_HOST_RECLAIM) {
        if (plan->guard_bytes)
            snprintf(guard, sizeof(guard), ", and %s for guests short of memory",
                     bm_size_format(plan->guard_bytes, a, sizeof(a)));
        if (plan->unmet_bytes)
            snprintf(unmet, sizeof(unmet), "; unmet %s", bm_size_format(plan->unmet_bytes, a, sizeof(a)));
        _cleanup_free_ char *needs = bm_asprintf(
            "host needs %s back%s; planned %s%s", bm_size_format(plan->need_bytes, b, sizeof(b)),
            guard, BM_SZ(plan->planned_inflate_bytes), unmet);
        bm_table_print_line(stdout, width, 2, needs);
    }
    static const char *headers[] = {"NAME", "ACTION", "CURRENT", "TARGET", "RESULT", "REASON"};
    _cleanup_(bm_table_freep) BmTable *t = bm_table_new(BM_ARRAY_SIZE(headers), headers, "llrrlw");
    bm_table_set_give_way(t, "CURRENT,RESULT"); /* balloonmgr(8) says so; REASON wraps */
    for (size_t i = 0; i < plan->n_decisions; i++) {
        const BmDecision *d = &plan->decisions[i];
        bm_table_cell(t, "%s", d->name); /* escaped once, by the table */
        bm_table_cell(t, "%s", bm_action_name(d->action));
        bm_table_cell(t, "%s", bm_present(d->current_bytes) ? bm_size_format(d->current_bytes, a, sizeof(a)) : "-");
        bm_table_cell(t, "%s", bm_present(d->target_bytes) ? bm_size_format(d->target_bytes, b, sizeof(b)) : "-");
        bm_table_cell(t, "%s", ap[i].busy ? "busy"
                               : !ap[i].attempted ? (d->action == BM_ACT_INFLATE || d->action == BM_ACT_DEFLATE ? "dry-run" : "-")
                               : ap[i].applied ? "set" : "FAILED");
        bm_reason_format(plan, d, reason, sizeof(reason));
        bm_table_cell(t, "%s", reason);
    }
    bm_table_print(t, stdout);
}

/* One line for the pass: the mode and its reason, what was set, what failed. */
static void print_summary(const RunOptions *o, const BmEngine *e)
{
    const BmPlan *plan = bm_engine_plan(e);
    const BmApplied *ap = bm_engine_applied(e);
    size_t inflates = 0, deflates = 0, failed = 0, busy = 0;
    for (size_t i = 0; i < plan->n_decisions; i++) {
        BmAction a = plan->decisions[i].action;
        if (a != BM_ACT_INFLATE && a != BM_ACT_DEFLATE)
            continue;
        if (ap[i].busy)
            busy++;
        else if (ap[i].attempted && !ap[i].applied)
            failed++;
        else if (ap[i].applied || o->dry_run)
            a == BM_ACT_INFLATE ? inflates++ : deflates++;
    }
    char why[BM_HOST_REASON_MAX];
    bm_host_reason_format(plan, why, sizeof(why));
    printf("pass: mode %s (%s): %zu inflate(s), %zu deflate(s) %s, %zu failed, %zu busy; "
           "%zu domain(s)%s\n", bm_host_mode_name(plan->mode), why, inflates, deflates,
           o->dry_run ? "planned" : "set", failed, busy, plan->n_decisions,
           o->dry_run ? " (dry run: nothing is changed)" : "");
}

/* What run prints as the timer's pass goes (bm_once_run()'s hooks): the decisions, the changes
 * in flight on stderr when it is a terminal, how each change ended. */
typedef struct {
    const RunOptions *o;
    const BmPolicy *pol;
    BmEngine *e;
    BmProgress p;
} RunShow;

/* The pass decided: its decisions, as the output asks. */
static void on_passed(void *ctx, const BmEngine *e)
{
    RunShow *rs = ctx;
    switch (rs->o->output) {
    case OUT_JSON: print_json(rs->o, e, rs->pol); break;
    case OUT_TABLE: print_text(rs->o, e, rs->pol); break;
    case OUT_SUMMARY: print_summary(rs->o, e); break;
    case OUT_QUIET: break;
    }
    bm_cli_flush_stdout();
}

/* One change's size, rate and ETA, and how many others there are. */
static void on_progress(void *ctx, const BmTracked *x)
{
    RunShow *rs = ctx;
    char line[320], more[48] = "";
    size_t n = bm_engine_in_flight(rs->e);
    if (n > 1)
        snprintf(more, sizeof(more), " (and %zu more in flight)", n - 1);
    bm_progress_format(x->name, x->change.from_bytes, x->change.target_bytes, x->last_actual_bytes,
                       x->change.duration_ns, line, sizeof(line) - sizeof(more));
    strcat(line, more);
    bm_progress_show(&rs->p, line, false);
}

/* The wait for the changes ended: the progress line goes. */
static void on_waited(void *ctx)
{
    RunShow *rs = ctx;
    bm_progress_clear(&rs->p);
}

/* The domains read again after the changes: how each change of the pass ended (the table). */
static void on_observed(void *ctx, const BmEngine *e)
{
    RunShow *rs = ctx;
    const BmPlan *plan = bm_engine_plan(e);
    const BmApplied *ap = bm_engine_applied(e);
    BmLedger *l = bm_engine_ledger(rs->e);
    for (size_t i = 0; rs->o->output == OUT_TABLE && plan && i < plan->n_decisions; i++) {
        const BmLedgerEntry *d = ap[i].applied ? bm_ledger_find(l, plan->decisions[i].uuid) : NULL;
        _cleanup_free_ char *name = d ? bm_escape_name(d->name) : NULL;
        if (d && d->last_duration_s >= 0)
            printf("%s: %s %s in %.3f s\n", name,
                   d->last_direction == BM_DIR_INFLATE ? "inflate" : "deflate",
                   d->unresponsive ? "did not complete (stalled or timed out)" : "ended",
                   d->last_duration_s);
    }
}

/* SIGTERM (systemd stopping the timer's service at TimeoutStartSec=) or SIGINT: the wait for
 * the changes ends, and the pass saves its state and textfile as usual before exiting. A
 * second signal kills (SA_RESETHAND). */
static volatile sig_atomic_t terminated;

static void on_terminate(int sig)
{
    terminated = sig;
}

static void catch_terminate(BmEngine *e)
{
    struct sigaction sa = {.sa_handler = on_terminate, .sa_flags = SA_RESETHAND | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    bm_engine_set_stop(e, &terminated);
    /* a pass that acted always records what it did: an output pipe that closes (| head) is a
     * write error on standard output reported at the exit (status 1), not a SIGPIPE that
     * kills it before the wait, the state save, the textfile and the push */
    signal(SIGPIPE, SIG_IGN);
}

/* The options, checked. Returns 0 to go on, 1 after printing --help, or -EINVAL with the
 * detail. */
static int parse_options(BmGlobal *g, int argc, char **argv, RunOptions *o)
{
    int c;
    while ((c = bm_cli_getopt(g, &bm_verb_run, argc, argv)) != -1) {
        switch (c) {
        case 'o': o->once = true; break;
        case BM_OPT_POLICY: o->policy_path = optarg; o->policy_explicit = true; break;
        case BM_OPT_DRY_RUN: o->dry_run = true; break;
        case BM_OPT_JSON: o->json = true; break;
        case BM_OPT_STATE: o->state_path = optarg; break;
        case BM_OPT_PROC: o->proc_dir = optarg; break;
        case 't': o->textfile_dir = optarg; break;
        case 'u': o->push_url = optarg; break;
        case 'D': o->no_libvirt_duplicates = true; break;
        case 'T': o->table = true; break;
        case 'q': o->quiet = true; break;
        case BM_OPT_HELP: bm_verb_usage(&bm_verb_run, stdout); return 1;
        default: return -EINVAL; /* bm_cli_getopt() stored why */
        }
    }
    if (optind < argc)
        return bm_error(-EINVAL, "unexpected argument '%s'", argv[optind]);
    if (o->json + o->table + o->quiet > 1)
        return bm_error(-EINVAL, "--json, --table and --quiet: give one of them");
    o->output = o->json ? OUT_JSON : o->quiet ? OUT_QUIET
              : o->table || isatty(STDOUT_FILENO) ? OUT_TABLE : OUT_SUMMARY;
    int r;
    if (!o->dry_run && (r = bm_cli_writable(g, "changing balloons", "use --dry-run")) < 0)
        return r;
    if ((o->textfile_dir || o->push_url) && !o->once)
        return bm_error(-EINVAL, "--textfile and --push go with --once (the agent serves /metrics)");
    if (!o->once)
        return bm_error(-EINVAL, "--once is required: the long-running loop is 'balloonmgr agent'");
    if (o->push_url && (r = bm_push_check_url(o->push_url)) < 0) {
        char quoted[512];
        _cleanup_free_ char *shown = bm_push_redact_url(o->push_url);
        return bm_error(-EINVAL, "--push '%s': %s", bm_printable(shown, quoted, sizeof(quoted)),
                        bm_error_detail(r));
    }
    /* an empty name is never a default; a directory that is missing or unusable is found at
     * the export, after the pass acted (export_metrics) */
    if (o->textfile_dir && !*o->textfile_dir)
        return bm_error(-EINVAL, "--textfile '': empty directory name");
    return 0;
}

static int run(BmGlobal *g, int argc, char **argv)
{
    RunOptions o = {.policy_path = DEFAULT_POLICY, .state_path = BM_STATE_DEFAULT_PATH,
                    .proc_dir = g->proc_dir};
    int r = parse_options(g, argc, argv, &o);
    if (r != 0)
        return r > 0 ? BM_EXIT_OK : bm_report_failure("run", NULL, r);
    _cleanup_(bm_policy_freep) BmPolicy *pol = NULL;
    if (bm_session_policy_load("run", o.policy_path, o.policy_explicit, &pol) < 0)
        return bm_report_failure("run", NULL, bm_error(-EINVAL, "policy '%s' has errors: "
                                                       "nothing changed", o.policy_path));
    /* one writer of the state file at a time: held until the run ends (a dry run never writes
     * it, so it reads an agent's state while that runs) */
    _cleanup_close_ int lock_fd = -1;
    if ((r = bm_session_state_check(o.state_path, !o.dry_run)) < 0 ||
        (r = bm_session_proc_check(o.proc_dir)) < 0 ||
        (!o.dry_run && (r = bm_session_state_lock(o.state_path, &lock_fd)) < 0))
        return bm_report_failure("run", NULL, r);

    /* a dry run reads what the real pass reads, the QEMU monitor too (the starvation statistics
     * and the features, as verify_features allows): a read-write connection unless -r, or the
     * read-only socket where libvirt lets this user only read (no monitor then) */
    _cleanup_(virConnectClosep) virConnectPtr conn = NULL;
    bool readonly = g->readonly;
    r = bm_cli_connect(g, readonly, &conn);
    if (r < 0 && o.dry_run && !readonly) {
        readonly = true;
        r = bm_cli_connect(g, readonly, &conn);
    }
    if (r < 0)
        return bm_report_failure("run", NULL, r);
    BmEngineOptions eo = bm_once_engine_options(o.dry_run, readonly);
    eo.proc_dir = o.proc_dir;
    eo.no_libvirt_duplicates = o.no_libvirt_duplicates;
    _cleanup_(bm_engine_freep) BmEngine *e = bm_engine_new(&eo);
    if ((r = bm_session_state_load("run", o.state_path, o.dry_run, bm_engine_ledger(e))) < 0)
        return bm_report_failure("run", NULL, r);
    bm_engine_set_conn(e, conn);
    bm_engine_set_policy(e, pol);
    catch_terminate(e);
    if (!o.dry_run) {
        _cleanup_free_ char *uri = bm_conn_uri(conn);
        bm_session_spool_ingest("run", bm_engine_ledger(e), uri, NULL);
    }
    BmOnceOptions oo = {.dry_run = o.dry_run, .state_path = o.state_path,
                        .textfile_dir = o.textfile_dir, .push_url = o.push_url,
                        .stop = &terminated};
    RunShow rs = {.o = &o, .pol = pol, .e = e};
    bm_progress_init(&rs.p, stderr);
    if (rs.p.f) /* a terminal: the changes in flight shown while the pass waits for them */
        bm_engine_set_progress(e, on_progress, &rs);
    BmOnceHooks hooks = {.ctx = &rs, .passed = on_passed, .waited = on_waited,
                         .observed = on_observed};
    int ret = bm_once_run(e, pol, &oo, &hooks);
    bm_engine_set_progress(e, NULL, NULL);
    bm_engine_set_conn(e, NULL); /* the changes' domain references, before the connection */
    return ret;
}

const BmVerb bm_verb_run = {
    .name = "run",
    .options = options,
    .help_column = 22,
    .reads_host = true,
    .run = run,
    .synopsis = "run --once [--policy FILE] [--dry-run]\n"
                "       [--json|--table|--quiet] [--state FILE] [--proc DIR]\n"
                "       [--textfile DIR] [--push URL] [--no-libvirt-duplicates]",
    .summary = "One policy pass (the timer's job): read the host and every domain, decide by the\n"
               "policy, move balloons; each decision and its reason on a terminal.",
    .help_after = help_after,
    .brief = "one policy pass (the timer's)",
};
