#include "size.h"

#include <ctype.h>
#include <inttypes.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "error.h"

/* Multiplier of a unit suffix (virsh's virScaleInteger), 0 if the suffix is unknown. */
static uint64_t unit_scale(const char *suffix, uint64_t default_scale)
{
    if (!*suffix)
        return default_scale;
    if (!strcasecmp(suffix, "b") || !strcasecmp(suffix, "byte") || !strcasecmp(suffix, "bytes"))
        return 1;

    uint64_t base;
    if (!suffix[1] || !strcasecmp(suffix + 1, "iB"))
        base = 1024;
    else if (tolower((unsigned char)suffix[1]) == 'b' && !suffix[2])
        base = 1000;
    else
        return 0;

    static const char order[] = "kmgtpe";
    const char *pos = strchr(order, tolower((unsigned char)suffix[0]));
    if (!pos || !*pos)
        return 0;
    uint64_t scale = 1;
    for (const char *p = order; p <= pos; p++)
        scale *= base;
    return scale;
}

/* Parses "DIGITS[.DIGITS]SUFFIX" into bytes (percent handled by the caller). */
static int parse_magnitude(const char *s, uint64_t default_scale, bool allow_percent,
                           uint64_t percent_of, uint64_t *ret_bytes)
{
    const char *p = s;
    uint64_t whole = 0, frac = 0, frac_div = 1;
    bool digits = false;

    for (; isdigit((unsigned char)*p); p++, digits = true) {
        if (__builtin_mul_overflow(whole, 10, &whole) ||
            __builtin_add_overflow(whole, (uint64_t)(*p - '0'), &whole))
            return bm_error(-ERANGE, "too large");
    }
    if (*p == '.') {
        p++;
        for (; isdigit((unsigned char)*p); p++, digits = true) {
            if (frac_div < 1000000000ull) { /* nine decimals are plenty; ignore the rest */
                frac = frac * 10 + (uint64_t)(*p - '0');
                frac_div *= 10;
            }
        }
    }
    if (!digits) {
        if (*s == '-' || *s == '+')
            return bm_error(-EINVAL, "sign not allowed here");
        return bm_error(-EINVAL, "not a number");
    }

    if (*p == '%') {
        if (!allow_percent)
            return bm_error(-EINVAL, "a percentage is not allowed here");
        if (p[1])
            return bm_error(-EINVAL, "unexpected '%s' after '%%'", p + 1);
        /* percent_of * (whole + frac/frac_div) / 100, in 128 bits; a percentage so large
         * that even those overflow is too large, not wrapped into a plausible size */
        unsigned __int128 v;
        if (__builtin_mul_overflow((unsigned __int128)percent_of * whole,
                                   (unsigned __int128)frac_div, &v) ||
            __builtin_add_overflow(v, (unsigned __int128)percent_of * frac, &v))
            return bm_error(-ERANGE, "too large");
        v /= (unsigned __int128)frac_div * 100;
        if (v > UINT64_MAX)
            return bm_error(-ERANGE, "too large");
        *ret_bytes = (uint64_t)v;
        return 0;
    }

    uint64_t scale = unit_scale(p, default_scale);
    if (!scale)
        return bm_error(-EINVAL, "unknown unit '%s'", p);

    unsigned __int128 v = (unsigned __int128)whole * scale +
                          (unsigned __int128)frac * scale / frac_div;
    if (v > UINT64_MAX)
        return bm_error(-ERANGE, "too large");
    *ret_bytes = (uint64_t)v;
    return 0;
}

int bm_size_parse(const char *s, const BmSizeContext *ctx, uint64_t *ret_bytes)
{
    if (!s || !*s)
        return bm_error(-EINVAL, "empty size");
    for (const char *c = s; *c; c++)
        if (isspace((unsigned char)*c))
            return bm_error(-EINVAL, "contains white space");

    int sign = 0;
    if (*s == '+' || *s == '-') {
        if (!ctx)
            return bm_error(-EINVAL, "a relative size is not allowed here");
        sign = *s == '+' ? 1 : -1;
        s++;
    }

    /* "-1" would be 1 KiB, which nobody means: a relative change says its unit */
    if (sign && *s && strspn(s, "0123456789.") == strlen(s))
        return bm_error(-EINVAL, "a relative size needs a unit: '%c%s' would be %s KiB (a bare "
                        "number is KiB); write '%c%sK' for that, or '%c%sM', '%c%sG'",
                        sign > 0 ? '+' : '-', s, s, sign > 0 ? '+' : '-', s, sign > 0 ? '+' : '-', s,
                        sign > 0 ? '+' : '-', s);
    uint64_t magnitude;
    int r = parse_magnitude(s, 1024, ctx != NULL, ctx ? ctx->max_bytes : 0, &magnitude);
    if (r < 0)
        return r;

    uint64_t bytes = magnitude;
    if (sign > 0) {
        if (__builtin_add_overflow(ctx->current_bytes, magnitude, &bytes))
            return bm_error(-ERANGE, "too large");
    } else if (sign < 0) {
        if (magnitude > ctx->current_bytes)
            return bm_error(-ERANGE, "would be negative (current size is %s)",
                            bm_size_format_exact(ctx->current_bytes, (char[BM_SIZE_EXACT_LEN]){""},
                                                 BM_SIZE_EXACT_LEN));
        bytes = ctx->current_bytes - magnitude;
    }

    if (bytes == 0)
        return bm_error(-ERANGE, "must be greater than 0");
    /* libvirt takes balloon targets in KiB: less than 1 KiB would be a target of 0 */
    if (ctx && bytes < 1024)
        return bm_error(-ERANGE, "less than 1 KiB (balloon targets are whole KiB)");
    if (ctx && bytes > ctx->max_bytes)
        return bm_error(-ERANGE, "exceeds the maximum of %s",
                        bm_size_format_exact(ctx->max_bytes, (char[BM_SIZE_EXACT_LEN]){""},
                                             BM_SIZE_EXACT_LEN));
    *ret_bytes = bytes;
    return 0;
}

int bm_size_parse_plain(const char *s, uint64_t default_scale, uint64_t *ret_bytes)
{
    if (!s || !*s)
        return bm_error(-EINVAL, "empty size");
    for (const char *c = s; *c; c++)
        if (isspace((unsigned char)*c))
            return bm_error(-EINVAL, "contains white space");
    return parse_magnitude(s, default_scale, false, 0, ret_bytes);
}

const char *bm_size_format(uint64_t bytes, char *buf, size_t n)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    unsigned u = 0;
    uint64_t div = 1;
    while (u + 1 < sizeof(units) / sizeof(units[0]) && bytes / div >= 1024) {
        div *= 1024;
        u++;
    }
    uint64_t whole = bytes / div;
    /* one decimal, rounded; "1023.96 MiB" rounds to "1024.0 MiB", which is fine */
    uint64_t tenths = (uint64_t)(((unsigned __int128)(bytes % div) * 10 + div / 2) / div);
    if (tenths == 10) {
        whole++;
        tenths = 0;
    }
    if (tenths == 0)
        snprintf(buf, n, "%" PRIu64 " %s", whole, units[u]);
    else
        snprintf(buf, n, "%" PRIu64 ".%" PRIu64 " %s", whole, tenths, units[u]);
    return buf;
}

const char *bm_size_format_exact(uint64_t bytes, char *buf, size_t n)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    char shown[32];
    bm_size_format(bytes, shown, sizeof(shown));
    /* what it says, back in bytes: exact when that is bytes */
    unsigned long long whole = 0, tenths = 0;
    char unit[8] = "";
    if (sscanf(shown, "%llu.%llu %7s", &whole, &tenths, unit) != 3) {
        tenths = 0;
        sscanf(shown, "%llu %7s", &whole, unit);
    }
    unsigned __int128 said = 0;
    for (unsigned u = 0, div = 0; u < sizeof(units) / sizeof(units[0]) && !div; u++)
        if (strcmp(unit, units[u]) == 0) {
            said = ((unsigned __int128)whole * 10 + tenths) * ((unsigned __int128)1 << (10 * u));
            div = 1;
        }
    if (said == (unsigned __int128)bytes * 10)
        snprintf(buf, n, "%s", shown);
    else if (bytes % 1024 == 0)
        snprintf(buf, n, "%s (%" PRIu64 " KiB)", shown, bytes / 1024);
    else
        snprintf(buf, n, "%s (%" PRIu64 " bytes)", shown, bytes);
    return buf;
}

const char *bm_size_text(uint64_t bytes, char *buf)
{
    return bytes != UINT64_MAX ? bm_size_format(bytes, buf, BM_SIZE_TEXT_LEN) : "?";
}
