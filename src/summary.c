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

bool bm_summary_fpr_would_return(const BmDomain *d, uint64_t backed_free_bytes)
{
    return d->active && d->balloon_known && d->balloon.present &&
           strncmp(d->balloon.model, "virtio", 6) == 0 &&
           d->balloon.free_page_reporting != BM_TRI_ON && !bm_domxml_no_return_reason(&d->balloon) &&
           bm_present(backed_free_bytes) && backed_free_bytes >= BM_SUMMARY_FPR_MIN_BYTES;
}

/* s as one word of a POSIX shell: as is when it has only safe characters, else in single
 * quotes (a quote as '\''). */
static void shell_word(const char *s, char *buf, size_t n)
{
    size_t k = 0;
    bool plain = *s != '\0';
    for (const char *p = s; *p; p++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-+:/@%=,", *p))
            plain = false;
    if (plain || n < 3) {
        snprintf(buf, n, "%s", s);
        return;
    }
    buf[k++] = '\'';
    for (const char *p = s; *p && k + 6 < n; p++) {
        if (*p == '\'') {
            memcpy(buf + k, "'\\''", 4);
            k += 4;
        } else {
            buf[k++] = *p;
        }
    }
    buf[k++] = '\'';
    buf[k] = '\0';
}

const char *bm_summary_configure_command(const char *name, const char *uri, const char *setting,
                                         char *buf, size_t n)
{
    char qname[600], quri[600] = "";
    shell_word(name, qname, sizeof(qname));
    if (uri)
        shell_word(uri, quri, sizeof(quri));
    /* a name that starts with '-' would be taken for an option: after "--" */
    if (name[0] == '-')
        snprintf(buf, n, "balloonmgr %s%s%sconfigure %s -- %s", uri ? "-c " : "", quri, uri ? " " : "",
                 setting, qname);
    else
        snprintf(buf, n, "balloonmgr %s%s%sconfigure %s %s", uri ? "-c " : "", quri, uri ? " " : "",
                 qname, setting);
    return buf;
}

const char *bm_summary_fpr_command(const char *name, const char *uri, char *buf, size_t n)
{
    return bm_summary_configure_command(name, uri, "--free-page-reporting on", buf, n);
}

void bm_summary_add_backed_free(BmHostSummary *s, const BmSnapshot *snap, uint64_t qemu_overhead_bytes)
{
    s->have_backed_free = true;
    s->qemu_overhead_bytes = qemu_overhead_bytes;
    for (size_t i = 0; snap && i < snap->n_domains; i++) {
        const BmDomain *d = &snap->domains[i];
        if (!d->active)
            continue;
        uint64_t b = bm_domain_backed_free_bytes(d, qemu_overhead_bytes);
        if (!bm_present(b)) {
            s->backed_free_unknown++;
            continue;
        }
        s->backed_free_bytes += b;
        if (bm_summary_fpr_would_return(d, b)) {
            s->fpr_backed_free_bytes += b;
            s->n_fpr++;
        }
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
    char backed[128] = "-";
    if (s->have_backed_free && s->backed_free_unknown < s->n_running) {
        char b[32], f[32];
        bm_size_format(s->backed_free_bytes, b, sizeof(b));
        if (s->n_fpr)
            snprintf(backed, sizeof(backed), "%s (%s in %zu domain%s without free page reporting)", b,
                     bm_size_format(s->fpr_backed_free_bytes, f, sizeof(f)), s->n_fpr,
                     s->n_fpr == 1 ? "" : "s");
        else
            snprintf(backed, sizeof(backed), "%s", b);
    }
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
             "backed free %s, overcommit %s (%s in %zu active domain%s), KSM %s",
             size_or_dash(mt, total, sizeof(total)), size_or_dash(ma, avail, sizeof(avail)), psi,
             s->have_mode ? bm_host_mode_name(s->mode) : "-",
             bm_size_format(s->reclaimed_bytes, rec, sizeof(rec)), backed, oc,
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
    bool bf = s->have_backed_free && s->backed_free_unknown < s->n_running;
    json_object_object_add(o, "backed_free_bytes", bf ? json_object_new_uint64(s->backed_free_bytes) : NULL);
    json_object_object_add(o, "backed_free_without_reporting_bytes",
                           bf ? json_object_new_uint64(s->fpr_backed_free_bytes) : NULL);
    json_object_object_add(o, "qemu_overhead_bytes",
                           s->have_backed_free ? json_object_new_uint64(s->qemu_overhead_bytes) : NULL);
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
