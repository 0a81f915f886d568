#include "export.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "policy-eval.h"
#include "revision.h"
#include "util.h"

#ifndef BM_VERSION
#define BM_VERSION "unknown"
#endif

/* ---- the registry ---- */

/* Where a family's samples come from. SRC_CODE: the add_* functions below add them (extra
 * labels, histograms, values computed or chosen); any other: one field of that struct, which
 * add_fields() reads for every row of the source, with no label (the host's sources) or with
 * domain=NAME (a domain's). */
typedef enum {
    SRC_CODE,
    SRC_COUNTERS, /* the ledger's BmCounters */
    SRC_HOST,     /* BmHost, once the host was read */
    SRC_PLAN,     /* the last pass's BmPlan, from the first pass on */
    SRC_DOMAIN,   /* each domain's BmDomain */
    SRC_ENTRY,    /* the domain's BmLedgerEntry, where it has one */
    SRC_DECISION, /* the domain's BmDecision in the last plan, where it has one */
    SRC_COUNT
} Source;

/* How a field is read: its C type, found by KIND_OF() (another type does not compile). */
typedef enum {
    KIND_U64,    /* uint64_t: BM_ABSENT is no sample */
    KIND_BOOL,   /* bool: 0 or 1 */
    KIND_DOUBLE, /* double: below 0 (none yet) or NaN is no sample */
} Kind;

/* When a field's row has no sample. */
enum {
    NONZERO = 1 << 0,     /* while the field is 0 (never happened) */
    ACTIVE = 1 << 1,      /* for a domain that is not running */
    LIBVIRT_DUP = 1 << 2, /* with --no-libvirt-duplicates: libvirt exporters export it too */
};

/* One metric family: its declaration and, unless SRC_CODE, where its samples are read. */
typedef struct {
    const char *name;
    BmMetricType type;
    Source from;
    Kind kind;
    size_t offset; /* of the field in from's struct */
    unsigned flags;
    const char *help;
} ExportFamily;

#define KIND_OF(st, member)                                                                        \
    _Generic(((st *)0)->member, uint64_t: KIND_U64, bool: KIND_BOOL, double: KIND_DOUBLE)
#define FROM(src, st, member, flags) src, KIND_OF(st, member), offsetof(st, member), flags
#define COUNTERS(member, flags) FROM(SRC_COUNTERS, BmCounters, member, flags)
#define HOST(member, flags) FROM(SRC_HOST, BmHost, member, flags)
#define PLAN(member, flags) FROM(SRC_PLAN, BmPlan, member, flags)
#define DOMAIN(member, flags) FROM(SRC_DOMAIN, BmDomain, member, flags)
#define ENTRY(member, flags) FROM(SRC_ENTRY, BmLedgerEntry, member, flags)
#define DECISION(member, flags) FROM(SRC_DECISION, BmDecision, member, flags)
#define BY_CODE SRC_CODE, KIND_U64, 0, 0

/* Every family, in the order the exposition shows them. A family whose sample is one field of
 * a source's struct is just its row here; the others are added by code below. */
static const ExportFamily families[] = {
    {"balloonmgr_balloon_change_duration_seconds", BM_METRIC_HISTOGRAM, BY_CODE,
     "Time from setting a balloon target to reaching it (within 1 MiB), inflate or deflate, by SG."},
    {"balloonmgr_balloon_changes_total", BM_METRIC_COUNTER, BY_CODE,
     "Balloon target changes by how they ended."},
    {"balloonmgr_domain_last_change_duration_seconds", BM_METRIC_GAUGE, BY_CODE,
     "Duration of the domain's last balloon change, until it ended."},
    {"balloonmgr_domain_last_change_rss_drop_bytes", BM_METRIC_GAUGE, ENTRY(last_rss_drop_bytes, 0),
     "QEMU RSS before minus after the domain's last inflate."},
    {"balloonmgr_rss_dropped_bytes_total", BM_METRIC_COUNTER, COUNTERS(rss_dropped_bytes, 0),
     "Sum of QEMU RSS drops observed after inflates."},
    {"balloonmgr_cache_inflated_bytes_total", BM_METRIC_COUNTER, COUNTERS(cache_taken_bytes, 0),
     "Balloon growth taken from guest page caches not known hot."},
    {"balloonmgr_hot_cache_inflated_bytes_total", BM_METRIC_COUNTER,
     COUNTERS(hot_cache_taken_bytes, 0),
     "Balloon growth taken from hot guest page caches, only with the host near its own OOM."},
    {"balloonmgr_domain_inflate_yield_ratio", BM_METRIC_GAUGE, BY_CODE,
     "QEMU RSS drop per byte of balloon growth over the domain's inflates, 0..1."},
    {"balloonmgr_domain_returns_nothing", BM_METRIC_GAUGE, BY_CODE,
     "1 when the domain's last inflate gave the host (almost) nothing back."},
    {"balloonmgr_domain_unresponsive", BM_METRIC_GAUGE, BY_CODE,
     "1 when the domain's last change stalled or timed out; it is not re-targeted meanwhile."},
    {"balloonmgr_domain_info", BM_METRIC_GAUGE, BY_CODE,
     "Domain identity, state, SG verdict and ioeventfd."},
    {"balloonmgr_domain_maximum_bytes", BM_METRIC_GAUGE, DOMAIN(max_bytes, LIBVIRT_DUP),
     "Maximum memory of the domain."},
    {"balloonmgr_domain_balloon_current_bytes", BM_METRIC_GAUGE, DOMAIN(actual_bytes, LIBVIRT_DUP),
     "Balloon current: memory the guest has."},
    {"balloonmgr_domain_balloon_target_bytes", BM_METRIC_GAUGE, BY_CODE,
     "Last balloon target balloonmgr set, else the current size."},
    {"balloonmgr_domain_reclaimed_bytes", BM_METRIC_GAUGE, BY_CODE,
     "Maximum minus balloon current (virtio-mem: base and the devices' sizes minus base and "
     "what they plugged), by the device that moves the domain."},
    {"balloonmgr_domain_guest_available_bytes", BM_METRIC_GAUGE,
     DOMAIN(available_bytes, LIBVIRT_DUP), "Guest total memory as the guest sees it."},
    {"balloonmgr_domain_guest_usable_bytes", BM_METRIC_GAUGE, DOMAIN(usable_bytes, LIBVIRT_DUP),
     "Memory the guest could use without swapping."},
    {"balloonmgr_domain_guest_unused_bytes", BM_METRIC_GAUGE, DOMAIN(unused_bytes, LIBVIRT_DUP),
     "Guest free memory."},
    {"balloonmgr_domain_guest_disk_caches_bytes", BM_METRIC_GAUGE,
     DOMAIN(disk_caches_bytes, LIBVIRT_DUP), "Guest page cache."},
    {"balloonmgr_domain_rss_bytes", BM_METRIC_GAUGE, DOMAIN(rss_bytes, LIBVIRT_DUP),
     "Resident memory of the domain's QEMU process."},
    {"balloonmgr_domain_guest_major_faults_total", BM_METRIC_COUNTER,
     DOMAIN(major_faults, LIBVIRT_DUP), "Guest major page faults."},
    {"balloonmgr_domain_guest_minor_faults_total", BM_METRIC_COUNTER,
     DOMAIN(minor_faults, LIBVIRT_DUP), "Guest minor page faults."},
    {"balloonmgr_domain_guest_swap_in_bytes_total", BM_METRIC_COUNTER,
     DOMAIN(swap_in_bytes, LIBVIRT_DUP), "Guest swap-in."},
    {"balloonmgr_domain_guest_swap_out_bytes_total", BM_METRIC_COUNTER,
     DOMAIN(swap_out_bytes, LIBVIRT_DUP), "Guest swap-out."},
    {"balloonmgr_domain_disk_read_bytes_total", BM_METRIC_COUNTER,
     DOMAIN(disk_read_bytes, LIBVIRT_DUP | ACTIVE),
     "Bytes read from all the domain's disks (QEMU's block statistics)."},
    {"balloonmgr_domain_page_cache_hot", BM_METRIC_GAUGE, DECISION(cache_hot, 0),
     "1 when the guest's disk reads rose after an inflate in this pressure episode: its page cache is taken last."},
    {"balloonmgr_domain_guest_oom_kills_total", BM_METRIC_COUNTER, DOMAIN(starve.oom_kills, 0),
     "Guest OOM kills (Linux 6.10+ guests, read through the QEMU monitor where allowed)."},
    {"balloonmgr_domain_guest_alloc_stalls_total", BM_METRIC_COUNTER,
     DOMAIN(starve.alloc_stalls, 0),
     "Guest allocations that entered direct reclaim (Linux 6.10+, QEMU monitor)."},
    {"balloonmgr_domain_guest_scanned_bytes_total", BM_METRIC_COUNTER, BY_CODE,
     "Guest memory scanned for reclaim, by kswapd or direct reclaim (Linux 6.10+, QEMU monitor)."},
    {"balloonmgr_domain_guest_reclaimed_bytes_total", BM_METRIC_COUNTER, BY_CODE,
     "Guest memory reclaimed, by kswapd or direct reclaim (Linux 6.10+, QEMU monitor)."},
    {"balloonmgr_domain_stats_last_update_timestamp_seconds", BM_METRIC_GAUGE, BY_CODE,
     "When the guest last updated its memory statistics, Unix time."},
    {"balloonmgr_domain_sg_negotiated", BM_METRIC_GAUGE, BY_CODE,
     "1 when VIRTIO_BALLOON_F_SG is negotiated."},
    {"balloonmgr_domain_ioeventfd_enabled", BM_METRIC_GAUGE, BY_CODE,
     "1 when the balloon's ioeventfd is on."},
    {"balloonmgr_domain_feature_configured", BM_METRIC_GAUGE, BY_CODE,
     "1 when the domain XML turns the balloon feature on (free_page_reporting, deflate_on_oom)."},
    {"balloonmgr_domain_feature_negotiated", BM_METRIC_GAUGE, BY_CODE,
     "1 when the QEMU monitor found the balloon feature negotiated (where asked)."},
    {"balloonmgr_domain_backed_free_bytes", BM_METRIC_GAUGE, BY_CODE,
     "Free guest memory the QEMU process holds: RSS minus guest use minus QEMU's own memory."},
    {"balloonmgr_domain_virtio_mem_size_bytes", BM_METRIC_GAUGE, BY_CODE,
     "Most memory the virtio-mem device can plug."},
    {"balloonmgr_domain_virtio_mem_block_bytes", BM_METRIC_GAUGE, BY_CODE,
     "Block size of the virtio-mem device: the step of every plug and unplug."},
    {"balloonmgr_domain_virtio_mem_requested_bytes", BM_METRIC_GAUGE, BY_CODE,
     "Memory the host asks the guest to have plugged in the virtio-mem device."},
    {"balloonmgr_domain_virtio_mem_current_bytes", BM_METRIC_GAUGE, BY_CODE,
     "Memory the guest has plugged in the virtio-mem device (what it can still unplug)."},
    {"balloonmgr_domain_virtio_mem_refused_bytes_total", BM_METRIC_COUNTER,
     ENTRY(vmem_refused_total_bytes, NONZERO),
     "Memory the guest did not unplug of what balloonmgr asked (virtio-mem unplugs that stalled)."},
    {"balloonmgr_reclaimed_bytes", BM_METRIC_GAUGE, BY_CODE,
     "Memory reclaimed from all domains, by the device that moves each."},
    {"balloonmgr_host_memory_total_bytes", BM_METRIC_GAUGE, HOST(mem_total_bytes, 0),
     "Host MemTotal."},
    {"balloonmgr_host_memory_available_bytes", BM_METRIC_GAUGE, HOST(mem_available_bytes, 0),
     "Host MemAvailable."},
    {"balloonmgr_host_memory_percpu_free_bytes", BM_METRIC_GAUGE, HOST(percpu_free_bytes, 0),
     "Free pages on the kernel's per-CPU lists, which MemAvailable does not count."},
    {"balloonmgr_host_hugepages_total_bytes", BM_METRIC_GAUGE, HOST(hugepages_total_bytes, 0),
     "The host's pool of huge pages of the default size (HugePages_Total), 0 without one."},
    {"balloonmgr_host_hugepages_free_bytes", BM_METRIC_GAUGE, HOST(hugepages_free_bytes, 0),
     "Free pages of that pool (HugePages_Free)."},
    {"balloonmgr_host_hugepages_need_bytes", BM_METRIC_GAUGE, PLAN(hugepages_need_bytes, 0),
     "What the huge-page pool lacked below hugepages_free_below in the last pass (else 0)."},
    {"balloonmgr_host_memory_percpu_drained_bytes_total", BM_METRIC_COUNTER,
     COUNTERS(percpu_drained_bytes, 0),
     "Free pages balloonmgr gave back from the per-CPU lists to the free lists MemAvailable counts."},
    {"balloonmgr_host_memory_pressure_some_ratio", BM_METRIC_GAUGE, BY_CODE,
     "Host PSI memory some avg10, 0..1."},
    {"balloonmgr_host_memory_pressure_full_ratio", BM_METRIC_GAUGE, BY_CODE,
     "Host PSI memory full avg10, 0..1."},
    {"balloonmgr_host_mode", BM_METRIC_GAUGE, BY_CODE, "1 for the host's current policy mode."},
    {"balloonmgr_host_need_bytes", BM_METRIC_GAUGE, PLAN(need_bytes, 0),
     "Memory the host asked the guests for in the last pass (reclaim mode; else 0)."},
    {"balloonmgr_host_planned_bytes", BM_METRIC_GAUGE, BY_CODE,
     "Balloon growth (inflate) or shrinkage (deflate) the last pass planned, by direction."},
    {"balloonmgr_host_unmet_bytes", BM_METRIC_GAUGE, PLAN(unmet_bytes, 0),
     "Memory the host needs that the guests cannot give back without going short."},
    {"balloonmgr_host_backed_free_bytes", BM_METRIC_GAUGE, BY_CODE,
     "Free guest memory the QEMU processes hold, summed over the domains."},
    {"balloonmgr_domain_short_of_memory", BM_METRIC_GAUGE, DECISION(short_of_memory, 0),
     "1 when the last pass found the guest short of memory or under pressure."},
    {"balloonmgr_passes_total", BM_METRIC_COUNTER, COUNTERS(passes, 0), "Policy passes run."},
    {"balloonmgr_pass_duration_seconds", BM_METRIC_GAUGE, COUNTERS(last_pass_duration_s, 0),
     "Duration of the last policy pass."},
    {"balloonmgr_target_changes_total", BM_METRIC_COUNTER, BY_CODE,
     "Balloon targets set by policy passes."},
    {"balloonmgr_errors_total", BM_METRIC_COUNTER, BY_CODE, "Errors by kind."},
    {"balloonmgr_libvirt_up", BM_METRIC_GAUGE, BY_CODE, "1 while the libvirt connection is up."},
    {"balloonmgr_last_successful_pass_timestamp_seconds", BM_METRIC_GAUGE,
     COUNTERS(last_success_s, NONZERO), "When the last policy pass completed without error."},
    {"balloonmgr_build_info", BM_METRIC_GAUGE, BY_CODE, "Version of balloonmgr and the revision it was built from."},
};

/* The samples of the families read from fields: bases[src] is the struct of source src, or
 * NULL (none: no sample); labels as for bm_registry_add(); rows with a flag of skip have no
 * sample. */
static int add_fields(BmRegistry *r, const void *const bases[SRC_COUNT], const char *const *labels,
                      unsigned skip)
{
    int r_ok = 0;
    for (size_t i = 0; i < BM_ARRAY_SIZE(families); i++) {
        const ExportFamily *f = &families[i];
        const char *p = bases[f->from];
        if (f->from == SRC_CODE || !p || (f->flags & skip))
            continue;
        p += f->offset;
        double v;
        switch (f->kind) {
        case KIND_U64: {
            uint64_t u = *(const uint64_t *)p;
            if (!bm_present(u))
                continue;
            v = (double)u;
            break;
        }
        case KIND_BOOL: v = *(const bool *)p; break;
        case KIND_DOUBLE:
            v = *(const double *)p;
            if (!(v >= 0))
                continue;
            break;
        default: continue;
        }
        if (v == 0 && (f->flags & NONZERO))
            continue;
        r_ok |= bm_registry_add(r, f->name, labels, v);
    }
    return r_ok;
}

/* bm_registry_declare() for every family. */
static int declare_families(BmRegistry *r)
{
    int r_ok = 0;
    for (size_t i = 0; i < BM_ARRAY_SIZE(families); i++)
        r_ok |= bm_registry_declare(r, families[i].name, families[i].type, families[i].help);
    return r_ok;
}

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
    for (int v = 0; v < BM_DEV_COUNT; v++)
        for (int d = 0; d < BM_DIR_COUNT; d++)
            for (int s = 0; s < BM_SGL_COUNT; s++) {
                const char *l[] = {"device", bm_device_names[v], "direction", bm_dir_names[d],
                                   "sg", bm_sg_label_names[s], NULL};
                r_ok |= bm_registry_add_histogram(r, "balloonmgr_balloon_change_duration_seconds",
                                                  l, &c->latency[v][d][s]);
            }
    for (int v = 0; v < BM_DEV_COUNT; v++)
        for (int d = 0; d < BM_DIR_COUNT; d++)
            for (int o = 0; o < BM_CHANGE_ENDED_COUNT; o++) {
                const char *l[] = {"device", bm_device_names[v], "direction", bm_dir_names[d],
                                   "outcome", bm_outcome_names[o], NULL};
                r_ok |= bm_registry_add(r, "balloonmgr_balloon_changes_total", l,
                                        (double)c->changes[v][d][o]);
            }
    return r_ok;
}

/* A word of the CLI's ("shut off", "not-offered") as a label value: snake_case, as
 * node_exporter's label values are ("shut_off", "not_offered"). Returns buf (size n). */
static const char *label_value(const char *word, char *buf, size_t n)
{
    size_t i = 0;
    for (; word[i] && i + 1 < n; i++)
        buf[i] = word[i] == ' ' || word[i] == '-' ? '_' : word[i];
    buf[i] = '\0';
    return buf;
}

/* What balloonmgr knows of one domain from the ledger (rec may be NULL). */
static int add_domain_record(BmRegistry *r, const BmDomain *d, const BmLedgerEntry *rec)
{
    int r_ok = 0;
    const char *dl[] = {"domain", d->name, NULL};
    char state[32], sg[32], io[32];
    label_value(bm_snapshot_run_state_name(d->state), state, sizeof(state));
    label_value(rec && rec->features_known ? bm_feature_state_name(rec->sg) : "unknown", sg, sizeof(sg));
    label_value(rec && rec->features_known ? bm_switch_state_name(rec->ioeventfd) : "unknown", io,
                sizeof(io));
    const char *info[] = {"domain", d->name, "uuid", d->uuid, "state", state, "sg", sg, "ioeventfd", io,
                          NULL};
    r_ok |= bm_registry_add(r, "balloonmgr_domain_info", info, 1);
    if (rec && rec->last_duration_s >= 0 && rec->last_direction >= 0) {
        const char *l[] = {"domain", d->name, "direction", bm_dir_names[rec->last_direction], NULL};
        r_ok |= bm_registry_add(r, "balloonmgr_domain_last_change_duration_seconds", l, rec->last_duration_s);
    }
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

/* What moves d's memory: its virtio-mem devices where it has no usable balloon (BM_DEV_*). */
static int device_of(const BmDomain *d)
{
    return d->vmem ? BM_DEV_VIRTIO_MEM : BM_DEV_BALLOON;
}

/* What of one domain's reading is not a field of it: reclaimed, the starvation statistics
 * by reclaimer (libvirt drops them, so never a duplicate), the statistics' timestamp: not one
 * from before the machine booted (boot_s, 0 when not known), which no guest of this host set
 * (libvirt's test driver reports one from 1989), as status shows no age for it. */
static int add_domain_reading(BmRegistry *r, const BmDomain *d, uint64_t now_s, uint64_t boot_s)
{
    int r_ok = 0;
    const char *dl[] = {"domain", d->name, NULL};
    const char *rl[] = {"domain", d->name, "device", bm_device_names[device_of(d)], NULL};
    ADD("balloonmgr_domain_reclaimed_bytes", rl, bm_domain_reclaimed_bytes(d));
    const BmStarveStats *st = &d->starve;
    const char *kswapd[] = {"domain", d->name, "reclaimer", "kswapd", NULL};
    const char *direct[] = {"domain", d->name, "reclaimer", "direct", NULL};
    ADD("balloonmgr_domain_guest_scanned_bytes_total", kswapd, st->async_scan_bytes);
    ADD("balloonmgr_domain_guest_scanned_bytes_total", direct, st->direct_scan_bytes);
    ADD("balloonmgr_domain_guest_reclaimed_bytes_total", kswapd, st->async_reclaim_bytes);
    ADD("balloonmgr_domain_guest_reclaimed_bytes_total", direct, st->direct_reclaim_bytes);
    if (d->active && bm_present(d->last_update_s) && d->last_update_s > 0 && d->last_update_s <= now_s &&
        d->last_update_s + 1 >= boot_s)
        ADD("balloonmgr_domain_stats_last_update_timestamp_seconds", dl, d->last_update_s);
    return r_ok;
}

/* Each virtio-mem device of a domain: one sample per family, labelled by domain, alias (the
 * device's, or virtiomemN by its place) and guest NUMA node ("" when the XML has none); what it
 * has plugged only while the domain runs. */
static int add_domain_virtio_mem(BmRegistry *r, const BmDomain *d)
{
    int r_ok = 0;
    for (size_t i = 0; d->balloon_known && i < d->balloon.n_virtio_mem; i++) {
        const BmVirtioMem *m = &d->balloon.virtio_mem[i];
        char dev[64], node[16] = "";
        if (m->node >= 0)
            snprintf(node, sizeof(node), "%d", m->node);
        const char *l[] = {"domain", d->name, "alias",
                           bm_domxml_virtio_mem_name(&d->balloon, i, dev, sizeof(dev)), "node", node,
                           NULL};
        ADD("balloonmgr_domain_virtio_mem_size_bytes", l, m->size_bytes);
        ADD("balloonmgr_domain_virtio_mem_block_bytes", l, m->block_bytes);
        ADD("balloonmgr_domain_virtio_mem_requested_bytes", l, m->requested_bytes);
        if (d->active)
            ADD("balloonmgr_domain_virtio_mem_current_bytes", l, m->current_bytes);
    }
    return r_ok;
}

/* Every domain of the rows, with its decision in the last plan (the row's), and the sum of what
 * was reclaimed. */
static int add_domains(BmRegistry *r, const BmRows *rows, uint64_t now_s, uint64_t boot_s,
                       bool no_dups, const BmPlan *plan)
{
    int r_ok = 0;
    uint64_t reclaimed_total[BM_DEV_COUNT] = {0}, backed_total = 0;
    bool backed_known = false;
    for (size_t i = 0; i < rows->n_rows; i++) {
        const BmDomain *d = rows->rows[i].dom;
        const BmLedgerEntry *rec = rows->rows[i].entry;
        r_ok |= add_domain_record(r, d, rec);
        r_ok |= add_domain_features(r, d, rec);
        r_ok |= add_domain_reading(r, d, now_s, boot_s);
        r_ok |= add_domain_virtio_mem(r, d);
        const char *dl[] = {"domain", d->name, NULL};
        const void *bases[SRC_COUNT] = {[SRC_DOMAIN] = d, [SRC_ENTRY] = rec,
                                        [SRC_DECISION] = rows->rows[i].decision};
        r_ok |= add_fields(r, bases, dl, (no_dups ? LIBVIRT_DUP : 0) | (d->active ? 0 : ACTIVE));
        /* with the last pass's estimate of QEMU's own memory (none before the first pass) */
        uint64_t backed = plan ? bm_domain_backed_free_bytes(d, plan->qemu_overhead_bytes) : BM_ABSENT;
        ADD("balloonmgr_domain_backed_free_bytes", dl, backed);
        if (bm_present(backed)) {
            backed_total += backed;
            backed_known = true;
        }
        uint64_t reclaimed = bm_domain_reclaimed_bytes(d);
        if (bm_present(reclaimed))
            reclaimed_total[device_of(d)] += reclaimed;
    }
    for (int v = 0; v < BM_DEV_COUNT; v++) {
        const char *l[] = {"device", bm_device_names[v], NULL};
        r_ok |= bm_registry_add(r, "balloonmgr_reclaimed_bytes", l, (double)reclaimed_total[v]);
    }
    if (backed_known)
        r_ok |= bm_registry_add(r, "balloonmgr_host_backed_free_bytes", NULL, (double)backed_total);
    return r_ok;
}

static int add_host(BmRegistry *r, const BmView *v)
{
    int r_ok = 0;
    const BmHost *h = v->host;
    if (h && h->psi_present) {
        r_ok |= bm_registry_add(r, "balloonmgr_host_memory_pressure_some_ratio", NULL, h->psi_some_avg10 / 100);
        r_ok |= bm_registry_add(r, "balloonmgr_host_memory_pressure_full_ratio", NULL, h->psi_full_avg10 / 100);
    }
    if (v->have_mode)
        for (int m = BM_HOST_HOLD; m <= BM_HOST_RELEASE; m++) {
            const char *l[] = {"mode", bm_host_mode_name((BmHostMode)m), NULL};
            r_ok |= bm_registry_add(r, "balloonmgr_host_mode", l, m == (int)v->mode);
        }
    if (v->plan) {
        const char *in[] = {"direction", "inflate", NULL}, *de[] = {"direction", "deflate", NULL};
        r_ok |= bm_registry_add(r, "balloonmgr_host_planned_bytes", in, (double)v->plan->planned_inflate_bytes);
        r_ok |= bm_registry_add(r, "balloonmgr_host_planned_bytes", de, (double)v->plan->planned_deflate_bytes);
    }
    return r_ok;
}

/* The agent's own health: changes by direction, errors by kind, the connection, the version. */
static int add_health(BmRegistry *r, const BmCounters *c, bool libvirt_up)
{
    int r_ok = 0;
    for (int d = 0; d < BM_DIR_COUNT; d++) {
        const char *l[] = {"direction", bm_dir_names[d], NULL};
        r_ok |= bm_registry_add(r, "balloonmgr_target_changes_total", l, (double)c->target_changes[d]);
    }
    for (int e = 0; e < BM_ERR_COUNT; e++) {
        const char *l[] = {"kind", bm_error_kind_names[e], NULL};
        r_ok |= bm_registry_add(r, "balloonmgr_errors_total", l, (double)c->errors[e]);
    }
    r_ok |= bm_registry_add(r, "balloonmgr_libvirt_up", NULL, libvirt_up ? 1 : 0);
    const char *bl[] = {"version", BM_VERSION, "revision", BM_REVISION, NULL};
    r_ok |= bm_registry_add(r, "balloonmgr_build_info", bl, 1);
    return r_ok;
}

int bm_export_build(BmRegistry *r, const BmLedger *l, const BmView *v)
{
    static const BmView none = {0};
    if (!v)
        v = &none;
    int r_ok = 0;
    r_ok |= declare_families(r);
    const void *bases[SRC_COUNT] = {[SRC_COUNTERS] = &l->counters, [SRC_HOST] = v->host,
                                    [SRC_PLAN] = v->plan};
    r_ok |= add_fields(r, bases, NULL, 0);
    r_ok |= add_changes(r, &l->counters);
    if (v->snap && v->rows)
        r_ok |= add_domains(r, v->rows, v->snap->taken_real_ns / 1000000000ull, v->snap->boot_real_s,
                            v->no_libvirt_duplicates, v->plan);
    r_ok |= add_host(r, v);
    r_ok |= add_health(r, &l->counters, v->libvirt_up);
    return r_ok < 0 ? -EINVAL : 0;
}
