#include "row.h"

#include <stdlib.h>

#include "util.h"

static void join(BmRows *ret, BmSnapshot *snap, BmLedger *l, bool add, const BmPolicy *policy)
{
    *ret = (BmRows){.rows = bm_malloc0((snap->n_domains + 1) * sizeof(BmRow)),
                    .n_rows = snap->n_domains};
    for (size_t i = 0; i < snap->n_domains; i++) {
        BmRow *row = &ret->rows[i];
        row->dom = &snap->domains[i];
        if (add)
            row->entry = bm_ledger_entry(l, row->dom->uuid, row->dom->name);
        else
            row->entry = (BmLedgerEntry *)bm_ledger_find(l, row->dom->uuid);
    }
    bm_rows_set_policy(ret, policy);
}

void bm_rows_build(BmRows *ret, BmSnapshot *snap, BmLedger *l, const BmPolicy *policy)
{
    join(ret, snap, l, true, policy);
}

void bm_rows_join(BmRows *ret, const BmSnapshot *snap, const BmLedger *l, const BmPolicy *policy)
{
    join(ret, (BmSnapshot *)snap, (BmLedger *)l, false, policy);
}

void bm_rows_set_policy(BmRows *r, const BmPolicy *policy)
{
    for (size_t i = 0; i < r->n_rows; i++) {
        if (policy)
            bm_policy_rules_for(policy, r->rows[i].dom->name, &r->rows[i].rules);
        else
            r->rows[i].rules = (BmGuestRules){0};
    }
}

void bm_rows_clear(BmRows *r)
{
    if (!r)
        return;
    free(r->rows);
    *r = (BmRows){0};
}
