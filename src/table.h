/* Column-aligned text tables for the verbs' human output. Pure apart from the final print. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "util.h"

typedef struct BmTable BmTable;

/* A table with n columns; headers[i] names column i; align[i] is 'l' or 'r'.
 * The table keeps its own copies. */
BmTable *bm_table_new(size_t n, const char *const *headers, const char *align);

/* Appends a cell (printf-style) to the current row; a full row starts the next one. */
void bm_table_cell(BmTable *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints the header and the rows, columns separated by two spaces. */
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
