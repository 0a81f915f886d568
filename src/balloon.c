#include "balloon.h"

#include <stdio.h>
#include <string.h>


#include <errno.h>
#include <inttypes.h>

#include "conn.h"
#include "domxml.h"
#include "error.h"
#include "util.h"
#include "vmem.h"

const char *const bm_dir_names[BM_DIR_COUNT] = {"inflate", "deflate"};
const char *const bm_device_names[BM_DEV_COUNT] = {"balloon", "virtio_mem"};
const char *const bm_outcome_names[BM_CHANGE_ENDED_COUNT] = {"reached", "timeout", "stalled", "failed",
                                                            "stopped"};

const char *bm_change_outcome_name(BmChangeOutcome o)
{
    switch (o) {
    case BM_CHANGE_REACHED: return "reached";
    case BM_CHANGE_TIMEOUT: return "timeout";
    case BM_CHANGE_STALLED: return "stalled";
    case BM_CHANGE_FAILED: return "failed";
    case BM_CHANGE_STOPPED: return "stopped";
    case BM_CHANGE_PENDING: return "pending";
    }
    return "unknown";
}

const char *bm_change_direction(uint64_t from_bytes, uint64_t target_bytes)
{
    if (target_bytes < from_bytes)
        return "inflate";
    if (target_bytes > from_bytes)
        return "deflate";
    return "none";
}

int bm_balloon_read_live(virDomainPtr dom, uint64_t *ret_actual_bytes, uint64_t *ret_rss_bytes)
{
    virDomainMemoryStatStruct st[VIR_DOMAIN_MEMORY_STAT_NR];
    int n = BM_LV(virDomainMemoryStats)(dom, st, VIR_DOMAIN_MEMORY_STAT_NR, 0);
    if (n < 0)
        return bm_conn_error("cannot read the balloon");
    bool have_actual = false;
    *ret_rss_bytes = BM_ABSENT;
    for (int i = 0; i < n; i++) {
        if (st[i].tag == VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON) {
            *ret_actual_bytes = bm_reported(st[i].val, 1024);
            have_actual = true;
        } else if (st[i].tag == VIR_DOMAIN_MEMORY_STAT_RSS) {
            *ret_rss_bytes = bm_reported(st[i].val, 1024);
        }
    }
    if (!have_actual)
        return bm_error(-ENOTSUP, "the driver does not report the balloon size");
    if (!bm_present(*ret_actual_bytes))
        return bm_error(-ERANGE, "the balloon size reported is out of range (over %" PRIu64
                        " bytes)", BM_COUNT_MAX);
    return 0;
}

int bm_balloon_read_actual(virDomainPtr dom, uint64_t *ret_bytes)
{
    uint64_t rss;
    return bm_balloon_read_live(dom, ret_bytes, &rss);
}

/* A change from from_bytes to target_bytes whose target is set at started_real_ns. */
static BmChange pending(uint64_t from_bytes, uint64_t target_bytes, uint64_t started_real_ns)
{
    return (BmChange){.outcome = BM_CHANGE_PENDING,
                      .from_bytes = from_bytes,
                      .target_bytes = target_bytes,
                      .reached_bytes = from_bytes,
                      .started_real_ns = started_real_ns};
}

static int set_live(virDomainPtr dom, uint64_t target_bytes)
{
    if (BM_LV(virDomainSetMemoryFlags)(dom, target_bytes / 1024, VIR_DOMAIN_AFFECT_LIVE) < 0)
        return bm_conn_error("cannot set the balloon target");
    return 0;
}

int bm_balloon_change(virDomainPtr dom, uint64_t from_bytes, uint64_t target_bytes, BmChange *ret)
{
    *ret = pending(from_bytes, target_bytes, bm_now_real_ns());
    return set_live(dom, target_bytes);
}

int bm_balloon_read_config(virDomainPtr dom, uint64_t *ret_max_bytes, uint64_t *ret_current_bytes)
{
    _cleanup_free_ char *xml = NULL;
    BmBalloonConfig cfg;
    int r = bm_conn_domain_xml(dom, true, &xml);
    if (r < 0 || (r = bm_domxml_parse_balloon(xml, &cfg)) < 0)
        return r;
    if (!bm_present(cfg.memory_bytes))
        return bm_error(-EINVAL, "its definition has no <memory>");
    *ret_max_bytes = cfg.memory_bytes;
    *ret_current_bytes = bm_present(cfg.current_memory_bytes) ? cfg.current_memory_bytes
                                                              : cfg.memory_bytes;
    return 0;
}

int bm_balloon_set_config(virDomainPtr dom, uint64_t target_bytes)
{
    if (BM_LV(virDomainSetMemoryFlags)(dom, target_bytes / 1024, VIR_DOMAIN_AFFECT_CONFIG) < 0)
        return bm_conn_error("cannot set the configured balloon (currentMemory)");
    return 0;
}

int bm_balloon_read_limits(virDomainPtr dom, uint64_t *ret_max_bytes, uint64_t *ret_actual_bytes)
{
    int active = BM_LV(virDomainIsActive)(dom);
    if (active < 0)
        return bm_conn_error(NULL);
    if (!active)
        return bm_error(-ESRCH, "domain is not running");
    unsigned long max_kib = BM_LV(virDomainGetMaxMemory)(dom);
    if (max_kib == 0)
        return bm_conn_error("cannot read the maximum memory");
    *ret_max_bytes = (uint64_t)max_kib * 1024;
    return bm_balloon_read_actual(dom, ret_actual_bytes);
}

static const char *job_operation_name(int op)
{
    static const char *const names[] = {"a libvirt job", "a start", "a save", "a restore",
                                        "an incoming migration", "an outgoing migration",
                                        "a snapshot", "a snapshot revert", "a dump", "a backup",
                                        "a snapshot delete"};
    return op >= 0 && (size_t)op < BM_ARRAY_SIZE(names) ? names[op] : names[0];
}

int bm_balloon_job_running(virDomainPtr dom, const char **ret_what)
{
    int type = VIR_DOMAIN_JOB_NONE, n = 0, op = VIR_DOMAIN_JOB_OPERATION_UNKNOWN;
    virTypedParameterPtr params = NULL;
    *ret_what = NULL;
    if (BM_LV(virDomainGetJobStats)(dom, &type, &params, &n, 0) < 0) {
        int r = bm_conn_error(NULL);
        return r == -ECONNRESET ? r : 0; /* no job API (test driver) or no answer: not busy */
    }
    if (params)
        virTypedParamsGetInt(params, n, VIR_DOMAIN_JOB_OPERATION, &op);
    virTypedParamsFree(params, n);
    if (type == VIR_DOMAIN_JOB_NONE || type == VIR_DOMAIN_JOB_COMPLETED)
        return 0;
    *ret_what = job_operation_name(op);
    return 1;
}

int bm_balloon_set_stats_period(virDomainPtr dom, int period_s, bool live, bool config)
{
    /* one call per side: some drivers (test) refuse LIVE|CONFIG together */
    if (live && BM_LV(virDomainSetMemoryStatsPeriod)(dom, period_s, VIR_DOMAIN_AFFECT_LIVE) < 0)
        return bm_conn_error("cannot set the stats period of the running domain");
    if (config && BM_LV(virDomainSetMemoryStatsPeriod)(dom, period_s, VIR_DOMAIN_AFFECT_CONFIG) < 0)
        return bm_conn_error("cannot set the stats period in the persistent definition");
    return 0;
}

/* ---- tracker ---- */

BmWaitOptions bm_wait_options_default(void)
{
    return (BmWaitOptions){.timeout_ms = BM_WAIT_DEFAULT_TIMEOUT_S * 1000,
                           .stall_ms = BM_WAIT_DEFAULT_STALL_S * 1000,
                           .poll_ms = BM_WAIT_DEFAULT_POLL_MS,
                           .tolerance_bytes = BM_WAIT_TOLERANCE_BYTES};
}

/* libvirt's balloon operations: a handle is a virDomainPtr */
static int lv_set_target(void *ctx, void *handle, uint64_t target_bytes)
{
    (void)ctx;
    return set_live(handle, target_bytes);
}

static int lv_read_live(void *ctx, void *handle, uint64_t *ret_actual, uint64_t *ret_rss)
{
    (void)ctx;
    return bm_balloon_read_live(handle, ret_actual, ret_rss);
}

static void *lv_hold(void *ctx, void *handle)
{
    (void)ctx;
    if (handle)
        virDomainRef(handle);
    return handle;
}

static void lv_release(void *ctx, void *handle)
{
    (void)ctx;
    if (handle)
        virDomainFree(handle);
}

static int read_vmem_current(virDomainPtr dom, size_t index, uint64_t *ret);

static int lv_set_requested(void *ctx, void *handle, size_t index, uint64_t requested_bytes)
{
    (void)ctx;
    return bm_vmem_set_requested(handle, index, requested_bytes, true);
}

/* what the device has plugged (the live XML), and the QEMU RSS where libvirt reports it */
static int lv_read_plugged(void *ctx, void *handle, size_t index, uint64_t *ret_plugged,
                           uint64_t *ret_rss)
{
    (void)ctx;
    uint64_t actual;
    if (bm_balloon_read_live(handle, &actual, ret_rss) < 0)
        *ret_rss = BM_ABSENT;
    return read_vmem_current(handle, index, ret_plugged);
}

const BmBalloonOps bm_balloon_libvirt_ops = {.set_target = lv_set_target, .read_live = lv_read_live,
                                             .set_requested = lv_set_requested,
                                             .read_plugged = lv_read_plugged,
                                             .hold = lv_hold, .release = lv_release};

static const BmBalloonOps *ops_of(const BmTracker *t)
{
    return t->ops ? t->ops : &bm_balloon_libvirt_ops;
}

/* Sets the target of the change through t's ops on handle (the balloon's, or with vmem the
 * requested size of its device: x's vmem fields) and adds it to t. */
static int track(BmTracker *t, void *handle, const char *name, const char *uuid,
                 uint64_t from_bytes, uint64_t target_bytes, uint64_t rss_bytes, BmSgLabel sg,
                 const BmTracked *vmem)
{
    const BmBalloonOps *ops = ops_of(t);
    BmTracked x = {0};
    const BmClock *clock = t->opts.clock;
    uint64_t t0 = bm_clock_mono_ns(clock);
    x.change = pending(from_bytes, target_bytes, bm_clock_real_ns(clock));
    int r;
    if (vmem) {
        x.vmem = true;
        x.vmem_index = vmem->vmem_index;
        x.vmem_offset_bytes = vmem->vmem_offset_bytes;
        x.last_read_mono_ns = t0;
        r = ops->set_requested ? ops->set_requested(ops->ctx, handle, x.vmem_index,
                                                    target_bytes - x.vmem_offset_bytes)
                               : bm_error(-ENOTSUP, "the host moves no virtio-mem device");
    } else {
        r = ops->set_target(ops->ctx, handle, target_bytes);
    }
    if (r < 0)
        return r;
    x.name = bm_strdup(name ? name : "");
    snprintf(x.uuid, sizeof(x.uuid), "%s", uuid);
    x.sg = sg;
    x.rss_before_bytes = rss_bytes;
    x.rss_after_bytes = BM_ABSENT;
    x.handle = ops->hold ? ops->hold(ops->ctx, handle) : handle;
    x.started_mono_ns = x.last_progress_mono_ns = t0;
    x.last_actual_bytes = from_bytes;
    t->items = bm_reallocarray(t->items, t->n_items + 1, sizeof(BmTracked));
    t->items[t->n_items++] = x;
    return 0;
}

int bm_tracker_start(BmTracker *t, virDomainPtr dom, uint64_t from_bytes, uint64_t target_bytes,
                     uint64_t rss_bytes, BmSgLabel sg)
{
    char uuid[VIR_UUID_STRING_BUFLEN];
    if (virDomainGetUUIDString(dom, uuid) < 0)
        uuid[0] = '\0';
    return track(t, dom, virDomainGetName(dom), uuid, from_bytes, target_bytes, rss_bytes, sg,
                 NULL);
}

int bm_tracker_start_handle(BmTracker *t, const char *name, const char *uuid, void *handle,
                            uint64_t from_bytes, uint64_t target_bytes, uint64_t rss_bytes,
                            BmSgLabel sg)
{
    return track(t, handle, name, uuid, from_bytes, target_bytes, rss_bytes, sg, NULL);
}

int bm_tracker_start_vmem(BmTracker *t, const char *name, const char *uuid, void *handle,
                          size_t index, uint64_t offset_bytes, uint64_t from_plugged_bytes,
                          uint64_t requested_bytes, uint64_t rss_bytes, BmSgLabel sg)
{
    if (offset_bytes > BM_COUNT_MAX - from_plugged_bytes ||
        offset_bytes > BM_COUNT_MAX - requested_bytes)
        return bm_error(-ERANGE, "virtio-mem sizes out of range");
    BmTracked v = {.vmem = true, .vmem_index = index, .vmem_offset_bytes = offset_bytes};
    return track(t, handle, name, uuid, offset_bytes + from_plugged_bytes,
                 offset_bytes + requested_bytes, rss_bytes, sg, &v);
}

/* The live size of change x: its balloon, or its domain's memory with what its virtio-mem
 * device has plugged; and the QEMU RSS. */
static int read_size(const BmBalloonOps *ops, const BmTracked *x, uint64_t *ret, uint64_t *ret_rss)
{
    if (!x->vmem)
        return ops->read_live(ops->ctx, x->handle, ret, ret_rss);
    uint64_t plugged = 0;
    int r = ops->read_plugged
                ? ops->read_plugged(ops->ctx, x->handle, x->vmem_index, &plugged, ret_rss)
                : bm_error(-ENOTSUP, "the host moves no virtio-mem device");
    if (r < 0)
        return r;
    if (plugged > BM_COUNT_MAX - x->vmem_offset_bytes)
        return bm_error(-ERANGE, "virtio-mem device reports %" PRIu64 " bytes plugged", plugged);
    *ret = x->vmem_offset_bytes + plugged;
    return 0;
}

/* One reading of one tracked change: true when it ended (outcome set). */
static bool poll_one(BmTracked *x, const BmWaitOptions *o, const BmBalloonOps *ops)
{
    const uint64_t ms = 1000000ull;
    BmChange *ch = &x->change;
    uint64_t before = bm_clock_mono_ns(o->clock), before_real = bm_clock_real_ns(o->clock);
    uint64_t actual = 0, rss = BM_ABSENT;
    /* virtio-mem: read once a second (what libvirt has follows QEMU's events, one a second) */
    if (x->vmem && x->last_read_mono_ns && before - x->last_read_mono_ns < BM_VMEM_POLL_MS * ms)
        return false;
    x->last_read_mono_ns = before;
    int r = read_size(ops, x, &actual, &rss);
    uint64_t after = bm_clock_mono_ns(o->clock);
    /* the value was read somewhere inside the call: take its middle */
    uint64_t at = before + (after - before) / 2;
    ch->polls++;
    ch->duration_ns = at - x->started_mono_ns;
    ch->finished_real_ns = before_real + (after - before) / 2;
    ch->reading_ns = after - before;
    if (r < 0) {
        ch->outcome = BM_CHANGE_FAILED;
        ch->failed_err = r;
        return true;
    }
    ch->reached_bytes = actual;
    x->rss_after_bytes = rss;
    /* virtio-mem: the requested size exactly (whole blocks, no tolerance) */
    if (bm_distance(actual, ch->target_bytes) <= (x->vmem ? 0 : o->tolerance_bytes)) {
        ch->outcome = BM_CHANGE_REACHED;
        return true;
    }
    if (bm_distance(actual, ch->target_bytes) < bm_distance(x->last_actual_bytes, ch->target_bytes))
        x->last_progress_mono_ns = at;
    x->last_actual_bytes = actual;
    if (o->progress)
        o->progress(o->progress_ctx, x);
    if (after - x->started_mono_ns >= (uint64_t)o->timeout_ms * ms) {
        ch->outcome = BM_CHANGE_TIMEOUT;
        return true;
    }
    /* no progress for stall_ms by the readings' times: a reading that itself took long (libvirt
     * waiting for the domain's job lock while it is being destroyed took 7 s) is no stall */
    if (at - x->last_progress_mono_ns >= (uint64_t)o->stall_ms * ms) {
        ch->outcome = BM_CHANGE_STALLED;
        /* a guest that unplugs no more (only movable memory goes) is not left asked: its
         * driver would retry for minutes; the requested size is what it has */
        if (x->vmem && ops->set_requested)
            (void)ops->set_requested(ops->ctx, x->handle, x->vmem_index,
                                     actual - x->vmem_offset_bytes);
        return true;
    }
    return false;
}

static void drop_handle(const BmBalloonOps *ops, BmTracked *x)
{
    if (x->handle && ops->release)
        ops->release(ops->ctx, x->handle);
    x->handle = NULL;
}

size_t bm_tracker_nudge(BmTracker *t, const char *uuid)
{
    size_t n = 0;
    for (size_t i = 0; uuid && i < t->n_items; i++)
        if (t->items[i].vmem && strcmp(t->items[i].uuid, uuid) == 0) {
            t->items[i].last_read_mono_ns = 0;
            n++;
        }
    return n;
}

size_t bm_tracker_poll(BmTracker *t, BmChangeEnded ended, void *ctx)
{
    size_t keep = 0;
    for (size_t i = 0; i < t->n_items; i++) {
        BmTracked *x = &t->items[i];
        if (poll_one(x, &t->opts, ops_of(t))) {
            drop_handle(ops_of(t), x);
            if (ended)
                ended(ctx, x);
            free(x->name);
        } else {
            t->items[keep++] = *x;
        }
    }
    t->n_items = keep;
    return keep;
}

void bm_tracker_stop(BmTracker *t, size_t i, BmChangeEnded ended, void *ctx)
{
    if (i >= t->n_items)
        return;
    BmTracked *x = &t->items[i];
    BmChange *ch = &x->change;
    const BmClock *clock = t->opts.clock;
    uint64_t actual = 0, rss = BM_ABSENT;
    const BmBalloonOps *ops = ops_of(t);
    int r = read_size(ops, x, &actual, &rss);
    if (r >= 0 && x->vmem) {
        /* virtio-mem: the requested size what the guest has plugged (whole blocks) */
        r = ops->set_requested ? ops->set_requested(ops->ctx, x->handle, x->vmem_index,
                                                    actual - x->vmem_offset_bytes)
                               : bm_error(-ENOTSUP, "the host moves no virtio-mem device");
    } else if (r >= 0) {
        /* the target where the balloon is, in whole MiB as every target of ours (an inflate
         * stops up to 1 MiB short of where it got, a deflate up to 1 MiB beyond: never past
         * its own target) */
        const uint64_t mib = 1ull << 20;
        bool down = ch->target_bytes < ch->from_bytes;
        uint64_t at = down ? (actual + mib - 1) & ~(mib - 1) : actual & ~(mib - 1);
        if (down ? at > ch->from_bytes : at < ch->from_bytes)
            at = ch->from_bytes;
        actual = at;
        r = ops->set_target(ops->ctx, x->handle, actual);
    }
    ch->polls++;
    ch->duration_ns = bm_clock_mono_ns(clock) - x->started_mono_ns;
    ch->finished_real_ns = bm_clock_real_ns(clock);
    if (r < 0) {
        ch->outcome = BM_CHANGE_FAILED;
        ch->failed_err = r;
    } else {
        ch->outcome = BM_CHANGE_STOPPED;
        ch->reached_bytes = actual;
        x->rss_after_bytes = rss;
    }
    drop_handle(ops, x);
    if (ended)
        ended(ctx, x);
    free(x->name);
    memmove(&t->items[i], &t->items[i + 1], (t->n_items - i - 1) * sizeof(*x));
    t->n_items--;
}

size_t bm_tracker_wait(BmTracker *t, uint32_t max_ms, BmChangeEnded ended, void *ctx)
{
    const uint64_t ms = 1000000ull;
    const BmClock *clock = t->opts.clock;
    uint64_t deadline = bm_clock_mono_ns(clock) + (uint64_t)max_ms * ms;
    while (t->n_items && bm_clock_mono_ns(clock) < deadline && !(t->opts.stop && *t->opts.stop)) {
        uint64_t before = bm_clock_mono_ns(clock);
        bm_tracker_poll(t, ended, ctx);
        uint64_t spent_ms = (bm_clock_mono_ns(clock) - before) / ms;
        if (t->n_items && spent_ms < t->opts.poll_ms)
            bm_clock_sleep_ms(clock, t->opts.poll_ms - (unsigned)spent_ms);
    }
    return t->n_items;
}

void bm_tracker_clear(BmTracker *t)
{
    for (size_t i = 0; i < t->n_items; i++) {
        drop_handle(ops_of(t), &t->items[i]);
        free(t->items[i].name);
    }
    free(t->items);
    t->items = NULL;
    t->n_items = 0;
}

/* ---- virtio-mem ---- */

int bm_vmem_set_requested(virDomainPtr dom, size_t index, uint64_t requested_bytes, bool live)
{
    _cleanup_free_ char *xml = NULL, *dev = NULL;
    int r = bm_conn_domain_xml(dom, !live, &xml);
    if (r < 0 || (r = bm_domxml_virtio_mem_update(xml, index, requested_bytes, &dev)) < 0)
        return r;
    unsigned flags = live ? VIR_DOMAIN_AFFECT_LIVE : VIR_DOMAIN_AFFECT_CONFIG;
    if (BM_LV(virDomainUpdateDeviceFlags)(dom, dev, flags) < 0)
        return bm_conn_error(live ? "cannot set the virtio-mem device's requested size"
                                  : "cannot set the virtio-mem device's requested size in the "
                                    "persistent definition");
    return 0;
}

/* What the wait of a virtio-mem change has seen: the device's plugged size from its events and
 * the once-a-second read of the live XML. */
typedef struct {
    const char *alias;  /* the device's; "" takes every device's events */
    size_t index;
    bool fresh;         /* current_bytes new since the loop last looked */
    bool tick;          /* the second's timer fired */
    uint64_t current_bytes;
    unsigned events;
} VmemWatch;

static void on_vmem_size(virConnectPtr conn, virDomainPtr dom, const char *alias,
                         unsigned long long size_kib, void *opaque)
{
    (void)conn;
    (void)dom;
    VmemWatch *w = opaque;
    if (w->alias[0] && (!alias || strcmp(alias, w->alias) != 0))
        return;
    w->current_bytes = bm_reported(size_kib, 1024);
    w->fresh = true;
    w->events++;
}

static void on_vmem_tick(int timer, void *opaque)
{
    (void)timer;
    ((VmemWatch *)opaque)->tick = true;
}

/* The device's <current> from the live XML. Returns 0 or -errno. */
static int read_vmem_current(virDomainPtr dom, size_t index, uint64_t *ret)
{
    _cleanup_free_ char *xml = NULL;
    BmBalloonConfig cfg;
    int r = bm_conn_domain_xml(dom, false, &xml);
    if (r < 0 || (r = bm_domxml_parse_balloon(xml, &cfg)) < 0)
        return r;
    if (index >= cfg.n_virtio_mem || !bm_present(cfg.virtio_mem[index].current_bytes))
        return bm_error(-ENODEV, "its virtio-mem device is gone from the live XML");
    *ret = cfg.virtio_mem[index].current_bytes;
    return 0;
}

int bm_vmem_change(virDomainPtr dom, size_t index, const char *alias, uint64_t offset_bytes,
                   uint64_t from_current_bytes, uint64_t requested_bytes, bool wait,
                   const BmWaitOptions *opts, BmChange *ret)
{
    const BmClock *clock = opts->clock;
    VmemWatch w = {.alias = alias ? alias : "", .index = index, .current_bytes = from_current_bytes};
    virConnectPtr conn = virDomainGetConnect(dom);
    int cb = -1, timer = -1;
    if (wait) {
        /* watched before the change: no event of it comes before the callback */
        cb = BM_LV(virConnectDomainEventRegisterAny)(conn, dom,
                                                     VIR_DOMAIN_EVENT_ID_MEMORY_DEVICE_SIZE_CHANGE,
                                                     VIR_DOMAIN_EVENT_CALLBACK(on_vmem_size), &w,
                                                     NULL);
        if (cb < 0)
            return bm_conn_error("cannot watch the virtio-mem device's size changes");
        timer = virEventAddTimeout(1000, on_vmem_tick, &w, NULL);
        if (timer < 0) {
            virConnectDomainEventDeregisterAny(conn, cb);
            return bm_error(-EIO, "cannot add a timer to libvirt's event loop");
        }
    }
    uint64_t t0 = bm_clock_mono_ns(clock);
    *ret = pending(offset_bytes + from_current_bytes, offset_bytes + requested_bytes,
                   bm_clock_real_ns(clock));
    int r = bm_vmem_set_requested(dom, index, requested_bytes, true);
    if (r < 0 || !wait)
        goto out;

    BmTracked x = {.name = (char *)virDomainGetName(dom), .change = *ret,
                   .last_actual_bytes = ret->from_bytes};
    BmChange *ch = &x.change;
    BmVmemWait vw;
    bm_vmem_wait_init(&vw, from_current_bytes, requested_bytes, t0, opts->timeout_ms,
                      opts->stall_ms);
    w.fresh = true; /* the size before the change: reached at once when it is the one asked */
    while (ch->outcome == BM_CHANGE_PENDING) {
        if (w.tick) {
            w.tick = false;
            uint64_t cur = 0;
            int rr = read_vmem_current(dom, index, &cur);
            ch->polls++;
            if (rr < 0) {
                ch->outcome = BM_CHANGE_FAILED;
                ch->failed_err = rr;
                break;
            }
            if (cur != w.current_bytes)
                w.current_bytes = cur, w.fresh = true;
        }
        uint64_t now = bm_clock_mono_ns(clock);
        bool fresh = w.fresh;
        w.fresh = false;
        ch->duration_ns = now - t0;
        ch->finished_real_ns = bm_clock_real_ns(clock);
        if (fresh)
            ch->reached_bytes = offset_bytes + w.current_bytes;
        switch (bm_vmem_wait_step(&vw, fresh, w.current_bytes, now)) {
        case BM_VMEM_REACHED: ch->outcome = BM_CHANGE_REACHED; break;
        case BM_VMEM_STALLED: ch->outcome = BM_CHANGE_STALLED; break;
        case BM_VMEM_TIMEOUT: ch->outcome = BM_CHANGE_TIMEOUT; break;
        case BM_VMEM_WAITING: break;
        }
        if (ch->outcome != BM_CHANGE_PENDING || (opts->stop && *opts->stop))
            break;
        if (fresh && opts->progress) {
            x.last_actual_bytes = ch->reached_bytes;
            opts->progress(opts->progress_ctx, &x);
        }
        if ((r = bm_conn_run_events()) < 0) {
            ch->outcome = BM_CHANGE_FAILED;
            ch->failed_err = r;
            r = 0;
        }
    }
    ch->polls += w.events;
    *ret = *ch;
out:
    if (timer >= 0)
        virEventRemoveTimeout(timer);
    if (cb >= 0)
        virConnectDomainEventDeregisterAny(conn, cb);
    return r;
}
