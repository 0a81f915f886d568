/* Text tables for the verbs' output, printed by libsmartcols (util-linux's tables, as lsblk
 * and findmnt print them): aligned; on a terminal fit to its width (the optional columns give
 * way in the verb's order, 'w' columns wrap at blanks, names are never cut) and as they always
 * were elsewhere; or raw for scripts. Pure apart from the final print. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "util.h"

typedef struct BmTable BmTable;

/* A table with n columns; headers[i] names column i; align[i] is 'l' (left), 'r' (right) or
 * 'w' (left, wrapped at blanks on a terminal too narrow for it). The table keeps its own
 * copies. */
BmTable *bm_table_new(size_t n, const char *const *headers, const char *align);

/* Appends a cell (printf-style) to the current row; a full row starts the next one. */
void bm_table_cell(BmTable *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Raw output (--raw): no alignment, fields separated by one space, a blank or a
 * backslash in a field written \x20 or \x5c (so "shut off" stays one field), one row a
 * line. */
void bm_table_set_raw(BmTable *t, bool raw);

/* The columns that give way when the table is wider than the terminal: order names them
 * (comma-separated headers), first to go first; they are left out in that order until the
 * table fits (a wrap column counted at 30 columns, or its longest word). Columns named with
 * -o (bm_table_parse_columns()) never give way. */
void bm_table_set_give_way(BmTable *t, const char *order);

/* Prints as if on a terminal width columns wide (tests, the live view), whatever f is;
 * -1 (the default): fit f's terminal, or nothing when f is not one. */
void bm_table_set_width(BmTable *t, int width);

/* The width of the terminal on fd (its TIOCGWINSZ, else $COLUMNS, else 80), or -1 when fd is
 * not a terminal. */
int bm_table_terminal_width(int fd);

/* How many terminal columns the first n bytes of s (NUL-terminated) take, as libsmartcols
 * shows them: wide characters two, what the locale cannot print four (\xNN). */
size_t bm_table_text_width(const char *s, size_t n);

/* Prints text and a newline: on a terminal width columns wide (> 0) cut at blanks into lines
 * that fit, the lines after the first indented by indent blanks (a word, or what is quoted in
 * '...', wider than the line stays whole); else (width <= 0) as it is. */
void bm_table_print_line(FILE *f, int width, size_t indent, const char *text);

/* Prints the header and the rows: columns separated by two spaces (one in raw mode). */
void bm_table_print(const BmTable *t, FILE *f);

/* Prints the columns cols[0..n) in that order (indices as in bm_table_new()), with the header
 * row when headings; widths fit what is printed. On a terminal (or bm_table_set_width()) the
 * table fits its width as far as the columns that give way and the wrap columns let it; a
 * name wider than that makes the lines wider, never a cut name. */
void bm_table_print_columns(const BmTable *t, FILE *f, const size_t *cols, size_t n, bool headings);

/* Parses -o's comma-separated list of column names (the headers, case-insensitive; a column
 * may repeat) into indices: *ret_cols (caller frees), *ret_n. "+NAME,..." adds them to the
 * default columns defaults[0..n_defaults) (lsblk's -o +COL). The columns named never give way
 * (t remembers them). Returns 0 or -EINVAL with the reason (the unknown name and the list of
 * columns). */
int bm_table_parse_columns(BmTable *t, const char *spec, const size_t *defaults, size_t n_defaults,
                           size_t **ret_cols, size_t *ret_n);

void bm_table_free(BmTable *t);
DEFINE_CLEANUP(BmTable *, bm_table_free)
