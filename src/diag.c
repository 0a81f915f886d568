#include "diag.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Whether x comes after y (line, column, order added). */
static bool after(const BmDiag *x, const BmDiag *y)
{
    if (x->line != y->line)
        return x->line > y->line;
    if (x->col != y->col)
        return x->col > y->col;
    return x->seq > y->seq;
}

void bm_diags_add(BmDiags *d, unsigned line, size_t col, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    BmDiag item = {
        .line = line,
        .col = col > UINT32_MAX ? UINT32_MAX : (unsigned)col,
        .seq = d->n + d->dropped,
    };
    if (d->n == BM_DIAGS_MAX) {
        d->dropped++;
        size_t last = 0;
        for (size_t i = 1; i < d->n; i++)
            if (after(&d->items[i], &d->items[last]))
                last = i;
        if (!after(&item, &d->items[last]))
            return;
        free(d->items[last].msg);
        item.msg = bm_strdup(msg);
        d->items[last] = item;
        return;
    }
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 8;
        d->items = bm_reallocarray(d->items, d->cap, sizeof(*d->items));
    }
    item.msg = bm_strdup(msg);
    d->items[d->n++] = item;
}

static int cmp_line(const BmDiag *x, const BmDiag *y)
{
    return x->line < y->line ? -1 : x->line > y->line;
}

static int cmp_seq(const BmDiag *x, const BmDiag *y)
{
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_by_line(const void *a, const void *b)
{
    int r = cmp_line(a, b);
    return r ? r : cmp_seq(a, b);
}

static int cmp_by_line_col(const void *a, const void *b)
{
    const BmDiag *x = a, *y = b;
    int r = cmp_line(x, y);
    if (!r)
        r = x->col < y->col ? -1 : x->col > y->col;
    return r ? r : cmp_seq(x, y);
}

/* Room for the "N more errors not shown" line. */
static size_t plen_more(const char *path)
{
    return strlen(path) + 64;
}

char *bm_diags_join(BmDiags *d, const char *path, bool by_col)
{
    qsort(d->items, d->n, sizeof(*d->items), by_col ? cmp_by_line_col : cmp_by_line);
    size_t total = 1 + plen_more(path), plen = strlen(path);
    for (size_t i = 0; i < d->n; i++)
        total += plen + strlen(d->items[i].msg) + 2 * 11 + 5;
    char *out = bm_malloc0(total), *o = out;
    for (size_t i = 0; i < d->n; i++)
        o += sprintf(o, "%s:%u:%u: %s\n", path, d->items[i].line, d->items[i].col, d->items[i].msg);
    if (d->dropped)
        sprintf(o, "%s: %zu more error%s not shown\n", path, d->dropped,
                d->dropped == 1 ? "" : "s");
    bm_diags_clear(d);
    return out;
}

void bm_diags_clear(BmDiags *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->items[i].msg);
    free(d->items);
    *d = (BmDiags){0};
}

const char *bm_quote(const char *s, size_t n, bool escape_backslash, char *buf)
{
    size_t take = n, o = 0;
    if (take > BM_QUOTE_MAX) {
        take = BM_QUOTE_MAX;
        while (take > 0 && ((unsigned char)s[take] & 0xc0) == 0x80)
            take--;
    }
    for (size_t i = 0; i < take; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f || (escape_backslash && c == '\\'))
            o += (size_t)sprintf(buf + o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    if (take < n) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}
