/* Host memory readers against fake /proc trees (tests/data/proc/NAME/). */
#include <errno.h>
#include <stdio.h>

#include "error.h"
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
}

int main(void)
{
    test_fake_proc_trees();
    test_bad_trees();
    test_real_proc();
    test_parsers();
    return tap_done();
}
