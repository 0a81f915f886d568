/* One row per domain per pass (docs/design.md): after the read, each domain's reading, its
 * ledger entry and the policy's rules for it are joined once, by UUID and by name, and the
 * ledger is brought in line with the reading through them; probing, evaluating, applying,
 * noting the pass and exporting then walk the rows and join nothing again. */
#pragma once

#include <stddef.h>

#include "ledger.h"
#include "policy.h"
#include "snapshot.h"

struct BmDecision;

typedef struct {
    BmDomain *dom;          /* this pass's reading: one of the snapshot's domains */
    BmLedgerEntry *entry;   /* what the ledger remembers of it (stays where it is while the
                             * domain is in the ledger) */
    BmGuestRules rules;     /* the policy's rules for it (bm_policy_rules_for()), resolved once */
    const struct BmDecision *decision; /* its decision in the engine's last plan (kept through
                             * its entry: BmLedgerEntry.plan_index), NULL: none */
} BmRow;

typedef struct {
    BmRow *rows;            /* in the snapshot's order */
    size_t n_rows;
} BmRows;

/* The join of a reading taken at now_s on the host boot_id (NULL: unknown): one row per domain
 * of snap, in its order, with its ledger entry (added to l if new) and its rules under policy
 * (NULL: all zero, nothing excluded); then l brought in line with the reading through the rows
 * (bm_ledger_sync_begin(), _entry() per row, _end(): entries of domains gone dropped). The rows
 * point into snap and l: valid until snap is cleared (a ledger entry stays where it is while
 * its domain is in a reading). Free with bm_rows_clear(). */
void bm_rows_build(BmRows *ret, BmSnapshot *snap, BmLedger *l, const BmPolicy *policy,
                   const char *boot_id, uint64_t now_s);

/* Each row's balloon corrected from its entry's last change (bm_ledger_correct_balloon()) in a
 * reading taken at taken_real_ns: a part of the read step, after the join. Returns how many it
 * corrected. */
size_t bm_rows_correct(BmRows *rows, uint64_t taken_real_ns);

/* The end of a pass in host mode mode at now_s (horizon_s: until the next one looks at the
 * guests): the mode kept in l, and each row's reading kept in its entry as the next pass's base
 * (bm_ledger_note_mode(), bm_ledger_note_reading()). */
void bm_rows_note(const BmRows *rows, BmLedger *l, BmHostMode mode, uint64_t now_s,
                  unsigned horizon_s);

/* Resolves every row's rules again under policy (a policy reloaded between two readings), and
 * what moves each domain's memory with them: its balloon or its virtio-mem devices, as the
 * rule device says (auto: the reading's choice; bm_domain_move_by()). */
void bm_rows_set_policy(BmRows *r, const BmPolicy *policy);

/* Frees the rows (not what they point to) and zeroes r. NULL-safe. */
void bm_rows_clear(BmRows *r);
