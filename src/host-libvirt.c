/* The real host behind the host interface (host.h): /proc and /sys through hostmem.c, ksm.c and
 * qemuproc.c, the domains and their balloons through libvirt (snapshot.c, balloon.c, qmp.c),
 * each domain reached through the handle its reading kept. */
#include "host.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "error.h"
#include "qemuproc.h"
#include "qmp.h"
#include "util.h"

typedef struct {
    const char *proc_dir;       /* NULL: /proc */
    const char *qemu_run_dir;   /* given; NULL: the connection's */
    virConnectPtr conn;
    char run_dir[512];          /* libvirt's QEMU state directory ("": none, not measured) */
} HostLibvirt;

static void lv_boot_id(void *ctx, char *buf, size_t n)
{
    const HostLibvirt *h = ctx;
    bm_hostmem_read_boot_id(h->proc_dir, buf, n);
}

static void lv_set_conn(void *ctx, virConnectPtr conn)
{
    HostLibvirt *h = ctx;
    h->conn = conn;
    h->run_dir[0] = '\0';
    if (h->qemu_run_dir)
        snprintf(h->run_dir, sizeof(h->run_dir), "%s", h->qemu_run_dir);
    else if (conn && !bm_conn_qemu_run_dir(conn, h->run_dir, sizeof(h->run_dir)))
        h->run_dir[0] = '\0';
}

static int lv_read_meminfo(void *ctx, BmHost *ret)
{
    const HostLibvirt *h = ctx;
    return bm_hostmem_read(h->proc_dir, ret);
}

static int lv_read_percpu(void *ctx, BmHost *ret)
{
    const HostLibvirt *h = ctx;
    return bm_hostmem_read_percpu(h->proc_dir, ret);
}

static int lv_drain_percpu(void *ctx, BmHost *hm, uint64_t *ret_drained)
{
    const HostLibvirt *h = ctx;
    return bm_hostmem_drain_percpu(h->proc_dir, hm, ret_drained);
}

static int lv_read_ksm(void *ctx, BmKsm *ret)
{
    (void)ctx;
    return bm_ksm_read(NULL, ret);
}

static int lv_read_domains(void *ctx, const BmXmlCache *cache, BmSnapshot *ret)
{
    const HostLibvirt *h = ctx;
    if (!h->conn)
        return bm_error(-ENOTCONN, "not connected to libvirt");
    return bm_snapshot_take_cached(h->conn, BM_SNAPSHOT_XML | BM_SNAPSHOT_HANDLES, cache, ret);
}

/* What the QEMU RSS of the running domain d holds beside its guest's memory: the RSS less the
 * resident part of the guest RAM mapping, plus what its kernel keeps outside its total (balloon
 * size less MemTotal, less the balloon's pages where deflate-on-oom keeps them in it). */
static int lv_measure_qemu(void *ctx, BmDomain *d)
{
    const HostLibvirt *h = ctx;
    if (!h->run_dir[0])
        return -ENOTSUP; /* another driver, a remote host: not this host's processes */
    pid_t pid;
    uint64_t ram = 0;
    int r = bm_qemuproc_pid(h->run_dir, d->name, &pid);
    if (r >= 0)
        r = bm_qemuproc_ram_resident(h->proc_dir, pid, d->max_bytes, &ram);
    if (r < 0)
        return r;
    uint64_t total = d->available_bytes, held = bm_domain_reclaimed_bytes(d);
    if (d->balloon_known && d->balloon.autodeflate == BM_TRI_ON && bm_present(held) && bm_present(total))
        total -= total < held ? total : held;
    uint64_t reserved = bm_present(total) && d->actual_bytes > total ? d->actual_bytes - total : 0;
    d->qemu_own_bytes = (d->rss_bytes > ram ? d->rss_bytes - ram : 0) + reserved;
    d->qemu_own_known = true;
    return 0;
}

static int lv_read_starve(void *ctx, const BmDomain *d, char *qom_path, size_t n, BmStarveStats *ret)
{
    (void)ctx;
    if (!d->handle)
        return -ENOTCONN;
    int r = 0;
    if (!qom_path[0]) {
        _cleanup_free_ char *path = NULL;
        r = bm_qmp_balloon_path(d->handle, &path);
        if (r >= 0 && strlen(path) >= n)
            r = bm_error(-ENAMETOOLONG, "the balloon's QOM path is longer than %zu bytes", n - 1);
        if (r >= 0)
            snprintf(qom_path, n, "%s", path);
    }
    if (r >= 0)
        r = bm_qmp_read_starve_stats(d->handle, qom_path, ret);
    return r;
}

static int lv_probe(void *ctx, const BmDomain *d, BmFeatureReport *ret, char *qom_path, size_t n)
{
    (void)ctx;
    if (!d->handle)
        return -ENOTCONN;
    BmFeatureOptions fo = {.sg_bit = BM_SG_DEFAULT_BIT};
    char *path = NULL, *err = NULL;
    bm_qmp_probe_balloon(d->handle, &fo, ret, &path, &err);
    if (path && strlen(path) < n)
        snprintf(qom_path, n, "%s", path);
    free(path);
    free(err);
    return 0;
}

static int lv_job_running(void *ctx, const BmDomain *d, const char **ret_what)
{
    (void)ctx;
    return d->handle ? bm_balloon_job_running(d->handle, ret_what) : 0;
}

static void lv_free(void *ctx)
{
    free(ctx);
}

BmHostOps bm_host_libvirt(const char *proc_dir, const char *qemu_run_dir)
{
    HostLibvirt *h = bm_malloc0(sizeof(*h));
    h->proc_dir = proc_dir;
    h->qemu_run_dir = qemu_run_dir;
    return (BmHostOps){.ctx = h,
                       .boot_id = lv_boot_id,
                       .set_conn = lv_set_conn,
                       .read_meminfo = lv_read_meminfo,
                       .read_percpu = lv_read_percpu,
                       .drain_percpu = lv_drain_percpu,
                       .read_ksm = lv_read_ksm,
                       .read_domains = lv_read_domains,
                       .measure_qemu = lv_measure_qemu,
                       .read_starve = lv_read_starve,
                       .probe = lv_probe,
                       .job_running = lv_job_running,
                       .balloon = &bm_balloon_libvirt_ops,
                       .free = lv_free};
}
