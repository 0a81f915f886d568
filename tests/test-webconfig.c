/* Web config files (exporter-toolkit format): every good fixture parses to what it says, every
 * bad fixture fails with exactly the messages of its .err file, relative cert/key paths resolve
 * against the file's directory, the loader reads and checks the TLS files (and names them when
 * it cannot), and the gnutls priorities follow min_version / max_version. Every key given every
 * YAML type and tag never fails open: a well-formed value is accepted as it says, any other is
 * refused with file:line:col. */
#include <errno.h>
#include <glob.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "tap.h"
#include "webconfig.h"

#define H1 "$2y$06$qvgJh/M1aEa1hNWRpZ.UtutuUBDvwg92FKESHEBH4JZGwSdMsUHpK"
#define H2 "$2b$06$6QYQ16Hr1Wjkksw9i1HKU.N2pbhMEGJyL23ZpCZcXIC6GaJyJxebK"
#define H3 "$2a$06$1EgbiX4prZaOtMINIqS/SOQxvjH9K8NcUMzEQY1k24vvMbkteb.F."

/* Parses fixture tests/data/webconfig/REL, named REL in messages. */
DEFINE_PARSE_FIXTURE("webconfig", BmWebConfig, bm_webconfig_parse)

static void test_good(void)
{
    BmWebConfig *c = NULL;
    _cleanup_free_ char *e = NULL;
    ok(parse_fixture("good/full.yml", &c, &e) == 0 && c, "good/full.yml parses");
    if (!c) {
        diag("%s", e ? e : "");
        return;
    }
    ok(c->tls, "  TLS on");
    is_str(c->cert_file, "../load/cert.pem", "  cert_file as written");
    is_str(c->cert_path, "good/../load/cert.pem", "  cert_file relative to the file's directory");
    is_str(c->key_path, "/etc/balloonmgr/key.pem", "  an absolute key_file stays");
    ok(c->cert_line == 3 && c->cert_col == 14 && c->key_line == 4 && c->key_col == 13,
       "  where they are (%u:%u, %u:%u)", c->cert_line, c->cert_col, c->key_line, c->key_col);
    ok(c->min_version == BM_TLS_12 && c->max_version == BM_TLS_13, "  TLS12..TLS13");
    ok(!c->prefer_server_cipher_suites, "  prefer_server_cipher_suites false");
    ok(!c->http2, "  http2 false (accepted, ignored)");
    ok(c->n_users == 3, "  three users");
    if (c->n_users == 3) {
        ok(!strcmp(c->users[0].name, "alice") && !strcmp(c->users[0].hash, H1) &&
               c->users[0].line == 12,
           "  alice: plain scalar, line 12");
        ok(!strcmp(c->users[1].name, "bob") && !strcmp(c->users[1].hash, H2), "  bob: quoted");
        ok(!strcmp(c->users[2].name, "carol smith") && !strcmp(c->users[2].hash, H3),
           "  \"carol smith\": a name with a space");
    }
    ok(c->cert_pem == NULL && c->key_pem == NULL, "  parse reads no file");
    _cleanup_free_ char *prio = bm_webconfig_tls_priorities(c);
    is_str(prio, "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2", "  gnutls priorities");
    bm_webconfig_free(c);

    static const struct {
        const char *rel;
        bool tls;
        size_t users;
        const char *prio;
    } cases[] = {
        {"good/empty.yml", false, 0, NULL},
        {"good/comments.yml", false, 0, NULL},
        {"good/auth-only.yml", false, 1, NULL},
        {"good/null-sections.yml", false, 0, NULL},
        {"good/flow.yml", true, 1, "NORMAL:-VERS-ALL:+VERS-TLS1.3:%SERVER_PRECEDENCE"},
        {"good/tls12-only.yml", true, 0, "NORMAL:-VERS-ALL:+VERS-TLS1.2:%SERVER_PRECEDENCE"},
    };
    for (size_t i = 0; i < BM_ARRAY_SIZE(cases); i++) {
        _cleanup_(bm_webconfig_freep) BmWebConfig *g = NULL;
        _cleanup_free_ char *errors = NULL;
        int r = parse_fixture(cases[i].rel, &g, &errors);
        ok(r == 0 && g && g->tls == cases[i].tls && g->n_users == cases[i].users,
           "%s parses: tls %d, %zu users", cases[i].rel, cases[i].tls, cases[i].users);
        if (r < 0)
            diag("%s", errors ? errors : "");
        if (g && cases[i].prio) {
            _cleanup_free_ char *p = bm_webconfig_tls_priorities(g);
            is_str(p, cases[i].prio, "  priorities");
        }
        if (g && g->tls)
            is_str(g->cert_path, "good/c.pem", "  cert_file relative to good/");
    }
}

static void check_bad(const char *rel, const char *err_rel, const char *want)
{
    BmWebConfig *c = (BmWebConfig *)1;
    _cleanup_free_ char *errors = NULL;
    int r = parse_fixture(rel, &c, &errors);
    ok(r == -EINVAL && c == NULL, "%s is refused", rel);
    ok(want != NULL, "  %s exists", err_rel);
    is_str(errors, want ? want : "", "  %s: the expected messages", rel);
    if (c != (BmWebConfig *)1)
        bm_webconfig_free(c);
    char text_rel[600];
    snprintf(text_rel, sizeof(text_rel), "webconfig/%s", rel);
    _cleanup_free_ char *text = fixture_read(text_rel);
    ok(text && bm_webconfig_parse(text, rel, NULL, NULL) == -EINVAL, "  check only: refused");
}

/* Every bad/NAME.yml fails with exactly bad/NAME.err. */
static void test_bad(void)
{
    int n = fixture_each_bad("webconfig", ".yml", check_bad);
    ok(n >= 20, "at least 20 bad fixtures (found %d)", n);
}

/* bm_webconfig_load() from tests/data/webconfig, so that messages have relative paths. */
static void test_load(void)
{
    _cleanup_free_ char *cwd = getcwd(NULL, 0);
    if (chdir(SOURCE_ROOT "/tests/data/webconfig") < 0) {
        ok(0, "chdir to the fixtures");
        return;
    }
    BmWebConfig *c = NULL;
    _cleanup_free_ char *e = NULL;
    int r = bm_webconfig_load("load/good.yml", &c, &e);
    ok(r == 0 && c, "load/good.yml loads");
    if (r < 0)
        diag("%s", e ? e : "");
    if (c) {
        is_str(c->cert_path, "load/cert.pem", "  cert.pem beside it");
        ok(c->cert_pem && strstr(c->cert_pem, "-----BEGIN CERTIFICATE-----"), "  cert read");
        ok(c->key_pem && strstr(c->key_pem, "-----BEGIN PRIVATE KEY-----"), "  key read");
        ok(c->n_users == 1, "  one user");
    }
    bm_webconfig_free(c);

    glob_t g;
    size_t n = 0;
    if (glob("load/bad-*.yml", 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            char err_rel[512];
            snprintf(err_rel, sizeof(err_rel), "webconfig/%.*s.err",
                     (int)(strlen(g.gl_pathv[i]) - 4), g.gl_pathv[i]);
            _cleanup_free_ char *want = fixture_read(err_rel);
            _cleanup_free_ char *errors = NULL;
            c = (BmWebConfig *)1;
            r = bm_webconfig_load(g.gl_pathv[i], &c, &errors);
            ok(r == -EINVAL && c == NULL, "%s is refused", g.gl_pathv[i]);
            is_str(errors, want ? want : "(no .err)", "  the expected messages");
            n++;
        }
        globfree(&g);
    }
    ok(n >= 4, "at least 4 load/bad-*.yml (found %zu)", n);

    _cleanup_free_ char *errors = NULL;
    c = (BmWebConfig *)1;
    r = bm_webconfig_load("load/missing.yml", &c, &errors);
    ok(r == -ENOENT && c == NULL, "a missing file: -ENOENT");
    is_str(errors, "load/missing.yml: cannot read: No such file or directory\n", "  named");
    ok(chdir(cwd) == 0, "back to %s", cwd);
}

static void test_bcrypt(void)
{
    ok(bm_webconfig_is_bcrypt(H1) && bm_webconfig_is_bcrypt(H2) && bm_webconfig_is_bcrypt(H3),
       "$2y$, $2b$, $2a$");
    ok(!bm_webconfig_is_bcrypt("$2x$06$qvgJh/M1aEa1hNWRpZ.UtutuUBDvwg92FKESHEBH4JZGwSdMsUHpK"),
       "not $2x$");
    ok(!bm_webconfig_is_bcrypt("$2y$32$qvgJh/M1aEa1hNWRpZ.UtutuUBDvwg92FKESHEBH4JZGwSdMsUHpK"),
       "not cost 32");
    ok(!bm_webconfig_is_bcrypt("$2y$06$qvgJh/M1aEa1hNWRpZ.UtutuUBDvwg92FKESHEBH4JZGwSdMsUHp+"),
       "not a '+'");
    ok(!bm_webconfig_is_bcrypt(""), "not empty");
}

static void test_robust(void)
{
    /* deep nesting, aliases of aliases, long keys: refused or parsed, never a crash */
    size_t depth = 100000;
    char *deep = malloc(depth * 2 + 64);
    strcpy(deep, "basic_auth_users: ");
    size_t o = strlen(deep);
    for (size_t i = 0; i < depth; i++)
        deep[o++] = '[';
    for (size_t i = 0; i < depth; i++)
        deep[o++] = ']';
    deep[o] = '\0';
    _cleanup_free_ char *e = NULL;
    uint64_t t0 = bm_now_mono_ns();
    ok(bm_webconfig_parse(deep, "deep", NULL, &e) == -EINVAL, "100000 nested lists: refused");
    is_str(e, "deep:1:50: nested more than 32 levels deep\n", "  named");
    ok(bm_now_mono_ns() - t0 < 1000000000ull, "  at once (libyaml's scanner is quadratic in it)");
    free(deep);

    _cleanup_free_ char *laughs = bm_strdup("a: &a [x, x, x, x, x, x, x, x]\n");
    for (int i = 0; i < 20; i++) {
        char *next = bm_asprintf("%s%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n", laughs,
                                 'b' + i, 'b' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i,
                                 'a' + i, 'a' + i, 'a' + i);
        free(laughs);
        laughs = next;
    }
    _cleanup_free_ char *e2 = NULL;
    ok(bm_webconfig_parse(laughs, "laughs", NULL, &e2) == -EINVAL && e2 &&
           strstr(e2, "laughs:1:1: unknown key 'a'"),
       "billion laughs: unknown keys, not expanded");
}

/* ---- every key given every YAML type and tag: the parser never fails open ----
 * (tests/test-webconfig-types.sh runs a few of these end to end: at start and on SIGHUP.) */

/* What is tried as each key's value; @S@ is a good value of the key's own type. */
static const char *const variants[] = {
    "", "~", "null", "!!null", "!!null ~",
    "!!str", "!!str null", "!!str ~", "!!str \"\"", "!!str @S@", "!<tag:yaml.org,2002:str> @S@",
    "!!binary", "!!binary aGk=", "!!int", "!!int 5", "!!float 1.5", "!!bool", "!!bool true",
    "!!timestamp 2001-12-14", "!!seq", "!!seq []", "[]", "[@S@]", "!!map", "!!map {}", "{}",
    "!!set {}", "!!omap []", "!local @S@", "! @S@", "\"\"", "''", "\"@S@\"", "@S@", "5",
};

/* KEY_FILE: a string naming a file; a scalar of another type may name one too ("5", "!!str
 * null"), which the loader then cannot read. */
typedef enum { KEY_MAP, KEY_TLSMAP, KEY_STR, KEY_BOOL, KEY_FILE } KeyType;

#define CERT "cert.pem"
#define KEY "key.pem"
#define AUTH "basic_auth_users:\n  alice: " H1 "\n"
#define TLS_HEAD "tls_server_config:\n  cert_file: " CERT "\n  key_file: " KEY "\n"

/* name, type, the good value (@S@), the config around the value tried (@V@) */
static const struct {
    const char *name;
    KeyType type;
    const char *good, *tmpl;
} keys[] = {
    {"basic_auth_users", KEY_MAP, "x", "basic_auth_users: @V@\n"},
    {"http_server_config", KEY_MAP, "x", AUTH "http_server_config: @V@\n"},
    {"tls_server_config", KEY_TLSMAP, "x", AUTH "tls_server_config: @V@\n"},
    {"http2", KEY_BOOL, "true", AUTH "http_server_config:\n  http2: @V@\n"},
    {"the password", KEY_STR, H1, "basic_auth_users:\n  alice: @V@\n"},
    {"cert_file", KEY_FILE, CERT,
     "tls_server_config:\n  cert_file: @V@\n  key_file: " KEY "\n" AUTH},
    {"key_file", KEY_FILE, KEY, "tls_server_config:\n  cert_file: " CERT "\n  key_file: @V@\n" AUTH},
    {"min_version", KEY_STR, "TLS12", TLS_HEAD "  min_version: @V@\n" AUTH},
    {"max_version", KEY_STR, "TLS13", TLS_HEAD "  max_version: @V@\n" AUTH},
    {"client_auth_type", KEY_STR, "NoClientCert", TLS_HEAD "  client_auth_type: @V@\n" AUTH},
    {"prefer_server_cipher_suites", KEY_BOOL, "true",
     TLS_HEAD "  prefer_server_cipher_suites: @V@\n" AUTH},
};

/* Whether variant v is a well-formed value for a key of type t. */
static bool valid_for(KeyType t, const char *v)
{
    static const char *const map[] = {"", "~", "null", "{}", "!!map {}", NULL};
    static const char *const str[] = {"!!str @S@", "!<tag:yaml.org,2002:str> @S@", "\"@S@\"", "@S@",
                                      NULL};
    static const char *const boolean[] = {"!!bool true", "@S@", NULL};
    const char *const *list = t == KEY_MAP                   ? map
                              : t == KEY_STR || t == KEY_FILE ? str
                              : t == KEY_BOOL                 ? boolean
                                                              : NULL;
    for (; list && *list; list++)
        if (strcmp(*list, v) == 0)
            return true;
    return false;
}

/* s with every "from" replaced by "to". Caller frees. */
static char *replace(const char *s, const char *from, const char *to)
{
    size_t n = 0, lf = strlen(from), lt = strlen(to);
    for (const char *p = strstr(s, from); p; p = strstr(p + lf, from))
        n++;
    char *out = malloc(strlen(s) + n * lt + 1), *o = out;
    for (const char *p; (p = strstr(s, from)); s = p + lf) {
        memcpy(o, s, (size_t)(p - s));
        o += p - s;
        memcpy(o, to, lt);
        o += lt;
    }
    strcpy(o, s);
    return out;
}

/* Each error line "path:LINE:COL: message". */
static bool errors_located(const char *errors)
{
    if (!errors || !*errors)
        return false;
    for (const char *l = errors; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        unsigned line, col;
        int n = 0;
        if (sscanf(l, "web.yml:%u:%u: %n", &line, &col, &n) != 2 || n == 0 || line == 0)
            return false;
    }
    return true;
}

/* bm_webconfig_load() of text as web.yml in an empty directory (its cert and key files absent):
 * refused with file:line:col? */
static bool load_refused(const char *text)
{
    char dir[] = "/tmp/test-webconfig-XXXXXX", cwd[4096];
    if (!mkdtemp(dir) || !getcwd(cwd, sizeof(cwd)) || chdir(dir) < 0)
        return false;
    FILE *f = fopen("web.yml", "w");
    bool refused = false;
    if (f) {
        fputs(text, f);
        fclose(f);
        _cleanup_(bm_webconfig_freep) BmWebConfig *c = NULL;
        _cleanup_free_ char *errors = NULL;
        refused = bm_webconfig_load("web.yml", &c, &errors) < 0 && !c && errors_located(errors);
        unlink("web.yml");
    }
    refused &= chdir(cwd) == 0;
    rmdir(dir);
    return refused;
}

static void test_types(void)
{
    size_t bad = 0, checked = 0;
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
            _cleanup_free_ char *v = replace(variants[i], "@S@", keys[k].good);
            _cleanup_free_ char *text = replace(keys[k].tmpl, "@V@", v);
            _cleanup_(bm_webconfig_freep) BmWebConfig *c = NULL;
            _cleanup_free_ char *errors = NULL;
            int r = bm_webconfig_parse(text, "web.yml", &c, &errors);
            int r_check = bm_webconfig_parse(text, "web.yml", NULL, NULL);
            bool good;
            if (valid_for(keys[k].type, variants[i])) {
                /* serves as it says: HTTPS with tls_server_config, 401 without credentials
                 * with users */
                bool tls = strstr(text, "tls_server_config:") != NULL;
                bool users = strstr(text, "\n  alice: ") != NULL;
                good = r == 0 && r_check == 0 && c && c->tls == tls && (c->n_users > 0) == users;
                if (!good)
                    printf("# %s: '%s' should be well-formed (%d, tls %d, users %zu)\n%s# %s\n",
                           keys[k].name, variants[i], r, c ? c->tls : -1, c ? c->n_users : 0,
                           text, errors ? errors : "");
            } else if (keys[k].type == KEY_FILE && r == 0) {
                /* another file's name, which the loader refuses */
                const char *name = strcmp(keys[k].name, "cert_file") == 0 ? c->cert_file : c->key_file;
                good = r_check == 0 && strcmp(name, keys[k].good) != 0 && load_refused(text);
                if (!good)
                    printf("# %s: '%s' should name another file, refused at load\n%s", keys[k].name,
                           variants[i], text);
            } else {
                good = r == -EINVAL && r_check == -EINVAL && !c && errors_located(errors);
                if (!good)
                    printf("# %s: '%s' should be refused with file:line:col (%d)\n%s# %s\n",
                           keys[k].name, variants[i], r, text, errors ? errors : "(no errors)");
            }
            checked++;
            bad += !good;
        }
    }
    ok(bad == 0, "types: %zu keys x %zu YAML types and tags: each well-formed one accepted as it "
                 "says, each other one refused with file:line:col (%zu of %zu wrong)",
       sizeof(keys) / sizeof(keys[0]), sizeof(variants) / sizeof(variants[0]), bad, checked);
}

int main(void)
{
    test_good();
    test_bad();
    test_load();
    test_bcrypt();
    test_robust();
    test_types();
    return tap_done();
}
