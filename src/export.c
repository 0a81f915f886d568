#include "export.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

#ifndef BM_VERSION
#define BM_VERSION "unknown"
#endif

const char *const bm_dir_names[BM_DIR_COUNT] = {"inflate", "deflate"};
const char *const bm_sg_label_names[BM_SGL_COUNT] = {"negotiated", "not_negotiated", "unknown"};
const char *const bm_outcome_names[BM_OUT_COUNT] = {"reached", "timeout", "stalled", "failed"};
const char *const bm_error_kind_names[BM_ERR_COUNT] = {"libvirt", "apply",  "host",      "state",
                                                       "policy",  "push",   "web_config"};

void bm_counters_init(BmCounters *c)
{
    *c = (BmCounters){.last_pass_duration_s = -1};
    for (int d = 0; d < BM_DIR_COUNT; d++)
        for (int s = 0; s < BM_SGL_COUNT; s++)
            bm_histogram_init(&c->latency[d][s], bm_latency_buckets, bm_latency_n_buckets);
}

void bm_counters_clear(BmCounters *c)
{
    free(c->domains);
    free(c->slots);
    c->domains = NULL;
    c->slots = NULL;
    c->n_domains = c->n_slots = 0;
}

static size_t hash_str(const char *s)
{
    size_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Slot of uuid: the one holding it, or the empty one where it would go. */
static size_t *slot_of(const BmCounters *c, const char *uuid)
{
    size_t mask = c->n_slots - 1;
    for (size_t i = hash_str(uuid) & mask;; i = (i + 1) & mask)
        if (!c->slots[i] || strcmp(c->domains[c->slots[i] - 1].uuid, uuid) == 0)
            return &c->slots[i];
}

static void reindex(BmCounters *c)
{
    size_t want = 16;
    while (want < c->n_domains * 2 + 2)
        want *= 2;
    free(c->slots);
    c->slots = bm_malloc0(want * sizeof(size_t));
    c->n_slots = want;
    for (size_t i = 0; i < c->n_domains; i++)
        *slot_of(c, c->domains[i].uuid) = i + 1;
}

const BmDomainRecord *bm_counters_find(const BmCounters *c, const char *uuid)
{
    if (!c->n_slots)
        return NULL;
    size_t *s = slot_of(c, uuid);
    return *s ? &c->domains[*s - 1] : NULL;
}

BmDomainRecord *bm_counters_domain(BmCounters *c, const char *uuid, const char *name)
{
    BmDomainRecord *found = (BmDomainRecord *)bm_counters_find(c, uuid);
    if (found) {
        if (name && strcmp(found->name, name) != 0)
            bm_copy_name(found->name, sizeof(found->name), name);
        return found;
    }
    c->domains = bm_reallocarray(c->domains, c->n_domains + 1, sizeof(BmDomainRecord));
    BmDomainRecord *d = &c->domains[c->n_domains++];
    *d = (BmDomainRecord){.last_target_bytes = BM_ABSENT,
                          .last_duration_s = -1,
                          .last_direction = -1,
                          .last_rss_drop_bytes = BM_ABSENT,
                          .sg = BM_FEAT_UNKNOWN,
                          .ioeventfd = BM_SWITCH_UNKNOWN,
                          .seen = true};
    snprintf(d->uuid, sizeof(d->uuid), "%s", uuid);
    bm_copy_name(d->name, sizeof(d->name), name);
    if (c->n_domains * 2 + 2 > c->n_slots)
        reindex(c);
    else
        *slot_of(c, d->uuid) = c->n_domains;
    return d;
}

void bm_counters_record_target(BmCounters *c, const char *uuid, const char *name,
                               uint64_t from_bytes, uint64_t target_bytes)
{
    BmDomainRecord *d = bm_counters_domain(c, uuid, name);
    d->last_target_bytes = target_bytes;
    if (target_bytes != from_bytes)
        c->target_changes[target_bytes < from_bytes ? BM_DIR_INFLATE : BM_DIR_DEFLATE]++;
}

const char *bm_sg_label(BmFeatureState s, bool known)
{
    if (!known || s == BM_FEAT_UNKNOWN)
        return bm_sg_label_names[BM_SGL_UNKNOWN];
    return bm_sg_label_names[s == BM_FEAT_NEGOTIATED ? BM_SGL_NEGOTIATED : BM_SGL_NOT_NEGOTIATED];
}

static int sg_index(const char *label)
{
    for (int s = 0; s < BM_SGL_COUNT; s++)
        if (strcmp(bm_sg_label_names[s], label) == 0)
            return s;
    return BM_SGL_UNKNOWN;
}

void bm_counters_record_change(BmCounters *c, const BmTracked *t, uint64_t now_s)
{
    const BmChange *ch = &t->change;
    int dir = ch->target_bytes < ch->from_bytes ? BM_DIR_INFLATE : BM_DIR_DEFLATE;
    int out = ch->outcome == BM_CHANGE_REACHED   ? BM_OUT_REACHED
              : ch->outcome == BM_CHANGE_TIMEOUT ? BM_OUT_TIMEOUT
              : ch->outcome == BM_CHANGE_STALLED ? BM_OUT_STALLED
                                                 : BM_OUT_FAILED;
    double secs = ch->duration_ns / 1e9;
    c->changes[dir][out]++;
    if (out == BM_OUT_REACHED)
        bm_histogram_observe(&c->latency[dir][sg_index(t->sg)], secs);

    BmDomainRecord *d = bm_counters_domain(c, t->uuid, t->name);
    d->last_duration_s = secs;
    d->last_direction = dir;
    if (dir == BM_DIR_INFLATE && bm_present(t->rss_before_bytes) && bm_present(t->rss_after_bytes)) {
        uint64_t drop = t->rss_before_bytes > t->rss_after_bytes
                            ? t->rss_before_bytes - t->rss_after_bytes
                            : 0;
        d->last_rss_drop_bytes = drop;
        c->rss_dropped_bytes += drop;
    }
    bm_yield_learn(&d->yield, ch->from_bytes, ch->reached_bytes, t->rss_before_bytes,
                   t->rss_after_bytes);
    if (out == BM_OUT_STALLED || out == BM_OUT_TIMEOUT) {
        d->unresponsive = true;
        d->unresponsive_actual = ch->reached_bytes;
        d->unresponsive_until_s = now_s + BM_UNRESPONSIVE_HOLDOFF_S;
    } else {
        d->unresponsive = false;
    }
}

static int cmp_domain_uuid(const void *a, const void *b)
{
    return strcmp((*(const BmDomain *const *)a)->uuid, (*(const BmDomain *const *)b)->uuid);
}

void bm_counters_sync(BmCounters *c, const BmSnapshot *snap, uint64_t now_s)
{
    /* the snapshot by UUID, for O(n log n) instead of O(n^2) */
    _cleanup_free_ const BmDomain **by_uuid = bm_malloc0((snap->n_domains + 1) * sizeof(BmDomain *));
    for (size_t k = 0; k < snap->n_domains; k++)
        by_uuid[k] = &snap->domains[k];
    qsort(by_uuid, snap->n_domains, sizeof(BmDomain *), cmp_domain_uuid);
    size_t keep = 0;
    for (size_t i = 0; i < c->n_domains; i++) {
        BmDomainRecord *d = &c->domains[i];
        BmDomain key;
        memcpy(key.uuid, d->uuid, sizeof(key.uuid));
        const BmDomain *kp = &key, **hit = bsearch(&kp, by_uuid, snap->n_domains, sizeof(BmDomain *),
                                                   cmp_domain_uuid);
        const BmDomain *sd = hit ? *hit : NULL;
        if (!sd)
            continue; /* gone: its series go with it */
        bm_copy_name(d->name, sizeof(d->name), sd->name);
        /* a hold-off from the future (a clock set back, a hand-edited state file, one from
         * another host) would keep the domain unmanaged for ever: at most the documented
         * hold-off from now, and saved so */
        if (d->unresponsive && d->unresponsive_until_s > now_s + BM_UNRESPONSIVE_HOLDOFF_S)
            d->unresponsive_until_s = now_s + BM_UNRESPONSIVE_HOLDOFF_S;
        if (d->unresponsive &&
            (now_s >= d->unresponsive_until_s ||
             (bm_present(sd->actual_bytes) && sd->actual_bytes != d->unresponsive_actual)))
            d->unresponsive = false;
        d->seen = true;
        c->domains[keep++] = *d;
    }
    c->n_domains = keep;
    reindex(c);
}

/* ---- the registry ---- */

static const struct {
    const char *name;
    BmMetricType type;
    const char *help;
} families[] = {
    {"balloonmgr_inflate_duration_seconds", BM_METRIC_HISTOGRAM,
     "Time from setting a balloon target to reaching it (within 1 MiB), by direction and SG."},
    {"balloonmgr_balloon_changes_total", BM_METRIC_COUNTER, "Balloon target changes by how they ended."},
    {"balloonmgr_domain_last_change_duration_seconds", BM_METRIC_GAUGE,
     "Duration of the domain's last balloon change, until it ended."},
    {"balloonmgr_domain_last_change_rss_drop_bytes", BM_METRIC_GAUGE,
     "QEMU RSS before minus after the domain's last inflate."},
    {"balloonmgr_rss_dropped_bytes_total", BM_METRIC_COUNTER, "Sum of QEMU RSS drops observed after inflates."},
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
    {"balloonmgr_domain_stats_age_seconds", BM_METRIC_GAUGE, "Age of the guest's last statistics update."},
    {"balloonmgr_domain_sg_negotiated", BM_METRIC_GAUGE, "1 when VIRTIO_BALLOON_F_SG is negotiated."},
    {"balloonmgr_domain_ioeventfd_enabled", BM_METRIC_GAUGE, "1 when the balloon's ioeventfd is on."},
    {"balloonmgr_reclaimed_bytes", BM_METRIC_GAUGE, "Memory reclaimed from all domains."},
    {"balloonmgr_host_memory_total_bytes", BM_METRIC_GAUGE, "Host MemTotal."},
    {"balloonmgr_host_memory_available_bytes", BM_METRIC_GAUGE, "Host MemAvailable."},
    {"balloonmgr_host_memory_pressure_some_ratio", BM_METRIC_GAUGE, "Host PSI memory some avg10, 0..1."},
    {"balloonmgr_host_memory_pressure_full_ratio", BM_METRIC_GAUGE, "Host PSI memory full avg10, 0..1."},
    {"balloonmgr_host_mode", BM_METRIC_GAUGE, "1 for the host's current policy mode."},
    {"balloonmgr_host_unmet_bytes", BM_METRIC_GAUGE,
     "Memory the host needs that the guests cannot give back without going short."},
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

int bm_export_build(BmRegistry *r, const BmCounters *c, const BmView *v)
{
    int r_ok = 0;
    for (size_t i = 0; i < BM_ARRAY_SIZE(families); i++)
        r_ok |= bm_registry_declare(r, families[i].name, families[i].type, families[i].help);

    for (int d = 0; d < BM_DIR_COUNT; d++)
        for (int s = 0; s < BM_SGL_COUNT; s++) {
            const char *l[] = {"direction", bm_dir_names[d], "sg", bm_sg_label_names[s], NULL};
            r_ok |= bm_registry_add_histogram(r, "balloonmgr_inflate_duration_seconds", l,
                                              &c->latency[d][s]);
        }
    for (int d = 0; d < BM_DIR_COUNT; d++)
        for (int o = 0; o < BM_OUT_COUNT; o++) {
            const char *l[] = {"direction", bm_dir_names[d], "outcome", bm_outcome_names[o], NULL};
            r_ok |= bm_registry_add(r, "balloonmgr_balloon_changes_total", l, (double)c->changes[d][o]);
        }
    r_ok |= bm_registry_add(r, "balloonmgr_rss_dropped_bytes_total", NULL, (double)c->rss_dropped_bytes);

    uint64_t reclaimed_total = 0;
    const BmSnapshot *snap = v ? v->snap : NULL;
    for (size_t i = 0; snap && i < snap->n_domains; i++) {
        const BmDomain *d = &snap->domains[i];
        const BmDomainRecord *rec = bm_counters_find(c, d->uuid);
        const char *dl[] = {"domain", d->name, NULL};
        const char *sg = "unknown", *io = "unknown";
        if (rec && rec->features_known) {
            sg = bm_feature_state_name(rec->sg);
            io = bm_switch_state_name(rec->ioeventfd);
        }
        const char *info[] = {"domain", d->name, "uuid", d->uuid, "state", bm_state_name(d->state),
                              "sg", sg, "ioeventfd", io, NULL};
        r_ok |= bm_registry_add(r, "balloonmgr_domain_info", info, 1);
        if (rec && rec->last_duration_s >= 0 && rec->last_direction >= 0) {
            const char *l[] = {"domain", d->name, "direction", bm_dir_names[rec->last_direction], NULL};
            r_ok |= bm_registry_add(r, "balloonmgr_domain_last_change_duration_seconds", l,
                                    rec->last_duration_s);
        }
        if (rec)
            ADD("balloonmgr_domain_last_change_rss_drop_bytes", dl, rec->last_rss_drop_bytes);
        if (rec && rec->yield.inflated_bytes > 0) {
            r_ok |= bm_registry_add(r, "balloonmgr_domain_inflate_yield_ratio", dl,
                                    bm_yield_permille(&rec->yield) / 1000.0);
            r_ok |= bm_registry_add(r, "balloonmgr_domain_returns_nothing", dl, rec->yield.nothing);
        }
        r_ok |= bm_registry_add(r, "balloonmgr_domain_unresponsive", dl, rec && rec->unresponsive ? 1 : 0);
        ADD("balloonmgr_domain_maximum_bytes", dl, d->max_bytes);
        ADD("balloonmgr_domain_balloon_current_bytes", dl, d->actual_bytes);
        uint64_t target = rec && bm_present(rec->last_target_bytes) ? rec->last_target_bytes : d->actual_bytes;
        ADD("balloonmgr_domain_balloon_target_bytes", dl, target);
        uint64_t reclaimed = bm_domain_reclaimed_bytes(d);
        ADD("balloonmgr_domain_reclaimed_bytes", dl, reclaimed);
        if (bm_present(reclaimed))
            reclaimed_total += reclaimed;
        ADD("balloonmgr_domain_guest_available_bytes", dl, d->available_bytes);
        ADD("balloonmgr_domain_guest_usable_bytes", dl, d->usable_bytes);
        ADD("balloonmgr_domain_guest_unused_bytes", dl, d->unused_bytes);
        ADD("balloonmgr_domain_guest_disk_caches_bytes", dl, d->disk_caches_bytes);
        ADD("balloonmgr_domain_rss_bytes", dl, d->rss_bytes);
        ADD("balloonmgr_domain_guest_major_faults_total", dl, d->major_faults);
        ADD("balloonmgr_domain_guest_swap_in_bytes_total", dl, d->swap_in_bytes);
        ADD("balloonmgr_domain_guest_swap_out_bytes_total", dl, d->swap_out_bytes);
        uint64_t now_s = snap->taken_real_ns / 1000000000ull;
        if (d->active && bm_present(d->last_update_s) && d->last_update_s > 0 && d->last_update_s <= now_s)
            ADD("balloonmgr_domain_stats_age_seconds", dl, now_s - d->last_update_s);
        if (rec && rec->features_known) {
            r_ok |= bm_registry_add(r, "balloonmgr_domain_sg_negotiated", dl, rec->sg == BM_FEAT_NEGOTIATED);
            r_ok |= bm_registry_add(r, "balloonmgr_domain_ioeventfd_enabled", dl, rec->ioeventfd == BM_SWITCH_ON);
        }
    }
    if (snap)
        r_ok |= bm_registry_add(r, "balloonmgr_reclaimed_bytes", NULL, (double)reclaimed_total);

    const BmHost *h = v ? v->host : NULL;
    if (h) {
        ADD("balloonmgr_host_memory_total_bytes", NULL, h->mem_total_bytes);
        ADD("balloonmgr_host_memory_available_bytes", NULL, h->mem_available_bytes);
        if (h->psi_present) {
            r_ok |= bm_registry_add(r, "balloonmgr_host_memory_pressure_some_ratio", NULL, h->psi_some_avg10 / 100);
            r_ok |= bm_registry_add(r, "balloonmgr_host_memory_pressure_full_ratio", NULL, h->psi_full_avg10 / 100);
        }
    }
    if (v && v->have_mode)
        for (int m = BM_HOST_HOLD; m <= BM_HOST_RELEASE; m++) {
            const char *l[] = {"mode", bm_host_mode_name((BmHostMode)m), NULL};
            r_ok |= bm_registry_add(r, "balloonmgr_host_mode", l, m == (int)v->mode);
        }
    if (v && v->have_mode)
        r_ok |= bm_registry_add(r, "balloonmgr_host_unmet_bytes", NULL, (double)v->unmet_bytes);

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
    r_ok |= bm_registry_add(r, "balloonmgr_libvirt_up", NULL, v && v->libvirt_up ? 1 : 0);
    if (c->last_success_s)
        r_ok |= bm_registry_add(r, "balloonmgr_last_successful_pass_timestamp_seconds", NULL,
                                (double)c->last_success_s);
    const char *bl[] = {"version", BM_VERSION, NULL};
    r_ok |= bm_registry_add(r, "balloonmgr_build_info", bl, 1);
    return r_ok < 0 ? -EINVAL : 0;
}
