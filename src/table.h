/* Text tables for the verbs' output, printed by libsmartcols (util-linux's tables, as lsblk
 * and findmnt print them): aligned, fit to the terminal's width on a terminal (columns marked
 * 't' truncated, 'w' wrapped) and as they are elsewhere; or raw for scripts. Pure apart from
 * the final print. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "util.h"

typedef struct BmTable BmTable;

/* A table with n columns; headers[i] names column i; align[i] is 'l' (left), 'r' (right),
 * 't' (left, truncated when the table is wider than the terminal) or 'w' (left, wrapped
 * then). The table keeps its own copies. */
BmTable *bm_table_new(size_t n, const char *const *headers, const char *align);

/* Appends a cell (printf-style) to the current row; a full row starts the next one. */
void bm_table_cell(BmTable *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Raw output (--raw): no alignment, fields separated by one space, a blank or a
 * backslash in a field written \x20 or \x5c (so "shut off" stays one field), one row a
 * line. */
void bm_table_set_raw(BmTable *t, bool raw);

/* Prints the header and the rows: columns separated by two spaces (one in raw mode). */
void bm_table_print(const BmTable *t, FILE *f);

/* Prints the columns cols[0..n) in that order (indices as in bm_table_new()), with the header
 * row when headings; widths fit what is printed. */
void bm_table_print_columns(const BmTable *t, FILE *f, const size_t *cols, size_t n, bool headings);

/* Parses a comma-separated list of column names (the headers, case-insensitive; a column may
 * repeat) into indices: *ret_cols (caller frees), *ret_n. Returns 0 or -EINVAL with the
 * reason (the unknown name and the list of columns). */
int bm_table_parse_columns(const BmTable *t, const char *spec, size_t **ret_cols, size_t *ret_n);

void bm_table_free(BmTable *t);
DEFINE_CLEANUP(BmTable *, bm_table_free)
