/* balloonmgr verify [DOMAIN...] [--require FEATURE[,FEATURE]] [--sg-bit=N] [--json]:
 * which balloon features each domain really negotiated, from QEMU's x-query-virtio-status. */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-name.h"
#include "cli.h"
#include "conn.h"
#include "domxml.h"
#include "error.h"
#include "feature.h"
#include "qmp.h"
#include "size.h"
#include "summary.h"
#include "table.h"
#include <unistd.h>

static const BmOptDef options[] = {
    {'r', "require", 'r', " FEATURE[,FEATURE]",
     "\nexit 3 unless every domain negotiated each feature:\n"
     "sg ioeventfd stats deflate-on-oom free-page-hint\n"
     "page-poison reporting must-tell-host virtio-mem",
     BM_COMPLETE_LIST, "sg ioeventfd stats deflate-on-oom free-page-hint page-poison reporting "
                       "must-tell-host virtio-mem"},
    {0, "sg-bit", 'b', "=N", "also take undecoded bit N as SG (3; -1: by name only)",
     BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_JSON("print JSON"),
    BM_OPTDEF_HELP("show this help"),
    BM_OPTDEF_END,
};

static const char help_after[] =
    "\nWithout DOMAIN, every running domain. DEFLATE-ON-OOM and REPORTING: the XML's\n"
    "setting with QEMU's verdict (on+negotiated, on+offered, on+not-offered).\n"
    "virtio-mem devices: QEMU's sizes and whether the guest's driver is ready.\n";

DEFINE_CLEANUP(json_object *, json_object_put)

/* A required item: a balloon feature, the ioeventfd switch (feature == -1) or virtio-mem
 * devices whose guest driver is ready (-2). */
enum { REQ_IOEVENTFD = -1, REQ_VIRTIO_MEM = -2 };
typedef struct {
    int feature;
} Requirement;

static int parse_require(const char *arg, Requirement **reqs, size_t *n)
{
    _cleanup_free_ char *copy = bm_strdup(arg);
    char *save = NULL;
    for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        int f = strcmp(w, "ioeventfd") == 0    ? REQ_IOEVENTFD
                : strcmp(w, "virtio-mem") == 0 ? REQ_VIRTIO_MEM
                                               : bm_feature_from_key(w);
        if (f == -EINVAL)
            return bm_error(-EINVAL, "--require '%s': unknown feature (sg, ioeventfd, stats, "
                            "deflate-on-oom, free-page-hint, page-poison, reporting, "
                            "must-tell-host, virtio-mem)", w);
        *reqs = bm_reallocarray(*reqs, *n + 1, sizeof(Requirement));
        (*reqs)[(*n)++] = (Requirement){f};
    }
    if (*n == 0)
        return bm_error(-EINVAL, "--require needs at least one feature");
    return 0;
}

typedef struct {
    char *name;
    BmFeatureReport rep;
    char *path;
    char *error;
    bool cfg_known; /* the balloon config of the domain's live XML */
    BmBalloonConfig cfg;
    /* its virtio-mem devices as QEMU says them (asked only where the XML has one) */
    int n_vmem;       /* how many QEMU has; -errno when it could not be asked */
    char *vmem_error; /* then why */
    BmQemuVirtioMem vmem[BM_VIRTIO_MEM_MAX];
} Result;

/* Whether the XML turns feature f on (the autodeflate and freePageReporting attributes);
 * BM_TRI_UNSET for the features the XML does not set. */
static BmTristate xml_setting(const Result *r, BmFeature f)
{
    if (!r->cfg_known || !r->cfg.present)
        return BM_TRI_UNSET;
    if (f == BM_FEATURE_DEFLATE_ON_OOM)
        return r->cfg.autodeflate == BM_TRI_ON ? BM_TRI_ON : BM_TRI_OFF;
    if (f == BM_FEATURE_REPORTING)
        return r->cfg.free_page_reporting == BM_TRI_ON ? BM_TRI_ON : BM_TRI_OFF;
    return BM_TRI_UNSET;
}

/* A feature's verdict; for those the XML sets (deflate-on-oom, reporting) "configured" too:
 * true, false, or null when the XML has no balloon or could not be read. */
static json_object *verdict_json(const Result *r, BmFeature f)
{
    const BmFeatureVerdict *v = &r->rep.feature[f];
    json_object *o = json_object_new_object();
    json_object_object_add(o, "state", json_object_new_string(bm_feature_state_name(v->state)));
    json_object_object_add(o, "reason", v->reason ? json_object_new_string(v->reason) : NULL);
    json_object_object_add(o, "evidence", v->evidence ? json_object_new_string(v->evidence) : NULL);
    if (f == BM_FEATURE_DEFLATE_ON_OOM || f == BM_FEATURE_REPORTING) {
        BmTristate t = xml_setting(r, f);
        json_object_object_add(o, "configured", t == BM_TRI_UNSET ? NULL : json_object_new_boolean(t == BM_TRI_ON));
    }
    return o;
}

/* The virtio-mem devices as QEMU says them: an array (empty without one in the XML), null when
 * QEMU could not be asked. */
static json_object *vmem_json(const Result *r)
{
    if (r->n_vmem < 0)
        return NULL;
    json_object *arr = json_object_new_array();
    for (int i = 0; i < r->n_vmem && (size_t)i < BM_VIRTIO_MEM_MAX; i++) {
        const BmQemuVirtioMem *v = &r->vmem[i];
        json_object *o = json_object_new_object();
        json_object_object_add(o, "device", json_object_new_string(v->id));
        json_object_object_add(o, "node", v->node >= 0 ? json_object_new_int(v->node) : NULL);
        json_object_object_add(o, "size_bytes", json_object_new_uint64(v->max_bytes));
        json_object_object_add(o, "block_bytes", json_object_new_uint64(v->block_bytes));
        json_object_object_add(o, "requested_bytes", json_object_new_uint64(v->requested_bytes));
        json_object_object_add(o, "current_bytes", json_object_new_uint64(v->size_bytes));
        json_object_object_add(o, "driver_ok", v->driver_known ? json_object_new_boolean(v->driver_ok) : NULL);
        json_object_object_add(o, "driver_error", v->driver_error ? json_object_new_string(v->driver_error) : NULL);
        json_object_array_add(arr, o);
    }
    return arr;
}

/* A device's driver as a few words. */
static const char *driver_words(const BmQemuVirtioMem *v)
{
    if (!v->driver_known)
        return "driver state unknown";
    return v->driver_ok ? "driver ready (DRIVER_OK)"
                        : "no driver (no DRIVER_OK): the guest plugs and unplugs nothing";
}

/* The lines below the table: each virtio-mem device as QEMU says it. */
static void print_vmem_notes(const Result *res, size_t n)
{
    int width = bm_table_terminal_width(STDOUT_FILENO);
    for (size_t i = 0; i < n; i++) {
        const Result *r = &res[i];
        _cleanup_free_ char *name = bm_escape_name(r->name);
        if (r->n_vmem < 0) {
            _cleanup_free_ char *line = bm_asprintf("%s: virtio-mem: QEMU not asked: %s", name,
                                                    r->vmem_error ? r->vmem_error : "?");
            bm_table_print_line(stdout, width, 2, line);
            continue;
        }
        for (int k = 0; k < r->n_vmem && (size_t)k < BM_VIRTIO_MEM_MAX; k++) {
            const BmQemuVirtioMem *v = &r->vmem[k];
            _cleanup_free_ char *line = bm_asprintf(
                "%s: virtio-mem %s: %s; %s plugged of %s, requested %s, block %s%s%s", name,
                v->id, driver_words(v), BM_SZ(v->size_bytes), BM_SZ(v->max_bytes),
                BM_SZ(v->requested_bytes), BM_SZ(v->block_bytes),
                v->driver_error ? ": " : "", v->driver_error ? v->driver_error : "");
            bm_table_print_line(stdout, width, 2, line);
        }
    }
}

static json_object *result_json(const Result *r)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "name", bm_json_name(r->name));
    json_object_object_add(o, "balloon_path", r->path ? json_object_new_string(r->path) : NULL);
    json_object_object_add(o, "driver_ok", json_object_new_boolean(r->rep.driver_ok));
    json_object_object_add(o, "error", r->error ? bm_json_name(r->error) : NULL);
    json_object *feats = json_object_new_object(), *neg = json_object_new_array();
    for (int f = 0; f < BM_FEATURE_COUNT; f++) {
        /* JSON keys are snake_case: "deflate-on-oom" -> "deflate_on_oom" */
        char key[64];
        snprintf(key, sizeof(key), "%s", bm_feature_key(f));
        for (char *p = key; *p; p++)
            if (*p == '-')
                *p = '_';
        json_object_object_add(feats, key, verdict_json(r, f));
        if (r->rep.feature[f].state == BM_FEAT_NEGOTIATED)
            json_object_array_add(neg, json_object_new_string(bm_feature_qemu_name(f)));
    }
    json_object *io = json_object_new_object();
    json_object_object_add(io, "state", json_object_new_string(bm_switch_state_name(r->rep.ioeventfd)));
    json_object_object_add(io, "reason",
                           r->rep.ioeventfd_reason ? json_object_new_string(r->rep.ioeventfd_reason) : NULL);
    const char *src = bm_ioeventfd_source_name(r->rep.ioeventfd_source);
    json_object_object_add(io, "source", src ? json_object_new_string(src) : NULL);
    json_object_object_add(feats, "ioeventfd", io);
    json_object_object_add(o, "features", feats);
    json_object_object_add(o, "negotiated", neg);
    json_object_object_add(o, "virtio_mem", vmem_json(r));
    json_object_object_add(o, "virtio_mem_error", r->vmem_error ? json_object_new_string(r->vmem_error) : NULL);
    return o;
}

static void print_table(const Result *res, size_t n)
{
    static const char *headers[] = {"NAME", "SG", "IOEVENTFD", "STATS", "DEFLATE-ON-OOM",
                                    "FREE-PAGE-HINT", "REPORTING", "PAGE-POISON", "NOTE"};
    static const BmFeature cols[] = {BM_FEATURE_STATS, BM_FEATURE_DEFLATE_ON_OOM,
                                     BM_FEATURE_FREE_PAGE_HINT, BM_FEATURE_REPORTING,
                                     BM_FEATURE_PAGE_POISON};
    _cleanup_(bm_table_freep) BmTable *t = bm_table_new(BM_ARRAY_SIZE(headers), headers, "llllllllw"); /* NOTE wraps */
    /* on a narrow terminal (balloonmgr(8) says so): NAME, SG and IOEVENTFD stay */
    bm_table_set_give_way(t, "PAGE-POISON,FREE-PAGE-HINT,STATS,REPORTING,DEFLATE-ON-OOM");
    for (size_t i = 0; i < n; i++) {
        const BmFeatureReport *rep = &res[i].rep;
        const BmFeatureVerdict *sg = &rep->feature[BM_FEATURE_SG];
        bm_table_cell(t, "%s", res[i].name); /* escaped once, by the table */
        bm_table_cell(t, "%s", bm_feature_state_name(sg->state));
        bm_table_cell(t, "%s%s", bm_switch_state_name(rep->ioeventfd),
                      rep->ioeventfd_source == BM_IOEVENTFD_SOURCE_LAB ? " (lab)" : "");
        for (size_t c = 0; c < BM_ARRAY_SIZE(cols); c++) {
            BmFeatureState st = rep->feature[cols[c]].state;
            BmTristate x = xml_setting(&res[i], cols[c]);
            char cell[32];
            if (x == BM_TRI_UNSET) /* a feature the XML does not set, or the XML unknown */
                bm_table_cell(t, "%s", bm_feature_state_name(st));
            else
                bm_table_cell(t, "%s", bm_feature_config_cell(true, x == BM_TRI_ON, st, cell, sizeof(cell)));
        }
        if (res[i].error)
            bm_table_cell(t, "%s", res[i].error);
        else if (sg->state == BM_FEAT_UNKNOWN || rep->feature[BM_FEATURE_STATS].state == BM_FEAT_UNKNOWN)
            bm_table_cell(t, "%s", rep->feature[BM_FEATURE_STATS].reason
                                       ? rep->feature[BM_FEATURE_STATS].reason : sg->reason);
        else if (sg->evidence && strcmp(sg->evidence, "bit") == 0)
            bm_table_cell(t, "SG recognised by its undecoded feature bit");
        else
            bm_table_cell(t, "%s", "");
    }
    bm_table_print(t, stdout);
}

/* Whether r meets req: returns 0, or -ENOPROTOOPT (a requirement not met) with the detail
 * saying what the feature is and why. */
static int meets(const Result *r, Requirement req, const char *uri)
{
    if (req.feature == REQ_VIRTIO_MEM) {
        if (r->n_vmem < 0)
            return bm_error(-ENOPROTOOPT, "virtio-mem is unknown: %s",
                            r->vmem_error ? r->vmem_error : "QEMU not asked");
        if (r->n_vmem == 0)
            return bm_error(-ENOPROTOOPT, "virtio-mem: the domain has no virtio-mem device");
        for (int k = 0; k < r->n_vmem && (size_t)k < BM_VIRTIO_MEM_MAX; k++)
            if (!r->vmem[k].driver_known || !r->vmem[k].driver_ok)
                return bm_error(-ENOPROTOOPT, "virtio-mem device %s: %s%s%s (is the guest's "
                                "virtio_mem driver loaded?)", r->vmem[k].id,
                                driver_words(&r->vmem[k]), r->vmem[k].driver_error ? ": " : "",
                                r->vmem[k].driver_error ? r->vmem[k].driver_error : "");
        return 0;
    }
    if (req.feature < 0) {
        if (r->rep.ioeventfd == BM_SWITCH_ON)
            return 0;
        return bm_error(-ENOPROTOOPT, "ioeventfd is %s%s%s",
                        bm_switch_state_name(r->rep.ioeventfd), r->rep.ioeventfd_reason ? ": " : "",
                        r->rep.ioeventfd_reason ? r->rep.ioeventfd_reason : "");
    }
    const BmFeatureVerdict *v = &r->rep.feature[req.feature];
    if (v->state == BM_FEAT_NEGOTIATED)
        return 0;
    /* a feature the XML leaves off: say how to turn it on */
    const char *opt = req.feature == BM_FEATURE_REPORTING        ? "--free-page-reporting on"
                      : req.feature == BM_FEATURE_DEFLATE_ON_OOM ? "--autodeflate on"
                                                                 : NULL;
    _cleanup_free_ char *cmd = opt && xml_setting(r, (BmFeature)req.feature) == BM_TRI_OFF
                                   ? bm_summary_configure_command(r->name, uri, opt) : bm_strdup("");
    return bm_error(-ENOPROTOOPT, "%s is %s%s%s%s%s%s", bm_feature_key(req.feature),
                    bm_feature_state_name(v->state), v->reason ? ": " : "",
                    v->reason ? v->reason : "", cmd[0] ? "; the domain XML leaves it off ('" : "",
                    cmd, cmd[0] ? "' turns it on at the next start)" : "");
}

typedef struct {
    bool json;
    const char *uri; /* the -c given, for the commands suggested */
    Requirement *reqs;
    size_t n_reqs;
    BmFeatureOptions fopts;
} VerifyOptions;

/* The options. Returns 0 to go on, 1 after printing --help, or -EINVAL with the detail. */
static int parse_options(BmGlobal *g, int argc, char **argv, VerifyOptions *o)
{
    int c;
    while ((c = bm_cli_getopt(g, &bm_verb_verify, argc, argv)) != -1) {
        switch (c) {
        case 'r': {
            int r = parse_require(optarg, &o->reqs, &o->n_reqs);
            if (r < 0)
                return r;
            break;
        }
        case 'b': {
            char *end = NULL;
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < -1 || v > 63)
                return bm_error(-EINVAL, "--sg-bit '%s': expected a bit number from 0 to 63, or -1",
                                optarg);
            o->fopts.sg_bit = (int)v;
            break;
        }
        case BM_OPT_JSON: o->json = true; break;
        case BM_OPT_HELP: bm_verb_usage(&bm_verb_verify, stdout); return 1;
        default: return -EINVAL; /* bm_cli_getopt() stored why */
        }
    }
    return 0;
}

/* The domains named (or all), every one looked up first: an unknown one is bad input and
 * nothing is printed. Returns 0, or -errno with the detail and in *ret_failed the name of the
 * domain it is about (NULL: the list of domains could not be read, a runtime failure). */
static int lookup_all(virConnectPtr conn, char **args, size_t n_args, char ***ret_names,
                      virDomainPtr **ret_doms, const char **ret_failed)
{
    int r;
    *ret_failed = NULL;
    if (n_args) {
        *ret_names = bm_malloc0((n_args + 1) * sizeof(char *));
        for (size_t i = 0; i < n_args; i++)
            (*ret_names)[i] = bm_strdup(args[i]);
    } else if ((r = bm_conn_list_names(conn, false, ret_names)) < 0) {
        return bm_as_failure(r);
    }
    char **names = *ret_names;
    size_t n = 0;
    while (names[n])
        n++;
    *ret_doms = bm_malloc0((n + 1) * sizeof(virDomainPtr));
    for (size_t i = 0; i < n; i++) {
        r = bm_conn_lookup(conn, names[i], &(*ret_doms)[i]);
        if (r < 0) {
            *ret_failed = names[i];
            return r;
        }
        free(names[i]); /* given as an ID or UUID: its name from here on */
        names[i] = bm_strdup(virDomainGetName((*ret_doms)[i]));
    }
    return 0;
}

/* Probes every domain, prints the verdicts, checks the requirements, reporting each one not
 * met. Returns the exit status. */
static int verify(const VerifyOptions *o, char **names, virDomainPtr *doms)
{
    size_t n = 0;
    while (names[n])
        n++;
    _cleanup_free_ Result *res = bm_malloc0((n + 1) * sizeof(Result));
    for (size_t i = 0; i < n; i++) {
        res[i].name = names[i];
        bm_qmp_probe_balloon(doms[i], &o->fopts, &res[i].rep, &res[i].path, &res[i].error);
        _cleanup_free_ char *xml = NULL;
        res[i].cfg_known = bm_conn_domain_xml(doms[i], false, &xml) >= 0 &&
                           bm_domxml_parse_balloon(xml, &res[i].cfg) >= 0;
        /* virtio-mem only where the XML has it: no monitor command more for the others */
        res[i].n_vmem = 0;
        if (res[i].cfg_known && res[i].cfg.n_virtio_mem) {
            res[i].n_vmem = bm_qmp_probe_virtio_mem(doms[i], res[i].vmem, BM_VIRTIO_MEM_MAX);
            if (res[i].n_vmem < 0)
                res[i].vmem_error = bm_strdup(bm_error_detail(res[i].n_vmem));
        }
    }
    if (o->json) {
        _cleanup_(json_object_putp) json_object *root = json_object_new_object();
        json_object *arr = json_object_new_array();
        for (size_t i = 0; i < n; i++)
            json_object_array_add(arr, result_json(&res[i]));
        json_object_object_add(root, "domains", arr);
        puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
    } else {
        print_table(res, n);
        print_vmem_notes(res, n);
    }
    int ret = BM_EXIT_OK;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < o->n_reqs; k++) {
            int r = meets(&res[i], o->reqs[k], o->uri);
            if (r < 0)
                ret = bm_report_failure("verify", res[i].name, r);
        }
    for (size_t i = 0; i < n; i++) {
        free(res[i].path);
        free(res[i].error);
        free(res[i].vmem_error);
        if (res[i].n_vmem > 0)
            bm_qmp_virtio_mem_clear(res[i].vmem, (size_t)res[i].n_vmem < BM_VIRTIO_MEM_MAX
                                                     ? (size_t)res[i].n_vmem : BM_VIRTIO_MEM_MAX);
    }
    return ret;
}

static void free_domains(virDomainPtr *doms)
{
    for (size_t i = 0; doms && doms[i]; i++)
        virDomainFree(doms[i]);
    free(doms);
}

static int run(BmGlobal *g, int argc, char **argv)
{
    VerifyOptions o = {.fopts = {.sg_bit = BM_SG_DEFAULT_BIT}, .uri = g->uri};
    int r = parse_options(g, argc, argv, &o);
    _cleanup_free_ Requirement *reqs = o.reqs;
    if (r != 0)
        return r > 0 ? BM_EXIT_OK : bm_report_failure("verify", NULL, r);
    /* libvirt lets only read-write connections use the QEMU monitor */
    _cleanup_(virConnectClosep) virConnectPtr conn = NULL;
    if ((r = bm_cli_writable(g, "asking the QEMU monitor", "'status' works read-only")) < 0 ||
        (r = bm_cli_connect(g, false, &conn)) < 0)
        return bm_report_failure("verify", NULL, r);
    _cleanup_(bm_strv_freep) char **names = NULL;
    virDomainPtr *doms = NULL;
    const char *failed;
    r = lookup_all(conn, argv + optind, (size_t)(argc - optind), &names, &doms, &failed);
    int ret = r < 0 ? bm_report_failure("verify", failed, r) : verify(&o, names, doms);
    free_domains(doms);
    return ret;
}

const BmVerb bm_verb_verify = {
    .name = "verify",
    .options = options,
    .help_column = 24,
    .help_after = help_after,
    .run = run,
    .synopsis = "verify [DOMAIN...] [--require FEATURE[,FEATURE]] [--sg-bit=N]\n"
                "       [--json]",
    .summary = "Show which virtio-balloon features each domain negotiated (SG, stats, ...),\n"
               "whether ioeventfd is on and its virtio-mem devices, from QEMU's own view.",
    .brief = "the balloon features QEMU negotiated (SG)",
};
