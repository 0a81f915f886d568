/* The model of a host and its guests (model.h) and the host interface onto it (BmHostOps). */
#include "model.h"

#include <errno.h>
#include <libvirt/libvirt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "util.h"

/* measured on the TCG guests of the reference run of 2026-12-01 (its console logs): a touch
 * pass writes about 200 MiB/s, the disk is read at 140 MiB/s; a booted 1 GiB guest's kernel
 * uses 103 MiB and its QEMU process holds 232 MiB (the reference run of 2026-12-04 that
 * replaced it: 3615 MiB of QEMU RSS at rest against 3597, within the calibration's 5%) */
/* an idle TCG guest's vCPU: 1-5% of a CPU */
#define IDLE_CPU_SHARE 0.02
#define TOUCH_MIB_S 200.0
#define DISK_MIB_S 140.0
#define KERNEL_MIB 103.0
#define BOOT_FREED_MIB 9.0
#define QEMU_OWN_MIB 120.0
/* the kernel reserves 1/16 of a guest's memory at boot (64 MiB of 1 GiB): not in MemTotal */
#define RESERVED_SHARE (1.0 / 16)
/* MemAvailable counts free memory and page cache less the low watermark */
#define WATERMARK_MIB 16.0
/* a hot working set is re-read at this rate; a read from disk costs 10 reads from cache */
#define HOT_REREAD_MIB_S 50.0
#define MISS_COST 10.0
/* free page reporting hands free backed memory back within about 2 s */
#define REPORTING_S 2.0
#define PERCPU_TRIM_MIB_S 8.0
#define STEP_S 0.05

int sim_schedule_parse(const char *text, SimSchedule *ret)
{
    *ret = (SimSchedule){0};
    double last = -1;
    const char *p = text;
    while (*p) {
        SimItem it = {0};
        char *end;
        if (ret->n == SIM_MAX_ITEMS)
            return -EINVAL;
        it.at_s = strtod(p, &end);
        if (end == p || *end != ':' || it.at_s < last)
            return -EINVAL;
        p = end + 1;
        static const struct { const char *word; SimItemKind kind; } kinds[] = {
            {"touch:", SIM_TOUCH}, {"cache:", SIM_CACHE}, {"hot:", SIM_HOT}};
        for (size_t k = 0; k < BM_ARRAY_SIZE(kinds); k++)
            if (strncmp(p, kinds[k].word, strlen(kinds[k].word)) == 0) {
                it.kind = kinds[k].kind;
                p += strlen(kinds[k].word);
            }
        it.mib = strtod(p, &end);
        if (end == p || it.mib < 0)
            return -EINVAL;
        p = end;
        if (*p == '@' && it.kind == SIM_HOLD) {
            it.rate_mib_s = strtod(p + 1, &end);
            if (end == p + 1 || it.rate_mib_s <= 0)
                return -EINVAL;
            p = end;
        }
        if (*p == ',')
            p++;
        else if (*p)
            return -EINVAL;
        last = it.at_s;
        ret->items[ret->n++] = it;
    }
    return ret->n ? 0 : -EINVAL;
}

double sim_free(const SimGuest *g)
{
    return g->free_backed + g->free_unbacked;
}

double sim_rss(const SimGuest *g)
{
    if (g->vmem_hugepages) /* huge pages are not in the RSS */
        return QEMU_OWN_MIB * SIM_MIB;
    return QEMU_OWN_MIB * SIM_MIB + g->kernel + g->anon + g->cold + g->hot + g->free_backed;
}

double sim_usable(const SimGuest *g)
{
    double u = sim_free(g) + g->cold + g->hot - WATERMARK_MIB * SIM_MIB;
    return u > 0 ? u : 0;
}

double sim_available(const SimHost *h)
{
    double rss = 0;
    for (size_t i = 0; i < h->n; i++)
        rss += sim_rss(&h->g[i]);
    return h->total - h->other - h->hog - rss - h->percpu_excess - h->hp_total;
}

/* Takes up to x bytes from *from. Returns what it took. */
static double take_from(double *from, double x)
{
    double t = x < *from ? x : *from;
    *from -= t;
    return t;
}

/* An allocation of x bytes of guest memory: free memory (backed first, then never touched),
 * then cold cache, then (with hot) hot cache. Returns what it got. */
static double allocate(SimGuest *g, double x, bool hot)
{
    double got = take_from(&g->free_backed, x);
    got += take_from(&g->free_unbacked, x - got);
    double freed = got;
    got += take_from(&g->cold, x - got);
    if (hot)
        got += take_from(&g->hot, x - got);
    /* page cache reclaimed by the allocation itself: direct reclaim, a stall per 256 KiB */
    g->direct_reclaim += got - freed;
    g->stalls += (got - freed) / (256 * 1024);
    return got;
}

/* The balloon takes x bytes: free memory, the pages freed last first (the buddy allocator's
 * hot end: backed), then never-touched ones, then cold and hot cache. Returns what it took;
 * *ret_backed the part the host had backed. (The reference run of 2026-12-01: 94% of what the
 * balloons took came back as QEMU RSS, with 48-248 MiB never touched in each guest.) */
static double balloon_take(SimGuest *g, double x, double *ret_backed)
{
    double backed = take_from(&g->free_backed, x);
    double got = take_from(&g->free_unbacked, x - backed);
    backed += take_from(&g->cold, x - got - backed);
    backed += take_from(&g->hot, x - got - backed);
    *ret_backed = backed;
    return got + backed;
}

/* Frees x bytes of the load's anonymous memory (still backed). */
static void free_anon(SimGuest *g, double x)
{
    x = take_from(&g->anon, x);
    g->free_backed += x;
}

/* The items of the schedule that are due start. */
static void start_phases(SimHost *h, SimGuest *g)
{
    while (g->phase < g->sched.n && h->t - g->start_s >= g->sched.items[g->phase].at_s) {
        const SimItem *it = &g->sched.items[g->phase++];
        double bytes = it->mib * SIM_MIB;
        g->touching = it->kind == SIM_TOUCH;
        g->rate = it->rate_mib_s * SIM_MIB;
        switch (it->kind) {
        case SIM_HOLD:
        case SIM_TOUCH:
            g->want = bytes;
            break;
        case SIM_CACHE:
            g->cache_want += bytes;
            g->want = 0;
            break;
        case SIM_HOT:
            g->hot_ws = bytes;
            g->want = 0;
            break;
        }
        if (g->anon > g->want)
            free_anon(g, g->anon - g->want); /* shrinking is immediate */
    }
}

/* The load over dt: its anonymous memory toward what it wants (a guest OOM when the guest has
 * no memory left for it), the cache it reads. */
static void run_load(SimHost *h, SimGuest *g, double dt)
{
    g->growing = false;
    if (g->restart_at >= 0) {
        if (h->t < g->restart_at)
            return;
        g->restart_at = -1;
    }
    start_phases(h, g);
    if (g->anon < g->want) {
        double rate = g->rate > 0 ? g->rate : TOUCH_MIB_S * SIM_MIB;
        double x = fmin(g->want - g->anon, rate * dt);
        double got = allocate(g, x, true);
        if (got < x && g->autodeflate && g->actual < g->max) {
            /* deflate-on-oom: the guest takes balloon pages back; the balloon stays there */
            double d = fmin(x - got, g->max - g->actual);
            g->actual += d;
            g->target = g->actual;
            got += d;
        }
        g->anon += got;
        g->growing = got > 0;
        if (got < x) {
            if (!g->oom_kills)
                g->first_oom_t = h->t;
            g->oom_kills++;
            free_anon(g, g->anon);
            g->restart_at = h->t + 1; /* the supervisor restarts the worker in 1 s */
            return;
        }
    }
    if (g->touching && g->want > 0 && g->anon >= g->want) {
        free_anon(g, g->anon); /* touched: freed again */
        g->want = 0;
    }
    if (g->cache_want > 0) {
        double x = fmin(g->cache_want, DISK_MIB_S * SIM_MIB * dt);
        double got = take_from(&g->free_backed, x);
        got += take_from(&g->free_unbacked, x - got);
        g->cold += got;
        g->cache_want -= x;
        g->rd_bytes += x;
    }
}

/* The hot working set over dt: what is missing is read from disk (refilling the cache from
 * free memory and cold cache where there is any), and the guest works slower. */
static void run_hot(SimGuest *g, double dt)
{
    g->work_rate = 1;
    if (g->hot_ws <= 0)
        return;
    double missing = g->hot_ws - g->hot;
    if (missing > 0) {
        double refill = fmin(missing, DISK_MIB_S * SIM_MIB * dt);
        double got = allocate(g, refill, false);
        g->hot += got;
        g->rd_bytes += got;
        g->major_faults += g->buffered ? 0 : got / 4096;
    }
    double miss = (g->hot_ws - g->hot) / g->hot_ws;
    g->work_rate = 1 / (1 + (MISS_COST - 1) * miss);
    double reread = HOT_REREAD_MIB_S * SIM_MIB * dt * g->work_rate * miss;
    g->rd_bytes += reread;
    g->major_faults += g->buffered ? 0 : reread / 4096;
    g->work += g->work_rate * dt;
    g->work_time += dt;
}

/* The balloon over dt toward its target; what the host got back. */
static double move_balloon(SimGuest *g, double dt)
{
    double backed = 0;
    if (g->target < g->actual) {
        double x = fmin(g->actual - g->target, g->inflate_mib_s * SIM_MIB * dt);
        g->actual -= balloon_take(g, x, &backed);
    } else if (g->target > g->actual) {
        double x = fmin(g->target - g->actual, SIM_DEFLATE_MIB_S * SIM_MIB * dt);
        g->actual += x;
        g->free_unbacked += x;
    }
    return backed;
}

/* A virtio-mem guest's device over dt toward its requested size, a block at a time: an unplug
 * at its rate, of a block whose content the guest can move (free memory and page cache cover
 * it), never below vmem_keep; a plug at SIM_DEFLATE_MIB_S. What the host got back. */
static double move_vmem(SimHost *h, SimGuest *g, double dt)
{
    double backed = 0, b = g->vmem_block;
    if (g->vmem_requested < g->vmem_plugged) {
        g->vmem_step += g->vmem_unplug_mib_s * SIM_MIB * dt;
        while (g->vmem_step >= b && g->vmem_plugged - b >= g->vmem_requested) {
            if (g->vmem_plugged - b < g->vmem_keep || sim_free(g) + g->cold + g->hot < b) {
                g->vmem_step = 0; /* it cannot move what is left: it stops */
                break;
            }
            double got;
            balloon_take(g, b, &got);
            if (g->vmem_hugepages)
                h->hp_free += b; /* back to the pool, not to MemAvailable */
            else
                backed += got;
            g->vmem_plugged -= b;
            g->vmem_step -= b;
        }
    } else if (g->vmem_requested > g->vmem_plugged) {
        g->vmem_step += SIM_DEFLATE_MIB_S * SIM_MIB * dt;
        while (g->vmem_step >= b && g->vmem_plugged + b <= g->vmem_requested) {
            if (g->vmem_hugepages && h->hp_free < b) {
                g->vmem_step = 0; /* no huge page to back the block */
                break;
            }
            if (g->vmem_hugepages)
                h->hp_free -= b;
            g->vmem_plugged += b;
            g->free_backed += b; /* pinned as it is plugged */
            g->vmem_step -= b;
        }
    } else {
        g->vmem_step = 0;
    }
    g->actual = g->vmem_base + g->vmem_plugged;
    g->target = g->vmem_base + g->vmem_requested;
    return backed;
}

/* The guest's statistics, copied at each whole second. */
static void take_stats(const SimHost *h, SimGuest *g)
{
    uint64_t s = (uint64_t)floor(h->t);
    if (g->st.at_s == h->epoch_ns / 1000000000ull + s)
        return;
    g->st.at_s = h->epoch_ns / 1000000000ull + s;
    g->st.avail = g->autodeflate ? g->max - g->reserved : g->actual - g->reserved;
    g->st.usable = sim_usable(g);
    g->st.unused = sim_free(g);
    g->st.caches = g->cold + g->hot;
    g->st.majflt = g->major_faults;
    g->st.oom_kills = g->oom_kills;
    g->st.stalls = g->stalls;
    g->st.direct_reclaim = g->direct_reclaim;
}

static void run_hog(SimHost *h, double dt)
{
    if (h->hog_start < 0 || h->t < h->hog_start)
        return;
    if (h->t >= h->hog_end) {
        h->hog = 0;
        return;
    }
    double want = 0, rate = 0;
    for (size_t i = 0; i < h->hog_sched.n && h->t - h->hog_start >= h->hog_sched.items[i].at_s; i++) {
        want = h->hog_sched.items[i].mib * SIM_MIB;
        rate = h->hog_sched.items[i].rate_mib_s * SIM_MIB;
    }
    want = fmin(want, h->hog_size);
    if (want < h->hog) {
        h->hog = want; /* shrinking is immediate */
        return;
    }
    double x = fmin(want - h->hog, rate > 0 ? rate * dt : want);
    x = fmin(x, sim_available(h) - h->hog_floor);
    if (x > 0)
        h->hog += x;
}

static void step(SimHost *h, double dt)
{
    h->t += dt;
    double returned = 0;
    for (size_t i = 0; i < h->n; i++) {
        SimGuest *g = &h->g[i];
        run_load(h, g, dt);
        returned += g->vmem ? move_vmem(h, g, dt) : move_balloon(g, dt);
        run_hot(g, dt);
        g->cpu_ns += (g->cpu_share >= 0 ? g->cpu_share : g->hot_ws > 0 ? 1.0 : IDLE_CPU_SHARE) * dt * 1e9;
        if (g->reporting && g->free_backed > 0) {
            double r = g->free_backed * fmin(1, dt / REPORTING_S);
            g->free_backed -= r;
            g->free_unbacked += r;
            returned += r;
        }
        take_stats(h, g);
    }
    h->percpu_excess += h->percpu_share * returned;
    h->percpu_excess = fmax(0, h->percpu_excess - PERCPU_TRIM_MIB_S * SIM_MIB * h->cpus * dt);
    run_hog(h, dt);
}

void sim_advance(SimHost *h, double dt)
{
    double all = dt;
    while (dt > 1e-9) {
        double d = dt < STEP_S ? dt : STEP_S;
        step(h, d);
        dt -= d;
    }
    if (h->observer && all > 1e-9)
        h->observer(h->observer_ctx, all);
}

/* ---- the host interface onto the model (BmHostOps) and its clock ---- */

static uint64_t clock_mono_ns(void *ctx)
{
    const SimHost *h = ctx;
    return (uint64_t)llround(h->t * 1e9);
}

static uint64_t clock_real_ns(void *ctx)
{
    const SimHost *h = ctx;
    return h->epoch_ns + clock_mono_ns(ctx);
}

static void clock_sleep_ms(void *ctx, unsigned ms)
{
    sim_advance(ctx, ms / 1000.0);
}

static void model_boot_id(void *ctx, char *buf, size_t n)
{
    (void)ctx;
    snprintf(buf, n, "5e1a0000-b007-4000-8000-000000000000");
}

static void model_set_conn(void *ctx, virConnectPtr conn)
{
    (void)ctx, (void)conn; /* the model's domains need no connection */
}

static int model_read_host(void *ctx, BmHost *ret)
{
    const SimHost *h = ctx;
    *ret = (BmHost){.mem_total_bytes = (uint64_t)h->total,
                    .mem_available_bytes = (uint64_t)fmax(0, sim_available(h)),
                    .psi_present = true,
                    .percpu_free_bytes = BM_ABSENT,
                    .percpu_rest_bytes = BM_ABSENT,
                    .hugepages_total_bytes = (uint64_t)h->hp_total,
                    .hugepages_free_bytes = (uint64_t)h->hp_free};
    return 0;
}

/* what the lists hold at rest: 2 MiB a CPU */
static uint64_t percpu_rest(const SimHost *h)
{
    return (uint64_t)h->cpus * 2 * 1024 * 1024;
}

static int model_read_percpu(void *ctx, BmHost *ret)
{
    const SimHost *h = ctx;
    ret->percpu_free_bytes = percpu_rest(h) + (uint64_t)h->percpu_excess;
    ret->percpu_rest_bytes = h->percpu_share > 0 ? percpu_rest(h) : BM_ABSENT;
    return 0;
}

/* As bm_hostmem_drain_percpu(): each write trims every CPU's list by 8 MiB, until less than
 * 16 MiB is above the rest or 4096 writes. */
static int model_drain_percpu(void *ctx, BmHost *hm, uint64_t *ret_drained)
{
    SimHost *h = ctx;
    double before = h->percpu_excess;
    int writes = 0;
    while (h->percpu_excess >= 16 * SIM_MIB && writes < 4096) {
        h->percpu_excess = fmax(0, h->percpu_excess - PERCPU_TRIM_MIB_S * SIM_MIB * h->cpus);
        writes++;
    }
    h->percpu_drain_writes += writes;
    *ret_drained = (uint64_t)(before - h->percpu_excess);
    return model_read_percpu(ctx, hm) < 0 ? -EIO : writes;
}

static int model_read_ksm(void *ctx, BmKsm *ret)
{
    (void)ctx, (void)ret;
    return bm_error(-ENOTSUP, "the model has no KSM");
}

/* A virtio-mem guest's domain: its balloon (statistics) returns nothing (VFIO), its device's
 * figures, the sizes the domain's. */
static void read_vmem(const SimGuest *g, BmDomain *d)
{
    d->balloon = (BmBalloonConfig){.present = true,
                                   .model = "virtio",
                                   .alias = "balloon0",
                                   .autodeflate = BM_TRI_OFF,
                                   .free_page_reporting = BM_TRI_OFF,
                                   .stats_period_s = 1,
                                   .min_guarantee_bytes = BM_ABSENT,
                                   .memory_bytes = (uint64_t)g->max,
                                   .current_memory_bytes = (uint64_t)g->max,
                                   .vfio_hostdev = !g->vmem_hugepages,
                                   .hugepages = g->vmem_hugepages,
                                   .n_virtio_mem = 1,
                                   .base_memory_bytes = (uint64_t)g->vmem_base};
    d->balloon.virtio_mem[0] = (BmVirtioMem){.alias = "virtiomem0",
                                             .size_bytes = (uint64_t)g->vmem_size,
                                             .block_bytes = (uint64_t)g->vmem_block,
                                             .requested_bytes = (uint64_t)g->vmem_requested,
                                             .current_bytes = (uint64_t)g->vmem_plugged,
                                             .node = -1};
    /* as a reading makes it: moved through the device, the balloon's figures kept (its base
     * memory, as QEMU's balloon counts only that) */
    d->vmem = d->vmem_auto = true;
    d->balloon_max_bytes = (uint64_t)g->max;
    d->balloon_actual_bytes = (uint64_t)g->vmem_base;
}

static int model_read_domains(void *ctx, const BmXmlCache *cache, BmSnapshot *ret)
{
    SimHost *h = ctx;
    (void)cache; /* the model's XML is read at once */
    *ret = (BmSnapshot){.taken_real_ns = clock_real_ns(ctx), .bulk = true};
    ret->domains = bm_malloc0((h->n + 1) * sizeof(BmDomain));
    for (size_t i = 0; i < h->n; i++) {
        SimGuest *g = &h->g[i];
        BmDomain *d = &ret->domains[i];
        *d = (BmDomain){.name = bm_strdup(g->name),
                        .state = VIR_DOMAIN_RUNNING,
                        .id = (int)i + 1,
                        .active = true,
                        .max_bytes = (uint64_t)g->max,
                        .actual_bytes = (uint64_t)g->actual,
                        .available_bytes = (uint64_t)g->st.avail,
                        .usable_bytes = (uint64_t)g->st.usable,
                        .unused_bytes = (uint64_t)g->st.unused,
                        .disk_caches_bytes = (uint64_t)g->st.caches,
                        .rss_bytes = (uint64_t)sim_rss(g),
                        .swap_in_bytes = 0,
                        .swap_out_bytes = 0,
                        .major_faults = (uint64_t)g->st.majflt,
                        .minor_faults = 0,
                        .last_update_s = g->st.at_s,
                        .disk_read_bytes = (uint64_t)g->rd_bytes,
                        .disk_read_reqs = BM_ABSENT,
                        .cpu_time_ns = (uint64_t)g->cpu_ns,
                        .balloon_known = true,
                        .starve = BM_STARVE_STATS_ABSENT,
                        .handle = g};
        snprintf(d->uuid, sizeof(d->uuid), "%s", g->uuid);
        if (g->vmem)
            read_vmem(g, d);
        else
        d->balloon = (BmBalloonConfig){.present = true,
                                       .model = "virtio",
                                       .autodeflate = g->autodeflate ? BM_TRI_ON : BM_TRI_OFF,
                                       .free_page_reporting = g->reporting ? BM_TRI_ON : BM_TRI_OFF,
                                       .stats_period_s = 1,
                                       .min_guarantee_bytes = BM_ABSENT,
                                       .memory_bytes = (uint64_t)g->max,
                                       .current_memory_bytes = (uint64_t)g->max};
    }
    ret->n_domains = h->n;
    bm_snapshot_index_uuid(ret);
    return 0;
}

/* QEMU's own memory as the engine measures it on a real host (its RSS less the guest RAM's
 * resident part), unless the model's QEMU processes cannot be measured. */
static int model_measure_qemu(void *ctx, BmDomain *d)
{
    const SimHost *h = ctx;
    if (h->own_unmeasured)
        return -ENOTSUP;
    d->qemu_own_bytes = (uint64_t)(QEMU_OWN_MIB * SIM_MIB);
    d->qemu_own_known = true;
    return 0;
}

/* qom-get guest-stats: a 6.12 guest's counters as of its last statistics */
static int model_read_starve(void *ctx, const BmDomain *d, char *qom_path, size_t n, BmStarveStats *ret)
{
    (void)ctx;
    const SimGuest *g = d->handle;
    if (!g->k612)
        return bm_error(-ENOTSUP, "the guest sends no starvation statistics");
    snprintf(qom_path, n, "/machine/peripheral/balloon0");
    *ret = (BmStarveStats){.oom_kills = (uint64_t)g->st.oom_kills,
                           .alloc_stalls = (uint64_t)g->st.stalls,
                           .async_scan_bytes = 0,
                           .direct_scan_bytes = (uint64_t)g->st.direct_reclaim,
                           .async_reclaim_bytes = 0,
                           .direct_reclaim_bytes = (uint64_t)g->st.direct_reclaim};
    return 0;
}

static BmFeatureVerdict verdict(bool on)
{
    return (BmFeatureVerdict){.state = on ? BM_FEAT_NEGOTIATED : BM_FEAT_NOT_OFFERED};
}

static int model_probe(void *ctx, const BmDomain *d, BmFeatureReport *ret, char *qom_path, size_t n)
{
    (void)ctx;
    SimGuest *g = d->handle;
    g->probes++;
    *ret = (BmFeatureReport){.ioeventfd = BM_SWITCH_UNSUPPORTED, .driver_ok = true};
    for (int f = 0; f < BM_FEATURE_COUNT; f++)
        ret->feature[f] = verdict(false);
    ret->feature[BM_FEATURE_STATS] = verdict(true);
    ret->feature[BM_FEATURE_DEFLATE_ON_OOM] = verdict(g->autodeflate);
    ret->feature[BM_FEATURE_REPORTING] = verdict(g->reporting);
    snprintf(qom_path, n, "/machine/peripheral/balloon0");
    return 0;
}

static int model_job_running(void *ctx, const BmDomain *d, const char **ret_what)
{
    const SimHost *h = ctx;
    const SimGuest *g = d->handle;
    if (h->t < g->job_from || h->t >= g->job_until)
        return 0;
    *ret_what = "dump";
    return 1;
}

static int model_set_target(void *ctx, void *handle, uint64_t target_bytes)
{
    (void)ctx;
    SimGuest *g = handle;
    g->target = fmin((double)(target_bytes / 1024 * 1024), g->max);
    return 0;
}

static int model_set_requested(void *ctx, void *handle, size_t index, uint64_t requested_bytes)
{
    (void)ctx;
    SimGuest *g = handle;
    if (!g->vmem || index != 0)
        return bm_error(-ENODEV, "no virtio-mem device %zu", index);
    double r = (double)requested_bytes;
    if (r > g->vmem_size || fmod(r, g->vmem_block) != 0)
        return bm_error(-EINVAL, "requested size %.0f: not a whole number of blocks up to the "
                        "device's size", r);
    g->vmem_requested = r;
    g->target = g->vmem_base + r;
    g->vmem_asked++;
    return 0;
}

static int model_read_plugged(void *ctx, void *handle, size_t index, uint64_t *ret_plugged,
                              uint64_t *ret_rss)
{
    (void)ctx;
    const SimGuest *g = handle;
    if (!g->vmem || index != 0)
        return bm_error(-ENODEV, "no virtio-mem device %zu", index);
    *ret_plugged = (uint64_t)g->vmem_plugged;
    *ret_rss = (uint64_t)sim_rss(g);
    return 0;
}

static int model_read_live(void *ctx, void *handle, uint64_t *ret_actual, uint64_t *ret_rss)
{
    (void)ctx;
    const SimGuest *g = handle;
    *ret_actual = (uint64_t)g->actual;
    *ret_rss = (uint64_t)sim_rss(g);
    return 0;
}

void sim_host_init(SimHost *h, double total_bytes, double other_bytes, size_t n)
{
    *h = (SimHost){.epoch_ns = 1767225600ull * 1000000000ull, /* 2026-01-01 */
                   .total = total_bytes,
                   .other = other_bytes,
                   .hog_start = -1,
                   .cpus = 2,
                   .n = n};
    h->g = bm_malloc0((n + 1) * sizeof(SimGuest));
    h->clock = (BmClock){.ctx = h, .mono_ns = clock_mono_ns, .real_ns = clock_real_ns,
                         .sleep_ms = clock_sleep_ms};
    h->balloon = (BmBalloonOps){.ctx = h, .set_target = model_set_target,
                                .read_live = model_read_live,
                                .set_requested = model_set_requested,
                                .read_plugged = model_read_plugged};
    h->ops = (BmHostOps){.ctx = h,
                         .boot_id = model_boot_id,
                         .set_conn = model_set_conn,
                         .read_meminfo = model_read_host,
                         .read_percpu = model_read_percpu,
                         .drain_percpu = model_drain_percpu,
                         .read_ksm = model_read_ksm,
                         .read_domains = model_read_domains,
                         .measure_qemu = model_measure_qemu,
                         .read_starve = model_read_starve,
                         .probe = model_probe,
                         .job_running = model_job_running,
                         .balloon = &h->balloon,
                         .clock = &h->clock};
}

void sim_host_clear(SimHost *h)
{
    free(h->g);
    *h = (SimHost){0};
}

int sim_guest_init(SimHost *h, size_t i, const char *name, double max_bytes, const char *schedule,
                   double start_s)
{
    SimGuest *g = &h->g[i];
    *g = (SimGuest){.max = max_bytes, .actual = max_bytes, .target = max_bytes,
                    .reserved = max_bytes * RESERVED_SHARE, .kernel = KERNEL_MIB * SIM_MIB,
                    .free_backed = BOOT_FREED_MIB * SIM_MIB, .start_s = start_s, .restart_at = -1,
                    .work_rate = 1, .inflate_mib_s = SIM_INFLATE_MIB_S, .cpu_share = -1,
                    .job_from = -1, .job_until = -1, .first_oom_t = -1};
    g->free_unbacked = max_bytes - g->reserved - g->kernel - g->free_backed;
    snprintf(g->name, sizeof(g->name), "%s", name);
    snprintf(g->uuid, sizeof(g->uuid), "5e1a0000-0000-4000-8000-%012zu", i);
    return schedule ? sim_schedule_parse(schedule, &g->sched) : 0;
}

void sim_guest_vmem(SimHost *h, size_t i, double size_bytes, double block_bytes,
                    double plugged_bytes, double keep_bytes, double unplug_mib_s)
{
    SimGuest *g = &h->g[i];
    g->vmem = true;
    g->vmem_base = g->max;
    g->vmem_size = size_bytes;
    g->vmem_block = block_bytes;
    g->vmem_requested = g->vmem_plugged = plugged_bytes;
    g->vmem_keep = keep_bytes;
    g->vmem_unplug_mib_s = unplug_mib_s;
    g->max = g->vmem_base + size_bytes;
    g->actual = g->target = g->vmem_base + plugged_bytes;
    /* VFIO pins every page: all of its free memory is backed */
    g->free_backed = g->actual - g->reserved - g->kernel;
    g->free_unbacked = 0;
}

void sim_guest_vmem_hugepages(SimHost *h, size_t i, double pool_bytes)
{
    SimGuest *g = &h->g[i];
    g->vmem_hugepages = true;
    h->hp_total += pool_bytes;
    h->hp_free += pool_bytes - g->actual;
}

int sim_host_hog(SimHost *h, const char *schedule, double start_s, double end_s, double size_bytes,
                 double floor_bytes)
{
    h->hog_start = start_s;
    h->hog_end = end_s;
    h->hog_size = size_bytes;
    h->hog_floor = floor_bytes;
    return sim_schedule_parse(schedule, &h->hog_sched);
}
