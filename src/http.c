#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "error.h"
#include "util.h"

struct BmHttp {
    struct MHD_Daemon *daemon;
    pthread_mutex_t lock;
    char *metrics;
    size_t metrics_len;
};

static const char landing[] =
    "<!DOCTYPE html><html><head><title>balloonmgr</title></head><body>"
    "<h1>balloonmgr</h1><p>virtio-balloon memory management for libvirt.</p>"
    "<p><a href=\"/metrics\">Metrics</a></p></body></html>\n";

int bm_http_parse_listen(const char *s, void *ret_addr, unsigned *ret_len)
{
    struct sockaddr_storage *ss = ret_addr;
    memset(ss, 0, sizeof(*ss));
    char host[128];
    const char *port_s;
    if (!s || !*s)
        return bm_error(-EINVAL, "empty address");
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end || end[1] != ':' || (size_t)(end - s - 1) >= sizeof(host))
            return bm_error(-EINVAL, "expected [IPv6]:PORT");
        memcpy(host, s + 1, (size_t)(end - s - 1));
        host[end - s - 1] = '\0';
        port_s = end + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon || (size_t)(colon - s) >= sizeof(host) || colon == s)
            return bm_error(-EINVAL, "expected ADDR:PORT");
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
        port_s = colon + 1;
    }
    char *end = NULL;
    long port = strtol(port_s, &end, 10);
    if (!*port_s || *end || port < 1 || port > 65535)
        return bm_error(-EINVAL, "port '%s' is not a number from 1 to 65535", port_s);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        *ret_len = sizeof(*v4);
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *ret_len = sizeof(*v6);
    } else {
        return bm_error(-EINVAL, "'%s' is not an IP address", host);
    }
    return 0;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             const char *body, size_t len, bool free_body)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, (void *)body, free_body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, "Allow", "GET, HEAD");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    BmHttp *h = cls;
    /* refuse request bodies. A request that announces one (Content-Length other than 0, or
     * Transfer-Encoding) is answered 413 on the first call, before MHD reads the body, and MHD
     * closes the connection: reading it first would let a client hold the connection with a
     * huge Content-Length until the idle timeout. A body that arrives anyway is read and
     * dropped, and refused once all of it is in (MHD takes no response while a body is
     * arriving: queueing one then fails and MHD drops the connection without an answer). */
    static int marker, had_body;
    if (*con_cls == NULL) {
        *con_cls = &marker;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
        if (te || (cl && strspn(cl, "0") != strlen(cl)))
            return reply(c, MHD_HTTP_CONTENT_TOO_LARGE, "text/plain", "no body allowed\n", 16, false);
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        *con_cls = &had_body;
        return MHD_YES;
    }
    if (*con_cls == &had_body)
        return reply(c, MHD_HTTP_CONTENT_TOO_LARGE, "text/plain", "no body allowed\n", 16, false);
    bool get = strcmp(method, "GET") == 0, head = strcmp(method, "HEAD") == 0;
    bool known = strcmp(url, "/metrics") == 0 || strcmp(url, "/") == 0;
    if (!known)
        return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n", 10, false);
    if (!get && !head)
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "method not allowed\n", 19, false);
    if (strcmp(url, "/") == 0)
        return reply(c, MHD_HTTP_OK, "text/html; charset=utf-8", landing, sizeof(landing) - 1, false);

    pthread_mutex_lock(&h->lock);
    size_t len = h->metrics_len;
    char *copy = malloc(len ? len : 1);
    if (copy && len)
        memcpy(copy, h->metrics, len);
    pthread_mutex_unlock(&h->lock);
    if (!copy)
        return MHD_NO;
    return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", copy, len, true);
}

int bm_http_start(const char *listen, BmHttp **ret)
{
    struct sockaddr_storage addr;
    unsigned len;
    int r = bm_http_parse_listen(listen, &addr, &len);
    if (r < 0) {
        return bm_error_prefix(r, "--listen '%s'", listen);
    }
    BmHttp *h = bm_malloc0(sizeof(*h));
    pthread_mutex_init(&h->lock, NULL);
    h->metrics = bm_strdup("");
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handle, h,
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
                                 MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)16,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
                                 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768,
                                 MHD_OPTION_END);
    if (!h->daemon) {
        int err = errno ? errno : EADDRINUSE;
        bm_http_stop(h);
        return bm_error(-err, "cannot listen on %s: %s", listen, strerror(err));
    }
    *ret = h;
    return 0;
}

void bm_http_set_metrics(BmHttp *h, const char *text)
{
    char *copy = bm_strdup(text);
    pthread_mutex_lock(&h->lock);
    char *old = h->metrics;
    h->metrics = copy;
    h->metrics_len = strlen(copy);
    pthread_mutex_unlock(&h->lock);
    free(old);
}

void bm_http_stop(BmHttp *h)
{
    if (!h)
        return;
    if (h->daemon)
        MHD_stop_daemon(h->daemon);
    pthread_mutex_destroy(&h->lock);
    free(h->metrics);
    free(h);
}
