#include "summary.h"

#include <stdio.h>
#include <string.h>

#include "json-name.h"
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

/* Whether s has a byte a terminal would act on or that is not UTF-8: a control byte, DEL, a
 * C1 control (U+0080 to U+009F), an invalid sequence. */
static bool needs_escapes(const char *s)
{
    if (bm_utf8_invalid(s, strlen(s)) != SIZE_MAX)
        return true;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (*p == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0))
            return true;
    return false;
}

/* s as one word of a shell, allocated: as is when it has only safe characters; in single
 * quotes (a quote as '\'') when it is printable UTF-8; else as $'...' (bash, ksh, zsh, and
 * POSIX since 2024) with every byte that is not printable ASCII as \xNN, so that what is
 * shown is what is typed and names that very domain. */
static char *shell_word(const char *s)
{
    bool plain = *s != '\0';
    for (const char *p = s; *p; p++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-+:/@%=,", *p))
            plain = false;
    if (plain)
        return bm_strdup(s);
    size_t n = strlen(s), k = 0;
    char *buf = bm_malloc0(n * 4 + 4);
    if (needs_escapes(s)) {
        buf[k++] = '$';
        buf[k++] = '\'';
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
            if (*p == '\'' || *p == '\\') {
                buf[k++] = '\\';
                buf[k++] = (char)*p;
            } else if (*p < 0x20 || *p >= 0x7f) {
                k += (size_t)sprintf(buf + k, "\\x%02x", *p);
            } else {
                buf[k++] = (char)*p;
            }
        }
    } else {
        buf[k++] = '\'';
        for (const char *p = s; *p; p++) {
            if (*p == '\'') {
                memcpy(buf + k, "'\\''", 4);
                k += 4;
            } else {
                buf[k++] = *p;
            }
        }
    }
    buf[k++] = '\'';
    buf[k] = '\0';
    return buf;
}

char *bm_summary_configure_command(const char *name, const char *uri, const char *setting)
{
    _cleanup_free_ char *qname = shell_word(name);
    _cleanup_free_ char *quri = uri ? shell_word(uri) : NULL;
    /* a name that starts with '-' would be taken for an option: after "--" */
    if (name[0] == '-')
        return bm_asprintf("balloonmgr %s%s%sconfigure %s -- %s", uri ? "-c " : "",
                           uri ? quri : "", uri ? " " : "", setting, qname);
    return bm_asprintf("balloonmgr %s%s%sconfigure %s %s", uri ? "-c " : "", uri ? quri : "",
                       uri ? " " : "", qname, setting);
}

char *bm_summary_fpr_command(const char *name, const char *uri)
{
    return bm_summary_configure_command(name, uri, "--free-page-reporting on");
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

json_object *bm_summary_json(const BmHostSummary *s)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "mem_total_bytes", s->have_host ? bm_json_u64_or_null(s->host.mem_total_bytes) : NULL);
    json_object_object_add(o, "mem_available_bytes",
                           s->have_host ? bm_json_u64_or_null(s->host.mem_available_bytes) : NULL);
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
        json_object_object_add(k, "pages_sharing", p ? bm_json_u64_or_null(s->ksm.pages_sharing) : NULL);
        json_object_object_add(k, "pages_shared", p ? bm_json_u64_or_null(s->ksm.pages_shared) : NULL);
        json_object_object_add(k, "full_scans", p ? bm_json_u64_or_null(s->ksm.full_scans) : NULL);
        json_object_object_add(k, "saved_bytes", bm_json_u64_or_null(bm_ksm_saved_bytes(&s->ksm)));
        json_object_object_add(k, "general_profit_bytes",
                               p && s->ksm.has_general_profit
                                   ? json_object_new_int64(s->ksm.general_profit_bytes)
                                   : NULL);
    }
    json_object_object_add(o, "ksm", k);
    return o;
}
