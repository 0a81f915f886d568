/* One policy pass (docs/design.md), shared by `run --once` (timer) and `agent`:
 * read (host, snapshot) -> evaluate (plan) -> apply (start changes) -> observe (poll them) ->
 * export. The engine owns this pass's view (snapshot, host reading, plan, what applying did)
 * and the ledger; the caller owns the connection and the policy. Opaque: the verbs use the
 * functions below. */
#pragma once

#include <libvirt/libvirt.h>
#include <stdbool.h>

#include "balloon.h"
#include "host.h"
#include "hostmem.h"
#include "ksm.h"
#include "ledger.h"
#include "policy-eval.h"
#include "policy.h"
#include "snapshot.h"

/* What applying one decision did. */
typedef struct {
    bool attempted, applied;
    bool busy;        /* not attempted: a long libvirt job runs on the domain (error says which) */
    char error[256];
} BmApplied;

/* Where the last pass's time went (benchmarks): seconds of reading, deciding, applying, the
 * whole pass; CPU seconds of the pass; libvirt calls it made. */
typedef struct {
    double read_s, eval_s, apply_s, pass_s, cpu_s;
    unsigned long libvirt_calls;
} BmPassTiming;

typedef struct {
    const char *proc_dir;        /* NULL: /proc */
    bool dry_run;                /* decide, never change a balloon */
    bool probe_features;         /* ask the QEMU monitor for SG/ioeventfd of new domains */
    bool probe_later;            /* ... not in the reading: by bm_engine_probe() (and before a
                                  * domain's change, for its histogram label) */
    bool cache_xml;              /* keep balloon configs between passes (long-running agent) */
    bool timer;                  /* a pass of the timer (`run --once`): the next one comes the
                                  * policy's timer_interval later and nothing looks at the
                                  * guests in between (the agent looks every second) */
    bool log_decisions;          /* log each change the pass starts with its reason, and for a
                                  * domain left as it is its rule when that changed (the
                                  * agent: bm_log_decision()) */
    bool no_libvirt_duplicates;  /* metrics: leave out the per-domain series libvirt exporters
                                  * export too (BmView.no_libvirt_duplicates) */
    const BmHostOps *host;       /* the host the engine reads and acts on (host.h), copied; NULL:
                                  * the real one, bm_host_libvirt(proc_dir, qemu_run_dir) */
    const char *qemu_run_dir;    /* the real host's QEMU state directory (NAME.pid of each
                                  * running domain): QEMU's own memory measured per domain
                                  * (qemuproc.h); NULL: the connection's (bm_conn_qemu_run_dir()) */
} BmEngineOptions;

typedef struct BmEngine BmEngine;

BmEngine *bm_engine_new(const BmEngineOptions *o);
void bm_engine_free(BmEngine *e);
static inline void bm_engine_freep(BmEngine **e)
{
    bm_engine_free(*e);
}

/* The connection (NULL while there is none; the host's set_conn(); the changes in flight and
 * the reading's handles are dropped when it changes) and the policy; the caller keeps both
 * alive. */
void bm_engine_set_conn(BmEngine *e, virConnectPtr conn);
void bm_engine_set_policy(BmEngine *e, const BmPolicy *policy);

/* The ledger: loaded from / saved to the state file by the caller, spooled changes counted
 * into it. */
BmLedger *bm_engine_ledger(BmEngine *e);

/* Counts an error the caller met (reconnects, reloads, state saves ...). */
void bm_engine_count_error(BmEngine *e, BmErrorKind kind);

/* Every domain's XML is read again at the next reading (lifecycle/define events). */
void bm_engine_forget_xml(BmEngine *e);

/* One pass: reads host and domains, decides, starts the changes (unless dry_run), counts.
 * Per-domain failures are counted and reported in bm_engine_applied() and do not stop the
 * pass. Returns 0, or -errno when the host or the domains could not be read at all
 * (-ECONNRESET: the connection is lost). Logs the host's mode when it differs from the
 * previous pass's (bm_log_mode()). */
int bm_engine_pass(BmEngine *e);

/* The read and evaluate steps of a pass and nothing more (what `status` shows: the plan of a
 * dry-run pass with the same options): reads the host, KSM and the domains and decides; never
 * drains the per-CPU lists, starts no change whatever dry_run says, logs nothing, and notes
 * neither the mode nor the reading in the ledger (the reading is joined to it, as every
 * reading is). A host that cannot be read still has the domains read. Returns 0 (decided; with
 * no policy set, read and nothing decided), or -errno when nothing was decided: the domains
 * could not be read (bm_engine_snapshot() is the last reading, NULL on a new engine), the host
 * could not be read ("host memory: REASON"; bm_engine_host() is the last reading, NULL on a
 * new engine), or the host reading lacks what the policy needs. */
int bm_engine_evaluate(BmEngine *e);

/* Probes up to max running domains whose SG/ioeventfd verdict is not known yet (probe_later).
 * Returns how many are left to probe. */
size_t bm_engine_probe(BmEngine *e, size_t max);

/* Reads the domains again (after events) without deciding: keeps the view current. */
int bm_engine_refresh(BmEngine *e);

/* Reads every change in flight once and records those that ended, logging one record for each
 * (bm_log_change()). Returns how many are still in flight. */
size_t bm_engine_poll(BmEngine *e);

/* A virtio-mem device of the domain uuid changed size (the agent's MEMORY_DEVICE_SIZE_CHANGE
 * event): a change of ours in flight on it is read at the next poll (bm_tracker_nudge()). */
void bm_engine_vmem_changed(BmEngine *e, const char *uuid);

/* Stops the inflates of ours in flight that hurt their guest in the latest reading
 * (bm_policy_inflate_hurts(): its disk reads rose, it faults, swaps in or had an OOM kill since
 * the pass that started it) where their balloon is now, logging why: each ends as "stopped"
 * (bm_log_change()), and the refault rule then gives back what was taken. Never while the host
 * is near its own OOM. Returns how many were stopped. bm_engine_wait() does it after each
 * reading it takes; the agent after each reading of its guest watch. */
size_t bm_engine_stop_hurting(BmEngine *e);

/* Shows the changes in flight while bm_engine_wait() waits: progress(ctx, change) after every
 * reading of one that did not end it (NULL: nothing shown). */
void bm_engine_set_progress(BmEngine *e, void (*progress)(void *ctx, const BmTracked *t), void *ctx);

/* bm_engine_wait() ends early once *stop is set (a signal handler's flag); NULL: never. */
void bm_engine_set_stop(BmEngine *e, const volatile sig_atomic_t *stop);

/* How many changes are in flight. */
size_t bm_engine_in_flight(const BmEngine *e);

/* Polls until no change is in flight or timeout_s passed; while an inflate is in flight, reads
 * the domains again every second (bm_engine_refresh()) and stops those that hurt their guest
 * (bm_engine_stop_hurting()). Returns how many are still in flight. */
size_t bm_engine_wait(BmEngine *e, unsigned timeout_s);

/* The last pass's plan and what applying each decision did (same order), its host reading,
 * timing and wall-clock time (0: no pass yet). NULL before the first pass. */
const BmPlan *bm_engine_plan(const BmEngine *e);
const BmApplied *bm_engine_applied(const BmEngine *e);
const BmHost *bm_engine_host(const BmEngine *e);
/* The KSM reading of the latest reading, or NULL (none yet, or unreadable: then
 * *ret_error, if ret_error, says why; "" otherwise). */
const BmKsm *bm_engine_ksm(const BmEngine *e, const char **ret_error);
/* The latest reading of the domains, or NULL before the first. */
const BmSnapshot *bm_engine_snapshot(const BmEngine *e);
const BmPassTiming *bm_engine_timing(const BmEngine *e);
uint64_t bm_engine_pass_time_s(const BmEngine *e);

/* Whether the host's memory, read now (meminfo and PSI alone), is past the policy's reclaim
 * thresholds (bm_host_under_pressure()): the agent's host watch. False when it cannot be read. */
bool bm_engine_host_under_pressure(BmEngine *e);

/* Whether the last pass found the host reclaiming. */
bool bm_engine_reclaiming(const BmEngine *e);

/* Whether a running domain's balloon is below its maximum in the last reading (the agent's
 * guest watch has work). */
bool bm_engine_any_ballooned(const BmEngine *e);

/* Whether a ballooned guest balloonmgr manages is short of memory or under pressure in the last
 * reading (bm_policy_rows_in_need() on its rows). */
bool bm_engine_guest_in_need(BmEngine *e);

/* The exposition of everything (docs/metrics.md). Caller frees. */
char *bm_engine_render(BmEngine *e, bool libvirt_up);
