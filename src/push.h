/* Getting the exposition out of a timer run: node_exporter's textfile collector and the
 * Pushgateway. */
#pragma once

/* Writes text to DIR/balloonmgr.prom atomically (temporary file in DIR, fsync, rename), so the
 * collector never reads a half-written file. Returns 0 or -errno with the reason. */
int bm_push_textfile(const char *dir, const char *text);

/* Checks --textfile DIR before the pass: a directory in which balloonmgr.prom is missing or a
 * regular file (never a link or a device: it is replaced). Returns 0 or -EINVAL with the
 * reason. */
int bm_push_check_textfile(const char *dir);

/* Checks a Pushgateway URL before anything is done: an http:// or https:// URL with a host,
 * without a query or fragment (the job path is appended). Returns 0 or -EINVAL with the
 * reason (which does not quote the URL). */
int bm_push_check_url(const char *url);

/* url with the password of its user information replaced by "***" (caller frees), for
 * messages: http://user:***@host/. Works on the text, without parsing it: everything from the
 * first ':' after the scheme to the last '@' is masked, whatever the password holds ('/', '?',
 * '#', '@'). */
char *bm_push_redact_url(const char *url);

/* PUTs text to URL/metrics/job/balloonmgr/instance/INSTANCE (libcurl, timeout_s). Returns 0,
 * or -errno with the reason (HTTP status and body, or curl's error). */
int bm_push_gateway(const char *url, const char *instance, const char *text, unsigned timeout_s);
