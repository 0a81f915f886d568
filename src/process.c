#include "process.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "util.h"

DEFINE_CLEANUP(FILE *, fclose)

/* The first line of path starting with prefix, after it, into buf. */
static int line_after(const char *path, const char *prefix, char *buf, size_t n)
{
    _cleanup_(fclosep) FILE *f = fopen(path, "re");
    if (!f)
        return bm_error(-errno, "cannot read '%s': %s", path, strerror(errno));
    char line[512];
    size_t pl = strlen(prefix);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, prefix, pl) == 0) {
            snprintf(buf, n, "%s", line + pl);
            return 0;
        }
    return bm_error(-EINVAL, "'%s' has no line '%s'", path, prefix);
}

/* utime, stime, starttime (clock ticks), vsize (bytes), rss (pages) of PROC/self/stat. */
static int read_stat(const char *proc, const char *self, BmProcess *p, uint64_t *ret_start_ticks)
{
    _cleanup_free_ char *path = bm_asprintf("%s/%s/stat", proc, self);
    _cleanup_(fclosep) FILE *f = fopen(path, "re");
    if (!f)
        return bm_error(-errno, "cannot read '%s': %s", path, strerror(errno));
    char line[1024];
    if (!fgets(line, sizeof(line), f))
        return bm_error(-EINVAL, "'%s' is empty", path);
    /* the command name, in parentheses, may hold spaces and ')': fields follow the last ')' */
    const char *s = strrchr(line, ')');
    unsigned long long utime, stime, start, vsize;
    long long rss;
    if (!s || sscanf(s + 1,
                     " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d"
                     " %*d %llu %llu %lld",
                     &utime, &stime, &start, &vsize, &rss) != 5)
        return bm_error(-EINVAL, "'%s' is not a process status line", path);
    long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    p->cpu_seconds = (double)(utime + stime) / (double)tck;
    p->virtual_bytes = vsize;
    p->resident_bytes = rss > 0 ? (uint64_t)rss * (uint64_t)page : 0;
    *ret_start_ticks = start;
    return 0;
}

int bm_process_read(const char *proc_dir, BmProcess *ret)
{
    const char *proc = proc_dir ? proc_dir : "/proc";
    BmProcess p = {.max_fds = BM_ABSENT};
    uint64_t start_ticks = 0;
    int r = read_stat(proc, "self", &p, &start_ticks);
    if (r < 0)
        return r;

    char buf[256];
    _cleanup_free_ char *stat = bm_asprintf("%s/stat", proc);
    r = line_after(stat, "btime ", buf, sizeof(buf));
    if (r < 0)
        return r;
    unsigned long long btime;
    if (sscanf(buf, "%llu", &btime) != 1)
        return bm_error(-EINVAL, "'%s': btime '%s' is not a number", stat, buf);
    p.start_time_seconds = (double)btime + (double)start_ticks / (double)sysconf(_SC_CLK_TCK);

    _cleanup_free_ char *limits = bm_asprintf("%s/self/limits", proc);
    r = line_after(limits, "Max open files", buf, sizeof(buf));
    if (r < 0)
        return r;
    unsigned long long soft;
    if (sscanf(buf, " %llu", &soft) == 1)
        p.max_fds = soft;

    _cleanup_free_ char *fd_dir = bm_asprintf("%s/self/fd", proc);
    DIR *d = opendir(fd_dir);
    if (!d)
        return bm_error(-errno, "cannot read '%s': %s", fd_dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            p.open_fds++;
    closedir(d);
    if (!proc_dir || strcmp(proc_dir, "/proc") == 0)
        p.open_fds--; /* the directory stream's own descriptor */
    *ret = p;
    return 0;
}

int bm_process_export(BmRegistry *r, const BmProcess *p)
{
    static const BmMetricFamily families[] = {
        {"process_cpu_seconds_total", BM_METRIC_COUNTER, "Total user and system CPU time spent in seconds."},
        {"process_resident_memory_bytes", BM_METRIC_GAUGE, "Resident memory size in bytes."},
        {"process_virtual_memory_bytes", BM_METRIC_GAUGE, "Virtual memory size in bytes."},
        {"process_open_fds", BM_METRIC_GAUGE, "Number of open file descriptors."},
        {"process_max_fds", BM_METRIC_GAUGE, "Maximum number of open file descriptors."},
        {"process_start_time_seconds", BM_METRIC_GAUGE,
         "Start time of the process since unix epoch in seconds."},
    };
    int ok = bm_registry_declare_all(r, families, BM_ARRAY_SIZE(families));
    ok |= bm_registry_add(r, "process_cpu_seconds_total", NULL, p->cpu_seconds);
    ok |= bm_registry_add(r, "process_resident_memory_bytes", NULL, (double)p->resident_bytes);
    ok |= bm_registry_add(r, "process_virtual_memory_bytes", NULL, (double)p->virtual_bytes);
    ok |= bm_registry_add(r, "process_open_fds", NULL, (double)p->open_fds);
    if (bm_present(p->max_fds))
        ok |= bm_registry_add(r, "process_max_fds", NULL, (double)p->max_fds);
    ok |= bm_registry_add(r, "process_start_time_seconds", NULL, p->start_time_seconds);
    return ok < 0 ? -EINVAL : 0;
}

char *bm_process_render(void)
{
    BmProcess p;
    if (bm_process_read(NULL, &p) < 0)
        return bm_strdup("");
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    bm_process_export(r, &p);
    return bm_registry_render(r);
}
