/* The metrics endpoint (libmicrohttpd): GET/HEAD /metrics serves the last rendered exposition;
 * a scrape never calls libvirt. A web config (webconfig.h) adds TLS and basic auth. */
#pragma once

#include <stddef.h>
#include <sys/socket.h>

#include <stdbool.h>
#include <stdint.h>

#include "webconfig.h"

typedef struct BmHttp BmHttp;

#define BM_HTTP_DEFAULT_LISTEN "127.0.0.1:9736"
/* libmicrohttpd's own messages (malformed requests, failed TLS handshakes) are printed at
 * most once per this many seconds, with a count of those dropped in between. */
#define BM_HTTP_LOG_INTERVAL_S 60
/* Connections served at a time. When all are taken, a new client that holds fewer
 * connections than the client holding the most gets in, and that client's connection that
 * waited longest for its request is closed: however many addresses hold connections, a
 * scraper is answered. */
#define BM_HTTP_SLOTS 64
/* Each request must be in and answered within this many seconds of the connection's start or
 * the previous answer on it (a client trickling a byte a second is cut off too); an idle
 * connection is closed after as long. */
#define BM_HTTP_REQUEST_TIMEOUT_S 10

/* Parses "ADDR:PORT" ("127.0.0.1:9736", "[::1]:9736", "0.0.0.0:9736") or ":PORT" (every address,
 * IPv6 and IPv4, as "[::]:PORT": the listener takes IPv4 too); PORT 0 to 65535, 0 being a free
 * port the kernel picks (bm_http_addresses() says which). Returns 0 and fills
 * ret_addr (struct sockaddr_storage) / *ret_len, or -EINVAL with the reason. */
int bm_http_parse_listen(const char *s, void *ret_addr, unsigned *ret_len);

/* At most this many addresses are served for one --listen (a host name's addresses). */
#define BM_HTTP_LISTEN_MAX 8

typedef struct {
    struct sockaddr_storage addr[BM_HTTP_LISTEN_MAX];
    unsigned len[BM_HTTP_LISTEN_MAX];
    size_t n;
} BmListenAddrs;

/* What --listen / --web.listen-address names, as Prometheus exporters take it: an address as
 * bm_http_parse_listen() takes it, or "HOST:PORT" with a host name (getaddrinfo(3):
 * "localhost:9736" is 127.0.0.1 and ::1), each of its IPv4 and IPv6 addresses once, at most
 * BM_HTTP_LISTEN_MAX. Returns 0 and *ret, or -EINVAL with the reason (a name that does not
 * resolve: getaddrinfo's). */
int bm_http_resolve_listen(const char *s, BmListenAddrs *ret);

/* "127.0.0.1:9736" or "[::1]:9736" of a struct sockaddr_storage, into buf (size n). */
void bm_http_format_addr(const void *addr, char *buf, size_t n);

/* Starts serving on listen (bm_http_resolve_listen(): every address of a host name), with the TLS and users of wc (loaded by bm_webconfig_load(); NULL:
 * plain HTTP, no auth). With users, every path answers 401 with WWW-Authenticate: Basic
 * realm="balloonmgr" to requests without their credentials. Returns 0 and *ret, or -errno
 * with the reason: -EINVAL bad listen address, -ENOTSUP libmicrohttpd without TLS or basic
 * auth, else e.g. the port in use. Port 0 binds a free port, the same one for each address of a
 * host name (-EADDRINUSE if another address has it taken). */
int bm_http_start(const char *listen, const BmWebConfig *wc, BmHttp **ret);

/* Serves with wc from now on (NULL: plain HTTP, no auth). New users apply to the next request.
 * When TLS is turned on or off or its certificate, key or versions change, a new server is
 * started on the same listening socket and the old one stopped (*ret_restarted; its
 * connections are cut). Returns 0, or -errno with the reason, and then nothing changed. Call
 * from one thread at a time. */
int bm_http_reconfigure(BmHttp *h, const BmWebConfig *wc, bool *ret_restarted);

/* The addresses it listens on, "127.0.0.1:9736, [::1]:9736", into buf (size n). Returns buf. */
const char *bm_http_addresses(const BmHttp *h, char *buf, size_t n);

/* Whether it serves HTTPS. */
bool bm_http_tls(const BmHttp *h);

/* Replaces what /metrics serves (copied). Thread-safe. */
void bm_http_set_metrics(BmHttp *h, const char *text);

/* The same, taking text (malloc'd) over instead of copying it: one copy of the exposition is
 * kept. Thread-safe. */
void bm_http_give_metrics(BmHttp *h, char *text);

/* Stops serving and frees. NULL-safe. */
void bm_http_stop(BmHttp *h);
