#define _GNU_SOURCE
#include "util.h"

#include <errno.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void bm_sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static void *oom(void)
{
    fputs("balloonmgr: out of memory\n", stderr);
    abort();
}

void *bm_malloc0(size_t size)
{
    void *p = calloc(1, size ? size : 1);
    return p ? p : oom();
}

void *bm_reallocarray(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total))
        return oom();
    void *q = realloc(p, total ? total : 1);
    return q ? q : oom();
}

char *bm_strdup(const char *s)
{
    char *p = strdup(s ? s : "");
    return p ? p : oom();
}

char *bm_asprintf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    return r < 0 ? oom() : s;
}

/* Writes s escaped into buf while whole characters fit in room bytes (plus a NUL); returns
 * the length written and sets *ret_done when all of s was written. */
static size_t escape_into(const char *s, char *buf, size_t room, bool *ret_done)
{
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)s;
    for (; p && *p; p++) {
        bool esc = *p < 0x20 || *p >= 0x7f || *p == '\\';
        size_t w = esc ? 4 : 1;
        if (o + w > room)
            break;
        if (esc)
            snprintf(buf + o, 5, "\\x%02x", *p);
        else
            buf[o] = (char)*p;
        o += w;
    }
    *ret_done = !p || !*p;
    return o;
}

const char *bm_printable(const char *s, char *buf, size_t n)
{
    if (n == 0)
        return buf;
    bool done;
    size_t o = escape_into(s, buf, n - 1, &done);
    if (!done && n > 4) { /* cut: say so, so a prefix is not taken for the whole name */
        o = escape_into(s, buf, n - 4, &done);
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

size_t bm_edit_distance(const char *a, size_t na, const char *b)
{
    size_t nb = strlen(b);
    if (na > nb + 2 || nb > na + 2 || na >= 32 || nb >= 32)
        return SIZE_MAX;
    size_t d[32][32];
    for (size_t i = 0; i <= na; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= nb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < v)
                v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[na][nb];
}

size_t bm_utf8_invalid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t k;
        unsigned min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            k = 1, min = 0x80, c &= 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2, min = 0x800, c &= 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3, min = 0x10000, c &= 0x07;
        } else {
            return i;
        }
        if (n - i <= k)
            return i;
        for (size_t j = 1; j <= k; j++) {
            if ((p[i + j] & 0xc0) != 0x80)
                return i;
            c = (c << 6) | (p[i + j] & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
            return i; /* overlong, beyond Unicode, or a surrogate */
        i += k + 1;
    }
    return SIZE_MAX;
}

size_t bm_utf8_cut(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    if (len < n)
        return len;
    /* s[n] exists (it may be the NUL): back off while it continues a character */
    size_t k = n;
    while (k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80)
        k--;
    return k;
}

/* The length of the valid UTF-8 character at s (at most n bytes), or 0 when there is none. */
static size_t utf8_char_len(const char *s, size_t n)
{
    unsigned char c = (unsigned char)*s;
    size_t k = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (k == 0 || k > n)
        return 0;
    return bm_utf8_invalid(s, k) == SIZE_MAX ? k : 0;
}

char *bm_utf8_sanitize(const char *s)
{
    size_t n = strlen(s ? s : ""), o = 0;
    char *out = bm_malloc0(n * 3 + 1);
    for (size_t i = 0; i < n;) {
        size_t k = utf8_char_len(s + i, n - i);
        if (k) {
            memcpy(out + o, s + i, k);
            o += k, i += k;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3); /* U+FFFD */
            o += 3, i++;
        }
    }
    out[o] = '\0';
    return out;
}

/* bm_escape_name(), and also the quote characters when quotes is set. */
static char *escape_name(const char *s, bool quotes)
{
    size_t n = strlen(s ? s : ""), o = 0;
    char *out = bm_malloc0(n * 4 + 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c >= 0x80 ? utf8_char_len(s + i, n - i) : 0;
        /* C1 controls (U+0080 to U+009F: CSI is one) are controls as well */
        if (k == 2 && c == 0xc2 && (unsigned char)s[i + 1] < 0xa0)
            k = 0;
        if (k) {
            memcpy(out + o, s + i, k);
            o += k, i += k;
        } else if (c < 0x20 || c >= 0x7f || c == '\\' || (quotes && (c == '\'' || c == '"'))) {
            o += (size_t)sprintf(out + o, "\\x%02x", c);
            i++;
        } else {
            out[o++] = (char)c;
            i++;
        }
    }
    out[o] = '\0';
    return out;
}

char *bm_escape_name(const char *s)
{
    return escape_name(s, false);
}

char *bm_escape_quoted(const char *s)
{
    return escape_name(s, true);
}

void bm_copy_name(char *dst, size_t size, const char *src)
{
    if (size == 0)
        return;
    size_t k = bm_utf8_cut(src ? src : "", size - 1);
    memcpy(dst, src ? src : "", k);
    dst[k] = '\0';
}
