/* bench/run.sh's export timing after a new reading: a plan made from N domains (the pass's rows,
 * bm_rows_build(), and bm_plan_attach()), then a reading with one domain more whose name sorts
 * first (every domain's index shifted by one, as after a domain was defined between a pass and
 * a refresh) joined as the engine joins it (its rows, bm_plan_link()), and the time of rendering
 * the exposition from it (bm_export_build() and bm_registry_render()). Prints "N MS", the best
 * of 5. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "export.h"
#include "row.h"
#include "metrics.h"
#include "util.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Domain i: running, 3 of its 4 GiB, 2 GiB usable. */
static void make_domain(BmDomain *d, unsigned i)
{
    *d = (BmDomain){.name = bm_asprintf("dom%06u", i), .state = 1 /* VIR_DOMAIN_RUNNING */,
                    .id = (int)i + 1, .active = true, .max_bytes = 4ull << 30,
                    .actual_bytes = 3ull << 30, .available_bytes = 3ull << 30,
                    .usable_bytes = 2ull << 30, .unused_bytes = 1ull << 30,
                    .disk_caches_bytes = 1ull << 29, .rss_bytes = 3ull << 30,
                    .last_update_s = 1800000000};
    snprintf(d->uuid, sizeof(d->uuid), "%08x-1111-2222-3333-444444444444", i * 2654435761u);
}

int main(int argc, char **argv)
{
    unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 1000;
    BmSnapshot before = {.domains = bm_malloc0((n + 1) * sizeof(BmDomain)), .n_domains = n};
    BmSnapshot after = {.domains = bm_malloc0((n + 1) * sizeof(BmDomain)), .n_domains = n + 1};
    make_domain(&after.domains[0], 0);
    for (unsigned i = 0; i < n; i++) {
        make_domain(&before.domains[i], i + 1);
        make_domain(&after.domains[i + 1], i + 1);
    }
    BmHost host = {.mem_total_bytes = 64ull << 30, .mem_available_bytes = 2ull << 30};
    _cleanup_(bm_policy_freep) BmPolicy *policy = bm_policy_new_default();
    BmLedger ledger;
    bm_ledger_init(&ledger);
    BmPlan plan;
    BmRows rows;
    bm_rows_build(&rows, &before, &ledger, policy, NULL, 1800000000);
    if (bm_policy_eval_rows(&host, &rows, ledger.mode, policy, 1800000000, 0, &plan) < 0)
        return 1;
    bm_plan_attach(&plan, &rows, 1);
    bm_rows_clear(&rows);
    bm_rows_build(&rows, &after, &ledger, policy, NULL, 1800000001);
    bm_plan_link(&plan, &rows);
    BmView v = {.snap = &after, .rows = &rows, .host = &host, .have_mode = true, .mode = plan.mode,
                .libvirt_up = true, .plan = &plan};
    double best = -1;
    for (int k = 0; k < 5; k++) {
        BmRegistry *r = bm_registry_new();
        double t0 = now_s();
        bm_export_build(r, &ledger, &v);
        free(bm_registry_render(r));
        double t = now_s() - t0;
        bm_registry_free(r);
        if (best < 0 || t < best)
            best = t;
    }
    printf("%u %.1f\n", n, best * 1000);
    bm_plan_clear(&plan);
    bm_rows_clear(&rows);
    bm_ledger_clear(&ledger);
    for (unsigned i = 0; i < n; i++)
        free(before.domains[i].name);
    for (unsigned i = 0; i <= n; i++)
        free(after.domains[i].name);
    free(before.domains);
    free(after.domains);
    return 0;
}
