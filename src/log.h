/* Log lines with their priority, and the records of what the policy loop did. When stderr
 * is the journal (systemd sets JOURNAL_STREAM to the "DEVICE:INODE" of the stream it
 * connected to stdout/stderr; systemd.exec(5)), every line is a journal record sent with
 * sd-journal (sd_journal_send(3)): PRIORITY (`journalctl -p warning` shows only problems),
 * SYSLOG_IDENTIFIER=balloonmgr, a MESSAGE_ID per kind of record (BM_LOG_ID_*) and for a
 * change BALLOONMGR_DOMAIN, _DIRECTION, _OUTCOME, _FROM_BYTES, _TARGET_BYTES,
 * _REACHED_BYTES, _DURATION_S (`journalctl BALLOONMGR_DOMAIN=web1`); for a mode change
 * BALLOONMGR_MODE_FROM, _MODE, _REASON. Should the journal's socket not take it, the line
 * goes to the stream with a "<N>" prefix (sd-daemon(3)). Elsewhere lines are printed as they
 * are. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <syslog.h> /* LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG */

#include "balloon.h"

/* MESSAGE_ID of the journal records (`journalctl MESSAGE_ID=...`): a balloon change that
 * ended, a change of the host's mode, an error (LOG_ERR and worse), the agent's decision for a
 * domain (a change it starts, or why it leaves the domain as it is, when that rule changed). */
#define BM_LOG_ID_CHANGE "3ba2784d5db84fee9b552b0a796039b4"
#define BM_LOG_ID_MODE "8f562104ddb4427b81a1019ee7c29548"
#define BM_LOG_ID_ERROR "08f0feab6db641d4ae9c86b7f29d1225"
#define BM_LOG_ID_DECISION "6c00230db7734be9b69ca3effe535c84"
#include "policy-eval.h"

/* Whether stderr is the journal's stream: $JOURNAL_STREAM is "DEV:INO" and matches fstat() of
 * fd 2. Checked on every call (cheap), so a test can change the environment. */
bool bm_log_to_journal(void);

/* Prints one line (fmt without the newline) on stderr with priority prio (LOG_ERR ...
 * LOG_DEBUG), in one write. Each embedded newline starts a new line with the same prefix. */
void bm_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints text (lines ending in newlines, as the policy parser's error list) with priority
 * prio on every line. */
void bm_log_text(int prio, const char *text);

/* The record of one balloon change that ended, as key=value pairs ("change domain='web1'
 * direction=inflate from_bytes=... target_bytes=... reached_bytes=... outcome=reached
 * duration_s=0.412 uuid=..."): the domain name whole, escaped once with bm_escape_quoted()
 * (a quote in it never ends the value), and the UUID (uuid NULL or "": "-"). Caller frees. */
char *bm_log_format_change(const char *domain, const char *uuid, const char *why, bool vmem,
                           const BmChange *c);

/* Logs that record: LOG_NOTICE when the target was reached, LOG_WARNING otherwise (stalled,
 * timed out, failed). In the journal: fields BALLOONMGR_DOMAIN (as is) and
 * BALLOONMGR_DOMAIN_UUID beside the others. vmem: a virtio-mem change (its sizes the domain's):
 * the record says device=virtio_mem, the journal BALLOONMGR_DEVICE=virtio_mem. */
void bm_log_change(const char *domain, const char *uuid, const char *why, bool vmem,
                   const BmChange *c);

/* Logs a change of the host's mode ("mode from=hold to=reclaim reason='...'") at LOG_NOTICE. */
void bm_log_mode(BmHostMode from, BmHostMode to, const char *reason);

/* The record of the agent's decision for one domain ("decision domain='web1' action=inflate
 * from_bytes=... target_bytes=... why=page-cache reason='...' uuid=..."), escaped as the change
 * record. Caller frees. */
char *bm_log_format_decision(const char *domain, const char *uuid, const char *action,
                             const char *why, uint64_t from_bytes, uint64_t target_bytes,
                             const char *reason);

/* Logs that record at LOG_INFO. In the journal: fields BALLOONMGR_DOMAIN,
 * BALLOONMGR_DOMAIN_UUID, BALLOONMGR_ACTION, BALLOONMGR_WHY, BALLOONMGR_FROM_BYTES,
 * BALLOONMGR_TARGET_BYTES, BALLOONMGR_REASON; the message "web1: inflate from 1 GiB to 400 MiB
 * (page-cache): REASON" or "web1: left as it is (busy-spared): REASON". */
void bm_log_decision(const char *domain, const char *uuid, const char *action, const char *why,
                     uint64_t from_bytes, uint64_t target_bytes, const char *reason);
