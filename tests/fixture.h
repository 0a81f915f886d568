/* Reading fixture files in unit tests. */
#pragma once

#include <glob.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file SOURCE_ROOT/tests/data/rel as a string (caller frees), or NULL. */
static inline char *fixture_read(const char *rel)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/data/%s", SOURCE_ROOT, rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    buf[got] = '\0';
    return buf;
}

/* Writes text to path (created or truncated); false when it cannot be written whole. For the
 * fake /proc and state files tests build. */
static inline bool fixture_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

/* fixture_write() of DIR/REL. */
static inline bool fixture_write_in(const char *dir, const char *rel, const char *text)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, rel) >= sizeof(path))
        return false;
    return fixture_write(path, text);
}

/* Defines parse_fixture(rel, ret, ret_errors): PARSE(text, rel, ret, ret_errors) on the text of
 * tests/data/DIR/REL, named REL in messages (-ENOENT, *ret NULL, when it cannot be read). */
#define DEFINE_PARSE_FIXTURE(DIR, TYPE, PARSE)                                                     \
    static int parse_fixture(const char *rel, TYPE **ret, char **ret_errors)                       \
    {                                                                                              \
        char path[512];                                                                            \
        snprintf(path, sizeof(path), "%s/%s", DIR, rel);                                           \
        _cleanup_free_ char *text = fixture_read(path);                                            \
        if (!text) {                                                                               \
            *ret = NULL;                                                                           \
            *ret_errors = bm_asprintf("%s: cannot read fixture\n", rel);                           \
            return -ENOENT;                                                                        \
        }                                                                                          \
        return PARSE(text, rel, ret, ret_errors);                                                  \
    }

/* A parser's bad fixtures: for every tests/data/DIR/bad/NAME.EXT (EXT with its dot), calls
 * check(rel, err_rel, want) with rel "bad/NAME.EXT", err_rel "DIR/bad/NAME.err" and want
 * that file's text (NULL when missing). Returns how many, -1 when there are none. */
static inline int fixture_each_bad(const char *dir, const char *ext,
                                   void (*check)(const char *rel, const char *err_rel,
                                                 const char *want))
{
    char pattern[4096];
    glob_t g;
    snprintf(pattern, sizeof(pattern), "%s/tests/data/%s/bad/*%s", SOURCE_ROOT, dir, ext);
    if (glob(pattern, 0, NULL, &g) != 0)
        return -1;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        char rel[512], err_rel[512];
        const char *name = basename(g.gl_pathv[i]);
        snprintf(rel, sizeof(rel), "bad/%s", name);
        snprintf(err_rel, sizeof(err_rel), "%s/bad/%.*s.err", dir, (int)(strlen(name) - strlen(ext)),
                 name);
        char *want = fixture_read(err_rel);
        check(rel, err_rel, want);
        free(want);
    }
    int n = (int)g.gl_pathc;
    globfree(&g);
    return n;
}
