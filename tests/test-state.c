/* The state file: round trip, atomic writes, corrupt and missing files, read-only dirs,
 * temporary files of killed writers, reporting a failing save once. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <float.h>
#include <math.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fixture.h"
#include "file.h"
#include "state.h"
#include "route.h"
#include "tap.h"
#include "util.h"

/* Values read back are bounded: a count that overflowed is refused naming it, a hold-off
 * from the future is cut to the documented one. */
static void test_bounds(void)
{
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"{\"version\":1,\"domains\":[],\"counters\":{\"passes\":18446744073709551616}}",
         "counters: \"passes\": 18446744073709551615 overflows (the largest count is "
         "9223372036854775807)"},
        {"{\"version\":1,\"domains\":[],\"counters\":{\"errors\":{\"libvirt\":-1}}}",
         "counters: \"libvirt\": -1 is not a count"},
        {"{\"version\":1,\"domains\":[],\"counters\":{\"passes\":1e30}}",
         "counters: \"passes\": 1e30 is not a count"},
        {"{\"version\":1,\"domains\":[{\"uuid\":\"u\",\"major_faults\":9223372036854775808}]}",
         "\"major_faults\": 9223372036854775808 is out of range"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        BmLedger l;
        int r = bm_state_parse(bad[i].text, &l);
        ok(r == -EINVAL && strstr(bm_error_detail(r), bad[i].why), "overflow %zu refused: %s", i,
           r < 0 ? bm_error_detail(r) : "accepted");
        bm_ledger_clear(&l);
    }

    /* unresponsive_until years ahead: at most BM_UNRESPONSIVE_HOLDOFF_S from now */
    const char *text = "{\"version\":1,\"domains\":[],\"counters\":{\"domains\":[{\"uuid\":"
                       "\"11111111-2222-3333-4444-555555555555\",\"name\":\"web1\","
                       "\"unresponsive\":true,\"unresponsive_actual\":1024,"
                       "\"unresponsive_until\":4102444800}]}}";
    BmLedger c;
    ok(bm_state_parse(text, &c) == 0 && c.n_entries == 1 && c.entries[0]->unresponsive,
       "a hold-off until 2100 is read");
    BmDomain d = {.uuid = "11111111-2222-3333-4444-555555555555", .name = "web1",
                  .actual_bytes = 1024};
    BmSnapshot snap = {.domains = &d, .n_domains = 1};
    uint64_t now = 1800000000;
    route_sync(&c, &snap, NULL, now);
    ok(c.n_entries == 1 && c.entries[0]->unresponsive &&
           c.entries[0]->unresponsive_until_s == now + BM_UNRESPONSIVE_HOLDOFF_S,
       "  cut to now + %d s at the next pass (got %llu)", BM_UNRESPONSIVE_HOLDOFF_S,
       (unsigned long long)(c.n_entries ? c.entries[0]->unresponsive_until_s : 0));
    route_sync(&c, &snap, NULL, now + BM_UNRESPONSIVE_HOLDOFF_S);
    ok(c.n_entries == 1 && !c.entries[0]->unresponsive, "  and over once that passed");
    bm_ledger_clear(&c);
}


/* Every number read back has the range it can have: a latency sum is finite, from 0 and 0
 * without a count; durations are finite, from 0 (-1: none); a count beyond 2^63-1 is refused
 * (one at 2^63-1 is read). */
static void test_value_ranges(void)
{
    static const char head[] = "{\"version\":1,\"domains\":[],\"counters\":{";
    static const struct {
        const char *counters, *why;
    } bad[] = {
        {"\"latency\":[{\"direction\":\"inflate\",\"sg\":\"unknown\",\"buckets\":[1,0,0,0,0,0,0,0,0,0,0,0,0,0],"
         "\"sum\":-1000000000}]",
         "counters: latency inflate/unknown: \"sum\": -1000000000 is out of range"},
        {"\"latency\":[{\"direction\":\"inflate\",\"sg\":\"unknown\",\"buckets\":[1,0,0,0,0,0,0,0,0,0,0,0,0,0],"
         "\"sum\":1e999}]",
         "counters: latency inflate/unknown: \"sum\":"},
        {"\"latency\":[{\"direction\":\"deflate\",\"sg\":\"negotiated\",\"buckets\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0],"
         "\"sum\":5}]",
         "counters: latency deflate/negotiated: \"sum\": 5 without a count"},
        {"\"last_pass_duration_s\":-5", "counters: \"last_pass_duration_s\": -5 is out of range"},
        {"\"last_pass_duration_s\":1e999", "counters: \"last_pass_duration_s\":"},
        {"\"domains\":[{\"uuid\":\"u\",\"last_duration_s\":-0.5}]",
         "counters: domain: \"last_duration_s\": -0.5 is out of range"},
        {"\"passes\":9223372036854775808", "counters: \"passes\": 9223372036854775808 overflows"},
        {"\"errors\":{\"state\":18446744073709551615}", "counters: \"state\": 18446744073709551615 overflows"},
        {"\"rss_dropped_bytes\":-1", "counters: \"rss_dropped_bytes\": -1 is not a count"},
        {"\"domains\":[{\"uuid\":\"u\",\"yield\":{\"inflated_bytes\":9223372036854775808}}]",
         "counters: \"inflated_bytes\": 9223372036854775808 overflows"},
    };
    for (size_t i = 0; i < BM_ARRAY_SIZE(bad); i++) {
        _cleanup_free_ char *text = bm_asprintf("%s%s}}", head, bad[i].counters);
        BmLedger l;
        int r = bm_state_parse(text, &l);
        ok(r == -EINVAL && strstr(bm_error_detail(r), bad[i].why), "out of range %zu refused: %s",
           i, r < 0 ? bm_error_detail(r) : "accepted");
        bm_ledger_clear(&l);
    }
    BmLedger v;
    int rv = bm_state_parse("{\"version\":1.5,\"domains\":[]}", &v);
    ok(rv == -EINVAL && strstr(bm_error_detail(rv), "unknown version"), "version 1.5 refused (%s)",
       rv < 0 ? bm_error_detail(rv) : "read");
    bm_ledger_clear(&v);
    _cleanup_free_ char *max = bm_asprintf("%s\"passes\":9223372036854775807,\"last_pass_duration_s\":-1}}", head);
    BmLedger l;
    ok(bm_state_parse(max, &l) == 0 && l.counters.passes == BM_COUNT_MAX &&
           l.counters.last_pass_duration_s == -1,
       "a count of 2^63-1 and a duration of -1 (none) are read");
    bm_ledger_clear(&l);
}

/* Counters saturate at 2^63-1: incremented, saved and read back, they stay there (a counter
 * that wrapped past it made the next run refuse the file and reset every counter). */
static void test_counters_saturate(void)
{
    uint64_t c = BM_COUNT_MAX - 1;
    bm_count_add(&c, 1);
    is_u64(c, BM_COUNT_MAX, "bm_count_add up to 2^63-1");
    bm_count_add(&c, 1);
    is_u64(c, BM_COUNT_MAX, "  and no further");
    bm_count_add(&c, UINT64_MAX);
    is_u64(c, BM_COUNT_MAX, "  whatever is added");

    BmLedger l;
    bm_ledger_init(&l);
    l.counters.passes = BM_COUNT_MAX;
    l.counters.errors[BM_ERR_STATE] = BM_COUNT_MAX;
    l.counters.rss_dropped_bytes = BM_COUNT_MAX;
    bm_ledger_count_error(&l, BM_ERR_STATE);
    BmHistogram *h = &l.counters.latency[BM_DEV_BALLOON][BM_DIR_INFLATE][BM_SGL_UNKNOWN];
    h->counts[0] = h->count = BM_COUNT_MAX;
    h->sum = 1;
    bm_histogram_observe(h, 0.001);
    is_u64(l.counters.errors[BM_ERR_STATE], BM_COUNT_MAX, "an error counted at 2^63-1 stays there");
    is_u64(h->count, BM_COUNT_MAX, "a histogram's count too");
    _cleanup_free_ char *text = bm_state_format(&l, 1800000000);
    BmLedger back;
    int r = bm_state_parse(text, &back);
    ok(r == 0, "saved at the maximum, the state is read back (%s)", r < 0 ? bm_error_detail(r) : "ok");
    is_u64(back.counters.passes, BM_COUNT_MAX, "  passes 2^63-1");
    is_u64(back.counters.errors[BM_ERR_STATE], BM_COUNT_MAX, "  errors 2^63-1");
    bm_ledger_clear(&back);
    bm_ledger_clear(&l);
}

/* A state file is JSON: a sum or duration that is not finite is never written as Infinity or
 * NaN (json-c would), and a histogram's sum stays finite however much is observed. */
static void test_never_infinity(void)
{
    BmLedger l;
    bm_ledger_init(&l);
    BmHistogram *h = &l.counters.latency[BM_DEV_BALLOON][BM_DIR_DEFLATE][BM_SGL_NEGOTIATED];
    bm_histogram_observe(h, DBL_MAX);
    bm_histogram_observe(h, DBL_MAX);
    bm_histogram_observe(h, INFINITY);
    ok(isfinite(h->sum) && h->count == 3, "observing DBL_MAX twice and +Inf: the sum stays finite");
    l.counters.latency[BM_DEV_BALLOON][BM_DIR_INFLATE][BM_SGL_UNKNOWN].sum = INFINITY;
    l.counters.last_pass_duration_s = NAN;
    BmLedgerEntry *e = bm_ledger_entry(&l, "11111111-2222-3333-4444-555555555555", "web1");
    e->last_duration_s = -INFINITY;
    _cleanup_free_ char *text = bm_state_format(&l, 1800000000);
    ok(!strstr(text, "Infinity") && !strstr(text, "NaN") && !strstr(text, ": inf") &&
           !strstr(text, ": -inf") && !strstr(text, ": nan"),
       "no Infinity or NaN in the text written");
    BmLedger back;
    int r = bm_state_parse(text, &back);
    ok(r == 0, "  and it is read back (%s)", r < 0 ? bm_error_detail(r) : "ok");
    bm_ledger_clear(&back);
    bm_ledger_clear(&l);
}

/* The most memory a load may take, in units of the file's size (json-c's tree, then the
 * ledger); an ASan build's redzones and quarantine make it larger. */
#if defined(__SANITIZE_ADDRESS__)
#define STATE_LOAD_RSS_FACTOR 40
#else
#define STATE_LOAD_RSS_FACTOR 10
#endif

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* The CPU time of the process, in seconds: what a load costs, whatever else the machine runs
 * (a busy machine stretches its wall time, not much its CPU time). */
static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* The least CPU time of runs loads of text (the least is the one least disturbed). */
static double least_cpu_of_loads(const char *text, int runs)
{
    double least = 1e9;
    for (int i = 0; i < runs; i++) {
        BmLedger l;
        double t0 = cpu_s();
        bm_state_parse(text, &l);
        double spent = cpu_s() - t0;
        bm_ledger_clear(&l);
        if (spent < least)
            least = spent;
    }
    return least;
}

static long maxrss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* The text of a state file with n readings, each with its record (what an agent of n domains
 * saves). Caller frees. */
static char *state_of(size_t n)
{
    BmLedger l;
    bm_ledger_init(&l);
    for (size_t i = 0; i < n; i++) {
        char uuid[40];
        snprintf(uuid, sizeof(uuid), "%08zx-2222-3333-4444-555555555555", i);
        BmLedgerEntry *e = bm_ledger_entry(&l, uuid, "a-domain-name");
        e->have_prev = true;
        e->prev = (BmPrevReading){.major_faults = i, .swap_in_bytes = i, .last_update_s = i,
                                  .taken_s = 1800000000, .used_bytes = i << 20,
                                  .actual_bytes = i << 21, .used_peak_bytes = i << 20,
                                  .used_peak_s = 1800000000};
        e->last_target_bytes = i << 21;
        e->last_duration_s = 0.5;
        e->last_direction = BM_DIR_INFLATE;
        e->yield.inflated_bytes = 1 << 30;
        e->yield.returned_bytes = 1 << 29;
    }
    char *text = bm_state_format(&l, 1800000000);
    bm_ledger_clear(&l);
    return text;
}

/* Bounded loads: at most BM_STATE_MAX_DOMAINS domains; a file of N domains takes time and
 * memory linear in N (the ledger grows geometrically, not by one realloc per entry); a file
 * of a million readings (62 MiB, under the 64 MiB cap) is refused before json-c builds it. */
static void test_load_bounds(void)
{
    /* the most a state file holds: read, entries grown geometrically; the memory it takes is
     * measured in a child (the parent's high-water mark is already past it) */
    _cleanup_free_ char *full = state_of(BM_STATE_MAX_DOMAINS);
    int pipefd[2];
    long rss_kb = -1;
    if (pipe(pipefd) == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            long before = maxrss_kb();
            BmLedger c;
            bm_state_parse(full, &c);
            long grew = maxrss_kb() - before;
            if (write(pipefd[1], &grew, sizeof(grew)) != sizeof(grew))
                _exit(1);
            _exit(0);
        }
        close(pipefd[1]);
        if (pid < 0 || read(pipefd[0], &rss_kb, sizeof(rss_kb)) != sizeof(rss_kb))
            rss_kb = -1;
        close(pipefd[0]);
        if (pid > 0)
            waitpid(pid, NULL, 0);
    }
    long rss0 = maxrss_kb();
    double t0 = now_s();
    BmLedger l;
    int r = bm_state_parse(full, &l);
    double t_full = now_s() - t0;
    (void)rss0;
    ok(r == 0 && l.n_entries == BM_STATE_MAX_DOMAINS, "%d domains (%zu KiB): read (%s)",
       BM_STATE_MAX_DOMAINS, strlen(full) >> 10, r < 0 ? bm_error_detail(r) : "ok");
    ok(l.cap_entries >= l.n_entries && l.cap_entries < 2 * l.n_entries,
       "  the ledger grew geometrically: room for %zu entries", l.cap_entries);
    ok(rss_kb >= 0 && rss_kb < (long)(STATE_LOAD_RSS_FACTOR * (strlen(full) >> 10)),
       "  its load took %ld KiB of memory, %.1fx the file (at most %dx)", rss_kb,
       (double)rss_kb / (double)(strlen(full) >> 10), STATE_LOAD_RSS_FACTOR);
    diag("timing: %d domains read in %.3f s (wall; bench/unit-timings.sh prints it)",
         BM_STATE_MAX_DOMAINS, t_full);
    bm_ledger_clear(&l);

    /* linear: 64 times the domains cost 64 times the CPU time (100x measured here: caches),
     * 4096 times if the load were quadratic. The bound, 400 times, holds with the measure
     * 4 times off (a busy machine; the least of 5 loads each) and fails a quadratic load.
     * Loads that only this check needs: the slow tier's. */
    if (tap_timing()) {
        _cleanup_free_ char *small = state_of(BM_STATE_MAX_DOMAINS / 64);
        r = bm_state_parse(small, &l);
        bm_ledger_clear(&l);
        ok(r == 0, "  %d domains: read", BM_STATE_MAX_DOMAINS / 64);
        double c_small = least_cpu_of_loads(small, 5), c_full = least_cpu_of_loads(full, 5);
        timed_ok(c_full < 400 * c_small,
                 "  CPU time linear in the domains: %.3f s for %d, %.5f s for %d (%.0fx; at most "
                 "400x, 4096x were it quadratic)", c_full, BM_STATE_MAX_DOMAINS, c_small,
                 BM_STATE_MAX_DOMAINS / 64, c_small > 0 ? c_full / c_small : 0.0);
    }

    /* one domain more: refused */
    _cleanup_free_ char *over = state_of(BM_STATE_MAX_DOMAINS + 1);
    r = bm_state_parse(over, &l);
    ok(r == -EINVAL && strstr(bm_error_detail(r), "domains, more than 16384"),
       "%d domains: refused (%s)", BM_STATE_MAX_DOMAINS + 1, r < 0 ? bm_error_detail(r) : "read");
    bm_ledger_clear(&l);

    /* 840,000 readings in 62 MiB (under the 64 MiB cap): refused on the text, fast and
     * without json-c's tree (which took 1.76 GB and 4.8 s) */
    static const char reading[] = "{\"uuid\":\"00000000-0000-0000-0000-000000000000\","
                                  "\"major_faults\":1,\"taken_at\":1},";
    size_t n = 840000, len = strlen(reading);
    char *huge = bm_malloc0(n * len + 64);
    char *p = huge + sprintf(huge, "{\"version\":1,\"domains\":[");
    for (size_t i = 0; i < n; i++, p += len)
        memcpy(p, reading, len);
    strcpy(p - 1, "]}");
    rss0 = maxrss_kb();
    t0 = now_s();
    r = bm_state_parse(huge, &l);
    double t_huge = now_s() - t0;
    rss_kb = maxrss_kb() - rss0;
    ok(r == -EINVAL && strstr(bm_error_detail(r), "than a state file of 16384 domains holds"),
       "840,000 readings (%zu MiB): refused (%s)", strlen(huge) >> 20,
       r < 0 ? bm_error_detail(r) : "read");
    ok(rss_kb < 16 * 1024, "  max RSS grew by %ld KiB (json-c's tree of it took 1.76 GB)", rss_kb);
    diag("timing: refused in %.3f s (wall; bench/unit-timings.sh prints it)", t_huge);
    bm_ledger_clear(&l);
    free(huge);
}

static char dir[] = "/tmp/bm-test-state.XXXXXX";

/* DIR/REL (caller frees) */
static char *in_dir(const char *rel)
{
    return bm_asprintf("%s/%s", dir, rel);
}

/* The ledger saved: two running domains with a reading, one shut off without, mode reclaim. */
static BmLedger prev;

static void make_ledger(void)
{
    bm_ledger_init(&prev);
    prev.mode = BM_HOST_RECLAIM;
    BmLedgerEntry *e = bm_ledger_entry(&prev, "11111111-2222-3333-4444-555555555555", "one");
    e->have_prev = true;
    e->prev = (BmPrevReading){.major_faults = 42, .swap_in_bytes = BM_ABSENT,
                              .last_update_s = 1700000000, .taken_s = 1700000005,
                              .taken_ns = 1700000005970000000ull, .used_bytes = 300ull << 20, .actual_bytes = BM_ABSENT,
                              .used_peak_bytes = 340ull << 20, .used_peak_s = 1699999990};
    e = bm_ledger_entry(&prev, "aaaaaaaa-2222-3333-4444-555555555555", "two");
    e->have_prev = true;
    e->prev = (BmPrevReading){.major_faults = BM_ABSENT, .swap_in_bytes = 7,
                              .last_update_s = BM_ABSENT, .taken_s = 1700000005,
                              .used_bytes = BM_ABSENT, .actual_bytes = 1ull << 30};
    e->features_known = true; /* the SG verdict of this start, for the next timer run */
    snprintf(e->boot, sizeof(e->boot), "0b5e1d-boot/7");
    e->sg = BM_FEAT_NEGOTIATED;
    e->ioeventfd = BM_SWITCH_OFF;
    e->reporting = BM_FEAT_OFFERED;
    e->deflate_on_oom = BM_FEAT_NEGOTIATED;
    bm_ledger_entry(&prev, "bbbbbbbb-2222-3333-4444-555555555555", "off");
}

static void test_round_trip(void)
{
    _cleanup_free_ char *path = in_dir("sub/state.json");
    ok(bm_state_save(path, &prev, 1700000006) == 0, "save creates the directory and the file");

    BmLedger back;
    ok(bm_state_load(path, &back) == 0, "load");
    ok(back.mode == BM_HOST_RECLAIM && back.n_entries == 3, "mode and domains round-trip");
    const BmLedgerEntry *b0 = bm_ledger_find(&back, "11111111-2222-3333-4444-555555555555");
    ok(b0 && b0->have_prev && b0->prev.major_faults == 42 && !bm_present(b0->prev.swap_in_bytes) &&
           b0->prev.last_update_s == 1700000000 && b0->prev.taken_s == 1700000005 &&
           b0->prev.taken_ns == 1700000005970000000ull &&
           b0->prev.used_bytes == 300ull << 20 && !bm_present(b0->prev.actual_bytes) &&
           b0->prev.used_peak_bytes == 340ull << 20 && b0->prev.used_peak_s == 1699999990,
       "counters round-trip, absent stays absent");
    const BmLedgerEntry *b1 = bm_ledger_find(&back, "aaaaaaaa-2222-3333-4444-555555555555");
    ok(b1 && b1->have_prev && b1->prev.swap_in_bytes == 7 && strcmp(b1->name, "two") == 0 &&
           !bm_present(b1->prev.used_bytes) && b1->prev.actual_bytes == 1ull << 30,
       "second domain by uuid, with its name");
    ok(b1 && b1->prev.taken_ns == 0, "  a reading without its clock in nanoseconds comes back without");
    ok(b1 && b1->features_known && strcmp(b1->boot, "0b5e1d-boot/7") == 0 &&
           b1->sg == BM_FEAT_NEGOTIATED && b1->ioeventfd == BM_SWITCH_OFF,
       "the SG/ioeventfd verdict and the start it belongs to round-trip");
    ok(b1 && b1->reporting == BM_FEAT_OFFERED && b1->deflate_on_oom == BM_FEAT_NEGOTIATED,
       "the reporting and deflate-on-oom verdicts round-trip");
    ok(b0 && !b0->features_known, "a domain never probed comes back not probed");
    const BmLedgerEntry *b2 = bm_ledger_find(&back, "bbbbbbbb-2222-3333-4444-555555555555");
    ok(b2 && !b2->have_prev, "a domain without a reading comes back without one");
    bm_ledger_clear(&back);

    /* what a domain's inflates returned to the host survives timer runs */
    {
        BmLedger c, c2;
        bm_ledger_init(&c);
        BmLedgerEntry *r = bm_ledger_entry(&c, "11111111-2222-3333-4444-555555555555", "web1");
        r->yield = (BmYield){.inflated_bytes = 300 << 20, .returned_bytes = 21 << 20,
                             .last_inflated_bytes = 300 << 20, .last_returned_bytes = 21 << 20,
                             .nothing = true, .nothing_rss_bytes = 212 << 20};
        bm_ledger_entry(&c, "aaaaaaaa-2222-3333-4444-555555555555", "web2");
        _cleanup_free_ char *text = bm_state_format(&c, 1700000006);
        ok(bm_state_parse(text, &c2) == 0, "state with a yield parses");
        const BmLedgerEntry *r2 = bm_ledger_find(&c2, "11111111-2222-3333-4444-555555555555");
        const BmLedgerEntry *o2 = bm_ledger_find(&c2, "aaaaaaaa-2222-3333-4444-555555555555");
        ok(r2 && r2->yield.inflated_bytes == 300 << 20 && r2->yield.returned_bytes == 21 << 20 &&
               r2->yield.last_inflated_bytes == 300 << 20 && r2->yield.last_returned_bytes == 21 << 20 &&
               r2->yield.nothing && r2->yield.nothing_rss_bytes == 212 << 20,
           "yield and its \"returns nothing\" mark round-trip");
        ok(o2 && o2->yield.inflated_bytes == 0 && !o2->yield.nothing, "nothing learned stays nothing");
        bm_ledger_clear(&c2);
        bm_ledger_clear(&c);
    }

    /* no temporary files left behind */
    _cleanup_free_ char *cmd = bm_asprintf("test $(ls -A %s/sub | wc -l) -eq 1", dir);
    ok(system(cmd) == 0, "only state.json in the directory");
}

static void test_missing_and_corrupt(void)
{
    BmLedger back;
    _cleanup_free_ char *missing = in_dir("none.json");
    ok(bm_state_load(missing, &back) == -ENOENT, "missing file: -ENOENT");
    static const struct {
        const char *text, *reason;
    } bad[] = {
        {"{\"version\": 1, \"domains\": [", "not JSON (truncated)"},
        {"[]", "not a JSON object"},
        {"{\"version\": 99, \"domains\": []}", "unknown version"},
        {"{\"version\": 1, \"domains\": {}}", "\"domains\" is not an array"},
        {"{\"version\": 1, \"domains\": [{\"major_faults\": 1}]}", "domain 0: no uuid"},
        {"{\"version\": 1, \"domains\": [{\"uuid\": \"u\", \"major_faults\": -1}]}",
         "\"major_faults\" is not a non-negative integer"},
        {"", "not JSON (truncated)"},
    };
    _cleanup_free_ char *corrupt = in_dir("corrupt.json");
    for (size_t i = 0; i < BM_ARRAY_SIZE(bad); i++) {
        fixture_write(corrupt, bad[i].text);
        bm_error_reset();
        int r = bm_state_load(corrupt, &back);
        ok(r == -EINVAL, "corrupt state %zu refused", i);
        is_str(bm_error_detail(r), bad[i].reason, "reason %zu", i);
        ok(back.n_entries == 0, "nothing half-read");
    }
}

/* a read-only directory: clear error, previous file untouched */
static void test_read_only_directory(void)
{
    if (geteuid() == 0) {
        printf("ok %d - # SKIP read-only directory (root ignores permissions; see integration)\n", ++tap_n);
        return;
    }
    _cleanup_free_ char *path = in_dir("sub/state.json"), *sub = in_dir("sub");
    BmLedger back;
    prev.mode = BM_HOST_HOLD;
    chmod(sub, 0555);
    bm_error_reset();
    int r = bm_state_save(path, &prev, 1700000100);
    prev.mode = BM_HOST_RECLAIM;
    ok(r == -EACCES, "read-only directory: -EACCES");
    is_str(bm_error_detail(r), "cannot write: Permission denied (previous state kept)", "says so");
    ok(bm_state_load(path, &back) == 0 && back.mode == BM_HOST_RECLAIM, "previous file intact");
    bm_ledger_clear(&back);
    chmod(sub, 0755);
}

/* a file that is not there yet: no claim that a previous one was kept */
static void test_no_previous_file(void)
{
    _cleanup_free_ char *nodir = in_dir("file/state.json"), *file = in_dir("file");
    fixture_write(file, "x");
    bm_error_reset();
    int r = bm_state_save(nodir, &prev, 1);
    ok(r == -ENOTDIR, "directory is a file: -ENOTDIR");
    is_str(bm_error_detail(r), "cannot write: Not a directory", "no 'previous state kept'");
}

/* a corrupt file set aside */
static void test_set_aside(void)
{
    _cleanup_free_ char *corrupt = in_dir("corrupt.json");
    fixture_write(corrupt, "{");
    _cleanup_free_ char *aside = NULL;
    ok(bm_state_set_aside(corrupt, &aside) == 0, "set aside");
    _cleanup_free_ char *want_aside = bm_asprintf("%s.corrupt", corrupt);
    is_str(aside, want_aside, "as FILE.corrupt");
    ok(access(corrupt, F_OK) < 0 && access(aside, F_OK) == 0, "renamed");
    /* an older copy (a regular file) is replaced */
    fixture_write(corrupt, "{{");
    free(aside);
    aside = NULL;
    ok(bm_state_set_aside(corrupt, &aside) == 0 && strcmp(aside, want_aside) == 0,
       "again: FILE.corrupt replaced");
    _cleanup_free_ char *text = NULL;
    ok(bm_file_read(want_aside, 100, &text, NULL) == 0 && strcmp(text, "{{") == 0,
       "  holds the newer corrupt file");

    /* FILE.corrupt taken by what balloonmgr did not write: never replaced, never lost */
    static const char *const kinds[] = {"directory", "FIFO", "symbolic link"};
    for (int k = 0; k < 3; k++) {
        _cleanup_free_ char *path = bm_asprintf("%s/taken%d.json", dir, k);
        _cleanup_free_ char *taken = bm_asprintf("%s.corrupt", path);
        _cleanup_free_ char *target = bm_asprintf("%s/target%d", dir, k);
        _cleanup_free_ char *want = bm_asprintf("%s.corrupt.1", path);
        fixture_write(path, "not json");
        int made = k == 0 ? mkdir(taken, 0755) : k == 1 ? mkfifo(taken, 0644) : symlink(target, taken);
        struct stat before, after;
        lstat(taken, &before);
        _cleanup_free_ char *got = NULL;
        int r = bm_state_set_aside(path, &got);
        ok(made == 0 && r == 0 && got && strcmp(got, want) == 0,
           "FILE.corrupt is a %s: moved to FILE.corrupt.1 instead (%s)", kinds[k],
           r < 0 ? bm_error_detail(r) : got);
        ok(lstat(taken, &after) == 0 && after.st_ino == before.st_ino &&
               (after.st_mode & S_IFMT) == (before.st_mode & S_IFMT) && access(target, F_OK) < 0,
           "  the %s is left as it was", kinds[k]);
        _cleanup_free_ char *moved = NULL;
        ok(access(path, F_OK) < 0 && bm_file_read(want, 100, &moved, NULL) == 0 &&
               strcmp(moved, "not json") == 0,
           "  and the corrupt file is kept whole");
    }

    /* every name taken: an error, the corrupt file stays where it was */
    _cleanup_free_ char *path = in_dir("full.json");
    fixture_write(path, "not json");
    _cleanup_free_ char *taken = bm_asprintf("%s.corrupt", path);
    mkdir(taken, 0755);
    for (int i = 1; i <= BM_STATE_ASIDE_MAX; i++) {
        _cleanup_free_ char *n = bm_asprintf("%s.%d", taken, i);
        mkdir(n, 0755);
    }
    _cleanup_free_ char *got = NULL;
    int r = bm_state_set_aside(path, &got);
    ok(r < 0 && strstr(bm_error_detail(r), "is a directory") && access(path, F_OK) == 0,
       "every name taken: refused, the file stays (%s)", r < 0 ? bm_error_detail(r) : got);
}

/* Sets PATH SUFFIX's modification time to now + offset_s. */
static void shift_mtime(const char *path, const char *suffix, long offset_s)
{
    _cleanup_free_ char *t = bm_asprintf("%s%s", path, suffix);
    struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = time(NULL) + offset_s}};
    if (utimensat(AT_FDCWD, t, ts, 0) < 0)
        perror(t);
}

/* temporary files of killed writers: removed unless locked (a writer at work), too young,
 * or not ours by name */
static void test_temporary_files_of_killed_writers(void)
{
    _cleanup_free_ char *path = in_dir("sub/state.json"), *missing = in_dir("none.json");
    static const struct {
        const char *suffix;
        bool removed;
    } tmps[] = {
        {".tmp.balloonmgr-Ab12Z9", true}, {".tmp.balloonmgr-locked", false},
        {".tmp.balloonmgr-AB12Z", false}, {".tmp.balloonmgr-AB12Z99", false},
        {".tmp.balloonmgr-AB-2Z9", false}, {".tmp.Ab12Z9", false}, {".tmp.backup", false},
        {".backup", false}, {".corrupt", false},
    };
    int locked = -1;
    for (size_t i = 0; i < BM_ARRAY_SIZE(tmps); i++) {
        _cleanup_free_ char *t = bm_asprintf("%s%s", path, tmps[i].suffix);
        fixture_write(t, "{\"version\": 1, \"dom");
        if (strcmp(tmps[i].suffix, ".tmp.balloonmgr-locked") == 0) {
            locked = open(t, O_RDONLY | O_CLOEXEC);
            ok(flock(locked, LOCK_EX) == 0, "lock %s", t);
        }
    }
    /* their ages set, not waited for or assumed: written "now" (an hour ahead, however slow
     * this machine is), then an hour ago */
    for (size_t i = 0; i < BM_ARRAY_SIZE(tmps); i++)
        shift_mtime(path, tmps[i].suffix, 3600);
    ok(bm_state_cleanup(path) == 0, "files changed in the last %d s are left alone", BM_STATE_TMP_MIN_AGE_S);
    for (size_t i = 0; i < BM_ARRAY_SIZE(tmps); i++)
        shift_mtime(path, tmps[i].suffix, -3600);
    _cleanup_free_ char *tmpl = bm_asprintf("%s" BM_STATE_TMP_SUFFIX, path);
    is_u64((uint64_t)bm_file_atomic_cleanup(tmpl, 0), 1, "one stale temporary file removed");
    for (size_t i = 0; i < BM_ARRAY_SIZE(tmps); i++) {
        _cleanup_free_ char *t = bm_asprintf("%s%s", path, tmps[i].suffix);
        ok((access(t, F_OK) < 0) == tmps[i].removed, "%s %s", tmps[i].suffix,
           tmps[i].removed ? "removed" : "kept");
        unlink(t);
    }
    close(locked);
    ok(bm_file_atomic_cleanup("/nonexistent/x.XXXXXX", 0) == -ENOENT, "no directory: -ENOENT");
    ok(bm_file_atomic_cleanup(path, 0) == -EINVAL, "not a template: -EINVAL");
    ok(bm_state_cleanup(missing) == 0 && bm_state_cleanup("/nonexistent/state.json") == 0,
       "cleanup with nothing to clean");
}

/* a loop's saves: the first failure reported, the same again quiet, recovery reported */
static void test_failing_saves_reported_once(void)
{
    BmStateWriter w = {0};
    _cleanup_free_ char *blocker = in_dir("blocker"), *blocked = bm_asprintf("%s/x", blocker);
    fixture_write(blocker, "not a directory");
    ok(bm_state_save_tracked(&w, blocked, &prev, 1) == BM_SAVE_FAILED, "first failure: report");
    is_str(w.reported, "cannot write: Not a directory", "the reason");
    ok(bm_state_save_tracked(&w, blocked, &prev, 2) == BM_SAVE_FAILED_QUIET, "again: quiet");
    ok(bm_state_save_tracked(&w, blocked, &prev, 3) == BM_SAVE_FAILED_QUIET, "again: quiet");
    _cleanup_free_ char *deep = in_dir("missing/deeper/x");
    ok(bm_state_save_tracked(&w, deep, &prev, 4) == BM_SAVE_FAILED, "another reason: report");
    ok(strstr(w.reported, "cannot create directory") != NULL, "that reason");
    unlink(blocker);
    ok(mkdir(blocker, 0755) == 0, "fixed");
    ok(bm_state_save_tracked(&w, blocked, &prev, 5) == BM_SAVE_RECOVERED && w.failed_before == 4,
       "recovered after 4 failures");
    ok(bm_state_save_tracked(&w, blocked, &prev, 6) == BM_SAVE_OK, "then plain ok");
}

/* A state file from before the histogram's rename (12 bounds, 0.05 .. 300 s: 13 counts): the
 * old counts are not carried into the new buckets (docs/metrics.md), the other counters go on. */
static void test_old_histogram_dropped(void)
{
    const char *text = "{\"version\":1,\"domains\":[],\"counters\":{\"passes\":42,"
                       "\"latency\":[{\"direction\":\"inflate\",\"sg\":\"negotiated\","
                       "\"buckets\":[1,2,3,4,5,6,7,8,9,10,11,12,13],\"sum\":99.5,\"count\":91}]}}";
    BmLedger l;
    int r = bm_state_parse(text, &l);
    ok(r == 0, "a state file with the old histogram loads (%s)", r < 0 ? bm_error_detail(r) : "ok");
    const BmHistogram *h = &l.counters.latency[BM_DEV_BALLOON][BM_DIR_INFLATE][BM_SGL_NEGOTIATED];
    ok(h->n_bounds == 13 && h->count == 0 && h->sum == 0,
       "its 13 counts are not put into the 14 new buckets: the histogram starts at zero");
    ok(l.counters.passes == 42, "the other counters go on (passes 42)");
    bm_ledger_clear(&l);
}

/* A state file from before the reporting and deflate-on-oom verdicts: the SG verdict stands,
 * those two are unknown (probed again at the next start). */
static void test_features_of_older_file(void)
{
    const char *text = "{\"version\":1,\"domains\":[],\"counters\":{\"domains\":[{\"uuid\":"
                       "\"11111111-2222-3333-4444-555555555555\",\"name\":\"one\",\"features\":"
                       "{\"boot\":\"b/3\",\"sg\":\"not-offered\",\"ioeventfd\":\"on\"}}]}}";
    BmLedger l;
    ok(bm_state_parse(text, &l) == 0, "a state file without the reporting verdict parses");
    const BmLedgerEntry *e = bm_ledger_find(&l, "11111111-2222-3333-4444-555555555555");
    ok(e && e->features_known && e->sg == BM_FEAT_NOT_OFFERED && e->reporting == BM_FEAT_UNKNOWN &&
           e->deflate_on_oom == BM_FEAT_UNKNOWN,
       "its SG verdict stands, reporting and deflate-on-oom are unknown");
    bm_ledger_clear(&l);
}

/* Issue 31: whatever the writer can write, the reader reads back. Every field of a reading,
 * a record and the counters set to each extreme a guest, QEMU, a spool file or a long uptime
 * can bring (2^64-2, 2^63, 2^63-1, 0; NaN, +-Inf, -0.5, DBL_MAX, past a year, a denormal):
 * the file is read back, and written again it is the same text (nothing is lost twice). */
static void fill_extreme(BmLedger *l, uint64_t u, double s)
{
    bm_ledger_init(l);
    BmCounters *c = &l->counters;
    for (int d = 0; d < BM_DIR_COUNT; d++) {
        for (int v = 0; v < BM_DEV_COUNT; v++) {
            for (int g = 0; g < BM_SGL_COUNT; g++) {
                BmHistogram *h = &c->latency[v][d][g];
                for (size_t k = 0; k <= h->n_bounds; k++)
                    h->counts[k] = u;
                h->count = u;
                h->sum = s;
            }
            for (int k = 0; k < BM_CHANGE_ENDED_COUNT; k++)
                c->changes[v][d][k] = u;
        }
        c->target_changes[d] = u;
    }
    for (int e = 0; e < BM_ERR_COUNT; e++)
        c->errors[e] = u;
    c->passes = c->rss_dropped_bytes = c->percpu_drained_bytes = c->last_success_s = u;
    c->last_pass_duration_s = s;
    BmLedgerEntry *e = bm_ledger_entry(l, "11111111-2222-3333-4444-555555555555", "web1");
    e->have_prev = true;
    e->prev = (BmPrevReading){.major_faults = u, .swap_in_bytes = u, .last_update_s = u,
                              .taken_s = u, .taken_ns = u, .used_bytes = u, .actual_bytes = u,
                              .used_peak_bytes = u, .used_peak_s = u, .given_s = u,
                              .oom_kills = u, .alloc_stalls = u, .direct_reclaim_bytes = u,
                              .oom_s = u};
    e->unresponsive = true;
    e->unresponsive_actual = e->unresponsive_until_s = u;
    e->last_target_bytes = e->last_rss_drop_bytes = u;
    e->last_duration_s = s;
    e->last_direction = (int)(u & 0x7fffffff);
    e->yield = (BmYield){.inflated_bytes = u ? u : 1, .returned_bytes = u, .last_inflated_bytes = u,
                         .last_returned_bytes = u, .nothing = true, .nothing_rss_bytes = u};
}

static void test_extremes_read_back(void)
{
    const uint64_t us[] = {UINT64_MAX - 1, (uint64_t)1 << 63, BM_COUNT_MAX, BM_COUNT_MAX - 1, 0,
                           1ull << 53};
    const double ss[] = {NAN, INFINITY, -INFINITY, -0.5, -1, DBL_MAX, 366.0 * 86400, 4.9e-324,
                         0, 1e300};
    int bad = 0;
    for (size_t i = 0; i < BM_ARRAY_SIZE(us); i++)
        for (size_t j = 0; j < BM_ARRAY_SIZE(ss); j++) {
            BmLedger l, back, again;
            fill_extreme(&l, us[i], ss[j]);
            _cleanup_free_ char *text = bm_state_format(&l, us[i]);
            int r = bm_state_parse(text, &back);
            if (r < 0) {
                if (bad++ < 3)
                    diag("%" PRIu64 ", %g: %s", us[i], ss[j], bm_error_detail(r));
                bm_ledger_clear(&l);
                continue;
            }
            _cleanup_free_ char *text2 = bm_state_format(&back, us[i]);
            r = bm_state_parse(text2, &again);
            _cleanup_free_ char *text3 = r == 0 ? bm_state_format(&again, us[i]) : NULL;
            if (!text3 || strcmp(text2, text3) != 0 || !back.entries[0]->have_prev ||
                back.entries[0]->yield.inflated_bytes == 0) {
                if (bad++ < 3)
                    diag("%" PRIu64 ", %g: not the same when written again", us[i], ss[j]);
            }
            if (r == 0)
                bm_ledger_clear(&again);
            bm_ledger_clear(&back);
            bm_ledger_clear(&l);
        }
    ok(bad == 0, "every field at its extremes (%zu x %zu): read back, and written again the same",
       BM_ARRAY_SIZE(us), BM_ARRAY_SIZE(ss));
}

/* The struct of l that table in describes: its one domain's reading, record or yield, or the
 * counters. */
static void *table_base(BmLedger *l, BmStateStruct in)
{
    BmLedgerEntry *e = l->entries[0];
    switch (in) {
    case BM_STATE_IN_READING: return &e->prev;
    case BM_STATE_IN_ENTRY: return e;
    case BM_STATE_IN_YIELD: return &e->yield;
    default: return &l->counters;
    }
}

/* Every field of every table of the state file: set to a value of its own (not its default),
 * written and read back, it is that value again. */
static void test_every_field_round_trips(void)
{
    BmLedger l, back;
    bm_ledger_init(&l);
    bm_ledger_entry(&l, "11111111-2222-3333-4444-555555555555", "web1")->have_prev = true;
    size_t n_all = 0;
    for (BmStateStruct in = 0; in < BM_STATE_IN_COUNT; in++) {
        size_t n;
        const BmStateField *f = bm_state_fields(in, &n);
        for (size_t k = 0; k < n; k++, n_all++) {
            void *p = (char *)table_base(&l, in) + f[k].offset;
            switch (f[k].type) {
            case BM_STATE_SECONDS: *(double *)p = 1.5 + (double)n_all; break;
            case BM_STATE_BOOL: *(bool *)p = true; break;
            case BM_STATE_DIRECTION: *(int *)p = BM_DIR_COUNT - 1; break;
            default: *(uint64_t *)p = 1000 + n_all; break;
            }
        }
    }
    _cleanup_free_ char *text = bm_state_format(&l, 1800000000);
    int r = bm_state_parse(text, &back);
    ok(r == 0 && back.n_entries == 1, "a ledger with every field set reads back");
    int lost = 0;
    for (BmStateStruct in = 0; r == 0 && in < BM_STATE_IN_COUNT; in++) {
        size_t n;
        const BmStateField *f = bm_state_fields(in, &n);
        for (size_t k = 0; k < n; k++)
            if (memcmp((char *)table_base(&l, in) + f[k].offset,
                       (char *)table_base(&back, in) + f[k].offset, f[k].size) != 0 &&
                lost++ < 3)
                diag("\"%s\" did not round-trip", f[k].key);
    }
    ok(r == 0 && lost == 0 && n_all > 30, "each of the %zu fields of the tables round-trips",
       n_all);
    if (r == 0)
        bm_ledger_clear(&back);
    bm_ledger_clear(&l);
}

/* The counters by device: virtio-mem's histograms carry "device", its outcomes are
 * "virtio_mem_changes"; what an older file has without them is the balloon's. */
static void test_counts_by_device(void)
{
    static const char old[] =
        "{\"version\":1,\"domains\":[],\"counters\":{\"latency\":[{\"direction\":\"inflate\","
        "\"sg\":\"unknown\",\"buckets\":[0,0,0,0,0,0,1,0,0,0,0,0,0,0],\"sum\":0.4,\"count\":1}],"
        "\"changes\":{\"inflate\":{\"reached\":1,\"stalled\":2}}}}";
    BmLedger l;
    ok(bm_state_parse(old, &l) == 0, "an older file without devices is read");
    is_u64(l.counters.latency[BM_DEV_BALLOON][BM_DIR_INFLATE][BM_SGL_UNKNOWN].count, 1,
           "  its histogram is the balloon's");
    is_u64(l.counters.changes[BM_DEV_BALLOON][BM_DIR_INFLATE][BM_CHANGE_STALLED], 2,
           "  its outcomes are the balloon's");
    is_u64(l.counters.latency[BM_DEV_VIRTIO_MEM][BM_DIR_INFLATE][BM_SGL_UNKNOWN].count +
               l.counters.changes[BM_DEV_VIRTIO_MEM][BM_DIR_INFLATE][BM_CHANGE_STALLED], 0,
           "  virtio-mem has none");
    bm_histogram_observe(&l.counters.latency[BM_DEV_VIRTIO_MEM][BM_DIR_DEFLATE][BM_SGL_UNKNOWN], 3);
    l.counters.changes[BM_DEV_VIRTIO_MEM][BM_DIR_INFLATE][BM_CHANGE_STALLED] = 5;
    _cleanup_free_ char *text = bm_state_format(&l, 1000);
    ok((strstr(text, "\"device\":\"virtio_mem\"") || strstr(text, "\"device\": \"virtio_mem\"")) &&
           strstr(text, "\"virtio_mem_changes\""),
       "virtio-mem's counts are written under their device");
    BmLedger back;
    ok(bm_state_parse(text, &back) == 0 &&
           back.counters.latency[BM_DEV_VIRTIO_MEM][BM_DIR_DEFLATE][BM_SGL_UNKNOWN].count == 1 &&
           back.counters.changes[BM_DEV_VIRTIO_MEM][BM_DIR_INFLATE][BM_CHANGE_STALLED] == 5 &&
           back.counters.changes[BM_DEV_BALLOON][BM_DIR_INFLATE][BM_CHANGE_STALLED] == 2 &&
           back.counters.latency[BM_DEV_BALLOON][BM_DIR_DEFLATE][BM_SGL_UNKNOWN].count == 0,
       "  and read back apart from the balloon's");
    bm_ledger_clear(&back);
    bm_ledger_clear(&l);
}

int main(void)
{
    test_counts_by_device();
    test_extremes_read_back();
    test_every_field_round_trips();
    test_bounds();
    test_value_ranges();
    test_counters_saturate();
    test_never_infinity();
    test_load_bounds();
    test_old_histogram_dropped();
    test_features_of_older_file();
    ok(mkdtemp(dir) != NULL, "temporary directory");
    make_ledger();
    test_round_trip();
    test_missing_and_corrupt();
    test_read_only_directory();
    test_no_previous_file();
    test_set_aside();
    test_temporary_files_of_killed_writers();
    test_failing_saves_reported_once();
    bm_ledger_clear(&prev);
    _cleanup_free_ char *rm = bm_asprintf("rm -rf %s", dir);
    ok(system(rm) == 0, "cleanup");
    return tap_done();
}
