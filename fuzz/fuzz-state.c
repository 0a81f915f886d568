/* Fuzzes the state file parser (src/state.h): bm_state_parse into a ledger, then a round trip
 * through bm_state_format: what was read must read back the same. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>

#include "error.h"
#include "fuzz.h"
#include "state.h"

static bool same_double(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

static void check_same(const BmLedger *a, const BmLedger *b)
{
    const BmCounters *ca = &a->counters, *cb = &b->counters;
    fuzz_assert(a->mode == b->mode, "mode %d vs %d", a->mode, b->mode);
    for (int d = 0; d < BM_DIR_COUNT; d++) {
        for (int v = 0; v < BM_DEV_COUNT; v++)
        for (int s = 0; s < BM_SGL_COUNT; s++) {
            const BmHistogram *h = &ca->latency[v][d][s], *k = &cb->latency[v][d][s];
            fuzz_assert(h->n_bounds == k->n_bounds && h->count == k->count &&
                            same_double(h->sum, k->sum),
                        "histogram %d/%d: count %" PRIu64 " vs %" PRIu64 ", sum %g vs %g", d, s,
                        h->count, k->count, h->sum, k->sum);
            fuzz_assert(memcmp(h->counts, k->counts, sizeof(h->counts)) == 0,
                        "histogram %d/%d buckets", d, s);
        }
        for (int v = 0; v < BM_DEV_COUNT; v++)
            fuzz_assert(memcmp(ca->changes[v][d], cb->changes[v][d], sizeof(ca->changes[v][d])) == 0,
                        "changes %d/%d", v, d);
        fuzz_assert(ca->target_changes[d] == cb->target_changes[d], "target_changes %d", d);
    }
    fuzz_assert(memcmp(ca->errors, cb->errors, sizeof(ca->errors)) == 0, "errors");
    fuzz_assert(ca->passes == cb->passes && ca->rss_dropped_bytes == cb->rss_dropped_bytes &&
                    ca->last_success_s == cb->last_success_s &&
                    same_double(ca->last_pass_duration_s, cb->last_pass_duration_s),
                "scalar counters");
    fuzz_assert(a->n_entries == b->n_entries, "%zu vs %zu entries", a->n_entries, b->n_entries);
    for (size_t i = 0; i < a->n_entries; i++) {
        const BmLedgerEntry *x = a->entries[i], *y = bm_ledger_find(b, x->uuid);
        fuzz_assert(y != NULL, "entry '%s' lost in a round trip", x->uuid);
        fuzz_assert(strcmp(x->name, y->name) == 0, "entry '%s': name '%s' vs '%s'", x->uuid,
                    x->name, y->name);
        fuzz_assert(x->have_prev == y->have_prev &&
                        (!x->have_prev || memcmp(&x->prev, &y->prev, sizeof(x->prev)) == 0),
                    "entry '%s': reading differs", x->uuid);
        fuzz_assert(x->last_target_bytes == y->last_target_bytes &&
                        x->last_rss_drop_bytes == y->last_rss_drop_bytes &&
                        same_double(x->last_duration_s, y->last_duration_s) &&
                        x->last_direction == y->last_direction &&
                        x->unresponsive == y->unresponsive &&
                        x->unresponsive_actual == y->unresponsive_actual &&
                        x->unresponsive_until_s == y->unresponsive_until_s,
                    "entry %zu ('%s') differs after a round trip", i, x->uuid);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size);
    BmLedger l;
    int r = bm_state_parse(text, &l);
    if (r < 0) {
        fuzz_assert(r == -EINVAL, "bm_state_parse returned %d", r);
        fuzz_assert(l.n_entries == 0, "failure leaves entries");
    } else {
        for (size_t i = 0; i < l.n_entries; i++) {
            fuzz_assert(l.entries[i]->last_direction >= -1 && l.entries[i]->last_direction < BM_DIR_COUNT,
                        "last_direction %d", l.entries[i]->last_direction);
            fuzz_assert(bm_ledger_find(&l, l.entries[i]->uuid) == l.entries[i], "entry lookup");
        }
        char *again = bm_state_format(&l, 1700000000);
        BmLedger l2;
        r = bm_state_parse(again, &l2);
        fuzz_assert(r == 0, "own output refused: %s\n%s", bm_error_detail(r), again);
        check_same(&l, &l2);
        bm_ledger_clear(&l2);
        free(again);
    }
    bm_ledger_clear(&l);
    free(text);
    return 0;
}
