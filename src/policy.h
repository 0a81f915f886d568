/* Policy files (balloonmgr.policy(5)): the parsed form and the per-domain rules. The parser
 * is pure (text in, struct out); policy-eval.c decides from it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* A size written as bytes ("512M") or as a percentage of a reference ("25%"). */
typedef struct {
    bool is_percent;
    uint64_t bytes;      /* when !is_percent */
    uint32_t permille;   /* when is_percent: tenths of a percent, 0..1000 ("12.5%" = 125) */
} BmAmount;

/* Which guests a pass of the timer (`run --once`: nothing looks at a guest until the next
 * pass, timer_interval later) inflates. A guest that cannot deflate itself stays short of
 * memory for that long when its demand steps up after the pass. */
typedef enum {
    BM_TIMER_INFLATE_DEFLATE_ON_OOM, /* only guests with deflate-on-oom (default) */
    BM_TIMER_INFLATE_ALWAYS,         /* any guest, as the agent would */
    BM_TIMER_INFLATE_NEVER,          /* none: the timer only gives memory back */
} BmTimerInflate;

/* What moves a domain's memory under the policy (the key device). */
typedef enum {
    BM_DEVICE_AUTO,       /* virtio-mem where the domain has a device and no usable balloon
                           * (none, or one whose inflates return nothing), as `set` chooses */
    BM_DEVICE_BALLOON,    /* its balloon, whatever devices it has */
    BM_DEVICE_VIRTIO_MEM, /* its virtio-mem devices, also beside a usable balloon */
} BmDeviceChoice;

/* Rules for a guest. A [domain "GLOB"] section overrides only the keys it names: their bits
 * in set. [guest] and bm_policy_rules_for()'s result have every rule. References of
 * percentages are in the comments. */
typedef struct {
    char *glob;              /* NULL for [guest]; the pattern of [domain "GLOB"] */
    unsigned line;           /* line of the section header (0 for built-in defaults) */
    uint64_t set;            /* the rules a [domain] section gives: BM_RULE_BIT(field) */
    BmAmount floor;          /* never below this; % of maximum. <min_guarantee> raises it */
    BmAmount keep_free;      /* headroom the guest keeps usable after an inflate; % of maximum */
    BmAmount max_step;       /* largest change of one pass; % of maximum */
    BmAmount deadband;       /* smaller changes are not made; % of maximum */
    unsigned shares;         /* weight, 1..10000: more shares, less reclaimed (default 100) */
    double protect_major_faults; /* per second; above: guest under pressure (0 = off) */
    uint64_t protect_swap_in;    /* bytes per second; above: under pressure (0 = off) */
    uint64_t protect_cache_reads; /* bytes per second its disk reads rose by since before its
                                   * first inflate of the episode: its page cache is hot (0 =
                                   * off) */
    unsigned max_stats_age_s;    /* older guest stats are stale (0 = no limit) */
    bool exclude;                /* never touch this domain */
    BmTimerInflate timer_inflate; /* what a timer's pass (no look at the guest until the next
                                   * one) may inflate */
    BmDeviceChoice device;       /* what moves its memory */
} BmGuestRules;

/* The bit in BmGuestRules.set of the rule at offset in BmGuestRules (the key whose
 * destination it is), 0 if no key sets it. */
uint64_t bm_policy_rule_bit(size_t offset);
#define BM_RULE_BIT(field) bm_policy_rule_bit(offsetof(BmGuestRules, field))

/* Sets rule field of a [domain] section to value, as the key would (tests, lint). */
#define BM_RULE_SET(rules, field, value) \
    ((rules)->field = (value), (rules)->set |= BM_RULE_BIT(field))

/* The name of policy key i and its default as policies/default.policy writes it; false when
 * there is no key i (i counts from 0). */
bool bm_policy_key(size_t i, const char **ret_name, const char **ret_default);

/* Whether the policy key of len bytes at name takes a size (a bare number is KiB). */
bool bm_policy_key_is_size(const char *name, size_t len);

/* "deflate-on-oom", "always", "never". */
const char *bm_timer_inflate_name(BmTimerInflate v);

/* "auto", "balloon", "virtio-mem". */
const char *bm_device_choice_name(BmDeviceChoice v);

/* When the agent and `run` ask the QEMU monitor for SG/ioeventfd (libvirt marks a domain
 * "tainted" when a monitor command is sent to it). */
typedef enum {
    BM_VERIFY_AUTO,   /* only domains whose XML sets the balloon's sg/ioeventfd (qemu:override) */
    BM_VERIFY_ALWAYS, /* every running domain, once per start */
    BM_VERIFY_NEVER,  /* none: only `balloonmgr verify` and `status --probe` ask */
} BmVerifyFeatures;

/* "auto", "always", "never". */
const char *bm_verify_features_name(BmVerifyFeatures v);

/* Whether verify_features v has the QEMU monitor asked about a running domain (a monitor
 * command taints it in libvirt): always, or auto for a domain whose XML sets the balloon's
 * sg/ioeventfd (xml_known: its XML was read; overridden: BmBalloonConfig.features_overridden).
 * Exclusion aside: the caller leaves an excluded domain alone. Pure. */
bool bm_verify_features_asks(BmVerifyFeatures v, bool xml_known, bool overridden);

typedef struct {
    char *path;                  /* file it came from, or "(built-in)" */
    unsigned interval_s;         /* the agent's pass interval, 1..3600 */
    unsigned timer_interval_s;   /* time between two `run --once` of the timer (its
                                  * OnUnitActiveSec=), 10..3600: what such a pass plans for */
    BmAmount reclaim_below;      /* host MemAvailable below this: under pressure; % of MemTotal */
    BmAmount target_available;   /* reclaim until MemAvailable reaches this; % of MemTotal */
    BmAmount release_above;      /* MemAvailable above this: comfortable, give back; % of MemTotal */
    double psi_reclaim_above;    /* PSI memory "some" avg10 percent above which: pressure; <0 off */
    double psi_release_below;    /* ... below which (with MemAvailable): comfortable; <0 off */
    unsigned apply_timeout_s;    /* how long `run --once` waits for its changes (0: no wait) */
    BmVerifyFeatures verify_features; /* which domains the agent and `run` probe (default auto) */
    BmAmount hugepages_free_below; /* the huge-page pool's free pages below this: its own need,
                                    * met by unplugging huge-page guests' virtio-mem; % of the
                                    * pool (HugePages_Total); 0: none */
    BmGuestRules guest;          /* [guest]: defaults for every domain */
    BmGuestRules *domains;       /* [domain "GLOB"] sections in file order */
    size_t n_domains;
} BmPolicy;

/* A policy with the built-in defaults (the values documented in balloonmgr.policy(5) and
 * policies/default.policy). Caller frees with bm_policy_free(). */
BmPolicy *bm_policy_new_default(void);

/* Parses policy text; path names it in messages. Starts from the built-in defaults, so a file
 * only needs what it changes. Returns 0 and *ret (caller frees), or -EINVAL with *ret_errors:
 * every error found, one per line, each "path:line:col: message" (caller frees). Unknown keys,
 * keys in the wrong section, bad values, bad globs, duplicate keys and inconsistent thresholds
 * (reclaim_below < target_available < release_above) are errors. */
int bm_policy_parse(const char *text, const char *path, BmPolicy **ret, char **ret_errors);

/* bm_policy_parse() of len bytes of text, which may hold NUL bytes: a line with a NUL byte or
 * invalid UTF-8 is an error ("contains a NUL byte", "invalid UTF-8"), never read up to it. */
int bm_policy_parse_n(const char *text, size_t len, const char *path, BmPolicy **ret,
                      char **ret_errors);

/* The most of a policy file that is read. */
#define BM_POLICY_MAX_BYTES (16u * 1024 * 1024)

/* Reads and parses a file. Returns as bm_policy_parse(), or -errno with *ret_errors
 * "path: cannot read: reason" when the file cannot be read. */
int bm_policy_load(const char *path, BmPolicy **ret, char **ret_errors);

/* The policy of run/agent: path, which must exist when explicit; a missing default path
 * gives the built-in defaults. Returns as bm_policy_load(). */
int bm_policy_load_or_default(const char *path, bool explicit_path, BmPolicy **ret,
                              char **ret_errors);

void bm_policy_free(BmPolicy *p);
DEFINE_CLEANUP(BmPolicy *, bm_policy_free)

/* The rules for one domain: [guest] with every matching [domain "GLOB"] applied in file order
 * (later ones override earlier ones, field by field). Every field of *ret is set; ret->glob is
 * NULL. Pure; no allocation. */
void bm_policy_rules_for(const BmPolicy *p, const char *domain_name, BmGuestRules *ret);

/* How many times bm_policy_rules_for() ran in this process (tests: once per domain per pass). */
extern unsigned long bm_policy_rules_lookups;

/* An amount in bytes: bytes, or permille of reference_bytes. */
uint64_t bm_amount_bytes(BmAmount a, uint64_t reference_bytes);
