#include "ksm.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "file.h"
#include "util.h"

int bm_ksm_parse_value(const char *text, bool allow_negative, int64_t *ret)
{
    const char *p = text;
    bool neg = false;
    if (allow_negative && *p == '-') {
        neg = true;
        p++;
    }
    if (!isdigit((unsigned char)*p))
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno || (*end && strcmp(end, "\n") != 0) || v > INT64_MAX)
        return -EINVAL;
    *ret = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

/* Reads dir/name into *ret. Returns 0, -ENOENT when the file is missing, or -errno with the
 * reason naming the file. */
static int read_value(const char *dir, const char *name, bool allow_negative, int64_t *ret)
{
    _cleanup_free_ char *path = bm_asprintf("%s/%s", dir, name);
    _cleanup_free_ char *buf = NULL;
    int r = bm_file_read(path, 64, &buf, NULL);
    if (r == -ENOENT)
        return r;
    if (r < 0)
        return bm_error_prefix(r, "%s", path);
    if (bm_ksm_parse_value(buf, allow_negative, ret) < 0) {
        char shown[80];
        buf[strcspn(buf, "\n")] = '\0';
        return bm_error(-EINVAL, "%s: '%s': not a number", path, bm_printable(buf, shown, sizeof(shown)));
    }
    return 0;
}

int bm_ksm_read(const char *dir, BmKsm *ret)
{
    long ps = sysconf(_SC_PAGESIZE);
    *ret = (BmKsm){.run = -1, .pages_sharing = BM_ABSENT, .pages_shared = BM_ABSENT,
                   .full_scans = BM_ABSENT, .page_size = ps > 0 ? (uint64_t)ps : 4096};
    if (!dir)
        dir = BM_KSM_DEFAULT_DIR;
    struct stat st;
    if (stat(dir, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        int r = -errno;
        return bm_error(r, "%s: %s", dir, strerror(-r));
    }
    if (!S_ISDIR(st.st_mode))
        return bm_error(-ENOTDIR, "%s: not a directory", dir);
    ret->present = true;

    static const struct {
        const char *name;
        size_t off;
    } counts[] = {
        {"pages_sharing", offsetof(BmKsm, pages_sharing)},
        {"pages_shared", offsetof(BmKsm, pages_shared)},
        {"full_scans", offsetof(BmKsm, full_scans)},
    };
    int64_t v;
    int r = read_value(dir, "run", false, &v);
    if (r < 0 && r != -ENOENT)
        return r;
    if (r == 0)
        ret->run = v > 2 ? -1 : (int)v;
    for (size_t i = 0; i < BM_ARRAY_SIZE(counts); i++) {
        r = read_value(dir, counts[i].name, false, &v);
        if (r < 0 && r != -ENOENT)
            return r;
        if (r == 0)
            *(uint64_t *)((char *)ret + counts[i].off) = (uint64_t)v;
    }
    r = read_value(dir, "general_profit", true, &v);
    if (r < 0 && r != -ENOENT)
        return r;
    if (r == 0) {
        ret->has_general_profit = true;
        ret->general_profit_bytes = v;
    }
    return 0;
}

uint64_t bm_ksm_saved_bytes(const BmKsm *k)
{
    if (!k->present || !bm_present(k->pages_sharing))
        return BM_ABSENT;
    return k->pages_sharing * k->page_size;
}

const char *bm_ksm_state_name(const BmKsm *k)
{
    if (!k->present)
        return "absent";
    switch (k->run) {
    case 0: return "off";
    case 1: return "running";
    case 2: return "unmerging";
    default: return "unknown";
    }
}

int bm_ksm_export(BmRegistry *r, const BmKsm *k)
{
    static const BmMetricFamily families[] = {
        {"balloonmgr_ksm_present", BM_METRIC_GAUGE, "1 when the kernel has KSM (/sys/kernel/mm/ksm)."},
        {"balloonmgr_ksm_state", BM_METRIC_GAUGE, "1 for KSM's current state (run): off, running, unmerging."},
        {"balloonmgr_ksm_shared_bytes", BM_METRIC_GAUGE, "Memory of the shared pages KSM keeps: pages_shared times the page size."},
        {"balloonmgr_ksm_full_scans_total", BM_METRIC_COUNTER, "Full scans KSM completed."},
        {"balloonmgr_ksm_saved_bytes", BM_METRIC_GAUGE, "Memory KSM saves: pages_sharing times the page size."},
        {"balloonmgr_ksm_general_profit_bytes", BM_METRIC_GAUGE,
         "KSM's saving minus its metadata (general_profit, Linux 6.4 and later)."},
    };
    int ok = bm_registry_declare_all(r, families, BM_ARRAY_SIZE(families));
    ok |= bm_registry_add(r, "balloonmgr_ksm_present", NULL, k->present ? 1 : 0);
    if (!k->present)
        return ok < 0 ? -EINVAL : 0;
    if (k->run >= 0 && k->run <= 2) {
        static const char *const states[] = {"off", "running", "unmerging"};
        for (int i = 0; i < 3; i++) {
            const char *l[] = {"state", states[i], NULL};
            ok |= bm_registry_add(r, "balloonmgr_ksm_state", l, i == k->run);
        }
    }
    if (bm_present(k->pages_shared))
        ok |= bm_registry_add(r, "balloonmgr_ksm_shared_bytes", NULL, (double)(k->pages_shared * k->page_size));
    if (bm_present(k->full_scans))
        ok |= bm_registry_add(r, "balloonmgr_ksm_full_scans_total", NULL, (double)k->full_scans);
    uint64_t saved = bm_ksm_saved_bytes(k);
    if (bm_present(saved))
        ok |= bm_registry_add(r, "balloonmgr_ksm_saved_bytes", NULL, (double)saved);
    if (k->has_general_profit)
        ok |= bm_registry_add(r, "balloonmgr_ksm_general_profit_bytes", NULL,
                              (double)k->general_profit_bytes);
    return ok < 0 ? -EINVAL : 0;
}
