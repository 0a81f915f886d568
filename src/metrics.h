/* Prometheus metrics: histograms and a registry of metric families rendered in the text
 * exposition format 0.0.4 (docs/metrics.md lists what balloonmgr exports). Pure: no I/O. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* The most bounds a histogram can have (counts[] also holds the implicit +Inf bucket). */
#define BM_HISTOGRAM_MAX_BOUNDS 31

/* A histogram with fixed upper bounds (ascending, finite); counts per bucket are NOT
 * cumulative inside; +Inf is implicit. */
typedef struct {
    size_t n_bounds;
    /* Not owned; e.g. bm_latency_buckets. */
    const double *bounds;
    /* counts[i]: observations <= bounds[i] and > bounds[i-1]; counts[n_bounds]: above the
     * last bound. */
    uint64_t counts[BM_HISTOGRAM_MAX_BOUNDS + 1];
    double sum;
    uint64_t count;
} BmHistogram;

/* The buckets of balloonmgr_balloon_change_duration_seconds, in seconds:
 * 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 30 60: from the 10 ms poll of a change up to
 * the default (and shipped policies') apply_timeout of 60 s; a change only counts once it
 * reached its target, so a longer apply_timeout lands in +Inf. */
extern const double bm_latency_buckets[];
extern const size_t bm_latency_n_buckets;

/* Empties h and sets its bounds (n of them, at most BM_HISTOGRAM_MAX_BOUNDS; not copied, so
 * they must outlive h). */
void bm_histogram_init(BmHistogram *h, const double *bounds, size_t n);

/* Counts the observation v (in the histogram's unit) in its bucket, the sum and the count.
 * NaN and negative values are ignored. The counts saturate at BM_COUNT_MAX and the sum at
 * DBL_MAX (+Inf counts in the last bucket, the sum stays finite). */
void bm_histogram_observe(BmHistogram *h, double v);

typedef enum { BM_METRIC_GAUGE, BM_METRIC_COUNTER, BM_METRIC_HISTOGRAM } BmMetricType;

/* Metric families and their samples, in the order they were declared and added. */
typedef struct BmRegistry BmRegistry;

/* An empty registry. Free with bm_registry_free(). Never NULL (aborts on out-of-memory). */
BmRegistry *bm_registry_new(void);

/* Frees r and everything it holds. NULL-safe. */
void bm_registry_free(BmRegistry *r);
DEFINE_CLEANUP(BmRegistry *, bm_registry_free)

/* Declares a family. Declaring the same name twice with the same type is fine (no-op: the
 * first help stays); another type returns -EINVAL. The name must match
 * [a-zA-Z_:][a-zA-Z0-9_:]*, and must not clash with the series of a histogram (a histogram
 * "x" renders x_bucket, x_sum and x_count), else -EINVAL. help is copied; NULL leaves the
 * "# HELP" line out (promtool's lint then warns "no help text"). Returns 0, or -EINVAL with the
 * reason in bm_error_detail(). */
int bm_registry_declare(BmRegistry *r, const char *name, BmMetricType type, const char *help);

/* One metric family as a module declares it: a table of them per module (export.c, ksm.c,
 * process.c), declared by bm_registry_declare_all(). */
typedef struct {
    const char *name;
    BmMetricType type;
    const char *help;
} BmMetricFamily;

/* bm_registry_declare() for each of the n families: all are tried. Returns 0, or -EINVAL when
 * one failed (its reason in bm_error_detail()). */
int bm_registry_declare_all(BmRegistry *r, const BmMetricFamily *families, size_t n);

/* Adds a sample to a declared gauge/counter family. labels: NULL-terminated array of
 * alternating names and values ({"domain", "web1", "direction", "inflate", NULL}), or NULL;
 * copied. Label names must match [a-zA-Z_][a-zA-Z0-9_]*, not start with "__" and not repeat.
 * Values are any UTF-8 (escaped on output; bytes that are not valid UTF-8 become U+FFFD).
 * Samples keep insertion order within a family. Returns 0, or -EINVAL (undeclared family,
 * wrong type, bad label name, a name without a value) with the reason in bm_error_detail();
 * nothing is added on failure. */
int bm_registry_add(BmRegistry *r, const char *name, const char *const *labels, double value);

/* Adds one histogram series to a declared histogram family: cumulative name_bucket lines
 * (le="+Inf" last), name_sum and name_count, rendered from h now (h is not kept). labels as
 * for bm_registry_add(), and "le" is refused. Returns 0, or -EINVAL (as bm_registry_add(),
 * or an inconsistent h: more than BM_HISTOGRAM_MAX_BOUNDS bounds, bounds not finite and
 * ascending, count not the sum of counts[]) with the reason in bm_error_detail(). */
int bm_registry_add_histogram(BmRegistry *r, const char *name, const char *const *labels,
                              const BmHistogram *h);

/* Room for any value bm_metric_format_value() writes, with its NUL. */
#define BM_METRIC_VALUE_MAX 32

/* Writes v to buf (size n, BM_METRIC_VALUE_MAX is enough) as the exposition format shows
 * it: an integral value below 2^64 in magnitude as an integer (8589934592, 0 also for -0),
 * "NaN", "+Inf", "-Inf", otherwise the shortest representation that reads back as the same
 * double (0.1, 1e+20). Assumes LC_NUMERIC is "C" (balloonmgr never calls setlocale()).
 * Returns buf. */
const char *bm_metric_format_value(double v, char *buf, size_t n);

/* The text exposition format 0.0.4: for each family in declaration order "# HELP name help"
 * (help escaped: backslash and newline), "# TYPE name type", then its samples (a family
 * without samples has just these two lines); label values escaped (backslash, double quote,
 * newline); values and le bounds as bm_metric_format_value() writes them. Caller frees;
 * never NULL. Takes time linear in the size of the output. */
char *bm_registry_render(const BmRegistry *r);

/* The number of sample lines the registry renders (a histogram series counts its bucket,
 * _sum and _count lines): for tests and benchmarks. */
size_t bm_registry_samples(const BmRegistry *r);
