#include "domxml.h"

#include <errno.h>
#include <inttypes.h>
#include <libxml/parser.h>
#include <libxml/xmlsave.h>
#include <libxml/xpath.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "size.h"
#include "util.h"

DEFINE_CLEANUP(xmlDocPtr, xmlFreeDoc)
DEFINE_CLEANUP(xmlXPathContextPtr, xmlXPathFreeContext)
DEFINE_CLEANUP(xmlXPathObjectPtr, xmlXPathFreeObject)

static inline void xml_freep(xmlChar **p)
{
    if (*p)
        xmlFree(*p);
}

/* The first node matching expr, or NULL. */
static xmlNodePtr xpath_node(xmlXPathContextPtr ctx, const char *expr)
{
    _cleanup_(xmlXPathFreeObjectp) xmlXPathObjectPtr obj =
        xmlXPathEvalExpression((const xmlChar *)expr, ctx);
    if (!obj || !obj->nodesetval || obj->nodesetval->nodeNr < 1)
        return NULL;
    return obj->nodesetval->nodeTab[0];
}

static void copy_prop(xmlNodePtr node, const char *name, char *buf, size_t n)
{
    _cleanup_(xml_freep) xmlChar *v = node ? xmlGetProp(node, (const xmlChar *)name) : NULL;
    snprintf(buf, n, "%s", v ? (const char *)v : "");
}

static BmTristate tristate_prop(xmlNodePtr node, const char *name)
{
    _cleanup_(xml_freep) xmlChar *v = node ? xmlGetProp(node, (const xmlChar *)name) : NULL;
    if (!v)
        return BM_TRI_UNSET;
    return strcasecmp((const char *)v, "on") == 0 ? BM_TRI_ON : BM_TRI_OFF;
}

/* A libvirt scaled integer element: <x unit='KiB'>N</x> (default unit KiB). */
static uint64_t scaled_element(xmlNodePtr node)
{
    if (!node)
        return BM_ABSENT;
    _cleanup_(xml_freep) xmlChar *text = xmlNodeGetContent(node);
    _cleanup_(xml_freep) xmlChar *unit = xmlGetProp(node, (const xmlChar *)"unit");
    if (!text)
        return BM_ABSENT;
    char buf[128];
    snprintf(buf, sizeof(buf), "%s%s", (const char *)text, unit ? (const char *)unit : "");
    uint64_t bytes;
    if (bm_size_parse_plain(buf, 1024, &bytes) < 0)
        return BM_ABSENT;
    return bytes;
}

static void quiet_xml(void *ctx, const char *fmt, ...)
{
    (void)ctx;
    (void)fmt;
}

DEFINE_CLEANUP(xmlParserCtxtPtr, xmlFreeParserCtxt)

/* Parses xml into *ret_doc (caller frees), or returns -EINVAL when it is not a domain. With
 * strict_ns, also when a namespace prefix is undeclared: an edit that declares the namespace
 * would change what such elements mean. */
static int read_domain(const char *xml, bool strict_ns, xmlDocPtr *ret_doc)
{
    if (!xml)
        return bm_error(-EINVAL, "no XML");
    size_t len = strlen(xml);
    if (len > INT_MAX)
        return bm_error(-EINVAL, "domain XML is too large");

    _cleanup_(xmlFreeParserCtxtp) xmlParserCtxtPtr pctx = xmlNewParserCtxt();
    if (!pctx)
        return bm_error(-ENOMEM, "out of memory");
    _cleanup_(xmlFreeDocp) xmlDocPtr doc =
        xmlCtxtReadMemory(pctx, xml, (int)len, "domain.xml", NULL,
                          XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!doc)
        return bm_error(-EINVAL, "domain XML is not well-formed");
    if (strict_ns && !pctx->nsWellFormed)
        return bm_error(-EINVAL, "domain XML is not namespace-well-formed");
    xmlNodePtr root = xmlDocGetRootElement(doc);
    if (!root || strcmp((const char *)root->name, "domain") != 0)
        return bm_error(-EINVAL, "XML is not a domain definition");
    *ret_doc = TAKE_PTR(doc);
    return 0;
}

void bm_domxml_init(void)
{
    xmlInitParser();
    xmlSetGenericErrorFunc(NULL, quiet_xml);
}

/* The first element child of parent named name, or NULL (a plain walk: no XPath to compile). */
static xmlNodePtr child(xmlNodePtr parent, const char *name)
{
    for (xmlNodePtr c = parent ? parent->children : NULL; c; c = c->next)
        if (c->type == XML_ELEMENT_NODE && strcmp((const char *)c->name, name) == 0)
            return c;
    return NULL;
}

/* The balloon device as the editor's "/domain/devices/memballoon" finds it: the first
 * <memballoon> in document order under any <devices> of the <domain>, all in no namespace
 * (libvirt reads every <devices> element and allows one balloon). */
static xmlNodePtr memballoon(xmlNodePtr root)
{
    if (!root || root->ns)
        return NULL;
    for (xmlNodePtr d = root->children; d; d = d->next) {
        if (d->type != XML_ELEMENT_NODE || d->ns || strcmp((const char *)d->name, "devices") != 0)
            continue;
        for (xmlNodePtr c = d->children; c; c = c->next)
            if (c->type == XML_ELEMENT_NODE && !c->ns && strcmp((const char *)c->name, "memballoon") == 0)
                return c;
    }
    return NULL;
}

/* Whether attribute name (in no namespace) of node is value. */
static bool prop_is(xmlNodePtr node, const char *name, const char *value)
{
    _cleanup_(xml_freep) xmlChar *v = xmlGetNoNsProp(node, BAD_CAST name);
    return v && strcmp((const char *)v, value) == 0;
}

/* The settings under which an inflate returns nothing to the host. */
static void read_no_return(xmlNodePtr root, BmBalloonConfig *ret)
{
    xmlNodePtr mb = child(root, "memoryBacking");
    ret->memory_locked = child(mb, "locked") != NULL;
    ret->hugepages = child(mb, "hugepages") != NULL;
    for (xmlNodePtr d = root->children; d; d = d->next) {
        if (d->type != XML_ELEMENT_NODE || d->ns || strcmp((const char *)d->name, "devices") != 0)
            continue;
        for (xmlNodePtr c = d->children; c; c = c->next) {
            if (c->type != XML_ELEMENT_NODE || c->ns)
                continue;
            if (strcmp((const char *)c->name, "hostdev") == 0 && prop_is(c, "mode", "subsystem") &&
                (prop_is(c, "type", "pci") || prop_is(c, "type", "mdev")))
                ret->vfio_hostdev = true;
            else if (strcmp((const char *)c->name, "interface") == 0 && prop_is(c, "type", "hostdev"))
                ret->vfio_hostdev = true;
        }
    }
}

const char *bm_domxml_no_return_reason(const BmBalloonConfig *c)
{
    if (c->vfio_hostdev)
        return "VFIO passthrough (<hostdev>) pins its memory";
    if (c->memory_locked)
        return "its memory is locked (<memoryBacking><locked/>)";
    if (c->hugepages)
        return "hugepage-backed memory (<memoryBacking><hugepages>) goes back to the hugepage pool";
    return NULL;
}

static bool overrides_features(xmlNodePtr root, const char *alias);

/* A whole number attribute (decimal or 0x hex, as libvirt writes PCI addresses) of node, or
 * -1 when absent or not a number up to max. */
static long number_prop(xmlNodePtr node, const char *name, long max)
{
    _cleanup_(xml_freep) xmlChar *v = node ? xmlGetNoNsProp(node, BAD_CAST name) : NULL;
    if (!v || !v[0])
        return -1;
    char *end = NULL;
    errno = 0;
    unsigned long x = strtoul((const char *)v, &end, 0);
    if (errno || *end || x > (unsigned long)max || ((const char *)v)[0] == '-')
        return -1;
    return (long)x;
}

/* A whole number element (<node>0</node>) up to max, or -1. */
static int number_element(xmlNodePtr node, int max)
{
    _cleanup_(xml_freep) xmlChar *v = node ? xmlNodeGetContent(node) : NULL;
    if (!v)
        return -1;
    const char *p = (const char *)v;
    p += strspn(p, " \t\r\n");
    char *end = NULL;
    errno = 0;
    long x = strtol(p, &end, 10);
    if (end == p || errno || x < 0 || x > max || end[strspn(end, " \t\r\n")])
        return -1;
    return (int)x;
}

/* A device's PCI <address> as "DDDD:BB:SS.F" into buf, or "" when it has none. */
static void pci_address(xmlNodePtr dev, char *buf, size_t n)
{
    buf[0] = '\0';
    xmlNodePtr a = child(dev, "address");
    if (!a || !prop_is(a, "type", "pci"))
        return;
    long dom = number_prop(a, "domain", 0xffff), bus = number_prop(a, "bus", 0xff),
         slot = number_prop(a, "slot", 0x1f), fn = number_prop(a, "function", 7);
    if (dom >= 0 && bus >= 0 && slot >= 0 && fn >= 0)
        snprintf(buf, n, "%04lx:%02lx:%02lx.%lx", dom, bus, slot, fn);
}

/* The <memory> devices of every <devices>: the virtio-mem ones into ret, and the base
 * memory: <memory> less all their sizes (BM_ABSENT when one is unreadable or they sum to
 * more than <memory>). */
static void read_memory_devices(xmlNodePtr root, BmBalloonConfig *ret)
{
    uint64_t sizes = 0;
    bool sizes_known = true;
    for (xmlNodePtr d = root->children; d; d = d->next) {
        if (d->type != XML_ELEMENT_NODE || d->ns || strcmp((const char *)d->name, "devices") != 0)
            continue;
        for (xmlNodePtr c = d->children; c; c = c->next) {
            if (c->type != XML_ELEMENT_NODE || c->ns || strcmp((const char *)c->name, "memory") != 0)
                continue;
            xmlNodePtr target = child(c, "target");
            uint64_t size = scaled_element(child(target, "size"));
            if (!bm_present(size) || sizes > BM_COUNT_MAX - size)
                sizes_known = false;
            else
                sizes += size;
            if (!prop_is(c, "model", "virtio-mem"))
                continue;
            if (ret->n_virtio_mem == BM_VIRTIO_MEM_MAX) {
                ret->virtio_mem_more++;
                continue;
            }
            BmVirtioMem *m = &ret->virtio_mem[ret->n_virtio_mem++];
            m->size_bytes = size;
            m->block_bytes = scaled_element(child(target, "block"));
            m->requested_bytes = scaled_element(child(target, "requested"));
            m->current_bytes = scaled_element(child(target, "current"));
            m->node = number_element(child(target, "node"), 65535);
            copy_prop(child(c, "alias"), "name", m->alias, sizeof(m->alias));
            pci_address(c, m->address, sizeof(m->address));
        }
    }
    ret->base_memory_bytes = sizes_known && bm_present(ret->memory_bytes) &&
                                     ret->memory_bytes >= sizes
                                 ? ret->memory_bytes - sizes
                                 : BM_ABSENT;
}

const char *bm_domxml_virtio_mem_name(const BmBalloonConfig *c, size_t i, char *buf, size_t n)
{
    if (i < c->n_virtio_mem && c->virtio_mem[i].alias[0])
        snprintf(buf, n, "%s", c->virtio_mem[i].alias);
    else
        snprintf(buf, n, "virtiomem%zu", i);
    return buf;
}

int bm_domxml_parse_balloon(const char *xml, BmBalloonConfig *ret)
{
    *ret = (BmBalloonConfig){.autodeflate = BM_TRI_UNSET,
                             .free_page_reporting = BM_TRI_UNSET,
                             .min_guarantee_bytes = BM_ABSENT,
                             .memory_bytes = BM_ABSENT,
                             .current_memory_bytes = BM_ABSENT,
                             .base_memory_bytes = BM_ABSENT};
    _cleanup_(xmlFreeDocp) xmlDocPtr doc = NULL;
    int r = read_domain(xml, false, &doc);
    if (r < 0)
        return r;
    xmlNodePtr root = xmlDocGetRootElement(doc);
    ret->memory_bytes = scaled_element(child(root, "memory"));
    ret->current_memory_bytes = scaled_element(child(root, "currentMemory"));

    ret->min_guarantee_bytes = scaled_element(child(child(root, "memtune"), "min_guarantee"));
    read_no_return(root, ret);
    read_memory_devices(root, ret);

    xmlNodePtr mb = memballoon(root);
    if (!mb)
        return 0;
    copy_prop(mb, "model", ret->model, sizeof(ret->model));
    ret->present = ret->model[0] && strcmp(ret->model, "none") != 0;
    ret->autodeflate = tristate_prop(mb, "autodeflate");
    ret->free_page_reporting = tristate_prop(mb, "freePageReporting");
    copy_prop(child(mb, "alias"), "name", ret->alias, sizeof(ret->alias));

    ret->features_overridden = ret->present && overrides_features(root, ret->alias[0] ? ret->alias : "balloon0");

    char period[32];
    copy_prop(child(mb, "stats"), "period", period, sizeof(period));
    char *end = NULL;
    long v = period[0] ? strtol(period, &end, 10) : 0;
    ret->stats_period_s = (period[0] && (*end || v < 0 || v > 86400 * 365)) ? -1 : (int)v;
    return 0;
}

/* Editing: bm_domxml_edit_balloon. */

#define QEMU_NS "http://libvirt.org/schemas/domain/qemu/1.0"
#define INDENT_STEP "  " /* what libvirt writes */

DEFINE_CLEANUP(xmlBufferPtr, xmlBufferFree)

/* Whether node is the element name in namespace ns_href (NULL: in no namespace). */
static bool is_element(xmlNodePtr node, const char *ns_href, const char *name)
{
    if (!node || node->type != XML_ELEMENT_NODE || !xmlStrEqual(node->name, BAD_CAST name))
        return false;
    if (!ns_href)
        return !node->ns;
    return node->ns && xmlStrEqual(node->ns->href, BAD_CAST ns_href);
}

/* The first child element name of parent in namespace ns_href, or NULL. */
static xmlNodePtr child_element(xmlNodePtr parent, const char *ns_href, const char *name)
{
    for (xmlNodePtr n = parent->children; n; n = n->next)
        if (is_element(n, ns_href, name))
            return n;
    return NULL;
}

static bool is_blank_text(xmlNodePtr node)
{
    return node && node->type == XML_TEXT_NODE && xmlIsBlankNode(node);
}

/* When node starts a line of an indented document, copies that line's indentation to buf
 * and returns true; the root element counts as starting a line. */
static bool line_indent(xmlNodePtr node, char *buf, size_t n)
{
    buf[0] = '\0';
    if (!node->parent || node->parent->type != XML_ELEMENT_NODE)
        return true;
    if (!is_blank_text(node->prev) || !node->prev->content)
        return false;
    const char *nl = strrchr((const char *)node->prev->content, '\n');
    if (!nl)
        return false;
    snprintf(buf, n, "%s", nl + 1);
    return true;
}

static void add_text_before(xmlNodePtr node, const char *text)
{
    xmlNodePtr t = xmlNewDocText(node->doc, BAD_CAST text);
    if (t && !xmlAddPrevSibling(node, t))
        xmlFreeNode(t);
}

static void add_text_child(xmlNodePtr parent, const char *text)
{
    xmlNodePtr t = xmlNewDocText(parent->doc, BAD_CAST text);
    if (t && !xmlAddChild(parent, t))
        xmlFreeNode(t);
}

/* The document's indentation step: that of the root's first child element, else libvirt's
 * two spaces. */
static void indent_step(xmlDocPtr doc, char *buf, size_t n)
{
    xmlNodePtr root = xmlDocGetRootElement(doc);
    for (xmlNodePtr c = root ? root->children : NULL; c; c = c->next)
        if (c->type == XML_ELEMENT_NODE) {
            if (line_indent(c, buf, n) && buf[0])
                return;
            break;
        }
    snprintf(buf, n, "  ");
}

/* Appends a new element name (in namespace ns) as the last child of parent and returns it,
 * or NULL when out of memory. When parent's content is indented, the new element gets a line
 * of its own, indented like its element siblings or one step deeper than parent. */
static xmlNodePtr append_element(xmlNodePtr parent, xmlNsPtr ns, const char *name)
{
    xmlNodePtr node = xmlNewDocNode(parent->doc, ns, BAD_CAST name, NULL);
    if (!node)
        return NULL;

    char indent[256], step[64], child_indent[sizeof(indent) + sizeof(step)];
    xmlNodePtr last = parent->last;
    if (!line_indent(parent, indent, sizeof(indent)) || (last && !is_blank_text(last))) {
        /* Compact content: no whitespace of our own. */
        if (!xmlAddChild(parent, node)) {
            xmlFreeNode(node);
            return NULL;
        }
        return node;
    }

    indent_step(parent->doc, step, sizeof(step));
    snprintf(child_indent, sizeof(child_indent), "%s%s", indent, step);
    for (xmlNodePtr n = last; n; n = n->prev)
        if (n->type == XML_ELEMENT_NODE) {
            line_indent(n, child_indent, sizeof(child_indent));
            break;
        }

    char text[sizeof(child_indent) + 1];
    snprintf(text, sizeof(text), "\n%s", child_indent);
    if (last) {
        /* last is the whitespace before </parent>: the new line goes before it. */
        xmlAddPrevSibling(last, node);
        add_text_before(node, text);
    } else {
        add_text_child(parent, text);
        xmlAddChild(parent, node);
        snprintf(text, sizeof(text), "\n%s", indent);
        add_text_child(parent, text);
    }
    return node;
}

static int set_prop(xmlNodePtr node, const char *name, const char *value)
{
    if (!xmlSetProp(node, BAD_CAST name, BAD_CAST value))
        return bm_error(-ENOMEM, "out of memory");
    return 0;
}

/* Appends one line (a '\n' is added) to *changes. */
static void add_change(char **changes, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_change(char **changes, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    char *joined = bm_asprintf("%s%s\n", *changes, line);
    free(*changes);
    *changes = joined;
}

/* Sets an on/off attribute of <memballoon>. */
static int edit_onoff(xmlNodePtr mb, const char *name, BmTristate want, char **changes)
{
    if (want == BM_TRI_UNSET)
        return 0;
    const char *value = want == BM_TRI_ON ? "on" : "off";
    _cleanup_(xml_freep) xmlChar *old = xmlGetNoNsProp(mb, BAD_CAST name);
    if (old && strcmp((const char *)old, value) == 0)
        return 0;
    int r = set_prop(mb, name, value);
    if (r < 0)
        return r;
    char buf[64];
    add_change(changes, "memballoon %s: %s -> %s", name,
               old ? bm_printable((const char *)old, buf, sizeof(buf)) : "unset", value);
    return 0;
}

/* The root's prefix for the qemu namespace, declared there when absent; NULL when out of
 * memory. */
static xmlNsPtr qemu_ns(xmlNodePtr root)
{
    xmlNsPtr ns = xmlSearchNsByHref(root->doc, root, BAD_CAST QEMU_NS);
    if (ns)
        return ns;
    char prefix[16] = "qemu";
    for (int i = 1; i < 100 && xmlSearchNs(root->doc, root, BAD_CAST prefix); i++)
        snprintf(prefix, sizeof(prefix), "qemu%d", i);
    return xmlNewNs(root, BAD_CAST QEMU_NS, BAD_CAST prefix);
}

/* Describes a <qemu:property> for a change line: its value for type 'bool', "removed" for
 * type 'remove', else the value and type. */
static const char *describe_property(xmlNodePtr prop, char *buf, size_t n)
{
    _cleanup_(xml_freep) xmlChar *type = xmlGetNoNsProp(prop, BAD_CAST "type");
    _cleanup_(xml_freep) xmlChar *value = xmlGetNoNsProp(prop, BAD_CAST "value");
    char t[32], v[64];
    bm_printable(type ? (const char *)type : "", t, sizeof(t));
    bm_printable(value ? (const char *)value : "", v, sizeof(v));
    if (strcmp(t, "bool") == 0 && value)
        snprintf(buf, n, "%s", v);
    else if (strcmp(t, "remove") == 0)
        snprintf(buf, n, "removed");
    else
        snprintf(buf, n, "'%s' (type '%s')", v, t);
    return buf;
}

/* Whether a <qemu:override> of the device alias sets its frontend property sg or ioeventfd:
 * the domain an administrator customised for the patched balloon. */
static bool overrides_features(xmlNodePtr root, const char *alias)
{
    for (xmlNodePtr o = root->children; o; o = o->next) {
        if (!is_element(o, QEMU_NS, "override"))
            continue;
        for (xmlNodePtr d = o->children; d; d = d->next) {
            if (!is_element(d, QEMU_NS, "device") || !prop_is(d, "alias", alias))
                continue;
            for (xmlNodePtr f = d->children; f; f = f->next) {
                if (!is_element(f, QEMU_NS, "frontend"))
                    continue;
                for (xmlNodePtr p = f->children; p; p = p->next)
                    if (is_element(p, QEMU_NS, "property") &&
                        (prop_is(p, "name", "sg") || prop_is(p, "name", "ioeventfd")))
                        return true;
            }
        }
    }
    return false;
}

/* Sets the bool frontend property name of the device alias in <qemu:override>. libvirt
 * applies every <qemu:device> with the alias, in order, so every matching property is
 * updated; a new one goes into the first such device, created when there is none. */
static int edit_override(xmlNodePtr root, const char *alias, const char *name, BmTristate want,
                         char **changes)
{
    if (want == BM_TRI_UNSET)
        return 0;
    const char *value = want == BM_TRI_ON ? "true" : "false";
    xmlNodePtr override = NULL, device = NULL;
    bool found = false, differs = false;
    char old[128] = "unset";

    for (xmlNodePtr o = root->children; o; o = o->next) {
        if (!is_element(o, QEMU_NS, "override"))
            continue;
        if (!override)
            override = o;
        for (xmlNodePtr d = o->children; d; d = d->next) {
            if (!is_element(d, QEMU_NS, "device") || !prop_is(d, "alias", alias))
                continue;
            if (!device)
                device = d;
            for (xmlNodePtr f = d->children; f; f = f->next) {
                if (!is_element(f, QEMU_NS, "frontend"))
                    continue;
                for (xmlNodePtr p = f->children; p; p = p->next) {
                    if (!is_element(p, QEMU_NS, "property") || !prop_is(p, "name", name))
                        continue;
                    found = true;
                    if (prop_is(p, "type", "bool") && prop_is(p, "value", value))
                        continue;
                    if (!differs)
                        describe_property(p, old, sizeof(old));
                    differs = true;
                    int r = set_prop(p, "type", "bool");
                    if (r < 0 || (r = set_prop(p, "value", value)) < 0)
                        return r;
                }
            }
        }
    }

    if (!found) {
        xmlNsPtr ns = override ? override->ns : qemu_ns(root);
        if (!ns)
            return bm_error(-ENOMEM, "out of memory");
        if (!override && !(override = append_element(root, ns, "override")))
            return bm_error(-ENOMEM, "out of memory");
        if (!device) {
            if (!(device = append_element(override, ns, "device")))
                return bm_error(-ENOMEM, "out of memory");
            int r = set_prop(device, "alias", alias);
            if (r < 0)
                return r;
        }
        xmlNodePtr frontend = child_element(device, QEMU_NS, "frontend");
        if (!frontend && !(frontend = append_element(device, device->ns, "frontend")))
            return bm_error(-ENOMEM, "out of memory");
        xmlNodePtr prop = append_element(frontend, frontend->ns, "property");
        if (!prop)
            return bm_error(-ENOMEM, "out of memory");
        int r = set_prop(prop, "name", name);
        if (r < 0 || (r = set_prop(prop, "type", "bool")) < 0 ||
            (r = set_prop(prop, "value", value)) < 0)
            return r;
        differs = true;
    }

    if (differs) {
        char a[128];
        add_change(changes, "qemu:override %s property %s: %s -> %s",
                   bm_printable(alias, a, sizeof(a)), name, old, value);
    }
    return 0;
}

/* Serializes doc (with an XML declaration only if with_decl) into *ret (caller frees). */
static int write_doc(xmlDocPtr doc, bool with_decl, char **ret)
{
    _cleanup_(xmlBufferFreep) xmlBufferPtr buf = xmlBufferCreate();
    if (!buf)
        return bm_error(-ENOMEM, "out of memory");
    xmlSaveCtxtPtr save = xmlSaveToBuffer(buf, "UTF-8", with_decl ? 0 : XML_SAVE_NO_DECL);
    if (!save)
        return bm_error(-ENOMEM, "out of memory");
    long written = xmlSaveDoc(save, doc);
    if (xmlSaveClose(save) < 0 || written < 0 || !xmlBufferContent(buf))
        return bm_error(-ENOMEM, "cannot write the domain XML");
    *ret = bm_strdup((const char *)xmlBufferContent(buf));
    return 0;
}

static bool valid_tristate(BmTristate t)
{
    return t == BM_TRI_UNSET || t == BM_TRI_OFF || t == BM_TRI_ON;
}

int bm_domxml_edit_balloon(const char *xml, const BmBalloonEdit *edit, char **ret_xml,
                           char **ret_changes)
{
    *ret_xml = NULL;
    *ret_changes = NULL;
    if (!edit || !valid_tristate(edit->autodeflate) || !valid_tristate(edit->free_page_reporting) ||
        !valid_tristate(edit->sg) || !valid_tristate(edit->ioeventfd))
        return bm_error(-EINVAL, "invalid balloon edit");

    _cleanup_(xmlFreeDocp) xmlDocPtr doc = NULL;
    int r = read_domain(xml, true, &doc);
    if (r < 0)
        return r;
    xmlNodePtr root = xmlDocGetRootElement(doc);

    _cleanup_free_ char *changes = bm_strdup("");
    bool wanted = edit->autodeflate != BM_TRI_UNSET || edit->free_page_reporting != BM_TRI_UNSET ||
                  edit->sg != BM_TRI_UNSET || edit->ioeventfd != BM_TRI_UNSET;
    if (wanted) {
        _cleanup_(xmlXPathFreeContextp) xmlXPathContextPtr ctx = xmlXPathNewContext(doc);
        if (!ctx)
            return bm_error(-ENOMEM, "out of memory");
        xmlNodePtr mb = xpath_node(ctx, "/domain/devices/memballoon");
        if (!mb)
            return bm_error(-EINVAL, "domain has no <memballoon> device");
        _cleanup_(xml_freep) xmlChar *model = xmlGetNoNsProp(mb, BAD_CAST "model");
        if (!model || !model[0])
            return bm_error(-EINVAL, "<memballoon> has no model");
        if (strcmp((const char *)model, "none") == 0)
            return bm_error(-EINVAL, "memballoon model is 'none': the domain has no balloon");

        if ((r = edit_onoff(mb, "autodeflate", edit->autodeflate, &changes)) < 0 ||
            (r = edit_onoff(mb, "freePageReporting", edit->free_page_reporting, &changes)) < 0)
            return r;

        xmlNodePtr alias_node = child_element(mb, NULL, "alias");
        _cleanup_(xml_freep) xmlChar *alias =
            alias_node ? xmlGetNoNsProp(alias_node, BAD_CAST "name") : NULL;
        const char *device = alias && alias[0] ? (const char *)alias : "balloon0";
        if ((r = edit_override(root, device, "sg", edit->sg, &changes)) < 0 ||
            (r = edit_override(root, device, "ioeventfd", edit->ioeventfd, &changes)) < 0)
            return r;
    }

    if (!changes[0]) {
        *ret_xml = bm_strdup(xml);
    } else {
        const char *p = xml + strspn(xml, " \t\r\n");
        bool with_decl = strncmp(p, "<?xml", 5) == 0 && p[5] && strchr(" \t\r\n", p[5]);
        if ((r = write_doc(doc, with_decl, ret_xml)) < 0)
            return r;
    }
    *ret_changes = TAKE_PTR(changes);
    return 0;
}

int bm_domxml_emulator(const char *xml, char **ret_path)
{
    _cleanup_(xmlFreeDocp) xmlDocPtr doc = NULL;
    int r = read_domain(xml, false, &doc);
    if (r < 0)
        return r;
    _cleanup_(xmlXPathFreeContextp) xmlXPathContextPtr ctx = xmlXPathNewContext(doc);
    if (!ctx)
        return bm_error(-ENOMEM, "out of memory");
    xmlNodePtr node = xpath_node(ctx, "/domain/devices/emulator");
    _cleanup_(xml_freep) xmlChar *text = node ? xmlNodeGetContent(node) : NULL;
    if (!text || !*text)
        return bm_error(-ENOENT, "domain XML names no <emulator>");
    *ret_path = bm_strdup((const char *)text);
    return 0;
}

/* Virtio-mem device index of the domain root, or NULL. */
static xmlNodePtr virtio_mem_device(xmlNodePtr root, size_t index)
{
    for (xmlNodePtr d = root->children; d; d = d->next) {
        if (d->type != XML_ELEMENT_NODE || d->ns || strcmp((const char *)d->name, "devices") != 0)
            continue;
        for (xmlNodePtr c = d->children; c; c = c->next) {
            if (c->type != XML_ELEMENT_NODE || c->ns || strcmp((const char *)c->name, "memory") != 0 ||
                !prop_is(c, "model", "virtio-mem"))
                continue;
            if (index-- == 0)
                return c;
        }
    }
    return NULL;
}

int bm_domxml_virtio_mem_update(const char *xml, size_t index, uint64_t requested_bytes,
                                char **ret_xml)
{
    *ret_xml = NULL;
    if (requested_bytes % 1024 || !bm_present(requested_bytes))
        return bm_error(-EINVAL, "requested size %" PRIu64 " is not in whole KiB", requested_bytes);
    _cleanup_(xmlFreeDocp) xmlDocPtr doc = NULL;
    int r = read_domain(xml, false, &doc);
    if (r < 0)
        return r;
    xmlNodePtr dev = virtio_mem_device(xmlDocGetRootElement(doc), index);
    if (!dev)
        return index ? bm_error(-ENODEV, "the domain has no virtio-mem device %zu", index)
                     : bm_error(-ENODEV, "the domain has no virtio-mem device");
    xmlNodePtr target = child(dev, "target");
    if (!target)
        return bm_error(-EINVAL, "its virtio-mem device has no <target>");
    for (xmlNodePtr cur; (cur = child(target, "current"));) {
        /* the whitespace before it goes with it */
        if (is_blank_text(cur->prev)) {
            xmlNodePtr ws = cur->prev;
            xmlUnlinkNode(ws);
            xmlFreeNode(ws);
        }
        xmlUnlinkNode(cur);
        xmlFreeNode(cur);
    }
    xmlNodePtr req = child(target, "requested");
    if (!req && !(req = append_element(target, NULL, "requested")))
        return bm_error(-ENOMEM, "out of memory");
    char kib[32];
    snprintf(kib, sizeof(kib), "%" PRIu64, requested_bytes / 1024);
    xmlNodeSetContent(req, BAD_CAST kib);
    if ((r = set_prop(req, "unit", "KiB")) < 0)
        return r;
    _cleanup_(xmlBufferFreep) xmlBufferPtr buf = xmlBufferCreate();
    if (!buf || xmlNodeDump(buf, doc, dev, 0, 0) < 0 || !xmlBufferContent(buf))
        return bm_error(-ENOMEM, "cannot write the device XML");
    *ret_xml = bm_strdup((const char *)xmlBufferContent(buf));
    return 0;
}
