/* Kernel samepage merging (KSM): what /sys/kernel/mm/ksm says it saves, to be seen beside
 * what the balloons reclaim. The reader takes the directory so tests can feed a fake one. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "metrics.h"

#define BM_KSM_DEFAULT_DIR "/sys/kernel/mm/ksm"

typedef struct {
    bool present;              /* the directory exists (a kernel with CONFIG_KSM) */
    int run;                   /* run: 0 stopped, 1 merging, 2 unmerging; -1 unknown */
    uint64_t pages_sharing;    /* pages mapped to a shared page: the pages saved */
    uint64_t pages_shared;     /* shared pages in use */
    uint64_t full_scans;       /* completed scans of all mergeable areas */
    bool has_general_profit;   /* general_profit exists (Linux 6.4 and later) */
    int64_t general_profit_bytes; /* saved minus KSM's own metadata; may be negative */
    uint64_t page_size;        /* bytes of a page */
} BmKsm;

/* Parses the text of one KSM file (a decimal, optionally signed when allow_negative, then an
 * optional newline). Returns 0 or -EINVAL. */
int bm_ksm_parse_value(const char *text, bool allow_negative, int64_t *ret);

/* Reads dir/run, pages_sharing, pages_shared, full_scans and general_profit (dir NULL:
 * /sys/kernel/mm/ksm). A missing dir is not an error (present false: a kernel without KSM);
 * a missing general_profit neither (has_general_profit false). Values unknown are BM_ABSENT.
 * Returns 0, or -errno with the reason naming the file when a present file cannot be read or
 * parsed. */
int bm_ksm_read(const char *dir, BmKsm *ret);

/* Memory KSM saves: pages_sharing times the page size; BM_ABSENT when not known. */
uint64_t bm_ksm_saved_bytes(const BmKsm *k);

/* "off", "running", "unmerging", "unknown" (run), or "absent" for a kernel without KSM. */
const char *bm_ksm_state_name(const BmKsm *k);

/* Adds the balloonmgr_ksm_* families and their samples (docs/metrics.md) to r: nothing but
 * balloonmgr_ksm_present 0 for a kernel without KSM. Returns 0 or -EINVAL (a bug). */
int bm_ksm_export(BmRegistry *r, const BmKsm *k);
