#define _GNU_SOURCE
#include "state.h"

#include "file.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <libgen.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "json-name.h"
#include "policy-eval.h"
#include "util.h"

#define STATE_VERSION 1
#define STATE_MAX_BYTES (64u << 20)
/* Counts saturate at 2^63 - 1 (bm_count_add()); json-c saturates larger numbers at 2^64-1 */
#define COUNT_MAX BM_COUNT_MAX
/* What a state file of BM_STATE_MAX_DOMAINS domains can hold: about 40 values and 5 objects
 * or arrays per domain (its reading, its record with yield and features), and the
 * histograms. Checked on the text before json-c builds its tree, so that the memory a load
 * takes is bounded by the domains it can describe, not by the 64 MiB of the file. */
#define STATE_MAX_VALUES ((size_t)BM_STATE_MAX_DOMAINS * 48 + 4096)
#define STATE_MAX_CONTAINERS ((size_t)BM_STATE_MAX_DOMAINS * 6 + 256)

DEFINE_CLEANUP(json_object *, json_object_put)

/* The writer's side of every bound the reader checks: whatever is kept in memory is written
 * as a value the reader takes back (tests/test-state.c round-trips the extremes of every
 * field). */

/* A count (or bytes, epoch seconds): saturated at COUNT_MAX, what count_member() reads. */
static json_object *json_count(uint64_t v)
{
    return json_object_new_uint64(v > COUNT_MAX ? COUNT_MAX : v);
}

/* No pass or change takes a year; a latency sum is at most that per counted change. */
#define SECONDS_MAX (365.0 * 86400)

/* A number of seconds seconds_member() reads back: JSON has no Infinity or NaN (json-c would
 * write them so, and no reader takes them back), so what is not finite is written as none;
 * none (what is below 0, or NaN) is dflt (-1 or 0); the rest at most max. */
static json_object *json_seconds(double v, double dflt, double max)
{
    if (isnan(v) || v < 0)
        return json_object_new_double(dflt);
    return json_object_new_double(v > max ? max : v);
}

/* An optional non-negative integer member: BM_ABSENT when null/missing. */
static int get_u64(json_object *o, const char *key, uint64_t *ret)
{
    json_object *v;
    *ret = BM_ABSENT;
    if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return 0;
    if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
        return bm_error(-EINVAL, "\"%s\" is not a non-negative integer", key);
    if (json_object_get_uint64(v) > COUNT_MAX)
        return bm_error(-EINVAL, "\"%s\": %" PRIu64 " is out of range (0 to %" PRIu64 ")", key,
                        json_object_get_uint64(v), COUNT_MAX);
    *ret = json_object_get_uint64(v);
    return 0;
}

/* A counter: 0 when missing or not a number (best effort), but a number that is negative,
 * not whole or beyond COUNT_MAX (json-c saturates what overflows) is an error: a count that
 * cannot be is never silently taken as 0 or as the largest value. */
static int count_member(json_object *o, const char *key, uint64_t *ret)
{
    json_object *v;
    *ret = 0;
    if (!json_object_object_get_ex(o, key, &v) ||
        !(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)))
        return 0;
    if (json_object_is_type(v, json_type_double) || json_object_get_int64(v) < 0)
        return bm_error(-EINVAL, "counters: \"%s\": %s is not a count (a whole number from 0)",
                        key, json_object_to_json_string(v));
    if (json_object_get_uint64(v) > COUNT_MAX)
        return bm_error(-EINVAL, "counters: \"%s\": %s overflows (the largest count is %" PRIu64
                        ")", key, json_object_to_json_string(v), COUNT_MAX);
    *ret = json_object_get_uint64(v);
    return 0;
}

/* A number of seconds: dflt when missing or not a number (best effort), else a finite number
 * from 0 (or dflt itself, -1: none yet) up to max; anything else is an error naming it. */
static int seconds_member(json_object *o, const char *what, const char *key, double dflt,
                          double max, double *ret)
{
    json_object *v;
    *ret = dflt;
    if (!json_object_object_get_ex(o, key, &v) ||
        !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)))
        return 0;
    double d = json_object_get_double(v);
    if (!isfinite(d) || (d < 0 && d != dflt) || d > max)
        return bm_error(-EINVAL, "%s\"%s\": %s is out of range (a finite number from 0 to %g)",
                        what, key, json_object_to_json_string(v), max);
    *ret = d;
    return 0;
}

#define FIELD(st, k, member, t)                                                                    \
    {.key = k, .type = t, .offset = offsetof(st, member), .size = sizeof(((st *)0)->member)}
#define READING(k, member, t) FIELD(BmPrevReading, k, member, t)
#define ENTRY(k, member, t) FIELD(BmLedgerEntry, k, member, t)
#define YIELD(k, member, t) FIELD(BmYield, k, member, t)
#define COUNTER(k, member, t) FIELD(BmCounters, k, member, t)

/* A domain's previous reading, an object of "domains". */
static const BmStateField reading_fields[] = {
    READING("major_faults", major_faults, BM_STATE_OPTIONAL),
    READING("swap_in_bytes", swap_in_bytes, BM_STATE_OPTIONAL),
    READING("last_update", last_update_s, BM_STATE_OPTIONAL),
    READING("taken_at", taken_s, BM_STATE_TIME),
    READING("taken_at_ns", taken_ns, BM_STATE_TIME),
    READING("used_bytes", used_bytes, BM_STATE_OPTIONAL),
    READING("actual_bytes", actual_bytes, BM_STATE_OPTIONAL),
    READING("used_peak_bytes", used_peak_bytes, BM_STATE_OPTIONAL),
    READING("used_peak_at", used_peak_s, BM_STATE_TIME),
    READING("given_at", given_s, BM_STATE_TIME),
    READING("disk_read_bytes", disk_read_bytes, BM_STATE_OPTIONAL),
    READING("cpu_time_ns", cpu_time_ns, BM_STATE_OPTIONAL),
    READING("inflated_from_bytes", inflated_from_bytes, BM_STATE_OPTIONAL),
    READING("read_base_bytes_per_second", read_base_Bps, BM_STATE_OPTIONAL),
    READING("cache_hot_at", cache_hot_s, BM_STATE_TIME),
    READING("oom_kills", oom_kills, BM_STATE_OPTIONAL),
    READING("alloc_stalls", alloc_stalls, BM_STATE_OPTIONAL),
    READING("direct_reclaim_bytes", direct_reclaim_bytes, BM_STATE_OPTIONAL),
    READING("oom_at", oom_s, BM_STATE_TIME),
    READING("busy_at", busy_s, BM_STATE_TIME),
};

/* What the ledger counts of one domain, an object of "counters"."domains" (after its uuid and
 * name; before its "yield" and "features"). */
static const BmStateField entry_fields[] = {
    ENTRY("last_target_bytes", last_target_bytes, BM_STATE_OPTIONAL_BEST_EFFORT),
    ENTRY("last_duration_s", last_duration_s, BM_STATE_SECONDS),
    ENTRY("last_direction", last_direction, BM_STATE_DIRECTION),
    ENTRY("last_rss_drop_bytes", last_rss_drop_bytes, BM_STATE_OPTIONAL_BEST_EFFORT),
    ENTRY("unresponsive", unresponsive, BM_STATE_BOOL),
    ENTRY("unresponsive_actual", unresponsive_actual, BM_STATE_COUNT),
    ENTRY("unresponsive_until", unresponsive_until_s, BM_STATE_COUNT),
    ENTRY("vmem_refused_bytes", vmem_refused_bytes, BM_STATE_COUNT),
    ENTRY("vmem_refused_at", vmem_refused_s, BM_STATE_TIME),
    ENTRY("vmem_refused_total_bytes", vmem_refused_total_bytes, BM_STATE_COUNT),
};

/* What its inflates gave back: its "yield" object, written once one was learned from. */
static const BmStateField yield_fields[] = {
    YIELD("inflated_bytes", inflated_bytes, BM_STATE_COUNT),
    YIELD("returned_bytes", returned_bytes, BM_STATE_COUNT),
    YIELD("last_inflated_bytes", last_inflated_bytes, BM_STATE_COUNT),
    YIELD("last_returned_bytes", last_returned_bytes, BM_STATE_COUNT),
    YIELD("returns_nothing", nothing, BM_STATE_BOOL),
    YIELD("returns_nothing_rss_bytes", nothing_rss_bytes, BM_STATE_COUNT),
    YIELD("free_unbacked", free_unbacked, BM_STATE_BOOL),
    YIELD("free_unbacked_rss_bytes", free_unbacked_rss_bytes, BM_STATE_COUNT),
};

/* The host's counters, in "counters" (after the histograms, changes and errors, before the
 * domains). */
static const BmStateField counter_fields[] = {
    COUNTER("passes", passes, BM_STATE_COUNT),
    COUNTER("rss_dropped_bytes", rss_dropped_bytes, BM_STATE_COUNT),
    COUNTER("hot_cache_taken_bytes", hot_cache_taken_bytes, BM_STATE_COUNT),
    COUNTER("cache_taken_bytes", cache_taken_bytes, BM_STATE_COUNT),
    COUNTER("percpu_drained_bytes", percpu_drained_bytes, BM_STATE_COUNT),
    COUNTER("last_success", last_success_s, BM_STATE_COUNT),
    COUNTER("last_pass_duration_s", last_pass_duration_s, BM_STATE_SECONDS),
};

static const struct {
    const BmStateField *fields;
    size_t n;
} tables[BM_STATE_IN_COUNT] = {
    [BM_STATE_IN_READING] = {reading_fields, BM_ARRAY_SIZE(reading_fields)},
    [BM_STATE_IN_ENTRY] = {entry_fields, BM_ARRAY_SIZE(entry_fields)},
    [BM_STATE_IN_YIELD] = {yield_fields, BM_ARRAY_SIZE(yield_fields)},
    [BM_STATE_IN_COUNTERS] = {counter_fields, BM_ARRAY_SIZE(counter_fields)},
};

const BmStateField *bm_state_fields(BmStateStruct in, size_t *ret_n)
{
    *ret_n = tables[in].n;
    return tables[in].fields;
}

/* The size of a field of type t. */
static size_t type_size(BmStateFieldType t)
{
    switch (t) {
    case BM_STATE_SECONDS: return sizeof(double);
    case BM_STATE_BOOL: return sizeof(bool);
    case BM_STATE_DIRECTION: return sizeof(int);
    default: return sizeof(uint64_t);
    }
}

/* The fields of table in of the struct at base, into the object o. */
static void fields_json(json_object *o, BmStateStruct in, const void *base)
{
    for (size_t k = 0; k < tables[in].n; k++) {
        const BmStateField *f = &tables[in].fields[k];
        const void *p = (const char *)base + f->offset;
        assert(f->size == type_size(f->type));
        json_object *v = NULL;
        switch (f->type) {
        case BM_STATE_OPTIONAL:
        case BM_STATE_OPTIONAL_BEST_EFFORT:
            v = bm_json_u64_or_null(*(const uint64_t *)p);
            break;
        case BM_STATE_TIME: {
            uint64_t t = *(const uint64_t *)p;
            if (!t || !bm_present(t))
                continue; /* none: left out */
            v = json_count(t);
            break;
        }
        case BM_STATE_COUNT: v = json_count(*(const uint64_t *)p); break;
        case BM_STATE_SECONDS: v = json_seconds(*(const double *)p, -1, SECONDS_MAX); break;
        case BM_STATE_BOOL: v = json_object_new_boolean(*(const bool *)p); break;
        case BM_STATE_DIRECTION: {
            int d = *(const int *)p;
            v = json_object_new_int(d >= 0 && d < BM_DIR_COUNT ? d : -1);
            break;
        }
        }
        json_object_object_add(o, f->key, v);
    }
}

/* The fields of table in from the object o into the struct at base; what: the context of an
 * error in a number of seconds ("counters: "). Returns 0, or -EINVAL naming a value out of
 * its range. */
static int fields_parse(json_object *o, const char *what, BmStateStruct in, void *base)
{
    for (size_t k = 0; k < tables[in].n; k++) {
        const BmStateField *f = &tables[in].fields[k];
        void *p = (char *)base + f->offset;
        assert(f->size == type_size(f->type));
        json_object *b;
        uint64_t v;
        int r = 0;
        switch (f->type) {
        case BM_STATE_OPTIONAL: r = get_u64(o, f->key, p); break;
        case BM_STATE_OPTIONAL_BEST_EFFORT:
            if (get_u64(o, f->key, &v) == 0)
                *(uint64_t *)p = v;
            break;
        case BM_STATE_TIME:
            r = get_u64(o, f->key, p);
            if (!bm_present(*(uint64_t *)p))
                *(uint64_t *)p = 0;
            break;
        case BM_STATE_COUNT: r = count_member(o, f->key, p); break;
        case BM_STATE_SECONDS: r = seconds_member(o, what, f->key, -1, SECONDS_MAX, p); break;
        case BM_STATE_BOOL:
            *(bool *)p = json_object_object_get_ex(o, f->key, &b) && json_object_get_boolean(b);
            break;
        case BM_STATE_DIRECTION: {
            bool is_int = json_object_object_get_ex(o, f->key, &b) &&
                          json_object_is_type(b, json_type_int);
            int d = is_int ? json_object_get_int(b) : -1;
            *(int *)p = d >= 0 && d < BM_DIR_COUNT ? d : -1;
            break;
        }
        }
        if (r < 0)
            return r;
    }
    return 0;
}

static json_object *counters_json(const BmLedger *l);

char *bm_state_format(const BmLedger *l, uint64_t now_s)
{
    _cleanup_(json_object_putp) json_object *root = json_object_new_object();
    json_object_object_add(root, "version", json_object_new_int(STATE_VERSION));
    json_object_object_add(root, "written_at", json_count(now_s));
    json_object_object_add(root, "host_mode", json_object_new_string(bm_host_mode_name(l->mode)));
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < l->n_entries; i++) {
        if (!l->entries[i]->have_prev)
            continue;
        json_object *o = json_object_new_object();
        json_object_object_add(o, "uuid", json_object_new_string(l->entries[i]->uuid));
        fields_json(o, BM_STATE_IN_READING, &l->entries[i]->prev);
        json_object_array_add(arr, o);
    }
    json_object_object_add(root, "domains", arr);
    json_object_object_add(root, "counters", counters_json(l));
    return bm_strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY));
}



/* One latency histogram h of device v, direction d and SG label s (the device written for
 * virtio-mem alone: an object without one is the balloon's, as in older files). */
static json_object *histogram_json(int v, int d, int s, const BmHistogram *h)
{
    json_object *e = json_object_new_object(), *b = json_object_new_array();
    if (v != BM_DEV_BALLOON)
        json_object_object_add(e, "device", json_object_new_string(bm_device_names[v]));
    json_object_object_add(e, "direction", json_object_new_string(bm_dir_names[d]));
    json_object_object_add(e, "sg", json_object_new_string(bm_sg_label_names[s]));
    /* the reader takes the count as the sum of the buckets, at most COUNT_MAX */
    uint64_t total = 0;
    for (size_t i = 0; i <= h->n_bounds; i++) {
        uint64_t n = h->counts[i] > COUNT_MAX - total ? COUNT_MAX - total : h->counts[i];
        total += n;
        json_object_array_add(b, json_object_new_uint64(n));
    }
    json_object_object_add(e, "buckets", b);
    /* no sum without a count */
    json_object_object_add(e, "sum", json_seconds(total ? h->sum : 0, 0, DBL_MAX));
    json_object_object_add(e, "count", json_object_new_uint64(total));
    return e;
}

/* The latency histograms of c: one object per device, direction and SG label. */
static json_object *latency_json(const BmCounters *c)
{
    json_object *lat = json_object_new_array();
    for (int v = 0; v < BM_DEV_COUNT; v++)
        for (int d = 0; d < BM_DIR_COUNT; d++)
            for (int s = 0; s < BM_SGL_COUNT; s++)
                json_object_array_add(lat, histogram_json(v, d, s, &c->latency[v][d][s]));
    return lat;
}

/* What the ledger counts of one domain r. */
static json_object *domain_counters_json(const BmLedgerEntry *r)
{
    json_object *x = json_object_new_object();
    json_object_object_add(x, "uuid", json_object_new_string(r->uuid));
    json_object_object_add(x, "name", bm_json_name(r->name));
    fields_json(x, BM_STATE_IN_ENTRY, r);
    if (r->yield.inflated_bytes > 0) {
        json_object *y = json_object_new_object();
        fields_json(y, BM_STATE_IN_YIELD, &r->yield);
        json_object_object_add(x, "yield", y);
    }
    if (r->features_known && r->boot[0]) { /* the verdict of this start, for the next run */
        json_object *f = json_object_new_object();
        json_object_object_add(f, "boot", json_object_new_string(r->boot));
        json_object_object_add(f, "sg", json_object_new_string(bm_feature_state_name(r->sg)));
        json_object_object_add(f, "ioeventfd", json_object_new_string(bm_switch_state_name(r->ioeventfd)));
        json_object_object_add(f, "reporting", json_object_new_string(bm_feature_state_name(r->reporting)));
        json_object_object_add(f, "deflate_on_oom",
                               json_object_new_string(bm_feature_state_name(r->deflate_on_oom)));
        json_object_object_add(x, "features", f);
    }
    return x;
}

static json_object *counters_json(const BmLedger *l)
{
    const BmCounters *c = &l->counters;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "latency", latency_json(c));
    json_object *ch = json_object_new_object(), *tc = json_object_new_object(), *er = json_object_new_object();
    json_object *vch = json_object_new_object();
    for (int d = 0; d < BM_DIR_COUNT; d++) {
        json_object *x = json_object_new_object(), *vx = json_object_new_object();
        for (int k = 0; k < BM_CHANGE_ENDED_COUNT; k++) {
            json_object_object_add(x, bm_outcome_names[k],
                                   json_count(c->changes[BM_DEV_BALLOON][d][k]));
            json_object_object_add(vx, bm_outcome_names[k],
                                   json_count(c->changes[BM_DEV_VIRTIO_MEM][d][k]));
        }
        json_object_object_add(ch, bm_dir_names[d], x);
        json_object_object_add(vch, bm_dir_names[d], vx);
        json_object_object_add(tc, bm_dir_names[d], json_count(c->target_changes[d]));
    }
    for (int e = 0; e < BM_ERR_COUNT; e++)
        json_object_object_add(er, bm_error_kind_names[e], json_count(c->errors[e]));
    json_object_object_add(o, "changes", ch); /* the balloon's, as in older files */
    json_object_object_add(o, "virtio_mem_changes", vch);
    json_object_object_add(o, "target_changes", tc);
    json_object_object_add(o, "errors", er);
    fields_json(o, BM_STATE_IN_COUNTERS, c);
    json_object *doms = json_object_new_array();
    for (size_t i = 0; i < l->n_entries; i++)
        json_object_array_add(doms, domain_counters_json(l->entries[i]));
    json_object_object_add(o, "domains", doms);
    return o;
}

/* A feature verdict by its name, or -1. */
static int feature_state_parse(json_object *v)
{
    for (int k = BM_FEAT_NEGOTIATED; k <= BM_FEAT_UNKNOWN; k++)
        if (strcmp(bm_feature_state_name(k), json_object_get_string(v) ?: "") == 0)
            return k;
    return -1;
}

/* A record's "features": the SG/ioeventfd verdict of the start "boot"; ignored when unreadable
 * (probed again). "reporting" and "deflate_on_oom" (absent from older files: unknown) go with
 * it. */
static void features_parse(json_object *x, BmLedgerEntry *r)
{
    json_object *f, *b, *sg, *io;
    if (!json_object_object_get_ex(x, "features", &f) || !json_object_object_get_ex(f, "boot", &b) ||
        !json_object_is_type(b, json_type_string) || json_object_get_string_len(b) >= (int)sizeof(r->boot) ||
        !json_object_object_get_ex(f, "sg", &sg) || !json_object_object_get_ex(f, "ioeventfd", &io))
        return;
    int s = feature_state_parse(sg), i = -1;
    for (int k = BM_SWITCH_ON; k <= BM_SWITCH_UNKNOWN; k++)
        if (strcmp(bm_switch_state_name(k), json_object_get_string(io) ?: "") == 0)
            i = k;
    if (s < 0 || i < 0)
        return;
    r->features_known = true;
    snprintf(r->boot, sizeof(r->boot), "%s", json_object_get_string(b));
    r->sg = s;
    r->ioeventfd = i;
    json_object *v;
    int k;
    r->reporting = json_object_object_get_ex(f, "reporting", &v) && (k = feature_state_parse(v)) >= 0
                       ? (BmFeatureState)k : BM_FEAT_UNKNOWN;
    r->deflate_on_oom = json_object_object_get_ex(f, "deflate_on_oom", &v) && (k = feature_state_parse(v)) >= 0
                            ? (BmFeatureState)k : BM_FEAT_UNKNOWN;
}

#define COUNT(o, key, dst)                                                                         \
    do {                                                                                           \
        uint64_t v_;                                                                               \
        int r_ = count_member(o, key, &v_);                                                        \
        if (r_ < 0)                                                                                \
            return r_;                                                                             \
        (dst) = v_;                                                                                \
    } while (0)

static int index_of(const char *const *keys, int n, const char *s)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(keys[i], s) == 0)
            return i;
    return -1;
}

/* Counters are best effort: a malformed part is left at zero; but a count out of range is an
 * error (-EINVAL, naming it). */
/* The device of a histogram in a message: "" for the balloon's (as before virtio-mem). */
static const char *dev_prefix(int v)
{
    return v == BM_DEV_BALLOON ? "" : bm_device_names[v];
}

/* The latency histograms of the array lat into c. Returns 0 or -EINVAL. */
static int latency_parse(json_object *lat, BmCounters *c)
{
    for (size_t i = 0; i < json_object_array_length(lat); i++) {
        json_object *e = json_object_array_get_idx(lat, i), *dj, *sj, *b;
        if (!json_object_object_get_ex(e, "direction", &dj) || !json_object_object_get_ex(e, "sg", &sj) ||
            !json_object_object_get_ex(e, "buckets", &b) || !json_object_is_type(b, json_type_array))
            continue;
        int d = index_of(bm_dir_names, BM_DIR_COUNT, json_object_get_string(dj));
        int s = index_of(bm_sg_label_names, BM_SGL_COUNT, json_object_get_string(sj));
        /* without a device: the balloon's (older files) */
        json_object *vj;
        int v = json_object_object_get_ex(e, "device", &vj)
                    ? index_of(bm_device_names, BM_DEV_COUNT, json_object_get_string(vj))
                    : BM_DEV_BALLOON;
        BmHistogram *h = v >= 0 && d >= 0 && s >= 0 ? &c->latency[v][d][s] : NULL;
        if (!h || json_object_array_length(b) != h->n_bounds + 1)
            continue;
        uint64_t total = 0;
        for (size_t k = 0; k <= h->n_bounds; k++) {
            json_object *n = json_object_array_get_idx(b, k);
            h->counts[k] = json_object_is_type(n, json_type_int) && json_object_get_int64(n) > 0
                               ? json_object_get_uint64(n) : 0;
            if (h->counts[k] > COUNT_MAX || __builtin_add_overflow(total, h->counts[k], &total) ||
                total > COUNT_MAX)
                return bm_error(-EINVAL, "counters: latency bucket %zu of %s%s%s/%s: the counts "
                                "add up beyond %" PRIu64, k, dev_prefix(v),
                                v != BM_DEV_BALLOON ? "/" : "", bm_dir_names[d],
                                bm_sg_label_names[s], COUNT_MAX);
        }
        h->count = total; /* _count is the sum of the buckets, whatever the file says */
        /* the sum of the observed durations: from 0, finite, none without observations */
        char what[64];
        snprintf(what, sizeof(what), "counters: latency %s%s%s/%s: ", dev_prefix(v),
                 v != BM_DEV_BALLOON ? "/" : "", bm_dir_names[d], bm_sg_label_names[s]);
        int r = seconds_member(e, what, "sum", 0, DBL_MAX, &h->sum); /* observe saturates */
        if (r < 0)
            return r;
        if (total == 0 && h->sum != 0)
            return bm_error(-EINVAL, "%s\"sum\": %g without a count", what, h->sum);
    }
    return 0;
}

/* What the ledger counts of one domain, from x into its entry of l. Returns 0, or -EINVAL
 * for a value out of its range. */
static int domain_counters_parse(json_object *x, BmLedger *l)
{
    json_object *u, *n;
    if (!json_object_object_get_ex(x, "uuid", &u) || !json_object_is_type(u, json_type_string) ||
        json_object_get_string_len(u) >= 40)
        return 0;
    const char *uuid = json_object_get_string(u);
    if (bm_utf8_invalid(uuid, strlen(uuid)) != SIZE_MAX)
        return 0; /* no domain has it: it would only make the saved file invalid */
    /* as written back: valid UTF-8 (a name is only shown, records match by UUID) */
    _cleanup_free_ char *name = bm_utf8_sanitize(
        json_object_object_get_ex(x, "name", &n) ? json_object_get_string(n) : "");
    BmLedgerEntry *r = bm_ledger_entry(l, uuid, name);
    int rc = fields_parse(x, "counters: domain: ", BM_STATE_IN_ENTRY, r);
    if (rc < 0)
        return rc;
    json_object *y;
    if (json_object_object_get_ex(x, "yield", &y) && json_object_is_type(y, json_type_object) &&
        (rc = fields_parse(y, "counters: domain: yield: ", BM_STATE_IN_YIELD, &r->yield)) < 0)
        return rc;
    features_parse(x, r);
    return 0;
}

static int counters_parse(json_object *o, BmLedger *l)
{
    BmCounters *c = &l->counters;
    json_object *lat, *ch, *tc, *er, *doms;
    int r;
    if (json_object_object_get_ex(o, "latency", &lat) && json_object_is_type(lat, json_type_array) &&
        (r = latency_parse(lat, c)) < 0)
        return r;
    /* "changes" the balloon's (also in older files), "virtio_mem_changes" virtio-mem's */
    static const char *const change_keys[BM_DEV_COUNT] = {"changes", "virtio_mem_changes"};
    for (int v = 0; v < BM_DEV_COUNT; v++)
        if (json_object_object_get_ex(o, change_keys[v], &ch))
            for (int d = 0; d < BM_DIR_COUNT; d++) {
                json_object *x;
                if (json_object_object_get_ex(ch, bm_dir_names[d], &x))
                    for (int k = 0; k < BM_CHANGE_ENDED_COUNT; k++)
                        COUNT(x, bm_outcome_names[k], c->changes[v][d][k]);
            }
    if (json_object_object_get_ex(o, "target_changes", &tc))
        for (int d = 0; d < BM_DIR_COUNT; d++)
            COUNT(tc, bm_dir_names[d], c->target_changes[d]);
    if (json_object_object_get_ex(o, "errors", &er))
        for (int e = 0; e < BM_ERR_COUNT; e++)
            COUNT(er, bm_error_kind_names[e], c->errors[e]);
    if ((r = fields_parse(o, "counters: ", BM_STATE_IN_COUNTERS, c)) < 0)
        return r;
    if (json_object_object_get_ex(o, "domains", &doms) && json_object_is_type(doms, json_type_array) &&
        json_object_array_length(doms) > BM_STATE_MAX_DOMAINS)
        return bm_error(-EINVAL, "counters: %zu domains, more than %d", json_object_array_length(doms),
                        BM_STATE_MAX_DOMAINS);
    if (json_object_object_get_ex(o, "domains", &doms) && json_object_is_type(doms, json_type_array))
        for (size_t i = 0; i < json_object_array_length(doms); i++) {
            if ((r = domain_counters_parse(json_object_array_get_idx(doms, i), l)) < 0)
                return r;
        }
    return 0;
}

/* The "domains" array: each one's previous reading. */
static int readings_parse(json_object *arr, BmLedger *l)
{
    size_t n = json_object_array_length(arr);
    if (n > BM_STATE_MAX_DOMAINS)
        return bm_error(-EINVAL, "%zu domains, more than %d", n, BM_STATE_MAX_DOMAINS);
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_array_get_idx(arr, i), *uuid;
        BmPrevReading reading;
        if (!json_object_is_type(o, json_type_object) ||
            !json_object_object_get_ex(o, "uuid", &uuid) || !json_object_is_type(uuid, json_type_string) ||
            json_object_get_string_len(uuid) >= (int)sizeof(((BmLedgerEntry *)0)->uuid))
            return bm_error(-EINVAL, "domain %zu: no uuid", i);
        int r = fields_parse(o, "", BM_STATE_IN_READING, &reading);
        if (r < 0)
            return r;
        BmLedgerEntry *e = bm_ledger_entry(l, json_object_get_string(uuid), NULL);
        e->have_prev = true;
        e->prev = reading;
    }
    return 0;
}

static int parse_root(json_object *root, BmLedger *ret)
{
    if (!json_object_is_type(root, json_type_object))
        return bm_error(-EINVAL, "not a JSON object");
    json_object *v;
    if (!json_object_object_get_ex(root, "version", &v) || !json_object_is_type(v, json_type_int) ||
        json_object_get_int64(v) != STATE_VERSION)
        return bm_error(-EINVAL, "unknown version");
    if (json_object_object_get_ex(root, "host_mode", &v)) {
        const char *m = json_object_get_string(v);
        ret->mode = m && strcmp(m, "reclaim") == 0   ? BM_HOST_RECLAIM
                    : m && strcmp(m, "release") == 0 ? BM_HOST_RELEASE
                                                     : BM_HOST_HOLD;
    }
    json_object *arr;
    if (!json_object_object_get_ex(root, "domains", &arr) || !json_object_is_type(arr, json_type_array))
        return bm_error(-EINVAL, "\"domains\" is not an array");
    int r = readings_parse(arr, ret);
    if (r < 0)
        return r;
    json_object *c;
    if (json_object_object_get_ex(root, "counters", &c) && json_object_is_type(c, json_type_object))
        return counters_parse(c, ret);
    return 0;
}

/* Counts the values and the objects and arrays of JSON text (outside strings), up to the
 * limits of a state file. Returns 0, or -EINVAL naming the limit passed. O(n), no memory. */
static int check_size(const char *text)
{
    size_t values = 1, containers = 0;
    bool in_string = false;
    for (const char *p = text; *p; p++) {
        if (in_string) {
            if (*p == '\\' && p[1])
                p++;
            else if (*p == '"')
                in_string = false;
        } else if (*p == '"') {
            in_string = true;
        } else if (*p == ',') {
            values++;
        } else if (*p == '{' || *p == '[') {
            values++;
            containers++;
        }
        if (values > STATE_MAX_VALUES || containers > STATE_MAX_CONTAINERS)
            return bm_error(-EINVAL, "more %s than a state file of %d domains holds",
                            values > STATE_MAX_VALUES ? "values" : "objects and arrays",
                            BM_STATE_MAX_DOMAINS);
    }
    return 0;
}

int bm_state_parse(const char *text, BmLedger *ret)
{
    bm_ledger_init(ret);
    int rs = check_size(text);
    if (rs < 0)
        return rs;
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return bm_error(-ENOMEM, "out of memory");
    size_t len = strlen(text);
    _cleanup_(json_object_putp) json_object *root =
        json_tokener_parse_ex(tok, text, (int)(len > INT_MAX ? INT_MAX : len));
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    json_tokener_free(tok);
    if (!root || jerr != json_tokener_success)
        return bm_error(-EINVAL, "not JSON (%s)",
                        jerr == json_tokener_continue ? "truncated" : json_tokener_error_desc(jerr));
    int r = parse_root(root, ret);
    if (r < 0) {
        bm_ledger_clear(ret);
        bm_ledger_init(ret);
    }
    return r;
}

int bm_state_load(const char *path, BmLedger *ret)
{
    bm_ledger_init(ret);
    _cleanup_free_ char *buf = NULL;
    int r = bm_file_read(path, STATE_MAX_BYTES, &buf, NULL);
    if (r < 0)
        return r;
    return bm_state_parse(buf, ret);
}

int bm_state_save(const char *path, const BmLedger *l, uint64_t now_s)
{
    _cleanup_free_ char *dircopy = bm_strdup(path);
    const char *dir = dirname(dircopy);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return bm_error(-errno, "cannot create directory '%s': %s", dir, strerror(errno));

    /* never replace what the program did not write as a regular file (--state /dev/null) */
    int r = bm_file_check_replaceable(path);
    if (r < 0)
        return r;
    _cleanup_free_ char *text = bm_state_format(l, now_s);
    _cleanup_free_ char *tmp = bm_asprintf("%s" BM_STATE_TMP_SUFFIX, path);
    r = bm_file_write_atomic(path, tmp, text);
    if (r < 0)
        return bm_error(r, "cannot write: %s%s", strerror(-r),
                        access(path, F_OK) == 0 ? " (previous state kept)" : "");
    return 0;
}

int bm_state_set_aside(const char *path, char **ret_path)
{
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return bm_error(-ENODEV, "not renamed: %s is %s", path, bm_file_kind(st.st_mode));
    _cleanup_free_ char *first = bm_asprintf("%s.corrupt", path);
    const char *taken = NULL;
    /* PATH.corrupt, replacing an older copy (a regular file, as we write it); when that name
     * is taken by anything else (a directory, FIFO, link), which is never replaced, the first
     * free PATH.corrupt.N */
    for (int i = 0; i <= BM_STATE_ASIDE_MAX; i++) {
        _cleanup_free_ char *aside = i ? bm_asprintf("%s.%d", first, i) : bm_strdup(first);
        bool exists = lstat(aside, &st) == 0;
        if (exists && (i > 0 || !S_ISREG(st.st_mode))) {
            if (i == 0)
                taken = bm_file_kind(st.st_mode);
            continue;
        }
        int r = exists ? rename(path, aside)
                       : renameat2(AT_FDCWD, path, AT_FDCWD, aside, RENAME_NOREPLACE);
        if (r < 0 && errno == EEXIST)
            continue; /* made meanwhile */
        if (r < 0)
            return bm_error(-errno, "cannot rename to '%s': %s", aside, strerror(errno));
        *ret_path = TAKE_PTR(aside);
        return 0;
    }
    return bm_error(-EEXIST, "cannot rename: '%s' is %s and '%s.1' to '.%d' are taken", first,
                    taken ? taken : "taken", first, BM_STATE_ASIDE_MAX);
}

int bm_state_cleanup(const char *path)
{
    _cleanup_free_ char *tmp = bm_asprintf("%s" BM_STATE_TMP_SUFFIX, path);
    int r = bm_file_atomic_cleanup(tmp, BM_STATE_TMP_MIN_AGE_S);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return bm_error(r, "cannot list the directory: %s", strerror(-r));
    return r;
}

BmSaveOutcome bm_state_save_tracked(BmStateWriter *w, const char *path, const BmLedger *l,
                                    uint64_t now_s)
{
    int r = bm_state_save(path, l, now_s);
    if (r == 0) {
        BmSaveOutcome o = w->failures ? BM_SAVE_RECOVERED : BM_SAVE_OK;
        w->reported[0] = '\0';
        w->failed_before = w->failures;
        w->failures = 0;
        return o;
    }
    w->failures++;
    const char *why = bm_error_detail(r);
    if (w->failures > 1 && strcmp(why, w->reported) == 0)
        return BM_SAVE_FAILED_QUIET;
    snprintf(w->reported, sizeof(w->reported), "%s", why);
    return BM_SAVE_FAILED;
}

/* "balloonmgr -c test:///default agent ...": the command line of pid, or "" */
static void command_of(long pid, char *buf, size_t n)
{
    buf[0] = '\0';
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t k = read(fd, buf, n - 1);
    close(fd);
    if (k <= 0)
        return;
    buf[k] = '\0';
    for (ssize_t i = 0; i < k; i++)
        if (buf[i] == '\0' || (unsigned char)buf[i] < 0x20)
            buf[i] = ' ';
    while (k > 0 && buf[k - 1] == ' ')
        buf[--k] = '\0';
}

int bm_state_lock(const char *path, int *ret_fd)
{
    *ret_fd = -1;
    _cleanup_free_ char *lock = bm_asprintf("%s" BM_STATE_LOCK_SUFFIX, path);
    _cleanup_free_ char *dircopy = bm_strdup(path);
    const char *dir = dirname(dircopy);
    /* a directory that cannot be made (its parent missing or a file, read-only, not ours) can
     * hold no state file: the save reports that */
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return 0;
    /* held open read-only (flock needs no more): a file open for writing would keep its file
     * system from being remounted read-only for as long as the agent runs */
    const int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
    int fd = open(lock, O_CREAT | flags, 0644);
    if (fd < 0 && (errno == EROFS || errno == EACCES || errno == EPERM))
        fd = open(lock, flags); /* one there already can be locked */
    if (fd < 0) {
        int err = errno;
        if (err == EROFS || err == EACCES || err == EPERM || err == ENOENT || err == ENOTDIR ||
            err == ENOSPC || err == EDQUOT)
            return 0; /* nobody can write the state there: the save says why */
        if (err == ELOOP)
            return bm_error(-ENODEV, "lock file '%s' is a symbolic link", lock);
        return bm_error(-err, "cannot open the lock file '%s': %s", lock, strerror(err));
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        int err = errno;
        close(fd);
        if (err && !st.st_mode)
            return bm_error(-err, "lock file '%s': %s", lock, strerror(err));
        return bm_error(-ENODEV, "lock file '%s' is %s", lock, bm_file_kind(st.st_mode));
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int err = errno;
        if (err != EWOULDBLOCK) {
            close(fd);
            return bm_error(-err, "cannot lock '%s': %s", lock, strerror(err));
        }
        char text[32] = "", cmd[256] = "";
        ssize_t k = pread(fd, text, sizeof(text) - 1, 0);
        close(fd);
        text[k > 0 ? k : 0] = '\0';
        char *end = NULL;
        long pid = strtol(text, &end, 10);
        if (pid <= 0 || end == text)
            return bm_error(-EBUSY, "in use by another process (lock '%s'): one writer at a time",
                            lock);
        command_of(pid, cmd, sizeof(cmd));
        return bm_error(-EBUSY, "in use by PID %ld%s%s%s (lock '%s'): one writer at a time", pid,
                        cmd[0] ? " (" : "", cmd, cmd[0] ? ")" : "", lock);
    }
    /* who holds it, through a descriptor of its own, closed at once (when it cannot be
     * written, the lock holds all the same; only who holds it is not said) */
    int wfd = open(lock, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (wfd >= 0) {
        char text[32];
        int n = snprintf(text, sizeof(text), "%ld\n", (long)getpid());
        if (write(wfd, text, (size_t)n) != n) {
            /* as above */
        }
        close(wfd);
    }
    *ret_fd = fd;
    return 0;
}
