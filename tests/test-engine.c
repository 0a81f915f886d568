/* The engine on libvirt's test driver (the demo host, demo/host.xml) under a fake /proc whose
 * host is short of memory: a pass builds one row per domain with its ledger entry and its rules
 * (resolved once per domain per pass), its decisions are applied to the domains of their UUID,
 * the changes are tracked by the engine and their outcomes recorded into the ledger; a new
 * reading after the pass still finds each domain's decision. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conn.h"
#include "engine.h"
#include "error.h"
#include "fixture.h"
#include "tap.h"
#include "util.h"

#define MiB (1024ull * 1024)
#define BOOT "0b5e1d00-0000-4000-8000-00000000e9e1"

static char proc[] = "/tmp/bm-test-engine.XXXXXX";

/* per-CPU free lists 77000 pages (300 MiB of 4 KiB pages) above their rest */
#define ZONEINFO "Node 0, zone Normal\n  pagesets\n    cpu: 0\n      count: 87000\n      high_min: 10000\n" \
                 "    cpu: 1\n      count: 10000\n      high_min: 10000\n"


static void put(const char *rel, const char *text)
{
    if (!fixture_write_in(proc, rel, text))
        ok(false, "cannot write the fake %s/%s", proc, rel);
}

/* A fake /proc: 64 GiB, 2 GiB available (below the default reclaim_below), calm PSI, a boot id. */
static void make_proc(void)
{
    if (!mkdtemp(proc))
        return;
    for (const char *const *d = (const char *const[]){"pressure", "sys", "sys/kernel",
                                                      "sys/kernel/random", "sys/vm", NULL};
         *d; d++) {
        _cleanup_free_ char *path = bm_asprintf("%s/%s", proc, *d);
        mkdir(path, 0755);
    }
    put("meminfo", "MemTotal: 67108864 kB\nMemAvailable: 2097152 kB\n");
    put("pressure/memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
                           "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
    put("sys/kernel/random/boot_id", BOOT "\n");
    /* 300 MiB free on the per-CPU lists above their rest, which never fall */
    put("zoneinfo", ZONEINFO);
    put("sys/vm/stat_refresh", "");
}


/* What was written to the fake stat_refresh since the last call (emptied). */
static char *refreshed(void)
{
    _cleanup_free_ char *path = bm_asprintf("%s/sys/vm/stat_refresh", proc);
    char *text = NULL;
    FILE *f = fopen(path, "r");
    size_t n = 0;
    if (f) {
        text = bm_malloc0(64);
        n = fread(text, 1, 63, f);
        fclose(f);
    }
    if (text)
        text[n] = '\0';
    put("sys/vm/stat_refresh", "");
    return text;
}

static void remove_proc(void)
{
    static const char *const files[] = {"sys/kernel/random/boot_id", "sys/kernel/random",
                                        "sys/kernel", "sys/vm/stat_refresh", "sys/vm", "sys",
                                        "pressure/memory", "pressure", "meminfo", "zoneinfo"};
    for (size_t i = 0; i < BM_ARRAY_SIZE(files); i++) {
        _cleanup_free_ char *path = bm_asprintf("%s/%s", proc, files[i]);
        if (unlink(path) < 0)
            rmdir(path);
    }
    rmdir(proc);
}

int main(void)
{
    make_proc();
    bm_conn_init();
    char boot[40];
    is_str(bm_hostmem_read_boot_id(proc, boot, sizeof(boot)), BOOT,
           "the host's boot id is read through the proc root");
    _cleanup_free_ char *uri = bm_asprintf("test://%s/demo/host.xml", SOURCE_ROOT);
    virConnectPtr conn = NULL;
    int r = bm_conn_open(uri, false, &conn);
    ok(r == 0, "open %s (%s)", uri, r < 0 ? bm_error_detail(r) : "ok");
    _cleanup_(bm_policy_freep) BmPolicy *policy = NULL;
    _cleanup_free_ char *errors = NULL;
    /* the test driver stamps its guest statistics in 1989 */
    r = bm_policy_parse("[guest]\nmax_stats_age = off\n\n[domain \"db*\"]\nfloor = 75%\n",
                        "engine.policy", &policy, &errors);
    ok(r == 0, "the policy parses (%s)", errors ? errors : "ok");
    if (!conn || !policy) {
        remove_proc();
        return tap_done();
    }

    BmEngineOptions o = {.proc_dir = proc};
    _cleanup_(bm_engine_freep) BmEngine *e = bm_engine_new(&o);
    bm_engine_set_conn(e, conn);
    bm_engine_set_policy(e, policy);

    /* the pass: rows built, the rules resolved once per domain */
    unsigned long lookups = bm_policy_rules_lookups;
    r = bm_engine_pass(e);
    ok(r == 0, "a pass on the test driver (%s)", r < 0 ? bm_error_detail(r) : "ok");
    const BmSnapshot *snap = bm_engine_snapshot(e);
    const BmPlan *plan = bm_engine_plan(e);
    const BmApplied *applied = bm_engine_applied(e);
    const BmLedger *l = bm_engine_ledger(e);
    if (r < 0 || !snap || !plan || !applied) {
        remove_proc();
        return tap_done();
    }
    is_u64(snap->n_domains, 7, "the demo host's seven domains read");
    is_u64(bm_policy_rules_lookups - lookups, snap->n_domains,
           "bm_policy_rules_for once per domain in the pass");
    bool joined = l->n_entries == snap->n_domains;
    for (size_t i = 0; i < snap->n_domains; i++) {
        const BmLedgerEntry *en = bm_ledger_find(l, snap->domains[i].uuid);
        joined &= en && strcmp(en->name, snap->domains[i].name) == 0;
    }
    ok(joined, "  each domain has its ledger entry, with its name");
    ok(plan->mode == BM_HOST_RECLAIM, "  the host is reclaiming: %s", plan->reason);
    is_u64(plan->n_decisions, snap->n_domains, "  one decision per row");
    lookups = bm_policy_rules_lookups;
    bm_engine_guest_in_need(e);
    free(bm_engine_render(e, true));
    is_u64(bm_policy_rules_lookups - lookups, 0, "  the guest watch and the export resolve none again");

    /* the changes: started by UUID, tracked by the engine, their outcomes in the ledger */
    size_t changes = 0, inflates = 0;
    bool all_applied = true;
    for (size_t i = 0; i < plan->n_decisions; i++) {
        const BmDecision *d = &plan->decisions[i];
        if (d->action != BM_ACT_INFLATE && d->action != BM_ACT_DEFLATE)
            continue;
        changes++;
        inflates += d->action == BM_ACT_INFLATE;
        all_applied &= applied[i].applied;
        if (!applied[i].applied)
            diag("%s: %s", d->name, applied[i].error);
        const BmLedgerEntry *en = bm_ledger_find(l, d->uuid);
        all_applied &= en && en->last_target_bytes == d->target_bytes;
    }
    ok(inflates > 0, "the pass plans inflates (%zu of %zu changes)", inflates, changes);
    ok(all_applied, "  every change started, its target kept in the domain's entry");
    size_t left = bm_engine_wait(e, 10);
    is_u64(left, 0, "  the engine's tracker saw them all end");
    uint64_t reached = 0;
    for (int dir = 0; dir < BM_DIR_COUNT; dir++)
        reached += l->counters.changes[dir][BM_CHANGE_REACHED];
    is_u64(reached, changes, "  each outcome recorded into the ledger: reached");
    is_u64(l->counters.target_changes[BM_DIR_INFLATE], inflates, "  the inflate targets counted");

    BmSnapshot after;
    r = bm_snapshot_take(conn, 0, &after);
    bool by_uuid = r == 0, flight_over = true;
    for (size_t i = 0; by_uuid && i < plan->n_decisions; i++) {
        const BmDecision *d = &plan->decisions[i];
        const BmDomain *dom = bm_snapshot_find_uuid(&after, d->uuid);
        by_uuid &= dom && strcmp(dom->name, d->name) == 0 &&
                   ((d->action != BM_ACT_INFLATE && d->action != BM_ACT_DEFLATE) ||
                    dom->actual_bytes / 1024 == d->target_bytes / 1024);
        const BmLedgerEntry *en = bm_ledger_find(l, d->uuid);
        flight_over &= en && !en->in_flight;
    }
    ok(by_uuid, "every decision applied to the domain of its UUID, at its target");
    ok(flight_over, "  no domain left in flight");
    if (r == 0)
        bm_snapshot_clear(&after);

    /* the next pass sees this one's reading as its base */
    r = bm_engine_pass(e);
    snap = bm_engine_snapshot(e);
    bool have_prev = r == 0 && snap;
    for (size_t i = 0; have_prev && i < snap->n_domains; i++)
        if (snap->domains[i].active)
            have_prev &= bm_ledger_find(l, snap->domains[i].uuid)->have_prev;
    ok(have_prev, "a second pass: every running domain has the first one's reading");
    bm_engine_wait(e, 10);

    /* entries added between two passes (spooled changes of domains new to the ledger) leave
     * the others where they are: the rows' entries stay theirs */
    BmLedger *ml = bm_engine_ledger(e);
    const BmLedgerEntry *web1 = NULL;
    for (size_t i = 0; i < ml->n_entries; i++)
        if (strcmp(ml->entries[i]->name, "web1") == 0)
            web1 = ml->entries[i];
    for (int i = 0; i < 200; i++) {
        char uuid[40];
        snprintf(uuid, sizeof(uuid), "%08d-5555-4444-3333-222222222222", i);
        bm_ledger_entry(ml, uuid, "spooled");
    }
    _cleanup_free_ char *moved = bm_engine_render(e, true);
    ok(web1 && bm_ledger_find(ml, web1->uuid) == web1 && moved &&
           strstr(moved, "balloonmgr_domain_info{domain=\"web1\""),
       "200 entries added between passes: the others stay where they were, the export renders them");

    /* a new reading after the pass: each domain still has its decision */
    ok(bm_engine_refresh(e) == 0, "a new reading after the pass");
    _cleanup_free_ char *text = bm_engine_render(e, true);
    snap = bm_engine_snapshot(e);
    bool found = text && snap;
    for (size_t i = 0; found && i < snap->n_domains; i++) {
        _cleanup_free_ char *series =
            bm_asprintf("balloonmgr_domain_short_of_memory{domain=\"%s\"} ", snap->domains[i].name);
        found &= strstr(text, series) != NULL;
    }
    ok(found, "  the export finds every domain's decision of the last pass");

    /* the per-CPU free lists: drained (stat_refresh written) by a reading of a host below
     * release_above; not by one of a comfortable host with no inflate ended since; never in a
     * dry run */
    free(refreshed());
    ok(bm_engine_refresh(e) == 0, "a reading of the short host");
    _cleanup_free_ char *w1 = refreshed();
    ok(w1 && strcmp(w1, "1\n") == 0, "  the lists 300 MiB above their rest: stat_refresh written");
    const BmHost *hr = bm_engine_host(e);
    is_u64(hr ? hr->percpu_free_bytes : 0, 97000 * (uint64_t)sysconf(_SC_PAGESIZE),
           "  the lists' free pages in the host reading");
    _cleanup_free_ char *prom = bm_engine_render(e, true);
    ok(prom && strstr(prom, "\nballoonmgr_host_memory_percpu_free_bytes ") &&
           strstr(prom, "\nballoonmgr_host_memory_percpu_drained_bytes_total 0\n"),
       "  exported: the lists' free pages, and 0 drained (these never fall)");
    put("meminfo", "MemTotal: 67108864 kB\nMemAvailable: 60000000 kB\n");
    ok(bm_engine_refresh(e) == 0, "a reading of the host made comfortable");
    _cleanup_free_ char *w2 = refreshed();
    ok(w2 && !w2[0], "  comfortable, no inflate ended since: the lists left alone");
    put("meminfo", "MemTotal: 67108864 kB\nMemAvailable: 2097152 kB\n");
    BmEngineOptions dry = {.proc_dir = proc, .dry_run = true};
    _cleanup_(bm_engine_freep) BmEngine *de = bm_engine_new(&dry);
    bm_engine_set_conn(de, conn);
    bm_engine_set_policy(de, policy);
    ok(bm_engine_pass(de) == 0, "a dry-run pass of the short host");
    _cleanup_free_ char *w3 = refreshed();
    ok(w3 && !w3[0], "  a dry run never drains");
    bm_engine_set_conn(de, NULL);

    /* status's reading and dry evaluation: the mode of a dry pass, nothing noted, logged or
     * drained; the domains read also when the host cannot be; without a policy, no plan */
    _cleanup_(bm_engine_freep) BmEngine *ev = bm_engine_new(&o); /* not a dry run even */
    bm_engine_set_conn(ev, conn);
    bm_engine_set_policy(ev, policy);
    r = bm_engine_evaluate(ev);
    const BmPlan *ep = bm_engine_plan(ev);
    ok(r == 0 && ep && ep->mode == bm_engine_plan(de)->mode && ep->mode == BM_HOST_RECLAIM,
       "an evaluation decides the dry pass's mode: %s", ep ? ep->reason : bm_error_detail(r));
    ok(bm_engine_ledger(ev)->mode == BM_HOST_HOLD && bm_engine_ledger(ev)->counters.passes == 0,
       "  and notes neither the mode nor a pass in the ledger");
    ok(bm_engine_snapshot(ev) && bm_engine_snapshot(ev)->n_domains == 7 && bm_engine_host(ev),
       "  with the reading of the host and every domain");
    _cleanup_free_ char *w4 = refreshed();
    ok(w4 && !w4[0] && bm_engine_in_flight(ev) == 0,
       "  the short host's lists not drained, no change started (not a dry-run engine)");
    bm_engine_set_conn(ev, NULL);
    put("meminfo", "MemFree: 1 kB\n");
    _cleanup_(bm_engine_freep) BmEngine *nh = bm_engine_new(&dry);
    bm_engine_set_conn(nh, conn);
    bm_engine_set_policy(nh, policy);
    r = bm_engine_evaluate(nh);
    ok(r < 0 && strstr(bm_error_detail(r), "host memory: ") && !bm_engine_host(nh) &&
           bm_engine_snapshot(nh) && !bm_engine_plan(nh),
       "a host that cannot be read: the domains read, nothing decided (%s)", bm_error_detail(r));
    bm_engine_set_conn(nh, NULL);
    put("meminfo", "MemTotal: 67108864 kB\nMemAvailable: 2097152 kB\n");
    _cleanup_(bm_engine_freep) BmEngine *np = bm_engine_new(&dry);
    bm_engine_set_conn(np, conn);
    r = bm_engine_evaluate(np);
    ok(r == 0 && bm_engine_host(np) && bm_engine_snapshot(np) && !bm_engine_plan(np),
       "no policy: the reading, no plan");
    bm_engine_set_conn(np, NULL);

    bm_engine_set_conn(e, NULL);
    virConnectClose(conn);
    remove_proc();
    return tap_done();
}
