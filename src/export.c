#include "export.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "policy-eval.h"
#include "util.h"

#ifndef BM_VERSION
#define BM_VERSION "unknown"
#endif

/* ---- the registry ---- */

static const BmMetricFamily families[] = {
    {"balloonmgr_balloon_change_duration_seconds", BM_METRIC_HISTOGRAM,
     "Time from setting a balloon target to reaching it (within 1 MiB), inflate or deflate, by SG."},
    {"balloonmgr_balloon_changes_total", BM_METRIC_COUNTER, "Balloon target changes by how they ended."},
    {"balloonmgr_domain_last_change_duration_seconds", BM_METRIC_GAUGE,
     "Duration of the domain's last balloon change, until it ended."},
    {"balloonmgr_domain_last_change_rss_drop_bytes", BM_METRIC_GAUGE,
     "QEMU RSS before minus after the domain's last inflate."},
    {"balloonmgr_rss_dropped_bytes_total", BM_METRIC_COUNTER, "Sum of QEMU RSS drops observed after inflates."},
    {"balloonmgr_cache_inflated_bytes_total", BM_METRIC_COUNTER,
     "Balloon growth taken from guest page caches not known hot."},
    {"balloonmgr_hot_cache_inflated_bytes_total", BM_METRIC_COUNTER,
     "Balloon growth taken from hot guest page caches, only with the host near its own OOM."},
    {"balloonmgr_domain_inflate_yield_ratio", BM_METRIC_GAUGE,
     "QEMU RSS drop per byte of balloon growth over the domain's inflates, 0..1."},
    {"balloonmgr_domain_returns_nothing", BM_METRIC_GAUGE,
     "1 when the domain's last inflate gave the host (almost) nothing back."},
    {"balloonmgr_domain_unresponsive", BM_METRIC_GAUGE,
     "1 when the domain's last change stalled or timed out; it is not re-targeted meanwhile."},
    {"balloonmgr_domain_info", BM_METRIC_GAUGE, "Domain identity, state, SG verdict and ioeventfd."},
    {"balloonmgr_domain_maximum_bytes", BM_METRIC_GAUGE, "Maximum memory of the domain."},
    {"balloonmgr_domain_balloon_current_bytes", BM_METRIC_GAUGE, "Balloon current: memory the guest has."},
    {"balloonmgr_domain_balloon_target_bytes", BM_METRIC_GAUGE,
     "Last balloon target balloonmgr set, else the current size."},
    {"balloonmgr_domain_reclaimed_bytes", BM_METRIC_GAUGE, "Maximum minus balloon current."},
    {"balloonmgr_domain_guest_available_bytes", BM_METRIC_GAUGE, "Guest total memory as the guest sees it."},
    {"balloonmgr_domain_guest_usable_bytes", BM_METRIC_GAUGE, "Memory the guest could use without swapping."},
    {"balloonmgr_domain_guest_unused_bytes", BM_METRIC_GAUGE, "Guest free memory."},
    {"balloonmgr_domain_guest_disk_caches_bytes", BM_METRIC_GAUGE, "Guest page cache."},
    {"balloonmgr_domain_rss_bytes", BM_METRIC_GAUGE, "Resident memory of the domain's QEMU process."},
    {"balloonmgr_domain_guest_major_faults_total", BM_METRIC_COUNTER, "Guest major page faults."},
    {"balloonmgr_domain_guest_swap_in_bytes_total", BM_METRIC_COUNTER, "Guest swap-in."},
    {"balloonmgr_domain_guest_swap_out_bytes_total", BM_METRIC_COUNTER, "Guest swap-out."},
    {"balloonmgr_domain_disk_read_bytes_total", BM_METRIC_COUNTER,
     "Bytes read from all the domain's disks (QEMU's block statistics)."},
    {"balloonmgr_domain_page_cache_hot", BM_METRIC_GAUGE,
     "1 when the guest's disk reads rose after an inflate in this pressure episode: its page cache is taken last."},
    {"balloonmgr_domain_guest_oom_kills_total", BM_METRIC_COUNTER,
     "Guest OOM kills (Linux 6.10+ guests, read through the QEMU monitor where allowed)."},
    {"balloonmgr_domain_guest_alloc_stalls_total", BM_METRIC_COUNTER,
     "Guest allocations that entered direct reclaim (Linux 6.10+, QEMU monitor)."},
    {"balloonmgr_domain_guest_scanned_bytes_total", BM_METRIC_COUNTER,
     "Guest memory scanned for reclaim, by kswapd or direct reclaim (Linux 6.10+, QEMU monitor)."},
    {"balloonmgr_domain_guest_reclaimed_bytes_total", BM_METRIC_COUNTER,
     "Guest memory reclaimed, by kswapd or direct reclaim (Linux 6.10+, QEMU monitor)."},
    {"balloonmgr_domain_stats_last_update_timestamp_seconds", BM_METRIC_GAUGE,
     "When the guest last updated its memory statistics, Unix time."},
    {"balloonmgr_domain_sg_negotiated", BM_METRIC_GAUGE, "1 when VIRTIO_BALLOON_F_SG is negotiated."},
    {"balloonmgr_domain_ioeventfd_enabled", BM_METRIC_GAUGE, "1 when the balloon's ioeventfd is on."},
    {"balloonmgr_domain_feature_configured", BM_METRIC_GAUGE,
     "1 when the domain XML turns the balloon feature on (free_page_reporting, deflate_on_oom)."},
    {"balloonmgr_domain_feature_negotiated", BM_METRIC_GAUGE,
     "1 when the QEMU monitor found the balloon feature negotiated (where asked)."},
    {"balloonmgr_domain_backed_free_bytes", BM_METRIC_GAUGE,
     "Free guest memory the QEMU process holds: RSS minus guest use minus QEMU's own memory."},
    {"balloonmgr_reclaimed_bytes", BM_METRIC_GAUGE, "Memory reclaimed from all domains."},
    {"balloonmgr_host_memory_total_bytes", BM_METRIC_GAUGE, "Host MemTotal."},
    {"balloonmgr_host_memory_available_bytes", BM_METRIC_GAUGE, "Host MemAvailable."},
    {"balloonmgr_host_memory_percpu_free_bytes", BM_METRIC_GAUGE,
     "Free pages on the kernel's per-CPU lists, which MemAvailable does not count."},
    {"balloonmgr_host_memory_percpu_drained_bytes_total", BM_METRIC_COUNTER,
     "Free pages balloonmgr gave back from the per-CPU lists to the free lists MemAvailable counts."},
    {"balloonmgr_host_memory_pressure_some_ratio", BM_METRIC_GAUGE, "Host PSI memory some avg10, 0..1."},
    {"balloonmgr_host_memory_pressure_full_ratio", BM_METRIC_GAUGE, "Host PSI memory full avg10, 0..1."},
    {"balloonmgr_host_mode", BM_METRIC_GAUGE, "1 for the host's current policy mode."},
    {"balloonmgr_host_need_bytes", BM_METRIC_GAUGE,
     "Memory the host asked the guests for in the last pass (reclaim mode; else 0)."},
    {"balloonmgr_host_planned_bytes", BM_METRIC_GAUGE,
     "Balloon growth (inflate) or shrinkage (deflate) the last pass planned, by direction."},
    {"balloonmgr_host_unmet_bytes", BM_METRIC_GAUGE,
     "Memory the host needs that the guests cannot give back without going short."},
    {"balloonmgr_host_backed_free_bytes", BM_METRIC_GAUGE,
     "Free guest memory the QEMU processes hold, summed over the domains."},
    {"balloonmgr_domain_short_of_memory", BM_METRIC_GAUGE,
     "1 when the last pass found the guest short of memory or under pressure."},
    {"balloonmgr_passes_total", BM_METRIC_COUNTER, "Policy passes run."},
    {"balloonmgr_pass_duration_seconds", BM_METRIC_GAUGE, "Duration of the last policy pass."},
    {"balloonmgr_target_changes_total", BM_METRIC_COUNTER, "Balloon targets set by policy passes."},
    {"balloonmgr_errors_total", BM_METRIC_COUNTER, "Errors by kind."},
    {"balloonmgr_libvirt_up", BM_METRIC_GAUGE, "1 while the libvirt connection is up."},
    {"balloonmgr_last_successful_pass_timestamp_seconds", BM_METRIC_GAUGE,
     "When the last policy pass completed without error."},
    {"balloonmgr_build_info", BM_METRIC_GAUGE, "Version of balloonmgr."},
};


/* add a sample when v is present */
#define ADD(name, labels, v)                                                                       \
    do {                                                                                           \
        if (bm_present(v))                                                                         \
            r_ok |= bm_registry_add(r, name, labels, (double)(v));                                 \
    } while (0)

/* The histograms and counters of balloon changes. */
static int add_changes(BmRegistry *r, const BmCounters *c)
{
    int r_ok = 0;
    for (int d = 0; d < BM_DIR_COUNT; d++)
        for (int s = 0; s < BM_SGL_COUNT; s++) {
            const char *l[] = {"direction", bm_dir_names[d], "sg", bm_sg_label_names[s], NULL};
            r_ok |= bm_registry_add_histogram(r, "balloonmgr_balloon_change_duration_seconds", l,
                                              &c->latency[d][s]);
        }
    for (int d = 0; d < BM_DIR_COUNT; d++)
        for (int o = 0; o < BM_CHANGE_ENDED_COUNT; o++) {
            const char *l[] = {"direction", bm_dir_names[d], "outcome", bm_outcome_names[o], NULL};
            r_ok |= bm_registry_add(r, "balloonmgr_balloon_changes_total", l, (double)c->changes[d][o]);
        }
    r_ok |= bm_registry_add(r, "balloonmgr_rss_dropped_bytes_total", NULL, (double)c->rss_dropped_bytes);
    r_ok |= bm_registry_add(r, "balloonmgr_cache_inflated_bytes_total", NULL, (double)c->cache_taken_bytes);
    r_ok |= bm_registry_add(r, "balloonmgr_hot_cache_inflated_bytes_total", NULL,
                            (double)c->hot_cache_taken_bytes);
    r_ok |= bm_registry_add(r, "balloonmgr_host_memory_percpu_drained_bytes_total", NULL,
                            (double)c->percpu_drained_bytes);
    return r_ok;
}

/* What balloonmgr knows of one domain from the ledger (rec may be NULL). */
static int add_domain_record(BmRegistry *r, const BmDomain *d, const BmLedgerEntry *rec)
{
    int r_ok = 0;
    const char *dl[] = {"domain", d->name, NULL};
    const char *sg = "unknown", *io = "unknown";
    if (rec && rec->features_known) {
        sg = bm_feature_state_name(rec->sg);
        io = bm_switch_state_name(rec->ioeventfd);
    }
    const char *info[] = {"domain", d->name, "uuid", d->uuid, "state", bm_snapshot_run_state_name(d->state),
                          "sg", sg, "ioeventfd", io, NULL};
    r_ok |= bm_registry_add(r, "balloonmgr_domain_info", info, 1);
    if (rec && rec->last_duration_s >= 0 && rec->last_direction >= 0) {
        const char *l[] = {"domain", d->name, "direction", bm_dir_names[rec->last_direction], NULL};
        r_ok |= bm_registry_add(r, "balloonmgr_domain_last_change_duration_seconds", l, rec->last_duration_s);
    }
    if (rec)
        ADD("balloonmgr_domain_last_change_rss_drop_bytes", dl, rec->last_rss_drop_bytes);
    if (rec && rec->yield.inflated_bytes > 0) {
        r_ok |= bm_registry_add(r, "balloonmgr_domain_inflate_yield_ratio", dl,
                                bm_yield_permille(&rec->yield) / 1000.0);
        r_ok |= bm_registry_add(r, "balloonmgr_domain_returns_nothing", dl, rec->yield.nothing);
    }
    r_ok |= bm_registry_add(r, "balloonmgr_domain_unresponsive", dl, rec && rec->unresponsive ? 1 : 0);
    uint64_t target = rec && bm_present(rec->last_target_bytes) ? rec->last_target_bytes : d->actual_bytes;
    ADD("balloonmgr_domain_balloon_target_bytes", dl, target);
    if (rec && rec->features_known) {
        r_ok |= bm_registry_add(r, "balloonmgr_domain_sg_negotiated", dl, rec->sg == BM_FEAT_NEGOTIATED);
        r_ok |= bm_registry_add(r, "balloonmgr_domain_ioeventfd_enabled", dl, rec->ioeventfd == BM_SWITCH_ON);
    }
    return r_ok;
}

/* The balloon features the domain XML turns on (free page reporting, deflate-on-oom), and
 * where the monitor was asked at this start, whether they are negotiated (rec may be NULL). */
static int add_domain_features(BmRegistry *r, const BmDomain *d, const BmLedgerEntry *rec)
{
    int r_ok = 0;
    static const char *const names[] = {"free_page_reporting", "deflate_on_oom"};
    if (d->balloon_known && d->balloon.present) {
        const BmTristate set[] = {d->balloon.free_page_reporting, d->balloon.autodeflate};
        for (size_t k = 0; k < BM_ARRAY_SIZE(names); k++) {
            const char *l[] = {"domain", d->name, "feature", names[k], NULL};
            r_ok |= bm_registry_add(r, "balloonmgr_domain_feature_configured", l, set[k] == BM_TRI_ON);
        }
    }
    if (rec && rec->features_known && d->active) {
        const BmFeatureState st[] = {rec->reporting, rec->deflate_on_oom};
        for (size_t k = 0; k < BM_ARRAY_SIZE(names); k++) {
            if (st[k] == BM_FEAT_UNKNOWN) /* not asked, no monitor: no sample */
                continue;
            const char *l[] = {"domain", d->name, "feature", names[k], NULL};
            r_ok |= bm_registry_add(r, "balloonmgr_domain_feature_negotiated", l, st[k] == BM_FEAT_NEGOTIATED);
        }
    }
    return r_ok;
}

/* One domain's memory as this pass read it; with no_dups only what libvirt exporters do not
 * export (reclaimed, the statistics' timestamp). */
static int add_domain_reading(BmRegistry *r, const BmDomain *d, uint64_t now_s, bool no_dups)
{
    int r_ok = 0;
    const char *dl[] = {"domain", d->name, NULL};
    if (!no_dups) {
        ADD("balloonmgr_domain_maximum_bytes", dl, d->max_bytes);
        ADD("balloonmgr_domain_balloon_current_bytes", dl, d->actual_bytes);
    }
    ADD("balloonmgr_domain_reclaimed_bytes", dl, bm_domain_reclaimed_bytes(d));
    if (!no_dups) {
        ADD("balloonmgr_domain_guest_available_bytes", dl, d->available_bytes);
        ADD("balloonmgr_domain_guest_usable_bytes", dl, d->usable_bytes);
        ADD("balloonmgr_domain_guest_unused_bytes", dl, d->unused_bytes);
        ADD("balloonmgr_domain_guest_disk_caches_bytes", dl, d->disk_caches_bytes);
        ADD("balloonmgr_domain_rss_bytes", dl, d->rss_bytes);
        ADD("balloonmgr_domain_guest_major_faults_total", dl, d->major_faults);
        ADD("balloonmgr_domain_guest_swap_in_bytes_total", dl, d->swap_in_bytes);
        ADD("balloonmgr_domain_guest_swap_out_bytes_total", dl, d->swap_out_bytes);
        if (d->active)
            ADD("balloonmgr_domain_disk_read_bytes_total", dl, d->disk_read_bytes);
    }
    /* Linux 6.12's starvation statistics: libvirt drops them, so never a duplicate */
    const BmStarveStats *st = &d->starve;
    ADD("balloonmgr_domain_guest_oom_kills_total", dl, st->oom_kills);
    ADD("balloonmgr_domain_guest_alloc_stalls_total", dl, st->alloc_stalls);
    const char *kswapd[] = {"domain", d->name, "reclaimer", "kswapd", NULL};
    const char *direct[] = {"domain", d->name, "reclaimer", "direct", NULL};
    ADD("balloonmgr_domain_guest_scanned_bytes_total", kswapd, st->async_scan_bytes);
    ADD("balloonmgr_domain_guest_scanned_bytes_total", direct, st->direct_scan_bytes);
    ADD("balloonmgr_domain_guest_reclaimed_bytes_total", kswapd, st->async_reclaim_bytes);
    ADD("balloonmgr_domain_guest_reclaimed_bytes_total", direct, st->direct_reclaim_bytes);
    if (d->active && bm_present(d->last_update_s) && d->last_update_s > 0 && d->last_update_s <= now_s)
        ADD("balloonmgr_domain_stats_last_update_timestamp_seconds", dl, d->last_update_s);
    return r_ok;
}

/* Every domain of the rows, and the sum of what was reclaimed. The plan's decisions are the
 * rows' when it was made from them, else found by UUID (a reading after the pass). */
static int add_domains(BmRegistry *r, const BmRows *rows, uint64_t now_s, bool no_dups,
                       const BmPlan *plan)
{
    int r_ok = 0;
    uint64_t reclaimed_total = 0, backed_total = 0;
    bool backed_known = false;
    for (size_t i = 0; i < rows->n_rows; i++) {
        const BmDomain *d = rows->rows[i].dom;
        const BmLedgerEntry *rec = rows->rows[i].entry;
        r_ok |= add_domain_record(r, d, rec);
        r_ok |= add_domain_features(r, d, rec);
        r_ok |= add_domain_reading(r, d, now_s, no_dups);
        const char *dl[] = {"domain", d->name, NULL};
        const BmDecision *dec = bm_plan_find(plan, i, d->uuid);
        if (dec) {
            r_ok |= bm_registry_add(r, "balloonmgr_domain_short_of_memory", dl, dec->short_of_memory);
            r_ok |= bm_registry_add(r, "balloonmgr_domain_page_cache_hot", dl, dec->cache_hot);
        }
        /* with the last pass's estimate of QEMU's own memory (none before the first pass) */
        uint64_t backed = plan ? bm_domain_backed_free_bytes(d, plan->qemu_overhead_bytes) : BM_ABSENT;
        ADD("balloonmgr_domain_backed_free_bytes", dl, backed);
        if (bm_present(backed)) {
            backed_total += backed;
            backed_known = true;
        }
        uint64_t reclaimed = bm_domain_reclaimed_bytes(d);
        if (bm_present(reclaimed))
            reclaimed_total += reclaimed;
    }
    r_ok |= bm_registry_add(r, "balloonmgr_reclaimed_bytes", NULL, (double)reclaimed_total);
    if (backed_known)
        r_ok |= bm_registry_add(r, "balloonmgr_host_backed_free_bytes", NULL, (double)backed_total);
    return r_ok;
}

static int add_host(BmRegistry *r, const BmView *v)
{
    int r_ok = 0;
    const BmHost *h = v->host;
    if (h) {
        ADD("balloonmgr_host_memory_total_bytes", NULL, h->mem_total_bytes);
        ADD("balloonmgr_host_memory_available_bytes", NULL, h->mem_available_bytes);
        ADD("balloonmgr_host_memory_percpu_free_bytes", NULL, h->percpu_free_bytes);
        if (h->psi_present) {
            r_ok |= bm_registry_add(r, "balloonmgr_host_memory_pressure_some_ratio", NULL, h->psi_some_avg10 / 100);
            r_ok |= bm_registry_add(r, "balloonmgr_host_memory_pressure_full_ratio", NULL, h->psi_full_avg10 / 100);
        }
    }
    if (v->have_mode)
        for (int m = BM_HOST_HOLD; m <= BM_HOST_RELEASE; m++) {
            const char *l[] = {"mode", bm_host_mode_name((BmHostMode)m), NULL};
            r_ok |= bm_registry_add(r, "balloonmgr_host_mode", l, m == (int)v->mode);
        }
    if (v->plan) {
        const char *in[] = {"direction", "inflate", NULL}, *de[] = {"direction", "deflate", NULL};
        r_ok |= bm_registry_add(r, "balloonmgr_host_need_bytes", NULL, (double)v->plan->need_bytes);
        r_ok |= bm_registry_add(r, "balloonmgr_host_planned_bytes", in, (double)v->plan->planned_inflate_bytes);
        r_ok |= bm_registry_add(r, "balloonmgr_host_planned_bytes", de, (double)v->plan->planned_deflate_bytes);
        r_ok |= bm_registry_add(r, "balloonmgr_host_unmet_bytes", NULL, (double)v->plan->unmet_bytes);
    }
    return r_ok;
}

/* The agent's own health: passes, errors, the connection, the version. */
static int add_health(BmRegistry *r, const BmCounters *c, bool libvirt_up)
{
    int r_ok = 0;
    r_ok |= bm_registry_add(r, "balloonmgr_passes_total", NULL, (double)c->passes);
    if (c->last_pass_duration_s >= 0)
        r_ok |= bm_registry_add(r, "balloonmgr_pass_duration_seconds", NULL, c->last_pass_duration_s);
    for (int d = 0; d < BM_DIR_COUNT; d++) {
        const char *l[] = {"direction", bm_dir_names[d], NULL};
        r_ok |= bm_registry_add(r, "balloonmgr_target_changes_total", l, (double)c->target_changes[d]);
    }
    for (int e = 0; e < BM_ERR_COUNT; e++) {
        const char *l[] = {"kind", bm_error_kind_names[e], NULL};
        r_ok |= bm_registry_add(r, "balloonmgr_errors_total", l, (double)c->errors[e]);
    }
    r_ok |= bm_registry_add(r, "balloonmgr_libvirt_up", NULL, libvirt_up ? 1 : 0);
    if (c->last_success_s)
        r_ok |= bm_registry_add(r, "balloonmgr_last_successful_pass_timestamp_seconds", NULL,
                                (double)c->last_success_s);
    const char *bl[] = {"version", BM_VERSION, NULL};
    r_ok |= bm_registry_add(r, "balloonmgr_build_info", bl, 1);
    return r_ok;
}

int bm_export_build(BmRegistry *r, const BmLedger *l, const BmView *v)
{
    static const BmView none = {0};
    if (!v)
        v = &none;
    int r_ok = 0;
    r_ok |= bm_registry_declare_all(r, families, BM_ARRAY_SIZE(families));
    r_ok |= add_changes(r, &l->counters);
    if (v->snap) {
        BmRows joined = {0};
        if (!v->rows)
            bm_rows_join(&joined, v->snap, l, NULL);
        r_ok |= add_domains(r, v->rows ? v->rows : &joined, v->snap->taken_real_ns / 1000000000ull,
                            v->no_libvirt_duplicates, v->plan);
        bm_rows_clear(&joined);
    }
    r_ok |= add_host(r, v);
    r_ok |= add_health(r, &l->counters, v->libvirt_up);
    return r_ok < 0 ? -EINVAL : 0;
}
