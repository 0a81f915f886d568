#define _GNU_SOURCE
#include "table.h"

#include <errno.h>
#include <libsmartcols/libsmartcols.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>

#include "error.h"

struct BmTable {
    size_t n_cols;
    char **cells; /* header row first, row-major */
    size_t n_cells;
    char *align;
    bool raw;
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

void bm_table_set_raw(BmTable *t, bool raw)
{
    t->raw = raw;
}

DEFINE_CLEANUP(struct libscols_table *, scols_unref_table)

void bm_table_print_columns(const BmTable *t, FILE *f, const size_t *cols, size_t n, bool headings)
{
    _cleanup_(scols_unref_tablep) struct libscols_table *tb = scols_new_table();
    if (!tb)
        return;
    scols_table_set_stream(tb, f);
    scols_table_enable_noheadings(tb, !headings);
    if (t->raw)
        scols_table_enable_raw(tb, 1); /* one space between fields, blanks in them as \x20 */
    else
        scols_table_set_column_separator(tb, "  ");
    size_t n_align = strlen(t->align);
    for (size_t k = 0; k < n; k++) {
        char a = cols[k] < n_align ? t->align[cols[k]] : 'l';
        int flags = a == 'r' ? SCOLS_FL_RIGHT : a == 't' ? SCOLS_FL_TRUNC : a == 'w' ? SCOLS_FL_WRAP : 0;
        /* without headings the names take no width (as before: the widths fit what is shown) */
        if (!scols_table_new_column(tb, headings ? t->cells[cols[k]] : "", 0, flags))
            return;
    }
    size_t n_rows = t->n_cells / t->n_cols;
    for (size_t row = 1; row < n_rows; row++) {
        struct libscols_line *ln = scols_table_new_line(tb, NULL);
        for (size_t k = 0; ln && k < n; k++)
            scols_line_set_data(ln, k, t->cells[row * t->n_cols + cols[k]]);
    }
    scols_print_table(tb);
}

void bm_table_print(const BmTable *t, FILE *f)
{
    _cleanup_free_ size_t *cols = bm_malloc0((t->n_cols + 1) * sizeof(size_t));
    for (size_t c = 0; c < t->n_cols; c++)
        cols[c] = c;
    bm_table_print_columns(t, f, cols, t->n_cols, true);
}

int bm_table_parse_columns(const BmTable *t, const char *spec, size_t **ret_cols, size_t *ret_n)
{
    _cleanup_free_ char *copy = bm_strdup(spec);
    _cleanup_free_ size_t *cols = bm_malloc0((strlen(spec) / 2 + 2) * sizeof(size_t));
    size_t n = 0;
    char *save = NULL;
    if (!*spec || spec[0] == ',' || spec[strlen(spec) - 1] == ',' || strstr(spec, ",,"))
        return bm_error(-EINVAL, "expected column names separated by commas");
    for (char *name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        size_t c = 0;
        while (c < t->n_cols && strcasecmp(t->cells[c], name) != 0)
            c++;
        if (c == t->n_cols) {
            char shown[64], all[512] = "";
            for (size_t k = 0; k < t->n_cols; k++)
                snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s%s", k ? "," : "",
                         t->cells[k]);
            return bm_error(-EINVAL, "unknown column '%s' (columns: %s)",
                            bm_printable(name, shown, sizeof(shown)), all);
        }
        cols[n++] = c;
    }
    *ret_cols = TAKE_PTR(cols);
    *ret_n = n;
    return 0;
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
