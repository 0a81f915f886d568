/* What balloonmgr exports: the registry of every metric of docs/metrics.md, rendered from the
 * ledger (counters, histograms, per-domain records) and the current view (snapshot, host,
 * plan). Pure: no I/O. One registry serves /metrics, the textfile and the push. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "hostmem.h"
#include "ledger.h"
#include "metrics.h"
#include "snapshot.h"

/* The current view for the registry. Any pointer may be NULL (not known yet). */
typedef struct {
    const BmSnapshot *snap;
    const BmHost *host;
    bool have_mode;
    BmHostMode mode;
    uint64_t unmet_bytes;   /* with have_mode: the plan's unmet_bytes (0 unless reclaiming) */
    bool libvirt_up;
} BmView;

/* Fills r with every metric of docs/metrics.md. Returns 0 or -EINVAL (a bug: bad name). */
int bm_export_build(BmRegistry *r, const BmLedger *l, const BmView *v);
