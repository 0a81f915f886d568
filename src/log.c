#define _GNU_SOURCE
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#define SD_JOURNAL_SUPPRESS_LOCATION /* CODE_FILE=log.c says nothing */
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "progress.h"
#include "size.h"
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

/* journald's native socket (sd_journal_sendv() sends there) */
#define JOURNAL_SOCKET "/run/systemd/journal/socket"

/* The message of a line in the journal: without the "balloonmgr: " that SYSLOG_IDENTIFIER says. */
static const char *journal_message(const char *line)
{
    return strncmp(line, "balloonmgr: ", 12) == 0 ? line + 12 : line;
}

/* Sends one record to the journal (sd-journal's native protocol): MESSAGE, PRIORITY,
 * SYSLOG_IDENTIFIER, MESSAGE_ID when message_id, and the n_fields "NAME=value" fields (a NULL
 * one left out). Returns 0 or -errno (no journal socket: the caller writes the line to stderr). */
static int journal_send(int prio, const char *message_id, const char *message,
                        char *const *fields, size_t n_fields)
{
    char prio_field[16], id_field[48];
    _cleanup_free_ char *msg_field = bm_asprintf("MESSAGE=%s", message);
    snprintf(prio_field, sizeof(prio_field), "PRIORITY=%d", prio & LOG_PRIMASK);
    struct iovec iov[8 + 16];
    size_t n = 0;
    iov[n++] = (struct iovec){msg_field, strlen(msg_field)};
    iov[n++] = (struct iovec){prio_field, strlen(prio_field)};
    iov[n++] = (struct iovec){(char *)"SYSLOG_IDENTIFIER=balloonmgr", 28};
    if (message_id) {
        snprintf(id_field, sizeof(id_field), "MESSAGE_ID=%s", message_id);
        iov[n++] = (struct iovec){id_field, strlen(id_field)};
    }
    for (size_t i = 0; i < n_fields && n < BM_ARRAY_SIZE(iov); i++)
        if (fields[i])
            iov[n++] = (struct iovec){fields[i], strlen(fields[i])};
    /* sd-journal drops records silently when journald's socket is missing: look first */
    struct stat st;
    if (stat(JOURNAL_SOCKET, &st) < 0 || !S_ISSOCK(st.st_mode))
        return -ENOENT;
    return sd_journal_sendv(iov, (int)n);
}

/* journal_send() of a record whose fields the caller allocated: frees them, sent or not. */
static int journal_send_fields(int prio, const char *message_id, const char *message, char **fields,
                               size_t n_fields)
{
    int r = journal_send(prio, message_id, message, fields, n_fields);
    for (size_t i = 0; i < n_fields; i++)
        free(fields[i]);
    return r;
}

/* Writes text (without a final newline) as lines: to the journal when stderr is the journal
 * (one record a line; errors with BM_LOG_ID_ERROR), else to stderr, in one fwrite, with the
 * "<N>" prefix when stderr is the journal but its native socket cannot be used. */
static void emit(int prio, const char *text)
{
    char prefix[8] = "";
    bool journal = bm_log_to_journal();
    if (journal) {
        int r = 0;
        for (const char *line = text; *line && r >= 0;) {
            const char *nl = strchr(line, '\n');
            _cleanup_free_ char *one = bm_asprintf("%.*s", (int)(nl ? (size_t)(nl - line) : strlen(line)), line);
            r = journal_send(prio, (prio & LOG_PRIMASK) <= LOG_ERR ? BM_LOG_ID_ERROR : NULL,
                             journal_message(one), NULL, 0);
            line = nl ? nl + 1 : line + strlen(line);
        }
        if (r >= 0)
            return;
        snprintf(prefix, sizeof(prefix), "<%d>", prio & LOG_PRIMASK);
    }
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

char *bm_log_format_change(const char *domain, const char *uuid, const char *why, bool vmem,
                           const BmChange *c)
{
    _cleanup_free_ char *name = bm_escape_quoted(domain);
    _cleanup_free_ char *id = bm_escape_quoted(uuid ? uuid : "");
    return bm_asprintf("change domain='%s' direction=%s from_bytes=%" PRIu64 " target_bytes=%" PRIu64
                       " reached_bytes=%" PRIu64 " outcome=%s duration_s=%.3f why=%s%s uuid=%s",
                       name, bm_change_direction(c->from_bytes, c->target_bytes), c->from_bytes,
                       c->target_bytes, c->reached_bytes, bm_change_outcome_name(c->outcome),
                       c->duration_ns / 1e9, why && *why ? why : "-",
                       vmem ? " device=virtio_mem" : "", id[0] ? id : "-");
}

void bm_log_change(const char *domain, const char *uuid, const char *why, bool vmem,
                   const BmChange *c)
{
    int prio = c->outcome == BM_CHANGE_REACHED ? LOG_NOTICE : LOG_WARNING;
    if (bm_log_to_journal()) {
        /* the identifiers are fields; the message says what happened */
        char from[32], target[32], reached[32];
        const char *dir = bm_change_direction(c->from_bytes, c->target_bytes);
        const char *outcome = bm_change_outcome_name(c->outcome);
        _cleanup_free_ char *name = bm_escape_name(domain);
        _cleanup_free_ char *msg = bm_asprintf(
            "%s: %s from %s to %s: %s %s after %.3f s", name, dir,
            bm_size_format(c->from_bytes, from, sizeof(from)),
            bm_size_format(c->target_bytes, target, sizeof(target)), outcome,
            bm_size_format(c->reached_bytes, reached, sizeof(reached)), c->duration_ns / 1e9);
        char *f[] = {bm_asprintf("BALLOONMGR_DOMAIN=%s", domain),
                     bm_asprintf("BALLOONMGR_DOMAIN_UUID=%s", uuid ? uuid : ""),
                     bm_asprintf("BALLOONMGR_DIRECTION=%s", dir),
                     bm_asprintf("BALLOONMGR_OUTCOME=%s", outcome),
                     bm_asprintf("BALLOONMGR_FROM_BYTES=%" PRIu64, c->from_bytes),
                     bm_asprintf("BALLOONMGR_TARGET_BYTES=%" PRIu64, c->target_bytes),
                     bm_asprintf("BALLOONMGR_REACHED_BYTES=%" PRIu64, c->reached_bytes),
                     bm_asprintf("BALLOONMGR_DURATION_S=%.3f", c->duration_ns / 1e9),
                     bm_asprintf("BALLOONMGR_WHY=%s", why && *why ? why : "-"),
                     vmem ? bm_asprintf("BALLOONMGR_DEVICE=virtio_mem") : NULL};
        if (journal_send_fields(prio, BM_LOG_ID_CHANGE, msg, f, BM_ARRAY_SIZE(f)) >= 0)
            return;
    }
    _cleanup_free_ char *rec = bm_log_format_change(domain, uuid, why, vmem, c);
    bm_log(prio, "balloonmgr: %s", rec);
}

char *bm_log_format_decision(const char *domain, const char *uuid, const char *action,
                             const char *why, uint64_t from_bytes, uint64_t target_bytes,
                             const char *reason)
{
    _cleanup_free_ char *name = bm_escape_quoted(domain);
    _cleanup_free_ char *id = bm_escape_quoted(uuid ? uuid : "");
    _cleanup_free_ char *r = bm_escape_quoted(reason ? reason : "");
    return bm_asprintf("decision domain='%s' action=%s from_bytes=%" PRIu64 " target_bytes=%" PRIu64
                       " why=%s reason='%s' uuid=%s",
                       name, action, from_bytes, target_bytes, why && *why ? why : "-", r,
                       id[0] ? id : "-");
}

void bm_log_decision(const char *domain, const char *uuid, const char *action, const char *why,
                     uint64_t from_bytes, uint64_t target_bytes, const char *reason)
{
    if (bm_log_to_journal()) {
        char from[32], target[32];
        _cleanup_free_ char *name = bm_escape_name(domain);
        _cleanup_free_ char *r = bm_escape_quoted(reason ? reason : "");
        bool moves = from_bytes != target_bytes;
        _cleanup_free_ char *msg =
            moves ? bm_asprintf("%s: %s from %s to %s (%s): %s", name, action,
                                bm_size_format(from_bytes, from, sizeof(from)),
                                bm_size_format(target_bytes, target, sizeof(target)), why, r)
                  : bm_asprintf("%s: left as it is (%s): %s", name, why, r);
        char *f[] = {bm_asprintf("BALLOONMGR_DOMAIN=%s", domain),
                     bm_asprintf("BALLOONMGR_DOMAIN_UUID=%s", uuid ? uuid : ""),
                     bm_asprintf("BALLOONMGR_ACTION=%s", action),
                     bm_asprintf("BALLOONMGR_WHY=%s", why && *why ? why : "-"),
                     bm_asprintf("BALLOONMGR_FROM_BYTES=%" PRIu64, from_bytes),
                     bm_asprintf("BALLOONMGR_TARGET_BYTES=%" PRIu64, target_bytes),
                     bm_asprintf("BALLOONMGR_REASON=%s", reason ? reason : "")};
        if (journal_send_fields(LOG_INFO, BM_LOG_ID_DECISION, msg, f, BM_ARRAY_SIZE(f)) >= 0)
            return;
    }
    _cleanup_free_ char *rec =
        bm_log_format_decision(domain, uuid, action, why, from_bytes, target_bytes, reason);
    bm_log(LOG_INFO, "balloonmgr: %s", rec);
}

void bm_log_mode(BmHostMode from, BmHostMode to, const char *reason)
{
    _cleanup_free_ char *r = bm_escape_quoted(reason ? reason : "");
    if (bm_log_to_journal()) {
        _cleanup_free_ char *msg = bm_asprintf("host mode %s -> %s: %s", bm_host_mode_name(from),
                                               bm_host_mode_name(to), r);
        char *f[] = {bm_asprintf("BALLOONMGR_MODE_FROM=%s", bm_host_mode_name(from)),
                     bm_asprintf("BALLOONMGR_MODE=%s", bm_host_mode_name(to)),
                     bm_asprintf("BALLOONMGR_REASON=%s", reason ? reason : "")};
        if (journal_send_fields(LOG_NOTICE, BM_LOG_ID_MODE, msg, f, BM_ARRAY_SIZE(f)) >= 0)
            return;
    }
    bm_log(LOG_NOTICE, "balloonmgr: mode from=%s to=%s reason='%s'", bm_host_mode_name(from),
           bm_host_mode_name(to), r);
}
