/* The host summary of `status`: host memory, PSI, the policy's mode, what the balloons reclaim,
 * overcommit and KSM, as one line and as a JSON object. Pure: the caller reads the parts. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hostmem.h"
#include "ksm.h"
#include "policy-eval.h"
#include "snapshot.h"

typedef struct {
    bool have_host;
    BmHost host;
    bool have_ksm;
    BmKsm ksm;
    bool have_mode;
    BmHostMode mode;          /* what the policy decides for the host now */
    char mode_reason[256];
    size_t n_running;         /* active (running or paused) domains */
    uint64_t maximum_bytes;   /* sum of the active domains' maximum memory */
    uint64_t reclaimed_bytes; /* sum of their maximum minus balloon current */
} BmHostSummary;

/* Adds up the active (running or paused) domains of snap (all the host's domains) into s. */
void bm_summary_add_domains(BmHostSummary *s, const BmSnapshot *snap);

/* Sum of the active domains' maxima over MemTotal; < 0 when MemTotal is unknown. */
double bm_summary_overcommit(const BmHostSummary *s);

/* "host: MemTotal 64 GiB, MemAvailable 4 GiB, PSI some 6.4%, mode reclaim, reclaimed 6.5 GiB,
 * overcommit 0.53 (34 GiB in 5 active domains), KSM off, saves 0 B" into buf (size n); parts
 * not known are "-". Returns buf. */
const char *bm_summary_format(const BmHostSummary *s, char *buf, size_t n);

/* The same as a JSON object (bytes, null for what is not known). Caller owns it. */
json_object *bm_summary_json(const BmHostSummary *s);
