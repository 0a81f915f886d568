/* balloonmgr list [--all] [--id|--uuid] [--virtio-mem]: domain names (or IDs, UUIDs), one per
 * line (for scripts and bash completion); --virtio-mem: those with a virtio-mem device. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "conn.h"
#include "domxml.h"
#include "error.h"

static const BmOptDef options[] = {
    {'a', "all", 'a', NULL, "include domains that are not running", BM_COMPLETE_NONE, NULL},
    {0, "id", 'I', NULL, "print their IDs instead (running domains only)", BM_COMPLETE_NONE, NULL},
    {0, "uuid", 'U', NULL, "print their UUIDs instead", BM_COMPLETE_NONE, NULL},
    {0, "virtio-mem", 'M', NULL, "only those with a virtio-mem device", BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_HELP("show this help"),
    BM_OPTDEF_END,
};

/* Whether the domain key (a name, ID or UUID as key says) has a virtio-mem device in its XML
 * (the live one of a running domain). A domain gone since it was listed has none. */
static bool has_virtio_mem(virConnectPtr conn, const char *k, BmDomainKey key)
{
    _cleanup_(virDomainFreep) virDomainPtr dom = NULL;
    _cleanup_free_ char *xml = NULL;
    BmBalloonConfig cfg;
    int r = key == BM_KEY_NAME ? bm_conn_lookup_name(conn, k, &dom) : bm_conn_lookup(conn, k, &dom);
    return r >= 0 && bm_conn_domain_xml(dom, false, &xml) >= 0 &&
           bm_domxml_parse_balloon(xml, &cfg) >= 0 && cfg.n_virtio_mem > 0;
}

static int run(BmGlobal *g, int argc, char **argv)
{
    bool all = false, vmem = false;
    BmDomainKey key = BM_KEY_NAME;
    int c;
    while ((c = bm_cli_getopt(g, &bm_verb_list, argc, argv)) != -1) {
        switch (c) {
        case 'a': all = true; break;
        case 'I': key = BM_KEY_ID; break;
        case 'U': key = BM_KEY_UUID; break;
        case 'M': vmem = true; break;
        case BM_OPT_HELP: bm_verb_usage(&bm_verb_list, stdout); return BM_EXIT_OK;
        default: return bm_report_failure("list", NULL, -EINVAL); /* bm_cli_getopt()'s */
        }
    }
    if (optind < argc)
        return bm_report_failure("list", NULL,
                                 bm_error(-EINVAL, "unexpected argument '%s'", argv[optind]));

    _cleanup_(virConnectClosep) virConnectPtr conn = NULL;
    int r = bm_cli_connect(g, true, &conn);
    if (r < 0)
        return bm_report_failure("list", NULL, r);
    _cleanup_(bm_strv_freep) char **names = NULL;
    r = bm_conn_list_keys(conn, all, key, &names);
    if (r < 0)
        return bm_report_failure("list", NULL, bm_as_failure(r));
    /* one name a line: control characters (a newline in a name would make two) and bytes
     * that are not UTF-8 as \xNN, as the other verbs show names */
    for (size_t i = 0; names[i]; i++) {
        if (vmem && !has_virtio_mem(conn, names[i], key))
            continue;
        _cleanup_free_ char *shown = bm_escape_name(names[i]);
        puts(shown);
    }
    return BM_EXIT_OK;
}

const BmVerb bm_verb_list = {
    .name = "list",
    .options = options,
    .help_column = 20,
    .run = run,
    .synopsis = "list [--all] [--id|--uuid] [--virtio-mem]",
    .summary = "Print the names of the running domains (--all: of every domain), one a line\n"
               "(--id, --uuid: their IDs or UUIDs, in the order of their names).",
    .brief = "the names of the domains",
};
