/* What balloonmgr exports: the registry of every metric of docs/metrics.md, rendered from the
 * ledger (counters, histograms, per-domain records) and the current view (snapshot, host,
 * plan). Pure: no I/O. One registry serves /metrics, the textfile and the push. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "hostmem.h"
#include "ledger.h"
#include "metrics.h"
#include "policy-eval.h"
#include "row.h"
#include "snapshot.h"

/* The current view for the registry. Any pointer may be NULL (not known yet). */
typedef struct {
    const BmSnapshot *snap;
    /* snap's rows (the engine's): each domain with its ledger entry and its decision in the
     * last plan; the domains are exported from them (NULL: none) */
    const BmRows *rows;
    const BmHost *host;
    bool have_mode;
    BmHostMode mode;
    bool libvirt_up;
    /* leave out the per-domain series that libvirt exporters export too (export.c's rows
     * marked LIBVIRT_DUP: maximum, balloon current, the guest's memory statistics, RSS, disk
     * reads) */
    bool no_libvirt_duplicates;
    /* the last pass's plan: what the host needs, what is planned, what is unmet, which guests
     * are short of memory (NULL before the first pass) */
    const BmPlan *plan;
} BmView;

/* Fills r with every metric of docs/metrics.md. Returns 0 or -EINVAL (a bug: bad name). */
int bm_export_build(BmRegistry *r, const BmLedger *l, const BmView *v);
