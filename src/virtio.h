/* Parsed x-query-virtio-status: plain data shared by qmp.c (which parses it) and features.c
 * (which decides from it). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One side's virtio features in x-query-virtio-status. */
typedef struct {
    char **names;          /* decoded device features, e.g. "VIRTIO_BALLOON_F_STATS_VQ"; NULL-terminated */
    size_t n_names;
    uint64_t unknown_bits; /* unknown-dev-features: bits QEMU did not decode (0 if absent) */
} BmVirtioFeatures;

typedef struct {
    char name[64];         /* "virtio-balloon" */
    bool driver_ok;        /* VIRTIO_CONFIG_S_DRIVER_OK in status */
    bool features_ok;      /* VIRTIO_CONFIG_S_FEATURES_OK */
    bool broken;
    BmVirtioFeatures host;  /* offered by the device */
    BmVirtioFeatures guest; /* acknowledged by the driver */
} BmVirtioStatus;

/* Whether a decoded feature list has name (exact, e.g. "VIRTIO_BALLOON_F_SG"). */
bool bm_virtio_features_has(const BmVirtioFeatures *f, const char *name);
