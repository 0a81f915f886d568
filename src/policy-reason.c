/* The words of a decision (made from its structured reason, BmReason) and of the host's mode
 * (BmHostReason), and the one word of a change record (why=): the one place policy-eval.c's
 * plan becomes prose, called where it is printed or logged; pure. */
#include "policy-eval.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "size.h"
#include "util.h"
#include "yield.h"

#define MiB (1024ull * 1024)
#define SZ(bytes) BM_SZ(bytes)

/* A guest-reported rate in bytes as a size: 0 when unknown, bounded. */
static uint64_t rate_bytes(double r)
{
    return r < 0 ? 0 : r < 0x1p64 ? (uint64_t)r : BM_ABSENT - 1;
}

static const char *cap_name(BmTakeCap cap)
{
    static const char *const names[] = {
        [BM_CAP_MAX_STEP] = "max_step", [BM_CAP_FLOOR] = "floor", [BM_CAP_KEEP_FREE] = "keep_free",
        [BM_CAP_BACKED] = "backed memory", [BM_CAP_PROBE] = "a first, probing inflate",
        [BM_CAP_REFUSED] = "what its guest refused to unplug"};
    return (size_t)cap < BM_ARRAY_SIZE(names) && names[cap] ? names[cap] : "";
}

/* A domain not managed in this pass, or NULL when x was managed. */
static const char *skip_text(const BmDecision *x, char *buf, size_t n)
{
    const BmReason *c = &x->cause;
    switch (c->code) {
    case BM_REASON_NOT_RUNNING: return "not running";
    case BM_REASON_PAUSED:
        snprintf(buf, n, "%s: its guest cannot move the balloon", bm_snapshot_run_state_name(c->run_state));
        return buf;
    case BM_REASON_NO_BALLOON: return "no balloon device";
    case BM_REASON_NO_VMEM: return "moved through virtio-mem, but no device whose sizes are known";
    case BM_REASON_IN_FLIGHT: return "a change is still in flight";
    case BM_REASON_UNRESPONSIVE:
        return "unresponsive: its last change stalled; not re-targeted until its balloon moves";
    case BM_REASON_EXCLUDED: return "excluded by policy";
    case BM_REASON_SIZE_UNKNOWN: return "balloon size unknown";
    case BM_REASON_RETURNS_NOTHING:
        snprintf(buf, n, "ballooning returns nothing to the host: %s", c->no_return);
        return buf;
    case BM_REASON_NO_STATS: return "no guest memory stats: never inflated";
    case BM_REASON_STALE:
        snprintf(buf, n, "guest stats stale (%" PRIu64 " s old > max_stats_age %u s): never inflated",
            x->pressure.stats_age_s, c->max_stats_age_s);
        return buf;
    default: return NULL;
    }
}

/* Giving back what our inflates of the episode took. */
static void give_back_text(const BmDecision *x, char *buf, size_t n)
{
    const BmGuestPressure *gp = &x->pressure;
    const BmReason *c = &x->cause;
    if (c->code == BM_REASON_CACHE_REFAULT) {
        char base[32] = "none";
        if (gp->read_base_rate >= 0)
            snprintf(base, sizeof(base), "%s/s", SZ((uint64_t)gp->read_base_rate));
        snprintf(buf, n,
            "page cache hot: its disk reads rose to %s/s (%s before our inflate) after %s was "
            "taken in this episode; give it back, its cache taken last until the host is "
            "comfortable",
            SZ((uint64_t)gp->disk_read_rate), base, SZ(gp->taken_bytes));
    } else {
        snprintf(buf, n,
            "our inflates of this episode took %s and its last gave the host back %s of %s "
            "(QEMU RSS): give it back",
            SZ(gp->taken_bytes), SZ(c->last_returned_bytes), SZ(c->last_inflated_bytes));
    }
}

/* A guest given memory after an OOM kill in it. */
static void oom_text(const BmPlan *plan, const BmDecision *x, char *buf, size_t n)
{
    const BmGuestPressure *gp = &x->pressure;
    const BmReason *c = &x->cause;
    char seen[64];
    if (bm_present(gp->oom_kills) && gp->oom_kills > 0)
        snprintf(seen, sizeof(seen), "%" PRIu64 " since the previous reading", gp->oom_kills);
    else
        snprintf(seen, sizeof(seen), "seen %" PRIu64 " s ago", gp->oom_ago_s);
    if (c->want_bytes == 0)
        snprintf(buf, n,
            "OOM kill in the guest (%s): at its maximum; not inflated again in this pressure episode",
            seen);
    else if (c->amount_bytes == 0)
        snprintf(buf, n, "OOM kill in the guest (%s): %s below its maximum, but the host has no budget to give",
            seen, SZ(c->want_bytes));
    else if (plan->mode == BM_HOST_RECLAIM && c->amount_bytes + MiB <= x->max_bytes - x->current_bytes)
        snprintf(buf, n,
            "OOM kill in the guest (%s): give %s now, %s below its maximum: the host reclaims with "
            "%s above its own OOM line (half of reclaim_below), paced by that or max_step (%s); "
            "not inflated again in this pressure episode", seen, SZ(c->amount_bytes),
            SZ(x->max_bytes - x->current_bytes), SZ(plan->oom_margin_bytes), SZ(c->step_bytes));
    else
        snprintf(buf, n,
            "OOM kill in the guest (%s): give %s at once%s%s; not inflated again in this pressure "
            "episode", seen, SZ(c->amount_bytes),
            c->amount_bytes + MiB > c->want_bytes ? ", to its maximum" : " (host budget)",
            plan->mode == BM_HOST_RECLAIM ? " although the host is reclaiming" : "");
}

/* A guest under pressure, starving, short of memory or growing: given memory. */
static void give_text(const BmPlan *plan, const BmDecision *x, char *buf, size_t n)
{
    const BmGuestPressure *gp = &x->pressure;
    const BmReason *c = &x->cause;
    bool pressed = c->code == BM_REASON_UNDER_PRESSURE || c->code == BM_REASON_STARVING;
    const char *why = pressed                      ? "guest under pressure"
                      : c->code == BM_REASON_SHORT ? "guest short of memory"
                                                   : "guest's use grows";
    char detail[160];
    if (c->code == BM_REASON_GROWING)
        snprintf(detail, sizeof(detail), "+%s/s; usable %s, keep_free %s, %d s ahead",
            SZ((uint64_t)gp->growth_rate), SZ(gp->headroom_bytes), SZ(c->keep_free_bytes), c->ahead_s);
    else if (c->code == BM_REASON_STARVING)
        snprintf(detail, sizeof(detail), "allocation stalls %.1f/s, direct reclaim %s/s, major faults %.0f/s",
            gp->alloc_stall_rate < 0 ? 0 : gp->alloc_stall_rate, SZ(rate_bytes(gp->direct_reclaim_rate)),
            gp->major_fault_rate < 0 ? 0 : gp->major_fault_rate);
    else if (pressed)
        snprintf(detail, sizeof(detail), "major faults %.0f/s, swap-in %s/s",
            gp->major_fault_rate < 0 ? 0 : gp->major_fault_rate, SZ(rate_bytes(gp->swap_in_rate)));
    else
        snprintf(detail, sizeof(detail), "usable %s < keep_free %s", SZ(gp->headroom_bytes),
            SZ(c->keep_free_bytes));
    if (pressed && gp->taken_bytes > 0) {
        size_t len = strlen(detail);
        snprintf(detail + len, sizeof(detail) - len, " after %s taken: cache hot", SZ(gp->taken_bytes));
    }
    uint64_t amount = c->amount_bytes;
    if (c->want_bytes == 0)
        snprintf(buf, n, "%s (%s), already at its maximum", why, detail);
    else if (amount == 0)
        snprintf(buf, n, "%s (%s), but the host has no budget to give", why, detail);
    else if (plan->mode == BM_HOST_RECLAIM)
        snprintf(buf, n, "%s (%s): give %s%s although the host is reclaiming (taken from the others)",
            why, detail, SZ(amount), amount == c->step_bytes ? " (max_step)" : "");
    else
        snprintf(buf, n, "%s (%s): give %s%s", why, detail, SZ(amount),
            amount < c->want_bytes ? " (host budget)" : amount == c->step_bytes ? " (max_step)" : "");
}

static void release_text(const BmDecision *x, char *buf, size_t n)
{
    const BmReason *c = &x->cause;
    if (c->amount_bytes == 0)
        snprintf(buf, n, "host comfortable; %s below its maximum, but no memory above release_above to give",
            SZ(x->max_bytes - x->current_bytes));
    else
        snprintf(buf, n, "host comfortable: give back %s toward its maximum %s%s", SZ(c->amount_bytes),
            SZ(x->max_bytes),
            c->amount_bytes < c->want_bytes ? " (memory above release_above)"
            : c->amount_bytes == c->step_bytes ? " (max_step)"
                                               : "");
}

/* An inflate: how much, of what (free memory, page cache, a hot one), and what capped it. */
static void take_text(const BmPlan *plan, const BmDecision *x, char *buf, size_t n)
{
    const BmReason *c = &x->cause;
    uint64_t amount = c->amount_bytes, free = x->take_free_bytes;
    char cap[48] = "", parts[224];
    if (amount + MiB > c->want_bytes)
        snprintf(cap, sizeof(cap), " (capped by %s)", cap_name(c->cap));
    snprintf(parts, sizeof(parts), "%s%s%s%s%s", free ? SZ(free) : "", free ? " free" : "",
        free && amount > free ? ", " : "", amount > free ? SZ(amount - free) : "",
        x->take_hot_bytes ? " of a HOT page cache: the host is near its own OOM "
                            "(MemAvailable below half of reclaim_below)"
        : x->take_cache_bytes && c->busy && c->bite_bytes
            ? " page cache of a busy guest (vCPUs over 20%: after what idle guests give), a bite "
              "a pass, each followed by the read check"
        : x->take_cache_bytes && c->busy ? " page cache of a busy guest (vCPUs over 20%: after "
                                           "idle guests' caches), at once: the host is near its "
                                           "own OOM"
        : x->take_cache_bytes ? " page cache"
                              : "");
    char back[64] = "";
    if (x->expected_return_bytes + MiB < amount)
        snprintf(back, sizeof(back), "; about %s of it back to the host", SZ(x->expected_return_bytes));
    snprintf(buf, n, "host needs %s; take %s of %s idle%s: %s%s", SZ(plan->need_bytes), SZ(amount),
        SZ(x->idle_bytes), cap, parts, back);
}

/* "its vCPUs at 85% of a CPU", or where this reading did not find them busy (too close to the
 * last, its balloon moved, CPU time unknown) "busy by a reading of the last 60 s". */
static const char *busy_text(const BmGuestPressure *gp, char *buf, size_t n)
{
    if (gp->cpu_rate >= BM_BUSY_CPU_SHARE)
        snprintf(buf, n, "its vCPUs at %.0f%% of a CPU", gp->cpu_rate * 100);
    else
        snprintf(buf, n, "busy by a reading of the last %d s", BM_BUSY_HOLD_S);
    return buf;
}

/* A domain left as it is although the host needs memory: what it would give back, or that it
 * has nothing to give; or one that is fine. */
static void yield_text(const BmPlan *plan, const BmDecision *x, char *buf, size_t n)
{
    const BmReason *c = &x->cause;
    const BmGuestPressure *gp = &x->pressure;
    char busy[64];
    switch (c->code) {
    case BM_REASON_NO_RETURN:
        snprintf(buf, n, "not inflated: ballooning returns nothing to the host: %s", c->no_return);
        break;
    case BM_REASON_RETURNED_NOTHING:
        snprintf(buf, n,
            "not inflated: its last inflate of %s gave the host back %s (QEMU RSS); "
            "again once its RSS grows by %s",
            SZ(c->last_inflated_bytes), SZ(c->last_returned_bytes), SZ(BM_YIELD_RETRY_GROWTH_BYTES));
        break;
    case BM_REASON_UNBACKED:
        snprintf(buf, n,
            "not inflated: %s idle, but %s of its free memory is not backed by the host "
            "(QEMU RSS %s, guest uses %s%s): an inflate would give the host next to nothing back",
            SZ(x->idle_bytes), SZ(c->skip_bytes), SZ(x->rss_bytes), SZ(gp->used_bytes),
            c->reports ? ", free page reporting on" : "");
        break;
    case BM_REASON_BUSY_UNBACKED:
        snprintf(buf, n,
            "not inflated: a busy guest (%s) whose %s of page cache "
            "lies beyond %s of free memory the host does not back: its work would pay for an "
            "inflate that returns less than half of it (taken where the cache beyond is as "
            "large)",
            busy_text(gp, busy, sizeof(busy)),
            SZ(x->idle_bytes > c->skip_bytes ? x->idle_bytes - c->skip_bytes : 0), SZ(c->skip_bytes));
        break;
    case BM_REASON_NOT_BACKED:
        snprintf(buf, n,
            "not inflated: %s idle, but the host backs none of it (QEMU RSS %s, guest uses "
            "%s%s%s%s, QEMU's own about %s)",
            SZ(x->idle_bytes), SZ(x->rss_bytes), SZ(gp->used_bytes),
            c->used_lately_bytes ? " and used " : "",
            c->used_lately_bytes ? SZ(c->used_lately_bytes) : "",
            c->used_lately_bytes ? " more lately" : "", SZ(plan->qemu_overhead_bytes));
        break;
    case BM_REASON_VMEM_REFUSED:
        snprintf(buf, n,
            "its guest stopped unplugging virtio-mem at %s in this pressure episode: not asked "
            "lower (%s idle above it)",
            SZ(c->refused_bytes), SZ(x->idle_bytes));
        break;
    case BM_REASON_POOL_SPARED:
        snprintf(buf, n,
            "backed by huge pages: what it unplugs goes to the host's huge-page pool, not "
            "MemAvailable; the pool has %s free (hugepages_free_below %s; %s idle)",
            SZ(plan->hugepages_free_bytes), SZ(plan->hugepages_below_bytes), SZ(x->idle_bytes));
        break;
    case BM_REASON_POOL_EMPTY:
        snprintf(buf, n,
            "to be given %s, but backed by huge pages and the host's huge-page pool has %s free "
            "(hugepages_free_below %s): no block to plug",
            SZ(c->asked_bytes), SZ(plan->hugepages_free_bytes), SZ(plan->hugepages_below_bytes));
        break;
    case BM_REASON_BELOW_BLOCK:
        snprintf(buf, n, "the change of %s is less than a virtio-mem block of %s: none",
            SZ(c->asked_bytes), SZ(c->block_bytes));
        break;
    case BM_REASON_NOTHING_TO_TAKE:
        snprintf(buf, n, "nothing to take: %s idle above keep_free %s and floor %s", SZ(x->idle_bytes),
            SZ(c->keep_free_bytes), SZ(x->floor_bytes));
        break;
    case BM_REASON_FINE:
        snprintf(buf, n, "fine: usable %s >= keep_free %s", SZ(gp->headroom_bytes), SZ(c->keep_free_bytes));
        break;
    default: snprintf(buf, n, "%s", ""); break;
    }
}

/* A domain left as it is although it has idle memory, or is growing. */
static void none_text(const BmPlan *plan, const BmDecision *x, char *buf, size_t n)
{
    const BmReason *c = &x->cause;
    const BmGuestPressure *gp = &x->pressure;
    char busy[64];
    switch (c->code) {
    case BM_REASON_NOT_NEEDED:
        snprintf(buf, n, "host not under pressure; %s idle above keep_free %s", SZ(x->idle_bytes),
            SZ(c->keep_free_bytes));
        break;
    case BM_REASON_HOT_SPARED:
        snprintf(buf, n,
            "host needs %s; its page cache is hot (%s idle): spared while MemAvailable stays "
            "above half of reclaim_below",
            SZ(plan->need_bytes), SZ(x->idle_bytes));
        break;
    case BM_REASON_BUSY_SPARED:
        snprintf(buf, n,
            "host needs %s; a busy guest (%s: an inflate costs it its "
            "work, %s idle): spared while %s",
            SZ(plan->need_bytes), busy_text(gp, busy, sizeof(busy)), SZ(x->idle_bytes),
            plan->in_flight_bytes > 0 ? "inflates of ours are in flight"
                                      : "idle guests give more over the coming passes");
        break;
    case BM_REASON_NOT_ASKED:
        snprintf(buf, n, "host needs %s, none asked of this guest (%s idle, weight by shares %u)",
            SZ(plan->need_bytes), SZ(x->idle_bytes), c->shares);
        break;
    case BM_REASON_ABOVE_MAX: snprintf(buf, n, "balloon above the maximum: left alone"); break;
    case BM_REASON_GROWS_AT_MAX:
        snprintf(buf, n, "its use grows (+%s/s), at its maximum", SZ((uint64_t)gp->growth_rate));
        break;
    case BM_REASON_GROWS:
        snprintf(buf, n, "its use grows (+%s/s): not inflated; usable %s lasts beyond %d s above keep_free %s",
            SZ((uint64_t)gp->growth_rate), SZ(gp->headroom_bytes), c->ahead_s, SZ(c->keep_free_bytes));
        break;
    case BM_REASON_KEPT_HOT:
        snprintf(buf, n,
            "its page cache is hot (%s after %s was taken in this episode): kept while the host %s",
            gp->refaulting ? "its disk reads rose" : "it faults or stalls", SZ(gp->taken_bytes),
            plan->hot_cache_allowed ? "is near its own OOM (MemAvailable below half of reclaim_below)"
                                    : "reclaims: given back, it would put the host near its own OOM");
        break;
    case BM_REASON_STATS_PREDATE:
        snprintf(buf, n,
            "not inflated this pass: its guest statistics predate its last change (%s idle by "
            "them); the next ones follow it",
            SZ(x->idle_bytes));
        break;
    case BM_REASON_GIVEN:
        snprintf(buf, n,
            "not inflated again in this pressure episode: its balloon was raised %" PRIu64
            " s ago (no second reversal; %s idle)",
            c->given_ago_s, SZ(x->idle_bytes));
        break;
    case BM_REASON_TIMER_NEVER:
        snprintf(buf, n, "not inflated by the timer: timer_inflate never (%s idle)", SZ(x->idle_bytes));
        break;
    case BM_REASON_TIMER_SELF_DEFLATE:
        snprintf(buf, n,
            "not inflated by the timer: %s idle, but it cannot deflate itself (no deflate-on-oom) "
            "and nothing looks at it for %" PRIu64 " s (timer_interval)",
            SZ(x->idle_bytes), c->horizon_s);
        break;
    default: yield_text(plan, x, buf, n); break;
    }
}

void bm_reason_format(const BmPlan *plan, const BmDecision *x, char *buf, size_t n)
{
    const char *skip = skip_text(x, buf, n);
    if (skip) {
        if (skip != buf)
            snprintf(buf, n, "%s", skip);
        return;
    }
    switch (x->cause.code) {
    case BM_REASON_FLOOR: snprintf(buf, n, "below its floor %s: raised to it", SZ(x->floor_bytes)); break;
    case BM_REASON_CACHE_REFAULT:
    case BM_REASON_GAVE_NOTHING: give_back_text(x, buf, n); break;
    case BM_REASON_OOM_KILL: oom_text(plan, x, buf, n); break;
    case BM_REASON_UNDER_PRESSURE:
    case BM_REASON_STARVING:
    case BM_REASON_SHORT:
    case BM_REASON_GROWING: give_text(plan, x, buf, n); break;
    case BM_REASON_RELEASE: release_text(x, buf, n); break;
    case BM_REASON_TAKE: take_text(plan, x, buf, n); break;
    case BM_REASON_POOL_TAKE:
        snprintf(buf, n,
            "the host's huge-page pool has %s free < hugepages_free_below %s: unplug %s of %s "
            "idle (backed by huge pages: it goes to the pool)",
            SZ(plan->hugepages_free_bytes), SZ(plan->hugepages_below_bytes),
            SZ(x->current_bytes - x->target_bytes), SZ(x->idle_bytes));
        break;
    default: none_text(plan, x, buf, n); break;
    }
}

/* Appends to buf (n bytes) what fmt says, where there is room. */
static void add(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *buf, size_t n, const char *fmt, ...)
{
    size_t len = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, n - len, fmt, ap);
    va_end(ap);
}

/* The words of the mode's rule. */
static void mode_text(const BmHostReason *c, char *buf, size_t n)
{
    switch (c->code) {
    case BM_MODE_WHY_BELOW:
        snprintf(buf, n, "host MemAvailable %s < reclaim_below %s", SZ(c->available_bytes),
                 SZ(c->reclaim_below_bytes));
        break;
    case BM_MODE_WHY_PSI:
        snprintf(buf, n, "host memory PSI some avg10 %.1f%% > psi_reclaim_above %.1f%%",
                 c->psi_some_avg10, c->psi_reclaim_above);
        break;
    case BM_MODE_WHY_STILL:
        snprintf(buf, n, "host still reclaiming: MemAvailable %s < target_available %s",
                 SZ(c->available_bytes), SZ(c->target_bytes));
        break;
    case BM_MODE_WHY_COMFORTABLE:
        snprintf(buf, n, "host comfortable: MemAvailable %s > release_above %s",
                 SZ(c->available_bytes), SZ(c->release_above_bytes));
        break;
    case BM_MODE_WHY_HOLDING:
        snprintf(buf, n, "host holding: MemAvailable %s between reclaim_below %s and release_above %s%s",
                 SZ(c->available_bytes), SZ(c->reclaim_below_bytes), SZ(c->release_above_bytes),
                 c->psi_calm ? "" : " (PSI not calm)");
        break;
    }
}

void bm_host_reason_format(const BmPlan *plan, char *buf, size_t n)
{
    const BmHostReason *c = &plan->cause;
    buf[0] = '\0';
    mode_text(c, buf, n);
    if (plan->mode != BM_HOST_RECLAIM)
        return;
    if (plan->in_flight_bytes >= MiB)
        add(buf, n, "; %s to come from inflates in flight", SZ(plan->in_flight_bytes));
    if (plan->busy_deferred)
        add(buf, n, "; busy guests spared (%s of host memory): %s", SZ(plan->busy_spared_bytes),
            plan->in_flight_bytes > 0 ? "inflates are in flight, what they give is seen first"
                                      : "idle guests give more over the coming passes");
    if (c->hot_spared_bytes >= MiB)
        add(buf, n, "; %s of hot page cache spared (taken only below half of reclaim_below)",
            SZ(c->hot_spared_bytes));
    /* what the planned inflates are in balloon and in host bytes, said where the two differ:
     * free memory the host does not back, or a partial yield */
    uint64_t back = 0;
    for (size_t i = 0; i < plan->n_decisions; i++)
        back += plan->decisions[i].expected_return_bytes;
    if (plan->planned_inflate_bytes >= MiB && back + 32 * MiB < plan->planned_inflate_bytes)
        add(buf, n, "; planned %s of balloon for about %s of host memory",
            SZ(plan->planned_inflate_bytes), SZ(back));
    if (plan->unmet_bytes < MiB)
        return;
    static const char *const what[BM_HELD_COUNT] = {
        [BM_HELD_GROWING] = "growing",
        [BM_HELD_GIVEN] = "given memory in this episode",
        [BM_HELD_HOT] = "hot page cache",
        [BM_HELD_BUSY_UNBACKED] = "busy, behind unbacked free memory",
        [BM_HELD_UNBACKED] = "not backed by the host",
        [BM_HELD_STALE] = "statistics stale or older than a change",
        [BM_HELD_TIMER] = "left to the timer",
    };
    char parts[256] = "";
    for (int h = 0; h < BM_HELD_COUNT; h++)
        if (c->held_bytes[h] >= MiB)
            add(parts, sizeof(parts), "%s%s %s", parts[0] ? ", " : "", what[h], SZ(c->held_bytes[h]));
    if (parts[0])
        add(buf, n, "; %s of host memory unmet: the guests' idle memory is held back (%s of guest memory)",
            SZ(plan->unmet_bytes), parts);
    else
        add(buf, n, "; %s of host memory unmet: the guests have nothing left above keep_free and their floors",
            SZ(plan->unmet_bytes));
}

const char *bm_reason_why(const BmDecision *x)
{
    if (x->action != BM_ACT_INFLATE && x->action != BM_ACT_DEFLATE)
        return NULL;
    switch (x->cause.code) {
    case BM_REASON_TAKE:
        return x->take_hot_bytes ? "hot-page-cache" : x->take_cache_bytes ? "page-cache" : "free";
    case BM_REASON_FLOOR: return "floor";
    case BM_REASON_CACHE_REFAULT: return "cache-refault";
    case BM_REASON_GAVE_NOTHING: return "returns-nothing";
    case BM_REASON_OOM_KILL: return "oom-kill";
    case BM_REASON_UNDER_PRESSURE: return "under-pressure";
    case BM_REASON_STARVING: return "starving";
    case BM_REASON_SHORT: return "short-of-memory";
    case BM_REASON_GROWING: return "growing";
    case BM_REASON_RELEASE: return "release";
    case BM_REASON_POOL_TAKE: return "hugepage-pool";
    default: return NULL;
    }
}

const char *bm_reason_rule(const BmDecision *x)
{
    const char *why = bm_reason_why(x);
    if (why)
        return why;
    static const char *const names[] = {
        [BM_REASON_NONE] = "none",
        [BM_REASON_NOT_RUNNING] = "not-running",
        [BM_REASON_PAUSED] = "paused",
        [BM_REASON_NO_BALLOON] = "no-balloon",
        [BM_REASON_NO_VMEM] = "no-virtio-mem",
        [BM_REASON_IN_FLIGHT] = "in-flight",
        [BM_REASON_UNRESPONSIVE] = "unresponsive",
        [BM_REASON_EXCLUDED] = "excluded",
        [BM_REASON_SIZE_UNKNOWN] = "size-unknown",
        [BM_REASON_RETURNS_NOTHING] = "no-return",
        [BM_REASON_NO_STATS] = "no-stats",
        [BM_REASON_STALE] = "stale",
        [BM_REASON_FLOOR] = "floor",
        [BM_REASON_CACHE_REFAULT] = "cache-refault",
        [BM_REASON_GAVE_NOTHING] = "returns-nothing",
        [BM_REASON_OOM_KILL] = "oom-kill",
        [BM_REASON_UNDER_PRESSURE] = "under-pressure",
        [BM_REASON_STARVING] = "starving",
        [BM_REASON_SHORT] = "short-of-memory",
        [BM_REASON_GROWING] = "growing",
        [BM_REASON_RELEASE] = "release",
        [BM_REASON_TAKE] = "take",
        [BM_REASON_NOT_NEEDED] = "not-needed",
        [BM_REASON_HOT_SPARED] = "hot-spared",
        [BM_REASON_BUSY_SPARED] = "busy-spared",
        [BM_REASON_NOT_ASKED] = "not-asked",
        [BM_REASON_ABOVE_MAX] = "above-max",
        [BM_REASON_GROWS_AT_MAX] = "grows-at-max",
        [BM_REASON_GROWS] = "grows",
        [BM_REASON_KEPT_HOT] = "kept-hot",
        [BM_REASON_STATS_PREDATE] = "stats-predate",
        [BM_REASON_GIVEN] = "given",
        [BM_REASON_TIMER_NEVER] = "timer-never",
        [BM_REASON_TIMER_SELF_DEFLATE] = "timer-no-deflate-on-oom",
        [BM_REASON_NO_RETURN] = "no-return",
        [BM_REASON_RETURNED_NOTHING] = "returned-nothing",
        [BM_REASON_UNBACKED] = "unbacked",
        [BM_REASON_BUSY_UNBACKED] = "busy-unbacked",
        [BM_REASON_NOT_BACKED] = "not-backed",
        [BM_REASON_NOTHING_TO_TAKE] = "nothing-to-take",
        [BM_REASON_FINE] = "fine",
        [BM_REASON_VMEM_REFUSED] = "virtio-mem-refused",
        [BM_REASON_BELOW_BLOCK] = "below-block",
        [BM_REASON_POOL_TAKE] = "hugepage-pool",
        [BM_REASON_POOL_SPARED] = "hugepage-pool-spared",
        [BM_REASON_POOL_EMPTY] = "hugepage-pool-empty",
    };
    size_t c = (size_t)x->cause.code;
    return c < BM_ARRAY_SIZE(names) && names[c] ? names[c] : "none";
}
