#include "ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void bm_ledger_init(BmLedger *l)
{
    *l = (BmLedger){.mode = BM_HOST_HOLD};
    l->counters.last_pass_duration_s = -1;
    for (int v = 0; v < BM_DEV_COUNT; v++)
        for (int d = 0; d < BM_DIR_COUNT; d++)
            for (int s = 0; s < BM_SGL_COUNT; s++)
                bm_histogram_init(&l->counters.latency[v][d][s], bm_latency_buckets,
                                  bm_latency_n_buckets);
}

void bm_ledger_clear(BmLedger *l)
{
    for (size_t i = 0; i < l->n_entries; i++)
        free(l->entries[i]);
    free(l->entries);
    free(l->slots);
    l->entries = NULL;
    l->slots = NULL;
    l->n_entries = l->n_slots = l->cap_entries = 0;
}

static size_t hash_str(const char *s)
{
    size_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Slot of uuid: the one holding it, or the empty one where it would go. */
static size_t *slot_of(const BmLedger *l, const char *uuid)
{
    size_t mask = l->n_slots - 1;
    for (size_t i = hash_str(uuid) & mask;; i = (i + 1) & mask)
        if (!l->slots[i] || strcmp(l->entries[l->slots[i] - 1]->uuid, uuid) == 0)
            return &l->slots[i];
}

static void reindex(BmLedger *l)
{
    size_t want = 16;
    while (want < l->n_entries * 2 + 2)
        want *= 2;
    free(l->slots);
    l->slots = bm_malloc0(want * sizeof(size_t));
    l->n_slots = want;
    for (size_t i = 0; i < l->n_entries; i++)
        *slot_of(l, l->entries[i]->uuid) = i + 1;
}

const BmLedgerEntry *bm_ledger_find(const BmLedger *l, const char *uuid)
{
    if (!l || !l->n_slots)
        return NULL;
    size_t *s = slot_of(l, uuid);
    return *s ? l->entries[*s - 1] : NULL;
}

/* No previous reading: every value absent, no time, no mark. A note compares this reading with
 * it (balloon risen: memory given; OOM kills risen: an OOM kill), so zeroes would make the first
 * note of a domain new to the ledger mark both. */
static const BmPrevReading no_reading = {
    .major_faults = BM_ABSENT, .swap_in_bytes = BM_ABSENT, .last_update_s = BM_ABSENT,
    .used_bytes = BM_ABSENT, .actual_bytes = BM_ABSENT, .used_peak_bytes = BM_ABSENT,
    .disk_read_bytes = BM_ABSENT, .cpu_time_ns = BM_ABSENT, .inflated_from_bytes = BM_ABSENT,
    .read_base_Bps = BM_ABSENT, .oom_kills = BM_ABSENT, .alloc_stalls = BM_ABSENT,
    .direct_reclaim_bytes = BM_ABSENT};

BmLedgerEntry *bm_ledger_entry(BmLedger *l, const char *uuid, const char *name)
{
    BmLedgerEntry *found = (BmLedgerEntry *)bm_ledger_find(l, uuid);
    if (found) {
        if (name && strcmp(found->name, name) != 0)
            bm_copy_name(found->name, sizeof(found->name), name);
        return found;
    }
    if (l->n_entries == l->cap_entries) { /* doubling: n additions cost O(n), not O(n^2) */
        l->cap_entries = l->cap_entries ? 2 * l->cap_entries : 16;
        l->entries = bm_reallocarray(l->entries, l->cap_entries, sizeof(*l->entries));
    }
    BmLedgerEntry *e = l->entries[l->n_entries++] = bm_malloc0(sizeof(BmLedgerEntry));
    *e = (BmLedgerEntry){.prev = no_reading,
                         .last_target_bytes = BM_ABSENT,
                         .last_reached_bytes = BM_ABSENT,
                         .last_duration_s = -1,
                         .last_direction = -1,
                         .last_rss_drop_bytes = BM_ABSENT,
                         .sg = BM_FEAT_UNKNOWN,
                         .ioeventfd = BM_SWITCH_UNKNOWN,
                         .reporting = BM_FEAT_UNKNOWN,
                         .deflate_on_oom = BM_FEAT_UNKNOWN,
                         .seen = l->generation};
    snprintf(e->uuid, sizeof(e->uuid), "%s", uuid);
    bm_copy_name(e->name, sizeof(e->name), name);
    if (l->n_entries * 2 + 2 > l->n_slots)
        reindex(l);
    else
        *slot_of(l, e->uuid) = l->n_entries;
    return e;
}

void bm_ledger_boot_key(const char *boot_id, const BmDomain *d, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%d", boot_id && boot_id[0] ? boot_id : "-", d->id);
}

bool bm_ledger_verdict_current(const BmLedgerEntry *e, const BmDomain *d, const char *boot_id)
{
    if (!e || !e->features_known || !d->active)
        return false;
    char boot[sizeof(e->boot)];
    bm_ledger_boot_key(boot_id, d, boot, sizeof(boot));
    return strcmp(e->boot, boot) == 0;
}

void bm_ledger_sync_begin(BmLedger *l)
{
    ++l->generation;
}

void bm_ledger_sync_entry(BmLedger *l, BmLedgerEntry *e, const BmDomain *d, const char *boot_id,
                          uint64_t now_s)
{
    e->seen = l->generation;
    char boot[sizeof(e->boot)] = "";
    if (d->active)
        bm_ledger_boot_key(boot_id, d, boot, sizeof(boot));
    if (strcmp(boot, e->boot) != 0) { /* stopped or started again: probed when it runs */
        e->features_known = false;
        e->qom_path[0] = '\0';
        e->starve_warned = false;
        e->qemu_own_s = 0;
        /* a start we knew has ended: its reading (counters since that boot, the usage peak,
         * the episode's marks) is not this start's. An entry without a start (read from a
         * state file that kept none) keeps its reading. */
        if (e->boot[0]) {
            e->prev = no_reading;
            e->have_prev = false;
        }
        memcpy(e->boot, boot, sizeof(boot));
    }
    /* a hold-off from the future (a clock set back, a hand-edited state file, one from
     * another host) would keep the domain unmanaged for ever: at most the documented
     * hold-off from now, and saved so */
    if (e->unresponsive && e->unresponsive_until_s > now_s + BM_UNRESPONSIVE_HOLDOFF_S)
        e->unresponsive_until_s = now_s + BM_UNRESPONSIVE_HOLDOFF_S;
    if (e->unresponsive &&
        (now_s >= e->unresponsive_until_s ||
         (bm_present(d->actual_bytes) && d->actual_bytes != e->unresponsive_actual)))
        e->unresponsive = false;
}

size_t bm_ledger_sync_end(BmLedger *l)
{
    size_t keep = 0, n = l->n_entries;
    for (size_t i = 0; i < l->n_entries; i++) {
        BmLedgerEntry *e = l->entries[i];
        if (e->seen == l->generation || e->in_flight)
            l->entries[keep++] = e;
        else
            free(e); /* gone: its series go too */
    }
    if (keep != l->n_entries) {
        l->n_entries = keep;
        reindex(l);
    }
    return n - keep;
}

bool bm_ledger_correct_balloon(const BmLedgerEntry *e, BmDomain *d, uint64_t taken_real_ns)
{
    if (!d->active || !e || e->in_flight || !e->last_ended_real_ns ||
        !bm_present(e->last_reached_bytes) || !bm_present(d->actual_bytes) ||
        taken_real_ns < e->last_ended_real_ns ||
        taken_real_ns - e->last_ended_real_ns >= BM_BALLOON_READING_LAG_NS)
        return false;
    uint64_t a = d->actual_bytes, b = e->last_reached_bytes;
    if (bm_distance(a, b) < (1ull << 20))
        return false;
    d->actual_bytes = b;
    return true;
}

void bm_ledger_note_mode(BmLedger *l, BmHostMode mode)
{
    l->mode = mode;
    for (size_t i = 0; i < l->n_entries; i++)
        l->entries[i]->have_prev = false;
}

void bm_ledger_note_reading(BmLedgerEntry *e, const BmDomain *d, BmHostMode mode, uint64_t now_s,
                            unsigned horizon_s)
{
    if (!d->active || !d->uuid[0])
        return;
    const uint64_t window = bm_used_peak_window_s(horizon_s);
    uint64_t used = bm_domain_used_bytes(d), peak = used, peak_s = now_s;
    /* the peak holds until it is window old, then restarts from this reading */
    if (bm_present(used) && bm_present(e->prev.used_peak_bytes) &&
        e->prev.used_peak_bytes > used && e->prev.used_peak_s <= now_s &&
        now_s - e->prev.used_peak_s < window) {
        peak = e->prev.used_peak_bytes;
        peak_s = e->prev.used_peak_s;
    }
    /* memory given to it in this pressure episode: a balloon that rose by 1 MiB or more */
    uint64_t given_s = 0;
    if (mode != BM_HOST_RELEASE) {
        if (bm_prev_given(&e->prev, now_s))
            given_s = e->prev.given_s;
        if (bm_present(e->prev.actual_bytes) && bm_present(d->actual_bytes) &&
            d->actual_bytes >= e->prev.actual_bytes + (1ull << 20))
            given_s = now_s;
    }
    /* the episode's marks hold until the host is comfortable */
    uint64_t from = BM_ABSENT, base = BM_ABSENT, hot_s = 0;
    if (mode != BM_HOST_RELEASE) {
        from = e->prev.inflated_from_bytes;
        base = e->prev.read_base_Bps;
        hot_s = bm_prev_cache_hot(&e->prev, now_s) ? e->prev.cache_hot_s : 0;
    }
    uint64_t oom_s = mode != BM_HOST_RELEASE ? bm_prev_oom_at(&e->prev, d, now_s) : 0;
    if (mode == BM_HOST_RELEASE || !bm_episode_mark_holds(e->vmem_refused_s, now_s))
        e->vmem_refused_s = 0; /* the episode ends: a refusal is asked again */
    uint64_t busy_s = e->prev.busy_s && e->prev.busy_s <= now_s && now_s - e->prev.busy_s < BM_BUSY_HOLD_S
                          ? e->prev.busy_s
                          : 0;
    e->have_prev = true;
    e->prev = (BmPrevReading){.major_faults = d->major_faults,
                              .swap_in_bytes = d->swap_in_bytes,
                              .last_update_s = d->last_update_s,
                              .taken_s = now_s,
                              .taken_ns = d->read_real_ns,
                              .used_bytes = used,
                              .actual_bytes = d->actual_bytes,
                              .used_peak_bytes = peak,
                              .used_peak_s = peak_s,
                              .given_s = given_s,
                              .disk_read_bytes = d->disk_read_bytes,
                              .cpu_time_ns = d->cpu_time_ns,
                              .inflated_from_bytes = from,
                              .read_base_Bps = base,
                              .cache_hot_s = hot_s,
                              .oom_kills = d->starve.oom_kills,
                              .alloc_stalls = d->starve.alloc_stalls,
                              .direct_reclaim_bytes = d->starve.direct_reclaim_bytes,
                              .oom_s = oom_s,
                              .busy_s = busy_s};
}

void bm_ledger_note_episode(BmLedgerEntry *e, uint64_t from_bytes, uint64_t read_Bps,
                            bool cache_hot, bool busy, uint64_t now_s)
{
    if (busy)
        e->prev.busy_s = now_s;
    if (bm_present(from_bytes) && !bm_present(e->prev.inflated_from_bytes)) {
        e->prev.inflated_from_bytes = from_bytes;
        e->prev.read_base_Bps = read_Bps;
    }
    if (cache_hot)
        e->prev.cache_hot_s = now_s;
}

void bm_ledger_record_start(BmLedger *l, BmLedgerEntry *e, uint64_t from_bytes,
                            uint64_t target_bytes)
{
    e->in_flight = true;
    e->last_target_bytes = target_bytes;
    if (target_bytes != from_bytes)
        bm_count_add(&l->counters.target_changes[target_bytes < from_bytes ? BM_DIR_INFLATE
                                                                           : BM_DIR_DEFLATE],
                     1);
}

void bm_ledger_record_change(BmLedger *l, BmLedgerEntry *e, const BmTracked *t, bool ours,
                             uint64_t now_s)
{
    const BmChange *ch = &t->change;
    BmCounters *c = &l->counters;
    int dir = ch->target_bytes < ch->from_bytes ? BM_DIR_INFLATE : BM_DIR_DEFLATE;
    BmChangeOutcome out = ch->outcome < BM_CHANGE_ENDED_COUNT ? ch->outcome : BM_CHANGE_FAILED;
    double secs = ch->duration_ns / 1e9;
    int dev = t->vmem ? BM_DEV_VIRTIO_MEM : BM_DEV_BALLOON;
    bm_count_add(&c->changes[dev][dir][out], 1);
    if (!e)
        e = bm_ledger_entry(l, t->uuid, t->name);
    else if (strcmp(e->name, t->name) != 0)
        bm_copy_name(e->name, sizeof(e->name), t->name);
    /* `set --wait` does not ask the QEMU monitor (it would taint the domain): its changes get
     * the verdict known here of the domain, if any */
    BmSgLabel sgl = t->sg < BM_SGL_COUNT ? t->sg : BM_SGL_UNKNOWN;
    if (sgl == BM_SGL_UNKNOWN && e->features_known && !t->vmem) /* SG is the balloon's */
        sgl = bm_sg_label(e->sg, true);
    if (out == BM_CHANGE_REACHED)
        bm_histogram_observe(&c->latency[dev][dir][sgl], secs);

    e->last_duration_s = secs;
    e->last_direction = dir;
    if (out != BM_CHANGE_FAILED && bm_present(ch->reached_bytes)) {
        e->last_reached_bytes = ch->reached_bytes;
        e->last_ended_real_ns = ch->finished_real_ns;
    }
    if (dir == BM_DIR_INFLATE && bm_present(t->rss_before_bytes) && bm_present(t->rss_after_bytes)) {
        uint64_t drop = t->rss_before_bytes > t->rss_after_bytes
                            ? t->rss_before_bytes - t->rss_after_bytes
                            : 0;
        e->last_rss_drop_bytes = drop;
        bm_count_add(&c->rss_dropped_bytes, drop);
    }
    bm_yield_learn(&e->yield, ch->from_bytes, ch->reached_bytes, t->rss_before_bytes,
                   t->rss_after_bytes, strcmp(t->why, "free") == 0);
    e->unresponsive = out == BM_CHANGE_STALLED || out == BM_CHANGE_TIMEOUT;
    /* a guest that unplugged part of what it was asked and no more refused the rest (it
     * unplugs only movable memory): not unresponsive, but asked no lower in the episode */
    if (t->vmem && dir == BM_DIR_INFLATE && out == BM_CHANGE_STALLED &&
        bm_present(ch->reached_bytes) && ch->reached_bytes > ch->target_bytes) {
        e->vmem_refused_bytes = ch->reached_bytes;
        e->vmem_refused_s = now_s;
        bm_count_add(&e->vmem_refused_total_bytes, ch->reached_bytes - ch->target_bytes);
        e->unresponsive = ch->reached_bytes >= ch->from_bytes;
    }
    if (e->unresponsive) {
        e->unresponsive_actual = ch->reached_bytes;
        e->unresponsive_until_s = now_s + BM_UNRESPONSIVE_HOLDOFF_S;
    }
    if (ours)
        e->in_flight = false;
}

void bm_ledger_record_dropped(BmLedgerEntry *e)
{
    if (e)
        e->in_flight = false;
}

void bm_ledger_forget_xml(BmLedger *l)
{
    for (size_t i = 0; i < l->n_entries; i++)
        l->entries[i]->balloon_cached = false;
}

void bm_ledger_count_error(BmLedger *l, BmErrorKind kind)
{
    bm_count_add(&l->counters.errors[kind], 1);
}
