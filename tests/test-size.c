/* Sizes as virsh reads them, plus %, relative sizes, and every way to get one wrong. */
#include <errno.h>

#include "error.h"
#include "size.h"
#include "tap.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)
#define GiB (1024ull * MiB)

static const BmSizeContext ctx = {.max_bytes = 8 * GiB, .current_bytes = 2 * GiB};

static const struct {
    const char *in;
    uint64_t want;
} good[] = {
    {"1048576", 1 * GiB},        /* bare number: KiB, as virsh */
    {"512M", 512 * MiB},          {"512MiB", 512 * MiB},  {"512m", 512 * MiB},
    {"1G", GiB},                  {"1GiB", GiB},          {"1gib", GiB},
    {"1GB", 1000000000ull},       {"1gb", 1000000000ull}, {"2000000KB", 2000000000ull},
    {"4096b", 4096},              {"4096bytes", 4096},    {"4096B", 4096},
    {"1024K", MiB},               {"1024KiB", MiB},       {"1.5G", GiB + GiB / 2},
    {"0.5G", GiB / 2},            {"8G", 8 * GiB},        {"50%", 4 * GiB},
    {"100%", 8 * GiB},            {"12.5%", GiB},         {"+1G", 3 * GiB},
    {"-1G", GiB},                 {"+10%", 2 * GiB + (8 * GiB) / 10},
    {"-1048576K", GiB},            {"+0.5G", 2 * GiB + GiB / 2}, {"1024b", 1024},
};

static const struct {
    const char *in;
    int err;
    const char *reason;
} bad[] = {
    {"12X", -EINVAL, "unknown unit 'X'"},
    {"12MX", -EINVAL, "unknown unit 'MX'"},
    {"12 M", -EINVAL, "contains white space"},
    {"", -EINVAL, "empty size"},
    {"abc", -EINVAL, "not a number"},
    {"M", -EINVAL, "not a number"},
    {".", -EINVAL, "not a number"},
    {"--1G", -EINVAL, "sign not allowed here"},
    /* issue 23: "set test -1" took 1 KiB; a relative change says its unit */
    {"-1", -EINVAL, "a relative size needs a unit: '-1' would be 1 KiB (a bare number is KiB); write '-1K' for that, or '-1M', '-1G'"},
    {"+512", -EINVAL, "a relative size needs a unit: '+512' would be 512 KiB (a bare number is KiB); write '+512K' for that, or '+512M', '+512G'"},
    {"-1048576", -EINVAL, "a relative size needs a unit: '-1048576' would be 1048576 KiB (a bare number is KiB); write '-1048576K' for that, or '-1048576M', '-1048576G'"},
    {"+-1G", -EINVAL, "sign not allowed here"},
    {"0", -ERANGE, "must be greater than 0"},
    {"0G", -ERANGE, "must be greater than 0"},
    {"0%", -ERANGE, "must be greater than 0"},
    {"9G", -ERANGE, "exceeds the maximum of 8 GiB"},
    {"101%", -ERANGE, "exceeds the maximum of 8 GiB"},
    {"+7G", -ERANGE, "exceeds the maximum of 8 GiB"},
    {"-3G", -ERANGE, "would be negative (current size is 2 GiB)"},
    {"-2G", -ERANGE, "must be greater than 0"},
    {"1b", -ERANGE, "less than 1 KiB (balloon targets are whole KiB)"},
    {"1023b", -ERANGE, "less than 1 KiB (balloon targets are whole KiB)"},
    {"99999999999999999999", -ERANGE, "too large"},
    {"18014398509481984", -ERANGE, "too large"}, /* KiB * 1024 overflows 64 bits */
    {"20EiB", -ERANGE, "too large"},
    {"16E", -ERANGE, "too large"},
    {"1ZiB", -EINVAL, "unknown unit 'ZiB'"},
    {"1KiBB", -EINVAL, "unknown unit 'KiBB'"},
    {"5%%", -EINVAL, "unexpected '%' after '%'"},
    {"5%G", -EINVAL, "unexpected 'G' after '%'"},
};

static void test_good(void)
{
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        uint64_t v = 0;
        bm_error_reset();
        int r = bm_size_parse(good[i].in, &ctx, &v);
        ok(r == 0, "'%s' parses (%s)", good[i].in, r < 0 ? bm_error_detail(r) : "ok");
        is_u64(v, good[i].want, "'%s' is %" PRIu64 " bytes", good[i].in, good[i].want);
    }
}

static void test_bad(void)
{
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t v = 12345;
        bm_error_reset();
        int r = bm_size_parse(bad[i].in, &ctx, &v);
        ok(r == bad[i].err, "'%s' is refused with %d", bad[i].in, bad[i].err);
        is_str(bm_error_detail(r), bad[i].reason, "'%s' reason", bad[i].in);
        is_u64(v, 12345, "'%s' leaves the output alone", bad[i].in);
    }
}

/* without a context: no %, no sign, no range */
static void test_without_context(void)
{
    uint64_t v;
    ok(bm_size_parse("50%", NULL, &v) == -EINVAL, "percent needs a domain");
    is_str(bm_error_detail(-EINVAL), "a percentage is not allowed here", "percent reason");
    ok(bm_size_parse("+1G", NULL, &v) == -EINVAL, "relative needs a domain");
    ok(bm_size_parse("64T", NULL, &v) == 0 && v == 64ull << 40, "no upper bound without context");
    ok(bm_size_parse_plain("100", 1, &v) == 0 && v == 100, "plain size with byte scale");
    ok(bm_size_parse_plain("-1", 1, &v) == -EINVAL, "plain size refuses a sign");
}

static void test_format(void)
{
    static const struct {
        uint64_t bytes;
        const char *want;
    } fmt[] = {
        {0, "0 B"},           {1023, "1023 B"},         {1024, "1 KiB"},
        {1536, "1.5 KiB"},    {512 * MiB, "512 MiB"},   {GiB + GiB / 2, "1.5 GiB"},
        {3 * GiB, "3 GiB"},   {GiB - 1, "1024 MiB"},    {8ull << 40, "8 TiB"},
        {UINT64_MAX - 1, "16 EiB"},
    };
    for (size_t i = 0; i < sizeof(fmt) / sizeof(fmt[0]); i++) {
        char buf[32];
        is_str(bm_size_format(fmt[i].bytes, buf, sizeof(buf)), fmt[i].want, "format %" PRIu64,
               fmt[i].bytes);
    }
    /* in messages: exact, the KiB (or bytes) after a size that is rounded */
    static const struct {
        uint64_t bytes;
        const char *want;
    } exact[] = {
        {4 * GiB, "4 GiB"},
        {GiB + GiB / 2, "1.5 GiB"},
        {4 * GiB - 1024, "4 GiB (4194303 KiB)"},
        {4 * GiB - 100 * MiB, "3.9 GiB (4091904 KiB)"},
        {1023, "1023 B"},
        {1536 + 1, "1.5 KiB (1537 bytes)"},
        {0, "0 B"},
    };
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++) {
        char buf[BM_SIZE_EXACT_LEN];
        is_str(bm_size_format_exact(exact[i].bytes, buf, sizeof(buf)), exact[i].want,
               "format exact %" PRIu64, exact[i].bytes);
    }
}

int main(void)
{
    test_good();
    test_bad();
    test_without_context();
    test_format();
    return tap_done();
}
