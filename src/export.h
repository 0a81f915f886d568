/* What balloonmgr exports: the cumulative counters and latency histograms of balloon changes,
 * and the registry of every metric of docs/metrics.md built from them plus the current view
 * (snapshot, host, plan). Pure: no I/O. One registry serves /metrics, the textfile and the push. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "balloon.h"
#include "feature.h"
#include "hostmem.h"
#include "metrics.h"
#include "policy-eval.h"
#include "snapshot.h"
#include "yield.h"

enum { BM_DIR_INFLATE, BM_DIR_DEFLATE, BM_DIR_COUNT };
enum { BM_SGL_NEGOTIATED, BM_SGL_NOT_NEGOTIATED, BM_SGL_UNKNOWN, BM_SGL_COUNT };
enum { BM_OUT_REACHED, BM_OUT_TIMEOUT, BM_OUT_STALLED, BM_OUT_FAILED, BM_OUT_COUNT };
typedef enum {
    BM_ERR_LIBVIRT,
    BM_ERR_APPLY,
    BM_ERR_HOST,
    BM_ERR_STATE,
    BM_ERR_POLICY,
    BM_ERR_PUSH,
    BM_ERR_WEB_CONFIG, /* a web config that could not be (re)loaded or applied */
    BM_ERR_COUNT
} BmErrorKind;

/* The label values of the enums above in the metrics, also the keys of the state file. */
extern const char *const bm_dir_names[BM_DIR_COUNT];
extern const char *const bm_sg_label_names[BM_SGL_COUNT];
extern const char *const bm_outcome_names[BM_OUT_COUNT];
extern const char *const bm_error_kind_names[BM_ERR_COUNT];

/* What balloonmgr remembers of one domain between passes (by UUID). */
typedef struct {
    char uuid[40];
    char name[256];
    uint64_t last_target_bytes;    /* BM_ABSENT until balloonmgr set one */
    double last_duration_s;        /* < 0: none yet */
    int last_direction;            /* BM_DIR_*, -1 none */
    uint64_t last_rss_drop_bytes;  /* BM_ABSENT: none yet */
    bool unresponsive;             /* last change stalled or timed out */
    uint64_t unresponsive_actual;  /* balloon when it was marked */
    uint64_t unresponsive_until_s; /* not re-targeted before this time */
    bool features_known;           /* sg/ioeventfd below were probed */
    BmFeatureState sg;
    BmSwitchState ioeventfd;
    bool seen;                     /* in the latest snapshot (records of gone domains are dropped) */
    bool balloon_cached;           /* balloon below was read from the XML (agent cache) */
    BmBalloonConfig balloon;
    BmYield yield;                 /* what its inflates gave the host back (policy input) */
} BmDomainRecord;

typedef struct {
    BmHistogram latency[BM_DIR_COUNT][BM_SGL_COUNT];
    uint64_t changes[BM_DIR_COUNT][BM_OUT_COUNT];
    uint64_t target_changes[BM_DIR_COUNT];
    uint64_t passes;
    uint64_t errors[BM_ERR_COUNT];
    uint64_t rss_dropped_bytes;
    double last_pass_duration_s;   /* < 0: none yet */
    uint64_t last_success_s;       /* 0: never */
    BmDomainRecord *domains;
    size_t n_domains;
    /* index of domains by UUID: open addressing, slot = index + 1 (0 empty) */
    size_t *slots;
    size_t n_slots;
} BmCounters;

/* How long an unresponsive domain is left alone unless its balloon moves. */
#define BM_UNRESPONSIVE_HOLDOFF_S 600

void bm_counters_init(BmCounters *c);
void bm_counters_clear(BmCounters *c);

/* The record of a domain, added if new. O(1). */
BmDomainRecord *bm_counters_domain(BmCounters *c, const char *uuid, const char *name);

/* The record of a domain, or NULL. O(1). */
const BmDomainRecord *bm_counters_find(const BmCounters *c, const char *uuid);

/* Counts a target set by a pass. */
void bm_counters_record_target(BmCounters *c, const char *uuid, const char *name,
                               uint64_t from_bytes, uint64_t target_bytes);

/* Counts a change that ended: histogram (reached only), outcome counter, last duration, RSS
 * drop of inflates and what the domain's inflates yield (bm_yield_learn()), unresponsive
 * marking (stalled/timeout) at now_s. */
void bm_counters_record_change(BmCounters *c, const BmTracked *t, uint64_t now_s);

/* Marks records not in snap as gone and drops them; clears unresponsive marks whose balloon
 * moved or whose hold-off passed. */
void bm_counters_sync(BmCounters *c, const BmSnapshot *snap, uint64_t now_s);

/* "negotiated", "not_negotiated", "unknown": the histogram label of a verdict. */
const char *bm_sg_label(BmFeatureState s, bool known);

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
int bm_export_build(BmRegistry *r, const BmCounters *c, const BmView *v);
