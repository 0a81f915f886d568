#include "row.h"

#include <stdlib.h>

#include "util.h"

void bm_rows_build(BmRows *ret, BmSnapshot *snap, BmLedger *l, const BmPolicy *policy,
                   const char *boot_id, uint64_t now_s)
{
    *ret = (BmRows){.rows = bm_malloc0((snap->n_domains + 1) * sizeof(BmRow)),
                    .n_rows = snap->n_domains};
    for (size_t i = 0; i < snap->n_domains; i++) {
        BmRow *row = &ret->rows[i];
        row->dom = &snap->domains[i];
        row->entry = bm_ledger_entry(l, row->dom->uuid, row->dom->name);
    }
    bm_rows_set_policy(ret, policy);
    bm_ledger_sync_begin(l);
    for (size_t i = 0; i < ret->n_rows; i++)
        bm_ledger_sync_entry(l, ret->rows[i].entry, ret->rows[i].dom, boot_id, now_s);
    bm_ledger_sync_end(l); /* entries of domains gone dropped; the rows' stay */
}

size_t bm_rows_correct(BmRows *rows, uint64_t taken_real_ns)
{
    size_t n = 0;
    for (size_t i = 0; i < rows->n_rows; i++)
        n += bm_ledger_correct_balloon(rows->rows[i].entry, rows->rows[i].dom, taken_real_ns);
    return n;
}

void bm_rows_note(const BmRows *rows, BmLedger *l, BmHostMode mode, uint64_t now_s,
                  unsigned horizon_s)
{
    bm_ledger_note_mode(l, mode);
    for (size_t i = 0; i < rows->n_rows; i++)
        bm_ledger_note_reading(rows->rows[i].entry, rows->rows[i].dom, mode, now_s, horizon_s);
}

void bm_rows_set_policy(BmRows *r, const BmPolicy *policy)
{
    for (size_t i = 0; i < r->n_rows; i++) {
        BmRow *row = &r->rows[i];
        if (policy)
            bm_policy_rules_for(policy, row->dom->name, &row->rules);
        else
            row->rules = (BmGuestRules){0};
        /* what moves it: the reading's choice unless the key device says which */
        BmDeviceChoice c = row->rules.device;
        bm_domain_move_by(row->dom, c == BM_DEVICE_AUTO ? row->dom->vmem_auto
                                                        : c == BM_DEVICE_VIRTIO_MEM);
    }
}

void bm_rows_clear(BmRows *r)
{
    if (!r)
        return;
    free(r->rows);
    *r = (BmRows){0};
}
