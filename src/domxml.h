/* Domain XML (libxml2): what balloonmgr reads of a domain's definition, and the edit the
 * configure verb makes to it. Pure: parses and writes strings, no libvirt calls. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* On/off settings that may be absent from the XML. */
typedef enum { BM_TRI_UNSET = -1, BM_TRI_OFF = 0, BM_TRI_ON = 1 } BmTristate;

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
