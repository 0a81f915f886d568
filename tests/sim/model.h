/* A model of a host and its guests in simulated time (issue #33, part 4), behind the host
 * interface (host.h: BmHostOps), as the real host is: the real engine and policy read it, ask
 * its QEMU monitors and move its balloons.
 *
 * A guest: its balloon (moves toward its target at SIM_INFLATE_MIB_S / SIM_DEFLATE_MIB_S and
 * stalls when only memory in use is left), its kernel's memory, the anonymous memory its load
 * holds, its page cache (cold: read once; hot: a working set it re-reads all the time), and its
 * free memory, backed by the host (touched and freed) or not (never touched, taken back by a
 * balloon, returned by free page reporting). Its demand follows a schedule in the syntax of
 * bm-guest-load (tests/integration/lib/guest-load.c), plus `SECS:hot:MIB`. An allocation takes
 * free memory (backed first), then cold cache, then hot cache; what is still missing is taken
 * from the balloon with deflate-on-oom, or else is a guest OOM (the load's worker is killed,
 * its memory freed, and restarts 1 s later, as bm-guest-load's supervisor does). The QEMU RSS is
 * QEMU's own memory plus every guest page in use or free but backed; an inflate takes free
 * memory (the pages freed last, backed, first), then cold and hot cache, and gives the host
 * the backed part. A hot working set short of its size is re-read from disk: disk read
 * bytes and major faults rise and the guest's work rate drops. The guest's statistics are a
 * copy taken every whole second (the stats period).
 *
 * The host: MemTotal, memory of its own, a hog (a process following a schedule of the same
 * syntax, never taking MemAvailable below its floor), the QEMU processes' RSS, and the per-CPU
 * free lists of Linux >= 6.8 (a share of what the QEMU processes free lands there, out of
 * MemAvailable, trimmed by 8 MiB a CPU a second or by the engine's drain).
 *
 * A guest's CPU time: one vCPU busy while it re-reads a hot working set, 2% of one otherwise.
 *
 * Its QEMU monitor: the balloon's features (the probe: statistics, deflate-on-oom and free page
 * reporting negotiated as configured, no SG) and, for a guest of Linux 6.12 (SimGuest.k612),
 * the starvation statistics of qom-get guest-stats: its OOM kills, and the page cache its
 * allocations reclaimed themselves (direct reclaim: an allocation short of free memory takes
 * cache, one stall per 256 KiB; what it re-reads of a hot cache comes the same way). A long
 * libvirt job (a dump) holds a guest between job_from and job_until.
 *
 * A virtio-mem guest (sim_guest_vmem()): its memory is base memory and what one virtio-mem
 * device has plugged, in blocks; its balloon sends the statistics but returns nothing (VFIO
 * pins every page, as it pins what is plugged), so the device is what moves. It unplugs a block
 * at its unplug rate when it can move what is in it (free memory and page cache cover it) and
 * never below vmem_keep plugged (the part of the device holding memory it cannot move: it
 * stops there, asked or not); it plugs at SIM_DEFLATE_MIB_S. Its QEMU RSS falls by each block
 * unplugged (coordinated discards) and rises by each plugged (pinned).
 *
 * A virtio-mem guest may be backed by huge pages (sim_guest_vmem_hugepages()): all of its
 * memory comes from the host's huge-page pool (SimHost.hp_total, hp_free: reserved, out of
 * MemAvailable), none of it is in its QEMU RSS, a block it unplugs goes back to the pool's
 * free pages and one it plugs takes one (none free: it cannot plug, and stops).
 *
 * Not modelled: PSI (always 0), swap, KSM (not readable), libvirt's lagging copy of the balloon
 * (the engine reads the live one), QEMU's own memory growing, kswapd (all reclaim is direct). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "host.h"

#define SIM_MIB (1024.0 * 1024.0)
/* balloon speeds measured in bench/scenario/reference (TCG guests on 2 cores): its three
 * first inflates at once went at 44-64 MiB/s each (the run of 2026-12-04; the machine of the
 * 2026-12-01 run inflated at 153-210 MiB/s and deflated as fast as this one, that of 2026-12-06
 * at 406-565). A guest's own speed is SimGuest.inflate_mib_s; test-sim's calibration sets it to
 * its reference run's. */
#define SIM_INFLATE_MIB_S 55.0
#define SIM_DEFLATE_MIB_S 1000.0

typedef enum { SIM_HOLD, SIM_TOUCH, SIM_CACHE, SIM_HOT } SimItemKind;

typedef struct {
    double at_s;
    double mib;
    double rate_mib_s; /* 0: as fast as the guest touches memory */
    SimItemKind kind;
} SimItem;

#define SIM_MAX_ITEMS 64

/* A demand schedule: bm-guest-load's SCHEDULE, ITEM[,ITEM...] with times ascending, each
 * SECS:MIB, SECS:MIB@RATE, SECS:touch:MIB, SECS:cache:MIB, or the model's SECS:hot:MIB. */
typedef struct {
    SimItem items[SIM_MAX_ITEMS];
    size_t n;
} SimSchedule;

/* Parses text into *ret. Returns 0 or -EINVAL. */
int sim_schedule_parse(const char *text, SimSchedule *ret);

typedef struct {
    char name[64];
    char uuid[37];
    bool autodeflate, reporting;
    /* bytes */
    double max, reserved, actual, target;
    double kernel, anon, cold, hot, hot_ws;
    double free_backed, free_unbacked;
    double inflate_mib_s; /* its balloon's inflate speed (SIM_INFLATE_MIB_S unless set) */
    /* the load */
    SimSchedule sched;
    double start_s;     /* when its schedule's t=0 is */
    size_t phase;       /* items started so far */
    double want;        /* the anonymous memory the current phase holds at full growth */
    double rate;        /* bytes/s of growth (0: fast) */
    double cache_want;  /* cold cache still to read */
    bool touching;      /* a touch item: free what it wrote once it reached want */
    double restart_at;  /* after an OOM kill: the worker restarts then (< 0: running) */
    bool growing;       /* the load's memory grew in the last step */
    /* counters */
    unsigned oom_kills;
    double rd_bytes, major_faults, work, work_time;
    double cpu_ns;      /* its vCPUs' time: one CPU while it re-reads a hot working set, 2% of
                         * one otherwise (an idle TCG guest), or cpu_share */
    double cpu_share;   /* >= 0: its vCPUs' share of a CPU whatever it does (a hot cache read
                         * by a guest that looks idle: sendfile, a file server) */
    double work_rate;   /* of the last step: 1 with the hot set in cache */
    bool k612;          /* Linux 6.12: its monitor has the starvation statistics */
    double stalls, direct_reclaim; /* allocation stalls, bytes reclaimed by its allocations */
    double job_from, job_until; /* a long libvirt job (a dump) holds it in [from, until) */
    unsigned probes;    /* its monitor asked for the balloon's features */
    double first_oom_t; /* when its first OOM kill came (< 0: none) */
    /* virtio-mem (sim_guest_vmem()): actual is base + plugged, max base + size, target base +
     * requested */
    bool vmem;
    double vmem_base, vmem_size, vmem_block, vmem_requested, vmem_plugged;
    double vmem_keep;       /* it unplugs no further than this plugged */
    double vmem_unplug_mib_s; /* its unplug rate */
    double vmem_step;       /* progress toward the next block */
    unsigned vmem_asked;    /* requested sizes set on it */
    bool vmem_hugepages;    /* its memory is the host's huge pages (not in its RSS) */
    bool buffered;      /* its hot working set is re-read with read(): a miss is a disk read
                         * but no major fault (else through mmap: a fault each page) */
    /* statistics as of the last whole second */
    struct {
        double avail, usable, unused, caches, majflt, oom_kills, stalls, direct_reclaim;
        uint64_t at_s;
    } st;
} SimGuest;

typedef struct {
    double t;               /* seconds since the start */
    uint64_t epoch_ns;      /* wall clock at t = 0 */
    double total, other;    /* bytes */
    /* the hog */
    SimSchedule hog_sched;
    double hog, hog_start, hog_end, hog_size, hog_floor;
    /* the per-CPU lists: share of freed RSS landing there (0: before 6.8), what they hold */
    double percpu_share, percpu_excess;
    unsigned cpus;
    bool own_unmeasured;    /* QEMU's own memory not measured per domain (no access to the QEMU
                             * processes): the host-wide estimate serves */
    uint64_t percpu_drain_writes;
    /* the huge-page pool of the default size (bytes): reserved out of MemAvailable; 0: none */
    double hp_total, hp_free;
    SimGuest *g;
    size_t n;
    BmClock clock;
    /* called after each advance of dt seconds (the simulation's measures) */
    void (*observer)(void *ctx, double dt);
    void *observer_ctx;
    BmBalloonOps balloon;
    BmHostOps ops;          /* the host interface onto the model (ctx: the SimHost) */
} SimHost;

/* A host of total_bytes with other_bytes of its own and n guests (their fields from
 * sim_guest_init()). */
void sim_host_init(SimHost *h, double total_bytes, double other_bytes, size_t n);
void sim_host_clear(SimHost *h);

/* Guest i: max_bytes, named name, its load schedule (NULL: none) from start_s. Returns 0 or
 * -EINVAL for a bad schedule. */
int sim_guest_init(SimHost *h, size_t i, const char *name, double max_bytes, const char *schedule,
                   double start_s);

/* Makes guest i (after sim_guest_init(), with its max the base memory) a virtio-mem guest: one
 * device of size_bytes with plugged_bytes plugged in blocks of block_bytes, unplugging at
 * unplug_mib_s and no further than keep_bytes plugged; every page pinned (VFIO). */
void sim_guest_vmem(SimHost *h, size_t i, double size_bytes, double block_bytes,
                    double plugged_bytes, double keep_bytes, double unplug_mib_s);

/* Makes virtio-mem guest i (sim_guest_vmem()) one backed by huge pages: a pool of pool_bytes
 * is reserved on the host, and the guest's memory taken from it. */
void sim_guest_vmem_hugepages(SimHost *h, size_t i, double pool_bytes);

/* The hog: its schedule from start_s to end_s, growing until size_bytes, never below floor. */
int sim_host_hog(SimHost *h, const char *schedule, double start_s, double end_s, double size_bytes,
                 double floor_bytes);

/* Advances the model by dt seconds (in steps of at most 50 ms). */
void sim_advance(SimHost *h, double dt);

/* The host's MemAvailable; a guest's QEMU RSS, usable memory (MemAvailable) now. */
double sim_available(const SimHost *h);
double sim_rss(const SimGuest *g);
double sim_usable(const SimGuest *g);
double sim_free(const SimGuest *g);
