/* Host memory readers against fake /proc trees (tests/data/proc/NAME/). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <sys/mman.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "file.h"
#include "fixture.h"
#include "hostmem.h"
#include "tap.h"
#include "util.h"

#define KiB 1024ull

static int read_tree(const char *name, BmHost *h)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/tests/data/proc/%s", SOURCE_ROOT, name);
    return bm_hostmem_read(dir, h);
}

/* fake /proc trees: PSI, no PSI, an old kernel without MemAvailable */
static void test_fake_proc_trees(void)
{
    BmHost h;
    ok(read_tree("pressure-high", &h) == 0, "pressure-high reads");
    is_u64(h.mem_total_bytes, 67108864 * KiB, "MemTotal");
    is_u64(h.mem_available_bytes, 3145728 * KiB, "MemAvailable");
    ok(h.psi_present && h.psi_some_avg10 == 12.5 && h.psi_some_avg60 == 8.25 &&
           h.psi_full_avg10 == 4.0 && h.psi_full_avg60 == 2.5,
       "PSI some/full avg10/avg60");

    ok(read_tree("no-psi", &h) == 0 && !h.psi_present, "no pressure/memory: PSI absent, not an error");
    ok(read_tree("old-kernel", &h) == 0, "no MemAvailable (old kernel) reads");
    is_u64(h.mem_available_bytes, (1000000 + 500000) * KiB, "MemAvailable estimated as MemFree + Cached");
}

static void test_bad_trees(void)
{
    BmHost h;
    bm_error_reset();
    int r = read_tree("bad-meminfo", &h);
    ok(r == -EINVAL, "no MemTotal: -EINVAL");
    ok(strstr(bm_error_detail(r), "bad-meminfo/meminfo: no MemTotal") != NULL, "reason names the file: %s",
       bm_error_detail(r));
    r = read_tree("does-not-exist", &h);
    ok(r == -ENOENT, "missing directory: -ENOENT");
}

static void test_real_proc(void)
{
    BmHost h;
    ok(bm_hostmem_read(NULL, &h) == 0 && bm_present(h.mem_total_bytes) && h.mem_total_bytes > 0,
       "the real /proc reads");
}

/* the parsers on bad and odd lines */
static void test_parsers(void)
{
    BmHost p = {0};
    ok(bm_hostmem_parse_psi("some avg10=1.00 avg60=2.00 avg300=3.00 total=4\n", &p) == 0 &&
           p.psi_present && p.psi_full_avg10 == 0,
       "PSI without a full line (CPU-style)");
    ok(bm_hostmem_parse_psi("some avg10=x avg60=2.00\n", &p) == -EINVAL, "malformed PSI refused");
    ok(bm_hostmem_parse_psi("some avg10=101.0 avg60=2.00\n", &p) == -EINVAL, "PSI over 100 refused");
    ok(bm_hostmem_parse_psi("full avg10=1.0 avg60=2.00\n", &p) == -EINVAL, "PSI without some refused");
    ok(bm_hostmem_parse_meminfo("MemTotal: -5 kB\n", &p) == -EINVAL, "negative MemTotal refused");
    ok(bm_hostmem_parse_meminfo("MemTotal: 99999999999999999999 kB\n", &p) == -EINVAL, "overflow refused");
    ok(bm_hostmem_parse_meminfo("MemTotalX: 5 kB\nMemTotal: 7 kB\n", &p) == 0 && p.mem_total_bytes == 7 * KiB,
       "a longer key is not taken for MemTotal");

    /* strict: what the kernel prints, nothing else; the reason names the line */
    static const struct {
        const char *text, *why;
    } bad_psi[] = {
        {"some avg10=nan avg60=2.00 avg300=0 total=0\n", "line 1: malformed 'some' line"},
        {"some avg10=inf avg60=2.00\n", "line 1: malformed 'some' line"},
        {"some avg10=0x1p3 avg60=2.00\n", "line 1: malformed 'some' line"},
        {"some avg10=1e1 avg60=2.00\n", "line 1: malformed 'some' line"},
        {"some avg10=-0.00 avg60=2.00\n", "line 1: malformed 'some' line"},
        {"some avg10=1.00 avg60=2.00\nfull avg10=NaN avg60=1.00\n", "line 2: malformed 'full' line"},
    };
    for (size_t i = 0; i < sizeof(bad_psi) / sizeof(bad_psi[0]); i++) {
        int r = bm_hostmem_parse_psi(bad_psi[i].text, &p);
        ok(r == -EINVAL && strstr(bm_error_detail(r), bad_psi[i].why), "PSI %zu refused: %s", i,
           r < 0 ? bm_error_detail(r) : "accepted");
    }
    static const struct {
        const char *text, *why;
    } bad_mem[] = {
        {"MemTotal: 0x1F kB\n", "line 1: MemTotal: '0x1F kB' is not a number of kB"},
        {"MemTotal: 1000 MB\n", "line 1: MemTotal: '1000 MB' is not a number of kB"},
        {"MemTotal: 1000\n", "line 1: MemTotal: '1000' is not a number of kB"},
        {"MemTotal: 1000 kB\nMemAvailable: nan kB\n", "line 2: MemAvailable: 'nan kB'"},
        {"MemTotal: 1000 kB\nMemFree: 5 kB\nMemAvailable: 2000 kB\n",
         "line 3: MemAvailable 2000 kB is above MemTotal 1000 kB"},
        {"MemFree: 5 kB\n", "no MemTotal"},
        {"MemTotal: 0 kB\n", "MemTotal is 0"},
    };
    for (size_t i = 0; i < sizeof(bad_mem) / sizeof(bad_mem[0]); i++) {
        int r = bm_hostmem_parse_meminfo(bad_mem[i].text, &p);
        ok(r == -EINVAL && strstr(bm_error_detail(r), bad_mem[i].why), "meminfo %zu refused: %s", i,
           r < 0 ? bm_error_detail(r) : "accepted");
    }
    ok(bm_hostmem_parse_meminfo("MemTotal: 1000 kB\nMemFree: 900 kB\nCached: 900 kB\n", &p) == 0 &&
           p.mem_available_bytes == 1000 * KiB,
       "old kernel: MemFree + Cached estimate capped at MemTotal");
    /* the huge-page pool: counts of Hugepagesize pages */
    ok(bm_hostmem_parse_meminfo("MemTotal: 8388608 kB\nMemAvailable: 4194304 kB\nHugePages_Total:     512\n"
                                "HugePages_Free:      384\nHugePages_Rsvd:        0\nHugepagesize:       2048 kB\n",
                                &p) == 0 &&
           p.hugepages_total_bytes == 1024 * 1024 * KiB && p.hugepages_free_bytes == 768 * 1024 * KiB,
       "huge pages: 512 of 2 MiB, 384 free: 1 GiB, 768 MiB free");
    ok(bm_hostmem_parse_meminfo("MemTotal: 8388608 kB\nMemAvailable: 4194304 kB\n", &p) == 0 &&
           p.hugepages_total_bytes == 0 && p.hugepages_free_bytes == 0,
       "no huge-page lines: no pool");
    int rh = bm_hostmem_parse_meminfo("MemTotal: 8388608 kB\nMemAvailable: 4194304 kB\n"
                                      "HugePages_Total: 5x\nHugepagesize: 2048 kB\n", &p);
    ok(rh == -EINVAL && strstr(bm_error_detail(rh), "line 3: HugePages_Total is not a count"),
       "a malformed count refused: %s", rh < 0 ? bm_error_detail(rh) : "accepted");
}

#define PAGE 4096ull

/* /proc/zoneinfo: the per-CPU lists' free pages and, on Linux >= 6.8, what they hold at rest */
static void test_zoneinfo(void)
{
    char dir[4096];
    BmHost h = {0};
    snprintf(dir, sizeof(dir), "%s/tests/data/proc/pressure-high", SOURCE_ROOT);
    ok(bm_hostmem_read_percpu(dir, &h) == 0, "zoneinfo of Linux 6.8+ reads");
    long page = sysconf(_SC_PAGESIZE);
    is_u64(h.percpu_free_bytes, (8891 + 301000) * (uint64_t)page, "free pages of every zone and CPU");
    is_u64(h.percpu_rest_bytes, (6 + 6 + 10081 + 10081) * (uint64_t)page, "high_min of every zone and CPU");
    is_u64(bm_hostmem_percpu_excess(&h), (8891 + 301000 - 6 - 6 - 10081 - 10081) * (uint64_t)page,
           "the excess: what the lists hold above their rest");

    snprintf(dir, sizeof(dir), "%s/tests/data/proc/old-kernel", SOURCE_ROOT);
    ok(bm_hostmem_read_percpu(dir, &h) == 0 && h.percpu_free_bytes == 197 * (uint64_t)page &&
           !bm_present(h.percpu_rest_bytes) && bm_hostmem_percpu_excess(&h) == 0,
       "before 6.8 (no high_min): the count read, no rest, no excess (the lists do not grow)");
    snprintf(dir, sizeof(dir), "%s/tests/data/proc/no-psi", SOURCE_ROOT);
    bm_error_reset();
    int r = bm_hostmem_read_percpu(dir, &h);
    ok(r == -ENOENT && strstr(bm_error_detail(r), "no-psi/zoneinfo") && !bm_present(h.percpu_free_bytes),
       "no zoneinfo: -ENOENT naming it, nothing known: %s", bm_error_detail(r));

    ok(bm_hostmem_parse_zoneinfo("Node 0, zone Normal\n  count: 5\n", PAGE, &h) == 0 &&
           !bm_present(h.percpu_free_bytes),
       "a count: outside pagesets is not a per-CPU list");
    ok(bm_hostmem_parse_zoneinfo("", PAGE, &h) == 0 && !bm_present(h.percpu_free_bytes),
       "empty: nothing known");
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"Node 0, zone Normal\n  pagesets\n    cpu: 0\n      count: x\n", "line 4: count: not a number of pages"},
        {"Node 0, zone Normal\n  pagesets\n      count: -1\n", "line 3: count: not a number"},
        {"Node 0, zone Normal\n  pagesets\n      high_min: 12kB\n", "line 3: high_min: not a number"},
        {"Node 0, zone Normal\n  pagesets\n      count: 99999999999999999999\n", "line 3: count: not a number"},
        {"Node 0, zone Normal\n  pagesets\n      count: 9223372036854775807\n"
         "      count: 9223372036854775807\n      count: 9223372036854775807\n",
         "line 5: count: the sum overflows"},
        {"Node 0, zone Normal\n  pagesets\n      count: 4611686018427387904\n", "overflow 64 bits of bytes"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = bm_hostmem_parse_zoneinfo(bad[i].text, PAGE, &h);
        ok(r == -EINVAL && strstr(bm_error_detail(r), bad[i].why), "zoneinfo %zu refused: %s", i,
           r < 0 ? bm_error_detail(r) : "accepted");
    }
}

/* The drain against a fake /proc whose lists never shrink: it writes stat_refresh, re-reads
 * zoneinfo and stops when nothing falls; a /proc without stat_refresh is refused by name. */
static void test_drain_fake(void)
{
    char dir[] = "/tmp/bm-test-hostmem.XXXXXX";
    if (!mkdtemp(dir)) {
        ok(false, "mkdtemp");
        return;
    }
    _cleanup_free_ char *src = fixture_read("proc/pressure-high/zoneinfo");
    fixture_write_in(dir, "zoneinfo", src ? src : "");
    BmHost h = {0};
    uint64_t drained = 1;
    int r = bm_hostmem_drain_percpu(dir, &h, &drained);
    ok(r == 0 && drained == 0, "no reading of the lists: nothing written");
    bm_error_reset();
    ok(bm_hostmem_read_percpu(dir, &h) == 0, "the lists read");
    r = bm_hostmem_drain_percpu(dir, &h, &drained);
    ok(r == -ENOENT && strstr(bm_error_detail(r), "/sys/vm/stat_refresh") && drained == 0,
       "no sys/vm/stat_refresh: -ENOENT naming it: %s", bm_error_detail(r));

    _cleanup_free_ char *sys = bm_asprintf("%s/sys", dir), *vm = bm_asprintf("%s/sys/vm", dir);
    mkdir(sys, 0755);
    mkdir(vm, 0755);
    fixture_write_in(dir, "sys/vm/stat_refresh", "");
    ok(bm_hostmem_read_percpu(dir, &h) == 0 && bm_hostmem_percpu_excess(&h) > (16ull << 20),
       "the lists read, above 16 MiB over their rest");
    r = bm_hostmem_drain_percpu(dir, &h, &drained);
    ok(r == 3 && drained == 0, "lists that do not fall: 3 writes, then it stops (got %d, %" PRIu64 " drained)",
       r, drained);
    _cleanup_free_ char *written = bm_asprintf("%s/sys/vm/stat_refresh", dir);
    _cleanup_free_ char *text = NULL;
    ok(bm_file_read(written, 64, &text, NULL) == 0 && strcmp(text, "1\n") == 0, "it wrote \"1\" to stat_refresh");

    fixture_write_in(dir, "zoneinfo", "Node 0, zone Normal\n  pagesets\n    count: 4000\n    high_min: 1000\n");
    ok(bm_hostmem_read_percpu(dir, &h) == 0 && bm_present(h.percpu_free_bytes),
       "the small lists read");
    r = bm_hostmem_drain_percpu(dir, &h, &drained);
    ok(r == 0 && drained == 0, "an excess under 16 MiB: no write");

    /* issue 31: a FIFO there never hangs a pass (open() blocked for ever, holding the state
     * lock, and SIGTERM restarted it): refused at once, with or without a reader */
    fixture_write_in(dir, "zoneinfo", src ? src : "");
    ok(bm_hostmem_read_percpu(dir, &h) == 0, "the lists read again");
    unlink(written);
    ok(mkfifo(written, 0600) == 0, "sys/vm/stat_refresh made a FIFO");
    alarm(10); /* on a hang: killed, the test fails */
    bm_error_reset();
    r = bm_hostmem_drain_percpu(dir, &h, &drained);
    ok(r == -ENODEV && strstr(bm_error_detail(r), "FIFO"), "a FIFO without a reader: refused at once (%s)",
       bm_error_detail(r));
    int reader = open(written, O_RDONLY | O_NONBLOCK);
    bm_error_reset();
    r = bm_hostmem_drain_percpu(dir, &h, &drained);
    ok(r == -ENODEV && strstr(bm_error_detail(r), "FIFO"), "a FIFO with a reader: refused, nothing written (%s)",
       bm_error_detail(r));
    char buf[8];
    ok(reader >= 0 && read(reader, buf, sizeof(buf)) <= 0, "  the reader got nothing");
    if (reader >= 0)
        close(reader);
    alarm(0);

    _cleanup_free_ char *rm = bm_asprintf("rm -rf '%s'", dir);
    ok(system(rm) == 0, "fake /proc removed");
}

/* On this machine's kernel: zoneinfo reads; as root, a drain runs (whatever the lists hold)
 * and ends within its bounds. */
static void test_real_percpu(void)
{
    BmHost h = {0};
    ok(bm_hostmem_read_percpu(NULL, &h) == 0 && bm_present(h.percpu_free_bytes),
       "the real /proc/zoneinfo has per-CPU lists (%" PRIu64 " KiB)", h.percpu_free_bytes / 1024);
    /* the drain of this host's lists reads what the rest of the machine does to MemAvailable
     * meanwhile: the slow suite's test-hostmem-real (BM_TEST_REAL_HOST=1), not unit */
    if (!getenv("BM_TEST_REAL_HOST")) {
        ok(true, "# SKIP the real drain: BM_TEST_REAL_HOST unset (the slow suite sets it)");
        return;
    }
    if (geteuid() != 0) {
        ok(true, "# SKIP not root: stat_refresh is root's");
        return;
    }
    uint64_t drained = 0;
    int r = bm_hostmem_drain_percpu(NULL, &h, &drained);
    ok(r >= 0 && r <= 4096, "a drain of the real lists ends (%d writes, %" PRIu64 " KiB drained)", r,
       drained / 1024);

    /* the real condition: 512 MiB touched and freed on one CPU wait on its list (Linux >= 6.8
     * raises a list's high mark while its CPU allocates); the drain gives them to MemAvailable */
    if (!bm_present(h.percpu_rest_bytes)) {
        ok(true, "# SKIP lists without high_min (Linux < 6.8): they do not grow so");
        return;
    }
    cpu_set_t one, was;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    bool pinned = sched_getaffinity(0, sizeof(was), &was) == 0 && sched_setaffinity(0, sizeof(one), &one) == 0;
    size_t len = 512u << 20;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        ok(false, "mmap 512 MiB: %s", strerror(errno));
        return;
    }
    for (size_t i = 0; i < len; i += 4096)
        m[i] = 1;
    munmap(m, len);
    BmHost before = {0}, after = {0};
    ok(bm_hostmem_read(NULL, &before) == 0 && bm_hostmem_read_percpu(NULL, &before) == 0, "read after the free");
    uint64_t parked = bm_hostmem_percpu_excess(&before);
    if (parked < (256ull << 20)) {
        ok(true, "# SKIP this kernel left %" PRIu64 " MiB of the 512 on the lists", parked >> 20);
    } else {
        h = before; /* the drain starts from this reading */
        r = bm_hostmem_drain_percpu(NULL, &h, &drained);
        ok(bm_hostmem_read(NULL, &after) == 0, "read after the drain");
        ok(r > 0 && bm_hostmem_percpu_excess(&h) < (64ull << 20),
           "the drain took the lists from %" PRIu64 " to %" PRIu64 " MiB above their rest (%d writes)",
           parked >> 20, bm_hostmem_percpu_excess(&h) >> 20, r);
        ok(after.mem_available_bytes >= before.mem_available_bytes + drained / 2,
           "MemAvailable counts them now: %" PRIu64 " -> %" PRIu64 " MiB (%" PRIu64 " MiB drained)",
           before.mem_available_bytes >> 20, after.mem_available_bytes >> 20, drained >> 20);
    }
    if (pinned)
        sched_setaffinity(0, sizeof(was), &was);
}

int main(void)
{
    test_fake_proc_trees();
    test_bad_trees();
    test_real_proc();
    test_parsers();
    test_zoneinfo();
    test_drain_fake();
    test_real_percpu();
    return tap_done();
}
