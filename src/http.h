/* The metrics endpoint (libmicrohttpd): GET/HEAD /metrics serves the last rendered exposition;
 * a scrape never calls libvirt. */
#pragma once

#include <stdint.h>

typedef struct BmHttp BmHttp;

#define BM_HTTP_DEFAULT_LISTEN "127.0.0.1:9736"

/* Parses "ADDR:PORT" ("127.0.0.1:9736", "[::1]:9736", "0.0.0.0:9736"). Returns 0 and fills
 * ret_addr (struct sockaddr_storage) / *ret_len, or -EINVAL with the reason. */
int bm_http_parse_listen(const char *s, void *ret_addr, unsigned *ret_len);

/* Starts serving on listen. Returns 0 and *ret, or -errno with the reason (e.g. port in use). */
int bm_http_start(const char *listen, BmHttp **ret);

/* Replaces what /metrics serves (copied). Thread-safe. */
void bm_http_set_metrics(BmHttp *h, const char *text);

/* Stops serving and frees. NULL-safe. */
void bm_http_stop(BmHttp *h);
