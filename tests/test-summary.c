/* What status says of backed free memory and free page reporting: the free guest memory the
 * QEMU processes hold, which domains free page reporting would hand it back for, the configure
 * command, the host line and its JSON; the FPR/AUTODEFL cells. Plain structs, no libvirt. */
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "feature.h"
#include "summary.h"
#include "tap.h"
#include "util.h"
#include "yield.h"

#define MiB (1024ull * 1024)

/* A running guest of 1 GiB with a virtio balloon: it uses used_mib, its QEMU holds rss_mib. */
static BmDomain guest(char *name, uint64_t used_mib, uint64_t rss_mib)
{
    BmDomain d = {.name = name, .state = 1, .id = 1, .active = true, .max_bytes = 1024 * MiB,
                  .actual_bytes = 1024 * MiB, .available_bytes = 1024 * MiB,
                  .usable_bytes = (1024 - used_mib) * MiB, .unused_bytes = BM_ABSENT,
                  .disk_caches_bytes = BM_ABSENT, .rss_bytes = rss_mib * MiB, .swap_in_bytes = BM_ABSENT,
                  .swap_out_bytes = BM_ABSENT, .major_faults = BM_ABSENT, .minor_faults = BM_ABSENT,
                  .last_update_s = BM_ABSENT, .balloon_known = true};
    d.balloon = (BmBalloonConfig){.present = true, .autodeflate = BM_TRI_UNSET,
                                  .free_page_reporting = BM_TRI_UNSET, .stats_period_s = 5,
                                  .min_guarantee_bytes = BM_ABSENT, .memory_bytes = BM_ABSENT,
                                  .current_memory_bytes = BM_ABSENT};
    snprintf(d.balloon.model, sizeof(d.balloon.model), "virtio");
    return d;
}

static void test_backed_free(void)
{
    is_u64(bm_yield_backed_free_net(900 * MiB, 300 * MiB, 50 * MiB), 550 * MiB,
           "backed free: RSS - used - QEMU's own");
    is_u64(bm_yield_backed_free_net(320 * MiB, 300 * MiB, 50 * MiB), 0, "QEMU's own above the rest: 0");
    ok(!bm_present(bm_yield_backed_free_net(300 * MiB, 300 * MiB, 0)), "RSS not above use: unknown");
    ok(!bm_present(bm_yield_backed_free_net(BM_ABSENT, 300 * MiB, 0)), "RSS unknown: unknown");
    BmDomain d = guest("a", 300, 900);
    is_u64(bm_domain_backed_free_bytes(&d, 50 * MiB), 550 * MiB, "a domain's: from its RSS and stats");
    d.active = false;
    ok(!bm_present(bm_domain_backed_free_bytes(&d, 0)), "a domain not running: unknown");
}

static void test_would_return(void)
{
    BmDomain d = guest("a", 300, 900);
    ok(bm_summary_fpr_would_return(&d, 550 * MiB), "virtio balloon without reporting, 550 MiB: yes");
    ok(!bm_summary_fpr_would_return(&d, BM_SUMMARY_FPR_MIN_BYTES - 1), "below 64 MiB: no");
    ok(bm_summary_fpr_would_return(&d, BM_SUMMARY_FPR_MIN_BYTES), "64 MiB: yes");
    ok(!bm_summary_fpr_would_return(&d, BM_ABSENT), "unknown: no");
    d.balloon.free_page_reporting = BM_TRI_OFF;
    ok(bm_summary_fpr_would_return(&d, 550 * MiB), "freePageReporting='off': yes");
    d.balloon.free_page_reporting = BM_TRI_ON;
    ok(!bm_summary_fpr_would_return(&d, 550 * MiB), "freePageReporting='on' already: no");
    d = guest("a", 300, 900);
    d.balloon.vfio_hostdev = true;
    ok(!bm_summary_fpr_would_return(&d, 550 * MiB), "VFIO passthrough (pinned memory): no");
    d = guest("a", 300, 900);
    d.balloon.hugepages = true;
    ok(!bm_summary_fpr_would_return(&d, 550 * MiB), "hugepages: no");
    d = guest("a", 300, 900);
    snprintf(d.balloon.model, sizeof(d.balloon.model), "xen");
    ok(!bm_summary_fpr_would_return(&d, 550 * MiB), "a balloon that is not virtio: no");
    d = guest("a", 300, 900);
    d.balloon_known = false;
    ok(!bm_summary_fpr_would_return(&d, 550 * MiB), "XML not read: no");
    d = guest("a", 300, 900);
    d.active = false;
    ok(!bm_summary_fpr_would_return(&d, 550 * MiB), "not running: no");
}

static void test_command(void)
{
    static const struct {
        const char *name, *uri, *setting, *want, *what;
    } cases[] = {
        {"web1", NULL, NULL, "balloonmgr configure web1 --free-page-reporting on", "the configure command"},
        {"web 1", "qemu:///system", NULL,
         "balloonmgr -c qemu:///system configure 'web 1' --free-page-reporting on",
         "with the -c given, a name with a space quoted"},
        {"it's", NULL, NULL, "balloonmgr configure 'it'\\''s' --free-page-reporting on", "a quote in a name"},
        {"db1", NULL, "--autodeflate on", "balloonmgr configure db1 --autodeflate on", "another setting"},
        {"-x", NULL, NULL, "balloonmgr configure --free-page-reporting on -- -x", "a name like an option after --"},
        /* issue 31: printed as is (escaped once, for the shell), the command names that domain */
        {"caf\xc3\xa9", NULL, NULL, "balloonmgr configure 'caf\xc3\xa9' --free-page-reporting on",
         "UTF-8 kept, quoted"},
        {"a\\b", NULL, NULL, "balloonmgr configure 'a\\b' --free-page-reporting on",
         "a backslash kept in single quotes"},
        {"tab\tname", NULL, NULL, "balloonmgr configure $'tab\\x09name' --free-page-reporting on",
         "a control byte: $'...' with \\x09"},
        {"x'\n\\y", NULL, NULL, "balloonmgr configure $'x\\'\\x0a\\\\y' --free-page-reporting on",
         "a quote, a newline and a backslash: $'...'"},
        {"bad\xff", NULL, NULL, "balloonmgr configure $'bad\\xff' --free-page-reporting on",
         "invalid UTF-8: $'...'"},
        {"csi\xc2\x9b", NULL, NULL, "balloonmgr configure $'csi\\xc2\\x9b' --free-page-reporting on",
         "a C1 control: $'...'"},
    };
    for (size_t i = 0; i < BM_ARRAY_SIZE(cases); i++) {
        _cleanup_free_ char *got =
            cases[i].setting ? bm_summary_configure_command(cases[i].name, cases[i].uri, cases[i].setting)
                             : bm_summary_fpr_command(cases[i].name, cases[i].uri);
        is_str(got, cases[i].want, "%s", cases[i].what);
    }
    /* a name longer than any buffer is quoted whole */
    char long_name[2001];
    memset(long_name, 'a', 2000);
    long_name[0] = ' ';
    long_name[2000] = '\0';
    _cleanup_free_ char *got = bm_summary_fpr_command(long_name, NULL);
    ok(strstr(got, long_name) != NULL, "a name of 2000 bytes is quoted whole");
}

static void test_host(void)
{
    BmDomain doms[4] = {guest("a", 300, 900), guest("b", 200, 260), guest("c", 100, 600),
                        guest("d", 100, 100)};
    doms[2].balloon.free_page_reporting = BM_TRI_ON;
    BmSnapshot snap = {.domains = doms, .n_domains = 4};
    BmHostSummary s = {0};
    bm_summary_add_domains(&s, &snap);
    char line[512];
    ok(strstr(bm_summary_format(&s, line, sizeof(line)), ", backed free -, ") != NULL,
       "without QEMU's estimate: backed free -: %s", line);

    bm_summary_add_backed_free(&s, &snap, 40 * MiB);
    /* a: 900-300-40 = 560 (would return); b: 260-200-40 = 20; c: 600-100-40 = 460 (reports);
     * d: RSS not above use: unknown */
    is_u64(s.backed_free_bytes, 1040 * MiB, "host backed free: the sum of the known ones");
    is_u64(s.fpr_backed_free_bytes, 560 * MiB, "the part free page reporting would hand back");
    ok(s.n_fpr == 1 && s.backed_free_unknown == 1, "in one domain; one unknown");
    ok(strstr(bm_summary_format(&s, line, sizeof(line)),
              ", reclaimed 0 B, backed free 1 GiB (560 MiB in 1 domain without free page reporting), "
              "overcommit") != NULL,
       "host line: %s", line);
    json_object *o = bm_summary_json(&s);
    json_object *v;
    ok(json_object_object_get_ex(o, "backed_free_bytes", &v) && json_object_get_uint64(v) == 1040 * MiB,
       "JSON backed_free_bytes");
    ok(json_object_object_get_ex(o, "backed_free_without_reporting_bytes", &v) &&
           json_object_get_uint64(v) == 560 * MiB,
       "JSON backed_free_without_reporting_bytes");
    ok(json_object_object_get_ex(o, "qemu_overhead_bytes", &v) && json_object_get_uint64(v) == 40 * MiB,
       "JSON qemu_overhead_bytes");
    json_object_put(o);

    doms[0].balloon.free_page_reporting = BM_TRI_ON;
    s = (BmHostSummary){0};
    bm_summary_add_domains(&s, &snap);
    bm_summary_add_backed_free(&s, &snap, 40 * MiB);
    ok(strstr(bm_summary_format(&s, line, sizeof(line)), ", backed free 1 GiB, overcommit") != NULL,
       "every domain reports: no hint in the host line: %s", line);
}

static void test_cells(void)
{
    char b[32];
    is_str(bm_feature_config_cell(true, true, BM_FEAT_UNKNOWN, b, sizeof(b)), "on", "on, not known");
    is_str(bm_feature_config_cell(true, false, BM_FEAT_UNKNOWN, b, sizeof(b)), "off", "off, not known");
    is_str(bm_feature_config_cell(true, true, BM_FEAT_NEGOTIATED, b, sizeof(b)), "on+negotiated",
           "on and negotiated");
    is_str(bm_feature_config_cell(true, true, BM_FEAT_OFFERED, b, sizeof(b)), "on+offered",
           "on, the driver did not take it");
    is_str(bm_feature_config_cell(true, true, BM_FEAT_NOT_OFFERED, b, sizeof(b)), "on+not-offered",
           "on, the device does not offer it");
    is_str(bm_feature_config_cell(true, false, BM_FEAT_NOT_OFFERED, b, sizeof(b)), "off",
           "off and not offered: just off");
    is_str(bm_feature_config_cell(true, false, BM_FEAT_NEGOTIATED, b, sizeof(b)), "off+negotiated",
           "off in the XML yet negotiated: both shown");
    is_str(bm_feature_config_cell(false, false, BM_FEAT_NEGOTIATED, b, sizeof(b)), "-", "XML not known");
}

int main(void)
{
    test_backed_free();
    test_would_return();
    test_command();
    test_host();
    test_cells();
    return tap_done();
}
