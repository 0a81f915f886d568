/* The ledger on its own (ledger.h): what a sync keeps, adds and drops, the unresponsive
 * hold-off, the usage peak, recording a change's start and outcome, whether a stored verdict
 * belongs to the current start, and the persistence round trip of all of it (state.c). Plain
 * structs: the ledger calls no libvirt and reads no file. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "ledger.h"
#include "state.h"
#include "route.h"
#include "tap.h"
#include "util.h"

#define MiB (1024ull * 1024)
#define NOW 1800000000ull
#define U1 "11111111-2222-3333-4444-555555555555"
#define U2 "22222222-2222-3333-4444-555555555555"
#define U3 "33333333-2222-3333-4444-555555555555"
#define BOOT "0b5e1d00-0000-4000-8000-000000000001"

static BmDomain running(const char *uuid, const char *name, int id, uint64_t actual, uint64_t used)
{
    BmDomain d = {.name = (char *)name, .state = 1 /* VIR_DOMAIN_RUNNING */, .id = id,
                  .active = true, .max_bytes = 4096 * MiB, .actual_bytes = actual,
                  .available_bytes = actual, .usable_bytes = actual - used,
                  .unused_bytes = BM_ABSENT, .disk_caches_bytes = BM_ABSENT,
                  .rss_bytes = BM_ABSENT, .swap_in_bytes = 0, .swap_out_bytes = 0,
                  .major_faults = 0, .minor_faults = 0, .last_update_s = NOW};
    snprintf(d.uuid, sizeof(d.uuid), "%s", uuid);
    return d;
}

/* A new ledger with one running domain, U1 ("a", 2048 MiB of balloon) that uses `used`,
 * synced at NOW: the start of the tests of one domain. */
typedef struct {
    BmLedger l;
    BmDomain d;
    BmSnapshot s;
} OneDomain;

static void one_domain(OneDomain *f, uint64_t used)
{
    bm_ledger_init(&f->l);
    f->d = running(U1, "a", 1, 2048 * MiB, used);
    f->s = (BmSnapshot){.domains = &f->d, .n_domains = 1};
    route_sync(&f->l, &f->s, BOOT, NOW);
}

/* A tracked change of uuid that ended with outcome, from -> reached, taking secs. */
static BmTracked ended(const char *uuid, BmChangeOutcome outcome, uint64_t from, uint64_t target,
                       uint64_t reached, double secs)
{
    BmTracked t = {.change = {.outcome = outcome, .from_bytes = from, .target_bytes = target,
                              .reached_bytes = reached, .duration_ns = (uint64_t)(secs * 1e9),
                              .finished_real_ns = NOW * 1000000000ull},
                   .rss_before_bytes = BM_ABSENT, .rss_after_bytes = BM_ABSENT};
    snprintf(t.uuid, sizeof(t.uuid), "%s", uuid);
    t.name = (char *)"web";
    t.sg = BM_SGL_UNKNOWN;
    return t;
}

static void test_sync(void)
{
    BmLedger l;
    bm_ledger_init(&l);
    BmDomain d[3] = {running(U1, "a", 1, 2048 * MiB, 512 * MiB),
                     running(U2, "b", 2, 2048 * MiB, 512 * MiB),
                     running(U3, "c", 3, 2048 * MiB, 512 * MiB)};
    BmSnapshot s = {.domains = d, .n_domains = 3};
    route_sync(&l, &s, BOOT, NOW);
    is_u64(l.n_entries, 3, "sync: one entry per domain of the reading");
    ok(bm_ledger_find(&l, U2) && strcmp(bm_ledger_find(&l, U2)->name, "b") == 0,
       "  found by UUID, with its name");

    /* b probed at this start, c in flight */
    BmLedgerEntry *b = bm_ledger_entry(&l, U2, NULL);
    b->features_known = true;
    b->sg = BM_FEAT_NEGOTIATED;
    bm_ledger_boot_key(BOOT, &d[1], b->boot, sizeof(b->boot));
    ok(strcmp(b->boot, BOOT "/2") == 0, "the boot key: host boot id / domain id (%s)", b->boot);
    ok(bm_ledger_verdict_current(b, &d[1], BOOT), "  the verdict is of the current start");
    ok(!bm_ledger_verdict_current(b, &d[1], "another-boot"), "  not after a host reboot");
    bm_ledger_record_start(&l, bm_ledger_entry(&l, U3, NULL), 2048 * MiB, 1024 * MiB);

    /* a and c leave the reading; b restarts (new id) */
    d[1].id = 9;
    BmSnapshot s2 = {.domains = &d[1], .n_domains = 1};
    ok(!bm_ledger_verdict_current(bm_ledger_find(&l, U2), &d[1], BOOT),
       "a restarted domain's stored verdict is not current");
    route_sync(&l, &s2, BOOT, NOW + 1);
    ok(!bm_ledger_find(&l, U1), "sync: a domain gone from the reading is dropped");
    ok(bm_ledger_find(&l, U3) && bm_ledger_find(&l, U3)->in_flight,
       "  unless a change of ours is in flight");
    ok(bm_ledger_find(&l, U2) && !bm_ledger_find(&l, U2)->features_known,
       "  a restarted domain's verdict is forgotten (probed again)");
    d[1].active = false;
    ok(!bm_ledger_verdict_current(bm_ledger_find(&l, U2), &d[1], BOOT),
       "a domain not running has no current verdict");
    ok(!bm_ledger_verdict_current(NULL, &d[1], BOOT), "  nor one without an entry");

    /* entries stay where they are as the ledger grows */
    const BmLedgerEntry *u2 = bm_ledger_find(&l, U2);
    char uuid[40];
    for (int i = 0; i < 100; i++) {
        snprintf(uuid, sizeof(uuid), "%08d-0000-0000-0000-000000000000", i);
        bm_ledger_entry(&l, uuid, "x");
    }
    ok(u2 && bm_ledger_find(&l, U2) == u2, "100 entries added: an entry stays where it was");
    bm_ledger_clear(&l);
}

static void test_hold_off(void)
{
    OneDomain f;
    one_domain(&f, 512 * MiB);
    bm_ledger_record_start(&f.l, bm_ledger_entry(&f.l, U1, NULL), 2048 * MiB, 1024 * MiB);
    BmTracked t = ended(U1, BM_CHANGE_STALLED, 2048 * MiB, 1024 * MiB, 2000 * MiB, 10);
    bm_ledger_record_change(&f.l, NULL, &t, true, NOW);
    const BmLedgerEntry *e = bm_ledger_find(&f.l, U1);
    ok(e->unresponsive && e->unresponsive_actual == 2000 * MiB &&
           e->unresponsive_until_s == NOW + BM_UNRESPONSIVE_HOLDOFF_S,
       "a stalled change marks the domain unresponsive for %d s at its balloon",
       BM_UNRESPONSIVE_HOLDOFF_S);
    ok(!e->in_flight, "  and ends its flight");
    f.d.actual_bytes = 2000 * MiB;
    route_sync(&f.l, &f.s, BOOT, NOW + 60);
    ok(bm_ledger_find(&f.l, U1)->unresponsive, "hold-off: still unresponsive a minute later");
    f.d.actual_bytes = 1900 * MiB;
    route_sync(&f.l, &f.s, BOOT, NOW + 61);
    ok(!bm_ledger_find(&f.l, U1)->unresponsive, "  over once its balloon moved");

    t = ended(U1, BM_CHANGE_TIMEOUT, 1900 * MiB, 1024 * MiB, 1900 * MiB, 120);
    bm_ledger_record_change(&f.l, NULL, &t, true, NOW + 100);
    route_sync(&f.l, &f.s, BOOT, NOW + 100 + BM_UNRESPONSIVE_HOLDOFF_S - 1);
    ok(bm_ledger_find(&f.l, U1)->unresponsive, "a timeout marks it too, until the hold-off ends");
    route_sync(&f.l, &f.s, BOOT, NOW + 100 + BM_UNRESPONSIVE_HOLDOFF_S);
    ok(!bm_ledger_find(&f.l, U1)->unresponsive, "  and not after");
    bm_ledger_clear(&f.l);
}

static void test_usage_peak(void)
{
    OneDomain f;
    one_domain(&f, 900 * MiB);
    route_note(&f.l, &f.s, BOOT, BM_HOST_RECLAIM, NOW, 0);
    const BmLedgerEntry *e = bm_ledger_find(&f.l, U1);
    ok(e->have_prev && e->prev.used_bytes == 900 * MiB && e->prev.used_peak_bytes == 900 * MiB,
       "note: the reading kept, its use the peak");
    ok(f.l.mode == BM_HOST_RECLAIM, "  and the host mode");
    f.d.usable_bytes = f.d.available_bytes - 300 * MiB; /* it now uses 300 MiB */
    route_note(&f.l, &f.s, BOOT, BM_HOST_RECLAIM, NOW + 30, 0);
    ok(e->prev.used_bytes == 300 * MiB && e->prev.used_peak_bytes == 900 * MiB &&
           e->prev.used_peak_s == NOW,
       "usage peak: what it used 30 s ago still counts");
    route_note(&f.l, &f.s, BOOT, BM_HOST_RECLAIM, NOW + BM_USED_PEAK_S, 0);
    ok(e->prev.used_peak_bytes == 300 * MiB && e->prev.used_peak_s == NOW + BM_USED_PEAK_S,
       "  not after %d s: the peak restarts from this reading", BM_USED_PEAK_S);
    ok(bm_used_peak_window_s(60) == 150, "a timer's window: 2.5 of its intervals");

    /* the balloon rose while the host was not comfortable: given memory */
    f.d.actual_bytes = 2200 * MiB;
    f.d.available_bytes = 2200 * MiB;
    route_note(&f.l, &f.s, BOOT, BM_HOST_HOLD, NOW + 70, 0);
    ok(e->prev.given_s == NOW + 70 && bm_prev_given(&e->prev, NOW + 71),
       "a risen balloon marks the domain given memory");
    route_note(&f.l, &f.s, BOOT, BM_HOST_RELEASE, NOW + 80, 0);
    ok(e->prev.given_s == 0, "  a comfortable host ends the episode");
    bm_ledger_clear(&f.l);
}

/* A domain new to the ledger (started, or defined by another run, during a pressure episode; or
 * every domain at the agent's first pass) has no previous reading: its first note marks no
 * memory given and no OOM kill, whatever its balloon and its counters since boot. */
static void test_first_reading(void)
{
    OneDomain f;
    one_domain(&f, 900 * MiB);
    f.d.starve = BM_STARVE_STATS_ABSENT;
    f.d.starve.oom_kills = 3; /* killed before balloonmgr saw it */
    const BmLedgerEntry *e = bm_ledger_find(&f.l, U1);
    ok(e && !e->have_prev && !bm_present(e->prev.actual_bytes) && !bm_present(e->prev.oom_kills) &&
           !bm_present(e->prev.disk_read_bytes) && !bm_present(e->prev.used_peak_bytes),
       "a new entry: no previous reading (every value absent)");
    route_note(&f.l, &f.s, BOOT, BM_HOST_RECLAIM, NOW, 0);
    ok(e->prev.given_s == 0 && !bm_prev_given(&e->prev, NOW + 2),
       "  its first note while reclaiming: its balloon did not rise, no memory given");
    ok(e->prev.oom_s == 0 && bm_prev_oom_at(&e->prev, &f.d, NOW + 2) == 0,
       "  and no OOM kill in this episode");
    f.d.starve.oom_kills = 4;
    ok(bm_prev_oom_at(&e->prev, &f.d, NOW + 2) == NOW + 2, "  one after it is");
    bm_ledger_clear(&f.l);
}

/* A domain started again (a new domain id, or the host rebooted) or stopped: the previous
 * reading belonged to the start that ended (counters since that boot, its usage peak, the
 * episode's marks), so the next note starts from nothing. An entry that knew no start (a state
 * file that kept none) keeps its reading. */
static void test_restart_drops_reading(void)
{
    OneDomain f;
    one_domain(&f, 900 * MiB);
    f.d.major_faults = 5000;
    route_note(&f.l, &f.s, BOOT, BM_HOST_RECLAIM, NOW, 0);
    BmLedgerEntry *e = bm_ledger_entry(&f.l, U1, NULL);
    ok(e->have_prev && e->prev.used_peak_bytes == 900 * MiB && e->prev.major_faults == 5000,
       "restart: a reading noted (peak 900 MiB, 5000 major faults)");
    route_sync(&f.l, &f.s, BOOT, NOW + 2);
    ok(e->have_prev && e->prev.used_peak_bytes == 900 * MiB, "  the same start: kept");
    f.d.id = 7; /* destroyed and started again between two passes */
    f.d.major_faults = 10;
    f.d.usable_bytes = f.d.actual_bytes - 100 * MiB;
    route_sync(&f.l, &f.s, BOOT, NOW + 4);
    ok(!e->have_prev && !bm_present(e->prev.used_peak_bytes) && !bm_present(e->prev.major_faults),
       "  started again: the old start's reading dropped");
    route_note(&f.l, &f.s, BOOT, BM_HOST_RECLAIM, NOW + 4, 0);
    ok(e->prev.used_peak_bytes == 100 * MiB && e->prev.given_s == 0,
       "  the new start's first note: its own peak (100 MiB), no memory given");
    f.d.active = false;
    route_sync(&f.l, &f.s, BOOT, NOW + 6);
    ok(!e->have_prev && e->boot[0] == '\0', "  stopped: dropped too");
    f.d.active = true;
    route_sync(&f.l, &f.s, BOOT, NOW + 8);
    route_note(&f.l, &f.s, BOOT, BM_HOST_RECLAIM, NOW + 8, 0);
    e->boot[0] = '\0'; /* as read from a state file without the start */
    route_sync(&f.l, &f.s, BOOT, NOW + 10);
    ok(e->have_prev && e->prev.used_peak_bytes == 100 * MiB,
       "  an entry that knew no start keeps its reading");
    bm_ledger_clear(&f.l);
}

static void test_record_change(void)
{
    OneDomain f;
    one_domain(&f, 512 * MiB);
    bm_ledger_record_start(&f.l, bm_ledger_entry(&f.l, U1, NULL), 2048 * MiB, 1024 * MiB);
    const BmLedgerEntry *e = bm_ledger_find(&f.l, U1);
    ok(e->in_flight && e->last_target_bytes == 1024 * MiB, "start: in flight, its target kept");
    is_u64(f.l.counters.target_changes[BM_DIR_INFLATE], 1, "  one inflate target counted");

    BmTracked t = ended(U1, BM_CHANGE_REACHED, 2048 * MiB, 1024 * MiB, 1024 * MiB, 0.5);
    t.rss_before_bytes = 2100 * MiB;
    t.rss_after_bytes = 1150 * MiB;
    bm_ledger_record_change(&f.l, NULL, &t, true, NOW + 1);
    ok(!e->in_flight && !e->unresponsive, "reached: no longer in flight, not unresponsive");
    is_u64(f.l.counters.changes[BM_DEV_BALLOON][BM_DIR_INFLATE][BM_CHANGE_REACHED], 1, "  counted reached");
    is_u64(f.l.counters.latency[BM_DEV_BALLOON][BM_DIR_INFLATE][BM_SGL_UNKNOWN].count, 1, "  its latency observed");
    ok(e->last_duration_s == 0.5 && e->last_direction == BM_DIR_INFLATE, "  duration, direction");
    is_u64(e->last_rss_drop_bytes, 950 * MiB, "  the QEMU RSS drop");
    is_u64(f.l.counters.rss_dropped_bytes, 950 * MiB, "  summed");
    ok(e->yield.inflated_bytes == 1024 * MiB && e->yield.returned_bytes == 950 * MiB,
       "  what the inflate yielded, learned");
    ok(e->last_reached_bytes == 1024 * MiB && e->last_ended_real_ns == NOW * 1000000000ull,
       "  the balloon it reached and when (the reading's correction)");

    /* another process's change (spooled) does not end a flight of ours */
    bm_ledger_record_start(&f.l, bm_ledger_entry(&f.l, U1, NULL), 1024 * MiB, 2048 * MiB);
    t = ended(U1, BM_CHANGE_FAILED, 1024 * MiB, 1500 * MiB, BM_ABSENT, 1);
    bm_ledger_record_change(&f.l, NULL, &t, false, NOW + 2);
    ok(e->in_flight, "another process's change: ours still in flight");
    is_u64(f.l.counters.changes[BM_DEV_BALLOON][BM_DIR_DEFLATE][BM_CHANGE_FAILED], 1, "  its outcome counted");
    is_u64(f.l.counters.latency[BM_DEV_BALLOON][BM_DIR_DEFLATE][BM_SGL_UNKNOWN].count, 0,
           "  a failed change has no latency");
    bm_ledger_record_dropped(bm_ledger_entry(&f.l, U1, NULL));
    ok(!e->in_flight, "a change forgotten (connection gone): no longer in flight");

    /* a known verdict labels a change that came without one */
    BmLedgerEntry *w = bm_ledger_entry(&f.l, U1, NULL);
    w->features_known = true;
    w->sg = BM_FEAT_NEGOTIATED;
    t = ended(U1, BM_CHANGE_REACHED, 1024 * MiB, 2048 * MiB, 2048 * MiB, 0.2);
    bm_ledger_record_change(&f.l, NULL, &t, false, NOW + 3);
    is_u64(f.l.counters.latency[BM_DEV_BALLOON][BM_DIR_DEFLATE][BM_SGL_NEGOTIATED].count, 1,
           "a change labelled unknown gets the domain's known verdict");
    bm_ledger_clear(&f.l);
}

static void test_persistence(void)
{
    BmLedger l;
    bm_ledger_init(&l);
    BmDomain d[2] = {running(U1, "a", 1, 2048 * MiB, 512 * MiB),
                     running(U2, "b", 2, 3072 * MiB, 1024 * MiB)};
    BmSnapshot s = {.domains = d, .n_domains = 2};
    route_sync(&l, &s, BOOT, NOW);
    route_note(&l, &s, BOOT, BM_HOST_RECLAIM, NOW, 0);
    BmLedgerEntry *b = bm_ledger_entry(&l, U2, NULL);
    b->features_known = true;
    b->sg = BM_FEAT_NOT_OFFERED;
    b->ioeventfd = BM_SWITCH_ON;
    bm_ledger_boot_key(BOOT, &d[1], b->boot, sizeof(b->boot));
    bm_ledger_record_start(&l, bm_ledger_entry(&l, U1, NULL), 2048 * MiB, 1024 * MiB);
    BmTracked t = ended(U1, BM_CHANGE_STALLED, 2048 * MiB, 1024 * MiB, 1800 * MiB, 10);
    t.rss_before_bytes = 2100 * MiB;
    t.rss_after_bytes = 1900 * MiB;
    bm_ledger_record_change(&l, NULL, &t, true, NOW + 10);
    bm_ledger_count_error(&l, BM_ERR_APPLY);

    _cleanup_free_ char *text = bm_state_format(&l, NOW + 10);
    BmLedger back;
    int r = bm_state_parse(text, &back);
    ok(r == 0, "persistence: the ledger saved is read back (%s)", r < 0 ? bm_error_detail(r) : "ok");
    if (r < 0) {
        bm_ledger_clear(&l);
        return;
    }
    ok(back.mode == BM_HOST_RECLAIM && back.n_entries == 2, "  its mode and both domains");
    const BmLedgerEntry *a1 = bm_ledger_find(&back, U1), *b1 = bm_ledger_find(&back, U2);
    ok(a1 && a1->have_prev && a1->prev.used_bytes == 512 * MiB && a1->prev.taken_s == NOW,
       "  the previous reading");
    ok(a1 && a1->unresponsive && a1->unresponsive_actual == 1800 * MiB &&
           a1->unresponsive_until_s == NOW + 10 + BM_UNRESPONSIVE_HOLDOFF_S,
       "  the unresponsive mark and its hold-off");
    ok(a1 && a1->yield.inflated_bytes == l.entries[0]->yield.inflated_bytes &&
           a1->yield.returned_bytes == l.entries[0]->yield.returned_bytes,
       "  what its inflates yielded");
    ok(b1 && bm_ledger_verdict_current(b1, &d[1], BOOT) && b1->sg == BM_FEAT_NOT_OFFERED &&
           b1->ioeventfd == BM_SWITCH_ON,
       "  the verdict, still current for the same start");
    is_u64(back.counters.changes[BM_DEV_BALLOON][BM_DIR_INFLATE][BM_CHANGE_STALLED], 1, "  the outcome counters");
    is_u64(back.counters.target_changes[BM_DIR_INFLATE], 1, "  the target counters");
    is_u64(back.counters.errors[BM_ERR_APPLY], 1, "  the error counters");
    is_u64(back.counters.rss_dropped_bytes, 200 * MiB, "  the RSS dropped");
    bm_ledger_clear(&back);
    bm_ledger_clear(&l);
}

int main(void)
{
    test_sync();
    test_hold_off();
    test_usage_peak();
    test_first_reading();
    test_restart_drops_reading();
    test_record_change();
    test_persistence();
    return tap_done();
}
