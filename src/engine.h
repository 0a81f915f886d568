/* The pipeline of one policy pass (DESIGN.md), shared by `run` (timer) and `agent`:
 * snapshot -> decide -> apply -> observe -> count, and the registry of what it saw.
 * The engine owns its view (last snapshot, host reading, plan), the changes in flight and the
 * cumulative counters; the caller owns the connection and the policy. */
#pragma once

#include <libvirt/libvirt.h>
#include <stdbool.h>

#include "balloon.h"
#include "export.h"
#include "hostmem.h"
#include "ksm.h"
#include "policy-eval.h"
#include "policy.h"
#include "snapshot.h"

/* What applying one decision did. */
typedef struct {
    bool attempted, applied;
    bool busy;        /* not attempted: a long libvirt job runs on the domain (error says which) */
    char error[256];
} BmApplied;

typedef struct {
    /* set by the caller */
    virConnectPtr conn;          /* may change between calls (reconnects) */
    const BmPolicy *policy;
    const char *proc_dir;        /* NULL: /proc */
    bool dry_run;
    bool probe_features;         /* ask the QEMU monitor for SG/ioeventfd of new domains */
    bool cache_xml;              /* keep balloon configs between passes (long-running agent) */
    bool xml_stale;              /* set on lifecycle/define events: read every XML again */

    /* the view, after bm_engine_pass() / bm_engine_refresh() */
    BmSnapshot snap;
    bool have_snap;
    BmHost host;
    bool have_host;
    BmKsm ksm;                   /* read with the host; exported as balloonmgr_ksm_* */
    bool have_ksm;
    BmPlan plan;
    bool have_plan;
    BmApplied *applied;          /* per decision of plan */
    uint64_t pass_now_s;
    /* the last pass, for benchmarks: seconds of reading, deciding, applying; CPU seconds of
     * the whole pass; libvirt calls it made */
    double t_read_s, t_eval_s, t_apply_s, t_cpu_s;
    unsigned long pass_calls;

    /* across passes */
    BmPrevious prev;
    BmCounters counters;
    BmTracker tracker;
} BmEngine;

/* Initialises e (counters zero, tracker with the default wait options). */
void bm_engine_init(BmEngine *e);
void bm_engine_clear(BmEngine *e);

/* One pass: reads host and domains, decides, starts the changes (unless dry_run), counts.
 * Per-domain failures are counted and reported in e->applied and do not stop the pass.
 * Returns 0, or -errno when the host or the domains could not be read at all (-ECONNRESET:
 * the connection is lost). Logs the host's mode when it differs from the previous pass's
 * (bm_log_mode()). */
int bm_engine_pass(BmEngine *e);

/* Reads the domains again (after events) without deciding: keeps the view current. */
int bm_engine_refresh(BmEngine *e);

/* Reads every change in flight once and counts those that ended, logging one record for each
 * (bm_log_change()). Returns how many are still in flight. */
size_t bm_engine_poll(BmEngine *e);

/* Polls until no change is in flight or timeout_s passed (0: do not wait). Returns how many are
 * still in flight. */
size_t bm_engine_wait(BmEngine *e, unsigned timeout_s);

/* The exposition of everything (docs/metrics.md). Caller frees. */
char *bm_engine_render(const BmEngine *e, bool libvirt_up);
