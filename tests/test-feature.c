/* Feature verdicts from x-query-virtio-status, driven by tests/data/qmp/verdicts.txt, and the
 * reasons for unknown. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "feature.h"
#include "fixture.h"
#include "qmp.h"
#include "tap.h"
#include "util.h"

static void check_line(char *line)
{
    char *save = NULL;
    char *file = strtok_r(line, " ", &save);
    char rel[512];
    snprintf(rel, sizeof(rel), "qmp/%s", file);
    _cleanup_free_ char *reply = fixture_read(rel);
    BmVirtioStatus st;
    if (!reply || bm_qmp_parse_virtio_status(reply, &st) < 0) {
        ok(0, "%s parses", file);
        return;
    }
    BmFeatureOptions opts = {.sg_bit = BM_SG_DEFAULT_BIT};
    BmFeatureReport rep;
    char *words[32];
    int n = 0;
    for (char *w = strtok_r(NULL, " ", &save); w && n < 32; w = strtok_r(NULL, " ", &save))
        if (*w)
            words[n++] = w;
    for (int i = 0; i < n; i++)
        if (strncmp(words[i], "sg-bit=", 7) == 0)
            opts.sg_bit = atoi(words[i] + 7);
    bm_features_decide(&st, BM_VIRTIO_OK, &opts, &rep);
    for (int i = 0; i < n; i++) {
        char *eq = strchr(words[i], '=');
        if (!eq)
            continue;
        *eq = '\0';
        const char *key = words[i], *want = eq + 1;
        if (strcmp(key, "sg-bit") == 0)
            continue;
        if (strcmp(key, "driver_ok") == 0) {
            ok(rep.driver_ok == (atoi(want) == 1), "%s (sg-bit %d): driver_ok=%s", file, opts.sg_bit, want);
        } else if (strcmp(key, "sg-evidence") == 0) {
            is_str(rep.feature[BM_FEATURE_SG].evidence, want, "%s: SG evidence", file);
        } else {
            int f = bm_feature_from_key(key);
            ok(f >= 0, "feature '%s' known", key);
            if (f >= 0)
                is_str(bm_feature_state_name(rep.feature[f].state), want, "%s (sg-bit %d): %s",
                       file, opts.sg_bit, key);
        }
    }
    bm_virtio_status_clear(&st);
}

/* every line of tests/data/qmp/verdicts.txt */
static void test_verdicts(void)
{
    _cleanup_free_ char *verdicts = fixture_read("qmp/verdicts.txt");
    ok(verdicts != NULL, "verdicts.txt read");
    char *save = NULL;
    for (char *line = strtok_r(verdicts, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (line[0] != '#' && line[0])
            check_line(line);
}

/* reasons: no DRIVER_OK */
static void test_reason_no_driver(void)
{
    _cleanup_free_ char *nodrv = fixture_read("qmp/nodriver-virtio-status.json");
    BmVirtioStatus st;
    BmFeatureReport rep;
    BmFeatureOptions opts = {.sg_bit = BM_SG_DEFAULT_BIT};
    bm_qmp_parse_virtio_status(nodrv, &st);
    bm_features_decide(&st, BM_VIRTIO_OK, &opts, &rep);
    is_str(rep.feature[BM_FEATURE_STATS].reason, "driver not ready (no DRIVER_OK)",
           "no driver: stats unknown because the driver is not ready");
    is_str(rep.feature[BM_FEATURE_SG].reason, "the device does not offer it",
           "no driver: SG still definitely not offered by stock QEMU");
    ok(rep.feature[BM_FEATURE_STATS].not_ready && !rep.feature[BM_FEATURE_SG].not_ready,
       "no driver: the offered feature's verdict is not ready, the one not offered is final");
    bm_virtio_status_clear(&st);
}

/* reasons when there is no status to read */
static void test_reasons_without_status(void)
{
    BmFeatureReport rep;
    BmFeatureOptions opts = {.sg_bit = BM_SG_DEFAULT_BIT};
    static const struct {
        BmVirtioAvailability a;
        BmFeatureState state;
        const char *reason;
    } unavailable[] = {
        {BM_VIRTIO_NOT_RUNNING, BM_FEAT_UNKNOWN, "domain not running"},
        {BM_VIRTIO_NO_MONITOR, BM_FEAT_UNKNOWN, "libvirt driver without QEMU monitor"},
        {BM_VIRTIO_TOO_OLD, BM_FEAT_UNKNOWN, "QEMU too old for x-query-virtio-status (needs 7.2)"},
        {BM_VIRTIO_ERROR, BM_FEAT_UNKNOWN, "QEMU monitor query failed"},
        {BM_VIRTIO_NO_BALLOON, BM_FEAT_NOT_OFFERED, "no virtio-balloon device"},
    };
    for (size_t i = 0; i < BM_ARRAY_SIZE(unavailable); i++) {
        bm_features_decide(NULL, unavailable[i].a, &opts, &rep);
        ok(rep.feature[BM_FEATURE_SG].state == unavailable[i].state &&
               rep.feature[BM_FEATURE_STATS].state == unavailable[i].state,
           "%s: %s", unavailable[i].reason, bm_feature_state_name(unavailable[i].state));
        is_str(rep.feature[BM_FEATURE_SG].reason, unavailable[i].reason, "reason");
        ok(!rep.feature[BM_FEATURE_SG].not_ready, "  a final verdict (not asked again)");
        ok(rep.ioeventfd == BM_SWITCH_UNKNOWN, "ioeventfd unknown too");
    }
}

/* ioeventfd from qom-get */
static void test_ioeventfd(void)
{
    BmFeatureReport rep;
    BmFeatureOptions opts = {.sg_bit = BM_SG_DEFAULT_BIT};
    bm_features_decide(NULL, BM_VIRTIO_TOO_OLD, &opts, &rep);
    bm_features_decide_ioeventfd(-ENOENT, false, -ENOENT, &rep);
    ok(rep.ioeventfd == BM_SWITCH_UNSUPPORTED, "no ioeventfd property: unsupported");
    ok(rep.ioeventfd_source == BM_IOEVENTFD_SOURCE_UNKNOWN, "  no source");
    bm_features_decide_ioeventfd(0, true, 0, &rep);
    ok(rep.ioeventfd == BM_SWITCH_ON && !rep.ioeventfd_reason, "ioeventfd on");
    ok(rep.ioeventfd_source == BM_IOEVENTFD_SOURCE_UPSTREAM, "  with vectors: QEMU's own");
    is_str(bm_ioeventfd_source_name(rep.ioeventfd_source), "upstream", "  named upstream");
    bm_features_decide_ioeventfd(0, false, -ENOENT, &rep);
    ok(rep.ioeventfd == BM_SWITCH_OFF, "ioeventfd off");
    ok(rep.ioeventfd_source == BM_IOEVENTFD_SOURCE_LAB, "  without vectors: the lab's 7.2 patch");
    is_str(bm_ioeventfd_source_name(rep.ioeventfd_source), "lab", "  named lab");
    bm_features_decide_ioeventfd(0, true, -EIO, &rep);
    ok(rep.ioeventfd == BM_SWITCH_ON && rep.ioeventfd_source == BM_IOEVENTFD_SOURCE_UNKNOWN,
       "vectors unreadable: on, source unknown");
    ok(!bm_ioeventfd_source_name(rep.ioeventfd_source), "  no name");
    bm_features_decide_ioeventfd(-EIO, false, 0, &rep);
    ok(rep.ioeventfd == BM_SWITCH_UNKNOWN, "qom-get failure: unknown");
    ok(rep.ioeventfd_source == BM_IOEVENTFD_SOURCE_UNKNOWN, "  source unknown");
}

static void test_feature_keys(void)
{
    ok(bm_feature_from_key("sg") == BM_FEATURE_SG, "key sg");
    ok(bm_feature_from_key("bogus") == -EINVAL, "unknown key refused");
    for (int f = 0; f < BM_FEATURE_COUNT; f++)
        ok(bm_feature_from_key(bm_feature_key(f)) == f, "key round trip %s", bm_feature_key(f));
}

int main(void)
{
    test_verdicts();
    test_reason_no_driver();
    test_reasons_without_status();
    test_ioeventfd();
    test_feature_keys();
    return tap_done();
}
