/* balloonmgr status [DOMAIN...] [--json] [-o COLUMNS] [--no-headings] [--probe]: a line for the host,
 * then the memory of every domain. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <syslog.h>

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
#include "vmem.h"

enum { OPT_NO_HEADINGS = 0x100, OPT_PROBE, OPT_RAW, OPT_SORT };

static const BmOptDef options[] = {
    BM_OPTDEF_JSON("JSON: sizes in bytes, absent statistics null"),
    {'o', "output", 'o', " [+]COLUMNS",
     "the table's columns, comma-separated (below);\n"
     "+COL,...: added to the default ones (-o +READ)",
     BM_COMPLETE_LIST, "NAME STATE MAXIMUM CURRENT RECLAIMED AVAIL USABLE UNUSED CACHES RSS SWAPIN "
                       "SWAPOUT MAJFLT PERIOD AGE SG FPR AUTODEFL READ"},
    {0, "no-headings", OPT_NO_HEADINGS, NULL, "neither the host line nor the header row",
     BM_COMPLETE_NONE, NULL},
    {'b', "bytes", 'b', NULL, "sizes in the table in bytes", BM_COMPLETE_NONE, NULL},
    {0, "raw", OPT_RAW, NULL, "the table for scripts, as lsblk --raw ('shut\\x20off')",
     BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_POLICY("the policy deciding the host's mode"),
    BM_OPTDEF_STATE("the previous pass's mode, for hysteresis"),
    BM_OPTDEF_PROC("read host memory from DIR instead of /proc"),
    {0, "probe", OPT_PROBE, NULL, "ask QEMU for SG, FPR, AUTODEFL (taints the domain)",
     BM_COMPLETE_NONE, NULL},
    {0, "sort", OPT_SORT, " COLUMN", "sort by COLUMN (sizes largest first; default NAME)",
     BM_COMPLETE_WORDS, "NAME STATE MAXIMUM CURRENT RECLAIMED AVAIL USABLE UNUSED CACHES RSS "
                        "SWAPIN SWAPOUT MAJFLT READ TARGET"},
    {'w', "watch", 'w', "[=SECONDS]", "live view, redrawn every SECONDS (2); s, q keys",
     BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_HELP("show this help"),
    BM_OPTDEF_END,
};

static const char help_after[] =
    "\nColumns: NAME STATE MAXIMUM CURRENT RECLAIMED AVAIL USABLE UNUSED CACHES RSS\n"
    "SWAPIN SWAPOUT MAJFLT PERIOD AGE SG FPR AUTODEFL (+ READ ACTION TARGET REASON).\n";

DEFINE_CLEANUP(json_object *, json_object_put)

/* The domains status shows: all of the one reading, or the named ones (pointers into it). */
typedef struct {
    const BmDomain **d;
    size_t n;
    uint64_t taken_real_ns; /* the reading's */
    const BmDomain *all;    /* the reading's domains, in its order: all[i]'s decision is the
                             * plan's decisions[i] (the plan was made from this reading) */
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

/* The domain's virtio-mem devices: an array (empty without one), null when its XML was not
 * read. */
static json_object *virtio_mem_json(const BmDomain *d)
{
    if (!d->balloon_known)
        return NULL;
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < d->balloon.n_virtio_mem; i++) {
        const BmVirtioMem *m = &d->balloon.virtio_mem[i];
        char name[64];
        json_object *o = json_object_new_object();
        json_object_object_add(o, "device", json_object_new_string(bm_domxml_virtio_mem_name(
                                                &d->balloon, i, name, sizeof(name))));
        json_object_object_add(o, "address", m->address[0] ? json_object_new_string(m->address) : NULL);
        json_object_object_add(o, "node", m->node >= 0 ? json_object_new_int(m->node) : NULL);
        json_object_object_add(o, "size_bytes", bm_json_u64_or_null(m->size_bytes));
        json_object_object_add(o, "block_bytes", bm_json_u64_or_null(m->block_bytes));
        json_object_object_add(o, "requested_bytes", bm_json_u64_or_null(m->requested_bytes));
        json_object_object_add(o, "current_bytes", bm_json_u64_or_null(d->active ? m->current_bytes : BM_ABSENT));
        json_object_object_add(o, "unpluggable_bytes",
                               bm_json_u64_or_null(d->active ? bm_vmem_unpluggable_bytes(m) : BM_ABSENT));
        json_object_object_add(o, "pluggable_bytes",
                               bm_json_u64_or_null(d->active ? bm_vmem_pluggable_bytes(m) : BM_ABSENT));
        json_object_array_add(arr, o);
    }
    return arr;
}

/* The note below the table for each virtio-mem device of d: what it has plugged of its size,
 * what it was asked, what it can still unplug and plug, and what the domain has with them. */
static void print_virtio_mem_notes(const BmDomain *d, const char *name, int width)
{
    const BmBalloonConfig *c = &d->balloon;
    if (!d->balloon_known)
        return;
    for (size_t i = 0; i < c->n_virtio_mem; i++) {
        const BmVirtioMem *m = &c->virtio_mem[i];
        char dev[64], node[32] = "";
        if (m->node >= 0)
            snprintf(node, sizeof(node), ", node %d", m->node);
        bm_domxml_virtio_mem_name(c, i, dev, sizeof(dev));
        _cleanup_free_ char *line = NULL;
        if (d->active && bm_present(m->current_bytes))
            line = bm_asprintf("%s: virtio-mem %s: %s plugged of %s (requested %s, block %s%s): "
                               "can unplug %s, plug %s more", name, dev, BM_SZ(m->current_bytes),
                               BM_SZ(m->size_bytes), BM_SZ(m->requested_bytes),
                               BM_SZ(m->block_bytes), node, BM_SZ(bm_vmem_unpluggable_bytes(m)),
                               BM_SZ(bm_vmem_pluggable_bytes(m)));
        else
            line = bm_asprintf("%s: virtio-mem %s: size %s, requested %s (block %s%s)%s", name,
                               dev, BM_SZ(m->size_bytes), BM_SZ(m->requested_bytes),
                               BM_SZ(m->block_bytes), node, d->active ? "" : ", the next boot's");
        bm_table_print_line(stdout, width, 2, line);
    }
    if (c->virtio_mem_more)
        printf("%s: and %zu virtio-mem device%s more, not read\n", name, c->virtio_mem_more,
               c->virtio_mem_more == 1 ? "" : "s");
    uint64_t now = bm_vmem_domain_bytes(c);
    if (c->n_virtio_mem && bm_present(now)) {
        _cleanup_free_ char *line =
            bm_asprintf("%s: memory with virtio-mem: %s (base %s + %s %s)", name, BM_SZ(now),
                        BM_SZ(c->base_memory_bytes), BM_SZ(now - c->base_memory_bytes),
                        d->active ? "plugged" : "requested");
        bm_table_print_line(stdout, width, 2, line);
    }
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
    json_object_object_add(o, "base_memory_bytes",
                           bm_json_u64_or_null(d->balloon_known && d->balloon.n_virtio_mem
                                                   ? d->balloon.base_memory_bytes : BM_ABSENT));
    json_object_object_add(o, "virtio_mem", virtio_mem_json(d));
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

/* The table's columns, their alignment, and the order in which the optional ones give way on
 * a terminal too narrow for the table (balloonmgr(8) says it): NAME never does. READ is shown
 * only when asked for (-o): the default columns are the first N_DEFAULT. */
static const char *const headers[] = {"NAME",   "STATE",  "MAXIMUM", "CURRENT", "RECLAIMED",
                                      "AVAIL",  "USABLE", "UNUSED",  "CACHES",  "RSS",
                                      "SWAPIN", "SWAPOUT", "MAJFLT", "PERIOD",  "AGE", "SG",
                                      "FPR",    "AUTODEFL", "READ", "ACTION", "TARGET", "REASON"};
#define ALIGN "llrrrrrrrrrrrrrlllrlrw"
#define N_DEFAULT 18 /* up to AUTODEFL: what scripts parse; the rest with -o */
/* the columns of the live view (--watch) unless -o: the balloon, what the guest can use, the
 * host's RSS and what the policy decides now */
#define WATCH_COLUMNS "NAME,STATE,CURRENT,USABLE,RSS,ACTION,TARGET,REASON"
#define WATCH_GIVE_WAY "STATE,REASON,TARGET,ACTION,USABLE,RSS,CURRENT"
#define GIVE_WAY "PERIOD,AGE,MAJFLT,SWAPOUT,SWAPIN,AUTODEFL,FPR,SG,AVAIL,CACHES,UNUSED," \
                 "RECLAIMED,MAXIMUM,STATE,RSS,USABLE,CURRENT"

/* The decision of the policy's dry evaluation for d, or NULL. */
static const BmDecision *decision_of(const BmPlan *plan, const Shown *s, const BmDomain *d)
{
    size_t i = s->all && d >= s->all ? (size_t)(d - s->all) : SIZE_MAX;
    return plan && i < plan->n_decisions ? &plan->decisions[i] : NULL;
}

/* Prints the table (the default columns, or those of -o columns), with headings or not. */
static void print_table(const Shown *s, const SgCell *sg, const BmHostSummary *sum,
                        const BmPlan *plan, const char *uri, const char *columns, bool headings,
                        bool raw, bool watch)
{
    _cleanup_(bm_table_freep) BmTable *t = bm_table_new(BM_ARRAY_SIZE(headers), headers, ALIGN);
    bm_table_set_raw(t, raw);
    bm_table_set_give_way(t, watch && !columns ? WATCH_GIVE_WAY : GIVE_WAY);
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
        const BmDecision *x = decision_of(plan, s, d);
        bm_table_cell(t, "%s", x ? bm_action_name(x->action) : "-");
        bm_table_cell(t, "%s", size_cell(x ? x->target_bytes : BM_ABSENT, b, sizeof(b)));
        char reason[BM_REASON_MAX] = "-";
        if (x)
            bm_reason_format(plan, x, reason, sizeof(reason));
        bm_table_cell(t, "%s", reason);
    }
    /* the default columns: status's, or the live view's (which give way, as defaults do) */
    _cleanup_free_ size_t *defaults = NULL;
    size_t n_defaults = N_DEFAULT;
    if (watch) {
        _cleanup_(bm_table_freep) BmTable *scratch = bm_table_new(BM_ARRAY_SIZE(headers), headers, "");
        bm_table_parse_columns(scratch, WATCH_COLUMNS, NULL, 0, &defaults, &n_defaults);
    } else {
        defaults = bm_malloc0(N_DEFAULT * sizeof(size_t));
        for (size_t c = 0; c < N_DEFAULT; c++)
            defaults[c] = c;
    }
    _cleanup_free_ size_t *cols = NULL;
    size_t n_cols = 0;
    if (!columns || bm_table_parse_columns(t, columns, defaults, n_defaults, &cols, &n_cols) < 0) {
        free(cols);
        cols = bm_malloc0((n_defaults + 1) * sizeof(size_t));
        memcpy(cols, defaults, n_defaults * sizeof(size_t));
        n_cols = n_defaults;
    }
    bm_table_print_columns(t, stdout, cols, n_cols, headings);
    int width = bm_table_terminal_width(STDOUT_FILENO);
    for (size_t i = 0; headings && !raw && i < s->n; i++) {
        const BmDomain *d = s->d[i];
        const char *why = d->balloon_known ? bm_domxml_no_return_reason(&d->balloon) : NULL;
        /* the name escaped once, as list prints it; the command is already a shell word */
        _cleanup_free_ char *name = bm_escape_name(d->name);
        print_virtio_mem_notes(d, name, width);
        if (why) {
            _cleanup_free_ char *line = bm_asprintf("%s: never inflated: ballooning returns "
                                                    "nothing to the host: %s", name, why);
            bm_table_print_line(stdout, width, 2, line);
        }
        uint64_t backed = sum->have_backed_free ? bm_domain_backed_free_bytes(d, sum->qemu_overhead_bytes)
                                                : BM_ABSENT;
        if (bm_summary_fpr_would_return(d, backed)) {
            char size[32];
            _cleanup_free_ char *cmd = bm_summary_fpr_command(d->name, uri);
            _cleanup_free_ char *line = bm_asprintf(
                "%s: QEMU holds %s of free guest memory that free page reporting would hand "
                "back (Linux guests 5.7 or later): '%s', then shut the domain down and start "
                "it again (a reboot keeps the QEMU process)",
                name, bm_size_format(backed, size, sizeof(size)), cmd);
            bm_table_print_line(stdout, width, 2, line);
        }
    }
}

/* The column names of the table, to check -o before connecting. */
static int check_columns(const char *columns)
{
    _cleanup_(bm_table_freep) BmTable *t = bm_table_new(BM_ARRAY_SIZE(headers), headers, "");
    _cleanup_free_ size_t *cols = NULL;
    size_t n = 0;
    return bm_table_parse_columns(t, columns, NULL, 0, &cols, &n);
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
        bm_report_lines(LOG_ERR, "status", policy->errors);
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
                         const BmPlan *plan, const char *uri, const char *columns, bool json,
                         bool headings, bool raw, bool watch)
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
            bm_table_print_line(stdout, bm_table_terminal_width(STDOUT_FILENO), 6,
                                bm_summary_format(summary, line, sizeof(line)));
        }
        print_table(s, sg, summary, plan, uri, columns, headings, raw, watch);
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
    *ret = (Shown){.taken_real_ns = all->taken_real_ns, .all = all->domains};
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

/* What status was asked for. */
typedef struct {
    bool json, headings, policy_explicit, state_explicit, probe, raw;
    const char *columns, *policy_path, *state_path, *proc_dir, *sort;
    char *const *names; /* NULL: every domain */
    int watch_s;        /* --watch: seconds between redraws; 0: once */
} StatusOptions;

/* The columns --sort takes: NAME and STATE by their text, the others by size, largest first. */
static const char *const sort_columns[] = {"NAME",   "STATE",   "MAXIMUM", "CURRENT", "RECLAIMED",
                                           "AVAIL",  "USABLE",  "UNUSED",  "CACHES",  "RSS",
                                           "SWAPIN", "SWAPOUT", "MAJFLT",  "READ",    "TARGET"};

/* d's value for the sort column key (an index into sort_columns, 2 and later). */
static uint64_t sort_value(const Shown *s, const BmDomain *d, const BmPlan *plan, size_t key)
{
    const BmDecision *x;
    switch (key) {
    case 2: return d->max_bytes;
    case 3: return d->actual_bytes;
    case 4: return bm_domain_reclaimed_bytes(d);
    case 5: return d->available_bytes;
    case 6: return d->usable_bytes;
    case 7: return d->unused_bytes;
    case 8: return d->disk_caches_bytes;
    case 9: return d->rss_bytes;
    case 10: return d->swap_in_bytes;
    case 11: return d->swap_out_bytes;
    case 12: return d->major_faults;
    case 13: return d->disk_read_bytes;
    default: return (x = decision_of(plan, s, d)) ? x->target_bytes : BM_ABSENT;
    }
}

/* The index of --sort's column in sort_columns, or -EINVAL with the detail. */
static int sort_key(const char *name)
{
    for (size_t i = 0; i < BM_ARRAY_SIZE(sort_columns); i++)
        if (strcasecmp(sort_columns[i], name) == 0)
            return (int)i;
    char shown[64];
    return bm_error(-EINVAL, "--sort '%s': not a column to sort by (NAME, STATE, MAXIMUM, CURRENT, "
                    "RECLAIMED, AVAIL, USABLE, UNUSED, CACHES, RSS, SWAPIN, SWAPOUT, MAJFLT, READ, "
                    "TARGET)", bm_printable(name, shown, sizeof(shown)));
}

/* Sorts the domains shown by the column key: names and states ascending, values largest
 * first (absent ones last), ties by name. Stable for equal keys: insertion sort (a host's
 * domains, not millions). */
static void sort_shown(Shown *s, const BmPlan *plan, size_t key)
{
    for (size_t i = 1; i < s->n; i++) {
        const BmDomain *d = s->d[i];
        size_t j = i;
        for (; j > 0; j--) {
            const BmDomain *p = s->d[j - 1];
            int c;
            if (key == 0)
                c = strcmp(p->name, d->name);
            else if (key == 1)
                c = strcmp(bm_snapshot_run_state_name(p->state), bm_snapshot_run_state_name(d->state));
            else {
                uint64_t a = sort_value(s, p, plan, key), b = sort_value(s, d, plan, key);
                /* largest first, absent (BM_ABSENT) last */
                c = a == b ? 0 : !bm_present(a) ? 1 : !bm_present(b) ? -1 : a < b ? 1 : -1;
            }
            if (c == 0 && key != 0)
                c = strcmp(p->name, d->name);
            if (c <= 0)
                break;
            s->d[j] = s->d[j - 1];
        }
        s->d[j] = d;
    }
}

/* One reading and what status prints of it. Returns the exit status (failures reported). */
static int status_once(BmGlobal *g, const StatusOptions *o)
{
    int r;
    /* the policy and the state file first, reported after the reading as before */
    _cleanup_(policy_clear) PolicyRead policy;
    policy_read(o->policy_path, o->policy_explicit, &policy);
    _cleanup_(virConnectClosep) virConnectPtr conn = NULL; /* closed after the engine is freed */
    BmEngineOptions eo = {.proc_dir = o->proc_dir, .dry_run = true, .timer = true};
    _cleanup_(bm_engine_freep) BmEngine *e = bm_engine_new(&eo);
    StateRead state;
    state_read(o->state_path, o->state_explicit, bm_engine_ledger(e), &state);
    bool readonly;
    if ((r = open_conn(g, o->probe, &conn, &readonly)) < 0)
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
    if ((r = pick_shown(conn, all, o->names, &shown, &picked)) < 0)
        return bm_report_failure("status", NULL, r);
    if (o->sort)
        sort_shown(&shown, bm_engine_plan(e), (size_t)sort_key(o->sort));
    for (size_t i = 0; i < shown.n; i++)
        if (shown.d[i]->error)
            bm_report("status", shown.d[i]->name, "%s", shown.d[i]->error);
    if ((r = report_inputs(e, host_error, &policy, &state)) < 0)
        return bm_report_failure("status", NULL, r);
    _cleanup_free_ SgCell *sg =
        probe_sg(conn, &shown, readonly, o->probe, &state, bm_engine_ledger(e), o->proc_dir);
    BmHostSummary summary;
    host_summary(e, &summary);
    print_status(&shown, sg, &summary, bm_engine_plan(e), g->uri, o->columns, o->json,
                 o->headings, o->raw, o->watch_s > 0);
    return BM_EXIT_OK;
}

/* --watch: SIGINT, SIGTERM end the view; SIGWINCH redraws it at the new size. */
static volatile sig_atomic_t watch_stop, watch_resized;

static void on_watch_signal(int sig)
{
    if (sig == SIGWINCH)
        watch_resized = 1;
    else
        watch_stop = 1;
}

/* The terminal as it was before the live view, restored at its end. */
static struct termios watch_saved;
static bool watch_raw;

static void watch_restore(void)
{
    if (watch_raw)
        tcsetattr(STDIN_FILENO, TCSANOW, &watch_saved);
    watch_raw = false;
    if (isatty(STDOUT_FILENO))
        fputs("\033[?25h\033[?1049l", stdout); /* the cursor back, the main screen back */
    fflush(stdout);
}

/* status --watch: the live view. On a terminal: the alternate screen redrawn every watch_s
 * seconds, keys read one at a time (q quits, s sorts by the next column); elsewhere one
 * reading after another, a blank line between them, until SIGINT or SIGTERM. Returns the exit
 * status of the first reading when it failed, else 0. */
static int status_watch(BmGlobal *g, StatusOptions *o)
{
    bool tty_out = isatty(STDOUT_FILENO), tty_in = isatty(STDIN_FILENO);
    struct sigaction sa = {.sa_handler = on_watch_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGWINCH, &sa, NULL);
    if (tty_in && tcgetattr(STDIN_FILENO, &watch_saved) == 0) {
        struct termios raw = watch_saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        watch_raw = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    if (tty_out)
        fputs("\033[?1049h\033[?25l", stdout); /* the alternate screen, no cursor */
    size_t key = o->sort ? (size_t)sort_key(o->sort) : 0;
    int ret = BM_EXIT_OK;
    for (unsigned frame = 0; !watch_stop; frame++) {
        o->sort = sort_columns[key];
        char when[32];
        time_t now = time(NULL);
        strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
        if (tty_out)
            fputs("\033[H\033[2J", stdout); /* home, the screen cleared */
        else if (frame)
            putchar('\n');
        printf("balloonmgr status --watch: every %d s, sorted by %s%s  %s\n", o->watch_s,
               sort_columns[key], tty_in ? "; s: sort, q: quit" : "", when);
        int r = status_once(g, o);
        bm_cli_flush_stdout();
        if (r != BM_EXIT_OK && frame == 0) {
            ret = r;
            break;
        }
        /* wait for the next redraw: a key, a signal or the interval, whichever comes first */
        uint64_t until = bm_now_mono_ns() + (uint64_t)o->watch_s * 1000000000ull;
        bool redraw = false;
        while (!watch_stop && !redraw) {
            uint64_t now_ns = bm_now_mono_ns();
            if (now_ns >= until)
                break;
            struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
            int n = poll(&p, watch_raw ? 1 : 0, (int)((until - now_ns) / 1000000 + 1));
            if (n < 0 && errno == EINTR) {
                redraw = watch_resized;
                watch_resized = 0;
                continue;
            }
            char c;
            if (n > 0 && read(STDIN_FILENO, &c, 1) == 1) {
                if (c == 'q' || c == 'Q')
                    watch_stop = 1;
                else if (c == 's') {
                    key = (key + 1) % BM_ARRAY_SIZE(sort_columns);
                    redraw = true;
                } else if (c == ' ')
                    redraw = true;
            } else if (n > 0) {
                watch_stop = 1; /* the end of the input */
            }
        }
    }
    watch_restore();
    return ret;
}

static int run(BmGlobal *g, int argc, char **argv)
{
    StatusOptions o = {.headings = true, .policy_path = BM_POLICY_DEFAULT_PATH,
                       .state_path = BM_STATE_DEFAULT_PATH, .proc_dir = g->proc_dir};
    unsigned watch_s = 0;
    int c, r;
    while ((c = bm_cli_getopt(g, &bm_verb_status, argc, argv)) != -1) {
        switch (c) {
        case BM_OPT_JSON: o.json = true; break;
        case 'o': o.columns = optarg; break;
        case OPT_NO_HEADINGS: o.headings = false; break;
        case BM_OPT_POLICY: o.policy_path = optarg; o.policy_explicit = true; break;
        case BM_OPT_STATE: o.state_path = optarg; o.state_explicit = true; break;
        case BM_OPT_PROC: o.proc_dir = optarg; break;
        case OPT_PROBE: o.probe = true; break;
        case 'b': bytes_cells = true; break;
        case OPT_RAW: o.raw = true; break;
        case OPT_SORT:
            if ((r = sort_key(optarg)) < 0)
                return bm_report_failure("status", NULL, r);
            o.sort = optarg;
            break;
        case 'w':
            if (bm_cli_parse_seconds(optarg ? optarg : "2", 3600, &watch_s) < 0 || watch_s == 0)
                return bm_report_failure("status", NULL,
                                         bm_error(-EINVAL, "--watch '%s': expected a number of "
                                                  "seconds from 1 to 3600", optarg));
            break;
        case BM_OPT_HELP: bm_verb_usage(&bm_verb_status, stdout); return BM_EXIT_OK;
        default: return bm_report_failure("status", NULL, -EINVAL); /* bm_cli_getopt()'s */
        }
    }
    o.names = optind < argc ? &argv[optind] : NULL;
    r = check_options(o.columns, o.json, o.raw, o.state_explicit ? o.state_path : NULL, o.proc_dir);
    if (r >= 0 && watch_s && (o.json || o.raw))
        r = bm_error(-EINVAL, "--watch is a view for people: not with --json or --raw");
    if (r < 0)
        return bm_report_failure("status", NULL, r);
    if (!watch_s)
        return status_once(g, &o);
    o.watch_s = (int)watch_s;
    return status_watch(g, &o);
}

const BmVerb bm_verb_status = {
    .name = "status",
    .options = options,
    .help_column = 27,
    .help_after = help_after,
    .reads_host = true,
    .run = run,
    .synopsis = "status [DOMAIN...] [--json] [-o [+]COLUMNS] [--no-headings]\n"
                "       [--bytes] [--raw] [--policy FILE] [--state FILE] [--proc DIR] [--probe]\n"
                "       [--sort COLUMN] [--watch[=SECONDS]]",
    .summary = "Show the host's memory and mode, and each domain's: balloon, guest, host RSS.",
    .brief = "the host and each domain's memory",
};
