/* The spool of set --wait: a flood of other files never hides the changes. With 30,000 junk
 * files beside 20 changes, one ingest counts all 20, skips the junk by name without opening
 * it (inotify counts the files opened: none of the junk), says how many it skipped and leaves
 * the junk alone; a flood of entry-named junk is drained over a few calls, each of them
 * saying so. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "ledger.h"
#include "spool.h"
#include "state.h"
#include "tap.h"
#include "util.h"

/* in memory when it can be (/dev/shm): 90,000 files on a busy disk take a minute */
static char root_shm[] = "/dev/shm/bm-test-spool.XXXXXX", root_tmp[] = "/tmp/bm-test-spool.XXXXXX";
static const char URI[] = "test:///default";

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* How many files of the directory watched by fd (inotify, IN_OPEN) were opened since it was
 * set up, in *ret_all, and of them those named prefix* (-1: the events were lost). */
static int opened_named(int fd, const char *prefix, int *ret_all)
{
    *ret_all = 0;
    char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
    int n = 0;
    ssize_t len;
    while ((len = read(fd, buf, sizeof(buf))) > 0)
        for (char *p = buf; p < buf + len;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            if (ev->mask & IN_Q_OVERFLOW)
                return -1;
            *ret_all += ev->len > 0;
            n += ev->len && strncmp(ev->name, prefix, strlen(prefix)) == 0;
            p += sizeof(*ev) + ev->len;
        }
    return n;
}

static void touch(const char *dir, const char *name, const char *text)
{
    _cleanup_free_ char *path = bm_asprintf("%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
        if (write(fd, text, strlen(text)) < 0)
            perror(path);
        close(fd);
    }
}

/* n changes of 100 ms inflates, written as set --wait writes them */
static int write_changes(int n)
{
    int written = 0;
    for (int i = 0; i < n; i++) {
        BmTracked t = {.change = {.outcome = BM_CHANGE_REACHED, .from_bytes = 2u << 30,
                                  .target_bytes = 1u << 30, .reached_bytes = 1u << 30,
                                  .duration_ns = 100000000},
                       .rss_before_bytes = BM_ABSENT, .rss_after_bytes = BM_ABSENT};
        snprintf(t.uuid, sizeof(t.uuid), "%08d-0000-0000-0000-000000000000", i);
        char name[32];
        snprintf(name, sizeof(name), "guest%d", i);
        t.name = name;
        t.sg = BM_SGL_UNKNOWN;
        written += bm_spool_write(&t, URI) == 1;
    }
    return written;
}

static size_t count_files(const char *dir, bool entries_only)
{
    _cleanup_free_ char *cmd = bm_asprintf("ls -A %s | %s wc -l", dir,
                                           entries_only ? "grep -E '^[A-Za-z0-9]{6}\\.json$' |" : "");
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    if (p) {
        if (fscanf(p, "%zu", &n) != 1)
            n = 0;
        pclose(p);
    }
    return n;
}

static uint64_t reached(const BmLedger *l)
{
    return l->counters.changes[BM_DEV_BALLOON][BM_DIR_INFLATE][BM_CHANGE_REACHED];
}

static void test_junk_by_name(const char *dir)
{
    /* the changes first: a directory lists newer files first (tmpfs) or in hash order */
    ok(write_changes(20) == 20, "20 changes spooled, then 30000 junk files beside them");
    for (int i = 0; i < 30000; i++) {
        char name[32];
        snprintf(name, sizeof(name), "junk-%05d", i);
        touch(dir, name, "{}");
    }
    BmLedger l;
    bm_ledger_init(&l);
    _cleanup_free_ char *skipped = NULL;
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    bool watched = in >= 0 && inotify_add_watch(in, dir, IN_OPEN) >= 0;
    double t0 = now_s();
    int n = bm_spool_ingest(&l, URI, (uint64_t)time(NULL), &skipped);
    double took = now_s() - t0;
    ok(n == 20 && reached(&l) == 20, "one ingest counts all 20 (got %d)", n);
    int all = 0, junk_opened = watched ? opened_named(in, "junk-", &all) : -2;
    ok(junk_opened == 0 && all >= 20,
       "  none of the junk opened: skipped by its name (inotify: %d of the %d files opened)",
       junk_opened, all);
    diag("timing: the ingest took %.3f s (wall; bench/unit-timings.sh prints it)", took);
    if (in >= 0)
        close(in);
    ok(skipped && strstr(skipped, "skipped 30000 entries: 'junk-") &&
           strstr(skipped, "is not a change file (left alone)"),
       "  and says how many it skipped: %s", skipped ? skipped : "(nothing)");
    ok(count_files(dir, true) == 0 && count_files(dir, false) == 30000,
       "  the changes are removed, the junk left alone");
    bm_ledger_clear(&l);
    _cleanup_free_ char *rm = bm_asprintf("rm -f %s/junk-*", dir);
    ok(system(rm) == 0, "  junk removed");
}

static void test_entry_named_flood(const char *dir)
{
    /* 60,000 entry-named files that are not changes: each is opened and removed */
    ok(write_changes(20) == 20, "20 changes spooled, then 60000 entry-named junk files");
    for (int i = 0; i < 60000; i++) {
        char name[32];
        snprintf(name, sizeof(name), "j%05d.json", i);
        touch(dir, name, "not json");
    }
    BmLedger l;
    bm_ledger_init(&l);
    int calls = 0;
    bool said = false;
    while (reached(&l) < 20 && calls < 10) {
        _cleanup_free_ char *skipped = NULL;
        int n = bm_spool_ingest(&l, URI, (uint64_t)time(NULL), &skipped);
        calls++;
        if (n < 0)
            break;
        said |= skipped && strstr(skipped, "stopped after the first entries of a flood");
    }
    ok(reached(&l) == 20 && calls <= 3, "all 20 counted within %d calls (at most 3)", calls);
    ok(said, "  a call that stopped early said so");
    bm_ledger_clear(&l);
}

/* Issue 31: a spool entry is untrusted. One saying a change took two years, or moved a
 * balloon of 2^63 bytes or more: counted or dropped, the state saved after is read back. */
static void test_extreme_entries(const char *dir)
{
    const char *texts[] = {
        "{\"uri\":\"test:///default\",\"uuid\":\"aaaaaaaa-0000-0000-0000-000000000000\","
        "\"name\":\"g\",\"sg\":\"unknown\",\"from_bytes\":2147483648,\"target_bytes\":"
        "1073741824,\"reached_bytes\":1073741824,\"outcome\":0,\"duration_ns\":"
        "63072000000000000,\"rss_before_bytes\":4294967296,\"rss_after_bytes\":1073741824}",
        "{\"uri\":\"test:///default\",\"uuid\":\"bbbbbbbb-0000-0000-0000-000000000000\","
        "\"name\":\"g\",\"sg\":\"unknown\",\"from_bytes\":18446744073709551614,"
        "\"target_bytes\":9223372036854775808,\"reached_bytes\":9223372036854775808,"
        "\"outcome\":0,\"duration_ns\":100000000,\"rss_before_bytes\":18446744073709551614,"
        "\"rss_after_bytes\":0}",
    };
    for (size_t i = 0; i < BM_ARRAY_SIZE(texts); i++) {
        char name[16];
        snprintf(name, sizeof(name), "xtrem%zu.json", i);
        touch(dir, name, texts[i]);
    }
    BmLedger l, back;
    bm_ledger_init(&l);
    _cleanup_free_ char *skipped = NULL;
    int n = bm_spool_ingest(&l, URI, 1800000000, &skipped);
    ok(n >= 0, "entries with extreme values ingested (%d counted)", n);
    _cleanup_free_ char *text = bm_state_format(&l, 1800000000);
    int r = bm_state_parse(text, &back);
    ok(r == 0, "  the state saved after them is read back (%s)", r < 0 ? bm_error_detail(r) : "ok");
    bm_ledger_clear(&back);
    bm_ledger_clear(&l);
}

/* A virtio-mem change `set --wait` measured is counted as virtio-mem's (its own histogram and
 * outcomes), an unplug that stalled short of its target as the guest's refusal; the balloon's
 * counts are untouched. */
static void test_vmem_change(void)
{
    BmTracked t = {.name = (char *)"vm", .vmem = true, .sg = BM_SGL_UNKNOWN,
                   .rss_before_bytes = BM_ABSENT, .rss_after_bytes = BM_ABSENT,
                   .change = {.outcome = BM_CHANGE_STALLED, .from_bytes = 3u << 30,
                              .target_bytes = 2u << 30, .reached_bytes = 5u << 29,
                              .duration_ns = 12000000000ull}};
    snprintf(t.uuid, sizeof(t.uuid), "cccccccc-0000-0000-0000-000000000000");
    ok(bm_spool_write(&t, URI) == 1, "a virtio-mem change spooled");
    t.change = (BmChange){.outcome = BM_CHANGE_REACHED, .from_bytes = 5u << 29,
                          .target_bytes = 3u << 30, .reached_bytes = 3u << 30,
                          .duration_ns = 2000000000ull};
    ok(bm_spool_write(&t, URI) == 1, "  and a plug of it");
    BmLedger l;
    bm_ledger_init(&l);
    _cleanup_free_ char *skipped = NULL;
    int n = bm_spool_ingest(&l, URI, 1800000000, &skipped);
    const BmCounters *c = &l.counters;
    ok(n == 2 && c->changes[BM_DEV_VIRTIO_MEM][BM_DIR_INFLATE][BM_CHANGE_STALLED] == 1 &&
           c->latency[BM_DEV_VIRTIO_MEM][BM_DIR_DEFLATE][BM_SGL_UNKNOWN].count == 1 &&
           c->changes[BM_DEV_BALLOON][BM_DIR_INFLATE][BM_CHANGE_STALLED] == 0,
       "counted as virtio-mem's, not the balloon's (%d)", n);
    const BmLedgerEntry *e = bm_ledger_find(&l, t.uuid);
    ok(e && e->vmem_refused_bytes == 5u << 29 && e->vmem_refused_total_bytes == 1u << 29,
       "  the stalled unplug is the guest's refusal");
    bm_ledger_clear(&l);
}

int main(void)
{
    const char *root = mkdtemp(root_shm);
    if (!root)
        root = mkdtemp(root_tmp);
    ok(root != NULL, "temporary directory");
    setenv("BALLOONMGR_RUNTIME_DIR", root, 1);
    ok(bm_spool_create() == 0, "spool created");
    _cleanup_free_ char *dir = bm_spool_dir();
    test_junk_by_name(dir);
    test_entry_named_flood(dir);
    test_extreme_entries(dir);
    test_vmem_change();
    _cleanup_free_ char *rm = bm_asprintf("rm -rf %s", root);
    ok(system(rm) == 0, "cleanup");
    return tap_done();
}
