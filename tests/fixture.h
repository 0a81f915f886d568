/* Reading fixture files in unit tests. */
#pragma once

#include <stdio.h>
#include <stdlib.h>

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
