/* The state file: round trip, atomic writes, corrupt and missing files, read-only dirs,
 * temporary files of killed writers, reporting a failing save once. */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "state.h"
#include "tap.h"
#include "util.h"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

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
    ok(bm_state_parse(text, &c) == 0 && c.n_entries == 1 && c.entries[0].unresponsive,
       "a hold-off until 2100 is read");
    BmDomain d = {.uuid = "11111111-2222-3333-4444-555555555555", .name = "web1",
                  .actual_bytes = 1024};
    BmSnapshot snap = {.domains = &d, .n_domains = 1};
    uint64_t now = 1800000000;
    bm_ledger_sync(&c, &snap, now);
    ok(c.n_entries == 1 && c.entries[0].unresponsive &&
           c.entries[0].unresponsive_until_s == now + BM_UNRESPONSIVE_HOLDOFF_S,
       "  cut to now + %d s at the next pass (got %llu)", BM_UNRESPONSIVE_HOLDOFF_S,
       (unsigned long long)(c.n_entries ? c.entries[0].unresponsive_until_s : 0));
    bm_ledger_sync(&c, &snap, now + BM_UNRESPONSIVE_HOLDOFF_S);
    ok(c.n_entries == 1 && !c.entries[0].unresponsive, "  and over once that passed");
    bm_ledger_clear(&c);
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
                              .used_bytes = 300ull << 20, .actual_bytes = BM_ABSENT,
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
           b0->prev.used_bytes == 300ull << 20 && !bm_present(b0->prev.actual_bytes) &&
           b0->prev.used_peak_bytes == 340ull << 20 && b0->prev.used_peak_s == 1699999990,
       "counters round-trip, absent stays absent");
    const BmLedgerEntry *b1 = bm_ledger_find(&back, "aaaaaaaa-2222-3333-4444-555555555555");
    ok(b1 && b1->have_prev && b1->prev.swap_in_bytes == 7 && strcmp(b1->name, "two") == 0 &&
           !bm_present(b1->prev.used_bytes) && b1->prev.actual_bytes == 1ull << 30,
       "second domain by uuid, with its name");
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
        write_file(corrupt, bad[i].text);
        bm_error_clear();
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
    bm_error_clear();
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
    write_file(file, "x");
    bm_error_clear();
    int r = bm_state_save(nodir, &prev, 1);
    ok(r == -ENOTDIR, "directory is a file: -ENOTDIR");
    is_str(bm_error_detail(r), "cannot write: Not a directory", "no 'previous state kept'");
}

/* a corrupt file set aside */
static void test_set_aside(void)
{
    _cleanup_free_ char *corrupt = in_dir("corrupt.json");
    write_file(corrupt, "{");
    _cleanup_free_ char *aside = NULL;
    ok(bm_state_set_aside(corrupt, &aside) == 0, "set aside");
    _cleanup_free_ char *want_aside = bm_asprintf("%s.corrupt", corrupt);
    is_str(aside, want_aside, "as FILE.corrupt");
    ok(access(corrupt, F_OK) < 0 && access(aside, F_OK) == 0, "renamed");
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
        write_file(t, "{\"version\": 1, \"dom");
        if (strcmp(tmps[i].suffix, ".tmp.balloonmgr-locked") == 0) {
            locked = open(t, O_RDONLY | O_CLOEXEC);
            ok(flock(locked, LOCK_EX) == 0, "lock %s", t);
        }
    }
    ok(bm_state_cleanup(path) == 0, "files changed in the last %d s are left alone", BM_STATE_TMP_MIN_AGE_S);
    _cleanup_free_ char *tmpl = bm_asprintf("%s" BM_STATE_TMP_SUFFIX, path);
    is_u64((uint64_t)bm_atomic_cleanup(tmpl, 0), 1, "one stale temporary file removed");
    for (size_t i = 0; i < BM_ARRAY_SIZE(tmps); i++) {
        _cleanup_free_ char *t = bm_asprintf("%s%s", path, tmps[i].suffix);
        ok((access(t, F_OK) < 0) == tmps[i].removed, "%s %s", tmps[i].suffix,
           tmps[i].removed ? "removed" : "kept");
        unlink(t);
    }
    close(locked);
    ok(bm_atomic_cleanup("/nonexistent/x.XXXXXX", 0) == -ENOENT, "no directory: -ENOENT");
    ok(bm_atomic_cleanup(path, 0) == -EINVAL, "not a template: -EINVAL");
    ok(bm_state_cleanup(missing) == 0 && bm_state_cleanup("/nonexistent/state.json") == 0,
       "cleanup with nothing to clean");
}

/* a loop's saves: the first failure reported, the same again quiet, recovery reported */
static void test_failing_saves_reported_once(void)
{
    BmStateWriter w = {0};
    _cleanup_free_ char *blocker = in_dir("blocker"), *blocked = bm_asprintf("%s/x", blocker);
    write_file(blocker, "not a directory");
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
    const BmHistogram *h = &l.counters.latency[BM_DIR_INFLATE][BM_SGL_NEGOTIATED];
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

int main(void)
{
    test_bounds();
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
