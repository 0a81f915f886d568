/* Fuzzes the state file parser (src/state.h): bm_state_parse with counters, then a round trip
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

static void check_same(const BmPrevious *a, const BmCounters *ca, const BmPrevious *b,
                       const BmCounters *cb)
{
    fuzz_assert(a->mode == b->mode, "mode %d vs %d", a->mode, b->mode);
    fuzz_assert(a->n_domains == b->n_domains, "%zu vs %zu domains", a->n_domains, b->n_domains);
    for (size_t i = 0; i < a->n_domains; i++) {
        const BmPrevDomain *x = &a->domains[i], *y = &b->domains[i];
        fuzz_assert(strcmp(x->uuid, y->uuid) == 0, "uuid '%s' vs '%s'", x->uuid, y->uuid);
        fuzz_assert(x->major_faults == y->major_faults && x->swap_in_bytes == y->swap_in_bytes &&
                        x->last_update_s == y->last_update_s && x->taken_s == y->taken_s,
                    "domain %zu counters differ", i);
    }
    for (int d = 0; d < BM_DIR_COUNT; d++) {
        for (int s = 0; s < BM_SGL_COUNT; s++) {
            const BmHistogram *h = &ca->latency[d][s], *k = &cb->latency[d][s];
            fuzz_assert(h->n_bounds == k->n_bounds && h->count == k->count &&
                            same_double(h->sum, k->sum),
                        "histogram %d/%d: count %" PRIu64 " vs %" PRIu64 ", sum %g vs %g", d, s,
                        h->count, k->count, h->sum, k->sum);
            fuzz_assert(memcmp(h->counts, k->counts, sizeof(h->counts)) == 0,
                        "histogram %d/%d buckets", d, s);
        }
        fuzz_assert(memcmp(ca->changes[d], cb->changes[d], sizeof(ca->changes[d])) == 0,
                    "changes %d", d);
        fuzz_assert(ca->target_changes[d] == cb->target_changes[d], "target_changes %d", d);
    }
    fuzz_assert(memcmp(ca->errors, cb->errors, sizeof(ca->errors)) == 0, "errors");
    fuzz_assert(ca->passes == cb->passes && ca->rss_dropped_bytes == cb->rss_dropped_bytes &&
                    ca->last_success_s == cb->last_success_s &&
                    same_double(ca->last_pass_duration_s, cb->last_pass_duration_s),
                "scalar counters");
    fuzz_assert(ca->n_domains == cb->n_domains, "%zu vs %zu records", ca->n_domains, cb->n_domains);
    for (size_t i = 0; i < ca->n_domains; i++) {
        const BmDomainRecord *x = &ca->domains[i], *y = &cb->domains[i];
        fuzz_assert(strcmp(x->uuid, y->uuid) == 0 && strcmp(x->name, y->name) == 0,
                    "record %zu: '%s' '%s' vs '%s' '%s'", i, x->uuid, x->name, y->uuid, y->name);
        fuzz_assert(x->last_target_bytes == y->last_target_bytes &&
                        x->last_rss_drop_bytes == y->last_rss_drop_bytes &&
                        same_double(x->last_duration_s, y->last_duration_s) &&
                        x->last_direction == y->last_direction &&
                        x->unresponsive == y->unresponsive &&
                        x->unresponsive_actual == y->unresponsive_actual &&
                        x->unresponsive_until_s == y->unresponsive_until_s,
                    "record %zu ('%s') differs after a round trip", i, x->uuid);
        fuzz_assert(bm_counters_find(cb, x->uuid) != NULL, "record '%s' not indexed", x->uuid);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size);
    BmPrevious prev;
    BmCounters counters;
    int r = bm_state_parse(text, &prev, &counters);
    if (r < 0) {
        fuzz_assert(r == -EINVAL, "bm_state_parse returned %d", r);
        fuzz_assert(prev.domains == NULL && prev.n_domains == 0, "failure leaves domains");
    } else {
        for (size_t i = 0; i < counters.n_domains; i++) {
            fuzz_assert(counters.domains[i].last_direction >= -1 &&
                            counters.domains[i].last_direction < BM_DIR_COUNT,
                        "last_direction %d", counters.domains[i].last_direction);
            fuzz_assert(bm_counters_find(&counters, counters.domains[i].uuid) ==
                                &counters.domains[i] ||
                            strcmp(bm_counters_find(&counters, counters.domains[i].uuid)->uuid,
                                   counters.domains[i].uuid) == 0,
                        "record lookup");
        }
        char *again = bm_state_format(&prev, &counters, 1700000000);
        BmPrevious prev2;
        BmCounters counters2;
        r = bm_state_parse(again, &prev2, &counters2);
        fuzz_assert(r == 0, "own output refused: %s\n%s", bm_error_detail(r), again);
        check_same(&prev, &counters, &prev2, &counters2);
        bm_previous_clear(&prev2);
        bm_counters_clear(&counters2);
        free(again);
    }
    bm_previous_clear(&prev);
    bm_counters_clear(&counters);

    /* without counters */
    r = bm_state_parse(text, &prev, NULL);
    fuzz_assert(r == 0 || r == -EINVAL, "bm_state_parse returned %d", r);
    bm_previous_clear(&prev);

    free(text);
    return 0;
}
