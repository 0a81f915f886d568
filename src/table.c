#define _GNU_SOURCE
#include "table.h"

#include <errno.h>
#include <libsmartcols/libsmartcols.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <wchar.h>
#include <wctype.h>

#include "error.h"

struct BmTable {
    size_t n_cols;
    char **cells; /* header row first, row-major */
    size_t n_cells;
    char *align;
    bool raw;
    bool *kept;        /* per column: named with -o (never gives way) */
    size_t *give_way;  /* the columns that give way on a narrow terminal, first to go first */
    size_t n_give_way;
    int width;         /* -1: the terminal's (or none); else as if on a terminal this wide */
};

BmTable *bm_table_new(size_t n, const char *const *headers, const char *align)
{
    BmTable *t = bm_malloc0(sizeof(*t));
    t->n_cols = n;
    t->align = bm_strdup(align);
    t->kept = bm_malloc0((n + 1) * sizeof(bool));
    t->give_way = bm_malloc0((n + 1) * sizeof(size_t));
    t->width = -1;
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

/* The index of the column named name (case-insensitive), or n_cols. */
static size_t column_index(const BmTable *t, const char *name, size_t len)
{
    size_t c = 0;
    while (c < t->n_cols && !(strlen(t->cells[c]) == len && strncasecmp(t->cells[c], name, len) == 0))
        c++;
    return c;
}

void bm_table_set_give_way(BmTable *t, const char *order)
{
    t->n_give_way = 0;
    for (const char *p = order; *p;) {
        size_t len = strcspn(p, ",");
        size_t c = column_index(t, p, len);
        if (c < t->n_cols && t->n_give_way < t->n_cols)
            t->give_way[t->n_give_way++] = c;
        p += len + (p[len] == ',');
    }
}

void bm_table_set_width(BmTable *t, int width)
{
    t->width = width;
}

int bm_table_terminal_width(int fd)
{
    if (!isatty(fd))
        return -1;
    struct winsize w;
    if (ioctl(fd, TIOCGWINSZ, &w) == 0 && w.ws_col > 0)
        return w.ws_col;
    /* as util-linux: $COLUMNS where the terminal does not say, else 80 */
    const char *env = getenv("COLUMNS");
    char *end = NULL;
    long c = env ? strtol(env, &end, 10) : 0;
    return env && *env && !*end && c > 0 && c < 100000 ? (int)c : 80;
}

size_t bm_table_text_width(const char *s, size_t n)
{
    size_t w = 0;
    mbstate_t st = {0};
    for (size_t i = 0; i < n && s[i];) {
        wchar_t wc;
        size_t k = mbrtowc(&wc, s + i, n - i, &st);
        if (k == (size_t)-1 || k == (size_t)-2 || k == 0) {
            /* as libsmartcols shows it: \xNN */
            memset(&st, 0, sizeof(st));
            w += 4;
            i++;
            continue;
        }
        int cw = iswprint((wint_t)wc) ? wcwidth(wc) : -1;
        w += cw >= 0 ? (size_t)cw : 4 * k;
        i += k;
    }
    return w;
}

/* Whether the word at p (up to a blank or the end) is a size's unit ("GiB", "MiB;"): a line
 * never starts with one, so "6.4 GiB" stays together. */
static bool unit_word(const char *p)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    size_t len = strcspn(p, " ");
    while (len && strchr(",.;:)]", p[len - 1]))
        len--;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strlen(units[i]) == len && strncmp(p, units[i], len) == 0)
            return true;
    return false;
}

/* The length of the word at p: up to a blank that no unit follows, outside a quoted '...'
 * that the word starts with (a quoted command or name is one word; the quote must end before
 * a blank, a punctuation mark or the end: "guests'" opens nothing). */
static size_t word_len(const char *p)
{
    bool quoted = p[0] == '\'';
    size_t len = quoted;
    for (; p[len]; len++) {
        if (quoted && p[len] == '\'' && (!p[len + 1] || strchr(" ,.;:)]", p[len + 1])))
            quoted = false;
        else if (p[len] == ' ' && !quoted && !unit_word(p + len + 1))
            break;
    }
    return len;
}

/* The width of the widest word of s. */
static size_t longest_word(const char *s)
{
    size_t most = 0;
    while (*s) {
        size_t len = word_len(s);
        size_t w = bm_table_text_width(s, len);
        most = w > most ? w : most;
        s += len;
        s += strspn(s, " ");
    }
    return most;
}

/* libsmartcols' custom wrap: a cell is cut at blanks into lines that fit the column's width.
 * The column is never narrower than a cell's longest word (wrap_chunksize), so every line
 * has a blank to end at. */
static size_t wrap_chunksize(const struct libscols_column *cl, const char *data, void *userdata)
{
    (void)cl;
    size_t want = *(size_t *)userdata, w = bm_table_text_width(data, strlen(data));
    size_t word = longest_word(data);
    return w <= want ? w : word > want ? word : want;
}

static char *wrap_nextchunk(const struct libscols_column *cl, char *data, void *userdata)
{
    (void)userdata;
    size_t width = scols_column_get_width(cl);
    if (!data || bm_table_text_width(data, strlen(data)) <= width)
        return NULL;
    char *blank = NULL;
    for (char *p = data + word_len(data); *p; p += 1 + word_len(p + 1)) {
        if (blank && bm_table_text_width(data, (size_t)(p - data)) > width)
            break;
        blank = p; /* the first even when the word is wider: the line is too */
        if (bm_table_text_width(data, (size_t)(p - data)) > width)
            break;
    }
    if (!blank)
        return NULL;
    *blank = '\0';
    return blank + 1;
}

DEFINE_CLEANUP(struct libscols_table *, scols_unref_table)

/* The widest wrap column may get no narrower than this before other columns give way. */
#define WRAP_WANT 30

/* On a terminal width wide: which of cols[0..n) are shown (shown[k]) and how wide each wrap
 * column is (wrap_width[k]): the optional columns give way in their order until the table
 * fits, the wrap columns take what is left (at least their longest word). Names and the
 * other columns are never cut. */
static void fit(const BmTable *t, const size_t *cols, size_t n, bool headings, size_t width,
                bool *shown, size_t *wrap_width)
{
    size_t n_rows = t->n_cells / t->n_cols;
    size_t *natural = bm_malloc0((n + 1) * sizeof(size_t)), *least = bm_malloc0((n + 1) * sizeof(size_t));
    size_t n_align = strlen(t->align);
    for (size_t k = 0; k < n; k++) {
        shown[k] = true;
        size_t c = cols[k], word = 0;
        natural[k] = headings ? bm_table_text_width(t->cells[c], SIZE_MAX) : 0;
        for (size_t row = 1; row < n_rows; row++) {
            const char *cell = t->cells[row * t->n_cols + c];
            size_t w = bm_table_text_width(cell, SIZE_MAX), lw = longest_word(cell);
            natural[k] = w > natural[k] ? w : natural[k];
            word = lw > word ? lw : word;
        }
        bool wraps = c < n_align && t->align[c] == 'w';
        size_t want = word > WRAP_WANT ? word : WRAP_WANT;
        least[k] = wraps && natural[k] > want ? want : natural[k];
        if (wraps && headings && least[k] < bm_table_text_width(t->cells[c], SIZE_MAX))
            least[k] = bm_table_text_width(t->cells[c], SIZE_MAX);
    }
    for (size_t g = 0;; g++) {
        size_t total = 0, n_shown = 0;
        for (size_t k = 0; k < n; k++)
            if (shown[k]) {
                total += least[k];
                n_shown++;
            }
        total += n_shown ? 2 * (n_shown - 1) : 0;
        if (total <= width || g >= t->n_give_way)
            break;
        /* the next column to give way, where it is shown and not named with -o */
        for (size_t k = 0; k < n; k++)
            if (cols[k] == t->give_way[g] && !t->kept[cols[k]])
                shown[k] = false;
    }
    size_t rest = width;
    for (size_t k = 0, first = 1; k < n; k++)
        if (shown[k]) {
            bool wraps = cols[k] < n_align && t->align[cols[k]] == 'w';
            size_t used = (wraps ? 0 : natural[k]) + (first ? 0 : 2);
            rest = rest > used ? rest - used : 0;
            first = 0;
        }
    for (size_t k = 0; k < n; k++)
        wrap_width[k] = rest > least[k] ? rest : least[k];
    free(natural);
    free(least);
}

void bm_table_print_columns(const BmTable *t, FILE *f, const size_t *cols, size_t n, bool headings)
{
    _cleanup_(scols_unref_tablep) struct libscols_table *tb = scols_new_table();
    if (!tb)
        return;
    scols_table_set_stream(tb, f);
    scols_table_enable_noheadings(tb, !headings);
    int term = t->raw ? -1 : t->width >= 0 ? t->width : bm_table_terminal_width(fileno(f));
    scols_table_set_termforce(tb, term >= 0 ? SCOLS_TERMFORCE_ALWAYS : SCOLS_TERMFORCE_NEVER);
    if (term >= 0)
        scols_table_set_termwidth(tb, (size_t)term);
    if (t->raw)
        scols_table_enable_raw(tb, 1); /* one space between fields, blanks in them as \x20 */
    else
        scols_table_set_column_separator(tb, "  ");
    _cleanup_free_ bool *shown = bm_malloc0((n + 1) * sizeof(bool));
    _cleanup_free_ size_t *wrap_width = bm_malloc0((n + 1) * sizeof(size_t));
    _cleanup_free_ size_t *shown_cols = bm_malloc0((n + 1) * sizeof(size_t));
    if (term >= 0)
        fit(t, cols, n, headings, (size_t)term, shown, wrap_width);
    else
        memset(shown, 1, n * sizeof(bool)); /* off a terminal: as it always was */
    size_t n_align = strlen(t->align), n_shown = 0;
    for (size_t k = 0; k < n; k++) {
        if (!shown[k])
            continue;
        char a = cols[k] < n_align ? t->align[cols[k]] : 'l';
        /* without headings the names take no width (as before: the widths fit what is shown) */
        bool wraps = a == 'w' && term >= 0;
        struct libscols_column *cl = scols_table_new_column(
            tb, headings ? t->cells[cols[k]] : "", 0,
            a == 'r' ? SCOLS_FL_RIGHT : wraps ? SCOLS_FL_WRAP : 0);
        if (!cl)
            return;
        if (wraps)
            scols_column_set_wrapfunc(cl, wrap_chunksize, wrap_nextchunk, &wrap_width[k]);
        shown_cols[n_shown++] = cols[k];
    }
    size_t n_rows = t->n_cells / t->n_cols;
    for (size_t row = 1; row < n_rows; row++) {
        struct libscols_line *ln = scols_table_new_line(tb, NULL);
        for (size_t k = 0; ln && k < n_shown; k++)
            scols_line_set_data(ln, k, t->cells[row * t->n_cols + shown_cols[k]]);
    }
    scols_print_table(tb);
}

void bm_table_print_line(FILE *f, int width, size_t indent, const char *text)
{
    size_t col = 0;
    for (const char *p = text; width > 0 && *p;) {
        size_t len = word_len(p), w = bm_table_text_width(p, len);
        if (col > indent && col + 1 + w > (size_t)width) {
            fprintf(f, "\n%*s", (int)indent, "");
            col = indent;
        } else if (p != text) {
            fputc(' ', f);
            col++;
        }
        fwrite(p, 1, len, f);
        col += w;
        p += len;
        p += *p == ' ';
    }
    if (width <= 0)
        fputs(text, f);
    fputc('\n', f);
}

void bm_table_print(const BmTable *t, FILE *f)
{
    _cleanup_free_ size_t *cols = bm_malloc0((t->n_cols + 1) * sizeof(size_t));
    for (size_t c = 0; c < t->n_cols; c++)
        cols[c] = c;
    bm_table_print_columns(t, f, cols, t->n_cols, true);
}

int bm_table_parse_columns(BmTable *t, const char *spec, const size_t *defaults, size_t n_defaults,
                           size_t **ret_cols, size_t *ret_n)
{
    /* "+COL,...": the default columns and these (lsblk's -o +COL) */
    bool add = spec[0] == '+';
    spec += add;
    _cleanup_free_ char *copy = bm_strdup(spec);
    _cleanup_free_ size_t *cols = bm_malloc0((strlen(spec) / 2 + n_defaults + 2) * sizeof(size_t));
    size_t n = 0;
    char *save = NULL;
    if (!*spec || spec[0] == ',' || spec[strlen(spec) - 1] == ',' || strstr(spec, ",,"))
        return bm_error(-EINVAL, "expected column names separated by commas (+NAME,...: added "
                        "to the default ones)");
    for (size_t k = 0; add && k < n_defaults; k++)
        cols[n++] = defaults[k];
    for (char *name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        size_t c = column_index(t, name, strlen(name));
        if (c == t->n_cols) {
            char shown[64], all[512] = "";
            for (size_t k = 0; k < t->n_cols; k++)
                snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s%s", k ? "," : "",
                         t->cells[k]);
            return bm_error(-EINVAL, "unknown column '%s' (columns: %s)",
                            bm_printable(name, shown, sizeof(shown)), all);
        }
        cols[n++] = c;
        t->kept[c] = true;
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
    free(t->kept);
    free(t->give_way);
    free(t);
}
