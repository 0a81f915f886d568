#include "policy-lint.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "policy-eval.h"
#include "size.h"
#include "util.h"

/* Where a size key was written: the section it is in (the line of its header, 0 before any)
 * and its value's position. */
typedef struct {
    unsigned section_line;
    unsigned line, col;
    char key[32];
    char value[64];
} Written;

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* The size keys of text, in file order (the grammar of policy.c's parse_line: "key = value",
 * '#' comments at the start of a line or after white space, "[...]" headers). *ret_n set. */
static Written *scan(const char *text, size_t len, size_t *ret_n)
{
    Written *w = NULL;
    size_t n = 0, cap = 0;
    unsigned line = 0, section = 0;
    for (size_t start = 0; start < len;) {
        const char *s = text + start;
        const char *nl = memchr(s, '\n', len - start);
        size_t l = nl ? (size_t)(nl - s) : len - start;
        start += l + 1;
        line++;
        size_t i = 0;
        while (i < l && is_ws(s[i]))
            i++;
        if (i == l || s[i] == '#')
            continue;
        if (s[i] == '[') {
            section = line;
            continue;
        }
        size_t k = i;
        while (i < l && (isalnum((unsigned char)s[i]) || s[i] == '_'))
            i++;
        size_t k_len = i - k;
        while (i < l && is_ws(s[i]))
            i++;
        if (!k_len || i == l || s[i] != '=')
            continue;
        i++;
        while (i < l && is_ws(s[i]))
            i++;
        size_t v = i, v_end = l;
        for (size_t j = v; j < l; j++)
            if (s[j] == '#' && (j == v || is_ws(s[j - 1]))) {
                v_end = j;
                break;
            }
        while (v_end > v && is_ws(s[v_end - 1]))
            v_end--;
        if (!bm_policy_key_is_size(s + k, k_len) || v_end - v >= sizeof(w->value))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            w = bm_reallocarray(w, cap, sizeof(*w));
        }
        w[n] = (Written){.section_line = section, .line = line, .col = (unsigned)v + 1};
        memcpy(w[n].key, s + k, k_len);
        memcpy(w[n].value, s + v, v_end - v);
        w[n].value[v_end - v] = '\0';
        n++;
    }
    *ret_n = n;
    return w;
}

/* A number without a unit: digits, at most one '.'. */
static bool is_bare_number(const char *v)
{
    bool digit = false, dot = false;
    for (; *v; v++) {
        if (isdigit((unsigned char)*v))
            digit = true;
        else if (*v == '.' && !dot)
            dot = true;
        else
            return false;
    }
    return digit;
}

/* Whether a floor's value v (bytes when parsed) is below the absolute minimum the engine
 * keeps (policy-eval.h: BM_SET_MIN_BYTES, BM_SET_MIN_PERMILLE of the maximum): a percentage
 * under 5%, a size under 128 MiB. */
static bool below_minimum(const char *v, bool parsed, uint64_t bytes)
{
    size_t n = strlen(v);
    if (n && v[n - 1] == '%') {
        char *end = NULL;
        double pct = strtod(v, &end);
        return end == v + n - 1 && pct * 10 < BM_SET_MIN_PERMILLE;
    }
    return parsed && bytes < BM_SET_MIN_BYTES;
}

static const Written *find(const Written *w, size_t n, unsigned section_line, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (w[i].section_line == section_line && strcmp(w[i].key, key) == 0)
            return &w[i];
    return NULL;
}

/* The section whose value of a guest key applies to domain name: the last matching
 * [domain "GLOB"] that sets it, else [guest]. */
static const BmGuestRules *source_of(const BmPolicy *p, const char *name, size_t offset)
{
    const BmGuestRules *src = &p->guest;
    for (size_t i = 0; i < p->n_domains; i++) {
        if ((p->domains[i].set & bm_policy_rule_bit(offset)) && fnmatch(p->domains[i].glob, name, 0) == 0)
            src = &p->domains[i];
    }
    return src;
}

static void check_domains(BmDiags *d, const BmPolicy *p, const Written *w, size_t n,
                          const BmLintHost *host)
{
    static const struct {
        const char *key;
        size_t offset;
        const char *why;
    } guest_sizes[] = {
        {"floor", offsetof(BmGuestRules, floor), "it is never inflated"},
        {"keep_free", offsetof(BmGuestRules, keep_free), "it is never inflated"},
    };
    for (size_t k = 0; k < BM_ARRAY_SIZE(guest_sizes); k++) {
        /* one warning per place in the file, naming the first domain it is absurd for */
        unsigned warned[64];
        size_t n_warned = 0;
        for (size_t i = 0; i < host->n_domains; i++) {
            const BmLintDomain *dom = &host->domains[i];
            const BmGuestRules *src = source_of(p, dom->name, guest_sizes[k].offset);
            const BmAmount *a = (const BmAmount *)((const char *)src + guest_sizes[k].offset);
            if (a->is_percent || a->bytes < dom->max_bytes)
                continue;
            const Written *at = find(w, n, src->line, guest_sizes[k].key);
            unsigned line = at ? at->line : src->line, col = at ? at->col : 1;
            bool seen = false;
            for (size_t j = 0; j < n_warned; j++)
                seen |= warned[j] == line;
            if (seen)
                continue;
            if (n_warned < BM_ARRAY_SIZE(warned))
                warned[n_warned++] = line;
            char v[32], m[32], shown[256];
            bm_size_format(a->bytes, v, sizeof(v));
            bm_size_format(dom->max_bytes, m, sizeof(m));
            bm_diags_add(d, line, col, "warning: %s %s is not below the maximum of domain '%s' (%s): "
                         "%s; a percentage of the maximum fits every domain",
                         guest_sizes[k].key, v, bm_printable(dom->name, shown, sizeof(shown)), m,
                         guest_sizes[k].why);
        }
    }
    if (!bm_present(host->mem_total_bytes))
        return;
    const struct {
        const char *key;
        const BmAmount *a;
    } host_sizes[] = {{"reclaim_below", &p->reclaim_below},
                      {"target_available", &p->target_available},
                      {"release_above", &p->release_above}};
    for (size_t k = 0; k < BM_ARRAY_SIZE(host_sizes); k++) {
        const BmAmount *a = host_sizes[k].a;
        const Written *at = NULL;
        for (size_t i = 0; i < n; i++)
            if (strcmp(w[i].key, host_sizes[k].key) == 0)
                at = &w[i];
        if (!at || a->is_percent || a->bytes < host->mem_total_bytes)
            continue;
        char v[32], t[32];
        bm_size_format(a->bytes, v, sizeof(v));
        bm_size_format(host->mem_total_bytes, t, sizeof(t));
        bm_diags_add(d, at->line, at->col, "warning: %s %s is not below this host's MemTotal of %s",
                     host_sizes[k].key, v, t);
    }
}

size_t bm_policy_lint(const char *text, size_t len, const char *path, const BmPolicy *p,
                      const BmLintHost *host, char **ret_warnings)
{
    BmDiags d = {0};
    size_t n = 0;
    _cleanup_free_ Written *w = text ? scan(text, len, &n) : NULL;
    for (size_t i = 0; i < n; i++) {
        const char *v = w[i].value;
        uint64_t bytes = 0;
        bool parsed = bm_size_parse_plain(v, 1024, &bytes) == 0;
        bool zero = (parsed && bytes == 0) || (*v && strspn(v, "0.%") == strlen(v));
        if (strcmp(w[i].key, "keep_free") == 0 && zero)
            bm_diags_add(&d, w[i].line, w[i].col,
                         "warning: keep_free: '%s' is 0: an inflate may leave the guest no usable "
                         "memory at all (the default is 15%%)", v);
        else if (is_bare_number(v) && parsed && bytes > 0 && bytes < (1u << 20)) {
            char pct[72] = "";
            if (bytes <= 100 * 1024)
                snprintf(pct, sizeof(pct), "'%s%%', ", v);
            bm_diags_add(&d, w[i].line, w[i].col,
                         "warning: %s: '%s' is %s KiB: a bare number is KiB (as in virsh); write "
                         "'%sK' if you meant that, else the unit you meant (%s'%sM')",
                         w[i].key, v, v, v, pct, v);
        } else if (strcmp(w[i].key, "floor") == 0 && below_minimum(v, parsed, bytes)) {
            bm_diags_add(&d, w[i].line, w[i].col,
                         "warning: floor: '%s' is below the absolute minimum, the larger of 128 MiB "
                         "and 5%% of the maximum: no pass aims a guest below that", v);
        }
    }
    if (host)
        check_domains(&d, p, w, n, host);
    size_t count = bm_diags_count(&d);
    *ret_warnings = count ? bm_diags_join(&d, path, true) : NULL;
    bm_diags_clear(&d);
    return count;
}
