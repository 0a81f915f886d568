/* Domain XML (libxml2): what balloonmgr reads of a domain's definition, and the edit the
 * configure verb makes to it. Pure: parses and writes strings, no libvirt calls. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* On/off settings that may be absent from the XML. */
typedef enum { BM_TRI_UNSET = -1, BM_TRI_OFF = 0, BM_TRI_ON = 1 } BmTristate;

/* The most virtio-mem devices of a domain read (libvirt allows as many as <maxMemory slots>
 * and PCI slots; the rest are counted in BmBalloonConfig.virtio_mem_more). */
#define BM_VIRTIO_MEM_MAX ((size_t)8)

/* One <memory model='virtio-mem'> device: memory the guest plugs and unplugs in blocks
 * (Linux >= 5.8 guests, QEMU >= 5.1, libvirt >= 7.9). Sizes in bytes, BM_ABSENT where the XML
 * has none. */
typedef struct {
    char alias[64];           /* <alias name> ("virtiomem0"; live XML only), or "" */
    char address[32];         /* its PCI address "0000:00:05.0", or "" */
    uint64_t size_bytes;      /* <target><size>: the most it can plug */
    uint64_t block_bytes;     /* <block>: the step of every plug and unplug */
    uint64_t requested_bytes; /* <requested>: what the host asks the guest to have plugged */
    uint64_t current_bytes;   /* <current>: what the guest has plugged (live XML only: libvirt
                               * updates it from QEMU's MEMORY_DEVICE_SIZE_CHANGE events) */
    int node;                 /* <node>: the guest NUMA node, -1 when absent */
} BmVirtioMem;

typedef struct {
    bool present;            /* a <memballoon> with a model other than 'none' */
    char model[32];          /* "virtio", "virtio-transitional", ... or "" */
    char alias[64];          /* e.g. "balloon0" (live XML only), or "" */
    BmTristate autodeflate;  /* deflate-on-oom */
    BmTristate free_page_reporting;
    int stats_period_s;      /* <stats period>; 0 when absent (libvirt: disabled), -1 if unreadable */
    uint64_t min_guarantee_bytes; /* <memtune><min_guarantee>, BM_ABSENT if not set */
    uint64_t memory_bytes;        /* <memory>: maximum, BM_ABSENT if unreadable */
    uint64_t current_memory_bytes; /* <currentMemory>, BM_ABSENT if unreadable */
    /* Why an inflate gives the host nothing back, read from the XML (policy skips these):
     * VFIO passthrough pins all guest memory (<hostdev mode='subsystem' type='pci'|'mdev'>,
     * <interface type='hostdev'>), <memoryBacking><locked/> keeps it mlocked, and hugepages
     * (<memoryBacking><hugepages>) return to the hugepage pool, not to MemAvailable. */
    bool vfio_hostdev;
    bool memory_locked;
    bool hugepages;
    bool features_overridden; /* a <qemu:override> of the balloon sets property sg or ioeventfd */
    /* the virtio-mem devices in document order (the first BM_VIRTIO_MEM_MAX of them) and the
     * memory the domain has without them: <memory> less every memory device's <size>
     * (libvirt's <memory> counts them all; the initial memory, the NUMA cells' sum) */
    size_t n_virtio_mem;
    size_t virtio_mem_more; /* devices beyond BM_VIRTIO_MEM_MAX, not read */
    BmVirtioMem virtio_mem[BM_VIRTIO_MEM_MAX];
    uint64_t base_memory_bytes; /* BM_ABSENT when <memory> is unreadable */
} BmBalloonConfig;

/* Why ballooning c's domain returns nothing to the host ("VFIO passthrough (<hostdev>)",
 * ...), or NULL when it can. Static string. */
const char *bm_domxml_no_return_reason(const BmBalloonConfig *c);

/* Silences libxml2's default stderr printer (also used by libvirt's in-process test driver),
 * so failures are reported once, by the verb. Call once at start. */
void bm_domxml_init(void);

/* Parses a domain's XML. Returns 0 and fills *ret, or -EINVAL with the reason when the XML
 * is not a domain definition. */
int bm_domxml_parse_balloon(const char *xml, BmBalloonConfig *ret);

/* The libvirt name of virtio-mem device i of c: its alias, or "virtiomemI" (libvirt's alias
 * for the I-th) in an inactive XML, into buf (n bytes). Returns buf. */
const char *bm_domxml_virtio_mem_name(const BmBalloonConfig *c, size_t i, char *buf, size_t n);

/* Virtio-mem device index (in document order, as BmBalloonConfig.virtio_mem) of xml, a
 * domain's live or persistent XML, as the XML for virDomainUpdateDeviceFlags() that asks for
 * requested_bytes (written in KiB): the device element as the domain has it (address, alias),
 * <requested> replaced and the read-only <current> left out. Returns 0 and *ret_xml (caller
 * frees), -ENODEV when there is no such device, -EINVAL for XML that is not a domain or a
 * size not in whole KiB. */
int bm_domxml_virtio_mem_update(const char *xml, size_t index, uint64_t requested_bytes,
                                char **ret_xml);

/* What `balloonmgr configure` changes in a domain's persistent XML; BM_TRI_UNSET leaves a
 * setting alone. */
typedef struct {
    BmTristate autodeflate;         /* memballoon autodeflate attribute */
    BmTristate free_page_reporting; /* memballoon freePageReporting attribute */
    BmTristate sg;                  /* QEMU device property 'sg' (bool) via qemu:override */
    BmTristate ioeventfd;           /* QEMU device property 'ioeventfd' (bool) via qemu:override */
} BmBalloonEdit;

/* Applies edit to a domain's persistent XML. The memballoon attributes are set to 'on'/'off';
 * sg and ioeventfd become <qemu:property type='bool' value='true'/'false'> in the
 * <qemu:override><qemu:device alias=...><qemu:frontend> for the balloon (alias: the
 * memballoon's <alias name>, else libvirt's 'balloon0'), reusing the existing elements and
 * declaring the qemu namespace on the root when absent. Everything else is kept.
 * Returns 0 with *ret_xml, the whole new document, and *ret_changes, one line ending in '\n'
 * per change made (e.g. "memballoon autodeflate: unset -> on"); both are the caller's to
 * free. When nothing changes, *ret_changes is "" and *ret_xml a copy of xml.
 * Returns -EINVAL with the reason when the XML is not a well-formed domain definition, or a
 * setting is asked for and there is no <memballoon> or its model is 'none'; then both are
 * NULL. */
int bm_domxml_edit_balloon(const char *xml, const BmBalloonEdit *edit, char **ret_xml,
                           char **ret_changes);

/* The QEMU binary of a domain (<devices><emulator>). Returns 0 and *ret_path (caller frees),
 * -ENOENT when the XML names none, or -EINVAL for XML that is not a domain. */
int bm_domxml_emulator(const char *xml, char **ret_path);
