#define _GNU_SOURCE
#include "table.h"

#include <stdarg.h>
#include <string.h>

struct BmTable {
    size_t n_cols;
    char **cells; /* header row first, row-major */
    size_t n_cells;
    char *align;
};

BmTable *bm_table_new(size_t n, const char *const *headers, const char *align)
{
    BmTable *t = bm_malloc0(sizeof(*t));
    t->n_cols = n;
    t->align = bm_strdup(align);
    for (size_t i = 0; i < n; i++)
        bm_table_cell(t, "%s", headers[i]);
    return t;
}

void bm_table_cell(BmTable *t, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    t->cells = bm_reallocarray(t->cells, t->n_cells + 1, sizeof(char *));
    t->cells[t->n_cells++] = s ? s : bm_strdup("");
}

void bm_table_print(const BmTable *t, FILE *f)
{
    _cleanup_free_ size_t *width = bm_malloc0(t->n_cols * sizeof(size_t));
    for (size_t i = 0; i < t->n_cells; i++) {
        size_t len = strlen(t->cells[i]);
        if (len > width[i % t->n_cols])
            width[i % t->n_cols] = len;
    }
    for (size_t i = 0; i < t->n_cells; i++) {
        size_t c = i % t->n_cols;
        bool last = c + 1 == t->n_cols || i + 1 == t->n_cells;
        bool right = c < strlen(t->align) && t->align[c] == 'r';
        if (right)
            fprintf(f, "%*s", (int)width[c], t->cells[i]);
        else if (last)
            fputs(t->cells[i], f);
        else
            fprintf(f, "%-*s", (int)width[c], t->cells[i]);
        fputs(last ? "\n" : "  ", f);
    }
}

void bm_table_free(BmTable *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_cells; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t->align);
    free(t);
}
