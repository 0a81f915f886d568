/* What inflates give the host back: learned per domain from the QEMU RSS before and after
 * each finished inflate, so that reclaim counts on a guest only for memory the host really
 * backs. An inflate of guest memory the host never backed (free pages the guest never
 * touched) lowers the balloon but returns nothing: the RSS does not drop. Pure: plain
 * numbers in and out. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* An inflate returned "nothing" when its RSS drop was below this share of the balloon
 * growth (permille). */
#define BM_YIELD_NOTHING_PERMILLE 250
/* Inflates smaller than this teach nothing (RSS noise of a running guest is larger). */
#define BM_YIELD_MIN_SAMPLE_BYTES (16ull << 20)
/* A "returns nothing" mark is lifted once the QEMU RSS grew this much since it was set: the
 * guest touched memory since, which a later inflate may give back. */
#define BM_YIELD_RETRY_GROWTH_BYTES (128ull << 20)

/* Zeroed: nothing learned yet. */
typedef struct {
    uint64_t inflated_bytes;      /* balloon growth of the finished inflates learned from */
    uint64_t returned_bytes;      /* QEMU RSS drop those inflates gave the host */
    uint64_t last_inflated_bytes; /* the last one learned from; 0: none yet */
    uint64_t last_returned_bytes; /* its RSS drop */
    bool nothing;                 /* marked "returns nothing" by the last inflate that reached
                                   * page cache (or whose parts are unknown) */
    uint64_t nothing_rss_bytes;   /* the QEMU RSS when it was marked */
    bool free_unbacked;           /* marked by the last inflate of free memory alone that
                                   * returned nothing: the guest's free memory is memory the host
                                   * does not back; its page cache still returns (page cache is
                                   * guest memory in use, which the host backs) */
    uint64_t free_unbacked_rss_bytes; /* the QEMU RSS when it was marked */
} BmYield;

/* Learns from one finished change: the balloon went from from_bytes to reached_bytes, the QEMU
 * RSS from rss_before to rss_after (BM_ABSENT when unknown); free_only: the inflate was planned
 * to take the guest's free memory and nothing else (its why= was "free"). Deflates, unknown RSS
 * and inflates under BM_YIELD_MIN_SAMPLE_BYTES are ignored. An inflate that returned less than
 * BM_YIELD_NOTHING_PERMILLE of its growth sets a mark, one that returned more clears it: the
 * "free memory unbacked" mark for an inflate of free memory alone (what it teaches says nothing
 * of the guest's page cache), the "returns nothing" mark for any other. Returns true when y
 * was updated. */
bool bm_yield_learn(BmYield *y, uint64_t from_bytes, uint64_t reached_bytes, uint64_t rss_before,
                    uint64_t rss_after, bool free_only);

/* Whether the "returns nothing" mark holds at the current QEMU RSS (BM_ABSENT: unknown, the
 * mark holds): until the RSS grew BM_YIELD_RETRY_GROWTH_BYTES above the RSS at the mark. */
bool bm_yield_returns_nothing(const BmYield *y, uint64_t rss_bytes);

/* Whether the "free memory unbacked" mark holds at the current QEMU RSS (BM_ABSENT: unknown,
 * the mark holds): until the RSS grew BM_YIELD_RETRY_GROWTH_BYTES above the RSS at the mark. */
bool bm_yield_free_unbacked(const BmYield *y, uint64_t rss_bytes);

/* Share of inflated memory the host got back so far, permille 0..1000; 1000 (everything)
 * before anything was learned. */
unsigned bm_yield_permille(const BmYield *y);

/* Free guest memory the host backs, at most: the QEMU RSS minus what the guest uses
 * (used_bytes); BM_ABSENT when either is unknown or the RSS is not above what the guest uses
 * (guest memory swapped out or shared on the host: the RSS says nothing then). QEMU's own
 * memory is in the RSS too, so this is an upper bound; learning from inflates corrects it. */
uint64_t bm_yield_backed_free(uint64_t rss_bytes, uint64_t used_bytes);

/* bm_yield_backed_free() less QEMU's own memory (overhead_bytes, e.g. bm_yield_overhead() or
 * BmPlan.qemu_overhead_bytes; plus whatever else the caller counts as used): the free guest
 * memory the QEMU process holds, at least 0; BM_ABSENT when bm_yield_backed_free() is. */
uint64_t bm_yield_backed_free_net(uint64_t rss_bytes, uint64_t used_bytes, uint64_t overhead_bytes);

/* QEMU's own resident memory per domain is at most this much (estimates above are capped). */
#define BM_YIELD_OVERHEAD_MAX_BYTES (128ull << 20)

/* Collects the host-wide estimate of QEMU's own resident memory per domain: the smallest
 * QEMU RSS minus what the guest uses among the running domains (the one whose free memory
 * the host backs least is mostly QEMU itself), capped at BM_YIELD_OVERHEAD_MAX_BYTES. Feed
 * every domain to bm_yield_overhead_add(), then read bm_yield_overhead(): 0 (no correction)
 * with fewer than two domains, where the smallest could be a guest's own backed memory. */
typedef struct {
    uint64_t min_bytes;
    unsigned n;
} BmYieldOverhead;

void bm_yield_overhead_add(BmYieldOverhead *o, uint64_t rss_bytes, uint64_t used_bytes);
uint64_t bm_yield_overhead(const BmYieldOverhead *o);
