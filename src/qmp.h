/* QEMU monitor: commands through libvirt-qemu (virDomainQemuMonitorCommand) and pure json-c
 * parsers of their replies, as QEMU 7.2 and newer write them. The parsers take the reply text
 * exactly as libvirt returns it ({"return": ...} or {"error": {...}}). */
#pragma once

#include <libvirt/libvirt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "feature.h"
#include "snapshot.h"
#include "virtio.h"

/* Sends a QMP command (JSON text) to a domain's monitor. Returns 0 and *ret_reply (caller frees;
 * the raw reply), -ENOTSUP when the driver has no QEMU monitor (e.g. the test driver), -ESRCH
 * when the domain is not running, or another -errno. */
int bm_qmp_command(virDomainPtr dom, const char *command, char **ret_reply);

/* Checks a reply for {"error": ...}. Returns 0 when it has "return", -ENOSYS for
 * CommandNotFound (QEMU too old for the command), -ENODEV for DeviceNotFound, -ENOENT for a
 * missing property ("... not found"), -EIO for other QMP errors, -EINVAL for malformed JSON;
 * the reason names QEMU's error class and text. */
int bm_qmp_check_reply(const char *reply);

/* x-query-virtio: the QOM path of the first virtio device named name ("virtio-balloon").
 * Returns 0 and *ret_path (caller frees), -ENODEV if there is none, or a bm_qmp_check_reply()
 * error. */
int bm_qmp_parse_virtio_list(const char *reply, const char *name, char **ret_path);

/* x-query-virtio-status. Returns 0 and *ret (free with bm_virtio_status_clear()), or an error as
 * bm_qmp_check_reply(), -EINVAL when a member has the wrong type. */
int bm_qmp_parse_virtio_status(const char *reply, BmVirtioStatus *ret);
void bm_virtio_status_clear(BmVirtioStatus *s);


/* qom-list / device-list-properties: the property names, NULL-terminated (free with
 * bm_strv_free()). Returns the count or an error as bm_qmp_check_reply(). */
int bm_qmp_parse_name_list(const char *reply, char ***ret_names);

/* qom-get of a bool property. Returns 0 and *ret, -ENOENT when the object has no such
 * property, -EINVAL when the value is not a bool. */
int bm_qmp_parse_qom_get_bool(const char *reply, bool *ret);

/* qom-get of the balloon's guest-stats ({"stats": {"stat-oom-kills": N, ...}, "last-update":
 * T}): Linux 6.12's starvation statistics into *ret. A statistic QEMU does not name (before
 * 9.2), or names with -1 or 2^64-1 (the guest did not send it), or a guest's value beyond
 * 2^63-1, is BM_ABSENT. Returns 0, -EINVAL when "stats" is not an object or one of the six
 * is not an integer (the reason names it; *ret is then all BM_ABSENT), or an error as
 * bm_qmp_check_reply(). */
int bm_qmp_parse_guest_stats(const char *reply, BmStarveStats *ret);



/* Everything verify needs from one domain's monitor: finds the balloon by name in
 * x-query-virtio, reads x-query-virtio-status and the ioeventfd property of its PCI proxy (and,
 * when it has one, whether the proxy has "vectors": QEMU's own ioeventfd or the lab's), and
 * decides (bm_features_decide()). Never fails: what could not be read ends up as unknown with
 * a reason. *ret_path gets the balloon's QOM path or NULL, *ret_error the monitor's error text
 * or NULL (both caller frees). Makes up to four monitor calls. */
void bm_qmp_probe_balloon(virDomainPtr dom, const BmFeatureOptions *opts, BmFeatureReport *ret,
                          char **ret_path, char **ret_error);

/* The QOM path of the domain's virtio-balloon (x-query-virtio), as bm_qmp_probe_balloon()
 * finds it. Returns 0 and *ret_path (caller frees), -ENODEV without a balloon, or -errno. */
int bm_qmp_balloon_path(virDomainPtr dom, char **ret_path);

/* Reads the starvation statistics of the balloon at QOM path (bm_qmp_balloon_path()) with one
 * qom-get of guest-stats (bm_qmp_parse_guest_stats()). Returns 0 and *ret, or -errno (*ret is
 * then all BM_ABSENT). */
int bm_qmp_read_starve_stats(virDomainPtr dom, const char *path, BmStarveStats *ret);

/* What QEMU says of one virtio-mem device: its entry of query-memory-devices, and whether its
 * guest driver is ready (x-query-virtio-status of its virtio backend). */
typedef struct {
    char id[64];              /* the device's id: libvirt's alias ("virtiomem0") */
    uint64_t size_bytes;      /* what the guest has plugged ("size") */
    uint64_t requested_bytes; /* "requested-size" */
    uint64_t max_bytes;       /* "max-size": the most it can plug */
    uint64_t block_bytes;     /* "block-size" */
    int node;                 /* the guest NUMA node, -1 when absent */
    bool driver_known;        /* the backend's status was read */
    bool driver_ok;           /* VIRTIO_CONFIG_S_DRIVER_OK: the guest's virtio_mem driver runs */
    char *driver_error;       /* why the status could not be read, or NULL (owned) */
} BmQemuVirtioMem;

/* query-memory-devices: the virtio-mem entries (others skipped), at most max of them into ret
 * (driver fields unset). Returns how many there are (also those beyond max), or an error as
 * bm_qmp_check_reply(), -EINVAL when an entry lacks a member or has one of the wrong type. */
int bm_qmp_parse_memory_devices(const char *reply, BmQemuVirtioMem *ret, size_t max);

/* x-query-virtio: the QOM paths of every device named name, NULL-terminated (free with
 * bm_strv_free()). Returns how many, or an error as bm_qmp_parse_virtio_list(). */
int bm_qmp_parse_virtio_paths(const char *reply, const char *name, char ***ret_paths);

/* Everything verify shows of a domain's virtio-mem devices: query-memory-devices, and for each
 * device the status of its backend (its QOM path in x-query-virtio ends in
 * "/ID/virtio-backend"). Returns the number of devices (0: none; at most max in ret, each's
 * driver_error freed with bm_qmp_virtio_mem_clear()), or -errno (-ENOTSUP without a QEMU
 * monitor, -ESRCH not running). Makes 2 + N monitor calls. */
int bm_qmp_probe_virtio_mem(virDomainPtr dom, BmQemuVirtioMem *ret, size_t max);
void bm_qmp_virtio_mem_clear(BmQemuVirtioMem *v, size_t n);

/* Whether this domain's QEMU knows property prop on device type typename
 * (device-list-properties). Returns 0 and *ret_has, or -errno (e.g. -ENOTSUP without monitor). */
int bm_qmp_device_has_property(virDomainPtr dom, const char *typename, const char *prop,
                               bool *ret_has);
