#define _GNU_SOURCE
#include "policy.h"

#include "file.h"

#include <assert.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <strings.h>

#include "diag.h"
#include "error.h"
#include "size.h"

/* A policy file larger than this is not a policy file (and /dev/zero is not one either). */
/* Values are short tokens; longer ones are refused before any parsing. */
#define VALUE_MAX 64
#define MAX_STATS_AGE_MAX_S (24u * 3600)

const char *bm_timer_inflate_name(BmTimerInflate v)
{
    return v == BM_TIMER_INFLATE_ALWAYS ? "always"
           : v == BM_TIMER_INFLATE_NEVER ? "never"
                                         : "deflate-on-oom";
}

const char *bm_device_choice_name(BmDeviceChoice v)
{
    return v == BM_DEVICE_BALLOON ? "balloon" : v == BM_DEVICE_VIRTIO_MEM ? "virtio-mem" : "auto";
}

bool bm_verify_features_asks(BmVerifyFeatures v, bool xml_known, bool overridden)
{
    return v == BM_VERIFY_ALWAYS || (v == BM_VERIFY_AUTO && xml_known && overridden);
}

const char *bm_verify_features_name(BmVerifyFeatures v)
{
    return v == BM_VERIFY_ALWAYS ? "always" : v == BM_VERIFY_NEVER ? "never" : "auto";
}

/* --- values */

typedef struct PolicyKey PolicyKey;

/* How a key's value is read: into dst, a field of size bytes. Returns 0, or a negative errno
 * with the reason in the error detail. */
typedef struct {
    int (*parse)(const char *v, const PolicyKey *k, void *dst);
    size_t size;
    bool word;  /* a word, not a number: a sign is not refused first */
    bool sized; /* a size: a bare number is KiB (policy-lint warns about small ones) */
    const char *(*name)(int v); /* choices: the name of each value from 0 until a repeat */
} KeyType;

/* One policy key (systemd's ConfigTableItem): where it goes, how it is read, its default (as
 * policies/default.policy writes it) and its range. */
struct PolicyKey {
    const char *name;
    bool host; /* [host]; else [guest] and [domain "GLOB"] */
    const KeyType *type;
    size_t offset, size; /* the field: in BmPolicy for [host], else in BmGuestRules */
    const char *def;
    unsigned min, max; /* durations (seconds) and counts */
};

static int refuse_sign(const char *s)
{
    if (*s == '-')
        return bm_error(-ERANGE, "must not be negative");
    if (*s == '+')
        return bm_error(-EINVAL, "sign not allowed here");
    return 0;
}

/* DIGITS[.DIGITS] at s: the value is whole + frac / den (den a power of ten up to 10^9; later
 * decimals are dropped). *ret_end points after it. */
static int parse_decimal(const char *s, uint64_t *ret_whole, uint64_t *ret_frac, uint64_t *ret_den,
                         const char **ret_end)
{
    const char *p = s;
    uint64_t whole = 0, frac = 0, den = 1;
    bool digits = false;
    for (; *p >= '0' && *p <= '9'; p++, digits = true)
        if (__builtin_mul_overflow(whole, 10, &whole) ||
            __builtin_add_overflow(whole, (uint64_t)(*p - '0'), &whole))
            return bm_error(-ERANGE, "too large");
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, digits = true)
            if (den < 1000000000ull) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                den *= 10;
            }
    if (!digits)
        return bm_error(-EINVAL, "not a number");
    *ret_whole = whole;
    *ret_frac = frac;
    *ret_den = den;
    *ret_end = p;
    return 0;
}

static int parse_percent(const char *s, uint32_t *ret_permille)
{
    uint64_t whole = 0, frac = 0, den = 1;
    const char *p = s;
    int r = parse_decimal(s, &whole, &frac, &den, &p);
    if (r < 0 && r != -ERANGE)
        return r;
    if (r == -ERANGE || whole > 100)
        return bm_error(-ERANGE, "must be at most 100%%");
    if (*p != '%')
        return bm_error(-EINVAL, "unknown unit '%s'", p);
    if (p[1])
        return bm_error(-EINVAL, "unexpected '%s' after '%%'", p + 1);
    if (den > 10) {
        if (frac % (den / 10))
            return bm_error(-EINVAL, "at most one decimal in a percentage");
        frac /= den / 10;
        den = 10;
    }
    uint64_t permille = whole * 10 + (den == 10 ? frac : 0);
    if (permille > 1000)
        return bm_error(-ERANGE, "must be at most 100%%");
    *ret_permille = (uint32_t)permille;
    return 0;
}

/* A size ("512M", a bare number is KiB) or a percentage ("12.5%"). */
static int parse_amount(const char *s, const PolicyKey *k, void *dst)
{
    BmAmount *ret = dst;
    (void)k;
    if (strchr(s, '%')) {
        uint32_t permille = 0;
        int r = parse_percent(s, &permille);
        if (r < 0)
            return r;
        *ret = (BmAmount){.is_percent = true, .permille = permille};
        return 0;
    }
    uint64_t bytes;
    int r = bm_size_parse_plain(s, 1024, &bytes);
    if (r < 0)
        return r;
    *ret = (BmAmount){.bytes = bytes};
    return 0;
}

/* An amount that is not 0 (max_step). */
static int parse_step(const char *s, const PolicyKey *k, void *dst)
{
    BmAmount a;
    int r = parse_amount(s, k, &a);
    if (r < 0)
        return r;
    if (a.is_percent ? a.permille == 0 : a.bytes == 0)
        return bm_error(-ERANGE, "must be greater than 0 (use exclude to leave a domain alone)");
    *(BmAmount *)dst = a;
    return 0;
}

static const char *format_duration(unsigned s, char *buf, size_t n)
{
    if (s && s % 3600 == 0)
        snprintf(buf, n, "%uh", s / 3600);
    else if (s && s % 60 == 0)
        snprintf(buf, n, "%um", s / 60);
    else
        snprintf(buf, n, "%us", s);
    return buf;
}

/* "10s", "1m", "2h" or bare seconds, whole, within k's range. */
static int parse_duration(const char *s, const PolicyKey *k, void *dst)
{
    const char *p = s;
    uint64_t n = 0;
    bool huge = false;
    for (; *p >= '0' && *p <= '9'; p++)
        if (__builtin_mul_overflow(n, 10, &n) ||
            __builtin_add_overflow(n, (uint64_t)(*p - '0'), &n))
            huge = true;
    if (p == s)
        return bm_error(-EINVAL, "not a number");
    if (*p == '.')
        return bm_error(-EINVAL, "fractions are not allowed (use whole seconds)");
    uint64_t scale;
    if (!*p || strcmp(p, "s") == 0)
        scale = 1;
    else if (strcmp(p, "m") == 0)
        scale = 60;
    else if (strcmp(p, "h") == 0)
        scale = 3600;
    else
        return bm_error(-EINVAL, "unknown unit '%s' (use s, m or h)", p);

    uint64_t secs;
    if (huge || __builtin_mul_overflow(n, scale, &secs) || secs < k->min || secs > k->max) {
        char lo[16], hi[16];
        format_duration(k->max, hi, sizeof(hi));
        if (k->min)
            return bm_error(-ERANGE, "must be between %s and %s",
                            format_duration(k->min, lo, sizeof(lo)), hi);
        return bm_error(-ERANGE, "must be at most %s", hi);
    }
    *(unsigned *)dst = (unsigned)secs;
    return 0;
}

/* A duration, or "off" = 0. */
static int parse_duration_or_off(const char *s, const PolicyKey *k, void *dst)
{
    if (strcasecmp(s, "off") == 0) {
        *(unsigned *)dst = 0;
        return 0;
    }
    return parse_duration(s, k, dst);
}

/* A percentage of PSI "some" avg10, the '%' optional, or "off" = -1. */
static int parse_psi(const char *s, const PolicyKey *k, void *dst)
{
    double *ret = dst;
    (void)k;
    if (strcasecmp(s, "off") == 0) {
        *ret = -1;
        return 0;
    }
    uint64_t whole = 0, frac = 0, den = 1;
    const char *p = s;
    int r = parse_decimal(s, &whole, &frac, &den, &p);
    if (r == -ERANGE)
        return bm_error(-ERANGE, "must be between 0 and 100 (percent) or off");
    if (r < 0)
        return r;
    if (*p == '%')
        p++;
    if (*p)
        return bm_error(-EINVAL, "not a percentage (or off)");
    if (whole > 100 || (whole == 100 && frac))
        return bm_error(-ERANGE, "must be between 0 and 100 (percent) or off");
    *ret = (double)whole + (double)frac / (double)den;
    return 0;
}

/* A whole number within k's range. */
static int parse_count(const char *s, const PolicyKey *k, void *dst)
{
    const char *p = s;
    uint64_t n = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        if (n <= k->max)
            n = n * 10 + (uint64_t)(*p - '0');
    if (p == s)
        return bm_error(-EINVAL, "not a number");
    if (*p)
        return bm_error(-EINVAL, "not a whole number");
    if (n < k->min || n > k->max)
        return bm_error(-ERANGE, "must be between %u and %u", k->min, k->max);
    *(unsigned *)dst = (unsigned)n;
    return 0;
}

/* A number per second; "/s" may follow. */
static int parse_rate(const char *s, const PolicyKey *k, void *dst)
{
    uint64_t whole = 0, frac = 0, den = 1;
    const char *p = s;
    (void)k;
    int r = parse_decimal(s, &whole, &frac, &den, &p);
    if (r < 0)
        return r;
    if (strcmp(p, "/s") != 0 && *p)
        return bm_error(-EINVAL, "not a number");
    *(double *)dst = (double)whole + (double)frac / (double)den;
    return 0;
}

/* A size per second, bare KiB; "/s" may follow. */
static int parse_size_rate(const char *s, const PolicyKey *k, void *dst)
{
    char buf[VALUE_MAX + 1];
    size_t n = strlen(s);
    (void)k;
    if (n >= 2 && strcmp(s + n - 2, "/s") == 0)
        n -= 2;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return bm_size_parse_plain(buf, 1024, dst);
}

static int parse_bool(const char *s, const PolicyKey *k, void *dst)
{
    static const char *yes[] = {"yes", "true", "on"}, *no[] = {"no", "false", "off"};
    (void)k;
    for (size_t i = 0; i < BM_ARRAY_SIZE(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *(bool *)dst = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *(bool *)dst = false;
            return 0;
        }
    }
    return bm_error(-EINVAL, "not a boolean (yes/no, true/false, on/off)");
}

/* One of the names of k's type: its value, an int. */
static int parse_choice(const char *s, const PolicyKey *k, void *dst)
{
    char all[128] = "";
    const char *(*name)(int) = k->type->name;
    int n = 0;
    while (n == 0 || strcmp(name(n), name(0)) != 0)
        n++;
    for (int i = 0; i < n; i++) {
        if (strcmp(s, name(i)) == 0) {
            *(int *)dst = i;
            return 0;
        }
        size_t len = strlen(all);
        snprintf(all + len, sizeof(all) - len, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ",
                 name(i));
    }
    return bm_error(-EINVAL, "not %s", all);
}

static const char *verify_features_name(int v)
{
    return bm_verify_features_name((BmVerifyFeatures)v);
}

static const char *timer_inflate_name(int v)
{
    return bm_timer_inflate_name((BmTimerInflate)v);
}

static const char *device_choice_name(int v)
{
    return bm_device_choice_name((BmDeviceChoice)v);
}

#define TYPE(fn, field_type, ...) {.parse = fn, .size = sizeof(field_type), __VA_ARGS__}
static const KeyType T_DURATION = TYPE(parse_duration, unsigned),
                     T_DURATION_OR_OFF = TYPE(parse_duration_or_off, unsigned),
                     T_AMOUNT = TYPE(parse_amount, BmAmount, .sized = true),
                     T_STEP = TYPE(parse_step, BmAmount, .sized = true),
                     T_PSI = TYPE(parse_psi, double),
                     T_COUNT = TYPE(parse_count, unsigned),
                     T_RATE = TYPE(parse_rate, double),
                     T_SIZE_RATE = TYPE(parse_size_rate, uint64_t, .sized = true),
                     T_BOOL = TYPE(parse_bool, bool, .word = true),
                     T_VERIFY_FEATURES = TYPE(parse_choice, BmVerifyFeatures,
                                              .name = verify_features_name),
                     T_TIMER_INFLATE = TYPE(parse_choice, BmTimerInflate, .word = true,
                                            .name = timer_inflate_name),
                     T_DEVICE = TYPE(parse_choice, BmDeviceChoice, .word = true,
                                     .name = device_choice_name);

#define HOST_KEY(key, field, t, d, ...)                                                         \
    {.name = key, .host = true, .type = &t, .offset = offsetof(BmPolicy, field),               \
     .size = sizeof(((BmPolicy *)0)->field), .def = d, __VA_ARGS__}
#define GUEST_KEY(key, field, t, d, ...)                                                        \
    {.name = key, .type = &t, .offset = offsetof(BmGuestRules, field),                         \
     .size = sizeof(((BmGuestRules *)0)->field), .def = d, __VA_ARGS__}

/* Every policy key. The defaults are written as policies/default.policy writes them
 * (test-policy finds each "name = default" line there, and the key in the man page). */
static const PolicyKey keys[] = {
    HOST_KEY("interval", interval_s, T_DURATION, "10s", .min = 1, .max = 3600),
    HOST_KEY("reclaim_below", reclaim_below, T_AMOUNT, "10%"),
    HOST_KEY("target_available", target_available, T_AMOUNT, "15%"),
    HOST_KEY("release_above", release_above, T_AMOUNT, "25%"),
    HOST_KEY("psi_reclaim_above", psi_reclaim_above, T_PSI, "10%"),
    HOST_KEY("psi_release_below", psi_release_below, T_PSI, "1%"),
    HOST_KEY("apply_timeout", apply_timeout_s, T_DURATION, "60s", .max = 3600),
    HOST_KEY("verify_features", verify_features, T_VERIFY_FEATURES, "auto"),
    GUEST_KEY("floor", floor, T_AMOUNT, "25%"),
    GUEST_KEY("keep_free", keep_free, T_AMOUNT, "15%"),
    GUEST_KEY("max_step", max_step, T_STEP, "25%"),
    GUEST_KEY("deadband", deadband, T_AMOUNT, "32M"),
    GUEST_KEY("shares", shares, T_COUNT, "100", .min = 1, .max = 10000),
    GUEST_KEY("protect_major_faults", protect_major_faults, T_RATE, "50"),
    GUEST_KEY("protect_swap_in", protect_swap_in, T_SIZE_RATE, "1M"),
    GUEST_KEY("protect_cache_reads", protect_cache_reads, T_SIZE_RATE, "4M"),
    GUEST_KEY("max_stats_age", max_stats_age_s, T_DURATION_OR_OFF, "30s", .max = MAX_STATS_AGE_MAX_S),
    GUEST_KEY("exclude", exclude, T_BOOL, "no"),
    HOST_KEY("timer_interval", timer_interval_s, T_DURATION, "60s", .min = 10, .max = 3600),
    GUEST_KEY("timer_inflate", timer_inflate, T_TIMER_INFLATE, "deflate-on-oom"),
    GUEST_KEY("device", device, T_DEVICE, "auto"),
    HOST_KEY("hugepages_free_below", hugepages_free_below, T_AMOUNT, "0"),
};
#define N_KEYS BM_ARRAY_SIZE(keys)
_Static_assert(BM_ARRAY_SIZE(keys) <= 64, "BmGuestRules.set has a bit per key");

/* The field of key k in the policy p (host keys) or the rules g. */
static void *destination(const PolicyKey *k, BmPolicy *p, BmGuestRules *g)
{
    return (char *)(k->host ? (void *)p : (void *)g) + k->offset;
}

/* Parses value v of key k into p or g, and marks it set in g. */
static int set_value(const PolicyKey *k, const char *v, BmPolicy *p, BmGuestRules *g)
{
    assert(k->size == k->type->size);
    if (!k->type->word) {
        int r = refuse_sign(v);
        if (r < 0)
            return r;
    }
    int r = k->type->parse(v, k, destination(k, p, g));
    if (r == 0 && !k->host)
        g->set |= UINT64_C(1) << (k - keys);
    return r;
}

bool bm_policy_key(size_t i, const char **ret_name, const char **ret_default)
{
    if (i >= N_KEYS)
        return false;
    *ret_name = keys[i].name;
    *ret_default = keys[i].def;
    return true;
}

uint64_t bm_policy_rule_bit(size_t offset)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (!keys[i].host && keys[i].offset == offset)
            return UINT64_C(1) << i;
    return 0;
}

/* The index of the key named by len bytes at name, or -1. */
static int key_find(const char *name, size_t len)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strlen(keys[i].name) == len && memcmp(keys[i].name, name, len) == 0)
            return (int)i;
    return -1;
}

bool bm_policy_key_is_size(const char *name, size_t len)
{
    int k = key_find(name, len);
    return k >= 0 && keys[k].type->sized;
}

BmPolicy *bm_policy_new_default(void)
{
    BmPolicy *p = bm_malloc0(sizeof(*p));
    p->path = bm_strdup("(built-in)");
    for (size_t i = 0; i < N_KEYS; i++) {
        int r = set_value(&keys[i], keys[i].def, p, &p->guest);
        assert(r == 0);
        (void)r;
    }
    return p;
}

void bm_policy_free(BmPolicy *p)
{
    if (!p)
        return;
    free(p->path);
    free(p->guest.glob);
    for (size_t i = 0; i < p->n_domains; i++)
        free(p->domains[i].glob);
    free(p->domains);
    free(p);
}

/* --- messages */

typedef enum { IN_NONE, IN_SKIP, IN_HOST, IN_GUEST, IN_DOMAIN } Section;

typedef struct {
    const char *path;
    BmPolicy *p;
    BmDiags diags;
    size_t cap_domains;
    Section section;
    BmGuestRules *rules;  /* where guest keys go: &p->guest, the current domain, &scratch */
    BmGuestRules scratch; /* keys of a [domain] with a bad glob: checked, then dropped */
    unsigned *seen;       /* line each key was first set in this section, 0 if not */
    unsigned host_seen[N_KEYS], guest_seen[N_KEYS], domain_seen[N_KEYS];
    unsigned host_col[N_KEYS];      /* column of the value of host keys */
    bool host_bad[N_KEYS];          /* host key with a refused value */
    char label[BM_QUOTE_MAX * 4 + 32]; /* "[guest]", "[domain \"db-*\"]" */
} Parser;

#define add_error(ps, ...) bm_diags_add(&(ps)->diags, __VA_ARGS__)

static const char *quote(const char *s, size_t n, char *buf)
{
    return bm_quote(s, n, false, buf);
}

/* --- lines */

static bool is_ws(char c)
{
    return c == ' ' || c == '\t';
}

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && is_ws(s[i]))
        i++;
    return i;
}

/* Why byte c cannot be in a glob, or NULL. */
static const char *glob_bad_char(unsigned char c)
{
    if (c < 0x20 || c == 0x7f)
        return "contains a control character";
    if (c == '"')
        return "contains a quote";
    return NULL;
}

/* Why glob g (n bytes) is not a valid fnmatch(3) pattern, in buf; NULL if it is. */
static const char *glob_problem(const char *g, size_t n, char *buf, size_t size)
{
    static const char *classes[] = {"alnum", "alpha", "blank", "cntrl", "digit", "graph",
                                    "lower", "print", "punct", "space", "upper", "xdigit"};
    if (n == 0)
        return "empty";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)g[i];
        if (glob_bad_char(c))
            return glob_bad_char(c);
        if (c == '\\') {
            if (++i == n)
                return "ends with a backslash";
            if (glob_bad_char((unsigned char)g[i]))
                return glob_bad_char((unsigned char)g[i]);
            continue;
        }
        if (c != '[')
            continue;
        size_t j = i + 1;
        if (j < n && (g[j] == '!' || g[j] == '^'))
            j++;
        if (j < n && g[j] == ']')
            j++;
        for (;; j++) {
            if (j >= n)
                return "unterminated '['";
            unsigned char d = (unsigned char)g[j];
            if (glob_bad_char(d))
                return glob_bad_char(d);
            if (d == ']')
                break;
            if (d == '\\') {
                if (++j >= n)
                    return "unterminated '['";
                if (glob_bad_char((unsigned char)g[j]))
                    return glob_bad_char((unsigned char)g[j]);
                continue;
            }
            if (d == '[' && j + 1 < n && (g[j + 1] == ':' || g[j + 1] == '.' || g[j + 1] == '=')) {
                char delim = g[j + 1];
                size_t start = j + 2, e = start;
                while (e + 1 < n && !(g[e] == delim && g[e + 1] == ']') &&
                       !glob_bad_char((unsigned char)g[e]))
                    e++;
                if (e + 1 >= n || g[e] != delim)
                    return "unterminated '['";
                if (delim == ':') {
                    bool known = false;
                    for (size_t k = 0; k < BM_ARRAY_SIZE(classes); k++)
                        known |= strlen(classes[k]) == e - start &&
                                 memcmp(classes[k], g + start, e - start) == 0;
                    if (!known) {
                        char q[BM_QUOTE_SIZE];
                        snprintf(buf, size, "unknown character class '%s'",
                                 quote(g + start, e - start, q));
                        return buf;
                    }
                }
                j = e + 1;
            }
        }
        i = j;
    }
    return NULL;
}

static void set_label(Parser *ps, const char *name, const char *glob, size_t glob_len)
{
    if (glob) {
        char q[BM_QUOTE_SIZE];
        snprintf(ps->label, sizeof(ps->label), "[%s \"%s\"]", name, quote(glob, glob_len, q));
    } else {
        snprintf(ps->label, sizeof(ps->label), "[%s]", name);
    }
}

/* Where the parts of a section header are in its line. */
typedef struct {
    size_t name, name_end; /* the section name */
    bool has_glob;
    size_t glob, glob_end; /* inside the quotes */
} Header;

/* The syntax of "[NAME]" / "[NAME \"GLOB\"]" with s[i] == '['. Returns false when it is broken
 * (reported). */
static bool scan_header(Parser *ps, const char *s, size_t n, size_t i, unsigned line, Header *h)
{
    char q[BM_QUOTE_SIZE];
    *h = (Header){.name = skip_ws(s, n, i + 1)};
    h->name_end = h->name;
    while (h->name_end < n && is_name_char(s[h->name_end]))
        h->name_end++;
    size_t j = skip_ws(s, n, h->name_end);
    if (j < n && s[j] == '"') {
        /* The glob ends at the first quote that ']' follows, so that a quote or a trailing
         * backslash inside it is reported as what it is; failing that, at the last quote. */
        size_t close = 0;
        for (size_t e = j + 1; e < n; e++) {
            if (s[e] != '"')
                continue;
            close = e;
            size_t t = skip_ws(s, n, e + 1);
            if (t < n && s[t] == ']')
                break;
        }
        if (!close) {
            add_error(ps, line, j + 1, "unterminated quote in section header");
            return false;
        }
        h->has_glob = true;
        h->glob = j + 1;
        h->glob_end = close;
        j = skip_ws(s, n, close + 1);
    }
    if (j >= n) {
        add_error(ps, line, j + 1, "missing ']' at the end of the section header");
        return false;
    }
    if (s[j] != ']') {
        size_t c = 1; /* the whole UTF-8 character */
        while (c < 4 && j + c < n && ((unsigned char)s[j + c] & 0xc0) == 0x80)
            c++;
        add_error(ps, line, j + 1, "unexpected '%s' in section header", quote(s + j, c, q));
        return false;
    }
    size_t after = skip_ws(s, n, j + 1);
    if (after < n && s[after] != '#') {
        add_error(ps, line, after + 1, "unexpected text after section header");
        return false;
    }
    if (h->name == h->name_end) {
        add_error(ps, line, h->name + 1, "missing section name: [host], [guest] or [domain \"GLOB\"]");
        return false;
    }
    return true;
}

/* An unknown section name, with the nearest known one as a hint. */
static void unknown_section(Parser *ps, const char *nm, size_t len, size_t col, unsigned line)
{
    static const char *sections[] = {"host", "guest", "domain"};
    char q[BM_QUOTE_SIZE];
    const char *best = NULL;
    size_t best_d = 3;
    for (size_t k = 0; k < BM_ARRAY_SIZE(sections); k++) {
        size_t d = bm_edit_distance(nm, len, sections[k]);
        if (d < best_d) {
            best_d = d;
            best = sections[k];
        }
    }
    char hint[64] = "";
    if (best)
        snprintf(hint, sizeof(hint), " (did you mean [%s]?)", best);
    add_error(ps, line, col, "unknown section '[%s]'%s", quote(nm, len, q), hint);
}

/* [domain "GLOB"]: its rules, or scratch rules when the glob is bad (reported). */
static void enter_domain(Parser *ps, const char *s, const Header *h, unsigned line)
{
    char q[BM_QUOTE_SIZE];
    size_t glob = h->glob, glob_end = h->glob_end;
    ps->section = IN_DOMAIN;
    ps->seen = ps->domain_seen;
    memset(ps->domain_seen, 0, sizeof(ps->domain_seen));
    set_label(ps, "domain", s + glob, glob_end - glob);

    char why[BM_QUOTE_MAX * 4 + 64];
    const char *problem = glob_problem(s + glob, glob_end - glob, why, sizeof(why));
    if (problem) {
        add_error(ps, line, glob + 1, "bad glob '%s': %s", quote(s + glob, glob_end - glob, q),
                  problem);
        ps->scratch = (BmGuestRules){0};
        ps->rules = &ps->scratch;
        return;
    }
    BmPolicy *p = ps->p;
    if (p->n_domains == ps->cap_domains) {
        ps->cap_domains = ps->cap_domains ? ps->cap_domains * 2 : 4;
        p->domains = bm_reallocarray(p->domains, ps->cap_domains, sizeof(*p->domains));
    }
    BmGuestRules *d = &p->domains[p->n_domains++];
    *d = (BmGuestRules){.line = line};
    d->glob = bm_malloc0(glob_end - glob + 1);
    memcpy(d->glob, s + glob, glob_end - glob);
    ps->rules = d;
}

/* "[host]", "[guest]", "[domain \"GLOB\"]", s[i] being '['. */
static void parse_header(Parser *ps, const char *s, size_t n, size_t i, unsigned line)
{
    ps->section = IN_SKIP; /* keys under a header that failed are not checked */
    Header h;
    if (!scan_header(ps, s, n, i, line, &h))
        return;
    size_t len = h.name_end - h.name;
    const char *nm = s + h.name;
    bool is_host = len == 4 && memcmp(nm, "host", 4) == 0;
    bool is_guest = len == 5 && memcmp(nm, "guest", 5) == 0;
    bool is_domain = len == 6 && memcmp(nm, "domain", 6) == 0;
    if (!is_host && !is_guest && !is_domain) {
        unknown_section(ps, nm, len, h.name + 1, line);
    } else if (!is_domain && h.has_glob) {
        add_error(ps, line, h.glob, "[%s] takes no glob", is_host ? "host" : "guest");
    } else if (is_host) {
        ps->section = IN_HOST;
        ps->rules = NULL;
        ps->seen = ps->host_seen;
        set_label(ps, "host", NULL, 0);
    } else if (is_guest) {
        ps->section = IN_GUEST;
        ps->rules = &ps->p->guest;
        if (!ps->p->guest.line)
            ps->p->guest.line = line;
        ps->seen = ps->guest_seen;
        set_label(ps, "guest", NULL, 0);
    } else if (!h.has_glob) {
        add_error(ps, line, h.name + 1, "[domain] needs a glob in double quotes: [domain \"GLOB\"]");
    } else {
        enter_domain(ps, s, &h, line);
    }
}

/* A key no section knows, with the nearest one as a hint (of this section if close, else of
 * the other one, named). */
static void unknown_key(Parser *ps, const char *key, size_t key_len, size_t col, unsigned line)
{
    char q[BM_QUOTE_SIZE];
    bool in_host = ps->section == IN_HOST;
    int best = -1;
    size_t best_d = 3;
    for (int pass = 0; pass < 2 && best < 0; pass++)
        for (int c = 0; c < (int)N_KEYS; c++) {
            if ((keys[c].host == in_host) != (pass == 0))
                continue;
            size_t d = bm_edit_distance(key, key_len, keys[c].name);
            if (d < best_d) {
                best_d = d;
                best = c;
            }
        }
    char hint[96] = "";
    if (best >= 0 && keys[best].host == in_host)
        snprintf(hint, sizeof(hint), " (did you mean '%s'?)", keys[best].name);
    else if (best >= 0)
        snprintf(hint, sizeof(hint), " (did you mean '%s' in %s?)", keys[best].name,
                 keys[best].host ? "[host]" : "[guest]");
    add_error(ps, line, col, "unknown key '%s' in %s%s", quote(key, key_len, q), ps->label, hint);
}

/* The value of key k (at s[v], v_len bytes) into the policy; an error is reported. */
static void set_key(Parser *ps, const PolicyKey *k, const char *s, size_t v, size_t v_len,
                    unsigned line)
{
    char q[BM_QUOTE_SIZE];
    bool in_host = ps->section == IN_HOST;
    ps->seen[k - keys] = line;
    if (in_host)
        ps->host_col[k - keys] = (unsigned)(v + 1 > UINT32_MAX ? UINT32_MAX : v + 1);
    int r = 0;
    if (v_len == 0) {
        add_error(ps, line, v + 1, "%s: empty value", k->name);
        r = -EINVAL;
    } else if (v_len > VALUE_MAX) {
        add_error(ps, line, v + 1, "%s: '%s': too long", k->name, quote(s + v, v_len, q));
        r = -EINVAL;
    } else {
        char value[VALUE_MAX + 1];
        memcpy(value, s + v, v_len);
        value[v_len] = '\0';
        for (size_t j = 0; j < v_len && r == 0; j++)
            if ((unsigned char)value[j] < 0x20 || value[j] == 0x7f)
                r = bm_error(-EINVAL, "contains a control character");
        if (r == 0) {
            bm_error_reset();
            r = set_value(k, value, ps->p, ps->rules);
        }
        if (r < 0)
            add_error(ps, line, v + 1, "%s: '%s': %s", k->name, quote(value, v_len, q),
                      bm_error_detail(r));
    }
    if (r < 0 && in_host)
        ps->host_bad[k - keys] = true;
}

/* Where the key is in the section: known, in this section, not seen before. Returns the key,
 * or -1 when it is not (reported). */
static int check_key(Parser *ps, const char *s, size_t key, size_t key_len, unsigned line)
{
    char q[BM_QUOTE_SIZE];
    int k = key_find(s + key, key_len);
    if (ps->section == IN_SKIP)
        return -1;
    if (ps->section == IN_NONE) {
        if (k < 0)
            add_error(ps, line, key + 1, "key '%s' before any section header",
                      quote(s + key, key_len, q));
        else
            add_error(ps, line, key + 1, "key '%s' before any section header (it belongs in %s)",
                      keys[k].name, keys[k].host ? "[host]" : "[guest] or [domain \"GLOB\"]");
        return -1;
    }
    bool in_host = ps->section == IN_HOST;
    if (k < 0) {
        unknown_key(ps, s + key, key_len, key + 1, line);
        return -1;
    }
    if (keys[k].host != in_host) {
        add_error(ps, line, key + 1, "'%s' belongs in %s, not in %s", keys[k].name,
                  keys[k].host ? "[host]" : "[guest] or [domain \"GLOB\"]", ps->label);
        return -1;
    }
    if (ps->seen[k]) {
        add_error(ps, line, key + 1, "duplicate key '%s' in %s (first set at line %u)",
                  keys[k].name, ps->label, ps->seen[k]);
        return -1;
    }
    return k;
}

static void parse_line(Parser *ps, const char *s, size_t n, unsigned line)
{
    char q[BM_QUOTE_SIZE];
    size_t i = skip_ws(s, n, 0);
    if (i == n || s[i] == '#')
        return;
    if (s[i] == '[') {
        parse_header(ps, s, n, i, line);
        return;
    }

    size_t key = i, key_end = i;
    while (key_end < n && is_name_char(s[key_end]))
        key_end++;
    size_t key_len = key_end - key;
    if (key_len == 0) {
        if (s[i] == '=')
            add_error(ps, line, i + 1, "missing key before '='");
        else
            add_error(ps, line, i + 1, "expected 'key = value', a [section] header or a comment");
        return;
    }
    size_t eq = skip_ws(s, n, key_end);
    if (eq >= n || s[eq] != '=') {
        add_error(ps, line, eq + 1, "expected '=' after '%s'", quote(s + key, key_len, q));
        return;
    }
    size_t v = skip_ws(s, n, eq + 1), v_end = n;
    for (size_t j = v; j < n; j++)
        if (s[j] == '#' && (j == v || is_ws(s[j - 1]))) {
            v_end = j;
            break;
        }
    while (v_end > v && is_ws(s[v_end - 1]))
        v_end--;
    int k = check_key(ps, s, key, key_len, line);
    if (k >= 0)
        set_key(ps, &keys[k], s, v, v_end - v, line);
}

/* --- whole-file checks */

static const char *format_amount(BmAmount a, char *buf, size_t n)
{
    if (!a.is_percent)
        return bm_size_format(a.bytes, buf, n);
    if (a.permille % 10)
        snprintf(buf, n, "%u.%u%%", a.permille / 10, a.permille % 10);
    else
        snprintf(buf, n, "%u%%", a.permille / 10);
    return buf;
}

/* Where to report a problem among keys ks: the line and column of the last one set. */
static bool last_of(const Parser *ps, const int *ks, size_t n, unsigned *ret_line,
                    unsigned *ret_col)
{
    bool any = false;
    *ret_line = *ret_col = 0;
    for (size_t i = 0; i < n; i++) {
        if (ps->host_bad[ks[i]])
            return false;
        if (ps->host_seen[ks[i]] && ps->host_seen[ks[i]] >= *ret_line) {
            *ret_line = ps->host_seen[ks[i]];
            *ret_col = ps->host_col[ks[i]];
            any = true;
        }
    }
    return any;
}

static void check_thresholds(Parser *ps)
{
    const BmPolicy *p = ps->p;
    unsigned line, col;

    const int mem[] = {key_find("reclaim_below", 13), key_find("target_available", 16),
                       key_find("release_above", 13)};
    const BmAmount *a[] = {&p->reclaim_below, &p->target_available, &p->release_above};
    if (last_of(ps, mem, 3, &line, &col) && a[0]->is_percent == a[1]->is_percent &&
        a[1]->is_percent == a[2]->is_percent) {
        uint64_t v[3];
        for (int i = 0; i < 3; i++)
            v[i] = a[i]->is_percent ? a[i]->permille : a[i]->bytes;
        if (!(v[0] < v[1] && v[1] < v[2])) {
            char b[3][32];
            for (int i = 0; i < 3; i++) {
                format_amount(*a[i], b[i], 20);
                if (!ps->host_seen[mem[i]])
                    strcat(b[i], " (default)");
            }
            add_error(ps, line, col,
                      "thresholds out of order: need reclaim_below < target_available < "
                      "release_above, got %s, %s, %s",
                      b[0], b[1], b[2]);
        }
    }

    /* mixed units: a size and a percentage of MemTotal cross at some MemTotal, and past it
     * the order breaks (the host mode would flap between reclaim and release) */
    static const char *const names[] = {"reclaim_below", "target_available", "release_above"};
    if (last_of(ps, mem, 3, &line, &col) &&
        !(a[0]->is_percent == a[1]->is_percent && a[1]->is_percent == a[2]->is_percent)) {
        char b[3][32], where[96] = "";
        for (int i = 0; i < 3; i++) {
            format_amount(*a[i], b[i], 20);
            if (!ps->host_seen[mem[i]])
                strcat(b[i], " (default)");
        }
        for (int i = 0; i < 3 && !*where; i++)
            for (int j = i + 1; j < 3 && !*where; j++) {
                if (a[i]->is_percent == a[j]->is_percent)
                    continue;
                const BmAmount *pc = a[i]->is_percent ? a[i] : a[j];
                const BmAmount *sz = a[i]->is_percent ? a[j] : a[i];
                char t[32];
                if (pc->permille == 0) {
                    snprintf(where, sizeof(where), "%s is not below %s for any MemTotal",
                             names[i], names[j]);
                    break;
                }
                uint64_t cross = (uint64_t)((unsigned __int128)sz->bytes * 1000 / pc->permille);
                bm_size_format(cross, t, sizeof(t));
                snprintf(where, sizeof(where), "%s is not below %s when MemTotal is %s %s",
                         names[i], names[j], a[i]->is_percent ? "at or above" : "at or below", t);
            }
        add_error(ps, line, col,
                  "thresholds mix sizes and percentages of MemTotal: reclaim_below %s, "
                  "target_available %s, release_above %s: %s; write all three as sizes or all "
                  "as percentages",
                  b[0], b[1], b[2], where);
    }

    const int psi[] = {key_find("psi_release_below", 17), key_find("psi_reclaim_above", 17)};
    if (last_of(ps, psi, 2, &line, &col) && p->psi_release_below >= 0 &&
        p->psi_reclaim_above >= 0 && !(p->psi_release_below < p->psi_reclaim_above)) {
        add_error(ps, line, col,
                  "thresholds out of order: need psi_release_below < psi_reclaim_above, "
                  "got %g%%%s, %g%%%s",
                  p->psi_release_below, ps->host_seen[psi[0]] ? "" : " (default)",
                  p->psi_reclaim_above, ps->host_seen[psi[1]] ? "" : " (default)");
    }
}

int bm_policy_parse(const char *text, const char *path, BmPolicy **ret, char **ret_errors)
{
    return bm_policy_parse_n(text, text ? strlen(text) : 0, path, ret, ret_errors);
}

int bm_policy_parse_n(const char *text, size_t len, const char *path, BmPolicy **ret,
                      char **ret_errors)
{
    _cleanup_(bm_policy_freep) BmPolicy *p = bm_policy_new_default();
    free(p->path);
    p->path = bm_strdup(path ? path : "(policy)");
    Parser ps = {.path = p->path, .p = p, .section = IN_NONE};

    if (ret)
        *ret = NULL;
    if (ret_errors)
        *ret_errors = NULL;
    if (!text)
        text = "", len = 0;
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        text += 3, len -= 3;

    /* a line with a NUL byte or invalid UTF-8 is refused whole: the file was not what it
     * looks like (a binary, a truncated write), and what follows would be misread */
    const char *end = text + len;
    unsigned line = 0;
    for (const char *s = text; s < end;) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        if (line < UINT32_MAX)
            line++;
        const char *nul = memchr(s, '\0', n);
        size_t bad = bm_utf8_invalid(s, n);
        if (nul)
            add_error(&ps, line, (size_t)(nul - s) + 1, "contains a NUL byte");
        else if (bad != SIZE_MAX)
            add_error(&ps, line, bad + 1, "invalid UTF-8 (byte \\x%02x)", (unsigned char)s[bad]);
        else
            parse_line(&ps, s, n > 0 && s[n - 1] == '\r' ? n - 1 : n, line);
        s += n + 1;
    }
    check_thresholds(&ps);

    if (ps.diags.n) {
        size_t n_errors = bm_diags_count(&ps.diags);
        char *errors = bm_diags_join(&ps.diags, ps.path, false);
        if (ret_errors)
            *ret_errors = errors;
        else
            free(errors);
        return bm_error(-EINVAL, "%s: %zu error%s", p->path, n_errors, n_errors == 1 ? "" : "s");
    }
    if (ret)
        *ret = TAKE_PTR(p);
    return 0;
}

int bm_policy_load(const char *path, BmPolicy **ret, char **ret_errors)
{
    _cleanup_free_ char *text = NULL;
    if (!*path) {
        if (ret)
            *ret = NULL;
        if (ret_errors)
            *ret_errors = bm_strdup("'': empty file name\n");
        return bm_error(-ENOENT, "'': empty file name");
    }
    size_t len = 0;
    int r = bm_file_read(path, BM_POLICY_MAX_BYTES, &text, &len);
    if (r < 0) {
        char why[512];
        snprintf(why, sizeof(why), "%s", bm_error_detail(r));
        if (ret)
            *ret = NULL;
        if (ret_errors)
            *ret_errors = bm_asprintf("%s: %s\n", path, why);
        return bm_error(r, "%s: %s", path, why);
    }
    return bm_policy_parse_n(text, len, path, ret, ret_errors);
}

/* --- use */

/* The rules of a [domain] section s over r: those it sets, and its line. */
static void apply_rules(BmGuestRules *r, const BmGuestRules *s)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (s->set & (UINT64_C(1) << i))
            memcpy((char *)r + keys[i].offset, (const char *)s + keys[i].offset, keys[i].size);
    r->set |= s->set;
    r->line = s->line;
}

unsigned long bm_policy_rules_lookups;

void bm_policy_rules_for(const BmPolicy *p, const char *domain_name, BmGuestRules *ret)
{
    bm_policy_rules_lookups++;
    BmGuestRules r = p->guest;
    for (size_t i = 0; domain_name && i < p->n_domains; i++)
        if (fnmatch(p->domains[i].glob, domain_name, 0) == 0)
            apply_rules(&r, &p->domains[i]);
    r.glob = NULL;
    *ret = r;
}

uint64_t bm_amount_bytes(BmAmount a, uint64_t reference_bytes)
{
    if (!a.is_percent)
        return a.bytes;
    return (uint64_t)((unsigned __int128)reference_bytes * a.permille / 1000);
}

int bm_policy_load_or_default(const char *path, bool explicit_path, BmPolicy **ret,
                              char **ret_errors)
{
    if (ret_errors)
        *ret_errors = NULL;
    if (!explicit_path && access(path, F_OK) < 0) {
        *ret = bm_policy_new_default();
        return 0;
    }
    return bm_policy_load(path, ret, ret_errors);
}
