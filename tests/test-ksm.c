/* KSM reader against fake /sys/kernel/mm/ksm trees (tests/data/ksm/NAME/) and the real one of
 * this machine, and its metrics. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "ksm.h"
#include "metrics.h"
#include "tap.h"
#include "util.h"

static int read_tree(const char *name, BmKsm *k)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/tests/data/ksm/%s", SOURCE_ROOT, name);
    return bm_ksm_read(dir, k);
}

/* The value of a file of the real KSM directory as text, or -1. */
static long long real_value(const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), BM_KSM_DEFAULT_DIR "/%s", name);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    long long v = -1;
    if (fscanf(f, "%lld", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

static char *render(const BmKsm *k)
{
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    ok(bm_ksm_export(r, k) == 0, "export succeeds");
    return bm_registry_render(r);
}

/* KSM running: its numbers, what it saves, their metrics */
static void test_running(void)
{
    BmKsm k;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    ok(read_tree("running", &k) == 0, "running: reads");
    ok(k.present && k.run == 1, "running: present, run 1");
    is_u64(k.pages_sharing, 123456, "pages_sharing");
    is_u64(k.pages_shared, 2345, "pages_shared");
    is_u64(k.full_scans, 17, "full_scans");
    ok(k.has_general_profit && k.general_profit_bytes == -40960, "general_profit may be negative");
    is_u64(bm_ksm_saved_bytes(&k), 123456 * page, "saved = pages_sharing * page size");
    is_str(bm_ksm_state_name(&k), "running", "state name");
    {
        _cleanup_free_ char *text = render(&k);
        ok(strstr(text, "\nballoonmgr_ksm_state{state=\"off\"} 0\nballoonmgr_ksm_state{state=\"running\"} 1\n"
                        "balloonmgr_ksm_state{state=\"unmerging\"} 0\n") != NULL,
           "exported state: running 1, the others 0");
        ok(strstr(text, "balloonmgr_ksm_pages") == NULL && strstr(text, "balloonmgr_ksm_run") == NULL,
           "no page counts, no run number (renamed: bytes, a state set)");
        char shared[96];
        snprintf(shared, sizeof(shared), "\nballoonmgr_ksm_shared_bytes %" PRIu64 "\n", 2345 * page);
        ok(strstr(text, shared) != NULL, "exported shared bytes = pages_shared * page size");
        ok(strstr(text, "# TYPE balloonmgr_ksm_full_scans_total counter\nballoonmgr_ksm_full_scans_total 17\n") != NULL,
           "exported full scans as a counter");
        ok(strstr(text, "\nballoonmgr_ksm_general_profit_bytes -40960\n") != NULL, "exported general_profit");
        char want[96];
        snprintf(want, sizeof(want), "\nballoonmgr_ksm_saved_bytes %" PRIu64 "\n", 123456 * page);
        ok(strstr(text, want) != NULL, "exported saved bytes");
    }
}

/* an old kernel without general_profit */
static void test_old_kernel(void)
{
    BmKsm k;
    ok(read_tree("old-kernel", &k) == 0, "old kernel (no general_profit): reads");
    ok(k.present && k.run == 0 && !k.has_general_profit, "no general_profit is not an error");
    is_str(bm_ksm_state_name(&k), "off", "run 0 is off");
    {
        _cleanup_free_ char *text = render(&k);
        ok(strstr(text, "\nballoonmgr_ksm_general_profit_bytes ") == NULL, "no general_profit sample");
    }
}

/* no KSM at all */
static void test_absent(void)
{
    BmKsm k;
    ok(read_tree("does-not-exist", &k) == 0 && !k.present, "no KSM directory: absent, not an error");
    is_str(bm_ksm_state_name(&k), "absent", "state name absent");
    ok(!bm_present(bm_ksm_saved_bytes(&k)), "absent: saved unknown");
    {
        _cleanup_free_ char *text = render(&k);
        ok(strstr(text, "\nballoonmgr_ksm_present 0\n") != NULL && strstr(text, "\nballoonmgr_ksm_state") == NULL,
           "absent: only balloonmgr_ksm_present 0");
    }
}

/* malformed trees and values */
static void test_bad(void)
{
    BmKsm k;
    bm_error_reset();
    int r = read_tree("bad", &k);
    ok(r == -EINVAL, "a malformed value: -EINVAL");
    ok(strstr(bm_error_detail(r), "bad/pages_sharing: 'lots': not a number") != NULL,
       "the reason names the file and the value: %s", bm_error_detail(r));
    char file[4096];
    snprintf(file, sizeof(file), "%s/tests/data/ksm/running/run", SOURCE_ROOT);
    ok(bm_ksm_read(file, &k) == -ENOTDIR, "a file instead of the directory: -ENOTDIR");

    int64_t v;
    ok(bm_ksm_parse_value("42\n", false, &v) == 0 && v == 42, "parse 42\\n");
    ok(bm_ksm_parse_value("-1", false, &v) == -EINVAL, "negative refused where unsigned");
    ok(bm_ksm_parse_value("", false, &v) == -EINVAL, "empty refused");
    ok(bm_ksm_parse_value("1 2", false, &v) == -EINVAL, "trailing text refused");
    ok(bm_ksm_parse_value("99999999999999999999", false, &v) == -EINVAL, "overflow refused");
}

/* the real /sys/kernel/mm/ksm of this machine: the same numbers as reading the files */
static void test_real(void)
{
    BmKsm k;
    if (access(BM_KSM_DEFAULT_DIR, F_OK) != 0) {
        ok(bm_ksm_read(NULL, &k) == 0 && !k.present, "this kernel has no KSM: absent");
    } else {
        ok(bm_ksm_read(NULL, &k) == 0 && k.present, "real " BM_KSM_DEFAULT_DIR ": reads");
        ok(k.run == real_value("run"), "real run %d", k.run);
        /* KSM may be merging between the two reads: a running one can move */
        long long sharing = real_value("pages_sharing");
        ok(k.run == 1 ? sharing >= 0 : (long long)k.pages_sharing == sharing,
           "real pages_sharing %" PRIu64 " (file now %lld)", k.pages_sharing, sharing);
        ok(k.run == 1 || (long long)k.full_scans == real_value("full_scans"), "real full_scans %" PRIu64,
           k.full_scans);
        ok(k.has_general_profit == (access(BM_KSM_DEFAULT_DIR "/general_profit", F_OK) == 0),
           "real general_profit present as the file is");
    }
}

int main(void)
{
    test_running();
    test_old_kernel();
    test_absent();
    test_bad();
    test_real();
    return tap_done();
}
