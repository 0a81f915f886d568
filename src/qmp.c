#include "qmp.h"

#include <errno.h>
#include <stddef.h>
#include <json-c/json.h>
#include <libvirt/libvirt-qemu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "error.h"
#include "util.h"

DEFINE_CLEANUP(json_object *, json_object_put)

int bm_qmp_command(virDomainPtr dom, const char *command, char **ret_reply)
{
    char *reply = NULL;
    if (BM_LV(virDomainQemuMonitorCommand)(dom, command, &reply, 0) < 0) {
        int r = bm_conn_error(NULL);
        if (r == -ENOTSUP)
            return bm_error(-ENOTSUP, "the libvirt driver has no QEMU monitor");
        return r;
    }
    *ret_reply = reply;
    return 0;
}

/* Parses reply text; on success *ret_obj is the whole object and *ret_return its "return". */
static int parse(const char *reply, json_object **ret_obj, json_object **ret_return)
{
    if (!reply)
        return bm_error(-EINVAL, "empty QMP reply");
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return bm_error(-ENOMEM, "out of memory");
    json_tokener_set_flags(tok, JSON_TOKENER_VALIDATE_UTF8); /* QMP is UTF-8 */
    size_t len = strlen(reply);
    json_object *o = json_tokener_parse_ex(tok, reply, (int)(len > INT32_MAX ? INT32_MAX : len));
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t used = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!o || jerr != json_tokener_success) {
        json_object_put(o);
        return bm_error(-EINVAL, "QMP reply is not JSON: %s",
                        jerr == json_tokener_continue ? "truncated"
                                                      : json_tokener_error_desc(jerr));
    }
    for (; used < len; used++)
        if (!strchr(" \t\r\n", reply[used])) {
            json_object_put(o);
            return bm_error(-EINVAL, "QMP reply has trailing data");
        }
    if (!json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return bm_error(-EINVAL, "QMP reply is not a JSON object");
    }

    json_object *err;
    if (json_object_object_get_ex(o, "error", &err)) {
        json_object *cls = NULL, *desc = NULL;
        json_object_object_get_ex(err, "class", &cls);
        json_object_object_get_ex(err, "desc", &desc);
        const char *c = json_object_is_type(cls, json_type_string) ? json_object_get_string(cls) : "?";
        const char *d =
            json_object_is_type(desc, json_type_string) ? json_object_get_string(desc) : "?";
        int r = -EIO;
        if (strcmp(c, "CommandNotFound") == 0)
            r = -ENOSYS;
        else if (strcmp(c, "DeviceNotFound") == 0)
            r = -ENODEV;
        else if (strstr(d, "not found"))
            r = -ENOENT;
        r = bm_error(r, "QEMU: %s: %s", c, d);
        json_object_put(o);
        return r;
    }
    json_object *ret;
    if (!json_object_object_get_ex(o, "return", &ret)) {
        json_object_put(o);
        return bm_error(-EINVAL, "QMP reply has neither \"return\" nor \"error\"");
    }
    *ret_obj = o;
    *ret_return = ret;
    return 0;
}

/* parse(), then checks that "return" has type t ("WHAT: \"return\" is not DESCRIBED"). */
static int parse_typed(const char *reply, json_type t, const char *what, json_object **ret_obj,
                       json_object **ret_return)
{
    int r = parse(reply, ret_obj, ret_return);
    if (r < 0)
        return r;
    if (!json_object_is_type(*ret_return, t))
        return bm_error(-EINVAL, "%s", what);
    return 0;
}

/* The string member KEY of object O, or NULL if there is none (or it is not a string). */
static const char *member_string(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

int bm_qmp_check_reply(const char *reply)
{
    json_object *o, *ret;
    int r = parse(reply, &o, &ret);
    if (r < 0)
        return r;
    json_object_put(o);
    return 0;
}

int bm_qmp_parse_virtio_list(const char *reply, const char *name, char **ret_path)
{
    _cleanup_(json_object_putp) json_object *o = NULL;
    json_object *ret;
    int r = parse_typed(reply, json_type_array, "x-query-virtio: \"return\" is not an array", &o, &ret);
    if (r < 0)
        return r;
    for (size_t i = 0; i < json_object_array_length(ret); i++) {
        json_object *dev = json_object_array_get_idx(ret, i);
        const char *nm = member_string(dev, "name"), *path = member_string(dev, "path");
        if (!nm || !path)
            return bm_error(-EINVAL, "x-query-virtio: device %zu lacks a string name/path", i);
        if (strcmp(nm, name) == 0) {
            *ret_path = bm_strdup(path);
            return 0;
        }
    }
    return bm_error(-ENODEV, "no %s device", name);
}

int bm_qmp_parse_virtio_paths(const char *reply, const char *name, char ***ret_paths)
{
    _cleanup_(json_object_putp) json_object *o = NULL;
    json_object *ret;
    int r = parse_typed(reply, json_type_array, "x-query-virtio: \"return\" is not an array", &o, &ret);
    if (r < 0)
        return r;
    size_t len = json_object_array_length(ret), n = 0;
    _cleanup_(bm_strv_freep) char **paths = bm_malloc0((len + 1) * sizeof(char *));
    for (size_t i = 0; i < len; i++) {
        json_object *dev = json_object_array_get_idx(ret, i);
        const char *nm = member_string(dev, "name"), *path = member_string(dev, "path");
        if (!nm || !path)
            return bm_error(-EINVAL, "x-query-virtio: device %zu lacks a string name/path", i);
        if (strcmp(nm, name) == 0)
            paths[n++] = bm_strdup(path);
    }
    *ret_paths = TAKE_PTR(paths);
    return (int)n;
}

/* A whole number member of o from 0 to 2^63-1 into *ret; -EINVAL with the detail otherwise. */
static int member_u64(json_object *o, const char *key, size_t i, uint64_t *ret)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
        return bm_error(-EINVAL, "query-memory-devices: device %zu lacks an integer \"%s\"", i, key);
    int64_t x = json_object_get_int64(v);
    if (x < 0)
        return bm_error(-EINVAL, "query-memory-devices: device %zu: \"%s\" out of range", i, key);
    *ret = (uint64_t)x;
    return 0;
}

int bm_qmp_parse_memory_devices(const char *reply, BmQemuVirtioMem *ret, size_t max)
{
    _cleanup_(json_object_putp) json_object *o = NULL;
    json_object *arr;
    int r = parse_typed(reply, json_type_array, "query-memory-devices: \"return\" is not an array",
                        &o, &arr);
    if (r < 0)
        return r;
    size_t n = 0;
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        json_object *dev = json_object_array_get_idx(arr, i), *data;
        const char *type = member_string(dev, "type");
        if (!type || !json_object_object_get_ex(dev, "data", &data) ||
            !json_object_is_type(data, json_type_object))
            return bm_error(-EINVAL, "query-memory-devices: device %zu lacks a type or data", i);
        if (strcmp(type, "virtio-mem") != 0)
            continue;
        BmQemuVirtioMem v = {.node = -1};
        uint64_t node;
        const char *id = member_string(data, "id");
        if ((r = member_u64(data, "size", i, &v.size_bytes)) < 0 ||
            (r = member_u64(data, "requested-size", i, &v.requested_bytes)) < 0 ||
            (r = member_u64(data, "max-size", i, &v.max_bytes)) < 0 ||
            (r = member_u64(data, "block-size", i, &v.block_bytes)) < 0)
            return r;
        if (member_u64(data, "node", i, &node) == 0 && node <= 65535)
            v.node = (int)node;
        snprintf(v.id, sizeof(v.id), "%s", id ? id : "");
        if (n < max)
            ret[n] = v;
        n++;
    }
    bm_error_reset();
    return (int)(n > INT32_MAX ? INT32_MAX : n);
}

void bm_qmp_virtio_mem_clear(BmQemuVirtioMem *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].driver_error);
        v[i].driver_error = NULL;
    }
}

/* The text before ':' of "VIRTIO_BALLOON_F_STATS_VQ: Guest memory stats VQ available". */
static char *feature_name(const char *s)
{
    const char *colon = strchr(s, ':');
    size_t len = colon ? (size_t)(colon - s) : strlen(s);
    char *n = bm_malloc0(len + 1);
    memcpy(n, s, len);
    return n;
}

static int parse_string_list(json_object *arr, const char *what, char ***ret, size_t *ret_n)
{
    if (!json_object_is_type(arr, json_type_array))
        return bm_error(-EINVAL, "x-query-virtio-status: %s is not an array", what);
    size_t n = json_object_array_length(arr);
    char **v = bm_malloc0((n + 1) * sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(arr, i);
        if (!json_object_is_type(s, json_type_string)) {
            bm_strv_free(v);
            return bm_error(-EINVAL, "x-query-virtio-status: %s[%zu] is not a string", what, i);
        }
        v[i] = feature_name(json_object_get_string(s));
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

static int parse_features(json_object *status, const char *key, BmVirtioFeatures *ret)
{
    json_object *f, *dev, *unknown;
    if (!json_object_object_get_ex(status, key, &f))
        return bm_error(-EINVAL, "x-query-virtio-status: no \"%s\"", key);
    if (!json_object_is_type(f, json_type_object))
        return bm_error(-EINVAL, "x-query-virtio-status: \"%s\" is not an object", key);
    if (json_object_object_get_ex(f, "dev-features", &dev)) {
        int r = parse_string_list(dev, key, &ret->names, &ret->n_names);
        if (r < 0)
            return r;
    } else {
        ret->names = bm_malloc0(sizeof(char *));
    }
    if (json_object_object_get_ex(f, "unknown-dev-features", &unknown)) {
        if (!json_object_is_type(unknown, json_type_int) || json_object_get_int64(unknown) < 0)
            return bm_error(-EINVAL, "x-query-virtio-status: %s unknown-dev-features is not a "
                            "non-negative integer", key);
        /* json-c saturates a number beyond 64 bits to UINT64_MAX; QEMU never sends all bits
         * unknown (it decodes some), so that value is an out-of-range number, not a mask */
        ret->unknown_bits = json_object_get_uint64(unknown);
        if (ret->unknown_bits == UINT64_MAX)
            return bm_error(-EINVAL, "x-query-virtio-status: %s unknown-dev-features is out of "
                            "range", key);
    }
    return 0;
}

int bm_qmp_parse_virtio_status(const char *reply, BmVirtioStatus *ret)
{
    *ret = (BmVirtioStatus){0};
    _cleanup_(json_object_putp) json_object *o = NULL;
    json_object *st;
    int r = parse_typed(reply, json_type_object, "x-query-virtio-status: \"return\" is not an object",
                        &o, &st);
    if (r < 0)
        return r;

    json_object *status, *statuses, *broken;
    const char *name = member_string(st, "name");
    if (name)
        snprintf(ret->name, sizeof(ret->name), "%s", name);
    if (json_object_object_get_ex(st, "broken", &broken))
        ret->broken = json_object_get_boolean(broken);

    if (!json_object_object_get_ex(st, "status", &status) ||
        !json_object_object_get_ex(status, "statuses", &statuses)) {
        return bm_error(-EINVAL, "x-query-virtio-status: no \"status\".\"statuses\"");
    }
    char **sv = NULL;
    size_t n_sv = 0;
    r = parse_string_list(statuses, "statuses", &sv, &n_sv);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n_sv; i++) {
        ret->driver_ok |= strcmp(sv[i], "VIRTIO_CONFIG_S_DRIVER_OK") == 0;
        ret->features_ok |= strcmp(sv[i], "VIRTIO_CONFIG_S_FEATURES_OK") == 0;
    }
    bm_strv_free(sv);

    if ((r = parse_features(st, "host-features", &ret->host)) < 0 ||
        (r = parse_features(st, "guest-features", &ret->guest)) < 0) {
        bm_virtio_status_clear(ret);
        return r;
    }
    return 0;
}

void bm_virtio_status_clear(BmVirtioStatus *s)
{
    if (!s)
        return;
    bm_strv_free(s->host.names);
    bm_strv_free(s->guest.names);
    *s = (BmVirtioStatus){0};
}

int bm_qmp_parse_name_list(const char *reply, char ***ret_names)
{
    _cleanup_(json_object_putp) json_object *o = NULL;
    json_object *ret;
    int r = parse_typed(reply, json_type_array, "property list: \"return\" is not an array", &o, &ret);
    if (r < 0)
        return r;
    size_t n = json_object_array_length(ret);
    char **v = bm_malloc0((n + 1) * sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        const char *nm = member_string(json_object_array_get_idx(ret, i), "name");
        if (!nm) {
            bm_strv_free(v);
            return bm_error(-EINVAL, "property list: entry %zu has no string \"name\"", i);
        }
        v[i] = bm_strdup(nm);
    }
    *ret_names = v;
    return (int)n;
}

int bm_qmp_parse_qom_get_bool(const char *reply, bool *ret)
{
    _cleanup_(json_object_putp) json_object *o = NULL;
    json_object *v;
    int r = parse_typed(reply, json_type_boolean, "qom-get: the value is not a bool", &o, &v);
    if (r < 0)
        return r;
    *ret = json_object_get_boolean(v);
    return 0;
}

/* QEMU's names of Linux 6.12's starvation statistics (tags 10-15) and where each goes. */
static const struct {
    const char *name;
    size_t offset;
} starve_fields[] = {
    {"stat-oom-kills", offsetof(BmStarveStats, oom_kills)},
    {"stat-alloc-stalls", offsetof(BmStarveStats, alloc_stalls)},
    {"stat-async-scans", offsetof(BmStarveStats, async_scan_bytes)},
    {"stat-direct-scans", offsetof(BmStarveStats, direct_scan_bytes)},
    {"stat-async-reclaims", offsetof(BmStarveStats, async_reclaim_bytes)},
    {"stat-direct-reclaims", offsetof(BmStarveStats, direct_reclaim_bytes)},
};

int bm_qmp_parse_guest_stats(const char *reply, BmStarveStats *ret)
{
    *ret = BM_STARVE_STATS_ABSENT;
    _cleanup_(json_object_putp) json_object *o = NULL;
    json_object *gs, *stats;
    int r = parse_typed(reply, json_type_object, "qom-get guest-stats: \"return\" is not an object",
                        &o, &gs);
    if (r < 0)
        return r;
    if (!json_object_object_get_ex(gs, "stats", &stats) ||
        !json_object_is_type(stats, json_type_object))
        return bm_error(-EINVAL, "qom-get guest-stats: no \"stats\" object");
    BmStarveStats s = BM_STARVE_STATS_ABSENT;
    for (size_t i = 0; i < BM_ARRAY_SIZE(starve_fields); i++) {
        json_object *v;
        if (!json_object_object_get_ex(stats, starve_fields[i].name, &v))
            continue; /* QEMU before 9.2 */
        if (!json_object_is_type(v, json_type_int))
            return bm_error(-EINVAL, "qom-get guest-stats: \"%s\" is not an integer",
                            starve_fields[i].name);
        /* QEMU writes a statistic the guest did not send as 2^64-1 (json-c saturates a larger
         * number to that too), an older one as -1; the rest is the guest's: bounded */
        if (json_object_get_int64(v) < 0)
            continue;
        *(uint64_t *)((char *)&s + starve_fields[i].offset) = bm_reported(json_object_get_uint64(v), 1);
    }
    *ret = s;
    return 0;
}

/* Runs one command built as {"execute": execute, "arguments": args} (args consumed). */
static int command(virDomainPtr dom, const char *execute, json_object *args, char **ret_reply)
{
    _cleanup_(json_object_putp) json_object *cmd = json_object_new_object();
    json_object_object_add(cmd, "execute", json_object_new_string(execute));
    if (args)
        json_object_object_add(cmd, "arguments", args);
    char *reply = NULL;
    int r = bm_qmp_command(dom, json_object_to_json_string_ext(cmd, JSON_C_TO_STRING_PLAIN), &reply);
    if (r < 0)
        return r;
    *ret_reply = reply;
    return 0;
}

static BmVirtioAvailability availability_for(int r)
{
    switch (r) {
    case -ENOTSUP: return BM_VIRTIO_NO_MONITOR;
    case -ESRCH: return BM_VIRTIO_NOT_RUNNING;
    case -ENOSYS: return BM_VIRTIO_TOO_OLD;
    case -ENODEV: return BM_VIRTIO_NO_BALLOON;
    default: return BM_VIRTIO_ERROR;
    }
}

int bm_qmp_balloon_path(virDomainPtr dom, char **ret_path)
{
    _cleanup_free_ char *list = NULL;
    int r = command(dom, "x-query-virtio", NULL, &list);
    if (r < 0)
        return r;
    return bm_qmp_parse_virtio_list(list, "virtio-balloon", ret_path);
}

int bm_qmp_read_starve_stats(virDomainPtr dom, const char *path, BmStarveStats *ret)
{
    *ret = BM_STARVE_STATS_ABSENT;
    json_object *args = json_object_new_object();
    json_object_object_add(args, "path", json_object_new_string(path));
    json_object_object_add(args, "property", json_object_new_string("guest-stats"));
    _cleanup_free_ char *reply = NULL;
    int r = command(dom, "qom-get", args, &reply);
    if (r < 0)
        return r;
    return bm_qmp_parse_guest_stats(reply, ret);
}

void bm_qmp_probe_balloon(virDomainPtr dom, const BmFeatureOptions *opts, BmFeatureReport *ret,
                          char **ret_path, char **ret_error)
{
    *ret_path = NULL;
    *ret_error = NULL;
    _cleanup_free_ char *status_reply = NULL, *path = NULL;
    BmVirtioStatus st = {0};

    if (BM_LV(virDomainIsActive)(dom) == 0) {
        bm_features_decide(NULL, BM_VIRTIO_NOT_RUNNING, opts, ret);
        return;
    }
    int r = bm_qmp_balloon_path(dom, &path);
    if (r >= 0) {
        json_object *args = json_object_new_object();
        json_object_object_add(args, "path", json_object_new_string(path));
        r = command(dom, "x-query-virtio-status", args, &status_reply);
    }
    if (r >= 0)
        r = bm_qmp_parse_virtio_status(status_reply, &st);
    if (r < 0) {
        BmVirtioAvailability a = availability_for(r);
        if (a == BM_VIRTIO_ERROR)
            *ret_error = bm_strdup(bm_error_detail(r));
        bm_features_decide(NULL, a, opts, ret);
        return;
    }
    bm_features_decide(&st, BM_VIRTIO_OK, opts, ret);
    bm_virtio_status_clear(&st);

    /* ioeventfd lives on the PCI proxy, the parent of ".../virtio-backend" */
    const char *suffix = "/virtio-backend";
    size_t len = strlen(path), slen = strlen(suffix);
    if (len > slen && strcmp(path + len - slen, suffix) == 0) {
        _cleanup_free_ char *proxy = strndup(path, len - slen), *reply = NULL;
        json_object *args = json_object_new_object();
        json_object_object_add(args, "path", json_object_new_string(proxy));
        json_object_object_add(args, "property", json_object_new_string("ioeventfd"));
        bool value = false;
        int vr = -ENOENT;
        r = command(dom, "qom-get", args, &reply);
        if (r >= 0)
            r = bm_qmp_parse_qom_get_bool(reply, &value);
        if (r == 0) {
            /* QEMU's own ioeventfd comes with "vectors"; the lab's 7.2 patch has no vectors */
            _cleanup_free_ char *vreply = NULL;
            json_object *vargs = json_object_new_object();
            json_object_object_add(vargs, "path", json_object_new_string(proxy));
            json_object_object_add(vargs, "property", json_object_new_string("vectors"));
            vr = command(dom, "qom-get", vargs, &vreply);
            if (vr >= 0)
                vr = bm_qmp_check_reply(vreply);
        }
        bm_features_decide_ioeventfd(r, value, vr, ret);
    }
    *ret_path = TAKE_PTR(path);
}

int bm_qmp_probe_virtio_mem(virDomainPtr dom, BmQemuVirtioMem *ret, size_t max)
{
    _cleanup_free_ char *devices = NULL, *list = NULL;
    int r = command(dom, "query-memory-devices", NULL, &devices);
    if (r < 0)
        return r;
    int n = bm_qmp_parse_memory_devices(devices, ret, max);
    if (n <= 0)
        return n;
    _cleanup_(bm_strv_freep) char **paths = NULL;
    int n_paths = (r = command(dom, "x-query-virtio", NULL, &list)) < 0
                      ? r : bm_qmp_parse_virtio_paths(list, "virtio-mem", &paths);
    for (size_t i = 0; i < (size_t)n && i < max; i++) {
        BmQemuVirtioMem *v = &ret[i];
        if (n_paths < 0) {
            v->driver_error = bm_strdup(bm_error_detail(n_paths));
            continue;
        }
        /* its backend: "/machine/peripheral/ID/virtio-backend" */
        _cleanup_free_ char *want = bm_asprintf("/%s/virtio-backend", v->id);
        const char *path = NULL;
        for (int k = 0; k < n_paths && !path; k++) {
            size_t lp = strlen(paths[k]), lw = strlen(want);
            if (lp >= lw && strcmp(paths[k] + lp - lw, want) == 0)
                path = paths[k];
        }
        if (!path) {
            v->driver_error = bm_strdup("its virtio backend is not in x-query-virtio");
            continue;
        }
        _cleanup_free_ char *reply = NULL;
        BmVirtioStatus st = {0};
        json_object *args = json_object_new_object();
        json_object_object_add(args, "path", json_object_new_string(path));
        if ((r = command(dom, "x-query-virtio-status", args, &reply)) < 0 ||
            (r = bm_qmp_parse_virtio_status(reply, &st)) < 0) {
            v->driver_error = bm_strdup(bm_error_detail(r));
            continue;
        }
        v->driver_known = true;
        v->driver_ok = st.driver_ok;
        bm_virtio_status_clear(&st);
    }
    return n;
}

int bm_qmp_device_has_property(virDomainPtr dom, const char *typename, const char *prop,
                               bool *ret_has)
{
    json_object *args = json_object_new_object();
    json_object_object_add(args, "typename", json_object_new_string(typename));
    _cleanup_free_ char *reply = NULL;
    int r = command(dom, "device-list-properties", args, &reply);
    if (r < 0)
        return r;
    _cleanup_(bm_strv_freep) char **names = NULL;
    int n = bm_qmp_parse_name_list(reply, &names);
    if (n < 0)
        return n;
    *ret_has = false;
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], prop) == 0)
            *ret_has = true;
    return 0;
}
