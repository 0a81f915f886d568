/* The ledger: what balloonmgr remembers of each domain across passes, keyed by UUID, and the
 * cumulative counters (docs/design.md). One entry per domain of the latest reading: its
 * previous reading (for rates, peaks, memory given), whether a change of ours is in flight,
 * the unresponsive mark and its hold-off, the QEMU monitor's feature verdict (SG, ioeventfd,
 * reporting, deflate-on-oom) and the balloon config read from its XML (both cached until the
 * domain restarts or is redefined), what its inflates yield, and how its last change went.
 * It only remembers: it calls no libvirt and reads no file. The engine (engine.h) reads,
 * decides, starts and polls the changes, and records here what it saw and how each change
 * ended; the exporter renders it; the state file is its persistent part (state.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "balloon.h"
#include "domxml.h"
#include "error.h"
#include "feature.h"
#include "hostmem.h"
#include "metrics.h"
#include "snapshot.h"
#include "yield.h"

/* How long a measure of QEMU's own memory serves a domain's readings (a smaps read costs about
 * a millisecond a GiB of guest RAM: a thousand domains are not read every pass) */
#define BM_QEMU_OWN_KEEP_S 60

/* A domain's counters as one pass read them: the base of the next pass's rates. */
typedef struct {
    uint64_t major_faults;  /* BM_ABSENT if unknown */
    uint64_t swap_in_bytes;
    uint64_t last_update_s; /* guest stats timestamp */
    uint64_t taken_s;       /* when the reading was taken */
    uint64_t taken_ns;      /* the same in nanoseconds (BmDomain.read_real_ns); 0: not known.
                             * QEMU's counters over two readings 2.97 s apart counted as 2 whole
                             * seconds read a one-vCPU guest at 148% of a CPU */
    uint64_t used_bytes;    /* what the guest used (bm_domain_used_bytes); BM_ABSENT */
    uint64_t actual_bytes;  /* its balloon then; BM_ABSENT */
    uint64_t used_peak_bytes; /* the most it used in the last BM_USED_PEAK_S or so; BM_ABSENT */
    uint64_t used_peak_s;     /* when used reached used_peak_bytes */
    uint64_t given_s;         /* when its balloon last rose (memory given to it, by a change
                               * or by the guest itself) while the host was not comfortable;
                               * 0: not in this pressure episode */
    uint64_t disk_read_bytes; /* read from its disks, cumulative (QEMU); BM_ABSENT */
    uint64_t cpu_time_ns;     /* its CPU time, cumulative; BM_ABSENT */
    uint64_t inflated_from_bytes; /* its balloon before our first inflate of this pressure
                                   * episode; BM_ABSENT: not inflated in it */
    uint64_t read_base_Bps;   /* its disks' read rate (bytes/s) in the pass that made that
                               * inflate; BM_ABSENT: unknown */
    uint64_t cache_hot_s;     /* when its page cache was found hot in this episode (its reads
                               * rose after our inflate); 0: not */
    /* Linux 6.12's starvation counters then (BmStarveStats, read through the QEMU monitor;
     * BM_ABSENT where not read), and the OOM mark */
    uint64_t oom_kills;
    uint64_t alloc_stalls;
    uint64_t direct_reclaim_bytes;
    uint64_t oom_s;           /* when an OOM kill in the guest was last seen while the host was
                               * not comfortable; 0: none in this pressure episode */
    uint64_t busy_s;          /* when its vCPUs were last measured busy (policy-eval.c); 0: not
                               * within BM_BUSY_HOLD_S */
} BmPrevReading;

/* How long a guest measured busy counts as busy where a reading cannot tell (two readings less
 * than BM_BUSY_MIN_SPAN_S apart: whole seconds of CPU time over one say little) */
#define BM_BUSY_HOLD_S 60
#define BM_BUSY_MIN_SPAN_S 2

/* How long the most a guest used counts against its free memory: memory a guest gives up
 * under an inflate and takes back within this time is no gain for the host. */
#define BM_USED_PEAK_S 60

/* The window of that peak for a pass whose next pass comes horizon_s later (0: the agent,
 * which looks every few seconds): BM_USED_PEAK_S, and at least two such horizons and a half,
 * so that a timer's pass still sees what the guest used at the two passes before. */
static inline uint64_t bm_used_peak_window_s(unsigned horizon_s)
{
    uint64_t w = 2ull * horizon_s + horizon_s / 2;
    return w > BM_USED_PEAK_S ? w : BM_USED_PEAK_S;
}

/* How long a guest given memory in a pressure episode is not inflated again (the episode
 * ends sooner when the host is comfortable): no second reversal of its balloon. */
#define BM_GIVEN_HOLD_S 600

/* Whether an episode mark set at at_s (0: none) still holds at now_s: BM_GIVEN_HOLD_S at most
 * (the host's mode release ends the episode sooner: the ledger's note drops the marks). */
static inline bool bm_episode_mark_holds(uint64_t at_s, uint64_t now_s)
{
    return at_s > 0 && at_s <= now_s && now_s - at_s < BM_GIVEN_HOLD_S;
}

/* Whether prev marks memory given to the guest within BM_GIVEN_HOLD_S of now_s. */
static inline bool bm_prev_given(const BmPrevReading *prev, uint64_t now_s)
{
    return bm_episode_mark_holds(prev->given_s, now_s);
}

/* Whether prev marks the guest's page cache hot within BM_GIVEN_HOLD_S of now_s. */
static inline bool bm_prev_cache_hot(const BmPrevReading *prev, uint64_t now_s)
{
    return bm_episode_mark_holds(prev->cache_hot_s, now_s);
}

/* When an OOM kill in the guest was last seen in this pressure episode, as of reading d: now_s
 * when its OOM kills (Linux 6.12's statistic) rose since prev, else prev's mark while it holds
 * (BM_GIVEN_HOLD_S), else 0. The host's mode is the caller's: release ends the episode. */
static inline uint64_t bm_prev_oom_at(const BmPrevReading *prev, const BmDomain *d, uint64_t now_s)
{
    if (bm_present(d->starve.oom_kills) && bm_present(prev->oom_kills) &&
        d->starve.oom_kills > prev->oom_kills)
        return now_s;
    if (bm_episode_mark_holds(prev->oom_s, now_s))
        return prev->oom_s;
    return 0;
}

/* How long an unresponsive domain is left alone unless its balloon moves. */
#define BM_UNRESPONSIVE_HOLDOFF_S 600

typedef struct {
    char uuid[40];
    char name[256];
    /* the previous pass's reading (running domains only) */
    bool have_prev;
    BmPrevReading prev;
    /* a change balloonmgr started is in flight (the engine tracks it) */
    bool in_flight;
    /* the last change stalled or timed out: not re-targeted until the balloon moves away
     * from unresponsive_actual or unresponsive_until_s passed */
    bool unresponsive;
    uint64_t unresponsive_actual;
    uint64_t unresponsive_until_s;
    /* the QEMU monitor's verdict, probed once per start (boot: the start it belongs to, host
     * boot id and libvirt domain id; kept in the state file for the next timer run) */
    bool features_known;
    char boot[48];
    BmFeatureState sg;
    BmSwitchState ioeventfd;
    BmFeatureState reporting;      /* VIRTIO_BALLOON_F_REPORTING (free page reporting) */
    BmFeatureState deflate_on_oom; /* VIRTIO_BALLOON_F_DEFLATE_ON_OOM */
    /* where its starvation statistics are read (qmp.c): the balloon's QOM path, found once per
     * start ("" not yet); whether a failed read was logged (once per start) */
    char qom_path[128];
    bool starve_warned;
    /* QEMU's own memory of this start as last measured (BmDomain.qemu_own_bytes, qemuproc.h)
     * and when; 0: not measured. Measured again after BM_QEMU_OWN_KEEP_S */
    uint64_t qemu_own_bytes;
    uint64_t qemu_own_s;
    /* the balloon config of the XML (agent cache, dropped on lifecycle/define events) */
    bool balloon_cached;
    BmBalloonConfig balloon;
    /* how the last change went */
    uint64_t last_target_bytes;    /* BM_ABSENT until balloonmgr set one */
    double last_duration_s;        /* < 0: none yet */
    int last_direction;            /* BM_DIR_*, -1 none */
    uint64_t last_rss_drop_bytes;  /* BM_ABSENT: none yet */
    uint64_t last_reached_bytes;   /* the live balloon when its last change ended; BM_ABSENT */
    uint64_t last_ended_real_ns;   /* when that was (0: none) */
    /* what its inflates gave the host back (yield.h), learned from the QEMU RSS when each of
     * them ended (bm_ledger_record_change()); reclaim counts on it; zeroed: nothing learned */
    BmYield yield;
    /* virtio-mem: the domain's memory where its guest stopped unplugging (an unplug of ours
     * that stalled: it unplugs only movable memory) and when; 0: none in this pressure episode
     * (kept in the state file; the host comfortable, or BM_GIVEN_HOLD_S, ends it). The policy
     * asks it no lower while the mark holds */
    uint64_t vmem_refused_bytes;
    uint64_t vmem_refused_s;
    uint64_t vmem_refused_total_bytes; /* what its guest refused to unplug, summed: each stalled
                                        * unplug's reached less its target */
    unsigned seen;                 /* internal: generation of the last sync that saw it */
    /* process only: its decision in the engine's last plan, decisions[plan_index] of the plan
     * numbered plan_gen (0: none), so that a later reading's row finds it without a search */
    uint64_t plan_gen;
    size_t plan_index;
    /* process only: the rule of its last decision logged for leaving it as it is
     * (BmReasonCode; 0: none), so that the agent logs such a decision when its rule changes */
    int logged_rule;
} BmLedgerEntry;

/* What is counted across passes and processes. */
typedef struct {
    /* by device (BM_DEV_*: balloon, virtio-mem), direction and SG label / outcome */
    BmHistogram latency[BM_DEV_COUNT][BM_DIR_COUNT][BM_SGL_COUNT];
    uint64_t changes[BM_DEV_COUNT][BM_DIR_COUNT][BM_CHANGE_ENDED_COUNT];
    uint64_t target_changes[BM_DIR_COUNT];
    uint64_t passes;
    uint64_t errors[BM_ERR_COUNT];
    uint64_t rss_dropped_bytes;
    uint64_t cache_taken_bytes;     /* inflates' parts taken from page caches not known hot */
    uint64_t hot_cache_taken_bytes; /* inflates' parts taken from hot page caches (the host near
                                     * its own OOM) */
    uint64_t percpu_drained_bytes; /* free pages given back from the per-CPU lists */
    double last_pass_duration_s;   /* < 0: none yet */
    uint64_t last_success_s;       /* 0: never */
} BmCounters;

typedef struct {
    BmHostMode mode;               /* the last pass's host mode (hysteresis) */
    BmCounters counters;
    /* in the order they were added; each allocated on its own, so an entry stays where it is
     * while it is in the ledger (a row or a change in flight holds it across passes): a sync
     * drops only the entries of domains gone without a change in flight */
    BmLedgerEntry **entries;
    size_t n_entries;
    size_t cap_entries;            /* allocated, grown geometrically */
    /* index of entries by UUID: open addressing, slot = index + 1 (0 empty) */
    size_t *slots;
    size_t n_slots;
    unsigned generation;
} BmLedger;

/* An empty ledger: mode hold, counters zero. */
void bm_ledger_init(BmLedger *l);

/* Frees what l holds and leaves it empty (re-init to use). */
void bm_ledger_clear(BmLedger *l);

/* The entry of a domain, added if new; name (may be NULL) replaces the one kept. O(1). The
 * entry stays valid until a sync drops it (its domain gone, no change in flight) or l is
 * cleared. */
BmLedgerEntry *bm_ledger_entry(BmLedger *l, const char *uuid, const char *name);

/* The entry of a domain, or NULL. O(1). */
const BmLedgerEntry *bm_ledger_find(const BmLedger *l, const char *uuid);

/* Brings the entries in line with a new reading (the rows do it: bm_rows_build()), in three
 * steps: begin, then each domain d of the reading, taken at now_s on the host boot_id
 * (bm_hostmem_read_boot_id(); NULL: unknown), with its entry e (bm_ledger_entry()): the feature
 * verdict of a domain stopped or started again forgotten (probed again when it runs), the
 * unresponsive mark cleared when its balloon moved or its hold-off passed; then end, which drops
 * the entries not seen since begin (unless in flight: they are freed) and returns how many it
 * dropped. O(n). */
void bm_ledger_sync_begin(BmLedger *l);
void bm_ledger_sync_entry(BmLedger *l, BmLedgerEntry *e, const BmDomain *d, const char *boot_id,
                          uint64_t now_s);
size_t bm_ledger_sync_end(BmLedger *l);

/* The start of a running domain d on the host boot_id: "HOSTBOOTID/ID" into buf. */
void bm_ledger_boot_key(const char *boot_id, const BmDomain *d, char *buf, size_t n);

/* Whether e holds a feature verdict of d's current start (d running, boot_id the host's): a
 * verdict of an earlier start, or of a domain not running, is none. e may be NULL. */
bool bm_ledger_verdict_current(const BmLedgerEntry *e, const BmDomain *d, const char *boot_id);

/* How long after a change ended a reading may still show the balloon from before it: the
 * snapshot's balloon (libvirt's bulk stats) is libvirt's copy, updated from QEMU's BALLOON_CHANGE
 * events, which QEMU sends at most once a second; the change's own end was read live
 * (query-balloon). Seen: a change reached 489 MiB and the next reading, 0.2 s later, said 786 MiB. */
#define BM_BALLOON_READING_LAG_NS (3000000000ull)

/* Puts the live balloon of a change that ended less than BM_BALLOON_READING_LAG_NS before the
 * reading was taken (taken_real_ns) into the reading's domain d where the two differ by 1 MiB or
 * more (a pass planned from the older value sets a target on the wrong side of the balloon: an
 * "inflate" that raises it); e is d's entry (may be NULL). Returns whether it corrected d. */
bool bm_ledger_correct_balloon(const BmLedgerEntry *e, BmDomain *d, uint64_t taken_real_ns);

/* Keeps this pass's reading as the base of the next one's rates, and its host mode (the rows do
 * it: bm_rows_note()), in two steps: the host mode, every previous reading forgotten; then each
 * domain d's reading kept in its entry e (nothing for a domain not running). horizon_s: how long
 * until the next pass (bm_used_peak_window_s()). A balloon that rose since the previous reading
 * marks the domain given memory (given_s) unless the host is comfortable (mode release), which
 * ends the pressure episode. */
void bm_ledger_note_mode(BmLedger *l, BmHostMode mode);
void bm_ledger_note_reading(BmLedgerEntry *e, const BmDomain *d, BmHostMode mode, uint64_t now_s,
                            unsigned horizon_s);

/* What this pass did that its pressure episode remembers (call after
 * bm_ledger_note_reading() of the same pass): an inflate of ours started from from_bytes
 * (BM_ABSENT: none) while its disks read read_Bps bytes a second (BM_ABSENT: unknown), the
 * first of the episode sets where it began; cache_hot: its page cache was found hot now. The
 * marks last until the host is comfortable (mode release) or BM_GIVEN_HOLD_S. busy: its vCPUs
 * were measured busy in this reading (BmGuestPressure.busy_measured): the mark busy_s, which
 * holds BM_BUSY_HOLD_S whatever the mode. */
void bm_ledger_note_episode(BmLedgerEntry *e, uint64_t from_bytes, uint64_t read_Bps,
                            bool cache_hot, bool busy, uint64_t now_s);

/* Records that a change of ours to the domain of entry e started (from_bytes -> target_bytes):
 * the domain is in flight, its last target, the target counted. */
void bm_ledger_record_start(BmLedger *l, BmLedgerEntry *e, uint64_t from_bytes,
                            uint64_t target_bytes);

/* Counts a change t that ended (ours or another process's) into the entry e of its domain
 * (NULL: found, or added, by t's UUID): histogram (reached only), outcome counter, last
 * duration, RSS drop of inflates and what the domain's inflates yield (bm_yield_learn()),
 * unresponsive marking (stalled/timeout) at now_s; a virtio-mem unplug that stalled after
 * some progress marks the refusal instead (vmem_refused_*: where it stopped, asked no lower in
 * the episode), one without progress both. Ours: the domain is no longer in flight
 * (bm_ledger_record_dropped() when the change was only forgotten). */
void bm_ledger_record_change(BmLedger *l, BmLedgerEntry *e, const BmTracked *t, bool ours,
                             uint64_t now_s);

/* Records that a change of ours to the domain of entry e was forgotten without an outcome (the
 * connection it was made on is gone): the domain is no longer in flight. */
void bm_ledger_record_dropped(BmLedgerEntry *e);

/* Drops the cached balloon configs: every XML is read again (lifecycle/define events). */
void bm_ledger_forget_xml(BmLedger *l);

/* Counts an error of that kind. */
void bm_ledger_count_error(BmLedger *l, BmErrorKind kind);
