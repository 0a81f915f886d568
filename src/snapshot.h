/* One reading of the domains' memory: plain structs, taken with as few libvirt calls as the
 * driver allows. */
#pragma once

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "domxml.h"
#include "yield.h"

/* Linux 6.12's own statistics of a guest starving (virtio-balloon statistics tags 10-15, sent
 * by Linux 6.10 and later), cumulative since the guest booted. libvirt (up to 12.9) does not
 * pass them on: they are read through the QEMU monitor (qom-get guest-stats, names of QEMU
 * 9.2 and later; qmp.c), and only where the policy's verify_features lets the monitor be
 * asked. BM_ABSENT where they were not read, or QEMU or the guest does not have them. */
typedef struct {
    uint64_t oom_kills;            /* OOM kills (stat-oom-kills) */
    uint64_t alloc_stalls;         /* allocations that entered direct reclaim (stat-alloc-stalls) */
    uint64_t async_scan_bytes;     /* memory kswapd scanned (stat-async-scans) */
    uint64_t direct_scan_bytes;    /* memory direct reclaim scanned (stat-direct-scans) */
    uint64_t async_reclaim_bytes;  /* memory kswapd reclaimed (stat-async-reclaims) */
    uint64_t direct_reclaim_bytes; /* memory direct reclaim reclaimed (stat-direct-reclaims) */
} BmStarveStats;

/* A BmStarveStats of nothing read: every field BM_ABSENT. */
#define BM_STARVE_STATS_ABSENT                                                                     \
    ((BmStarveStats){BM_ABSENT, BM_ABSENT, BM_ABSENT, BM_ABSENT, BM_ABSENT, BM_ABSENT})

/* One domain. Every size is in bytes; a statistic the driver or guest did not report is
 * BM_ABSENT. */
typedef struct {
    char *name;
    char uuid[VIR_UUID_STRING_BUFLEN];
    int state;                  /* virDomainState */
    int id;                     /* libvirt's domain id, new at each start; -1 when not running */
    bool active;
    uint64_t max_bytes;         /* maximum memory */
    uint64_t actual_bytes;      /* balloon current: memory the guest has now */
    uint64_t available_bytes;   /* guest's total usable RAM as the guest sees it */
    uint64_t usable_bytes;      /* guest could use without swapping (MemAvailable) */
    uint64_t unused_bytes;      /* guest free memory (MemFree) */
    uint64_t disk_caches_bytes; /* guest page cache that can be dropped */
    uint64_t rss_bytes;         /* resident memory of the QEMU process on the host */
    uint64_t swap_in_bytes;     /* cumulative, from the guest */
    uint64_t swap_out_bytes;
    uint64_t major_faults;      /* cumulative count */
    uint64_t minor_faults;
    uint64_t last_update_s;     /* epoch seconds of the guest's last stats update */
    uint64_t disk_read_bytes;   /* read from all its disks, cumulative (QEMU's block stats:
                                 * a guest that refaults its page cache reads it again) */
    uint64_t disk_read_reqs;    /* read requests of all its disks, cumulative */
    uint64_t cpu_time_ns;       /* CPU time of the domain (cpu.time), cumulative: a guest whose
                                 * vCPUs idle is using no page cache */
    uint64_t read_real_ns;      /* wall clock of this reading (the engine sets the snapshot's);
                                 * 0: not known (a hand-made domain): its rates then count whole
                                 * seconds */
    bool balloon_known;         /* balloon config read from the XML */
    BmBalloonConfig balloon;
    /* Moved through its virtio-mem devices (bm_domain_move_by()): max_bytes and actual_bytes
     * are then its base memory plus the devices' sizes and plus what they plugged; libvirt's
     * own figures (the balloon's) are kept in balloon_max_bytes and balloon_actual_bytes.
     * vmem_auto: the reading's choice, as `set` chooses (bm_vmem_moves_domain()), which the
     * policy's key device may override (the rows, bm_rows_set_policy()) */
    bool vmem, vmem_auto;
    uint64_t balloon_max_bytes, balloon_actual_bytes;
    /* What the QEMU RSS holds beside the guest's memory: QEMU's own (the RSS less the resident
     * part of the guest RAM mapping, /proc/PID/smaps) and what the guest's kernel keeps outside
     * its MemTotal (balloon size less its total). Not in libvirt's reading; the engine measures
     * it (qemuproc.h) when a take may come, on this host's QEMU driver; where it is not known,
     * the host-wide estimate of QEMU's own memory serves (yield.h) */
    bool qemu_own_known;
    uint64_t qemu_own_bytes;
    /* Linux 6.12's starvation statistics: not in libvirt's reading; the engine adds them
     * through the QEMU monitor where the policy allows it (all BM_ABSENT otherwise) */
    BmStarveStats starve;
    char *error;                /* why part of this domain could not be read, or NULL */
    void *handle;               /* the domain in the host that read it, kept with the reading
                                 * (BM_SNAPSHOT_HANDLES: a virDomainPtr reference; a model's own),
                                 * so that no later step looks it up again; NULL: none kept */
} BmDomain;

typedef struct {
    BmDomain *domains;          /* sorted by name */
    size_t n_domains;
    const BmDomain **by_uuid;   /* the same, sorted by UUID (NULL in a hand-made snapshot) */
    uint64_t taken_real_ns;     /* wall clock when the reading was taken */
    uint64_t boot_real_s;       /* wall clock when this machine booted (0: not known) */
    bool bulk;                  /* the bulk stats call worked (per-domain calls may add to it) */
    unsigned libvirt_calls;     /* calls made, for benchmarks */
    void (*release)(void *handle); /* drops a domain's handle (bm_snapshot_clear(),
                                    * bm_snapshot_drop_handles()); NULL: nothing to drop */
} BmSnapshot;

enum {
    BM_SNAPSHOT_ACTIVE_ONLY = 1 << 0, /* skip shut-off domains */
    BM_SNAPSHOT_XML = 1 << 1,         /* also read each domain's balloon config */
    BM_SNAPSHOT_HANDLES = 1 << 2,     /* keep a reference to each domain (BmDomain.handle) */
};

/* Reads every domain (the running ones with BM_SNAPSHOT_ACTIVE_ONLY) with its state and
 * balloon statistics: one virConnectGetAllDomainStats() call where the driver returns balloon
 * stats, per-domain virDomainMemoryStats() otherwise. A domain that fails to read gets
 * ->error and the others are still read; the domains a user names are picked out of the
 * reading (bm_snapshot_pick()). Returns 0 and *ret (free with bm_snapshot_clear()), or -errno
 * when the domains cannot be listed. */
int bm_snapshot_take(virConnectPtr conn, unsigned flags, BmSnapshot *ret);

/* Where a long-running caller keeps balloon configs read from the XML, so a pass does not
 * read every domain's XML again: lookup() returns true and fills *ret for a UUID whose config
 * is still valid; store() keeps a freshly read one. A domain with virtio-mem devices has its
 * XML read at every reading all the same (the devices' <current> moves without an event
 * that would drop the config). */
typedef struct {
    void *ctx;
    bool (*lookup)(void *ctx, const char *uuid, BmBalloonConfig *ret);
    void (*store)(void *ctx, const char *uuid, const BmBalloonConfig *cfg);
} BmXmlCache;

/* bm_snapshot_take() with BM_SNAPSHOT_XML served from cache where it can. */
int bm_snapshot_take_cached(virConnectPtr conn, unsigned flags, const BmXmlCache *cache,
                            BmSnapshot *ret);

/* The domains of s that names (NULL-terminated) name, by ID, UUID or name as bm_conn_lookup()
 * resolves them on conn: pointers into s, in s's order (by name), a domain named twice
 * twice; a domain defined after s was taken is not in it and left out. Returns 0 and *ret
 * (*ret_n entries; caller frees the array, not the domains), or -ENOENT naming an unknown
 * domain ("'NAME': no domain with this name, ID or UUID"). */
int bm_snapshot_pick(virConnectPtr conn, const BmSnapshot *s, char *const *names,
                     const BmDomain ***ret, size_t *ret_n);

/* A domain with nothing read: every statistic BM_ABSENT, no state. */
void bm_snapshot_domain_init(BmDomain *d);

/* Fills d from one bulk-stats record's parameters: state, balloon statistics, CPU time, the
 * sums of its disks' reads (block.N.rd.bytes, rd.reqs: absent unless every disk of
 * block.count reported its counter). Values beyond BM_COUNT_MAX, negative ones and unknown
 * keys are left absent. Pure. */
void bm_snapshot_fill_domain(BmDomain *d, const virTypedParameter *params, int n);

/* Indexes s's domains by UUID: s->by_uuid, allocated anew (what a reading does once its domains
 * are in place; a model of a host, in the tests, does it with a reading it made). */
void bm_snapshot_index_uuid(BmSnapshot *s);

/* Frees what a snapshot holds (its handles too) and zeroes it. NULL-safe. */
void bm_snapshot_clear(BmSnapshot *s);

/* Drops every domain's handle (the connection they belong to is gone): the reading stays. */
void bm_snapshot_drop_handles(BmSnapshot *s);

/* The domain called name in s, or NULL. */
const BmDomain *bm_snapshot_find(const BmSnapshot *s, const char *name);

/* The domain with that UUID in s, or NULL. O(log n) in a snapshot taken by bm_snapshot_take(). */
const BmDomain *bm_snapshot_find_uuid(const BmSnapshot *s, const char *uuid);

/* Makes d's sizes its virtio-mem devices' (vmem: what it has is its base memory plus what they
 * plugged, at most plus their sizes; only for a running domain whose figures are all known)
 * or libvirt's (balloon_max_bytes, balloon_actual_bytes). Returns whether d is moved through
 * virtio-mem now (d->vmem). Pure. */
bool bm_domain_move_by(BmDomain *d, bool vmem);

/* A domain's run state: "running", "shut off", ... as virsh says them. */
const char *bm_snapshot_run_state_name(int state);

/* What the guest's statistics say it has room for: usable (MemAvailable), or unused + disk
 * caches from an older driver; BM_ABSENT if neither is reported. */
static inline uint64_t bm_domain_headroom_bytes(const BmDomain *d)
{
    if (d->usable_bytes != UINT64_MAX)
        return d->usable_bytes;
    if (d->unused_bytes == UINT64_MAX)
        return UINT64_MAX;
    return d->unused_bytes + (d->disk_caches_bytes != UINT64_MAX ? d->disk_caches_bytes : 0);
}

/* What the guest uses: its total memory (as it sees it) less its headroom; BM_ABSENT if
 * either is unknown. */
static inline uint64_t bm_domain_used_bytes(const BmDomain *d)
{
    uint64_t headroom = bm_domain_headroom_bytes(d);
    if (d->available_bytes == UINT64_MAX || headroom == UINT64_MAX)
        return UINT64_MAX;
    return d->available_bytes > headroom ? d->available_bytes - headroom : 0;
}

/* Free guest memory the domain's QEMU process holds (backed free): its RSS minus what the
 * guest uses minus QEMU's own memory (measured, qemu_own_bytes; else qemu_overhead_bytes, the
 * host-wide estimate: BmPlan.qemu_overhead_bytes, yield.h),
 * at least 0; BM_ABSENT for a domain not running or paused, or when the RSS or the guest's
 * statistics are unknown (yield.h: bm_yield_backed_free_net()). */
static inline uint64_t bm_domain_backed_free_bytes(const BmDomain *d, uint64_t qemu_overhead_bytes)
{
    if (!d->active)
        return UINT64_MAX;
    return bm_yield_backed_free_net(d->rss_bytes, bm_domain_used_bytes(d),
                                    d->qemu_own_known ? d->qemu_own_bytes : qemu_overhead_bytes);
}

/* Bytes the balloon holds back from the guest: max - actual; BM_ABSENT if either is unknown,
 * 0 if the balloon is above the maximum. */
static inline uint64_t bm_domain_reclaimed_bytes(const BmDomain *d)
{
    if (d->max_bytes == UINT64_MAX || d->actual_bytes == UINT64_MAX)
        return UINT64_MAX;
    if (d->actual_bytes > d->max_bytes)
        return 0;
    return d->max_bytes - d->actual_bytes;
}
