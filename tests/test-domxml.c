/* Reading the balloon config out of domain XML, including the odd and the broken. */
#include <errno.h>
#include <string.h>

#include "domxml.h"
#include "error.h"
#include "tap.h"
#include "util.h"

/* the memballoon's settings, min_guarantee, and what is absent */
static void test_balloon_settings(void)
{
    BmBalloonConfig c;
    ok(bm_domxml_parse_balloon("<domain><devices><memballoon model='virtio' autodeflate='on' "
                               "freePageReporting='off'><alias name='balloon0'/>"
                               "<stats period='10'/></memballoon></devices></domain>",
                               &c) == 0,
       "full memballoon parses");
    ok(c.present, "present");
    is_str(c.model, "virtio", "model");
    is_str(c.alias, "balloon0", "alias");
    ok(c.autodeflate == BM_TRI_ON, "autodeflate on");
    ok(c.free_page_reporting == BM_TRI_OFF, "freePageReporting off");
    ok(c.stats_period_s == 10, "stats period 10");
    ok(!bm_present(c.min_guarantee_bytes), "no min_guarantee");

    ok(bm_domxml_parse_balloon("<domain><memtune><min_guarantee unit='MiB'>512</min_guarantee>"
                               "</memtune><devices><memballoon model='virtio'/></devices></domain>",
                               &c) == 0,
       "min_guarantee with unit");
    ok(c.min_guarantee_bytes == 512ull << 20, "min_guarantee 512 MiB");
    ok(c.stats_period_s == 0 && c.autodeflate == BM_TRI_UNSET, "defaults: no stats, unset");

    ok(bm_domxml_parse_balloon("<domain><memtune><min_guarantee>1024</min_guarantee></memtune>"
                               "</domain>", &c) == 0 && c.min_guarantee_bytes == 1024ull << 10,
       "min_guarantee without unit is KiB");
    ok(!c.present, "no memballoon element: no balloon");

    ok(bm_domxml_parse_balloon("<domain><devices><memballoon model='none'/></devices></domain>",
                               &c) == 0 && !c.present && strcmp(c.model, "none") == 0,
       "model none: no balloon");

    ok(bm_domxml_parse_balloon("<domain><devices><memballoon model='virtio'><stats period='x'/>"
                               "</memballoon></devices></domain>", &c) == 0 &&
           c.stats_period_s == -1,
       "unreadable stats period is -1, not 0");
}

/* the balloon the editor edits (first /domain/devices/memballoon): libvirt reads every
 * <devices>, and elements in another namespace are not libvirt's */
static void test_which_memballoon(void)
{
    BmBalloonConfig c;
    ok(bm_domxml_parse_balloon("<domain><devices><disk/></devices><devices>"
                               "<memballoon model='virtio' autodeflate='on'/></devices></domain>",
                               &c) == 0 && c.present && c.autodeflate == BM_TRI_ON,
       "memballoon in a second <devices> is found");
    ok(bm_domxml_parse_balloon("<domain xmlns:x='urn:x'><devices><x:memballoon model='virtio'/>"
                               "<memballoon model='virtio' freePageReporting='on'/></devices></domain>",
                               &c) == 0 && c.free_page_reporting == BM_TRI_ON,
       "memballoon in another namespace is not libvirt's");
}

static void test_bad_xml_refused(void)
{
    BmBalloonConfig c;
    bm_error_clear();
    ok(bm_domxml_parse_balloon("<domain><devices>", &c) == -EINVAL, "truncated XML refused");
    is_str(bm_error_detail(-EINVAL), "domain XML is not well-formed", "with a reason");
    bm_error_clear();
    ok(bm_domxml_parse_balloon("<network/>", &c) == -EINVAL, "not a domain refused");
    is_str(bm_error_detail(-EINVAL), "XML is not a domain definition", "with a reason");
    ok(bm_domxml_parse_balloon("", &c) == -EINVAL, "empty refused");
    ok(bm_domxml_parse_balloon(NULL, &c) == -EINVAL, "NULL refused");
}

int main(void)
{
    test_balloon_settings();
    test_which_memballoon();
    test_bad_xml_refused();
    return tap_done();
}
