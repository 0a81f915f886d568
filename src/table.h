/* Column-aligned text tables for the verbs' human output. Pure apart from the final print. */
#pragma once

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

void bm_table_free(BmTable *t);
DEFINE_CLEANUP(BmTable *, bm_table_free)
