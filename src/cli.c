#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "error.h"
#include "log.h"
#include "util.h"

static void vreport(int prio, const char *verb, const char *object, const char *fmt, va_list ap)
{
    char name[512], raw[2048], msg[4 * sizeof(raw)];
    vsnprintf(raw, sizeof(raw), fmt, ap);
    /* one line, whatever the user strings in it hold: control characters as \xNN */
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)raw; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            o += (size_t)snprintf(msg + o, sizeof(msg) - o, "\\x%02x", *p);
        else
            msg[o++] = (char)*p;
    }
    msg[o] = '\0';
    if (verb && object)
        bm_log(prio, "balloonmgr: %s: '%s': %s", verb, bm_printable(object, name, sizeof(name)), msg);
    else if (verb)
        bm_log(prio, "balloonmgr: %s: %s", verb, msg);
    else
        bm_log(prio, "balloonmgr: %s", msg);
}

void bm_report(const char *verb, const char *object, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(strncmp(fmt, "warning: ", 9) == 0 ? LOG_WARNING : LOG_ERR, verb, object, fmt, ap);
    va_end(ap);
}

void bm_reportp(int prio, const char *verb, const char *object, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(prio, verb, object, fmt, ap);
    va_end(ap);
}

void bm_report_lines(int prio, const char *verb, const char *text)
{
    for (const char *line = text; line && *line;) {
        size_t len = strcspn(line, "\n");
        bm_reportp(prio, verb, NULL, "%.*s", (int)len, line);
        line += len + (line[len] == '\n');
    }
}

int bm_report_failure(const char *verb, const char *object, int r)
{
    bm_report(verb, object, "%s", bm_error_detail(r));
    return bm_exit_for(r);
}

int bm_as_failure(int r)
{
    if (r >= 0 || bm_exit_for(r) == BM_EXIT_FAILURE)
        return r;
    return bm_error(-EIO, "%s", bm_error_detail(r));
}

int bm_exit_for(int r)
{
    switch (r) {
    case -ENOENT:
    case -EINVAL:
    case -ERANGE: return BM_EXIT_USAGE;
    case -ENOPROTOOPT:
    case -ETIME: return BM_EXIT_UNMET;
    case -EBUSY: return BM_EXIT_BUSY;
    default: return BM_EXIT_FAILURE;
    }
}

const BmVerb *const bm_verbs[] = {&bm_verb_list, &bm_verb_status, &bm_verb_set,
                                   &bm_verb_verify, &bm_verb_configure, &bm_verb_run,
                                   &bm_verb_policy, &bm_verb_agent, NULL};

const BmOptDef bm_cli_global_options[] = {
    {'c', "connect", 'c', " URI", "libvirt URI (default: $BALLOONMGR_URI, libvirt's)",
     BM_COMPLETE_NONE, NULL},
    {'r', "readonly", BM_OPT_READONLY, NULL, "monitoring only: libvirt's read-only socket",
     BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_PROC("status, run, agent: host memory from DIR, not /proc"),
    BM_OPTDEF_HELP("show this help ('balloonmgr VERB --help' for a verb)"),
    {'V', "version", 'V', NULL, "print the version", BM_COMPLETE_NONE, NULL},
    BM_OPTDEF_END,
};

void bm_cli_getopt_tables(const BmOptDef *defs, const char *prefix, struct option *longs,
                          size_t n_longs, char *shorts, size_t n_shorts)
{
    size_t n = 0, o = (size_t)snprintf(shorts, n_shorts, "%s", prefix);
    for (const BmOptDef *d = defs; d->name && n + 1 < n_longs; d++) {
        int has_arg = !d->arg ? no_argument : d->arg[0] == '[' ? optional_argument
                                                                : required_argument;
        longs[n++] = (struct option){d->name, has_arg, NULL, d->val};
        if (d->short_name && o + 4 < n_shorts)
            o += (size_t)snprintf(shorts + o, n_shorts - o, "%c%s", d->short_name,
                                  has_arg == required_argument ? ":" : "");
    }
    longs[n] = (struct option){0};
}

void bm_cli_print_options(const BmOptDef *defs, int help_column, FILE *f)
{
    for (const BmOptDef *d = defs; d->name; d++) {
        if (!d->help)
            continue; /* an alias */
        char spec[128];
        int w = d->short_name ? snprintf(spec, sizeof(spec), "  -%c, --%s%s", d->short_name,
                                         d->name, d->arg ? d->arg : "")
                              : snprintf(spec, sizeof(spec), "      --%s%s", d->name,
                                         d->arg ? d->arg : "");
        const char *line = d->help;
        bool below = *line == '\n'; /* the text starts below the option */
        if (below)
            fprintf(f, "%s\n", spec);
        else
            fprintf(f, "%s%*s", spec, w + 2 > help_column ? 2 : help_column - w, "");
        for (line += below;; line++) {
            size_t len = strcspn(line, "\n");
            if (below)
                fprintf(f, "%*s", help_column, "");
            fprintf(f, "%.*s\n", (int)len, line);
            below = true;
            line += len;
            if (!*line)
                break;
        }
    }
}

void bm_verb_usage(const BmVerb *v, FILE *f)
{
    fprintf(f, "Usage: balloonmgr %s\n\n%s\n", v->synopsis, v->summary);
    fputs("\nOptions:\n", f);
    bm_cli_print_options(v->options, v->help_column, f);
    if (v->help_after)
        fputs(v->help_after, f);
    /* right after help_after, whose last line is a sentence of its own */
    fputs(v->help_after ? "The full text: balloonmgr(8) (man balloonmgr).\n"
                        : "\nThe full text: balloonmgr(8) (man balloonmgr).\n", f);
}

const BmVerb *bm_verb_find(const char *name)
{
    for (size_t i = 0; bm_verbs[i]; i++)
        if (strcmp(bm_verbs[i]->name, name) == 0)
            return bm_verbs[i];
    return NULL;
}

int bm_cli_bad_option(const BmVerb *v, char **argv, const struct option *longs, int c)
{
    char name[256], shown[256], see[64];
    const char *verb = v ? v->name : NULL;
    snprintf(see, sizeof(see), "see 'balloonmgr %s%s--help'", verb ? verb : "", verb ? " " : "");
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
        /* a short option: getopt names it in optopt */
        if (c == ':')
            return bm_error(-EINVAL, "option '-%c' needs an argument (%s)", optopt, see);
        return bm_error(-EINVAL, "unknown option '-%c' (%s)", isprint(optopt) ? optopt : '?', see);
    }
    size_t len = strcspn(arg + 2, "=");
    size_t n_match = 0, exact = SIZE_MAX;
    char matches[160] = "";
    for (size_t i = 0; longs && longs[i].name; i++) {
        if (strncmp(longs[i].name, arg + 2, len) != 0)
            continue;
        if (strlen(longs[i].name) == len)
            exact = i;
        size_t used = strlen(matches);
        snprintf(matches + used, sizeof(matches) - used, "%s--%s", n_match ? ", " : "",
                 longs[i].name);
        n_match++;
    }
    snprintf(name, sizeof(name), "--%.*s", (int)(len < 200 ? len : 200), arg + 2);
    bm_printable(name, shown, sizeof(shown));
    if (c == ':')
        return bm_error(-EINVAL, "option '%s' needs an argument (%s)", shown, see);
    if (exact == SIZE_MAX && n_match > 1)
        return bm_error(-EINVAL, "option '%s' is ambiguous: %s (%s)", shown, matches, see);
    if (n_match >= 1 && arg[2 + len] == '=')
        return bm_error(-EINVAL, "option '%s' takes no argument (%s)", shown, see);
    return bm_error(-EINVAL, "unknown option '%s' (%s)", shown, see);
}

int bm_cli_getopt(BmGlobal *g, const BmVerb *v, int argc, char **argv)
{
    /* the verb's options and the two global ones after them, for getopt; rebuilt per call */
    static struct option all[64];
    static char all_shorts[64];
    BmOptDef defs[BM_ARRAY_SIZE(all)];
    size_t n = 0;
    bool own_r = false;
    for (; v->options[n].name && n < BM_ARRAY_SIZE(defs) - 3; n++) {
        defs[n] = v->options[n];
        own_r |= defs[n].short_name == 'r';
    }
    defs[n] = bm_cli_global_options[0]; /* --connect */
    defs[n + 1] = bm_cli_global_options[1]; /* --readonly */
    if (own_r)
        defs[n + 1].short_name = 0; /* -r is the verb's */
    defs[n + 2] = (BmOptDef)BM_OPTDEF_END;
    bm_cli_getopt_tables(defs, ":", all, BM_ARRAY_SIZE(all), all_shorts, sizeof(all_shorts));
    opterr = 0;
    for (;;) {
        int c = getopt_long(argc, argv, all_shorts, all, NULL);
        switch (c) {
        case 'c':
            if (!*optarg) {
                bm_error(-EINVAL, "-c '': empty URI (leave -c out for libvirt's default)");
                return '?';
            }
            g->uri = optarg;
            continue;
        case 'r':
            if (own_r)
                return c;
            g->readonly = true;
            continue;
        case BM_OPT_READONLY:
            g->readonly = true;
            continue;
        case '?':
        case ':':
            bm_cli_bad_option(v, argv, all, c);
            return '?'; /* its detail stored */
        default:
            return c;
        }
    }
}

/* A protected argument starts with this byte, which no shell argument from a user has. */
#define PROTECT '\x01'

char **bm_cli_protect_negative(int argc, char **argv)
{
    char **copy = bm_malloc0(((size_t)argc + 1) * sizeof(char *));
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool negative = i > 0 && a[0] == '-' && (isdigit((unsigned char)a[1]) || a[1] == '.');
        copy[i] = negative ? bm_asprintf("%c%s", PROTECT, a) : argv[i];
    }
    return copy;
}

void bm_cli_free_protected(char **copy)
{
    for (size_t i = 0; copy && copy[i]; i++)
        if (copy[i][0] == PROTECT)
            free(copy[i]);
    free(copy);
}

const char *bm_cli_unprotect(const char *arg)
{
    return arg[0] == PROTECT ? arg + 1 : arg;
}

int bm_cli_parse_seconds(const char *s, unsigned max_s, unsigned *ret_s)
{
    char *end = NULL;
    if (!s || !isdigit((unsigned char)s[0]))
        return -EINVAL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v > max_s)
        return -EINVAL;
    *ret_s = (unsigned)v;
    return 0;
}

int bm_cli_writable(const BmGlobal *g, const char *what, const char *hint)
{
    if (!g->readonly)
        return 0;
    return bm_error(-EINVAL, "%s needs a read-write connection (-r/--readonly given)%s%s", what,
                    hint ? "; " : "", hint ? hint : "");
}

int bm_cli_connect(const BmGlobal *g, bool readonly, virConnectPtr *ret)
{
    bm_error_reset();
    return bm_as_failure(bm_conn_open(g->uri, readonly, ret));
}

static int stdout_errno;

void bm_cli_flush_stdout(void)
{
    if (fflush(stdout) != 0 && !stdout_errno)
        stdout_errno = errno;
    if (!ferror(stdout) || stdout_errno)
        return;
    /* a write inside printf failed and its buffer was dropped: a pipe without a reader says
     * POLLERR on its write end */
    struct pollfd p = {.fd = STDOUT_FILENO, .events = POLLOUT};
    if (poll(&p, 1, 0) == 1 && (p.revents & POLLERR))
        stdout_errno = EPIPE;
}

int bm_cli_stdout_errno(void)
{
    return stdout_errno;
}
