#include "conn.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "util.h"

unsigned long bm_libvirt_calls;

static void quiet_error(void *data, virErrorPtr err)
{
    (void)data;
    (void)err;
}

int bm_conn_init(void)
{
    if (virInitialize() < 0)
        return bm_error(-EIO, "cannot initialise libvirt");
    virSetErrorFunc(NULL, quiet_error);
    return 0;
}

int bm_conn_event_loop_init(void)
{
    static bool done;
    if (done)
        return 0;
    if (virEventRegisterDefaultImpl() < 0)
        return bm_conn_error("cannot start libvirt's event loop");
    done = true;
    return 0;
}

int bm_conn_run_events(void)
{
    if (virEventRunDefaultImpl() < 0)
        return bm_conn_error("libvirt's event loop failed");
    return 0;
}

const char *bm_conn_default_uri(const char *uri)
{
    if (uri && *uri)
        return uri;
    const char *env = getenv("BALLOONMGR_URI");
    return env && *env ? env : NULL;
}

static int map_code(int code)
{
    switch (code) {
    case VIR_ERR_NO_DOMAIN:
        return -ENOENT;
    case VIR_ERR_OPERATION_INVALID:
        return -ESRCH;
    case VIR_ERR_INVALID_ARG:
    case VIR_ERR_CONFIG_UNSUPPORTED:
        return -EINVAL;
    case VIR_ERR_NO_SUPPORT:
    case VIR_ERR_OPERATION_UNSUPPORTED:
    case VIR_ERR_ARGUMENT_UNSUPPORTED:
        return -ENOTSUP;
    case VIR_ERR_AUTH_FAILED:
    case VIR_ERR_AUTH_CANCELLED:
    case VIR_ERR_AUTH_UNAVAILABLE:
    case VIR_ERR_OPERATION_DENIED:
    case VIR_ERR_ACCESS_DENIED:
        return -EACCES;
    case VIR_ERR_OPERATION_TIMEOUT:
    case VIR_ERR_AGENT_UNRESPONSIVE:
        return -ETIMEDOUT;
    case VIR_ERR_NO_CONNECT:
    case VIR_ERR_RPC:
    case VIR_ERR_INVALID_CONN:
        return -ECONNRESET;
    default:
        return -EIO;
    }
}

int bm_conn_error(const char *what)
{
    virErrorPtr err = virGetLastError();
    int r = err ? map_code(err->code) : -EIO;
    const char *msg = err && err->message ? err->message : "unknown libvirt error";
    /* XML errors carry libxml2's context on further lines ("(null)\n^"): keep the first */
    int len = (int)strcspn(msg, "\n");
    if (what)
        bm_error(r, "%s: %.*s", what, len, msg);
    else
        bm_error(r, "%.*s", len, msg);
    virResetLastError();
    return r;
}

int bm_conn_open(const char *uri, bool readonly, virConnectPtr *ret_conn)
{
    virConnectPtr c = readonly ? virConnectOpenReadOnly(uri) : virConnectOpen(uri);
    if (!c) {
        int r = bm_conn_error(NULL);
        return bm_error_prefix(r, "cannot connect to '%s'", uri ? uri : "(libvirt default)");
    }
    *ret_conn = c;
    return 0;
}

char *bm_conn_uri(virConnectPtr conn)
{
    char *uri = virConnectGetURI(conn);
    virResetLastError();
    return uri ? uri : bm_strdup("");
}

bool bm_conn_is_local(virConnectPtr conn)
{
    _cleanup_free_ char *uri = bm_conn_uri(conn);
    const char *sep = strstr(uri, "://");
    return sep && sep[3] == '/';
}

/* Whether s is a UUID as libvirt parses one: 32 hex digits, dashes between them. */
static bool looks_like_uuid(const char *s)
{
    size_t digits = 0;
    for (; *s; s++) {
        if (isxdigit((unsigned char)*s))
            digits++;
        else if (*s != '-')
            return false;
    }
    return digits == 32;
}

/* The domain of one way of looking it up: 1 and *ret, 0 when there is none that way, or the
 * mapped -errno of another failure (the connection). */
static int lookup_result(virDomainPtr d, virDomainPtr *ret)
{
    if (d) {
        *ret = d;
        return 1;
    }
    int r = bm_conn_error(NULL);
    return r == -ENOENT || r == -EINVAL ? 0 : r;
}

int bm_conn_lookup_name(virConnectPtr conn, const char *name, virDomainPtr *ret_dom)
{
    int r = lookup_result(BM_LV(virDomainLookupByName)(conn, name), ret_dom);
    if (r == 0)
        return bm_error(-ENOENT, "no such domain");
    return r < 0 ? r : 0;
}

int bm_conn_lookup(virConnectPtr conn, const char *name, virDomainPtr *ret_dom)
{
    int r = 0;
    char *end = NULL;
    errno = 0;
    long id = isdigit((unsigned char)name[0]) ? strtol(name, &end, 10) : -1;
    if (id >= 0 && !*end && !errno && id <= INT_MAX)
        r = lookup_result(BM_LV(virDomainLookupByID)(conn, (int)id), ret_dom);
    if (r == 0 && looks_like_uuid(name))
        r = lookup_result(BM_LV(virDomainLookupByUUIDString)(conn, name), ret_dom);
    if (r == 0)
        r = lookup_result(BM_LV(virDomainLookupByName)(conn, name), ret_dom);
    if (r == 0)
        return bm_error(-ENOENT, "no domain with this name, ID or UUID");
    return r < 0 ? r : 0;
}

void bm_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}


typedef struct {
    char *name, *key;
} NameKey;

static int cmp_name_key(const void *a, const void *b)
{
    return strcmp(((const NameKey *)a)->name, ((const NameKey *)b)->name);
}

int bm_conn_list_keys(virConnectPtr conn, bool all, BmDomainKey key, char ***ret_keys)
{
    virDomainPtr *doms = NULL;
    unsigned flags = VIR_CONNECT_LIST_DOMAINS_ACTIVE;
    if (all)
        flags |= VIR_CONNECT_LIST_DOMAINS_INACTIVE;
    int n = BM_LV(virConnectListAllDomains)(conn, &doms, flags);
    if (n < 0)
        return bm_conn_error("cannot list domains");
    NameKey *v = bm_malloc0(((size_t)n + 1) * sizeof(NameKey));
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        char uuid[VIR_UUID_STRING_BUFLEN];
        unsigned id = virDomainGetID(doms[i]);
        if (key == BM_KEY_ID && id == (unsigned)-1) {
            virDomainFree(doms[i]); /* not running: no ID */
            continue;
        }
        v[k].name = bm_strdup(virDomainGetName(doms[i]));
        if (key == BM_KEY_ID)
            v[k].key = bm_asprintf("%u", id);
        else if (key == BM_KEY_UUID)
            v[k].key = bm_strdup(virDomainGetUUIDString(doms[i], uuid) == 0 ? uuid : "");
        k++;
        virDomainFree(doms[i]);
    }
    free(doms);
    qsort(v, k, sizeof(NameKey), cmp_name_key);
    char **keys = bm_malloc0((k + 1) * sizeof(char *));
    for (size_t i = 0; i < k; i++) {
        keys[i] = key == BM_KEY_NAME ? v[i].name : v[i].key;
        if (key != BM_KEY_NAME)
            free(v[i].name);
    }
    free(v);
    *ret_keys = keys;
    return (int)k;
}

int bm_conn_list_names(virConnectPtr conn, bool all, char ***ret_names)
{
    return bm_conn_list_keys(conn, all, BM_KEY_NAME, ret_names);
}

int bm_conn_domain_xml(virDomainPtr dom, bool inactive, char **ret_xml)
{
    char *xml = BM_LV(virDomainGetXMLDesc)(dom, inactive ? VIR_DOMAIN_XML_INACTIVE | VIR_DOMAIN_XML_SECURE : 0);
    if (!xml)
        return bm_conn_error("cannot read the domain XML");
    *ret_xml = xml;
    return 0;
}

int bm_conn_define(virConnectPtr conn, const char *xml)
{
    virDomainPtr d = BM_LV(virDomainDefineXMLFlags)(conn, xml, VIR_DOMAIN_DEFINE_VALIDATE);
    if (!d)
        return bm_conn_error("libvirt refused the new definition");
    virDomainFree(d);
    return 0;
}

int bm_conn_domain_state(virDomainPtr dom, bool *ret_active, bool *ret_persistent)
{
    int a = BM_LV(virDomainIsActive)(dom), p = BM_LV(virDomainIsPersistent)(dom);
    if (a < 0 || p < 0)
        return bm_conn_error(NULL);
    *ret_active = a == 1;
    *ret_persistent = p == 1;
    return 0;
}

const char *bm_conn_qemu_run_dir(virConnectPtr conn, char *buf, size_t n)
{
    _cleanup_free_ char *uri = conn ? virConnectGetURI(conn) : NULL;
    if (!uri) {
        bm_error_reset();
        return NULL;
    }
    if (strcmp(uri, "qemu:///system") == 0) {
        snprintf(buf, n, "/run/libvirt/qemu");
        return buf;
    }
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (strcmp(uri, "qemu:///session") == 0 && xdg && *xdg) {
        snprintf(buf, n, "%s/libvirt/qemu/run", xdg);
        return buf;
    }
    return NULL;
}
