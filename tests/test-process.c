/* process_* metrics: /proc/self read from a fake /proc (tests/data/proc-self) and from the
 * real one, and their exposition checked by promtool. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "error.h"
#include "fixture.h"
#include "process.h"
#include "tap.h"
#include "util.h"

static void test_fake(void)
{
    _cleanup_free_ char *dir = bm_asprintf("%s/tests/data/proc-self", SOURCE_ROOT);
    BmProcess p;
    int r = bm_process_read(dir, &p);
    ok(r == 0, "fake /proc: read (%s)", r < 0 ? bm_error_detail(r) : "ok");
    if (r < 0)
        return;
    long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    ok(p.cpu_seconds == (double)(150 + 75) / (double)tck, "cpu: utime 150 + stime 75 ticks");
    is_u64(p.virtual_bytes, 104857600, "virtual: vsize");
    is_u64(p.resident_bytes, 5000 * (uint64_t)page, "resident: 5000 pages");
    is_u64(p.open_fds, 4, "open fds: the 4 entries of self/fd");
    is_u64(p.max_fds, 1024, "max fds: the soft limit of 'Max open files'");
    ok(p.start_time_seconds == 1700000000 + 4200.0 / (double)tck,
       "start: btime + starttime ticks (command name with spaces and parentheses)");

    _cleanup_(bm_registry_freep) BmRegistry *reg = bm_registry_new();
    ok(bm_process_export(reg, &p) == 0, "export: six families");
    _cleanup_free_ char *text = bm_registry_render(reg);
    ok(strstr(text, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total ") != NULL,
       "export: process_cpu_seconds_total is a counter");
    ok(strstr(text, "\nprocess_max_fds 1024\n") != NULL, "export: process_max_fds 1024");
    is_u64(bm_registry_samples(reg), 6, "export: 6 samples");

    char tmpl[] = "/tmp/bm-process.XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd >= 0) {
        if (write(fd, text, strlen(text)) < 0)
            diag("write failed");
        close(fd);
        _cleanup_free_ char *cmd = bm_asprintf("promtool check metrics <%s >/dev/null 2>&1", tmpl);
        if (system("command -v promtool >/dev/null") == 0)
            ok(system(cmd) == 0, "export: promtool check metrics is clean");
        unlink(tmpl);
    }
}

static void test_bad(void)
{
    char tmpl[] = "/tmp/bm-proc.XXXXXX";
    if (!mkdtemp(tmpl)) {
        ok(false, "mkdtemp");
        return;
    }
    BmProcess p;
    int r = bm_process_read(tmpl, &p);
    ok(r == -ENOENT && strstr(bm_error_detail(r), "/self/stat"), "missing stat: -ENOENT naming it (%s)",
       bm_error_detail(r));
    _cleanup_free_ char *self = bm_asprintf("%s/self", tmpl), *stat = bm_asprintf("%s/self/stat", tmpl),
                       *btime = bm_asprintf("%s/stat", tmpl), *limits = bm_asprintf("%s/self/limits", tmpl),
                       *fd = bm_asprintf("%s/self/fd", tmpl);
    mkdir(self, 0755);
    fixture_write(stat, "1 (x) S 1 2 3\n");
    r = bm_process_read(tmpl, &p);
    ok(r == -EINVAL && strstr(bm_error_detail(r), "not a process status line"),
       "short stat: -EINVAL (%s)", bm_error_detail(r));
    fixture_write(stat, "1 (x) S 1 1 1 0 -1 0 0 0 0 0 10 10 0 0 20 0 1 0 100 4096 1 0\n");
    fixture_write(btime, "cpu 1\n");
    r = bm_process_read(tmpl, &p);
    ok(r == -EINVAL && strstr(bm_error_detail(r), "no line 'btime '"), "no btime: -EINVAL (%s)",
       bm_error_detail(r));
    fixture_write(btime, "btime 5\n");
    fixture_write(limits, "Max open files            unlimited            unlimited            files\n");
    mkdir(fd, 0755);
    r = bm_process_read(tmpl, &p);
    ok(r == 0 && !bm_present(p.max_fds) && p.open_fds == 0, "unlimited fds: process_max_fds left out");
    unlink(stat), unlink(btime), unlink(limits), rmdir(fd), rmdir(self), rmdir(tmpl);
}

static void test_real(void)
{
    BmProcess p;
    int r = bm_process_read(NULL, &p);
    ok(r == 0, "/proc: read (%s)", r < 0 ? bm_error_detail(r) : "ok");
    if (r < 0)
        return;
    size_t n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    is_u64(p.open_fds, n - 1, "/proc: open fds as /proc/self/fd lists them (less the listing's own)");
    ok(p.resident_bytes > 1 << 20 && p.virtual_bytes >= p.resident_bytes, "/proc: RSS %llu, VM %llu",
       (unsigned long long)p.resident_bytes, (unsigned long long)p.virtual_bytes);
    /* after the boot (btime of /proc/stat), before now: an order, not a duration */
    double now = (double)time(NULL), boot = 0;
    FILE *st = fopen("/proc/stat", "r");
    char line[256];
    while (st && fgets(line, sizeof(line), st))
        if (sscanf(line, "btime %lf", &boot) == 1)
            break;
    if (st)
        fclose(st);
    ok(boot > 0 && p.start_time_seconds >= boot && p.start_time_seconds <= now + 1,
       "/proc: started after the boot, before now (%.2f; boot %.0f, now %.0f)",
       p.start_time_seconds, boot, now);
    /* at most the CPU time this process has used by now (the kernel's ticks round down) */
    struct timespec cpu;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    double used = (double)cpu.tv_sec + cpu.tv_nsec / 1e9;
    ok(p.cpu_seconds >= 0 && p.cpu_seconds <= used + 0.01, "/proc: CPU %.2f s (used so far: %.2f s)",
       p.cpu_seconds, used);
}

int main(void)
{
    test_fake();
    test_bad();
    test_real();
    return tap_done();
}
