/* virtio-mem arithmetic: what a domain's total memory means for its virtio-mem devices, what a
 * device can still unplug and plug. Pure: numbers in and out. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "domxml.h"

/* What the domain has with its virtio-mem devices as they are: its base memory plus what each
 * device has plugged (<current>; its <requested> where the XML has no <current>: an inactive
 * XML, the next boot's). BM_ABSENT when the base or a device's size is unknown, or without a
 * virtio-mem device. */
uint64_t bm_vmem_domain_bytes(const BmBalloonConfig *c);

/* The sum of the devices' <current> (plugged), or BM_ABSENT when one is unknown or there is
 * none. */
uint64_t bm_vmem_plugged_bytes(const BmBalloonConfig *c);

/* What device m can still unplug: what it has plugged (the guest may keep part of it: it
 * unplugs only memory it can move), BM_ABSENT when unknown. */
uint64_t bm_vmem_unpluggable_bytes(const BmVirtioMem *m);

/* What device m can still plug: its size less what it has plugged, BM_ABSENT when unknown. */
uint64_t bm_vmem_pluggable_bytes(const BmVirtioMem *m);

/* The requested size of one device for a domain total. */
typedef struct {
    uint64_t requested_bytes; /* what to ask of the device: a multiple of its block */
    uint64_t asked_bytes;     /* the total less the base and the other devices, before rounding */
    uint64_t total_bytes;     /* the domain's total with requested_bytes: what it will have */
    uint64_t others_bytes;    /* base + the other devices' requested sizes */
    bool rounded;             /* requested_bytes != asked_bytes */
} BmVmemTarget;

/* Device index of c asked for the domain total target_bytes: target - base - the other
 * devices' requested sizes, rounded to the nearest multiple of the device's block (half a
 * block up). Returns 0 and *ret, or with the detail: -ERANGE when the target is below the
 * base and the other devices (virtio-mem unplugs only its own memory) or above what the device
 * can plug, -EINVAL when the base, the device's size or block is unknown. */
int bm_vmem_target(const BmBalloonConfig *c, size_t index, uint64_t target_bytes,
                   BmVmemTarget *ret);

/* The wait for a device to reach its requested size, from the readings of what it has
 * plugged (events, reads of the live XML): pure, the clock given. */
typedef enum {
    BM_VMEM_WAITING, /* not there yet, still coming closer or within the stall time */
    BM_VMEM_REACHED, /* plugged is the requested size */
    BM_VMEM_STALLED, /* no step closer for the stall time */
    BM_VMEM_TIMEOUT, /* the deadline passed */
} BmVmemWaitState;

typedef struct {
    uint64_t requested_bytes;
    uint64_t closest_bytes;    /* the smallest distance to it seen */
    uint64_t started_ns;       /* monotonic: the requested size was set */
    uint64_t last_progress_ns; /* the last reading that came closer (started_ns before one) */
    uint64_t timeout_ns, stall_ns;
} BmVmemWait;

/* A wait for requested_bytes from from_plugged_bytes, started at now_ns. */
void bm_vmem_wait_init(BmVmemWait *w, uint64_t from_plugged_bytes, uint64_t requested_bytes,
                       uint64_t now_ns, unsigned timeout_ms, unsigned stall_ms);

/* One look at the wait at now_ns, with a reading of what the device has plugged (have_reading)
 * or without one (a timer's turn). Reached takes precedence over the deadline at the same
 * look. */
BmVmemWaitState bm_vmem_wait_step(BmVmemWait *w, bool have_reading, uint64_t plugged_bytes,
                                  uint64_t now_ns);
