/* HTTP basic auth of the metrics endpoint against the bcrypt hashes of a web config
 * (basic_auth_users): crypt(3) of libxcrypt, a constant-time comparison of its result, the
 * same work for an unknown user as for a known one, and a cache of successful checks so that
 * a scrape every second does not pay bcrypt every time (as exporter-toolkit does). */
#pragma once

#include <stdbool.h>

#include "webconfig.h"

typedef struct BmBasicAuth BmBasicAuth;

/* A checker for the users of c (copied). Returns 0 and *ret (NULL when c has no users: no
 * auth), or -errno with the reason (no random salt for the dummy hash). Free with
 * bm_basic_auth_unref(). */
int bm_basic_auth_new(const BmWebConfig *c, BmBasicAuth **ret);

/* Whether password is user's. Thread-safe. A pair that passed before is answered from the
 * cache (a keyed SHA-256 of user and password, never the password); otherwise one bcrypt
 * computation runs, against a dummy hash of the users' highest cost when the user is unknown,
 * so that the time taken does not tell which users exist. At most two bcrypt computations run
 * at a time (in the process): more checks wait for their turn. */
bool bm_basic_auth_check(BmBasicAuth *a, const char *user, const char *password);

/* From now on no check of credentials not cached runs bcrypt (it fails at once), and checks
 * waiting for their turn or for their computation fail at once: a stop never waits for bcrypt
 * work. The (at most two) computations running finish in their own threads, or end with the
 * process. */
void bm_basic_auth_shutdown(void);

/* Parses the value of an Authorization header: the scheme "Basic" in any case (RFC 7617),
 * then base64 of "user:password". Returns 0 with *ret_user and *ret_password (caller frees;
 * wipe the password), -ENOENT when value is NULL, or -EINVAL: another scheme, bad base64, no
 * ':', or a NUL byte in the decoded credentials (never cut there). */
int bm_basic_auth_parse_header(const char *value, char **ret_user, char **ret_password);

/* How many bcrypt computations checks have run (for tests of the cache). */
unsigned long bm_basic_auth_crypt_calls(BmBasicAuth *a);

/* Reference counting: the HTTP threads hold a checker while a reload replaces it. NULL-safe. */
BmBasicAuth *bm_basic_auth_ref(BmBasicAuth *a);
void bm_basic_auth_unref(BmBasicAuth *a);
DEFINE_CLEANUP(BmBasicAuth *, bm_basic_auth_unref)
