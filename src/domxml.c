#include "domxml.h"

#include <errno.h>
#include <inttypes.h>
#include <libxml/parser.h>
#include <libxml/xpath.h>
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

void bm_domxml_init(void)
{
    xmlInitParser();
    xmlSetGenericErrorFunc(NULL, quiet_xml);
}

int bm_domxml_parse_balloon(const char *xml, BmBalloonConfig *ret)
{
    *ret = (BmBalloonConfig){.autodeflate = BM_TRI_UNSET,
                             .free_page_reporting = BM_TRI_UNSET,
                             .min_guarantee_bytes = BM_ABSENT};
    if (!xml)
        return bm_error(-EINVAL, "no XML");

    _cleanup_(xmlFreeDocp) xmlDocPtr doc =
        xmlReadMemory(xml, (int)strlen(xml), "domain.xml", NULL,
                      XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!doc)
        return bm_error(-EINVAL, "domain XML is not well-formed");
    xmlNodePtr root = xmlDocGetRootElement(doc);
    if (!root || strcmp((const char *)root->name, "domain") != 0)
        return bm_error(-EINVAL, "XML is not a domain definition");

    _cleanup_(xmlXPathFreeContextp) xmlXPathContextPtr ctx = xmlXPathNewContext(doc);
    if (!ctx)
        return bm_error(-ENOMEM, "out of memory");

    ret->min_guarantee_bytes = scaled_element(xpath_node(ctx, "/domain/memtune/min_guarantee"));

    xmlNodePtr mb = xpath_node(ctx, "/domain/devices/memballoon");
    if (!mb)
        return 0;
    copy_prop(mb, "model", ret->model, sizeof(ret->model));
    ret->present = ret->model[0] && strcmp(ret->model, "none") != 0;
    ret->autodeflate = tristate_prop(mb, "autodeflate");
    ret->free_page_reporting = tristate_prop(mb, "freePageReporting");
    copy_prop(xpath_node(ctx, "/domain/devices/memballoon/alias"), "name", ret->alias,
              sizeof(ret->alias));

    char period[32];
    copy_prop(xpath_node(ctx, "/domain/devices/memballoon/stats"), "period", period,
              sizeof(period));
    char *end = NULL;
    long v = period[0] ? strtol(period, &end, 10) : 0;
    ret->stats_period_s = (period[0] && (*end || v < 0 || v > 86400 * 365)) ? -1 : (int)v;
    return 0;
}
