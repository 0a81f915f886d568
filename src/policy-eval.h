/* The policy decision: a pure function of (host, this pass's rows, the last host mode, policy)
 * to one decision per domain with its reason. A row (row.h) is a domain's reading, its ledger
 * entry (previous reading, change in flight, unresponsive mark, yield) and its rules. Writes
 * nothing but the plan. No I/O. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hostmem.h"
#include "ledger.h"
#include "policy.h"
#include "row.h"
#include "snapshot.h"

typedef enum {
    BM_ACT_NONE,    /* leave as is */
    BM_ACT_INFLATE, /* lower the target: memory back to the host */
    BM_ACT_DEFLATE, /* raise the target: memory to the guest */
    BM_ACT_SKIP,    /* not managed now (excluded, not running, stale stats, ...) */
} BmAction;

/* How a guest is doing, from its statistics and the previous reading. */
typedef struct {
    uint64_t used_bytes;     /* available - usable (or - unused - disk caches); BM_ABSENT */
    uint64_t headroom_bytes; /* usable (or unused + disk caches); BM_ABSENT */
    double major_fault_rate; /* per second; < 0 unknown */
    double swap_in_rate;     /* bytes per second; < 0 unknown */
    uint64_t stats_age_s;    /* BM_ABSENT when the guest reports no timestamp */
    uint64_t growth_bytes;   /* used_bytes grew by this since the previous reading (less what
                              * an inflate between the two took); BM_ABSENT unknown */
    double growth_rate;      /* growth_bytes per second; < 0 unknown */
    bool stale;              /* no stats, or older than max_stats_age */
    double disk_read_rate;   /* its disks' reads, bytes per second (QEMU, host side); < 0
                              * unknown */
    double cpu_rate;         /* its CPU time per second (1.0: one CPU busy); < 0 unknown */
    bool busy_measured;      /* cpu_rate over BM_BUSY_MIN_SPAN_S or more is BM_BUSY_CPU_SHARE or
                              * more (the ledger's mark busy_s) */
    bool busy;               /* busy: measured so, or marked busy within BM_BUSY_HOLD_S where
                              * this reading cannot tell (readings too close, CPU time unknown,
                              * its balloon moved between them: the driver's work) or measured it
                              * at half of BM_BUSY_CPU_SHARE or more (hysteresis: under the host's
                              * own load a busy guest read a hair above the line once): a pass
                              * right after another once took a busy guest for idle */
    double read_base_rate;   /* that rate in the pass of our first inflate of the episode; < 0
                              * unknown or none */
    uint64_t taken_bytes;    /* what our inflates of this pressure episode took: its balloon
                              * below where the first began (0: none, or given back) */
    bool refaulting;         /* taken from, and its disk reads rose by protect_cache_reads
                              * and at least doubled since: it reads again the page cache the
                              * balloon took (a hot cache; buffered reads take no fault) */
    bool under_pressure;     /* a protect_* threshold is exceeded, the guest starves or an OOM
                              * kill was seen since the previous reading */
    /* Linux 6.12's starvation statistics (BmStarveStats: where the QEMU monitor may be asked) */
    uint64_t oom_kills;      /* OOM kills since the previous reading; BM_ABSENT unknown */
    uint64_t oom_s;          /* when an OOM kill was seen in this pressure episode (this reading
                              * or the ledger's mark, bm_prev_oom_at()); 0: none */
    uint64_t oom_ago_s;      /* now - oom_s */
    double alloc_stall_rate; /* allocation stalls per second; < 0 unknown, or the balloon was
                              * inflated between the two readings (its own allocations stall) */
    double direct_reclaim_rate; /* bytes per second reclaimed in direct reclaim; < 0 as above */
    bool starving;           /* alloc_stall_rate or direct_reclaim_rate at its line
                              * (BM_STARVE_STALL_RATE, BM_STARVE_DIRECT_RECLAIM_RATE) */
} BmGuestPressure;

/* A guest whose allocations stall this often a second, or whose direct reclaim reclaims this
 * much a second, between two readings with no inflate between them, starves: it is under
 * pressure (deflated like one past protect_major_faults, never inflated). */
#define BM_STARVE_STALL_RATE 1.0
#define BM_STARVE_DIRECT_RECLAIM_RATE (1024.0 * 1024.0)

/* A guest whose vCPUs used this share of one CPU or more since the previous reading is busy:
 * its page cache may be in use, and is taken after the caches of idle guests (an idle TCG guest
 * uses 1-5%; a guest re-reading its cache, one vCPU's worth). */
#define BM_BUSY_CPU_SHARE 0.2

/* Which rule decided a domain (BmReason.code): what its reason says. */
typedef enum {
    BM_REASON_NONE,              /* not decided (a hand-made decision) */
    BM_REASON_NOT_RUNNING,       /* skip */
    BM_REASON_PAUSED,            /* skip: paused or suspended (run_state) */
    BM_REASON_NO_BALLOON,        /* skip */
    BM_REASON_NO_VMEM,           /* skip: to be moved through virtio-mem (the key device, or no
                                  * usable balloon), but it has no device whose sizes are known */
    BM_REASON_IN_FLIGHT,         /* skip: a change of ours is still in flight */
    BM_REASON_UNRESPONSIVE,      /* skip: its last change stalled */
    BM_REASON_EXCLUDED,          /* skip: the policy's exclude */
    BM_REASON_SIZE_UNKNOWN,      /* skip: balloon or maximum unknown */
    BM_REASON_RETURNS_NOTHING,   /* skip, at its maximum: its XML says ballooning returns
                                  * nothing (no_return) */
    BM_REASON_NO_STATS,          /* skip: no guest statistics */
    BM_REASON_STALE,             /* skip: statistics older than max_stats_age */
    BM_REASON_FLOOR,             /* deflate: below its floor */
    BM_REASON_CACHE_REFAULT,     /* give back: its page cache refaults after our inflates */
    BM_REASON_GAVE_NOTHING,      /* give back: our inflates gave the host nothing */
    BM_REASON_OOM_KILL,          /* give: an OOM kill in it in this episode */
    BM_REASON_UNDER_PRESSURE,    /* give: major faults or swap-in past protect_* */
    BM_REASON_STARVING,          /* give: allocation stalls or direct reclaim */
    BM_REASON_SHORT,             /* give: usable memory below keep_free */
    BM_REASON_GROWING,           /* give: its use grows toward keep_free */
    BM_REASON_RELEASE,           /* give: the host is comfortable, toward its maximum */
    BM_REASON_TAKE,              /* inflate: the host needs memory */
    BM_REASON_NOT_NEEDED,        /* none: idle memory, the host not reclaiming */
    BM_REASON_HOT_SPARED,        /* none: only its hot page cache is left to take, spared */
    BM_REASON_BUSY_SPARED,       /* none: a busy guest, spared while idle guests give what the
                                  * host needs over the coming passes (BmPlan.busy_deferred) */
    BM_REASON_NOT_ASKED,         /* none: the others give what the host needs */
    BM_REASON_ABOVE_MAX,         /* none: balloon above the maximum */
    BM_REASON_GROWS_AT_MAX,      /* none: its use grows, at its maximum */
    BM_REASON_GROWS,             /* none: its use grows, usable memory lasts */
    BM_REASON_KEPT_HOT,          /* none: it refaults or thrashes after our inflates, but keeps
                                  * what they took (the host near its own OOM) */
    BM_REASON_STATS_PREDATE,     /* none: statistics older than its last change */
    BM_REASON_GIVEN,             /* none: given memory in this episode (no second reversal) */
    BM_REASON_TIMER_NEVER,       /* none: a timer's pass, timer_inflate never */
    BM_REASON_TIMER_SELF_DEFLATE, /* none: a timer's pass, no deflate-on-oom */
    BM_REASON_NO_RETURN,         /* none: ballooning returns nothing (its XML: no_return) */
    BM_REASON_RETURNED_NOTHING,  /* none: its last inflate returned nothing (the ledger) */
    BM_REASON_UNBACKED,          /* none: its idle memory is free memory the host does not back */
    BM_REASON_BUSY_UNBACKED,     /* none: a busy guest whose page cache lies beyond free memory
                                  * the host does not back (taken only near the host's OOM) */
    BM_REASON_NOT_BACKED,        /* none: the host backs none of its idle memory */
    BM_REASON_NOTHING_TO_TAKE,   /* none: reclaiming, nothing idle */
    BM_REASON_FINE,              /* none: not reclaiming, usable memory above keep_free */
    BM_REASON_VMEM_REFUSED,      /* none: its guest refused to unplug more virtio-mem in this
                                  * episode (the ledger's vmem_refused_*) */
    BM_REASON_BELOW_BLOCK,       /* none: the change would be smaller than a virtio-mem block */
    BM_REASON_POOL_TAKE,         /* inflate: unplug of a huge-page guest for the host's huge-page
                                  * pool (hugepages_free_below) */
    BM_REASON_POOL_SPARED,       /* none: a huge-page guest: what it unplugs goes to the pool,
                                  * not MemAvailable, and the pool has enough free */
    BM_REASON_POOL_EMPTY,        /* none: a huge-page guest to be given memory, but the pool
                                  * has no free pages for a block above hugepages_free_below */
} BmReasonCode;

/* What limited a take (BmReason.cap). */
typedef enum {
    BM_CAP_NONE,
    BM_CAP_MAX_STEP,
    BM_CAP_FLOOR,
    BM_CAP_KEEP_FREE,
    BM_CAP_BACKED, /* the free memory the host backs */
    BM_CAP_PROBE,  /* a first, probing inflate */
    BM_CAP_REFUSED, /* what its guest refused to unplug in this episode (virtio-mem) */
} BmTakeCap;

/* A decision's structured reason: the rule that decided and the numbers it decided from,
 * beyond those in BmDecision itself (sizes in bytes). bm_reason_format() makes its prose. */
typedef struct {
    BmReasonCode code;
    uint64_t want_bytes;        /* give: what the rule asks; take: the most it may take */
    uint64_t amount_bytes;      /* give, take: what this pass moves */
    uint64_t step_bytes;        /* max_step (times the pace of a timer's pass) */
    uint64_t keep_free_bytes;
    unsigned ahead_s;           /* growing: its room covers this much more growth */
    BmTakeCap cap;              /* take: what limited want */
    bool busy;                  /* take: its vCPUs are busy: its memory after idle guests' */
    uint64_t bite_bytes;        /* take, busy, the host not near its own OOM: the most of its
                                 * page cache a pass takes (0: no bite) */
    unsigned shares;            /* its weight in the take */
    unsigned max_stats_age_s;   /* stale: the policy's limit */
    int run_state;              /* paused: its virDomainState */
    uint64_t skip_bytes;        /* unbacked: its free memory the host does not back */
    uint64_t used_lately_bytes; /* not backed: what it used lately beyond its use now */
    bool reports;               /* unbacked: free page reporting on */
    uint64_t last_inflated_bytes, last_returned_bytes; /* its last inflate (the ledger) */
    const char *no_return;      /* why ballooning it returns nothing (its XML; static text) */
    uint64_t horizon_s;         /* a timer's pass: until the next one */
    uint64_t given_ago_s;       /* given: how long ago */
    uint64_t refused_bytes;     /* virtio-mem refused, capped by it: the domain's memory where
                                 * its guest stopped unplugging */
    uint64_t block_bytes;       /* below a block: the virtio-mem device's block */
    uint64_t asked_bytes;       /* below a block: the change the plan asked for */
} BmReason;

typedef struct BmDecision {
    char uuid[40];           /* the domain's, copied */
    char *name;              /* owned by the plan */
    BmAction action;
    uint64_t current_bytes;
    uint64_t target_bytes;   /* == current_bytes unless inflate/deflate */
    uint64_t rss_bytes;      /* the QEMU RSS of the reading (BM_ABSENT): where a change's RSS
                              * drop is measured from */
    uint64_t max_bytes;
    uint64_t floor_bytes;    /* max(floor, min_guarantee) */
    uint64_t idle_bytes;     /* could be taken without breaking headroom/floor (before caps) */
    BmGuestPressure pressure;
    uint64_t backed_free_bytes; /* free guest memory the host backs, at most (QEMU RSS - used -
                                 * qemu_overhead_bytes); BM_ABSENT when the RSS is unknown */
    uint64_t expected_return_bytes; /* inflate: what the host should get back of it (the part
                                     * beyond free memory it does not back, times the yield) */
    unsigned yield_permille; /* share of inflated memory its inflates gave back so far (1000
                              * before any was learned) */
    bool returns_nothing;    /* not inflated: its inflates return nothing to the host (learned,
                              * or VFIO/locked/hugepage memory in its XML) */
    bool short_of_memory;    /* a managed guest with fresh stats under pressure (protect_*) or
                              * with usable memory below keep_free: to be given memory */
    bool cache_hot;          /* its page cache is hot in this episode: found now (it thrashed
                              * after our inflate: pressure.refaulting, or major faults or
                              * swap-in), or marked by an earlier pass (the ledger; also for a
                              * running domain skipped now, e.g. its give-back in flight) */
    bool cache_found_hot;    /* found hot by this pass: the ledger marks it (engine) */
    uint64_t take_free_bytes;  /* inflate: the part of it free memory in the guest */
    uint64_t take_cache_bytes; /* inflate: the part of it page cache not known hot */
    uint64_t take_hot_bytes;   /* inflate: the part of it a hot page cache, taken only while
                                * the host is near its own OOM (BmPlan.hot_cache_allowed) */
    BmReason cause;          /* why: the rule and its numbers (its words: bm_reason_format(),
                              * its record's one word: bm_reason_why(), where printed or logged) */
    /* A domain moved through virtio-mem (bm_vmem_moves_domain(): no usable balloon): its
     * sizes are the domain's (base memory plus what its devices plugged, at most plus their
     * sizes), every change a whole number of blocks of one device */
    bool vmem;
    int vmem_index;                /* inflate/deflate: the device it moves (with vmem); -1: none */
    uint64_t vmem_block_bytes;     /* that device's block */
    uint64_t vmem_offset_bytes;    /* the domain's memory besides that device's (base and the
                                    * other devices): target = offset + requested */
    uint64_t vmem_requested_bytes; /* the device's requested size that the target means */
} BmDecision;

/* Which rule decided the host's mode (BmHostReason.code). */
typedef enum {
    BM_MODE_WHY_BELOW,       /* reclaim: MemAvailable below reclaim_below */
    BM_MODE_WHY_PSI,         /* reclaim: PSI some avg10 above psi_reclaim_above */
    BM_MODE_WHY_STILL,       /* reclaim: reclaiming, MemAvailable still below target_available */
    BM_MODE_WHY_COMFORTABLE, /* release: MemAvailable above release_above, PSI calm */
    BM_MODE_WHY_HOLDING,     /* hold: between the two */
} BmModeWhy;

/* What holds the guests' idle memory back when the host's need is unmet (BmHostReason.held). */
typedef enum {
    BM_HELD_GROWING,        /* their use grows */
    BM_HELD_GIVEN,          /* given memory in this episode */
    BM_HELD_HOT,            /* a hot page cache, spared or kept */
    BM_HELD_BUSY_UNBACKED,  /* busy, behind unbacked free memory */
    BM_HELD_UNBACKED,       /* not backed by the host */
    BM_HELD_STALE,          /* statistics stale or older than a change */
    BM_HELD_TIMER,          /* left to the timer */
    BM_HELD_COUNT,
} BmHeld;

/* The host's structured reason: the rule that decided its mode and the numbers (bytes) beyond
 * those in BmPlan itself; bm_host_reason_format() makes its words. */
typedef struct {
    BmModeWhy code;
    uint64_t available_bytes, reclaim_below_bytes, target_bytes, release_above_bytes;
    double psi_some_avg10, psi_reclaim_above; /* PSI: the reading and the policy's line */
    bool psi_calm;                   /* holding: PSI below psi_release_below (or unknown) */
    uint64_t hot_spared_bytes;       /* reclaim: hot page cache not taken (the host not near its
                                      * own OOM) although the need is not met */
    uint64_t held_bytes[BM_HELD_COUNT]; /* reclaim, need unmet: idle guest memory by cause */
} BmHostReason;

typedef struct {
    BmHostMode mode;
    uint64_t need_bytes;     /* RECLAIM: what the host asked for; else 0 */
    uint64_t budget_bytes;   /* HOLD/RELEASE: what may be given to guests in need */
    uint64_t planned_inflate_bytes;
    uint64_t planned_deflate_bytes;
    uint64_t guard_bytes;    /* RECLAIM: given to guests short of memory or under pressure;
                              * taken from the other guests on top of need_bytes */
    uint64_t in_flight_bytes; /* RECLAIM: what our inflates still in flight will give the host
                               * (balloon still to go times yield); not asked again */
    uint64_t expected_return_bytes; /* RECLAIM: what the planned inflates should give the host
                                     * (each times its domain's yield) */
    uint64_t qemu_overhead_bytes; /* QEMU's own resident memory per domain, estimated (yield.h);
                                   * subtracted from each domain's backed free memory */
    bool hot_cache_allowed;  /* RECLAIM with MemAvailable below half of reclaim_below: the
                              * host is near its own OOM, and a hot page cache may be taken too
                              * (last, after free memory and page cache not known hot) */
    uint64_t oom_margin_bytes; /* RECLAIM: MemAvailable above half of reclaim_below (0 at or
                                * below it): what giving back may cost the host before it is
                                * near its own OOM again */
    uint64_t hot_cache_bytes; /* of planned_inflate_bytes: taken from hot page caches */
    bool busy_deferred;      /* RECLAIM, the host not near its own OOM: busy guests were spared
                              * while idle guests have more to give over the coming passes, or
                              * inflates of ours are in flight */
    uint64_t busy_spared_bytes; /* the host bytes the busy guests could have given this pass */
    /* the host's huge-page pool (BmHost.hugepages_*): its free pages and hugepages_free_below
     * in bytes, what it needs (below less free, less huge-page unplugs of ours in flight; 0:
     * none) and what is planned of it */
    uint64_t hugepages_free_bytes, hugepages_below_bytes, hugepages_need_bytes;
    uint64_t hugepages_planned_bytes;
    uint64_t hugepages_budget_bytes; /* what plugs into huge-page guests may take of the pool
                                      * (its free pages above hugepages_free_below), left */
    uint64_t unmet_bytes;    /* RECLAIM: need + guard the guests cannot give back at all (over
                              * the coming passes, max_step aside) without going short
                              * themselves; reported, never squeezed out of them */
    BmHostReason cause;      /* why the mode, and what the reclaim left unmet */
    BmDecision *decisions;   /* one per row (domain of the snapshot), same order */
    size_t n_decisions;
    uint64_t gen;            /* its number once attached to its rows (bm_plan_attach()); 0 */
} BmPlan;

/* "none", "inflate", "deflate", "skip". */
const char *bm_action_name(BmAction a);

/* The words of a decision and of the host's mode are made only where they are printed or logged
 * (policy-reason.c), from the structured reasons the plan keeps. */

/* The reason of decision x of plan in words, made from x->cause, the plan's mode and need and
 * x's figures, into buf (n bytes; BM_REASON_MAX holds every one). Pure. */
#define BM_REASON_MAX 256
void bm_reason_format(const BmPlan *plan, const BmDecision *x, char *buf, size_t n);

/* The host's reason of plan in words (its mode's rule, and in reclaim what is in flight, spared,
 * planned and unmet), into buf (n bytes; BM_HOST_REASON_MAX holds every one). Pure. */
#define BM_HOST_REASON_MAX 512
void bm_host_reason_format(const BmPlan *plan, char *buf, size_t n);

/* The one word of a change record's why= for decision x, from x->cause: free, page-cache,
 * hot-page-cache (an inflate: the costliest part it takes); under-pressure, oom-kill, starving,
 * short-of-memory, growing, cache-refault, returns-nothing, release, floor (a deflate); NULL
 * when x moves nothing (action neither inflate nor deflate). */
const char *bm_reason_why(const BmDecision *x);

/* The one word of the rule that decided x, for every decision: bm_reason_why()'s for a change,
 * else the rule's own (busy-spared, hot-spared, not-asked, given, stale, unbacked, ...; the
 * list in balloonmgr(8), LOGGING): the agent's decision record's why=. Never NULL. */
const char *bm_reason_rule(const BmDecision *x);

/* The pressure of one guest (item 2 of the policy: used memory, headroom, rates between two
 * readings, staleness). prev may be NULL. now_s is wall-clock seconds. */
void bm_guest_pressure(const BmDomain *d, const BmPrevReading *prev, const BmGuestRules *rules,
                       uint64_t now_s, BmGuestPressure *ret);

/* Decides every row (decision i is row i's; a row without an entry: nothing known of it yet),
 * from the host reading and prev_mode, the last pass's host mode (hysteresis). horizon_s: how
 * long until the next pass looks at the guests: 0 for the agent (a pass every interval, a look
 * every second at ballooned guests), the policy's timer_interval for a timer's pass (`run
 * --once`), which then takes only from guests that can deflate themselves (timer_inflate),
 * moves up to timer_interval / interval times max_step, and gives growing guests room for
 * that much longer. Returns 0 and *ret (free with
 * bm_plan_clear()), or -EINVAL when the host reading lacks MemTotal/MemAvailable.
 * Guarantees: no target below the floor (max of policy floor and <min_guarantee>) or above
 * the maximum; no inflate of a guest with stale or missing stats, under pressure or short of
 * memory, of one whose inflates return nothing (ledger yield, or its XML), or beyond the free
 * memory the host backs (QEMU RSS - used); a guest short of memory or under pressure is
 * deflated in every mode; the expected returns of one pass's inflates add up to at most what
 * the host needs plus what short guests were given, each inflate at most max_step; what cannot
 * be met is unmet_bytes. */
int bm_policy_eval_rows(const BmHost *host, const BmRows *rows, BmHostMode prev_mode,
                        const BmPolicy *policy, uint64_t now_s, unsigned horizon_s, BmPlan *ret);

/* Attaches plan p, numbered gen (> 0, a new number each plan), to the rows it was made from:
 * decision i is row i's (BmRow.decision), and row i's ledger entry keeps the index, so that the
 * row of the same domain in a later reading finds it (bm_plan_link()). */
void bm_plan_attach(BmPlan *p, BmRows *rows, uint64_t gen);

/* Each row's decision in p (NULL: none, or p NULL), through its ledger entry: the readings after
 * a pass (a domain new since has none). O(n). */
void bm_plan_link(const BmPlan *p, BmRows *rows);

void bm_plan_clear(BmPlan *p);

/* Whether the guest of a row that balloonmgr manages and has ballooned (balloon below its
 * maximum) is short of memory (usable below keep_free) or under pressure (protect_* rates
 * since its entry's previous reading; no entry: none), with fresh statistics, or refaults its
 * page cache after our inflates (BmGuestPressure.refaulting; host-side reads, fresh or not):
 * the agent's guest watch checks this between passes and starts a pass at once, so a growing
 * guest gets memory back within seconds. Pure. */
bool bm_policy_rows_in_need(const BmRows *rows, uint64_t now_s);

/* Whether an inflate of ours in flight on the domain of row hurts its guest, so that it is to
 * stop where its balloon is now rather than be given back after it ended: since the reading of
 * the pass that started it, the guest re-reads the page cache the balloon takes (its disk
 * reads rose: BmGuestPressure.refaulting) or faults, swaps in or had an OOM kill
 * (under_pressure). Not while the host is near its own OOM (host_near_oom: MemAvailable below
 * half of reclaim_below), where what is taken is kept. *ret (may be NULL): the guest's pressure,
 * for the words of the log. Pure. */
bool bm_policy_inflate_hurts(const BmRow *row, uint64_t now_s, bool host_near_oom,
                             BmGuestPressure *ret);

/* Whether a host reading is below half of the policy's reclaim_below: near its own OOM, where
 * the policy takes a hot cache too and keeps what it took. Pure. */
bool bm_host_near_oom(const BmHost *h, const BmPolicy *p);

/* Whether a host reading is past the policy's reclaim thresholds (MemAvailable below
 * reclaim_below, or PSI some avg10 above psi_reclaim_above): the agent checks this between
 * passes and starts a pass at once. Pure. */
bool bm_host_under_pressure(const BmHost *h, const BmPolicy *p);

/* The absolute minimum of a balloon: 128 MiB, and no less than 5% of the maximum. No pass
 * aims a guest below it, whatever the policy's floor, keep_free and deadband say; the smallest
 * manual target (`set`) taken without --force. */
#define BM_SET_MIN_BYTES (128ull << 20)
#define BM_SET_MIN_PERMILLE 50

/* The absolute minimum of a domain of max_bytes: the larger of BM_SET_MIN_BYTES and
 * BM_SET_MIN_PERMILLE of it, never above max_bytes. Pure. */
uint64_t bm_absolute_floor(uint64_t max_bytes);

/* The lowest target `set` accepts for a domain of max_bytes without --force: the largest of
 * the absolute minimum (BM_SET_MIN_BYTES, BM_SET_MIN_PERMILLE of the maximum), <min_guarantee>
 * and the policy's floor (BM_ABSENT: not given), never above max_bytes. *ret_why says which
 * one it is: "the absolute minimum (the larger of 128 MiB and 5% of the maximum)",
 * "<memtune><min_guarantee>" or "the policy's floor". Pure. */
uint64_t bm_manual_floor(uint64_t max_bytes, uint64_t min_guarantee_bytes,
                         uint64_t policy_floor_bytes, const char **ret_why);
