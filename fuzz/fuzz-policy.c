/* Fuzzes the policy parser (src/policy.h): bm_policy_parse on the text before the first NUL of
 * the input, then bm_policy_rules_for on the name after it (and on each [domain] glob, and a
 * few fixed names), checking the parsed policy keeps the documented ranges; then
 * bm_policy_parse_n on the whole input, which a NUL byte must make refused. */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>

#include "diag.h"
#include "error.h"
#include "fuzz.h"
#include "policy.h"

static void check_amount(BmAmount a, const char *what)
{
    if (a.is_percent)
        fuzz_assert(a.permille <= 1000, "%s is %u permille", what, a.permille);
}

static void check_rules(const BmPolicy *p, const char *name)
{
    BmGuestRules r;
    bm_policy_rules_for(p, name, &r);
    fuzz_assert(r.glob == NULL, "rules for '%s' have a glob", name);
    check_amount(r.floor, "floor");
    check_amount(r.keep_free, "keep_free");
    check_amount(r.max_step, "max_step");
    check_amount(r.deadband, "deadband");
    fuzz_assert(r.max_step.is_percent ? r.max_step.permille > 0 : r.max_step.bytes > 0,
                "max_step 0 for '%s'", name);
    fuzz_assert(r.shares >= 1 && r.shares <= 10000, "shares %u", r.shares);
    fuzz_assert(r.protect_major_faults >= 0,
                "protect_major_faults %g", r.protect_major_faults);
    fuzz_assert((r.set & p->guest.set) == p->guest.set, "rules for '%s' not all set", name);
    fuzz_assert(r.max_stats_age_s <= 24 * 3600, "max_stats_age %u", r.max_stats_age_s);
    (void)bm_amount_bytes(r.floor, UINT64_MAX);
    (void)bm_amount_bytes(r.max_step, 1ull << 34);
}

static void check_policy(const BmPolicy *p, const char *name)
{
    fuzz_assert(p->interval_s >= 1 && p->interval_s <= 3600, "interval %u", p->interval_s);
    fuzz_assert(p->apply_timeout_s <= 3600, "apply_timeout %u", p->apply_timeout_s);
    check_amount(p->reclaim_below, "reclaim_below");
    check_amount(p->target_available, "target_available");
    check_amount(p->release_above, "release_above");
    const BmAmount *a[] = {&p->reclaim_below, &p->target_available, &p->release_above};
    fuzz_assert(a[0]->is_percent == a[1]->is_percent && a[1]->is_percent == a[2]->is_percent,
                "thresholds mix sizes and percentages");
    {
        uint64_t v[3];
        for (int i = 0; i < 3; i++)
            v[i] = a[i]->is_percent ? a[i]->permille : a[i]->bytes;
        fuzz_assert(v[0] < v[1] && v[1] < v[2], "thresholds %" PRIu64 " %" PRIu64 " %" PRIu64, v[0],
                    v[1], v[2]);
    }
    fuzz_assert(p->psi_reclaim_above == -1 ||
                    (p->psi_reclaim_above >= 0 && p->psi_reclaim_above <= 100),
                "psi_reclaim_above %g", p->psi_reclaim_above);
    fuzz_assert(p->psi_release_below == -1 ||
                    (p->psi_release_below >= 0 && p->psi_release_below <= 100),
                "psi_release_below %g", p->psi_release_below);
    if (p->psi_reclaim_above >= 0 && p->psi_release_below >= 0)
        fuzz_assert(p->psi_release_below < p->psi_reclaim_above, "psi thresholds out of order");
    fuzz_assert(p->n_domains == 0 || p->domains, "domains");

    static const char *fixed[] = {"web1", "db-primary", "", "a*b", "\xff\xfe"};
    check_rules(p, name);
    check_rules(p, NULL);
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        check_rules(p, fixed[i]);
    for (size_t i = 0; i < p->n_domains; i++) {
        fuzz_assert(p->domains[i].glob && p->domains[i].glob[0], "domain %zu: empty glob", i);
        fuzz_assert(p->domains[i].line > 0, "domain %zu: no line", i);
        check_rules(p, p->domains[i].glob);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size);
    const uint8_t *nul = memchr(data, '\0', size);
    char *name = nul ? fuzz_cstr(nul + 1, size - (size_t)(nul + 1 - data)) : strdup("web1");

    BmPolicy *p = NULL;
    char *errors = NULL;
    bm_error_reset();
    int r = bm_policy_parse(text, "fuzz.policy", &p, &errors);
    if (r == 0) {
        fuzz_assert(p && !errors, "success without a policy, or with errors");
        check_policy(p, name);
    } else {
        fuzz_assert(r == -EINVAL, "bm_policy_parse returned %d", r);
        fuzz_assert(!p, "failure with a policy");
        fuzz_assert(errors && errors[0], "failure without errors");
        /* one "fuzz.policy:LINE:COL: message" per line, ending in a newline */
        fuzz_assert(errors[strlen(errors) - 1] == '\n', "errors end without a newline");
        size_t n_lines = 0;
        for (const char *line = errors; *line; line = strchr(line, '\n') + 1) {
            unsigned l, c;
            size_t more;
            n_lines++;
            fuzz_assert((sscanf(line, "fuzz.policy:%u:%u: ", &l, &c) == 2 && l > 0) ||
                            (sscanf(line, "fuzz.policy: %zu more error", &more) == 1 && more > 0 &&
                             !strchr(line, '\n')[1]),
                        "error line '%.80s'", line);
        }
        fuzz_assert(n_lines <= BM_DIAGS_MAX + 1, "%zu error lines", n_lines);
    }
    bm_policy_free(p);
    free(errors);

    /* no outputs wanted: must still work */
    r = bm_policy_parse(text, NULL, NULL, NULL);
    fuzz_assert(r == 0 || r == -EINVAL, "bm_policy_parse returned %d", r);

    /* the whole input, NUL bytes included: refused unless it has none */
    r = bm_policy_parse_n((const char *)data, size, "fuzz.policy", &p, NULL);
    fuzz_assert(r == 0 || r == -EINVAL, "bm_policy_parse_n returned %d", r);
    fuzz_assert(!nul || r == -EINVAL, "a policy with a NUL byte accepted");
    bm_policy_free(p);

    free(name);
    free(text);
    return 0;
}
