/* The production route for tests of hand-made readings and ledgers: a reading joined as the
 * engine joins it (bm_rows_build(): the rows, the ledger brought in line; bm_rows_correct(): the
 * balloons corrected), evaluated from those rows (bm_policy_eval_rows()) and noted as the next pass's
 * base (bm_rows_note()). No test takes a route production does not. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "ledger.h"
#include "policy-eval.h"
#include "row.h"

/* snap at now_s joined with l as the engine joins it: the rows (l brought in line), then the
 * balloons corrected from the changes that ended. Free with bm_rows_clear(). */
static inline void route_join(BmRows *rows, BmSnapshot *snap, BmLedger *l, const BmPolicy *p,
                              const char *boot_id, uint64_t now_s)
{
    bm_rows_build(rows, snap, l, p, boot_id, now_s);
    bm_rows_correct(rows, snap->taken_real_ns);
}

/* snap read at now_s on the host boot_id (NULL: unknown): l brought in line with it. */
static inline void route_sync(BmLedger *l, BmSnapshot *snap, const char *boot_id, uint64_t now_s)
{
    BmRows rows;
    route_join(&rows, snap, l, NULL, boot_id, now_s);
    bm_rows_clear(&rows);
}

/* A pass over snap at now_s on the host boot_id ends in mode: its reading joined with l, then
 * noted in it. */
static inline void route_note(BmLedger *l, BmSnapshot *snap, const char *boot_id, BmHostMode mode,
                              uint64_t now_s, unsigned horizon_s)
{
    BmRows rows;
    route_join(&rows, snap, l, NULL, boot_id, now_s);
    bm_rows_note(&rows, l, mode, now_s, horizon_s);
    bm_rows_clear(&rows);
}

/* A pass's evaluation of snap at now_s joined with l (NULL: a ledger of its own, the first
 * pass of a new agent), from l's last mode. Returns bm_policy_eval_rows()'s. */
static inline int route_eval(const BmHost *h, BmSnapshot *snap, BmLedger *l, const BmPolicy *p,
                             uint64_t now_s, unsigned horizon_s, BmPlan *ret)
{
    BmLedger own;
    if (!l) {
        bm_ledger_init(&own);
        l = &own;
    }
    BmRows rows;
    route_join(&rows, snap, l, p, NULL, now_s);
    int r = bm_policy_eval_rows(h, &rows, l->mode, p, now_s, horizon_s, ret);
    bm_rows_clear(&rows);
    if (l == &own)
        bm_ledger_clear(&own);
    return r;
}

/* The guest watch's check on snap at now_s joined with l (NULL: a ledger of its own). */
static inline bool route_in_need(BmSnapshot *snap, BmLedger *l, const BmPolicy *p, uint64_t now_s)
{
    BmLedger own;
    if (!l) {
        bm_ledger_init(&own);
        l = &own;
    }
    BmRows rows;
    route_join(&rows, snap, l, p, NULL, now_s);
    bool need = bm_policy_rows_in_need(&rows, now_s);
    bm_rows_clear(&rows);
    if (l == &own)
        bm_ledger_clear(&own);
    return need;
}
