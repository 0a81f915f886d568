/* balloonmgr set DOMAIN SIZE [--wait[=SECONDS]] [--stall=SECONDS] [--policy FILE] [--force]
 * [--json]: move one balloon, not below the domain's floor unless --force. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
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
#include "export.h"
#include "progress.h"

#define SET_POLICY BM_POLICY_DEFAULT_PATH /* config.h: SYSCONFDIR/balloonmgr/... */

static const char options_help[] =
    "  -w, --wait[=SECONDS]  wait until the balloon reaches the target (within 1 MiB),\n"
    "                        at most SECONDS (default 120); exit 3 on timeout or stall\n"
    "      --stall=SECONDS   with --wait: give up when the balloon has not moved for\n"
    "                        SECONDS (default 10)\n"
    "  -p, --policy FILE     take the domain's floor from FILE (default " SET_POLICY ",\n"
    "                        when it exists)\n"
    "  -f, --force           set a target below the domain's floor too\n"
    "  -j, --json            print JSON\n"
    "  -h, --help            show this help\n"
    "\nSIZE: a bare number is KiB; b, K/KiB, M/MiB, G/GiB, T/TiB are 1024-based and\n"
    "KB, MB, GB, TB 1000-based; N% is N percent of the maximum; +SIZE / -SIZE move\n"
    "from the current balloon.\n"
    "\nAn inflate to a target below the domain's floor is refused (exit 2) unless --force: the\n"
    "floor is the largest of 128 MiB, 5% of the maximum, <memtune><min_guarantee> and the\n"
    "policy's floor.\n";

DEFINE_CLEANUP(json_object *, json_object_put)

/* Seconds as a JSON number with microsecond resolution ("1.234567", not "1.2e-06"). */
static json_object *json_seconds(uint64_t ns)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%.6f", ns / 1e9);
    return json_object_new_double_s(ns / 1e9, buf);
}

static void print_json(const char *name, const BmChange *ch, bool waited)
{
    _cleanup_(json_object_putp) json_object *o = json_object_new_object();
    json_object_object_add(o, "domain", bm_json_name(name));
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
    json_object_object_add(o, "polls", json_object_new_int((int)ch->polls));
    puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
}

static void print_text(const char *name, const BmChange *ch, bool waited)
{
    char from[32], target[32], reached[32], printable[256];
    bm_size_format(ch->from_bytes, from, sizeof(from));
    bm_size_format(ch->target_bytes, target, sizeof(target));
    bm_size_format(ch->reached_bytes, reached, sizeof(reached));
    bm_printable(name, printable, sizeof(printable));
    const char *dir = bm_change_direction(ch->from_bytes, ch->target_bytes);
    if (!waited)
        printf("%s: %s from %s to target %s (not waiting)\n", printable, dir, from, target);
    else
        printf("%s: %s from %s to target %s: %s %s after %.3f s (%u poll%s)\n", printable, dir,
               from, target, bm_change_outcome_name(ch->outcome), reached, ch->duration_ns / 1e9,
               ch->polls, ch->polls == 1 ? "" : "s");
}

/* --wait on a terminal: the balloon's size, rate and ETA on stderr while it moves */
typedef struct {
    BmProgress p;
    const char *name;
} SetProgress;

static void on_progress(void *ctx, uint64_t from_bytes, uint64_t target_bytes,
                        uint64_t actual_bytes, uint64_t elapsed_ns)
{
    SetProgress *sp = ctx;
    char line[256];
    bm_progress_show(&sp->p, bm_progress_format(sp->name, from_bytes, target_bytes, actual_bytes,
                                                elapsed_ns, line, sizeof(line)), false);
}

static int run(const BmGlobal *g, int argc, char **argv)
{
    static const struct option opts[] = {
        {"wait", optional_argument, NULL, 'w'},
        {"stall", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"policy", required_argument, NULL, 'p'},
        {"force", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    bool json = false, wait = false, force = false, policy_explicit = false;
    const char *policy_path = SET_POLICY;
    unsigned timeout_s = BM_WAIT_DEFAULT_TIMEOUT_S, stall_s = BM_WAIT_DEFAULT_STALL_S;
    char **args = bm_cli_protect_negative(argc, argv);
    int c, r, ret = BM_EXIT_USAGE;
    _cleanup_(virConnectClosep) virConnectPtr conn = NULL;
    _cleanup_(virDomainFreep) virDomainPtr dom = NULL;
    _cleanup_(bm_policy_freep) BmPolicy *pol = NULL;

    while ((c = getopt_long(argc, args, "wjp:fh", opts, NULL)) != -1) {
        switch (c) {
        case 'w':
            wait = true;
            if (optarg && (bm_cli_parse_seconds(optarg, 86400, &timeout_s) < 0 || timeout_s == 0)) {
                bm_report("set", NULL, "--wait '%s': expected a number of seconds from 1 to 86400",
                          optarg);
                goto out;
            }
            break;
        case 's':
            if (bm_cli_parse_seconds(optarg, 86400, &stall_s) < 0 || stall_s == 0) {
                bm_report("set", NULL, "--stall '%s': expected a number of seconds from 1 to 86400",
                          optarg);
                goto out;
            }
            break;
        case 'j': json = true; break;
        case 'p': policy_path = optarg; policy_explicit = true; break;
        case 'f': force = true; break;
        case 'h':
            bm_verb_usage(&bm_verb_set, options_help, stdout);
            ret = BM_EXIT_OK;
            goto out;
        default: bm_verb_usage(&bm_verb_set, options_help, stderr); goto out;
        }
    }
    if (argc - optind != 2) {
        bm_report("set", NULL, "expected DOMAIN and SIZE (see 'balloonmgr set --help')");
        goto out;
    }
    const char *name = bm_cli_unprotect(args[optind]);
    const char *size = bm_cli_unprotect(args[optind + 1]);
    if (!bm_cli_writable(g, "set", "setting a balloon target", NULL))
        goto out;
    /* the policy's floor: from the file given, or the host's policy file when there is one
     * (the built-in defaults are for the automatic passes, not for manual targets) */
    if (!force && (policy_explicit || access(policy_path, F_OK) == 0)) {
        _cleanup_free_ char *errors = NULL;
        if (bm_policy_load(policy_path, &pol, &errors) < 0) {
            fputs(errors ? errors : "", stderr);
            bm_report("set", NULL, "policy '%s' has errors", policy_path);
            goto out;
        }
    }

    r = bm_conn_open(g->uri, false, &conn);
    if (r < 0) {
        bm_report("set", NULL, "%s", bm_error_detail(r));
        ret = BM_EXIT_FAILURE;
        goto out;
    }
    uint64_t max_bytes, actual_bytes, target_bytes;
    r = bm_conn_lookup(conn, name, &dom);
    if (r >= 0)
        r = bm_balloon_read_limits(dom, &max_bytes, &actual_bytes);
    if (r < 0) {
        bm_report("set", name, "%s", bm_error_detail(r));
        ret = bm_exit_for(r);
        goto out;
    }

    BmSizeContext ctx = {.max_bytes = max_bytes, .current_bytes = actual_bytes};
    r = bm_size_parse(size, &ctx, &target_bytes);
    if (r < 0) {
        char quoted[256];
        bm_report("set", name, "size '%s': %s", bm_printable(size, quoted, sizeof(quoted)),
                  bm_error_detail(r));
        ret = BM_EXIT_USAGE;
        goto out;
    }

    /* a manual target below the floor starves the guest: only on purpose (--force). Only an
     * inflate takes memory away: a deflate that stays below the floor still gives some back
     * (and needs no domain XML read before it: set --wait's timing starts sooner) */
    if (!force && target_bytes < actual_bytes) {
        BmBalloonConfig cfg = {.min_guarantee_bytes = BM_ABSENT};
        _cleanup_free_ char *xml = NULL;
        if (bm_conn_domain_xml(dom, false, &xml) < 0 || bm_domxml_parse_balloon(xml, &cfg) < 0)
            cfg.min_guarantee_bytes = BM_ABSENT;
        uint64_t policy_floor = BM_ABSENT;
        if (pol) {
            BmGuestRules rules;
            bm_policy_rules_for(pol, name, &rules);
            policy_floor = bm_amount_bytes(rules.floor, max_bytes);
        }
        const char *why = NULL;
        uint64_t floor = bm_manual_floor(max_bytes, cfg.min_guarantee_bytes, policy_floor, &why);
        if (target_bytes < floor) {
            char quoted[256], t[32], f[32];
            bm_size_format(target_bytes, t, sizeof(t));
            bm_size_format(floor, f, sizeof(f));
            bm_report("set", name,
                      "size '%s' (%s) is below the domain's floor of %s, %s%s%s; --force sets it "
                      "anyway",
                      bm_printable(size, quoted, sizeof(quoted)), t, f, why,
                      pol && !strcmp(why, "the policy's floor") ? " in " : "",
                      pol && !strcmp(why, "the policy's floor") ? pol->path : "");
            ret = BM_EXIT_USAGE;
            goto out;
        }
    }

    /* libvirt would hold the change up to 30 s for the job lock, then fail */
    const char *job = NULL;
    if (bm_balloon_job_running(dom, &job) > 0) {
        bm_report("set", name, "busy with %s: libvirt lets no balloon change in until it ends; "
                  "try again then", job);
        ret = BM_EXIT_FAILURE;
        goto out;
    }

    BmWaitOptions wo = {.timeout_ms = timeout_s * 1000u,
                        .stall_ms = stall_s * 1000u,
                        .poll_ms = BM_WAIT_DEFAULT_POLL_MS,
                        .tolerance_bytes = BM_WAIT_TOLERANCE_BYTES};
    BmChange ch;
    uint64_t rss_before = BM_ABSENT, unused;
    bm_balloon_read_live(dom, &unused, &rss_before);
    SetProgress sp = {.name = name};
    bm_progress_init(&sp.p, stderr);
    if (sp.p.f) {
        wo.progress = on_progress;
        wo.progress_ctx = &sp;
    }
    r = bm_balloon_change(dom, actual_bytes, target_bytes, wait ? &wo : NULL, &ch);
    bm_progress_clear(&sp.p);
    if (r < 0) {
        bm_report("set", name, "%s", bm_error_detail(r));
        ret = BM_EXIT_FAILURE;
        goto out;
    }
    if (wait && ch.target_bytes != ch.from_bytes) {
        /* hand the measurement to a running agent / the next timer run */
        BmTracked t = {.change = ch, .rss_before_bytes = rss_before, .rss_after_bytes = BM_ABSENT};
        bm_copy_name(t.name, sizeof(t.name), name);
        virDomainGetUUIDString(dom, t.uuid);
        /* the histogram's sg label: this domain's SG verdict now */
        BmFeatureOptions fo = {.sg_bit = BM_SG_DEFAULT_BIT};
        BmFeatureReport rep;
        _cleanup_free_ char *path = NULL, *qerr = NULL;
        bm_qmp_probe_balloon(dom, &fo, &rep, &path, &qerr);
        snprintf(t.sg, sizeof(t.sg), "%s", bm_sg_label(rep.feature[BM_FEATURE_SG].state, true));
        bm_balloon_read_live(dom, &unused, &t.rss_after_bytes);
        _cleanup_free_ char *uri = bm_conn_uri(conn);
        if (bm_spool_write(&t, uri) < 0)
            bm_report("set", name, "warning: %s", bm_error_detail(-EIO));
    }
    if (json)
        print_json(name, &ch, wait);
    else
        print_text(name, &ch, wait);

    switch (ch.outcome) {
    case BM_CHANGE_REACHED:
    case BM_CHANGE_PENDING: ret = BM_EXIT_OK; break;
    case BM_CHANGE_TIMEOUT:
        bm_report("set", name, "timed out after %u s, balloon at %" PRIu64 " KiB", timeout_s,
                  ch.reached_bytes / 1024);
        ret = BM_EXIT_UNMET;
        break;
    case BM_CHANGE_STALLED:
        bm_report("set", name, "stalled: the balloon did not move for %u s (is the guest's "
                  "balloon driver loaded?)", stall_s);
        ret = BM_EXIT_UNMET;
        break;
    case BM_CHANGE_FAILED:
        bm_report("set", name, "lost the domain while waiting: %s", bm_error_detail(-EIO));
        ret = BM_EXIT_FAILURE;
        break;
    }
out:
    bm_cli_free_protected(args);
    return ret;
}

const BmVerb bm_verb_set = {
    .name = "set",
    .run = run,
    .synopsis = "set DOMAIN SIZE [--wait[=SECONDS]] [--stall=SECONDS] [--policy FILE] [--force]\n"
                "           [--json]",
    .summary = "Set the balloon target of a running domain and optionally wait until it is reached,\n"
               "measuring how long the inflate or deflate took.",
};
