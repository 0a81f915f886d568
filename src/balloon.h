/* Moving a balloon: set a target through libvirt and watch it get there. */
#pragma once

#include <signal.h>

#include <libvirt/libvirt.h>
#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "feature.h"

typedef enum {
    BM_CHANGE_REACHED,  /* within the tolerance of the target */
    BM_CHANGE_TIMEOUT,  /* deadline passed while still moving */
    BM_CHANGE_STALLED,  /* no progress for stall_ms */
    BM_CHANGE_FAILED,   /* the domain could not be read any more (destroyed, libvirt error) */
    BM_CHANGE_STOPPED,  /* stopped where it was (an inflate that hurt its guest:
                         * bm_tracker_stop()) */
    BM_CHANGE_PENDING,  /* not waited for */
} BmChangeOutcome;

/* The outcomes that end a change (REACHED .. FAILED): the counters and the metrics' label. */
#define BM_CHANGE_ENDED_COUNT BM_CHANGE_PENDING

struct BmTracked;

typedef struct {
    unsigned timeout_ms;      /* give up after this long */
    unsigned stall_ms;        /* give up when the balloon did not move for this long */
    unsigned poll_ms;         /* interval between reads of the balloon */
    uint64_t tolerance_bytes; /* reached when |actual - target| <= this */
    /* optional: called after every read of a change that did not end it, with the change
     * (its last_actual_bytes: the balloon now; change.duration_ns: the time since the target
     * was set) */
    void (*progress)(void *ctx, const struct BmTracked *t);
    void *progress_ctx;
    /* optional: the wait ends early once *stop is set (a signal handler's flag) */
    const volatile sig_atomic_t *stop;
    /* optional: the clock of the times, durations and sleeps (NULL: the system's) */
    const BmClock *clock;
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
    uint64_t finished_real_ns; /* wall clock of the read that ended the wait (the middle of
                                * its call, reading_ns long) */
    uint64_t duration_ns;      /* monotonic, set -> end of the wait */
    uint64_t reading_ns;       /* how long the call of that read took: the value was read
                                * somewhere inside it, so the end is known to +- half of it */
    unsigned polls;            /* balloon reads made */
    int failed_err;            /* BM_CHANGE_FAILED: the -errno of the read that failed (its
                                * detail: bm_error_detail()) */
} BmChange;

/* "reached", "timeout", "stalled", "failed", "pending". */
const char *bm_change_outcome_name(BmChangeOutcome o);

/* A change's direction, counted apart in the metrics and the state file. */
enum { BM_DIR_INFLATE, BM_DIR_DEFLATE, BM_DIR_COUNT };

/* The label values in the metrics, also the keys of the state file: "inflate", "deflate";
 * the ended outcomes "reached", "timeout", "stalled", "failed". */
extern const char *const bm_dir_names[BM_DIR_COUNT];
extern const char *const bm_outcome_names[BM_CHANGE_ENDED_COUNT];

/* "inflate" when the target is below from, "deflate" when above, "none" when equal. */
const char *bm_change_direction(uint64_t from_bytes, uint64_t target_bytes);

/* The balloon's current size, read live (virDomainMemoryStats ACTUAL_BALLOON: QEMU's
 * query-balloon, not the value cached from throttled events). Returns 0 or -errno. */
int bm_balloon_read_actual(virDomainPtr dom, uint64_t *ret_bytes);

/* Sets the balloon target of a running domain (virDomainSetMemoryFlags AFFECT_LIVE; rounded
 * down to KiB) without waiting: *ret has outcome BM_CHANGE_PENDING. from_bytes is the balloon
 * before the call (the caller has just read it). Returns 0, or -errno with the reason if the
 * target could not be set. To wait, start the change with bm_tracker_start(). */
int bm_balloon_change(virDomainPtr dom, uint64_t from_bytes, uint64_t target_bytes, BmChange *ret);

/* What a change needs to know about a domain before it starts: whether it runs, its maximum
 * memory, and its balloon now (read live). Returns 0, -ESRCH if it is not running, or
 * another -errno. */
int bm_balloon_read_limits(virDomainPtr dom, uint64_t *ret_max_bytes, uint64_t *ret_actual_bytes);

/* The persistent definition's (the next boot's) maximum memory (<memory>) and balloon
 * (<currentMemory>, or the maximum without one), for a change with --config. Returns 0,
 * -EINVAL for a definition without <memory>, or another -errno. */
int bm_balloon_read_config(virDomainPtr dom, uint64_t *ret_max_bytes, uint64_t *ret_current_bytes);

/* Sets <currentMemory> of dom's persistent definition (virDomainSetMemoryFlags AFFECT_CONFIG,
 * rounded down to KiB): the balloon of its next boot; the running domain, if any, is not
 * touched. Returns 0 or -errno with libvirt's reason. */
int bm_balloon_set_config(virDomainPtr dom, uint64_t target_bytes);

/* Whether a long libvirt job (dump, save, migration, snapshot, backup, ...) runs on dom: while
 * one does, libvirt makes a balloon change wait up to 30 s for the job lock and then fails.
 * Returns 1 and the job's operation in *ret_what (static string), 0 when none runs or the
 * driver cannot tell, or -errno (connection lost). */
int bm_balloon_job_running(virDomainPtr dom, const char **ret_what);

/* Sets how often the guest reports memory statistics (0 disables), live and/or in the
 * persistent definition. Returns 0 or -errno. */
int bm_balloon_set_stats_period(virDomainPtr dom, int period_s, bool live, bool config);

/* ---- Changes in flight: the one wait loop ----
 * A change is started with bm_tracker_start() and read with bm_tracker_poll() until it reached
 * its target, stalled, timed out or failed. `set --wait` is a tracker with one item waited for
 * with bm_tracker_wait(); the agent polls its tracker from a timer; `run --once` waits for the
 * changes of its pass with bm_tracker_wait() too. */

typedef struct BmTracked {
    char *name;                /* the domain's name whole, as libvirt has it (the change record's
                                * domain=, BALLOONMGR_DOMAIN): owned by the tracker, freed when
                                * the change ended and the callback returned */
    char uuid[VIR_UUID_STRING_BUFLEN];
    BmSgLabel sg;              /* the domain's SG verdict: its latency histogram */
    char why[32];              /* the policy's cause of the change (BmDecision.why); "" by hand */
    void *owner;               /* the starter's, kept with the change (the engine: its domain's
                                * ledger entry); NULL by hand */
    BmChange change;           /* outcome, from/target/reached, times */
    uint64_t rss_before_bytes; /* QEMU RSS when the change started (BM_ABSENT if unknown) */
    uint64_t rss_after_bytes;  /* ... at the last reading */
    /* internal */
    void *handle;              /* the domain's handle in the tracker's ops (libvirt: a
                                * virDomainPtr reference), NULL once the change ended */
    uint64_t started_mono_ns;
    uint64_t last_progress_mono_ns;
    uint64_t last_actual_bytes;
} BmTracked;

/* Where a tracker's changes are made and read: a domain's handle in a host (host.h: libvirt's
 * virDomainPtr, bm_balloon_libvirt_ops; a model of a host in tests/sim). set_target() sets the
 * balloon target of the domain of handle, read_live() reads its balloon and QEMU RSS (BM_ABSENT:
 * unknown) as bm_balloon_read_live() does; both return 0 or -errno with the reason
 * (bm_error()). hold() takes a reference to a handle kept while its change is in flight and
 * returns it, release() drops it (both NULL: the handle outlives the change). */
typedef struct {
    void *ctx;
    int (*set_target)(void *ctx, void *handle, uint64_t target_bytes);
    int (*read_live)(void *ctx, void *handle, uint64_t *ret_actual_bytes, uint64_t *ret_rss_bytes);
    void *(*hold)(void *ctx, void *handle);
    void (*release)(void *ctx, void *handle);
} BmBalloonOps;

/* libvirt's: a handle is a virDomainPtr. */
extern const BmBalloonOps bm_balloon_libvirt_ops;

typedef struct {
    BmWaitOptions opts;
    const BmBalloonOps *ops; /* NULL: bm_balloon_libvirt_ops */
    BmTracked *items; /* in flight */
    size_t n_items;
} BmTracker;

/* Called for every change that ended (t->change.outcome says how); t is only valid during
 * the call. */
typedef void (*BmChangeEnded)(void *ctx, const BmTracked *t);

/* Stops change i of t where its balloon is now: reads it live and sets the target there (an
 * inflate whose guest re-reads what the balloon takes is not carried on). The change ends with
 * outcome BM_CHANGE_STOPPED (BM_CHANGE_FAILED when the balloon cannot be read or set), goes to
 * ended(ctx, item) and leaves the tracker. */
void bm_tracker_stop(BmTracker *t, size_t i, BmChangeEnded ended, void *ctx);

/* The default options: BM_WAIT_DEFAULT_* */
BmWaitOptions bm_wait_options_default(void);

/* Sets dom's balloon target and starts tracking it (keeping a reference to dom; t's ops are
 * libvirt's). from_bytes
 * and rss_bytes (BM_ABSENT if unknown) are the values just read. Returns 0, or -errno with
 * the reason when the target could not be set (nothing is tracked then). */
int bm_tracker_start(BmTracker *t, virDomainPtr dom, uint64_t from_bytes, uint64_t target_bytes,
                     uint64_t rss_bytes, BmSgLabel sg);

/* The same for the domain of handle in the tracker's ops (named by its name and UUID): its
 * target set with ops->set_target(), a reference held while in flight (ops->hold()). */
int bm_tracker_start_handle(BmTracker *t, const char *name, const char *uuid, void *handle,
                            uint64_t from_bytes, uint64_t target_bytes, uint64_t rss_bytes,
                            BmSgLabel sg);

/* Reads every change in flight once; those that ended go to ended(ctx, item) and leave the
 * tracker. Returns the number still in flight. */
size_t bm_tracker_poll(BmTracker *t, BmChangeEnded ended, void *ctx);

/* The wait loop: bm_tracker_poll() every opts.poll_ms until no change is in flight or max_ms
 * passed (BM_WAIT_FOREVER: until each change ended by its own timeout or stall). Returns the
 * number still in flight. */
#define BM_WAIT_FOREVER UINT32_MAX
size_t bm_tracker_wait(BmTracker *t, uint32_t max_ms, BmChangeEnded ended, void *ctx);

/* Forgets every change in flight (connection lost), dropping the domain references. */
void bm_tracker_clear(BmTracker *t);

/* The balloon and the QEMU RSS, read live in one virDomainMemoryStats call. rss is BM_ABSENT
 * when the driver does not report it. Returns 0 or -errno. */
int bm_balloon_read_live(virDomainPtr dom, uint64_t *ret_actual_bytes, uint64_t *ret_rss_bytes);

/* ---- virtio-mem: a device's requested size, and the wait for what the guest plugs ---- */

/* Sets the requested size of dom's virtio-mem device index (in the order of its XML) through
 * virDomainUpdateDeviceFlags() with the device's own XML (bm_domxml_virtio_mem_update()): on
 * the running domain (live), or in its persistent definition (!live). Returns 0 or -errno with
 * libvirt's reason. */
int bm_vmem_set_requested(virDomainPtr dom, size_t index, uint64_t requested_bytes, bool live);

/* Sets the requested size of the running dom's virtio-mem device index (its alias in the live
 * XML: alias) and, with wait, waits for the guest to plug or unplug to it: libvirt's
 * VIR_DOMAIN_EVENT_ID_MEMORY_DEVICE_SIZE_CHANGE events of the device, dispatched by libvirt's
 * default event loop (bm_conn_event_loop_init() before dom's connection was opened), each
 * giving what the guest has plugged (QEMU sends at most one a second per device: the change
 * is timed to within that second), and the live XML's <current> read once a second beside
 * them. The sizes of *ret are the domain's (offset_bytes, its base and other devices, plus the
 * device's): from offset + from_current_bytes, target offset + requested_bytes, reached offset
 * + what the guest has plugged when the wait ended; reached when it is the requested size,
 * stalled when it did not come closer for opts->stall_ms, timeout after opts->timeout_ms,
 * failed when the domain could not be read. opts->progress is called with a BmTracked of the
 * change after each event or read that did not end it. Without wait *ret is pending. Returns
 * 0, or -errno when the size could not be set or the events not watched. */
int bm_vmem_change(virDomainPtr dom, size_t index, const char *alias, uint64_t offset_bytes,
                   uint64_t from_current_bytes, uint64_t requested_bytes, bool wait,
                   const BmWaitOptions *opts, BmChange *ret);
