/* The configure verb's edit of a domain's persistent XML, on libvirt-style definitions under
 * tests/data/domxml/: NAME.in.xml edited gives NAME.out.xml (compared canonically, so the
 * fixtures keep libvirt's quoting) and the exact change lines; refusals give their reason. */
#include <errno.h>
#include <libxml/c14n.h>
#include <libxml/parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domxml.h"
#include "error.h"
#include "tap.h"
#include "util.h"

#define U BM_TRI_UNSET
#define ON BM_TRI_ON
#define OFF BM_TRI_OFF

typedef struct {
    const char *name; /* tests/data/domxml/NAME.in.xml -> NAME.out.xml */
    BmBalloonEdit edit;
    const char *changes;
} EditCase;

static const EditCase edit_cases[] = {
    {"autodeflate", {ON, U, U, U}, "memballoon autodeflate: unset -> on\n"},
    {"sg-ioeventfd-new-ns",
     {U, ON, ON, OFF},
     "memballoon freePageReporting: off -> on\n"
     "qemu:override balloon0 property sg: unset -> true\n"
     "qemu:override balloon0 property ioeventfd: unset -> false\n"},
    {"sg-other-override", {U, U, ON, U}, "qemu:override balloon0 property sg: unset -> true\n"},
    {"sg-update",
     {U, U, OFF, ON},
     "qemu:override balloon0 property sg: true -> false\n"
     "qemu:override balloon0 property ioeventfd: removed -> true\n"},
    {"sg-duplicate-devices", {U, U, ON, U}, "qemu:override balloon0 property sg: false -> true\n"},
    {"user-alias",
     {OFF, U, ON, U},
     "memballoon autodeflate: unset -> off\n"
     "qemu:override ua-balloon property sg: unset -> true\n"},
    {"ns-prefix", {U, U, U, OFF}, "qemu:override balloon0 property ioeventfd: unset -> false\n"},
    {"indent4", {U, U, ON, U}, "qemu:override balloon0 property sg: unset -> true\n"},
    {"preserved",
     {ON, ON, ON, U},
     "memballoon autodeflate: unset -> on\n"
     "qemu:override balloon0 property sg: unset -> true\n"},
    {"unchanged", {ON, OFF, ON, U}, ""},
    {"model-none", {U, U, U, U}, ""},
};

typedef struct {
    const char *name; /* tests/data/domxml/NAME.in.xml */
    BmBalloonEdit edit;
    const char *reason;
} RefusedCase;

static const RefusedCase refused_cases[] = {
    {"model-none", {ON, U, U, U}, "memballoon model is 'none': the domain has no balloon"},
    {"model-none", {U, U, ON, U}, "memballoon model is 'none': the domain has no balloon"},
    {"no-memballoon", {U, ON, U, U}, "domain has no <memballoon> device"},
    {"no-memballoon", {U, U, U, OFF}, "domain has no <memballoon> device"},
    {"malformed", {ON, U, U, U}, "domain XML is not well-formed"},
    {"malformed", {U, U, U, U}, "domain XML is not well-formed"},
};

static char *read_fixture(const char *name, const char *suffix)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/data/domxml/%s%s", SOURCE_ROOT, name, suffix);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0, n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        buf = bm_reallocarray(buf, len + n + 1, 1);
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    return buf ? (buf[len] = '\0', buf) : bm_strdup("");
}

DEFINE_CLEANUP(xmlDocPtr, xmlFreeDoc)

/* Canonical XML (C14N 1.0 with comments) of xml, or NULL when it does not parse. */
static char *canonical(const char *xml)
{
    _cleanup_(xmlFreeDocp) xmlDocPtr doc =
        xml ? xmlReadMemory(xml, (int)strlen(xml), "c14n.xml", NULL,
                            XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING)
            : NULL;
    xmlChar *out = NULL;
    if (!doc || xmlC14NDocDumpMemory(doc, NULL, XML_C14N_1_0, NULL, 1, &out) < 0)
        return NULL;
    char *s = bm_strdup((const char *)out);
    xmlFree(out);
    return s;
}

static void diag_lines(const char *label, const char *text)
{
    printf("#   %s:\n", label);
    for (const char *p = text; p && *p;) {
        size_t n = strcspn(p, "\n");
        printf("#     %.*s\n", (int)n, p);
        p += n + (p[n] == '\n');
    }
}

static void check_edit(const EditCase *c)
{
    _cleanup_free_ char *in = read_fixture(c->name, ".in.xml");
    _cleanup_free_ char *want = read_fixture(c->name, ".out.xml");
    ok(in && want, "%s: fixtures readable", c->name);
    if (!in || !want)
        return;

    _cleanup_free_ char *xml = NULL, *changes = NULL;
    bm_error_reset();
    int r = bm_domxml_edit_balloon(in, &c->edit, &xml, &changes);
    ok(r == 0, "%s: edited", c->name);
    if (r < 0) {
        printf("#   %s\n", bm_error_detail(r));
        return;
    }
    is_str(changes, c->changes, "%s: change lines", c->name);

    _cleanup_free_ char *got_c14n = canonical(xml), *want_c14n = canonical(want);
    bool same = got_c14n && want_c14n && strcmp(got_c14n, want_c14n) == 0;
    ok(same, "%s: output is %s.out.xml", c->name, c->name);
    if (!same)
        diag_lines("got", xml);
    if (!c->changes[0])
        is_str(xml, in, "%s: nothing changed, output is the input", c->name);

    /* The reader sees the new settings and nothing else moved. */
    BmBalloonConfig before, after;
    ok(bm_domxml_parse_balloon(in, &before) == 0 && bm_domxml_parse_balloon(xml, &after) == 0,
       "%s: output parses as a domain", c->name);
    BmTristate want_ad = c->edit.autodeflate != U ? c->edit.autodeflate : before.autodeflate;
    BmTristate want_fpr =
        c->edit.free_page_reporting != U ? c->edit.free_page_reporting : before.free_page_reporting;
    ok(after.autodeflate == want_ad && after.free_page_reporting == want_fpr,
       "%s: autodeflate %d, freePageReporting %d", c->name, after.autodeflate,
       after.free_page_reporting);
    ok(after.present == before.present && strcmp(after.model, before.model) == 0 &&
           strcmp(after.alias, before.alias) == 0 &&
           after.stats_period_s == before.stats_period_s &&
           after.min_guarantee_bytes == before.min_guarantee_bytes,
       "%s: rest of the balloon config unchanged", c->name);

    /* Applying the same edit again changes nothing: no duplicates, stable values. */
    _cleanup_free_ char *again = NULL, *again_changes = NULL;
    ok(bm_domxml_edit_balloon(xml, &c->edit, &again, &again_changes) == 0 &&
           strcmp(again_changes, "") == 0 && strcmp(again, xml) == 0,
       "%s: second edit is a no-op", c->name);
}

static void check_refused(const RefusedCase *c)
{
    _cleanup_free_ char *in = read_fixture(c->name, ".in.xml");
    char *xml = (char *)"unset", *changes = (char *)"unset";
    bm_error_reset();
    int r = in ? bm_domxml_edit_balloon(in, &c->edit, &xml, &changes) : -ENOENT;
    ok(r == -EINVAL && !xml && !changes, "%s: refused", c->name);
    is_str(bm_error_detail(r), c->reason, "%s: with the reason", c->name);
}

/* Edits an inline document; returns the output (caller frees) or NULL, and the change lines
 * in *ret_changes. */
static char *edit_inline(const char *xml, BmBalloonEdit edit, char **ret_changes)
{
    char *out = NULL;
    *ret_changes = NULL;
    if (bm_domxml_edit_balloon(xml, &edit, &out, ret_changes) < 0)
        return NULL;
    return out;
}

/* Exact serialization: compact input gets no whitespace, no XML declaration appears. */
static void test_compact_stays_compact(void)
{
    _cleanup_free_ char *changes = NULL;
    _cleanup_free_ char *compact =
        edit_inline("<domain type='kvm'><devices><memballoon model='virtio'/></devices></domain>",
                    (BmBalloonEdit){ON, U, ON, U}, &changes);
    is_str(compact,
           "<domain xmlns:qemu=\"http://libvirt.org/schemas/domain/qemu/1.0\" type=\"kvm\">"
           "<devices><memballoon model=\"virtio\" autodeflate=\"on\"/></devices>"
           "<qemu:override><qemu:device alias=\"balloon0\"><qemu:frontend>"
           "<qemu:property name=\"sg\" type=\"bool\" value=\"true\"/>"
           "</qemu:frontend></qemu:device></qemu:override></domain>\n",
           "compact XML stays compact");
}

/* An XML declaration is kept; non-ASCII text stays UTF-8, not character references. */
static void test_declaration_and_utf8_kept(void)
{
    _cleanup_free_ char *changes = NULL;
    _cleanup_free_ char *decl = edit_inline(
        "<?xml version='1.0' encoding='UTF-8'?>\n<domain><description>Grüße</description>"
        "<devices><memballoon model='virtio'/></devices></domain>\n",
        (BmBalloonEdit){U, OFF, U, U}, &changes);
    ok(decl && strncmp(decl, "<?xml", 5) == 0, "XML declaration kept");
    ok(decl && strstr(decl, "<description>Grüße</description>"), "UTF-8 text kept as is");
}

/* The qemu namespace declared on the override only, and a 'qemu' prefix taken by another
 * namespace. */
static void test_qemu_namespace_prefixes(void)
{
    _cleanup_free_ char *changes = NULL;
    _cleanup_free_ char *local =
        edit_inline("<domain><devices><memballoon model='virtio'/></devices>"
                    "<o:override xmlns:o='http://libvirt.org/schemas/domain/qemu/1.0'/></domain>",
                    (BmBalloonEdit){U, U, ON, U}, &changes);
    ok(local && strstr(local, "<o:override xmlns:o=\"http://libvirt.org/schemas/domain/qemu/1.0\">"
                              "<o:device alias=\"balloon0\"><o:frontend><o:property name=\"sg\""),
       "override declaring the namespace itself is reused");
    ok(local && !strstr(local, "xmlns:qemu"), "and no second declaration");
    free(changes);
    _cleanup_free_ char *taken = edit_inline(
        "<domain xmlns:qemu='urn:not-libvirt'><devices><memballoon model='virtio'/></devices>"
        "</domain>",
        (BmBalloonEdit){U, U, ON, U}, &changes);
    ok(taken && strstr(taken, "xmlns:qemu1=\"http://libvirt.org/schemas/domain/qemu/1.0\"") &&
           strstr(taken, "<qemu1:override>"),
       "prefix 'qemu' bound elsewhere: another prefix");
}

/* A memballoon attribute with an odd value is replaced and shown. */
static void test_odd_values_replaced(void)
{
    _cleanup_free_ char *changes = NULL;
    _cleanup_free_ char *odd = edit_inline(
        "<domain><devices><memballoon model='virtio' autodeflate='yes'/></devices></domain>",
        (BmBalloonEdit){ON, U, U, U}, &changes);
    is_str(changes, "memballoon autodeflate: yes -> on\n", "odd old value shown");
    free(changes);
    _cleanup_free_ char *str = edit_inline(
        "<domain xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'><devices>"
        "<memballoon model='virtio'/></devices><qemu:override><qemu:device alias='balloon0'>"
        "<qemu:frontend><qemu:property name='sg' type='string' value='on'/></qemu:frontend>"
        "</qemu:device></qemu:override></domain>",
        (BmBalloonEdit){U, U, ON, U}, &changes);
    is_str(changes, "qemu:override balloon0 property sg: 'on' (type 'string') -> true\n",
           "non-bool property becomes bool");
    ok(str && strstr(str, "<qemu:property name=\"sg\" type=\"bool\" value=\"true\"/>"),
       "with type and value replaced");
}

static void test_bad_input_refused(void)
{
    char *xml = NULL, *changes = NULL;
    BmBalloonEdit sg = {U, U, ON, U};
    bm_error_reset();
    ok(bm_domxml_edit_balloon("<network/>", &sg, &xml, &changes) == -EINVAL && !xml && !changes,
       "not a domain refused");
    is_str(bm_error_detail(-EINVAL), "XML is not a domain definition", "with a reason");
    ok(bm_domxml_edit_balloon("", &sg, &xml, &changes) == -EINVAL, "empty refused");
    ok(bm_domxml_edit_balloon(NULL, &sg, &xml, &changes) == -EINVAL, "NULL XML refused");
    ok(bm_domxml_edit_balloon("<domain/>", NULL, &xml, &changes) == -EINVAL, "NULL edit refused");
    BmBalloonEdit bad = {U, U, (BmTristate)7, U};
    ok(bm_domxml_edit_balloon("<domain/>", &bad, &xml, &changes) == -EINVAL && !xml,
       "out-of-range setting refused");
    ok(bm_domxml_edit_balloon("<domain><devices><memballoon/></devices></domain>", &sg, &xml,
                              &changes) == -EINVAL,
       "memballoon without model refused");
    is_str(bm_error_detail(-EINVAL), "<memballoon> has no model", "with a reason");
}

/* An undeclared qemu: prefix: declaring the namespace would give that element a meaning it did
 * not have, so the edit is refused; the reader still accepts the document. */
static void test_undeclared_prefix_refused(void)
{
    char *xml = NULL, *changes = NULL;
    BmBalloonEdit sg = {U, U, ON, U};
    const char *unbound = "<domain><devices><memballoon model='virtio'/></devices>"
                          "<qemu:override/></domain>";
    bm_error_reset();
    ok(bm_domxml_edit_balloon(unbound, &sg, &xml, &changes) == -EINVAL && !xml && !changes,
       "undeclared namespace prefix refused");
    is_str(bm_error_detail(-EINVAL), "domain XML is not namespace-well-formed", "with a reason");
    BmBalloonConfig c;
    ok(bm_domxml_parse_balloon(unbound, &c) == 0 && c.present, "parse_balloon unchanged there");
}

int main(void)
{
    bm_domxml_init();
    for (size_t i = 0; i < BM_ARRAY_SIZE(edit_cases); i++)
        check_edit(&edit_cases[i]);
    for (size_t i = 0; i < BM_ARRAY_SIZE(refused_cases); i++)
        check_refused(&refused_cases[i]);
    test_compact_stays_compact();
    test_declaration_and_utf8_kept();
    test_qemu_namespace_prefixes();
    test_odd_values_replaced();
    test_bad_input_refused();
    test_undeclared_prefix_refused();
    return tap_done();
}
