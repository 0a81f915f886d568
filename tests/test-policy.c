/* Policy files (balloonmgr.policy(5)): the defaults and policies/default.policy agree, every
 * shipped policy and good fixture parses, every bad fixture fails with exactly the messages in
 * its .err file, [domain] sections override in file order, and no input makes the parser crash,
 * leak or take quadratic time. */
#include <errno.h>
#include <glob.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diag.h"
#include "fixture.h"
#include "policy.h"
#include "tap.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)
#define GiB (1024ull * MiB)

static bool amount_eq(BmAmount a, BmAmount b)
{
    return a.is_percent == b.is_percent &&
           (a.is_percent ? a.permille == b.permille : a.bytes == b.bytes);
}

static bool is_pct(BmAmount a, uint32_t permille)
{
    return a.is_percent && a.permille == permille;
}

static bool is_bytes(BmAmount a, uint64_t bytes)
{
    return !a.is_percent && a.bytes == bytes;
}

/* Parses fixture tests/data/policy/REL, named REL in messages. */
DEFINE_PARSE_FIXTURE("policy", BmPolicy, bm_policy_parse)

/* The guest rules of domain `name` under policy p. */
static BmGuestRules rules(const BmPolicy *p, const char *name)
{
    BmGuestRules r;
    bm_policy_rules_for(p, name, &r);
    return r;
}

static void test_defaults(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *p = bm_policy_new_default();
    ok(p->interval_s == 10, "default interval 10s");
    ok(is_pct(p->reclaim_below, 100), "default reclaim_below 10%%");
    ok(is_pct(p->target_available, 150), "default target_available 15%%");
    ok(is_pct(p->release_above, 250), "default release_above 25%%");
    ok(p->psi_reclaim_above == 10 && p->psi_release_below == 1, "default PSI 10%% / 1%%");
    ok(p->apply_timeout_s == 60, "default apply_timeout 60s");
    ok(is_pct(p->guest.floor, 250) && is_pct(p->guest.keep_free, 150) &&
           is_pct(p->guest.max_step, 250) && is_bytes(p->guest.deadband, 32 * MiB),
       "default floor 25%%, keep_free 15%%, max_step 25%%, deadband 32M");
    ok(p->guest.shares == 100, "default shares 100");
    ok(p->guest.protect_major_faults == 50,
       "default protect_major_faults 50");
    ok(p->guest.protect_swap_in == MiB,
       "default protect_swap_in 1M");
    ok(p->guest.max_stats_age_s == 30, "default max_stats_age 30s");
    ok(p->guest.exclude == 0, "default exclude no");
    ok(p->n_domains == 0 && p->domains == NULL && p->guest.glob == NULL, "no [domain] sections");
    is_str(p->path, "(built-in)", "built-in path");

    BmGuestRules r = rules(p, "any");
    ok(amount_eq(r.floor, p->guest.floor) && r.shares == 100 && r.exclude == 0 && !r.glob,
       "rules_for on the defaults gives the defaults");
}

/* Every key of the table is in policies/default.policy with its default ("name = value", as
 * the table writes it) and in balloonmgr.policy(5) ("*name* ="). */
static void test_every_key_documented(void)
{
    _cleanup_free_ char *policy = fixture_read("../../policies/default.policy");
    _cleanup_free_ char *man = fixture_read("../../man/balloonmgr.policy.5.scd");
    const char *name, *def;
    size_t n = 0, in_policy = 0, in_man = 0;
    for (size_t i = 0; bm_policy_key(i, &name, &def); i++, n++) {
        _cleanup_free_ char *line = bm_asprintf("\n%s = %s\n", name, def);
        _cleanup_free_ char *entry = bm_asprintf("\n*%s* =", name);
        if (policy && strstr(policy, line))
            in_policy++;
        else
            diag("default.policy lacks '%s = %s'", name, def);
        if (man && strstr(man, entry))
            in_man++;
        else
            diag("balloonmgr.policy(5) lacks '*%s* ='", name);
    }
    ok(n >= 20, "the key table (%zu keys)", n);
    is_u64(in_policy, n, "default.policy sets every key to its built-in default");
    is_u64(in_man, n, "the man page describes every key");
}

/* policies/default.policy must say exactly what bm_policy_new_default() does. */
static void test_default_file_matches(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *d = bm_policy_new_default();
    _cleanup_(bm_policy_freep) BmPolicy *f = NULL;
    _cleanup_free_ char *errors = NULL;
    int r = bm_policy_load(SOURCE_ROOT "/policies/default.policy", &f, &errors);
    ok(r == 0, "policies/default.policy parses");
    if (r < 0) {
        printf("# %s", errors ? errors : "");
        return;
    }
    is_u64(f->interval_s, d->interval_s, "default.policy: interval");
    ok(amount_eq(f->reclaim_below, d->reclaim_below), "default.policy: reclaim_below");
    ok(amount_eq(f->target_available, d->target_available), "default.policy: target_available");
    ok(amount_eq(f->release_above, d->release_above), "default.policy: release_above");
    ok(f->psi_reclaim_above == d->psi_reclaim_above, "default.policy: psi_reclaim_above");
    ok(f->psi_release_below == d->psi_release_below, "default.policy: psi_release_below");
    is_u64(f->apply_timeout_s, d->apply_timeout_s, "default.policy: apply_timeout");
    is_u64(f->timer_interval_s, d->timer_interval_s, "default.policy: timer_interval");
    ok(d->timer_interval_s == 60, "default timer_interval 60s");
    ok(f->verify_features == d->verify_features && d->verify_features == BM_VERIFY_AUTO,
       "default.policy: verify_features auto");
    const BmGuestRules *fg = &f->guest, *dg = &d->guest;
    ok(amount_eq(fg->floor, dg->floor), "default.policy: floor");
    ok(amount_eq(fg->keep_free, dg->keep_free), "default.policy: keep_free");
    ok(amount_eq(fg->max_step, dg->max_step), "default.policy: max_step");
    ok(amount_eq(fg->deadband, dg->deadband), "default.policy: deadband");
    ok(fg->shares == dg->shares, "default.policy: shares");
    ok(fg->protect_major_faults == dg->protect_major_faults,
       "default.policy: protect_major_faults");
    ok(fg->protect_swap_in == dg->protect_swap_in,
       "default.policy: protect_swap_in");
    ok(fg->protect_cache_reads == dg->protect_cache_reads,
       "default.policy: protect_cache_reads");
    ok(fg->max_stats_age_s == dg->max_stats_age_s,
       "default.policy: max_stats_age");
    ok(fg->exclude == dg->exclude, "default.policy: exclude");
    ok(fg->timer_inflate == dg->timer_inflate && dg->timer_inflate == BM_TIMER_INFLATE_DEFLATE_ON_OOM,
       "default.policy: timer_inflate deflate-on-oom");
    ok(f->n_domains == 0, "default.policy: no [domain] sections (examples are comments)");
    ok(fg->line > 0, "default.policy: has a [guest] section");
}

/* Every file matching pattern parses without errors; returns how many there were. */
static size_t check_all_parse(const char *pattern, const char *what)
{
    glob_t g;
    size_t n = 0;
    if (glob(pattern, 0, NULL, &g) != 0)
        return 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        _cleanup_(bm_policy_freep) BmPolicy *p = NULL;
        _cleanup_free_ char *errors = NULL;
        int r = bm_policy_load(g.gl_pathv[i], &p, &errors);
        ok(r == 0 && p && !errors, "%s %s parses", what, basename(g.gl_pathv[i]));
        if (r < 0)
            printf("# %s", errors ? errors : "");
        n++;
    }
    globfree(&g);
    return n;
}

static void test_shipped_and_good(void)
{
    size_t n = check_all_parse(SOURCE_ROOT "/policies/*.policy", "shipped");
    ok(n >= 3, "at least 3 shipped policies (found %zu)", n);
    n = check_all_parse(SOURCE_ROOT "/tests/data/policy/good/*.policy", "good");
    ok(n >= 8, "at least 8 good fixtures (found %zu)", n);

    /* the shipped ones differ where their comments say */
    _cleanup_(bm_policy_freep) BmPolicy *c = NULL, *a = NULL;
    bm_policy_load(SOURCE_ROOT "/policies/conservative.policy", &c, NULL);
    bm_policy_load(SOURCE_ROOT "/policies/aggressive.policy", &a, NULL);
    if (c && a) {
        ok(is_pct(c->guest.floor, 500) && is_pct(a->guest.floor, 100), "floors 50%% and 10%%");
        ok(is_pct(c->guest.max_step, 100) && is_pct(a->guest.max_step, 500),
           "max_step 10%% and 50%%");
        ok(is_pct(c->reclaim_below, 50) && is_pct(a->reclaim_below, 150),
           "reclaim_below 5%% and 15%%");
        ok(rules(c, "db-main").floor.permille == 750 && rules(a, "db-main").shares == 400,
           "db-* domains keep more");
        ok(rules(c, "dns-critical").exclude == 1 && rules(a, "ci-pinned").exclude == 1,
           "an excluded glob in each");
    }
}

static void test_good_values(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *p = NULL;
    _cleanup_free_ char *e = NULL;

    ok(parse_fixture("good/percent-and-bytes.policy", &p, &e) == 0, "percent-and-bytes parses");
    if (p) {
        ok(p->interval_s == 120 && p->apply_timeout_s == 0, "interval 2m, apply_timeout 0");
        ok(p->verify_features == BM_VERIFY_NEVER, "verify_features never");
        ok(!bm_verify_features_asks(p->verify_features, true, true),
           "  never asks the monitor, not even about a domain with sg/ioeventfd set");
        ok(bm_verify_features_asks(BM_VERIFY_ALWAYS, false, false) &&
               bm_verify_features_asks(BM_VERIFY_AUTO, true, true) &&
               !bm_verify_features_asks(BM_VERIFY_AUTO, true, false) &&
               !bm_verify_features_asks(BM_VERIFY_AUTO, false, false),
           "  always asks; auto only where the XML sets sg/ioeventfd");
        ok(is_bytes(p->reclaim_below, 2 * GiB), "reclaim_below 2G: bytes");
        ok(is_bytes(p->target_available, 3000000000ull), "target_available 3000MB: 1000-based");
        ok(is_bytes(p->release_above, 4 * GiB), "release_above 4GiB");
        ok(p->psi_reclaim_above < 0, "psi_reclaim_above off");
        ok(p->psi_release_below == 0.25, "psi_release_below 0.25 (no %% sign)");
        ok(is_pct(p->guest.floor, 125), "floor 12.5%%: 125 permille");
        ok(is_bytes(p->guest.keep_free, 512 * MiB), "keep_free 512M");
        ok(is_bytes(p->guest.max_step, GiB + GiB / 2), "max_step 1.5G");
        ok(is_bytes(p->guest.deadband, GiB), "deadband 1048576: bare number is KiB");
        ok(p->guest.shares == 10000, "shares 10000");
        ok(p->guest.protect_major_faults == 0.5, "protect_major_faults 0.5");
        ok(p->guest.protect_swap_in == 2 * MiB, "protect_swap_in 2048/s: KiB per second");
        ok(p->guest.max_stats_age_s == 0, "max_stats_age 0: no limit");
        ok(p->n_domains == 1, "one [domain]");
        BmGuestRules r = rules(p, "mixed");
        ok(is_bytes(r.floor, 0) && is_pct(r.keep_free, 0) && is_pct(r.max_step, 1000) &&
               is_pct(r.deadband, 5),
           "floor 0, keep_free 0%%, max_step 100%%, deadband 0.5%%");
        ok(r.protect_swap_in == 0 && r.max_stats_age_s == 0, "0 and off turn checks off");
        is_u64(bm_amount_bytes(r.deadband, 8 * GiB), 8 * GiB / 200, "0.5%% of 8 GiB");
    }
    bm_policy_free(TAKE_PTR(p));
    free(TAKE_PTR(e));

    ok(parse_fixture("good/override.policy", &p, &e) == 0, "override parses");
    if (p) {
        BmGuestRules r = rules(p, "db1");
        ok(is_pct(r.floor, 200) && r.shares == 150 && is_pct(r.keep_free, 150) && r.exclude == 0,
           "no glob matches: [guest] over the defaults");
        is_u64(r.line, p->guest.line, "  rules come from [guest]");
        r = rules(p, "web-a");
        ok(is_pct(r.floor, 300) && r.shares == 200 && is_pct(r.keep_free, 150),
           "one glob matches: web-* over [guest]");
        r = rules(p, "db-prod");
        ok(is_pct(r.floor, 200) && r.shares == 300 && r.exclude == 1,
           "one other glob: *-prod sets shares and exclude only");
        r = rules(p, "web-a-prod");
        ok(is_pct(r.floor, 300) && r.shares == 300 && r.exclude == 1,
           "two globs match: the later one wins where both set a field");
        r = rules(p, "web-1-prod");
        ok(is_pct(r.floor, 300) && r.shares == 300 && r.exclude == 1 && is_pct(r.keep_free, 50),
           "three globs match, each adds its fields");
        is_u64(r.line, p->domains[2].line, "  rules name the last matching section");
        r = rules(p, "web-9-prod");
        ok(r.exclude == 0 && r.shares == 300, "a later section can set exclude back to no");
        ok(!r.glob, "rules_for leaves glob NULL");
        r = rules(p, NULL);
        ok(is_pct(r.floor, 200), "no name: [guest] only");
        ok(!(p->domains[0].set & (BM_RULE_BIT(exclude) | BM_RULE_BIT(protect_swap_in) |
                                  BM_RULE_BIT(keep_free))),
           "a [domain] section leaves what it does not name unset");
    }
    bm_policy_free(TAKE_PTR(p));
    free(TAKE_PTR(e));

    ok(parse_fixture("good/syntax.policy", &p, &e) == 0, "syntax parses");
    if (p) {
        ok(p->interval_s == 3600 && is_pct(p->reclaim_below, 50) && is_pct(p->target_available, 60),
           "[host] may appear twice");
        ok(is_pct(p->guest.floor, 250) && is_pct(p->guest.keep_free, 105) &&
               is_bytes(p->guest.max_step, GiB) && is_bytes(p->guest.deadband, 64 * MiB),
           "values without spaces, with tabs, units in any case");
        ok(p->guest.exclude == 1 && p->guest.max_stats_age_s == 0, "TRUE, OFF");
        ok(p->n_domains == 1 && strcmp(p->domains[0].glob, "spaced") == 0 &&
               p->domains[0].exclude == 1,
           "blanks around the glob of a header");
    }
    bm_policy_free(TAKE_PTR(p));
    free(TAKE_PTR(e));

    ok(parse_fixture("good/bom-crlf.policy", &p, &e) == 0, "byte order mark and CRLF");
    if (p)
        ok(is_pct(p->guest.floor, 400) && p->guest.exclude == 1 && p->guest.line == 2,
           "  values read without the CR; lines counted as usual");
    bm_policy_free(TAKE_PTR(p));
    free(TAKE_PTR(e));

    ok(parse_fixture("good/globs.policy", &p, &e) == 0, "globs parses");
    if (p) {
        is_u64(rules(p, "zz").shares, 101, "'*' matches all");
        is_u64(rules(p, "web1").shares, 102, "character classes");
        is_u64(rules(p, "lit*").shares, 103, "an escaped '*' is literal");
        is_u64(rules(p, "litx").shares, 101, "  and matches only itself");
        is_u64(rules(p, "ay!").shares, 104, "[!x]y?");
        is_u64(rules(p, "]").shares, 105, "[]] matches ']'");
        is_u64(rules(p, "#hash").shares, 106, "'#' inside quotes is part of the glob");
        is_u64(rules(p, "a]b").shares, 107, "escaped ']' in brackets");
        is_u64(rules(p, "ümlaut-1").shares, 108, "UTF-8 in globs");
        is_u64(rules(p, "q").shares, 109, "a quote in the comment after a header");
    }
    bm_policy_free(TAKE_PTR(p));
    free(TAKE_PTR(e));

    ok(parse_fixture("good/no-final-newline.policy", &p, &e) == 0, "no final newline");
    if (p)
        ok(is_pct(p->guest.floor, 350) && p->interval_s == 20, "  the last line counts");
}

static void check_bad(const char *rel, const char *err_rel, const char *want)
{
    _cleanup_(bm_policy_freep) BmPolicy *p = (BmPolicy *)1;
    _cleanup_free_ char *errors = NULL;
    int r = parse_fixture(rel, &p, &errors);
    ok(r == -EINVAL && p == NULL, "%s is refused", rel);
    ok(want != NULL, "  %s exists", err_rel);
    is_str(errors, want ? want : "", "  %s: the expected messages", rel);
}

/* Every bad/NAME.policy fails with exactly bad/NAME.err. */
static void test_bad(void)
{
    int n = fixture_each_bad("policy", ".policy", check_bad);
    ok(n >= 20, "at least 20 bad fixtures (found %d)", n);
}

static void test_messages(void)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        /* columns count bytes from the start of the line, after a byte order mark */
        {"\xef\xbb\xbf[guest]\r\n\tfloor\t=\t12X\r\n", "t:2:10: floor: '12X': unknown unit 'X'\n"},
        {"\xef\xbb\xbf"
         "floor = 1\n",
         "t:1:1: key 'floor' before any section header (it belongs in [guest] or [domain "
         "\"GLOB\"])\n"},
        /* a NUL ends the text */
        {"[guest]\nfloor = 12X\n\0shares = 0\n", "t:2:9: floor: '12X': unknown unit 'X'\n"},
        /* control characters and long values are quoted safely */
        {"[domain \"a\x1b[31m\"]\n",
         "t:1:10: bad glob 'a\\x1b[31m': contains a control character\n"},
        {"[guest]\nfloor = \x7f\n", "t:2:9: floor: '\\x7f': contains a control character\n"},
        {"[guest]\nFloor = 1\n", "t:2:1: unknown key 'Floor' in [guest] (did you mean 'floor'?)\n"},
        {"[guest]\nfloro = 1\n", "t:2:1: unknown key 'floro' in [guest] (did you mean 'floor'?)\n"},
        {"[guest]\nfl = 1\n", "t:2:1: unknown key 'fl' in [guest]\n"},
        {"[host]\nfloor_ = 1\n",
         "t:2:1: unknown key 'floor_' in [host] (did you mean 'floor' in [guest]?)\n"},
        {"[domain \"x\"]\nexclude = no\nexclude = yes\n",
         "t:3:1: duplicate key 'exclude' in [domain \"x\"] (first set at line 2)\n"},
        {"[domain \"[\"]\nflor = 1\n",
         "t:1:10: bad glob '[': unterminated '['\n"
         "t:2:1: unknown key 'flor' in [domain \"[\"] (did you mean 'floor'?)\n"},
        {"[nope]\nflor = 1\n", "t:1:2: unknown section '[nope]'\n"},
        {"[guest é]\n", "t:1:8: unexpected 'é' in section header\n"},
        {"[host]\nrelease_above = 5%\n[guest]\nfloor = 1\n[host]\ntarget_available = 2%\n",
         "t:6:20: thresholds out of order: need reclaim_below < target_available < "
         "release_above, got 10% (default), 2%, 5%\n"},
        /* sizes and % mixed: they cross at some MemTotal, so refused */
        {"[host]\nreclaim_below = 1G\n",
         "t:2:17: thresholds mix sizes and percentages of MemTotal: reclaim_below 1 GiB, "
         "target_available 15% (default), release_above 25% (default): reclaim_below is not "
         "below target_available when MemTotal is at or below 6.7 GiB; write all three as sizes "
         "or all as percentages\n"},
        {"[host]\nreclaim_below = 1G\ntarget_available = 2G\nrelease_above = 3G\n", ""},
        {"[host]\npsi_reclaim_above = off\npsi_release_below = 50\n", ""},
        {"[host]\ninterval = 1h\napply_timeout = 0s\n[guest]\nmax_stats_age = 24h\n", ""},
    };
    for (size_t i = 0; i < BM_ARRAY_SIZE(cases); i++) {
        _cleanup_(bm_policy_freep) BmPolicy *p = NULL;
        _cleanup_free_ char *errors = NULL;
        int r = bm_policy_parse(cases[i].text, "t", &p, &errors);
        if (!cases[i].want[0]) {
            ok(r == 0 && p && !errors, "case %zu parses", i);
            if (errors)
                printf("# %s", errors);
        } else {
            ok(r == -EINVAL && !p, "case %zu is refused", i);
            is_str(errors, cases[i].want, "case %zu message", i);
        }
    }

    /* the output parameters are optional */
    ok(bm_policy_parse("[guest]\nfloor = x\n", "t", NULL, NULL) == -EINVAL, "check only: bad");
    ok(bm_policy_parse("[guest]\nfloor = 1\n", "t", NULL, NULL) == 0, "check only: good");
    ok(bm_policy_parse(NULL, NULL, NULL, NULL) == 0, "NULL text is an empty policy");
}

static void test_load(void)
{
    BmPolicy *p = (BmPolicy *)1;
    _cleanup_free_ char *errors = NULL;
    int r = bm_policy_load("/nonexistent/balloonmgr.policy", &p, &errors);
    ok(r == -ENOENT && p == NULL, "missing file: -ENOENT");
    is_str(errors, "/nonexistent/balloonmgr.policy: cannot read: No such file or directory\n",
           "  says so");
    free(TAKE_PTR(errors));
    r = bm_policy_load(SOURCE_ROOT "/tests/data/policy", &p, &errors);
    ok(r == -EISDIR && p == NULL && errors, "a directory: -EISDIR");
    free(TAKE_PTR(errors));

    r = bm_policy_load(SOURCE_ROOT "/tests/data/policy/bad/unknown-key.policy", &p, &errors);
    ok(r == -EINVAL && errors &&
           strstr(errors, SOURCE_ROOT "/tests/data/policy/bad/unknown-key.policy:2:1: "),
       "load names the path it was given");
    free(TAKE_PTR(errors));

    /* a NUL byte in a file refuses it: never read up to the NUL */
    char tmp[] = "/tmp/test-policy-XXXXXX";
    int fd = mkstemp(tmp);
    static const char nul[] = "[guest]\nfloor = 40%\n\0[guest]\nshares = 0\n";
    ok(fd >= 0 && write(fd, nul, sizeof(nul)) == (ssize_t)sizeof(nul), "file with a NUL");
    if (fd >= 0)
        close(fd);
    r = bm_policy_load(tmp, &p, &errors);
    ok(r == -EINVAL && !p && errors && strstr(errors, ":3:1: contains a NUL byte\n") &&
           strstr(errors, ":5:"),
       "  refused, naming the line of the NUL, and the rest read too");
    free(TAKE_PTR(errors));
    static const char utf[] = "[guest]\n# caf\xc3\xa9 ok\nfloor = 40%\n# \xff\xfe\n";
    r = bm_policy_parse_n(utf, sizeof(utf) - 1, "u", &p, &errors);
    ok(r == -EINVAL && errors && !strcmp(errors, "u:4:3: invalid UTF-8 (byte \\xff)\n"),
       "invalid UTF-8 refused, naming line and column (valid UTF-8 in a comment is fine)");
    free(TAKE_PTR(errors));
    bm_policy_free(p);
    unlink(tmp);
}

static void test_amounts(void)
{
    BmAmount b = {.bytes = 5 * GiB};
    BmAmount q = {.is_percent = true, .permille = 250};
    BmAmount h = {.is_percent = true, .permille = 1000};
    BmAmount t = {.is_percent = true, .permille = 125};
    is_u64(bm_amount_bytes(b, 8 * GiB), 5 * GiB, "bytes ignore the reference");
    is_u64(bm_amount_bytes(q, 8 * GiB), 2 * GiB, "25%% of 8 GiB");
    is_u64(bm_amount_bytes(t, 8 * GiB), GiB, "12.5%% of 8 GiB");
    is_u64(bm_amount_bytes(h, UINT64_MAX), UINT64_MAX, "100%% of the largest: no overflow");
    is_u64(bm_amount_bytes(q, UINT64_MAX), UINT64_MAX / 4, "25%% of the largest");
    is_u64(bm_amount_bytes(q, 0), 0, "of nothing");
}

/* A tiny deterministic generator for the fuzz loop. */
static uint32_t rnd(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*state >> 33);
}

/* Errors, when there are any, are whole lines that start with the path. */
static bool well_formed(int r, const BmPolicy *p, const char *errors)
{
    if (r == 0)
        return p && !errors;
    if (r != -EINVAL || p || !errors || !*errors)
        return false;
    for (const char *l = errors; *l;) {
        if (strncmp(l, "f:", 2) != 0)
            return false;
        const char *nl = strchr(l, '\n');
        if (!nl)
            return false;
        l = nl + 1;
    }
    return true;
}

static void test_robust(void)
{
    /* lines of any length: a 4 MiB key, value, glob, comment */
    size_t big = 4u << 20;
    char *text = malloc(big + 64);
    const char *prefixes[] = {"[guest]\n", "[guest]\nfloor = ", "[domain \"", "# "};
    const char *what[] = {"key", "value", "glob", "comment"};
    for (size_t i = 0; i < BM_ARRAY_SIZE(prefixes); i++) {
        size_t n = strlen(prefixes[i]);
        memcpy(text, prefixes[i], n);
        memset(text + n, i == 1 ? '9' : 'a', big);
        strcpy(text + n + big, i == 2 ? "\"]\n" : "\n");
        BmPolicy *p = NULL;
        char *errors = NULL;
        int r = bm_policy_parse(text, "f", &p, &errors);
        ok(well_formed(r, p, errors) && (i == 2 || i == 3 ? r == 0 : r == -EINVAL), "a 4 MiB %s",
           what[i]);
        ok(!errors || strlen(errors) < 512, "  the message stays short");
        bm_policy_free(p);
        free(errors);
    }

    /* many lines, many sections, many errors: linear */
    size_t lines = 200000, o = 0;
    text = realloc(text, lines * 24);
    for (size_t i = 0; i < lines; i++)
        o += (size_t)sprintf(text + o,
                             i % 3 == 0   ? "[domain \"d%zu-*\"]\n"
                             : i % 3 == 1 ? "shares = %zu\n"
                                          : "bogus%zu = 1\n",
                             i % 9999 + 1);
    BmPolicy *p = NULL;
    char *errors = NULL;
    int r = bm_policy_parse(text, "f", &p, &errors);
    ok(well_formed(r, p, errors), "200000 lines, 66666 errors");
    size_t n_err = 0;
    for (const char *c = errors; c && *c; c++)
        n_err += *c == '\n';
    is_u64(n_err, BM_DIAGS_MAX + 1, "  the first 20 errors reported, then a count");
    char more[64];
    snprintf(more, sizeof(more), "\nf: %zu more errors not shown\n", lines / 3 - BM_DIAGS_MAX);
    ok(errors && strstr(errors, more) && strstr(errors, "f:3:1: unknown key 'bogus3'"),
       "  the count of the others, the first error first");
    bm_policy_free(p);
    free(errors);
    free(text);

    /* random text built from the format's own pieces, and random bytes */
    static const char *pieces[] = {"[host]",
                                   "[guest]",
                                   "[domain \"",
                                   "\"]",
                                   "[",
                                   "]",
                                   "\"",
                                   "\\",
                                   " ",
                                   "\t",
                                   "=",
                                   "#",
                                   "\n",
                                   "\r\n",
                                   "\r",
                                   "floor",
                                   "interval",
                                   "reclaim_below",
                                   "release_above",
                                   "shares",
                                   "exclude",
                                   "max_stats_age",
                                   "psi_reclaim_above",
                                   "protect_swap_in",
                                   "12",
                                   "9999999999",
                                   "99999999999999999999",
                                   ".",
                                   "%",
                                   "G",
                                   "KiB",
                                   "s",
                                   "m",
                                   "h",
                                   "off",
                                   "yes",
                                   "-",
                                   "+",
                                   "*",
                                   "?",
                                   "[:alpha:]",
                                   "[!",
                                   "\x01",
                                   "\xff",
                                   "\xef\xbb\xbf",
                                   "/s",
                                   "0",
                                   "100"};
    uint64_t seed = 42;
    bool all_ok = true;
    for (int iter = 0; iter < 3000; iter++) {
        char buf[512];
        size_t len = 0;
        if (iter % 3 == 0) {
            len = rnd(&seed) % (sizeof(buf) - 1);
            for (size_t i = 0; i < len; i++)
                buf[i] = (char)(rnd(&seed) % 255 + 1);
        } else {
            while (len < sizeof(buf) - 32) {
                const char *s = pieces[rnd(&seed) % BM_ARRAY_SIZE(pieces)];
                memcpy(buf + len, s, strlen(s));
                len += strlen(s);
                if (rnd(&seed) % 40 == 0)
                    break;
            }
        }
        buf[len] = '\0';
        p = NULL;
        errors = NULL;
        r = bm_policy_parse(buf, "f", &p, &errors);
        if (!well_formed(r, p, errors)) {
            all_ok = false;
            printf("# iteration %d: r=%d errors=%s\n", iter, r, errors ? errors : "(null)");
        }
        if (p) {
            BmGuestRules g;
            bm_policy_rules_for(p, "web-1", &g);
        }
        bm_policy_free(p);
        free(errors);
    }
    ok(all_ok, "3000 random policies: parsed or refused with well-formed messages");
}

int main(void)
{
    test_defaults();
    test_default_file_matches();
    test_every_key_documented();
    test_shipped_and_good();
    test_good_values();
    test_bad();
    test_messages();
    test_load();
    test_amounts();
    test_robust();
    return tap_done();
}
