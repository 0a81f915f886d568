#include "webconfig.h"

#include "file.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "diag.h"
#include "error.h"

#define WEBCONFIG_MAX_BYTES (1024u * 1024)
#define PEM_MAX_BYTES (1024u * 1024)
/* deeper collections are refused before libyaml's document loader sees them: its scanner
 * takes time quadratic in the depth of flow collections ("[[[[...") */
#define MAX_DEPTH 32

/* A node written with an explicit tag ("!!str x"): libyaml's document API gives an untagged
 * node the default tag of its kind, so the tags written are taken from the events. */
typedef struct {
    size_t index;        /* the node's start, a byte offset: the events come in this order */
    yaml_node_type_t type; /* a mapping and its first key start at the same byte */
    char *tag;           /* as resolved: "tag:yaml.org,2002:str" */
} ExplicitTag;

typedef struct {
    const char *path;
    yaml_document_t *doc;
    BmDiags diags;
    BmWebConfig *c;
    ExplicitTag *tags; /* sorted by index */
    size_t n_tags;
} Parser;

#define add_error(ps, ...) bm_diags_add(&(ps)->diags, __VA_ARGS__)

static const char *quote(const char *s, size_t n, char *buf)
{
    return bm_quote(s, n, true, buf);
}

#define LINE(n) ((unsigned)(n)->start_mark.line + 1)
#define COL(n) ((unsigned)(n)->start_mark.column + 1)
#define SCALAR(n) ((const char *)(n)->data.scalar.value)
#define SCALAR_LEN(n) ((n)->data.scalar.length)

#define TAG_STR YAML_STR_TAG
#define TAG_BOOL YAML_BOOL_TAG
#define TAG_MAP YAML_MAP_TAG

/* The tag n was written with, or NULL (none: its kind's default). O(log tags). */
static const char *explicit_tag(const Parser *ps, const yaml_node_t *n)
{
    size_t lo = 0, hi = ps->n_tags, at = n->start_mark.index;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ps->tags[mid].index < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < ps->n_tags && ps->tags[lo].index == at; lo++)
        if (ps->tags[lo].type == n->type)
            return ps->tags[lo].tag;
    return NULL;
}

/* "!!str" for the YAML 1.1 tags, else the tag as written. */
static const char *tag_shown(const char *tag, char *buf, size_t n)
{
    const char *prefix = "tag:yaml.org,2002:";
    if (strncmp(tag, prefix, strlen(prefix)) == 0)
        snprintf(buf, n, "!!%s", tag + strlen(prefix));
    else
        bm_quote(tag, strlen(tag), true, buf);
    return buf;
}

/* Whether n is untagged or tagged as want (TAG_STR, TAG_BOOL, TAG_MAP); else an error naming
 * what and the tag: "!!str" where a mapping is expected is a string, never an empty section. */
static bool tag_is(Parser *ps, const yaml_node_t *n, const char *want, const char *what)
{
    const char *tag = explicit_tag(ps, n);
    if (!tag || strcmp(tag, want) == 0)
        return true;
    char shown[BM_QUOTE_SIZE];
    add_error(ps, LINE(n), COL(n), "%s: expected %s, not a value tagged %s", what,
              strcmp(want, TAG_MAP) == 0    ? "a mapping of keys to values"
              : strcmp(want, TAG_BOOL) == 0 ? "true or false"
                                            : "a string",
              tag_shown(tag, shown, sizeof(shown)));
    return false;
}

/* Null: an untagged plain "", "~" or "null" (an explicit tag makes it a value of that type). */
static bool is_null(const Parser *ps, const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
        explicit_tag(ps, n))
        return false;
    const char *s = SCALAR(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

/* A scalar's text; NULL (with an error naming what) when n is no string or holds a NUL. */
static const char *get_string(Parser *ps, const yaml_node_t *n, const char *what)
{
    if (!tag_is(ps, n, TAG_STR, what))
        return NULL;
    if (n->type != YAML_SCALAR_NODE || is_null(ps, n)) {
        add_error(ps, LINE(n), COL(n), "%s: expected a string", what);
        return NULL;
    }
    if (strlen(SCALAR(n)) != SCALAR_LEN(n)) {
        add_error(ps, LINE(n), COL(n), "%s: contains a NUL byte", what);
        return NULL;
    }
    return SCALAR(n);
}

/* 1 true, 0 false, -1 not a boolean (error added). */
static int get_bool(Parser *ps, const yaml_node_t *n, const char *what)
{
    char q[BM_QUOTE_SIZE];
    if (!tag_is(ps, n, TAG_BOOL, what))
        return -1;
    if (n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        const char *s = SCALAR(n);
        if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
            return 1;
        if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
            return 0;
    }
    if (n->type == YAML_SCALAR_NODE)
        add_error(ps, LINE(n), COL(n), "%s: '%s' is not a boolean (true or false)", what,
                  quote(SCALAR(n), SCALAR_LEN(n), q));
    else
        add_error(ps, LINE(n), COL(n), "%s: expected true or false", what);
    return -1;
}

/* The keys of a section: which are known, which balloonmgr refuses and why. */
typedef struct {
    const char *name;
    const char *unsupported; /* non-NULL: refused, with this reason */
} Key;

static const Key top_keys[] = {
    {"tls_server_config", NULL},
    {"http_server_config", NULL},
    {"basic_auth_users", NULL},
};

static const Key tls_keys[] = {
    {"cert_file", NULL},
    {"key_file", NULL},
    {"min_version", NULL},
    {"max_version", NULL},
    {"prefer_server_cipher_suites", NULL},
    {"client_auth_type", NULL},
    {"cert", "inline certificates are not supported: use cert_file"},
    {"key", "inline keys are not supported: use key_file"},
    {"client_ca_file", "client certificates are not supported"},
    {"client_allowed_sans", "client certificates are not supported"},
    {"cipher_suites", "cipher suites are gnutls' defaults for the TLS versions"},
    {"curve_preferences", "curves are gnutls' defaults"},
};

static const Key http_keys[] = {
    {"http2", NULL},
    {"headers", "extra response headers are not supported"},
};

/* The index of the key of n in keys, or -1 with an error (unknown or unsupported). section is
 * NULL at the top level. */
static int find_key(Parser *ps, const yaml_node_t *n, const Key *keys, size_t n_keys,
                    const char *section)
{
    char q[BM_QUOTE_SIZE];
    if (n->type != YAML_SCALAR_NODE || (explicit_tag(ps, n) && strcmp(explicit_tag(ps, n), TAG_STR))) {
        add_error(ps, LINE(n), COL(n), "%s%skeys must be strings", section ? section : "",
                  section ? ": " : "");
        return -1;
    }
    const char *s = SCALAR(n);
    size_t len = SCALAR_LEN(n);
    int best = -1;
    size_t best_d = 3;
    for (size_t k = 0; k < n_keys; k++) {
        if (strlen(keys[k].name) == len && memcmp(keys[k].name, s, len) == 0) {
            if (keys[k].unsupported) {
                add_error(ps, LINE(n), COL(n), "%s%s'%s' is not supported by balloonmgr: %s",
                          section ? section : "", section ? ": " : "", keys[k].name,
                          keys[k].unsupported);
                return -1;
            }
            return (int)k;
        }
        size_t d = bm_edit_distance(s, len, keys[k].name);
        if (d < best_d) {
            best_d = d;
            best = (int)k;
        }
    }
    char hint[96] = "";
    if (best >= 0)
        snprintf(hint, sizeof(hint), " (did you mean '%s'?)", keys[best].name);
    add_error(ps, LINE(n), COL(n), "unknown key '%s'%s%s%s", quote(s, len, q),
              section ? " in " : "", section ? section : "", hint);
    return -1;
}

/* Calls visit(ps, index of the key, key node, value node) for each known key of mapping m;
 * reports unknown, unsupported and duplicate keys. NULL m (a section left empty) has none. */
static void walk_mapping(Parser *ps, const yaml_node_t *m, const Key *keys, size_t n_keys,
                         const char *section,
                         void (*visit)(Parser *, int, const yaml_node_t *, const yaml_node_t *))
{
    unsigned seen[16] = {0};
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = yaml_document_get_node(ps->doc, p->key);
        const yaml_node_t *v = yaml_document_get_node(ps->doc, p->value);
        int i = find_key(ps, k, keys, n_keys, section);
        if (i < 0)
            continue;
        if (seen[i]) {
            add_error(ps, LINE(k), COL(k), "%s%sduplicate key '%s' (first on line %u)",
                      section ? section : "", section ? ": " : "", keys[i].name, seen[i]);
            continue;
        }
        seen[i] = LINE(k);
        visit(ps, i, k, v);
    }
}

/* Whether n is a mapping, or null (an empty section); else an error naming the section. */
static bool is_section(Parser *ps, const yaml_node_t *k, const yaml_node_t *n)
{
    if (!tag_is(ps, n, TAG_MAP, SCALAR(k)))
        return false;
    if (n->type == YAML_MAPPING_NODE || is_null(ps, n))
        return true;
    add_error(ps, LINE(n), COL(n), "%s: expected a mapping of keys to values", SCALAR(k));
    return false;
}

static char *resolve(const char *config_path, const char *file)
{
    const char *slash = config_path ? strrchr(config_path, '/') : NULL;
    if (file[0] == '/' || !slash)
        return bm_strdup(file);
    return bm_asprintf("%.*s/%s", (int)(slash - config_path), config_path, file);
}

/* TLS12 / TLS13; the older ones are refused. 0 with an error for anything else. */
static BmTlsVersion get_version(Parser *ps, const yaml_node_t *v, const char *what)
{
    char q[BM_QUOTE_SIZE], full[64];
    snprintf(full, sizeof(full), "tls_server_config: %s", what);
    const char *s = get_string(ps, v, full);
    if (!s)
        return BM_TLS_ANY;
    if (!strcmp(s, "TLS12"))
        return BM_TLS_12;
    if (!strcmp(s, "TLS13"))
        return BM_TLS_13;
    if (!strcmp(s, "TLS10") || !strcmp(s, "TLS11"))
        add_error(ps, LINE(v), COL(v),
                  "tls_server_config: %s '%s' is not supported by balloonmgr: TLS12 or TLS13", what,
                  s);
    else
        add_error(ps, LINE(v), COL(v),
                  "tls_server_config: %s '%s' is not a TLS version (TLS12 or TLS13)", what,
                  quote(s, SCALAR_LEN(v), q));
    return BM_TLS_ANY;
}

static void visit_tls(Parser *ps, int i, const yaml_node_t *k, const yaml_node_t *v)
{
    BmWebConfig *c = ps->c;
    char q[BM_QUOTE_SIZE];
    const char *name = tls_keys[i].name;
    char what[64];
    snprintf(what, sizeof(what), "tls_server_config: %s", name);
    if (!strcmp(name, "cert_file") || !strcmp(name, "key_file")) {
        bool cert = name[0] == 'c';
        const char *s = get_string(ps, v, what);
        /* seen, even if bad: "missing" would be wrong */
        *(cert ? &c->cert_line : &c->key_line) = LINE(v);
        *(cert ? &c->cert_col : &c->key_col) = COL(v);
        if (!s)
            return;
        if (!*s) {
            add_error(ps, LINE(v), COL(v), "%s: must not be empty", what);
            return;
        }
        *(cert ? &c->cert_file : &c->key_file) = bm_strdup(s);
        *(cert ? &c->cert_path : &c->key_path) = resolve(ps->path, s);
    } else if (!strcmp(name, "min_version")) {
        c->min_version = get_version(ps, v, name);
    } else if (!strcmp(name, "max_version")) {
        c->max_version = get_version(ps, v, name);
    } else if (!strcmp(name, "prefer_server_cipher_suites")) {
        int b = get_bool(ps, v, what);
        if (b >= 0)
            c->prefer_server_cipher_suites = b;
    } else if (!strcmp(name, "client_auth_type")) {
        const char *s = get_string(ps, v, what);
        if (s && strcmp(s, "NoClientCert") != 0)
            add_error(ps, LINE(v), COL(v),
                      "%s '%s' is not supported by balloonmgr: only NoClientCert "
                      "(client certificates are not supported)",
                      what, quote(s, SCALAR_LEN(v), q));
    }
    (void)k;
}

static void visit_http(Parser *ps, int i, const yaml_node_t *k, const yaml_node_t *v)
{
    (void)i, (void)k;
    int b = get_bool(ps, v, "http_server_config: http2");
    if (b >= 0)
        ps->c->http2 = b;
}

bool bm_webconfig_is_bcrypt(const char *s)
{
    static const char b64[] = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    if (strlen(s) != 60 || s[0] != '$' || s[1] != '2' || !strchr("aby", s[2]) || s[3] != '$' ||
        s[4] < '0' || s[4] > '3' || s[5] < '0' || s[5] > '9' || s[6] != '$')
        return false;
    int cost = (s[4] - '0') * 10 + (s[5] - '0');
    if (cost < 4 || cost > 31)
        return false;
    for (size_t i = 7; i < 60; i++)
        if (!s[i] || !strchr(b64, s[i]))
            return false;
    return true;
}

static void parse_users(Parser *ps, const yaml_node_t *m)
{
    BmWebConfig *c = ps->c;
    char q[BM_QUOTE_SIZE];
    size_t n = (size_t)(m->data.mapping.pairs.top - m->data.mapping.pairs.start);
    c->users = n ? bm_reallocarray(NULL, n, sizeof(*c->users)) : NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = yaml_document_get_node(ps->doc, p->key);
        const yaml_node_t *v = yaml_document_get_node(ps->doc, p->value);
        const char *user = get_string(ps, k, "basic_auth_users: user name");
        if (!user)
            continue;
        if (!*user) {
            add_error(ps, LINE(k), COL(k), "basic_auth_users: empty user name");
            continue;
        }
        if (strchr(user, ':')) {
            add_error(ps, LINE(k), COL(k),
                      "basic_auth_users: '%s': a user name cannot contain ':' (basic auth "
                      "separates it from the password with ':')",
                      quote(user, strlen(user), q));
            continue;
        }
        bool dup = false;
        for (size_t i = 0; i < c->n_users && !dup; i++)
            if (!strcmp(c->users[i].name, user)) {
                add_error(ps, LINE(k), COL(k),
                          "basic_auth_users: duplicate user '%s' (first on line %u)",
                          quote(user, strlen(user), q), c->users[i].line);
                dup = true;
            }
        if (dup)
            continue;
        char what[BM_QUOTE_MAX * 4 + 64];
        snprintf(what, sizeof(what), "basic_auth_users: '%s'", quote(user, strlen(user), q));
        const char *hash = get_string(ps, v, what);
        if (!hash)
            continue;
        if (!bm_webconfig_is_bcrypt(hash)) {
            add_error(ps, LINE(v), COL(v),
                      "%s: the password is not a bcrypt hash ($2y$, $2b$ or $2a$, a cost from 04 "
                      "to 31, 53 characters: e.g. from htpasswd -nbB USER PASSWORD)",
                      what);
            continue;
        }
        int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
        if (cost > BM_BCRYPT_COST_MAX) {
            /* about 0.25 s at the maximum, doubling with each step */
            double secs = 0.25 * (double)(1u << (cost - BM_BCRYPT_COST_MAX));
            char took[32];
            if (secs < 120)
                snprintf(took, sizeof(took), "%.1f s", secs);
            else if (secs < 7200)
                snprintf(took, sizeof(took), "%.0f min", secs / 60);
            else
                snprintf(took, sizeof(took), "%.0f h", secs / 3600);
            add_error(ps, LINE(v), COL(v),
                      "%s: bcrypt cost %d is above the maximum %d (a check of a password not "
                      "seen before would take about %s of CPU): hash it again with htpasswd "
                      "-nbB -C %d USER PASSWORD",
                      what, cost, BM_BCRYPT_COST_MAX, took, BM_BCRYPT_COST_MAX);
            continue;
        }
        c->users[c->n_users++] =
            (BmWebUser){.name = bm_strdup(user), .hash = bm_strdup(hash), .line = LINE(k)};
    }
}

static void visit_top(Parser *ps, int i, const yaml_node_t *k, const yaml_node_t *v)
{
    BmWebConfig *c = ps->c;
    if (!is_section(ps, k, v))
        return;
    bool empty = is_null(ps, v);
    switch (i) {
    case 0: /* tls_server_config */
        c->tls = true;
        if (!empty)
            walk_mapping(ps, v, tls_keys, BM_ARRAY_SIZE(tls_keys), "tls_server_config", visit_tls);
        if (!c->cert_line)
            add_error(ps, LINE(k), COL(k), "tls_server_config: cert_file is missing");
        if (!c->key_line)
            add_error(ps, LINE(k), COL(k), "tls_server_config: key_file is missing");
        if (c->min_version && c->max_version && c->min_version > c->max_version)
            add_error(ps, LINE(k), COL(k),
                      "tls_server_config: min_version TLS%d is above max_version TLS%d",
                      c->min_version, c->max_version);
        break;
    case 1: /* http_server_config */
        if (!empty)
            walk_mapping(ps, v, http_keys, BM_ARRAY_SIZE(http_keys), "http_server_config",
                         visit_http);
        break;
    case 2: /* basic_auth_users */
        if (!empty)
            parse_users(ps, v);
        break;
    }
}

/* The line and column of a libyaml error: its mark, or for a reader error (bad UTF-8, a
 * control character) the position of its byte offset in text. */
static void yaml_error_position(const yaml_parser_t *p, const char *text, unsigned *line,
                                unsigned *col)
{
    if (p->error != YAML_READER_ERROR) {
        *line = (unsigned)p->problem_mark.line + 1;
        *col = (unsigned)p->problem_mark.column + 1;
        return;
    }
    *line = *col = 1;
    for (size_t i = 0; i < p->problem_offset && text[i]; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else if (((unsigned char)text[i] & 0xc0) != 0x80) {
            (*col)++;
        }
    }
}

/* Walks the events of text: records the explicit tags in ps (explicit_tag()), and returns 0
 * when no collection is nested deeper than MAX_DEPTH (or on a syntax error, which the loader
 * then reports), else -1 and where. Stops at the first collection too deep, so the time is
 * linear. */
static int scan_events(Parser *ps, const char *text, unsigned *ret_line, unsigned *ret_col)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        abort(); /* out of memory */
    yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
    int depth = 0, r = 0;
    size_t cap = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev))
            break;
        yaml_event_type_t type = ev.type;
        const yaml_char_t *tag = type == YAML_SCALAR_EVENT           ? ev.data.scalar.tag
                                 : type == YAML_SEQUENCE_START_EVENT ? ev.data.sequence_start.tag
                                 : type == YAML_MAPPING_START_EVENT  ? ev.data.mapping_start.tag
                                                                     : NULL;
        if (tag) {
            if (ps->n_tags == cap) {
                cap = cap ? 2 * cap : 16;
                ps->tags = bm_reallocarray(ps->tags, cap, sizeof(*ps->tags));
            }
            ps->tags[ps->n_tags++] = (ExplicitTag){
                .index = ev.start_mark.index,
                .type = type == YAML_SCALAR_EVENT           ? YAML_SCALAR_NODE
                        : type == YAML_SEQUENCE_START_EVENT ? YAML_SEQUENCE_NODE
                                                            : YAML_MAPPING_NODE,
                .tag = bm_strdup((const char *)tag)};
        }
        if (type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) {
            if (++depth > MAX_DEPTH) {
                *ret_line = (unsigned)ev.start_mark.line + 1;
                *ret_col = (unsigned)ev.start_mark.column + 1;
                r = -1;
            }
        } else if (type == YAML_SEQUENCE_END_EVENT || type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        yaml_event_delete(&ev);
        if (r < 0 || type == YAML_STREAM_END_EVENT)
            break;
    }
    yaml_parser_delete(&p);
    return r;
}

static void tags_clear(Parser *ps)
{
    for (size_t i = 0; i < ps->n_tags; i++)
        free(ps->tags[i].tag);
    free(ps->tags);
    ps->tags = NULL;
    ps->n_tags = 0;
}

/* The errors of ps: the first as the error detail, all in *ret_errors. Returns -EINVAL. */
static int refuse(Parser *ps, char **ret_errors)
{
    _cleanup_free_ char *errors = bm_diags_join(&ps->diags, ps->path, true);
    const char *nl = strchr(errors, '\n');
    bm_error(-EINVAL, "%.*s", (int)(nl - errors), errors);
    if (ret_errors)
        *ret_errors = TAKE_PTR(errors);
    return -EINVAL;
}

void bm_webconfig_free(BmWebConfig *c)
{
    if (!c)
        return;
    free(c->path);
    free(c->cert_file);
    free(c->key_file);
    free(c->cert_path);
    free(c->key_path);
    free(c->cert_pem);
    free(c->key_pem);
    for (size_t i = 0; i < c->n_users; i++) {
        free(c->users[i].name);
        free(c->users[i].hash);
    }
    free(c->users);
    free(c);
}

/* Where byte off of text is: line and column (in characters), both from 1. */
static void position_of(const char *text, size_t off, unsigned *line, unsigned *col)
{
    *line = *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else if (((unsigned char)text[i] & 0xc0) != 0x80) {
            (*col)++;
        }
    }
}

int bm_webconfig_parse(const char *text, const char *path, BmWebConfig **ret, char **ret_errors)
{
    return bm_webconfig_parse_n(text, strlen(text), path, ret, ret_errors);
}

int bm_webconfig_parse_n(const char *text, size_t len, const char *path, BmWebConfig **ret,
                         char **ret_errors)
{
    if (ret)
        *ret = NULL;
    if (ret_errors)
        *ret_errors = NULL;
    Parser ps = {.path = path ? path : "(web config)"};
    _cleanup_(bm_webconfig_freep) BmWebConfig *c = bm_malloc0(sizeof(*c));
    c->path = bm_strdup(ps.path);
    c->prefer_server_cipher_suites = true;
    c->http2 = true;
    ps.c = c;

    /* a file not read in full is refused whole: never fall back to what comes before a NUL
     * byte (that could drop tls_server_config or basic_auth_users) */
    const char *nul = memchr(text, '\0', len);
    size_t nul_at = nul ? (size_t)(nul - text) : 0;
    _cleanup_free_ char *copy = bm_malloc0(len + 1); /* text need not end in a NUL */
    memcpy(copy, text, len);
    text = copy;
    unsigned deep_line, deep_col;
    if (nul) {
        position_of(text, nul_at, &deep_line, &deep_col);
        add_error(&ps, deep_line, deep_col, "contains a NUL byte: refused whole");
        text = "";
    } else if (scan_events(&ps, text, &deep_line, &deep_col) < 0) {
        add_error(&ps, deep_line, deep_col, "nested more than %d levels deep", MAX_DEPTH);
        text = ""; /* nothing more to say */
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        abort(); /* out of memory */
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, strlen(text));
    bool loaded = yaml_parser_load(&parser, &doc);
    if (!loaded) {
        unsigned line, col;
        yaml_error_position(&parser, text, &line, &col);
        add_error(&ps, line, col, "YAML: %s%s%s", parser.problem ? parser.problem : "error",
                  parser.context ? " " : "", parser.context ? parser.context : "");
    } else {
        ps.doc = &doc;
        const yaml_node_t *root = yaml_document_get_root_node(&doc);
        if (root && !tag_is(&ps, root, TAG_MAP, "the document"))
            ; /* a tagged scalar or sequence is no config, not even an empty one */
        else if (root && root->type == YAML_MAPPING_NODE)
            walk_mapping(&ps, root, top_keys, BM_ARRAY_SIZE(top_keys), NULL, visit_top);
        else if (root && !is_null(&ps, root))
            add_error(&ps, LINE(root), COL(root),
                      "expected a mapping with tls_server_config, http_server_config or "
                      "basic_auth_users");
        /* a second document is an error (exporter-toolkit reads one) */
        yaml_document_t next;
        if (root && yaml_parser_load(&parser, &next)) {
            const yaml_node_t *r2 = yaml_document_get_root_node(&next);
            if (r2)
                add_error(&ps, LINE(r2), COL(r2), "only one YAML document is allowed");
            yaml_document_delete(&next);
        } else if (root && parser.error != YAML_NO_ERROR) {
            unsigned line, col;
            yaml_error_position(&parser, text, &line, &col);
            add_error(&ps, line, col, "YAML: %s%s%s", parser.problem ? parser.problem : "error",
                      parser.context ? " " : "", parser.context ? parser.context : "");
        }
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    tags_clear(&ps);

    if (ps.diags.n)
        return refuse(&ps, ret_errors);
    if (ret)
        *ret = TAKE_PTR(c);
    return 0;
}

char *bm_webconfig_tls_priorities(const BmWebConfig *c)
{
    int lo = c->min_version ? c->min_version : BM_TLS_12;
    int hi = c->max_version ? c->max_version : BM_TLS_13;
    char versions[64] = "";
    for (int v = hi; v >= lo; v--)
        snprintf(versions + strlen(versions), sizeof(versions) - strlen(versions), ":+VERS-TLS1.%d",
                 v - 10);
    return bm_asprintf("NORMAL:-VERS-ALL%s%s", versions,
                       c->prefer_server_cipher_suites ? ":%SERVER_PRECEDENCE" : "");
}

/* gnutls' message without its final period. */
static const char *tls_reason(int err, char *buf, size_t n)
{
    snprintf(buf, n, "%s", gnutls_strerror(err));
    size_t len = strlen(buf);
    if (len && buf[len - 1] == '.')
        buf[len - 1] = '\0';
    return buf;
}

/* Checks that the PEM texts are a certificate (chain) and the key of its first certificate.
 * Adds errors naming the files. */
static void check_tls_pair(Parser *ps, const BmWebConfig *c)
{
    char why[256];
    gnutls_datum_t cert = {(unsigned char *)c->cert_pem, (unsigned)strlen(c->cert_pem)};
    gnutls_datum_t key = {(unsigned char *)c->key_pem, (unsigned)strlen(c->key_pem)};
    gnutls_x509_crt_t *crts = NULL;
    unsigned n_crts = 0;
    int r = gnutls_x509_crt_list_import2(&crts, &n_crts, &cert, GNUTLS_X509_FMT_PEM, 0);
    bool cert_ok = r >= 0 && n_crts > 0;
    if (!cert_ok)
        add_error(ps, c->cert_line, c->cert_col,
                  "cert_file '%s': not a PEM certificate (gnutls: %s)", c->cert_path,
                  r < 0 ? tls_reason(r, why, sizeof(why)) : "none found");
    for (unsigned i = 0; i < n_crts; i++)
        gnutls_x509_crt_deinit(crts[i]);
    gnutls_free(crts);

    gnutls_x509_privkey_t pk;
    bool key_ok = false;
    if (gnutls_x509_privkey_init(&pk) >= 0) {
        r = gnutls_x509_privkey_import2(pk, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
        key_ok = r >= 0;
        if (!key_ok)
            add_error(ps, c->key_line, c->key_col,
                      "key_file '%s': not a PEM private key (gnutls: %s)", c->key_path,
                      tls_reason(r, why, sizeof(why)));
        gnutls_x509_privkey_deinit(pk);
    }
    if (!cert_ok || !key_ok)
        return;

    gnutls_certificate_credentials_t cred;
    if (gnutls_certificate_allocate_credentials(&cred) < 0)
        abort(); /* out of memory */
    r = gnutls_certificate_set_x509_key_mem2(cred, &cert, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (r < 0)
        add_error(ps, c->key_line, c->key_col,
                  "key_file '%s' is not the key of cert_file '%s' (gnutls: %s)", c->key_path,
                  c->cert_path, tls_reason(r, why, sizeof(why)));
    gnutls_certificate_free_credentials(cred);
}

/* Reads a TLS file named at line:col into *ret; an error naming it when it cannot. */
static void read_tls_file(Parser *ps, const char *what, const char *path, unsigned line,
                          unsigned col, char **ret)
{
    size_t len = 0;
    int r = bm_file_read(path, PEM_MAX_BYTES, ret, &len);
    if (r < 0) {
        add_error(ps, line, col, "%s '%s': %s", what, path, bm_error_detail(r));
    } else if (strlen(*ret) != len) {
        add_error(ps, line, col, "%s '%s': contains a NUL byte (not a PEM file)", what, path);
        free(*ret);
        *ret = NULL;
    }
}

int bm_webconfig_load(const char *path, BmWebConfig **ret, char **ret_errors)
{
    if (ret)
        *ret = NULL;
    if (ret_errors)
        *ret_errors = NULL;
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = bm_file_read(path, WEBCONFIG_MAX_BYTES, &text, &len);
    if (r < 0) {
        char why[512];
        snprintf(why, sizeof(why), "%s", bm_error_detail(r));
        const char *shown = *path ? path : "''";
        if (ret_errors)
            *ret_errors = bm_asprintf("%s: %s\n", shown, why);
        return bm_error(r == -EFBIG ? -EINVAL : r, "%s: %s", shown, why);
    }
    _cleanup_(bm_webconfig_freep) BmWebConfig *c = NULL;
    r = bm_webconfig_parse_n(text, len, path, &c, ret_errors);
    if (r < 0)
        return r;
    if (c->tls) {
        Parser ps = {.path = path, .c = c};
        read_tls_file(&ps, "cert_file", c->cert_path, c->cert_line, c->cert_col, &c->cert_pem);
        read_tls_file(&ps, "key_file", c->key_path, c->key_line, c->key_col, &c->key_pem);
        if (c->cert_pem && c->key_pem)
            check_tls_pair(&ps, c);
        if (!ps.diags.n) {
            _cleanup_free_ char *prio = bm_webconfig_tls_priorities(c);
            gnutls_priority_t pc;
            const char *at = NULL;
            r = gnutls_priority_init(&pc, prio, &at);
            if (r < 0) {
                char why[256];
                add_error(&ps, c->cert_line, c->cert_col, "TLS priorities '%s': %s", prio,
                          tls_reason(r, why, sizeof(why)));
            } else {
                gnutls_priority_deinit(pc);
            }
        }
        if (ps.diags.n)
            return refuse(&ps, ret_errors);
    }
    if (ret)
        *ret = TAKE_PTR(c);
    return 0;
}
