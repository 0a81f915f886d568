#include "qemuproc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "file.h"
#include "util.h"

/* A QEMU process has some hundreds of mappings of about 20 lines each. */
#define SMAPS_MAX_BYTES (16u << 20)
#define PIDFILE_MAX_BYTES 64

/* Whether line is a mapping's header ("START-END PERMS OFFSET DEV INODE [PATH]"): its range
 * into *start, *end and its permissions into perms (4 characters). */
static bool header(const char *line, uint64_t *start, uint64_t *end, char perms[5])
{
    char *p;
    errno = 0;
    unsigned long long s = strtoull(line, &p, 16);
    if (p == line || *p != '-')
        return false;
    const char *q = p + 1;
    unsigned long long e = strtoull(q, &p, 16);
    if (p == q || *p != ' ' || errno)
        return false;
    if (strlen(p + 1) < 5 || p[5] != ' ')
        return false;
    memcpy(perms, p + 1, 4);
    perms[4] = '\0';
    *start = s;
    *end = e;
    return true;
}

int bm_qemuproc_parse_smaps(const char *text, uint64_t ram_bytes, uint64_t *ret_bytes)
{
    uint64_t lo = ram_bytes / 4, hi = ram_bytes + BM_QEMUPROC_RAM_SLACK_BYTES;
    uint64_t best_size = 0, best_rss = 0;
    bool in_candidate = false, seen = false;
    uint64_t size = 0;
    unsigned lineno = 0;
    for (const char *line = text; line && *line; lineno++) {
        const char *nl = strchr(line, '\n');
        char buf[256];
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        snprintf(buf, sizeof(buf), "%.*s", (int)(len < sizeof(buf) ? len : sizeof(buf) - 1), line);
        line = nl ? nl + 1 : NULL;
        uint64_t start, end;
        char perms[5];
        if (header(buf, &start, &end, perms)) {
            seen = true;
            size = end > start ? end - start : 0;
            in_candidate = perms[0] == 'r' && perms[1] == 'w' && perms[2] != 'x' && size >= lo &&
                           size <= hi && size > best_size;
            continue;
        }
        if (!seen)
            return bm_error(-EINVAL, "line %u: not a mapping of smaps: '%s'", lineno + 1, buf);
        unsigned long long kb;
        if (in_candidate && sscanf(buf, "Rss: %llu kB", &kb) == 1) {
            if (kb > (UINT64_MAX >> 10))
                return bm_error(-EINVAL, "line %u: Rss %llu kB overflows", lineno + 1, kb);
            best_size = size;
            best_rss = (uint64_t)kb << 10;
            in_candidate = false;
        }
    }
    if (!best_size)
        return bm_error(-ENOENT, "no mapping of the guest's RAM (%" PRIu64 " MiB)", ram_bytes >> 20);
    *ret_bytes = best_rss;
    return 0;
}

int bm_qemuproc_pid(const char *run_dir, const char *name, pid_t *ret)
{
    if (!name || !*name || strchr(name, '/'))
        return bm_error(-EINVAL, "not a domain name for a pid file");
    _cleanup_free_ char *path = bm_asprintf("%s/%s.pid", run_dir, name);
    _cleanup_free_ char *buf = NULL;
    int r = bm_file_read(path, PIDFILE_MAX_BYTES, &buf, NULL);
    if (r < 0)
        return bm_error_prefix(r, "%s", path);
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    while (*end == '\n' || *end == ' ')
        end++;
    if (errno || end == buf || *end || v <= 0 || v > INT32_MAX)
        return bm_error(-EINVAL, "%s: not a PID", path);
    *ret = (pid_t)v;
    return 0;
}

int bm_qemuproc_ram_resident(const char *proc_dir, pid_t pid, uint64_t ram_bytes,
                             uint64_t *ret_bytes)
{
    _cleanup_free_ char *path = bm_asprintf("%s/%d/smaps", proc_dir ? proc_dir : "/proc", (int)pid);
    _cleanup_free_ char *buf = NULL;
    int r = bm_file_read_text(path, SMAPS_MAX_BYTES, &buf);
    if (r < 0)
        return r;
    r = bm_qemuproc_parse_smaps(buf, ram_bytes, ret_bytes);
    return r < 0 ? bm_error_prefix(r, "%s", path) : 0;
}
