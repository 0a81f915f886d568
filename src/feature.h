/* (Named feature.h, not features.h: that name would shadow glibc's <features.h>.) */
/* Which balloon features a domain really uses, decided from parsed QMP data. Pure: no I/O.
 * See "SG verification" in docs/design.md: bit 3 was VIRTIO_BALLOON_F_SG in the 2017 series and is
 * VIRTIO_BALLOON_F_FREE_PAGE_HINT upstream, so SG is recognised by name, or by a configured bit
 * only while QEMU leaves that bit undecoded. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "virtio.h"

typedef enum {
    BM_FEATURE_SG,
    BM_FEATURE_STATS,
    BM_FEATURE_DEFLATE_ON_OOM,
    BM_FEATURE_FREE_PAGE_HINT,
    BM_FEATURE_PAGE_POISON,
    BM_FEATURE_REPORTING,
    BM_FEATURE_MUST_TELL_HOST,
    BM_FEATURE_COUNT,
} BmFeature;

typedef enum {
    BM_FEAT_NEGOTIATED,  /* device offered it and the driver acknowledged it */
    BM_FEAT_OFFERED,     /* device offers it, the driver did not acknowledge it */
    BM_FEAT_NOT_OFFERED, /* the device does not offer it */
    BM_FEAT_UNKNOWN,     /* cannot tell: see the reason */
} BmFeatureState;

typedef enum {
    BM_SWITCH_ON,
    BM_SWITCH_OFF,
    BM_SWITCH_UNSUPPORTED, /* this QEMU has no such property */
    BM_SWITCH_UNKNOWN,
} BmSwitchState;

/* Why the balloon's virtio status could not be read, or BM_VIRTIO_OK. */
typedef enum {
    BM_VIRTIO_OK,
    BM_VIRTIO_NOT_RUNNING,
    BM_VIRTIO_NO_MONITOR, /* driver without QEMU monitor, e.g. libvirt's test driver */
    BM_VIRTIO_TOO_OLD,    /* QEMU without x-query-virtio-status (before 7.2) */
    BM_VIRTIO_NO_BALLOON, /* no virtio-balloon device */
    BM_VIRTIO_ERROR,      /* another failure; the caller has the message */
} BmVirtioAvailability;

typedef struct {
    int sg_bit; /* feature bit that means SG when QEMU leaves it undecoded; -1: by name only */
} BmFeatureOptions;

#define BM_SG_DEFAULT_BIT 3

typedef struct {
    BmFeatureState state;
    const char *reason;   /* static text; NULL for a plain negotiated */
    const char *evidence; /* for SG: "name" or "bit"; NULL otherwise */
    bool not_ready;       /* BM_FEAT_UNKNOWN because the device offers it but its driver has not
                           * set DRIVER_OK yet: the guest is still booting, ask again later */
} BmFeatureVerdict;

/* Whose ioeventfd property the balloon's PCI proxy has. QEMU's own (10.0 has it) comes with
 * the property "vectors"; the SG lab's 7.2 patch (lab/qemu/0002) added ioeventfd alone. */
typedef enum {
    BM_IOEVENTFD_SOURCE_UNKNOWN, /* no ioeventfd property, or it could not be told */
    BM_IOEVENTFD_SOURCE_UPSTREAM,
    BM_IOEVENTFD_SOURCE_LAB,
} BmIoeventfdSource;

typedef struct {
    BmFeatureVerdict feature[BM_FEATURE_COUNT];
    BmSwitchState ioeventfd;
    const char *ioeventfd_reason;
    BmIoeventfdSource ioeventfd_source;
    bool driver_ok;
} BmFeatureReport;

/* Short name for --require and JSON: "sg", "stats", "deflate-on-oom", "free-page-hint",
 * "page-poison", "reporting", "must-tell-host". */
const char *bm_feature_key(BmFeature f);
/* QEMU's name: "VIRTIO_BALLOON_F_SG", "VIRTIO_BALLOON_F_STATS_VQ", ... */
const char *bm_feature_qemu_name(BmFeature f);
/* Looks a short name up; returns the feature or -EINVAL. */
int bm_feature_from_key(const char *key);

/* "negotiated", "offered", "not-offered", "unknown". */
const char *bm_feature_state_name(BmFeatureState s);
/* "on", "off", "unsupported", "unknown". */
const char *bm_switch_state_name(BmSwitchState s);
/* "upstream", "lab", or NULL when unknown. */
const char *bm_ioeventfd_source_name(BmIoeventfdSource s);

/* The SG verdict as the latency histogram's label; a string ("sg") only in the metrics, the
 * state file and the spool (bm_sg_label_names). */
typedef enum { BM_SGL_NEGOTIATED, BM_SGL_NOT_NEGOTIATED, BM_SGL_UNKNOWN, BM_SGL_COUNT } BmSgLabel;

/* "negotiated", "not_negotiated", "unknown". */
extern const char *const bm_sg_label_names[BM_SGL_COUNT];

/* The label of verdict s (known false: none yet, unknown). */
BmSgLabel bm_sg_label(BmFeatureState s, bool known);

/* The table cell of a feature the domain XML turns on (free page reporting, deflate-on-oom):
 * "-" when the XML is not known (config_known false), else "on" or "off" as configured, with
 * the monitor's verdict after a '+' when one is known ("on+negotiated", "on+offered": the
 * driver did not take it, "on+not-offered"); verdict BM_FEAT_UNKNOWN adds nothing, and "off"
 * with "not-offered" is just "off". Returns buf (size n). */
const char *bm_feature_config_cell(bool config_known, bool on, BmFeatureState verdict, char *buf,
                                   size_t n);

/* Decides every feature. st is the parsed x-query-virtio-status (ignored unless avail is
 * BM_VIRTIO_OK). Fills *ret; reasons are static strings. */
void bm_features_decide(const BmVirtioStatus *st, BmVirtioAvailability avail,
                        const BmFeatureOptions *opts, BmFeatureReport *ret);

/* Decides ioeventfd from qom-gets of the balloon's PCI proxy: qom_result is the result of
 * bm_qmp_parse_qom_get_bool() for "ioeventfd" (0, -ENOENT when the property does not exist,
 * other < 0) and value its value; vectors_result that of bm_qmp_check_reply() for "vectors"
 * (0: QEMU's own ioeventfd, -ENOENT: the lab's, other < 0: source unknown; ignored unless
 * qom_result is 0). */
void bm_features_decide_ioeventfd(int qom_result, bool value, int vectors_result,
                                  BmFeatureReport *ret);
