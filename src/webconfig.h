/* The web config file of `agent --web-config` (TLS and basic auth of /metrics), in the format
 * of Prometheus' exporter-toolkit (docs/web-configuration.md there): YAML with
 * tls_server_config, http_server_config and basic_auth_users. bm_webconfig_parse() is pure
 * (text in, struct out); bm_webconfig_load() also reads the files it names. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/* TLS protocol versions of min_version / max_version. */
typedef enum {
    BM_TLS_ANY = 0, /* not set */
    BM_TLS_12 = 12,
    BM_TLS_13 = 13,
} BmTlsVersion;

/* The highest bcrypt cost accepted in basic_auth_users. Each check of credentials not seen
 * before costs 2^cost rounds: at 12 about 0.25 s of one core (0.5-0.7 s on a busy 2-core
 * host), so a check in flight never holds up SIGTERM by a second; 31 would take days. */
#define BM_BCRYPT_COST_MAX 12

typedef struct {
    char *name;
    char *hash;    /* bcrypt: $2a$, $2b$ or $2y$, cost 04..BM_BCRYPT_COST_MAX */
    unsigned line; /* of the user's key */
} BmWebUser;

typedef struct {
    char *path;                   /* the file it came from (as given) */
    bool tls;                     /* tls_server_config given: serve HTTPS only */
    char *cert_file, *key_file;   /* as written in the file */
    char *cert_path, *key_path;   /* resolved: relative to the config file's directory */
    unsigned cert_line, cert_col; /* where cert_file / key_file are, for messages */
    unsigned key_line, key_col;
    BmTlsVersion min_version;         /* default TLS 1.2, as exporter-toolkit */
    BmTlsVersion max_version;         /* default: the newest gnutls offers */
    bool prefer_server_cipher_suites; /* default true */
    char *cert_pem, *key_pem;         /* the files' contents: filled by bm_webconfig_load() */
    bool http2;                       /* http_server_config.http2: accepted, ignored */
    BmWebUser *users;                 /* basic_auth_users in file order; none: no auth */
    size_t n_users;
} BmWebConfig;

/* Parses web config text; path names it in messages and is the base of relative cert_file and
 * key_file. An empty file is a valid config (plain HTTP, no auth). Returns 0 and *ret (caller
 * frees), or -EINVAL with *ret_errors: every error found, one per line, each
 * "path:line:col: message" (caller frees). Unknown keys, keys balloonmgr does not support
 * (client_ca_file, cipher_suites, ...; each named), wrong types, duplicate keys, a missing
 * cert_file or key_file, a min_version above max_version, and passwords that are not bcrypt
 * hashes are errors. ret and ret_errors may be NULL (check only). */
int bm_webconfig_parse(const char *text, const char *path, BmWebConfig **ret, char **ret_errors);

/* bm_webconfig_parse() of len bytes of text, which may hold NUL bytes and need not end in one: a NUL byte or invalid
 * UTF-8 anywhere refuses the whole file (never a config read up to it, with less security
 * than the file asks for). */
int bm_webconfig_parse_n(const char *text, size_t len, const char *path, BmWebConfig **ret,
                         char **ret_errors);

/* Reads and parses path, then reads cert_file and key_file and checks that they hold a
 * certificate and its private key (gnutls). Returns as bm_webconfig_parse(), or -errno with
 * *ret_errors "path: cannot read: reason" (the config) or "path:line:col: cert_file 'FILE':
 * ..." (a TLS file). */
int bm_webconfig_load(const char *path, BmWebConfig **ret, char **ret_errors);

/* The gnutls priority string for the config's TLS versions and cipher preference, e.g.
 * "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:%SERVER_PRECEDENCE". Caller frees. */
char *bm_webconfig_tls_priorities(const BmWebConfig *c);

/* Whether s is a bcrypt hash crypt(3) can check: "$2a$", "$2b$" or "$2y$", a two-digit cost
 * from 04 to 31, "$", and 53 characters of bcrypt's base64. */
bool bm_webconfig_is_bcrypt(const char *s);

void bm_webconfig_free(BmWebConfig *c);
DEFINE_CLEANUP(BmWebConfig *, bm_webconfig_free)
