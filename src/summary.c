#include "summary.h"

#include <stdio.h>
#include <string.h>

#include "size.h"
#include "util.h"

void bm_summary_add_domains(BmHostSummary *s, const BmSnapshot *snap)
{
    for (size_t i = 0; snap && i < snap->n_domains; i++) {
        const BmDomain *d = &snap->domains[i];
        if (!d->active)
            continue;
        s->n_running++;
        if (bm_present(d->max_bytes))
            s->maximum_bytes += d->max_bytes;
        uint64_t r = bm_domain_reclaimed_bytes(d);
        if (bm_present(r))
            s->reclaimed_bytes += r;
    }
}

double bm_summary_overcommit(const BmHostSummary *s)
{
    if (!s->have_host || !bm_present(s->host.mem_total_bytes) || s->host.mem_total_bytes == 0)
        return -1;
    return (double)s->maximum_bytes / (double)s->host.mem_total_bytes;
}

static const char *size_or_dash(uint64_t v, char *buf, size_t n)
{
    return bm_present(v) ? bm_size_format(v, buf, n) : "-";
}

const char *bm_summary_format(const BmHostSummary *s, char *buf, size_t n)
{
    char total[32], avail[32], psi[32] = "-", rec[32], max[32], oc[32] = "-", ksm[96] = "-";
    uint64_t mt = s->have_host ? s->host.mem_total_bytes : BM_ABSENT;
    uint64_t ma = s->have_host ? s->host.mem_available_bytes : BM_ABSENT;
    if (s->have_host && s->host.psi_present)
        snprintf(psi, sizeof(psi), "%.1f%%", s->host.psi_some_avg10);
    double o = bm_summary_overcommit(s);
    if (o >= 0)
        snprintf(oc, sizeof(oc), "%.2f", o);
    if (s->have_ksm) {
        char saved[32];
        if (s->ksm.present)
            snprintf(ksm, sizeof(ksm), "%s, saves %s", bm_ksm_state_name(&s->ksm),
                     size_or_dash(bm_ksm_saved_bytes(&s->ksm), saved, sizeof(saved)));
        else
            snprintf(ksm, sizeof(ksm), "not in this kernel");
    }
    snprintf(buf, n,
             "host: MemTotal %s, MemAvailable %s, PSI some %s, mode %s, reclaimed %s, "
             "overcommit %s (%s in %zu active domain%s), KSM %s",
             size_or_dash(mt, total, sizeof(total)), size_or_dash(ma, avail, sizeof(avail)), psi,
             s->have_mode ? bm_host_mode_name(s->mode) : "-",
             bm_size_format(s->reclaimed_bytes, rec, sizeof(rec)), oc,
             bm_size_format(s->maximum_bytes, max, sizeof(max)), s->n_running,
             s->n_running == 1 ? "" : "s", ksm);
    return buf;
}

static json_object *u64_or_null(uint64_t v)
{
    return bm_present(v) ? json_object_new_uint64(v) : NULL;
}

json_object *bm_summary_json(const BmHostSummary *s)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "mem_total_bytes", s->have_host ? u64_or_null(s->host.mem_total_bytes) : NULL);
    json_object_object_add(o, "mem_available_bytes",
                           s->have_host ? u64_or_null(s->host.mem_available_bytes) : NULL);
    /* a ratio 0..1 as in the metrics (the kernel's avg10 is a percentage) */
    json_object_object_add(o, "psi_some_avg10_ratio", s->have_host && s->host.psi_present
                                                          ? json_object_new_double(s->host.psi_some_avg10 / 100)
                                                          : NULL);
    json_object_object_add(o, "mode", s->have_mode ? json_object_new_string(bm_host_mode_name(s->mode)) : NULL);
    json_object_object_add(o, "mode_reason", s->have_mode ? json_object_new_string(s->mode_reason) : NULL);
    json_object_object_add(o, "active_domains", json_object_new_uint64(s->n_running));
    json_object_object_add(o, "maximum_bytes", json_object_new_uint64(s->maximum_bytes));
    json_object_object_add(o, "reclaimed_bytes", json_object_new_uint64(s->reclaimed_bytes));
    double oc = bm_summary_overcommit(s);
    json_object_object_add(o, "overcommit", oc >= 0 ? json_object_new_double(oc) : NULL);
    json_object *k = NULL;
    if (s->have_ksm) {
        k = json_object_new_object();
        json_object_object_add(k, "present", json_object_new_boolean(s->ksm.present));
        json_object_object_add(k, "state", json_object_new_string(bm_ksm_state_name(&s->ksm)));
        bool p = s->ksm.present;
        json_object_object_add(k, "run", p && s->ksm.run >= 0 ? json_object_new_int(s->ksm.run) : NULL);
        json_object_object_add(k, "pages_sharing", p ? u64_or_null(s->ksm.pages_sharing) : NULL);
        json_object_object_add(k, "pages_shared", p ? u64_or_null(s->ksm.pages_shared) : NULL);
        json_object_object_add(k, "full_scans", p ? u64_or_null(s->ksm.full_scans) : NULL);
        json_object_object_add(k, "saved_bytes", u64_or_null(bm_ksm_saved_bytes(&s->ksm)));
        json_object_object_add(k, "general_profit_bytes",
                               p && s->ksm.has_general_profit
                                   ? json_object_new_int64(s->ksm.general_profit_bytes)
                                   : NULL);
    }
    json_object_object_add(o, "ksm", k);
    return o;
}
