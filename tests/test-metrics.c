/* The metrics registry and its exposition: golden outputs under tests/data/metrics/NAME.prom
 * compared byte for byte (BM_TEST_REGENERATE=1 rewrites them), each also checked by
 * `promtool check metrics` (parse and lint), plus values, histograms and every way to
 * misuse the registry. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "export.h"
#include "file.h"
#include "fixture.h"
#include "metrics.h"
#include "row.h"
#include "tap.h"
#include "util.h"

#define skip(...)                                                                                  \
    do {                                                                                           \
        printf("ok %d - # SKIP ", ++tap_n);                                                        \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
    } while (0)

/* promtool */

static bool find_promtool(void)
{
    const char *path = getenv("PATH");
    if (!path)
        return false;
    _cleanup_free_ char *copy = bm_strdup(path);
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        _cleanup_free_ char *exe = bm_asprintf("%s/promtool", dir);
        if (access(exe, X_OK) == 0)
            return true;
    }
    return false;
}

/* Whether promtool is on PATH; when it is not, reports a skip, or a failure under CI (where
 * tools/install-deps.sh installs it). */
static bool have_promtool(const char *what)
{
    if (find_promtool())
        return true;
    const char *ci = getenv("CI");
    if (ci && *ci && strcmp(ci, "false") != 0)
        ok(false, "promtool installed under CI, for %s", what);
    else
        skip("promtool not installed: %s not checked", what);
    return false;
}

/* Runs `promtool check metrics < file`. Returns its exit status (-1 if it did not run) and
 * *ret_output, what it printed on stdout and stderr (caller frees). */
static int promtool_check(const char *file, char **ret_output)
{
    int fds[2];
    *ret_output = bm_strdup("");
    int in = open(file, O_RDONLY | O_CLOEXEC);
    if (in < 0 || pipe2(fds, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in, 0);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execlp("promtool", "promtool", "check", "metrics", (char *)NULL);
        _exit(127);
    }
    close(in);
    close(fds[1]);
    size_t len = 0;
    char chunk[4096];
    ssize_t n;
    while ((n = read(fds[0], chunk, sizeof(chunk))) > 0) {
        *ret_output = bm_reallocarray(*ret_output, len + (size_t)n + 1, 1);
        memcpy(*ret_output + len, chunk, (size_t)n);
        len += (size_t)n;
        (*ret_output)[len] = '\0';
    }
    close(fds[0]);
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

/* One TAP line: promtool accepts file without a word (skipped without promtool). */
static void promtool_ok(const char *file, const char *what)
{
    if (!have_promtool(what))
        return;
    _cleanup_free_ char *out = NULL;
    int status = promtool_check(file, &out);
    ok(status == 0 && !*out, "promtool check metrics: %s", what);
    if (status != 0 || *out)
        diag("promtool exit status %d: %s", status, out);
}

/* Writes text to a temporary file; returns its path (caller unlinks and frees). */
static char *write_temp(const char *text)
{
    const char *dir = getenv("TMPDIR");
    char *path = bm_asprintf("%s/test-metrics-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return path;
    size_t len = strlen(text);
    for (size_t o = 0; o < len;) {
        ssize_t n = write(fd, text + o, len - o);
        if (n <= 0)
            break;
        o += (size_t)n;
    }
    close(fd);
    return path;
}

/* Golden files */

/* Compares the render of r with tests/data/metrics/NAME.prom, then runs promtool on the
 * golden file. */
static void check_golden_text(const char *name, const char *got)
{
    _cleanup_free_ char *rel = bm_asprintf("metrics/%s.prom", name);
    _cleanup_free_ char *path = bm_asprintf("%s/tests/data/%s", SOURCE_ROOT, rel);

    const char *regen = getenv("BM_TEST_REGENERATE");
    if (regen && *regen && strcmp(regen, "0") != 0) {
        FILE *f = fopen(path, "wb");
        if (f) {
            fputs(got, f);
            fclose(f);
        }
    }

    _cleanup_free_ char *want = fixture_read(rel);
    bool same = want && strcmp(got, want) == 0;
    ok(same, "%s.prom: render matches byte for byte", name);
    if (!same && !want) {
        diag("cannot read %s", path);
    } else if (!same) {
        const char *g = got, *w = want;
        int line = 1;
        while (*g && *g == *w) {
            if (*g == '\n')
                line++;
            g++, w++;
        }
        while (g > got && g[-1] != '\n') /* back to the start of the line */
            g--, w--;
        diag("first difference on line %d", line);
        diag("got:  %.*s", (int)strcspn(g, "\n"), g);
        diag("want: %.*s", (int)strcspn(w, "\n"), w);
    }
    promtool_ok(path, rel);
}

static void check_golden(const char *name, const BmRegistry *r)
{
    _cleanup_free_ char *got = bm_registry_render(r);
    check_golden_text(name, got);
}

/* Values */

static const struct {
    double v;
    const char *want;
} values[] = {
    {0, "0"},
    {-0.0, "0"},
    {1, "1"},
    {-1, "-1"},
    {42, "42"},
    {8589934592.0, "8589934592"},             /* 8 GiB */
    {9007199254740992.0, "9007199254740992"}, /* 2^53 */
    {9007199254740994.0, "9007199254740994"}, /* 2^53 + 2 */
    {-9007199254740992.0, "-9007199254740992"},
    {1e19, "10000000000000000000"},
    {18446744073709549568.0, "18446744073709549568"},   /* the largest double below 2^64 */
    {18446744073709551616.0, "1.8446744073709552e+19"}, /* 2^64 */
    {1e20, "1e+20"},
    {-1e20, "-1e+20"},
    {0.5, "0.5"},
    {0.05, "0.05"},
    {2.5, "2.5"},
    {-1.5, "-1.5"},
    {0.1, "0.1"},
    {0.1 + 0.2, "0.30000000000000004"},
    {1.0 / 3, "0.3333333333333333"},
    {2.0 / 3, "0.6666666666666666"},
    {123456.789, "123456.789"},
    {1e-05, "1e-05"},
    {1.5e-10, "1.5e-10"},
    {1700000000.5, "1700000000.5"},
    {DBL_MAX, "1.7976931348623157e+308"},
    {DBL_MIN, "2.2250738585072014e-308"},
    {5e-324, "5e-324"}, /* the smallest subnormal */
    {NAN, "NaN"},
    {-NAN, "NaN"},
    {INFINITY, "+Inf"},
    {-INFINITY, "-Inf"},
};

static void test_format_value(void)
{
    for (size_t i = 0; i < BM_ARRAY_SIZE(values); i++) {
        char buf[BM_METRIC_VALUE_MAX];
        is_str(bm_metric_format_value(values[i].v, buf, sizeof(buf)), values[i].want, "value %s",
               values[i].want);
    }
    char small[4];
    is_str(bm_metric_format_value(123456, small, sizeof(small)), "123", "value truncated to buf");
}

static void test_values_golden(void)
{
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    ok(bm_registry_declare(r, "balloonmgr_test_value", BM_METRIC_GAUGE,
                           "Values as Prometheus writes them.") == 0,
       "values: declare gauge");
    int fails = 0;
    for (size_t i = 0; i < BM_ARRAY_SIZE(values); i++) {
        char idx[16];
        snprintf(idx, sizeof(idx), "%zu", i);
        const char *labels[] = {"case", idx, "want", values[i].want, NULL};
        fails += bm_registry_add(r, "balloonmgr_test_value", labels, values[i].v) != 0;
    }
    is_u64(fails, 0, "values: every sample added");
    ok(bm_registry_declare(r, "balloonmgr_test_swap_in_bytes_total", BM_METRIC_COUNTER,
                           "Big counters.") == 0,
       "values: declare counter");
    const char *l53[] = {"value", "2^53", NULL}, *l20[] = {"value", "1e20", NULL};
    const char *l64[] = {"value", "2^64-2048", NULL};
    ok(bm_registry_add(r, "balloonmgr_test_swap_in_bytes_total", l53, 9007199254740992.0) == 0 &&
           bm_registry_add(r, "balloonmgr_test_swap_in_bytes_total", l64,
                           (double)(UINT64_MAX - 2047)) == 0 &&
           bm_registry_add(r, "balloonmgr_test_swap_in_bytes_total", l20, 1e20) == 0,
       "values: big counters added");
    is_u64(bm_registry_samples(r), BM_ARRAY_SIZE(values) + 3, "values: sample count");
    check_golden("values", r);
}

/* Escaping */

static void test_escaping_golden(void)
{
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    ok(bm_registry_declare(r, "balloonmgr_domain_info", BM_METRIC_GAUGE,
                           "Domain identity.\nA second line, a backslash \\ and \"quotes\" "
                           "(only backslash and newline are escaped in HELP).") == 0,
       "escaping: declare with a help to escape");
    static const char *const names[] = {
        "web1",
        "with \"double quotes\"",
        "C:\\vm\\new",    /* backslashes: \n here is a backslash and an n */
        "line1\nline2\n", /* real newlines */
        "trailing\\",
        "\\\"",
        "größe-虚拟机-🎈",                           /* UTF-8 passes as is */
        "bad\xff\xc0\xafutf8\xed\xa0\x80.\xe2\x82", /* invalid, overlong, surrogate, truncated */
        "a,b=c}{",
        "tab\there\rcr",
        "",
    };
    int fails = 0;
    for (size_t i = 0; i < BM_ARRAY_SIZE(names); i++) {
        const char *labels[] = {"domain", names[i], "state", "running", NULL};
        fails += bm_registry_add(r, "balloonmgr_domain_info", labels, 1) != 0;
    }
    is_u64(fails, 0, "escaping: every sample added");

    ok(bm_registry_declare(r, "balloonmgr_build_info", BM_METRIC_GAUGE,
                           "Bad UTF-8 in help \xc3( becomes U+FFFD; UTF-8 stays: é") == 0,
       "escaping: declare with bad UTF-8 in help");
    const char *labels[] = {"version", "0.1.0", NULL};
    ok(bm_registry_add(r, "balloonmgr_build_info", labels, 1) == 0, "escaping: build_info");
    check_golden("escaping", r);
}

/* Histograms */

static void test_histogram_observe(void)
{
    BmHistogram h;
    bm_histogram_init(&h, bm_latency_buckets, bm_latency_n_buckets);
    is_u64(bm_latency_n_buckets, 13, "latency buckets: 13 bounds");
    ok(bm_latency_buckets[0] == 0.005 && bm_latency_buckets[12] == 60,
       "latency buckets: 0.005 (half the 10 ms poll) .. 60 (the default apply_timeout)");
    bm_histogram_observe(&h, 0);
    bm_histogram_observe(&h, 0.005); /* on a bound: that bucket */
    bm_histogram_observe(&h, 0.0050001);
    bm_histogram_observe(&h, 60);
    bm_histogram_observe(&h, 60.5);
    bm_histogram_observe(&h, INFINITY);
    bm_histogram_observe(&h, NAN);
    bm_histogram_observe(&h, -1);
    bm_histogram_observe(&h, -INFINITY);
    is_u64(h.counts[0], 2, "observe: 0 and 0.005 in le=0.005");
    is_u64(h.counts[1], 1, "observe: 0.0050001 in le=0.01");
    is_u64(h.counts[12], 1, "observe: 60 in le=60");
    is_u64(h.counts[13], 2, "observe: 60.5 and +Inf above the last bound");
    is_u64(h.count, 6, "observe: NaN and negatives ignored");
    ok(isfinite(h.sum) && h.sum == DBL_MAX, "observe: +Inf saturates the sum at the largest double (never +Inf)");

    bm_histogram_init(&h, bm_latency_buckets, bm_latency_n_buckets);
    is_u64(h.count, 0, "init: empties");
    ok(h.sum == 0 && h.counts[0] == 0 && h.counts[13] == 0, "init: zero sum and counts");
}

static void test_histogram_golden(void)
{
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    ok(bm_registry_declare(r, "balloonmgr_balloon_change_duration_seconds", BM_METRIC_HISTOGRAM,
                           "Time from setting a target to the balloon reaching it.") == 0,
       "histogram: declare");

    BmHistogram h;
    bm_histogram_init(&h, bm_latency_buckets, bm_latency_n_buckets);
    static const double obs[] = {0.03125, 0.05, 0.0625, 0.375, 0.375, 4, 45, 400, NAN, -2};
    for (size_t i = 0; i < BM_ARRAY_SIZE(obs); i++)
        bm_histogram_observe(&h, obs[i]);
    is_u64(h.count, 8, "histogram: 8 observations counted");
    ok(h.sum == 449.89375, "histogram: sum 449.89375");
    const char *inflate[] = {"direction", "inflate", "sg", "negotiated", NULL};
    ok(bm_registry_add_histogram(r, "balloonmgr_balloon_change_duration_seconds", inflate, &h) == 0,
       "histogram: add observed series");

    BmHistogram empty;
    bm_histogram_init(&empty, bm_latency_buckets, bm_latency_n_buckets);
    const char *deflate[] = {"direction", "deflate", "sg", "not_negotiated", NULL};
    ok(bm_registry_add_histogram(r, "balloonmgr_balloon_change_duration_seconds", deflate, &empty) == 0,
       "histogram: add empty series");

    /* No labels, other bounds (a large one, a fraction), no bounds at all. */
    ok(bm_registry_declare(r, "balloonmgr_test_size_bytes", BM_METRIC_HISTOGRAM,
                           "A histogram without labels.") == 0,
       "histogram: declare unlabelled");
    static const double size_bounds[] = {0.5, 1048576, 1e20};
    BmHistogram sz;
    bm_histogram_init(&sz, size_bounds, BM_ARRAY_SIZE(size_bounds));
    bm_histogram_observe(&sz, 0.25);
    bm_histogram_observe(&sz, 4096);
    bm_histogram_observe(&sz, 4096);
    bm_histogram_observe(&sz, 1e21);
    ok(bm_registry_add_histogram(r, "balloonmgr_test_size_bytes", NULL, &sz) == 0,
       "histogram: add unlabelled series");
    BmHistogram none;
    bm_histogram_init(&none, NULL, 0);
    bm_histogram_observe(&none, 7);
    const char *only[] = {"bounds", "none", NULL};
    ok(bm_registry_add_histogram(r, "balloonmgr_test_size_bytes", only, &none) == 0,
       "histogram: add series with only +Inf");

    ok(bm_registry_declare(r, "balloonmgr_test_unused_seconds", BM_METRIC_HISTOGRAM,
                           "A histogram family without series.") == 0,
       "histogram: declare family without series");
    is_u64(bm_registry_samples(r), 2 * (13 + 3) + (3 + 3) + (0 + 3),
           "histogram: samples count bucket, _sum and _count lines");
    check_golden("histogram", r);
}

/* Declaration order, duplicates, families without samples */

static void test_order_golden(void)
{
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    ok(bm_registry_declare(r, "balloonmgr_zeta_bytes", BM_METRIC_GAUGE, "Declared first.") == 0 &&
           bm_registry_declare(r, "balloonmgr_alpha_total", BM_METRIC_COUNTER,
                               "Declared second.") == 0 &&
           bm_registry_declare(r, "balloonmgr_empty_bytes", BM_METRIC_GAUGE,
                               "Declared third, never gets a sample.") == 0 &&
           bm_registry_declare(r, "balloonmgr_empty_total", BM_METRIC_COUNTER,
                               "A counter without samples.") == 0 &&
           bm_registry_declare(r, "balloonmgr_middle_ratio", BM_METRIC_GAUGE, "Declared fifth.") ==
               0,
       "order: five families declared");
    ok(bm_registry_declare(r, "balloonmgr_zeta_bytes", BM_METRIC_GAUGE, "Other help: ignored.") ==
           0,
       "order: declaring again with the same type is a no-op");
    ok(bm_registry_declare(r, "balloonmgr_alpha_total", BM_METRIC_COUNTER, NULL) == 0,
       "order: declaring again without help is a no-op");

    const char *a[] = {"domain", "a", NULL}, *b[] = {"domain", "b", NULL};
    const char *c[] = {"domain", "c", NULL};
    int fails = 0;
    fails += bm_registry_add(r, "balloonmgr_middle_ratio", NULL, 0.25) != 0;
    fails += bm_registry_add(r, "balloonmgr_zeta_bytes", b, 2) != 0;
    fails += bm_registry_add(r, "balloonmgr_alpha_total", NULL, 7) != 0;
    fails += bm_registry_add(r, "balloonmgr_zeta_bytes", a, 1) != 0;
    fails += bm_registry_add(r, "balloonmgr_zeta_bytes", c, 3) != 0;
    const char *empty_labels[] = {NULL};
    fails += bm_registry_add(r, "balloonmgr_zeta_bytes", empty_labels, 0) != 0;
    is_u64(fails, 0, "order: samples added interleaved");
    is_u64(bm_registry_samples(r), 6, "order: 6 samples");
    check_golden("order", r);
}

static void test_empty_and_no_help(void)
{
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    _cleanup_free_ char *empty = bm_registry_render(r);
    is_str(empty, "", "empty registry renders nothing");
    is_u64(bm_registry_samples(r), 0, "empty registry has no samples");

    ok(bm_registry_declare(r, "balloonmgr_libvirt_up", BM_METRIC_GAUGE, NULL) == 0,
       "declare without help");
    ok(bm_registry_add(r, "balloonmgr_libvirt_up", NULL, 1) == 0, "add to it");
    _cleanup_free_ char *out = bm_registry_render(r);
    is_str(out, "# TYPE balloonmgr_libvirt_up gauge\nballoonmgr_libvirt_up 1\n",
           "NULL help: no HELP line");
    _cleanup_free_ char *out2 = bm_registry_render(r);
    is_str(out2, out, "rendering twice gives the same text");
}

/* Errors */

static void test_errors(void)
{
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    ok(bm_registry_declare(r, "balloonmgr_domain_rss_bytes", BM_METRIC_GAUGE, "RSS.") == 0 &&
           bm_registry_declare(r, "balloonmgr_passes_total", BM_METRIC_COUNTER, "Passes.") == 0 &&
           bm_registry_declare(r, "balloonmgr_balloon_change_duration_seconds", BM_METRIC_HISTOGRAM,
                               "Durations.") == 0,
       "errors: declare one family of each type");
    const char *web1[] = {"domain", "web1", NULL};
    ok(bm_registry_add(r, "balloonmgr_domain_rss_bytes", web1, 1024) == 0, "errors: one sample");
    _cleanup_free_ char *before = bm_registry_render(r);

    static const char *const bad_names[] = {"",      "1abc", "a-b", "a b", "a.b",
                                            "héllo", "a\nb", "{a}", "a\"", "0"};
    for (size_t i = 0; i < BM_ARRAY_SIZE(bad_names); i++) {
        char pb[64];
        bm_error_reset();
        int k = bm_registry_declare(r, bad_names[i], BM_METRIC_GAUGE, "x");
        ok(k == -EINVAL && strstr(bm_error_detail(k), "is not valid"),
           "declare refuses metric name '%s'", bm_printable(bad_names[i], pb, sizeof(pb)));
    }
    ok(bm_registry_declare(r, NULL, BM_METRIC_GAUGE, "x") == -EINVAL, "declare refuses NULL");
    ok(bm_registry_declare(r, "balloonmgr_x", (BmMetricType)7, "x") == -EINVAL,
       "declare refuses an unknown type");
    ok(bm_registry_declare(r, "_a:b_c9", BM_METRIC_GAUGE, "x") == 0 &&
           bm_registry_declare(r, "A", BM_METRIC_GAUGE, "x") == 0,
       "declare accepts '_a:b_c9' and 'A'");

    int k = bm_registry_declare(r, "balloonmgr_domain_rss_bytes", BM_METRIC_COUNTER, "x");
    ok(k == -EINVAL, "declare: same name, another type refused");
    is_str(bm_error_detail(k),
           "metric 'balloonmgr_domain_rss_bytes' is already declared as a gauge",
           "declare: type mismatch reason");
    k = bm_registry_declare(r, "balloonmgr_balloon_change_duration_seconds_count", BM_METRIC_GAUGE, "x");
    is_str(k == -EINVAL ? bm_error_detail(k) : "accepted",
           "metric 'balloonmgr_balloon_change_duration_seconds_count' clashes with the series of "
           "histogram 'balloonmgr_balloon_change_duration_seconds'",
           "declare: a histogram's _count series is taken");
    ok(bm_registry_declare(r, "balloonmgr_balloon_change_duration_seconds_bucket", BM_METRIC_COUNTER,
                           "x") == -EINVAL &&
           bm_registry_declare(r, "balloonmgr_balloon_change_duration_seconds_sum", BM_METRIC_GAUGE,
                               "x") == -EINVAL,
       "declare: _bucket and _sum also taken");
    ok(bm_registry_declare(r, "balloonmgr_passes_total_count", BM_METRIC_GAUGE, "x") == 0,
       "declare: a _count suffix on a non-histogram is fine");
    k = bm_registry_declare(r, "balloonmgr_passes", BM_METRIC_HISTOGRAM, "x");
    ok(k == 0, "declare: histogram 'balloonmgr_passes' next to 'balloonmgr_passes_total'");
    k = bm_registry_declare(r, "balloonmgr_domain_rss", BM_METRIC_HISTOGRAM, "x");
    ok(k == 0, "declare: histogram whose _bytes would not clash");
    ok(bm_registry_declare(r, "balloonmgr_lat", BM_METRIC_GAUGE, "x") == 0 &&
           bm_registry_declare(r, "balloonmgr_lat_sum", BM_METRIC_GAUGE, "x") == 0,
       "declare: gauges x and x_sum");
    k = bm_registry_declare(r, "balloonmgr_lat", BM_METRIC_HISTOGRAM, "x");
    ok(k == -EINVAL, "declare: x redeclared as histogram refused (type)");
    ok(bm_registry_declare(r, "balloonmgr_lat3_bucket", BM_METRIC_GAUGE, "x") == 0,
       "declare: a gauge named like a histogram's bucket series, before the histogram");
    k = bm_registry_declare(r, "balloonmgr_lat3", BM_METRIC_HISTOGRAM, "x");
    is_str(k == -EINVAL ? bm_error_detail(k) : "accepted",
           "histogram 'balloonmgr_lat3' clashes with metric 'balloonmgr_lat3_bucket'",
           "declare: histogram whose _bucket is taken refused");

    /* Adding */
    _cleanup_free_ char *mid = bm_registry_render(r);
    size_t samples = bm_registry_samples(r);
    k = bm_registry_add(r, "balloonmgr_undeclared_bytes", NULL, 1);
    ok(k == -EINVAL, "add: undeclared refused");
    is_str(bm_error_detail(k), "metric 'balloonmgr_undeclared_bytes' is not declared",
           "add: undeclared reason");
    ok(bm_registry_add(r, NULL, NULL, 1) == -EINVAL, "add: NULL name refused");
    k = bm_registry_add(r, "balloonmgr_balloon_change_duration_seconds", NULL, 1);
    ok(k == -EINVAL, "add: a plain sample to a histogram refused");
    is_str(bm_error_detail(k),
           "metric 'balloonmgr_balloon_change_duration_seconds' is a histogram, not a gauge or counter",
           "add: histogram type reason");
    BmHistogram h;
    bm_histogram_init(&h, bm_latency_buckets, bm_latency_n_buckets);
    k = bm_registry_add_histogram(r, "balloonmgr_passes_total", NULL, &h);
    ok(k == -EINVAL, "add_histogram: to a counter refused");
    is_str(bm_error_detail(k), "metric 'balloonmgr_passes_total' is a counter, not a histogram",
           "add_histogram: type reason");
    ok(bm_registry_add_histogram(r, "balloonmgr_nope", NULL, &h) == -EINVAL,
       "add_histogram: undeclared refused");

    static const char *const bad_labels[] = {"", "1x", "a-b", "a b", "a:b", "__name__", "é"};
    for (size_t i = 0; i < BM_ARRAY_SIZE(bad_labels); i++) {
        char pb[64];
        const char *labels[] = {"domain", "web1", bad_labels[i], "v", NULL};
        k = bm_registry_add(r, "balloonmgr_domain_rss_bytes", labels, 1);
        ok(k == -EINVAL && strstr(bm_error_detail(k), "is not valid"),
           "add: label name '%s' refused", bm_printable(bad_labels[i], pb, sizeof(pb)));
    }
    const char *novalue[] = {"domain", NULL};
    k = bm_registry_add(r, "balloonmgr_domain_rss_bytes", novalue, 1);
    is_str(k == -EINVAL ? bm_error_detail(k) : "accepted",
           "label 'domain' of metric 'balloonmgr_domain_rss_bytes' has no value",
           "add: a label name without a value refused");
    const char *twice[] = {"domain", "a", "kind", "b", "domain", "c", NULL};
    k = bm_registry_add(r, "balloonmgr_domain_rss_bytes", twice, 1);
    is_str(k == -EINVAL ? bm_error_detail(k) : "accepted",
           "label 'domain' of metric 'balloonmgr_domain_rss_bytes' is repeated",
           "add: a repeated label refused");
    const char *le[] = {"le", "1", NULL};
    k = bm_registry_add_histogram(r, "balloonmgr_balloon_change_duration_seconds", le, &h);
    is_str(k == -EINVAL ? bm_error_detail(k) : "accepted",
           "label 'le' of histogram 'balloonmgr_balloon_change_duration_seconds' is reserved for buckets",
           "add_histogram: label le refused");
    ok(bm_registry_add_histogram(r, "balloonmgr_balloon_change_duration_seconds", twice, &h) == -EINVAL,
       "add_histogram: a repeated label refused");

    /* Inconsistent histograms (as a corrupt state file could give) */
    BmHistogram bad = h;
    bad.count = 1;
    k = bm_registry_add_histogram(r, "balloonmgr_balloon_change_duration_seconds", NULL, &bad);
    is_str(k == -EINVAL ? bm_error_detail(k) : "accepted",
           "histogram 'balloonmgr_balloon_change_duration_seconds' counts 1 observations but its "
           "buckets 0",
           "add_histogram: count not the sum of the buckets refused");
    bad = h;
    bad.counts[0] = UINT64_MAX;
    bad.counts[1] = 2;
    bad.count = 1;
    ok(bm_registry_add_histogram(r, "balloonmgr_balloon_change_duration_seconds", NULL, &bad) == -EINVAL,
       "add_histogram: overflowing buckets refused");
    static const double unsorted[] = {1, 0.5}, dup[] = {1, 1}, inf[] = {1, INFINITY};
    static const double nan_bound[] = {NAN};
    const double *bounds[] = {unsorted, dup, inf, nan_bound};
    for (size_t i = 0; i < BM_ARRAY_SIZE(bounds); i++) {
        bad = (BmHistogram){.n_bounds = i == 3 ? 1 : 2, .bounds = bounds[i]};
        k = bm_registry_add_histogram(r, "balloonmgr_balloon_change_duration_seconds", NULL, &bad);
        ok(k == -EINVAL && strstr(bm_error_detail(k), "not finite and ascending"),
           "add_histogram: bad bounds %zu refused", i);
    }
    bad = (BmHistogram){.n_bounds = BM_HISTOGRAM_MAX_BOUNDS + 1, .bounds = bm_latency_buckets};
    ok(bm_registry_add_histogram(r, "balloonmgr_balloon_change_duration_seconds", NULL, &bad) == -EINVAL,
       "add_histogram: too many bounds refused");
    bad = (BmHistogram){.n_bounds = 2, .bounds = NULL};
    ok(bm_registry_add_histogram(r, "balloonmgr_balloon_change_duration_seconds", NULL, &bad) == -EINVAL,
       "add_histogram: NULL bounds refused");

    _cleanup_free_ char *after = bm_registry_render(r);
    is_str(after, mid, "failed adds leave the output unchanged");
    is_u64(bm_registry_samples(r), samples, "failed adds leave the sample count unchanged");
    ok(strncmp(after, before, strlen(before)) == 0, "failed declares did not touch the output");
    bm_registry_free(NULL);
    ok(true, "bm_registry_free(NULL) is a no-op");
}

/* A registry shaped like docs/metrics.md: two domains, a few families of each kind. */

static void test_catalogue_golden(void)
{
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    static const struct {
        const char *name;
        BmMetricType type;
        const char *help;
    } fams[] = {
        {"balloonmgr_balloon_change_duration_seconds", BM_METRIC_HISTOGRAM,
         "Time from setting a target to the balloon reaching it (within 1 MiB)."},
        {"balloonmgr_balloon_changes_total", BM_METRIC_COUNTER,
         "Target changes balloonmgr made, by how they ended."},
        {"balloonmgr_domain_last_change_duration_seconds", BM_METRIC_GAUGE,
         "Duration of the last change of the domain."},
        {"balloonmgr_rss_dropped_bytes_total", BM_METRIC_COUNTER,
         "Sum of the RSS drops observed after inflates."},
        {"balloonmgr_domain_inflate_yield_ratio", BM_METRIC_GAUGE,
         "QEMU RSS drop per byte of balloon growth over the domain's inflates, 0..1."},
        {"balloonmgr_domain_unresponsive", BM_METRIC_GAUGE,
         "1 when the last change stalled or timed out."},
        {"balloonmgr_domain_short_of_memory", BM_METRIC_GAUGE,
         "1 when the last pass found the guest short of memory or under pressure."},
        {"balloonmgr_domain_info", BM_METRIC_GAUGE, "One per domain: identity and features."},
        {"balloonmgr_domain_maximum_bytes", BM_METRIC_GAUGE, "Maximum memory."},
        {"balloonmgr_domain_balloon_current_bytes", BM_METRIC_GAUGE,
         "Balloon current: memory the guest has now."},
        {"balloonmgr_domain_guest_usable_bytes", BM_METRIC_GAUGE,
         "Memory the guest could use without swapping."},
        {"balloonmgr_domain_guest_major_faults_total", BM_METRIC_COUNTER,
         "Guest major page faults."},
        {"balloonmgr_domain_stats_last_update_timestamp_seconds", BM_METRIC_GAUGE,
         "When the guest last updated its memory statistics, Unix time."},
        {"balloonmgr_domain_feature_configured", BM_METRIC_GAUGE,
         "1 when the domain XML turns the balloon feature on."},
        {"balloonmgr_domain_feature_negotiated", BM_METRIC_GAUGE,
         "1 when the QEMU monitor found the balloon feature negotiated."},
        {"balloonmgr_domain_backed_free_bytes", BM_METRIC_GAUGE,
         "Free guest memory the QEMU process holds."},
        {"balloonmgr_reclaimed_bytes", BM_METRIC_GAUGE,
         "Sum of balloonmgr_domain_reclaimed_bytes."},
        {"balloonmgr_host_memory_available_bytes", BM_METRIC_GAUGE, "MemAvailable."},
        {"balloonmgr_host_memory_pressure_some_ratio", BM_METRIC_GAUGE,
         "PSI memory some avg10 / 100."},
        {"balloonmgr_host_mode", BM_METRIC_GAUGE, "1 for the current mode, 0 for the others."},
        {"balloonmgr_host_unmet_bytes", BM_METRIC_GAUGE,
         "Memory the host needs that the guests cannot give back without going short."},
        {"balloonmgr_host_backed_free_bytes", BM_METRIC_GAUGE,
         "Free guest memory the QEMU processes hold."},
        {"balloonmgr_ksm_state", BM_METRIC_GAUGE, "1 for KSM's current state (run)."},
        {"balloonmgr_ksm_saved_bytes", BM_METRIC_GAUGE, "Memory KSM saves."},
        {"balloonmgr_passes_total", BM_METRIC_COUNTER, "Policy passes run."},
        {"balloonmgr_errors_total", BM_METRIC_COUNTER, "Errors by kind."},
        {"balloonmgr_libvirt_up", BM_METRIC_GAUGE, "1 while the libvirt connection is up."},
        {"balloonmgr_last_successful_pass_timestamp_seconds", BM_METRIC_GAUGE,
         "When the last pass completed without error."},
        {"balloonmgr_build_info", BM_METRIC_GAUGE, "Build information."},
    };
    int fails = 0;
    for (size_t i = 0; i < BM_ARRAY_SIZE(fams); i++)
        fails += bm_registry_declare(r, fams[i].name, fams[i].type, fams[i].help) != 0;
    is_u64(fails, 0, "catalogue: %zu families declared", BM_ARRAY_SIZE(fams));

    BmHistogram h;
    bm_histogram_init(&h, bm_latency_buckets, bm_latency_n_buckets);
    bm_histogram_observe(&h, 0.042);
    bm_histogram_observe(&h, 0.18);
    bm_histogram_observe(&h, 1.5);
    const char *hl[] = {"direction", "inflate", "sg", "negotiated", NULL};
    fails += bm_registry_add_histogram(r, "balloonmgr_balloon_change_duration_seconds", hl, &h) != 0;
    bm_histogram_init(&h, bm_latency_buckets, bm_latency_n_buckets);
    bm_histogram_observe(&h, 12.25);
    const char *hl2[] = {"direction", "deflate", "sg", "not_negotiated", NULL};
    fails += bm_registry_add_histogram(r, "balloonmgr_balloon_change_duration_seconds", hl2, &h) != 0;

    const char *reached[] = {"direction", "inflate", "outcome", "reached", NULL};
    const char *timeout[] = {"direction", "deflate", "outcome", "timeout", NULL};
    fails += bm_registry_add(r, "balloonmgr_balloon_changes_total", reached, 3) != 0;
    fails += bm_registry_add(r, "balloonmgr_balloon_changes_total", timeout, 1) != 0;
    fails += bm_registry_add(r, "balloonmgr_rss_dropped_bytes_total", NULL, 3221225472.0) != 0;

    static const struct {
        const char *name, *uuid, *sg;
        double max, cur, usable, faults, updated, last;
    } doms[] = {
        {"web1", "6f9619ff-8b86-d011-b42d-00c04fc964ff", "negotiated", 8589934592.0, 4294967296.0,
         3758096384.0, 1234, 1717999997.5, 0.4375},
        {"db-2", "0b4a4e4e-2f44-4c35-9d7e-5b3f0e7b1d2c", "not_offered", 17179869184.0,
         17179869184.0, 12884901888.0, 0, 1717999990, 31.5},
    };
    for (size_t i = 0; i < BM_ARRAY_SIZE(doms); i++) {
        const char *d[] = {"domain", doms[i].name, NULL};
        const char *dd[] = {"domain", doms[i].name, "direction", "inflate", NULL};
        const char *info[] = {"domain", doms[i].name, "uuid",      doms[i].uuid, "state", "running",
                              "sg",     doms[i].sg,   "ioeventfd", "on",         NULL};
        fails += bm_registry_add(r, "balloonmgr_domain_last_change_duration_seconds", dd,
                                 doms[i].last) != 0;
        fails += bm_registry_add(r, "balloonmgr_domain_inflate_yield_ratio", d, i == 0 ? 0.8125 : 0.03125) != 0;
        fails += bm_registry_add(r, "balloonmgr_domain_unresponsive", d, i == 1) != 0;
        fails += bm_registry_add(r, "balloonmgr_domain_short_of_memory", d, i == 1) != 0;
        fails += bm_registry_add(r, "balloonmgr_domain_info", info, 1) != 0;
        fails += bm_registry_add(r, "balloonmgr_domain_maximum_bytes", d, doms[i].max) != 0;
        fails += bm_registry_add(r, "balloonmgr_domain_balloon_current_bytes", d, doms[i].cur) != 0;
        fails += bm_registry_add(r, "balloonmgr_domain_guest_usable_bytes", d, doms[i].usable) != 0;
        fails += bm_registry_add(r, "balloonmgr_domain_guest_major_faults_total", d,
                                 doms[i].faults) != 0;
        fails += bm_registry_add(r, "balloonmgr_domain_stats_last_update_timestamp_seconds", d, doms[i].updated) != 0;
        static const char *const feats[] = {"free_page_reporting", "deflate_on_oom"};
        for (size_t k = 0; k < BM_ARRAY_SIZE(feats); k++) {
            const char *fl[] = {"domain", doms[i].name, "feature", feats[k], NULL};
            fails += bm_registry_add(r, "balloonmgr_domain_feature_configured", fl, i == 0) != 0;
            if (i == 0)
                fails += bm_registry_add(r, "balloonmgr_domain_feature_negotiated", fl, k == 0) != 0;
        }
        fails += bm_registry_add(r, "balloonmgr_domain_backed_free_bytes", d, i == 0 ? 8388608.0 : 805306368.0) != 0;
    }
    fails += bm_registry_add(r, "balloonmgr_reclaimed_bytes", NULL, 4294967296.0) != 0;
    fails += bm_registry_add(r, "balloonmgr_host_memory_available_bytes", NULL, 27487790694.0) != 0;
    fails += bm_registry_add(r, "balloonmgr_host_memory_pressure_some_ratio", NULL, 0.0123) != 0;
    static const char *const modes[] = {"hold", "reclaim", "release"};
    for (size_t i = 0; i < BM_ARRAY_SIZE(modes); i++) {
        const char *m[] = {"mode", modes[i], NULL};
        fails += bm_registry_add(r, "balloonmgr_host_mode", m, i == 1) != 0;
    }
    fails += bm_registry_add(r, "balloonmgr_host_unmet_bytes", NULL, 536870912.0) != 0;
    fails += bm_registry_add(r, "balloonmgr_host_backed_free_bytes", NULL, 813694976.0) != 0;
    static const char *const ksm[] = {"off", "running", "unmerging"};
    for (size_t i = 0; i < BM_ARRAY_SIZE(ksm); i++) {
        const char *st[] = {"state", ksm[i], NULL};
        fails += bm_registry_add(r, "balloonmgr_ksm_state", st, i == 1) != 0;
    }
    fails += bm_registry_add(r, "balloonmgr_ksm_saved_bytes", NULL, 505679872.0) != 0;
    fails += bm_registry_add(r, "balloonmgr_passes_total", NULL, 1440) != 0;
    const char *kind[] = {"kind", "libvirt", NULL};
    fails += bm_registry_add(r, "balloonmgr_errors_total", kind, 2) != 0;
    fails += bm_registry_add(r, "balloonmgr_libvirt_up", NULL, 1) != 0;
    fails += bm_registry_add(r, "balloonmgr_last_successful_pass_timestamp_seconds", NULL,
                             1718000000.25) != 0;
    const char *version[] = {"version", "0.1.0", NULL};
    fails += bm_registry_add(r, "balloonmgr_build_info", version, 1) != 0;
    is_u64(fails, 0, "catalogue: every sample added");
    check_golden("catalogue", r);

    /* The same render straight from memory, as the agent would serve it. */
    _cleanup_free_ char *text = bm_registry_render(r);
    _cleanup_free_ char *tmp = write_temp(text);
    promtool_ok(tmp, "catalogue rendered now");
    unlink(tmp);
}

/* Every family of docs/metrics.md declared with its type, one sample each with its labels:
 * the catalogue itself must pass promtool's lint. Follows the doc, so no golden. */
static void test_docs_catalogue(void)
{
    _cleanup_free_ char *path = bm_asprintf("%s/docs/metrics.md", SOURCE_ROOT);
    FILE *f = fopen(path, "r");
    if (!f) {
        skip("docs/metrics.md not found");
        return;
    }
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    char line[4096];
    int families = 0, fails = 0;
    while (fgets(line, sizeof(line), f)) {
        /* | `name` | type | labels | meaning | */
        char name[256], type[64];
        int n = 0;
        if (sscanf(line, "| `%255[a-zA-Z0-9_:]` | %63[a-z] %n", name, type, &n) != 2)
            continue;
        BmMetricType t = !strcmp(type, "counter")     ? BM_METRIC_COUNTER
                         : !strcmp(type, "histogram") ? BM_METRIC_HISTOGRAM
                                                      : BM_METRIC_GAUGE;
        const char *labels_col = strchr(line + n, '|');
        const char *end = labels_col ? strchr(labels_col + 1, '|') : NULL;
        char *labels[32] = {0};
        size_t nl = 0;
        for (const char *p = labels_col; p && end && (p = strchr(p, '`')) && p < end && nl < 30;) {
            const char *q = strchr(p + 1, '`');
            if (!q || q > end)
                break;
            labels[nl++] = bm_asprintf("%.*s", (int)(q - p - 1), p + 1);
            labels[nl++] = bm_strdup("x");
            p = q + 1;
        }
        fails += bm_registry_declare(r, name, t, "From docs/metrics.md.") != 0;
        if (t == BM_METRIC_HISTOGRAM) {
            BmHistogram h;
            bm_histogram_init(&h, bm_latency_buckets, bm_latency_n_buckets);
            bm_histogram_observe(&h, 1);
            fails += bm_registry_add_histogram(r, name, (const char *const *)labels, &h) != 0;
        } else {
            fails += bm_registry_add(r, name, (const char *const *)labels, 1) != 0;
        }
        for (size_t i = 0; i < nl; i++)
            free(labels[i]);
        families++;
    }
    fclose(f);
    ok(families >= 30, "docs/metrics.md: %d families found", families);
    is_u64(fails, 0, "docs/metrics.md: every family declared and sampled");
    _cleanup_free_ char *text = bm_registry_render(r);
    _cleanup_free_ char *tmp = write_temp(text);
    promtool_ok(tmp, "every family of docs/metrics.md");
    unlink(tmp);
}

/* A domain of the export test: running unless state says otherwise, used_mib of 1 GiB used,
 * QEMU RSS rss_mib, a virtio balloon with reporting (fpr) and deflate-on-oom (doom) as given. */
static BmDomain export_domain(char *name, const char *uuid, int state, uint64_t used_mib,
                              uint64_t rss_mib, BmTristate fpr, BmTristate doom)
{
    const uint64_t MiB = 1024 * 1024;
    bool active = state == VIR_DOMAIN_RUNNING || state == VIR_DOMAIN_PAUSED;
    BmDomain d = {.name = name, .state = state, .id = active ? 3 : -1, .active = active,
                  .max_bytes = 1024 * MiB, .actual_bytes = 1024 * MiB,
                  .available_bytes = active ? 1024 * MiB : BM_ABSENT,
                  .usable_bytes = active ? (1024 - used_mib) * MiB : BM_ABSENT, .unused_bytes = BM_ABSENT,
                  .disk_caches_bytes = BM_ABSENT, .rss_bytes = active ? rss_mib * MiB : BM_ABSENT,
                  .swap_in_bytes = BM_ABSENT, .swap_out_bytes = BM_ABSENT, .major_faults = BM_ABSENT,
                  .minor_faults = BM_ABSENT, .last_update_s = BM_ABSENT, .balloon_known = true};
    d.starve = BM_STARVE_STATS_ABSENT;
    snprintf(d.uuid, sizeof(d.uuid), "%s", uuid);
    d.balloon = (BmBalloonConfig){.present = true, .autodeflate = doom, .free_page_reporting = fpr,
                                  .stats_period_s = 5, .min_guarantee_bytes = BM_ABSENT,
                                  .memory_bytes = BM_ABSENT, .current_memory_bytes = BM_ABSENT};
    snprintf(d.balloon.model, sizeof(d.balloon.model), "virtio");
    return d;
}

/* What export.c renders from a snapshot, ledger and plan: free page reporting and
 * deflate-on-oom configured (XML) and negotiated (the monitor's verdict of this start), backed
 * free memory per domain and on the host (golden export.prom, the version as @VERSION@), and
 * --no-libvirt-duplicates keeping those. */
static void test_export(void)
{
    BmDomain doms[] = {
        export_domain("db1", "3b1e2a50-6d1f-4a0e-9a51-00000000000a", VIR_DOMAIN_RUNNING, 600, 900,
                      BM_TRI_UNSET, BM_TRI_OFF),
        export_domain("off1", "3b1e2a50-6d1f-4a0e-9a51-00000000000b", VIR_DOMAIN_SHUTOFF, 0, 0,
                      BM_TRI_ON, BM_TRI_ON),
        export_domain("web1", "3b1e2a50-6d1f-4a0e-9a51-00000000000c", VIR_DOMAIN_RUNNING, 300, 420,
                      BM_TRI_ON, BM_TRI_ON),
    };
    /* db1 has a virtio-mem device beside its balloon: 512 MiB plugged of 1 GiB; off1 one too,
     * whose plugged size is not known (not running) */
    doms[0].balloon.n_virtio_mem = 1;
    doms[0].balloon.virtio_mem[0] = (BmVirtioMem){.alias = "virtiomem0", .size_bytes = 1ull << 30,
                                                  .block_bytes = 2ull << 20, .requested_bytes = 512ull << 20,
                                                  .current_bytes = 510ull << 20, .node = 0};
    doms[1].balloon.n_virtio_mem = 1;
    doms[1].balloon.virtio_mem[0] = (BmVirtioMem){.size_bytes = 2ull << 30, .block_bytes = 4ull << 20,
                                                  .requested_bytes = 0, .current_bytes = BM_ABSENT,
                                                  .node = -1};
    /* web1 is a Linux 6.12 guest whose monitor may be asked: its starvation statistics */
    doms[2].starve = (BmStarveStats){.oom_kills = 2, .alloc_stalls = 5403, .async_scan_bytes = 912ull << 20,
                                     .direct_scan_bytes = 301ull << 20, .async_reclaim_bytes = 655ull << 20,
                                     .direct_reclaim_bytes = 97ull << 20};
    BmSnapshot snap = {.domains = doms, .n_domains = BM_ARRAY_SIZE(doms), .taken_real_ns = 1718000000ull * 1000000000ull};
    BmLedger l;
    bm_ledger_init(&l);
    l.counters.percpu_drained_bytes = 1178ull << 20;
    BmLedgerEntry *e = bm_ledger_entry(&l, doms[2].uuid, "web1");
    e->features_known = true;
    bm_ledger_boot_key(NULL, &doms[2], e->boot, sizeof(e->boot)); /* the verdict of this start */
    e->sg = BM_FEAT_NOT_OFFERED;
    e->ioeventfd = BM_SWITCH_OFF;
    e->reporting = BM_FEAT_NEGOTIATED;
    e->deflate_on_oom = BM_FEAT_OFFERED;
    /* db1's balloon returns nothing (VFIO): its virtio-mem device moves it (device
     * "virtio_mem" on its reclaimed bytes); an unplug of 64 MiB of it reached, one stalled 32 MiB
     * short of its target (refused) */
    doms[0].balloon.vfio_hostdev = true;
    doms[0].vmem = doms[0].vmem_auto = true;
    doms[0].balloon_max_bytes = doms[0].max_bytes;
    doms[0].balloon_actual_bytes = doms[0].actual_bytes;
    BmLedgerEntry *vm = bm_ledger_entry(&l, doms[0].uuid, "db1");
    BmTracked unplug = {.name = (char *)"db1", .vmem = true, .why = "free", .sg = BM_SGL_UNKNOWN,
                        .rss_before_bytes = BM_ABSENT, .rss_after_bytes = BM_ABSENT,
                        .change = {.outcome = BM_CHANGE_REACHED, .from_bytes = 1000ull << 20,
                                   .target_bytes = 936ull << 20, .reached_bytes = 936ull << 20,
                                   .duration_ns = 3000000000ull}};
    snprintf(unplug.uuid, sizeof(unplug.uuid), "%s", doms[0].uuid);
    bm_ledger_record_change(&l, vm, &unplug, false, 1718000000);
    unplug.change = (BmChange){.outcome = BM_CHANGE_STALLED, .from_bytes = 936ull << 20,
                               .target_bytes = 872ull << 20, .reached_bytes = 904ull << 20,
                               .duration_ns = 12000000000ull};
    bm_ledger_record_change(&l, vm, &unplug, false, 1718000000);
    BmPlan plan = {.mode = BM_HOST_HOLD, .qemu_overhead_bytes = 20ull << 20,
                   .hugepages_need_bytes = 256ull << 20};
    BmHost host = {.mem_total_bytes = 16ull << 30, .mem_available_bytes = 8ull << 30,
                   .percpu_free_bytes = 81ull << 20, .percpu_rest_bytes = 78ull << 20,
                   .hugepages_total_bytes = 1ull << 30, .hugepages_free_bytes = 768ull << 20};
    /* the engine's join of the reading: every domain with its entry */
    _cleanup_(bm_rows_clear) BmRows rows;
    bm_rows_build(&rows, &snap, &l, NULL, NULL, 1718000000);
    BmView v = {.snap = &snap, .rows = &rows, .host = &host, .have_mode = true, .mode = BM_HOST_HOLD,
                .libvirt_up = true, .plan = &plan};

    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    ok(bm_export_build(r, &l, &v) == 0, "export: the registry builds");
    _cleanup_free_ char *text = bm_registry_render(r);
    /* the build's version and revision are not the golden's */
    char *ver = strstr(text, "balloonmgr_build_info{version=\"");
    char *rev = ver ? strstr(ver, "\",revision=\"") : NULL;
    _cleanup_free_ char *golden = NULL;
    if (ver && rev) {
        ver += strlen("balloonmgr_build_info{version=\"");
        char *rev_end = strchr(rev + strlen("\",revision=\""), '"');
        golden = bm_asprintf("%.*s@VERSION@\",revision=\"@REVISION@%s", (int)(ver - text), text, rev_end);
        ok(rev_end > rev + strlen("\",revision=\""), "export: build_info's revision is not empty (%.*s)",
           (int)(rev_end - rev - strlen("\",revision=\"")), rev + strlen("\",revision=\""));
    }
    ok(golden != NULL, "export: build_info carries the version and the revision");
    check_golden_text("export", golden ? golden : text);
    ok(strstr(text, "balloonmgr_domain_feature_configured{domain=\"web1\",feature=\"free_page_reporting\"} 1\n") &&
           strstr(text, "balloonmgr_domain_feature_configured{domain=\"db1\",feature=\"free_page_reporting\"} 0\n") &&
           strstr(text, "balloonmgr_domain_feature_configured{domain=\"off1\",feature=\"deflate_on_oom\"} 1\n"),
       "export: configured from the XML, also for a domain shut off");
    ok(strstr(text, "balloonmgr_domain_feature_negotiated{domain=\"web1\",feature=\"free_page_reporting\"} 1\n") &&
           strstr(text, "balloonmgr_domain_feature_negotiated{domain=\"web1\",feature=\"deflate_on_oom\"} 0\n") &&
           !strstr(text, "balloonmgr_domain_feature_negotiated{domain=\"db1\""),
       "export: negotiated where the monitor was asked (offered is 0), absent where not");
    ok(strstr(text, "balloonmgr_domain_virtio_mem_current_bytes{domain=\"db1\",alias=\"virtiomem0\",node=\"0\"} 534773760\n") &&
           strstr(text, "balloonmgr_domain_virtio_mem_requested_bytes{domain=\"off1\",alias=\"virtiomem0\",node=\"\"} 0\n") &&
           !strstr(text, "balloonmgr_domain_virtio_mem_current_bytes{domain=\"off1\"") &&
           !strstr(text, "balloonmgr_domain_virtio_mem_size_bytes{domain=\"web1\""),
       "export: each virtio-mem device by domain, device and node; plugged only while running");
    ok(strstr(text, "balloonmgr_domain_guest_oom_kills_total{domain=\"web1\"} 2\n") &&
           strstr(text, "balloonmgr_domain_guest_reclaimed_bytes_total{domain=\"web1\",reclaimer=\"direct\"} 101711872\n") &&
           !strstr(text, "balloonmgr_domain_guest_oom_kills_total{domain=\"db1\"") &&
           !strstr(text, "balloonmgr_domain_guest_alloc_stalls_total{domain=\"db1\""),
       "export: Linux 6.12's starvation statistics where read, absent (not 0) where not");
    /* web1: 420 - 300 - 20 = 100 MiB; db1: 900 - 600 - 20 = 280 MiB; off1: not running */
    ok(strstr(text, "balloonmgr_domain_backed_free_bytes{domain=\"web1\"} 104857600\n") &&
           strstr(text, "balloonmgr_domain_backed_free_bytes{domain=\"db1\"} 293601280\n") &&
           !strstr(text, "balloonmgr_domain_backed_free_bytes{domain=\"off1\"}") &&
           strstr(text, "\nballoonmgr_host_backed_free_bytes 398458880\n"),
       "export: backed free per running domain (RSS - used - QEMU's own) and their sum");

    v.no_libvirt_duplicates = true;
    _cleanup_(bm_registry_freep) BmRegistry *r2 = bm_registry_new();
    ok(bm_export_build(r2, &l, &v) == 0, "export --no-libvirt-duplicates: builds");
    _cleanup_free_ char *nd = bm_registry_render(r2);
    ok(!strstr(nd, "\nballoonmgr_domain_rss_bytes{") &&
           strstr(nd, "balloonmgr_domain_feature_configured{domain=\"web1\",feature=\"free_page_reporting\"} 1\n") &&
           strstr(nd, "balloonmgr_domain_feature_negotiated{domain=\"web1\",feature=\"free_page_reporting\"} 1\n") &&
           strstr(nd, "balloonmgr_domain_backed_free_bytes{domain=\"web1\"} 104857600\n") &&
           strstr(nd, "\nballoonmgr_host_backed_free_bytes 398458880\n"),
       "export --no-libvirt-duplicates: RSS left out, the features and backed free kept");

    v.plan = NULL;
    _cleanup_(bm_registry_freep) BmRegistry *r3 = bm_registry_new();
    ok(bm_export_build(r3, &l, &v) == 0, "export before the first pass: builds");
    _cleanup_free_ char *np = bm_registry_render(r3);
    ok(!strstr(np, "\nballoonmgr_domain_backed_free_bytes{") && !strstr(np, "\nballoonmgr_host_backed_free_bytes "),
       "export before the first pass: no backed free (no estimate of QEMU's own memory yet)");
    bm_ledger_clear(&l);
}

/* The statistics' timestamp: exported for a guest that updated them since the machine booted,
 * not for one from before (libvirt's test driver reports 1989: the demo host fired
 * BalloonmgrStatsStale for every domain), and kept when the boot time is not known. */
static void test_export_stats_timestamp(void)
{
    BmDomain doms[] = {
        export_domain("fresh", "3b1e2a50-6d1f-4a0e-9a51-000000000201", VIR_DOMAIN_RUNNING, 300, 420,
                      BM_TRI_OFF, BM_TRI_OFF),
        export_domain("synthetic", "3b1e2a50-6d1f-4a0e-9a51-000000000202", VIR_DOMAIN_RUNNING, 300, 420,
                      BM_TRI_OFF, BM_TRI_OFF),
    };
    doms[0].last_update_s = 1717999995;
    doms[1].last_update_s = 627319920;
    BmSnapshot snap = {.domains = doms, .n_domains = BM_ARRAY_SIZE(doms),
                       .taken_real_ns = 1718000000ull * 1000000000ull, .boot_real_s = 1717900000};
    BmLedger l;
    bm_ledger_init(&l);
    _cleanup_(bm_rows_clear) BmRows rows; /* the engine's join of the reading */
    bm_rows_build(&rows, &snap, &l, NULL, NULL, 1718000000);
    BmView v = {.snap = &snap, .rows = &rows, .libvirt_up = true};
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    ok(bm_export_build(r, &l, &v) == 0, "stats timestamp: the registry builds");
    _cleanup_free_ char *text = bm_registry_render(r);
    ok(strstr(text, "balloonmgr_domain_stats_last_update_timestamp_seconds{domain=\"fresh\"} 1717999995\n") &&
           !strstr(text, "balloonmgr_domain_stats_last_update_timestamp_seconds{domain=\"synthetic\"}"),
       "stats timestamp: since the boot exported, from before it (1989, the test driver's) left out");
    snap.boot_real_s = 0;
    _cleanup_(bm_registry_freep) BmRegistry *r2 = bm_registry_new();
    ok(bm_export_build(r2, &l, &v) == 0, "stats timestamp, boot time unknown: builds");
    _cleanup_free_ char *text2 = bm_registry_render(r2);
    ok(strstr(text2, "balloonmgr_domain_stats_last_update_timestamp_seconds{domain=\"synthetic\"} 627319920\n") != NULL,
       "stats timestamp: kept when the boot time is not known");
    bm_ledger_clear(&l);
}

/* The words of one label of one family in a rendering, sorted, space-separated, into out
 * (size n); every value of every label but the free-form ones (domain, uuid, version,
 * revision, le) counted in *ret_not_snake when it is not snake_case. */
static void label_words(const char *text, const char *family, const char *label, char *out, size_t n,
                        int *ret_not_snake)
{
    char words[64][48];
    size_t nw = 0;
    _cleanup_free_ char *head = bm_asprintf("\n%s{", family);
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (*line == '#' || !strchr(line, '{'))
            continue;
        const char *brace = strchr(line, '{'), *end = strchr(line, '}');
        if (!end)
            continue;
        for (const char *p = brace + 1; p < end;) {
            const char *eq = strchr(p, '='), *q = eq ? strchr(eq + 2, '"') : NULL;
            if (!eq || !q || q > end)
                break;
            char key[48], val[48];
            snprintf(key, sizeof(key), "%.*s", (int)(eq - p), p);
            snprintf(val, sizeof(val), "%.*s", (int)(q - eq - 2), eq + 2);
            bool free_form = !strcmp(key, "domain") || !strcmp(key, "uuid") || !strcmp(key, "version") ||
                             !strcmp(key, "revision") || !strcmp(key, "le");
            bool snake = val[0] >= 'a' && val[0] <= 'z';
            for (const char *c = val; *c; c++)
                snake &= (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || (*c == '_' && c[1] && c[1] != '_');
            if (!free_form && !snake) {
                (*ret_not_snake)++;
                diag("not snake_case: %.*s", (int)(end - line + 1), line);
            }
            /* the family's own samples (a histogram's _bucket, _sum and _count too) */
            size_t fl = strlen(family);
            bool mine = !strncmp(line, family, fl) && (line[fl] == '{' || line[fl] == '_');
            if (mine && !strcmp(key, label)) {
                bool seen = false;
                for (size_t i = 0; i < nw; i++)
                    seen |= !strcmp(words[i], val);
                if (!seen && nw < BM_ARRAY_SIZE(words))
                    snprintf(words[nw++], sizeof(words[0]), "%s", val);
            }
            p = q + 2;
        }
    }
    qsort(words, nw, sizeof(words[0]), (int (*)(const void *, const void *))strcmp);
    out[0] = '\0';
    for (size_t i = 0; i < nw; i++)
        snprintf(out + strlen(out), n - strlen(out), "%s%s", i ? " " : "", words[i]);
}

/* One snake_case vocabulary per label (issue 52): domains in every run state and every SG and
 * ioeventfd verdict; the values are node_exporter's style, "shut_off", "not_offered", never a
 * blank or a hyphen, and the histogram's sg label uses the same words. */
static void test_export_vocabulary(void)
{
    static const int states[] = {VIR_DOMAIN_NOSTATE, VIR_DOMAIN_RUNNING, VIR_DOMAIN_BLOCKED,
                                 VIR_DOMAIN_PAUSED,  VIR_DOMAIN_SHUTDOWN, VIR_DOMAIN_SHUTOFF,
                                 VIR_DOMAIN_CRASHED, VIR_DOMAIN_PMSUSPENDED};
    static const BmFeatureState sg[] = {BM_FEAT_NEGOTIATED, BM_FEAT_OFFERED, BM_FEAT_NOT_OFFERED,
                                        BM_FEAT_UNKNOWN};
    static const BmSwitchState io[] = {BM_SWITCH_ON, BM_SWITCH_OFF, BM_SWITCH_UNSUPPORTED, BM_SWITCH_UNKNOWN};
    enum { N = BM_ARRAY_SIZE(states) };
    char names[N][16];
    BmDomain doms[N];
    BmLedger l;
    bm_ledger_init(&l);
    for (size_t i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "d%zu", i);
        char uuid[40];
        snprintf(uuid, sizeof(uuid), "3b1e2a50-6d1f-4a0e-9a51-0000000001%02zu", i);
        doms[i] = export_domain(names[i], uuid, states[i], 300, 420, BM_TRI_ON, BM_TRI_OFF);
        BmLedgerEntry *e = bm_ledger_entry(&l, doms[i].uuid, names[i]);
        e->features_known = true;
        if (doms[i].active) /* the verdict of this start */
            bm_ledger_boot_key(NULL, &doms[i], e->boot, sizeof(e->boot));
        e->sg = sg[i % BM_ARRAY_SIZE(sg)];
        e->ioeventfd = io[i % BM_ARRAY_SIZE(io)];
    }
    BmSnapshot snap = {.domains = doms, .n_domains = N, .taken_real_ns = 1718000000ull * 1000000000ull};
    BmPlan plan = {.mode = BM_HOST_RECLAIM};
    BmHost host = {.mem_total_bytes = 16ull << 30, .mem_available_bytes = 1ull << 30};
    _cleanup_(bm_rows_clear) BmRows rows; /* the engine's join of the reading */
    bm_rows_build(&rows, &snap, &l, NULL, NULL, 1718000000);
    BmView v = {.snap = &snap, .rows = &rows, .host = &host, .have_mode = true,
                .mode = BM_HOST_RECLAIM, .libvirt_up = true, .plan = &plan};
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    ok(bm_export_build(r, &l, &v) == 0, "vocabulary: the registry builds");
    _cleanup_free_ char *text = bm_registry_render(r);
    static const struct {
        const char *family, *label, *want;
    } vocab[] = {
        {"balloonmgr_domain_info", "state",
         "crashed idle in_shutdown no_state paused pmsuspended running shut_off"},
        {"balloonmgr_domain_info", "sg", "negotiated not_offered offered unknown"},
        {"balloonmgr_domain_info", "ioeventfd", "off on unknown unsupported"},
        {"balloonmgr_balloon_change_duration_seconds", "sg", "negotiated not_negotiated unknown"},
        {"balloonmgr_balloon_change_duration_seconds", "direction", "deflate inflate"},
        {"balloonmgr_balloon_changes_total", "outcome", "failed reached stalled stopped timeout"},
        {"balloonmgr_host_mode", "mode", "hold reclaim release"},
        {"balloonmgr_errors_total", "kind", "apply host libvirt policy push state web_config"},
        {"balloonmgr_domain_feature_configured", "feature", "deflate_on_oom free_page_reporting"},
    };
    int not_snake = 0;
    for (size_t i = 0; i < BM_ARRAY_SIZE(vocab); i++) {
        char got[512];
        int ns = 0;
        label_words(text, vocab[i].family, vocab[i].label, got, sizeof(got), &ns);
        not_snake += ns;
        is_str(got, vocab[i].want, "vocabulary: %s{%s}", vocab[i].family, vocab[i].label);
    }
    ok(not_snake == 0, "vocabulary: every label value is snake_case (%d are not)", not_snake / (int)BM_ARRAY_SIZE(vocab));
    bm_ledger_clear(&l);
}

/* Every family export.c declares has its row in docs/metrics.md, with its type: a family
 * added to the table without its documentation fails here. */
static void test_export_documented(void)
{
    _cleanup_free_ char *path = bm_asprintf("%s/docs/metrics.md", SOURCE_ROOT);
    _cleanup_free_ char *doc = NULL;
    if (bm_file_read(path, 1 << 20, &doc, NULL) < 0) {
        skip("docs/metrics.md not found");
        return;
    }
    BmLedger l;
    bm_ledger_init(&l);
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    ok(bm_export_build(r, &l, NULL) == 0, "export documented: the registry builds");
    _cleanup_free_ char *text = bm_registry_render(r);
    int families = 0;
    _cleanup_free_ char *missing = bm_strdup("");
    for (const char *p = text; (p = strstr(p, "# TYPE ")); p++) {
        char name[256], type[16];
        if (sscanf(p, "# TYPE %255s %15s", name, type) != 2)
            break;
        families++;
        _cleanup_free_ char *row = bm_asprintf("\n| `%s` | %s", name, type);
        if (!strstr(doc, row)) {
            char *m = bm_asprintf("%s %s", missing, name);
            free(missing);
            missing = m;
        }
    }
    ok(families >= 50 && !*missing, "export documented: %d families, each in docs/metrics.md%s%s",
       families, *missing ? "; missing:" : "", missing);
    bm_ledger_clear(&l);
}

/* promtool catches what it should, so the checks above mean something. */
static void test_promtool_lints(void)
{
    if (!have_promtool("the lint control"))
        return;
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    bm_registry_declare(r, "balloonmgr_passes", BM_METRIC_COUNTER, "A counter without _total.");
    bm_registry_add(r, "balloonmgr_passes", NULL, 1);
    _cleanup_free_ char *text = bm_registry_render(r);
    _cleanup_free_ char *tmp = write_temp(text);
    _cleanup_free_ char *out = NULL;
    int status = promtool_check(tmp, &out);
    unlink(tmp);
    ok(status > 0 && strstr(out, "_total"), "promtool flags a counter without _total");
    if (!(status > 0 && strstr(out, "_total")))
        diag("promtool exit status %d: %s", status, out);
}

/* Many samples: counts and size add up (the benchmark of the agent's load is separate). */
static void test_many(void)
{
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    char names[40][64];
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof(names[i]), "balloonmgr_test_%d_bytes", i);
        bm_registry_declare(r, names[i], BM_METRIC_GAUGE, "Many.");
    }
    int fails = 0;
    size_t bytes = 0;
    for (int d = 0; d < 500; d++) {
        char dom[32];
        snprintf(dom, sizeof(dom), "domain-%04d", d);
        const char *labels[] = {"domain", dom, NULL};
        for (int i = 0; i < 40; i++) {
            fails += bm_registry_add(r, names[i], labels, (double)d * 4096) != 0;
            char v[32];
            bytes += strlen(names[i]) + strlen("{domain=\"domain-0000\"} ") +
                     strlen(bm_metric_format_value((double)d * 4096, v, sizeof(v))) + 1;
        }
    }
    is_u64(fails, 0, "many: 20000 samples added");
    is_u64(bm_registry_samples(r), 20000, "many: 20000 samples counted");
    _cleanup_free_ char *text = bm_registry_render(r);
    for (int i = 0; i < 40; i++)
        bytes += strlen("# HELP  Many.\n# TYPE  gauge\n") + 2 * strlen(names[i]);
    is_u64(strlen(text), bytes, "many: rendered size adds up");
    char want[128];
    snprintf(want, sizeof(want), "\n%s{domain=\"domain-0499\"} %d\n", names[39], 499 * 4096);
    size_t wl = strlen(want), tl = strlen(text);
    ok(tl > wl && strcmp(text + tl - wl, want) == 0, "many: last sample last");
}

int main(void)
{
    test_format_value();
    test_values_golden();
    test_escaping_golden();
    test_histogram_observe();
    test_histogram_golden();
    test_order_golden();
    test_empty_and_no_help();
    test_errors();
    test_catalogue_golden();
    test_docs_catalogue();
    test_export();
    test_export_vocabulary();
    test_export_stats_timestamp();
    test_export_documented();
    test_promtool_lints();
    test_many();
    return tap_done();
}
