#define _GNU_SOURCE
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "progress.h"
#include "util.h"

bool bm_log_to_journal(void)
{
    const char *e = getenv("JOURNAL_STREAM");
    if (!e || !*e)
        return false;
    char *end = NULL;
    errno = 0;
    unsigned long long dev = strtoull(e, &end, 10);
    if (errno || end == e || *end != ':')
        return false;
    const char *p = end + 1;
    unsigned long long ino = strtoull(p, &end, 10);
    if (errno || end == p || *end)
        return false;
    struct stat st;
    if (fstat(STDERR_FILENO, &st) < 0)
        return false;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* Writes text (without a final newline) as lines with the prefix, in one fwrite. */
static void emit(int prio, const char *text)
{
    char prefix[8] = "";
    if (bm_log_to_journal())
        snprintf(prefix, sizeof(prefix), "<%d>", prio & LOG_PRIMASK);
    size_t lines = 1;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    size_t n = strlen(text) + lines * (strlen(prefix) + 1) + 1;
    _cleanup_free_ char *out = bm_malloc0(n);
    size_t o = 0;
    const char *line = text;
    for (;;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        o += (size_t)snprintf(out + o, n - o, "%s%.*s\n", prefix, (int)len, line);
        if (!nl || !nl[1])
            break;
        line = nl + 1;
    }
    bm_progress_interrupt();
    fwrite(out, 1, o, stderr);
    fflush(stderr);
}

void bm_log(int prio, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0)
        text = NULL;
    va_end(ap);
    if (text)
        emit(prio, text);
}

void bm_log_text(int prio, const char *text)
{
    if (text && *text)
        emit(prio, text);
}

const char *bm_log_format_change(const char *domain, const BmChange *c, char *buf, size_t n)
{
    char name[512];
    snprintf(buf, n,
             "change domain='%s' direction=%s from_bytes=%" PRIu64 " target_bytes=%" PRIu64
             " reached_bytes=%" PRIu64 " outcome=%s duration_s=%.3f",
             bm_printable(domain, name, sizeof(name)),
             bm_change_direction(c->from_bytes, c->target_bytes), c->from_bytes, c->target_bytes,
             c->reached_bytes, bm_change_outcome_name(c->outcome), c->duration_ns / 1e9);
    return buf;
}

void bm_log_change(const char *domain, const BmChange *c)
{
    char buf[1024];
    bm_log(c->outcome == BM_CHANGE_REACHED ? LOG_NOTICE : LOG_WARNING, "balloonmgr: %s",
           bm_log_format_change(domain, c, buf, sizeof(buf)));
}

void bm_log_mode(BmHostMode from, BmHostMode to, const char *reason)
{
    char r[512];
    bm_log(LOG_NOTICE, "balloonmgr: mode from=%s to=%s reason='%s'", bm_host_mode_name(from),
           bm_host_mode_name(to), bm_printable(reason ? reason : "", r, sizeof(r)));
}
