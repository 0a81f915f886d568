/* The detail of the last failure in this thread: library modules return -errno and leave a
 * human-readable reason here; the verb that reports the failure reads it once. */
#pragma once

/* Sets the detail (printf-style). Returns -err so callers can `return bm_error(-EINVAL, ...)`. */
int bm_error(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Puts context before the current detail: "CONTEXT: DETAIL" (context printf-style).
 * Returns err. */
int bm_error_prefix(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The last detail set in this thread, or a generic text for the errno if none was set.
 * The string stays valid until the next bm_error() in this thread. */
const char *bm_error_detail(int err);

/* Forgets the detail. */
void bm_error_clear(void);

/* The kinds of errors counted (balloonmgr_errors_total{kind}, the state file's counters). */
typedef enum {
    BM_ERR_LIBVIRT,
    BM_ERR_APPLY,
    BM_ERR_HOST,
    BM_ERR_STATE,
    BM_ERR_POLICY,
    BM_ERR_PUSH,
    BM_ERR_WEB_CONFIG, /* a web config that could not be (re)loaded or applied */
    BM_ERR_COUNT
} BmErrorKind;

/* Their label values: "libvirt", "apply", "host", "state", "policy", "push", "web_config". */
extern const char *const bm_error_kind_names[BM_ERR_COUNT];
