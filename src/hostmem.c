#include "hostmem.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "file.h"
#include "util.h"

/* Value in kB of "Key:   12345 kB" in meminfo text, or BM_ABSENT; -1 via *bad if malformed. */
static uint64_t meminfo_value(const char *text, const char *key, bool *bad)
{
    size_t klen = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, klen) != 0 || p[klen] != ':')
            continue;
        const char *v = p + klen + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        char *end = NULL;
        errno = 0;
        unsigned long long kb = strtoull(v, &end, 10);
        if (errno || end == v || *v == '-' || kb > UINT64_MAX / 1024) {
            *bad = true;
            return BM_ABSENT;
        }
        return (uint64_t)kb * 1024;
    }
    return BM_ABSENT;
}

int bm_hostmem_parse_meminfo(const char *text, BmHost *ret)
{
    bool bad = false;
    uint64_t total = meminfo_value(text, "MemTotal", &bad);
    uint64_t avail = meminfo_value(text, "MemAvailable", &bad);
    if (bad)
        return bm_error(-EINVAL, "malformed value");
    if (!bm_present(total))
        return bm_error(-EINVAL, "no MemTotal");
    if (!bm_present(avail)) {
        /* kernels before 3.14: estimate as MemFree + Cached, as free(1) did */
        uint64_t free_b = meminfo_value(text, "MemFree", &bad);
        uint64_t cached = meminfo_value(text, "Cached", &bad);
        if (!bad && bm_present(free_b))
            avail = free_b + (bm_present(cached) ? cached : 0);
    }
    ret->mem_total_bytes = total;
    ret->mem_available_bytes = avail;
    return 0;
}

/* Reads "avg10=1.23 avg60=..." of the line starting with kind ("some"/"full"). */
static int psi_line(const char *text, const char *kind, double *avg10, double *avg60, bool *found)
{
    size_t klen = strlen(kind);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, kind, klen) != 0 || p[klen] != ' ')
            continue;
        if (sscanf(p + klen, " avg10=%lf avg60=%lf", avg10, avg60) != 2 || *avg10 < 0 ||
            *avg10 > 100 || *avg60 < 0 || *avg60 > 100)
            return bm_error(-EINVAL, "malformed '%s' line", kind);
        *found = true;
        return 0;
    }
    return 0;
}

int bm_hostmem_parse_psi(const char *text, BmHost *ret)
{
    bool some = false, full = false;
    double s10 = 0, s60 = 0, f10 = 0, f60 = 0;
    int r = psi_line(text, "some", &s10, &s60, &some);
    if (r >= 0)
        r = psi_line(text, "full", &f10, &f60, &full);
    if (r < 0)
        return r;
    if (!some)
        return bm_error(-EINVAL, "no 'some' line");
    ret->psi_present = true;
    ret->psi_some_avg10 = s10;
    ret->psi_some_avg60 = s60;
    ret->psi_full_avg10 = full ? f10 : 0;
    ret->psi_full_avg60 = full ? f60 : 0;
    return 0;
}


int bm_hostmem_read(const char *proc_dir, BmHost *ret)
{
    *ret = (BmHost){.mem_total_bytes = BM_ABSENT, .mem_available_bytes = BM_ABSENT};
    const char *dir = proc_dir ? proc_dir : "/proc";
    _cleanup_free_ char *meminfo = bm_asprintf("%s/meminfo", dir);
    _cleanup_free_ char *psi = bm_asprintf("%s/pressure/memory", dir);
    _cleanup_free_ char *buf = NULL;

    int r = bm_file_read(meminfo, BM_HOSTMEM_FILE_MAX_BYTES, &buf, NULL);
    if (r < 0)
        return bm_error_prefix(r, "%s", meminfo);
    r = bm_hostmem_parse_meminfo(buf, ret);
    if (r < 0)
        return bm_error_prefix(r, "%s", meminfo);

    free(buf);
    buf = NULL;
    r = bm_file_read(psi, BM_HOSTMEM_FILE_MAX_BYTES, &buf, NULL);
    if (bm_file_not_regular(r) || r == -EFBIG)
        return bm_error_prefix(r, "%s", psi);
    if (r < 0 || bm_hostmem_parse_psi(buf, ret) < 0)
        ret->psi_present = false; /* missing (PSI off) or unreadable PSI is treated as absent */
    return 0;
}
