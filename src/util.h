/* Small shared helpers: scoped cleanup, ownership transfer, time, optional values. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* A statistic the source did not report. Shown as "-" in tables and null in JSON. */
#define BM_ABSENT UINT64_MAX

#define BM_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline bool bm_present(uint64_t v)
{
    return v != BM_ABSENT;
}

/* The largest count kept (2^63 - 1): counters saturate there instead of wrapping, so a saved
 * count is always one the state file reads back (json-c also saturates larger numbers). */
#define BM_COUNT_MAX ((uint64_t)INT64_MAX)

/* A value reported by a guest, QEMU or libvirt (v in the source's unit, scale to ours: 1024 for
 * KiB, 1 for a count or seconds): v * scale, or BM_ABSENT when that is beyond BM_COUNT_MAX.
 * Everything such a source reports is untrusted; bounded where it enters, whatever is kept
 * of it is a value the state file reads back. */
static inline uint64_t bm_reported(uint64_t v, uint64_t scale)
{
    uint64_t r;
    return __builtin_mul_overflow(v, scale, &r) || r > BM_COUNT_MAX ? BM_ABSENT : r;
}

/* |a - b| of two sizes, without wrapping. */
static inline uint64_t bm_distance(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

/* *c += n, saturating at BM_COUNT_MAX. */
static inline void bm_count_add(uint64_t *c, uint64_t n)
{
    *c = (*c > BM_COUNT_MAX || n > BM_COUNT_MAX - *c) ? BM_COUNT_MAX : *c + n;
}

/* Scoped cleanup, after systemd's macros. */
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(bm_freep)

static inline void bm_freep(void *p)
{
    free(*(void **)p);
}

/* A file descriptor closed at the end of its scope unless negative. */
#define _cleanup_close_ _cleanup_(bm_closep)

static inline void bm_closep(int *fd)
{
    if (*fd >= 0)
        close(*fd);
}

/* Defines name(type *p) that calls func(*p) when *p is not NULL. */
#define DEFINE_CLEANUP(type, func)                                                                 \
    static inline void func##p(type *p)                                                            \
    {                                                                                              \
        if (*p)                                                                                    \
            func(*p);                                                                              \
    }

/* Returns the pointer and clears the variable, so scoped cleanup does not free it. */
#define TAKE_PTR(p)                                                                                \
    ({                                                                                             \
        __typeof__(p) _p = (p);                                                                    \
        (p) = NULL;                                                                                \
        _p;                                                                                        \
    })

/* Monotonic time in nanoseconds: for durations. */
static inline uint64_t bm_now_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wall-clock time in nanoseconds since the epoch: for timestamps others compare with. */
static inline uint64_t bm_now_real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleeps for ms milliseconds (restarting after signals). */
void bm_sleep_ms(unsigned ms);

/* Allocation that aborts on out-of-memory: the agent has no sane way to continue. */
void *bm_malloc0(size_t size);
void *bm_reallocarray(void *p, size_t n, size_t size);
char *bm_strdup(const char *s);
char *bm_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Copies s into buf (size n) with control and non-ASCII bytes as \xNN, for messages about
 * user-supplied names; when it does not fit, it is cut and ends in "...". Returns buf. */
const char *bm_printable(const char *s, char *buf, size_t n);

/* Optimal string alignment distance between a (na bytes) and b, for "did you mean" hints;
 * SIZE_MAX when it surely exceeds 2 or a string is 32 bytes or longer. */
size_t bm_edit_distance(const char *a, size_t na, const char *b);

/* The offset of the first byte of s (n bytes) that does not start a valid UTF-8 character
 * (overlong forms, surrogates and code points beyond U+10FFFF are invalid), or SIZE_MAX when
 * all of s is valid UTF-8. A NUL byte is valid here: check for it separately. */
size_t bm_utf8_invalid(const char *s, size_t n);

/* A copy of s (NULL: "") with each byte that does not start a valid UTF-8 character replaced
 * by U+FFFD: for JSON output, which must be valid UTF-8. Caller frees. */
char *bm_utf8_sanitize(const char *s);

/* A copy of s (NULL: "") for a line of output: control bytes, '\\' and bytes that are not
 * valid UTF-8 as \\xNN; valid UTF-8 characters kept (so `list` still prints "caf\u00e9").
 * Caller frees. */
char *bm_escape_name(const char *s);

/* bm_escape_name() for a value inside quotes (log records' domain='...'): also the quote
 * characters ' and " as \\x27 and \\x22, so a name never ends the value it is in. Caller
 * frees. */
char *bm_escape_quoted(const char *s);

/* Copies src into dst (size bytes) cut on a UTF-8 character boundary (bm_utf8_cut()). */
void bm_copy_name(char *dst, size_t size, const char *src);

/* How many bytes of s to keep to cut it to at most n bytes without splitting a UTF-8
 * character: n when s is longer and byte n starts a character, less when byte n is inside one
 * (strlen(s) when that is below n). */
size_t bm_utf8_cut(const char *s, size_t n);
