/* Fuzzes size parsing (src/size.h): bm_size_parse with and without a context, and
 * bm_size_parse_plain, checking what their contracts promise about the result. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>

#include "fuzz.h"
#include "size.h"

#define KiB 1024ull
#define GiB (KiB * KiB * KiB)

static const BmSizeContext contexts[] = {
    {.max_bytes = 8 * GiB, .current_bytes = 2 * GiB},       /* as tests/test-size.c */
    {.max_bytes = 64 * GiB, .current_bytes = 64 * GiB},     /* a big guest at its maximum */
    {.max_bytes = 1ull << 50, .current_bytes = 1ull << 49}, /* 1 PiB */
    {.max_bytes = UINT64_MAX, .current_bytes = UINT64_MAX / 2},
    {.max_bytes = 4096, .current_bytes = 1},
};

#define UNTOUCHED 0x5a5a5a5a5a5a5a5aull

static void check_error(int r, uint64_t v, const char *s, const char *what)
{
    fuzz_assert(r == 0 || r == -EINVAL || r == -ERANGE, "%s('%s') returned %d", what, s, r);
    if (r < 0)
        fuzz_assert(v == UNTOUCHED, "%s('%s') failed but wrote %" PRIu64, what, s, v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    char buf[32];

    /* plain: no sign, no percent, no range */
    uint64_t plain = UNTOUCHED, plain_b = UNTOUCHED;
    int rp = bm_size_parse_plain(s, 1024, &plain);
    check_error(rp, plain, s, "bm_size_parse_plain");
    int rb = bm_size_parse_plain(s, 1, &plain_b);
    check_error(rb, plain_b, s, "bm_size_parse_plain");
    if (rp == 0) {
        bm_size_format(plain, buf, sizeof(buf));
        fuzz_assert(!strchr(s, '%') && s[0] != '+' && s[0] != '-', "plain '%s' accepted", s);
    }

    /* without a context: the plain value, refused when 0 */
    uint64_t v = UNTOUCHED;
    int r = bm_size_parse(s, NULL, &v);
    check_error(r, v, s, "bm_size_parse(NULL)");
    if (r == 0)
        fuzz_assert(rp == 0 && v == plain && v > 0, "'%s': %" PRIu64 " vs plain %" PRIu64, s, v,
                    plain);
    else if (rp == 0 && plain > 0)
        fuzz_assert(0, "'%s': plain %" PRIu64 " but refused without a context", s, plain);

    for (size_t i = 0; i < sizeof(contexts) / sizeof(contexts[0]); i++) {
        const BmSizeContext *ctx = &contexts[i];
        v = UNTOUCHED;
        r = bm_size_parse(s, ctx, &v);
        check_error(r, v, s, "bm_size_parse(ctx)");
        if (r < 0)
            continue;
        fuzz_assert(v >= 1024 && v <= ctx->max_bytes, "'%s' of max %" PRIu64 " is %" PRIu64, s,
                    ctx->max_bytes, v);
        bm_size_format(v, buf, sizeof(buf));
        if (s[0] == '+')
            fuzz_assert(v >= ctx->current_bytes, "'%s' from %" PRIu64 " is %" PRIu64, s,
                        ctx->current_bytes, v);
        else if (s[0] == '-')
            fuzz_assert(v <= ctx->current_bytes, "'%s' from %" PRIu64 " is %" PRIu64, s,
                        ctx->current_bytes, v);
        else if (s[0] && s[strlen(s) - 1] == '%') {
            /* N% of the maximum, to the precision the parser keeps (nine decimals) */
            long double pct = strtold(s, NULL);
            long double want = (long double)ctx->max_bytes * pct / 100.0L;
            long double slack = (long double)ctx->max_bytes * 1e-11L + 2.0L;
            fuzz_assert(fabsl((long double)v - want) <= slack,
                        "'%s' of max %" PRIu64 " is %" PRIu64 ", want about %.0Lf", s,
                        ctx->max_bytes, v, want);
        } else {
            fuzz_assert(rp == 0 && v == plain, "'%s' is %" PRIu64 " with a context, plain %" PRIu64,
                        s, v, plain);
        }
    }
    free(s);
    return 0;
}
