#include "metrics.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

const double bm_latency_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                     1,     2.5,  5,     10,   30,  60};
const size_t bm_latency_n_buckets = BM_ARRAY_SIZE(bm_latency_buckets);

void bm_histogram_init(BmHistogram *h, const double *bounds, size_t n)
{
    assert(n <= BM_HISTOGRAM_MAX_BOUNDS);
    if (n > BM_HISTOGRAM_MAX_BOUNDS) /* NDEBUG: never write past counts[] */
        n = BM_HISTOGRAM_MAX_BOUNDS;
    *h = (BmHistogram){.n_bounds = n, .bounds = bounds};
}

void bm_histogram_observe(BmHistogram *h, double v)
{
    if (isnan(v) || v < 0)
        return;
    size_t i = 0;
    while (i < h->n_bounds && v > h->bounds[i])
        i++;
    bm_count_add(&h->counts[i], 1);
    bm_count_add(&h->count, 1);
    /* a sum that would overflow to infinity stays at the largest double (never "Infinity" in
     * a state file or an exposition) */
    h->sum = h->sum + v <= DBL_MAX ? h->sum + v : DBL_MAX;
}

/* A growing byte buffer (not NUL-terminated): amortised doubling. */
typedef struct {
    char *p;
    size_t len, cap;
} Buf;

static char *buf_reserve(Buf *b, size_t extra)
{
    if (b->cap - b->len < extra) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < extra)
            cap *= 2;
        b->p = bm_reallocarray(b->p, cap, 1);
        b->cap = cap;
    }
    return b->p + b->len;
}

static void buf_add(Buf *b, const char *s, size_t n)
{
    if (n == 0)
        return;
    memcpy(buf_reserve(b, n), s, n);
    b->len += n;
}

static void buf_adds(Buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

static void buf_addc(Buf *b, char c)
{
    *buf_reserve(b, 1) = c;
    b->len++;
}

/* The length of the well-formed UTF-8 sequence at p (1-4), or 0 if p does not start one
 * (stray continuation byte, overlong form, surrogate, above U+10FFFF, truncated). */
static size_t utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return (p[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
        if (p[1] < lo || p[1] > hi)
            return 0;
        return (p[2] & 0xc0) == 0x80 ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
        if (p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80)
            return 0;
        return (p[3] & 0xc0) == 0x80 ? 4 : 0;
    }
    return 0;
}

/* Appends s escaped: backslash and newline always, double quote if quote (label values);
 * bytes that are not UTF-8 become U+FFFD. Copies runs of plain bytes at once. */
static void buf_add_escaped(Buf *b, const char *s, bool quote)
{
    const unsigned char *p = (const unsigned char *)s, *run = p;
    for (;;) {
        unsigned c = *p;
        if (c >= 0x80) {
            size_t n = utf8_len(p);
            if (n > 0) {
                p += n;
                continue;
            }
        } else if (c != '\\' && c != '\n' && c != '\0' && !(quote && c == '"')) {
            p++;
            continue;
        }
        buf_add(b, (const char *)run, (size_t)(p - run));
        if (c == '\0')
            return;
        if (c == '\\')
            buf_add(b, "\\\\", 2);
        else if (c == '\n')
            buf_add(b, "\\n", 2);
        else if (c == '"')
            buf_add(b, "\\\"", 2);
        else
            buf_add(b, "\xef\xbf\xbd", 3);
        run = ++p;
    }
}

/* Writes the decimal digits of u at the end of the buffer that ends at end; returns the
 * first digit. */
static char *u64_digits(uint64_t u, char *end)
{
    do {
        *--end = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    return end;
}

/* Writes v into tmp (BM_METRIC_VALUE_MAX bytes, NUL-terminated) as the exposition shows
 * it; returns the first character and *ret_len. */
static const char *format_value(double v, char tmp[static BM_METRIC_VALUE_MAX], size_t *ret_len)
{
    double a = fabs(v);
    if (isnan(v)) {
        *ret_len = 3;
        return "NaN";
    }
    if (isinf(v)) {
        *ret_len = 4;
        return v > 0 ? "+Inf" : "-Inf";
    }
    if (a < 18446744073709551616.0 && (double)(uint64_t)a == a) {
        /* Integral and below 2^64: exact as an integer ("0" for -0 too). */
        char *end = tmp + BM_METRIC_VALUE_MAX - 1;
        *end = '\0';
        char *d = u64_digits((uint64_t)a, end);
        if (v < 0)
            *--d = '-';
        *ret_len = (size_t)(end - d);
        return d;
    }
    /* A normal double printed with up to 15 digits reads back as what they say, so the first
     * precision from 15 that round-trips is the shortest (%g drops trailing zeros).
     * Subnormals have fewer digits of precision: try them all. */
    int n = 0;
    for (int prec = a < DBL_MIN ? 1 : 15; prec <= 17; prec++) {
        n = snprintf(tmp, BM_METRIC_VALUE_MAX, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    *ret_len = (size_t)n;
    return tmp;
}

const char *bm_metric_format_value(double v, char *buf, size_t n)
{
    char tmp[BM_METRIC_VALUE_MAX];
    size_t len;
    const char *s = format_value(v, tmp, &len);
    if (n == 0)
        return buf;
    if (len >= n)
        len = n - 1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return buf;
}

static void buf_add_value(Buf *b, double v)
{
    char tmp[BM_METRIC_VALUE_MAX];
    size_t len;
    const char *s = format_value(v, tmp, &len);
    buf_add(b, s, len);
}

static void buf_add_u64(Buf *b, uint64_t u)
{
    char tmp[24], *end = tmp + sizeof(tmp);
    char *d = u64_digits(u, end);
    buf_add(b, d, (size_t)(end - d));
}

typedef struct {
    char *name;
    BmMetricType type;
    char *header; /* "# HELP ...\n# TYPE ...\n" */
    size_t header_len;
    Buf samples; /* the rendered sample lines */
    size_t n_lines;
} Family;

struct BmRegistry {
    Family *families; /* in declaration order */
    size_t n_families, cap_families;
    size_t *slots;  /* open addressing by name: index into families + 1, 0 for empty */
    size_t n_slots; /* a power of two, at least twice n_families */
    size_t n_lines;
};

static const char *const type_names[] = {
    [BM_METRIC_GAUGE] = "gauge",
    [BM_METRIC_COUNTER] = "counter",
    [BM_METRIC_HISTOGRAM] = "histogram",
};

static size_t hash_name(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return (size_t)h;
}

/* The slot of the family named s[0..len), or of the empty slot where it would go. */
static size_t *find_slot(const BmRegistry *r, const char *s, size_t len)
{
    size_t mask = r->n_slots - 1;
    for (size_t i = hash_name(s, len) & mask;; i = (i + 1) & mask) {
        size_t *slot = &r->slots[i];
        if (*slot == 0)
            return slot;
        const char *name = r->families[*slot - 1].name;
        if (strncmp(name, s, len) == 0 && name[len] == '\0')
            return slot;
    }
}

static Family *find_family_n(const BmRegistry *r, const char *s, size_t len)
{
    size_t *slot = find_slot(r, s, len);
    return *slot ? &r->families[*slot - 1] : NULL;
}

static Family *find_family(const BmRegistry *r, const char *name)
{
    return find_family_n(r, name, strlen(name));
}

static void rehash(BmRegistry *r, size_t n_slots)
{
    free(r->slots);
    r->slots = bm_reallocarray(NULL, n_slots, sizeof(*r->slots));
    memset(r->slots, 0, n_slots * sizeof(*r->slots));
    r->n_slots = n_slots;
    for (size_t i = 0; i < r->n_families; i++)
        *find_slot(r, r->families[i].name, strlen(r->families[i].name)) = i + 1;
}

BmRegistry *bm_registry_new(void)
{
    BmRegistry *r = bm_malloc0(sizeof(*r));
    rehash(r, 64);
    return r;
}

void bm_registry_free(BmRegistry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_families; i++) {
        free(r->families[i].name);
        free(r->families[i].header);
        free(r->families[i].samples.p);
    }
    free(r->families);
    free(r->slots);
    free(r);
}

static bool valid_metric_name(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == ':'))
            return false;
    }
    return true;
}

static bool valid_label_name(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

static const char *const histogram_suffixes[] = {"_bucket", "_sum", "_count"};

/* The histogram family whose series name would be, if any. */
static const Family *histogram_owning(const BmRegistry *r, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < BM_ARRAY_SIZE(histogram_suffixes); i++) {
        size_t sl = strlen(histogram_suffixes[i]);
        if (len > sl && strcmp(name + len - sl, histogram_suffixes[i]) == 0) {
            const Family *f = find_family_n(r, name, len - sl);
            if (f && f->type == BM_METRIC_HISTOGRAM)
                return f;
        }
    }
    return NULL;
}

int bm_registry_declare(BmRegistry *r, const char *name, BmMetricType type, const char *help)
{
    char pb[256];

    if ((unsigned)type >= BM_ARRAY_SIZE(type_names))
        return bm_error(-EINVAL, "metric type %d is not known", (int)type);
    if (!name || !valid_metric_name(name))
        return bm_error(-EINVAL, "metric name '%s' is not valid",
                        bm_printable(name, pb, sizeof(pb)));

    const Family *old = find_family(r, name);
    if (old) {
        if (old->type == type)
            return 0;
        return bm_error(-EINVAL, "metric '%s' is already declared as a %s", name,
                        type_names[old->type]);
    }
    const Family *owner = histogram_owning(r, name);
    if (owner)
        return bm_error(-EINVAL, "metric '%s' clashes with the series of histogram '%s'", name,
                        owner->name);
    if (type == BM_METRIC_HISTOGRAM) {
        for (size_t i = 0; i < BM_ARRAY_SIZE(histogram_suffixes); i++) {
            _cleanup_free_ char *series = bm_asprintf("%s%s", name, histogram_suffixes[i]);
            if (find_family(r, series))
                return bm_error(-EINVAL, "histogram '%s' clashes with metric '%s'", name, series);
        }
    }

    if (r->n_families == r->cap_families) {
        r->cap_families = r->cap_families ? 2 * r->cap_families : 16;
        r->families = bm_reallocarray(r->families, r->cap_families, sizeof(*r->families));
    }
    Buf header = {0};
    if (help) {
        buf_adds(&header, "# HELP ");
        buf_adds(&header, name);
        buf_addc(&header, ' ');
        buf_add_escaped(&header, help, false);
        buf_addc(&header, '\n');
    }
    buf_adds(&header, "# TYPE ");
    buf_adds(&header, name);
    buf_addc(&header, ' ');
    buf_adds(&header, type_names[type]);
    buf_addc(&header, '\n');

    r->families[r->n_families++] = (Family){
        .name = bm_strdup(name),
        .type = type,
        .header = header.p,
        .header_len = header.len,
    };
    if (2 * r->n_families > r->n_slots)
        rehash(r, 2 * r->n_slots);
    else
        *find_slot(r, name, strlen(name)) = r->n_families;
    return 0;
}

/* The family name of type type, or NULL with the reason set. */
static Family *family_for_add(BmRegistry *r, const char *name, BmMetricType type)
{
    char pb[256];
    Family *f = name ? find_family(r, name) : NULL;
    if (!f) {
        bm_error(-EINVAL, "metric '%s' is not declared", bm_printable(name, pb, sizeof(pb)));
        return NULL;
    }
    if ((f->type == BM_METRIC_HISTOGRAM) != (type == BM_METRIC_HISTOGRAM)) {
        bm_error(-EINVAL, "metric '%s' is a %s, not a %s", name, type_names[f->type],
                 type == BM_METRIC_HISTOGRAM ? "histogram" : "gauge or counter");
        return NULL;
    }
    return f;
}

static int check_labels(const char *metric, const char *const *labels, bool histogram)
{
    char pb[256];
    if (!labels)
        return 0;
    for (size_t i = 0; labels[i]; i += 2) {
        const char *name = labels[i];
        if (!valid_label_name(name) || strncmp(name, "__", 2) == 0)
            return bm_error(-EINVAL, "label name '%s' of metric '%s' is not valid",
                            bm_printable(name, pb, sizeof(pb)), metric);
        if (histogram && strcmp(name, "le") == 0)
            return bm_error(-EINVAL, "label 'le' of histogram '%s' is reserved for buckets",
                            metric);
        if (!labels[i + 1])
            return bm_error(-EINVAL, "label '%s' of metric '%s' has no value", name, metric);
        for (size_t j = 0; j < i; j += 2) {
            if (strcmp(labels[j], name) == 0)
                return bm_error(-EINVAL, "label '%s' of metric '%s' is repeated", name, metric);
        }
    }
    return 0;
}

/* Appends name="value" pairs separated by commas, without braces. */
static void buf_add_labels(Buf *b, const char *const *labels)
{
    for (size_t i = 0; labels && labels[i]; i += 2) {
        if (i > 0)
            buf_addc(b, ',');
        buf_adds(b, labels[i]);
        buf_add(b, "=\"", 2);
        buf_add_escaped(b, labels[i + 1], true);
        buf_addc(b, '"');
    }
}

int bm_registry_declare_all(BmRegistry *r, const BmMetricFamily *families, size_t n)
{
    int ok = 0;
    for (size_t i = 0; i < n; i++)
        ok |= bm_registry_declare(r, families[i].name, families[i].type, families[i].help);
    return ok < 0 ? -EINVAL : 0;
}

int bm_registry_add(BmRegistry *r, const char *name, const char *const *labels, double value)
{
    Family *f = family_for_add(r, name, BM_METRIC_GAUGE);
    if (!f)
        return -EINVAL;
    int k = check_labels(name, labels, false);
    if (k < 0)
        return k;

    Buf *b = &f->samples;
    buf_adds(b, f->name);
    if (labels && labels[0]) {
        buf_addc(b, '{');
        buf_add_labels(b, labels);
        buf_addc(b, '}');
    }
    buf_addc(b, ' ');
    buf_add_value(b, value);
    buf_addc(b, '\n');
    f->n_lines++;
    r->n_lines++;
    return 0;
}

static int check_histogram(const char *metric, const BmHistogram *h)
{
    if (h->n_bounds > BM_HISTOGRAM_MAX_BOUNDS)
        return bm_error(-EINVAL, "histogram '%s' has %zu bounds, more than %d", metric, h->n_bounds,
                        BM_HISTOGRAM_MAX_BOUNDS);
    if (h->n_bounds > 0 && !h->bounds)
        return bm_error(-EINVAL, "histogram '%s' has no bounds", metric);
    for (size_t i = 0; i < h->n_bounds; i++) {
        if (!isfinite(h->bounds[i]) || (i > 0 && !(h->bounds[i] > h->bounds[i - 1])))
            return bm_error(-EINVAL, "bounds of histogram '%s' are not finite and ascending",
                            metric);
    }
    uint64_t total = 0;
    for (size_t i = 0; i <= h->n_bounds; i++) {
        if (__builtin_add_overflow(total, h->counts[i], &total))
            return bm_error(-EINVAL, "bucket counts of histogram '%s' overflow", metric);
    }
    if (total != h->count)
        return bm_error(-EINVAL,
                        "histogram '%s' counts %" PRIu64 " observations but its buckets %" PRIu64,
                        metric, h->count, total);
    return 0;
}

int bm_registry_add_histogram(BmRegistry *r, const char *name, const char *const *labels,
                              const BmHistogram *h)
{
    Family *f = family_for_add(r, name, BM_METRIC_HISTOGRAM);
    if (!f)
        return -EINVAL;
    int k = check_labels(name, labels, true);
    if (k < 0)
        return k;
    k = check_histogram(name, h);
    if (k < 0)
        return k;

    /* The labels once, then name_bucket{LABELS,le="..."} per bucket. */
    Buf lb = {0};
    buf_add_labels(&lb, labels);
    Buf *b = &f->samples;
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= h->n_bounds; i++) {
        cumulative += h->counts[i];
        buf_adds(b, f->name);
        buf_add(b, "_bucket{", 8);
        buf_add(b, lb.p, lb.len);
        buf_add(b, lb.len ? ",le=\"" : "le=\"", lb.len ? 5 : 4);
        if (i < h->n_bounds)
            buf_add_value(b, h->bounds[i]);
        else
            buf_add(b, "+Inf", 4);
        buf_add(b, "\"} ", 3);
        buf_add_u64(b, cumulative);
        buf_addc(b, '\n');
    }
    for (int sum = 1; sum >= 0; sum--) {
        buf_adds(b, f->name);
        buf_adds(b, sum ? "_sum" : "_count");
        if (lb.len) {
            buf_addc(b, '{');
            buf_add(b, lb.p, lb.len);
            buf_addc(b, '}');
        }
        buf_addc(b, ' ');
        if (sum)
            buf_add_value(b, h->sum);
        else
            buf_add_u64(b, h->count);
        buf_addc(b, '\n');
    }
    free(lb.p);
    f->n_lines += h->n_bounds + 3;
    r->n_lines += h->n_bounds + 3;
    return 0;
}

char *bm_registry_render(const BmRegistry *r)
{
    size_t total = 1;
    for (size_t i = 0; i < r->n_families; i++)
        total += r->families[i].header_len + r->families[i].samples.len;

    char *out = bm_reallocarray(NULL, total, 1), *p = out;
    for (size_t i = 0; i < r->n_families; i++) {
        const Family *f = &r->families[i];
        memcpy(p, f->header, f->header_len);
        p += f->header_len;
        if (f->samples.len)
            memcpy(p, f->samples.p, f->samples.len);
        p += f->samples.len;
    }
    *p = '\0';
    return out;
}

size_t bm_registry_samples(const BmRegistry *r)
{
    return r->n_lines;
}
