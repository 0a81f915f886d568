#include "feature.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *key;
    const char *qemu;
} names[BM_FEATURE_COUNT] = {
    [BM_FEATURE_SG] = {"sg", "VIRTIO_BALLOON_F_SG"},
    [BM_FEATURE_STATS] = {"stats", "VIRTIO_BALLOON_F_STATS_VQ"},
    [BM_FEATURE_DEFLATE_ON_OOM] = {"deflate-on-oom", "VIRTIO_BALLOON_F_DEFLATE_ON_OOM"},
    [BM_FEATURE_FREE_PAGE_HINT] = {"free-page-hint", "VIRTIO_BALLOON_F_FREE_PAGE_HINT"},
    [BM_FEATURE_PAGE_POISON] = {"page-poison", "VIRTIO_BALLOON_F_PAGE_POISON"},
    [BM_FEATURE_REPORTING] = {"reporting", "VIRTIO_BALLOON_F_REPORTING"},
    [BM_FEATURE_MUST_TELL_HOST] = {"must-tell-host", "VIRTIO_BALLOON_F_MUST_TELL_HOST"},
};

bool bm_virtio_features_has(const BmVirtioFeatures *f, const char *name)
{
    for (size_t i = 0; i < f->n_names; i++)
        if (strcmp(f->names[i], name) == 0)
            return true;
    return false;
}

const char *bm_feature_key(BmFeature f)
{
    return f < BM_FEATURE_COUNT ? names[f].key : "?";
}

const char *bm_feature_qemu_name(BmFeature f)
{
    return f < BM_FEATURE_COUNT ? names[f].qemu : "?";
}

int bm_feature_from_key(const char *key)
{
    for (int f = 0; f < BM_FEATURE_COUNT; f++)
        if (strcmp(names[f].key, key) == 0)
            return f;
    return -EINVAL;
}

const char *bm_feature_state_name(BmFeatureState s)
{
    switch (s) {
    case BM_FEAT_NEGOTIATED: return "negotiated";
    case BM_FEAT_OFFERED: return "offered";
    case BM_FEAT_NOT_OFFERED: return "not-offered";
    case BM_FEAT_UNKNOWN: return "unknown";
    }
    return "unknown";
}

const char *bm_switch_state_name(BmSwitchState s)
{
    switch (s) {
    case BM_SWITCH_ON: return "on";
    case BM_SWITCH_OFF: return "off";
    case BM_SWITCH_UNSUPPORTED: return "unsupported";
    case BM_SWITCH_UNKNOWN: return "unknown";
    }
    return "unknown";
}

static const char *unavailable_reason(BmVirtioAvailability a)
{
    switch (a) {
    case BM_VIRTIO_NOT_RUNNING: return "domain not running";
    case BM_VIRTIO_NO_MONITOR: return "libvirt driver without QEMU monitor";
    case BM_VIRTIO_TOO_OLD: return "QEMU too old for x-query-virtio-status (needs 7.2)";
    case BM_VIRTIO_NO_BALLOON: return "no virtio-balloon device";
    case BM_VIRTIO_ERROR: return "QEMU monitor query failed";
    case BM_VIRTIO_OK: break;
    }
    return NULL;
}

/* SG offered/acked: by name, else by the configured bit while QEMU leaves it undecoded. A bit
 * QEMU decodes (e.g. bit 3 as FREE_PAGE_HINT) is never in unknown_bits, so it never counts. */
static bool sg_in(const BmVirtioFeatures *f, const BmFeatureOptions *o, const char **evidence)
{
    if (bm_virtio_features_has(f, names[BM_FEATURE_SG].qemu)) {
        *evidence = "name";
        return true;
    }
    if (o && o->sg_bit >= 0 && o->sg_bit < 64 && (f->unknown_bits >> o->sg_bit) & 1) {
        *evidence = "bit";
        return true;
    }
    return false;
}

void bm_features_decide(const BmVirtioStatus *st, BmVirtioAvailability avail,
                        const BmFeatureOptions *opts, BmFeatureReport *ret)
{
    *ret = (BmFeatureReport){.ioeventfd = BM_SWITCH_UNKNOWN};
    const char *why = unavailable_reason(avail);
    ret->ioeventfd_reason = why;
    if (avail == BM_VIRTIO_NO_BALLOON) {
        for (int f = 0; f < BM_FEATURE_COUNT; f++)
            ret->feature[f] = (BmFeatureVerdict){BM_FEAT_NOT_OFFERED, why, NULL, false};
        return;
    }
    if (why || !st) {
        for (int f = 0; f < BM_FEATURE_COUNT; f++)
            ret->feature[f] = (BmFeatureVerdict){BM_FEAT_UNKNOWN, why ? why : "no status", NULL, false};
        return;
    }

    ret->driver_ok = st->driver_ok;
    for (int f = 0; f < BM_FEATURE_COUNT; f++) {
        const char *ev_host = NULL, *ev_guest = NULL;
        bool host, guest;
        if (f == BM_FEATURE_SG) {
            host = sg_in(&st->host, opts, &ev_host);
            guest = sg_in(&st->guest, opts, &ev_guest);
        } else {
            host = bm_virtio_features_has(&st->host, names[f].qemu);
            guest = bm_virtio_features_has(&st->guest, names[f].qemu);
        }
        BmFeatureVerdict *v = &ret->feature[f];
        if (!host)
            *v = (BmFeatureVerdict){BM_FEAT_NOT_OFFERED, "the device does not offer it", NULL, false};
        else if (!st->driver_ok)
            *v = (BmFeatureVerdict){BM_FEAT_UNKNOWN, "driver not ready (no DRIVER_OK)", ev_host, true};
        else if (guest)
            *v = (BmFeatureVerdict){BM_FEAT_NEGOTIATED, NULL, ev_guest, false};
        else
            *v = (BmFeatureVerdict){BM_FEAT_OFFERED, "the driver did not acknowledge it", ev_host, false};
    }
}

const char *bm_ioeventfd_source_name(BmIoeventfdSource s)
{
    switch (s) {
    case BM_IOEVENTFD_SOURCE_UPSTREAM: return "upstream";
    case BM_IOEVENTFD_SOURCE_LAB: return "lab";
    default: return NULL;
    }
}

void bm_features_decide_ioeventfd(int qom_result, bool value, int vectors_result,
                                  BmFeatureReport *ret)
{
    ret->ioeventfd_source = BM_IOEVENTFD_SOURCE_UNKNOWN;
    if (qom_result == 0) {
        ret->ioeventfd = value ? BM_SWITCH_ON : BM_SWITCH_OFF;
        ret->ioeventfd_reason = NULL;
        if (vectors_result == 0)
            ret->ioeventfd_source = BM_IOEVENTFD_SOURCE_UPSTREAM;
        else if (vectors_result == -ENOENT)
            ret->ioeventfd_source = BM_IOEVENTFD_SOURCE_LAB;
    } else if (qom_result == -ENOENT) {
        ret->ioeventfd = BM_SWITCH_UNSUPPORTED;
        ret->ioeventfd_reason = "this QEMU's virtio-balloon-pci has no ioeventfd property";
    } else {
        ret->ioeventfd = BM_SWITCH_UNKNOWN;
        if (!ret->ioeventfd_reason)
            ret->ioeventfd_reason = "qom-get failed";
    }
}

const char *bm_feature_config_cell(bool config_known, bool on, BmFeatureState verdict, char *buf,
                                   size_t n)
{
    if (!config_known)
        snprintf(buf, n, "-");
    else if (verdict == BM_FEAT_UNKNOWN || (!on && verdict == BM_FEAT_NOT_OFFERED))
        snprintf(buf, n, "%s", on ? "on" : "off");
    else
        snprintf(buf, n, "%s+%s", on ? "on" : "off", bm_feature_state_name(verdict));
    return buf;
}

const char *const bm_sg_label_names[BM_SGL_COUNT] = {"negotiated", "not_negotiated", "unknown"};

BmSgLabel bm_sg_label(BmFeatureState s, bool known)
{
    if (!known || s == BM_FEAT_UNKNOWN)
        return BM_SGL_UNKNOWN;
    return s == BM_FEAT_NEGOTIATED ? BM_SGL_NEGOTIATED : BM_SGL_NOT_NEGOTIATED;
}
