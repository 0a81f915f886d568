/* The engine on libvirt's test driver (the demo host, demo/host.xml) under a fake /proc whose
 * host is short of memory: a pass builds one row per domain with its ledger entry and its rules
 * (resolved once per domain per pass), its decisions are applied to the domains of their UUID,
 * the changes are tracked by the engine and their outcomes recorded into the ledger; a new
 * reading after the pass still finds each domain's decision. And the engine on a model of a
 * host made by hand (the host interface, BmHostOps), with domains coming and going between passes and changes in
 * flight across passes: each domain's episode marks stay on its own ledger entry, and the
 * export shows a hot cache while its give-back is in flight. */
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
#include "sim/model.h"
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

/* ---- the engine on a model of a host, by hand: two managed guests whose page cache is hot
 * (tests/integration/test-hotcache.sh), while another run's domains are defined, started,
 * destroyed and undefined between the passes, and a change spans passes ---- */

#define MODEL_DOMS 8
#define GUEST_USED (240 * MiB) /* what each guest uses, all along */
/* UUIDs in another order than the names (the snapshot's and the rows' order) */
#define HOT_UUID "f0000000-0000-4000-8000-000000000001"
#define HOTMAP_UUID "10000000-0000-4000-8000-000000000002"

typedef struct {
    char name[32], uuid[40];
    bool present;
    uint64_t max, actual, target, rd; /* rd: read from its disks, cumulative */
} ModelDom;

/* The simulation's host and clock (tests/sim/model.h) without guests of its own: the domains
 * are the test's, which it moves by hand. */
typedef struct {
    SimHost sim; /* first: the model's ctx is the whole */
    ModelDom d[MODEL_DOMS];
    size_t n;
} ModelHost;

static int cmp_dom_name(const void *a, const void *b)
{
    return strcmp(((const BmDomain *)a)->name, ((const BmDomain *)b)->name);
}

/* The domains present, sorted by name as a snapshot is: each uses GUEST_USED,
 * the rest of its balloon usable (200 MiB of it free), QEMU holds its balloon and 100 MiB. */
static int model_read_domains(void *ctx, const BmXmlCache *cache, BmSnapshot *ret)
{
    ModelHost *h = ctx;
    (void)cache;
    *ret = (BmSnapshot){.taken_real_ns = bm_clock_real_ns(&h->sim.clock), .bulk = true};
    ret->domains = bm_malloc0((h->n + 1) * sizeof(BmDomain));
    for (size_t i = 0; i < h->n; i++) {
        ModelDom *m = &h->d[i];
        if (!m->present)
            continue;
        BmDomain *d = &ret->domains[ret->n_domains];
        uint64_t usable = m->actual - GUEST_USED;
        *d = (BmDomain){.name = bm_strdup(m->name), .state = VIR_DOMAIN_RUNNING, .id = (int)i + 1,
                        .active = true, .max_bytes = m->max, .actual_bytes = m->actual,
                        .available_bytes = m->actual, .usable_bytes = usable,
                        .unused_bytes = usable < 200 * MiB ? usable : 200 * MiB,
                        .disk_caches_bytes = usable > 200 * MiB ? usable - 200 * MiB : 0,
                        .rss_bytes = m->actual + 100 * MiB, .major_faults = 0,
                        .minor_faults = BM_ABSENT, .last_update_s = ret->taken_real_ns / 1000000000ull,
                        .disk_read_bytes = m->rd, .disk_read_reqs = BM_ABSENT,
                        .cpu_time_ns = BM_ABSENT, .balloon_known = true,
                        .starve = BM_STARVE_STATS_ABSENT, .handle = m};
        snprintf(d->uuid, sizeof(d->uuid), "%s", m->uuid);
        d->balloon = (BmBalloonConfig){.present = true, .model = "virtio", .stats_period_s = 1,
                                       .min_guarantee_bytes = BM_ABSENT, .memory_bytes = m->max,
                                       .current_memory_bytes = m->max};
        ret->n_domains++;
    }
    qsort(ret->domains, ret->n_domains, sizeof(BmDomain), cmp_dom_name);
    bm_snapshot_index_uuid(ret);
    return 0;
}

/* The domain of handle when present, or NULL with *ret_r -ENOENT and its reason (a domain
 * destroyed under its change: libvirt's "domain not found"). */
static ModelDom *model_live(void *handle, int *ret_r)
{
    ModelDom *m = handle;
    *ret_r = 0;
    if (m->present)
        return m;
    *ret_r = bm_error(-ENOENT, "domain %s destroyed", m->uuid);
    return NULL;
}

static int model_set_target(void *ctx, void *handle, uint64_t target_bytes)
{
    (void)ctx;
    int r;
    ModelDom *m = model_live(handle, &r);
    if (m)
        m->target = target_bytes;
    return r;
}

static int model_read_live(void *ctx, void *handle, uint64_t *ret_actual, uint64_t *ret_rss)
{
    (void)ctx;
    int r;
    const ModelDom *m = model_live(handle, &r);
    if (m) {
        *ret_actual = m->actual;
        *ret_rss = m->actual + 100 * MiB;
    }
    return r;
}

/* No long job holds the test's domains, and their monitors answer nothing. */
static int model_job_running(void *ctx, const BmDomain *d, const char **ret_what)
{
    (void)ctx, (void)d, (void)ret_what;
    return 0;
}

static int model_no_monitor(void *ctx, const BmDomain *d, BmFeatureReport *ret, char *path, size_t n)
{
    (void)ctx, (void)d, (void)ret, (void)path, (void)n;
    return bm_error(-ENOTSUP, "no monitor");
}

static int model_no_starve(void *ctx, const BmDomain *d, char *path, size_t n, BmStarveStats *ret)
{
    (void)ctx, (void)d, (void)ret, (void)path, (void)n;
    return bm_error(-ENOTSUP, "no monitor");
}

/* The domain called name in h (present or not), or NULL. */
static ModelDom *model_dom(ModelHost *h, const char *name)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->d[i].name, name) == 0)
            return &h->d[i];
    return NULL;
}

/* Domain name defined and started in h (640 MiB, its balloon at max, the first time). A domain
 * stays where it is in the model (the test holds it); a reading sorts them by name. */
static void model_add(ModelHost *h, const char *name, const char *uuid)
{
    ModelDom *m = model_dom(h, name);
    if (!m && h->n < MODEL_DOMS) {
        m = &h->d[h->n++];
        *m = (ModelDom){.max = 640 * MiB, .actual = 640 * MiB, .target = 640 * MiB,
                        .rd = 1000 * MiB};
        snprintf(m->name, sizeof(m->name), "%s", name);
        snprintf(m->uuid, sizeof(m->uuid), "%s", uuid);
    }
    if (m)
        m->present = true;
}

/* Domain name destroyed and undefined. */
static void model_remove(ModelHost *h, const char *name)
{
    ModelDom *m = model_dom(h, name);
    if (m)
        m->present = false;
}

/* 16 GiB, 6 GiB available: below reclaim_below (50%), above half of it (not near OOM) */
static void model_init(ModelHost *h)
{
    *h = (ModelHost){0};
    sim_host_init(&h->sim, 16384 * MiB, 10240 * MiB, 0);
    h->sim.ops.read_domains = model_read_domains;
    h->sim.ops.job_running = model_job_running;
    h->sim.ops.probe = model_no_monitor;
    h->sim.ops.read_starve = model_no_starve;
    h->sim.balloon.set_target = model_set_target;
    h->sim.balloon.read_live = model_read_live;
}

/* The model's time set to at_s seconds. */
static void model_at(ModelHost *h, double at_s)
{
    h->sim.t = at_s;
}

/* The words of decision x of e's last plan (a ring of buffers: a few in one message), "-" for
 * none; those of a plan's host mode. */
static const char *words(BmEngine *e, const BmDecision *x)
{
    static char ring[4][BM_REASON_MAX];
    static unsigned next;
    char *buf = ring[next++ % 4];
    snprintf(buf, BM_REASON_MAX, "-");
    if (x && bm_engine_plan(e))
        bm_reason_format(bm_engine_plan(e), x, buf, BM_REASON_MAX);
    return buf;
}

static const char *host_words(const BmPlan *p)
{
    static char buf[BM_HOST_REASON_MAX];
    bm_host_reason_format(p, buf, sizeof(buf));
    return buf;
}

/* The decision of the domain called name in the engine's last plan, or NULL. */
static const BmDecision *decision_of(BmEngine *e, const char *name)
{
    const BmPlan *p = bm_engine_plan(e);
    for (size_t i = 0; p && i < p->n_decisions; i++)
        if (strcmp(p->decisions[i].name, name) == 0)
            return &p->decisions[i];
    return NULL;
}

/* The value of balloonmgr_domain_page_cache_hot for domain name in the engine's export: 0, 1,
 * or -1 when absent. */
static int cache_hot_exported(BmEngine *e, const char *name)
{
    _cleanup_free_ char *text = bm_engine_render(e, true);
    _cleanup_free_ char *key = bm_asprintf("\nballoonmgr_domain_page_cache_hot{domain=\"%s\"} ", name);
    const char *at = text ? strstr(text, key) : NULL;
    return at ? atoi(at + strlen(key)) : -1;
}

/* A pass of e at at_s (the agent's, every 2 s). */
static void pass_at(BmEngine *e, ModelHost *h, double at_s)
{
    model_at(h, at_s);
    int r = bm_engine_pass(e);
    if (r < 0)
        ok(false, "a pass at %.1f s: %s", at_s, bm_error_detail(r));
}

/* The agent's poll at at_s; when a change ended, the domains read again (its refresh).
 * Returns how many are still in flight. */
static size_t poll_at(BmEngine *e, ModelHost *h, double at_s)
{
    model_at(h, at_s);
    size_t before = bm_engine_in_flight(e), left = bm_engine_poll(e);
    if (left != before && bm_engine_refresh(e) < 0)
        ok(false, "a reading after a change ended at %.1f s", at_s);
    return left;
}

/* Passes 1-3: both inflated; "t-hot" refaults and is given back at once; the inflate of
 * "t-hotmap" is in flight for 5.9 s, across two passes; another run's domains come and go,
 * and a managed domain is destroyed in the middle of its inflate. */
static void churn_first_passes(BmEngine *e, ModelHost *h)
{
    ModelDom *hot = model_dom(h, "t-hot"), *map = model_dom(h, "t-hotmap");
    pass_at(e, h, 0);
    const BmDecision *dh = decision_of(e, "t-hot"), *dm = decision_of(e, "t-hotmap");
    ok(dh && dm && dh->action == BM_ACT_INFLATE && dm->action == BM_ACT_INFLATE,
       "pass 1: both guests inflated (%s; %s)", words(e, dh), words(e, dm));
    hot->actual = hot->target;
    map->actual = (map->max + map->target) / 2;
    is_u64(poll_at(e, h, 1), 1, "  the inflate of t-hot ended, that of t-hotmap goes on");
    model_remove(h, "a-churn1");
    model_add(h, "z-churn2", "00000000-0000-4000-8000-00000000c202");
    model_add(h, "t-churn", "90000000-0000-4000-8000-00000000c203");
    hot->rd += 200 * MiB; /* its cache refaults: its disk reads rise */
    map->rd += 200 * MiB;
    pass_at(e, h, 2);
    dh = decision_of(e, "t-hot"), dm = decision_of(e, "t-hotmap");
    ok(dh && dh->action == BM_ACT_DEFLATE && dh->cause.code == BM_REASON_CACHE_REFAULT &&
           dh->cache_hot, "pass 2: t-hot given back, its cache found hot (%s)", words(e, dh));
    ok(dm && dm->action == BM_ACT_SKIP && dm->cause.code == BM_REASON_IN_FLIGHT,
       "  t-hotmap left alone: its inflate is in flight");
    const BmDecision *dc = decision_of(e, "t-churn");
    ok(dc && dc->action == BM_ACT_INFLATE, "  t-churn, defined and started since, inflated");
    hot->actual = hot->max;
    poll_at(e, h, 2.5);
    model_remove(h, "t-churn"); /* destroyed and undefined in the middle of its inflate */
    model_remove(h, "z-churn2");
    model_add(h, "m-churn3", "a0000000-0000-4000-8000-00000000c204");
    poll_at(e, h, 3);
    map->rd += 200 * MiB;
    pass_at(e, h, 4);
    dh = decision_of(e, "t-hot"), dm = decision_of(e, "t-hotmap");
    ok(dh && dh->cache_hot && dh->action != BM_ACT_INFLATE,
       "pass 3: t-hot's cache still hot, not inflated again (%s)", words(e, dh));
    ok(dm && dm->cause.code == BM_REASON_IN_FLIGHT, "  t-hotmap's inflate still in flight");
    ok(!bm_ledger_find(bm_engine_ledger(e), "90000000-0000-4000-8000-00000000c203"),
       "  the entry of t-churn, gone with its change ended, left the ledger");
}

/* Whether the ledger entry of name has the episode's marks: an inflate from its maximum, its
 * cache found hot at hot_at_s, memory given in the episode. */
static bool marked(BmEngine *e, ModelHost *h, const char *name, double hot_at_s)
{
    ModelDom *m = model_dom(h, name);
    const BmLedgerEntry *en = m ? bm_ledger_find(bm_engine_ledger(e), m->uuid) : NULL;
    return en && en->prev.inflated_from_bytes == m->max &&
           en->prev.cache_hot_s == (h->sim.epoch_ns + (uint64_t)(hot_at_s * 1e9)) / 1000000000ull &&
           en->prev.given_s > 0;
}

/* Whether no entry of the ledger but those of t-hot and t-hotmap has an episode mark. */
static bool marks_only_theirs(BmEngine *e)
{
    const BmLedger *l = bm_engine_ledger(e);
    bool only = true;
    for (size_t i = 0; i < l->n_entries; i++) {
        const BmLedgerEntry *en = l->entries[i];
        if (strcmp(en->uuid, HOT_UUID) == 0 || strcmp(en->uuid, HOTMAP_UUID) == 0)
            continue;
        only &= !en->prev.cache_hot_s && !en->prev.given_s && !en->prev.oom_s &&
                !bm_present(en->prev.inflated_from_bytes);
    }
    return only;
}

/* Passes 4-6: t-hotmap's inflate ended; it refaults and is given back, and that give-back is
 * in flight across a pass too. When it ends (its change record logged, the agent's metrics
 * rendered at once), both caches are hot on the export, as the ledger remembers them. */
static void churn_last_passes(BmEngine *e, ModelHost *h)
{
    ModelDom *map = model_dom(h, "t-hotmap");
    map->actual = map->target;
    is_u64(poll_at(e, h, 5.9), 0, "t-hotmap's inflate ended after 5.9 s");
    map->rd += 200 * MiB;
    model_remove(h, "m-churn3");
    model_add(h, "b-churn4", "50000000-0000-4000-8000-00000000c205");
    pass_at(e, h, 6);
    const BmDecision *dm = decision_of(e, "t-hotmap");
    ok(dm && dm->action == BM_ACT_DEFLATE && dm->cause.code == BM_REASON_CACHE_REFAULT &&
           dm->cache_hot, "pass 4: t-hotmap given back, its cache found hot (%s)", words(e, dm));
    if (dm)
        map->actual = (dm->current_bytes + dm->target_bytes) / 2;
    is_u64(poll_at(e, h, 7), 1, "  half of it given at the next poll");
    model_add(h, "a-churn1", "80000000-0000-4000-8000-00000000c201");
    pass_at(e, h, 8);
    dm = decision_of(e, "t-hotmap");
    ok(dm && dm->cause.code == BM_REASON_IN_FLIGHT && dm->cache_hot,
       "pass 5: t-hotmap's give-back in flight; its decision says its cache is hot (the ledger's mark)");
    map->actual = map->max;
    model_at(h, 8.5);
    is_u64(bm_engine_poll(e), 0, "t-hotmap's give-back ended (why=cache-refault)");
    int hot = cache_hot_exported(e, "t-hot"), hotmap = cache_hot_exported(e, "t-hotmap");
    ok(hot == 1 && hotmap == 1,
       "  the metrics rendered at once: balloonmgr_domain_page_cache_hot 1 for both (t-hot %d, "
       "t-hotmap %d)", hot, hotmap);
    ok(bm_engine_refresh(e) == 0 && cache_hot_exported(e, "t-hot") == 1 &&
           cache_hot_exported(e, "t-hotmap") == 1, "  and after the reading that follows");
    ok(marked(e, h, "t-hot", 2) && marked(e, h, "t-hotmap", 6),
       "  the ledger: each one's inflate, hot cache and give-back on its own entry");
    ok(marks_only_theirs(e), "  no mark on another domain's entry");
    pass_at(e, h, 10);
    const BmDecision *dh = decision_of(e, "t-hot");
    dm = decision_of(e, "t-hotmap");
    ok(dh && dm && dh->cache_hot && dm->cache_hot && dh->action != BM_ACT_INFLATE &&
           dm->action != BM_ACT_INFLATE && cache_hot_exported(e, "t-hot") == 1 &&
           cache_hot_exported(e, "t-hotmap") == 1,
       "pass 6: both caches hot, neither inflated again (%s; %s)", words(e, dh),
       words(e, dm));
}

/* tests/integration/test-hotcache.sh on a real libvirtd whose domains another run defined,
 * started, destroyed and undefined during the agent's passes: the hot caches' marks stay on
 * their domains, and the export shows them while a give-back is still in flight. */
static void churn(void)
{
    _cleanup_(bm_policy_freep) BmPolicy *policy = NULL;
    _cleanup_free_ char *errors = NULL;
    /* as bm_pressure_policy: only this test's domains (t-*) managed */
    int r = bm_policy_parse("[host]\ninterval = 2s\nreclaim_below = 50%\ntarget_available = 60%\n"
                            "release_above = 90%\n\n[guest]\nexclude = yes\n\n"
                            "[domain \"t-*\"]\nexclude = no\n",
                            "churn.policy", &policy, &errors);
    ok(r == 0, "the churn policy parses (%s)", errors ? errors : "ok");
    if (r < 0)
        return;
    ModelHost h;
    model_init(&h);
    model_add(&h, "t-hot", HOT_UUID);
    model_add(&h, "t-hotmap", HOTMAP_UUID);
    model_add(&h, "a-churn1", "80000000-0000-4000-8000-00000000c201");
    BmEngineOptions o = {.host = &h.sim.ops};
    BmEngine *e = bm_engine_new(&o);
    bm_engine_set_policy(e, policy);
    churn_first_passes(e, &h);
    churn_last_passes(e, &h);
    bm_engine_free(e);
    sim_host_clear(&h.sim);
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
    churn();
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
    ok(plan->mode == BM_HOST_RECLAIM, "  the host is reclaiming: %s", host_words(plan));
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
        reached += l->counters.changes[BM_DEV_BALLOON][dir][BM_CHANGE_REACHED];
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
       "an evaluation decides the dry pass's mode: %s", ep ? host_words(ep) : bm_error_detail(r));
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
