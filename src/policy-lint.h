/* Warnings about a policy that parses but likely does not say what its writer meant (issue
 * 23.4): sizes written as bare numbers (KiB, as in virsh) that are under 1 MiB, a keep_free
 * of 0, and, against a host, sizes beyond what the host or a domain has. Pure: the text, the
 * parsed policy and a host reading in, warnings out. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "policy.h"

typedef struct {
    const char *name;
    uint64_t max_bytes; /* the domain's maximum memory */
} BmLintDomain;

typedef struct {
    uint64_t mem_total_bytes; /* BM_ABSENT: not known (no host checks of the [host] sizes) */
    const BmLintDomain *domains;
    size_t n_domains;
} BmLintHost;

/* Checks policy p, parsed from text (len bytes, file path): every warning a line
 * "path:line:col: warning: ...\n" in line order, into *ret_warnings (caller frees; NULL when
 * there is none). host may be NULL (no host checks). Returns the number of warnings. */
size_t bm_policy_lint(const char *text, size_t len, const char *path, const BmPolicy *p,
                      const BmLintHost *host, char **ret_warnings);
