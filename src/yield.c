#include "yield.h"

#include "util.h"

bool bm_yield_learn(BmYield *y, uint64_t from_bytes, uint64_t reached_bytes, uint64_t rss_before,
                    uint64_t rss_after, bool free_only)
{
    if (!bm_present(from_bytes) || !bm_present(reached_bytes) || reached_bytes >= from_bytes ||
        !bm_present(rss_before) || !bm_present(rss_after))
        return false;
    uint64_t inflated = from_bytes - reached_bytes;
    if (inflated < BM_YIELD_MIN_SAMPLE_BYTES)
        return false;
    uint64_t returned = rss_before > rss_after ? rss_before - rss_after : 0;
    if (returned > inflated)
        returned = inflated; /* the guest freed more meanwhile: count no more than the balloon */
    bm_count_add(&y->inflated_bytes, inflated);
    bm_count_add(&y->returned_bytes, returned);
    y->last_inflated_bytes = inflated;
    y->last_returned_bytes = returned;
    bool nothing = returned * 1000 < inflated * BM_YIELD_NOTHING_PERMILLE;
    if (free_only) {
        /* free memory that returned nothing was never backed; the page cache beyond it is */
        y->free_unbacked = nothing;
        y->free_unbacked_rss_bytes = nothing ? rss_after : 0;
        if (!nothing)
            y->nothing = false, y->nothing_rss_bytes = 0;
    } else {
        y->nothing = nothing;
        y->nothing_rss_bytes = nothing ? rss_after : 0;
    }
    return true;
}

/* Whether a mark set at the QEMU RSS mark_rss still holds at rss (BM_ABSENT: it holds). */
static bool mark_holds(bool mark, uint64_t mark_rss, uint64_t rss)
{
    if (!mark)
        return false;
    if (!bm_present(rss))
        return true;
    return rss < mark_rss + BM_YIELD_RETRY_GROWTH_BYTES;
}

bool bm_yield_returns_nothing(const BmYield *y, uint64_t rss_bytes)
{
    return mark_holds(y->nothing, y->nothing_rss_bytes, rss_bytes);
}

bool bm_yield_free_unbacked(const BmYield *y, uint64_t rss_bytes)
{
    return mark_holds(y->free_unbacked, y->free_unbacked_rss_bytes, rss_bytes);
}

unsigned bm_yield_permille(const BmYield *y)
{
    if (y->inflated_bytes == 0)
        return 1000;
    uint64_t r = y->returned_bytes > y->inflated_bytes ? y->inflated_bytes : y->returned_bytes;
    return (unsigned)((long double)r * 1000 / (long double)y->inflated_bytes);
}

uint64_t bm_yield_backed_free(uint64_t rss_bytes, uint64_t used_bytes)
{
    /* an RSS at or below what the guest uses means its memory is swapped out or shared on the
     * host (or the driver makes the numbers up): the RSS tells nothing about its free pages */
    if (!bm_present(rss_bytes) || !bm_present(used_bytes) || rss_bytes <= used_bytes)
        return BM_ABSENT;
    return rss_bytes - used_bytes;
}

uint64_t bm_yield_backed_free_net(uint64_t rss_bytes, uint64_t used_bytes, uint64_t overhead_bytes)
{
    uint64_t v = bm_yield_backed_free(rss_bytes, used_bytes);
    if (!bm_present(v))
        return BM_ABSENT;
    return v > overhead_bytes ? v - overhead_bytes : 0;
}

void bm_yield_overhead_add(BmYieldOverhead *o, uint64_t rss_bytes, uint64_t used_bytes)
{
    uint64_t v = bm_yield_backed_free(rss_bytes, used_bytes);
    if (!bm_present(v))
        return;
    if (o->n == 0 || v < o->min_bytes)
        o->min_bytes = v;
    o->n++;
}

uint64_t bm_yield_overhead(const BmYieldOverhead *o)
{
    if (o->n < 2)
        return 0;
    return o->min_bytes < BM_YIELD_OVERHEAD_MAX_BYTES ? o->min_bytes : BM_YIELD_OVERHEAD_MAX_BYTES;
}
