/* Snapshots on libvirt's test driver: the per-domain fallback (no bulk balloon stats), shut-off
 * and paused domains, name filters, unknown names, and the libvirt call count. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>

#include "balloon.h"
#include "conn.h"
#include "ledger.h"
#include "state.h"
#include "error.h"
#include "snapshot.h"
#include "route.h"
#include "tap.h"

#define GiB (1024ull * 1024 * 1024)

static virConnectPtr open_demo(void)
{
    char *uri = bm_asprintf("test://%s/demo/host.xml", SOURCE_ROOT);
    virConnectPtr c = NULL;
    int r = bm_conn_open(uri, true, &c);
    ok(r == 0, "open %s (%s)", uri, r < 0 ? bm_error_detail(r) : "ok");
    free(uri);
    return c;
}

/* every domain of the demo host, with its XML */
static void test_all_domains(virConnectPtr conn)
{
    BmSnapshot s;
    int r = bm_snapshot_take(conn, BM_SNAPSHOT_XML, &s);
    ok(r == 0, "snapshot of all domains");
    is_u64(s.n_domains, 7, "seven domains in the demo host");
    is_str(s.domains[0].name, "batch1", "sorted by name: first");
    is_str(s.domains[6].name, "web2", "sorted by name: last");

    const BmDomain *web1 = bm_snapshot_find(&s, "web1");
    ok(web1 && web1->active, "web1 is running");
    is_u64(web1->max_bytes, 4 * GiB, "web1 maximum");
    is_u64(web1->actual_bytes, 3 * GiB, "web1 balloon current");
    is_u64(bm_domain_reclaimed_bytes(web1), 1 * GiB, "web1 reclaimed");
    ok(bm_present(web1->unused_bytes) && bm_present(web1->usable_bytes),
       "web1 guest stats came from the per-domain fallback");
    ok(web1->balloon_known && web1->balloon.present && web1->balloon.stats_period_s == 5,
       "web1 balloon config from the XML: stats period 5");
    ok(web1->error == NULL, "web1 read without error");

    const BmDomain *batch1 = bm_snapshot_find(&s, "batch1");
    ok(batch1 && !batch1->active, "batch1 is shut off");
    is_u64(batch1->max_bytes, 8 * GiB, "batch1 maximum is known while shut off");
    ok(!bm_present(batch1->unused_bytes), "batch1 has no guest stats (absent, not 0)");
    ok(batch1->error == NULL, "a shut-off domain is not an error");

    const BmDomain *build1 = bm_snapshot_find(&s, "build1");
    ok(build1 && build1->active && build1->state == VIR_DOMAIN_PAUSED, "build1 is paused");

    const BmDomain *db1 = bm_snapshot_find(&s, "db1");
    is_u64(db1->balloon.min_guarantee_bytes, 8 * GiB, "db1 min_guarantee from <memtune>");
    ok(db1->balloon.autodeflate == BM_TRI_ON, "db1 autodeflate on");

    const BmDomain *legacy1 = bm_snapshot_find(&s, "legacy1");
    ok(legacy1->balloon_known && !legacy1->balloon.present, "legacy1 has no balloon");
    ok(s.libvirt_calls >= 1 + 7, "fallback made per-domain calls (%u)", s.libvirt_calls);
    bm_snapshot_clear(&s);
}

static void test_active_only(virConnectPtr conn)
{
    BmSnapshot s;
    int r = bm_snapshot_take(conn, BM_SNAPSHOT_ACTIVE_ONLY, &s);
    ok(r == 0 && s.n_domains == 5, "active only: 5 domains (got %zu)", s.n_domains);
    ok(!s.domains[0].balloon_known, "XML not read without BM_SNAPSHOT_XML");
    bm_snapshot_clear(&s);
}

/* status: the named domains out of one reading of all, as the names resolve (name, ID, UUID) */
static void test_pick(virConnectPtr conn)
{
    BmSnapshot s;
    int r = bm_snapshot_take(conn, 0, &s);
    const BmDomain *web2 = r == 0 ? bm_snapshot_find(&s, "web2") : NULL;
    char *names[] = {"web2", "db1", "web2", NULL};
    const BmDomain **picked = NULL;
    size_t n = 0;
    r = web2 ? bm_snapshot_pick(conn, &s, names, &picked, &n) : -1;
    ok(r == 0 && n == 3 && strcmp(picked[0]->name, "db1") == 0 && picked[1] == web2 &&
           picked[2] == web2,
       "picked: the named domains of the reading, by name, one named twice twice");
    ok(!bm_snapshot_find(&s, "no-such-vm") && s.n_domains > 3, "  out of every domain");
    free(picked);
    picked = NULL;
    char uuid[VIR_UUID_STRING_BUFLEN] = "";
    if (web2)
        snprintf(uuid, sizeof(uuid), "%s", web2->uuid);
    char *by_uuid[] = {uuid, NULL};
    r = bm_snapshot_pick(conn, &s, by_uuid, &picked, &n);
    ok(r == 0 && n == 1 && picked[0] == web2, "a domain picked by its UUID");
    free(picked);
    picked = NULL;
    char *bad[] = {"web1", "no-such-vm", NULL};
    bm_error_reset();
    r = bm_snapshot_pick(conn, &s, bad, &picked, &n);
    ok(r == -ENOENT && !picked, "an unknown name picks nothing: -ENOENT");
    is_str(bm_error_detail(r), "'no-such-vm': no domain with this name, ID or UUID",
           "and names the domain");
    bm_snapshot_clear(&s);
    bm_snapshot_clear(NULL);
}


/* A guest reporting what it likes: the test driver's virDomainMemoryStats(), with the tags of
 * shim_tags replaced by shim_vals (in libvirt's units, KiB or counts) while shim_n > 0. */
static int shim_n;
static int shim_tags[16];
static unsigned long long shim_vals[16];

int virDomainMemoryStats(virDomainPtr dom, virDomainMemoryStatPtr stats, unsigned int nr_stats,
                         unsigned int flags)
{
    static int (*real)(virDomainPtr, virDomainMemoryStatPtr, unsigned int, unsigned int);
    if (!real)
        real = (int (*)(virDomainPtr, virDomainMemoryStatPtr, unsigned int, unsigned int))dlsym(
            RTLD_NEXT, "virDomainMemoryStats");
    int n = real(dom, stats, nr_stats, flags);
    for (int k = 0; n >= 0 && k < shim_n; k++) {
        int i = 0;
        while (i < n && stats[i].tag != shim_tags[k])
            i++;
        if (i == n && (unsigned)n < nr_stats)
            n++;
        if (i < n) {
            stats[i].tag = shim_tags[k];
            stats[i].val = shim_vals[k];
        }
    }
    return n;
}

static bool bounded(uint64_t v)
{
    return !bm_present(v) || v <= BM_COUNT_MAX;
}

static void shim_set(int tag, unsigned long long val)
{
    shim_tags[shim_n] = tag;
    shim_vals[shim_n++] = val;
}

/* Issue 31: a guest (or QEMU) reporting a major-fault count >= 2^63, swap-in >= 2^53 KiB, a
 * balloon >= 2^63 bytes: the snapshot takes them as not reported (bounded where they enter),
 * and the state saved from that pass is read back (the next run kept its state). */
static void test_extreme_statistics(virConnectPtr conn)
{
    const unsigned long long vals[] = {1ull << 63, ~0ull, 1ull << 53, (1ull << 53) + 7, ~0ull - 1};
    for (size_t v = 0; v < BM_ARRAY_SIZE(vals); v++) {
        shim_n = 0;
        shim_set(VIR_DOMAIN_MEMORY_STAT_MAJOR_FAULT, vals[v]);
        shim_set(VIR_DOMAIN_MEMORY_STAT_SWAP_IN, vals[v]);
        shim_set(VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON, vals[v]);
        shim_set(VIR_DOMAIN_MEMORY_STAT_AVAILABLE, vals[v]);
        shim_set(VIR_DOMAIN_MEMORY_STAT_USABLE, 0);
        shim_set(VIR_DOMAIN_MEMORY_STAT_RSS, vals[v]);
        shim_set(VIR_DOMAIN_MEMORY_STAT_LAST_UPDATE, vals[v]);
        shim_set(VIR_DOMAIN_MEMORY_STAT_UNUSED, vals[v]);
        shim_set(VIR_DOMAIN_MEMORY_STAT_DISK_CACHES, vals[v]);
        shim_set(VIR_DOMAIN_MEMORY_STAT_SWAP_OUT, vals[v]);
        shim_set(VIR_DOMAIN_MEMORY_STAT_MINOR_FAULT, vals[v]);
        BmSnapshot s;
        int r = bm_snapshot_take(conn, 0, &s);
        const BmDomain *d = r == 0 ? bm_snapshot_find(&s, "web1") : NULL;
        ok(d && bounded(d->major_faults) && bounded(d->swap_in_bytes) &&
               bounded(d->available_bytes) && bounded(d->rss_bytes) && bounded(d->last_update_s) &&
               bounded(d->unused_bytes) && bounded(d->disk_caches_bytes) &&
               bounded(d->swap_out_bytes) && bounded(d->minor_faults) &&
               !bm_present(d->swap_in_bytes) && bm_present(d->major_faults) == (vals[v] < 1ull << 63),
           "a guest reporting %llu: taken as not reported (faults %s)", vals[v],
           d && bm_present(d->major_faults) ? "kept" : "absent");
        ok(d && bounded(d->actual_bytes), "  the balloon too (actual %s)",
           d && bm_present(d->actual_bytes) ? "kept" : "absent or from GetInfo");
        BmLedger l, back;
        bm_ledger_init(&l);
        if (r == 0)
            route_note(&l, &s, NULL, BM_HOST_RECLAIM, 1800000000, 60);
        char *text = bm_state_format(&l, 1800000000);
        r = bm_state_parse(text, &back);
        ok(r == 0 && back.n_entries == l.n_entries && back.n_entries >= 1 &&
               back.entries[0]->have_prev,
           "  the state saved from that pass is read back (%s)", r < 0 ? bm_error_detail(r) : "ok");
        free(text);
        bm_ledger_clear(&back);
        bm_ledger_clear(&l);
        bm_snapshot_clear(&s);
        virDomainPtr dom = virDomainLookupByName(conn, "web1");
        uint64_t actual = 0;
        r = dom ? bm_balloon_read_actual(dom, &actual) : -ENOENT;
        ok(vals[v] * 1024 / 1024 == vals[v] && vals[v] <= BM_COUNT_MAX / 1024
               ? r == 0
               : r == -ERANGE && !strstr(bm_error_detail(r), "18446"),
           "  a change's reading of the balloon refuses it (%s)", r < 0 ? bm_error_detail(r) : "ok");
        if (dom)
            virDomainFree(dom);
    }
    shim_n = 0;
}

/* Issue #32: the disks' reads summed from the bulk record (block.count first), a huge or
 * negative counter leaving the sum absent, other block keys ignored. */
static void param_ull(virTypedParameter *p, const char *key, unsigned long long v)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->field, sizeof(p->field), "%s", key);
    p->type = VIR_TYPED_PARAM_ULLONG;
    p->value.ul = v;
}

static void test_block_reads(void)
{
    virTypedParameter p[8];
    param_ull(&p[0], "block.count", 2);
    param_ull(&p[1], "block.0.name", 7);
    param_ull(&p[2], "block.0.rd.bytes", 1000);
    param_ull(&p[3], "block.0.rd.reqs", 10);
    param_ull(&p[4], "block.1.rd.bytes", 24);
    param_ull(&p[5], "block.1.rd.reqs", 2);
    param_ull(&p[6], "block.1.wr.bytes", 5555);
    param_ull(&p[7], "block.x.rd.bytes", 99);
    BmDomain d;
    bm_snapshot_domain_init(&d);
    bm_snapshot_fill_domain(&d, p, 8);
    ok(d.disk_read_bytes == 1024 && d.disk_read_reqs == 12, "two disks' reads summed (%" PRIu64 " bytes)",
       d.disk_read_bytes);
    bm_snapshot_domain_init(&d);
    bm_snapshot_fill_domain(&d, p + 2, 4);
    ok(!bm_present(d.disk_read_bytes), "without block.count: absent");
    param_ull(&p[4], "block.1.rd.bytes", 1ull << 63);
    bm_snapshot_domain_init(&d);
    bm_snapshot_fill_domain(&d, p, 8);
    ok(!bm_present(d.disk_read_bytes) && d.disk_read_reqs == 12, "a counter past 2^63-1: the sum absent");
    param_ull(&p[4], "block.1.rd.bytes", (1ull << 63) - 1000);
    bm_snapshot_domain_init(&d);
    bm_snapshot_fill_domain(&d, p, 8);
    ok(!bm_present(d.disk_read_bytes), "a sum past 2^63-1: absent");
    /* a domain busy with a job: block.count and no counters (seen in a real run: a sum of 0
     * there, and the next reading's reads jumped by 600 MiB: a false refault) */
    bm_snapshot_domain_init(&d);
    bm_snapshot_fill_domain(&d, p, 2);
    ok(!bm_present(d.disk_read_bytes) && !bm_present(d.disk_read_reqs), "block.count without counters: absent, not 0");
    param_ull(&p[4], "block.1.rd.bytes", 24);
    bm_snapshot_domain_init(&d);
    bm_snapshot_fill_domain(&d, p, 4);
    ok(!bm_present(d.disk_read_bytes), "one disk of two reported: absent");
}

int main(void)
{
    ok(bm_conn_init() == 0, "libvirt initialised");
    _cleanup_(virConnectClosep) virConnectPtr conn = open_demo();
    test_block_reads();
    if (!conn)
        return tap_done();
    test_all_domains(conn);
    test_active_only(conn);
    test_pick(conn);
    test_extreme_statistics(conn);
    return tap_done();
}
