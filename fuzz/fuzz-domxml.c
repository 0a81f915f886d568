/* Fuzzes the domain XML code (src/domxml.h). The first input byte chooses the edit (two bits
 * per setting: unset, off, on, or an invalid value), the rest is the XML, given to
 * bm_domxml_parse_balloon, bm_domxml_emulator and bm_domxml_edit_balloon. An edit that
 * succeeds must give a domain that parses, needs no second edit, and whose parsed settings
 * are those the edit made (reader and editor find the same <memballoon>). */
#include <errno.h>

#include <libxml/parser.h>

#include "domxml.h"
#include "error.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    bm_domxml_init();
    return 0;
}

static BmTristate tri(unsigned bits)
{
    static const BmTristate map[4] = {BM_TRI_UNSET, BM_TRI_OFF, BM_TRI_ON, (BmTristate)7};
    return map[bits & 3];
}

static bool valid(BmTristate t)
{
    return t == BM_TRI_UNSET || t == BM_TRI_OFF || t == BM_TRI_ON;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    BmBalloonEdit edit = {tri(data[0]), tri(data[0] >> 2), tri(data[0] >> 4), tri(data[0] >> 6)};
    bool edit_ok = valid(edit.autodeflate) && valid(edit.free_page_reporting) && valid(edit.sg) &&
                   valid(edit.ioeventfd);
    char *xml = fuzz_cstr(data + 1, size - 1);

    BmBalloonConfig cfg;
    int parsed = bm_domxml_parse_balloon(xml, &cfg);
    fuzz_assert(parsed == 0 || parsed == -EINVAL || parsed == -ENOMEM, "parse returned %d", parsed);
    if (parsed == 0) {
        fuzz_assert(memchr(cfg.model, '\0', sizeof(cfg.model)) &&
                        memchr(cfg.alias, '\0', sizeof(cfg.alias)),
                    "model/alias not terminated");
        fuzz_assert(cfg.stats_period_s >= -1, "stats period %d", cfg.stats_period_s);
        fuzz_assert(!cfg.present || (cfg.model[0] && strcmp(cfg.model, "none") != 0),
                    "present with model '%s'", cfg.model);
    }

    char *emulator = NULL;
    int r = bm_domxml_emulator(xml, &emulator);
    fuzz_assert(r == 0 || r == -ENOENT || r == -EINVAL || r == -ENOMEM, "emulator returned %d", r);
    if (r == 0)
        fuzz_assert(emulator && emulator[0], "empty emulator");
    if (parsed == 0)
        fuzz_assert(r != -EINVAL, "a domain for parse, not for emulator");
    free(emulator);

    char *out = NULL, *changes = NULL;
    r = bm_domxml_edit_balloon(xml, &edit, &out, &changes);
    if (!edit_ok)
        fuzz_assert(r == -EINVAL, "invalid edit accepted (%d)", r);
    if (r < 0) {
        fuzz_assert(r == -EINVAL || r == -ENOMEM, "edit returned %d", r);
        fuzz_assert(!out && !changes, "failed edit returned text");
    } else {
        fuzz_assert(out && changes, "edit returned no text");
        fuzz_assert(parsed == 0, "edited what does not parse as a domain");
        if (!changes[0]) {
            fuzz_assert(strcmp(out, xml) == 0, "no change but different XML");
        } else {
            fuzz_assert(changes[strlen(changes) - 1] == '\n', "changes not newline-terminated");
            BmBalloonConfig after;
            r = bm_domxml_parse_balloon(out, &after);
            fuzz_assert(r == 0, "edited XML does not parse: %s\n%s", bm_error_detail(r), out);
            /* what the edit set is what the parser reads back */
            if (edit.autodeflate != BM_TRI_UNSET)
                fuzz_assert(after.autodeflate == edit.autodeflate, "autodeflate %d, set %d\n%s",
                            after.autodeflate, edit.autodeflate, out);
            if (edit.free_page_reporting != BM_TRI_UNSET)
                fuzz_assert(after.free_page_reporting == edit.free_page_reporting,
                            "freePageReporting %d, set %d\n%s", after.free_page_reporting,
                            edit.free_page_reporting, out);
            /* a second edit has nothing left to do */
            char *out2 = NULL, *changes2 = NULL;
            r = bm_domxml_edit_balloon(out, &edit, &out2, &changes2);
            fuzz_assert(r == 0, "edited XML refused: %s\n%s", bm_error_detail(r), out);
            fuzz_assert(changes2[0] == '\0', "second edit changes:\n%s\nof\n%s", changes2, out);
            free(out2);
            free(changes2);
        }
    }
    free(out);
    free(changes);
    free(xml);
    return 0;
}
