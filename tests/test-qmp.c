/* QMP reply parsers on real QEMU 7.2 replies (tests/integration/lib/record-qmp.sh) and on broken
 * ones: every refusal has its exact reason (tests/data/qmp/bad.txt). */
#include <errno.h>
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
}

int main(void)
{
    test_virtio_list();
    test_virtio_status();
    test_bad_replies();
    test_property_lists();
    test_qom_get_and_errors();
    return tap_done();
}
