/* balloonmgr configure DOMAIN [--sg on|off] [--ioeventfd on|off] [--stats-period SEC]
 * [--autodeflate on|off] [--free-page-reporting on|off] [--live] [--config] [--probe]:
 * change the balloon device safely. Everything is checked before anything is changed; the
 * persistent definition is replaced in one libvirt call, so it is either all new or untouched. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "balloon.h"
#include "cli.h"
#include "conn.h"
#include "domxml.h"
#include "emulator.h"
#include "error.h"
#include "qmp.h"

static const BmOptDef options[] = {
    {0, "sg", 's', " on|off", "QEMU property sg (a QEMU with the SG patch)",
     BM_COMPLETE_WORDS, "on off"},
    {0, "ioeventfd", 'i', " on|off", "virtio-balloon-pci property ioeventfd",
     BM_COMPLETE_WORDS, "on off"},
    {0, "autodeflate", 'a', " on|off", "deflate on guest OOM (memballoon autodeflate)",
     BM_COMPLETE_WORDS, "on off"},
    {0, "free-page-reporting", 'f', " on|off", "memballoon freePageReporting", BM_COMPLETE_WORDS,
     "on off"},
    {0, "stats-period", 'p', " SECONDS", "guest statistics period (0 disables)",
     BM_COMPLETE_WORDS, "0 1 2 5 10"},
    {0, "live", 'L', NULL, "change the running domain only (stats period)", BM_COMPLETE_NONE,
     NULL},
    {0, "config", 'C', NULL, "change the persistent definition only", BM_COMPLETE_NONE, NULL},
    {0, "probe", 'P', NULL, "ask a QEMU monitor for sg/ioeventfd (taints)",
     BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_HELP("show this help"),
    BM_OPTDEF_END,
};

static const char help_after[] =
    "\nDevice settings change the definition and apply at the next start; sg and\n"
    "ioeventfd only where the domain's QEMU has them (asked without a monitor).\n";

static int parse_onoff(const char *opt, const char *v, BmTristate *ret)
{
    if (strcmp(v, "on") == 0)
        *ret = BM_TRI_ON;
    else if (strcmp(v, "off") == 0)
        *ret = BM_TRI_OFF;
    else {
        char buf[128];
        return bm_error(-EINVAL, "--%s '%s': expected on or off", opt,
                        bm_printable(v, buf, sizeof(buf)));
    }
    return 0;
}

/* QEMU's device type for a memballoon model (the PCI proxy carries ioeventfd). */
static const char *qemu_type(const char *model)
{
    if (strcmp(model, "virtio-transitional") == 0)
        return "virtio-balloon-pci-transitional";
    if (strcmp(model, "virtio-non-transitional") == 0)
        return "virtio-balloon-pci-non-transitional";
    return "virtio-balloon-pci";
}

/* Checks that the QEMU binary emulator has property prop on type, with probe by asking the
 * QEMU monitor of a running domain that uses the same binary (this one first; libvirt marks
 * it tainted), else by running the binary (a connection to this machine only). Returns 0 if
 * it has, -ENOTSUP if it has not, or another -errno when it cannot be checked; the reason is
 * set. */
static int check_property(bool probe, virConnectPtr conn, virDomainPtr self, bool self_active,
                          const char *emulator, const char *type, const char *prop)
{
    bool has = false;
    int r;
    if (!probe) {
        if (!bm_conn_is_local(conn))
            return bm_error(-EREMOTE, "QEMU %s is on the libvirt host, not here: --probe asks "
                            "the QEMU monitor of a running domain that uses it (libvirt marks "
                            "that domain tainted); nothing changed", emulator);
        r = bm_emulator_device_has_property(emulator, type, prop, &has);
        if (r < 0)
            return bm_error_prefix(r, "cannot check that QEMU %s has %s property '%s'", emulator,
                                   type, prop);
        if (!has)
            return bm_error(-ENOTSUP,
                            "QEMU %s has no %s property '%s': a QEMU with that option is "
                            "needed; nothing changed", emulator, type, prop);
        return 0;
    }
    _cleanup_(bm_strv_freep) char **names = NULL;
    r = bm_conn_list_names(conn, false, &names);
    if (r < 0)
        return r;
    /* this domain first, then the others */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; names[i]; i++) {
            bool is_self = strcmp(names[i], virDomainGetName(self)) == 0;
            if ((pass == 0) != is_self || (is_self && !self_active))
                continue;
            _cleanup_(virDomainFreep) virDomainPtr dom = NULL;
            _cleanup_free_ char *xml = NULL, *emu = NULL;
            if (bm_conn_lookup_name(conn, names[i], &dom) < 0 || bm_conn_domain_xml(dom, false, &xml) < 0 ||
                bm_domxml_emulator(xml, &emu) < 0 || strcmp(emu, emulator) != 0)
                continue;
            r = bm_qmp_device_has_property(dom, type, prop, &has);
            if (r < 0) {
                return bm_error_prefix(r, "cannot ask QEMU %s (domain '%s') about '%s'",
                                       emulator, names[i], prop);
            }
            if (!has)
                return bm_error(-ENOTSUP,
                                "QEMU %s has no %s property '%s': a QEMU with that option is "
                                "needed; nothing changed", emulator, type, prop);
            return 0;
        }
    }
    return bm_error(-EAGAIN,
                    "cannot check that QEMU %s has %s property '%s': no running domain uses "
                    "it (start one and retry); nothing changed", emulator, type, prop);
}

typedef struct {
    BmBalloonEdit edit;
    int period;                  /* -1: unchanged */
    bool live, config;
    bool probe;                  /* --probe: ask a running QEMU's monitor */
    bool device;                 /* a device setting is changed */
    const char *name;
    /* set once the domain is known */
    virConnectPtr conn;
    virDomainPtr dom;
    bool active, persistent, period_live, period_config;
} Configure;

/* The options, checked. Returns 0 to go on, 1 after printing --help, or -EINVAL with the
 * detail (reported naming o->name once it is known). */
static int parse_options(BmGlobal *g, int argc, char **argv, Configure *o)
{
    BmBalloonEdit *edit = &o->edit;
    int c;
    while ((c = bm_cli_getopt(g, &bm_verb_configure, argc, argv)) != -1) {
        int r = 0;
        unsigned v;
        switch (c) {
        case 's': r = parse_onoff("sg", optarg, &edit->sg); break;
        case 'i': r = parse_onoff("ioeventfd", optarg, &edit->ioeventfd); break;
        case 'a': r = parse_onoff("autodeflate", optarg, &edit->autodeflate); break;
        case 'f': r = parse_onoff("free-page-reporting", optarg, &edit->free_page_reporting); break;
        case 'p':
            if (bm_cli_parse_seconds(optarg, 86400, &v) < 0)
                r = bm_error(-EINVAL, "--stats-period '%s': expected seconds from 0 to 86400",
                             optarg);
            o->period = (int)v;
            break;
        case 'L': o->live = true; break;
        case 'C': o->config = true; break;
        case 'P': o->probe = true; break;
        case BM_OPT_HELP: bm_verb_usage(&bm_verb_configure, stdout); return 1;
        default: return -EINVAL; /* bm_cli_getopt() stored why */
        }
        if (r < 0)
            return r;
    }
    if (argc - optind != 1)
        return bm_error(-EINVAL, "expected one DOMAIN (see 'balloonmgr configure --help')");
    o->name = argv[optind];
    o->device = edit->sg != BM_TRI_UNSET || edit->ioeventfd != BM_TRI_UNSET ||
                edit->autodeflate != BM_TRI_UNSET || edit->free_page_reporting != BM_TRI_UNSET;
    if (!o->device && o->period < 0)
        return bm_error(-EINVAL, "nothing to change: give at least one setting");
    if (o->device && o->live && !o->config)
        return bm_error(-EINVAL, "device settings cannot change live: they apply on the next "
                        "start (use --config or neither)");
    return 0;
}

/* The domain on o->conn, and which of its sides the settings change. Returns 0, or -errno
 * with the detail (-ESRCH, libvirt's "operation invalid" in conn.c: not running, transient). */
static int open_domain(Configure *o)
{
    int r;
    if ((r = bm_conn_lookup(o->conn, o->name, &o->dom)) < 0 ||
        (r = bm_conn_domain_state(o->dom, &o->active, &o->persistent)) < 0)
        return r;
    o->name = virDomainGetName(o->dom); /* given as an ID or UUID: its name from here on */
    o->period_live = o->period >= 0 && (o->live || (!o->config && o->active));
    o->period_config = o->period >= 0 && (o->config || (!o->live && o->persistent));
    if (o->period_live && !o->active)
        return bm_error(-ESRCH, "--live: domain is not running");
    if ((o->device || o->period_config) && !o->persistent)
        return bm_error(-ESRCH, "domain is transient: it has no persistent definition to change");
    /* the stats period needs a balloon (libvirt says so only after the device changes) */
    if (o->period >= 0) {
        _cleanup_free_ char *cur_xml = NULL;
        BmBalloonConfig cur;
        if (bm_conn_domain_xml(o->dom, !o->period_live, &cur_xml) >= 0 &&
            bm_domxml_parse_balloon(cur_xml, &cur) >= 0 && strcmp(cur.model, "none") == 0)
            return bm_error(-EINVAL, "--stats-period: memballoon model is 'none': the domain "
                            "has no balloon");
    }
    return 0;
}

/* Step 1: the new definition, and what it needs checked: nothing is changed yet. Returns 0, or
 * -errno with the detail: -EINVAL for a definition the change does not fit, -ENOPROTOOPT when
 * QEMU lacks a property set (or has none), else a runtime failure. */
static int prepare_device(const Configure *o, char **ret_new_xml, char **ret_changes)
{
    _cleanup_free_ char *xml = NULL;
    BmBalloonConfig cfg;
    int r;
    if ((r = bm_conn_domain_xml(o->dom, true, &xml)) < 0 || (r = bm_domxml_parse_balloon(xml, &cfg)) < 0 ||
        (r = bm_domxml_edit_balloon(xml, &o->edit, ret_new_xml, ret_changes)) < 0)
        return r == -EINVAL ? r : bm_as_failure(r);
    const char *props[] = {o->edit.sg != BM_TRI_UNSET ? "sg" : NULL,
                           o->edit.ioeventfd != BM_TRI_UNSET ? "ioeventfd" : NULL};
    _cleanup_free_ char *emulator = NULL;
    for (size_t i = 0; i < BM_ARRAY_SIZE(props); i++) {
        if (!props[i])
            continue;
        if (!emulator && (r = bm_domxml_emulator(xml, &emulator)) < 0) {
            /* a driver without QEMU (the test driver): there is no device property to set */
            const char *type = virConnectGetType(o->conn);
            return bm_error(-ENOPROTOOPT, "--%s is a QEMU device property and this domain "
                            "has no QEMU (libvirt driver '%s': %s); nothing changed", props[i],
                            type ? type : "unknown", bm_error_detail(r));
        }
        r = check_property(o->probe, o->conn, o->dom, o->active, emulator, qemu_type(cfg.model), props[i]);
        if (r < 0) {
            r = bm_error_prefix(r, "--%s", props[i]);
            return r == -ENOTSUP ? bm_error(-ENOPROTOOPT, "%s", bm_error_detail(r)) : bm_as_failure(r);
        }
    }
    return 0;
}

/* Step 2: the persistent definition, in one call. Returns 0, or -errno with the detail (a
 * runtime failure). */
static int define(const Configure *o, const char *new_xml, char *changes)
{
    _cleanup_free_ char *name = bm_escape_name(o->name); /* one line each, as list prints it */
    if (!changes || !*changes) {
        if (o->device)
            printf("%s: device settings already as requested\n", name);
        return 0;
    }
    int r = bm_conn_define(o->conn, new_xml);
    if (r < 0) {
        r = bm_as_failure(r);
        return bm_error(r, "%s; nothing changed", bm_error_detail(r));
    }
    for (char *save = NULL, *l = strtok_r(changes, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        printf("%s: %s (persistent; applies on the next start)\n", name, l);
    return 0;
}

/* Step 3: the stats period. Returns 0, or -errno with the detail (a runtime failure). */
static int set_period(const Configure *o, bool device_changed)
{
    _cleanup_free_ char *cur_xml = NULL;
    BmBalloonConfig cur = {.stats_period_s = -1};
    if (bm_conn_domain_xml(o->dom, !o->period_live, &cur_xml) >= 0)
        bm_domxml_parse_balloon(cur_xml, &cur);
    int r = bm_balloon_set_stats_period(o->dom, o->period, o->period_live, o->period_config);
    if (r < 0) {
        r = bm_as_failure(r);
        return bm_error(r, "%s%s", bm_error_detail(r),
                        device_changed ? " (the device settings above were changed)" : "");
    }
    char old[32] = "unknown";
    if (cur.stats_period_s >= 0)
        snprintf(old, sizeof(old), "%d s", cur.stats_period_s);
    _cleanup_free_ char *name = bm_escape_name(o->name);
    printf("%s: stats period: %s -> %d s (%s)\n", name, old, o->period,
           o->period_live && o->period_config ? "live and persistent" : o->period_live ? "live" : "persistent");
    return 0;
}

/* The steps, each failure reported here, once: the domain's named from the lookup on. Returns
 * the exit status. */
static int configure(const BmGlobal *g, Configure *o)
{
    int r;
    if ((r = bm_cli_writable(g, "changing a domain", NULL)) < 0 ||
        (r = bm_cli_connect(g, false, &o->conn)) < 0)
        return bm_report_failure("configure", NULL, r);
    _cleanup_free_ char *new_xml = NULL, *changes = NULL;
    if ((r = open_domain(o)) < 0 || (o->device && (r = prepare_device(o, &new_xml, &changes)) < 0) ||
        (r = define(o, new_xml, changes)) < 0 ||
        (o->period >= 0 && (r = set_period(o, changes && *changes)) < 0))
        return bm_report_failure("configure", o->name, r);
    return BM_EXIT_OK;
}

static int run(BmGlobal *g, int argc, char **argv)
{
    Configure o = {.edit = {BM_TRI_UNSET, BM_TRI_UNSET, BM_TRI_UNSET, BM_TRI_UNSET}, .period = -1};
    int ret = parse_options(g, argc, argv, &o);
    if (ret != 0) /* the options' failures before DOMAIN name none */
        ret = ret > 0 ? BM_EXIT_OK : bm_report_failure("configure", o.name, ret);
    else
        ret = configure(g, &o);
    if (o.dom)
        virDomainFree(o.dom);
    if (o.conn)
        virConnectClose(o.conn);
    return ret;
}

const BmVerb bm_verb_configure = {
    .name = "configure",
    .options = options,
    .help_column = 32,
    .help_after = help_after,
    .run = run,
    .synopsis = "configure DOMAIN [--sg on|off] [--ioeventfd on|off]\n"
                "       [--stats-period SEC] [--autodeflate on|off]\n"
                "       [--free-page-reporting on|off] [--live] [--config] [--probe]",
    .summary = "Change a domain's balloon device: SG and ioeventfd, autodeflate, free page\n"
               "reporting, the statistics period. Checked before anything changes.",
    .brief = "a domain's balloon device",
};
