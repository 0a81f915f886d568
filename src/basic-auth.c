#include "basic-auth.h"

#include <crypt.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "error.h"

#define CACHE_SIZE 64
#define DIGEST_BYTES 32

struct BmBasicAuth {
    atomic_int refs;
    BmWebUser *users; /* copies: name and hash */
    size_t n_users;
    char dummy[CRYPT_GENSALT_OUTPUT_SIZE]; /* a bcrypt setting of the users' highest cost */
    uint8_t key[32];                       /* of the cache's HMAC */
    pthread_mutex_t lock;                  /* cache and counter */
    uint8_t cache[CACHE_SIZE][DIGEST_BYTES];
    size_t n_cached, next_slot;
    unsigned long crypt_calls;
};

/* Equal length and bytes, in a time that depends only on the lengths. */
static bool equal_ct(const void *a, size_t na, const void *b, size_t nb)
{
    const unsigned char *x = a, *y = b;
    unsigned char diff = na != nb;
    size_t n = na < nb ? na : nb;
    for (size_t i = 0; i < n; i++)
        diff |= x[i] ^ y[i];
    return diff == 0;
}

int bm_basic_auth_new(const BmWebConfig *c, BmBasicAuth **ret)
{
    *ret = NULL;
    if (!c || c->n_users == 0)
        return 0;
    BmBasicAuth *a = bm_malloc0(sizeof(*a));
    atomic_init(&a->refs, 1);
    pthread_mutex_init(&a->lock, NULL);
    a->users = bm_reallocarray(NULL, c->n_users, sizeof(*a->users));
    unsigned long cost = 4;
    for (size_t i = 0; i < c->n_users; i++) {
        a->users[i] = (BmWebUser){.name = bm_strdup(c->users[i].name),
                                  .hash = bm_strdup(c->users[i].hash),
                                  .line = c->users[i].line};
        unsigned long uc = strtoul(c->users[i].hash + 4, NULL, 10);
        if (uc > cost)
            cost = uc;
    }
    a->n_users = c->n_users;
    if (!crypt_gensalt_rn("$2b$", cost, NULL, 0, a->dummy, sizeof(a->dummy)) ||
        gnutls_rnd(GNUTLS_RND_KEY, a->key, sizeof(a->key)) < 0) {
        int err = errno ? errno : EIO;
        bm_basic_auth_unref(a);
        return bm_error(-err, "no random bytes for basic auth: %s", strerror(err));
    }
    *ret = a;
    return 0;
}

static void digest(const BmBasicAuth *a, const char *user, const char *password,
                   uint8_t out[DIGEST_BYTES])
{
    size_t nu = strlen(user), np = strlen(password);
    _cleanup_free_ char *buf = bm_malloc0(nu + np + 2);
    memcpy(buf, user, nu);
    memcpy(buf + nu + 1, password, np);
    if (gnutls_hmac_fast(GNUTLS_MAC_SHA256, a->key, sizeof(a->key), buf, nu + np + 1, out) < 0)
        memset(out, 0, DIGEST_BYTES); /* never matches: the cache only holds real digests */
    explicit_bzero(buf, nu + np + 2);
}

bool bm_basic_auth_check(BmBasicAuth *a, const char *user, const char *password)
{
    if (!a || !user || !password)
        return false;
    /* every user is compared, so the loop's time does not depend on which one matched */
    const BmWebUser *found = NULL;
    for (size_t i = 0; i < a->n_users; i++)
        if (equal_ct(a->users[i].name, strlen(a->users[i].name), user, strlen(user)) && !found)
            found = &a->users[i];

    uint8_t d[DIGEST_BYTES];
    bool hit = false;
    digest(a, user, password, d);
    pthread_mutex_lock(&a->lock);
    for (size_t i = 0; i < a->n_cached; i++)
        hit |= equal_ct(a->cache[i], DIGEST_BYTES, d, DIGEST_BYTES);
    if (!hit)
        a->crypt_calls++;
    pthread_mutex_unlock(&a->lock);
    if (hit)
        return true; /* only successes are cached */

    struct crypt_data *cd = calloc(1, sizeof(*cd));
    if (!cd)
        return false;
    const char *setting = found ? found->hash : a->dummy;
    const char *out = crypt_rn(password, setting, cd, (int)sizeof(*cd));
    bool ok = found && out && equal_ct(out, strlen(out), found->hash, strlen(found->hash));
    explicit_bzero(cd, sizeof(*cd));
    free(cd);
    if (ok) {
        pthread_mutex_lock(&a->lock);
        memcpy(a->cache[a->next_slot], d, DIGEST_BYTES);
        a->next_slot = (a->next_slot + 1) % CACHE_SIZE;
        if (a->n_cached < CACHE_SIZE)
            a->n_cached++;
        pthread_mutex_unlock(&a->lock);
    }
    return ok;
}

unsigned long bm_basic_auth_crypt_calls(BmBasicAuth *a)
{
    pthread_mutex_lock(&a->lock);
    unsigned long n = a->crypt_calls;
    pthread_mutex_unlock(&a->lock);
    return n;
}

BmBasicAuth *bm_basic_auth_ref(BmBasicAuth *a)
{
    if (a)
        atomic_fetch_add(&a->refs, 1);
    return a;
}

void bm_basic_auth_unref(BmBasicAuth *a)
{
    if (!a || atomic_fetch_sub(&a->refs, 1) != 1)
        return;
    for (size_t i = 0; i < a->n_users; i++) {
        free(a->users[i].name);
        free(a->users[i].hash);
    }
    free(a->users);
    pthread_mutex_destroy(&a->lock);
    explicit_bzero(a, sizeof(*a));
    free(a);
}
