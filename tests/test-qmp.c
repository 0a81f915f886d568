/* QMP reply parsers on real QEMU 7.2 replies (tests/integration/lib/record-qmp.sh) and on broken
 * ones: every refusal has its exact reason (tests/data/qmp/bad.txt). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "conn.h"
#include "error.h"
#include "fixture.h"
#include "qmp.h"
#include "tap.h"

static int errno_named(const char *s)
{
    return strcmp(s, "EINVAL") == 0 ? -EINVAL : strcmp(s, "ENOSYS") == 0 ? -ENOSYS : 0;
}

/* x-query-virtio: the balloon found by name */
static void test_virtio_list(void)
{
    _cleanup_free_ char *list = fixture_read("qmp/x-query-virtio.json");
    _cleanup_free_ char *path = NULL;
    ok(bm_qmp_parse_virtio_list(list, "virtio-balloon", &path) == 0, "x-query-virtio parses");
    is_str(path, "/machine/peripheral/balloon0/virtio-backend", "balloon found by name");
    char *none = NULL;
    ok(bm_qmp_parse_virtio_list(list, "virtio-net", &none) == -ENODEV && !none,
       "absent device: -ENODEV");
    is_str(bm_error_detail(-ENODEV), "no virtio-net device", "and says so");
    ok(bm_qmp_parse_virtio_list("{\"return\": [{\"name\": 1}]}", "virtio-balloon", &none) == -EINVAL,
       "device without string name refused");
    ok(bm_qmp_parse_virtio_list("{\"return\": {}}", "virtio-balloon", &none) == -EINVAL,
       "non-array return refused");
}

/* x-query-virtio-status: features by name, unknown bits, DRIVER_OK */
static void test_virtio_status(void)
{
    _cleanup_free_ char *stock = fixture_read("qmp/stock-virtio-status.json");
    BmVirtioStatus st;
    ok(bm_qmp_parse_virtio_status(stock, &st) == 0, "stock status parses");
    is_str(st.name, "virtio-balloon", "name");
    ok(st.driver_ok && st.features_ok && !st.broken, "DRIVER_OK and FEATURES_OK");
    is_u64(st.host.n_names, 2, "host: two balloon features");
    is_str(st.host.names[0], "VIRTIO_BALLOON_F_PAGE_POISON", "names cut at ':'");
    ok(bm_virtio_features_has(&st.guest, "VIRTIO_BALLOON_F_STATS_VQ"), "guest acked STATS_VQ");
    ok(!bm_virtio_features_has(&st.guest, "VIRTIO_BALLOON_F_PAGE_POISON"), "guest did not ack PAGE_POISON");
    is_u64(st.host.unknown_bits, 1100585369600ull, "host unknown bits");
    is_u64(st.host.unknown_bits & 8, 0, "bit 3 is not among the unknown bits");
    bm_virtio_status_clear(&st);

    _cleanup_free_ char *nodrv = fixture_read("qmp/nodriver-virtio-status.json");
    ok(bm_qmp_parse_virtio_status(nodrv, &st) == 0, "no-driver status parses");
    ok(!st.driver_ok && st.guest.n_names == 0 && st.guest.unknown_bits == 0,
       "no DRIVER_OK, nothing acked, unknown-dev-features absent");
    bm_virtio_status_clear(&st);
}

/* virtio-mem as QEMU 7.2 says it: query-memory-devices beside a DIMM, every backend path of
 * x-query-virtio, and the backend's status with and without the guest's virtio_mem driver */
static void test_virtio_mem(void)
{
    _cleanup_free_ char *devs = fixture_read("qmp/memory-devices-qemu72.json");
    BmQemuVirtioMem v[2];
    ok(bm_qmp_parse_memory_devices(devs, v, 2) == 1, "one virtio-mem device (the DIMM skipped)");
    is_str(v[0].id, "virtiomem0", "its id: libvirt's alias");
    is_u64(v[0].size_bytes, 512ull << 20, "plugged 512 MiB");
    is_u64(v[0].requested_bytes, 512ull << 20, "requested 512 MiB");
    is_u64(v[0].max_bytes, 1ull << 30, "max 1 GiB");
    is_u64(v[0].block_bytes, 2ull << 20, "block 2 MiB");
    ok(v[0].node == 0 && !v[0].driver_known, "node 0, driver not read by the parser");
    ok(bm_qmp_parse_memory_devices(devs, v, 0) == 1, "counted beyond max too");

    _cleanup_free_ char *nodrv = fixture_read("qmp/memory-devices-nodriver-qemu72.json");
    ok(bm_qmp_parse_memory_devices(nodrv, v, 2) == 1 && v[0].size_bytes == 0 &&
           v[0].requested_bytes == 512ull << 20,
       "no driver: requested 512 MiB, nothing plugged");
    ok(bm_qmp_parse_memory_devices("{\"return\": []}", v, 2) == 0, "no memory device: 0");
    bm_error_reset();
    ok(bm_qmp_parse_memory_devices("{\"return\": [{\"type\": \"virtio-mem\", \"data\": "
                                   "{\"size\": -1, \"requested-size\": 0, \"max-size\": 0, "
                                   "\"block-size\": 0}}]}", v, 2) == -EINVAL,
       "a negative size refused");
    is_str(bm_error_detail(-EINVAL), "query-memory-devices: device 0: \"size\" out of range",
           "with its reason");
    ok(bm_qmp_parse_memory_devices("{\"return\": [{\"type\": \"virtio-mem\", \"data\": "
                                   "{\"size\": 0}}]}", v, 2) == -EINVAL,
       "a member missing refused");
    ok(bm_qmp_parse_memory_devices("{\"return\": [{\"data\": {}}]}", v, 2) == -EINVAL,
       "an entry without a type refused");

    _cleanup_free_ char *list = fixture_read("qmp/virtio-list-mem-qemu72.json");
    char **paths = NULL;
    ok(bm_qmp_parse_virtio_paths(list, "virtio-mem", &paths) == 1, "one virtio-mem backend");
    is_str(paths ? paths[0] : NULL, "/machine/peripheral/virtiomem0/virtio-backend", "its path");
    bm_strv_free(paths);
    ok(bm_qmp_parse_virtio_paths(list, "virtio-net", &paths) == 0 && paths && !paths[0],
       "none of a name: 0, an empty list");
    bm_strv_free(paths);

    _cleanup_free_ char *ok_status = fixture_read("qmp/virtio-mem-status-qemu72.json");
    _cleanup_free_ char *no_status = fixture_read("qmp/virtio-mem-nodriver-status-qemu72.json");
    BmVirtioStatus st;
    ok(bm_qmp_parse_virtio_status(ok_status, &st) == 0 && st.driver_ok && !strcmp(st.name, "virtio-mem"),
       "virtio-mem with its driver: DRIVER_OK");
    bm_virtio_status_clear(&st);
    ok(bm_qmp_parse_virtio_status(no_status, &st) == 0 && !st.driver_ok,
       "virtio-mem without its driver: no DRIVER_OK");
    bm_virtio_status_clear(&st);
}

/* every bad reply, with its reason (tests/data/qmp/bad.txt) */
static void test_bad_replies(void)
{
    BmVirtioStatus st;
    _cleanup_free_ char *bad = fixture_read("qmp/bad.txt");
    ok(bad != NULL, "bad.txt read");
    for (char *line = strtok(bad, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#')
            continue;
        char *file = line, *err = strchr(file, '\t');
        char *reason = err ? strchr(err + 1, '\t') : NULL;
        if (!reason)
            continue;
        *err++ = '\0';
        *reason++ = '\0';
        char rel[512];
        snprintf(rel, sizeof(rel), "qmp/%s", file);
        _cleanup_free_ char *reply = fixture_read(rel);
        ok(reply != NULL, "%s read", file);
        bm_error_reset();
        int r = bm_qmp_parse_virtio_status(reply, &st);
        ok(r == errno_named(err), "%s refused with %s (got %d)", file, err, r);
        is_str(bm_error_detail(r), reason, "%s reason", file);
        bm_virtio_status_clear(&st);
    }
}

/* property lists */
static void test_property_lists(void)
{
    _cleanup_free_ char *props = fixture_read("qmp/device-list-properties-balloon-pci.json");
    _cleanup_(bm_strv_freep) char **names = NULL;
    int n = bm_qmp_parse_name_list(props, &names);
    ok(n > 10, "device-list-properties: %d properties", n);
    bool fph = false, ioev = false, sg = false;
    for (int i = 0; i < n; i++) {
        fph |= strcmp(names[i], "free-page-hint") == 0;
        ioev |= strcmp(names[i], "ioeventfd") == 0;
        sg |= strcmp(names[i], "sg") == 0;
    }
    ok(fph && !ioev && !sg, "stock 7.2 virtio-balloon-pci: free-page-hint, no ioeventfd, no sg");

    _cleanup_free_ char *qom = fixture_read("qmp/qom-list-proxy.json");
    _cleanup_(bm_strv_freep) char **qnames = NULL;
    ok(bm_qmp_parse_name_list(qom, &qnames) > 10, "qom-list parses");
}

/* qom-get and QEMU errors */
static void test_qom_get_and_errors(void)
{
    _cleanup_free_ char *missing = fixture_read("qmp/qom-get-ioeventfd-missing.json");
    bool v;
    ok(bm_qmp_parse_qom_get_bool(missing, &v) == -ENOENT, "missing property: -ENOENT");
    is_str(bm_error_detail(-ENOENT),
           "QEMU: GenericError: Property 'virtio-balloon-pci.ioeventfd' not found", "reason");
    ok(bm_qmp_parse_qom_get_bool("{\"return\": true}", &v) == 0 && v, "qom-get true");
    ok(bm_qmp_parse_qom_get_bool("{\"return\": false}", &v) == 0 && !v, "qom-get false");
    ok(bm_qmp_parse_qom_get_bool("{\"return\": 1}", &v) == -EINVAL, "qom-get non-bool refused");
    ok(bm_qmp_parse_qom_get_bool("", &v) == -EINVAL, "empty reply refused");
    ok(bm_qmp_parse_qom_get_bool(NULL, &v) == -EINVAL, "NULL reply refused");
    ok(bm_qmp_parse_qom_get_bool("[]", &v) == -EINVAL, "array reply refused");
    ok(bm_qmp_check_reply("{\"error\": {\"class\": \"DeviceNotFound\", \"desc\": \"x\"}}") == -ENODEV,
       "DeviceNotFound maps to -ENODEV");
    ok(bm_qmp_check_reply("{\"error\": 5}") == -EIO, "odd error object still an error");
    /* qom-get vectors of the balloon's PCI proxy, as the lab's QEMU 7.2 and 10.0 answer it */
    ok(bm_qmp_check_reply("{\"error\": {\"class\": \"GenericError\", \"desc\": \"Property "
                          "'virtio-balloon-pci.vectors' not found\"}}") == -ENOENT,
       "qom-get vectors on QEMU 7.2 (the lab's ioeventfd): -ENOENT");
    ok(bm_qmp_check_reply("{\"return\": 2}") == 0, "qom-get vectors on QEMU 10.0: 0");
}

/* qom-get guest-stats: Linux 6.12's starvation statistics, as QEMU 10 sends them for a 6.12
 * guest (guest-stats-*.json: recorded by test-starve; synth-*: the 6.12 one with the six as QEMU sends what a guest never sent), for an older guest (named, never sent:
 * 2^64-1) and as QEMU 7.2 sends them (not named); and hostile replies */
static void test_guest_stats(void)
{
    BmStarveStats s;
    _cleanup_free_ char *q10 = fixture_read("qmp/guest-stats-qemu10-linux612.json");
    ok(bm_qmp_parse_guest_stats(q10, &s) == 0, "QEMU 10, Linux 6.12: parses");
    ok(bm_present(s.oom_kills) && s.oom_kills >= 1, "an OOM kill (%" PRIu64 ")", s.oom_kills);
    ok(bm_present(s.alloc_stalls) && s.alloc_stalls >= 1, "allocation stalls (%" PRIu64 ")", s.alloc_stalls);
    ok(bm_present(s.async_scan_bytes) && bm_present(s.direct_scan_bytes) &&
           bm_present(s.async_reclaim_bytes) && bm_present(s.direct_reclaim_bytes) &&
           s.direct_reclaim_bytes <= s.direct_scan_bytes && s.async_reclaim_bytes <= s.async_scan_bytes,
       "scans and reclaims, each reclaim at most its scan");
    ok(s.direct_reclaim_bytes % 4096 == 0 && s.async_scan_bytes % 4096 == 0, "in bytes: whole pages");

    _cleanup_free_ char *old = fixture_read("qmp/synth-guest-stats-qemu10-linux61.json");
    ok(bm_qmp_parse_guest_stats(old, &s) == 0, "QEMU 10, Linux 6.1: parses");
    ok(!bm_present(s.oom_kills) && !bm_present(s.alloc_stalls) && !bm_present(s.direct_reclaim_bytes),
       "statistics the guest never sent (2^64-1) are absent, not 0");
    _cleanup_free_ char *q72 = fixture_read("qmp/guest-stats-qemu72.json");
    ok(bm_qmp_parse_guest_stats(q72, &s) == 0, "QEMU 7.2: parses");
    ok(!bm_present(s.oom_kills) && !bm_present(s.async_scan_bytes), "names it lacks are absent");

    static const struct {
        const char *reply;
        int r;
        const char *reason; /* NULL: parsed */
        uint64_t oom_kills;
    } cases[] = {
        {"{\"return\": {\"stats\": {\"stat-oom-kills\": 3}}}", 0, NULL, 3},
        {"{\"return\": {\"stats\": {\"stat-oom-kills\": -1}}}", 0, NULL, BM_ABSENT},
        {"{\"return\": {\"stats\": {\"stat-oom-kills\": 18446744073709551615}}}", 0, NULL, BM_ABSENT},
        {"{\"return\": {\"stats\": {\"stat-oom-kills\": 9223372036854775807}}}", 0, NULL,
         9223372036854775807ull},
        {"{\"return\": {\"stats\": {\"stat-oom-kills\": 9223372036854775808}}}", 0, NULL, BM_ABSENT},
        {"{\"return\": {\"stats\": {\"stat-oom-kills\": 1000000000000000000000000000000}}}", 0, NULL,
         BM_ABSENT},
        {"{\"return\": {\"stats\": {\"stat-oom-kills\": -1000000000000000000000000000000}}}", 0, NULL,
         BM_ABSENT},
        {"{\"return\": {\"stats\": {\"stat-oom-kills\": 1, \"stat-oom-kills\": 2}}}", 0, NULL, 2},
        {"{\"return\": {\"stats\": {}, \"last-update\": 0}}", 0, NULL, BM_ABSENT},
        {"{\"return\": {\"stats\": {\"stat-oom-kills\": 1.5}}}", -EINVAL,
         "qom-get guest-stats: \"stat-oom-kills\" is not an integer", BM_ABSENT},
        {"{\"return\": {\"stats\": {\"stat-oom-kills\": 1, \"stat-direct-reclaims\": \"4096\"}}}",
         -EINVAL, "qom-get guest-stats: \"stat-direct-reclaims\" is not an integer", BM_ABSENT},
        {"{\"return\": {\"stats\": {\"stat-alloc-stalls\": null}}}", -EINVAL,
         "qom-get guest-stats: \"stat-alloc-stalls\" is not an integer", BM_ABSENT},
        {"{\"return\": {\"stats\": {\"stat-async-scans\": {\"a\": 1}}}}", -EINVAL,
         "qom-get guest-stats: \"stat-async-scans\" is not an integer", BM_ABSENT},
        {"{\"return\": {\"stats\": [1, 2]}}", -EINVAL, "qom-get guest-stats: no \"stats\" object",
         BM_ABSENT},
        {"{\"return\": {\"last-update\": 5}}", -EINVAL, "qom-get guest-stats: no \"stats\" object",
         BM_ABSENT},
        {"{\"return\": [{\"stats\": {}}]}", -EINVAL,
         "qom-get guest-stats: \"return\" is not an object", BM_ABSENT},
        {"{\"return\": {\"stats\": {\"stat-oom-kills\": 1}}} x", -EINVAL, "QMP reply has trailing data",
         BM_ABSENT},
        {"{\"error\": {\"class\": \"GenericError\", \"desc\": \"Property 'virtio-balloon-device.guest-stats' "
         "not found\"}}", -ENOENT,
         "QEMU: GenericError: Property 'virtio-balloon-device.guest-stats' not found", BM_ABSENT},
    };
    for (size_t i = 0; i < BM_ARRAY_SIZE(cases); i++) {
        bm_error_reset();
        s = (BmStarveStats){1, 1, 1, 1, 1, 1};
        int r = bm_qmp_parse_guest_stats(cases[i].reply, &s);
        ok(r == cases[i].r, "guest-stats case %zu: %d (got %d)", i, cases[i].r, r);
        if (cases[i].reason)
            is_str(bm_error_detail(r), cases[i].reason, "guest-stats case %zu: the reason", i);
        is_u64(s.oom_kills, cases[i].oom_kills, "guest-stats case %zu: OOM kills", i);
        if (r < 0)
            ok(!bm_present(s.alloc_stalls) && !bm_present(s.direct_reclaim_bytes),
               "guest-stats case %zu: refused: nothing taken", i);
    }
}

int main(void)
{
    test_virtio_mem();
    test_virtio_list();
    test_virtio_status();
    test_bad_replies();
    test_property_lists();
    test_qom_get_and_errors();
    test_guest_stats();
    return tap_done();
}
