/* Domain XML (libxml2): what balloonmgr reads of a domain's definition. Pure: parses
 * strings, no libvirt calls. */
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
} BmBalloonConfig;

/* Silences libxml2's default stderr printer (also used by libvirt's in-process test driver),
 * so failures are reported once, by the verb. Call once at start. */
void bm_domxml_init(void);

/* Parses a domain's XML. Returns 0 and fills *ret, or -EINVAL with the reason when the XML
 * is not a domain definition. */
int bm_domxml_parse_balloon(const char *xml, BmBalloonConfig *ret);
