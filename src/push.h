/* Getting the exposition out of a timer run: node_exporter's textfile collector and the
 * Pushgateway. */
#pragma once

/* Writes text to DIR/balloonmgr.prom atomically (temporary file in DIR, fsync, rename), so the
 * collector never reads a half-written file. Returns 0 or -errno with the reason. */
int bm_push_textfile(const char *dir, const char *text);

/* Checks a Pushgateway URL before anything is done: an http:// or https:// URL with a host.
 * Returns 0 or -EINVAL with the reason. */
int bm_push_check_url(const char *url);

/* PUTs text to URL/metrics/job/balloonmgr/instance/INSTANCE (libcurl, timeout_s). Returns 0,
 * or -errno with the reason (HTTP status and body, or curl's error). */
int bm_push_gateway(const char *url, const char *instance, const char *text, unsigned timeout_s);
