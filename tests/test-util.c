/* Text helpers for what is read and printed: UTF-8 validation, cutting names on a character
 * boundary, valid UTF-8 for JSON, escaping names for line output. */
#include <stdint.h>
#include <string.h>

#include "tap.h"
#include "util.h"

static void test_invalid(void)
{
    static const struct {
        const char *s;
        size_t want;
    } cases[] = {
        {"plain", SIZE_MAX},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x8e\x88", SIZE_MAX},
        {"a\xff", 1},
        {"\xc3", 0},              /* cut */
        {"ab\xe2\x82", 2},        /* cut */
        {"\xc0\xaf", 0},          /* overlong '/' */
        {"\xed\xa0\x80", 0},      /* surrogate */
        {"\xf4\x90\x80\x80", 0},  /* beyond U+10FFFF */
        {"x\x80", 1},             /* lone continuation */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        is_u64(bm_utf8_invalid(cases[i].s, strlen(cases[i].s)), cases[i].want,
               "bm_utf8_invalid case %zu", i);
}

static void test_cut(void)
{
    const char *s = "ab\xc3\xa9" "cd"; /* a b é c d */
    is_u64(bm_utf8_cut(s, 2), 2, "cut before é");
    is_u64(bm_utf8_cut(s, 3), 2, "cut inside é: before it");
    is_u64(bm_utf8_cut(s, 4), 4, "cut after é");
    is_u64(bm_utf8_cut(s, 99), 6, "shorter: all");
    char buf[4];
    bm_copy_name(buf, sizeof(buf), s);
    is_str(buf, "ab", "bm_copy_name into 4 bytes: 'ab', not half an é");
    bm_copy_name(buf, sizeof(buf), NULL);
    is_str(buf, "", "bm_copy_name of NULL");
}

static void test_sanitize_escape(void)
{
    char *t = bm_utf8_sanitize("ok \xc3\xa9 bad \xff\xfe end\xc3");
    is_str(t, "ok \xc3\xa9 bad \xef\xbf\xbd\xef\xbf\xbd end\xef\xbf\xbd", "sanitize: U+FFFD for bad bytes");
    free(t);
    t = bm_escape_name("web\n1\t\\ caf\xc3\xa9 \xff\x7f");
    is_str(t, "web\\x0a1\\x09\\x5c caf\xc3\xa9 \\xff\\x7f", "escape: control, backslash, bad bytes");
    free(t);
}

int main(void)
{
    test_invalid();
    test_cut();
    test_sanitize_escape();
    return tap_done();
}
