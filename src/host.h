/* The host a pass reads and acts on, behind one table of operations (docs/design.md, "The host
 * interface"): the real host, /proc and libvirt (host-libvirt.c), or a model of one (tests/sim
 * runs the real engine on it in simulated time). The engine calls only these; it has no branch
 * on which host it runs. */
#pragma once

#include <libvirt/libvirt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "balloon.h"
#include "clock.h"
#include "feature.h"
#include "hostmem.h"
#include "ksm.h"
#include "snapshot.h"

/* Each function gets ctx and returns 0 (drain_percpu: the writes it made; job_running: 1 when
 * a job runs) or -errno with the reason (bm_error()), as the reader it stands for. A domain is
 * given as it was read (BmDomain.handle: the host's own reference, kept with the reading, so no
 * operation looks a domain up again).
 *   boot_id        the host's boot id into buf (n bytes; "" when unknown)
 *   set_conn       the libvirt connection the host's domains are reached through (NULL: none;
 *                  a model has none and ignores it)
 *   read_meminfo   MemTotal, MemAvailable and PSI (bm_hostmem_read())
 *   read_percpu    the per-CPU free lists into percpu_* (bm_hostmem_read_percpu())
 *   drain_percpu   gives the lists above their rest back (bm_hostmem_drain_percpu())
 *   read_ksm       the KSM counters (bm_ksm_read())
 *   read_domains   every domain with its balloon config and its handle (bm_snapshot_take_cached()
 *                  with BM_SNAPSHOT_XML | BM_SNAPSHOT_HANDLES), XML from cache where it can;
 *                  freed with bm_snapshot_clear()
 *   measure_qemu   QEMU's own memory of the running domain d into d->qemu_own_* (qemuproc.h);
 *                  -ENOTSUP where it is not measured (another driver), -ENOENT where its
 *                  process is gone: neither is worth a log line
 *   read_starve    Linux 6.12's starvation statistics of d (the QEMU monitor's qom-get
 *                  guest-stats) into *ret, with the balloon's QOM path cached in qom_path
 *                  (n bytes; "" to find it); -ENOTSUP where QEMU or the guest has none,
 *                  -ESRCH where d stopped, -ENOTCONN without a connection
 *   probe          the balloon's features as QEMU's monitor says (x-query-virtio-status) into
 *                  *ret, its QOM path into qom_path (n bytes) where found
 *   job_running    whether a long job (dump, migration, ...) holds d: 1 and its operation in
 *                  *ret_what (static text), 0 when none, -errno (-ECONNRESET: the connection
 *                  is lost)
 *   balloon        setting a target and reading it back, on a domain's handle (the tracker's)
 *   clock          the time and sleeps of the engine and its tracker (NULL: the system's)
 *   free           frees ctx (NULL: the caller owns it) */
typedef struct BmHostOps {
    void *ctx;
    void (*boot_id)(void *ctx, char *buf, size_t n);
    void (*set_conn)(void *ctx, virConnectPtr conn);
    int (*read_meminfo)(void *ctx, BmHost *ret);
    int (*read_percpu)(void *ctx, BmHost *ret);
    int (*drain_percpu)(void *ctx, BmHost *h, uint64_t *ret_drained_bytes);
    int (*read_ksm)(void *ctx, BmKsm *ret);
    int (*read_domains)(void *ctx, const BmXmlCache *cache, BmSnapshot *ret);
    int (*measure_qemu)(void *ctx, BmDomain *d);
    int (*read_starve)(void *ctx, const BmDomain *d, char *qom_path, size_t n, BmStarveStats *ret);
    int (*probe)(void *ctx, const BmDomain *d, BmFeatureReport *ret, char *qom_path, size_t n);
    int (*job_running)(void *ctx, const BmDomain *d, const char **ret_what);
    const BmBalloonOps *balloon;
    const BmClock *clock;
    void (*free)(void *ctx);
} BmHostOps;

/* The real host: its /proc under proc_dir (NULL: /proc; the boot id, meminfo, PSI, zoneinfo,
 * stat_refresh, PIDs' smaps), /sys/kernel/mm/ksm, and libvirt through the connection given with
 * set_conn(); QEMU's own memory measured from libvirt's QEMU state directory qemu_run_dir
 * (NULL: the connection's, bm_conn_qemu_run_dir(); none: not measured). ctx is freed by free(). */
BmHostOps bm_host_libvirt(const char *proc_dir, const char *qemu_run_dir);
