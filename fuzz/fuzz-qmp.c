/* Fuzzes every QMP reply parser of src/qmp.h on the same text, and feeds a parsed
 * x-query-virtio-status to bm_features_decide. Errors must be one of the documented codes;
 * what a parser returns must be complete (NULL-terminated lists, NUL-terminated names). */
#include <errno.h>

#include "feature.h"
#include "fuzz.h"
#include "qmp.h"
#include "util.h"

static void check_code(int r, const char *what)
{
    fuzz_assert(r >= 0 || r == -ENOSYS || r == -ENODEV || r == -ENOENT || r == -EIO || r == -EINVAL,
                "%s returned %d", what, r);
}

static void check_features(const BmVirtioFeatures *f)
{
    fuzz_assert(f->names, "feature names not allocated");
    size_t n = 0;
    while (f->names[n])
        n++;
    fuzz_assert(n == f->n_names, "%zu names, n_names %zu", n, f->n_names);
    for (size_t i = 0; i < n; i++)
        fuzz_assert(!strchr(f->names[i], ':'), "feature name '%s' keeps its description",
                    f->names[i]);
}

static void check_report(const BmFeatureReport *rep)
{
    for (int f = 0; f < BM_FEATURE_COUNT; f++) {
        BmFeatureState s = rep->feature[f].state;
        fuzz_assert(s >= BM_FEAT_NEGOTIATED && s <= BM_FEAT_UNKNOWN, "feature %d state %d", f, s);
        fuzz_assert(bm_feature_state_name(s) != NULL, "state name");
        if (s != BM_FEAT_NEGOTIATED)
            fuzz_assert(rep->feature[f].reason, "feature %d: verdict without a reason", f);
    }
    fuzz_assert(bm_switch_state_name(rep->ioeventfd) != NULL, "switch name");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *reply = fuzz_cstr(data, size);

    int checked = bm_qmp_check_reply(reply);
    check_code(checked, "bm_qmp_check_reply");
    fuzz_assert(checked <= 0, "bm_qmp_check_reply returned %d", checked);

    char *path = NULL;
    int r = bm_qmp_parse_virtio_list(reply, "virtio-balloon", &path);
    check_code(r, "bm_qmp_parse_virtio_list");
    fuzz_assert((r == 0) == (path != NULL), "path %p with %d", (void *)path, r);
    if (checked < 0)
        fuzz_assert(r == checked, "virtio list %d, reply check %d", r, checked);
    free(path);

    BmVirtioStatus st;
    r = bm_qmp_parse_virtio_status(reply, &st);
    check_code(r, "bm_qmp_parse_virtio_status");
    if (r == 0) {
        check_features(&st.host);
        check_features(&st.guest);
        fuzz_assert(memchr(st.name, '\0', sizeof(st.name)), "name not terminated");
        static const BmFeatureOptions opts[] = {
            {.sg_bit = BM_SG_DEFAULT_BIT}, {.sg_bit = -1}, {.sg_bit = 63}, {.sg_bit = 64}};
        for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
            BmFeatureReport rep;
            bm_features_decide(&st, BM_VIRTIO_OK, &opts[i], &rep);
            check_report(&rep);
            fuzz_assert(rep.driver_ok == st.driver_ok, "driver_ok");
            bm_features_decide_ioeventfd(checked, st.broken, checked, &rep);
            check_report(&rep);
        }
        BmFeatureReport rep;
        bm_features_decide(&st, BM_VIRTIO_OK, NULL, &rep);
        check_report(&rep);
    } else {
        fuzz_assert(!st.host.names && !st.guest.names, "failure leaves feature lists");
    }
    bm_virtio_status_clear(&st);

    char **names = NULL;
    r = bm_qmp_parse_name_list(reply, &names);
    check_code(r, "bm_qmp_parse_name_list");
    if (r >= 0) {
        int n = 0;
        while (names[n])
            n++;
        fuzz_assert(n == r, "%d names, returned %d", n, r);
        for (int i = 0; i < n; i++)
            free(names[i]);
        free(names);
    }

    bool b = false;
    r = bm_qmp_parse_qom_get_bool(reply, &b);
    check_code(r, "bm_qmp_parse_qom_get_bool");
    BmFeatureReport rep = {.ioeventfd = BM_SWITCH_UNKNOWN};
    bm_features_decide_ioeventfd(r, b, bm_qmp_check_reply(reply), &rep);
    fuzz_assert(rep.ioeventfd != BM_SWITCH_UNKNOWN || rep.ioeventfd_reason, "ioeventfd reason");
    fuzz_assert(rep.ioeventfd_source == BM_IOEVENTFD_SOURCE_UNKNOWN || r == 0,
                "an ioeventfd source without the property");

    /* guest-stats: every statistic absent or within what a guest may report (2^63-1) */
    BmStarveStats gs;
    r = bm_qmp_parse_guest_stats(reply, &gs);
    check_code(r, "bm_qmp_parse_guest_stats");
    const uint64_t v[] = {gs.oom_kills, gs.alloc_stalls, gs.async_scan_bytes, gs.direct_scan_bytes,
                          gs.async_reclaim_bytes, gs.direct_reclaim_bytes};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        fuzz_assert(!bm_present(v[i]) || (v[i] <= BM_COUNT_MAX && r >= 0),
                    "guest-stats value %zu: %llu (r %d)", i, (unsigned long long)v[i], r);

    free(reply);
    return 0;
}
