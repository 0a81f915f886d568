/* A minimal TAP producer for the unit tests (meson runs them with protocol 'tap'). */
#pragma once

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...)                                                                              \
    do {                                                                                           \
        int _c = !!(cond);                                                                         \
        printf("%sok %d - ", _c ? "" : "not ", ++tap_n);                                           \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        if (!_c) {                                                                                 \
            tap_failed++;                                                                          \
            printf("#   failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);                        \
        }                                                                                          \
    } while (0)

#define is_u64(got, want, ...)                                                                     \
    do {                                                                                           \
        uint64_t _g = (got), _w = (want);                                                          \
        ok(_g == _w, __VA_ARGS__);                                                                 \
        if (_g != _w)                                                                              \
            printf("#   got %" PRIu64 ", want %" PRIu64 "\n", _g, _w);                             \
    } while (0)

#define is_str(got, want, ...)                                                                     \
    do {                                                                                           \
        const char *_g = (got), *_w = (want);                                                      \
        int _same = (_g && _w) ? strcmp(_g, _w) == 0 : _g == _w;                                   \
        ok(_same, __VA_ARGS__);                                                                    \
        if (!_same)                                                                                \
            printf("#   got '%s', want '%s'\n", _g ? _g : "(null)", _w ? _w : "(null)");          \
    } while (0)

#define diag(...)                                                                                  \
    do {                                                                                           \
        printf("# ");                                                                              \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
    } while (0)

/* A check of how long something took: checked only when BM_TEST_TIMING=1 (the slow tier runs
 * the same test binary so, tests/meson.build); otherwise a skipped check, so that the unit
 * tier has no timing threshold. */
static inline int tap_timing(void)
{
    const char *e = getenv("BM_TEST_TIMING");
    return e && strcmp(e, "1") == 0;
}

#define timed_ok(cond, ...)                                                                        \
    do {                                                                                           \
        if (tap_timing()) {                                                                        \
            ok(cond, __VA_ARGS__);                                                                 \
        } else {                                                                                   \
            printf("ok %d # SKIP timing (slow tier, BM_TEST_TIMING=1): ", ++tap_n);                \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

static inline int tap_done(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}
