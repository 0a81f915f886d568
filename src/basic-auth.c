#include "basic-auth.h"

#include <crypt.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "error.h"

#define CACHE_SIZE 64

/* bcrypt computations run at most this many at a time, in the whole process: a burst of
 * wrong passwords takes two cores at most, and a stop waits for two checks at most */
#define PARALLEL_MAX 2
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slots_cond = PTHREAD_COND_INITIALIZER;
static unsigned slots_used;
static bool slots_closed;
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

/* One bcrypt computation, shared by the check that waits for it and the thread that runs it;
 * the last of them frees it. Under slots_lock. */
typedef struct {
    int refs;
    bool done;
    char *password, *setting;
    char *out; /* crypt's result, NULL when it failed */
} Job;

static void job_unref_locked(Job *j)
{
    if (--j->refs > 0)
        return;
    explicit_bzero(j->password, strlen(j->password));
    free(j->password);
    free(j->setting);
    free(j->out);
    free(j);
}

static void *crypt_job(void *arg)
{
    Job *j = arg;
    /* not niced: a stop must be able to end this thread at once, and a thread with a high
     * nice value on a busy host is slow even to die (measured: 1.3-2.8 s at nice 10) */
    struct crypt_data *cd = calloc(1, sizeof(*cd));
    const char *out = cd ? crypt_rn(j->password, j->setting, cd, (int)sizeof(*cd)) : NULL;
    char *copy = out ? strdup(out) : NULL;
    if (cd) {
        explicit_bzero(cd, sizeof(*cd));
        free(cd);
    }
    pthread_mutex_lock(&slots_lock);
    j->out = copy;
    j->done = true;
    slots_used--;
    pthread_cond_broadcast(&slots_cond); /* the check waiting for it, and those for a turn */
    job_unref_locked(j);
    pthread_mutex_unlock(&slots_lock);
    return NULL;
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

    /* the computation runs in a thread of its own that nobody waits for at a stop: a check
     * in flight never holds up SIGTERM, whatever the cost and the load */
    pthread_mutex_lock(&slots_lock);
    while (slots_used >= PARALLEL_MAX && !slots_closed)
        pthread_cond_wait(&slots_cond, &slots_lock);
    if (slots_closed) {
        pthread_mutex_unlock(&slots_lock);
        return false; /* stopping: no new bcrypt */
    }
    slots_used++;
    Job *job = bm_malloc0(sizeof(*job));
    job->refs = 2;
    job->password = bm_strdup(password);
    job->setting = bm_strdup(found ? found->hash : a->dummy);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, crypt_job, job) != 0) {
        slots_used--;
        job->refs = 1;
        job_unref_locked(job);
        pthread_attr_destroy(&attr);
        pthread_mutex_unlock(&slots_lock);
        return false;
    }
    pthread_attr_destroy(&attr);
    while (!job->done && !slots_closed)
        pthread_cond_wait(&slots_cond, &slots_lock);
    bool ok = job->done && found && job->out &&
              equal_ct(job->out, strlen(job->out), found->hash, strlen(found->hash));
    job_unref_locked(job);
    pthread_mutex_unlock(&slots_lock);
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

/* The value of base64 character c, or -1. */
static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int bm_basic_auth_parse_header(const char *value, char **ret_user, char **ret_password)
{
    *ret_user = *ret_password = NULL;
    if (!value)
        return -ENOENT;
    while (*value == ' ' || *value == '\t')
        value++;
    if (strncasecmp(value, "basic", 5) != 0 || (value[5] != ' ' && value[5] != '\t'))
        return -EINVAL;
    const char *p = value + 5;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strcspn(p, " \t");
    for (const char *q = p + n; *q; q++)
        if (*q != ' ' && *q != '\t')
            return -EINVAL; /* one token68 only */
    size_t pad = 0;
    while (n > 0 && p[n - 1] == '=' && pad < 2)
        n--, pad++;
    if (n == 0 || (n + pad) % 4 != 0 || n % 4 == 1)
        return -EINVAL;
    _cleanup_free_ char *out = bm_malloc0(n / 4 * 3 + 3);
    size_t o = 0;
    unsigned acc = 0, bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_value((unsigned char)p[i]);
        if (v < 0)
            return -EINVAL;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    if (acc & ((1u << bits) - 1)) {
        explicit_bzero(out, o);
        return -EINVAL; /* non-zero padding bits: not the canonical encoding */
    }
    /* the decoded credentials must be what strings show: "secret\0junk" is not "secret" */
    const char *colon = memchr(out, ':', o);
    int r = 0;
    if (memchr(out, '\0', o) || !colon)
        r = -EINVAL;
    if (r == 0) {
        *ret_user = strndup(out, (size_t)(colon - out));
        *ret_password = strndup(colon + 1, o - (size_t)(colon - out) - 1);
        if (!*ret_user || !*ret_password) {
            free(*ret_user);
            free(*ret_password);
            *ret_user = *ret_password = NULL;
            r = -ENOMEM;
        }
    }
    explicit_bzero(out, o);
    return r;
}

void bm_basic_auth_shutdown(void)
{
    pthread_mutex_lock(&slots_lock);
    slots_closed = true;
    pthread_cond_broadcast(&slots_cond);
    pthread_mutex_unlock(&slots_lock);
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
