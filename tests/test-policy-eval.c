/* The policy decision, rule by rule, on synthetic hosts and guests; and a multi-pass simulation
 * that shows how many passes a large reclaim takes without breaking floors or headroom. */
#include <errno.h>
#include <inttypes.h>
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
/* the host's MemTotal in most tests */
#define MEM_TOTAL (64 * GiB)
/* The tests use the default policy unless they say otherwise: reclaim_below 10%, target 15%,
 * release 25%, floor 25%, keep_free 15%, max_step 25%, deadband 32M, shares 100. */

static BmDomain guest(const char *name, uint64_t max, uint64_t actual, uint64_t usable)
{
    BmDomain d = {0};
    d.name = (char *)name;
    snprintf(d.uuid, sizeof(d.uuid), "00000000-0000-0000-0000-%012zx", strlen(name) * 7919 + (size_t)name[0] * 31 + (size_t)name[strlen(name) - 1]);
    d.state = VIR_DOMAIN_RUNNING;
    d.active = true;
    d.max_bytes = max;
    d.actual_bytes = actual;
    d.available_bytes = actual;
    d.usable_bytes = usable;
    d.unused_bytes = usable / 2;
    d.disk_caches_bytes = usable / 4;
    d.rss_bytes = actual;
    d.swap_in_bytes = 0;
    d.swap_out_bytes = 0;
    d.major_faults = 1000;
    d.minor_faults = 0;
    d.last_update_s = NOW - 2;
    d.balloon_known = true;
    d.balloon.present = true;
    d.balloon.min_guarantee_bytes = BM_ABSENT;
    d.balloon.stats_period_s = 1;
    return d;
}

static BmHost host(uint64_t total, uint64_t avail)
{
    return (BmHost){.mem_total_bytes = total, .mem_available_bytes = avail};
}

static BmPlan eval(const BmHost *h, BmDomain *doms, size_t n, BmLedger *prev,
                   const BmPolicy *p)
{
    BmSnapshot s = {.domains = doms, .n_domains = n};
    BmPlan plan;
    int r = route_eval(h, &s, prev, p, NOW, 0, &plan);
    if (r < 0)
        ok(0, "bm_policy_eval_rows failed");
    return plan;
}

/* The words of decision x of plan p, and of its host's mode, as printed and logged (a ring of
 * buffers: a few in one message). */
static const char *words(const BmPlan *p, const BmDecision *x)
{
    static char ring[8][BM_HOST_REASON_MAX];
    static unsigned next;
    char *buf = ring[next++ % 8];
    if (x)
        bm_reason_format(p, x, buf, BM_HOST_REASON_MAX);
    else
        snprintf(buf, BM_HOST_REASON_MAX, "no decision");
    return buf;
}

static const char *host_words(const BmPlan *p)
{
    static char buf[BM_HOST_REASON_MAX];
    bm_host_reason_format(p, buf, sizeof(buf));
    return buf;
}

static const BmDecision *dec(const BmPlan *p, const char *name)
{
    for (size_t i = 0; i < p->n_decisions; i++)
        if (strcmp(p->decisions[i].name, name) == 0)
            return &p->decisions[i];
    return NULL;
}

/* decision x was made by rule code */
static void is_code(const BmDecision *x, BmReasonCode code, const char *what)
{
    ok(x && x->cause.code == code, "%s (code %d, want %d)", what, x ? (int)x->cause.code : -1,
       (int)code);
}

/* the default policy with one [domain "GLOB"] section that sets nothing; caller frees */
static BmPolicy *policy_with_domain(const char *glob)
{
    BmPolicy *p = bm_policy_new_default();
    p->domains = bm_malloc0(sizeof(BmGuestRules));
    p->n_domains = 1;
    p->domains[0].glob = bm_strdup(glob);
    return p;
}

/* the safety invariants every plan must keep */
static void invariants(const BmPlan *p, const char *what)
{
    uint64_t inflated = 0;
    bool fine = true;
    for (size_t i = 0; i < p->n_decisions; i++) {
        const BmDecision *d = &p->decisions[i];
        if (d->action == BM_ACT_INFLATE || d->action == BM_ACT_DEFLATE) {
            fine &= d->target_bytes >= d->floor_bytes && d->target_bytes <= d->max_bytes;
            if (d->action == BM_ACT_INFLATE) {
                fine &= !d->pressure.stale && !d->pressure.under_pressure;
                inflated += d->current_bytes - d->target_bytes;
            }
        }
    }
    ok(fine, "%s: targets within floor..maximum, no inflate of stale or pressured guests", what);
    ok(inflated <= p->need_bytes, "%s: inflates (%" PRIu64 " MiB) <= host need (%" PRIu64 " MiB)",
       what, inflated / MiB, p->need_bytes / MiB);
}

/* The lowest manual target: the largest of 128 MiB, 5% of the maximum, <min_guarantee> and the
 * policy's floor; never above the maximum. */
static void test_manual_floor(void)
{
    const char *why = NULL;
    is_u64(bm_manual_floor(8 * GiB, BM_ABSENT, BM_ABSENT, &why), 8 * GiB / 20, "8 GiB: 5%%");
    ok(why && strstr(why, "absolute minimum"), "  named: %s", why);
    is_u64(bm_manual_floor(1 * GiB, BM_ABSENT, BM_ABSENT, &why), 128 * MiB, "1 GiB: 128 MiB");
    is_u64(bm_manual_floor(8 * GiB, 3 * GiB, BM_ABSENT, &why), 3 * GiB, "min_guarantee 3 GiB");
    is_str(why, "<memtune><min_guarantee>", "  named");
    is_u64(bm_manual_floor(8 * GiB, 1 * GiB, 2 * GiB, &why), 2 * GiB, "policy floor 2 GiB");
    is_str(why, "the policy's floor", "  named");
    is_u64(bm_manual_floor(64 * MiB, BM_ABSENT, BM_ABSENT, NULL), 64 * MiB, "never above the maximum");
    is_u64(bm_manual_floor(UINT64_MAX, BM_ABSENT, BM_ABSENT, NULL), UINT64_MAX / 20, "no overflow");
}

/* comfortable host: a ballooned idle guest gets its memory back at the release pace */
static void test_comfortable_host_gives_back(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *pol = bm_policy_new_default();
    BmHost h = host(MEM_TOTAL, 40 * GiB);
    BmDomain d[] = {guest("idle", 8 * GiB, 4 * GiB, 3 * GiB)};
    BmPlan p = eval(&h, d, 1, NULL, pol);
    ok(p.mode == BM_HOST_RELEASE, "40 of 64 GiB available: release mode");
    ok(dec(&p, "idle")->action == BM_ACT_DEFLATE && dec(&p, "idle")->target_bytes == 6 * GiB,
       "idle guest at half its maximum gets max_step (2 GiB) back");
    is_str(words(&p, dec(&p, "idle")), "host comfortable: give back 2 GiB toward its maximum 8 GiB (max_step)", "reason");
    bm_plan_clear(&p);
}

/* host under pressure: reclaim from idle guests, split by idle, capped */
static void test_pressure_reclaims_from_idle(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *pol = bm_policy_new_default();
    BmHost h = host(MEM_TOTAL, 4 * GiB); /* < 10% = 6.4 GiB; target 15% = 9.6 GiB: needs 5.6 GiB */
    BmDomain d[] = {guest("a", 16 * GiB, 16 * GiB, 12 * GiB), guest("b", 16 * GiB, 16 * GiB, 6 * GiB),
                    guest("small", 2 * GiB, 2 * GiB, 1 * GiB)};
    BmPlan p = eval(&h, d, 3, NULL, pol);
    ok(p.mode == BM_HOST_RECLAIM, "4 of 64 GiB available: reclaim");
    is_u64(p.need_bytes, MEM_TOTAL * 150 / 1000 - 4 * GiB, "need = target_available - MemAvailable");
    const BmDecision *a = dec(&p, "a"), *b = dec(&p, "b");
    ok(a->action == BM_ACT_INFLATE && b->action == BM_ACT_INFLATE, "both big guests inflate");
    ok(a->current_bytes - a->target_bytes > b->current_bytes - b->target_bytes,
       "the guest with more idle memory gives more");
    ok(a->current_bytes - a->target_bytes <= 4 * GiB, "capped by max_step (25%% of 16 GiB)");
    invariants(&p, "pressure");
    bm_plan_clear(&p);
}

/* shares: same idle memory, double shares -> half as much taken */
static void test_shares_weigh_the_reclaim(void)
{
    BmHost h = host(MEM_TOTAL, 5 * GiB);
    BmDomain d[] = {guest("s100", 16 * GiB, 16 * GiB, 12 * GiB), guest("s200", 16 * GiB, 16 * GiB, 12 * GiB)};
    _cleanup_(bm_policy_freep) BmPolicy *p2 = policy_with_domain("s200");
    BM_RULE_SET(&p2->domains[0], shares, 200);
    BmPlan p = eval(&h, d, 2, NULL, p2);
    uint64_t t100 = dec(&p, "s100")->current_bytes - dec(&p, "s100")->target_bytes;
    uint64_t t200 = dec(&p, "s200")->current_bytes - dec(&p, "s200")->target_bytes;
    ok(t200 > 0 && t100 > 0, "both give");
    ok(t100 >= 2 * t200 - 2 * MiB && t100 <= 2 * t200 + 2 * MiB,
       "shares 200 gives half of shares 100 (%" PRIu64 " vs %" PRIu64 " MiB)", t200 / MiB, t100 / MiB);
    invariants(&p, "shares");
    bm_plan_clear(&p);
}

/* stale or missing stats never inflate, even under pressure */
static void test_stale_or_missing_stats_never_inflate(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *pol = bm_policy_new_default();
    BmHost h = host(MEM_TOTAL, 2 * GiB);
    BmDomain d[] = {guest("stale", 16 * GiB, 16 * GiB, 12 * GiB), guest("nostats", 16 * GiB, 16 * GiB, 12 * GiB),
                    guest("ok", 16 * GiB, 16 * GiB, 12 * GiB)};
    d[0].last_update_s = NOW - 600;
    d[1].usable_bytes = d[1].unused_bytes = d[1].disk_caches_bytes = BM_ABSENT;
    d[1].last_update_s = BM_ABSENT;
    BmPlan p = eval(&h, d, 3, NULL, pol);
    ok(dec(&p, "stale")->action == BM_ACT_SKIP && dec(&p, "stale")->pressure.stale, "stale: skipped");
    is_str(words(&p, dec(&p, "stale")), "guest stats stale (600 s old > max_stats_age 30 s): never inflated", "stale reason");
    ok(dec(&p, "nostats")->action == BM_ACT_SKIP, "no stats: skipped");
    is_str(words(&p, dec(&p, "nostats")), "no guest memory stats: never inflated", "no-stats reason");
    ok(dec(&p, "ok")->action == BM_ACT_INFLATE, "the fresh guest is inflated");
    invariants(&p, "stale");
    bm_plan_clear(&p);

    /* max_stats_age 0 disables the age check (not the missing-stats check) */
    _cleanup_(bm_policy_freep) BmPolicy *p3 = bm_policy_new_default();
    p3->guest.max_stats_age_s = 0;
    p = eval(&h, d, 3, NULL, p3);
    ok(dec(&p, "stale")->action == BM_ACT_INFLATE, "max_stats_age 0: old stats accepted");
    ok(dec(&p, "nostats")->action == BM_ACT_SKIP, "max_stats_age 0: missing stats still skipped");
    bm_plan_clear(&p);
}

/* a guest under pressure (major faults from the previous reading) is deflated, never inflated */
static void test_pressured_guest_is_deflated(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *pol = bm_policy_new_default();
    BmDomain d[] = {guest("busy", 8 * GiB, 4 * GiB, 3 * GiB)};
    BmLedger prev;
    bm_ledger_init(&prev);
    BmLedgerEntry *pd = bm_ledger_entry(&prev, d[0].uuid, "busy");
    pd->have_prev = true;
    pd->prev = (BmPrevReading){.major_faults = 1000, .swap_in_bytes = 0, .last_update_s = NOW - 12,
                               .taken_s = NOW - 10, .used_bytes = BM_ABSENT,
                               .actual_bytes = BM_ABSENT};
    d[0].major_faults = 1000 + 10 * 500; /* 500/s over 10 s */
    BmHost h = host(MEM_TOTAL, 40 * GiB);
    BmPlan p = eval(&h, d, 1, &prev, pol);
    const BmDecision *x = dec(&p, "busy");
    ok(x->pressure.under_pressure && x->pressure.major_fault_rate > 499 && x->pressure.major_fault_rate < 501,
       "500 major faults/s: under pressure");
    ok(x->action == BM_ACT_DEFLATE && x->target_bytes == 6 * GiB, "deflated by max_step (2 GiB)");
    ok(x->short_of_memory, "under pressure counts as short of memory (the exported flag)");
    bm_plan_clear(&p);

    BmHost hp = host(MEM_TOTAL, 2 * GiB);
    p = eval(&hp, d, 1, &prev, pol);
    ok(dec(&p, "busy")->action == BM_ACT_DEFLATE && dec(&p, "busy")->target_bytes == 6 * GiB,
       "host reclaiming too: still deflated by max_step, never inflated");
    invariants(&p, "pressured guest");
    bm_plan_clear(&p);

    /* swap-in above 1 MiB/s */
    d[0].major_faults = 1000;
    d[0].swap_in_bytes = 50 * MiB;
    p = eval(&h, d, 1, &prev, pol);
    ok(dec(&p, "busy")->pressure.under_pressure, "5 MiB/s swap-in: under pressure");
    bm_plan_clear(&p);

    /* counters that went backwards (guest rebooted): no rate */
    d[0].swap_in_bytes = 0;
    d[0].major_faults = 10;
    p = eval(&h, d, 1, &prev, pol);
    ok(dec(&p, "busy")->pressure.major_fault_rate < 0 && !dec(&p, "busy")->pressure.under_pressure,
       "counter reset: rate unknown, not pressure");
    ok(!dec(&p, "busy")->short_of_memory, "counter reset, 3 GiB usable: not short of memory");
    bm_plan_clear(&p);
    bm_ledger_clear(&prev);
}

/* guest short of memory gets some back when the host can spare it */
static void test_short_guest_gets_memory_back(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *pol = bm_policy_new_default();
    BmHost h = host(MEM_TOTAL, 40 * GiB);
    BmDomain d[] = {guest("short", 8 * GiB, 2 * GiB, 512 * MiB)};
    BmPlan p = eval(&h, d, 1, NULL, pol);
    const BmDecision *x = dec(&p, "short");
    ok(x->action == BM_ACT_DEFLATE, "usable 512 MiB < keep_free 1.2 GiB: deflate");
    /* keep_free 15% of 8 GiB = 1228.8 MiB, need 716.8 + deadband 32 = 748.8 -> 748 MiB */
    is_u64(x->target_bytes, 2 * GiB + 748 * MiB, "by the shortfall plus deadband, whole MiB");
    bm_plan_clear(&p);

    /* hold, 100 MiB above reclaim_below (10%): only 100 MiB budget */
    BmHost tight = host(MEM_TOTAL, MEM_TOTAL * 100 / 1000 + 100 * MiB);
    p = eval(&tight, d, 1, NULL, pol);
    ok(p.mode == BM_HOST_HOLD, "between thresholds: hold");
    is_u64(dec(&p, "short")->target_bytes, 2 * GiB + 100 * MiB, "limited by the host budget");
    is_u64(p.budget_bytes, 100 * MiB, "  the budget: MemAvailable above reclaim_below");
    bm_plan_clear(&p);

    /* below target_available (15%) but 1 GiB above reclaim_below: all of it (the budget was
     * the memory above target_available, none here: the guest waited, short, until the host
     * fell below reclaim_below) */
    BmHost band = host(MEM_TOTAL, MEM_TOTAL * 150 / 1000 - 100 * MiB);
    p = eval(&band, d, 1, NULL, pol);
    ok(p.mode == BM_HOST_HOLD, "below target_available, above reclaim_below: hold");
    is_u64(dec(&p, "short")->target_bytes, 2 * GiB + 748 * MiB,
           "  the short guest gets what it lacks from the memory above reclaim_below");
    bm_plan_clear(&p);
}

/* deadband: tiny changes are not made */
static void test_deadband_and_hysteresis(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *pol = bm_policy_new_default();
    BmHost h = host(MEM_TOTAL, MEM_TOTAL * 150 / 1000 - 20 * MiB); /* reclaim only if already reclaiming */
    BmDomain d[] = {guest("g", 16 * GiB, 16 * GiB, 12 * GiB)};
    BmLedger prev;
    bm_ledger_init(&prev);
    prev.mode = BM_HOST_RECLAIM;
    BmPlan p = eval(&h, d, 1, &prev, pol);
    ok(p.mode == BM_HOST_RECLAIM && p.need_bytes == 20 * MiB, "hysteresis: still reclaiming below target");
    ok(dec(&p, "g")->action == BM_ACT_NONE, "20 MiB < deadband 32 MiB: no change");
    bm_plan_clear(&p);
    p = eval(&h, d, 1, NULL, pol);
    ok(p.mode == BM_HOST_HOLD, "same reading without previous reclaim: hold");
    bm_plan_clear(&p);
    bm_ledger_clear(&prev);
}

/* floors: below floor is raised even without stats; min_guarantee raises the floor */
/* Issue 31: the engine keeps the absolute minimum (the larger of 128 MiB and 5% of the
 * maximum) whatever a valid policy says: floor = 0%, keep_free = 0%, deadband = 0 (or the
 * default deadband) aimed an idle guest at 0 bytes (libvirt refuses; the run exited 1). */
static void test_absolute_minimum(void)
{
    static const char *const texts[] = {
        "[guest]\nfloor = 0%\nkeep_free = 0%\ndeadband = 0\nmax_step = 100%\n",
        "[guest]\nfloor = 0%\nkeep_free = 0%\nmax_step = 100%\n",
        "[guest]\nfloor = 0\nkeep_free = 0\ndeadband = 0\nmax_step = 100%\n",
    };
    for (size_t i = 0; i < BM_ARRAY_SIZE(texts); i++) {
        _cleanup_(bm_policy_freep) BmPolicy *pol = NULL;
        _cleanup_free_ char *errors = NULL;
        ok(bm_policy_parse(texts[i], "min.policy", &pol, &errors) == 0, "policy %zu parses", i);
        if (!pol)
            continue;
        BmHost h = host(MEM_TOTAL, 1 * GiB);
        /* all free: the guests' whole memory is idle */
        BmDomain d[] = {guest("tiny", 1 * GiB, 1 * GiB, 1 * GiB), guest("big", 16 * GiB, 16 * GiB, 16 * GiB),
                        guest("under", 1 * GiB, 64 * MiB, 64 * MiB)};
        BmPlan p = eval(&h, d, 3, NULL, pol);
        const BmDecision *tiny = dec(&p, "tiny"), *big = dec(&p, "big"), *under = dec(&p, "under");
        ok(tiny->target_bytes >= 128 * MiB && tiny->floor_bytes == 128 * MiB,
           "policy %zu: a 1 GiB guest is never aimed below 128 MiB (target %" PRIu64 " MiB)", i,
           tiny->target_bytes / MiB);
        ok(big->target_bytes >= 16 * GiB / 20 && big->floor_bytes == 16 * GiB / 20,
           "  a 16 GiB guest never below 5%% (target %" PRIu64 " MiB)", big->target_bytes / MiB);
        ok(under->action != BM_ACT_INFLATE, "  one already below the minimum is not inflated");
        bm_plan_clear(&p);
        /* pass after pass, every inflate applied and its memory free in the guest: the lowest
         * target stays at the minimum */
        BmDomain g = guest("alone", 1 * GiB, 1 * GiB, 1 * GiB);
        uint64_t lowest = g.actual_bytes;
        for (int pass = 0; pass < 200; pass++) {
            BmPlan q = eval(&h, &g, 1, NULL, pol);
            const BmDecision *x = &q.decisions[0];
            bool inflate = x->action == BM_ACT_INFLATE;
            if (inflate) {
                uint64_t take = x->current_bytes - x->target_bytes;
                lowest = x->target_bytes < lowest ? x->target_bytes : lowest;
                g.actual_bytes -= take;
                g.available_bytes -= take;
                g.usable_bytes -= take;
                g.unused_bytes = g.usable_bytes / 2;
                g.disk_caches_bytes = g.usable_bytes / 4;
                g.rss_bytes = g.actual_bytes;
            }
            bm_plan_clear(&q);
            if (!inflate)
                break;
        }
        ok(lowest >= 128 * MiB, "  pass after pass, the lowest target is %" PRIu64 " MiB (>= 128 MiB)",
           lowest / MiB);
    }
}

static void test_floors_and_min_guarantee(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *pol = bm_policy_new_default();
    BmHost h = host(MEM_TOTAL, 2 * GiB);
    BmDomain d[] = {guest("low", 8 * GiB, 1 * GiB, BM_ABSENT), guest("mg", 16 * GiB, 16 * GiB, 15 * GiB)};
    d[0].usable_bytes = d[0].unused_bytes = d[0].disk_caches_bytes = BM_ABSENT;
    d[1].balloon.min_guarantee_bytes = 15 * GiB;
    BmPlan p = eval(&h, d, 2, NULL, pol);
    ok(dec(&p, "low")->action == BM_ACT_DEFLATE && dec(&p, "low")->target_bytes == 2 * GiB,
       "1 GiB < floor 2 GiB (25%%): raised to the floor");
    ok(dec(&p, "mg")->floor_bytes == 15 * GiB, "min_guarantee 15 GiB raises the floor");
    ok(dec(&p, "mg")->target_bytes >= 15 * GiB, "never below min_guarantee");
    invariants(&p, "floors");
    bm_plan_clear(&p);
}

/* skips: not running, no balloon, excluded */
static void test_skips(void)
{
    BmHost h = host(MEM_TOTAL, 2 * GiB);
    BmDomain d[] = {guest("off", 8 * GiB, 8 * GiB, 4 * GiB), guest("nob", 8 * GiB, 8 * GiB, 4 * GiB),
                    guest("ex-1", 8 * GiB, 8 * GiB, 4 * GiB)};
    d[0].active = false;
    d[0].state = VIR_DOMAIN_SHUTOFF;
    d[1].balloon.present = false;
    _cleanup_(bm_policy_freep) BmPolicy *p2 = policy_with_domain("ex-*");
    BM_RULE_SET(&p2->domains[0], exclude, true);
    BmPlan p = eval(&h, d, 3, NULL, p2);
    is_code(dec(&p, "off"), BM_REASON_NOT_RUNNING, "shut off: skipped");
    is_code(dec(&p, "nob"), BM_REASON_NO_BALLOON, "no balloon: skipped");
    is_code(dec(&p, "ex-1"), BM_REASON_EXCLUDED, "excluded by glob: skipped");
    is_str(words(&p, dec(&p, "ex-1")), "excluded by policy", "  in words");
    ok(p.planned_inflate_bytes == 0, "nothing inflated");
    bm_plan_clear(&p);
}

/* PSI pressure alone */
static void test_psi_pressure_alone(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *pol = bm_policy_new_default();
    BmHost h = host(MEM_TOTAL, 30 * GiB);
    h.psi_present = true;
    h.psi_some_avg10 = 25;
    BmDomain d[] = {guest("g", 16 * GiB, 16 * GiB, 12 * GiB)};
    BmPlan p = eval(&h, d, 1, NULL, pol);
    ok(p.mode == BM_HOST_RECLAIM, "PSI some avg10 25%% > 10%%: reclaim");
    is_u64(p.need_bytes, MEM_TOTAL / 1000 * 20, "PSI alone asks for 2%% of MemTotal");
    ok(dec(&p, "g")->action == BM_ACT_INFLATE, "and takes it from the idle guest");
    bm_plan_clear(&p);
    h.psi_some_avg10 = 5;
    p = eval(&h, d, 1, NULL, pol);
    ok(p.mode == BM_HOST_RELEASE || p.mode == BM_HOST_HOLD, "PSI 5%%: no reclaim");
    ok(p.mode == BM_HOST_HOLD, "PSI 5%% >= psi_release_below 1%%: not comfortable, hold");
    bm_plan_clear(&p);
}

/* bad host reading */
static void test_bad_host_reading(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *pol = bm_policy_new_default();
    BmHost h = {.mem_total_bytes = BM_ABSENT, .mem_available_bytes = BM_ABSENT};
    BmSnapshot s = {0};
    BmPlan p;
    ok(route_eval(&h, &s, NULL, pol, NOW, 0, &p) == -EINVAL, "no MemTotal: refused");
}

/* multi-pass simulation: 8 guests of 16 GiB, host at 3 of 128 GiB */
static void test_multi_pass_reclaim_converges(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *pol = bm_policy_new_default();
    const uint64_t T2 = 128 * GiB;
    BmDomain d[8];
    char names[8][8];
    for (int i = 0; i < 8; i++) {
        snprintf(names[i], sizeof(names[i]), "vm%d", i);
        d[i] = guest(names[i], 16 * GiB, 16 * GiB, (uint64_t)(4 + i) * GiB);
    }
    uint64_t avail = 3 * GiB;
    BmLedger prev;
    bm_ledger_init(&prev);
    int passes = 0;
    bool safe = true;
    uint64_t total_taken = 0;
    for (; passes < 50; passes++) {
        BmHost h = host(T2, avail);
        BmPlan p = eval(&h, d, 8, &prev, pol);
        prev.mode = p.mode;
        if (p.mode != BM_HOST_RECLAIM || p.planned_inflate_bytes == 0) {
            bm_plan_clear(&p);
            break;
        }
        for (int i = 0; i < 8; i++) {
            const BmDecision *x = &p.decisions[i];
            if (x->action != BM_ACT_INFLATE)
                continue;
            uint64_t take = x->current_bytes - x->target_bytes;
            d[i].actual_bytes -= take;
            d[i].available_bytes -= take;
            d[i].usable_bytes -= take;
            avail += take;
            total_taken += take;
            uint64_t keep_free = 16 * GiB * 150 / 1000;
            safe &= d[i].usable_bytes >= keep_free && d[i].actual_bytes >= 4 * GiB;
        }
        bm_plan_clear(&p);
    }
    diag("reclaim of %" PRIu64 " MiB converged in %d passes", total_taken / MiB, passes);
    ok(avail >= T2 * 150 / 1000 - 32 * MiB, "host reached target_available (%" PRIu64 " MiB)", avail / MiB);
    ok(passes <= 3, "a %" PRIu64 " GiB reclaim takes %d passes (MOM's 5%% steps: ~14)", total_taken / GiB, passes);
    ok(safe, "no guest went below keep_free or its floor on the way");
    bm_ledger_clear(&prev);
}

static const BmPolicy *P; /* the built-in defaults, for the named tests below */
static const uint64_t HOST_T = 64 * GiB;

/* A ledger after a reclaim pass: previous readings of d[0..n) whose inflates returned y.
 * Clear with bm_ledger_clear(). */
static void ledger_with_yield(BmLedger *l, const BmDomain *d, size_t n, BmYield y)
{
    bm_ledger_init(l);
    l->mode = BM_HOST_RECLAIM;
    for (size_t i = 0; i < n; i++) {
        BmLedgerEntry *e = bm_ledger_entry(l, d[i].uuid, d[i].name);
        e->have_prev = true;
        e->prev = (BmPrevReading){.major_faults = d[i].major_faults, .swap_in_bytes = d[i].swap_in_bytes,
                                  .last_update_s = d[i].last_update_s - 1, .taken_s = NOW - 1,
                                  .used_bytes = bm_domain_used_bytes(&d[i]),
                                  .actual_bytes = d[i].actual_bytes};
        e->yield = y;
    }
}

/* A guest that touched only used_bytes: its QEMU RSS is that plus QEMU's own 128 MiB. */
static void untouched(BmDomain *d, uint64_t used)
{
    d->available_bytes = d->actual_bytes;
    d->usable_bytes = d->actual_bytes - used;
    d->rss_bytes = used + 128 * MiB;
}

/* What an inflate gives back is learned from the QEMU RSS: a drop below a quarter of the
 * balloon growth marks "returns nothing" (the numbers are a real 1 GiB TCG guest's). */
static void test_yield_learn(void)
{
    BmYield y = {0};
    ok(bm_yield_permille(&y) == 1000 && !bm_yield_returns_nothing(&y, 200 * MiB),
       "nothing learned: full yield, no mark");
    ok(!bm_yield_learn(&y, 1 * GiB, 1 * GiB + 300 * MiB, 900 * MiB, 800 * MiB, false), "deflates teach nothing");
    ok(!bm_yield_learn(&y, 1 * GiB, 1 * GiB - 8 * MiB, 900 * MiB, 900 * MiB, false), "an 8 MiB inflate teaches nothing");
    ok(!bm_yield_learn(&y, 1 * GiB, 724 * MiB, BM_ABSENT, 800 * MiB, false), "unknown RSS teaches nothing");
    ok(bm_yield_learn(&y, 1 * GiB, 724 * MiB, 235368 * 1024ull, 212868 * 1024ull, false),
       "never-touched guest: 300 MiB inflated, RSS 21 MiB lower");
    ok(y.nothing && bm_yield_returns_nothing(&y, 212868 * 1024ull), "marked: returns nothing");
    is_u64(bm_yield_permille(&y), 73, "yield 7.3%%");
    ok(bm_yield_returns_nothing(&y, 212868 * 1024ull + 100 * MiB), "the mark holds while the RSS grows < 128 MiB");
    ok(!bm_yield_returns_nothing(&y, 212868 * 1024ull + 128 * MiB), "lifted once the RSS grew 128 MiB");
    ok(bm_yield_returns_nothing(&y, BM_ABSENT), "holds when the RSS is unknown");

    BmYield t = {0};
    ok(bm_yield_learn(&t, 1 * GiB, 724 * MiB, 944316 * 1024ull, 639196 * 1024ull, false),
       "touched-then-freed guest: 300 MiB inflated, RSS 298 MiB lower");
    ok(!t.nothing, "not marked");
    is_u64(bm_yield_permille(&t), 993, "yield 99.3%%");
    ok(bm_yield_learn(&y, 724 * MiB, 500 * MiB, 900 * MiB, 700 * MiB, false) && !y.nothing,
       "a later inflate that returns memory lifts the mark");
    ok(!bm_present(bm_yield_backed_free(100 * MiB, 100 * MiB)),
       "RSS not above used (host swap, KSM, test driver): backed memory unknown");
    is_u64(bm_yield_backed_free(300 * MiB, 100 * MiB), 200 * MiB, "backed free = RSS - used");
}

/* A guest whose free memory was never touched gives the host nothing: it is first inflated by
 * a probe of one deadband, not by max_step, and not inflated again when the probe returned
 * nothing; the need it cannot meet is reported as unmet. */
static void test_never_touched_guest_is_probed_then_left(void)
{
    BmHost h = host(HOST_T, 4 * GiB); /* needs 5.6 GiB */
    BmDomain d[] = {guest("fresh", 8 * GiB, 8 * GiB, 0)};
    untouched(&d[0], 512 * MiB);
    BmPlan p = eval(&h, d, 1, NULL, P);
    const BmDecision *x = dec(&p, "fresh");
    ok(x->action == BM_ACT_INFLATE && x->current_bytes - x->target_bytes == 32 * MiB,
       "first inflate of a guest the host backs little of: a 32 MiB probe");
    is_str(words(&p, x), "host needs 5.6 GiB; take 32 MiB of 6 GiB idle (capped by a first, probing inflate): 32 MiB page cache", "reason");
    is_u64(p.unmet_bytes, p.need_bytes - 128 * MiB, "unmet: all but the 128 MiB the host may back");
    bm_plan_clear(&p);

    BmYield y = {0};
    bm_yield_learn(&y, 8 * GiB, 8 * GiB - 32 * MiB, d[0].rss_bytes, d[0].rss_bytes - 1 * MiB, false);
    BmLedger prev;
    ledger_with_yield(&prev, d, 1, y);
    d[0].actual_bytes -= 32 * MiB;
    d[0].available_bytes -= 32 * MiB;
    d[0].usable_bytes -= 32 * MiB;
    d[0].rss_bytes -= 1 * MiB;
    p = eval(&h, d, 1, &prev, P);
    x = dec(&p, "fresh");
    ok(x->action == BM_ACT_NONE && x->returns_nothing, "the probe returned 1 MiB: not inflated again");
    is_str(words(&p, x), "not inflated: its last inflate of 32 MiB gave the host back 1 MiB (QEMU RSS); again once its RSS grows by 128 MiB", "reason");
    is_u64(p.unmet_bytes, p.need_bytes, "all of the need is unmet");
    ok(strstr(host_words(&p), "5.6 GiB of host memory unmet: the guests' idle memory is held back (not backed by the host 6 GiB") != NULL,
       "the host's reason says so: %s", host_words(&p));
    bm_plan_clear(&p);
    bm_ledger_clear(&prev);
}

/* Reclaim counts only on free guest memory the host backs: QEMU RSS minus what the guest uses. */
static void test_reclaim_capped_by_backed_memory(void)
{
    BmHost h = host(HOST_T, 4 * GiB);
    BmDomain d[] = {guest("half", 8 * GiB, 8 * GiB, 0)};
    d[0].usable_bytes = 6 * GiB;          /* uses 2 GiB */
    d[0].rss_bytes = 2 * GiB + 900 * MiB; /* backs 900 MiB of its 6 GiB free */
    BmYield y = {.inflated_bytes = 512 * MiB, .returned_bytes = 512 * MiB,
                 .last_inflated_bytes = 512 * MiB, .last_returned_bytes = 512 * MiB};
    BmLedger prev;
    ledger_with_yield(&prev, d, 1, y);
    BmPlan p = eval(&h, d, 1, &prev, P);
    const BmDecision *x = dec(&p, "half");
    ok(x->action == BM_ACT_INFLATE && x->current_bytes - x->target_bytes == 900 * MiB,
       "takes the 900 MiB the host backs, not max_step 2 GiB");
    is_u64(x->backed_free_bytes, 900 * MiB, "backed_free_bytes");
    ok(x->cause.code == BM_REASON_TAKE && x->cause.cap == BM_CAP_BACKED, "capped by backed memory: %s",
       words(&p, x));
    bm_plan_clear(&p);
    bm_ledger_clear(&prev);
}

/* A guest whose inflates returned half counts for half: more is asked of it, and the expected
 * returns, not the balloon growth, add up to the need. */
static void test_partial_yield_counts_half(void)
{
    BmHost h = host(HOST_T, 9 * GiB); /* needs 0.6 GiB */
    BmDomain d[] = {guest("halfback", 16 * GiB, 16 * GiB, 12 * GiB)};
    BmYield y = {.inflated_bytes = 1 * GiB, .returned_bytes = 512 * MiB,
                 .last_inflated_bytes = 1 * GiB, .last_returned_bytes = 512 * MiB};
    BmLedger prev;
    ledger_with_yield(&prev, d, 1, y);
    BmPlan p = eval(&h, d, 1, &prev, P);
    const BmDecision *x = dec(&p, "halfback");
    uint64_t take = x->current_bytes - x->target_bytes;
    is_u64(x->yield_permille, 500, "yield 50%%");
    ok(take >= 2 * p.need_bytes - 2 * MiB && take <= 2 * p.need_bytes,
       "inflates twice the need (%" PRIu64 " MiB for %" PRIu64 " MiB)", take / MiB, p.need_bytes / MiB);
    ok(p.expected_return_bytes <= p.need_bytes && p.unmet_bytes < 2 * MiB, "expected returns meet the need");
    bm_plan_clear(&p);
    bm_ledger_clear(&prev);
}

/* A guest short of memory (usable below keep_free) is deflated also while the host reclaims,
 * and what it gets is taken from the others on top of the host's need. */
static void test_short_guest_deflated_while_reclaiming(void)
{
    BmHost h = host(HOST_T, 5 * GiB); /* needs 4.6 GiB */
    BmDomain d[] = {guest("grower", 8 * GiB, 4 * GiB, 512 * MiB), /* keep_free 1.2 GiB */
                    guest("idle", 32 * GiB, 32 * GiB, 28 * GiB)};
    BmPlan p = eval(&h, d, 2, NULL, P);
    const BmDecision *g = dec(&p, "grower"), *i = dec(&p, "idle");
    ok(p.mode == BM_HOST_RECLAIM, "reclaim");
    ok(g->action == BM_ACT_DEFLATE, "short guest deflated although the host reclaims");
    uint64_t keep_free = 8 * GiB * 150 / 1000;
    is_u64(g->target_bytes - g->current_bytes, (keep_free - 512 * MiB + 32 * MiB) / MiB * MiB,
           "by keep_free - usable + deadband");
    ok(g->cause.code == BM_REASON_SHORT && g->pressure.headroom_bytes == 512 * MiB &&
           g->cause.keep_free_bytes == keep_free && g->cause.amount_bytes == g->target_bytes - g->current_bytes,
       "short of memory: usable 512 MiB < keep_free, given what it asked: %s", words(&p, g));
    is_u64(p.guard_bytes, g->target_bytes - g->current_bytes, "guard_bytes");
    ok(i->action == BM_ACT_INFLATE && i->current_bytes - i->target_bytes == (p.need_bytes + p.guard_bytes) / MiB * MiB,
       "the idle guest gives need + guard");
    ok(g->short_of_memory && !i->short_of_memory, "short_of_memory: the grower, not the idle guest");
    bm_plan_clear(&p);
}

/* Reclaim never squeezes guests that are short themselves or at their floors: the need that
 * cannot be met is unmet_bytes. */
static void test_unmet_need_reported_not_squeezed(void)
{
    BmHost h = host(HOST_T, 2 * GiB);
    BmDomain d[] = {guest("tight", 8 * GiB, 8 * GiB, 1 * GiB), guest("low", 8 * GiB, 2 * GiB, 1 * GiB)};
    BmPlan p = eval(&h, d, 2, NULL, P);
    ok(dec(&p, "tight")->action != BM_ACT_INFLATE && dec(&p, "low")->action != BM_ACT_INFLATE,
       "no inflate of short or floored guests");
    ok(p.unmet_bytes >= p.need_bytes, "unmet %" PRIu64 " MiB >= need %" PRIu64 " MiB", p.unmet_bytes / MiB, p.need_bytes / MiB);
    bm_plan_clear(&p);
}

/* A comfortable host gives every ballooned guest memory back toward its maximum, max_step a
 * pass, out of the memory above release_above; holding, it does not. */
static void test_release_gives_back_to_every_ballooned_guest(void)
{
    BmDomain d[] = {guest("a", 4 * GiB, 1 * GiB, 300 * MiB), guest("b", 4 * GiB, 3 * GiB, 2 * GiB),
                    guest("near", 4 * GiB, 4 * GiB - 16 * MiB, 3 * GiB), guest("full", 4 * GiB, 4 * GiB, 3 * GiB)};
    BmHost h = host(HOST_T, 40 * GiB);
    BmPlan p = eval(&h, d, 4, NULL, P);
    ok(p.mode == BM_HOST_RELEASE, "release");
    const uint64_t a_gets = (4 * GiB * 150 / 1000 - 300 * MiB + 32 * MiB) & ~(MiB - 1);
    is_u64(dec(&p, "a")->target_bytes, 1 * GiB + a_gets, "short guest a: keep_free - usable + deadband");
    is_u64(dec(&p, "b")->target_bytes, 4 * GiB, "fine guest b: back to its maximum (1 GiB <= max_step)");
    ok(dec(&p, "near")->action == BM_ACT_DEFLATE && dec(&p, "near")->target_bytes == 4 * GiB,
       "16 MiB below its maximum: given the last part of the way too (within the deadband)");
    ok(dec(&p, "full")->action == BM_ACT_NONE, "at its maximum: nothing");
    bm_plan_clear(&p);

    /* only the memory above release_above (16 GiB) is given to fine guests */
    h = host(HOST_T, 16 * GiB + 512 * MiB);
    p = eval(&h, d, 4, NULL, P);
    is_u64(dec(&p, "a")->target_bytes, 1 * GiB + a_gets, "short guest first");
    is_u64(dec(&p, "b")->target_bytes, 3 * GiB + 512 * MiB, "b gets the 512 MiB above release_above");
    ok(dec(&p, "b")->cause.code == BM_REASON_RELEASE && dec(&p, "b")->cause.amount_bytes == 512 * MiB &&
           dec(&p, "b")->cause.amount_bytes < dec(&p, "b")->cause.want_bytes,
       "released, less than it wants (the memory above release_above): %s", words(&p, dec(&p, "b")));
    bm_plan_clear(&p);

    h = host(HOST_T, 12 * GiB); /* between target 9.6 and release 16 GiB: hold */
    p = eval(&h, d, 4, NULL, P);
    ok(p.mode == BM_HOST_HOLD && dec(&p, "b")->action == BM_ACT_NONE, "holding: no give-back to fine guests");
    bm_plan_clear(&p);
}

/* Domains where ballooning returns nothing to the host (VFIO, locked, hugepages) are skipped at
 * their maximum, never inflated below it, and still given memory back. */
static void test_no_return_domains_skipped(void)
{
    BmDomain d[] = {guest("gpu", 8 * GiB, 8 * GiB, 6 * GiB), guest("huge", 8 * GiB, 6 * GiB, 4 * GiB),
                    guest("locked", 8 * GiB, 8 * GiB, 6 * GiB)};
    d[0].balloon.vfio_hostdev = true;
    d[1].balloon.hugepages = true;
    d[2].balloon.memory_locked = true;
    BmHost h = host(HOST_T, 2 * GiB);
    BmPlan p = eval(&h, d, 3, NULL, P);
    ok(dec(&p, "gpu")->action == BM_ACT_SKIP, "VFIO at its maximum: skipped");
    is_str(words(&p, dec(&p, "gpu")), "ballooning returns nothing to the host: VFIO passthrough (<hostdev>) pins its memory", "reason");
    ok(dec(&p, "locked")->action == BM_ACT_SKIP, "locked at its maximum: skipped");
    ok(dec(&p, "huge")->action == BM_ACT_NONE, "hugepages below its maximum: not inflated");
    ok(dec(&p, "huge")->cause.code == BM_REASON_NO_RETURN && strstr(dec(&p, "huge")->cause.no_return, "hugepage"),
       "its XML says why: %s", words(&p, dec(&p, "huge")));
    bm_plan_clear(&p);
    h = host(HOST_T, 40 * GiB);
    p = eval(&h, d, 3, NULL, P);
    ok(dec(&p, "huge")->action == BM_ACT_DEFLATE && dec(&p, "huge")->target_bytes == 8 * GiB,
       "hugepages: given back in release");
    bm_plan_clear(&p);
}

/* Between passes the agent asks whether a ballooned guest grew short of memory or under
 * pressure, to give it memory back at once. */
static void test_guest_in_need_between_passes(void)
{
    BmDomain d[] = {guest("ballooned", 8 * GiB, 4 * GiB, 3 * GiB), guest("full", 8 * GiB, 8 * GiB, 100 * MiB)};
    BmSnapshot s = {.domains = d, .n_domains = 2};
    ok(!route_in_need(&s, NULL, P, NOW), "ballooned guest with room, short guest at its maximum: no");
    d[0].usable_bytes = 1 * GiB; /* keep_free 1.2 GiB */
    ok(route_in_need(&s, NULL, P, NOW), "ballooned guest below keep_free: yes");
    d[0].last_update_s = NOW - 100;
    ok(!route_in_need(&s, NULL, P, NOW), "stale statistics: no");
    d[0].last_update_s = NOW - 2;
    d[0].usable_bytes = 3 * GiB;
    BmLedger prev;
    ledger_with_yield(&prev, d, 1, (BmYield){0});
    BmLedgerEntry *pd = bm_ledger_entry(&prev, d[0].uuid, NULL);
    pd->prev.last_update_s = NOW - 12;
    d[0].major_faults = pd->prev.major_faults + 10 * 500;
    ok(route_in_need(&s, &prev, P, NOW), "500 major faults/s: yes");
    pd->in_flight = true;
    ok(!route_in_need(&s, &prev, P, NOW), "a change in flight: no");
    bm_ledger_clear(&prev);
}

/* A ledger that saw each domain two seconds ago using grown_by less than now (one entry per
 * domain; the same balloon). Clear with bm_ledger_clear(). */
static void ledger_grown(BmLedger *l, const BmDomain *d, size_t n, const uint64_t *grown_by)
{
    ledger_with_yield(l, d, n, (BmYield){0});
    for (size_t i = 0; i < n; i++) {
        BmLedgerEntry *e = bm_ledger_entry(l, d[i].uuid, NULL);
        e->prev.last_update_s = d[i].last_update_s - 2;
        e->prev.used_bytes -= grown_by[i];
    }
}

/* A ballooned guest whose use grows is never inflated and gets room ahead of its demand (for
 * 30 s more of that growth), also while the host reclaims (taken from the others); slow growth,
 * or memory an inflate took from a deflate-on-oom guest, is not growth. */
static void test_growing_guest_given_room_ahead(void)
{
    /* used 200 MiB, 50 MiB more than 2 s ago: 25 MiB/s; usable 600 MiB < keep_free 154 MiB +
     * 750 MiB ahead: room 336 MiB wanted, capped by its maximum (224 MiB to go) */
    BmDomain d[] = {guest("grow", 1 * GiB, 800 * MiB, 600 * MiB), guest("idle", 8 * GiB, 8 * GiB, 7 * GiB)};
    const uint64_t grown[] = {50 * MiB, 0};
    BmLedger prev;
    ledger_grown(&prev, d, 2, grown);
    BmHost h = host(MEM_TOTAL, 2 * GiB);
    BmPlan p = eval(&h, d, 2, &prev, P);
    const BmDecision *g = dec(&p, "grow"), *i = dec(&p, "idle");
    ok(g->pressure.growth_bytes == 50 * MiB && g->pressure.growth_rate > 24.9 * MiB &&
           g->pressure.growth_rate < 25.1 * MiB, "grew 50 MiB in 2 s: 25 MiB/s");
    ok(g->action == BM_ACT_DEFLATE && g->target_bytes == 1 * GiB,
       "deflated to its maximum while the host reclaims");
    diag("reason: %s", words(&p, g));
    ok(g->cause.code == BM_REASON_GROWING && g->cause.amount_bytes == 224 * MiB, "growing: given 224 MiB");
    ok(i->action == BM_ACT_INFLATE && p.guard_bytes == 224 * MiB, "its room taken from the idle guest");
    invariants(&p, "growing guest");
    bm_plan_clear(&p);

    BmSnapshot s = {.domains = d, .n_domains = 2};
    ok(route_in_need(&s, &prev, P, NOW), "between passes: a growing guest is in need");
    bm_ledger_clear(&prev);

    /* 10 MiB in 2 s: below 16 MiB, not growth */
    const uint64_t slow[] = {10 * MiB, 0};
    ledger_grown(&prev, d, 2, slow);
    p = eval(&h, d, 2, &prev, P);
    ok(dec(&p, "grow")->action != BM_ACT_DEFLATE && dec(&p, "grow")->cause.code != BM_REASON_GROWING &&
           dec(&p, "grow")->cause.code != BM_REASON_GROWS,
       "10 MiB more: not growing");
    ok(!route_in_need(&s, &prev, P, NOW), "nor in need");
    bm_plan_clear(&p);
    bm_ledger_clear(&prev);

    /* a large guest growing 20 MiB/s with 10 GiB usable: its headroom lasts, but it is not
     * inflated while it grows */
    BmDomain big[] = {guest("big", 16 * GiB, 12 * GiB, 10 * GiB)};
    const uint64_t grown_big[] = {40 * MiB};
    ledger_grown(&prev, big, 1, grown_big);
    p = eval(&h, big, 1, &prev, P);
    diag("reason: %s", words(&p, &p.decisions[0]));
    ok(p.decisions[0].action == BM_ACT_NONE && p.decisions[0].idle_bytes > 4 * GiB &&
           p.decisions[0].cause.code == BM_REASON_GROWS,
       "idle but growing: not inflated, not deflated");
    bm_plan_clear(&p);
    bm_ledger_clear(&prev);

    /* deflate-on-oom: the 200 MiB an inflate took since count as used; that is not growth */
    const uint64_t inflated_used[] = {200 * MiB, 0};
    ledger_grown(&prev, d, 2, inflated_used);
    bm_ledger_entry(&prev, d[0].uuid, NULL)->prev.actual_bytes = d[0].actual_bytes + 200 * MiB;
    d[0].balloon.autodeflate = BM_TRI_ON;
    p = eval(&h, d, 2, &prev, P);
    ok(dec(&p, "grow")->pressure.growth_bytes == 0 && dec(&p, "grow")->action != BM_ACT_DEFLATE,
       "deflate-on-oom, used grew by what an inflate took: no growth");
    bm_plan_clear(&p);
    /* without deflate-on-oom an inflate leaves used as it was: the 200 MiB are growth (a timer
     * pass a minute after an inflate saw a guest that grew meanwhile as idle) */
    d[0].balloon.autodeflate = BM_TRI_UNSET;
    p = eval(&h, d, 2, &prev, P);
    ok(dec(&p, "grow")->pressure.growth_bytes == 200 * MiB && dec(&p, "grow")->action == BM_ACT_DEFLATE,
       "no deflate-on-oom: an inflate in between takes nothing off the growth");
    bm_plan_clear(&p);
    bm_ledger_clear(&prev);
}

/* A guest that gives up memory under an inflate (its used falls) and takes it back soon after
 * returns nothing for it: its free memory counts against the most it used in the last 60 s
 * (the ledger's peak, restarted once it is that old). */
static void test_memory_given_up_under_an_inflate_is_not_counted(void)
{
    /* used 551 MiB, QEMU RSS 40 MiB above it (one domain: no QEMU overhead estimate) */
    BmDomain d[] = {guest("steady", 1 * GiB, 892 * MiB, 341 * MiB)};
    d[0].rss_bytes = 551 * MiB + 40 * MiB;
    d[0].unused_bytes = 100 * MiB; /* unbacked free memory below the overhead cap: no skip */
    BmLedger l;
    ledger_with_yield(&l, d, 1, (BmYield){0});
    BmLedgerEntry *e = bm_ledger_entry(&l, d[0].uuid, NULL);
    e->prev.used_peak_bytes = 595 * MiB; /* before the last inflate, 10 s ago */
    e->prev.used_peak_s = NOW - 10;
    BmHost h = host(MEM_TOTAL, 2 * GiB);
    BmPlan p = eval(&h, d, 1, &l, P);
    diag("reason: %s", words(&p, &p.decisions[0]));
    ok(p.decisions[0].action == BM_ACT_NONE && p.decisions[0].backed_free_bytes == 0 &&
           p.decisions[0].cause.code == BM_REASON_NOT_BACKED &&
           p.decisions[0].cause.used_lately_bytes == 44 * MiB,
       "40 MiB backed free, but it used 44 MiB more 10 s ago: not inflated");
    bm_plan_clear(&p);
    e->prev.used_peak_s = NOW - 60;
    p = eval(&h, d, 1, &l, P);
    diag("reason: %s", words(&p, &p.decisions[0]));
    ok(p.decisions[0].action == BM_ACT_INFLATE && p.decisions[0].target_bytes == 860 * MiB,
       "the peak 60 s old: the 40 MiB count (a first probe of 32 MiB)");
    bm_plan_clear(&p);
    bm_ledger_clear(&l);

    /* the ledger keeps the peak for 60 s, then restarts it from the reading */
    BmLedger k;
    bm_ledger_init(&k);
    BmSnapshot s = {.domains = d, .n_domains = 1};
    route_note(&k, &s, NULL, BM_HOST_RECLAIM, NOW, 0);
    const BmLedgerEntry *f = bm_ledger_find(&k, d[0].uuid);
    ok(f->prev.used_peak_bytes == 551 * MiB && f->prev.used_peak_s == NOW, "first reading: its peak");
    d[0].usable_bytes = 385 * MiB; /* used 507 MiB */
    route_note(&k, &s, NULL, BM_HOST_RECLAIM, NOW + 2, 0);
    ok(f->prev.used_bytes == 507 * MiB && f->prev.used_peak_bytes == 551 * MiB &&
           f->prev.used_peak_s == NOW, "used fell: the peak holds");
    route_note(&k, &s, NULL, BM_HOST_RECLAIM, NOW + 60, 0);
    ok(f->prev.used_peak_bytes == 507 * MiB && f->prev.used_peak_s == NOW + 60,
       "60 s later: restarted from the reading");
    d[0].usable_bytes = 300 * MiB; /* used 592 MiB */
    route_note(&k, &s, NULL, BM_HOST_RECLAIM, NOW + 62, 0);
    ok(f->prev.used_peak_bytes == 592 * MiB, "used above the peak: the new peak");
    bm_ledger_clear(&k);
}

/* QEMU's own memory is in its RSS: the smallest RSS minus used among the domains estimates it
 * (a guest that never touched its free memory is mostly QEMU), and is taken off every
 * domain's backed free memory. The numbers are those of four real 1 GiB TCG guests. */
static void test_qemu_overhead_taken_off_backed_memory(void)
{
    BmYieldOverhead o = {0};
    /* guest available 983744 KiB; usable and QEMU RSS as read */
    const uint64_t avail = 983744 * 1024ull;
    const uint64_t usable[3] = {853512192, 899473408, 452964352}, rss[3] = {1073614848, 239271936, 693481472};
    bm_yield_overhead_add(&o, rss[0], avail - usable[0]);
    is_u64(bm_yield_overhead(&o), 0, "one domain: no estimate (it could be guest memory)");
    bm_yield_overhead_add(&o, rss[1], avail - usable[1]);
    bm_yield_overhead_add(&o, rss[2], avail - usable[2]);
    bm_yield_overhead_add(&o, 100 * MiB, BM_ABSENT);
    is_u64(bm_yield_overhead(&o), rss[1] - (avail - usable[1]), "the smallest RSS - used (125 MiB)");
    BmYieldOverhead big = {0};
    bm_yield_overhead_add(&big, 4 * GiB, 1 * GiB);
    bm_yield_overhead_add(&big, 5 * GiB, 1 * GiB);
    is_u64(bm_yield_overhead(&big), 128 * MiB, "capped at 128 MiB");

    BmHost h = host(HOST_T, 4 * GiB);
    BmDomain d[] = {guest("idle", 1 * GiB, 1 * GiB, 0), guest("fresh", 1 * GiB, 1 * GiB, 0),
                    guest("steady", 1 * GiB, 1 * GiB, 0)};
    for (int i = 0; i < 3; i++) {
        d[i].available_bytes = avail;
        d[i].usable_bytes = usable[i];
        d[i].rss_bytes = rss[i];
    }
    BmYield learned = {.inflated_bytes = 32 * MiB, .returned_bytes = 32 * MiB,
                       .last_inflated_bytes = 32 * MiB, .last_returned_bytes = 32 * MiB};
    BmLedger prev;
    ledger_with_yield(&prev, d, 3, learned);
    BmPlan p = eval(&h, d, 3, &prev, P);
    is_u64(p.qemu_overhead_bytes, rss[1] - (avail - usable[1]), "plan: QEMU overhead estimate");
    ok(dec(&p, "idle")->action == BM_ACT_INFLATE, "idle (touched and freed): inflated");
    ok(dec(&p, "steady")->action == BM_ACT_NONE && dec(&p, "fresh")->action == BM_ACT_NONE,
       "steady and fresh: the free memory the host backs for them is QEMU's own: not inflated");
    ok(dec(&p, "steady")->cause.code == BM_REASON_NOT_BACKED, "the host backs none of it: %s",
       words(&p, dec(&p, "steady")));
    bm_plan_clear(&p);
    bm_ledger_clear(&prev);
}

static BmPlan eval_h(const BmHost *h, BmDomain *doms, size_t n, BmLedger *prev,
                     const BmPolicy *p, unsigned horizon_s)
{
    BmSnapshot s = {.domains = doms, .n_domains = n};
    BmPlan plan;
    if (route_eval(h, &s, prev, p, NOW, horizon_s, &plan) < 0)
        ok(0, "bm_policy_eval_rows failed");
    return plan;
}

/* A timer's pass (nothing looks at the guests for timer_interval): it inflates only guests that
 * can deflate themselves (timer_inflate = deflate-on-oom), or every one (always), or none
 * (never); the agent's pass (horizon 0) inflates both. */
static void test_timer_inflates_only_guests_that_deflate_themselves(void)
{
    BmDomain d[] = {guest("stock", 8 * GiB, 8 * GiB, 6 * GiB), guest("doom", 8 * GiB, 8 * GiB, 6 * GiB)};
    d[1].balloon.autodeflate = BM_TRI_ON;
    BmHost h = host(MEM_TOTAL, 4 * GiB);
    BmPlan p = eval_h(&h, d, 2, NULL, P, 60);
    ok(dec(&p, "stock")->action == BM_ACT_NONE && dec(&p, "doom")->action == BM_ACT_INFLATE,
       "timer: the guest with deflate-on-oom is inflated, the other is not");
    diag("reason: %s", words(&p, dec(&p, "stock")));
    ok(dec(&p, "stock")->cause.code == BM_REASON_TIMER_SELF_DEFLATE &&
           dec(&p, "stock")->cause.horizon_s == 60,
       "  as it cannot deflate itself and nothing looks at it for 60 s");
    is_str(words(&p, dec(&p, "stock")),
           "not inflated by the timer: 4.8 GiB idle, but it cannot deflate itself (no deflate-on-oom) "
           "and nothing looks at it for 60 s (timer_interval)",
           "  in words");
    ok(p.unmet_bytes > 0, "  what it would have given is unmet, not squeezed from the other");
    bm_plan_clear(&p);
    p = eval_h(&h, d, 2, NULL, P, 0);
    ok(dec(&p, "stock")->action == BM_ACT_INFLATE && dec(&p, "doom")->action == BM_ACT_INFLATE,
       "agent: both inflated");
    bm_plan_clear(&p);
    _cleanup_(bm_policy_freep) BmPolicy *always = bm_policy_new_default();
    always->guest.timer_inflate = BM_TIMER_INFLATE_ALWAYS;
    p = eval_h(&h, d, 2, NULL, always, 60);
    ok(dec(&p, "stock")->action == BM_ACT_INFLATE, "timer_inflate always: inflated by the timer too");
    bm_plan_clear(&p);
    always->guest.timer_inflate = BM_TIMER_INFLATE_NEVER;
    p = eval_h(&h, d, 2, NULL, always, 60);
    ok(dec(&p, "stock")->action == BM_ACT_NONE && dec(&p, "doom")->action == BM_ACT_NONE &&
           dec(&p, "doom")->cause.code == BM_REASON_TIMER_NEVER,
       "timer_inflate never: the timer inflates none");
    bm_plan_clear(&p);
}

/* A timer's pass moves timer_interval / interval times max_step (60 s / 10 s: 6): a comfortable
 * host has its guests back at their maximum in one pass; a growing guest gets room for the
 * minute to the next pass and 30 s more. */
static void test_timer_paces_for_its_interval(void)
{
    BmDomain d[] = {guest("low", 8 * GiB, 2 * GiB, 1536 * MiB)};
    BmHost h = host(MEM_TOTAL, 40 * GiB);
    BmPlan p = eval_h(&h, d, 1, NULL, P, 0);
    is_u64(p.decisions[0].target_bytes, 4 * GiB, "agent: max_step (2 GiB) a pass");
    bm_plan_clear(&p);
    p = eval_h(&h, d, 1, NULL, P, 60);
    is_u64(p.decisions[0].target_bytes, 8 * GiB, "timer: back to its maximum in one pass");
    bm_plan_clear(&p);

    /* 4 MiB/s (240 MiB in the minute since the last pass), usable 400 MiB of a 1 GiB guest:
     * the agent's 30 s ahead need 154 + 120 MiB (lasts); the timer's 90 s need 154 + 360 */
    BmDomain g[] = {guest("grow", 1 * GiB, 700 * MiB, 400 * MiB)};
    BmLedger prev;
    const uint64_t grown[] = {240 * MiB};
    ledger_grown(&prev, g, 1, grown);
    bm_ledger_entry(&prev, g[0].uuid, NULL)->prev.last_update_s = g[0].last_update_s - 60;
    BmHost hold = host(MEM_TOTAL, 12 * GiB);
    p = eval_h(&hold, g, 1, &prev, P, 0);
    ok(p.decisions[0].action == BM_ACT_NONE, "agent: 400 MiB usable lasts 30 s at 4 MiB/s");
    bm_plan_clear(&p);
    p = eval_h(&hold, g, 1, &prev, P, 60);
    diag("reason: %s", words(&p, &p.decisions[0]));
    ok(p.decisions[0].action == BM_ACT_DEFLATE && p.decisions[0].cause.code == BM_REASON_GROWING &&
           p.decisions[0].cause.ahead_s == 90,
       "timer: given room for the 90 s to the pass after next");
    bm_plan_clear(&p);
    bm_ledger_clear(&prev);
}

/* An inflate leaves keep_free and one deadband more, so that the guest's own settling does not
 * make it short at once (and deflated again: a reversal). */
static void test_inflate_leaves_a_margin_above_keep_free(void)
{
    /* usable 400 MiB of 1 GiB: keep_free 153.6 MiB + deadband 32 MiB leave 214 MiB to take */
    BmDomain d[] = {guest("g", 1 * GiB, 1 * GiB, 400 * MiB)};
    BmHost h = host(MEM_TOTAL, 4 * GiB);
    BmPlan p = eval(&h, d, 1, NULL, P);
    uint64_t keep = 1 * GiB * 150 / 1000 + 32 * MiB;
    is_u64(p.decisions[0].idle_bytes, 400 * MiB - keep, "idle: usable - keep_free - deadband");
    ok(p.decisions[0].action == BM_ACT_INFLATE &&
           400 * MiB - (p.decisions[0].current_bytes - p.decisions[0].target_bytes) >= keep,
       "the inflate leaves keep_free + deadband usable");
    bm_plan_clear(&p);
}

/* In one pressure episode a guest that was given memory (its balloon rose: a deflate, or the
 * guest's own deflate-on-oom) is not inflated again: at most one reversal. A comfortable host
 * ends the episode. */
static void test_no_second_reversal_in_a_pressure_episode(void)
{
    BmDomain d[] = {guest("g", 8 * GiB, 6 * GiB, 5 * GiB)};
    BmLedger prev;
    ledger_with_yield(&prev, d, 1, (BmYield){0});
    BmLedgerEntry *e = bm_ledger_entry(&prev, d[0].uuid, NULL);
    e->prev.actual_bytes = 5 * GiB; /* it was at 5 GiB: 1 GiB given since */
    BmHost h = host(MEM_TOTAL, 4 * GiB);
    BmPlan p = eval(&h, d, 1, &prev, P);
    diag("reason: %s", words(&p, &p.decisions[0]));
    ok(p.decisions[0].action == BM_ACT_NONE && p.decisions[0].cause.code == BM_REASON_GIVEN,
       "balloon rose since the last reading: not inflated again while reclaiming");
    bm_plan_clear(&p);
    /* the ledger keeps the mark for the passes that follow */
    BmSnapshot s = {.domains = d, .n_domains = 1};
    route_note(&prev, &s, NULL, BM_HOST_RECLAIM, NOW, 0);
    ok(bm_ledger_find(&prev, d[0].uuid)->prev.given_s == NOW, "the ledger marks it given");
    p = eval(&h, d, 1, &prev, P);
    ok(p.decisions[0].action == BM_ACT_NONE, "  and the next pass does not inflate it either");
    bm_plan_clear(&p);
    BmSnapshot later = s;
    bm_ledger_entry(&prev, d[0].uuid, NULL)->prev.given_s = NOW - BM_GIVEN_HOLD_S;
    p = eval(&h, d, 1, &prev, P);
    ok(p.decisions[0].action == BM_ACT_INFLATE, "  until BM_GIVEN_HOLD_S passed");
    bm_plan_clear(&p);
    (void)later;
    route_note(&prev, &s, NULL, BM_HOST_RELEASE, NOW, 0);
    ok(bm_ledger_find(&prev, d[0].uuid)->prev.given_s == 0, "a comfortable host ends the episode");
    bm_ledger_clear(&prev);
}

/* Free page reporting: the guest's free memory is back already. An inflate goes through it
 * first (it gives nothing) and then takes page cache: the plan counts only that part, and does
 * not probe. */
static void test_reporting_guest_reclaims_what_reporting_cannot(void)
{
    /* 1 GiB guest: uses 200 MiB, 300 MiB free (reported: not backed), 500 MiB page cache; the
     * QEMU process holds used + cache + QEMU's own 30 MiB */
    BmDomain d[] = {guest("fpr", 1 * GiB, 1 * GiB, 800 * MiB)};
    d[0].unused_bytes = 300 * MiB;
    d[0].disk_caches_bytes = 500 * MiB;
    d[0].rss_bytes = 200 * MiB + 500 * MiB + 30 * MiB;
    d[0].balloon.free_page_reporting = BM_TRI_ON;
    BmHost h = host(MEM_TOTAL, 6 * GiB); /* needs 3.6 GiB */
    BmPlan p = eval(&h, d, 1, NULL, P);
    const BmDecision *x = &p.decisions[0];
    diag("reason: %s", words(&p, x));
    uint64_t take = x->current_bytes - x->target_bytes;
    ok(x->action == BM_ACT_INFLATE && x->cause.cap != BM_CAP_PROBE, "inflated, without a probe");
    ok(take > 300 * MiB, "through its free memory into its cache (took %" PRIu64 " MiB)", take / MiB);
    ok(x->expected_return_bytes + 290 * MiB <= take && x->expected_return_bytes > 0,
       "counted for what comes back beyond the free memory reported");
    bm_plan_clear(&p);
    /* the same guest without reporting: its free memory is backed, it gives all of it */
    d[0].balloon.free_page_reporting = BM_TRI_UNSET;
    d[0].rss_bytes = 1 * GiB + 30 * MiB;
    p = eval(&h, d, 1, NULL, P);
    ok(p.decisions[0].expected_return_bytes == p.decisions[0].current_bytes - p.decisions[0].target_bytes,
       "without reporting every inflated byte is counted");
    bm_plan_clear(&p);
}

/* Free memory the host backs is taken back within two passes under pressure, as fast as free
 * page reporting would return it, even beyond max_step. */
static void test_backed_free_memory_taken_within_two_passes(void)
{
    /* 1 GiB guest, uses 100 MiB, 800 MiB free and backed (touched, freed): max_step is 256 MiB */
    BmDomain d[] = {guest("idle", 1 * GiB, 1 * GiB, 924 * MiB)};
    d[0].rss_bytes = 1 * GiB;
    BmHost h = host(MEM_TOTAL, 4 * GiB);
    BmPlan p = eval(&h, d, 1, NULL, P);
    uint64_t take = p.decisions[0].current_bytes - p.decisions[0].target_bytes;
    diag("reason: %s", words(&p, &p.decisions[0]));
    ok(take > 256 * MiB && take >= 924 * MiB / 2 - 2 * MiB, "half its backed free memory in one pass (%" PRIu64 " MiB)",
       take / MiB);
    bm_plan_clear(&p);
}

/* A guest whose free memory the host does not back (never touched: RSS is what it uses and
 * QEMU's own) is not inflated, nor probed, when its free memory is known: all its free memory
 * is of that kind. A page-cache guest with untouched free memory and no other is inflated
 * through it into its cache, counted for the cache only. */
static void test_unbacked_free_memory_gone_through(void)
{
    BmDomain d[] = {guest("fresh", 1 * GiB, 1 * GiB, 900 * MiB), guest("cache", 1 * GiB, 1 * GiB, 900 * MiB)};
    d[0].unused_bytes = 880 * MiB;
    d[0].disk_caches_bytes = 20 * MiB;
    d[0].rss_bytes = 124 * MiB + 30 * MiB;
    /* cache: 300 MiB free never touched, 600 MiB page cache, 124 MiB used */
    d[1].unused_bytes = 300 * MiB;
    d[1].disk_caches_bytes = 600 * MiB;
    d[1].rss_bytes = 124 * MiB + 600 * MiB + 30 * MiB;
    BmHost h = host(MEM_TOTAL, 6 * GiB);
    BmPlan p = eval(&h, d, 2, NULL, P);
    const BmDecision *f = dec(&p, "fresh"), *c = dec(&p, "cache");
    diag("fresh: %s", words(&p, f));
    diag("cache: %s", words(&p, c));
    ok(f->action == BM_ACT_NONE && f->cause.cap != BM_CAP_PROBE, "never-touched guest: not probed, not inflated");
    uint64_t take = c->current_bytes - c->target_bytes;
    ok(c->action == BM_ACT_INFLATE && take > 300 * MiB, "cache guest: inflated beyond its untouched free memory");
    ok(c->expected_return_bytes + 250 * MiB <= take, "  counted for the cache it reaches only");
    bm_plan_clear(&p);
}

/* The allocator hands out the free memory the host backs before what it does not (memory freed
 * at boot and reported pages sit at the tail of the free lists): the grower of bench/scenario.sh's
 * run of 2026-12-01 (Linux 6.1; bench/README.md) as read before its inflate: total 960 MiB,
 * 717 MiB usable, 714 MiB free, QEMU RSS 813 MiB, so (QEMU's own 128 MiB by the estimate) 275
 * MiB of its free memory never touched. Its inflate of 531 MiB gave the host 501 MiB, where
 * going through the never-touched memory first would have given at most 256: an inflate is
 * counted in full up to the free memory the host backs (439 MiB). A guest with less idle
 * memory than it has unbacked, but some backed free memory, is inflated by that. */
static void test_backed_free_memory_first(void)
{
    BmDomain d[] = {guest("grower", 1 * GiB, 1 * GiB, 717 * MiB), guest("part", 1 * GiB, 1 * GiB, 560 * MiB)};
    d[0].available_bytes = 960 * MiB;
    d[0].unused_bytes = 714 * MiB;
    d[0].disk_caches_bytes = 3 * MiB;
    d[0].rss_bytes = 813 * MiB;
    /* part: 400 MiB uses, 160 MiB free touched and freed, 400 MiB free never touched */
    d[1].available_bytes = 960 * MiB;
    d[1].unused_bytes = 560 * MiB;
    d[1].disk_caches_bytes = 0;
    d[1].rss_bytes = 400 * MiB + 160 * MiB + 128 * MiB; /* and QEMU's own */
    BmHost h = host(24 * GiB, 1 * GiB);
    BmPlan p = eval(&h, d, 2, NULL, P);
    const BmDecision *g = dec(&p, "grower"), *x = dec(&p, "part");
    diag("grower: %s", words(&p, g));
    diag("part: %s", words(&p, x));
    diag("overhead %" PRIu64 " MiB, skip %" PRIu64 " / %" PRIu64 " MiB", p.qemu_overhead_bytes >> 20,
         g->cause.skip_bytes >> 20, x->cause.skip_bytes >> 20);
    uint64_t take = g->current_bytes - g->target_bytes;
    ok(g->action == BM_ACT_INFLATE && g->cause.skip_bytes >= 128 * MiB,
       "grower: inflated, with its never-touched free memory known (%" PRIu64 " MiB)", g->cause.skip_bytes >> 20);
    is_u64(g->expected_return_bytes, take, "  counted in full: the free memory the host backs comes first");
    take = x->current_bytes - x->target_bytes;
    ok(x->action == BM_ACT_INFLATE && take <= 160 * MiB && take >= 100 * MiB,
       "part: inflated by its backed free memory (%" PRIu64 " MiB), not left for its unbacked", take >> 20);
    bm_plan_clear(&p);
}

/* The idle guest of issue 21's agent runs, 2 s after its inflate 1024 -> 511 MiB (the numbers
 * as read): its total as it sees it 447 MiB (its kernel reserved 64 MiB at boot, outside it),
 * 351 MiB usable, QEMU RSS 492 MiB; the grower beside it, ballooned too, makes QEMU's own
 * memory 128 MiB by the estimate (which holds the reservation). At most 83 MiB of its free
 * memory are not backed (447 - (492 - 128)): below the cap, no skip; the 165 MiB above keep_free
 * and a deadband are taken. Counted against the balloon size (511) the reservation counted twice
 * and made 147 MiB "never touched": the guest was left alone while the host was short. */
static void test_unbacked_free_against_the_guests_own_total(void)
{
    BmDomain d[] = {guest("idle", 1 * GiB, 511 * MiB, 351 * MiB), guest("grower", 1 * GiB, 493 * MiB, 236 * MiB)};
    d[0].available_bytes = 447 * MiB;
    d[0].unused_bytes = 348 * MiB;
    d[0].disk_caches_bytes = 3 * MiB;
    d[0].rss_bytes = 492 * MiB;
    d[1].available_bytes = 429 * MiB;
    d[1].unused_bytes = 233 * MiB;
    d[1].disk_caches_bytes = 3 * MiB;
    d[1].rss_bytes = 321 * MiB;
    BmLedger l;
    ledger_with_yield(&l, d, 2, (BmYield){.inflated_bytes = 513 * MiB, .returned_bytes = 512 * MiB,
                                          .last_inflated_bytes = 513 * MiB,
                                          .last_returned_bytes = 512 * MiB});
    BmLedgerEntry *e = bm_ledger_entry(&l, d[0].uuid, NULL);
    e->prev.used_peak_bytes = 147 * MiB; /* before its inflate: 960 - 813 MiB */
    e->prev.used_peak_s = NOW - 10;
    BmHost h = host(24 * GiB, 3071 * MiB); /* reclaiming, 615 MiB below target_available */
    BmPlan p = eval(&h, d, 2, &l, P);
    const BmDecision *x = dec(&p, "idle");
    diag("idle: %s", words(&p, x));
    is_u64(p.qemu_overhead_bytes, 128 * MiB, "QEMU's own memory by the estimate: 128 MiB");
    ok(x->action == BM_ACT_INFLATE && x->current_bytes - x->target_bytes >= 160 * MiB,
       "idle guest: its 165 MiB above keep_free and a deadband taken");
    ok(x->target_bytes - (511 * MiB - 351 * MiB) >= 154 * MiB + 32 * MiB - 2 * MiB,
       "  leaving keep_free and a deadband usable");
    bm_plan_clear(&p);
    bm_ledger_clear(&l);
}

/* A reading right after a change ended has the change's live balloon (the ledger's) but the
 * guest's statistics of before it: no inflate is planned from the two. The next statistics (a
 * second later, by QEMU's clock) follow the change. */
static void test_no_inflate_from_statistics_older_than_the_change(void)
{
    BmDomain d[] = {guest("idle", 1 * GiB, 651 * MiB, 813 * MiB)}; /* usable of before */
    d[0].last_update_s = NOW - 1;
    BmLedger l;
    ledger_with_yield(&l, d, 1, (BmYield){0});
    BmLedgerEntry *e = bm_ledger_entry(&l, d[0].uuid, NULL);
    e->last_reached_bytes = 651 * MiB;
    e->last_ended_real_ns = (NOW - 1) * 1000000000ull + 500000000ull; /* 0.5 s after those stats */
    BmHost h = host(MEM_TOTAL, 4 * GiB);
    BmPlan p = eval(&h, d, 1, &l, P);
    diag("stats before the change: %s", words(&p, &p.decisions[0]));
    ok(p.decisions[0].action == BM_ACT_NONE && p.decisions[0].cause.code == BM_REASON_STATS_PREDATE,
       "statistics older than the change that just ended: not inflated");
    bm_plan_clear(&p);
    d[0].last_update_s = NOW;
    p = eval(&h, d, 1, &l, P);
    diag("stats after the change: %s", words(&p, &p.decisions[0]));
    ok(p.decisions[0].action == BM_ACT_INFLATE, "statistics of the second after it: inflated");
    bm_plan_clear(&p);
    bm_ledger_clear(&l);
}

/* A timer's pass keeps the peak of what a guest used for two and a half intervals: the pass a
 * minute later still counts what it used at the pass before. */
static void test_timer_keeps_the_usage_peak_across_passes(void)
{
    ok(bm_used_peak_window_s(0) == BM_USED_PEAK_S, "agent: the peak counts for 60 s");
    ok(bm_used_peak_window_s(60) == 150, "timer every 60 s: for 150 s");
    BmDomain d[] = {guest("g", 1 * GiB, 1 * GiB, 800 * MiB)};
    d[0].rss_bytes = 1 * GiB;
    BmLedger l;
    ledger_with_yield(&l, d, 1, (BmYield){0});
    BmLedgerEntry *e = bm_ledger_entry(&l, d[0].uuid, NULL);
    e->prev.used_peak_bytes = 700 * MiB;
    e->prev.used_peak_s = NOW - 90;
    BmHost h = host(MEM_TOTAL, 4 * GiB);
    _cleanup_(bm_policy_freep) BmPolicy *always = bm_policy_new_default();
    always->guest.timer_inflate = BM_TIMER_INFLATE_ALWAYS;
    BmPlan p = eval_h(&h, d, 1, &l, always, 0);
    uint64_t agent_take = p.decisions[0].current_bytes - p.decisions[0].target_bytes;
    bm_plan_clear(&p);
    p = eval_h(&h, d, 1, &l, always, 60);
    uint64_t timer_take = p.decisions[0].current_bytes - p.decisions[0].target_bytes;
    diag("agent %" PRIu64 " MiB, timer %" PRIu64 " MiB", agent_take / MiB, timer_take / MiB);
    ok(agent_take > timer_take, "a 90 s old peak: the agent no longer counts it, the timer does");
    bm_plan_clear(&p);
    bm_ledger_clear(&l);
}

/* A reading taken just after a change ended may show libvirt's copy of the balloon from before
 * it (QEMU sends a balloon event at most once a second): the ledger's live value of the change
 * is put in its place for BM_BALLOON_READING_LAG_NS, so no pass plans from the old value. */
static void test_stale_balloon_reading_corrected(void)
{
    BmDomain d[] = {guest("cache", 1 * GiB, 786 * MiB, 600 * MiB)};
    BmSnapshot s = {.domains = d, .n_domains = 1, .taken_real_ns = 1000 * 1000000000ull};
    BmLedger l;
    bm_ledger_init(&l);
    BmLedgerEntry *e = bm_ledger_entry(&l, d[0].uuid, d[0].name);
    e->last_reached_bytes = 489 * MiB;
    e->last_ended_real_ns = s.taken_real_ns - 200000000ull; /* 0.2 s before the reading */
    route_sync(&l, &s, NULL, 1000);
    ok(d[0].actual_bytes == 489 * MiB,
       "0.2 s after a change reached 489 MiB a reading of 786 MiB is taken as 489 MiB");
    d[0].actual_bytes = 786 * MiB;
    e->last_ended_real_ns = s.taken_real_ns - BM_BALLOON_READING_LAG_NS;
    route_sync(&l, &s, NULL, 1000);
    ok(d[0].actual_bytes == 786 * MiB,
       "3 s later the reading stands (the balloon may have moved since)");
    e->last_ended_real_ns = s.taken_real_ns - 1;
    e->in_flight = true;
    route_sync(&l, &s, NULL, 1000);
    ok(d[0].actual_bytes == 786 * MiB, "a change in flight: the reading stands");
    e->in_flight = false;
    d[0].actual_bytes = 489 * MiB + 512 * 1024;
    route_sync(&l, &s, NULL, 1000);
    ok(d[0].actual_bytes == 489 * MiB + 512 * 1024, "within 1 MiB: nothing to correct");
    bm_ledger_clear(&l);
}

/* Issue #32: what costs the guests nothing is taken first. Two 2 GiB guests with 1.5 GiB
 * usable each: "free" has it free (touched and freed: the host backs it), "cache" holds it as
 * page cache. An 8 GiB host: reclaim_below 819 MiB, target 1229 MiB. */
static void two_spare_guests(BmDomain *d)
{
    d[0] = guest("free", 2 * GiB, 2 * GiB, 1536 * MiB);
    d[0].unused_bytes = 1536 * MiB;
    d[0].disk_caches_bytes = 0;
    d[1] = guest("cache", 2 * GiB, 2 * GiB, 1536 * MiB);
    d[1].unused_bytes = 64 * MiB;
    d[1].disk_caches_bytes = 1472 * MiB;
}

static uint64_t taken(const BmDecision *x)
{
    return x->action == BM_ACT_INFLATE ? x->current_bytes - x->target_bytes : 0;
}

static void test_free_memory_taken_before_page_cache(void)
{
    BmDomain d[2];
    two_spare_guests(d);
    BmHost h = host(8 * GiB, 700 * MiB); /* needs 529 MiB */
    BmPlan p = eval(&h, d, 2, NULL, P);
    const BmDecision *f = dec(&p, "free"), *c = dec(&p, "cache");
    diag("free: %s", words(&p, f));
    diag("cache: %s", words(&p, c));
    ok(taken(f) + taken(c) >= p.need_bytes - MiB, "the need is met (%" PRIu64 " MiB)", (taken(f) + taken(c)) / MiB);
    ok(taken(c) <= 64 * MiB && c->take_cache_bytes == 0, "none of the page cache is taken (%" PRIu64 " MiB of its free)",
       taken(c) / MiB);
    ok(f->cause.code == BM_REASON_TAKE && f->take_free_bytes == taken(f) && f->take_cache_bytes == 0 &&
           !strcmp(bm_reason_why(f), "free"),
       "it took free memory (why=free)");
    bm_plan_clear(&p);

    h = host(8 * GiB, 300 * MiB); /* needs 929 MiB: more than the free memory */
    p = eval(&h, d, 2, NULL, P);
    f = dec(&p, "free");
    c = dec(&p, "cache");
    diag("cache: %s", words(&p, c));
    ok(f->take_free_bytes == taken(f) && taken(f) >= 690 * MiB, "all the free memory it may give (%" PRIu64 " MiB)",
       taken(f) / MiB);
    ok(c->take_cache_bytes > 0 && c->take_free_bytes <= 64 * MiB, "then page cache (%" PRIu64 " MiB)",
       c->take_cache_bytes / MiB);
    ok(c->cause.code == BM_REASON_TAKE && !strcmp(bm_reason_why(c), "page-cache"), "it took page cache (why=page-cache)");
    bm_plan_clear(&p);
}

/* The page cache of an idle guest is taken before that of a busy one (its vCPUs over a fifth
 * of a CPU since the previous reading: it may be using its cache). */
static void test_idle_guests_cache_before_busy_guests(void)
{
    BmDomain d[2];
    two_spare_guests(d);
    d[0] = d[1];
    d[0].name = "busy";
    snprintf(d[0].uuid, sizeof(d[0].uuid), "00000000-0000-0000-0000-00000000b051");
    d[0].cpu_time_ns = 1000000000ull + 950000000ull; /* 95% of a CPU over the last second */
    d[1].cpu_time_ns = 1000000000ull + 20000000ull;  /* 2% */
    BmLedger l;
    ledger_with_yield(&l, d, 2, (BmYield){0});
    for (int i = 0; i < 2; i++)
        bm_ledger_entry(&l, d[i].uuid, NULL)->prev.cpu_time_ns = 1000000000ull;
    BmHost h = host(8 * GiB, 700 * MiB); /* needs 529 MiB: more than both free, less than one cache */
    BmPlan p = eval(&h, d, 2, &l, P);
    const BmDecision *b = dec(&p, "busy"), *c = dec(&p, "cache");
    diag("busy: %s", words(&p, b));
    diag("cache: %s", words(&p, c));
    ok(c->take_cache_bytes > 0 && b->take_cache_bytes == 0, "the idle guest's cache is taken, not the busy one's");
    ok(b->pressure.cpu_rate > 0.9 && c->pressure.cpu_rate < 0.05, "CPU shares read (%.2f, %.2f)",
       b->pressure.cpu_rate, c->pressure.cpu_rate);
    bm_plan_clear(&p);
    h = host(8 * GiB, 300 * MiB); /* needs 929 MiB: more than the idle guest has */
    p = eval(&h, d, 2, &l, P);
    b = dec(&p, "busy");
    diag("busy: %s", words(&p, b));
    ok(b->take_cache_bytes > 0 && b->cause.code == BM_REASON_TAKE && b->cause.busy,
       "then the busy guest's, and its reason says it is busy");
    bm_plan_clear(&p);
    bm_ledger_clear(&l);
}

/* A guest whose balloon moved since the previous reading is not read busy by that interval: its
 * vCPUs did the balloon driver's work too (a real idle guest read 28% of a CPU over its own
 * inflate and its next inflate was deferred as a busy guest's). A busy mark of an earlier
 * reading still holds, and the reason says where it came from. */
static void test_busy_not_read_over_a_balloon_move(void)
{
    BmDomain d[2];
    two_spare_guests(d);
    d[0] = d[1];
    d[0].name = "busy";
    snprintf(d[0].uuid, sizeof(d[0].uuid), "00000000-0000-0000-0000-00000000b052");
    d[0].cpu_time_ns = 1000000000ull + 4 * 950000000ull; /* 95% of a CPU over 4 s */
    d[1].cpu_time_ns = 1000000000ull + 4 * 300000000ull; /* 30%: its inflate's work */
    BmLedger l;
    ledger_with_yield(&l, d, 2, (BmYield){0});
    for (int i = 0; i < 2; i++) {
        BmLedgerEntry *e = bm_ledger_entry(&l, d[i].uuid, NULL);
        e->prev.cpu_time_ns = 1000000000ull;
        e->prev.taken_s = NOW - 4;
    }
    BmLedgerEntry *ce = bm_ledger_entry(&l, d[1].uuid, NULL);
    ce->prev.actual_bytes = d[1].actual_bytes + 256 * MiB; /* inflated by 256 MiB since */
    BmHost h = host(8 * GiB, 700 * MiB);
    BmPlan p = eval(&h, d, 2, &l, P);
    const BmDecision *b = dec(&p, "busy"), *c = dec(&p, "cache");
    diag("cache: %s", words(&p, c));
    ok(c->pressure.cpu_rate > 0.25 && !c->pressure.busy_measured && !c->pressure.busy,
       "30%% of a CPU over its own inflate: not busy (%.2f)", c->pressure.cpu_rate);
    ok(b->pressure.busy_measured && b->pressure.busy, "95%% over 4 s without a move: busy");
    ok(c->take_cache_bytes > 0 && b->take_cache_bytes == 0, "  the moved guest's cache is taken first");
    bm_plan_clear(&p);
    /* found busy 10 s ago: the mark holds over the move, and the reason says so */
    ce->prev.busy_s = NOW - 10;
    p = eval(&h, d, 2, &l, P);
    c = dec(&p, "cache");
    diag("cache: %s", words(&p, c));
    ok(c->pressure.busy && !c->pressure.busy_measured, "busy 10 s ago: still busy over the move");
    ok(c->cause.busy && strstr(words(&p, c), "30%") == NULL,
       "  taken as a busy guest; its reason does not quote the driver's CPU time as the guest's");
    bm_plan_clear(&p);
    /* without a move, one reading a hair below the line (15%) does not end a busy mark of 10 s
     * ago (a real re-reader under the host's load read 23% once); one of 70 s ago has ended */
    ce->prev.actual_bytes = d[1].actual_bytes;
    d[1].cpu_time_ns = 1000000000ull + 4 * 150000000ull;
    p = eval(&h, d, 2, &l, P);
    c = dec(&p, "cache");
    ok(!c->pressure.busy_measured && c->pressure.busy, "15%% of a CPU, busy 10 s ago: still busy");
    bm_plan_clear(&p);
    ce->prev.busy_s = NOW - 70;
    p = eval(&h, d, 2, &l, P);
    c = dec(&p, "cache");
    ok(!c->pressure.busy, "15%% of a CPU, busy 70 s ago: idle");
    bm_plan_clear(&p);
    bm_ledger_clear(&l);
}

/* Issue 49's agent run 3, near the host's own OOM: a busy guest whose 116 MiB of page cache lay
 * beyond 508 MiB of free memory the host did not back was inflated 624 MiB; its reads rose, the
 * inflate was stopped and all of it given back, and the guest lost 93 s of work for nothing the
 * host kept. Such a guest is taken, near that line or not, only where the cache beyond is at
 * least the unbacked free memory before it; away from it in bites, each past that memory. */
static void test_busy_unbacked_near_oom(void)
{
    BmDomain d[] = {guest("hot", 1 * GiB, 1 * GiB, 908 * MiB), guest("big", 2 * GiB, 2 * GiB, 1700 * MiB)};
    /* hot: 508 MiB free never touched, 400 MiB page cache, 116 MiB used */
    d[0].unused_bytes = 508 * MiB;
    d[0].disk_caches_bytes = 400 * MiB;
    d[0].rss_bytes = 116 * MiB + 400 * MiB + 30 * MiB;
    /* big: 300 MiB free never touched, 1400 MiB page cache, 348 MiB used */
    d[1].unused_bytes = 300 * MiB;
    d[1].disk_caches_bytes = 1400 * MiB;
    d[1].rss_bytes = 348 * MiB + 1400 * MiB + 30 * MiB;
    for (int i = 0; i < 2; i++)
        d[i].cpu_time_ns = 1000000000ull + 950000000ull; /* 95% of a CPU: both busy */
    BmLedger l;
    ledger_with_yield(&l, d, 2, (BmYield){0});
    for (int i = 0; i < 2; i++)
        bm_ledger_entry(&l, d[i].uuid, NULL)->prev.cpu_time_ns = 1000000000ull;
    BmHost h = host(8 * GiB, 300 * MiB); /* below half of reclaim_below (410 MiB): near OOM */
    BmPlan p = eval(&h, d, 2, &l, P);
    const BmDecision *x = dec(&p, "hot"), *b = dec(&p, "big");
    diag("hot: %s", words(&p, x));
    diag("big: %s", words(&p, b));
    ok(p.hot_cache_allowed, "the host is near its own OOM");
    ok(x->pressure.busy && x->cause.skip_bytes >= 400 * MiB, "hot: busy, %" PRIu64 " MiB of its free memory unbacked",
       x->cause.skip_bytes / MiB);
    ok(x->action == BM_ACT_NONE && x->cause.code == BM_REASON_BUSY_UNBACKED,
       "hot: not inflated through it for a smaller cache, even near OOM");
    ok(b->action == BM_ACT_INFLATE && b->take_cache_bytes > 0,
       "big: a cache beyond larger than its unbacked free memory is taken near OOM (%" PRIu64 " MiB of cache)",
       b->take_cache_bytes / MiB);
    ok(strstr(words(&p, b), "at once: the host is near its own OOM") != NULL, "  and its reason says the host is near its OOM");
    bm_plan_clear(&p);
    /* away from it: the same two, the host short; big's cache in a bite past its unbacked free
     * memory, hot's not at all */
    h = host(8 * GiB, 700 * MiB);
    p = eval(&h, d, 2, &l, P);
    x = dec(&p, "hot");
    b = dec(&p, "big");
    diag("hot: %s", words(&p, x));
    diag("big: %s", words(&p, b));
    ok(!p.hot_cache_allowed && x->action == BM_ACT_NONE && x->cause.code == BM_REASON_BUSY_UNBACKED,
       "away from the host's OOM: hot not inflated either");
    uint64_t take = b->current_bytes - b->target_bytes;
    ok(b->action == BM_ACT_INFLATE && b->cause.bite_bytes > 0 && take > b->cause.skip_bytes &&
           take <= b->cause.skip_bytes + b->cause.bite_bytes,
       "big: a bite of its cache past its %" PRIu64 " MiB of unbacked free memory (%" PRIu64 " MiB, bite %" PRIu64 " MiB)",
       b->cause.skip_bytes / MiB, take / MiB, b->cause.bite_bytes / MiB);
    bm_plan_clear(&p);
    bm_ledger_clear(&l);
}

/* Issue 49's first pass: an idle guest whose free memory covers the need over two passes
 * (max_step and half of its backed free memory a pass) and a busy guest with page cache. The
 * busy guest is spared, not taken beside it: a pass or two more of relief costs it nothing. It
 * stays spared while an inflate of ours is in flight, is asked only what the idle guests cannot
 * give at all, and then its cache in bites; near the host's own OOM what is needed is taken at
 * once. */
static void busy_and_idle(BmDomain *d, BmLedger *l)
{
    d[0] = guest("idle", 2 * GiB, 2 * GiB, 1536 * MiB);
    d[0].unused_bytes = 1536 * MiB;
    d[0].disk_caches_bytes = 0;
    d[1] = guest("busy", 2 * GiB, 2 * GiB, 1536 * MiB);
    d[1].unused_bytes = 64 * MiB;
    d[1].disk_caches_bytes = 1472 * MiB;
    d[0].cpu_time_ns = 1000000000ull + 20000000ull;  /* 2% of a CPU */
    d[1].cpu_time_ns = 1000000000ull + 950000000ull; /* 95% */
    ledger_with_yield(l, d, 2, (BmYield){0});
    for (int i = 0; i < 2; i++)
        bm_ledger_entry(l, d[i].uuid, NULL)->prev.cpu_time_ns = 1000000000ull;
}

static void test_busy_guest_spared_while_idle_ones_suffice(void)
{
    BmDomain d[2];
    BmLedger l;
    busy_and_idle(d, &l);
    BmHost h = host(16 * GiB, 1400 * MiB); /* needs 1058 MiB; near OOM below 819 MiB */
    BmPlan p = eval(&h, d, 2, &l, P);
    const BmDecision *i = dec(&p, "idle"), *b = dec(&p, "busy");
    diag("idle: %s", words(&p, i));
    diag("busy: %s", words(&p, b));
    diag("host: %s", host_words(&p));
    ok(taken(i) >= 700 * MiB && taken(i) < p.need_bytes, "the idle guest gives what it may this pass (%" PRIu64 " MiB)",
       taken(i) / MiB);
    ok(b->action == BM_ACT_NONE, "the busy guest is not taken although the pass falls short");
    is_code(b, BM_REASON_BUSY_SPARED, "  its reason: spared");
    ok(p.busy_deferred && p.busy_spared_bytes >= 64 * MiB && strstr(host_words(&p), "busy guests spared"),
       "the host's reason says what was spared (%" PRIu64 " MiB)", p.busy_spared_bytes / MiB);
    ok(strstr(words(&p, b), "spared while idle guests give more over the coming passes") != NULL,
       "  and the busy guest's");
    bm_plan_clear(&p);

    /* the idle guest's inflate in flight: still spared, whatever is left */
    BmLedgerEntry *e = bm_ledger_entry(&l, d[0].uuid, NULL);
    e->in_flight = true;
    e->last_target_bytes = d[0].actual_bytes - 300 * MiB;
    p = eval(&h, d, 2, &l, P);
    b = dec(&p, "busy");
    ok(b->action == BM_ACT_NONE && b->cause.code == BM_REASON_BUSY_SPARED &&
           strstr(words(&p, b), "inflates of ours are in flight"),
       "an inflate in flight: the busy guest waits for what it gives (%s)", words(&p, b));
    bm_plan_clear(&p);
    e->in_flight = false;

    /* the idle guest can give 400 MiB at all: the busy guest is asked the rest, its cache in a
     * bite (5% of 1472 MiB) */
    d[0].usable_bytes = d[0].unused_bytes = 740 * MiB; /* 740 - 307 - 32 = 401 MiB idle */
    e->prev.used_bytes = bm_domain_used_bytes(&d[0]);
    p = eval(&h, d, 2, &l, P);
    i = dec(&p, "idle");
    b = dec(&p, "busy");
    diag("idle: %s", words(&p, i));
    diag("busy: %s", words(&p, b));
    ok(taken(i) >= 390 * MiB, "all the idle guest has (%" PRIu64 " MiB)", taken(i) / MiB);
    ok(b->action == BM_ACT_INFLATE && b->take_cache_bytes > 0 && b->take_cache_bytes <= 73 * MiB &&
           b->cause.bite_bytes == 73 * MiB,
       "the busy guest's cache in a bite (%" PRIu64 " MiB of it, the bite %" PRIu64 " MiB)",
       b->take_cache_bytes / MiB, b->cause.bite_bytes / MiB);
    ok(strstr(words(&p, b), "a bite a pass, each followed by the read check") != NULL, "  its reason says so");
    ok(!p.busy_deferred, "  nothing spared");
    bm_plan_clear(&p);

    /* near the host's own OOM: what is needed is taken now, no bite */
    h = host(16 * GiB, 700 * MiB);
    p = eval(&h, d, 2, &l, P);
    b = dec(&p, "busy");
    diag("busy: %s", words(&p, b));
    ok(p.hot_cache_allowed && b->take_cache_bytes > 73 * MiB && b->cause.bite_bytes == 0,
       "near OOM: the busy guest's cache without bites (%" PRIu64 " MiB)", b->take_cache_bytes / MiB);
    bm_plan_clear(&p);

    /* an idle guest waiting for statistics that follow its last change: the busy one waits too */
    h = host(16 * GiB, 1400 * MiB);
    d[0].usable_bytes = d[0].unused_bytes = 1536 * MiB;
    e->prev.used_bytes = bm_domain_used_bytes(&d[0]);
    e->last_ended_real_ns = (NOW - 1) * 1000000000ull;
    d[0].last_update_s = NOW - 1;
    p = eval(&h, d, 2, &l, P);
    i = dec(&p, "idle");
    b = dec(&p, "busy");
    ok(i->cause.code == BM_REASON_STATS_PREDATE && b->action == BM_ACT_NONE &&
           b->cause.code == BM_REASON_BUSY_SPARED,
       "the idle guest's statistics predate its change: the busy guest waits for the next reading");
    bm_plan_clear(&p);
    bm_ledger_clear(&l);
}

/* Busy as measured over two seconds or more; a pass right after another (the host watch or the
 * guest watch starts one) cannot tell from whole seconds of CPU time, and keeps the last
 * measure's mark for a minute: a real run's pass 0 s after the one before took a busy guest
 * for idle and inflated it 624 MiB. And a busy guest's free memory is taken with a margin before
 * its cache (the last of MemFree is no safe estimate), the rest with the cache in bites. */
static void test_busy_mark_and_margin(void)
{
    BmDomain d[1];
    d[0] = guest("busy", 2 * GiB, 2 * GiB, 1536 * MiB);
    d[0].unused_bytes = 600 * MiB;
    d[0].disk_caches_bytes = 936 * MiB;
    d[0].cpu_time_ns = 5000000000ull; /* no CPU time since the previous reading */
    BmLedger l;
    ledger_with_yield(&l, d, 1, (BmYield){0});
    BmLedgerEntry *e = bm_ledger_entry(&l, d[0].uuid, NULL);
    e->prev.cpu_time_ns = 5000000000ull;
    e->prev.taken_s = NOW; /* the previous reading in the same second */
    e->prev.busy_s = NOW - 10;
    BmHost h = host(16 * GiB, 1400 * MiB); /* needs 1058 MiB, not near OOM */
    BmPlan p = eval(&h, d, 1, &l, P);
    const BmDecision *x = &p.decisions[0];
    diag("busy: %s", words(&p, x));
    ok(x->pressure.busy && !x->pressure.busy_measured, "readings in the same second: busy by its mark");
    ok(x->action == BM_ACT_INFLATE && taken(x) <= 600 * MiB - 150 * MiB + 47 * MiB &&
           taken(x) >= 400 * MiB,
       "its free memory less a margin of a quarter, then a bite (%" PRIu64 " MiB)", taken(x) / MiB);
    bm_plan_clear(&p);
    e->prev.busy_s = NOW - BM_BUSY_HOLD_S;
    p = eval(&h, d, 1, &l, P);
    ok(!p.decisions[0].pressure.busy && taken(&p.decisions[0]) >= 600 * MiB,
       "the mark a minute old: not busy, all its free memory first (%" PRIu64 " MiB)", taken(&p.decisions[0]) / MiB);
    bm_plan_clear(&p);
    e->prev.busy_s = NOW - 10;
    e->prev.taken_s = NOW - 2; /* measured over 2 s: 0% of a CPU */
    p = eval(&h, d, 1, &l, P);
    ok(!p.decisions[0].pressure.busy, "measured idle over 2 s: not busy, whatever the mark");
    bm_plan_clear(&p);
    d[0].cpu_time_ns += 1800000000ull; /* 90% of a CPU over the 2 s */
    p = eval(&h, d, 1, &l, P);
    ok(p.decisions[0].pressure.busy_measured, "measured busy over 2 s: the mark is set again");
    bm_plan_clear(&p);
    BmSnapshot snap = {.domains = d, .n_domains = 1};
    route_note(&l, &snap, NULL, BM_HOST_RECLAIM, NOW, 0);
    bm_ledger_note_episode(e, BM_ABSENT, BM_ABSENT, false, true, NOW);
    ok(e->prev.busy_s == NOW, "  the ledger keeps it (busy_at in the state file)");
    bm_ledger_clear(&l);
}

/* The rates of QEMU's counters (CPU time, disk reads) are taken over the readings' own clock in
 * nanoseconds: two readings 2.97 s apart fall 2 whole seconds apart, and a real one-vCPU guest
 * at a whole CPU read "its vCPUs at 148% of a CPU". A domain whose reading has no clock (made by
 * hand, or a state file of an older version) still counts whole seconds. */
static void test_rates_over_the_readings_clock(void)
{
    BmDomain d[1];
    d[0] = guest("busy", 2 * GiB, 2 * GiB, 1536 * MiB);
    d[0].unused_bytes = 600 * MiB;
    d[0].disk_caches_bytes = 936 * MiB;
    d[0].cpu_time_ns = 5000000000ull + 2970000000ull; /* one CPU for 2.97 s */
    d[0].disk_read_bytes = 297 * MiB;                  /* 100 MiB/s for 2.97 s */
    d[0].read_real_ns = NOW * 1000000000ull + 980000000ull;
    BmLedger l;
    ledger_with_yield(&l, d, 1, (BmYield){0});
    BmLedgerEntry *e = bm_ledger_entry(&l, d[0].uuid, NULL);
    e->prev.cpu_time_ns = 5000000000ull;
    e->prev.disk_read_bytes = 0;
    e->prev.taken_s = NOW - 2;
    e->prev.taken_ns = (NOW - 2) * 1000000000ull + 10000000ull;
    BmHost h = host(16 * GiB, 1400 * MiB);
    BmPlan p = eval(&h, d, 1, &l, P);
    const BmDecision *x = &p.decisions[0];
    diag("busy: %s", words(&p, x));
    ok(x->pressure.cpu_rate > 0.99 && x->pressure.cpu_rate < 1.01,
       "2.97 s of CPU time in 2.97 s (2 whole seconds): one CPU (%.3f)", x->pressure.cpu_rate);
    ok(x->pressure.disk_read_rate > 99.0 * MiB && x->pressure.disk_read_rate < 101.0 * MiB,
       "  its disk reads 100 MiB/s (%.1f)", x->pressure.disk_read_rate / MiB);
    ok(x->pressure.busy_measured, "  measured busy: the span is 2.97 s");
    ok(strstr(words(&p, x), "148%") == NULL, "  the reason does not say 148%% of a CPU");
    bm_plan_clear(&p);
    /* no clock on this reading: whole seconds, as before */
    d[0].read_real_ns = 0;
    p = eval(&h, d, 1, &l, P);
    ok(p.decisions[0].pressure.cpu_rate > 1.48 && p.decisions[0].pressure.cpu_rate < 1.49,
       "no clock in the reading: whole seconds (%.3f)", p.decisions[0].pressure.cpu_rate);
    bm_plan_clear(&p);
    /* a clock that went back (the wall clock set back between the readings): whole seconds */
    d[0].read_real_ns = e->prev.taken_ns - 1000000000ull;
    p = eval(&h, d, 1, &l, P);
    ok(p.decisions[0].pressure.cpu_rate > 1.48 && p.decisions[0].pressure.cpu_rate < 1.49,
       "  nor one behind the previous reading's (%.3f)", p.decisions[0].pressure.cpu_rate);
    bm_plan_clear(&p);
    /* the ledger keeps the clock for the next pass (taken_at_ns in the state file) */
    d[0].read_real_ns = NOW * 1000000000ull + 980000000ull;
    BmSnapshot snap = {.domains = d, .n_domains = 1};
    route_note(&l, &snap, NULL, BM_HOST_RECLAIM, NOW, 0);
    ok(e->prev.taken_ns == d[0].read_real_ns && e->prev.taken_s == NOW, "  the ledger keeps both clocks");
    bm_ledger_clear(&l);
}

/* An inflate of free memory alone that returned nothing teaches that the guest's free memory
 * is unbacked, not that its page cache returns nothing: a cold cache beyond it is still taken
 * (issue 49's database run left a step unmet for the rest of the episode beside a cold cache of
 * 770 MiB the host backed). An inflate that reached page cache and returned nothing still marks
 * the guest "returns nothing". */
static void test_free_memory_lesson_keeps_the_cache_in_reach(void)
{
    BmYield y = {0};
    ok(bm_yield_learn(&y, 2 * GiB, 2 * GiB - 152 * MiB, 1200 * MiB, 1190 * MiB, true) && !y.nothing &&
           y.free_unbacked && bm_yield_free_unbacked(&y, 1190 * MiB) && !bm_yield_returns_nothing(&y, 1190 * MiB),
       "a free-memory inflate that returned 10 of 152 MiB: free memory unbacked, no \"returns nothing\"");
    ok(!bm_yield_free_unbacked(&y, 1190 * MiB + 128 * MiB), "  lifted once the RSS grew 128 MiB");

    BmDomain d[1];
    d[0] = guest("cold", 2 * GiB, 2 * GiB, 1500 * MiB);
    d[0].unused_bytes = 700 * MiB;
    d[0].disk_caches_bytes = 800 * MiB;
    d[0].rss_bytes = 1190 * MiB; /* used 548 MiB, cache 800: 700 MiB of free memory never touched */
    BmLedger l;
    ledger_with_yield(&l, d, 1, y);
    BmHost h = host(16 * GiB, 1400 * MiB); /* needs 1058 MiB */
    BmPlan p = eval(&h, d, 1, &l, P);
    const BmDecision *x = &p.decisions[0];
    diag("cold: %s", words(&p, x));
    ok(x->action == BM_ACT_INFLATE && x->take_cache_bytes >= 256 * MiB && x->take_free_bytes == 700 * MiB,
       "through its free memory into its cold cache (%" PRIu64 " MiB of cache)", x->take_cache_bytes / MiB);
    ok(x->expected_return_bytes == x->take_cache_bytes, "  counted for the cache alone (%" PRIu64 " MiB)",
       x->expected_return_bytes / MiB);
    ok(strstr(words(&p, x), "about 460 MiB of it back to the host") != NULL, "  its reason says what the host gets");
    diag("host: %s", host_words(&p));
    ok(strstr(host_words(&p), "planned 1.1 GiB of balloon for about 460 MiB of host memory") != NULL,
       "  and the host's, in both units");
    bm_plan_clear(&p);
    bm_ledger_clear(&l);

    BmYield c = {0};
    ok(bm_yield_learn(&c, 2 * GiB, 2 * GiB - 152 * MiB, 1200 * MiB, 1190 * MiB, false) && c.nothing &&
           !c.free_unbacked,
       "an inflate that reached page cache and returned nothing: \"returns nothing\"");
    ledger_with_yield(&l, d, 1, c);
    p = eval(&h, d, 1, &l, P);
    ok(p.decisions[0].action != BM_ACT_INFLATE && p.decisions[0].returns_nothing, "  not inflated");
    bm_plan_clear(&p);
    bm_ledger_clear(&l);
}

/* What an inflate still in flight will give is not asked of the others again. */
static void test_inflates_in_flight_count_for_the_need(void)
{
    BmDomain d[2];
    two_spare_guests(d);
    BmLedger l;
    ledger_with_yield(&l, d, 2, (BmYield){0});
    BmLedgerEntry *e = bm_ledger_entry(&l, d[0].uuid, NULL);
    e->in_flight = true;
    e->last_target_bytes = d[0].actual_bytes - 600 * MiB; /* 600 MiB still to go */
    BmHost h = host(8 * GiB, 700 * MiB); /* needs 529 MiB */
    BmPlan p = eval(&h, d, 2, &l, P);
    const BmDecision *c = dec(&p, "cache");
    diag("host: %s", host_words(&p));
    ok(p.in_flight_bytes == 600 * MiB && c->action == BM_ACT_NONE,
       "600 MiB to come: nothing asked of the cache guest (%s)", words(&p, c));
    ok(strstr(host_words(&p), "to come from inflates in flight") != NULL, "the host's reason says so");
    bm_plan_clear(&p);
    e->last_target_bytes = d[0].actual_bytes - 200 * MiB; /* 200 MiB to go: 329 MiB asked */
    p = eval(&h, d, 2, &l, P);
    c = dec(&p, "cache");
    ok(c->action == BM_ACT_INFLATE && taken(c) >= 320 * MiB && taken(c) <= 340 * MiB,
       "200 MiB to come: the rest asked (%" PRIu64 " MiB)", taken(c) / MiB);
    bm_plan_clear(&p);
    bm_ledger_clear(&l);
}

/* A page cache found hot is taken last: not at all while the host is short but not near its
 * own OOM (the host's reason says what was spared), and only below half of reclaim_below. */
static void test_hot_cache_taken_last(void)
{
    BmDomain d[2];
    two_spare_guests(d);
    BmLedger l;
    ledger_with_yield(&l, d, 2, (BmYield){0});
    bm_ledger_entry(&l, d[1].uuid, NULL)->prev.cache_hot_s = NOW - 5;
    BmHost h = host(8 * GiB, 420 * MiB); /* needs 809 MiB, above half of reclaim_below */
    BmPlan p = eval(&h, d, 2, &l, P);
    const BmDecision *c = dec(&p, "cache");
    diag("cache: %s", words(&p, c));
    diag("host: %s", host_words(&p));
    ok(c->cache_hot && c->take_cache_bytes == 0 && c->take_hot_bytes == 0, "its cache is spared");
    ok(!p.hot_cache_allowed && strstr(host_words(&p), "hot page cache spared"), "the host's reason says so");
    bm_plan_clear(&p);

    h = host(8 * GiB, 300 * MiB); /* below half of reclaim_below (409 MiB) */
    p = eval(&h, d, 2, &l, P);
    c = dec(&p, "cache");
    diag("cache: %s", words(&p, c));
    ok(p.hot_cache_allowed && c->take_hot_bytes > 0 && p.hot_cache_bytes == c->take_hot_bytes,
       "near the host's own OOM it is taken (%" PRIu64 " MiB)", c->take_hot_bytes / MiB);
    ok(c->cause.code == BM_REASON_TAKE && !strcmp(bm_reason_why(c), "hot-page-cache"), "why=hot-page-cache");
    bm_plan_clear(&p);
    /* given back in this episode (the hot mark's give-back): near the host's own OOM it is
     * taken again all the same; short of that, not (no second reversal) */
    bm_ledger_entry(&l, d[1].uuid, NULL)->prev.given_s = NOW - 5;
    p = eval(&h, d, 2, &l, P);
    c = dec(&p, "cache");
    ok(c->take_hot_bytes > 0, "given back in the episode: near the host's own OOM taken again");
    bm_plan_clear(&p);
    h = host(8 * GiB, 420 * MiB);
    p = eval(&h, d, 2, &l, P);
    c = dec(&p, "cache");
    ok(c->action != BM_ACT_INFLATE && c->cause.code == BM_REASON_GIVEN, "  not above half of reclaim_below");
    bm_plan_clear(&p);

    /* a comfortable host ends the episode: no mark */
    BmSnapshot s = {.domains = d, .n_domains = 2};
    route_note(&l, &s, NULL, BM_HOST_RELEASE, NOW, 0);
    ok(bm_ledger_find(&l, d[1].uuid)->prev.cache_hot_s == 0, "a comfortable host forgets the mark");
    bm_ledger_clear(&l);
}

/* A guest "hot" of 2 GiB our inflates of the episode took from (2 GiB -> 1.5 GiB) whose disk
 * reads rose to 200 MiB/s since the previous reading (1 MiB/s when we took); its entry in l. */
static BmLedgerEntry *refaulting_guest(BmDomain d[1], BmLedger *l)
{
    d[0] = guest("hot", 2 * GiB, 1536 * MiB, 800 * MiB);
    d[0].disk_read_bytes = 10 * GiB + 200 * MiB;
    ledger_with_yield(l, d, 1, (BmYield){0});
    BmLedgerEntry *e = bm_ledger_entry(l, d[0].uuid, NULL);
    e->prev.disk_read_bytes = 10 * GiB;
    e->prev.inflated_from_bytes = 2 * GiB;
    e->prev.read_base_Bps = 1 * MiB;
    return e;
}

/* An inflate in flight hurts its guest once its disk reads rise (or it faults) since the pass
 * that started it: it is to stop where its balloon is. Not near the host's own OOM, and not a
 * domain with no change in flight. */
static void test_inflate_in_flight_that_hurts_stops(void)
{
    BmDomain d[1];
    BmLedger l;
    BmLedgerEntry *e = refaulting_guest(d, &l);
    e->in_flight = true;
    e->last_target_bytes = 1 * GiB;
    BmSnapshot snap = {.domains = d, .n_domains = 1};
    _cleanup_(bm_rows_clear) BmRows rows;
    bm_rows_build(&rows, &snap, &l, P, NULL, NOW);
    BmGuestPressure gp;
    ok(bm_policy_inflate_hurts(&rows.rows[0], NOW, false, &gp) && gp.refaulting,
       "its reads rose to 200 MiB/s while the inflate runs: stop it");
    ok(!bm_policy_inflate_hurts(&rows.rows[0], NOW, true, NULL), "  not near the host's own OOM");
    d[0].disk_read_bytes = 10 * GiB + 2 * MiB;
    ok(!bm_policy_inflate_hurts(&rows.rows[0], NOW, false, NULL), "reads at 2 MiB/s: carry on");
    d[0].major_faults = 1000 + 200;
    ok(bm_policy_inflate_hurts(&rows.rows[0], NOW, false, &gp) && gp.under_pressure,
       "200 major faults a second: stop it");
    e->in_flight = false;
    ok(!bm_policy_inflate_hurts(&rows.rows[0], NOW, false, NULL), "no change in flight: nothing to stop");
    BmHost h = host(8 * GiB, 400 * MiB);
    ok(bm_host_near_oom(&h, P) && !bm_host_near_oom(&(BmHost){.mem_total_bytes = 8 * GiB,
                                                           .mem_available_bytes = 500 * MiB}, P),
       "near OOM: below half of reclaim_below (409.6 MiB of 8 GiB)");
    bm_ledger_clear(&l);
}

/* A guest inflated in this episode whose disk reads rise after it re-reads the page cache the
 * balloon took (buffered reads: no fault at all): what was taken is given back at once, and
 * the pass marks its cache hot; the agent's guest watch sees it between passes. */
static void test_refaulting_guest_given_back(void)
{
    BmDomain d[1];
    BmLedger l;
    BmLedgerEntry *e = refaulting_guest(d, &l);
    /* reclaiming, 717 MiB above half of reclaim_below: room to give it back */
    BmHost h = host(16 * GiB, 1536 * MiB);
    BmPlan p = eval(&h, d, 1, &l, P);
    const BmDecision *x = &p.decisions[0];
    diag("reason: %s", words(&p, x));
    ok(x->pressure.refaulting && x->action == BM_ACT_DEFLATE && x->target_bytes == 2 * GiB,
       "deflated back to where the episode's inflates began");
    ok(x->cache_found_hot && x->cache_hot, "its cache found hot");
    ok(x->cause.code == BM_REASON_CACHE_REFAULT && x->pressure.disk_read_rate == 200.0 * MiB &&
           !strcmp(bm_reason_why(x), "cache-refault"),
       "a cache refault at 200 MiB/s of reads");
    ok(p.guard_bytes == 512 * MiB, "what the host got of it is taken from the others (%" PRIu64 " MiB)",
       p.guard_bytes / MiB);
    bm_plan_clear(&p);
    BmSnapshot s = {.domains = d, .n_domains = 1};
    BmRows rows;
    bm_rows_build(&rows, &s, &l, P, NULL, NOW);
    ok(bm_policy_rows_in_need(&rows, NOW), "the guest watch starts a pass");
    bm_rows_clear(&rows);

    /* reads that rose by less than protect_cache_reads (4 MiB/s): not hot */
    d[0].disk_read_bytes = 10 * GiB + 4 * MiB;
    p = eval(&h, d, 1, &l, P);
    ok(!p.decisions[0].pressure.refaulting && p.decisions[0].action != BM_ACT_DEFLATE,
       "reads up by 3 MiB/s: left as is");
    bm_plan_clear(&p);
    /* protect_cache_reads = 0 turns the check off */
    d[0].disk_read_bytes = 10 * GiB + 200 * MiB;
    BmPolicy *off = NULL;
    char *errors = NULL;
    ok(bm_policy_parse("[guest]\nprotect_cache_reads = 0\n", "off.policy", &off, &errors) == 0,
       "protect_cache_reads = 0 parses");
    p = eval(&h, d, 1, &l, off);
    ok(!p.decisions[0].pressure.refaulting && p.decisions[0].action != BM_ACT_DEFLATE,
       "protect_cache_reads = 0: not given back");
    bm_plan_clear(&p);
    bm_policy_free(off);
    free(errors);
    /* the mark, kept by the ledger: its cache is taken last from now on */
    route_note(&l, &s, NULL, BM_HOST_RECLAIM, NOW, 0);
    bm_ledger_note_episode(bm_ledger_entry(&l, d[0].uuid, NULL), BM_ABSENT, BM_ABSENT, true, false, NOW);
    e = bm_ledger_entry(&l, d[0].uuid, NULL);
    ok(e->prev.cache_hot_s == NOW && e->prev.inflated_from_bytes == 2 * GiB,
       "the ledger keeps the mark and where the episode began");
    bm_ledger_clear(&l);
}

/* An inflate that gave the host nothing is given back, and one after which the guest faults
 * (protect_major_faults) gives back all the episode took, beyond max_step. */
static void test_inflates_that_cost_or_give_nothing_given_back(void)
{
    BmDomain d[] = {guest("g", 2 * GiB, 1536 * MiB, 800 * MiB)};
    BmYield y = {0};
    bm_yield_learn(&y, 512 * MiB, 10 * MiB, 2 * GiB, 2 * GiB - 10 * MiB, false);
    BmLedger l;
    ledger_with_yield(&l, d, 1, y);
    bm_ledger_entry(&l, d[0].uuid, NULL)->prev.inflated_from_bytes = 2 * GiB;
    BmHost h = host(8 * GiB, 700 * MiB);
    BmPlan p = eval(&h, d, 1, &l, P);
    const BmDecision *x = &p.decisions[0];
    diag("reason: %s", words(&p, x));
    ok(x->returns_nothing && x->action == BM_ACT_DEFLATE && x->target_bytes == 2 * GiB,
       "returns nothing: given back");
    ok(x->cause.code == BM_REASON_GAVE_NOTHING && !strcmp(bm_reason_why(x), "returns-nothing"), "why=returns-nothing");
    ok(p.guard_bytes < 20 * MiB, "the host loses only what it got (%" PRIu64 " MiB)", p.guard_bytes / MiB);
    bm_plan_clear(&p);
    bm_ledger_clear(&l);

    d[0].actual_bytes = d[0].available_bytes = 1 * GiB; /* 1 GiB taken, max_step 512 MiB */
    d[0].major_faults = 1000 + 200;                     /* 200 a second */
    ledger_with_yield(&l, d, 1, (BmYield){0});
    BmLedgerEntry *e = bm_ledger_entry(&l, d[0].uuid, NULL);
    e->prev.inflated_from_bytes = 2 * GiB;
    e->prev.major_faults = 1000;
    h = host(16 * GiB, 1536 * MiB + 512 * MiB); /* room for the 1 GiB */
    p = eval(&h, d, 1, &l, P);
    x = &p.decisions[0];
    diag("reason: %s", words(&p, x));
    ok(x->action == BM_ACT_DEFLATE && x->target_bytes == 2 * GiB && x->cache_found_hot,
       "faulting after the inflates: all of them given back, cache hot");
    bm_plan_clear(&p);
    /* where giving it back would put the host near its own OOM with nothing else to take: kept */
    h = host(16 * GiB, 1536 * MiB);
    p = eval(&h, d, 1, &l, P);
    x = &p.decisions[0];
    diag("reason: %s", words(&p, x));
    ok(x->action == BM_ACT_NONE && x->cache_found_hot && x->cause.code == BM_REASON_KEPT_HOT &&
           !p.hot_cache_allowed,
       "  kept where giving back 1 GiB would leave the host 307 MiB below half of reclaim_below");
    bm_plan_clear(&p);
    bm_ledger_clear(&l);
}

/* Our inflates took a guest's page cache and it refaults: near the host's own OOM (or where
 * giving it back would put the host there) what they took is kept, not given back to be taken
 * again at the next pass; given back at once after an OOM kill in it, and once the host no
 * longer reclaims. */
static void test_refaulting_guest_kept_near_oom(void)
{
    BmDomain d[1];
    BmLedger l;
    BmLedgerEntry *e = refaulting_guest(d, &l);
    BmHost h = host(8 * GiB, 300 * MiB); /* below half of reclaim_below (409 MiB) */
    BmPlan p = eval(&h, d, 1, &l, P);
    const BmDecision *x = &p.decisions[0];
    diag("reason: %s", words(&p, x));
    ok(x->pressure.refaulting && x->action == BM_ACT_NONE && x->cache_found_hot,
       "near the host's own OOM: refaulting, its cache found hot, and kept");
    ok(x->cause.code == BM_REASON_KEPT_HOT && p.hot_cache_allowed, "kept, the host near its own OOM");
    bm_plan_clear(&p);
    /* 700 MiB: reclaiming, 291 MiB above half of reclaim_below, the 512 MiB taken not made up
     * by another guest: kept */
    h = host(8 * GiB, 700 * MiB);
    p = eval(&h, d, 1, &l, P);
    ok(p.decisions[0].action == BM_ACT_NONE && p.decisions[0].cause.code == BM_REASON_KEPT_HOT &&
           !p.hot_cache_allowed,
       "  kept where giving it back would put the host there");
    bm_plan_clear(&p);
    /* its inflate gave the host (almost) nothing: not kept, the guest would pay for nothing */
    BmYield learned = e->yield;
    uint64_t rss = d[0].rss_bytes;
    d[0].rss_bytes = 1 * GiB;
    ok(bm_yield_learn(&e->yield, 2 * GiB, 1536 * MiB, 1 * GiB + 40 * MiB, 1 * GiB, false), "  (a 512 MiB inflate gave 40 MiB)");
    h = host(8 * GiB, 300 * MiB);
    p = eval(&h, d, 1, &l, P);
    diag("reason: %s", words(&p, &p.decisions[0]));
    ok(p.decisions[0].returns_nothing && p.decisions[0].action == BM_ACT_DEFLATE &&
           p.decisions[0].target_bytes == 2 * GiB && p.decisions[0].cause.code != BM_REASON_KEPT_HOT,
       "  its inflate returned nothing: given back even near the host's own OOM");
    bm_plan_clear(&p);
    e->yield = learned;
    d[0].rss_bytes = rss;
    /* an OOM kill in it: given back at once all the same */
    d[0].starve = (BmStarveStats){.oom_kills = 1}; /* a 6.12 guest's counters, the rest 0 */
    e->prev.oom_kills = e->prev.alloc_stalls = e->prev.direct_reclaim_bytes = 0;
    h = host(8 * GiB, 300 * MiB);
    p = eval(&h, d, 1, &l, P);
    ok(p.decisions[0].action == BM_ACT_DEFLATE, "  an OOM kill in it: given back at once");
    bm_plan_clear(&p);
    /* the host holding (no longer reclaiming): given back */
    d[0].starve = (BmStarveStats){0};
    e->prev.oom_kills = BM_ABSENT;
    h = host(8 * GiB, 1536 * MiB);
    p = eval(&h, d, 1, &l, P);
    ok(p.mode != BM_HOST_RECLAIM && p.decisions[0].action == BM_ACT_DEFLATE &&
           p.decisions[0].target_bytes == 2 * GiB,
       "  the host no longer reclaiming: given back");
    bm_plan_clear(&p);
    bm_ledger_clear(&l);
}

/* Linux 6.12's starvation statistics as a 6.12 guest under QEMU 9.2+ sends them (all set) */
static void starve_stats(BmDomain *d, uint64_t oom_kills, uint64_t stalls, uint64_t direct_reclaim)
{
    d->starve = (BmStarveStats){.oom_kills = oom_kills,
                                .alloc_stalls = stalls,
                                .async_scan_bytes = 0,
                                .direct_scan_bytes = direct_reclaim,
                                .async_reclaim_bytes = 0,
                                .direct_reclaim_bytes = direct_reclaim};
}

/* An OOM kill in a ballooned guest: all of its memory back at once (not paced by max_step),
 * even while the host reclaims, and not inflated again in the pressure episode (the ledger's
 * own mark); a comfortable host ends the episode. */
static void test_oom_kill_deflates_at_once_and_holds(void)
{
    BmDomain d[] = {guest("oomed", 1 * GiB, 400 * MiB, 300 * MiB), guest("twin", 1 * GiB, 1 * GiB, 900 * MiB)};
    starve_stats(&d[0], 2, 40, 0);
    starve_stats(&d[1], 0, 0, 0);
    BmLedger prev;
    ledger_with_yield(&prev, d, 2, (BmYield){0});
    BmLedgerEntry *e = bm_ledger_entry(&prev, d[0].uuid, NULL);
    e->prev.oom_kills = 1;
    e->prev.alloc_stalls = 40;
    e->prev.direct_reclaim_bytes = 0;
    BmHost h = host(MEM_TOTAL, 4 * GiB); /* reclaiming */
    BmPlan p = eval(&h, d, 2, &prev, P);
    const BmDecision *x = dec(&p, "oomed");
    diag("reason: %s", words(&p, x));
    ok(x->pressure.oom_kills == 1 && x->pressure.oom_s == NOW && x->pressure.under_pressure,
       "one OOM kill since the previous reading: seen, under pressure");
    ok(x->action == BM_ACT_DEFLATE && x->target_bytes == 1 * GiB,
       "deflated to its maximum at once (624 MiB, max_step is 256 MiB), although the host reclaims");
    ok(x->cause.code == BM_REASON_OOM_KILL && x->cause.amount_bytes == 624 * MiB &&
           x->cause.want_bytes == 624 * MiB && !strcmp(bm_reason_why(x), "oom-kill"),
       "an OOM kill: 624 MiB of 624 wanted");
    is_str(words(&p, x), "OOM kill in the guest (1 since the previous reading): give 624 MiB at once, "
                      "to its maximum although the host is reclaiming; not inflated again in this "
                      "pressure episode",
           "  in words");
    ok(x->short_of_memory, "exported as short of memory");
    invariants(&p, "OOM kill");
    bm_plan_clear(&p);
    {
        BmSnapshot s = {.domains = d, .n_domains = 1};
        ok(route_in_need(&s, &prev, P, NOW), "the guest watch starts a pass at once");
    }

    /* the ledger marks it; the next pass finds it deflated and idle: not inflated again */
    BmSnapshot s = {.domains = d, .n_domains = 2};
    route_note(&prev, &s, NULL, BM_HOST_RECLAIM, NOW, 0);
    ok(bm_ledger_find(&prev, d[0].uuid)->prev.oom_s == NOW, "the ledger marks the OOM kill");
    d[0].actual_bytes = d[0].available_bytes = d[0].rss_bytes = 1 * GiB;
    d[0].usable_bytes = 900 * MiB;
    d[0].last_update_s = NOW - 1;
    bm_ledger_entry(&prev, d[0].uuid, NULL)->prev.given_s = 0; /* the OOM mark alone */
    p = eval(&h, d, 2, &prev, P);
    x = dec(&p, "oomed");
    diag("reason: %s", words(&p, x));
    ok(dec(&p, "twin")->action == BM_ACT_INFLATE, "its idle twin is inflated");
    ok(x->action == BM_ACT_NONE && x->pressure.oom_kills == 0 && x->cause.code == BM_REASON_OOM_KILL &&
           x->cause.want_bytes == 0 && x->pressure.oom_ago_s == 0,
       "it is not, though as idle");
    ok(!x->short_of_memory, "at its maximum: not short of memory");
    bm_plan_clear(&p);
    /* below its maximum again (the guest itself, a `set`): given back toward it */
    d[0].actual_bytes = d[0].available_bytes = 700 * MiB;
    d[0].usable_bytes = 600 * MiB;
    bm_ledger_entry(&prev, d[0].uuid, NULL)->prev.actual_bytes = 700 * MiB;
    p = eval(&h, d, 2, &prev, P);
    ok(dec(&p, "oomed")->action == BM_ACT_DEFLATE && dec(&p, "oomed")->target_bytes == 1 * GiB,
       "held: below its maximum in the episode, given all of it back");
    bm_plan_clear(&p);
    d[0].actual_bytes = d[0].available_bytes = 1 * GiB;
    d[0].usable_bytes = 900 * MiB;
    bm_ledger_entry(&prev, d[0].uuid, NULL)->prev.actual_bytes = 1 * GiB;
    bm_ledger_entry(&prev, d[0].uuid, NULL)->prev.used_bytes = bm_domain_used_bytes(&d[0]);
    bm_ledger_entry(&prev, d[0].uuid, NULL)->prev.oom_s = NOW - BM_GIVEN_HOLD_S;
    p = eval(&h, d, 2, &prev, P);
    diag("reason: %s", words(&p, dec(&p, "oomed")));
    ok(dec(&p, "oomed")->action == BM_ACT_INFLATE, "inflated again once BM_GIVEN_HOLD_S passed");
    bm_plan_clear(&p);
    bm_ledger_entry(&prev, d[0].uuid, NULL)->prev.oom_s = NOW - 10;
    route_note(&prev, &s, NULL, BM_HOST_RELEASE, NOW, 0);
    ok(bm_ledger_find(&prev, d[0].uuid)->prev.oom_s == 0, "a comfortable host ends the episode");

    /* an OOM kill in a guest at its maximum: nothing to give, but not inflated in the episode */
    starve_stats(&d[1], 1, 0, 0);
    p = eval(&h, d, 2, &prev, P);
    ok(dec(&p, "twin")->action == BM_ACT_NONE && dec(&p, "twin")->cause.code == BM_REASON_OOM_KILL,
       "an OOM kill at its maximum: not inflated");
    bm_plan_clear(&p);
    bm_ledger_clear(&prev);
}

/* An OOM kill while the host reclaims near its own OOM line (MemAvailable below half of
 * reclaim_below): the guest's maximum back at once would decide which OOM killer runs (issue
 * 50: a guest with 8 GiB got +8 GiB with 293 MiB available). Given at most what the host has
 * above that line, and at least max_step; the others are asked for it; the rest at the next
 * passes. A comfortable host gives it all at once, as before. */
static void test_oom_kill_paced_near_host_oom(void)
{
    BmDomain d[] = {guest("oomed", 8 * GiB, 2 * GiB, 100 * MiB), guest("idle", 16 * GiB, 16 * GiB, 12 * GiB)};
    starve_stats(&d[0], 1, 0, 0);
    starve_stats(&d[1], 0, 0, 0);
    BmLedger prev;
    ledger_with_yield(&prev, d, 2, (BmYield){0});
    BmLedgerEntry *e = bm_ledger_entry(&prev, d[0].uuid, NULL);
    e->prev.oom_kills = e->prev.alloc_stalls = e->prev.direct_reclaim_bytes = 0;
    prev.mode = BM_HOST_RECLAIM;
    static const struct {
        uint64_t avail, target;
        const char *what;
    } cases[] = {
        /* reclaim_below 6.4 GiB, its half 3.2 GiB; max_step 25% of 8 GiB: 2 GiB */
        {293 * MiB, 4 * GiB, "near the host's own OOM (293 MiB available): max_step, 2 GiB"},
        {6 * GiB, 2 * GiB + ((6 * GiB - 64 * GiB / 10 / 2) & ~(MiB - 1)),
         "6 GiB available, 2.8 GiB above the host's OOM line: that much"},
        {30 * GiB, 8 * GiB, "a comfortable host: all of it at once"},
    };
    for (size_t i = 0; i < BM_ARRAY_SIZE(cases); i++) {
        BmHost h = host(MEM_TOTAL, cases[i].avail);
        BmPlan p = eval(&h, d, 2, &prev, P);
        const BmDecision *x = dec(&p, "oomed");
        diag("reason: %s", words(&p, x));
        ok(x->action == BM_ACT_DEFLATE && x->target_bytes == cases[i].target &&
               x->cause.code == BM_REASON_OOM_KILL,
           "OOM kill, %s (target %" PRIu64 " MiB)", cases[i].what, x->target_bytes / MiB);
        if (i == 0) {
            is_str(words(&p, x), "OOM kill in the guest (1 since the previous reading): give 2 GiB now, "
                              "6 GiB below its maximum: the host reclaims with 0 B above its own OOM "
                              "line (half of reclaim_below), paced by that or max_step (2 GiB); not "
                              "inflated again in this pressure episode",
                   "  in words: paced, and why");
            ok(p.guard_bytes >= 2 * GiB && dec(&p, "idle")->action == BM_ACT_INFLATE,
               "  what it gets is asked of the others on top of the host's need");
        }
        uint64_t inflated = 0;
        for (size_t j = 0; j < p.n_decisions; j++)
            if (p.decisions[j].action == BM_ACT_INFLATE)
                inflated += p.decisions[j].current_bytes - p.decisions[j].target_bytes;
        ok(inflated <= p.need_bytes + p.guard_bytes,
           "  the others give at most the host's need and what it gets (%" PRIu64 " MiB <= %" PRIu64
           " + %" PRIu64 " MiB)", inflated / MiB, p.need_bytes / MiB, p.guard_bytes / MiB);
        bm_plan_clear(&p);
    }
    bm_ledger_clear(&prev);
}

/* Allocation stalls or direct reclaim that rise between two readings (no inflate between
 * them): the guest starves: under pressure, deflated by max_step like one past
 * protect_major_faults, never inflated. Below their lines, or across an inflate (the
 * balloon's own allocations reclaim), they count for nothing. */
static void test_stalls_and_direct_reclaim_stop_inflating(void)
{
    BmDomain d[] = {guest("stalls", 8 * GiB, 4 * GiB, 3 * GiB)};
    BmLedger prev;
    ledger_with_yield(&prev, d, 1, (BmYield){0});
    BmLedgerEntry *e = bm_ledger_entry(&prev, d[0].uuid, NULL);
    e->prev.last_update_s = NOW - 12; /* the guest's clock: 10 s between the two */
    e->prev.oom_kills = 0;
    e->prev.alloc_stalls = 100;
    e->prev.direct_reclaim_bytes = 64 * MiB;
    BmHost h = host(MEM_TOTAL, 4 * GiB); /* reclaiming */
    static const struct {
        uint64_t stalls, direct;
        bool starving;
        const char *what;
    } cases[] = {
        {100 + 50, 64 * MiB, true, "5 stalls/s"},
        {100, 64 * MiB + 20 * MiB, true, "2 MiB/s of direct reclaim"},
        {100 + 10, 64 * MiB, true, "1 stall/s: at the line"},
        {100 + 5, 64 * MiB + 5 * MiB, false, "0.5 stalls/s and 0.5 MiB/s of direct reclaim"},
        {100, 64 * MiB, false, "none"},
    };
    for (size_t i = 0; i < BM_ARRAY_SIZE(cases); i++) {
        starve_stats(&d[0], 0, cases[i].stalls, cases[i].direct);
        BmPlan p = eval(&h, d, 1, &prev, P);
        const BmDecision *x = &p.decisions[0];
        diag("%s: %s", cases[i].what, words(&p, x));
        ok(x->pressure.starving == cases[i].starving && x->pressure.under_pressure == cases[i].starving,
           "%s: %s", cases[i].what, cases[i].starving ? "starving, under pressure" : "not starving");
        if (cases[i].starving)
            ok(x->action == BM_ACT_DEFLATE && x->target_bytes == 6 * GiB &&
                   x->cause.code == BM_REASON_STARVING && !strcmp(bm_reason_why(x), "starving"),
               "%s: deflated by max_step, never inflated; the reason names the stalls", cases[i].what);
        else
            ok(x->action == BM_ACT_INFLATE, "%s: inflated as an idle guest", cases[i].what);
        bm_plan_clear(&p);
    }
    /* an inflate between the two readings: its own allocations may stall: not counted */
    starve_stats(&d[0], 0, 100 + 500, 64 * MiB + 200 * MiB);
    e->prev.actual_bytes = 5 * GiB;
    BmPlan p = eval(&h, d, 1, &prev, P);
    ok(p.decisions[0].pressure.alloc_stall_rate < 0 && p.decisions[0].pressure.direct_reclaim_rate < 0 &&
           !p.decisions[0].pressure.starving,
       "an inflate between the readings: stalls and direct reclaim not counted");
    bm_plan_clear(&p);
    e->prev.actual_bytes = 4 * GiB;

    /* no statistics (a guest before 6.10, QEMU before 9.2, or the monitor not asked): unknown,
     * not zero; the other rules as before */
    d[0].starve = BM_STARVE_STATS_ABSENT;
    p = eval(&h, d, 1, &prev, P);
    ok(p.decisions[0].pressure.alloc_stall_rate < 0 && p.decisions[0].pressure.direct_reclaim_rate < 0 &&
           !bm_present(p.decisions[0].pressure.oom_kills) && p.decisions[0].action == BM_ACT_INFLATE,
       "absent statistics: rates unknown, no OOM kills known, inflated as an idle guest");
    bm_plan_clear(&p);
    d[0].major_faults = e->prev.major_faults + 10 * 500;
    p = eval(&h, d, 1, &prev, P);
    ok(p.decisions[0].pressure.under_pressure && p.decisions[0].action == BM_ACT_DEFLATE,
       "absent statistics: the major-fault rule still protects it");
    bm_plan_clear(&p);
    /* present now, absent in the previous reading (an older state file): no rate yet */
    starve_stats(&d[0], 3, 1000, 1 * GiB);
    d[0].major_faults = e->prev.major_faults;
    e->prev.oom_kills = e->prev.alloc_stalls = e->prev.direct_reclaim_bytes = BM_ABSENT;
    p = eval(&h, d, 1, &prev, P);
    ok(!p.decisions[0].pressure.under_pressure && p.decisions[0].pressure.oom_s == 0,
       "no previous counters: no kill and no rate read from counters since boot");
    bm_plan_clear(&p);
    bm_ledger_clear(&prev);
}

/* Every rule has its words, and only a change has a why= word: those of the code. */
static void test_reason_words(void)
{
    BmPlan plan = {.mode = BM_HOST_RECLAIM};
    bool all_said = true, none_why = true, all_ruled = true;
    for (int c = BM_REASON_NOT_RUNNING; c <= BM_REASON_POOL_EMPTY; c++) {
        BmDecision x = {.cause = {.code = (BmReasonCode)c, .no_return = "its XML"}};
        char words[256];
        bm_reason_format(&plan, &x, words, sizeof(words));
        all_said &= words[0] != '\0';
        none_why &= bm_reason_why(&x) == NULL;
        /* the agent's decision record names the rule of every decision in one word */
        const char *rule = bm_reason_rule(&x);
        bool word = strcmp(rule, "none") != 0 && strspn(rule, "abcdefghijklmnopqrstuvwxyz-") == strlen(rule);
        if (!word)
            diag("reason code %d: rule word '%s'", c, rule);
        all_ruled &= word;
    }
    ok(all_said, "every reason code has words");
    ok(none_why, "a decision that moves nothing has no why= word");
    ok(all_ruled, "every reason code has a rule word (the decision record's why=)");
    BmDecision x = {.action = BM_ACT_DEFLATE, .cause = {.code = BM_REASON_STARVING}};
    is_str(bm_reason_why(&x), "starving", "a deflate of a starving guest: why=starving");
    x = (BmDecision){.action = BM_ACT_INFLATE, .take_hot_bytes = MiB, .cause = {.code = BM_REASON_TAKE}};
    is_str(bm_reason_why(&x), "hot-page-cache", "an inflate into a hot cache: why=hot-page-cache");
    is_str(bm_reason_rule(&x), "hot-page-cache", "a change's rule word is its why= word");
    x = (BmDecision){.action = BM_ACT_NONE, .cause = {.code = BM_REASON_BUSY_SPARED}};
    is_str(bm_reason_rule(&x), "busy-spared", "a busy guest spared: rule busy-spared");
}

/* ---- virtio-mem: a guest moved through its device, the block as the step ---- */

/* A guest whose memory virtio-mem moves: base memory and one device of size with plugged of it,
 * in blocks of block; its balloon sends the statistics but returns nothing (VFIO), so the
 * device is what moves (bm_vmem_moves_domain()). Its sizes are the domain's, as the reading
 * makes them: base + plugged now, base + size at most. */
static BmDomain vmem_guest(const char *name, uint64_t base, uint64_t size, uint64_t plugged,
                           uint64_t block, uint64_t usable)
{
    BmDomain d = guest(name, base + size, base + plugged, usable);
    d.vmem = d.vmem_auto = true; /* as the reading makes it (bm_domain_move_by()) */
    d.balloon_max_bytes = base + size;
    d.balloon_actual_bytes = base; /* QEMU's balloon counts the base memory */
    d.balloon.vfio_hostdev = true;
    d.balloon.base_memory_bytes = base;
    d.balloon.n_virtio_mem = 1;
    d.balloon.virtio_mem[0] = (BmVirtioMem){.size_bytes = size, .block_bytes = block,
                                            .requested_bytes = plugged, .current_bytes = plugged,
                                            .node = -1};
    return d;
}

/* the same guest with a usable balloon: what the plan asks of it before the blocks */
static BmDomain balloon_twin(const BmDomain *v)
{
    BmDomain d = guest(v->name, v->max_bytes, v->actual_bytes, v->usable_bytes);
    return d;
}

/* one decision of a plan of one domain */
static BmDecision eval_one(const BmHost *h, BmDomain *d, BmLedger *l, const BmPolicy *p,
                           unsigned horizon_s, BmPlan *ret)
{
    BmSnapshot s = {.domains = d, .n_domains = 1};
    ok(route_eval(h, &s, l, p, NOW, horizon_s, ret) == 0 && ret->n_decisions == 1, "evaluated");
    return ret->decisions[0];
}

/* An unplug takes whole blocks of what the plan took, rounded down: never more. */
static void test_vmem_unplug_rounds_down(void)
{
    const uint64_t block = 1 * GiB;
    BmHost h = host(MEM_TOTAL, 2 * GiB);
    BmDomain v = vmem_guest("vm", 1 * GiB, 7 * GiB, 7 * GiB, block, 5 * GiB);
    BmDomain b = balloon_twin(&v);
    BmPlan pv, pb;
    BmDecision x = eval_one(&h, &v, NULL, P, 0, &pv), y = eval_one(&h, &b, NULL, P, 0, &pb);
    ok(y.action == BM_ACT_INFLATE && !y.vmem && y.vmem_index == -1, "the balloon twin is inflated");
    uint64_t asked = y.current_bytes - y.target_bytes, took = x.current_bytes - x.target_bytes;
    diag("asked %" PRIu64 " MiB, unplugged %" PRIu64 " MiB: %s", asked / MiB, took / MiB, words(&pv, &x));
    ok(x.action == BM_ACT_INFLATE && x.vmem && x.vmem_index == 0, "the virtio-mem guest: unplugged");
    ok(took % block == 0 && took <= asked && took + block > asked,
       "  whole blocks, rounded down from what the plan took");
    ok(took < asked, "  (the plan's take was not a whole number of blocks)");
    is_u64(x.vmem_block_bytes, block, "  its device's block");
    is_u64(x.vmem_offset_bytes, 1 * GiB, "  offset: the base memory");
    is_u64(x.vmem_requested_bytes, 7 * GiB - took, "  requested: what is plugged less the take");
    is_u64(x.take_free_bytes + x.take_cache_bytes + x.take_hot_bytes, took, "  its parts add up to it");
    ok(!x.returns_nothing && x.cause.code == BM_REASON_TAKE,
       "  its balloon returns nothing (VFIO), the device does");
    bm_plan_clear(&pv);
    bm_plan_clear(&pb);
}

/* A give rounds up to whole blocks, at most the device's room; below a block is no change. */
static void test_vmem_give_rounds_up(void)
{
    const uint64_t block = 128 * MiB;
    BmHost h = host(MEM_TOTAL, 10 * GiB); /* holding */
    BmDomain v = vmem_guest("vm", 1 * GiB, 7 * GiB, 3 * GiB, block, 100 * MiB);
    BmDomain b = balloon_twin(&v);
    BmPlan pv, pb;
    BmDecision x = eval_one(&h, &v, NULL, P, 0, &pv), y = eval_one(&h, &b, NULL, P, 0, &pb);
    ok(y.action == BM_ACT_DEFLATE, "the short balloon twin is given memory");
    uint64_t asked = y.target_bytes - y.current_bytes, gave = x.target_bytes - x.current_bytes;
    diag("asked %" PRIu64 " MiB, plugged %" PRIu64 " MiB: %s", asked / MiB, gave / MiB, words(&pv, &x));
    ok(x.action == BM_ACT_DEFLATE && x.cause.code == BM_REASON_SHORT, "the short virtio-mem guest: plugged");
    ok(gave % block == 0 && gave >= asked && gave < asked + block, "  whole blocks, rounded up");
    is_u64(x.vmem_requested_bytes, 3 * GiB + gave, "  requested: what is plugged and the give");
    bm_plan_clear(&pv);
    bm_plan_clear(&pb);

    /* one block of room left: the give is that block, the domain at its maximum */
    v = vmem_guest("vm", 1 * GiB, 7 * GiB, 7 * GiB - block, block, 100 * MiB);
    x = eval_one(&h, &v, NULL, P, 0, &pv);
    ok(x.action == BM_ACT_DEFLATE && x.target_bytes == x.max_bytes && x.vmem_requested_bytes == 7 * GiB,
       "a block of room: plugged to the device's size");
    bm_plan_clear(&pv);

    /* a take less than a block (idle memory of about 470 MiB, blocks of 1 GiB): none */
    h = host(MEM_TOTAL, 2 * GiB);
    v = vmem_guest("vm", 1 * GiB, 7 * GiB, 7 * GiB, 1 * GiB, 1700 * MiB);
    b = balloon_twin(&v);
    x = eval_one(&h, &v, NULL, P, 0, &pv);
    y = eval_one(&h, &b, NULL, P, 0, &pb);
    ok(y.action == BM_ACT_INFLATE && y.current_bytes - y.target_bytes < 1 * GiB,
       "the balloon twin gives less than a GiB");
    ok(x.action == BM_ACT_NONE && x.target_bytes == x.current_bytes && x.vmem_index == -1,
       "the virtio-mem guest with blocks of 1 GiB: no change");
    is_code(&x, BM_REASON_BELOW_BLOCK, "  less than a block");
    ok(strstr(words(&pv, &x), "less than a virtio-mem block of 1 GiB") != NULL, "  in words: %s",
       words(&pv, &x));
    ok(pv.planned_inflate_bytes == 0, "  nothing planned");
    bm_plan_clear(&pv);
    bm_plan_clear(&pb);
}

/* The base memory is a floor of its own: virtio-mem unplugs only its own memory. */
static void test_vmem_base_is_a_floor(void)
{
    BmHost h = host(MEM_TOTAL, 2 * GiB);
    /* max 8 GiB: the policy's floor 2 GiB, below the base of 3 GiB */
    BmDomain v = vmem_guest("vm", 3 * GiB, 5 * GiB, 1 * GiB, 2 * MiB, 3500 * MiB);
    BmPlan p;
    BmDecision x = eval_one(&h, &v, NULL, P, 0, &p);
    is_u64(x.floor_bytes, 3 * GiB, "floor: the base memory");
    ok(x.action == BM_ACT_INFLATE && x.target_bytes >= 3 * GiB && x.vmem_requested_bytes <= 1 * GiB,
       "unplugged, never below the base (%s)", words(&p, &x));
    bm_plan_clear(&p);
    v = vmem_guest("vm", 3 * GiB, 5 * GiB, 0, 2 * MiB, 2500 * MiB);
    x = eval_one(&h, &v, NULL, P, 0, &p);
    ok(x.action == BM_ACT_NONE, "nothing plugged: nothing taken (%s)", words(&p, &x));
    bm_plan_clear(&p);
}

/* What a guest refused to unplug (an unplug of ours that stalled) is not asked again in the
 * episode, unless it plugged more since; the episode's end lifts it. */
static void test_vmem_refusal_not_asked_again(void)
{
    BmHost h = host(MEM_TOTAL, 2 * GiB);
    BmDomain v = vmem_guest("vm", 1 * GiB, 7 * GiB, 5 * GiB, 2 * MiB, 4 * GiB);
    BmLedger l;
    ledger_with_yield(&l, &v, 1, (BmYield){0});
    BmLedgerEntry *e = bm_ledger_entry(&l, v.uuid, NULL);
    e->vmem_refused_bytes = v.actual_bytes;
    e->vmem_refused_s = NOW - 10;
    BmPlan p;
    BmDecision x = eval_one(&h, &v, &l, P, 0, &p);
    ok(x.action == BM_ACT_NONE, "refused 10 s ago at what it has: not asked again");
    is_code(&x, BM_REASON_VMEM_REFUSED, "  the refusal");
    is_str(words(&p, &x), "its guest stopped unplugging virtio-mem at 6 GiB in this pressure "
           "episode: not asked lower (0 B idle above it)", "  in words");
    bm_plan_clear(&p);

    e->vmem_refused_bytes = v.actual_bytes - 256 * MiB; /* it plugged 256 MiB more since */
    x = eval_one(&h, &v, &l, P, 0, &p);
    ok(x.action == BM_ACT_INFLATE && x.current_bytes - x.target_bytes <= 256 * MiB &&
           x.cause.cap == BM_CAP_REFUSED,
       "plugged more since: asked down to where it stopped, no lower (%s)", words(&p, &x));
    bm_plan_clear(&p);

    e->vmem_refused_bytes = v.actual_bytes;
    e->vmem_refused_s = NOW - BM_GIVEN_HOLD_S;
    x = eval_one(&h, &v, &l, P, 0, &p);
    ok(x.action == BM_ACT_INFLATE && x.current_bytes - x.target_bytes > 256 * MiB,
       "the mark's hold-off passed: asked again");
    bm_plan_clear(&p);
    bm_ledger_clear(&l);
}

/* Which side moves a domain: the balloon where it is usable, virtio-mem where the domain has a
 * device and no usable balloon; a guest without a balloon sends no statistics and is never
 * taken from; a timer's pass does not unplug (no deflate-on-oom for virtio-mem). */
static void test_vmem_device_choice(void)
{
    BmHost h = host(MEM_TOTAL, 2 * GiB);
    BmDomain d[] = {vmem_guest("both", 1 * GiB, 7 * GiB, 7 * GiB, 2 * MiB, 5 * GiB),
                    vmem_guest("none", 1 * GiB, 7 * GiB, 7 * GiB, 2 * MiB, 5 * GiB),
                    guest("nothing", 8 * GiB, 8 * GiB, 5 * GiB)};
    d[0].balloon.vfio_hostdev = false; /* a usable balloon beside the device */
    d[0].vmem = d[0].vmem_auto = false;
    d[0].actual_bytes = d[0].balloon_actual_bytes = d[0].max_bytes;
    d[1].balloon.present = false;      /* memballoon none: no statistics */
    d[1].usable_bytes = d[1].unused_bytes = d[1].disk_caches_bytes = BM_ABSENT;
    d[1].available_bytes = d[1].last_update_s = BM_ABSENT;
    d[2].balloon.present = false;
    BmPlan p = eval(&h, d, 3, NULL, P);
    ok(!dec(&p, "both")->vmem && dec(&p, "both")->action == BM_ACT_INFLATE,
       "a usable balloon beside the device: the balloon moves");
    ok(dec(&p, "none")->vmem && dec(&p, "none")->action == BM_ACT_SKIP,
       "no balloon: virtio-mem, but without statistics never taken from");
    is_code(dec(&p, "none"), BM_REASON_NO_STATS, "  no statistics");
    is_code(dec(&p, "nothing"), BM_REASON_NO_BALLOON, "neither: no balloon");
    bm_plan_clear(&p);

    BmDomain v = vmem_guest("vm", 1 * GiB, 7 * GiB, 7 * GiB, 2 * MiB, 5 * GiB);
    v.balloon.autodeflate = BM_TRI_ON; /* its balloon's, not the device's */
    BmDecision x = eval_one(&h, &v, NULL, P, 60, &p);
    ok(x.action == BM_ACT_NONE && x.cause.code == BM_REASON_TIMER_SELF_DEFLATE,
       "a timer's pass does not unplug (timer_inflate deflate-on-oom)");
    bm_plan_clear(&p);
    x = eval_one(&h, &v, NULL, P, 0, &p);
    ok(x.action == BM_ACT_INFLATE, "  the agent's does");
    invariants(&p, "virtio-mem");
    bm_plan_clear(&p);
}

/* Several devices: an unplug goes through the one with most plugged, a plug through the one
 * with most room, one device a change. */
static void test_vmem_several_devices(void)
{
    BmHost h = host(MEM_TOTAL, 2 * GiB);
    BmDomain v = vmem_guest("vm", 1 * GiB, 3 * GiB, 1 * GiB, 2 * MiB, 3 * GiB);
    v.balloon.n_virtio_mem = 2;
    v.balloon.virtio_mem[1] = (BmVirtioMem){.size_bytes = 4 * GiB, .block_bytes = 4 * MiB,
                                            .requested_bytes = 3 * GiB, .current_bytes = 3 * GiB,
                                            .node = -1};
    v.max_bytes = 8 * GiB;
    v.actual_bytes = v.available_bytes = 5 * GiB;
    BmPlan p;
    BmDecision x = eval_one(&h, &v, NULL, P, 0, &p);
    ok(x.action == BM_ACT_INFLATE && x.vmem_index == 1 && x.vmem_block_bytes == 4 * MiB &&
           x.vmem_offset_bytes == 2 * GiB && x.vmem_offset_bytes + x.vmem_requested_bytes == x.target_bytes,
       "unplug: the second device, with most plugged (%s)", words(&p, &x));
    bm_plan_clear(&p);
    h = host(MEM_TOTAL, 10 * GiB);
    v.usable_bytes = 100 * MiB;
    x = eval_one(&h, &v, NULL, P, 0, &p);
    ok(x.action == BM_ACT_DEFLATE && x.vmem_index == 0 && x.vmem_offset_bytes == 4 * GiB &&
           x.vmem_offset_bytes + x.vmem_requested_bytes == x.target_bytes,
       "plug: the first device, with most room (%s)", words(&p, &x));
    bm_plan_clear(&p);
}

/* The key device overrides the choice: balloon keeps a virtio-mem guest on its balloon (one
 * that returns nothing: never inflated), virtio-mem moves a guest with a usable balloon
 * through its device, and a guest without one is left alone with the reason. */
static void test_vmem_device_key(void)
{
    BmHost h = host(MEM_TOTAL, 2 * GiB);
    BmDomain v = vmem_guest("vm", 1 * GiB, 7 * GiB, 7 * GiB, 128 * MiB, 5 * GiB);
    _cleanup_(bm_policy_freep) BmPolicy *pb = policy_with_domain("vm");
    BM_RULE_SET(&pb->domains[0], device, BM_DEVICE_BALLOON);
    BmPlan p;
    BmDecision x = eval_one(&h, &v, NULL, pb, 0, &p);
    ok(!x.vmem && x.current_bytes == 1 * GiB && x.action != BM_ACT_INFLATE,
       "device = balloon: its balloon's figures, never inflated (VFIO: %s)", words(&p, &x));
    bm_plan_clear(&p);

    /* a usable balloon beside the device: the balloon by the reading's choice */
    BmDomain b = vmem_guest("vm", 1 * GiB, 7 * GiB, 7 * GiB, 128 * MiB, 5 * GiB);
    b.balloon.vfio_hostdev = false;
    b.vmem = b.vmem_auto = false;
    b.actual_bytes = b.balloon_actual_bytes = b.max_bytes;
    b.balloon_max_bytes = b.max_bytes;
    _cleanup_(bm_policy_freep) BmPolicy *pv = policy_with_domain("vm");
    BM_RULE_SET(&pv->domains[0], device, BM_DEVICE_VIRTIO_MEM);
    b.actual_bytes = 6 * GiB; /* its balloon 2 GiB inflated: not the device's figure */
    b.balloon_actual_bytes = 6 * GiB;
    x = eval_one(&h, &b, NULL, pv, 0, &p);
    ok(x.vmem && x.current_bytes == 8 * GiB && x.action == BM_ACT_INFLATE && x.vmem_index == 0 &&
           (x.current_bytes - x.target_bytes) % (128 * MiB) == 0,
       "device = virtio-mem: moved through the device beside a usable balloon (%s)", words(&p, &x));
    bm_plan_clear(&p);

    BmDomain n = guest("vm", 8 * GiB, 8 * GiB, 5 * GiB);
    x = eval_one(&h, &n, NULL, pv, 0, &p);
    is_code(&x, BM_REASON_NO_VMEM, "device = virtio-mem without a device: left alone");
    is_str(words(&p, &x), "moved through virtio-mem, but no device whose sizes are known", "  in words");
    bm_plan_clear(&p);
}

/* A virtio-mem guest backed by huge pages (its balloon returns nothing: huge pages): what it
 * unplugs goes to the host's huge-page pool, not MemAvailable. */
static BmDomain pool_guest(const char *name, uint64_t plugged, uint64_t usable)
{
    BmDomain d = vmem_guest(name, 1 * GiB, 7 * GiB, plugged, 2 * MiB, usable);
    d.balloon.vfio_hostdev = false;
    d.balloon.hugepages = true;
    d.rss_bytes = 300 * MiB; /* huge pages are not in the QEMU RSS */
    return d;
}

/* The huge-page pool has a need of its own: a huge-page guest is never unplugged for
 * MemAvailable, only while the pool's free pages are below hugepages_free_below, by what the
 * pool lacks (less our unplugs in flight); a plug into it takes at most the pool's free pages
 * above that line. */
static void test_vmem_hugepage_pool(void)
{
    BmHost h = host(MEM_TOTAL, 2 * GiB); /* MemAvailable short */
    h.hugepages_total_bytes = 8 * GiB;
    h.hugepages_free_bytes = 512 * MiB;
    BmPlan p;
    BmDomain v = pool_guest("hp", 7 * GiB, 5 * GiB);
    BmDecision x = eval_one(&h, &v, NULL, P, 0, &p);
    ok(x.action == BM_ACT_NONE && p.mode == BM_HOST_RECLAIM, "MemAvailable short, the pool not "
       "watched (hugepages_free_below 0): a huge-page guest is not unplugged");
    is_code(&x, BM_REASON_POOL_SPARED, "  its unplug would go to the pool");
    ok(strstr(words(&p, &x), "goes to the host's huge-page pool, not MemAvailable") != NULL,
       "  in words: %s", words(&p, &x));
    bm_plan_clear(&p);

    _cleanup_(bm_policy_freep) BmPolicy *pp = bm_policy_new_default();
    pp->hugepages_free_below = (BmAmount){.is_percent = true, .permille = 250}; /* 2 GiB */
    h = host(MEM_TOTAL, 20 * GiB); /* MemAvailable comfortable */
    h.hugepages_total_bytes = 8 * GiB;
    h.hugepages_free_bytes = 1536 * MiB;
    BmDomain d[] = {pool_guest("hp", 7 * GiB, 5 * GiB),
                    vmem_guest("vfio", 1 * GiB, 7 * GiB, 7 * GiB, 2 * MiB, 5 * GiB)};
    p = eval(&h, d, 2, NULL, pp);
    const BmDecision *hp = dec(&p, "hp"), *vf = dec(&p, "vfio");
    is_u64(p.hugepages_need_bytes, 512 * MiB, "the pool lacks 512 MiB of 2 GiB free");
    ok(hp->action == BM_ACT_INFLATE && hp->current_bytes - hp->target_bytes == 512 * MiB &&
           hp->vmem_index == 0 && hp->expected_return_bytes == 0,
       "the huge-page guest unplugs what the pool lacks, none of it for MemAvailable (%s)",
       words(&p, hp));
    is_str(bm_reason_why(hp), "hugepage-pool", "  its record's why=");
    ok(vf->action != BM_ACT_INFLATE, "  a virtio-mem guest not on huge pages is not asked for the pool");
    bm_plan_clear(&p);

    /* its unplug of 384 MiB still in flight: only the rest is asked */
    BmLedger l;
    ledger_with_yield(&l, d, 1, (BmYield){0});
    BmLedgerEntry *e = bm_ledger_entry(&l, d[0].uuid, NULL);
    BmDomain two[] = {pool_guest("hp", 7 * GiB, 5 * GiB), pool_guest("hp2", 7 * GiB, 5 * GiB)};
    e->in_flight = true;
    e->last_target_bytes = two[0].actual_bytes - 384 * MiB;
    p = eval(&h, two, 2, &l, pp);
    ok(dec(&p, "hp")->action == BM_ACT_SKIP && p.hugepages_need_bytes == 128 * MiB &&
           dec(&p, "hp2")->current_bytes - dec(&p, "hp2")->target_bytes == 128 * MiB,
       "an unplug of 384 MiB in flight: the other asked for 128 MiB (%s)", words(&p, dec(&p, "hp2")));
    bm_plan_clear(&p);
    bm_ledger_clear(&l);

    /* a plug takes at most the pool's free pages above the line, in blocks */
    h = host(MEM_TOTAL, 10 * GiB);
    h.hugepages_total_bytes = 8 * GiB;
    h.hugepages_free_bytes = 2 * GiB + 65 * MiB;
    v = pool_guest("hp", 3 * GiB, 100 * MiB); /* short of memory */
    x = eval_one(&h, &v, NULL, pp, 0, &p);
    ok(x.action == BM_ACT_DEFLATE && x.target_bytes - x.current_bytes == 64 * MiB &&
           x.vmem_requested_bytes == 3 * GiB + 64 * MiB,
       "short, the pool 65 MiB above its line: given 64 MiB, whole blocks (%s)", words(&p, &x));
    bm_plan_clear(&p);
    h.hugepages_free_bytes = 2 * GiB + 1 * MiB;
    x = eval_one(&h, &v, NULL, pp, 0, &p);
    ok(x.action == BM_ACT_NONE && x.target_bytes == x.current_bytes, "no block above the line: nothing plugged");
    is_code(&x, BM_REASON_POOL_EMPTY, "  the pool has none for it");
    ok(strstr(words(&p, &x), "huge-page pool has 2 GiB free") != NULL, "  in words: %s", words(&p, &x));
    bm_plan_clear(&p);
}

int main(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *pol = bm_policy_new_default();
    P = pol;
    test_manual_floor();
    test_comfortable_host_gives_back();
    test_pressure_reclaims_from_idle();
    test_shares_weigh_the_reclaim();
    test_stale_or_missing_stats_never_inflate();
    test_pressured_guest_is_deflated();
    test_short_guest_gets_memory_back();
    test_deadband_and_hysteresis();
    test_floors_and_min_guarantee();
    test_absolute_minimum();
    test_skips();
    test_reason_words();
    test_psi_pressure_alone();
    test_bad_host_reading();
    test_multi_pass_reclaim_converges();
    test_yield_learn();
    test_never_touched_guest_is_probed_then_left();
    test_reclaim_capped_by_backed_memory();
    test_partial_yield_counts_half();
    test_short_guest_deflated_while_reclaiming();
    test_unmet_need_reported_not_squeezed();
    test_release_gives_back_to_every_ballooned_guest();
    test_no_return_domains_skipped();
    test_guest_in_need_between_passes();
    test_growing_guest_given_room_ahead();
    test_memory_given_up_under_an_inflate_is_not_counted();
    test_qemu_overhead_taken_off_backed_memory();
    test_timer_inflates_only_guests_that_deflate_themselves();
    test_timer_paces_for_its_interval();
    test_inflate_leaves_a_margin_above_keep_free();
    test_no_second_reversal_in_a_pressure_episode();
    test_reporting_guest_reclaims_what_reporting_cannot();
    test_backed_free_memory_taken_within_two_passes();
    test_timer_keeps_the_usage_peak_across_passes();
    test_unbacked_free_memory_gone_through();
    test_backed_free_memory_first();
    test_unbacked_free_against_the_guests_own_total();
    test_no_inflate_from_statistics_older_than_the_change();
    test_stale_balloon_reading_corrected();
    test_free_memory_taken_before_page_cache();
    test_hot_cache_taken_last();
    test_idle_guests_cache_before_busy_guests();
    test_busy_not_read_over_a_balloon_move();
    test_busy_unbacked_near_oom();
    test_inflates_in_flight_count_for_the_need();
    test_busy_guest_spared_while_idle_ones_suffice();
    test_free_memory_lesson_keeps_the_cache_in_reach();
    test_inflate_in_flight_that_hurts_stops();
    test_busy_mark_and_margin();
    test_rates_over_the_readings_clock();
    test_refaulting_guest_given_back();
    test_refaulting_guest_kept_near_oom();
    test_inflates_that_cost_or_give_nothing_given_back();
    test_oom_kill_deflates_at_once_and_holds();
    test_oom_kill_paced_near_host_oom();
    test_stalls_and_direct_reclaim_stop_inflating();
    test_vmem_unplug_rounds_down();
    test_vmem_give_rounds_up();
    test_vmem_base_is_a_floor();
    test_vmem_refusal_not_asked_again();
    test_vmem_device_choice();
    test_vmem_several_devices();
    test_vmem_device_key();
    test_vmem_hugepage_pool();
    return tap_done();
}
