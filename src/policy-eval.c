#include "policy-eval.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "size.h"
#include "util.h"
#include "vmem.h"

#define MiB (1024ull * 1024)
/* PSI pressure with enough MemAvailable still asks for this share of MemTotal per pass. */
#define PSI_ONLY_NEED_PERMILLE 20
/* A guest whose use grew by at least GROWTH_MIN_BYTES since the previous reading, at
 * GROWTH_MIN_RATE or more, is growing: never inflated, and given room for GROW_AHEAD_S more of
 * that growth (a timer's pass: its interval more). Not the deadband: that sizes changes. A
 * guest's use also creeps up by itself, its demand unchanged: khugepaged (THP "always", the
 * Debian default) collapses up to 16 MiB of small pages into huge pages per 10 s scan, filling
 * the holes (seen after an inflate: +50 MiB in 16 MiB steps over 40 s, 1.6 MiB/s at most).
 * 24 MiB between two passes of 2 s is 12 MiB/s; the 2 MiB/s keeps that creep from counting
 * over a timer's minute. */
#define GROWTH_MIN_BYTES (24 * MiB)
#define GROWTH_MIN_RATE (2.0 * MiB)
#define GROW_AHEAD_S 30
/* A busy guest's page cache, where it must be taken while the host is not near its own OOM, is
 * taken in bites: this share of its cache a pass, and no less than its deadband, each followed
 * by the read check of the next reading (a real run took 616 MiB of a busy guest's cache at
 * once; its work fell to 0.15 x for the 20 s of the inflate before the refault rule could act). */
#define BITE_PERMILLE 50

const char *bm_action_name(BmAction a)
{
    switch (a) {
    case BM_ACT_NONE: return "none";
    case BM_ACT_INFLATE: return "inflate";
    case BM_ACT_DEFLATE: return "deflate";
    case BM_ACT_SKIP: return "skip";
    }
    return "?";
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

#define SZ(bytes) BM_SZ(bytes)

/* Rate of a cumulative counter between two readings, per second; -1 when unknown or when the
 * counter went backwards (guest rebooted). */
static double rate(uint64_t cur, uint64_t prev, double dt_s)
{
    if (!bm_present(cur) || !bm_present(prev) || !(dt_s > 0) || cur < prev)
        return -1;
    return (double)(cur - prev) / dt_s;
}

/* The seconds between the previous reading and this one by the host's clock: nanoseconds where
 * both readings have them, whole seconds otherwise (a span of 2.97 s then counts as 2) */
static double reading_span_s(const BmDomain *d, const BmPrevReading *prev, uint64_t now_s)
{
    if (d->read_real_ns && prev->taken_ns && d->read_real_ns > prev->taken_ns)
        return (double)(d->read_real_ns - prev->taken_ns) / 1e9;
    return now_s > prev->taken_s ? (double)(now_s - prev->taken_s) : 0;
}

/* How much more the guest uses than at the previous reading. For a guest with deflate-on-oom
 * an inflate in between is taken off: its balloon pages count as used (without it the guest's
 * total shrinks with the balloon and its used memory stays). */
static void growth(const BmDomain *d, const BmPrevReading *prev, uint64_t used, uint64_t dt_s,
                   BmGuestPressure *ret)
{
    if (!bm_present(used) || !bm_present(prev->used_bytes) || dt_s == 0)
        return;
    uint64_t inflated = 0;
    if (d->balloon_known && d->balloon.autodeflate == BM_TRI_ON &&
        bm_present(prev->actual_bytes) && bm_present(d->actual_bytes) &&
        prev->actual_bytes > d->actual_bytes)
        inflated = prev->actual_bytes - d->actual_bytes;
    uint64_t before = prev->used_bytes + min_u64(inflated, UINT64_MAX - 1 - prev->used_bytes);
    ret->growth_bytes = used > before ? used - before : 0;
    ret->growth_rate = (double)ret->growth_bytes / (double)dt_s;
}

/* What our inflates of this episode took from the guest, and whether its disk reads rose
 * since the pass that made the first of them: by protect_cache_reads and to at least twice
 * that pass's rate (an unknown rate then counts as none). */
static void episode_reads(const BmDomain *d, const BmPrevReading *prev, const BmGuestRules *rules,
                          BmGuestPressure *ret)
{
    if (!bm_present(prev->inflated_from_bytes) || !bm_present(d->actual_bytes) ||
        d->actual_bytes + MiB > prev->inflated_from_bytes)
        return;
    ret->taken_bytes = prev->inflated_from_bytes - d->actual_bytes;
    double base = bm_present(prev->read_base_Bps) ? (double)prev->read_base_Bps : 0;
    ret->read_base_rate = bm_present(prev->read_base_Bps) ? base : -1;
    ret->refaulting = rules->protect_cache_reads > 0 && ret->disk_read_rate >= 0 &&
                      ret->disk_read_rate > 2 * base &&
                      ret->disk_read_rate - base > (double)rules->protect_cache_reads;
}

/* Linux 6.12's starvation statistics since the previous reading: OOM kills (and the episode's
 * OOM mark), the rates of allocation stalls and direct reclaim. Those two only when the
 * balloon was not inflated in between: the balloon's own allocations may enter direct reclaim
 * (they may reclaim page cache), which is the inflate's work, not the guest starving. */
static void starve(const BmDomain *d, const BmPrevReading *prev, uint64_t dt_s, uint64_t now_s,
                   BmGuestPressure *ret)
{
    const BmStarveStats *s = &d->starve;
    if (bm_present(s->oom_kills) && bm_present(prev->oom_kills) && s->oom_kills >= prev->oom_kills)
        ret->oom_kills = s->oom_kills - prev->oom_kills;
    ret->oom_s = bm_prev_oom_at(prev, d, now_s);
    ret->oom_ago_s = ret->oom_s ? now_s - ret->oom_s : 0;
    if (!bm_present(prev->actual_bytes) || !bm_present(d->actual_bytes) ||
        d->actual_bytes + MiB <= prev->actual_bytes)
        return;
    ret->alloc_stall_rate = rate(s->alloc_stalls, prev->alloc_stalls, (double)dt_s);
    ret->direct_reclaim_rate = rate(s->direct_reclaim_bytes, prev->direct_reclaim_bytes, (double)dt_s);
    ret->starving = ret->alloc_stall_rate >= BM_STARVE_STALL_RATE ||
                    ret->direct_reclaim_rate >= BM_STARVE_DIRECT_RECLAIM_RATE;
}

void bm_guest_pressure(const BmDomain *d, const BmPrevReading *prev, const BmGuestRules *rules,
                       uint64_t now_s, BmGuestPressure *ret)
{
    *ret = (BmGuestPressure){.used_bytes = BM_ABSENT,
                             .headroom_bytes = BM_ABSENT,
                             .major_fault_rate = -1,
                             .swap_in_rate = -1,
                             .stats_age_s = BM_ABSENT,
                             .growth_bytes = BM_ABSENT,
                             .growth_rate = -1,
                             .disk_read_rate = -1,
                             .cpu_rate = -1,
                             .read_base_rate = -1,
                             .oom_kills = BM_ABSENT,
                             .alloc_stall_rate = -1,
                             .direct_reclaim_rate = -1};

    ret->headroom_bytes = bm_domain_headroom_bytes(d);
    ret->used_bytes = bm_domain_used_bytes(d);

    if (bm_present(d->last_update_s) && d->last_update_s > 0)
        ret->stats_age_s = now_s > d->last_update_s ? now_s - d->last_update_s : 0;

    ret->stale = !bm_present(ret->headroom_bytes) ||
                 (rules->max_stats_age_s > 0 &&
                  (!bm_present(ret->stats_age_s) || ret->stats_age_s > rules->max_stats_age_s));

    if (prev) {
        /* the guest's own timestamps are the better clock; the readings' times otherwise */
        uint64_t dt = 0;
        if (bm_present(d->last_update_s) && bm_present(prev->last_update_s) &&
            d->last_update_s > prev->last_update_s)
            dt = d->last_update_s - prev->last_update_s;
        else if (now_s > prev->taken_s)
            dt = now_s - prev->taken_s;
        ret->major_fault_rate = rate(d->major_faults, prev->major_faults, (double)dt);
        ret->swap_in_rate = rate(d->swap_in_bytes, prev->swap_in_bytes, (double)dt);
        growth(d, prev, ret->used_bytes, dt, ret);
        /* QEMU's counters: the readings' clock */
        double host_dt = reading_span_s(d, prev, now_s);
        ret->disk_read_rate = rate(d->disk_read_bytes, prev->disk_read_bytes, host_dt);
        ret->cpu_rate = rate(d->cpu_time_ns, prev->cpu_time_ns, host_dt);
        if (ret->cpu_rate >= 0)
            ret->cpu_rate /= 1e9;
        /* busy: measured over two seconds or more; closer readings keep what the last measure
         * said for BM_BUSY_HOLD_S. Not measured where its balloon moved since the previous
         * reading: its vCPUs then did the balloon driver's work too (a real idle guest read 28%
         * of a CPU over its own inflate, so its next inflate was deferred as a busy guest's) */
        bool moved = bm_present(d->actual_bytes) && bm_present(prev->actual_bytes) &&
                     bm_distance(d->actual_bytes, prev->actual_bytes) >= MiB;
        bool measured = !moved && ret->cpu_rate >= 0 && host_dt >= BM_BUSY_MIN_SPAN_S;
        ret->busy_measured = measured && ret->cpu_rate >= BM_BUSY_CPU_SHARE;
        /* and a guest found busy within BM_BUSY_HOLD_S stays busy unless this reading measured
         * it under half the line (hysteresis): a busy re-reader under host pressure read 23% of
         * a CPU once (the hog's CPU and reclaim beside it), a hair above the line; below it, its
         * cache would have been taken as an idle guest's, at once */
        bool held = prev->busy_s && prev->busy_s <= now_s && now_s - prev->busy_s < BM_BUSY_HOLD_S;
        ret->busy = measured ? ret->busy_measured || (held && ret->cpu_rate >= BM_BUSY_CPU_SHARE / 2)
                             : (!moved && ret->cpu_rate >= BM_BUSY_CPU_SHARE) || held;
        episode_reads(d, prev, rules, ret);
        starve(d, prev, dt, now_s, ret);
    }
    ret->under_pressure =
        (rules->protect_major_faults > 0 && ret->major_fault_rate > rules->protect_major_faults) ||
        (rules->protect_swap_in > 0 && ret->swap_in_rate > (double)rules->protect_swap_in) ||
        ret->starving || (bm_present(ret->oom_kills) && ret->oom_kills > 0);
}

/* Per-domain working state of one evaluation. */
typedef struct {
    BmGuestRules rules;
    uint64_t keep_free, step, deadband;
    enum {
        ROLE_NONE,
        ROLE_TAKE,
        ROLE_GIVE_PROTECTED,
        ROLE_GIVE_NEEDY,
        ROLE_GIVE_GROWING,
        ROLE_GIVE_BACK, /* what our inflates of the episode took: it thrashed, or the host
                         * got nothing of it */
        ROLE_FLOOR,
        ROLE_REST,
        ROLE_POOL /* a huge-page guest with idle memory: taken for the huge-page pool only */
    } role;
    bool growing;       /* its use grows (grow_room) */
    uint64_t want;      /* give: bytes wanted; take: cap */
    double weight;      /* take: idle * 100 / shares */
    uint64_t potential; /* take: host bytes it could give back in all, max_step aside */
    uint64_t amount;    /* decided */
    BmTakeCap cap;      /* take: what limits want */
    unsigned yield;     /* take: permille of an inflate the host is expected to get back */
    BmYield learned;    /* what the ledger learned of its inflates (zeroed: nothing) */
    const char *no_return; /* why inflating it returns nothing to the host, or NULL */
    uint64_t rss_bytes; /* its QEMU RSS in this reading (BM_ABSENT if unknown) */
    uint64_t used_lately; /* what it used at most lately beyond what it uses now */
    unsigned ahead_s;   /* growing: the room it is given covers this much more growth */
    bool reports;       /* free page reporting on: its free memory is back already */
    uint64_t skip;      /* take: free memory the host does not back (reported, or never
                         * touched): balloon growth that returns nothing; 0 below deadband */
    uint64_t skip_at;   /* take: the balloon growth where it begins: the allocator hands out
                         * the free memory the host backs first (unbacked_free()) */
    const char *no_take; /* take: why it is not inflated now although it has idle memory */
    bool stats_before_change; /* its statistics predate its last change's end (stats_predate) */
    uint64_t horizon_s; /* the time until the next pass (0: the agent) */
    uint64_t given_s;   /* memory was given to it in this pressure episode then (0: no) */
    uint64_t given_ago_s; /* now - given_s */
    uint64_t unused;    /* the guest's free memory (MemFree); BM_ABSENT */
    uint64_t free_end;  /* take: its balloon growth up to the end of its free memory (skip,
                         * then free memory the host backs); page cache beyond */
    uint64_t cache;     /* the guest's page cache (disk_caches); BM_ABSENT */
    uint64_t bite;      /* take, busy: the most of its page cache a pass takes while the host is
                         * not near its own OOM (BITE_PERMILLE, at least the deadband) */
    bool hot;           /* take: its page cache is hot: taken last (tier_cap()) */
    bool busy;          /* take: its vCPUs are busy (BM_BUSY_CPU_SHARE): its memory, free or cache,
                         * after what idle guests give (tier_cap()) */
    bool busy_unbacked; /* take: busy, with more free memory the host does not back (skip)
                         * than page cache beyond it: taken up to skip_at at most */
    uint64_t waiting;   /* not a taker this pass only because its statistics predate its last
                         * change: the host bytes it could give once they follow it */
    uint64_t in_flight; /* skipped: what an inflate of ours in flight will still give the host */
    bool near_oom;      /* the host is near its own OOM (BmPlan.hot_cache_allowed) */
    uint64_t oom_margin; /* reclaim: what the host has above its own OOM line (BmPlan.oom_margin_bytes) */
    bool reclaim;       /* the host reclaims (BM_HOST_RECLAIM) */
    bool kept_hot;      /* it refaults or thrashes, but keeps what was taken (keeps_hot_cache()) */
    const BmBalloonConfig *vmem; /* moved through virtio-mem: its devices (NULL: the balloon) */
    bool refused;       /* virtio-mem: its idle memory capped by what its guest refused to unplug */
    uint64_t refused_bytes; /* ... the domain's memory where it stopped unplugging */
    bool pool;          /* virtio-mem backed by huge pages: what it unplugs goes to the host's
                         * huge-page pool, not MemAvailable */
    uint64_t pool_in_flight; /* skipped: what an unplug of ours in flight still takes of it */
} Work;

/* ---- Reclaim what the host gets back (yield.h) ---- */

/* Why inflating d gives the host nothing, from its XML (VFIO, locked, hugepages), or NULL. */
static const char *no_return_reason(const BmDomain *d)
{
    return d->balloon_known ? bm_domxml_no_return_reason(&d->balloon) : NULL;
}

/* The expected host bytes of inflating by amount at yield permille. */
static uint64_t expected_return(uint64_t amount, unsigned yield)
{
    return (uint64_t)((long double)amount * yield / 1000);
}

/* The yield reclaim counts on for a guest: what its inflates returned so far, not below the
 * "returns nothing" line (a guest below it is not asked at all). */
static unsigned counted_yield(const BmYield *y)
{
    unsigned p = bm_yield_permille(y);
    return p < BM_YIELD_NOTHING_PERMILLE ? BM_YIELD_NOTHING_PERMILLE : p;
}

/* A guest with free memory the host does not back (the QEMU RSS minus what it uses is below
 * its idle memory: it never touched part of it) whose inflates taught nothing yet is first
 * inflated by a probe of one deadband (at least BM_YIELD_MIN_SAMPLE_BYTES): the RSS estimate
 * also holds QEMU's own memory, and the probe shows what the host really gets back. */
static uint64_t probe_cap(const BmYield *y, uint64_t idle, uint64_t backed, uint64_t deadband,
                          bool reports)
{
    /* a guest that reports its free pages, or whose unbacked free memory is known (skip):
     * nothing to probe */
    if (reports || y->inflated_bytes > 0 || !bm_present(backed) || backed >= idle)
        return UINT64_MAX;
    return max_u64(deadband, BM_YIELD_MIN_SAMPLE_BYTES);
}

/* Release: what a comfortable host gives a ballooned guest that is fine this pass: toward its
 * maximum, at most max_step, and the last part of the way even when it is below the deadband
 * (a comfortable host leaves no balloon behind); 0 within 1 MiB of the maximum. */
static uint64_t rest_want(uint64_t cur, uint64_t maxb, uint64_t step)
{
    if (cur >= maxb || maxb - cur < MiB)
        return 0;
    return min_u64(step, maxb - cur);
}

/* A growing guest (its use grew by GROWTH_MIN_BYTES at GROWTH_MIN_RATE since the previous
 * reading): the
 * room it needs beyond its headroom to keep keep_free for ahead_s more of that growth
 * (0: its headroom lasts); BM_ABSENT when it is not growing. */
static uint64_t grow_room(const BmGuestPressure *gp, uint64_t keep_free, uint64_t deadband,
                          unsigned ahead_s)
{
    if (gp->stale || !bm_present(gp->growth_bytes) || gp->growth_rate <= 0 ||
        gp->growth_bytes < GROWTH_MIN_BYTES || gp->growth_rate < GROWTH_MIN_RATE)
        return BM_ABSENT;
    double ahead = gp->growth_rate * ahead_s;
    double need = (double)keep_free + ahead;
    if ((double)gp->headroom_bytes >= need)
        return 0;
    double room = need - (double)gp->headroom_bytes + (double)deadband;
    return room < 0x1p63 ? (uint64_t)room : (uint64_t)1 << 63;
}

/* Step 0: QEMU's own memory per domain, to tell it from guest memory the host backs. */
static uint64_t qemu_overhead(const BmRows *rows, uint64_t now_s)
{
    BmYieldOverhead ovh = {0};
    for (size_t i = 0; i < rows->n_rows; i++) {
        const BmDomain *d = rows->rows[i].dom;
        if (!d->active || d->state != VIR_DOMAIN_RUNNING)
            continue;
        BmGuestPressure gp;
        bm_guest_pressure(d, NULL, &rows->rows[i].rules, now_s, &gp);
        if (!gp.stale)
            bm_yield_overhead_add(&ovh, d->rss_bytes, gp.used_bytes);
    }
    return bm_yield_overhead(&ovh);
}

static BmHostMode decide_mode(const BmHost *h, const BmPolicy *p, BmHostMode prev, uint64_t below,
                              uint64_t target, uint64_t above, bool *psi_pressure, BmHostReason *why)
{
    double psi = h->psi_present ? h->psi_some_avg10 : -1;
    uint64_t avail = h->mem_available_bytes;
    *why = (BmHostReason){.available_bytes = avail, .reclaim_below_bytes = below,
                          .target_bytes = target, .release_above_bytes = above,
                          .psi_some_avg10 = psi, .psi_reclaim_above = p->psi_reclaim_above};
    *psi_pressure = p->psi_reclaim_above >= 0 && psi >= 0 && psi > p->psi_reclaim_above;
    if (avail < below) {
        why->code = BM_MODE_WHY_BELOW;
        return BM_HOST_RECLAIM;
    }
    if (*psi_pressure) {
        why->code = BM_MODE_WHY_PSI;
        return BM_HOST_RECLAIM;
    }
    if (prev == BM_HOST_RECLAIM && avail < target) {
        why->code = BM_MODE_WHY_STILL;
        return BM_HOST_RECLAIM;
    }
    why->psi_calm = p->psi_release_below < 0 || psi < 0 || psi < p->psi_release_below;
    if (avail > above && why->psi_calm) {
        why->code = BM_MODE_WHY_COMFORTABLE;
        return BM_HOST_RELEASE;
    }
    why->code = BM_MODE_WHY_HOLDING;
    return BM_HOST_HOLD;
}

typedef struct {
    size_t idx;
    double key; /* cap / weight */
} Order;

static int cmp_order(const void *a, const void *b)
{
    double x = ((const Order *)a)->key, y = ((const Order *)b)->key;
    return x < y ? -1 : x > y;
}

/* The tiers of what is taken, cheapest first: the free memory of idle guests; their page cache
 * (nothing uses it now); the free memory of busy guests (an inflate costs their vCPUs the time
 * it takes: a real database guest ran at 0.06-0.23 x its work through a 20 s inflate of its free
 * memory under TCG); their page cache (it may be in use), in bites while the host is not near
 * its own OOM; a hot page cache, only near the host's own OOM. */
enum { TIER_FREE, TIER_IDLE_CACHE, TIER_BUSY_FREE, TIER_BUSY_CACHE, TIER_HOT, N_TIERS };

/* A taker's balloon growth up to the end of tier t. */
static uint64_t tier_cap(const Work *x, int t)
{
    int free_tier = x->busy ? TIER_BUSY_FREE : TIER_FREE;
    int cache_tier = x->hot ? TIER_HOT : x->busy ? TIER_BUSY_CACHE : TIER_IDLE_CACHE;
    if (t < free_tier)
        return 0;
    uint64_t free = min_u64(x->want, x->free_end);
    /* a busy guest away from the host's own OOM: the last of its free memory is no safe
     * estimate (a real busy guest's reads rose 108 MiB before the end of its MemFree), so it
     * is taken with its cache, in bites */
    bool bites = x->busy && !x->near_oom;
    uint64_t safe = bites ? free - min_u64(free, max_u64(2 * x->deadband, free / 4)) : free;
    if (t < cache_tier)
        return safe;
    if (bites && !x->hot) {
        /* the bite is of its cache: past the free memory the host does not back, where the
         * balloon reaches that cache through it (fill_tier() stops a take that would end in it) */
        uint64_t from = x->skip ? max_u64(safe, x->skip_at + x->skip) : safe;
        return min_u64(x->want, from + min_u64(x->bite, UINT64_MAX - from));
    }
    return x->want;
}

/* The part of a balloon growth of amount that the host backs: the free memory it backs (up to
 * skip_at), nothing of the free memory it does not back (skip), then page cache. */
static uint64_t returning(const Work *x, uint64_t amount)
{
    if (amount <= x->skip_at)
        return amount;
    uint64_t past = x->skip_at + x->skip;
    return x->skip_at + (amount > past ? amount - past : 0);
}

/* The balloon growth whose returning() part is host bytes. */
static uint64_t growth_for(const Work *x, uint64_t host)
{
    if (host <= x->skip_at)
        return host;
    return host > UINT64_MAX - x->skip ? UINT64_MAX : host + x->skip;
}

/* The host bytes an inflate of amount returns: its returning() part times the yield. */
static uint64_t back_of(const Work *x, uint64_t amount)
{
    return expected_return(returning(x, amount), x->yield);
}

/* Water-filling in host bytes within tier t: splits need among takers with room in it in
 * proportion to weight, none beyond its cap; a taker's inflate counts for what its yield says
 * the host gets back. Adds to each taker's amount; returns the expected host bytes added. */
static uint64_t fill_tier(Work *w, size_t n, uint64_t need, int t)
{
    _cleanup_free_ Order *ord = bm_malloc0((n + 1) * sizeof(Order));
    size_t m = 0;
    double total_w = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t cap = tier_cap(&w[i], t), now = back_of(&w[i], w[i].amount);
        if (w[i].role == ROLE_TAKE && back_of(&w[i], cap) > now) {
            ord[m++] = (Order){i, (double)(back_of(&w[i], cap) - now) / w[i].weight};
            total_w += w[i].weight;
        }
    }
    qsort(ord, m, sizeof(Order), cmp_order);
    uint64_t remaining = need, expected = 0;
    for (size_t k = 0; k < m && remaining > 0; k++) {
        Work *x = &w[ord[k].idx];
        double share = total_w > 0 ? (double)remaining * x->weight / total_w : 0;
        uint64_t before = back_of(x, x->amount);
        /* the balloon growth that returns what it returned so far plus share to the host */
        uint64_t take = min_u64(growth_for(x, (uint64_t)((before + share) * 1000 / x->yield)),
                                tier_cap(x, t));
        /* one that would end in the free memory the host does not back stops where it begins */
        if (take > x->skip_at && take < x->skip_at + x->skip)
            take = x->skip_at;
        take &= ~(MiB - 1); /* whole MiB: readable targets */
        if (returning(x, take) < x->deadband || take < x->amount)
            take = x->amount;
        x->amount = take;
        uint64_t back = back_of(x, take) - before;
        remaining -= min_u64(back, remaining);
        expected += back;
        total_w -= x->weight;
    }
    return expected;
}

/* Whether the idle guests have more to give than this pass takes: an inflate of ours still in
 * flight (what it gives is not seen yet), an idle guest waiting for statistics that follow its
 * last change, or an idle taker with a deadband or more of its potential left beyond its take. */
static bool idle_left(const BmPlan *ret, const Work *w, size_t n)
{
    if (ret->in_flight_bytes > 0)
        return true;
    for (size_t i = 0; i < n; i++) {
        if (w[i].busy)
            continue;
        if (w[i].waiting > 0)
            return true;
        uint64_t got = w[i].role == ROLE_TAKE ? back_of(&w[i], w[i].amount) : 0;
        if (w[i].role == ROLE_TAKE && w[i].potential > got && w[i].potential - got >= w[i].deadband)
            return true;
    }
    return false;
}

/* Splits need among the takers tier by tier, cheapest first. Near the host's own OOM every
 * tier serves this pass (a hot cache last). Away from it the busy guests' tiers wait while the
 * idle guests have more to give over the coming passes (idle_left()): a pass or two more of
 * relief costs a busy guest nothing, and a real run that took a busy guest's cache in its first
 * pass beside idle memory that sufficed cost it 0.15 x of its work (BmPlan.busy_deferred).
 * Returns the expected host bytes of all takes. */
static uint64_t distribute_take(BmPlan *ret, Work *w, size_t n, uint64_t need)
{
    uint64_t expected = 0;
    for (int t = 0; t < N_TIERS && expected < need; t++) {
        if (t == TIER_HOT && !ret->hot_cache_allowed)
            continue;
        if (t == TIER_BUSY_FREE && !ret->hot_cache_allowed && idle_left(ret, w, n)) {
            ret->busy_deferred = true;
            break;
        }
        expected += fill_tier(w, n, need - expected, t);
    }
    return expected;
}

/* Whether what our inflates took from a guest that refaults or thrashes after them may be
 * kept: not after an OOM kill in it (given back at once). */
static bool may_keep_hot_cache(const BmDecision *x)
{
    const BmGuestPressure *gp = &x->pressure;
    /* an inflate that gave the host (almost) nothing is not kept: the guest would pay for it
     * and the host get nothing (seen on real guests: 573 MiB inflated, 49 MiB of QEMU RSS back,
     * the guest at 0.21 x its work for a minute) */
    return gp->taken_bytes > 0 && !gp->oom_s && !(bm_present(gp->oom_kills) && gp->oom_kills > 0) &&
           !x->returns_nothing;
}

/* A guest that refaults or thrashes after our inflates keeps what they took where giving it
 * back would put the host below half of reclaim_below although the others gave all they can
 * (BmPlan.oom_margin_bytes): the host would take it again at the next pass. */
static void keep_hot_caches(BmPlan *ret, Work *w, size_t n)
{
    uint64_t potential = 0;
    for (size_t i = 0; i < n; i++)
        if (w[i].role == ROLE_TAKE)
            potential += w[i].potential;
    for (size_t i = 0; i < n; i++) {
        BmDecision *x = &ret->decisions[i];
        bool undo = w[i].role == ROLE_GIVE_BACK && x->pressure.refaulting;
        undo |= w[i].role == ROLE_GIVE_PROTECTED && x->pressure.taken_bytes > 0;
        if (!undo || !may_keep_hot_cache(x) ||
            expected_return(w[i].want, x->yield_permille) <= ret->oom_margin_bytes + potential)
            continue;
        w[i].role = ROLE_NONE;
        w[i].kept_hot = x->cache_found_hot = x->cache_hot = true;
    }
}

/* Reclaim: guests short of memory, under pressure or growing are deflated also now (their safety
 * first), what they get is taken from the others on top of the host's need; what the guests
 * cannot give back at all is the plan's unmet_bytes. */
static void plan_reclaim(BmPlan *ret, Work *w, size_t n)
{
    keep_hot_caches(ret, w, n);
    for (size_t i = 0; i < n; i++)
        if (w[i].role == ROLE_GIVE_PROTECTED || w[i].role == ROLE_GIVE_NEEDY ||
            w[i].role == ROLE_GIVE_GROWING) {
            w[i].amount = w[i].want & ~(MiB - 1);
            ret->guard_bytes += w[i].amount;
        } else if (w[i].role == ROLE_GIVE_BACK) {
            /* the host loses what it got of it */
            w[i].amount = w[i].want & ~(MiB - 1);
            ret->guard_bytes += expected_return(w[i].amount, ret->decisions[i].yield_permille);
        }
    /* what inflates still in flight will give is not asked again (MemAvailable does not show it
     * yet): a pass while one domain's inflate ran took the rest from a busy guest's cache */
    uint64_t coming = 0;
    for (size_t i = 0; i < n; i++)
        coming += w[i].in_flight;
    ret->in_flight_bytes = coming;
    uint64_t asked = ret->need_bytes + ret->guard_bytes;
    asked = asked > coming ? asked - coming : 0;
    ret->expected_return_bytes = distribute_take(ret, w, n, asked);
    /* the busy guests spared: what their tiers could have given this pass */
    for (size_t i = 0; i < n && ret->busy_deferred; i++)
        if (w[i].role == ROLE_TAKE && w[i].busy) {
            uint64_t could = back_of(&w[i], tier_cap(&w[i], TIER_BUSY_CACHE));
            uint64_t got = back_of(&w[i], w[i].amount);
            ret->busy_spared_bytes += could > got ? could - got : 0;
        }
    ret->busy_deferred = ret->busy_spared_bytes >= MiB;
    /* unmet: what the guests cannot give back at all (pacing by max_step and probes aside) */
    uint64_t potential = 0;
    for (size_t i = 0; i < n; i++)
        if (w[i].role == ROLE_TAKE)
            potential += w[i].potential;
    ret->unmet_bytes = asked > potential ? asked - potential : 0;
    uint64_t spared = 0;
    for (size_t i = 0; i < n && !ret->hot_cache_allowed && ret->expected_return_bytes < asked; i++)
        if (w[i].role == ROLE_TAKE && w[i].hot)
            spared += tier_cap(&w[i], TIER_HOT) - max_u64(tier_cap(&w[i], TIER_HOT - 1), w[i].amount);
    ret->cause.hot_spared_bytes = spared;
}

/* What holds the guests' idle memory back when the reclaim's need is unmet, guest memory by
 * cause (BmHostReason.held_bytes), so that the host's reason names it. */
static void explain_reclaim(BmPlan *ret, const Work *w, size_t n)
{
    if (ret->unmet_bytes < MiB)
        return;
    static const struct {
        BmHeld held;
        BmReasonCode codes[4];
    } held[] = {
        {BM_HELD_GROWING, {BM_REASON_GROWS, BM_REASON_GROWING}},
        {BM_HELD_GIVEN, {BM_REASON_GIVEN}},
        {BM_HELD_HOT, {BM_REASON_HOT_SPARED, BM_REASON_KEPT_HOT}},
        {BM_HELD_BUSY_UNBACKED, {BM_REASON_BUSY_UNBACKED}},
        {BM_HELD_UNBACKED, {BM_REASON_UNBACKED, BM_REASON_NOT_BACKED, BM_REASON_RETURNED_NOTHING,
                            BM_REASON_NO_RETURN}},
        {BM_HELD_STALE, {BM_REASON_STALE, BM_REASON_NO_STATS, BM_REASON_STATS_PREDATE}},
        {BM_HELD_TIMER, {BM_REASON_TIMER_NEVER, BM_REASON_TIMER_SELF_DEFLATE}},
    };
    for (size_t h = 0; h < BM_ARRAY_SIZE(held); h++)
        for (size_t i = 0; i < n; i++) {
            const BmDecision *x = &ret->decisions[i];
            for (size_t c = 0; c < BM_ARRAY_SIZE(held[h].codes) && held[h].codes[c]; c++)
                if (x->cause.code == held[h].codes[c] && x->idle_bytes >= w[i].deadband)
                    ret->cause.held_bytes[held[h].held] += x->idle_bytes;
        }
}

/* Gives budget to guests under pressure first, then to those short of memory, then to those
 * growing. Returns what is left of it. */
static uint64_t distribute_give(Work *w, size_t n, uint64_t budget)
{
    static const unsigned order[] = {ROLE_GIVE_PROTECTED, ROLE_GIVE_NEEDY, ROLE_GIVE_GROWING};
    for (size_t pass = 0; pass < BM_ARRAY_SIZE(order); pass++) {
        unsigned role = order[pass];
        for (size_t i = 0; i < n; i++) {
            if ((unsigned)w[i].role != role)
                continue;
            uint64_t give = min_u64(w[i].want, budget);
            give &= ~(MiB - 1);
            if (give < w[i].deadband && role != ROLE_GIVE_PROTECTED)
                give = 0;
            w[i].amount = give;
            budget -= give;
        }
    }
    return budget;
}

/* Release: a comfortable host gives every other ballooned guest its memory back, toward its
 * maximum at max_step a pass, out of budget (at most the memory above release_above). */
static void distribute_rest(const BmPlan *plan, Work *w, size_t n, uint64_t budget)
{
    for (size_t i = 0; i < n; i++) {
        const BmDecision *x = &plan->decisions[i];
        if ((w[i].role != ROLE_TAKE && w[i].role != ROLE_NONE) || x->action == BM_ACT_SKIP ||
            x->current_bytes > x->max_bytes)
            continue;
        uint64_t want = rest_want(x->current_bytes, x->max_bytes, w[i].step);
        if (want == 0)
            continue;
        w[i].role = ROLE_REST;
        w[i].want = want;
        w[i].amount = min_u64(want, budget) & ~(MiB - 1);
        if (w[i].amount < want && w[i].amount < w[i].deadband)
            w[i].amount = 0; /* a part of the way: not below the deadband */
        budget -= w[i].amount;
    }
}

/* The host's mode and what it needs (reclaim) or may give (hold/release); *surplus: the
 * memory above release_above. */
static void decide_host(const BmHost *host, const BmPolicy *policy, BmHostMode prev_mode, BmPlan *ret,
                        uint64_t *surplus)
{
    uint64_t total = host->mem_total_bytes, avail = host->mem_available_bytes;
    uint64_t below = bm_amount_bytes(policy->reclaim_below, total);
    uint64_t target = bm_amount_bytes(policy->target_available, total);
    uint64_t above = bm_amount_bytes(policy->release_above, total);
    bool psi_pressure;
    ret->mode = decide_mode(host, policy, prev_mode, below, target, above, &psi_pressure, &ret->cause);
    *surplus = avail > above ? avail - above : 0;
    if (ret->mode == BM_HOST_RECLAIM) {
        ret->hot_cache_allowed = bm_host_near_oom(host, policy);
        ret->oom_margin_bytes = avail > below / 2 ? avail - below / 2 : 0;
        ret->need_bytes = avail < target ? target - avail : 0;
        if (psi_pressure)
            ret->need_bytes = max_u64(ret->need_bytes, total / 1000 * PSI_ONLY_NEED_PERMILLE);
    } else {
        /* guests short of memory, under pressure or growing get what the host has above
         * reclaim_below, not only above target_available: between the two a host has memory
         * to spare, and a guest left short there is OOM-killed while it waits (the
         * simulation's 100 guests, issue 33: 54 growers without this and the growth rule);
         * below it, reclaim takes their share from the others */
        ret->budget_bytes = avail > below ? avail - below : 0;
    }
}

/* Why a domain is not managed this pass (c set, true), or false. */
static bool skipped(const BmDomain *d, const BmLedgerEntry *e, const BmGuestRules *rules, BmReason *c)
{
    if (!d->active)
        c->code = BM_REASON_NOT_RUNNING;
    else if (d->state == VIR_DOMAIN_PAUSED || d->state == VIR_DOMAIN_PMSUSPENDED)
        *c = (BmReason){.code = BM_REASON_PAUSED, .run_state = d->state};
    else if (!d->vmem && (rules->device == BM_DEVICE_VIRTIO_MEM ||
                          (rules->device == BM_DEVICE_AUTO && d->vmem_auto)))
        c->code = BM_REASON_NO_VMEM; /* to be moved through virtio-mem, whose sizes are unknown */
    else if (d->balloon_known && !d->balloon.present && !d->vmem)
        c->code = BM_REASON_NO_BALLOON;
    else if (e && e->in_flight)
        c->code = BM_REASON_IN_FLIGHT;
    else if (e && e->unresponsive)
        c->code = BM_REASON_UNRESPONSIVE;
    else if (rules->exclude)
        c->code = BM_REASON_EXCLUDED;
    else if (!bm_present(d->actual_bytes) || !bm_present(d->max_bytes) || d->max_bytes == 0)
        c->code = BM_REASON_SIZE_UNKNOWN;
    else
        return false;
    return true;
}

/* max_step is a pass's largest change for a pass every interval; a pass whose next comes
 * pace intervals later may move pace times as much. */
static uint64_t pace_step(uint64_t step, unsigned pace)
{
    return step > UINT64_MAX / pace ? UINT64_MAX : step * pace;
}

/* The limits of a managed domain: floor, keep_free, max_step (times pace), deadband, idle
 * memory. */
static void set_limits(const BmDomain *d, unsigned pace, BmDecision *x, Work *k)
{
    uint64_t maxb = d->max_bytes, cur = d->actual_bytes;
    /* never below the absolute minimum, whatever floor, keep_free and deadband say (a floor
     * of 0% aimed a guest at 0 bytes, which libvirt refuses) */
    uint64_t floor = max_u64(bm_amount_bytes(k->rules.floor, maxb), bm_absolute_floor(maxb));
    if (d->balloon_known && bm_present(d->balloon.min_guarantee_bytes))
        floor = max_u64(floor, d->balloon.min_guarantee_bytes);
    /* virtio-mem unplugs only its own memory: the base memory is a floor of its own */
    if (k->vmem)
        floor = max_u64(floor, d->balloon.base_memory_bytes);
    x->floor_bytes = floor = min_u64(floor, maxb);
    k->keep_free = bm_amount_bytes(k->rules.keep_free, maxb);
    k->deadband = bm_amount_bytes(k->rules.deadband, maxb);
    k->step = pace_step(bm_amount_bytes(k->rules.max_step, maxb), pace);
    k->ahead_s = GROW_AHEAD_S + (unsigned)k->horizon_s;

    /* an inflate leaves keep_free and one deadband more: the guest's own settling after it
     * (page cache dropped, MemAvailable re-estimated) must not make it short at once */
    const BmGuestPressure *gp = &x->pressure;
    uint64_t keep = k->keep_free + k->deadband;
    if (!gp->stale && gp->headroom_bytes > keep) {
        uint64_t by_headroom = gp->headroom_bytes - keep;
        uint64_t by_floor = cur > floor ? cur - floor : 0;
        x->idle_bytes = min_u64(by_headroom, by_floor);
        k->cap = k->step < x->idle_bytes  ? BM_CAP_MAX_STEP
                 : by_floor < by_headroom ? BM_CAP_FLOOR
                                          : BM_CAP_KEEP_FREE;
    }
}

/* What a guest used at most lately beyond what it uses now (ledger: the peak of the last
 * bm_used_peak_window_s()): memory it gave up under an inflate and soon takes back. */
static uint64_t used_lately(const BmLedgerEntry *e, uint64_t used, uint64_t now_s,
                            unsigned horizon_s)
{
    if (!e || !e->have_prev || !bm_present(used) || !bm_present(e->prev.used_peak_bytes) ||
        e->prev.used_peak_bytes <= used || e->prev.used_peak_s > now_s ||
        now_s - e->prev.used_peak_s >= bm_used_peak_window_s(horizon_s))
        return 0;
    return e->prev.used_peak_bytes - used;
}

/* Guest memory the host does not back: free pages (never touched since boot, or handed back by
 * free page reporting) are all a guest has that the host may not back, so it is the guest's
 * memory beyond what its QEMU process holds for it (RSS less QEMU's own), at most its free
 * memory. 0 when a figure is missing or the RSS tells nothing.
 *
 * Where an inflate meets it: the balloon takes free pages before the guest drops page cache,
 * and of the free pages the allocator hands out the recently freed ones first: since Linux
 * 5.10 the memory freed at boot goes to the tail of the free lists (__free_pages_core(),
 * FPI_TO_TAIL), as do the pages free page reporting hands back. So an inflate takes the free
 * memory the host backs first, then this, then page cache (returning()). Seen on real guests
 * (bench/scenario.sh's grower, Linux 6.1, 275 MiB of its free memory never touched by this
 * estimate): inflated by 531 MiB, its QEMU RSS fell by 501 MiB (the run of 2026-12-01; through
 * that memory first: 256 at most); by 449 MiB, 448 MiB (the kept reference run, 2026-12-04).
 *
 * "The guest's memory" is its total as it sees it (available: MemTotal), the measure what it
 * uses is taken from, less the balloon's pages where that total keeps them (deflate-on-oom).
 * Not its balloon size: that also holds what its kernel reserved at boot (outside MemTotal; 64
 * MiB of a 1 GiB Debian guest), which QEMU backs and which the estimate of QEMU's own memory
 * (the smallest RSS less what a guest uses) already holds. Counting it twice made 147 MiB of a
 * touched-and-freed guest's free memory "never touched" (83 MiB were, at most): the agent left
 * its 165 MiB above keep_free alone while the host was 540 MiB short. */
static uint64_t unbacked_free(const BmDomain *d, uint64_t used, uint64_t overhead)
{
    /* an RSS at or below what the guest uses tells nothing about its free pages (yield.h) */
    if (!bm_present(bm_yield_backed_free(d->rss_bytes, used)) || !bm_present(d->available_bytes) ||
        !bm_present(d->unused_bytes))
        return 0;
    uint64_t total = d->available_bytes, held = bm_domain_reclaimed_bytes(d);
    if (d->balloon_known && d->balloon.autodeflate == BM_TRI_ON && bm_present(held))
        total -= min_u64(total, held);
    uint64_t backed = d->rss_bytes - min_u64(d->rss_bytes, overhead);
    uint64_t unbacked = total > backed ? total - backed : 0;
    return min_u64(unbacked, d->unused_bytes);
}

/* What the host gets back of inflating a managed domain: its learned yield, the free memory
 * the host backs (QEMU RSS - the most it used lately - QEMU's own), whether it returns
 * nothing. */
static void set_yield(const BmDomain *d, const BmLedgerEntry *e, uint64_t overhead,
                      uint64_t now_s, BmDecision *x, Work *k)
{
    /* QEMU's own memory: measured for this domain where it could be, the host-wide estimate
     * otherwise */
    if (d->qemu_own_known)
        overhead = d->qemu_own_bytes;
    k->learned = e ? e->yield : (BmYield){0};
    k->rss_bytes = d->rss_bytes;
    x->yield_permille = bm_yield_permille(&k->learned);
    k->yield = counted_yield(&k->learned);
    x->backed_free_bytes = bm_yield_backed_free(d->rss_bytes, x->pressure.used_bytes);
    k->used_lately = used_lately(e, x->pressure.used_bytes, now_s, (unsigned)k->horizon_s);
    if (bm_present(x->backed_free_bytes))
        x->backed_free_bytes -= min_u64(x->backed_free_bytes, overhead + k->used_lately);
    x->returns_nothing = k->no_return || bm_yield_returns_nothing(&k->learned, d->rss_bytes);
    k->reports = d->balloon_known && d->balloon.free_page_reporting == BM_TRI_ON;
    k->unused = d->unused_bytes;
    k->cache = d->disk_caches_bytes;
    k->skip = unbacked_free(d, x->pressure.used_bytes, overhead);
    /* without reporting, less than the cap of QEMU's own memory cannot be told from an error
     * of its estimate: the learned yield and a probe serve there */
    if (k->skip < k->deadband ||
        (!k->reports && !d->qemu_own_known && k->skip <= BM_YIELD_OVERHEAD_MAX_BYTES))
        k->skip = 0;
    /* an inflate of its free memory alone returned nothing (learned, not estimated): all its
     * free memory is unbacked, and its page cache beyond it still returns (a "returns nothing"
     * mark from free memory once kept a real run off a cold cache of 770 MiB for good) */
    if (bm_yield_free_unbacked(&k->learned, d->rss_bytes) && bm_present(k->unused) && k->unused > 0)
        k->skip = k->unused;
    /* (a skip implies the guest's free memory is known: unbacked_free()) */
    k->skip_at = k->skip ? k->unused - min_u64(k->unused, k->skip) : 0;
    if (!k->skip && !k->reports)
        return;
    /* The free memory the host does not back is known: an inflate is counted for the rest,
     * without a probe. The learned yield mixes both parts (an inflate that went through 300 MiB
     * of it before reaching page cache "returned" a fraction), so it is not counted on: the
     * skip is. A "returns nothing" mark (an inflate gave back less than
     * a quarter) still holds, but for a reporting guest, where it is the rule. */
    k->yield = 1000;
    if (k->reports) /* its inflates' returns mix reported memory: no "returns nothing" mark */
        x->returns_nothing = k->no_return != NULL;
}

/* Why a domain with idle memory is not inflated in this pass although the host may need it,
 * or NULL: a timer's pass with no look at the guest until the next (the policy's
 * timer_inflate), or memory given to it in this pressure episode (no second reversal, unless
 * the host is near its own OOM: a guest given back its hot cache is the one left then). */
static const char *no_take_reason(const Work *k, bool self_deflates)
{
    if (k->stats_before_change)
        return "statistics older than its last change";
    if (k->given_s && !k->near_oom)
        return "given memory in this pressure episode";
    if (k->horizon_s == 0)
        return NULL;
    if (k->rules.timer_inflate == BM_TIMER_INFLATE_NEVER)
        return "timer_inflate never";
    if (k->rules.timer_inflate == BM_TIMER_INFLATE_DEFLATE_ON_OOM && !self_deflates)
        return "no deflate-on-oom";
    return NULL;
}

/* A domain with idle memory: how much may be taken (only free memory the host backs; a probe
 * first where that is unsure) and its weight; none when ballooning it returns nothing. Free
 * memory the host backs is taken within two passes (as fast as free page reporting would
 * return it), even beyond max_step. */
static void set_take(BmDecision *x, Work *k)
{
    k->role = ROLE_TAKE;
    uint64_t step = k->step;
    if (bm_present(x->backed_free_bytes))
        step = max_u64(step, ((x->backed_free_bytes / 2) + MiB - 1) & ~(MiB - 1));
    k->want = min_u64(x->idle_bytes, growth_for(k, step));
    /* count only on free memory the host backs: inflating pages the guest never touched (or
     * reported) gives the host nothing */
    uint64_t backed_end = bm_present(x->backed_free_bytes) ? growth_for(k, x->backed_free_bytes)
                                                             : UINT64_MAX;
    if (backed_end < k->want) {
        k->want = backed_end;
        k->cap = BM_CAP_BACKED;
    }
    uint64_t probe = probe_cap(&k->learned, x->idle_bytes, x->backed_free_bytes, k->deadband,
                               k->reports || k->skip);
    if (probe < k->want) {
        k->want = probe;
        k->cap = BM_CAP_PROBE;
    }
    /* a busy guest is not inflated through free memory the host does not back to reach a
     * smaller cache beyond it, near the host's own OOM or not: its vCPUs would pay for an
     * inflate that returns less than half of it (the model's hot guest: 489 MiB inflated for a
     * bite of 32; a real busy guest near that line was inflated 624 MiB, 508 of them unbacked
     * free memory, for 116 MiB of cache: its reads rose, the inflate was stopped 15.7 s in and
     * all given back 9.6 s later, and the guest lost 93 s of work for nothing the host kept).
     * Where the cache beyond is as large, it is reached through it: in bites away from that
     * line (tier_cap()), each bite past the unbacked free memory (a real guest's 425 MiB of
     * cache behind 98 MiB was never tried and the host's need stayed unmet) */
    k->busy = x->pressure.busy;
    uint64_t beyond = x->idle_bytes > k->skip_at + k->skip ? x->idle_bytes - k->skip_at - k->skip : 0;
    k->busy_unbacked = k->busy && k->skip > 0 && beyond < k->skip;
    if (k->busy_unbacked && k->want > k->skip_at) {
        k->want = k->skip_at;
        k->cap = BM_CAP_BACKED;
    }
    /* where its free memory ends (the balloon takes free pages first: those the host does not
     * back, skip, after those it does); the rest of its idle memory is page cache (all free
     * when the guest does not say) */
    k->free_end = bm_present(k->unused) ? min_u64(k->want, k->unused) : k->want;
    k->hot = x->cache_hot;
    uint64_t cache = bm_present(k->cache) ? k->cache : 0;
    k->bite = max_u64(k->deadband, cache / 1000 * BITE_PERMILLE) & ~(MiB - 1);
    unsigned shares = k->rules.shares ? k->rules.shares : 100;
    uint64_t basis = bm_present(x->backed_free_bytes) ? min_u64(x->idle_bytes, x->backed_free_bytes)
                                                      : x->idle_bytes;
    if (k->skip)
        basis = min_u64(basis, returning(k, k->busy_unbacked ? min_u64(x->idle_bytes, k->skip_at)
                                                             : x->idle_bytes));
    k->weight = (double)basis * 100.0 / shares;
    bool can = !x->returns_nothing && returning(k, k->want) >= k->deadband && k->weight > 0;
    if (!can || k->no_take) {
        k->role = ROLE_NONE;
        /* statistics that follow its last change come with the next reading */
        if (can && k->stats_before_change)
            k->waiting = expected_return(basis, k->yield);
    } else {
        k->potential = expected_return(basis, k->yield);
    }
}

/* Such a guest keeps what was taken while the host is near its own OOM (below half of
 * reclaim_below), and while the host reclaims once its cache is known hot (it is taken again
 * only near OOM): given back, the host would take it again at the next pass (a reversal a
 * pass). plan_reclaim() keeps it too where giving it back would put the host there. It is
 * given back when the host no longer reclaims. */
static bool keeps_hot_cache(const BmDecision *x, const Work *k)
{
    return may_keep_hot_cache(x) && (k->near_oom || (k->reclaim && x->cache_hot));
}

/* What a managed domain could do: be raised to its floor, get memory, give memory, or none. */
static void set_role(BmDecision *x, Work *k)
{
    uint64_t maxb = x->max_bytes, cur = x->current_bytes, room;
    const BmGuestPressure *gp = &x->pressure;
    if (gp->oom_s && cur <= maxb) {
        /* an OOM kill in this pressure episode: all of its memory back at once (not paced by
         * max_step: it already lost a process), and none taken again in the episode; but while
         * the host reclaims, at most what it has above its own OOM line (half of reclaim_below)
         * or max_step, whichever is more: there the host's OOM killer would take a whole QEMU */
        k->role = ROLE_GIVE_PROTECTED;
        x->short_of_memory = cur < maxb;
        k->want = maxb - cur;
        if (k->reclaim)
            k->want = min_u64(k->want, max_u64(k->step, k->oom_margin));
    } else if (cur < x->floor_bytes) {
        k->role = ROLE_FLOOR;
        k->want = x->floor_bytes - cur;
    } else if (cur > maxb) {
        k->role = ROLE_NONE;
    } else if (gp->stale) {
        x->action = BM_ACT_SKIP;
        x->cause = (BmReason){.code = bm_present(gp->headroom_bytes) ? BM_REASON_STALE
                                                                     : BM_REASON_NO_STATS,
                              .max_stats_age_s = k->rules.max_stats_age_s};
    } else if (gp->under_pressure && !keeps_hot_cache(x, k)) {
        /* it thrashes after our inflates: they are given back, and its cache is hot */
        k->role = ROLE_GIVE_PROTECTED;
        x->short_of_memory = true;
        k->want = min_u64(max_u64(k->step, gp->taken_bytes), maxb - cur);
        x->cache_found_hot |= gp->taken_bytes > 0;
    } else if (gp->refaulting && !keeps_hot_cache(x, k)) {
        k->role = ROLE_GIVE_BACK;
        x->cache_found_hot = true;
        k->want = min_u64(gp->taken_bytes, maxb - cur);
    } else if (gp->refaulting || gp->under_pressure) {
        k->role = ROLE_NONE; /* kept, not taken from further */
        k->kept_hot = x->cache_found_hot = true;
    } else if (x->returns_nothing && gp->taken_bytes >= k->deadband) {
        k->role = ROLE_GIVE_BACK; /* it gave the host nothing: not kept */
        k->want = min_u64(gp->taken_bytes, maxb - cur);
    } else if (gp->headroom_bytes < k->keep_free) {
        k->role = ROLE_GIVE_NEEDY;
        x->short_of_memory = true;
        k->want = min_u64(min_u64(k->step, maxb - cur), k->keep_free - gp->headroom_bytes + k->deadband);
    } else if (bm_present(room = grow_room(gp, k->keep_free, k->deadband, k->ahead_s))) {
        /* never inflated while it grows; given room ahead of its demand where it needs it */
        k->growing = true;
        k->role = room > 0 && cur < maxb ? ROLE_GIVE_GROWING : ROLE_NONE;
        k->want = min_u64(min_u64(k->step, maxb - cur), room);
    } else {
        set_take(x, k);
    }
}

/* How many intervals until the next pass: 1 for the agent, timer_interval / interval for a
 * timer's pass (rounded up). */
static unsigned pace_of(const BmPolicy *p, unsigned horizon_s)
{
    unsigned iv = p->interval_s ? p->interval_s : 1;
    return horizon_s > iv ? (horizon_s + iv - 1) / iv : 1;
}

/* When memory was given to a domain in this pressure episode (its balloon rose by 1 MiB or
 * more since the previous reading, or the ledger says so), or 0: none, or the host is
 * comfortable (mode release ends the episode). */
static uint64_t given_at(const BmDomain *d, const BmLedgerEntry *e, BmHostMode mode, uint64_t now_s)
{
    if (mode == BM_HOST_RELEASE || !e || !e->have_prev)
        return 0;
    if (bm_present(e->prev.actual_bytes) && bm_present(d->actual_bytes) &&
        d->actual_bytes >= e->prev.actual_bytes + MiB)
        return now_s;
    return bm_prev_given(&e->prev, now_s) ? e->prev.given_s : 0;
}

/* Whether the guest's statistics were taken before its last change ended (the ledger's live
 * balloon stands in for libvirt's lagging copy, bm_ledger_correct_balloons(), while the guest's
 * usable memory is still from before the change): an inflate planned from the two took the
 * idle guest of a real run 651 -> 256 MiB with its usable memory of before the last inflate,
 * and its next pass gave 150 MiB back (it was short). The statistics' time is QEMU's (whole
 * seconds): they count from the second after the change ended. */
static bool stats_predate(const BmDomain *d, const BmLedgerEntry *e)
{
    if (!e || !e->last_ended_real_ns || !bm_present(d->last_update_s) || d->last_update_s == 0)
        return false;
    return d->last_update_s <= e->last_ended_real_ns / 1000000000ull;
}

/* What an inflate of ours still in flight will give the host: the balloon it has still to
 * go to its target, times what the domain's inflates yield; 0 for none, or a deflate. */
static uint64_t in_flight_return(const BmDomain *d, const BmLedgerEntry *e)
{
    if (!e || !e->in_flight || !bm_present(e->last_target_bytes) || !bm_present(d->actual_bytes) ||
        e->last_target_bytes >= d->actual_bytes)
        return 0;
    return expected_return(d->actual_bytes - e->last_target_bytes, counted_yield(&e->yield));
}

/* A domain moved through virtio-mem whose guest refused to unplug more in this episode (its
 * entry's mark, until the host is comfortable or BM_GIVEN_HOLD_S) is asked no lower: its idle
 * memory ends where the guest stopped, unless it plugged more since (then down to there). */
static void vmem_refusal(const BmLedgerEntry *e, BmHostMode mode, uint64_t now_s, BmDecision *x,
                         Work *k)
{
    if (!e || mode == BM_HOST_RELEASE || !bm_episode_mark_holds(e->vmem_refused_s, now_s))
        return;
    uint64_t cur = x->current_bytes, refused = e->vmem_refused_bytes;
    uint64_t left = cur > refused ? cur - refused : 0;
    if (x->idle_bytes > left) {
        x->idle_bytes = left;
        k->cap = BM_CAP_REFUSED;
        k->refused = true;
        k->refused_bytes = refused;
    }
}

/* Step 1 for one domain: its pressure, whether it is managed, its limits, yield and role.
 * overhead: QEMU's own memory per domain (step 0). */
static void classify(const BmRow *row, const BmPolicy *policy, uint64_t now_s, uint64_t overhead,
                     unsigned horizon_s, BmHostMode mode, BmDecision *x, Work *k)
{
    const BmDomain *d = row->dom;
    const BmLedgerEntry *e = row->entry;
    k->horizon_s = horizon_s;
    k->reclaim = mode == BM_HOST_RECLAIM;
    snprintf(x->uuid, sizeof(x->uuid), "%s", d->uuid);
    x->name = bm_strdup(d->name);
    x->current_bytes = x->target_bytes = d->actual_bytes;
    x->rss_bytes = d->rss_bytes;
    x->max_bytes = d->max_bytes;
    x->floor_bytes = BM_ABSENT;
    x->action = BM_ACT_SKIP;
    x->vmem_index = -1;
    k->rules = row->rules;
    if (d->vmem) { /* its sizes are its virtio-mem devices' (bm_domain_move_by()) */
        x->vmem = true;
        k->vmem = &d->balloon;
        k->pool = d->balloon.hugepages;
    }
    bm_guest_pressure(d, e && e->have_prev ? &e->prev : NULL, &k->rules, now_s, &x->pressure);
    /* the episode's mark, also of a running domain this pass leaves alone (a give-back still
     * in flight, paused, unresponsive): the export and status show it from here */
    x->cache_hot = d->active && e && bm_prev_cache_hot(&e->prev, now_s);
    if (skipped(d, e, &k->rules, &x->cause)) {
        if (k->pool) /* its unplug gives the pool, not MemAvailable */
            k->pool_in_flight = in_flight_return(d, e) ? d->actual_bytes - e->last_target_bytes : 0;
        else
            k->in_flight = in_flight_return(d, e);
        return;
    }
    set_limits(d, pace_of(policy, horizon_s), x, k);
    if (k->vmem)
        vmem_refusal(e, mode, now_s, x, k);
    /* an unplugged block is given back whatever backs it (VFIO's coordinated discards, huge
     * pages to their pool): what makes a balloon return nothing does not hold */
    k->no_return = k->vmem ? NULL : no_return_reason(d);
    if (k->no_return && d->actual_bytes >= d->max_bytes) {
        x->cause = (BmReason){.code = BM_REASON_RETURNS_NOTHING, .no_return = k->no_return};
        x->returns_nothing = true;
        return;
    }
    x->action = BM_ACT_NONE;
    set_yield(d, e, overhead, now_s, x, k);
    if (k->pool) {
        /* huge pages are not in the QEMU RSS: nothing of it tells what an unplug gives (the
         * pool's free pages do), so no backed memory, probe, "returns nothing" nor skip */
        x->backed_free_bytes = BM_ABSENT;
        x->returns_nothing = false;
        k->yield = 1000;
        k->skip = k->skip_at = 0;
        k->learned = (BmYield){0};
    }
    k->given_s = given_at(d, e, mode, now_s);
    k->given_ago_s = k->given_s && now_s > k->given_s ? now_s - k->given_s : 0;
    k->stats_before_change = stats_predate(d, e);
    /* a guest cannot plug virtio-mem by itself when it runs short: no deflate-on-oom */
    k->no_take = no_take_reason(k, !k->vmem && d->balloon_known &&
                                       d->balloon.autodeflate == BM_TRI_ON);
    set_role(x, k);
    if (k->pool && k->role == ROLE_TAKE)
        k->role = ROLE_POOL; /* not for MemAvailable: for the pool's need alone (plan_pool()) */
    x->cache_hot |= x->cache_found_hot;
}

/* x's structured reason: code and the numbers of its work k that the words may quote. */
static void set_cause(BmDecision *x, const Work *k, BmReasonCode code)
{
    x->cause = (BmReason){
        .code = code,
        .want_bytes = k->want,
        .amount_bytes = k->amount,
        .step_bytes = k->step,
        .keep_free_bytes = k->keep_free,
        .ahead_s = k->ahead_s,
        .cap = k->cap,
        .busy = k->busy,
        .bite_bytes = k->busy && !k->hot && !k->near_oom ? k->bite : 0,
        .shares = k->rules.shares,
        .max_stats_age_s = k->rules.max_stats_age_s,
        .skip_bytes = k->skip,
        .used_lately_bytes = k->used_lately,
        .reports = k->reports,
        .last_inflated_bytes = k->learned.last_inflated_bytes,
        .last_returned_bytes = k->learned.last_returned_bytes,
        .no_return = k->no_return,
        .horizon_s = k->horizon_s,
        .given_ago_s = k->given_ago_s,
        .refused_bytes = k->refused ? k->refused_bytes : 0,
    };
}

/* Why a guest in need is given memory: an OOM kill, starving, under pressure (protected),
 * short of memory, growing. */
static BmReasonCode give_code(const BmDecision *x, const Work *k)
{
    const BmGuestPressure *gp = &x->pressure;
    if (k->role == ROLE_GIVE_PROTECTED)
        return gp->oom_s      ? BM_REASON_OOM_KILL
               : gp->starving ? BM_REASON_STARVING
                              : BM_REASON_UNDER_PRESSURE;
    return k->role == ROLE_GIVE_NEEDY ? BM_REASON_SHORT : BM_REASON_GROWING;
}

/* A domain with idle memory: taken from, or why not. */
static BmReasonCode take_code(const BmPlan *plan, const Work *k)
{
    if (plan->mode != BM_HOST_RECLAIM)
        return BM_REASON_NOT_NEEDED;
    if (k->amount == 0 && k->hot && k->want > k->free_end)
        return BM_REASON_HOT_SPARED;
    if (k->amount == 0 && k->busy && plan->busy_deferred)
        return BM_REASON_BUSY_SPARED;
    return k->amount == 0 ? BM_REASON_NOT_ASKED : BM_REASON_TAKE;
}

/* Why a domain with no role is left as it is. */
static BmReasonCode none_code(const BmPlan *plan, const BmDecision *x, const Work *k)
{
    bool reclaim = plan->mode == BM_HOST_RECLAIM;
    if (x->current_bytes > x->max_bytes)
        return BM_REASON_ABOVE_MAX;
    if (k->growing)
        return x->current_bytes >= x->max_bytes ? BM_REASON_GROWS_AT_MAX : BM_REASON_GROWS;
    if (k->kept_hot)
        return BM_REASON_KEPT_HOT;
    if (!reclaim)
        return BM_REASON_FINE;
    if (k->no_take && k->stats_before_change)
        return BM_REASON_STATS_PREDATE;
    if (k->no_take && k->given_s)
        return BM_REASON_GIVEN;
    if (k->no_take)
        return k->rules.timer_inflate == BM_TIMER_INFLATE_NEVER ? BM_REASON_TIMER_NEVER
                                                                : BM_REASON_TIMER_SELF_DEFLATE;
    if (x->returns_nothing)
        return k->no_return ? BM_REASON_NO_RETURN : BM_REASON_RETURNED_NOTHING;
    if (k->refused && x->idle_bytes < k->deadband)
        return BM_REASON_VMEM_REFUSED;
    if (k->skip && x->idle_bytes >= k->deadband && returning(k, x->idle_bytes) < k->deadband)
        return BM_REASON_UNBACKED;
    if (k->busy_unbacked && x->idle_bytes >= k->deadband)
        return BM_REASON_BUSY_UNBACKED;
    if (x->idle_bytes >= k->deadband && bm_present(x->backed_free_bytes) &&
        x->backed_free_bytes < k->deadband)
        return BM_REASON_NOT_BACKED;
    return BM_REASON_NOTHING_TO_TAKE;
}

/* What an inflate of amount takes: free memory, then page cache (hot or not). */
static void take_parts(BmDecision *x, const Work *k, uint64_t amount)
{
    x->take_cache_bytes = x->take_hot_bytes = 0;
    x->take_free_bytes = min_u64(amount, k->free_end);
    uint64_t cache = amount - x->take_free_bytes;
    if (k->hot)
        x->take_hot_bytes = cache;
    else
        x->take_cache_bytes = cache;
}

/* x's action and target as its role and amount say, and the code of its reason. */
static void decide(const BmPlan *plan, BmDecision *x, const Work *k)
{
    uint64_t cur = x->current_bytes;
    BmReasonCode code;
    bool moves; /* give or take k->amount */
    switch (k->role) {
    case ROLE_FLOOR:
        set_cause(x, k, BM_REASON_FLOOR);
        x->target_bytes = x->floor_bytes;
        x->action = BM_ACT_DEFLATE;
        return;
    case ROLE_GIVE_PROTECTED:
    case ROLE_GIVE_NEEDY:
    case ROLE_GIVE_GROWING:
        code = give_code(x, k);
        moves = k->want && k->amount;
        break;
    case ROLE_GIVE_BACK:
        code = x->pressure.refaulting ? BM_REASON_CACHE_REFAULT : BM_REASON_GAVE_NOTHING;
        moves = k->amount;
        break;
    case ROLE_REST:
        code = BM_REASON_RELEASE;
        moves = k->amount;
        break;
    case ROLE_TAKE:
        code = take_code(plan, k);
        moves = code == BM_REASON_TAKE;
        break;
    case ROLE_POOL:
        code = k->amount ? BM_REASON_POOL_TAKE : BM_REASON_POOL_SPARED;
        moves = k->amount > 0;
        break;
    default:
        code = none_code(plan, x, k);
        moves = false;
        break;
    }
    set_cause(x, k, code);
    if (moves && (code == BM_REASON_TAKE || code == BM_REASON_POOL_TAKE)) {
        x->target_bytes = cur - k->amount;
        x->action = BM_ACT_INFLATE;
        take_parts(x, k, k->amount);
    } else if (moves) {
        x->target_bytes = cur + k->amount;
        x->action = BM_ACT_DEFLATE;
    }
}

/* A change of a domain moved through virtio-mem, in whole blocks of the one device it moves
 * (bm_vmem_pick()): an unplug rounds down what it takes (never more than the plan took), a plug
 * rounds up (at most the device's room); less than a block is no change. */
static void vmem_blocks(BmDecision *x, const Work *k)
{
    uint64_t cur = x->current_bytes;
    bool unplug = x->action == BM_ACT_INFLATE;
    uint64_t asked = unplug ? cur - x->target_bytes : x->target_bytes - cur, amount = 0;
    int i = bm_vmem_pick(k->vmem, unplug);
    const BmVirtioMem *m = i >= 0 ? &k->vmem->virtio_mem[i] : NULL;
    if (m)
        amount = unplug ? bm_vmem_round_unplug(asked, m->block_bytes, m->current_bytes)
                        : bm_vmem_round_plug(asked, m->block_bytes, bm_vmem_pluggable_bytes(m));
    if (!m || amount == 0 || (unplug && amount > cur - x->floor_bytes)) {
        x->cause.code = BM_REASON_BELOW_BLOCK;
        x->cause.block_bytes = m ? m->block_bytes : 0;
        x->cause.asked_bytes = asked;
        x->action = BM_ACT_NONE;
        x->target_bytes = cur;
        x->take_free_bytes = x->take_cache_bytes = x->take_hot_bytes = 0;
        return;
    }
    x->vmem_index = i;
    x->vmem_block_bytes = m->block_bytes;
    x->vmem_offset_bytes = cur - m->current_bytes;
    x->vmem_requested_bytes = unplug ? m->current_bytes - amount : m->current_bytes + amount;
    x->target_bytes = unplug ? cur - amount : cur + amount;
    x->cause.amount_bytes = amount;
    if (unplug)
        take_parts(x, k, amount);
}

/* Step 3b: the host's huge-page pool below hugepages_free_below needs pages back, which only
 * huge-page guests' virtio-mem unplugs give (ROLE_POOL: what they have idle, at most max_step);
 * the most idle first, until the need less what our unplugs in flight still give is met. In
 * every mode: the pool's need is not MemAvailable's. */
static void plan_pool(BmPlan *ret, const BmHost *host, const BmPolicy *p, Work *w, size_t n)
{
    uint64_t total = host->hugepages_total_bytes;
    ret->hugepages_free_bytes = host->hugepages_free_bytes;
    ret->hugepages_below_bytes = total ? bm_amount_bytes(p->hugepages_free_below, total) : 0;
    ret->hugepages_budget_bytes = ret->hugepages_free_bytes > ret->hugepages_below_bytes
                                      ? ret->hugepages_free_bytes - ret->hugepages_below_bytes
                                      : 0;
    if (ret->hugepages_free_bytes >= ret->hugepages_below_bytes)
        return;
    uint64_t need = ret->hugepages_below_bytes - ret->hugepages_free_bytes, coming = 0;
    for (size_t i = 0; i < n; i++)
        coming += w[i].pool_in_flight;
    need = need > coming ? need - coming : 0;
    ret->hugepages_need_bytes = need;
    _cleanup_free_ Order *ord = bm_malloc0((n + 1) * sizeof(Order));
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (w[i].role == ROLE_POOL)
            ord[m++] = (Order){i, -(double)w[i].want};
    qsort(ord, m, sizeof(Order), cmp_order);
    for (size_t j = 0; j < m && need > 0; j++) {
        Work *x = &w[ord[j].idx];
        uint64_t take = min_u64(x->want, need) & ~(MiB - 1);
        x->amount = take;
        need -= min_u64(take, need);
    }
}

/* A plug into a huge-page guest takes pages of the host's pool: at most its free pages above
 * hugepages_free_below, what the plugs before it left (plan->hugepages_budget_bytes), in
 * whole blocks: a block QEMU cannot back with a huge page would fail the guest. */
static void pool_plug(BmPlan *plan, BmDecision *x)
{
    uint64_t give = x->target_bytes - x->current_bytes, block = x->vmem_block_bytes;
    if (give > plan->hugepages_budget_bytes)
        give = block ? plan->hugepages_budget_bytes / block * block : 0;
    if (give == 0) {
        x->cause.code = BM_REASON_POOL_EMPTY;
        x->cause.asked_bytes = x->target_bytes - x->current_bytes;
        x->action = BM_ACT_NONE;
        x->target_bytes = x->current_bytes;
        x->vmem_index = -1;
        return;
    }
    x->vmem_requested_bytes -= x->target_bytes - x->current_bytes - give;
    x->target_bytes = x->current_bytes + give;
    x->cause.amount_bytes = give;
    plan->hugepages_budget_bytes -= give;
}

/* Step 4 for one domain: its target and reason, within floor and maximum; the plan's sums. */
static void finish(BmPlan *plan, BmDecision *x, const Work *k)
{
    uint64_t cur = x->current_bytes;
    if (x->action != BM_ACT_SKIP)
        decide(plan, x, k);
    /* safety net: a target set is never below the floor, never above the maximum (one left
     * alone stays where it is, even above the maximum) */
    if (x->action != BM_ACT_SKIP) {
        if (x->target_bytes != cur && x->target_bytes < x->floor_bytes)
            x->target_bytes = x->floor_bytes;
        if (x->target_bytes != cur && x->target_bytes > x->max_bytes)
            x->target_bytes = x->max_bytes;
        if (x->target_bytes == cur)
            x->action = BM_ACT_NONE;
    }
    if (k->vmem && (x->action == BM_ACT_INFLATE || x->action == BM_ACT_DEFLATE))
        vmem_blocks(x, k);
    if (k->pool && x->action == BM_ACT_DEFLATE)
        pool_plug(plan, x);
    if (x->action == BM_ACT_INFLATE && !k->pool)
        x->expected_return_bytes = expected_return(returning(k, cur - x->target_bytes), k->yield);
    if (x->action == BM_ACT_INFLATE && k->pool)
        plan->hugepages_planned_bytes += cur - x->target_bytes;
    if (x->action == BM_ACT_INFLATE) {
        uint64_t take = cur - x->target_bytes;
        plan->planned_inflate_bytes += take;
        plan->hot_cache_bytes += x->take_hot_bytes;
    } else if (x->action == BM_ACT_DEFLATE) {
        plan->planned_deflate_bytes += x->target_bytes - cur;
    }
}

int bm_policy_eval_rows(const BmHost *host, const BmRows *rows, BmHostMode prev_mode,
                        const BmPolicy *policy, uint64_t now_s, unsigned horizon_s, BmPlan *ret)
{
    *ret = (BmPlan){0};
    if (!bm_present(host->mem_total_bytes) || !bm_present(host->mem_available_bytes))
        return bm_error(-EINVAL, "host memory reading lacks MemTotal or MemAvailable");
    uint64_t surplus;
    decide_host(host, policy, prev_mode, ret, &surplus);

    size_t n = rows->n_rows;
    ret->decisions = bm_malloc0((n + 1) * sizeof(BmDecision));
    ret->n_decisions = n;
    _cleanup_free_ Work *w = bm_malloc0((n + 1) * sizeof(Work));

    /* 0. QEMU's own memory, to tell it from guest memory the host backs (yield.h) */
    ret->qemu_overhead_bytes = qemu_overhead(rows, now_s);
    /* 1. classify every domain */
    for (size_t i = 0; i < n; i++) {
        w[i].near_oom = ret->hot_cache_allowed;
        w[i].oom_margin = ret->oom_margin_bytes;
        classify(&rows->rows[i], policy, now_s, ret->qemu_overhead_bytes, horizon_s, ret->mode,
                 &ret->decisions[i], &w[i]);
    }
    /* 2. floors first, always (they need no stats) */
    for (size_t i = 0; i < n; i++)
        if (w[i].role == ROLE_FLOOR)
            w[i].amount = w[i].want;
    /* 3. take (reclaim) or give (hold/release: to guests in need, then the rest) */
    if (ret->mode == BM_HOST_RECLAIM) {
        plan_reclaim(ret, w, n);
    } else {
        /* what our inflates took from a thrashing guest, or gave the host nothing: back,
         * budget or not */
        for (size_t i = 0; i < n; i++)
            if (w[i].role == ROLE_GIVE_BACK)
                w[i].amount = w[i].want & ~(MiB - 1);
        uint64_t left = distribute_give(w, n, ret->budget_bytes);
        if (ret->mode == BM_HOST_RELEASE)
            distribute_rest(ret, w, n, min_u64(left, surplus));
    }
    /* 3b. the huge-page pool's own need, from huge-page guests alone */
    plan_pool(ret, host, policy, w, n);
    /* 4. targets, and what holds idle memory back */
    for (size_t i = 0; i < n; i++)
        finish(ret, &ret->decisions[i], &w[i]);
    if (ret->mode == BM_HOST_RECLAIM)
        explain_reclaim(ret, w, n);
    return 0;
}

void bm_plan_attach(BmPlan *p, BmRows *rows, uint64_t gen)
{
    p->gen = gen;
    for (size_t i = 0; i < rows->n_rows && i < p->n_decisions; i++) {
        rows->rows[i].entry->plan_gen = gen;
        rows->rows[i].entry->plan_index = i;
    }
    bm_plan_link(p, rows);
}

void bm_plan_link(const BmPlan *p, BmRows *rows)
{
    for (size_t i = 0; i < rows->n_rows; i++) {
        BmRow *row = &rows->rows[i];
        const BmLedgerEntry *en = row->entry;
        row->decision = p && p->gen && en && en->plan_gen == p->gen && en->plan_index < p->n_decisions
                            ? &p->decisions[en->plan_index]
                            : NULL;
    }
}

void bm_plan_clear(BmPlan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_decisions; i++)
        free(p->decisions[i].name);
    free(p->decisions);
    *p = (BmPlan){0};
}

bool bm_policy_inflate_hurts(const BmRow *row, uint64_t now_s, bool host_near_oom,
                             BmGuestPressure *ret)
{
    BmGuestPressure gp;
    const BmLedgerEntry *e = row->entry;
    if (!ret)
        ret = &gp;
    if (!e || !e->have_prev || !e->in_flight || !row->dom->active) {
        bm_guest_pressure(row->dom, NULL, &row->rules, now_s, ret);
        return false;
    }
    bm_guest_pressure(row->dom, &e->prev, &row->rules, now_s, ret);
    return !host_near_oom && (ret->refaulting || ret->under_pressure);
}

bool bm_host_near_oom(const BmHost *h, const BmPolicy *p)
{
    if (!bm_present(h->mem_total_bytes) || !bm_present(h->mem_available_bytes))
        return false;
    return h->mem_available_bytes < bm_amount_bytes(p->reclaim_below, h->mem_total_bytes) / 2;
}

bool bm_host_under_pressure(const BmHost *h, const BmPolicy *p)
{
    if (!bm_present(h->mem_total_bytes) || !bm_present(h->mem_available_bytes))
        return false;
    if (h->mem_available_bytes < bm_amount_bytes(p->reclaim_below, h->mem_total_bytes))
        return true;
    return p->psi_reclaim_above >= 0 && h->psi_present && h->psi_some_avg10 > p->psi_reclaim_above;
}

bool bm_policy_rows_in_need(const BmRows *rows, uint64_t now_s)
{
    for (size_t i = 0; i < rows->n_rows; i++) {
        const BmDomain *d = rows->rows[i].dom;
        const BmGuestRules *rules = &rows->rows[i].rules;
        if (!d->active || d->state != VIR_DOMAIN_RUNNING ||
            (d->balloon_known && !d->balloon.present && !d->vmem) ||
            !bm_present(d->actual_bytes) || !bm_present(d->max_bytes) || d->actual_bytes >= d->max_bytes)
            continue;
        if (rules->exclude)
            continue;
        const BmLedgerEntry *e = rows->rows[i].entry;
        if (e && (e->in_flight || e->unresponsive))
            continue;
        BmGuestPressure gp;
        bm_guest_pressure(d, e && e->have_prev ? &e->prev : NULL, rules, now_s, &gp);
        uint64_t keep_free = bm_amount_bytes(rules->keep_free, d->max_bytes);
        uint64_t room = grow_room(&gp, keep_free, bm_amount_bytes(rules->deadband, d->max_bytes),
                                  GROW_AHEAD_S);
        if (gp.refaulting || (!gp.stale && (gp.under_pressure || gp.headroom_bytes < keep_free ||
                                            (bm_present(room) && room > 0))))
            return true;
    }
    return false;
}

uint64_t bm_absolute_floor(uint64_t max_bytes)
{
    uint64_t floor = (uint64_t)((unsigned __int128)max_bytes * BM_SET_MIN_PERMILLE / 1000);
    return min_u64(max_u64(floor, BM_SET_MIN_BYTES), max_bytes);
}

uint64_t bm_manual_floor(uint64_t max_bytes, uint64_t min_guarantee_bytes,
                         uint64_t policy_floor_bytes, const char **ret_why)
{
    uint64_t floor = max_u64(bm_absolute_floor(max_bytes), BM_SET_MIN_BYTES);
    const char *why = "the absolute minimum (the larger of 128 MiB and 5% of the maximum)";
    if (bm_present(min_guarantee_bytes) && min_guarantee_bytes > floor) {
        floor = min_guarantee_bytes;
        why = "<memtune><min_guarantee>";
    }
    if (bm_present(policy_floor_bytes) && policy_floor_bytes > floor) {
        floor = policy_floor_bytes;
        why = "the policy's floor";
    }
    if (floor > max_bytes)
        floor = max_bytes;
    if (ret_why)
        *ret_why = why;
    return floor;
}
