#include "snapshot.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "error.h"
#include "util.h"
#include "vmem.h"

/* Where each balloon statistic goes: its bulk-stats key, its virDomainMemoryStats tag, the
 * field, and the multiplier from libvirt's unit (KiB or a count) to ours. */
static const struct {
    const char *key;
    int tag;
    size_t offset;
    uint64_t scale;
} balloon_fields[] = {
    {"balloon.current", VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON, offsetof(BmDomain, actual_bytes), 1024},
    {"balloon.available", VIR_DOMAIN_MEMORY_STAT_AVAILABLE, offsetof(BmDomain, available_bytes), 1024},
    {"balloon.usable", VIR_DOMAIN_MEMORY_STAT_USABLE, offsetof(BmDomain, usable_bytes), 1024},
    {"balloon.unused", VIR_DOMAIN_MEMORY_STAT_UNUSED, offsetof(BmDomain, unused_bytes), 1024},
    {"balloon.disk_caches", VIR_DOMAIN_MEMORY_STAT_DISK_CACHES, offsetof(BmDomain, disk_caches_bytes), 1024},
    {"balloon.rss", VIR_DOMAIN_MEMORY_STAT_RSS, offsetof(BmDomain, rss_bytes), 1024},
    {"balloon.swap_in", VIR_DOMAIN_MEMORY_STAT_SWAP_IN, offsetof(BmDomain, swap_in_bytes), 1024},
    {"balloon.swap_out", VIR_DOMAIN_MEMORY_STAT_SWAP_OUT, offsetof(BmDomain, swap_out_bytes), 1024},
    {"balloon.major_fault", VIR_DOMAIN_MEMORY_STAT_MAJOR_FAULT, offsetof(BmDomain, major_faults), 1},
    {"balloon.minor_fault", VIR_DOMAIN_MEMORY_STAT_MINOR_FAULT, offsetof(BmDomain, minor_faults), 1},
    {"balloon.last-update", VIR_DOMAIN_MEMORY_STAT_LAST_UPDATE, offsetof(BmDomain, last_update_s), 1},
};

static uint64_t *field(BmDomain *d, size_t offset)
{
    return (uint64_t *)((char *)d + offset);
}

/* A reported value in our unit, absent when beyond BM_COUNT_MAX (bm_reported()). */
static void set_scaled(uint64_t *dst, unsigned long long v, uint64_t scale)
{
    *dst = bm_reported((uint64_t)v, scale);
}

void bm_snapshot_domain_init(BmDomain *d)
{
    memset(d, 0, sizeof(*d));
    d->state = VIR_DOMAIN_NOSTATE;
    d->max_bytes = BM_ABSENT;
    for (size_t i = 0; i < BM_ARRAY_SIZE(balloon_fields); i++)
        *field(d, balloon_fields[i].offset) = BM_ABSENT;
    d->disk_read_bytes = d->disk_read_reqs = d->cpu_time_ns = BM_ABSENT;
    d->starve = BM_STARVE_STATS_ABSENT; /* read by the engine, through the monitor */
}

static void domain_note_error(BmDomain *d, const char *what, int r)
{
    char *msg = bm_asprintf("%s: %s", what, bm_error_detail(r));
    if (d->error) {
        char *both = bm_asprintf("%s; %s", d->error, msg);
        free(d->error);
        free(msg);
        msg = both;
    }
    d->error = msg;
}

/* The disks' read counters of one bulk record ("block.N.rd.bytes", "block.N.rd.reqs") summed
 * over every disk (no backing images: the bulk call does not ask for them). QEMU's own
 * counters, bounded as a guest's statistics are. */
typedef struct {
    uint64_t count;  /* block.count; BM_ABSENT before it */
    uint64_t sum[2]; /* read bytes, read requests */
    uint64_t seen[2];
    bool bad[2];     /* a counter beyond BM_COUNT_MAX, or the sum past it */
} BlockSums;

/* Takes key into *b; returns whether it was a block key. */
static bool add_block_counter(BlockSums *b, const char *key, unsigned long long v)
{
    static const char *const suffixes[2] = {".rd.bytes", ".rd.reqs"};
    if (strncmp(key, "block.", 6) != 0)
        return false;
    if (strcmp(key, "block.count") == 0) {
        b->count = bm_reported((uint64_t)v, 1);
        return true;
    }
    const char *p = key + 6;
    size_t digits = strspn(p, "0123456789");
    if (digits == 0)
        return false;
    for (size_t k = 0; k < 2; k++) {
        if (strcmp(p + digits, suffixes[k]) != 0)
            continue;
        uint64_t x = bm_reported((uint64_t)v, 1);
        b->bad[k] |= !bm_present(x) || b->sum[k] > BM_COUNT_MAX - x;
        b->sum[k] += b->bad[k] ? 0 : x;
        b->seen[k]++;
        return true;
    }
    return false;
}

/* A sum of the record, or BM_ABSENT: unless every disk of block.count reported its counter (a
 * record of a domain busy with a job has block.count and no counters: a sum of 0 there made
 * the next reading's reads jump by all the disk ever read) and none overflowed. */
static uint64_t block_sum(const BlockSums *b, size_t k)
{
    return bm_present(b->count) && b->count > 0 && b->seen[k] == b->count && !b->bad[k]
               ? b->sum[k]
               : BM_ABSENT;
}

void bm_snapshot_fill_domain(BmDomain *d, const virTypedParameter *params, int n)
{
    BlockSums blocks = {.count = BM_ABSENT};
    for (int i = 0; i < n; i++) {
        const virTypedParameter *p = &params[i];
        unsigned long long v;
        switch (p->type) {
        case VIR_TYPED_PARAM_ULLONG: v = p->value.ul; break;
        case VIR_TYPED_PARAM_LLONG: if (p->value.l < 0) continue; v = (unsigned long long)p->value.l; break;
        case VIR_TYPED_PARAM_UINT: v = p->value.ui; break;
        case VIR_TYPED_PARAM_INT: if (p->value.i < 0) continue; v = (unsigned long long)p->value.i; break;
        default: continue;
        }
        if (strcmp(p->field, "state.state") == 0) {
            d->state = (int)v;
            continue;
        }
        if (strcmp(p->field, "cpu.time") == 0) {
            set_scaled(&d->cpu_time_ns, v, 1);
            continue;
        }
        if (strcmp(p->field, "balloon.maximum") == 0) {
            set_scaled(&d->max_bytes, v, 1024);
            continue;
        }
        if (add_block_counter(&blocks, p->field, v))
            continue;
        for (size_t k = 0; k < BM_ARRAY_SIZE(balloon_fields); k++)
            if (strcmp(p->field, balloon_fields[k].key) == 0)
                set_scaled(field(d, balloon_fields[k].offset), v, balloon_fields[k].scale);
    }
    d->disk_read_bytes = block_sum(&blocks, 0);
    d->disk_read_reqs = block_sum(&blocks, 1);
}

/* State, maximum and current memory from BM_LV(virDomainGetInfo)(): the fallback for drivers
 * without bulk balloon stats (and for shut-off domains). */
static void read_info(BmSnapshot *s, BmDomain *d, virDomainPtr dom)
{
    virDomainInfo info;
    s->libvirt_calls++;
    if (BM_LV(virDomainGetInfo)(dom, &info) < 0) {
        domain_note_error(d, "info", bm_conn_error(NULL));
        return;
    }
    d->state = info.state;
    if (!bm_present(d->max_bytes))
        set_scaled(&d->max_bytes, info.maxMem, 1024);
    if (!bm_present(d->actual_bytes))
        set_scaled(&d->actual_bytes, info.memory, 1024);
}

static void read_memory_stats(BmSnapshot *s, BmDomain *d, virDomainPtr dom)
{
    virDomainMemoryStatStruct st[VIR_DOMAIN_MEMORY_STAT_NR];
    s->libvirt_calls++;
    int n = BM_LV(virDomainMemoryStats)(dom, st, VIR_DOMAIN_MEMORY_STAT_NR, 0);
    if (n < 0) {
        domain_note_error(d, "memory stats", bm_conn_error(NULL));
        return;
    }
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < BM_ARRAY_SIZE(balloon_fields); k++)
            if (st[i].tag == balloon_fields[k].tag)
                set_scaled(field(d, balloon_fields[k].offset), st[i].val, balloon_fields[k].scale);
}

static void read_xml(BmSnapshot *s, BmDomain *d, virDomainPtr dom)
{
    s->libvirt_calls++;
    _cleanup_free_ char *xml = BM_LV(virDomainGetXMLDesc)(dom, 0);
    if (!xml) {
        domain_note_error(d, "XML", bm_conn_error(NULL));
        return;
    }
    int r = bm_domxml_parse_balloon(xml, &d->balloon);
    if (r < 0) {
        domain_note_error(d, "XML", r);
        return;
    }
    d->balloon_known = true;
}

/* Fills d from one stats record (or from dom alone when rec is NULL), calling per-domain
 * APIs only for what the bulk record lacked. */
static void read_domain(BmSnapshot *s, BmDomain *d, virDomainPtr dom, virDomainStatsRecordPtr rec,
                        unsigned flags, const BmXmlCache *cache)
{
    bm_snapshot_domain_init(d);
    d->name = bm_strdup(virDomainGetName(dom));
    if (virDomainGetUUIDString(dom, d->uuid) < 0)
        d->uuid[0] = '\0';
    unsigned id = virDomainGetID(dom); /* no call to libvirtd: the handle has it */
    d->id = id == (unsigned)-1 ? -1 : (int)id;
    bool had_state = false;
    if (rec) {
        bm_snapshot_fill_domain(d, rec->params, rec->nparams);
        for (int i = 0; i < rec->nparams; i++)
            had_state |= strcmp(rec->params[i].field, "state.state") == 0;
    }
    /* the XML first: it also has the maximum, which the bulk record may lack */
    if (flags & BM_SNAPSHOT_XML) {
        /* a cached config serves unless the domain has virtio-mem devices: their <current>
         * moves with no lifecycle event that would drop it from the cache */
        if (cache && d->uuid[0] && cache->lookup(cache->ctx, d->uuid, &d->balloon) &&
            d->balloon.n_virtio_mem == 0) {
            d->balloon_known = true;
        } else {
            read_xml(s, d, dom);
            if (cache && d->balloon_known && d->uuid[0])
                cache->store(cache->ctx, d->uuid, &d->balloon);
        }
    }
    bool info_read = false;
    if (!had_state) { /* no bulk stats at all: state, maximum and current from GetInfo */
        read_info(s, d, dom);
        info_read = true;
    }
    if (d->balloon_known && !bm_present(d->max_bytes))
        d->max_bytes = d->balloon.memory_bytes;
    bool running = d->state != VIR_DOMAIN_SHUTOFF && d->state != VIR_DOMAIN_NOSTATE;
    if (!running && d->balloon_known && !bm_present(d->actual_bytes))
        d->actual_bytes = d->balloon.current_memory_bytes;

    /* the guest statistics: the bulk record had them, or ask per domain (test driver); the
     * balloon's current size comes with them */
    if (running && !bm_present(d->last_update_s) && !bm_present(d->unused_bytes) &&
        !bm_present(d->rss_bytes))
        read_memory_stats(s, d, dom);
    if (!info_read && (!bm_present(d->max_bytes) || !bm_present(d->actual_bytes)))
        read_info(s, d, dom);
    d->active = running;
    /* without a balloon, libvirt's "current" is its count of the domain's memory, which need
     * not follow what virtio-mem devices have plugged: the guest has its base memory and that */
    uint64_t vmem_now = d->balloon_known && !d->balloon.present && running
                            ? bm_vmem_domain_bytes(&d->balloon) : BM_ABSENT;
    if (bm_present(vmem_now) && bm_present(bm_vmem_plugged_bytes(&d->balloon)))
        d->actual_bytes = vmem_now;
    if (flags & BM_SNAPSHOT_HANDLES) {
        virDomainRef(dom);
        d->handle = dom;
    }
}

static int cmp_domain(const void *a, const void *b)
{
    return strcmp(((const BmDomain *)a)->name, ((const BmDomain *)b)->name);
}

static int cmp_domain_uuid(const void *a, const void *b)
{
    return strcmp((*(const BmDomain *const *)a)->uuid, (*(const BmDomain *const *)b)->uuid);
}

void bm_snapshot_index_uuid(BmSnapshot *s)
{
    free(s->by_uuid);
    s->by_uuid = bm_malloc0((s->n_domains + 1) * sizeof(BmDomain *));
    for (size_t i = 0; i < s->n_domains; i++)
        s->by_uuid[i] = &s->domains[i];
    qsort(s->by_uuid, s->n_domains, sizeof(BmDomain *), cmp_domain_uuid);
}

/* The bulk call, retried without NOWAIT for drivers that do not know that flag. Returns the
 * number of records or -1 (libvirt error left set). */
static int bulk_stats(BmSnapshot *s, virConnectPtr conn, unsigned list_flags,
                      virDomainStatsRecordPtr **ret_recs)
{
    const unsigned types = VIR_DOMAIN_STATS_STATE | VIR_DOMAIN_STATS_BALLOON |
                           VIR_DOMAIN_STATS_BLOCK | VIR_DOMAIN_STATS_CPU_TOTAL;
    unsigned nowait = VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT;
    for (int attempt = 0; attempt < 2; attempt++, nowait = 0) {
        s->libvirt_calls++;
        int n = BM_LV(virConnectGetAllDomainStats)(conn, types, ret_recs, list_flags | nowait);
        if (n >= 0)
            return n;
        virErrorPtr e = virGetLastError();
        if (!e || (e->code != VIR_ERR_INVALID_ARG && e->code != VIR_ERR_NO_SUPPORT &&
                   e->code != VIR_ERR_ARGUMENT_UNSUPPORTED))
            return -1;
        virResetLastError();
    }
    return -1;
}

DEFINE_CLEANUP(virDomainStatsRecordPtr *, virDomainStatsRecordListFree)

static void free_domain_list(virDomainPtr *doms)
{
    for (size_t i = 0; doms && doms[i]; i++)
        virDomainFree(doms[i]);
    free(doms);
}
DEFINE_CLEANUP(virDomainPtr *, free_domain_list)

static void release_domain(void *handle)
{
    virDomainFree(handle);
}

int bm_snapshot_take(virConnectPtr conn, unsigned flags, BmSnapshot *ret)
{
    return bm_snapshot_take_cached(conn, flags, NULL, ret);
}

/* When this machine booted, wall-clock seconds (0 when the clock cannot say). */
static uint64_t boot_real_s(uint64_t now_real_ns)
{
    struct timespec up;
    if (clock_gettime(CLOCK_BOOTTIME, &up) < 0 || (uint64_t)up.tv_sec > now_real_ns / 1000000000ull)
        return 0;
    return now_real_ns / 1000000000ull - (uint64_t)up.tv_sec;
}

int bm_snapshot_take_cached(virConnectPtr conn, unsigned flags, const BmXmlCache *cache,
                            BmSnapshot *ret)
{
    uint64_t now_ns = bm_now_real_ns();
    *ret = (BmSnapshot){.taken_real_ns = now_ns, .boot_real_s = boot_real_s(now_ns)};
    _cleanup_(free_domain_listp) virDomainPtr *doms = NULL;
    size_t n_doms = 0;
    unsigned list_flags = (flags & BM_SNAPSHOT_ACTIVE_ONLY)
                              ? VIR_CONNECT_LIST_DOMAINS_ACTIVE
                              : VIR_CONNECT_LIST_DOMAINS_ACTIVE | VIR_CONNECT_LIST_DOMAINS_INACTIVE;

    _cleanup_(virDomainStatsRecordListFreep) virDomainStatsRecordPtr *recs = NULL;
    int n_recs = bulk_stats(ret, conn, list_flags, &recs);
    ret->bulk = n_recs >= 0;
    if (n_recs < 0) {
        /* no bulk stats at all: list the domains and read each one */
        virResetLastError();
        ret->libvirt_calls++;
        int n = BM_LV(virConnectListAllDomains)(conn, &doms, list_flags);
        if (n < 0)
            return bm_conn_error("cannot list domains");
        n_doms = (size_t)n;
        ret->domains = bm_malloc0((n_doms ? n_doms : 1) * sizeof(BmDomain));
        for (size_t i = 0; i < n_doms; i++)
            read_domain(ret, &ret->domains[ret->n_domains++], doms[i], NULL, flags, cache);
    } else {
        ret->domains = bm_malloc0((n_recs ? (size_t)n_recs : 1) * sizeof(BmDomain));
        for (int i = 0; i < n_recs; i++)
            read_domain(ret, &ret->domains[ret->n_domains++], recs[i]->dom, recs[i], flags, cache);
    }

    qsort(ret->domains, ret->n_domains, sizeof(BmDomain), cmp_domain);
    bm_snapshot_index_uuid(ret);
    if (flags & BM_SNAPSHOT_HANDLES)
        ret->release = release_domain;
    return 0;
}

static int cmp_domain_ptr(const void *a, const void *b)
{
    return cmp_domain(*(const BmDomain *const *)a, *(const BmDomain *const *)b);
}

int bm_snapshot_pick(virConnectPtr conn, const BmSnapshot *s, char *const *names,
                     const BmDomain ***ret, size_t *ret_n)
{
    size_t n_names = 0, n = 0;
    while (names[n_names])
        n_names++;
    _cleanup_free_ const BmDomain **picked = bm_malloc0((n_names + 1) * sizeof(*picked));
    for (size_t i = 0; i < n_names; i++) {
        virDomainPtr dom = NULL;
        int r = bm_conn_lookup(conn, names[i], &dom);
        if (r < 0) {
            char buf[512]; /* as bm_report's object: a long name is cut alike */
            return bm_error_prefix(r, "'%s'", bm_printable(names[i], buf, sizeof(buf)));
        }
        char uuid[VIR_UUID_STRING_BUFLEN];
        const BmDomain *d =
            virDomainGetUUIDString(dom, uuid) == 0 ? bm_snapshot_find_uuid(s, uuid) : NULL;
        virDomainFree(dom);
        if (d)
            picked[n++] = d;
    }
    qsort(picked, n, sizeof(*picked), cmp_domain_ptr);
    *ret = TAKE_PTR(picked);
    *ret_n = n;
    return 0;
}

void bm_snapshot_drop_handles(BmSnapshot *s)
{
    for (size_t i = 0; i < s->n_domains; i++) {
        if (s->domains[i].handle && s->release)
            s->release(s->domains[i].handle);
        s->domains[i].handle = NULL;
    }
}

void bm_snapshot_clear(BmSnapshot *s)
{
    if (!s)
        return;
    bm_snapshot_drop_handles(s);
    for (size_t i = 0; i < s->n_domains; i++) {
        free(s->domains[i].name);
        free(s->domains[i].error);
    }
    free(s->domains);
    free(s->by_uuid);
    *s = (BmSnapshot){0};
}

const BmDomain *bm_snapshot_find(const BmSnapshot *s, const char *name)
{
    for (size_t i = 0; i < s->n_domains; i++)
        if (strcmp(s->domains[i].name, name) == 0)
            return &s->domains[i];
    return NULL;
}

const BmDomain *bm_snapshot_find_uuid(const BmSnapshot *s, const char *uuid)
{
    if (!s->by_uuid) {
        for (size_t i = 0; i < s->n_domains; i++)
            if (strcmp(s->domains[i].uuid, uuid) == 0)
                return &s->domains[i];
        return NULL;
    }
    BmDomain key;
    snprintf(key.uuid, sizeof(key.uuid), "%s", uuid);
    const BmDomain *kp = &key, **hit = bsearch(&kp, s->by_uuid, s->n_domains, sizeof(BmDomain *),
                                               cmp_domain_uuid);
    return hit ? *hit : NULL;
}

const char *bm_snapshot_run_state_name(int state)
{
    switch (state) {
    case VIR_DOMAIN_RUNNING: return "running";
    case VIR_DOMAIN_BLOCKED: return "idle";
    case VIR_DOMAIN_PAUSED: return "paused";
    case VIR_DOMAIN_SHUTDOWN: return "in shutdown";
    case VIR_DOMAIN_SHUTOFF: return "shut off";
    case VIR_DOMAIN_CRASHED: return "crashed";
    case VIR_DOMAIN_PMSUSPENDED: return "pmsuspended";
    default: return "no state";
    }
}
