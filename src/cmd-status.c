/* balloonmgr status [DOMAIN...] [--json] [-o COLUMNS] [--no-headings] [--probe]: a line for the host,
 * then the memory of every domain. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "json-name.h"
#include "cli.h"
#include "session.h"
#include "conn.h"
#include "domxml.h"
#include "engine.h"
#include "error.h"
#include "feature.h"
#include "hostmem.h"
#include "ksm.h"
#include "policy.h"
#include "qmp.h"
#include "size.h"
#include "snapshot.h"
#include "state.h"
#include "summary.h"
#include "table.h"

enum { OPT_NO_HEADINGS = 0x100, OPT_PROBE, OPT_RAW };

static const BmOptDef options[] = {
    BM_OPTDEF_JSON("print JSON (sizes in bytes, absent statistics as null)"),
    {'o', "output", 'o', " COLUMNS",
     "the table's columns, comma-separated, in that order (NAME,STATE,\n"
     "MAXIMUM,CURRENT,RECLAIMED,AVAIL,USABLE,UNUSED,CACHES,RSS,SWAPIN,\n"
     "SWAPOUT,MAJFLT,PERIOD,AGE,SG,FPR,AUTODEFL,READ)",
     BM_COMPLETE_LIST, "NAME STATE MAXIMUM CURRENT RECLAIMED AVAIL USABLE UNUSED CACHES RSS SWAPIN "
                       "SWAPOUT MAJFLT PERIOD AGE SG FPR AUTODEFL READ"},
    {0, "no-headings", OPT_NO_HEADINGS, NULL, "neither the host line nor the header row",
     BM_COMPLETE_NONE, NULL},
    {'b', "bytes", 'b', NULL, "sizes in the table in bytes", BM_COMPLETE_NONE, NULL},
    {0, "raw", OPT_RAW, NULL,
     "the table for scripts: no host line, no alignment, one domain a\n"
     "line, fields separated by one space, blanks in a field as \\x20\n"
     "('shut\\x20off'); otherwise the table fits a terminal's width",
     BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_POLICY("the policy deciding the host's mode (default\n" BM_POLICY_DEFAULT_PATH ")"),
    BM_OPTDEF_STATE("the previous pass's mode, for hysteresis (default\n" BM_STATE_DEFAULT_PATH
                    ", if readable)"),
    BM_OPTDEF_PROC("read host memory from DIR instead of /proc (tests)"),
    {0, "probe", OPT_PROBE, NULL,
     "ask the QEMU monitor of running domains for SG, free page\n"
     "reporting and deflate-on-oom (libvirt marks them tainted);\n"
     "without it they are what the agent or the timer found at this\n"
     "start of the domain (--state), or not-probed",
     BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_HELP("show this help"),
    BM_OPTDEF_END,
};

static const char help_after[] =
    "\nFPR and AUTODEFL: free page reporting and deflate-on-oom as the domain XML sets them\n"
    "(on, off), with the QEMU monitor's verdict where known: on+negotiated, on+offered (the\n"
    "guest's driver did not take it), on+not-offered. Backed free (host line, backed_free_bytes):\n"
    "free guest memory the QEMU processes hold; below the table, the configure command for\n"
    "each domain that free page reporting would hand 64 MiB or more of it back for. READ (only\n"
    "with -o): read from all the domain's disks since it started (QEMU): a guest refaulting its\n"
    "page cache reads it again.\n";

DEFINE_CLEANUP(json_object *, json_object_put)

/* The domains status shows: all of the one reading, or the named ones (pointers into it). */
typedef struct {
    const BmDomain **d;
    size_t n;
    uint64_t taken_real_ns; /* the reading's */
} Shown;

/* When the host booted, wall-clock seconds. */
static uint64_t boot_real_s(void)
{
    struct timespec up;
    clock_gettime(CLOCK_BOOTTIME, &up);
    return bm_now_real_ns() / 1000000000ull - (uint64_t)up.tv_sec;
}

/* Seconds since the guest's last stats update, or BM_ABSENT. A timestamp from before the host
 * booted was never set by a guest of this host (libvirt's test driver reports one from 1989):
 * absent too. */
static uint64_t stats_age_s(const BmDomain *d, uint64_t now_real_ns)
{
    uint64_t now_s = now_real_ns / 1000000000ull;
    if (!d->active || !bm_present(d->last_update_s) || d->last_update_s == 0 ||
        d->last_update_s > now_s || d->last_update_s + 1 < boot_real_s())
        return BM_ABSENT;
    return now_s - d->last_update_s;
}

/* What status shows of the monitor's verdicts: SG, free page reporting, deflate-on-oom, or
 * why there is none. */
typedef struct {
    BmFeatureVerdict sg;
    BmFeatureState reporting;
    BmFeatureState deflate_on_oom;
    bool not_probed; /* running, nothing known of this start, no --probe */
} SgCell;

/* The SG cell: the verdict, or "not-probed" when nothing is known of this start. */
static const char *sg_name(const SgCell *c)
{
    return c->not_probed ? "not-probed" : bm_feature_state_name(c->sg.state);
}

/* A verdict for JSON: the state, or "not-probed". */
static const char *verdict_name(const SgCell *c, BmFeatureState st)
{
    return c->not_probed ? "not-probed" : bm_feature_state_name(st);
}

/* Whether d's XML sets the balloon attribute on: true, false, or (XML not read, no balloon) null. */
static json_object *configured_json(const BmDomain *d, BmTristate t)
{
    return d->balloon_known && d->balloon.present ? json_object_new_boolean(t == BM_TRI_ON) : NULL;
}

/* The FPR or AUTODEFL cell (feature.h: bm_feature_config_cell()). */
static const char *config_cell(const BmDomain *d, BmTristate t, BmFeatureState verdict, char *buf,
                               size_t n)
{
    return bm_feature_config_cell(d->balloon_known && d->balloon.present, t == BM_TRI_ON, verdict, buf, n);
}

static json_object *domain_json(const BmDomain *d, const SgCell *sg, const BmHostSummary *sum,
                                const char *uri, uint64_t now_real_ns)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "name", bm_json_name(d->name));
    json_object_object_add(o, "uuid", json_object_new_string(d->uuid));
    json_object_object_add(o, "state", json_object_new_string(bm_snapshot_run_state_name(d->state)));
    json_object_object_add(o, "active", json_object_new_boolean(d->active));
    json_object_object_add(o, "maximum_bytes", bm_json_u64_or_null(d->max_bytes));
    json_object_object_add(o, "current_bytes", bm_json_u64_or_null(d->actual_bytes));
    json_object_object_add(o, "reclaimed_bytes", bm_json_u64_or_null(bm_domain_reclaimed_bytes(d)));
    json_object_object_add(o, "available_bytes", bm_json_u64_or_null(d->available_bytes));
    json_object_object_add(o, "usable_bytes", bm_json_u64_or_null(d->usable_bytes));
    json_object_object_add(o, "unused_bytes", bm_json_u64_or_null(d->unused_bytes));
    json_object_object_add(o, "disk_caches_bytes", bm_json_u64_or_null(d->disk_caches_bytes));
    json_object_object_add(o, "rss_bytes", bm_json_u64_or_null(d->rss_bytes));
    json_object_object_add(o, "swap_in_bytes", bm_json_u64_or_null(d->swap_in_bytes));
    json_object_object_add(o, "swap_out_bytes", bm_json_u64_or_null(d->swap_out_bytes));
    json_object_object_add(o, "major_faults", bm_json_u64_or_null(d->major_faults));
    json_object_object_add(o, "disk_read_bytes", bm_json_u64_or_null(d->disk_read_bytes));
    json_object_object_add(o, "minor_faults", bm_json_u64_or_null(d->minor_faults));
    json_object_object_add(o, "stats_period_s",
                           d->balloon_known && d->balloon.stats_period_s >= 0
                               ? json_object_new_int(d->balloon.stats_period_s)
                               : NULL);
    json_object_object_add(o, "stats_last_update", bm_json_u64_or_null(d->last_update_s));
    json_object_object_add(o, "stats_age_s", bm_json_u64_or_null(stats_age_s(d, now_real_ns)));
    json_object_object_add(o, "balloon_model",
                           d->balloon_known ? json_object_new_string(d->balloon.present
                                                                         ? d->balloon.model
                                                                         : "none")
                                            : NULL);
    json_object_object_add(o, "sg", json_object_new_string(sg_name(sg)));
    json_object_object_add(o, "sg_reason", sg->sg.reason ? json_object_new_string(sg->sg.reason) : NULL);
    json_object_object_add(o, "free_page_reporting_configured", configured_json(d, d->balloon.free_page_reporting));
    json_object_object_add(o, "free_page_reporting", json_object_new_string(verdict_name(sg, sg->reporting)));
    json_object_object_add(o, "deflate_on_oom_configured", configured_json(d, d->balloon.autodeflate));
    json_object_object_add(o, "deflate_on_oom", json_object_new_string(verdict_name(sg, sg->deflate_on_oom)));
    uint64_t backed = sum->have_backed_free ? bm_domain_backed_free_bytes(d, sum->qemu_overhead_bytes) : BM_ABSENT;
    json_object_object_add(o, "backed_free_bytes", bm_json_u64_or_null(backed));
    /* measured for this domain (when a take may come, on this host's QEMU driver), else null:
     * the host-wide estimate served */
    json_object_object_add(o, "qemu_own_bytes", bm_json_u64_or_null(d->qemu_own_known ? d->qemu_own_bytes
                                                                                      : BM_ABSENT));
    _cleanup_free_ char *cmd = bm_summary_fpr_would_return(d, backed)
                                   ? bm_summary_fpr_command(d->name, uri) : NULL;
    json_object_object_add(o, "free_page_reporting_command", cmd ? bm_json_name(cmd) : NULL);
    const char *no_return = d->balloon_known ? bm_domxml_no_return_reason(&d->balloon) : NULL;
    json_object_object_add(o, "returns_nothing", no_return ? json_object_new_string(no_return) : NULL);
    json_object_object_add(o, "error", d->error ? json_object_new_string(d->error) : NULL);
    return o;
}

static bool bytes_cells; /* --bytes */

static const char *size_cell(uint64_t v, char *buf, size_t n)
{
    if (!bm_present(v))
        return "-";
    if (bytes_cells) {
        snprintf(buf, n, "%" PRIu64, v);
        return buf;
    }
    return bm_size_format(v, buf, n);
}

static const char *count_cell(uint64_t v, char *buf, size_t n)
{
    if (!bm_present(v))
        return "-";
    snprintf(buf, n, "%" PRIu64, v);
    return buf;
}

/* "42s", "5m", "3h", "12d". */
static const char *age_cell(uint64_t s, char *buf, size_t n)
{
    if (!bm_present(s))
        return "-";
    if (s < 120)
        snprintf(buf, n, "%" PRIu64 "s", s);
    else if (s < 120 * 60)
        snprintf(buf, n, "%" PRIu64 "m", s / 60);
    else if (s < 48 * 3600)
        snprintf(buf, n, "%" PRIu64 "h", s / 3600);
    else
        snprintf(buf, n, "%" PRIu64 "d", s / 86400);
    return buf;
}

/* Prints the table (every column, or cols[0..n_cols) when cols), with headings or not. */
static void print_table(const Shown *s, const SgCell *sg, const BmHostSummary *sum,
                        const char *uri, const char *columns, bool headings, bool raw)
{
    static const char *headers[] = {"NAME",   "STATE",  "MAXIMUM", "CURRENT", "RECLAIMED",
                                    "AVAIL",  "USABLE", "UNUSED",  "CACHES",  "RSS",
                                    "SWAPIN", "SWAPOUT", "MAJFLT", "PERIOD",  "AGE", "SG",
                                    "FPR",    "AUTODEFL", "READ"};
    _cleanup_(bm_table_freep) BmTable *t =
        bm_table_new(BM_ARRAY_SIZE(headers), headers, "tlrrrrrrrrrrrrrlllr");
    bm_table_set_raw(t, raw);
    char b[32];
    for (size_t i = 0; i < s->n; i++) {
        const BmDomain *d = s->d[i];
        bm_table_cell(t, "%s", d->name); /* escaped once, by the table */
        bm_table_cell(t, "%s", bm_snapshot_run_state_name(d->state));
        bm_table_cell(t, "%s", size_cell(d->max_bytes, b, sizeof(b)));
        bm_table_cell(t, "%s", size_cell(d->actual_bytes, b, sizeof(b)));
        bm_table_cell(t, "%s", size_cell(bm_domain_reclaimed_bytes(d), b, sizeof(b)));
        bm_table_cell(t, "%s", size_cell(d->available_bytes, b, sizeof(b)));
        bm_table_cell(t, "%s", size_cell(d->usable_bytes, b, sizeof(b)));
        bm_table_cell(t, "%s", size_cell(d->unused_bytes, b, sizeof(b)));
        bm_table_cell(t, "%s", size_cell(d->disk_caches_bytes, b, sizeof(b)));
        bm_table_cell(t, "%s", size_cell(d->rss_bytes, b, sizeof(b)));
        bm_table_cell(t, "%s", size_cell(d->swap_in_bytes, b, sizeof(b)));
        bm_table_cell(t, "%s", size_cell(d->swap_out_bytes, b, sizeof(b)));
        bm_table_cell(t, "%s", count_cell(d->major_faults, b, sizeof(b)));
        if (d->balloon_known && !d->balloon.present)
            bm_table_cell(t, "none");
        else if (d->balloon_known && d->balloon.stats_period_s > 0)
            bm_table_cell(t, "%ds", d->balloon.stats_period_s);
        else
            bm_table_cell(t, "%s", d->balloon_known && d->balloon.stats_period_s == 0 ? "off" : "-");
        bm_table_cell(t, "%s", age_cell(stats_age_s(d, s->taken_real_ns), b, sizeof(b)));
        bm_table_cell(t, "%s", sg_name(&sg[i]));
        bm_table_cell(t, "%s", config_cell(d, d->balloon.free_page_reporting, sg[i].reporting, b, sizeof(b)));
        bm_table_cell(t, "%s", config_cell(d, d->balloon.autodeflate, sg[i].deflate_on_oom, b, sizeof(b)));
        bm_table_cell(t, "%s", size_cell(d->disk_read_bytes, b, sizeof(b)));
    }
    _cleanup_free_ size_t *cols = NULL;
    size_t n_cols = 0;
    if (!columns || bm_table_parse_columns(t, columns, &cols, &n_cols) < 0) {
        free(cols);
        cols = bm_malloc0(BM_ARRAY_SIZE(headers) * sizeof(size_t));
        /* READ only when asked for (-o): the default columns stay what scripts parse */
        for (n_cols = 0; n_cols < BM_ARRAY_SIZE(headers) - 1; n_cols++)
            cols[n_cols] = n_cols;
    }
    bm_table_print_columns(t, stdout, cols, n_cols, headings);
    for (size_t i = 0; headings && !raw && i < s->n; i++) {
        const BmDomain *d = s->d[i];
        const char *why = d->balloon_known ? bm_domxml_no_return_reason(&d->balloon) : NULL;
        /* the name escaped once, as list prints it; the command is already a shell word */
        _cleanup_free_ char *name = bm_escape_name(d->name);
        if (why)
            printf("%s: never inflated: ballooning returns nothing to the host: %s\n", name, why);
        uint64_t backed = sum->have_backed_free ? bm_domain_backed_free_bytes(d, sum->qemu_overhead_bytes)
                                                : BM_ABSENT;
        if (bm_summary_fpr_would_return(d, backed)) {
            char size[32];
            _cleanup_free_ char *cmd = bm_summary_fpr_command(d->name, uri);
            printf("%s: QEMU holds %s of free guest memory that free page reporting would hand "
                   "back (Linux guests 5.7 or later): '%s', then shut the domain down and start "
                   "it again (a reboot keeps the QEMU process)\n",
                   name, bm_size_format(backed, size, sizeof(size)), cmd);
        }
    }
}

/* The column names of the table, to check -o before connecting. */
static int check_columns(const char *columns)
{
    static const char *headers[] = {"NAME",   "STATE",  "MAXIMUM", "CURRENT", "RECLAIMED",
                                    "AVAIL",  "USABLE", "UNUSED",  "CACHES",  "RSS",
                                    "SWAPIN", "SWAPOUT", "MAJFLT", "PERIOD",  "AGE", "SG",
                                    "FPR",    "AUTODEFL", "READ"};
    _cleanup_(bm_table_freep) BmTable *t = bm_table_new(BM_ARRAY_SIZE(headers), headers, "");
    _cleanup_free_ size_t *cols = NULL;
    size_t n = 0;
    return bm_table_parse_columns(t, columns, &cols, &n);
}

/* The state file as status reads it, once, into the engine's ledger: the previous pass's mode
 * for hysteresis and the verdicts the agent or the timer found. */
typedef struct {
    const char *path;
    bool explicit_path; /* --state: a bad one is an error, not a fresh start */
    int load;           /* what bm_state_load() returned */
    char detail[512];   /* and why, when it failed */
} StateRead;

/* Loads the state file at path into l (the engine's ledger), how it went into *ret. */
static void state_read(const char *path, bool explicit_path, BmLedger *l, StateRead *ret)
{
    *ret = (StateRead){.path = path, .explicit_path = explicit_path};
    ret->load = bm_state_load(path, l);
    if (ret->load < 0)
        snprintf(ret->detail, sizeof(ret->detail), "%s", bm_error_detail(ret->load));
}

/* The policy deciding the host's mode as status reads it, before anything is reported. */
typedef struct {
    const char *path;
    bool explicit_path; /* --policy: one with errors is an error, not a warning */
    BmPolicy *pol;      /* NULL when it has errors */
    char *errors;       /* then their list */
} PolicyRead;

static void policy_read(const char *path, bool explicit_path, PolicyRead *ret)
{
    *ret = (PolicyRead){.path = path, .explicit_path = explicit_path};
    bm_policy_load_or_default(path, explicit_path, &ret->pol, &ret->errors);
}

static void policy_clear(PolicyRead *p)
{
    bm_policy_free(p->pol);
    free(p->errors);
}

/* Reports what status could not read, in this order: the host's memory (host_error, "" when
 * it was read) and KSM as warnings; the system's policy with errors as a warning (the host's
 * mode is not shown, nothing more is checked). An explicit --policy with errors (its errors
 * printed) or a bad explicit --state is an error: returns 0, or -errno with the detail
 * (-EINVAL: the policy; -ENOENT: a missing --state; -EIO: one that cannot be loaded). */
static int report_inputs(const BmEngine *e, const char *host_error, const PolicyRead *policy,
                         const StateRead *state)
{
    const char *ksm_error;
    if (host_error[0])
        bm_report("status", NULL, "warning: %s", host_error);
    if (!bm_engine_ksm(e, &ksm_error) && ksm_error[0])
        bm_report("status", NULL, "warning: KSM: %s", ksm_error);
    if (!policy->pol && !policy->explicit_path) {
        /* the system's policy is broken: say so, show everything but the mode */
        bm_report("status", NULL, "warning: policy '%s' has errors ('balloonmgr policy check' "
                  "lists them): the host's mode is not shown", policy->path);
        return 0;
    }
    if (!policy->pol) {
        fputs(policy->errors ? policy->errors : "", stderr);
        return bm_error(-EINVAL, "policy '%s' has errors", policy->path);
    }
    if (state->load < 0 && state->explicit_path) /* the load's cause, stored again */
        return bm_error(state->load == -ENOENT ? -ENOENT : -EIO, "state '%s': %s", state->path,
                        state->detail);
    return 0;
}

/* The host line from the engine's reading and dry evaluation: host memory, KSM, the running
 * domains of all of the reading, and, when the policy decided, the mode and QEMU's own memory
 * (backed free). */
static void host_summary(const BmEngine *e, BmHostSummary *ret)
{
    *ret = (BmHostSummary){0};
    const BmHost *host = bm_engine_host(e);
    const BmKsm *ksm = bm_engine_ksm(e, NULL);
    const BmSnapshot *all = bm_engine_snapshot(e);
    const BmPlan *plan = bm_engine_plan(e);
    if ((ret->have_host = host != NULL))
        ret->host = *host;
    if ((ret->have_ksm = ksm != NULL))
        ret->ksm = *ksm;
    bm_summary_add_domains(ret, all);
    if (plan) {
        ret->have_mode = true;
        ret->mode = plan->mode;
        bm_host_reason_format(plan, ret->mode_reason, sizeof(ret->mode_reason));
        bm_summary_add_backed_free(ret, all, plan->qemu_overhead_bytes);
    }
}

/* SG, reporting and deflate-on-oom verdicts per domain shown: with probe, running ones
 * through the QEMU monitor (libvirt then marks them tainted); else what the agent or the
 * timer found at this start of the domain (the state file's, state, loaded into known), or
 * not probed. */
static SgCell *probe_sg(virConnectPtr conn, const Shown *s, bool readonly, bool probe,
                        const StateRead *state, const BmLedger *known, const char *proc_dir)
{
    char boot_id[40];
    bm_hostmem_read_boot_id(proc_dir, boot_id, sizeof(boot_id));
    SgCell *cells = bm_malloc0((s->n + 1) * sizeof(SgCell));
    BmFeatureOptions fopts = {.sg_bit = BM_SG_DEFAULT_BIT};
    bool have_known = !probe && state->load == 0;
    for (size_t i = 0; i < s->n; i++) {
        const BmDomain *d = s->d[i];
        BmFeatureReport rep;
        const BmLedgerEntry *rec = have_known ? bm_ledger_find(known, d->uuid) : NULL;
        if (!d->active) {
            bm_features_decide(NULL, BM_VIRTIO_NOT_RUNNING, &fopts, &rep);
        } else if (d->balloon_known && !d->balloon.present) {
            bm_features_decide(NULL, BM_VIRTIO_NO_BALLOON, &fopts, &rep);
        } else if (!probe) {
            bm_features_decide(NULL, BM_VIRTIO_ERROR, &fopts, &rep);
            bool known_now = bm_ledger_verdict_current(rec, d, boot_id);
            cells[i].not_probed = !known_now;
            if (known_now) {
                rep.feature[BM_FEATURE_SG].state = rec->sg;
                rep.feature[BM_FEATURE_REPORTING].state = rec->reporting;
                rep.feature[BM_FEATURE_DEFLATE_ON_OOM].state = rec->deflate_on_oom;
            }
            rep.feature[BM_FEATURE_SG].reason =
                known_now ? "probed at this start of the domain by the agent or the timer (state file)"
                          : "not probed: 'balloonmgr status --probe' or 'balloonmgr verify' asks the "
                            "QEMU monitor";
        } else if (readonly) {
            bm_features_decide(NULL, BM_VIRTIO_ERROR, &fopts, &rep);
            rep.feature[BM_FEATURE_SG].reason = "read-only connection: no QEMU monitor access";
        } else {
            _cleanup_(virDomainFreep) virDomainPtr dom = NULL;
            _cleanup_free_ char *path = NULL, *error = NULL;
            if (bm_conn_lookup_name(conn, d->name, &dom) < 0) {
                bm_features_decide(NULL, BM_VIRTIO_ERROR, &fopts, &rep);
            } else {
                bm_qmp_probe_balloon(dom, &fopts, &rep, &path, &error);
            }
        }
        cells[i].sg = rep.feature[BM_FEATURE_SG];
        cells[i].reporting = rep.feature[BM_FEATURE_REPORTING].state;
        cells[i].deflate_on_oom = rep.feature[BM_FEATURE_DEFLATE_ON_OOM].state;
    }
    return cells;
}

/* The checks of status's options before anything is read: --output's columns, what goes
 * with --json, a --state (explicit_state, NULL when not given) and --proc that are what they
 * must be. Returns 0, or -EINVAL with the detail. */
static int check_options(const char *columns, bool json, bool raw, const char *explicit_state,
                         const char *proc_dir)
{
    int r = columns ? check_columns(columns) : 0;
    if (r < 0) {
        char shown[256];
        return bm_error(-EINVAL, "--output '%s': %s", bm_printable(columns, shown, sizeof(shown)),
                        bm_error_detail(r));
    }
    if (json && (raw || bytes_cells))
        return bm_error(-EINVAL, "--raw and --bytes are for the table, not --json (sizes are "
                        "bytes there)");
    if (columns && json)
        return bm_error(-EINVAL, "--output is for the table, not --json");
    /* the same input, the same status as run and agent: a --state that is not a regular file
     * is bad input (exit 2) */
    if (explicit_state && (r = bm_session_state_check(explicit_state, false)) < 0)
        return r;
    /* and a --proc that is not a directory with a regular meminfo, as for run ('' is no
     * directory: it read /meminfo) */
    return bm_session_proc_check(proc_dir);
}

/* Prints the host line and the domains of s (with their SG cells sg) as JSON or as the
 * table (columns: -o, NULL for all; headings: the host line and the header; raw: --raw). */
static void print_status(const Shown *s, const SgCell *sg, const BmHostSummary *summary,
                         const char *uri, const char *columns, bool json, bool headings, bool raw)
{
    if (json) {
        _cleanup_(json_object_putp) json_object *root = json_object_new_object();
        json_object_object_add(root, "host", bm_summary_json(summary));
        json_object *arr = json_object_new_array();
        for (size_t i = 0; i < s->n; i++)
            json_object_array_add(arr,
                                  domain_json(s->d[i], &sg[i], summary, uri, s->taken_real_ns));
        json_object_object_add(root, "domains", arr);
        puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
    } else {
        if (headings && !raw) {
            char line[512];
            puts(bm_summary_format(summary, line, sizeof(line)));
        }
        print_table(s, sg, summary, uri, columns, headings, raw);
    }
}

/* Opens the connection: read-only unless --probe (probe), which needs the QEMU monitor that a
 * read-only connection may not use: read-write then, and read-only when that is refused.
 * Returns 0 with *ret_readonly, or -errno with the detail (a runtime failure). */
static int open_conn(const BmGlobal *g, bool probe, virConnectPtr *ret, bool *ret_readonly)
{
    bool readonly = g->readonly || !probe;
    int r = bm_conn_open(g->uri, readonly, ret);
    if (r == -EACCES && !readonly) {
        readonly = true;
        r = bm_conn_open(g->uri, true, ret);
    }
    *ret_readonly = readonly;
    return bm_as_failure(r);
}

/* The domains shown, out of the one reading all: every one, or the named ones (names, NULL:
 * all) into *ret with *ret_picked (caller frees) holding them. Returns 0 or -errno. */
static int pick_shown(virConnectPtr conn, const BmSnapshot *all, char *const *names, Shown *ret,
                      const BmDomain ***ret_picked)
{
    *ret = (Shown){.taken_real_ns = all->taken_real_ns};
    if (names) {
        int r = bm_snapshot_pick(conn, all, names, ret_picked, &ret->n);
        ret->d = *ret_picked;
        return r;
    }
    const BmDomain **picked = bm_malloc0((all->n_domains + 1) * sizeof(*picked));
    for (ret->n = 0; ret->n < all->n_domains; ret->n++)
        picked[ret->n] = &all->domains[ret->n];
    ret->d = *ret_picked = picked;
    return 0;
}

static int run(BmGlobal *g, int argc, char **argv)
{
    bool json = false, headings = true, policy_explicit = false, state_explicit = false;
    bool probe = false, raw = false;
    const char *columns = NULL, *policy_path = BM_POLICY_DEFAULT_PATH;
    const char *state_path = BM_STATE_DEFAULT_PATH, *proc_dir = g->proc_dir;
    int c;
    while ((c = bm_cli_getopt(g, &bm_verb_status, argc, argv)) != -1) {
        switch (c) {
        case BM_OPT_JSON: json = true; break;
        case 'o': columns = optarg; break;
        case OPT_NO_HEADINGS: headings = false; break;
        case BM_OPT_POLICY: policy_path = optarg; policy_explicit = true; break;
        case BM_OPT_STATE: state_path = optarg; state_explicit = true; break;
        case BM_OPT_PROC: proc_dir = optarg; break;
        case OPT_PROBE: probe = true; break;
        case 'b': bytes_cells = true; break;
        case OPT_RAW: raw = true; break;
        case BM_OPT_HELP: bm_verb_usage(&bm_verb_status, stdout); return BM_EXIT_OK;
        default: return bm_report_failure("status", NULL, -EINVAL); /* bm_cli_getopt()'s */
        }
    }
    char *const *names = optind < argc ? &argv[optind] : NULL;
    int r = check_options(columns, json, raw, state_explicit ? state_path : NULL, proc_dir);
    if (r < 0)
        return bm_report_failure("status", NULL, r);

    /* the policy and the state file first, reported after the reading as before */
    _cleanup_(policy_clear) PolicyRead policy;
    policy_read(policy_path, policy_explicit, &policy);
    _cleanup_(virConnectClosep) virConnectPtr conn = NULL; /* closed after the engine is freed */
    BmEngineOptions eo = {.proc_dir = proc_dir, .dry_run = true, .timer = true};
    _cleanup_(bm_engine_freep) BmEngine *e = bm_engine_new(&eo);
    StateRead state;
    state_read(state_path, state_explicit, bm_engine_ledger(e), &state);
    bool readonly;
    if ((r = open_conn(g, probe, &conn, &readonly)) < 0)
        return bm_report_failure("status", NULL, r);
    bm_engine_set_conn(e, conn);
    bm_engine_set_policy(e, policy.pol);
    /* one reading of the host and every domain and the policy's dry evaluation, as 'run --once
     * --dry-run' makes them: the host line counts every running domain, also when only some
     * are shown */
    r = bm_engine_evaluate(e);
    const BmSnapshot *all = bm_engine_snapshot(e);
    if (!all)
        return bm_report_failure("status", NULL, r);
    /* the host not read: a warning below; read, but not enough for the policy: no mode */
    char host_error[512] = "";
    if (r < 0 && !bm_engine_host(e))
        snprintf(host_error, sizeof(host_error), "%s", bm_error_detail(r));
    Shown shown;
    _cleanup_free_ const BmDomain **picked = NULL;
    if ((r = pick_shown(conn, all, names, &shown, &picked)) < 0)
        return bm_report_failure("status", NULL, r);
    for (size_t i = 0; i < shown.n; i++)
        if (shown.d[i]->error)
            bm_report("status", shown.d[i]->name, "%s", shown.d[i]->error);
    if ((r = report_inputs(e, host_error, &policy, &state)) < 0)
        return bm_report_failure("status", NULL, r);
    _cleanup_free_ SgCell *sg =
        probe_sg(conn, &shown, readonly, probe, &state, bm_engine_ledger(e), proc_dir);
    BmHostSummary summary;
    host_summary(e, &summary);
    print_status(&shown, sg, &summary, g->uri, columns, json, headings, raw);
    return BM_EXIT_OK;
}

const BmVerb bm_verb_status = {
    .name = "status",
    .options = options,
    .help_column = 25,
    .help_after = help_after,
    .reads_host = true,
    .run = run,
    .synopsis = "status [DOMAIN...] [--json] [-o COLUMNS] [--no-headings] [--bytes] [--raw]\n"
                "             [--policy FILE] [--state FILE] [--proc DIR] [--probe]",
    .summary = "Show the host (memory, PSI, the policy's mode, reclaimed, overcommit, KSM) and each\n"
               "domain's memory: maximum, balloon, what the guest reports, host RSS.",
};
