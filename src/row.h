/* One row per domain per pass (docs/design.md): after the read, each domain's reading, its
 * ledger entry and the policy's rules for it are joined once, by UUID and by name; probing,
 * evaluating, applying, noting the pass and exporting then walk the rows and join nothing
 * again. */
#pragma once

#include <stddef.h>

#include "ledger.h"
#include "policy.h"
#include "snapshot.h"

typedef struct {
    BmDomain *dom;          /* this pass's reading: one of the snapshot's domains */
    BmLedgerEntry *entry;   /* what the ledger remembers of it (stays where it is while the
                             * domain is in the ledger); NULL only in a read-only join
                             * (bm_rows_join()) of a domain the ledger does not know */
    BmGuestRules rules;     /* the policy's rules for it (bm_policy_rules_for()), resolved once */
} BmRow;

typedef struct {
    BmRow *rows;            /* in the snapshot's order */
    size_t n_rows;
} BmRows;

/* One row per domain of snap, in its order, with its ledger entry (added to l if new) and its
 * rules under policy (NULL: all zero, nothing excluded). The rows point into snap and l: valid
 * until snap is cleared (a ledger entry stays where it is while its domain is in a reading).
 * Free with bm_rows_clear(). */
void bm_rows_build(BmRows *ret, BmSnapshot *snap, BmLedger *l, const BmPolicy *policy);

/* The same for a reader that changes nothing (evaluating a hand-made snapshot, a status): l may
 * be NULL, entries it lacks are NULL. The rows must be read only. */
void bm_rows_join(BmRows *ret, const BmSnapshot *snap, const BmLedger *l, const BmPolicy *policy);

/* Resolves every row's rules again under policy (a policy reloaded between two readings). */
void bm_rows_set_policy(BmRows *r, const BmPolicy *policy);

/* Frees the rows (not what they point to) and zeroes r. NULL-safe. */
void bm_rows_clear(BmRows *r);
