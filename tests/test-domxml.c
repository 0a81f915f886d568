/* Reading the balloon config out of domain XML, including the odd and the broken. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domxml.h"
#include "error.h"
#include "tap.h"
#include "util.h"

/* tests/data/domxml/NAME parsed; returns the parse result. */
static int parse_fixture(const char *name, BmBalloonConfig *c)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/tests/data/domxml/%s", SOURCE_ROOT, name);
    FILE *f = fopen(path, "r");
    if (!f) {
        ok(0, "cannot open %s", path);
        return -ENOENT;
    }
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return bm_domxml_parse_balloon(buf, c);
}

/* Domains whose inflates give the host nothing back: VFIO passthrough, locked memory,
 * hugepages. USB passthrough and shared memfd memory are not among them. */
static void test_no_return_settings(void)
{
    BmBalloonConfig c;
    ok(parse_fixture("no-return-vfio.xml", &c) == 0 && c.vfio_hostdev && !c.memory_locked &&
           !c.hugepages,
       "PCI <hostdev>: VFIO");
    is_str(bm_domxml_no_return_reason(&c), "VFIO passthrough (<hostdev>) pins its memory", "reason");
    ok(parse_fixture("no-return-vf-interface.xml", &c) == 0 && c.vfio_hostdev,
       "<interface type='hostdev'> (SR-IOV VF): VFIO");
    ok(parse_fixture("no-return-locked.xml", &c) == 0 && c.memory_locked && !c.vfio_hostdev,
       "<memoryBacking><locked/>: locked");
    is_str(bm_domxml_no_return_reason(&c), "its memory is locked (<memoryBacking><locked/>)",
           "reason");
    ok(parse_fixture("no-return-hugepages.xml", &c) == 0 && c.hugepages && !c.memory_locked,
       "<memoryBacking><hugepages>: hugepages");
    is_str(bm_domxml_no_return_reason(&c),
           "hugepage-backed memory (<memoryBacking><hugepages>) goes back to the hugepage pool",
           "reason");
    ok(parse_fixture("returns-usb-hostdev.xml", &c) == 0 && !c.vfio_hostdev && !c.memory_locked &&
           !c.hugepages && bm_domxml_no_return_reason(&c) == NULL,
       "USB <hostdev> and shared memfd memory: ballooning returns memory");
}

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

/* verify_features = auto probes only domains whose XML sets the balloon's sg/ioeventfd */
static void test_features_overridden(void)
{
    BmBalloonConfig c;
    ok(bm_domxml_parse_balloon("<domain><devices><memballoon model='virtio'/></devices></domain>",
                               &c) == 0 && !c.features_overridden,
       "stock balloon: no sg/ioeventfd override");
    ok(bm_domxml_parse_balloon("<domain xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>"
                               "<devices><memballoon model='virtio'><alias name='balloon0'/></memballoon>"
                               "</devices><qemu:override><qemu:device alias='balloon0'><qemu:frontend>"
                               "<qemu:property name='sg' type='bool' value='true'/></qemu:frontend>"
                               "</qemu:device></qemu:override></domain>", &c) == 0 &&
           c.features_overridden,
       "qemu:override of the balloon's sg: overridden");
    ok(bm_domxml_parse_balloon("<domain xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>"
                               "<devices><memballoon model='virtio'/></devices><qemu:override>"
                               "<qemu:device alias='balloon0'><qemu:frontend><qemu:property "
                               "name='ioeventfd' type='bool' value='false'/></qemu:frontend>"
                               "</qemu:device></qemu:override></domain>", &c) == 0 &&
           c.features_overridden,
       "ioeventfd on libvirt's default alias balloon0 (inactive XML): overridden");
    ok(bm_domxml_parse_balloon("<domain xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>"
                               "<devices><memballoon model='virtio'/></devices><qemu:override>"
                               "<qemu:device alias='net0'><qemu:frontend><qemu:property "
                               "name='sg' type='bool' value='true'/></qemu:frontend>"
                               "</qemu:device></qemu:override></domain>", &c) == 0 &&
           !c.features_overridden,
       "an override of another device is not the balloon's");
}

/* <memory model='virtio-mem'> devices as libvirt writes them: the live XML's <current>,
 * alias and address; the base memory is <memory> less every memory device's size */
static void test_virtio_mem(void)
{
    BmBalloonConfig c;
    char name[64];
    ok(parse_fixture("virtio-mem-live.xml", &c) == 0 && c.n_virtio_mem == 1 &&
           c.virtio_mem_more == 0,
       "live XML: one virtio-mem device");
    const BmVirtioMem *m = &c.virtio_mem[0];
    ok(m->size_bytes == 1024ull << 20, "size 1 GiB");
    ok(m->block_bytes == 2ull << 20, "block 2 MiB");
    ok(m->requested_bytes == 512ull << 20, "requested 512 MiB");
    ok(m->current_bytes == 508ull << 20, "current 508 MiB (the live XML's)");
    ok(m->node == 0, "node 0");
    is_str(m->alias, "virtiomem0", "alias");
    is_str(m->address, "0000:00:05.0", "PCI address");
    ok(c.base_memory_bytes == 256ull << 20, "base: <memory> 1280 MiB less the device's 1 GiB");
    ok(c.present && !bm_domxml_no_return_reason(&c), "the balloon beside it is read as before");

    ok(parse_fixture("virtio-mem-inactive.xml", &c) == 0 && c.n_virtio_mem == 2,
       "inactive XML: two virtio-mem devices (the DIMM is not one)");
    ok(c.base_memory_bytes == 2ull << 30, "base: 7 GiB less the DIMM's 1 and the devices' 2 + 2");
    ok(!bm_present(c.virtio_mem[0].current_bytes), "no <current> in the inactive XML: absent");
    ok(c.virtio_mem[0].requested_bytes == 1ull << 30 && c.virtio_mem[1].requested_bytes == 0,
       "requested 1 GiB and 0");
    ok(c.virtio_mem[1].block_bytes == 4ull << 20 && c.virtio_mem[1].node == 1, "block 4 MiB, node 1");
    ok(!c.virtio_mem[0].alias[0] && !c.virtio_mem[0].address[0], "no alias, no address");
    is_str(bm_domxml_virtio_mem_name(&c, 1, name, sizeof(name)), "virtiomem1",
           "an inactive device is named by libvirt's alias for its place");
    ok(c.hugepages && !c.present, "hugepages, no balloon");

    ok(bm_domxml_parse_balloon("<domain><memory unit='MiB'>512</memory><devices><memory "
                               "model='virtio-mem'><target><size unit='MiB'>1024</size>"
                               "<node>x</node></target></memory></devices></domain>", &c) == 0 &&
           c.n_virtio_mem == 1 && !bm_present(c.base_memory_bytes) && c.virtio_mem[0].node == -1 &&
           !bm_present(c.virtio_mem[0].block_bytes),
       "devices beyond <memory>: no base; a bad node -1, no block: absent");

    char xml[4096];
    int n = snprintf(xml, sizeof(xml), "<domain><memory>%d</memory><devices>", 10 * 1024);
    for (int i = 0; i < 10; i++)
        n += snprintf(xml + n, sizeof(xml) - (size_t)n, "<memory model='virtio-mem'><target><size>"
                      "1024</size><block>1024</block><requested>0</requested></target></memory>");
    snprintf(xml + n, sizeof(xml) - (size_t)n, "</devices></domain>");
    ok(bm_domxml_parse_balloon(xml, &c) == 0 && c.n_virtio_mem == BM_VIRTIO_MEM_MAX &&
           c.virtio_mem_more == 2 && c.base_memory_bytes == 0,
       "ten devices: eight read, two counted, all in the base's sum");
}

/* the device XML that asks a new requested size: the device as the domain has it, <current>
 * left out */
static void test_virtio_mem_update(void)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/tests/data/domxml/virtio-mem-live.xml", SOURCE_ROOT);
    FILE *f = fopen(path, "r");
    static char buf[16384];
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    char *out = NULL;
    ok(bm_domxml_virtio_mem_update(buf, 0, 256ull << 20, &out) == 0, "update XML made");
    is_str(out, "<memory model=\"virtio-mem\">\n"
                "      <target>\n"
                "        <size unit=\"KiB\">1048576</size>\n"
                "        <node>0</node>\n"
                "        <block unit=\"KiB\">2048</block>\n"
                "        <requested unit=\"KiB\">262144</requested>\n"
                "      </target>\n"
                "      <alias name=\"virtiomem0\"/>\n"
                "      <address type=\"pci\" domain=\"0x0000\" bus=\"0x00\" slot=\"0x05\" "
                "function=\"0x0\"/>\n"
                "    </memory>",
           "the device with requested 256 MiB, no <current>");
    free(out);
    out = NULL;
    ok(bm_domxml_virtio_mem_update(buf, 0, 0, &out) == 0 && strstr(out, ">0</requested>"),
       "0 is a size");
    free(out);
    out = NULL;
    bm_error_reset();
    ok(bm_domxml_virtio_mem_update(buf, 1, 256ull << 20, &out) == -ENODEV && !out,
       "a device it does not have: -ENODEV");
    is_str(bm_error_detail(-ENODEV), "the domain has no virtio-mem device 1", "named");
    ok(bm_domxml_virtio_mem_update(buf, 0, 1000, &out) == -EINVAL && !out,
       "a size not in whole KiB refused");
    ok(bm_domxml_virtio_mem_update("<domain><devices><memory model='virtio-mem'><target><size>"
                                   "1024</size></target></memory></devices></domain>", 0,
                                   1ull << 20, &out) == 0 &&
           strstr(out, "<requested unit=\"KiB\">1024</requested>"),
       "a device without <requested> gets one");
    free(out);
}

static void test_bad_xml_refused(void)
{
    BmBalloonConfig c;
    bm_error_reset();
    ok(bm_domxml_parse_balloon("<domain><devices>", &c) == -EINVAL, "truncated XML refused");
    is_str(bm_error_detail(-EINVAL), "domain XML is not well-formed", "with a reason");
    bm_error_reset();
    ok(bm_domxml_parse_balloon("<network/>", &c) == -EINVAL, "not a domain refused");
    is_str(bm_error_detail(-EINVAL), "XML is not a domain definition", "with a reason");
    ok(bm_domxml_parse_balloon("", &c) == -EINVAL, "empty refused");
    ok(bm_domxml_parse_balloon(NULL, &c) == -EINVAL, "NULL refused");
}

int main(void)
{
    test_balloon_settings();
    test_no_return_settings();
    test_which_memballoon();
    test_features_overridden();
    test_virtio_mem();
    test_virtio_mem_update();
    test_bad_xml_refused();
    return tap_done();
}
