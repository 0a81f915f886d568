/* balloonmgr set DOMAIN SIZE [--live] [--config] [--current] [--wait[=SECONDS]]
 * [--stall=SECONDS] [--policy FILE] [--force] [--json|--quiet] [--device balloon|mem|ALIAS]:
 * move one balloon (the running domain's, its definition's, or both, as virsh setmem), or the
 * requested size of a virtio-mem device, not below the domain's floor unless --force. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "json-name.h"
#include "balloon.h"
#include "config.h"
#include "domxml.h"
#include "policy-eval.h"
#include "policy.h"
#include "cli.h"
#include "conn.h"
#include "error.h"
#include "size.h"
#include "spool.h"
#include "qmp.h"
#include "ledger.h"
#include "progress.h"
#include "vmem.h"

#define SET_POLICY BM_POLICY_DEFAULT_PATH /* config.h: SYSCONFDIR/balloonmgr/... */

static const BmOptDef options[] = {
    {0, "live", 'L', NULL, "the running domain (the default, as virsh setmem)",
     BM_COMPLETE_NONE, NULL},
    {0, "config", 'C', NULL, "its definition: the balloon of its next boot", BM_COMPLETE_NONE,
     NULL},
    {0, "current", 'K', NULL, "the running domain if it runs, else its definition",
     BM_COMPLETE_NONE, NULL},
    {'w', "wait", 'w', "[=SECONDS]", "wait until reached, at most SECONDS (120); exit 3 if not",
     BM_COMPLETE_NONE, NULL},
    {0, "stall", 's', "=SECONDS", "with --wait: give up when unmoved for SECONDS (10)",
     BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_POLICY("the domain's floor from FILE (default: the system's)"),
    {'f', "force", 'f', NULL, "set a target below the domain's floor too", BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_JSON("print JSON"),
    {'q', "quiet", 'q', NULL, "print nothing: the exit status says how it went",
     BM_COMPLETE_NONE, NULL},
    {'d', "device", 'd', " DEV", "balloon, mem (virtio-mem) or a virtio-mem device's alias",
     BM_COMPLETE_WORDS, "balloon mem"},
    BM_OPTDEF_HELP("show this help"),
    BM_OPTDEF_END,
};

static const char help_after[] =
    "\nSIZE: a bare number is KiB (as virsh); 2G, 512M, 50% of the maximum; +1G, -512M\n"
    "from now. Below the floor (128 MiB, 5%, <min_guarantee>, the policy's): --force.\n"
    "virtio-mem (no usable balloon, or --device): its requested size follows SIZE.\n";

DEFINE_CLEANUP(json_object *, json_object_put)

/* Seconds as a JSON number with microsecond resolution ("1.234567", not "1.2e-06"). */
static json_object *json_seconds(uint64_t ns)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%.6f", ns / 1e9);
    return json_object_new_double_s(ns / 1e9, buf);
}

static void print_json(const char *name, const BmChange *ch, bool waited, bool live, bool config)
{
    _cleanup_(json_object_putp) json_object *o = json_object_new_object();
    json_object_object_add(o, "domain", bm_json_name(name));
    json_object_object_add(o, "live", json_object_new_boolean(live));
    json_object_object_add(o, "config", json_object_new_boolean(config));
    json_object_object_add(o, "direction",
                           json_object_new_string(bm_change_direction(ch->from_bytes, ch->target_bytes)));
    json_object_object_add(o, "from_bytes", json_object_new_uint64(ch->from_bytes));
    json_object_object_add(o, "target_bytes", json_object_new_uint64(ch->target_bytes));
    json_object_object_add(o, "reached_bytes",
                           waited ? json_object_new_uint64(ch->reached_bytes) : NULL);
    json_object_object_add(o, "outcome", json_object_new_string(bm_change_outcome_name(ch->outcome)));
    json_object_object_add(o, "duration_s",
                           waited ? json_seconds(ch->duration_ns) : NULL);
    json_object_object_add(o, "started_at", json_seconds(ch->started_real_ns));
    json_object_object_add(o, "finished_at",
                           waited ? json_seconds(ch->finished_real_ns) : NULL);
    json_object_object_add(o, "reading_s", waited ? json_seconds(ch->reading_ns) : NULL);
    json_object_object_add(o, "polls", json_object_new_int((int)ch->polls));
    puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
}

static void print_text(const char *name, const BmChange *ch, bool waited, bool live, bool config)
{
    char from[32], target[32], reached[32];
    bm_size_format(ch->from_bytes, from, sizeof(from));
    bm_size_format(ch->target_bytes, target, sizeof(target));
    bm_size_format(ch->reached_bytes, reached, sizeof(reached));
    _cleanup_free_ char *printable = bm_escape_name(name); /* whole, as list prints it */
    const char *dir = bm_change_direction(ch->from_bytes, ch->target_bytes);
    if (!live)
        printf("%s: next boot's balloon (<currentMemory>) from %s to %s\n", printable, from, target);
    else if (!waited)
        printf("%s: %s from %s to target %s (not waiting)\n", printable, dir, from, target);
    else
        printf("%s: %s from %s to target %s: %s %s after %.3f s (%u poll%s)\n", printable, dir,
               from, target, bm_change_outcome_name(ch->outcome), reached, ch->duration_ns / 1e9,
               ch->polls, ch->polls == 1 ? "" : "s");
    if (live && config)
        printf("%s: and the next boot's balloon (<currentMemory>) to %s\n", printable, target);
}

typedef struct {
    bool json, quiet, wait, force, policy_explicit;
    bool live, config, current; /* as given */
    bool do_live, do_config;    /* what the change is, for this domain */
    const char *policy_path;
    const char *device;          /* --device: "balloon", "mem" or an alias; NULL: chosen */
    unsigned timeout_s, stall_s;
    const char *name, *size;
    BmPolicy *policy;            /* the floor's policy, NULL: none (or --force) */
} SetOptions;

/* The options, checked. Returns 0 to go on, 1 after printing --help, or -EINVAL with the
 * detail. */
static int parse_options(BmGlobal *g, int argc, char **args, SetOptions *o)
{
    int c;
    while ((c = bm_cli_getopt(g, &bm_verb_set, argc, args)) != -1) {
        switch (c) {
        case 'w':
            o->wait = true;
            if (optarg && (bm_cli_parse_seconds(optarg, 86400, &o->timeout_s) < 0 || o->timeout_s == 0))
                return bm_error(-EINVAL, "--wait '%s': expected a number of seconds from 1 to "
                                "86400", optarg);
            break;
        case 's':
            if (bm_cli_parse_seconds(optarg, 86400, &o->stall_s) < 0 || o->stall_s == 0)
                return bm_error(-EINVAL, "--stall '%s': expected a number of seconds from 1 to "
                                "86400", optarg);
            break;
        case BM_OPT_JSON: o->json = true; break;
        case BM_OPT_POLICY: o->policy_path = optarg; o->policy_explicit = true; break;
        case 'f': o->force = true; break;
        case 'q': o->quiet = true; break;
        case 'd':
            if (!optarg[0])
                return bm_error(-EINVAL, "--device '': expected balloon, mem or a virtio-mem "
                                "device's alias");
            o->device = optarg;
            break;
        case 'L': o->live = true; break;
        case 'C': o->config = true; break;
        case 'K': o->current = true; break;
        case BM_OPT_HELP: bm_verb_usage(&bm_verb_set, stdout); return 1;
        default: return -EINVAL; /* bm_cli_getopt() stored why */
        }
    }
    /* virsh setmem's rules */
    if (o->current && (o->live || o->config))
        return bm_error(-EINVAL, "options --current and --%s are mutually exclusive",
                        o->live ? "live" : "config");
    if (o->wait && o->config && !o->live)
        return bm_error(-EINVAL, "--wait with --config: the definition's balloon is the next "
                        "boot's, there is nothing to wait for (--live --config changes both)");
    if (o->json && o->quiet)
        return bm_error(-EINVAL, "--json and --quiet: give one of them");
    if (argc - optind < 2)
        return bm_error(-EINVAL, "expected DOMAIN and SIZE (see 'balloonmgr set --help')");
    if (argc - optind > 2) {
        char shown[256];
        return bm_error(-EINVAL, "too many arguments: '%s' after DOMAIN and SIZE (a SIZE is one "
                        "word: '2G')", bm_printable(bm_cli_unprotect(args[optind + 2]), shown,
                                                    sizeof(shown)));
    }
    o->name = bm_cli_unprotect(args[optind]);
    o->size = bm_cli_unprotect(args[optind + 1]);
    return 0;
}

/* The policy's floor: from the file given, or the host's policy file when there is one (the
 * built-in defaults are for the automatic passes, not for manual targets). Returns 0, or
 * -EINVAL with the detail after printing the policy's errors. */
static int load_floor_policy(SetOptions *o)
{
    if (o->force || (!o->policy_explicit && access(o->policy_path, F_OK) != 0))
        return 0;
    _cleanup_free_ char *errors = NULL;
    if (bm_policy_load(o->policy_path, &o->policy, &errors) < 0) {
        bm_report_lines(LOG_ERR, "set", errors);
        return bm_error(-EINVAL, "policy '%s' has errors", o->policy_path);
    }
    return 0;
}

/* A manual target below the floor starves the guest: only on purpose (--force). Only an
 * inflate takes memory away: a deflate that stays below the floor still gives some back (and
 * needs no domain XML read before it: set --wait's timing starts sooner). Returns 0, or
 * -EINVAL with the detail when the target is below the floor. */
static int check_floor(virDomainPtr dom, const SetOptions *o, uint64_t max_bytes, uint64_t actual,
                       uint64_t target)
{
    if (o->force || target >= actual)
        return 0;
    BmBalloonConfig cfg = {.min_guarantee_bytes = BM_ABSENT};
    _cleanup_free_ char *xml = NULL;
    if (bm_conn_domain_xml(dom, !o->do_live, &xml) < 0 || bm_domxml_parse_balloon(xml, &cfg) < 0)
        cfg.min_guarantee_bytes = BM_ABSENT;
    uint64_t policy_floor = BM_ABSENT;
    if (o->policy) {
        BmGuestRules rules;
        bm_policy_rules_for(o->policy, o->name, &rules);
        policy_floor = bm_amount_bytes(rules.floor, max_bytes);
    }
    const char *why = NULL;
    uint64_t floor = bm_manual_floor(max_bytes, cfg.min_guarantee_bytes, policy_floor, &why);
    if (target >= floor)
        return 0;
    char quoted[256], t[32], f[32];
    bm_size_format(target, t, sizeof(t));
    bm_size_format(floor, f, sizeof(f));
    bool by_policy = o->policy && !strcmp(why, "the policy's floor");
    return bm_error(-EINVAL,
                    "size '%s' (%s) is below the domain's floor of %s, %s%s%s; --force sets it "
                    "anyway", bm_printable(o->size, quoted, sizeof(quoted)), t, f, why,
                    by_policy ? " in " : "", by_policy ? o->policy->path : "");
}

/* The target SIZE means for dom: read live, or from its definition for a --config change
 * alone. Returns 0, or -errno with the detail (-EINVAL: a bad size or below the floor,
 * -EAGAIN: a job holds the domain). */
static int resolve_target(virDomainPtr dom, const SetOptions *o, uint64_t *ret_actual,
                          uint64_t *ret_target)
{
    uint64_t max_bytes;
    int r = o->do_live ? bm_balloon_read_limits(dom, &max_bytes, ret_actual)
                       : bm_balloon_read_config(dom, &max_bytes, ret_actual);
    if (r < 0)
        return r;
    BmSizeContext ctx = {.max_bytes = max_bytes, .current_bytes = *ret_actual};
    r = bm_size_parse(o->size, &ctx, ret_target);
    if (r < 0) {
        char quoted[256];
        return bm_error(-EINVAL, "size '%s': %s", bm_printable(o->size, quoted, sizeof(quoted)),
                        bm_error_detail(r));
    }
    if ((r = check_floor(dom, o, max_bytes, *ret_actual, *ret_target)) < 0)
        return r;
    /* libvirt would hold the change up to 30 s for the job lock, then fail */
    const char *job = NULL;
    if (o->do_live && bm_balloon_job_running(dom, &job) > 0)
        return bm_error(-EAGAIN, "busy with %s: libvirt lets no balloon change in until it "
                        "ends; try again then", job);
    return 0;
}

/* --wait on a terminal: the balloon's size, rate and ETA on stderr while it moves */
static void on_progress(void *ctx, const BmTracked *t)
{
    char line[256];
    bm_progress_show(ctx, bm_progress_format(t->name, t->change.from_bytes, t->change.target_bytes,
                                             t->last_actual_bytes, t->change.duration_ns, line,
                                             sizeof(line)), false);
}

/* the change that ended, its name copied (the tracker frees its own) */
static void keep_ended(void *ctx, const BmTracked *t)
{
    BmTracked *kept = ctx;
    *kept = *t;
    kept->name = bm_strdup(t->name);
}

/* Hands a measured change to a running agent / the next timer run with its QEMU RSS now and
 * the domain's SG verdict as the histogram label. The QEMU monitor (a command taints the
 * domain) is asked as the policy's verify_features says (default auto: only a domain whose
 * XML sets the balloon's sg/ioeventfd); for others the label is unknown, and the agent or the
 * run that counts the change labels it with the verdict it has of the domain. */
static void spool_change(virConnectPtr conn, virDomainPtr dom, const char *name,
                         BmVerifyFeatures verify, BmTracked *t)
{
    t->sg = BM_SGL_UNKNOWN;
    _cleanup_free_ char *xml = NULL;
    BmBalloonConfig cfg;
    /* the XML only where the answer depends on it */
    bool xml_known = verify == BM_VERIFY_AUTO && bm_conn_domain_xml(dom, false, &xml) == 0 &&
                     bm_domxml_parse_balloon(xml, &cfg) == 0;
    if (bm_verify_features_asks(verify, xml_known, xml_known && cfg.features_overridden)) {
        BmFeatureOptions fo = {.sg_bit = BM_SG_DEFAULT_BIT};
        BmFeatureReport rep;
        _cleanup_free_ char *path = NULL, *qerr = NULL;
        bm_qmp_probe_balloon(dom, &fo, &rep, &path, &qerr);
        t->sg = bm_sg_label(rep.feature[BM_FEATURE_SG].state, true);
    }
    uint64_t unused;
    bm_balloon_read_live(dom, &unused, &t->rss_after_bytes);
    _cleanup_free_ char *uri = bm_conn_uri(conn);
    int r = bm_spool_write(t, uri);
    if (r < 0)
        bm_report("set", name, "warning: %s", bm_error_detail(r));
}

/* Sets the target and, with --wait, waits for it: a tracker with one change. Returns 0 and
 * *ret, or -errno when the target could not be set. */
static int change(virConnectPtr conn, virDomainPtr dom, const SetOptions *o, uint64_t from,
                  uint64_t target, BmChange *ret)
{
    if (!o->wait)
        return bm_balloon_change(dom, from, target, ret);
    BmTracker t = {.opts = bm_wait_options_default()};
    t.opts.timeout_ms = o->timeout_s * 1000u;
    t.opts.stall_ms = o->stall_s * 1000u;
    uint64_t rss_before = BM_ABSENT, unused;
    bm_balloon_read_live(dom, &unused, &rss_before);
    int r = bm_tracker_start(&t, dom, from, target, rss_before, BM_SGL_UNKNOWN);
    if (r < 0)
        return r;
    BmProgress p;
    bm_progress_init(&p, stderr);
    if (p.f) {
        t.opts.progress = on_progress;
        t.opts.progress_ctx = &p;
    }
    BmTracked ended = {0};
    bm_tracker_wait(&t, BM_WAIT_FOREVER, keep_ended, &ended);
    bm_progress_clear(&p);
    bm_tracker_clear(&t);
    *ret = ended.change;
    ended.rss_after_bytes = BM_ABSENT;
    if (ret->target_bytes != ret->from_bytes)
        spool_change(conn, dom, o->name, o->policy ? o->policy->verify_features : BM_VERIFY_AUTO,
                     &ended);
    free(ended.name);
    return 0;
}

/* How the change ended: 0 when it reached its target or was not waited for, else -errno with
 * the detail: -ETIME (a requirement not met) when the wait timed out or stalled, a runtime
 * failure when the domain was lost. */
static int outcome(const SetOptions *o, const BmChange *ch)
{
    switch (ch->outcome) {
    case BM_CHANGE_REACHED:
    case BM_CHANGE_PENDING: return 0;
    case BM_CHANGE_TIMEOUT:
        return bm_error(-ETIME, "timed out after %u s, balloon at %s", o->timeout_s,
                        bm_size_format_exact(ch->reached_bytes, (char[BM_SIZE_EXACT_LEN]){""},
                                             BM_SIZE_EXACT_LEN));
    case BM_CHANGE_STALLED:
        return bm_error(-ETIME, "stalled: the balloon did not move for %u s (is the guest's "
                        "balloon driver loaded?)", o->stall_s);
    case BM_CHANGE_FAILED:
    case BM_CHANGE_STOPPED: /* (the agent's: not a change of set) */
        break;
    }
    return bm_error(-EIO, "lost the domain while waiting: %s", bm_error_detail(ch->failed_err));
}

/* Which sides of dom the change is, as virsh setmem decides: --live and --config as given,
 * --current the running domain if it runs, else its definition; none: the running domain.
 * Returns 0, or -errno with the detail (virsh's refusals: -ESRCH, libvirt's "operation invalid"
 * in conn.c, for a domain not running or transient; -EINVAL for --wait with nothing to wait
 * for). */
static int choose_sides(virDomainPtr dom, SetOptions *o)
{
    bool active, persistent;
    int r = bm_conn_domain_state(dom, &active, &persistent);
    if (r < 0)
        return r;
    o->do_live = o->live || (o->current && active) || (!o->live && !o->config && !o->current);
    o->do_config = o->config || (o->current && !active);
    if (o->do_live && !active)
        return bm_error(-ESRCH, "domain is not running (--config or --current sets the balloon "
                        "of its next boot)");
    if (o->do_config && !persistent)
        return bm_error(-ESRCH, "domain is transient: it has no definition for --config to "
                        "change");
    if (o->wait && !o->do_live)
        return bm_error(-EINVAL, "--wait: the domain is not running, --current changes the "
                        "balloon of its next boot: there is nothing to wait for");
    return 0;
}

/* What set moves: the balloon, or virtio-mem device index of cfg (the XML of the side changed:
 * the live one, else the persistent definition). */
typedef struct {
    bool virtio_mem;
    size_t index;
    char name[64];       /* the device's alias (libvirt's name for it where the XML has none) */
    BmBalloonConfig cfg;
} Device;

/* The names of cfg's virtio-mem devices, ", "-separated, into buf. */
static const char *device_names(const BmBalloonConfig *cfg, char *buf, size_t n)
{
    buf[0] = '\0';
    for (size_t i = 0, len = 0; i < cfg->n_virtio_mem && len < n; i++) {
        char name[64];
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? ", " : "",
                                bm_domxml_virtio_mem_name(cfg, i, name, sizeof(name)));
    }
    return buf;
}

/* Which device the change is: --device's, else virtio-mem where the domain has one device of it
 * and no usable balloon (none, or one whose inflates return nothing: VFIO, locked or hugepage
 * memory), else the balloon. Returns 0 and *ret, or -errno with the detail (-EINVAL: a --device
 * the domain does not have, or several virtio-mem devices and none named). */
static int choose_device(virDomainPtr dom, const SetOptions *o, Device *ret)
{
    *ret = (Device){0};
    if (o->device && strcmp(o->device, "balloon") == 0)
        return 0;
    _cleanup_free_ char *xml = NULL;
    int r = bm_conn_domain_xml(dom, !o->do_live, &xml);
    if (r < 0 || (r = bm_domxml_parse_balloon(xml, &ret->cfg)) < 0)
        return o->device ? r : 0; /* chosen: the balloon, as before virtio-mem */
    const BmBalloonConfig *c = &ret->cfg;
    char names[512], shown[128];
    size_t n = c->n_virtio_mem;
    if (!o->device) {
        if (n == 0 || (c->present && !bm_domxml_no_return_reason(c)))
            return 0;
        if (n > 1 || c->virtio_mem_more)
            return bm_error(-EINVAL, "it has no usable balloon and %zu virtio-mem devices: name "
                            "one with --device (%s)", n + c->virtio_mem_more,
                            device_names(c, names, sizeof(names)));
    } else if (strcmp(o->device, "mem") == 0) {
        if (n == 0)
            return bm_error(-EINVAL, "--device mem: the domain has no virtio-mem device");
        if (n > 1 || c->virtio_mem_more)
            return bm_error(-EINVAL, "--device mem: the domain has %zu virtio-mem devices: name "
                            "one (%s)", n + c->virtio_mem_more,
                            device_names(c, names, sizeof(names)));
    } else {
        for (ret->index = 0; ret->index < n; ret->index++) {
            char name[64];
            if (strcmp(bm_domxml_virtio_mem_name(c, ret->index, name, sizeof(name)), o->device) == 0)
                break;
        }
        if (ret->index == n)
            return bm_error(-EINVAL, "--device '%s': not balloon, mem or a virtio-mem device of "
                            "the domain (%s)", bm_printable(o->device, shown, sizeof(shown)),
                            n ? device_names(c, names, sizeof(names)) : "it has none");
    }
    ret->virtio_mem = true;
    bm_domxml_virtio_mem_name(c, ret->index, ret->name, sizeof(ret->name));
    return 0;
}

/* A virtio-mem change as set reports it: the change in the domain's totals and the device's
 * own sizes. */
typedef struct {
    const char *device;      /* its name */
    BmVmemTarget target;
    uint64_t block_bytes;
    uint64_t from_plugged;   /* what the device had plugged before (<current>) */
} VmemReport;

/* What the guest did, as the device's plugged size: "unplugged 256 MiB", "plugged 1 GiB",
 * "plugged and unplugged nothing". */
static const char *moved_text(const VmemReport *v, const BmChange *ch, char *buf, size_t n)
{
    uint64_t to = ch->reached_bytes - v->target.others_bytes;
    if (to == v->from_plugged)
        snprintf(buf, n, "plugged and unplugged nothing");
    else
        snprintf(buf, n, "%s %s", to < v->from_plugged ? "unplugged" : "plugged",
                 BM_SZ(to < v->from_plugged ? v->from_plugged - to : to - v->from_plugged));
    return buf;
}

static void print_vmem_json(const char *name, const VmemReport *v, const BmChange *ch,
                            bool waited, bool live, bool config)
{
    _cleanup_(json_object_putp) json_object *o = json_object_new_object();
    uint64_t to = ch->reached_bytes - v->target.others_bytes;
    json_object_object_add(o, "domain", bm_json_name(name));
    json_object_object_add(o, "live", json_object_new_boolean(live));
    json_object_object_add(o, "config", json_object_new_boolean(config));
    json_object_object_add(o, "device", json_object_new_string("virtio-mem"));
    json_object_object_add(o, "virtio_mem_device", json_object_new_string(v->device));
    json_object_object_add(o, "direction", json_object_new_string(
        ch->target_bytes < ch->from_bytes ? "unplug" : ch->target_bytes > ch->from_bytes ? "plug" : "none"));
    json_object_object_add(o, "from_bytes", json_object_new_uint64(ch->from_bytes));
    json_object_object_add(o, "target_bytes", json_object_new_uint64(ch->target_bytes));
    json_object_object_add(o, "reached_bytes", waited ? json_object_new_uint64(ch->reached_bytes) : NULL);
    json_object_object_add(o, "requested_bytes", json_object_new_uint64(v->target.requested_bytes));
    json_object_object_add(o, "asked_bytes", json_object_new_uint64(v->target.asked_bytes));
    json_object_object_add(o, "rounded", json_object_new_boolean(v->target.rounded));
    json_object_object_add(o, "block_bytes", json_object_new_uint64(v->block_bytes));
    json_object_object_add(o, "unplugged_bytes", waited ? json_object_new_uint64(
        to < v->from_plugged ? v->from_plugged - to : 0) : NULL);
    json_object_object_add(o, "plugged_bytes", waited ? json_object_new_uint64(
        to > v->from_plugged ? to - v->from_plugged : 0) : NULL);
    json_object_object_add(o, "outcome", json_object_new_string(bm_change_outcome_name(ch->outcome)));
    json_object_object_add(o, "duration_s", waited ? json_seconds(ch->duration_ns) : NULL);
    json_object_object_add(o, "started_at", json_seconds(ch->started_real_ns));
    json_object_object_add(o, "finished_at", waited ? json_seconds(ch->finished_real_ns) : NULL);
    json_object_object_add(o, "polls", json_object_new_int((int)ch->polls));
    puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
}

static void print_vmem_text(const char *name, const VmemReport *v, const BmChange *ch,
                            bool waited, bool live, bool config)
{
    _cleanup_free_ char *printable = bm_escape_name(name);
    char moved[64];
    if (v->target.rounded)
        printf("%s: virtio-mem %s: %s is not a whole number of its %s blocks: requested %s\n",
               printable, v->device, bm_size_format_exact(v->target.asked_bytes,
                                                          (char[BM_SIZE_EXACT_LEN]){""},
                                                          BM_SIZE_EXACT_LEN),
               BM_SZ(v->block_bytes), BM_SZ(v->target.requested_bytes));
    if (!live)
        printf("%s: virtio-mem %s: next boot's requested size %s (the domain %s)\n", printable,
               v->device, BM_SZ(v->target.requested_bytes), BM_SZ(ch->target_bytes));
    else if (!waited)
        printf("%s: virtio-mem %s: from %s to %s, requested %s (not waiting)\n", printable,
               v->device, BM_SZ(ch->from_bytes), BM_SZ(ch->target_bytes),
               BM_SZ(v->target.requested_bytes));
    else
        printf("%s: virtio-mem %s: from %s to %s, requested %s: %s %s after %.3f s (%u event%s "
               "and reads): the guest %s\n", printable, v->device, BM_SZ(ch->from_bytes),
               BM_SZ(ch->target_bytes), BM_SZ(v->target.requested_bytes),
               bm_change_outcome_name(ch->outcome), BM_SZ(ch->reached_bytes),
               ch->duration_ns / 1e9, ch->polls, ch->polls == 1 ? "" : "s",
               moved_text(v, ch, moved, sizeof(moved)));
    if (live && config)
        printf("%s: virtio-mem %s: and the next boot's requested size to %s\n", printable,
               v->device, BM_SZ(v->target.requested_bytes));
}

/* How a virtio-mem change ended: 0 when it reached its target or was not waited for, else
 * -errno with the detail (-ETIME: timed out or stalled, with what the guest did). */
static int vmem_outcome(const SetOptions *o, const VmemReport *v, const BmChange *ch)
{
    char moved[64];
    uint64_t to = ch->reached_bytes - v->target.others_bytes;
    switch (ch->outcome) {
    case BM_CHANGE_REACHED:
    case BM_CHANGE_PENDING: return 0;
    case BM_CHANGE_TIMEOUT:
        return bm_error(-ETIME, "timed out after %u s: the guest %s of the %s asked", o->timeout_s,
                        moved_text(v, ch, moved, sizeof(moved)),
                        BM_SZ(ch->target_bytes > ch->from_bytes ? ch->target_bytes - ch->from_bytes
                                                                : ch->from_bytes - ch->target_bytes));
    case BM_CHANGE_STALLED:
        if (to == v->from_plugged)
            return bm_error(-ETIME, "stalled: virtio-mem device %s did not move for %u s (is the "
                            "guest's virtio_mem driver loaded?)", v->device, o->stall_s);
        return bm_error(-ETIME, "stalled: the guest %s of the %s asked and no more for %u s (it "
                        "unplugs only memory it can move: onlined movable, "
                        "memhp_default_state=online_movable); requested stays %s",
                        moved_text(v, ch, moved, sizeof(moved)),
                        BM_SZ(ch->target_bytes > ch->from_bytes ? ch->target_bytes - ch->from_bytes
                                                                : ch->from_bytes - ch->target_bytes),
                        o->stall_s, BM_SZ(v->target.requested_bytes));
    case BM_CHANGE_FAILED:
    case BM_CHANGE_STOPPED:
        break;
    }
    return bm_error(-EIO, "lost the domain while waiting: %s", bm_error_detail(ch->failed_err));
}

/* A virtio-mem change of dom (dev: which device, of the XML of the side changed), each failure
 * reported here, once. With --wait on a connection of its own, opened after libvirt's event
 * loop: the events of a connection come only through a loop it was opened with. Returns the
 * exit status. */
static int set_virtio_mem(const BmGlobal *g, virDomainPtr dom, const SetOptions *o, const Device *dev)
{
    const BmBalloonConfig *c = &dev->cfg;
    const BmVirtioMem *m = &c->virtio_mem[dev->index];
    uint64_t max_bytes = c->memory_bytes, now = bm_vmem_domain_bytes(c);
    int r;
    char quoted[256];
    if (!bm_present(max_bytes) || !bm_present(now))
        return bm_report_failure("set", o->name, bm_error(-EIO, "cannot tell its memory: "
                                 "<memory> or a memory device's size is unreadable"));
    BmSizeContext ctx = {.max_bytes = max_bytes, .current_bytes = now};
    uint64_t target;
    if ((r = bm_size_parse(o->size, &ctx, &target)) < 0)
        return bm_report_failure("set", o->name, bm_error(-EINVAL, "size '%s': %s",
                                 bm_printable(o->size, quoted, sizeof(quoted)), bm_error_detail(r)));
    VmemReport v = {.device = dev->name, .block_bytes = m->block_bytes,
                    .from_plugged = bm_present(m->current_bytes) ? m->current_bytes
                                                                 : m->requested_bytes};
    if ((r = bm_vmem_target(c, dev->index, target, &v.target)) < 0)
        return bm_report_failure("set", o->name, bm_error(-EINVAL, "size '%s': %s",
                                 bm_printable(o->size, quoted, sizeof(quoted)), bm_error_detail(r)));
    if ((r = check_floor(dom, o, max_bytes, now, v.target.total_bytes)) < 0)
        return bm_report_failure("set", o->name, r);
    const char *job = NULL;
    if (o->do_live && bm_balloon_job_running(dom, &job) > 0)
        return bm_report_failure("set", o->name, bm_error(-EAGAIN, "busy with %s: libvirt lets "
                                 "no device change in until it ends; try again then", job));
    /* the definition first: if libvirt refuses it, the running domain is left as it was */
    if (o->do_config && (r = bm_vmem_set_requested(dom, dev->index, v.target.requested_bytes,
                                                   false)) < 0)
        return bm_report_failure("set", o->name, bm_as_failure(r));
    BmChange ch = {.from_bytes = now, .target_bytes = v.target.total_bytes, .reached_bytes = now,
                   .outcome = BM_CHANGE_PENDING, .started_real_ns = bm_now_real_ns()};
    if (o->do_live) {
        _cleanup_(virConnectClosep) virConnectPtr econn = NULL;
        _cleanup_(virDomainFreep) virDomainPtr edom = NULL;
        char uuid[VIR_UUID_STRING_BUFLEN];
        if (o->wait && ((r = bm_conn_event_loop_init()) < 0 ||
                        (r = bm_cli_connect(g, false, &econn)) < 0 ||
                        virDomainGetUUIDString(dom, uuid) < 0 ||
                        (r = bm_conn_lookup(econn, uuid, &edom)) < 0))
            return bm_report_failure("set", o->name, bm_as_failure(r < 0 ? r : -EIO));
        BmWaitOptions w = bm_wait_options_default();
        w.timeout_ms = o->timeout_s * 1000u;
        w.stall_ms = o->stall_s * 1000u;
        BmProgress p;
        bm_progress_init(&p, stderr);
        if (p.f) {
            w.progress = on_progress; /* the domain's size as the device plugs */
            w.progress_ctx = &p;
        }
        r = bm_vmem_change(o->wait ? edom : dom, dev->index, m->alias, v.target.others_bytes,
                           v.from_plugged, v.target.requested_bytes, o->wait, &w, &ch);
        bm_progress_clear(&p);
        if (r < 0)
            return bm_report_failure("set", o->name, bm_as_failure(r));
    }
    if (o->json)
        print_vmem_json(o->name, &v, &ch, o->wait, o->do_live, o->do_config);
    else if (!o->quiet)
        print_vmem_text(o->name, &v, &ch, o->wait, o->do_live, o->do_config);
    r = vmem_outcome(o, &v, &ch);
    return r < 0 ? bm_report_failure("set", o->name, r) : BM_EXIT_OK;
}

/* The steps, each failure reported here, once: the domain's named from the lookup on. Returns
 * the exit status. */
static int set_balloon(const BmGlobal *g, SetOptions *o)
{
    _cleanup_(virConnectClosep) virConnectPtr conn = NULL;
    _cleanup_(virDomainFreep) virDomainPtr dom = NULL;
    int r;
    if ((r = bm_cli_writable(g, "setting a balloon target", NULL)) < 0 ||
        (r = load_floor_policy(o)) < 0 || (r = bm_cli_connect(g, false, &conn)) < 0)
        return bm_report_failure("set", NULL, r);
    if ((r = bm_conn_lookup(conn, o->name, &dom)) < 0)
        return bm_report_failure("set", o->name, r);
    o->name = virDomainGetName(dom); /* given as an ID or UUID: its name from here on */
    uint64_t actual_bytes, target_bytes;
    Device dev;
    if ((r = choose_sides(dom, o)) < 0 || (r = choose_device(dom, o, &dev)) < 0)
        return bm_report_failure("set", o->name, r);
    if (dev.virtio_mem)
        return set_virtio_mem(g, dom, o, &dev);
    if ((r = resolve_target(dom, o, &actual_bytes, &target_bytes)) < 0)
        return bm_report_failure("set", o->name, r);
    /* the definition first: if libvirt refuses it, the running domain is left as it was */
    if (o->do_config && (r = bm_balloon_set_config(dom, target_bytes)) < 0)
        return bm_report_failure("set", o->name, bm_as_failure(r));
    BmChange ch = {.from_bytes = actual_bytes, .target_bytes = target_bytes,
                   .reached_bytes = actual_bytes, .outcome = BM_CHANGE_PENDING,
                   .started_real_ns = bm_now_real_ns()};
    if (o->do_live && (r = change(conn, dom, o, actual_bytes, target_bytes, &ch)) < 0)
        return bm_report_failure("set", o->name, bm_as_failure(r));
    if (o->json)
        print_json(o->name, &ch, o->wait, o->do_live, o->do_config);
    else if (!o->quiet)
        print_text(o->name, &ch, o->wait, o->do_live, o->do_config);
    r = outcome(o, &ch);
    return r < 0 ? bm_report_failure("set", o->name, r) : BM_EXIT_OK;
}

static int run(BmGlobal *g, int argc, char **argv)
{
    SetOptions o = {.timeout_s = BM_WAIT_DEFAULT_TIMEOUT_S, .stall_s = BM_WAIT_DEFAULT_STALL_S,
                    .policy_path = SET_POLICY};
    char **args = bm_cli_protect_negative(argc, argv);
    int ret = parse_options(g, argc, args, &o);
    if (ret != 0)
        ret = ret > 0 ? BM_EXIT_OK : bm_report_failure("set", NULL, ret);
    else
        ret = set_balloon(g, &o);
    bm_policy_free(o.policy);
    bm_cli_free_protected(args);
    return ret;
}

const BmVerb bm_verb_set = {
    .name = "set",
    .options = options,
    .help_column = 24,
    .help_after = help_after,
    .run = run,
    .synopsis = "set DOMAIN SIZE [--live] [--config] [--current]\n"
                "       [--wait[=SECONDS]] [--stall=SECONDS] [--policy FILE] [--force]\n"
                "       [--json|--quiet] [--device balloon|mem|ALIAS]",
    .summary = "Set a domain's balloon target (as virsh setmem) and optionally wait until it\n"
               "is reached, measuring how long the inflate or deflate took.",
    .brief = "a domain's balloon target (--wait: measured)",
};
