/* Properties of the policy decision (bm_policy_eval_rows(), through the join) on random hosts,
 * snapshots and policies:
 * the guarantees src/policy-eval.h makes must hold for every plan, not only for the hand-made
 * cases of test-policy-eval.c. Deterministic: BM_PROPS_SEED picks the seed (printed),
 * BM_PROPS_CASES the number of cases (default 20000), BM_PROPS_CASE runs one case only.
 * A failure prints its seed and case number and the whole case. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "policy-eval.h"
#include "size.h"
#include "route.h"
#include "tap.h"
#include "util.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define NOW 2000000000ull
#define DEFAULT_SEED 20261129ull
#define DEFAULT_CASES 20000
#define MAX_DOMAINS 50
#define MAX_DUMPS 3 /* cases printed in full per property */

/* --- a small deterministic PRNG (splitmix64) */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* 0 .. n-1 */
static uint64_t below(uint64_t n)
{
    return n ? rnd() % n : 0;
}

/* true with probability pct percent */
static bool chance(unsigned pct)
{
    return below(100) < pct;
}

/* A size spread over orders of magnitude: 2^lo_exp .. 2^(hi_exp+1) bytes. */
static uint64_t size_between(unsigned lo_exp, unsigned hi_exp)
{
    unsigned e = lo_exp + (unsigned)below(hi_exp - lo_exp + 1);
    return ((uint64_t)1 << e) + below((uint64_t)1 << e);
}

/* n - below(result) stays >= 0: a random decrease of n of at most cap. */
static uint64_t min_rate_cap(uint64_t n, uint64_t cap)
{
    return (n < cap ? n : cap) + 1;
}

static BmAmount random_amount(bool nonzero)
{
    if (chance(60)) {
        uint32_t pm = (uint32_t)below(1001);
        if (nonzero && pm == 0)
            pm = 1;
        return (BmAmount){.is_percent = true, .permille = pm};
    }
    uint64_t b = chance(10) ? below(4096) : size_between(20, 36);
    if (nonzero && b == 0)
        b = 1;
    return (BmAmount){.bytes = b};
}

/* --- random cases */

/* What the case says the ledger knows of a domain: its previous reading and marks. */
typedef struct {
    char uuid[40];
    uint64_t major_faults, swap_in_bytes, last_update_s, taken_s;
    uint64_t used_bytes, actual_bytes; /* what the guest used then, its balloon then */
    bool unresponsive, busy;
    BmYield yield;
} PrevDomain;

typedef struct {
    BmHostMode mode;
    PrevDomain *domains;
    size_t n_domains;
} Previous;

typedef struct {
    uint64_t seed;
    BmHost host;
    BmPolicy *policy;
    BmDomain domains[MAX_DOMAINS];
    char names[MAX_DOMAINS][32];
    size_t n;
    PrevDomain prev_domains[MAX_DOMAINS];
    Previous prev;
    bool has_prev;
} Case;

static void random_rules(BmGuestRules *g, bool all)
{
    if (all || chance(50))
        BM_RULE_SET(g, floor, random_amount(false));
    if (all || chance(50))
        BM_RULE_SET(g, keep_free, random_amount(false));
    if (all || chance(50))
        BM_RULE_SET(g, max_step, random_amount(true));
    if (all || chance(50))
        BM_RULE_SET(g, deadband, chance(30) ? (BmAmount){.bytes = 0} : random_amount(false));
    if (all || chance(40)) {
        static const unsigned edges[] = {1, 2, 100, 9999, 10000};
        BM_RULE_SET(g, shares,
                    chance(20) ? edges[below(BM_ARRAY_SIZE(edges))] : 1 + (unsigned)below(10000));
    }
    if (all || chance(40))
        BM_RULE_SET(g, protect_major_faults, chance(20) ? 0 : (double)below(2000) / 10);
    if (all || chance(40))
        BM_RULE_SET(g, protect_swap_in, chance(20) ? 0 : size_between(10, 26));
    if (all || chance(40))
        BM_RULE_SET(g, max_stats_age_s, chance(20) ? 0 : 1 + (unsigned)below(600));
    if (chance(all ? 0 : 10))
        BM_RULE_SET(g, exclude, below(2) == 1);
}

static const char *const globs[] = {
    "web*", "db-[0-9]*", "*", "batch?", "[!w]*", "x", "*-[[:digit:]]",
};
static const char *const stems[] = {"web", "db-", "batch", "x", "cache-", "w"};

static void random_policy(Case *c)
{
    BmPolicy *p = c->policy = bm_policy_new_default();
    if (chance(50)) {
        /* host thresholds in permille, in order as the parser demands: a < b < r */
        uint32_t a = (uint32_t)below(900);
        uint32_t b = a + 1 + (uint32_t)below(999 - a);
        uint32_t r = b + 1 + (uint32_t)below(1000 - b);
        p->reclaim_below = (BmAmount){.is_percent = true, .permille = a};
        p->target_available = (BmAmount){.is_percent = true, .permille = b};
        p->release_above = (BmAmount){.is_percent = true, .permille = r};
    }
    if (chance(50)) {
        p->psi_reclaim_above = chance(20) ? -1 : (double)below(1000) / 10;
        p->psi_release_below = chance(20) ? -1
                               : p->psi_reclaim_above > 0
                                   ? (double)below((uint64_t)(p->psi_reclaim_above * 10)) / 10
                                   : -1;
    }
    if (chance(70))
        random_rules(&p->guest, chance(30));
    size_t nd = chance(50) ? 0 : 1 + below(4);
    if (nd) {
        p->domains = bm_malloc0(nd * sizeof(BmGuestRules));
        p->n_domains = nd;
        for (size_t i = 0; i < nd; i++) {
            p->domains[i] = (BmGuestRules){.line = (unsigned)(10 + i)};
            p->domains[i].glob = bm_strdup(globs[below(BM_ARRAY_SIZE(globs))]);
            random_rules(&p->domains[i], false);
        }
    }
}

static void random_domain(Case *c, size_t i)
{
    BmDomain *d = &c->domains[i];
    snprintf(c->names[i], sizeof(c->names[i]), "%s%zu", stems[below(BM_ARRAY_SIZE(stems))], i);
    *d = (BmDomain){0};
    d->name = c->names[i];
    snprintf(d->uuid, sizeof(d->uuid), "%08" PRIx64 "-0000-0000-0000-%012x", c->seed & 0xffffffff,
             (unsigned)i);
    d->active = !chance(8);
    d->state = !d->active ? VIR_DOMAIN_SHUTOFF : chance(3) ? VIR_DOMAIN_PAUSED : VIR_DOMAIN_RUNNING;

    d->max_bytes = chance(2) ? BM_ABSENT : chance(1) ? 0 : size_between(28, 38);
    uint64_t maxb = bm_present(d->max_bytes) ? d->max_bytes : size_between(28, 38);
    if (chance(2))
        d->actual_bytes = BM_ABSENT;
    else if (chance(3))
        d->actual_bytes = maxb + below(maxb / 4 + 1); /* above the maximum */
    else if (chance(15))
        d->actual_bytes = maxb;
    else
        d->actual_bytes = maxb / 20 + below(maxb - maxb / 20 + 1);
    uint64_t actual = bm_present(d->actual_bytes) ? d->actual_bytes : maxb;

    bool stats = !chance(10);
    d->available_bytes = stats || chance(30) ? actual - below(actual / 10 + 1) : BM_ABSENT;
    if (stats) {
        uint64_t avail = bm_present(d->available_bytes) ? d->available_bytes : actual;
        d->usable_bytes = chance(15) ? BM_ABSENT : below(avail + 1);
        d->unused_bytes = chance(10) ? BM_ABSENT : below(avail / 2 + 1);
        d->disk_caches_bytes = chance(20) ? BM_ABSENT : below(avail / 2 + 1);
        if (chance(5)) /* usable reported above what the guest has (odd drivers) */
            d->usable_bytes = avail + below(avail + 1);
    } else {
        d->usable_bytes = d->unused_bytes = d->disk_caches_bytes = BM_ABSENT;
    }
    d->last_update_s = chance(5) ? BM_ABSENT : chance(3) ? 0 : NOW - below(chance(70) ? 40 : 4000);
    if (chance(2))
        d->last_update_s = NOW + below(100); /* guest clock ahead */
    /* QEMU RSS: what the guest uses and some free memory the host backs, or less (swapped) */
    d->rss_bytes = chance(10) ? BM_ABSENT : chance(50) ? actual : below(actual + maxb / 4 + 1);
    d->major_faults = chance(5) ? BM_ABSENT : below(1ull << 40);
    d->swap_in_bytes = chance(5) ? BM_ABSENT : below(1ull << 44);
    d->swap_out_bytes = 0;
    d->minor_faults = 0;
    d->balloon_known = !chance(10);
    d->balloon.present = !chance(4);
    d->balloon.min_guarantee_bytes = chance(60)   ? BM_ABSENT
                                     : chance(10) ? maxb + below(maxb + 1)
                                                  : below(maxb + 1);
    d->balloon.autodeflate = chance(30) ? BM_TRI_ON : chance(50) ? BM_TRI_OFF : BM_TRI_UNSET;
    d->balloon.free_page_reporting = chance(30) ? BM_TRI_ON : BM_TRI_UNSET;
    /* domains whose inflates return nothing to the host (VFIO, locked, hugepages) */
    d->balloon.vfio_hostdev = chance(3);
    d->balloon.memory_locked = chance(3);
    d->balloon.hugepages = chance(3);

    /* the previous reading: rates from its counters */
    if (c->has_prev && chance(80)) {
        PrevDomain *p = &c->prev_domains[c->prev.n_domains++];
        *p = (PrevDomain){0};
        snprintf(p->uuid, sizeof(p->uuid), "%s", d->uuid);
        uint64_t dt = 1 + below(chance(80) ? 30 : 3600);
        p->taken_s = chance(3) ? NOW + 5 : NOW - dt;
        p->last_update_s = bm_present(d->last_update_s) && d->last_update_s > dt && chance(70)
                               ? d->last_update_s - below(dt + 1)
                           : chance(50) ? BM_ABSENT
                                        : NOW - below(100);
        /* fault counts behind the current ones by a random rate, sometimes ahead (reboot) */
        if (!bm_present(d->major_faults) || chance(5))
            p->major_faults = chance(50) ? BM_ABSENT : below(1ull << 41);
        else
            p->major_faults = d->major_faults - below(min_rate_cap(d->major_faults, dt * 400));
        if (!bm_present(d->swap_in_bytes) || chance(5))
            p->swap_in_bytes = chance(50) ? BM_ABSENT : below(1ull << 45);
        else
            p->swap_in_bytes =
                d->swap_in_bytes - below(min_rate_cap(d->swap_in_bytes, dt * (8 * MiB)));
        if (chance(2)) { /* a guest reporting absurd counters: rates near 2^64 per second */
            d->major_faults = BM_ABSENT - 1 - below(1000);
            d->swap_in_bytes = BM_ABSENT - 1 - below(1000);
            p->major_faults = p->swap_in_bytes = below(1000);
            p->last_update_s = BM_ABSENT;
            p->taken_s = NOW - 1;
        }
        /* what it used then: unknown, the same, less (it grows now) or more; its balloon then:
         * the same, or higher (inflated since) */
        uint64_t used = bm_present(d->available_bytes) && bm_present(d->usable_bytes) &&
                                d->available_bytes > d->usable_bytes
                            ? d->available_bytes - d->usable_bytes
                            : below(maxb + 1);
        p->used_bytes = chance(20)   ? BM_ABSENT
                        : chance(40) ? used
                        : chance(70) ? used - below(used + 1)
                                     : used + below(maxb + 1);
        p->actual_bytes = !bm_present(d->actual_bytes) || chance(20) ? BM_ABSENT
                          : chance(70)                               ? d->actual_bytes
                                       : d->actual_bytes + below(maxb + 1);
        p->busy = chance(3);
        p->unresponsive = chance(3);
        if (chance(30)) { /* what its inflates returned so far */
            p->yield.inflated_bytes = 1 + below(maxb);
            p->yield.returned_bytes = below(p->yield.inflated_bytes + 1);
            p->yield.last_inflated_bytes = p->yield.inflated_bytes;
            p->yield.last_returned_bytes = p->yield.returned_bytes;
            p->yield.nothing = chance(40);
            p->yield.nothing_rss_bytes = below(maxb + 1);
        }
    }
}

static void random_case(Case *c, uint64_t seed)
{
    memset(c, 0, sizeof(*c));
    c->seed = seed;
    rng_state = seed;
    random_policy(c);

    uint64_t total = size_between(32, 41);
    c->host.mem_total_bytes = total;
    /* half the hosts short of memory, the rest anywhere */
    c->host.mem_available_bytes = chance(50) ? below(total / 5 + 1) : below(total + 1);
    c->host.psi_present = chance(60);
    if (c->host.psi_present) {
        c->host.psi_some_avg10 = chance(60) ? (double)below(200) / 100 : (double)below(10001) / 100;
        c->host.psi_full_avg10 = c->host.psi_some_avg10 / 2;
    }

    c->has_prev = chance(70);
    c->prev = (Previous){.mode = (BmHostMode)below(3), .domains = c->prev_domains};
    c->n = 1 + below(MAX_DOMAINS);
    for (size_t i = 0; i < c->n; i++)
        random_domain(c, i);
}

static void case_clear(Case *c)
{
    bm_policy_free(c->policy);
    c->policy = NULL;
}

/* --- the model: what the header promises, computed independently */

static const PrevDomain *find_prev(const Case *c, const BmDomain *d)
{
    if (!c->has_prev)
        return NULL;
    for (size_t i = 0; i < c->prev.n_domains; i++)
        if (strcmp(c->prev_domains[i].uuid, d->uuid) == 0)
            return &c->prev_domains[i];
    return NULL;
}

static double model_rate(uint64_t cur, uint64_t prev, uint64_t dt)
{
    if (!bm_present(cur) || !bm_present(prev) || dt == 0 || cur < prev)
        return -1;
    return (double)(cur - prev) / (double)dt;
}

typedef struct {
    BmGuestRules rules;
    bool no_stats;       /* neither usable nor unused reported */
    bool stale;          /* no stats, or older than max_stats_age */
    bool under_pressure; /* a protect_* rate exceeded */
    bool short_of_memory; /* fresh stats, headroom below keep_free */
    bool growing;        /* fresh stats, its use grew by 24 MiB (2 MiB/s) since the previous
                          * reading (deflate-on-oom: less what an inflate in between took) */
    bool no_return;      /* VFIO, locked or hugepage memory in the XML */
    bool returns_nothing; /* no_return, or marked by its last inflate (RSS not grown since) */
    uint64_t floor;      /* max(floor, min_guarantee), at most the maximum */
    uint64_t step;       /* max_step in bytes */
    uint64_t take_limit; /* the largest inflate: max_step, or half of the free memory the host
                          * backs (QEMU RSS - used) where that is more; plus the guest's
                          * free memory (what the host does not back of it is gone through
                          * first) */
    bool must_skip;      /* not running, paused, no balloon, busy, unresponsive, excluded, ... */
} Model;

static void model_guest(const Case *c, const BmDomain *d, Model *m)
{
    memset(m, 0, sizeof(*m));
    bm_policy_rules_for(c->policy, d->name, &m->rules);
    const BmGuestRules *r = &m->rules;
    m->no_stats = !bm_present(d->usable_bytes) && !bm_present(d->unused_bytes);
    uint64_t age = BM_ABSENT;
    if (bm_present(d->last_update_s) && d->last_update_s > 0)
        age = NOW > d->last_update_s ? NOW - d->last_update_s : 0;
    m->stale =
        m->no_stats || (r->max_stats_age_s > 0 && (!bm_present(age) || age > r->max_stats_age_s));

    const PrevDomain *p = find_prev(c, d);
    if (p) {
        uint64_t dt = 0;
        if (bm_present(d->last_update_s) && bm_present(p->last_update_s) &&
            d->last_update_s > p->last_update_s)
            dt = d->last_update_s - p->last_update_s;
        else if (NOW > p->taken_s)
            dt = NOW - p->taken_s;
        double faults = model_rate(d->major_faults, p->major_faults, dt);
        double swap = model_rate(d->swap_in_bytes, p->swap_in_bytes, dt);
        m->under_pressure = (r->protect_major_faults > 0 && faults > r->protect_major_faults) ||
                            (r->protect_swap_in > 0 && swap > (double)r->protect_swap_in);
        uint64_t hr = bm_present(d->usable_bytes) ? d->usable_bytes
                      : bm_present(d->unused_bytes)
                          ? d->unused_bytes +
                                (bm_present(d->disk_caches_bytes) ? d->disk_caches_bytes : 0)
                          : BM_ABSENT;
        if (dt > 0 && bm_present(hr) && bm_present(d->available_bytes) &&
            bm_present(p->used_bytes)) {
            unsigned __int128 used = d->available_bytes > hr ? d->available_bytes - hr : 0;
            unsigned __int128 before = p->used_bytes;
            if (d->balloon_known && d->balloon.autodeflate == BM_TRI_ON &&
                bm_present(p->actual_bytes) && bm_present(d->actual_bytes) &&
                p->actual_bytes > d->actual_bytes)
                before += p->actual_bytes - d->actual_bytes;
            m->growing = !m->stale && used > before && used - before >= 24 * MiB &&
                         (double)(used - before) / (double)dt >= 2.0 * MiB;
        }
    }

    uint64_t headroom = bm_present(d->usable_bytes) ? d->usable_bytes
                        : bm_present(d->unused_bytes)
                            ? d->unused_bytes +
                                  (bm_present(d->disk_caches_bytes) ? d->disk_caches_bytes : 0)
                            : BM_ABSENT;
    uint64_t maxb = bm_present(d->max_bytes) ? d->max_bytes : 0;
    m->short_of_memory = !m->stale && bm_present(headroom) &&
                         headroom < bm_amount_bytes(r->keep_free, maxb);
    m->no_return = d->balloon_known &&
                   (d->balloon.vfio_hostdev || d->balloon.memory_locked || d->balloon.hugepages);
    /* a guest with free page reporting: its learned yield is not counted on (see set_yield) */
    bool reports = d->balloon_known && d->balloon.free_page_reporting == BM_TRI_ON;
    m->returns_nothing =
        m->no_return ||
        (!reports && p && p->yield.nothing &&
         (!bm_present(d->rss_bytes) ||
          d->rss_bytes < p->yield.nothing_rss_bytes + BM_YIELD_RETRY_GROWTH_BYTES));

    m->must_skip = !d->active || d->state == VIR_DOMAIN_PAUSED ||
                   d->state == VIR_DOMAIN_PMSUSPENDED ||
                   (d->balloon_known && !d->balloon.present) ||
                   (p && (p->busy || p->unresponsive)) || r->exclude ||
                   !bm_present(d->actual_bytes) || !bm_present(d->max_bytes) || d->max_bytes == 0 ||
                   (m->no_return && d->actual_bytes >= d->max_bytes);
    if (!m->must_skip) {
        uint64_t floor = bm_amount_bytes(r->floor, d->max_bytes);
        /* the absolute minimum: 128 MiB, at least 5% of the maximum (issue 31) */
        uint64_t minimum = (uint64_t)((unsigned __int128)d->max_bytes * 5 / 100);
        if (minimum < 128 * MiB)
            minimum = 128 * MiB;
        if (minimum > floor)
            floor = minimum;
        if (d->balloon_known && bm_present(d->balloon.min_guarantee_bytes) &&
            d->balloon.min_guarantee_bytes > floor)
            floor = d->balloon.min_guarantee_bytes;
        m->floor = floor < d->max_bytes ? floor : d->max_bytes;
        m->step = bm_amount_bytes(r->max_step, d->max_bytes);
        m->take_limit = m->step;
        uint64_t hr = bm_present(d->usable_bytes) ? d->usable_bytes
                      : bm_present(d->unused_bytes)
                          ? d->unused_bytes +
                                (bm_present(d->disk_caches_bytes) ? d->disk_caches_bytes : 0)
                          : BM_ABSENT;
        if (bm_present(d->rss_bytes) && bm_present(hr) && bm_present(d->available_bytes)) {
            uint64_t used = d->available_bytes > hr ? d->available_bytes - hr : 0;
            uint64_t backed = d->rss_bytes > used ? d->rss_bytes - used : 0;
            uint64_t half = (backed / 2 + MiB - 1) & ~(MiB - 1);
            if (half > m->take_limit)
                m->take_limit = half;
        }
        /* free memory the host does not back is gone through first (reported or untouched):
         * at most the guest's free memory more */
        if (bm_present(d->unused_bytes))
            m->take_limit += d->unused_bytes;
    }
}

static BmHostMode model_mode(const Case *c)
{
    const BmPolicy *p = c->policy;
    uint64_t total = c->host.mem_total_bytes, avail = c->host.mem_available_bytes;
    double psi = c->host.psi_present ? c->host.psi_some_avg10 : -1;
    if (avail < bm_amount_bytes(p->reclaim_below, total))
        return BM_HOST_RECLAIM;
    if (p->psi_reclaim_above >= 0 && psi >= 0 && psi > p->psi_reclaim_above)
        return BM_HOST_RECLAIM;
    if (c->has_prev && c->prev.mode == BM_HOST_RECLAIM &&
        avail < bm_amount_bytes(p->target_available, total))
        return BM_HOST_RECLAIM;
    return BM_HOST_HOLD; /* hold or release: the model only tells reclaim apart */
}

/* --- reporting */

static const char *szs(uint64_t b)
{
    static char bufs[16][32];
    static unsigned next;
    char *buf = bufs[next++ % 16];
    if (!bm_present(b))
        return "-";
    snprintf(buf, 32, "%" PRIu64, b);
    return buf;
}

static const char *amount(BmAmount a)
{
    static char bufs[16][32];
    static unsigned next;
    char *buf = bufs[next++ % 16];
    if (a.is_percent)
        snprintf(buf, 32, "%u.%u%%", a.permille / 10, a.permille % 10);
    else
        snprintf(buf, 32, "%" PRIu64 "b", a.bytes);
    return buf;
}

/* "(unset) " when rules g do not give the rule with bit, else "". */
static const char *unset(const BmGuestRules *g, uint64_t bit)
{
    return g->set & bit ? "" : "(unset) ";
}

static void dump_rules(const char *what, const BmGuestRules *g)
{
    diag("  %s: floor %s%s keep_free %s%s max_step %s%s deadband %s%s shares %s%u faults %s%g "
         "swap_in %s%" PRIu64 " max_stats_age %s%u exclude %s%d",
         what, unset(g, BM_RULE_BIT(floor)), amount(g->floor), unset(g, BM_RULE_BIT(keep_free)),
         amount(g->keep_free), unset(g, BM_RULE_BIT(max_step)), amount(g->max_step),
         unset(g, BM_RULE_BIT(deadband)), amount(g->deadband), unset(g, BM_RULE_BIT(shares)),
         g->shares, unset(g, BM_RULE_BIT(protect_major_faults)), g->protect_major_faults,
         unset(g, BM_RULE_BIT(protect_swap_in)), g->protect_swap_in,
         unset(g, BM_RULE_BIT(max_stats_age_s)), g->max_stats_age_s,
         unset(g, BM_RULE_BIT(exclude)), g->exclude);
}

static void dump_case(const Case *c, uint64_t seed, size_t index, const BmPlan *plan)
{
    const BmPolicy *p = c->policy;
    diag("case %zu of seed %" PRIu64 " (rerun: BM_PROPS_SEED=%" PRIu64 " BM_PROPS_CASE=%zu)", index,
         seed, seed, index);
    diag("  host: MemTotal %s MemAvailable %s PSI %s%.2f; previous mode %s",
         szs(c->host.mem_total_bytes), szs(c->host.mem_available_bytes),
         c->host.psi_present ? "" : "(absent) ", c->host.psi_some_avg10,
         c->has_prev ? bm_host_mode_name(c->prev.mode) : "(none)");
    diag("  policy: reclaim_below %s target_available %s release_above %s psi %g/%g",
         amount(p->reclaim_below), amount(p->target_available), amount(p->release_above),
         p->psi_reclaim_above, p->psi_release_below);
    dump_rules("[guest]", &p->guest);
    for (size_t i = 0; i < p->n_domains; i++) {
        char what[64];
        snprintf(what, sizeof(what), "[domain \"%s\"]", p->domains[i].glob);
        dump_rules(what, &p->domains[i]);
    }
    char why[BM_HOST_REASON_MAX];
    bm_host_reason_format(plan, why, sizeof(why));
    diag("  plan: mode %s need %s budget %s inflate %s deflate %s: %s",
         bm_host_mode_name(plan->mode), szs(plan->need_bytes), szs(plan->budget_bytes),
         szs(plan->planned_inflate_bytes), szs(plan->planned_deflate_bytes), why);
    for (size_t i = 0; i < c->n; i++) {
        const BmDomain *d = &c->domains[i];
        const BmDecision *x = &plan->decisions[i];
        const PrevDomain *pd = find_prev(c, d);
        diag("  %s: %s state %d max %s actual %s avail %s usable %s unused %s caches %s "
             "last_update %s faults %s swap_in %s balloon %s%s mg %s",
             d->name, d->active ? "active" : "inactive", d->state, szs(d->max_bytes),
             szs(d->actual_bytes), szs(d->available_bytes), szs(d->usable_bytes),
             szs(d->unused_bytes), szs(d->disk_caches_bytes), szs(d->last_update_s),
             szs(d->major_faults), szs(d->swap_in_bytes), d->balloon_known ? "known" : "unknown",
             d->balloon.present ? "" : " (none)", szs(d->balloon.min_guarantee_bytes));
        if (pd)
            diag("    previous: faults %s swap_in %s last_update %s taken %s%s%s",
                 szs(pd->major_faults), szs(pd->swap_in_bytes), szs(pd->last_update_s),
                 szs(pd->taken_s), pd->busy ? " busy" : "",
                 pd->unresponsive ? " unresponsive" : "");
        char reason[BM_REASON_MAX];
        bm_reason_format(plan, x, reason, sizeof(reason));
        diag("    -> %s target %s floor %s: %s", bm_action_name(x->action), szs(x->target_bytes),
             szs(x->floor_bytes), reason);
    }
}

/* --- properties */

enum {
    P_EVAL,
    P_RANGE,
    P_FLOOR,
    P_UNCHANGED,
    P_SKIP,
    P_NO_INFLATE_UNSAFE,
    P_NEED,
    P_STEP,
    P_MODE,
    P_DEFLATE,
    P_TOTALS,
    P_COUNT
};

static const char *const prop_names[P_COUNT] = {
    [P_EVAL] = "bm_policy_eval_rows succeeds on a complete host reading",
    [P_RANGE] = "inflate/deflate targets within floor_bytes..max_bytes",
    [P_FLOOR] = "floor_bytes = max(floor, min_guarantee, 128 MiB, 5%), capped at the maximum",
    [P_UNCHANGED] = "none and skip keep target == current",
    [P_SKIP] = "not running, paused, no balloon, busy, unresponsive, excluded, size unknown, "
               "returns nothing at its maximum: skipped",
    [P_NO_INFLATE_UNSAFE] = "no inflate of a guest with stale or missing stats, under pressure, "
                            "short of memory or whose inflates return nothing",
    [P_NEED] = "expected returns of a pass's inflates add up to at most need + guard; unmet is "
               "the rest",
    [P_STEP] = "each inflate at most the guest's max_step (or half its backed free memory)",
    [P_MODE] = "no inflate unless the host reclaims; reclaim exactly when the thresholds say",
    [P_DEFLATE] = "deflates: floors, guests short or under pressure (any mode) within max_step; "
                  "gives within budget; reclaim gives add up to guard_bytes",
    [P_TOTALS] = "planned_inflate/deflate_bytes are the sums of the decisions",
};

static unsigned failures[P_COUNT];
static char first_failure[P_COUNT][256];

static void fail(int prop, const Case *c, uint64_t seed, size_t index, const BmPlan *plan,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void fail(int prop, const Case *c, uint64_t seed, size_t index, const BmPlan *plan,
                 const char *fmt, ...)
{
    char why[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (failures[prop]++ == 0)
        snprintf(first_failure[prop], sizeof(first_failure[prop]), "seed %" PRIu64 " case %zu: %s",
                 seed, index, why);
    if (failures[prop] <= MAX_DUMPS) {
        diag("FAILED %s: %s", prop_names[prop], why);
        dump_case(c, seed, index, plan);
    }
}

static struct {
    uint64_t decisions, inflates, deflates, skips, reclaims;
} seen;

/* The ledger the case describes. */
static void case_ledger(const Case *c, BmLedger *l)
{
    bm_ledger_init(l);
    l->mode = c->prev.mode;
    for (size_t i = 0; i < c->prev.n_domains; i++) {
        const PrevDomain *p = &c->prev_domains[i];
        BmLedgerEntry *e = bm_ledger_entry(l, p->uuid, NULL);
        e->have_prev = true;
        e->prev = (BmPrevReading){.major_faults = p->major_faults, .swap_in_bytes = p->swap_in_bytes,
                                  .last_update_s = p->last_update_s, .taken_s = p->taken_s,
                                  .used_bytes = p->used_bytes, .actual_bytes = p->actual_bytes};
        e->in_flight = p->busy;
        /* marked as a stalled change marks it: a hold-off from now, its balloon where it was
         * left (the reading's join keeps the mark while both hold) */
        e->unresponsive = p->unresponsive;
        e->unresponsive_until_s = NOW + BM_UNRESPONSIVE_HOLDOFF_S;
        for (size_t k = 0; k < c->n; k++)
            if (strcmp(c->domains[k].uuid, p->uuid) == 0)
                e->unresponsive_actual = c->domains[k].actual_bytes;
        e->yield = p->yield;
    }
}

static void check_case(Case *c, uint64_t seed, size_t index)
{
    BmSnapshot snap = {.domains = c->domains, .n_domains = c->n};
    BmPlan plan;
    BmLedger ledger;
    case_ledger(c, &ledger);
    int r = route_eval(&c->host, &snap, c->has_prev ? &ledger : NULL, c->policy, NOW, 0, &plan);
    bm_ledger_clear(&ledger);
    if (r < 0 || plan.n_decisions != c->n) {
        BmPlan empty = {0};
        fail(P_EVAL, c, seed, index, &empty, "returned %d with %zu decisions", r, plan.n_decisions);
        bm_plan_clear(&plan);
        return;
    }

    BmHostMode want_mode = model_mode(c);
    bool reclaim = plan.mode == BM_HOST_RECLAIM;
    if (reclaim != (want_mode == BM_HOST_RECLAIM))
        fail(P_MODE, c, seed, index, &plan, "mode %s, thresholds say %s",
             bm_host_mode_name(plan.mode), bm_host_mode_name(want_mode));
    seen.reclaims += reclaim;

    uint64_t inflated = 0, deflated = 0, given = 0, guard = 0, expected = 0;
    for (size_t i = 0; i < c->n; i++) {
        const BmDomain *d = &c->domains[i];
        const BmDecision *x = &plan.decisions[i];
        Model m;
        model_guest(c, d, &m);
        seen.decisions++;
        bool moves = x->action == BM_ACT_INFLATE || x->action == BM_ACT_DEFLATE;

        if (x->current_bytes != d->actual_bytes || x->max_bytes != d->max_bytes ||
            strcmp(x->name, d->name) != 0)
            fail(P_UNCHANGED, c, seed, index, &plan, "%s: decision describes another domain",
                 d->name);
        if (!moves && x->target_bytes != x->current_bytes)
            fail(P_UNCHANGED, c, seed, index, &plan, "%s: %s with target %s != current %s", d->name,
                 bm_action_name(x->action), szs(x->target_bytes), szs(x->current_bytes));
        if (m.must_skip && x->action != BM_ACT_SKIP)
            fail(P_SKIP, c, seed, index, &plan, "%s: %s, not skipped", d->name,
                 bm_action_name(x->action));
        if (x->action == BM_ACT_SKIP) {
            seen.skips++;
            continue;
        }
        if (!m.must_skip && x->floor_bytes != m.floor)
            fail(P_FLOOR, c, seed, index, &plan, "%s: floor_bytes %s, want %s", d->name,
                 szs(x->floor_bytes), szs(m.floor));
        if (moves && (!bm_present(x->floor_bytes) || x->target_bytes < x->floor_bytes ||
                      x->target_bytes > x->max_bytes))
            fail(P_RANGE, c, seed, index, &plan, "%s: %s to %s outside %s..%s", d->name,
                 bm_action_name(x->action), szs(x->target_bytes), szs(x->floor_bytes),
                 szs(x->max_bytes));

        if (x->action == BM_ACT_INFLATE) {
            seen.inflates++;
            uint64_t take =
                x->current_bytes > x->target_bytes ? x->current_bytes - x->target_bytes : 0;
            if (x->target_bytes >= x->current_bytes)
                fail(P_RANGE, c, seed, index, &plan, "%s: inflate upwards", d->name);
            inflated += take;
            /* what the host should get back: the part beyond free memory the host does not
             * back (the plan's skip), times the yield; at most the inflate */
            uint64_t exp = x->expected_return_bytes;
            if (x->expected_return_bytes > take)
                fail(P_RANGE, c, seed, index, &plan, "%s: expected back %s of an inflate by %s",
                     d->name, szs(x->expected_return_bytes), szs(take));
            expected += exp;
            if (m.stale || m.no_stats || m.under_pressure || m.short_of_memory ||
                m.growing || m.returns_nothing)
                fail(P_NO_INFLATE_UNSAFE, c, seed, index, &plan, "%s: inflated by %s though %s",
                     d->name, szs(take),
                     m.no_stats         ? "without stats"
                     : m.stale          ? "stale"
                     : m.under_pressure ? "under pressure"
                     : m.short_of_memory ? "short of memory"
                     : m.growing        ? "its use grows"
                                        : "its inflates return nothing");
            if (take > m.take_limit)
                fail(P_STEP, c, seed, index, &plan, "%s: inflated by %s > %s (max_step %s)",
                     d->name, szs(take), szs(m.take_limit), szs(m.step));
            if (!reclaim)
                fail(P_MODE, c, seed, index, &plan, "%s: inflated in %s mode", d->name,
                     bm_host_mode_name(plan.mode));
        } else if (x->action == BM_ACT_DEFLATE) {
            seen.deflates++;
            if (x->target_bytes <= x->current_bytes) {
                fail(P_RANGE, c, seed, index, &plan, "%s: deflate downwards", d->name);
                continue;
            }
            uint64_t give = x->target_bytes - x->current_bytes;
            deflated += give;
            bool floor_raise = x->current_bytes < x->floor_bytes;
            if (floor_raise && x->target_bytes != x->floor_bytes)
                fail(P_DEFLATE, c, seed, index, &plan, "%s: below its floor, raised to %s, not %s",
                     d->name, szs(x->target_bytes), szs(x->floor_bytes));
            if (!floor_raise) {
                given += give;
                if (reclaim && !m.short_of_memory && !m.under_pressure && !m.growing)
                    fail(P_DEFLATE, c, seed, index, &plan,
                         "%s: given %s while reclaiming, not short, growing nor under pressure", d->name,
                         szs(give));
                if (reclaim)
                    guard += give;
                if (give > m.step)
                    fail(P_DEFLATE, c, seed, index, &plan, "%s: given %s > max_step %s", d->name,
                         szs(give), szs(m.step));
            }
        }
    }
    if (expected > plan.need_bytes + plan.guard_bytes)
        fail(P_NEED, c, seed, index, &plan, "inflates expected to return %s > need %s + guard %s",
             szs(expected), szs(plan.need_bytes), szs(plan.guard_bytes));
    if (reclaim && (guard != plan.guard_bytes ||
                    plan.unmet_bytes + plan.expected_return_bytes >
                        (plan.need_bytes + plan.guard_bytes > plan.expected_return_bytes
                             ? plan.need_bytes + plan.guard_bytes
                             : plan.expected_return_bytes)))
        fail(P_DEFLATE, c, seed, index, &plan, "guard %s (given %s), unmet %s, expected %s",
             szs(plan.guard_bytes), szs(guard), szs(plan.unmet_bytes),
             szs(plan.expected_return_bytes));
    if (!reclaim && given > plan.budget_bytes)
        fail(P_DEFLATE, c, seed, index, &plan, "gives %s > budget %s", szs(given),
             szs(plan.budget_bytes));
    if (inflated != plan.planned_inflate_bytes || deflated != plan.planned_deflate_bytes)
        fail(P_TOTALS, c, seed, index, &plan, "planned %s/%s, decisions add up to %s/%s",
             szs(plan.planned_inflate_bytes), szs(plan.planned_deflate_bytes), szs(inflated),
             szs(deflated));
    bm_plan_clear(&plan);
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    unsigned long long n = strtoull(v, &end, 0);
    if (*end) {
        fprintf(stderr, "%s: '%s' is not a number\n", name, v);
        exit(2);
    }
    return n;
}

/* Case i's own seed, so that one case can be rerun alone. */
static uint64_t case_seed(uint64_t seed, uint64_t i)
{
    rng_state = seed ^ (i * 0xd1b54a32d192ed03ull);
    return rnd();
}

int main(void)
{
    uint64_t seed = env_u64("BM_PROPS_SEED", DEFAULT_SEED);
    uint64_t cases = env_u64("BM_PROPS_CASES", DEFAULT_CASES);
    const char *only = getenv("BM_PROPS_CASE");
    uint64_t first = 0, last = cases;
    if (only && *only) {
        first = env_u64("BM_PROPS_CASE", 0);
        last = first + 1;
    }
    diag("seed %" PRIu64 " (BM_PROPS_SEED), cases %" PRIu64 "..%" PRIu64, seed, first, last - 1);

    uint64_t t0 = bm_now_mono_ns();
    static Case c;
    for (uint64_t i = first; i < last; i++) {
        random_case(&c, case_seed(seed, i));
        check_case(&c, seed, (size_t)i);
        case_clear(&c);
    }
    double secs = (double)(bm_now_mono_ns() - t0) / 1e9;

    diag("%" PRIu64 " cases in %.2f s: %" PRIu64 " decisions, %" PRIu64 " inflates, %" PRIu64
         " deflates, %" PRIu64 " skips; %" PRIu64 " reclaiming hosts",
         last - first, secs, seen.decisions, seen.inflates, seen.deflates, seen.skips,
         seen.reclaims);
    for (int p = 0; p < P_COUNT; p++) {
        ok(failures[p] == 0, "%s (%" PRIu64 " cases)", prop_names[p], last - first);
        if (failures[p])
            diag("  %u failures; first: %s", failures[p], first_failure[p]);
    }
    /* the generator reaches the interesting paths */
    ok(seen.inflates > 0 && seen.deflates > 0 && seen.skips > 0 && seen.reclaims > 0,
       "the random cases inflate, deflate, skip and reclaim");
    return tap_done();
}
