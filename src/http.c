#include "http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include "basic-auth.h"
#include "error.h"
#include "log.h"
#include "process.h"
#include "util.h"

#define REALM "balloonmgr"
/* What libmicrohttpd accepts at most: our policy (accept()) keeps BM_HTTP_SLOTS; the rest is
 * room for connections told to close that have not yet. */
#define HARD_LIMIT (2 * BM_HTTP_SLOTS)
#define WATCH_MS 200

/* A connection of the server, for the whole-request deadline and eviction. */
typedef struct {
    bool used;
    bool closing;                 /* shut down by us: no longer counted */
    int fd;                       /* a dup() of its socket: shutdown() never hits a reused fd */
    struct MHD_Connection *conn;
    struct sockaddr_storage addr; /* the client's */
    uint64_t deadline_ns;         /* the current request must be answered by then */
} Slot;

/* What a daemon serves with: plain HTTP (tls false) or HTTPS with these PEM texts. */
typedef struct {
    bool tls;
    char *cert_pem, *key_pem, *priorities;
} Tls;

struct BmHttp {
    size_t n_listen;           /* addresses served: one, or each one a host name resolves to */
    struct MHD_Daemon *daemon[BM_HTTP_LISTEN_MAX];
    int listen_fd[BM_HTTP_LISTEN_MAX]; /* ours; each daemon gets a dup() of one */
    char *listen;              /* ADDR:PORT, for messages */
    Tls tls;                   /* of the running daemon */
    pthread_mutex_t lock;      /* metrics and auth */
    char *metrics;
    size_t metrics_len;
    BmBasicAuth *auth;         /* NULL: no auth */
    pthread_mutex_t log_lock;  /* libmicrohttpd's messages: */
    uint64_t log_last_ns;      /* when the last one was printed (0: never) */
    unsigned long log_dropped; /* how many were not printed since */
    char *log_capture;         /* non-NULL while starting a daemon: the last one goes here */
    pthread_mutex_t conn_lock; /* slots */
    Slot slots[HARD_LIMIT];
    pthread_t watcher;         /* closes connections past their deadline */
    bool watching;
    pthread_mutex_t watch_lock;
    pthread_cond_t watch_cond;
    bool watch_stop;
};

static const char landing[] =
    "<!DOCTYPE html><html><head><title>balloonmgr</title></head><body>"
    "<h1>balloonmgr</h1><p>virtio-balloon memory management for libvirt.</p>"
    "<p><a href=\"/metrics\">Metrics</a></p></body></html>\n";

#define HOST_MAX 128

/* Splits "HOST:PORT", "[IPv6]:PORT" or ":PORT" into host (HOST_MAX bytes; "" for ":PORT") and the
 * port. Returns 0 or -EINVAL with the reason. */
static int split_listen(const char *s, char *host, long *ret_port)
{
    const char *port_s;
    if (!s || !*s)
        return bm_error(-EINVAL, "empty address");
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end || end[1] != ':' || (size_t)(end - s - 1) >= HOST_MAX)
            return bm_error(-EINVAL, "expected [IPv6]:PORT");
        memcpy(host, s + 1, (size_t)(end - s - 1));
        host[end - s - 1] = '\0';
        port_s = end + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon || (size_t)(colon - s) >= HOST_MAX)
            return bm_error(-EINVAL, "expected ADDR:PORT or :PORT");
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
        port_s = colon + 1;
    }
    char *end = NULL;
    long port = strtol(port_s, &end, 10);
    /* digits only: strtol() would take "+19727", " 19727"; 0 is a free port the kernel picks */
    if (!isdigit((unsigned char)port_s[0]) || *end || port < 0 || port > 65535)
        return bm_error(-EINVAL, "port '%s' is not a number from 0 to 65535", port_s);
    *ret_port = port;
    return 0;
}

int bm_http_parse_listen(const char *s, void *ret_addr, unsigned *ret_len)
{
    struct sockaddr_storage *ss = ret_addr;
    memset(ss, 0, sizeof(*ss));
    char host[HOST_MAX];
    long port;
    int r = split_listen(s, host, &port);
    if (r < 0)
        return r;
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (!host[0]) {
        /* ":PORT": every address, IPv6 and IPv4 (a dual-stack socket, see open_listener) */
        v6->sin6_family = AF_INET6;
        v6->sin6_addr = in6addr_any;
        v6->sin6_port = htons((uint16_t)port);
        *ret_len = sizeof(*v6);
    } else if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
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

int bm_http_resolve_listen(const char *s, BmListenAddrs *ret)
{
    *ret = (BmListenAddrs){0};
    char host[HOST_MAX];
    long port;
    int r = split_listen(s, host, &port);
    if (r < 0)
        return r;
    struct in6_addr a6;
    struct in_addr a4;
    if (!host[0] || inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1) {
        r = bm_http_parse_listen(s, &ret->addr[0], &ret->len[0]);
        ret->n = r == 0;
        return r;
    }
    /* digits and dots are an IPv4 address, a ':' an IPv6 one: not names to look up */
    if (strspn(host, "0123456789.") == strlen(host) || strchr(host, ':'))
        return bm_error(-EINVAL, "'%s' is not an IP address", host);
    /* a host name: every address it resolves to (localhost: 127.0.0.1 and ::1), once each */
    char port_s[8];
    snprintf(port_s, sizeof(port_s), "%ld", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV}, *res = NULL;
    int g = getaddrinfo(host, port_s, &hints, &res);
    if (g != 0)
        return bm_error(-EINVAL, "cannot resolve '%s': %s", host,
                        g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
    for (struct addrinfo *ai = res; ai && ret->n < BM_HTTP_LISTEN_MAX; ai = ai->ai_next) {
        if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
            ai->ai_addrlen > sizeof(ret->addr[0]))
            continue;
        bool dup = false;
        for (size_t i = 0; i < ret->n; i++)
            dup |= ret->len[i] == ai->ai_addrlen && memcmp(&ret->addr[i], ai->ai_addr, ai->ai_addrlen) == 0;
        if (dup)
            continue;
        memset(&ret->addr[ret->n], 0, sizeof(ret->addr[0]));
        memcpy(&ret->addr[ret->n], ai->ai_addr, ai->ai_addrlen);
        ret->len[ret->n++] = (unsigned)ai->ai_addrlen;
    }
    freeaddrinfo(res);
    if (!ret->n)
        return bm_error(-EINVAL, "'%s' resolves to no IPv4 or IPv6 address", host);
    return 0;
}

void bm_http_format_addr(const void *addr, char *buf, size_t n)
{
    const struct sockaddr_storage *ss = addr;
    char a[INET6_ADDRSTRLEN] = "?";
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *v4 = addr;
        inet_ntop(AF_INET, &v4->sin_addr, a, sizeof(a));
        snprintf(buf, n, "%s:%u", a, ntohs(v4->sin_port));
    } else {
        const struct sockaddr_in6 *v6 = addr;
        inet_ntop(AF_INET6, &v6->sin6_addr, a, sizeof(a));
        snprintf(buf, n, "[%s]:%u", a, ntohs(v6->sin6_port));
    }
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

/* Whether an Accept-Encoding header value accepts gzip: a "gzip" (or "*") coding whose q is
 * not 0. */
static bool wants_gzip(const char *accept)
{
    if (!accept)
        return false;
    _cleanup_free_ char *copy = bm_strdup(accept);
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        tok += strspn(tok, " \t");
        size_t n = strcspn(tok, " \t;");
        if (!((n == 4 && strncasecmp(tok, "gzip", 4) == 0) || (n == 1 && tok[0] == '*')))
            continue;
        const char *q = strstr(tok + n, "q=");
        if (q && strtod(q + 2, NULL) <= 0)
            continue;
        return true;
    }
    return false;
}

/* text (len bytes) gzip-compressed, malloc'd, *ret_len its size; NULL if zlib fails. */
static char *gzip(const char *text, size_t len, size_t *ret_len)
{
    z_stream z = {0};
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    size_t cap = deflateBound(&z, (uLong)len);
    char *out = malloc(cap ? cap : 1);
    if (!out) {
        deflateEnd(&z);
        return NULL;
    }
    z.next_in = (Bytef *)text;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)cap;
    int r = deflate(&z, Z_FINISH);
    *ret_len = z.total_out;
    deflateEnd(&z);
    if (r != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

/* 200 with the exposition (malloc'd body, taken over); gzipped says it is gzip-encoded. */
static enum MHD_Result reply_metrics(struct MHD_Connection *c, char *body, size_t len, bool gzipped)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    MHD_add_response_header(r, "Vary", "Accept-Encoding");
    if (gzipped)
        MHD_add_response_header(r, "Content-Encoding", "gzip");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* Whether the request carries the credentials of a user of the web config (or none are
 * needed). One bcrypt computation for credentials not seen before. */
static bool authorized(BmHttp *h, struct MHD_Connection *c)
{
    pthread_mutex_lock(&h->lock);
    _cleanup_(bm_basic_auth_unrefp) BmBasicAuth *auth = bm_basic_auth_ref(h->auth);
    pthread_mutex_unlock(&h->lock);
    if (!auth)
        return true;
    /* parsed here, not by libmicrohttpd: its parser wants "Basic" in that case and cuts a
     * password at a NUL byte */
    char *user = NULL, *password = NULL;
    const char *value =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    bool ok = bm_basic_auth_parse_header(value, &user, &password) == 0 &&
              bm_basic_auth_check(auth, user, password);
    if (password)
        explicit_bzero(password, strlen(password));
    free(password);
    free(user);
    return ok;
}

/* 401 with WWW-Authenticate: Basic realm="balloonmgr". */
static enum MHD_Result refuse(struct MHD_Connection *c)
{
    static const char body[] = "unauthorized\n";
    struct MHD_Response *r =
        MHD_create_response_from_buffer(sizeof(body) - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain");
    enum MHD_Result ret = MHD_queue_basic_auth_fail_response(c, REALM, r);
    MHD_destroy_response(r);
    return ret;
}

/* MHD's unescaping of the URL and its arguments ("%HH"), except that a text that would decode
 * to a NUL byte is left as it came: MHD hands the handler a C string, and "/metrics%00.html"
 * decoded would read as "/metrics". Returns the length left in s. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    size_t raw_len = strlen(s);
    _cleanup_free_ char *copy = bm_strdup(s);
    size_t n = MHD_http_unescape(copy);
    if (memchr(copy, '\0', n))
        return raw_len; /* never matches a path: 404 */
    memcpy(s, copy, n + 1);
    return n;
}

typedef struct {
    const char *block, *block_end; /* the request line and headers as received, or NULL */
    const char *prev_end;          /* the end of the previous header's value */
    unsigned content_length;       /* Content-Length headers */
    bool host;                     /* a Host header */
    bool nul;                      /* a NUL byte in a header's name or value */
    bool bad_name;                 /* a header name that is not a token (white space before
                                    * the colon: "Content-Length : 34") */
} HeaderScan;

/* Whether key is a token (RFC 9110 5.6.2), as a field name must be. */
static bool is_token(const char *key)
{
    if (!*key)
        return false;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        if (!(isalnum(*p) && *p < 0x80) && !strchr("!#$%&'*+-.^_`|~", *p))
            return false;
    return true;
}

static bool in_block(const HeaderScan *scan, const char *p)
{
    return scan->block && p >= scan->block && p <= scan->block_end;
}

/* Whether the bytes from a header value's end (its terminating NUL) to q are only line ends:
 * CR LF or LF, n_lines times, each byte as sent or replaced by a NUL. MHD parses the request
 * in place and cuts a value at a NUL the client sent (strlen): the bytes after it show here,
 * as other bytes or too many. MHD 0.9 (Debian 12) replaces the line ends by NULs, MHD 1.0
 * (Debian 13) keeps some of them: both are line ends. (A NUL that is the last byte of a value
 * before a bare LF looks like a CR and goes through: the value is cut at it, nothing after it
 * is lost.) */
static bool only_line_ends(const HeaderScan *scan, const char *end, const char *q, int n_lines)
{
    if (!in_block(scan, end) || !in_block(scan, q) || q < end)
        return true; /* not the layout known: nothing to tell */
    size_t gap = (size_t)(q - end);
    if (gap < (size_t)n_lines || gap > 2 * (size_t)n_lines)
        return false;
    for (const char *p = end; p < q; p++)
        if (*p && *p != '\r' && *p != '\n') /* a byte the value lost at its NUL */
            return false;
    return true;
}

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    HeaderScan *scan = cls;
    if ((key && strlen(key) != key_size) || (value && strlen(value) != value_size))
        scan->nul = true;
    if (key && scan->prev_end && !only_line_ends(scan, scan->prev_end, key, 1))
        scan->nul = true;
    scan->prev_end = value ? value + value_size : NULL;
    if (key && !is_token(key))
        scan->bad_name = true;
    if (key && strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
        scan->content_length++;
    if (key && strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
        scan->host = true;
    return MHD_YES;
}

/* A request that RFC 9112 says to refuse with 400 and that MHD answers: HTTP/1.1 without Host
 * (3.2), more than one Content-Length (6.3: a request smuggling vector), a NUL byte in a header
 * (5: field values never hold one; MHD would cut the value there and go on), white space
 * between a header's name and its colon (5.1: MHD keeps "Content-Length " as another header,
 * and the body would be read as the next request). method is the
 * handler's, the start of the request as MHD keeps it. */
static bool malformed(struct MHD_Connection *c, const char *method, const char *version)
{
    HeaderScan scan = {0};
    const union MHD_ConnectionInfo *size =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (size) {
        scan.block = method;
        scan.block_end = method + size->header_size;
    }
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, scan_header, &scan);
    /* the last header: its line end and the empty line */
    if (scan.prev_end && !only_line_ends(&scan, scan.prev_end, scan.block_end, 2))
        scan.nul = true;
    return scan.nul || scan.bad_name || scan.content_length > 1 ||
           (strcmp(version, MHD_HTTP_VERSION_1_1) == 0 && !scan.host);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_size, void **con_cls)
{
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
        if (malformed(c, method, version))
            return reply(c, MHD_HTTP_BAD_REQUEST, "text/plain", "bad request\n", 12, false);
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
    if (!authorized(h, c))
        return refuse(c);
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

    /* the last rendered exposition, then this process as it is now (process_*) */
    _cleanup_free_ char *proc = bm_process_render();
    size_t proc_len = strlen(proc);
    pthread_mutex_lock(&h->lock);
    size_t len = h->metrics_len;
    char *copy = malloc(len + proc_len + 1);
    if (copy) {
        memcpy(copy, h->metrics, len);
        memcpy(copy + len, proc, proc_len);
        len += proc_len;
    }
    pthread_mutex_unlock(&h->lock);
    if (!copy)
        return MHD_NO;
    if (wants_gzip(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING))) {
        size_t zlen;
        char *z = gzip(copy, len, &zlen);
        if (z) {
            free(copy);
            return reply_metrics(c, z, zlen, true);
        }
    }
    return reply_metrics(c, copy, len, false);
}

/* libmicrohttpd's error log. It reports every malformed request and failed TLS handshake,
 * i.e. whatever anyone who can reach the port sends: at most one message is printed per
 * BM_HTTP_LOG_INTERVAL_S, with the count of those dropped before it. While a daemon starts,
 * the message is kept for the error report instead. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    BmHttp *h = cls;
    char msg[512], shown[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' ' || msg[n - 1] == '.'))
        msg[--n] = '\0';
    pthread_mutex_lock(&h->log_lock);
    if (h->log_capture) {
        free(h->log_capture);
        h->log_capture = bm_strdup(msg);
        pthread_mutex_unlock(&h->log_lock);
        return;
    }
    uint64_t now = bm_now_mono_ns();
    if (h->log_last_ns && now - h->log_last_ns < BM_HTTP_LOG_INTERVAL_S * 1000000000ull) {
        h->log_dropped++;
        pthread_mutex_unlock(&h->log_lock);
        return;
    }
    bm_printable(msg, shown, sizeof(shown));
    if (h->log_dropped)
        bm_log(LOG_WARNING,
               "balloonmgr: agent: libmicrohttpd: %s (%lu more of its messages dropped since "
               "the last one)",
               shown, h->log_dropped);
    else
        bm_log(LOG_WARNING, "balloonmgr: agent: libmicrohttpd: %s", shown);
    h->log_last_ns = now;
    h->log_dropped = 0;
    pthread_mutex_unlock(&h->log_lock);
}

/* A listening TCP socket on addr. Returns the fd or -errno. */
static int open_listener(const struct sockaddr_storage *addr, unsigned len)
{
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)addr;
    bool any = addr->ss_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&v6->sin6_addr);
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 && any && errno == EAFNOSUPPORT) {
        /* ":PORT" on a host without IPv6: every IPv4 address */
        struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = v6->sin6_port,
                                 .sin_addr.s_addr = htonl(INADDR_ANY)};
        struct sockaddr_storage ss = {0};
        memcpy(&ss, &v4, sizeof(v4));
        return open_listener(&ss, sizeof(v4));
    }
    if (fd < 0)
        return -errno;
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* ":PORT" and "[::]:PORT" take IPv4 too (as Go exporters do), other IPv6 addresses only
     * themselves */
    if (addr->ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, any ? &zero : &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)addr, len) < 0 || listen(fd, SOMAXCONN) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

/* ---- connections: a whole-request deadline, and room kept for new clients ---- */

static bool same_host(const struct sockaddr_storage *a, const struct sockaddr *b)
{
    if (a->ss_family != b->sa_family)
        return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
    return false;
}

/* How many open (not closing) connections addr has. Under conn_lock. */
static unsigned count_host(const BmHttp *h, const struct sockaddr *addr)
{
    unsigned n = 0;
    for (size_t i = 0; i < HARD_LIMIT; i++)
        n += h->slots[i].used && !h->slots[i].closing && same_host(&h->slots[i].addr, addr);
    return n;
}

/* Closes slot i's connection (its thread sees the end of the stream). Under conn_lock. */
static void close_slot(Slot *s)
{
    shutdown(s->fd, SHUT_RDWR);
    s->closing = true;
}

/* libmicrohttpd's accept policy. Below BM_HTTP_SLOTS open connections: yes. At it: the client
 * holding the most connections gives up the one that waited longest for its request, when
 * the new client holds fewer (so a scraper always gets in, however many addresses an attacker
 * trickles from); else no. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
    (void)len;
    BmHttp *h = cls;
    pthread_mutex_lock(&h->conn_lock);
    unsigned open = 0, used = 0;
    for (size_t i = 0; i < HARD_LIMIT; i++) {
        used += h->slots[i].used;
        open += h->slots[i].used && !h->slots[i].closing;
    }
    enum MHD_Result ok = MHD_YES;
    if (used >= HARD_LIMIT) {
        ok = MHD_NO;
    } else if (open >= BM_HTTP_SLOTS) {
        unsigned mine = count_host(h, addr), most = 0;
        Slot *victim = NULL;
        for (size_t i = 0; i < HARD_LIMIT; i++) {
            Slot *s = &h->slots[i];
            if (!s->used || s->closing)
                continue;
            unsigned n = count_host(h, (const struct sockaddr *)&s->addr);
            if (n > most || (n == most && victim && s->deadline_ns < victim->deadline_ns)) {
                most = n;
                victim = s;
            }
        }
        if (victim && mine < most)
            close_slot(victim);
        else
            ok = MHD_NO;
    }
    pthread_mutex_unlock(&h->conn_lock);
    return ok;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    BmHttp *h = cls;
    pthread_mutex_lock(&h->conn_lock);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fdi =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ai =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        int fd = fdi ? fcntl(fdi->connect_fd, F_DUPFD_CLOEXEC, 3) : -1;
        for (size_t i = 0; i < HARD_LIMIT && fd >= 0; i++) {
            Slot *s = &h->slots[i];
            if (s->used)
                continue;
            *s = (Slot){.used = true, .fd = fd, .conn = c,
                        .deadline_ns = bm_now_mono_ns() + BM_HTTP_REQUEST_TIMEOUT_S * 1000000000ull};
            if (ai && ai->client_addr) {
                size_t alen = ai->client_addr->sa_family == AF_INET6
                                  ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
                memcpy(&s->addr, ai->client_addr, alen);
            }
            *socket_context = s;
            fd = -1;
        }
        if (fd >= 0)
            close(fd); /* no slot (cannot happen below HARD_LIMIT): not watched */
    } else if (*socket_context) {
        Slot *s = *socket_context;
        close(s->fd);
        *s = (Slot){0};
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&h->conn_lock);
}

/* A request answered (or given up): the next one on the connection gets a new deadline. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)con_cls, (void)toe;
    BmHttp *h = cls;
    pthread_mutex_lock(&h->conn_lock);
    for (size_t i = 0; i < HARD_LIMIT; i++)
        if (h->slots[i].used && h->slots[i].conn == c)
            h->slots[i].deadline_ns =
                bm_now_mono_ns() + BM_HTTP_REQUEST_TIMEOUT_S * 1000000000ull;
    pthread_mutex_unlock(&h->conn_lock);
}

/* Closes the connections whose request is past its deadline, however it trickles. */
static void *watch(void *arg)
{
    BmHttp *h = arg;
    pthread_mutex_lock(&h->watch_lock);
    while (!h->watch_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WATCH_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&h->watch_cond, &h->watch_lock, &ts);
        if (h->watch_stop)
            break;
        uint64_t now = bm_now_mono_ns();
        pthread_mutex_lock(&h->conn_lock);
        for (size_t i = 0; i < HARD_LIMIT; i++) {
            Slot *s = &h->slots[i];
            if (s->used && !s->closing && now > s->deadline_ns)
                close_slot(s);
        }
        pthread_mutex_unlock(&h->conn_lock);
    }
    pthread_mutex_unlock(&h->watch_lock);
    return NULL;
}

/* A daemon serving on a dup() of h's socket listen_fd with t. Returns it, or NULL with the
 * reason. */
static struct MHD_Daemon *start_daemon(BmHttp *h, int listen_fd, const Tls *t)
{
    int fd = fcntl(listen_fd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) {
        bm_error(-errno, "cannot serve on %s: %s", h->listen, strerror(errno));
        return NULL;
    }
    /* MHD_USE_ITC: MHD_stop_daemon() wakes its thread through its own channel rather than by
     * shutdown() of the listening socket, which would end it for every daemon on it.
     * A thread per connection (at most BM_HTTP_SLOTS open, small stacks): a bcrypt check of a
     * wrong password (~50 ms at cost 10) then delays only its own connection, not Prometheus'
     * scrape. on_accept() keeps room for new clients, watch() ends requests past their
     * deadline. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    struct MHD_OptionItem tls_opts[] = {
        {t->tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, t->cert_pem},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, t->key_pem},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, t->priorities},
        {MHD_OPTION_END, 0, NULL},
    };
    if (t->tls)
        flags |= MHD_USE_TLS;
    pthread_mutex_lock(&h->log_lock);
    h->log_capture = bm_strdup("");
    pthread_mutex_unlock(&h->log_lock);
    struct MHD_Daemon *d = MHD_start_daemon(flags, 0, on_accept, h, handle, h,
                                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
                                            MHD_OPTION_LISTEN_SOCKET, fd,
                                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)HARD_LIMIT,
                                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)16,
                                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)BM_HTTP_REQUEST_TIMEOUT_S,
                                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768,
                                            MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024),
                                            MHD_OPTION_UNESCAPE_CALLBACK, unescape, h,
                                            MHD_OPTION_ARRAY, tls_opts,
                                            MHD_OPTION_END);
    pthread_mutex_lock(&h->log_lock);
    _cleanup_free_ char *why = TAKE_PTR(h->log_capture);
    pthread_mutex_unlock(&h->log_lock);
    if (!d) {
        close(fd);
        bm_error(-EIO, "cannot serve on %s: libmicrohttpd: %s", h->listen,
                 why && *why ? why : "failed to start");
    }
    return d;
}

static void tls_clear(Tls *t)
{
    free(t->cert_pem);
    free(t->key_pem);
    free(t->priorities);
    *t = (Tls){0};
}

/* The TLS settings of wc (NULL: plain HTTP). */
static void tls_from_config(const BmWebConfig *wc, Tls *ret)
{
    *ret = (Tls){0};
    if (!wc || !wc->tls)
        return;
    ret->tls = true;
    ret->cert_pem = bm_strdup(wc->cert_pem ? wc->cert_pem : "");
    ret->key_pem = bm_strdup(wc->key_pem ? wc->key_pem : "");
    ret->priorities = bm_webconfig_tls_priorities(wc);
}

static bool tls_same(const Tls *a, const Tls *b)
{
    if (a->tls != b->tls)
        return false;
    return !a->tls || (!strcmp(a->cert_pem, b->cert_pem) && !strcmp(a->key_pem, b->key_pem) &&
                       !strcmp(a->priorities, b->priorities));
}

/* Whether this libmicrohttpd can serve wc. Returns 0 or -ENOTSUP with the reason. */
static int check_features(const BmWebConfig *wc)
{
    if (wc && wc->tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return bm_error(-ENOTSUP, "this libmicrohttpd was built without TLS support, which "
                                  "tls_server_config needs");
    if (wc && wc->n_users && MHD_is_feature_supported(MHD_FEATURE_BASIC_AUTH) != MHD_YES)
        return bm_error(-ENOTSUP, "this libmicrohttpd was built without basic auth support, "
                                  "which basic_auth_users needs");
    return 0;
}

/* What a web config needs before it is served: the features it uses, its users' hashes. */
static int prepare(const BmWebConfig *wc, BmBasicAuth **ret_auth)
{
    int r = check_features(wc);
    if (r < 0)
        return r;
    return bm_basic_auth_new(wc, ret_auth);
}

/* The port of a sockaddr_in or sockaddr_in6, host order. */
static uint16_t addr_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)ss)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

static void set_addr_port(struct sockaddr_storage *ss, uint16_t port)
{
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

/* The port a listening socket is bound to (0 if getsockname() fails). */
static uint16_t bound_port(int fd)
{
    struct sockaddr_storage ss = {0};
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return 0;
    return addr_port(&ss);
}

int bm_http_start(const char *listen, const BmWebConfig *wc, BmHttp **ret)
{
    BmListenAddrs addrs;
    int r = bm_http_resolve_listen(listen, &addrs);
    if (r < 0)
        return bm_error_prefix(r, "--listen '%s'", listen);
    BmBasicAuth *auth = NULL;
    r = prepare(wc, &auth);
    if (r < 0)
        return r;
    BmHttp *h = bm_malloc0(sizeof(*h));
    for (size_t i = 0; i < BM_HTTP_LISTEN_MAX; i++)
        h->listen_fd[i] = -1;
    pthread_mutex_init(&h->lock, NULL);
    pthread_mutex_init(&h->log_lock, NULL);
    pthread_mutex_init(&h->conn_lock, NULL);
    pthread_mutex_init(&h->watch_lock, NULL);
    pthread_cond_init(&h->watch_cond, NULL);
    h->watching = pthread_create(&h->watcher, NULL, watch, h) == 0;
    h->metrics = bm_strdup("");
    h->listen = bm_strdup(listen);
    h->auth = auth;
    for (size_t i = 0; i < addrs.n; i++) {
        /* port 0: the first socket's free port, and the same one for a name's other addresses */
        if (h->n_listen && addr_port(&addrs.addr[i]) == 0)
            set_addr_port(&addrs.addr[i], bound_port(h->listen_fd[0]));
        int fd = open_listener(&addrs.addr[i], addrs.len[i]);
        /* a name's address of a family this host lacks (::1 without IPv6) is left out */
        if (fd < 0 && addrs.n > 1 && (fd == -EAFNOSUPPORT || fd == -EADDRNOTAVAIL))
            continue;
        if (fd < 0) {
            char a[64];
            bm_http_format_addr(&addrs.addr[i], a, sizeof(a));
            bm_http_stop(h);
            if (addrs.n > 1)
                return bm_error(fd, "cannot listen on %s (%s): %s", listen, a, strerror(-fd));
            return bm_error(fd, "cannot listen on %s: %s", listen, strerror(-fd));
        }
        h->listen_fd[h->n_listen++] = fd;
    }
    if (!h->n_listen) {
        bm_http_stop(h);
        return bm_error(-EADDRNOTAVAIL, "cannot listen on %s: none of its addresses is this host's", listen);
    }
    tls_from_config(wc, &h->tls);
    for (size_t i = 0; i < h->n_listen; i++) {
        h->daemon[i] = start_daemon(h, h->listen_fd[i], &h->tls);
        if (!h->daemon[i]) {
            bm_http_stop(h);
            return -EIO;
        }
    }
    *ret = h;
    return 0;
}

int bm_http_reconfigure(BmHttp *h, const BmWebConfig *wc, bool *ret_restarted)
{
    *ret_restarted = false;
    BmBasicAuth *auth = NULL;
    int r = prepare(wc, &auth);
    if (r < 0)
        return r;
    Tls t;
    tls_from_config(wc, &t);
    if (!tls_same(&t, &h->tls)) {
        /* a second daemon on each socket: connections keep being accepted (by either)
         * until the old one stops; in-flight requests of the old one are cut */
        struct MHD_Daemon *d[BM_HTTP_LISTEN_MAX] = {0};
        for (size_t i = 0; i < h->n_listen; i++) {
            d[i] = start_daemon(h, h->listen_fd[i], &t);
            if (!d[i]) {
                for (size_t k = 0; k < i; k++)
                    MHD_stop_daemon(d[k]);
                tls_clear(&t);
                bm_basic_auth_unref(auth);
                return -EIO;
            }
        }
        for (size_t i = 0; i < h->n_listen; i++) {
            MHD_stop_daemon(h->daemon[i]); /* with MHD_USE_ITC, it leaves the socket listening */
            h->daemon[i] = d[i];
        }
        tls_clear(&h->tls);
        h->tls = t;
        *ret_restarted = true;
    } else {
        tls_clear(&t);
    }
    pthread_mutex_lock(&h->lock);
    BmBasicAuth *old = h->auth;
    h->auth = auth;
    pthread_mutex_unlock(&h->lock);
    bm_basic_auth_unref(old);
    return 0;
}

const char *bm_http_addresses(const BmHttp *h, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < h->n_listen && o < n; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        char a[64] = "?";
        if (getsockname(h->listen_fd[i], (struct sockaddr *)&ss, &len) == 0)
            bm_http_format_addr(&ss, a, sizeof(a));
        o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? ", " : "", a);
    }
    return buf;
}

bool bm_http_tls(const BmHttp *h)
{
    return h->tls.tls;
}

void bm_http_give_metrics(BmHttp *h, char *text)
{
    size_t len = strlen(text);
    pthread_mutex_lock(&h->lock);
    char *old = h->metrics;
    h->metrics = text;
    h->metrics_len = len;
    pthread_mutex_unlock(&h->lock);
    free(old);
}

void bm_http_set_metrics(BmHttp *h, const char *text)
{
    bm_http_give_metrics(h, bm_strdup(text));
}

void bm_http_stop(BmHttp *h)
{
    if (!h)
        return;
    bm_basic_auth_shutdown(); /* connections waiting for a bcrypt check fail at once */
    for (size_t i = 0; i < BM_HTTP_LISTEN_MAX; i++)
        if (h->daemon[i])
            MHD_stop_daemon(h->daemon[i]);
    if (h->watching) {
        pthread_mutex_lock(&h->watch_lock);
        h->watch_stop = true;
        pthread_cond_signal(&h->watch_cond);
        pthread_mutex_unlock(&h->watch_lock);
        pthread_join(h->watcher, NULL);
    }
    pthread_mutex_destroy(&h->conn_lock);
    pthread_mutex_destroy(&h->watch_lock);
    pthread_cond_destroy(&h->watch_cond);
    for (size_t i = 0; i < BM_HTTP_LISTEN_MAX; i++)
        if (h->listen_fd[i] >= 0)
            close(h->listen_fd[i]);
    pthread_mutex_destroy(&h->lock);
    pthread_mutex_destroy(&h->log_lock);
    bm_basic_auth_unref(h->auth);
    tls_clear(&h->tls);
    free(h->listen);
    free(h->metrics);
    free(h);
}
