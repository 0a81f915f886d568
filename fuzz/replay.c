/* Replays fuzz inputs without libFuzzer: main() for a fuzz target built without
 * -fsanitize=fuzzer, so that every unit-test run (any compiler, with or without ASan) feeds
 * each file of the target's corpus to LLVMFuzzerTestOneInput once.
 * Usage: fuzz-replay-TARGET DIR|FILE... ; exits non-zero when a directory is empty or a file
 * cannot be read (a crash aborts, as under libFuzzer). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Targets without an initializer leave this NULL. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf)
        abort();
    /* an exact-size copy, so ASan sees reads past the end as libFuzzer would */
    uint8_t *exact = malloc(n ? n : 1);
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays every regular file of dir in name order. Returns the count or -1. */
static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        names = realloc(names, (n + 1) * sizeof(*names));
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(*names), cmp_names);
    int count = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (replay_file(path) < 0)
                failed = 1;
            else
                count++;
        }
        free(names[i]);
    }
    free(names);
    if (count == 0) {
        fprintf(stderr, "%s: no inputs\n", dir);
        return -1;
    }
    return failed ? -1 : count;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
        return 2;
    }
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        int r;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
            r = replay_dir(argv[i]);
        else
            r = replay_file(argv[i]) < 0 ? -1 : 1;
        if (r < 0)
            return 1;
        total += r;
        printf("%s: %d input%s replayed\n", argv[i], r, r == 1 ? "" : "s");
    }
    printf("%d inputs, no crash\n", total);
    return 0;
}
