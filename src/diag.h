/* Parse errors of the policy and web config files: collected in any order, printed as
 * "PATH:LINE:COL: message" lines in line order; and quoting of input in those messages. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    unsigned line, col;
    size_t seq; /* order of adding */
    char *msg;
} BmDiag;

typedef struct {
    BmDiag *items;
    size_t n, cap;
    size_t dropped; /* errors found beyond the BM_DIAGS_MAX kept */
} BmDiags;

/* At most this many errors are kept and printed (the first by line and column); the rest are
 * only counted: a file of a million bad lines gets 20 lines and a count, not a million. */
#define BM_DIAGS_MAX 20

/* Adds an error at line, col (a column past UINT32_MAX is kept as UINT32_MAX). When
 * BM_DIAGS_MAX are kept, it replaces the last of them by position if it comes before it,
 * and one error is counted in dropped either way. */
void bm_diags_add(BmDiags *d, unsigned line, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* How many errors were added (kept and dropped). */
static inline size_t bm_diags_count(const BmDiags *d)
{
    return d->n + d->dropped;
}

/* All kept errors, "path:line:col: message\n" each, sorted by line, then by column when by_col,
 * then in the order they were added; then "path: N more errors not shown\n" when some were
 * dropped. Empties d. Caller frees. */
char *bm_diags_join(BmDiags *d, const char *path, bool by_col);

/* Frees the errors of d (those not joined). */
void bm_diags_clear(BmDiags *d);

/* At most this many bytes of the input are shown in a message. */
#define BM_QUOTE_MAX 64
/* The size of a buffer for bm_quote(). */
#define BM_QUOTE_SIZE (BM_QUOTE_MAX * 4 + 4)

/* Copies n bytes of s into buf (BM_QUOTE_SIZE bytes) for a message: control bytes (and '\'
 * when escape_backslash) as \xNN, at most BM_QUOTE_MAX bytes of s (cut at a UTF-8 character
 * boundary), then "..." when longer. Returns buf. */
const char *bm_quote(const char *s, size_t n, bool escape_backslash, char *buf);
