#include "engine.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "balloon.h"
#include "conn.h"
#include "error.h"
#include "export.h"
#include "log.h"
#include "size.h"
#include "util.h"

struct BmEngine {
    BmEngineOptions opts;
    BmHostOps hw;             /* the host it reads and acts on (host.h) */
    const BmClock *clock;     /* the host's clock, or NULL: the system's */
    virConnectPtr conn;
    const BmPolicy *policy;
    bool xml_stale;
    char boot_id[40];   /* the host's, read once (its boot_id()) */
    BmLedger ledger;    /* what is remembered of each domain */
    BmTracker changes;  /* the changes of ours in flight, with their domain references */
    /* this pass's view */
    BmSnapshot snap;
    bool have_snap;
    BmRows rows;        /* one per domain of snap: its reading, ledger entry and rules */
    BmHost host;
    bool have_host;
    bool drain_due;     /* an inflate of ours ended since the last reading of the host */
    bool drain_warned;  /* a failed drain was logged (once per engine) */
    bool qemu_warned;   /* a failed measure of QEMU's own memory was logged (once per engine) */
    BmKsm ksm;          /* read with the host; exported as balloonmgr_ksm_* */
    bool have_ksm;
    char ksm_error[512]; /* why it could not be read ("": it could) */
    BmPlan plan;
    bool have_plan;
    uint64_t plan_gen;  /* the plan's number: a ledger entry keeps its decision's index in it */
    BmApplied *applied; /* per decision of plan */
    uint64_t pass_now_s;
    BmPassTiming timing;
};

BmEngine *bm_engine_new(const BmEngineOptions *o)
{
    BmEngine *e = bm_malloc0(sizeof(*e));
    e->opts = *o;
    e->hw = o->host ? *o->host : bm_host_libvirt(o->proc_dir, o->qemu_run_dir);
    e->clock = e->hw.clock;
    e->hw.boot_id(e->hw.ctx, e->boot_id, sizeof(e->boot_id));
    bm_ledger_init(&e->ledger);
    e->changes.opts = bm_wait_options_default();
    e->changes.opts.clock = e->clock;
    e->changes.ops = e->hw.balloon;
    return e;
}

static void clear_view(BmEngine *e)
{
    bm_rows_clear(&e->rows);
    if (e->have_snap)
        bm_snapshot_clear(&e->snap);
    e->have_snap = false;
}

static void clear_plan(BmEngine *e)
{
    if (e->have_plan)
        bm_plan_clear(&e->plan);
    free(e->applied);
    e->applied = NULL;
    e->have_plan = false;
    bm_plan_link(NULL, &e->rows);
}

void bm_engine_free(BmEngine *e)
{
    if (!e)
        return;
    clear_plan(e);
    clear_view(e);
    bm_tracker_clear(&e->changes);
    bm_ledger_clear(&e->ledger);
    if (e->hw.free)
        e->hw.free(e->hw.ctx);
    free(e);
}

/* Forgets the changes in flight (the connection they were made on is gone). */
static void drop_changes(BmEngine *e)
{
    for (size_t i = 0; i < e->changes.n_items; i++)
        bm_ledger_record_dropped(e->changes.items[i].owner);
    bm_tracker_clear(&e->changes);
}

void bm_engine_set_conn(BmEngine *e, virConnectPtr conn)
{
    if (conn != e->conn) {
        drop_changes(e);
        if (e->have_snap)
            bm_snapshot_drop_handles(&e->snap); /* the old connection's */
    }
    e->conn = conn;
    e->hw.set_conn(e->hw.ctx, conn);
}

void bm_engine_set_policy(BmEngine *e, const BmPolicy *policy)
{
    if (policy != e->policy)
        bm_rows_set_policy(&e->rows, policy);
    e->policy = policy;
}

BmLedger *bm_engine_ledger(BmEngine *e)
{
    return &e->ledger;
}

void bm_engine_count_error(BmEngine *e, BmErrorKind kind)
{
    bm_ledger_count_error(&e->ledger, kind);
}

void bm_engine_forget_xml(BmEngine *e)
{
    e->xml_stale = true;
}

/* SG/ioeventfd of the running domain of row, not probed yet (once per start), into its entry. */
static void probe_one(BmEngine *e, const BmRow *row)
{
    BmLedgerEntry *rec = row->entry;
    BmFeatureReport rep;
    char path[sizeof(rec->qom_path)] = "";
    if (e->hw.probe(e->hw.ctx, row->dom, &rep, path, sizeof(path)) < 0) {
        bm_error_reset();
        return;
    }
    const BmFeatureVerdict *sg = &rep.feature[BM_FEATURE_SG];
    rec->sg = sg->state;
    rec->ioeventfd = rep.ioeventfd;
    rec->reporting = rep.feature[BM_FEATURE_REPORTING].state;
    rec->deflate_on_oom = rep.feature[BM_FEATURE_DEFLATE_ON_OOM].state;
    /* a guest still booting (driver not ready) is asked again at the next reading; any other
     * verdict, unknown ones included (no monitor), stands until the domain restarts */
    rec->features_known = !sg->not_ready;
    if (path[0])
        snprintf(rec->qom_path, sizeof(rec->qom_path), "%s", path);
}

/* Whether the policy's verify_features has the QEMU monitor asked about the running domain of
 * row (a monitor command taints the domain in libvirt): auto only for domains whose XML sets
 * the balloon's sg/ioeventfd; never a domain the policy excludes (not touched at all). */
static bool wants_probe(const BmEngine *e, const BmRow *row)
{
    const BmDomain *d = row->dom;
    if (!e->opts.probe_features || !d->active)
        return false;
    BmVerifyFeatures v = e->policy ? e->policy->verify_features : BM_VERIFY_AUTO;
    return bm_verify_features_asks(v, d->balloon_known, d->balloon.features_overridden) &&
           !row->rules.exclude;
}

/* Linux 6.12's starvation statistics of the running domain of row, where verify_features lets
 * the monitor be asked (the same rule as the probe): one qom-get of guest-stats a reading, and
 * an x-query-virtio once per start for the balloon's path. A failure leaves them absent
 * (logged once per start; a domain that stopped or a driver without monitor is not logged). */
static void read_starve(BmEngine *e, const BmRow *row)
{
    BmDomain *d = row->dom;
    BmLedgerEntry *rec = row->entry;
    if (!wants_probe(e, row) || d->state != VIR_DOMAIN_RUNNING ||
        (d->balloon_known && !d->balloon.present))
        return;
    int r = e->hw.read_starve(e->hw.ctx, d, rec->qom_path, sizeof(rec->qom_path), &d->starve);
    if (r < 0) {
        d->starve = BM_STARVE_STATS_ABSENT;
        rec->qom_path[0] = '\0'; /* looked up again at the next reading */
        bool quiet = r == -ENOTSUP || r == -ESRCH || r == -ENOTCONN;
        if (!rec->starve_warned && !quiet) {
            /* the name and QEMU's text escaped once, as log.c's records (util.h) */
            _cleanup_free_ char *name = bm_escape_quoted(d->name);
            _cleanup_free_ char *why = bm_escape_name(bm_error_detail(r));
            bm_log(LOG_WARNING, "balloonmgr: cannot read the starvation statistics of domain '%s' "
                   "through the QEMU monitor (logged once per start): %s", name, why);
        }
        rec->starve_warned |= !quiet;
        bm_error_reset();
    }
}

size_t bm_engine_probe(BmEngine *e, size_t max)
{
    size_t left = 0;
    const BmRows *rs = &e->rows;
    for (size_t i = 0; e->opts.probe_features && e->have_snap && i < rs->n_rows; i++) {
        const BmRow *row = &rs->rows[i];
        BmLedgerEntry *rec = row->entry;
        if (!wants_probe(e, row) || rec->features_known || !row->dom->handle)
            continue;
        if (max) {
            probe_one(e, row);
            max--;
        }
        left += !rec->features_known;
    }
    return left;
}

/* The XML cache of the reading (bm_snapshot_take_cached()): the balloon configs kept in the
 * ledger's entries. */
static bool cache_lookup(void *ctx, const char *uuid, BmBalloonConfig *ret)
{
    const BmLedgerEntry *en = bm_ledger_find(ctx, uuid);
    if (!en || !en->balloon_cached)
        return false;
    *ret = en->balloon;
    return true;
}

static void cache_store(void *ctx, const char *uuid, const BmBalloonConfig *cfg)
{
    BmLedgerEntry *en = bm_ledger_entry(ctx, uuid, NULL);
    en->balloon = *cfg;
    en->balloon_cached = true;
}

/* The free pages a balloon gave back can sit on the kernel's per-CPU lists, out of MemFree
 * and MemAvailable, for minutes (Linux >= 6.8: a list grows up to 1/8 of its zone while its CPU
 * frees much): the host would look as short as before and the policy take more. They are given
 * back to the kernel's free lists when an inflate of ours ended since the last reading, and in
 * a reading of a host below release_above; never in a dry run. Returns true when the lists
 * were drained: the reading *h is of before it. */
static bool drain_percpu(BmEngine *e, BmHost *h)
{
    bool due = e->drain_due;
    e->drain_due = false; /* looked at: what an inflate left is on the lists now or never */
    if (e->opts.dry_run || bm_hostmem_percpu_excess(h) < BM_HOSTMEM_PERCPU_DRAIN_MIN_BYTES)
        return false;
    bool short_host = e->policy && bm_present(h->mem_available_bytes) &&
                      h->mem_available_bytes < bm_amount_bytes(e->policy->release_above, h->mem_total_bytes);
    if (!due && !short_host)
        return false;
    uint64_t before = h->percpu_free_bytes, drained = 0;
    int r = e->hw.drain_percpu(e->hw.ctx, h, &drained);
    if (r < 0) {
        if (!e->drain_warned)
            bm_log(LOG_WARNING, "balloonmgr: cannot give the %" PRIu64 " MiB on the per-CPU free lists back to "
                   "MemAvailable (logged once): %s", bm_hostmem_percpu_excess(h) >> 20, bm_error_detail(r));
        e->drain_warned = true;
        bm_error_reset();
        return false;
    }
    bm_count_add(&e->ledger.counters.percpu_drained_bytes, drained);
    if (drained > 0)
        bm_log(LOG_INFO, "balloonmgr: per-CPU free lists: gave %" PRIu64 " MiB back to MemAvailable (%" PRIu64
               " -> %" PRIu64 " MiB, %d write(s) of stat_refresh)", drained >> 20, before >> 20,
               h->percpu_free_bytes >> 20, r);
    return drained > 0;
}

/* The host's memory, read once a reading: meminfo and PSI, then the per-CPU lists; when they
 * hold much and a drain is due (may_drain, drain_percpu()), they are drained and the host is
 * read again, so that *ret is the final reading, with MemAvailable counting what the drain
 * gave back (a failure to read it again keeps the reading of before the drain). Returns 0 or
 * -errno when meminfo cannot be read. */
static int read_host(BmEngine *e, bool may_drain, BmHost *ret)
{
    int r = e->hw.read_meminfo(e->hw.ctx, ret);
    if (r < 0)
        return r;
    if (e->hw.read_percpu(e->hw.ctx, ret) < 0)
        bm_error_reset(); /* no zoneinfo: the lists unknown, left alone */
    if (may_drain && drain_percpu(e, ret)) {
        BmHost after;
        if (read_host(e, false, &after) == 0)
            *ret = after;
        bm_error_reset();
    }
    return 0;
}

/* The host's memory of a reading (read_host(): drained first where may_drain), into the view.
 * Returns 0, or -errno with "host memory: REASON" (counted; the view keeps its last host). */
static int read_host_view(BmEngine *e, bool may_drain)
{
    BmHost host;
    int r = read_host(e, may_drain, &host);
    if (r < 0) {
        bm_ledger_count_error(&e->ledger, BM_ERR_HOST);
        return bm_error_prefix(r, "host memory");
    }
    e->host = host;
    e->have_host = true;
    return 0;
}

/* KSM, read with the host: unreadable, it is not exported and ksm_error says why. */
static void read_ksm(BmEngine *e)
{
    e->ksm_error[0] = '\0';
    e->have_ksm = false;
    int r = e->hw.read_ksm(e->hw.ctx, &e->ksm);
    e->have_ksm = r == 0;
    if (r < 0)
        snprintf(e->ksm_error, sizeof(e->ksm_error), "%s", bm_error_detail(r));
}

/* Whether a take may come of this reading: the host below target_available, or reclaiming. */
static bool take_may_come(const BmEngine *e)
{
    if (!e->policy || !e->have_host || !bm_present(e->host.mem_available_bytes))
        return false;
    return e->ledger.mode == BM_HOST_RECLAIM || bm_host_under_pressure(&e->host, e->policy) ||
           e->host.mem_available_bytes < bm_amount_bytes(e->policy->target_available,
                                                         e->host.mem_total_bytes);
}

/* QEMU's own memory of every running domain of the reading when a take may come (the host's
 * measure_qemu()): a guest running real software keeps more there than the host-wide estimate
 * says (qemuproc.h). Measured once per BM_QEMU_OWN_KEEP_S and start, kept in the domain's ledger
 * entry for the readings between. A domain that cannot be measured (not root, no
 * CAP_SYS_PTRACE, a pid file gone) keeps the estimate; logged once per engine. A host that does
 * not measure it (another driver) says so and is not asked again this reading. */
static void measure_qemu(BmEngine *e, uint64_t now_s)
{
    if (!take_may_come(e))
        return;
    for (size_t i = 0; i < e->rows.n_rows; i++) {
        BmDomain *d = e->rows.rows[i].dom;
        BmLedgerEntry *rec = e->rows.rows[i].entry;
        if (!d->active || d->state != VIR_DOMAIN_RUNNING || !bm_present(d->rss_bytes) ||
            !bm_present(d->max_bytes) || !bm_present(d->actual_bytes))
            continue;
        if (rec->qemu_own_s && rec->qemu_own_s <= now_s && now_s - rec->qemu_own_s < BM_QEMU_OWN_KEEP_S) {
            d->qemu_own_bytes = rec->qemu_own_bytes;
            d->qemu_own_known = true;
            continue;
        }
        int r = e->hw.measure_qemu(e->hw.ctx, d);
        if (r == -ENOTSUP) {
            bm_error_reset();
            return;
        }
        if (r >= 0) {
            rec->qemu_own_bytes = d->qemu_own_bytes;
            rec->qemu_own_s = now_s;
        }
        if (r < 0 && !e->qemu_warned && r != -ENOENT) {
            _cleanup_free_ char *name = bm_escape_quoted(d->name);
            _cleanup_free_ char *why = bm_escape_name(bm_error_detail(r));
            bm_log(LOG_WARNING, "balloonmgr: cannot measure QEMU's own memory of domain '%s' (the "
                   "host-wide estimate serves; logged once): %s", name, why);
            e->qemu_warned = true;
        }
        bm_error_reset();
    }
}

/* The domains of a reading (XML from the ledger's cache where it can), then the one join of
 * the reading: the rows, through which the ledger is brought in line. Returns 0 or -errno
 * (counted; the view keeps its last reading). */
static int read_domains_view(BmEngine *e)
{
    if (e->xml_stale) {
        bm_ledger_forget_xml(&e->ledger);
        e->xml_stale = false;
    }
    BmXmlCache cache = {.ctx = &e->ledger, .lookup = cache_lookup, .store = cache_store};
    BmSnapshot snap;
    int r = e->hw.read_domains(e->hw.ctx, e->opts.cache_xml ? &cache : NULL, &snap);
    if (r < 0) {
        bm_ledger_count_error(&e->ledger, BM_ERR_LIBVIRT);
        return r;
    }
    clear_view(e);
    e->snap = snap;
    e->have_snap = true;
    for (size_t i = 0; i < e->snap.n_domains; i++)
        if (!e->snap.domains[i].read_real_ns)
            e->snap.domains[i].read_real_ns = e->snap.taken_real_ns;
    /* the one join of this reading: the ledger brought in line through the rows, which every
     * step after it walks */
    uint64_t now_s = snap.taken_real_ns / 1000000000ull;
    bm_rows_build(&e->rows, &e->snap, &e->ledger, e->policy, e->boot_id, now_s);
    /* the reading's last parts, through the rows and their handles: QEMU's own memory, the
     * balloons corrected from the changes that just ended, the guests' starvation counters */
    measure_qemu(e, now_s);
    bm_rows_correct(&e->rows, e->snap.taken_real_ns);
    for (size_t i = 0; i < e->rows.n_rows; i++)
        read_starve(e, &e->rows.rows[i]);
    bm_plan_link(e->have_plan ? &e->plan : NULL, &e->rows);
    if (!e->opts.probe_later)
        bm_engine_probe(e, SIZE_MAX);
    return 0;
}

/* Step 1, read: the host (drained where due), KSM, then the domains. */
static int read_view(BmEngine *e)
{
    int r = read_host_view(e, true);
    if (r < 0)
        return r;
    read_ksm(e);
    return read_domains_view(e);
}

int bm_engine_refresh(BmEngine *e)
{
    return read_view(e);
}

/* What starting the change of d and its row returned (r: 0 or -errno), into the ledger, the
 * change in flight and *a. Returns false when it failed. */
static bool applied(BmEngine *e, const BmRow *row, const BmDecision *d, BmApplied *a, int r)
{
    if (r >= 0) {
        bm_ledger_record_start(&e->ledger, row->entry, d->current_bytes, d->target_bytes);
        BmTracked *t = &e->changes.items[e->changes.n_items - 1];
        const char *why = bm_reason_why(d);
        snprintf(t->why, sizeof(t->why), "%s", why ? why : "");
        t->owner = row->entry; /* recorded into it when it ends */
    }
    if (r < 0) {
        snprintf(a->error, sizeof(a->error), "%s", bm_error_detail(r));
        bm_ledger_count_error(&e->ledger, BM_ERR_APPLY);
        return false;
    }
    a->applied = true;
    return true;
}

/* Step 3 for one decision and its row: start the change, unless the domain is in a long
 * libvirt job. Returns false when it failed. */
static bool apply_one(BmEngine *e, const BmRow *row, const BmDecision *d, BmApplied *a)
{
    /* a domain in a long job would hold the pass for libvirt's 30 s job-lock wait (and then
     * fail): skip it this pass; it is planned again at the next one */
    const char *job = NULL;
    if (row->dom->handle && e->hw.job_running(e->hw.ctx, row->dom, &job) > 0) {
        a->busy = true;
        snprintf(a->error, sizeof(a->error), "busy with %s: left alone this pass", job);
        return true;
    }
    bm_error_reset();
    a->attempted = true;
    BmLedgerEntry *rec = row->entry;
    if (row->dom->handle && wants_probe(e, row) && !rec->features_known)
        probe_one(e, row); /* the histogram's label of this change */
    BmSgLabel sg = bm_sg_label(rec->sg, rec->features_known);
    int r;
    if (!row->dom->handle)
        r = bm_error(-ENODEV, "domain gone");
    else if (d->vmem && d->vmem_index >= 0) /* its virtio-mem device's requested size, in blocks */
        r = bm_tracker_start_vmem(&e->changes, row->dom->name, d->uuid, row->dom->handle,
                                  (size_t)d->vmem_index, d->vmem_offset_bytes,
                                  d->current_bytes - d->vmem_offset_bytes,
                                  d->vmem_requested_bytes, d->rss_bytes, BM_SGL_UNKNOWN);
    else
        r = bm_tracker_start_handle(&e->changes, row->dom->name, d->uuid, row->dom->handle,
                                    d->current_bytes, d->target_bytes, d->rss_bytes, sg);
    return applied(e, row, d, a, r);
}

/* Step 3: every inflate and deflate of the plan, made from the rows (decision i is row i's).
 * Returns false when one failed. */
static bool apply(BmEngine *e)
{
    bool ok = true;
    for (size_t i = 0; i < e->plan.n_decisions && !e->opts.dry_run; i++) {
        const BmDecision *d = &e->plan.decisions[i];
        if (d->action == BM_ACT_INFLATE || d->action == BM_ACT_DEFLATE)
            ok &= apply_one(e, &e->rows.rows[i], d, &e->applied[i]);
    }
    return ok;
}

/* Step 2, evaluate: the rows, the host and the last mode in, the plan out, with an applied
 * record per decision (none attempted yet). Returns 0 or -errno (the host reading lacks what
 * the policy needs). */
static int decide(BmEngine *e, uint64_t now_s, unsigned horizon_s)
{
    int r = bm_policy_eval_rows(&e->host, &e->rows, e->ledger.mode, e->policy, now_s, horizon_s, &e->plan);
    if (r < 0)
        return r;
    e->have_plan = true;
    /* decision i is row i's: its entry keeps the index for the readings after the pass */
    bm_plan_attach(&e->plan, &e->rows, ++e->plan_gen);
    e->applied = bm_malloc0((e->plan.n_decisions + 1) * sizeof(BmApplied));
    return 0;
}

/* Whether the agent logs a decision that leaves a domain as it is by rule code in a pass of
 * mode: what keeps a domain from being managed, in any mode; what keeps its memory from the
 * host, while the host reclaims. Not: a domain not running, excluded, without a balloon or
 * with its change in flight, nor one fine or not needed. */
static bool rule_logged(BmReasonCode code, BmHostMode mode)
{
    switch (code) {
    case BM_REASON_PAUSED:
    case BM_REASON_NO_VMEM:
    case BM_REASON_UNRESPONSIVE:
    case BM_REASON_SIZE_UNKNOWN:
    case BM_REASON_NO_STATS:
    case BM_REASON_STALE:
        return true;
    case BM_REASON_NONE:
    case BM_REASON_NOT_RUNNING:
    case BM_REASON_NO_BALLOON:
    case BM_REASON_IN_FLIGHT:
    case BM_REASON_EXCLUDED:
    case BM_REASON_NOT_NEEDED:
    case BM_REASON_FINE:
        return false;
    default:
        return mode == BM_HOST_RECLAIM;
    }
}

/* The agent's records of this pass's decisions (log_decisions): every change started (or, in a
 * dry run, planned) with its reason; for a domain left as it is, its rule when that differs
 * from the last one logged for it (rule_logged()), so that a steady host logs nothing. */
static void log_decisions(BmEngine *e)
{
    for (size_t i = 0; i < e->plan.n_decisions; i++) {
        const BmDecision *x = &e->plan.decisions[i];
        BmLedgerEntry *entry = e->rows.rows[i].entry;
        bool change = x->action == BM_ACT_INFLATE || x->action == BM_ACT_DEFLATE;
        bool log;
        if (change) {
            log = e->applied[i].applied || e->opts.dry_run;
            if (entry)
                entry->logged_rule = BM_REASON_NONE;
        } else {
            bool wanted = rule_logged(x->cause.code, e->plan.mode);
            log = wanted && (!entry || entry->logged_rule != (int)x->cause.code);
            if (entry)
                entry->logged_rule = wanted ? (int)x->cause.code : BM_REASON_NONE;
        }
        if (!log)
            continue;
        char why[BM_REASON_MAX];
        bm_reason_format(&e->plan, x, why, sizeof(why));
        bm_log_decision(x->name, x->uuid, bm_action_name(x->action), bm_reason_rule(x),
                        x->current_bytes, x->target_bytes, why);
    }
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int bm_engine_pass(BmEngine *e)
{
    uint64_t t0 = bm_clock_mono_ns(e->clock);
    double c0 = cpu_s();
    unsigned long calls0 = bm_libvirt_calls;
    clear_plan(e);
    /* 1. read */
    int r = read_view(e);
    uint64_t t1 = bm_clock_mono_ns(e->clock);
    e->timing.read_s = (t1 - t0) / 1e9;
    if (r < 0)
        return r;
    uint64_t now_s = e->snap.taken_real_ns / 1000000000ull;
    e->pass_now_s = now_s;
    /* 2. evaluate */
    unsigned horizon_s = e->opts.timer ? e->policy->timer_interval_s : 0;
    r = decide(e, now_s, horizon_s);
    if (r < 0) {
        bm_ledger_count_error(&e->ledger, BM_ERR_HOST);
        return r;
    }
    if (e->plan.mode != e->ledger.mode) {
        char why[BM_HOST_REASON_MAX];
        bm_host_reason_format(&e->plan, why, sizeof(why));
        bm_log_mode(e->ledger.mode, e->plan.mode, why);
    }
    uint64_t t2 = bm_clock_mono_ns(e->clock);
    e->timing.eval_s = (t2 - t1) / 1e9;
    /* 3. apply */
    bool ok = apply(e);
    if (e->opts.log_decisions)
        log_decisions(e);
    /* 4. remember: this reading is the next pass's base */
    bm_rows_note(&e->rows, &e->ledger, e->plan.mode, now_s, horizon_s);
    BmCounters *c = &e->ledger.counters;
    for (size_t i = 0; i < e->plan.n_decisions; i++) {
        const BmDecision *x = &e->plan.decisions[i];
        bool inflated = x->action == BM_ACT_INFLATE && e->applied[i].applied;
        double reads = x->pressure.disk_read_rate;
        bm_ledger_note_episode(e->rows.rows[i].entry, inflated ? x->current_bytes : BM_ABSENT,
                               reads >= 0 && reads < 0x1p63 ? (uint64_t)reads : BM_ABSENT,
                               x->cache_found_hot, x->pressure.busy_measured, now_s);
        if (inflated) {
            bm_count_add(&c->hot_cache_taken_bytes, x->take_hot_bytes);
            bm_count_add(&c->cache_taken_bytes, x->take_cache_bytes);
        }
    }
    bm_count_add(&c->passes, 1);
    uint64_t t3 = bm_clock_mono_ns(e->clock);
    e->timing.apply_s = (t3 - t2) / 1e9;
    e->timing.pass_s = c->last_pass_duration_s = (t3 - t0) / 1e9;
    e->timing.cpu_s = cpu_s() - c0;
    e->timing.libvirt_calls = bm_libvirt_calls - calls0;
    if (ok)
        c->last_success_s = now_s;
    return 0;
}

int bm_engine_evaluate(BmEngine *e)
{
    clear_plan(e);
    int host_r = read_host_view(e, false);
    char why[512] = "";
    if (host_r < 0)
        snprintf(why, sizeof(why), "%s", bm_error_detail(host_r));
    read_ksm(e);
    int r = read_domains_view(e);
    if (r < 0)
        return r;
    if (host_r < 0)
        return bm_error(host_r, "%s", why); /* its detail, reset by the domains' reading */
    if (!e->policy)
        return 0;
    unsigned horizon_s = e->opts.timer ? e->policy->timer_interval_s : 0;
    return decide(e, e->snap.taken_real_ns / 1000000000ull, horizon_s);
}

/* A change of ours ended: its record in the log, its outcome in the ledger. */
static void on_ended(void *ctx, const BmTracked *t)
{
    BmEngine *e = ctx;
    bm_log_change(t->name, t->uuid, t->why, t->vmem, &t->change);
    /* what an inflate gave may wait on a per-CPU list: drained by the next reading, the one
     * every driver takes right after a change ended (bm_engine_refresh()) */
    if (t->change.target_bytes < t->change.from_bytes)
        e->drain_due = true;
    bm_ledger_record_change(&e->ledger, t->owner, t, true, bm_clock_real_ns(e->clock) / 1000000000ull);
}

void bm_engine_vmem_changed(BmEngine *e, const char *uuid)
{
    bm_tracker_nudge(&e->changes, uuid);
}

size_t bm_engine_poll(BmEngine *e)
{
    return bm_tracker_poll(&e->changes, on_ended, e);
}

/* The row of the latest reading whose ledger entry is owner, or NULL. */
static const BmRow *row_of(const BmEngine *e, const void *owner)
{
    for (size_t i = 0; owner && e->have_snap && i < e->rows.n_rows; i++)
        if (e->rows.rows[i].entry == owner)
            return &e->rows.rows[i];
    return NULL;
}

/* Why an inflate hurts its guest, in words, into buf. */
static void hurt_text(const BmGuestPressure *gp, char *buf, size_t n)
{
    if (gp->refaulting)
        snprintf(buf, n, "its disk reads rose to %s/s after %s was taken: it re-reads the page "
                 "cache the balloon takes", BM_SZ((uint64_t)gp->disk_read_rate), BM_SZ(gp->taken_bytes));
    else if (bm_present(gp->oom_kills) && gp->oom_kills > 0)
        snprintf(buf, n, "%" PRIu64 " OOM kill(s) in the guest", gp->oom_kills);
    else
        snprintf(buf, n, "major faults %.0f/s, swap-in %s/s", gp->major_fault_rate < 0 ? 0 : gp->major_fault_rate,
                 BM_SZ(gp->swap_in_rate > 0 && gp->swap_in_rate < 0x1p63 ? (uint64_t)gp->swap_in_rate : 0));
}

size_t bm_engine_stop_hurting(BmEngine *e)
{
    if (!e->policy || !e->have_snap)
        return 0;
    uint64_t now_s = e->snap.taken_real_ns / 1000000000ull;
    bool near_oom = e->have_host && bm_host_near_oom(&e->host, e->policy);
    size_t stopped = 0;
    for (size_t i = e->changes.n_items; i-- > 0;) {
        const BmTracked *t = &e->changes.items[i];
        const BmRow *row = t->change.target_bytes < t->change.from_bytes ? row_of(e, t->owner) : NULL;
        BmGuestPressure gp;
        if (!row || !bm_policy_inflate_hurts(row, now_s, near_oom, &gp))
            continue;
        char why[256];
        hurt_text(&gp, why, sizeof(why));
        _cleanup_free_ char *name = bm_escape_quoted(t->name);
        bm_log(LOG_NOTICE, "balloonmgr: stopping the inflate of domain '%s' toward %s where its balloon is: %s",
               name, BM_SZ(t->change.target_bytes), why);
        bm_tracker_stop(&e->changes, i, on_ended, e);
        stopped++;
    }
    return stopped;
}

void bm_engine_set_progress(BmEngine *e, void (*progress)(void *ctx, const BmTracked *t), void *ctx)
{
    e->changes.opts.progress = progress;
    e->changes.opts.progress_ctx = ctx;
}

void bm_engine_set_stop(BmEngine *e, const volatile sig_atomic_t *stop)
{
    e->changes.opts.stop = stop;
}

size_t bm_engine_in_flight(const BmEngine *e)
{
    return e->changes.n_items;
}

/* Whether an inflate of ours is in flight. */
static bool inflating(const BmEngine *e)
{
    for (size_t i = 0; i < e->changes.n_items; i++)
        if (e->changes.items[i].change.target_bytes < e->changes.items[i].change.from_bytes)
            return true;
    return false;
}

size_t bm_engine_wait(BmEngine *e, unsigned timeout_s)
{
    const uint64_t ms = 1000000ull;
    uint64_t deadline = bm_clock_mono_ns(e->clock) + (uint64_t)timeout_s * 1000 * ms;
    const volatile sig_atomic_t *stop = e->changes.opts.stop;
    for (;;) {
        uint64_t now = bm_clock_mono_ns(e->clock);
        if (now >= deadline || !e->changes.n_items || (stop && *stop))
            break;
        /* a second at a time while an inflate is in flight: a reading between, as the agent's
         * guest watch takes, to stop an inflate that hurts its guest */
        uint64_t left_ms = (deadline - now) / ms + 1;
        uint64_t slice = inflating(e) && left_ms > 1000 ? 1000 : left_ms;
        bm_tracker_wait(&e->changes, slice < UINT32_MAX ? (uint32_t)slice : UINT32_MAX - 1, on_ended, e);
        if (inflating(e) && !(stop && *stop) && bm_clock_mono_ns(e->clock) < deadline &&
            read_view(e) == 0)
            bm_engine_stop_hurting(e);
    }
    return e->changes.n_items;
}

const BmPlan *bm_engine_plan(const BmEngine *e)
{
    return e->have_plan ? &e->plan : NULL;
}

const BmApplied *bm_engine_applied(const BmEngine *e)
{
    return e->have_plan ? e->applied : NULL;
}

const BmHost *bm_engine_host(const BmEngine *e)
{
    return e->have_host ? &e->host : NULL;
}

const BmKsm *bm_engine_ksm(const BmEngine *e, const char **ret_error)
{
    if (ret_error)
        *ret_error = e->ksm_error;
    return e->have_ksm ? &e->ksm : NULL;
}

const BmSnapshot *bm_engine_snapshot(const BmEngine *e)
{
    return e->have_snap ? &e->snap : NULL;
}

const BmPassTiming *bm_engine_timing(const BmEngine *e)
{
    return &e->timing;
}

uint64_t bm_engine_pass_time_s(const BmEngine *e)
{
    return e->pass_now_s;
}

bool bm_engine_host_under_pressure(BmEngine *e)
{
    BmHost h;
    if (!e->policy || e->hw.read_meminfo(e->hw.ctx, &h) < 0) {
        bm_error_reset();
        return false;
    }
    return bm_host_under_pressure(&h, e->policy);
}

bool bm_engine_reclaiming(const BmEngine *e)
{
    return e->have_plan && e->plan.mode == BM_HOST_RECLAIM;
}

bool bm_engine_any_ballooned(const BmEngine *e)
{
    for (size_t i = 0; e->have_snap && i < e->snap.n_domains; i++) {
        const BmDomain *d = &e->snap.domains[i];
        if (d->active && bm_present(d->actual_bytes) && bm_present(d->max_bytes) &&
            d->actual_bytes < d->max_bytes)
            return true;
    }
    return false;
}

bool bm_engine_guest_in_need(BmEngine *e)
{
    return e->have_snap && e->policy &&
           bm_policy_rows_in_need(&e->rows, e->snap.taken_real_ns / 1000000000ull);
}

char *bm_engine_render(BmEngine *e, bool libvirt_up)
{
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    BmView v = {.snap = e->have_snap ? &e->snap : NULL,
                .rows = e->have_snap ? &e->rows : NULL,
                .host = e->have_host ? &e->host : NULL,
                .have_mode = e->have_plan,
                .mode = e->have_plan ? e->plan.mode : BM_HOST_HOLD,
                .libvirt_up = libvirt_up,
                .no_libvirt_duplicates = e->opts.no_libvirt_duplicates,
                .plan = e->have_plan ? &e->plan : NULL};
    /* KSM first: balloonmgr_build_info stays the last line, the mark of a whole textfile */
    if (e->have_ksm)
        bm_ksm_export(r, &e->ksm);
    bm_export_build(r, &e->ledger, &v);
    return bm_registry_render(r);
}
