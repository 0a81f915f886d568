#include "engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "error.h"
#include "log.h"
#include "qmp.h"
#include "state.h"
#include "util.h"

void bm_engine_init(BmEngine *e)
{
    *e = (BmEngine){.probe_features = true};
    e->prev.mode = BM_HOST_HOLD;
    bm_counters_init(&e->counters);
    e->tracker.opts = (BmWaitOptions){.timeout_ms = BM_WAIT_DEFAULT_TIMEOUT_S * 1000,
                                      .stall_ms = BM_WAIT_DEFAULT_STALL_S * 1000,
                                      .poll_ms = BM_WAIT_DEFAULT_POLL_MS,
                                      .tolerance_bytes = BM_WAIT_TOLERANCE_BYTES};
}

static void clear_view(BmEngine *e)
{
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
}

void bm_engine_clear(BmEngine *e)
{
    clear_plan(e);
    clear_view(e);
    bm_previous_clear(&e->prev);
    bm_counters_clear(&e->counters);
    bm_tracker_clear(&e->tracker);
}

/* SG/ioeventfd of running domains not probed yet (once per domain and start). */
static void probe(BmEngine *e)
{
    if (!e->probe_features)
        return;
    BmFeatureOptions fo = {.sg_bit = BM_SG_DEFAULT_BIT};
    for (size_t i = 0; i < e->snap.n_domains; i++) {
        const BmDomain *d = &e->snap.domains[i];
        BmDomainRecord *rec = bm_counters_domain(&e->counters, d->uuid, d->name);
        if (!d->active) {
            rec->features_known = false; /* probe again when it starts */
            continue;
        }
        if (rec->features_known)
            continue;
        virDomainPtr dom = BM_LV(virDomainLookupByUUIDString)(e->conn, d->uuid);
        if (!dom)
            continue;
        BmFeatureReport rep;
        char *path = NULL, *err = NULL;
        bm_qmp_probe_balloon(dom, &fo, &rep, &path, &err);
        virDomainFree(dom);
        const BmFeatureVerdict *sg = &rep.feature[BM_FEATURE_SG];
        rec->sg = sg->state;
        rec->ioeventfd = rep.ioeventfd;
        /* a guest still booting (driver not ready) is asked again at the next reading; any
         * other verdict, unknown ones included (no monitor), stands until the domain restarts */
        bool booting = sg->state == BM_FEAT_UNKNOWN && !rep.driver_ok && sg->reason &&
                       strstr(sg->reason, "DRIVER_OK");
        rec->features_known = !booting;
        free(path);
        free(err);
    }
}

static bool cache_lookup(void *ctx, const char *uuid, BmBalloonConfig *ret)
{
    const BmDomainRecord *r = bm_counters_find(ctx, uuid);
    if (!r || !r->balloon_cached)
        return false;
    *ret = r->balloon;
    return true;
}

static void cache_store(void *ctx, const char *uuid, const BmBalloonConfig *cfg)
{
    BmDomainRecord *r = bm_counters_domain(ctx, uuid, NULL);
    r->balloon = *cfg;
    r->balloon_cached = true;
}

static int read_view(BmEngine *e)
{
    BmHost host;
    int r = bm_hostmem_read(e->proc_dir, &host);
    if (r < 0) {
        e->counters.errors[BM_ERR_HOST]++;
        return bm_error_prefix(r, "host memory");
    }
    e->host = host;
    e->have_host = true;
    e->have_ksm = bm_ksm_read(NULL, &e->ksm) == 0; /* unreadable KSM: not exported */

    if (e->xml_stale) {
        for (size_t i = 0; i < e->counters.n_domains; i++)
            e->counters.domains[i].balloon_cached = false;
        e->xml_stale = false;
    }
    BmXmlCache cache = {.ctx = &e->counters, .lookup = cache_lookup, .store = cache_store};
    BmSnapshot snap;
    r = bm_snapshot_take_cached(e->conn, NULL, BM_SNAPSHOT_XML, e->cache_xml ? &cache : NULL, &snap);
    if (r < 0) {
        e->counters.errors[BM_ERR_LIBVIRT]++;
        return r;
    }
    clear_view(e);
    e->snap = snap;
    e->have_snap = true;
    uint64_t now_s = snap.taken_real_ns / 1000000000ull;
    for (size_t i = 0; i < snap.n_domains; i++)
        bm_counters_domain(&e->counters, snap.domains[i].uuid, snap.domains[i].name);
    bm_counters_sync(&e->counters, &e->snap, now_s);
    probe(e);
    return 0;
}

int bm_engine_refresh(BmEngine *e)
{
    return read_view(e);
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int bm_engine_pass(BmEngine *e)
{
    uint64_t t0 = bm_now_mono_ns();
    double c0 = cpu_s();
    unsigned long calls0 = bm_libvirt_calls;
    clear_plan(e);
    int r = read_view(e);
    uint64_t t1 = bm_now_mono_ns();
    e->t_read_s = (t1 - t0) / 1e9;
    if (r < 0)
        return r;
    uint64_t now_s = e->snap.taken_real_ns / 1000000000ull;
    e->pass_now_s = now_s;

    /* what the policy must not touch now: changes in flight, unresponsive domains; also for
     * domains the previous reading did not have (first pass, spooled changes) */
    for (size_t i = 0; i < e->prev.n_domains; i++) {
        BmPrevDomain *p = &e->prev.domains[i];
        const BmDomainRecord *rec = bm_counters_find(&e->counters, p->uuid);
        p->busy = bm_tracker_busy(&e->tracker, p->uuid);
        p->unresponsive = rec && rec->unresponsive;
        p->yield = rec ? rec->yield : (BmYield){0};
    }
    for (size_t i = 0; i < e->snap.n_domains; i++) {
        const BmDomain *d = &e->snap.domains[i];
        const BmDomainRecord *rec = bm_counters_find(&e->counters, d->uuid);
        bool busy = bm_tracker_busy(&e->tracker, d->uuid), unresp = rec && rec->unresponsive;
        if (!busy && !unresp)
            continue;
        bool known = false;
        for (size_t k = 0; k < e->prev.n_domains && !known; k++)
            known = strcmp(e->prev.domains[k].uuid, d->uuid) == 0;
        if (known)
            continue;
        e->prev.domains = bm_reallocarray(e->prev.domains, e->prev.n_domains + 1, sizeof(BmPrevDomain));
        BmPrevDomain *p = &e->prev.domains[e->prev.n_domains++];
        *p = (BmPrevDomain){.major_faults = BM_ABSENT, .swap_in_bytes = BM_ABSENT,
                            .last_update_s = BM_ABSENT, .busy = busy, .unresponsive = unresp,
                            .yield = rec ? rec->yield : (BmYield){0}};
        snprintf(p->uuid, sizeof(p->uuid), "%s", d->uuid);
    }
    r = bm_policy_eval(&e->host, &e->snap, &e->prev, e->policy, now_s, &e->plan);
    if (r < 0) {
        e->counters.errors[BM_ERR_HOST]++;
        return r;
    }
    e->have_plan = true;
    if (e->plan.mode != e->prev.mode)
        bm_log_mode(e->prev.mode, e->plan.mode, e->plan.reason);
    e->applied = bm_malloc0((e->plan.n_decisions + 1) * sizeof(BmApplied));
    uint64_t t2 = bm_now_mono_ns();
    e->t_eval_s = (t2 - t1) / 1e9;

    bool failed = false;
    for (size_t i = 0; i < e->plan.n_decisions && !e->dry_run; i++) {
        const BmDecision *d = &e->plan.decisions[i];
        const BmDomain *sd = &e->snap.domains[i];
        if (d->action != BM_ACT_INFLATE && d->action != BM_ACT_DEFLATE)
            continue;
        BmApplied *a = &e->applied[i];
        const BmDomainRecord *rec = bm_counters_domain(&e->counters, sd->uuid, sd->name);
        virDomainPtr dom = BM_LV(virDomainLookupByUUIDString)(e->conn, sd->uuid);
        /* a domain in a long job would hold the pass for libvirt's 30 s job-lock wait (and then
         * fail): skip it this pass; it is planned again at the next one */
        const char *job = NULL;
        if (dom && bm_balloon_job_running(dom, &job) > 0) {
            virDomainFree(dom);
            a->busy = true;
            snprintf(a->error, sizeof(a->error), "busy with %s: left alone this pass", job);
            continue;
        }
        a->attempted = true;
        r = dom ? bm_tracker_start(&e->tracker, dom, d->current_bytes, d->target_bytes, sd->rss_bytes,
                                   bm_sg_label(rec->sg, rec->features_known))
                : bm_conn_error("domain gone");
        if (dom)
            virDomainFree(dom);
        if (r < 0) {
            snprintf(a->error, sizeof(a->error), "%s", bm_error_detail(r));
            e->counters.errors[BM_ERR_APPLY]++;
            failed = true;
        } else {
            a->applied = true;
            bm_counters_record_target(&e->counters, sd->uuid, sd->name, d->current_bytes,
                                      d->target_bytes);
        }
    }

    bm_previous_clear(&e->prev);
    bm_previous_from(&e->snap, e->plan.mode, now_s, &e->prev);
    e->counters.passes++;
    uint64_t t3 = bm_now_mono_ns();
    e->t_apply_s = (t3 - t2) / 1e9;
    e->t_cpu_s = cpu_s() - c0;
    e->pass_calls = bm_libvirt_calls - calls0;
    e->counters.last_pass_duration_s = (t3 - t0) / 1e9;
    if (!failed)
        e->counters.last_success_s = now_s;
    return 0;
}

size_t bm_engine_poll(BmEngine *e)
{
    if (!e->tracker.n_items || !e->conn)
        return e->tracker.n_items;
    BmTracked *done = NULL;
    size_t n_done = 0;
    size_t left = bm_tracker_poll(&e->tracker, e->conn, &done, &n_done);
    uint64_t now_s = bm_now_real_ns() / 1000000000ull;
    for (size_t i = 0; i < n_done; i++) {
        bm_log_change(done[i].name, &done[i].change);
        bm_counters_record_change(&e->counters, &done[i], now_s);
    }
    free(done);
    return left;
}

size_t bm_engine_wait(BmEngine *e, unsigned timeout_s)
{
    uint64_t deadline = bm_now_mono_ns() + (uint64_t)timeout_s * 1000000000ull;
    while (e->tracker.n_items && bm_now_mono_ns() < deadline) {
        uint64_t t = bm_now_mono_ns();
        bm_engine_poll(e);
        uint64_t spent_ms = (bm_now_mono_ns() - t) / 1000000ull;
        if (e->tracker.n_items && spent_ms < e->tracker.opts.poll_ms)
            bm_sleep_ms(e->tracker.opts.poll_ms - (unsigned)spent_ms);
    }
    return e->tracker.n_items;
}

char *bm_engine_render(const BmEngine *e, bool libvirt_up)
{
    _cleanup_(bm_registry_freep) BmRegistry *r = bm_registry_new();
    BmView v = {.snap = e->have_snap ? &e->snap : NULL,
                .host = e->have_host ? &e->host : NULL,
                .have_mode = e->have_plan,
                .mode = e->have_plan ? e->plan.mode : BM_HOST_HOLD,
                .unmet_bytes = e->have_plan ? e->plan.unmet_bytes : 0,
                .libvirt_up = libvirt_up};
    bm_export_build(r, &e->counters, &v);
    if (e->have_ksm)
        bm_ksm_export(r, &e->ksm);
    return bm_registry_render(r);
}
