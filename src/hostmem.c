#include "hostmem.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "file.h"
#include "util.h"

/* The line number (from 1) of p in text. */
static unsigned line_of(const char *text, const char *p)
{
    unsigned n = 1;
    for (const char *c = text; c < p; c++)
        n += *c == '\n';
    return n;
}

/* The start of KEY's value in meminfo text (after "Key:" and its blanks), NULL when the key is
 * absent; *line: where its line starts. */
static const char *meminfo_find(const char *text, const char *key, const char **line)
{
    size_t klen = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, klen) != 0 || p[klen] != ':')
            continue;
        const char *v = p + klen + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        *line = p;
        return v;
    }
    return NULL;
}

/* The decimal number of the first DIGITS characters of v into *ret; false when there are none,
 * more than 20 or it overflows. */
static bool meminfo_decimal(const char *v, size_t digits, uint64_t *ret)
{
    uint64_t n = 0;
    for (size_t i = 0; i < digits; i++)
        if (__builtin_mul_overflow(n, 10, &n) || __builtin_add_overflow(n, (uint64_t)(v[i] - '0'), &n))
            return false;
    *ret = n;
    return digits > 0 && digits <= 20;
}

/* Value in bytes of "Key:   12345 kB" in meminfo text, or BM_ABSENT when the key is absent;
 * -EINVAL with the reason (naming the line) when the value is not decimal digits and " kB". */
static int meminfo_value(const char *text, const char *key, uint64_t *ret)
{
    const char *line, *v = meminfo_find(text, key, &line);
    *ret = BM_ABSENT;
    if (!v)
        return 0;
    size_t digits = strspn(v, "0123456789");
    const char *unit = v + digits;
    bool unit_ok = !strncmp(unit, " kB", 3) && (unit[3] == '\n' || unit[3] == '\0');
    uint64_t kb;
    if (!unit_ok || !meminfo_decimal(v, digits, &kb) || kb > UINT64_MAX / 1024) {
        char shown[40], q[48];
        size_t eol = strcspn(v, "\n");
        snprintf(shown, sizeof(shown), "%.*s", (int)(eol > 32 ? 32 : eol), v);
        return bm_error(-EINVAL, "line %u: %s: '%s' is not a number of kB", line_of(text, line), key,
                        bm_printable(shown, q, sizeof(q)));
    }
    *ret = kb * 1024;
    return 0;
}

/* A count of "Key:   12345" (no unit: HugePages_Total, HugePages_Free) in meminfo text, 0 when
 * the key is absent; -EINVAL naming the line when the value is not decimal digits. */
static int meminfo_count(const char *text, const char *key, uint64_t *ret)
{
    const char *line, *v = meminfo_find(text, key, &line);
    *ret = 0;
    if (!v)
        return 0;
    size_t digits = strspn(v, "0123456789");
    if (!meminfo_decimal(v, digits, ret) || (v[digits] != '\n' && v[digits] != '\0'))
        return bm_error(-EINVAL, "line %u: %s is not a count", line_of(text, line), key);
    return 0;
}

/* The default size's huge-page pool of meminfo text into ret (0: none). */
static int parse_hugepages(const char *text, BmHost *ret)
{
    uint64_t total, free_n, size;
    int r = meminfo_count(text, "HugePages_Total", &total);
    if (r == 0)
        r = meminfo_count(text, "HugePages_Free", &free_n);
    if (r == 0)
        r = meminfo_value(text, "Hugepagesize", &size);
    if (r < 0)
        return r;
    ret->hugepages_total_bytes = ret->hugepages_free_bytes = 0;
    if (!bm_present(size) || size == 0 || free_n > total || total > BM_COUNT_MAX / size)
        return 0;
    ret->hugepages_total_bytes = total * size;
    ret->hugepages_free_bytes = free_n * size;
    return 0;
}

int bm_hostmem_parse_meminfo(const char *text, BmHost *ret)
{
    uint64_t total, avail;
    int r = meminfo_value(text, "MemTotal", &total);
    if (r == 0)
        r = meminfo_value(text, "MemAvailable", &avail);
    if (r < 0)
        return r;
    if (!bm_present(total))
        return bm_error(-EINVAL, "no MemTotal");
    if (total == 0)
        return bm_error(-EINVAL, "MemTotal is 0");
    if (!bm_present(avail)) {
        /* kernels before 3.14: estimate as MemFree + Cached, as free(1) did */
        uint64_t free_b, cached;
        r = meminfo_value(text, "MemFree", &free_b);
        if (r == 0)
            r = meminfo_value(text, "Cached", &cached);
        if (r < 0)
            return r;
        if (bm_present(free_b))
            avail = free_b + (bm_present(cached) ? cached : 0);
        if (bm_present(avail) && avail > total)
            avail = total; /* an estimate: Cached may count more than can be freed */
    }
    if (bm_present(avail) && avail > total) {
        const char *p = strstr(text, "MemAvailable:");
        return bm_error(-EINVAL, "line %u: MemAvailable %" PRIu64 " kB is above MemTotal %" PRIu64
                        " kB", p ? line_of(text, p) : 0, avail / 1024, total / 1024);
    }
    ret->mem_total_bytes = total;
    ret->mem_available_bytes = avail;
    return parse_hugepages(text, ret);
}

/* A PSI average: decimal digits, optionally a point and more digits (what the kernel prints:
 * "12.34"); no sign, exponent, hex, nan or inf. Returns the end, or NULL. */
static const char *psi_number(const char *s, double *ret)
{
    size_t i = strspn(s, "0123456789");
    if (i == 0 || i > 3)
        return NULL;
    if (s[i] == '.') {
        size_t f = strspn(s + i + 1, "0123456789");
        if (f == 0 || f > 6)
            return NULL;
        i += 1 + f;
    }
    char buf[16];
    memcpy(buf, s, i);
    buf[i] = '\0';
    *ret = strtod(buf, NULL);
    return s + i;
}

/* Reads "avg10=1.23 avg60=..." of the line starting with kind ("some"/"full"). */
static int psi_line(const char *text, const char *kind, double *avg10, double *avg60, bool *found)
{
    size_t klen = strlen(kind);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, kind, klen) != 0 || p[klen] != ' ')
            continue;
        const char *e = NULL;
        if (!strncmp(p + klen, " avg10=", 7) && (e = psi_number(p + klen + 7, avg10)) &&
            !strncmp(e, " avg60=", 7))
            e = psi_number(e + 7, avg60);
        else
            e = NULL;
        if (!e || (*e != ' ' && *e != '\n' && *e != '\0') || *avg10 > 100 || *avg60 > 100)
            return bm_error(-EINVAL, "line %u: malformed '%s' line (want avg10=N.NN avg60=N.NN, "
                            "0 to 100)", line_of(text, p), kind);
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
    *ret = (BmHost){.mem_total_bytes = BM_ABSENT, .mem_available_bytes = BM_ABSENT,
                    .percpu_free_bytes = BM_ABSENT, .percpu_rest_bytes = BM_ABSENT};
    const char *dir = proc_dir ? proc_dir : "/proc";
    _cleanup_free_ char *meminfo = bm_asprintf("%s/meminfo", dir);
    _cleanup_free_ char *psi = bm_asprintf("%s/pressure/memory", dir);
    _cleanup_free_ char *buf = NULL;

    int r = bm_file_read_text(meminfo, BM_HOSTMEM_FILE_MAX_BYTES, &buf);
    if (r < 0)
        return r;
    r = bm_hostmem_parse_meminfo(buf, ret);
    if (r < 0)
        return bm_error_prefix(r, "%s", meminfo);

    free(buf);
    buf = NULL;
    r = bm_file_read_text(psi, BM_HOSTMEM_FILE_MAX_BYTES, &buf);
    if (bm_file_not_regular(r) || r == -EFBIG || r == -EINVAL)
        return r;
    if (r < 0) {
        bm_error_reset();
        return 0; /* missing (PSI off) or unreadable PSI: absent */
    }
    r = bm_hostmem_parse_psi(buf, ret);
    if (r < 0) {
        ret->psi_present = false;
        return bm_error_prefix(r, "%s", psi); /* NaN or garbage is no reading: refused */
    }
    return 0;
}

/* The number after "key:" at the start of a zoneinfo line (after its indent), in *ret; 1 when
 * the line is such a line, 0 when it is another, -EINVAL when its value is not a number. */
static int zoneinfo_value(const char *text, const char *line, const char *key, uint64_t *ret)
{
    const char *p = line + strspn(line, " \t");
    size_t klen = strlen(key);
    if (strncmp(p, key, klen) != 0 || p[klen] != ':')
        return 0;
    p += klen + 1;
    p += strspn(p, " \t");
    size_t digits = strspn(p, "0123456789");
    uint64_t v = 0;
    bool overflow = digits == 0 || digits > 19;
    for (size_t i = 0; i < digits && !overflow; i++)
        overflow = __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(p[i] - '0'), &v);
    if (overflow || (p[digits] != '\n' && p[digits] != '\0' && p[digits] != ' '))
        return bm_error(-EINVAL, "line %u: %s: not a number of pages", line_of(text, line), key);
    *ret = v;
    return 1;
}

int bm_hostmem_parse_zoneinfo(const char *text, uint64_t page_bytes, BmHost *ret)
{
    uint64_t free_pages = 0, rest_pages = 0;
    bool have_free = false, have_rest = false, in_pagesets = false;
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (!strncmp(l, "Node ", 5)) { /* a zone: its pagesets follow its counters */
            in_pagesets = false;
            continue;
        }
        const char *p = l + strspn(l, " \t");
        if (!strncmp(p, "pagesets", 8) && (p[8] == '\n' || p[8] == '\0')) {
            in_pagesets = true;
            continue;
        }
        if (!in_pagesets)
            continue;
        uint64_t v;
        int r = zoneinfo_value(text, l, "count", &v);
        if (r > 0) {
            have_free = true;
            if (__builtin_add_overflow(free_pages, v, &free_pages))
                return bm_error(-EINVAL, "line %u: count: the sum overflows", line_of(text, l));
            continue;
        }
        if (r == 0)
            r = zoneinfo_value(text, l, "high_min", &v);
        if (r < 0)
            return r;
        if (r > 0) {
            have_rest = true;
            if (__builtin_add_overflow(rest_pages, v, &rest_pages))
                return bm_error(-EINVAL, "line %u: high_min: the sum overflows", line_of(text, l));
        }
    }
    uint64_t fb, rb;
    if ((have_free && __builtin_mul_overflow(free_pages, page_bytes, &fb)) ||
        (have_rest && __builtin_mul_overflow(rest_pages, page_bytes, &rb)))
        return bm_error(-EINVAL, "the per-CPU lists' pages overflow 64 bits of bytes");
    ret->percpu_free_bytes = have_free ? fb : BM_ABSENT;
    ret->percpu_rest_bytes = have_rest ? rb : BM_ABSENT;
    return 0;
}

int bm_hostmem_read_percpu(const char *proc_dir, BmHost *ret)
{
    ret->percpu_free_bytes = ret->percpu_rest_bytes = BM_ABSENT;
    _cleanup_free_ char *path = bm_asprintf("%s/zoneinfo", proc_dir ? proc_dir : "/proc");
    _cleanup_free_ char *buf = NULL;
    int r = bm_file_read_text(path, BM_HOSTMEM_ZONEINFO_MAX_BYTES, &buf);
    if (r < 0)
        return r;
    long page = sysconf(_SC_PAGESIZE);
    r = bm_hostmem_parse_zoneinfo(buf, page > 0 ? (uint64_t)page : 4096, ret);
    if (r < 0) {
        ret->percpu_free_bytes = ret->percpu_rest_bytes = BM_ABSENT;
        return bm_error_prefix(r, "%s", path);
    }
    return 0;
}

uint64_t bm_hostmem_percpu_excess(const BmHost *h)
{
    if (!bm_present(h->percpu_free_bytes) || !bm_present(h->percpu_rest_bytes) ||
        h->percpu_free_bytes <= h->percpu_rest_bytes)
        return 0;
    return h->percpu_free_bytes - h->percpu_rest_bytes;
}

#define DRAIN_DONE_BYTES (16ull * 1024 * 1024)
#define DRAIN_MAX_WRITES 4096
#define DRAIN_MAX_NS 1000000000ull
#define DRAIN_STALLS 3

int bm_hostmem_drain_percpu(const char *proc_dir, BmHost *h, uint64_t *ret_drained_bytes)
{
    *ret_drained_bytes = 0;
    _cleanup_free_ char *path = bm_asprintf("%s/sys/vm/stat_refresh", proc_dir ? proc_dir : "/proc");
    uint64_t first = h->percpu_free_bytes, lowest = first, t0 = bm_now_mono_ns();
    int writes = 0, stalls = 0;
    while (bm_hostmem_percpu_excess(h) > DRAIN_DONE_BYTES && writes < DRAIN_MAX_WRITES &&
           stalls < DRAIN_STALLS && bm_now_mono_ns() - t0 < DRAIN_MAX_NS) {
        /* no O_CREAT: a /proc without the file is no place to make one; no symlink followed;
         * never blocks (a FIFO without a reader would block open() for ever, holding the
         * state lock): O_NONBLOCK, and only a regular file (as procfs shows it) is written */
        int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0 && errno == ENXIO)
            return bm_error(-ENODEV, "%s: is a FIFO, not the kernel's file", path);
        if (fd < 0)
            return bm_error(-errno, "%s: %s", path, strerror(errno));
        struct stat st = {0};
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
            int e = errno;
            close(fd);
            if (!st.st_mode)
                return bm_error(-e, "%s: %s", path, strerror(e));
            return bm_error(-ENODEV, "%s: is %s, not the kernel's file", path, bm_file_kind(st.st_mode));
        }
        ssize_t n = write(fd, "1\n", 2);
        int e = errno;
        close(fd);
        if (n < 0)
            return bm_error(-e, "%s: %s", path, strerror(e));
        writes++;
        int r = bm_hostmem_read_percpu(proc_dir, h);
        if (r < 0)
            return r;
        if (h->percpu_free_bytes < lowest) {
            lowest = h->percpu_free_bytes;
            stalls = 0;
        } else {
            stalls++;
        }
    }
    *ret_drained_bytes = first > lowest ? first - lowest : 0;
    return writes;
}

const char *bm_host_mode_name(BmHostMode m)
{
    switch (m) {
    case BM_HOST_HOLD: return "hold";
    case BM_HOST_RECLAIM: return "reclaim";
    case BM_HOST_RELEASE: return "release";
    }
    return "?";
}

const char *bm_hostmem_read_boot_id(const char *proc_dir, char *buf, size_t n)
{
    _cleanup_free_ char *path = bm_asprintf("%s/sys/kernel/random/boot_id", proc_dir ? proc_dir : "/proc");
    _cleanup_free_ char *text = NULL;
    if (bm_file_read(path, BM_HOSTMEM_FILE_MAX_BYTES, &text, NULL) < 0 || !text[0] || text[0] == '\n') {
        bm_error_reset();
        snprintf(buf, n, "-");
        return buf;
    }
    text[strcspn(text, "\n")] = '\0';
    snprintf(buf, n, "%s", text);
    return buf;
}
