/* Moving a balloon: set a target through libvirt and watch it get there. */
#pragma once

#include <libvirt/libvirt.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum {
    BM_CHANGE_REACHED,  /* within the tolerance of the target */
    BM_CHANGE_TIMEOUT,  /* deadline passed while still moving */
    BM_CHANGE_STALLED,  /* no progress for stall_ms */
    BM_CHANGE_FAILED,   /* the domain could not be read any more (destroyed, libvirt error) */
    BM_CHANGE_PENDING,  /* not waited for */
} BmChangeOutcome;

typedef struct {
    unsigned timeout_ms;      /* give up after this long */
    unsigned stall_ms;        /* give up when the balloon did not move for this long */
    unsigned poll_ms;         /* interval between reads of the balloon */
    uint64_t tolerance_bytes; /* reached when |actual - target| <= this */
    /* optional: called after every read that did not end the wait, with the balloon now and
     * the time since the target was set */
    void (*progress)(void *ctx, uint64_t from_bytes, uint64_t target_bytes, uint64_t actual_bytes,
                     uint64_t elapsed_ns);
    void *progress_ctx;
} BmWaitOptions;

#define BM_WAIT_DEFAULT_TIMEOUT_S 120
#define BM_WAIT_DEFAULT_STALL_S 10
#define BM_WAIT_DEFAULT_POLL_MS 10
#define BM_WAIT_TOLERANCE_BYTES (1024 * 1024)

typedef struct {
    BmChangeOutcome outcome;
    uint64_t from_bytes;       /* balloon before the change */
    uint64_t target_bytes;
    uint64_t reached_bytes;    /* balloon when the wait ended */
    uint64_t started_real_ns;  /* wall clock just before the target was set */
    uint64_t finished_real_ns; /* wall clock of the read that ended the wait */
    uint64_t duration_ns;      /* monotonic, set -> end of the wait */
    unsigned polls;            /* balloon reads made */
} BmChange;

/* "reached", "timeout", "stalled", "failed", "pending". */
const char *bm_change_outcome_name(BmChangeOutcome o);

/* "inflate" when the target is below from, "deflate" when above, "none" when equal. */
const char *bm_change_direction(uint64_t from_bytes, uint64_t target_bytes);

/* The balloon's current size, read live (virDomainMemoryStats ACTUAL_BALLOON: QEMU's
 * query-balloon, not the value cached from throttled events). Returns 0 or -errno. */
int bm_balloon_read_actual(virDomainPtr dom, uint64_t *ret_bytes);

/* Sets the balloon target of a running domain (virDomainSetMemoryFlags AFFECT_LIVE; rounded
 * down to KiB). When opts is not NULL, then polls the balloon until it is within the
 * tolerance of the target, stalls, or the deadline passes. from_bytes is the balloon before
 * the call (the caller has just read it). Returns 0 with *ret filled (outcome says how the wait
 * ended), or -errno with the reason if the target could not be set. */
int bm_balloon_change(virDomainPtr dom, uint64_t from_bytes, uint64_t target_bytes,
                      const BmWaitOptions *opts, BmChange *ret);

/* What a change needs to know about a domain before it starts: whether it runs, its maximum
 * memory, and its balloon now (read live). Returns 0, -ESRCH if it is not running, or
 * another -errno. */
int bm_balloon_read_limits(virDomainPtr dom, uint64_t *ret_max_bytes, uint64_t *ret_actual_bytes);

/* Sets how often the guest reports memory statistics (0 disables), live and/or in the
 * persistent definition. Returns 0 or -errno. */
/* Whether a long libvirt job (dump, save, migration, snapshot, backup, ...) runs on dom: while
 * one does, libvirt makes a balloon change wait up to 30 s for the job lock and then fails.
 * Returns 1 and the job's operation in *ret_what (static string), 0 when none runs or the
 * driver cannot tell, or -errno (connection lost). */
int bm_balloon_job_running(virDomainPtr dom, const char **ret_what);

int bm_balloon_set_stats_period(virDomainPtr dom, int period_s, bool live, bool config);

/* ---- Tracking changes in flight (agent and timer runs) ----
 * A change is started with bm_tracker_start() and polled with bm_tracker_poll() until it
 * reached its target, stalled, timed out or failed: the same live reading as set --wait, for
 * many domains at once. */

typedef struct {
    char name[256];
    char uuid[VIR_UUID_STRING_BUFLEN];
    char sg[16];               /* "negotiated", "not_negotiated" or "unknown": histogram label */
    BmChange change;           /* outcome, from/target/reached, times */
    uint64_t rss_before_bytes; /* QEMU RSS when the change started (BM_ABSENT if unknown) */
    uint64_t rss_after_bytes;  /* ... when it ended */
    /* internal */
    uint64_t started_mono_ns;
    uint64_t last_progress_mono_ns;
    uint64_t last_actual_bytes;
} BmTracked;

typedef struct {
    BmWaitOptions opts;
    BmTracked *items; /* in flight */
    size_t n_items;
} BmTracker;

/* Sets dom's balloon target and starts tracking it. from_bytes and rss_bytes (BM_ABSENT if
 * unknown) are the values just read. Returns 0, or -errno with the reason when the target
 * could not be set (nothing is tracked then). */
int bm_tracker_start(BmTracker *t, virDomainPtr dom, uint64_t from_bytes, uint64_t target_bytes,
                     uint64_t rss_bytes, const char *sg_label);

/* Reads every tracked domain once (looked up by UUID on conn) and moves those that ended into
 * *ret_done (caller frees the array; *ret_n_done entries). Returns the number still in flight. */
size_t bm_tracker_poll(BmTracker *t, virConnectPtr conn, BmTracked **ret_done, size_t *ret_n_done);

/* Whether a domain (by UUID) has a change in flight. */
bool bm_tracker_busy(const BmTracker *t, const char *uuid);

void bm_tracker_clear(BmTracker *t);

/* The balloon and the QEMU RSS, read live in one virDomainMemoryStats call. rss is BM_ABSENT
 * when the driver does not report it. Returns 0 or -errno. */
int bm_balloon_read_live(virDomainPtr dom, uint64_t *ret_actual_bytes, uint64_t *ret_rss_bytes);
