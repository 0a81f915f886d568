#define _GNU_SOURCE
#include "spool.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "file.h"
#include "util.h"

/* What one ingest looks at: names are skipped by their form before anything is opened, so
 * that a flood of other files costs a directory read, not an open each (and never hides the
 * entries behind them); entry files are opened, counted or removed, at most SPOOL_MAX_FILES a
 * call: a flood of those drains over a few calls. */
#define SPOOL_MAX_NAMES 1000000
#define SPOOL_MAX_FILES 50000

char *bm_spool_dir(void)
{
    const char *base = getenv("BALLOONMGR_RUNTIME_DIR");
    return bm_asprintf("%s/changes", base && *base ? base : BM_RUNTIME_DEFAULT_DIR);
}

/* Opens the spool directory: a directory (not a link to one) of this user (root for the
 * system's) that nobody else can write to. Returns the descriptor, or -errno with the detail
 * naming dir (-ENOENT when there is none). */
static int open_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        struct stat st;
        if ((err == ENOTDIR || err == ELOOP) && lstat(dir, &st) == 0)
            return bm_error(-ENOTDIR, "%s: is %s, not a directory", dir, bm_file_kind(st.st_mode));
        return bm_error(-err, "%s: %s", dir, strerror(err));
    }
    struct stat st;
    int r = 0;
    if (fstat(fd, &st) < 0)
        r = bm_error(-errno, "%s: %s", dir, strerror(errno));
    else if (st.st_uid != geteuid())
        r = bm_error(-EPERM, "%s: owned by uid %u, not by this user (uid %u): not used", dir,
                     (unsigned)st.st_uid, (unsigned)geteuid());
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        r = bm_error(-EPERM, "%s: writable by others (mode %04o): not used", dir,
                     (unsigned)(st.st_mode & 07777));
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}

int bm_spool_create(void)
{
    _cleanup_free_ char *dir = bm_spool_dir();
    _cleanup_free_ char *parent = bm_strdup(dir);
    *strrchr(parent, '/') = '\0';
    if ((mkdir(parent, 0755) < 0 && errno != EEXIST) || (mkdir(dir, 0700) < 0 && errno != EEXIST))
        return bm_error(-errno, "%s: %s", dir, strerror(errno));
    int fd = open_dir(dir);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

int bm_spool_write(const BmTracked *t, const char *uri)
{
    _cleanup_free_ char *dir = bm_spool_dir();
    int dfd = open_dir(dir);
    if (dfd == -ENOENT)
        return 0;
    if (dfd < 0)
        return bm_error_prefix(dfd, "cannot record the change");
    close(dfd);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "uri", json_object_new_string(uri));
    json_object_object_add(o, "uuid", json_object_new_string(t->uuid));
    json_object_object_add(o, "name", json_object_new_string(t->name));
    BmSgLabel sg = t->sg < BM_SGL_COUNT ? t->sg : BM_SGL_UNKNOWN;
    json_object_object_add(o, "sg", json_object_new_string(bm_sg_label_names[sg]));
    json_object_object_add(o, "from_bytes", json_object_new_uint64(t->change.from_bytes));
    json_object_object_add(o, "target_bytes", json_object_new_uint64(t->change.target_bytes));
    json_object_object_add(o, "reached_bytes", json_object_new_uint64(t->change.reached_bytes));
    json_object_object_add(o, "outcome", json_object_new_int((int)t->change.outcome));
    json_object_object_add(o, "duration_ns", json_object_new_uint64(t->change.duration_ns));
    json_object_object_add(o, "rss_before_bytes", json_object_new_uint64(t->rss_before_bytes));
    json_object_object_add(o, "rss_after_bytes", json_object_new_uint64(t->rss_after_bytes));
    if (t->vmem) /* a virtio-mem change: counted apart (without: the balloon's, as before) */
        json_object_object_add(o, "device",
                               json_object_new_string(bm_device_names[BM_DEV_VIRTIO_MEM]));
    const char *text = json_object_to_json_string(o);
    _cleanup_free_ char *tmp = bm_asprintf("%s/.change.XXXXXX", dir);
    int fd = mkostemp(tmp, O_CLOEXEC), r = 0;
    if (fd < 0)
        r = -errno;
    else {
        size_t len = strlen(text);
        if (len > BM_SPOOL_ENTRY_MAX_BYTES || write(fd, text, len) != (ssize_t)len)
            r = -EIO;
        close(fd);
        _cleanup_free_ char *final = bm_asprintf("%s/%s.json", dir, strrchr(tmp, '.') + 1);
        if (r == 0 && rename(tmp, final) < 0)
            r = -errno;
        if (r < 0)
            unlink(tmp);
    }
    json_object_put(o);
    return r < 0 ? bm_error(r, "%s: cannot record the change: %s", dir, strerror(-r)) : 1;
}

/* An entry's number, untrusted: BM_ABSENT when missing, not a whole number, or beyond max. */
static uint64_t u64_of(json_object *o, const char *key, uint64_t max)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int) ||
        json_object_get_int64(v) < 0 || json_object_get_uint64(v) > max)
        return BM_ABSENT;
    return json_object_get_uint64(v);
}

/* No change takes a year (the state file's bound on a duration) */
#define SPOOL_MAX_DURATION_NS (365ull * 86400 * 1000000000)

/* Whether name is one bm_spool_write() gives: six letters or digits, ".json". */
static bool entry_name(const char *name)
{
    if (strlen(name) != 11 || strcmp(name + 6, ".json") != 0)
        return false;
    for (size_t i = 0; i < 6; i++)
        if (!isascii((unsigned char)name[i]) || !isalnum((unsigned char)name[i]))
            return false;
    return true;
}

/* Notes a skipped entry in *problems ("'NAME' is a FIFO; ..."), at most a few of them. */
static void note(char **problems, size_t *n_skipped, const char *name, const char *why)
{
    char shown[64];
    if ((*n_skipped)++ >= 3)
        return;
    char *s = bm_asprintf("%s%s'%s' %s", *problems ? *problems : "", *problems ? "; " : "",
                          bm_printable(name, shown, sizeof(shown)), why);
    free(*problems);
    *problems = s;
}

/* Counts the change of the spool entry o (parsed, of this connection) into l at now_s.
 * Returns whether it was a well-formed, ended change. */
static bool count_entry(json_object *o, BmLedger *l, uint64_t now_s)
{
    json_object *u, *nm, *out, *uj, *sgj, *dj;
    if (!o || !json_object_object_get_ex(o, "uri", &uj) ||
        !json_object_is_type(uj, json_type_string) ||
        !json_object_object_get_ex(o, "uuid", &u) || !json_object_is_type(u, json_type_string) ||
        json_object_get_string_len(u) >= VIR_UUID_STRING_BUFLEN ||
        !json_object_object_get_ex(o, "outcome", &out) ||
        json_object_get_int(out) < 0 || json_object_get_int(out) > BM_CHANGE_PENDING)
        return false;
    BmTracked t = {0};
    snprintf(t.uuid, sizeof(t.uuid), "%s", json_object_get_string(u));
    /* borrowed from o (counted, not logged: the ledger keeps its own copy) */
    t.name = (char *)(json_object_object_get_ex(o, "name", &nm) && json_object_is_type(nm, json_type_string)
                          ? json_object_get_string(nm) : "");
    t.change.outcome = (BmChangeOutcome)json_object_get_int(out);
    t.change.from_bytes = u64_of(o, "from_bytes", BM_COUNT_MAX);
    t.change.target_bytes = u64_of(o, "target_bytes", BM_COUNT_MAX);
    t.change.reached_bytes = u64_of(o, "reached_bytes", BM_COUNT_MAX);
    t.change.duration_ns = u64_of(o, "duration_ns", SPOOL_MAX_DURATION_NS);
    t.rss_before_bytes = u64_of(o, "rss_before_bytes", BM_COUNT_MAX);
    t.rss_after_bytes = u64_of(o, "rss_after_bytes", BM_COUNT_MAX);
    if (!bm_present(t.change.from_bytes) || !bm_present(t.change.target_bytes) ||
        !bm_present(t.change.duration_ns) || t.change.outcome == BM_CHANGE_PENDING)
        return false;
    t.vmem = json_object_object_get_ex(o, "device", &dj) &&
             json_object_is_type(dj, json_type_string) &&
             strcmp(json_object_get_string(dj), bm_device_names[BM_DEV_VIRTIO_MEM]) == 0;
    BmLedgerEntry *rec = bm_ledger_entry(l, t.uuid, t.name);
    /* the label of the spool where it is a verdict, else the domain's */
    t.sg = t.vmem ? BM_SGL_UNKNOWN : bm_sg_label(rec->sg, rec->features_known);
    if (json_object_object_get_ex(o, "sg", &sgj) && json_object_is_type(sgj, json_type_string))
        for (BmSgLabel s = BM_SGL_NEGOTIATED; s < BM_SGL_UNKNOWN; s++)
            if (strcmp(json_object_get_string(sgj), bm_sg_label_names[s]) == 0)
                t.sg = s;
    bm_ledger_record_change(l, rec, &t, false, now_s);
    return true;
}

int bm_spool_ingest(BmLedger *l, const char *uri, uint64_t now_s, char **ret_skipped)
{
    *ret_skipped = NULL;
    _cleanup_free_ char *dir = bm_spool_dir();
    int dfd = open_dir(dir);
    if (dfd == -ENOENT)
        return 0;
    if (dfd < 0)
        return dfd;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return bm_error(-errno, "%s: %s", dir, strerror(errno));
    }
    _cleanup_free_ char *problems = NULL;
    size_t n = 0, names = 0, opened = 0, n_skipped = 0;
    bool capped = false;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (names++ >= SPOOL_MAX_NAMES || opened >= SPOOL_MAX_FILES) {
            capped = true;
            break;
        }
        const char *name = de->d_name;
        if (name[0] == '.')
            continue; /* ".", "..", a writer's temporary file */
        if (!entry_name(name)) {
            note(&problems, &n_skipped, name, "is not a change file (left alone)");
            continue;
        }
        opened++;
        /* never follows a link, never blocks on a FIFO, reads at most the cap */
        struct stat st;
        _cleanup_free_ char *text = NULL;
        int fd = bm_file_open(dirfd(d), name, true, &st);
        int r = fd < 0 ? fd : bm_file_read_fd(fd, BM_SPOOL_ENTRY_MAX_BYTES, &text, NULL);
        if (fd >= 0)
            close(fd);
        if (r < 0) {
            if (r != -ENOENT) { /* ENOENT: another reader took it */
                char why[256];
                snprintf(why, sizeof(why), "%s (left alone)", bm_error_detail(r));
                note(&problems, &n_skipped, name, why);
            }
            continue;
        }
        json_object *o = json_tokener_parse(text), *uj;
        /* another connection's change: its agent or timer counts it; left for them until stale */
        if (o && json_object_object_get_ex(o, "uri", &uj) && json_object_is_type(uj, json_type_string) &&
            strcmp(json_object_get_string(uj), uri) != 0) {
            json_object_put(o);
            if (now_s > (uint64_t)st.st_mtime + BM_SPOOL_STALE_S)
                unlinkat(dirfd(d), name, 0);
            continue;
        }
        unlinkat(dirfd(d), name, 0); /* ours: counted now, or malformed */
        n += count_entry(o, l, now_s);
        json_object_put(o);
    }
    closedir(d);
    if (n_skipped || capped)
        *ret_skipped = bm_asprintf("%s: skipped %zu entr%s%s%s%s%s", dir, n_skipped,
                                   n_skipped == 1 ? "y" : "ies", problems ? ": " : "",
                                   problems ? problems : "", n_skipped > 3 ? "; ..." : "",
                                   capped ? "; stopped after the first entries of a flood (the "
                                            "rest next time)"
                                          : "");
    return (int)n;
}
