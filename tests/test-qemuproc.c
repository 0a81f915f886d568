/* The QEMU process of a domain as /proc shows it (qemuproc.h): the guest RAM mapping's resident
 * size from smaps (a recorded smaps of a real TCG guest of 512 MiB: its RAM mapping rw-p, and a
 * translation buffer of 1023 MiB rwxp that must not be taken for it), and the pid file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fixture.h"
#include "qemuproc.h"
#include "tap.h"
#include "util.h"

#define MiB (1024ull * 1024)

static void test_parse(void)
{
    _cleanup_free_ char *text = fixture_read("qemuproc/smaps-tcg-512m.txt");
    ok(text != NULL, "the recorded smaps");
    if (!text)
        return;
    uint64_t rss = 0;
    ok(bm_qemuproc_parse_smaps(text, 512 * MiB, &rss) == 0, "a 512 MiB guest's RAM mapping found");
    is_u64(rss, 104752 * 1024ull, "  its Rss: 104752 kB (not the translation buffer's 63488)");
    ok(bm_qemuproc_parse_smaps(text, 1024 * MiB, &rss) == 0 && rss == 104752 * 1024ull,
       "the same mapping for a maximum of 1 GiB (with DIMMs beside it)");
    ok(bm_qemuproc_parse_smaps(text, 4096 * MiB, &rss) == -ENOENT,
       "none for a 4 GiB maximum: %s", bm_error_detail(-ENOENT));
    bm_error_reset();
    ok(bm_qemuproc_parse_smaps("MemTotal: 1 kB\n", 512 * MiB, &rss) == -EINVAL,
       "not smaps: %s", bm_error_detail(-EINVAL));
    bm_error_reset();
    ok(bm_qemuproc_parse_smaps("", 512 * MiB, &rss) == -ENOENT, "empty: no mapping");
    bm_error_reset();
    const char *huge = "7f0000000000-7f0040000000 rw-p 00000000 00:00 0\n"
                       "Rss: 99999999999999999999 kB\n";
    ok(bm_qemuproc_parse_smaps(huge, 1024 * MiB, &rss) == -EINVAL, "an Rss that overflows: refused");
    bm_error_reset();
}

static void test_read(void)
{
    char dir[] = "/tmp/bm-test-qemuproc.XXXXXX";
    if (!mkdtemp(dir)) {
        ok(false, "mkdtemp");
        return;
    }
    _cleanup_free_ char *smaps = fixture_read("qemuproc/smaps-tcg-512m.txt");
    for (const char *const *d = (const char *const[]){"run", "proc", "proc/4242", NULL}; *d; d++) {
        _cleanup_free_ char *path = bm_asprintf("%s/%s", dir, *d);
        mkdir(path, 0755);
    }
    ok(fixture_write_in(dir, "run/web1.pid", "4242\n") && fixture_write_in(dir, "run/bad.pid", "42x\n") &&
           smaps && fixture_write_in(dir, "proc/4242/smaps", smaps),
       "a fake run directory and /proc");
    _cleanup_free_ char *run = bm_asprintf("%s/run", dir), *proc = bm_asprintf("%s/proc", dir);
    pid_t pid = 0;
    ok(bm_qemuproc_pid(run, "web1", &pid) == 0 && pid == 4242, "web1.pid: 4242");
    ok(bm_qemuproc_pid(run, "bad", &pid) == -EINVAL, "bad.pid: %s", bm_error_detail(-EINVAL));
    bm_error_reset();
    ok(bm_qemuproc_pid(run, "gone", &pid) == -ENOENT, "gone.pid: %s", bm_error_detail(-ENOENT));
    bm_error_reset();
    ok(bm_qemuproc_pid(run, "../run/web1", &pid) == -EINVAL, "a name with a slash is not a pid file");
    bm_error_reset();
    uint64_t rss = 0;
    ok(bm_qemuproc_ram_resident(proc, 4242, 512 * MiB, &rss) == 0 && rss == 104752 * 1024ull,
       "PROC/4242/smaps read: %llu kB", (unsigned long long)(rss >> 10));
    ok(bm_qemuproc_ram_resident(proc, 4243, 512 * MiB, &rss) == -ENOENT, "a process gone: %s",
       bm_error_detail(-ENOENT));
    bm_error_reset();
    _cleanup_free_ char *cmd = bm_asprintf("rm -rf '%s'", dir);
    ok(system(cmd) == 0, "cleaned up");
}

int main(void)
{
    test_parse();
    test_read();
    return tap_done();
}
