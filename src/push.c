#define _GNU_SOURCE
#include "push.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "file.h"
#include "util.h"

int bm_push_textfile(const char *dir, const char *text)
{
    _cleanup_free_ char *path = bm_asprintf("%s/balloonmgr.prom", dir);
    /* the collector reads only *.prom: the temporary name must not end in .prom */
    _cleanup_free_ char *tmp = bm_asprintf("%s/.balloonmgr.prom.XXXXXX", dir);
    int r = bm_file_write_atomic(path, tmp, text);
    if (r < 0 && bm_file_not_regular(r))
        return bm_error_prefix(r, "%s", path);
    if (r < 0)
        return bm_error(r, "%s: cannot write: %s", path, strerror(-r));
    return 0;
}

int bm_push_check_textfile(const char *dir)
{
    if (!*dir)
        return bm_error(-EINVAL, "empty directory name");
    int r = bm_file_check_dir(dir);
    if (r < 0)
        return bm_error(-EINVAL, "%s", bm_error_detail(r)); /* bm_file_check_dir()'s detail */
    _cleanup_free_ char *path = bm_asprintf("%s/balloonmgr.prom", dir);
    r = bm_file_check_replaceable(path);
    if (r < 0)
        return bm_error(-EINVAL, "%s: %s", path, bm_error_detail(r));
    return 0;
}

char *bm_push_redact_url(const char *url)
{
    const char *auth = strstr(url, "://");
    auth = auth ? auth + 3 : url;
    /* on the text, before any parse: a password may hold '/', '?', '#' or '@', which a parser
     * takes for the path, query or fragment; the user information ends at the last '@' (what
     * follows one in a path is masked too: too much hidden rather than a password shown) */
    const char *at = strrchr(auth, '@');
    const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    if (!colon)
        return bm_strdup(url);
    return bm_asprintf("%.*s:***%s", (int)(colon - url), url, at);
}

int bm_push_check_url(const char *url)
{
    CURLU *u = curl_url();
    if (!u)
        return bm_error(-ENOMEM, "out of memory");
    char *scheme = NULL, *host = NULL;
    CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, 0);
    if (uc == CURLUE_OK)
        uc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
    if (uc == CURLUE_OK)
        uc = curl_url_get(u, CURLUPART_HOST, &host, 0);
    int r = 0;
    char *query = NULL, *fragment = NULL;
    if (uc == CURLUE_OK) {
        curl_url_get(u, CURLUPART_QUERY, &query, 0);
        curl_url_get(u, CURLUPART_FRAGMENT, &fragment, 0);
    }
    if (!*url)
        r = bm_error(-EINVAL, "empty URL");
    else if (uc != CURLUE_OK)
        r = bm_error(-EINVAL, "not a URL: %s", curl_url_strerror(uc));
    else if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
        r = bm_error(-EINVAL, "scheme '%s' is not supported: expected an http:// or https:// URL",
                     scheme);
    else if (query || fragment)
        r = bm_error(-EINVAL, "has a %s ('%c...'): the job path is appended to the URL, give "
                     "the Pushgateway's address only", query ? "query" : "fragment",
                     query ? '?' : '#');
    curl_free(query);
    curl_free(fragment);
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(u);
    return r;
}

typedef struct {
    char buf[512];
    size_t len;
} Body;

static size_t keep_body(char *p, size_t size, size_t n, void *userdata)
{
    Body *b = userdata;
    size_t k = size * n, room = sizeof(b->buf) - 1 - b->len;
    size_t take = k < room ? k : room;
    memcpy(b->buf + b->len, p, take);
    b->len += take;
    b->buf[b->len] = '\0';
    return k;
}

int bm_push_gateway(const char *url, const char *instance, const char *text, unsigned timeout_s)
{
    static bool inited;
    if (!inited) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        inited = true;
    }
    CURL *c = curl_easy_init();
    if (!c)
        return bm_error(-ENOMEM, "cannot initialise libcurl");
    size_t ulen = strlen(url);
    char *esc = curl_easy_escape(c, instance, 0);
    _cleanup_free_ char *full = bm_asprintf("%.*s/metrics/job/balloonmgr/instance/%s",
                                            (int)(ulen && url[ulen - 1] == '/' ? ulen - 1 : ulen),
                                            url, esc ? esc : "unknown");
    curl_free(esc);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: text/plain; version=0.0.4");
    Body body = {0};
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, full);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(text));
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)timeout_s);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)(timeout_s < 5 ? timeout_s : 5));
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode cr = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    /* messages show the URL without its password */
    _cleanup_free_ char *shown = bm_push_redact_url(full);
    if (cr != CURLE_OK)
        return bm_error(cr == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO, "push to %s: %s", shown,
                        errbuf[0] ? errbuf : curl_easy_strerror(cr));
    if (status < 200 || status >= 300) {
        for (char *p = body.buf; *p; p++)
            if (*p == '\n')
                *p = ' ';
        return bm_error(-EIO, "push to %s: HTTP %ld %s", shown, status, body.buf);
    }
    return 0;
}
