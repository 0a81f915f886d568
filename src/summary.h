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
    char mode_reason[512];
    size_t n_running;         /* active (running or paused) domains */
    uint64_t maximum_bytes;   /* sum of the active domains' maximum memory */
    uint64_t reclaimed_bytes; /* sum of their maximum minus balloon current */
    /* free guest memory the QEMU processes hold (bm_summary_add_backed_free()) */
    bool have_backed_free;    /* the estimate of QEMU's own memory is known */
    uint64_t qemu_overhead_bytes;
    uint64_t backed_free_bytes;         /* sum of the active domains' backed free */
    uint64_t backed_free_unknown;       /* active domains without RSS or statistics */
    uint64_t fpr_backed_free_bytes;     /* the part free page reporting would hand back */
    size_t n_fpr;                       /* in this many domains (bm_summary_fpr_would_return()) */
} BmHostSummary;

/* Free page reporting would hand back a domain's backed free memory this large or larger. */
#define BM_SUMMARY_FPR_MIN_BYTES (64ull << 20)

/* Whether turning free page reporting on would hand the host d's backed free memory
 * (backed_free_bytes, bm_domain_backed_free_bytes()): an active domain whose XML has a virtio
 * balloon without freePageReporting='on', whose ballooning can return memory at all (no VFIO,
 * locked or hugepage memory) and that holds at least BM_SUMMARY_FPR_MIN_BYTES. */
bool bm_summary_fpr_would_return(const BmDomain *d, uint64_t backed_free_bytes);

/* "balloonmgr [-c URI] configure NAME SETTING" (setting e.g. "--autodeflate on"), name and uri
 * whole, quoted for a shell where needed: in single quotes, or as $'...' with \\xNN for bytes
 * that are not printable (control bytes, invalid UTF-8). The result is printable as it is:
 * print it without escaping it again. Caller frees. */
char *bm_summary_configure_command(const char *name, const char *uri, const char *setting);

/* The command that turns free page reporting on for domain name (uri: the -c given, or NULL),
 * quoted as bm_summary_configure_command() does ("balloonmgr configure web1
 * --free-page-reporting on"). It changes the persistent definition: the domain must be shut
 * down and started again (a reboot inside the guest keeps the QEMU process). Caller frees. */
char *bm_summary_fpr_command(const char *name, const char *uri);

/* Adds up the active (running or paused) domains of snap (all the host's domains) into s. */
void bm_summary_add_domains(BmHostSummary *s, const BmSnapshot *snap);

/* Adds the backed free memory of the active domains of snap (all the host's domains) with
 * QEMU's own memory estimated at qemu_overhead_bytes (BmPlan.qemu_overhead_bytes). */
void bm_summary_add_backed_free(BmHostSummary *s, const BmSnapshot *snap, uint64_t qemu_overhead_bytes);

/* Sum of the active domains' maxima over MemTotal; < 0 when MemTotal is unknown. */
double bm_summary_overcommit(const BmHostSummary *s);

/* "host: MemTotal 64 GiB, MemAvailable 4 GiB, PSI some 6.4%, mode reclaim, reclaimed 6.5 GiB,
 * backed free 1.2 GiB (900 MiB in 2 domains without free page reporting), overcommit 0.53
 * (34 GiB in 5 active domains), KSM off, saves 0 B" into buf (size n); parts not known are
 * "-" (backed free: when no active domain's is known). Returns buf. */
const char *bm_summary_format(const BmHostSummary *s, char *buf, size_t n);

/* The same as a JSON object (bytes, null for what is not known). Caller owns it. */
json_object *bm_summary_json(const BmHostSummary *s);
