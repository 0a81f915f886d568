/* Basic auth against bcrypt hashes: the right password passes ($2y$, $2b$, $2a$), a wrong one,
 * an unknown user and missing parts do not; a success is cached (no second bcrypt), failures
 * are not; an unknown user costs a bcrypt too, about as long as a wrong password; a new
 * checker (a reload) starts with an empty cache; checks run in parallel. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "basic-auth.h"
#include "tap.h"
#include "webconfig.h"

#define H1 "$2y$06$qvgJh/M1aEa1hNWRpZ.UtutuUBDvwg92FKESHEBH4JZGwSdMsUHpK" /* secret */
#define H2 "$2b$06$6QYQ16Hr1Wjkksw9i1HKU.N2pbhMEGJyL23ZpCZcXIC6GaJyJxebK" /* hunter2 */
#define H3 "$2a$06$1EgbiX4prZaOtMINIqS/SOQxvjH9K8NcUMzEQY1k24vvMbkteb.F." /* pa:ss word */

static BmBasicAuth *checker(void)
{
    static const char text[] = "basic_auth_users:\n"
                               "  alice: " H1 "\n"
                               "  bob: " H2 "\n"
                               "  carol: " H3 "\n";
    _cleanup_(bm_webconfig_freep) BmWebConfig *c = NULL;
    _cleanup_free_ char *e = NULL;
    if (bm_webconfig_parse(text, "t", &c, &e) < 0) {
        diag("%s", e);
        return NULL;
    }
    BmBasicAuth *a = NULL;
    return bm_basic_auth_new(c, &a) == 0 ? a : NULL;
}

static void test_checks(void)
{
    _cleanup_(bm_basic_auth_unrefp) BmBasicAuth *a = checker();
    ok(a != NULL, "a checker for three users");
    if (!a)
        return;
    ok(bm_basic_auth_check(a, "alice", "secret"), "alice/secret ($2y$)");
    ok(bm_basic_auth_check(a, "bob", "hunter2"), "bob/hunter2 ($2b$)");
    ok(bm_basic_auth_check(a, "carol", "pa:ss word"), "carol/'pa:ss word' ($2a$, ':' in it)");
    ok(!bm_basic_auth_check(a, "alice", "Secret"), "alice/Secret: no");
    ok(!bm_basic_auth_check(a, "alice", "hunter2"), "alice with bob's password: no");
    ok(!bm_basic_auth_check(a, "alice", ""), "alice, empty password: no");
    ok(!bm_basic_auth_check(a, "mallory", "secret"), "unknown user: no");
    ok(!bm_basic_auth_check(a, "", ""), "empty user: no");
    ok(!bm_basic_auth_check(a, "alice", NULL) && !bm_basic_auth_check(a, NULL, "secret"),
       "missing parts: no");
    ok(!bm_basic_auth_check(NULL, "alice", "secret"), "no checker: no");
    ok(!bm_basic_auth_check(a, "alic", "secret") && !bm_basic_auth_check(a, "alice2", "secret"),
       "a prefix or extension of a name: no");
}

static void test_cache(void)
{
    _cleanup_(bm_basic_auth_unrefp) BmBasicAuth *a = checker();
    if (!a)
        return;
    ok(bm_basic_auth_crypt_calls(a) == 0, "no bcrypt yet");
    ok(bm_basic_auth_check(a, "alice", "secret"), "alice/secret");
    ok(bm_basic_auth_crypt_calls(a) == 1, "  one bcrypt");
    for (int i = 0; i < 100; i++)
        bm_basic_auth_check(a, "alice", "secret");
    ok(bm_basic_auth_crypt_calls(a) == 1, "  100 more scrapes: no more bcrypt (cached)");
    ok(!bm_basic_auth_check(a, "alice", "wrong") && !bm_basic_auth_check(a, "alice", "wrong"),
       "a wrong password twice");
    ok(bm_basic_auth_crypt_calls(a) == 3, "  two bcrypts: failures are not cached");
    ok(!bm_basic_auth_check(a, "mallory", "x"), "an unknown user");
    ok(bm_basic_auth_crypt_calls(a) == 4, "  costs a bcrypt too (the dummy hash)");
    ok(!bm_basic_auth_check(a, "bob", "secret"), "bob with alice's cached password: no");
    /* the cache key is user and password: "alice\0secret" is not "alic\0esecret" */
    ok(!bm_basic_auth_check(a, "alic", "esecret"), "user/password boundary is in the key");

    _cleanup_(bm_basic_auth_unrefp) BmBasicAuth *b = checker();
    ok(bm_basic_auth_check(b, "alice", "secret") && bm_basic_auth_crypt_calls(b) == 1,
       "a new checker (reload) does its own bcrypt");
}

/* The process's CPU time (the bcrypt may run on another thread) of n checks, in seconds. */
static double cpu_seconds_of(BmBasicAuth *a, const char *user, const char *password, int n)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    for (int i = 0; i < n; i++)
        bm_basic_auth_check(a, user, password);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
}

/* An unknown user costs one bcrypt (counted above) of the users' cost: here its CPU time
 * against a wrong password's. A dummy hash d apart in cost takes 2^d times as long; the
 * bound, 8 times either way (the least of 3 rounds each), holds with the measure 4 times off
 * on a busy machine and fails a dummy hash 4 or more apart (16 times; Debian's default cost
 * against 12: 128 times). */
static void test_timing(void)
{
    _cleanup_(bm_basic_auth_unrefp) BmBasicAuth *a = checker();
    if (!a)
        return;
    double known = 1e9, unknown = 1e9;
    for (int i = 0; i < 3; i++) {
        double k = cpu_seconds_of(a, "alice", "wrong", 8), u = cpu_seconds_of(a, "mallory", "wrong", 8);
        known = k < known ? k : known;
        unknown = u < unknown ? u : unknown;
    }
    diag("timing: 8 wrong passwords: %.1f ms CPU; 8 unknown users: %.1f ms CPU", known * 1e3,
         unknown * 1e3);
    timed_ok(unknown > known / 8 && unknown < known * 8,
             "an unknown user costs about the CPU time of a wrong password (one bcrypt of the same "
             "cost): %.1f against %.1f ms", unknown * 1e3, known * 1e3);
}

static void *parallel(void *arg)
{
    BmBasicAuth *a = arg;
    int good = 0;
    for (int i = 0; i < 20; i++)
        good += bm_basic_auth_check(a, "alice", "secret") + !bm_basic_auth_check(a, "bob", "x");
    return (void *)(intptr_t)good;
}

static void test_threads(void)
{
    _cleanup_(bm_basic_auth_unrefp) BmBasicAuth *a = checker();
    if (!a)
        return;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, parallel, bm_basic_auth_ref(a));
    int good = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        good += (int)(intptr_t)r;
        bm_basic_auth_unref(a);
    }
    ok(good == 4 * 40, "4 threads, 160 checks: all right (%d)", good);
}

static void test_no_users(void)
{
    _cleanup_(bm_webconfig_freep) BmWebConfig *c = NULL;
    ok(bm_webconfig_parse("tls_server_config: {cert_file: c, key_file: k}\n", "t", &c, NULL) == 0,
       "a config without users");
    BmBasicAuth *a = (BmBasicAuth *)1;
    ok(bm_basic_auth_new(c, &a) == 0 && a == NULL, "  no checker: no auth");
    a = (BmBasicAuth *)1;
    ok(bm_basic_auth_new(NULL, &a) == 0 && a == NULL, "  nor without a config");
    bm_basic_auth_unref(NULL);
}

static void test_header(void)
{
    static const struct {
        const char *value, *user, *password;
    } cases[] = {
        {"Basic YWxpY2U6c2VjcmV0", "alice", "secret"},
        {"basic YWxpY2U6c2VjcmV0", "alice", "secret"},        /* RFC 7617: any case */
        {"BASIC YWxpY2U6c2VjcmV0", "alice", "secret"},
        {"bAsIc   YWxpY2U6c2VjcmV0  ", "alice", "secret"},
        {"Basic Y2Fyb2w6cGE6c3Mgd29yZA==", "carol", "pa:ss word"}, /* first ':' splits */
        {"Basic OnNlY3JldA==", "", "secret"},
        {"Basic YWxpY2U6", "alice", ""},
        {"Basic YWxpY2U6c2VjcmV0AGp1bms=", NULL, NULL}, /* alice:secret\0junk */
        {"Basic AGFsaWNlOnNlY3JldA==", NULL, NULL},     /* \0alice:secret */
        {"Basic YWxpY2VzZWNyZXQ=", NULL, NULL},         /* no ':' */
        {"Basic YWxpY2U6c2VjcmV0=", NULL, NULL},        /* bad padding */
        {"Basic YWxpY2U6c2VjcmV!", NULL, NULL},         /* not base64 */
        {"Basic YWxpY2U6c2VjcmV0 x", NULL, NULL},       /* two tokens */
        {"Basic", NULL, NULL},
        {"Basic ", NULL, NULL},
        {"Basicx YWxpY2U6c2VjcmV0", NULL, NULL},
        {"Bearer YWxpY2U6c2VjcmV0", NULL, NULL},
        {"", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *u = NULL, *p = NULL;
        int r = bm_basic_auth_parse_header(cases[i].value, &u, &p);
        if (cases[i].user)
            ok(r == 0 && u && p && !strcmp(u, cases[i].user) && !strcmp(p, cases[i].password),
               "'%s': '%s' / '%s'", cases[i].value, cases[i].user, cases[i].password);
        else
            ok(r == -EINVAL && !u && !p, "'%s': refused", cases[i].value);
        free(u);
        free(p);
    }
    char *u = NULL, *p = NULL;
    ok(bm_basic_auth_parse_header(NULL, &u, &p) == -ENOENT && !u && !p, "no header: -ENOENT");

    /* "secret\0junk" never authenticates as "secret" */
    _cleanup_(bm_basic_auth_unrefp) BmBasicAuth *a = checker();
    bool pass = bm_basic_auth_parse_header("Basic YWxpY2U6c2VjcmV0AGp1bms=", &u, &p) == 0 &&
                bm_basic_auth_check(a, u, p);
    ok(!pass, "alice:secret\\0junk does not pass as alice:secret");
    free(u);
    free(p);
}

int main(void)
{
    test_header();
    test_checks();
    test_cache();
    test_timing();
    test_threads();
    test_no_users();
    return tap_done();
}
