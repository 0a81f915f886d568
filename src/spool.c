#define _GNU_SOURCE
#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "util.h"

#define SPOOL_MAX_FILES 10000

char *bm_spool_dir(void)
{
    const char *base = getenv("BALLOONMGR_RUNTIME_DIR");
    return bm_asprintf("%s/changes", base && *base ? base : "/run/balloonmgr");
}

int bm_spool_create(void)
{
    _cleanup_free_ char *dir = bm_spool_dir();
    _cleanup_free_ char *parent = bm_strdup(dir);
    *strrchr(parent, '/') = '\0';
    if ((mkdir(parent, 0755) < 0 && errno != EEXIST) || (mkdir(dir, 0700) < 0 && errno != EEXIST))
        return bm_error(-errno, "%s: %s", dir, strerror(errno));
    return 0;
}

int bm_spool_write(const BmTracked *t)
{
    _cleanup_free_ char *dir = bm_spool_dir();
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return 0;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "uuid", json_object_new_string(t->uuid));
    json_object_object_add(o, "name", json_object_new_string(t->name));
    json_object_object_add(o, "sg", json_object_new_string(t->sg));
    json_object_object_add(o, "from_bytes", json_object_new_uint64(t->change.from_bytes));
    json_object_object_add(o, "target_bytes", json_object_new_uint64(t->change.target_bytes));
    json_object_object_add(o, "reached_bytes", json_object_new_uint64(t->change.reached_bytes));
    json_object_object_add(o, "outcome", json_object_new_int((int)t->change.outcome));
    json_object_object_add(o, "duration_ns", json_object_new_uint64(t->change.duration_ns));
    json_object_object_add(o, "rss_before_bytes", json_object_new_uint64(t->rss_before_bytes));
    json_object_object_add(o, "rss_after_bytes", json_object_new_uint64(t->rss_after_bytes));
    const char *text = json_object_to_json_string(o);
    _cleanup_free_ char *tmp = bm_asprintf("%s/.change.XXXXXX", dir);
    int fd = mkostemp(tmp, O_CLOEXEC), r = 0;
    if (fd < 0)
        r = -errno;
    else {
        size_t len = strlen(text);
        if (write(fd, text, len) != (ssize_t)len)
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

static uint64_t u64_of(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int) ||
        json_object_get_int64(v) < 0)
        return BM_ABSENT;
    return json_object_get_uint64(v);
}

size_t bm_spool_ingest(BmLedger *l, uint64_t now_s)
{
    _cleanup_free_ char *dir = bm_spool_dir();
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0, seen = 0;
    struct dirent *de;
    while ((de = readdir(d)) && seen++ < SPOOL_MAX_FILES) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
            continue;
        _cleanup_free_ char *path = bm_asprintf("%s/%s", dir, de->d_name);
        json_object *o = json_object_from_file(path);
        unlink(path);
        json_object *u, *nm, *out;
        if (!o || !json_object_object_get_ex(o, "uuid", &u) || !json_object_is_type(u, json_type_string) ||
            json_object_get_string_len(u) >= VIR_UUID_STRING_BUFLEN ||
            !json_object_object_get_ex(o, "outcome", &out) ||
            json_object_get_int(out) < 0 || json_object_get_int(out) > BM_CHANGE_PENDING) {
            json_object_put(o);
            continue;
        }
        BmTracked t = {0};
        snprintf(t.uuid, sizeof(t.uuid), "%s", json_object_get_string(u));
        snprintf(t.name, sizeof(t.name), "%s",
                 json_object_object_get_ex(o, "name", &nm) ? json_object_get_string(nm) : "");
        t.change.outcome = (BmChangeOutcome)json_object_get_int(out);
        t.change.from_bytes = u64_of(o, "from_bytes");
        t.change.target_bytes = u64_of(o, "target_bytes");
        t.change.reached_bytes = u64_of(o, "reached_bytes");
        t.change.duration_ns = u64_of(o, "duration_ns");
        t.rss_before_bytes = u64_of(o, "rss_before_bytes");
        t.rss_after_bytes = u64_of(o, "rss_after_bytes");
        if (!bm_present(t.change.from_bytes) || !bm_present(t.change.target_bytes) ||
            !bm_present(t.change.duration_ns) || t.change.outcome == BM_CHANGE_PENDING) {
            json_object_put(o);
            continue;
        }
        json_object *sgj;
        const BmLedgerEntry *rec = bm_ledger_entry(l, t.uuid, t.name);
        const char *label = bm_sg_label(rec->sg, rec->features_known);
        if (json_object_object_get_ex(o, "sg", &sgj) && json_object_is_type(sgj, json_type_string) &&
            (strcmp(json_object_get_string(sgj), "negotiated") == 0 ||
             strcmp(json_object_get_string(sgj), "not_negotiated") == 0))
            label = json_object_get_string(sgj);
        snprintf(t.sg, sizeof(t.sg), "%s", label);
        json_object_put(o);
        bm_ledger_record_change(l, &t, now_s);
        n++;
    }
    closedir(d);
    return n;
}
